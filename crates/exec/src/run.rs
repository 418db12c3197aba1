//! One run: build the WASI environment over the VFS, instantiate, call the entry point under a
//! watchdog, and classify how it ended.

use std::sync::atomic::Ordering;
use std::sync::{Arc, OnceLock};
use std::thread;
use std::time::{Duration, Instant};

use parking_lot::{Condvar, Mutex};
use wasmer::{
    AsStoreMut, Engine, Extern, Function, FunctionEnv, FunctionEnvMut, Imports, Instance, Memory,
    RuntimeError, Store, Value,
};
use wasmer_wasix::types::wasi::{Errno as WasiErrno, Filetype as WasiFiletype, Signal};
use wasmer_wasix::{WasiError, WasiProcess};

use crate::bind::{Bound, Late, Strings};
use crate::guard::{LateMemory, ROOT_FDS, RunGuard};
use crate::prepared::{self, Key, Prepared};
use crate::wasi::fds::FdTracker;
use crate::wasi::file::ErrnoSlot;
use crate::wasi::fs::Stdio;
use crate::wasi::paths::{self, Call, Siblings};
use crate::wasi::stdio::{CancelToken, StdinFile, Wakeable};
use crate::{ExecError, Exit, Outcome, Process, Program, RunSpec};

fn setup(e: impl std::fmt::Display) -> ExecError {
    ExecError::Setup(e.to_string())
}

