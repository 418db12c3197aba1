//! Background processes through the crate API (`Sandbox::spawn`), with real guests: they run
//! next to later runs on the same files, take stdin, keep their output in rings, end at their
//! timeout, at `kill`, and with their sandbox.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use bytes::Bytes;
use wasmsand::{
    ErrorClass, KILLED_STATUS, Limits, ProcessError, Sandbox, SandboxError, SandboxOptions,
    SpawnOptions,
};

fn with_limits(f: impl FnOnce(&mut Limits)) -> Sandbox {
    let mut limits = Limits::default();
    f(&mut limits);
    Sandbox::new(SandboxOptions {
        limits,
        ..Default::default()
    })
}

fn sandbox() -> Sandbox {
    with_limits(|_| {})
}

fn long(timeout_ms: u64) -> SpawnOptions {
    SpawnOptions {
        timeout_ms: Some(timeout_ms),
        ..Default::default()
    }
}

const WAIT: Option<Duration> = Some(Duration::from_secs(60));

/// Lines of `path` counted by a foreground run.
fn lines(sb: &Sandbox, path: &str) -> u64 {
    let r = sb.run(&format!("wc -l < {path}")).unwrap();
    assert_eq!(r.exit_code, 0, "{r:?}");
    r.stdout.trim().parse().unwrap()
}

#[test]
fn a_process_outlives_three_later_runs_on_the_same_files() {
    let sb = sandbox();
    let p = sb
        .spawn(
            "while [ ! -e /tmp/stop ]; do echo tick >> /tmp/log; sleep 0.02; done; echo stopped",
            long(60_000),
        )
        .unwrap();
    assert_eq!(p.pid(), 1);
    let mut seen = 0;
    for run in 0..3 {
        // Each run sees more lines than the last: the loop goes on between and during runs.
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            let n = if sb.run("test -e /tmp/log").unwrap().exit_code == 0 {
                lines(&sb, "/tmp/log")
            } else {
                0
            };
            if n > seen {
                seen = n;
                break;
            }
            assert!(
                Instant::now() < deadline,
                "run {run}: the log stopped at {n}"
            );
            std::thread::sleep(Duration::from_millis(20));
        }
        assert!(p.is_running(), "run {run} waited for the process");
    }
    sb.run("touch /tmp/stop").unwrap();
    let r = p.wait(WAIT).unwrap();
    assert_eq!(r.exit_code, 0, "{r:?}");
    assert_eq!(r.stdout, "stopped\n");
    assert_eq!(r.error_class, None);
    let info = &sb.processes().unwrap()[0];
    assert_eq!(
        (info.pid, info.running, info.exit_code),
        (1, false, Some(0))
    );
}

#[test]
fn a_process_gets_env_and_cwd_and_leaves_the_session_as_it_was() {
    let sb = sandbox();
    sb.run("mkdir sub; export KEEP=1").unwrap();
    let p = sb
        .spawn(
            "echo $KEEP $EXTRA; pwd; cd /tmp; export KEEP=2",
            SpawnOptions {
                env: vec![("EXTRA".into(), "x y".into())],
                cwd: Some("sub".into()),
                ..Default::default()
            },
        )
        .unwrap();
    let r = p.wait(WAIT).unwrap();
    assert_eq!(r.stdout, "1 x y\n/home/user/sub\n");
    let r = sb.run("pwd; echo $KEEP $EXTRA").unwrap();
    assert_eq!(r.stdout, "/home/user\n1\n");
    let e = sb
        .spawn(
            "true",
            SpawnOptions {
                cwd: Some("/nope".into()),
                ..Default::default()
            },
        )
        .unwrap_err();
    assert!(e.errno().is_some(), "{e}");
    let e = sb
        .spawn(
            "true",
            SpawnOptions {
                env: vec![("1BAD".into(), "v".into())],
                ..Default::default()
            },
        )
        .unwrap_err();
    assert!(matches!(e, SandboxError::Invalid(_)), "{e}");
}

