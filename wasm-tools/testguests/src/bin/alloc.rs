//! Test guest: allocates 1 MiB blocks and writes to every page until allocation fails, then
//! reports how much it got on stderr and exits 1. `try_reserve` turns the failure into a value
//! instead of an abort, so the total can be printed.

#![forbid(unsafe_code)]

fn main() {
    const BLOCK: usize = 1 << 20;
    let mut blocks: Vec<Vec<u8>> = Vec::new();
    loop {
        let mut v: Vec<u8> = Vec::new();
        if v.try_reserve_exact(BLOCK).is_err() || blocks.try_reserve(1).is_err() {
            break;
        }
        v.resize(BLOCK, 0);
        // Touch every page so the memory is really committed.
        for i in (0..BLOCK).step_by(4096) {
            v[i] = 1;
        }
        blocks.push(std::hint::black_box(v));
    }
    eprintln!(
        "alloc: allocated {} MiB before allocation failed",
        blocks.len()
    );
    std::process::exit(1);
}
