//! Threads for the work around guests (a run's shell, a pipeline's stages, a guest's spawn),
//! kept for the next piece of work when they finish one.
//!
//! A run of a builtin used to start a thread and end it: `clone3`, the stack's `mmap` and guard
//! `mprotect`, then `munmap` and the wake-ups, 30-40 µs of a 0.12 ms run. A finished thread now
//! waits for more work for [`IDLE_FOR`]; past [`MAX_IDLE`] waiting threads, or that long
//! without work, it ends.
//!
//! What a piece of work leaves on its thread:
//! - Its stack pages: a deep recursion (the shell's nesting limits allow hundreds of MiB)
//!   would stay resident in a waiting thread. The pages below the waiting frame are given back
//!   to the kernel after each piece of work (`MADV_DONTNEED`; a few µs when nothing is there).
//! - Thread-locals: the crates that use them on these threads set them before each use
//!   (`image::offer`, `memory::take_growth_refused`, the shell printer's carried documents).
//! - A panic: caught, and handed to whoever joins, as `std::thread` does; the thread goes on.

use std::any::Any;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::mpsc::{self, Receiver, RecvTimeoutError, Sender, SyncSender};
use std::time::Duration;

use parking_lot::Mutex;

/// Waiting threads kept at most.
const MAX_IDLE: usize = 8;
/// How long a thread waits for work before it ends.
const IDLE_FOR: Duration = Duration::from_secs(10);

type Work = Box<dyn FnOnce() + Send>;

struct Waiting {
    id: u64,
    stack_size: usize,
    work: Sender<Work>,
}

struct Pool {
    waiting: Vec<Waiting>,
    next_id: u64,
}

static POOL: Mutex<Pool> = Mutex::new(Pool {
    waiting: Vec::new(),
    next_id: 0,
});

/// The result of a piece of work started by [`spawn`].
pub struct Handle<T> {
    result: Receiver<std::thread::Result<T>>,
}

impl<T> Handle<T> {
    /// Waits for the work; `Err` with the panic's payload if it panicked.
    pub fn join(self) -> std::thread::Result<T> {
        self.result.recv().unwrap_or_else(|_| {
            Err(Box::new("the thread ended without a result") as Box<dyn Any + Send>)
        })
    }
}

/// Runs `f` on a thread with a stack of `stack_size` bytes: a waiting one with a stack of that
/// size if there is one, else a new one. `Err` only when no thread could be started.
pub fn spawn<T: Send + 'static>(
    stack_size: usize,
    f: impl FnOnce() -> T + Send + 'static,
) -> std::io::Result<Handle<T>> {
    let (done, result): (SyncSender<std::thread::Result<T>>, _) = mpsc::sync_channel(1);
    let mut work: Work = Box::new(move || {
        let _ = done.send(catch_unwind(AssertUnwindSafe(f)));
    });
    loop {
        let waiting = {
            let mut pool = POOL.lock();
            let found = pool
                .waiting
                .iter()
                .rposition(|w| w.stack_size == stack_size);
            found.map(|i| pool.waiting.swap_remove(i))
        };
        let Some(w) = waiting else { break };
        // A listed thread waits for work until it takes itself off the list, so this fails
        // only if it ended some other way; the work is then offered to the next.
        match w.work.send(work) {
            Ok(()) => return Ok(Handle { result }),
            Err(mpsc::SendError(back)) => work = back,
        }
    }
    let (tx, rx) = mpsc::channel::<Work>();
    let id = {
        let mut pool = POOL.lock();
        pool.next_id += 1;
        pool.next_id
    };
    tx.send(work).expect("the receiver is here");
    std::thread::Builder::new()
        .name("wasmsand-worker".into())
        .stack_size(stack_size)
        .spawn(move || serve(id, stack_size, tx, rx))?;
    Ok(Handle { result })
}

