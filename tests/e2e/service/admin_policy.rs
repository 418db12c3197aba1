//! `GET`/`PUT /admin/policies` and `/admin/quotas`: changes without a restart, for new
//! sessions and the next admission only, validated as the configuration is, audited; and path
//! redaction in the admin views when the policy asks for it.

use reqwest::{Method, StatusCode};
use serde_json::{Value, json};

use super::auth::{ALICE_KEY, ROOT_KEY, api_key, auth_server, call};
use super::common::*;

async fn admin_audit(srv: &TestServer, who: &[(&str, String)], query: &str) -> Value {
    let (s, _, page) = call(
        srv,
        Method::GET,
        &srv.url(&format!("/admin/audit?{query}")),
        who,
        None,
    )
    .await;
    assert_eq!(s, StatusCode::OK, "{page}");
    page
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_policy_change_applies_to_new_sessions_and_runs_only() {
    let srv = auth_server(|_| {}).await;
    let alice = [api_key(ALICE_KEY)];
    let root = [api_key(ROOT_KEY)];
    let policies = srv.url("/admin/policies");

    let (s, _, before) = call(&srv, Method::GET, &policies, &root, None).await;
    assert_eq!(s, StatusCode::OK, "{before}");
    let old_hash = before["policy_hash"].as_str().unwrap().to_string();
    assert_eq!(old_hash, srv.app.policy_hash());
    assert_eq!(before["policy"]["SANDBOX_ENABLE_EXECUTION"], true);
    assert_eq!(before["policy"]["SANDBOX_MAX_TIMEOUT_SEC"], 3600);
    assert_eq!(before["policy"]["SANDBOX_REDACT_PATHS"], false);

    // A user may neither read nor change it.
    for (m, body) in [
        (Method::GET, None),
        (
            Method::PUT,
            Some(json!({ "SANDBOX_ENABLE_EXECUTION": false })),
        ),
    ] {
        let (s, _, v) = call(&srv, m.clone(), &policies, &alice, body).await;
        assert_eq!(s, StatusCode::FORBIDDEN, "{m} {v}");
        assert_eq!(v["error"]["code"], "forbidden");
    }
    assert_eq!(srv.app.policy_hash(), old_hash);

    let old_session = session_as(&srv, &alice).await;
    assert_eq!(old_session["policy_hash"], old_hash.as_str());

    let (s, _, after) = call(
        &srv,
        Method::PUT,
        &policies,
        &root,
        Some(json!({ "SANDBOX_ENABLE_EXECUTION": false, "SANDBOX_MAX_TIMEOUT_SEC": "5" })),
    )
    .await;
    assert_eq!(s, StatusCode::OK, "{after}");
    let new_hash = after["policy_hash"].as_str().unwrap().to_string();
    assert_ne!(new_hash, old_hash);
    assert_eq!(after["policy"]["SANDBOX_ENABLE_EXECUTION"], false);
    assert_eq!(after["policy"]["SANDBOX_MAX_TIMEOUT_SEC"], 5);
    let (_, _, now) = call(&srv, Method::GET, &policies, &root, None).await;
    assert_eq!(now, after);

    // The session made before keeps its policy: its runs execute, with its maximum timeout,
    // and report its hash.
    let old_id = old_session["session_id"].as_str().unwrap();
    let (s, _, v) = call(
        &srv,
        Method::GET,
        &srv.url(&format!("/sessions/{old_id}")),
        &alice,
        None,
    )
    .await;
    assert_eq!(s, StatusCode::OK);
    assert_eq!(v["policy_hash"], old_hash.as_str());
    let (s, _, run) = call(
        &srv,
        Method::POST,
        &srv.url("/runs"),
        &alice,
        Some(json!({
            "spec_version": "1.0", "session_id": old_id, "command": ["true"], "timeout_sec": 100,
        })),
    )
    .await;
    assert!(s.is_success(), "{run}");
    assert_eq!(run["policy_hash"], old_hash.as_str());
    assert_eq!(run["timeout_sec"], 100);

    // A session made after gets the new one: no execution.
    let new_session = session_as(&srv, &alice).await;
    assert_eq!(new_session["policy_hash"], new_hash.as_str());
    let (s, _, v) = call(
        &srv,
        Method::POST,
        &srv.url("/runs"),
        &alice,
        Some(json!({
            "spec_version": "1.0", "session_id": new_session["session_id"], "command": ["true"],
        })),
    )
    .await;
    assert_eq!(s, StatusCode::FORBIDDEN, "{v}");
    assert_eq!(v["error"]["details"]["reason"], "execution_disabled");
    let (s, _, v) = call(
        &srv,
        Method::POST,
        &srv.url("/runs"),
        &alice,
        Some(TestServer::one_shot(&["true"])),
    )
    .await;
    assert_eq!(s, StatusCode::FORBIDDEN, "{v}");

    // Bad changes are 400s naming the key, and change nothing, not even their good keys.
    for (body, says) in [
        (
            json!({ "SANDBOX_MAX_TIMEOUT_SEC": "soon" }),
            "SANDBOX_MAX_TIMEOUT_SEC",
        ),
        (
            json!({ "SANDBOX_ENABLE_EXECUTION": true, "SANDBOX_MAX_CPU": 1 }),
            "SANDBOX_MAX_CPU",
        ),
        (
            json!({ "SANDBOX_NETWORK_DEFAULT": "allowlist" }),
            "SANDBOX_EGRESS_ALLOWLIST",
        ),
        (
            json!({ "SANDBOX_EGRESS_ALLOWLIST": { "hosts": ["bad host"] } }),
            "SANDBOX_EGRESS_ALLOWLIST",
        ),
        (
            json!({ "SANDBOX_USER_RUNS_PER_MINUTE": 1 }),
            "SANDBOX_USER_RUNS_PER_MINUTE",
        ),
        (json!({}), "at least one key"),
    ] {
        let (s, _, v) = call(&srv, Method::PUT, &policies, &root, Some(body.clone())).await;
        assert_eq!(s, StatusCode::BAD_REQUEST, "{body}: {v}");
        assert_eq!(v["error"]["code"], "invalid_request", "{v}");
        let msg = v["error"]["message"].as_str().unwrap();
        assert!(msg.contains(says), "{body}: {msg}");
    }
    let (s, _, v) = call(&srv, Method::PUT, &policies, &root, Some(json!([1]))).await;
    assert_eq!(s, StatusCode::BAD_REQUEST, "{v}");
    let (_, _, now) = call(&srv, Method::GET, &policies, &root, None).await;
    assert_eq!(now, after);

    // Execution back on: the session made while it was off keeps it off; a new one-shot run
    // runs, its timeout lowered to the new maximum.
    let (s, _, back) = call(
        &srv,
        Method::PUT,
        &policies,
        &root,
        Some(json!({ "SANDBOX_ENABLE_EXECUTION": true })),
    )
    .await;
    assert_eq!(s, StatusCode::OK, "{back}");
    let (s, _, v) = call(
        &srv,
        Method::POST,
        &srv.url("/runs"),
        &alice,
        Some(json!({
            "spec_version": "1.0", "session_id": new_session["session_id"], "command": ["true"],
        })),
    )
    .await;
    assert_eq!(s, StatusCode::FORBIDDEN, "{v}");
    let mut one_shot = TestServer::one_shot(&["true"]);
    one_shot["timeout_sec"] = json!(100);
    let (s, _, run) = call(
        &srv,
        Method::POST,
        &srv.url("/runs"),
        &alice,
        Some(one_shot),
    )
    .await;
    assert!(s.is_success(), "{run}");
    assert_eq!(run["timeout_sec"], 5);
    assert_eq!(run["policy_hash"], back["policy_hash"]);

    // Each change is on the audit trail, by whom and what moved.
    let page = admin_audit(&srv, &root, "event=sandbox.admin.policy_updated").await;
    assert_eq!(page["total"], 2, "{page}");
    let first = &page["items"][0];
    assert_eq!(first["user_id"], "root");
    assert_eq!(first["policy_hash_before"], old_hash.as_str());
    assert_eq!(first["policy_hash_after"], new_hash.as_str());
    assert_eq!(
        first["changed"],
        json!({
            "SANDBOX_ENABLE_EXECUTION": { "before": true, "after": false },
            "SANDBOX_MAX_TIMEOUT_SEC": { "before": 3600, "after": 5 },
        })
    );
    assert_eq!(
        page["items"][1]["changed"],
        json!({ "SANDBOX_ENABLE_EXECUTION": { "before": false, "after": true } })
    );
}

async fn session_as(srv: &TestServer, who: &[(&str, String)]) -> Value {
    let (s, _, v) = call(
        srv,
        Method::POST,
        &srv.url("/sessions"),
        who,
        Some(json!({ "spec_version": "1.0" })),
    )
    .await;
    assert_eq!(s, StatusCode::CREATED, "{v}");
    v
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_quota_change_applies_to_the_next_admission() {
    let srv = auth_server(|_| {}).await;
    let alice = [api_key(ALICE_KEY)];
    let root = [api_key(ROOT_KEY)];
    let quotas = srv.url("/admin/quotas");
    let runs = srv.url("/runs");
    let hash = srv.app.policy_hash();

    let (s, _, v) = call(&srv, Method::GET, &quotas, &root, None).await;
    assert_eq!(s, StatusCode::OK, "{v}");
    let start = v["quotas"]["SANDBOX_USER_MAX_CONCURRENT_RUNS"].clone();
    assert_eq!(v["quotas"]["SANDBOX_MAX_SESSIONS"], 1000);
    for m in [Method::GET, Method::PUT] {
        let body = (m == Method::PUT).then(|| json!({ "SANDBOX_USER_MAX_CONCURRENT_RUNS": 1 }));
        let (s, _, v) = call(&srv, m.clone(), &quotas, &alice, body).await;
        assert_eq!(s, StatusCode::FORBIDDEN, "{m} {v}");
    }

    let (s, _, long) = call(
        &srv,
        Method::POST,
        &runs,
        &alice,
        Some(TestServer::script("sleep 30")),
    )
    .await;
    assert!(s.is_success(), "{long}");
    let long_id = long["run_id"].as_str().unwrap().to_string();

    let (s, _, v) = call(
        &srv,
        Method::PUT,
        &quotas,
        &root,
        Some(json!({ "SANDBOX_USER_MAX_CONCURRENT_RUNS": 1 })),
    )
    .await;
    assert_eq!(s, StatusCode::OK, "{v}");
    assert_eq!(v["quotas"]["SANDBOX_USER_MAX_CONCURRENT_RUNS"], 1);
    // Quotas are not policy: the hash stays.
    assert_eq!(srv.app.policy_hash(), hash);

    let (s, _, v) = call(
        &srv,
        Method::POST,
        &runs,
        &alice,
        Some(TestServer::script("true")),
    )
    .await;
    assert_eq!(s, StatusCode::TOO_MANY_REQUESTS, "{v}");
    assert_eq!(v["error"]["code"], "quota_exceeded");
    assert_eq!(v["error"]["details"]["quota"], "concurrent_runs");
    assert_eq!(v["error"]["details"]["limit"], 1);
    // The run admitted before goes on.
    let (_, _, st) = call(
        &srv,
        Method::GET,
        &srv.url(&format!("/runs/{long_id}")),
        &alice,
        None,
    )
    .await;
    assert!(
        matches!(
            st["phase"].as_str(),
            Some("queued" | "starting" | "running")
        ),
        "{st}"
    );

    for body in [
        json!({ "SANDBOX_USER_MAX_CONCURRENT_RUNS": -1 }),
        json!({ "SANDBOX_USER_MAX_CONCURRENT_RUNS": 0, "SANDBOX_MAX_TIMEOUT_SEC": 5 }),
    ] {
        let (s, _, v) = call(&srv, Method::PUT, &quotas, &root, Some(body.clone())).await;
        assert_eq!(s, StatusCode::BAD_REQUEST, "{body}: {v}");
    }
    let (_, _, v) = call(&srv, Method::GET, &quotas, &root, None).await;
    assert_eq!(v["quotas"]["SANDBOX_USER_MAX_CONCURRENT_RUNS"], 1);

    let (s, _, v) = call(
        &srv,
        Method::PUT,
        &quotas,
        &root,
        Some(json!({ "SANDBOX_USER_MAX_CONCURRENT_RUNS": "0" })),
    )
    .await;
    assert_eq!(s, StatusCode::OK, "{v}");
    let (s, _, v) = call(
        &srv,
        Method::POST,
        &runs,
        &alice,
        Some(TestServer::script("true")),
    )
    .await;
    assert!(s.is_success(), "{v}");

    let page = admin_audit(&srv, &root, "event=sandbox.admin.quotas_updated").await;
    assert_eq!(page["total"], 2, "{page}");
    assert_eq!(
        page["items"][0]["changed"],
        json!({ "SANDBOX_USER_MAX_CONCURRENT_RUNS": { "before": start, "after": 1 } })
    );
    assert_eq!(page["items"][0]["user_id"], "root");
    let (s, _, _) = call(
        &srv,
        Method::POST,
        &srv.url(&format!("/runs/{long_id}/cancel")),
        &alice,
        None,
    )
    .await;
    assert!(s.is_success());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn paths_are_redacted_in_the_audit_and_admin_views_when_the_policy_asks() {
    let server = TestServer::start().await;
    let srv = &server;
    let policies = srv.url("/admin/policies");
    let put = |on: bool| {
        srv.client
            .put(&policies)
            .json(&json!({ "SANDBOX_REDACT_PATHS": on }))
            .send()
    };
    let captured = || async {
        let mut body = TestServer::script("mkdir -p secret && echo x > secret/plan.txt");
        body["capture_patterns"] = json!(["secret/*"]);
        let run = srv.start_run(body).await;
        let id = run["run_id"].as_str().unwrap().to_string();
        srv.wait_done(&id).await;
        id
    };
    let paths = |v: &Value| -> Vec<String> {
        v["artifacts"]
            .as_array()
            .unwrap_or_else(|| panic!("no artifacts: {v}"))
            .iter()
            .map(|a| a["path"].as_str().unwrap().to_string())
            .collect()
    };
    let ended = |id: String| async move {
        let (s, page) = srv
            .get(&format!(
                "/admin/audit?run_id={id}&event=sandbox.run.completed"
            ))
            .await;
        assert_eq!(s, StatusCode::OK, "{page}");
        page["items"][0].clone()
    };

    // Off (the default): the paths as they are.
    let plain = captured().await;
    let (_, detail) = srv.get(&format!("/admin/runs/{plain}")).await;
    assert_eq!(paths(&detail), ["secret/plan.txt"]);
    assert_eq!(paths(&ended(plain.clone()).await), ["secret/plan.txt"]);

    assert_eq!(put(true).await.unwrap().status(), StatusCode::OK);
    let hidden = captured().await;
    let (_, detail) = srv.get(&format!("/admin/runs/{hidden}")).await;
    let shown = paths(&detail);
    assert_eq!(shown.len(), 1);
    assert!(shown[0].starts_with("redacted:"), "{detail}");
    assert!(!detail.to_string().contains("plan.txt"), "{detail}");
    let event = ended(hidden.clone()).await;
    assert_eq!(paths(&event), shown, "the same path, the same digest");
    assert!(!event.to_string().contains("plan.txt"), "{event}");
    // The admin view of the earlier run is redacted too (it is redacted when read); its
    // audit event was written in clear.
    let (_, detail) = srv.get(&format!("/admin/runs/{plain}")).await;
    assert_eq!(paths(&detail), shown);
    // The owner's own view is not an admin view.
    let (_, own) = srv.get(&format!("/runs/{hidden}/artifacts")).await;
    assert!(own.to_string().contains("secret/plan.txt"), "{own}");

    // Off again: admin views show paths; what was written redacted stays so.
    assert_eq!(put(false).await.unwrap().status(), StatusCode::OK);
    let (_, detail) = srv.get(&format!("/admin/runs/{hidden}")).await;
    assert_eq!(paths(&detail), ["secret/plan.txt"]);
    assert_eq!(paths(&ended(hidden).await), shown);
}
