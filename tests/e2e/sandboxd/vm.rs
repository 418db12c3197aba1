//! `sandboxd --mode v86` (alias `vm`) over real pipes, against real QEMU and the image
//! `sandboxd images build vm` makes: the `vm` stage of scripts/test.sh builds it and names it
//! in `WASMSAND_TEST_VM_IMAGE` (its saved machine in `WASMSAND_TEST_VM_STATE`). Without it
//! these print "skipped". What needs no machine (refused images) is in `cli.rs`.

use serde_json::json;

use super::common::Daemon;

fn daemon(extra: &[&str]) -> Option<Daemon> {
    let Some(image) = std::env::var_os("WASMSAND_TEST_VM_IMAGE") else {
        eprintln!("skipped: WASMSAND_TEST_VM_IMAGE is not set (scripts/test.sh --only vm)");
        return None;
    };
    let image = image.into_string().unwrap();
    let mut args = vec!["--mode", "v86", "--disk-image", image.as_str()];
    let state = std::env::var("WASMSAND_TEST_VM_STATE").ok();
    if let Some(s) = &state {
        args.extend(["--vm-state-dir", s.as_str()]);
    }
    args.extend(extra);
    Some(Daemon::start(&args))
}

#[test]
fn the_seed_s_example_session_in_a_machine() {
    let Some(mut d) = daemon(&[]) else { return };
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
    assert!(
        r["stderr"].as_str().unwrap().contains("No such file"),
        "{r}"
    );
    d.close_stdin();
    assert!(d.drain().is_empty());
    assert!(d.wait_exit(std::time::Duration::from_secs(60)).success());
}

#[test]
fn timeouts_binary_files_modes_and_status() {
    let Some(mut d) = daemon(&["--memory-limit", "160"]) else {
        return;
    };
    d.send(&json!({"type": "shell", "command": "echo partial; sleep 30", "id": "t", "time_limit_ms": 1500}));
    assert_eq!(
        d.next_raw(),
        json!({
            "type": "shell", "id": "t", "stdout": "partial\n", "stderr": "", "exit_code": null,
            "timed_out": true, "error": "Command execution failed: timeout exceeded",
        })
    );
    // The machine is usable after the timeout, and nothing of the command is left.
    d.send(&json!({"type": "shell", "command": "pgrep -c -x sleep; echo $?", "id": "after"}));
    assert_eq!(d.next_raw()["stdout"], "0\n1\n");

    d.send(&json!({"type": "write_file", "path": "/opt/bin/tool", "content": "IyEvYmluL3NoCmVjaG8gdG9vbAD/", "encoding": "base64", "mode": "0750", "id": "w"}));
    assert_eq!(
        d.next_raw(),
        json!({"type": "write_file", "id": "w", "success": true, "error": null})
    );
    d.send(&json!({"type": "shell", "command": "stat -c %a /opt/bin/tool; od -An -tx1 /opt/bin/tool | tail -n 2 | tr -s ' \\n' ' '", "id": "s"}));
    let r = d.next_raw();
    assert_eq!(
        r["stdout"].as_str().unwrap().lines().next(),
        Some("750"),
        "{r}"
    );
    assert!(r["stdout"].as_str().unwrap().contains("00 ff"), "{r}");
    d.send(&json!({"type": "read_file", "path": "/opt/bin/tool", "encoding": "base64", "id": "r"}));
    assert_eq!(d.next_raw()["content"], "IyEvYmluL3NoCmVjaG8gdG9vbAD/");
    d.send(&json!({"type": "read_file", "path": "/opt/bin/tool", "id": "rt"}));
    let r = d.next_raw();
    assert_eq!(r["success"], false);
    assert_eq!(r["content"], json!(null));
    d.send(&json!({"type": "read_file", "path": "/nonexistent", "id": "rn"}));
    let r = d.next_raw();
    assert_eq!(r["success"], false);
    assert!(r["error"].as_str().unwrap().contains("ENOENT"), "{r}");

    d.send(&json!({"type": "status", "id": "st"}));
    let st = d.next_raw();
    assert_eq!(st["type"], "status");
    assert_eq!(st["ready"], true);
    assert_eq!(st["memory_limit_bytes"], 160u64 << 20);
    let used = st["memory_used_bytes"].as_u64().unwrap();
    assert!(used > 4 << 20 && used < 160 << 20, "{st}");
    assert!(st["uptime_ms"].as_u64().is_some());
    assert!(matches!(st["accel"].as_str(), Some("kvm" | "tcg")), "{st}");

    // JSON-RPC is not this mode's protocol: a clear error, and the stream goes on.
    d.send(&json!({"jsonrpc": "2.0", "id": 7, "method": "run", "params": {"command": "true"}}));
    let e = d.next_raw();
    assert_eq!(e["error"]["code"], -32601);
    d.send_raw(b"{\"type\":\"shell\",\"id\":\"broken\",\n");
    let r = d.next_raw();
    assert_eq!(
        (r["id"].clone(), r["exit_code"].clone()),
        (json!("broken"), json!(null))
    );
    d.send(
        &json!({"type": "shell", "command": "echo still", "id": "last", "time_limit_ms": u64::MAX}),
    );
    assert_eq!(d.next_raw()["stdout"], "still\n");
}

#[test]
fn a_machine_that_powers_off_is_reset_and_the_answer_says_so() {
    let Some(mut d) = daemon(&[]) else { return };
    d.send(&json!({"type": "write_file", "path": "/root/keep", "content": "x", "id": "w"}));
    assert_eq!(d.next_raw()["success"], true);
    d.send(&json!({"type": "shell", "command": "echo o >/proc/sysrq-trigger; sleep 30", "id": "off", "time_limit_ms": 60000}));
    let r = d.next_raw();
    assert_eq!(r["exit_code"], json!(null), "{r}");
    assert_eq!(r["timed_out"], false, "{r}");
    let error = r["error"].as_str().unwrap();
    assert!(error.contains("reset to its pristine state"), "{r}");
    d.send(&json!({"type": "shell", "command": "cat /root/keep 2>&1; echo up", "id": "next"}));
    let r = d.next_raw();
    assert!(r["stdout"].as_str().unwrap().ends_with("up\n"), "{r}");
    assert!(
        r["stdout"].as_str().unwrap().contains("No such file"),
        "{r}"
    );
}
