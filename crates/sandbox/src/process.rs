//! Background processes: command lines that run on their own threads next to the sandbox's
//! later runs, on the same filesystem, each with a pid, its own deadline and cancel token, a
//! stdin pipe the caller writes to, and output kept in ring buffers addressed by offsets.
//!
//! A process takes a copy of the shell state when it starts (variables, functions, cwd) and
//! never writes it back: like `bash -c '...' &`, it changes files, not the session. It holds
//! the sandbox's `Vfs` (shared), never the sandbox's lock, so foreground runs and file calls
//! go on while it runs and it goes on while they run.

use std::collections::{BTreeMap, VecDeque};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use bytes::Bytes;
use parking_lot::{Condvar, Mutex};
use wasmsand_exec::{
    CancelToken, ChunkCallback, FdPool, Input, OpenFiles, Output, PIPE_CAPACITY, PipeWriter, pipe,
};
use wasmsand_model::{CappedBuffer, ErrorClass, Limits, RunResult, Usage};
use wasmsand_shell::{Abort, Pids, ShellState};

/// Ended processes kept (with their result and output rings) for `wait`, `output` and
/// `list`; older ended ones are forgotten first.
pub const KEPT_ENDED_PROCESSES: usize = 32;

/// Exit status of a killed process, as for SIGKILL.
pub const KILLED_STATUS: i32 = 128 + 9;

/// Called once with the result when a process ends, after its last output chunk.
pub type ExitCallback = Arc<dyn Fn(&RunResult) + Send + Sync>;

/// How to start a background process ([`crate::Sandbox::spawn`]).
#[derive(Default, Clone)]
pub struct SpawnOptions {
    /// Variables exported to the process on top of the sandbox's.
    pub env: Vec<(String, String)>,
    /// Its working directory (relative to the sandbox's cwd); default the sandbox's cwd.
    pub cwd: Option<String>,
    /// Its own wall-clock budget; default the sandbox's `timeout_ms`. A server-like process
    /// gives a longer one; it still ends with the sandbox (`destroy`, drop) or `kill`.
    pub timeout_ms: Option<u64>,
    /// Bytes written to its stdin at start.
    pub stdin: Option<Bytes>,
    /// Close stdin right after `stdin` (the process then reads end of file); by default it
    /// stays open for [`Process::write_stdin`] until [`Process::close_stdin`].
    pub close_stdin: bool,
    /// Receives stdout chunks as they are written (all of them, whatever the ring keeps).
    pub on_stdout: Option<ChunkCallback>,
    /// Receives stderr chunks as they are written.
    pub on_stderr: Option<ChunkCallback>,
    /// Called once when the process ends, after its last output chunk.
    pub on_exit: Option<ExitCallback>,
}

/// What [`crate::Sandbox::processes`] reports for one process.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProcessInfo {
    /// Its id in the sandbox: 1, 2, ... in start order, never reused.
    pub pid: u32,
    /// The command line it runs.
    pub command: String,
    /// Whether it has not ended yet.
    pub running: bool,
    /// Its exit status once ended ([`KILLED_STATUS`] when killed).
    pub exit_code: Option<i32>,
    /// Wall-clock start, milliseconds since the Unix epoch.
    pub started_at_ms: u64,
}

/// Output of one stream read from its ring at an offset ([`Process::output`]).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct StreamOutput {
    /// The bytes still held at or after the offset asked for.
    pub data: Vec<u8>,
    /// The offset to ask next: every byte the stream ever produced.
    pub next_offset: u64,
    /// Bytes between the offset asked for and the oldest byte the ring still holds.
    pub dropped: u64,
}

/// A process the shell started for `nohup cmd &` / `cmd & disown`, as its job table sees it.
pub(crate) struct DetachedProcess(pub Process);

impl wasmsand_shell::DetachedJob for DetachedProcess {
    fn pid(&self) -> u32 {
        self.0.pid()
    }

    fn is_running(&self) -> bool {
        self.0.is_running()
    }

    fn wait(&self, timeout: Duration) -> Option<i32> {
        self.0.wait(Some(timeout)).ok().map(|r| r.exit_code)
    }

    fn kill(&self) {
        self.0.kill();
    }
}

