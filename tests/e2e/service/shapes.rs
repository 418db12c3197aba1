//! The shapes a client written from seed 003 expects, over real HTTP, WebSocket and MCP on
//! loopback: the artifact list's `items`, the upload's `bytes_received` and `file_count`,
//! `resume` and `resume_from_seq`, the idempotency details, `wss://` stream URLs behind a
//! trusted proxy only, the `error` event, the `start` event within a frame, the command cap,
//! and standard JSON Schema in the MCP tools.

use std::collections::HashMap;
use std::net::IpAddr;

use reqwest::StatusCode;
use reqwest::header::{HeaderName, HeaderValue};
use serde_json::{Value, json};

use super::common::*;

// ---- 1. the artifact list ----

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_artifact_list_is_items_of_path_size_and_download_url() {
    let srv = TestServer::start().await;
    let mut body = TestServer::script("mkdir -p out/sub; printf 12345 > out/sub/r.txt");
    body["capture_patterns"] = json!(["out/**"]);
    let (id, _, st) = srv.run(body).await;
    assert_eq!(st["phase"], "completed", "{st}");
    let (s, list) = srv.get(&format!("/runs/{id}/artifacts")).await;
    assert_eq!(s, StatusCode::OK, "{list}");
    let items = list["items"].as_array().expect("items");
    assert_eq!(items.len(), 1, "{list}");
    let item = &items[0];
    assert_eq!(item["path"], "out/sub/r.txt");
    assert_eq!(item["size"], 5);
    let url = item["download_url"].as_str().expect("download_url");
    assert_eq!(url, format!("{BASE}/runs/{id}/artifacts/out/sub/r.txt"));
    // The URL is one a client can GET as it is, on the server it asked.
    let resp = srv
        .client
        .get(format!("http://{}{url}", srv.addr))
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), StatusCode::OK);
    assert_eq!(resp.text().await.unwrap(), "12345");
    // The earlier names stay for a release, the same values.
    assert_eq!(list["artifacts"], list["items"]);
    assert_eq!(item["url"], item["download_url"]);

    // The document says so, the old names deprecated.
    let doc: Value = srv
        .client
        .get(format!("http://{}/openapi.json", srv.addr))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let schemas = &doc["components"]["schemas"];
    let list_props = &schemas["ArtifactList"]["properties"];
    assert!(list_props["items"].is_object(), "{list_props}");
    assert_eq!(list_props["artifacts"]["deprecated"], true, "{list_props}");
    assert!(list_props["items"].get("deprecated").is_none());
    let item_props = &schemas["ArtifactItem"]["properties"];
    assert!(item_props["download_url"].is_object(), "{item_props}");
    assert_eq!(item_props["url"]["deprecated"], true, "{item_props}");
}

// ---- 2. the upload answer ----

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_upload_answers_bytes_received_and_file_count() {
    let srv = TestServer::start().await;
    let sid = srv.session(json!({})).await;
    // Seed 003's example: one main.py as multipart.
    let main = "print(\"Hello from sandbox\")\n";
    let form = reqwest::multipart::Form::new().part(
        "files",
        reqwest::multipart::Part::bytes(main.as_bytes().to_vec()).file_name("main.py"),
    );
    let resp = srv
        .client
        .post(srv.url(&format!("/sessions/{sid}/files")))
        .multipart(form)
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), StatusCode::CREATED);
    let v: Value = resp.json().await.unwrap();
    assert_eq!(v["session_id"], sid.as_str(), "{v}");
    assert_eq!(v["file_count"], 1, "{v}");
    assert_eq!(v["bytes_received"], main.len(), "{v}");

    // An archive: the files' bytes once expanded.
    let tar = tar_of(&[("a/one.txt", b"1234567"), ("two.txt", b"89")]);
    let resp = srv
        .client
        .post(srv.url(&format!("/sessions/{sid}/files")))
        .header("content-type", "application/x-tar")
        .body(tar)
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), StatusCode::CREATED);
    let v: Value = resp.json().await.unwrap();
    assert_eq!(v["file_count"], 2, "{v}");
    assert_eq!(v["bytes_received"], 9, "{v}");
    assert_eq!(v["files"], v["file_count"]);
    assert_eq!(v["bytes"], v["bytes_received"]);
}

