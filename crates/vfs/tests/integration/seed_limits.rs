//! The VFS's file-count limit, and the limits a cloned VFS keeps (bytes, file count, writable
//! paths).

use wasmsand_vfs::{Errno, Vfs, VfsOptions};

fn with_limits(options: VfsOptions) -> Vfs {
    Vfs::with_standard_layout(options)
}

fn count(max: u64) -> Vfs {
    with_limits(VfsOptions {
        max_file_count: Some(max),
        ..Default::default()
    })
}

// --- file count limit ---

#[test]
fn rejects_file_creation_when_file_count_limit_reached() {
    let mut vfs = count(3);
    vfs.write("/tmp/a.txt", [0]).unwrap();
    vfs.write("/tmp/b.txt", [0]).unwrap();
    vfs.write("/tmp/c.txt", [0]).unwrap();
    let err = vfs.write("/tmp/d.txt", [0]).unwrap_err();
    assert_eq!(err.errno, Errno::ENOSPC);
    assert!(err.to_string().contains("ENOSPC"));
    assert!(
        err.to_string()
            .contains("file count limit reached (max: 3)")
    );
    assert!(!vfs.exists("/tmp/d.txt"));
}

#[test]
fn rejects_mkdir_when_file_count_limit_reached() {
    let mut vfs = count(1);
    vfs.mkdir("/tmp/sub").unwrap();
    assert_eq!(vfs.mkdir("/tmp/sub2").unwrap_err().errno, Errno::ENOSPC);
    assert!(!vfs.exists("/tmp/sub2"));
}

#[test]
fn allows_creation_after_deletion_frees_a_slot() {
    let mut vfs = count(1);
    vfs.write("/tmp/a.txt", [0]).unwrap();
    assert_eq!(
        vfs.write("/tmp/b.txt", [0]).unwrap_err().errno,
        Errno::ENOSPC
    );
    vfs.unlink("/tmp/a.txt").unwrap();
    vfs.write("/tmp/b.txt", [0]).unwrap();
    assert_eq!(&vfs.read("/tmp/b.txt").unwrap()[..], &[0]);
}

#[test]
fn overwriting_existing_file_does_not_increment_count() {
    let mut vfs = count(1);
    vfs.write("/tmp/a.txt", [0]).unwrap();
    vfs.write("/tmp/a.txt", [0, 0]).unwrap();
    assert_eq!(&vfs.read("/tmp/a.txt").unwrap()[..], &[0, 0]);
    assert_eq!(vfs.usage().files_used, 1);
}

#[test]
fn no_limit_when_max_file_count_is_unset() {
    let mut vfs = with_limits(VfsOptions::default());
    for i in 0..100 {
        vfs.write(&format!("/tmp/f{i}.txt"), [0]).unwrap();
    }
    assert_eq!(vfs.usage().files_used, 100);
}

// --- cowClone option propagation ---

#[test]
fn propagates_fs_limit_bytes_to_cloned_vfs() {
    let mut vfs = with_limits(VfsOptions {
        fs_limit_bytes: Some(1024),
        ..Default::default()
    });
    vfs.write("/tmp/a.txt", vec![0; 800]).unwrap();
    let mut child = vfs.cow_clone();
    let err = child.write("/tmp/b.txt", vec![0; 300]).unwrap_err();
    assert_eq!(err.errno, Errno::ENOSPC);
    assert!(!child.exists("/tmp/b.txt"));
}

#[test]
fn propagates_max_file_count_to_cloned_vfs() {
    let mut vfs = count(2);
    vfs.write("/tmp/a.txt", [0]).unwrap();
    vfs.write("/tmp/b.txt", [0]).unwrap();
    let mut child = vfs.cow_clone();
    assert_eq!(
        child.write("/tmp/c.txt", [0]).unwrap_err().errno,
        Errno::ENOSPC
    );
}

#[test]
fn propagates_writable_paths_to_cloned_vfs() {
    let vfs = with_limits(VfsOptions {
        writable_paths: Some(vec!["/tmp".into()]),
        ..Default::default()
    });
    let mut child = vfs.cow_clone();
    assert_eq!(
        child.write("/home/user/test.txt", [0]).unwrap_err().errno,
        Errno::EROFS
    );
    child.write("/tmp/test.txt", [0]).unwrap();
}
