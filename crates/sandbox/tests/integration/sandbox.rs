//! The `Sandbox` facade end to end: limits, files, env, snapshots, forks, cancellation,
//! concurrency and hostile scripts — all through real guest programs.

use std::sync::Arc;
use std::time::{Duration, Instant};

use parking_lot::Mutex;
use wasmsand::{
    Errno, ErrorClass, FileKind, Limits, RunOptions, Sandbox, SandboxError, SandboxOptions,
    Truncated,
};

fn sandbox() -> Sandbox {
    Sandbox::new(SandboxOptions::default())
}

fn with_limits(f: impl FnOnce(&mut Limits)) -> Sandbox {
    let mut limits = Limits::default();
    f(&mut limits);
    Sandbox::new(SandboxOptions {
        limits,
        ..Default::default()
    })
}

// ---- limits: command size, output, file count, timeout ----

#[test]
fn rejects_command_exceeding_command_bytes() {
    let sb = with_limits(|l| l.command_bytes = 10);
    sb.run("touch /tmp/ran").unwrap();
    let r = sb
        .run("echo this is a long command that exceeds the limit")
        .unwrap();
    assert_eq!(r.exit_code, 1);
    assert_eq!(r.error_class, Some(ErrorClass::LimitExceeded));
    assert_eq!(r.stderr, "command too long (50 bytes, limit: 10)\n");
    assert_eq!(r.stdout, "");
}

#[test]
fn truncates_stdout_past_stdout_bytes() {
    let sb = with_limits(|l| l.stdout_bytes = 5);
    let r = sb.run("echo hello world").unwrap();
    assert_eq!(r.stdout, "hello");
    assert_eq!(
        r.truncated,
        Some(Truncated {
            stdout: true,
            stderr: false
        })
    );
    assert_eq!(r.exit_code, 0);
}

#[test]
fn truncates_stderr_past_stderr_bytes() {
    let sb = with_limits(|l| l.stderr_bytes = 5);
    let r = sb.run("echo error message >&2").unwrap();
    assert_eq!(r.stderr, "error");
    assert_eq!(
        r.truncated,
        Some(Truncated {
            stdout: false,
            stderr: true
        })
    );
}

// Threat: T-EXHAUST-FILES (docs/security.md)
#[test]
fn file_count_limit_reaches_the_vfs() {
    let sb = with_limits(|l| l.file_count = 1);
    sb.write_file("/tmp/a.txt", &[0]).unwrap();
    let err = sb.write_file("/tmp/b.txt", &[0]).unwrap_err();
    assert_eq!(err.errno(), Some(Errno::ENOSPC));
    // Through the shell and a guest program too.
    let r = sb.run("touch /tmp/c.txt; echo $?").unwrap();
    assert_eq!(r.stdout, "1\n");
    assert!(r.stderr.contains("No space left on device"), "{}", r.stderr);
}

#[test]
fn timeout_sets_timeout_class_and_the_sandbox_stays_usable() {
    let sb = Sandbox::new(SandboxOptions {
        limits: Limits {
            timeout_ms: 1,
            ..Limits::default()
        },
        ..Default::default()
    });
    // A pipeline that never ends on its own: a short one can finish inside the 1 ms
    // (the deadline also moves past module loads on a cold cache), which CI once hit.
    let r = sb.run("yes hello | cat > /dev/null").unwrap();
    assert_eq!(r.exit_code, 124);
    assert_eq!(r.error_class, Some(ErrorClass::Timeout));
    assert!(r.stderr.ends_with("command timed out\n"), "{}", r.stderr);
    // No poisoning: the next run gets its own deadline.
    let r = sb
        .run_with(
            "echo still here",
            RunOptions {
                timeout_ms: Some(10_000),
                ..Default::default()
            },
        )
        .unwrap();
    assert_eq!(r.stdout, "still here\n");
    assert_eq!(r.error_class, None);
}

