//! Hibernated sessions, printed (no assertions): writing a session's checkpoint to the store
//! (its first, all chunks new; then after one small file changed) and waking it (reading and
//! checking the chunks, and opening the sandbox), for a session of 10 000 small files and one
//! of one 100 MB file, on SQLite and on PostgreSQL. The goal: wake ≤ 20 ms for the 10 000
//! files on SQLite.
//!
//! PostgreSQL is a throw-away cluster the benchmark starts (see e2e/sandboxd/cluster/pg.rs).
//! `cargo bench --profile dev -p wasmsand-e2e --bench hibernate`

#[path = "../e2e/sandboxd/cluster/pg.rs"]
mod pg;

use std::time::{Duration, Instant};

use wasmsand::{Limits, Sandbox, SandboxOptions};
use wasmsand_server::hibernate::{Head, read_checkpoint, write_checkpoint};
use wasmsand_server::store::{PostgresStore, SqliteStore, Store};

const MIB: u64 = 1 << 20;

fn options() -> SandboxOptions {
    SandboxOptions {
        limits: Limits {
            fs_bytes: 512 * MIB,
            file_count: 50_000,
            ..Limits::default()
        },
        ..SandboxOptions::default()
    }
}

fn small_files() -> Sandbox {
    let sb = Sandbox::new(options());
    for d in 0..100 {
        sb.run(&format!("mkdir -p /home/user/d{d}")).unwrap();
        for f in 0..100 {
            let text =
                format!("file {d}/{f}: some text of a few dozen bytes, as source files have\n");
            sb.write_file(&format!("/home/user/d{d}/f{f}.txt"), text.as_bytes())
                .unwrap();
        }
    }
    sb
}

fn one_big_file() -> Sandbox {
    let sb = Sandbox::new(options());
    // Incompressible bytes: the worst case for the store.
    let mut x: u64 = 0x9E37_79B9_7F4A_7C15;
    let data: Vec<u8> = (0..100 * MIB)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            (x >> 24) as u8
        })
        .collect();
    sb.write_file("/home/user/big.bin", &data).unwrap();
    sb
}

fn head(id: &str, n: i64) -> Head {
    Head {
        session_id: id.into(),
        user_id: "bench".into(),
        saved_at: n,
        expires_at: i64::MAX,
        meta: serde_json::json!({}),
    }
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1000.0
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(|a, b| a.partial_cmp(b).unwrap());
    v[v.len() / 2]
}

fn measure(store: &dyn Store, label: &str, id: &str, sb: &Sandbox, touch: &str, wakes: usize) {
    let t = Instant::now();
    let payload = sb.export_payload().unwrap();
    let first = write_checkpoint(store, head(id, 1), &payload, None)
        .unwrap()
        .unwrap();
    let hibernate = t.elapsed();
    // One small file changed: the next checkpoint sends the chunks around it only.
    sb.write_file(touch, b"changed\n").unwrap();
    let t = Instant::now();
    let payload = sb.export_payload().unwrap();
    let again = write_checkpoint(store, head(id, 2), &payload, Some(&first.chunks))
        .unwrap()
        .unwrap();
    let rewrite = t.elapsed();
    let mut times = Vec::new();
    for _ in 0..wakes {
        let t = Instant::now();
        let (_, state) = read_checkpoint(store, id).unwrap().unwrap();
        let woken = Sandbox::from_payload(&state.unwrap(), options()).unwrap();
        times.push(ms(t.elapsed()));
        drop(woken);
    }
    println!(
        "  {label:<34} hibernate {:8.1} ms ({} chunks, {:.1} MiB sent)   one file changed {:7.1} ms ({} of {} chunks, {:.2} MiB sent)   wake median {:7.2} ms",
        ms(hibernate),
        first.chunks.len(),
        first.bytes_sent as f64 / MIB as f64,
        ms(rewrite),
        again.new_chunks,
        again.chunks.len(),
        again.bytes_sent as f64 / MIB as f64,
        median(times),
    );
}

fn main() {
    let small = small_files();
    let big = one_big_file();
    println!(
        "sessions: 10 000 small files ({} KiB of state), one 100 MB file",
        small.export_payload().unwrap().len() / 1024
    );
    let dir = tempfile::tempdir().unwrap();
    let sqlite = SqliteStore::open(&dir.path().join("bench.db")).unwrap();
    println!("SQLite:");
    measure(
        &sqlite,
        "10 000 small files",
        "small",
        &small,
        "/home/user/d50/f50.txt",
        50,
    );
    measure(
        &sqlite,
        "one 100 MB file",
        "big",
        &big,
        "/home/user/note.txt",
        5,
    );
    match pg::cluster() {
        Some(pg) => {
            let url = pg.fresh_db("hibernate");
            let store = PostgresStore::connect(&url, "bench", Duration::from_secs(10)).unwrap();
            println!("PostgreSQL:");
            measure(
                &store,
                "10 000 small files",
                "small",
                &small,
                "/home/user/d50/f51.txt",
                50,
            );
            measure(
                &store,
                "one 100 MB file",
                "big",
                &big,
                "/home/user/note2.txt",
                5,
            );
        }
        None => println!("PostgreSQL: skipped (no server)"),
    }
}
