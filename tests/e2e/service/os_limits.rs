//! The limits the service reports in `limits` are the ones a session's programs meet: a fork
//! flood stops at `SANDBOX_PIDS_LIMIT` with `pids_limit_exceeded`, a program opening files
//! gets `EMFILE` at `SANDBOX_ULIMIT_NOFILE`, and the session works afterwards.

use reqwest::StatusCode;
use serde_json::json;

use super::common::{TestServer, stdout};

// Threat: T-EXHAUST-PROCESSES (docs/security.md)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_fork_flood_ends_with_pids_limit_exceeded_and_the_session_goes_on() {
    let server = TestServer::with(|c| c.pids_limit = 16).await;
    let sid = server.session(json!({})).await;
    let flood = "while :; do sleep 10 & done";
    let (_, frames, st) = server
        .run(json!({ "spec_version": "1.0", "session_id": sid, "command": ["bash", "-c", flood] }))
        .await;
    assert_eq!(st["phase"], "failed", "{st}");
    assert_eq!(st["reason_code"], "pids_limit_exceeded", "{st}");
    assert_eq!(st["exit_code"], 126, "{st}");
    let err = String::from_utf8_lossy(&super::common::output(&frames, "stderr")).to_string();
    assert!(
        err.contains("fork: Resource temporarily unavailable"),
        "{err}"
    );

    // The flood's jobs are gone with it: a pipeline and a second flood behave the same.
    let (_, frames, st) = server
        .run(json!({ "spec_version": "1.0", "session_id": sid, "command": ["bash", "-c", "echo ok | cat | cat"] }))
        .await;
    assert_eq!(st["phase"], "completed", "{st}");
    assert_eq!(stdout(&frames), "ok\n");
    let (_, _, st) = server
        .run(json!({ "spec_version": "1.0", "session_id": sid, "command": ["bash", "-c", flood] }))
        .await;
    assert_eq!(st["reason_code"], "pids_limit_exceeded", "{st}");
    server.stop().await;
}

// Threat: T-EXHAUST-PROCESSES (docs/security.md)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fd_exhaustion_is_emfile_in_the_program_and_the_session_goes_on() {
    let server = TestServer::with(|c| c.ulimit_nofile = 64).await;
    let sid = server.session(json!({})).await;
    let script = "
import errno
fs = []
try:
    while True:
        fs.append(open('/tmp/f%d' % len(fs), 'w'))
except OSError as e:
    print(errno.errorcode[e.errno], len(fs))
";
    let (_, frames, st) = server
        .run(json!({ "spec_version": "1.0", "session_id": sid, "command": ["python3", "-c", script] }))
        .await;
    assert_eq!(st["phase"], "completed", "{st}");
    let out = stdout(&frames);
    let mut words = out.split_whitespace();
    // EMFILE in WASI's numbering (33), as the guest's libc names it.
    assert_eq!(words.next(), Some("EMFILE"), "{out}");
    let count: usize = words.next().and_then(|w| w.parse().ok()).expect(&out);
    assert!(count < 64, "{out}");

    let (_, frames, st) = server
        .run(json!({ "spec_version": "1.0", "session_id": sid, "command": ["bash", "-c", "test -f /tmp/f0 && echo ok | cat"] }))
        .await;
    assert_eq!(st["phase"], "completed", "{st}");
    assert_eq!(stdout(&frames), "ok\n");
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn background_processes_hold_the_sessions_pids() {
    let server = TestServer::with(|c| c.pids_limit = 2).await;
    let sid = server.session(json!({})).await;
    let procs = format!("/sessions/{sid}/processes");
    let long = json!({ "command": "sleep 600", "timeout_ms": 600000 });
    for _ in 0..2 {
        let (s, _, v) = server.post(&procs, long.clone()).await;
        assert!(s.is_success(), "{s}: {v}");
    }
    let (s, _, v) = server.post(&procs, long.clone()).await;
    assert_eq!(s, StatusCode::TOO_MANY_REQUESTS, "{v}");
    assert_eq!(
        v["error"]["details"]["reason"], "pids_limit_exceeded",
        "{v}"
    );
    // A run needing a process of its own finds none either.
    let (_, _, st) = server
        .run(json!({ "spec_version": "1.0", "session_id": sid, "command": ["bash", "-c", "echo a | cat"] }))
        .await;
    assert_eq!(st["reason_code"], "pids_limit_exceeded", "{st}");
    // Once one is killed its slot is free again.
    let resp = server
        .client
        .post(server.url(&format!("{procs}/1/kill")))
        .send()
        .await
        .unwrap();
    assert!(resp.status().is_success(), "{resp:?}");
    loop {
        let (s, _, v) = server
            .post(&format!("{procs}/1/wait"), serde_json::Value::Null)
            .await;
        assert_eq!(s, StatusCode::OK, "{v}");
        if v["running"] == false {
            break;
        }
    }
    let (_, frames, st) = server
        .run(json!({ "spec_version": "1.0", "session_id": sid, "command": ["bash", "-c", "echo a | cat"] }))
        .await;
    assert_eq!(st["phase"], "completed", "{st}");
    assert_eq!(stdout(&frames), "a\n");
    server.stop().await;
}
