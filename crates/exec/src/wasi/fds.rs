//! Caps on a guest's open descriptors: its own (`ulimit -n`), and a pool shared by the
//! programs running at once in one sandbox. wasix has no such cap (a guest could open files
//! until the host ran out of memory), and its descriptor table is private to it, so the runner
//! keeps its own account of the table from the only preview1 calls that change it:
//! `path_open` adds the descriptor it writes back, `fd_close` removes one, `fd_renumber` moves
//! one over another. A refused `path_open` answers `EMFILE` without reaching wasix.

use std::collections::BTreeSet;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

use parking_lot::Mutex;

/// Descriptors held together by the programs of one sandbox that run at once: each program
/// takes one for every descriptor it opens and gives them back as it closes them, and all of
/// them when it ends. Its standard streams and root directories are not taken from it.
#[derive(Debug)]
pub struct FdPool {
    max: u64,
    held: AtomicU64,
}

impl FdPool {
    /// A pool of `max` descriptors, none held.
    pub fn new(max: u64) -> Arc<FdPool> {
        Arc::new(FdPool {
            max,
            held: AtomicU64::new(0),
        })
    }

    /// Descriptors the running programs hold from it now.
    pub fn held(&self) -> u64 {
        self.held.load(Ordering::SeqCst)
    }

    /// How many it has.
    pub fn max(&self) -> u64 {
        self.max
    }

    fn try_take(&self) -> bool {
        self.held
            .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |h| {
                (h < self.max).then_some(h + 1)
            })
            .is_ok()
    }

    fn give_back(&self, n: u64) {
        if n > 0 {
            self.held.fetch_sub(n, Ordering::SeqCst);
        }
    }
}

/// The descriptor caps of one program ([`crate::RunSpec::open_files`]).
#[derive(Debug, Clone)]
pub struct OpenFiles {
    /// Descriptors the program may have open at once, its standard streams and the two root
    /// directories wasix gives it included (as `RLIMIT_NOFILE` counts them).
    pub per_program: u64,
    /// The pool it shares with the other programs of its sandbox.
    pub pool: Arc<FdPool>,
}

/// Which cap refused an open.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Refused {
    Program,
    Pool,
}

/// One program's descriptors as the runner accounts for them.
pub(crate) struct FdTracker {
    caps: OpenFiles,
    table: Mutex<Table>,
    program_capped: AtomicBool,
    pool_capped: AtomicBool,
}

#[derive(Default)]
struct Table {
    /// What the program started with and has not closed (0-2 and the roots).
    initial: BTreeSet<u32>,
    /// What it opened, each one taken from the pool.
    opened: BTreeSet<u32>,
    /// Taken from the pool for a `path_open` under way.
    pending: u64,
}

impl FdTracker {
    pub(crate) fn new(caps: OpenFiles, initial: impl IntoIterator<Item = u32>) -> FdTracker {
        FdTracker {
            caps,
            table: Mutex::new(Table {
                initial: initial.into_iter().collect(),
                ..Table::default()
            }),
            program_capped: AtomicBool::new(false),
            pool_capped: AtomicBool::new(false),
        }
    }

    /// Before a `path_open`: `Err` when one more descriptor passes a cap; otherwise one is
    /// taken from the pool until [`Self::opened`] or [`Self::open_failed`].
    pub(crate) fn before_open(&self) -> Result<(), Refused> {
        let mut t = self.table.lock();
        let open = (t.initial.len() + t.opened.len()) as u64 + t.pending;
        if open >= self.caps.per_program {
            self.program_capped.store(true, Ordering::SeqCst);
            return Err(Refused::Program);
        }
        if !self.caps.pool.try_take() {
            self.pool_capped.store(true, Ordering::SeqCst);
            return Err(Refused::Pool);
        }
        t.pending += 1;
        Ok(())
    }

    /// A `path_open` gave the program `fd`.
    pub(crate) fn opened(&self, fd: u32) {
        let mut t = self.table.lock();
        t.pending -= 1;
        t.initial.remove(&fd);
        if !t.opened.insert(fd) {
            // wasix handed out a number it already had: nothing more is held.
            self.caps.pool.give_back(1);
        }
    }

    /// A `path_open` failed: what it took goes back.
    pub(crate) fn open_failed(&self) {
        self.table.lock().pending -= 1;
        self.caps.pool.give_back(1);
    }

    /// `fd_close(fd)` succeeded.
    pub(crate) fn closed(&self, fd: u32) {
        let mut t = self.table.lock();
        t.initial.remove(&fd);
        if t.opened.remove(&fd) {
            self.caps.pool.give_back(1);
        }
    }

    /// `fd_renumber(from, to)` succeeded: `to` was closed, then `from` became `to`.
    pub(crate) fn renumbered(&self, from: u32, to: u32) {
        if from == to {
            return;
        }
        let mut t = self.table.lock();
        t.initial.remove(&to);
        if t.opened.remove(&to) {
            self.caps.pool.give_back(1);
        }
        if t.opened.remove(&from) {
            t.opened.insert(to);
        } else if t.initial.remove(&from) {
            t.initial.insert(to);
        }
    }

    /// Whether an open was refused at the program's own cap, and at the pool's.
    pub(crate) fn capped(&self) -> (bool, bool) {
        (
            self.program_capped.load(Ordering::SeqCst),
            self.pool_capped.load(Ordering::SeqCst),
        )
    }
}

impl Drop for FdTracker {
    /// The program ended: every descriptor it held goes back to the pool (wasix closes them
    /// all at its exit).
    fn drop(&mut self) {
        let t = self.table.get_mut();
        self.caps.pool.give_back(t.opened.len() as u64 + t.pending);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tracker(per_program: u64, pool: &Arc<FdPool>) -> FdTracker {
        FdTracker::new(
            OpenFiles {
                per_program,
                pool: pool.clone(),
            },
            0..5,
        )
    }

    #[test]
    fn the_program_cap_counts_the_descriptors_it_starts_with() {
        let pool = FdPool::new(100);
        let t = tracker(7, &pool);
        for fd in 5..7 {
            t.before_open().unwrap();
            t.opened(fd);
        }
        assert_eq!(t.before_open(), Err(Refused::Program));
        assert_eq!(t.capped(), (true, false));
        t.closed(5);
        t.before_open().unwrap();
        t.opened(5);
        assert_eq!(pool.held(), 2);
        drop(t);
        assert_eq!(pool.held(), 0);
    }

    #[test]
    fn the_pool_is_shared_and_given_back() {
        let pool = FdPool::new(3);
        let (a, b) = (tracker(100, &pool), tracker(100, &pool));
        for fd in 5..7 {
            a.before_open().unwrap();
            a.opened(fd);
        }
        b.before_open().unwrap();
        b.open_failed();
        b.before_open().unwrap();
        b.opened(5);
        assert_eq!(a.before_open(), Err(Refused::Pool));
        assert_eq!(a.capped(), (false, true));
        drop(b);
        a.before_open().unwrap();
        a.opened(7);
        // Renumbering over an opened descriptor closes it; over a standard stream it moves
        // what was opened, which stays taken until closed.
        a.renumbered(7, 6);
        assert_eq!(pool.held(), 2);
        a.renumbered(6, 1);
        assert_eq!(pool.held(), 2);
        a.closed(1);
        a.closed(5);
        assert_eq!(pool.held(), 0);
    }
}
