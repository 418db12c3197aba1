//! Identity: API keys and JWTs, 401 without credentials, 404 across users, admin-only
//! endpoints, signed WebSocket URLs.

use std::time::Duration;

use reqwest::header::HeaderMap;
use reqwest::{Method, StatusCode};
use serde_json::{Value, json};
use sha2::{Digest, Sha256};
use wasmsand_server::auth::parse_api_keys;

use super::common::*;

pub const JWT_SECRET: &str = "test-jwt-secret-0123456789";
pub const ALICE_KEY: &str = "alice-key-4f1c2b";
pub const ROOT_KEY: &str = "root-key-9a8b7c";

pub fn sha(key: &str) -> String {
    hex::encode(Sha256::digest(key.as_bytes()))
}

/// A JWT signed HS256 with `secret`, expiring `exp_in` seconds from now.
pub fn jwt(secret: &str, sub: &str, role: Option<&str>, exp_in: i64) -> String {
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs() as i64;
    let mut claims = json!({ "sub": sub, "exp": now + exp_in, "iat": now });
    if let Some(r) = role {
        claims["role"] = json!(r);
    }
    jsonwebtoken::encode(
        &jsonwebtoken::Header::new(jsonwebtoken::Algorithm::HS256),
        &claims,
        &jsonwebtoken::EncodingKey::from_secret(secret.as_bytes()),
    )
    .unwrap()
}

pub fn bearer(token: &str) -> (&'static str, String) {
    ("authorization", format!("Bearer {token}"))
}

pub fn api_key(key: &str) -> (&'static str, String) {
    ("x-api-key", key.to_string())
}

/// A server with alice (API key, user), root (API key, admin) and JWTs.
pub async fn auth_server(f: impl FnOnce(&mut wasmsand_server::Config)) -> TestServer {
    TestServer::with(|c| {
        c.api_keys = parse_api_keys(&format!(
            "{} alice user\n{} root admin\n",
            sha(ALICE_KEY),
            sha(ROOT_KEY)
        ))
        .unwrap();
        c.jwt_secret = Some(JWT_SECRET.into());
        f(c);
    })
    .await
}

/// One request with the given headers; the body parsed as JSON when it is.
pub async fn call(
    srv: &TestServer,
    method: Method,
    url: &str,
    headers: &[(&str, String)],
    body: Option<Value>,
) -> (StatusCode, HeaderMap, Value) {
    let mut req = srv.client.request(method, url);
    for (k, v) in headers {
        req = req.header(*k, v);
    }
    if let Some(b) = body {
        req = req.json(&b);
    }
    let resp = req.send().await.unwrap();
    let status = resp.status();
    let h = resp.headers().clone();
    let text = resp.text().await.unwrap();
    let v = serde_json::from_str(&text).unwrap_or(Value::String(text));
    (status, h, v)
}

