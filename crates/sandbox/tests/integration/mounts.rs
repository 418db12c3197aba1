//! Host folders in, changes out (docs/runs.md "Host folders"): real programs work on a mounted
//! folder, the host never changes, and the patch `changes()` gives reproduces the sandbox's
//! tree when real `git apply` applies it to a copy of the folder.

use std::collections::BTreeMap;
use std::fs;
use std::os::unix::fs::{PermissionsExt, symlink};
use std::path::Path;

use wasmsand::{
    Attempt, BestOfOptions, ChangeStatus, ChangesOptions, ChangesSince, FileKind, Limits,
    MergeOptions, MountOptions, RunOptions, Sandbox, SandboxError, SandboxOptions,
};

use crate::host_tools::host_tool;

fn run(sb: &Sandbox, cmd: &str) -> String {
    let r = sb.run(cmd).unwrap();
    assert_eq!(r.exit_code, 0, "{cmd}: {}", r.stderr);
    r.stdout
}

/// Every path below `root` (not `.git`) with what it is: the bytes of a file with its execute
/// bit, a symlink's target, or a directory.
fn host_tree(root: &Path) -> BTreeMap<String, String> {
    let mut out = BTreeMap::new();
    let mut stack = vec![root.to_path_buf()];
    while let Some(dir) = stack.pop() {
        for e in fs::read_dir(&dir).unwrap() {
            let p = e.unwrap().path();
            let rel = p.strip_prefix(root).unwrap().to_string_lossy().into_owned();
            if rel == ".git" {
                continue;
            }
            let md = fs::symlink_metadata(&p).unwrap();
            let what = if md.file_type().is_symlink() {
                format!("-> {}", fs::read_link(&p).unwrap().display())
            } else if md.is_dir() {
                stack.push(p.clone());
                "dir".into()
            } else {
                let x = md.permissions().mode() & 0o100 != 0;
                format!("{x} {:?}", fs::read(&p).unwrap())
            };
            out.insert(rel, what);
        }
    }
    out
}

/// The same view of a directory of the sandbox.
fn sandbox_tree(sb: &Sandbox, root: &str) -> BTreeMap<String, String> {
    let mut out = BTreeMap::new();
    let mut stack = vec![String::new()];
    while let Some(rel) = stack.pop() {
        let dir = if rel.is_empty() {
            root.to_string()
        } else {
            format!("{root}/{rel}")
        };
        for f in sb.list(&dir).unwrap() {
            let r = if rel.is_empty() {
                f.name.clone()
            } else {
                format!("{rel}/{}", f.name)
            };
            if r == ".git" {
                continue;
            }
            let p = format!("{root}/{r}");
            let what = match f.kind {
                FileKind::Symlink => {
                    format!("-> {}", run(sb, &format!("readlink '{p}'")).trim_end())
                }
                FileKind::Dir => {
                    stack.push(r.clone());
                    "dir".into()
                }
                FileKind::File => {
                    let x = sb.run(&format!("test -x '{p}'")).unwrap().exit_code == 0;
                    format!("{x} {:?}", sb.read_file(&p).unwrap().to_vec())
                }
            };
            out.insert(r, what);
        }
    }
    out
}

fn copy_tree(from: &Path, to: &Path) {
    let ok = host_tool("cp")
        .arg("-a")
        .arg(format!("{}/.", from.display()))
        .arg(to)
        .status()
        .unwrap()
        .success();
    assert!(ok);
}

/// A small project: sources, a script, a binary, a secret, a link.
fn project() -> tempfile::TempDir {
    let t = tempfile::tempdir().unwrap();
    let r = t.path();
    let w = |p: &str, data: &[u8]| {
        let p = r.join(p);
        fs::create_dir_all(p.parent().unwrap()).unwrap();
        fs::write(p, data).unwrap();
    };
    w(
        "src/app.py",
        b"def add(a, b):\n    return a - b\n\nprint(add(2, 3))\n",
    );
    w("src/util.py", b"X = 1\n");
    w("README.md", b"# project\n\nline\n");
    w("docs/old.txt", b"old\n");
    w("data/blob.bin", &[0, 1, 2, 3, 255, 254]);
    w("run.sh", b"#!/bin/sh\necho run\n");
    w("no-newline.txt", b"last line");
    w(".env", b"API_KEY=sk-live-123\n");
    symlink("src/app.py", r.join("entry")).unwrap();
    t
}

