//! `Mcp::http_router` mounted the way an embedding HTTP server does it: behind its own
//! authentication, which names the client with a `Principal`. rmcp's client over real HTTP.

use std::collections::HashMap;
use std::time::Duration;

use axum::extract::Request;
use axum::http::{HeaderName, HeaderValue, StatusCode};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use rmcp::model::{CallToolRequestParams, CallToolResult};
use rmcp::service::RunningService;
use rmcp::transport::StreamableHttpClientTransport;
use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;
use rmcp::{RoleClient, ServiceExt};
use serde_json::{Value, json};
use wasmsand_mcp::{HttpOptions, Mcp, McpConfig, Principal};

const PATIENCE: Duration = Duration::from_secs(180);

/// The embedding server's authentication, reduced to a header naming the user.
async fn authenticate(mut req: Request, next: Next) -> Response {
    let user = req
        .headers()
        .get("x-user")
        .and_then(|v| v.to_str().ok())
        .map(str::to_string);
    match user {
        Some(u) => {
            req.extensions_mut().insert(Principal(u));
            next.run(req).await
        }
        None => StatusCode::UNAUTHORIZED.into_response(),
    }
}

pub(crate) async fn serve(mcp: &Mcp) -> String {
    let app = mcp
        .http_router(&HttpOptions::default())
        .layer(axum::middleware::from_fn(authenticate));
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}/mcp", listener.local_addr().unwrap());
    tokio::spawn(async move { axum::serve(listener, app).await });
    url
}

pub(crate) async fn client(url: &str, user: &str) -> RunningService<RoleClient, ()> {
    let headers = HashMap::from([(
        HeaderName::from_static("x-user"),
        HeaderValue::from_str(user).unwrap(),
    )]);
    let transport = StreamableHttpClientTransport::from_config(
        StreamableHttpClientTransportConfig::with_uri(url.to_string()).custom_headers(headers),
    );
    tokio::time::timeout(PATIENCE, ().serve(transport))
        .await
        .expect("handshake in time")
        .expect("handshake")
}

pub(crate) async fn call(
    c: &RunningService<RoleClient, ()>,
    tool: &str,
    args: Value,
) -> CallToolResult {
    let params = CallToolRequestParams::new(tool.to_string())
        .with_arguments(args.as_object().unwrap().clone());
    tokio::time::timeout(PATIENCE, c.call_tool(params))
        .await
        .expect("answer in time")
        .expect("call")
}

// Threat: T-TENANT (docs/security.md)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sessions_belong_to_the_principal_and_count_against_its_cap() {
    let mcp = Mcp::new(McpConfig {
        max_sessions_per_client: 1,
        ..McpConfig::default()
    });
    let url = serve(&mcp).await;
    let alice = client(&url, "alice").await;
    let alice_again = client(&url, "alice").await;
    let bob = client(&url, "bob").await;

    let created = call(&alice, "session_create", json!({})).await;
    let sid = created.structured_content.unwrap()["session_id"]
        .as_str()
        .unwrap()
        .to_string();
    let r = call(
        &alice,
        "sandbox_run",
        json!({"session_id": sid, "command": "echo secret > s.txt"}),
    )
    .await;
    assert_eq!(r.is_error, Some(false));

    // Another connection of the same principal reaches the session.
    let r = call(
        &alice_again,
        "files_read",
        json!({"session_id": sid, "path": "s.txt"}),
    )
    .await;
    assert_eq!(r.structured_content.unwrap()["content"], "secret\n");
    let r = call(&alice_again, "session_create", json!({})).await;
    assert_eq!(r.is_error, Some(true), "{r:?}");

    // Another principal does not, not even to learn that it exists.
    for (tool, args) in [
        ("files_read", json!({"session_id": sid, "path": "s.txt"})),
        ("session_destroy", json!({"session_id": sid})),
        ("sandbox_run", json!({"session_id": sid, "command": "true"})),
    ] {
        let r = call(&bob, tool, args).await;
        assert_eq!(r.is_error, Some(true), "{tool}: {r:?}");
        let text = r.content[0].as_text().unwrap().text.clone();
        assert!(text.contains("unknown session_id"), "{text}");
    }
    let list = call(&bob, "session_list", json!({})).await;
    assert_eq!(list.structured_content.unwrap()["sessions"], json!([]));
    let bobs = call(&bob, "session_create", json!({})).await;
    assert_eq!(bobs.is_error, Some(false));
    assert_eq!(mcp.session_count(), 2);

    let list = call(&alice, "session_list", json!({})).await;
    let sessions = list.structured_content.unwrap()["sessions"].clone();
    assert_eq!(sessions.as_array().unwrap().len(), 1);
    assert_eq!(sessions[0]["session_id"], sid.as_str());
    mcp.shutdown();
    assert_eq!(mcp.session_count(), 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn files_read_refuses_files_over_its_cap() {
    let mcp = Mcp::new(McpConfig {
        max_read_bytes: 10,
        ..McpConfig::default()
    });
    let url = serve(&mcp).await;
    let c = client(&url, "carol").await;
    let created = call(
        &c,
        "session_create",
        json!({"files": [{"path": "ten.txt", "content": "0123456789"},
                         {"path": "eleven.txt", "content": "0123456789\n"}]}),
    )
    .await;
    let sid = created.structured_content.unwrap()["session_id"].clone();
    let r = call(
        &c,
        "files_read",
        json!({"session_id": sid, "path": "ten.txt"}),
    )
    .await;
    assert_eq!(r.structured_content.unwrap()["content"], "0123456789");
    let r = call(
        &c,
        "files_read",
        json!({"session_id": sid, "path": "eleven.txt"}),
    )
    .await;
    assert_eq!(r.is_error, Some(true));
    let text = r.content[0].as_text().unwrap().text.clone();
    assert!(
        text.contains("11 bytes") && text.contains("head -c"),
        "{text}"
    );
}