/// Why a process call failed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ProcessError {
    /// No process with this pid, or one that ended so long ago it was forgotten (see
    /// [`KEPT_ENDED_PROCESSES`]).
    #[error("no such process: {0}")]
    NoSuchProcess(u32),
    /// `background_processes` processes are already running; nothing was started.
    #[error("too many background processes (limit: {0} alive at once)")]
    LimitExceeded(u64),
    /// Every slot of the sandbox's `pids` limit is held (by runs' subshells and jobs and by
    /// other processes); nothing was started.
    #[error(
        "fork: Resource temporarily unavailable (pids limit: {0} processes at once in this sandbox)"
    )]
    PidsExhausted(u64),
    /// [`Process::wait`] gave up; the process goes on.
    #[error("process {0} did not end within the wait timeout")]
    WaitTimeout(u32),
    /// [`Process::close_stdin`] was called; the process still runs.
    #[error("the stdin of process {0} is closed")]
    StdinClosed(u32),
    /// The process has ended, so its stdin takes nothing more.
    #[error("process {0} is not running")]
    NotRunning(u32),
}

impl ProcessError {
    /// The wire spelling (`data.kind` over JSON-RPC).
    pub fn kind(&self) -> &'static str {
        match self {
            ProcessError::NoSuchProcess(_) => "no_such_process",
            ProcessError::LimitExceeded(_) | ProcessError::PidsExhausted(_) => "limit_exceeded",
            ProcessError::WaitTimeout(_) => "wait_timeout",
            ProcessError::StdinClosed(_) => "stdin_closed",
            ProcessError::NotRunning(_) => "not_running",
        }
    }
}

/// The most recent `cap` bytes of a stream, and how many it ever produced.
struct Ring {
    buf: VecDeque<u8>,
    cap: usize,
    total: u64,
}

impl Ring {
    fn new(cap: u64) -> Ring {
        Ring {
            buf: VecDeque::new(),
            cap: usize::try_from(cap).unwrap_or(usize::MAX),
            total: 0,
        }
    }

    fn push(&mut self, data: &[u8]) {
        self.total += data.len() as u64;
        let data = &data[data.len().saturating_sub(self.cap)..];
        let over = (self.buf.len() + data.len()).saturating_sub(self.cap);
        self.buf.drain(..over);
        self.buf.extend(data);
    }

    fn first_offset(&self) -> u64 {
        self.total - self.buf.len() as u64
    }

    fn read(&self, from: u64) -> StreamOutput {
        let first = self.first_offset();
        let from = from.min(self.total);
        let (start, dropped) = if from < first {
            (first, first - from)
        } else {
            (from, 0)
        };
        StreamOutput {
            data: self
                .buf
                .range((start - first) as usize..)
                .copied()
                .collect(),
            next_offset: self.total,
            dropped,
        }
    }

    /// What the result of the process shows: the ring's bytes, truncated when some were lost.
    fn to_capped(&self) -> CappedBuffer {
        let mut b = CappedBuffer::new(self.cap as u64);
        let (a, c) = self.buf.as_slices();
        b.write(a);
        b.write(c);
        if self.first_offset() > 0 {
            // Marks the loss: past the cap, so it is counted as dropped, never kept.
            b.write(&vec![0; (self.cap - b.len()) + 1][..]);
        }
        b
    }
}

pub(crate) struct Proc {
    pid: u32,
    command: String,
    started_at_ms: u64,
    cancel: CancelToken,
    killed: AtomicBool,
    stdin: Mutex<Option<PipeWriter>>,
    rings: Mutex<[Ring; 2]>,
    result: Mutex<Option<RunResult>>,
    ended: Condvar,
}

/// A handle on one background process; clones address the same process.
#[derive(Clone)]
pub struct Process(Arc<Proc>);

impl std::fmt::Debug for Process {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Process")
            .field("pid", &self.0.pid)
            .field("command", &self.0.command)
            .finish()
    }
}

impl Process {
    /// Its id in the sandbox (see [`ProcessInfo::pid`]).
    pub fn pid(&self) -> u32 {
        self.0.pid
    }

    /// The command line it runs.
    pub fn command(&self) -> &str {
        &self.0.command
    }

    /// Whether it has not ended yet.
    pub fn is_running(&self) -> bool {
        self.0.result.lock().is_none()
    }

    /// A snapshot of its state, as [`crate::Sandbox::processes`] lists it.
    pub fn info(&self) -> ProcessInfo {
        let result = self.0.result.lock();
        ProcessInfo {
            pid: self.0.pid,
            command: self.0.command.clone(),
            running: result.is_none(),
            exit_code: result.as_ref().map(|r| r.exit_code),
            started_at_ms: self.0.started_at_ms,
        }
    }

