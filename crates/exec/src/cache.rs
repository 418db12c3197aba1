//! Compiled-module cache: in memory for the life of the process, and on disk across processes,
//! keyed by the wasm's SHA-256 and the engine's configuration.
//!
//! A disk entry is wasmer's serialized module (a linked ELF image, which wasmer maps from the
//! file) followed by a trailer: `MAGIC`, the SHA-256 of the wasm it was compiled from, a
//! fingerprint of the engine configuration and variant, and the xxh3-128 of the image. The
//! checksum is verified in full once per file (by the process that wrote it, or the first to
//! read it); a memo under `verified/` names the file's identity (device, inode, size, mtime,
//! ctime), so later processes that find the same file unchanged skip re-reading 270 MB.
//!
//! An entry that is short, has another magic, names another wasm or engine, fails its checksum
//! or that wasmer refuses is recompiled and rewritten: a broken cache costs time, never
//! correctness.
//!
//! The same directory keeps captured memories (`preinit.rs`): `<key>.memory` is the memory's
//! bytes (sparse: its zero pages are holes) followed by `CAPTURE_MAGIC`, the capture's key,
//! the memory's size, the image's length and the xxh3-128 of the image, checked as a module
//! entry is. A process that finds one starts its runs from it at once instead of capturing
//! again (CPython's `import numpy`: a new process's first dozen runs waited for it).

use std::collections::HashMap;
use std::fs;
use std::io::Write;
use std::os::fd::AsRawFd;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, OnceLock};
use std::time::{Duration, Instant};

use parking_lot::Mutex;
use sha2::{Digest, Sha256};
use wasmer::{Engine, Module};

use crate::ExecError;
use crate::engine::engine_fingerprint;
use crate::image::MemoryImage;

const MAGIC: &[u8; 16] = b"wasmsand-cwasm3\n";
/// Magic, wasm SHA-256, engine fingerprint, image checksum.
const TRAILER: usize = MAGIC.len() + 32 + 16 + 16;

const CAPTURE_MAGIC: &[u8; 16] = b"wasmsand-memory1";
/// Magic, capture key, memory size, image length, image checksum.
const CAPTURE_TRAILER: usize = CAPTURE_MAGIC.len() + 32 + 8 + 8 + 16;
const OS_PAGE: usize = 4096;

/// Environment variable naming the on-disk cache directory.
pub const CACHE_DIR_ENV: &str = "WASMSAND_CACHE_DIR";

/// Where compiled modules are kept between processes when no directory is given:
/// `$WASMSAND_CACHE_DIR`, else `$XDG_CACHE_HOME/wasmsand`, else `~/.cache/wasmsand`.
pub fn default_cache_dir() -> Option<PathBuf> {
    let from_env = |name: &str| std::env::var_os(name).filter(|v| !v.is_empty());
    if let Some(dir) = from_env(CACHE_DIR_ENV) {
        return Some(dir.into());
    }
    if let Some(xdg) = from_env("XDG_CACHE_HOME") {
        return Some(PathBuf::from(xdg).join("wasmsand"));
    }
    from_env("HOME").map(|home| PathBuf::from(home).join(".cache").join("wasmsand"))
}

/// What the cache has done so far.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct CacheStats {
    /// Loads answered by a module already in memory.
    pub memory_hits: u64,
    /// Loads answered by deserializing a disk entry.
    pub disk_hits: u64,
    /// Modules compiled from wasm.
    pub compiles: u64,
    /// Disk entries found unusable (and replaced).
    pub rejected_entries: u64,
}

type Slot = Arc<OnceLock<Result<crate::Program, String>>>;

/// What is compiled for a given wasm: the module itself, or the module without its active data
/// segments (and its names: see `image::strip`) when a memory image supplies them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Variant {
    Plain,
    Stripped,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
enum Key {
    Xxh3(u128),
    Sha256([u8; 32]),
}

/// Digests vouched for by the owners of large wasm buffers, by address and length; each entry
/// holds its buffer, so the address cannot be reused by other bytes.
static VOUCHED: Mutex<Vec<Vouched>> = Mutex::new(Vec::new());

struct Vouched {
    wasm: bytes::Bytes,
    sha256: [u8; 32],
    name: String,
}

