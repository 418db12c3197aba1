//! The dispatcher against real sandboxes: fork routing, destroy, kill and result passthrough,
//! plus the parameter and error mapping of every method.

use std::sync::Arc;
use std::time::Duration;

use serde_json::{Value, json};

use super::*;

fn quiet() -> Notify {
    Arc::new(|_| {})
}

fn d() -> Dispatcher {
    Dispatcher::new(DispatchConfig::default())
}

fn call(d: &Dispatcher, method: &str, params: Value) -> Result<Value, RpcError> {
    let req = json!({"jsonrpc": "2.0", "id": 1, "method": method, "params": params});
    let resp = d
        .handle(&req, &quiet())
        .expect("a request with an id is answered");
    assert_eq!(resp["id"], 1);
    if let Some(e) = resp.get("error") {
        return Err(RpcError {
            code: e["code"].as_i64().unwrap(),
            message: e["message"].as_str().unwrap().to_string(),
            data: e.get("data").cloned(),
        });
    }
    Ok(resp["result"].clone())
}

fn fork(d: &Dispatcher, from: Option<&str>) -> String {
    let r = call(d, "sandbox.fork", json!({"sandboxId": from})).unwrap();
    r["sandboxId"].as_str().unwrap().to_string()
}

#[test]
fn fork_returns_a_string_sandbox_id() {
    let d = d();
    let r = call(&d, "sandbox.fork", json!({})).unwrap();
    assert!(r["sandboxId"].is_string());
}

#[test]
fn run_is_routed_to_the_fork_named() {
    let d = d();
    let f = fork(&d, None);
    call(
        &d,
        "run",
        json!({"command": "echo fork > /tmp/who", "sandboxId": f}),
    )
    .unwrap();
    let on_fork = call(
        &d,
        "run",
        json!({"command": "cat /tmp/who", "sandboxId": f}),
    )
    .unwrap();
    assert_eq!(on_fork["stdout"], "fork\n");
    let on_root = call(&d, "run", json!({"command": "cat /tmp/who"})).unwrap();
    assert_eq!(on_root["exitCode"], 1);
}

#[test]
fn files_read_is_routed_to_the_fork_named() {
    let d = d();
    let f = fork(&d, None);
    call(
        &d,
        "files.write",
        json!({"path": "/tmp/test.txt", "data": "Zm9yaw==", "sandboxId": f}),
    )
    .unwrap();
    let r = call(
        &d,
        "files.read",
        json!({"path": "/tmp/test.txt", "sandboxId": f}),
    )
    .unwrap();
    assert_eq!(r["data"], "Zm9yaw==");
    let e = call(&d, "files.read", json!({"path": "/tmp/test.txt"})).unwrap_err();
    assert_eq!(e.code, code::SANDBOX_ERROR);
    assert_eq!(e.data.unwrap()["errno"], "ENOENT");
}

#[test]
fn no_sandbox_id_or_null_means_the_root() {
    let d = d();
    call(&d, "env.set", json!({"name": "WHO", "value": "root"})).unwrap();
    let r = call(&d, "env.get", json!({"name": "WHO", "sandboxId": null})).unwrap();
    assert_eq!(r, json!({"value": "root"}));
    let r = call(&d, "env.get", json!({"name": "NOPE"})).unwrap();
    assert_eq!(r, json!({"value": null}));
}

#[test]
fn unknown_and_ill_typed_sandbox_ids_are_rejected() {
    let d = d();
    let e = call(
        &d,
        "run",
        json!({"command": "echo hello", "sandboxId": "999"}),
    )
    .unwrap_err();
    assert_eq!(e.code, -32602);
    assert_eq!(e.message, "Unknown sandboxId: 999");
    let e = call(&d, "run", json!({"command": "echo hello", "sandboxId": 1})).unwrap_err();
    assert_eq!(e.code, -32602);
    assert_eq!(e.message, "sandboxId must be a string");
}

#[test]
fn fork_from_a_fork_gets_a_new_id_and_the_forks_state() {
    let d = d();
    let f1 = fork(&d, None);
    call(
        &d,
        "env.set",
        json!({"name": "GEN", "value": "one", "sandboxId": f1}),
    )
    .unwrap();
    let f2 = fork(&d, Some(&f1));
    assert_ne!(f1, f2);
    let r = call(&d, "env.get", json!({"name": "GEN", "sandboxId": f2})).unwrap();
    assert_eq!(r["value"], "one");
    let list = call(&d, "sandbox.list", json!({})).unwrap();
    assert_eq!(
        list,
        json!([{"sandboxId": f1, "parent": null}, {"sandboxId": f2, "parent": f1}])
    );
}

