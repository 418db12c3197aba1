//! Instances made before their runs are bound.
//!
//! An instance (a store, wasix's environment and its import object, the runner's wrappers,
//! wasmer's `Instance::new`) depends on nothing of its run but the engine (which carries the
//! memory cap), the image its memory starts from, and whether the sandbox is deterministic
//! (which replaces the clock). It is made first; what the run brings reaches it through
//! `bind.rs` when the run takes it. wasix's builder therefore gets no argv, environment or
//! working directory (`wasi/args.rs` answers those calls), which also spares every run wasix's
//! listing of the working directory.
//!
//! Made with the run's argv, environment and directory given to wasix's builder instead:
//! - a module with a start function, which runs inside instantiation and may read them;
//! - a module that imports wasix's own namespaces, whose calls read the copies wasix keeps
//!   (only its builder can set them).
//!
//! Making instances ahead of their runs, on a background thread, was measured and not kept:
//! docs/performance.md says why.

use std::sync::Arc;
use std::sync::atomic::AtomicU64;

use wasmer::{Engine, Extern, FunctionEnv, Global, Imports, Instance, Store, Value};
use wasmer_wasix::{WasiEnv, WasiEnvBuilder, WasiFunctionEnv};
use wasmparser::{Chunk, Parser, Payload};

use crate::bind::Late;
use crate::guard::{LateMemory, RunGuard};
use crate::image::MemoryImage;
use crate::tool_call::ToolCallEnv;
use crate::wasi::file::{Blocking, ErrnoSlot};
use crate::wasi::fs::{RunStream, VfsFs};
use crate::wasi::stdio::PipeBreak;
use crate::{ExecError, Exit, Process, Program};

/// An instance and everything made with it, not yet bound to a run.
pub(crate) struct Prepared {
    pub(crate) store: Store,
    pub(crate) func_env: WasiFunctionEnv,
    pub(crate) instance: Instance,
    pub(crate) run: Late,
    pub(crate) errno: Arc<ErrnoSlot>,
    pub(crate) broken_pipe: Arc<PipeBreak>,
    pub(crate) memory: LateMemory,
    pub(crate) guard: Arc<RunGuard>,
    pub(crate) calls: Arc<AtomicU64>,
    pub(crate) tool_call: Option<FunctionEnv<ToolCallEnv>>,
    /// For an instance that may be put back in place (`kept.rs`): its mutable globals, with
    /// the values instantiation gave them, and its memory's first size.
    pub(crate) first_state: Option<(Vec<(Global, Value)>, usize)>,
}

/// For a module whose instances must know their run when made (see the module's words): what
/// wasix's builder is given.
pub(crate) struct ForRun<'a> {
    pub(crate) vfs: &'a crate::SharedVfs,
    pub(crate) args: &'a [String],
    pub(crate) env: &'a [(String, String)],
    pub(crate) cwd: &'a str,
}

/// What an instance depends on besides its module and image.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Key {
    pub(crate) memory_limit: Option<u64>,
    pub(crate) deterministic: bool,
}

/// Whether instances of `wasm` may be made before their run is bound (see the module's
/// words).
pub(crate) fn binds_late(wasm: &[u8]) -> bool {
    const OWN: [&str; 4] = [
        "wasi_snapshot_preview1",
        "wasi_unstable",
        "wasmsand",
        "host",
    ];
    let mut parser = Parser::new(0);
    let mut rest = wasm;
    loop {
        let Ok(Chunk::Parsed { consumed, payload }) = parser.parse(rest, true) else {
            return false;
        };
        match payload {
            Payload::StartSection { .. } => return false,
            Payload::ImportSection(imports) => {
                for import in imports.into_imports() {
                    match import {
                        Ok(i) if OWN.contains(&i.module) => {}
                        _ => return false,
                    }
                }
            }
            Payload::CodeSectionStart { size, .. } => {
                parser.skip_section();
                let Some(after) = rest.get(consumed + size as usize..) else {
                    return false;
                };
                rest = after;
                continue;
            }
            Payload::End(_) => return true,
            _ => {}
        }
        rest = &rest[consumed..];
    }
}

