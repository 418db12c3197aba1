//! The admin aggregates over several users: `/admin/usage/summary`, `/admin/usage`, the run
//! list's filters and `/admin/runs/{id}` in full.

use reqwest::{Method, StatusCode};
use serde_json::json;

use super::auth::{
    ALICE_KEY, JWT_SECRET, ROOT_KEY, api_key, auth_server, bearer, call, jwt, wait_done_as,
};
use super::common::*;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn usage_summary_and_run_details_across_users() {
    let srv = auth_server(|_| {}).await;
    let alice = [api_key(ALICE_KEY)];
    let bob = [bearer(&jwt(JWT_SECRET, "bob", None, 600))];
    let root = [api_key(ROOT_KEY)];
    let mut alice_runs = Vec::new();
    for script in ["echo a > r.txt", "exit 1", "echo abc > r.txt"] {
        let mut b = TestServer::script(script);
        b["capture_patterns"] = json!(["r.txt"]);
        let (s, _, v) = call(&srv, Method::POST, &srv.url("/runs"), &alice, Some(b)).await;
        assert!(s.is_success(), "{v}");
        let id = v["run_id"].as_str().unwrap().to_string();
        wait_done_as(&srv, &id, &alice).await;
        alice_runs.push(id);
    }
    let (_, _, v) = call(
        &srv,
        Method::POST,
        &srv.url("/runs"),
        &bob,
        Some(TestServer::script("echo hi")),
    )
    .await;
    let bob_run = v["run_id"].as_str().unwrap().to_string();
    wait_done_as(&srv, &bob_run, &bob).await;

    let get = |path: &str| {
        let url = srv.url(path);
        let srv = &srv;
        let root = root.clone();
        async move {
            let (s, _, v) = call(srv, Method::GET, &url, &root, None).await;
            assert_eq!(s, StatusCode::OK, "{url}: {v}");
            v
        }
    };
    let sum = get("/admin/usage/summary").await;
    assert_eq!(sum["totals"]["runs"], 4, "{sum}");
    assert_eq!(sum["totals"]["completed"], 3);
    assert_eq!(sum["totals"]["failed"], 1);
    assert_eq!(sum["totals"]["artifact_bytes"], 2 + 4);
    assert!(sum["totals"]["log_bytes"].as_u64().unwrap() >= 3);
    assert_eq!(sum["by_runtime"][0]["runtime"], "wasm");
    assert_eq!(sum["by_runtime"][0]["runs"], 4);
    assert_eq!(sum["top_users"][0]["user_id"], "alice");
    assert_eq!(sum["top_users"][0]["runs"], 3);
    assert_eq!(sum["top_users"][1]["user_id"], "bob");
    assert!(sum["window"]["from"].as_str().unwrap() < sum["window"]["to"].as_str().unwrap());
    let one = get("/admin/usage/summary?user_id=bob&limit=1").await;
    assert_eq!(one["totals"]["runs"], 1);
    assert_eq!(one["top_users"].as_array().unwrap().len(), 1);
    let past = get("/admin/usage/summary?from=2000-01-01T00:00:00Z&to=2000-01-02T00:00:00Z").await;
    assert_eq!(past["totals"]["runs"], 0);
    for bad in [
        "?from=yesterday",
        "?from=2020-01-02T00:00:00Z&to=2020-01-01T00:00:00Z",
        "?limit=0",
    ] {
        let (s, _, v) = call(
            &srv,
            Method::GET,
            &srv.url(&format!("/admin/usage/summary{bad}")),
            &root,
            None,
        )
        .await;
        assert_eq!(s, StatusCode::BAD_REQUEST, "{bad}: {v}");
    }

    let usage = get("/admin/usage").await;
    assert_eq!(
        usage["items"][0],
        json!({ "user_id": "alice", "artifact_bytes": 6 })
    );

    // Filters combine; paging reports the total.
    let page = get("/admin/runs?user_id=alice&phase=completed&runtime=wasm&base_image=wasmsand/default&limit=1&sort=started_at:asc").await;
    assert_eq!(page["total"], 2, "{page}");
    assert_eq!(page["has_more"], true);
    assert_eq!(page["items"][0]["id"], alice_runs[0].as_str());
    let digest = page["items"][0]["image_digest"]
        .as_str()
        .unwrap()
        .to_string();
    let by_digest = get(&format!("/admin/runs?image_digest={digest}&limit=200")).await;
    assert_eq!(by_digest["total"], 4);
    let searched = get("/admin/runs?q=nonzero&user_id=alice").await;
    assert_eq!(
        searched["total"], 0,
        "q searches base_image and message: {searched}"
    );
    let searched = get("/admin/runs?q=status%201").await;
    assert_eq!(
        searched["items"][0]["id"],
        alice_runs[1].as_str(),
        "{searched}"
    );

    let full = get(&format!("/admin/runs/{}", alice_runs[2])).await;
    assert_eq!(full["user_id"], "alice");
    assert_eq!(full["artifacts"], json!([{ "path": "r.txt", "size": 4 }]));
    for k in [
        "cpu_time_sec",
        "wall_time_sec",
        "log_bytes",
        "artifact_bytes",
        "limits",
    ] {
        assert!(full["resource_usage"].get(k).is_some(), "{k}: {full}");
    }
    assert_eq!(full["resource_usage"]["limits"]["pids"], 256);
}