/// Declares `sha256` to be the SHA-256 of `wasm`, so that loading these exact bytes (same
/// address and length) hashes nothing: CPython's 100 MB module would otherwise be hashed in
/// full by every new process before its first run. The caller must know the digest is right
/// (computed once and memoized against the file's identity, say): the disk cache is keyed by
/// it, so a wrong digest would load another module's code.
/// `name` says what the module is in the notice of a slow compile.
pub fn vouch_digest(wasm: &bytes::Bytes, sha256: [u8; 32], name: &str) {
    let mut vouched = VOUCHED.lock();
    if !vouched.iter().any(|v| same_bytes(&v.wasm, wasm)) {
        vouched.push(Vouched {
            wasm: wasm.clone(),
            sha256,
            name: name.to_owned(),
        });
    }
}

fn same_bytes(a: &[u8], b: &[u8]) -> bool {
    a.as_ptr() == b.as_ptr() && a.len() == b.len()
}

fn vouched(wasm: &[u8]) -> Option<([u8; 32], String)> {
    VOUCHED
        .lock()
        .iter()
        .find(|v| same_bytes(&v.wasm, wasm))
        .map(|v| (v.sha256, v.name.clone()))
}

type Notice = Box<dyn Fn(&str) + Send + Sync>;
static SLOW_COMPILE_NOTICE: OnceLock<Notice> = OnceLock::new();

/// Compiles still going after this long are announced.
const SLOW_COMPILE: Duration = Duration::from_secs(1);

/// Where a compile that takes over a second is announced, once per compile, with what is being
/// compiled: `sandboxd` prints it on its own stderr. Never part of any run's output. The first
/// call wins; without one, the notice goes to `tracing` only.
pub fn on_slow_compile(notice: impl Fn(&str) + Send + Sync + 'static) {
    let _ = SLOW_COMPILE_NOTICE.set(Box::new(notice));
}

/// Announces the compile of `what` if it is still going after [`SLOW_COMPILE`]; dropping the
/// returned sender (when the compile ends) cancels the notice.
fn announce_if_slow(what: String) -> std::sync::mpsc::Sender<()> {
    let (done, wait) = std::sync::mpsc::channel::<()>();
    let started = Instant::now();
    let spawned = std::thread::Builder::new()
        .name("wasmsand-compile-notice".into())
        .spawn(move || {
            if wait.recv_timeout(SLOW_COMPILE) == Err(std::sync::mpsc::RecvTimeoutError::Timeout) {
                let line = format!(
                    "compiling {what} for this machine (once: the result is cached); \
                     first use waits for it"
                );
                tracing::info!("{line}");
                if let Some(notice) = SLOW_COMPILE_NOTICE.get() {
                    notice(&line);
                }
                // Wait for the end, so a finished-notice could be added without a race.
                let _ = wait.recv();
                tracing::info!("compiled {what} in {:?}", started.elapsed());
            }
        });
    if spawned.is_err() {
        tracing::warn!("cannot start the compile-notice thread");
    }
    done
}

pub(crate) struct ModuleCache {
    engine: Engine,
    dir: Option<PathBuf>,
    key_suffix: String,
    /// Keyed by xxh3-128 of the wasm (a memory hit must not cost a SHA-256 of megabytes), or
    /// by a digest vouched for by the bytes' owner ([`vouch_digest`]).
    modules: Mutex<HashMap<Key, Slot>>,
    memory_hits: AtomicU64,
    disk_hits: AtomicU64,
    compiles: AtomicU64,
    rejected: AtomicU64,
}

impl ModuleCache {
    pub(crate) fn new(engine: Engine, dir: Option<PathBuf>) -> Self {
        let fp = Sha256::digest(engine_fingerprint().as_bytes());
        Self {
            engine,
            dir,
            key_suffix: hex(&fp[..8]),
            modules: Mutex::new(HashMap::new()),
            memory_hits: AtomicU64::new(0),
            disk_hits: AtomicU64::new(0),
            compiles: AtomicU64::new(0),
            rejected: AtomicU64::new(0),
        }
    }

    pub(crate) fn dir(&self) -> Option<&Path> {
        self.dir.as_deref()
    }

