//! JSON-RPC over the real `sandboxd` binary: fork routing, destroy, kill, RunResult
//! passthrough, transport limits, streaming, concurrency and shutdown.

use super::common;

use std::time::Duration;

use common::Daemon;
use serde_json::{Value, json};

fn fork(d: &mut Daemon, from: Option<&str>) -> String {
    let r = d.call("sandbox.fork", json!({"sandboxId": from}));
    r["sandboxId"]
        .as_str()
        .expect("sandboxId is a string")
        .to_string()
}

#[test]
fn fork_routing_by_sandbox_id() {
    let mut d = Daemon::start(&[]);
    let f = fork(&mut d, None);

    // run and files.* reach the fork named, and only it.
    let r = d.call(
        "run",
        json!({"command": "echo forked > /tmp/who; echo hello", "sandboxId": f}),
    );
    assert_eq!(r["stdout"], "hello\n");
    let r = d.call("files.read", json!({"path": "/tmp/who", "sandboxId": f}));
    assert_eq!(r["data"], "Zm9ya2VkCg==");
    let e = d.call_err("files.read", json!({"path": "/tmp/who"}));
    assert_eq!(e["data"]["errno"], "ENOENT");

    // No sandboxId, or null, is the root.
    d.call(
        "files.write",
        json!({"path": "/tmp/root", "data": "cm9vdA=="}),
    );
    let r = d.call(
        "run",
        json!({"command": "cat /tmp/root", "sandboxId": null}),
    );
    assert_eq!(r["stdout"], "root");
    let e = d.call_err("files.read", json!({"path": "/tmp/root", "sandboxId": f}));
    assert_eq!(e["data"]["errno"], "ENOENT");

    // Unknown and ill-typed ids.
    let e = d.call_err("run", json!({"command": "echo hello", "sandboxId": "999"}));
    assert_eq!(e["code"], -32602);
    assert_eq!(e["message"], "Unknown sandboxId: 999");
    let e = d.call_err("files.read", json!({"path": "/tmp/x", "sandboxId": 7}));
    assert_eq!(e["code"], -32602);
    assert_eq!(e["message"], "sandboxId must be a string");
}

#[test]
fn fork_from_fork_destroy_and_ids_never_reused() {
    let mut d = Daemon::start(&[]);
    let f1 = fork(&mut d, None);
    d.call(
        "env.set",
        json!({"name": "GEN", "value": "first", "sandboxId": f1}),
    );
    let f2 = fork(&mut d, Some(&f1));
    assert_ne!(f1, f2);
    let r = d.call("run", json!({"command": "echo $GEN", "sandboxId": f2}));
    assert_eq!(r["stdout"], "first\n");
    let list = d.call("sandbox.list", json!({}));
    assert_eq!(
        list,
        json!([{"sandboxId": f1, "parent": null}, {"sandboxId": f2, "parent": f1}])
    );

    assert_eq!(
        d.call("sandbox.destroy", json!({"sandboxId": f1})),
        json!({"ok": true})
    );
    let e = d.call_err("run", json!({"command": "echo hello", "sandboxId": f1}));
    assert_eq!(e["code"], -32602);
    assert_eq!(e["message"], format!("Unknown sandboxId: {f1}"));
    // The fork of a destroyed fork lives on.
    let r = d.call("env.get", json!({"name": "GEN", "sandboxId": f2}));
    assert_eq!(r["value"], "first");

    let e = d.call_err("sandbox.destroy", json!({}));
    assert_eq!(e["code"], -32602);
    let e = d.call_err("sandbox.destroy", json!({"sandboxId": f1}));
    assert_eq!(e["message"], format!("Unknown sandboxId: {f1}"));

    let f3 = fork(&mut d, None);
    assert!(f3 != f1 && f3 != f2, "ids {f1} {f2} then {f3}");
}

