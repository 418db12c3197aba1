//! Runs CPython alone (no shell) on a fresh filesystem: `cargo run -p wasmsand-cpython
//! --example py -- [--plain] ARGS...` (as `python3 ARGS...`). Standard input is passed
//! through; prints load and run times.

use std::io::{Read, Write};
use std::sync::Arc;
use std::time::{Duration, Instant};

use parking_lot::Mutex;
use wasmsand_exec::{Exec, Input, OutputBuffer, RunSpec};
use wasmsand_vfs::{Vfs, VfsOptions};

fn main() {
    let mut args: Vec<String> = std::env::args().skip(1).collect();
    let plain = args.first().map(String::as_str) == Some("--plain");
    if plain {
        args.remove(0);
    }
    let t = Instant::now();
    let a = wasmsand_cpython::artifacts().unwrap();
    let exec = Exec::shared();
    let program = exec
        .load(if plain { &a.python } else { &a.snapshot })
        .unwrap();
    eprintln!("[load {:?}, {:?}]", t.elapsed(), exec.cache_stats());
    let mut stdin = Vec::new();
    std::io::stdin().read_to_end(&mut stdin).ok();
    let mut vfs = Vfs::with_standard_layout(VfsOptions::default());
    vfs.layout(wasmsand_cpython::install).unwrap();
    let vfs = Arc::new(Mutex::new(vfs));
    let (out, err) = (OutputBuffer::new(1 << 24), OutputBuffer::new(1 << 24));
    let mut argv = vec!["python3".to_string()];
    argv.extend(args);
    let mut spec = RunSpec::new(vfs, argv);
    spec.cwd = "/tmp".into();
    spec.env = vec![
        ("HOME".into(), "/tmp".into()),
        ("TMPDIR".into(), "/tmp".into()),
    ];
    spec.stdin = Input::Bytes(stdin.into());
    spec.stdout = out.clone().into();
    spec.stderr = err.clone().into();
    spec.deadline = Some(Instant::now() + Duration::from_secs(120));
    spec.entry = Some("run".into());
    let outcome = exec.run(&program, spec).expect("run set up");
    std::io::stdout().write_all(out.snapshot().as_bytes()).ok();
    std::io::stderr().write_all(err.snapshot().as_bytes()).ok();
    eprintln!("[{:?} in {:?}]", outcome.exit, outcome.elapsed);
    std::process::exit(outcome.exit.status());
}