#[test]
fn no_truncation_within_limits() {
    let sb = with_limits(|l| l.stdout_bytes = 1_000_000);
    let r = sb.run("echo hello").unwrap();
    assert_eq!(r.truncated, None);
    assert_eq!(r.error_class, None);
}

// ---- timeouts of every kind ----

// Threat: T-EXHAUST-CPU (docs/security.md)
#[test]
fn deadline_stops_loops_guests_and_sleeps() {
    let sb = sandbox();
    for cmd in [
        "while :; do :; done",
        "sleep 100",
        "yes > /dev/null",
        "cat",
        "yes | while read l; do :; done",
        "f() { f; }; while :; do x=1; done",
    ] {
        let r = sb
            .run_with(
                cmd,
                RunOptions {
                    timeout_ms: Some(300),
                    stdin: Some(bytes::Bytes::new()),
                    ..Default::default()
                },
            )
            .unwrap();
        if cmd == "cat" {
            // Empty stdin: cat ends at once.
            assert_eq!(r.exit_code, 0, "{cmd}");
            continue;
        }
        assert_eq!(r.exit_code, 124, "{cmd}: {r:?}");
        assert_eq!(r.error_class, Some(ErrorClass::Timeout), "{cmd}");
        assert_eq!(sb.run("echo ok").unwrap().stdout, "ok\n", "after {cmd}");
    }
}

#[test]
fn cancel_from_another_thread() {
    let sb = Arc::new(sandbox());
    let sb2 = sb.clone();
    // Cancelled once it has printed: a cancel before the run starts would find nothing to stop.
    let (tx, started) = std::sync::mpsc::channel::<()>();
    let tx = Mutex::new(tx);
    let h = std::thread::spawn(move || {
        sb2.run_streaming(
            "echo started; sleep 30; echo never",
            Arc::new(move |_: &[u8]| {
                let _ = tx.lock().send(());
            }),
            Arc::new(|_: &[u8]| {}),
        )
        .unwrap()
    });
    started.recv().unwrap();
    sb.cancel();
    let r = h.join().unwrap();
    assert_eq!(r.error_class, Some(ErrorClass::Cancelled));
    assert_eq!(r.exit_code, 130);
    assert_eq!(r.stdout, "started\n");
    assert_eq!(sb.run("echo next").unwrap().stdout, "next\n");
}

// ---- streaming ----

#[test]
fn streaming_callbacks_see_output_while_running() {
    let sb = sandbox();
    let seen: Arc<Mutex<Vec<(Instant, String)>>> = Arc::default();
    let errs: Arc<Mutex<String>> = Arc::default();
    let s2 = seen.clone();
    let e2 = errs.clone();
    let start = Instant::now();
    let r = sb
        .run_streaming(
            "echo one; sleep 0.3; echo two; echo err >&2; seq 3 | wc -l",
            Arc::new(move |c: &[u8]| {
                s2.lock()
                    .push((Instant::now(), String::from_utf8_lossy(c).into_owned()))
            }),
            Arc::new(move |c: &[u8]| e2.lock().push_str(&String::from_utf8_lossy(c))),
        )
        .unwrap();
    let end = Instant::now();
    let seen = seen.lock();
    let all: String = seen.iter().map(|(_, s)| s.as_str()).collect();
    assert_eq!(all, r.stdout);
    assert_eq!(all, "one\ntwo\n3\n");
    assert_eq!(*errs.lock(), "err\n");
    // "one" arrived before the sleep ended, well before the run finished.
    assert!(seen[0].0 - start < end - start - Duration::from_millis(200));
}

// ---- files ----

