use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::SystemTime;

use bytes::Bytes;

use crate::{VfsError, VfsResult};

/// A directory whose entries come from outside the tree and are listed on first use (a
/// mounted host folder, `host.rs`). Shared by every clone of the tree that holds it.
pub(crate) trait LazyDir: Send + Sync {
    /// The entries (empty when they could not be listed: see `error`).
    fn children(&self) -> &Children;
    /// Why the entries could not be listed, if they could not.
    fn error(&self, path: &str) -> Option<VfsError>;
    /// The link count to report without listing.
    fn nlink(&self) -> u64;
    /// Nothing below it may change.
    fn read_only(&self) -> bool;
}

/// A file whose bytes come from outside the tree and are read on first use.
pub(crate) trait LazyFile: Send + Sync {
    /// The length, without reading the bytes when they are not read yet.
    fn len(&self) -> u64;
    /// The bytes (empty when they could not be read: see `load`).
    fn loaded(&self) -> &Bytes;
    /// Reads the bytes if needed, or says why they cannot be read.
    fn load(&self, path: &str) -> VfsResult<()>;
    /// Which file this is: two with the same key have the same bytes.
    fn key(&self) -> (usize, &std::path::Path);
}

/// A name inside a directory. Shared so that copying a B-tree chunk on write costs reference
/// count bumps, not string allocations.
pub(crate) type Name = Arc<str>;
pub(crate) type Children = im::OrdMap<Name, Node>;

/// What kind of node a path names.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum FileType {
    /// A regular file.
    File,
    /// A directory.
    Dir,
    /// A symbolic link (only `lstat` and directory listings report one).
    Symlink,
    /// One of the [`Device`]s under `/dev`.
    CharDevice,
}

/// The character devices the sandbox provides under `/dev`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Device {
    /// Reads are empty, writes vanish.
    Null,
    /// Reads give zero bytes, writes vanish.
    Zero,
    /// Reads give random bytes, writes vanish.
    Urandom,
    /// `/dev/full`: reads give zero bytes, writes fail with `ENOSPC` (for testing what a
    /// program does when its output cannot be written).
    Full,
    /// `/dev/stdin`, `/dev/stdout`, `/dev/stderr`: the running program's own streams. The
    /// filesystem only marks them (they act like `Null` here); whoever runs programs connects
    /// them to the program's descriptors 0, 1 and 2.
    Stdin,
    /// `/dev/stdout`, the running program's descriptor 1 (see [`Device::Stdin`]).
    Stdout,
    /// `/dev/stderr`, the running program's descriptor 2 (see [`Device::Stdin`]).
    Stderr,
}

/// The content of a regular file.
#[derive(Clone)]
pub(crate) enum Content {
    /// Bytes the sandbox owns. Copied on write only while a clone or snapshot shares them;
    /// otherwise appended to in place, so many small writes cost O(total).
    Owned(Arc<Vec<u8>>),
    /// Read-only bytes the host provides (guest programs, the Python stdlib). Never copied per
    /// sandbox and not counted against the sandbox's byte limit; a write replaces them with an
    /// owned copy.
    Shared(Bytes),
    /// A file of a mounted host folder, read on first use and then kept (see `host.rs`).
    /// Counted as `Shared` is.
    Host(Arc<dyn LazyFile>),
}

impl Content {
    pub(crate) fn empty() -> Self {
        Content::Owned(Arc::new(Vec::new()))
    }

    pub(crate) fn as_slice(&self) -> &[u8] {
        match self {
            Content::Owned(v) => v,
            Content::Shared(b) => b,
            Content::Host(h) => h.loaded(),
        }
    }

    pub(crate) fn len(&self) -> u64 {
        match self {
            // A host file is not read to learn its size.
            Content::Host(h) => h.len(),
            _ => self.as_slice().len() as u64,
        }
    }

    /// Reads a host file's bytes if they are not read yet; an error says why they cannot be.
    pub(crate) fn load(&self, path: &str) -> VfsResult<()> {
        match self {
            Content::Host(h) => h.load(path),
            _ => Ok(()),
        }
    }

    /// Bytes this content counts against the filesystem's byte limit.
    pub(crate) fn counted_len(&self) -> u64 {
        match self {
            Content::Owned(v) => v.len() as u64,
            Content::Shared(_) | Content::Host(_) => 0,
        }
    }

