//! What changed between two trees, and applying it: the ground of portable state (a sandbox
//! travels as its changes against the shared initial layout) and of merging a fork back (its
//! changes since the fork point, three-way against its parent's).
//!
//! The walk compares the two trees side by side and skips every directory whose children
//! map is the same persistent map on both sides, so its cost follows what changed, not what
//! the trees hold.

use std::sync::Arc;
use std::time::SystemTime;

use bytes::Bytes;

use crate::node::{Children, Content, Kind, Meta, Name, Node};
use crate::{Checkpoint, Device, Vfs, VfsError, VfsResult};

/// One path's new state in a [`Delta`].
#[derive(Clone)]
pub enum Change {
    /// The path no longer exists (with everything below it).
    Removed,
    /// A directory with these attributes; what it holds comes in entries of its own.
    Dir(Attrs),
    /// A regular file with these attributes and this whole content.
    File(Attrs, Bytes),
    /// A symlink with these attributes pointing at this target (not resolved).
    Symlink(Attrs, String),
    /// A character device with these attributes.
    Device(Attrs, Device),
}

/// Mode and times of a node.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Attrs {
    /// Permission bits, as [`Metadata::mode`](crate::Metadata::mode).
    pub mode: u32,
    /// Access time (see [`Metadata::atime`](crate::Metadata::atime)).
    pub atime: SystemTime,
    /// Last change of the content.
    pub mtime: SystemTime,
    /// Last change of the content or the attributes.
    pub ctime: SystemTime,
}

impl Change {
    /// `"removed"`, `"dir"`, `"file"`, `"symlink"` or `"device"`.
    pub fn kind(&self) -> &'static str {
        match self {
            Change::Removed => "removed",
            Change::Dir(_) => "dir",
            Change::File(..) => "file",
            Change::Symlink(..) => "symlink",
            Change::Device(..) => "device",
        }
    }

    /// Whether two changes leave a path in the same state (times aside for directories,
    /// whose times move with every entry added or removed).
    pub fn same_as(&self, other: &Change) -> bool {
        match (self, other) {
            (Change::Removed, Change::Removed) => true,
            (Change::Dir(a), Change::Dir(b)) => a.mode == b.mode,
            (Change::File(a, x), Change::File(b, y)) => a.mode == b.mode && x == y,
            (Change::Symlink(a, x), Change::Symlink(b, y)) => a.mode == b.mode && x == y,
            (Change::Device(a, x), Change::Device(b, y)) => a.mode == b.mode && x == y,
            _ => false,
        }
    }
}

/// The changes that turn one tree into another: absolute paths, parents before children,
/// in byte order of their components.
#[derive(Clone, Default)]
pub struct Delta {
    /// `(absolute path, its new state)`, in the order they must be applied.
    pub entries: Vec<(String, Change)>,
}

impl std::fmt::Debug for Delta {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_list()
            .entries(self.entries.iter().map(|(p, c)| (p, c.kind())))
            .finish()
    }
}

fn attrs(m: &Meta) -> Attrs {
    Attrs {
        mode: m.mode,
        atime: m.atime,
        mtime: m.mtime,
        ctime: m.ctime,
    }
}

fn change_of(node: &Node) -> Change {
    let a = attrs(&node.meta);
    match &node.kind {
        Kind::File(c) => Change::File(a, c.to_bytes()),
        Kind::Dir(_) | Kind::HostDir(_) => Change::Dir(a),
        Kind::Symlink(t) => Change::Symlink(a, t.to_string()),
        Kind::Device(d) => Change::Device(a, *d),
    }
}

pub(crate) fn same_content(a: &Content, b: &Content) -> bool {
    match (a, b) {
        (Content::Owned(x), Content::Owned(y)) => Arc::ptr_eq(x, y) || x == y,
        (Content::Shared(x), Content::Shared(y)) => {
            (x.as_ptr() == y.as_ptr() && x.len() == y.len()) || x == y
        }
        // The same host file, read or not, is the same content: comparing never reads it.
        (Content::Host(x), Content::Host(y)) if x.key() == y.key() => true,
        _ => a.as_slice() == b.as_slice(),
    }
}