#[test]
fn files_api_round_trips_with_the_shell() {
    let sb = sandbox();
    sb.write_file("/home/user/deep/er/a.txt", b"hello\n")
        .unwrap();
    let r = sb
        .run("cat deep/er/a.txt; echo more >> deep/er/a.txt")
        .unwrap();
    assert_eq!(r.stdout, "hello\n");
    assert_eq!(
        &sb.read_file("deep/er/a.txt").unwrap()[..],
        b"hello\nmore\n"
    );
    sb.mkdir("/tmp/x/y").unwrap();
    sb.write_file("/tmp/x/f", b"12345").unwrap();
    let list = sb.list("/tmp/x").unwrap();
    assert_eq!(list.len(), 2);
    assert_eq!(list[0].name, "f");
    assert_eq!(list[0].kind, FileKind::File);
    assert_eq!(list[0].size, 5);
    assert_eq!(list[1].name, "y");
    assert_eq!(list[1].kind, FileKind::Dir);
    let st = sb.stat("/tmp/x/f").unwrap();
    assert_eq!((st.name.as_str(), st.size), ("f", 5));
    assert_eq!(
        sb.remove("/tmp/x", false).unwrap_err().errno(),
        Some(Errno::ENOTEMPTY)
    );
    sb.remove("/tmp/x", true).unwrap();
    assert_eq!(sb.stat("/tmp/x").unwrap_err().errno(), Some(Errno::ENOENT));
    // Outside the writable trees.
    assert_eq!(
        sb.write_file("/etc/motd", b"x").unwrap_err().errno(),
        Some(Errno::EROFS)
    );
    let r = sb.run("echo x > /usr/bin/sort").unwrap();
    assert_eq!(r.exit_code, 1);
    assert!(r.stderr.contains("Read-only file system"), "{}", r.stderr);
    // Guest programs are files in /bin and /usr/bin.
    let r = sb
        .run("ls /usr/bin | grep -c . ; which sort; [ -x /bin/cat ] && echo exec")
        .unwrap();
    let lines: Vec<&str> = r.stdout.lines().collect();
    assert!(lines[0].parse::<u32>().unwrap() > 50);
    assert_eq!(&lines[1..], ["/usr/bin/sort", "exec"]);
}

#[test]
fn env_get_set_is_the_shell_environment() {
    let sb = sandbox();
    assert_eq!(sb.get_env("HOME").unwrap().as_deref(), Some("/home/user"));
    assert_eq!(sb.get_env("NOPE").unwrap(), None);
    sb.set_env("GREETING", "hi there").unwrap();
    let r = sb.run("echo \"$GREETING\"; printenv GREETING").unwrap();
    assert_eq!(r.stdout, "hi there\nhi there\n");
    sb.run("export FROM_SHELL=yes; LOCAL=1").unwrap();
    assert_eq!(sb.get_env("FROM_SHELL").unwrap().as_deref(), Some("yes"));
    assert!(matches!(
        sb.set_env("bad name", "x"),
        Err(SandboxError::Invalid(_))
    ));
}

// ---- session state ----

#[test]
fn shell_state_persists_across_runs() {
    let sb = sandbox();
    sb.run("x=1; f() { echo \"f $1\"; }; cd /tmp; set -o pipefail; alias ll='ls -1'; false")
        .unwrap();
    let r = sb
        .run("echo $? $x $PWD; f arg; pwd; false | true; echo $?; alias ll")
        .unwrap();
    assert_eq!(r.stdout, "1 1 /tmp\nf arg\n/tmp\n1\nalias ll='ls -1'\n");
}

#[test]
fn snapshot_round_trip_restores_files_and_shell_state() {
    let sb = sandbox();
    sb.run("echo v1 > f; x=before; g() { echo g1; }").unwrap();
    let snap = sb.snapshot().unwrap();
    sb.run("echo v2 > f; rm -f f; touch new; x=after; g() { echo g2; }; cd /tmp")
        .unwrap();
    sb.restore(snap).unwrap();
    let r = sb.run("cat f; ls; echo $x; g; pwd").unwrap();
    assert_eq!(r.stdout, "v1\nf\nbefore\ng1\n/home/user\n");
    // A snapshot can be restored more than once.
    sb.run("rm f").unwrap();
    sb.restore(snap).unwrap();
    assert_eq!(sb.run("cat f").unwrap().stdout, "v1\n");
    assert!(matches!(
        sb.restore(wasmsand::SnapshotId(999)),
        Err(SandboxError::UnknownSnapshot(_))
    ));
}

