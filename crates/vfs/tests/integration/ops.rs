//! Operation semantics: each case states the POSIX (Linux) behaviour it checks.

use std::time::{Duration, SystemTime};

use bytes::Bytes;
use wasmsand_vfs::{Device, Errno, FileType, Vfs, VfsOptions, path};

fn fs() -> Vfs {
    Vfs::with_standard_layout(VfsOptions::default())
}

fn errno<T: std::fmt::Debug>(r: Result<T, wasmsand_vfs::VfsError>) -> Errno {
    r.unwrap_err().errno
}

#[test]
fn write_read_append_overwrite() {
    let mut v = fs();
    v.write("/tmp/f", "hello").unwrap();
    v.append("/tmp/f", " world").unwrap();
    assert_eq!(&v.read("/tmp/f").unwrap()[..], b"hello world");
    v.write("/tmp/f", "x").unwrap();
    assert_eq!(&v.read("/tmp/f").unwrap()[..], b"x");
    v.append("/tmp/new", "created").unwrap();
    assert_eq!(&v.read("/tmp/new").unwrap()[..], b"created");
    assert_eq!(v.usage().bytes_used, 8);
}

#[test]
fn partial_io_at_offsets_and_truncate() {
    let mut v = fs();
    v.write("/tmp/f", "abcdef").unwrap();
    assert_eq!(&v.read_at("/tmp/f", 2, 3).unwrap()[..], b"cde");
    assert_eq!(&v.read_at("/tmp/f", 4, 100).unwrap()[..], b"ef");
    assert!(v.read_at("/tmp/f", 100, 5).unwrap().is_empty());
    assert_eq!(v.write_at("/tmp/f", 1, b"XY").unwrap(), 2);
    assert_eq!(&v.read("/tmp/f").unwrap()[..], b"aXYdef");
    // A write past the end leaves a hole of zeros.
    v.write_at("/tmp/f", 8, b"!").unwrap();
    assert_eq!(&v.read("/tmp/f").unwrap()[..], b"aXYdef\0\0!");
    v.truncate("/tmp/f", 3).unwrap();
    assert_eq!(&v.read("/tmp/f").unwrap()[..], b"aXY");
    v.truncate("/tmp/f", 5).unwrap();
    assert_eq!(&v.read("/tmp/f").unwrap()[..], b"aXY\0\0");
    assert_eq!(v.usage().bytes_used, 5);
    assert_eq!(errno(v.write_at("/tmp/missing", 0, b"x")), Errno::ENOENT);
    assert_eq!(errno(v.write_at("/tmp", 0, b"x")), Errno::EISDIR);
    assert_eq!(errno(v.write_at("/tmp/f", u64::MAX, b"xy")), Errno::EFBIG);
    assert_eq!(errno(v.write_at("/tmp/f", 1 << 40, b"x")), Errno::EFBIG);
}

#[test]
fn create_plain_and_exclusive() {
    let mut v = fs();
    assert!(v.create("/tmp/f", false).unwrap());
    assert!(!v.create("/tmp/f", false).unwrap());
    assert_eq!(errno(v.create("/tmp/f", true)), Errno::EEXIST);
    assert_eq!(errno(v.create("/tmp", false)), Errno::EISDIR);
    assert_eq!(v.stat("/tmp/f").unwrap().size, 0);
}

#[test]
fn mkdir_rules() {
    let mut v = fs();
    v.mkdir("/tmp/d").unwrap();
    assert_eq!(errno(v.mkdir("/tmp/d")), Errno::EEXIST);
    assert_eq!(errno(v.mkdir("/tmp/x/y")), Errno::ENOENT);
    v.write("/tmp/file", "").unwrap();
    assert_eq!(errno(v.mkdir("/tmp/file/sub")), Errno::ENOTDIR);
    assert_eq!(errno(v.mkdir("/tmp/file")), Errno::EEXIST);
    v.mkdir("/tmp/trailing/").unwrap();
    assert!(v.stat("/tmp/trailing").unwrap().is_dir());
}

