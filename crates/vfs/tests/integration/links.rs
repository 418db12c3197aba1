//! Hard links (`Vfs::link`): what Linux does with two names for one file, and how the names
//! behave across the tree's own operations (forks, snapshots, deltas, merges, limits).

use wasmsand_vfs::{Errno, FileType, Vfs, VfsOptions};

fn fs() -> Vfs {
    Vfs::with_standard_layout(VfsOptions::default())
}

fn errno<T: std::fmt::Debug>(r: Result<T, wasmsand_vfs::VfsError>) -> Errno {
    r.unwrap_err().errno
}

#[test]
fn two_names_share_content_attributes_and_inode() {
    let mut v = fs();
    v.write("/tmp/a", "one").unwrap();
    v.link("/tmp/a", "/tmp/b", false).unwrap();
    let (a, b) = (v.stat("/tmp/a").unwrap(), v.stat("/tmp/b").unwrap());
    assert_eq!((a.ino, a.nlink, b.nlink), (b.ino, 2, 2));
    v.append("/tmp/b", "+two").unwrap();
    assert_eq!(&v.read("/tmp/a").unwrap()[..], b"one+two");
    v.write_at("/tmp/a", 0, b"ONE").unwrap();
    v.truncate("/tmp/a", 5).unwrap();
    assert_eq!(&v.read("/tmp/b").unwrap()[..], b"ONE+t");
    v.chmod("/tmp/b", 0o600).unwrap();
    assert_eq!(v.stat("/tmp/a").unwrap().mode, 0o600);
    // A third name joins the same group.
    v.link("/tmp/b", "/tmp/c", false).unwrap();
    assert_eq!(v.stat("/tmp/a").unwrap().nlink, 3);
    v.unlink("/tmp/a").unwrap();
    assert_eq!(v.stat("/tmp/c").unwrap().nlink, 2);
    v.write("/tmp/c", "new").unwrap();
    assert_eq!(&v.read("/tmp/b").unwrap()[..], b"new");
    let listed = v.readdir_metadata("/tmp").unwrap();
    assert!(listed.iter().all(|(_, m)| m.nlink == 2 && m.ino == a.ino));
}

#[test]
fn refusals_are_linux_errnos() {
    let mut v = fs();
    v.write("/tmp/a", "x").unwrap();
    v.write("/tmp/b", "y").unwrap();
    assert_eq!(errno(v.link("/tmp/a", "/tmp/b", false)), Errno::EEXIST);
    assert_eq!(errno(v.link("/tmp/nope", "/tmp/c", false)), Errno::ENOENT);
    assert_eq!(errno(v.link("/tmp/a", "/tmp/no/c", false)), Errno::ENOENT);
    assert_eq!(errno(v.link("/tmp", "/tmp/d", false)), Errno::EPERM);
    assert_eq!(errno(v.link("/tmp/a", "/tmp/a/c", false)), Errno::ENOTDIR);
    assert!(!v.exists("/tmp/c") && !v.exists("/tmp/d"));
    assert_eq!(v.stat("/tmp/a").unwrap().nlink, 1);
}

#[test]
fn a_symlink_is_linked_itself_unless_followed() {
    let mut v = fs();
    v.write("/tmp/f", "data").unwrap();
    v.symlink("f", "/tmp/s").unwrap();
    v.link("/tmp/s", "/tmp/s2", false).unwrap();
    assert_eq!(v.lstat("/tmp/s2").unwrap().file_type, FileType::Symlink);
    assert_eq!(v.lstat("/tmp/s").unwrap().nlink, 2);
    v.link("/tmp/s", "/tmp/f2", true).unwrap();
    assert_eq!(v.lstat("/tmp/f2").unwrap().file_type, FileType::File);
    assert_eq!(v.stat("/tmp/f").unwrap().nlink, 2);
}

#[test]
fn renames_move_names_and_two_names_of_one_file_rename_to_nothing() {
    let mut v = fs();
    v.mkdir_p("/tmp/d/e").unwrap();
    v.write("/tmp/d/e/f", "1").unwrap();
    v.link("/tmp/d/e/f", "/tmp/g", false).unwrap();
    v.rename("/tmp/d", "/tmp/moved").unwrap();
    v.write("/tmp/g", "2").unwrap();
    assert_eq!(&v.read("/tmp/moved/e/f").unwrap()[..], b"2");
    // rename(2) between two names of one file does nothing.
    v.rename("/tmp/g", "/tmp/moved/e/f").unwrap();
    assert!(v.exists("/tmp/g"));
    assert_eq!(v.stat("/tmp/g").unwrap().nlink, 2);
    // Replacing one name with another file drops it from the group.
    v.write("/tmp/other", "o").unwrap();
    v.rename("/tmp/other", "/tmp/g").unwrap();
    assert_eq!(v.stat("/tmp/moved/e/f").unwrap().nlink, 1);
    v.write("/tmp/g", "3").unwrap();
    assert_eq!(&v.read("/tmp/moved/e/f").unwrap()[..], b"2");
    assert_ne!(
        v.stat("/tmp/g").unwrap().ino,
        v.stat("/tmp/moved/e/f").unwrap().ino
    );
}

