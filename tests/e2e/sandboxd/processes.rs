//! Background processes over the real `sandboxd` binary and its pipes: notifications that
//! outlive the request, runs that go on meanwhile, `process.*` calls that do not queue
//! behind runs, forks, destroy, and reattaching by offsets.

use super::common;

use std::time::{Duration, Instant};

use common::Daemon;
use serde_json::{Value, json};

/// Reads messages until `process.exit` for `pid` (in `sandbox`), returning the concatenated
/// `process.output` text of each stream before it and the exit's result. Other messages are
/// kept in `others`.
fn collect_until_exit(
    d: &mut Daemon,
    pid: u64,
    sandbox: Option<&str>,
    others: &mut Vec<Value>,
) -> (String, String, Value) {
    let (mut out, mut err) = (String::new(), String::new());
    let mut pending = d.take_backlog();
    loop {
        let v = if pending.is_empty() {
            d.next_raw()
        } else {
            pending.remove(0)
        };
        let mine = v["params"]["pid"] == pid
            && v["params"].get("sandboxId").and_then(Value::as_str) == sandbox;
        match v["method"].as_str() {
            Some("process.output") if mine => match v["params"]["stream"].as_str() {
                Some("stdout") => out.push_str(v["params"]["data"].as_str().unwrap()),
                Some("stderr") => err.push_str(v["params"]["data"].as_str().unwrap()),
                s => panic!("unknown stream {s:?}"),
            },
            Some("process.exit") if mine => {
                others.extend(pending);
                return (out, err, v["params"]["result"].clone());
            }
            _ => others.push(v),
        }
    }
}

#[test]
fn notifications_outlive_the_start_and_runs_go_on_meanwhile() {
    let mut d = Daemon::start(&[]);
    let r = d.call(
        "process.start",
        json!({"command": "for i in 1 2 3; do echo line$i; echo e$i >&2; done; \
                          while [ ! -e /tmp/go ]; do sleep 0.01; done; read x; echo got $x",
               "timeoutMs": 120_000}),
    );
    assert_eq!(r["pid"], 1);
    // Three runs while it waits: answered at once, on the same files.
    for n in 0..3 {
        let r = d.call(
            "run",
            json!({"command": format!("echo run{n} >> /tmp/runs")}),
        );
        assert_eq!(r["exitCode"], 0);
    }
    let list = d.call("process.list", json!({}));
    assert_eq!(list["processes"][0]["running"], true);
    d.call("run", json!({"command": "touch /tmp/go"}));
    let w = d.call(
        "process.write",
        json!({"pid": 1, "data": "z\n", "eof": true}),
    );
    assert_eq!(w["written"], 2);
    let mut others = Vec::new();
    let (out, err, result) = collect_until_exit(&mut d, 1, None, &mut others);
    assert_eq!(out, "line1\nline2\nline3\ngot z\n");
    assert_eq!(err, "e1\ne2\ne3\n");
    assert_eq!(result["exitCode"], 0);
    assert_eq!(result["stdout"], "line1\nline2\nline3\ngot z\n");
    assert!(
        others.iter().all(|v| v["method"] != "process.output"),
        "{others:?}"
    );
    let r = d.call("run", json!({"command": "cat /tmp/runs"}));
    assert_eq!(r["stdout"], "run0\nrun1\nrun2\n");
}

#[test]
fn wait_and_kill_do_not_queue_behind_runs() {
    let mut d = Daemon::start(&[]);
    let r = d.call(
        "process.start",
        json!({"command": "while :; do :; done", "timeoutMs": 600_000, "stream": false}),
    );
    let pid = r["pid"].clone();
    // A wait with no timeout is pending; runs on the same sandbox are answered meanwhile.
    let waiting = d.request("process.wait", json!({"pid": pid}));
    let r = d.call("run", json!({"command": "echo still"}));
    assert_eq!(r["stdout"], "still\n");
    // A kill sent while a run is going reaches the process at once.
    let slow = d.request("run", json!({"command": "sleep 0.5; echo slept"}));
    let started = Instant::now();
    let k = d.call("process.kill", json!({"pid": pid}));
    assert_eq!(k["killed"], true);
    let a = d.answer(&waiting);
    assert_eq!(a["result"]["exitCode"], 137, "{a}");
    assert_eq!(a["result"]["errorClass"], "CANCELLED");
    assert!(
        started.elapsed() < Duration::from_secs(30),
        "the kill waited behind the run"
    );
    assert_eq!(d.answer(&slow)["result"]["stdout"], "slept\n");
    let e = d.call_err("process.kill", json!({"pid": 7}));
    assert_eq!(e["code"], 1);
    assert_eq!(e["data"]["kind"], "no_such_process");
    let e = d.call_err("process.wait", json!({"pid": "x"}));
    assert_eq!(e["code"], -32602);
    assert_eq!(
        d.call("run", json!({"command": "echo ok"}))["stdout"],
        "ok\n"
    );
}