#[test]
fn forks_are_isolated_both_ways_and_carry_everything() {
    let parent = with_limits(|l| l.stdout_bytes = 100);
    parent
        .run("echo shared > f; v=parent; export E=1; h() { echo hello; }; cd /tmp")
        .unwrap();
    let child = parent.fork().unwrap();
    let r = child.run("cat ~/f; echo $v $E; h; pwd").unwrap();
    assert_eq!(r.stdout, "shared\nparent 1\nhello\n/tmp\n");
    child
        .run("echo child > ~/f; v=child; touch ~/only-child")
        .unwrap();
    parent
        .run("echo parent2 > ~/f; touch ~/only-parent")
        .unwrap();
    assert_eq!(
        parent.run("cat ~/f; echo $v; ls ~").unwrap().stdout,
        "parent2\nparent\nf\nonly-parent\n"
    );
    assert_eq!(
        child.run("cat ~/f; echo $v; ls ~").unwrap().stdout,
        "child\nchild\nf\nonly-child\n"
    );
    // Limits come along.
    let r = child.run("seq 1000").unwrap();
    assert_eq!(r.stdout.len(), 100);
    assert!(r.truncated.is_some());
    // Fork of a fork; destroying one leaves the others alone.
    let grandchild = child.fork().unwrap();
    child.destroy();
    assert!(matches!(child.run("true"), Err(SandboxError::Destroyed)));
    assert!(matches!(child.read_file("f"), Err(SandboxError::Destroyed)));
    assert_eq!(grandchild.run("cat ~/f").unwrap().stdout, "child\n");
    assert_eq!(parent.run("cat ~/f").unwrap().stdout, "parent2\n");
}

#[test]
fn eight_forks_run_at_once() {
    let root = sandbox();
    root.run("seq 1 2000 > data").unwrap();
    let forks: Vec<Sandbox> = (0..8).map(|_| root.fork().unwrap()).collect();
    let handles: Vec<_> = forks
        .into_iter()
        .enumerate()
        .map(|(i, sb)| {
            std::thread::spawn(move || {
                let r = sb
                    .run(&format!(
                        "for j in 1 2 3; do sort -rn data | head -1; done | uniq; echo {i} > mine; cat mine; sleep 0.2"
                    ))
                    .unwrap();
                (i, r, sb)
            })
        })
        .collect();
    for h in handles {
        let (i, r, sb) = h.join().unwrap();
        assert_eq!(r.stdout, format!("2000\n{i}\n"), "{r:?}");
        assert_eq!(
            &sb.read_file("mine").unwrap()[..],
            format!("{i}\n").as_bytes()
        );
    }
    assert!(root.read_file("mine").is_err());
}

// ---- hostile scripts ----

// Threat: T-EXHAUST-PROCESSES (docs/security.md)
#[test]
fn hostile_scripts_end_with_an_error_and_leave_the_sandbox_usable() {
    for (cmd, needle) in [
        (":(){ :|:& };:", "fork"),
        ("f(){ f; }; f", "maximum nesting level"),
        ("echo {1..99999999}", "brace expansion"),
        ("x=x; while :; do x=$x$x; done", "too large"),
        ("eval \"$(printf '(%.0s' {1..300})\"", "nest"),
        (
            "cat /dev/zero | head -c 10000000 | wc -c > /dev/null; a=$(cat /dev/zero)",
            "too large",
        ),
    ] {
        // Each on its own sandbox: the fork bomb leaves `:` defined as itself.
        let sb = sandbox();
        let r = sb.run(cmd).unwrap();
        assert_ne!(r.exit_code, 0, "{cmd}: {r:?}");
        assert!(r.error_class.is_some() || r.exit_code == 2, "{cmd}: {r:?}");
        assert!(r.stderr.contains(needle), "{cmd}: {}", r.stderr);
        assert_eq!(sb.run("echo fine").unwrap().stdout, "fine\n", "after {cmd}");
    }
}

