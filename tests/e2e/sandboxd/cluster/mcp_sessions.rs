//! One notion of session (issue 27, item 3): a session made through `/mcp` is the service's
//! own — listed by the REST API with the same id, reached by REST runs and the file API,
//! hibernated and woken, kept across a SIGKILL and a restart, its snapshots and forks the
//! service's — and `sandboxd mcp --service URL` serves the same tools on stdio.

use std::time::{Duration, Instant};

use reqwest::StatusCode;
use rmcp::model::{CallToolRequestParams, CallToolResult, ProgressNotificationParam};
use rmcp::service::RunningService;
use rmcp::transport::{StreamableHttpClientTransport, TokioChildProcess};
use rmcp::{RoleClient, ServiceExt};
use serde_json::{Value, json};
use tokio::sync::mpsc;

use super::durable::sh;
use super::replicas::Replica;
use crate::service::mcp::Recorder;

const PATIENCE: Duration = Duration::from_secs(180);

type Client = RunningService<RoleClient, Recorder>;

async fn within<F: Future>(f: F) -> F::Output {
    tokio::time::timeout(PATIENCE, f)
        .await
        .expect("an answer in time")
}

async fn over_http(r: &Replica) -> (Client, mpsc::UnboundedReceiver<ProgressNotificationParam>) {
    let (tx, rx) = mpsc::unbounded_channel();
    let transport = StreamableHttpClientTransport::from_uri(format!("{}/mcp", r.url));
    let client = within(Recorder { tx }.serve(transport))
        .await
        .expect("MCP handshake");
    (client, rx)
}

async fn call(client: &Client, tool: &str, args: Value) -> CallToolResult {
    let params = CallToolRequestParams::new(tool.to_string())
        .with_arguments(args.as_object().unwrap().clone());
    within(client.call_tool(params)).await.unwrap()
}

/// A tool call that must succeed; its structured answer.
async fn ok(client: &Client, tool: &str, args: Value) -> Value {
    let r = call(client, tool, args).await;
    assert_ne!(r.is_error, Some(true), "{tool}: {:?}", r.content);
    r.structured_content.expect("structured content")
}

async fn rest(
    c: &reqwest::Client,
    m: reqwest::Method,
    url: String,
    body: Option<Value>,
) -> (StatusCode, Value) {
    let mut rb = c.request(m, url);
    if let Some(b) = body {
        rb = rb.json(&b);
    }
    let resp = rb.send().await.unwrap();
    let s = resp.status();
    let text = resp.text().await.unwrap();
    (
        s,
        serde_json::from_str(&text).unwrap_or(Value::String(text)),
    )
}

async fn sessions(c: &reqwest::Client, r: &Replica) -> Value {
    let (s, v) = rest(c, reqwest::Method::GET, r.api("/sessions"), None).await;
    assert_eq!(s, StatusCode::OK, "{v}");
    v
}

fn item<'a>(list: &'a Value, id: &str) -> &'a Value {
    list["items"]
        .as_array()
        .unwrap()
        .iter()
        .find(|i| i["session_id"] == id)
        .unwrap_or_else(|| panic!("{id} not listed in {list}"))
}