fn same_meta(a: &Meta, b: &Meta) -> bool {
    a.mode == b.mode && a.mtime == b.mtime && a.ctime == b.ctime && a.atime == b.atime
}

fn join(dir: &str, name: &str) -> String {
    if dir == "/" {
        format!("/{name}")
    } else {
        format!("{dir}/{name}")
    }
}

/// Every node of a subtree as entries (the node first).
fn whole(path: &str, node: &Node, out: &mut Vec<(String, Change)>) {
    out.push((path.to_string(), change_of(node)));
    if let Some(children) = node.children() {
        for (name, child) in children.iter() {
            whole(&join(path, name), child, out);
        }
    }
}

/// The entries that turn `old` (a directory at `path`) into `new`.
fn diff_dir(path: &str, old: &Children, new: &Children, out: &mut Vec<(String, Change)>) {
    if old.ptr_eq(new) {
        return;
    }
    let mut a = old.iter().peekable();
    let mut b = new.iter().peekable();
    loop {
        match (a.peek(), b.peek()) {
            (None, None) => break,
            (Some((name, _)), None) => {
                out.push((join(path, name), Change::Removed));
                a.next();
            }
            (None, Some((name, node))) => {
                whole(&join(path, name), node, out);
                b.next();
            }
            (Some((an, anode)), Some((bn, bnode))) => match an.cmp(bn) {
                std::cmp::Ordering::Less => {
                    out.push((join(path, an), Change::Removed));
                    a.next();
                }
                std::cmp::Ordering::Greater => {
                    whole(&join(path, bn), bnode, out);
                    b.next();
                }
                std::cmp::Ordering::Equal => {
                    diff_node(&join(path, bn), anode, bnode, out);
                    a.next();
                    b.next();
                }
            },
        }
    }
}

fn diff_node(path: &str, old: &Node, new: &Node, out: &mut Vec<(String, Change)>) {
    match (&old.kind, &new.kind) {
        (Kind::HostDir(x), Kind::HostDir(y)) if Arc::ptr_eq(x, y) => {
            if !same_meta(&old.meta, &new.meta) {
                out.push((path.to_string(), Change::Dir(attrs(&new.meta))));
            }
        }
        (Kind::Dir(_) | Kind::HostDir(_), Kind::Dir(_) | Kind::HostDir(_)) => {
            if !same_meta(&old.meta, &new.meta) {
                out.push((path.to_string(), Change::Dir(attrs(&new.meta))));
            }
            let (oc, nc) = (old.children(), new.children());
            diff_dir(
                path,
                oc.expect("a directory"),
                nc.expect("a directory"),
                out,
            );
        }
        (Kind::File(x), Kind::File(y)) => {
            if !same_meta(&old.meta, &new.meta) || !same_content(x, y) {
                out.push((path.to_string(), change_of(new)));
            }
        }
        (Kind::Symlink(x), Kind::Symlink(y)) => {
            if !same_meta(&old.meta, &new.meta) || x != y {
                out.push((path.to_string(), change_of(new)));
            }
        }
        (Kind::Device(x), Kind::Device(y)) => {
            if !same_meta(&old.meta, &new.meta) || x != y {
                out.push((path.to_string(), change_of(new)));
            }
        }
        // A different kind: what was there goes, with all it held.
        _ => {
            if old.is_dir() {
                out.push((path.to_string(), Change::Removed));
            }
            whole(path, new, out);
        }
    }
}

impl Vfs {
    /// What turns the tree at `base` into this one. Costs what changed, not what the trees
    /// hold.
    pub fn delta_since(&self, base: &Checkpoint) -> Delta {
        let mut out = Vec::new();
        diff_node("/", &base.0.root, &self.tree.root, &mut out);
        Delta { entries: out }
    }

