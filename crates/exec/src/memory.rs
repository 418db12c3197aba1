//! Linear memories whose address-space reservations are reused across runs.
//!
//! A fresh wasmer memory is a new 8 GiB reservation: every page the module's data segments are
//! copied into is then a page fault (zero-fill plus cgroup charge), and dropping the store
//! unmaps it all again. For the coreutils module (half a megabyte of data) that was ~40% of a
//! run of `true` (~0.3 ms of faults and ~50 us of munmap). A released reservation keeps the
//! pages the run touched, zeroed; the next instance copies its data into pages that are
//! already there.
//!
//! Invariant of a region in the pool: every byte of it reads as zero. Whoever takes it makes
//! exactly its own initial size accessible. That is what a fresh mapping gives, so no state of
//! one run can reach the next (tests/integration/isolation.rs checks it across modules).
//!
//! A module with a [`MemoryImage`] (one with 64 KiB of data or more: CPython, the coreutils,
//! jq) gets a region whose start is the image mapped copy-on-write: its data segments are not
//! copied at all. A released region is reset in place: the pages the run wrote (private
//! copies, found in `/proc/self/pagemap`) get the image's bytes back and stay resident, so the
//! next run writes them without a copy-on-write fault; the pages it only read stay mapped. It
//! then reads as the image again and zero past it. Such regions wait in their own pool, for
//! instances of the same image only, the least recently returned making room for a new one;
//! a small one is reset on the run's thread, a large one (CPython's) on a thread of its own.

use std::ops::Range;
use std::ptr::NonNull;
use std::sync::Arc;

use parking_lot::Mutex;
use wasmer::sys::vm::{
    LinearMemory, MemoryError, MemoryStyle, VMMemoryDefinition, VMOwnedMemory, VMSharedMemory,
};
use wasmer::{MemoryType, Pages};

use crate::image::MemoryImage;

thread_local! {
    /// Set when a `memory.grow` of the guest running on this thread was refused at the
    /// memory's maximum (the run's cap): a program that handles the failed allocation itself
    /// (`sort: out of memory`, exit 1) still ran into the memory limit.
    static GROWTH_REFUSED: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
}

/// Whether a growth was refused on this thread since the last call (and clears it).
pub(crate) fn take_growth_refused() -> bool {
    GROWTH_REFUSED.with(|c| c.replace(false))
}

/// Reservations kept for reuse; more concurrent runs than this allocate and free their own.
const POOL_SIZE: usize = 8;
/// Resident (zeroed) bytes a pooled region may keep, from its start.
const MAX_KEEP: usize = 8 << 20;
const OS_PAGE: usize = 4096;

/// Image regions kept for reuse, of all images together.
const IMAGE_POOL_SIZE: usize = 12;

/// Image regions up to this size are reset on the run's own thread, as plain ones are scrubbed:
/// the next run of the same small guest follows at once and wants the region back warm.
const INLINE_RESET_MAX: usize = 4 << 20;

/// Private pages (copies of the image's) an image region may keep between runs.
const MAX_PRIVATE_PAGES: usize = MAX_KEEP / OS_PAGE;

/// Pagemap entry bits (`Documentation/admin-guide/mm/pagemap.rst`).
const PM_PRESENT: u64 = 1 << 63;
const PM_SWAP: u64 = 1 << 62;
/// A page of a file (or shared anonymous memory): in a private file mapping, a page nobody
/// wrote.
const PM_FILE: u64 = 1 << 61;

/// The pagemap entries of the pages of `[addr, addr + len)` (page-aligned), read from
/// `/proc/self/pagemap` (one `u64` per page; the flag bits need no privilege).
fn page_flags(addr: *const u8, len: usize) -> Option<Vec<u64>> {
    use std::os::unix::fs::FileExt;
    static PAGEMAP: std::sync::OnceLock<Option<std::fs::File>> = std::sync::OnceLock::new();
    let file = PAGEMAP
        .get_or_init(|| std::fs::File::open("/proc/self/pagemap").ok())
        .as_ref()?;
    let mut bytes = vec![0u8; len / OS_PAGE * 8];
    file.read_exact_at(&mut bytes, (addr as usize / OS_PAGE * 8) as u64)
        .ok()?;
    Some(
        bytes
            .chunks_exact(8)
            .map(|c| u64::from_ne_bytes(c.try_into().expect("8 bytes")))
            .collect(),
    )
}

