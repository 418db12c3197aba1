//! Background processes of a session over HTTP and WebSocket: they outlive later runs, take
//! stdin, are killed, stream with resume, are another user's 404, are limited, and end with
//! their session.

use std::time::{Duration, Instant};

use futures::StreamExt;
use reqwest::{Method, StatusCode};
use serde_json::{Value, json};
use tokio_tungstenite::tungstenite::Message;

use super::auth::{ALICE_KEY, JWT_SECRET, api_key, auth_server, bearer, call, jwt};
use super::common::*;

fn procs(sid: &str) -> String {
    format!("/sessions/{sid}/processes")
}

async fn start(srv: &TestServer, sid: &str, body: Value) -> Value {
    let (s, h, v) = srv.post(&procs(sid), body).await;
    assert_eq!(s, StatusCode::CREATED, "{v}");
    let pid = v["pid"].as_u64().unwrap();
    assert_eq!(
        h["location"].to_str().unwrap(),
        format!("{BASE}/sessions/{sid}/processes/{pid}")
    );
    v
}

/// Waits (in 30 s slices) until the process ended; its wait reply.
async fn wait_end(srv: &TestServer, sid: &str, pid: u64) -> Value {
    let started = Instant::now();
    loop {
        let (s, _, v) = srv
            .post(&format!("{}/{pid}/wait", procs(sid)), Value::Null)
            .await;
        assert_eq!(s, StatusCode::OK, "{v}");
        if v["running"] == false {
            return v;
        }
        assert!(started.elapsed() < GUARD, "process {pid} never ended");
    }
}

async fn post_empty(srv: &TestServer, path: &str) -> (StatusCode, Value) {
    let resp = srv.client.post(srv.url(path)).send().await.unwrap();
    let s = resp.status();
    (s, resp.json().await.unwrap_or(Value::Null))
}

/// Frames of a process's stream from `query`, until `done` holds or the stream ends.
async fn frames_until(url: &str, done: impl Fn(&[Value]) -> bool) -> (Vec<Value>, bool) {
    let (mut ws, _) = tokio_tungstenite::connect_async(url).await.unwrap();
    let mut frames = Vec::new();
    let mut closed = false;
    let read = async {
        while !done(&frames) {
            match ws.next().await {
                Some(Ok(Message::Text(t))) => frames.push(serde_json::from_str(&t).unwrap()),
                Some(Ok(Message::Close(_))) | None => {
                    closed = true;
                    break;
                }
                Some(Ok(_)) => {}
                Some(Err(e)) => panic!("websocket error: {e}"),
            }
        }
    };
    tokio::time::timeout(GUARD, read)
        .await
        .expect("stream stuck");
    (frames, closed)
}

fn stdout_text(frames: &[Value]) -> String {
    String::from_utf8(output(frames, "stdout")).unwrap()
}

