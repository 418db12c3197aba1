//! What two replicas on one PostgreSQL decide together: a user's quota admits exactly its
//! limit however the requests are spread and timed, and the forwarding layer's own errors
//! (an owner that does not answer, or answers something that is not the API's) come in the
//! API's envelope, or as `application/problem+json` when asked.

use std::time::{SystemTime, UNIX_EPOCH};

use reqwest::StatusCode;
use reqwest::header::{CONTENT_TYPE, HeaderMap, RETRY_AFTER};
use serde_json::{Value, json};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

use super::replicas::{Replica, run_body, wait_done};

const PROBLEM: &str = "application/problem+json";

async fn send(rb: reqwest::RequestBuilder) -> (StatusCode, HeaderMap, Value) {
    let r = rb.send().await.unwrap();
    let (status, headers) = (r.status(), r.headers().clone());
    let text = r.text().await.unwrap();
    let v = serde_json::from_str(&text).unwrap_or(Value::String(text));
    (status, headers, v)
}

fn now_ms() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_millis() as i64
}

// Threat: T-SERVICE-EXHAUST (docs/security.md)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_users_concurrency_quota_admits_exactly_its_limit_across_replicas() {
    let pg = crate::pg_or_skip!();
    let url = pg.fresh_db("quotarace");
    let limit = 3;
    let env = [
        ("SANDBOX_USER_MAX_CONCURRENT_RUNS", "3"),
        ("SANDBOX_QUEUE_MAX_LENGTH", "100"),
    ];
    let a = Replica::start(&url, &env);
    let b = Replica::start(&url, &env);
    let c = reqwest::Client::new();
    let sleeper = run_body(&["sleep", "120"]);
    for round in 0..3 {
        // 24 requests for one user in the same instant, half through each replica.
        let calls: Vec<_> = (0..24)
            .map(|i| {
                let url = if i % 2 == 0 { &a } else { &b }.api("/runs");
                let rb = c.post(url).json(&sleeper);
                // Half ask for the problem form of the refusal.
                let rb = if i % 4 < 2 {
                    rb.header("accept", PROBLEM)
                } else {
                    rb
                };
                tokio::spawn(send(rb))
            })
            .collect();
        let mut admitted = Vec::new();
        let mut refused = 0;
        for (i, h) in calls.into_iter().enumerate() {
            let (s, headers, v) = h.await.unwrap();
            if s.is_success() {
                admitted.push(v["run_id"].as_str().unwrap().to_string());
                continue;
            }
            assert_eq!(s, StatusCode::TOO_MANY_REQUESTS, "round {round}: {v}");
            let retry: u64 = headers[RETRY_AFTER].to_str().unwrap().parse().unwrap();
            assert!(retry >= 1, "{headers:?}");
            let (code, details) = if i % 4 < 2 {
                assert_eq!(headers[CONTENT_TYPE], PROBLEM);
                assert_eq!(v["status"], 429, "{v}");
                (&v["code"], &v["details"])
            } else {
                (&v["error"]["code"], &v["error"]["details"])
            };
            assert_eq!(code, "quota_exceeded", "{v}");
            assert_eq!(details["quota"], "concurrent_runs", "{v}");
            assert_eq!(details["limit"], limit, "{v}");
            assert_eq!(details["used"], limit, "{v}");
            assert_eq!(details["retry_after_sec"], retry, "{v}");
            refused += 1;
        }
        assert_eq!(
            (admitted.len(), refused),
            (limit as usize, 24 - limit as usize),
            "round {round}: admitted {admitted:?}"
        );
        assert_eq!(
            pg.psql(
                &url,
                "SELECT COUNT(*) FROM sandbox_runs WHERE phase NOT IN \
                 ('completed','failed','timed_out','killed')"
            ),
            limit.to_string(),
            "round {round}"
        );
        // Cancelled (through either replica), the runs give their places back.
        for (i, id) in admitted.iter().enumerate() {
            let via = if i % 2 == 0 { &a } else { &b };
            let (s, _, v) = send(
                c.post(via.api(&format!("/runs/{id}/cancel")))
                    .json(&json!({})),
            )
            .await;
            assert_eq!(s, StatusCode::ACCEPTED, "{v}");
        }
        for id in &admitted {
            wait_done(&c, &a, id).await;
        }
    }
}

