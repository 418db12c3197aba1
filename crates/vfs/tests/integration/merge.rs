//! Fork merge-back (`Vfs::merge`) against a reference: random operations on a base, then on
//! a parent and a fork of it; the three trees are read back as flat maps (path → kind, mode,
//! content), merged three-way by a plain function over those maps, and the merged tree (or
//! the conflict set, with the parent unchanged) must be what the reference says.

use std::collections::{BTreeMap, BTreeSet};

use proptest::prelude::*;
use wasmsand_vfs::{Errno, FileType, MergeError, SideChange, Vfs, VfsOptions};

const PATHS: &[&str] = &["/a", "/a/b", "/a/b/c", "/a/x", "/b", "/b/y", "/c"];
const DATA: &[&str] = &["", "1", "22", "333"];
const MODES: &[u32] = &[0o644, 0o600, 0o755];
/// Directory modes keep the owner's rwx, so the trees stay readable for the comparison.
const DIR_MODES: &[u32] = &[0o755, 0o700, 0o750];

#[derive(Clone, Debug, PartialEq, Eq)]
enum S {
    File(u32, Vec<u8>),
    Dir(u32),
    Link(String),
}

type Flat = BTreeMap<String, S>;

#[derive(Clone, Debug)]
enum Op {
    Write(usize, usize),
    Mkdir(usize),
    Remove(usize),
    Chmod(usize, usize),
    Symlink(usize, usize),
    Rename(usize, usize),
    Link(usize, usize),
}

fn op() -> impl Strategy<Value = Op> {
    let p = 0..PATHS.len();
    prop_oneof![
        4 => (p.clone(), 0..DATA.len()).prop_map(|(a, b)| Op::Write(a, b)),
        3 => p.clone().prop_map(Op::Mkdir),
        2 => p.clone().prop_map(Op::Remove),
        1 => (p.clone(), 0..MODES.len()).prop_map(|(a, b)| Op::Chmod(a, b)),
        1 => (p.clone(), p.clone()).prop_map(|(a, b)| Op::Symlink(a, b)),
        1 => (p.clone(), p.clone()).prop_map(|(a, b)| Op::Rename(a, b)),
        1 => (p.clone(), p).prop_map(|(a, b)| Op::Link(a, b)),
    ]
}

/// Runs one operation; a refused one (missing parent, not empty, ...) changes nothing.
fn apply(v: &mut Vfs, op: &Op) {
    let _ = match *op {
        Op::Write(p, d) => v.write(PATHS[p], DATA[d]),
        Op::Mkdir(p) => v.mkdir_p(PATHS[p]),
        Op::Remove(p) => match v.lstat(PATHS[p]) {
            Ok(m) if m.is_dir() => v.remove_recursive(PATHS[p]),
            Ok(_) => v.unlink(PATHS[p]),
            Err(e) => Err(e),
        },
        Op::Chmod(p, m) => match v.lstat(PATHS[p]) {
            Ok(md) if md.is_dir() => v.chmod(PATHS[p], DIR_MODES[m]),
            Ok(md) if !md.is_symlink() => v.chmod(PATHS[p], MODES[m]),
            _ => Ok(()),
        },
        Op::Symlink(t, p) => v.symlink(PATHS[t], PATHS[p]),
        Op::Rename(a, b) => v.rename(PATHS[a], PATHS[b]),
        Op::Link(a, b) => v.link(PATHS[a], PATHS[b], false),
    };
}

fn flatten(v: &Vfs) -> Flat {
    fn walk(v: &Vfs, dir: &str, out: &mut Flat) {
        for (name, m) in v.readdir_metadata(dir).expect("a listed directory reads") {
            let p = if dir == "/" {
                format!("/{name}")
            } else {
                format!("{dir}/{name}")
            };
            let s = match m.file_type {
                FileType::Dir => S::Dir(m.mode),
                FileType::Symlink => S::Link(v.readlink(&p).expect("a listed link reads")),
                _ => S::File(m.mode, v.read(&p).expect("a listed file reads").to_vec()),
            };
            let is_dir = matches!(s, S::Dir(_));
            out.insert(p.clone(), s);
            if is_dir {
                walk(v, &p, out);
            }
        }
    }
    let mut out = Flat::new();
    walk(v, "/", &mut out);
    out
}

