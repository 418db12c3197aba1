//! Host folders through `sandboxd`'s command line: `exec --mount` with `--changes` (a patch
//! real `git apply` takes) and `--export-changes`, the stdio server's `--mount`, and the
//! errors of a bad mount.

use std::fs;
use std::process::{Command, Stdio};

use serde_json::json;

use super::common::{Daemon, sandboxd, text};

fn project() -> tempfile::TempDir {
    let t = tempfile::tempdir().unwrap();
    fs::write(t.path().join("main.py"), "print('hello')\n").unwrap();
    fs::write(t.path().join(".env"), "KEY=secret\n").unwrap();
    fs::write(t.path().join(".gitignore"), "build/\n").unwrap();
    fs::create_dir(t.path().join("build")).unwrap();
    fs::write(t.path().join("build/out"), "artifact\n").unwrap();
    t
}

#[test]
fn exec_mounts_a_folder_and_writes_its_changes_as_a_patch() {
    let host = project();
    let patch = host.path().parent().unwrap().join(format!(
        "{}.patch",
        host.path().file_name().unwrap().to_string_lossy()
    ));
    let spec = format!("{}:repo", host.path().display());
    let out = sandboxd(&[
        "exec",
        "--mount",
        &spec,
        "--mount-gitignore",
        "--changes",
        patch.to_str().unwrap(),
        "cd repo && ls -A && cat .env; sed -i s/hello/bye/ main.py && python3 main.py && echo new > added.txt",
    ]);
    let stderr = text(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{stderr}");
    assert_eq!(text(&out.stdout), ".gitignore\nmain.py\nbye\n");
    assert!(stderr.contains(".env: No such file"), "{stderr}");
    let p = fs::read_to_string(&patch).unwrap();
    fs::remove_file(&patch).unwrap();
    assert!(p.contains("-print('hello')\n+print('bye')\n"), "{p}");
    assert!(
        p.contains("new file mode 100644") && p.contains("+++ b/added.txt"),
        "{p}"
    );
    // The host is untouched; the patch brings the changes to it.
    assert_eq!(
        fs::read_to_string(host.path().join("main.py")).unwrap(),
        "print('hello')\n"
    );
    let copy = tempfile::tempdir().unwrap();
    assert!(
        Command::new("cp")
            .arg("-a")
            .arg(format!("{}/.", host.path().display()))
            .arg(copy.path())
            .status()
            .unwrap()
            .success()
    );
    let applied = Command::new("git")
        .args(["apply", "-"])
        .current_dir(copy.path())
        .stdin(Stdio::piped())
        .spawn()
        .and_then(|mut c| {
            use std::io::Write;
            c.stdin.take().unwrap().write_all(p.as_bytes())?;
            c.wait()
        })
        .unwrap();
    assert!(applied.success());
    assert_eq!(
        fs::read_to_string(copy.path().join("main.py")).unwrap(),
        "print('bye')\n"
    );
    assert_eq!(
        fs::read_to_string(copy.path().join("added.txt")).unwrap(),
        "new\n"
    );
}

#[test]
fn exec_export_changes_writes_only_where_named() {
    let host = project();
    let spec = format!("{}:/home/user/p", host.path().display());
    let dest = tempfile::tempdir().unwrap();
    let out = sandboxd(&[
        "exec",
        "--mount",
        &spec,
        "--export-changes",
        dest.path().to_str().unwrap(),
        "echo x > p/made && rm p/main.py",
    ]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    assert_eq!(fs::read_to_string(dest.path().join("made")).unwrap(), "x\n");
    assert!(host.path().join("main.py").exists());
    assert!(!host.path().join("made").exists());
}

#[test]
fn a_bad_mount_stops_sandboxd_with_a_clear_message() {
    let host = project();
    for (args, want) in [
        (
            vec!["--mount", "/no/such/folder:x", "exec", "true"],
            "not a directory",
        ),
        (vec!["--mount", ":x", "exec", "true"], "HOST:SANDBOX"),
        (
            vec![
                "--mount",
                host.path().to_str().unwrap(),
                "--mount-allow-secret",
                "*.key",
                "exec",
                "true",
            ],
            "unknown secret pattern",
        ),
        (
            vec!["--mount", host.path().to_str().unwrap(), "serve"],
            "exec, the stdio server and mcp only",
        ),
    ] {
        let out = sandboxd(&args);
        assert_eq!(out.status.code(), Some(2), "{args:?}");
        assert!(
            text(&out.stderr).contains(want),
            "{args:?}: {}",
            text(&out.stderr)
        );
    }
    let out = sandboxd(&["exec", "--changes", "-", "true"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(
        text(&out.stderr).contains("no host folder is mounted"),
        "{}",
        text(&out.stderr)
    );
}

#[test]
fn the_stdio_server_mounts_its_folders_in_the_root_sandbox() {
    let host = project();
    let spec = format!("{}:work:ro", host.path().display());
    let mut d = Daemon::start(&["--mount", &spec]);
    let r = d.call(
        "run",
        json!({"command": "cat work/main.py; echo no > work/main.py"}),
    );
    assert_eq!(r["stdout"], "print('hello')\n");
    assert_ne!(r["exitCode"], 0);
    let m = d.call("sandbox.mounts", json!({}));
    assert_eq!(m["mounts"][0]["path"], "/home/user/work");
    assert_eq!(m["mounts"][0]["readOnly"], true);
    let diff = d.call("sandbox.diff", json!({}));
    assert_eq!(diff["files"], json!([]));
    // A reset keeps the folder.
    d.send(&json!({"type": "reset"}));
    let _ = d.next_raw();
    let r = d.call("run", json!({"command": "ls work"}));
    assert_eq!(r["stdout"], "build\nmain.py\n", "{r}");
}
