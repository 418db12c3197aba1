//! MCP over streamable HTTP at `/mcp` of the service, with rmcp's own client: the tools are
//! listed, a run works, sessions live across calls, the disabled switch removes the route and
//! a foreign `Host` is refused.

use std::time::Duration;

use rmcp::ServiceExt;
use rmcp::model::CallToolRequestParams;
use rmcp::transport::StreamableHttpClientTransport;
use serde_json::{Value, json};

use super::common::{TestServer, read_until};

const PATIENCE: Duration = Duration::from_secs(180);

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_service_serves_mcp_at_slash_mcp() {
    let server = TestServer::start().await;
    let url = format!("http://{}/mcp", server.addr);
    let client = tokio::time::timeout(
        PATIENCE,
        ().serve(StreamableHttpClientTransport::from_uri(url.clone())),
    )
    .await
    .expect("handshake in time")
    .expect("handshake");
    let tools = client.list_all_tools().await.unwrap();
    let names: Vec<_> = tools.iter().map(|t| t.name.to_string()).collect();
    for want in [
        "sandbox_run",
        "session_create",
        "files_read",
        "snapshot_create",
    ] {
        assert!(
            names.iter().any(|n| n == want),
            "{want} missing from {names:?}"
        );
    }
    let call = |tool: &str, args: Value| {
        CallToolRequestParams::new(tool.to_string())
            .with_arguments(args.as_object().unwrap().clone())
    };
    let ran = client
        .call_tool(call(
            "sandbox_run",
            json!({"command": "echo hi | tr a-z A-Z"}),
        ))
        .await
        .unwrap();
    let out = ran.structured_content.expect("structured result");
    assert_eq!(out["stdout"], "HI\n");
    assert_eq!(out["exit_code"], 0);
    // A session keeps its files between calls.
    let created = client
        .call_tool(call("session_create", json!({})))
        .await
        .unwrap();
    let id = created.structured_content.unwrap()["session_id"]
        .as_str()
        .unwrap()
        .to_owned();
    client
        .call_tool(call(
            "sandbox_run",
            json!({"command": "echo kept > f.txt", "session_id": id}),
        ))
        .await
        .unwrap();
    let read = client
        .call_tool(call(
            "files_read",
            json!({"session_id": id, "path": "f.txt"}),
        ))
        .await
        .unwrap();
    assert_eq!(read.structured_content.unwrap()["content"], "kept\n");
    client.cancel().await.unwrap();

    // DNS rebinding: a request naming another host is refused before MCP sees it.
    let refused = reqwest::Client::new()
        .post(&url)
        .header("host", "evil.example")
        .header("content-type", "application/json")
        .header("accept", "application/json, text/event-stream")
        .body(r#"{"jsonrpc":"2.0","id":1,"method":"ping"}"#)
        .send()
        .await
        .unwrap();
    assert!(refused.status().is_client_error(), "{}", refused.status());
    server.stop().await;

    let off = TestServer::with(|c| c.mcp_enabled = false).await;
    let status = reqwest::Client::new()
        .post(format!("http://{}/mcp", off.addr))
        .header("content-type", "application/json")
        .body("{}")
        .send()
        .await
        .unwrap()
        .status();
    assert_eq!(status, reqwest::StatusCode::NOT_FOUND);
    off.stop().await;
}

/// Runs through `/mcp` are the user's runs: they count against the same quotas as REST runs
/// (here runs per minute), a refusal reaches the MCP client as a tool error naming the
/// quota, and the admin list shows them as the user's.
// Threat: T-SERVICE-EXHAUST (docs/security.md)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mcp_runs_count_against_the_users_quotas() {
    use super::auth::{ALICE_KEY, ROOT_KEY, api_key, auth_server, call as rest};
    use reqwest::{Method, StatusCode};
    use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;

    let srv = auth_server(|c| c.user_runs_per_minute = 2).await;
    let url = format!("http://{}/mcp", srv.addr);
    let headers = std::collections::HashMap::from([(
        axum::http::HeaderName::from_static("x-api-key"),
        axum::http::HeaderValue::from_static(ALICE_KEY),
    )]);
    let transport = StreamableHttpClientTransport::from_config(
        StreamableHttpClientTransportConfig::with_uri(url).custom_headers(headers),
    );
    let client = tokio::time::timeout(PATIENCE, ().serve(transport))
        .await
        .expect("handshake in time")
        .expect("handshake");
    let run = |cmd: &str| {
        CallToolRequestParams::new("sandbox_run")
            .with_arguments(json!({ "command": cmd }).as_object().unwrap().clone())
    };
    for cmd in ["echo one", "exit 3"] {
        let r = client.call_tool(run(cmd)).await.unwrap();
        assert_ne!(r.is_error, Some(true), "{r:?}");
    }
    // The third run within the minute is refused, over MCP and over REST alike.
    let refused = client.call_tool(run("echo three")).await.unwrap();
    assert_eq!(refused.is_error, Some(true), "{refused:?}");
    let text = format!("{:?}", refused.content);
    assert!(
        text.contains("rate_limited") && text.contains("retry after"),
        "{text}"
    );
    let (s, _, v) = rest(
        &srv,
        Method::POST,
        &srv.url("/runs"),
        &[api_key(ALICE_KEY)],
        Some(TestServer::script("true")),
    )
    .await;
    assert_eq!(s, StatusCode::TOO_MANY_REQUESTS, "{v}");
    assert_eq!(v["error"]["details"]["used"], 2, "{v}");
    client.cancel().await.unwrap();

    // Recorded as alice's runs, ended as they ended.
    let (s, _, list) = rest(
        &srv,
        Method::GET,
        &srv.url("/admin/runs?user_id=alice&sort=started_at:asc"),
        &[api_key(ROOT_KEY)],
        None,
    )
    .await;
    assert_eq!(s, StatusCode::OK, "{list}");
    assert_eq!(list["total"], 2, "{list}");
    // Two runs started in the same millisecond list in either order.
    let mut phases: Vec<_> = list["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|i| (i["phase"].as_str().unwrap(), i["exit_code"].as_i64()))
        .collect();
    phases.sort();
    assert_eq!(
        phases,
        [("completed", Some(0)), ("failed", Some(3))],
        "{list}"
    );
}

/// `sandbox_run`'s `runtime`/`base_image` in the service: its in-process runs report the
/// service's run id; a runtime the service cannot serve now (docker disabled), an unknown one
/// and a session with another runtime are tool errors naming the reason, like REST's.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mcp_runs_name_their_runtime_and_the_services_record() {
    let server = TestServer::start().await;
    let client = connect(&server).await;
    let ran = client
        .call_tool(tool(
            "sandbox_run",
            json!({"command": "echo hi", "runtime": "wasm", "base_image": "wasmsand/default"}),
        ))
        .await
        .unwrap();
    let out = ran.structured_content.expect("structured result");
    assert_eq!(
        (out["stdout"].as_str(), out["runtime"].as_str()),
        (Some("hi\n"), Some("wasm"))
    );
    let run_id = out["run_id"].as_str().expect("the service's run id");
    let (s, rec) = server.get(&format!("/runs/{run_id}")).await;
    assert_eq!(s, reqwest::StatusCode::OK, "{rec}");
    assert_eq!(
        (rec["phase"].as_str(), rec["runtime"].as_str()),
        (Some("completed"), Some("wasm"))
    );

    let sid = client
        .call_tool(tool("session_create", json!({})))
        .await
        .unwrap()
        .structured_content
        .unwrap()["session_id"]
        .as_str()
        .unwrap()
        .to_owned();
    let cases = [
        (
            json!({"command": "true", "runtime": "docker"}),
            "runtime_unavailable:",
        ),
        (
            json!({"command": "true", "base_image": "python:3.11-slim"}),
            "runtime_unavailable:",
        ),
        (
            json!({"command": "true", "runtime": "lambda"}),
            "invalid_request:",
        ),
        (
            json!({"command": "true", "runtime": "wasm", "base_image": "nope:1"}),
            "unknown base_image 'nope:1'",
        ),
        (
            json!({"command": "true", "runtime": "docker", "session_id": sid}),
            "invalid_request: a session runs in this server's wasm sandbox",
        ),
    ];
    for (args, want) in cases {
        let r = client
            .call_tool(tool("sandbox_run", args.clone()))
            .await
            .unwrap();
        assert_eq!(r.is_error, Some(true), "{args}: {r:?}");
        let text = format!("{:?}", r.content);
        assert!(text.contains(want), "{args}: {text} should say {want:?}");
    }
    // The docker runtime is off here: the tool's description offers nothing besides wasm.
    let tools = client.list_all_tools().await.unwrap();
    let run_tool = tools.iter().find(|t| t.name == "sandbox_run").unwrap();
    assert!(
        !run_tool
            .description
            .as_deref()
            .unwrap()
            .contains("Other runtimes")
    );
    client.cancel().await.unwrap();
    server.stop().await;
}

