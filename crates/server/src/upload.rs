//! Uploads into a session's workspace: `multipart/form-data` (`files[]`), tar, gzip'd tar and
//! zip. Everything is expanded into a staging list first, under the caps and path rules;
//! only an upload that passes whole is written, and a write that fails part-way (the
//! workspace cap) is rolled back with a snapshot.

use std::io::Read;

use axum::http::StatusCode;
use serde_json::json;

use crate::error::{ApiError, ErrorCode};

#[derive(Debug, Clone, Copy)]
pub struct Caps {
    pub max_bytes: u64,
    pub max_files: u64,
    pub max_depth: usize,
    pub max_ratio: u64,
}

/// What an upload expands to.
#[derive(Default, Debug)]
pub struct Staged {
    pub dirs: Vec<String>,
    pub files: Vec<(String, Vec<u8>)>,
    pub bytes: u64,
}

pub fn refused(reason: &'static str, message: impl Into<String>) -> ApiError {
    ApiError::invalid(message).with_details(json!({ "reason": reason }))
}

fn too_large(reason: &'static str, message: impl Into<String>, limit: u64) -> ApiError {
    ApiError::new(
        StatusCode::PAYLOAD_TOO_LARGE,
        ErrorCode::InvalidRequest,
        message,
    )
    .with_details(json!({ "reason": reason, "limit": limit }))
}

/// Checks and normalizes an archive member's name: relative, no `..`, no backslash or NUL,
/// within the depth cap. Leading `./` is dropped.
pub fn check_path(raw: &str, max_depth: usize) -> Result<String, ApiError> {
    if raw.starts_with('/') || (raw.len() > 1 && raw.as_bytes()[1] == b':') {
        return Err(refused(
            "absolute_path",
            format!("absolute path refused: {raw:?}"),
        ));
    }
    if raw.contains('\\') || raw.contains('\0') {
        return Err(refused(
            "invalid_path",
            format!("path with a backslash or NUL refused: {raw:?}"),
        ));
    }
    let mut parts = Vec::new();
    for seg in raw.split('/') {
        match seg {
            "" | "." => {}
            ".." => {
                return Err(refused(
                    "path_traversal",
                    format!("path with '..' refused: {raw:?}"),
                ));
            }
            s => parts.push(s),
        }
    }
    if parts.is_empty() {
        return Err(refused(
            "invalid_path",
            format!("empty path refused: {raw:?}"),
        ));
    }
    if parts.len() > max_depth {
        return Err(refused(
            "too_deep",
            format!(
                "path {raw:?} is {} levels deep (limit {max_depth})",
                parts.len()
            ),
        ));
    }
    Ok(parts.join("/"))
}

impl Staged {
    pub fn add_file(&mut self, caps: &Caps, path: String, data: Vec<u8>) -> Result<(), ApiError> {
        if self.files.len() as u64 >= caps.max_files {
            return Err(too_large(
                "too_many_files",
                format!("more than {} files in the upload", caps.max_files),
                caps.max_files,
            ));
        }
        self.bytes += data.len() as u64;
        if self.bytes > caps.max_bytes {
            return Err(too_large(
                "too_large",
                format!("the upload expands past {} bytes", caps.max_bytes),
                caps.max_bytes,
            ));
        }
        self.files.push((path, data));
        Ok(())
    }
}

/// Reads one member with the running totals enforced while it decompresses: the total
/// cap, and the ratio of expanded to compressed bytes (a bomb is stopped at the first
/// chunk past either, whatever its headers claim).
fn read_member(
    r: &mut impl Read,
    staged: &Staged,
    caps: &Caps,
    compressed: u64,
) -> Result<Vec<u8>, ApiError> {
    // Small archives expand legitimately by large factors (a file of zeros): the ratio only
    // applies past 1 MiB.
    let ratio_cap = (compressed.saturating_mul(caps.max_ratio)).max(1024 * 1024);
    let mut out = Vec::new();
    let mut buf = vec![0u8; 64 * 1024];
    loop {
        let n = r
            .read(&mut buf)
            .map_err(|e| refused("malformed", format!("cannot read the archive: {e}")))?;
        if n == 0 {
            return Ok(out);
        }
        out.extend_from_slice(&buf[..n]);
        let total = staged.bytes + out.len() as u64;
        if total > caps.max_bytes {
            return Err(too_large(
                "too_large",
                format!("the upload expands past {} bytes", caps.max_bytes),
                caps.max_bytes,
            ));
        }
        if total > ratio_cap {
            return Err(too_large(
                "compression_ratio",
                format!(
                    "the upload expands more than {}x its compressed size",
                    caps.max_ratio
                ),
                caps.max_ratio,
            ));
        }
    }
}