#[test]
fn destroy_removes_a_fork_and_ids_are_never_reused() {
    let d = d();
    let f = fork(&d, None);
    assert_eq!(
        call(&d, "sandbox.destroy", json!({"sandboxId": f})).unwrap(),
        json!({"ok": true})
    );
    let e = call(&d, "run", json!({"command": "echo hello", "sandboxId": f})).unwrap_err();
    assert_eq!(
        (e.code, e.message),
        (-32602, format!("Unknown sandboxId: {f}"))
    );
    let e = call(&d, "sandbox.destroy", json!({"sandboxId": f})).unwrap_err();
    assert_eq!(e.code, -32602);
    let g = fork(&d, None);
    assert_ne!(f, g);
}

#[test]
fn destroy_requires_a_sandbox_id() {
    let d = d();
    let e = call(&d, "sandbox.destroy", json!({})).unwrap_err();
    assert_eq!(e.code, -32602);
    assert!(e.message.contains("sandboxId"), "{}", e.message);
}

#[test]
fn kill_destroys_every_fork_and_the_root() {
    let d = d();
    let f = fork(&d, None);
    let root = d.root().unwrap();
    let fork_sb = d.state.lock().forks[&f].sandbox.clone();
    assert_eq!(call(&d, "kill", json!({})).unwrap(), json!({"ok": true}));
    assert!(d.is_killed());
    assert!(root.is_destroyed());
    assert!(fork_sb.is_destroyed());
    assert!(call(&d, "run", json!({"command": "true"})).is_err());
}

#[test]
fn run_passes_truncated_and_error_class_through() {
    let d = d();
    call(
        &d,
        "create",
        json!({"limits": {"stdoutBytes": 5}, "timeoutMs": 200}),
    )
    .unwrap();
    let r = call(&d, "run", json!({"command": "echo hello world"})).unwrap();
    assert_eq!(r["stdout"], "hello");
    assert_eq!(r["truncated"], json!({"stdout": true, "stderr": false}));
    let r = call(&d, "run", json!({"command": "sleep 5"})).unwrap();
    assert_eq!(r["exitCode"], 124);
    assert_eq!(r["errorClass"], "TIMEOUT");
}

#[test]
fn run_omits_truncated_and_error_class_when_absent() {
    let d = d();
    let r = call(&d, "run", json!({"command": "echo hello"})).unwrap();
    let obj = r.as_object().unwrap();
    assert_eq!(r["exitCode"], 0);
    assert_eq!(r["stdout"], "hello\n");
    assert!(obj.contains_key("executionTimeMs"));
    assert!(!obj.contains_key("truncated"));
    assert!(!obj.contains_key("errorClass"));
}

#[test]
fn create_must_be_first_and_only_once() {
    let d = d();
    call(
        &d,
        "create",
        json!({"wasmDir": "/ignored", "limits": {"commandBytes": 10}}),
    )
    .unwrap();
    let e = call(&d, "create", json!({})).unwrap_err();
    assert_eq!(
        (e.code, e.message.as_str()),
        (-32600, "Sandbox already created")
    );
    let r = call(&d, "run", json!({"command": "echo this is too long"})).unwrap();
    assert_eq!(r["errorClass"], "LIMIT_EXCEEDED");

    let d2 = self::d();
    call(&d2, "run", json!({"command": "true"})).unwrap();
    let e = call(&d2, "create", json!({})).unwrap_err();
    assert_eq!(e.code, -32600);
}

#[test]
fn create_rejects_misspelt_limits() {
    let d = d();
    let e = call(&d, "create", json!({"limits": {"stdoutbytes": 5}})).unwrap_err();
    assert_eq!(e.code, -32602);
}

