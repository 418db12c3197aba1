//! Random operation sequences run against the VFS and against a plain reference model (a flat
//! map from absolute path to node); results, trees and limit accounting must agree after every
//! step. Also: fork independence both ways and snapshot/restore round trips.
//!
//! Hard links are modelled as what they mean: the paths of one group always hold equal nodes
//! (a change through one name is copied to the others), and each name counts as a node.

use std::collections::{BTreeMap, VecDeque};

use proptest::prelude::*;
use wasmsand_vfs::{Errno, FileType, SnapshotId, Vfs, VfsOptions};

const MAX_FILES: u64 = 6;
const MAX_BYTES: u64 = 48;
const PATHS: &[&str] = &[
    "/a", "/a/b", "/a/b/c", "/a/x", "/b", "/b/y", "/base", "/base/z", "/l", "/a/l",
];

#[derive(Clone, Debug, PartialEq, Eq)]
enum M {
    File(Vec<u8>),
    Dir,
    Link(String),
}

#[derive(Clone, Debug, Default)]
struct Model {
    nodes: BTreeMap<String, M>,
    baseline: u64,
    /// Hard-link group of each path that has one.
    groups: BTreeMap<String, u64>,
    next_group: u64,
}

/// Where a path leads in the model: the canonical path of the target, the node if it exists,
/// and how many components were left after a missing one.
struct Res {
    path: String,
    node: Option<M>,
    rest: usize,
}

fn comps(p: &str) -> impl Iterator<Item = String> + '_ {
    p.split('/')
        .filter(|c| !c.is_empty() && *c != ".")
        .map(str::to_owned)
}

fn join(dir: &str, name: &str) -> String {
    if dir == "/" {
        format!("/{name}")
    } else {
        format!("{dir}/{name}")
    }
}

fn parent(p: &str) -> String {
    match p.rfind('/') {
        Some(0) | None => "/".into(),
        Some(i) => p[..i].into(),
    }
}

impl Model {
    fn get(&self, p: &str) -> Option<&M> {
        if p == "/" {
            Some(&M::Dir)
        } else {
            self.nodes.get(p)
        }
    }

    fn walk(&self, path: &str, follow_last: bool) -> Result<Res, Errno> {
        let mut pending: VecDeque<String> = comps(path).collect();
        let mut cur = String::from("/");
        let mut links = 0;
        while let Some(c) = pending.pop_front() {
            let last = pending.is_empty();
            if c == ".." {
                cur = parent(&cur);
                continue;
            }
            let p = join(&cur, &c);
            match self.get(&p) {
                None => {
                    return Ok(Res {
                        path: p,
                        node: None,
                        rest: pending.len(),
                    });
                }
                Some(M::Link(t)) if !last || follow_last => {
                    links += 1;
                    if links > 40 {
                        return Err(Errno::ELOOP);
                    }
                    cur = "/".into();
                    for (i, tc) in comps(t).enumerate() {
                        pending.insert(i, tc);
                    }
                }
                Some(M::Dir) if !last => cur = p,
                Some(n) if last => {
                    return Ok(Res {
                        path: p,
                        node: Some(n.clone()),
                        rest: 0,
                    });
                }
                Some(_) => return Err(Errno::ENOTDIR),
            }
        }
        Ok(Res {
            path: cur,
            node: Some(M::Dir),
            rest: 0,
        })
    }

    fn resolve(&self, path: &str, follow: bool) -> Result<Res, Errno> {
        let r = self.walk(path, follow)?;
        if r.rest > 0 {
            Err(Errno::ENOENT)
        } else {
            Ok(r)
        }
    }

    fn files_used(&self) -> u64 {
        (self.nodes.len() as u64).saturating_sub(self.baseline)
    }

    fn bytes(&self) -> u64 {
        self.nodes
            .values()
            .map(|n| match n {
                M::File(d) => d.len() as u64,
                _ => 0,
            })
            .sum()
    }

