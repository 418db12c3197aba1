//! Merging a fork back into its parent: three-way, against the tree both started from.
//!
//! A path's state is its kind, mode and content (or link target); times alone are not a
//! change, since directories' times move with every entry added or removed below them and
//! would make every shared directory a conflict. The rules, applied from `/` down:
//!
//! - where the fork's subtree equals the base's, nothing happens;
//! - where both sides hold a directory, its mode merges on its own (a side that kept the
//!   base's mode takes the other's; two different new modes conflict) and the walk goes on
//!   into its entries, against the base's entries (none when the base had no directory
//!   there);
//! - anywhere else the path is settled as a whole: if the parent's subtree still equals the
//!   base's, the fork's replaces it (or its removal removes it); if it equals the fork's,
//!   there is nothing to do; otherwise it is a conflict, reported with what each side did
//!   (added, changed, deleted).
//!
//! A fork that removed a directory in which the parent changed anything is therefore a
//! conflict at that directory, and so is the reverse. The walk skips every directory whose
//! entries are the same persistent map in the base and the fork, so it costs what the fork
//! changed, not what the trees hold.

use std::time::SystemTime;

use crate::delta::same_content;
use crate::node::{Children, Kind, Name, Node};
use crate::{Checkpoint, Errno, Tree, Vfs, VfsError};

/// What one side did to a path since the fork point.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum SideChange {
    /// The path did not exist at the fork point and exists now.
    Added,
    /// The path existed at the fork point and exists now in another state (content, mode,
    /// type or link target).
    Changed,
    /// The path existed at the fork point and exists no more.
    Deleted,
}

impl SideChange {
    /// `"added"`, `"changed"` or `"deleted"`.
    pub fn as_str(self) -> &'static str {
        match self {
            SideChange::Added => "added",
            SideChange::Changed => "changed",
            SideChange::Deleted => "deleted",
        }
    }

    fn between(base: Option<&Node>, now: Option<&Node>) -> SideChange {
        match (base, now) {
            (None, _) => SideChange::Added,
            (_, None) => SideChange::Deleted,
            _ => SideChange::Changed,
        }
    }
}

/// A path both sides changed differently: `ours` is what the tree merged into did, `theirs`
/// what the fork did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MergeConflict {
    /// Absolute path of the conflicting node (the topmost one when a whole tree differs).
    pub path: String,
    /// What the tree merged into did to the path since the fork point.
    pub ours: SideChange,
    /// What the fork did to the path since the fork point.
    pub theirs: SideChange,
}

/// A path the merge set to the fork's state, and what that did to it here.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MergedPath {
    /// Absolute path that now has the fork's state.
    pub path: String,
    /// Whether the path was added, changed or removed here.
    pub change: SideChange,
}

/// What a merge applied, in path order (a path added or deleted with a whole tree below it
/// is one entry).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct MergeReport {
    /// Every path the merge changed; empty when the fork changed nothing new.
    pub applied: Vec<MergedPath>,
}

/// Why a merge applied nothing.
#[derive(Debug, Clone, thiserror::Error)]
pub enum MergeError {
    /// Paths both sides changed differently, in path order; nothing was applied.
    #[error("merge conflict: {} path(s) changed on both sides", .0.len())]
    Conflicts(Vec<MergeConflict>),
    /// The merged tree would pass the filesystem's limits, or touch a path it may not change.
    #[error("{0}")]
    Fs(VfsError),
}

/// Whether two subtrees hold the same paths in the same states, times aside.
fn same(a: Option<&Node>, b: Option<&Node>) -> bool {
    match (a, b) {
        (None, None) => true,
        (Some(a), Some(b)) => same_node(a, b),
        _ => false,
    }
}

fn same_node(a: &Node, b: &Node) -> bool {
    if a.meta.mode != b.meta.mode {
        return false;
    }
    match (&a.kind, &b.kind) {
        (Kind::File(x), Kind::File(y)) => same_content(x, y),
        (Kind::Symlink(x), Kind::Symlink(y)) => x == y,
        (Kind::Device(x), Kind::Device(y)) => x == y,
        (Kind::HostDir(x), Kind::HostDir(y)) if std::sync::Arc::ptr_eq(x, y) => true,
        (Kind::Dir(_) | Kind::HostDir(_), Kind::Dir(_) | Kind::HostDir(_)) => {
            let (x, y) = (a.children().expect("a dir"), b.children().expect("a dir"));
            x.ptr_eq(y)
                || (x.len() == y.len()
                    && x.iter()
                        .zip(y.iter())
                        .all(|((n, c), (m, d))| n == m && same_node(c, d)))
        }
        _ => false,
    }
}

fn path_of(names: &[Name]) -> String {
    if names.is_empty() {
        return "/".into();
    }
    let mut s = String::new();
    for n in names {
        s.push('/');
        s.push_str(n);
    }
    s
}

struct Merger<'a> {
    vfs: &'a Vfs,
    out: Tree,
    next_ino: u64,
    now: SystemTime,
    applied: Vec<MergedPath>,
    conflicts: Vec<MergeConflict>,
    created: u64,
    deleted: u64,
    written: u64,
    refused: Option<VfsError>,
}

