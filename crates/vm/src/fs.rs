//! Single file-system operations in the guest (stat, list, ranged read, mkdir, rename,
//! remove, and a walk for capture patterns), each one request to the agent: the guest's own
//! system calls decide, so failures carry the real errno.

use serde_json::{Map, Value};

use crate::machine::{Machine, VmError, data_of};

/// What a path is (a final symlink not followed).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Entry {
    /// The last component of its path (`/` for the root).
    pub name: String,
    /// `file`, `dir`, `symlink` or `other`.
    pub kind: &'static str,
    /// Bytes; 0 for directories.
    pub size: u64,
}

/// A file or symlink a [`Machine::walk`] found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WalkEntry {
    /// Relative to the walk's root, `/`-separated.
    pub path: String,
    /// Whether it is a symlink (else a regular file).
    pub symlink: bool,
    /// Bytes; 0 for symlinks.
    pub size: u64,
}

fn kind(v: &Value) -> &'static str {
    match v.get("kind").and_then(Value::as_str) {
        Some("file") => "file",
        Some("dir") => "dir",
        Some("symlink") => "symlink",
        _ => "other",
    }
}

fn entry(v: &Value) -> Entry {
    Entry {
        name: v
            .get("name")
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_string(),
        kind: kind(v),
        size: v.get("size").and_then(Value::as_u64).unwrap_or(0),
    }
}

fn fields<const N: usize>(pairs: [(&str, Value); N]) -> Map<String, Value> {
    pairs.into_iter().map(|(k, v)| (k.to_string(), v)).collect()
}

impl Machine {
    /// An operation the image's agent may be too old for: its "unknown op" says which image
    /// to rebuild instead of naming the operation only.
    fn fs_call(&self, op: &str, f: Map<String, Value>, what: &str) -> Result<Value, VmError> {
        self.call(op, f, what).map_err(|e| match e {
            VmError::Guest { message, errno } if message.starts_with("unknown op") => {
                VmError::Guest {
                    message: format!(
                        "the disk image's agent is older than this sandboxd ({message}); \
                         rebuild the image with `sandboxd images build vm`, or install this \
                         version's agent.py in it"
                    ),
                    errno: errno.or(Some("ENOSYS".into())),
                }
            }
            other => other,
        })
    }

    /// What `path` is.
    pub fn stat(&self, path: &str) -> Result<Entry, VmError> {
        let v = self.fs_call("stat", fields([("path", path.into())]), "a stat")?;
        Ok(entry(&v))
    }

    /// The entries of a directory (a symlink to one is followed), sorted by name.
    pub fn list(&self, path: &str) -> Result<Vec<Entry>, VmError> {
        let v = self.fs_call("list", fields([("path", path.into())]), "a listing")?;
        Ok(v.get("entries")
            .and_then(Value::as_array)
            .map(|a| a.iter().map(entry).collect())
            .unwrap_or_default())
    }

    /// Bytes `offset..offset + length` of a regular file (cut at its end), and its size.
    pub fn read_range(
        &self,
        path: &str,
        offset: u64,
        length: u64,
    ) -> Result<(Vec<u8>, u64), VmError> {
        let mut out = Vec::new();
        loop {
            let want = length.saturating_sub(out.len() as u64).min(1 << 20);
            let v = self.fs_call(
                "read",
                fields([
                    ("path", path.into()),
                    ("offset", (offset + out.len() as u64).into()),
                    ("length", want.into()),
                ]),
                "a file read",
            )?;
            let size = v.get("size").and_then(Value::as_u64).unwrap_or(0);
            let data = data_of(&v);
            let eof = v.get("eof").and_then(Value::as_bool).unwrap_or(true);
            out.extend_from_slice(&data);
            if eof || data.is_empty() || out.len() as u64 >= length {
                return Ok((out, size));
            }
        }
    }

    /// `mkdir -p`; whether it made the directory (false: one was there).
    pub fn mkdir(&self, path: &str) -> Result<bool, VmError> {
        let v = self.fs_call("mkdir", fields([("path", path.into())]), "a mkdir")?;
        Ok(v.get("created").and_then(Value::as_bool).unwrap_or(false))
    }

    /// Renames by `rename(2)`'s rules.
    pub fn rename(&self, from: &str, to: &str) -> Result<(), VmError> {
        self.fs_call(
            "rename",
            fields([("from", from.into()), ("to", to.into())]),
            "a rename",
        )
        .map(|_| ())
    }

    /// Removes a file, symlink or empty directory; with `recursive`, a whole tree (symlinks
    /// in it removed, never followed).
    pub fn remove(&self, path: &str, recursive: bool) -> Result<(), VmError> {
        self.fs_call(
            "remove",
            fields([("path", path.into()), ("recursive", recursive.into())]),
            "a removal",
        )
        .map(|_| ())
    }

    /// The regular files and symlinks under `root` (links not followed), and whether the
    /// walk stopped after looking at `max` entries.
    pub fn walk(&self, root: &str, max: usize) -> Result<(Vec<WalkEntry>, bool), VmError> {
        let v = self.fs_call(
            "walk",
            fields([("root", root.into()), ("max", max.into())]),
            "a walk",
        )?;
        let list = v
            .get("entries")
            .and_then(Value::as_array)
            .map(|a| {
                a.iter()
                    .filter_map(|e| {
                        Some(WalkEntry {
                            path: e.get("path")?.as_str()?.to_string(),
                            symlink: kind(e) == "symlink",
                            size: e.get("size").and_then(Value::as_u64).unwrap_or(0),
                        })
                    })
                    .collect()
            })
            .unwrap_or_default();
        Ok((list, v.get("cut").and_then(Value::as_bool).unwrap_or(false)))
    }
}