    /// How many names the node at `p` has.
    fn names(&self, p: &str) -> u64 {
        match self.groups.get(p) {
            Some(g) => self.groups.values().filter(|h| *h == g).count() as u64,
            None => 1,
        }
    }

    /// Copies the node at `p` to the other names of its group.
    fn propagate(&mut self, p: &str) {
        let Some(&g) = self.groups.get(p) else {
            return;
        };
        let node = self.nodes[p].clone();
        for (q, h) in &self.groups {
            if *h == g && q != p {
                self.nodes.insert(q.clone(), node.clone());
            }
        }
    }

    fn forget_names(&mut self, p: &str) {
        let prefix = format!("{p}/");
        self.groups.retain(|k, _| k != p && !k.starts_with(&prefix));
    }

    fn link(&mut self, old: &str, new: &str) -> Result<(), Errno> {
        let ro = self.resolve(old, false)?;
        let node = ro.node.ok_or(Errno::ENOENT)?;
        if node == M::Dir {
            return Err(Errno::EPERM);
        }
        let rn = self.resolve(new, false)?;
        if rn.node.is_some() {
            return Err(Errno::EEXIST);
        }
        self.check_new()?;
        if let M::File(d) = &node {
            self.check_growth(d.len() as u64)?;
        }
        self.nodes.insert(rn.path.clone(), node);
        let g = match self.groups.get(&ro.path) {
            Some(g) => *g,
            None => {
                self.next_group += 1;
                self.groups.insert(ro.path, self.next_group);
                self.next_group
            }
        };
        self.groups.insert(rn.path, g);
        Ok(())
    }

    fn check_new(&self) -> Result<(), Errno> {
        if self.nodes.len() as u64 + 1 > self.baseline + MAX_FILES {
            Err(Errno::ENOSPC)
        } else {
            Ok(())
        }
    }

    fn check_growth(&self, added: u64) -> Result<(), Errno> {
        if added > 0 && self.bytes() + added > MAX_BYTES {
            Err(Errno::ENOSPC)
        } else {
            Ok(())
        }
    }

    fn children(&self, p: &str) -> Vec<String> {
        let prefix = if p == "/" {
            "/".to_string()
        } else {
            format!("{p}/")
        };
        self.nodes
            .keys()
            .filter(|k| k.starts_with(&prefix) && !k[prefix.len()..].contains('/'))
            .cloned()
            .collect()
    }

    fn remove_tree(&mut self, p: &str) {
        let prefix = format!("{p}/");
        self.nodes.retain(|k, _| k != p && !k.starts_with(&prefix));
    }

    fn write(&mut self, p: &str, data: &[u8]) -> Result<(), Errno> {
        let r = self.resolve(p, true)?;
        match r.node {
            None => {
                self.check_growth(data.len() as u64)?;
                self.check_new()?;
                self.nodes.insert(r.path, M::File(data.to_vec()));
            }
            Some(M::Dir) => return Err(Errno::EISDIR),
            Some(M::File(old)) => {
                let names = self.names(&r.path);
                self.check_growth((data.len() as u64).saturating_sub(old.len() as u64) * names)?;
                self.nodes.insert(r.path.clone(), M::File(data.to_vec()));
                self.propagate(&r.path);
            }
            Some(M::Link(_)) => unreachable!(),
        }
        Ok(())
    }

    fn write_at(&mut self, p: &str, off: u64, data: &[u8]) -> Result<(), Errno> {
        let r = self.resolve(p, true)?;
        match r.node {
            None => Err(Errno::ENOENT),
            Some(M::Dir) => Err(Errno::EISDIR),
            Some(M::File(mut old)) => {
                let end = off as usize + data.len();
                let names = self.names(&r.path);
                self.check_growth((end as u64).saturating_sub(old.len() as u64) * names)?;
                if end > old.len() {
                    old.resize(end, 0);
                }
                old[off as usize..end].copy_from_slice(data);
                self.nodes.insert(r.path.clone(), M::File(old));
                self.propagate(&r.path);
                Ok(())
            }
            Some(M::Link(_)) => unreachable!(),
        }
    }

