//! The in-memory filesystem of a wasmsand sandbox.
//!
//! Directories are persistent maps (`im::OrdMap`) and file contents are reference-counted
//! buffers, so cloning a whole tree costs O(1) whatever it holds: [`Vfs::cow_clone`],
//! [`Vfs::snapshot`] and [`Vfs::restore`] are all O(1), and a later write copies only the
//! directories on its path (and the file it changes, once, if a clone still shares it).
//!
//! Limits live here: a count of nodes created after the initial layout, the bytes of file
//! content, and the paths that may change. Every refused change leaves the tree exactly as it
//! was. Errors are errno-shaped ([`Errno`]).

#![forbid(unsafe_code)]

mod changes;
mod delta;
pub mod det;
mod error;
mod host;
mod links;
mod merge;
mod mounts;
mod node;
/// Path arithmetic without a tree: joining onto a cwd, lexical normalization, Linux's length
/// limits.
pub mod path;

use std::borrow::Cow;
use std::sync::Arc;
use std::sync::atomic::AtomicU64;
use std::sync::atomic::Ordering::Relaxed;
use std::time::SystemTime;

use bytes::Bytes;

pub use changes::{Entry, PathChange};
pub use delta::{Attrs, Change, Delta};
pub use det::{DetState, Determinism, SharedDet};
pub use error::{Errno, VfsError, VfsResult};
pub use host::{MountInfo, MountOptions, SECRET_DENYLIST};
pub use merge::{MergeConflict, MergeError, MergeReport, MergedPath, SideChange};
use node::{Children, Content, Kind, Name, Node};
pub use node::{Device, DirEntry, FileType, Metadata};

/// Symlinks followed while resolving one path before `ELOOP`, as on Linux.
pub const MAX_SYMLINKS: u32 = 40;

/// Largest size one file may reach when no byte limit is set, so that a write at an absurd
/// offset fails with `EFBIG` instead of trying to allocate it.
pub const MAX_FILE_SIZE: u64 = 4 << 30;

const DIR_MODE: u32 = 0o755;
/// The umask a new tree starts with, as a login shell's.
const DEFAULT_UMASK: u32 = 0o022;
const SYMLINK_MODE: u32 = 0o777;

/// Limits and policy of a filesystem. Carried unchanged by [`Vfs::cow_clone`].
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct VfsOptions {
    /// Nodes (files, directories, symlinks, devices) that may exist beyond the initial layout.
    pub max_file_count: Option<u64>,
    /// Bytes of owned file content the tree may hold.
    pub fs_limit_bytes: Option<u64>,
    /// When set, only these paths (and what lies below them) may change; anything else is
    /// `EROFS`. Relative entries are taken from `/`.
    pub writable_paths: Option<Vec<String>>,
}

/// An opaque snapshot handle.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct SnapshotId(pub u64);

impl std::fmt::Display for SnapshotId {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}", self.0)
    }
}

impl std::str::FromStr for SnapshotId {
    type Err = std::num::ParseIntError;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        s.parse().map(SnapshotId)
    }
}

/// How much of its limits a filesystem uses.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Usage {
    /// Bytes of owned file content.
    pub bytes_used: u64,
    /// Nodes created since the initial layout, less those removed (never below zero).
    pub files_used: u64,
    /// Every node in the tree but the root, except those of mounted host folders (which the
    /// sandbox did not make).
    pub nodes: u64,
    /// The limit `files_used` counts against (`None`: unlimited).
    pub max_file_count: Option<u64>,
    /// The limit `bytes_used` counts against (`None`: unlimited).
    pub fs_limit_bytes: Option<u64>,
}

/// What changes a filesystem has seen since it was made: running totals that snapshots,
/// restores and clones do not rewind, so a caller reads them before and after an operation
/// and takes the difference. Atomics only because a `Vfs` must be `Sync`; every update
/// happens under `&mut self`.
#[derive(Debug, Default)]
struct Counters {
    bytes_written: AtomicU64,
    created: AtomicU64,
    deleted: AtomicU64,
    byte_limit_hits: AtomicU64,
    count_limit_hits: AtomicU64,
}

impl Clone for Counters {
    fn clone(&self) -> Self {
        let c = Counters::default();
        c.add(&c.bytes_written, self.bytes_written.load(Relaxed));
        c.add(&c.created, self.created.load(Relaxed));
        c.add(&c.deleted, self.deleted.load(Relaxed));
        c.add(&c.byte_limit_hits, self.byte_limit_hits.load(Relaxed));
        c.add(&c.count_limit_hits, self.count_limit_hits.load(Relaxed));
        c
    }
}

impl Counters {
    fn add(&self, c: &AtomicU64, n: u64) {
        c.fetch_add(n, Relaxed);
    }
}

/// Running totals of a filesystem's changes ([`Vfs::activity`]); subtract two readings to
/// get what happened between them.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Activity {
    /// Bytes written into regular files (whole-file writes and writes at an offset).
    pub bytes_written: u64,
    /// Nodes created: files, directories, symlinks, devices.
    pub created: u64,
    /// Nodes removed (a removed tree counts every node in it; a rename over a target counts
    /// the target).
    pub deleted: u64,
    /// Changes refused because the byte limit was reached.
    pub byte_limit_hits: u64,
    /// Changes refused because the file-count limit was reached.
    pub count_limit_hits: u64,
}

impl Activity {
    /// What happened since `earlier`.
    pub fn since(self, earlier: Activity) -> Activity {
        Activity {
            bytes_written: self.bytes_written.saturating_sub(earlier.bytes_written),
            created: self.created.saturating_sub(earlier.created),
            deleted: self.deleted.saturating_sub(earlier.deleted),
            byte_limit_hits: self.byte_limit_hits.saturating_sub(earlier.byte_limit_hits),
            count_limit_hits: self
                .count_limit_hits
                .saturating_sub(earlier.count_limit_hits),
        }
    }
}

/// A tree saved by [`Vfs::checkpoint`].
#[derive(Clone)]
pub struct Checkpoint(Tree);

impl std::fmt::Debug for Checkpoint {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Checkpoint")
            .field("nodes", &self.0.nodes)
            .field("bytes", &self.0.bytes)
            .finish()
    }
}