    pub(crate) fn stats(&self) -> CacheStats {
        CacheStats {
            memory_hits: self.memory_hits.load(Ordering::Relaxed),
            disk_hits: self.disk_hits.load(Ordering::Relaxed),
            compiles: self.compiles.load(Ordering::Relaxed),
            rejected_entries: self.rejected.load(Ordering::Relaxed),
        }
    }

    /// The compiled module for `wasm`. Concurrent loads of the same bytes wait for one
    /// compile instead of each doing it.
    pub(crate) fn load(&self, wasm: &[u8]) -> Result<crate::Program, ExecError> {
        let known = vouched(wasm);
        let key = match &known {
            Some((digest, _)) => Key::Sha256(*digest),
            None => Key::Xxh3(xxhash_rust::xxh3::xxh3_128(wasm)),
        };
        let (slot, fresh) = {
            let mut modules = self.modules.lock();
            match modules.get(&key) {
                Some(slot) => (slot.clone(), false),
                None => {
                    let slot = Slot::default();
                    modules.insert(key, slot.clone());
                    (slot, true)
                }
            }
        };
        if !fresh && slot.get().is_some() {
            self.memory_hits.fetch_add(1, Ordering::Relaxed);
        }
        slot.get_or_init(|| {
            let (hash, name) = match known {
                Some((digest, name)) => (digest, name),
                None => (
                    Sha256::digest(wasm).into(),
                    format!("a {} KiB WebAssembly module", wasm.len() >> 10),
                ),
            };
            // A module with an image is compiled without its data (see image.rs); the two are a
            // pair, cached under their own name. The image is written on a second thread while
            // the module loads: for CPython each is about half of a process's first load.
            let planned = MemoryImage::plan(wasm, crate::preinit::registered(&hash).is_some());
            let (image, module) = match planned {
                Some(planned) => std::thread::scope(|scope| {
                    let writer = scope.spawn(|| planned.write());
                    let stripped = self.load_uncached(&hash, Variant::Stripped, wasm, name.clone());
                    match writer.join().ok().flatten() {
                        Some(image) => Ok::<_, String>((Some(image), stripped?)),
                        // No memfd after all: the module that copies its own data.
                        None => Ok((None, self.load_uncached(&hash, Variant::Plain, wasm, name)?)),
                    }
                })?,
                None => (None, self.load_uncached(&hash, Variant::Plain, wasm, name)?),
            };
            let deeper = Arc::new(crate::preinit::Deeper::new(wasm, image.is_some()));
            if let Some(image) = self.saved_capture(&hash, &deeper, image.as_ref()) {
                let _ = deeper.image.set(Some(image));
            }
            // Read once here rather than in every run: which WASI calls the run must wrap.
            let wasi_imports = crate::wrap::wasi_imports(&module);
            let binds_late = crate::prepared::binds_late(wasm);
            // The marker is the stripped module's own, so it holds only with its image.
            let resets_in_place = binds_late
                && image.is_some()
                && module
                    .custom_sections(crate::image::RESETS_IN_PLACE)
                    .next()
                    .is_some();
            Ok(crate::Program {
                module,
                hash,
                image,
                deeper,
                wasi_imports,
                binds_late,
                resets_in_place,
            })
        })
        .clone()
        .map_err(ExecError::Compile)
    }

    /// A capture of the module with SHA-256 `hash` kept by an earlier process, if one may be
    /// used: the module qualifies, has an image to lay it over, and its registered
    /// [`crate::Preinit`] may be kept ([`crate::Preinit::capture_key`]).
    fn saved_capture(
        &self,
        hash: &[u8; 32],
        deeper: &crate::preinit::Deeper,
        image: Option<&Arc<MemoryImage>>,
    ) -> Option<Arc<MemoryImage>> {
        let dir = self.dir.as_ref()?;
        image?;
        deeper.qualified.as_ref().ok()?;
        let key = crate::preinit::registered(hash)?.capture_key(hash)?;
        let path = capture_path(dir, &key);
        match read_capture(&path, &key) {
            Ok(found) => found,
            Err(why) => {
                self.rejected.fetch_add(1, Ordering::Relaxed);
                tracing::warn!(path = %path.display(), "capturing again: saved memory unusable: {why}");
                None
            }
        }
    }

