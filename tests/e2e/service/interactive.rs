//! Interactive runs (seed 003, spec 1.1): `interactive: true`, `stdin` and `stdin_close`
//! frames on the run's stream, the four `stdin_*` limits and their `stdin_closed` event, the
//! owner-only writers, the audit event and the policy on shells, through real HTTP and
//! WebSocket clients on loopback.

use base64::Engine;
use futures::{SinkExt, StreamExt};
use reqwest::{Method, StatusCode};
use serde_json::{Value, json};
use sha2::{Digest, Sha256};
use tokio_tungstenite::tungstenite::Message;

use super::auth::{ALICE_KEY, JWT_SECRET, ROOT_KEY, api_key, auth_server, call, jwt};
use super::common::*;

/// A server whose stdin idle timeout outlasts any wait of these tests: only the test that is
/// about idling gives it a small value, so that a loaded machine pausing between two frames
/// cannot close a run's stdin under another test.
async fn server(f: impl FnOnce(&mut wasmsand_server::Config)) -> TestServer {
    TestServer::with(|c| {
        c.interactive_idle_timeout_sec = GUARD.as_secs();
        f(c);
    })
    .await
}

/// An interactive one-shot run of `argv`, with `extra` fields.
fn interactive(argv: &[&str], extra: Value) -> Value {
    let mut body = TestServer::one_shot(argv);
    body["interactive"] = json!(true);
    body["timeout_sec"] = json!(GUARD.as_secs());
    for (k, v) in extra.as_object().unwrap() {
        body[k] = v.clone();
    }
    body
}

fn stdin(text: &str) -> Value {
    json!({ "type": "stdin", "encoding": "utf8", "data": text })
}

fn stdin_b64(bytes: &[u8]) -> Value {
    json!({
        "type": "stdin",
        "encoding": "base64",
        "data": base64::engine::general_purpose::STANDARD.encode(bytes),
    })
}

fn close() -> Value {
    json!({ "type": "stdin_close" })
}

async fn send(ws: &mut Ws, frame: Value) {
    ws.send(Message::Text(frame.to_string().into()))
        .await
        .unwrap();
}

/// The stdout so far, lossily (a test waiting for a line must not panic on a half frame).
fn text(frames: &[Value]) -> String {
    String::from_utf8_lossy(&output(frames, "stdout")).into_owned()
}

/// The run's `stdin_closed` events (they say how many bytes came through).
fn stdin_closed(frames: &[Value]) -> Vec<&Value> {
    frames
        .iter()
        .filter(|f| f["event"] == "stdin_closed" && f["data"]["bytes_received"].is_u64())
        .collect()
}

/// The notes a connection got for frames that found stdin closed: `stdin_closed` events of
/// its own, with the reason only.
fn notes(frames: &[Value]) -> Vec<&Value> {
    frames
        .iter()
        .filter(|f| f["event"] == "stdin_closed" && f["data"].get("bytes_received").is_none())
        .collect()
}

/// `frames` without the connection's own notes: the run's frames, for the stream rules.
fn run_frames(frames: &[Value]) -> Vec<Value> {
    let notes = notes(frames);
    frames
        .iter()
        .filter(|f| !notes.contains(f))
        .cloned()
        .collect()
}

/// Waits until the server has read everything sent on `ws` so far: it answers a ping once
/// it read it, after the messages before it (and after whatever they made it send).
async fn sync(ws: &mut Ws, frames: &mut Vec<Value>) {
    ws.send(Message::Ping(b"sync".to_vec().into()))
        .await
        .unwrap();
    let read = async {
        loop {
            match ws.next().await {
                Some(Ok(Message::Text(t))) => frames.push(serde_json::from_str(&t).unwrap()),
                Some(Ok(Message::Pong(p))) if p.as_ref() == b"sync" => break,
                Some(Ok(_)) => {}
                other => panic!("the stream ended before the pong: {other:?}"),
            }
        }
    };
    tokio::time::timeout(GUARD, read).await.expect("no pong");
}

fn ended(frames: &[Value]) -> bool {
    frames.iter().any(|f| f["event"] == "end")
}

