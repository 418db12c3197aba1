//! `stdio`: what `sandboxd` reads on stdin, lines of JSON-RPC 2.0 and of the line protocol
//! (`{"type": ...}`), through the same `Server` the binary runs. Every answer is a JSON
//! object of its protocol's shape (JSON-RPC: `jsonrpc` "2.0", an id, exactly one of `result`
//! and an `error` with an integer code and a message; line protocol: the `type` and `id` it
//! was asked with, and an error when the type was no string); a request
//! after all of them is still answered; and nothing runs past its bounds.
//!
//! Lines that would reach the host are left out: the stdio client is the host's own program,
//! trusted to mount host folders, commit previews into them, register tools it answers and
//! open the network, and a fuzzer must do none of that.

use std::sync::Arc;
use std::sync::mpsc;
use std::time::Duration;

use parking_lot::Mutex;
use serde_json::{Value, json};
use wasmsand::Limits;
use wasmsand_dispatch::{DispatchConfig, Dispatcher, Notify, Server};

const PROBE_ID: &str = "fuzz-probe-5b8f0c";

/// Whether a decoded value names anything that reaches the host.
fn reaches_host(v: &Value) -> bool {
    const WORDS: &[&str] = &["mount", "commit", "tool", "network", "cachedir", "host"];
    let hit = |s: &str| {
        let s = s.to_ascii_lowercase();
        WORDS.iter().any(|w| s.contains(w))
    };
    match v {
        Value::String(s) => hit(s),
        Value::Array(a) => a.iter().any(reaches_host),
        Value::Object(m) => m.iter().any(|(k, v)| hit(k) || reaches_host(v)),
        _ => false,
    }
}

fn check_answer(v: &Value) {
    let Value::Object(m) = v else {
        panic!("an answer that is not an object: {v}");
    };
    if m.contains_key("jsonrpc") {
        assert_eq!(m["jsonrpc"], "2.0", "{v}");
        if m.contains_key("method") {
            // A notification (or a call to the client) from the server.
            assert!(m["method"].is_string(), "{v}");
            return;
        }
        assert!(m.contains_key("id"), "an answer without an id: {v}");
        match (m.get("result"), m.get("error")) {
            (Some(_), None) => {}
            (None, Some(Value::Object(e))) => {
                assert!(
                    e.get("code").and_then(Value::as_i64).is_some(),
                    "an error without an integer code: {v}"
                );
                assert!(
                    e.get("message").and_then(Value::as_str).is_some(),
                    "an error without a message: {v}"
                );
            }
            _ => panic!("an answer with neither or both of result and error: {v}"),
        }
    } else {
        // The line protocol echoes the request's `type` and `id` as they came, so the client
        // can match the answer; one that is not a string is answered with an error.
        assert!(
            m.contains_key("type") && m.contains_key("id"),
            "a line-protocol answer without its type and id: {v}"
        );
        if !m["type"].is_string() {
            assert!(
                m.get("error").and_then(Value::as_str).is_some(),
                "a request of no type string not answered with an error: {v}"
            );
        }
    }
}

/// The target: the input's lines, in order, to one fresh server.
pub fn run(data: &[u8]) {
    let answers: Arc<Mutex<Vec<Value>>> = Arc::default();
    let sink: Notify = {
        let answers = answers.clone();
        Arc::new(move |v| answers.lock().push(v))
    };
    let dispatcher = Arc::new(Dispatcher::new(DispatchConfig {
        limits: Limits {
            rpc_bytes: 1 << 20,
            ..crate::shell::limits()
        },
        ..DispatchConfig::default()
    }));
    let server = Arc::new(Server::new(dispatcher.clone(), sink));
    let mut killed = false;
    for line in data.split(|&b| b == b'\n').take(32) {
        if let Ok(v) = serde_json::from_slice::<Value>(line) {
            if reaches_host(&v) {
                continue;
            }
            if v.get("method").and_then(Value::as_str) == Some("kill") {
                killed = true;
            }
        }
        server.submit_line(line);
    }
    if !killed {
        server.submit_line(
            json!({"jsonrpc": "2.0", "id": PROBE_ID, "method": "sandbox.list"})
                .to_string()
                .as_bytes(),
        );
    }
    // A command may legitimately run until its (1 s) deadline, or longer where a request
    // raised the limits: past a bound, `kill` ends everything, and must.
    let (done_tx, done_rx) = mpsc::channel();
    let waiter = {
        let server = server.clone();
        std::thread::spawn(move || {
            server.wait_idle();
            let _ = done_tx.send(());
        })
    };
    if done_rx.recv_timeout(Duration::from_secs(5)).is_err() {
        dispatcher.kill();
        killed = true;
    }
    waiter.join().expect("the waiting thread");
    let answers = std::mem::take(&mut *answers.lock());
    for a in &answers {
        check_answer(a);
    }
    if !killed {
        let probe = answers
            .iter()
            .find(|a| a.get("id").and_then(Value::as_str) == Some(PROBE_ID))
            .unwrap_or_else(|| panic!("the probe after the input got no answer: {answers:?}"));
        assert!(
            probe.get("result").is_some(),
            "the probe after the input failed: {probe}"
        );
    }
    dispatcher.kill();
}
