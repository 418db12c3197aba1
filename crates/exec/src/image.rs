//! Initial-memory images: a module's data segments laid out once per process in a sealed
//! memfd, mapped copy-on-write into each instance's linear memory.
//!
//! Instantiating a module copies every active data segment into a fresh memory. For CPython's
//! pre-initialized snapshot that is tens of megabytes per run: a copy, and a page fault for
//! every page of it. With an image, instantiation maps the memfd privately over the start of
//! the reservation and skips the copies; a run then faults in only the pages it reads (from the
//! page cache, shared by every instance) and copies only the pages it writes. Resetting a
//! reservation for the next run is one `madvise(MADV_DONTNEED)`: private copies are dropped
//! and the pages read as the image again (see `memory.rs`).
//!
//! Such a module is compiled without its active data segments ([`strip`]): wasmer walks every
//! active segment at instantiation even when there is nothing to copy, and CPython's snapshot
//! has ten thousand of them.
//!
//! Invariants: an image holds exactly what instantiation would have written, so an instance
//! mapped from it is byte-for-byte one that copied its segments; a stripped module is only ever
//! instantiated over its image (the two travel together in a `Program`). Only modules whose
//! active segments all target memory 0 at constant offsets get one.

use std::cell::RefCell;
use std::fs::File;
use std::ops::Range;
use std::os::fd::{AsRawFd, FromRawFd};
use std::os::unix::fs::FileExt;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, OnceLock};

use wasmparser::{Chunk, DataKind, Operator, Parser, Payload, TypeRef};

/// Modules with less data than this keep the plain path: their copy costs less than reading
/// the pagemap a reset needs. With more (the coreutils modules hold half a megabyte), a run
/// that finds a pooled region of its image pays only for the pages the last run wrote
/// instead of zeroing every page it touched and copying all the data in again:
/// `cargo bench -p wasmsand-exec --bench exec --profile dev -- run/` went from 246 to 228 µs
/// for `true` and from 104 to 90 µs for `flood 0`, and `jq` and the pipeline of the bench
/// through Python 9-11 % faster (the two together with the inline reset in `memory.rs`).
const MIN_IMAGE_BYTES: u64 = 64 << 10;
const OS_PAGE: usize = 4096;

/// A module's initial memory contents, shared by all its instances in this process.
pub(crate) struct MemoryImage {
    /// Distinguishes images in the reservation pool.
    pub(crate) id: u64,
    file: File,
    /// Bytes the mapping covers from offset 0: the end of the last segment, page-aligned.
    pub(crate) len: usize,
    /// Size of the linear memory an instance starts with, when larger than the module's
    /// declared minimum: a memory captured after the guest grew it (see [`MemoryImage::capture`]).
    pub(crate) memory_bytes: usize,
    /// The whole image mapped read-only once, for putting pages back after a run (`restore`):
    /// a copy from a mapping instead of a `pread` per run of dirty pages, whose system calls
    /// and page-cache lookups were most of the reset. Null until first used or when the
    /// kernel refused the mapping.
    view: OnceLock<usize>,
}

impl Drop for MemoryImage {
    fn drop(&mut self) {
        if let Some(&view) = self.view.get()
            && view != 0
        {
            // SAFETY: the mapping `view` made, of `len` bytes, which nothing borrows any more.
            unsafe { libc::munmap(view as *mut libc::c_void, self.len) };
        }
    }
}

impl std::fmt::Debug for MemoryImage {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MemoryImage")
            .field("id", &self.id)
            .field("len", &self.len)
            .field("memory_bytes", &self.memory_bytes)
            .finish()
    }
}

impl MemoryImage {
    /// [`MemoryImage::plan`] and [`Planned::write`] at once.
    #[cfg(test)]
    pub(crate) fn build(wasm: &[u8], any_size: bool) -> Option<Arc<MemoryImage>> {
        Self::plan(wasm, any_size)?.write()
    }

