//! Portable state: a sandbox as a versioned, compressed, authenticated blob that opens in any
//! process running the same wasmsand (`Sandbox::export_state` / `Sandbox::import_state`).
//!
//! Layout (integers little-endian):
//!
//! ```text
//! magic "WSNDSTAT" | version u16 | flags u8 (1: HMAC) | reserved u8 | payload length u64
//! | zstd(payload) | tag: 32 bytes, HMAC-SHA256(key, everything before) or SHA-256 of it
//! ```
//!
//! The payload is a JSON header (limits, shell state) and then the files as the changes that
//! turn the shared initial layout into the sandbox's tree, so a sandbox that holds 10 000
//! small files exports them and not the guest programs and the Python standard library every sandbox
//! shares.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use hmac::{Hmac, Mac};
use sha2::{Digest, Sha256};
use wasmsand_vfs::{Attrs, Change, Delta, Device};

use crate::{Limits, SandboxError};

const MAGIC: &[u8; 8] = b"WSNDSTAT";
/// The format this build writes and the newest it reads.
pub const STATE_VERSION: u16 = 1;
const HEADER: usize = 8 + 2 + 1 + 1 + 8;
const TAG: usize = 32;
const FLAG_HMAC: u8 = 1;
/// Largest blob and largest payload accepted when the caller sets no bound of its own.
pub const DEFAULT_MAX_STATE_BYTES: u64 = 1 << 30;

fn bad(msg: impl std::fmt::Display) -> SandboxError {
    SandboxError::Invalid(format!("state blob: {msg}"))
}

fn corrupt() -> SandboxError {
    bad("corrupt (its contents do not parse)")
}

/// What a blob carries besides the files.
pub(crate) struct Header {
    pub limits: Limits,
    pub shell: serde_json::Value,
}

/// Marks a bare payload (`Sandbox::export_payload`): the format version follows it.
const PAYLOAD_MAGIC: &[u8; 8] = b"WSNDPAYL";

pub(crate) fn encode(header: &Header, delta: &Delta, key: Option<&[u8]>) -> Vec<u8> {
    let payload = payload_of(header, delta, Vec::new());
    // Level 1: the blob is written on the request path; higher levels cost several times the
    // time for a few percent.
    let body = zstd::bulk::compress(&payload, 1).expect("compressing into memory cannot fail");
    let mut out = Vec::with_capacity(HEADER + body.len() + TAG);
    out.extend_from_slice(MAGIC);
    out.extend_from_slice(&STATE_VERSION.to_le_bytes());
    out.push(if key.is_some() { FLAG_HMAC } else { 0 });
    out.push(0);
    put_u64(&mut out, payload.len() as u64);
    out.extend_from_slice(&body);
    let tag = tag_of(&out, key);
    out.extend_from_slice(&tag);
    out
}

/// The payload alone, after its own magic and version: for a store that splits, compresses
/// and checks it itself.
pub(crate) fn encode_bare(header: &Header, delta: &Delta) -> Vec<u8> {
    let mut out = PAYLOAD_MAGIC.to_vec();
    out.extend_from_slice(&STATE_VERSION.to_le_bytes());
    payload_of(header, delta, out)
}

/// Opens what [`encode_bare`] wrote. A bare payload carries no checksum: its store checked it.
pub(crate) fn decode_bare(p: &[u8]) -> Result<(Header, Delta), SandboxError> {
    if p.len() < 10 || &p[..8] != PAYLOAD_MAGIC {
        return Err(bad("not a wasmsand state payload"));
    }
    let version = u16::from_le_bytes([p[8], p[9]]);
    if version > STATE_VERSION {
        return Err(bad(format!(
            "made by a newer wasmsand (format version {version}; this one reads up to {STATE_VERSION})"
        )));
    }
    parse_payload(&p[10..]).ok_or_else(corrupt)?
}

