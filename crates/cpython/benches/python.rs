//! `python3 -c 'print(1)'` per run once the module is cached, through the whole stack (shell,
//! exec, a fresh instance): the snapshot binary that `python3` runs, and the plain reactor
//! (`_initialize` first) for comparison. Cold compile and disk-cache load are one-off costs per
//! machine and per process: `cargo run -p wasmsand-cpython --example costs` prints them.

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
    for (name, wasm) in [("snapshot", &a.snapshot), ("plain", &a.python)] {
        let program = exec.load(wasm).expect("compiles");
        group.bench_function(format!("print(1) {name}"), |b| {
            b.iter(|| {
                let out = OutputBuffer::new(1 << 20);
                let mut spec = RunSpec::new(vfs.clone(), ["python3", "-c", "print(1)"]);
                spec.stdout = out.clone().into();
                spec.entry = Some("run".into());
                spec.deadline = Some(Instant::now() + Duration::from_secs(30));
                spec.memory_limit = Some(512 << 20);
                let o = exec.run(&program, spec).unwrap();
                assert_eq!(out.snapshot().as_bytes(), b"1\n", "{o:?}");
            })
        });
    }
    // The whole path a user takes: the shell resolves `python3`, adds the cwd prelude
    // (crates/shell/src/reactor.rs) and runs the snapshot.
    let sb = wasmsand::Sandbox::new(wasmsand::SandboxOptions::default());
    group.bench_function("Sandbox::run python3 -c print(1)", |b| {
        b.iter(|| {
            let r = sb.run("python3 -c 'print(1)'").unwrap();
            assert_eq!(r.stdout, "1\n", "{}", r.stderr);
        })
    });
    group.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