/// Makes an instance of `program` over `image` in a new store of `engine` (the engine of
/// `key`'s memory cap); `for_run` for a module that does not bind late. `Ok(Err)` is the run's end when the module's initial memory does not
/// fit under the cap.
pub(crate) fn make(
    process: &Process,
    engine: Engine,
    program: &Program,
    image: Option<Arc<MemoryImage>>,
    key: &Key,
    for_run: Option<ForRun<'_>>,
) -> Result<Result<Prepared, Exit>, ExecError> {
    let _tokio = process.tokio.enter();
    let mut store = Store::new(engine);
    crate::guard::drop_interrupts_in_host_code(&mut store);
    let run = Late::default();
    let errno = Arc::new(ErrnoSlot::default());
    let broken_pipe = Arc::new(PipeBreak::default());
    let builder = wasi_builder(process, &run, &errno, for_run.as_ref())?;
    let mut func_env = builder.finalize(&mut store).map_err(setup)?;
    broken_pipe.attach(func_env.data(&store).process.clone());
    let mut imports = func_env
        .import_object(&mut store, &program.module)
        .map_err(setup)?;
    let memory = LateMemory::default();
    let guard = Arc::new(RunGuard::default());
    let calls = Arc::new(AtomicU64::new(0));
    let own_args = for_run.is_none();
    let tool_call = define_host_functions(
        &mut store,
        program,
        &mut imports,
        &run,
        &errno,
        &memory,
        &guard,
        &calls,
        key.deterministic,
        own_args,
    );
    let limited = key.memory_limit.is_some();
    let instance = match instantiate(&mut store, program, &imports, image, limited)? {
        Ok(instance) => instance,
        Err(exit) => return Ok(Err(exit)),
    };
    if let Ok(m) = instance.exports.get_memory("memory") {
        let _ = memory.set(m.clone());
    }
    func_env
        .initialize(&mut store, instance.clone())
        .map_err(setup)?;
    if let Some(env) = &tool_call {
        crate::tool_call::attach(&mut store, env, &instance);
    }
    let first_state = program
        .resets_in_place
        .then(|| {
            let globals = instance
                .exports
                .iter()
                .filter(|(name, _)| name.starts_with(crate::image::GLOBAL_EXPORT_PREFIX))
                .filter_map(|(_, export)| match export {
                    Extern::Global(g) => Some((g.clone(), g.get(&mut store))),
                    _ => None,
                })
                .collect();
            Some((globals, memory.get()?.view(&store).data_size() as usize))
        })
        .flatten();
    Ok(Ok(Prepared {
        store,
        func_env,
        instance,
        run,
        errno,
        broken_pipe,
        memory,
        guard,
        calls,
        tool_call,
        first_state,
    }))
}

/// wasix's builder for an instance's environment: its streams and root lead to the run bound
/// to `run`; `for_run` for a module that does not bind late.
fn wasi_builder(
    process: &Process,
    run: &Late,
    errno: &Arc<ErrnoSlot>,
    for_run: Option<&ForRun<'_>>,
) -> Result<WasiEnvBuilder, ExecError> {
    // wasix's setup reads the working directory it is given (and creates it when missing: the
    // run checked that it exists); without one, it looks at the root only.
    let setup_tree = for_run.map_or_else(|| crate::bind::empty_tree().clone(), |r| r.vfs.clone());
    let fs: Arc<dyn virtual_fs::FileSystem + Send + Sync> =
        Arc::new(VfsFs::new(run.clone(), errno.clone(), setup_tree));
    let stream = |fd| Blocking::boxed(RunStream::new(run, fd));
    let argv0 = for_run
        .and_then(|r| r.args.first().cloned())
        .unwrap_or_default();
    let mut builder = WasiEnv::builder(argv0)
        .stdin(stream(0))
        .stdout(stream(1))
        .stderr(stream(2))
        .fs(fs)
        .preopen_dir("/")
        .map_err(setup)?
        .runtime(process.runtime.clone());
    if let Some(r) = for_run {
        builder = builder
            .args(r.args.iter().skip(1).map(|a| crate::raw::encode(a)))
            .envs(
                r.env
                    .iter()
                    .map(|(k, v)| (crate::raw::encode(k), crate::raw::encode(v))),
            )
            .current_dir(r.cwd);
    }
    Ok(builder)
}

impl Prepared {
    /// Lets go of what the run bound (its tree, streams, argv, tool channel) as soon as the
    /// run is over, before the instance waits to be put back (`kept.rs`).
    pub(crate) fn release(&mut self) {
        self.run.clear();
        if let Some(env) = &self.tool_call {
            crate::tool_call::bind(&mut self.store, env, None, Default::default());
        }
    }