    fn append(&mut self, p: &str, data: &[u8]) -> Result<(), Errno> {
        let r = self.resolve(p, true)?;
        match r.node {
            None => self.write(p, data),
            Some(M::File(old)) => self.write_at(p, old.len() as u64, data),
            Some(_) => Err(Errno::EISDIR),
        }
    }

    fn truncate(&mut self, p: &str, len: u64) -> Result<(), Errno> {
        let r = self.resolve(p, true)?;
        match r.node {
            None => Err(Errno::ENOENT),
            Some(M::Dir) => Err(Errno::EISDIR),
            Some(M::File(mut old)) => {
                let names = self.names(&r.path);
                self.check_growth(len.saturating_sub(old.len() as u64) * names)?;
                old.resize(len as usize, 0);
                self.nodes.insert(r.path.clone(), M::File(old));
                self.propagate(&r.path);
                Ok(())
            }
            Some(M::Link(_)) => unreachable!(),
        }
    }

    fn mkdir(&mut self, p: &str) -> Result<(), Errno> {
        let r = self.resolve(p, false)?;
        if r.node.is_some() {
            return Err(Errno::EEXIST);
        }
        self.check_new()?;
        self.nodes.insert(r.path, M::Dir);
        Ok(())
    }

    fn mkdir_p(&mut self, p: &str) -> Result<(), Errno> {
        let saved = self.nodes.clone();
        let out = (|| loop {
            let r = self.walk(p, true)?;
            match r.node {
                Some(M::Dir) => return Ok(()),
                Some(_) => return Err(Errno::EEXIST),
                None => {
                    if r.rest == 0 && self.resolve(p, false)?.node.is_some() {
                        return Err(Errno::EEXIST);
                    }
                    self.check_new()?;
                    self.nodes.insert(r.path, M::Dir);
                }
            }
        })();
        if out.is_err() {
            self.nodes = saved;
        }
        out
    }

    fn unlink(&mut self, p: &str) -> Result<(), Errno> {
        let r = self.resolve(p, false)?;
        match r.node {
            None => Err(Errno::ENOENT),
            Some(M::Dir) => Err(Errno::EISDIR),
            Some(_) => {
                self.nodes.remove(&r.path);
                self.groups.remove(&r.path);
                Ok(())
            }
        }
    }

    fn rmdir(&mut self, p: &str) -> Result<(), Errno> {
        let r = self.resolve(p, false)?;
        match r.node {
            None => Err(Errno::ENOENT),
            Some(M::Dir) if r.path == "/" => Err(Errno::EINVAL),
            Some(M::Dir) if !self.children(&r.path).is_empty() => Err(Errno::ENOTEMPTY),
            Some(M::Dir) => {
                self.nodes.remove(&r.path);
                Ok(())
            }
            Some(_) => Err(Errno::ENOTDIR),
        }
    }

    fn remove_recursive(&mut self, p: &str) -> Result<(), Errno> {
        let r = self.resolve(p, false)?;
        match r.node {
            None => Err(Errno::ENOENT),
            Some(_) if r.path == "/" => Err(Errno::EINVAL),
            Some(_) => {
                self.remove_tree(&r.path);
                self.forget_names(&r.path);
                Ok(())
            }
        }
    }

