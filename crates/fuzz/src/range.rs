//! `range`: the artifact download's `Range` header (`GET /artifacts/...`), against a model of
//! the one form the service serves (a single `bytes=` range, RFC 9110 section 14.1.2).

use arbitrary::{Arbitrary, Unstructured};
use wasmsand_server::fuzzing;

#[derive(Debug, Arbitrary)]
struct Input {
    len: u64,
    small_len: u8,
    use_small: bool,
    header: Vec<u8>,
}

/// What the model expects for a header of plain ASCII.
#[derive(Debug, PartialEq)]
enum Expect {
    Full,
    Part(u64, u64),
    Unsatisfiable,
    /// Forms the model does not decide (odd whitespace, signs): only the invariants hold.
    Unknown,
}

fn digits(s: &str) -> Option<u64> {
    if s.is_empty() || !s.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    s.parse().ok()
}

fn model(h: &str, len: u64) -> Expect {
    // Range units are case-insensitive (RFC 9110 section 14.1).
    let Some(spec) = h
        .get(..6)
        .filter(|unit| unit.eq_ignore_ascii_case("bytes="))
        .map(|_| &h[6..])
    else {
        return Expect::Full;
    };
    if spec.contains(',') {
        return Expect::Unsatisfiable;
    }
    if spec.bytes().any(|b| b.is_ascii_whitespace()) {
        return Expect::Unknown;
    }
    let Some((a, b)) = spec.split_once('-') else {
        return Expect::Full;
    };
    match (a.is_empty(), digits(a), b.is_empty(), digits(b)) {
        // `bytes=-N`: the last N bytes.
        (true, _, false, Some(n)) => {
            if n == 0 || len == 0 {
                Expect::Unsatisfiable
            } else {
                Expect::Part(len.saturating_sub(n), len - 1)
            }
        }
        // `bytes=A-`: from A to the end.
        (false, Some(a), true, _) => {
            if a >= len {
                Expect::Unsatisfiable
            } else {
                Expect::Part(a, len - 1)
            }
        }
        // `bytes=A-B`: B past the end means the end; B before A is no valid range, and a
        // header without one is ignored (section 14.2).
        (false, Some(a), false, Some(b)) => {
            if a > b {
                Expect::Full
            } else if a >= len {
                Expect::Unsatisfiable
            } else {
                Expect::Part(a, b.min(len - 1))
            }
        }
        _ if a.starts_with('+') || b.starts_with('+') => Expect::Unknown,
        _ => Expect::Full,
    }
}

/// The target.
pub fn run(data: &[u8]) {
    let Ok(input) = Input::arbitrary_take_rest(Unstructured::new(data)) else {
        return;
    };
    let len = if input.use_small {
        u64::from(input.small_len)
    } else {
        input.len
    };
    let got = fuzzing::range(&input.header, len);
    match &got {
        Ok(Some((a, b))) => {
            assert!(a <= b && *b < len, "range {a}-{b} of a {len}-byte file");
        }
        Ok(None) => {}
        Err(r) => {
            assert_eq!(r.status, 416, "a refused range is 416: {r:?}");
            assert_eq!(
                r.content_range.as_deref(),
                Some(format!("bytes */{len}").as_str()),
                "416 names the size"
            );
        }
    }
    // A header the HTTP library takes as text is what the model reads.
    let Ok(text) = std::str::from_utf8(&input.header) else {
        return;
    };
    if !text
        .bytes()
        .all(|b| (0x21..0x7f).contains(&b) || b == b' ' || b == b'\t')
        || text.starts_with([' ', '\t'])
        || text.ends_with([' ', '\t'])
    {
        return;
    }
    let expect = model(text, len);
    let actual = match got {
        Ok(None) => Expect::Full,
        Ok(Some((a, b))) => Expect::Part(a, b),
        Err(_) => Expect::Unsatisfiable,
    };
    if expect != Expect::Unknown {
        assert_eq!(actual, expect, "Range: {text:?} on {len} bytes");
    }
}