fn payload_of(header: &Header, delta: &Delta, mut payload: Vec<u8>) -> Vec<u8> {
    let json = serde_json::json!({
        "wasmsand": env!("CARGO_PKG_VERSION"),
        "limits": header.limits,
        "shell": header.shell,
    })
    .to_string();
    let size: usize = delta
        .entries
        .iter()
        .map(|(p, c)| {
            p.len()
                + 48
                + match c {
                    Change::File(_, b) => b.len(),
                    Change::Symlink(_, t) => t.len(),
                    _ => 0,
                }
        })
        .sum();
    payload.reserve(json.len() + size + 16);
    put_u32(&mut payload, json.len() as u32);
    payload.extend_from_slice(json.as_bytes());
    put_u64(&mut payload, delta.entries.len() as u64);
    for (path, change) in &delta.entries {
        put_u32(&mut payload, path.len() as u32);
        payload.extend_from_slice(path.as_bytes());
        let tag = match change {
            Change::Removed => 0u8,
            Change::Dir(_) => 1,
            Change::File(..) => 2,
            Change::Symlink(..) => 3,
            Change::Device(..) => 4,
        };
        payload.push(tag);
        let attrs = match change {
            Change::Removed => continue,
            Change::Dir(a) | Change::File(a, _) | Change::Symlink(a, _) | Change::Device(a, _) => a,
        };
        put_u32(&mut payload, attrs.mode);
        for t in [attrs.atime, attrs.mtime, attrs.ctime] {
            put_time(&mut payload, t);
        }
        match change {
            Change::File(_, data) => {
                put_u64(&mut payload, data.len() as u64);
                payload.extend_from_slice(data);
            }
            Change::Symlink(_, target) => {
                put_u32(&mut payload, target.len() as u32);
                payload.extend_from_slice(target.as_bytes());
            }
            Change::Device(_, d) => payload.push(device_code(*d)),
            _ => {}
        }
    }
    payload
}

fn tag_of(data: &[u8], key: Option<&[u8]>) -> [u8; 32] {
    match key {
        Some(k) => {
            let mut mac = Hmac::<Sha256>::new_from_slice(k).expect("HMAC takes any key length");
            mac.update(data);
            mac.finalize().into_bytes().into()
        }
        None => Sha256::digest(data).into(),
    }
}

pub(crate) fn decode(
    blob: &[u8],
    key: Option<&[u8]>,
    max_bytes: u64,
) -> Result<(Header, Delta), SandboxError> {
    if blob.len() as u64 > max_bytes {
        return Err(bad(format!(
            "too large ({} bytes, limit: {max_bytes})",
            blob.len()
        )));
    }
    if blob.len() < 8 || &blob[..8] != MAGIC {
        if blob.len() < 8 && MAGIC.starts_with(blob) {
            return Err(bad("truncated"));
        }
        return Err(bad("not a wasmsand state blob"));
    }
    if blob.len() < HEADER + TAG {
        return Err(bad("truncated"));
    }
    let version = u16::from_le_bytes([blob[8], blob[9]]);
    if version > STATE_VERSION {
        return Err(bad(format!(
            "made by a newer wasmsand (format version {version}; this one reads up to {STATE_VERSION})"
        )));
    }
    if version == 0 {
        return Err(corrupt());
    }
    let flags = blob[10];
    if flags & !FLAG_HMAC != 0 {
        return Err(corrupt());
    }
    let keyed = flags & FLAG_HMAC != 0;
    match (keyed, key) {
        (true, None) => {
            return Err(bad(
                "it is authenticated with a key (HMAC); give the key to open it",
            ));
        }
        (false, Some(_)) => {
            return Err(bad(
                "it carries no key authentication but a key was given; refusing an unauthenticated blob",
            ));
        }
        _ => {}
    }
    let (signed, tag) = blob.split_at(blob.len() - TAG);
    let ok = match key {
        Some(k) => {
            let mut mac = Hmac::<Sha256>::new_from_slice(k).expect("HMAC takes any key length");
            mac.update(signed);
            mac.verify_slice(tag).is_ok()
        }
        None => Sha256::digest(signed).as_slice() == tag,
    };
    if !ok {
        return Err(bad(if keyed {
            "authentication failed (the blob was changed, truncated, or the key is wrong)"
        } else {
            "checksum mismatch (the blob is corrupt or truncated)"
        }));
    }
    let raw_len = u64::from_le_bytes(blob[12..20].try_into().expect("8 bytes"));
    if raw_len > max_bytes {
        return Err(bad(format!(
            "too large once decompressed ({raw_len} bytes, limit: {max_bytes})"
        )));
    }
    let payload =
        zstd::bulk::decompress(&signed[HEADER..], raw_len as usize).map_err(|_| corrupt())?;
    if payload.len() as u64 != raw_len {
        return Err(corrupt());
    }
    parse_payload(&payload).ok_or_else(corrupt)?
}