    /// Its result once it ended: waits at most `timeout` (`None`: until it ends), then
    /// [`ProcessError::WaitTimeout`] while it goes on.
    pub fn wait(&self, timeout: Option<Duration>) -> Result<RunResult, ProcessError> {
        let mut result = self.0.result.lock();
        let deadline = timeout.map(|t| Instant::now() + t);
        loop {
            if let Some(r) = result.as_ref() {
                return Ok(r.clone());
            }
            match deadline {
                None => self.0.ended.wait(&mut result),
                Some(d) => {
                    if self.0.ended.wait_until(&mut result, d).timed_out() && result.is_none() {
                        return Err(ProcessError::WaitTimeout(self.0.pid));
                    }
                }
            }
        }
    }

    /// Stops it (exit 137, `CANCELLED`); `false` when it had already ended.
    pub fn kill(&self) -> bool {
        if !self.is_running() {
            return false;
        }
        self.0.killed.store(true, Ordering::SeqCst);
        self.0.cancel.cancel();
        true
    }

    /// Writes to its stdin, blocking while the pipe is full and the process does not read.
    pub fn write_stdin(&self, data: &[u8]) -> Result<usize, ProcessError> {
        // A clone, so a blocked write does not hold the lock `close_stdin` needs.
        let writer = self.0.stdin.lock().clone();
        let Some(writer) = writer else {
            return Err(if self.is_running() {
                ProcessError::StdinClosed(self.0.pid)
            } else {
                ProcessError::NotRunning(self.0.pid)
            });
        };
        if !self.is_running() {
            return Err(ProcessError::NotRunning(self.0.pid));
        }
        writer
            .write_all(data)
            .map_err(|_| ProcessError::NotRunning(self.0.pid))?;
        Ok(data.len())
    }

    /// Closes its stdin: it reads end of file once the pipe is drained. A no-op once the
    /// process has ended (it may end right after reading what was just written, and a
    /// write-then-close must not fail for that); closing twice a running process's stdin is
    /// [`ProcessError::StdinClosed`].
    pub fn close_stdin(&self) -> Result<(), ProcessError> {
        match self.0.stdin.lock().take() {
            Some(_) => Ok(()),
            None if self.is_running() => Err(ProcessError::StdinClosed(self.0.pid)),
            None => Ok(()),
        }
    }

    /// What its rings hold at or after these offsets of stdout and stderr.
    pub fn output(&self, stdout_offset: u64, stderr_offset: u64) -> [StreamOutput; 2] {
        let rings = self.0.rings.lock();
        [rings[0].read(stdout_offset), rings[1].read(stderr_offset)]
    }
}

/// The processes of one sandbox.
#[derive(Default)]
pub(crate) struct ProcTable {
    next_pid: u32,
    procs: BTreeMap<u32, Process>,
    /// Set by `destroy`: no process starts after it.
    closed: bool,
}

impl ProcTable {
    pub fn get(&self, pid: u32) -> Result<Process, ProcessError> {
        self.procs
            .get(&pid)
            .cloned()
            .ok_or(ProcessError::NoSuchProcess(pid))
    }

    pub fn list(&self) -> Vec<ProcessInfo> {
        self.procs.values().map(Process::info).collect()
    }

    /// Kills every process and refuses new ones (the sandbox is going away).
    pub fn close(&mut self) {
        self.closed = true;
        for p in self.procs.values() {
            p.kill();
        }
    }

    fn forget_old(&mut self) {
        let ended: Vec<u32> = self
            .procs
            .values()
            .filter(|p| !p.is_running())
            .map(Process::pid)
            .collect();
        for pid in ended
            .iter()
            .take(ended.len().saturating_sub(KEPT_ENDED_PROCESSES))
        {
            self.procs.remove(pid);
        }
    }
}

/// What the runs and processes of one sandbox share and its limits bound together: its
/// process slots (`pids`) and its pool of descriptors (`session_open_files`). A fork gets
/// its own.
#[derive(Clone)]
pub(crate) struct Shared {
    pub pids: Arc<Pids>,
    pub open_files: OpenFiles,
}

