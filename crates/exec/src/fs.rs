//! The sandbox's `Vfs` presented to wasmer-wasix as a `virtual_fs::FileSystem`.
//!
//! `FsError` cannot say `EROFS`, `EISDIR`, `ELOOP`, `EACCES`, `ENAMETOOLONG` or `EFBIG`, and
//! wasix turns most `io::Error`s from file writes into `EIO`. So every error also lands in an
//! [`ErrnoSlot`]; the runner wraps the WASI imports that can fail on the filesystem and puts
//! the real errno back into their result (see `errno_fix` in the runner).

use std::fmt;
use std::io::{self, SeekFrom};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicU16, Ordering};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use futures::future::BoxFuture;
use parking_lot::Mutex;
use virtual_fs::{
    DirEntry, FileOpener, FileSystem, FileType, FsError, Metadata, OpenOptions, OpenOptionsConfig,
    ReadDir, VirtualFile,
};
use wasmer_wasix::types::wasi::Errno as WasiErrno;
use wasmsand_vfs::{Device, Errno, Metadata as VfsMetadata, Vfs, VfsError};

use crate::file::{Blocking, SyncFile};
use crate::stdio::{Output, OutputFile, StdinFile};

/// A filesystem shared by the programs of one sandbox (every stage of a pipeline).
pub type SharedVfs = Arc<Mutex<Vfs>>;

/// The precise errno of the last filesystem failure during one WASI call.
#[derive(Debug, Default)]
pub struct ErrnoSlot(AtomicU16);

impl ErrnoSlot {
    pub(crate) fn clear(&self) {
        self.0.store(0, Ordering::Relaxed);
    }

    fn set(&self, errno: WasiErrno) {
        self.0.store(errno as u16, Ordering::Relaxed);
    }

    pub(crate) fn take(&self) -> Option<u16> {
        match self.0.swap(0, Ordering::Relaxed) {
            0 => None,
            e => Some(e),
        }
    }
}

pub(crate) fn wasi_errno(e: Errno) -> WasiErrno {
    match e {
        Errno::ENOENT => WasiErrno::Noent,
        Errno::EEXIST => WasiErrno::Exist,
        Errno::ENOTDIR => WasiErrno::Notdir,
        Errno::EISDIR => WasiErrno::Isdir,
        Errno::ENOTEMPTY => WasiErrno::Notempty,
        Errno::ENOSPC => WasiErrno::Nospc,
        Errno::EROFS => WasiErrno::Rofs,
        Errno::ELOOP => WasiErrno::Loop,
        Errno::EINVAL => WasiErrno::Inval,
        Errno::ENAMETOOLONG => WasiErrno::Nametoolong,
        Errno::EACCES => WasiErrno::Access,
        Errno::EFBIG => WasiErrno::Fbig,
    }
}

/// The closest `FsError` (what wasix shows when no fix is applied).
fn fs_error(e: Errno) -> FsError {
    match e {
        Errno::ENOENT => FsError::EntryNotFound,
        Errno::EEXIST => FsError::AlreadyExists,
        Errno::ENOTDIR => FsError::BaseNotDirectory,
        Errno::ENOTEMPTY => FsError::DirectoryNotEmpty,
        // wasix maps `WriteZero` to ENOSPC.
        Errno::ENOSPC => FsError::WriteZero,
        Errno::EROFS | Errno::EACCES => FsError::PermissionDenied,
        Errno::EISDIR | Errno::EINVAL => FsError::InvalidInput,
        Errno::ELOOP | Errno::ENAMETOOLONG | Errno::EFBIG => FsError::InvalidInput,
    }
}

fn io_error(e: &VfsError) -> io::Error {
    let kind = match e.errno {
        Errno::ENOENT => io::ErrorKind::NotFound,
        Errno::EEXIST => io::ErrorKind::AlreadyExists,
        Errno::ENOSPC => io::ErrorKind::StorageFull,
        Errno::EROFS => io::ErrorKind::ReadOnlyFilesystem,
        Errno::EACCES => io::ErrorKind::PermissionDenied,
        Errno::EISDIR => io::ErrorKind::IsADirectory,
        Errno::EFBIG => io::ErrorKind::FileTooLarge,
        _ => io::ErrorKind::InvalidInput,
    };
    io::Error::new(kind, e.to_string())
}

