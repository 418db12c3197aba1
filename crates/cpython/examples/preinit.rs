//! Per-run cost of `python3` through `Sandbox::run`, in wall time and in CPU time of the whole
//! process (every thread, getrusage: steadier than wall time on a shared machine):
//! `cargo run -p wasmsand-cpython --example preinit [RUNS]`. With `WASMSAND_PREINIT=0` runs
//! start from the snapshot itself instead of the memory captured with numpy imported.

use std::time::{Duration, Instant};

fn process_cpu() -> Duration {
    // SAFETY: getrusage fills the struct it is given.
    let usage = unsafe {
        let mut u: libc::rusage = std::mem::zeroed();
        libc::getrusage(libc::RUSAGE_SELF, &mut u);
        u
    };
    let tv = |t: libc::timeval| Duration::new(t.tv_sec as u64, t.tv_usec as u32 * 1000);
    tv(usage.ru_utime) + tv(usage.ru_stime)
}

fn median(mut v: Vec<Duration>) -> Duration {
    v.sort();
    v[v.len() / 2]
}

fn main() {
    let runs: usize = std::env::args().nth(1).map_or(40, |n| n.parse().unwrap());
    let a = wasmsand_cpython::artifacts().unwrap();
    let exec = wasmsand_exec::Exec::shared();
    let program = exec.load(&a.snapshot).unwrap();
    let t = Instant::now();
    let preinitialized = exec.preinitialize(&program);
    eprintln!("pre-imported memory: {preinitialized} ({:?})", t.elapsed());
    let sb = wasmsand::Sandbox::new(wasmsand::SandboxOptions::default());
    for (cmd, want) in [
        ("python3 -c 'print(1)'", "1\n"),
        (
            "python3 -c 'import numpy; print(numpy.arange(10).sum())'",
            "45\n",
        ),
    ] {
        let (mut wall, mut cpu) = (Vec::new(), Vec::new());
        for i in 0..runs + 3 {
            let (t, c) = (Instant::now(), process_cpu());
            let r = sb.run(cmd).unwrap();
            let t = t.elapsed();
            assert_eq!(r.stdout, want, "{}", r.stderr);
            // The CPU figure includes the background reset of the released memory.
            std::thread::sleep(Duration::from_millis(5));
            let c = process_cpu() - c;
            if i >= 3 {
                wall.push(t);
                cpu.push(c);
            }
        }
        println!(
            "{cmd}: median wall {:?}, median CPU {:?} ({runs} runs)",
            median(wall),
            median(cpu)
        );
    }
}
