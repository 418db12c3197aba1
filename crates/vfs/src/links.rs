//! Hard links: several names for one node.
//!
//! The tree stays a tree: every name holds its own copy of the node (an O(1) clone, the content
//! is shared), and the copies carry the same inode number and a group id in `Meta::link`. The
//! tree keeps, per group, the canonical paths of its names. A change to one name's content or
//! attributes is copied to the others, so each name always shows what the others show, and
//! everything that walks the tree (snapshots, deltas, merges, the counts) works on it as on any
//! other.
//!
//! The path lists are hints checked on use: a path counts as a name of group `g` only while the
//! node there carries `g`. A delta or a merge that replaces a name with a plain node therefore
//! just drops it from its group, and nothing can be written through a path that left it.
//!
//! Each name counts as a node and its bytes count once per name against the limits: the limits
//! bound what the tree holds, and a tree that copied a linked file on every name would hold that.

use std::sync::Arc;
use std::time::SystemTime;

use crate::node::{Kind, Name, Node};
use crate::{Errno, Metadata, Vfs, VfsError, VfsResult, existing};

/// The canonical paths of each group's names.
pub(crate) type Groups = im::OrdMap<u64, Arc<[Arc<str>]>>;

impl Vfs {
    /// Makes `new` another name of the node `old` names (`link(2)`). A final symlink in `old`
    /// is linked itself unless `follow` (`linkat` with `AT_SYMLINK_FOLLOW`). Directories cannot
    /// be linked (`EPERM`), `new` must not exist (`EEXIST`), and a node outside the writable
    /// paths cannot get a name inside them (`EXDEV`), since writes through the new name would
    /// change it.
    pub fn link(&mut self, old: &str, new: &str, follow: bool) -> VfsResult<()> {
        let wo = self.resolve(old, follow)?;
        let src = existing(&wo, old)?;
        if src.children().is_some() {
            return Err(VfsError::new(
                Errno::EPERM,
                old,
                "hard link not allowed for directory",
            ));
        }
        if wo.trailing_slash {
            return Err(VfsError::plain(Errno::ENOTDIR, old));
        }
        let counted = counted_len(src);
        let size = src.size();
        let (odir, oname) = wo.into_target(old)?;
        let wn = self.resolve(new, false)?;
        if wn.node.is_some() {
            return Err(VfsError::plain(Errno::EEXIST, new));
        }
        if wn.trailing_slash {
            return Err(VfsError::plain(Errno::ENOENT, new));
        }
        let (ndir, nname) = wn.into_target(new)?;
        let old_full = full_path(&odir, &oname);
        let new_full = full_path(&ndir, &nname);
        if !self.in_layout && !self.is_writable(&old_full) {
            return Err(VfsError::new(
                Errno::EXDEV,
                new,
                format!("cannot give {old_full} a name: it is outside the writable paths"),
            ));
        }
        if !self.in_layout && self.in_read_only_mount(&odir, Some(&oname)) {
            return Err(VfsError::new(
                Errno::EXDEV,
                new,
                format!("cannot give {old_full} a name: it is in a read-only mount"),
            ));
        }
        self.check_writable_at(&ndir, Some(&nname))?;
        self.check_dir_writable(&ndir, new)?;
        self.check_new_node(new)?;
        self.check_size(new, size, counted)?;

        let now = SystemTime::now();
        let current = self.node_mut(&odir, &oname, old)?.meta.link;
        let group = if current != 0 && self.tree.groups.contains_key(&current) {
            current
        } else {
            self.tree.next_group += 1;
            let g = self.tree.next_group;
            self.tree
                .groups
                .insert(g, Arc::from([Arc::from(old_full.as_str())]));
            g
        };
        let node = self.node_mut(&odir, &oname, old)?;
        node.meta.link = group;
        node.meta.ctime = now;
        // Names of one group are copies of one node: a mounted file linked becomes the
        // sandbox's own, and counts from now on.
        let was_host = std::mem::replace(&mut node.meta.host, false);
        let copy = node.clone();
        let parent = self.dir_mut(&ndir, new)?;
        parent.meta.mtime = now;
        parent.meta.ctime = now;
        parent
            .children_mut()
            .expect("dir_mut returns directories")
            .insert(nname, copy.clone());
        let mut names: Vec<Arc<str>> = self.tree.groups[&group].to_vec();
        names.push(Arc::from(new_full.as_str()));
        self.tree.groups.insert(group, names.into());
        self.tree.nodes += 1 + u64::from(was_host);
        self.tree.bytes += counted;
        if !self.in_layout {
            self.counters.add(&self.counters.created, 1);
        }
        // The link count is part of every name's ctime.
        self.sync_links(&old_full, &copy);
        Ok(())
    }

