//! The process slots of one sandbox: what its `pids` limit bounds.

use std::sync::atomic::{AtomicU64, Ordering};

/// Processes alive at once in one sandbox, shared by all its runs and background processes:
/// each pipeline stage, subshell or job on a thread of its own, coprocess, `timeout` child and
/// background process holds a slot while it lives. A run's own shell, and the program it runs
/// in the foreground on that shell's thread, hold none. When every slot is held, starting one
/// more fails as `fork` fails with `EAGAIN` in bash.
#[derive(Debug)]
pub struct Pids {
    max: u64,
    live: AtomicU64,
}

impl Pids {
    /// `max` slots, none held.
    pub fn new(max: u64) -> Pids {
        Pids {
            max,
            live: AtomicU64::new(0),
        }
    }

    /// How many slots there are.
    pub fn max(&self) -> u64 {
        self.max
    }

    /// Slots held now.
    pub fn live(&self) -> u64 {
        self.live.load(Ordering::SeqCst)
    }

    /// Takes a slot; `false` when none is free.
    pub fn acquire(&self) -> bool {
        self.live
            .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |n| {
                (n < self.max).then_some(n + 1)
            })
            .is_ok()
    }

    /// Gives back a slot taken by [`Self::acquire`].
    pub fn release(&self) {
        self.live.fetch_sub(1, Ordering::SeqCst);
    }

    /// What bash prints when `fork` fails, with the limit that made it fail.
    pub fn refusal(&self) -> String {
        format!(
            "fork: Resource temporarily unavailable (pids limit: {} processes at once in this sandbox)",
            self.max
        )
    }
}