    /// The image of `wasm`'s data segments, decided on and not yet written, or `None` when the
    /// module does not qualify (little data, an imported memory, an offset that is not a
    /// constant): instantiation then copies as usual, which is always correct. `any_size`: also
    /// for a module with little data (one whose pre-initialized memory is registered: a deeper
    /// image is captured only over an image). Writing it apart lets the writing (CPython's
    /// 16 MB of data into a memfd's fresh pages) overlap the loading of the compiled module.
    pub(crate) fn plan(wasm: &[u8], any_size: bool) -> Option<Planned<'_>> {
        if disabled() {
            return None;
        }
        let layout = Layout::read(wasm)?;
        let total: u64 = layout.active().map(|(_, d)| d.len() as u64).sum();
        if total < MIN_IMAGE_BYTES && !any_size {
            return None;
        }
        let end = layout
            .active()
            .map(|(offset, data)| offset + data.len())
            .max()?;
        let len = end.div_ceil(OS_PAGE) * OS_PAGE;
        if len as u64 > layout.initial_bytes {
            // Instantiation will trap on the out-of-bounds segment; let it, on the plain path.
            return None;
        }
        Some(Planned { layout, len })
    }

    /// The image of a live instance's linear memory `memory` (all of it, as it is now): what a
    /// pre-initialized module's data segments would hold had the guest's initialization run
    /// at build time, as Wizer does. Only non-zero pages are written (the memfd stays sparse,
    /// so untouched heap costs nothing); instances start with memory of `memory.len()` bytes.
    pub(crate) fn capture(memory: &[u8]) -> Option<Arc<MemoryImage>> {
        if disabled() || memory.is_empty() {
            return None;
        }
        let pages = memory.len().div_ceil(OS_PAGE);
        let used = (0..pages)
            .rev()
            .find(|p| !is_zero(&memory[p * OS_PAGE..((p + 1) * OS_PAGE).min(memory.len())]))
            .map_or(0, |p| p + 1);
        let len = used * OS_PAGE;
        let file = memfd(len)?;
        // Runs of non-zero pages, one write each.
        let mut page = 0;
        while page < used {
            let start = page;
            while page < used && !is_zero(&memory[page * OS_PAGE..(page + 1) * OS_PAGE]) {
                page += 1;
            }
            if page > start {
                let bytes = &memory[start * OS_PAGE..page * OS_PAGE];
                file.write_all_at(bytes, (start * OS_PAGE) as u64).ok()?;
            } else {
                page += 1;
            }
        }
        Some(Self::sealed(file, len, memory.len()))
    }

    /// An image kept in a file (a capture saved by an earlier process: `cache.rs`), `len`
    /// bytes of it, for memories of `memory_bytes`. The file is mapped as it is, as the
    /// module cache's code is: entries are renamed into place and never written again.
    pub(crate) fn from_saved(file: File, len: usize, memory_bytes: usize) -> Arc<MemoryImage> {
        Self::sealed(file, len, memory_bytes)
    }

    /// Writes the image into the empty file `to` from its start, one write per run of non-zero
    /// pages (the rest stay holes, as in the memfd [`MemoryImage::capture`] wrote), and returns
    /// the xxh3-128 of all its `len` bytes.
    pub(crate) fn write_sparse(&self, to: &File) -> std::io::Result<u128> {
        let mut hasher = xxhash_rust::xxh3::Xxh3::new();
        let mut buf = vec![0u8; 1 << 20];
        let mut at = 0;
        while at < self.len {
            let chunk = &mut buf[..(self.len - at).min(1 << 20)];
            self.file.read_exact_at(chunk, at as u64)?;
            let chunk = &*chunk;
            hasher.update(chunk);
            // The image's length is whole pages, and so is every chunk.
            let pages = chunk.len() / OS_PAGE;
            let zero = |p: usize| is_zero(&chunk[p * OS_PAGE..(p + 1) * OS_PAGE]);
            let mut page = 0;
            while page < pages {
                let start = page;
                while page < pages && !zero(page) {
                    page += 1;
                }
                if page > start {
                    to.write_all_at(
                        &chunk[start * OS_PAGE..page * OS_PAGE],
                        (at + start * OS_PAGE) as u64,
                    )?;
                } else {
                    page += 1;
                }
            }
            at += chunk.len();
        }
        Ok(hasher.digest128())
    }

    fn sealed(file: File, len: usize, memory_bytes: usize) -> Arc<MemoryImage> {
        seal(&file);
        static NEXT_ID: AtomicU64 = AtomicU64::new(1);
        Arc::new(MemoryImage {
            id: NEXT_ID.fetch_add(1, Ordering::Relaxed),
            file,
            len,
            memory_bytes,
            view: OnceLock::new(),
        })
    }

    /// Maps the image privately at `base`, replacing whatever mapping is there.
    ///
    /// # Safety
    /// `[base, base + len)` must lie inside a reservation the caller owns and no live reference
    /// may point into it.
    pub(crate) unsafe fn map_at(&self, base: *mut u8) -> std::io::Result<()> {
        // SAFETY: a fixed mapping inside the caller's own reservation (see above).
        let ptr = unsafe {
            libc::mmap(
                base.cast(),
                self.len,
                libc::PROT_NONE,
                libc::MAP_PRIVATE | libc::MAP_FIXED,
                self.file.as_raw_fd(),
                0,
            )
        };
        if ptr == libc::MAP_FAILED {
            return Err(std::io::Error::last_os_error());
        }
        Ok(())
    }
}

