//! hexdump as util-linux's: every display, the default, `-b`, `-c`, `-C`, `-d`, `-o` and `-x`
//! included, is a format string (`-e`, `-f`) run over the input block by block. A format is
//! units of `[ITERATIONS][/BYTES] "TEXT"`; the text's printf-style conversions (`%d`, `%x`,
//! `%c`, `%_c`, `%_p`, `%_u`, `%_a`, `%_A`, ...) each take their bytes from the block, little
//! endian. A block is the most any one format reads; a format that reads less repeats its last
//! unit to fill it. Conversions past the end of the input print as blanks of their width, a
//! conversion cut short by the end reads zeros for the missing bytes, and identical blocks are
//! shown once and then as `*` (unless `-v`).

use crate::util::Out;

#[derive(Clone, Debug)]
enum Conv {
    /// `%_a` (per line) or `%_A` (once, at the end), in base `d`, `o` or `x`.
    Addr { base: char, at_end: bool },
    /// `%d`, `%i`, `%o`, `%u`, `%x`, `%X` of `size` bytes.
    Int { ch: char, size: usize },
    /// `%e`, `%E`, `%f`, `%g`, `%G` of 4 or 8 bytes.
    Float { ch: char, size: usize },
    /// `%c`, `%_c`, `%_p`, `%_u`: one byte.
    Char(char),
}

#[derive(Clone, Debug)]
enum Piece {
    Text(Vec<u8>),
    Conv {
        flags: String,
        width: Option<usize>,
        precision: Option<usize>,
        conv: Conv,
    },
}

#[derive(Clone, Debug)]
struct Unit {
    iterations: usize,
    explicit_iterations: bool,
    pieces: Vec<Piece>,
    /// Bytes one iteration reads.
    bytes: usize,
}

impl Unit {
    fn at_end(&self) -> bool {
        self.pieces.iter().any(|p| {
            matches!(
                p,
                Piece::Conv {
                    conv: Conv::Addr { at_end: true, .. },
                    ..
                }
            )
        })
    }
}

type Format = Vec<Unit>;

fn parse_format(text: &str) -> Result<Format, String> {
    let b = text.as_bytes();
    let mut units = Vec::new();
    let mut i = 0;
    let number = |i: &mut usize| -> Option<usize> {
        let start = *i;
        while *i < b.len() && b[*i].is_ascii_digit() {
            *i += 1;
        }
        text[start..*i].parse().ok()
    };
    loop {
        while i < b.len() && b[i].is_ascii_whitespace() {
            i += 1;
        }
        if i >= b.len() {
            break;
        }
        let iterations = number(&mut i);
        while i < b.len() && b[i].is_ascii_whitespace() {
            i += 1;
        }
        let mut byte_count = None;
        if b.get(i) == Some(&b'/') {
            i += 1;
            while i < b.len() && b[i].is_ascii_whitespace() {
                i += 1;
            }
            byte_count = number(&mut i);
            if byte_count.is_none() {
                return Err(format!("bad byte count for conversion character {text}"));
            }
            while i < b.len() && b[i].is_ascii_whitespace() {
                i += 1;
            }
        }
        if b.get(i) != Some(&b'"') {
            return Err(format!("bad format {{{text}}}"));
        }
        let start = i + 1;
        let mut end = start;
        while end < b.len() && b[end] != b'"' {
            end += if b[end] == b'\\' { 2 } else { 1 };
        }
        if end >= b.len() {
            return Err(format!("bad format {{{text}}}"));
        }
        let pieces = parse_pieces(&text[start..end], byte_count)?;
        let consuming = pieces
            .iter()
            .filter(|p| matches!(p, Piece::Conv { conv, .. } if size_of(conv) > 0))
            .count();
        if byte_count.is_some() && consuming > 1 {
            return Err("byte count with multiple conversion characters".into());
        }
        let bytes = pieces
            .iter()
            .map(|p| match p {
                Piece::Conv { conv, .. } => size_of(conv),
                Piece::Text(_) => 0,
            })
            .sum();
        units.push(Unit {
            iterations: iterations.unwrap_or(1),
            explicit_iterations: iterations.is_some(),
            pieces,
            bytes,
        });
        i = end + 1;
    }
    Ok(units)
}

