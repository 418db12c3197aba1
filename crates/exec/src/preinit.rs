//! Deeper memory images: a module's memory captured after the guest ran some initialization of
//! its own (for CPython: `import numpy`), which every later instance starts from. What Wizer
//! does at build time, done once per process at run time, over the same copy-on-write mapping
//! as the module's own image (`image.rs`, `memory.rs`).
//!
//! The initialization runs in a throw-away instance at a call boundary: the embedder's
//! allocator export takes the input, the entry export runs it and returns 0. Then the whole
//! linear memory is the image, and instances start with memory of that size.
//!
//! What makes a memory at a call boundary a complete instance state, and is checked before
//! anything is captured ([`qualifies`]):
//! - Globals: the module has at most one mutable global, and it is an `i32` (wasm-ld's shadow
//!   stack pointer, `__stack_pointer`). The C ABI restores it before every return, so once the
//!   entry has returned it holds its initial value again; any other mutable global would have
//!   to be captured too, and such a module gets no deeper image.
//! - Tables: a table with a maximum equal to its minimum cannot grow; C code never stores
//!   into a table, so its elements are the ones instantiation writes. A growable table gets
//!   no deeper image.
//! - Host state (WASI descriptors, the working directory) is not in the image: the embedder's
//!   input must leave none behind that later runs would need (CPython's check: the set of open
//!   descriptors is the same before and after its imports).
//! - Copies of the run's host state that the guest keeps in its memory must be dropped by the
//!   entry before it returns: the C library reads the environment once, at start-up, so jq's
//!   entry forgets it (`__wasilibc_deinitialize_environ`) and each run reads its own.
//!
//! A command module (jq) registers the export that runs a command from the captured memory
//! ([`Preinit::run`]); a module with a registered capture gets a memory image whatever the size
//! of its data, since a deeper image is laid over one.
//!
//! The capture runs at most once per module per [`crate::Exec`], on a background thread the
//! first run of the module starts (so no run waits for it), or when
//! [`crate::Exec::preinitialize`] asks. Until it is done runs use the module's own image; if it
//! fails they always will (a warning says why).

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, OnceLock};

use parking_lot::Mutex;
use wasmparser::{Chunk, Parser, Payload, TypeRef, ValType};

use crate::RunSpec;
use crate::image::MemoryImage;

/// How to pre-initialize a module (registered per module digest by whoever knows the guest).
pub struct Preinit {
    /// The capturing run's set-up: filesystem, arguments, environment. Its output is kept
    /// only for the warning if the capture fails.
    pub spec: Box<dyn Fn() -> RunSpec + Send + Sync>,
    /// Export `(i32 len) -> i32 ptr` that allocates room for the input in guest memory.
    pub alloc: String,
    /// Export `(i32 ptr, i32 len) -> i32` that runs the input; 0 means success.
    pub entry: String,
    /// What the entry runs.
    pub input: Vec<u8>,
    /// For a command module (one with `_start`): the export `() -> ()` that runs the command
    /// from the captured memory. Once the capture is done, runs that would enter at `_start`
    /// enter here and start from it; `_start` would run the C library's start-up a second time
    /// over a memory that has had it. `None` for a module whose runs name their entry
    /// themselves (CPython's `turn`).
    pub run: Option<String>,
    /// What the capture reads besides the module, its entry and its input, as bytes that
    /// change whenever any of it does: the digests of the files `spec` lays out, and
    /// anything else of `spec` that is not fixed. `Some` lets the capture be kept in the module
    /// cache's directory and started from by later processes at once (see
    /// [`Preinit::capture_key`]); `None` captures anew in every process.
    pub depends: Option<Vec<u8>>,
}

/// Part of every capture's key: bumped when what the runner hands a guest during a capture
/// (its WASI answers, the way the entry is called) changes so that the same module, input and
/// files could leave another memory, so that captures of earlier versions are not used.
const CAPTURE_FORMAT: u32 = 1;

impl Preinit {
    /// The name a capture of the module with SHA-256 `module` is kept under on disk: a digest
    /// of everything the captured memory is a function of. `None` when it may not be kept.
    pub(crate) fn capture_key(&self, module: &[u8; 32]) -> Option<[u8; 32]> {
        use sha2::{Digest, Sha256};
        let depends = self.depends.as_ref()?;
        let mut h = Sha256::new();
        let mut part = |bytes: &[u8]| {
            h.update((bytes.len() as u64).to_le_bytes());
            h.update(bytes);
        };
        part(&CAPTURE_FORMAT.to_le_bytes());
        part(crate::engine::engine_fingerprint().as_bytes());
        part(module);
        part(self.alloc.as_bytes());
        part(self.entry.as_bytes());
        part(self.run.as_deref().unwrap_or("\0").as_bytes());
        part(&self.input);
        part(depends);
        Some(h.finalize().into())
    }
}

