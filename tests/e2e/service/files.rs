//! The session file API (`/sessions/{id}/files…`): every operation, its errors as errnos,
//! ranges, caps and bad input; and a run's `stdin`. The same walk runs on a Docker session
//! (tests/e2e/docker/sessions.rs).

use reqwest::StatusCode;
use serde_json::{Value, json};

use super::common::*;

/// A request with an optional body; the status, headers and body bytes.
async fn call(
    srv: &TestServer,
    method: reqwest::Method,
    path: &str,
    body: Option<Vec<u8>>,
    headers: &[(&str, &str)],
) -> (StatusCode, reqwest::header::HeaderMap, Vec<u8>) {
    let mut req = srv.client.request(method, srv.url(path));
    for (k, v) in headers {
        req = req.header(*k, *v);
    }
    if let Some(b) = body {
        req = req.body(b);
    }
    let resp = req.send().await.unwrap();
    let (s, h) = (resp.status(), resp.headers().clone());
    (s, h, resp.bytes().await.unwrap().to_vec())
}

fn json_of(body: &[u8]) -> Value {
    serde_json::from_slice(body).unwrap_or_else(|_| json!(String::from_utf8_lossy(body)))
}

async fn put(
    srv: &TestServer,
    sid: &str,
    path: &str,
    data: &[u8],
    append: bool,
) -> (StatusCode, Value) {
    let q = if append { "&append=true" } else { "" };
    let (s, _, b) = call(
        srv,
        reqwest::Method::PUT,
        &format!("/sessions/{sid}/files/content?path={path}{q}"),
        Some(data.to_vec()),
        &[("content-type", "application/octet-stream")],
    )
    .await;
    (s, json_of(&b))
}

async fn get_bytes(
    srv: &TestServer,
    sid: &str,
    path: &str,
    range: Option<&str>,
) -> (StatusCode, reqwest::header::HeaderMap, Vec<u8>) {
    let headers: Vec<(&str, &str)> = range.map(|r| ("range", r)).into_iter().collect();
    call(
        srv,
        reqwest::Method::GET,
        &format!("/sessions/{sid}/files/content?path={path}"),
        None,
        &headers,
    )
    .await
}

async fn delete(srv: &TestServer, sid: &str, query: &str) -> (StatusCode, Value) {
    let (s, _, b) = call(
        srv,
        reqwest::Method::DELETE,
        &format!("/sessions/{sid}/files?{query}"),
        None,
        &[],
    )
    .await;
    (s, json_of(&b))
}

fn errno(v: &Value) -> &str {
    v["error"]["details"]["errno"].as_str().unwrap_or("")
}