fn nanos(t: SystemTime) -> u64 {
    t.duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos().min(u128::from(u64::MAX)) as u64)
}

fn from_nanos(n: u64) -> SystemTime {
    UNIX_EPOCH + Duration::from_nanos(n)
}

fn metadata(m: &VfsMetadata) -> Metadata {
    let mut ft = FileType::default();
    match m.file_type {
        wasmsand_vfs::FileType::File => ft.file = true,
        wasmsand_vfs::FileType::Dir => ft.dir = true,
        wasmsand_vfs::FileType::Symlink => ft.symlink = true,
        // Rust's std on WASI has no notion of character devices, and the guest tools refuse
        // files of unknown type (`cat /dev/null`). Devices are therefore shown to guests as
        // empty regular files; reads and writes still behave as the device does.
        wasmsand_vfs::FileType::CharDevice => ft.file = true,
    }
    Metadata {
        ft,
        accessed: nanos(m.atime),
        created: nanos(m.ctime),
        modified: nanos(m.mtime),
        len: m.size,
    }
}

/// The streams of one run (descriptors 0-2, and what `/dev/stdin`, `/dev/stdout` and
/// `/dev/stderr` lead to).
#[derive(Clone)]
pub(crate) struct Stdio {
    pub(crate) stdin: Arc<Mutex<StdinFile>>,
    pub(crate) stdout: Output,
    pub(crate) stderr: Output,
    pub(crate) errno: Arc<ErrnoSlot>,
    /// Set when a write met a pipe whose reader is gone (see `Exit::status`).
    pub(crate) broken_pipe: Arc<crate::stdio::PipeBreak>,
}

impl Stdio {
    /// A writer for descriptor 1 or 2.
    pub(crate) fn output(&self, fd: u32) -> OutputFile {
        let out = if fd == 1 { &self.stdout } else { &self.stderr };
        OutputFile::new(out, fd, &self.errno, &self.broken_pipe)
    }
}

/// One run's view of the sandbox filesystem.
#[derive(Clone)]
pub(crate) struct VfsFs {
    vfs: SharedVfs,
    errno: Arc<ErrnoSlot>,
    stdio: Stdio,
}

impl fmt::Debug for VfsFs {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("VfsFs")
    }
}

impl VfsFs {
    pub(crate) fn new(vfs: SharedVfs, errno: Arc<ErrnoSlot>, stdio: Stdio) -> Self {
        Self { vfs, errno, stdio }
    }

    fn fail(&self, e: VfsError) -> FsError {
        self.errno.set(wasi_errno(e.errno));
        fs_error(e.errno)
    }

    fn path<'p>(&self, path: &'p Path) -> Result<&'p str, FsError> {
        path.to_str().ok_or_else(|| {
            self.errno.set(WasiErrno::Ilseq);
            FsError::InvalidInput
        })
    }

    fn with<T>(
        &self,
        path: &Path,
        op: impl FnOnce(&mut Vfs, &str) -> Result<T, VfsError>,
    ) -> Result<T, FsError> {
        let p = self.path(path)?;
        let mut vfs = self.vfs.lock();
        op(&mut vfs, p).map_err(|e| self.fail(e))
    }
}

impl FileSystem for VfsFs {
    fn readlink(&self, path: &Path) -> virtual_fs::Result<PathBuf> {
        self.with(path, |v, p| v.readlink(p)).map(PathBuf::from)
    }

    fn read_dir(&self, path: &Path) -> virtual_fs::Result<ReadDir> {
        let entries = self.with(path, |v, p| v.readdir_metadata(p))?;
        Ok(ReadDir::new(
            entries
                .into_iter()
                .map(|(name, m)| DirEntry {
                    path: path.join(name),
                    metadata: Ok(metadata(&m)),
                })
                .collect(),
        ))
    }

    fn create_dir(&self, path: &Path) -> virtual_fs::Result<()> {
        self.with(path, |v, p| v.mkdir(p))
    }

    fn create_symlink(&self, source: &Path, target: &Path) -> virtual_fs::Result<()> {
        let link_target = self.path(source)?.to_owned();
        self.with(target, |v, p| v.symlink(&link_target, p))
    }

    fn remove_dir(&self, path: &Path) -> virtual_fs::Result<()> {
        self.with(path, |v, p| v.rmdir(p))
    }