#[test]
fn stdin_reaches_python_and_close_gives_end_of_file() {
    let sb = sandbox();
    let p = sb
        .spawn("python3 -c 'print(input().upper())'; cat", long(120_000))
        .unwrap();
    assert_eq!(p.write_stdin(b"hello\n").unwrap(), 6);
    // Python reads stdin in blocks: the next line is sent once it has answered, as an
    // interactive client would.
    let deadline = Instant::now() + Duration::from_secs(60);
    while p.output(0, 0)[0].data != b"HELLO\n" {
        assert!(Instant::now() < deadline, "no answer: {:?}", p.output(0, 0));
        std::thread::sleep(Duration::from_millis(10));
    }
    assert_eq!(p.write_stdin(b"rest").unwrap(), 4);
    // `cat` ends only at end of file.
    assert!(matches!(
        p.wait(Some(Duration::from_millis(300))),
        Err(ProcessError::WaitTimeout(1))
    ));
    p.close_stdin().unwrap();
    let r = p.wait(WAIT).unwrap();
    assert_eq!(r.stdout, "HELLO\nrest", "{r:?}");
    assert_eq!(r.exit_code, 0);
    p.close_stdin().unwrap();
    assert!(matches!(
        p.write_stdin(b"late"),
        Err(ProcessError::NotRunning(1))
    ));
}

#[test]
fn initial_stdin_and_closed_stdin() {
    let sb = sandbox();
    let p = sb
        .spawn(
            "tr a-z A-Z",
            SpawnOptions {
                stdin: Some(Bytes::from_static(b"abc\n")),
                close_stdin: true,
                ..Default::default()
            },
        )
        .unwrap();
    let r = p.wait(WAIT).unwrap();
    assert_eq!(r.stdout, "ABC\n");
    let p = sb.spawn("read x; echo $x; sleep 5", long(60_000)).unwrap();
    p.write_stdin(b"one\n").unwrap();
    p.close_stdin().unwrap();
    assert!(matches!(
        p.write_stdin(b"x"),
        Err(ProcessError::StdinClosed(2))
    ));
    assert!(matches!(p.close_stdin(), Err(ProcessError::StdinClosed(2))));
    assert!(p.kill());
}

#[test]
fn kill_ends_a_cpu_loop_promptly_and_the_sandbox_stays_usable() {
    let sb = sandbox();
    let p = sb.spawn("while :; do :; done", long(600_000)).unwrap();
    std::thread::sleep(Duration::from_millis(100));
    assert!(p.is_running());
    assert!(p.kill());
    let r = p.wait(Some(Duration::from_secs(10))).unwrap();
    assert_eq!(r.exit_code, KILLED_STATUS);
    assert_eq!(r.error_class, Some(ErrorClass::Cancelled));
    assert!(!p.kill(), "a second kill finds it ended");
    let g = sb.spawn("sleep 600", long(600_000)).unwrap();
    assert!(g.kill());
    assert_eq!(
        g.wait(Some(Duration::from_secs(10))).unwrap().exit_code,
        137
    );
    assert_eq!(sb.run("echo still here").unwrap().stdout, "still here\n");
}

#[test]
fn a_process_ends_at_its_own_timeout() {
    let sb = sandbox();
    let p = sb.spawn("while :; do :; done", long(200)).unwrap();
    let r = p.wait(Some(Duration::from_secs(20))).unwrap();
    assert_eq!(r.exit_code, 124);
    assert_eq!(r.error_class, Some(ErrorClass::Timeout));
    assert!(r.stderr.ends_with("command timed out\n"), "{r:?}");
    assert_eq!(r.usage.limits_hit, vec!["timeoutMs".to_string()]);
    // The default is the sandbox's timeout.
    let sb = with_limits(|l| l.timeout_ms = 150);
    let r = sb
        .spawn("sleep 30", SpawnOptions::default())
        .unwrap()
        .wait(Some(Duration::from_secs(20)))
        .unwrap();
    assert_eq!(r.error_class, Some(ErrorClass::Timeout));
}