/// The tree and the counters that must always agree with it; what a snapshot keeps.
#[derive(Clone)]
struct Tree {
    root: Node,
    nodes: u64,
    bytes: u64,
    /// Hard-link groups (see `links.rs`).
    groups: links::Groups,
    next_group: u64,
    /// Host folders mounted in this tree, with the node each was mounted as: what
    /// [`Vfs::mount_changes`] compares with.
    mounts: Arc<Vec<(Arc<host::Mount>, Node)>>,
}

#[derive(Debug)]
struct Policy {
    max_file_count: Option<u64>,
    fs_limit_bytes: Option<u64>,
    writable_paths: Option<Vec<String>>,
}

/// An in-memory POSIX-like filesystem. See the crate documentation.
///
/// Paths are absolute; a relative path is taken from `/` (use [`path::join`] to resolve one
/// against a working directory). `..` at `/` stays at `/`, so no path leaves the tree.
#[derive(Clone)]
pub struct Vfs {
    tree: Tree,
    /// Nodes of the initial layout; the file-count limit counts what lies beyond them.
    baseline_nodes: u64,
    policy: Arc<Policy>,
    snapshots: im::OrdMap<u64, Tree>,
    next_snapshot: u64,
    next_ino: u64,
    in_layout: bool,
    /// Permission bits new files and directories do not get (the shell's `umask`).
    umask: u32,
    counters: Counters,
    /// Deterministic mode's clock and random stream (see [`det`]); `None`: the host's.
    det: Option<SharedDet>,
}

/// Where a path leads: the canonical directory that holds the target, the target's name in
/// it, and the target if it exists.
struct Walk<'a> {
    dir: Vec<Name>,
    /// `None` for the root.
    name: Option<Name>,
    node: Option<&'a Node>,
    /// Components left unresolved after a missing one (0 when only the last is missing).
    rest: usize,
    /// The path ended in `/`, so the target must be a directory.
    trailing_slash: bool,
}

impl Walk<'_> {
    fn full_path(&self) -> String {
        let mut s = String::new();
        for c in self.dir.iter().chain(self.name.iter()) {
            s.push('/');
            s.push_str(c);
        }
        if s.is_empty() {
            s.push('/');
        }
        s
    }

    /// The canonical directory and the name of the target, which must not be the root.
    fn into_target(self, path: &str) -> VfsResult<(Vec<Name>, Name)> {
        let name = self.name(path)?;
        Ok((self.dir, name))
    }

    fn name(&self, path: &str) -> VfsResult<Name> {
        self.name
            .clone()
            .ok_or_else(|| VfsError::new(Errno::EINVAL, path, "operation not valid on /"))
    }
}

impl Vfs {
    /// An empty filesystem (just `/`) with these limits.
    pub fn new(options: VfsOptions) -> Self {
        let writable_paths = options
            .writable_paths
            .map(|paths| paths.iter().map(|p| path::normalize(p)).collect());
        let now = SystemTime::now();
        Self {
            tree: Tree {
                root: Node::new(Kind::Dir(Children::new()), DIR_MODE, 1, now),
                nodes: 0,
                bytes: 0,
                groups: links::Groups::new(),
                next_group: 0,
                mounts: Arc::default(),
            },
            baseline_nodes: 0,
            policy: Arc::new(Policy {
                max_file_count: options.max_file_count,
                fs_limit_bytes: options.fs_limit_bytes,
                writable_paths,
            }),
            snapshots: im::OrdMap::new(),
            next_snapshot: 1,
            next_ino: 2,
            in_layout: false,
            umask: DEFAULT_UMASK,
            counters: Counters::default(),
            det: None,
        }
    }

    /// A filesystem with the standard layout ([`Vfs::standard_layout`]) already in place.
    pub fn with_standard_layout(options: VfsOptions) -> Self {
        let mut vfs = Self::new(options);
        vfs.layout(|v| v.standard_layout())
            .expect("the standard layout fits in an empty tree");
        vfs
    }

    /// The umask applied to files and directories created from now on.
    pub fn set_umask(&mut self, umask: u32) {
        self.umask = umask & 0o777;
    }

    /// The umask in force (permission bits only), `0o022` unless set.
    pub fn umask(&self) -> u32 {
        self.umask
    }

    fn file_mode(&self) -> u32 {
        0o666 & !self.umask
    }

    fn dir_mode(&self) -> u32 {
        0o777 & !self.umask
    }

    /// Runs `build` to lay out the initial tree: limits and writable paths do not apply, and
    /// the nodes that exist afterwards do not count against the file-count limit.
    pub fn layout<R>(&mut self, build: impl FnOnce(&mut Vfs) -> R) -> R {
        let was = std::mem::replace(&mut self.in_layout, true);
        let out = build(self);
        self.in_layout = was;
        self.baseline_nodes = self.tree.nodes;
        out
    }

    /// Creates the directories every sandbox has: `/bin`, `/dev` with `null`, `zero`,
    /// `urandom`, `stdin`, `stdout` and `stderr`, `/etc`, `/home/user`, `/tmp` (sticky, world-writable), `/usr/bin`,
    /// `/usr/local/bin`, `/usr/local/lib`. Existing entries are kept.
    pub fn standard_layout(&mut self) -> VfsResult<()> {
        for dir in [
            "/bin",
            "/dev",
            "/etc",
            "/home/user",
            "/tmp",
            "/usr/bin",
            "/usr/local/bin",
            "/usr/local/lib",
        ] {
            self.mkdir_p(dir)?;
        }
        self.chmod("/tmp", 0o1777)?;
        for (name, dev) in [
            ("/dev/null", Device::Null),
            ("/dev/zero", Device::Zero),
            ("/dev/full", Device::Full),
            ("/dev/urandom", Device::Urandom),
            ("/dev/stdin", Device::Stdin),
            ("/dev/stdout", Device::Stdout),
            ("/dev/stderr", Device::Stderr),
        ] {
            if !self.exists_nofollow(name) {
                self.mknod(name, dev)?;
            }
        }
        Ok(())
    }

    // ---------------------------------------------------------------------------------------
    // Whole-file operations