impl MemoryImage {
    /// Writes the image's bytes `range` back over the same range of a region mapped from it
    /// at `base` (pages a run made private copies of).
    ///
    /// # Safety
    /// `range` must lie within the image and `[base + range)` be writable memory of a
    /// reservation the caller owns, with no live reference into it.
    pub(crate) unsafe fn restore(&self, base: *mut u8, range: Range<usize>) -> std::io::Result<()> {
        debug_assert!(range.end <= self.len);
        // SAFETY: see above.
        let to = unsafe { std::slice::from_raw_parts_mut(base.add(range.start), range.len()) };
        match self.view() {
            // SAFETY: the view holds the image's `len` bytes, and `range` lies within them.
            Some(view) => unsafe {
                std::ptr::copy_nonoverlapping(view.add(range.start), to.as_mut_ptr(), to.len());
                Ok(())
            },
            None => self.file.read_exact_at(to, range.start as u64),
        }
    }

    /// The image mapped read-only (shared: the pages are the file's own, so they stay mapped
    /// from one reset to the next), or `None` when the kernel refuses.
    fn view(&self) -> Option<*const u8> {
        let view = *self.view.get_or_init(|| {
            // SAFETY: a fresh read-only mapping of the whole image file; a sealed memfd
            // refuses writable shared mappings only.
            let ptr = unsafe {
                libc::mmap(
                    std::ptr::null_mut(),
                    self.len,
                    libc::PROT_READ,
                    libc::MAP_SHARED,
                    self.file.as_raw_fd(),
                    0,
                )
            };
            if ptr == libc::MAP_FAILED {
                0
            } else {
                ptr as usize
            }
        });
        (view != 0).then_some(view as *const u8)
    }
}

/// An image decided on and not yet written (see [`MemoryImage::plan`]).
pub(crate) struct Planned<'a> {
    layout: Layout<'a>,
    len: usize,
}

impl Planned<'_> {
    /// The image, or `None` when the kernel refuses a memfd.
    pub(crate) fn write(self) -> Option<Arc<MemoryImage>> {
        let file = memfd(self.len)?;
        write_coalesced(&file, self.layout.active()).ok()?;
        Some(MemoryImage::sealed(file, self.len, 0))
    }
}

fn is_zero(bytes: &[u8]) -> bool {
    // SAFETY: any bit pattern is a valid u64.
    let (head, words, tail) = unsafe { bytes.align_to::<u64>() };
    head.iter().all(|b| *b == 0) && words.iter().all(|w| *w == 0) && tail.iter().all(|b| *b == 0)
}

/// `WASMSAND_MEMORY_IMAGES=0` turns images off (instantiation copies segments as wasmer does):
/// for comparing the two paths in benchmarks, and a way out should a kernel refuse the mappings.
fn disabled() -> bool {
    static DISABLED: OnceLock<bool> = OnceLock::new();
    *DISABLED.get_or_init(|| std::env::var_os("WASMSAND_MEMORY_IMAGES").is_some_and(|v| v == "0"))
}

/// What instantiation would write: memory 0's initial size and the data segments (active ones
/// with their offset), in module order.
struct Layout<'a> {
    initial_bytes: u64,
    segments: Vec<Segment<'a>>,
}

