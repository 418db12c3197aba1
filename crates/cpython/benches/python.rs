//! `python3` per run once the module is cached: `print(1)` straight through exec (no prelude,
//! so with CPython's full finalization) for the snapshot and the plain reactor, and through the
//! whole stack (shell, prelude, a fresh instance from the memory captured with numpy imported)
//! for `print(1)` and a numpy import; and what a
//! new process pays to load the module from the disk cache. Whole-process figures (first use on
//! a machine, first python3 of a process, PSS of several processes): `scripts/python-costs.py`.

// `criterion_group!` defines an undocumented `pub fn`; a benchmark has no API to document.
#![allow(missing_docs)]

use std::sync::Arc;
use std::time::{Duration, Instant};

use criterion::{Criterion, criterion_group, criterion_main};
use parking_lot::Mutex;
use wasmsand_exec::{Exec, OutputBuffer, RunSpec};
use wasmsand_vfs::{Vfs, VfsOptions};

fn bench(c: &mut Criterion) {
    let a = wasmsand_cpython::artifacts().expect("artifacts");
    let exec = Exec::shared();
    let mut vfs = Vfs::with_standard_layout(VfsOptions::default());
    vfs.layout(wasmsand_cpython::install).unwrap();
    let vfs = Arc::new(Mutex::new(vfs));
    let mut group = c.benchmark_group("python3");
    group
        .sample_size(30)
        .measurement_time(Duration::from_secs(4));
    // Straight through exec, without the shell's prelude: CPython finalizes the interpreter
    // at the end of `run`, as every run did before the prelude ended instances like os._exit.
    // With WASMSAND_MEMORY_IMAGES=0 these are the old per-run path.
    let cases = [
        ("print(1) snapshot", &a.snapshot, "print(1)", "1\n"),
        ("print(1) plain", &a.python, "print(1)", "1\n"),
        (
            "numpy snapshot",
            &a.snapshot,
            "import numpy; print(numpy.arange(10).sum())",
            "45\n",
        ),
    ];
    for (name, wasm, code, expected) in cases {
        let program = exec.load(wasm).expect("compiles");
        group.bench_function(format!("{name} (exec, finalized)"), |b| {
            b.iter(|| {
                let out = OutputBuffer::new(1 << 20);
                let mut spec = RunSpec::new(vfs.clone(), ["python3", "-c", code]);
                spec.stdout = out.clone().into();
                spec.entry = Some("run".into());
                spec.deadline = Some(Instant::now() + Duration::from_secs(30));
                spec.memory_limit = Some(512 << 20);
                let o = exec.run(&program, spec).unwrap();
                assert_eq!(out.snapshot().as_bytes(), expected.as_bytes(), "{o:?}");
            })
        });
    }
    // The whole path a user takes: the shell resolves `python3`, adds the cwd prelude
    // (crates/shell/src/reactor.rs) and runs the snapshot.
    let sb = wasmsand::Sandbox::new(wasmsand::SandboxOptions::default());
    // Runs start from the memory captured with numpy imported once it is ready (the first run
    // of the process starts the capture in the background); unless WASMSAND_PREINIT=0, which
    // gives the figures of runs from the snapshot itself.
    let preimported = "python3 -c 'import sys; print(\"numpy\" in sys.modules)'";
    let want = if std::env::var_os("WASMSAND_PREINIT").is_some_and(|v| v == "0") {
        "False\n"
    } else {
        "True\n"
    };
    let waited = Instant::now();
    while sb.run(preimported).unwrap().stdout != want {
        assert!(
            waited.elapsed() < Duration::from_secs(60),
            "no pre-imported memory"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    group.bench_function("Sandbox::run python3 -c print(1)", |b| {
        b.iter(|| {
            let r = sb.run("python3 -c 'print(1)'").unwrap();
            assert_eq!(r.stdout, "1\n", "{}", r.stderr);
        })
    });
    group.bench_function("Sandbox::run numpy.arange(10).sum()", |b| {
        b.iter(|| {
            let r = sb
                .run("python3 -c 'import numpy; print(numpy.arange(10).sum())'")
                .unwrap();
            assert_eq!(r.stdout, "45\n", "{}", r.stderr);
        })
    });
    // What a new process pays before its first python3 (item 3 of the cost model): a fresh
    // module cache over the warm disk cache, loading the snapshot (digest memo, memory image,
    // verified entry mapped by wasmer).
    group.bench_function("load from the disk cache in a new Exec", |b| {
        b.iter(|| {
            let fresh = Exec::new(wasmsand_exec::ExecOptions::default());
            fresh.load(&a.snapshot).unwrap();
            assert_eq!(fresh.cache_stats().disk_hits, 1);
        })
    });
    group.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