/// Records the progress notifications an MCP client receives.
#[derive(Clone)]
pub(crate) struct Recorder {
    pub(crate) tx: tokio::sync::mpsc::UnboundedSender<rmcp::model::ProgressNotificationParam>,
}

impl rmcp::ClientHandler for Recorder {
    async fn on_progress(
        &self,
        params: rmcp::model::ProgressNotificationParam,
        _context: rmcp::service::NotificationContext<rmcp::RoleClient>,
    ) {
        let _ = self.tx.send(params);
    }
}

/// An MCP client of the server's `/mcp`, its handshake done.
pub(crate) async fn connect(
    server: &TestServer,
) -> rmcp::service::RunningService<rmcp::RoleClient, ()> {
    let url = format!("http://{}/mcp", server.addr);
    tokio::time::timeout(
        PATIENCE,
        ().serve(StreamableHttpClientTransport::from_uri(url)),
    )
    .await
    .expect("handshake in time")
    .expect("handshake")
}

pub(crate) fn tool(name: &str, args: Value) -> CallToolRequestParams {
    CallToolRequestParams::new(name.to_string()).with_arguments(args.as_object().unwrap().clone())
}

/// A run's output streams to the `/mcp` client as progress notifications while it runs
/// (stdout and stderr in the order written, `progress` counting the bytes so far), and a run
/// cancelled after its first line ends there, leaving its session usable.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_runs_output_streams_to_the_mcp_client_as_progress() {
    use rmcp::model::{CallToolRequest, ClientRequest};
    use rmcp::service::PeerRequestOptions;

    let server = TestServer::start().await;
    let url = format!("http://{}/mcp", server.addr);
    let (tx, mut progress) = tokio::sync::mpsc::unbounded_channel();
    let client = tokio::time::timeout(
        PATIENCE,
        Recorder { tx }.serve(StreamableHttpClientTransport::from_uri(url)),
    )
    .await
    .expect("handshake in time")
    .expect("handshake");
    let created = client
        .call_tool(tool("session_create", json!({})))
        .await
        .unwrap();
    let sid = created.structured_content.unwrap()["session_id"]
        .as_str()
        .unwrap()
        .to_owned();

    let ran = client
        .call_tool(tool(
            "sandbox_run",
            json!({"session_id": sid, "command": "echo out; echo err >&2; echo more"}),
        ))
        .await
        .unwrap();
    assert_eq!(ran.structured_content.unwrap()["stdout"], "out\nmore\n");
    // The client may hand notifications over out of order: `progress` orders them.
    let want = "out\nerr\nmore\n";
    let mut got = Vec::new();
    while got
        .iter()
        .map(|p: &rmcp::model::ProgressNotificationParam| p.message.as_deref().unwrap().len())
        .sum::<usize>()
        < want.len()
    {
        let p = tokio::time::timeout(PATIENCE, progress.recv())
            .await
            .expect("progress in time")
            .expect("a progress notification");
        got.push(p);
    }
    got.sort_by(|a, b| a.progress.total_cmp(&b.progress));
    let mut streamed = String::new();
    for p in &got {
        streamed.push_str(p.message.as_deref().unwrap());
        assert_eq!(p.progress, streamed.len() as f64, "{got:?}");
    }
    assert_eq!(streamed, want);

    // Ten minutes of work: its first line arrives while it runs, then the client cancels.
    let handle = client
        .send_cancellable_request(
            ClientRequest::CallToolRequest(CallToolRequest::new(tool(
                "sandbox_run",
                json!({"session_id": sid, "command": "echo started; sleep 600; echo never"}),
            ))),
            PeerRequestOptions::no_options(),
        )
        .await
        .expect("request sent");
    let token = handle.progress_token.clone();
    let first = tokio::time::timeout(PATIENCE, progress.recv())
        .await
        .expect("progress in time")
        .expect("a progress notification");
    assert_eq!(first.progress_token, token);
    assert_eq!(first.message.as_deref(), Some("started\n"));
    handle
        .cancel(Some("test".into()))
        .await
        .expect("cancel sent");
    let after = client
        .call_tool(tool(
            "sandbox_run",
            json!({"session_id": sid, "command": "echo $?; echo alive"}),
        ))
        .await
        .unwrap();
    assert_eq!(after.structured_content.unwrap()["stdout"], "130\nalive\n");
    client.cancel().await.unwrap();
    server.stop().await;
}