// Threat: T-EXHAUST-PROCESSES (docs/security.md)
#[test]
fn deep_command_substitution_and_eval_are_bounded() {
    let sb = sandbox();
    let r = sb.run("f() { echo $(f); }; f").unwrap();
    assert_eq!(r.error_class, Some(ErrorClass::LimitExceeded), "{r:?}");
    let r = sb.run("e='eval \"$e\"'; eval \"$e\"").unwrap();
    assert_eq!(r.error_class, Some(ErrorClass::LimitExceeded), "{r:?}");
    assert_eq!(sb.run("echo ok").unwrap().stdout, "ok\n");
}

// Threat: T-EXHAUST-OUTPUT (docs/security.md)
#[test]
fn oversized_printf_field_is_a_limit_not_a_silent_cut() {
    let sb = sandbox();
    let r = sb.run("printf '%999999999d' 1 | wc -c").unwrap();
    assert_eq!(r.error_class, Some(ErrorClass::LimitExceeded), "{r:?}");
    assert!(r.stderr.contains("too large"), "{r:?}");
    assert_ne!(r.stdout.trim(), "1048576", "{r:?}");
    let r = sb.run("printf '%2000000d' 1 | wc -c").unwrap();
    assert_eq!(r.stdout.trim(), "2000000", "{r:?}");
    assert_eq!(sb.run("echo ok").unwrap().stdout, "ok\n");
}

#[test]
fn scripts_and_shebangs() {
    let sb = sandbox();
    let r = sb
        .run(
            "printf '#!/bin/bash\\necho \"script $1 $#\"\\nexit 3\\n' > s.sh; ./s.sh a; echo \"st $?\"; \
             chmod +x s.sh; ./s.sh a b; echo \"st $?\"; bash s.sh x; sh -c 'echo $0 $1' zero one; \
             printf 'echo from-stdin\\n' | bash; nosuchcmd; echo \"st $?\"",
        )
        .unwrap();
    assert_eq!(
        r.stdout,
        "st 126\nscript a 2\nst 3\nscript x 1\nzero one\nfrom-stdin\nst 127\n"
    );
    assert!(
        r.stderr.contains("bash: line 1: ./s.sh: Permission denied"),
        "{}",
        r.stderr
    );
    assert!(
        r.stderr
            .contains("bash: line 1: nosuchcmd: command not found"),
        "{}",
        r.stderr
    );
}

#[test]
fn new_sandboxes_are_independent() {
    // What one costs is measured by the `sandbox` benchmark, not here.
    let many: Vec<Sandbox> = (0..200).map(|_| sandbox()).collect();
    many[0].write_file("/tmp/x", b"1").unwrap();
    assert!(many[1].read_file("/tmp/x").is_err());
}

#[test]
fn initial_files_are_part_of_the_layout() {
    let sb = Sandbox::new(SandboxOptions {
        limits: Limits {
            file_count: 1,
            ..Limits::default()
        },
        files: vec![
            (
                "project/main.sh".into(),
                bytes::Bytes::from_static(b"echo from project\n"),
            ),
            ("/opt/data/x.txt".into(), bytes::Bytes::from_static(b"x\n")),
        ],
        ..Default::default()
    });
    let r = sb
        .run("bash project/main.sh; cat /opt/data/x.txt; touch one")
        .unwrap();
    assert_eq!(r.stdout, "from project\nx\n");
    assert_eq!(r.exit_code, 0, "{r:?}");
}

