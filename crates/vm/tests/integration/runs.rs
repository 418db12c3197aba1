//! Commands: output, exit codes, stdin, time limits, cancel, and what a restore gives each
//! machine of its own.

use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use wasmsand_vm::{Accel, Cancel, RunEnd, RunRequest};

use crate::common::{machine, ok, run_req, sh};

#[test]
fn output_exit_codes_and_the_shell() {
    let Some(m) = machine() else { return };
    let r = sh(&m, "echo out; echo err >&2; exit 3", 30);
    assert_eq!(r.outcome.end, RunEnd::Exited);
    assert_eq!(r.outcome.exit_code, Some(3));
    assert_eq!(r.stdout, "out\n");
    assert_eq!(r.stderr, "err\n");

    // bash -c as usual: $0, no positional parameters, bash's own messages, a fresh shell
    // each time (state does not carry over: each command is its own process).
    let r = sh(
        &m,
        "echo \"$0 $# ${BASH_VERSION%%.*}\"; x=1; no-such-command",
        30,
    );
    assert_eq!(r.stdout, "bash 0 5\n");
    assert_eq!(r.outcome.exit_code, Some(127));
    assert!(
        r.stderr
            .contains("bash: line 1: no-such-command: command not found"),
        "{}",
        r.stderr
    );
    assert_eq!(
        ok(&m, "echo \"[${x-unset}]\"; pwd; id -u"),
        "[unset]\n/root\n0\n"
    );

    // Killed by a signal: 128 + the signal, as bash reports it.
    let r = sh(&m, "kill -KILL $$", 30);
    assert_eq!(r.outcome.exit_code, Some(137));
    assert_eq!(r.outcome.signal, Some(9));

    // A long command line goes through a file instead of the pipe: same result.
    let long = format!("x='{}'; echo ${{#x}}", "y".repeat(100_000));
    assert_eq!(ok(&m, &long), "100000\n");
    let syntax = sh(&m, "echo a; if", 30);
    assert_eq!(syntax.outcome.exit_code, Some(2));
    assert!(syntax.stderr.contains("syntax error"), "{}", syntax.stderr);
}

#[test]
fn stdin_cwd_and_environment() {
    let Some(m) = machine() else { return };
    let mut req = RunRequest::new("wc -c; cat /dev/stdin", Duration::from_secs(30));
    req.stdin = b"";
    assert_eq!(run_req(&m, &req).stdout, "0\n");
    let data: Vec<u8> = (0..200_000u32).map(|i| (i % 251) as u8).collect();
    let mut req = RunRequest::new("sha256sum | cut -d' ' -f1", Duration::from_secs(30));
    req.stdin = &data;
    let want = {
        use std::io::Write;
        let mut c = crate::host_tools::host_tool("sha256sum")
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        c.stdin.take().unwrap().write_all(&data).unwrap();
        let out = c.wait_with_output().unwrap();
        String::from_utf8(out.stdout).unwrap()
    };
    assert_eq!(
        run_req(&m, &req).stdout.trim(),
        want.split_whitespace().next().unwrap()
    );

    let mut req = RunRequest::new("pwd; echo \"$GREETING\"", Duration::from_secs(30));
    req.cwd = Some("/tmp");
    let env = vec![
        ("GREETING".to_string(), "hello".to_string()),
        ("PATH".to_string(), "/usr/bin:/bin".to_string()),
    ];
    req.env = Some(&env);
    assert_eq!(run_req(&m, &req).stdout, "/tmp\nhello\n");
    let mut req = RunRequest::new("pwd", Duration::from_secs(30));
    req.cwd = Some("/nowhere");
    let r = run_req(&m, &req);
    assert_eq!(r.outcome.exit_code, Some(1), "{}", r.stderr);
}

#[test]
fn a_command_past_its_limit_is_killed_with_everything_it_started() {
    let Some(m) = machine() else { return };
    let started = Instant::now();
    // A background job that left the session, and one that ignores TERM: the run's cgroup
    // takes them all.
    let r = sh(
        &m,
        "setsid sleep 300 & (trap '' TERM; sleep 300) & echo started; sleep 300",
        2,
    );
    assert_eq!(r.outcome.end, RunEnd::TimedOut);
    assert_eq!(r.outcome.exit_code, None);
    assert_eq!(r.stdout, "started\n");
    assert!(started.elapsed() < Duration::from_secs(60));
    // Nothing of it is left, and the machine answers.
    assert_eq!(ok(&m, "pgrep -c -x sleep || true"), "0\n");

    // A loop of builtins, which never leaves the shell.
    let r = sh(&m, "while :; do :; done", 1);
    assert_eq!(r.outcome.end, RunEnd::TimedOut);
    assert_eq!(ok(&m, "echo alive"), "alive\n");

    // A run that ended by itself keeps what it started in the background, as a machine
    // would (a server started for the next command).
    ok(&m, "nohup sleep 300 >/dev/null 2>&1 &");
    assert_eq!(ok(&m, "pgrep -c -x sleep"), "1\n");
}

