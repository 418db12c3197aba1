//! `poll_oneoff` with a zero timeout.
//!
//! wasix 0.704 reads a clock subscription whose timeout is 0 as "no timeout at all" (it sets
//! its sleep to infinite and drops the clock), so `poll(fds, n, 0)`, `select(..., 0)` and a
//! bare `poll_oneoff` with a zero relative clock block forever instead of returning at once.
//! CPython's `selectors` module calls `select.poll().poll(0)` at import to choose its default
//! selector, so `import subprocess` — and with it `import pandas` — hung. A timeout of 1 ns is
//! what wasix treats as "check and return": zero clocks are rewritten to it for the call and
//! the guest's bytes put back afterwards. A 1 ns relative or absolute (past) clock is due
//! immediately, which is what 0 means in WASI.

use wasmer::{Memory, MemoryView};

/// Size of a WASI `subscription` and offsets inside it.
const SUBSCRIPTION: u64 = 48;
const TAG: u64 = 8;
const CLOCK_TIMEOUT: u64 = 24;
const TAG_CLOCK: u8 = 0;
/// More subscriptions than this are left to wasix to refuse or serve as they are.
const MAX_REWRITTEN: u32 = 4096;

/// Rewrites the zero-timeout clocks among `n` subscriptions at `ptr`; returns the addresses
/// changed, for [`restore`].
pub(crate) fn rewrite_zero_clocks(view: &MemoryView, ptr: u32, n: u32) -> Vec<u64> {
    let mut changed = Vec::new();
    if n > MAX_REWRITTEN {
        return changed;
    }
    for i in 0..u64::from(n) {
        let base = u64::from(ptr) + i * SUBSCRIPTION;
        let mut tag = [0u8; 1];
        let mut timeout = [0u8; 8];
        if view.read(base + TAG, &mut tag).is_err()
            || view.read(base + CLOCK_TIMEOUT, &mut timeout).is_err()
        {
            break;
        }
        if tag[0] == TAG_CLOCK
            && u64::from_le_bytes(timeout) == 0
            && view
                .write(base + CLOCK_TIMEOUT, &1u64.to_le_bytes())
                .is_ok()
        {
            changed.push(base + CLOCK_TIMEOUT);
        }
    }
    changed
}

/// Puts back the zeros [`rewrite_zero_clocks`] replaced.
pub(crate) fn restore(memory: &Memory, store: &impl wasmer::AsStoreRef, changed: &[u64]) {
    let view = memory.view(store);
    for at in changed {
        let _ = view.write(*at, &0u64.to_le_bytes());
    }
}