#[test]
fn compiling_a_module_does_not_count_against_the_run() {
    // A fresh cache directory means a fresh engine cache: the first `wc` compiles its module
    // (about a second here), far beyond this run's 300 ms.
    let dir = tempfile::tempdir().unwrap();
    let sb = Sandbox::new(SandboxOptions {
        limits: Limits {
            timeout_ms: 300,
            ..Limits::default()
        },
        cache_dir: Some(dir.path().to_path_buf()),
        ..Default::default()
    });
    let r = sb.run("echo hello | wc -c").unwrap();
    assert_eq!(r.stdout, "6\n", "{r:?}");
    assert_eq!(r.error_class, None);
    // The deadline still holds for the script itself.
    let r = sb.run("while :; do :; done").unwrap();
    assert_eq!(r.error_class, Some(ErrorClass::Timeout));
}

#[test]
fn a_runs_stdin_is_read_in_turn_by_the_commands_that_read_it() {
    // As in `bash -c '...' < file`: a command that does not read stdin leaves it to the next.
    let sb = sandbox();
    sb.write_file("/home/user/f", b"file\n").unwrap();
    let run = |cmd: &str, input: &str| {
        sb.run_with(
            cmd,
            RunOptions {
                stdin: Some(bytes::Bytes::copy_from_slice(input.as_bytes())),
                ..Default::default()
            },
        )
        .unwrap()
        .stdout
    };
    assert_eq!(run("cat f; tr a-z A-Z", "abc\n"), "file\nABC\n");
    assert_eq!(
        run("read x; echo \"[$x]\"; cat", "one\ntwo\n"),
        "[one]\ntwo\n"
    );
    assert_eq!(run("cat; cat", "once\n"), "once\n");
}

#[test]
fn identity_commands_answer_for_the_sandbox_not_the_host() {
    let sb = sandbox();
    let r = sb
        .run(
            "whoami; id; id -un; id -g; hostname; uname; uname -a; uname -m -s; \
             echo \"$UID $EUID $OSTYPE\"; test \"$HOSTNAME\" = \"$(hostname)\" && echo same; \
             hostname other; echo \"st=$?\"; id nobody; echo \"st=$?\"; type -t whoami uname",
        )
        .unwrap();
    assert_eq!(
        r.stdout,
        "user\nuid=1000(user) gid=1000(user) groups=1000(user)\nuser\n1000\nsandbox\nLinux\n\
         Linux sandbox 6.1.0-wasmsand #1 SMP x86_64 GNU/Linux\nLinux x86_64\n\
         1000 1000 linux-gnu\nsame\nst=1\nst=1\nfile\nfile\n"
    );
    assert_eq!(
        r.stderr,
        "hostname: you must be root to change the host name\nid: 'nobody': no such user\n"
    );
}

#[test]
fn hard_links_are_names_of_one_file() {
    // wasix "linked" in its own inode table only, so `ln` once reported success and the name
    // never appeared; now the link is the tree's, and programs see one file under two names.
    let sb = sandbox();
    let r = sb
        .run(
            "echo x > a; ln a b; echo more >> b; cat a; stat -c '%h' a b; \
             test a -ef b && echo same; ls -i a b | awk '{print $1}' | uniq | wc -l; \
             rm a; stat -c '%h' b; ln /tmp d 2>&1; echo \"st=$?\"",
        )
        .unwrap();
    assert_eq!(
        r.stdout,
        "x\nmore\n2\n2\nsame\n1\n1\nln: /tmp: hard link not allowed for directory\nst=1\n"
    );
    // The same from Python, and after a fork each side has its own pair.
    let r = sb
        .run(
            "python3 -c \"import os; os.link('b', 'c'); s = os.stat('c'); \
             print(s.st_nlink, s.st_ino == os.stat('b').st_ino)\"",
        )
        .unwrap();
    assert_eq!(r.stdout, "2 True\n", "{}", r.stderr);
    let fork = sb.fork().unwrap();
    fork.run("echo fork > c").unwrap();
    assert_eq!(fork.run("cat b").unwrap().stdout, "fork\n");
    assert_eq!(sb.run("cat b").unwrap().stdout, "x\nmore\n");
}
