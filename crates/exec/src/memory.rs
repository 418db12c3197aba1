//! Linear memories whose address-space reservations are reused across runs.
//!
//! A fresh wasmer memory is a new 8 GiB reservation: every page the module's data segments are
//! copied into is then a page fault (zero-fill plus cgroup charge), and dropping the store
//! unmaps it all again. For the coreutils module (half a megabyte of data) that was ~40% of a
//! run of `true` (~0.3 ms of faults and ~50 us of munmap). A released reservation keeps the
//! pages its data segments were written to, zeroed, and gives everything else back to the
//! kernel; the next instance copies its data into pages that are already there.
//!
//! Invariant of a region in the pool: every byte of it reads as zero. Whoever takes it makes
//! exactly its own initial size accessible. That is what a fresh mapping gives, so no state of
//! one run can reach the next (tests/isolation.rs checks it across modules).

use std::ops::Range;
use std::ptr::NonNull;
use std::sync::atomic::{AtomicUsize, Ordering};

use parking_lot::Mutex;
use wasmer::sys::vm::{
    LinearMemory, MemoryError, MemoryStyle, Trap, VMMemoryDefinition, VMOwnedMemory, VMSharedMemory,
};
use wasmer::{MemoryType, Pages};

/// Reservations kept for reuse; more concurrent runs than this allocate and free their own.
const POOL_SIZE: usize = 8;
/// Resident (zeroed) bytes a pooled region may keep; a larger data image is faulted in anew.
const MAX_KEEP: usize = 8 << 20;
const OS_PAGE: usize = 4096;

static POOL: Mutex<Vec<Region>> = Mutex::new(Vec::new());

/// One static-style reservation: wasm32's 4 GiB plus wasmer's offset guard, all inaccessible
/// except `[0, accessible)`.
struct Region {
    base: NonNull<u8>,
    len: usize,
    accessible: usize,
    /// Highest address made accessible since the last scrub: the extent that may hold
    /// resident pages.
    touched: usize,
}

// SAFETY: the region is plain memory owned by whoever holds the `Region`.
unsafe impl Send for Region {}
unsafe impl Sync for Region {}

impl Region {
    fn reserve(len: usize) -> Result<Self, MemoryError> {
        // SAFETY: a fresh anonymous mapping, touching nothing else.
        let ptr = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                len,
                libc::PROT_NONE,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_NORESERVE,
                -1,
                0,
            )
        };
        if ptr == libc::MAP_FAILED {
            return Err(MemoryError::Region(format!(
                "cannot reserve linear memory: {}",
                std::io::Error::last_os_error()
            )));
        }
        // Transparent huge pages cut the faults of a large data image (the multicall
        // coreutils carries megabytes) ~500-fold the first time a region is used. Advisory
        // only: where THP is off this changes nothing.
        // SAFETY: a hint about the mapping just made.
        unsafe { libc::madvise(ptr, len, libc::MADV_HUGEPAGE) };
        Ok(Self {
            base: NonNull::new(ptr.cast()).expect("mmap never returns null on success"),
            len,
            accessible: 0,
            touched: 0,
        })
    }

    fn set_accessible(&mut self, bytes: usize) -> Result<(), MemoryError> {
        let (from, to, prot) = match bytes.cmp(&self.accessible) {
            std::cmp::Ordering::Equal => return Ok(()),
            std::cmp::Ordering::Greater => {
                (self.accessible, bytes, libc::PROT_READ | libc::PROT_WRITE)
            }
            std::cmp::Ordering::Less => (bytes, self.accessible, libc::PROT_NONE),
        };
        // SAFETY: `[from, to)` lies inside the reservation (callers keep `bytes` within 4 GiB).
        let rc = unsafe { libc::mprotect(self.base.as_ptr().add(from).cast(), to - from, prot) };
        if rc != 0 {
            return Err(MemoryError::Region(format!(
                "cannot change linear memory protection: {}",
                std::io::Error::last_os_error()
            )));
        }
        self.accessible = bytes;
        self.touched = self.touched.max(bytes);
        Ok(())
    }

    /// Brings the region back to all zeroes, keeping the pages of `keep` resident. False if
    /// the kernel refused, in which case the region must not be reused.
    fn scrub(&mut self, keep: Range<usize>) -> bool {
        let base = self.base.as_ptr();
        // SAFETY: `keep` is within the accessible part (checked by the caller); everything
        // else handed to madvise lies within the reservation.
        unsafe {
            std::ptr::write_bytes(base.add(keep.start), 0, keep.len());
            let dontneed = |r: Range<usize>| {
                r.is_empty()
                    || libc::madvise(base.add(r.start).cast(), r.len(), libc::MADV_DONTNEED) == 0
            };
            // Private anonymous pages read as zero after MADV_DONTNEED.
            if !(dontneed(0..keep.start) && dontneed(keep.end..self.touched)) {
                return false;
            }
        }
        self.touched = self.accessible;
        true
    }
}