// Threat: T-HOST-MOUNT (docs/security.md)
#[test]
fn programs_work_on_a_mounted_folder_and_git_apply_reproduces_the_result() {
    let host = project();
    let before = host_tree(host.path());
    let sb = Sandbox::new(SandboxOptions::default());
    let info = sb
        .mount_host(host.path(), "proj", &MountOptions::default())
        .unwrap();
    assert_eq!(info.path, "/home/user/proj");
    run(&sb, "(cd proj && test ! -e .env && ! grep -rq sk-live .)");
    assert_eq!(run(&sb, "cat proj/entry | head -1"), "def add(a, b):\n");
    assert_eq!(run(&sb, "python3 proj/src/app.py"), "-1\n");
    run(
        &sb,
        "cd proj && sed -i 's/a - b/a + b/' src/app.py && echo more >> README.md \
         && rm -r docs && mkdir -p new/deep && printf 'x\\n' > new/deep/f.txt \
         && printf 'with space\\n' > 'new/a file.txt' && printf 'accent\\n' > new/café.txt \
         && chmod +x src/util.py && ln -sfn README.md entry && rm run.sh \
         && printf '\\0\\1\\2\\3\\377\\376\\375' > data/blob.bin && printf 'bin\\0ary' > new/b.bin \
         && printf 'last line\\nand more' > no-newline.txt",
    );
    assert_eq!(run(&sb, "python3 src/app.py"), "5\n");
    assert_eq!(host_tree(host.path()), before, "the host folder changed");

    let ch = sb.changes(&ChangesOptions::default()).unwrap();
    assert_eq!(ch.root, "/home/user/proj");
    let status: BTreeMap<&str, ChangeStatus> = ch
        .files
        .iter()
        .map(|f| (f.path.as_str(), f.status))
        .collect();
    assert_eq!(status["src/app.py"], ChangeStatus::Modified);
    assert_eq!(status["docs"], ChangeStatus::Deleted);
    assert_eq!(status["docs/old.txt"], ChangeStatus::Deleted);
    assert_eq!(status["new/deep/f.txt"], ChangeStatus::Added);
    assert_eq!(status["run.sh"], ChangeStatus::Deleted);
    let util = ch.files.iter().find(|f| f.path == "src/util.py").unwrap();
    assert_eq!((util.old_mode, util.new_mode), (Some(0o644), Some(0o755)));
    assert!(
        ch.files
            .iter()
            .find(|f| f.path == "data/blob.bin")
            .unwrap()
            .binary
    );
    assert!(
        !ch.files
            .iter()
            .any(|f| f.path.contains("README.md") && f.binary)
    );
    assert!(
        ch.patch.contains("-    return a - b\n+    return a + b\n"),
        "{}",
        ch.patch
    );
    assert!(!ch.patch.contains("sk-live"));

    // Real git applies the patch to a copy of the folder and gets the sandbox's tree.
    let copy = tempfile::tempdir().unwrap();
    copy_tree(host.path(), copy.path());
    let patch = copy.path().join("../changes.patch");
    fs::write(&patch, &ch.patch).unwrap();
    let out = host_tool("git")
        .arg("apply")
        .arg("--verbose")
        .arg(&patch)
        .current_dir(copy.path())
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "git apply: {}\n{}",
        String::from_utf8_lossy(&out.stderr),
        ch.patch
    );
    let mut want = sandbox_tree(&sb, "/home/user/proj");
    // git keeps no empty directories, and the copy still has the hidden secret.
    let mut got = host_tree(copy.path());
    got.remove(".env");
    want.retain(|_, v| v != "dir");
    got.retain(|_, v| v != "dir");
    assert_eq!(got, want);

    // export_changes writes the same into a directory the caller names.
    let exported = tempfile::tempdir().unwrap();
    copy_tree(host.path(), exported.path());
    let report = sb.export_changes(&ch, exported.path()).unwrap();
    assert!(report.removed.contains(&"run.sh".to_string()), "{report:?}");
    // Into an empty directory: the changed files with the parents they need.
    let empty = tempfile::tempdir().unwrap();
    let r = sb.export_changes(&ch, empty.path()).unwrap();
    assert!(r.dirs.contains(&"src".to_string()), "{r:?}");
    assert_eq!(
        fs::read_to_string(empty.path().join("src/app.py")).unwrap(),
        "def add(a, b):\n    return a + b\n\nprint(add(2, 3))\n"
    );
    assert_eq!(
        fs::read_to_string(empty.path().join("new/deep/f.txt")).unwrap(),
        "x\n"
    );
    let mut got = host_tree(exported.path());
    got.remove(".env");
    let mut want_all = sandbox_tree(&sb, "/home/user/proj");
    want_all.retain(|k, _| k != ".env");
    assert_eq!(got, want_all);
    assert_eq!(host_tree(host.path()), before);
}