fn under(p: &str, root: &str) -> bool {
    p == root || p.starts_with(&format!("{root}/"))
}

fn sub(m: &Flat, p: &str) -> Flat {
    m.iter()
        .filter(|(k, _)| under(k, p))
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect()
}

fn side(b: Option<&S>, now: Option<&S>) -> &'static str {
    match (b, now) {
        (None, _) => "added",
        (_, None) => "deleted",
        _ => "changed",
    }
}

type Conflicts = BTreeSet<(String, &'static str, &'static str)>;

/// The three-way merge over flat maps, path by path from the top: where both sides hold a
/// directory only its mode merges and its entries are taken one by one; anywhere else the
/// whole subtree at the path is taken from the fork if the parent left it as in the base,
/// kept if the parent already has the fork's, else a conflict.
fn reference(b: &Flat, o: &Flat, t: &Flat) -> Result<Flat, Conflicts> {
    let mut out = o.clone();
    let mut conflicts = Conflicts::new();
    let mut settled: Vec<String> = Vec::new();
    let paths: BTreeSet<&String> = b.keys().chain(o.keys()).chain(t.keys()).collect();
    for p in paths {
        if settled.iter().any(|s| under(p, s)) {
            continue;
        }
        let (bs, ts) = (sub(b, p), sub(t, p));
        if bs == ts {
            continue;
        }
        if let (Some(S::Dir(om)), Some(S::Dir(tm))) = (o.get(p), t.get(p)) {
            let bm = match b.get(p) {
                Some(S::Dir(m)) => Some(*m),
                _ => None,
            };
            if bm != Some(*tm) {
                if bm == Some(*om) {
                    out.insert(p.clone(), S::Dir(*tm));
                } else if om != tm {
                    conflicts.insert((
                        p.clone(),
                        side(b.get(p), o.get(p)),
                        side(b.get(p), t.get(p)),
                    ));
                }
            }
            continue;
        }
        settled.push(p.clone());
        let os = sub(o, p);
        if os == bs {
            out.retain(|k, _| !under(k, p));
            out.extend(ts);
        } else if os != ts {
            conflicts.insert((
                p.clone(),
                side(b.get(p), o.get(p)),
                side(b.get(p), t.get(p)),
            ));
        }
    }
    if conflicts.is_empty() {
        Ok(out)
    } else {
        Err(conflicts)
    }
}

fn kind(s: SideChange) -> &'static str {
    s.as_str()
}