#[test]
fn mkdir_p_creates_parents_and_counts_each() {
    let mut v = Vfs::with_standard_layout(VfsOptions {
        max_file_count: Some(3),
        ..Default::default()
    });
    v.mkdir_p("/tmp/a/b/c").unwrap();
    assert_eq!(v.usage().files_used, 3);
    v.mkdir_p("/tmp/a/b/c").unwrap(); // already there: nothing created
    assert_eq!(v.usage().files_used, 3);
    // Two more directories needed, no slot left: refused, and nothing is left behind.
    assert_eq!(errno(v.mkdir_p("/tmp/x/y")), Errno::ENOSPC);
    assert!(!v.exists("/tmp/x"));
    assert_eq!(v.usage().files_used, 3);
    v.write("/tmp/f", "").unwrap_err();
}

#[test]
fn mkdir_p_refusal_leaves_the_tree_as_it_was() {
    let mut v = Vfs::with_standard_layout(VfsOptions {
        max_file_count: Some(2),
        ..Default::default()
    });
    let err = v.mkdir_p("/tmp/a/b/c").unwrap_err();
    assert_eq!(err.errno, Errno::ENOSPC);
    assert!(!v.exists("/tmp/a"));
    assert_eq!(v.usage().files_used, 0);
    v.write("/tmp/file", "x").unwrap();
    assert_eq!(errno(v.mkdir_p("/tmp/file/sub")), Errno::ENOTDIR);
    assert_eq!(errno(v.mkdir_p("/tmp/file")), Errno::EEXIST);
}

#[test]
fn readdir_is_sorted_and_typed() {
    let mut v = fs();
    for name in ["b", "a", "C", "_z"] {
        v.write(&format!("/tmp/{name}"), "").unwrap();
    }
    v.mkdir("/tmp/dir").unwrap();
    v.symlink("a", "/tmp/link").unwrap();
    let entries = v.readdir("/tmp").unwrap();
    let names: Vec<_> = entries.iter().map(|e| e.name.as_str()).collect();
    assert_eq!(names, ["C", "_z", "a", "b", "dir", "link"]);
    assert_eq!(entries[4].file_type, FileType::Dir);
    assert_eq!(entries[5].file_type, FileType::Symlink);
    assert_eq!(errno(v.readdir("/tmp/a")), Errno::ENOTDIR);
    assert_eq!(errno(v.readdir("/nope")), Errno::ENOENT);
}

#[test]
fn stat_and_lstat() {
    let mut v = fs();
    v.write("/tmp/f", "12345").unwrap();
    v.symlink("/tmp/f", "/tmp/l").unwrap();
    let s = v.stat("/tmp/l").unwrap();
    assert_eq!(
        (s.file_type, s.size, s.mode, s.nlink),
        (FileType::File, 5, 0o644, 1)
    );
    assert_eq!(s.st_mode(), 0o100644);
    let l = v.lstat("/tmp/l").unwrap();
    assert_eq!((l.file_type, l.size, l.mode), (FileType::Symlink, 6, 0o777));
    assert_ne!(s.ino, l.ino);
    let d = v.stat("/tmp").unwrap();
    assert_eq!(d.mode, 0o1777);
    v.mkdir("/tmp/d1").unwrap();
    v.mkdir("/tmp/d2").unwrap();
    assert_eq!(v.stat("/tmp").unwrap().nlink, 4);
    assert_eq!(errno(v.stat("/tmp/f/")), Errno::ENOTDIR);
}

