//! One adapter from simple blocking file objects to the async `VirtualFile` wasmer-wasix wants.
//!
//! wasmer-wasix drives file I/O from a blocking executor on the guest's own thread, so a file
//! that answers `Poll::Pending` would park the guest where no deadline reaches it. Every file
//! here therefore completes each call at once: it either has the bytes, blocks in a wait that a
//! cancellation wakes, or fails.

use std::fmt::Debug;
use std::io::{self, SeekFrom};
use std::pin::Pin;
use std::task::{Context, Poll};

use tokio::io::{AsyncRead, AsyncSeek, AsyncWrite, ReadBuf};
use virtual_fs::{FsError, VirtualFile};

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