// ---- 3. resume and resume_from_seq ----

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn resume_from_seq_of_the_run_request_starts_its_stream() {
    let srv = TestServer::start().await;
    // One write per line: a frame each.
    let script = "for i in $(seq 1 30); do echo $i; done";
    let (id, all, _) = srv.run(TestServer::script(script)).await;
    assert!(all.len() > 10, "{all:?}");
    let mut body = TestServer::script(script);
    body["resume_from_seq"] = json!(7);
    let v = srv.start_run(body).await;
    let resumed = v["run_id"].as_str().unwrap().to_string();
    srv.wait_done(&resumed).await;
    // No `from_seq`: the stream starts where the request said.
    let frames = srv.frames(&resumed, "").await;
    assert_eq!(frames[0]["seq"], 7, "{frames:?}");
    check_stream_rules(&frames);
    assert_eq!(frames, srv.frames(&resumed, "?from_seq=7").await);
    // `from_seq` still wins.
    let from3 = srv.frames(&resumed, "?from_seq=3").await;
    assert_eq!(from3[0]["seq"], 3);
    // The other run did not ask: it starts at 1.
    assert_eq!(srv.frames(&id, "").await[0]["seq"], 1);

    let mut zero = TestServer::script("true");
    zero["resume_from_seq"] = json!(0);
    let (s, _, v) = srv.post("/runs", zero).await;
    assert_eq!(s, StatusCode::BAD_REQUEST, "{v}");
    assert_eq!(v["error"]["code"], "invalid_request");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_resume_note_carries_seq_m_and_lost_count() {
    let srv = TestServer::with(|c| c.ws_ring_bytes = 2000).await;
    let mut body = TestServer::script("for i in $(seq 1 300); do echo $i; done");
    body["resume_from_seq"] = json!(2);
    let v = srv.start_run(body).await;
    let id = v["run_id"].as_str().unwrap().to_string();
    srv.wait_done(&id).await;
    let frames = srv.frames(&id, "").await;
    let note = &frames[0];
    assert_eq!(note["type"], "event");
    assert_eq!(note["event"], "resume", "{note}");
    let m = note["data"]["delivered_from_seq"].as_u64().unwrap();
    assert!(m > 2, "{note}");
    assert_eq!(note["data"]["requested_from_seq"], 2);
    assert_eq!(note["data"]["lost_count"], m - 2);
    assert_eq!(note["seq"], m, "seed 003: the note's seq is m");
    assert_eq!(frames[1]["seq"], m);
    check_stream_rules(&frames);
}

// ---- 4. idempotency details ----

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_conflicting_idempotency_key_is_echoed_with_its_status() {
    let srv = TestServer::start().await;
    for (path, body, other) in [
        (
            "/runs",
            TestServer::one_shot(&["echo", "a"]),
            TestServer::one_shot(&["echo", "b"]),
        ),
        (
            "/sessions",
            json!({ "spec_version": "1.0" }),
            json!({ "spec_version": "1.0", "ttl_sec": 120 }),
        ),
    ] {
        let key = format!("key-for-{}", path.trim_start_matches('/'));
        let h = [("Idempotency-Key", key.as_str())];
        let (s1, _, first) = srv.post_with(path, body.clone(), &h).await;
        assert!(s1.is_success(), "{path}: {first}");
        let prior = first
            .get("run_id")
            .or_else(|| first.get("session_id"))
            .unwrap()
            .clone();
        // A replay is the first answer as it was: no details, no echo.
        let (s2, h2, replay) = srv.post_with(path, body.clone(), &h).await;
        assert_eq!((s2, &replay), (s1, &first), "{path}");
        assert_eq!(h2["idempotent-replayed"], "true");

        let (s, _, v) = srv.post_with(path, other, &h).await;
        assert_eq!(s, StatusCode::CONFLICT, "{path}: {v}");
        let e = &v["error"];
        assert_eq!(e["code"], "idempotency_conflict");
        let d = &e["details"];
        assert_eq!(d["idempotency_key_echo"], key.as_str(), "{path}: {d}");
        assert_eq!(d["idempotency_status"], "conflict", "{path}: {d}");
        assert_eq!(d["key"], key.as_str());
        assert_eq!(d["prior_id"], prior);
        assert!(d["prior_created_at"].as_str().unwrap().ends_with('Z'));
    }
}

// ---- 5. wss:// behind a trusted proxy ----

const BEHIND_TLS: [(&str, &str); 2] = [
    ("x-forwarded-proto", "https"),
    ("x-forwarded-host", "sandbox.example.com"),
];

async fn stream_url_from(srv: &TestServer, client: &reqwest::Client, h: &[(&str, &str)]) -> String {
    let mut req = client
        .post(srv.url("/runs"))
        .json(&TestServer::one_shot(&["true"]));
    for (k, v) in h {
        req = req.header(*k, *v);
    }
    let resp = req.send().await.unwrap();
    assert!(resp.status().is_success(), "{}", resp.status());
    let v: Value = resp.json().await.unwrap();
    v["log_stream_url"].as_str().unwrap().to_string()
}

/// A client whose connections come from `ip` (any address of 127.0.0.0/8 is loopback).
fn client_from(ip: &str) -> reqwest::Client {
    reqwest::Client::builder()
        .local_address(ip.parse::<IpAddr>().unwrap())
        .build()
        .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn forwarding_headers_of_an_untrusted_peer_are_ignored() {
    let srv = TestServer::start().await;
    let plain = format!("ws://{}{BASE}/runs/", srv.addr);
    for h in [
        &BEHIND_TLS[..],
        &[(
            "forwarded",
            "for=192.0.2.1;proto=https;host=sandbox.example.com",
        )][..],
    ] {
        let url = stream_url_from(&srv, &srv.client, h).await;
        assert!(url.starts_with(&plain), "{h:?}: {url}");
    }
    // Trusting another address is not trusting this one.
    let srv = TestServer::with(|c| c.trusted_proxies = vec!["127.0.0.2/32".parse().unwrap()]).await;
    let url = stream_url_from(&srv, &client_from("127.0.0.1"), &BEHIND_TLS).await;
    assert!(
        url.starts_with(&format!("ws://{}{BASE}/runs/", srv.addr)),
        "{url}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_trusted_proxy_makes_stream_urls_wss() {
    let srv = TestServer::with(|c| c.trusted_proxies = vec!["127.0.0.1/32".parse().unwrap()]).await;
    let url = stream_url_from(&srv, &srv.client, &BEHIND_TLS).await;
    assert!(
        url.starts_with(&format!("wss://sandbox.example.com{BASE}/runs/"))
            && url.ends_with("/stream"),
        "{url}"
    );
    // RFC 7239: the element the proxy appended (the last) speaks, and wins over X-Forwarded-*.
    let url = stream_url_from(
        &srv,
        &srv.client,
        &[
            ("forwarded", "for=192.0.2.1;proto=http;host=spoofed.example"),
            (
                "forwarded",
                "for=192.0.2.1;proto=https;host=\"public.example:8443\"",
            ),
            ("x-forwarded-proto", "http"),
        ],
    )
    .await;
    assert!(
        url.starts_with(&format!("wss://public.example:8443{BASE}/runs/")),
        "{url}"
    );
    // The proxy saying plain HTTP, or saying nothing: ws:// on the request's Host.
    for h in [&[("x-forwarded-proto", "http")][..], &[][..]] {
        let url = stream_url_from(&srv, &srv.client, h).await;
        assert!(
            url.starts_with(&format!("ws://{}{BASE}/runs/", srv.addr)),
            "{h:?}: {url}"
        );
    }
    // A background process's stream_url follows the same rule.
    let sid = srv.session(json!({})).await;
    let (s, _, p) = srv
        .post_with(
            &format!("/sessions/{sid}/processes"),
            json!({ "command": "true" }),
            &BEHIND_TLS,
        )
        .await;
    assert_eq!(s, StatusCode::CREATED, "{p}");
    let url = p["stream_url"].as_str().unwrap();
    assert!(
        url.starts_with(&format!(
            "wss://sandbox.example.com{BASE}/sessions/{sid}/processes/"
        )),
        "{url}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn trusted_proxies_are_matched_by_cidr_against_the_peer_address() {
    // 127.0.0.0/31 holds 127.0.0.0 and 127.0.0.1, not 127.0.0.2.
    let srv = TestServer::with(|c| c.trusted_proxies = vec!["127.0.0.0/31".parse().unwrap()]).await;
    let inside = stream_url_from(&srv, &client_from("127.0.0.1"), &BEHIND_TLS).await;
    assert!(inside.starts_with("wss://sandbox.example.com/"), "{inside}");
    let outside = stream_url_from(&srv, &client_from("127.0.0.2"), &BEHIND_TLS).await;
    assert!(
        outside.starts_with(&format!("ws://{}/", srv.addr)),
        "{outside}"
    );
    // The key as operators write it.
    let srv = TestServer::with(|c| {
        let k = wasmsand_server::Config::from_lookup(|k| {
            (k == "SANDBOX_TRUSTED_PROXIES").then(|| "10.9.9.9, 127.0.0.0/8".to_string())
        })
        .unwrap();
        c.trusted_proxies = k.trusted_proxies;
    })
    .await;
    let url = stream_url_from(&srv, &client_from("127.0.0.2"), &BEHIND_TLS).await;
    assert!(url.starts_with("wss://sandbox.example.com/"), "{url}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mcp_sandbox_run_names_a_wss_stream_behind_a_trusted_proxy() {
    use rmcp::ServiceExt;
    use rmcp::transport::StreamableHttpClientTransport;
    use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;

    let srv = TestServer::with(|c| {
        c.mcp_sandbox_run = true;
        c.trusted_proxies = vec!["127.0.0.1/32".parse().unwrap()];
    })
    .await;
    let headers: HashMap<HeaderName, HeaderValue> = BEHIND_TLS
        .iter()
        .map(|(k, v)| (HeaderName::from_static(k), HeaderValue::from_static(v)))
        .collect();
    let config = StreamableHttpClientTransportConfig::with_uri(format!("http://{}/mcp", srv.addr))
        .custom_headers(headers);
    let client =
        ().serve(StreamableHttpClientTransport::from_config(config))
            .await
            .expect("handshake");
    let out = client
        .call_tool(super::mcp::tool(
            "sandbox.run",
            json!({ "base_image": "wasmsand/default", "command": ["true"] }),
        ))
        .await
        .unwrap()
        .structured_content
        .expect("structured result");
    let run_id = out["run_id"].as_str().unwrap();
    assert_eq!(
        out["log_stream_url"],
        format!("wss://sandbox.example.com{BASE}/runs/{run_id}/stream")
    );
    client.cancel().await.unwrap();
}

// ---- 6. the error event ----

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_runtime_failure_sends_an_error_event_before_the_end() {
    let srv = TestServer::start().await;
    let mut body = TestServer::one_shot(&["true"]);
    body["cwd"] = json!("no/such/dir");
    let (_, frames, st) = srv.run(body).await;
    assert_eq!(st["phase"], "failed", "{st}");
    assert_eq!(st["reason_code"], "provision_failed");
    check_stream_rules(&frames);
    let errors: Vec<usize> = (0..frames.len())
        .filter(|&i| frames[i]["event"] == "error")
        .collect();
    assert_eq!(errors.len(), 1, "{frames:?}");
    let at = errors[0];
    let e = &frames[at];
    assert_eq!(e["type"], "event");
    assert_eq!(e["data"]["code"], "provision_failed", "{e}");
    assert_eq!(e["data"]["reason_code"], "provision_failed");
    assert_eq!(e["data"]["phase"], "starting");
    assert_eq!(e["data"]["message"], st["message"]);
    assert!(
        e["data"]["message"]
            .as_str()
            .unwrap()
            .contains("no/such/dir")
    );
    // Then the terminal phase and the end, as for any run.
    assert_eq!(frames[at + 1]["data"]["phase"], "failed");
    assert_eq!(frames[at + 2]["event"], "end");
    assert_eq!(frames.len(), at + 3);

    // The message names the cwd; one that JSON escapes past the frame cap (60 000 quotes,
    // within the command cap) is cut so that the error, phase and end frames still fit
    // (`frames` fails on any frame over 64 KiB).
    let mut body = TestServer::one_shot(&["true"]);
    body["cwd"] = json!("\"".repeat(60_000));
    let (_, frames, st) = srv.run(body).await;
    assert_eq!(st["reason_code"], "provision_failed", "{st}");
    let e = frames.iter().find(|f| f["event"] == "error").unwrap();
    let message = e["data"]["message"].as_str().unwrap();
    assert!(message.len() <= 4096 && message.ends_with('…'), "{message}");

    // A program that fails is no runtime error.
    let (_, frames, st) = srv.run(TestServer::script("exit 3")).await;
    assert_eq!(st["reason_code"], "nonzero_exit");
    assert!(!frames.iter().any(|f| f["event"] == "error"), "{frames:?}");
}

// ---- 7. the start event and the command cap ----

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_long_argv_is_cut_in_the_start_event() {
    let srv = TestServer::start().await;
    // 60 000 quotes: within the command cap, but twice that once JSON escapes them.
    let script = format!(": '{}'; echo ok", "\"".repeat(60_000));
    let argv = ["bash", "-c", script.as_str(), "name", "arg"];
    // `frames` fails on any frame over 64 KiB.
    let (id, frames, st) = srv.run(TestServer::one_shot(&argv)).await;
    assert_eq!(st["phase"], "completed", "{st}");
    assert_eq!(stdout(&frames), "ok\n");
    let start = frames
        .iter()
        .find(|f| f["event"] == "start")
        .expect("a start event");
    let d = &start["data"];
    assert_eq!(d["run_id"], id.as_str());
    assert_eq!(d["command_truncated"], true);
    let total: usize = argv.iter().map(|a| a.len()).sum();
    assert_eq!(d["command_bytes"], total);
    let cmd = d["command"].as_array().unwrap();
    assert_eq!((&cmd[0], &cmd[1]), (&json!("bash"), &json!("-c")));
    assert_eq!(cmd.len(), 3, "the words after the cut one are left out");
    let cut = cmd[2].as_str().unwrap();
    assert!(cut.ends_with('…'));
    assert!(script.starts_with(cut.trim_end_matches('…')));
    assert!(cut.len() > 25_000, "as much as fits is kept: {}", cut.len());
    // The status has the whole command.
    assert_eq!(st["command"], json!(argv));

    // A short one is whole, with no marker.
    let (_, frames, _) = srv.run(TestServer::one_shot(&["echo", "hi"])).await;
    let start = frames.iter().find(|f| f["event"] == "start").unwrap();
    assert_eq!(start["data"]["command"], json!(["echo", "hi"]));
    assert!(start["data"].get("command_truncated").is_none());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_command_over_the_command_cap_is_a_400() {
    let srv = TestServer::start().await;
    const CAP: usize = 64 * 1024;
    // `bash -c SCRIPT` gives the shell SCRIPT itself: exactly the cap runs.
    let at_cap = format!(":{}", " ".repeat(CAP - 1));
    let (_, _, st) = srv
        .run(TestServer::one_shot(&["bash", "-c", &at_cap]))
        .await;
    assert_eq!(st["phase"], "completed", "{st}");

    let over = format!(":{}", " ".repeat(CAP));
    let (s, _, v) = srv
        .post("/runs", TestServer::one_shot(&["bash", "-c", &over]))
        .await;
    assert_eq!(s, StatusCode::BAD_REQUEST, "{v}");
    let e = &v["error"];
    assert_eq!(e["code"], "invalid_request");
    assert_eq!(e["details"]["reason"], "command_too_large", "{e}");
    assert_eq!(e["details"]["field"], "command");
    assert_eq!(e["details"]["limit"], CAP);
    assert_eq!(e["details"]["size"], CAP + 1);

    // The run's env is exported on the same line: it counts.
    let mut with_env = TestServer::one_shot(&["bash", "-c", &at_cap]);
    with_env["env"] = json!({ "A": "b" });
    let (s, _, v) = srv.post("/runs", with_env).await;
    assert_eq!(s, StatusCode::BAD_REQUEST, "{v}");

    // An argv of many words, each quoted: the same cap.
    let words: Vec<String> = (0..20_000).map(|i| format!("w{i}")).collect();
    let mut argv = vec!["echo".to_string()];
    argv.extend(words);
    let (s, _, v) = srv
        .post(
            "/runs",
            json!({ "spec_version": "1.0", "base_image": "wasmsand/default", "command": argv }),
        )
        .await;
    assert_eq!(s, StatusCode::BAD_REQUEST, "{v}");
    assert_eq!(v["error"]["details"]["reason"], "command_too_large");
    // Nothing was queued for the refused ones.
    let (_, runs) = srv.get("/admin/runs?limit=200").await;
    assert_eq!(runs["total"], 1, "{runs}");
}

// ---- 8. the MCP tools' schemas, as clients get them ----

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mcp_tool_schemas_have_standard_formats_only() {
    let srv = TestServer::with(|c| c.mcp_sandbox_run = true).await;
    let client = super::mcp::connect(&srv).await;
    let tools = client.list_all_tools().await.unwrap();
    assert!(tools.len() > 10);
    let standard = [
        "date-time",
        "date",
        "time",
        "duration",
        "email",
        "idn-email",
        "hostname",
        "idn-hostname",
        "ipv4",
        "ipv6",
        "uri",
        "uri-reference",
        "iri",
        "iri-reference",
        "uuid",
        "uri-template",
        "json-pointer",
        "relative-json-pointer",
        "regex",
    ];
    fn formats(v: &Value, out: &mut Vec<String>) {
        match v {
            Value::Object(o) => {
                for (k, v) in o {
                    if k == "format"
                        && let Some(f) = v.as_str()
                    {
                        out.push(f.to_string());
                    }
                    formats(v, out);
                }
            }
            Value::Array(a) => a.iter().for_each(|v| formats(v, out)),
            _ => {}
        }
    }
    let mut minimums = 0;
    for t in &tools {
        let mut found = Vec::new();
        let input = Value::Object((*t.input_schema).clone());
        let output = Value::Object((**t.output_schema.as_ref().unwrap()).clone());
        formats(&input, &mut found);
        formats(&output, &mut found);
        found.retain(|f| !standard.contains(&f.as_str()));
        assert!(found.is_empty(), "{}: {found:?}", t.name);
        minimums += input.to_string().matches("\"minimum\":0").count();
    }
    assert!(minimums > 0, "unsigned arguments keep minimum: 0");
    client.cancel().await.unwrap();
}
