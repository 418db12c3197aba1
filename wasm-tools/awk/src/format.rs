//! printf-style formatting with C's conversions, written for awk values.

use crate::value::Value;

#[derive(Default, Clone, Copy)]
struct Spec {
    minus: bool,
    plus: bool,
    space: bool,
    alt: bool,
    zero: bool,
    width: usize,
    prec: Option<usize>,
}

/// `%e` with C's exponent form (at least two digits, always signed).
pub fn fmt_e(n: f64, prec: usize, upper: bool, alt: bool) -> String {
    let s = format!("{:.*e}", prec, n);
    let (mant, exp) = s.split_once('e').unwrap_or((&s, "0"));
    let exp: i32 = exp.parse().unwrap_or(0);
    let mut out = String::with_capacity(mant.len() + 5);
    out.push_str(mant);
    if alt && prec == 0 {
        out.push('.');
    }
    out.push(if upper { 'E' } else { 'e' });
    out.push(if exp < 0 { '-' } else { '+' });
    let a = exp.unsigned_abs();
    if a < 10 {
        out.push('0');
    }
    out.push_str(&a.to_string());
    out
}

/// `%g`: the shorter of `%e` and `%f` for the given significant digits.
pub fn fmt_g(n: f64, prec: usize, upper: bool, alt: bool) -> String {
    let p = if prec == 0 { 1 } else { prec };
    if n == 0.0 {
        let mut s = if n.is_sign_negative() {
            "-0".to_string()
        } else {
            "0".to_string()
        };
        if alt {
            s.push('.');
            for _ in 1..p {
                s.push('0');
            }
        }
        return s;
    }
    let e = format!("{:.*e}", p - 1, n);
    let x: i32 = e
        .split_once('e')
        .and_then(|(_, x)| x.parse().ok())
        .unwrap_or(0);
    let mut s = if x < -4 || x >= p as i32 {
        fmt_e(n, p - 1, upper, alt)
    } else {
        let fp = (p as i32 - 1 - x).max(0) as usize;
        let mut f = format!("{:.*}", fp, n);
        if alt && fp == 0 {
            f.push('.');
        }
        f
    };
    if !alt {
        let (mant, exp) = match s.find(['e', 'E']) {
            Some(k) => (s[..k].to_string(), s[k..].to_string()),
            None => (s.clone(), String::new()),
        };
        if mant.contains('.') {
            let t = mant.trim_end_matches('0').trim_end_matches('.');
            s = format!("{t}{exp}");
        }
    }
    s
}

fn special(n: f64) -> Option<&'static str> {
    if n.is_nan() {
        Some(if n.is_sign_negative() { "-nan" } else { "+nan" })
    } else if n.is_infinite() {
        Some(if n < 0.0 { "-inf" } else { "+inf" })
    } else {
        None
    }
}

fn pad(out: &mut String, body: &str, spec: &Spec, numeric_zero: bool) {
    let len = body.chars().count();
    if len >= spec.width {
        out.push_str(body);
        return;
    }
    let fill = spec.width - len;
    if spec.minus {
        out.push_str(body);
        out.extend(std::iter::repeat_n(' ', fill));
    } else if numeric_zero {
        // Zeros go after any sign or 0x prefix.
        let b = body.as_bytes();
        let mut k = 0;
        if !b.is_empty() && (b[0] == b'-' || b[0] == b'+' || b[0] == b' ') {
            k = 1;
        }
        if b.len() >= k + 2 && b[k] == b'0' && (b[k + 1] == b'x' || b[k + 1] == b'X') {
            k += 2;
        }
        out.push_str(&body[..k]);
        out.extend(std::iter::repeat_n('0', fill));
        out.push_str(&body[k..]);
    } else {
        out.extend(std::iter::repeat_n(' ', fill));
        out.push_str(body);
    }
}

fn sign_prefix(neg: bool, spec: &Spec) -> &'static str {
    if neg {
        "-"
    } else if spec.plus {
        "+"
    } else if spec.space {
        " "
    } else {
        ""
    }
}