/// A server at a replica's address that is not one: every request gets `status` with
/// `body` of `content_type`.
async fn impostor(status: &'static str, content_type: &'static str, body: &'static str) -> String {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move {
        loop {
            let Ok((mut sock, _)) = listener.accept().await else {
                return;
            };
            tokio::spawn(async move {
                let mut seen = Vec::new();
                let mut buf = [0u8; 4096];
                while !seen.windows(4).any(|w| w == b"\r\n\r\n") {
                    match sock.read(&mut buf).await {
                        Ok(0) | Err(_) => return,
                        Ok(n) => seen.extend_from_slice(&buf[..n]),
                    }
                }
                let resp = format!(
                    "HTTP/1.1 {status}\r\ncontent-type: {content_type}\r\ncontent-length: {}\r\n\
                     connection: close\r\n\r\n{body}",
                    body.len()
                );
                let _ = sock.write_all(resp.as_bytes()).await;
                let _ = sock.shutdown().await;
            });
        }
    });
    format!("http://{addr}")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn forwarding_errors_come_in_the_error_envelope() {
    let pg = crate::pg_or_skip!();
    let url = pg.fresh_db("fwderr");
    let mut a = Replica::start(&url, &[]);
    let b = Replica::start(&url, &[]);
    let c = reqwest::Client::new();

    // A "replica" that answers with a web server's error page, and one that answers the
    // API's own envelope: each holds a session in the store (alive for the next hour).
    let html = impostor(
        "500 Internal Server Error",
        "text/html",
        "<html><body>oops</body></html>",
    )
    .await;
    let api = impostor(
        "404 Not Found",
        "application/json",
        r#"{"error":{"code":"not_found","message":"session 's-api' not found","details":{}}}"#,
    )
    .await;
    let until = now_ms() + 3_600_000;
    for (id, addr) in [("fake-html", &html), ("fake-api", &api)] {
        pg.psql(
            &url,
            &format!(
                "INSERT INTO sandbox_replicas (id, address, started_at, heartbeat_at) \
                 VALUES ('{id}', '{addr}', 0, {until});
                 INSERT INTO sandbox_sessions (id, user_id, owner, created_at) \
                 VALUES ('s-{id}', 'default', '{id}', 0)"
            ),
        );
    }
    for accept in [None, Some(PROBLEM)] {
        let get = |path: String| {
            let rb = c.get(b.api(&path));
            match accept {
                Some(a) => rb.header("accept", a),
                None => rb,
            }
        };
        let code_of = |headers: &HeaderMap, v: &Value| -> (String, Value) {
            if accept.is_some() {
                assert_eq!(headers[CONTENT_TYPE], PROBLEM, "{v}");
                (v["code"].as_str().unwrap().into(), v["details"].clone())
            } else {
                assert_eq!(headers[CONTENT_TYPE], "application/json", "{v}");
                (
                    v["error"]["code"].as_str().unwrap().into(),
                    v["error"]["details"].clone(),
                )
            }
        };
        // Not an answer of this API: the owner's runtime is out of reach.
        let (s, h, v) = send(get("/sessions/s-fake-html".into())).await;
        assert_eq!(s, StatusCode::SERVICE_UNAVAILABLE, "{v}");
        let (code, details) = code_of(&h, &v);
        assert_eq!(code, "runtime_unavailable", "{v}");
        assert_eq!(details["replica"], html.as_str(), "{v}");
        assert_eq!(details["available"], false, "{v}");
        assert_eq!(h[RETRY_AFTER], "1");
        // The API's own error from the owner arrives as the owner gave it.
        let (s, h, v) = send(get("/sessions/s-fake-api".into())).await;
        assert_eq!(s, StatusCode::NOT_FOUND, "{v}");
        assert_eq!(v["error"]["code"], "not_found", "{v}");
        assert_eq!(h[CONTENT_TYPE], "application/json");
    }

    // A real owner that died: unreachable until its heartbeat runs out, then lost.
    let (s, _, v) = send(
        c.post(a.api("/sessions"))
            .json(&json!({ "spec_version": "1.0", "base_image": "wasmsand/default" })),
    )
    .await;
    assert_eq!(s, StatusCode::CREATED, "{v}");
    let sid = v["session_id"]
        .as_str()
        .or(v["id"].as_str())
        .unwrap()
        .to_string();
    a.kill();
    // Without its checkpoint (as a docker session has none) the session is lost with A.
    pg.psql(
        &url,
        &format!("DELETE FROM sandbox_saved_sessions WHERE id = '{sid}'"),
    );
    let (s, h, v) = send(
        c.get(b.api(&format!("/sessions/{sid}")))
            .header("accept", PROBLEM),
    )
    .await;
    assert_eq!(h[CONTENT_TYPE], PROBLEM, "{s} {v}");
    match s {
        StatusCode::SERVICE_UNAVAILABLE => assert_eq!(v["code"], "runtime_unavailable", "{v}"),
        StatusCode::GONE => assert_eq!(v["code"], "session_lost", "{v}"),
        other => panic!("{other} {v}"),
    }
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    loop {
        let (s, h, v) = send(
            c.post(b.api("/runs"))
                .header("accept", PROBLEM)
                .json(&json!({ "spec_version": "1.0", "session_id": sid, "command": ["true"] })),
        )
        .await;
        assert_eq!(h[CONTENT_TYPE], PROBLEM, "{s} {v}");
        if s == StatusCode::GONE {
            assert_eq!(v["code"], "session_lost", "{v}");
            assert_eq!(v["status"], 410, "{v}");
            assert_eq!(v["session_id"], sid.as_str(), "{v}");
            break;
        }
        assert_eq!(s, StatusCode::SERVICE_UNAVAILABLE, "{v}");
        assert!(std::time::Instant::now() < deadline, "never lost: {v}");
        tokio::time::sleep(std::time::Duration::from_millis(200)).await;
    }
}