    fn rename(&mut self, from: &str, to: &str) -> Result<(), Errno> {
        let rf = self.resolve(from, false)?;
        let src = rf.node.ok_or(Errno::ENOENT)?;
        if rf.path == "/" {
            return Err(Errno::EINVAL);
        }
        let rt = self.resolve(to, false)?;
        if rt.path == "/" {
            return Err(Errno::EINVAL);
        }
        if rf.path == rt.path {
            return Ok(());
        }
        let src_dir = src == M::Dir;
        if src_dir && rt.path.starts_with(&format!("{}/", rf.path)) {
            return Err(Errno::EINVAL);
        }
        if let (Some(g), Some(h)) = (self.groups.get(&rf.path), self.groups.get(&rt.path))
            && g == h
        {
            return Ok(());
        }
        match (&src_dir, &rt.node) {
            (true, Some(M::Dir)) if !self.children(&rt.path).is_empty() => {
                return Err(Errno::ENOTEMPTY);
            }
            (true, Some(M::Dir)) | (_, None) | (false, Some(M::File(_) | M::Link(_))) => {}
            (true, Some(_)) => return Err(Errno::ENOTDIR),
            (false, Some(M::Dir)) => return Err(Errno::EISDIR),
        }
        self.remove_tree(&rt.path);
        self.forget_names(&rt.path);
        let prefix = format!("{}/", rf.path);
        let moved: Vec<(String, M)> = self
            .nodes
            .iter()
            .filter(|(k, _)| **k == rf.path || k.starts_with(&prefix))
            .map(|(k, v)| (format!("{}{}", rt.path, &k[rf.path.len()..]), v.clone()))
            .collect();
        let moved_names: Vec<(String, u64)> = self
            .groups
            .iter()
            .filter(|(k, _)| **k == rf.path || k.starts_with(&prefix))
            .map(|(k, g)| (format!("{}{}", rt.path, &k[rf.path.len()..]), *g))
            .collect();
        self.remove_tree(&rf.path);
        self.forget_names(&rf.path);
        self.nodes.extend(moved);
        self.groups.extend(moved_names);
        Ok(())
    }

    fn symlink(&mut self, target: &str, p: &str) -> Result<(), Errno> {
        let r = self.resolve(p, false)?;
        if r.node.is_some() {
            return Err(Errno::EEXIST);
        }
        self.check_new()?;
        self.nodes.insert(r.path, M::Link(target.into()));
        Ok(())
    }

    fn read(&self, p: &str) -> Result<Vec<u8>, Errno> {
        match self.resolve(p, true)?.node {
            None => Err(Errno::ENOENT),
            Some(M::File(d)) => Ok(d),
            Some(M::Dir) => Err(Errno::EISDIR),
            Some(M::Link(_)) => unreachable!(),
        }
    }
}

#[derive(Clone, Debug)]
enum Op {
    Write(usize, Vec<u8>),
    Append(usize, Vec<u8>),
    WriteAt(usize, u64, Vec<u8>),
    Truncate(usize, u64),
    Mkdir(usize),
    MkdirP(usize),
    Unlink(usize),
    Rmdir(usize),
    RemoveRecursive(usize),
    Rename(usize, usize),
    Symlink(usize, usize),
    Link(usize, usize),
    Read(usize),
    Snapshot,
    Restore(usize),
}

fn op() -> impl Strategy<Value = Op> {
    let p = 0..PATHS.len();
    let data = proptest::collection::vec(any::<u8>(), 0..14);
    prop_oneof![
        (p.clone(), data.clone()).prop_map(|(p, d)| Op::Write(p, d)),
        (p.clone(), data.clone()).prop_map(|(p, d)| Op::Append(p, d)),
        (p.clone(), 0u64..20, data).prop_map(|(p, o, d)| Op::WriteAt(p, o, d)),
        (p.clone(), 0u64..30).prop_map(|(p, n)| Op::Truncate(p, n)),
        p.clone().prop_map(Op::Mkdir),
        p.clone().prop_map(Op::MkdirP),
        p.clone().prop_map(Op::Unlink),
        p.clone().prop_map(Op::Rmdir),
        p.clone().prop_map(Op::RemoveRecursive),
        (p.clone(), p.clone()).prop_map(|(a, b)| Op::Rename(a, b)),
        (p.clone(), p.clone()).prop_map(|(t, l)| Op::Symlink(t, l)),
        (p.clone(), p.clone()).prop_map(|(a, b)| Op::Link(a, b)),
        p.prop_map(Op::Read),
        Just(Op::Snapshot),
        (0usize..4).prop_map(Op::Restore),
    ]
}

