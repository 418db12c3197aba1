//! The hard limits, with the dedicated test guests of wasm-tools/: a spinning guest stopped by a
//! deadline, an allocating guest under a memory cap, a flooding guest against an output cap,
//! and programs blocked on pipes or sleeping.

use crate::common;

use std::sync::Arc;
use std::thread;
use std::time::{Duration, Instant};

use common::*;
use wasmsand_exec::{CancelToken, Exit, Input, Output, OutputBuffer, RunSpec, pipe};

fn spec(argv: &[&str]) -> RunSpec {
    RunSpec::new(vfs(), argv.iter().copied())
}

// Threat: T-EXHAUST-CPU (docs/security.md)
#[test]
fn spinning_guest_is_stopped_by_its_deadline_and_the_next_run_works() {
    let vfs = vfs();
    let mut s = RunSpec::new(vfs.clone(), ["spin"]);
    s.deadline = Some(Instant::now() + Duration::from_millis(200));
    let started = Instant::now();
    let out = exec().run(&program("spin"), s).unwrap();
    assert_eq!(out.exit, Exit::TimedOut);
    assert_eq!(out.exit.status(), 124);
    assert!(
        started.elapsed() < Duration::from_secs(2),
        "stopped promptly: {:?}",
        started.elapsed()
    );
    let next = run(&vfs, &["seq", "2"], b"");
    assert_eq!(next.exit, Exit::Code(0));
    assert_eq!(next.stdout, "1\n2\n");
}

#[test]
fn initial_memory_over_the_cap_fails_cleanly() {
    let mut s = spec(&["true"]);
    s.memory_limit = Some(64 * 1024); // one page: less than any program starts with
    let out = exec().run(&program("true"), s).unwrap();
    assert!(matches!(out.exit, Exit::OutOfMemory(_)), "{:?}", out.exit);
}

#[test]
fn yes_blocked_on_a_full_pipe_nobody_reads_is_stopped_at_the_deadline() {
    let cancel = CancelToken::new();
    let (w, r) = pipe(4096, &cancel);
    let mut s = spec(&["yes"]);
    s.stdout = w.into();
    s.cancel = cancel.clone();
    s.deadline = Some(Instant::now() + Duration::from_millis(300));
    let out = exec().run(&program("yes"), s).unwrap();
    assert_eq!(out.exit, Exit::TimedOut);
    assert!(
        cancel.is_cancelled(),
        "the deadline cancels the run's token"
    );
    drop(r);
}

#[test]
fn yes_ends_when_its_reader_goes_away() {
    let cancel = CancelToken::new();
    let (w, r) = pipe(4096, &cancel);
    let reader = thread::spawn(move || {
        let mut buf = [0u8; 10];
        let mut got = Vec::new();
        while got.len() < 10 {
            let n = r.read(&mut buf[..10 - got.len()]).unwrap();
            got.extend_from_slice(&buf[..n]);
        }
        got // the reader is dropped here: `yes` gets EPIPE
    });
    let err = OutputBuffer::new(4096);
    let mut s = spec(&["yes"]);
    s.stdout = w.into();
    s.stderr = err.clone().into();
    s.deadline = Some(Instant::now() + Duration::from_secs(20));
    let out = exec().run(&program("yes"), s).unwrap();
    assert_eq!(reader.join().unwrap(), b"y\ny\ny\ny\ny\n");
    assert_eq!(
        out.exit,
        Exit::Code(141),
        "EPIPE ended it, reported as SIGPIPE would be"
    );
    // As under SIGPIPE, the guest ended at the write and said nothing about it.
    assert_eq!(err.snapshot().to_text().text, "");
}