#[test]
fn a_run_ends_when_its_shell_and_its_output_both_have() {
    let Some(m) = machine() else { return };
    // The shell ends first; a child still holding stdout keeps the run going until it
    // closes it, and what it prints then is the run's.
    let started = Instant::now();
    let r = sh(&m, "(sleep 1; echo late) & echo early", 30);
    assert_eq!(r.outcome.end, RunEnd::Exited);
    assert_eq!(r.stdout, "early\nlate\n");
    assert!(started.elapsed() >= Duration::from_secs(1));

    // The output closes first; the run ends when the shell does, with its status.
    let r = sh(&m, "echo bye; exec >&- 2>&-; sleep 1; exit 4", 30);
    assert_eq!(
        (r.outcome.end, r.outcome.exit_code),
        (RunEnd::Exited, Some(4))
    );
    assert_eq!(r.stdout, "bye\n");

    // ... and a shell that never ends with its output closed still meets its deadline.
    let r = sh(&m, "exec >&- 2>&-; sleep 300", 2);
    assert_eq!(r.outcome.end, RunEnd::TimedOut);
    assert_eq!(ok(&m, "echo alive"), "alive\n");
}

#[test]
fn address_randomization_is_off_only_where_it_costs_translations() {
    let Some(m) = machine() else { return };
    let setting = ok(&m, "cat /proc/sys/kernel/randomize_va_space");
    // Where one program's code is mapped in two processes of their own.
    let base = "cat /proc/self/maps | head -n1 | cut -d- -f1";
    let (a, b) = (ok(&m, base), ok(&m, base));
    match m.accel() {
        Accel::Tcg => {
            assert_eq!(setting, "0\n");
            assert_eq!(a, b, "same addresses in every process under TCG");
        }
        Accel::Kvm => {
            assert_eq!(setting, "2\n");
            assert_ne!(a, b, "randomized addresses under KVM");
        }
    }
}

#[test]
fn a_cancelled_run_ends_and_the_machine_stays() {
    let Some(m) = machine() else { return };
    let cancel = Cancel::new();
    let c = cancel.clone();
    let t = std::thread::spawn(move || {
        std::thread::sleep(Duration::from_secs(2));
        c.cancel();
    });
    let mut req = RunRequest::new("echo before; sleep 300", Duration::from_secs(600));
    req.cancel = Some(&cancel);
    let r = run_req(&m, &req);
    t.join().unwrap();
    assert_eq!(r.outcome.end, RunEnd::Cancelled);
    assert_eq!(r.stdout, "before\n");
    assert_eq!(ok(&m, "echo after"), "after\n");
}

#[test]
fn each_restore_gets_its_own_randomness_and_the_current_time() {
    let Some(a) = machine() else { return };
    let b = machine().unwrap();
    let cmd = "od -An -N16 -tx1 /dev/urandom | tr -d ' \\n'; echo; python3 -c 'import random; print(random.random())'";
    let ra = ok(&a, cmd);
    let rb = ok(&b, cmd);
    assert_ne!(
        ra, rb,
        "two restores of one saved machine drew the same numbers"
    );
    a.reset().unwrap();
    assert_ne!(ok(&a, cmd), ra);

    let host = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_secs() as i64;
    let guest: i64 = ok(&a, "date +%s").trim().parse().unwrap();
    assert!(
        (guest - host).abs() < 30,
        "guest clock {guest}, host {host}"
    );
}

#[test]
fn status_reports_the_guest() {
    let Some(m) = machine() else { return };
    let st = m.status();
    assert!(st.ready);
    assert_eq!(st.memory_limit_bytes, 128 << 20);
    assert!(
        st.memory_used_bytes > 4 << 20 && st.memory_used_bytes < st.memory_limit_bytes,
        "{st:?}"
    );
    assert_eq!(st.accel, m.accel());
    let report = m.report();
    assert_eq!(report.accel, m.accel());
    assert!(!report.accel_note.is_empty());
    // A hog's memory is the guest's, and status sees it.
    let before = m.status().memory_used_bytes;
    ok(
        &m,
        "python3 -c 'import time; b = b\"x\" * (40 << 20); open(\"/tmp/ready\", \"w\").close(); time.sleep(300)' >/dev/null 2>&1 & \
         while [ ! -e /tmp/ready ]; do sleep 0.1; done",
    );
    let during = m.status().memory_used_bytes;
    assert!(
        during > before + (30 << 20),
        "before {before}, during {during}"
    );
}

#[test]
fn a_terminate_reaches_the_run_s_traps_before_the_cancel() {
    let Some(m) = machine() else { return };
    let cancel = Cancel::new();
    let mut req = RunRequest::new(
        "trap 'echo got TERM; exit 7' TERM; echo ready; sleep 60 & wait",
        Duration::from_secs(60),
    );
    req.cancel = Some(&cancel);
    let c = cancel.clone();
    let mut out = Vec::new();
    let outcome = m
        .run(&req, &mut |_, b| {
            out.extend_from_slice(b);
            if out.ends_with(b"ready\n") {
                c.terminate();
            }
            // The trap ran; the kill after the grace ends what is left.
            if out.ends_with(b"got TERM\n") {
                c.cancel();
            }
        })
        .unwrap();
    assert_eq!(String::from_utf8_lossy(&out), "ready\ngot TERM\n");
    assert_ne!(outcome.end, RunEnd::TimedOut, "{outcome:?}");
    assert_eq!(ok(&m, "echo next"), "next\n");
}