#[test]
fn changes_since_a_snapshot_and_in_a_fork() {
    let host = project();
    let sb = Sandbox::new(SandboxOptions::default());
    sb.mount_host(host.path(), "/home/user/p", &MountOptions::default())
        .unwrap();
    assert!(sb.changes(&ChangesOptions::default()).unwrap().is_empty());
    run(&sb, "echo a > p/one");
    let snap = sb.snapshot().unwrap();
    run(&sb, "echo b > p/two");
    let since = sb
        .changes(&ChangesOptions {
            since: ChangesSince::Snapshot(snap),
            path: None,
        })
        .unwrap();
    let paths: Vec<&str> = since.files.iter().map(|f| f.path.as_str()).collect();
    assert_eq!(paths, ["two"]);

    // A fork sees the mount; what it changes is its own, and `Parent` shows just that.
    let fork = sb.fork().unwrap();
    run(&fork, "echo c > p/three && rm p/one");
    assert!(!run(&sb, "ls p").contains("three"));
    let mine = fork
        .changes(&ChangesOptions {
            since: ChangesSince::Parent,
            path: None,
        })
        .unwrap();
    let brief: Vec<(&str, ChangeStatus)> = mine
        .files
        .iter()
        .map(|f| (f.path.as_str(), f.status))
        .collect();
    assert_eq!(
        brief,
        [
            ("one", ChangeStatus::Deleted),
            ("three", ChangeStatus::Added)
        ]
    );
    // Against the mount, the fork has all of it.
    let all = fork.changes(&ChangesOptions::default()).unwrap();
    let paths: Vec<&str> = all.files.iter().map(|f| f.path.as_str()).collect();
    assert_eq!(paths, ["three", "two"]);

    let e = sb
        .changes(&ChangesOptions {
            since: ChangesSince::Parent,
            path: None,
        })
        .unwrap_err();
    assert!(e.to_string().contains("not a fork"), "{e}");
    let plain = Sandbox::new(SandboxOptions::default());
    let e = plain.changes(&ChangesOptions::default()).unwrap_err();
    assert!(e.to_string().contains("no host folder"), "{e}");
}

