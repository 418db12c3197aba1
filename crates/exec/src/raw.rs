//! Text that may carry bytes that are not UTF-8.
//!
//! A shell's strings are bytes: `$'\377'`, a Latin-1 file read line by line, a program's output
//! cut in the middle of a character all go through variables, arguments and output unchanged in
//! bash. The shell keeps Rust `String`s, so a byte that is not part of valid UTF-8 travels as one
//! character of a private range, U+10FF80 to U+10FFFF (the byte's value in the low bits), and
//! becomes that byte again wherever the text leaves as bytes: a program's arguments and
//! environment here, the shell's output there.
//!
//! The range's own UTF-8 encodings are read as raw bytes too, so every byte string maps to one
//! `String` and back unchanged. The price is that text which really holds those characters (a
//! private-use plane nobody types) is carried byte by byte: it still comes out as it went in.

use std::borrow::Cow;

const BASE: u32 = 0x10_FF00;

/// The first byte of every character of the private range in UTF-8 (U+10xxxx).
const LEAD: u8 = 0xF4;

/// The character that stands for byte `b` (0x80 and above) when it is not part of UTF-8.
pub fn byte_char(b: u8) -> char {
    debug_assert!(b >= 0x80);
    char::from_u32(BASE | u32::from(b)).expect("U+10FF80..U+10FFFF are characters")
}

/// The byte a character stands for, when it is one of the private range.
pub fn raw_byte(c: char) -> Option<u8> {
    let v = u32::from(c);
    (v > BASE + 0x7F && v <= BASE + 0xFF).then(|| (v - BASE) as u8)
}

/// The byte that `bytes` begin with a character for, when they begin with the UTF-8 of one of
/// the private range: for code that scans a string's bytes.
pub fn raw_byte_at(bytes: &[u8]) -> Option<u8> {
    match bytes {
        [LEAD, 0x8F, third @ (0xBE | 0xBF), last @ 0x80..=0xBF, ..] => {
            Some(if *third == 0xBE { 0x80 } else { 0xC0 } | (last & 0x3F))
        }
        _ => None,
    }
}

/// Whether `s` carries any raw byte.
pub fn has_raw(s: &str) -> bool {
    s.as_bytes().contains(&LEAD) && s.chars().any(|c| raw_byte(c).is_some())
}

/// Bytes as text: valid UTF-8 as its characters, every other byte as the character that
/// stands for it.
pub fn decode(bytes: &[u8]) -> String {
    match std::str::from_utf8(bytes) {
        Ok(s) if !bytes.contains(&LEAD) => s.to_owned(),
        _ => {
            let mut out = String::with_capacity(bytes.len());
            decode_into(bytes, &mut out);
            out
        }
    }
}

/// [`decode`] for a `Vec` it may keep: no copy when the bytes are plain UTF-8.
pub fn decode_vec(bytes: Vec<u8>) -> String {
    if bytes.contains(&LEAD) {
        return decode(&bytes);
    }
    String::from_utf8(bytes).unwrap_or_else(|e| decode(e.as_bytes()))
}

fn decode_into(mut bytes: &[u8], out: &mut String) {
    while !bytes.is_empty() {
        let (valid, bad) = match std::str::from_utf8(bytes) {
            Ok(s) => (s, 0),
            Err(e) => {
                let (head, _) = bytes.split_at(e.valid_up_to());
                // Only a run of bytes that can't start a character follows the valid part,
                // so taking each as a character of its own is what bash's mbrlen loop does.
                let bad = e.error_len().unwrap_or(bytes.len() - e.valid_up_to());
                (std::str::from_utf8(head).expect("valid up to here"), bad)
            }
        };
        for c in valid.chars() {
            if raw_byte(c).is_some() {
                let mut buf = [0; 4];
                out.extend(c.encode_utf8(&mut buf).bytes().map(byte_char));
            } else {
                out.push(c);
            }
        }
        let rest = &bytes[valid.len()..];
        out.extend(rest[..bad].iter().map(|&b| byte_char(b)));
        bytes = &rest[bad..];
    }
}

/// Text as bytes: each raw byte's character as its byte, everything else as UTF-8.
pub fn encode(s: &str) -> Cow<'_, [u8]> {
    if !s.as_bytes().contains(&LEAD) {
        return Cow::Borrowed(s.as_bytes());
    }
    let mut out = Vec::with_capacity(s.len());
    encode_into(s, &mut out);
    Cow::Owned(out)
}

