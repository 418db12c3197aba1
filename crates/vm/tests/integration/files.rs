//! Files in and out, binary safe, and what a reset does to them.

use wasmsand_vm::VmError;

use crate::common::{machine, ok};

#[test]
fn binary_files_round_trip_whatever_their_size() {
    let Some(m) = machine() else { return };
    let every_byte: Vec<u8> = (0..=255u8).collect();
    m.write_file("/tmp/bytes", &every_byte, 0o644).unwrap();
    assert_eq!(m.read_file("/tmp/bytes", 1 << 20).unwrap(), every_byte);
    assert_eq!(ok(&m, "wc -c </tmp/bytes"), "256\n");

    // Over the 1 MiB chunk, and not a multiple of it.
    let big: Vec<u8> = (0..(3 << 20) + 12345u32)
        .map(|i| (i.wrapping_mul(2_654_435_761) >> 13) as u8)
        .collect();
    m.write_file("/data/deep/dir/big.bin", &big, 0o600).unwrap();
    assert_eq!(
        m.read_file("/data/deep/dir/big.bin", 16 << 20).unwrap(),
        big
    );
    assert_eq!(
        ok(&m, "stat -c '%a %s' /data/deep/dir/big.bin"),
        format!("600 {}\n", big.len())
    );
    // A file the guest makes reads back as the guest wrote it.
    ok(&m, "printf 'a\\0b\\377\\n' >/tmp/made");
    assert_eq!(m.read_file("/tmp/made", 100).unwrap(), b"a\0b\xff\n");

    // Empty files, modes, and overwriting.
    m.write_file("/tmp/empty", b"", 0o755).unwrap();
    assert_eq!(ok(&m, "stat -c '%a %s' /tmp/empty"), "755 0\n");
    m.write_file("/tmp/empty", b"now some", 0o640).unwrap();
    assert_eq!(m.read_file("/tmp/empty", 100).unwrap(), b"now some");
    assert_eq!(ok(&m, "stat -c %a /tmp/empty"), "640\n");
}

#[test]
fn file_errors_are_the_guests() {
    let Some(m) = machine() else { return };
    match m.read_file("/no/such/file", 100) {
        Err(VmError::Guest { errno, .. }) => assert_eq!(errno.as_deref(), Some("ENOENT")),
        other => panic!("{other:?}"),
    }
    match m.read_file("/etc", 100) {
        Err(VmError::Guest { errno, .. }) => assert_eq!(errno.as_deref(), Some("EISDIR")),
        other => panic!("{other:?}"),
    }
    match m.read_file("/etc/passwd", 10) {
        Err(VmError::Guest { errno, .. }) => assert_eq!(errno.as_deref(), Some("EFBIG")),
        other => panic!("{other:?}"),
    }
    match m.write_file("/etc/passwd/under-a-file", b"x", 0o644) {
        Err(VmError::Guest { errno, .. }) => {
            assert!(
                matches!(errno.as_deref(), Some("ENOTDIR") | Some("EEXIST")),
                "{errno:?}"
            )
        }
        other => panic!("{other:?}"),
    }
    // The machine is as usable as before.
    assert_eq!(ok(&m, "echo fine"), "fine\n");
}

#[test]
fn reset_returns_to_the_pristine_image() {
    let Some(m) = machine() else { return };
    m.write_file("/root/notes.txt", b"mine", 0o644).unwrap();
    ok(
        &m,
        "rm -f /usr/bin/tac && echo changed >/etc/motd && useradd -m someone 2>/dev/null; true",
    );
    assert_eq!(ok(&m, "cat /root/notes.txt"), "mine");
    m.reset().unwrap();
    assert!(matches!(
        m.read_file("/root/notes.txt", 100),
        Err(VmError::Guest { .. })
    ));
    assert_eq!(ok(&m, "command -v tac"), "/usr/bin/tac\n");
    assert_ne!(ok(&m, "cat /etc/motd 2>/dev/null || true"), "changed\n");
    assert_eq!(m.status().resets, 1);
    // And the disk is writable again after the reset.
    m.write_file("/root/again", b"x", 0o644).unwrap();
    assert_eq!(ok(&m, "cat /root/again"), "x");
}

