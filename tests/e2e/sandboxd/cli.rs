//! The command line of `sandboxd`: help, version, modes, limit flags and the one-shot `exec`.

use std::io::Write;
use std::process::{Command, Stdio};

use super::common::{sandboxd, text};

#[test]
fn help_lists_every_flag() {
    let out = sandboxd(&["--help"]);
    assert!(out.status.success());
    let help = text(&out.stdout);
    for flag in [
        "--memory-limit <MB>",
        "--timeout-ms",
        "--fs-limit-bytes",
        "--file-count",
        "--cache-dir",
        "--mode",
        "--disk-image",
        "--rpc-bytes",
        "--version",
        "exec",
    ] {
        assert!(help.contains(flag), "--help lacks {flag}:\n{help}");
    }
}

#[test]
fn version_prints_the_crate_version() {
    let out = sandboxd(&["--version"]);
    assert!(out.status.success());
    assert_eq!(
        text(&out.stdout).trim(),
        format!("sandboxd {}", env!("CARGO_PKG_VERSION"))
    );
}

#[test]
fn v86_mode_refuses_what_it_cannot_boot_with_exit_2() {
    let dir = tempfile::tempdir().unwrap();
    let garbage = dir.path().join("garbage.img");
    std::fs::write(&garbage, vec![0x42u8; 1 << 20]).unwrap();
    let truncated = dir.path().join("truncated.img");
    // An ext4 superblock promising 64 MiB, in a file of 4 KiB.
    let mut sb = vec![0u8; 4096];
    sb[1024 + 4..1024 + 8].copy_from_slice(&16384u32.to_le_bytes());
    sb[1024 + 24..1024 + 28].copy_from_slice(&2u32.to_le_bytes());
    sb[1024 + 56..1024 + 58].copy_from_slice(&0xEF53u16.to_le_bytes());
    std::fs::write(&truncated, sb).unwrap();
    let garbage = garbage.to_str().unwrap();
    let truncated = truncated.to_str().unwrap();
    for (args, says) in [
        (&["--mode", "v86"][..], "needs --disk-image"),
        (
            &["--mode", "v86", "--disk-image", "/x.img"][..],
            "/x.img: No such file",
        ),
        (
            &["--mode", "vm", "--disk-image", garbage][..],
            "not a disk image",
        ),
        (
            &["--mode", "v86", "--disk-image", truncated][..],
            "truncated disk image",
        ),
        (
            &[
                "--mode",
                "v86",
                "--disk-image",
                garbage,
                "--memory-limit",
                "64",
            ][..],
            "too little memory",
        ),
    ] {
        let out = sandboxd(args);
        assert_eq!(out.status.code(), Some(2), "{args:?}");
        assert!(
            text(&out.stderr).contains(says),
            "{args:?}: {}",
            text(&out.stderr)
        );
        assert!(out.stdout.is_empty());
    }
    let out = sandboxd(&["--disk-image", "/x.img"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(text(&out.stderr).contains("only with --mode v86"));
    let out = sandboxd(&["--mode", "qemu"]);
    assert_eq!(out.status.code(), Some(2));
}

#[test]
fn exec_prints_output_and_exits_with_the_status() {
    let out = sandboxd(&["exec", "echo hi | wc -c"]);
    assert_eq!(out.status.code(), Some(0));
    assert_eq!(text(&out.stdout), "3\n");
    let out = sandboxd(&["exec", "echo out; echo err >&2; exit 3"]);
    assert_eq!(out.status.code(), Some(3));
    assert_eq!(text(&out.stdout), "out\n");
    assert_eq!(text(&out.stderr), "err\n");
}

#[test]
fn limit_flags_apply() {
    let out = sandboxd(&["--timeout-ms", "200", "exec", "sleep 5"]);
    assert_eq!(out.status.code(), Some(124));
    assert!(text(&out.stderr).contains("timed out"));
    let out = sandboxd(&["exec", "--file-count", "1", "touch /tmp/a && touch /tmp/b"]);
    assert_ne!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let out = sandboxd(&[
        "--fs-limit-bytes",
        "1000",
        "exec",
        "head -c 2000 /dev/zero > /tmp/z",
    ]);
    assert_ne!(out.status.code(), Some(0));
    let dir = std::env::temp_dir().join(format!("sandboxd-cache-{}", std::process::id()));
    let out = sandboxd(&[
        "--cache-dir",
        dir.to_str().unwrap(),
        "exec",
        "cat /etc/hostname",
    ]);
    assert_eq!(text(&out.stdout), "sandbox\n");
    let _ = std::fs::remove_dir_all(&dir);
}

// Threat: T-EXHAUST-MEMORY (docs/security.md)
#[test]
fn memory_limit_stops_a_program_not_the_server() {
    // awk building a large string needs far more than 8 MiB of linear memory.
    let out = sandboxd(&[
        "--memory-limit",
        "8",
        "exec",
        "awk 'BEGIN{s=\"x\"; for(i=0;i<26;i++) s=s s; print length(s)}'; echo after",
    ]);
    let stdout = text(&out.stdout);
    assert!(stdout.ends_with("after\n"), "{stdout}");
    assert!(!stdout.contains("67108864"), "{stdout}");
}

#[test]
fn readme_command_runs_a_sandboxed_command_end_to_end() {
    let mut child = Command::new(env!("CARGO_BIN_EXE_e2e-sandboxd"))
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    child
        .stdin
        .take()
        .unwrap()
        .write_all(
            br#"{"jsonrpc":"2.0","id":1,"method":"run","params":{"command":"echo hello from the sandbox | tr a-z A-Z"}}"#,
        )
        .unwrap();
    let out = child.wait_with_output().unwrap();
    assert!(out.status.success());
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["result"]["stdout"], "HELLO FROM THE SANDBOX\n");
}
