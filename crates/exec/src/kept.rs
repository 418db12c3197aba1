//! Instances kept after their run for the next run of the same program on the same thread.
//!
//! Making an instance is most of a small guest's run: wasmer's `Instance::new` (a context entry
//! and a table slot for each of thousands of functions), wasix's import object, the wrapped
//! calls, and dropping all of it again. A program whose state between two runs is only its
//! memory and its globals (`image::strip` reads its code for that once, when it is compiled,
//! and marks it) has its instance put back instead (`Prepared::reset`): the memory to its
//! image and first size (the pages the run wrote get the image's bytes back, as a pooled region
//! does), the mutable globals to their first values, and a new wasix environment. The next run
//! then starts exactly where a new instance would.
//!
//! Kept per thread, since a store may only be used on the thread it belongs to: runs of a
//! sandbox happen on the process's kept threads, so the next `wc` finds the one the last left
//! on the same thread. Each thread keeps a few, and the process a bounded number (each holds
//! its memory's pages), the least recently used going first.
//!
//! An instance is kept as its run left it, the run's binding let go, and put back when the
//! thread has nothing else to do: a kept thread does it once its work is handed back
//! ([`settle`], from `threads.rs`), off the caller's wait; a run that wants it first does it
//! itself ([`take`]).

use std::cell::RefCell;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use crate::Program;
use crate::image::MemoryImage;
use crate::prepared::{Key, Prepared};

/// Instances one thread keeps.
const PER_THREAD: usize = 4;
/// Instances the process keeps, over all threads.
const IN_PROCESS: usize = 16;

static KEPT: AtomicUsize = AtomicUsize::new(0);

/// What a kept instance must match to serve a run: the same code over the same image, with the
/// same memory cap (its engine) and clock.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Slot {
    module: [u8; 32],
    image: u64,
    memory_limit: Option<u64>,
    deterministic: bool,
}

impl Slot {
    pub(crate) fn new(program: &Program, image: &Arc<MemoryImage>, key: &Key) -> Self {
        Self {
            module: program.hash,
            image: image.id,
            memory_limit: key.memory_limit,
            deterministic: key.deterministic,
        }
    }
}

/// A kept instance. Dropped inside the process's runtime, as a run drops its own, where the
/// thread still has one: at a thread's end the runtime's thread-local context may be gone
/// before this (entering it would panic, and a panic there aborts the process). A kept thread
/// lets go of its instances before it ends ([`clear`]).
struct Entry {
    slot: Slot,
    prepared: Option<Prepared>,
    /// Not put back yet since its run.
    dirty: bool,
}

impl Drop for Entry {
    fn drop(&mut self) {
        if let Some(prepared) = self.prepared.take() {
            KEPT.fetch_sub(1, Ordering::SeqCst);
            let context = match tokio::runtime::Handle::try_current() {
                Ok(_) => true,
                Err(e) => !e.is_thread_local_destroyed(),
            };
            let _tokio = context.then(|| crate::process().tokio.enter());
            drop(prepared);
        }
    }
}

/// Drops every instance this thread keeps: for a thread about to end.
pub(crate) fn clear() {
    let kept = THREAD
        .try_with(|kept| std::mem::take(&mut *kept.borrow_mut()))
        .unwrap_or_default();
    drop(kept);
}

thread_local! {
    /// Most recently kept last.
    static THREAD: RefCell<Vec<Entry>> = const { RefCell::new(Vec::new()) };
}

/// The instance this thread keeps for `slot`, put back as new, if any (it is no longer kept:
/// the run owns it).
pub(crate) fn take(slot: &Slot) -> Option<Prepared> {
    let entry = THREAD
        .try_with(|kept| {
            let mut kept = kept.borrow_mut();
            let at = kept.iter().rposition(|e| e.slot == *slot)?;
            Some(kept.remove(at))
        })
        .ok()
        .flatten()?;
    ready(entry)
}

/// An entry's instance, put back first if its run left it so; `None` when it cannot be (the
/// instance is dropped).
fn ready(mut entry: Entry) -> Option<Prepared> {
    let mut prepared = entry.prepared.take()?;
    KEPT.fetch_sub(1, Ordering::SeqCst);
    if entry.dirty && !prepared.reset(crate::process()) {
        let _tokio = crate::process().tokio.enter();
        drop(prepared);
        return None;
    }
    Some(prepared)
}

/// Keeps an instance as its run left it (its binding let go), for the next run on this thread
/// that wants `slot`. Dropped instead when the process keeps as many as it may.
pub(crate) fn keep(slot: Slot, prepared: Prepared) {
    if KEPT.fetch_add(1, Ordering::SeqCst) >= IN_PROCESS {
        KEPT.fetch_sub(1, Ordering::SeqCst);
        return;
    }
    let entry = Entry {
        slot,
        prepared: Some(prepared),
        dirty: true,
    };
    let evicted = THREAD
        .try_with(|kept| {
            let mut kept = kept.borrow_mut();
            let evicted = (kept.len() >= PER_THREAD).then(|| kept.remove(0));
            kept.push(entry);
            evicted
        })
        .ok()
        .flatten();
    // Dropped outside the borrow: dropping it may run wasix code.
    drop(evicted);
}

/// Puts back every instance this thread keeps as its run left it: for a thread whose work is
/// done, so that the next run finds its instance ready. One that cannot be is dropped.
pub(crate) fn settle() {
    let _tokio = crate::process().tokio.enter();
    let _ = THREAD.try_with(|kept| {
        kept.borrow_mut().retain_mut(|e| {
            !std::mem::take(&mut e.dirty)
                || e.prepared
                    .as_mut()
                    .is_some_and(|p| p.reset(crate::process()))
        });
    });
}