fn size_of(c: &Conv) -> usize {
    match c {
        Conv::Addr { .. } => 0,
        Conv::Int { size, .. } | Conv::Float { size, .. } => *size,
        Conv::Char(_) => 1,
    }
}

fn parse_pieces(s: &str, byte_count: Option<usize>) -> Result<Vec<Piece>, String> {
    let chars: Vec<char> = s.chars().collect();
    let mut pieces = Vec::new();
    let mut text: Vec<u8> = Vec::new();
    let mut i = 0;
    let flush = |text: &mut Vec<u8>, pieces: &mut Vec<Piece>| {
        if !text.is_empty() {
            pieces.push(Piece::Text(std::mem::take(text)));
        }
    };
    while i < chars.len() {
        let c = chars[i];
        i += 1;
        if c == '\\' && i < chars.len() {
            let e = chars[i];
            i += 1;
            let byte = match e {
                'n' => b'\n',
                't' => b'\t',
                'a' => 7,
                'b' => 8,
                'f' => 12,
                'r' => b'\r',
                'v' => 11,
                '0' => 0,
                '\\' => b'\\',
                '"' => b'"',
                other => {
                    text.push(b'\\');
                    text.extend(other.to_string().as_bytes());
                    continue;
                }
            };
            text.push(byte);
            continue;
        }
        if c != '%' {
            text.extend(c.to_string().as_bytes());
            continue;
        }
        if chars.get(i) == Some(&'%') {
            i += 1;
            text.push(b'%');
            continue;
        }
        let mut flags = String::new();
        while let Some(&f) = chars.get(i).filter(|f| "-+ #0".contains(**f)) {
            flags.push(f);
            i += 1;
        }
        let digits = |i: &mut usize| -> Option<usize> {
            let start = *i;
            while chars.get(*i).is_some_and(char::is_ascii_digit) {
                *i += 1;
            }
            chars[start..*i].iter().collect::<String>().parse().ok()
        };
        let width = digits(&mut i);
        let precision = if chars.get(i) == Some(&'.') {
            i += 1;
            Some(digits(&mut i).unwrap_or(0))
        } else {
            None
        };
        let Some(&ch) = chars.get(i) else {
            return Err(format!("bad conversion character %{}", &s[s.len()..]));
        };
        i += 1;
        let int_size = |default: usize| -> Result<usize, String> {
            match byte_count.unwrap_or(default) {
                n @ (1 | 2 | 4 | 8) => Ok(n),
                n => Err(format!(
                    "bad byte count for conversion character %{ch}: {n}"
                )),
            }
        };
        let conv = match ch {
            '_' => {
                let Some(&k) = chars.get(i) else {
                    return Err("bad conversion character %_".into());
                };
                i += 1;
                match k {
                    'a' | 'A' => {
                        let base = match chars.get(i) {
                            Some(&b @ ('d' | 'o' | 'x')) => {
                                i += 1;
                                b
                            }
                            _ => 'd',
                        };
                        Conv::Addr {
                            base,
                            at_end: k == 'A',
                        }
                    }
                    'c' | 'p' | 'u' => Conv::Char(k),
                    other => return Err(format!("bad conversion character %_{other}")),
                }
            }
            'c' => Conv::Char('C'),
            'd' | 'i' | 'o' | 'u' | 'x' | 'X' => Conv::Int {
                ch,
                size: int_size(4)?,
            },
            'e' | 'E' | 'f' | 'g' | 'G' => match byte_count.unwrap_or(8) {
                n @ (4 | 8) => Conv::Float { ch, size: n },
                n => {
                    return Err(format!(
                        "bad byte count for conversion character %{ch}: {n}"
                    ));
                }
            },
            other => return Err(format!("bad conversion character %{other}")),
        };
        flush(&mut text, &mut pieces);
        pieces.push(Piece::Conv {
            flags,
            width,
            precision,
            conv,
        });
    }
    flush(&mut text, &mut pieces);
    Ok(pieces)
}

