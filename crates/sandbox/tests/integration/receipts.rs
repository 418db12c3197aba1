//! The resource receipt (`usage`, docs/runs.md) of every run, and atomic runs that put the
//! whole sandbox back when they fail — through real guest programs.

use wasmsand::{ErrorClass, Limits, RunOptions, Sandbox, SandboxOptions};

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

fn atomic(sb: &Sandbox, cmd: &str) -> wasmsand::RunResult {
    sb.run_with(
        cmd,
        RunOptions {
            atomic: true,
            ..Default::default()
        },
    )
    .unwrap()
}

// ---- usage ----

#[test]
fn a_pipeline_reports_its_programs_cpu_memory_and_processes() {
    let sb = sandbox();
    let r = sb.run("echo hello | wc -c").unwrap();
    assert_eq!(r.stdout, "6\n");
    let u = &r.usage;
    assert!(u.processes >= 2, "{u:?}");
    // wc is a wasm program: it has a linear memory of at least one page and used some CPU.
    assert!(u.peak_memory_bytes >= 64 * 1024, "{u:?}");
    assert_eq!(u.peak_memory_bytes % (64 * 1024), 0, "{u:?}");
    assert!(u.cpu_us > 0, "{u:?}");
    assert!(u.cpu_us <= (u.wall_ms + 1) * 1000 * 2, "{u:?}");
    assert_eq!(u.tool_calls, 0);
    assert!(u.limits_hit.is_empty(), "{u:?}");
    assert_eq!(u.wall_ms, r.execution_time_ms);
}

#[test]
fn builtins_only_use_no_guest_memory_or_cpu() {
    let r = sandbox().run("x=1; echo $x").unwrap();
    assert_eq!(r.usage.peak_memory_bytes, 0);
    assert_eq!(r.usage.cpu_us, 0);
    assert_eq!(r.usage.processes, 0);
}

#[test]
fn peak_memory_is_the_largest_program_of_the_run() {
    let sb = sandbox();
    let small = sb.run("true").unwrap().usage.peak_memory_bytes;
    // sort holds its whole input: 4 MB of lines make its memory grow well past `true`'s.
    let big = sb
        .run("seq 1 600000 > /tmp/n; sort /tmp/n | tail -1; true")
        .unwrap();
    assert_eq!(big.stdout, "99999\n");
    assert!(
        big.usage.peak_memory_bytes > small + (4 << 20),
        "{small} vs {:?}",
        big.usage
    );
}

#[test]
fn file_activity_is_counted_and_fs_usage_is_after_the_run() {
    let sb = sandbox();
    let base = sb.usage().unwrap().bytes_used;
    let r = sb
        .run("mkdir -p /tmp/d && printf 0123456789 > /tmp/d/a && echo hi > /tmp/d/b && rm /tmp/d/b")
        .unwrap();
    let u = &r.usage;
    assert_eq!(u.files_created, 3, "{u:?}");
    assert_eq!(u.files_deleted, 1, "{u:?}");
    assert_eq!(u.bytes_written, 13, "{u:?}");
    let fs = sb.usage().unwrap();
    assert_eq!((u.fs_bytes, u.fs_files), (fs.bytes_used, fs.files_used));
    assert_eq!(u.fs_bytes, base + 10);
    // The next run's receipt counts only its own changes.
    let r = sb.run("rm -r /tmp/d").unwrap();
    assert_eq!(
        (r.usage.files_created, r.usage.files_deleted),
        (0, 2),
        "{:?}",
        r.usage
    );
    assert_eq!(r.usage.fs_bytes, base);
}

#[test]
fn limits_hit_name_each_limit() {
    let sb = with_limits(|l| {
        l.stdout_bytes = 4;
        l.stderr_bytes = 4;
    });
    let r = sb.run("echo hello; echo world >&2").unwrap();
    assert_eq!(r.usage.limits_hit, ["stdoutBytes", "stderrBytes"]);

    let sb = with_limits(|l| l.fs_bytes = 100);
    let r = sb.run("head -c 1000 /dev/zero > /tmp/big").unwrap();
    assert_ne!(r.exit_code, 0);
    assert_eq!(r.usage.limits_hit, ["fsBytes"]);

    let sb = with_limits(|l| l.file_count = 2);
    let r = sb.run("touch /tmp/a /tmp/b /tmp/c").unwrap();
    assert_eq!(r.usage.limits_hit, ["fileCount"]);

    let sb = with_limits(|l| l.timeout_ms = 200);
    let r = sb.run("while :; do :; done").unwrap();
    assert_eq!(r.error_class, Some(ErrorClass::Timeout));
    assert_eq!(r.usage.limits_hit, ["timeoutMs"]);

    let sb = with_limits(|l| l.memory_bytes = 8 << 20);
    let r = sb.run("seq 1 3000000 | sort | tail -1").unwrap();
    assert!(
        r.usage.limits_hit.contains(&"memoryBytes".to_string()),
        "{r:?}"
    );
    assert!(r.usage.peak_memory_bytes <= 8 << 20, "{:?}", r.usage);

    let sb = with_limits(|l| l.command_bytes = 5);
    let r = sb.run("echo too long").unwrap();
    assert_eq!(r.usage.limits_hit, ["commandBytes"]);
    assert_eq!(r.usage.fs_bytes, sb.usage().unwrap().bytes_used);

    let r = sandbox().run("f() { f; }; f").unwrap();
    assert_eq!(r.usage.limits_hit, ["shell"]);
}

