//! Files as programs see them: one adapter from simple blocking file objects to the async
//! `VirtualFile` wasmer-wasix wants, the VFS's regular files opened through it ([`OpenFile`],
//! [`VfsFile`]), and the errno slot their failures land in.
//!
//! wasmer-wasix drives file I/O from a blocking executor on the guest's own thread, so a file
//! that answers `Poll::Pending` would park the guest where no deadline reaches it. Every file
//! here therefore completes each call at once: it either has the bytes, blocks in a wait that a
//! cancellation wakes, or fails.

use std::fmt::{self, Debug};
use std::io::{self, SeekFrom};
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicU16, Ordering};
use std::task::{Context, Poll};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use parking_lot::Mutex;
use tokio::io::{AsyncRead, AsyncSeek, AsyncWrite, ReadBuf};
use virtual_fs::{FsError, VirtualFile};
use wasmer_wasix::types::wasi::Errno as WasiErrno;
use wasmsand_vfs::{Errno, Metadata as VfsMetadata, Vfs, VfsError};

/// A file with plain blocking operations; wrapped in [`Blocking`] to become a `VirtualFile`.
pub(crate) trait SyncFile: Debug + Send + Sync + Unpin + 'static {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize>;
    fn write(&mut self, buf: &[u8]) -> io::Result<usize>;
    fn seek(&mut self, _pos: SeekFrom) -> io::Result<u64> {
        Err(io::Error::other("illegal seek on a stream"))
    }
    fn size(&self) -> u64 {
        0
    }
    fn set_len(&mut self, _len: u64) -> virtual_fs::Result<()> {
        Err(FsError::PermissionDenied)
    }
    fn unlink(&mut self) -> virtual_fs::Result<()> {
        Ok(())
    }
    /// (accessed, modified, created) in nanoseconds since the epoch.
    fn times(&self) -> (u64, u64, u64) {
        (0, 0, 0)
    }
    fn set_times(&mut self, _atime: Option<u64>, _mtime: Option<u64>) -> virtual_fs::Result<()> {
        Ok(())
    }
    /// Bytes a read could return now without waiting (at least 1 reports "ready").
    fn read_ready(&self) -> usize {
        1
    }
    fn write_ready(&self) -> usize {
        1
    }
    fn special_fd(&self) -> Option<u32> {
        None
    }
}

/// Presents a [`SyncFile`] as a `VirtualFile` whose futures are always ready.
#[derive(Debug)]
pub(crate) struct Blocking<F> {
    inner: F,
    seek_result: Option<io::Result<u64>>,
}

impl<F: SyncFile> Blocking<F> {
    pub(crate) fn new(inner: F) -> Self {
        Self {
            inner,
            seek_result: None,
        }
    }

    pub(crate) fn boxed(inner: F) -> Box<dyn VirtualFile + Send + Sync + 'static> {
        Box::new(Self::new(inner))
    }
}

impl<F: SyncFile> AsyncRead for Blocking<F> {
    fn poll_read(
        self: Pin<&mut Self>,
        _cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        let dst = buf.initialize_unfilled();
        Poll::Ready(this.inner.read(dst).map(|n| buf.advance(n)))
    }
}

impl<F: SyncFile> AsyncWrite for Blocking<F> {
    fn poll_write(
        self: Pin<&mut Self>,
        _cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        Poll::Ready(self.get_mut().inner.write(buf))
    }

    fn poll_flush(self: Pin<&mut Self>, _cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Poll::Ready(Ok(()))
    }

    fn poll_shutdown(self: Pin<&mut Self>, _cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Poll::Ready(Ok(()))
    }
}

impl<F: SyncFile> AsyncSeek for Blocking<F> {
    fn start_seek(self: Pin<&mut Self>, position: SeekFrom) -> io::Result<()> {
        let this = self.get_mut();
        this.seek_result = Some(this.inner.seek(position));
        Ok(())
    }

    fn poll_complete(self: Pin<&mut Self>, _cx: &mut Context<'_>) -> Poll<io::Result<u64>> {
        let this = self.get_mut();
        Poll::Ready(match this.seek_result.take() {
            Some(r) => r,
            // A poll without a seek asks for the current position.
            None => this.inner.seek(SeekFrom::Current(0)),
        })
    }
}

