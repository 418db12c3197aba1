//! The compiled-module cache: memory hits, disk hits across `Exec` instances, corrupt entries
//! recompiled, concurrent loads compiled once.

use std::sync::Arc;
use std::thread;

use wasmsand_exec::{Exec, ExecOptions};

fn wasm() -> &'static [u8] {
    wasmsand_tools::wasm_for_tool("spin").unwrap()
}

fn exec_at(dir: &std::path::Path) -> Exec {
    Exec::new(ExecOptions {
        cache_dir: Some(dir.to_path_buf()),
        no_disk_cache: false,
    })
}

#[test]
fn memory_then_disk_hits() {
    let dir = tempfile::tempdir().unwrap();
    let a = exec_at(dir.path());
    a.load(wasm()).unwrap();
    a.load(wasm()).unwrap();
    let s = a.cache_stats();
    assert_eq!((s.compiles, s.memory_hits, s.disk_hits), (1, 1, 0));
    let entries: Vec<_> = std::fs::read_dir(dir.path()).unwrap().flatten().collect();
    assert_eq!(entries.len(), 1, "one entry, no temp files left");
    assert!(entries[0].file_name().to_string_lossy().ends_with(".cwasm"));

    let b = exec_at(dir.path());
    b.load(wasm()).unwrap();
    let s = b.cache_stats();
    assert_eq!((s.compiles, s.disk_hits), (0, 1));
}

#[test]
fn corrupt_or_truncated_entries_are_recompiled_never_fatal() {
    let dir = tempfile::tempdir().unwrap();
    exec_at(dir.path()).load(wasm()).unwrap();
    let entry = std::fs::read_dir(dir.path())
        .unwrap()
        .next()
        .unwrap()
        .unwrap()
        .path();
    let good = std::fs::read(&entry).unwrap();

    let mut flipped = good.clone();
    let mid = flipped.len() / 2;
    flipped[mid] ^= 0xff;
    for broken in [
        flipped,
        good[..good.len() / 3].to_vec(),
        b"garbage".to_vec(),
        Vec::new(),
    ] {
        std::fs::write(&entry, &broken).unwrap();
        let e = exec_at(dir.path());
        let program = e.load(wasm()).unwrap();
        let s = e.cache_stats();
        assert_eq!((s.compiles, s.rejected_entries, s.disk_hits), (1, 1, 0));
        assert!(program.exports_function("_start"));
        // The entry was rewritten and is good again.
        let e2 = exec_at(dir.path());
        e2.load(wasm()).unwrap();
        assert_eq!(e2.cache_stats().disk_hits, 1);
    }
}

#[test]
fn concurrent_loads_of_one_module_compile_once() {
    let dir = tempfile::tempdir().unwrap();
    let e = Arc::new(exec_at(dir.path()));
    let threads: Vec<_> = (0..4)
        .map(|_| {
            let e = e.clone();
            thread::spawn(move || e.load(wasm()).unwrap())
        })
        .collect();
    for t in threads {
        t.join().unwrap();
    }
    assert_eq!(e.cache_stats().compiles, 1);
}

#[test]
fn invalid_wasm_is_a_clear_error() {
    let e = Exec::new(ExecOptions {
        cache_dir: None,
        no_disk_cache: true,
    });
    let err = e.load(b"\0asm\x01\0\0\0garbage").unwrap_err();
    assert!(
        err.to_string().starts_with("cannot compile the program"),
        "{err}"
    );
}