    /// The whole content of a regular file, without copying it.
    pub fn read(&self, path: &str) -> VfsResult<Bytes> {
        let w = self.resolve(path, true)?;
        let node = existing(&w, path)?;
        check_mode(node, 0o400, path)?;
        match &node.kind {
            Kind::File(c) => {
                if w.trailing_slash {
                    return Err(VfsError::plain(Errno::ENOTDIR, path));
                }
                c.load(path)?;
                Ok(c.to_bytes())
            }
            Kind::Dir(_) | Kind::HostDir(_) => Err(VfsError::plain(Errno::EISDIR, path)),
            Kind::Device(Device::Zero | Device::Full | Device::Urandom) => Err(VfsError::new(
                Errno::EINVAL,
                path,
                "device has no end; read it with read_at",
            )),
            Kind::Device(_) => Ok(Bytes::new()),
            Kind::Symlink(_) => unreachable!("resolve follows the last symlink"),
        }
    }

    /// Creates or replaces a regular file with `data` (following symlinks, as `open` with
    /// `O_CREAT|O_TRUNC` does). On `ENOSPC` the file is left as it was.
    pub fn write(&mut self, path: &str, data: impl AsRef<[u8]>) -> VfsResult<()> {
        let data = data.as_ref();
        let mode = self.file_mode();
        self.put_file(path, mode, || Content::Owned(Arc::new(data.to_vec())))
    }

    /// Creates or replaces a read-only-shared file: the bytes are the host's and are never
    /// copied unless the sandbox writes to the file. They do not count against the byte limit.
    pub fn write_shared(&mut self, path: &str, data: Bytes, mode: u32) -> VfsResult<()> {
        self.put_file(path, mode, || Content::Shared(data))
    }

    /// Appends to a regular file, creating it if needed. Amortized O(len) while no clone
    /// shares the file.
    pub fn append(&mut self, path: &str, data: impl AsRef<[u8]>) -> VfsResult<()> {
        let data = data.as_ref();
        let w = self.resolve(path, true)?;
        let len = match w.node.map(|n| &n.kind) {
            None => {
                drop(w);
                return self.write(path, data);
            }
            Some(Kind::Device(Device::Full)) => return Err(VfsError::plain(Errno::ENOSPC, path)),
            Some(Kind::Device(_)) => return Ok(()),
            Some(_) => file_len(existing(&w, path)?, path)?,
        };
        self.write_at(path, len, data).map(|_| ())
    }

    /// Creates an empty regular file if `path` does not exist (`O_CREAT`); with `exclusive`
    /// an existing one is `EEXIST` (`O_EXCL`). Returns whether a file was created.
    pub fn create(&mut self, path: &str, exclusive: bool) -> VfsResult<bool> {
        let w = self.resolve(path, !exclusive)?;
        if let Some(node) = w.node {
            if exclusive {
                return Err(VfsError::plain(Errno::EEXIST, path));
            }
            return match node.kind {
                Kind::Dir(_) | Kind::HostDir(_) => Err(VfsError::plain(Errno::EISDIR, path)),
                _ if w.trailing_slash => Err(VfsError::plain(Errno::ENOTDIR, path)),
                _ => Ok(false),
            };
        }
        drop(w);
        let mode = self.file_mode();
        self.put_file(path, mode, Content::empty).map(|()| true)
    }

    /// Creates a character device node.
    pub fn mknod(&mut self, path: &str, device: Device) -> VfsResult<()> {
        self.insert_new(path, || Kind::Device(device), 0o666)
    }

    // ---------------------------------------------------------------------------------------
    // Handle-style I/O

    /// Up to `len` bytes from `offset` (fewer at the end of the file). Devices behave as on
    /// Linux: `null` is empty, `zero` gives zeros, `urandom` random bytes.
    pub fn read_at(&self, path: &str, offset: u64, len: usize) -> VfsResult<Bytes> {
        let w = self.resolve(path, true)?;
        let node = existing(&w, path)?;
        check_mode(node, 0o400, path)?;
        match &node.kind {
            Kind::File(c) => {
                c.load(path)?;
                let data = c.as_slice();
                let start = usize::try_from(offset)
                    .unwrap_or(usize::MAX)
                    .min(data.len());
                let end = start.saturating_add(len).min(data.len());
                Ok(match c {
                    // Copy out of owned buffers: a slice sharing the buffer would make the
                    // writer's next write copy the whole file.
                    Content::Owned(_) => Bytes::copy_from_slice(&data[start..end]),
                    Content::Shared(b) => b.slice(start..end),
                    Content::Host(h) => h.loaded().slice(start..end),
                })
            }
            Kind::Dir(_) | Kind::HostDir(_) => Err(VfsError::plain(Errno::EISDIR, path)),
            Kind::Device(Device::Zero | Device::Full) => Ok(Bytes::from(vec![0u8; len])),
            Kind::Device(Device::Urandom) => {
                let mut buf = vec![0u8; len];
                if let Some(det) = &self.det {
                    det.lock().unwrap_or_else(|e| e.into_inner()).fill(&mut buf);
                    return Ok(Bytes::from(buf));
                }
                getrandom::fill(&mut buf).map_err(|e| {
                    VfsError::new(Errno::EINVAL, path, format!("no randomness: {e}"))
                })?;
                Ok(Bytes::from(buf))
            }
            Kind::Device(_) => Ok(Bytes::new()),
            Kind::Symlink(_) => unreachable!("resolve follows the last symlink"),
        }
    }

    /// Writes `data` at `offset` in an existing file, filling any gap with zeros. Returns the
    /// bytes written. Writes to a device vanish (`/dev/full` refuses them with `ENOSPC`).
    pub fn write_at(&mut self, path: &str, offset: u64, data: &[u8]) -> VfsResult<usize> {
        let w = self.resolve(path, true)?;
        let node = existing(&w, path)?;
        if let Kind::Device(d) = node.kind {
            if d == Device::Full && !data.is_empty() {
                return Err(VfsError::plain(Errno::ENOSPC, path));
            }
            return Ok(data.len());
        }
        let old_len = file_len(node, path)?;
        check_mode(node, 0o200, path)?;
        let end = offset
            .checked_add(data.len() as u64)
            .ok_or_else(|| VfsError::plain(Errno::EFBIG, path))?;
        let new_len = old_len.max(end);
        let growth = new_len - old_len;
        let counted_before = match &node.kind {
            Kind::File(c) => c.counted_len(),
            _ => 0,
        };
        let names = self.link_count(node);
        let (dir, name) = w.into_target(path)?;
        self.check_writable_at(&dir, Some(&name))?;
        // A shared file becomes owned on write, so all of it starts counting.
        let added = new_len - counted_before;
        self.check_size(path, new_len, added * names)?;
        let now = SystemTime::now();
        let node = self.node_mut(&dir, &name, path)?;
        let buf = match &mut node.kind {
            Kind::File(c) => c.make_mut(),
            _ => unreachable!("checked to be a file above"),
        };
        let start = offset as usize;
        if growth > 0 {
            buf.resize(new_len as usize, 0);
        }
        buf[start..start + data.len()].copy_from_slice(data);
        node.meta.mtime = now;
        node.meta.ctime = now;
        let linked = node.meta.link != 0;
        self.tree.bytes += added;
        self.count_write(data.len() as u64);
        if linked {
            self.sync_links_at(&dir, &name);
        }
        Ok(data.len())
    }

