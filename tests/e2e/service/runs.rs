//! Runs: execution, the state machine, timeouts, idempotency, the queue and cancel.

use reqwest::StatusCode;
use serde_json::{Value, json};

use super::common::*;

const SPIN: &str = "while true; do :; done";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_shot_run_reports_the_full_status() {
    let srv = TestServer::start().await;
    // `cat` is a wasm program: the receipt then has a guest memory and CPU time to report.
    let v = srv.start_run(TestServer::script("echo hi | cat")).await;
    let id = v["run_id"].as_str().unwrap().to_string();
    assert_eq!(v["spec_version"], "1.0");
    assert_eq!(v["policy_hash"].as_str().unwrap().len(), 64);
    assert!(
        v["log_stream_url"]
            .as_str()
            .unwrap()
            .ends_with(&format!("/api/v1/sandbox/runs/{id}/stream"))
    );
    assert!(v["log_stream_url"].as_str().unwrap().starts_with("ws://"));
    assert!(matches!(
        v["phase"].as_str().unwrap(),
        "starting" | "queued"
    ));
    let frames = srv.frames(&id, "").await;
    check_stream_rules(&frames);
    assert_eq!(stdout(&frames), "hi\n");
    let st = srv.wait_done(&id).await;
    assert_eq!(st["phase"], "completed");
    assert_eq!(st["exit_code"], 0);
    assert_eq!(st["reason_code"], Value::Null);
    assert_eq!(st["runtime"], "wasm");
    assert!(
        st["runtime_version"]
            .as_str()
            .is_some_and(|v| !v.is_empty())
    );
    assert!(st["image_digest"].as_str().unwrap().starts_with("sha256:"));
    assert_eq!(st["image_digest"].as_str().unwrap().len(), 7 + 64);
    assert_eq!(st["spec_version"], "1.0");
    assert_eq!(st["policy_hash"], v["policy_hash"]);
    let (c, s, r, f) = (
        st["created_at"].as_str().unwrap(),
        st["starting_at"].as_str().unwrap(),
        st["started_at"].as_str().unwrap(),
        st["finished_at"].as_str().unwrap(),
    );
    assert!(c <= s && s <= r && r <= f, "{st}");
    let u = &st["resource_usage"];
    assert_eq!(u["log_bytes"], 3);
    assert_eq!(u["artifact_bytes"], 0);
    assert!(u["wall_time_sec"].as_f64().unwrap() >= 0.0);
    // The sandbox's receipt: the guest's CPU time (not the wall time) and the largest
    // linear memory of the run's programs.
    let cpu = u["cpu_time_sec"].as_f64().unwrap();
    assert!(
        cpu > 0.0 && cpu <= u["wall_time_sec"].as_f64().unwrap() * 2.0 + 0.01,
        "{u}"
    );
    let mb = u["peak_rss_mb"].as_f64().unwrap();
    assert!(mb > 0.0 && mb <= 512.0, "{u}");
    assert_eq!(
        u["limits"],
        json!({ "cpu": 1.0, "memory_mb": 512, "pids": 256, "nofile": 1024, "startup_timeout_sec": 20, "timeout_sec": 60 })
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn argv_is_not_parsed_by_the_shell_and_bash_c_runs_a_script() {
    let srv = TestServer::start().await;
    let (_, frames, st) = srv
        .run(TestServer::one_shot(&[
            "echo",
            "$HOME; echo pwned",
            "it's",
            "*",
            "a  b",
        ]))
        .await;
    assert_eq!(st["phase"], "completed");
    assert_eq!(stdout(&frames), "$HOME; echo pwned it's * a  b\n");
    let (_, frames, st) = srv
        .run(TestServer::one_shot(&[
            "bash",
            "-c",
            "echo \"$1-$2\"; echo $HOME",
            "name",
            "x",
            "y z",
        ]))
        .await;
    assert_eq!(st["phase"], "completed");
    assert_eq!(stdout(&frames), "x-y z\n/home/user\n");
    let (_, frames, st) = srv
        .run(TestServer::one_shot(&[
            "python3",
            "-c",
            "import sys; print(sys.argv[1:])",
            "a b",
            "'c'",
        ]))
        .await;
    assert_eq!(st["phase"], "completed", "{frames:?}");
    assert_eq!(stdout(&frames), "['a b', \"'c'\"]\n");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn nonzero_exit_fails_and_stderr_is_streamed() {
    let srv = TestServer::start().await;
    let (_, frames, st) = srv.run(TestServer::script("echo oops >&2; exit 3")).await;
    assert_eq!(st["phase"], "failed");
    assert_eq!(st["exit_code"], 3);
    assert_eq!(st["reason_code"], "nonzero_exit");
    assert_eq!(
        String::from_utf8(output(&frames, "stderr")).unwrap(),
        "oops\n"
    );
    let end = frames.last().unwrap();
    assert_eq!(end["data"]["exit_code"], 3);
    assert_eq!(end["data"]["phase"], "failed");
    let (_, _, st) = srv.run(TestServer::one_shot(&["no-such-program"])).await;
    assert_eq!(st["phase"], "failed");
    assert_eq!(st["exit_code"], 127);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn env_cwd_and_inline_files_apply_to_the_run() {
    use base64::Engine;
    let b64 = |s: &str| base64::engine::general_purpose::STANDARD.encode(s);
    let srv = TestServer::start().await;
    let (_, frames, st) = srv
        .run(json!({
            "spec_version": "1.0",
            "base_image": "wasmsand/default",
            "command": ["bash", "-c", "cat a.txt; echo $MODE; pwd; cat ../top.txt"],
            "env": { "MODE": "fast lane" },
            "cwd": "src",
            "files": [
                { "path": "src/a.txt", "content": b64("from a\n") },
                { "path": "top.txt", "content": b64("top\n") },
            ],
        }))
        .await;
    assert_eq!(st["phase"], "completed", "{frames:?}");
    assert_eq!(stdout(&frames), "from a\nfast lane\n/home/user/src\ntop\n");

    let (_, _, st) = srv
        .run(json!({
            "spec_version": "1.0", "base_image": "wasmsand/default", "command": ["true"], "cwd": "nowhere",
        }))
        .await;
    assert_eq!(st["phase"], "failed");
    assert_eq!(st["reason_code"], "provision_failed");

    let big = base64::engine::general_purpose::STANDARD.encode(vec![b'x'; 600 * 1024]);
    let (s, _, v) = srv
        .post(
            "/runs",
            json!({
                "spec_version": "1.0", "base_image": "wasmsand/default", "command": ["true"],
                "files": [{ "path": "a", "content": big }, { "path": "b", "content": big }],
            }),
        )
        .await;
    assert_eq!(s, StatusCode::PAYLOAD_TOO_LARGE, "{v}");
    for (path, content) in [
        ("../x", b64("x")),
        ("/etc/x", b64("x")),
        ("ok", "%%%".to_string()),
    ] {
        let (s, _, v) = srv
            .post(
                "/runs",
                json!({
                    "spec_version": "1.0", "base_image": "wasmsand/default", "command": ["true"],
                    "files": [{ "path": path, "content": content }],
                }),
            )
            .await;
        assert_eq!(s, StatusCode::BAD_REQUEST, "{path}: {v}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn per_run_env_and_cwd_do_not_leak_into_the_session() {
    let srv = TestServer::start().await;
    let sid = srv.session(json!({ "env": { "KEEP": "session" } })).await;
    let run = |cmd: Value, extra: Value| {
        let mut body = json!({ "spec_version": "1.0", "session_id": sid, "command": cmd });
        for (k, v) in extra.as_object().unwrap() {
            body[k] = v.clone();
        }
        body
    };
    let (_, _, st) = srv.run(run(json!(["mkdir", "-p", "d"]), json!({}))).await;
    assert_eq!(st["phase"], "completed");
    let (_, frames, _) = srv
        .run(run(
            json!(["bash", "-c", "echo $KEEP $ONLY; pwd"]),
            json!({ "env": { "KEEP": "run", "ONLY": "once" }, "cwd": "d" }),
        ))
        .await;
    assert_eq!(stdout(&frames), "run once\n/home/user/d\n");
    let (_, frames, _) = srv
        .run(run(
            json!(["bash", "-c", "echo \"$KEEP|${ONLY-unset}\"; pwd"]),
            json!({}),
        ))
        .await;
    assert_eq!(stdout(&frames), "session|unset\n/home/user\n");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn resources_are_normalized_and_bounded() {
    let srv = TestServer::start().await;
    let mut body = TestServer::one_shot(&["true"]);
    body["resources"] = json!({ "cpu": 0.75, "memory_mb": 64 });
    let v = srv.start_run(body.clone()).await;
    assert_eq!(v["resources"], json!({ "cpu": 1.0, "memory_mb": 64 }));
    let st = srv.wait_done(v["run_id"].as_str().unwrap()).await;
    assert_eq!(st["resource_usage"]["limits"]["memory_mb"], 64);
    assert_eq!(st["resource_usage"]["limits"]["cpu"], 1.0);
    for bad in [
        json!({ "cpu": 0 }),
        json!({ "cpu": 99 }),
        json!({ "memory_mb": 999999 }),
        json!({ "gpu": 1 }),
    ] {
        body["resources"] = bad.clone();
        let (s, _, v) = srv.post("/runs", body.clone()).await;
        assert_eq!(s, StatusCode::BAD_REQUEST, "{bad}: {v}");
    }
    // The memory cap is the per-program linear memory limit.
    let mut body = TestServer::one_shot(&[
        "python3",
        "-c",
        "x = bytearray(200 * 1024 * 1024); print(len(x))",
    ]);
    body["resources"] = json!({ "memory_mb": 64 });
    let (_, _, st) = srv.run(body).await;
    assert_eq!(st["phase"], "failed", "{st}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn execution_and_startup_timeouts_have_their_reason_codes() {
    let srv = TestServer::start().await;
    let mut body = TestServer::script(SPIN);
    body["timeout_sec"] = json!(1);
    let (_, frames, st) = srv.run(body).await;
    assert_eq!(st["phase"], "timed_out");
    assert_eq!(st["reason_code"], "execution_timeout");
    assert_eq!(
        frames.last().unwrap()["data"]["reason_code"],
        "execution_timeout"
    );

    // A session busy with a long run: waiting for it is queueing, not provisioning, so the
    // next run waits in the queue past its startup timeout and ends with the queue's TTL.
    let sid = srv.session(json!({})).await;
    let long = srv
        .start_run(json!({ "spec_version": "1.0", "session_id": sid, "command": ["bash", "-c", SPIN], "timeout_sec": 600 }))
        .await;
    let long_id = long["run_id"].as_str().unwrap().to_string();
    srv.wait_phase(&long_id, |p| p == "running").await;
    let next = srv
        .start_run(json!({ "spec_version": "1.0", "session_id": sid, "command": ["true"], "startup_timeout_sec": 1 }))
        .await;
    assert_eq!(next["phase"], "queued", "{next}");
    let next_id = next["run_id"].as_str().unwrap().to_string();
    tokio::time::sleep(std::time::Duration::from_millis(1500)).await;
    let (_, st) = srv.get(&format!("/runs/{next_id}")).await;
    assert_eq!(st["phase"], "queued", "{st}");
    // Past the default queue_ttl_sec (120).
    srv.app.clock.advance(std::time::Duration::from_secs(121));
    let st = srv.wait_done(&next_id).await;
    assert_eq!(st["phase"], "failed", "{st}");
    assert_eq!(st["reason_code"], "queue_ttl_expired");
    srv.post(&format!("/runs/{long_id}/cancel"), json!({}))
        .await;
    let st = srv.wait_done(&long_id).await;
    assert_eq!(st["phase"], "killed");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn idempotency_replays_without_rerunning_and_conflicts_on_a_new_body() {
    let srv = TestServer::start().await;
    let sid = srv.session(json!({})).await;
    let key = "77777777-8888-9999-aaaa-bbbbbbbbbbbb";
    let body = json!({ "spec_version": "1.0", "session_id": sid, "command": ["bash", "-c", "echo x >> count"] });
    let (s1, _, first) = srv
        .post_with("/runs", body.clone(), &[("Idempotency-Key", key)])
        .await;
    assert!(s1.is_success(), "{first}");
    let id = first["run_id"].as_str().unwrap().to_string();
    srv.wait_done(&id).await;
    // Same body with keys in another order: the canonical form is the same.
    let reordered: Value = serde_json::from_str(&format!(
        "{{\"command\":[\"bash\",\"-c\",\"echo x >> count\"],\"session_id\":\"{sid}\",\"spec_version\":\"1.0\"}}"
    ))
    .unwrap();
    let (s2, h2, second) = srv
        .post_with("/runs", reordered, &[("Idempotency-Key", key)])
        .await;
    assert_eq!(s2, s1);
    assert_eq!(second, first);
    assert_eq!(h2["idempotent-replayed"], "true");
    let (_, frames, _) = srv
        .run(json!({ "spec_version": "1.0", "session_id": sid, "command": ["cat", "count"] }))
        .await;
    assert_eq!(stdout(&frames), "x\n", "the replay ran the command again");

    let mut changed = body.clone();
    changed["command"] = json!(["bash", "-c", "echo y"]);
    let (s, _, v) = srv
        .post_with("/runs", changed, &[("Idempotency-Key", key)])
        .await;
    assert_eq!(s, StatusCode::CONFLICT);
    assert_eq!(v["error"]["code"], "idempotency_conflict");
    assert_eq!(
        v["error"]["message"],
        "Idempotency-Key replay with different body"
    );
    assert_eq!(v["error"]["details"]["prior_id"], id.as_str());
    assert_eq!(v["error"]["details"]["key"], key);
    assert!(
        v["error"]["details"]["prior_created_at"]
            .as_str()
            .unwrap()
            .ends_with('Z')
    );

    // Keys are scoped per endpoint.
    let (s, _, sess) = srv
        .post_with(
            "/sessions",
            json!({ "spec_version": "1.0" }),
            &[("Idempotency-Key", key)],
        )
        .await;
    assert_eq!(s, StatusCode::CREATED, "{sess}");
    let (s, h, again) = srv
        .post_with(
            "/sessions",
            json!({ "spec_version": "1.0" }),
            &[("Idempotency-Key", key)],
        )
        .await;
    assert_eq!(s, StatusCode::CREATED);
    assert_eq!(again["session_id"], sess["session_id"]);
    assert_eq!(h["idempotent-replayed"], "true");

    let long = "k".repeat(129);
    let (s, _, _) = srv
        .post_with("/runs", body.clone(), &[("Idempotency-Key", &long)])
        .await;
    assert_eq!(s, StatusCode::BAD_REQUEST);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn idempotency_keys_expire_after_their_ttl() {
    let srv = TestServer::with(|c| c.idempotency_ttl_sec = 60).await;
    let key = "expiring";
    let body = TestServer::one_shot(&["true"]);
    let (_, _, a) = srv
        .post_with("/runs", body.clone(), &[("Idempotency-Key", key)])
        .await;
    srv.app.clock.advance(std::time::Duration::from_secs(61));
    let (_, h, b) = srv
        .post_with("/runs", body, &[("Idempotency-Key", key)])
        .await;
    assert_ne!(a["run_id"], b["run_id"]);
    assert!(h.get("idempotent-replayed").is_none());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_full_queue_answers_429_with_retry_after() {
    let srv = TestServer::with(|c| {
        c.max_concurrent_runs = 1;
        c.queue_max_length = 1;
    })
    .await;
    let mut spin = TestServer::script(SPIN);
    spin["timeout_sec"] = json!(600);
    let (s, _, running) = srv.post("/runs", spin.clone()).await;
    assert_eq!(s, StatusCode::OK, "{running}");
    assert_eq!(running["phase"], "starting");
    let (s, _, queued) = srv.post("/runs", spin.clone()).await;
    assert_eq!(s, StatusCode::ACCEPTED, "{queued}");
    assert_eq!(queued["phase"], "queued");
    assert!(
        queued["estimated_start_time"]
            .as_str()
            .unwrap()
            .ends_with('Z')
    );
    let (s, h, v) = srv.post("/runs", spin.clone()).await;
    assert_eq!(s, StatusCode::TOO_MANY_REQUESTS);
    assert_eq!(v["error"]["code"], "rate_limited");
    let retry: u64 = h["retry-after"].to_str().unwrap().parse().unwrap();
    assert!(retry >= 1);

    // Cancelling the queued run ends it at once; the running one after TERM.
    let qid = queued["run_id"].as_str().unwrap();
    let (s, _, c) = srv.post(&format!("/runs/{qid}/cancel"), json!({})).await;
    assert_eq!(s, StatusCode::ACCEPTED, "{c}");
    let st = srv.wait_done(qid).await;
    assert_eq!(st["phase"], "killed");
    assert_eq!(st["message"], "canceled_by_user");
    assert_eq!(st["started_at"], Value::Null);
    let rid = running["run_id"].as_str().unwrap();
    srv.post(&format!("/runs/{rid}/cancel"), json!({})).await;
    assert_eq!(srv.wait_done(rid).await["phase"], "killed");
    // The line has room again.
    let (_, _, st) = srv.run(TestServer::one_shot(&["true"])).await;
    assert_eq!(st["phase"], "completed");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_run_that_waits_past_the_queue_ttl_fails_with_its_reason() {
    let srv = TestServer::with(|c| {
        c.max_concurrent_runs = 1;
        c.queue_ttl_sec = 60;
    })
    .await;
    let mut spin = TestServer::script(SPIN);
    spin["timeout_sec"] = json!(600);
    let running = srv.start_run(spin).await;
    let queued = srv.start_run(TestServer::one_shot(&["true"])).await;
    assert_eq!(queued["phase"], "queued");
    srv.app.clock.advance(std::time::Duration::from_secs(61));
    let qid = queued["run_id"].as_str().unwrap();
    let frames = srv.frames(qid, "").await;
    check_stream_rules(&frames);
    let st = srv.wait_done(qid).await;
    assert_eq!(st["phase"], "failed");
    assert_eq!(st["reason_code"], "queue_ttl_expired");
    let rid = running["run_id"].as_str().unwrap();
    srv.post(&format!("/runs/{rid}/cancel"), json!({})).await;
    srv.wait_done(rid).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cancel_without_a_trap_kills_the_run() {
    let srv = TestServer::start().await;
    let v = srv
        .start_run(TestServer::script("echo started; sleep 60; echo never"))
        .await;
    let id = v["run_id"].as_str().unwrap().to_string();
    let mut ws = srv.connect(&id).await;
    let mut frames = Vec::new();
    read_until(&mut ws, &mut frames, |f| stdout(f).contains("started")).await;
    let (s, _, c) = srv.post(&format!("/runs/{id}/cancel"), json!({})).await;
    assert_eq!(s, StatusCode::ACCEPTED);
    assert_eq!(c["cancel_requested"], true);
    read_until(&mut ws, &mut frames, |_| false).await;
    check_stream_rules(&frames);
    assert!(!stdout(&frames).contains("never"));
    let st = srv.wait_done(&id).await;
    assert_eq!(st["phase"], "killed");
    assert_eq!(st["message"], "canceled_by_user");
    assert_eq!(st["exit_code"], 143);
    assert_eq!(frames.last().unwrap()["data"]["phase"], "killed");
    // Cancelling a finished run is a best-effort confirmation.
    let (s, _, c) = srv.post(&format!("/runs/{id}/cancel"), json!({})).await;
    assert_eq!(s, StatusCode::OK);
    assert_eq!(c["cancel_requested"], false);
    assert_eq!(c["phase"], "killed");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cancel_runs_the_term_trap_during_the_grace_period() {
    let srv = TestServer::start().await;
    let v = srv
        .start_run(TestServer::script(
            "trap 'echo cleaning up; echo done > /tmp/flag; exit 7' TERM; echo ready; while true; do :; done",
        ))
        .await;
    let id = v["run_id"].as_str().unwrap().to_string();
    let mut ws = srv.connect(&id).await;
    let mut frames = Vec::new();
    read_until(&mut ws, &mut frames, |f| stdout(f).contains("ready")).await;
    srv.post(&format!("/runs/{id}/cancel"), json!({})).await;
    read_until(&mut ws, &mut frames, |_| false).await;
    check_stream_rules(&frames);
    assert_eq!(stdout(&frames), "ready\ncleaning up\n");
    let st = srv.wait_done(&id).await;
    assert_eq!(st["phase"], "killed");
    assert_eq!(st["message"], "canceled_by_user");
    assert_eq!(st["exit_code"], 7);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_trap_that_does_not_finish_is_killed_after_the_grace_period() {
    let srv = TestServer::with(|c| c.cancel_grace_seconds = 1).await;
    let v = srv
        .start_run(TestServer::script(
            "trap 'echo trapped; while true; do :; done' TERM; echo ready; while true; do :; done",
        ))
        .await;
    let id = v["run_id"].as_str().unwrap().to_string();
    let mut ws = srv.connect(&id).await;
    let mut frames = Vec::new();
    read_until(&mut ws, &mut frames, |f| stdout(f).contains("ready")).await;
    srv.post(&format!("/runs/{id}/cancel"), json!({})).await;
    read_until(&mut ws, &mut frames, |_| false).await;
    check_stream_rules(&frames);
    assert_eq!(stdout(&frames), "ready\ntrapped\n");
    let st = srv.wait_done(&id).await;
    assert_eq!(st["phase"], "killed");
    assert_eq!(st["message"], "canceled_by_user");
}
