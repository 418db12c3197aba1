//! The sandbox's cost figures: a short pipeline per run, a 2000-iteration shell loop, creating
//! a sandbox, and forking one that holds 10 000 files; and the export and import of a sandbox
//! that holds 10 000 files, the cost of the resource receipt on a short pipeline, and merging
//! a fork back into a parent that holds 10 000 files (these three reported in docs/runs.md);
//! and parsing the parser's pathological inputs (threat T-PARSER: long flat lists, brace
//! words, arithmetic, `((` that turns out to be subshells, nested `${x:-...}`), whose cost must
//! grow linearly with their length.
//!
//! `cargo bench --profile dev -p wasmsand --bench sandbox` (see the justfile's `bench`).

// `criterion_group!` defines an undocumented `pub fn`; a benchmark has no API to document.
#![allow(missing_docs)]

use criterion::{BatchSize, Criterion, criterion_group, criterion_main};
use wasmsand::{
    Attempt, BestOfOptions, ImportOptions, Limits, MergeOptions, RunOptions, Sandbox,
    SandboxOptions,
};

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

/// A sandbox holding 10 000 small files, `/home/user/d{0..99}/f{0..99}.txt`, each with
/// `content(d, f)`.
fn ten_thousand_files(content: impl Fn(u32, u32) -> String) -> Sandbox {
    let sb = Sandbox::new(SandboxOptions {
        limits: Limits {
            file_count: 20_000,
            ..Limits::default()
        },
        ..Default::default()
    });
    for d in 0..100 {
        for f in 0..100 {
            sb.write_file(
                &format!("/home/user/d{d}/f{f}.txt"),
                content(d, f).as_bytes(),
            )
            .unwrap();
        }
    }
    sb
}

/// The targets: a sandbox holding 10 000 files exports in ≤ 50 ms and imports in
/// ≤ 50 ms. The files are small and distinct (a path and a line each), as an agent's would be.
fn portable_state(c: &mut Criterion) {
    let sb = ten_thousand_files(|d, f| format!("file {f} of directory {d}\n"));
    assert_eq!(sb.usage().unwrap().files_used, 10_100);
    let blob = sb.export_state(Some(b"key")).unwrap();
    println!("blob of 10 000 files: {} bytes", blob.len());
    c.bench_function("export_state of a sandbox holding 10 000 files", |b| {
        b.iter(|| sb.export_state(Some(b"key")).unwrap())
    });
    c.bench_function("import_state of it", |b| {
        b.iter(|| {
            Sandbox::import_state(
                &blob,
                ImportOptions {
                    key: Some(b"key".to_vec()),
                    ..Default::default()
                },
            )
            .unwrap()
        })
    });
}

/// Whether the receipt is cheap enough to be on by default: the same pipeline with and
/// without it (`RunOptions::skip_usage`), measured alternately in one process.
fn receipt(c: &mut Criterion) {
    let sb = Sandbox::new(SandboxOptions::default());
    let cmd = "echo hello | wc -c";
    let without = || RunOptions {
        skip_usage: true,
        ..RunOptions::default()
    };
    assert_eq!(sb.run(cmd).unwrap().stdout, "6\n");
    let r = sb.run_with(cmd, without()).unwrap();
    assert_eq!((r.stdout.as_str(), r.usage.processes), ("6\n", 0));
    let mut g = c.benchmark_group("receipt");
    g.bench_function("echo hello | wc -c, with usage", |b| {
        b.iter(|| sb.run(cmd).unwrap())
    });
    g.bench_function("echo hello | wc -c, without usage", |b| {
        b.iter(|| sb.run_with(cmd, without()).unwrap())
    });
    g.finish();
}

/// Merging back a fork that changed 99 files and deleted a tree of 100 into a parent that
/// holds 10 000 files and changed 99 others (in the same directories) since the fork.
fn merge(c: &mut Criterion) {
    let base = ten_thousand_files(|d, f| format!("{d}/{f}\n"));
    let setup = || {
        let parent = base.fork().unwrap();
        let child = parent.fork().unwrap();
        for i in 1..100 {
            child
                .write_file(&format!("/home/user/d{i}/f1.txt"), b"fork\n")
                .unwrap();
            parent
                .write_file(&format!("/home/user/d{i}/f2.txt"), b"parent\n")
                .unwrap();
        }
        child.remove("/home/user/d0", true).unwrap();
        (parent, child)
    };
    let (p, f) = setup();
    let r = p.merge(&f, MergeOptions::default()).unwrap();
    assert_eq!(r.applied.len(), 100);
    c.bench_function(
        "merge: fork changed 99 files and deleted 100, parent holding 10 000",
        |b| {
            b.iter_batched(
                setup,
                |(parent, child)| parent.merge(&child, MergeOptions::default()).unwrap(),
                BatchSize::SmallInput,
            )
        },
    );
}

/// Each pathological input at two lengths, so that a cost growing faster than the input shows
/// as a ratio above 2 between the pair.
fn parse(c: &mut Criterion) {
    let mut g = c.benchmark_group("parse");
    type Make = fn(usize) -> String;
    let inputs: [(&str, Make); 5] = [
        ("list", |n| "echo a; ".repeat(n)),
        ("braces", |n| "{a,".repeat(n)),
        ("arith", |n| format!("echo $(({}1))", "1+".repeat(n))),
        ("subshells", |n| {
            "((".repeat(n / 125) + "echo a) " + &")".repeat(2 * (n / 125) - 1)
        }),
        ("defaults", |n| {
            format!("echo {}{} ", "${x:-".repeat(n / 100), "}".repeat(n / 100))
        }),
    ];
    for (name, make) in inputs {
        for n in [5_000, 10_000] {
            let src = make(n);
            g.bench_function(format!("{name}/{n}"), |b| {
                b.iter(|| wasmsand_shell::parse(&src).is_ok())
            });
        }
    }
}

/// Best-of-N (docs/runs.md): 8 attempts of a 100-file edit-and-test script on a sandbox
/// holding 10 000 files, in forks on threads (`best_of`, as many at once as there are cores)
/// against the same attempts one at a time.
fn best_of(c: &mut Criterion) {
    let sb = ten_thousand_files(|d, f| format!("file {f} of directory {d}\n"));
    let script = "for f in /home/user/d$K/f*.txt; do echo edited >> \"$f\"; done; \
                  test \"$(cat /home/user/d$K/*.txt | grep -c edited)\" = 100";
    let attempts: Vec<Attempt> = (0..8)
        .map(|k| Attempt {
            command: script.into(),
            env: vec![("K".into(), k.to_string())],
        })
        .collect();
    for r in sb.best_of(&attempts, BestOfOptions::default()) {
        let p = r.unwrap();
        assert_eq!(p.result.exit_code, 0, "{}", p.result.stderr);
        assert_eq!(p.changes.files.len(), 100);
    }
    let mut g = c.benchmark_group("best_of");
    g.sample_size(10);
    g.bench_function("8 attempts in forks, concurrently", |b| {
        b.iter(|| sb.best_of(&attempts, BestOfOptions::default()))
    });
    g.bench_function("8 attempts one after another", |b| {
        let one_at_a_time = || BestOfOptions {
            concurrency: 1,
            ..BestOfOptions::default()
        };
        b.iter(|| sb.best_of(&attempts, one_at_a_time()))
    });
    g.finish();
}

criterion_group!(
    benches,
    best_of,
    pipeline,
    shell_loop,
    create,
    fork,
    portable_state,
    receipt,
    merge,
    parse
);
criterion_main!(benches);