    /// Sets a file's length, cutting or zero-extending it.
    pub fn truncate(&mut self, path: &str, len: u64) -> VfsResult<()> {
        let w = self.resolve(path, true)?;
        let node = existing(&w, path)?;
        if let Kind::Device(_) = node.kind {
            return Ok(());
        }
        file_len(node, path)?;
        check_mode(node, 0o200, path)?;
        let counted_before = match &node.kind {
            Kind::File(c) => c.counted_len(),
            _ => 0,
        };
        let names = self.link_count(node);
        let (dir, name) = w.into_target(path)?;
        self.check_writable_at(&dir, Some(&name))?;
        self.check_size(path, len, len.saturating_sub(counted_before) * names)?;
        let now = SystemTime::now();
        let node = self.node_mut(&dir, &name, path)?;
        if let Kind::File(c) = &mut node.kind {
            c.make_mut().resize(len as usize, 0);
        }
        node.meta.mtime = now;
        node.meta.ctime = now;
        let linked = node.meta.link != 0;
        self.tree.bytes = self.tree.bytes - counted_before + len;
        if linked {
            self.sync_links_at(&dir, &name);
        }
        Ok(())
    }

    // ---------------------------------------------------------------------------------------
    // Directories

    /// Creates one directory; its parent must exist.
    pub fn mkdir(&mut self, path: &str) -> VfsResult<()> {
        let mode = self.dir_mode();
        self.insert_new(path, || Kind::Dir(Children::new()), mode)
    }

    /// Creates a directory and any missing parents (`mkdir -p`). Each directory created
    /// counts against the file-count limit; if any is refused, none is left behind.
    pub fn mkdir_p(&mut self, path: &str) -> VfsResult<()> {
        let saved = (self.tree.clone(), self.next_ino);
        let result = self.mkdir_p_inner(path);
        if result.is_err() {
            (self.tree, self.next_ino) = saved;
        }
        result
    }

    fn mkdir_p_inner(&mut self, path: &str) -> VfsResult<()> {
        loop {
            let w = self.walk(path, true)?;
            match w.node {
                Some(node) if node.children().is_some() => return Ok(()),
                Some(_) => return Err(VfsError::plain(Errno::EEXIST, path)),
                None => {
                    // A dangling symlink as the last component exists, as `mkdir` sees it.
                    if w.rest == 0 && self.exists_nofollow(path) {
                        return Err(VfsError::plain(Errno::EEXIST, path));
                    }
                    let (dir, name) = w.into_target(path)?;
                    let mode = self.dir_mode();
                    self.insert_at(&dir, name, path, Kind::Dir(Children::new()), mode)?;
                }
            }
        }
    }

    /// The entries of a directory, sorted by name (byte order), without `.` and `..`.
    pub fn readdir(&self, path: &str) -> VfsResult<Vec<DirEntry>> {
        Ok(self
            .children_of(path)?
            .iter()
            .map(|(name, child)| DirEntry {
                name: name.to_string(),
                file_type: child.file_type(),
                ino: child.meta.ino,
            })
            .collect())
    }

    /// The entries of a directory with the metadata of each (symlinks not followed), sorted
    /// by name.
    pub fn readdir_metadata(&self, path: &str) -> VfsResult<Vec<(String, Metadata)>> {
        Ok(self
            .children_of(path)?
            .iter()
            .map(|(name, child)| (name.to_string(), self.metadata_of(child)))
            .collect())
    }

    /// The entries of the directory `path` leads to, if it may be listed.
    fn children_of(&self, path: &str) -> VfsResult<&Children> {
        let w = self.resolve(path, true)?;
        let node = existing(&w, path)?;
        let children = node
            .children()
            .ok_or_else(|| VfsError::plain(Errno::ENOTDIR, path))?;
        check_mode(node, 0o400, path)?;
        if let Kind::HostDir(h) = &node.kind
            && let Some(e) = h.error(path)
        {
            return Err(e);
        }
        Ok(children)
    }

    /// Removes an empty directory.
    pub fn rmdir(&mut self, path: &str) -> VfsResult<()> {
        match path::last_component(path) {
            "." => return Err(VfsError::new(Errno::EINVAL, path, "cannot remove '.'")),
            ".." => return Err(VfsError::plain(Errno::ENOTEMPTY, path)),
            _ => {}
        }
        let w = self.resolve(path, false)?;
        let node = existing(&w, path)?;
        let children = node
            .children()
            .ok_or_else(|| VfsError::plain(Errno::ENOTDIR, path))?;
        if !children.is_empty() {
            return Err(VfsError::plain(Errno::ENOTEMPTY, path));
        }
        let (dir, name) = w.into_target(path)?;
        self.remove_entry(&dir, &name, path)
    }

    // ---------------------------------------------------------------------------------------
    // Names

    /// Removes a file, symlink or device (not a directory: `EISDIR`).
    pub fn unlink(&mut self, path: &str) -> VfsResult<()> {
        let w = self.resolve(path, false)?;
        let node = existing(&w, path)?;
        if node.children().is_some() {
            return Err(VfsError::plain(Errno::EISDIR, path));
        }
        if w.trailing_slash {
            return Err(VfsError::plain(Errno::ENOTDIR, path));
        }
        let (dir, name) = w.into_target(path)?;
        self.remove_entry(&dir, &name, path)
    }