/// `SANDBOX_MAX_SESSIONS` caps REST and MCP sessions together: past it `session_create` and
/// `session_fork` answer a tool error naming the quota, REST answers 429, and destroying an
/// MCP session makes room for a REST one.
// Threat: T-SERVICE-EXHAUST (docs/security.md)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mcp_sessions_count_against_the_services_session_cap() {
    use reqwest::StatusCode;

    let server = TestServer::with(|c| c.max_sessions = 3).await;
    server.session(json!({})).await;
    let client = connect(&server).await;
    let mut mcp = Vec::new();
    for _ in 0..2 {
        let r = client
            .call_tool(tool("session_create", json!({})))
            .await
            .unwrap();
        assert_ne!(r.is_error, Some(true), "{r:?}");
        mcp.push(r.structured_content.unwrap()["session_id"].clone());
    }
    // 1 REST + 2 MCP: full, whichever way the next one is asked for.
    for (name, args) in [
        ("session_create", json!({})),
        ("session_fork", json!({"session_id": mcp[0]})),
    ] {
        let r = client.call_tool(tool(name, args)).await.unwrap();
        assert_eq!(r.is_error, Some(true), "{name}: {r:?}");
        let text = format!("{:?}", r.content);
        assert!(
            text.contains("quota_exceeded") && text.contains("maximum of 3 sessions"),
            "{text}"
        );
    }
    let (s, _, v) = server
        .post("/sessions", json!({ "spec_version": "1.0" }))
        .await;
    assert_eq!(s, StatusCode::TOO_MANY_REQUESTS, "{v}");
    assert_eq!(v["error"]["code"], "quota_exceeded", "{v}");
    // One MCP session gone: a REST session fits again, and then MCP is full once more.
    let r = client
        .call_tool(tool("session_destroy", json!({"session_id": mcp[1]})))
        .await
        .unwrap();
    assert_ne!(r.is_error, Some(true), "{r:?}");
    server.session(json!({})).await;
    let r = client
        .call_tool(tool("session_create", json!({})))
        .await
        .unwrap();
    assert_eq!(r.is_error, Some(true), "{r:?}");
    client.cancel().await.unwrap();
    server.stop().await;
}