/// Starts `body` and connects to its stream from seq 1.
async fn start(srv: &TestServer, body: Value) -> (String, Ws) {
    let v = srv.start_run(body).await;
    let id = v["run_id"].as_str().unwrap().to_string();
    let ws = srv.connect(&id).await;
    (id, ws)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_read_loop_is_driven_line_by_line_over_the_socket() {
    let srv = server(|_| {}).await;
    let created = srv
        .start_run(interactive(
            &[
                "bash",
                "-c",
                "while read -r line; do echo \"got $line\"; done; echo bye",
            ],
            json!({}),
        ))
        .await;
    assert_eq!(created["interactive"], true, "{created}");
    assert_eq!(
        created["stdin_limits"]["stdin_max_bytes"], 1048576,
        "{created}"
    );
    let id = created["run_id"].as_str().unwrap().to_string();
    let mut ws = srv.connect(&id).await;
    let mut frames = Vec::new();
    send(&mut ws, stdin("one\n")).await;
    read_until(&mut ws, &mut frames, |f| text(f).contains("got one\n")).await;
    // The first answer came while stdin was still open: the loop reads line by line.
    assert_eq!(srv.get(&format!("/runs/{id}")).await.1["phase"], "running");
    send(&mut ws, stdin("two\n")).await;
    read_until(&mut ws, &mut frames, |f| text(f).contains("got two\n")).await;
    send(&mut ws, close()).await;
    read_until(&mut ws, &mut frames, ended).await;
    check_stream_rules(&frames);
    assert_eq!(stdout(&frames), "got one\ngot two\nbye\n");
    let closed = stdin_closed(&frames);
    assert_eq!(closed.len(), 1, "{frames:?}");
    assert_eq!(
        closed[0]["data"],
        json!({ "reason": "client_closed", "bytes_received": 8 })
    );
    let st = srv.wait_done(&id).await;
    assert_eq!(st["phase"], "completed", "{st}");
    assert_eq!(st["exit_code"], 0);
    assert_eq!(st["interactive"], true);
    assert_eq!(st["stdin_limits"], created["stdin_limits"]);
}

/// Python's interactive console, driven statement by statement: each answer comes while
/// stdin is still open. (The sandbox's `python3` launcher has no `-i`; `code.interact` is the
/// same read-eval-print loop, which is what `-i` starts.)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn python_in_interactive_mode_answers_each_statement_as_it_comes() {
    let srv = server(|_| {}).await;
    let repl = "import code; code.interact(banner='', exitmsg='')";
    let (id, mut ws) = start(&srv, interactive(&["python3", "-c", repl], json!({}))).await;
    let mut frames = Vec::new();
    send(&mut ws, stdin("x = 6 * 7\n")).await;
    send(&mut ws, stdin("x\n")).await;
    read_until(&mut ws, &mut frames, |f| text(f).contains("42\n")).await;
    send(&mut ws, stdin("def f(n):\n")).await;
    send(&mut ws, stdin("    return n + x\n")).await;
    send(&mut ws, stdin("\n")).await;
    send(&mut ws, stdin("print('again', f(1))\n")).await;
    read_until(&mut ws, &mut frames, |f| text(f).contains("again 43\n")).await;
    assert!(stdin_closed(&frames).is_empty(), "{frames:?}");
    send(&mut ws, close()).await;
    read_until(&mut ws, &mut frames, ended).await;
    // The console's prompts go to stdout (its stdin is not a terminal).
    let out = stdout(&frames).replace(">>> ", "").replace("... ", "");
    assert_eq!(out, "42\nagain 43\n");
    let st = srv.wait_done(&id).await;
    assert_eq!(st["phase"], "completed", "{st} {frames:?}");
    assert_eq!(st["exit_code"], 0);
}