/// `body` in a field of `width`, as printf pads: left with `-`, zeros with `0` for numbers.
fn pad(body: String, flags: &str, width: Option<usize>, numeric: bool) -> String {
    let w = width.unwrap_or(0);
    let len = body.chars().count();
    if len >= w {
        return body;
    }
    let fill = w - len;
    if flags.contains('-') {
        body + &" ".repeat(fill)
    } else if numeric && flags.contains('0') {
        let (sign, digits) = match body.chars().next() {
            Some(c @ ('-' | '+' | ' ')) => (c.to_string(), body[1..].to_string()),
            _ => (String::new(), body),
        };
        sign + &"0".repeat(fill) + &digits
    } else {
        " ".repeat(fill) + &body
    }
}

fn int_text(ch: char, value: u64, size: usize, flags: &str, precision: Option<usize>) -> String {
    let signed = || -> i64 {
        let shift = 64 - 8 * size as u32;
        ((value << shift) as i64) >> shift
    };
    let (sign, digits) = match ch {
        'd' | 'i' => {
            let v = signed();
            let sign = if v < 0 {
                "-"
            } else if flags.contains('+') {
                "+"
            } else if flags.contains(' ') {
                " "
            } else {
                ""
            };
            (sign, v.unsigned_abs().to_string())
        }
        'o' => ("", format!("{value:o}")),
        'x' => ("", format!("{value:x}")),
        'X' => ("", format!("{value:X}")),
        _ => ("", value.to_string()),
    };
    let mut digits = match precision {
        Some(p) if digits.len() < p => "0".repeat(p - digits.len()) + &digits,
        _ => digits,
    };
    if flags.contains('#') && value != 0 {
        match ch {
            'o' if !digits.starts_with('0') => digits.insert(0, '0'),
            'x' => digits.insert_str(0, "0x"),
            'X' => digits.insert_str(0, "0X"),
            _ => {}
        }
    }
    format!("{sign}{digits}")
}

fn float_text(ch: char, v: f64, precision: Option<usize>) -> String {
    let p = precision.unwrap_or(6);
    let exp = |v: f64, p: usize, upper: bool| {
        let s = format!("{v:.p$e}");
        let (m, e) = s.split_once('e').unwrap_or((&s, "0"));
        let e: i32 = e.parse().unwrap_or(0);
        let sign = if e < 0 { '-' } else { '+' };
        let t = format!("{m}e{sign}{:02}", e.abs());
        if upper { t.to_uppercase() } else { t }
    };
    match ch {
        'f' => format!("{v:.p$}"),
        'e' | 'E' => exp(v, p, ch == 'E'),
        _ => {
            // %g: the shorter of %e and %f at P significant digits, trailing zeros dropped.
            let p = p.max(1);
            let e = if v == 0.0 {
                0
            } else {
                v.abs().log10().floor() as i32
            };
            if e < -4 || e >= p as i32 {
                let s = exp(v, p - 1, ch == 'G');
                let (m, x) = s.split_once(['e', 'E']).unwrap_or((&s, ""));
                let m = if m.contains('.') {
                    m.trim_end_matches('0').trim_end_matches('.')
                } else {
                    m
                };
                format!("{m}{}{x}", if ch == 'G' { 'E' } else { 'e' })
            } else {
                let decimals = (p as i32 - 1 - e).max(0) as usize;
                let s = format!("{v:.decimals$}");
                if s.contains('.') {
                    s.trim_end_matches('0').trim_end_matches('.').to_string()
                } else {
                    s
                }
            }
        }
    }
}

const ASCII_NAMES: [&str; 32] = [
    "nul", "soh", "stx", "etx", "eot", "enq", "ack", "bel", "bs", "ht", "lf", "vt", "ff", "cr",
    "so", "si", "dle", "dc1", "dc2", "dc3", "dc4", "nak", "syn", "etb", "can", "em", "sub", "esc",
    "fs", "gs", "rs", "us",
];

