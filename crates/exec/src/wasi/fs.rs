//! The sandbox's `Vfs` presented to wasmer-wasix as a `virtual_fs::FileSystem`.
//!
//! `FsError` cannot say `EROFS`, `EISDIR`, `ELOOP`, `EACCES`, `ENAMETOOLONG` or `EFBIG`, and
//! wasix turns most `io::Error`s from file writes into `EIO`. So every error also lands in an
//! [`ErrnoSlot`]; the runner wraps the WASI imports that can fail on the filesystem and puts
//! the real errno back into their result (the `Fix::Errno` and `Fix::PathAt` entries of the
//! `WRAPPED` table in `wrap.rs`).

use std::fmt;
use std::io::{self, SeekFrom};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use futures::future::BoxFuture;
use parking_lot::Mutex;
use virtual_fs::{
    DirEntry, FileOpener, FileSystem, FileType, FsError, Metadata, OpenOptions, OpenOptionsConfig,
    ReadDir, VirtualFile,
};
use wasmer_wasix::types::wasi::Errno as WasiErrno;
use wasmsand_vfs::{Device, Errno, Metadata as VfsMetadata, Vfs, VfsError};

use crate::bind::{Late, Stdio};
use crate::wasi::file::{
    Blocking, ErrnoSlot, OpenFile, SharedVfs, SyncFile, fs_error, nanos, wasi_errno,
};
use crate::wasi::stdio::{OutputFile, StdinFile};

fn metadata(m: &VfsMetadata) -> Metadata {
    let mut ft = FileType::default();
    match m.file_type {
        wasmsand_vfs::FileType::File => ft.file = true,
        wasmsand_vfs::FileType::Dir => ft.dir = true,
        wasmsand_vfs::FileType::Symlink => ft.symlink = true,
        // Rust's std on WASI has no notion of character devices, and the guest programs refuse
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

/// One run's view of the sandbox filesystem (the run's, once it is bound).
#[derive(Clone)]
pub(crate) struct VfsFs {
    run: Late,
    errno: Arc<ErrnoSlot>,
    /// The tree wasix's setup sees, before the run is bound.
    setup: SharedVfs,
}

impl fmt::Debug for VfsFs {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("VfsFs")
    }
}

impl VfsFs {
    pub(crate) fn new(run: Late, errno: Arc<ErrnoSlot>, setup: SharedVfs) -> Self {
        Self { run, errno, setup }
    }

    fn vfs(&self) -> SharedVfs {
        self.run
            .get()
            .map_or_else(|| self.setup.clone(), |b| b.vfs.clone())
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
        let tree = self.vfs();
        let mut vfs = tree.lock();
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
            // open(2) checks the access it is asked for (the sandbox's user owns every node):
            // a program must not get as far as creating its output before learning that its
            // input cannot be read (`cp` left an empty copy of an unreadable file).
            let wants_write = conf.write || conf.append;
            if meta.is_file()
                && ((conf.read && meta.mode & 0o400 == 0)
                    || (wants_write && meta.mode & 0o200 == 0))
            {
                return Err(VfsError::plain(Errno::EACCES, p));
            }
            if conf.truncate && conf.write && meta.is_file() && meta.size > 0 {
                v.truncate(p, 0)?;
            }
            Ok((v.realpath(p)?, meta))
        })?;
        let stdio = || {
            self.run
                .get()
                .map(|b| b.stdio.clone())
                .ok_or(FsError::EntryNotFound)
        };
        Ok(match meta.device {
            Some(Device::Stdin) => Blocking::boxed(SharedStdin(stdio()?.stdin.clone())),
            Some(Device::Stdout) => Blocking::boxed(stdio()?.output(1)),
            Some(Device::Stderr) => Blocking::boxed(stdio()?.output(2)),
            _ => Blocking::boxed(
                OpenFile::new(self.vfs().clone(), real, conf.append).handle(self.errno.clone()),
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

/// Descriptor 0, 1 or 2 of an instance made before its run: the run's stream, once it is
/// bound (`bind.rs`).
pub(crate) struct RunStream {
    run: Late,
    fd: u32,
    /// The writer of descriptor 1 or 2, made at its first use.
    output: Option<OutputFile>,
}

impl RunStream {
    pub(crate) fn new(run: &Late, fd: u32) -> Self {
        Self {
            run: run.clone(),
            fd,
            output: None,
        }
    }

    fn stdio(&self) -> io::Result<Stdio> {
        self.run
            .get()
            .map(|b| b.stdio.clone())
            .ok_or_else(|| io::Error::from(io::ErrorKind::NotConnected))
    }

    fn output(&mut self) -> io::Result<&mut OutputFile> {
        if self.output.is_none() {
            let made = self.stdio()?.output(self.fd);
            self.output = Some(made);
        }
        Ok(self.output.as_mut().expect("made above"))
    }
}

impl fmt::Debug for RunStream {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RunStream").field("fd", &self.fd).finish()
    }
}

impl SyncFile for RunStream {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        match self.fd {
            0 => self.stdio()?.stdin.lock().read(buf),
            _ => self.output()?.read(buf),
        }
    }

    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        match self.fd {
            0 => self.stdio()?.stdin.lock().write(buf),
            _ => self.output()?.write(buf),
        }
    }

    fn seek(&mut self, pos: SeekFrom) -> io::Result<u64> {
        match self.fd {
            0 => self.stdio()?.stdin.lock().seek(pos),
            _ => self.output()?.seek(pos),
        }
    }

    fn size(&self) -> u64 {
        match (self.fd, self.stdio()) {
            (0, Ok(stdio)) => stdio.stdin.lock().size(),
            _ => 0,
        }
    }

    fn read_ready(&self) -> usize {
        match (self.fd, self.stdio()) {
            (0, Ok(stdio)) => stdio.stdin.lock().read_ready(),
            _ => 1,
        }
    }

    fn special_fd(&self) -> Option<u32> {
        Some(self.fd)
    }
}