impl Shared {
    pub fn new(limits: &Limits) -> Shared {
        Shared {
            pids: Arc::new(Pids::new(limits.pids)),
            open_files: OpenFiles {
                per_program: limits.open_files,
                pool: FdPool::new(limits.session_open_files),
            },
        }
    }

    /// The names of the limits of these a run's programs ran into, for its receipt.
    pub fn hits(stats: &wasmsand_shell::RunStats) -> impl Iterator<Item = &'static str> {
        [
            (stats.open_files_capped, "openFiles"),
            (stats.session_open_files_capped, "sessionOpenFiles"),
            (stats.pids_exhausted, "pids"),
        ]
        .into_iter()
        .filter_map(|(hit, name)| hit.then_some(name))
    }
}

/// Everything a process needs from its sandbox, taken when it starts.
pub(crate) struct Launch {
    pub command: String,
    pub shell: ShellState,
    pub cfg_exec: &'static wasmsand_exec::Exec,
    pub vfs: wasmsand_exec::SharedVfs,
    pub memory_limit: u64,
    pub tool_channel: Option<wasmsand_exec::ToolChannel>,
    pub timeout_ms: u64,
    pub ring_bytes: [u64; 2],
    pub max_live: u64,
    pub shared: Shared,
}

pub(crate) fn start(
    table: &Mutex<ProcTable>,
    launch: Launch,
    opts: SpawnOptions,
) -> crate::Result<Process> {
    let cancel = CancelToken::new();
    let (stdin_w, stdin_r) = pipe(PIPE_CAPACITY, &cancel);
    let started_at_ms = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as u64);
    let proc = {
        let mut t = table.lock();
        if t.closed {
            return Err(crate::SandboxError::Destroyed);
        }
        let live = t.procs.values().filter(|p| p.is_running()).count() as u64;
        if live >= launch.max_live {
            return Err(ProcessError::LimitExceeded(launch.max_live).into());
        }
        // Its shell is a process of the sandbox; the slot goes back when it ends (`run`).
        if !launch.shared.pids.acquire() {
            return Err(ProcessError::PidsExhausted(launch.shared.pids.max()).into());
        }
        t.forget_old();
        t.next_pid += 1;
        let proc = Process(Arc::new(Proc {
            pid: t.next_pid,
            command: launch.command.clone(),
            started_at_ms,
            cancel: cancel.clone(),
            killed: AtomicBool::new(false),
            stdin: Mutex::new(Some(stdin_w.clone())),
            rings: Mutex::new([
                Ring::new(launch.ring_bytes[0]),
                Ring::new(launch.ring_bytes[1]),
            ]),
            result: Mutex::new(None),
            ended: Condvar::new(),
        }));
        t.procs.insert(proc.pid(), proc.clone());
        proc
    };
    // Written before the caller sees the handle, so it is what the process reads first (a
    // later `write_stdin` comes after it): the pipe is empty, so what fits goes in without
    // blocking. Only a rest larger than the pipe waits on the process's own thread.
    let initial = opts.stdin.clone().unwrap_or_default();
    let now = initial.len().min(PIPE_CAPACITY);
    if now > 0 {
        let _ = stdin_w.write_all(&initial[..now]);
    }
    let rest = initial.slice(now..);
    if opts.close_stdin {
        proc.0.stdin.lock().take();
    }
    let p = proc.clone();
    let pids = launch.shared.pids.clone();
    let spawned = std::thread::Builder::new()
        .name(format!("wasmsand-process-{}", proc.pid()))
        .spawn(move || {
            if !rest.is_empty() {
                let _ = stdin_w.write_all(&rest);
            }
            drop(stdin_w);
            run(p, launch, cancel, Input::Pipe(stdin_r), opts)
        });
    if let Err(e) = spawned {
        pids.release();
        let mut r = RunResult::refused(
            format!("cannot start a thread for the process: {e}"),
            ErrorClass::LimitExceeded,
        );
        r.usage.limits_hit.push("shell".into());
        finish(&proc, r);
    }
    Ok(proc)
}

fn finish(proc: &Process, result: RunResult) {
    proc.0.stdin.lock().take();
    *proc.0.result.lock() = Some(result);
    proc.0.ended.notify_all();
}

