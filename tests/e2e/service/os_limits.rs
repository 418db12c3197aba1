//! The limits the service reports in `limits` are the ones a session's programs meet: a fork
//! flood stops at `SANDBOX_PIDS_LIMIT` with `pids_limit_exceeded`, a program opening files
//! gets `EMFILE` at `SANDBOX_ULIMIT_NOFILE`, and the session works afterwards.

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
