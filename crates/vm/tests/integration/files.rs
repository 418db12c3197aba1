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