static POOL: Mutex<Vec<Region>> = Mutex::new(Vec::new());
/// Regions holding a mapped image, reset to it (and zero past it).
static IMAGE_POOL: Mutex<Vec<Region>> = Mutex::new(Vec::new());

/// One static-style reservation: wasm32's 4 GiB plus wasmer's offset guard, all inaccessible
/// except `[0, accessible)`.
struct Region {
    base: NonNull<u8>,
    len: usize,
    accessible: usize,
    /// Highest address made accessible since the last scrub: the extent that may hold
    /// resident pages.
    touched: usize,
    /// The image mapped over the start of the region, if any.
    image: Option<Arc<MemoryImage>>,
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
        // No MADV_HUGEPAGE: a huge page would make the scrub zero 2 MiB for a few bytes used.
        Ok(Self {
            base: NonNull::new(ptr.cast()).expect("mmap never returns null on success"),
            len,
            accessible: 0,
            touched: 0,
            image: None,
        })
    }

    /// A fresh reservation whose start reads as `image`.
    fn with_image(len: usize, image: Arc<MemoryImage>) -> Result<Self, MemoryError> {
        let mut region = Self::reserve(len)?;
        if image.len > len {
            return Err(MemoryError::Region(
                "memory image larger than the reservation".into(),
            ));
        }
        // SAFETY: the image lies inside the reservation just made, which nothing references.
        unsafe { image.map_at(region.base.as_ptr()) }
            .map_err(|e| MemoryError::Region(format!("cannot map the memory image: {e}")))?;
        region.image = Some(image);
        Ok(region)
    }

    /// Brings an image region back to the image (and zero past it). False if the kernel
    /// refused, in which case the region must not be reused.
    ///
    /// The pages the run wrote are private copies of the image's: they are kept and the image's
    /// bytes read back into them, so the next run writes them again without a fault (a
    /// copy-on-write fault costs several times the copy, and dropping the page was another
    /// cost); pages it only read stay mapped to the image. When the pagemap cannot be read or
    /// the region holds more than `MAX_PRIVATE_PAGES` private pages (runs unlike each other
    /// wrote different pages), every page is dropped instead (`MADV_DONTNEED`) and reads as the
    /// image again.
    fn reset_to_image(&mut self) -> bool {
        let restored = self
            .image
            .clone()
            .is_some_and(|image| self.restore_in_place(&image));
        if !restored && self.touched > 0 {
            // SAFETY: `[0, touched)` lies inside the reservation.
            let rc = unsafe {
                libc::madvise(self.base.as_ptr().cast(), self.touched, libc::MADV_DONTNEED)
            };
            if rc != 0 {
                return false;
            }
        }
        self.touched = self.accessible;
        true
    }

    /// Restores the image's pages a run made private and zeroes the pages it used past the
    /// image (up to `MAX_KEEP` of them, dropping the rest). False if nothing may be trusted to
    /// be restored: the caller then drops every page.
    ///
    /// Which pages are the run's is read from `/proc/self/pagemap`: in the image's range every
    /// page that is not the image file's own (a private copy, the shared zero page, a page on
    /// swap or being migrated) is rewritten from the image; past it every page present or on
    /// swap is zeroed. A page the pagemap shows as absent reads as the image (or zero) anyway.
    fn restore_in_place(&mut self, image: &MemoryImage) -> bool {
        let base = self.base.as_ptr();
        // Every run makes at least the image accessible (`create`), and the region is larger.
        let image_end = image.len;
        if self.touched < image_end || self.accessible < image_end {
            return false;
        }
        let keep_end = self.touched.min(image_end + MAX_KEEP) / OS_PAGE * OS_PAGE;
        let Some(flags) = page_flags(base, keep_end) else {
            return false;
        };
        let image_pages = image_end / OS_PAGE;
        let private = |f: u64| f & PM_SWAP != 0 || (f & PM_PRESENT != 0 && f & PM_FILE == 0);
        if flags[..image_pages].iter().filter(|f| private(**f)).count() > MAX_PRIVATE_PAGES {
            return false;
        }
        // Past the accessible part nothing was written since the last reset (memory only grows
        // during a run), and it was zero then.
        let writable = self.accessible.min(keep_end) / OS_PAGE;
        let mut page = 0;
        while page < writable {
            let in_image = page < image_pages;
            let dirty = |f: u64| {
                if in_image {
                    private(f)
                } else {
                    f & (PM_PRESENT | PM_SWAP) != 0
                }
            };
            if !dirty(flags[page]) {
                page += 1;
                continue;
            }
            let start = page;
            let end = if in_image { image_pages } else { writable };
            while page < end && dirty(flags[page]) {
                page += 1;
            }
            let range = start * OS_PAGE..page * OS_PAGE;
            if in_image {
                // SAFETY: the range lies within the image, mapped at `base`, and is accessible.
                if unsafe { image.restore(base, range) }.is_err() {
                    return false;
                }
            } else {
                // SAFETY: the range lies within the accessible part of the reservation.
                unsafe { std::ptr::write_bytes(base.add(range.start), 0, range.len()) };
            }
        }
        if keep_end < self.touched {
            // SAFETY: `[keep_end, touched)` lies inside the reservation.
            let rc = unsafe {
                libc::madvise(
                    base.add(keep_end).cast(),
                    self.touched - keep_end,
                    libc::MADV_DONTNEED,
                )
            };
            if rc != 0 {
                return false;
            }
        }
        true
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

    /// Brings the region back to all zeroes. Pages the last run touched stay resident and are
    /// zeroed in place, up to `MAX_KEEP`: the next run of the same guest touches the same pages
    /// (data image, stack, heap), and a page fault costs ~10x a memset of the page. False if
    /// the kernel refused, in which case the region must not be reused.
    fn scrub(&mut self) -> bool {
        let base = self.base.as_ptr();
        let keep_end = self.touched.min(MAX_KEEP) / OS_PAGE * OS_PAGE;
        // SAFETY: every range handed to madvise, mincore and write_bytes lies within the
        // reservation, and write_bytes only within its accessible part.
        unsafe {
            // Private anonymous pages read as zero after MADV_DONTNEED.
            let dontneed = |r: Range<usize>| {
                r.is_empty()
                    || libc::madvise(base.add(r.start).cast(), r.len(), libc::MADV_DONTNEED) == 0
            };
            if !dontneed(keep_end..self.touched) {
                return false;
            }
            let mut resident = vec![0u8; keep_end / OS_PAGE];
            if libc::mincore(base.cast(), keep_end, resident.as_mut_ptr()) != 0 {
                return dontneed(0..keep_end);
            }
            // Resident pages past the accessible part were zeroed when it last shrank.
            let writable = self.accessible.min(keep_end) / OS_PAGE;
            let mut page = 0;
            while page < writable {
                if resident[page] & 1 == 0 {
                    page += 1;
                    continue;
                }
                let start = page;
                while page < writable && resident[page] & 1 != 0 {
                    page += 1;
                }
                std::ptr::write_bytes(base.add(start * OS_PAGE), 0, (page - start) * OS_PAGE);
            }
        }
        self.touched = keep_end.max(self.accessible);
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
    /// The size it started with, which a reset in place returns it to.
    initial: usize,
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
        image: Option<Arc<MemoryImage>>,
    ) -> Option<Result<Self, MemoryError>> {
        if ty.shared || !matches!(style, MemoryStyle::Static) {
            return None;
        }
        Some(unsafe { Self::create(ty, style, definition, image) })
    }

    /// The body of [`PooledMemory::new`] once the type is known to be one the pool serves.
    ///
    /// # Safety
    /// As [`PooledMemory::new`].
    unsafe fn create(
        ty: &MemoryType,
        style: &MemoryStyle,
        mut definition: NonNull<VMMemoryDefinition>,
        image: Option<Arc<MemoryImage>>,
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
        // A captured image starts the memory at the size it had when captured.
        let bytes = ty
            .minimum
            .bytes()
            .0
            .max(image.as_ref().map_or(0, |i| i.memory_bytes));
        if let Some(max) = ty.maximum.filter(|m| bytes > m.bytes().0) {
            // Worded as the tunables' own refusal, which a run reports as out of memory.
            return Err(MemoryError::Generic(format!(
                "the program needs {} MiB of memory at start, over the limit of {} MiB",
                bytes >> 20,
                max.bytes().0 >> 20
            )));
        }
        let mut region = match image {
            // The module was compiled without its data: only its image can give the memory its
            // contents, so an image that does not fit is an error, never a zeroed memory.
            Some(image) if image.len > bytes => {
                return Err(MemoryError::Region(format!(
                    "the memory image ({} bytes) is larger than the initial memory ({bytes})",
                    image.len
                )));
            }
            Some(image) => {
                let pooled = {
                    let mut pool = IMAGE_POOL.lock();
                    let at = pool.iter().position(|r| {
                        r.len == len && r.image.as_ref().is_some_and(|i| i.id == image.id)
                    });
                    // In order: the pool's front is the region put back longest ago.
                    at.map(|i| pool.remove(i))
                };
                match pooled {
                    Some(r) => r,
                    None => Region::with_image(len, image)?,
                }
            }
            None => match POOL.lock().pop().filter(|r| r.len == len) {
                Some(r) => r,
                None => Region::reserve(len)?,
            },
        };
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
            initial: bytes,
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
            GROWTH_REFUSED.with(|c| c.set(true));
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

    /// Puts an image memory back as it was made: the image's bytes, zero past them, the
    /// initial size (wasmer's own memories go to no size at all; only the sandbox calls this,
    /// for an instance that will serve another run: `kept.rs`). A memory without an image
    /// cannot be, and is left unusable (no size) with an error, as is one the kernel refused
    /// to reset.
    fn reset(&mut self) -> Result<(), MemoryError> {
        let restored = self
            .region
            .as_mut()
            .filter(|r| r.image.is_some())
            .is_some_and(|r| r.reset_to_image() && r.set_accessible(self.initial).is_ok());
        let length = if restored { self.initial } else { 0 };
        // SAFETY: as in `grow`.
        unsafe { self.definition.as_mut().current_length = length };
        if restored {
            Ok(())
        } else {
            // Dropped, not pooled: its pages may hold the run's data.
            if let Some(region) = self.region.take() {
                drop(region);
            }
            Err(MemoryError::Region(
                "the memory cannot be reset in place".into(),
            ))
        }
    }

    fn vmmemory(&self) -> NonNull<VMMemoryDefinition> {
        self.definition
    }

    fn try_clone(&self) -> Result<Box<dyn LinearMemory + Send + Sync + 'static>, MemoryError> {
        Err(MemoryError::MemoryNotShared)
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
        let Some(region) = self.region.take() else {
            return;
        };
        match &region.image {
            Some(image) if image.len > INLINE_RESET_MAX => reset_later(region),
            Some(_) => reset_and_pool(region),
            None => recycle(region),
        }
    }
}

