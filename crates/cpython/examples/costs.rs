//! The one-off costs of CPython: compiling the module cold (into a fresh temporary cache),
//! loading it from the disk cache in a new `Exec`, and the first run.
//! `cargo run -p wasmsand-cpython --example costs [-- --plain]`

use std::time::Instant;

use wasmsand_exec::{Exec, ExecOptions};

fn main() {
    let plain = std::env::args().any(|a| a == "--plain");
    let t = Instant::now();
    let a = wasmsand_cpython::artifacts().unwrap();
    let wasm = if plain { &a.python } else { &a.snapshot };
    println!(
        "map artifacts: {:?} ({} MB wasm)",
        t.elapsed(),
        wasm.len() >> 20
    );
    let dir = std::env::temp_dir().join(format!("wasmsand-costs-{}", std::process::id()));
    let cold = Exec::new(ExecOptions {
        cache_dir: Some(dir.clone()),
        no_disk_cache: false,
    });
    let t = Instant::now();
    cold.load(wasm).unwrap();
    println!("cold compile + write cache entry: {:?}", t.elapsed());
    let size: u64 = std::fs::read_dir(&dir)
        .unwrap()
        .flatten()
        .map(|e| e.metadata().unwrap().len())
        .sum();
    println!("cache entry: {} MB", size >> 20);
    let warm = Exec::new(ExecOptions {
        cache_dir: Some(dir.clone()),
        no_disk_cache: false,
    });
    let t = Instant::now();
    warm.load(wasm).unwrap();
    println!(
        "load from disk cache (hash, read, verify, deserialize): {:?} {:?}",
        t.elapsed(),
        warm.cache_stats()
    );
    let _ = std::fs::remove_dir_all(&dir);
}
