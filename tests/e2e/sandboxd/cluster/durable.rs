//! Sessions that outlive their process (issue 27): real `sandboxd serve` processes on a
//! SQLite file killed with SIGKILL or stopped with SIGTERM and started again, idle sessions
//! hibernating and waking, a corrupt checkpoint, and a thousand idle sessions leaving the
//! process's memory.

use std::time::{Duration, Instant};

use reqwest::StatusCode;
use serde_json::{Value, json};

use super::replicas::Replica;

async fn call(
    c: &reqwest::Client,
    m: reqwest::Method,
    url: &str,
    body: Option<Value>,
) -> (StatusCode, Value) {
    let mut rb = c.request(m, url);
    if let Some(b) = body {
        rb = rb.json(&b);
    }
    let r = rb.send().await.unwrap();
    let status = r.status();
    let text = r.text().await.unwrap();
    (
        status,
        serde_json::from_str(&text).unwrap_or(Value::String(text)),
    )
}

async fn new_session(c: &reqwest::Client, r: &Replica, extra: Value) -> String {
    let mut body = json!({ "spec_version": "1.0", "base_image": "wasmsand/default" });
    if let (Some(b), Some(e)) = (body.as_object_mut(), extra.as_object()) {
        b.extend(e.clone());
    }
    let (s, v) = call(c, reqwest::Method::POST, &r.api("/sessions"), Some(body)).await;
    assert_eq!(s, StatusCode::CREATED, "{v}");
    v["session_id"].as_str().unwrap().to_string()
}

/// Runs a shell line in the session through `r` and returns its end status and stdout.
pub(super) async fn sh(c: &reqwest::Client, r: &Replica, sid: &str, line: &str) -> (Value, String) {
    let body = json!({ "spec_version": "1.0", "session_id": sid,
                       "command": ["bash", "-c", line] });
    let (s, v) = call(c, reqwest::Method::POST, &r.api("/runs"), Some(body)).await;
    assert!(s.is_success(), "{s} {v}");
    let id = v["run_id"].as_str().unwrap().to_string();
    let done = super::replicas::wait_done(c, r, &id).await;
    let frames = super::replicas::frames(&r.ws(&format!("/runs/{id}/stream"))).await;
    (done, super::replicas::stdout_of(&frames))
}

/// What a session holds that a restart must keep: files with their modes, a symlink, a
/// removed template file, the working directory, variables, functions and options.
const SETUP: &str = "mkdir -p proj/pkg && printf 'v1\\n' > proj/data.txt && chmod 640 proj/data.txt \
    && ln -s data.txt proj/link && head -c 200000 /dev/urandom > proj/blob && (cd proj && sha256sum blob > blob.sum) \
    && printf 'def hi():\\n    return \"hi from pkg\"\\n' > proj/pkg/__init__.py";
const STATE: &str = "cd proj; export ANSWER=42; greet() { echo \"hello $1\"; }; set -o pipefail; \
    shopt -s nullglob; alias ll='ls -l'";
const PROBE: &str = "pwd; cat data.txt; stat -c %a data.txt; readlink link; sha256sum -c blob.sum; \
    echo \"$ANSWER\"; greet you; set -o | grep pipefail; shopt nullglob; \
    PYTHONPATH=. python3 -c 'import pkg; print(pkg.hi())'";
const WANT: &str = "/home/user/proj\nv1\n640\ndata.txt\nblob: OK\n42\nhello you\n\
    pipefail       \ton\nnullglob       \ton\nhi from pkg\n";

async fn prepare(c: &reqwest::Client, r: &Replica) -> String {
    let sid = new_session(
        c,
        r,
        json!({ "env": { "FROM_CREATE": "yes" }, "labels": { "t": "1" } }),
    )
    .await;
    for line in [SETUP, STATE] {
        let (done, _) = sh(c, r, &sid, line).await;
        assert_eq!(done["phase"], "completed", "{done}");
    }
    let (_, out) = sh(c, r, &sid, PROBE).await;
    assert_eq!(out, WANT);
    sid
}