    /// Removes whatever `path` names, directories with everything below them (`rm -r`).
    pub fn remove_recursive(&mut self, path: &str) -> VfsResult<()> {
        if matches!(path::last_component(path), "." | "..") {
            return Err(VfsError::new(
                Errno::EINVAL,
                path,
                "refusing to remove '.' or '..'",
            ));
        }
        let w = self.resolve(path, false)?;
        existing(&w, path)?;
        let (dir, name) = w.into_target(path)?;
        self.remove_entry(&dir, &name, path)
    }

    /// Renames a file or directory, replacing the target by POSIX rules: a directory may
    /// replace only an empty directory, a non-directory only a non-directory, and a directory
    /// cannot move inside itself.
    pub fn rename(&mut self, from: &str, to: &str) -> VfsResult<()> {
        for p in [from, to] {
            if matches!(path::last_component(p), "." | "..") {
                return Err(VfsError::new(Errno::EINVAL, p, "cannot rename '.' or '..'"));
            }
        }
        let wf = self.resolve(from, false)?;
        let src = existing(&wf, from)?;
        let src_name = wf.name(from)?;
        let wt = self.resolve(to, false)?;
        let dst_name = wt.name(to)?;
        let src_is_dir = src.children().is_some();
        if (wf.trailing_slash || wt.trailing_slash) && !src_is_dir {
            return Err(VfsError::plain(Errno::ENOTDIR, from));
        }
        if wf.dir == wt.dir && src_name == dst_name {
            return Ok(());
        }
        let mut replaced = (0, 0);
        if src_is_dir {
            let src_full: Vec<Name> = wf.dir.iter().cloned().chain([src_name.clone()]).collect();
            if wt.dir.starts_with(&src_full) {
                return Err(VfsError::new(
                    Errno::EINVAL,
                    to,
                    format!("cannot move '{from}' into itself"),
                ));
            }
        }
        if let Some(dst) = wt.node {
            // Two names of one node: rename does nothing, as POSIX says.
            if links::same_group(src, dst) {
                return Ok(());
            }
            match (src_is_dir, dst.children()) {
                (true, None) => return Err(VfsError::plain(Errno::ENOTDIR, to)),
                (true, Some(c)) if !c.is_empty() => {
                    return Err(VfsError::plain(Errno::ENOTEMPTY, to));
                }
                (false, Some(_)) => return Err(VfsError::plain(Errno::EISDIR, to)),
                _ => {}
            }
            replaced = dst.census();
        }
        let (from_dir, to_dir) = (wf.dir, wt.dir);
        self.check_writable_at(&from_dir, Some(&src_name))?;
        self.check_writable_at(&to_dir, Some(&dst_name))?;
        self.check_dir_writable(&from_dir, from)?;
        self.check_dir_writable(&to_dir, to)?;

        let now = SystemTime::now();
        let moved = {
            let parent = self.dir_mut(&from_dir, from)?;
            parent.meta.mtime = now;
            parent.meta.ctime = now;
            let children = parent.children_mut().expect("dir_mut returns directories");
            children
                .remove(&src_name)
                .ok_or_else(|| VfsError::plain(Errno::ENOENT, from))?
        };
        let mut moved = moved;
        moved.meta.ctime = now;
        let parent = self.dir_mut(&to_dir, to)?;
        parent.meta.mtime = now;
        parent.meta.ctime = now;
        parent
            .children_mut()
            .expect("dir_mut returns directories")
            .insert(dst_name.clone(), moved);
        self.tree.nodes -= replaced.0;
        self.tree.bytes -= replaced.1;
        self.counters.add(&self.counters.deleted, replaced.0);
        // Paths are built only when some node has several names: renames are frequent.
        if !self.tree.groups.is_empty() {
            let (src_full, dst_full) = (
                links::full_path(&from_dir, &src_name),
                links::full_path(&to_dir, &dst_name),
            );
            self.forget_links_under(&dst_full);
            self.move_links(&src_full, &dst_full);
        }
        Ok(())
    }

    /// Creates a symlink at `path` pointing to `target` (stored as given, resolved on use).
    pub fn symlink(&mut self, target: &str, path: &str) -> VfsResult<()> {
        if target.is_empty() {
            return Err(VfsError::new(Errno::ENOENT, path, "empty symlink target"));
        }
        path::validate(target).map_err(|e| VfsError {
            path: path.into(),
            ..e
        })?;
        let target: Arc<str> = Arc::from(target);
        self.insert_new(path, move || Kind::Symlink(target), SYMLINK_MODE)
    }

    /// The target of a symlink as it was stored.
    pub fn readlink(&self, path: &str) -> VfsResult<String> {
        let w = self.resolve(path, false)?;
        match &existing(&w, path)?.kind {
            Kind::Symlink(t) => Ok(t.to_string()),
            _ => Err(VfsError::new(Errno::EINVAL, path, "not a symbolic link")),
        }
    }

    /// The canonical absolute path (every symlink, `.` and `..` resolved); it must exist.
    pub fn realpath(&self, path: &str) -> VfsResult<String> {
        let w = self.resolve(path, true)?;
        existing(&w, path)?;
        Ok(w.full_path())
    }

    // ---------------------------------------------------------------------------------------
    // Metadata

    /// Metadata of what `path` names, following symlinks.
    pub fn stat(&self, path: &str) -> VfsResult<Metadata> {
        let w = self.resolve(path, true)?;
        let node = existing(&w, path)?;
        if w.trailing_slash && node.children().is_none() {
            return Err(VfsError::plain(Errno::ENOTDIR, path));
        }
        Ok(self.metadata_of(node))
    }

    /// Metadata of `path` itself (a symlink is not followed).
    pub fn lstat(&self, path: &str) -> VfsResult<Metadata> {
        let w = self.resolve(path, false)?;
        Ok(self.metadata_of(existing(&w, path)?))
    }

    /// Whether `path` exists, following symlinks (a dangling symlink does not exist).
    pub fn exists(&self, path: &str) -> bool {
        self.resolve(path, true).is_ok_and(|w| w.node.is_some())
    }

    fn exists_nofollow(&self, path: &str) -> bool {
        self.resolve(path, false).is_ok_and(|w| w.node.is_some())
    }

    /// Sets permission bits (follows symlinks, as `chmod` does).
    pub fn chmod(&mut self, path: &str, mode: u32) -> VfsResult<()> {
        self.update_meta(path, |meta, now| {
            meta.mode = mode & 0o7777;
            meta.ctime = now;
        })
    }