impl Drop for Region {
    fn drop(&mut self) {
        // SAFETY: unmapping exactly the reservation this value owns.
        unsafe { libc::munmap(self.base.as_ptr().cast(), self.len) };
    }
}

/// A local linear memory of static style backed by a pooled region.
#[derive(Debug)]
pub(crate) struct PooledMemory {
    region: Option<Region>,
    definition: NonNull<VMMemoryDefinition>,
    ty: MemoryType,
    style: MemoryStyle,
    /// Span written by data initializers, to be kept resident for the next instance.
    data_lo: AtomicUsize,
    data_hi: AtomicUsize,
}

impl std::fmt::Debug for Region {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Region")
            .field("accessible", &self.accessible)
            .finish()
    }
}

// SAFETY: as wasmer's own `VMOwnedMemory`: the definition belongs to the instance that owns
// this memory, and the memory moves between threads only with its store.
unsafe impl Send for PooledMemory {}
unsafe impl Sync for PooledMemory {}

impl PooledMemory {
    /// A memory for a local definition at `definition`; `None` when the type or style is not
    /// one the pool serves (shared or dynamic memories), for the caller to fall back on.
    ///
    /// # Safety
    /// `definition` must point to the instance's `VMMemoryDefinition` for this memory and
    /// outlive the returned value (as for wasmer's `VMOwnedMemory::from_definition`).
    pub(crate) unsafe fn new(
        ty: &MemoryType,
        style: &MemoryStyle,
        definition: NonNull<VMMemoryDefinition>,
    ) -> Option<Result<Self, MemoryError>> {
        if ty.shared || !matches!(style, MemoryStyle::Static) {
            return None;
        }
        Some(unsafe { Self::create(ty, style, definition) })
    }

    unsafe fn create(
        ty: &MemoryType,
        style: &MemoryStyle,
        mut definition: NonNull<VMMemoryDefinition>,
    ) -> Result<Self, MemoryError> {
        let bound = MemoryStyle::static_bound();
        if ty.minimum > bound || ty.maximum.is_some_and(|m| m > bound) {
            return Err(MemoryError::MinimumMemoryTooLarge {
                min_requested: ty.minimum,
                max_allowed: bound,
            });
        }
        if let Some(max) = ty.maximum.filter(|m| *m < ty.minimum) {
            return Err(MemoryError::InvalidMemory {
                reason: format!(
                    "the maximum ({} pages) is less than the minimum ({} pages)",
                    max.0, ty.minimum.0
                ),
            });
        }
        let len = bound.bytes().0 + style.offset_guard_size() as usize;
        let pooled = POOL.lock().pop().filter(|r| r.len == len);
        let mut region = match pooled {
            Some(r) => r,
            None => Region::reserve(len)?,
        };
        let bytes = ty.minimum.bytes().0;
        region.set_accessible(bytes)?;
        // SAFETY: the caller guarantees the definition is valid and ours to fill.
        unsafe {
            let d = definition.as_mut();
            d.base = region.base.as_ptr();
            d.current_length = bytes;
        }
        Ok(Self {
            region: Some(region),
            definition,
            ty: *ty,
            style: *style,
            data_lo: AtomicUsize::new(usize::MAX),
            data_hi: AtomicUsize::new(0),
        })
    }