fn fmt_int(out: &mut String, n: f64, spec: &Spec) {
    if let Some(s) = special(n) {
        pad(out, s, spec, false);
        return;
    }
    let t = n.trunc();
    let neg = t < 0.0;
    let mut digits = if t.abs() < 1e18 {
        (t.abs() as u64).to_string()
    } else {
        format!("{:.0}", t.abs())
    };
    if let Some(p) = spec.prec {
        if p == 0 && t == 0.0 {
            digits.clear();
        }
        while digits.len() < p {
            digits.insert(0, '0');
        }
    }
    let body = format!("{}{}", sign_prefix(neg, spec), digits);
    pad(out, &body, spec, spec.zero && spec.prec.is_none());
}

fn fmt_unsigned(out: &mut String, n: f64, spec: &Spec, conv: char) {
    if let Some(s) = special(n) {
        pad(out, s, spec, false);
        return;
    }
    let t = n.trunc();
    let u: u64 = if t < 0.0 {
        (t as i64) as u64
    } else if t >= 18446744073709551616.0 {
        u64::MAX
    } else {
        t as u64
    };
    let mut digits = match conv {
        'o' => format!("{u:o}"),
        'x' => format!("{u:x}"),
        'X' => format!("{u:X}"),
        _ => {
            if t >= 18446744073709551616.0 {
                format!("{t:.0}")
            } else {
                u.to_string()
            }
        }
    };
    if let Some(p) = spec.prec {
        if p == 0 && u == 0 {
            digits.clear();
        }
        while digits.len() < p {
            digits.insert(0, '0');
        }
    }
    if spec.alt {
        match conv {
            'o' if !digits.starts_with('0') => digits.insert(0, '0'),
            'x' if u != 0 => digits.insert_str(0, "0x"),
            'X' if u != 0 => digits.insert_str(0, "0X"),
            _ => {}
        }
    }
    pad(out, &digits, spec, spec.zero && spec.prec.is_none());
}

fn fmt_float(out: &mut String, n: f64, spec: &Spec, conv: char) {
    if let Some(s) = special(n) {
        let s = if conv.is_ascii_uppercase() {
            s.to_ascii_uppercase()
        } else {
            s.to_string()
        };
        pad(out, &s, spec, false);
        return;
    }
    let prec = spec.prec.unwrap_or(6);
    let neg = n.is_sign_negative();
    let a = n.abs();
    let mut body = match conv {
        'f' | 'F' => {
            let mut s = format!("{:.*}", prec, a);
            if spec.alt && prec == 0 {
                s.push('.');
            }
            s
        }
        'e' | 'E' => fmt_e(a, prec, conv == 'E', spec.alt),
        'a' | 'A' => fmt_hexfloat(a, spec.prec, conv == 'A'),
        _ => fmt_g(a, prec, conv == 'G', spec.alt),
    };
    body.insert_str(0, sign_prefix(neg, spec));
    pad(out, &body, spec, spec.zero);
}

fn fmt_hexfloat(a: f64, prec: Option<usize>, upper: bool) -> String {
    let s = if a == 0.0 {
        "0x0p+0".to_string()
    } else {
        let bits = a.to_bits();
        let exp = ((bits >> 52) & 0x7ff) as i64;
        let mant = bits & ((1u64 << 52) - 1);
        let (lead, e) = if exp == 0 {
            (0, -1022)
        } else {
            (1, exp - 1023)
        };
        let mut hex = format!("{mant:013x}");
        match prec {
            Some(p) if p < 13 => hex.truncate(p),
            _ => {
                while hex.ends_with('0') {
                    hex.pop();
                }
            }
        }
        if hex.is_empty() {
            format!("0x{lead}p{e:+}")
        } else {
            format!("0x{lead}.{hex}p{e:+}")
        }
    };
    if upper { s.to_ascii_uppercase() } else { s }
}

/// Formats one number with a CONVFMT/OFMT-style format.
pub fn sprintf_num(fmt: &str, n: f64) -> String {
    match sprintf(fmt, &[Value::Num(n)], "%.6g") {
        Ok(s) => s,
        Err(_) => fmt_g(n, 6, false, false),
    }
}

pub struct FormatError {
    pub msg: String,
}

/// Converts a value to a string for `%s`, using CONVFMT for non-integral numbers.
pub fn value_str(v: &Value, convfmt: &str) -> String {
    match v {
        Value::Uninit => String::new(),
        Value::Num(n) => crate::value::num_to_string(*n, convfmt),
        Value::Str(s) | Value::StrNum(s) => s.to_string(),
    }
}