#[test]
fn head_closes_its_input_and_the_writer_stops() {
    // `yes | head -3`: both stages run concurrently over a bounded pipe.
    let vfs = vfs();
    let cancel = CancelToken::new();
    let (w, r) = pipe(64 * 1024, &cancel);
    let head_out = OutputBuffer::new(4096);
    let mut head = RunSpec::new(vfs.clone(), ["head", "-3"]);
    head.stdin = Input::Pipe(r);
    head.stdout = head_out.clone().into();
    head.cancel = cancel.clone();
    head.deadline = Some(Instant::now() + Duration::from_secs(20));
    let mut yes = RunSpec::new(vfs, ["yes"]);
    yes.stdout = w.into();
    yes.cancel = cancel.clone();
    yes.deadline = head.deadline;
    let yes_prog = program("yes");
    let producer = thread::spawn(move || exec().run(&yes_prog, yes).unwrap());
    let out = exec().run(&program("head"), head).unwrap();
    let producer = producer.join().unwrap();
    assert_eq!(out.exit, Exit::Code(0));
    assert_eq!(head_out.snapshot().to_text().text, "y\ny\ny\n");
    assert_eq!(producer.exit, Exit::Code(141), "yes met the closed pipe");
}

#[test]
fn sleeping_guest_is_woken_by_the_deadline() {
    let mut s = spec(&["sleep", "30"]);
    s.deadline = Some(Instant::now() + Duration::from_millis(200));
    let started = Instant::now();
    let out = exec().run(&program("sleep"), s).unwrap();
    assert_eq!(out.exit, Exit::TimedOut);
    assert!(
        started.elapsed() < Duration::from_secs(3),
        "{:?}",
        started.elapsed()
    );
}

#[test]
fn reader_blocked_on_stdin_is_woken_by_the_deadline() {
    let cancel = CancelToken::new();
    let (_w, r) = pipe(16, &cancel);
    let mut s = spec(&["cat"]);
    s.stdin = Input::Pipe(r);
    s.cancel = cancel;
    s.deadline = Some(Instant::now() + Duration::from_millis(200));
    let out = exec().run(&program("cat"), s).unwrap();
    assert_eq!(out.exit, Exit::TimedOut);
}

#[test]
fn cancelling_from_another_thread_stops_the_run() {
    let cancel = CancelToken::new();
    let mut s = spec(&["spin"]);
    s.cancel = cancel.clone();
    let c = cancel.clone();
    let t = thread::spawn(move || {
        thread::sleep(Duration::from_millis(150));
        c.cancel();
    });
    let out = exec().run(&program("spin"), s).unwrap();
    t.join().unwrap();
    assert_eq!(out.exit, Exit::Cancelled);
}

// Threat: T-EXHAUST-OUTPUT (docs/security.md)
#[test]
fn output_cap_applies_while_running_with_streaming() {
    let chunks = Arc::new(parking_lot::Mutex::new(0usize));
    let c2 = chunks.clone();
    let buf = OutputBuffer::new(1000).with_callback(Arc::new(move |c: &[u8]| {
        *c2.lock() += c.len();
    }));
    let mut s = spec(&["seq", "100000"]);
    s.stdout = Output::Buffer(buf.clone());
    let out = exec().run(&program("seq"), s).unwrap();
    assert_eq!(out.exit, Exit::Code(0));
    assert_eq!(*chunks.lock(), 1000, "streamed exactly what was kept");
    assert!(buf.snapshot().truncated());
}

// Threat: T-EXHAUST-CPU (docs/security.md)
#[test]
fn deadline_lands_safely_while_a_guest_makes_syscalls_nonstop() {
    // `cat /dev/zero > /dev/null` spends its time in wrapped WASI calls that call back into
    // the instance; stopping it must never catch it inside one (see `RunGuard`).
    for _ in 0..40 {
        let vfs = vfs();
        let mut s = RunSpec::new(vfs.clone(), ["cat", "/dev/zero"]);
        s.deadline = Some(Instant::now() + Duration::from_millis(15));
        let out = exec().run(&program("cat"), s).unwrap();
        assert_eq!(out.exit, Exit::TimedOut);
        assert_eq!(run(&vfs, &["true"], b"").exit, Exit::Code(0));
    }
}
