//! A JSON validator for `file`: whether the whole text is one JSON value (RFC 8259, plus
//! the trailing commas file's own parser lets through).

pub fn valid(s: &str) -> bool {
    let b = s.as_bytes();
    let mut i = 0;
    ws(b, &mut i);
    if !value(b, &mut i, 0) {
        return false;
    }
    ws(b, &mut i);
    i == b.len()
}

fn ws(b: &[u8], i: &mut usize) {
    while *i < b.len() && matches!(b[*i], b' ' | b'\t' | b'\n' | b'\r') {
        *i += 1;
    }
}

fn value(b: &[u8], i: &mut usize, depth: usize) -> bool {
    if depth > 512 || *i >= b.len() {
        return false;
    }
    match b[*i] {
        b'{' => {
            *i += 1;
            ws(b, i);
            if b.get(*i) == Some(&b'}') {
                *i += 1;
                return true;
            }
            loop {
                ws(b, i);
                // file's parser accepts a trailing comma.
                if b.get(*i) == Some(&b'}') {
                    *i += 1;
                    return true;
                }
                if !string(b, i) {
                    return false;
                }
                ws(b, i);
                if b.get(*i) != Some(&b':') {
                    return false;
                }
                *i += 1;
                ws(b, i);
                if !value(b, i, depth + 1) {
                    return false;
                }
                ws(b, i);
                match b.get(*i) {
                    Some(b',') => *i += 1,
                    Some(b'}') => {
                        *i += 1;
                        return true;
                    }
                    _ => return false,
                }
            }
        }
        b'[' => {
            *i += 1;
            ws(b, i);
            if b.get(*i) == Some(&b']') {
                *i += 1;
                return true;
            }
            loop {
                ws(b, i);
                if b.get(*i) == Some(&b']') {
                    *i += 1;
                    return true;
                }
                if !value(b, i, depth + 1) {
                    return false;
                }
                ws(b, i);
                match b.get(*i) {
                    Some(b',') => *i += 1,
                    Some(b']') => {
                        *i += 1;
                        return true;
                    }
                    _ => return false,
                }
            }
        }
        b'"' => string(b, i),
        b't' => lit(b, i, b"true"),
        b'f' => lit(b, i, b"false"),
        b'n' => lit(b, i, b"null"),
        _ => number(b, i),
    }
}

fn lit(b: &[u8], i: &mut usize, w: &[u8]) -> bool {
    if b[*i..].starts_with(w) {
        *i += w.len();
        true
    } else {
        false
    }
}

fn string(b: &[u8], i: &mut usize) -> bool {
    if b.get(*i) != Some(&b'"') {
        return false;
    }
    *i += 1;
    while *i < b.len() {
        match b[*i] {
            b'"' => {
                *i += 1;
                return true;
            }
            b'\\' => *i += 2,
            c if c < 0x20 => return false,
            _ => *i += 1,
        }
    }
    false
}

fn number(b: &[u8], i: &mut usize) -> bool {
    let start = *i;
    if b.get(*i) == Some(&b'-') {
        *i += 1;
    }
    let digits = |i: &mut usize| {
        let s = *i;
        while *i < b.len() && b[*i].is_ascii_digit() {
            *i += 1;
        }
        *i > s
    };
    if !digits(i) {
        return false;
    }
    if b.get(*i) == Some(&b'.') {
        *i += 1;
        if !digits(i) {
            return false;
        }
    }
    if matches!(b.get(*i), Some(b'e' | b'E')) {
        *i += 1;
        if matches!(b.get(*i), Some(b'+' | b'-')) {
            *i += 1;
        }
        if !digits(i) {
            return false;
        }
    }
    *i > start
}