    /// Sets access and/or modification times (follows symlinks).
    pub fn set_times(
        &mut self,
        path: &str,
        atime: Option<SystemTime>,
        mtime: Option<SystemTime>,
    ) -> VfsResult<()> {
        self.update_meta(path, |meta, now| {
            if let Some(a) = atime {
                meta.atime = a;
            }
            if let Some(m) = mtime {
                meta.mtime = m;
            }
            meta.ctime = now;
        })
    }

    fn update_meta(
        &mut self,
        path: &str,
        change: impl FnOnce(&mut node::Meta, SystemTime),
    ) -> VfsResult<()> {
        let w = self.resolve(path, true)?;
        existing(&w, path)?;
        let now = SystemTime::now();
        let Some(name) = w.name.clone() else {
            if !self.in_layout && self.policy.writable_paths.is_some() && !self.is_writable("/") {
                return Err(VfsError::plain(Errno::EROFS, path));
            }
            change(&mut self.tree.root.meta, now);
            return Ok(());
        };
        let dir = w.dir;
        self.check_writable_at(&dir, Some(&name))?;
        let meta = &mut self.node_mut(&dir, &name, path)?.meta;
        change(meta, now);
        if meta.link != 0 {
            self.sync_links_at(&dir, &name);
        }
        Ok(())
    }

    // ---------------------------------------------------------------------------------------
    // Clones, snapshots, usage

    /// An independent copy of the whole filesystem in O(1), with the same limits, counters,
    /// writable paths and snapshots. Later changes to either side are invisible to the other.
    pub fn cow_clone(&self) -> Vfs {
        let mut copy = self.clone();
        copy.det = self.det.as_ref().map(det::detach);
        copy
    }

    /// Puts the filesystem (and every program run on it) in deterministic mode, or back
    /// to the host's clock and randomness with `None`.
    pub fn set_deterministic(&mut self, config: Option<Determinism>) {
        self.det = config.map(|c| Arc::new(std::sync::Mutex::new(DetState::new(c))));
    }

    /// Deterministic mode's state, when on: programs read their clock and random bytes
    /// from it.
    pub fn deterministic(&self) -> Option<SharedDet> {
        self.det.clone()
    }

    /// An O(1) copy of this tree under other limits, without its snapshots: how a prepared
    /// template becomes a sandbox's filesystem. What exists now is the copy's initial layout
    /// (it does not count against the file-count limit).
    pub fn with_options(&self, options: VfsOptions) -> Vfs {
        let fresh = Vfs::new(options);
        Vfs {
            tree: self.tree.clone(),
            baseline_nodes: self.tree.nodes,
            policy: fresh.policy,
            snapshots: im::OrdMap::new(),
            next_snapshot: 1,
            next_ino: self.next_ino,
            in_layout: false,
            umask: self.umask,
            counters: Counters::default(),
            det: None,
        }
    }

    /// Records the current tree in O(1) and returns its id.
    pub fn snapshot(&mut self) -> SnapshotId {
        let id = self.next_snapshot;
        self.next_snapshot += 1;
        self.snapshots.insert(id, self.tree.clone());
        SnapshotId(id)
    }

    /// Puts the tree back as it was when `id` was taken, in O(1). The snapshot stays usable.
    pub fn restore(&mut self, id: SnapshotId) -> VfsResult<()> {
        self.tree = self.tree_at_snapshot(id)?.clone();
        Ok(())
    }

    fn tree_at_snapshot(&self, id: SnapshotId) -> VfsResult<&Tree> {
        self.snapshots
            .get(&id.0)
            .ok_or_else(|| unknown_snapshot(id))
    }

    /// The tree as it is now, in O(1), to put back with [`Vfs::rollback`]: a snapshot the
    /// filesystem does not list or keep.
    pub fn checkpoint(&self) -> Checkpoint {
        Checkpoint(self.tree.clone())
    }

    /// Puts the tree back as it was at `checkpoint`, in O(1). Snapshots taken since are kept;
    /// the [`Vfs::activity`] totals are not rewound.
    pub fn rollback(&mut self, checkpoint: Checkpoint) {
        self.tree = checkpoint.0;
    }

    /// Forgets a snapshot, releasing what only it kept alive.
    pub fn drop_snapshot(&mut self, id: SnapshotId) -> VfsResult<()> {
        self.snapshots
            .remove(&id.0)
            .map(|_| ())
            .ok_or_else(|| unknown_snapshot(id))
    }

    /// The ids of the snapshots this filesystem holds, oldest first.
    pub fn snapshot_ids(&self) -> Vec<SnapshotId> {
        self.snapshots.keys().map(|&k| SnapshotId(k)).collect()
    }

    /// Running totals of the changes made to this filesystem (see [`Activity::since`]).
    pub fn activity(&self) -> Activity {
        let c = &self.counters;
        Activity {
            bytes_written: c.bytes_written.load(Relaxed),
            created: c.created.load(Relaxed),
            deleted: c.deleted.load(Relaxed),
            byte_limit_hits: c.byte_limit_hits.load(Relaxed),
            count_limit_hits: c.count_limit_hits.load(Relaxed),
        }
    }

    fn count_write(&self, n: u64) {
        if !self.in_layout {
            self.counters.add(&self.counters.bytes_written, n);
        }
    }

    /// What the tree uses of its limits now (O(1): the counts are kept up to date).
    pub fn usage(&self) -> Usage {
        Usage {
            bytes_used: self.tree.bytes,
            files_used: self.tree.nodes.saturating_sub(self.baseline_nodes),
            nodes: self.tree.nodes,
            max_file_count: self.policy.max_file_count,
            fs_limit_bytes: self.policy.fs_limit_bytes,
        }
    }

    /// The options this filesystem was made with (writable paths normalized).
    pub fn options(&self) -> VfsOptions {
        VfsOptions {
            max_file_count: self.policy.max_file_count,
            fs_limit_bytes: self.policy.fs_limit_bytes,
            writable_paths: self.policy.writable_paths.clone(),
        }
    }

    /// Whether a change at this normalized absolute path is allowed by the writable paths.
    pub fn is_writable(&self, path: &str) -> bool {
        match &self.policy.writable_paths {
            None => true,
            Some(paths) => paths.iter().any(|p| path::is_within(path, p)),
        }
    }