/// Runs `program` with its memory starting from `image`; with `capture`, returns the memory
/// as it is after the entry point returned 0 (see `preinit.rs`).
pub(crate) fn run(
    process: &Process,
    engine: Engine,
    program: &Program,
    image: Option<Arc<crate::image::MemoryImage>>,
    spec: RunSpec,
    capture: bool,
) -> Result<(Outcome, Option<Arc<crate::image::MemoryImage>>), ExecError> {
    let started = Instant::now();
    let _tokio = process.tokio.enter();

    // wasix creates a missing working directory; the sandbox's tree is not its to change.
    let det = {
        let vfs = spec.vfs.lock();
        match vfs.stat(&spec.cwd) {
            Ok(m) if m.is_dir() => {}
            Ok(_) => return Err(setup(format!("{}: not a directory", spec.cwd))),
            Err(e) => return Err(setup(e)),
        }
        vfs.deterministic()
    };
    // WASI has no working directory; wasi-libc starts at `/`. The guest programs change
    // to `$PWD` first thing, so PWD always names the run's directory (as in a shell).
    let mut env = spec.env;
    match env.iter_mut().find(|(k, _)| k == "PWD") {
        Some((_, v)) => v.clone_from(&spec.cwd),
        None => env.push(("PWD".into(), spec.cwd.clone())),
    }
    let key = Key {
        memory_limit: spec.memory_limit,
        deterministic: det.is_some(),
    };
    let args = Strings::new(spec.args.iter().map(|a| a.as_bytes())).map_err(setup)?;
    let environment = Strings::environment(&env).map_err(setup)?;
    let for_run = (!program.binds_late).then_some(prepared::ForRun {
        vfs: &spec.vfs,
        args: &spec.args,
        env: &env,
        cwd: &spec.cwd,
    });
    let made = match prepared::make(process, engine, program, image, &key, for_run)? {
        Ok(p) => p,
        Err(too_big) => {
            let outcome = Outcome {
                exit: too_big,
                elapsed: started.elapsed(),
                tool_calls: 0,
                cpu_time: Duration::ZERO,
                peak_memory: 0,
                memory_capped: true,
                open_files_capped: false,
                pool_open_files_capped: false,
            };
            return Ok((outcome, None));
        }
    };
    let Prepared {
        mut store,
        func_env,
        instance,
        run,
        errno,
        broken_pipe,
        memory: late_memory,
        guard,
        calls,
        tool_call,
    } = made;

    // The guest starts with its standard streams and wasix's two roots.
    let fds = spec.open_files.map(|caps| {
        let initial = (0..3).chain(ROOT_FDS.iter().map(|fd| *fd as u32));
        Arc::new(FdTracker::new(caps, initial))
    });
    let stdin = Arc::new(Mutex::new(StdinFile::new(spec.stdin, &errno)));
    run.bind(Bound {
        vfs: spec.vfs,
        cwd: spec.cwd,
        stdio: Stdio {
            stdin,
            stdout: spec.stdout,
            stderr: spec.stderr,
            errno: errno.clone(),
            broken_pipe: broken_pipe.clone(),
        },
        fds: fds.clone(),
        det,
        args,
        env: environment,
    });
    if let Some(env) = &tool_call {
        crate::tool_call::bind(&mut store, env, spec.tool_channel, spec.cancel.clone());
    }

    let wasi_process = func_env.data(&store).process.clone();
    let watchdog = Watchdog::start(
        spec.deadline,
        spec.cancel.clone(),
        store.interrupter(),
        wasi_process,
        guard,
    );
    crate::memory::take_growth_refused();
    let cpu_before = thread_cpu_time();
    let result = match (spec.entry.as_deref(), &spec.entry_input) {
        (Some(entry), Some((alloc, input))) => {
            call_with_input(&mut store, &instance, alloc, entry, input)
        }
        (entry, _) => call_entry(&mut store, &instance, entry),
    };
    let captured = match (capture, &result, late_memory.get()) {
        (true, Ok(values), Some(memory)) if matches!(values.first(), Some(Value::I32(0))) => {
            capture_memory(&store, memory)
        }
        _ => None,
    };
    let cpu_time = thread_cpu_time().saturating_sub(cpu_before);
    let memory_capped = crate::memory::take_growth_refused();
    let fired = watchdog.finish();
    let peak_memory = late_memory.get().map_or(0, |m| m.view(&store).data_size());

    let exit = match fired {
        Some(exit) => exit,
        // On Linux the first write to a pipe without a reader kills the writer with SIGPIPE,
        // which a shell reports as 141 (and `set -o pipefail` sees); the guest got EPIPE and
        // may have exited on its own terms, so the status is made what it would have been.
        None if broken_pipe.happened() => Exit::Code(141),
        None => classify(result, &mut store, &instance, spec.memory_limit),
    };
    let code = exit.status();
    func_env.on_exit(&mut store, Some((code as u16).into()));
    let memory_capped = memory_capped || matches!(exit, Exit::OutOfMemory(_));
    let (open_files_capped, pool_open_files_capped) =
        fds.as_ref().map_or((false, false), |t| t.capped());
    let outcome = Outcome {
        exit,
        elapsed: started.elapsed(),
        tool_calls: calls.load(Ordering::SeqCst),
        cpu_time,
        peak_memory,
        memory_capped,
        open_files_capped,
        pool_open_files_capped,
    };
    // A capture stopped by the watchdog is not a state to start from.
    let captured = captured.filter(|_| succeeded(&outcome));
    Ok((outcome, captured))
}

/// The instance's memory as an image later runs can start from (see `preinit.rs`).
fn capture_memory(store: &Store, memory: &Memory) -> Option<Arc<crate::image::MemoryImage>> {
    let view = memory.view(store);
    // SAFETY: the instance is idle (its entry returned) and nothing else references its
    // memory; the slice is dropped before the store is touched again.
    let bytes = unsafe { view.data_unchecked() };
    crate::image::MemoryImage::capture(bytes)
}

fn succeeded(outcome: &Outcome) -> bool {
    matches!(outcome.exit, Exit::Code(0))
}

