//! The line protocol (objects with a `type`) over the real `sandboxd` binary, on the same
//! stdin as JSON-RPC.

use super::common;

use common::Daemon;
use serde_json::{Value, json};

#[test]
fn the_documented_example_session() {
    let mut d = Daemon::start(&["--memory-limit", "128"]);
    d.send_raw(
        br#"{"type":"shell","command":"echo 'Hello'","id":"1","time_limit_ms":1000}
{"type":"write_file","path":"/tmp/test","content":"data","id":"2"}
{"type":"shell","command":"cat /tmp/test","id":"3","time_limit_ms":1000}
{"type":"reset","id":"4"}
{"type":"shell","command":"cat /tmp/test","id":"5"}
"#,
    );
    assert_eq!(
        d.next_raw(),
        json!({"type": "shell", "id": "1", "stdout": "Hello\n", "stderr": "", "exit_code": 0, "timed_out": false})
    );
    assert_eq!(
        d.next_raw(),
        json!({"type": "write_file", "id": "2", "success": true, "error": null})
    );
    assert_eq!(
        d.next_raw(),
        json!({"type": "shell", "id": "3", "stdout": "data", "stderr": "", "exit_code": 0, "timed_out": false})
    );
    assert_eq!(
        d.next_raw(),
        json!({"type": "reset", "id": "4", "success": true})
    );
    let r = d.next_raw();
    assert_eq!(r["id"], "5");
    assert_eq!(r["exit_code"], 1, "reset removed the file: {r}");
}

#[test]
fn read_file_with_both_encodings() {
    let mut d = Daemon::start(&[]);
    d.send(&json!({"type": "write_file", "path": "/tmp/t", "content": "Hello, world!", "id": "w"}));
    assert_eq!(d.next_raw()["success"], true);
    d.send(&json!({"type": "read_file", "path": "/tmp/t", "id": "r1", "encoding": "text"}));
    assert_eq!(
        d.next_raw(),
        json!({"type": "read_file", "id": "r1", "content": "Hello, world!", "success": true, "error": null})
    );
    d.send(&json!({"type": "write_file", "path": "/tmp/b", "content": "AP8=", "encoding": "base64", "id": "w2"}));
    assert_eq!(d.next_raw()["success"], true);
    d.send(&json!({"type": "read_file", "path": "/tmp/b", "encoding": "base64", "id": "r2"}));
    assert_eq!(d.next_raw()["content"], "AP8=");
    d.send(&json!({"type": "read_file", "path": "/tmp/b", "id": "r3"}));
    let r = d.next_raw();
    assert_eq!(
        (r["id"].clone(), r["success"].clone()),
        (json!("r3"), json!(false))
    );
    assert!(r["error"].as_str().unwrap().contains("base64"), "{r}");
    d.send(&json!({"type": "read_file", "path": "/tmp/none", "id": "r4"}));
    let r = d.next_raw();
    assert_eq!(r["content"], Value::Null);
    assert!(r["error"].as_str().unwrap().contains("ENOENT"), "{r}");
}

#[test]
fn write_file_applies_the_octal_mode() {
    let mut d = Daemon::start(&[]);
    d.send(&json!({"type": "write_file", "path": "/tmp/run.sh", "content": "echo ran", "mode": "0755", "id": "w"}));
    assert_eq!(d.next_raw()["success"], true);
    d.send(&json!({"type": "shell", "command": "[ -x /tmp/run.sh ] && /tmp/run.sh", "id": "s"}));
    assert_eq!(d.next_raw()["stdout"], "ran\n");
    d.send(&json!({"type": "write_file", "path": "/tmp/x", "content": "", "mode": "rw-r--r--", "id": "bad"}));
    let r = d.next_raw();
    assert_eq!(
        (r["id"].clone(), r["success"].clone()),
        (json!("bad"), json!(false))
    );
}

#[test]
fn timeouts_default_and_explicit() {
    let mut d = Daemon::start(&[]);
    d.send(&json!({"type": "shell", "command": "echo before; sleep 5", "id": "t", "time_limit_ms": 200}));
    let r = d.next_raw();
    assert_eq!(r["id"], "t");
    assert_eq!(r["timed_out"], true);
    assert_eq!(r["exit_code"], Value::Null);
    assert_eq!(r["error"], "Command execution failed: timeout exceeded");
    assert_eq!(r["stdout"], "before\n");
    // The default limit is 5000 ms: a 5.5 s command is stopped.
    d.send(&json!({"type": "shell", "command": "sleep 5.5; echo late", "id": "d"}));
    let r = d.next_raw();
    assert_eq!(r["timed_out"], true, "{r}");
    // And the sandbox is still usable.
    d.send(&json!({"type": "shell", "command": "echo fine", "id": "after"}));
    assert_eq!(d.next_raw()["stdout"], "fine\n");
}