    // ---------------------------------------------------------------------------------------
    // Resolution

    fn resolve(&self, path: &str, follow_last: bool) -> VfsResult<Walk<'_>> {
        let w = self.walk(path, follow_last)?;
        if w.rest > 0 {
            return Err(VfsError::plain(Errno::ENOENT, path));
        }
        Ok(w)
    }

    /// Follows `path` from the root. A missing component ends the walk (`node: None`) with
    /// the number of components left after it in `rest`.
    fn walk(&self, path: &str, follow_last: bool) -> VfsResult<Walk<'_>> {
        path::validate(path)?;
        let trailing_slash = path.len() > 1 && path.ends_with('/');
        let follow_last = follow_last || trailing_slash;
        // Components still to visit, last first, so symlink targets can be pushed on top.
        let mut pending: Vec<Cow<'_, str>> = components(path).map(Cow::Borrowed).collect();
        pending.reverse();
        let mut nodes: Vec<&Node> = vec![&self.tree.root];
        let mut names: Vec<Name> = Vec::new();
        let mut links = 0;
        while let Some(comp) = pending.pop() {
            let is_last = pending.is_empty();
            if comp == ".." {
                if !names.is_empty() {
                    names.pop();
                    nodes.pop();
                }
                continue;
            }
            let cur = *nodes.last().expect("the root is never popped");
            let children = cur.children().expect("only directories are pushed");
            check_mode(cur, 0o100, path)?;
            let Some((key, child)) = children.get_key_value(comp.as_ref()) else {
                return Ok(Walk {
                    dir: names,
                    name: Some(Name::from(comp.as_ref())),
                    node: None,
                    rest: pending.len(),
                    trailing_slash,
                });
            };
            match &child.kind {
                Kind::Symlink(target) if !is_last || follow_last => {
                    links += 1;
                    if links > MAX_SYMLINKS {
                        return Err(VfsError::plain(Errno::ELOOP, path));
                    }
                    if target.starts_with('/') {
                        nodes.truncate(1);
                        names.clear();
                    }
                    let at = pending.len();
                    pending.extend(components(target).map(|c| Cow::Owned(c.to_owned())));
                    pending[at..].reverse();
                }
                Kind::Dir(_) | Kind::HostDir(_) => {
                    if is_last {
                        return Ok(Walk {
                            dir: names,
                            name: Some(key.clone()),
                            node: Some(child),
                            rest: 0,
                            trailing_slash,
                        });
                    }
                    names.push(key.clone());
                    nodes.push(child);
                }
                _ if is_last => {
                    return Ok(Walk {
                        dir: names,
                        name: Some(key.clone()),
                        node: Some(child),
                        rest: 0,
                        trailing_slash,
                    });
                }
                _ => return Err(VfsError::plain(Errno::ENOTDIR, path)),
            }
        }
        // The path ended on a directory reached through `..`, `.` or a symlink, or is `/`.
        let node = *nodes.last().expect("the root is never popped");
        let name = names.pop();
        Ok(Walk {
            dir: names,
            name,
            node: Some(node),
            rest: 0,
            trailing_slash,
        })
    }

    fn dir_mut(&mut self, dir: &[Name], path: &str) -> VfsResult<&mut Node> {
        let mut cur = &mut self.tree.root;
        for name in dir {
            cur = cur
                .children_mut()
                .and_then(|c| c.get_mut(name))
                .filter(|n| n.children().is_some())
                .ok_or_else(|| VfsError::plain(Errno::ENOENT, path))?;
        }
        Ok(cur)
    }

    fn node_mut(&mut self, dir: &[Name], name: &Name, path: &str) -> VfsResult<&mut Node> {
        self.dir_mut(dir, path)?
            .children_mut()
            .and_then(|c| c.get_mut(name))
            .ok_or_else(|| VfsError::plain(Errno::ENOENT, path))
    }

    // ---------------------------------------------------------------------------------------
    // Checked changes

    fn check_writable_at(&self, dir: &[Name], name: Option<&Name>) -> VfsResult<()> {
        if self.in_layout {
            return Ok(());
        }
        let read_only = self.in_read_only_mount(dir, name);
        if self.policy.writable_paths.is_none() && !read_only {
            return Ok(());
        }
        let mut full = String::new();
        for c in dir.iter().chain(name) {
            full.push('/');
            full.push_str(c);
        }
        if full.is_empty() {
            full.push('/');
        }
        if read_only {
            return Err(VfsError::new(
                Errno::EROFS,
                full,
                "read-only file system (a read-only mount)",
            ));
        }
        if self.is_writable(&full) {
            Ok(())
        } else {
            Err(VfsError::plain(Errno::EROFS, full))
        }
    }

    /// Entries may be added to or removed from `dir` (owner write and search bits).
    fn check_dir_writable(&self, dir: &[Name], path: &str) -> VfsResult<()> {
        if self.in_layout {
            return Ok(());
        }
        let mut cur = &self.tree.root;
        for name in dir {
            cur = cur
                .children()
                .and_then(|c| c.get(name))
                .ok_or_else(|| VfsError::plain(Errno::ENOENT, path))?;
        }
        check_mode(cur, 0o300, path)
    }

    fn check_new_node(&self, path: &str) -> VfsResult<()> {
        if self.in_layout {
            return Ok(());
        }
        if let Some(max) = self.policy.max_file_count
            && self.tree.nodes + 1 > self.baseline_nodes + max
        {
            self.counters.add(&self.counters.count_limit_hits, 1);
            return Err(VfsError::new(
                Errno::ENOSPC,
                path,
                format!("file count limit reached (max: {max})"),
            ));
        }
        Ok(())
    }

    /// A file may reach `new_len` bytes, adding `added` counted bytes to the tree.
    fn check_size(&self, path: &str, new_len: u64, added: u64) -> VfsResult<()> {
        if new_len > MAX_FILE_SIZE && self.policy.fs_limit_bytes.is_none() {
            return Err(VfsError::plain(Errno::EFBIG, path));
        }
        if self.in_layout || added == 0 {
            return Ok(());
        }
        if let Some(limit) = self.policy.fs_limit_bytes
            && self.tree.bytes + added > limit
        {
            self.counters.add(&self.counters.byte_limit_hits, 1);
            return Err(VfsError::new(
                Errno::ENOSPC,
                path,
                format!(
                    "filesystem size limit reached ({} of {limit} bytes used, {added} more needed)",
                    self.tree.bytes
                ),
            ));
        }
        Ok(())
    }

    /// Creates or replaces the regular file at `path` with what `content` builds.
    fn put_file(
        &mut self,
        path: &str,
        mode: u32,
        content: impl FnOnce() -> Content,
    ) -> VfsResult<()> {
        let w = self.resolve(path, true)?;
        match w.node {
            None => {
                if w.trailing_slash {
                    return Err(VfsError::plain(Errno::EISDIR, path));
                }
                let (dir, name) = w.into_target(path)?;
                let content = content();
                let len = content.counted_len();
                self.check_size(path, content.len(), len)?;
                let written = content.len();
                self.insert_at(&dir, name, path, Kind::File(content), mode)?;
                self.tree.bytes += len;
                self.count_write(written);
                Ok(())
            }
            Some(node) => {
                let old = match &node.kind {
                    Kind::Dir(_) | Kind::HostDir(_) => {
                        return Err(VfsError::plain(Errno::EISDIR, path));
                    }
                    Kind::Device(Device::Full) => return Err(VfsError::plain(Errno::ENOSPC, path)),
                    Kind::Device(_) => return Ok(()),
                    Kind::File(_) if w.trailing_slash => {
                        return Err(VfsError::plain(Errno::ENOTDIR, path));
                    }
                    Kind::File(c) => c.counted_len(),
                    Kind::Symlink(_) => unreachable!("resolve follows the last symlink"),
                };
                check_mode(node, 0o200, path)?;
                let names = self.link_count(node);
                let (dir, name) = w.into_target(path)?;
                self.check_writable_at(&dir, Some(&name))?;
                let content = content();
                let new = content.counted_len();
                self.check_size(path, content.len(), new.saturating_sub(old) * names)?;
                let now = SystemTime::now();
                let written = content.len();
                let node = self.node_mut(&dir, &name, path)?;
                node.set_kind(Kind::File(content));
                node.meta.mtime = now;
                node.meta.ctime = now;
                let linked = node.meta.link != 0;
                self.tree.bytes = self.tree.bytes - old + new;
                self.count_write(written);
                if linked {
                    self.sync_links_at(&dir, &name);
                }
                Ok(())
            }
        }
    }

    /// Creates a node that must not exist yet (`EEXIST`), without following a final symlink.
    fn insert_new(&mut self, path: &str, kind: impl FnOnce() -> Kind, mode: u32) -> VfsResult<()> {
        let w = self.resolve(path, false)?;
        if w.node.is_some() {
            return Err(VfsError::plain(Errno::EEXIST, path));
        }
        let (dir, name) = w.into_target(path)?;
        self.insert_at(&dir, name, path, kind(), mode)
    }

    /// Inserts a node at a missing name of an existing directory, after every check.
    fn insert_at(
        &mut self,
        dir: &[Name],
        name: Name,
        path: &str,
        kind: Kind,
        mode: u32,
    ) -> VfsResult<()> {
        self.check_writable_at(dir, Some(&name))?;
        self.check_dir_writable(dir, path)?;
        self.check_new_node(path)?;
        let now = SystemTime::now();
        let ino = self.next_ino;
        let parent = self.dir_mut(dir, path)?;
        parent.meta.mtime = now;
        parent.meta.ctime = now;
        parent
            .children_mut()
            .expect("dir_mut returns directories")
            .insert(name, Node::new(kind, mode, ino, now));
        self.next_ino += 1;
        self.tree.nodes += 1;
        if !self.in_layout {
            self.counters.add(&self.counters.created, 1);
        }
        Ok(())
    }

    /// Removes an existing entry and everything below it, giving back its nodes and bytes.
    fn remove_entry(&mut self, dir: &[Name], name: &Name, path: &str) -> VfsResult<()> {
        self.check_writable_at(dir, Some(name))?;
        self.check_dir_writable(dir, path)?;
        let now = SystemTime::now();
        let parent = self.dir_mut(dir, path)?;
        parent.meta.mtime = now;
        parent.meta.ctime = now;
        let removed = parent
            .children_mut()
            .expect("dir_mut returns directories")
            .remove(name)
            .ok_or_else(|| VfsError::plain(Errno::ENOENT, path))?;
        let (nodes, bytes) = removed.census();
        self.tree.nodes -= nodes;
        self.tree.bytes -= bytes;
        if !self.in_layout {
            self.counters.add(&self.counters.deleted, nodes);
        }
        if !self.tree.groups.is_empty() {
            self.forget_links_under(&links::full_path(dir, name));
        }
        Ok(())
    }
}