    /// Keeps `image`, just captured for the module with SHA-256 `hash`, for later processes.
    /// Best effort: without it they capture again.
    pub(crate) fn save_capture(&self, hash: &[u8; 32], image: &MemoryImage) {
        let Some(dir) = &self.dir else {
            return;
        };
        let Some(key) = crate::preinit::registered(hash).and_then(|p| p.capture_key(hash)) else {
            return;
        };
        if let Err(e) = write_capture(dir, &key, image) {
            tracing::warn!(dir = %dir.display(), "could not keep a captured memory: {e}");
        }
    }

    /// What an entry for `variant` must carry besides the wasm digest: the engine configuration
    /// and the variant, so that an entry renamed or copied from elsewhere is never run.
    fn fingerprint(&self, variant: Variant) -> [u8; 16] {
        let text = format!("{} {variant:?}", engine_fingerprint());
        let digest = Sha256::digest(text.as_bytes());
        digest[..16].try_into().expect("16 of 32 bytes")
    }

    fn entry_path(&self, dir: &Path, hash: &[u8; 32], variant: Variant) -> PathBuf {
        let tag = match variant {
            Variant::Plain => "",
            // Named apart from the entries of earlier versions, which kept the name section or
            // did not export the globals a reset in place needs.
            Variant::Stripped => "-nodata-nonames-resets",
        };
        dir.join(format!("{}-{}{tag}.cwasm", hex(hash), self.key_suffix))
    }

    fn load_uncached(
        &self,
        hash: &[u8; 32],
        variant: Variant,
        wasm: &[u8],
        name: String,
    ) -> Result<Module, String> {
        if let Some(dir) = &self.dir {
            let path = self.entry_path(dir, hash, variant);
            match self.read_entry(&path, hash, variant) {
                Ok(Some(module)) => {
                    self.disk_hits.fetch_add(1, Ordering::Relaxed);
                    return Ok(module);
                }
                Ok(None) => {}
                Err(why) => {
                    self.rejected.fetch_add(1, Ordering::Relaxed);
                    tracing::warn!(path = %path.display(), "recompiling: cache entry unusable: {why}");
                }
            }
        }
        self.compiles.fetch_add(1, Ordering::Relaxed);
        let notice = announce_if_slow(name);
        let module = match variant {
            Variant::Plain => Module::new(&self.engine, wasm),
            Variant::Stripped => match crate::image::strip(wasm) {
                Some(stripped) => Module::new(&self.engine, stripped),
                None => return Err("cannot read the module's sections".into()),
            },
        }
        .map_err(|e| e.to_string());
        drop(notice);
        let module = module?;
        if let Some(dir) = &self.dir
            && let Err(e) = self.write_entry(dir, hash, variant, &module)
        {
            tracing::warn!(dir = %dir.display(), "could not write module cache entry: {e}");
        }
        Ok(module)
    }

    /// `Ok(None)` when there is no entry; `Err` when there is one that cannot be used.
    fn read_entry(
        &self,
        path: &Path,
        hash: &[u8; 32],
        variant: Variant,
    ) -> Result<Option<Module>, String> {
        let Some((file, meta, image_len, trailer)) =
            open_with_trailer::<TRAILER>(path, MAGIC, "not a wasmsand cache entry")?
        else {
            return Ok(None);
        };
        let (wasm_digest, rest) = trailer[MAGIC.len()..].split_at(32);
        let (fingerprint, checksum) = rest.split_at(16);
        if wasm_digest != hash || fingerprint != self.fingerprint(variant) {
            return Err("entry of another module or engine".into());
        }
        verify(&file, path, &meta, image_len, checksum)?;
        // Through the descriptor already checked, not the name: another process may rename a
        // fresh entry over it meanwhile.
        let by_fd = PathBuf::from(format!("/proc/self/fd/{}", file.as_raw_fd()));
        // SAFETY: the file is the ELF image `Module::serialize` wrote for this wasm and an engine
        // with this exact configuration (the trailer names both, the checksum guards the bytes);
        // wasmer also checks the artifact's own header and version. Entries are renamed into
        // place, never changed in place, so the mapping wasmer makes stays valid.
        unsafe { Module::deserialize_from_file(&self.engine, &by_fd) }
            .map(Some)
            .map_err(|e| e.to_string())
    }