fn registry() -> &'static Mutex<HashMap<[u8; 32], Arc<Preinit>>> {
    static R: OnceLock<Mutex<HashMap<[u8; 32], Arc<Preinit>>>> = OnceLock::new();
    R.get_or_init(Default::default)
}

/// Registers how to pre-initialize the module whose wasm has SHA-256 `digest`, for every
/// [`crate::Exec`] of the process. A module loaded before keeps what it has.
pub fn register_preinit(digest: [u8; 32], preinit: Preinit) {
    registry().lock().insert(digest, Arc::new(preinit));
}

pub(crate) fn registered(digest: &[u8; 32]) -> Option<Arc<Preinit>> {
    if disabled() {
        return None;
    }
    registry().lock().get(digest).cloned()
}

/// `WASMSAND_PREINIT=0` keeps every module on its own image (for comparing the two in
/// benchmarks, and a way out should a guest misbehave from a captured state).
fn disabled() -> bool {
    static DISABLED: OnceLock<bool> = OnceLock::new();
    *DISABLED.get_or_init(|| std::env::var_os("WASMSAND_PREINIT").is_some_and(|v| v == "0"))
}

/// The deeper image of one loaded module, shared by every `Program` clone of it.
pub(crate) struct Deeper {
    /// Whether the module's state at a call boundary is its memory ([`qualifies`]).
    pub(crate) qualified: Result<(), String>,
    /// `Some(None)` once a capture failed or the module does not qualify.
    pub(crate) image: OnceLock<Option<Arc<MemoryImage>>>,
    pub(crate) started: AtomicBool,
}

impl Deeper {
    pub(crate) fn new(wasm: &[u8], has_image: bool) -> Deeper {
        Deeper {
            qualified: if has_image {
                qualifies(wasm)
            } else {
                Err("its data is copied at instantiation (no memory image)".into())
            },
            image: OnceLock::new(),
            started: AtomicBool::new(false),
        }
    }

    pub(crate) fn ready(&self) -> Option<Arc<MemoryImage>> {
        self.image.get().cloned().flatten()
    }

    /// Claims the background capture; false if one was started or finished already.
    pub(crate) fn claim(&self) -> bool {
        self.image.get().is_none() && !self.started.swap(true, Ordering::SeqCst)
    }
}

/// Whether a memory captured at a call boundary is the whole state of an instance of `wasm`
/// (see the module documentation); `Err` says why not.
pub(crate) fn qualifies(wasm: &[u8]) -> Result<(), String> {
    let mut parser = Parser::new(0);
    let mut rest = wasm;
    let mut mutable = Vec::new();
    loop {
        let Chunk::Parsed { consumed, payload } = parser
            .parse(rest, true)
            .map_err(|e| format!("unreadable module: {e}"))?
        else {
            return Err("truncated module".into());
        };
        match payload {
            Payload::ImportSection(imports) => {
                for import in imports.into_imports() {
                    match import.map_err(|e| e.to_string())?.ty {
                        TypeRef::Global(g) if g.mutable => {
                            return Err("imports a mutable global".into());
                        }
                        TypeRef::Table(_) => return Err("imports a table".into()),
                        TypeRef::Memory(_) => return Err("imports its memory".into()),
                        _ => {}
                    }
                }
            }
            Payload::TableSection(tables) => {
                for table in tables {
                    let ty = table.map_err(|e| e.to_string())?.ty;
                    if ty.maximum != Some(ty.initial) {
                        return Err("has a table that can grow".into());
                    }
                }
            }
            Payload::GlobalSection(globals) => {
                for global in globals {
                    let ty = global.map_err(|e| e.to_string())?.ty;
                    if ty.mutable {
                        mutable.push(ty.content_type);
                    }
                }
            }
            Payload::CodeSectionStart { size, .. } => {
                parser.skip_section();
                rest = rest.get(consumed + size as usize..).ok_or("truncated")?;
                continue;
            }
            Payload::End(_) => break,
            _ => {}
        }
        rest = &rest[consumed..];
    }
    match mutable.as_slice() {
        [] | [ValType::I32] => Ok(()),
        _ => Err("has mutable globals besides the stack pointer".into()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn wasm(wat: &str) -> Vec<u8> {
        wasmer::wat2wasm(wat.as_bytes()).unwrap().to_vec()
    }

    #[test]
    fn only_a_stack_pointer_and_fixed_tables_qualify() {
        let ok = "(module (memory 1) (global (mut i32) (i32.const 1024)) (table 2 2 funcref))";
        assert!(qualifies(&wasm(ok)).is_ok());
        let two = "(module (global (mut i32) (i32.const 0)) (global (mut i32) (i32.const 0)))";
        assert!(qualifies(&wasm(two)).is_err());
        let growable = "(module (table 1 funcref))";
        assert!(qualifies(&wasm(growable)).is_err());
        let imported = "(module (import \"env\" \"memory\" (memory 1)))";
        assert!(qualifies(&wasm(imported)).is_err());
    }
}