impl Default for Vfs {
    fn default() -> Self {
        Self::new(VfsOptions::default())
    }
}

impl std::fmt::Debug for Vfs {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Vfs")
            .field("usage", &self.usage())
            .field("policy", &self.policy)
            .field("snapshots", &self.snapshots.len())
            .finish()
    }
}

fn components(path: &str) -> impl Iterator<Item = &str> {
    path.split('/').filter(|c| !c.is_empty() && *c != ".")
}

fn existing<'a>(w: &Walk<'a>, path: &str) -> VfsResult<&'a Node> {
    w.node.ok_or_else(|| VfsError::plain(Errno::ENOENT, path))
}

/// The length of a regular file; other kinds are errors.
fn file_len(node: &Node, path: &str) -> VfsResult<u64> {
    match &node.kind {
        Kind::File(c) => {
            // Changing a host file starts from its bytes: they must be readable.
            c.load(path)?;
            Ok(c.len())
        }
        Kind::Dir(_) | Kind::HostDir(_) => Err(VfsError::plain(Errno::EISDIR, path)),
        _ => Err(VfsError::new(Errno::EINVAL, path, "not a regular file")),
    }
}

/// The owner permission bits in `need` are all set (the sandbox's user owns every node).
fn check_mode(node: &Node, need: u32, path: &str) -> VfsResult<()> {
    if node.meta.mode & need == need {
        Ok(())
    } else {
        Err(VfsError::plain(Errno::EACCES, path))
    }
}

fn unknown_snapshot(id: SnapshotId) -> VfsError {
    VfsError::new(Errno::EINVAL, "", format!("unknown snapshot id {id}"))
}
