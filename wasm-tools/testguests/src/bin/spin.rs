//! Test guest: burns CPU forever so the host's deadline has to interrupt it.

#![forbid(unsafe_code)]

fn main() {
    let mut x: u64 = 1;
    loop {
        // black_box keeps the optimizer from proving the loop has no effect.
        x = std::hint::black_box(x.wrapping_mul(6_364_136_223_846_793_005).wrapping_add(1));
    }
}