fn parse_payload(p: &[u8]) -> Option<Result<(Header, Delta), SandboxError>> {
    let mut r = Reader { p, at: 0 };
    let json_len = r.u32()? as usize;
    let json: serde_json::Value = serde_json::from_slice(r.bytes(json_len)?).ok()?;
    let limits: Limits = match serde_json::from_value(json.get("limits")?.clone()) {
        Ok(l) => l,
        Err(e) => return Some(Err(bad(format!("limits: {e}")))),
    };
    let shell = json.get("shell")?.clone();
    let count = r.u64()?;
    // Every entry takes at least 5 bytes: a count beyond that is a lie.
    if count > (p.len() as u64) / 5 {
        return None;
    }
    let mut entries = Vec::with_capacity(count as usize);
    for _ in 0..count {
        let len = r.u32()? as usize;
        let path = std::str::from_utf8(r.bytes(len)?).ok()?.to_string();
        if !path.starts_with('/') {
            return None;
        }
        let tag = r.u8()?;
        if tag == 0 {
            entries.push((path, Change::Removed));
            continue;
        }
        let mode = r.u32()?;
        let attrs = Attrs {
            mode,
            atime: r.time()?,
            mtime: r.time()?,
            ctime: r.time()?,
        };
        let change = match tag {
            1 => Change::Dir(attrs),
            2 => {
                let len = r.u64()? as usize;
                Change::File(attrs, bytes::Bytes::copy_from_slice(r.bytes(len)?))
            }
            3 => {
                let len = r.u32()? as usize;
                Change::Symlink(attrs, std::str::from_utf8(r.bytes(len)?).ok()?.to_string())
            }
            4 => Change::Device(attrs, device_of(r.u8()?)?),
            _ => return None,
        };
        entries.push((path, change));
    }
    if r.at != p.len() {
        return None;
    }
    Some(Ok((Header { limits, shell }, Delta { entries })))
}

struct Reader<'a> {
    p: &'a [u8],
    at: usize,
}

impl<'a> Reader<'a> {
    fn bytes(&mut self, n: usize) -> Option<&'a [u8]> {
        let end = self.at.checked_add(n)?;
        let s = self.p.get(self.at..end)?;
        self.at = end;
        Some(s)
    }
    fn u8(&mut self) -> Option<u8> {
        Some(self.bytes(1)?[0])
    }
    fn u32(&mut self) -> Option<u32> {
        Some(u32::from_le_bytes(self.bytes(4)?.try_into().ok()?))
    }
    fn u64(&mut self) -> Option<u64> {
        Some(u64::from_le_bytes(self.bytes(8)?.try_into().ok()?))
    }
    fn time(&mut self) -> Option<SystemTime> {
        let secs = i64::from_le_bytes(self.bytes(8)?.try_into().ok()?);
        let nanos = self.u32()?;
        if nanos >= 1_000_000_000 {
            return None;
        }
        if secs >= 0 {
            UNIX_EPOCH.checked_add(Duration::new(secs as u64, nanos))
        } else {
            UNIX_EPOCH
                .checked_sub(Duration::from_secs(secs.unsigned_abs()))?
                .checked_add(Duration::from_nanos(u64::from(nanos)))
        }
    }
}

fn put_u32(out: &mut Vec<u8>, v: u32) {
    out.extend_from_slice(&v.to_le_bytes());
}

fn put_u64(out: &mut Vec<u8>, v: u64) {
    out.extend_from_slice(&v.to_le_bytes());
}

fn put_time(out: &mut Vec<u8>, t: SystemTime) {
    let (secs, nanos) = match t.duration_since(UNIX_EPOCH) {
        Ok(d) => (d.as_secs() as i64, d.subsec_nanos()),
        Err(e) => {
            // Before 1970: whole seconds back, then nanoseconds forward.
            let d = e.duration();
            let back = d.as_secs() as i64 + i64::from(d.subsec_nanos() > 0);
            let fwd = if d.subsec_nanos() > 0 {
                1_000_000_000 - d.subsec_nanos()
            } else {
                0
            };
            (-back, fwd)
        }
    };
    out.extend_from_slice(&secs.to_le_bytes());
    put_u32(out, nanos);
}

fn device_code(d: Device) -> u8 {
    match d {
        Device::Null => 0,
        Device::Zero => 1,
        Device::Urandom => 2,
        Device::Stdin => 3,
        Device::Stdout => 4,
        Device::Stderr => 5,
        Device::Full => 6,
    }
}

fn device_of(c: u8) -> Option<Device> {
    Some(match c {
        0 => Device::Null,
        1 => Device::Zero,
        2 => Device::Urandom,
        3 => Device::Stdin,
        4 => Device::Stdout,
        5 => Device::Stderr,
        6 => Device::Full,
        _ => return None,
    })
}