#[test]
fn run_result_passes_truncated_and_error_class_through() {
    let mut d = Daemon::start(&[]);
    let r = d.call(
        "create",
        json!({"timeoutMs": 300, "limits": {"stdoutBytes": 5}}),
    );
    assert_eq!(r, json!({"ok": true}));
    let r = d.call("run", json!({"command": "echo hello world"}));
    assert_eq!(r["stdout"], "hello");
    assert_eq!(r["truncated"], json!({"stdout": true, "stderr": false}));
    assert!(r.get("errorClass").is_none());
    let r = d.call("run", json!({"command": "sleep 10"}));
    assert_eq!(r["exitCode"], 124);
    assert_eq!(r["errorClass"], "TIMEOUT");
    // Forks inherit the limits.
    let f = fork(&mut d, None);
    let r = d.call(
        "run",
        json!({"command": "echo hello world", "sandboxId": f}),
    );
    assert_eq!(r["truncated"]["stdout"], true);
}

#[test]
fn run_result_omits_optional_fields_when_absent() {
    let mut d = Daemon::start(&[]);
    let r = d.call("run", json!({"command": "echo hello"}));
    let keys: Vec<&String> = r.as_object().unwrap().keys().collect();
    // `usage`, the run's receipt, is in every result; `truncated`, `errorClass` and
    // `rolledBack` only when set.
    assert_eq!(
        keys,
        ["executionTimeMs", "exitCode", "stderr", "stdout", "usage"]
    );
    assert_eq!(r["stdout"], "hello\n");
    assert_eq!(r["usage"]["processes"], 0);
}

#[test]
fn create_is_first_or_not_at_all() {
    let mut d = Daemon::start(&[]);
    d.call(
        "create",
        json!({"wasmDir": "/unused", "limits": {"commandBytes": 8}}),
    );
    let e = d.call_err("create", json!({}));
    assert_eq!(
        e,
        json!({"code": -32600, "message": "Sandbox already created", "data": {"kind": "invalid_request"}})
    );
    let r = d.call("run", json!({"command": "echo much too long"}));
    assert_eq!(r["errorClass"], "LIMIT_EXCEEDED");
    assert!(
        r["stderr"]
            .as_str()
            .unwrap()
            .starts_with("command too long")
    );

    let mut d = Daemon::start(&[]);
    d.call("run", json!({"command": "true"}));
    let e = d.call_err("create", json!({}));
    assert_eq!(e["code"], -32600);
}

#[test]
fn every_file_env_and_snapshot_method() {
    let mut d = Daemon::start(&[]);
    assert_eq!(
        d.call("files.mkdir", json!({"path": "/tmp/d/e"})),
        json!({"ok": true})
    );
    d.call("files.write", json!({"path": "/tmp/d/f", "data": "aGk="}));
    let r = d.call("files.list", json!({"path": "/tmp/d"}));
    assert_eq!(
        r,
        json!({"entries": [{"name": "e", "type": "dir", "size": 0}, {"name": "f", "type": "file", "size": 2}]})
    );
    let r = d.call("files.stat", json!({"path": "/tmp/d/f"}));
    assert_eq!(r, json!({"name": "f", "type": "file", "size": 2}));
    let e = d.call_err("files.rm", json!({"path": "/tmp/d"}));
    assert_eq!(e["data"]["errno"], "ENOTEMPTY");
    d.call("files.rm", json!({"path": "/tmp/d", "recursive": true}));
    let e = d.call_err("files.stat", json!({"path": "/tmp/d"}));
    assert_eq!(e["code"], 1);
    assert_eq!(e["data"]["errno"], "ENOENT");
    let e = d.call_err("files.write", json!({"path": "/usr/x", "data": ""}));
    assert_eq!(e["data"]["errno"], "EROFS");

    d.call("env.set", json!({"name": "COLOR", "value": "blue"}));
    assert_eq!(
        d.call("env.get", json!({"name": "COLOR"})),
        json!({"value": "blue"})
    );
    assert_eq!(
        d.call("env.get", json!({"name": "UNSET_ONE"})),
        json!({"value": null})
    );

    let snap = d.call("snapshot.create", json!({}))["id"].clone();
    d.call(
        "run",
        json!({"command": "echo changed > /tmp/s; export COLOR=red"}),
    );
    assert_eq!(
        d.call("snapshot.restore", json!({"id": snap})),
        json!({"ok": true})
    );
    let r = d.call("run", json!({"command": "cat /tmp/s; echo $COLOR"}));
    assert_eq!(r["stdout"], "blue\n");
}