#[test]
fn create_takes_a_network_policy_and_names_a_bad_entry() {
    for (params, want) in [
        (
            json!({"network": {"allowlist": {"hosts": ["*.com"]}}}),
            "network.allowlist.hosts: '*.com'",
        ),
        (
            json!({"network": {"allowlist": {}, "proxy": 1}}),
            "unknown field `proxy`",
        ),
        (
            json!({"network": {"allowlist": {}, "limits": {"maxBytes": 0}}}),
            "maxBytes must be a positive",
        ),
        (
            json!({"network": {"allowlist": {}, "resolve": {"a.test": ["nope"]}}}),
            "network.resolve",
        ),
        (json!({"network": "open"}), "network must be an object"),
    ] {
        let e = call(&d(), "create", params.clone()).unwrap_err();
        assert_eq!(e.code, -32602, "{params}");
        assert!(e.message.contains(want), "{params}: {}", e.message);
    }
    // A policy that names the host, which no address backs: the door tried (a resolve
    // error), where a sandbox without one refuses at once.
    let d = d();
    call(
        &d,
        "create",
        json!({"network": {"allowlist": {"hosts": ["only.test"]}, "resolve": {"only.test": []}}}),
    )
    .unwrap();
    let r = call(
        &d,
        "run",
        json!({"command": "curl -sS http://other.test/; curl -sS http://only.test/"}),
    )
    .unwrap();
    let stderr = r["stderr"].as_str().unwrap();
    assert!(
        stderr.contains("host other.test not in allowlist"),
        "{stderr}"
    );
    assert!(
        stderr.contains("Could not resolve host: only.test"),
        "{stderr}"
    );
    // Forks keep the policy.
    let fork = call(&d, "sandbox.fork", json!({})).unwrap();
    let r = call(
        &d,
        "run",
        json!({"command": "curl -sS http://other.test/", "sandboxId": fork["sandboxId"]}),
    )
    .unwrap();
    assert!(
        r["stderr"].as_str().unwrap().contains("not in allowlist"),
        "{r}"
    );
}

#[test]
fn file_methods_shapes() {
    let d = d();
    call(&d, "files.mkdir", json!({"path": "/tmp/a/b"})).unwrap();
    call(
        &d,
        "files.write",
        json!({"path": "/tmp/a/f.txt", "data": "aGVsbG8="}),
    )
    .unwrap();
    let list = call(&d, "files.list", json!({"path": "/tmp/a"})).unwrap();
    assert_eq!(
        list,
        json!({"entries": [
            {"name": "b", "type": "dir", "size": 0},
            {"name": "f.txt", "type": "file", "size": 5},
        ]})
    );
    let st = call(&d, "files.stat", json!({"path": "/tmp/a/f.txt"})).unwrap();
    assert_eq!(st, json!({"name": "f.txt", "type": "file", "size": 5}));
    let e = call(&d, "files.rm", json!({"path": "/tmp/a"})).unwrap_err();
    assert_eq!(e.data.unwrap()["errno"], "ENOTEMPTY");
    call(&d, "files.rm", json!({"path": "/tmp/a", "recursive": true})).unwrap();
    let e = call(&d, "files.stat", json!({"path": "/tmp/a"})).unwrap_err();
    assert_eq!(e.data.unwrap()["errno"], "ENOENT");
    let e = call(&d, "files.write", json!({"path": "/etc/x", "data": ""})).unwrap_err();
    assert_eq!(e.data.unwrap()["errno"], "EROFS");
}

#[test]
fn snapshots_round_trip() {
    let d = d();
    call(&d, "files.write", json!({"path": "/tmp/s", "data": "MQ=="})).unwrap();
    let id = call(&d, "snapshot.create", json!({})).unwrap()["id"].clone();
    assert!(id.is_string());
    call(&d, "files.write", json!({"path": "/tmp/s", "data": "Mg=="})).unwrap();
    call(&d, "snapshot.restore", json!({"id": id})).unwrap();
    let r = call(&d, "files.read", json!({"path": "/tmp/s"})).unwrap();
    assert_eq!(r["data"], "MQ==");
    let e = call(&d, "snapshot.restore", json!({"id": "nope"})).unwrap_err();
    assert_eq!(e.code, -32602);
}

#[test]
fn param_errors() {
    let d = d();
    let e = call(&d, "run", json!({})).unwrap_err();
    assert_eq!(
        (e.code, e.message.as_str()),
        (-32602, "Missing required param: command")
    );
    let e = call(&d, "run", json!({"command": 5})).unwrap_err();
    assert_eq!(
        (e.code, e.message.as_str()),
        (-32602, "Invalid param: command must be a string")
    );
    let e = call(&d, "files.write", json!({"path": "/tmp/x", "data": "!!"})).unwrap_err();
    assert_eq!(e.code, -32602);
    let e = call(&d, "env.set", json!({"name": "1BAD", "value": "x"})).unwrap_err();
    assert_eq!(e.code, -32602);
    let e = call(&d, "no.such", json!({})).unwrap_err();
    assert_eq!(
        (e.code, e.message.as_str()),
        (-32601, "Method not found: no.such")
    );
}

