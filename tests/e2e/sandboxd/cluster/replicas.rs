//! Two `sandboxd serve` processes on one PostgreSQL behave as one service.

use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use futures::StreamExt;
use reqwest::StatusCode;
use serde_json::{Value, json};
use tokio_tungstenite::tungstenite::Message;

pub const BASE: &str = "/api/v1/sandbox";

/// One `sandboxd serve` process; killed when dropped.
pub struct Replica {
    pub url: String,
    child: Child,
    _dir: tempfile::TempDir,
}

impl Replica {
    pub fn start(store: &str, env: &[(&str, &str)]) -> Replica {
        let dir = tempfile::tempdir().unwrap();
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_e2e-sandboxd"));
        cmd.args(["serve", "--listen", "127.0.0.1:0", "--store", store])
            .arg("--data-dir")
            .arg(dir.path())
            .env("SANDBOX_REPLICA_HEARTBEAT_SEC", "1")
            .env("SANDBOX_REPLICA_TTL_SEC", "3")
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            // The request log would drown the test output; it stays in the replica's dir.
            .stderr(std::fs::File::create(dir.path().join("stderr.log")).unwrap());
        for (k, v) in env {
            cmd.env(k, v);
        }
        let mut child = cmd.spawn().expect("sandboxd starts");
        let mut line = String::new();
        BufReader::new(child.stdout.take().unwrap())
            .read_line(&mut line)
            .unwrap();
        // "wasmsand service listening on http://127.0.0.1:PORT/api/v1/sandbox (store: ...)"
        let url = line
            .split_whitespace()
            .find(|w| w.starts_with("http://"))
            .unwrap_or_else(|| panic!("no address in {line:?}"))
            .trim_end_matches(BASE)
            .to_string();
        assert!(line.contains("(store: "), "{line}");
        Replica {
            url,
            child,
            _dir: dir,
        }
    }

    pub fn api(&self, path: &str) -> String {
        format!("{}{BASE}{path}", self.url)
    }

    pub fn ws(&self, path: &str) -> String {
        format!("{}{BASE}{path}", self.url.replacen("http://", "ws://", 1))
    }

    /// The process id (to read its memory use).
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// SIGKILL: the process dies without unregistering (a crash, a lost machine).
    pub fn kill(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }

    /// SIGTERM: a clean stop.
    pub fn terminate(&mut self) {
        let _ = Command::new("kill")
            .args(["-TERM", &self.child.id().to_string()])
            .status();
        let _ = self.child.wait();
    }
}

impl Drop for Replica {
    fn drop(&mut self) {
        self.kill();
    }
}

pub fn run_body(cmd: &[&str]) -> Value {
    json!({ "spec_version": "1.0", "base_image": "wasmsand/default", "command": cmd })
}

async fn post(
    c: &reqwest::Client,
    url: &str,
    body: &Value,
    key: Option<&str>,
) -> (StatusCode, Value, bool) {
    let mut rb = c.post(url).json(body);
    if let Some(k) = key {
        rb = rb.header("idempotency-key", k);
    }
    let r = rb.send().await.unwrap();
    let replayed = r.headers().contains_key("idempotent-replayed");
    let status = r.status();
    let text = r.text().await.unwrap();
    (
        status,
        serde_json::from_str(&text).unwrap_or(Value::String(text)),
        replayed,
    )
}

async fn get(c: &reqwest::Client, url: &str) -> (StatusCode, Value) {
    let r = c.get(url).send().await.unwrap();
    let status = r.status();
    let text = r.text().await.unwrap();
    (
        status,
        serde_json::from_str(&text).unwrap_or(Value::String(text)),
    )
}

