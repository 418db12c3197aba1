//! Instantiate-and-run latency of small cached guests, and module load cost with a cold disk
//! cache (compile), a warm disk cache (deserialize) and a warm memory cache.

// `criterion_group!` defines an undocumented `pub fn`; a benchmark has no API to document.
#![allow(missing_docs)]

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
            .load(wasmsand_guests::wasm_for_command(tool).unwrap())
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

/// One run of each devtools guest on a small input: what an agent's `bc`, `tree`, `rg` or
/// `file` costs per call (instantiation dominates).
fn devtools(c: &mut Criterion) {
    let exec = Exec::new(ExecOptions {
        cache_dir: None,
        no_disk_cache: true,
    });
    let vfs = Arc::new(Mutex::new(Vfs::with_standard_layout(VfsOptions::default())));
    {
        let mut v = vfs.lock();
        v.mkdir_p("/home/user/p/src/sub").unwrap();
        for f in ["a.rs", "b.rs", "sub/c.rs", "sub/d.txt"] {
            v.write(&format!("/home/user/p/src/{f}"), b"fn main() {}\n")
                .unwrap();
        }
        v.write("/home/user/p/README.md", b"# p\n").unwrap();
        let lines: String = (1..=40).map(|n| format!("line {n}\n")).collect();
        v.write("/home/user/p/40.txt", lines.as_bytes()).unwrap();
        let mut bin = b"\x7fELF\x02\x01\x01\0".to_vec();
        bin.extend((0..1024u32).map(|i| (i * 7 % 251) as u8));
        v.write("/home/user/p/bin", bin).unwrap();
    }
    // A repository for the git cases: /home/user/p with one commit.
    let git = exec
        .load(wasmsand_guests::wasm_for_command("git").unwrap())
        .unwrap();
    for args in [
        &["git", "-C", "/home/user/p", "init", "-q"][..],
        &["git", "-C", "/home/user/p", "add", "."],
        &["git", "-C", "/home/user/p", "commit", "-q", "-m", "one"],
    ] {
        let r = exec
            .run(&git, RunSpec::new(vfs.clone(), args.iter().copied()))
            .unwrap();
        assert_eq!(r.exit.status(), 0, "{args:?}");
    }
    vfs.lock()
        .write("/home/user/p/README.md", b"# p\nchanged\n")
        .unwrap();
    // A database and an archive for the sqlite3 and unzip cases (outside /home/user/p, which
    // the tree and git cases measure).
    for args in [
        &[
            "sqlite3",
            "/tmp/b.db",
            "CREATE TABLE t(id INTEGER PRIMARY KEY, name TEXT); INSERT INTO t(name) VALUES ('a'), ('b'), ('c')",
        ][..],
        &["zip", "-r", "-q", "/tmp/p.zip", "/home/user/p/src"],
    ] {
        let program = exec
            .load(wasmsand_guests::wasm_for_command(args[0]).unwrap())
            .unwrap();
        let r = exec
            .run(&program, RunSpec::new(vfs.clone(), args.iter().copied()))
            .unwrap();
        assert_eq!(r.exit.status(), 0, "{args:?}");
    }
    let table = Bytes::from_static(b"name qty price\napple 3 1.25\nbanana 12 0.5\nkiwi 100 2\n");
    let mut group = c.benchmark_group("devtools");
    for (name, argv, stdin) in [
        ("expr_add", vec!["expr", "3", "+", "4"], Bytes::new()),
        (
            "bc_l_pi_scale20",
            vec!["bc", "-l"],
            Bytes::from_static(b"4*a(1)\n"),
        ),
        ("bc_2pow1000", vec!["bc"], Bytes::from_static(b"2^1000\n")),
        ("column_t_4_lines", vec!["column", "-t"], table.clone()),
        (
            "strings_1KiB",
            vec!["strings", "/home/user/p/bin"],
            Bytes::new(),
        ),
        (
            "patch_dry_run_40_lines",
            vec!["patch", "--dry-run", "/home/user/p/40.txt"],
            Bytes::from_static(
                b"--- a\n+++ b\n@@ -19,5 +19,5 @@\n line 19\n line 20\n-line 21\n+line XXI\n line 22\n line 23\n",
            ),
        ),
        (
            "yq_y_small_doc",
            vec!["yq", "-y", ".b"],
            Bytes::from_static(b"a: 1\nb: [x, y]\nc: {d: true}\n"),
        ),
        ("tree_7_entries", vec!["tree", "/home/user/p"], Bytes::new()),
        (
            "git_status_7_files",
            vec!["git", "-C", "/home/user/p", "status", "--short"],
            Bytes::new(),
        ),
        (
            "git_diff_one_file",
            vec!["git", "-C", "/home/user/p", "diff"],
            Bytes::new(),
        ),
        (
            "node_e_console_log",
            vec!["node", "-e", "console.log({a: [1, 2, 3], b: 'x'})"],
            Bytes::new(),
        ),
        (
            "node_fs_json_40_lines",
            vec![
                "node",
                "-e",
                "const fs = require('fs'); const l = fs.readFileSync('/home/user/p/40.txt', 'utf8').split('\\n'); console.log(JSON.stringify(l.filter(x => x.endsWith('0'))))",
            ],
            Bytes::new(),
        ),
        (
            "sqlite3_memory_create_insert_select",
            vec![
                "sqlite3",
                ":memory:",
                "CREATE TABLE t(a, b); INSERT INTO t VALUES (1, 'x'), (2, 'y'); SELECT * FROM t",
            ],
            Bytes::new(),
        ),
        (
            "sqlite3_csv_select_file_db",
            vec!["sqlite3", "-csv", "-header", "/tmp/b.db", "SELECT * FROM t"],
            Bytes::new(),
        ),
        (
            "zip_r_4_files",
            vec!["zip", "-r", "-q", "/tmp/again.zip", "/home/user/p/src"],
            Bytes::new(),
        ),
        (
            "unzip_l_4_files",
            vec!["unzip", "-l", "/tmp/p.zip"],
            Bytes::new(),
        ),
        (
            "unzip_p_one_file",
            vec!["unzip", "-p", "/tmp/p.zip", "home/user/p/src/a.rs"],
            Bytes::new(),
        ),
        (
            "rg_n_tree_7_files",
            vec!["rg", "-n", "fn", "/home/user/p"],
            Bytes::new(),
        ),
        (
            "rg_i_t_rust_c",
            vec!["rg", "-i", "-t", "rust", "-c", "MAIN", "/home/user/p"],
            Bytes::new(),
        ),
        (
            "file_3_files",
            vec![
                "file",
                "/home/user/p/bin",
                "/home/user/p/README.md",
                "/home/user/p/src",
            ],
            Bytes::new(),
        ),
    ] {
        let program = exec
            .load(wasmsand_guests::wasm_for_command(argv[0]).unwrap())
            .unwrap();
        group.bench_function(name, |b| {
            b.iter(|| {
                let out = OutputBuffer::new(1 << 20);
                let mut spec = RunSpec::new(vfs.clone(), argv.iter().copied());
                spec.stdin = Input::Bytes(stdin.clone());
                spec.stdout = out.clone().into();
                let r = exec.run(&program, spec).unwrap();
                assert_eq!(r.exit.status(), 0, "{name}");
                black_box(out.snapshot().len())
            })
        });
    }
    group.finish();
}

fn loads(c: &mut Criterion) {
    let wasm = wasmsand_guests::wasm_for_command("cat").unwrap();
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

criterion_group!(benches, runs, devtools, loads);
criterion_main!(benches);
