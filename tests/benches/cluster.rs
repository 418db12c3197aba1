//! Replicated deployment figures, printed (no assertions):
//!
//! * one-shot runs per second and run start (P50/P95: `started_at - created_at` of each run,
//!   server clock, queue wait included) with the same closed-loop client load on two
//!   `sandboxd serve` replicas sharing one PostgreSQL, and on one replica with SQLite;
//! * the admin list (`GET /admin/runs`) over 100 000 runs stored directly in PostgreSQL, and
//!   the same runs in SQLite.
//!
//! PostgreSQL is a throw-away cluster the benchmark starts (see e2e/sandboxd/cluster/pg.rs).
//! `cargo bench --profile dev -p wasmsand-e2e --bench cluster [-- RUNS CLIENTS]` (defaults 300
//! and 8; 0 runs measures the admin list only).

#[path = "../e2e/sandboxd/cluster/pg.rs"]
mod pg;
#[allow(dead_code)]
#[path = "../e2e/sandboxd/cluster/replicas.rs"]
mod replicas;

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use replicas::{Replica, run_body};
use serde_json::Value;
use wasmsand_server::store::testsuite::sample_run;
use wasmsand_server::store::{Phase, PostgresStore, SqliteStore};

/// Milliseconds since midnight of an ISO time `YYYY-MM-DDTHH:MM:SS.mmmZ`.
fn ms_of_day(iso: &str) -> i64 {
    let t = &iso[11..23];
    let h: i64 = t[0..2].parse().unwrap();
    let m: i64 = t[3..5].parse().unwrap();
    let s: i64 = t[6..8].parse().unwrap();
    let ms: i64 = t[9..12].parse().unwrap();
    ((h * 60 + m) * 60 + s) * 1000 + ms
}

fn pct(sorted: &[f64], p: f64) -> f64 {
    if sorted.is_empty() {
        return f64::NAN;
    }
    let i = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    sorted[i]
}

/// `clients` loops, each posting a one-shot run to the next replica and polling it to its
/// end, until `total` runs are done. Returns (runs per second, run start ms sorted).
async fn load(targets: &[&Replica], total: usize, clients: usize) -> (f64, Vec<f64>) {
    let c = reqwest::Client::new();
    let next = Arc::new(AtomicUsize::new(0));
    let urls: Vec<String> = targets.iter().map(|r| r.url.clone()).collect();
    let t0 = Instant::now();
    let mut tasks = Vec::new();
    for _ in 0..clients {
        let (c, next, urls) = (c.clone(), next.clone(), urls.clone());
        tasks.push(tokio::spawn(async move {
            let mut starts = Vec::new();
            loop {
                let n = next.fetch_add(1, Ordering::SeqCst);
                if n >= total {
                    break;
                }
                let base = format!("{}{}", urls[n % urls.len()], replicas::BASE);
                let r = c
                    .post(format!("{base}/runs"))
                    .json(&run_body(&["echo", "hi"]))
                    .send()
                    .await
                    .unwrap();
                let status = r.status();
                let v: Value = r.json().await.unwrap();
                assert!(status.is_success(), "{status} {v}");
                let id = v["run_id"].as_str().unwrap().to_string();
                loop {
                    let v: Value = c
                        .get(format!("{base}/runs/{id}"))
                        .send()
                        .await
                        .unwrap()
                        .json()
                        .await
                        .unwrap();
                    if v["finished_at"].is_string() {
                        assert_eq!(v["phase"], "completed", "{v}");
                        let (cr, st) = (v["created_at"].as_str(), v["started_at"].as_str());
                        let mut d = ms_of_day(st.unwrap()) - ms_of_day(cr.unwrap());
                        if d < 0 {
                            d += 86_400_000;
                        }
                        starts.push(d as f64);
                        break;
                    }
                    tokio::time::sleep(Duration::from_millis(5)).await;
                }
            }
            starts
        }));
    }
    let mut starts = Vec::new();
    for t in tasks {
        starts.extend(t.await.unwrap());
    }
    let secs = t0.elapsed().as_secs_f64();
    starts.sort_by(|a, b| a.partial_cmp(b).unwrap());
    (total as f64 / secs, starts)
}

async fn timed_get(c: &reqwest::Client, url: &str, n: usize) -> (Vec<f64>, Value) {
    let mut times = Vec::new();
    let mut last = Value::Null;
    for _ in 0..n {
        let t = Instant::now();
        let r = c.get(url).send().await.unwrap();
        assert!(r.status().is_success(), "{url}: {}", r.status());
        last = r.json().await.unwrap();
        times.push(t.elapsed().as_secs_f64() * 1000.0);
    }
    times.sort_by(|a, b| a.partial_cmp(b).unwrap());
    (times, last)
}

