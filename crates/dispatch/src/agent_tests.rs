//! Head + tail output with the rest kept (`truncation`, `spilled`; docs/runs.md) over
//! JSON-RPC.

use std::sync::Arc;

use serde_json::{Value, json};

use super::*;

fn call(d: &Dispatcher, method: &str, params: Value) -> Result<Value, RpcError> {
    let req = json!({"jsonrpc": "2.0", "id": 1, "method": method, "params": params});
    let quiet: Notify = Arc::new(|_| {});
    let resp = d.handle(&req, &quiet).expect("answered");
    if let Some(e) = resp.get("error") {
        return Err(RpcError {
            code: e["code"].as_i64().unwrap(),
            message: e["message"].as_str().unwrap().to_string(),
            data: e.get("data").cloned(),
        });
    }
    Ok(resp["result"].clone())
}

#[test]
fn long_output_is_head_and_tail_with_the_whole_spilled() {
    let d = Dispatcher::new(DispatchConfig::default());
    call(&d, "create", json!({"limits": {"stdoutBytes": 2048}})).unwrap();
    let r = call(&d, "run", json!({"command": "seq 1 20000"})).unwrap();
    let out = r["stdout"].as_str().unwrap();
    assert!(
        out.starts_with("1\n2\n") && out.ends_with("19999\n20000\n"),
        "{out}"
    );
    assert!(out.len() <= 2048);
    assert_eq!(r["truncated"], json!({"stdout": true, "stderr": false}));
    assert_eq!(r["spilled"], json!({"stdout": "/tmp/wasmsand-1.stdout"}));
    let r = call(
        &d,
        "run",
        json!({"command": "wc -l < /tmp/wasmsand-1.stdout"}),
    )
    .unwrap();
    assert_eq!(r["stdout"], "20000\n");
    assert!(r.get("spilled").is_none());

    let r = call(
        &d,
        "run",
        json!({"command": "seq 1 20000", "truncation": "plain"}),
    )
    .unwrap();
    let out = r["stdout"].as_str().unwrap();
    assert_eq!(out.len(), 2048);
    assert!(out.starts_with("1\n2\n") && !out.contains("left out"));
    assert!(r.get("spilled").is_none());

    let e = call(&d, "run", json!({"command": "true", "truncation": "tail"})).unwrap_err();
    assert_eq!(e.code, code::INVALID_PARAMS);
    assert!(e.message.contains("truncation"), "{}", e.message);
    let e = call(
        &Dispatcher::new(DispatchConfig::default()),
        "create",
        json!({"limits": {"spillBytes": -1}}),
    )
    .unwrap_err();
    assert_eq!(e.code, code::INVALID_PARAMS);
}

#[test]
fn the_spill_cap_is_a_limit() {
    let d = Dispatcher::new(DispatchConfig::default());
    call(
        &d,
        "create",
        json!({"limits": {"stdoutBytes": 1024, "spillBytes": 100}}),
    )
    .unwrap();
    call(&d, "run", json!({"command": "seq 1 20000"})).unwrap();
    let r = call(&d, "files.stat", json!({"path": "/tmp/wasmsand-1.stdout"})).unwrap();
    assert_eq!(r["size"], 100);
}

fn det_run(seed: u64) -> Value {
    let d = Dispatcher::new(DispatchConfig::default());
    call(
        &d,
        "create",
        json!({"deterministic": {"seed": seed, "startTimeMs": 1_000_000_000_000u64}}),
    )
    .unwrap();
    let script = "date -u +%FT%T; echo $RANDOM $$; mktemp; od -An -N4 -tx1 /dev/urandom";
    let first = call(&d, "run", json!({"command": script})).unwrap();
    // A fork made now starts where the root stands.
    let f = call(&d, "sandbox.fork", json!({})).unwrap()["sandboxId"].clone();
    let second = call(&d, "run", json!({"command": script})).unwrap();
    let on_fork = call(&d, "run", json!({"command": script, "sandboxId": f})).unwrap();
    assert_eq!(second["stdout"], on_fork["stdout"]);
    assert_ne!(first["stdout"], second["stdout"]);
    first["stdout"].clone()
}

#[test]
fn create_deterministic_repeats_across_dispatchers() {
    let a = det_run(3);
    assert_eq!(a, det_run(3));
    assert_ne!(a, det_run(4));
    assert!(
        a.as_str().unwrap().starts_with("2001-09-09T01:46:40\n"),
        "{a}"
    );
    for bad in [json!(1), json!({"seed": -1}), json!({"sead": 1})] {
        let e = call(
            &Dispatcher::new(DispatchConfig::default()),
            "create",
            json!({"deterministic": bad}),
        )
        .unwrap_err();
        assert_eq!(e.code, code::INVALID_PARAMS);
        assert!(e.message.contains("deterministic"), "{}", e.message);
    }
}