fn call_with_input(
    store: &mut Store,
    instance: &Instance,
    alloc: &str,
    entry: &str,
    input: &[u8],
) -> Result<Box<[Value]>, RuntimeError> {
    let get = |name: &str| {
        instance
            .exports
            .get_function(name)
            .cloned()
            .map_err(|_| RuntimeError::new(format!("the program has no {name}")))
    };
    if let Ok(init) = get("_initialize") {
        init.call(store, &[])?;
    }
    let len = i32::try_from(input.len()).map_err(|_| RuntimeError::new("entry input too long"))?;
    let ptr = match get(alloc)?.call(store, &[Value::I32(len)])?.first() {
        Some(Value::I32(p)) if *p != 0 => *p,
        _ => return Err(RuntimeError::new("the guest could not allocate the input")),
    };
    let memory = instance
        .exports
        .get_memory("memory")
        .map_err(|_| RuntimeError::new("the program exports no memory"))?;
    memory
        .view(&*store)
        .write(u64::from(ptr as u32), input)
        .map_err(|e| RuntimeError::new(e.to_string()))?;
    get(entry)?.call(store, &[Value::I32(ptr), Value::I32(len)])
}

/// CPU time of the calling thread: the guest runs on it, so the difference across the entry
/// point is the guest's CPU time (two vDSO calls, ~50 ns each).
fn thread_cpu_time() -> Duration {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `ts` is a valid, writable timespec; the clock id is a constant Linux supports.
    let rc = unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut ts) };
    if rc != 0 {
        return Duration::ZERO;
    }
    Duration::new(ts.tv_sec as u64, ts.tv_nsec as u32)
}

fn call_entry(
    store: &mut Store,
    instance: &Instance,
    entry: Option<&str>,
) -> Result<Box<[Value]>, RuntimeError> {
    let get = |name: &str| instance.exports.get_function(name).ok().cloned();
    match entry {
        None => match get("_start") {
            Some(start) => start.call(store, &[]),
            None => Err(RuntimeError::new("the program has no _start")),
        },
        Some(name) => {
            // A reactor initializes once per instance, then serves its entry point.
            if let Some(init) = get("_initialize") {
                init.call(store, &[])?;
            }
            match get(name) {
                Some(f) => f.call(store, &[]),
                None => Err(RuntimeError::new(format!("the program has no {name}"))),
            }
        }
    }
}

fn classify(
    result: Result<Box<[Value]>, RuntimeError>,
    store: &mut Store,
    instance: &Instance,
    memory_limit: Option<u64>,
) -> Exit {
    let err = match result {
        // A reactor's entry point returns its status.
        Ok(values) => {
            return Exit::Code(match values.first() {
                Some(Value::I32(c)) => *c,
                _ => 0,
            });
        }
        Err(e) => e,
    };
    if let Some(WasiError::Exit(code)) = err.downcast_ref::<WasiError>() {
        return Exit::Code(code.raw());
    }
    let message = if err.is_exception() {
        "uncaught wasm exception".to_string()
    } else {
        err.message()
    };
    // Allocation failures end in a trap (an abort) with memory grown to its cap.
    if let (Some(limit), Ok(memory)) = (memory_limit, instance.exports.get_memory("memory")) {
        let size = memory.view(&*store).data_size();
        if size + crate::WASM_PAGE * 16 > limit {
            return Exit::OutOfMemory(format!(
                "memory limit of {} MiB reached ({message})",
                limit >> 20
            ));
        }
    }
    Exit::Trap(message)
}

/// How a wrapped WASI call is adjusted.
#[derive(Clone, Copy)]
enum Fix {
    /// Put the precise errno of a filesystem failure back into the result.
    Errno,
    /// As `Errno`, and a path argument (dirfd, pointer, length at these argument indexes)
    /// that climbs above `/` from the root preopen is clamped at `/` first.
    PathAt(usize, usize, usize),
    /// Report the standard streams as what they are (pipes or buffers), never as a terminal.
    Fdstat,
    /// Make zero-timeout clocks return at once (see `wasi/poll.rs`).
    ZeroClock,
    /// As `PathAt`, and the entry is brought into wasix's cache first (`wasi/paths.rs`).
    RemoveDirectory,
    /// As `Errno`, and a symlink source wasix could not resolve is renamed (`wasi/paths.rs`).
    Rename,
}

