//! Docker runtime figures, printed (no assertions): run start, from `POST /runs` to the first
//! byte of the program's own output on the run's WebSocket, for one-shot runs with the warm
//! pool (size 2) and without it (0: a container is created per run); and a one-shot
//! `python -c 'print(1)'` from `POST /runs` to its `end` frame.
//!
//! Needs a Docker engine and the images (`scripts/dockerd.sh start`, `sandboxd images build
//! python`). `cargo bench --profile dev --workspace --bench docker [-- RUNS]` (default 40).

use std::time::{Duration, Instant};

use futures::StreamExt;
use serde_json::{Value, json};
use tokio_tungstenite::tungstenite::Message;
use wasmsand_server::{Config, Server};

const BASE: &str = "/api/v1/sandbox";

fn pct(sorted: &[f64], p: f64) -> f64 {
    let i = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    sorted[i]
}

/// (ms to the first stdout frame, ms to `end`) of one one-shot run.
async fn one_run(client: &reqwest::Client, addr: std::net::SocketAddr) -> (f64, f64) {
    let t0 = Instant::now();
    let v: Value = client
        .post(format!("http://{addr}{BASE}/runs"))
        .json(&json!({
            "spec_version": "1.0", "runtime": "docker", "base_image": "python:3.11-slim",
            "command": ["python", "-c", "print(1)"],
        }))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let id = v["run_id"].as_str().expect("run accepted").to_string();
    let url = format!("ws://{addr}{BASE}/runs/{id}/stream");
    let (mut ws, _) = tokio_tungstenite::connect_async(url).await.unwrap();
    let mut first = None;
    while let Some(Ok(msg)) = ws.next().await {
        let Message::Text(t) = msg else { continue };
        let f: Value = serde_json::from_str(&t).unwrap();
        if f["type"] == "stdout" && first.is_none() {
            first = Some(t0.elapsed().as_secs_f64() * 1000.0);
        }
        if f["event"] == "end" {
            break;
        }
    }
    (
        first.expect("the run printed"),
        t0.elapsed().as_secs_f64() * 1000.0,
    )
}

async fn measure(pool: usize, runs: usize) {
    let dir = tempfile::tempdir().unwrap();
    let mut config = Config {
        data_dir: dir.path().to_path_buf(),
        ..Config::default()
    };
    config.docker.pool_size = pool;
    config.docker.instance = Some(format!("bench-{}-{pool}", std::process::id()));
    let server = Server::bind(config, "127.0.0.1:0").await.unwrap();
    let addr = server.local_addr();
    let app = server.app.clone();
    let (tx, rx) = tokio::sync::oneshot::channel::<()>();
    let handle = tokio::spawn(async move {
        server
            .serve(async move {
                let _ = rx.await;
            })
            .await
            .unwrap();
    });
    let client = reqwest::Client::new();
    // The first run fills the pool (and warms the engine's caches).
    one_run(&client, addr).await;
    let (mut first, mut total) = (Vec::new(), Vec::new());
    for _ in 0..runs {
        if pool > 0 {
            // Closed loop with time for the refill, as under a steady load.
            tokio::time::sleep(Duration::from_millis(400)).await;
        }
        let (f, t) = one_run(&client, addr).await;
        first.push(f);
        total.push(t);
    }
    first.sort_by(f64::total_cmp);
    total.sort_by(f64::total_cmp);
    let label = if pool > 0 {
        "warm (pool 2)"
    } else {
        "cold (pool 0)"
    };
    println!(
        "{label:<14} POST → first output byte: P50 {:.0} ms, P95 {:.0} ms | POST → end: P50 {:.0} ms, P95 {:.0} ms ({runs} runs)",
        pct(&first, 0.5),
        pct(&first, 0.95),
        pct(&total, 0.5),
        pct(&total, 0.95),
    );
    let _ = tx.send(());
    let _ = handle.await;
    drop(app);
}

fn main() {
    let runs = std::env::args()
        .skip(1)
        .find_map(|a| a.parse().ok())
        .unwrap_or(40);
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(async {
        measure(2, runs).await;
        measure(0, runs).await;
    });
}
