//! Whether two paths or open files are the same file: the `same-file` crate's API, by the
//! `(st_dev, st_ino)` pair `fstat` gives, on WASI as on Unix.
//!
//! The handle keeps the file open, so its identity cannot be reused by another file while it
//! lives (what makes a comparison with a handle taken earlier meaningful).

use std::fs::File;
use std::io;
use std::os::fd::{AsRawFd, FromRawFd};
use std::path::Path;

/// An open file and its identity.
#[derive(Debug)]
pub struct Handle {
    file: Option<File>,
    /// Standard streams are borrowed, never closed.
    is_std: bool,
    dev: u64,
    ino: u64,
}

impl Drop for Handle {
    fn drop(&mut self) {
        if self.is_std
            && let Some(file) = self.file.take()
        {
            // The descriptor belongs to the process's standard stream.
            std::mem::forget(file);
        }
    }
}

impl PartialEq for Handle {
    fn eq(&self, other: &Handle) -> bool {
        (self.dev, self.ino) == (other.dev, other.ino)
    }
}

impl Eq for Handle {}

impl std::hash::Hash for Handle {
    fn hash<H: std::hash::Hasher>(&self, state: &mut H) {
        self.dev.hash(state);
        self.ino.hash(state);
    }
}

fn identity(fd: i32) -> io::Result<(u64, u64)> {
    // SAFETY: `stat` is plain data that fstat fills in whole on success.
    let mut st: libc::stat = unsafe { std::mem::zeroed() };
    // SAFETY: `st` is a valid, writable stat buffer for the call.
    if unsafe { libc::fstat(fd, &mut st) } != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok((st.st_dev as u64, st.st_ino as u64))
}

impl Handle {
    /// Opens `p` (a directory too) and takes its identity.
    pub fn from_path<P: AsRef<Path>>(p: P) -> io::Result<Handle> {
        Handle::from_file(File::open(p)?)
    }

    /// Takes an open file's identity; the handle owns the file.
    pub fn from_file(file: File) -> io::Result<Handle> {
        let (dev, ino) = identity(file.as_raw_fd())?;
        Ok(Handle {
            file: Some(file),
            is_std: false,
            dev,
            ino,
        })
    }

    fn from_std(fd: i32) -> io::Result<Handle> {
        let (dev, ino) = identity(fd)?;
        Ok(Handle {
            // SAFETY: the descriptor is the process's standard stream, open for its whole
            // life; `Drop` forgets the `File` instead of closing it.
            file: Some(unsafe { File::from_raw_fd(fd) }),
            is_std: true,
            dev,
            ino,
        })
    }

    /// The process's standard input.
    pub fn stdin() -> io::Result<Handle> {
        Handle::from_std(0)
    }

    /// The process's standard output.
    pub fn stdout() -> io::Result<Handle> {
        Handle::from_std(1)
    }

    /// The process's standard error.
    pub fn stderr() -> io::Result<Handle> {
        Handle::from_std(2)
    }

    /// The open file.
    pub fn as_file(&self) -> &File {
        self.file
            .as_ref()
            .expect("a handle holds its file until dropped")
    }

    /// The open file, mutably.
    pub fn as_file_mut(&mut self) -> &mut File {
        self.file
            .as_mut()
            .expect("a handle holds its file until dropped")
    }

    /// The device number.
    pub fn dev(&self) -> u64 {
        self.dev
    }

    /// The inode number.
    pub fn ino(&self) -> u64 {
        self.ino
    }
}

/// Whether `path1` and `path2` name the same file (both must exist).
pub fn is_same_file<P, Q>(path1: P, path2: Q) -> io::Result<bool>
where
    P: AsRef<Path>,
    Q: AsRef<Path>,
{
    Ok(Handle::from_path(path1)? == Handle::from_path(path2)?)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_path_is_itself_and_not_another() {
        let dir = std::env::temp_dir().join(format!("same-file-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let (a, b) = (dir.join("a"), dir.join("b"));
        std::fs::write(&a, "a").unwrap();
        std::fs::write(&b, "b").unwrap();
        assert!(is_same_file(&a, &a).unwrap());
        assert!(is_same_file(&dir, dir.join(".")).unwrap());
        assert!(!is_same_file(&a, &b).unwrap());
        assert!(is_same_file(&a, dir.join("missing")).is_err());
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