/// WASI calls that can fail on the filesystem or need adjusting, and how.
const WRAPPED: &[(&str, Fix)] = &[
    ("fd_read", Fix::Errno),
    ("fd_pread", Fix::Errno),
    ("fd_write", Fix::Errno),
    ("fd_pwrite", Fix::Errno),
    ("fd_seek", Fix::Errno),
    ("fd_tell", Fix::Errno),
    ("fd_close", Fix::Errno),
    ("fd_sync", Fix::Errno),
    ("fd_datasync", Fix::Errno),
    ("fd_allocate", Fix::Errno),
    ("fd_filestat_get", Fix::Errno),
    ("fd_filestat_set_size", Fix::Errno),
    ("fd_filestat_set_times", Fix::Errno),
    ("fd_readdir", Fix::Errno),
    ("fd_fdstat_get", Fix::Fdstat),
    ("poll_oneoff", Fix::ZeroClock),
    ("fd_renumber", Fix::Errno),
    ("path_open", Fix::PathAt(0, 2, 3)),
    ("path_filestat_get", Fix::PathAt(0, 2, 3)),
    ("path_filestat_set_times", Fix::PathAt(0, 2, 3)),
    ("path_create_directory", Fix::PathAt(0, 1, 2)),
    ("path_remove_directory", Fix::RemoveDirectory),
    ("path_unlink_file", Fix::PathAt(0, 1, 2)),
    ("path_readlink", Fix::PathAt(0, 1, 2)),
    ("path_rename", Fix::Rename),
    ("path_symlink", Fix::Errno),
];

/// Errnos that stand for "something the mapping to `FsError` lost"; a precise errno from wasix
/// (ENOENT, EEXIST, ...) is never replaced.
const LOSSY: &[WasiErrno] = &[
    WasiErrno::Io,
    WasiErrno::Perm,
    WasiErrno::Inval,
    WasiErrno::Access,
    WasiErrno::Notsup,
    WasiErrno::Nospc,
    WasiErrno::Overflow,
    WasiErrno::Notcapable,
];

impl Fix {
    /// The (dirfd, pointer, length) argument indexes of a path clamped at `/`.
    fn path_at(self) -> Option<(usize, usize, usize)> {
        match self {
            Fix::PathAt(fd, ptr, len) => Some((fd, ptr, len)),
            Fix::RemoveDirectory => Some((0, 1, 2)),
            _ => None,
        }
    }
}

struct FixEnv {
    original: Function,
    siblings: Arc<Siblings>,
    slot: Arc<ErrnoSlot>,
    memory: LateMemory,
    fix: Fix,
    guard: Arc<RunGuard>,
    /// What this call does to the descriptor table, counted in the run's account (`Bound::fds`).
    fd_op: Option<FdOp>,
    run: Late,
}

/// The calls that change a guest's descriptor table (see `wasi/fds.rs`).
#[derive(Clone, Copy)]
enum FdOp {
    Open,
    Close,
    Renumber,
}

impl FdOp {
    fn of(name: &str) -> Option<FdOp> {
        match name {
            "path_open" => Some(FdOp::Open),
            "fd_close" => Some(FdOp::Close),
            "fd_renumber" => Some(FdOp::Renumber),
            _ => None,
        }
    }
}

/// What `module` imports from WASI's namespaces, `(namespace, name)`.
pub(crate) fn wasi_imports(module: &wasmer::Module) -> Arc<[(String, String)]> {
    module
        .imports()
        .filter(|i| WASI_NAMESPACES.contains(&i.module()))
        .map(|i| (i.module().to_string(), i.name().to_string()))
        .collect()
}