#[test]
fn unlink_and_rmdir_rules() {
    let mut v = fs();
    v.mkdir("/tmp/d").unwrap();
    v.write("/tmp/d/f", "x").unwrap();
    assert_eq!(errno(v.unlink("/tmp/d")), Errno::EISDIR);
    assert_eq!(errno(v.rmdir("/tmp/d")), Errno::ENOTEMPTY);
    assert_eq!(errno(v.rmdir("/tmp/d/f")), Errno::ENOTDIR);
    assert_eq!(errno(v.rmdir("/tmp/d/.")), Errno::EINVAL);
    assert_eq!(errno(v.unlink("/tmp/d/none")), Errno::ENOENT);
    v.unlink("/tmp/d/f").unwrap();
    v.rmdir("/tmp/d").unwrap();
    assert!(!v.exists("/tmp/d"));
    assert_eq!(v.usage().files_used, 0);
    assert_eq!(v.usage().bytes_used, 0);
}

#[test]
fn unlink_removes_the_link_not_the_target() {
    let mut v = fs();
    v.write("/tmp/f", "x").unwrap();
    v.symlink("/tmp/f", "/tmp/l").unwrap();
    v.unlink("/tmp/l").unwrap();
    assert!(v.exists("/tmp/f"));
    v.mkdir("/tmp/d").unwrap();
    v.symlink("/tmp/d", "/tmp/ld").unwrap();
    assert_eq!(errno(v.rmdir("/tmp/ld")), Errno::ENOTDIR);
    v.unlink("/tmp/ld").unwrap();
}

#[test]
fn remove_recursive_gives_back_every_slot_and_byte() {
    let mut v = fs();
    v.mkdir_p("/tmp/a/b/c").unwrap();
    v.write("/tmp/a/b/c/f", vec![1; 100]).unwrap();
    v.write("/tmp/a/g", vec![1; 10]).unwrap();
    v.symlink("/", "/tmp/a/root").unwrap();
    assert_eq!(v.usage().files_used, 6);
    assert_eq!(v.usage().bytes_used, 110);
    v.remove_recursive("/tmp/a").unwrap();
    assert_eq!(v.usage().files_used, 0);
    assert_eq!(v.usage().bytes_used, 0);
    assert_eq!(errno(v.remove_recursive("/tmp/a")), Errno::ENOENT);
    assert_eq!(errno(v.remove_recursive("/")), Errno::EINVAL);
    assert_eq!(errno(v.remove_recursive("/tmp/..")), Errno::EINVAL);
    assert!(v.exists("/tmp"));
}

#[test]
fn rename_files_and_directories() {
    let mut v = fs();
    v.write("/tmp/a", "A").unwrap();
    v.write("/tmp/b", "B").unwrap();
    v.rename("/tmp/a", "/tmp/b").unwrap(); // replaces
    assert_eq!(&v.read("/tmp/b").unwrap()[..], b"A");
    assert!(!v.exists("/tmp/a"));
    assert_eq!(v.usage().files_used, 1);
    assert_eq!(v.usage().bytes_used, 1);

    v.mkdir_p("/tmp/d/sub").unwrap();
    v.write("/tmp/d/sub/f", "deep").unwrap();
    v.mkdir("/home/user/empty").unwrap();
    v.rename("/tmp/d", "/home/user/empty").unwrap(); // a dir may replace an empty dir
    assert_eq!(&v.read("/home/user/empty/sub/f").unwrap()[..], b"deep");
    assert!(!v.exists("/tmp/d"));

    v.mkdir("/tmp/full").unwrap();
    v.write("/tmp/full/x", "").unwrap();
    v.mkdir("/tmp/src").unwrap();
    assert_eq!(errno(v.rename("/tmp/src", "/tmp/full")), Errno::ENOTEMPTY);
    assert_eq!(errno(v.rename("/tmp/src", "/tmp/b")), Errno::ENOTDIR);
    assert_eq!(errno(v.rename("/tmp/b", "/tmp/src")), Errno::EISDIR);
    assert_eq!(errno(v.rename("/tmp/src", "/tmp/src/inner")), Errno::EINVAL);
    assert_eq!(errno(v.rename("/tmp/none", "/tmp/x")), Errno::ENOENT);
    assert_eq!(errno(v.rename("/tmp/b", "/tmp/none/x")), Errno::ENOENT);
    v.rename("/tmp/b", "/tmp/b").unwrap(); // same name: nothing happens
    assert!(v.exists("/tmp/b"));
}