/// Clients branch on `data.kind`, so every failure a request can meet names one.
#[test]
fn every_error_names_its_kind() {
    let d = d();
    let kind = |e: RpcError| e.kind().map(str::to_string);
    let k = |s: &str| Some(s.to_string());
    assert_eq!(
        kind(call(&d, "run", json!({})).unwrap_err()),
        k("invalid_params")
    );
    assert_eq!(
        kind(call(&d, "no.such", json!({})).unwrap_err()),
        k("method_not_found")
    );
    let e = call(&d, "files.read", json!({"path": "/nope"})).unwrap_err();
    assert_eq!(e.data.clone().unwrap()["errno"], "ENOENT");
    assert_eq!(kind(e), k("filesystem"));
    let e = call(&d, "run", json!({"command": "true", "sandboxId": "42"})).unwrap_err();
    assert_eq!(e.data.clone().unwrap()["sandboxId"], "42");
    assert_eq!(kind(e), k("unknown_sandbox"));
    let e = call(&d, "snapshot.restore", json!({"id": "7"})).unwrap_err();
    assert_eq!(kind(e), k("unknown_snapshot"));
    let e = call(&d, "process.wait", json!({"pid": 99})).unwrap_err();
    assert_eq!(kind(e), k("no_such_process"));
    let n = quiet();
    let r = d
        .handle(&json!({"jsonrpc": "1.0", "id": 1, "method": "run"}), &n)
        .unwrap();
    assert_eq!(r["error"]["data"]["kind"], "invalid_request");
    call(&d, "kill", json!({})).unwrap();
    let e = call(&d, "run", json!({"command": "true"})).unwrap_err();
    assert_eq!(kind(e), k("sandbox_destroyed"));
}

#[test]
fn invalid_requests() {
    let d = d();
    let n = quiet();
    for (req, id) in [
        (json!([]), Value::Null),
        (json!(7), Value::Null),
        (
            json!({"jsonrpc": "1.0", "id": 3, "method": "run"}),
            json!(3),
        ),
        (json!({"jsonrpc": "2.0", "id": 4}), json!(4)),
        (
            json!({"jsonrpc": "2.0", "id": {}, "method": "run"}),
            Value::Null,
        ),
    ] {
        let r = d.handle(&req, &n).unwrap();
        assert_eq!(r["error"]["code"], -32600, "{req}");
        assert_eq!(r["id"], id, "{req}");
    }
    let r = d
        .handle(
            &json!({"jsonrpc": "2.0", "id": 5, "method": "run", "params": [1]}),
            &n,
        )
        .unwrap();
    assert_eq!(r["error"]["code"], -32602);
}

#[test]
fn notifications_get_no_answer() {
    let d = d();
    let req = json!({"jsonrpc": "2.0", "method": "env.set", "params": {"name": "N", "value": "1"}});
    assert!(d.handle(&req, &quiet()).is_none());
    assert_eq!(
        call(&d, "env.get", json!({"name": "N"})).unwrap()["value"],
        "1"
    );
}

#[test]
fn streaming_sends_output_notifications_then_the_result() {
    let d = d();
    let seen = Arc::new(Mutex::new(Vec::new()));
    let sink = seen.clone();
    let notify: Notify = Arc::new(move |v| sink.lock().push(v));
    let req = json!({"jsonrpc": "2.0", "id": "r1", "method": "run",
        "params": {"command": "echo out; echo err >&2", "stream": true}});
    let resp = d.handle(&req, &notify).unwrap();
    assert_eq!(resp["result"]["stdout"], "out\n");
    let seen = seen.lock();
    assert!(seen.contains(&json!({"jsonrpc": "2.0", "method": "output",
        "params": {"requestId": "r1", "stream": "stdout", "data": "out\n"}})));
    assert!(seen.contains(&json!({"jsonrpc": "2.0", "method": "output",
        "params": {"requestId": "r1", "stream": "stderr", "data": "err\n"}})));
}

#[test]
fn line_protocol_session() {
    let d = d();
    let h = |v: Value| d.handle(&v, &quiet()).unwrap();
    let r =
        h(json!({"type": "shell", "command": "echo 'Hello'", "id": "1", "time_limit_ms": 1000}));
    assert_eq!(
        r,
        json!({"type": "shell", "id": "1", "stdout": "Hello\n", "stderr": "", "exit_code": 0, "timed_out": false})
    );
    let r = h(json!({"type": "write_file", "path": "/tmp/test", "content": "data", "id": "2"}));
    assert_eq!(
        r,
        json!({"type": "write_file", "id": "2", "success": true, "error": null})
    );
    let r = h(json!({"type": "shell", "command": "cat /tmp/test", "id": "3"}));
    assert_eq!(r["stdout"], "data");
    let r = h(json!({"type": "reset", "id": "4"}));
    assert_eq!(r, json!({"type": "reset", "id": "4", "success": true}));
    let r = h(json!({"type": "read_file", "path": "/tmp/test", "id": "5"}));
    assert_eq!(r["success"], false);
    assert_eq!(r["id"], "5");
    assert!(r["error"].as_str().unwrap().contains("ENOENT"));
}