#[test]
fn single_file_operations_answer_as_system_calls_do() {
    let Some(m) = machine() else { return };
    assert!(m.mkdir("/work/a/b").unwrap());
    assert!(!m.mkdir("/work/a/b").unwrap(), "made once");
    assert_eq!(
        m.put_file("/work/a/f.txt", b"hello", 0o644, false).unwrap(),
        5
    );
    assert_eq!(
        m.put_file("/work/a/f.txt", b" you", 0o644, true).unwrap(),
        9
    );
    ok(&m, "ln -s f.txt /work/a/link");
    let e = m.stat("/work/a/f.txt").unwrap();
    assert_eq!((e.name.as_str(), e.kind, e.size), ("f.txt", "file", 9));
    assert_eq!(m.stat("/work/a/link").unwrap().kind, "symlink");
    assert_eq!(m.stat("/work/a/b").unwrap().kind, "dir");
    assert_eq!(m.stat("/").unwrap().name, "/");
    let names: Vec<(String, &str)> = m
        .list("/work/a")
        .unwrap()
        .into_iter()
        .map(|e| (e.name, e.kind))
        .collect();
    assert_eq!(
        names,
        [
            ("b".to_string(), "dir"),
            ("f.txt".to_string(), "file"),
            ("link".to_string(), "symlink")
        ]
    );
    // Ranges: cut at the end, the whole size always given.
    assert_eq!(
        m.read_range("/work/a/f.txt", 6, 100).unwrap(),
        (b"you".to_vec(), 9)
    );
    assert_eq!(
        m.read_range("/work/a/f.txt", 0, 2).unwrap(),
        (b"he".to_vec(), 9)
    );
    // The walk finds files and symlinks, relative to its root, links not followed.
    ok(&m, "ln -s /etc /work/a/b/etc && echo x > /work/a/b/deep");
    let (mut found, cut) = m.walk("/work", 1000).unwrap();
    found.sort_by(|a, b| a.path.cmp(&b.path));
    let paths: Vec<(&str, bool)> = found.iter().map(|e| (e.path.as_str(), e.symlink)).collect();
    assert_eq!(
        paths,
        [
            ("a/b/deep", false),
            ("a/b/etc", true),
            ("a/f.txt", false),
            ("a/link", true)
        ]
    );
    assert!(!cut);
    assert!(
        m.walk("/work", 2).unwrap().1,
        "a walk past its bound says so"
    );

    let errno = |r: Result<(), VmError>| match r {
        Err(VmError::Guest { errno, .. }) => errno.unwrap_or_default(),
        other => panic!("{other:?}"),
    };
    assert_eq!(errno(m.remove("/work/a", false)), "ENOTEMPTY");
    assert_eq!(errno(m.remove("/work/nothing", false)), "ENOENT");
    assert_eq!(errno(m.stat("/work/nothing").map(|_| ())), "ENOENT");
    assert_eq!(errno(m.list("/work/a/f.txt").map(|_| ())), "ENOTDIR");
    assert_eq!(errno(m.read_range("/work/a", 0, 1).map(|_| ())), "EISDIR");
    m.rename("/work/a/f.txt", "/work/g.txt").unwrap();
    assert_eq!(ok(&m, "cat /work/g.txt"), "hello you");
    assert_eq!(errno(m.rename("/work/g.txt", "/work/a/b")), "EISDIR");
    // A recursive removal takes the tree and never follows its links.
    m.remove("/work/a", true).unwrap();
    assert_eq!(
        ok(&m, "ls /work; test -f /etc/passwd && echo kept"),
        "g.txt\nkept\n"
    );
}
