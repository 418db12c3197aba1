//! Artifacts: capture, listing, download with Range, caps and the TTL sweeper.

use reqwest::StatusCode;
use serde_json::{Value, json};

use super::common::*;

const MAKE: &str = "mkdir -p out/sub && printf 'hello artifacts' > out/a.txt && echo '{\"k\":1}' > out/b.json \
    && printf '\\211PNG\\r\\n\\032\\nxxxx' > out/sub/pic && ln -s /etc/passwd out/link && echo no > skip.log";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn artifacts_are_captured_listed_and_downloaded_with_ranges() {
    let srv = TestServer::start().await;
    let mut body = TestServer::script(MAKE);
    body["capture_patterns"] = json!(["out/**"]);
    let (id, _, st) = srv.run(body).await;
    assert_eq!(st["phase"], "completed", "{st}");
    assert_eq!(st["resource_usage"]["artifact_bytes"], 15 + 8 + 12);
    let (s, list) = srv.get(&format!("/runs/{id}/artifacts")).await;
    assert_eq!(s, StatusCode::OK);
    let items = list["artifacts"].as_array().unwrap();
    let summary: Vec<(String, u64, String)> = items
        .iter()
        .map(|a| {
            (
                a["path"].as_str().unwrap().to_string(),
                a["size"].as_u64().unwrap(),
                a["type"].as_str().unwrap().to_string(),
            )
        })
        .collect();
    assert_eq!(
        summary,
        [
            (
                "out/a.txt".to_string(),
                15,
                "text/plain; charset=utf-8".to_string()
            ),
            ("out/b.json".into(), 8, "application/json".into()),
            ("out/link".into(), 0, "inode/symlink".into()),
            ("out/sub/pic".into(), 12, "image/png".into()),
        ]
    );
    assert_eq!(items[2]["kind"], "symlink");
    // Stored at `<data_dir>/<user_id>/runs/<run_id>/artifacts/<path>` (docs/service.md).
    let on_disk = srv
        .dir
        .path()
        .join(format!("default/runs/{id}/artifacts/out/a.txt"));
    assert_eq!(std::fs::read(on_disk).unwrap(), b"hello artifacts");
    assert!(
        !srv.dir
            .path()
            .join(format!("default/runs/{id}/artifacts/out/link"))
            .exists()
    );

    let get = |path: String, range: Option<&'static str>| {
        let srv = &srv;
        async move {
            let mut req = srv.client.get(srv.url(&path));
            if let Some(r) = range {
                req = req.header("range", r);
            }
            let resp = req.send().await.unwrap();
            let s = resp.status();
            let h = resp.headers().clone();
            (s, h, resp.bytes().await.unwrap().to_vec())
        }
    };
    let a = format!("/runs/{id}/artifacts/out/a.txt");
    let (s, h, b) = get(a.clone(), None).await;
    assert_eq!(s, StatusCode::OK);
    assert_eq!(b, b"hello artifacts");
    assert_eq!(h["content-type"], "text/plain; charset=utf-8");
    assert_eq!(h["accept-ranges"], "bytes");
    for (range, want, content_range) in [
        ("bytes=0-4", &b"hello"[..], "bytes 0-4/15"),
        ("bytes=6-", b"artifacts", "bytes 6-14/15"),
        ("bytes=-4", b"acts", "bytes 11-14/15"),
        ("bytes=10-100", b"facts", "bytes 10-14/15"),
    ] {
        let (s, h, b) = get(a.clone(), Some(range)).await;
        assert_eq!(s, StatusCode::PARTIAL_CONTENT, "{range}");
        assert_eq!(b, want, "{range}");
        assert_eq!(h["content-range"], content_range);
    }
    let (s, h, _) = get(a.clone(), Some("bytes=0-1,4-5")).await;
    assert_eq!(s, StatusCode::RANGE_NOT_SATISFIABLE);
    assert_eq!(h["content-range"], "bytes */15");
    let (s, _, _) = get(a.clone(), Some("bytes=15-")).await;
    assert_eq!(s, StatusCode::RANGE_NOT_SATISFIABLE);
    let (s, _, b) = get(a.clone(), Some("items=0-1")).await;
    assert_eq!((s, b.len()), (StatusCode::OK, 15));

    // Text is gzip'd on the fly for clients that accept it; ranges stay identity.
    let resp = srv
        .client
        .get(srv.url(&a))
        .header("accept-encoding", "br, gzip;q=0.8")
        .send()
        .await
        .unwrap();
    assert_eq!(resp.headers()["content-encoding"], "gzip");
    let zipped = resp.bytes().await.unwrap();
    let mut plain = String::new();
    std::io::Read::read_to_string(&mut flate2::read::GzDecoder::new(&zipped[..]), &mut plain)
        .unwrap();
    assert_eq!(plain, "hello artifacts");
    let resp = srv
        .client
        .get(srv.url(&a))
        .header("accept-encoding", "gzip;q=0")
        .send()
        .await
        .unwrap();
    assert!(resp.headers().get("content-encoding").is_none());
    let (s, h, b) = get(format!("/runs/{id}/artifacts/out/sub/pic"), None).await;
    assert_eq!(s, StatusCode::OK);
    assert_eq!(h["content-type"], "image/png");
    assert_eq!(b.len(), 12);
    let (s, h, b) = get(format!("/runs/{id}/artifacts/out/link"), None).await;
    assert_eq!(s, StatusCode::OK);
    assert!(b.is_empty());
    assert_eq!(h["x-artifact-kind"], "symlink");

    for bad in [
        "out/../../../etc/passwd",
        "out/%2e%2e/%2e%2e/x",
        "out/..%2F..%2Fx",
        "%2Fetc%2Fpasswd",
    ] {
        let (s, _, b) = get(format!("/runs/{id}/artifacts/{bad}"), None).await;
        assert!(
            s == StatusCode::BAD_REQUEST || s == StatusCode::NOT_FOUND,
            "{bad}: {s}"
        );
        assert_ne!(b, std::fs::read("/etc/passwd").unwrap_or_default());
    }
    let (s, _, b) = get(format!("/runs/{id}/artifacts/out/..%2Fskip.log"), None).await;
    assert_eq!(
        s,
        StatusCode::BAD_REQUEST,
        "{}",
        String::from_utf8_lossy(&b)
    );
    let (s, _, _) = get(format!("/runs/{id}/artifacts/skip.log"), None).await;
    assert_eq!(s, StatusCode::NOT_FOUND);
    let (s, _, _) = get(format!("/runs/{id}/artifacts/out/nope"), None).await;
    assert_eq!(s, StatusCode::NOT_FOUND);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn artifact_caps_leave_files_out() {
    let srv = TestServer::with(|c| {
        c.max_artifact_bytes_per_run_mb = 1;
        c.max_artifact_bytes_per_user_mb = 2;
    })
    .await;
    let script = "for f in a b; do head -c 700000 /dev/zero > $f.bin; done";
    let mut body = TestServer::script(script);
    body["capture_patterns"] = json!(["*.bin"]);
    let (id, _, st) = srv.run(body.clone()).await;
    assert_eq!(st["phase"], "completed");
    assert_eq!(st["resource_usage"]["artifact_bytes"], 700000);
    assert_eq!(st["artifacts_capped"], true);
    let (_, list) = srv.get(&format!("/runs/{id}/artifacts")).await;
    assert_eq!(list["artifacts"].as_array().unwrap().len(), 1);
    // Per user: two runs of 700 KB fit in 2 MB, the third does not.
    let (_, _, st2) = srv.run(body.clone()).await;
    assert_eq!(st2["resource_usage"]["artifact_bytes"], 700000);
    let (_, _, st3) = srv.run(body).await;
    assert_eq!(st3["resource_usage"]["artifact_bytes"], 0);
    assert_eq!(st3["artifacts_capped"], true);
    let bad = json!({ "spec_version": "1.0", "base_image": "wasmsand/default", "command": ["true"], "capture_patterns": ["../x"] });
    let (s, _, _) = srv.post("/runs", bad).await;
    assert_eq!(s, StatusCode::BAD_REQUEST);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_sweeper_deletes_artifacts_after_their_ttl() {
    let srv = TestServer::with(|c| {
        c.artifact_ttl_sec = Some(3600);
        c.sweep_interval_sec = 1;
    })
    .await;
    let mut body = TestServer::script("echo data > keep.txt");
    body["capture_patterns"] = json!(["keep.txt"]);
    let (id, _, _) = srv.run(body).await;
    let dir = srv.dir.path().join(format!("default/runs/{id}/artifacts"));
    assert!(dir.join("keep.txt").exists());
    srv.app.clock.advance(std::time::Duration::from_secs(3601));
    let started = std::time::Instant::now();
    let list: Value = loop {
        let (_, list) = srv.get(&format!("/runs/{id}/artifacts")).await;
        if list["expired"] == true {
            break list;
        }
        assert!(started.elapsed() < GUARD, "artifacts never expired");
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    };
    assert!(list["artifacts"].as_array().unwrap().is_empty());
    assert!(!dir.exists());
    let resp = srv
        .client
        .get(srv.url(&format!("/runs/{id}/artifacts/keep.txt")))
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), StatusCode::GONE);
}