    /// Puts an instance whose run ended back as [`make`] made it, to serve another run
    /// (`kept.rs`): its memory back to its image and first size, its mutable globals to their
    /// first values, a new wasix environment (descriptors, the process, its exit), and every
    /// part of the run's binding let go. False when any part could not be, and the instance
    /// must be dropped.
    pub(crate) fn reset(&mut self, process: &Process) -> bool {
        let Some((globals, size)) = &self.first_state else {
            return false;
        };
        let Some(memory) = self.memory.get() else {
            return false;
        };
        // A memory that is not the pool's would reset to no size, and say so only this way.
        if memory.reset(&mut self.store).is_err()
            || memory.view(&self.store).data_size() as usize != *size
        {
            return false;
        }
        for (global, value) in globals {
            if global.set(&mut self.store, value.clone()).is_err() {
                return false;
            }
        }
        let Ok(builder) = wasi_builder(process, &self.run, &self.errno, None) else {
            return false;
        };
        let Ok(env) = builder.build() else {
            return false;
        };
        // The last run's environment (already through `on_exit`) is dropped here.
        *self.func_env.data_mut(&mut self.store) = env;
        if self
            .func_env
            .initialize(&mut self.store, self.instance.clone())
            .is_err()
        {
            return false;
        }
        self.broken_pipe
            .attach(self.func_env.data(&self.store).process.clone());
        self.release();
        self.errno.clear();
        self.guard.reset();
        self.calls.store(0, std::sync::atomic::Ordering::SeqCst);
        true
    }
}

fn setup(e: impl std::fmt::Display) -> ExecError {
    ExecError::Setup(e.to_string())
}

/// Defines what the module imports beyond WASI itself (and wraps WASI's calls that need a
/// precise errno): argv and the environment, permission bits and times, hard links, the
/// deterministic clock, the tool-call channel. Returns the tool-call channel's environment
/// when the module uses it.
#[allow(clippy::too_many_arguments)]
fn define_host_functions(
    store: &mut Store,
    program: &Program,
    imports: &mut Imports,
    run: &Late,
    errno: &Arc<ErrnoSlot>,
    memory: &LateMemory,
    guard: &Arc<RunGuard>,
    calls: &Arc<AtomicU64>,
    deterministic: bool,
    own_args: bool,
) -> Option<FunctionEnv<ToolCallEnv>> {
    let module = &program.module;
    let wasi_imports = &program.wasi_imports;
    crate::wrap::wrap_imports(store, wasi_imports, imports, errno, memory, guard, run);
    crate::wasi::exit::define(store, wasi_imports, imports);
    if own_args {
        crate::wasi::args::define(store, wasi_imports, imports, run, memory);
    }
    crate::wasi::modes::define(store, module, imports, run, memory);
    crate::wasi::modes::define_set_times(store, module, imports, run, memory, guard);
    crate::wasi::links::define(store, module, imports, run, memory, guard);
    crate::wasi::clock::define(store, module, imports, deterministic, run, memory);
    crate::tool_call::define(store, module, imports, calls.clone(), guard.clone())
}

/// Instantiates the module, its memory starting from `image` when there is one. Under a memory
/// cap (`limited`), an initial memory over it ends the run as out of memory.
fn instantiate(
    store: &mut Store,
    program: &Program,
    imports: &Imports,
    image: Option<Arc<MemoryImage>>,
    limited: bool,
) -> Result<Result<Instance, Exit>, ExecError> {
    let offered = crate::image::offer(image);
    let instantiated = Instance::new(store, &program.module, imports);
    drop(offered);
    match instantiated {
        Ok(instance) => Ok(Ok(instance)),
        Err(e) => {
            let msg = e.to_string();
            if limited && msg.contains("over the limit") {
                Ok(Err(Exit::OutOfMemory(msg)))
            } else {
                Err(setup(msg))
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn modules_with_a_start_function_or_wasix_imports_get_their_argv_from_wasix() {
        let plain = wasmer::wat2wasm(
            br#"(module (import "wasi_snapshot_preview1" "proc_exit" (func (param i32)))
                (memory (export "memory") 1) (func (export "_start")))"#,
        )
        .unwrap();
        assert!(binds_late(&plain));
        let started = wasmer::wat2wasm(
            br#"(module (memory (export "memory") 1) (func $s) (start $s)
                (func (export "_start")))"#,
        )
        .unwrap();
        assert!(!binds_late(&started));
        let wasix = wasmer::wat2wasm(
            br#"(module (import "wasix_32v1" "getcwd" (func (param i32 i32) (result i32)))
                (memory (export "memory") 1) (func (export "_start")))"#,
        )
        .unwrap();
        assert!(!binds_late(&wasix));
        assert!(!binds_late(b"not wasm"));
    }
}
