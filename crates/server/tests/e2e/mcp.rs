//! MCP over streamable HTTP at `/mcp` of the service, with rmcp's own client: the tools are
//! listed, a run works, sessions live across calls, the disabled switch removes the route and
//! a foreign `Host` is refused.

use std::time::Duration;

use rmcp::ServiceExt;
use rmcp::model::CallToolRequestParams;
use rmcp::transport::StreamableHttpClientTransport;
use serde_json::{Value, json};

use crate::common::TestServer;

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
    use crate::auth::{ALICE_KEY, ROOT_KEY, api_key, auth_server, call as rest};
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
    let phases: Vec<_> = list["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|i| (i["phase"].as_str().unwrap(), i["exit_code"].as_i64()))
        .collect();
    assert_eq!(
        phases,
        [("completed", Some(0)), ("failed", Some(3))],
        "{list}"
    );
}