    fn current_length(&self) -> usize {
        // SAFETY: the definition outlives this memory (see `new`).
        unsafe { self.definition.as_ref().current_length }
    }
}

impl LinearMemory for PooledMemory {
    fn ty(&self) -> MemoryType {
        MemoryType {
            minimum: self.size(),
            ..self.ty
        }
    }

    fn size(&self) -> Pages {
        Pages((self.current_length() / wasmer::WASM_PAGE_SIZE) as u32)
    }

    fn style(&self) -> MemoryStyle {
        self.style
    }

    fn grow(&mut self, delta: Pages) -> Result<Pages, MemoryError> {
        let prev = self.size();
        if delta.0 == 0 {
            return Ok(prev);
        }
        let fail = MemoryError::CouldNotGrow {
            current: prev,
            attempted_delta: delta,
        };
        let new = prev.checked_add(delta).ok_or_else(|| fail.clone())?;
        if new > Pages::max_value() || self.ty.maximum.is_some_and(|m| new > m) {
            return Err(fail);
        }
        let region = self.region.as_mut().ok_or(fail)?;
        region.set_accessible(new.bytes().0)?;
        // SAFETY: the definition outlives this memory (see `new`); the base never moves.
        unsafe { self.definition.as_mut().current_length = new.bytes().0 };
        Ok(prev)
    }

    fn grow_at_least(&mut self, min_size: u64) -> Result<(), MemoryError> {
        let current = self.current_length() as u64;
        if current < min_size {
            let pages = (min_size - current).div_ceil(wasmer::WASM_PAGE_SIZE as u64);
            self.grow(Pages(pages as u32))?;
        }
        Ok(())
    }

    fn reset(&mut self) -> Result<(), MemoryError> {
        // SAFETY: as in `grow`.
        unsafe { self.definition.as_mut().current_length = 0 };
        Ok(())
    }

    fn vmmemory(&self) -> NonNull<VMMemoryDefinition> {
        self.definition
    }

    fn try_clone(&self) -> Result<Box<dyn LinearMemory + Send + Sync + 'static>, MemoryError> {
        Err(MemoryError::MemoryNotShared)
    }

    unsafe fn initialize_with_data(&self, start: usize, data: &[u8]) -> Result<(), Trap> {
        self.data_lo.fetch_min(start, Ordering::Relaxed);
        self.data_hi
            .fetch_max(start + data.len(), Ordering::Relaxed);
        // SAFETY: the caller checked `start + data.len()` against the current length.
        unsafe {
            wasmer::sys::vm::initialize_memory_with_data(self.definition.as_ref(), start, data)
        }
    }

    fn copy(&self) -> Result<Box<dyn LinearMemory + Send + Sync + 'static>, MemoryError> {
        let copy = VMOwnedMemory::new(&self.ty(), &self.style)?;
        let len = self.current_length();
        // SAFETY: both memories are at least `len` bytes long and distinct.
        unsafe {
            let to = copy.vmmemory().as_ref().base;
            std::ptr::copy_nonoverlapping(self.definition.as_ref().base, to, len);
        }
        Ok(Box::new(copy))
    }

    fn as_shared(&self) -> Result<VMSharedMemory, MemoryError> {
        Err(MemoryError::MemoryNotShared)
    }
}

impl Drop for PooledMemory {
    fn drop(&mut self) {
        let Some(mut region) = self.region.take() else {
            return;
        };
        let (lo, hi) = (
            self.data_lo.load(Ordering::Relaxed),
            self.data_hi.load(Ordering::Relaxed),
        );
        let keep = if lo < hi {
            let start = lo / OS_PAGE * OS_PAGE;
            let end = hi.div_ceil(OS_PAGE) * OS_PAGE;
            start..end.min(region.accessible).min(start + MAX_KEEP)
        } else {
            0..0
        };
        let keep = if keep.start < keep.end { keep } else { 0..0 };
        // The next user sets the accessible size to its own initial size.
        if region.scrub(keep) {
            let mut pool = POOL.lock();
            if pool.len() < POOL_SIZE {
                pool.push(region);
            }
        }
    }
}
