//! The methods the SDKs' shape needs: chunked `files.write`/`files.read`, `files.rename`, and
//! `run` with a per-run `env` and `cwd`, against a real sandbox.

use std::sync::Arc;

use base64::Engine as _;
use serde_json::{Value, json};
use wasmsand_dispatch::{DispatchConfig, Dispatcher, Notify};

fn call(d: &Dispatcher, method: &str, params: Value) -> Result<Value, Value> {
    let req = json!({"jsonrpc": "2.0", "id": 1, "method": method, "params": params});
    let quiet: Notify = Arc::new(|_| {});
    let resp = d.handle(&req, &quiet).expect("answered");
    match resp.get("error") {
        Some(e) => Err(e.clone()),
        None => Ok(resp["result"].clone()),
    }
}

fn b64(data: &[u8]) -> String {
    base64::engine::general_purpose::STANDARD.encode(data)
}

fn unb64(v: &Value) -> Vec<u8> {
    base64::engine::general_purpose::STANDARD
        .decode(v.as_str().unwrap())
        .unwrap()
}

fn run(d: &Dispatcher, params: Value) -> Value {
    call(d, "run", params).unwrap()
}

#[test]
fn chunks_append_and_read_back_by_range() {
    let d = Dispatcher::new(DispatchConfig::default());
    let data: Vec<u8> = (0..300_000u32).map(|i| (i * 7 % 251) as u8).collect();
    for chunk in data.chunks(65_536) {
        call(
            &d,
            "files.write",
            json!({"path": "/tmp/up/big.bin", "data": b64(chunk), "append": true}),
        )
        .unwrap();
    }
    let mut back = Vec::new();
    let mut offset = 0;
    loop {
        let r = call(
            &d,
            "files.read",
            json!({"path": "/tmp/up/big.bin", "offset": offset, "length": 100_000}),
        )
        .unwrap();
        assert_eq!(r["size"], 300_000);
        let chunk = unb64(&r["data"]);
        if chunk.is_empty() {
            break;
        }
        offset += chunk.len();
        back.extend(chunk);
    }
    assert_eq!(back, data);
    // Past the end: empty, not an error; without a range the old shape.
    let r = call(
        &d,
        "files.read",
        json!({"path": "/tmp/up/big.bin", "offset": 10_000_000}),
    )
    .unwrap();
    assert_eq!(
        (r["data"].as_str(), r["size"].as_u64()),
        (Some(""), Some(300_000))
    );
    let r = call(&d, "files.read", json!({"path": "/tmp/up/big.bin"})).unwrap();
    assert!(r.get("size").is_none());
    assert_eq!(unb64(&r["data"]), data);
    // A plain write still replaces.
    call(
        &d,
        "files.write",
        json!({"path": "/tmp/up/big.bin", "data": b64(b"x")}),
    )
    .unwrap();
    let r = run(&d, json!({"command": "wc -c < /tmp/up/big.bin"}));
    assert_eq!(r["stdout"], "1\n");
}

#[test]
fn append_errors_are_filesystem_errors() {
    let d = Dispatcher::new(DispatchConfig::default());
    let e = call(
        &d,
        "files.write",
        json!({"path": "/etc/passwd", "data": b64(b"x"), "append": true}),
    )
    .unwrap_err();
    assert_eq!(e["data"]["errno"], "EROFS");
    let e = call(
        &d,
        "files.write",
        json!({"path": "/tmp/x", "data": b64(b"x"), "append": "yes"}),
    )
    .unwrap_err();
    assert_eq!(e["code"], -32602);
    let e = call(&d, "files.read", json!({"path": "/tmp/x", "offset": -1})).unwrap_err();
    assert_eq!(e["code"], -32602);
}

