//! Runs one guest program on a fresh sandbox filesystem and prints what it wrote:
//! `cargo run -p wasmsand-exec --example run_guest -- [--cwd DIR] COMMAND ARGS...`
//! Standard input is passed through.

use std::io::{Read, Write};
use std::sync::Arc;
use std::time::{Duration, Instant};

use parking_lot::Mutex;
use wasmsand_exec::{Exec, Input, OutputBuffer, RunSpec};
use wasmsand_vfs::{Vfs, VfsOptions};

fn main() {
    let mut args: Vec<String> = std::env::args().skip(1).collect();
    let mut cwd = "/home/user".to_string();
    if args.first().map(String::as_str) == Some("--cwd") && args.len() > 1 {
        cwd = args[1].clone();
        args.drain(..2);
    }
    let Some(command) = args.first() else {
        eprintln!("usage: run_guest [--cwd DIR] COMMAND ARGS...");
        std::process::exit(2);
    };
    let Some(wasm) = wasmsand_guests::wasm_for_command(command) else {
        eprintln!("run_guest: no such command: {command}");
        std::process::exit(127);
    };
    let mut stdin = Vec::new();
    std::io::stdin().read_to_end(&mut stdin).ok();
    let vfs = Arc::new(Mutex::new(Vfs::with_standard_layout(VfsOptions::default())));
    let exec = Exec::shared();
    let program = exec.load(wasm).expect("guests compile");
    let (out, err) = (OutputBuffer::new(1 << 24), OutputBuffer::new(1 << 24));
    let mut spec = RunSpec::new(vfs, args.iter().cloned());
    spec.cwd = cwd;
    spec.stdin = Input::Bytes(stdin.into());
    spec.stdout = out.clone().into();
    spec.stderr = err.clone().into();
    spec.deadline = Some(Instant::now() + Duration::from_secs(30));
    let outcome = exec.run(&program, spec).expect("run set up");
    std::io::stdout().write_all(out.snapshot().as_bytes()).ok();
    std::io::stderr().write_all(err.snapshot().as_bytes()).ok();
    eprintln!("[{:?} in {:?}]", outcome.exit, outcome.elapsed);
    std::process::exit(outcome.exit.status());
}