const WASI_NAMESPACES: [&str; 2] = ["wasi_snapshot_preview1", "wasi_unstable"];

pub(crate) fn wrap_imports(
    store: &mut impl AsStoreMut,
    wanted: &[(String, String)],
    imports: &mut Imports,
    slot: &Arc<ErrnoSlot>,
    memory: &LateMemory,
    guard: &Arc<RunGuard>,
    run: &Late,
) {
    let siblings = Arc::new(Siblings::from_imports(imports));
    // Only what the module imports: a wrapper is a function and an environment in the run's
    // store, and most guests import a few of the calls wrapped here.
    let targets: Vec<(String, String, Function, Fix)> = imports
        .iter()
        .filter(|(ns, name, _)| wanted.iter().any(|(m, n)| m == ns && n == name))
        .filter_map(|(ns, name, ext)| {
            let fix = WRAPPED.iter().find(|(n, _)| *n == name)?.1;
            match ext {
                Extern::Function(f) => Some((ns.to_string(), name.to_string(), f.clone(), fix)),
                _ => None,
            }
        })
        .collect();
    for (ns, name, original, fix) in targets {
        let ty = original.ty(&*store);
        let env = FunctionEnv::new(
            store,
            FixEnv {
                original,
                siblings: siblings.clone(),
                slot: slot.clone(),
                memory: memory.clone(),
                fix,
                guard: guard.clone(),
                fd_op: FdOp::of(&name),
                run: run.clone(),
            },
        );
        let wrapped = Function::new_with_env(store, &env, ty, call_fixed);
        imports.define(&ns, &name, wrapped);
    }
}

fn call_fixed(mut env: FunctionEnvMut<FixEnv>, args: &[Value]) -> Result<Vec<Value>, RuntimeError> {
    let (data, mut store) = env.data_and_store_mut();
    let original = data.original.clone();
    let slot = data.slot.clone();
    let fix = data.fix;
    let guard = data.guard.clone();
    let memory = data.memory.get().cloned();
    let siblings = data.siblings.clone();
    let fds = data
        .fd_op
        .and_then(|op| Some((data.run.get()?.fds.clone()?, op)));
    slot.clear();
    if let Some((tracker, FdOp::Open)) = &fds
        && tracker.before_open().is_err()
    {
        // As the kernel past RLIMIT_NOFILE: the open fails and the program goes on.
        return Ok(vec![Value::I32(WasiErrno::Mfile as i32)]);
    }

    let mut out = match (fix.path_at(), &memory) {
        (Some((fd, ptr, len)), Some(memory)) => {
            let clamp = clamped_path(&store, memory, args, fd, ptr, len);
            let mut args = args.to_vec();
            if let Some((_, _, new_len)) = clamp {
                args[len] = Value::I32(new_len as i32);
            }
            let mut answer = Ok(None);
            if let Fix::RemoveDirectory = fix {
                let mut call = Call {
                    store: &mut store,
                    memory,
                    guard: &guard,
                    siblings: &siblings,
                };
                answer = paths::before_remove_directory(&mut call, &args);
            }
            let result = answer.and_then(|answer| match answer {
                Some(code) => Ok(Box::from([Value::I32(code)])),
                None => guard.nested(|| original.call(&mut store, &args)),
            });
            if let Some((at, original_bytes, _)) = clamp {
                // The guest's string is put back as it was.
                let _ = memory.view(&store).write(at, &original_bytes);
            }
            result?.into_vec()
        }
        (None, Some(memory)) if matches!(fix, Fix::Rename) => {
            let mut out = guard.nested(|| original.call(&mut store, args))?.into_vec();
            if let Some(Value::I32(code)) = out.first_mut()
                && *code == WasiErrno::Noent as i32
            {
                let mut call = Call {
                    store: &mut store,
                    memory,
                    guard: &guard,
                    siblings: &siblings,
                };
                if let Some(real) = paths::rename_symlink(&mut call, args)? {
                    *code = real;
                }
            }
            out
        }
        (None, Some(memory)) if matches!(fix, Fix::ZeroClock) => {
            match (args.first(), args.get(2)) {
                (Some(Value::I32(subs)), Some(Value::I32(n))) => {
                    let changed = crate::wasi::poll::rewrite_zero_clocks(
                        &memory.view(&store),
                        *subs as u32,
                        *n as u32,
                    );
                    let result = guard.nested(|| original.call(&mut store, args));
                    crate::wasi::poll::restore(memory, &store, &changed);
                    result?.into_vec()
                }
                _ => guard.nested(|| original.call(&mut store, args))?.into_vec(),
            }
        }
        _ => guard.nested(|| original.call(&mut store, args))?.into_vec(),
    };

    if let (Some((tracker, op)), Some(Value::I32(code))) = (&fds, out.first()) {
        account_fds(tracker, *op, *code, args, &store, memory.as_ref());
    }
    if let Some(Value::I32(code)) = out.first_mut() {
        if let (Fix::Fdstat, Some(memory), 0, Some(Value::I32(fd)), Some(Value::I32(buf))) =
            (fix, &memory, *code, args.first(), args.get(1))
            && (0..=2).contains(fd)
        {
            // wasix reports descriptors 0-2 as character devices, which wasi-libc's isatty
            // takes for a terminal; a sandbox never has one.
            let _ = memory
                .view(&store)
                .write_u8(u64::from(*buf as u32), WasiFiletype::Unknown as u8);
        }
        if *code != 0
            && LOSSY.iter().any(|e| *e as i32 == *code)
            && let Some(real) = slot.take()
        {
            *code = i32::from(real);
        }
    }
    Ok(out)
}