#[test]
fn rename_moves_files_and_follows_posix_rules() {
    let d = Dispatcher::new(DispatchConfig::default());
    call(
        &d,
        "files.write",
        json!({"path": "/tmp/a", "data": b64(b"A")}),
    )
    .unwrap();
    call(
        &d,
        "files.write",
        json!({"path": "/tmp/b", "data": b64(b"B")}),
    )
    .unwrap();
    call(
        &d,
        "files.rename",
        json!({"from": "/tmp/a", "to": "/tmp/b"}),
    )
    .unwrap();
    assert_eq!(
        run(&d, json!({"command": "cat /tmp/b; ls /tmp"}))["stdout"],
        "Ab\n"
    );
    // Relative to the session's cwd, as the other file methods.
    run(&d, json!({"command": "cd /tmp"}));
    call(&d, "files.rename", json!({"from": "b", "to": "c"})).unwrap();
    assert_eq!(run(&d, json!({"command": "ls"}))["stdout"], "c\n");
    let e = call(
        &d,
        "files.rename",
        json!({"from": "/tmp/nope", "to": "/tmp/z"}),
    )
    .unwrap_err();
    assert_eq!(e["data"]["errno"], "ENOENT");
    let e = call(
        &d,
        "files.rename",
        json!({"from": "/tmp/c", "to": "/etc/c"}),
    )
    .unwrap_err();
    assert_eq!(e["data"]["errno"], "EROFS");
    call(&d, "files.mkdir", json!({"path": "/tmp/d"})).unwrap();
    let e = call(
        &d,
        "files.rename",
        json!({"from": "/tmp/c", "to": "/tmp/d"}),
    )
    .unwrap_err();
    assert_eq!(e["data"]["errno"], "EISDIR");
    let e = call(&d, "files.rename", json!({"from": "/tmp/c"})).unwrap_err();
    assert_eq!(e["message"], "Missing required param: to");
}

#[test]
fn run_env_and_cwd_hold_for_that_run_only() {
    let d = Dispatcher::new(DispatchConfig::default());
    run(&d, json!({"command": "A=session"}));
    let r = run(
        &d,
        json!({"command": "pwd; echo \"$A|$B\"; printenv B", "cwd": "/tmp",
               "env": {"A": "it's run", "B": "x y"}}),
    );
    assert_eq!(r["stdout"], "/tmp\nit's run|x y\nx y\n", "{r}");
    let r = run(&d, json!({"command": "pwd; echo \"$A|$B\""}));
    assert_eq!(r["stdout"], "/home/user\nsession|\n");
    // The exit status and heredocs are the command's own; a syntax error stays one.
    let r = run(
        &d,
        json!({"command": "cat <<EOF\n$A\nEOF\nexit 3", "env": {"A": "v"}}),
    );
    assert_eq!(
        (r["stdout"].as_str(), r["exitCode"].as_i64()),
        (Some("v\n"), Some(3))
    );
    let plain = run(&d, json!({"command": "echo ok\nif"}));
    let scoped = run(&d, json!({"command": "echo ok\nif", "cwd": "/tmp"}));
    assert_eq!(
        (plain["exitCode"].as_i64(), scoped["exitCode"].as_i64()),
        (Some(2), Some(2))
    );
    assert!(
        scoped["stderr"].as_str().unwrap().contains("syntax error"),
        "{scoped}"
    );
    let r = run(&d, json!({"command": "echo never", "cwd": "/nope"}));
    assert_eq!(r["exitCode"], 1);
    assert!(r["stderr"].as_str().unwrap().contains("/nope"), "{r}");
    for (params, message) in [
        (
            json!({"command": "true", "env": {"1A": "x"}}),
            "is not a variable name",
        ),
        (
            json!({"command": "true", "env": {"A": 1}}),
            "must be a string",
        ),
        (
            json!({"command": "true", "env": ["A"]}),
            "env must be an object",
        ),
        (json!({"command": "true", "cwd": 5}), "cwd must be"),
    ] {
        let e = call(&d, "run", params).unwrap_err();
        assert_eq!(e["code"], -32602);
        assert!(e["message"].as_str().unwrap().contains(message), "{e}");
    }
}

#[test]
fn run_reads_stdin_as_text_or_bytes() {
    let d = Dispatcher::new(DispatchConfig::default());
    let r = run(&d, json!({"command": "tr a-z A-Z", "stdin": "hello\n"}));
    assert_eq!(r["stdout"], "HELLO\n");
    let r = run(
        &d,
        json!({"command": "od -An -tx1", "stdinBase64": b64(&[0, 255, 10])}),
    );
    assert_eq!(r["stdout"].as_str().unwrap().trim(), "00 ff 0a");
    let r = run(
        &d,
        json!({"command": "python3 -c 'print(input()[::-1])'", "stdin": "abc\n"}),
    );
    assert_eq!(r["stdout"], "cba\n", "{r}");
    let e = call(
        &d,
        "run",
        json!({"command": "cat", "stdin": "a", "stdinBase64": "YQ=="}),
    )
    .unwrap_err();
    assert_eq!(e["code"], -32602);
    let e = call(&d, "run", json!({"command": "cat", "stdin": 5})).unwrap_err();
    assert_eq!(e["code"], -32602);
}