#[test]
fn rename_moves_a_symlink_itself() {
    let mut v = fs();
    v.write("/tmp/f", "x").unwrap();
    v.symlink("f", "/tmp/l").unwrap();
    v.rename("/tmp/l", "/tmp/l2").unwrap();
    assert_eq!(v.readlink("/tmp/l2").unwrap(), "f");
    assert_eq!(&v.read("/tmp/l2").unwrap()[..], b"x");
}

#[test]
fn symlinks_resolve_inside_the_tree() {
    let mut v = fs();
    v.mkdir_p("/home/user/proj/src").unwrap();
    v.write("/home/user/proj/src/main.rs", "fn main(){}")
        .unwrap();
    v.symlink("proj/src", "/home/user/s").unwrap();
    assert_eq!(&v.read("/home/user/s/main.rs").unwrap()[..], b"fn main(){}");
    // `..` after a symlink is taken from the target's parent, as the kernel does.
    v.write("/home/user/proj/top", "t").unwrap();
    assert_eq!(&v.read("/home/user/s/../top").unwrap()[..], b"t");
    assert_eq!(
        v.realpath("/home/user/s/../top").unwrap(),
        "/home/user/proj/top"
    );
    // Absolute targets are taken from the sandbox's root, never the host's.
    v.symlink("/etc", "/tmp/etc").unwrap();
    assert_eq!(v.realpath("/tmp/etc").unwrap(), "/etc");
    v.symlink("../../../../../../..", "/tmp/up").unwrap();
    assert_eq!(v.realpath("/tmp/up").unwrap(), "/");
    // Writing through a dangling symlink creates its target.
    v.symlink("/tmp/target", "/tmp/dangling").unwrap();
    assert!(!v.exists("/tmp/dangling"));
    v.write("/tmp/dangling", "made").unwrap();
    assert_eq!(&v.read("/tmp/target").unwrap()[..], b"made");
    assert_eq!(errno(v.symlink("x", "/tmp/dangling")), Errno::EEXIST);
    assert_eq!(errno(v.symlink("", "/tmp/empty")), Errno::ENOENT);
    assert_eq!(errno(v.readlink("/tmp/target")), Errno::EINVAL);
}

#[test]
fn symlink_loops_end_with_eloop() {
    let mut v = fs();
    v.symlink("/tmp/b", "/tmp/a").unwrap();
    v.symlink("/tmp/a", "/tmp/b").unwrap();
    assert_eq!(errno(v.read("/tmp/a")), Errno::ELOOP);
    assert_eq!(errno(v.stat("/tmp/a/x")), Errno::ELOOP);
    // lstat of the link itself works.
    assert!(v.lstat("/tmp/a").unwrap().is_symlink());
    v.symlink("self", "/tmp/self").unwrap();
    assert_eq!(errno(v.write("/tmp/self", "x")), Errno::ELOOP);
    // A chain of exactly 40 links resolves; 41 do not.
    v.write("/tmp/end", "ok").unwrap();
    let mut prev = "/tmp/end".to_string();
    for i in 0..41 {
        let name = format!("/tmp/c{i}");
        v.symlink(&prev, &name).unwrap();
        prev = name;
    }
    assert_eq!(&v.read("/tmp/c39").unwrap()[..], b"ok");
    assert_eq!(errno(v.read("/tmp/c40")), Errno::ELOOP);
}