impl<F: SyncFile> VirtualFile for Blocking<F> {
    fn last_accessed(&self) -> u64 {
        self.inner.times().0
    }

    fn last_modified(&self) -> u64 {
        self.inner.times().1
    }

    fn created_time(&self) -> u64 {
        self.inner.times().2
    }

    fn set_times(&mut self, atime: Option<u64>, mtime: Option<u64>) -> virtual_fs::Result<()> {
        self.inner.set_times(atime, mtime)
    }

    fn size(&self) -> u64 {
        self.inner.size()
    }

    fn set_len(&mut self, new_size: u64) -> virtual_fs::Result<()> {
        self.inner.set_len(new_size)
    }

    fn unlink(&mut self) -> virtual_fs::Result<()> {
        self.inner.unlink()
    }

    fn get_special_fd(&self) -> Option<u32> {
        self.inner.special_fd()
    }

    fn poll_read_ready(self: Pin<&mut Self>, _cx: &mut Context<'_>) -> Poll<io::Result<usize>> {
        Poll::Ready(Ok(self.inner.read_ready()))
    }

    fn poll_write_ready(self: Pin<&mut Self>, _cx: &mut Context<'_>) -> Poll<io::Result<usize>> {
        Poll::Ready(Ok(self.inner.write_ready()))
    }
}

/// A filesystem shared by the programs of one sandbox (every stage of a pipeline).
pub type SharedVfs = Arc<Mutex<Vfs>>;

/// The precise errno of the last filesystem failure during one WASI call.
#[derive(Debug, Default)]
pub struct ErrnoSlot(AtomicU16);

impl ErrnoSlot {
    pub(crate) fn clear(&self) {
        self.0.store(0, Ordering::Relaxed);
    }

    pub(crate) fn set(&self, errno: WasiErrno) {
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
        Errno::EPERM => WasiErrno::Perm,
        Errno::EXDEV => WasiErrno::Xdev,
        Errno::EIO => WasiErrno::Io,
    }
}

/// The closest `FsError` (what wasix shows when no fix is applied).
pub(crate) fn fs_error(e: Errno) -> FsError {
    match e {
        Errno::ENOENT => FsError::EntryNotFound,
        Errno::EEXIST => FsError::AlreadyExists,
        Errno::ENOTDIR => FsError::BaseNotDirectory,
        Errno::ENOTEMPTY => FsError::DirectoryNotEmpty,
        // wasix maps `WriteZero` to ENOSPC.
        Errno::ENOSPC => FsError::WriteZero,
        Errno::EROFS | Errno::EACCES | Errno::EPERM => FsError::PermissionDenied,
        Errno::EISDIR | Errno::EINVAL => FsError::InvalidInput,
        Errno::ELOOP | Errno::ENAMETOOLONG | Errno::EFBIG | Errno::EXDEV => FsError::InvalidInput,
        Errno::EIO => FsError::IOError,
    }
}

fn io_error(e: &VfsError) -> io::Error {
    let kind = match e.errno {
        Errno::ENOENT => io::ErrorKind::NotFound,
        Errno::EEXIST => io::ErrorKind::AlreadyExists,
        Errno::ENOSPC => io::ErrorKind::StorageFull,
        Errno::EROFS => io::ErrorKind::ReadOnlyFilesystem,
        Errno::EACCES | Errno::EPERM => io::ErrorKind::PermissionDenied,
        Errno::EISDIR => io::ErrorKind::IsADirectory,
        Errno::EXDEV => io::ErrorKind::CrossesDevices,
        Errno::EFBIG => io::ErrorKind::FileTooLarge,
        _ => io::ErrorKind::InvalidInput,
    };
    io::Error::new(kind, e.to_string())
}

pub(crate) fn nanos(t: SystemTime) -> u64 {
    t.duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos().min(u128::from(u64::MAX)) as u64)
}

fn from_nanos(n: u64) -> SystemTime {
    UNIX_EPOCH + Duration::from_nanos(n)
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

    /// The VFS path the file was opened at.
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

impl Debug for OpenFile {
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

impl Debug for VfsFile {
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