/// Scrubs a plain region and pools it. Inline: the next run of the same guest wants it back
/// warm, and a missed pool means refaulting its data pages.
fn recycle(mut region: Region) {
    if region.scrub() {
        let mut pool = POOL.lock();
        if pool.len() < POOL_SIZE {
            pool.push(region);
        }
    }
}

/// Resets an image region on a background thread, off the run's path: dropping tens of
/// megabytes of mappings takes longer than the rest of a run's teardown, and after the reset
/// every page refaults anyway, so a run that finds the pool empty loses only a mapping call.
/// A region is back in the pool only once reset.
fn reset_later(region: Region) {
    use std::sync::mpsc::{SyncSender, TrySendError, sync_channel};
    static RESETTER: std::sync::OnceLock<Option<SyncSender<Region>>> = std::sync::OnceLock::new();
    let sender = RESETTER.get_or_init(|| {
        let (tx, rx) = sync_channel::<Region>(POOL_SIZE);
        std::thread::Builder::new()
            .name("wasmsand-memory-reset".into())
            .spawn(move || {
                for region in rx {
                    reset_and_pool(region);
                }
            })
            .ok()
            .map(|_| tx)
    });
    let Some(sender) = sender else {
        return reset_and_pool(region);
    };
    if let Err(TrySendError::Full(region) | TrySendError::Disconnected(region)) =
        sender.try_send(region)
    {
        reset_and_pool(region);
    }
}