pub fn sprintf(fmt: &str, args: &[Value], convfmt: &str) -> Result<String, FormatError> {
    let mut out = String::with_capacity(fmt.len() + 16);
    let chars: Vec<char> = fmt.chars().collect();
    let mut i = 0;
    let mut argi = 0;
    let mut next_arg = |pct: usize| -> Result<&Value, FormatError> {
        if argi < args.len() {
            argi += 1;
            Ok(&args[argi - 1])
        } else {
            let caret: String = " ".repeat(pct + 1);
            Err(FormatError {
                msg: format!(
                    "fatal: not enough arguments to satisfy format string\n\t`{fmt}'\n\t{caret}^ ran out for this one"
                ),
            })
        }
    };
    while i < chars.len() {
        let c = chars[i];
        if c != '%' {
            out.push(c);
            i += 1;
            continue;
        }
        let pct = i;
        i += 1;
        let mut spec = Spec::default();
        while i < chars.len() {
            match chars[i] {
                '-' => spec.minus = true,
                '+' => spec.plus = true,
                ' ' => spec.space = true,
                '#' => spec.alt = true,
                '0' => spec.zero = true,
                _ => break,
            }
            i += 1;
        }
        if i < chars.len() && chars[i] == '*' {
            i += 1;
            let w = next_arg(pct)?.to_num();
            if w < 0.0 {
                spec.minus = true;
            }
            spec.width = w.abs().min(1e6) as usize;
        } else {
            let mut w = 0usize;
            while i < chars.len() && chars[i].is_ascii_digit() {
                w = (w * 10 + chars[i].to_digit(10).unwrap_or(0) as usize).min(1_000_000);
                i += 1;
            }
            spec.width = w;
        }
        if i < chars.len() && chars[i] == '.' {
            i += 1;
            if i < chars.len() && chars[i] == '*' {
                i += 1;
                let p = next_arg(pct)?.to_num();
                spec.prec = if p < 0.0 {
                    None
                } else {
                    Some(p.min(1e6) as usize)
                };
            } else {
                let mut p = 0usize;
                while i < chars.len() && chars[i].is_ascii_digit() {
                    p = (p * 10 + chars[i].to_digit(10).unwrap_or(0) as usize).min(1_000_000);
                    i += 1;
                }
                spec.prec = Some(p);
            }
        }
        // Length modifiers from C mean nothing here.
        while i < chars.len() && matches!(chars[i], 'h' | 'l' | 'L' | 'q' | 'j' | 'z' | 't') {
            i += 1;
        }
        let Some(&conv) = chars.get(i) else {
            // A lone trailing '%' is printed as is.
            out.extend(&chars[pct..]);
            break;
        };
        i += 1;
        match conv {
            '%' => out.push('%'),
            'c' => {
                let v = next_arg(pct)?;
                let s = match v.numeric().filter(|_| !matches!(v, Value::Str(_))) {
                    Some(n) => {
                        let code = n as i64;
                        let ch = if (0..256).contains(&code) && code >= 128 {
                            char::from_u32(code as u32).unwrap_or('?')
                        } else {
                            char::from_u32(code as u32)
                                .unwrap_or(crate::value::byte_char(code as u8))
                        };
                        ch.to_string()
                    }
                    None => {
                        let s = value_str(v, convfmt);
                        s.chars().next().map(|c| c.to_string()).unwrap_or_default()
                    }
                };
                pad(&mut out, &s, &spec, false);
            }
            's' => {
                let v = next_arg(pct)?;
                let s = value_str(v, convfmt);
                let s = match spec.prec {
                    Some(p) => s.chars().take(p).collect(),
                    None => s,
                };
                pad(&mut out, &s, &spec, false);
            }
            'd' | 'i' => {
                let n = next_arg(pct)?.to_num();
                fmt_int(&mut out, n, &spec);
            }
            'o' | 'x' | 'X' | 'u' => {
                let n = next_arg(pct)?.to_num();
                fmt_unsigned(&mut out, n, &spec, conv);
            }
            'e' | 'E' | 'f' | 'F' | 'g' | 'G' | 'a' | 'A' => {
                let n = next_arg(pct)?.to_num();
                fmt_float(&mut out, n, &spec, conv);
            }
            _ => {
                // Unknown conversions are copied through, as gawk does.
                out.extend(&chars[pct..i]);
            }
        }
    }
    Ok(out)
}
