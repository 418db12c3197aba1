//! Audit events: in the store (`GET /admin/audit`) and in the JSON-lines sink, in order, with
//! `policy_hash`, `spec_version` and `source`, and never the code or a secret.

use std::time::Duration;

use reqwest::{Method, StatusCode};
use serde_json::{Value, json};

use super::auth::{ALICE_KEY, ROOT_KEY, api_key, auth_server, call, wait_done_as};
use super::common::*;

/// The audit events of one run once its terminal event is in.
async fn events_of(srv: &TestServer, who: &[(&str, String)], run_id: &str) -> Vec<Value> {
    let started = std::time::Instant::now();
    loop {
        let url = srv.url(&format!("/admin/audit?run_id={run_id}&limit=200"));
        let (s, _, v) = call(srv, Method::GET, &url, who, None).await;
        assert_eq!(s, StatusCode::OK, "{v}");
        let items = v["items"].as_array().unwrap().clone();
        let done = items.iter().any(|e| {
            matches!(
                e["event"].as_str().unwrap(),
                "sandbox.run.completed"
                    | "sandbox.run.failed"
                    | "sandbox.run.timed_out"
                    | "sandbox.run.killed"
            )
        });
        if done {
            return items;
        }
        assert!(
            started.elapsed() < GUARD,
            "no terminal event for {run_id}: {v}"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

fn names(events: &[Value]) -> Vec<&str> {
    events
        .iter()
        .map(|e| e["event"].as_str().unwrap())
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn runs_and_sessions_leave_an_audit_trail_without_secrets() {
    let dir = tempfile::tempdir().unwrap();
    let log_path = dir.path().join("audit.jsonl");
    let lp = log_path.clone();
    let srv = auth_server(move |c| {
        c.audit_log_path = Some(lp);
        c.store = wasmsand_server::StoreConfig::Sqlite(c.data_dir.join("s.db"));
    })
    .await;
    let policy_hash = srv.app.policy_hash();
    let alice = [api_key(ALICE_KEY), ("x-sandbox-source", "ide".to_string())];
    let root = [api_key(ROOT_KEY)];

    let (s, _, sess) = call(
        &srv,
        Method::POST,
        &srv.url("/sessions"),
        &alice,
        Some(json!({ "spec_version": "1.0" })),
    )
    .await;
    assert_eq!(s, StatusCode::CREATED);
    let sid = sess["session_id"].as_str().unwrap();
    let body = json!({
        "spec_version": "1.0", "session_id": sid,
        "command": ["bash", "-c", "echo CODE-CONTENT-7731 $TOKEN > out.txt"],
        "env": { "TOKEN": "ENV-SECRET-4410" },
        "capture_patterns": ["out.txt"],
    });
    let (s, h, run) = call(&srv, Method::POST, &srv.url("/runs"), &alice, Some(body)).await;
    assert!(s.is_success(), "{run}");
    let trace_id = h["x-request-id"].to_str().unwrap().to_string();
    let rid = run["run_id"].as_str().unwrap().to_string();
    assert_eq!(wait_done_as(&srv, &rid, &alice).await["phase"], "completed");

    let events = events_of(&srv, &root, &rid).await;
    assert_eq!(
        names(&events),
        [
            "sandbox.run.created",
            "sandbox.run.starting",
            "sandbox.run.running",
            "sandbox.run.completed"
        ]
    );
    for e in &events {
        assert_eq!(e["user_id"], "alice");
        assert_eq!(e["run_id"], rid.as_str());
        assert_eq!(e["session_id"], sid);
        assert_eq!(e["policy_hash"], policy_hash.as_str());
        assert_eq!(e["spec_version"], "1.0");
        assert_eq!(e["source"], "ide");
        assert_eq!(e["runtime"], "wasm");
        assert_eq!(e["trace_id"], trace_id.as_str());
        assert!(
            e["image_digest"].as_str().unwrap().starts_with("sha256:"),
            "{e}"
        );
        assert!(e["ts"].as_str().unwrap().ends_with('Z'));
    }
    let end = &events[3];
    assert_eq!(end["exit_code"], 0);
    assert!(
        end["resource_usage"]["artifact_bytes"].as_u64().unwrap() > 0,
        "{end}"
    );
    assert_eq!(end["limits"]["timeout_sec"], 60);

    // A failed, a timed-out and a killed run, from another source.
    let api = [api_key(ALICE_KEY)];
    let mut ids = Vec::new();
    for body in [
        TestServer::script("exit 4"),
        json!({ "spec_version": "1.0", "base_image": "wasmsand/default", "command": ["bash", "-c", "sleep 10"], "timeout_sec": 1 }),
        TestServer::script("sleep 30"),
    ] {
        let (s, _, v) = call(&srv, Method::POST, &srv.url("/runs"), &api, Some(body)).await;
        assert!(s.is_success(), "{v}");
        ids.push(v["run_id"].as_str().unwrap().to_string());
    }
    wait_phase_as(&srv, &ids[2], &api, "running").await;
    let (s, _, _) = call(
        &srv,
        Method::POST,
        &srv.url(&format!("/runs/{}/cancel", ids[2])),
        &api,
        None,
    )
    .await;
    assert_eq!(s, StatusCode::ACCEPTED);
    let failed = events_of(&srv, &root, &ids[0]).await;
    let last = failed.last().unwrap();
    assert_eq!(last["event"], "sandbox.run.failed");
    assert_eq!(
        (last["exit_code"].clone(), last["reason_code"].clone()),
        (json!(4), json!("nonzero_exit"))
    );
    assert_eq!(last["source"], "api");
    let timed = events_of(&srv, &root, &ids[1]).await;
    assert_eq!(timed.last().unwrap()["event"], "sandbox.run.timed_out");
    assert_eq!(timed.last().unwrap()["reason_code"], "execution_timeout");
    let killed = events_of(&srv, &root, &ids[2]).await;
    assert_eq!(killed.last().unwrap()["event"], "sandbox.run.killed");
    assert_eq!(killed.last().unwrap()["message"], "canceled_by_user");

    // The session's event, filtered by kind.
    let (_, _, v) = call(
        &srv,
        Method::GET,
        &srv.url("/admin/audit?event=sandbox.session.created"),
        &root,
        None,
    )
    .await;
    assert_eq!(v["total"], 1, "{v}");
    assert_eq!(v["items"][0]["session_id"], sid);
    assert_eq!(v["items"][0]["source"], "ide");
    assert_eq!(v["items"][0]["policy_hash"], policy_hash.as_str());
    // Users do not read the audit trail.
    let (s, _, _) = call(&srv, Method::GET, &srv.url("/admin/audit"), &api, None).await;
    assert_eq!(s, StatusCode::FORBIDDEN);

    // The file sink has every stored event, and neither holds code, env values or keys.
    let (_, _, all) = call(
        &srv,
        Method::GET,
        &srv.url("/admin/audit?limit=200"),
        &root,
        None,
    )
    .await;
    let total = all["total"].as_u64().unwrap();
    // The session's event, then created, starting, running and the end of each of 4 runs.
    assert_eq!(total, 1 + 4 * 4, "{all}");
    let text = std::fs::read_to_string(&log_path).unwrap();
    let lines: Vec<Value> = text
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(lines.len() as u64, total);
    for secret in ["CODE-CONTENT-7731", "ENV-SECRET-4410", ALICE_KEY, ROOT_KEY] {
        assert!(!text.contains(secret), "{secret} in the audit log");
        assert!(
            !all.to_string().contains(secret),
            "{secret} in the stored audit events"
        );
    }
    // The command is identified by its digest only.
    assert_eq!(events[0]["command_sha256"].as_str().unwrap().len(), 64);

    // The events are in the store: they outlive the process.
    let dir = srv.stop().await;
    let mut c = test_config(dir.path());
    c.store = wasmsand_server::StoreConfig::Sqlite(dir.path().join("s.db"));
    let again = TestServer::start_in(dir, c).await;
    let (s, v) = again.get(&format!("/admin/audit?run_id={rid}")).await;
    assert_eq!(s, StatusCode::OK);
    assert_eq!(v["total"], 4, "{v}");
}

async fn wait_phase_as(srv: &TestServer, id: &str, who: &[(&str, String)], phase: &str) {
    let started = std::time::Instant::now();
    loop {
        let (_, _, v) = call(
            srv,
            Method::GET,
            &srv.url(&format!("/runs/{id}")),
            who,
            None,
        )
        .await;
        if v["phase"] == phase {
            return;
        }
        assert!(started.elapsed() < GUARD, "{v}");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}
