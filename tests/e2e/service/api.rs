//! Discovery, sessions, validation and the error model.

use reqwest::StatusCode;
use serde_json::{Value, json};
use sha2::{Digest, Sha256};

use super::common::*;

fn assert_error(v: &Value, code: &str) {
    assert_eq!(v["error"]["code"], code, "{v}");
    assert!(
        v["error"]["message"]
            .as_str()
            .is_some_and(|m| !m.is_empty()),
        "{v}"
    );
    assert!(v["error"]["details"].is_object(), "{v}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn runtimes_lists_wasm_and_the_unavailable_runtimes() {
    let srv = TestServer::start().await;
    let (s, v) = srv.get("/runtimes").await;
    assert_eq!(s, StatusCode::OK);
    assert_eq!(v["store_mode"], "memory");
    let rts = v["runtimes"].as_array().unwrap();
    let names: Vec<&str> = rts.iter().map(|r| r["name"].as_str().unwrap()).collect();
    assert_eq!(names, ["wasm", "docker", "vm", "firecracker"]);
    let wasm = &rts[0];
    assert_eq!(wasm["available"], true);
    for key in [
        "max_cpu",
        "max_mem_mb",
        "max_log_bytes",
        "max_upload_mb",
        "queue_max_length",
        "queue_ttl_sec",
        "workspace_cap_mb",
        "artifact_ttl_hours",
        "supported_spec_versions",
        "default_images",
        "store_mode",
        "interactive_supported",
        "egress_allowlist_supported",
    ] {
        assert!(!wasm[key].is_null(), "missing {key}: {wasm}");
    }
    assert_eq!(wasm["max_log_bytes"], 10 * 1024 * 1024);
    assert_eq!(wasm["queue_max_length"], 100);
    assert_eq!(wasm["queue_ttl_sec"], 120);
    assert_eq!(wasm["max_upload_mb"], 64);
    assert_eq!(wasm["supported_spec_versions"], json!(["1.0"]));
    let img = wasm["default_images"][0].as_str().unwrap();
    assert!(img.starts_with("wasmsand/default@sha256:"), "{img}");
    assert!(wasm["notes"].as_str().unwrap().contains("hibernate"));
    assert_eq!(wasm["sessions_hibernate"], true);
    assert_eq!(wasm["hibernate_after_sec"], 60);
    for r in &rts[1..] {
        assert_eq!(r["available"], false);
        assert_eq!(r["sessions_hibernate"], false, "{r}");
    }
    let vm = &rts[2];
    assert!(
        vm["notes"]
            .as_str()
            .unwrap()
            .contains("SANDBOX_VM_ENABLED=false"),
        "{vm}"
    );
    let fc = &rts[3];
    assert!(fc["notes"].as_str().unwrap().contains("vm runtime"), "{fc}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn spec_version_is_required_and_validated() {
    let srv = TestServer::start().await;
    for path in ["/sessions", "/runs"] {
        let (s, _, v) = srv.post(path, json!({ "spec_version": "0.9", "command": ["true"], "base_image": "wasmsand/default" })).await;
        assert_eq!(s, StatusCode::BAD_REQUEST);
        assert_error(&v, "invalid_spec_version");
        assert_eq!(v["error"]["message"], "Unsupported spec_version '0.9'");
        assert_eq!(v["error"]["details"]["supported"], json!(["1.0"]));
        assert_eq!(v["error"]["details"]["provided"], "0.9");
        let (s, _, v) = srv.post(path, json!({ "command": ["true"] })).await;
        assert_eq!(s, StatusCode::BAD_REQUEST);
        assert_error(&v, "invalid_request");
        assert_eq!(v["error"]["details"]["supported"], json!(["1.0"]));
        let (s, _, v) = srv.post(path, json!({ "spec_version": 1.0 })).await;
        assert_eq!(s, StatusCode::BAD_REQUEST);
        assert_error(&v, "invalid_spec_version");
    }
    let srv =
        TestServer::with(|c| c.supported_spec_versions = vec!["1.0".into(), "1.1".into()]).await;
    let (s, _, v) = srv
        .post("/sessions", json!({ "spec_version": "1.1" }))
        .await;
    assert_eq!(s, StatusCode::CREATED, "{v}");
    assert_eq!(v["spec_version"], "1.1");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unavailable_runtimes_are_503_with_a_suggestion() {
    let srv = TestServer::start().await;
    for (rt, suggested) in [
        ("docker", json!(["wasm"])),
        ("vm", json!(["wasm", "docker"])),
        ("firecracker", json!(["vm", "wasm"])),
    ] {
        for (path, body) in [
            ("/sessions", json!({ "spec_version": "1.0", "runtime": rt })),
            (
                "/runs",
                json!({ "spec_version": "1.0", "runtime": rt, "base_image": "wasmsand/default", "command": ["true"] }),
            ),
        ] {
            let (s, _, v) = srv.post(path, body).await;
            assert_eq!(s, StatusCode::SERVICE_UNAVAILABLE, "{v}");
            assert_error(&v, "runtime_unavailable");
            assert_eq!(
                v["error"]["message"],
                format!("Requested runtime '{rt}' is not available")
            );
            assert_eq!(v["error"]["details"]["runtime"], rt);
            assert_eq!(v["error"]["details"]["available"], false);
            assert_eq!(v["error"]["details"]["suggested"], suggested, "{v}");
        }
    }
    let (s, _, v) = srv
        .post(
            "/sessions",
            json!({ "spec_version": "1.0", "runtime": "qemu" }),
        )
        .await;
    assert_eq!(s, StatusCode::BAD_REQUEST);
    assert_error(&v, "invalid_request");
    let (s, _, v) = srv
        .post(
            "/sessions",
            json!({ "spec_version": "1.0", "runtime": "wasm" }),
        )
        .await;
    assert_eq!(s, StatusCode::CREATED, "{v}");
    assert_eq!(v["runtime"], "wasm");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn images_unknown_names_are_refused_and_aliases_resolve() {
    let srv = TestServer::with(|c| {
        c.image_aliases
            .insert("python:3.11-slim".into(), "wasmsand/default".into());
    })
    .await;
    let (s, _, v) = srv
        .post(
            "/sessions",
            json!({ "spec_version": "1.0", "base_image": "nosuch:20" }),
        )
        .await;
    assert_eq!(s, StatusCode::BAD_REQUEST);
    assert_error(&v, "invalid_request");
    let known = v["error"]["details"]["known"].as_array().unwrap();
    assert!(known.contains(&json!("wasmsand/default")));
    assert!(known.contains(&json!("python:3.11-slim")));
    assert!(
        v["error"]["message"]
            .as_str()
            .unwrap()
            .contains("wasmsand/default")
    );

    let (_, frames, status) = srv
        .run(json!({
            "spec_version": "1.0",
            "base_image": "python:3.11-slim",
            "command": ["python", "-c", "print('hello')"],
        }))
        .await;
    assert_eq!(status["phase"], "completed", "{status} {frames:?}");
    assert_eq!(stdout(&frames), "hello\n");
    assert_eq!(status["base_image"], "python:3.11-slim");
}

// Threat: T-RPC-ABUSE (docs/security.md)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_bodies_are_4xx_and_the_server_stays_usable() {
    let srv = TestServer::start().await;
    let raw = |body: &'static str, ct: &'static str| {
        let srv = &srv;
        async move {
            let resp = srv
                .client
                .post(srv.url("/runs"))
                .header("content-type", ct)
                .body(body)
                .send()
                .await
                .unwrap();
            let s = resp.status();
            let v: Value = resp.json().await.unwrap();
            (s, v)
        }
    };
    for (body, ct, status) in [
        ("{\"spec_version\": \"1.0\",", "application/json", 400),
        ("[1,2]", "application/json", 400),
        ("", "application/json", 400),
        ("spec_version=1.0", "application/x-www-form-urlencoded", 415),
        (
            "{\"spec_version\":\"1.0\",\"base_image\":\"wasmsand/default\",\"command\":\"echo hi\"}",
            "application/json",
            400,
        ),
        (
            "{\"spec_version\":\"1.0\",\"base_image\":\"wasmsand/default\",\"command\":[\"true\"],\"timeout_sec\":-1}",
            "application/json",
            400,
        ),
        (
            "{\"spec_version\":\"1.0\",\"base_image\":\"wasmsand/default\",\"command\":[\"true\"],\"bogus\":1}",
            "application/json",
            400,
        ),
        (
            "{\"spec_version\":\"1.0\",\"base_image\":\"wasmsand/default\",\"command\":[]}",
            "application/json",
            400,
        ),
        (
            "{\"spec_version\":\"1.0\",\"command\":[\"true\"]}",
            "application/json",
            400,
        ),
        (
            "{\"spec_version\":\"1.0\",\"session_id\":\"x\",\"base_image\":\"wasmsand/default\",\"command\":[\"true\"]}",
            "application/json",
            400,
        ),
        (
            "{\"spec_version\":\"1.0\",\"base_image\":\"wasmsand/default\",\"command\":[\"true\"],\"network_policy\":\"allow_all\"}",
            "application/json",
            400,
        ),
        (
            "{\"spec_version\":\"1.0\",\"base_image\":\"wasmsand/default\",\"command\":[\"true\"],\"env\":{\"1X\":\"v\"}}",
            "application/json",
            400,
        ),
        (
            "{\"spec_version\":\"1.0\",\"base_image\":\"wasmsand/default\",\"command\":[\"true\"],\"interactive\":true,\"stdin_max_bytes\":0}",
            "application/json",
            400,
        ),
    ] {
        let (s, v) = raw(body, ct).await;
        assert_eq!(s.as_u16(), status, "{body}: {v}");
        assert!(v["error"]["code"].is_string(), "{v}");
    }
    let unknown = raw(
        "{\"spec_version\":\"1.0\",\"base_image\":\"wasmsand/default\",\"command\":[\"true\"],\"bogus\":1}",
        "application/json",
    )
    .await;
    assert!(
        unknown.1["error"]["message"]
            .as_str()
            .unwrap()
            .contains("bogus")
    );

    let big = format!(
        "{{\"spec_version\":\"1.0\",\"pad\":\"{}\"}}",
        "x".repeat(3 << 20)
    );
    let resp = srv
        .client
        .post(srv.url("/runs"))
        .header("content-type", "application/json")
        .body(big)
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), StatusCode::PAYLOAD_TOO_LARGE);
    let v: Value = resp.json().await.unwrap();
    assert_error(&v, "invalid_request");

    let (_, frames, status) = srv.run(TestServer::one_shot(&["echo", "still here"])).await;
    assert_eq!(status["phase"], "completed");
    assert_eq!(stdout(&frames), "still here\n");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn errors_are_rfc7807_when_asked_and_unknown_routes_use_the_envelope() {
    let srv = TestServer::start().await;
    let resp = srv
        .client
        .post(srv.url("/sessions"))
        .header("accept", "application/problem+json")
        .json(&json!({ "spec_version": "0.9" }))
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), StatusCode::BAD_REQUEST);
    assert_eq!(
        resp.headers()["content-type"].to_str().unwrap(),
        "application/problem+json"
    );
    let p: Value = resp.json().await.unwrap();
    assert_eq!(p["type"], "invalid_spec_version");
    assert_eq!(p["title"], "Unsupported spec_version '0.9'");
    assert_eq!(p["detail"], "Unsupported spec_version '0.9'");
    assert_eq!(p["status"], 400);
    assert_eq!(p["supported"], json!(["1.0"]));
    assert_eq!(p["provided"], "0.9");

    let (s, v) = srv.get("/nothing/here").await;
    assert_eq!(s, StatusCode::NOT_FOUND);
    assert_error(&v, "not_found");
    let resp = srv
        .client
        .delete(srv.url("/runtimes"))
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), StatusCode::METHOD_NOT_ALLOWED);
    let v: Value = resp.json().await.unwrap();
    assert_error(&v, "invalid_request");
    // A path parameter that does not decode is refused by the framework, in the envelope.
    let resp = srv
        .client
        .get(srv.url("/runs/%FF%FE"))
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), StatusCode::BAD_REQUEST);
    let v: Value = resp.json().await.unwrap();
    assert_error(&v, "invalid_request");
    for path in ["/runs/nope", "/runs/nope/artifacts", "/sessions/nope"] {
        let (s, v) = srv.get(path).await;
        assert_eq!(s, StatusCode::NOT_FOUND, "{path}");
        assert_error(&v, "not_found");
    }
    let (s, _, v) = srv.post("/runs/nope/cancel", json!({})).await;
    assert_eq!(s, StatusCode::NOT_FOUND);
    assert_error(&v, "not_found");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn policy_hash_follows_the_prd_algorithm() {
    let srv = TestServer::start().await;
    // The effective policy of the default configuration, written out independently.
    let canonical = concat!(
        "{\"SANDBOX_ARTIFACT_TTL_HOURS\":24,\"SANDBOX_BACKGROUND_EXECUTION\":true,",
        "\"SANDBOX_CANCEL_GRACE_SECONDS\":5,\"SANDBOX_DEFAULT_EXEC_TIMEOUT_SEC\":60,",
        "\"SANDBOX_DEFAULT_RUNTIME\":\"wasm\",\"SANDBOX_DEFAULT_STARTUP_TIMEOUT_SEC\":20,",
        "\"SANDBOX_DOCKER_APPARMOR_PROFILE\":null,\"SANDBOX_DOCKER_EGRESS_RUNTIME\":null,",
        "\"SANDBOX_DOCKER_EXEC_SCRATCH_MB\":256,",
        "\"SANDBOX_DOCKER_RUNTIME\":\"runc\",\"SANDBOX_DOCKER_SECCOMP\":null,",
        "\"SANDBOX_DOCKER_TMPFS_NOEXEC\":true,",
        "\"SANDBOX_EGRESS_ALLOWLIST\":{\"cidrs\":[],\"hosts\":[],\"ips\":[]},",
        "\"SANDBOX_EGRESS_CA_FILE\":null,",
        "\"SANDBOX_EGRESS_RESOLVE\":{},",
        "\"SANDBOX_ENABLE_EXECUTION\":true,",
        "\"SANDBOX_INTERACTIVE_ENABLED\":true,\"SANDBOX_INTERACTIVE_IDLE_TIMEOUT_SEC\":30,",
        "\"SANDBOX_INTERACTIVE_INPUT_BPS\":65536,\"SANDBOX_INTERACTIVE_MAX_BYTES\":1048576,",
        "\"SANDBOX_INTERACTIVE_MAX_FRAME_BYTES\":65536,\"SANDBOX_INTERACTIVE_SHELLS\":false,",
        "\"SANDBOX_MAX_ARTIFACT_BYTES_PER_RUN_MB\":32,",
        "\"SANDBOX_MAX_ARTIFACT_BYTES_PER_USER_MB\":128,\"SANDBOX_MAX_CPU\":4.0,",
        "\"SANDBOX_MAX_LOG_BYTES\":10485760,\"SANDBOX_MAX_MEM_MB\":8192,",
        "\"SANDBOX_MAX_TIMEOUT_SEC\":3600,",
        "\"SANDBOX_MAX_UPLOAD_MB\":64,\"SANDBOX_NETWORK_DEFAULT\":\"deny_all\",",
        "\"SANDBOX_PIDS_LIMIT\":256,\"SANDBOX_REDACT_PATHS\":false,",
        "\"SANDBOX_SUPPORTED_SPEC_VERSIONS\":[\"1.0\"],",
        "\"SANDBOX_ULIMIT_NOFILE\":1024,\"SANDBOX_ULIMIT_NPROC\":512,",
        "\"SANDBOX_WORKSPACE_CAP_MB\":256}"
    );
    let expected = hex::encode(Sha256::digest(
        format!("tldw.sandbox.policy:v1\n{canonical}").as_bytes(),
    ));
    let (_, _, session) = srv
        .post("/sessions", json!({ "spec_version": "1.0" }))
        .await;
    assert_eq!(session["policy_hash"], expected);
    let run = srv.start_run(TestServer::one_shot(&["true"])).await;
    assert_eq!(run["policy_hash"], expected);
    let status = srv.wait_done(run["run_id"].as_str().unwrap()).await;
    assert_eq!(status["policy_hash"], expected);

    let other = TestServer::with(|c| c.max_log_bytes = 1000).await;
    let (_, _, s2) = other
        .post("/sessions", json!({ "spec_version": "1.0" }))
        .await;
    assert_ne!(s2["policy_hash"], expected);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn session_lifecycle_keeps_its_workspace_until_deleted() {
    let srv = TestServer::start().await;
    let (s, _, v) = srv
        .post(
            "/sessions",
            json!({
                "spec_version": "1.0",
                "env": { "GREETING": "hi" },
                "labels": { "team": "x" },
                "network_policy": "deny_all",
                "resources": { "cpu": 0.5, "memory_mb": 128 },
                "ttl_sec": 600,
            }),
        )
        .await;
    assert_eq!(s, StatusCode::CREATED, "{v}");
    let id = v["session_id"].as_str().unwrap().to_string();
    assert!(v["expires_at"].as_str().unwrap().ends_with('Z'));
    assert_eq!(v["runtime"], "wasm");
    assert_eq!(v["resources"], json!({ "cpu": 1.0, "memory_mb": 128 }));
    assert_eq!(v["labels"]["team"], "x");
    let (s, got) = srv.get(&format!("/sessions/{id}")).await;
    assert_eq!(s, StatusCode::OK);
    assert_eq!(got["session_id"], id);

    let (_, _, st) = srv
        .run(json!({ "spec_version": "1.0", "session_id": id, "command": ["bash", "-c", "echo $GREETING > note.txt"] }))
        .await;
    assert_eq!(st["phase"], "completed", "{st}");
    assert_eq!(st["session_id"], id);
    assert_eq!(st["base_image"], "wasmsand/default");
    assert_eq!(st["resource_usage"]["limits"]["memory_mb"], 128);
    let (_, frames, st) = srv
        .run(json!({ "spec_version": "1.0", "session_id": id, "command": ["cat", "note.txt"] }))
        .await;
    assert_eq!(stdout(&frames), "hi\n", "{st} {frames:?}");

    let resp = srv
        .client
        .delete(srv.url(&format!("/sessions/{id}")))
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), StatusCode::NO_CONTENT);
    let (s, _) = srv.get(&format!("/sessions/{id}")).await;
    assert_eq!(s, StatusCode::NOT_FOUND);
    let resp = srv
        .client
        .delete(srv.url(&format!("/sessions/{id}")))
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), StatusCode::NOT_FOUND);
    let (s, _, v) = srv
        .post(
            "/runs",
            json!({ "spec_version": "1.0", "session_id": id, "command": ["true"] }),
        )
        .await;
    assert_eq!(s, StatusCode::NOT_FOUND);
    assert_error(&v, "not_found");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn expired_sessions_are_reaped() {
    let srv = TestServer::start().await;
    let id = srv.session(json!({ "ttl_sec": 60 })).await;
    let (s, _) = srv.get(&format!("/sessions/{id}")).await;
    assert_eq!(s, StatusCode::OK);
    // Past its TTL on the service's clock, not the wall's: the reaper's next round ends it.
    srv.app.clock.advance(std::time::Duration::from_secs(61));
    let started = std::time::Instant::now();
    loop {
        let (s, _) = srv.get(&format!("/sessions/{id}")).await;
        if s == StatusCode::NOT_FOUND {
            break;
        }
        assert!(started.elapsed() < GUARD, "session never expired");
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
    assert_eq!(srv.app.session_count(), 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn server_caps_and_switches_answer_with_their_codes() {
    let srv = TestServer::with(|c| {
        c.max_sessions = 1;
        c.enable_execution = false;
    })
    .await;
    srv.session(json!({})).await;
    let (s, _, v) = srv
        .post("/sessions", json!({ "spec_version": "1.0" }))
        .await;
    assert_eq!(s, StatusCode::TOO_MANY_REQUESTS);
    assert_error(&v, "quota_exceeded");
    let (s, _, v) = srv.post("/runs", TestServer::one_shot(&["true"])).await;
    assert_eq!(s, StatusCode::FORBIDDEN);
    assert_error(&v, "forbidden");
    assert_eq!(v["error"]["details"]["reason_code"], "policy_denied", "{v}");
}
