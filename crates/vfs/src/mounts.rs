//! Mounting host folders into a tree, and what the tree changed below a mount or a path since
//! an earlier state.

use std::path::Path;
use std::sync::Arc;

use crate::changes::{PathChange, compare};
use crate::host::{self, MountInfo, MountOptions};
use crate::node::{Kind, Name, Node};
use crate::{Checkpoint, Errno, Vfs, VfsError, VfsResult, path};

impl Vfs {
    /// Mounts the host folder `host` at `at` (absolute, or taken from `/`): the folder's
    /// entries appear there, listed and read from the host only when something looks at them,
    /// under this tree's copy-on-write layer: what the sandbox changes there is its own, and
    /// the host is never written (see [`MountOptions`] for what stays invisible). `at` must
    /// be missing or an empty directory; missing parents are made. The mount, like the
    /// layout, is the embedder's act: the writable paths and limits do not apply to it, and
    /// what it brings does not count against them (what the sandbox adds below it does). A
    /// mount outside the writable paths can be read but not changed.
    pub fn mount_host(
        &mut self,
        at: &str,
        host: &Path,
        opts: &MountOptions,
    ) -> VfsResult<MountInfo> {
        let at = path::normalize(&path::join("/", at));
        if at == "/" {
            return Err(VfsError::new(
                Errno::EINVAL,
                at,
                "a host folder cannot be mounted at /",
            ));
        }
        let (parent, name) = at.rsplit_once('/').expect("normalized absolute path");
        let parent = if parent.is_empty() { "/" } else { parent };
        let before = self.tree.nodes;
        let was = std::mem::replace(&mut self.in_layout, true);
        let made = self.mkdir_p(parent);
        self.in_layout = was;
        made?;
        // The parents just made belong to the layout, as the mount does.
        self.baseline_nodes += self.tree.nodes - before;
        let parent = self.realpath(parent)?;
        let point = path::join(&parent, name);
        if let Some(existing) = self.resolve(&point, false)?.node {
            match existing.children() {
                Some(c) if c.is_empty() => {}
                Some(_) => {
                    return Err(VfsError::new(
                        Errno::ENOTEMPTY,
                        &point,
                        "mount point is a directory that is not empty",
                    ));
                }
                None => return Err(VfsError::plain(Errno::EEXIST, &point)),
            }
        }
        let (mount, node) = host::mount(host, &point, opts)?;
        let dir: Vec<Name> = components(&parent).map(Name::from).collect();
        let parent_node = self.dir_mut(&dir, &point)?;
        let replaced = parent_node
            .children_mut()
            .expect("dir_mut returns directories")
            .insert(Name::from(name), node.clone());
        if let Some(old) = replaced {
            let (n, b) = old.census();
            self.tree.nodes -= n;
            self.tree.bytes -= b;
            self.baseline_nodes = self.baseline_nodes.saturating_sub(n);
        }
        let mut mounts = (*self.tree.mounts).clone();
        mounts.push((Arc::clone(&mount), node));
        self.tree.mounts = Arc::new(mounts);
        Ok(mount.info())
    }

    /// The host folders mounted in this tree, in the order they were mounted.
    pub fn mounts(&self) -> Vec<MountInfo> {
        self.tree.mounts.iter().map(|(m, _)| m.info()).collect()
    }

    /// What changed below the mount at `at` since it was mounted, path by path (see
    /// [`PathChange`]). Unchanged directories are skipped without being walked, so this
    /// costs what changed, and host files are read only where the sandbox changed them.
    pub fn mount_changes(&self, at: &str) -> VfsResult<Vec<PathChange>> {
        let at = path::normalize(&path::join("/", at));
        let Some((_, base)) = self.tree.mounts.iter().find(|(m, _)| m.point() == at) else {
            return Err(VfsError::new(
                Errno::EINVAL,
                &at,
                "no host folder is mounted here",
            ));
        };
        let mut out = Vec::new();
        compare(&at, Some(base), node_at(&self.tree.root, &at), &mut out);
        Ok(out)
    }

    /// What changed below `at` since `base` (a checkpoint of this tree or of the tree it was
    /// cloned from), path by path.
    pub fn changes_since(&self, base: &Checkpoint, at: &str) -> Vec<PathChange> {
        let at = path::normalize(&path::join("/", at));
        let mut out = Vec::new();
        compare(
            &at,
            node_at(&base.0.root, &at),
            node_at(&self.tree.root, &at),
            &mut out,
        );
        out
    }

    /// The tree as it was at snapshot `id`, as a checkpoint to compare with.
    pub fn snapshot_checkpoint(&self, id: crate::SnapshotId) -> VfsResult<Checkpoint> {
        self.tree_at_snapshot(id).map(|t| Checkpoint(t.clone()))
    }

    /// Whether `dir`/`name` lies in a read-only mount (only asked when one exists).
    pub(crate) fn in_read_only_mount(&self, dir: &[Name], name: Option<&Name>) -> bool {
        if !self.tree.mounts.iter().any(|(m, _)| m.read_only) {
            return false;
        }
        let read_only = |n: &Node| match &n.kind {
            Kind::HostDir(h) => h.read_only(),
            _ => false,
        };
        let mut cur = &self.tree.root;
        for n in dir.iter().chain(name) {
            if read_only(cur) {
                return true;
            }
            match cur.children().and_then(|c| c.get(n)) {
                Some(next) => cur = next,
                None => return false,
            }
        }
        // A file of a read-only mount is its directory's, which is still a host directory.
        read_only(cur)
    }
}

fn components(p: &str) -> impl Iterator<Item = &str> {
    p.split('/').filter(|c| !c.is_empty())
}

/// The node at a canonical absolute path, symlinks not followed.
pub(crate) fn node_at<'a>(root: &'a Node, at: &str) -> Option<&'a Node> {
    let mut cur = root;
    for c in components(at) {
        cur = cur.children()?.get(c)?;
    }
    Some(cur)
}