#[test]
fn line_protocol_errors_echo_the_id() {
    let d = d();
    let h = |v: Value| d.handle(&v, &quiet()).unwrap();
    let r = h(json!({"type": "shell", "id": "x1"}));
    assert_eq!(r["id"], "x1");
    assert_eq!(r["error"], "missing required field: command");
    assert_eq!(r["exit_code"], Value::Null);
    let r = h(json!({"type": "bogus", "id": "x2"}));
    assert_eq!(
        (r["id"].clone(), r["type"].clone()),
        (json!("x2"), json!("bogus"))
    );
    assert!(
        r["error"]
            .as_str()
            .unwrap()
            .contains("unknown request type")
    );
    let r = h(json!({"type": "shell", "command": "sleep 3", "id": "x3", "time_limit_ms": 100}));
    assert_eq!(r["timed_out"], true);
    assert_eq!(r["exit_code"], Value::Null);
    assert_eq!(r["error"], "Command execution failed: timeout exceeded");
}

#[test]
fn line_protocol_write_and_read_with_encodings_and_mode() {
    let d = d();
    let h = |v: Value| d.handle(&v, &quiet()).unwrap();
    let r = h(
        json!({"type": "write_file", "path": "/tmp/bin.sh", "content": "ZWNobyBoaQo=",
        "encoding": "base64", "mode": "0755", "id": "w"}),
    );
    assert_eq!(r["success"], true, "{r}");
    // `[ -x ]` reads the sandbox's own mode bits (the guests' `stat` sees WASI's coarser view).
    let r = h(
        json!({"type": "shell", "command": "/tmp/bin.sh; [ -x /tmp/bin.sh ] && echo x", "id": "s"}),
    );
    assert_eq!(r["stdout"], "hi\nx\n", "{r}");
    h(json!({"type": "write_file", "path": "/tmp/plain", "content": "", "id": "p"}));
    let r = h(json!({"type": "shell", "command": "[ -x /tmp/plain ] || echo not", "id": "s2"}));
    assert_eq!(r["stdout"], "not\n", "{r}");
    let r = h(json!({"type": "read_file", "path": "/tmp/bin.sh", "encoding": "base64", "id": "r"}));
    assert_eq!(r["content"], "ZWNobyBoaQo=");
    let r =
        h(json!({"type": "write_file", "path": "/tmp/x", "content": "", "mode": "999", "id": "m"}));
    assert_eq!(r["success"], false);
}

#[test]
fn line_protocol_status_reports_uptime_and_limits() {
    let d = d();
    let r = d
        .handle(&json!({"type": "status", "id": "s"}), &quiet())
        .unwrap();
    assert_eq!(r["ready"], true);
    assert_eq!(r["memory_limit_bytes"], Limits::default().memory_bytes);
    assert!(r["uptime_ms"].is_u64());
    assert!(r["memory_used_bytes"].is_u64());
}

/// A server whose sink records every message.
fn recording_server() -> (Server, Arc<Mutex<Vec<Value>>>) {
    let seen = Arc::new(Mutex::new(Vec::new()));
    let sink = seen.clone();
    let server = Server::new(Arc::new(d()), Arc::new(move |v| sink.lock().push(v)));
    (server, seen)
}

fn submit(server: &Server, id: u64, method: &str, params: Value) {
    server.submit(json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}));
}

fn ids(seen: &[Value]) -> Vec<u64> {
    seen.iter().filter_map(|v| v["id"].as_u64()).collect()
}

#[test]
fn server_runs_lanes_concurrently_and_each_lane_in_order() {
    let (server, seen) = recording_server();
    submit(&server, 1, "sandbox.fork", json!({}));
    submit(&server, 2, "sandbox.fork", json!({}));
    server.wait_idle();
    submit(
        &server,
        3,
        "run",
        json!({"command": "sleep 1", "sandboxId": "1"}),
    );
    submit(
        &server,
        4,
        "files.write",
        json!({"path": "/tmp/x", "data": "", "sandboxId": "1"}),
    );
    submit(
        &server,
        5,
        "files.list",
        json!({"path": "/", "sandboxId": "2"}),
    );
    server.wait_idle();
    assert_eq!(ids(&seen.lock()), [1, 2, 5, 3, 4]);
}

