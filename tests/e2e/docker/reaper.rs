//! The orphan reaper: a service killed without a chance to clean up leaves its containers
//! running; the same instance, started again, removes them before it serves.

use std::process::Stdio;
use std::time::Duration;

use reqwest::StatusCode;
use serde_json::json;
use tokio::io::AsyncBufReadExt;

use super::{enabled, engine_for, engine_host};
use crate::service::common::BASE;

/// `e2e-sandboxd serve` on a free port with the docker runtime on; its base URL.
async fn serve(data: &std::path::Path, instance: &str) -> (tokio::process::Child, String) {
    let mut child = tokio::process::Command::new(env!("CARGO_BIN_EXE_e2e-sandboxd"))
        .args(["serve", "--listen", "127.0.0.1:0", "--store", "memory"])
        .arg("--data-dir")
        .arg(data)
        .env("SANDBOX_DOCKER_HOST", engine_host())
        .env("SANDBOX_DOCKER_INSTANCE", instance)
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    let mut lines = tokio::io::BufReader::new(child.stdout.take().unwrap()).lines();
    let addr = loop {
        let line = lines
            .next_line()
            .await
            .unwrap()
            .expect("sandboxd serve printed its address");
        if let Some(i) = line.find("http://") {
            break line[i..]
                .split_whitespace()
                .next()
                .unwrap()
                .trim_end_matches(BASE)
                .to_string();
        }
    };
    // Keep draining its output so it never blocks on a full pipe.
    tokio::spawn(async move { while let Ok(Some(_)) = lines.next_line().await {} });
    (child, addr)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_restarted_instance_removes_what_its_killed_life_left() {
    if !enabled() {
        return;
    }
    let instance = format!("e2e-reaper-{}", std::process::id());
    let engine = engine_for(&instance);
    let data = tempfile::tempdir().unwrap();
    let (mut child, url) = serve(data.path(), &instance).await;
    let client = reqwest::Client::new();
    for _ in 0..2 {
        let resp = client
            .post(format!("{url}{BASE}/sessions"))
            .json(&json!({ "spec_version": "1.0", "runtime": "docker", "base_image": "debian" }))
            .send()
            .await
            .unwrap();
        assert_eq!(resp.status(), StatusCode::CREATED);
    }
    assert_eq!(engine.containers().await.unwrap().len(), 2);
    child.start_kill().unwrap();
    child.wait().await.unwrap();
    assert_eq!(
        engine.containers().await.unwrap().len(),
        2,
        "SIGKILL cleans nothing up"
    );

    let (mut child, url) = serve(data.path(), &instance).await;
    let mut left = usize::MAX;
    for _ in 0..600 {
        left = engine.containers().await.unwrap().len();
        if left == 0 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert_eq!(left, 0, "the restarted instance reaped its orphans");
    let resp = client
        .get(format!("{url}{BASE}/runtimes"))
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), StatusCode::OK);
    child.start_kill().unwrap();
    child.wait().await.unwrap();
}