    fn rename<'a>(&'a self, from: &'a Path, to: &'a Path) -> BoxFuture<'a, virtual_fs::Result<()>> {
        let result = self
            .path(to)
            .and_then(|to| self.with(from, |v, from| v.rename(from, to)));
        Box::pin(async move { result })
    }

    fn metadata(&self, path: &Path) -> virtual_fs::Result<Metadata> {
        self.with(path, |v, p| v.stat(p)).map(|m| metadata(&m))
    }

    fn symlink_metadata(&self, path: &Path) -> virtual_fs::Result<Metadata> {
        self.with(path, |v, p| v.lstat(p)).map(|m| metadata(&m))
    }

    fn remove_file(&self, path: &Path) -> virtual_fs::Result<()> {
        self.with(path, |v, p| v.unlink(p))
    }

    fn new_open_options(&self) -> OpenOptions<'_> {
        OpenOptions::new(self)
    }
}

impl FileOpener for VfsFs {
    fn open(
        &self,
        path: &Path,
        conf: &OpenOptionsConfig,
    ) -> virtual_fs::Result<Box<dyn VirtualFile + Send + Sync + 'static>> {
        let (real, meta) = self.with(path, |v, p| {
            if conf.create_new {
                v.create(p, true)?;
            } else if conf.create {
                v.create(p, false)?;
            }
            let meta = v.stat(p)?;
            if meta.is_dir() && (conf.write || conf.append || conf.truncate) {
                return Err(VfsError::plain(Errno::EISDIR, p));
            }
            if conf.truncate && conf.write && meta.is_file() && meta.size > 0 {
                v.truncate(p, 0)?;
            }
            Ok((v.realpath(p)?, meta))
        })?;
        Ok(match meta.device {
            Some(Device::Stdin) => Blocking::boxed(SharedStdin(self.stdio.stdin.clone())),
            Some(Device::Stdout) => Blocking::boxed(self.stdio.output(1)),
            Some(Device::Stderr) => Blocking::boxed(self.stdio.output(2)),
            _ => Blocking::boxed(
                OpenFile::new(self.vfs.clone(), real, conf.append).handle(self.errno.clone()),
            ),
        })
    }
}

/// `/dev/stdin` reads the same stream as descriptor 0.
#[derive(Debug)]
pub(crate) struct SharedStdin(pub(crate) Arc<Mutex<StdinFile>>);

impl SyncFile for SharedStdin {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        self.0.lock().read(buf)
    }

    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        self.0.lock().write(buf)
    }

    fn seek(&mut self, pos: SeekFrom) -> io::Result<u64> {
        self.0.lock().seek(pos)
    }

    fn size(&self) -> u64 {
        self.0.lock().size()
    }

    fn read_ready(&self) -> usize {
        self.0.lock().read_ready()
    }

    fn special_fd(&self) -> Option<u32> {
        Some(0)
    }
}

/// A file the caller opened for a program's standard stream (a shell redirection such as
/// `> out.txt` or `< in.txt`): the caller creates or truncates it in the VFS first, with its own
/// error messages. Clones share the offset, as duplicated descriptors do (`> f 2>&1`).
#[derive(Clone)]
pub struct OpenFile {
    vfs: SharedVfs,
    path: String,
    pos: Arc<Mutex<u64>>,
    append: bool,
}

impl OpenFile {
    /// `path` must exist; writes go at the shared offset, or at the end with `append`.
    pub fn new(vfs: SharedVfs, path: impl Into<String>, append: bool) -> Self {
        Self {
            vfs,
            path: path.into(),
            pos: Arc::default(),
            append,
        }
    }

    /// Reads at the shared offset, from the host (a shell builtin such as `read`).
    pub fn read(&self, buf: &mut [u8]) -> Result<usize, VfsError> {
        let mut pos = self.pos.lock();
        let data = self.vfs.lock().read_at(&self.path, *pos, buf.len())?;
        buf[..data.len()].copy_from_slice(&data);
        *pos += data.len() as u64;
        Ok(data.len())
    }

