//! `network_policy: allowlist` through the HTTP API: the effective list is the server's
//! `SANDBOX_EGRESS_ALLOWLIST` narrowed by the request's `egress_allowlist`; a session's sandbox
//! reaches what it allows (curl against a real HTTP server on loopback) and nothing else (an
//! address rule allows its address whatever the name; a name no rule matches is not even
//! resolved); each
//! decision is an audit event of the run and a metric; what cannot be granted is a 400.

use std::net::SocketAddr;

use reqwest::StatusCode;
use serde_json::{Value, json};
use wasmsand::egress::{EgressAllowlist, EgressPolicy};

use super::common::{TestServer, output};

async fn web() -> SocketAddr {
    let app = axum::Router::new().route(
        "/hello",
        axum::routing::get(|| async { "hello over the allowlist\n" }),
    );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(listener, app).await });
    addr
}

async fn server() -> TestServer {
    TestServer::with(|c| {
        c.egress_allowlist = EgressPolicy::parse(&EgressAllowlist {
            hosts: vec!["api.test".into(), "other.test".into()],
            ips: vec!["127.0.0.1".into()],
            cidrs: vec![],
        })
        .unwrap();
        for h in ["api.test", "other.test"] {
            c.egress_resolve
                .insert(h.into(), vec!["127.0.0.1".parse().unwrap()]);
        }
    })
    .await
}

fn in_session(sid: &str, script: &str) -> Value {
    json!({ "spec_version": "1.0", "session_id": sid, "command": ["bash", "-c", script] })
}

