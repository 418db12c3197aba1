//! `process.*` through the transport-free dispatcher, as the in-process Python module uses
//! it: notifications of a background process reach the dispatcher's notifier, or the
//! `process.start` request's own callback, after the request was answered.

use std::sync::Arc;
use std::time::{Duration, Instant};

use parking_lot::Mutex;
use serde_json::{Value, json};
use wasmsand_dispatch::{DispatchConfig, Dispatcher, Notify};

fn collector() -> (Notify, Arc<Mutex<Vec<Value>>>) {
    let seen = Arc::new(Mutex::new(Vec::new()));
    let s = seen.clone();
    (Arc::new(move |v| s.lock().push(v)), seen)
}

fn call(d: &Dispatcher, method: &str, params: Value, notify: &Notify) -> Value {
    let req = json!({"jsonrpc": "2.0", "id": 1, "method": method, "params": params});
    let a = d.handle(&req, notify).expect("a request is answered");
    assert!(a.get("error").is_none(), "{method}: {a}");
    a["result"].clone()
}

/// Waits until a `process.exit` for `pid` of the root sandbox is among `seen`. A fork numbers
/// its processes from 1 too, so its exit must not satisfy the wait.
fn until_exit(seen: &Mutex<Vec<Value>>, pid: u64) -> Vec<Value> {
    let until = Instant::now() + Duration::from_secs(60);
    loop {
        let got = seen.lock().clone();
        if got.iter().any(|v| {
            v["method"] == "process.exit"
                && v["params"]["pid"] == pid
                && v["params"].get("sandboxId").is_none()
        }) {
            return got;
        }
        assert!(Instant::now() < until, "no process.exit: {got:?}");
        std::thread::sleep(Duration::from_millis(5));
    }
}

fn text_of(msgs: &[Value], stream: &str) -> String {
    msgs.iter()
        .filter(|v| v["method"] == "process.output" && v["params"]["stream"] == stream)
        .map(|v| v["params"]["data"].as_str().unwrap().to_string())
        .collect()
}

#[test]
fn without_a_notifier_the_start_requests_callback_gets_them_after_the_answer() {
    let d = Dispatcher::new(DispatchConfig::default());
    let (notify, seen) = collector();
    let r = call(
        &d,
        "process.start",
        json!({"command": "read x; echo got $x; echo é€ >&2"}),
        &notify,
    );
    assert_eq!(r["pid"], 1);
    let none: Notify = Arc::new(|_| {});
    call(
        &d,
        "process.write",
        json!({"pid": 1, "data": "it\n", "eof": true}),
        &none,
    );
    let msgs = until_exit(&seen, 1);
    assert_eq!(text_of(&msgs, "stdout"), "got it\n");
    assert_eq!(text_of(&msgs, "stderr"), "é€\n");
    let last = msgs.last().unwrap();
    assert_eq!(
        last["method"], "process.exit",
        "the exit comes last: {msgs:?}"
    );
    assert_eq!(last["params"]["result"]["exitCode"], 0);
    assert!(last["params"].get("sandboxId").is_none());
    assert_eq!(
        msgs.iter()
            .filter(|v| v["method"] == "process.exit")
            .count(),
        1
    );
}

#[test]
fn the_notifier_gets_every_process_and_forks_are_tagged() {
    let d = Dispatcher::new(DispatchConfig::default());
    let (notifier, seen) = collector();
    d.set_notifier(notifier);
    let (own, own_seen) = collector();
    // Output and exit can come before `process.start` is answered: they wait for the pid.
    call(&d, "process.start", json!({"command": "echo quick"}), &own);
    let fork = call(&d, "sandbox.fork", json!({}), &own)["sandboxId"].clone();
    call(
        &d,
        "process.start",
        json!({"command": "echo in fork", "sandboxId": fork}),
        &own,
    );
    // Not streamed: nothing is sent, the rings still hold it.
    call(
        &d,
        "process.start",
        json!({"command": "echo quiet", "stream": false}),
        &own,
    );
    let r = call(&d, "process.wait", json!({"pid": 2}), &own);
    assert_eq!(r["stdout"], "quiet\n");
    let msgs = until_exit(&seen, 1);
    let root: Vec<Value> = msgs
        .iter()
        .filter(|v| v["params"].get("sandboxId").is_none())
        .cloned()
        .collect();
    assert_eq!(text_of(&root, "stdout"), "quick\n");
    let deadline = Instant::now() + Duration::from_secs(60);
    while !seen
        .lock()
        .iter()
        .any(|v| v["method"] == "process.exit" && v["params"]["sandboxId"] == fork)
    {
        assert!(Instant::now() < deadline, "{:?}", seen.lock());
        std::thread::sleep(Duration::from_millis(5));
    }
    let msgs = seen.lock().clone();
    let in_fork: Vec<&Value> = msgs
        .iter()
        .filter(|v| v["params"]["sandboxId"] == fork)
        .collect();
    assert_eq!(in_fork[0]["params"]["data"], "in fork\n");
    assert_eq!(in_fork[0]["params"]["pid"], 1);
    assert!(
        !msgs.iter().any(|v| v["params"]["pid"] == 2),
        "a process started with stream: false sends nothing"
    );
    assert!(own_seen.lock().is_empty(), "{:?}", own_seen.lock());
}

#[test]
fn bad_params_are_refused() {
    let d = Dispatcher::new(DispatchConfig::default());
    let none: Notify = Arc::new(|_| {});
    for (method, params, message) in [
        (
            "process.start",
            json!({}),
            "Missing required param: command",
        ),
        (
            "process.start",
            json!({"command": "true", "env": {"A": 1}}),
            "Invalid param: env.A must be a string",
        ),
        (
            "process.start",
            json!({"command": "true", "env": ["A"]}),
            "Invalid param: env must be an object of strings",
        ),
        ("process.wait", json!({}), "Missing required param: pid"),
        (
            "process.kill",
            json!({"pid": -1}),
            "Invalid param: pid must be a positive integer",
        ),
        (
            "process.write",
            json!({"pid": 1, "data": 5}),
            "Invalid param: data must be a string",
        ),
        ("process.nope", json!({}), "Method not found: process.nope"),
    ] {
        let req = json!({"jsonrpc": "2.0", "id": 1, "method": method, "params": params});
        let a = d.handle(&req, &none).unwrap();
        assert_eq!(a["error"]["message"], message, "{method} {params}: {a}");
    }
    let req = json!({"jsonrpc": "2.0", "id": 1, "method": "process.start",
                     "params": {"command": "true", "cwd": "/etc/hostname"}});
    let a = d.handle(&req, &none).unwrap();
    assert_eq!(a["error"]["code"], -32602, "{a}");
}
