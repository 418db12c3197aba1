//! The read-only admin API.

use reqwest::StatusCode;
use serde_json::json;

use super::common::*;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn admin_lists_runs_idempotency_and_usage() {
    let srv = TestServer::start().await;
    let mut ids = Vec::new();
    for (i, script) in ["true", "exit 2", "echo x > a.txt"].iter().enumerate() {
        let mut body = TestServer::script(script);
        body["capture_patterns"] = json!(["a.txt"]);
        let key = format!("admin-{i}");
        let (s, _, v) = srv
            .post_with("/runs", body, &[("Idempotency-Key", &key)])
            .await;
        assert!(s.is_success(), "{v}");
        let id = v["run_id"].as_str().unwrap().to_string();
        srv.wait_done(&id).await;
        ids.push(id);
    }
    let (s, page) = srv
        .get("/admin/runs?limit=2&offset=0&sort=started_at:desc")
        .await;
    assert_eq!(s, StatusCode::OK, "{page}");
    assert_eq!(page["total"], 3);
    assert_eq!(page["limit"], 2);
    assert_eq!(page["has_more"], true);
    let items = page["items"].as_array().unwrap();
    assert_eq!(items[0]["id"], ids[2].as_str());
    assert_eq!(items[1]["id"], ids[1].as_str());
    for key in [
        "user_id",
        "spec_version",
        "runtime",
        "runtime_version",
        "base_image",
        "phase",
        "exit_code",
        "started_at",
        "finished_at",
        "image_digest",
        "policy_hash",
    ] {
        assert!(items[0].get(key).is_some(), "{key}");
    }
    let (_, failed) = srv.get("/admin/runs?phase=failed").await;
    assert_eq!(failed["total"], 1);
    assert_eq!(failed["items"][0]["exit_code"], 2);
    let (_, asc) = srv
        .get("/admin/runs?sort=finished_at:asc&limit=1&offset=2")
        .await;
    assert_eq!(asc["items"][0]["id"], ids[2].as_str());
    assert_eq!(asc["has_more"], false);
    let (_, none) = srv
        .get("/admin/runs?started_at_to=2000-01-01T00:00:00Z")
        .await;
    assert_eq!(none["total"], 0);
    for bad in [
        "?limit=0",
        "?limit=500",
        "?sort=name",
        "?started_at_from=yesterday",
    ] {
        let (s, _) = srv.get(&format!("/admin/runs{bad}")).await;
        assert_eq!(s, StatusCode::BAD_REQUEST, "{bad}");
    }

    let (s, one) = srv.get(&format!("/admin/runs/{}", ids[2])).await;
    assert_eq!(s, StatusCode::OK);
    assert_eq!(one["artifacts"], json!([{ "path": "a.txt", "size": 2 }]));
    assert_eq!(one["resource_usage"]["artifact_bytes"], 2);
    let (s, _) = srv.get("/admin/runs/nope").await;
    assert_eq!(s, StatusCode::NOT_FOUND);

    let (_, idem) = srv.get("/admin/idempotency?endpoint=runs").await;
    let items = idem["items"].as_array().unwrap();
    assert_eq!(items.len(), 3);
    assert_eq!(items[0]["key"], "admin-2");
    assert_eq!(items[0]["object_id"], ids[2].as_str());
    assert_eq!(items[0]["endpoint"], "runs");
    let (_, sess) = srv.get("/admin/idempotency?endpoint=sessions").await;
    assert_eq!(sess["items"].as_array().unwrap().len(), 0);

    let (_, usage) = srv.get("/admin/usage").await;
    assert_eq!(
        usage["items"],
        json!([{ "user_id": "default", "artifact_bytes": 2 }])
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn runs_record_their_node_and_worker_and_the_list_filters_on_them() {
    let srv = TestServer::with(|c| c.node_id = Some("rack7-node3".into())).await;
    let (s, _, v) = srv.post("/runs", TestServer::script("true")).await;
    assert!(s.is_success(), "{v}");
    let id = v["run_id"].as_str().unwrap().to_string();
    srv.wait_done(&id).await;
    let (s, page) = srv.get("/admin/runs?node_id=rack7-node3").await;
    assert_eq!(s, StatusCode::OK, "{page}");
    assert_eq!(page["total"], 1, "{page}");
    let item = &page["items"][0];
    assert_eq!(item["node_id"], "rack7-node3");
    let worker = item["worker_id"].as_str().unwrap().to_string();
    assert!(!worker.is_empty());
    let (_, by_worker) = srv
        .get(&format!(
            "/admin/runs?worker_id={worker}&node_id=rack7-node3"
        ))
        .await;
    assert_eq!(by_worker["total"], 1, "{by_worker}");
    for other in ["node_id=rack7-node4", "worker_id=someone-else"] {
        let (_, none) = srv.get(&format!("/admin/runs?{other}")).await;
        assert_eq!(none["total"], 0, "{other}: {none}");
    }
    let (_, one) = srv.get(&format!("/admin/runs/{id}")).await;
    assert_eq!(one["node_id"], "rack7-node3");
    assert_eq!(one["worker_id"], worker.as_str());
}

/// Run retention and the admin sweeps: `POST /admin/gc` deletes run records past
/// `SANDBOX_RUN_RETENTION_DAYS` with their artifacts, and idempotency entries past their TTL;
/// `DELETE /admin/idempotency` prunes entries by age, so a retried key runs again. (The
/// sweeper's interval is an hour here, so only the admin calls act.)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn gc_deletes_runs_past_their_retention_and_idempotency_can_be_pruned() {
    let srv = TestServer::with(|c| {
        c.run_retention_days = 1;
        c.artifact_ttl_sec = Some(30 * 86_400);
        c.idempotency_ttl_sec = 86_400;
        c.sweep_interval_sec = 3600;
    })
    .await;
    let mut body = TestServer::script("echo kept > out.txt");
    body["capture_patterns"] = json!(["out.txt"]);
    let (s, _, v) = srv
        .post_with("/runs", body.clone(), &[("Idempotency-Key", "old-run")])
        .await;
    assert!(s.is_success(), "{v}");
    let old = v["run_id"].as_str().unwrap().to_string();
    srv.wait_done(&old).await;
    let dir = srv.dir.path().join(format!("default/runs/{old}"));
    assert!(dir.join("artifacts/out.txt").exists());

    let (s, _, gc) = srv.post("/admin/gc", json!({})).await;
    assert_eq!(s, StatusCode::OK, "{gc}");
    assert_eq!(gc["runs_deleted"], 0, "{gc}");
    assert_eq!(gc["idempotency_deleted"], 0, "{gc}");

    srv.app
        .clock
        .advance(std::time::Duration::from_secs(2 * 86_400));
    let (s, _, v) = srv.post("/runs", TestServer::script("true")).await;
    assert!(s.is_success(), "{v}");
    let new = v["run_id"].as_str().unwrap().to_string();
    srv.wait_done(&new).await;
    let (s, _, gc) = srv.post("/admin/gc", json!({})).await;
    assert_eq!(s, StatusCode::OK, "{gc}");
    assert_eq!(gc["runs_deleted"], 1, "{gc}");
    assert_eq!(gc["idempotency_deleted"], 1, "{gc}");
    let (s, v) = srv.get(&format!("/runs/{old}")).await;
    assert_eq!(s, StatusCode::NOT_FOUND, "{v}");
    assert!(!dir.exists(), "the purged run's directory is still there");
    let (s, v) = srv.get(&format!("/runs/{new}")).await;
    assert_eq!(s, StatusCode::OK, "{v}");
    // The audit writer is a task of its own: the event is there soon, not at once.
    let started = std::time::Instant::now();
    loop {
        let (_, audit) = srv.get("/admin/audit?event=sandbox.admin.gc").await;
        if audit["items"].as_array().is_some_and(|a| a.len() == 2) {
            break;
        }
        assert!(
            started.elapsed() < GUARD,
            "no sandbox.admin.gc events: {audit}"
        );
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }

    // Pruning by age: an hour keeps a fresh entry, no age takes it; the key then runs anew.
    let (s, _, v) = srv
        .post_with("/runs", body.clone(), &[("Idempotency-Key", "again")])
        .await;
    assert!(s.is_success(), "{v}");
    let first = v["run_id"].as_str().unwrap().to_string();
    srv.wait_done(&first).await;
    let pruned = |q: &'static str| {
        let srv = &srv;
        async move {
            let resp = srv
                .client
                .delete(srv.url(&format!("/admin/idempotency{q}")))
                .send()
                .await
                .unwrap();
            let s = resp.status();
            (s, resp.json::<serde_json::Value>().await.unwrap())
        }
    };
    let (s, v) = pruned("?older_than_sec=3600").await;
    assert_eq!((s, v["deleted"].clone()), (StatusCode::OK, json!(0)), "{v}");
    let (s, v) = pruned("").await;
    assert_eq!((s, v["deleted"].clone()), (StatusCode::OK, json!(1)), "{v}");
    let (s, v) = pruned("?older_than_sec=soon").await;
    assert_eq!(s, StatusCode::BAD_REQUEST, "{v}");
    let (s, _, v) = srv
        .post_with("/runs", body, &[("Idempotency-Key", "again")])
        .await;
    assert!(s.is_success(), "{v}");
    assert_ne!(
        v["run_id"].as_str().unwrap(),
        first,
        "the pruned key was replayed"
    );
}
