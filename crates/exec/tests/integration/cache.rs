//! The compiled-module cache: memory hits, disk hits across `Exec` instances, corrupt entries
//! recompiled, concurrent loads compiled once.

use std::sync::Arc;
use std::thread;

use wasmsand_exec::{Exec, ExecOptions};

fn wasm() -> &'static [u8] {
    wasmsand_guests::wasm_for_command("spin").unwrap()
}

/// Puts `bytes` at `path` the way any writer of the cache must: aside, then renamed over it.
/// Entries are mapped by the processes using them (like shared libraries), so rewriting one in
/// place under a running process is not a corruption the cache can survive: that process would
/// fault on its vanished pages.
fn replace_file(path: &std::path::Path, bytes: &[u8]) {
    let tmp = path.with_extension("replacing");
    std::fs::write(&tmp, bytes).unwrap();
    std::fs::rename(&tmp, path).unwrap();
}

/// The cache entries in `dir` (not the `verified/` memos), sorted.
fn entries_in(dir: &std::path::Path) -> Vec<std::path::PathBuf> {
    let mut entries: Vec<_> = std::fs::read_dir(dir)
        .unwrap()
        .flatten()
        .filter(|e| e.file_type().unwrap().is_file())
        .map(|e| e.path())
        .collect();
    entries.sort();
    entries
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
    let entries: Vec<_> = std::fs::read_dir(dir.path())
        .unwrap()
        .flatten()
        .filter(|e| e.file_type().unwrap().is_file())
        .collect();
    assert_eq!(entries.len(), 1, "one entry, no temp files left");
    assert!(entries[0].file_name().to_string_lossy().ends_with(".cwasm"));

    let b = exec_at(dir.path());
    b.load(wasm()).unwrap();
    let s = b.cache_stats();
    assert_eq!((s.compiles, s.disk_hits), (0, 1));
}

// Threat: T-CACHE-POISON (docs/security.md)
#[test]
fn corrupt_or_truncated_entries_are_recompiled_never_fatal() {
    let dir = tempfile::tempdir().unwrap();
    exec_at(dir.path()).load(wasm()).unwrap();
    let entry = entries_in(dir.path()).remove(0);
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
        replace_file(&entry, &broken);
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

// Threat: T-CACHE-POISON (docs/security.md)
#[test]
fn an_entry_of_another_module_is_rejected_never_run() {
    let dir = tempfile::tempdir().unwrap();
    let other = wasmsand_guests::wasm_for_command("alloc").unwrap();
    exec_at(dir.path()).load(wasm()).unwrap();
    exec_at(dir.path()).load(other).unwrap();
    let entries = entries_in(dir.path());
    assert_eq!(entries.len(), 2);
    // Put each module's entry under the other's name: a valid, checksummed entry, but foreign.
    let (a, b) = (
        std::fs::read(&entries[0]).unwrap(),
        std::fs::read(&entries[1]).unwrap(),
    );
    replace_file(&entries[0], &b);
    replace_file(&entries[1], &a);
    let e = exec_at(dir.path());
    let spin = e.load(wasm()).unwrap();
    let alloc = e.load(other).unwrap();
    let s = e.cache_stats();
    assert_eq!((s.rejected_entries, s.compiles, s.disk_hits), (2, 2, 0));
    assert_ne!(spin.hash(), alloc.hash());
}

/// Run as a child by `two_processes_filling_the_cache_at_once_leave_it_sound`.
#[test]
fn cache_fill_child() {
    let Some(dir) = std::env::var_os("WASMSAND_CACHE_FILL_DIR") else {
        return;
    };
    let e = exec_at(std::path::Path::new(&dir));
    e.load(wasm()).unwrap();
    e.load(wasmsand_guests::wasm_for_command("alloc").unwrap())
        .unwrap();
}

// Threat: T-CACHE-POISON (docs/security.md)
#[test]
fn two_processes_filling_the_cache_at_once_leave_it_sound() {
    let dir = tempfile::tempdir().unwrap();
    for round in 0..3 {
        let children: Vec<_> = (0..2)
            .map(|_| {
                std::process::Command::new(std::env::current_exe().unwrap())
                    .args(["--exact", "cache::cache_fill_child", "--test-threads=1"])
                    .env("WASMSAND_CACHE_FILL_DIR", dir.path())
                    .spawn()
                    .unwrap()
            })
            .collect();
        for mut child in children {
            assert!(child.wait().unwrap().success(), "round {round}");
        }
        // Every entry a fresh process finds is whole and its own: all disk hits.
        let e = exec_at(dir.path());
        e.load(wasm()).unwrap();
        e.load(wasmsand_guests::wasm_for_command("alloc").unwrap())
            .unwrap();
        let s = e.cache_stats();
        assert_eq!(
            (s.disk_hits, s.compiles, s.rejected_entries),
            (2, 0, 0),
            "round {round}"
        );
        let names: Vec<_> = entries_in(dir.path())
            .iter()
            .map(|p| p.file_name().unwrap().to_string_lossy().into_owned())
            .collect();
        assert!(
            names.iter().all(|n| n.ends_with(".cwasm")),
            "temp files left: {names:?}"
        );
        assert_eq!(names.len(), 2);
        if round == 1 {
            // The next round races to replace entries that exist but are broken.
            for n in &names {
                replace_file(&dir.path().join(n), b"truncated");
            }
        }
    }
}

fn jq() -> &'static [u8] {
    wasmsand_guests::wasm_for_command("jq").unwrap()
}

