//! What changed between two states of a subtree, path by path, with both sides: the ground
//! of a sandbox's `changes` (a diff against a mounted folder, a snapshot or a fork's parent).
//! Unlike a [`Delta`](crate::Delta), which carries only what a path became so that it can be
//! applied, a [`PathChange`] carries what the path was too, so that it can be shown.

use bytes::Bytes;

use crate::delta::same_content;
use crate::node::{Kind, Node};

/// One side of a [`PathChange`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Entry {
    /// A regular file: permission bits and whole content.
    File {
        /// Permission bits.
        mode: u32,
        /// The content.
        data: Bytes,
    },
    /// A symlink and its target as stored.
    Symlink {
        /// The target, not resolved.
        target: String,
    },
    /// A directory (what it holds comes in changes of its own).
    Dir {
        /// Permission bits.
        mode: u32,
    },
    /// A character device.
    Device,
}

impl Entry {
    /// `"file"`, `"symlink"`, `"dir"` or `"device"`.
    pub fn kind(&self) -> &'static str {
        match self {
            Entry::File { .. } => "file",
            Entry::Symlink { .. } => "symlink",
            Entry::Dir { .. } => "dir",
            Entry::Device => "device",
        }
    }

    /// Permission bits (`0o777` for a symlink, as `lstat` shows one).
    pub fn mode(&self) -> u32 {
        match self {
            Entry::File { mode, .. } | Entry::Dir { mode } => *mode,
            Entry::Symlink { .. } => 0o777,
            Entry::Device => 0o666,
        }
    }

    fn of(node: &Node) -> Entry {
        match &node.kind {
            Kind::File(c) => Entry::File {
                mode: node.meta.mode,
                data: c.to_bytes(),
            },
            Kind::Symlink(t) => Entry::Symlink {
                target: t.to_string(),
            },
            Kind::Dir(_) | Kind::HostDir(_) => Entry::Dir {
                mode: node.meta.mode,
            },
            Kind::Device(_) => Entry::Device,
        }
    }
}

/// A path that differs between two states: `old` is what it was (`None`: it did not exist),
/// `new` what it is. A directory added or removed comes with one change for each path below
/// it; a path whose kind changed is one change with both sides.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PathChange {
    /// Absolute path.
    pub path: String,
    /// Before.
    pub old: Option<Entry>,
    /// After.
    pub new: Option<Entry>,
}

fn join(dir: &str, name: &str) -> String {
    if dir == "/" {
        format!("/{name}")
    } else {
        format!("{dir}/{name}")
    }
}

/// Appends what differs between `old` and `new` at `path` (and below), parents before
/// children, names in byte order. Times alone are not a change.
pub(crate) fn compare(
    path: &str,
    old: Option<&Node>,
    new: Option<&Node>,
    out: &mut Vec<PathChange>,
) {
    match (old, new) {
        (None, None) => {}
        (Some(o), Some(n)) if o.is_dir() && n.is_dir() => {
            if let (Kind::HostDir(x), Kind::HostDir(y)) = (&o.kind, &n.kind)
                && std::sync::Arc::ptr_eq(x, y)
            {
                if o.meta.mode != n.meta.mode {
                    out.push(change(path, Some(o), Some(n)));
                }
                return;
            }
            if o.meta.mode != n.meta.mode {
                out.push(change(path, Some(o), Some(n)));
            }
            let (oc, nc) = (o.children().expect("a dir"), n.children().expect("a dir"));
            if oc.ptr_eq(nc) {
                return;
            }
            let mut a = oc.iter().peekable();
            let mut b = nc.iter().peekable();
            loop {
                let (name, x, y) = match (a.peek(), b.peek()) {
                    (None, None) => break,
                    (Some((n, x)), None) => ((*n).clone(), Some(*x), None),
                    (None, Some((n, y))) => ((*n).clone(), None, Some(*y)),
                    (Some((an, x)), Some((bn, y))) => match an.cmp(bn) {
                        std::cmp::Ordering::Less => ((*an).clone(), Some(*x), None),
                        std::cmp::Ordering::Greater => ((*bn).clone(), None, Some(*y)),
                        std::cmp::Ordering::Equal => ((*an).clone(), Some(*x), Some(*y)),
                    },
                };
                if x.is_some() {
                    a.next();
                }
                if y.is_some() {
                    b.next();
                }
                compare(&join(path, &name), x, y, out);
            }
        }
        (Some(o), Some(n)) if !o.is_dir() && !n.is_dir() => {
            let same = o.meta.mode == n.meta.mode
                && match (&o.kind, &n.kind) {
                    (Kind::File(x), Kind::File(y)) => same_content(x, y),
                    (Kind::Symlink(x), Kind::Symlink(y)) => x == y,
                    (Kind::Device(x), Kind::Device(y)) => x == y,
                    _ => false,
                };
            if !same {
                out.push(change(path, Some(o), Some(n)));
            }
        }
        // A directory on one side only (or a directory against something else): the whole
        // subtree goes or comes, path by path.
        (o, n) => {
            let dir_gone = o.filter(|o| o.is_dir());
            let dir_come = n.filter(|n| n.is_dir());
            out.push(change(path, o, n));
            if let Some(d) = dir_gone {
                for (name, child) in d.children().expect("a dir").iter() {
                    compare(&join(path, name), Some(child), None, out);
                }
            }
            if let Some(d) = dir_come {
                for (name, child) in d.children().expect("a dir").iter() {
                    compare(&join(path, name), None, Some(child), out);
                }
            }
        }
    }
}

fn change(path: &str, old: Option<&Node>, new: Option<&Node>) -> PathChange {
    PathChange {
        path: path.to_string(),
        old: old.map(Entry::of),
        new: new.map(Entry::of),
    }
}
