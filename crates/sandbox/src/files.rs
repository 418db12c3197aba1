//! File operations a client needs to move large files in pieces: appending a chunk and
//! renaming, so an upload can be written aside and put in place whole.

use crate::{Result, Sandbox, parent_of};

impl Sandbox {
    /// Appends to a file, creating it and any missing parent directories. O(len) per call
    /// while nothing else shares the file, so a file can be written in chunks.
    pub fn append_file(&self, path: &str, data: &[u8]) -> Result<()> {
        self.with_inner(|i| {
            let p = Self::abs(i, path);
            let mut vfs = i.vfs.lock();
            if let Some(parent) = parent_of(&p)
                && !vfs.exists(&parent)
            {
                vfs.mkdir_p(&parent)?;
            }
            Ok(vfs.append(&p, data)?)
        })
    }

    /// Renames a file or directory, replacing the target by POSIX rules (`rename(2)`).
    pub fn rename(&self, from: &str, to: &str) -> Result<()> {
        self.with_inner(|i| {
            let (f, t) = (Self::abs(i, from), Self::abs(i, to));
            Ok(i.vfs.lock().rename(&f, &t)?)
        })
    }
}