/// Runs `script` interactively with `limits`, sends `frames_in`, and returns the frames to
/// the end and the final status. The script reads stdin to its end first, so the run only
/// finishes once stdin closed.
async fn limited(
    srv: &TestServer,
    script: &str,
    limits: Value,
    frames_in: Vec<Value>,
) -> (Vec<Value>, Value) {
    let (id, mut ws) = start(srv, interactive(&["bash", "-c", script], limits)).await;
    for f in frames_in {
        send(&mut ws, f).await;
    }
    let mut frames = Vec::new();
    read_until(&mut ws, &mut frames, ended).await;
    check_stream_rules(&run_frames(&frames));
    // A frame sent after stdin closed may have been read before the run's end: its
    // connection was then told why, once.
    let closed = stdin_closed(&frames);
    let notes = notes(&frames);
    assert!(notes.len() <= 1, "{frames:?}");
    for n in notes {
        assert_eq!(
            n["data"]["reason"], closed[0]["data"]["reason"],
            "{frames:?}"
        );
    }
    (frames, srv.wait_done(&id).await)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_frame_over_stdin_max_frame_bytes_closes_stdin_and_the_run_goes_on() {
    let srv = server(|_| {}).await;
    let (frames, st) = limited(
        &srv,
        "cat; echo \"eof $?\"",
        json!({ "stdin_max_frame_bytes": 8 }),
        vec![
            stdin("fits\n"),
            stdin("this one does not fit\n"),
            stdin("late\n"),
        ],
    )
    .await;
    let closed = stdin_closed(&frames);
    assert_eq!(closed.len(), 1, "{frames:?}");
    assert_eq!(
        closed[0]["data"],
        json!({ "reason": "stdin_max_frame_bytes", "limit": 8, "bytes_received": 5 })
    );
    // Neither the frame that broke the limit nor any after it reached the program.
    assert_eq!(stdout(&frames), "fits\neof 0\n");
    assert_eq!(st["phase"], "completed", "{st}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn input_past_stdin_max_bytes_closes_stdin_and_the_run_goes_on() {
    let srv = server(|_| {}).await;
    let (frames, st) = limited(
        &srv,
        "cat; echo \"eof $?\"",
        json!({ "stdin_max_bytes": 10 }),
        vec![stdin("abcdef\n"), stdin("ghijkl\n")],
    )
    .await;
    let closed = stdin_closed(&frames);
    assert_eq!(closed.len(), 1, "{frames:?}");
    assert_eq!(
        closed[0]["data"],
        json!({ "reason": "stdin_max_bytes", "limit": 10, "bytes_received": 7 })
    );
    assert_eq!(stdout(&frames), "abcdef\neof 0\n");
    assert_eq!(st["phase"], "completed", "{st}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn input_faster_than_stdin_bps_closes_stdin_and_the_run_goes_on() {
    let srv = server(|_| {}).await;
    // Each frame is one second's worth: any two within a second break the rate. A hundred
    // sent back to back take far less than the 99 seconds that would keep them within it.
    let burst = (0..100).map(|_| stdin("1234\n")).collect();
    let (frames, st) = limited(&srv, "wc -c", json!({ "stdin_bps": 5 }), burst).await;
    let closed = stdin_closed(&frames);
    assert_eq!(closed.len(), 1, "{frames:?}");
    let data = &closed[0]["data"];
    assert_eq!(data["reason"], "stdin_bps", "{data}");
    assert_eq!(data["limit"], 5);
    let received = data["bytes_received"].as_u64().unwrap();
    assert!((5..500).contains(&received), "{data}");
    // The program read exactly what the server let through, then end of file.
    assert_eq!(stdout(&frames).trim(), received.to_string());
    assert_eq!(st["phase"], "completed", "{st}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stdin_closes_after_stdin_idle_timeout_sec_without_input() {
    let srv = TestServer::with(|c| c.interactive_idle_timeout_sec = 1).await;
    let (id, mut ws) = start(
        &srv,
        interactive(&["bash", "-c", "cat; echo \"eof $?\""], json!({})),
    )
    .await;
    let mut frames = Vec::new();
    read_until(&mut ws, &mut frames, ended).await;
    let closed = stdin_closed(&frames);
    assert_eq!(closed.len(), 1, "{frames:?}");
    assert_eq!(
        closed[0]["data"],
        json!({ "reason": "stdin_idle_timeout_sec", "limit": 1, "bytes_received": 0 })
    );
    assert_eq!(stdout(&frames), "eof 0\n");
    let st = srv.wait_done(&id).await;
    assert_eq!(st["phase"], "completed", "{st}");
    assert_eq!(st["stdin_limits"]["stdin_idle_timeout_sec"], 1);
}

/// Stdin closes at a terminal state: a program blocked reading it is still timed out or
/// cancelled, and the stream says stdin closed with the run.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_run_waiting_for_input_still_times_out_and_is_cancelled() {
    let srv = server(|_| {}).await;
    let mut body = interactive(&["cat"], json!({}));
    body["timeout_sec"] = json!(1);
    let (id, mut ws) = start(&srv, body).await;
    send(&mut ws, stdin("partial")).await;
    let mut frames = Vec::new();
    read_until(&mut ws, &mut frames, ended).await;
    assert_eq!(stdout(&frames), "partial");
    assert_eq!(
        stdin_closed(&frames)[0]["data"],
        json!({ "reason": "run_ended", "bytes_received": 7 })
    );
    let st = srv.wait_done(&id).await;
    assert_eq!(st["phase"], "timed_out", "{st}");
    assert_eq!(st["reason_code"], "execution_timeout");

    let (id, mut ws) = start(&srv, interactive(&["cat"], json!({}))).await;
    send(&mut ws, stdin("line\n")).await;
    let mut frames = Vec::new();
    read_until(&mut ws, &mut frames, |f| text(f) == "line\n").await;
    let (s, _, _) = srv.post(&format!("/runs/{id}/cancel"), json!({})).await;
    assert_eq!(s, StatusCode::ACCEPTED);
    read_until(&mut ws, &mut frames, ended).await;
    check_stream_rules(&frames);
    let closed = stdin_closed(&frames);
    assert_eq!(closed.len(), 1, "{frames:?}");
    assert_eq!(closed[0]["data"]["reason"], "run_ended");
    assert_eq!(srv.wait_done(&id).await["phase"], "killed");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn base64_frames_carry_any_bytes() {
    let srv = server(|_| {}).await;
    let bytes: Vec<u8> = (0..=255u8).chain((0..=255u8).rev()).collect();
    let (frames, st) = limited(
        &srv,
        "cat",
        json!({}),
        vec![stdin_b64(&bytes[..300]), stdin_b64(&bytes[300..]), close()],
    )
    .await;
    assert_eq!(output(&frames, "stdout"), bytes);
    assert_eq!(
        stdin_closed(&frames)[0]["data"],
        json!({ "reason": "client_closed", "bytes_received": 512 })
    );
    assert_eq!(st["phase"], "completed", "{st}");
}

/// Frames that are not stdin frames close stdin, each with its reason; a connection whose
/// frame finds stdin closed is told once, by a note of its own (not one of the run's frames).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn frames_that_are_not_stdin_frames_close_stdin() {
    let srv = server(|_| {}).await;
    for (bad, reason) in [
        (
            Message::Text(r#"{"type":"stdin","encoding":"hex","data":"00"}"#.into()),
            "invalid_encoding",
        ),
        (
            Message::Text(r#"{"type":"stdin","encoding":"base64","data":"%"}"#.into()),
            "invalid_encoding",
        ),
        (Message::Text("not json".into()), "invalid_frame"),
        (
            Message::Text(r#"{"type":"resize"}"#.into()),
            "invalid_frame",
        ),
        (Message::Binary(vec![1, 2, 3].into()), "invalid_frame"),
    ] {
        // The program outlives its stdin, so the connection is still there to be told.
        let (id, mut ws) = start(
            &srv,
            interactive(
                &["bash", "-c", "cat; echo \"eof $?\"; sleep 3600"],
                json!({}),
            ),
        )
        .await;
        send(&mut ws, stdin("before\n")).await;
        ws.send(bad).await.unwrap();
        let mut frames = Vec::new();
        read_until(&mut ws, &mut frames, |f| {
            text(f).contains("eof 0\n") && !stdin_closed(f).is_empty()
        })
        .await;
        let closed = stdin_closed(&frames);
        assert_eq!(closed.len(), 1, "{frames:?}");
        assert_eq!(
            closed[0]["data"],
            json!({ "reason": reason, "bytes_received": 7 })
        );
        assert_eq!(text(&frames), "before\neof 0\n");
        let closed_seq = closed[0]["seq"].as_u64().unwrap();
        send(&mut ws, stdin("after\n")).await;
        read_until(&mut ws, &mut frames, |f| !notes(f).is_empty()).await;
        let note = notes(&frames)[0].clone();
        assert_eq!(note["data"], json!({ "reason": reason }), "{note}");
        assert!(note["seq"].as_u64().unwrap() >= closed_seq, "{note}");
        let (s, _, _) = srv.post(&format!("/runs/{id}/cancel"), json!({})).await;
        assert_eq!(s, StatusCode::ACCEPTED);
        read_until(&mut ws, &mut frames, ended).await;
        // The note went to this connection only: the run's frames have the one event.
        let all = srv.frames(&id, "?from_seq=1").await;
        assert_eq!(stdin_closed(&all).len(), 1, "{all:?}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_run_that_is_not_interactive_refuses_stdin_frames() {
    let srv = server(|_| {}).await;
    let v = srv.start_run(TestServer::script("cat; sleep 3600")).await;
    assert_eq!(v["interactive"], false, "{v}");
    assert!(v.get("stdin_limits").is_none(), "{v}");
    let id = v["run_id"].as_str().unwrap().to_string();
    let mut ws = srv.connect(&id).await;
    send(&mut ws, stdin("hello\n")).await;
    let mut frames = Vec::new();
    read_until(&mut ws, &mut frames, |f| !notes(f).is_empty()).await;
    let note = notes(&frames)[0].clone();
    assert_eq!(
        note["data"],
        json!({ "reason": "not_interactive" }),
        "{note}"
    );
    assert!(note["seq"].as_u64().unwrap() >= 1, "{note}");
    // Told once per connection: a second frame gets no second note.
    send(&mut ws, stdin("again\n")).await;
    sync(&mut ws, &mut frames).await;
    assert_eq!(notes(&frames).len(), 1, "{frames:?}");
    let (s, _, _) = srv.post(&format!("/runs/{id}/cancel"), json!({})).await;
    assert_eq!(s, StatusCode::ACCEPTED);
    read_until(&mut ws, &mut frames, ended).await;
    assert!(stdin_closed(&frames).is_empty(), "{frames:?}");
    assert_eq!(stdout(&frames), "");
    let all = srv.frames(&id, "?from_seq=1").await;
    assert!(
        notes(&all).is_empty() && stdin_closed(&all).is_empty(),
        "{all:?}"
    );
}

/// Every connection of the run's owner writes to the one stdin, in the order the server gets
/// the frames, under one set of limits; another user cannot even open the stream.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_owners_connections_share_one_stdin_and_no_one_else_writes() {
    let srv = auth_server(|c| c.interactive_idle_timeout_sec = GUARD.as_secs()).await;
    let alice = [api_key(ALICE_KEY)];
    let (s, _, v) = call(
        &srv,
        Method::POST,
        &srv.url("/runs"),
        &alice,
        Some(interactive(&["cat"], json!({ "stdin_max_bytes": 14 }))),
    )
    .await;
    assert!(s.is_success(), "{v}");
    let id = v["run_id"].as_str().unwrap().to_string();
    let connect = |who: (&'static str, String)| {
        let url = srv.ws_url(&format!("/runs/{id}/stream"));
        async move {
            let mut req =
                tokio_tungstenite::tungstenite::client::IntoClientRequest::into_client_request(url)
                    .unwrap();
            req.headers_mut().insert(who.0, who.1.parse().unwrap());
            tokio_tungstenite::connect_async(req).await
        }
    };
    let mut a = connect(api_key(ALICE_KEY)).await.unwrap().0;
    let mut b = connect(api_key(ALICE_KEY)).await.unwrap().0;
    let bob = (
        "authorization",
        format!("Bearer {}", jwt(JWT_SECRET, "bob", None, 600)),
    );
    match connect(bob).await {
        Err(tokio_tungstenite::tungstenite::Error::Http(r)) => assert_eq!(r.status(), 404),
        other => panic!("bob opened alice's stream: {:?}", other.map(|_| ())),
    }
    let (mut fa, mut fb) = (Vec::new(), Vec::new());
    send(&mut a, stdin("from a\n")).await;
    read_until(&mut a, &mut fa, |f| text(f) == "from a\n").await;
    send(&mut b, stdin("from b\n")).await;
    read_until(&mut b, &mut fb, |f| text(f) == "from a\nfrom b\n").await;
    // The limit is the run's, not each connection's: 14 bytes are in, so one more breaks it.
    send(&mut a, stdin("!")).await;
    read_until(&mut a, &mut fa, ended).await;
    read_until(&mut b, &mut fb, ended).await;
    for frames in [&fa, &fb] {
        check_stream_rules(frames);
        assert_eq!(stdout(frames), "from a\nfrom b\n");
        let closed = stdin_closed(frames);
        assert_eq!(closed.len(), 1, "{frames:?}");
        assert_eq!(
            closed[0]["data"],
            json!({ "reason": "stdin_max_bytes", "limit": 14, "bytes_received": 14 })
        );
    }
}

/// The audit event of a run's stdin: its SHA-256 and size, never the input itself unless
/// `SANDBOX_AUDIT_STDIN_CONTENT` asks for it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stdin_is_audited_by_its_hash() {
    for content in [false, true] {
        let srv = auth_server(|c| {
            c.interactive_idle_timeout_sec = GUARD.as_secs();
            c.audit_stdin_content = content;
        })
        .await;
        let alice = [api_key(ALICE_KEY)];
        let root = [api_key(ROOT_KEY)];
        let (s, _, v) = call(
            &srv,
            Method::POST,
            &srv.url("/runs"),
            &alice,
            Some(interactive(&["cat"], json!({}))),
        )
        .await;
        assert!(s.is_success(), "{v}");
        let id = v["run_id"].as_str().unwrap().to_string();
        let mut req =
            tokio_tungstenite::tungstenite::client::IntoClientRequest::into_client_request(
                srv.ws_url(&format!("/runs/{id}/stream")),
            )
            .unwrap();
        req.headers_mut()
            .insert("x-api-key", ALICE_KEY.parse().unwrap());
        let mut ws = tokio_tungstenite::connect_async(req).await.unwrap().0;
        let input = "SECRET-INPUT-5521\n";
        send(&mut ws, stdin(&input[..7])).await;
        send(&mut ws, stdin(&input[7..])).await;
        send(&mut ws, close()).await;
        let mut frames = Vec::new();
        read_until(&mut ws, &mut frames, ended).await;
        assert_eq!(stdout(&frames), input);

        let events = loop {
            let url = srv.url(&format!("/admin/audit?run_id={id}&limit=200"));
            let (s, _, v) = call(&srv, Method::GET, &url, &root, None).await;
            assert_eq!(s, StatusCode::OK, "{v}");
            let items = v["items"].as_array().unwrap().clone();
            if items.iter().any(|e| e["event"] == "sandbox.run.completed") {
                break items;
            }
            tokio::time::sleep(std::time::Duration::from_millis(20)).await;
        };
        // The client may close stdin before the command started (while the run is
        // `starting`): the event comes between the run's creation and its end.
        let names: Vec<&str> = events
            .iter()
            .map(|e| e["event"].as_str().unwrap())
            .collect();
        let at = names
            .iter()
            .position(|n| *n == "sandbox.run.stdin_closed")
            .expect("a stdin_closed event");
        let mut phases = names.clone();
        phases.remove(at);
        assert_eq!(
            phases,
            [
                "sandbox.run.created",
                "sandbox.run.starting",
                "sandbox.run.running",
                "sandbox.run.completed"
            ]
        );
        assert!(at > 0 && at < names.len() - 1, "{names:?}");
        assert_eq!(
            events[0]["interactive"]["stdin_max_bytes"], 1048576,
            "{}",
            events[0]
        );
        let e = &events[at];
        assert_eq!(e["user_id"], "alice");
        assert_eq!(e["run_id"], id.as_str());
        assert_eq!(e["reason"], "client_closed");
        assert_eq!(e["stdin_bytes"], input.len());
        assert_eq!(e["stdin_frames"], 2);
        assert_eq!(
            e["stdin_sha256"],
            hex::encode(Sha256::digest(input.as_bytes()))
        );
        let trail = serde_json::to_string(&events).unwrap();
        if content {
            assert_eq!(
                e["stdin_base64"],
                base64::engine::general_purpose::STANDARD.encode(input)
            );
        } else {
            assert!(e.get("stdin_base64").is_none(), "{e}");
            assert!(!trail.contains("SECRET-INPUT"), "{trail}");
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn interactive_requests_are_checked_against_the_servers_limits_and_policy() {
    let srv = TestServer::start().await;
    let (s, v) = srv.get("/runtimes").await;
    assert_eq!(s, StatusCode::OK);
    let wasm = &v["runtimes"][0];
    assert_eq!(wasm["name"], "wasm");
    assert_eq!(wasm["interactive_supported"], true, "{wasm}");
    assert_eq!(
        wasm["interactive_limits"],
        json!({
            "stdin_max_bytes": 1048576,
            "stdin_max_frame_bytes": 65536,
            "stdin_bps": 65536,
            "stdin_idle_timeout_sec": 30,
        })
    );
    for (field, value) in [
        ("stdin_max_bytes", 1048577),
        ("stdin_max_frame_bytes", 65537),
        ("stdin_bps", 0),
        ("stdin_idle_timeout_sec", 31),
    ] {
        let (s, _, v) = srv
            .post("/runs", interactive(&["cat"], json!({ field: value })))
            .await;
        assert_eq!(s, StatusCode::BAD_REQUEST, "{field}: {v}");
        assert_eq!(v["error"]["code"], "invalid_request");
        assert_eq!(v["error"]["details"]["field"], field, "{v}");
        assert_eq!(v["error"]["details"]["provided"], value, "{v}");
        // Without `interactive`, a limit is refused rather than ignored.
        let mut body = TestServer::one_shot(&["cat"]);
        body[field] = json!(1);
        let (s, _, v) = srv.post("/runs", body).await;
        assert_eq!(s, StatusCode::BAD_REQUEST, "{field}: {v}");
        assert_eq!(v["error"]["details"]["field"], field, "{v}");
    }
    let (s, _, v) = srv
        .post("/runs", interactive(&["cat"], json!({ "stdin": "aGkK" })))
        .await;
    assert_eq!(s, StatusCode::BAD_REQUEST, "{v}");
    for shell in [
        &["bash"][..],
        &["sh", "-i"][..],
        &["env", "PS1=x", "bash", "-s"][..],
    ] {
        let (s, _, v) = srv.post("/runs", interactive(shell, json!({}))).await;
        assert_eq!(s, StatusCode::FORBIDDEN, "{shell:?}: {v}");
        assert_eq!(v["error"]["details"]["reason"], "interactive_shell", "{v}");
    }

    let off = TestServer::with(|c| c.interactive_enabled = false).await;
    let (_, v) = off.get("/runtimes").await;
    assert_eq!(v["runtimes"][0]["interactive_supported"], false, "{v}");
    assert!(v["runtimes"][0].get("interactive_limits").is_none(), "{v}");
    let (s, _, v) = off.post("/runs", interactive(&["cat"], json!({}))).await;
    assert_eq!(s, StatusCode::FORBIDDEN, "{v}");
    assert_eq!(v["error"]["details"]["reason"], "interactive_disabled");
    assert_ne!(off.app.policy_hash(), srv.app.policy_hash());
}

/// `SANDBOX_INTERACTIVE_SHELLS=true` lets an interactive run be a shell reading its commands
/// from the socket. (The sandbox's `bash` reads its whole stdin before running it, so the
/// answer comes once stdin closed.)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_shell_reads_its_commands_from_the_socket_when_the_policy_allows_it() {
    let srv = server(|c| c.interactive_shells = true).await;
    let (id, mut ws) = start(&srv, interactive(&["bash"], json!({}))).await;
    let mut frames = Vec::new();
    send(&mut ws, stdin("x=6\n")).await;
    send(&mut ws, stdin("echo \"shell $((x * 7))\"\n")).await;
    send(&mut ws, close()).await;
    read_until(&mut ws, &mut frames, ended).await;
    assert_eq!(stdout(&frames), "shell 42\n");
    let st = srv.wait_done(&id).await;
    assert_eq!(st["phase"], "completed", "{st} {frames:?}");
}
