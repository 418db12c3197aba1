//! Images a machine cannot start from: each is a clear error, at once or after the failed
//! boot, never a hang.

use std::path::Path;

use wasmsand_vm::{ImageError, Machine, VmError};

use crate::common::{config, image};
use crate::host_tools::host_tool;

fn start(path: &Path) -> VmError {
    Machine::start(config(path.to_path_buf())).expect_err("the machine must not start")
}

#[test]
fn missing_garbage_truncated_and_qcow2_images_are_refused() {
    let Some(real) = image() else { return };
    let dir = tempfile::tempdir().unwrap();

    let e = start(&dir.path().join("missing.img"));
    assert!(
        matches!(e, VmError::Image(ImageError::Unreadable { .. })),
        "{e}"
    );

    let garbage = dir.path().join("garbage.img");
    std::fs::write(&garbage, vec![0xa5u8; 8 << 20]).unwrap();
    let e = start(&garbage);
    assert!(
        matches!(e, VmError::Image(ImageError::NotAnImage { .. })),
        "{e}"
    );

    let truncated = dir.path().join("truncated.img");
    let head: Vec<u8> = {
        use std::io::Read;
        let mut buf = vec![0u8; 16 << 20];
        let mut f = std::fs::File::open(&real).unwrap();
        f.read_exact(&mut buf).unwrap();
        buf
    };
    std::fs::write(&truncated, head).unwrap();
    let e = start(&truncated);
    assert!(
        matches!(e, VmError::Image(ImageError::Truncated { .. })),
        "{e}"
    );
    assert!(e.to_string().contains("truncated"), "{e}");

    let qcow = dir.path().join("disk.qcow2");
    std::fs::write(&qcow, b"QFI\xfb\0\0\0\x03rest").unwrap();
    assert!(start(&qcow).to_string().contains("qcow2"));

    let mut cfg = config(real);
    cfg.memory_mb = 64;
    let e = Machine::start(cfg).unwrap_err();
    assert!(matches!(e, VmError::Config(_)), "{e}");
}

#[test]
fn an_image_without_the_agent_fails_to_boot_with_the_console_s_reason() {
    let Some(real) = image() else { return };
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("root");
    std::fs::create_dir_all(root.join("boot/wasmsand")).unwrap();
    // An ext4 image without a kernel is refused before any boot.
    let empty = dir.path().join("empty.img");
    mke2fs(&root, &empty);
    let e = start(&empty);
    assert!(e.to_string().contains("/boot/wasmsand/vmlinuz"), "{e}");

    // The real kernel and initramfs, but no root file system to hand over to.
    for f in ["vmlinuz", "initrd.img"] {
        let out = root.join("boot/wasmsand").join(f);
        let status = host_tool("debugfs")
            .arg("-R")
            .arg(format!("dump /boot/wasmsand/{f} {}", out.display()))
            .arg(&real)
            .output()
            .unwrap();
        assert!(status.status.success());
        assert!(out.metadata().unwrap().len() > 0);
    }
    let broken = dir.path().join("broken.img");
    mke2fs(&root, &broken);
    let e = start(&broken);
    assert!(matches!(e, VmError::Start(_)), "{e}");
    assert!(
        e.to_string()
            .contains("the image has no /usr/lib/wasmsand/init"),
        "{e}"
    );
}

fn mke2fs(root: &Path, out: &Path) {
    let status = host_tool("mke2fs")
        .args(["-q", "-F", "-t", "ext4", "-d"])
        .arg(root)
        .arg(out)
        .arg("64M")
        .status()
        .expect("mke2fs (Debian's e2fsprogs) runs");
    assert!(status.success());
}