#[test]
fn a_mounted_sandbox_keeps_its_limits_and_does_not_export_the_host() {
    let host = tempfile::tempdir().unwrap();
    for i in 0..200 {
        fs::write(host.path().join(format!("f{i}")), "x".repeat(1000)).unwrap();
    }
    let sb = Sandbox::new(SandboxOptions {
        limits: Limits {
            file_count: 5,
            fs_bytes: 4096,
            ..Limits::default()
        },
        ..SandboxOptions::default()
    });
    sb.mount_host(host.path(), "big", &MountOptions::default())
        .unwrap();
    // 200 files and 200 000 bytes are the host's: they do not count.
    assert_eq!(run(&sb, "ls big | wc -l"), "200\n");
    assert_eq!(run(&sb, "cat big/* | wc -c"), "200000\n");
    // What the sandbox writes does.
    let r = sb
        .run("for i in 1 2 3 4 5 6; do echo > big/new$i; done")
        .unwrap();
    assert_ne!(r.exit_code, 0);
    assert!(
        r.stderr.contains("limit") || r.stderr.contains("space"),
        "{}",
        r.stderr
    );
    let r = sb.run("head -c 5000 /dev/zero > big/f0").unwrap();
    assert_ne!(r.exit_code, 0, "5000 bytes over a 4096-byte limit");
    let e = sb.export_state(None).unwrap_err();
    assert!(matches!(e, SandboxError::Invalid(_)));
    assert!(e.to_string().contains("host folder"), "{e}");
}

#[test]
fn a_read_only_mount_and_a_read_cap() {
    let host = project();
    let sb = Sandbox::new(SandboxOptions::default());
    sb.mount_host(
        host.path(),
        "ro",
        &MountOptions {
            read_only: true,
            max_host_bytes: Some(60),
            ..MountOptions::default()
        },
    )
    .unwrap();
    let r = sb.run("echo x > ro/README.md").unwrap();
    assert_ne!(r.exit_code, 0);
    assert!(r.stderr.contains("Read-only file system"), "{}", r.stderr);
    assert_eq!(run(&sb, "cat ro/README.md"), "# project\n\nline\n");
    let r = sb.run("cat ro/src/app.py").unwrap();
    assert_ne!(r.exit_code, 0);
    // wasi-libc's words for EIO.
    assert!(r.stderr.contains("I/O error"), "{}", r.stderr);
    let m = &sb.mounts().unwrap()[0];
    assert!(m.read_only && m.host_bytes_read <= 60, "{m:?}");
    // The sandbox goes on working.
    assert_eq!(run(&sb, "echo ok"), "ok\n");
}

/// Resident memory of this process, in bytes (nextest runs each test in a process of its own).
fn rss() -> u64 {
    let statm = fs::read_to_string("/proc/self/statm").unwrap();
    let pages: u64 = statm.split_whitespace().nth(1).unwrap().parse().unwrap();
    pages * 4096
}

#[test]
fn a_folder_of_50000_files_mounts_without_reading_it() {
    let host = tempfile::tempdir().unwrap();
    for d in 0..100 {
        let dir = host.path().join(format!("pkg{d}"));
        fs::create_dir(&dir).unwrap();
        for f in 0..500 {
            fs::write(dir.join(format!("m{f}.py")), "print('x')\n").unwrap();
        }
    }
    let sb = Sandbox::new(SandboxOptions::default());
    run(&sb, "true");
    let before = rss();
    let info = sb
        .mount_host(host.path(), "repo", &MountOptions::default())
        .unwrap();
    let after = rss();
    assert_eq!((info.dirs_listed, info.files_read), (0, 0));
    assert!(
        after.saturating_sub(before) < 2 << 20,
        "mounting grew the process by {} bytes",
        after - before
    );
    assert_eq!(run(&sb, "cat repo/pkg42/m7.py"), "print('x')\n");
    let m = &sb.mounts().unwrap()[0];
    assert_eq!((m.dirs_listed, m.files_read, m.host_bytes_read), (2, 1, 11));
    // Forking a sandbox with the mount costs what forking always costs.
    let fork = sb.fork().unwrap();
    assert_eq!(run(&fork, "ls repo/pkg42 | wc -l"), "500\n");
    assert_eq!(
        sb.mounts().unwrap()[0].dirs_listed,
        2,
        "pkg42 was listed already"
    );
}