#[test]
fn status_reports_uptime_memory_and_readiness() {
    let mut d = Daemon::start(&["--memory-limit", "64"]);
    d.send(&json!({"type": "status", "id": "s1"}));
    let r = d.next_raw();
    let keys: Vec<&String> = r.as_object().unwrap().keys().collect();
    assert_eq!(
        keys,
        [
            "id",
            "memory_limit_bytes",
            "memory_used_bytes",
            "ready",
            "type",
            "uptime_ms"
        ]
    );
    assert_eq!(r["memory_limit_bytes"], 64 * 1024 * 1024);
    assert_eq!(r["ready"], true);
    let before = r["memory_used_bytes"].as_u64().unwrap();
    d.send(
        &json!({"type": "write_file", "path": "/tmp/k", "content": "x".repeat(4096), "id": "w"}),
    );
    d.next_raw();
    d.send(&json!({"type": "status", "id": "s2"}));
    let r = d.next_raw();
    assert!(
        r["memory_used_bytes"].as_u64().unwrap() >= before + 4096,
        "{r}"
    );
}

// Threat: T-RPC-ABUSE (docs/security.md)
#[test]
fn malformed_requests_still_echo_their_id() {
    let mut d = Daemon::start(&[]);
    d.send_raw(b"{\"type\":\"shell\",\"id\":\"m1\",\"command\": }\n");
    let r = d.next_raw();
    assert_eq!(
        (r["type"].clone(), r["id"].clone()),
        (json!("shell"), json!("m1"))
    );
    assert!(
        r["error"].as_str().unwrap().starts_with("invalid JSON"),
        "{r}"
    );
    assert_eq!(r["exit_code"], Value::Null);

    d.send(&json!({"type": "shell", "id": "m2"}));
    let r = d.next_raw();
    assert_eq!(r["id"], "m2");
    assert_eq!(r["error"], "missing required field: command");

    d.send(&json!({"type": "write_file", "id": "m3", "path": "/tmp/x"}));
    let r = d.next_raw();
    assert_eq!(
        r,
        json!({"type": "write_file", "id": "m3", "success": false, "error": "missing required field: content"})
    );

    d.send(&json!({"type": "launch", "id": "m4"}));
    let r = d.next_raw();
    assert_eq!(r["id"], "m4");
    assert_eq!(r["error"], "unknown request type: launch");

    d.send(&json!({"type": "shell", "command": "echo x", "id": "m5", "time_limit_ms": "soon"}));
    let r = d.next_raw();
    assert_eq!(r["id"], "m5");
    assert!(r["error"].is_string());

    d.send(&json!({"type": "status"}));
    let r = d.next_raw();
    assert_eq!(r["id"], Value::Null);
    assert_eq!(r["error"], "missing required field: id");
}

#[test]
fn both_protocols_share_stdin_and_the_root() {
    let mut d = Daemon::start(&[]);
    d.call(
        "files.write",
        json!({"path": "/tmp/shared", "data": "cnBj"}),
    );
    d.call("env.set", json!({"name": "FROM_RPC", "value": "yes"}));
    d.send(&json!({"type": "shell", "command": "cat /tmp/shared; echo \" $FROM_RPC\"; cd /tmp", "id": "1"}));
    assert_eq!(d.next_raw()["stdout"], "rpc yes\n");
    // reset puts the root back as it started: files, variables and cwd.
    d.send(&json!({"type": "reset", "id": "2"}));
    assert_eq!(d.next_raw()["success"], true);
    let r = d.call(
        "run",
        json!({"command": "pwd; echo \"[$FROM_RPC]\"; ls /tmp"}),
    );
    assert_eq!(r["stdout"], "/home/user\n[]\n");
    // Forks are untouched by reset.
    let f = d.call("sandbox.fork", json!({}))["sandboxId"].clone();
    d.call(
        "files.write",
        json!({"path": "/tmp/f", "data": "", "sandboxId": f}),
    );
    d.send(&json!({"type": "reset", "id": "3"}));
    d.next_raw();
    d.call("files.stat", json!({"path": "/tmp/f", "sandboxId": f}));
}
