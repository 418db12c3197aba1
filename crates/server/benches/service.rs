//! Service figures over real HTTP and WebSocket on loopback, printed (not asserted):
//! run start latency (POST /runs to the first byte of the program's output), log delivery latency (a
//! guest's write to the client's receipt), and one-shot `echo hi` runs per second at
//! concurrency 8 and 64. Run with `cargo bench --profile dev -p wasmsand-server`.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use futures::StreamExt;
use serde_json::{Value, json};
use tokio_tungstenite::tungstenite::Message;
use wasmsand_server::{Config, Server};

const BASE: &str = "/api/v1/sandbox";

fn pct(sorted: &[f64], p: f64) -> f64 {
    let i = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    sorted[i.min(sorted.len() - 1)]
}

fn summary(name: &str, mut ms: Vec<f64>) {
    ms.sort_by(|a, b| a.partial_cmp(b).unwrap());
    println!(
        "{name}: n={} p50={:.2} ms p95={:.2} ms p99={:.2} ms max={:.2} ms",
        ms.len(),
        pct(&ms, 0.50),
        pct(&ms, 0.95),
        pct(&ms, 0.99),
        ms[ms.len() - 1]
    );
}

struct Bench {
    addr: std::net::SocketAddr,
    http: reqwest::Client,
}

impl Bench {
    async fn post_run(&self, body: &Value) -> String {
        let v: Value = self
            .http
            .post(format!("http://{}{BASE}/runs", self.addr))
            .json(body)
            .send()
            .await
            .unwrap()
            .json()
            .await
            .unwrap();
        v["run_id"]
            .as_str()
            .unwrap_or_else(|| panic!("run refused: {v}"))
            .to_string()
    }

    async fn stream(
        &self,
        id: &str,
    ) -> tokio_tungstenite::WebSocketStream<tokio_tungstenite::MaybeTlsStream<tokio::net::TcpStream>>
    {
        let url = format!("ws://{}{BASE}/runs/{id}/stream", self.addr);
        tokio_tungstenite::connect_async(url).await.unwrap().0
    }

    /// One run from POST to its `end` frame.
    async fn run_to_end(&self, body: &Value) {
        let id = self.post_run(body).await;
        let mut ws = self.stream(&id).await;
        while let Some(Ok(m)) = ws.next().await {
            if let Message::Text(t) = m
                && t.contains("\"event\":\"end\"")
            {
                break;
            }
        }
    }
}

fn main() {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(async {
        let dir = std::env::temp_dir().join(format!("wasmsand-bench-{}", std::process::id()));
        // The per-user cap stays on (every admission counts the user's runs, as by default)
        // but at the highest concurrency measured, which its default of 32 would refuse.
        // `WASMSAND_BENCH_STORE=sqlite` measures with `serve`'s default store instead of the
        // library's (memory).
        let store = std::env::var("WASMSAND_BENCH_STORE").unwrap_or_else(|_| "memory".into());
        let config = Config {
            store: wasmsand_server::StoreConfig::parse(&store, &dir).unwrap(),
            data_dir: dir.clone(),
            user_max_concurrent_runs: 64,
            ..Config::default()
        };
        println!("store: {}", config.store.mode());
        let server = Server::bind(config, "127.0.0.1:0").await.unwrap();
        let addr = server.local_addr();
        tokio::spawn(server.serve(std::future::pending()));
        let b = Arc::new(Bench {
            addr,
            http: reqwest::Client::new(),
        });
        let echo = json!({ "spec_version": "1.0", "base_image": "wasmsand/default", "command": ["echo", "hi"] });
        for _ in 0..50 {
            b.run_to_end(&echo).await;
        }

        // Run start latency: POST /runs → the first byte of the program's own output (the
        // first frame is the `starting` phase, sent before the sandbox even exists).
        let mut start = Vec::new();
        for _ in 0..300 {
            let t0 = Instant::now();
            let id = b.post_run(&echo).await;
            let mut ws = b.stream(&id).await;
            let mut first_output = None;
            while let Some(Ok(m)) = ws.next().await {
                match m {
                    Message::Text(t) if first_output.is_none() => {
                        let v: Value = serde_json::from_str(&t).unwrap();
                        if v["type"] == "stdout" {
                            first_output = Some(t0.elapsed());
                        }
                    }
                    Message::Close(_) => break,
                    _ => {}
                }
            }
            let took = first_output.unwrap_or_else(|| panic!("run {id} printed nothing"));
            start.push(took.as_secs_f64() * 1000.0);
        }
        summary(
            "run start latency (POST /runs -> first byte of the program's output)",
            start,
        );

        // Log delivery: the guest prints the wall clock; the client compares on receipt.
        let script = "import time\nfor i in range(400):\n    print(time.time_ns(), flush=True)\n    time.sleep(0.005)";
        let py = json!({ "spec_version": "1.0", "base_image": "wasmsand/default", "command": ["python3", "-c", script] });
        b.run_to_end(&json!({ "spec_version": "1.0", "base_image": "wasmsand/default", "command": ["python3", "-c", "pass"] })).await;
        let id = b.post_run(&py).await;
        let mut ws = b.stream(&id).await;
        let mut delivery = Vec::new();
        while let Some(Ok(m)) = ws.next().await {
            let Message::Text(t) = m else { continue };
            let now = SystemTime::now().duration_since(UNIX_EPOCH).unwrap().as_nanos() as f64;
            let v: Value = serde_json::from_str(&t).unwrap();
            if v["type"] == "stdout" {
                for line in v["data"].as_str().unwrap().lines() {
                    if let Ok(sent) = line.trim().parse::<f64>() {
                        delivery.push((now - sent) / 1e6);
                    }
                }
            }
            if v["event"] == "end" {
                break;
            }
        }
        summary("log delivery latency (guest write -> client receipt)", delivery);

        // Throughput of one-shot runs, each followed to its `end` frame.
        for conc in [8usize, 64] {
            let done = Arc::new(AtomicU64::new(0));
            let stop_at = Instant::now() + Duration::from_secs(5);
            let t0 = Instant::now();
            let mut tasks = Vec::new();
            for _ in 0..conc {
                let b = b.clone();
                let done = done.clone();
                let echo = echo.clone();
                tasks.push(tokio::spawn(async move {
                    while Instant::now() < stop_at {
                        b.run_to_end(&echo).await;
                        done.fetch_add(1, Ordering::Relaxed);
                    }
                }));
            }
            for t in tasks {
                t.await.unwrap();
            }
            let n = done.load(Ordering::Relaxed);
            println!(
                "one-shot `echo hi` runs/s at concurrency {conc}: {:.0} ({n} runs in {:.2} s)",
                n as f64 / t0.elapsed().as_secs_f64(),
                t0.elapsed().as_secs_f64()
            );
        }
        let _ = std::fs::remove_dir_all(dir);
    });
}
