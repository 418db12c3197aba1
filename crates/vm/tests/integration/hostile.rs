//! What a hostile command does to the machine: each ends with a clear answer and a machine
//! that still works (restored when it had to be).

use std::time::Duration;

use wasmsand_vm::{RunEnd, RunRequest, VmError};

use crate::common::{machine, ok, run_req, sh};

#[test]
fn a_full_disk_is_the_guests_problem() {
    let Some(m) = machine() else { return };
    // Most of the space taken at once, the rest written until the disk refuses.
    let r = sh(
        &m,
        "fallocate -l $(( $(df --output=avail -B1 / | tail -n 1) - (32 << 20) )) /fill0 && \
         dd if=/dev/zero of=/fill bs=1M status=none; echo \"dd: $?\"; df --output=avail -B1 / | tail -n 1",
        600,
    );
    assert_eq!(r.outcome.end, RunEnd::Exited, "{}", r.stderr);
    assert!(r.stdout.starts_with("dd: 1\n"), "{}", r.stdout);
    assert!(r.stderr.contains("No space left on device"), "{}", r.stderr);
    let avail: u64 = r.stdout.lines().nth(1).unwrap().trim().parse().unwrap();
    assert!(avail < 16 << 20, "{avail} bytes still free");
    match m.write_file("/root/more", &vec![1u8; 32 << 20], 0o644) {
        Err(VmError::Guest { errno, .. }) => assert_eq!(errno.as_deref(), Some("ENOSPC")),
        other => panic!("{other:?}"),
    }
    assert_eq!(ok(&m, "echo still here"), "still here\n");
    m.reset().unwrap();
    assert_eq!(
        ok(&m, "test -e /fill0 || test -e /fill || echo gone"),
        "gone\n"
    );
}

#[test]
fn a_fork_bomb_meets_the_process_limit() {
    let Some(m) = machine() else { return };
    let r = sh(&m, ":(){ :|:& };:; wait", 15);
    // It meets the process or the memory limit of the runs and ends there or at its time
    // limit; on a host so busy that the guest's kill takes longer than the host waits, the
    // machine is restored instead. Each is an answer, and the machine works after it.
    match &r.outcome.end {
        RunEnd::Exited => assert!(
            r.outcome.pids_limited || r.outcome.oom_killed,
            "{:?}",
            r.outcome
        ),
        RunEnd::TimedOut | RunEnd::Reset { .. } => {}
        RunEnd::Cancelled => panic!("{:?}", r.outcome),
    }
    // Everything it forked is gone with it.
    assert_eq!(
        ok(&m, "echo alive; ps -e --no-headers | wc -l")
            .lines()
            .next(),
        Some("alive")
    );
    let procs: usize = ok(&m, "ps -e --no-headers | wc -l").trim().parse().unwrap();
    assert!(procs < 200, "{procs} processes left");
}

#[test]
fn endless_output_is_cut_at_the_caps() {
    let Some(m) = machine() else { return };
    let mut req = RunRequest::new(
        "cat /dev/zero & yes 'an error' >&2",
        Duration::from_secs(15),
    );
    req.stdout_cap = 1 << 20;
    req.stderr_cap = 64 << 10;
    let mut out = 0usize;
    let mut err = 0usize;
    let outcome = m
        .run(&req, &mut |s, b| match s {
            wasmsand_vm::Stream::Stdout => out += b.len(),
            wasmsand_vm::Stream::Stderr => err += b.len(),
        })
        .unwrap();
    assert_eq!(outcome.end, RunEnd::TimedOut);
    assert!(
        outcome.truncated_stdout && outcome.truncated_stderr,
        "{outcome:?}"
    );
    assert_eq!((out, err), (1 << 20, 64 << 10));
    // Hundreds of megabytes from one program that ends by itself (more only takes longer:
    // an emulated guest moves about 20 MB/s through a pipe).
    let r = sh(&m, "head -c 256M /dev/zero; echo done >&2", 600);
    assert_eq!(r.outcome.exit_code, Some(0), "{:?}", r.outcome);
    assert_eq!(r.stdout.len(), 1 << 20);
    assert!(r.outcome.truncated_stdout);
    assert_eq!(r.stderr, "done\n");
    assert_eq!(ok(&m, "echo quiet"), "quiet\n");
}

#[test]
fn a_memory_hog_is_killed_and_the_agent_lives() {
    let Some(m) = machine() else { return };
    let r = sh(
        &m,
        "python3 -c 'x = []\nwhile True: x.append(bytearray(1 << 20)); x[-1][::4096] = b\"x\" * 256'",
        120,
    );
    assert!(r.outcome.oom_killed, "{:?} {}", r.outcome, r.stderr);
    assert_eq!(r.outcome.signal, Some(9));
    assert_eq!(ok(&m, "echo survived"), "survived\n");
}

#[test]
fn a_guest_that_powers_off_or_panics_is_restored() {
    let Some(m) = machine() else { return };
    m.write_file("/root/before", b"x", 0o644).unwrap();
    let r = sh(&m, "echo o >/proc/sysrq-trigger; sleep 60", 120);
    match &r.outcome.end {
        RunEnd::Reset { why } => assert!(why.contains("stopped"), "{why}"),
        other => panic!("{other:?}"),
    }
    assert_eq!(
        ok(&m, "test -e /root/before || echo pristine"),
        "pristine\n"
    );

    let r = sh(&m, "echo c >/proc/sysrq-trigger", 120);
    assert!(
        matches!(r.outcome.end, RunEnd::Reset { .. }),
        "{:?}",
        r.outcome
    );
    assert_eq!(ok(&m, "echo back"), "back\n");
    assert_eq!(m.status().resets, 2);
}

#[test]
fn a_guest_that_stops_answering_is_restored() {
    let Some(m) = machine() else { return };
    // The agent stopped (SIGSTOP cannot be ignored): nobody answers this run.
    let mut req = RunRequest::new(
        "kill -STOP $(pgrep -f /usr/lib/wasmsand/agent.py)",
        Duration::from_secs(2),
    );
    req.stdout_cap = 1024;
    let r = run_req(&m, &req);
    match &r.outcome.end {
        RunEnd::Reset { why } => assert!(why.contains("did not answer"), "{why}"),
        other => panic!("{other:?}"),
    }
    assert_eq!(ok(&m, "echo answering"), "answering\n");
    // A killed agent is started again by the guest's init; its run's answer is lost, and
    // the host restores the machine as for a silent one.
    let r = sh(
        &m,
        "kill -KILL $(pgrep -f /usr/lib/wasmsand/agent.py); sleep 1",
        2,
    );
    assert!(
        matches!(r.outcome.end, RunEnd::Reset { .. }),
        "{:?}",
        r.outcome
    );
    assert_eq!(ok(&m, "echo again"), "again\n");
}

#[test]
fn fifty_resets_in_a_row() {
    let Some(m) = machine() else { return };
    for i in 0..50 {
        if i % 10 == 0 {
            m.write_file("/root/mark", b"x", 0o644).unwrap();
        }
        m.reset().unwrap();
    }
    assert_eq!(
        ok(&m, "test -e /root/mark || echo clean; echo ok"),
        "clean\nok\n"
    );
    let st = m.status();
    assert!(st.ready);
    assert_eq!(st.resets, 50);
}