#[test]
fn output_rings_keep_the_latest_bytes_by_offset() {
    let sb = with_limits(|l| {
        l.stdout_bytes = 1000;
        l.stderr_bytes = 100;
    });
    let streamed = Arc::new(AtomicU64::new(0));
    let s = streamed.clone();
    let p = sb
        .spawn(
            "yes 0123456789 | head -c 5000; echo err >&2",
            SpawnOptions {
                on_stdout: Some(Arc::new(move |c: &[u8]| {
                    s.fetch_add(c.len() as u64, Ordering::SeqCst);
                })),
                ..Default::default()
            },
        )
        .unwrap();
    let r = p.wait(WAIT).unwrap();
    // The callback saw the whole flood; the ring kept the last 1000 bytes.
    assert_eq!(streamed.load(Ordering::SeqCst), 5000);
    assert_eq!(r.stdout.len(), 1000);
    assert!(r.truncated.is_some_and(|t| t.stdout && !t.stderr), "{r:?}");
    assert_eq!(r.stderr, "err\n");
    let [out, err] = p.output(0, 0);
    assert_eq!(
        (out.data.len(), out.next_offset, out.dropped),
        (1000, 5000, 4000)
    );
    assert_eq!(out.data, r.stdout.as_bytes());
    assert_eq!(
        (err.data, err.next_offset, err.dropped),
        (b"err\n".to_vec(), 4, 0)
    );
    let [out, err] = p.output(4500, 4);
    assert_eq!((out.data.len(), out.dropped), (500, 0));
    assert_eq!(&out.data[..], &r.stdout.as_bytes()[500..]);
    assert!(err.data.is_empty());
    let [out, _] = p.output(99_999, 0);
    assert_eq!((out.data.len(), out.next_offset), (0, 5000));
}

#[test]
fn live_processes_are_limited_per_sandbox() {
    let sb = with_limits(|l| l.background_processes = 2);
    let a = sb.spawn("read x", long(60_000)).unwrap();
    let _b = sb.spawn("read x", long(60_000)).unwrap();
    let e = sb.spawn("true", long(60_000)).unwrap_err();
    assert!(
        matches!(e, SandboxError::Process(ProcessError::LimitExceeded(2))),
        "{e}"
    );
    assert_eq!(
        e.to_string(),
        "too many background processes (limit: 2 alive at once)"
    );
    a.close_stdin().unwrap();
    a.wait(WAIT).unwrap();
    // An ended process frees its place; pids are never reused.
    let c = sb.spawn("echo c", long(60_000)).unwrap();
    assert_eq!(c.pid(), 3);
    assert_eq!(c.wait(WAIT).unwrap().stdout, "c\n");
}

#[test]
fn destroy_ends_processes_and_a_fork_does_not_inherit_them() {
    let sb = sandbox();
    let p = sb.spawn("while :; do :; done", long(600_000)).unwrap();
    let child = sb.fork().unwrap();
    assert!(child.processes().unwrap().is_empty());
    assert!(matches!(
        child.process(1),
        Err(SandboxError::Process(ProcessError::NoSuchProcess(1)))
    ));
    // The fork's pids are its own.
    let q = child.spawn("echo fork", long(60_000)).unwrap();
    assert_eq!(q.pid(), 1);
    assert_eq!(q.wait(WAIT).unwrap().stdout, "fork\n");
    assert!(p.is_running(), "the fork's process is not the parent's");
    sb.destroy();
    let r = p.wait(Some(Duration::from_secs(10))).unwrap();
    assert_eq!(r.exit_code, KILLED_STATUS);
    assert!(matches!(sb.processes(), Err(SandboxError::Destroyed)));
    assert!(matches!(
        sb.spawn("true", SpawnOptions::default()),
        Err(SandboxError::Destroyed)
    ));
    // Dropping a sandbox ends its processes too.
    let q = child.spawn("while :; do :; done", long(600_000)).unwrap();
    drop(child);
    assert_eq!(
        q.wait(Some(Duration::from_secs(10))).unwrap().exit_code,
        KILLED_STATUS
    );
}

#[test]
fn unknown_pids_are_refused() {
    let sb = sandbox();
    let e = sb.process(42).unwrap_err();
    assert!(matches!(
        e,
        SandboxError::Process(ProcessError::NoSuchProcess(42))
    ));
    assert_eq!(e.to_string(), "no such process: 42");
}