impl Merger<'_> {
    fn node(
        &mut self,
        names: &mut Vec<Name>,
        b: Option<&Node>,
        o: Option<&Node>,
        t: Option<&Node>,
    ) {
        // A mounted directory the fork left alone, without listing it.
        if let (Some(bn), Some(tn)) = (b, t)
            && let (Kind::HostDir(x), Kind::HostDir(y)) = (&bn.kind, &tn.kind)
            && std::sync::Arc::ptr_eq(x, y)
            && bn.meta.mode == tn.meta.mode
        {
            return;
        }
        if let (Some(on), Some(tn)) = (o, t)
            && let (Some(_), Some(tc)) = (on.children(), tn.children())
        {
            let bc = b.and_then(Node::children);
            let base_mode = bc.and(b).map(|b| b.meta.mode);
            if base_mode != Some(tn.meta.mode) {
                if base_mode == Some(on.meta.mode) {
                    self.set_dir_attrs(names, tn);
                } else if on.meta.mode != tn.meta.mode {
                    self.conflict(names, b, o, t);
                }
            }
            if bc.is_some_and(|bc| bc.ptr_eq(tc)) {
                return;
            }
            self.entries(names, bc, on, tc);
            return;
        }
        if same(b, t) {
            return;
        }
        if same(b, o) {
            self.replace(names, b, t);
        } else if !same(o, t) {
            self.conflict(names, b, o, t);
        }
    }

    /// The entries of a directory both sides hold, where the fork's differ from the base's.
    fn entries(&mut self, names: &mut Vec<Name>, bc: Option<&Children>, on: &Node, tc: &Children) {
        let empty = Children::new();
        let bc = bc.unwrap_or(&empty);
        let oc = on.children().expect("called with a directory");
        let mut a = bc.iter().peekable();
        let mut z = tc.iter().peekable();
        loop {
            let (name, bn, tn) = match (a.peek(), z.peek()) {
                (None, None) => break,
                (Some((n, bn)), None) => {
                    let r = ((*n).clone(), Some(*bn), None);
                    a.next();
                    r
                }
                (None, Some((n, tn))) => {
                    let r = ((*n).clone(), None, Some(*tn));
                    z.next();
                    r
                }
                (Some((bname, bn)), Some((tname, tn))) => match bname.cmp(tname) {
                    std::cmp::Ordering::Less => {
                        let r = ((*bname).clone(), Some(*bn), None);
                        a.next();
                        r
                    }
                    std::cmp::Ordering::Greater => {
                        let r = ((*tname).clone(), None, Some(*tn));
                        z.next();
                        r
                    }
                    std::cmp::Ordering::Equal => {
                        let r = ((*tname).clone(), Some(*bn), Some(*tn));
                        a.next();
                        z.next();
                        r
                    }
                },
            };
            // The common case of an untouched entry, without walking into it.
            if let (Some(bn), Some(tn)) = (bn, tn)
                && match (&bn.kind, &tn.kind) {
                    (Kind::Dir(x), Kind::Dir(y)) => x.ptr_eq(y) && bn.meta.mode == tn.meta.mode,
                    (Kind::HostDir(x), Kind::HostDir(y)) => {
                        std::sync::Arc::ptr_eq(x, y) && bn.meta.mode == tn.meta.mode
                    }
                    _ if bn.is_dir() || tn.is_dir() => false,
                    _ => same_node(bn, tn),
                }
            {
                continue;
            }
            let on = oc.get(&name);
            names.push(name);
            self.node(names, bn, on, tn);
            names.pop();
        }
    }

    fn conflict(&mut self, names: &[Name], b: Option<&Node>, o: Option<&Node>, t: Option<&Node>) {
        self.conflicts.push(MergeConflict {
            path: path_of(names),
            ours: SideChange::between(b, o),
            theirs: SideChange::between(b, t),
        });
    }

    /// The directory at `names` (which both sides hold) takes the fork's mode and times.
    fn set_dir_attrs(&mut self, names: &[Name], t: &Node) {
        if !self.writable(names) {
            return;
        }
        let Some(node) = node_at(&mut self.out.root, names) else {
            return;
        };
        let ino = node.meta.ino;
        node.meta = t.meta;
        node.meta.ino = ino;
        self.applied.push(MergedPath {
            path: path_of(names),
            change: SideChange::Changed,
        });
    }

    /// The path at `names` becomes the fork's subtree `t` (or goes, when `t` is `None`).
    fn replace(&mut self, names: &[Name], b: Option<&Node>, t: Option<&Node>) {
        let Some((name, dir)) = names.split_last() else {
            return;
        };
        if !self.writable(names) {
            return;
        }
        let mut next_ino = self.next_ino;
        let now = self.now;
        let Some(parent) = node_at(&mut self.out.root, dir) else {
            return;
        };
        parent.meta.mtime = now;
        parent.meta.ctime = now;
        let children = parent
            .children_mut()
            .expect("node_at of a parent is a directory");
        let old = children.remove(name);
        let (mut gone_nodes, mut gone_bytes) = (0, 0);
        let mut keep_ino = None;
        if let Some(old) = &old {
            (gone_nodes, gone_bytes) = old.census();
            // A hard-linked node's number stays with its other names.
            if !old.is_dir() && old.meta.link == 0 {
                keep_ino = Some(old.meta.ino);
            }
        }
        let (mut new_nodes, mut new_bytes) = (0, 0);
        if let Some(t) = t {
            let mut node = renumber(t, &mut next_ino);
            if let Some(ino) = keep_ino.filter(|_| !t.is_dir()) {
                node.meta.ino = ino;
            }
            (new_nodes, new_bytes) = node.census();
            children.insert(name.clone(), node);
        }
        self.next_ino = next_ino;
        self.out.nodes = self.out.nodes - gone_nodes + new_nodes;
        self.out.bytes = self.out.bytes - gone_bytes + new_bytes;
        self.deleted += gone_nodes;
        self.created += new_nodes;
        self.written += new_bytes;
        self.applied.push(MergedPath {
            path: path_of(names),
            change: SideChange::between(b, t),
        });
    }

    /// A fork cannot change a path outside the writable ones; a merge that would is given a
    /// base that is not the fork's, and is refused.
    fn writable(&mut self, names: &[Name]) -> bool {
        let path = path_of(names);
        if self.vfs.is_writable(&path) {
            return true;
        }
        self.refused
            .get_or_insert_with(|| VfsError::plain(Errno::EROFS, &path));
        false
    }
}

