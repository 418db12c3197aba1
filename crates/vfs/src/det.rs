//! Deterministic mode's sources of time and chance. A sandbox in deterministic mode keeps one
//! [`DetState`] next to its filesystem (forks copy it): `/dev/urandom`, the guests' WASI
//! `random_get` and `clock_time_get`, and the shell's `$RANDOM` all draw from it, so the same
//! commands on the same state print the same bytes in any process.

use std::sync::{Arc, Mutex};

/// How a deterministic sandbox's clock and randomness start.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Determinism {
    /// Seeds every random byte.
    pub seed: u64,
    /// What the clock reads first, in nanoseconds since the Unix epoch.
    pub start_ns: u64,
    /// How far the clock moves at each reading, in nanoseconds: time passes only as the
    /// guests look at it, never with the host's.
    pub step_ns: u64,
}

impl Default for Determinism {
    fn default() -> Self {
        Self {
            seed: 0,
            // 2024-01-01T00:00:00Z
            start_ns: 1_704_067_200 * 1_000_000_000,
            step_ns: 1_000_000,
        }
    }
}

/// Where a deterministic sandbox's clock and random stream stand.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DetState {
    /// The seed and clock this state started from.
    pub config: Determinism,
    /// 64-bit blocks of the random stream drawn so far.
    drawn: u64,
    /// Clock readings so far.
    readings: u64,
}

/// A [`DetState`] shared by the threads of one sandbox's runs.
pub type SharedDet = Arc<Mutex<DetState>>;

impl DetState {
    /// The state before any draw or clock reading.
    pub fn new(config: Determinism) -> Self {
        Self {
            config,
            drawn: 0,
            readings: 0,
        }
    }

    /// The next block of the stream: SplitMix64 over the seed and the block's index, so a
    /// block depends on nothing but those two.
    fn block(&mut self) -> u64 {
        let mut z = self
            .config
            .seed
            .wrapping_add((self.drawn + 1).wrapping_mul(0x9E37_79B9_7F4A_7C15));
        self.drawn += 1;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// Fills `buf` from the random stream.
    pub fn fill(&mut self, buf: &mut [u8]) {
        for chunk in buf.chunks_mut(8) {
            let b = self.block().to_le_bytes();
            chunk.copy_from_slice(&b[..chunk.len()]);
        }
    }

    /// The next 32 random bits (the high half of one block), for `$RANDOM` and the like.
    pub fn next_u32(&mut self) -> u32 {
        (self.block() >> 32) as u32
    }

    /// The clock's next reading, in nanoseconds since the Unix epoch.
    pub fn now_ns(&mut self) -> u64 {
        let t = self
            .config
            .start_ns
            .saturating_add(self.readings.saturating_mul(self.config.step_ns));
        self.readings += 1;
        t
    }

    /// Moves the clock forward by `ns` (a guest's own sleep).
    pub fn advance(&mut self, ns: u64) {
        self.config.start_ns = self.config.start_ns.saturating_add(ns);
    }
}

/// A copy of `det` that goes its own way from now on (a fork's).
pub(crate) fn detach(det: &SharedDet) -> SharedDet {
    let state = det.lock().unwrap_or_else(|e| e.into_inner()).clone();
    Arc::new(Mutex::new(state))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_same_seed_gives_the_same_stream_and_another_seed_another() {
        let mut a = DetState::new(Determinism::default());
        let mut b = DetState::new(Determinism::default());
        let (mut x, mut y) = ([0u8; 21], [0u8; 21]);
        a.fill(&mut x);
        b.fill(&mut y);
        assert_eq!(x, y);
        a.fill(&mut x);
        assert_ne!(x, y);
        let mut c = DetState::new(Determinism {
            seed: 1,
            ..Determinism::default()
        });
        c.fill(&mut x);
        assert_ne!(x, y);
    }

    #[test]
    fn the_clock_moves_by_its_step_and_by_sleeps() {
        let mut d = DetState::new(Determinism {
            seed: 0,
            start_ns: 1000,
            step_ns: 10,
        });
        assert_eq!((d.now_ns(), d.now_ns()), (1000, 1010));
        d.advance(5000);
        assert_eq!(d.now_ns(), 6020);
    }
}
