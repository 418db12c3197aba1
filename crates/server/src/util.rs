//! Time stamps, ids and canonical JSON shared by the handlers and the store.

use serde_json::Value;
use sha2::{Digest, Sha256};
use time::OffsetDateTime;
use time::format_description::well_known::Rfc3339;

/// Milliseconds since the Unix epoch: what records carry, so they order and compare cheaply.
pub fn now_ms() -> i64 {
    (OffsetDateTime::now_utc().unix_timestamp_nanos() / 1_000_000) as i64
}

/// RFC 3339 in UTC with millisecond precision (`2025-10-28T12:00:00.123Z`).
pub fn iso(ms: i64) -> String {
    let t = OffsetDateTime::from_unix_timestamp_nanos(ms as i128 * 1_000_000)
        .unwrap_or(OffsetDateTime::UNIX_EPOCH);
    let mut s = t.format(&Rfc3339).unwrap_or_default();
    // `time` prints as many fraction digits as it has; pin three so strings sort as times.
    if let Some(dot) = s.find('.') {
        let end = s.len() - 1;
        let mut frac: String = s[dot + 1..end].chars().take(3).collect();
        while frac.len() < 3 {
            frac.push('0');
        }
        s = format!("{}.{}Z", &s[..dot], frac);
    } else {
        s = format!("{}.000Z", s.trim_end_matches('Z'));
    }
    s
}

/// The epoch milliseconds of an RFC 3339 time ([`iso`]'s output).
pub fn parse_iso(s: &str) -> Option<i64> {
    let t = OffsetDateTime::parse(s, &Rfc3339).ok()?;
    Some((t.unix_timestamp_nanos() / 1_000_000) as i64)
}

/// `s` in at most `max` bytes: cut on a character boundary, with `…` in place of the rest.
pub fn cut_utf8(s: &str, max: usize) -> String {
    if s.len() <= max {
        return s.to_string();
    }
    let mut end = max.saturating_sub('…'.len_utf8());
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}…", &s[..end])
}

pub fn new_id() -> String {
    uuid::Uuid::new_v4().to_string()
}

/// Serializes with object keys sorted and no insignificant whitespace. Sorted explicitly:
/// whether serde_json's `Map` keeps insertion order depends on a feature any crate of the
/// build may turn on.
pub fn canonical_json(v: &Value) -> String {
    let mut out = String::new();
    write_canonical(v, &mut out);
    out
}

fn write_canonical(v: &Value, out: &mut String) {
    match v {
        Value::Object(map) => {
            let mut keys: Vec<&String> = map.keys().collect();
            keys.sort();
            out.push('{');
            for (i, k) in keys.into_iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                out.push_str(&Value::String(k.clone()).to_string());
                out.push(':');
                write_canonical(&map[k], out);
            }
            out.push('}');
        }
        Value::Array(items) => {
            out.push('[');
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                write_canonical(item, out);
            }
            out.push(']');
        }
        other => out.push_str(&other.to_string()),
    }
}

pub fn sha256_hex(data: &[u8]) -> String {
    hex::encode(Sha256::digest(data))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn iso_has_millis_and_z() {
        assert_eq!(iso(0), "1970-01-01T00:00:00.000Z");
        assert_eq!(iso(1_761_652_800_123), "2025-10-28T12:00:00.123Z");
        assert_eq!(iso(1_761_652_800_100), "2025-10-28T12:00:00.100Z");
    }

    #[test]
    fn canonical_json_sorts_keys_at_every_level() {
        let v: Value =
            serde_json::from_str(r#"{"b":1,"a":{"z":[3,{"y":1,"x":2}],"c":null}}"#).unwrap();
        assert_eq!(
            canonical_json(&v),
            r#"{"a":{"c":null,"z":[3,{"x":2,"y":1}]},"b":1}"#
        );
    }
}