struct Segment<'a> {
    /// `None` for a passive segment (`memory.init` copies it at run time).
    offset: Option<usize>,
    data: &'a [u8],
}

impl<'a> Layout<'a> {
    /// The active segments, `(offset, bytes)`, in module order.
    fn active(&self) -> impl Iterator<Item = (usize, &'a [u8])> + '_ {
        self.segments
            .iter()
            .filter_map(|s| Some((s.offset?, s.data)))
    }

    fn read(wasm: &'a [u8]) -> Option<Layout<'a>> {
        let mut initial_bytes = None;
        let mut segments = Vec::new();
        let mut parser = Parser::new(0);
        let mut rest = wasm;
        loop {
            let Chunk::Parsed { consumed, payload } = parser.parse(rest, true).ok()? else {
                return None;
            };
            match payload {
                Payload::ImportSection(imports) => {
                    for import in imports.into_imports() {
                        if matches!(import.ok()?.ty, TypeRef::Memory(_)) {
                            return None;
                        }
                    }
                }
                Payload::MemorySection(memories) => {
                    let first = memories.into_iter().next()?.ok()?;
                    if first.memory64 || first.shared {
                        return None;
                    }
                    initial_bytes = Some(first.initial.checked_mul(crate::WASM_PAGE)?);
                }
                Payload::DataSection(data) => {
                    for segment in data {
                        let segment = segment.ok()?;
                        let offset_expr = match segment.kind {
                            DataKind::Passive => {
                                segments.push(Segment {
                                    offset: None,
                                    data: segment.data,
                                });
                                continue;
                            }
                            DataKind::Active {
                                memory_index: 0,
                                offset_expr,
                            } => offset_expr,
                            DataKind::Active { .. } => return None,
                        };
                        let mut ops = offset_expr.get_operators_reader();
                        let offset = match (ops.read().ok()?, ops.read().ok()?) {
                            (Operator::I32Const { value }, Operator::End) => value as u32,
                            _ => return None,
                        };
                        segments.push(Segment {
                            offset: Some(offset as usize),
                            data: segment.data,
                        });
                    }
                }
                // Function bodies are most of a module and say nothing about its data.
                Payload::CodeSectionStart { size, .. } => {
                    parser.skip_section();
                    rest = rest.get(consumed + size as usize..)?;
                    continue;
                }
                Payload::End(_) => break,
                _ => {}
            }
            rest = &rest[consumed..];
        }
        Some(Layout {
            initial_bytes: initial_bytes?,
            segments,
        })
    }
}

/// `wasm` without its active data segments, for compiling a module that will only ever be
/// instantiated over its [`MemoryImage`]. Passive segments keep their indices (`memory.init` and
/// `data.drop` name them): active ones before the last passive one become empty passive
/// segments, the ones after it are dropped, and the data count follows.
///
/// The `name` section and DWARF's `.debug_*` sections go too. wasmer keeps every function's name
/// in the compiled module's metadata and a copy of every custom section beside it, and a process
/// reads and rebuilds all of it before its first run: for CPython's 89 000 functions that was
/// 14 MB of names, a third of loading the module from the cache. Names serve only wasmer's
/// trap backtraces, which the sandbox never shows. Every other section is copied byte for byte,
/// except for a module whose instance can be put back in place (see [`in_place_globals`]): its
/// mutable globals are exported as `__wasmsand_global_<index>` and a custom section
/// [`RESETS_IN_PLACE`] marks it.
/// `None` if the module cannot be read.
pub(crate) fn strip(wasm: &[u8]) -> Option<Vec<u8>> {
    let layout = Layout::read(wasm)?;
    let in_place = in_place_globals(wasm);
    let keep = layout
        .segments
        .iter()
        .rposition(|s| s.offset.is_none())
        .map_or(0, |last_passive| last_passive + 1);
    let mut data = Vec::new();
    leb128(&mut data, keep as u64);
    for segment in &layout.segments[..keep] {
        // Flag 1: a passive segment.
        data.push(1);
        let bytes = if segment.offset.is_none() {
            segment.data
        } else {
            &[]
        };
        leb128(&mut data, bytes.len() as u64);
        data.extend_from_slice(bytes);
    }
    let mut out = Vec::with_capacity(wasm.len());
    out.extend_from_slice(wasm.get(..8)?);
    let mut at = 8;
    while at < wasm.len() {
        let id = wasm[at];
        let (size, header) = read_leb128(&wasm[at + 1..])?;
        let end = (at + 1 + header).checked_add(usize::try_from(size).ok()?)?;
        let section = wasm.get(at..end)?;
        match id {
            DATA_COUNT_SECTION => {
                let mut count = Vec::new();
                leb128(&mut count, keep as u64);
                push_section(&mut out, DATA_COUNT_SECTION, &count);
            }
            DATA_SECTION => push_section(&mut out, DATA_SECTION, &data),
            CUSTOM_SECTION if only_for_debuggers(&section[1 + header..])? => {}
            EXPORT_SECTION if in_place.as_ref().is_some_and(|g| !g.is_empty()) => {
                let globals = in_place.as_deref().unwrap_or_default();
                let contents = &section[1 + header..];
                let (count, count_len) = read_leb128(contents)?;
                let mut exports = Vec::new();
                leb128(&mut exports, count + globals.len() as u64);
                exports.extend_from_slice(&contents[count_len..]);
                for index in globals {
                    let name = global_export(*index);
                    leb128(&mut exports, name.len() as u64);
                    exports.extend_from_slice(name.as_bytes());
                    exports.push(GLOBAL_KIND);
                    leb128(&mut exports, u64::from(*index));
                }
                push_section(&mut out, EXPORT_SECTION, &exports);
            }
            _ => out.extend_from_slice(section),
        }
        at = end;
    }
    if in_place.is_some() {
        let mut marker = Vec::new();
        leb128(&mut marker, RESETS_IN_PLACE.len() as u64);
        marker.extend_from_slice(RESETS_IN_PLACE.as_bytes());
        push_section(&mut out, CUSTOM_SECTION, &marker);
    }
    Some(out)
}

/// The custom section that marks a stripped module whose instances may be put back in place
/// after a run and serve the next one: its memory reset to its image and its mutable globals
/// to their values at instantiation (exported by [`strip`] for that).
pub(crate) const RESETS_IN_PLACE: &str = "wasmsand-resets-in-place";

/// How the names [`strip`] exports mutable globals under begin.
pub(crate) const GLOBAL_EXPORT_PREFIX: &str = "__wasmsand_global_";

/// The name [`strip`] exports the mutable global `index` under.
fn global_export(index: u32) -> String {
    format!("{GLOBAL_EXPORT_PREFIX}{index}")
}

/// The mutable globals of a module whose whole state between two runs is its one memory and
/// its globals, so that an instance put back to its image and its globals' first values is
/// one freshly made: `None` if a run could change anything else. That is a table (set,
/// grown, filled, copied or initialized by the code), a passive segment the code drops (the
/// next run's `memory.init` or `table.init` would trap), or anything imported but functions
/// (an imported memory or global is not the instance's to put back). The whole code is read,
/// once, when the module is compiled.
fn in_place_globals(wasm: &[u8]) -> Option<Vec<u32>> {
    let mut globals = Vec::new();
    let mut memories = 0;
    let mut exports = false;
    for payload in Parser::new(0).parse_all(wasm) {
        match payload.ok()? {
            Payload::ImportSection(imports) => {
                for import in imports.into_imports() {
                    if !matches!(import.ok()?.ty, TypeRef::Func(_)) {
                        return None;
                    }
                }
            }
            Payload::MemorySection(m) => memories += m.count(),
            Payload::GlobalSection(section) => {
                for (index, global) in section.into_iter().enumerate() {
                    if global.ok()?.ty.mutable {
                        globals.push(u32::try_from(index).ok()?);
                    }
                }
            }
            Payload::ExportSection(_) => exports = true,
            Payload::CodeSectionEntry(body) => {
                let mut ops = body.get_operators_reader().ok()?;
                while !ops.eof() {
                    if matches!(
                        ops.read().ok()?,
                        Operator::TableSet { .. }
                            | Operator::TableGrow { .. }
                            | Operator::TableFill { .. }
                            | Operator::TableCopy { .. }
                            | Operator::TableInit { .. }
                            | Operator::ElemDrop { .. }
                            | Operator::DataDrop { .. }
                    ) {
                        return None;
                    }
                }
            }
            _ => {}
        }
    }
    // Globals are exported by adding to the export section, which such a module has (its
    // memory and entry point are exported).
    (memories == 1 && exports).then_some(globals)
}

const CUSTOM_SECTION: u8 = 0;
const DATA_SECTION: u8 = 11;
const DATA_COUNT_SECTION: u8 = 12;
const EXPORT_SECTION: u8 = 7;
const GLOBAL_KIND: u8 = 3;

/// Whether a custom section (its contents: the name, then the payload) serves only debuggers
/// and backtraces.
fn only_for_debuggers(contents: &[u8]) -> Option<bool> {
    let (len, header) = read_leb128(contents)?;
    let name = contents.get(header..header.checked_add(usize::try_from(len).ok()?)?)?;
    Some(name == b"name" || name.starts_with(b".debug_"))
}

fn push_section(out: &mut Vec<u8>, id: u8, contents: &[u8]) {
    out.push(id);
    leb128(out, contents.len() as u64);
    out.extend_from_slice(contents);
}

fn leb128(out: &mut Vec<u8>, mut v: u64) {
    loop {
        let byte = (v & 0x7f) as u8;
        v >>= 7;
        if v == 0 {
            out.push(byte);
            return;
        }
        out.push(byte | 0x80);
    }
}

/// An unsigned LEB128 at the start of `bytes` (at most 5 bytes, as section sizes are u32), and
/// how many bytes it took.
fn read_leb128(bytes: &[u8]) -> Option<(u64, usize)> {
    let mut v = 0u64;
    for (i, byte) in bytes.iter().take(5).enumerate() {
        v |= u64::from(byte & 0x7f) << (7 * i);
        if byte & 0x80 == 0 {
            return Some((v, i + 1));
        }
    }
    None
}

fn memfd(len: usize) -> Option<File> {
    // SAFETY: a plain syscall with a static name; the descriptor is owned right after.
    let fd = unsafe {
        libc::memfd_create(
            c"wasmsand-memory-image".as_ptr(),
            libc::MFD_CLOEXEC | libc::MFD_ALLOW_SEALING,
        )
    };
    if fd < 0 {
        return None;
    }
    // SAFETY: `fd` is a fresh descriptor nobody else owns.
    let file = unsafe { File::from_raw_fd(fd) };
    file.set_len(len as u64).ok()?;
    Some(file)
}

/// No write, resize or new writable mapping can change the image once built, so an instance
/// can never see another's writes through it. Best effort: private mappings never write back,
/// and a file that is not a memfd (a saved capture) refuses seals.
fn seal(file: &File) {
    // SAFETY: fcntl on a descriptor we own.
    unsafe {
        libc::fcntl(
            file.as_raw_fd(),
            libc::F_ADD_SEALS,
            libc::F_SEAL_SHRINK | libc::F_SEAL_GROW | libc::F_SEAL_WRITE | libc::F_SEAL_SEAL,
        );
    }
}

/// Writes `(offset, bytes)` segments in their order, later ones over earlier ones, with one
/// write per run of segments that follow each other closely: CPython's snapshot has ten
/// thousand segments, and a write each was most of the image's set-up in a new process.
fn write_coalesced<'a>(
    file: &File,
    segments: impl Iterator<Item = (usize, &'a [u8])>,
) -> std::io::Result<()> {
    /// A gap up to this size between two segments is filled with zeros (what the memfd reads
    /// there anyway) rather than ending the run.
    const GAP: usize = 4096;
    let mut run: Vec<u8> = Vec::new();
    let mut start = 0;
    for (offset, data) in segments {
        let end = start + run.len();
        if run.is_empty() || offset < start || offset > end + GAP {
            if !run.is_empty() {
                file.write_all_at(&run, start as u64)?;
                run.clear();
            }
            start = offset;
        }
        let at = offset - start;
        if run.len() < at + data.len() {
            run.resize(at + data.len(), 0);
        }
        run[at..at + data.len()].copy_from_slice(data);
    }
    if !run.is_empty() {
        file.write_all_at(&run, start as u64)?;
    }
    Ok(())
}

thread_local! {
    /// The image for the next memory this thread creates: wasmer's tunables are asked for a
    /// memory by type alone, so the run hands the module's image over here around
    /// `Instance::new`.
    static PENDING: RefCell<Option<Arc<MemoryImage>>> = const { RefCell::new(None) };
}

/// Offers `image` to the memory the current thread's next instantiation creates; withdrawn
/// when the guard drops.
pub(crate) fn offer(image: Option<Arc<MemoryImage>>) -> Offered {
    PENDING.with(|p| *p.borrow_mut() = image);
    Offered(())
}

/// Takes the offered image (once: a second memory of the same module gets none).
pub(crate) fn take() -> Option<Arc<MemoryImage>> {
    PENDING.with(|p| p.borrow_mut().take())
}

pub(crate) struct Offered(());

impl Drop for Offered {
    fn drop(&mut self) {
        PENDING.with(|p| *p.borrow_mut() = None);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn module(data: &[(u32, Vec<u8>)], pages: u32) -> Vec<u8> {
        let mut wat = format!("(module (memory {pages})");
        for (offset, bytes) in data {
            let escaped: String = bytes.iter().map(|b| format!("\\{b:02x}")).collect();
            wat.push_str(&format!(" (data (i32.const {offset}) \"{escaped}\")"));
        }
        wat.push(')');
        wasmer::wat2wasm(wat.as_bytes()).unwrap().to_vec()
    }

    #[test]
    fn small_modules_keep_the_plain_path() {
        assert!(MemoryImage::build(&module(&[(16, vec![1; 1000])], 1), false).is_none());
    }

    #[test]
    fn overlapping_segments_apply_in_order() {
        let big = vec![7u8; 5 << 20];
        let wasm = module(&[(0, big.clone()), (100, vec![9; 10])], 100);
        let image = MemoryImage::build(&wasm, false).expect("qualifies");
        let mut head = [0u8; 120];
        image.file.read_exact_at(&mut head, 0).unwrap();
        assert_eq!(&head[..100], &[7; 100][..]);
        assert_eq!(&head[100..110], &[9; 10][..]);
        assert_eq!(&head[110..], &[7; 10][..]);
        // Sealed: nobody can change what later instances will map.
        assert!(image.file.write_all_at(b"x", 0).is_err());
    }

    #[test]
    fn coalesced_writes_equal_one_write_per_segment() {
        let segments: Vec<(usize, Vec<u8>)> = vec![
            (10, vec![1; 100]),
            (110, vec![2; 50]),               // right after
            (1000, vec![3; 10]),              // a gap within a run
            (120, vec![4; 5]),                // back inside the run: later wins
            (5, vec![5; 10]),                 // before the run's start: a run of its own
            (3 * 4096 + 2000, vec![6; 4096]), // past the gap: another run
            (3 * 4096 + 2000, vec![7; 3]),    // over its start
        ];
        let len = 5 * 4096;
        let mut expected = vec![0u8; len];
        for (offset, data) in &segments {
            expected[*offset..offset + data.len()].copy_from_slice(data);
        }
        let file = memfd(len).unwrap();
        write_coalesced(&file, segments.iter().map(|(o, d)| (*o, d.as_slice()))).unwrap();
        let mut got = vec![0u8; len];
        file.read_exact_at(&mut got, 0).unwrap();
        assert!(got == expected);
    }

    /// A module is marked for reuse in place only when nothing but its memory and globals
    /// can carry a run's state to the next; then its mutable globals are exported.
    #[test]
    fn only_modules_whose_state_is_memory_and_globals_reset_in_place() {
        let module = |body: &str| {
            let wat = format!(
                r#"(module {body} (memory (export "memory") 2) (data (i32.const 0) "a")
                (global $sp (mut i32) (i32.const 4096)) (global $k i32 (i32.const 1))
                (global $n (mut i64) (i64.const 7)) (table 2 funcref)
                (func $g) (elem (i32.const 0) $g) (elem $passive funcref (ref.func $g))
                (data $passive "p")
                (func (export "_start") (global.set $sp (i32.const 8))))"#
            );
            let wasm = wasmer::wat2wasm(wat.as_bytes()).unwrap().to_vec();
            let stripped = strip(&wasm).unwrap();
            let module = wasmer::Module::new(&wasmer::Engine::default(), &stripped).unwrap();
            let marked = module.custom_sections(RESETS_IN_PLACE).next().is_some();
            let mut exported: Vec<String> = module
                .exports()
                .map(|e| e.name().to_string())
                .filter(|n| n.starts_with(GLOBAL_EXPORT_PREFIX))
                .collect();
            exported.sort();
            (marked, exported)
        };
        let globals = vec![global_export(0), global_export(2)];
        assert_eq!(module(""), (true, globals.clone()));
        assert_eq!(
            module("(func (memory.init $passive (i32.const 0) (i32.const 0) (i32.const 1)))"),
            (true, globals),
            "copying a passive segment that is never dropped leaves nothing behind"
        );
        for (body, why) in [
            (
                "(func (table.set 0 (i32.const 1) (ref.null func)))",
                "table.set",
            ),
            (
                "(func (drop (table.grow 0 (ref.null func) (i32.const 1))))",
                "table.grow",
            ),
            (
                "(func (table.fill 0 (i32.const 0) (ref.null func) (i32.const 1)))",
                "table.fill",
            ),
            (
                "(func (table.copy (i32.const 0) (i32.const 1) (i32.const 1)))",
                "table.copy",
            ),
            (
                "(func (table.init $passive (i32.const 0) (i32.const 0) (i32.const 1)))",
                "table.init",
            ),
            ("(func (elem.drop $passive))", "elem.drop"),
            ("(func (data.drop $passive))", "data.drop"),
            (
                r#"(import "host" "g" (global (mut i32)))"#,
                "an imported global",
            ),
        ] {
            assert_eq!(module(body), (false, vec![]), "{why}");
        }
    }

    #[test]
    fn stripping_drops_active_data_and_keeps_passive_indices() {
        let wat = r#"(module (memory 2)
            (data (i32.const 0) "aaaa")
            (data "passive-one")
            (data (i32.const 8) "bbbb")
            (func (export "f") (memory.init 1 (i32.const 0) (i32.const 0) (i32.const 11)))
            (data (i32.const 16) "cccc"))"#;
        let wasm = wasmer::wat2wasm(wat.as_bytes()).unwrap();
        let stripped = strip(&wasm).unwrap();
        let layout = Layout::read(&stripped).unwrap();
        let kept: Vec<_> = layout.segments.iter().map(|s| (s.offset, s.data)).collect();
        assert_eq!(
            kept,
            vec![(None, &b""[..]), (None, &b"passive-one"[..])],
            "the active segment before the passive one becomes an empty passive one; the ones \
             after it are gone"
        );
        // Still a valid module that wasmer accepts.
        wasmer::Module::new(&wasmer::Engine::default(), &stripped).unwrap();
        let custom = |wasm: &[u8]| -> Vec<String> {
            Parser::new(0)
                .parse_all(wasm)
                .filter_map(|p| match p {
                    Ok(Payload::CustomSection(c)) => Some(c.name().to_string()),
                    _ => None,
                })
                .collect()
        };
        let mut named = wasm.to_vec();
        for (name, body) in [
            ("name", &b"\x01\x04\x01\x00\x01f"[..]),
            (".debug_info", b"x"),
            ("producers", b"\x00"),
        ] {
            let mut contents = Vec::new();
            leb128(&mut contents, name.len() as u64);
            contents.extend_from_slice(name.as_bytes());
            contents.extend_from_slice(body);
            push_section(&mut named, CUSTOM_SECTION, &contents);
        }
        assert_eq!(custom(&named), ["name", ".debug_info", "producers"]);
        assert_eq!(
            custom(&strip(&named).unwrap()),
            ["producers", RESETS_IN_PLACE],
            "names and DWARF are dropped, other custom sections kept"
        );
        // Without passive segments, nothing is left.
        let plain = wasmer::wat2wasm(br#"(module (memory 1) (data (i32.const 0) "x"))"#).unwrap();
        let stripped = strip(&plain).unwrap();
        assert!(Layout::read(&stripped).unwrap().segments.is_empty());
    }

    #[test]
    fn segments_past_the_initial_memory_are_left_to_instantiation() {
        assert!(
            MemoryImage::build(&module(&[(65_536 * 80, vec![1; 5 << 20])], 81), false).is_none()
        );
    }
}