    /// Applies `delta` to this tree as it stands, ignoring the filesystem's limits and
    /// writable paths (the caller checks [`Vfs::usage`] against them afterwards). A removal
    /// of a missing path is a no-op; an entry whose parent is missing or not a directory is
    /// an error, and the tree is then left partly changed (apply to a clone to stay atomic).
    pub fn apply_delta(&mut self, delta: &Delta) -> VfsResult<()> {
        for (path, change) in &delta.entries {
            self.apply_one(path, change)?;
        }
        Ok(())
    }

    fn apply_one(&mut self, path: &str, change: &Change) -> VfsResult<()> {
        let comps: Vec<&str> = path.split('/').filter(|c| !c.is_empty()).collect();
        let Some((last, dirs)) = comps.split_last() else {
            // The root: only its attributes can change.
            if let Change::Dir(a) = change {
                set_attrs(&mut self.tree.root.meta, a);
                return Ok(());
            }
            return Err(VfsError::new(
                crate::Errno::EINVAL,
                path,
                "the root can only be a directory",
            ));
        };
        for c in &comps {
            if *c == "." || *c == ".." {
                return Err(VfsError::new(
                    crate::Errno::EINVAL,
                    path,
                    "not a clean path",
                ));
            }
        }
        let names: Vec<Name> = dirs.iter().map(|d| Name::from(*d)).collect();
        let name = Name::from(*last);
        let ino = self.next_ino;
        let parent = match self.dir_mut(&names, path) {
            Ok(p) => p,
            Err(e) if matches!(change, Change::Removed) => {
                let _ = e;
                return Ok(());
            }
            Err(e) => return Err(e),
        };
        let children = parent.children_mut().expect("dir_mut returns directories");
        let (mut gone_nodes, mut gone_bytes) = (0, 0);
        let (mut new_nodes, mut new_bytes) = (0, 0);
        let mut used_ino = false;
        match change {
            Change::Removed => {
                if let Some(old) = children.remove(&name) {
                    (gone_nodes, gone_bytes) = old.census();
                }
            }
            Change::Dir(a) => match children.get_mut(&name) {
                Some(node) if node.is_dir() => set_attrs(&mut node.meta, a),
                _ => {
                    if let Some(old) = children.remove(&name) {
                        (gone_nodes, gone_bytes) = old.census();
                    }
                    let mut node = Node::new(Kind::Dir(Children::new()), a.mode, ino, a.mtime);
                    set_attrs(&mut node.meta, a);
                    children.insert(name, node);
                    (new_nodes, used_ino) = (1, true);
                }
            },
            Change::File(a, _) | Change::Symlink(a, _) | Change::Device(a, _) => {
                let kind = match change {
                    Change::File(_, data) => Kind::File(Content::Owned(Arc::new(data.to_vec()))),
                    Change::Symlink(_, t) => Kind::Symlink(Arc::from(t.as_str())),
                    Change::Device(_, d) => Kind::Device(*d),
                    _ => unreachable!("matched above"),
                };
                let keep_ino = match children.remove(&name) {
                    Some(old) => {
                        (gone_nodes, gone_bytes) = old.census();
                        // A hard-linked node's number stays with its other names.
                        (!old.is_dir() && old.meta.link == 0).then_some(old.meta.ino)
                    }
                    None => None,
                };
                let mut node = Node::new(kind, a.mode, keep_ino.unwrap_or(ino), a.mtime);
                set_attrs(&mut node.meta, a);
                new_bytes = match &node.kind {
                    Kind::File(c) => c.counted_len(),
                    _ => 0,
                };
                children.insert(name, node);
                new_nodes = 1;
                used_ino = keep_ino.is_none();
            }
        }
        if used_ino {
            self.next_ino += 1;
        }
        self.tree.nodes = self.tree.nodes - gone_nodes + new_nodes;
        self.tree.bytes = self.tree.bytes - gone_bytes + new_bytes;
        Ok(())
    }
}

fn set_attrs(m: &mut Meta, a: &Attrs) {
    m.mode = a.mode & 0o7777;
    m.atime = a.atime;
    m.mtime = a.mtime;
    m.ctime = a.ctime;
}