fn serve(id: u64, stack_size: usize, me: Sender<Work>, work: Receiver<Work>) {
    let stack = stack_bounds();
    let mut next = work.recv().ok();
    while let Some(w) = next.take() {
        w();
        {
            let mut pool = POOL.lock();
            if pool.waiting.len() >= MAX_IDLE {
                drop(pool);
                crate::kept::clear();
                return;
            }
            pool.waiting.push(Waiting {
                id,
                stack_size,
                work: me.clone(),
            });
        }
        // The work's result is handed back: instances its runs left are put back now, while
        // the caller goes on, rather than by the next run that wants one. Listed as waiting
        // first, so that new work comes to this thread, where they are kept, and queues behind
        // this.
        crate::kept::settle();
        release_stack(stack);
        next = match work.recv_timeout(IDLE_FOR) {
            Ok(w) => Some(w),
            Err(RecvTimeoutError::Timeout) => {
                let mut pool = POOL.lock();
                match pool.waiting.iter().position(|w| w.id == id) {
                    Some(i) => {
                        pool.waiting.swap_remove(i);
                        None
                    }
                    // Taken from the list just now: its work is on the way.
                    None => {
                        drop(pool);
                        work.recv().ok()
                    }
                }
            }
            Err(RecvTimeoutError::Disconnected) => None,
        };
    }
    crate::kept::clear();
}

/// The lowest address of this thread's stack and its size, from the thread's attributes.
fn stack_bounds() -> Option<(usize, usize)> {
    // SAFETY: `attr` is initialized by pthread_getattr_np before it is read and destroyed
    // after; the out-pointers are valid locals.
    unsafe {
        let mut attr: libc::pthread_attr_t = std::mem::zeroed();
        if libc::pthread_getattr_np(libc::pthread_self(), &mut attr) != 0 {
            return None;
        }
        let mut addr: *mut libc::c_void = std::ptr::null_mut();
        let mut size: libc::size_t = 0;
        let rc = libc::pthread_attr_getstack(&attr, &mut addr, &mut size);
        libc::pthread_attr_destroy(&mut attr);
        (rc == 0).then_some((addr as usize, size))
    }
}

/// Gives back the pages of this thread's stack below the current frame (less a margin that the
/// waiting loop itself uses), which the last piece of work may have filled.
fn release_stack(stack: Option<(usize, usize)>) {
    const PAGE: usize = 4096;
    const MARGIN: usize = 64 << 10;
    let Some((low, _)) = stack else { return };
    let here = &stack as *const _ as usize;
    let high = here.saturating_sub(MARGIN) & !(PAGE - 1);
    // The lowest page is the guard page glibc leaves unmapped.
    let low = low + PAGE;
    if high > low {
        // SAFETY: [low, high) lies in this thread's own stack, below every live frame (the
        // current one is above `here - MARGIN`); MADV_DONTNEED makes those pages read as zero
        // on their next use, which no live data depends on.
        unsafe {
            libc::madvise(low as *mut libc::c_void, high - low, libc::MADV_DONTNEED);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn threads_are_reused_and_panics_reach_the_joiner() {
        let first = spawn(1 << 20, || std::thread::current().id())
            .unwrap()
            .join()
            .unwrap();
        // The first thread is waiting again; the next piece of work finds one (perhaps another
        // test's, which is as good).
        let again = spawn(1 << 20, || std::thread::current().id())
            .unwrap()
            .join()
            .unwrap();
        let _ = (first, again);
        let panicked = spawn(1 << 20, || -> u32 { panic!("boom") }).unwrap().join();
        let payload = panicked.unwrap_err();
        assert_eq!(payload.downcast_ref::<&str>(), Some(&"boom"));
        assert_eq!(spawn(1 << 20, || 7).unwrap().join().unwrap(), 7);
    }

    #[test]
    fn a_reused_thread_recurses_as_deep_as_a_new_one() {
        fn depth(n: u32) -> u32 {
            let pad = std::hint::black_box([n as u8; 1024]);
            if n == 0 {
                pad[0] as u32
            } else {
                depth(n - 1) + pad[1] as u32 - pad[1] as u32
            }
        }
        // 8 MiB of frames on a 64 MiB stack, twice on whatever threads the pool gives.
        for _ in 0..2 {
            assert_eq!(spawn(64 << 20, || depth(8_000)).unwrap().join().unwrap(), 0);
        }
    }
}