#[test]
fn protocol_errors() {
    let mut d = Daemon::start(&[]);
    d.send_raw(b"{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\n");
    let r = d.next_raw();
    assert_eq!(
        r,
        json!({"jsonrpc": "2.0", "id": null, "error": {"code": -32700, "message": "Parse error", "data": {"kind": "parse_error"}}})
    );

    let e = d.call_err("no.such.method", json!({}));
    assert_eq!(
        e,
        json!({"code": -32601, "message": "Method not found: no.such.method", "data": {"kind": "method_not_found"}})
    );

    let e = d.call_err("run", json!({"command": ["echo"]}));
    assert_eq!(
        e,
        json!({"code": -32602, "message": "Invalid param: command must be a string", "data": {"kind": "invalid_params"}})
    );
    let e = d.call_err("run", json!({}));
    assert_eq!(e["message"], "Missing required param: command");
    let e = d.call_err(
        "files.write",
        json!({"path": "/tmp/x", "data": "not base64!"}),
    );
    assert_eq!(e["code"], -32602);
    let e = d.call_err("files.rm", json!({"path": "/tmp/x", "recursive": "yes"}));
    assert_eq!(e["code"], -32602);

    d.send(&json!({"jsonrpc": "2.0", "id": 77}));
    assert_eq!(d.next_raw()["error"]["code"], -32600);
    d.send(&json!({"jsonrpc": "2.0", "id": 78, "method": "run", "params": "echo"}));
    assert_eq!(
        d.next_raw(),
        json!({"jsonrpc": "2.0", "id": 78,
        "error": {"code": -32602, "message": "params must be an object", "data": {"kind": "invalid_params"}}})
    );
    d.send(&json!([1, 2]));
    let r = d.next_raw();
    assert_eq!(
        (r["id"].clone(), r["error"]["code"].clone()),
        (Value::Null, json!(-32600))
    );
    d.send(&json!({"no": "protocol"}));
    assert_eq!(d.next_raw()["error"]["code"], -32600);

    // A notification is run and not answered: the next line is the answer to what follows.
    d.send(&json!({"jsonrpc": "2.0", "method": "env.set", "params": {"name": "N", "value": "1"}}));
    d.send(&json!({"jsonrpc": "2.0", "method": "no.such"}));
    let id = d.request("env.get", json!({"name": "N"}));
    let r = d.next_raw();
    assert_eq!(r["id"], id);
    assert_eq!(r["result"]["value"], "1");

    // Still serving.
    assert_eq!(
        d.call("run", json!({"command": "echo ok"}))["stdout"],
        "ok\n"
    );
}

// Threat: T-RPC-ABUSE (docs/security.md)
#[test]
fn oversized_line_is_refused_and_the_next_line_works() {
    let mut d = Daemon::start(&[]);
    // Over the 8 MiB default, in one JSON request that would otherwise be valid.
    let big = "a".repeat(9 * 1024 * 1024);
    let line = format!(
        "{{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"files.write\",\"params\":{{\"path\":\"/tmp/big\",\"data\":\"{big}\"}}}}\n"
    );
    d.send_raw(line.as_bytes());
    let r = d.next_raw();
    assert_eq!(
        r,
        json!({"jsonrpc": "2.0", "id": null, "error": {"code": -32700, "message": "Request too large", "data": {"kind": "request_too_large"}}})
    );
    let r = d.call("run", json!({"command": "echo still here"}));
    assert_eq!(r["stdout"], "still here\n");

    // A line just under the cap is read whole.
    let data = "QUJD".repeat(1024 * 1024);
    let r = d.call(
        "files.write",
        json!({"path": "/tmp/four-mib", "data": data}),
    );
    assert_eq!(r, json!({"ok": true}));
    assert_eq!(
        d.call("files.stat", json!({"path": "/tmp/four-mib"}))["size"],
        3 * 1024 * 1024
    );
}