#[test]
fn forks_have_their_own_processes_and_destroy_ends_them() {
    let mut d = Daemon::start(&[]);
    d.call(
        "process.start",
        json!({"command": "read x", "timeoutMs": 600_000, "stream": false}),
    );
    let f = d.call("sandbox.fork", json!({}))["sandboxId"]
        .as_str()
        .unwrap()
        .to_string();
    let list = d.call("process.list", json!({"sandboxId": f}));
    assert_eq!(list["processes"], json!([]));
    let e = d.call_err("process.output", json!({"pid": 1, "sandboxId": f}));
    assert_eq!(e["data"]["kind"], "no_such_process");
    let r = d.call(
        "process.start",
        json!({"command": "echo in fork; while :; do :; done", "sandboxId": f,
               "timeoutMs": 600_000}),
    );
    assert_eq!(r["pid"], 1);
    let until = Instant::now() + Duration::from_secs(60);
    while d.call("process.output", json!({"pid": 1, "sandboxId": f}))["stdout"] != "in fork\n" {
        assert!(Instant::now() < until, "the fork's process printed nothing");
        std::thread::sleep(Duration::from_millis(10));
    }
    d.call("sandbox.destroy", json!({"sandboxId": f}));
    let mut others = Vec::new();
    let (out, _, result) = collect_until_exit(&mut d, 1, Some(&f), &mut others);
    assert_eq!(out, "in fork\n");
    assert_eq!(result["exitCode"], 137);
    // The root's process was not touched.
    let list = d.call("process.list", json!({}));
    assert_eq!(list["processes"][0]["running"], true);
    d.call("process.kill", json!({"pid": 1}));
}

#[test]
fn a_client_reattaches_by_offsets_after_a_flood() {
    let mut d = Daemon::start(&[]);
    let r = d.call(
        "process.start",
        json!({"command": "yes 0123456789abcdef | head -c 3000000", "stream": false}),
    );
    let pid = r["pid"].clone();
    let result = d.call("process.wait", json!({"pid": pid, "timeoutMs": 60_000}));
    assert_eq!(result["exitCode"], 0);
    assert_eq!(result["truncated"]["stdout"], true);
    let o = d.call("process.output", json!({"pid": pid}));
    let ring = 1 << 20;
    assert_eq!(o["stdoutOffset"], 3_000_000);
    assert_eq!(o["droppedStdout"], 3_000_000 - ring);
    assert_eq!(o["stdout"].as_str().unwrap().len(), ring as usize);
    assert_eq!(o["running"], false);
    let o = d.call(
        "process.output",
        json!({"pid": pid, "stdoutOffset": 3_000_000 - 17}),
    );
    assert_eq!(o["stdout"], "abcdef\n0123456789");
    assert_eq!(o["droppedStdout"], 0);
    assert_eq!(o["stderr"], "");
    assert_eq!(o["stderrOffset"], 0);
}

#[test]
fn a_background_process_ends_at_its_timeout() {
    let mut d = Daemon::start(&[]);
    d.call(
        "process.start",
        json!({"command": "while :; do :; done", "timeoutMs": 200}),
    );
    let mut others = Vec::new();
    let (_, err, result) = collect_until_exit(&mut d, 1, None, &mut others);
    assert_eq!(result["exitCode"], 124);
    assert_eq!(result["errorClass"], "TIMEOUT");
    assert_eq!(err, "command timed out\n");
}