#[test]
fn kill_answer_is_the_last_message() {
    let (server, seen) = recording_server();
    submit(&server, 1, "sandbox.fork", json!({}));
    server.wait_idle();
    submit(
        &server,
        2,
        "run",
        json!({"command": "sleep 30", "sandboxId": "1"}),
    );
    std::thread::sleep(Duration::from_millis(100));
    submit(&server, 3, "kill", json!({}));
    server.wait_idle();
    submit(&server, 4, "run", json!({"command": "echo late"}));
    server.wait_idle();
    assert_eq!(ids(&seen.lock()), [1, 3]);
}

#[test]
fn outbox_calls_the_client_and_matches_answers_by_id() {
    let (server, seen) = recording_server();
    let server = Arc::new(server);
    let caller = {
        let server = server.clone();
        std::thread::spawn(move || {
            let ok =
                server
                    .outbox()
                    .call("tool.call", json!({"name": "t"}), Duration::from_secs(10));
            let err = server
                .outbox()
                .call("tool.call", json!({}), Duration::from_secs(10));
            let late = server
                .outbox()
                .call("tool.call", json!({}), Duration::from_millis(50));
            (ok, err, late)
        })
    };
    let wait_for = |n: usize| loop {
        if let Some(v) = seen.lock().get(n).cloned() {
            return v;
        }
        std::thread::sleep(Duration::from_millis(5));
    };
    let first = wait_for(0);
    assert_eq!(first["method"], "tool.call");
    assert_eq!(first["params"], json!({"name": "t"}));
    let id = first["id"].as_str().unwrap().to_string();
    assert!(id.starts_with("cb_"));
    server.submit(json!({"jsonrpc": "2.0", "id": id, "result": {"answer": 42}}));
    let second = wait_for(1);
    server.submit(
        json!({"jsonrpc": "2.0", "id": second["id"], "error": {"code": 5, "message": "no"}}),
    );
    let (ok, err, late) = caller.join().unwrap();
    assert_eq!(ok.unwrap(), json!({"answer": 42}));
    match err {
        Err(CallError::Remote(e)) => assert_eq!((e.code, e.message.as_str()), (5, "no")),
        other => panic!("{other:?}"),
    }
    assert!(matches!(late, Err(CallError::Timeout(_))));
    // Answers are not requests: nothing was sent back for them.
    assert_eq!(seen.lock().len(), 3);
}