/// Reads one output pipe into its ring and callback until every writer is gone.
fn pump(
    proc: Process,
    which: usize,
    reader: wasmsand_exec::PipeReader,
    cb: Option<ChunkCallback>,
) -> std::thread::JoinHandle<()> {
    std::thread::spawn(move || {
        let mut buf = vec![0u8; 16 * 1024];
        while let Ok(n @ 1..) = reader.read(&mut buf) {
            proc.0.rings.lock()[which].push(&buf[..n]);
            if let Some(cb) = &cb {
                cb(&buf[..n]);
            }
        }
    })
}

fn run(proc: Process, launch: Launch, cancel: CancelToken, stdin: Input, opts: SpawnOptions) {
    let started = Instant::now();
    // Never cancelled: a killed process's last output still reaches the ring.
    let quiet = CancelToken::new();
    let (out_w, out_r) = pipe(PIPE_CAPACITY, &quiet);
    let (err_w, err_r) = pipe(PIPE_CAPACITY, &quiet);
    let pumps = [
        pump(proc.clone(), 0, out_r, opts.on_stdout.clone()),
        pump(proc.clone(), 1, err_r, opts.on_stderr.clone()),
    ];
    let mut shell = launch.shell;
    let cfg = wasmsand_shell::RunConfig {
        exec: launch.cfg_exec,
        vfs: launch.vfs.clone(),
        deadline: Some(started + Duration::from_millis(launch.timeout_ms)),
        cancel,
        memory_limit: Some(launch.memory_limit),
        tool_channel: launch.tool_channel.clone(),
        stdin,
        stdout: Output::from(out_w),
        stderr: Output::from(err_w),
        // `nohup cmd &` inside a process stays one of its jobs.
        detach: None,
        pids: launch.shared.pids.clone(),
        open_files: Some(launch.shared.open_files.clone()),
    };
    let outcome = wasmsand_shell::run(&mut shell, &launch.command, cfg);
    launch.shared.pids.release();
    drop(shell);
    for p in pumps {
        let _ = p.join();
    }
    let killed = proc.0.killed.load(Ordering::SeqCst);
    let (status, class) = match &outcome.abort {
        None => (outcome.status, None),
        Some(Abort::Timeout) => {
            proc.0.rings.lock()[1].push(b"command timed out\n");
            if let Some(cb) = &opts.on_stderr {
                cb(b"command timed out\n");
            }
            (124, Some(ErrorClass::Timeout))
        }
        Some(Abort::Cancelled) => (KILLED_STATUS, Some(ErrorClass::Cancelled)),
        // bash's status for a refused fork, as for a run (`Sandbox::run_with`).
        Some(Abort::Fork(_)) => (126, Some(ErrorClass::LimitExceeded)),
        Some(Abort::Limit(_)) => (
            if outcome.status == 0 {
                1
            } else {
                outcome.status
            },
            Some(ErrorClass::LimitExceeded),
        ),
    };
    // A kill that lands as the script ends on its own still reads as a kill.
    let (status, class) = if killed && class.is_none() {
        (KILLED_STATUS, Some(ErrorClass::Cancelled))
    } else {
        (status, class)
    };
    let elapsed = started.elapsed().as_millis() as u64;
    let (out, err) = {
        let rings = proc.0.rings.lock();
        (rings[0].to_capped(), rings[1].to_capped())
    };
    let mut result = RunResult::from_streams(status, &out, &err, elapsed, class);
    let stats = outcome.stats;
    let fs = launch.vfs.lock().usage();
    let mut hit: Vec<String> = Vec::new();
    if class == Some(ErrorClass::Timeout) {
        hit.push("timeoutMs".into());
    }
    if stats.out_of_memory {
        hit.push("memoryBytes".into());
    }
    if out.truncated() {
        hit.push("stdoutBytes".into());
    }
    if err.truncated() {
        hit.push("stderrBytes".into());
    }
    if matches!(outcome.abort, Some(Abort::Limit(_))) {
        hit.push("shell".into());
    }
    hit.extend(Shared::hits(&stats).map(String::from));
    result.usage = Usage {
        wall_ms: elapsed,
        cpu_us: stats.cpu_time.as_micros() as u64,
        peak_memory_bytes: stats.peak_memory,
        processes: stats.processes,
        tool_calls: stats.tool_calls,
        fs_bytes: fs.bytes_used,
        fs_files: fs.files_used,
        limits_hit: hit,
        ..Usage::default()
    };
    finish(&proc, result.clone());
    if let Some(cb) = &opts.on_exit {
        cb(&result);
    }
}
