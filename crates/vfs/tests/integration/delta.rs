//! `delta_since` / `apply_delta` (portable state) and the running totals of `activity`
//! (run receipts): a random sequence of changes made after a checkpoint, replayed onto a copy
//! of the checkpointed tree through the delta, must give the same tree — names, kinds, modes,
//! times, contents and symlink targets — and the same usage counters. Hard links made after the
//! checkpoint arrive as separate nodes with the same content (a delta carries paths, not
//! inodes).

use proptest::prelude::*;
use wasmsand_vfs::{FileType, Vfs, VfsOptions};

const PATHS: &[&str] = &[
    "/a", "/a/b", "/a/b/c", "/a/x", "/b", "/b/y", "/keep", "/keep/z",
];

#[derive(Clone, Debug)]
enum Op {
    Write(usize, Vec<u8>),
    Append(usize, Vec<u8>),
    Mkdir(usize),
    Symlink(usize, usize),
    Remove(usize),
    Chmod(usize, u32),
    Rename(usize, usize),
    Link(usize, usize),
}

fn op() -> impl Strategy<Value = Op> {
    let p = 0..PATHS.len();
    prop_oneof![
        (p.clone(), prop::collection::vec(any::<u8>(), 0..12)).prop_map(|(i, d)| Op::Write(i, d)),
        (p.clone(), prop::collection::vec(any::<u8>(), 1..6)).prop_map(|(i, d)| Op::Append(i, d)),
        p.clone().prop_map(Op::Mkdir),
        (p.clone(), p.clone()).prop_map(|(a, b)| Op::Symlink(a, b)),
        p.clone().prop_map(Op::Remove),
        (p.clone(), 0o400u32..0o777).prop_map(|(i, m)| Op::Chmod(i, m)),
        (p.clone(), p.clone()).prop_map(|(a, b)| Op::Rename(a, b)),
        (p.clone(), p).prop_map(|(a, b)| Op::Link(a, b)),
    ]
}

fn apply(v: &mut Vfs, op: &Op) {
    // Failures (a missing parent, a directory in the way) are part of the game.
    let _ = match op {
        Op::Write(i, d) => v.write(PATHS[*i], d),
        Op::Append(i, d) => v.append(PATHS[*i], d),
        Op::Mkdir(i) => v.mkdir(PATHS[*i]),
        Op::Symlink(t, i) => v.symlink(PATHS[*t], PATHS[*i]),
        Op::Remove(i) => v.remove_recursive(PATHS[*i]),
        Op::Chmod(i, m) => v.chmod(PATHS[*i], *m),
        Op::Rename(a, b) => v.rename(PATHS[*a], PATHS[*b]),
        Op::Link(a, b) => v.link(PATHS[*a], PATHS[*b], false),
    };
}

/// Everything observable of a tree, path by path (inode numbers aside).
fn dump(v: &Vfs, dir: &str, out: &mut Vec<String>) {
    for (name, m) in v.readdir_metadata(dir).unwrap() {
        let p = if dir == "/" {
            format!("/{name}")
        } else {
            format!("{dir}/{name}")
        };
        let what = match m.file_type {
            FileType::File => format!("{:?}", v.read(&p).unwrap()),
            FileType::Symlink => v.readlink(&p).unwrap(),
            _ => String::new(),
        };
        out.push(format!(
            "{p} {:?} {:o} {:?} {:?} {what}",
            m.file_type, m.mode, m.mtime, m.ctime
        ));
        if m.file_type == FileType::Dir && m.mode & 0o500 == 0o500 {
            dump(v, &p, out);
        }
    }
}

fn base() -> Vfs {
    let mut v = Vfs::new(VfsOptions::default());
    v.mkdir("/keep").unwrap();
    v.write("/keep/z", "zzz").unwrap();
    v.mkdir("/a").unwrap();
    v.write("/a/x", "x").unwrap();
    v
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    #[test]
    fn a_delta_replays_the_changes(ops in prop::collection::vec(op(), 0..25)) {
        let mut v = base();
        let at = v.checkpoint();
        let copy = v.cow_clone();
        for o in &ops {
            apply(&mut v, o);
        }
        let delta = v.delta_since(&at);
        let mut replayed = copy;
        replayed.apply_delta(&delta).unwrap();
        let (mut want, mut got) = (Vec::new(), Vec::new());
        dump(&v, "/", &mut want);
        dump(&replayed, "/", &mut got);
        prop_assert_eq!(got, want);
        prop_assert_eq!(replayed.usage(), v.usage());
        // Rolling back to the checkpoint gives the first tree again, counters included.
        let mut back = v.cow_clone();
        back.rollback(at.clone());
        let (mut first, mut again) = (Vec::new(), Vec::new());
        dump(&base(), "/", &mut first);
        dump(&back, "/", &mut again);
        prop_assert_eq!(first.len(), again.len());
        prop_assert_eq!(back.usage().nodes, base().usage().nodes);
    }
}

#[test]
fn an_untouched_tree_has_an_empty_delta() {
    let v = base();
    assert!(v.delta_since(&v.checkpoint()).entries.is_empty());
}

#[test]
fn activity_counts_writes_creations_removals_and_refusals() {
    let mut v = Vfs::new(VfsOptions {
        max_file_count: Some(3),
        fs_limit_bytes: Some(10),
        writable_paths: None,
    });
    let before = v.activity();
    v.mkdir("/d").unwrap();
    v.write("/d/f", "12345").unwrap();
    v.write_at("/d/f", 5, b"67").unwrap();
    assert!(v.write("/d/g", "too many bytes").is_err());
    v.symlink("/d/f", "/d/l").unwrap();
    assert!(v.mkdir("/e").is_err());
    v.remove_recursive("/d").unwrap();
    let a = v.activity().since(before);
    assert_eq!(a.bytes_written, 7);
    assert_eq!((a.created, a.deleted), (3, 3));
    assert_eq!((a.byte_limit_hits, a.count_limit_hits), (1, 1));
    // A snapshot restore does not rewind the totals.
    let snap = v.snapshot();
    v.write("/f", "1").unwrap();
    v.restore(snap).unwrap();
    assert_eq!(v.activity().since(before).created, 4);
}