/// Seed 003's `sandbox.run`: argv or a shell line, `files` as `content_b64`, `timeout_sec`,
/// exactly one of `session_id` and `base_image`; the answer carries the service's record
/// (run_id, a log stream URL that streams it, policy_hash, image_digest) beside the output.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn seed_003s_sandbox_run_answers_with_the_services_record() {
    // Off by default (a dotted tool name breaks some clients): not listed, not callable.
    let plain = TestServer::start().await;
    let client = connect(&plain).await;
    let tools = client.list_all_tools().await.unwrap();
    assert!(tools.iter().all(|t| t.name != "sandbox.run"));
    let r = client
        .call_tool(tool(
            "sandbox.run",
            json!({"command": "true", "base_image": "wasmsand/default"}),
        ))
        .await;
    assert!(format!("{r:?}").contains("unknown tool"), "{r:?}");
    client.cancel().await.unwrap();
    plain.stop().await;

    let server = TestServer::with(|c| c.mcp_sandbox_run = true).await;
    let client = connect(&server).await;
    let tools = client.list_all_tools().await.unwrap();
    let t = tools
        .iter()
        .find(|t| t.name == "sandbox.run")
        .expect("listed");
    let props = t.input_schema["properties"].as_object().unwrap();
    for field in [
        "runtime",
        "session_id",
        "base_image",
        "command",
        "files",
        "timeout_sec",
        "env",
    ] {
        assert!(props.contains_key(field), "{field} missing: {props:?}");
    }
    let ran = client
        .call_tool(tool(
            "sandbox.run",
            json!({
                "base_image": "wasmsand/default",
                "command": ["sh", "-c", "cat in.txt; echo \"$GREETING $1\"", "sh", "it's $HOME"],
                "files": [{ "path": "in.txt", "content_b64": "ZnJvbSBhIGZpbGUK" }],
                "env": { "GREETING": "hello" },
                "timeout_sec": 20,
            }),
        ))
        .await
        .unwrap();
    assert_ne!(ran.is_error, Some(true), "{ran:?}");
    let out = ran.structured_content.expect("structured result");
    assert_eq!(out["stdout"], "from a file\nhello it's $HOME\n", "{out}");
    assert_eq!(out["exit_code"], 0);
    let run_id = out["run_id"].as_str().expect("run_id").to_string();
    let (_, rt) = server.get("/runtimes").await;
    let (_, rec) = server.get(&format!("/runs/{run_id}")).await;
    assert_eq!(rec["phase"], "completed", "{rec}");
    assert_eq!(out["policy_hash"], rec["policy_hash"], "{out}");
    assert_eq!(out["image_digest"], rec["image_digest"], "{out}");
    assert!(
        rt["runtimes"][0]["default_images"][0]
            .as_str()
            .unwrap()
            .ends_with(out["image_digest"].as_str().unwrap())
    );
    let url = out["log_stream_url"].as_str().unwrap();
    assert_eq!(
        url,
        format!("ws://{}/api/v1/sandbox/runs/{run_id}/stream", server.addr)
    );
    let (mut ws, _) = tokio_tungstenite::connect_async(url).await.unwrap();
    let mut frames = Vec::new();
    read_until(&mut ws, &mut frames, |f| {
        f.last().is_some_and(|l| l["event"] == "end")
    })
    .await;
    let end = frames.iter().find(|f| f["event"] == "end");
    assert_eq!(end.expect("an end frame")["data"]["phase"], "completed");

    // A shell line in a session; the session fixes the image.
    let sid = client
        .call_tool(tool("session_create", json!({})))
        .await
        .unwrap()
        .structured_content
        .unwrap()["session_id"]
        .as_str()
        .unwrap()
        .to_owned();
    let r = client
        .call_tool(tool(
            "sandbox.run",
            json!({"session_id": sid, "command": "echo kept > f; cat f"}),
        ))
        .await
        .unwrap();
    assert_eq!(r.structured_content.unwrap()["stdout"], "kept\n");
    for (args, want) in [
        (json!({"command": "true"}), "base_image is required"),
        (
            json!({"command": "true", "session_id": sid, "base_image": "wasmsand/default"}),
            "not both",
        ),
        (
            json!({"command": [], "base_image": "wasmsand/default"}),
            "command is empty",
        ),
        (
            json!({"command": "true", "base_image": "wasmsand/default", "timeout_ms": 5}),
            "unknown field",
        ),
    ] {
        let r = client
            .call_tool(tool("sandbox.run", args.clone()))
            .await
            .unwrap();
        assert_eq!(r.is_error, Some(true), "{args}: {r:?}");
        let text = format!("{:?}", r.content);
        assert!(text.contains(want), "{args}: {text} should say {want:?}");
    }
    client.cancel().await.unwrap();
    server.stop().await;
}