/// A copy of a subtree with fresh inode numbers, which must stay unique in the tree it joins,
/// and no hard-link groups.
fn renumber(node: &Node, next_ino: &mut u64) -> Node {
    let mut copy = node.clone();
    copy.meta.ino = *next_ino;
    // The fork's hard-link groups are not this tree's: its names arrive as separate nodes.
    copy.meta.link = 0;
    *next_ino += 1;
    if let Kind::Dir(children) = &node.kind {
        copy.set_kind(Kind::Dir(
            children
                .iter()
                .map(|(name, child)| (name.clone(), renumber(child, next_ino)))
                .collect(),
        ));
    }
    copy
}

fn node_at<'a>(root: &'a mut Node, names: &[Name]) -> Option<&'a mut Node> {
    let mut cur = root;
    for name in names {
        cur = cur.children_mut()?.get_mut(name)?;
    }
    Some(cur)
}

impl Vfs {
    /// Applies to this tree what changed from `base` to `theirs` (a fork of it, taken when
    /// the fork was made, and the fork's tree now), three-way against what changed here since
    /// `base`; see the module documentation for the rules. All or nothing: on a conflict the
    /// error lists every conflicting path, and a result that would pass this filesystem's
    /// limits is refused with `ENOSPC`; either way the tree is left as it was. New nodes get
    /// fresh inode numbers; a file replaced by a file keeps its own.
    pub fn merge(
        &mut self,
        base: &Checkpoint,
        theirs: &Checkpoint,
    ) -> Result<MergeReport, MergeError> {
        let mut m = Merger {
            vfs: self,
            out: self.tree.clone(),
            next_ino: self.next_ino,
            now: SystemTime::now(),
            applied: Vec::new(),
            conflicts: Vec::new(),
            created: 0,
            deleted: 0,
            written: 0,
            refused: None,
        };
        m.node(
            &mut Vec::new(),
            Some(&base.0.root),
            Some(&self.tree.root),
            Some(&theirs.0.root),
        );
        if !m.conflicts.is_empty() {
            return Err(MergeError::Conflicts(m.conflicts));
        }
        if let Some(e) = m.refused {
            return Err(MergeError::Fs(e));
        }
        if let Some(max) = self.policy.max_file_count
            && m.out.nodes > self.baseline_nodes + max
            && m.out.nodes > self.tree.nodes
        {
            return Err(MergeError::Fs(VfsError::new(
                Errno::ENOSPC,
                "/",
                format!(
                    "the merged files would pass the file count limit (max: {max}, would be {})",
                    m.out.nodes - self.baseline_nodes
                ),
            )));
        }
        if let Some(limit) = self.policy.fs_limit_bytes
            && m.out.bytes > limit
            && m.out.bytes > self.tree.bytes
        {
            return Err(MergeError::Fs(VfsError::new(
                Errno::ENOSPC,
                "/",
                format!(
                    "the merged files would pass the filesystem size limit ({} of {limit} bytes)",
                    m.out.bytes
                ),
            )));
        }
        let (out, next_ino, created, deleted, written) =
            (m.out, m.next_ino, m.created, m.deleted, m.written);
        let applied = m.applied;
        self.tree = out;
        self.next_ino = next_ino;
        self.counters.add(&self.counters.created, created);
        self.counters.add(&self.counters.deleted, deleted);
        self.counters.add(&self.counters.bytes_written, written);
        Ok(MergeReport { applied })
    }
}