fn fresh() -> (Vfs, Model) {
    let mut vfs = Vfs::new(VfsOptions {
        max_file_count: Some(MAX_FILES),
        fs_limit_bytes: Some(MAX_BYTES),
        writable_paths: None,
    });
    vfs.layout(|v| v.mkdir("/base")).unwrap();
    let mut model = Model::default();
    model.nodes.insert("/base".into(), M::Dir);
    model.baseline = 1;
    (vfs, model)
}

/// The VFS's whole tree in the model's form.
fn dump(vfs: &Vfs) -> BTreeMap<String, M> {
    let mut out = BTreeMap::new();
    let mut dirs = vec!["/".to_string()];
    while let Some(d) = dirs.pop() {
        for e in vfs.readdir(&d).unwrap() {
            let p = join(&d, &e.name);
            let node = match e.file_type {
                FileType::Dir => {
                    dirs.push(p.clone());
                    M::Dir
                }
                FileType::File => M::File(vfs.read(&p).unwrap().to_vec()),
                FileType::Symlink => M::Link(vfs.readlink(&p).unwrap()),
                FileType::CharDevice => unreachable!("no devices here"),
            };
            out.insert(p, node);
        }
    }
    out
}

fn apply(vfs: &mut Vfs, model: &mut Model, snaps: &mut Vec<(SnapshotId, Model)>, op: &Op) {
    let path = |i: usize| PATHS[i];
    let (got, want) = match op {
        Op::Write(p, d) => (vfs.write(path(*p), d), model.write(path(*p), d)),
        Op::Append(p, d) => (vfs.append(path(*p), d), model.append(path(*p), d)),
        Op::WriteAt(p, o, d) => (
            vfs.write_at(path(*p), *o, d).map(|_| ()),
            model.write_at(path(*p), *o, d),
        ),
        Op::Truncate(p, n) => (vfs.truncate(path(*p), *n), model.truncate(path(*p), *n)),
        Op::Mkdir(p) => (vfs.mkdir(path(*p)), model.mkdir(path(*p))),
        Op::MkdirP(p) => (vfs.mkdir_p(path(*p)), model.mkdir_p(path(*p))),
        Op::Unlink(p) => (vfs.unlink(path(*p)), model.unlink(path(*p))),
        Op::Rmdir(p) => (vfs.rmdir(path(*p)), model.rmdir(path(*p))),
        Op::RemoveRecursive(p) => (
            vfs.remove_recursive(path(*p)),
            model.remove_recursive(path(*p)),
        ),
        Op::Rename(a, b) => (
            vfs.rename(path(*a), path(*b)),
            model.rename(path(*a), path(*b)),
        ),
        Op::Symlink(t, l) => (
            vfs.symlink(path(*t), path(*l)),
            model.symlink(path(*t), path(*l)),
        ),
        Op::Link(a, b) => (
            vfs.link(path(*a), path(*b), false),
            model.link(path(*a), path(*b)),
        ),
        Op::Read(p) => {
            let got = vfs.read(path(*p)).map(|b| b.to_vec());
            let want = model.read(path(*p));
            assert_eq!(got.map_err(|e| e.errno), want, "{op:?}");
            return;
        }
        Op::Snapshot => {
            snaps.push((vfs.snapshot(), model.clone()));
            return;
        }
        Op::Restore(k) => {
            if let Some((id, m)) = snaps.get(k % snaps.len().max(1)) {
                vfs.restore(*id).unwrap();
                *model = m.clone();
            }
            return;
        }
    };
    assert_eq!(got.map_err(|e| e.errno), want, "{op:?}");
}