    /// Copies the node just changed at `dir`/`name` to the other names of its group.
    pub(crate) fn sync_links_at(&mut self, dir: &[Name], name: &Name) {
        if self.tree.groups.is_empty() {
            return;
        }
        let origin = full_path(dir, name);
        let Some(node) = node_at(&self.tree.root, &origin).cloned() else {
            return;
        };
        self.sync_links(&origin, &node);
    }

    fn sync_links(&mut self, origin: &str, node: &Node) {
        let group = node.meta.link;
        if group == 0 {
            return;
        }
        let Some(paths) = self.tree.groups.get(&group).cloned() else {
            return;
        };
        let mut kept: Vec<Arc<str>> = Vec::with_capacity(paths.len());
        let bytes = counted_len(node);
        for p in paths.iter() {
            if &**p != origin {
                let Some(slot) =
                    node_at_mut(&mut self.tree.root, p).filter(|n| n.meta.link == group)
                else {
                    continue;
                };
                let before = counted_len(slot);
                *slot = node.clone();
                self.tree.bytes = self.tree.bytes - before + bytes;
            }
            kept.push(p.clone());
        }
        if kept.len() != paths.len() {
            self.tree.groups.insert(group, kept.into());
        }
    }

    /// The names a node has: those of its group still holding it, or 1.
    pub(crate) fn link_count(&self, node: &Node) -> u64 {
        let group = node.meta.link;
        if group == 0 {
            return 1;
        }
        let live = self.tree.groups.get(&group).map_or(0, |paths| {
            paths
                .iter()
                .filter(|p| node_at(&self.tree.root, p).is_some_and(|n| n.meta.link == group))
                .count() as u64
        });
        live.max(1)
    }

    /// A node's metadata with its link count.
    pub(crate) fn metadata_of(&self, node: &Node) -> Metadata {
        let mut m = node.metadata();
        if node.meta.link != 0 {
            m.nlink = self.link_count(node);
        }
        m
    }

    /// Forgets the names at `path` and below it, which are gone.
    pub(crate) fn forget_links_under(&mut self, path: &str) {
        self.rewrite_links(path, None);
    }

    /// The names at `from` and below it are now at `to` and below it.
    pub(crate) fn move_links(&mut self, from: &str, to: &str) {
        self.rewrite_links(from, Some(to));
    }

    fn rewrite_links(&mut self, from: &str, to: Option<&str>) {
        if self.tree.groups.is_empty() {
            return;
        }
        let mut changed = Vec::new();
        for (group, paths) in self.tree.groups.iter() {
            if !paths.iter().any(|p| crate::path::is_within(p, from)) {
                continue;
            }
            let next: Vec<Arc<str>> = paths
                .iter()
                .filter_map(|p| match (crate::path::is_within(p, from), to) {
                    (false, _) => Some(p.clone()),
                    (true, None) => None,
                    (true, Some(to)) => {
                        let rest = &p[from.len()..];
                        Some(Arc::from(
                            format!("{}{rest}", to.trim_end_matches('/')).as_str(),
                        ))
                    }
                })
                .collect();
            changed.push((*group, next));
        }
        for (group, next) in changed {
            if next.is_empty() {
                self.tree.groups.remove(&group);
            } else {
                self.tree.groups.insert(group, next.into());
            }
        }
    }
}

/// Whether `a` and `b` are names of one hard-linked node.
pub(crate) fn same_group(a: &Node, b: &Node) -> bool {
    a.meta.link != 0 && a.meta.link == b.meta.link && a.meta.ino == b.meta.ino
}

fn counted_len(node: &Node) -> u64 {
    match &node.kind {
        Kind::File(c) => c.counted_len(),
        _ => 0,
    }
}

pub(crate) fn full_path(dir: &[Name], name: &Name) -> String {
    let mut s = String::new();
    for c in dir.iter().chain(std::iter::once(name)) {
        s.push('/');
        s.push_str(c);
    }
    s
}

/// The node at a canonical path, without permission checks or symlinks: group bookkeeping
/// must see every name, whatever the modes of the directories above it.
fn node_at<'a>(root: &'a Node, path: &str) -> Option<&'a Node> {
    path.split('/')
        .filter(|c| !c.is_empty())
        .try_fold(root, |cur, c| cur.children()?.get(c))
}

fn node_at_mut<'a>(root: &'a mut Node, path: &str) -> Option<&'a mut Node> {
    path.split('/')
        .filter(|c| !c.is_empty())
        .try_fold(root, |cur, c| cur.children_mut()?.get_mut(c))
}
