//! Host memory stays bounded while guests misbehave. Alone in its own test binary (one
//! process, one test) so that the resident-size readings see no other test's allocations.

#[path = "integration/common/mod.rs"]
mod common;

use std::time::{Duration, Instant};

use common::*;
use wasmsand_exec::{Exit, OutputBuffer, RunSpec};

fn spec(argv: &[&str]) -> RunSpec {
    RunSpec::new(vfs(), argv.iter().copied())
}

#[test]
fn host_memory_stays_bounded() {
    // Warm the module cache and the runtime first: their one-time cost is not the guest's.
    for tool in ["alloc", "flood", "true"] {
        program(tool);
    }
    run(&vfs(), &["true"], b"");
    allocating_guest_fails_under_its_memory_cap_and_the_host_stays_small();
    flooding_guest_keeps_host_memory_bounded_by_the_cap();
}

// Threat: T-EXHAUST-MEMORY (docs/security.md)
fn allocating_guest_fails_under_its_memory_cap_and_the_host_stays_small() {
    let before = rss();
    let err = OutputBuffer::new(1 << 16);
    let mut s = spec(&["alloc"]);
    s.memory_limit = Some(64 << 20);
    s.stderr = err.clone().into();
    s.deadline = Some(Instant::now() + Duration::from_secs(30));
    let out = exec().run(&program("alloc"), s).unwrap();
    assert!(
        matches!(out.exit, Exit::OutOfMemory(_) | Exit::Code(1..)),
        "{:?}",
        out.exit
    );
    assert_ne!(out.exit.status(), 0);
    let grown = rss().saturating_sub(before);
    assert!(grown < 96 << 20, "host grew by {} MiB", grown >> 20);
    // The cap leaves room for a normal program afterwards.
    let again = run(&vfs(), &["true"], b"");
    assert_eq!(again.exit, Exit::Code(0));
}

// Threat: T-EXHAUST-MEMORY (docs/security.md)
fn flooding_guest_keeps_host_memory_bounded_by_the_cap() {
    let before = rss();
    let buf = OutputBuffer::new(1 << 20);
    let mut s = spec(&["flood", "1073741824"]);
    s.stdout = buf.clone().into();
    s.deadline = Some(Instant::now() + Duration::from_secs(120));
    let out = exec().run(&program("flood"), s).unwrap();
    assert_eq!(out.exit, Exit::Code(0));
    let kept = buf.snapshot();
    assert_eq!(kept.total_written(), 1 << 30);
    assert_eq!(kept.len(), 1 << 20);
    assert!(kept.truncated());
    let grown = rss().saturating_sub(before);
    assert!(grown < 64 << 20, "host grew by {} MiB", grown >> 20);
}
