//! Instantiate-and-run latency of small cached tools, and module load cost with a cold disk
//! cache (compile), a warm disk cache (deserialize) and a warm memory cache.

use std::hint::black_box;
use std::sync::Arc;

use bytes::Bytes;
use criterion::{Criterion, criterion_group, criterion_main};
use parking_lot::Mutex;
use wasmsand_exec::{Exec, ExecOptions, Input, OutputBuffer, RunSpec};
use wasmsand_vfs::{Vfs, VfsOptions};

fn runs(c: &mut Criterion) {
    let exec = Exec::new(ExecOptions {
        cache_dir: None,
        no_disk_cache: true,
    });
    let vfs = Arc::new(Mutex::new(Vfs::with_standard_layout(VfsOptions::default())));
    vfs.lock()
        .write("/home/user/kib", vec![b'x'; 1024])
        .unwrap();
    let kib = Bytes::from(vec![b'y'; 1024]);

    let mut group = c.benchmark_group("run");
    for (name, argv, stdin) in [
        ("true", vec!["true"], Bytes::new()),
        ("cat_1KiB_file", vec!["cat", "/home/user/kib"], Bytes::new()),
        ("wc_c_1KiB_stdin", vec!["wc", "-c"], kib.clone()),
        ("small_module_flood_0", vec!["true"], Bytes::new()),
    ] {
        let tool = if name == "small_module_flood_0" {
            "flood"
        } else {
            argv[0]
        };
        let program = exec
            .load(wasmsand_tools::wasm_for_tool(tool).unwrap())
            .unwrap();
        // `flood 0` exits at once: the cost of a tiny (non-multicall) module.
        let argv = if tool == "flood" {
            vec!["flood", "0"]
        } else {
            argv
        };
        group.bench_function(name, |b| {
            b.iter(|| {
                let out = OutputBuffer::new(1 << 20);
                let mut spec = RunSpec::new(vfs.clone(), argv.iter().copied());
                spec.stdin = Input::Bytes(stdin.clone());
                spec.stdout = out.clone().into();
                let r = exec.run(&program, spec).unwrap();
                assert_eq!(r.exit.status(), 0);
                black_box(out.snapshot().len())
            })
        });
    }
    group.finish();
}

fn loads(c: &mut Criterion) {
    let wasm = wasmsand_tools::wasm_for_tool("cat").unwrap();
    let mut group = c.benchmark_group("load_coreutils");
    group.sample_size(10);
    group.bench_function("miss_compile", |b| {
        b.iter(|| {
            let e = Exec::new(ExecOptions {
                cache_dir: None,
                no_disk_cache: true,
            });
            black_box(e.load(wasm).unwrap())
        })
    });
    let dir = tempfile::tempdir().unwrap();
    let opts = ExecOptions {
        cache_dir: Some(dir.path().to_path_buf()),
        no_disk_cache: false,
    };
    Exec::new(opts.clone()).load(wasm).unwrap();
    group.bench_function("hit_disk", |b| {
        b.iter(|| black_box(Exec::new(opts.clone()).load(wasm).unwrap()))
    });
    let warm = Exec::new(opts.clone());
    warm.load(wasm).unwrap();
    group.bench_function("hit_memory", |b| {
        b.iter(|| black_box(warm.load(wasm).unwrap()))
    });
    group.finish();
}

criterion_group!(benches, runs, loads);
criterion_main!(benches);
