//! `git` (git.wasm) through `wasmsand-exec` with real wasm: a local workflow run step by step
//! in the sandbox and with the machine's own git in a temporary directory (same files, same
//! fixed identity and dates, so the same commit ids): stdout, stderr and status of every step
//! must match. The repository made in the sandbox is then copied out and checked by host git
//! (`fsck --strict`, `log`, `status`).

use crate::common;

use std::path::Path;

use std::time::{Duration, Instant};

use bytes::Bytes;
use common::*;
use wasmsand_exec::{Input, OutputBuffer, RunSpec, SharedVfs};
use wasmsand_vfs::FileType;

const HOME: &str = "/home/user";

const ENV: &[(&str, &str)] = &[
    ("GIT_AUTHOR_NAME", "Ann Agent"),
    ("GIT_AUTHOR_EMAIL", "ann@example.com"),
    ("GIT_AUTHOR_DATE", "1700000000 +0000"),
    ("GIT_COMMITTER_NAME", "Ann Agent"),
    ("GIT_COMMITTER_EMAIL", "ann@example.com"),
    ("GIT_COMMITTER_DATE", "1700000000 +0000"),
];

/// One step: a file operation done the same way on both sides, or a git command.
enum Step<'a> {
    Write(&'a str, &'a str),
    Remove(&'a str),
    Git(&'a [&'a str]),
}
use Step::*;

#[derive(Debug, PartialEq)]
struct Out {
    code: i32,
    stdout: String,
    stderr: String,
}

fn sandbox_git(vfs: &SharedVfs, dir: &str, args: &[&str]) -> Out {
    let out = OutputBuffer::new(1 << 20);
    let err = OutputBuffer::new(1 << 20);
    let mut argv = vec!["git"];
    argv.extend_from_slice(args);
    let mut spec = RunSpec::new(vfs.clone(), argv.iter().copied());
    spec.cwd = dir.into();
    spec.stdin = Input::Bytes(Bytes::new());
    spec.stdout = out.clone().into();
    spec.stderr = err.clone().into();
    spec.env = vec![
        ("HOME".into(), HOME.into()),
        ("PATH".into(), "/bin:/usr/bin".into()),
    ];
    for (k, v) in ENV {
        spec.env.push(((*k).into(), (*v).into()));
    }
    spec.deadline = Some(Instant::now() + Duration::from_secs(60));
    let outcome = exec().run(&program("git"), spec).unwrap();
    Out {
        code: outcome.exit.status(),
        stdout: out.snapshot().to_text().text,
        stderr: err.snapshot().to_text().text,
    }
}

fn host_git(dir: &Path, home: &Path, args: &[&str]) -> Out {
    let out = crate::host_tools::host_tool("git")
        .args(args)
        .current_dir(dir)
        .env_clear()
        .env("HOME", home)
        .env("PATH", "/usr/bin:/bin:/usr/local/bin")
        .env("GIT_CONFIG_NOSYSTEM", "1")
        .envs(ENV.iter().copied())
        .output()
        .expect("host git (is it installed?)");
    Out {
        code: out.status.code().unwrap_or(-1),
        stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
    }
}

/// Runs `steps` on both sides in `repo` (a directory under the home) and compares each git
/// step; `stderr` says whether stderr is compared too.
fn compare(steps: &[Step], stderr: bool) -> (SharedVfs, tempfile::TempDir) {
    let vfs = vfs();
    let host = tempfile::tempdir().unwrap();
    let home = host.path().join("home");
    std::fs::create_dir_all(home.join("repo")).unwrap();
    vfs.lock().mkdir_p(&format!("{HOME}/repo")).unwrap();
    let sdir = format!("{HOME}/repo");
    let hdir = home.join("repo");
    for step in steps {
        match step {
            Write(path, data) => {
                let full = format!("{sdir}/{path}");
                let mut v = vfs.lock();
                if let Some(parent) = Path::new(&full).parent() {
                    v.mkdir_p(parent.to_str().unwrap()).unwrap();
                }
                v.write(&full, data.as_bytes()).unwrap();
                let h = hdir.join(path);
                std::fs::create_dir_all(h.parent().unwrap()).unwrap();
                std::fs::write(h, data).unwrap();
            }
            Remove(path) => {
                vfs.lock().unlink(&format!("{sdir}/{path}")).unwrap();
                std::fs::remove_file(hdir.join(path)).unwrap();
            }
            Git(args) => {
                let ours = sandbox_git(&vfs, &sdir, args);
                let theirs = host_git(&hdir, &home, args);
                let norm = |s: &str, root: &str| s.replace(root, "<ROOT>");
                assert_eq!(
                    (ours.code, norm(&ours.stdout, &sdir)),
                    (theirs.code, norm(&theirs.stdout, hdir.to_str().unwrap())),
                    "status and stdout of git {args:?} (sandbox stderr: {})",
                    ours.stderr
                );
                if stderr {
                    assert_eq!(
                        norm(&ours.stderr, &sdir),
                        norm(&theirs.stderr, hdir.to_str().unwrap()),
                        "stderr of git {args:?}"
                    );
                }
            }
        }
    }
    (vfs, host)
}