/// Polls a run through `via` until its phase is terminal.
pub async fn wait_done(c: &reqwest::Client, via: &Replica, id: &str) -> Value {
    let deadline = Instant::now() + Duration::from_secs(600);
    loop {
        let (s, v) = get(c, &via.api(&format!("/runs/{id}"))).await;
        // 503: the owner just died and is not yet declared dead; ask again.
        assert!(
            s == StatusCode::OK || s == StatusCode::SERVICE_UNAVAILABLE,
            "{s} {v}"
        );
        if s == StatusCode::OK
            && ["completed", "failed", "timed_out", "killed"]
                .contains(&v["phase"].as_str().unwrap())
        {
            return v;
        }
        assert!(Instant::now() < deadline, "run {id} stuck: {v}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

async fn wait_phase(c: &reqwest::Client, via: &Replica, id: &str, phase: &str) {
    let deadline = Instant::now() + Duration::from_secs(600);
    loop {
        let (_, v) = get(c, &via.api(&format!("/runs/{id}"))).await;
        if v["phase"] == phase {
            return;
        }
        assert!(Instant::now() < deadline, "run {id} never {phase}: {v}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// Every frame of a run's stream until `end`.
pub(super) async fn frames(url: &str) -> Vec<Value> {
    let (mut ws, _) = tokio_tungstenite::connect_async(url).await.unwrap();
    let mut out = Vec::new();
    let read = async {
        while let Some(m) = ws.next().await {
            match m.unwrap() {
                Message::Text(t) => {
                    let v: Value = serde_json::from_str(&t).unwrap();
                    let end = v["type"] == "event" && v["event"] == "end";
                    out.push(v);
                    if end {
                        break;
                    }
                }
                Message::Close(_) => break,
                _ => {}
            }
        }
    };
    tokio::time::timeout(Duration::from_secs(600), read)
        .await
        .expect("stream stuck");
    out
}

pub(super) fn stdout_of(frames: &[Value]) -> String {
    frames
        .iter()
        .filter(|f| f["type"] == "stdout")
        .map(|f| f["data"].as_str().unwrap_or(""))
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_replicas_are_one_service() {
    let pg = crate::pg_or_skip!();
    let url = pg.fresh_db("two");
    let a = Replica::start(&url, &[("SANDBOX_NODE_ID", "node-a")]);
    let b = Replica::start(&url, &[("SANDBOX_NODE_ID", "node-b")]);
    let c = reqwest::Client::new();
    for r in [&a, &b] {
        let (_, v) = get(&c, &r.api("/runtimes")).await;
        assert_eq!(v["store_mode"], "postgres");
    }

    // An Idempotency-Key replayed on the other replica returns the same run; another body
    // under the key is a conflict there too.
    let body = run_body(&["echo", "from-a"]);
    let (s1, v1, replayed) = post(&c, &a.api("/runs"), &body, Some("key-1")).await;
    assert!(s1.is_success(), "{v1}");
    assert!(!replayed);
    let run_a = v1["run_id"].as_str().unwrap().to_string();
    let (s2, v2, replayed) = post(&c, &b.api("/runs"), &body, Some("key-1")).await;
    assert_eq!((s2, replayed), (s1, true), "{v2}");
    assert_eq!(v2["run_id"], run_a.as_str());
    let (s3, v3, _) = post(
        &c,
        &b.api("/runs"),
        &run_body(&["echo", "other"]),
        Some("key-1"),
    )
    .await;
    assert_eq!(s3, StatusCode::CONFLICT, "{v3}");
    assert_eq!(v3["error"]["details"]["prior_id"], run_a.as_str());

    // Status and the log stream of A's run through B.
    let done = wait_done(&c, &b, &run_a).await;
    assert_eq!(done["phase"], "completed", "{done}");
    assert_eq!(done["exit_code"], 0);
    let f = frames(&b.ws(&format!("/runs/{run_a}/stream"))).await;
    assert_eq!(stdout_of(&f), "from-a\n", "{f:?}");
    assert_eq!(f.last().unwrap()["event"], "end", "{f:?}");

    // A run on B, then the admin list of either replica sees both.
    let (s, v, _) = post(&c, &b.api("/runs"), &run_body(&["echo", "from-b"]), None).await;
    assert!(s.is_success(), "{v}");
    let run_b = v["run_id"].as_str().unwrap().to_string();
    wait_done(&c, &a, &run_b).await;
    for r in [&a, &b] {
        let (s, list) = get(&c, &r.api("/admin/runs?limit=200")).await;
        assert_eq!(s, StatusCode::OK, "{list}");
        let ids: Vec<&str> = list["items"]
            .as_array()
            .unwrap()
            .iter()
            .map(|i| i["id"].as_str().unwrap())
            .collect();
        assert!(
            ids.contains(&run_a.as_str()) && ids.contains(&run_b.as_str()),
            "{list}"
        );
        assert_eq!(list["total"], 2);
        // Each run names the node that executed it; the list filters on it.
        for (node, run) in [("node-a", &run_a), ("node-b", &run_b)] {
            let (s, list) = get(&c, &r.api(&format!("/admin/runs?node_id={node}"))).await;
            assert_eq!(s, StatusCode::OK, "{list}");
            assert_eq!(list["total"], 1, "{list}");
            assert_eq!(list["items"][0]["id"], run.as_str(), "{list}");
            assert_eq!(list["items"][0]["node_id"], node, "{list}");
        }
    }

    // A session created through A is used through B: upload, run, stream, cancel, delete.
    let (s, sess, _) = post(
        &c,
        &a.api("/sessions"),
        &json!({ "spec_version": "1.0", "base_image": "wasmsand/default" }),
        None,
    )
    .await;
    assert_eq!(s, StatusCode::CREATED, "{sess}");
    let sid = sess["session_id"]
        .as_str()
        .or(sess["id"].as_str())
        .unwrap()
        .to_string();
    let (s, v) = get(&c, &b.api(&format!("/sessions/{sid}"))).await;
    assert_eq!(s, StatusCode::OK, "{v}");
    let form = reqwest::multipart::Form::new().part(
        "files[]",
        reqwest::multipart::Part::bytes(b"uploaded through b\n".to_vec()).file_name("note.txt"),
    );
    let r = c
        .post(b.api(&format!("/sessions/{sid}/files")))
        .multipart(form)
        .send()
        .await
        .unwrap();
    assert_eq!(
        r.status(),
        StatusCode::CREATED,
        "{}",
        r.text().await.unwrap()
    );
    let (s, v, _) = post(
        &c,
        &b.api("/runs"),
        &json!({ "spec_version": "1.0", "session_id": sid, "command": ["sh", "-c", "cat note.txt; echo made > out.txt"], "capture_patterns": ["out.txt"] }),
        None,
    )
    .await;
    assert!(s.is_success(), "{v}");
    let run_s = v["run_id"].as_str().unwrap().to_string();
    assert!(
        v["log_stream_url"]
            .as_str()
            .unwrap()
            .contains(b.url.trim_start_matches("http://")),
        "the stream URL names the replica the client called: {v}"
    );
    let f = frames(v["log_stream_url"].as_str().unwrap()).await;
    assert_eq!(stdout_of(&f), "uploaded through b\n", "{f:?}");
    let done = wait_done(&c, &b, &run_s).await;
    assert_eq!(done["phase"], "completed", "{done}");
    // Its artifact lives on A's disk: B forwards the download.
    let r = c
        .get(b.api(&format!("/runs/{run_s}/artifacts/out.txt")))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::OK);
    assert_eq!(r.text().await.unwrap(), "made\n");

    // A long run in the session, cancelled through B.
    let (s, v, _) = post(
        &c,
        &b.api("/runs"),
        &json!({ "spec_version": "1.0", "session_id": sid, "command": ["sleep", "60"] }),
        None,
    )
    .await;
    assert!(s.is_success(), "{v}");
    let long = v["run_id"].as_str().unwrap().to_string();
    wait_phase(&c, &b, &long, "running").await;
    let (s, v, _) = post(
        &c,
        &b.api(&format!("/runs/{long}/cancel")),
        &json!({}),
        None,
    )
    .await;
    assert_eq!(s, StatusCode::ACCEPTED, "{v}");
    let done = wait_done(&c, &b, &long).await;
    assert_eq!(done["phase"], "killed", "{done}");

    // Deleted through B; A no longer has it; B answers 404 as A does.
    let r = c
        .delete(b.api(&format!("/sessions/{sid}")))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::NO_CONTENT);
    assert_eq!(
        get(&c, &a.api(&format!("/sessions/{sid}"))).await.0,
        StatusCode::NOT_FOUND
    );
    assert_eq!(
        get(&c, &b.api(&format!("/sessions/{sid}"))).await.0,
        StatusCode::NOT_FOUND
    );
    assert_eq!(
        pg.psql(
            &url,
            &format!("SELECT COUNT(*) FROM sandbox_sessions WHERE id = '{sid}'")
        ),
        "0",
        "the deletion is recorded"
    );
    // Unknown ids are 404 everywhere.
    assert_eq!(get(&c, &b.api("/runs/nope")).await.0, StatusCode::NOT_FOUND);
    assert_eq!(
        get(&c, &b.api("/sessions/nope")).await.0,
        StatusCode::NOT_FOUND
    );
}

/// The replica that forwards a run to the session's owner says what it made of the client's
/// `X-Forwarded-*`: the owner, trusting it, builds the `wss://` URL a TLS proxy asked for,
/// and a client the forwarding replica does not trust cannot smuggle its headers through.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_forwarded_run_gets_the_stream_url_its_proxy_asked_for() {
    let pg = crate::pg_or_skip!();
    let url = pg.fresh_db("proxied");
    // Replicas reach each other from 127.0.0.1; 127.0.0.2 is a client nobody trusts.
    let trust = [("SANDBOX_TRUSTED_PROXIES", "127.0.0.1")];
    let a = Replica::start(&url, &trust);
    let b = Replica::start(&url, &trust);
    let c = reqwest::Client::new();
    let (s, sess, _) = post(
        &c,
        &a.api("/sessions"),
        &json!({ "spec_version": "1.0", "base_image": "wasmsand/default" }),
        None,
    )
    .await;
    assert_eq!(s, StatusCode::CREATED, "{sess}");
    let sid = sess["session_id"].as_str().unwrap().to_string();
    let run = json!({ "spec_version": "1.0", "session_id": sid, "command": ["true"] });
    let stream_url = |client: reqwest::Client| {
        let (url, run) = (b.api("/runs"), run.clone());
        async move {
            let r = client
                .post(url)
                .header("x-forwarded-proto", "https")
                .header("x-forwarded-host", "sandbox.example.com")
                .json(&run)
                .send()
                .await
                .unwrap();
            assert!(r.status().is_success(), "{}", r.status());
            let v: Value = r.json().await.unwrap();
            v["log_stream_url"].as_str().unwrap().to_string()
        }
    };
    // Through B (trusted by A, itself trusting this client) to A, which runs it.
    let proxied = stream_url(c.clone()).await;
    assert!(
        proxied.starts_with(&format!("wss://sandbox.example.com{BASE}/runs/")),
        "{proxied}"
    );
    let untrusted = reqwest::Client::builder()
        .local_address("127.0.0.2".parse::<std::net::IpAddr>().unwrap())
        .build()
        .unwrap();
    let direct = stream_url(untrusted).await;
    let b_host = b.url.trim_start_matches("http://");
    assert!(
        direct.starts_with(&format!("ws://{b_host}{BASE}/runs/")),
        "B ignores the headers of a client it does not trust, and says so to A: {direct}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_queue_limit_holds_across_replicas() {
    let pg = crate::pg_or_skip!();
    let url = pg.fresh_db("queue");
    let env = [
        ("SANDBOX_MAX_CONCURRENT_RUNS", "1"),
        ("SANDBOX_QUEUE_MAX_LENGTH", "2"),
    ];
    let a = Replica::start(&url, &env);
    let b = Replica::start(&url, &env);
    let c = reqwest::Client::new();
    let sleeper = run_body(&["sleep", "60"]);
    let mut ids = Vec::new();
    // Each replica runs one and queues one: the shared line (2) is then full, though each
    // replica alone holds only one waiting run.
    for (r, want) in [
        (&a, StatusCode::OK),
        (&b, StatusCode::OK),
        (&a, StatusCode::ACCEPTED),
        (&b, StatusCode::ACCEPTED),
    ] {
        let (s, v, _) = post(&c, &r.api("/runs"), &sleeper, None).await;
        assert_eq!(s, want, "{v}");
        ids.push((r, v["run_id"].as_str().unwrap().to_string()));
        if want == StatusCode::OK {
            wait_phase(&c, r, &ids.last().unwrap().1, "running").await;
        }
    }
    for r in [&a, &b] {
        let (s, v, _) = post(&c, &r.api("/runs"), &sleeper, None).await;
        assert_eq!(s, StatusCode::TOO_MANY_REQUESTS, "{v}");
        assert_eq!(v["error"]["code"], "rate_limited");
    }
    // A queued run cancelled frees its place for either replica.
    let (s, _, _) = post(
        &c,
        &a.api(&format!("/runs/{}/cancel", ids[2].1)),
        &json!({}),
        None,
    )
    .await;
    assert_eq!(s, StatusCode::ACCEPTED);
    wait_done(&c, &a, &ids[2].1).await;
    let (s, v, _) = post(&c, &b.api("/runs"), &sleeper, None).await;
    assert_eq!(s, StatusCode::ACCEPTED, "{v}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn when_the_owner_dies_its_runs_fail_and_another_replica_takes_its_sessions_over() {
    let pg = crate::pg_or_skip!();
    let url = pg.fresh_db("death");
    // A TTL longer than any wait of the test: A is found dead below because its heartbeat is
    // made old, which is what the TTL's passing would do.
    let ttl = [("SANDBOX_REPLICA_TTL_SEC", "3600")];
    let mut a = Replica::start(&url, &ttl);
    let b = Replica::start(&url, &ttl);
    let c = reqwest::Client::new();
    let (s, sess, _) = post(
        &c,
        &a.api("/sessions"),
        &json!({ "spec_version": "1.0", "base_image": "wasmsand/default" }),
        None,
    )
    .await;
    assert_eq!(s, StatusCode::CREATED, "{sess}");
    let sid = sess["session_id"]
        .as_str()
        .or(sess["id"].as_str())
        .unwrap()
        .to_string();
    // A finished run's effects are checkpointed: they survive A.
    let (done, _) = super::durable::sh(&c, &b, &sid, "echo kept > before.txt; export KEPT=1").await;
    assert_eq!(done["phase"], "completed", "{done}");
    let (s, v, _) = post(
        &c,
        &b.api("/runs"),
        &json!({ "spec_version": "1.0", "session_id": sid,
                 "command": ["bash", "-c", "echo lost > during.txt; sleep 120"] }),
        None,
    )
    .await;
    assert!(s.is_success(), "{v}");
    let run = v["run_id"].as_str().unwrap().to_string();
    wait_phase(&c, &b, &run, "running").await;

    a.kill();
    // While A is presumed alive, B cannot reach it: a clear 503, not a hang.
    let (s, v) = get(&c, &b.api(&format!("/sessions/{sid}"))).await;
    assert!(
        s == StatusCode::SERVICE_UNAVAILABLE || s == StatusCode::GONE,
        "{s} {v}"
    );
    // Once A's last heartbeat is older than the TTL, B's next round (each second) fails the
    // run and the session is lost.
    let aged = pg.psql(
        &url,
        &format!(
            "UPDATE sandbox_replicas SET heartbeat_at = heartbeat_at - 3601000 \
             WHERE address = '{}' RETURNING id",
            a.url
        ),
    );
    assert!(aged.ends_with("UPDATE 1"), "A's row: {aged:?}");
    let done = wait_done(&c, &b, &run).await;
    assert_eq!(done["phase"], "failed", "{done}");
    assert_eq!(done["reason_code"], "replica_lost", "{done}");
    // B takes the session over from its last checkpoint: what finished runs left is there,
    // what the run in flight did is not.
    let (s, v) = get(&c, &b.api(&format!("/sessions/{sid}"))).await;
    assert_eq!(s, StatusCode::OK, "{v}");
    let (done, out) = super::durable::sh(
        &c,
        &b,
        &sid,
        "cat before.txt; echo \"$KEPT\"; ls during.txt 2>&1",
    )
    .await;
    assert_eq!(
        out, "kept\n1\nls: cannot access 'during.txt': No such file or directory\n",
        "{done}"
    );

    // B itself carries on.
    let (s, v, _) = post(&c, &b.api("/runs"), &run_body(&["true"]), None).await;
    assert!(s.is_success(), "{v}");
    wait_done(&c, &b, v["run_id"].as_str().unwrap()).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_clean_stop_hands_its_sessions_over_and_a_restart_keeps_the_records() {
    let pg = crate::pg_or_skip!();
    let url = pg.fresh_db("restart");
    let mut a = Replica::start(&url, &[]);
    let c = reqwest::Client::new();
    let (s, v, _) = post(&c, &a.api("/runs"), &run_body(&["echo", "kept"]), Some("k")).await;
    assert!(s.is_success(), "{v}");
    let id = v["run_id"].as_str().unwrap().to_string();
    wait_done(&c, &a, &id).await;
    let (s, sess, _) = post(
        &c,
        &a.api("/sessions"),
        &json!({ "spec_version": "1.0", "base_image": "wasmsand/default" }),
        None,
    )
    .await;
    assert_eq!(s, StatusCode::CREATED);
    let sid = sess["session_id"]
        .as_str()
        .or(sess["id"].as_str())
        .unwrap()
        .to_string();
    a.terminate();
    let b = Replica::start(&url, &[]);
    // A hibernated the session as it stopped: B wakes it at once (no TTL wait); the run's
    // record and the key stay.
    let (s, v) = get(&c, &b.api(&format!("/sessions/{sid}"))).await;
    assert_eq!(s, StatusCode::OK, "{v}");
    let (s, v) = get(&c, &b.api(&format!("/runs/{id}"))).await;
    assert_eq!(s, StatusCode::OK);
    assert_eq!(v["phase"], "completed");
    let (_, v, replayed) = post(&c, &b.api("/runs"), &run_body(&["echo", "kept"]), Some("k")).await;
    assert!(replayed);
    assert_eq!(v["run_id"], id.as_str());
}

/// SHA-256 of `alice-cluster-key` and `bob-cluster-key` (what `SANDBOX_API_KEYS` holds).
pub(super) const KEYS: &str = "55c2b8f1758dba8ad9a14e542e9cc1db5ce9f2a056242cb50d9a1039b97c9152 alice user,\
                    40a582853b6f39e3ba0e3ff74f342f80c0034e66c36a284f47880803fa2bfd5d bob user";
pub(super) const ALICE: &str = "alice-cluster-key";
pub(super) const BOB: &str = "bob-cluster-key";

async fn call_as(
    c: &reqwest::Client,
    method: reqwest::Method,
    url: &str,
    key: Option<&str>,
    body: Option<&Value>,
) -> (StatusCode, Value) {
    let mut rb = c.request(method, url);
    if let Some(k) = key {
        rb = rb.header("x-api-key", k);
    }
    if let Some(b) = body {
        rb = rb.json(b);
    }
    let r = rb.send().await.unwrap();
    let status = r.status();
    let text = r.text().await.unwrap();
    (
        status,
        serde_json::from_str(&text).unwrap_or(Value::String(text)),
    )
}

// Threat: T-TENANT (docs/security.md)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_replica_checks_the_caller_before_forwarding_or_reporting_a_lost_session() {
    use reqwest::Method;
    let pg = crate::pg_or_skip!();
    let url = pg.fresh_db("authfwd");
    let env = [("SANDBOX_API_KEYS", KEYS)];
    let mut a = Replica::start(&url, &env);
    let b = Replica::start(&url, &env);
    let c = reqwest::Client::new();
    let (s, sess) = call_as(
        &c,
        Method::POST,
        &a.api("/sessions"),
        Some(ALICE),
        Some(&json!({ "spec_version": "1.0", "base_image": "wasmsand/default" })),
    )
    .await;
    assert_eq!(s, StatusCode::CREATED, "{sess}");
    let sid = sess["session_id"].as_str().unwrap().to_string();
    let in_session =
        json!({ "spec_version": "1.0", "session_id": sid, "command": ["sleep", "60"] });
    let (s, v) = call_as(
        &c,
        Method::POST,
        &a.api("/runs"),
        Some(ALICE),
        Some(&in_session),
    )
    .await;
    assert!(s.is_success(), "{v}");
    let run = v["run_id"].as_str().unwrap().to_string();
    // The store records alice, not the anonymous user, as the session's user.
    assert_eq!(
        pg.psql(
            &url,
            &format!("SELECT user_id FROM sandbox_sessions WHERE id = '{sid}'")
        ),
        "alice"
    );

    // Through B, while A holds both: 401 without credentials, 404 for bob, alice served.
    let session_url = b.api(&format!("/sessions/{sid}"));
    let run_url = b.api(&format!("/runs/{run}"));
    for u in [&session_url, &run_url] {
        let (s, v) = call_as(&c, Method::GET, u, None, None).await;
        assert_eq!(s, StatusCode::UNAUTHORIZED, "{u}: {v}");
        assert_eq!(v["error"]["code"], "unauthorized", "{v}");
        let (s, v) = call_as(&c, Method::GET, u, Some("not-a-key"), None).await;
        assert_eq!(s, StatusCode::UNAUTHORIZED, "{u}: {v}");
        let (s, v) = call_as(&c, Method::GET, u, Some(BOB), None).await;
        assert_eq!(s, StatusCode::NOT_FOUND, "{u}: {v}");
        assert_eq!(v["error"]["code"], "not_found", "{v}");
        let (s, v) = call_as(&c, Method::GET, u, Some(ALICE), None).await;
        assert_eq!(s, StatusCode::OK, "{u}: {v}");
    }
    for key in [None, Some(BOB)] {
        let (s, v) = call_as(&c, Method::POST, &b.api("/runs"), key, Some(&in_session)).await;
        let want = if key.is_none() {
            StatusCode::UNAUTHORIZED
        } else {
            StatusCode::NOT_FOUND
        };
        assert_eq!(s, want, "{v}");
        let (s, v) = call_as(
            &c,
            Method::POST,
            &b.api(&format!("/runs/{run}/cancel")),
            key,
            Some(&json!({})),
        )
        .await;
        assert_eq!(s, want, "{v}");
        let (s, v) = call_as(&c, Method::DELETE, &session_url, key, None).await;
        assert_eq!(s, want, "{v}");
    }
    // Bob's stream of alice's run is refused before the upgrade.
    let mut req = tokio_tungstenite::tungstenite::client::IntoClientRequest::into_client_request(
        b.ws(&format!("/runs/{run}/stream")),
    )
    .unwrap();
    req.headers_mut().insert("x-api-key", BOB.parse().unwrap());
    match tokio_tungstenite::connect_async(req).await {
        Err(tokio_tungstenite::tungstenite::Error::Http(r)) => {
            assert_eq!(r.status(), StatusCode::NOT_FOUND)
        }
        other => panic!("bob streamed alice's run: {:?}", other.map(|_| ())),
    }
    // Nothing of bob's attempts reached alice's run.
    let (_, v) = call_as(&c, Method::GET, &run_url, Some(ALICE), None).await;
    assert_eq!(v["phase"], "running", "{v}");

    // A dies: only alice learns that her session is lost; others get 401/404 as before.
    // (Its checkpoint is removed first: a checkpointed session would be taken over, see
    // `durable`; one without, like a docker session's, is lost.)
    a.kill();
    pg.psql(
        &url,
        &format!("DELETE FROM sandbox_saved_sessions WHERE id = '{sid}'"),
    );
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let (s, v) = call_as(&c, Method::GET, &session_url, Some(ALICE), None).await;
        if s == StatusCode::GONE {
            assert_eq!(v["error"]["code"], "session_lost", "{v}");
            break;
        }
        assert!(Instant::now() < deadline, "still {s} {v}");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    let (s, v) = call_as(&c, Method::GET, &session_url, None, None).await;
    assert_eq!(s, StatusCode::UNAUTHORIZED, "{v}");
    let (s, v) = call_as(&c, Method::GET, &session_url, Some(BOB), None).await;
    assert_eq!(s, StatusCode::NOT_FOUND, "{v}");
    let (s, v) = call_as(
        &c,
        Method::POST,
        &b.api("/runs"),
        Some(BOB),
        Some(&in_session),
    )
    .await;
    assert_eq!(s, StatusCode::NOT_FOUND, "{v}");
    let (s, v) = call_as(&c, Method::POST, &b.api("/runs"), None, Some(&in_session)).await;
    assert_eq!(s, StatusCode::UNAUTHORIZED, "{v}");
    let (s, v) = call_as(
        &c,
        Method::POST,
        &b.api("/runs"),
        Some(ALICE),
        Some(&in_session),
    )
    .await;
    assert_eq!(s, StatusCode::GONE, "{v}");
    // The dead owner's run: failed by the reaper, alice's only.
    let done = loop {
        let (_, v) = call_as(&c, Method::GET, &run_url, Some(ALICE), None).await;
        if v["phase"] == "failed" {
            break v;
        }
        assert!(Instant::now() < deadline, "{v}");
        tokio::time::sleep(Duration::from_millis(200)).await;
    };
    assert_eq!(done["reason_code"], "replica_lost", "{done}");
    let (s, _) = call_as(&c, Method::GET, &run_url, Some(BOB), None).await;
    assert_eq!(s, StatusCode::NOT_FOUND);
    let (s, _) = call_as(&c, Method::GET, &run_url, None, None).await;
    assert_eq!(s, StatusCode::UNAUTHORIZED);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_same_new_key_on_two_replicas_at_once_makes_one_run() {
    let pg = crate::pg_or_skip!();
    let url = pg.fresh_db("idemrace");
    let a = Replica::start(&url, &[]);
    let b = Replica::start(&url, &[]);
    let c = reqwest::Client::new();
    let rounds = 12;
    for round in 0..rounds {
        let key = format!("race-{round}");
        let body = run_body(&["echo", "once"]);
        // Both replicas get the key in the same instant, twice each.
        let calls = [&a, &b, &a, &b].map(|r| {
            let (c, url, body, key) = (c.clone(), r.api("/runs"), body.clone(), key.clone());
            tokio::spawn(async move { post(&c, &url, &body, Some(&key)).await })
        });
        let mut answers = Vec::new();
        for h in calls {
            answers.push(h.await.unwrap());
        }
        let ids: Vec<&str> = answers
            .iter()
            .map(|(s, v, _)| {
                assert!(s.is_success(), "{s} {v}");
                v["run_id"].as_str().unwrap()
            })
            .collect();
        assert!(ids.iter().all(|i| *i == ids[0]), "round {round}: {ids:?}");
        let fresh = answers.iter().filter(|(_, _, replayed)| !replayed).count();
        assert_eq!(
            fresh, 1,
            "round {round}: one answer is the first, the rest replays"
        );
    }
    // The store holds one run per key, and nothing else.
    let (s, list) = get(&c, &a.api("/admin/runs?limit=200")).await;
    assert_eq!(s, StatusCode::OK, "{list}");
    assert_eq!(list["total"], rounds, "{list}");
    assert_eq!(
        pg.psql(&url, "SELECT COUNT(*) FROM sandbox_runs"),
        rounds.to_string()
    );
    // A key whose first request failed (a bad body) stays free: the right body then runs.
    let (s, v, _) = post(
        &c,
        &a.api("/runs"),
        &json!({ "spec_version": "9" }),
        Some("retry"),
    )
    .await;
    assert_eq!(s, StatusCode::BAD_REQUEST, "{v}");
    let (s, v, replayed) = post(&c, &b.api("/runs"), &run_body(&["true"]), Some("retry")).await;
    assert!(s.is_success() && !replayed, "{s} {v}");
}