/// [`encode`], appended to `out`.
pub fn encode_into(s: &str, out: &mut Vec<u8>) {
    if !s.as_bytes().contains(&LEAD) {
        out.extend_from_slice(s.as_bytes());
        return;
    }
    for c in s.chars() {
        match raw_byte(c) {
            Some(b) => out.push(b),
            None => {
                let mut buf = [0; 4];
                out.extend_from_slice(c.encode_utf8(&mut buf).as_bytes());
            }
        }
    }
}

/// [`encode`] for a `String` it may keep.
pub fn encode_string(s: String) -> Vec<u8> {
    match encode(&s) {
        Cow::Borrowed(_) => s.into_bytes(),
        Cow::Owned(v) => v,
    }
}

/// How many bytes `s` stands for.
pub fn byte_len(s: &str) -> usize {
    if !s.as_bytes().contains(&LEAD) {
        return s.len();
    }
    s.chars()
        .map(|c| {
            if raw_byte(c).is_some() {
                1
            } else {
                c.len_utf8()
            }
        })
        .sum()
}

/// `s` with raw bytes that together are UTF-8 joined into their characters, as the bytes
/// would read: `$'\xce'$'\xbc'` is one `μ`.
pub fn normalize(s: String) -> String {
    if !has_raw(&s) {
        return s;
    }
    decode(&encode(&s))
}

/// `s.push_str(tail)`, joining a raw byte at the end of `s` with raw bytes at the start of
/// `tail` when together they are UTF-8.
pub fn push_str(s: &mut String, tail: &str) {
    let joins = s.chars().next_back().is_some_and(|c| raw_byte(c).is_some())
        && tail.chars().next().is_some_and(|c| raw_byte(c).is_some());
    s.push_str(tail);
    if joins {
        *s = normalize(std::mem::take(s));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_byte_string_goes_there_and_back() {
        let cases: &[&[u8]] = &[
            b"",
            b"plain",
            "μ中😘".as_bytes(),
            b"\xff",
            b"a\xce",
            b"\xce\xce\xbc",
            b"\xe4\xb8",
            b"\xf0\x9f\x98",
            b"\xe4\xb8\x41",
            "\u{10FF80}\u{10FFFF}x".as_bytes(),
            b"\xf4\x8f\xbe",
            b"\x80\x81\xc0\xc1\xf5\xff",
        ];
        for &b in cases {
            let s = decode(b);
            assert_eq!(&*encode(&s), b, "{b:?} via {s:?}");
            assert_eq!(byte_len(&s), b.len());
            assert_eq!(decode_vec(b.to_vec()), s);
            assert_eq!(encode_string(s.clone()), b);
        }
    }

    #[test]
    fn bytes_outside_utf8_are_one_character_each() {
        assert_eq!(decode(b"z \xe4\xb8").chars().count(), 4);
        assert_eq!(decode(b"\xe4\xb8\x41").chars().count(), 3);
        assert_eq!(decode(b"\xce\xbc").chars().count(), 1);
        let s = decode(b"\xff");
        assert!(has_raw(&s));
        assert_eq!(s.chars().map(raw_byte).collect::<Vec<_>>(), [Some(0xff)]);
        assert!(!has_raw("μ"));
        for b in 0x80..=0xFF {
            let text = byte_char(b).to_string();
            assert_eq!(raw_byte_at(text.as_bytes()), Some(b));
        }
        assert_eq!(raw_byte_at("\u{10FF7F}".as_bytes()), None);
        // The private range's own characters, when they come as UTF-8, are carried as bytes.
        assert_eq!(decode("\u{10FF80}".as_bytes()).chars().count(), 4);
    }

    #[test]
    fn normalize_joins_bytes_that_make_a_character() {
        let split = format!("{}{}", byte_char(0xce), byte_char(0xbc));
        assert_eq!(normalize(split), "μ");
        assert_eq!(normalize("plain".into()), "plain");
        let mut s = format!("a{}", byte_char(0xe4));
        push_str(&mut s, &format!("{}{}", byte_char(0xb8), byte_char(0x89)));
        assert_eq!(s, "a三");
    }
}