fn char_text(kind: char, b: u8) -> Vec<u8> {
    let printable = (0x20..0x7f).contains(&b);
    match kind {
        'C' => vec![b],
        'p' => vec![if printable { b } else { b'.' }],
        'u' => match b {
            0..=0x1f => ASCII_NAMES[b as usize].as_bytes().to_vec(),
            0x7f => b"del".to_vec(),
            0x80.. => format!("{b:x}").into_bytes(),
            _ => vec![b],
        },
        _ => match b {
            0 => b"\\0".to_vec(),
            7 => b"\\a".to_vec(),
            8 => b"\\b".to_vec(),
            12 => b"\\f".to_vec(),
            b'\n' => b"\\n".to_vec(),
            b'\r' => b"\\r".to_vec(),
            b'\t' => b"\\t".to_vec(),
            11 => b"\\v".to_vec(),
            _ if printable => vec![b],
            _ => format!("{b:03o}").into_bytes(),
        },
    }
}

/// Writes one conversion of `data` (missing bytes read as zeros; no bytes at all: blanks).
fn convert(out: &mut Vec<u8>, piece: &Piece, data: Option<&[u8]>, offset: u64) {
    let Piece::Conv {
        flags,
        width,
        precision,
        conv,
    } = piece
    else {
        return;
    };
    let Some(data) = data.or(if matches!(conv, Conv::Addr { .. }) {
        Some(&[])
    } else {
        None
    }) else {
        out.extend(" ".repeat(width.unwrap_or(0)).as_bytes());
        return;
    };
    let mut raw = [0u8; 8];
    raw[..data.len().min(8)].copy_from_slice(&data[..data.len().min(8)]);
    let value = u64::from_le_bytes(raw);
    let text = match conv {
        Conv::Addr { base, .. } => {
            let ch = match base {
                'o' => 'o',
                'x' => 'x',
                _ => 'u',
            };
            pad(
                int_text(ch, offset, 8, flags, *precision),
                flags,
                *width,
                true,
            )
        }
        Conv::Int { ch, size } => pad(
            int_text(*ch, value, *size, flags, *precision),
            flags,
            *width,
            true,
        ),
        Conv::Float { ch, size } => {
            let v = if *size == 4 {
                f64::from(f32::from_le_bytes([raw[0], raw[1], raw[2], raw[3]]))
            } else {
                f64::from_le_bytes(raw)
            };
            pad(float_text(*ch, v, *precision), flags, *width, true)
        }
        Conv::Char(kind) => {
            let bytes = char_text(*kind, raw[0]);
            let fill = width.unwrap_or(0).saturating_sub(bytes.len());
            if flags.contains('-') {
                out.extend(&bytes);
                out.extend(" ".repeat(fill).as_bytes());
            } else {
                out.extend(" ".repeat(fill).as_bytes());
                out.extend(&bytes);
            }
            return;
        }
    };
    out.extend(text.as_bytes());
}

/// One format over one block starting at `offset`; `len` of the block's bytes exist.
fn display(out: &mut Vec<u8>, format: &Format, block: &[u8], offset: u64, at_end: bool) {
    let mut pos = 0usize;
    for unit in format {
        if unit.at_end() != at_end {
            pos += unit.iterations * unit.bytes;
            continue;
        }
        for it in 0..unit.iterations {
            let last_round = unit.iterations > 1 && it + 1 == unit.iterations;
            for (k, piece) in unit.pieces.iter().enumerate() {
                match piece {
                    // A repeated unit's last round leaves off the final blank of its text, as
                    // BSD's hexdump does (so `8/1 "%02x "` ends without a space).
                    Piece::Text(t) if last_round && k + 1 == unit.pieces.len() => {
                        let cut = t.last().is_some_and(u8::is_ascii_whitespace);
                        out.extend(&t[..t.len() - usize::from(cut)]);
                    }
                    Piece::Text(t) => out.extend(t),
                    Piece::Conv { conv, .. } => {
                        let size = size_of(conv);
                        let data = if size == 0 || pos < block.len() {
                            Some(&block[pos.min(block.len())..(pos + size).min(block.len())])
                        } else {
                            None
                        };
                        let at = if at_end { offset } else { offset + pos as u64 };
                        convert(out, piece, data, at);
                        pos += size;
                    }
                }
            }
        }
    }
}