/// Every operation on a session of any runtime; `script` wraps a shell line as the run's
/// argv for that runtime's session. `as_root`: the runtime's runs are root in a machine of
/// their own (vm), so no system path is out of their reach.
pub(crate) async fn exercise_files(
    srv: &TestServer,
    sid: &str,
    as_root: bool,
    script: impl Fn(&str) -> Value,
) {
    // mkdir -p, then again: made once.
    let (s, _, v) = srv
        .post(
            &format!("/sessions/{sid}/files/mkdir"),
            json!({ "path": "a/b/c" }),
        )
        .await;
    assert_eq!((s, &v["created"]), (StatusCode::OK, &json!(true)), "{v}");
    let (_, _, v) = srv
        .post(
            &format!("/sessions/{sid}/files/mkdir"),
            json!({ "path": "a/b/c" }),
        )
        .await;
    assert_eq!(v["created"], false, "{v}");

    // Write, append (the size after each), and the parents made on the way.
    let (s, v) = put(srv, sid, "a/notes/n.txt", b"one\n", false).await;
    assert_eq!((s, &v["size"]), (StatusCode::OK, &json!(4)), "{v}");
    let (_, v) = put(srv, sid, "a/notes/n.txt", b"two\n", true).await;
    assert_eq!(v["size"], 8, "{v}");
    let (s, _, body) = get_bytes(srv, sid, "a/notes/n.txt", None).await;
    assert_eq!((s, body.as_slice()), (StatusCode::OK, &b"one\ntwo\n"[..]));

    // A run sees what was written, and the API sees what a run wrote (relative paths are
    // under the workspace whatever the shell's cwd).
    let (_, frames, status) = srv
        .run(script(
            "cat a/notes/n.txt | wc -l; cd a; printf 'x y' > 'made by run.txt'",
        ))
        .await;
    assert_eq!(status["phase"], "completed", "{status}");
    assert_eq!(stdout(&frames).trim(), "2");
    let (s, v) = srv.get(&format!("/sessions/{sid}/files?path=a")).await;
    assert_eq!(s, StatusCode::OK, "{v}");
    let names: Vec<(&str, &str)> = v["entries"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| (e["name"].as_str().unwrap(), e["type"].as_str().unwrap()))
        .collect();
    assert_eq!(
        names,
        [("b", "dir"), ("made by run.txt", "file"), ("notes", "dir")]
    );
    let (s, v) = srv
        .get(&format!(
            "/sessions/{sid}/files/stat?path=a/made%20by%20run.txt"
        ))
        .await;
    assert_eq!(s, StatusCode::OK, "{v}");
    assert_eq!(
        (&v["name"], &v["type"], &v["size"]),
        (&json!("made by run.txt"), &json!("file"), &json!(3))
    );

    // Ranges: a part (206 with the size), a start past the end (416), several (416).
    let big: Vec<u8> = (0..300_000u32).map(|i| (i % 251) as u8).collect();
    assert_eq!(
        put(srv, sid, "big.bin", &big, false).await.0,
        StatusCode::OK
    );
    let (s, h, body) = get_bytes(srv, sid, "big.bin", Some("bytes=100000-199999")).await;
    assert_eq!(s, StatusCode::PARTIAL_CONTENT);
    assert_eq!(h["content-range"], "bytes 100000-199999/300000");
    assert_eq!(h["x-file-size"], "300000");
    assert_eq!(body, big[100_000..200_000]);
    let (s, _, body) = get_bytes(srv, sid, "big.bin", Some("bytes=290000-")).await;
    assert_eq!((s, body.len()), (StatusCode::PARTIAL_CONTENT, 10_000));
    let (s, _, _) = get_bytes(srv, sid, "big.bin", Some("bytes=300000-")).await;
    assert_eq!(s, StatusCode::RANGE_NOT_SATISFIABLE);
    let (s, _, _) = get_bytes(srv, sid, "big.bin", Some("bytes=0-1,5-6")).await;
    assert_eq!(s, StatusCode::RANGE_NOT_SATISFIABLE);
    let (s, v) = put(srv, sid, "empty", b"", false).await;
    assert_eq!((s, &v["size"]), (StatusCode::OK, &json!(0)));
    for range in [None, Some("bytes=0-1048575")] {
        // An empty file has no byte to range over: answered whole.
        let (s, h, body) = get_bytes(srv, sid, "empty", range).await;
        assert_eq!((s, body.len()), (StatusCode::OK, 0), "{range:?}");
        assert_eq!(h["x-file-size"], "0");
    }

    // Move by rename(2)'s rules.
    let (s, _, v) = srv
        .post(
            &format!("/sessions/{sid}/files/move"),
            json!({ "from": "big.bin", "to": "/tmp/moved.bin" }),
        )
        .await;
    assert_eq!(s, StatusCode::NO_CONTENT, "{v}");
    let (s, v) = srv
        .get(&format!("/sessions/{sid}/files/stat?path=/tmp/moved.bin"))
        .await;
    assert_eq!((s, &v["size"]), (StatusCode::OK, &json!(300_000)), "{v}");
    let (s, _, v) = srv
        .post(
            &format!("/sessions/{sid}/files/move"),
            json!({ "from": "empty", "to": "a" }),
        )
        .await;
    assert_eq!((s, errno(&v)), (StatusCode::CONFLICT, "EISDIR"), "{v}");

    // Errors as errnos, each with its status.
    let (s, v) = srv
        .get(&format!("/sessions/{sid}/files/stat?path=nope"))
        .await;
    assert_eq!((s, errno(&v)), (StatusCode::NOT_FOUND, "ENOENT"), "{v}");
    assert_eq!(v["error"]["code"], "not_found");
    assert_eq!(v["error"]["details"]["path"], "nope");
    let (s, v) = srv
        .get(&format!("/sessions/{sid}/files?path=a/notes/n.txt"))
        .await;
    assert_eq!((s, errno(&v)), (StatusCode::CONFLICT, "ENOTDIR"), "{v}");
    let (s, _, b) = get_bytes(srv, sid, "a", None).await;
    assert_eq!((s, errno(&json_of(&b))), (StatusCode::CONFLICT, "EISDIR"));
    let (s, _, v) = srv
        .post(
            &format!("/sessions/{sid}/files/mkdir"),
            json!({ "path": "a/notes/n.txt" }),
        )
        .await;
    assert_eq!((s, errno(&v)), (StatusCode::CONFLICT, "EEXIST"), "{v}");
    if !as_root {
        let (s, v) = put(srv, sid, "/etc/wasmsand-test", b"x", false).await;
        assert_eq!(s, StatusCode::FORBIDDEN, "{v}");
        assert!(matches!(errno(&v), "EROFS" | "EACCES" | "EPERM"), "{v}");
    }
    let (s, v) = delete(srv, sid, "path=a").await;
    assert_eq!((s, errno(&v)), (StatusCode::CONFLICT, "ENOTEMPTY"), "{v}");
    assert_eq!(
        delete(srv, sid, "path=a/b/c").await.0,
        StatusCode::NO_CONTENT
    );
    assert_eq!(
        delete(srv, sid, "path=a&recursive=true").await.0,
        StatusCode::NO_CONTENT
    );
    let (s, v) = srv.get(&format!("/sessions/{sid}/files/stat?path=a")).await;
    assert_eq!((s, errno(&v)), (StatusCode::NOT_FOUND, "ENOENT"), "{v}");

    // Bad input: a clear 400, and the session goes on.
    let (s, v) = srv.get(&format!("/sessions/{sid}/files/stat?path=")).await;
    assert_eq!(s, StatusCode::BAD_REQUEST, "{v}");
    let (s, v) = srv
        .get(&format!("/sessions/{sid}/files/stat?path=a%00b"))
        .await;
    assert_eq!(s, StatusCode::BAD_REQUEST, "{v}");
    let (s, v) = srv
        .get(&format!("/sessions/{sid}/files/stat?path=x&what=1"))
        .await;
    assert_eq!(s, StatusCode::BAD_REQUEST, "{v}");
    let (s, _, v) = srv
        .post(
            &format!("/sessions/{sid}/files/move"),
            json!({ "from": "x" }),
        )
        .await;
    assert_eq!(s, StatusCode::BAD_REQUEST, "{v}");
    // The shell's cwd (`a`, from the run above) is gone: back to a directory that exists.
    let (_, frames, status) = srv.run(script("cd /; ls /tmp/moved.bin")).await;
    assert_eq!(status["phase"], "completed", "{status}");
    assert_eq!(stdout(&frames), "/tmp/moved.bin\n");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_file_operation_on_a_wasm_session() {
    let srv = TestServer::start().await;
    let sid = srv.session(json!({})).await;
    let s2 = sid.clone();
    exercise_files(&srv, &sid, false, move |line| {
        json!({ "spec_version": "1.0", "session_id": s2, "command": ["bash", "-c", line] })
    })
    .await;
    // Unknown sessions are 404 on every route.
    let (s, v) = srv.get("/sessions/nope/files/stat?path=x").await;
    assert_eq!(
        (s, &v["error"]["code"]),
        (StatusCode::NOT_FOUND, &json!("not_found"))
    );
    let (s, _) = put(&srv, "nope", "x", b"x", false).await;
    assert_eq!(s, StatusCode::NOT_FOUND);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn caps_on_file_bodies_and_whole_reads() {
    let srv = TestServer::with(|c| c.max_upload_mb = 1).await;
    let sid = srv.session(json!({})).await;
    let mib = vec![7u8; 1 << 20];
    // A body past the cap is refused whole; the file is not made.
    let (s, v) = put(&srv, &sid, "f", &[&mib[..], b"x"].concat(), false).await;
    assert_eq!(s, StatusCode::PAYLOAD_TOO_LARGE, "{v}");
    let (s, _) = srv.get(&format!("/sessions/{sid}/files/stat?path=f")).await;
    assert_eq!(s, StatusCode::NOT_FOUND);
    // Two appends make a file larger than one answer carries: whole it is 413, by ranges
    // it reads.
    assert_eq!(put(&srv, &sid, "f", &mib, false).await.0, StatusCode::OK);
    let (s, v) = put(&srv, &sid, "f", b"tail", true).await;
    assert_eq!((s, &v["size"]), (StatusCode::OK, &json!((1 << 20) + 4)));
    let (s, _, b) = get_bytes(&srv, &sid, "f", None).await;
    assert_eq!(
        s,
        StatusCode::PAYLOAD_TOO_LARGE,
        "{}",
        String::from_utf8_lossy(&b)
    );
    assert!(String::from_utf8_lossy(&b).contains("Range"));
    let (s, _, b) = get_bytes(&srv, &sid, "f", Some("bytes=1048576-")).await;
    assert_eq!(
        (s, b.as_slice()),
        (StatusCode::PARTIAL_CONTENT, &b"tail"[..])
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_run_reads_the_stdin_it_was_given() {
    let srv = TestServer::start().await;
    let sid = srv.session(json!({})).await;
    use base64::Engine as _;
    let b64 = base64::engine::general_purpose::STANDARD;
    let body = |script: &str, stdin: &[u8]| {
        json!({ "spec_version": "1.0", "session_id": sid, "command": ["bash", "-c", script],
                "stdin": b64.encode(stdin) })
    };
    let (_, frames, status) = srv
        .run(body(
            "read a; read b; echo \"$b $a\"; X=kept",
            b"first\nsecond\n",
        ))
        .await;
    assert_eq!(status["phase"], "completed", "{status}");
    assert_eq!(stdout(&frames), "second first\n");
    // The run was in the session's shell: its variable stays; no stdin reads empty.
    let (_, frames, _) = srv
        .run(json!({ "spec_version": "1.0", "session_id": sid,
                     "command": ["bash", "-c", "echo $X; wc -c"] }))
        .await;
    assert_eq!(stdout(&frames), "kept\n0\n");
    // Binary stdin, and a one-shot run.
    let (_, frames, _) = srv
        .run(
            json!({ "spec_version": "1.0", "base_image": "wasmsand/default",
                     "command": ["wc", "-c"], "stdin": b64.encode([0u8, 255, 10, 0]) }),
        )
        .await;
    assert_eq!(stdout(&frames).trim(), "4");
    // Refused: not base64 (400), over 1 MiB (413); nothing runs.
    let mut bad = body("cat", b"");
    bad["stdin"] = json!("not base64!");
    let (s, _, v) = srv.post("/runs", bad).await;
    assert_eq!(s, StatusCode::BAD_REQUEST, "{v}");
    let (s, _, v) = srv
        .post("/runs", body("cat", &vec![1u8; (1 << 20) + 1]))
        .await;
    assert_eq!(s, StatusCode::PAYLOAD_TOO_LARGE, "{v}");
}

/// Another user's session's files are unknown on every file route (404), like the session.
// Threat: T-TENANT (docs/security.md)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn another_users_files_are_not_found() {
    use super::auth::{ALICE_KEY, JWT_SECRET, auth_server, jwt};
    let srv = auth_server(|_| {}).await;
    let alice = [("x-api-key", ALICE_KEY)];
    let (s, _, v) = srv
        .post_with("/sessions", json!({ "spec_version": "1.0" }), &alice)
        .await;
    assert_eq!(s, StatusCode::CREATED, "{v}");
    let sid = v["session_id"].as_str().unwrap().to_string();
    let (s, _, _) = call(
        &srv,
        reqwest::Method::PUT,
        &format!("/sessions/{sid}/files/content?path=secret.txt"),
        Some(b"alice's".to_vec()),
        &alice,
    )
    .await;
    assert_eq!(s, StatusCode::OK);
    let bob = format!("Bearer {}", jwt(JWT_SECRET, "bob", None, 600));
    let as_bob = [("authorization", bob.as_str())];
    for (method, path, body) in [
        (
            reqwest::Method::GET,
            format!("/sessions/{sid}/files/content?path=secret.txt"),
            None,
        ),
        (
            reqwest::Method::GET,
            format!("/sessions/{sid}/files?path=."),
            None,
        ),
        (
            reqwest::Method::GET,
            format!("/sessions/{sid}/files/stat?path=secret.txt"),
            None,
        ),
        (
            reqwest::Method::PUT,
            format!("/sessions/{sid}/files/content?path=x"),
            Some(b"bob".to_vec()),
        ),
        (
            reqwest::Method::DELETE,
            format!("/sessions/{sid}/files?path=secret.txt"),
            None,
        ),
        (
            reqwest::Method::POST,
            format!("/sessions/{sid}/files/mkdir"),
            Some(br#"{"path":"d"}"#.to_vec()),
        ),
        (
            reqwest::Method::POST,
            format!("/sessions/{sid}/files/move"),
            Some(br#"{"from":"secret.txt","to":"y"}"#.to_vec()),
        ),
    ] {
        let mut headers = as_bob.to_vec();
        if body.is_some() && method == reqwest::Method::POST {
            headers.push(("content-type", "application/json"));
        }
        let (s, _, b) = call(&srv, method.clone(), &path, body, &headers).await;
        assert_eq!(
            s,
            StatusCode::NOT_FOUND,
            "{method} {path}: {}",
            String::from_utf8_lossy(&b)
        );
        assert!(!String::from_utf8_lossy(&b).contains("alice's"));
    }
    let (s, _, b) = call(
        &srv,
        reqwest::Method::GET,
        &format!("/sessions/{sid}/files/content?path=secret.txt"),
        None,
        &alice,
    )
    .await;
    assert_eq!((s, b.as_slice()), (StatusCode::OK, &b"alice's"[..]));
}
