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
/// Wrapped WASI calls and the tool-call channel call the instance again from inside a host
/// function (`Function::call`). A store interrupt that lands in such a nested call corrupts wasmer's
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

    /// Ready for another run of a kept instance.
    pub(crate) fn reset(&self) {
        self.stopping.store(false, Ordering::SeqCst);
    }

    pub(crate) fn begin_stop(&self) {
        self.stopping.store(true, Ordering::SeqCst);
    }

    pub(crate) fn may_interrupt(&self) -> bool {
        self.in_host.load(Ordering::SeqCst) == 0
    }
}

/// Makes the store drop a watchdog interrupt that lands outside compiled guest code.
///
/// wasmer's SIGUSR1 handler unwinds the guest whenever the stack pointer lies on the wasm
/// stack, and host functions (WASI calls, wasmer's own libcalls such as the one that throws a
/// wasm exception) run on that stack too. Unwound from the middle of host code, the run leaves
/// whatever that code held locked: seen as the `backtrace` crate's process-wide lock left held
/// by an exception being thrown, after which every trap in the process waited forever. The
/// store's trap handler runs first in wasmer's signal handler; it claims an interrupt whose
/// program counter is in host code, so wasmer returns without unwinding, and the watchdog's
/// next retry lands once the guest is back in its own code (or the run has returned).
pub(crate) fn drop_interrupts_in_host_code(store: &mut wasmer::Store) {
    #[cfg(all(
        target_os = "linux",
        any(target_arch = "x86_64", target_arch = "aarch64")
    ))]
    {
        let host = host_code();
        store.set_trap_handler(Some(Box::new(move |signum, _info, context| {
            // Async-signal context: no allocation, no locks; `host` was read before the run.
            signum == libc::SIGUSR1
                && !context.is_null()
                && in_ranges(host, interrupted_pc(context))
        })));
    }
    #[cfg(not(all(
        target_os = "linux",
        any(target_arch = "x86_64", target_arch = "aarch64")
    )))]
    let _ = store;
}

/// The executable segments of the program and of the shared libraries the dynamic loader has
/// loaded (the vDSO among them), sorted: host code. Compiled guest code is not among them: it
/// lives in anonymous mappings or in cache files wasmer maps itself, which the loader does not
/// know. Read once; a library loaded later counts as guest code, which is what every interrupt
/// was treated as before.
#[cfg(target_os = "linux")]
fn host_code() -> &'static [(usize, usize)] {
    static HOST: OnceLock<Vec<(usize, usize)>> = OnceLock::new();
    HOST.get_or_init(|| {
        let mut ranges: Vec<(usize, usize)> = Vec::new();
        // SAFETY: the callback only reads the `dl_phdr_info` the loader hands it, for the
        // duration of the call, and `data` is the `Vec` above.
        unsafe {
            libc::dl_iterate_phdr(Some(collect_segments), (&raw mut ranges).cast());
        }
        ranges.sort_unstable();
        ranges
    })
}

#[cfg(target_os = "linux")]
unsafe extern "C" fn collect_segments(
    info: *mut libc::dl_phdr_info,
    _size: libc::size_t,
    data: *mut libc::c_void,
) -> libc::c_int {
    // SAFETY: see `host_code`; `dlpi_phdr` points at `dlpi_phnum` program headers.
    unsafe {
        let info = &*info;
        let ranges = &mut *data.cast::<Vec<(usize, usize)>>();
        if !info.dlpi_phdr.is_null() {
            let headers = std::slice::from_raw_parts(info.dlpi_phdr, usize::from(info.dlpi_phnum));
            for h in headers {
                if h.p_type == libc::PT_LOAD && h.p_flags & libc::PF_X != 0 {
                    // Address arithmetic modulo 2^64, as the loader's own: an object linked
                    // above where it was loaded has a "negative" bias (gVisor's vDSO does),
                    // and a checked add would panic here, where a panic aborts the process.
                    let start = (info.dlpi_addr as usize).wrapping_add(h.p_vaddr as usize);
                    ranges.push((start, start.wrapping_add(h.p_memsz as usize)));
                }
            }
        }
    }
    0
}

#[cfg(target_os = "linux")]
fn in_ranges(ranges: &[(usize, usize)], pc: usize) -> bool {
    let at = ranges.partition_point(|&(start, _)| start <= pc);
    at > 0 && pc < ranges[at - 1].1
}

#[cfg(all(target_os = "linux", target_arch = "x86_64"))]
fn interrupted_pc(context: *const libc::c_void) -> usize {
    // SAFETY: the kernel passes a `ucontext_t` as the third argument of an SA_SIGINFO handler.
    unsafe {
        (*(context as *const libc::ucontext_t)).uc_mcontext.gregs[libc::REG_RIP as usize] as usize
    }
}

#[cfg(all(target_os = "linux", target_arch = "aarch64"))]
fn interrupted_pc(context: *const libc::c_void) -> usize {
    // SAFETY: the kernel passes a `ucontext_t` as the third argument of an SA_SIGINFO handler.
    unsafe { (*(context as *const libc::ucontext_t)).uc_mcontext.pc as usize }
}

#[cfg(all(test, target_os = "linux"))]
mod tests {
    use super::*;

    #[test]
    fn host_code_holds_this_program_and_libc_but_not_heap_or_anonymous_pages() {
        let host = host_code();
        let ours: fn(&[(usize, usize)], usize) -> bool = in_ranges;
        let libc_fn: unsafe extern "C" fn() -> libc::pid_t = libc::getpid;
        assert!(in_ranges(host, ours as usize), "{host:x?}");
        assert!(in_ranges(host, libc_fn as usize), "{host:x?}");
        let heap = Box::new(0u8);
        assert!(!in_ranges(host, &*heap as *const u8 as usize));
        // SAFETY: a fresh anonymous mapping, unmapped below.
        let anon = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                4096,
                libc::PROT_READ | libc::PROT_EXEC,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
                -1,
                0,
            )
        };
        assert_ne!(anon, libc::MAP_FAILED);
        assert!(!in_ranges(host, anon as usize));
        // SAFETY: mapped above with this length.
        unsafe { libc::munmap(anon, 4096) };
    }

    #[test]
    fn ranges_are_half_open() {
        let r = [(0x10, 0x20), (0x40, 0x50)];
        assert!(in_ranges(&r, 0x10) && in_ranges(&r, 0x1f) && in_ranges(&r, 0x40));
        assert!(!in_ranges(&r, 0x20) && !in_ranges(&r, 0x0f) && !in_ranges(&r, 0x50));
    }
}
