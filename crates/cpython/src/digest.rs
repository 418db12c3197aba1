//! SHA-256 of the CPython modules, computed once per file and remembered.
//!
//! The module cache is keyed by the wasm's SHA-256; hashing the 100 MB snapshot took a good part
//! of a new process's first `python3`. The digest is stored in the module cache directory under
//! a name made of the file's identity (path, device, inode, size, mtime and ctime, which nobody
//! can set back): any change to the file gives another name, so a stale digest is never found.

use std::fs;
use std::io::Write;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

use sha2::{Digest, Sha256};

/// The SHA-256 of `bytes`, the contents of `path`: from the memo when the file is the one it was
/// computed for, else computed now and remembered. `None` without a cache directory (the
/// module cache then hashes as before).
pub(crate) fn memoized(path: &Path, bytes: &[u8]) -> Option<[u8; 32]> {
    let memo = memo_path(path)?;
    if let Some(digest) = fs::read_to_string(&memo)
        .ok()
        .and_then(|t| parse_hex(t.trim()))
    {
        return Some(digest);
    }
    let digest: [u8; 32] = Sha256::digest(bytes).into();
    // Best effort: a read-only cache only means hashing again next time.
    let _ = write_atomically(&memo, hex(&digest).as_bytes());
    Some(digest)
}

fn memo_path(path: &Path) -> Option<PathBuf> {
    let meta = fs::metadata(path).ok()?;
    let canonical = fs::canonicalize(path).ok()?;
    let identity = format!(
        "{}\0{}\0{}\0{}\0{}.{}\0{}.{}",
        canonical.display(),
        meta.dev(),
        meta.ino(),
        meta.len(),
        meta.mtime(),
        meta.mtime_nsec(),
        meta.ctime(),
        meta.ctime_nsec(),
    );
    let key = xxhash_rust::xxh3::xxh3_128(identity.as_bytes());
    let dir = wasmsand_exec::default_cache_dir()?.join("digests");
    Some(dir.join(format!("{key:032x}.sha256")))
}

fn write_atomically(path: &Path, contents: &[u8]) -> std::io::Result<()> {
    let dir = path.parent().expect("memo paths have a directory");
    fs::create_dir_all(dir)?;
    let tmp = dir.join(format!(".tmp-{}", std::process::id()));
    let mut f = fs::File::create(&tmp)?;
    f.write_all(contents)?;
    f.sync_all()?;
    fs::rename(&tmp, path)
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

fn parse_hex(text: &str) -> Option<[u8; 32]> {
    if text.len() != 64 || !text.is_ascii() {
        return None;
    }
    let mut out = [0u8; 32];
    for (i, byte) in out.iter_mut().enumerate() {
        *byte = u8::from_str_radix(&text[2 * i..2 * i + 2], 16).ok()?;
    }
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hex_round_trips_and_rejects_junk() {
        let d: [u8; 32] = Sha256::digest(b"x").into();
        assert_eq!(parse_hex(&hex(&d)), Some(d));
        assert_eq!(parse_hex("zz"), None);
        assert_eq!(parse_hex(&"g".repeat(64)), None);
    }
}