fn session_run(sid: &str, script: &str) -> Value {
    json!({ "spec_version": "1.0", "session_id": sid, "command": ["bash", "-c", script] })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_process_outlives_three_later_runs_and_sees_their_files() {
    let srv = TestServer::start().await;
    let sid = srv.session(json!({})).await;
    let p = start(
        &srv,
        &sid,
        json!({"command": "while [ ! -e stop ]; do sleep 0.02; done; cat log", "timeout_ms": 600000}),
    )
    .await;
    assert_eq!(p["pid"], 1);
    assert_eq!(p["status"], "running");
    assert_eq!(p["running"], true);
    assert_eq!(p["exit_code"], Value::Null);
    let stream_url = p["stream_url"].as_str().unwrap().to_string();
    assert!(
        stream_url.starts_with("ws://")
            && stream_url.ends_with(&format!("{sid}/processes/1/stream")),
        "{stream_url}"
    );
    for i in 1..=3 {
        let (_, _, status) = srv
            .run(session_run(&sid, &format!("echo run{i} >> log")))
            .await;
        assert_eq!(status["phase"], "completed", "{status}");
        let (s, v) = srv.get(&format!("{}/1", procs(&sid))).await;
        assert_eq!(s, StatusCode::OK, "{v}");
        assert_eq!(v["running"], true, "run {i} ended the process: {v}");
    }
    let (_, _, status) = srv.run(session_run(&sid, "touch stop")).await;
    assert_eq!(status["phase"], "completed");
    let w = wait_end(&srv, &sid, 1).await;
    assert_eq!(w["status"], "exited", "{w}");
    assert_eq!(w["exit_code"], 0);
    assert_eq!(w["result"]["stdout"], "run1\nrun2\nrun3\n");
    assert_eq!(w["result"]["error_class"], Value::Null);
    // The ended process's stream replays its output and ends.
    let (frames, closed) = frames_until(&stream_url, |_| false).await;
    assert!(closed);
    assert_eq!(stdout_text(&frames), "run1\nrun2\nrun3\n");
    let end = frames.last().unwrap();
    assert_eq!(end["event"], "end", "{end}");
    assert_eq!(end["data"]["exit_code"], 0);
    assert_eq!(end["data"]["status"], "exited");
    let (s, list) = srv.get(&procs(&sid)).await;
    assert_eq!(s, StatusCode::OK);
    assert_eq!(list["processes"][0]["pid"], 1);
    assert_eq!(list["processes"][0]["status"], "exited");
    assert_eq!(list["max_running"], 8);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stdin_reaches_python_input_and_close_gives_end_of_file() {
    let srv = TestServer::start().await;
    let sid = srv.session(json!({})).await;
    let py = start(
        &srv,
        &sid,
        json!({"command": ["python3", "-c", "print(input())"], "timeout_ms": 600000}),
    )
    .await;
    let pid = py["pid"].as_u64().unwrap();
    let (s, _, v) = srv
        .post(
            &format!("{}/{pid}/stdin", procs(&sid)),
            json!({"data": "hello from stdin\n"}),
        )
        .await;
    assert_eq!(s, StatusCode::OK, "{v}");
    assert_eq!(v["written"], 17);
    let w = wait_end(&srv, &sid, pid).await;
    assert_eq!(w["result"]["stdout"], "hello from stdin\n", "{w}");
    assert_eq!(w["exit_code"], 0);
    // Writing to a process that ended: 409 with the reason.
    let (s, _, v) = srv
        .post(
            &format!("{}/{pid}/stdin", procs(&sid)),
            json!({"data": "x"}),
        )
        .await;
    assert_eq!(s, StatusCode::CONFLICT, "{v}");
    assert_eq!(v["error"]["code"], "conflict");
    assert_eq!(v["error"]["details"]["reason"], "not_running");

    // Bytes as base64, then a close: `cat` reads end of file and ends.
    let cat = start(
        &srv,
        &sid,
        json!({"command": "cat; echo done", "stdin": "a"}),
    )
    .await;
    let pid = cat["pid"].as_u64().unwrap();
    let path = format!("{}/{pid}/stdin", procs(&sid));
    let (s, _, v) = srv.post(&path, json!({"data_base64": "YmM="})).await;
    assert_eq!(s, StatusCode::OK, "{v}");
    let (s, _, v) = srv.post(&path, json!({"close": true})).await;
    assert_eq!(s, StatusCode::OK, "{v}");
    assert_eq!(v["closed"], true);
    let w = wait_end(&srv, &sid, pid).await;
    assert_eq!(w["result"]["stdout"], "abcdone\n", "{w}");
    // Bad bodies: nothing to do, both forms, bad base64, unknown fields.
    for body in [
        json!({}),
        json!({"data": "a", "data_base64": "YQ=="}),
        json!({"data_base64": "%%%"}),
        json!({"bytes": "a"}),
    ] {
        let (s, _, v) = srv.post(&path, body.clone()).await;
        assert_eq!(s, StatusCode::BAD_REQUEST, "{body}: {v}");
        assert_eq!(v["error"]["code"], "invalid_request");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kill_stops_a_cpu_loop() {
    let srv = TestServer::start().await;
    let sid = srv.session(json!({})).await;
    let p = start(
        &srv,
        &sid,
        json!({"command": "while :; do :; done", "timeout_ms": 600000}),
    )
    .await;
    let pid = p["pid"].as_u64().unwrap();
    let (s, v) = post_empty(&srv, &format!("{}/{pid}/wait?timeout_ms=200", procs(&sid))).await;
    assert_eq!(s, StatusCode::OK);
    assert_eq!(
        v,
        json!({"pid": pid, "running": true, "status": "running", "exit_code": null, "result": null})
    );
    let (s, v) = post_empty(&srv, &format!("{}/{pid}/kill", procs(&sid))).await;
    assert_eq!(s, StatusCode::OK, "{v}");
    assert_eq!(v["killed"], true);
    let w = wait_end(&srv, &sid, pid).await;
    assert_eq!(w["status"], "killed", "{w}");
    assert_eq!(w["exit_code"], 137);
    assert_eq!(w["result"]["error_class"], "CANCELLED");
    let (s, v) = post_empty(&srv, &format!("{}/{pid}/kill", procs(&sid))).await;
    assert_eq!(s, StatusCode::OK);
    assert_eq!(v["killed"], false);
    let (_, v) = srv.get(&format!("{}/{pid}", procs(&sid))).await;
    assert_eq!(
        (v["status"].as_str(), v["exit_code"].as_i64()),
        (Some("killed"), Some(137))
    );

    // The audit trail: started, killed, ended (with the status), never the command's words.
    let started = Instant::now();
    let events = loop {
        let (_, v) = srv.get(&format!("/admin/audit?session_id={sid}")).await;
        let names: Vec<String> = v["items"]
            .as_array()
            .unwrap()
            .iter()
            .map(|e| e["event"].as_str().unwrap().to_string())
            .collect();
        if names.iter().any(|n| n == "sandbox.process.ended") {
            break v["items"].as_array().unwrap().clone();
        }
        assert!(started.elapsed() < GUARD, "{v}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    };
    let names: Vec<&str> = events
        .iter()
        .map(|e| e["event"].as_str().unwrap())
        .filter(|n| n.starts_with("sandbox.process."))
        .collect();
    assert_eq!(
        names,
        [
            "sandbox.process.started",
            "sandbox.process.killed",
            "sandbox.process.ended"
        ]
    );
    let ended = events
        .iter()
        .find(|e| e["event"] == "sandbox.process.ended")
        .unwrap();
    assert_eq!(ended["status"], "killed", "{ended}");
    assert_eq!(ended["pid"], pid);
    assert!(!ended.to_string().contains("while :"), "{ended}");

    let metrics = srv
        .client
        .get(format!("http://{}/metrics", srv.addr))
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    assert!(
        metrics
            .lines()
            .any(|l| l.starts_with("sandbox_processes_ended_total{")
                && l.contains("status=\"killed\"")
                && l.ends_with(" 1")),
        "{metrics}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_stream_resumes_from_a_seq_and_output_reads_from_an_offset() {
    let srv = TestServer::start().await;
    let sid = srv.session(json!({})).await;
    let p = start(
        &srv,
        &sid,
        json!({"command": "for i in 1 2 3 4 5; do echo line$i; done; read x; echo after $x", "timeout_ms": 600000}),
    )
    .await;
    let pid = p["pid"].as_u64().unwrap();
    let url = p["stream_url"].as_str().unwrap().to_string();
    let (first, closed) = frames_until(&url, |f| stdout_text(f).contains("line5")).await;
    assert!(!closed);
    let last = first.last().unwrap()["seq"].as_u64().unwrap();
    assert_eq!(stdout_text(&first), "line1\nline2\nline3\nline4\nline5\n");
    // Output by byte offset while it waits for stdin.
    let (s, v) = srv
        .get(&format!("{}/{pid}/output?stdout_offset=6", procs(&sid)))
        .await;
    assert_eq!(s, StatusCode::OK, "{v}");
    assert_eq!(v["running"], true);
    assert_eq!(v["stdout"]["data"], "line2\nline3\nline4\nline5\n");
    assert_eq!(v["stdout"]["offset"], 6);
    assert_eq!(v["stdout"]["next_offset"], 30);
    assert_eq!(v["stdout"]["dropped_bytes"], 0);
    assert_eq!(v["stderr"]["data"], "");

    let (s, _, v) = srv
        .post(
            &format!("{}/{pid}/stdin", procs(&sid)),
            json!({"data": "go\n", "close": true}),
        )
        .await;
    assert_eq!(s, StatusCode::OK, "{v}");
    // A new connection from the seq after the last one seen: the rest, nothing twice.
    let resume = format!("{url}?from_seq={}", last + 1);
    let (rest, closed) = frames_until(&resume, |_| false).await;
    assert!(closed);
    assert!(
        rest.iter().all(|f| f["seq"].as_u64().unwrap() > last),
        "{rest:?}"
    );
    assert!(!rest.iter().any(|f| f["event"] == "resume"), "{rest:?}");
    assert_eq!(stdout_text(&rest), "after go\n");
    assert_eq!(rest.last().unwrap()["event"], "end");
    let (s, v) = srv
        .get(&format!("{}/{pid}/output?stdout_offset=30", procs(&sid)))
        .await;
    assert_eq!(s, StatusCode::OK);
    assert_eq!(v["running"], false);
    assert_eq!(v["stdout"]["data"], "after go\n");
    // Bad seq and a plain GET.
    let (s, v) = srv
        .get(&format!("{}/{pid}/stream?from_seq=0", procs(&sid)))
        .await;
    assert_eq!(s, StatusCode::BAD_REQUEST, "{v}");
    let (s, _) = srv.get(&format!("{}/{pid}/stream", procs(&sid))).await;
    assert_eq!(s, StatusCode::UPGRADE_REQUIRED);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn output_past_the_ring_says_what_was_dropped() {
    let srv = TestServer::with(|c| c.max_log_bytes = 99).await;
    let sid = srv.session(json!({})).await;
    // 10 lines of 10 bytes, then 40 more: 140 bytes, the ring keeps 100.
    let p = start(
        &srv,
        &sid,
        json!({"command": "for i in 0 1 2 3 4 5 6 7 8 9 a b c d; do echo 12345678$i; done"}),
    )
    .await;
    let pid = p["pid"].as_u64().unwrap();
    wait_end(&srv, &sid, pid).await;
    let (s, v) = srv
        .get(&format!("{}/{pid}/output?stdout_offset=10", procs(&sid)))
        .await;
    assert_eq!(s, StatusCode::OK, "{v}");
    assert_eq!(v["stdout"]["dropped_bytes"], 30, "{v}");
    assert_eq!(v["stdout"]["offset"], 40);
    assert_eq!(v["stdout"]["next_offset"], 140);
    assert!(
        v["stdout"]["data"]
            .as_str()
            .unwrap()
            .starts_with("123456784\n"),
        "{v}"
    );
}

// Threat: T-TENANT (docs/security.md)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn another_users_session_and_processes_are_404() {
    let srv = auth_server(|c| {
        c.ws_signed_urls = true;
        c.ws_signing_secret = Some("ws-signing-secret-0123456789".into());
    })
    .await;
    let alice = [api_key(ALICE_KEY)];
    let bob = [bearer(&jwt(JWT_SECRET, "bob", None, 600))];
    let (s, _, v) = call(
        &srv,
        Method::POST,
        &srv.url("/sessions"),
        &alice,
        Some(json!({"spec_version": "1.0"})),
    )
    .await;
    assert_eq!(s, StatusCode::CREATED, "{v}");
    let sid = v["session_id"].as_str().unwrap().to_string();
    let (s, _, p) = call(
        &srv,
        Method::POST,
        &srv.url(&procs(&sid)),
        &alice,
        Some(json!({"command": "read x; echo got $x", "timeout_ms": 600000})),
    )
    .await;
    assert_eq!(s, StatusCode::CREATED, "{p}");
    let pid = p["pid"].as_u64().unwrap();
    for (method, path, body) in [
        (Method::GET, procs(&sid), None),
        (
            Method::POST,
            procs(&sid),
            Some(json!({"command": "echo bob"})),
        ),
        (Method::GET, format!("{}/{pid}", procs(&sid)), None),
        (
            Method::POST,
            format!("{}/{pid}/wait?timeout_ms=0", procs(&sid)),
            None,
        ),
        (Method::POST, format!("{}/{pid}/kill", procs(&sid)), None),
        (
            Method::POST,
            format!("{}/{pid}/stdin", procs(&sid)),
            Some(json!({"data": "bob\n"})),
        ),
        (Method::GET, format!("{}/{pid}/output", procs(&sid)), None),
    ] {
        let (s, _, v) = call(&srv, method.clone(), &srv.url(&path), &bob, body).await;
        assert_eq!(s, StatusCode::NOT_FOUND, "{method} {path}: {v}");
        assert_eq!(v["error"]["code"], "not_found");
    }
    // Alice's own pid that does not exist, and a pid that is not one.
    let (s, _, v) = call(
        &srv,
        Method::GET,
        &srv.url(&format!("{}/99", procs(&sid))),
        &alice,
        None,
    )
    .await;
    assert_eq!(s, StatusCode::NOT_FOUND, "{v}");
    let (s, _, _) = call(
        &srv,
        Method::GET,
        &srv.url(&format!("{}/0", procs(&sid))),
        &alice,
        None,
    )
    .await;
    assert_eq!(s, StatusCode::BAD_REQUEST);

    // The signed stream URL alone opens that process's stream, not another one's.
    let url = p["stream_url"].as_str().unwrap().to_string();
    assert!(url.contains("?token=") && url.contains("&exp="), "{url}");
    let (s, _, _) = call(
        &srv,
        Method::POST,
        &srv.url(&format!("{}/{pid}/stdin", procs(&sid))),
        &alice,
        Some(json!({"data": "alice\n", "close": true})),
    )
    .await;
    assert_eq!(s, StatusCode::OK);
    let (frames, closed) = frames_until(&url, |_| false).await;
    assert!(closed);
    assert_eq!(stdout_text(&frames), "got alice\n");
    let query = &url[url.find('?').unwrap()..];
    let other = format!(
        "{}{query}",
        srv.ws_url(&format!("{}/{}/stream", procs(&sid), pid + 1))
    );
    match tokio_tungstenite::connect_async(&other).await {
        Err(tokio_tungstenite::tungstenite::Error::Http(r)) => {
            assert_eq!(r.status().as_u16(), 401)
        }
        other => panic!(
            "another pid's stream opened with this token: {:?}",
            other.is_ok()
        ),
    }
    // Without the token or headers: 401.
    let bare = url[..url.find('?').unwrap()].to_string();
    match tokio_tungstenite::connect_async(&bare).await {
        Err(tokio_tungstenite::tungstenite::Error::Http(r)) => {
            assert_eq!(r.status().as_u16(), 401)
        }
        other => panic!("opened without credentials: {:?}", other.is_ok()),
    }
}

// Threat: T-SERVICE-EXHAUST (docs/security.md)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_limit_on_running_processes_is_a_429_and_frees_when_one_ends() {
    let srv = TestServer::with(|c| c.max_processes_per_session = 2).await;
    let sid = srv.session(json!({})).await;
    let long = json!({"command": "sleep 600", "timeout_ms": 600000});
    let a = start(&srv, &sid, long.clone()).await;
    start(&srv, &sid, long.clone()).await;
    let (s, _, v) = srv.post(&procs(&sid), long.clone()).await;
    assert_eq!(s, StatusCode::TOO_MANY_REQUESTS, "{v}");
    assert_eq!(v["error"]["code"], "quota_exceeded");
    assert_eq!(v["error"]["details"]["max_running"], 2);
    assert_eq!(v["error"]["details"]["reason"], "processes");
    let pid = a["pid"].as_u64().unwrap();
    let (s, _) = post_empty(&srv, &format!("{}/{pid}/kill", procs(&sid))).await;
    assert_eq!(s, StatusCode::OK);
    wait_end(&srv, &sid, pid).await;
    let c = start(&srv, &sid, long).await;
    assert_eq!(c["pid"], 3);
    // Bad starts are 400 and start nothing.
    for body in [
        json!({"command": ""}),
        json!({"command": []}),
        json!({"command": "true", "cwd": "/nope"}),
        json!({"command": "true", "timeout_ms": 0}),
        json!({"command": "true", "env": {"1BAD": "x"}}),
        json!({"command": "true", "shell": "zsh"}),
    ] {
        let (s, _, v) = srv.post(&procs(&sid), body.clone()).await;
        assert_eq!(s, StatusCode::BAD_REQUEST, "{body}: {v}");
    }
    let (s, _, _) = srv
        .post("/sessions/nope/processes", json!({"command": "true"}))
        .await;
    assert_eq!(s, StatusCode::NOT_FOUND);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn deleting_or_expiring_the_session_ends_its_processes() {
    let srv = TestServer::start().await;
    for expire in [false, true] {
        let sid = if expire {
            srv.session(json!({"ttl_sec": 60})).await
        } else {
            srv.session(json!({})).await
        };
        let p = start(
            &srv,
            &sid,
            json!({"command": "echo up; while :; do :; done", "timeout_ms": 600000}),
        )
        .await;
        let url = p["stream_url"].as_str().unwrap().to_string();
        let (mut ws, _) = tokio_tungstenite::connect_async(&url).await.unwrap();
        let mut frames = Vec::new();
        read_until(&mut ws, &mut frames, |f| stdout_text(f) == "up\n").await;
        if expire {
            srv.app.clock.advance(Duration::from_secs(61));
        } else {
            let resp = srv
                .client
                .delete(srv.url(&format!("/sessions/{sid}")))
                .send()
                .await
                .unwrap();
            assert_eq!(resp.status(), StatusCode::NO_CONTENT);
        }
        read_until(&mut ws, &mut frames, |f| {
            f.last().is_some_and(|x| x["event"] == "end")
        })
        .await;
        let end = frames.last().unwrap();
        assert_eq!(end["event"], "end", "expire={expire}: {frames:?}");
        assert_eq!(end["data"]["status"], "killed", "{end}");
        assert_eq!(end["data"]["exit_code"], 137);
        let (s, _) = srv.get(&format!("{}/1", procs(&sid))).await;
        assert_eq!(s, StatusCode::NOT_FOUND);
    }
}