async fn state_of(c: &reqwest::Client, r: &Replica, id: &str) -> String {
    item(&sessions(c, r).await, id)["state"]
        .as_str()
        .unwrap()
        .to_string()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_mcp_session_is_a_service_session_that_survives_a_crash() {
    let dir = tempfile::tempdir().unwrap();
    let store = format!("sqlite:{}", dir.path().join("store.db").display());
    let c = reqwest::Client::new();
    let mut a = Replica::start(&store, &[("SANDBOX_HIBERNATE_AFTER_SEC", "1")]);
    let (mcp, _) = over_http(&a).await;

    // Made through MCP, with MCP's own limits: listed by REST under the same id.
    let made = ok(
        &mcp,
        "session_create",
        json!({"limits": {"stdout_bytes": 64}}),
    )
    .await;
    let sid = made["session_id"].as_str().unwrap().to_string();
    assert_eq!(made["limits"]["stdout_bytes"], 64, "{made}");
    let list = sessions(&c, &a).await;
    let it = item(&list, &sid);
    assert_eq!(
        (&it["runtime"], &it["labels"]["source"]),
        (&json!("wasm"), &json!("mcp")),
        "{it}"
    );
    let (s, admin) = rest(&c, reqwest::Method::GET, a.api("/admin/sessions"), None).await;
    assert_eq!(s, StatusCode::OK, "{admin}");
    item(&admin, &sid);

    // Both doors reach the same files and the same shell.
    ok(
        &mcp,
        "files_write",
        json!({"session_id": sid, "path": "from_mcp.txt", "content": "m\n"}),
    )
    .await;
    let (s, v) = rest(
        &c,
        reqwest::Method::GET,
        a.api(&format!("/sessions/{sid}/files/stat?path=from_mcp.txt")),
        None,
    )
    .await;
    assert_eq!((s, &v["size"]), (StatusCode::OK, &json!(2)), "{v}");
    let r = c
        .put(a.api(&format!("/sessions/{sid}/files/content?path=from_rest.txt")))
        .body("r\n")
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::OK);
    let read = ok(
        &mcp,
        "files_read",
        json!({"session_id": sid, "path": "from_rest.txt"}),
    )
    .await;
    assert_eq!(read["content"], "r\n");
    let ran = ok(
        &mcp,
        "sandbox_run",
        json!({"session_id": sid, "command": "export FROM_MCP=yes; cd /tmp"}),
    )
    .await;
    assert_eq!(ran["exit_code"], 0, "{ran}");
    let (done, out) = sh(&c, &a, &sid, "echo $FROM_MCP; pwd").await;
    assert_eq!(done["phase"], "completed", "{done}");
    assert_eq!(out, "yes\n/tmp\n");
    // MCP's stdout limit holds in its session.
    let ran = ok(
        &mcp,
        "sandbox_run",
        json!({"session_id": sid, "command": "seq 1 100"}),
    )
    .await;
    assert_eq!(ran["truncated"]["stdout"], true, "{ran}");

    // A REST session of the same user is one of MCP's sessions too.
    let (s, v) = rest(
        &c,
        reqwest::Method::POST,
        a.api("/sessions"),
        Some(json!({"spec_version": "1.0"})),
    )
    .await;
    assert_eq!(s, StatusCode::CREATED, "{v}");
    let rest_sid = v["session_id"].as_str().unwrap().to_string();
    let listed = ok(&mcp, "session_list", json!({})).await;
    let ids: Vec<&str> = listed["sessions"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["session_id"].as_str().unwrap())
        .collect();
    assert!(
        ids.contains(&sid.as_str()) && ids.contains(&rest_sid.as_str()),
        "{listed}"
    );

    // Idle, it hibernates like any session; the next MCP call wakes it.
    let deadline = Instant::now() + Duration::from_secs(60);
    while state_of(&c, &a, &sid).await != "hibernated" {
        assert!(Instant::now() < deadline, "never hibernated");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    let ran = ok(
        &mcp,
        "sandbox_run",
        json!({"session_id": sid, "command": "cat /home/user/from_mcp.txt; echo $FROM_MCP"}),
    )
    .await;
    assert_eq!(ran["stdout"], "m\nyes\n", "{ran}");

    // Snapshots and forks are the service's.
    let snap = ok(&mcp, "snapshot_create", json!({"session_id": sid})).await;
    let snap_id = snap["snapshot_id"].as_str().unwrap().to_string();
    let (_, snaps) = rest(
        &c,
        reqwest::Method::GET,
        a.api(&format!("/sessions/{sid}/snapshots")),
        None,
    )
    .await;
    assert_eq!(
        snaps["items"][0]["snapshot_id"],
        snap_id.as_str(),
        "{snaps}"
    );
    ok(
        &mcp,
        "sandbox_run",
        json!({"session_id": sid, "command": "rm /home/user/from_mcp.txt"}),
    )
    .await;
    let forked = ok(&mcp, "session_fork", json!({"session_id": sid})).await;
    let fork_id = forked["session_id"].as_str().unwrap().to_string();
    let (_, fv) = rest(
        &c,
        reqwest::Method::GET,
        a.api(&format!("/sessions/{fork_id}")),
        None,
    )
    .await;
    assert_eq!(fv["forked_from"], sid.as_str(), "{fv}");

    // SIGKILL, and a new process on the same store: the sessions, their snapshot and fork
    // are there for a new MCP connection.
    drop(mcp);
    a.kill();
    let b = Replica::start(&store, &[]);
    let (mcp, _) = over_http(&b).await;
    // MCP's file tools resolve relative paths from the shell's cwd: /tmp since the run above.
    let r = call(
        &mcp,
        "files_read",
        json!({"session_id": sid, "path": "/home/user/from_mcp.txt"}),
    )
    .await;
    assert_eq!(r.is_error, Some(true), "removed before the crash: {r:?}");
    ok(
        &mcp,
        "snapshot_restore",
        json!({"session_id": sid, "snapshot_id": snap_id}),
    )
    .await;
    let read = ok(
        &mcp,
        "files_read",
        json!({"session_id": sid, "path": "/home/user/from_mcp.txt"}),
    )
    .await;
    assert_eq!(read["content"], "m\n");
    let ran = ok(
        &mcp,
        "sandbox_run",
        json!({"session_id": fork_id, "command": "echo $FROM_MCP; cd /home/user && ls *.txt"}),
    )
    .await;
    assert_eq!(ran["stdout"], "yes\nfrom_rest.txt\n", "{ran}");
    let bad = call(
        &mcp,
        "snapshot_restore",
        json!({"session_id": sid, "snapshot_id": "snap-nope"}),
    )
    .await;
    assert_eq!(bad.is_error, Some(true));
    assert!(
        format!("{:?}", bad.content).contains("unknown snapshot_id"),
        "{bad:?}"
    );

    // Destroyed through MCP: gone for REST.
    ok(&mcp, "session_destroy", json!({"session_id": sid})).await;
    let (s, _) = rest(
        &c,
        reqwest::Method::GET,
        b.api(&format!("/sessions/{sid}")),
        None,
    )
    .await;
    assert_eq!(s, StatusCode::NOT_FOUND);
    let r = call(&mcp, "files_list", json!({"session_id": sid})).await;
    assert_eq!(r.is_error, Some(true));
    assert!(
        format!("{:?}", r.content).contains("unknown session_id"),
        "{r:?}"
    );
    within(mcp.cancel()).await.unwrap();
}

/// `sandboxd mcp --service URL` on stdio: the service's tools and sessions, progress
/// notifications forwarded under the client's token, a cancelled call cancelled at the
/// service; a service that does not answer is a clear error.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_stdio_bridge_serves_the_services_tools() {
    let dir = tempfile::tempdir().unwrap();
    let store = format!("sqlite:{}", dir.path().join("store.db").display());
    let c = reqwest::Client::new();
    let a = Replica::start(&store, &[]);
    let mut cmd = tokio::process::Command::new(env!("CARGO_BIN_EXE_e2e-sandboxd"));
    cmd.args(["mcp", "--service", &format!("{}/mcp", a.url)]);
    let (tx, mut progress) = mpsc::unbounded_channel();
    let bridge = within(Recorder { tx }.serve(TokioChildProcess::new(cmd).unwrap()))
        .await
        .expect("MCP handshake through the bridge");
    let tools = within(bridge.list_all_tools()).await.unwrap();
    assert!(
        tools.iter().any(|t| t.name == "session_create"),
        "{tools:?}"
    );

    let made = ok(&bridge, "session_create", json!({})).await;
    let sid = made["session_id"].as_str().unwrap().to_string();
    item(&sessions(&c, &a).await, &sid);

    // Progress through the bridge, under the client's own token. Requests the bridge answers
    // itself move the client's token counter past the bridge's own, so the tokens differ
    // and a notification forwarded under the wrong one would be noticed.
    for _ in 0..3 {
        let _ = within(bridge.list_resources(None)).await;
    }
    let params = CallToolRequestParams::new("sandbox_run").with_arguments(
        json!({"session_id": sid, "command": "for i in 1 2 3; do echo line$i; sleep 0.2; done"})
            .as_object()
            .unwrap()
            .clone(),
    );
    let handle = within(bridge.send_cancellable_request(
        rmcp::model::ClientRequest::CallToolRequest(rmcp::model::CallToolRequest::new(params)),
        rmcp::service::PeerRequestOptions::no_options(),
    ))
    .await
    .unwrap();
    let token = handle.progress_token.clone();
    let answer = within(handle.await_response()).await.unwrap();
    let rmcp::model::ServerResult::CallToolResult(r) = answer else {
        panic!("{answer:?}")
    };
    assert_eq!(
        r.structured_content.unwrap()["stdout"],
        "line1\nline2\nline3\n"
    );
    // Forwarded notifications may trail the answer: read until the last line came.
    let mut seen = String::new();
    while !seen.contains("line3") {
        let p = within(progress.recv())
            .await
            .expect("progress notifications");
        assert_eq!(p.progress_token, token);
        seen.push_str(p.message.as_deref().unwrap_or(""));
    }
    assert!(seen.starts_with("line1"), "{seen:?}");

    // Tool errors pass as they are.
    let r = call(
        &bridge,
        "files_read",
        json!({"session_id": "s-nope", "path": "x"}),
    )
    .await;
    assert_eq!(r.is_error, Some(true));
    assert!(
        format!("{:?}", r.content).contains("unknown session_id"),
        "{r:?}"
    );
    within(bridge.cancel()).await.unwrap();

    // Nothing answers at the URL: the bridge says so and exits 1.
    let dead = {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let port = l.local_addr().unwrap().port();
        drop(l);
        format!("http://127.0.0.1:{port}/mcp")
    };
    let out = tokio::process::Command::new(env!("CARGO_BIN_EXE_e2e-sandboxd"))
        .args(["mcp", "--service", &dead])
        .stdin(std::process::Stdio::null())
        .output();
    let out = within(out).await.unwrap();
    assert_eq!(out.status.code(), Some(1));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("cannot reach the service") && err.contains(&dead),
        "{err}"
    );
    let out = within(
        tokio::process::Command::new(env!("CARGO_BIN_EXE_e2e-sandboxd"))
            .args(["mcp", "--service", "ftp://x", "--http", "127.0.0.1:0"])
            .output(),
    )
    .await
    .unwrap();
    assert_eq!(
        out.status.code(),
        Some(2),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}