/// Copies the sandbox's `from` tree to the host's `to`.
fn copy_out(vfs: &SharedVfs, from: &str, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    let entries = vfs.lock().readdir(from).unwrap();
    for e in entries {
        let src = format!("{from}/{}", e.name);
        let dst = to.join(&e.name);
        match e.file_type {
            FileType::Dir => copy_out(vfs, &src, &dst),
            FileType::File => std::fs::write(dst, vfs.lock().read(&src).unwrap()).unwrap(),
            _ => {}
        }
    }
}

#[test]
fn local_workflow_matches_host_git() {
    let steps = [
        Git(&["init", "-q"][..]),
        Write("a.txt", "hello\nworld\n"),
        Write("src/main.rs", "fn main() {\n    println!(\"hi\");\n}\n"),
        Write("src/sub/x.txt", "x\n"),
        Write(".gitignore", "*.log\nbuild/\n"),
        Write("debug.log", "noise\n"),
        Write("build/out.bin", "bin\n"),
        Git(&["status"]),
        Git(&["status", "--short"]),
        Git(&["add", "."]),
        Git(&["status"]),
        Git(&["diff", "--staged", "--stat"]),
        Git(&["commit", "-m", "first commit"]),
        Git(&["log"]),
        Git(&["status"]),
        Write("a.txt", "hello\nthere\nworld\n"),
        Write("src/main.rs", "fn main() {\n    println!(\"hello\");\n}\n"),
        Remove("src/sub/x.txt"),
        Write("new.txt", "new\n"),
        Git(&["status"]),
        Git(&["status", "-s"]),
        Git(&["diff"]),
        Git(&["diff", "--name-only"]),
        Git(&["add", "-A"]),
        Git(&["diff", "--cached"]),
        Git(&["commit", "-q", "-m", "second"]),
        Git(&["log", "--oneline"]),
        Git(&["rev-parse", "HEAD"]),
        Git(&["rev-parse", "--short", "HEAD~1"]),
        Git(&["rev-parse", "--abbrev-ref", "HEAD"]),
        Git(&["branch", "feature"]),
        Git(&["checkout", "feature"]),
        Write("a.txt", "hello\nthere\nworld\nfeature\n"),
        Git(&["commit", "-am", "on feature"]),
        Git(&["branch"]),
        Git(&["checkout", "master"]),
        Git(&["log", "--oneline", "feature"]),
        Git(&["show", "feature"]),
        Git(&["show", "--stat", "HEAD~1"]),
        Git(&["log", "-p", "-1"]),
        Write("a.txt", "dirty\n"),
        Git(&["stash"]),
        Git(&["status", "-s"]),
        Git(&["stash", "list"]),
        Git(&["stash", "pop"]),
        Git(&["diff"]),
        Git(&["restore", "a.txt"]),
        Git(&["status", "--short"]),
        Write("z.txt", "z\n"),
        Git(&["add", "z.txt"]),
        Git(&["restore", "--staged", "z.txt"]),
        Git(&["status", "--short"]),
        Git(&["switch", "-c", "topic"]),
        Git(&["branch", "--show-current"]),
        Git(&["reset", "--hard", "HEAD~1"]),
        Git(&["log", "--oneline"]),
        Git(&["commit", "-m", "nothing"]),
        Git(&["switch", "master"]),
        Git(&["branch", "-D", "topic"]),
        Git(&["config", "user.name", "Someone Else"]),
        Git(&["config", "user.name"]),
        Git(&["reset", "--soft", "HEAD~1"]),
        Git(&["status", "-s"]),
        Git(&["reset"]),
        Git(&["status", "-s"]),
        Git(&["checkout", "--", "a.txt"]),
        Git(&["status", "-s"]),
    ];
    let (vfs, host) = compare(&steps, true);

    // Real git reads the repository made in the sandbox.
    let copy = host.path().join("copy");
    copy_out(&vfs, &format!("{HOME}/repo"), &copy);
    let home = host.path().join("home");
    let fsck = host_git(&copy, &home, &["fsck", "--strict", "--no-dangling"]);
    assert_eq!(fsck.code, 0, "git fsck: {}{}", fsck.stdout, fsck.stderr);
    assert!(
        fsck.stderr.is_empty() || !fsck.stderr.contains("error"),
        "{}",
        fsck.stderr
    );
    let log = host_git(&copy, &home, &["log", "--format=%h %s", "--all"]);
    let ours = sandbox_git(
        &vfs,
        &format!("{HOME}/repo"),
        &["log", "--oneline", "feature"],
    );
    assert_eq!(log.code, 0, "{}", log.stderr);
    assert!(log.stdout.contains("on feature") && log.stdout.contains("first commit"));
    for line in ours.stdout.lines() {
        assert!(
            log.stdout.contains(line),
            "{line} in host git's log:\n{}",
            log.stdout
        );
    }
    let status = host_git(&copy, &home, &["status", "--porcelain"]);
    let ours = sandbox_git(&vfs, &format!("{HOME}/repo"), &["status", "--porcelain"]);
    assert_eq!(
        status.stdout, ours.stdout,
        "host git sees the same index and work tree"
    );
}

