//! What a run's host functions share with the runner: the rule on when the watchdog's
//! interrupt may land while they call back into the guest, the instance's memory once it
//! exists, and the descriptors that stand for the sandbox's root.

use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::sync::{Arc, OnceLock};

use wasmer::{Memory, RuntimeError};

/// Descriptors of wasix's virtual root (3) and of the one preopened directory, `/` (4): paths
/// relative to either start at the sandbox's `/`.
pub(crate) const ROOT_FDS: [i32; 2] = [3, 4];

/// The instance's memory, known once the instance exists (after the imports are made).
pub(crate) type LateMemory = Arc<OnceLock<Memory>>;

/// Keeps the store interrupt and host functions that call back into the instance apart.
///
/// Wrapped WASI calls and the door call the instance again from inside a host function
/// (`Function::call`). A store interrupt that lands in such a nested call corrupts wasmer's
/// per-thread store bookkeeping (observed as a panic, "Mismatched store context access"). So
/// the watchdog first sets `stopping`, then interrupts only while no nested call is running;
/// a host function increments `in_host` before checking `stopping`, and once stopping refuses
/// to call in at all and traps instead. With sequentially consistent order on both sides,
/// either the host function sees `stopping` or the watchdog sees it inside.
#[derive(Default)]
pub(crate) struct RunGuard {
    stopping: AtomicBool,
    in_host: AtomicU32,
}

impl RunGuard {
    /// Runs `call` unless the run is being stopped, in which case the guest traps.
    pub(crate) fn nested<T>(
        &self,
        call: impl FnOnce() -> Result<T, RuntimeError>,
    ) -> Result<T, RuntimeError> {
        self.in_host.fetch_add(1, Ordering::SeqCst);
        let result = if self.stopping.load(Ordering::SeqCst) {
            Err(RuntimeError::new("run stopped"))
        } else {
            call()
        };
        self.in_host.fetch_sub(1, Ordering::SeqCst);
        result
    }

    pub(crate) fn begin_stop(&self) {
        self.stopping.store(true, Ordering::SeqCst);
    }

    pub(crate) fn may_interrupt(&self) -> bool {
        self.in_host.load(Ordering::SeqCst) == 0
    }
}
