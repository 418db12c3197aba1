//! One run: an instance (`prepared.rs`) bound to the run, its entry point called under a
//! watchdog, and how it ended classified.

use std::sync::atomic::Ordering;
use std::sync::{Arc, OnceLock};
use std::thread;
use std::time::{Duration, Instant};

use parking_lot::{Condvar, Mutex};
use wasmer::{Engine, Instance, Memory, RuntimeError, Store, Value};
use wasmer_wasix::types::wasi::Signal;
use wasmer_wasix::{WasiError, WasiProcess};

use crate::bind::{Bound, Stdio, Strings};
use crate::guard::{ROOT_FDS, RunGuard};
use crate::kept;
use crate::prepared::{self, Key};
use crate::wasi::fds::FdTracker;
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
    let args = Strings::new(spec.args.iter().map(|a| crate::raw::encode(a))).map_err(setup)?;
    let environment = Strings::environment(&env).map_err(setup)?;
    let for_run = (!program.binds_late).then_some(prepared::ForRun {
        vfs: &spec.vfs,
        args: &spec.args,
        env: &env,
        cwd: &spec.cwd,
    });
    // A program whose instances are put back in place after a run takes the one its last run
    // on this thread left, if any.
    let kept_as = (program.resets_in_place && !capture)
        .then(|| image.as_ref().map(|i| kept::Slot::new(program, i, &key)))
        .flatten();
    let kept = kept_as.as_ref().and_then(kept::take);
    let kept_instance = kept.is_some();
    let made = match kept {
        Some(p) => p,
        None => match prepared::make(process, engine, program, image, &key, for_run)? {
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
                    kept_instance: false,
                };
                return Ok((outcome, None));
            }
        },
    };
    let mut made = made;

    // The guest starts with its standard streams and wasix's two roots.
    let fds = spec.open_files.map(|caps| {
        let initial = (0..3).chain(ROOT_FDS.iter().map(|fd| *fd as u32));
        Arc::new(FdTracker::new(caps, initial))
    });
    let stdin = Arc::new(Mutex::new(StdinFile::new(spec.stdin, &made.errno)));
    made.run.bind(Bound {
        vfs: spec.vfs,
        cwd: spec.cwd,
        stdio: Stdio {
            stdin,
            stdout: spec.stdout,
            stderr: spec.stderr,
            errno: made.errno.clone(),
            broken_pipe: made.broken_pipe.clone(),
        },
        fds: fds.clone(),
        det,
        args,
        env: environment,
    });
    if let Some(env) = &made.tool_call {
        crate::tool_call::bind(&mut made.store, env, spec.tool_channel, spec.cancel.clone());
    }

    let wasi_process = made.func_env.data(&made.store).process.clone();
    let watchdog = Watchdog::start(
        spec.deadline,
        spec.cancel.clone(),
        made.store.interrupter(),
        wasi_process,
        made.guard.clone(),
    );
    crate::memory::take_growth_refused();
    let cpu_before = thread_cpu_time();
    let result = match (spec.entry.as_deref(), &spec.entry_input) {
        (Some(entry), Some((alloc, input))) => {
            call_with_input(&mut made.store, &made.instance, alloc, entry, input)
        }
        (entry, _) => call_entry(&mut made.store, &made.instance, entry),
    };
    let captured = match (capture, &result, made.memory.get()) {
        (true, Ok(values), Some(memory)) if matches!(values.first(), Some(Value::I32(0))) => {
            capture_memory(&made.store, memory)
        }
        _ => None,
    };
    let cpu_time = thread_cpu_time().saturating_sub(cpu_before);
    let memory_capped = crate::memory::take_growth_refused();
    let fired = watchdog.finish();
    let peak_memory = made
        .memory
        .get()
        .map_or(0, |m| m.view(&made.store).data_size());

    // Only an instance whose guest ended on its own, by returning or exiting, is kept: one
    // stopped by the watchdog, a trap or a memory cap may have left wasix or the engine
    // mid-way through something.
    let keep = fired.is_none() && (result.is_ok() || exited(&result));
    let exit = match fired {
        Some(exit) => exit,
        // On Linux the first write to a pipe without a reader kills the writer with SIGPIPE,
        // which a shell reports as 141 (and `set -o pipefail` sees); the guest got EPIPE and
        // may have exited on its own terms, so the status is made what it would have been.
        None if made.broken_pipe.happened() => Exit::Code(141),
        None => classify(result, &mut made.store, &made.instance, spec.memory_limit),
    };
    let keep = keep && matches!(exit, Exit::Code(_)) && !memory_capped;
    let code = exit.status();
    made.func_env
        .on_exit(&mut made.store, Some((code as u16).into()));
    let memory_capped = memory_capped || matches!(exit, Exit::OutOfMemory(_));
    let (open_files_capped, pool_open_files_capped) =
        fds.as_ref().map_or((false, false), |t| t.capped());
    let outcome = Outcome {
        exit,
        elapsed: started.elapsed(),
        tool_calls: made.calls.load(Ordering::SeqCst),
        cpu_time,
        peak_memory,
        memory_capped,
        open_files_capped,
        pool_open_files_capped,
        kept_instance,
    };
    if let Some(slot) = kept_as.filter(|_| keep) {
        made.release();
        kept::keep(slot, made);
    }
    // A capture stopped by the watchdog is not a state to start from.
    let captured = captured.filter(|_| succeeded(&outcome));
    Ok((outcome, captured))
}

/// Whether the guest ended by calling `proc_exit` (a trap that carries its status).
fn exited(result: &Result<Box<[Value]>, RuntimeError>) -> bool {
    result
        .as_ref()
        .err()
        .and_then(|e| e.downcast_ref::<WasiError>())
        .is_some_and(|e| matches!(e, WasiError::Exit(_)))
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
