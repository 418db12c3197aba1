//! Per-user quotas and rate limits: each refusal is a 429 with its details and `Retry-After`.

use reqwest::{Method, StatusCode};
use serde_json::{Value, json};

use super::auth::{ALICE_KEY, ROOT_KEY, api_key, auth_server, call, wait_done_as};
use super::common::*;
use futures::StreamExt;
use tokio_tungstenite::tungstenite::Message;
use wasmsand_server::StoreConfig;

fn retry_after(h: &reqwest::header::HeaderMap) -> u64 {
    h.get("retry-after")
        .expect("Retry-After")
        .to_str()
        .unwrap()
        .parse()
        .unwrap()
}

fn assert_refused(s: StatusCode, v: &Value, code: &str, quota: &str) {
    assert_eq!(s, StatusCode::TOO_MANY_REQUESTS, "{v}");
    assert_eq!(v["error"]["code"], code, "{v}");
    assert_eq!(v["error"]["details"]["quota"], quota, "{v}");
}

// Threat: T-SERVICE-EXHAUST (docs/security.md)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_runs_per_user_are_capped() {
    let srv = auth_server(|c| c.user_max_concurrent_runs = 1).await;
    let alice = [api_key(ALICE_KEY)];
    let root = [api_key(ROOT_KEY)];
    let runs = srv.url("/runs");
    let (s, _, long) = call(
        &srv,
        Method::POST,
        &runs,
        &alice,
        Some(TestServer::script("sleep 30")),
    )
    .await;
    assert!(s.is_success(), "{long}");
    let long_id = long["run_id"].as_str().unwrap().to_string();
    let (s, h, v) = call(
        &srv,
        Method::POST,
        &runs,
        &alice,
        Some(TestServer::script("true")),
    )
    .await;
    assert_refused(s, &v, "quota_exceeded", "concurrent_runs");
    assert_eq!(v["error"]["details"]["limit"], 1);
    assert_eq!(v["error"]["details"]["used"], 1);
    assert!(retry_after(&h) >= 1);
    // Another user is not held back by alice's run.
    let (s, _, other) = call(
        &srv,
        Method::POST,
        &runs,
        &root,
        Some(TestServer::script("true")),
    )
    .await;
    assert!(s.is_success(), "{other}");
    // Once alice's run ends, she may start another.
    let (s, _, _) = call(
        &srv,
        Method::POST,
        &srv.url(&format!("/runs/{long_id}/cancel")),
        &alice,
        None,
    )
    .await;
    assert_eq!(s, StatusCode::ACCEPTED);
    assert_eq!(
        wait_done_as(&srv, &long_id, &alice).await["phase"],
        "killed"
    );
    let (s, _, v) = call(
        &srv,
        Method::POST,
        &runs,
        &alice,
        Some(TestServer::script("true")),
    )
    .await;
    assert!(s.is_success(), "{v}");
    // The refusals are counted.
    let metrics = srv
        .client
        .get(format!("http://{}/metrics", srv.addr))
        .header("x-api-key", ROOT_KEY)
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    assert!(
        metrics.contains("sandbox_quota_rejections_total{quota=\"concurrent_runs\"} 1"),
        "{metrics}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn runs_per_minute_are_rate_limited() {
    let srv = TestServer::with(|c| c.user_runs_per_minute = 2).await;
    for _ in 0..2 {
        srv.run(TestServer::script("true")).await;
    }
    let (s, h, v) = srv.post("/runs", TestServer::script("true")).await;
    assert_refused(s, &v, "rate_limited", "runs_per_minute");
    assert_eq!(v["error"]["details"]["limit"], 2);
    let wait = retry_after(&h);
    assert!((1..=60).contains(&wait), "{wait}");
    assert_eq!(v["error"]["details"]["retry_after_sec"], wait);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cpu_seconds_per_day_are_capped() {
    let srv = TestServer::with(|c| c.user_cpu_seconds_per_day = 1).await;
    // The quota counts what the server measured, in whole milliseconds per run.
    let cpu_ms = |status: &Value| {
        assert_eq!(status["phase"], "completed", "{status}");
        (status["resource_usage"]["cpu_time_sec"].as_f64().unwrap() * 1000.0) as u64
    };
    let mut used_ms = 0;
    // Sleeping costs no CPU: the quota is not touched however long it takes.
    for _ in 0..2 {
        let (_, _, status) = srv.run(TestServer::script("sleep 0.7")).await;
        let ms = cpu_ms(&status);
        assert!(ms < 500, "{status}");
        used_ms += ms;
    }
    // Short burns until the server refuses: how much CPU a burn gets depends on the machine's
    // load, so the test follows the server's own measure instead of assuming one. Every run
    // admitted was admitted under the limit, and the refusal comes with the first run over it.
    let burn = TestServer::one_shot(&[
        "python3",
        "-c",
        "import time\nt = time.time()\nwhile time.time() - t < 0.4: pass",
    ]);
    let mut burns = 0;
    let (s, h, v) = loop {
        let (s, h, v) = srv.post("/runs", burn.clone()).await;
        if !s.is_success() {
            break (s, h, v);
        }
        assert!(used_ms < 1000, "admitted at {used_ms} ms used: {v}");
        burns += 1;
        assert!(
            burns <= 200,
            "200 burns and {used_ms} CPU ms: the burn uses no CPU"
        );
        let status = srv.wait_done(v["run_id"].as_str().unwrap()).await;
        used_ms += cpu_ms(&status);
    };
    assert!(used_ms >= 1000, "refused at {used_ms} ms used: {v}");
    assert_refused(s, &v, "quota_exceeded", "cpu_seconds_per_day");
    assert_eq!(v["error"]["details"]["used"], used_ms / 1000, "{v}");
    assert_eq!(v["error"]["details"]["limit"], 1, "{v}");
    // Any run is refused, not only burns.
    let (s, _, v) = srv.post("/runs", TestServer::script("true")).await;
    assert_refused(s, &v, "quota_exceeded", "cpu_seconds_per_day");
    // Room comes back when the runs leave the rolling day.
    let wait = retry_after(&h);
    assert!((86_000..=86_400).contains(&wait), "{wait}");
    srv.app.clock.advance(std::time::Duration::from_secs(wait));
    let (s, _, v) = srv.post("/runs", TestServer::script("true")).await;
    assert!(s.is_success(), "{v}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn artifact_bytes_per_day_are_capped() {
    let srv = TestServer::with(|c| c.user_artifact_mb_per_day = 1).await;
    let capture = |script: &str| {
        let mut b = TestServer::script(script);
        b["capture_patterns"] = json!(["*.bin"]);
        b
    };
    let (_, _, st) = srv
        .run(capture("head -c 1048576 /dev/zero > one.bin"))
        .await;
    assert_eq!(st["resource_usage"]["artifact_bytes"], 1_048_576, "{st}");
    let (s, h, v) = srv.post("/runs", capture("true")).await;
    assert_refused(s, &v, "quota_exceeded", "artifact_bytes_per_day");
    assert_eq!(v["error"]["details"]["used"], 1_048_576);
    assert_eq!(v["error"]["details"]["limit"], 1_048_576);
    assert!((86_000..=86_400).contains(&retry_after(&h)));
    // A run that captures nothing still runs.
    let (s, _, v) = srv.post("/runs", TestServer::script("true")).await;
    assert!(s.is_success(), "{v}");
}

// Threat: T-SERVICE-EXHAUST (docs/security.md)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn artifact_bytes_are_capped_per_run_and_per_user() {
    let srv = TestServer::with(|c| {
        c.max_artifact_bytes_per_run_mb = 1;
        c.max_artifact_bytes_per_user_mb = 2;
    })
    .await;
    let capture = |script: &str| {
        let mut b = TestServer::script(script);
        b["capture_patterns"] = json!(["*.bin"]);
        b
    };
    // Over the per-run cap: the file is left out and the run says so.
    let (_, _, st) = srv
        .run(capture("head -c 1048577 /dev/zero > big.bin"))
        .await;
    assert_eq!(st["phase"], "completed", "{st}");
    assert_eq!(st["artifacts_capped"], true, "{st}");
    assert_eq!(st["resource_usage"]["artifact_bytes"], 0);
    // Two runs of exactly 1 MiB fill the user's 2 MiB.
    for _ in 0..2 {
        let (_, _, st) = srv
            .run(capture("head -c 1048576 /dev/zero > one.bin"))
            .await;
        assert_eq!(st["resource_usage"]["artifact_bytes"], 1_048_576, "{st}");
    }
    let (s, h, v) = srv.post("/runs", capture("true")).await;
    assert_refused(s, &v, "quota_exceeded", "artifact_bytes_per_user");
    assert_eq!(v["error"]["details"]["used"], 2 * 1_048_576);
    assert_eq!(v["error"]["details"]["limit"], 2 * 1_048_576);
    // The room comes back with the artifact TTL (24 h by default).
    assert!(retry_after(&h) > 86_000);
    // A run that captures nothing still runs.
    let (s, _, v) = srv.post("/runs", TestServer::script("true")).await;
    assert!(s.is_success(), "{v}");
}

/// A run seen to end has given its place back: its end is stored before the status or the
/// stream shows it, so the next run, started the instant the last one's stream ends, is
/// admitted (it was refused now and then while the end was still being written).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_run_seen_to_end_has_given_its_place_back() {
    let srv = TestServer::with(|c| {
        c.user_max_concurrent_runs = 1;
        c.store = StoreConfig::Sqlite(c.data_dir.join("store.db"));
    })
    .await;
    for round in 0..50 {
        let (s, _, v) = srv.post("/runs", TestServer::script("true")).await;
        assert!(s.is_success(), "round {round}: {v}");
        let mut ws = srv.connect(v["run_id"].as_str().unwrap()).await;
        // The next run goes in as soon as the end frame arrives, not after the close.
        loop {
            let msg = ws
                .next()
                .await
                .expect("the stream ended without an end frame");
            if let Message::Text(t) = msg.unwrap() {
                let frame: Value = serde_json::from_str(&t).unwrap();
                if frame["event"] == "end" {
                    break;
                }
            }
        }
    }
}

