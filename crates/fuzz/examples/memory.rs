//! Replays the same inputs through a fuzz target pass after pass in one process, printing the
//! resident memory, threads and open descriptors after each pass: growth that stops is a
//! warm-up (caches, the allocator), growth that goes on with every pass is a leak.
//! `cargo run -p wasmsand-fuzz --example memory -- TARGET PASSES FILE...` (Linux: reads /proc).

use std::panic;

fn status(field: &str) -> u64 {
    let status = std::fs::read_to_string("/proc/self/status")
        .unwrap_or_else(|e| fail(format!("/proc/self/status: {e}")));
    status
        .lines()
        .find_map(|l| l.strip_prefix(field))
        .and_then(|v| v.split_whitespace().next()?.parse().ok())
        .unwrap_or(0)
}

fn count(dir: &str) -> usize {
    std::fs::read_dir(dir).map(|d| d.count()).unwrap_or(0)
}

fn fail(message: impl std::fmt::Display) -> ! {
    eprintln!("{message}");
    std::process::exit(2)
}

fn main() {
    let mut args = std::env::args().skip(1);
    let usage = "usage: memory TARGET PASSES FILE...";
    let name = args.next().unwrap_or_else(|| fail(usage));
    let passes: usize = args
        .next()
        .and_then(|p| p.parse().ok())
        .unwrap_or_else(|| fail(usage));
    let inputs: Vec<Vec<u8>> = args
        .map(|f| std::fs::read(&f).unwrap_or_else(|e| fail(format!("{f}: {e}"))))
        .collect();
    let target = wasmsand_fuzz::target(&name)
        .unwrap_or_else(|| fail(format!("{name}: no such target (scripts/fuzz.sh list)")));
    panic::set_hook(Box::new(|_| {}));
    for pass in 1..=passes {
        let failed = inputs
            .iter()
            .filter(|d| panic::catch_unwind(|| target(d)).is_err())
            .count();
        println!(
            "pass {pass}: {} MB resident, {} threads, {} descriptors, {failed} failed",
            status("VmRSS:") / 1024,
            count("/proc/self/task"),
            count("/proc/self/fd"),
        );
    }
}
