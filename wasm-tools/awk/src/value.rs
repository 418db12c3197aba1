//! Values, the string/number conversions, and the lossless mapping between bytes and `str`.
//!
//! Text is kept as Rust strings so the regex engine and character counting work directly.
//! Bytes that are not valid UTF-8 are mapped one-to-one onto code points U+10FF80..=U+10FFFF
//! (private use, never seen in real text) and mapped back on output, so nothing is lost.

use std::rc::Rc;

const BYTE_BASE: u32 = 0x10FF00;

/// The char standing for `b`: itself when ASCII, otherwise its private-use stand-in.
pub fn byte_char(b: u8) -> char {
    if b < 0x80 {
        b as char
    } else {
        char::from_u32(BYTE_BASE + b as u32).unwrap_or('?')
    }
}

/// Decodes bytes, mapping each byte of an invalid sequence to its stand-in.
pub fn decode(bytes: &[u8]) -> String {
    match std::str::from_utf8(bytes) {
        Ok(s) => s.to_string(),
        Err(_) => decode_slow(bytes),
    }
}

fn decode_slow(mut bytes: &[u8]) -> String {
    let mut out = String::with_capacity(bytes.len() + 8);
    loop {
        match std::str::from_utf8(bytes) {
            Ok(s) => {
                out.push_str(s);
                return out;
            }
            Err(e) => {
                let good = e.valid_up_to();
                // SAFETY-free: from_utf8 already validated this prefix.
                out.push_str(std::str::from_utf8(&bytes[..good]).unwrap_or(""));
                let bad = e.error_len().unwrap_or(bytes.len() - good);
                for &b in &bytes[good..good + bad] {
                    out.push(byte_char(b));
                }
                bytes = &bytes[good + bad..];
            }
        }
    }
}

/// Appends the bytes `s` stands for.
pub fn encode_into(s: &str, out: &mut Vec<u8>) {
    // The stand-ins all start with byte 0xF4; text without it needs no translation.
    if !s.as_bytes().contains(&0xF4) {
        out.extend_from_slice(s.as_bytes());
        return;
    }
    for c in s.chars() {
        let u = c as u32;
        if (BYTE_BASE + 0x80..=BYTE_BASE + 0xFF).contains(&u) {
            out.push((u - BYTE_BASE) as u8);
        } else {
            let mut buf = [0u8; 4];
            out.extend_from_slice(c.encode_utf8(&mut buf).as_bytes());
        }
    }
}

#[derive(Debug, Clone, Default)]
pub enum Value {
    #[default]
    Uninit,
    Num(f64),
    Str(Rc<str>),
    /// Text from input (fields, getline, ARGV, ENVIRON, -v): a number if it looks like one.
    StrNum(Rc<str>),
}

impl Value {
    pub fn from_string(s: String) -> Value {
        Value::Str(Rc::from(s))
    }

    pub fn strnum(s: &str) -> Value {
        Value::StrNum(Rc::from(s))
    }

    pub fn to_num(&self) -> f64 {
        match self {
            Value::Uninit => 0.0,
            Value::Num(n) => *n,
            Value::Str(s) | Value::StrNum(s) => str_to_num(s),
        }
    }

    pub fn truthy(&self) -> bool {
        match self {
            Value::Uninit => false,
            Value::Num(n) => *n != 0.0,
            Value::Str(s) => !s.is_empty(),
            Value::StrNum(s) => match looks_numeric(s) {
                Some(n) => n != 0.0,
                None => !s.is_empty(),
            },
        }
    }

    /// Whether comparisons treat this value as a number.
    pub fn numeric(&self) -> Option<f64> {
        match self {
            Value::Uninit => Some(0.0),
            Value::Num(n) => Some(*n),
            Value::Str(_) => None,
            Value::StrNum(s) => looks_numeric(s),
        }
    }
}

fn skip_ws(b: &[u8], mut i: usize) -> usize {
    while i < b.len() && matches!(b[i], b' ' | b'\t' | b'\n' | b'\r' | b'\x0b' | b'\x0c') {
        i += 1;
    }
    i
}

/// Parses the longest numeric prefix the way gawk does (decimal only; `+inf`/`-nan` need the
/// sign). Returns the value and the index just past the number (0 if there is none).
fn parse_prefix(s: &str) -> (f64, usize) {
    let b = s.as_bytes();
    let mut i = skip_ws(b, 0);
    let start = i;
    if i < b.len() && (b[i] == b'+' || b[i] == b'-') {
        let neg = b[i] == b'-';
        i += 1;
        if b.len() >= i + 3 {
            let w = &b[i..i + 3];
            let special = if w.eq_ignore_ascii_case(b"inf") {
                Some(f64::INFINITY)
            } else if w.eq_ignore_ascii_case(b"nan") {
                Some(f64::NAN)
            } else {
                None
            };
            if let Some(v) = special {
                let end = i + 3;
                if skip_ws(b, end) == b.len() {
                    let v = if neg { -v } else { v };
                    return (v, end);
                }
                return (0.0, 0);
            }
        }
    }
    let digits_start = i;
    while i < b.len() && b[i].is_ascii_digit() {
        i += 1;
    }
    let mut nd = i - digits_start;
    if i < b.len() && b[i] == b'.' {
        i += 1;
        let f = i;
        while i < b.len() && b[i].is_ascii_digit() {
            i += 1;
        }
        nd += i - f;
    }
    if nd == 0 {
        return (0.0, 0);
    }
    if i < b.len() && (b[i] == b'e' || b[i] == b'E') {
        let mut j = i + 1;
        if j < b.len() && (b[j] == b'+' || b[j] == b'-') {
            j += 1;
        }
        if j < b.len() && b[j].is_ascii_digit() {
            while j < b.len() && b[j].is_ascii_digit() {
                j += 1;
            }
            i = j;
        }
    }
    let v = s[start..i].parse::<f64>().unwrap_or(0.0);
    (v, i)
}

pub fn str_to_num(s: &str) -> f64 {
    // Fast path for plain small integers, the common case for fields.
    let b = s.as_bytes();
    if !b.is_empty() && b.len() <= 15 && b.iter().all(|c| c.is_ascii_digit()) {
        let mut n: u64 = 0;
        for &c in b {
            n = n * 10 + (c - b'0') as u64;
        }
        return n as f64;
    }
    parse_prefix(s).0
}

/// The number a string stands for when the whole of it (give or take surrounding blanks) is
/// numeric, which is what makes input text compare as a number.
pub fn looks_numeric(s: &str) -> Option<f64> {
    let (v, end) = parse_prefix(s);
    if end == 0 {
        return None;
    }
    if skip_ws(s.as_bytes(), end) == s.len() {
        Some(v)
    } else {
        None
    }
}

/// Integral values print as integers; others through the given format (CONVFMT or OFMT).
pub fn num_to_string(n: f64, fmt: &str) -> String {
    if n.is_nan() {
        return if n.is_sign_negative() { "-nan" } else { "+nan" }.to_string();
    }
    if n.is_infinite() {
        return if n < 0.0 { "-inf" } else { "+inf" }.to_string();
    }
    if n == n.trunc() {
        if n.abs() < 1e15 {
            return (n as i64).to_string();
        }
        return format!("{n:.0}");
    }
    if fmt == "%.6g" {
        return crate::format::fmt_g(n, 6, false, false);
    }
    crate::format::sprintf_num(fmt, n)
}