pub fn expand_tar(data: &[u8], gzip: bool, caps: &Caps) -> Result<Staged, ApiError> {
    let reader: Box<dyn Read> = if gzip {
        Box::new(flate2::read::GzDecoder::new(data))
    } else {
        Box::new(data)
    };
    let compressed = if gzip {
        data.len() as u64
    } else {
        u64::MAX / caps.max_ratio.max(1)
    };
    let mut archive = tar::Archive::new(reader);
    let mut staged = Staged::default();
    let entries = archive
        .entries()
        .map_err(|e| refused("malformed", format!("not a tar archive: {e}")))?;
    for entry in entries {
        let mut entry =
            entry.map_err(|e| refused("malformed", format!("corrupt tar archive: {e}")))?;
        let raw = String::from_utf8(entry.path_bytes().into_owned())
            .map_err(|_| refused("invalid_path", "a member's name is not UTF-8"))?;
        let kind = entry.header().entry_type();
        use tar::EntryType as T;
        match kind {
            T::Symlink => return Err(refused("symlink", format!("symlink refused: {raw:?}"))),
            T::Link => return Err(refused("hardlink", format!("hard link refused: {raw:?}"))),
            T::Char | T::Block | T::Fifo => {
                return Err(refused(
                    "device",
                    format!("device or fifo refused: {raw:?}"),
                ));
            }
            _ => {}
        }
        let path = check_path(&raw, caps.max_depth)?;
        match kind {
            T::Directory => staged.dirs.push(path),
            T::Regular | T::Continuous => {
                let data = read_member(&mut entry, &staged, caps, compressed)?;
                staged.add_file(caps, path, data)?;
            }
            other => {
                return Err(refused(
                    "unsupported_entry",
                    format!("tar entry type {other:?} refused: {raw:?}"),
                ));
            }
        }
    }
    Ok(staged)
}

pub fn expand_zip(data: &[u8], caps: &Caps) -> Result<Staged, ApiError> {
    let mut archive = zip::ZipArchive::new(std::io::Cursor::new(data))
        .map_err(|e| refused("malformed", format!("not a zip archive: {e}")))?;
    let mut staged = Staged::default();
    for i in 0..archive.len() {
        let mut f = archive
            .by_index(i)
            .map_err(|e| refused("malformed", format!("corrupt zip archive: {e}")))?;
        let raw = String::from_utf8(f.name_raw().to_vec())
            .map_err(|_| refused("invalid_path", "a member's name is not UTF-8"))?;
        let mode = f.unix_mode().unwrap_or(0) & 0o170000;
        if f.is_symlink() || mode == 0o120000 {
            return Err(refused("symlink", format!("symlink refused: {raw:?}")));
        }
        if matches!(mode, 0o020000 | 0o060000 | 0o010000 | 0o140000) {
            return Err(refused(
                "device",
                format!("device, fifo or socket refused: {raw:?}"),
            ));
        }
        let path = check_path(&raw, caps.max_depth)?;
        if f.is_dir() {
            staged.dirs.push(path);
            continue;
        }
        let data = read_member(&mut f, &staged, caps, data.len() as u64)?;
        staged.add_file(caps, path, data)?;
    }
    Ok(staged)
}

/// Adds one multipart file.
pub fn add_part(
    staged: &mut Staged,
    caps: &Caps,
    name: &str,
    data: Vec<u8>,
) -> Result<(), ApiError> {
    let path = check_path(name, caps.max_depth)?;
    staged.add_file(caps, path, data)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn caps() -> Caps {
        Caps {
            max_bytes: 1 << 20,
            max_files: 10,
            max_depth: 3,
            max_ratio: 100,
        }
    }

    #[test]
    fn path_rules() {
        assert_eq!(check_path("./a//b", 3).unwrap(), "a/b");
        for (bad, reason) in [
            ("/etc/x", "absolute_path"),
            ("a/../../x", "path_traversal"),
            ("a\\b", "invalid_path"),
            ("a/b/c/d", "too_deep"),
            ("C:/x", "absolute_path"),
        ] {
            let e = check_path(bad, 3).unwrap_err();
            assert_eq!(e.details["reason"], reason, "{bad}");
        }
    }

    #[test]
    fn gzip_bomb_is_stopped_while_streaming() {
        use std::io::Write;
        let mut header = tar::Header::new_gnu();
        let size = 50u64 << 20;
        header.set_size(size);
        header.set_mode(0o644);
        header.set_entry_type(tar::EntryType::Regular);
        header.set_path("zeros").unwrap();
        header.set_cksum();
        let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::best());
        gz.write_all(header.as_bytes()).unwrap();
        let zeros = vec![0u8; 1 << 20];
        for _ in 0..50 {
            gz.write_all(&zeros).unwrap();
        }
        let data = gz.finish().unwrap();
        let mut c = caps();
        c.max_bytes = 64 << 20;
        let e = expand_tar(&data, true, &c).unwrap_err();
        assert_eq!(e.details["reason"], "compression_ratio");
    }
}