pub async fn wait_done_as(srv: &TestServer, id: &str, who: &[(&str, String)]) -> Value {
    let started = std::time::Instant::now();
    loop {
        let (s, _, v) = call(
            srv,
            Method::GET,
            &srv.url(&format!("/runs/{id}")),
            who,
            None,
        )
        .await;
        assert_eq!(s, StatusCode::OK, "{v}");
        if matches!(
            v["phase"].as_str().unwrap_or(""),
            "completed" | "failed" | "timed_out" | "killed"
        ) {
            return v;
        }
        assert!(started.elapsed() < GUARD, "run {id} stuck: {v}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

fn assert_unauthorized(s: StatusCode, h: &HeaderMap, v: &Value, reason: &str) {
    assert_eq!(s, StatusCode::UNAUTHORIZED, "{v}");
    assert_eq!(v["error"]["code"], "unauthorized", "{v}");
    assert_eq!(v["error"]["details"]["reason"], reason, "{v}");
    assert_eq!(h["www-authenticate"], "Bearer");
}

// Threat: T-TENANT (docs/security.md)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn credentials_identify_users_and_users_see_only_their_own() {
    let srv = auth_server(|_| {}).await;
    let alice = [api_key(ALICE_KEY)];
    let bob = [bearer(&jwt(JWT_SECRET, "bob", None, 300))];
    let root = [api_key(ROOT_KEY)];

    // No credentials, or bad ones: 401 with the envelope, on every kind of endpoint.
    for path in ["/runtimes", "/runs/x", "/admin/runs"] {
        let (s, h, v) = call(&srv, Method::GET, &srv.url(path), &[], None).await;
        assert_unauthorized(s, &h, &v, "missing_credentials");
    }
    let (s, h, v) = call(
        &srv,
        Method::POST,
        &srv.url("/runs"),
        &[],
        Some(TestServer::script("echo hi")),
    )
    .await;
    assert_unauthorized(s, &h, &v, "missing_credentials");
    let (s, h, v) = call(
        &srv,
        Method::GET,
        &srv.url("/runtimes"),
        &[api_key("wrong")],
        None,
    )
    .await;
    assert_unauthorized(s, &h, &v, "invalid_api_key");
    let expired = [bearer(&jwt(JWT_SECRET, "bob", None, -120))];
    let (s, h, v) = call(&srv, Method::GET, &srv.url("/runtimes"), &expired, None).await;
    assert_unauthorized(s, &h, &v, "token_expired");
    let forged = [bearer(&jwt(
        "another-secret-0123456789",
        "bob",
        Some("admin"),
        300,
    ))];
    let (s, h, v) = call(&srv, Method::GET, &srv.url("/admin/runs"), &forged, None).await;
    assert_unauthorized(s, &h, &v, "invalid_token");
    let (s, h, v) = call(
        &srv,
        Method::GET,
        &srv.url("/runtimes"),
        &[("authorization", "Basic eDp5".into())],
        None,
    )
    .await;
    assert_unauthorized(s, &h, &v, "unsupported_scheme");

    // Alice's session and run.
    let (s, _, sess) = call(
        &srv,
        Method::POST,
        &srv.url("/sessions"),
        &alice,
        Some(json!({ "spec_version": "1.0" })),
    )
    .await;
    assert_eq!(s, StatusCode::CREATED, "{sess}");
    let sid = sess["session_id"].as_str().unwrap().to_string();
    let mut body = json!({ "spec_version": "1.0", "session_id": sid, "command": ["bash", "-c", "echo mine > a.txt; cat a.txt"], "capture_patterns": ["a.txt"] });
    let (s, _, run) = call(
        &srv,
        Method::POST,
        &srv.url("/runs"),
        &alice,
        Some(body.clone()),
    )
    .await;
    assert!(s.is_success(), "{run}");
    let rid = run["run_id"].as_str().unwrap().to_string();
    let done = wait_done_as(&srv, &rid, &alice).await;
    assert_eq!(done["phase"], "completed", "{done}");

    // Bob gets 404 for all of it, the same answer as for ids that do not exist.
    for (m, path) in [
        (Method::GET, format!("/sessions/{sid}")),
        (Method::DELETE, format!("/sessions/{sid}")),
        (Method::GET, format!("/runs/{rid}")),
        (Method::POST, format!("/runs/{rid}/cancel")),
        (Method::GET, format!("/runs/{rid}/artifacts")),
        (Method::GET, format!("/runs/{rid}/artifacts/a.txt")),
    ] {
        let (s, _, v) = call(&srv, m.clone(), &srv.url(&path), &bob, None).await;
        assert_eq!(s, StatusCode::NOT_FOUND, "{m} {path}: {v}");
        assert_eq!(v["error"]["code"], "not_found");
        assert!(!v.to_string().contains("mine"), "{v}");
    }
    let req = format!("{}?from_seq=1", srv.ws_url(&format!("/runs/{rid}/stream")));
    let mut ws_req =
        tokio_tungstenite::tungstenite::client::IntoClientRequest::into_client_request(req)
            .unwrap();
    ws_req
        .headers_mut()
        .insert("authorization", bob[0].1.parse().unwrap());
    match tokio_tungstenite::connect_async(ws_req).await {
        Err(tokio_tungstenite::tungstenite::Error::Http(r)) => assert_eq!(r.status(), 404),
        other => panic!("bob streamed alice's run: {:?}", other.map(|_| ())),
    }
    // Nor can he run in her session or upload into it.
    body["command"] = json!(["cat", "a.txt"]);
    let (s, _, v) = call(
        &srv,
        Method::POST,
        &srv.url("/runs"),
        &bob,
        Some(body.clone()),
    )
    .await;
    assert_eq!(s, StatusCode::NOT_FOUND, "{v}");
    let (s, _, _) = call(
        &srv,
        Method::POST,
        &srv.url(&format!("/sessions/{sid}/files")),
        &bob,
        None,
    )
    .await;
    assert_eq!(s, StatusCode::NOT_FOUND);
    // Alice still can.
    let (s, _, v) = call(
        &srv,
        Method::GET,
        &srv.url(&format!("/runs/{rid}/artifacts/a.txt")),
        &alice,
        None,
    )
    .await;
    assert_eq!((s, v), (StatusCode::OK, Value::String("mine\n".into())));

    // Idempotency keys are per user: the same key makes two runs.
    let one = TestServer::script("true");
    let with_key = |who: &[(&'static str, String)]| {
        let mut h = who.to_vec();
        h.push(("idempotency-key", "same-key".to_string()));
        h
    };
    let (_, _, a) = call(
        &srv,
        Method::POST,
        &srv.url("/runs"),
        &with_key(&alice),
        Some(one.clone()),
    )
    .await;
    let (_, _, b) = call(
        &srv,
        Method::POST,
        &srv.url("/runs"),
        &with_key(&bob),
        Some(one.clone()),
    )
    .await;
    assert_ne!(a["run_id"], b["run_id"]);
    let (_, h, a2) = call(
        &srv,
        Method::POST,
        &srv.url("/runs"),
        &with_key(&alice),
        Some(one),
    )
    .await;
    assert_eq!(a2["run_id"], a["run_id"]);
    assert_eq!(h["idempotent-replayed"], "true");
    wait_done_as(&srv, b["run_id"].as_str().unwrap(), &bob).await;

    // Admin endpoints: 403 for users, open to admins by API key role or JWT role claim.
    for who in [&alice[..], &bob[..]] {
        let (s, _, v) = call(&srv, Method::GET, &srv.url("/admin/runs"), who, None).await;
        assert_eq!(s, StatusCode::FORBIDDEN, "{v}");
        assert_eq!(v["error"]["code"], "forbidden");
    }
    let admin_jwt = [bearer(&jwt(JWT_SECRET, "carol", Some("admin"), 300))];
    for who in [&root[..], &admin_jwt[..]] {
        let (s, _, v) = call(
            &srv,
            Method::GET,
            &srv.url("/admin/runs?user_id=alice"),
            who,
            None,
        )
        .await;
        assert_eq!(s, StatusCode::OK, "{v}");
        assert_eq!(v["total"], 2, "{v}");
        assert!(
            v["items"]
                .as_array()
                .unwrap()
                .iter()
                .all(|r| r["user_id"] == "alice")
        );
    }
    let (_, _, v) = call(
        &srv,
        Method::GET,
        &srv.url("/admin/runs?user_id=bob"),
        &root,
        None,
    )
    .await;
    assert_eq!(v["total"], 1, "{v}");
    let (_, _, v) = call(
        &srv,
        Method::GET,
        &srv.url("/admin/idempotency?user_id=bob"),
        &root,
        None,
    )
    .await;
    assert_eq!(v["items"][0]["user_key"], "bob", "{v}");

    // `/metrics` is for admins too; `/mcp` needs credentials.
    let metrics = format!("http://{}/metrics", srv.addr);
    assert_eq!(
        call(&srv, Method::GET, &metrics, &[], None).await.0,
        StatusCode::UNAUTHORIZED
    );
    assert_eq!(
        call(&srv, Method::GET, &metrics, &alice, None).await.0,
        StatusCode::FORBIDDEN
    );
    assert_eq!(
        call(&srv, Method::GET, &metrics, &root, None).await.0,
        StatusCode::OK
    );
    let mcp = format!("http://{}/mcp", srv.addr);
    let (s, _, v) = call(&srv, Method::POST, &mcp, &[], Some(json!({}))).await;
    assert_eq!(s, StatusCode::UNAUTHORIZED, "{v}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_auth_config_one_default_user_is_admin() {
    let srv = TestServer::start().await;
    let (run, _, _) = srv.run(TestServer::script("true")).await;
    let (s, v) = srv.get("/admin/runs").await;
    assert_eq!(s, StatusCode::OK);
    assert_eq!(v["items"][0]["id"], run.as_str());
    assert_eq!(v["items"][0]["user_id"], "default");
    // A non-loopback address without credentials configured is refused at start.
    let dir = tempfile::tempdir().unwrap();
    let err = wasmsand_server::Server::bind(test_config(dir.path()), "0.0.0.0:0")
        .await
        .err()
        .expect("refused");
    assert!(err.to_string().contains("SANDBOX_ALLOW_ANONYMOUS"), "{err}");
    let mut c = test_config(dir.path());
    c.allow_anonymous = true;
    assert!(wasmsand_server::Server::bind(c, "0.0.0.0:0").await.is_ok());
}

async fn ws_status(url: &str) -> Result<Vec<Value>, u16> {
    match tokio_tungstenite::connect_async(url).await {
        Ok((mut ws, _)) => {
            let mut frames = Vec::new();
            read_until(&mut ws, &mut frames, |f| {
                f.iter().any(|x| x["event"] == "end")
            })
            .await;
            Ok(frames)
        }
        Err(tokio_tungstenite::tungstenite::Error::Http(r)) => Err(r.status().as_u16()),
        Err(e) => panic!("{e}"),
    }
}

// Threat: T-TENANT (docs/security.md)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn signed_stream_urls_are_scoped_to_their_run_and_expire() {
    let srv = auth_server(|c| {
        c.ws_signed_urls = true;
        c.ws_signing_secret = Some("ws-signing-secret-0123456789".into());
    })
    .await;
    let alice = [api_key(ALICE_KEY)];
    let start = |script: &str| {
        let body = TestServer::script(script);
        let srv = &srv;
        let alice = alice.clone();
        async move {
            let (s, _, v) = call(srv, Method::POST, &srv.url("/runs"), &alice, Some(body)).await;
            assert!(s.is_success(), "{v}");
            v
        }
    };
    let a = start("echo from-a").await;
    let b = start("echo from-b").await;
    let url_a = a["log_stream_url"].as_str().unwrap().to_string();
    let url_b = b["log_stream_url"].as_str().unwrap().to_string();
    assert!(
        url_a.starts_with("ws://") && url_a.contains("?token=") && url_a.contains("&exp="),
        "{url_a}"
    );
    // The URL alone is the credential: no headers.
    let frames = ws_status(&url_a).await.expect("signed URL accepted");
    assert!(stdout(&frames).contains("from-a"));
    // Run A's token on run B's stream: refused.
    let query_a = &url_a[url_a.find('?').unwrap()..];
    let b_id = b["run_id"].as_str().unwrap();
    let wrong = format!("{}{query_a}", srv.ws_url(&format!("/runs/{b_id}/stream")));
    assert_eq!(ws_status(&wrong).await.err(), Some(401));
    // A later `exp` under the same token: refused.
    let exp_at = url_b.find("&exp=").unwrap();
    let moved = format!("{}&exp=2999-01-01T00:00:00.000Z", &url_b[..exp_at]);
    assert_eq!(ws_status(&moved).await.err(), Some(401));
    // Header auth still works without a token.
    let mut req = tokio_tungstenite::tungstenite::client::IntoClientRequest::into_client_request(
        srv.ws_url(&format!("/runs/{b_id}/stream?from_seq=1")),
    )
    .unwrap();
    req.headers_mut()
        .insert("x-api-key", ALICE_KEY.parse().unwrap());
    let (mut ws, _) = tokio_tungstenite::connect_async(req).await.unwrap();
    let mut frames = Vec::new();
    read_until(&mut ws, &mut frames, |f| {
        f.iter().any(|x| x["event"] == "end")
    })
    .await;
    assert!(stdout(&frames).contains("from-b"));

    // A one-minute TTL: the URL is refused once `exp` has passed on the service's clock.
    let short = auth_server(|c| {
        c.ws_signed_urls = true;
        c.ws_signed_url_ttl_sec = 60;
    })
    .await;
    let (s, _, v) = call(
        &short,
        Method::POST,
        &short.url("/runs"),
        &alice,
        Some(TestServer::script("true")),
    )
    .await;
    assert!(s.is_success(), "{v}");
    let url = v["log_stream_url"].as_str().unwrap();
    let plain = url.replacen("ws://", "http://", 1);
    let fetch = || call(&short, Method::GET, &plain, &[], None);
    let (s, _, body) = fetch().await;
    assert_ne!(s, StatusCode::UNAUTHORIZED, "valid before its TTL: {body}");
    short.app.clock.advance(Duration::from_secs(61));
    let (s, _, body) = fetch().await;
    assert_eq!(s, StatusCode::UNAUTHORIZED, "{body}");
    assert_eq!(body["error"]["details"]["reason"], "token_expired");
    assert_eq!(ws_status(url).await.err(), Some(401));
}