// Threat: T-ESCAPE-FS (docs/security.md)
#[test]
fn paths_never_escape_the_root() {
    let mut v = fs();
    v.write("/etc/passwd", "user:x:1000:1000::/home/user:/bin/sh\n")
        .unwrap();
    assert_eq!(
        v.read("/../../../etc/passwd").unwrap(),
        v.read("/etc/passwd").unwrap()
    );
    assert_eq!(v.realpath("/..").unwrap(), "/");
    assert_eq!(v.realpath("tmp/../..").unwrap(), "/");
    let joined = path::join("/home/user", "../../../tmp");
    assert_eq!(v.realpath(&joined).unwrap(), "/tmp");
}

#[test]
fn bad_paths_get_clear_errors() {
    let mut v = fs();
    assert_eq!(errno(v.write("/tmp/a\0b", "x")), Errno::EINVAL);
    assert_eq!(errno(v.read("")), Errno::ENOENT);
    let name = "n".repeat(256);
    let err = v.write(&format!("/tmp/{name}"), "x").unwrap_err();
    assert_eq!(err.errno, Errno::ENAMETOOLONG);
    let deep = "/tmp".to_string() + &"/d".repeat(2100);
    assert_eq!(errno(v.mkdir_p(&deep)), Errno::ENAMETOOLONG);
    assert_eq!(errno(v.write("/", "x")), Errno::EISDIR);
    assert_eq!(errno(v.write("/tmp/newdir/", "x")), Errno::EISDIR);
    assert_eq!(errno(v.rename("/", "/tmp/root")), Errno::EINVAL);
    // The filesystem is unchanged by all of that.
    assert_eq!(v.usage().files_used, 0);
}

#[test]
fn writable_paths_guard_every_kind_of_change() {
    let mut v = Vfs::with_standard_layout(VfsOptions {
        writable_paths: Some(vec!["/tmp".into(), "/home/user".into()]),
        ..Default::default()
    });
    v.write("/tmp/ok", "x").unwrap();
    v.write("/home/user/ok", "x").unwrap();
    let ro = [
        errno(v.write("/etc/f", "x")),
        errno(v.mkdir("/etc/d")),
        errno(v.mkdir_p("/usr/share/x")),
        errno(v.symlink("/tmp/ok", "/etc/l")),
        errno(v.chmod("/etc", 0o777)),
        errno(v.rename("/tmp/ok", "/etc/moved")),
        errno(v.rename("/bin", "/tmp/bin")),
        errno(v.rmdir("/bin")),
        errno(v.remove_recursive("/usr")),
        errno(v.set_times("/etc", None, Some(SystemTime::UNIX_EPOCH))),
    ];
    assert!(ro.iter().all(|e| *e == Errno::EROFS), "{ro:?}");
    // A symlink inside a writable path does not open a way out of it.
    v.symlink("/etc", "/tmp/etc").unwrap();
    assert_eq!(errno(v.write("/tmp/etc/evil", "x")), Errno::EROFS);
    // `..` tricks are resolved before the check.
    assert_eq!(errno(v.write("/tmp/../etc/evil", "x")), Errno::EROFS);
    // The prefix is a path prefix, not a string prefix.
    assert_eq!(errno(v.mkdir("/tmpfoo")), Errno::EROFS);
    assert!(v.exists("/tmp/ok"));
}

#[test]
fn permission_bits_are_enforced_for_the_owner() {
    let mut v = fs();
    v.write("/tmp/f", "secret").unwrap();
    v.chmod("/tmp/f", 0o200).unwrap();
    assert_eq!(errno(v.read("/tmp/f")), Errno::EACCES);
    v.chmod("/tmp/f", 0o444).unwrap();
    assert_eq!(errno(v.write("/tmp/f", "x")), Errno::EACCES);
    assert_eq!(errno(v.append("/tmp/f", "x")), Errno::EACCES);
    v.mkdir("/tmp/d").unwrap();
    v.chmod("/tmp/d", 0o555).unwrap();
    assert_eq!(errno(v.write("/tmp/d/new", "x")), Errno::EACCES);
    v.chmod("/tmp/d", 0o600).unwrap();
    assert_eq!(errno(v.stat("/tmp/d/anything")), Errno::EACCES);
    v.chmod("/tmp/d", 0o755).unwrap();
    v.write("/tmp/d/new", "x").unwrap();
}

