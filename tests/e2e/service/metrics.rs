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
    // Summed per outcome over the other labels (reason, exit_code).
    let mut series: BTreeMap<String, f64> = BTreeMap::new();
    for e in j["sandbox_runs_completed_total"].as_array().unwrap() {
        *series
            .entry(e["labels"]["outcome"].as_str().unwrap().to_string())
            .or_default() += e["value"].as_f64().unwrap();
    }
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

/// The sample `name` with exactly these labels, if the scrape has it.
fn sample(s: &prometheus_parse::Scrape, name: &str, labels: &[(&str, &str)]) -> Option<f64> {
    let found: Vec<f64> = s
        .samples
        .iter()
        .filter(|x| x.metric == name)
        .filter(|x| {
            x.labels.len() == labels.len()
                && labels.iter().all(|(k, v)| x.labels.get(k) == Some(*v))
        })
        .map(|x| match &x.value {
            prometheus_parse::Value::Counter(v)
            | prometheus_parse::Value::Gauge(v)
            | prometheus_parse::Value::Untyped(v) => *v,
            prometheus_parse::Value::Histogram(h) => h.iter().map(|b| b.count).fold(0.0, f64::max),
            prometheus_parse::Value::Summary(_) => f64::NAN,
        })
        .collect();
    assert!(found.len() <= 1, "{name} {labels:?}: {found:?}");
    found.first().copied()
}

/// How many observations of the histogram `name` (with labels including `labels`) were at
/// most `le` seconds.
fn at_most(s: &prometheus_parse::Scrape, name: &str, labels: &[(&str, &str)], le: f64) -> f64 {
    s.samples
        .iter()
        .filter(|x| x.metric == name)
        .filter(|x| labels.iter().all(|(k, v)| x.labels.get(k) == Some(*v)))
        .map(|x| match &x.value {
            prometheus_parse::Value::Histogram(h) => {
                h.iter()
                    .find(|b| b.less_than == le)
                    .unwrap_or_else(|| panic!("{name} has no bucket {le}"))
                    .count
            }
            other => panic!("{name} is not a histogram: {other:?}"),
        })
        .sum()
}