    /// Writes all of `data` at the shared offset (at the end with `append`), from the host.
    pub fn write(&self, data: &[u8]) -> Result<(), VfsError> {
        let mut pos = self.pos.lock();
        let mut vfs = self.vfs.lock();
        if self.append {
            *pos = vfs.stat(&self.path)?.size;
        }
        let mut done = 0;
        while done < data.len() {
            done += vfs.write_at(&self.path, *pos + done as u64, &data[done..])?;
        }
        *pos += done as u64;
        Ok(())
    }

    pub fn path(&self) -> &str {
        &self.path
    }

    /// A handle for one run, reporting failures into that run's errno slot.
    pub(crate) fn handle(&self, errno: Arc<ErrnoSlot>) -> VfsFile {
        VfsFile {
            vfs: self.vfs.clone(),
            errno,
            path: self.path.clone(),
            pos: self.pos.clone(),
            append: self.append,
        }
    }
}

impl fmt::Debug for OpenFile {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("OpenFile")
            .field("path", &self.path)
            .finish()
    }
}

/// An open regular file (or device): the canonical path of what was opened and an offset
/// (shared between handles made from one [`OpenFile`]).
pub(crate) struct VfsFile {
    vfs: SharedVfs,
    errno: Arc<ErrnoSlot>,
    path: String,
    pos: Arc<Mutex<u64>>,
    append: bool,
}

impl fmt::Debug for VfsFile {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("VfsFile")
            .field("path", &self.path)
            .field("pos", &*self.pos.lock())
            .finish()
    }
}

impl VfsFile {
    fn io_fail(&self, e: VfsError) -> io::Error {
        self.errno.set(wasi_errno(e.errno));
        io_error(&e)
    }

    fn fs_fail(&self, e: VfsError) -> FsError {
        self.errno.set(wasi_errno(e.errno));
        fs_error(e.errno)
    }

    fn stat(&self) -> Option<VfsMetadata> {
        self.vfs.lock().stat(&self.path).ok()
    }
}

impl SyncFile for VfsFile {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let mut pos = self.pos.lock();
        let data = self
            .vfs
            .lock()
            .read_at(&self.path, *pos, buf.len())
            .map_err(|e| self.io_fail(e))?;
        buf[..data.len()].copy_from_slice(&data);
        *pos += data.len() as u64;
        Ok(data.len())
    }

    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        let mut pos = self.pos.lock();
        let mut vfs = self.vfs.lock();
        if self.append {
            *pos = vfs.stat(&self.path).map_err(|e| self.io_fail(e))?.size;
        }
        let n = vfs
            .write_at(&self.path, *pos, buf)
            .map_err(|e| self.io_fail(e))?;
        *pos += n as u64;
        Ok(n)
    }

    fn seek(&mut self, to: SeekFrom) -> io::Result<u64> {
        let size = self.size();
        let mut pos = self.pos.lock();
        let new = match to {
            SeekFrom::Start(n) => Some(n),
            SeekFrom::Current(d) => pos.checked_add_signed(d),
            SeekFrom::End(d) => size.checked_add_signed(d),
        };
        let new = new.ok_or_else(|| {
            self.errno.set(WasiErrno::Inval);
            io::Error::new(io::ErrorKind::InvalidInput, "seek before start of file")
        })?;
        *pos = new;
        Ok(new)
    }

    fn size(&self) -> u64 {
        self.stat().map_or(0, |m| m.size)
    }

    fn set_len(&mut self, len: u64) -> virtual_fs::Result<()> {
        let r = self.vfs.lock().truncate(&self.path, len);
        r.map_err(|e| self.fs_fail(e))
    }

    fn unlink(&mut self) -> virtual_fs::Result<()> {
        let r = self.vfs.lock().unlink(&self.path);
        r.map_err(|e| self.fs_fail(e))
    }

    fn times(&self) -> (u64, u64, u64) {
        self.stat().map_or((0, 0, 0), |m| {
            (nanos(m.atime), nanos(m.mtime), nanos(m.ctime))
        })
    }

    fn set_times(&mut self, atime: Option<u64>, mtime: Option<u64>) -> virtual_fs::Result<()> {
        let r = self
            .vfs
            .lock()
            .set_times(&self.path, atime.map(from_nanos), mtime.map(from_nanos));
        r.map_err(|e| self.fs_fail(e))
    }

    fn read_ready(&self) -> usize {
        let pos = *self.pos.lock();
        self.size().saturating_sub(pos).max(1) as usize
    }
}