#[test]
fn line_cap_follows_the_flag_and_create() {
    let mut d = Daemon::start(&["--rpc-bytes", "2048"]);
    let r = d.call(
        "files.write",
        json!({"path": "/tmp/a", "data": "QUJD".repeat(400)}),
    );
    assert_eq!(r, json!({"ok": true}));
    d.request(
        "files.write",
        json!({"path": "/tmp/a", "data": "QUJD".repeat(600)}),
    );
    assert_eq!(d.next_raw()["error"]["message"], "Request too large");

    let mut d = Daemon::start(&[]);
    d.call("create", json!({"limits": {"rpcBytes": 1024}}));
    d.request(
        "files.write",
        json!({"path": "/tmp/a", "data": "QUJD".repeat(300)}),
    );
    assert_eq!(d.next_raw()["error"]["code"], -32700);
    assert_eq!(
        d.call("run", json!({"command": "echo ok"}))["stdout"],
        "ok\n"
    );
}

#[test]
fn streaming_run_sends_output_notifications_then_the_result() {
    let mut d = Daemon::start(&[]);
    let id = d.request(
        "run",
        json!({"command": "echo one; echo two >&2; sleep 0.2; echo three", "stream": true}),
    );
    let mut notes = Vec::new();
    let result = loop {
        let v = d.next_raw();
        if v.get("method").is_some() {
            notes.push(v);
        } else {
            break v;
        }
    };
    assert_eq!(result["id"], id);
    assert_eq!(result["result"]["stdout"], "one\nthree\n");
    for n in &notes {
        assert_eq!(n["jsonrpc"], "2.0");
        assert_eq!(n["method"], "output");
        assert!(n.get("id").is_none(), "a notification has no id: {n}");
        assert_eq!(n["params"]["requestId"], id);
    }
    let text = |stream: &str| -> String {
        notes
            .iter()
            .filter(|n| n["params"]["stream"] == stream)
            .map(|n| n["params"]["data"].as_str().unwrap())
            .collect()
    };
    assert_eq!(text("stdout"), "one\nthree\n");
    assert_eq!(text("stderr"), "two\n");

    // Without stream: true, no notifications.
    let id = d.request("run", json!({"command": "echo quiet"}));
    assert_eq!(d.next_raw()["id"], id);
}

#[test]
fn a_long_run_on_one_fork_does_not_delay_another_fork() {
    let mut d = Daemon::start(&[]);
    let a = fork(&mut d, None);
    let b = fork(&mut d, None);
    d.call(
        "files.write",
        json!({"path": "/tmp/f", "data": "Yg==", "sandboxId": b}),
    );
    let run = d.request(
        "run",
        json!({"command": "sleep 2; echo slept", "sandboxId": a}),
    );
    let read = d.request("files.read", json!({"path": "/tmp/f", "sandboxId": b}));
    let root = d.request("run", json!({"command": "echo root"}));
    let first = d.next_raw();
    let second = d.next_raw();
    let third = d.next_raw();
    assert_ne!(first["id"], run, "the long run answered first: {first}");
    assert_ne!(second["id"], run, "the long run answered second: {second}");
    let mut quick = [first["id"].clone(), second["id"].clone()];
    quick.sort_by_key(|v| v.as_u64());
    assert_eq!(quick, [read.clone(), root]);
    assert_eq!(third["id"], run);
    assert_eq!(third["result"]["stdout"], "slept\n");
}