/// Resets an image region and pools it, in place of the one put back longest ago when the
/// pool is full: each module with an image has regions of its own, and the modules a sandbox
/// runs change (a full pool of regions no run wants would leave every new one cold).
fn reset_and_pool(mut region: Region) {
    if region.reset_to_image() {
        let evicted = {
            let mut pool = IMAGE_POOL.lock();
            let evicted = (pool.len() >= IMAGE_POOL_SIZE).then(|| pool.remove(0));
            pool.push(region);
            evicted
        };
        // Unmapped outside the lock.
        drop(evicted);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn page(region: &Region, p: usize) -> &[u8] {
        // SAFETY: callers only read pages inside the accessible part.
        unsafe { std::slice::from_raw_parts(region.base.as_ptr().add(p * OS_PAGE), OS_PAGE) }
    }

    fn write(region: &Region, p: usize, byte: u8) {
        // SAFETY: callers only write pages inside the accessible part.
        unsafe { std::ptr::write_bytes(region.base.as_ptr().add(p * OS_PAGE + 7), byte, 100) };
    }

    /// Whatever a run wrote (a few pages, or more than a region may keep), the reset region
    /// reads as the image and zero past it, including where the memory had grown.
    #[test]
    fn image_regions_reset_to_the_image() {
        let image_pages = MAX_PRIVATE_PAGES + 64;
        let memory_pages = image_pages + 16;
        let mut memory = vec![0u8; memory_pages * OS_PAGE];
        for (p, chunk) in memory.chunks_mut(OS_PAGE).take(image_pages).enumerate() {
            chunk.fill(p as u8 | 1);
        }
        let image = MemoryImage::capture(&memory).expect("an image");
        let mut region = Region::with_image(1 << 30, image).unwrap();
        region.set_accessible(memory_pages * OS_PAGE).unwrap();
        let check = |region: &Region| {
            for p in 0..memory_pages {
                let want = if p < image_pages { p as u8 | 1 } else { 0 };
                assert!(page(region, p).iter().all(|b| *b == want), "page {p}");
            }
        };
        check(&region);
        for round in 0..4 {
            // Grown past the initial size, as a run's memory.grow does.
            region.set_accessible((memory_pages + 8) * OS_PAGE).unwrap();
            let written: Vec<usize> = if round == 2 {
                (0..memory_pages + 8).collect()
            } else {
                vec![0, 5, 6, image_pages - 1, image_pages, memory_pages + 3]
            };
            for p in &written {
                write(&region, *p, 0xee);
            }
            assert!(region.reset_to_image());
            region.set_accessible(memory_pages * OS_PAGE).unwrap();
            check(&region);
            if round != 2 {
                // Written image pages stay resident as private copies (no fault next time).
                let flags = page_flags(region.base.as_ptr(), OS_PAGE * 8).unwrap();
                assert!(flags[5] & PM_PRESENT != 0 && flags[5] & PM_FILE == 0);
            }
        }
        region.set_accessible((memory_pages + 8) * OS_PAGE).unwrap();
        assert!(page(&region, memory_pages + 3).iter().all(|b| *b == 0));
    }
}