#[test]
fn errors_and_edges_match_host_git() {
    let steps = [
        Git(&["status"][..]),
        Git(&["log"]),
        Git(&["init"]),
        Git(&["status"]),
        Git(&["log"]),
        Git(&["add", "missing.txt"]),
        Git(&["commit", "-m", "empty"]),
        Write("f.txt", "one\n"),
        Write("sub/dir/g.txt", "g\n"),
        Git(&["status", "--porcelain"]),
        Git(&["add", "f.txt"]),
        Git(&["rev-parse", "--abbrev-ref", "HEAD"]),
        Git(&["commit", "-m", "one"]),
        Git(&["branch", "bad name"]),
        Git(&["checkout", "nope"]),
        Git(&["branch", "x"]),
        Git(&["branch", "x"]),
        Write("f.txt", "one\ntwo\n"),
        Git(&["diff", "--stat"]),
        Git(&["diff", "--exit-code"]),
        Git(&["commit", "-a", "-m", "two"]),
        Git(&["checkout", "x"]),
        Write("f.txt", "local\n"),
        Git(&["checkout", "master"]),
        Git(&["checkout", "-f", "master"]),
        Git(&["branch", "-d", "x"]),
        Git(&["stash", "list"]),
        Git(&["stash"]),
        Git(&["rm", "--cached", "f.txt"]),
        Git(&["status", "-s"]),
        Git(&["tag", "v1"]),
        Git(&["tag"]),
        Git(&["cat-file", "-t", "HEAD"]),
        Git(&["ls-files"]),
    ];
    // The messages of a few of these steps name git's own paths; stdout and status suffice.
    compare(&steps, false);
}

#[test]
fn network_commands_say_there_is_no_network_and_help_answers() {
    let vfs = vfs();
    // Without a network policy the run has no channel to the network door.
    for args in [
        &["clone", "https://example.com/r.git"][..],
        &["ls-remote", "https://example.com/r.git"][..],
    ] {
        let out = sandbox_git(&vfs, HOME, args);
        assert_eq!(out.code, 128, "{args:?}");
        assert!(
            out.stderr.contains(
                "fatal: unable to access 'https://example.com/r.git/': network access is off \
                 in this sandbox (it has no network policy)"
            ),
            "{args:?}: {}",
            out.stderr
        );
    }
    // A refused clone leaves no directory behind.
    assert!(
        sandbox_git(&vfs, HOME, &["-C", "r", "status"])
            .stderr
            .contains("cannot change to 'r'")
    );
    let out = sandbox_git(&vfs, HOME, &["push"]);
    assert_eq!(out.code, 128);
    assert!(out.stderr.contains("does not push"), "{}", out.stderr);
    let help = sandbox_git(&vfs, HOME, &["--help"]);
    assert_eq!(help.code, 0);
    assert!(help.stdout.contains("usage: git") && help.stdout.contains("stash"));
    let out = sandbox_git(&vfs, HOME, &["frobnicate"]);
    assert_eq!(out.code, 1);
    assert!(
        out.stderr.contains("'frobnicate' is not a git command"),
        "{}",
        out.stderr
    );
}