#[test]
fn a_preview_is_committed_or_discarded_and_conflicts_are_reported() {
    let host = project();
    let sb = Sandbox::new(SandboxOptions::default());
    sb.mount_host(host.path(), "proj", &MountOptions::default())
        .unwrap();
    let p = sb
        .preview(
            "sed -i 's/a - b/a + b/' proj/src/app.py && python3 proj/src/app.py",
            RunOptions::default(),
        )
        .unwrap();
    assert_eq!(p.result.stdout, "5\n");
    let paths: Vec<&str> = p.changes.files.iter().map(|f| f.path.as_str()).collect();
    assert_eq!(paths, ["src/app.py"]);
    assert!(p.changes.patch.contains("+    return a + b"));
    // Nothing here yet.
    assert_eq!(run(&sb, "python3 proj/src/app.py"), "-1\n");
    let merged = sb.commit(&p, MergeOptions::default()).unwrap();
    assert_eq!(merged.applied.len(), 1);
    assert_eq!(run(&sb, "python3 proj/src/app.py"), "5\n");

    let q = sb
        .preview("echo throwaway > proj/junk", RunOptions::default())
        .unwrap();
    assert_eq!(q.changes.files.len(), 1);
    sb.discard(q);
    assert!(!run(&sb, "ls proj").contains("junk"));

    // A preview whose path this sandbox changed since is a conflict; nothing is applied.
    let r = sb
        .preview(
            "echo theirs > proj/README.md && echo extra > proj/extra",
            RunOptions::default(),
        )
        .unwrap();
    run(&sb, "echo ours > proj/README.md");
    match sb.commit(&r, MergeOptions::default()) {
        Err(SandboxError::MergeConflict(c)) => {
            assert_eq!(c[0].path, "/home/user/proj/README.md");
        }
        other => panic!("expected a conflict, got {other:?}"),
    }
    assert_eq!(run(&sb, "cat proj/README.md"), "ours\n");
    assert!(
        !run(&sb, "ls proj").contains("extra"),
        "nothing of the preview was applied"
    );
}

#[test]
fn best_of_runs_attempts_in_forks_and_the_pick_is_committed() {
    let host = project();
    let sb = Sandbox::new(SandboxOptions::default());
    sb.mount_host(host.path(), "proj", &MountOptions::default())
        .unwrap();
    let attempts: Vec<Attempt> = ["a - b", "a + b", "b + a", "a * b"]
        .iter()
        .map(|expr| Attempt {
            command: "sed -i \"s/a - b/$EXPR/\" proj/src/app.py && python3 proj/src/app.py \
                      && test \"$(python3 proj/src/app.py)\" = 5"
                .into(),
            env: vec![("EXPR".into(), (*expr).into())],
        })
        .collect();
    let results = sb.best_of(
        &attempts,
        BestOfOptions {
            concurrency: 3,
            ..BestOfOptions::default()
        },
    );
    let codes: Vec<i32> = results
        .iter()
        .map(|r| r.as_ref().unwrap().result.exit_code)
        .collect();
    assert_eq!(codes, [1, 0, 0, 1]);
    let outs: Vec<&str> = results
        .iter()
        .map(|r| r.as_ref().unwrap().result.stdout.as_str())
        .collect();
    assert_eq!(outs, ["-1\n", "5\n", "5\n", "6\n"]);
    // The first attempt changed nothing (the expression was already there).
    assert!(results[0].as_ref().unwrap().changes.is_empty());
    assert!(!results[3].as_ref().unwrap().changes.is_empty());
    // Nothing changed here until the pick is committed.
    assert_eq!(run(&sb, "python3 proj/src/app.py"), "-1\n");
    let pick = results[2].as_ref().unwrap();
    sb.commit(pick, MergeOptions::default()).unwrap();
    assert_eq!(
        run(&sb, "grep return proj/src/app.py"),
        "    return b + a\n"
    );
    // The host folder never changed.
    assert!(
        fs::read_to_string(host.path().join("src/app.py"))
            .unwrap()
            .contains("a - b")
    );
}