#[test]
fn the_receipt_is_on_the_wire() {
    let r = sandbox().run("echo hello | wc -c").unwrap();
    let v = serde_json::to_value(&r).unwrap();
    let u = &v["usage"];
    for key in [
        "wallMs",
        "cpuUs",
        "peakMemoryBytes",
        "processes",
        "toolCalls",
        "bytesWritten",
        "filesCreated",
        "filesDeleted",
        "fsBytes",
        "fsFiles",
    ] {
        assert!(u[key].is_u64(), "{key}: {u}");
    }
    assert!(u["limitsHit"].is_array());
    assert!(v.get("rolledBack").is_none());
}

// ---- atomic runs ----

#[test]
fn a_failed_atomic_run_puts_everything_back() {
    let sb = sandbox();
    sb.run(
        "echo keep > f; chmod 600 f; mkdir d; export A=1; g() { echo g; }; set -o pipefail; cd d",
    )
    .unwrap();
    let r = atomic(
        &sb,
        "echo changed > ../f; chmod 755 ../f; touch ../new; rm -r /home/user/d/..//d; export A=2 B=3; \
         g() { echo other; }; h() { :; }; set +o pipefail; shopt -s nullglob; cd /tmp; alias x=y; false",
    );
    assert_eq!(r.exit_code, 1);
    assert!(r.rolled_back);
    assert_eq!(sb.read_file("/home/user/f").unwrap(), "keep\n");
    assert_eq!(sb.cwd().unwrap(), "/home/user/d");
    let after = sb
        .run("stat -c %a ../f; ls ..; echo $A ${B-unset}; g; type h 2>&1 | head -1; set -o | grep pipefail; shopt nullglob; alias x 2>&1")
        .unwrap();
    let lines: Vec<&str> = after.stdout.lines().collect();
    assert_eq!(lines[..5], ["600", "d", "f", "1 unset", "g"], "{after:?}");
    assert!(lines[5].ends_with("type: h: not found"), "{after:?}");
    assert!(lines[6].starts_with("pipefail") && lines[6].ends_with("on"));
    assert!(lines[7].starts_with("nullglob") && lines[7].ends_with("off"));
    assert!(lines[8].ends_with("alias: x: not found"), "{after:?}");
}

#[test]
fn a_successful_atomic_run_keeps_its_changes() {
    let sb = sandbox();
    let r = atomic(&sb, "echo new > f; export A=1; cd /tmp");
    assert_eq!(r.exit_code, 0);
    assert!(!r.rolled_back);
    assert_eq!(sb.read_file("/home/user/f").unwrap(), "new\n");
    assert_eq!(sb.get_env("A").unwrap().as_deref(), Some("1"));
    assert_eq!(sb.cwd().unwrap(), "/tmp");
}

#[test]
fn atomic_runs_roll_back_on_timeout_limit_and_cancel() {
    let sb = with_limits(|l| {
        l.timeout_ms = 300;
        l.fs_bytes = 1000;
    });
    sb.write_file("f", b"before").unwrap();
    let r = atomic(&sb, "echo x > f; touch g; while :; do :; done");
    assert_eq!(r.error_class, Some(ErrorClass::Timeout));
    assert!(r.rolled_back);
    assert_eq!(sb.read_file("f").unwrap(), "before");
    assert!(sb.stat("g").is_err());

    // A limit inside a command the script goes past: the run still exits 0 only if the
    // last command does; here the failed write is last.
    let r = atomic(&sb, "touch h; head -c 5000 /dev/zero > big");
    assert_ne!(r.exit_code, 0);
    assert!(r.rolled_back);
    assert!(sb.stat("h").is_err());

    // Cancelled once it has printed (a cancel before the run starts would find nothing to
    // stop), after its write.
    let sb = std::sync::Arc::new(sandbox());
    let sb2 = sb.clone();
    let (tx, started) = std::sync::mpsc::channel::<()>();
    let tx = std::sync::Mutex::new(tx);
    let canceller = std::thread::spawn(move || {
        started.recv().unwrap();
        sb2.cancel();
    });
    let r = sb
        .run_with(
            "touch c; echo started; sleep 5",
            RunOptions {
                atomic: true,
                on_stdout: Some(std::sync::Arc::new(move |_: &[u8]| {
                    let _ = tx.lock().unwrap().send(());
                })),
                ..Default::default()
            },
        )
        .unwrap();
    canceller.join().unwrap();
    assert_eq!(r.error_class, Some(ErrorClass::Cancelled));
    assert!(r.rolled_back);
    assert!(sb.stat("c").is_err());
}

#[test]
fn a_non_atomic_failure_keeps_its_changes() {
    let sb = sandbox();
    let r = sb.run("touch kept; false").unwrap();
    assert_eq!(r.exit_code, 1);
    assert!(!r.rolled_back);
    assert!(sb.stat("kept").is_ok());
}

#[test]
fn atomic_rollback_does_not_disturb_snapshots() {
    let sb = sandbox();
    sb.write_file("a", b"1").unwrap();
    let snap = sb.snapshot().unwrap();
    sb.write_file("a", b"2").unwrap();
    assert!(atomic(&sb, "echo 3 > a; exit 7").rolled_back);
    assert_eq!(sb.read_file("a").unwrap(), "2");
    sb.restore(snap).unwrap();
    assert_eq!(sb.read_file("a").unwrap(), "1");
}