fn check_agrees(vfs: &Vfs, model: &Model) {
    assert_eq!(dump(vfs), model.nodes);
    let mut inos = BTreeMap::new();
    for (p, node) in &model.nodes {
        if *node == M::Dir {
            continue;
        }
        let m = vfs.lstat(p).unwrap();
        assert_eq!(m.nlink, model.names(p), "links of {p}");
        if let Some(g) = model.groups.get(p) {
            assert_eq!(*inos.entry(*g).or_insert(m.ino), m.ino, "inode of {p}");
        }
    }
    let usage = vfs.usage();
    assert_eq!(usage.files_used, model.files_used(), "files used");
    assert_eq!(usage.bytes_used, model.bytes(), "bytes used");
    assert_eq!(usage.nodes, model.nodes.len() as u64);
    assert!(usage.files_used <= MAX_FILES);
    assert!(usage.bytes_used <= MAX_BYTES);
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 512, ..ProptestConfig::default() })]

    #[test]
    fn vfs_matches_reference_model(ops in proptest::collection::vec(op(), 1..60)) {
        let (mut vfs, mut model) = fresh();
        let mut snaps = Vec::new();
        for op in &ops {
            apply(&mut vfs, &mut model, &mut snaps, op);
            check_agrees(&vfs, &model);
        }
    }

    #[test]
    fn forks_are_independent_both_ways(
        before in proptest::collection::vec(op(), 0..20),
        parent_ops in proptest::collection::vec(op(), 1..20),
        child_ops in proptest::collection::vec(op(), 1..20),
    ) {
        let (mut vfs, mut model) = fresh();
        let mut snaps = Vec::new();
        for op in &before {
            apply(&mut vfs, &mut model, &mut snaps, op);
        }
        let mut child = vfs.cow_clone();
        let mut child_model = model.clone();
        let mut child_snaps = snaps.clone();
        for op in &parent_ops {
            apply(&mut vfs, &mut model, &mut snaps, op);
        }
        check_agrees(&child, &child_model);
        for op in &child_ops {
            apply(&mut child, &mut child_model, &mut child_snaps, op);
        }
        check_agrees(&vfs, &model);
        check_agrees(&child, &child_model);
    }

    #[test]
    fn snapshot_restore_round_trips(
        before in proptest::collection::vec(op(), 0..30),
        after in proptest::collection::vec(op(), 1..30),
    ) {
        let (mut vfs, mut model) = fresh();
        let mut snaps = Vec::new();
        for op in &before {
            apply(&mut vfs, &mut model, &mut snaps, op);
        }
        let tree = dump(&vfs);
        let usage = vfs.usage();
        let id = vfs.snapshot();
        for op in &after {
            apply(&mut vfs, &mut model, &mut snaps, op);
        }
        vfs.restore(id).unwrap();
        prop_assert_eq!(dump(&vfs), tree.clone());
        prop_assert_eq!(vfs.usage(), usage);
        // Restoring twice gives the same tree again.
        vfs.write("/base/z", b"scribble").ok();
        vfs.restore(id).unwrap();
        prop_assert_eq!(dump(&vfs), tree);
    }
}

#[test]
fn restoring_an_unknown_snapshot_is_an_error() {
    let (mut vfs, _) = fresh();
    let err = vfs.restore(SnapshotId(99)).unwrap_err();
    assert_eq!(err.errno, Errno::EINVAL);
    assert!(err.to_string().contains("unknown snapshot id 99"));
    let id = vfs.snapshot();
    vfs.drop_snapshot(id).unwrap();
    assert!(vfs.restore(id).is_err());
}

#[test]
fn fork_carries_counters_and_snapshots() {
    let (mut vfs, _) = fresh();
    vfs.write("/a", b"12345").unwrap();
    let id = vfs.snapshot();
    vfs.write("/b", b"x").unwrap();
    let mut child = vfs.cow_clone();
    assert_eq!(child.usage(), vfs.usage());
    child.restore(id).unwrap();
    assert!(!child.exists("/b"));
    assert!(vfs.exists("/b"));
    assert_eq!(child.usage().bytes_used, 5);
    assert_eq!(vfs.usage().bytes_used, 6);
}
