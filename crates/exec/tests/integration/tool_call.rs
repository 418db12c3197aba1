//! The tool-call channel (`host.call`): requests reach the handler, answers come back into guest memory, and
//! calls past the run's budget get the handler's over-budget answer instead.

use crate::common;

use std::sync::Arc;

use common::*;
use parking_lot::Mutex;
use wasmsand_exec::{
    CancelToken, Exit, OutputBuffer, RunSpec, ToolCallFault, ToolCallHandler, ToolChannel,
};

/// Calls the channel `n` times with "ping", printing each answer and the return code.
fn calling_guest(n: u32) -> wasmsand_exec::Program {
    let wat = format!(
        r#"(module
          (import "wasi_snapshot_preview1" "fd_write"
            (func $fd_write (param i32 i32 i32 i32) (result i32)))
          (import "host" "call" (func $call (param i32 i32 i32 i32) (result i32)))
          (memory (export "memory") 1)
          (global $heap (mut i32) (i32.const 4096))
          (data (i32.const 0) "ping")
          (func (export "host_alloc") (param $n i32) (result i32)
            (local $p i32)
            (local.set $p (global.get $heap))
            (global.set $heap (i32.add (global.get $heap) (local.get $n)))
            (local.get $p))
          (func $once
            (local $rc i32)
            (local.set $rc
              (call $call (i32.const 0) (i32.const 4) (i32.const 100) (i32.const 104)))
            (if (i32.ne (local.get $rc) (i32.const 0))
              (then
                ;; print "rc=<digit of -rc>\n"
                (i32.store8 (i32.const 300) (i32.const 114))
                (i32.store8 (i32.const 301) (i32.const 99))
                (i32.store8 (i32.const 302) (i32.const 61))
                (i32.store8 (i32.const 303) (i32.add (i32.const 48)
                  (i32.sub (i32.const 0) (local.get $rc))))
                (i32.store8 (i32.const 304) (i32.const 10))
                (i32.store (i32.const 100) (i32.const 300))
                (i32.store (i32.const 104) (i32.const 5))))
            (i32.store (i32.const 200) (i32.load (i32.const 100)))
            (i32.store (i32.const 204) (i32.load (i32.const 104)))
            (drop (call $fd_write (i32.const 1) (i32.const 200) (i32.const 1) (i32.const 208))))
          (func (export "_start")
            (local $i i32)
            (loop $again
              (call $once)
              (local.set $i (i32.add (local.get $i) (i32.const 1)))
              (br_if $again (i32.lt_u (local.get $i) (i32.const {n}))))))"#
    );
    exec().load(wat.as_bytes()).unwrap()
}

#[derive(Default)]
struct Pong {
    seen: Mutex<Vec<(Vec<u8>, u64)>>,
    fail_on: Option<u64>,
}

impl ToolCallHandler for Pong {
    fn call(&self, request: &[u8], index: u64, _: &CancelToken) -> Result<Vec<u8>, ToolCallFault> {
        self.seen.lock().push((request.to_vec(), index));
        if self.fail_on == Some(index) {
            return Err(ToolCallFault("handler failed".into()));
        }
        Ok(format!("pong {index}\n").into_bytes())
    }

    fn over_budget(&self, _request: &[u8], max: u64) -> Result<Vec<u8>, ToolCallFault> {
        Ok(format!("budget of {max} spent\n").into_bytes())
    }
}

fn run_calls(n: u32, channel: Option<ToolChannel>) -> (Exit, String, u64) {
    let out = OutputBuffer::new(4096);
    let mut spec = RunSpec::new(vfs(), ["caller"]);
    spec.stdout = out.clone().into();
    spec.tool_channel = channel;
    let r = exec().run(&calling_guest(n), spec).unwrap();
    (r.exit, out.snapshot().to_text().text, r.tool_calls)
}

#[test]
fn requests_reach_the_handler_and_answers_come_back() {
    let pong = Arc::new(Pong::default());
    let (exit, out, calls) = run_calls(2, Some(ToolChannel::new(pong.clone(), 10)));
    assert_eq!(exit, Exit::Code(0));
    assert_eq!(out, "pong 1\npong 2\n");
    assert_eq!(calls, 2);
    assert_eq!(
        *pong.seen.lock(),
        vec![(b"ping".to_vec(), 1), (b"ping".to_vec(), 2)]
    );
}

#[test]
fn calls_past_the_budget_get_the_over_budget_answer() {
    let pong = Arc::new(Pong::default());
    let (exit, out, calls) = run_calls(4, Some(ToolChannel::new(pong.clone(), 2)));
    assert_eq!(exit, Exit::Code(0), "the run ends normally");
    assert_eq!(
        out,
        "pong 1\npong 2\nbudget of 2 spent\nbudget of 2 spent\n"
    );
    assert_eq!(calls, 4);
    assert_eq!(
        pong.seen.lock().len(),
        2,
        "the handler saw only the allowed calls"
    );
}

#[test]
fn no_channel_and_handler_faults_give_the_guest_error_codes() {
    let (exit, out, _) = run_calls(1, None);
    assert_eq!(exit, Exit::Code(0));
    assert_eq!(out, "rc=1\n");
    let pong = Arc::new(Pong {
        fail_on: Some(1),
        ..Default::default()
    });
    let (_, out, _) = run_calls(2, Some(ToolChannel::new(pong, 10)));
    assert_eq!(out, "rc=2\npong 2\n");
}

#[test]
fn clones_of_a_channel_share_one_budget() {
    let pong = Arc::new(Pong::default());
    let channel = ToolChannel::new(pong.clone(), 3);
    let (_, first, calls) = run_calls(2, Some(channel.clone()));
    assert_eq!((first.as_str(), calls), ("pong 1\npong 2\n", 2));
    let (_, second, calls) = run_calls(2, Some(channel.clone()));
    assert_eq!(second, "pong 3\nbudget of 3 spent\n");
    assert_eq!(calls, 2, "per program");
    assert_eq!(channel.calls_used(), 4, "across the budget");
}