// Threat: T-SERVICE-EXHAUST (docs/security.md)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn session_upload_download_and_admin_requests_are_rate_limited_per_user() {
    let srv = auth_server(|c| {
        c.user_sessions_per_minute = 2;
        c.user_uploads_per_minute = 1;
        c.user_downloads_per_minute = 1;
        c.admin_requests_per_minute = 1;
    })
    .await;
    let alice = [api_key(ALICE_KEY)];
    let root = [api_key(ROOT_KEY)];
    let sessions = srv.url("/sessions");
    let new_session = json!({ "spec_version": "1.0" });
    let mut sids = Vec::new();
    for _ in 0..2 {
        let (s, _, v) = call(
            &srv,
            Method::POST,
            &sessions,
            &alice,
            Some(new_session.clone()),
        )
        .await;
        assert_eq!(s, StatusCode::CREATED, "{v}");
        sids.push(v["session_id"].as_str().unwrap().to_string());
    }
    let (s, h, v) = call(
        &srv,
        Method::POST,
        &sessions,
        &alice,
        Some(new_session.clone()),
    )
    .await;
    assert_refused(s, &v, "rate_limited", "sessions_per_minute");
    assert_eq!(v["error"]["details"]["limit"], 2);
    let wait = retry_after(&h);
    assert!((1..=30).contains(&wait), "{wait}");
    // Forking makes a session too.
    let fork = srv.url(&format!("/sessions/{}/fork", sids[0]));
    let (s, _, v) = call(&srv, Method::POST, &fork, &alice, Some(json!({}))).await;
    assert_refused(s, &v, "rate_limited", "sessions_per_minute");
    // Another user has a limit of their own; reading is not limited.
    let (s, _, v) = call(
        &srv,
        Method::POST,
        &sessions,
        &root,
        Some(new_session.clone()),
    )
    .await;
    assert_eq!(s, StatusCode::CREATED, "{v}");
    let (s, _, v) = call(&srv, Method::GET, &sessions, &alice, None).await;
    assert_eq!(s, StatusCode::OK, "{v}");

    // Writes and uploads share one limit, reads and artifact downloads another.
    let content = srv.url(&format!("/sessions/{}/files/content?path=a.txt", sids[0]));
    let resp = srv
        .client
        .put(&content)
        .header("x-api-key", ALICE_KEY)
        .body("hello")
        .send()
        .await
        .unwrap();
    assert!(resp.status().is_success(), "{}", resp.status());
    let tar = tar_of(&[("b.txt", b"b")]);
    let resp = srv
        .client
        .post(srv.url(&format!("/sessions/{}/files", sids[0])))
        .header("x-api-key", ALICE_KEY)
        .header("content-type", "application/x-tar")
        .body(tar)
        .send()
        .await
        .unwrap();
    let (s, h) = (resp.status(), resp.headers().clone());
    let v: Value = resp.json().await.unwrap();
    assert_refused(s, &v, "rate_limited", "uploads_per_minute");
    assert!(retry_after(&h) >= 1);
    let (s, _, v) = call(&srv, Method::GET, &content, &alice, None).await;
    assert_eq!(s, StatusCode::OK, "{v}");
    let (s, _, v) = call(&srv, Method::GET, &content, &alice, None).await;
    assert_refused(s, &v, "rate_limited", "downloads_per_minute");

    // Admin endpoints, per admin.
    let admin_runs = srv.url("/admin/runs");
    let (s, _, v) = call(&srv, Method::GET, &admin_runs, &root, None).await;
    assert_eq!(s, StatusCode::OK, "{v}");
    let (s, _, v) = call(&srv, Method::GET, &admin_runs, &root, None).await;
    assert_refused(s, &v, "rate_limited", "admin_requests_per_minute");

    // Room comes back with time (the app's clock: nothing sleeps).
    srv.app.clock.advance(std::time::Duration::from_secs(60));
    let (s, _, v) = call(&srv, Method::POST, &sessions, &alice, Some(new_session)).await;
    assert_eq!(s, StatusCode::CREATED, "{v}");
    let (s, _, v) = call(&srv, Method::GET, &admin_runs, &root, None).await;
    assert_eq!(s, StatusCode::OK, "{v}");
}