async fn events(srv: &TestServer, event: &str, n: usize) -> Vec<Value> {
    let started = std::time::Instant::now();
    loop {
        let (_, v) = srv
            .get(&format!("/admin/audit?event={event}&limit=100"))
            .await;
        let items = v["items"].as_array().cloned().unwrap_or_default();
        if items.len() >= n {
            return items;
        }
        assert!(
            started.elapsed() < std::time::Duration::from_secs(60),
            "{event}: {v}"
        );
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_session_reaches_what_its_narrowed_allowlist_allows() {
    let web = web().await;
    let port = web.port();
    let srv = server().await;

    // The request asks for more than the server allows: what is left is the intersection.
    let (s, _, session) = srv
        .post(
            "/sessions",
            json!({
                "spec_version": "1.0", "network_policy": "allowlist",
                "egress_allowlist": { "hosts": ["api.test", "evil.test"], "ips": ["127.0.0.1"] },
            }),
        )
        .await;
    assert_eq!(s, StatusCode::CREATED, "{session}");
    assert_eq!(session["network_policy"], "allowlist");
    assert_eq!(
        session["egress_allowlist"],
        json!({ "hosts": ["api.test"], "cidrs": [], "ips": ["127.0.0.1"] })
    );
    let sid = session["session_id"].as_str().unwrap();

    let (id, frames, status) = srv
        .run(in_session(
            sid,
            &format!(
                "curl -s http://api.test:{port}/hello; curl -sS http://nowhere.test:{port}/hello; echo \"exit=$?\""
            ),
        ))
        .await;
    assert_eq!(status["phase"], "completed", "{status}");
    assert_eq!(
        String::from_utf8_lossy(&output(&frames, "stdout")),
        "hello over the allowlist\nexit=7\n"
    );
    assert!(
        String::from_utf8_lossy(&output(&frames, "stderr")).contains(
            "host nowhere.test not in allowlist (allowlist: hosts api.test; ips 127.0.0.1)"
        ),
        "{frames:?}"
    );
    // The run's receipt counts what went out (the refused request did not) and came back.
    assert_eq!(status["resource_usage"]["network_requests"], 1, "{status}");
    assert_eq!(
        status["resource_usage"]["network_bytes"],
        "hello over the allowlist\n".len(),
        "{status}"
    );
    let allowed = events(&srv, "sandbox.run.egress_allowed", 1).await;
    assert_eq!(allowed[0]["run_id"], id.as_str());
    assert_eq!(allowed[0]["host"], "api.test");
    assert_eq!(allowed[0]["ip"], "127.0.0.1");
    assert_eq!(allowed[0]["matched_rule"], "127.0.0.1");
    assert_eq!(allowed[0]["runtime"], "wasm");
    let denied = events(&srv, "sandbox.run.egress_denied", 1).await;
    assert_eq!(denied[0]["run_id"], id.as_str());
    assert_eq!(denied[0]["host"], "nowhere.test");
    assert_eq!(denied[0]["reason"], "no_match");
    let metrics = reqwest::get(format!("http://{}/metrics", srv.addr))
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    assert!(
        metrics.contains("sandbox_egress_total{decision=\"allowed\"} 1"),
        "{metrics}"
    );
    assert!(
        metrics.contains("sandbox_egress_total{decision=\"no_match\"} 1"),
        "{metrics}"
    );

    // A one-shot run asking for `allowlist` alone gets the server's whole list.
    let mut body = TestServer::script(&format!("curl -s http://other.test:{port}/hello"));
    body["network_policy"] = json!("allowlist");
    let (_, frames, status) = srv.run(body).await;
    assert_eq!(status["phase"], "completed", "{status}");
    assert_eq!(output(&frames, "stdout"), b"hello over the allowlist\n");

    // Without a policy, the default (deny_all): no network.
    let (_, frames, _) = srv
        .run(TestServer::script(&format!(
            "curl -sS http://api.test:{port}/hello"
        )))
        .await;
    assert!(
        String::from_utf8_lossy(&output(&frames, "stderr")).contains("network access is off"),
        "{frames:?}"
    );

    // What cannot be granted, or changed in a session, is refused.
    let cases = [
        (
            json!({ "network_policy": "allowlist", "egress_allowlist": { "hosts": ["nope.example"] } }),
            "nothing of egress_allowlist is allowed",
        ),
        (
            json!({ "network_policy": "deny_all", "egress_allowlist": { "hosts": ["api.test"] } }),
            "needs network_policy 'allowlist'",
        ),
        (
            json!({ "network_policy": "open" }),
            "not one of deny_all, allowlist",
        ),
        (
            json!({ "network_policy": "allowlist", "egress_allowlist": { "hosts": ["*.com"] } }),
            "egress_allowlist.hosts: '*.com'",
        ),
        (
            json!({ "egress_allowlist": { "domains": ["api.test"] } }),
            "unknown field",
        ),
    ];
    for (extra, want) in cases {
        let mut body = json!({ "spec_version": "1.0" });
        for (k, v) in extra.as_object().unwrap() {
            body[k] = v.clone();
        }
        let (s, _, v) = srv.post("/sessions", body.clone()).await;
        assert_eq!(s, StatusCode::BAD_REQUEST, "{body}: {v}");
        assert!(
            v["error"]["message"].as_str().unwrap().contains(want),
            "{body}: {v}"
        );
    }
    let mut body = in_session(sid, "true");
    body["network_policy"] = json!("deny_all");
    let (s, _, v) = srv.post("/runs", body).await;
    assert_eq!(s, StatusCode::BAD_REQUEST, "{v}");
    assert!(
        v["error"]["message"]
            .as_str()
            .unwrap()
            .contains("fixed by the session")
    );

    let (_, rt) = srv.get("/runtimes").await;
    let flag = |name: &str| {
        rt["runtimes"]
            .as_array()
            .unwrap()
            .iter()
            .find(|r| r["name"] == name)
            .unwrap()["egress_allowlist_supported"]
            .clone()
    };
    assert_eq!((flag("wasm"), flag("docker")), (json!(true), json!(true)));
    srv.stop().await;

    // A server with no allowlist has nothing to grant.
    let bare = TestServer::start().await;
    let (s, _, v) = bare
        .post(
            "/sessions",
            json!({ "spec_version": "1.0", "network_policy": "allowlist" }),
        )
        .await;
    assert_eq!(s, StatusCode::BAD_REQUEST, "{v}");
    assert!(
        v["error"]["message"]
            .as_str()
            .unwrap()
            .contains("allows no egress")
    );
    bare.stop().await;
}

/// MCP's own sandboxes (the service's `/mcp`, under an `allowlist` default) audit their
/// egress as REST runs do: each decision under the MCP run's id.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mcp_runs_audit_their_egress_with_their_run_id() {
    let port = web().await.port();
    let srv = TestServer::with(|c| {
        c.network_default = "allowlist".into();
        c.egress_allowlist = EgressPolicy::parse(&EgressAllowlist {
            hosts: vec!["api.test".into()],
            ips: vec!["127.0.0.1".into()],
            cidrs: vec![],
        })
        .unwrap();
        c.egress_resolve
            .insert("api.test".into(), vec!["127.0.0.1".parse().unwrap()]);
    })
    .await;
    let client = super::mcp::connect(&srv).await;
    let command =
        format!("curl -s http://api.test:{port}/hello; curl -sS http://nowhere.test:{port}/");
    let out = client
        .call_tool(super::mcp::tool(
            "sandbox_run",
            json!({ "command": command }),
        ))
        .await
        .unwrap()
        .structured_content
        .expect("structured result");
    assert_eq!(out["stdout"], "hello over the allowlist\n", "{out}");
    let run_id = out["run_id"].as_str().expect("the service's run id");
    let allowed = events(&srv, "sandbox.run.egress_allowed", 1).await;
    assert_eq!(
        (&allowed[0]["run_id"], &allowed[0]["host"]),
        (&json!(run_id), &json!("api.test"))
    );
    let denied = events(&srv, "sandbox.run.egress_denied", 1).await;
    assert_eq!(
        (
            &denied[0]["run_id"],
            &denied[0]["host"],
            &denied[0]["reason"]
        ),
        (&json!(run_id), &json!("nowhere.test"), &json!("no_match"))
    );
    client.cancel().await.unwrap();
    srv.stop().await;
}