/// A preview made over `/mcp` is the service's fork: after the service restarts (both woken
/// from the SQLite store, no longer knowing each other in memory), its diff and its commit
/// come from the fork point the store kept; best-of-N works there too.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn previews_and_best_of_over_mcp_survive_a_restart() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().to_path_buf();
    let config = |p: &std::path::Path| wasmsand_server::Config {
        store: wasmsand_server::StoreConfig::Sqlite(p.join("meta").join("store.db")),
        ..super::common::test_config(p)
    };
    let call = |tool: &str, args: Value| {
        CallToolRequestParams::new(tool.to_string())
            .with_arguments(args.as_object().unwrap().clone())
    };
    let connect = |addr: std::net::SocketAddr| async move {
        tokio::time::timeout(
            PATIENCE,
            ().serve(StreamableHttpClientTransport::from_uri(format!(
                "http://{addr}/mcp"
            ))),
        )
        .await
        .expect("handshake in time")
        .expect("handshake")
    };
    let server = TestServer::start_in(dir, config(&path)).await;
    let client = connect(server.addr).await;
    let ok = |r: rmcp::model::CallToolResult| {
        assert_ne!(r.is_error, Some(true), "{r:?}");
        r.structured_content.expect("structured result")
    };
    let sid = ok(client
        .call_tool(call("session_create", json!({})))
        .await
        .unwrap())["session_id"]
        .as_str()
        .unwrap()
        .to_string();
    ok(client
        .call_tool(call(
            "sandbox_run",
            json!({"session_id": sid, "command": "printf 'a\\nb\\n' > list.txt"}),
        ))
        .await
        .unwrap());
    let preview = ok(client
        .call_tool(call(
            "sandbox_run",
            json!({"session_id": sid, "preview": true, "command": "echo c >> list.txt; echo x > extra.txt"}),
        ))
        .await
        .unwrap());
    let pid = preview["preview"]["preview_id"]
        .as_str()
        .unwrap()
        .to_string();
    let patch = preview["preview"]["changes"]["patch"]
        .as_str()
        .unwrap()
        .to_string();
    assert!(patch.contains(" a\n b\n+c\n"), "{patch}");
    // The REST API sees the preview as a fork of the session.
    let (_, fork) = server.get(&format!("/sessions/{pid}")).await;
    assert_eq!(fork["forked_from"], sid.as_str(), "{fork}");
    drop(client);

    let dir = server.stop().await;
    let server = TestServer::start_in(dir, config(&path)).await;
    let client = connect(server.addr).await;
    let diff = ok(client
        .call_tool(call("sandbox_diff", json!({"session_id": pid})))
        .await
        .unwrap());
    assert_eq!(diff["since"], "parent");
    assert_eq!(diff["patch"], patch.as_str());
    let committed = ok(client
        .call_tool(call("sandbox_commit", json!({"preview_id": pid})))
        .await
        .unwrap());
    assert_eq!(committed["session_id"], sid.as_str());
    let (status, _) = server.get(&format!("/sessions/{pid}")).await;
    assert_eq!(status, reqwest::StatusCode::NOT_FOUND);

    let best = ok(client
        .call_tool(call(
            "sandbox_best_of",
            json!({"session_id": sid, "attempts": [
                {"command": "echo $N >> list.txt; wc -l < list.txt", "env": {"N": "1"}},
                {"command": "echo $N >> list.txt; wc -l < list.txt", "env": {"N": "2"}},
            ]}),
        ))
        .await
        .unwrap());
    let attempts = best["attempts"].as_array().unwrap();
    assert_eq!(attempts[0]["stdout"], "4\n");
    assert!(
        attempts[1]["changes"]["patch"]
            .as_str()
            .unwrap()
            .contains(" c\n+2\n"),
        "{best}"
    );
    ok(client
        .call_tool(call(
            "sandbox_commit",
            json!({"preview_id": attempts[1]["preview_id"]}),
        ))
        .await
        .unwrap());
    ok(client
        .call_tool(call(
            "sandbox_discard",
            json!({"preview_ids": [attempts[0]["preview_id"]]}),
        ))
        .await
        .unwrap());
    let out = ok(client
        .call_tool(call(
            "sandbox_run",
            json!({"session_id": sid, "command": "cat list.txt extra.txt"}),
        ))
        .await
        .unwrap());
    assert_eq!(out["stdout"], "a\nb\nc\n2\nx\n");
    drop(client);
    server.stop().await;
}
