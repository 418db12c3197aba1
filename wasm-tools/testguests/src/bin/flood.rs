//! Test guest: writes to stdout without end, or `flood N` writes exactly N bytes, in 64 KiB
//! writes. A closed pipe ends it quietly with status 0.

#![forbid(unsafe_code)]

use std::io::{ErrorKind, Write};

fn main() {
    let limit: Option<u64> = match std::env::args().nth(1) {
        Some(n) => match n.parse() {
            Ok(v) => Some(v),
            Err(_) => {
                eprintln!("usage: flood [BYTES]");
                std::process::exit(2);
            }
        },
        None => None,
    };
    let chunk = vec![b'y'; 64 * 1024];
    let mut out = std::io::stdout().lock();
    let mut written: u64 = 0;
    loop {
        let n = match limit {
            Some(l) if written >= l => break,
            Some(l) => (l - written).min(chunk.len() as u64) as usize,
            None => chunk.len(),
        };
        match out.write_all(&chunk[..n]) {
            Ok(()) => written += n as u64,
            Err(e) if e.kind() == ErrorKind::BrokenPipe => std::process::exit(0),
            Err(e) => {
                eprintln!("flood: write error: {e}");
                std::process::exit(1);
            }
        }
    }
    let _ = out.flush();
}