#[test]
fn set_times_and_mtime_updates() {
    let mut v = fs();
    v.write("/tmp/f", "x").unwrap();
    let t = SystemTime::UNIX_EPOCH + Duration::from_secs(1_000_000);
    v.set_times("/tmp/f", Some(t), Some(t)).unwrap();
    let s = v.stat("/tmp/f").unwrap();
    assert_eq!((s.atime, s.mtime), (t, t));
    v.write("/tmp/f", "y").unwrap();
    assert!(v.stat("/tmp/f").unwrap().mtime > t);
    v.set_times("/tmp", None, Some(t)).unwrap();
    v.write("/tmp/g", "").unwrap();
    assert!(
        v.stat("/tmp").unwrap().mtime > t,
        "creating an entry touches the dir"
    );
}

#[test]
fn devices_behave_as_on_linux() {
    let mut v = fs();
    assert!(v.read("/dev/null").unwrap().is_empty());
    v.write("/dev/null", "discarded").unwrap();
    v.append("/dev/null", "discarded").unwrap();
    assert_eq!(v.write_at("/dev/null", 0, b"xyz").unwrap(), 3);
    assert_eq!(&v.read_at("/dev/zero", 0, 4).unwrap()[..], &[0, 0, 0, 0]);
    let a = v.read_at("/dev/urandom", 0, 32).unwrap();
    let b = v.read_at("/dev/urandom", 0, 32).unwrap();
    assert_eq!(a.len(), 32);
    assert_ne!(a, b);
    assert_eq!(errno(v.read("/dev/zero")), Errno::EINVAL);
    assert_eq!(v.stat("/dev/null").unwrap().file_type, FileType::CharDevice);
    assert_eq!(v.stat("/dev/zero").unwrap().device, Some(Device::Zero));
    assert_eq!(v.usage().bytes_used, 0);
}

#[test]
fn shared_files_are_not_copied_until_written() {
    let payload = Bytes::from(vec![7u8; 1 << 20]);
    let mut v = fs();
    v.layout(|v| v.write_shared("/usr/bin/tool", payload.clone(), 0o755))
        .unwrap();
    let read = v.read("/usr/bin/tool").unwrap();
    assert_eq!(read.as_ptr(), payload.as_ptr(), "same bytes, no copy");
    let fork = v.cow_clone();
    assert_eq!(
        fork.read("/usr/bin/tool").unwrap().as_ptr(),
        payload.as_ptr()
    );
    assert!(v.stat("/usr/bin/tool").unwrap().shared);
    assert_eq!(v.usage().bytes_used, 0, "host bytes do not count");
    // Writing makes a private copy, which then counts.
    v.write_at("/usr/bin/tool", 0, b"X").unwrap();
    assert_eq!(v.usage().bytes_used, 1 << 20);
    assert_eq!(fork.read("/usr/bin/tool").unwrap()[0], 7);
    assert!(!v.stat("/usr/bin/tool").unwrap().shared);
}

#[test]
fn byte_limit_refuses_growth_and_keeps_the_old_content() {
    let mut v = Vfs::with_standard_layout(VfsOptions {
        fs_limit_bytes: Some(10),
        ..Default::default()
    });
    v.write("/tmp/f", "12345678").unwrap();
    assert_eq!(errno(v.write("/tmp/f", "12345678901")), Errno::ENOSPC);
    assert_eq!(&v.read("/tmp/f").unwrap()[..], b"12345678");
    assert_eq!(errno(v.append("/tmp/f", "abc")), Errno::ENOSPC);
    assert_eq!(errno(v.truncate("/tmp/f", 11)), Errno::ENOSPC);
    assert_eq!(errno(v.write_at("/tmp/f", 9, b"xy")), Errno::ENOSPC);
    assert_eq!(&v.read("/tmp/f").unwrap()[..], b"12345678");
    v.append("/tmp/f", "ab").unwrap();
    v.write("/tmp/f", "small").unwrap(); // shrinking always works
    v.write("/tmp/g", "12345").unwrap();
    assert_eq!(v.usage().bytes_used, 10);
    let msg = v.write("/tmp/h", "x").unwrap_err().to_string();
    assert!(msg.starts_with("ENOSPC: "), "{msg}");
}

