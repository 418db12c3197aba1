//! The figures issue 4 sets targets for: a short pipeline per run, a 2000-iteration shell
//! loop, creating a sandbox, and forking one that holds 10 000 files.
//!
//! `cargo bench --profile dev -p wasmsand --bench sandbox` (see the justfile's `bench`).

use criterion::{Criterion, criterion_group, criterion_main};
use wasmsand::{Limits, Sandbox, SandboxOptions};

fn pipeline(c: &mut Criterion) {
    let sb = Sandbox::new(SandboxOptions::default());
    // Compile (or load from the disk cache) before measuring.
    assert_eq!(sb.run("echo hello | wc -c").unwrap().stdout, "6\n");
    c.bench_function("run: echo hello | wc -c", |b| {
        b.iter(|| sb.run("echo hello | wc -c").unwrap())
    });
}

fn shell_loop(c: &mut Criterion) {
    let sb = Sandbox::new(SandboxOptions::default());
    let cmd = "for i in $(seq 1 2000); do echo $i; done > f";
    sb.run(cmd).unwrap();
    assert_eq!(sb.read_file("f").unwrap().len(), 8893);
    c.bench_function("run: 2000-iteration for loop into a file", |b| {
        b.iter(|| sb.run(cmd).unwrap())
    });
}

fn create(c: &mut Criterion) {
    drop(Sandbox::new(SandboxOptions::default()));
    c.bench_function("Sandbox::new", |b| {
        b.iter(|| Sandbox::new(SandboxOptions::default()))
    });
}

fn fork(c: &mut Criterion) {
    let sb = Sandbox::new(SandboxOptions {
        limits: Limits {
            file_count: 20_000,
            ..Limits::default()
        },
        ..Default::default()
    });
    for d in 0..100 {
        for f in 0..100 {
            sb.write_file(&format!("/home/user/d{d}/f{f}"), b"x")
                .unwrap();
        }
    }
    assert_eq!(sb.usage().unwrap().files_used, 10_100);
    c.bench_function("fork of a sandbox holding 10 000 files", |b| {
        b.iter(|| sb.fork().unwrap())
    });
}

criterion_group!(benches, pipeline, shell_loop, create, fork);
criterion_main!(benches);