#[test]
fn requests_on_one_sandbox_keep_their_order() {
    let mut d = Daemon::start(&[]);
    let f = fork(&mut d, None);
    let ids: Vec<Value> = vec![
        d.request(
            "run",
            json!({"command": "sleep 0.5; echo 1 > /tmp/n", "sandboxId": f}),
        ),
        d.request("files.read", json!({"path": "/tmp/n", "sandboxId": f})),
        d.request(
            "run",
            json!({"command": "echo 2 >> /tmp/n", "sandboxId": f}),
        ),
        d.request("sandbox.destroy", json!({"sandboxId": f})),
        d.request("files.read", json!({"path": "/tmp/n", "sandboxId": f})),
    ];
    let answers: Vec<Value> = (0..ids.len()).map(|_| d.next_raw()).collect();
    let got: Vec<Value> = answers.iter().map(|a| a["id"].clone()).collect();
    assert_eq!(got, ids);
    assert_eq!(answers[1]["result"]["data"], "MQo=");
    assert_eq!(answers[3]["result"], json!({"ok": true}));
    assert_eq!(
        answers[4]["error"]["message"],
        format!("Unknown sandboxId: {f}")
    );
}

#[test]
fn sixteen_forks_run_concurrently_with_correct_routing() {
    let mut d = Daemon::start(&[]);
    let forks: Vec<String> = (0..16).map(|_| fork(&mut d, None)).collect();
    for f in &forks {
        d.call("env.set", json!({"name": "ME", "value": f, "sandboxId": f}));
    }
    let ids: Vec<(Value, &String)> = forks
        .iter()
        .map(|f| {
            let id = d.request(
                "run",
                json!({"command": "sleep 0.3; echo $ME > /tmp/me; cat /tmp/me", "sandboxId": f}),
            );
            (id, f)
        })
        .collect();
    for (id, f) in &ids {
        let a = d.answer(id);
        assert_eq!(a["result"]["stdout"], format!("{f}\n"), "{a}");
    }
    for f in &forks {
        let r = d.call("files.read", json!({"path": "/tmp/me", "sandboxId": f}));
        let expect = format!("{f}\n");
        assert_eq!(r["data"], base64(expect.as_bytes()));
    }
    let e = d.call_err("files.read", json!({"path": "/tmp/me"}));
    assert_eq!(e["data"]["errno"], "ENOENT");
}

fn base64(bytes: &[u8]) -> String {
    use base64::Engine as _;
    base64::engine::general_purpose::STANDARD.encode(bytes)
}

#[test]
fn kill_destroys_everything_and_ends_the_process() {
    let mut d = Daemon::start(&[]);
    let f = fork(&mut d, None);
    // A long command on a fork is cancelled, not waited for.
    d.request("run", json!({"command": "sleep 60", "sandboxId": f}));
    let kill = d.request("kill", json!({}));
    let status = d.wait_exit(Duration::from_secs(20));
    assert!(status.success(), "{status:?}");
    let lines = d.drain();
    let answer = lines
        .iter()
        .find(|v| v["id"] == kill)
        .expect("kill is answered");
    assert_eq!(answer["result"], json!({"ok": true}));
    assert_eq!(
        lines.last().unwrap()["id"],
        kill,
        "kill's answer is the last line"
    );
}

#[test]
fn end_of_input_answers_what_was_read_then_exits() {
    let mut d = Daemon::start(&[]);
    let a = d.request("run", json!({"command": "sleep 0.5; echo done"}));
    let f = fork(&mut d, None);
    let b = d.request("run", json!({"command": "echo fork done", "sandboxId": f}));
    d.close_stdin();
    let status = d.wait_exit(Duration::from_secs(60));
    assert!(status.success(), "{status:?}");
    let lines = d.drain();
    let find = |id: &Value| lines.iter().find(|v| &v["id"] == id).cloned().unwrap();
    assert_eq!(find(&a)["result"]["stdout"], "done\n");
    assert_eq!(find(&b)["result"]["stdout"], "fork done\n");
}

#[test]
fn server_calls_to_the_client_do_not_disturb_answers() {
    // A client answering with a `cb_` id it was never asked for is ignored, not answered.
    let mut d = Daemon::start(&[]);
    d.send(&json!({"jsonrpc": "2.0", "id": "cb_1", "result": {"ok": true}}));
    let id = d.request("run", json!({"command": "echo after"}));
    let r = d.next_raw();
    assert_eq!(r["id"], id);
}
