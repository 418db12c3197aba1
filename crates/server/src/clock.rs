//! The service's "now": the system's time plus an offset that only moves forward.
//!
//! Every expiry the service decides (session and idempotency TTLs, signed stream URLs, the
//! artifact sweeper's cutoff, a run's time in the queue) reads this clock rather than the
//! system's, so a test moves it past a TTL with [`Clock::advance`] instead of sleeping through
//! it: the test takes no wall-clock time and cannot race a loaded machine's scheduler. In a
//! running service nothing advances it and it is the system's time.

use std::sync::Arc;
use std::sync::atomic::{AtomicI64, Ordering};
use std::time::Duration;

use tokio::sync::Notify;

/// A shared, cheaply cloned clock (clones see the same offset).
#[derive(Clone, Default)]
pub struct Clock {
    inner: Arc<Inner>,
}

#[derive(Default)]
struct Inner {
    offset_ms: AtomicI64,
    /// Woken on every advance, so a [`Clock::sleep`] whose deadline was jumped over ends then.
    advanced: Notify,
}

impl Clock {
    /// Milliseconds since the Unix epoch, as this clock reads them.
    pub fn now_ms(&self) -> i64 {
        crate::util::now_ms() + self.inner.offset_ms.load(Ordering::SeqCst)
    }

    /// Moves this clock (and every clone of it) forward by `by`. For tests and simulations:
    /// expiries due within `by` become due at once.
    pub fn advance(&self, by: Duration) {
        let ms = i64::try_from(by.as_millis()).unwrap_or(i64::MAX / 4);
        self.inner.offset_ms.fetch_add(ms, Ordering::SeqCst);
        self.inner.advanced.notify_waiters();
    }

    /// Waits until this clock reads `duration` later than it does at this call (not at the
    /// first poll): on the system's timer, or earlier if the clock is advanced past that point.
    pub fn sleep(&self, duration: Duration) -> impl Future<Output = ()> + Send + 'static {
        let deadline = self
            .now_ms()
            .saturating_add(i64::try_from(duration.as_millis()).unwrap_or(i64::MAX / 4));
        let clock = self.clone();
        async move { clock.sleep_until(deadline).await }
    }

    async fn sleep_until(&self, deadline: i64) {
        loop {
            // Registered before the deadline is checked, so an advance between the check and
            // the wait still wakes it.
            let advanced = self.inner.advanced.notified();
            tokio::pin!(advanced);
            advanced.as_mut().enable();
            let left = deadline - self.now_ms();
            if left <= 0 {
                return;
            }
            tokio::select! {
                _ = tokio::time::sleep(Duration::from_millis(left as u64)) => {}
                _ = advanced => {}
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn advancing_moves_every_clone() {
        let a = Clock::default();
        let b = a.clone();
        let before = b.now_ms();
        a.advance(Duration::from_secs(3600));
        assert!(b.now_ms() >= before + 3_600_000);
    }

    #[tokio::test]
    async fn a_sleep_ends_when_the_clock_jumps_past_it() {
        let clock = Clock::default();
        let sleeper = tokio::spawn(clock.sleep(Duration::from_secs(3600)));
        // The deadline was fixed by the call. Whether the task has registered for wake-ups yet
        // or not, one advance past it ends the sleep: before registering it reads the advanced
        // time, after it is woken.
        clock.advance(Duration::from_secs(3601));
        sleeper.await.unwrap();
    }
}