/// Brings the program's descriptor account up to date after a call that changes its table.
fn account_fds(
    tracker: &FdTracker,
    op: FdOp,
    code: i32,
    args: &[Value],
    store: &impl wasmer::AsStoreRef,
    memory: Option<&Memory>,
) {
    let arg = |i: usize| match args.get(i) {
        Some(Value::I32(v)) => Some(*v as u32),
        _ => None,
    };
    match op {
        FdOp::Open if code == 0 => {
            // path_open's last argument points at the descriptor it made.
            let fd = arg(8).zip(memory).and_then(|(at, m)| {
                let mut b = [0u8; 4];
                m.view(store).read(u64::from(at), &mut b).ok()?;
                Some(u32::from_le_bytes(b))
            });
            match fd {
                Some(fd) => tracker.opened(fd),
                None => tracker.open_failed(),
            }
        }
        FdOp::Open => tracker.open_failed(),
        FdOp::Close if code == 0 => {
            if let Some(fd) = arg(0) {
                tracker.closed(fd);
            }
        }
        FdOp::Renumber if code == 0 => {
            if let (Some(from), Some(to)) = (arg(0), arg(1)) {
                tracker.renumbered(from, to);
            }
        }
        FdOp::Close | FdOp::Renumber => {}
    }
}

/// For a path relative to the root preopen that climbs above `/` (`..` at the top), writes
/// its form clamped at `/` over the guest's string and returns where, the original bytes
/// and the new length. wasix would otherwise resolve such a path to its own virtual root
/// above the preopen. The clamp is lexical; it can differ from the kernel only for a path
/// that climbs above `/` after passing through a symlink.
fn clamped_path(
    store: &impl wasmer::AsStoreRef,
    memory: &Memory,
    args: &[Value],
    fd: usize,
    ptr: usize,
    len: usize,
) -> Option<(u64, Vec<u8>, usize)> {
    let (Some(Value::I32(dirfd)), Some(Value::I32(p)), Some(Value::I32(n))) =
        (args.get(fd), args.get(ptr), args.get(len))
    else {
        return None;
    };
    if !ROOT_FDS.contains(dirfd) || *n <= 0 || *n > 4096 {
        return None;
    }
    let at = u64::from(*p as u32);
    let mut bytes = vec![0u8; *n as usize];
    memory.view(store).read(at, &mut bytes).ok()?;
    let clamped = clamp_above_root(&bytes)?;
    memory.view(store).write(at, &clamped).ok()?;
    Some((at, bytes, clamped.len()))
}