    fn write_entry(
        &self,
        dir: &Path,
        hash: &[u8; 32],
        variant: Variant,
        module: &Module,
    ) -> std::io::Result<()> {
        fs::create_dir_all(dir)?;
        let image = module.serialize().map_err(std::io::Error::other)?;
        let final_path = self.entry_path(dir, hash, variant);
        // Written aside and renamed so that a reader never sees half an entry.
        let mut tmp = tempfile_in(dir)?;
        tmp.1.write_all(&image)?;
        tmp.1.write_all(MAGIC)?;
        tmp.1.write_all(hash)?;
        tmp.1.write_all(&self.fingerprint(variant))?;
        tmp.1
            .write_all(&xxhash_rust::xxh3::xxh3_128(&image).to_le_bytes())?;
        tmp.1.sync_all()?;
        fs::rename(&tmp.0, &final_path)?;
        // The checksum was just computed from these bytes: no reader needs to redo it.
        if let Ok(meta) = fs::metadata(&final_path) {
            remember_verified(verified_memo(&final_path, &meta));
        }
        Ok(())
    }
}

/// The file at `path`, its metadata, the length of what precedes its trailer of `N` bytes,
/// and the trailer, which starts with `magic`: `Ok(None)` when there is no file, `Err(not)`
/// when it is too short or the magic is another.
#[allow(clippy::type_complexity)]
fn open_with_trailer<const N: usize>(
    path: &Path,
    magic: &[u8],
    not: &str,
) -> Result<Option<(fs::File, fs::Metadata, u64, [u8; N])>, String> {
    use std::os::unix::fs::FileExt;
    let file = match fs::File::open(path) {
        Ok(f) => f,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(e.to_string()),
    };
    let meta = file.metadata().map_err(|e| e.to_string())?;
    let Some(len) = meta.len().checked_sub(N as u64) else {
        return Err(not.into());
    };
    let mut trailer = [0u8; N];
    file.read_exact_at(&mut trailer, len)
        .map_err(|e| e.to_string())?;
    if !trailer.starts_with(magic) {
        return Err(not.into());
    }
    Ok(Some((file, meta, len, trailer)))
}

fn capture_path(dir: &Path, key: &[u8; 32]) -> PathBuf {
    dir.join(format!("{}.memory", hex(key)))
}

/// The capture saved at `path` under `key`: `Ok(None)` when there is none, `Err` when there is
/// one that cannot be used.
fn read_capture(path: &Path, key: &[u8; 32]) -> Result<Option<Arc<MemoryImage>>, String> {
    let Some((file, meta, len, trailer)) =
        open_with_trailer::<CAPTURE_TRAILER>(path, CAPTURE_MAGIC, "not a saved memory")?
    else {
        return Ok(None);
    };
    let (saved_key, rest) = trailer[CAPTURE_MAGIC.len()..].split_at(32);
    let (memory_bytes, rest) = rest.split_at(8);
    let (image_len, checksum) = rest.split_at(8);
    if saved_key != key {
        return Err("not the saved memory of this module and input".into());
    }
    let word = |b: &[u8]| u64::from_le_bytes(b.try_into().expect("8 bytes"));
    let (memory_bytes, image_len) = (word(memory_bytes), word(image_len));
    if image_len != len
        || len % OS_PAGE as u64 != 0
        || memory_bytes < len
        || memory_bytes % crate::WASM_PAGE != 0
        || memory_bytes > 1 << 32
    {
        return Err("inconsistent sizes".into());
    }
    verify(&file, path, &meta, len, checksum)?;
    Ok(Some(MemoryImage::from_saved(
        file,
        len as usize,
        memory_bytes as usize,
    )))
}