#[test]
fn removing_a_tree_forgets_its_names() {
    let mut v = fs();
    v.mkdir("/tmp/d").unwrap();
    v.write("/tmp/d/f", "1").unwrap();
    v.link("/tmp/d/f", "/tmp/keep", false).unwrap();
    v.remove_recursive("/tmp/d").unwrap();
    assert_eq!(v.stat("/tmp/keep").unwrap().nlink, 1);
    // A new file at the old path is not a name of the kept one.
    v.mkdir("/tmp/d").unwrap();
    v.write("/tmp/d/f", "fresh").unwrap();
    v.write("/tmp/keep", "kept").unwrap();
    assert_eq!(&v.read("/tmp/d/f").unwrap()[..], b"fresh");
}

#[test]
fn names_stay_in_step_below_a_directory_that_cannot_be_searched() {
    let mut v = fs();
    v.mkdir("/tmp/locked").unwrap();
    v.write("/tmp/locked/f", "1").unwrap();
    v.link("/tmp/locked/f", "/tmp/f", false).unwrap();
    v.chmod("/tmp/locked", 0).unwrap();
    v.write("/tmp/f", "22").unwrap();
    v.chmod("/tmp/locked", 0o755).unwrap();
    assert_eq!(&v.read("/tmp/locked/f").unwrap()[..], b"22");
}

#[test]
fn limits_count_every_name() {
    let mut v = Vfs::with_standard_layout(VfsOptions {
        max_file_count: Some(3),
        fs_limit_bytes: Some(10),
        writable_paths: None,
    });
    v.write("/tmp/a", "1234").unwrap();
    v.link("/tmp/a", "/tmp/b", false).unwrap();
    assert_eq!(v.usage().bytes_used, 8);
    assert_eq!(v.usage().files_used, 2);
    // Growing by 2 through one name is 4 more bytes across both: over the limit, refused.
    assert_eq!(errno(v.append("/tmp/a", "56")), Errno::ENOSPC);
    assert_eq!(&v.read("/tmp/b").unwrap()[..], b"1234");
    assert_eq!(errno(v.link("/tmp/a", "/tmp/c", false)), Errno::ENOSPC);
    v.unlink("/tmp/b").unwrap();
    assert_eq!((v.usage().bytes_used, v.usage().files_used), (4, 1));
    v.append("/tmp/a", "56").unwrap();
}

#[test]
fn a_name_inside_the_writable_paths_cannot_reach_a_file_outside() {
    let mut v = Vfs::with_standard_layout(VfsOptions {
        writable_paths: Some(vec!["/tmp".into()]),
        ..VfsOptions::default()
    });
    v.layout(|v| v.write("/etc/conf", "ro")).unwrap();
    assert_eq!(errno(v.link("/etc/conf", "/tmp/conf", false)), Errno::EXDEV);
    v.write("/tmp/a", "x").unwrap();
    assert_eq!(errno(v.link("/tmp/a", "/etc/a", false)), Errno::EROFS);
}

#[test]
fn forks_and_snapshots_keep_their_own_names() {
    let mut v = fs();
    v.write("/tmp/a", "base").unwrap();
    let snap = v.snapshot();
    v.link("/tmp/a", "/tmp/b", false).unwrap();
    let mut fork = v.cow_clone();
    fork.write("/tmp/b", "fork").unwrap();
    assert_eq!(&fork.read("/tmp/a").unwrap()[..], b"fork");
    assert_eq!(&v.read("/tmp/a").unwrap()[..], b"base");
    v.restore(snap).unwrap();
    assert!(!v.exists("/tmp/b"));
    assert_eq!(v.stat("/tmp/a").unwrap().nlink, 1);
    v.write("/tmp/a", "after").unwrap();
    assert_eq!(&fork.read("/tmp/b").unwrap()[..], b"fork");
}

#[test]
fn a_merged_fork_brings_its_names_as_separate_files_with_their_own_inodes() {
    let mut parent = fs();
    parent.write("/tmp/a", "1").unwrap();
    let base = parent.checkpoint();
    let mut fork = parent.cow_clone();
    fork.link("/tmp/a", "/tmp/b", false).unwrap();
    fork.write("/tmp/a", "2").unwrap();
    parent.merge(&base, &fork.checkpoint()).unwrap();
    assert_eq!(&parent.read("/tmp/a").unwrap()[..], b"2");
    assert_eq!(&parent.read("/tmp/b").unwrap()[..], b"2");
    let (a, b) = (
        parent.stat("/tmp/a").unwrap(),
        parent.stat("/tmp/b").unwrap(),
    );
    assert_ne!(a.ino, b.ino);
    parent.write("/tmp/b", "3").unwrap();
    assert_eq!(&parent.read("/tmp/a").unwrap()[..], b"2");
}