/// The block size (the most any format reads), after a format reading less has its last unit
/// repeated to fill the block, when that unit reads bytes and was given no iteration count.
fn fill_blocks(formats: &mut [Format]) -> usize {
    let reads = |f: &Format| f.iter().map(|u| u.iterations * u.bytes).sum::<usize>();
    let block_size = formats.iter().map(reads).max().unwrap_or(0);
    for f in formats.iter_mut() {
        let total = reads(f);
        if let Some(last) = f.last_mut()
            && !last.explicit_iterations
            && last.bytes > 0
            && total < block_size
        {
            last.iterations += (block_size - total) / last.bytes;
        }
    }
    block_size
}

const DEFAULT: &[&str] = &["\"%07.7_Ax\\n\"", "\"%07.7_ax \" 8/2 \"%04x \" \"\\n\""];

fn preset(flag: char) -> Option<Vec<&'static str>> {
    let lines: &[&'static str] = match flag {
        'b' => &["\"%07.7_Ax\\n\"", "\"%07.7_ax \" 16/1 \"%03o \" \"\\n\""],
        'c' => &["\"%07.7_Ax\\n\"", "\"%07.7_ax \" 16/1 \"%3_c \" \"\\n\""],
        'd' => &["\"%07.7_Ax\\n\"", "\"%07.7_ax \" 8/2 \"  %05u \" \"\\n\""],
        'o' => &["\"%07.7_Ax\\n\"", "\"%07.7_ax \" 8/2 \" %06o \" \"\\n\""],
        'x' => &["\"%07.7_Ax\\n\"", "\"%07.7_ax \" 8/2 \"   %04x \" \"\\n\""],
        'C' => &[
            "\"%08.8_Ax\\n\"",
            "\"%08.8_ax  \" 8/1 \"%02x \" \"  \" 8/1 \"%02x \"",
            "\"  |\" 16/1 \"%_p\" \"|\\n\"",
        ],
        _ => return None,
    };
    Some(lines.to_vec())
}