#[test]
fn a_write_then_close_may_race_the_end_of_the_process() {
    // The process ends as soon as it has read the line: closing its stdin then is no error.
    for i in 0..10 {
        let sb = sandbox();
        let p = sb
            .spawn(
                "for i in 1 2 3; do echo line$i; echo e$i >&2; done; \
                 while [ ! -e /tmp/go ]; do sleep 0.01; done; read x; echo got $x",
                long(120_000),
            )
            .unwrap();
        for n in 0..3 {
            sb.run(&format!("echo run{n} >> /tmp/runs")).unwrap();
        }
        sb.run("touch /tmp/go").unwrap();
        if let Err(e) = p.write_stdin(b"z\n") {
            let r = p.wait(WAIT).unwrap();
            panic!("iteration {i}: {e}: {r:?}");
        }
        p.close_stdin().unwrap();
        assert_eq!(p.wait(WAIT).unwrap().exit_code, 0);
    }
}

#[test]
fn nohup_and_disown_keep_a_job_after_its_run_as_a_background_process() {
    let sb = sandbox();
    // `nohup cmd &` in a run: the run ends at once; the job goes on as a process of the
    // sandbox, with the variables and functions the run had at the `&`.
    let r = sb
        .run(
            "n=7; tick() { echo \"tick $n\" >> /tmp/log; }
             nohup sh -c 'true' >/dev/null
             nohup bash -c 'while [ ! -e /tmp/stop ]; do sleep 0.02; done; echo stopped' > /tmp/out 2>&1 &
             echo \"pid $!\"; jobs",
        )
        .unwrap();
    assert_eq!(r.exit_code, 0, "{r:?}");
    let pid: u32 = r.stdout.lines().next().unwrap()["pid ".len()..]
        .parse()
        .unwrap();
    assert!(r.stdout.contains("Running"), "{r:?}");
    let procs = sb.processes().unwrap();
    assert!(procs.iter().any(|p| p.pid == pid && p.running), "{procs:?}");
    // `cmd & disown` too, and the job sees the run's state.
    let r = sb
        .run("m=5; f() { echo \"m=$m\" > /tmp/f; }; f & disown; echo \"pid $!\"")
        .unwrap();
    let pid2: u32 = r.stdout.trim()["pid ".len()..].parse().unwrap();
    sb.process(pid2).unwrap().wait(WAIT).unwrap();
    assert_eq!(&sb.read_file("/tmp/f").unwrap()[..], b"m=5\n");
    // Later runs go on; the first job is still there until told to stop.
    for _ in 0..3 {
        assert_eq!(sb.run("true").unwrap().exit_code, 0);
    }
    assert!(sb.process(pid).unwrap().is_running());
    sb.run("touch /tmp/stop").unwrap();
    let done = sb.process(pid).unwrap().wait(WAIT).unwrap();
    assert_eq!(done.exit_code, 0, "{done:?}");
    assert_eq!(&sb.read_file("/tmp/out").unwrap()[..], b"stopped\n");
}

#[test]
fn a_kept_job_is_bounded_killable_and_waited_for_from_its_run() {
    let sb = with_limits(|l| l.background_processes = 1);
    // `wait` and `kill` in the run reach the kept job through the job table.
    let r = sb
        .run("nohup sleep 30 & kill %1; wait %1; echo \"status $?\"; jobs; echo left")
        .unwrap();
    assert_eq!(r.stdout, format!("status {KILLED_STATUS}\nleft\n"), "{r:?}");
    // Past the sandbox's limit on live processes the shell says why, and the run goes on.
    let r = sb
        .run("nohup sleep 30 & nohup sleep 30 & echo after; kill %1")
        .unwrap();
    assert_eq!(r.stdout, "after\n", "{r:?}");
    assert!(r.stderr.contains("too many background processes"), "{r:?}");
    // A job that loops forever ends at the sandbox's timeout, not with the run.
    let sb = with_limits(|l| l.timeout_ms = 300);
    let r = sb.run("nohup bash -c 'while :; do :; done' &").unwrap();
    assert_eq!(r.exit_code, 0, "{r:?}");
    let p = &sb.processes().unwrap()[0];
    let done = sb.process(p.pid).unwrap().wait(WAIT).unwrap();
    assert_eq!(done.error_class, Some(ErrorClass::Timeout), "{done:?}");
}