/// `Some(shorter path)` when `path` climbs above its starting directory; `None` otherwise.
fn clamp_above_root(path: &[u8]) -> Option<Vec<u8>> {
    let mut depth = 0usize;
    let mut climbed = false;
    let mut kept: Vec<&[u8]> = Vec::new();
    for comp in path.split(|b| *b == b'/') {
        match comp {
            b"" | b"." => {}
            b".." if depth == 0 => climbed = true,
            b".." => {
                depth -= 1;
                kept.push(comp);
            }
            _ => {
                depth += 1;
                kept.push(comp);
            }
        }
    }
    if !climbed {
        return None;
    }
    let mut out = kept.join(&b'/');
    if out.is_empty() {
        out.push(b'.');
    }
    Some(out)
}

/// Stops runs at their deadline or when their token is cancelled: wakes blocked pipe waits
/// (through the token), interrupts blocking WASI calls (SIGKILL to the wasix process) and
/// CPU-bound wasm (the store interrupter, repeated until the run returns, since it is a no-op
/// while the guest sits in a host call).
///
/// One thread serves every run in the process. A thread per run cost ~50 us of a ~0.5 ms run
/// (spawn, and the join at the end) for a deadline that almost never fires.
struct Watchdog {
    state: Mutex<WatchState>,
    wake: Condvar,
}

#[derive(Default)]
struct WatchState {
    runs: Vec<Watched>,
    next_id: u64,
    /// When the thread will look again on its own: `None` while it waits for a notification
    /// only; the time of its current scan while it is awake.
    wake_at: Option<Instant>,
}

struct Watched {
    id: u64,
    deadline: Option<Instant>,
    cancel: CancelToken,
    interrupter: wasmer::Interrupter,
    process: WasiProcess,
    guard: Arc<RunGuard>,
    fired: Option<Exit>,
    /// Once fired: when to interrupt next, and the pause after that.
    retry: Option<(Instant, Duration)>,
}

/// A run's place in the watchdog; [`WatchHandle::finish`] takes it out.
struct WatchHandle {
    id: u64,
    cancel: CancelToken,
    /// Registered (weakly) with the token, so the token's list forgets it with the run.
    _waker: Arc<dyn Wakeable>,
}

/// Wakes the watchdog thread when a run's token is cancelled.
struct WatchWaker;

impl Wakeable for WatchWaker {
    fn wake_all(&self) {
        let wd = watchdog();
        let _g = wd.state.lock();
        wd.wake.notify_one();
    }
}

fn watchdog() -> &'static Watchdog {
    static WATCHDOG: OnceLock<&'static Watchdog> = OnceLock::new();
    WATCHDOG.get_or_init(|| {
        let wd: &'static Watchdog = Box::leak(Box::new(Watchdog {
            state: Mutex::new(WatchState::default()),
            wake: Condvar::new(),
        }));
        thread::Builder::new()
            .name("wasmsand-watchdog".into())
            .spawn(move || watch(wd))
            .expect("the watchdog thread can be started");
        wd
    })
}

