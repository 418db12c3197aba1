//! `GET /metrics` (Prometheus text) and `GET /admin/metrics` (JSON): the names and labels of
//! docs/service.md ("Metrics"), counters that move with what the server does, one registry
//! per server.

use std::collections::BTreeMap;

use reqwest::StatusCode;
use serde_json::json;

use super::common::*;

async fn scrape(srv: &TestServer) -> prometheus_parse::Scrape {
    let resp = srv
        .client
        .get(format!("http://{}/metrics", srv.addr))
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), StatusCode::OK);
    assert!(
        resp.headers()["content-type"]
            .to_str()
            .unwrap()
            .starts_with("text/plain")
    );
    let text = resp.text().await.unwrap();
    prometheus_parse::Scrape::parse(text.lines().map(|l| Ok(l.to_string()))).expect("parses")
}

/// The value of the sample `name` whose labels include `labels` (0 when absent).
fn value(s: &prometheus_parse::Scrape, name: &str, labels: &[(&str, &str)]) -> f64 {
    s.samples
        .iter()
        .filter(|x| x.metric == name)
        .filter(|x| labels.iter().all(|(k, v)| x.labels.get(k) == Some(*v)))
        .map(|x| match &x.value {
            prometheus_parse::Value::Counter(v)
            | prometheus_parse::Value::Gauge(v)
            | prometheus_parse::Value::Untyped(v) => *v,
            prometheus_parse::Value::Histogram(h) => h.iter().map(|b| b.count).fold(0.0, f64::max),
            prometheus_parse::Value::Summary(_) => f64::NAN,
        })
        .sum()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn counters_move_with_runs_streams_and_refusals() {
    let srv = TestServer::with(|c| {
        c.max_concurrent_runs = 1;
        c.queue_max_length = 1;
        c.max_log_bytes = 100;
    })
    .await;
    let before = scrape(&srv).await;
    assert_eq!(value(&before, "sandbox_runs_started_total", &[]), 0.0);

    let sid = srv.session(json!({})).await;
    let (_, frames, st) = srv
        .run(json!({ "spec_version": "1.0", "session_id": sid, "command": ["bash", "-c", "echo ok"] }))
        .await;
    assert_eq!(st["phase"], "completed");
    assert!(frames.iter().any(|f| f["type"] == "stdout"));
    let (_, _, st) = srv.run(TestServer::script("exit 3")).await;
    assert_eq!(st["phase"], "failed");
    // Past the 100-byte log cap.
    let (_, _, st) = srv
        .run(TestServer::script(
            "for i in $(seq 1 100); do echo line-$i; done",
        ))
        .await;
    assert_eq!(st["log_truncated"], true, "{st}");
    // One running, one waiting, the next refused: the queue is full. (The slot of the
    // previous run may still be held for an instant, so count what actually happened.)
    let long = srv.start_run(TestServer::script("sleep 30")).await;
    let mut accepted = vec![long["run_id"].as_str().unwrap().to_string()];
    let mut refused = 0;
    for _ in 0..3 {
        let (s, _, v) = srv.post("/runs", TestServer::script("true")).await;
        if s == StatusCode::TOO_MANY_REQUESTS {
            refused += 1;
            break;
        }
        assert_eq!(v["phase"], "queued", "{v}");
        accepted.push(v["run_id"].as_str().unwrap().to_string());
    }
    assert_eq!(refused, 1);
    srv.post(&format!("/runs/{}/cancel", accepted[0]), json!({}))
        .await;
    assert_eq!(srv.wait_done(&accepted[0]).await["phase"], "killed");
    for id in &accepted[1..] {
        srv.wait_done(id).await;
    }
    let extra = accepted.len() as f64 - 1.0;

    let m = scrape(&srv).await;
    let wasm = [("runtime", "wasm")];
    assert_eq!(value(&m, "sandbox_sessions_created_total", &wasm), 1.0);
    assert_eq!(value(&m, "sandbox_runs_started_total", &wasm), 4.0 + extra);
    let done = |outcome: &str, reason: &str| {
        value(
            &m,
            "sandbox_runs_completed_total",
            &[
                ("runtime", "wasm"),
                ("outcome", outcome),
                ("reason", reason),
            ],
        )
    };
    assert_eq!(done("completed", "exit_code_0"), 2.0 + extra);
    assert_eq!(done("failed", "nonzero_exit"), 1.0);
    assert_eq!(done("killed", "canceled_by_user"), 1.0);
    assert_eq!(
        value(
            &m,
            "sandbox_run_duration_seconds_count",
            &[("outcome", "completed")]
        ),
        2.0 + extra
    );
    assert!(value(&m, "sandbox_queue_wait_seconds_count", &wasm) >= extra);
    assert_eq!(
        value(
            &m,
            "sandbox_queue_full_total",
            &[
                ("component", "orchestrator"),
                ("runtime", "wasm"),
                ("reason", "queue_full")
            ]
        ),
        1.0
    );
    assert_eq!(
        value(
            &m,
            "sandbox_log_truncations_total",
            &[("component", "ws"), ("reason", "log_cap")]
        ),
        1.0
    );
    assert!(value(&m, "sandbox_log_bytes_total", &wasm) >= 100.0);
    // `run` opens one stream per run.
    assert_eq!(
        value(
            &m,
            "sandbox_ws_connections_opened_total",
            &[("component", "ws")]
        ),
        3.0
    );
    assert_eq!(
        value(&m, "sandbox_ws_disconnects_total", &[("component", "ws")]),
        3.0
    );
    assert_eq!(
        value(&m, "sandbox_runs_in_flight", &[("phase", "running")]),
        0.0
    );

    // The JSON view has the same series, per label set.
    let (s, j) = srv.get("/admin/metrics").await;
    assert_eq!(s, StatusCode::OK);
    let series: BTreeMap<String, f64> = j["sandbox_runs_completed_total"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| {
            (
                e["labels"]["outcome"].as_str().unwrap().to_string(),
                e["value"].as_f64().unwrap(),
            )
        })
        .collect();
    assert_eq!(series["completed"], 2.0 + extra);
    assert_eq!(series["killed"], 1.0);
    assert!(j["sandbox_run_duration_seconds_sum"].is_array(), "{j}");
    assert_eq!(
        j["sandbox_queue_full_total"][0]["labels"],
        json!({ "component": "orchestrator", "runtime": "wasm", "reason": "queue_full" })
    );
    let (_, only) = srv.get("/admin/metrics?name=sandbox_ws_").await;
    assert!(
        only.as_object()
            .unwrap()
            .keys()
            .all(|k| k.starts_with("sandbox_ws_")),
        "{only}"
    );

    // Another server in this process has counters of its own.
    let other = TestServer::start().await;
    assert_eq!(
        value(&scrape(&other).await, "sandbox_runs_started_total", &[]),
        0.0
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn heartbeats_and_uploads_are_counted() {
    let srv = TestServer::with(|c| c.ws_heartbeat_sec = 1).await;
    let sid = srv.session(json!({})).await;
    let form = reqwest::multipart::Form::new().part(
        "files[]",
        reqwest::multipart::Part::bytes(b"hello".to_vec()).file_name("a.txt"),
    );
    let resp = srv
        .client
        .post(srv.url(&format!("/sessions/{sid}/files")))
        .multipart(form)
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), StatusCode::CREATED);
    let (_, frames, _) = srv
        .run(json!({ "spec_version": "1.0", "session_id": sid, "command": ["bash", "-c", "sleep 2.5; cat a.txt"] }))
        .await;
    let beats = frames.iter().filter(|f| f["type"] == "heartbeat").count();
    assert!(beats >= 1, "{frames:?}");
    let m = scrape(&srv).await;
    assert!(
        value(
            &m,
            "sandbox_ws_heartbeats_sent_total",
            &[("component", "ws")]
        ) >= beats as f64
    );
    assert_eq!(
        value(&m, "sandbox_upload_bytes_total", &[("kind", "multipart")]),
        5.0
    );
    assert_eq!(
        value(&m, "sandbox_upload_files_total", &[("kind", "multipart")]),
        1.0
    );
}