    /// The content as `Bytes` without copying.
    pub(crate) fn to_bytes(&self) -> Bytes {
        match self {
            Content::Owned(v) => Bytes::from_owner(OwnedBytes(Arc::clone(v))),
            Content::Shared(b) => b.clone(),
            Content::Host(h) => h.loaded().clone(),
        }
    }

    /// A mutable buffer, copying only when the content is shared with a clone, a snapshot, a
    /// reader still holding its bytes, or the host.
    pub(crate) fn make_mut(&mut self) -> &mut Vec<u8> {
        match self {
            Content::Shared(b) => *self = Content::Owned(Arc::new(b.to_vec())),
            Content::Host(h) => *self = Content::Owned(Arc::new(h.loaded().to_vec())),
            Content::Owned(_) => {}
        }
        match self {
            Content::Owned(v) => Arc::make_mut(v),
            _ => unreachable!("replaced by an owned copy above"),
        }
    }
}

struct OwnedBytes(Arc<Vec<u8>>);

impl AsRef<[u8]> for OwnedBytes {
    fn as_ref(&self) -> &[u8] {
        &self.0
    }
}

#[derive(Clone)]
pub(crate) enum Kind {
    File(Content),
    Dir(Children),
    /// A directory of a mounted host folder, listed on first use (see `host.rs`); a change
    /// below it turns it into a `Dir` holding the same entries.
    HostDir(Arc<dyn LazyDir>),
    Symlink(Arc<str>),
    Device(Device),
}

#[derive(Debug, Clone, Copy)]
pub(crate) struct Meta {
    pub(crate) mode: u32,
    pub(crate) ino: u64,
    pub(crate) atime: SystemTime,
    pub(crate) mtime: SystemTime,
    pub(crate) ctime: SystemTime,
    /// The hard-link group this node belongs to (see `links.rs`); 0: none, the only name.
    pub(crate) link: u64,
    /// The node came from a mounted host folder: it was not made by the sandbox, so it does
    /// not count against the file-count limit (its content may, once the sandbox writes it).
    pub(crate) host: bool,
}

/// A directory's link count (2 and one per subdirectory), kept from its first `stat` until
/// its entries change: counting walks every entry, and a path lookup `stat`s each directory it
/// passes, so a guest working in a directory of thousands of files paid for all of them at
/// each step. 0: not counted since the last change.
#[derive(Default)]
pub(crate) struct DirLinks(AtomicU64);

impl Clone for DirLinks {
    fn clone(&self) -> Self {
        Self(AtomicU64::new(self.0.load(Ordering::Relaxed)))
    }
}

/// One node of the tree. Cloning is O(1) whatever it holds.
#[derive(Clone)]
pub(crate) struct Node {
    pub(crate) kind: Kind,
    pub(crate) meta: Meta,
    /// Written only through `children_mut` and `set_kind`, which forget it.
    links: DirLinks,
}

impl Node {
    /// A node of `kind` with `meta` as it is (a mounted folder's, read from the host).
    pub(crate) fn with_meta(kind: Kind, meta: Meta) -> Self {
        Self {
            kind,
            meta,
            links: DirLinks::default(),
        }
    }

    /// Makes the node one of another kind (a file's new content).
    pub(crate) fn set_kind(&mut self, kind: Kind) {
        self.kind = kind;
        self.links = DirLinks::default();
    }

    pub(crate) fn new(kind: Kind, mode: u32, ino: u64, now: SystemTime) -> Self {
        Self {
            links: DirLinks::default(),
            kind,
            meta: Meta {
                mode: mode & 0o7777,
                ino,
                atime: now,
                mtime: now,
                ctime: now,
                link: 0,
                host: false,
            },
        }
    }

    pub(crate) fn file_type(&self) -> FileType {
        match self.kind {
            Kind::File(_) => FileType::File,
            Kind::Dir(_) | Kind::HostDir(_) => FileType::Dir,
            Kind::Symlink(_) => FileType::Symlink,
            Kind::Device(_) => FileType::CharDevice,
        }
    }

    pub(crate) fn children(&self) -> Option<&Children> {
        match &self.kind {
            Kind::Dir(c) => Some(c),
            Kind::HostDir(h) => Some(h.children()),
            _ => None,
        }
    }

    /// The entries to change; a host directory becomes the sandbox's own first (its
    /// entries are the host's listing, shared, so this costs O(1) once listed).
    pub(crate) fn children_mut(&mut self) -> Option<&mut Children> {
        self.links = DirLinks::default();
        if let Kind::HostDir(h) = &self.kind {
            self.kind = Kind::Dir(h.children().clone());
        }
        match &mut self.kind {
            Kind::Dir(c) => Some(c),
            _ => None,
        }
    }

