//! Durability with the SQLite store: a new process answers for what the old one finished.

use reqwest::StatusCode;
use serde_json::json;
use wasmsand_server::{Config, Server, StoreConfig};

use super::common::*;

fn sqlite_config(dir: &std::path::Path) -> Config {
    Config {
        store: StoreConfig::Sqlite(dir.join("meta").join("store.db")),
        ..test_config(dir)
    }
}

#[test]
fn a_restart_keeps_runs_artifacts_idempotency_and_sessions_and_fails_runs_in_flight() {
    let dir = tempfile::tempdir().unwrap();
    let key = "restart-key";
    let mut body = TestServer::script("echo persisted; echo art > a.txt");
    body["capture_patterns"] = json!(["a.txt"]);

    // The first process is dropped with its runtime, as a crash would end it: nothing of
    // it runs after that point.
    let first = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let (done_id, done_status, replay, inflight_id, session_id) = first.block_on(async {
        let server = Server::bind(sqlite_config(dir.path()), "127.0.0.1:0")
            .await
            .unwrap();
        let addr = server.local_addr();
        tokio::spawn(server.serve(std::future::pending()));
        let srv = Client::new(addr);
        let (s, _, created) = srv
            .post_with("/runs", body.clone(), &[("Idempotency-Key", key)])
            .await;
        assert!(s.is_success(), "{created}");
        let id = created["run_id"].as_str().unwrap().to_string();
        let status = srv.wait_done(&id).await;
        assert_eq!(status["phase"], "completed");
        let sid = srv.session().await;
        let mut spin = TestServer::script("while true; do :; done");
        spin["timeout_sec"] = json!(5);
        let (_, _, inflight) = srv.post_with("/runs", spin, &[]).await;
        let inflight_id = inflight["run_id"].as_str().unwrap().to_string();
        srv.wait_phase(&inflight_id, |p| p == "running").await;
        (id, status, created, inflight_id, sid)
    });
    first.shutdown_background();

    let second = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    second.block_on(async {
        let srv =
            TestServer::start_in(tempfile::tempdir().unwrap(), sqlite_config(dir.path())).await;
        let (s, again) = srv.get(&format!("/runs/{done_id}")).await;
        assert_eq!(s, StatusCode::OK);
        assert_eq!(again, done_status);

        let (s, list) = srv.get(&format!("/runs/{done_id}/artifacts")).await;
        assert_eq!(s, StatusCode::OK);
        assert_eq!(list["artifacts"][0]["path"], "a.txt");
        let bytes = srv
            .client
            .get(srv.url(&format!("/runs/{done_id}/artifacts/a.txt")))
            .send()
            .await
            .unwrap()
            .bytes()
            .await
            .unwrap();
        assert_eq!(&bytes[..], b"art\n");

        let (s, h, replayed) = srv
            .post_with("/runs", body.clone(), &[("Idempotency-Key", key)])
            .await;
        assert!(s.is_success());
        assert_eq!(replayed, replay);
        assert_eq!(h["idempotent-replayed"], "true");
        let mut other = body.clone();
        other["command"] = json!(["true"]);
        let (s, _, v) = srv
            .post_with("/runs", other, &[("Idempotency-Key", key)])
            .await;
        assert_eq!(s, StatusCode::CONFLICT);
        assert_eq!(v["error"]["details"]["prior_id"], done_id.as_str());

        let st = srv.wait_done(&inflight_id).await;
        assert_eq!(st["phase"], "failed");
        assert_eq!(st["reason_code"], "server_restart");

        // The stream of a finished run from before: its end, with what was lost announced.
        let frames = srv.frames(&done_id, "").await;
        check_stream_rules(&frames);
        assert_eq!(frames.last().unwrap()["data"]["phase"], "completed");
        assert_eq!(frames.last().unwrap()["seq"], done_status["last_seq"]);

        // The session was checkpointed when it was made: the crash did not take it.
        let (s, v) = srv.get(&format!("/sessions/{session_id}")).await;
        assert_eq!(s, StatusCode::OK, "{v}");
        let (_, rt) = srv.get("/runtimes").await;
        assert_eq!(rt["store_mode"], "sqlite");
        srv.stop().await;
    });
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_graceful_shutdown_ends_running_runs_and_records_them() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().to_path_buf();
    let srv = TestServer::start_in(dir, sqlite_config(&path)).await;
    let mut spin = TestServer::script("while true; do :; done");
    spin["timeout_sec"] = json!(600);
    let v = srv.start_run(spin).await;
    let id = v["run_id"].as_str().unwrap().to_string();
    srv.wait_phase(&id, |p| p == "running").await;
    let dir = srv.stop().await;
    let again = TestServer::start_in(dir, sqlite_config(&path)).await;
    let st = again.wait_done(&id).await;
    assert_eq!(st["phase"], "failed");
    assert_eq!(st["reason_code"], "server_shutdown");
}

/// A bare HTTP client for a server started on another runtime.
struct Client {
    addr: std::net::SocketAddr,
    http: reqwest::Client,
}

impl Client {
    fn new(addr: std::net::SocketAddr) -> Client {
        Client {
            addr,
            http: reqwest::Client::new(),
        }
    }

    async fn post_with(
        &self,
        path: &str,
        body: serde_json::Value,
        headers: &[(&str, &str)],
    ) -> (StatusCode, reqwest::header::HeaderMap, serde_json::Value) {
        let mut req = self
            .http
            .post(format!("http://{}{BASE}{path}", self.addr))
            .json(&body);
        for (k, v) in headers {
            req = req.header(*k, *v);
        }
        let resp = req.send().await.unwrap();
        let s = resp.status();
        let h = resp.headers().clone();
        (s, h, resp.json().await.unwrap())
    }

    async fn session(&self) -> String {
        let (_, _, v) = self
            .post_with("/sessions", json!({ "spec_version": "1.0" }), &[])
            .await;
        v["session_id"].as_str().unwrap().to_string()
    }

    async fn wait_phase(&self, id: &str, want: impl Fn(&str) -> bool) -> serde_json::Value {
        let started = std::time::Instant::now();
        loop {
            let v: serde_json::Value = self
                .http
                .get(format!("http://{}{BASE}/runs/{id}", self.addr))
                .send()
                .await
                .unwrap()
                .json()
                .await
                .unwrap();
            if want(v["phase"].as_str().unwrap_or("")) {
                return v;
            }
            assert!(started.elapsed() < GUARD, "stuck: {v}");
            tokio::time::sleep(std::time::Duration::from_millis(20)).await;
        }
    }

    async fn wait_done(&self, id: &str) -> serde_json::Value {
        self.wait_phase(id, |p| {
            matches!(p, "completed" | "failed" | "timed_out" | "killed")
        })
        .await
    }
}