impl Watchdog {
    fn start(
        deadline: Option<Instant>,
        cancel: CancelToken,
        interrupter: wasmer::Interrupter,
        process: WasiProcess,
        guard: Arc<RunGuard>,
    ) -> WatchHandle {
        let wd = watchdog();
        let waker: Arc<dyn Wakeable> = Arc::new(WatchWaker);
        let id = {
            let mut st = wd.state.lock();
            let id = st.next_id;
            st.next_id += 1;
            st.runs.push(Watched {
                id,
                deadline,
                cancel: cancel.clone(),
                interrupter,
                process,
                guard,
                fired: None,
                retry: None,
            });
            // Only a deadline earlier than the thread's next look needs it awake now; a
            // cancellation notifies through the waker.
            if deadline.is_some_and(|d| st.wake_at.is_none_or(|w| d < w)) {
                wd.wake.notify_one();
            }
            id
        };
        // After the run is listed: a cancel from here on wakes the thread, one before it is
        // seen by the thread's first scan.
        cancel.register(Arc::downgrade(&waker));
        WatchHandle {
            id,
            cancel,
            _waker: waker,
        }
    }
}

impl WatchHandle {
    /// Ends the watch; returns why the run was stopped, if it was. No interrupt reaches the
    /// run's store after this returns.
    fn finish(self) -> Option<Exit> {
        let fired = {
            let mut st = watchdog().state.lock();
            let at = st.runs.iter().position(|r| r.id == self.id)?;
            st.runs.swap_remove(at).fired
        };
        if fired.is_some() {
            // The thread cancels outside its lock and may not have got there yet; whoever
            // shares the token must see it cancelled once this run is reported stopped.
            self.cancel.cancel();
        }
        fired
    }
}

fn watch(wd: &Watchdog) {
    let mut st = wd.state.lock();
    loop {
        let now = Instant::now();
        st.wake_at = Some(now);
        let mut stops: Vec<(CancelToken, WasiProcess)> = Vec::new();
        let mut next: Option<Instant> = None;
        for run in st.runs.iter_mut() {
            if run.fired.is_none() {
                let timed_out = run.deadline.is_some_and(|d| now >= d);
                if timed_out || run.cancel.is_cancelled() {
                    run.fired = Some(if timed_out {
                        Exit::TimedOut
                    } else {
                        Exit::Cancelled
                    });
                    run.guard.begin_stop();
                    stops.push((run.cancel.clone(), run.process.clone()));
                    // First interrupt on the next scan, after the token and the process.
                    run.retry = Some((now, Duration::from_micros(200)));
                    continue;
                }
                if let Some(d) = run.deadline {
                    next = Some(next.map_or(d, |n| n.min(d)));
                }
            }
            if let Some((at, pause)) = run.retry {
                let at = if at <= now {
                    // Under the lock: `finish` takes the run out under it, so an interrupt
                    // never reaches a store whose run has been reported.
                    if run.guard.may_interrupt() {
                        run.interrupter.interrupt();
                    }
                    let at = now + pause;
                    run.retry = Some((at, (pause * 2).min(Duration::from_millis(20))));
                    at
                } else {
                    at
                };
                next = Some(next.map_or(at, |n| n.min(at)));
            }
        }
        if !stops.is_empty() {
            // Cancelling wakes the token's waiters, this watchdog among them: not under its lock.
            drop(st);
            for (cancel, process) in stops {
                // Everything sharing the token (other pipeline stages, pipes, the tool-call
                // channel) stops too.
                cancel.cancel();
                process.signal_process(Signal::Sigkill);
            }
            st = wd.state.lock();
            continue;
        }
        st.wake_at = next;
        match next {
            Some(at) => {
                wd.wake.wait_until(&mut st, at);
            }
            None => wd.wake.wait(&mut st),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::clamp_above_root;

    #[test]
    fn paths_climbing_above_the_root_are_clamped() {
        let c = |p: &str| clamp_above_root(p.as_bytes()).map(|v| String::from_utf8(v).unwrap());
        assert_eq!(c(".."), Some(".".into()));
        assert_eq!(c("../../etc/passwd"), Some("etc/passwd".into()));
        assert_eq!(c("home/../../tmp"), Some("home/../tmp".into()));
        assert_eq!(c("home/user/../.."), None);
        assert_eq!(c("tmp/x"), None);
        assert_eq!(c("./a/./b/.."), None);
    }
}
