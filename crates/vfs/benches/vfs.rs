//! Cost of forking a filesystem (expected flat in the number of files), of writing a large
//! file in small chunks (expected linear in the total), and of mounting a host folder (expected
//! flat in what it holds: nothing is listed until looked at).

// `criterion_group!` defines an undocumented `pub fn`; a benchmark has no API to document.
#![allow(missing_docs)]

use std::hint::black_box;

use criterion::{BenchmarkId, Criterion, Throughput, criterion_group, criterion_main};
use wasmsand_vfs::{Vfs, VfsOptions};

fn populated(files: usize) -> Vfs {
    let mut vfs = Vfs::with_standard_layout(VfsOptions::default());
    // 100 files a directory, like a real project tree.
    for i in 0..files {
        let dir = format!("/home/user/d{}", i / 100);
        if i % 100 == 0 {
            vfs.mkdir(&dir).unwrap();
        }
        vfs.write(&format!("{dir}/f{i}"), format!("content of file {i}\n"))
            .unwrap();
    }
    vfs
}

fn clone_and_snapshot(c: &mut Criterion) {
    let mut group = c.benchmark_group("cow_clone");
    for files in [10usize, 1_000, 100_000] {
        let vfs = populated(files);
        group.bench_with_input(BenchmarkId::from_parameter(files), &vfs, |b, vfs| {
            b.iter(|| black_box(vfs.cow_clone()))
        });
    }
    group.finish();

    let mut group = c.benchmark_group("snapshot_restore");
    for files in [10usize, 1_000, 100_000] {
        let mut vfs = populated(files);
        group.bench_function(BenchmarkId::from_parameter(files), |b| {
            b.iter(|| {
                let id = vfs.snapshot();
                vfs.restore(id).unwrap();
                vfs.drop_snapshot(id).unwrap();
            })
        });
    }
    group.finish();

    // The first write after a fork pays for copying the path it touches, not the tree.
    let mut group = c.benchmark_group("fork_then_write");
    for files in [10usize, 1_000, 100_000] {
        let vfs = populated(files);
        group.bench_function(BenchmarkId::from_parameter(files), |b| {
            b.iter(|| {
                let mut fork = vfs.cow_clone();
                fork.write("/home/user/d0/f0", "changed").unwrap();
                black_box(fork)
            })
        });
    }
    group.finish();
}

fn chunked_write(c: &mut Criterion) {
    const TOTAL: usize = 100 << 20;
    const CHUNK: usize = 4096;
    let chunk = vec![b'x'; CHUNK];
    let mut group = c.benchmark_group("write_100MiB_in_4KiB");
    group.sample_size(10);
    group.throughput(Throughput::Bytes(TOTAL as u64));
    group.bench_function("append", |b| {
        b.iter(|| {
            let mut vfs = Vfs::with_standard_layout(VfsOptions::default());
            vfs.create("/tmp/big", false).unwrap();
            for _ in 0..TOTAL / CHUNK {
                vfs.append("/tmp/big", &chunk).unwrap();
            }
            black_box(vfs)
        })
    });
    group.bench_function("write_at", |b| {
        b.iter(|| {
            let mut vfs = Vfs::with_standard_layout(VfsOptions::default());
            vfs.create("/tmp/big", false).unwrap();
            for i in 0..TOTAL / CHUNK {
                vfs.write_at("/tmp/big", (i * CHUNK) as u64, &chunk)
                    .unwrap();
            }
            black_box(vfs)
        })
    });
    group.finish();
}

/// A host folder of 50 000 files (100 directories of 500): mounting it, the first listing of
/// one of its directories (500 entries, each `lstat`ed once), and reading one file.
fn mount_host(c: &mut Criterion) {
    let host = tempfile::tempdir().unwrap();
    for d in 0..100 {
        let dir = host.path().join(format!("pkg{d}"));
        std::fs::create_dir(&dir).unwrap();
        for f in 0..500 {
            std::fs::write(dir.join(format!("m{f}.py")), "print('x')\n").unwrap();
        }
    }
    let base = Vfs::with_standard_layout(VfsOptions::default());
    let opts = wasmsand_vfs::MountOptions::default();
    let mut group = c.benchmark_group("mount_host");
    group.bench_function("mount a 50 000-file folder", |b| {
        b.iter(|| {
            let mut v = base.cow_clone();
            v.mount_host("/repo", host.path(), &opts).unwrap();
            v
        })
    });
    group.bench_function("mount, then list one 500-entry directory", |b| {
        b.iter(|| {
            let mut v = base.cow_clone();
            v.mount_host("/repo", host.path(), &opts).unwrap();
            black_box(v.readdir("/repo/pkg42").unwrap().len())
        })
    });
    group.bench_function("mount, then read one file", |b| {
        b.iter(|| {
            let mut v = base.cow_clone();
            v.mount_host("/repo", host.path(), &opts).unwrap();
            black_box(v.read("/repo/pkg42/m7.py").unwrap())
        })
    });
    group.finish();
}

criterion_group!(benches, clone_and_snapshot, chunked_write, mount_host);
criterion_main!(benches);
