//! Compiled-module cache: in memory for the life of the process, and on disk across processes,
//! keyed by the wasm's SHA-256 and the engine's configuration.
//!
//! A disk entry is `MAGIC`, the xxh3-128 of the payload, then the payload (wasmer's serialized
//! module). An entry that is short, has another magic, fails its checksum or that wasmer
//! refuses is recompiled and rewritten: a broken cache costs time, never correctness.

use std::collections::HashMap;
use std::fs;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, OnceLock};

use parking_lot::Mutex;
use sha2::{Digest, Sha256};
use wasmer::{Engine, Module};

use crate::ExecError;
use crate::engine::engine_fingerprint;

const MAGIC: &[u8; 16] = b"wasmsand-cwasm1\n";
const HEADER: usize = MAGIC.len() + 16;

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

type Slot = Arc<OnceLock<Result<(Module, [u8; 32]), String>>>;

pub(crate) struct ModuleCache {
    engine: Engine,
    dir: Option<PathBuf>,
    key_suffix: String,
    /// Keyed by xxh3-128 of the wasm: a memory hit must not cost a SHA-256 of megabytes.
    modules: Mutex<HashMap<u128, Slot>>,
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
    pub(crate) fn load(&self, wasm: &[u8]) -> Result<(Module, [u8; 32]), ExecError> {
        let key = xxhash_rust::xxh3::xxh3_128(wasm);
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
            let hash: [u8; 32] = Sha256::digest(wasm).into();
            self.load_uncached(&hash, wasm).map(|m| (m, hash))
        })
        .clone()
        .map_err(ExecError::Compile)
    }

    fn entry_path(&self, dir: &Path, hash: &[u8; 32]) -> PathBuf {
        dir.join(format!("{}-{}.cwasm", hex(hash), self.key_suffix))
    }

    fn load_uncached(&self, hash: &[u8; 32], wasm: &[u8]) -> Result<Module, String> {
        if let Some(dir) = &self.dir {
            let path = self.entry_path(dir, hash);
            match self.read_entry(&path) {
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
        let module = Module::new(&self.engine, wasm).map_err(|e| e.to_string())?;
        if let Some(dir) = &self.dir
            && let Err(e) = self.write_entry(dir, hash, &module)
        {
            tracing::warn!(dir = %dir.display(), "could not write module cache entry: {e}");
        }
        Ok(module)
    }

    /// `Ok(None)` when there is no entry; `Err` when there is one that cannot be used.
    fn read_entry(&self, path: &Path) -> Result<Option<Module>, String> {
        let data = match fs::read(path) {
            Ok(d) => d,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
            Err(e) => return Err(e.to_string()),
        };
        if data.len() < HEADER || &data[..MAGIC.len()] != MAGIC {
            return Err("not a wasmsand cache entry".into());
        }
        let (sum, payload) = data[MAGIC.len()..].split_at(16);
        if xxhash_rust::xxh3::xxh3_128(payload).to_le_bytes() != sum {
            return Err("checksum mismatch".into());
        }
        // SAFETY: the payload is byte-for-byte what `Module::serialize` wrote for an engine with
        // this exact configuration (the file name carries its fingerprint, the checksum
        // guards the bytes); wasmer also checks the artifact's own header and version.
        unsafe { Module::deserialize(&self.engine, payload) }
            .map(Some)
            .map_err(|e| e.to_string())
    }

    fn write_entry(&self, dir: &Path, hash: &[u8; 32], module: &Module) -> std::io::Result<()> {
        fs::create_dir_all(dir)?;
        let payload = module.serialize().map_err(std::io::Error::other)?;
        let final_path = self.entry_path(dir, hash);
        // Written aside and renamed so that a reader never sees half an entry.
        let mut tmp = tempfile_in(dir)?;
        tmp.1.write_all(MAGIC)?;
        tmp.1
            .write_all(&xxhash_rust::xxh3::xxh3_128(&payload).to_le_bytes())?;
        tmp.1.write_all(&payload)?;
        tmp.1.sync_all()?;
        fs::rename(&tmp.0, &final_path)
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
