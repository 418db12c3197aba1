//! Per-run cost of `python3` through `Sandbox::run`, in wall time and in CPU time of the whole
//! process (every thread, getrusage: steadier than wall time on a shared machine):
//! `cargo run -p wasmsand-cpython --example preinit [RUNS] [print|numpy]` (the second argument
//! keeps one of the two commands, for a profile of that one alone). With `WASMSAND_PREINIT=0`
//! runs start from the snapshot itself instead of the memory captured with numpy imported.
//! Page faults are the process's minor faults per run (`ru_minflt`): most of a run's kernel
//! time is spent on them.

use std::time::{Duration, Instant};

/// CPU time of every thread so far, and minor page faults.
fn process_cpu() -> (Duration, i64) {
    // SAFETY: getrusage fills the struct it is given.
    let usage = unsafe {
        let mut u: libc::rusage = std::mem::zeroed();
        libc::getrusage(libc::RUSAGE_SELF, &mut u);
        u
    };
    let tv = |t: libc::timeval| Duration::new(t.tv_sec as u64, t.tv_usec as u32 * 1000);
    (tv(usage.ru_utime) + tv(usage.ru_stime), usage.ru_minflt)
}

fn median<T: Ord + Copy>(mut v: Vec<T>) -> T {
    v.sort();
    v[v.len() / 2]
}

fn main() {
    let runs: usize = std::env::args().nth(1).map_or(40, |n| n.parse().unwrap());
    let only = std::env::args().nth(2);
    let a = wasmsand_cpython::artifacts().unwrap();
    let exec = wasmsand_exec::Exec::shared();
    let program = exec.load(&a.snapshot).unwrap();
    let t = Instant::now();
    let preinitialized = exec.preinitialize(&program);
    eprintln!("pre-imported memory: {preinitialized} ({:?})", t.elapsed());
    let sb = wasmsand::Sandbox::new(wasmsand::SandboxOptions::default());
    for (name, cmd, want) in [
        ("print", "python3 -c 'print(1)'", "1\n"),
        (
            "numpy",
            "python3 -c 'import numpy; print(numpy.arange(10).sum())'",
            "45\n",
        ),
    ] {
        if only.as_deref().is_some_and(|o| o != name) {
            continue;
        }
        let (mut wall, mut cpu, mut faults) = (Vec::new(), Vec::new(), Vec::new());
        for i in 0..runs + 3 {
            let (t, c) = (Instant::now(), process_cpu());
            let r = sb.run(cmd).unwrap();
            let t = t.elapsed();
            assert_eq!(r.stdout, want, "{}", r.stderr);
            // The CPU figure includes the background reset of the released memory.
            std::thread::sleep(Duration::from_millis(5));
            let (c1, f1) = process_cpu();
            if i >= 3 {
                wall.push(t);
                cpu.push(c1 - c.0);
                faults.push(f1 - c.1);
            }
        }
        println!(
            "{cmd}: median wall {:?}, median CPU {:?}, median page faults {} ({runs} runs)",
            median(wall),
            median(cpu),
            median(faults)
        );
    }
}
