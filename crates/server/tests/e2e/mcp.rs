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