/// Deletes a session through `r` and checks nothing of it answers any more.
async fn delete_and_check_gone(c: &reqwest::Client, r: &Replica, sid: &str) {
    let url = r.api(&format!("/sessions/{sid}"));
    let (s, _) = call(c, reqwest::Method::DELETE, &url, None).await;
    assert_eq!(s, StatusCode::NO_CONTENT);
    let (s, _) = call(c, reqwest::Method::GET, &url, None).await;
    assert_eq!(s, StatusCode::NOT_FOUND);
}

async fn metric(c: &reqwest::Client, r: &Replica, name: &str) -> f64 {
    metric_as(c, r, name, None).await
}

async fn metric_as(c: &reqwest::Client, r: &Replica, name: &str, key: Option<&str>) -> f64 {
    let mut rb = c.get(format!("{}/metrics", r.url));
    if let Some(k) = key {
        rb = rb.header("x-api-key", k);
    }
    let resp = rb.send().await.unwrap();
    assert_eq!(resp.status(), StatusCode::OK);
    let text = resp.text().await.unwrap();
    text.lines()
        .filter(|l| l.starts_with(name) && !l.starts_with('#'))
        .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
        .sum()
}

fn sqlite(dir: &tempfile::TempDir) -> String {
    format!("sqlite:{}", dir.path().join("store.db").display())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_killed_server_comes_back_with_its_sessions() {
    let dir = tempfile::tempdir().unwrap();
    let store = sqlite(&dir);
    let c = reqwest::Client::new();
    let mut a = Replica::start(&store, &[]);
    let sid = prepare(&c, &a).await;
    // The last run's checkpoint is written just after its end: give it the moment it takes.
    tokio::time::sleep(Duration::from_millis(500)).await;
    a.kill();

    let b = Replica::start(&store, &[]);
    let (s, v) = call(
        &c,
        reqwest::Method::GET,
        &b.api(&format!("/sessions/{sid}")),
        None,
    )
    .await;
    assert_eq!(s, StatusCode::OK, "{v}");
    assert_eq!(v["env"]["FROM_CREATE"], "yes", "{v}");
    assert_eq!(v["labels"]["t"], "1", "{v}");
    let (_, out) = sh(&c, &b, &sid, PROBE).await;
    assert_eq!(out, WANT);
    let (_, out) = sh(&c, &b, &sid, "echo \"$FROM_CREATE\"").await;
    assert_eq!(out, "yes\n");
    assert_eq!(metric(&c, &b, "sandbox_sessions_woken_total").await, 1.0);
    // It is one session again: deleting it leaves nothing to wake.
    delete_and_check_gone(&c, &b, &sid).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_clean_stop_hibernates_every_session_and_a_new_process_wakes_them() {
    let dir = tempfile::tempdir().unwrap();
    let store = sqlite(&dir);
    let c = reqwest::Client::new();
    let mut a = Replica::start(&store, &[]);
    let sid = prepare(&c, &a).await;
    let other = new_session(&c, &a, json!({})).await;
    let (_, _) = sh(&c, &a, &other, "echo other > mine.txt").await;
    a.terminate();

    let b = Replica::start(&store, &[]);
    let (_, out) = sh(&c, &b, &sid, PROBE).await;
    assert_eq!(out, WANT);
    let (_, out) = sh(
        &c,
        &b,
        &other,
        "cat mine.txt; ls /home/user/proj 2>&1 | head -1",
    )
    .await;
    assert_eq!(
        out,
        "other\nls: cannot access '/home/user/proj': No such file or directory\n"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_idle_session_hibernates_and_the_next_request_wakes_it() {
    let dir = tempfile::tempdir().unwrap();
    let store = sqlite(&dir);
    let c = reqwest::Client::new();
    let a = Replica::start(&store, &[("SANDBOX_HIBERNATE_AFTER_SEC", "1")]);
    let sid = prepare(&c, &a).await;
    let (_, rt) = call(&c, reqwest::Method::GET, &a.api("/runtimes"), None).await;
    let wasm = rt["runtimes"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["name"] == "wasm")
        .unwrap();
    assert_eq!(wasm["sessions_hibernate"], true, "{wasm}");
    assert_eq!(wasm["hibernate_after_sec"], 1, "{wasm}");
    let deadline = Instant::now() + Duration::from_secs(30);
    while metric(&c, &a, "sandbox_sessions_hibernated_total").await < 1.0 {
        assert!(Instant::now() < deadline, "never hibernated");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert_eq!(metric(&c, &a, "sandbox_sessions_active").await, 0.0);
    // Listed as what it is, without being woken by the list.
    for path in ["/sessions", "/admin/sessions?state=hibernated"] {
        let (s, list) = call(&c, reqwest::Method::GET, &a.api(path), None).await;
        assert_eq!(s, StatusCode::OK, "{list}");
        assert_eq!(list["total"], 1, "{list}");
        let item = &list["items"][0];
        assert_eq!(item["session_id"], sid.as_str(), "{list}");
        assert_eq!(item["state"], "hibernated", "{list}");
        assert_eq!(item["env"]["FROM_CREATE"], "yes", "{list}");
        assert_eq!(item["labels"]["t"], "1", "{list}");
    }
    assert_eq!(metric(&c, &a, "sandbox_sessions_woken_total").await, 0.0);
    let (_, out) = sh(&c, &a, &sid, PROBE).await;
    assert_eq!(out, WANT);
    assert_eq!(metric(&c, &a, "sandbox_sessions_woken_total").await, 1.0);
    let (_, list) = call(
        &c,
        reqwest::Method::GET,
        &a.api("/sessions?state=active"),
        None,
    )
    .await;
    assert_eq!(list["items"][0]["state"], "active", "{list}");
    let (s, list) = call(
        &c,
        reqwest::Method::GET,
        &a.api("/sessions?state=asleep"),
        None,
    )
    .await;
    assert_eq!(s, StatusCode::BAD_REQUEST, "{list}");
    // A session with a background process running is in use, not idle.
    let (s, v) = call(
        &c,
        reqwest::Method::POST,
        &a.api(&format!("/sessions/{sid}/processes")),
        Some(json!({ "command": "sleep 600" })),
    )
    .await;
    assert!(s.is_success(), "{s} {v}");
    let hibernated = metric(&c, &a, "sandbox_sessions_hibernated_total").await;
    tokio::time::sleep(Duration::from_secs(3)).await;
    assert_eq!(
        metric(&c, &a, "sandbox_sessions_hibernated_total").await,
        hibernated
    );
    assert_eq!(metric(&c, &a, "sandbox_sessions_active").await, 1.0);
}

// Threat: T-STATE-BLOB (docs/security.md)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_corrupt_checkpoint_is_a_clear_error_and_an_audit_event() {
    let dir = tempfile::tempdir().unwrap();
    let store = sqlite(&dir);
    let c = reqwest::Client::new();
    let mut a = Replica::start(&store, &[]);
    let sid = prepare(&c, &a).await;
    let fine = new_session(&c, &a, json!({})).await;
    sh(&c, &a, &fine, "echo fine > f").await;
    a.terminate();
    // One byte of one chunk of the first session flipped, as a disk or an operator might.
    {
        let db = rusqlite::Connection::open(dir.path().join("store.db")).unwrap();
        let body: String = db
            .query_row(
                "SELECT body FROM saved_sessions WHERE id = ?1",
                [&sid],
                |r| r.get(0),
            )
            .unwrap();
        let saved: Value = serde_json::from_str(&body).unwrap();
        let hash = saved["chunks"][0].as_str().unwrap().to_string();
        let mut data: Vec<u8> = db
            .query_row(
                "SELECT data FROM session_chunks WHERE hash = ?1",
                [&hash],
                |r| r.get(0),
            )
            .unwrap();
        let mid = data.len() / 2;
        data[mid] ^= 0x01;
        db.execute(
            "UPDATE session_chunks SET data = ?1 WHERE hash = ?2",
            rusqlite::params![data, hash],
        )
        .unwrap();
    }
    let b = Replica::start(&store, &[]);
    for _ in 0..2 {
        let (s, v) = call(
            &c,
            reqwest::Method::GET,
            &b.api(&format!("/sessions/{sid}")),
            None,
        )
        .await;
        assert_eq!(s, StatusCode::GONE, "{v}");
        assert_eq!(v["error"]["code"], "session_lost", "{v}");
        assert_eq!(v["error"]["details"]["reason"], "corrupt_checkpoint", "{v}");
        let msg = v["error"]["message"].as_str().unwrap();
        assert!(msg.contains("corrupt"), "{msg}");
    }
    let (_, audit) = call(
        &c,
        reqwest::Method::GET,
        &b.api(&format!(
            "/admin/audit?session_id={sid}&event=sandbox.session.corrupt"
        )),
        None,
    )
    .await;
    assert!(!audit["items"].as_array().unwrap().is_empty(), "{audit}");
    // The server and the other session carry on; the corrupt one can still be deleted.
    let (_, out) = sh(&c, &b, &fine, "cat f").await;
    assert_eq!(out, "fine\n");
    delete_and_check_gone(&c, &b, &sid).await;
}

/// Resident anonymous memory: the heap and the sandboxes' files (the binary's own pages,
/// with the embedded guests, are file-backed and come and go with the page cache).
fn rss_kib(pid: u32) -> u64 {
    std::fs::read_to_string(format!("/proc/{pid}/status"))
        .unwrap()
        .lines()
        .find_map(|l| l.strip_prefix("RssAnon:"))
        .and_then(|v| v.split_whitespace().next()?.parse().ok())
        .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_thousand_idle_sessions_leave_the_process_memory() {
    let dir = tempfile::tempdir().unwrap();
    let store = sqlite(&dir);
    let c = reqwest::Client::new();
    let a = Replica::start(
        &store,
        &[
            ("SANDBOX_HIBERNATE_AFTER_SEC", "2"),
            ("SANDBOX_MAX_SESSIONS", "1000"),
            // A thousand sessions and uploads in well under a minute, from one user: past the
            // default request rate limits, which this test is not about.
            ("SANDBOX_USER_SESSIONS_PER_MINUTE", "0"),
            ("SANDBOX_USER_UPLOADS_PER_MINUTE", "0"),
        ],
    );
    // Each session holds a 256 KiB file, uploaded (no run needed) so that a thousand fit in
    // the test's time.
    let mut ids = Vec::new();
    // Warm: the template and the first sandbox are made once per process.
    let first = new_session(&c, &a, json!({})).await;
    let (s, _) = call(
        &c,
        reqwest::Method::DELETE,
        &a.api(&format!("/sessions/{first}")),
        None,
    )
    .await;
    assert_eq!(s, StatusCode::NO_CONTENT);
    let before = rss_kib(a.pid());
    for i in 0..1000u32 {
        let sid = new_session(&c, &a, json!({})).await;
        let data: Vec<u8> = (0..256 * 1024u32)
            .map(|b| (b.wrapping_mul(i + 7) >> 3) as u8)
            .collect();
        let part = reqwest::multipart::Part::bytes(data).file_name("big.bin");
        let form = reqwest::multipart::Form::new().part("files[]", part);
        let r = c
            .post(a.api(&format!("/sessions/{sid}/files")))
            .multipart(form)
            .send()
            .await
            .unwrap();
        assert!(r.status().is_success(), "{}", r.text().await.unwrap());
        ids.push(sid);
    }
    let full = rss_kib(a.pid());
    let deadline = Instant::now() + Duration::from_secs(300);
    while metric(&c, &a, "sandbox_sessions_active").await > 0.0 {
        assert!(Instant::now() < deadline, "sessions never hibernated");
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    let idle = rss_kib(a.pid());
    eprintln!("RSS: {before} KiB at start, {full} KiB with 1000 sessions, {idle} KiB hibernated");
    // The thousand sessions still exist (any of them wakes, below) but their 250 MiB of
    // files are no longer in the process. (Under load some hibernate while others are still
    // being made, so the peak is not a stable figure; the end state is.)
    assert!(
        idle < before + 32 * 1024,
        "{before} -> {full} -> {idle} KiB"
    );
    // And any of them wakes with its file.
    let (_, out) = sh(&c, &a, &ids[637], "wc -c < big.bin").await;
    assert_eq!(out, "262144\n");
}

// Threat: T-TENANT (docs/security.md)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_sleeping_session_wakes_for_its_owner_only() {
    use super::replicas::{ALICE, BOB, KEYS};
    let dir = tempfile::tempdir().unwrap();
    let store = sqlite(&dir);
    let c = reqwest::Client::new();
    let as_ = |m: reqwest::Method, url: String, key: Option<&str>, body: Option<Value>| {
        let mut rb = c.request(m, url);
        if let Some(k) = key {
            rb = rb.header("x-api-key", k);
        }
        if let Some(b) = body {
            rb = rb.json(&b);
        }
        async move {
            let r = rb.send().await.unwrap();
            (r.status(), r.text().await.unwrap())
        }
    };
    // SHA-256 of `ops-cluster-key`, an admin (to read the metrics).
    let keys = format!(
        "{KEYS},8fbe4a90946a03e3751507887f8566a49f215afac0e6d3475bdb922fdda79f8b ops admin"
    );
    let env = [("SANDBOX_API_KEYS", keys.as_str())];
    let mut a = Replica::start(&store, &env);
    let (s, body) = as_(
        reqwest::Method::POST,
        a.api("/sessions"),
        Some(ALICE),
        Some(json!({ "spec_version": "1.0", "base_image": "wasmsand/default" })),
    )
    .await;
    assert_eq!(s, StatusCode::CREATED, "{body}");
    let sid = serde_json::from_str::<Value>(&body).unwrap()["session_id"]
        .as_str()
        .unwrap()
        .to_string();
    a.terminate();
    let b = Replica::start(&store, &env);
    let run = json!({ "spec_version": "1.0", "session_id": sid, "command": ["true"] });
    let session = b.api(&format!("/sessions/{sid}"));
    for (m, url, body) in [
        (reqwest::Method::GET, session.clone(), None),
        (reqwest::Method::POST, b.api("/runs"), Some(run.clone())),
        (reqwest::Method::DELETE, session.clone(), None),
    ] {
        let (s, text) = as_(m.clone(), url.clone(), Some(BOB), body.clone()).await;
        assert_eq!(s, StatusCode::NOT_FOUND, "bob {m} {url}: {text}");
        let (s, text) = as_(m.clone(), url.clone(), None, body.clone()).await;
        assert_eq!(s, StatusCode::UNAUTHORIZED, "anonymous {m} {url}: {text}");
    }
    // Bob's list does not show it; the admin's does.
    let (s, text) = as_(reqwest::Method::GET, b.api("/sessions"), Some(BOB), None).await;
    assert_eq!(s, StatusCode::OK, "{text}");
    assert_eq!(
        serde_json::from_str::<Value>(&text).unwrap()["total"],
        0,
        "{text}"
    );
    let (s, text) = as_(
        reqwest::Method::GET,
        b.api("/admin/sessions"),
        Some(BOB),
        None,
    )
    .await;
    assert_eq!(s, StatusCode::FORBIDDEN, "{text}");
    let (_, text) = as_(
        reqwest::Method::GET,
        b.api("/admin/sessions?user_id=alice"),
        Some("ops-cluster-key"),
        None,
    )
    .await;
    let list: Value = serde_json::from_str(&text).unwrap();
    assert_eq!(list["items"][0]["session_id"], sid.as_str(), "{text}");
    assert_eq!(list["items"][0]["user_id"], "alice", "{text}");
    // Nobody else's request woke it; alice's does.
    let ops = Some("ops-cluster-key");
    assert_eq!(
        metric_as(&c, &b, "sandbox_sessions_woken_total", ops).await,
        0.0
    );
    let (s, text) = as_(reqwest::Method::GET, session, Some(ALICE), None).await;
    assert_eq!(s, StatusCode::OK, "{text}");
    assert_eq!(
        metric_as(&c, &b, "sandbox_sessions_woken_total", ops).await,
        1.0
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_session_hibernated_by_one_replica_wakes_on_another() {
    let pg = crate::pg_or_skip!();
    let url = pg.fresh_db("hibernate");
    let c = reqwest::Client::new();
    let a = Replica::start(&url, &[("SANDBOX_HIBERNATE_AFTER_SEC", "1")]);
    let b = Replica::start(&url, &[]);
    let sid = prepare(&c, &a).await;
    let deadline = Instant::now() + Duration::from_secs(30);
    while metric(&c, &a, "sandbox_sessions_hibernated_total").await < 1.0 {
        assert!(Instant::now() < deadline, "never hibernated");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    // B is asked first: it wakes the session itself rather than forwarding to A.
    let (_, out) = sh(&c, &b, &sid, PROBE).await;
    assert_eq!(out, WANT);
    assert_eq!(metric(&c, &b, "sandbox_sessions_woken_total").await, 1.0);
    assert_eq!(metric(&c, &a, "sandbox_sessions_woken_total").await, 0.0);
    // Either replica lists it, active (B holds it).
    for r in [&a, &b] {
        let (_, list) = call(&c, reqwest::Method::GET, &r.api("/sessions"), None).await;
        assert_eq!(list["items"][0]["session_id"], sid.as_str(), "{list}");
        assert_eq!(list["items"][0]["state"], "active", "{list}");
    }
    // Now B holds it: A forwards to B, and nothing is woken twice.
    let (_, out) = sh(&c, &a, &sid, "cat data.txt").await;
    assert_eq!(out, "v1\n");
    assert_eq!(metric(&c, &a, "sandbox_sessions_woken_total").await, 0.0);
    // Checkpoints of one session share their chunks: the store holds each once.
    let chunks = pg.psql(&url, "SELECT COUNT(*) FROM sandbox_session_chunks");
    let refs = pg.psql(
        &url,
        "SELECT COALESCE(SUM(refs), 0) FROM sandbox_session_chunks",
    );
    assert_eq!(chunks, refs, "one checkpoint lists each chunk once");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn forks_snapshots_and_merges_survive_a_crash() {
    use reqwest::Method;
    let dir = tempfile::tempdir().unwrap();
    let store = sqlite(&dir);
    let c = reqwest::Client::new();
    let mut a = Replica::start(&store, &[]);
    let p = new_session(&c, &a, json!({ "labels": { "role": "parent" } })).await;
    sh(&c, &a, &p, "echo base > a && mkdir d && echo x > d/x").await;
    let (s, f) = call(
        &c,
        Method::POST,
        &a.api(&format!("/sessions/{p}/fork")),
        None,
    )
    .await;
    assert_eq!(s, StatusCode::CREATED, "{f}");
    assert_eq!(f["forked_from"], p.as_str(), "{f}");
    assert_eq!(f["labels"]["role"], "parent", "{f}");
    let f = f["session_id"].as_str().unwrap().to_string();
    let (_, out) = sh(&c, &a, &f, "cat a d/x").await;
    assert_eq!(out, "base\nx\n", "the fork holds what its parent held");
    sh(&c, &a, &f, "echo fork > a && echo new > b && export FV=1").await;
    sh(&c, &a, &p, "echo p > c").await;
    let (_, out) = sh(&c, &a, &p, "cat a; ls b 2>&1 || true").await;
    assert_eq!(
        out,
        "base\nls: cannot access 'b': No such file or directory\n"
    );
    let (s, snap) = call(
        &c,
        Method::POST,
        &a.api(&format!("/sessions/{p}/snapshots")),
        Some(json!({ "label": "before-merge" })),
    )
    .await;
    assert_eq!(s, StatusCode::CREATED, "{snap}");
    let snap = snap["snapshot_id"].as_str().unwrap().to_string();
    // The checkpoints of the last runs are written just after them.
    tokio::time::sleep(Duration::from_millis(500)).await;
    a.kill();

    let b = Replica::start(&store, &[]);
    let merge = |fork: &str, env: bool| json!({ "fork_session_id": fork, "env": env });
    let (s, m) = call(
        &c,
        Method::POST,
        &b.api(&format!("/sessions/{p}/merge")),
        Some(merge(&f, true)),
    )
    .await;
    assert_eq!(s, StatusCode::OK, "{m}");
    assert_eq!(
        m["applied"],
        json!([{ "path": "/home/user/a", "change": "changed" },
               { "path": "/home/user/b", "change": "added" }]),
        "{m}"
    );
    assert_eq!(m["env"], json!(["FV"]), "{m}");
    let (_, out) = sh(&c, &b, &p, "cat a b c; echo \"$FV\"").await;
    assert_eq!(out, "fork\nnew\np\n1\n");
    // The fork point moved: merging again brings nothing.
    let (s, m) = call(
        &c,
        Method::POST,
        &b.api(&format!("/sessions/{p}/merge")),
        Some(merge(&f, false)),
    )
    .await;
    assert_eq!(s, StatusCode::OK, "{m}");
    assert_eq!(m["applied"], json!([]), "{m}");
    // Both change c: a conflict that applies nothing.
    sh(&c, &b, &f, "echo f2 > c; echo f3 > e").await;
    sh(&c, &b, &p, "echo p2 > c").await;
    let (s, m) = call(
        &c,
        Method::POST,
        &b.api(&format!("/sessions/{p}/merge")),
        Some(merge(&f, false)),
    )
    .await;
    assert_eq!(s, StatusCode::CONFLICT, "{m}");
    assert_eq!(m["error"]["code"], "conflict", "{m}");
    assert_eq!(
        m["error"]["details"]["conflicts"],
        // The parent made c after the fork point; the fork made its own: both added it.
        json!([{ "path": "/home/user/c", "ours": "added", "theirs": "added" }]),
        "{m}"
    );
    let (_, out) = sh(&c, &b, &p, "cat c; ls e 2>&1 || true").await;
    assert_eq!(
        out,
        "p2\nls: cannot access 'e': No such file or directory\n"
    );
    // Only a fork merges, into its own parent.
    let (s, m) = call(
        &c,
        Method::POST,
        &b.api(&format!("/sessions/{f}/merge")),
        Some(merge(&p, false)),
    )
    .await;
    assert_eq!(s, StatusCode::BAD_REQUEST, "{m}");
    let (s, m) = call(
        &c,
        Method::POST,
        &b.api(&format!("/sessions/{p}/merge")),
        Some(merge(&p, false)),
    )
    .await;
    assert_eq!(s, StatusCode::BAD_REQUEST, "{m}");
    let (s, m) = call(
        &c,
        Method::POST,
        &b.api(&format!("/sessions/{p}/merge")),
        Some(merge("nope", false)),
    )
    .await;
    assert_eq!(s, StatusCode::NOT_FOUND, "{m}");

    // The snapshot outlived the crash: restoring it puts files and variables back.
    let (s, list) = call(
        &c,
        Method::GET,
        &b.api(&format!("/sessions/{p}/snapshots")),
        None,
    )
    .await;
    assert_eq!(s, StatusCode::OK, "{list}");
    assert_eq!(list["items"][0]["snapshot_id"], snap.as_str(), "{list}");
    assert_eq!(list["items"][0]["label"], "before-merge", "{list}");
    let (s, v) = call(
        &c,
        Method::POST,
        &b.api(&format!("/sessions/{p}/snapshots/{snap}/restore")),
        None,
    )
    .await;
    assert_eq!(s, StatusCode::OK, "{v}");
    assert_eq!(v["session_id"], p.as_str());
    let (_, out) = sh(&c, &b, &p, "cat a c; ls b 2>&1; echo \"[$FV]\"").await;
    assert_eq!(
        out,
        "base\np\nls: cannot access 'b': No such file or directory\n[]\n"
    );
    let path = b.api(&format!("/sessions/{p}/snapshots/{snap}"));
    let (s, _) = call(&c, Method::DELETE, &path, None).await;
    assert_eq!(s, StatusCode::NO_CONTENT);
    let (s, _) = call(&c, Method::DELETE, &path, None).await;
    assert_eq!(s, StatusCode::NOT_FOUND);
    let (s, _) = call(&c, Method::POST, &format!("{path}/restore"), None).await;
    assert_eq!(s, StatusCode::NOT_FOUND);

    // Deleting the sessions leaves nothing of them in the store.
    for id in [&p, &f] {
        let (s, _) = call(&c, Method::DELETE, &b.api(&format!("/sessions/{id}")), None).await;
        assert_eq!(s, StatusCode::NO_CONTENT);
    }
    let db = rusqlite::Connection::open(dir.path().join("store.db")).unwrap();
    let left: i64 = db
        .query_row("SELECT COUNT(*) FROM saved_sessions", [], |r| r.get(0))
        .unwrap();
    let chunks: i64 = db
        .query_row("SELECT COUNT(*) FROM session_chunks", [], |r| r.get(0))
        .unwrap();
    assert_eq!((left, chunks), (0, 0));
}