pub fn main(args: Vec<String>) -> i32 {
    let mut formats: Vec<String> = Vec::new();
    let mut files = Vec::new();
    let mut verbose = false;
    let mut length: Option<u64> = None;
    let mut skip: u64 = 0;
    let usage = |msg: &str| {
        eprintln!("hexdump: {msg}\nTry 'hexdump --help' for more information.");
        1
    };
    let number = |v: &str| -> Option<u64> {
        let (digits, mult) = match v.char_indices().last() {
            Some((i, 'b')) => (&v[..i], 512),
            Some((i, 'k')) => (&v[..i], 1024),
            Some((i, 'm')) => (&v[..i], 1 << 20),
            _ => (v, 1),
        };
        let n = if let Some(h) = digits.strip_prefix("0x").or(digits.strip_prefix("0X")) {
            u64::from_str_radix(h, 16).ok()
        } else {
            digits.parse().ok()
        };
        n.map(|n| n * mult)
    };
    let mut i = 1;
    while i < args.len() {
        let a = args[i].clone();
        i += 1;
        if a == "--" {
            files.extend(args[i..].iter().cloned());
            break;
        }
        if !a.starts_with('-') || a == "-" {
            files.push(a);
            continue;
        }
        let long = match a.as_str() {
            "--canonical" => Some('C'),
            "--no-squeezing" => Some('v'),
            "--one-byte-octal" => Some('b'),
            "--one-byte-char" => Some('c'),
            "--two-bytes-decimal" => Some('d'),
            "--two-bytes-octal" => Some('o'),
            "--two-bytes-hex" => Some('x'),
            _ => None,
        };
        let cluster: Vec<char> = match long {
            Some(c) => vec![c],
            None if a.starts_with("--") => {
                let (name, value) = a[2..].split_once('=').unwrap_or((&a[2..], ""));
                let value = if value.is_empty() && i < args.len() {
                    i += 1;
                    args[i - 1].clone()
                } else {
                    value.to_string()
                };
                match name {
                    "format" => formats.push(value),
                    "length" => length = number(&value),
                    "skip" => skip = number(&value).unwrap_or(0),
                    _ => return usage(&format!("unrecognized option '{a}'")),
                }
                continue;
            }
            None => a[1..].chars().collect(),
        };
        for (k, c) in cluster.iter().enumerate() {
            match c {
                'v' => verbose = true,
                'L' => {}
                'b' | 'c' | 'C' | 'd' | 'o' | 'x' => {
                    formats.extend(preset(*c).unwrap_or_default().iter().map(|s| s.to_string()));
                }
                'e' | 'f' | 'n' | 's' => {
                    let rest: String = cluster[k + 1..].iter().collect();
                    let value = if !rest.is_empty() {
                        rest
                    } else if i < args.len() {
                        i += 1;
                        args[i - 1].clone()
                    } else {
                        return usage(&format!("option requires an argument -- '{c}'"));
                    };
                    match c {
                        'e' => formats.push(value),
                        'f' => match std::fs::read_to_string(&value) {
                            Ok(t) => formats.extend(
                                t.lines()
                                    .filter(|l| !l.trim().is_empty() && !l.starts_with('#'))
                                    .map(str::to_string),
                            ),
                            Err(e) => {
                                eprintln!("hexdump: {value}: {}", crate::util::errno_text(&e));
                                return 1;
                            }
                        },
                        'n' => {
                            length = match number(&value) {
                                Some(n) => Some(n),
                                None => {
                                    return usage(&format!("invalid length argument: '{value}'"));
                                }
                            }
                        }
                        _ => {
                            skip = match number(&value) {
                                Some(n) => n,
                                None => return usage(&format!("invalid skip argument: '{value}'")),
                            }
                        }
                    }
                    break;
                }
                other => return usage(&format!("invalid option -- '{other}'")),
            }
        }
    }
    if formats.is_empty() {
        formats = DEFAULT.iter().map(|s| s.to_string()).collect();
    }
    let mut parsed: Vec<Format> = Vec::new();
    for f in &formats {
        match parse_format(f) {
            Ok(u) => parsed.push(u),
            Err(msg) => {
                eprintln!("hexdump: {msg}");
                return 1;
            }
        }
    }
    let block_size = fill_blocks(&mut parsed);
    let mut data = Vec::new();
    let ok = crate::small::read_inputs("hexdump", &files, |d| data.extend_from_slice(d));
    let start = (skip as usize).min(data.len());
    let end = length.map_or(data.len(), |n| (start + n as usize).min(data.len()));
    let data = &data[start..end];
    let mut out = Out::stdout();
    if block_size > 0 {
        let mut prev: Option<&[u8]> = None;
        let mut starred = false;
        for (n, block) in data.chunks(block_size).enumerate() {
            if !verbose && block.len() == block_size && prev == Some(block) {
                if !starred {
                    out.write(b"*\n");
                    starred = true;
                }
                continue;
            }
            starred = false;
            prev = Some(block);
            let offset = skip + (n * block_size) as u64;
            let mut text = Vec::new();
            for f in &parsed {
                display(&mut text, f, block, offset, false);
            }
            out.write(&text);
        }
    }
    if !data.is_empty() {
        let mut text = Vec::new();
        for f in &parsed {
            display(&mut text, f, &[], skip + data.len() as u64, true);
        }
        out.write(&text);
    }
    out.flush();
    if ok { 0 } else { 1 }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(formats: &[&str], data: &[u8]) -> String {
        let mut parsed: Vec<Format> = formats.iter().map(|f| parse_format(f).unwrap()).collect();
        let block = fill_blocks(&mut parsed);
        let mut out = Vec::new();
        for (n, b) in data.chunks(block).enumerate() {
            for f in &parsed {
                display(&mut out, f, b, (n * block) as u64, false);
            }
        }
        String::from_utf8(out).unwrap()
    }

    #[test]
    fn units_repeat_pad_and_drop_the_last_blank() {
        assert_eq!(
            run(&[r#"4/1 "%02x " "|\n""#], b"abcde"),
            "61 62 63 64|\n65         |\n"
        );
        assert_eq!(run(&[r#""%d\n""#], b"ab"), "25185\n");
        assert_eq!(
            run(&[r#"2/2 " %6d" "\n""#], b"\xff\xfe\x01\x00"),
            "   -257      1\n"
        );
        assert_eq!(run(&[r#"4/1 "%3_u""#], b"\x00\x7f\x80a"), "nuldel 80  a");
        assert!(parse_format(r#"1/1 "%d%d""#).is_err());
    }
}