/// Registers jq's capture as the sandbox does, keepable on disk.
fn register_jq() {
    let digest = wasmsand_guests::sha256(wasmsand_guests::file_for_command("jq").unwrap()).unwrap();
    wasmsand_exec::register_preinit(
        digest,
        wasmsand_exec::Preinit {
            spec: Box::new(|| wasmsand_exec::RunSpec::new(super::common::vfs(), ["jq"])),
            alloc: "host_alloc".into(),
            entry: "wasmsand_jq_preinit".into(),
            input: Vec::new(),
            run: Some("wasmsand_jq_main".into()),
            depends: Some(b"test".to_vec()),
        },
    );
}

fn run_jq(e: &Exec, program: &wasmsand_exec::Program) -> String {
    let out = wasmsand_exec::OutputBuffer::new(1 << 16);
    let mut spec = wasmsand_exec::RunSpec::new(super::common::vfs(), ["jq", "-n", "[1,2,3] | add"]);
    spec.stdout = out.clone().into();
    let outcome = e.run(program, spec).unwrap();
    assert_eq!(outcome.exit, wasmsand_exec::Exit::Code(0));
    String::from_utf8(out.snapshot().as_bytes().to_vec()).unwrap()
}

fn saved_memories(dir: &std::path::Path) -> Vec<std::path::PathBuf> {
    entries_in(dir)
        .into_iter()
        .filter(|p| p.extension().is_some_and(|x| x == "memory"))
        .collect()
}

/// A capture is kept beside the module: the next process starts from it before its first
/// run instead of capturing again.
#[test]
fn a_captured_memory_is_kept_for_later_processes() {
    register_jq();
    let dir = tempfile::tempdir().unwrap();
    let a = exec_at(dir.path());
    let first = a.load(jq()).unwrap();
    assert!(!first.is_preinitialized());
    assert!(a.preinitialize(&first));
    assert_eq!(saved_memories(dir.path()).len(), 1);
    assert_eq!(run_jq(&a, &first), "6\n");

    let b = exec_at(dir.path());
    let later = b.load(jq()).unwrap();
    assert!(
        later.is_preinitialized(),
        "started from the saved memory at once"
    );
    assert_eq!(run_jq(&b, &later), "6\n");
    assert_eq!(b.cache_stats().rejected_entries, 0);
}

// Threat: T-CACHE-POISON (docs/security.md)
#[test]
fn a_broken_saved_memory_is_captured_again_never_used() {
    register_jq();
    let dir = tempfile::tempdir().unwrap();
    let a = exec_at(dir.path());
    assert!(a.preinitialize(&a.load(jq()).unwrap()));
    let saved = saved_memories(dir.path()).remove(0);
    let good = std::fs::read(&saved).unwrap();
    let mut flipped = good.clone();
    let page = good.iter().position(|b| *b != 0).unwrap();
    flipped[page] ^= 0x55;
    for broken in [
        flipped,
        good[..good.len() - 1].to_vec(),
        b"garbage".to_vec(),
    ] {
        replace_file(&saved, &broken);
        let e = exec_at(dir.path());
        let program = e.load(jq()).unwrap();
        assert!(!program.is_preinitialized());
        assert_eq!(e.cache_stats().rejected_entries, 1);
        assert!(e.preinitialize(&program));
        assert_eq!(run_jq(&e, &program), "6\n");
        // Captured again and kept again.
        assert_eq!(std::fs::read(&saved).unwrap(), good);
        assert!(exec_at(dir.path()).load(jq()).unwrap().is_preinitialized());
    }
}