    pub(crate) fn is_dir(&self) -> bool {
        matches!(self.kind, Kind::Dir(_) | Kind::HostDir(_))
    }

    pub(crate) fn size(&self) -> u64 {
        match &self.kind {
            Kind::File(c) => c.len(),
            Kind::Symlink(t) => t.len() as u64,
            // Linux reports a directory's size as one block whatever it holds.
            Kind::Dir(_) | Kind::HostDir(_) => 4096,
            Kind::Device(_) => 0,
        }
    }

    pub(crate) fn metadata(&self) -> Metadata {
        let nlink = match &self.kind {
            Kind::Dir(c) => match self.links.0.load(Ordering::Relaxed) {
                0 => {
                    let n = 2 + c.values().filter(|n| n.is_dir()).count() as u64;
                    self.links.0.store(n, Ordering::Relaxed);
                    n
                }
                n => n,
            },
            // The host's count: listing a directory to count its subdirectories would make
            // every `stat` of a mounted directory read the host.
            Kind::HostDir(h) => h.nlink(),
            _ => 1,
        };
        Metadata {
            file_type: self.file_type(),
            size: self.size(),
            mode: self.meta.mode,
            ino: self.meta.ino,
            nlink,
            atime: self.meta.atime,
            mtime: self.meta.mtime,
            ctime: self.meta.ctime,
            device: match self.kind {
                Kind::Device(d) => Some(d),
                _ => None,
            },
            shared: matches!(self.kind, Kind::File(Content::Shared(_) | Content::Host(_))),
        }
    }

    /// How many counted nodes this subtree holds (itself included) and how many counted
    /// file bytes. Nodes of a mounted folder are not counted, and a host directory the
    /// sandbox has not changed holds nothing counted (so it is never listed for this).
    pub(crate) fn census(&self) -> (u64, u64) {
        let me = u64::from(!self.meta.host);
        match &self.kind {
            Kind::File(c) => (me, c.counted_len()),
            Kind::Dir(children) => children.values().fold((me, 0), |(n, b), child| {
                let (cn, cb) = child.census();
                (n + cn, b + cb)
            }),
            _ => (me, 0),
        }
    }
}

/// What `stat` and `lstat` report.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Metadata {
    /// File, directory, symlink or character device.
    pub file_type: FileType,
    /// Bytes of content for files, the target's length for symlinks, 4096 for directories.
    pub size: u64,
    /// Permission bits (`0o7777` at most); the type is in `file_type`.
    pub mode: u32,
    /// Unique among the live nodes of one tree.
    pub ino: u64,
    /// Links to the node: the names of a hard-linked node (1 for a node with one name), 2 plus
    /// its subdirectories for a directory, as on Linux.
    pub nlink: u64,
    /// Access time: set when the node is made and by `set_times`; reads do not move it (as
    /// a `noatime` mount), so reading never changes a tree.
    pub atime: SystemTime,
    /// Last change of the content.
    pub mtime: SystemTime,
    /// Last change of the content or the attributes (mode, links, times).
    pub ctime: SystemTime,
    /// Which device, for character devices.
    pub device: Option<Device>,
    /// Whether the content is read-only bytes shared with the host (not counted against the
    /// byte limit).
    pub shared: bool,
}

impl Metadata {
    /// Whether this is a directory (after following symlinks, for `stat`).
    pub fn is_dir(&self) -> bool {
        self.file_type == FileType::Dir
    }

    /// Whether this is a regular file (devices are not).
    pub fn is_file(&self) -> bool {
        self.file_type == FileType::File
    }

    /// Whether this is a symlink; only `lstat` can report one.
    pub fn is_symlink(&self) -> bool {
        self.file_type == FileType::Symlink
    }

    /// `st_mode` as Linux spells it: type bits and permission bits.
    pub fn st_mode(&self) -> u32 {
        let kind = match self.file_type {
            FileType::File => 0o100000,
            FileType::Dir => 0o040000,
            FileType::Symlink => 0o120000,
            FileType::CharDevice => 0o020000,
        };
        kind | self.mode
    }
}

/// One entry of a directory listing.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DirEntry {
    /// The entry's name in its directory (one component, no `/`).
    pub name: String,
    /// The entry's own type: a symlink is listed as a symlink, not as its target.
    pub file_type: FileType,
    /// The same inode number `lstat` gives for the entry.
    pub ino: u64,
}