fn main() {
    let args: Vec<usize> = std::env::args()
        .skip(1)
        .filter_map(|a| a.parse().ok())
        .collect();
    let total = args.first().copied().unwrap_or(300);
    let clients = args.get(1).copied().unwrap_or(8);
    let Some(pg) = pg::cluster() else {
        eprintln!("cluster bench skipped: no PostgreSQL server");
        return;
    };
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(async {
        if total > 0 {
        let url = pg.fresh_db("bench");
        let a = Replica::start(&url, &[]);
        let b = Replica::start(&url, &[]);
        let sqlite = Replica::start("sqlite", &[]);
        // Warm-up: the first runs of each process compile and map the tools.
        load(&[&a, &b], 16, 4).await;
        load(&[&sqlite], 16, 4).await;
        println!("one-shot runs (`echo hi`), {total} runs, {clients} closed-loop clients:");
        for (name, targets) in [
            ("2 replicas + PostgreSQL", vec![&a, &b]),
            ("1 replica + SQLite", vec![&sqlite]),
        ] {
            let (rps, starts) = load(&targets, total, clients).await;
            println!(
                "  {name:<24} {rps:7.1} runs/s   run start P50 {:6.1} ms  P95 {:6.1} ms  max {:6.1} ms",
                pct(&starts, 0.5),
                pct(&starts, 0.95),
                pct(&starts, 1.0)
            );
        }
        drop((a, b, sqlite));
        }

        // The admin list over 100 000 runs, stored directly.
        let url = pg.fresh_db("admin");
        let store =
            PostgresStore::connect(&url, "seed", Duration::from_secs(10)).expect("connects");
        let t = Instant::now();
        let phases = [Phase::Completed, Phase::Failed, Phase::Killed, Phase::TimedOut];
        let runs: Vec<_> = (0..100_000i64)
            .map(|i| {
                let mut r = sample_run(&format!("run-{i:06}"), phases[(i % 4) as usize]);
                r.user_id = format!("user{}", i % 50);
                r.created_at = 1_700_000_000_000 + i * 1000;
                r.started_at = Some(r.created_at + 20);
                r.finished_at = Some(r.created_at + 500 + i % 300);
                r.exit_code = Some((i % 4) as i32);
                r.node_id = Some(format!("node-{}", i % 8));
                r.worker_id = Some(format!("worker-{}", i % 16));
                // Text for the `q` filter to find: one run in ten on another image, a
                // message on every run.
                if i % 10 == 0 {
                    r.base_image = "python/3.12-slim".into();
                }
                r.message = Some(format!(
                    "exited with status {} after {} ms",
                    i % 4,
                    500 + i % 300
                ));
                r
            })
            .collect();
        for chunk in runs.chunks(10_000) {
            store.put_runs(chunk).expect("seeds");
        }
        println!(
            "seeded 100000 runs in {:.1} s",
            t.elapsed().as_secs_f64()
        );
        // What autovacuum does on a live database: statistics, and the visibility map that
        // lets the list read ids from its indexes alone.
        pg.psql(&url, "VACUUM ANALYZE");
        drop(store);
        let r = Replica::start(&url, &[]);
        // The same runs in a SQLite file, listed by a replica of its own.
        let dir = tempfile::tempdir().unwrap();
        let db = dir.path().join("admin.db");
        let t = Instant::now();
        let sqlite = SqliteStore::open(&db).expect("opens");
        for chunk in runs.chunks(10_000) {
            sqlite.put_runs(chunk).expect("seeds");
        }
        drop(sqlite);
        println!(
            "seeded 100000 runs into SQLite in {:.1} s",
            t.elapsed().as_secs_f64()
        );
        let s = Replica::start(&format!("sqlite:{}", db.display()), &[]);
        let c = reqwest::Client::new();
        for (name, r) in [("PostgreSQL", &r), ("SQLite", &s)] {
            println!(
                "GET /admin/runs over 100000 runs, {name} (20 requests each, client-observed):"
            );
            for q in [
                "limit=50",
                "limit=200&sort=finished_at:asc",
                "limit=50&offset=50000",
                "limit=50&user_id=user7&phase=failed",
                "limit=50&node_id=node-3",
                "limit=50&started_at_from=2023-11-15T00:00:00Z&started_at_to=2023-11-16T00:00:00Z",
                "limit=50&q=nothing-matches",
                "limit=50&q=PYTHON",
                "limit=50&q=after%20777%20ms",
                "limit=50&q=status%203&sort=finished_at:desc",
                "limit=50&q=py",
            ] {
                let (times, last) = timed_get(&c, &r.api(&format!("/admin/runs?{q}")), 20).await;
                println!(
                    "  {q:<82} P50 {:6.1} ms  P95 {:6.1} ms  max {:6.1} ms  (total {})",
                    pct(&times, 0.5),
                    pct(&times, 0.95),
                    pct(&times, 1.0),
                    last["total"]
                );
            }
        }
    });
}