#[test]
fn server_answers_bad_lines_at_once() {
    let (server, seen) = recording_server();
    server.submit_line(b"{not json");
    server.submit_line(b"   ");
    server.submit_line(br#"{"type":"shell","id":"q","command":"#);
    server.reject_too_large();
    server.submit(json!({"jsonrpc": "2.0", "id": 9, "method": "run", "params": {"command": "true", "sandboxId": false}}));
    let seen = seen.lock();
    assert_eq!(seen[0]["error"]["code"], -32700);
    assert_eq!(seen[1]["id"], "q");
    assert_eq!(seen[2]["error"]["message"], "Request too large");
    assert_eq!(seen[3]["error"]["message"], "sandboxId must be a string");
    assert_eq!(seen.len(), 4);
}

/// Whether `got` has everything `want` shows: members `want` leaves out may be there, arrays
/// match element by element, and the string `"<any>"` matches any value.
fn shows(want: &Value, got: &Value) -> bool {
    match (want, got) {
        (Value::String(s), _) if s == "<any>" => true,
        (Value::Object(w), Value::Object(g)) => w
            .iter()
            .all(|(k, v)| g.get(k).is_some_and(|gv| shows(v, gv))),
        (Value::Array(w), Value::Array(g)) => {
            w.len() == g.len() && w.iter().zip(g).all(|(a, b)| shows(a, b))
        }
        _ => want == got,
    }
}

#[test]
fn protocol_page_examples_hold() {
    let page = include_str!("../../../docs/protocol.md");
    let mut blocks = Vec::new();
    let mut current: Option<Vec<&str>> = None;
    for line in page.lines() {
        match (&mut current, line.trim_end()) {
            (None, "```jsonl") => current = Some(Vec::new()),
            (Some(_), "```") => blocks.push(current.take().expect("open block")),
            (Some(b), l) => b.push(l),
            (None, _) => {}
        }
    }
    assert!(blocks.len() >= 8, "docs/protocol.md lost its examples");
    let mut checked = 0;
    for (n, block) in blocks.iter().enumerate() {
        let d = d();
        let mut lines = block.iter().peekable();
        while let Some(line) = lines.next() {
            let req = line
                .strip_prefix("> ")
                .unwrap_or_else(|| panic!("block {n}: expected a `> ` request, got {line}"));
            let req: Value = serde_json::from_str(req).expect("example requests are JSON");
            let sent = Arc::new(Mutex::new(Vec::new()));
            let sink = sent.clone();
            let notify: Notify = Arc::new(move |v| sink.lock().push(v));
            let answer = d.handle(&req, &notify);
            let mut got: Vec<Value> = sent.lock().clone();
            got.extend(answer);
            let mut want = Vec::new();
            while let Some(l) = lines.next_if(|l| l.starts_with("< ")) {
                want.push(serde_json::from_str::<Value>(&l[2..]).expect("examples are JSON"));
            }
            assert_eq!(
                want.len(),
                got.len(),
                "block {n}, request {req}: expected {want:?}, got {got:?}"
            );
            for (w, g) in want.iter().zip(&got) {
                assert!(
                    shows(w, g),
                    "block {n}, request {req}:\n want {w}\n got  {g}"
                );
                checked += 1;
            }
        }
    }
    assert!(checked > 30, "only {checked} answers checked");
}

// ---- atomic runs, receipts, portable state over JSON-RPC (docs/runs.md) ----

#[test]
fn run_results_carry_usage_and_atomic_runs_roll_back() {
    let d = d();
    call(&d, "run", json!({"command": "echo keep > f"})).unwrap();
    let r = call(
        &d,
        "run",
        json!({"command": "echo gone > f; touch g; false", "atomic": true}),
    )
    .unwrap();
    assert_eq!(r["exitCode"], 1);
    assert_eq!(r["rolledBack"], true);
    assert_eq!(r["usage"]["filesCreated"], 1);
    let r = call(&d, "run", json!({"command": "cat f; ls"})).unwrap();
    assert_eq!(r["stdout"], "keep\nf\n");
    assert!(r.get("rolledBack").is_none());
    assert!(r["usage"]["peakMemoryBytes"].as_u64().unwrap() > 0);
    let e = call(&d, "run", json!({"command": "true", "atomic": "yes"})).unwrap_err();
    assert_eq!(e.code, code::INVALID_PARAMS);
}

#[test]
fn export_and_import_replace_the_root() {
    let a = d();
    call(
        &a,
        "run",
        json!({"command": "mkdir w && echo 1 > w/n && cd w && X=5"}),
    )
    .unwrap();
    let key = base64::engine::general_purpose::STANDARD.encode(b"k");
    let blob = call(&a, "sandbox.export", json!({"key": key})).unwrap()["data"].clone();
    let b = d();
    let child = fork(&b, None);
    call(&b, "sandbox.import", json!({"data": blob, "key": key})).unwrap();
    let r = call(&b, "run", json!({"command": "pwd; cat n; echo $X"})).unwrap();
    assert_eq!(r["stdout"], "/home/user/w\n1\n5\n");
    // Forks made before are left as they were.
    let r = call(&b, "run", json!({"command": "pwd", "sandboxId": child})).unwrap();
    assert_eq!(r["stdout"], "/home/user\n");
    // A bad blob changes nothing.
    let e = call(&b, "sandbox.import", json!({"data": "aGVsbG8="})).unwrap_err();
    assert_eq!(e.code, code::INVALID_PARAMS);
    assert!(
        e.message.contains("not a wasmsand state blob"),
        "{}",
        e.message
    );
    let e = call(&b, "sandbox.import", json!({"data": blob})).unwrap_err();
    assert!(e.message.contains("give the key"), "{}", e.message);
    assert_eq!(
        call(&b, "run", json!({"command": "cat n"})).unwrap()["stdout"],
        "1\n"
    );
    let e = call(
        &b,
        "sandbox.import",
        json!({"data": blob, "sandboxId": child}),
    )
    .unwrap_err();
    assert_eq!(e.code, code::INVALID_PARAMS);
}

// ---- fork merge-back, runs without a receipt (docs/runs.md) ----

#[test]
fn merge_applies_a_forks_changes_and_reports_conflicts_with_their_kinds() {
    let d = d();
    call(
        &d,
        "run",
        json!({"command": "echo a > a; echo b > b; export X=1"}),
    )
    .unwrap();
    let f = fork(&d, None);
    call(
        &d,
        "run",
        json!({"command": "echo a2 > a; export Y=fork; cd /tmp", "sandboxId": f}),
    )
    .unwrap();
    let r = call(
        &d,
        "sandbox.merge",
        json!({"from": f, "env": true, "cwd": true}),
    )
    .unwrap();
    assert_eq!(
        r["applied"],
        json!([{"path": "/home/user/a", "change": "changed"}])
    );
    assert_eq!(
        (&r["added"], &r["changed"], &r["deleted"]),
        (&json!(0), &json!(1), &json!(0))
    );
    assert_eq!(r["env"], json!(["Y"]));
    assert_eq!(r["cwd"], "/tmp");
    let r = call(&d, "run", json!({"command": "pwd; cat ~/a; echo $Y"})).unwrap();
    assert_eq!(r["stdout"], "/tmp\na2\nfork\n");

    // Both sides change b, and the fork deletes a the parent changed: two conflicts, and
    // the fork's new file c is not applied either.
    call(
        &d,
        "run",
        json!({"command": "cd; echo mine > b; echo a3 > a"}),
    )
    .unwrap();
    call(
        &d,
        "run",
        json!({"command": "cd; echo theirs > b; rm a; echo c > c", "sandboxId": f}),
    )
    .unwrap();
    let e = call(&d, "sandbox.merge", json!({"from": f})).unwrap_err();
    assert_eq!(e.code, code::SANDBOX_ERROR);
    assert_eq!(e.kind(), Some(kind::MERGE_CONFLICT));
    assert_eq!(
        e.data.as_ref().unwrap()["conflicts"],
        json!([
            {"path": "/home/user/a", "ours": "changed", "theirs": "deleted"},
            {"path": "/home/user/b", "ours": "changed", "theirs": "changed"},
        ])
    );
    let r = call(&d, "run", json!({"command": "cat a b; ls"})).unwrap();
    assert_eq!(r["stdout"], "a3\nmine\na\nb\n");
}

#[test]
fn merge_refuses_what_is_not_a_fork_of_the_target() {
    let d = d();
    let f1 = fork(&d, None);
    let f2 = fork(&d, None);
    let grandchild = fork(&d, Some(&f1));
    // A sibling, a grandchild, itself: invalid_params.
    for (target, from) in [(Some(&f1), &f2), (None, &grandchild), (Some(&f1), &f1)] {
        let e = call(
            &d,
            "sandbox.merge",
            json!({"sandboxId": target, "from": from}),
        )
        .unwrap_err();
        assert_eq!(e.code, code::INVALID_PARAMS, "{e}");
        assert_eq!(e.kind(), Some(kind::INVALID_PARAMS), "{e}");
    }
    // The grandchild merges into its own parent.
    call(
        &d,
        "run",
        json!({"command": "echo g > g", "sandboxId": grandchild}),
    )
    .unwrap();
    let r = call(
        &d,
        "sandbox.merge",
        json!({"sandboxId": f1, "from": grandchild}),
    )
    .unwrap();
    assert_eq!(r["added"], 1);
    let e = call(&d, "sandbox.merge", json!({"from": "99"})).unwrap_err();
    assert_eq!(e.kind(), Some(kind::UNKNOWN_SANDBOX));
    let e = call(&d, "sandbox.merge", json!({})).unwrap_err();
    assert_eq!(e.message, "Missing required param: from");
    let e = call(&d, "sandbox.merge", json!({"from": f1, "env": 1})).unwrap_err();
    assert_eq!(e.code, code::INVALID_PARAMS);
}

#[test]
fn a_run_without_usage_has_only_its_wall_time() {
    let d = d();
    let r = call(
        &d,
        "run",
        json!({"command": "echo hi | wc -c > n", "usage": false}),
    )
    .unwrap();
    assert_eq!(r["exitCode"], 0);
    assert_eq!(r["usage"]["processes"], 0);
    assert_eq!(r["usage"]["filesCreated"], 0);
    let r = call(&d, "run", json!({"command": "echo hi | wc -c > m"})).unwrap();
    assert_eq!(r["usage"]["filesCreated"], 1);
    assert!(r["usage"]["processes"].as_u64().unwrap() >= 2);
    let e = call(&d, "run", json!({"command": "true", "usage": "no"})).unwrap_err();
    assert_eq!(e.code, code::INVALID_PARAMS);
}
