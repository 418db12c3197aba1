//! The run slots shared fairly: a run waiting for its busy session holds none, and freed
//! slots go round robin between the users waiting for one.

use reqwest::{Method, StatusCode};
use serde_json::{Value, json};

use super::auth::{ALICE_KEY, ROOT_KEY, api_key, auth_server, call, wait_done_as};
use super::common::*;

const SPIN: &str = "while true; do :; done";
const PAUSE: &str = "sleep 0.02";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_run_waiting_for_its_busy_session_holds_no_slot() {
    let srv = TestServer::with(|c| c.max_concurrent_runs = 2).await;
    let sid = srv.session(json!({})).await;
    let in_session = |cmd: &str| json!({ "spec_version": "1.0", "session_id": sid, "command": ["bash", "-c", cmd], "timeout_sec": 600 });
    let long = srv.start_run(in_session(SPIN)).await;
    let long_id = long["run_id"].as_str().unwrap().to_string();
    srv.wait_phase(&long_id, |p| p == "running").await;
    // The session is busy: its next run waits, in the queue.
    let (s, _, next) = srv.post("/runs", in_session("echo next")).await;
    assert_eq!(s, StatusCode::ACCEPTED, "{next}");
    assert_eq!(next["phase"], "queued");
    // One of the two slots is free, and a one-shot run takes it at once.
    let (s, _, other) = srv.post("/runs", TestServer::script("echo other")).await;
    assert_eq!(s, StatusCode::OK, "{other}");
    assert_eq!(other["phase"], "starting");
    let st = srv.wait_done(other["run_id"].as_str().unwrap()).await;
    assert_eq!(st["phase"], "completed", "{st}");
    // The waiting run starts when the session is free, and sees what the first one left.
    let next_id = next["run_id"].as_str().unwrap();
    let (_, st) = srv.get(&format!("/runs/{next_id}")).await;
    assert_eq!(st["phase"], "queued", "{st}");
    srv.post(&format!("/runs/{long_id}/cancel"), json!({}))
        .await;
    assert_eq!(srv.wait_done(&long_id).await["phase"], "killed");
    let st = srv.wait_done(next_id).await;
    assert_eq!(st["phase"], "completed", "{st}");
    assert!(st["started_at"].is_string());
}

async fn start_as(srv: &TestServer, who: &[(&str, String)], body: Value) -> String {
    let (s, _, v) = call(srv, Method::POST, &srv.url("/runs"), who, Some(body)).await;
    assert!(s.is_success(), "{v}");
    v["run_id"].as_str().unwrap().to_string()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn freed_slots_go_round_robin_between_users() {
    let srv = auth_server(|c| c.max_concurrent_runs = 1).await;
    let alice = [api_key(ALICE_KEY)];
    let root = [api_key(ROOT_KEY)];
    let mut spin = TestServer::script(SPIN);
    spin["timeout_sec"] = json!(600);
    let blocker = start_as(&srv, &root, spin).await;
    // Alice queues three runs, then root one: root's must not wait behind all of Alice's.
    let mut queued = Vec::new();
    for i in 0..3 {
        let id = start_as(
            &srv,
            &alice,
            TestServer::script(&format!("echo a{i}; {PAUSE}")),
        )
        .await;
        queued.push((format!("a{i}"), id, &alice));
    }
    let id = start_as(&srv, &root, TestServer::script(&format!("echo r; {PAUSE}"))).await;
    queued.push(("r".to_string(), id, &root));
    let cancel = srv.url(&format!("/runs/{blocker}/cancel"));
    let (s, _, _) = call(&srv, Method::POST, &cancel, &root, None).await;
    assert_eq!(s, StatusCode::ACCEPTED);
    let mut started = Vec::new();
    for (name, id, who) in &queued {
        let st = wait_done_as(&srv, id, *who).await;
        assert_eq!(st["phase"], "completed", "{st}");
        started.push((
            st["started_at"].as_str().unwrap().to_string(),
            name.as_str(),
        ));
    }
    // One slot: each run starts after the previous one ended, and lasts long enough that two
    // start times cannot fall in the same millisecond (an `echo` alone can start, end and hand
    // its slot on within one, and a tie would sort by name).
    started.sort();
    let order: Vec<&str> = started.iter().map(|(_, n)| *n).collect();
    assert_eq!(order, ["a0", "r", "a1", "a2"], "{started:?}");
}