#[test]
fn many_small_appends_cost_linear_time() {
    // 64 MiB in 4 KiB appends: quadratic copying would move ~512 GiB and never finish here.
    let mut v = fs();
    let chunk = [b'a'; 4096];
    v.create("/tmp/big", false).unwrap();
    for _ in 0..(64 << 20) / 4096 {
        v.append("/tmp/big", chunk).unwrap();
    }
    assert_eq!(v.stat("/tmp/big").unwrap().size, 64 << 20);
    assert_eq!(v.usage().bytes_used, 64 << 20);
}

#[test]
fn umask_applies_to_new_files_and_directories() {
    let mut v = Vfs::new(VfsOptions::default());
    assert_eq!(v.umask(), 0o022);
    v.write("/a", "x").unwrap();
    v.mkdir("/d").unwrap();
    assert_eq!(v.stat("/a").unwrap().mode, 0o644);
    assert_eq!(v.stat("/d").unwrap().mode, 0o755);
    v.set_umask(0o027);
    v.create("/b", false).unwrap();
    v.mkdir_p("/e/f").unwrap();
    assert_eq!(v.stat("/b").unwrap().mode, 0o640);
    assert_eq!(v.stat("/e/f").unwrap().mode, 0o750);
    // Existing files keep their modes; a clone keeps the umask.
    assert_eq!(v.stat("/a").unwrap().mode, 0o644);
    assert_eq!(v.cow_clone().umask(), 0o027);
}

/// A directory's link count is kept from one `stat` to the next (counting walks its entries);
/// every change of its entries, a snapshot restored or a fork's own changes must still show.
#[test]
fn directory_link_counts_follow_every_change() {
    let mut v = fs();
    let links = |v: &Vfs, p: &str| v.stat(p).unwrap().nlink;
    v.mkdir("/tmp/d").unwrap();
    assert_eq!(links(&v, "/tmp/d"), 2);
    v.mkdir("/tmp/d/a").unwrap();
    assert_eq!(links(&v, "/tmp/d"), 3);
    v.write("/tmp/d/f", b"x").unwrap();
    assert_eq!(
        links(&v, "/tmp/d"),
        3,
        "a file is not a link to the directory"
    );
    let before = v.snapshot();
    v.mkdir("/tmp/d/b").unwrap();
    assert_eq!(links(&v, "/tmp/d"), 4);
    v.rename("/tmp/d/b", "/tmp/b").unwrap();
    assert_eq!(links(&v, "/tmp/d"), 3);
    v.rename("/tmp/b", "/tmp/d/c").unwrap();
    assert_eq!(links(&v, "/tmp/d"), 4);
    // A fork shares the counted node; each side's changes are its own.
    let mut fork = v.clone();
    fork.rmdir("/tmp/d/a").unwrap();
    assert_eq!(links(&fork, "/tmp/d"), 3);
    assert_eq!(links(&v, "/tmp/d"), 4);
    v.restore(before).unwrap();
    assert_eq!(links(&v, "/tmp/d"), 3);
    // A file overwritten by a directory's name and the other way round.
    v.unlink("/tmp/d/f").unwrap();
    v.mkdir("/tmp/d/f").unwrap();
    assert_eq!(links(&v, "/tmp/d"), 4);
    v.rmdir("/tmp/d/f").unwrap();
    v.write("/tmp/d/f", b"y").unwrap();
    assert_eq!(links(&v, "/tmp/d"), 3);
}