/// Inode numbers stay unique in the merged tree.
/// Every inode number belongs to one node: shared only by the names of one hard-linked file,
/// as many as its link count says.
fn inos_unique(v: &Vfs) -> bool {
    let mut seen: BTreeMap<u64, (u64, u64)> = BTreeMap::new();
    let mut stack = vec!["/".to_string()];
    while let Some(dir) = stack.pop() {
        for (name, m) in v.readdir_metadata(&dir).unwrap() {
            let names = seen
                .entry(m.ino)
                .or_insert((0, if m.is_dir() { 1 } else { m.nlink }));
            names.0 += 1;
            if m.is_dir() {
                stack.push(if dir == "/" {
                    format!("/{name}")
                } else {
                    format!("{dir}/{name}")
                });
            }
        }
    }
    seen.values().all(|(count, nlink)| count == nlink)
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 1024, ..ProptestConfig::default() })]

    #[test]
    fn merge_agrees_with_the_reference(
        setup in prop::collection::vec(op(), 0..8),
        ours_ops in prop::collection::vec(op(), 0..6),
        theirs_ops in prop::collection::vec(op(), 0..6),
    ) {
        let mut parent = Vfs::new(VfsOptions::default());
        for o in &setup {
            apply(&mut parent, o);
        }
        let base = parent.checkpoint();
        let base_flat = flatten(&parent);
        let mut fork = parent.cow_clone();
        for o in &ours_ops {
            apply(&mut parent, o);
        }
        for o in &theirs_ops {
            apply(&mut fork, o);
        }
        let (ours_flat, theirs_flat) = (flatten(&parent), flatten(&fork));
        let want = reference(&base_flat, &ours_flat, &theirs_flat);
        let got = parent.merge(&base, &fork.checkpoint());
        match (want, got) {
            (Ok(tree), Ok(report)) => {
                prop_assert_eq!(flatten(&parent), tree);
                prop_assert!(inos_unique(&parent));
                // Each path reported now holds the fork's state, and is one the fork changed.
                let merged = flatten(&parent);
                for a in &report.applied {
                    prop_assert_eq!(merged.get(&a.path), theirs_flat.get(&a.path));
                    prop_assert_ne!(base_flat.get(&a.path), theirs_flat.get(&a.path));
                }
                // The fork is untouched.
                prop_assert_eq!(flatten(&fork), theirs_flat);
            }
            (Err(want), Err(MergeError::Conflicts(got))) => {
                let got: Conflicts = got
                    .iter()
                    .map(|c| (c.path.clone(), kind(c.ours), kind(c.theirs)))
                    .collect();
                prop_assert_eq!(got, want);
                prop_assert_eq!(flatten(&parent), ours_flat);
            }
            (want, got) => prop_assert!(false, "reference {:?}, merge {:?}", want, got.map(|r| r.applied)),
        }
    }
}

/// Each side fits the byte limit on its own; together they do not, and the merge is refused
/// with nothing changed.
#[test]
fn a_merge_past_the_byte_limit_is_refused_and_changes_nothing() {
    let mut parent = Vfs::new(VfsOptions {
        fs_limit_bytes: Some(10),
        ..VfsOptions::default()
    });
    let base = parent.checkpoint();
    let mut fork = parent.cow_clone();
    parent.write("/p", "123456").unwrap();
    fork.write("/f", "abcdef").unwrap();
    let before = flatten(&parent);
    match parent.merge(&base, &fork.checkpoint()) {
        Err(MergeError::Fs(e)) => assert_eq!(e.errno, Errno::ENOSPC),
        other => panic!("expected ENOSPC, got {:?}", other.map(|r| r.applied)),
    }
    assert_eq!(flatten(&parent), before);
    // Room made on the parent's side lets the same merge through.
    parent.unlink("/p").unwrap();
    let r = parent.merge(&base, &fork.checkpoint()).unwrap();
    assert_eq!(r.applied.len(), 1);
    assert_eq!(parent.read("/f").unwrap(), "abcdef");
}

#[test]
fn a_tree_deleted_in_the_fork_where_the_parent_added_a_file_is_one_conflict() {
    let mut parent = Vfs::new(VfsOptions::default());
    parent.mkdir_p("/d/e").unwrap();
    parent.write("/d/e/f", "x").unwrap();
    let base = parent.checkpoint();
    let mut fork = parent.cow_clone();
    fork.remove_recursive("/d").unwrap();
    parent.write("/d/e/new", "y").unwrap();
    let Err(MergeError::Conflicts(c)) = parent.merge(&base, &fork.checkpoint()) else {
        panic!("expected a conflict");
    };
    assert_eq!(c.len(), 1);
    assert_eq!(c[0].path, "/d");
    assert_eq!(
        (c[0].ours, c[0].theirs),
        (SideChange::Changed, SideChange::Deleted)
    );
    // Without the parent's addition, the fork's deletion of the whole tree applies.
    parent.unlink("/d/e/new").unwrap();
    let r = parent.merge(&base, &fork.checkpoint()).unwrap();
    assert_eq!(r.applied.len(), 1);
    assert_eq!(r.applied[0].change, SideChange::Deleted);
    assert!(!parent.exists("/d"));
}