/// Writes `image` under `key` in `dir`: its non-zero pages (the rest stay holes), then the
/// trailer; aside, then renamed into place.
fn write_capture(dir: &Path, key: &[u8; 32], image: &MemoryImage) -> std::io::Result<()> {
    use std::os::unix::fs::FileExt;
    fs::create_dir_all(dir)?;
    let (tmp_path, tmp) = tempfile_in(dir)?;
    let result = (|| {
        let checksum = image.write_sparse(&tmp)?;
        tmp.set_len(image.len as u64)?;
        let mut trailer = Vec::with_capacity(CAPTURE_TRAILER);
        trailer.extend_from_slice(CAPTURE_MAGIC);
        trailer.extend_from_slice(key);
        trailer.extend_from_slice(&(image.memory_bytes as u64).to_le_bytes());
        trailer.extend_from_slice(&(image.len as u64).to_le_bytes());
        trailer.extend_from_slice(&checksum.to_le_bytes());
        tmp.write_all_at(&trailer, image.len as u64)?;
        tmp.sync_all()?;
        let path = capture_path(dir, key);
        fs::rename(&tmp_path, &path)?;
        if let Ok(meta) = fs::metadata(&path) {
            remember_verified(verified_memo(&path, &meta));
        }
        Ok(())
    })();
    if result.is_err() {
        let _ = fs::remove_file(&tmp_path);
    }
    result
}

/// Checks that the first `len` bytes of `file` (at `path`) have the xxh3-128 `checksum`,
/// unless the memo says this very file was verified before.
fn verify(
    file: &fs::File,
    path: &Path,
    meta: &fs::Metadata,
    len: u64,
    checksum: &[u8],
) -> Result<(), String> {
    let memo = verified_memo(path, meta);
    if memo
        .as_ref()
        .is_some_and(|(memo, identity)| fs::read_to_string(memo).ok().as_ref() == Some(identity))
    {
        return Ok(());
    }
    if checksum_of(file, len)
        .map_err(|e| e.to_string())?
        .to_le_bytes()
        != checksum
    {
        return Err("checksum mismatch".into());
    }
    remember_verified(memo);
    Ok(())
}

/// The xxh3-128 of the first `len` bytes of `file`, read in chunks (not mapped: a verification
/// pass should not leave 270 MB counted in this process's memory).
fn checksum_of(file: &fs::File, len: u64) -> std::io::Result<u128> {
    use std::os::unix::fs::FileExt;
    let mut hasher = xxhash_rust::xxh3::Xxh3::new();
    let mut buf = vec![0u8; 1 << 20];
    let mut at = 0u64;
    while at < len {
        let n = (len - at).min(buf.len() as u64) as usize;
        file.read_exact_at(&mut buf[..n], at)?;
        hasher.update(&buf[..n]);
        at += n as u64;
    }
    Ok(hasher.digest128())
}

/// Where the memo of a verified entry lives, and what it must say: the file's identity, which
/// any change to the file (even one that restores its mtime) alters through its ctime.
fn verified_memo(path: &Path, meta: &fs::Metadata) -> Option<(PathBuf, String)> {
    use std::os::unix::fs::MetadataExt;
    let name = path.file_name()?;
    let memo = path.parent()?.join("verified").join(name);
    let identity = format!(
        "{} {} {} {}.{} {}.{}\n",
        meta.dev(),
        meta.ino(),
        meta.len(),
        meta.mtime(),
        meta.mtime_nsec(),
        meta.ctime(),
        meta.ctime_nsec()
    );
    Some((memo, identity))
}

/// Best effort: without the memo, the next process verifies the checksum again.
fn remember_verified(memo: Option<(PathBuf, String)>) {
    let Some((memo, identity)) = memo else {
        return;
    };
    let Some(dir) = memo.parent() else {
        return;
    };
    let write = || -> std::io::Result<()> {
        fs::create_dir_all(dir)?;
        let mut tmp = tempfile_in(dir)?;
        tmp.1.write_all(identity.as_bytes())?;
        fs::rename(&tmp.0, &memo)
    };
    if let Err(e) = write() {
        tracing::debug!(memo = %memo.display(), "cannot record a verified cache entry: {e}");
    }
}

fn tempfile_in(dir: &Path) -> std::io::Result<(PathBuf, fs::File)> {
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    let name = format!(
        ".tmp-{}-{}",
        std::process::id(),
        COUNTER.fetch_add(1, Ordering::Relaxed)
    );
    let path = dir.join(name);
    let file = fs::File::create(&path)?;
    Ok((path, file))
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}