const EXIT_CODES: [&str; 6] = ["1", "2", "126", "127", "128+signal", "other"];

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_known_series_is_exported_at_zero_from_start_up() {
    let srv = TestServer::with(|c| {
        c.supported_spec_versions = vec!["1.0".into(), "1.1".into()];
    })
    .await;
    let m = scrape(&srv).await;
    let zero = |name: &str, labels: &[(&str, &str)]| {
        assert_eq!(
            sample(&m, name, labels),
            Some(0.0),
            "{name} {labels:?} is not exported at zero"
        );
    };
    for spec in ["1.0", "1.1"] {
        let run = [
            ("runtime", "wasm"),
            ("base_image", "wasmsand/default"),
            ("spec_version", spec),
        ];
        zero("sandbox_runs_started_total", &run);
        for h in [
            "sandbox_queue_wait_seconds",
            "sandbox_run_start_latency_seconds",
        ] {
            zero(&format!("{h}_count"), &run);
            zero(&format!("{h}_sum"), &run);
            assert_eq!(at_most(&m, h, &run, 0.005), 0.0);
        }
        let ended = |outcome: &'static str, reason: &'static str| {
            let mut l = run.to_vec();
            l.extend([("outcome", outcome), ("reason", reason)]);
            l
        };
        for (outcome, reason) in [
            ("failed", "nonzero_exit"),
            ("timed_out", "execution_timeout"),
            ("killed", "canceled_by_user"),
            ("failed", "queue_ttl_expired"),
        ] {
            zero(
                "sandbox_run_duration_seconds_count",
                &ended(outcome, reason),
            );
        }
        let mut ok = ended("completed", "exit_code_0");
        zero("sandbox_run_duration_seconds_count", &ok);
        ok.push(("exit_code", "0"));
        zero("sandbox_runs_completed_total", &ok);
        for code in EXIT_CODES {
            let mut l = ended("failed", "nonzero_exit");
            l.push(("exit_code", code));
            zero("sandbox_runs_completed_total", &l);
        }
        let mut l = ended("timed_out", "startup_timeout");
        l.push(("exit_code", "none"));
        zero("sandbox_runs_completed_total", &l);
    }
    // Docker is off in these tests: none of its series.
    assert!(
        !m.samples
            .iter()
            .any(|s| s.labels.get("runtime") == Some("docker"))
    );
    for quota in [
        "concurrent_runs",
        "runs_per_minute",
        "cpu_seconds_per_day",
        "artifact_bytes_per_day",
        "artifact_bytes_per_user",
        "sessions_per_minute",
        "uploads_per_minute",
        "downloads_per_minute",
        "admin_requests_per_minute",
    ] {
        zero("sandbox_quota_rejections_total", &[("quota", quota)]);
    }
    zero("sandbox_sessions_created_total", &[("runtime", "wasm")]);
    zero("sandbox_log_bytes_total", &[("runtime", "wasm")]);
    for (name, reason) in [
        ("sandbox_queue_full_total", "queue_full"),
        ("sandbox_queue_ttl_expired_total", "queue_ttl_expired"),
    ] {
        zero(
            name,
            &[
                ("component", "orchestrator"),
                ("runtime", "wasm"),
                ("reason", reason),
            ],
        );
    }
    for kind in ["multipart", "tar", "tar.gz", "zip", "file"] {
        zero("sandbox_upload_bytes_total", &[("kind", kind)]);
        zero("sandbox_upload_files_total", &[("kind", kind)]);
    }
    for name in [
        "sandbox_ws_connections_opened_total",
        "sandbox_ws_heartbeats_sent_total",
        "sandbox_ws_disconnects_total",
    ] {
        zero(name, &[("component", "ws")]);
    }
    zero(
        "sandbox_ws_queue_drops_total",
        &[("component", "ws"), ("reason", "drop_oldest")],
    );
    zero(
        "sandbox_log_truncations_total",
        &[("component", "ws"), ("reason", "log_cap")],
    );
    for decision in ["allowed", "no_match", "forbidden_address"] {
        zero("sandbox_egress_total", &[("decision", decision)]);
    }
    for phase in ["queued", "starting", "running"] {
        zero("sandbox_runs_in_flight", &[("phase", phase)]);
    }
    zero("sandbox_processes_started_total", &[("runtime", "wasm")]);
    for status in ["exited", "killed", "timed_out", "failed"] {
        zero(
            "sandbox_processes_ended_total",
            &[("runtime", "wasm"), ("status", status)],
        );
    }
    for name in [
        "sandbox_queue_length",
        "sandbox_sessions_active",
        "sandbox_processes_running",
        "sandbox_sessions_hibernated_total",
        "sandbox_sessions_woken_total",
        "sandbox_session_checkpoint_bytes_total",
        "sandbox_session_wake_seconds_count",
        "sandbox_session_checkpoint_seconds_count",
    ] {
        zero(name, &[]);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn runs_are_counted_by_image_spec_exit_code_and_wait() {
    let srv = TestServer::with(|c| {
        c.max_concurrent_runs = 1;
        c.supported_spec_versions = vec!["1.0".into(), "1.1".into()];
    })
    .await;
    let run_labels = |spec: &'static str| {
        [
            ("runtime", "wasm"),
            ("base_image", "wasmsand/default"),
            ("spec_version", spec),
        ]
    };
    let v10 = run_labels("1.0");

    // A run that starts at once waited exactly 0.
    let (_, _, st) = srv.run(TestServer::script("exit 0")).await;
    assert_eq!(st["phase"], "completed");
    let m = scrape(&srv).await;
    assert_eq!(value(&m, "sandbox_queue_wait_seconds_count", &v10), 1.0);
    assert_eq!(value(&m, "sandbox_queue_wait_seconds_sum", &v10), 0.0);
    assert_eq!(
        value(&m, "sandbox_run_start_latency_seconds_count", &v10),
        1.0
    );

    for (script, code) in [
        ("exit 1", 1),
        ("exit 2", 2),
        ("exit 126", 126),
        ("exit 9", 9),
    ] {
        let (_, _, st) = srv.run(TestServer::script(script)).await;
        assert_eq!(st["exit_code"], code, "{st}");
    }
    let (_, _, st) = srv.run(TestServer::one_shot(&["no-such-program"])).await;
    assert_eq!(st["exit_code"], 127, "{st}");
    // Under spec 1.1.
    let mut body = TestServer::script("exit 1");
    body["spec_version"] = json!("1.1");
    let (_, _, st) = srv.run(body).await;
    assert_eq!(st["spec_version"], "1.1", "{st}");

    // A run killed by a signal (cancel: TERM), with another waiting behind it all along.
    let long = srv
        .start_run(TestServer::script("echo started; sleep 60"))
        .await;
    let long = long["run_id"].as_str().unwrap().to_string();
    let mut ws = srv.connect(&long).await;
    let mut frames = Vec::new();
    read_until(&mut ws, &mut frames, |f| {
        f.iter().any(|x| x["type"] == "stdout")
    })
    .await;
    let (s, _, queued) = srv.post("/runs", TestServer::script("exit 0")).await;
    assert_eq!(s, StatusCode::ACCEPTED, "{queued}");
    assert_eq!(queued["phase"], "queued");
    tokio::time::sleep(std::time::Duration::from_millis(400)).await;
    srv.post(&format!("/runs/{long}/cancel"), json!({})).await;
    let st = srv.wait_done(&long).await;
    assert_eq!(st["phase"], "killed");
    assert_eq!(st["exit_code"], 143);
    let queued = srv.wait_done(queued["run_id"].as_str().unwrap()).await;
    assert_eq!(queued["phase"], "completed");

    let m = scrape(&srv).await;
    let done = |labels: &[(&str, &str)], outcome: &str, reason: &str, code: &str| {
        let mut l = labels.to_vec();
        l.extend([
            ("outcome", outcome),
            ("reason", reason),
            ("exit_code", code),
        ]);
        sample(&m, "sandbox_runs_completed_total", &l).unwrap_or(0.0)
    };
    assert_eq!(done(&v10, "completed", "exit_code_0", "0"), 2.0);
    for (code, n) in [
        ("1", 1.0),
        ("2", 1.0),
        ("126", 1.0),
        ("127", 1.0),
        ("other", 1.0),
    ] {
        assert_eq!(done(&v10, "failed", "nonzero_exit", code), n, "{code}");
    }
    assert_eq!(done(&v10, "failed", "nonzero_exit", "128+signal"), 0.0);
    assert_eq!(done(&v10, "killed", "canceled_by_user", "128+signal"), 1.0);
    assert_eq!(done(&run_labels("1.1"), "failed", "nonzero_exit", "1"), 1.0);
    assert_eq!(value(&m, "sandbox_runs_started_total", &v10), 8.0);
    assert_eq!(
        value(&m, "sandbox_runs_started_total", &run_labels("1.1")),
        1.0
    );
    assert_eq!(
        value(
            &m,
            "sandbox_run_duration_seconds_count",
            &[("spec_version", "1.0"), ("base_image", "wasmsand/default")]
        ),
        8.0
    );

    // Every run observed its wait: 0 for those that started at once (the first one above),
    // and at least the 400 ms it was kept behind the long run for the queued one.
    let all = [("runtime", "wasm")];
    assert_eq!(value(&m, "sandbox_queue_wait_seconds_count", &all), 9.0);
    assert_eq!(at_most(&m, "sandbox_queue_wait_seconds", &all, 0.25), 8.0);
    assert!(value(&m, "sandbox_queue_wait_seconds_sum", &all) >= 0.4);
    // The start latency includes that wait.
    assert_eq!(
        value(&m, "sandbox_run_start_latency_seconds_count", &all),
        9.0
    );
    assert!(value(&m, "sandbox_run_start_latency_seconds_sum", &all) >= 0.4);
}
