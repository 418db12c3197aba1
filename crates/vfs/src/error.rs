use std::fmt;

/// The errno a filesystem operation failed with. The names are the POSIX ones so that the
/// WASI adapter, the shell and the RPC layer can pass them through unchanged.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[allow(clippy::upper_case_acronyms)]
pub enum Errno {
    /// A path component does not exist.
    ENOENT,
    /// The path to create already exists.
    EEXIST,
    /// A component used as a directory is something else.
    ENOTDIR,
    /// A file operation was asked of a directory.
    EISDIR,
    /// A directory to remove or replace still has entries.
    ENOTEMPTY,
    /// A limit of the tree was reached: its byte limit or its file count.
    ENOSPC,
    /// The path is outside the writable paths.
    EROFS,
    /// More than [`MAX_SYMLINKS`](crate::MAX_SYMLINKS) symlinks while resolving one path.
    ELOOP,
    /// The operation makes no sense for its operands (removing `/`, `.`, renaming a directory
    /// into itself, reading a link that is not one, ...).
    EINVAL,
    /// A component or the whole path is longer than Linux allows.
    ENAMETOOLONG,
    /// The node's permission bits refuse the access.
    EACCES,
    /// A file would grow past [`MAX_FILE_SIZE`](crate::MAX_FILE_SIZE).
    EFBIG,
    /// The operation is not allowed on this kind of node (a hard link to a directory).
    EPERM,
    /// A hard link would join a node outside the writable paths to a name inside them.
    EXDEV,
    /// A mounted host folder could not be read (it changed under the mount, or its read cap
    /// is spent).
    EIO,
}

impl Errno {
    /// The POSIX name (`"ENOENT"`), as errors are spelled on the wire and in messages.
    pub fn name(self) -> &'static str {
        match self {
            Errno::ENOENT => "ENOENT",
            Errno::EEXIST => "EEXIST",
            Errno::ENOTDIR => "ENOTDIR",
            Errno::EISDIR => "EISDIR",
            Errno::ENOTEMPTY => "ENOTEMPTY",
            Errno::ENOSPC => "ENOSPC",
            Errno::EROFS => "EROFS",
            Errno::ELOOP => "ELOOP",
            Errno::EINVAL => "EINVAL",
            Errno::ENAMETOOLONG => "ENAMETOOLONG",
            Errno::EACCES => "EACCES",
            Errno::EFBIG => "EFBIG",
            Errno::EPERM => "EPERM",
            Errno::EXDEV => "EXDEV",
            Errno::EIO => "EIO",
        }
    }

    /// The text `strerror` gives on Linux, used when an operation has nothing more specific to
    /// say.
    pub fn description(self) -> &'static str {
        match self {
            Errno::ENOENT => "no such file or directory",
            Errno::EEXIST => "file exists",
            Errno::ENOTDIR => "not a directory",
            Errno::EISDIR => "is a directory",
            Errno::ENOTEMPTY => "directory not empty",
            Errno::ENOSPC => "no space left on device",
            Errno::EROFS => "read-only file system",
            Errno::ELOOP => "too many levels of symbolic links",
            Errno::EINVAL => "invalid argument",
            Errno::ENAMETOOLONG => "file name too long",
            Errno::EACCES => "permission denied",
            Errno::EFBIG => "file too large",
            Errno::EPERM => "operation not permitted",
            Errno::EXDEV => "invalid cross-device link",
            Errno::EIO => "input/output error",
        }
    }

    /// The Linux errno number.
    pub fn code(self) -> i32 {
        match self {
            Errno::ENOENT => 2,
            Errno::EEXIST => 17,
            Errno::ENOTDIR => 20,
            Errno::EISDIR => 21,
            Errno::ENOTEMPTY => 39,
            Errno::ENOSPC => 28,
            Errno::EROFS => 30,
            Errno::ELOOP => 40,
            Errno::EINVAL => 22,
            Errno::ENAMETOOLONG => 36,
            Errno::EACCES => 13,
            Errno::EFBIG => 27,
            Errno::EPERM => 1,
            Errno::EXDEV => 18,
            Errno::EIO => 5,
        }
    }
}

impl fmt::Display for Errno {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// A failed filesystem operation: the errno, the path it concerned and a message.
/// Displays as `ENOSPC: file count limit reached (max: 3): /tmp/d.txt` (without the path part
/// when the error concerns no path).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub struct VfsError {
    /// What kind of failure: callers branch on this, never on the message.
    pub errno: Errno,
    /// The path as the caller gave it (empty when the error concerns no path).
    pub path: String,
    /// Human-readable detail, e.g. which limit was reached.
    pub message: String,
}

impl VfsError {
    /// An error with a specific message.
    pub fn new(errno: Errno, path: impl Into<String>, message: impl Into<String>) -> Self {
        Self {
            errno,
            path: path.into(),
            message: message.into(),
        }
    }

    /// An error whose message is the errno's standard description.
    pub fn plain(errno: Errno, path: impl Into<String>) -> Self {
        Self::new(errno, path, errno.description())
    }
}

impl fmt::Display for VfsError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.errno, self.message)?;
        if !self.path.is_empty() {
            write!(f, ": {}", self.path)?;
        }
        Ok(())
    }
}

/// The result of every fallible filesystem operation.
pub type VfsResult<T> = Result<T, VfsError>;
