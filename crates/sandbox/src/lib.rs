//! `wasmsand`: the sandbox users hold.
//!
//! A [`Sandbox`] is one bash session over an in-memory copy-on-write filesystem: `run` a
//! command line and get a [`RunResult`]; read and write its files; snapshot and restore it;
//! `fork` it in O(1) into an independent sandbox carrying every file, variable, function, the
//! cwd and all limits. Builtins run in the host, every other command is a WASI program run by
//! wasmer; nothing reaches the host's files, network or stdio.
//!
//! ```no_run
//! use wasmsand::{Sandbox, SandboxOptions};
//! let sb = Sandbox::new(SandboxOptions::default());
//! let r = sb.run("echo hello | wc -c").unwrap();
//! assert_eq!(r.stdout, "6\n");
//! ```

#![forbid(unsafe_code)]

use std::collections::{BTreeMap, HashMap};
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, OnceLock};
use std::time::{Duration, Instant};

use bytes::Bytes;
use parking_lot::Mutex;
use wasmsand_exec::{ChunkCallback, Exec, ExecOptions, Input, Output, OutputBuffer};
use wasmsand_shell::{Abort, DetachedJob, ShellState};
use wasmsand_vfs::{Delta, FileType, Vfs, VfsOptions};

mod changes;
mod det;
mod files;
mod net;
mod preinit;
mod preview;
mod process;
mod spill;
mod state;
mod tools;
mod warm;
pub use process::{
    ExitCallback, KEPT_ENDED_PROCESSES, KILLED_STATUS, Process, ProcessError, ProcessInfo,
    SpawnOptions, StreamOutput,
};
pub use state::{DEFAULT_MAX_STATE_BYTES, STATE_VERSION};
pub use tools::{Tool, ToolHandler, ToolSetError};
pub use warm::{PrecompileError, Precompiled, precompile};

pub use changes::{
    ChangeStatus, Changes, ChangesOptions, ChangesSince, ExportReport, FileChange, HostMount,
};
pub use det::DETERMINISTIC_PID;
pub use net::{EgressEvent, EgressSink, Gate, GateRefusal, NetLimits, Network, Resolver};
pub use preview::{Attempt, BestOfOptions, Preview};
pub use wasmsand_exec::{CancelToken, on_slow_compile, release_free_memory};
/// The egress allowlist (network policy `allowlist`): its wire form and checked form.
pub use wasmsand_model::egress;
pub use wasmsand_model::{
    ErrorClass, Limits, LimitsPatch, RunResult, Spilled, Truncated, Truncation, Usage,
};
/// A snapshot handle (`snapshot()` / `restore(id)`): the VFS's own, whose snapshot holds the
/// files; the sandbox keeps the shell state under the same id.
pub use wasmsand_vfs::SnapshotId;
pub use wasmsand_vfs::{Determinism, Errno, MountInfo, MountOptions, SECRET_DENYLIST, VfsError};
pub use wasmsand_vfs::{MergeConflict, MergedPath, SideChange};

/// Where a sandbox starts and what its user can change.
pub const HOME: &str = "/home/user";
/// The only trees a sandbox may change; everything else is read-only (`EROFS`).
pub const WRITABLE_PATHS: &[&str] = &["/home/user", "/tmp"];

/// Guest programs built only to test the exec layer: not installed in sandboxes.
const TEST_GUESTS: &[&str] = &["spin", "alloc", "flood"];

/// How to make a sandbox.
#[derive(Debug, Clone, Default)]
pub struct SandboxOptions {
    /// Every limit of the sandbox and of each run in it (a run may override its own timeout,
    /// [`RunOptions::timeout_ms`]).
    pub limits: Limits,
    /// Environment variables (exported) added to, or replacing, the defaults (`HOME`, `PATH`,
    /// `USER`, `SHELL`, `LANG`, `TMPDIR`, `TERM`).
    pub env: Vec<(String, String)>,
    /// Where compiled modules are cached on disk (default: [`wasmsand_exec::default_cache_dir`]).
    pub cache_dir: Option<PathBuf>,
    /// Files added to the initial layout (parents created), e.g. a project to work on. They
    /// are part of the layout: anywhere in the tree, not counted against the file count, and
    /// their bytes are shared, not copied, when given as `Bytes::from_static` or shared
    /// `Bytes`.
    pub files: Vec<(String, Bytes)>,
    /// What the sandbox may reach on the network (`curl`, `wget`); none: nothing.
    pub network: Option<Network>,
}

/// Why a sandbox operation failed.
#[derive(Debug, Clone, thiserror::Error)]
pub enum SandboxError {
    /// [`Sandbox::destroy`] was called; the sandbox refuses every call from then on.
    #[error("sandbox has been destroyed")]
    Destroyed,
    /// A file operation failed; the errno says why (see [`SandboxError::errno`]).
    #[error("{0}")]
    Fs(#[from] VfsError),
    /// [`Sandbox::restore`] was given an id this sandbox does not hold.
    #[error("unknown snapshot: {0}")]
    UnknownSnapshot(String),
    /// The request itself is refused (a readonly variable, an over-long command, a state
    /// blob that does not verify, a merge from a sandbox that is not a fork, ...); the text
    /// says what.
    #[error("{0}")]
    Invalid(String),
    /// A background-process call failed.
    #[error("{0}")]
    Process(#[from] ProcessError),
    /// [`Sandbox::merge`] found paths both sides changed; nothing was applied.
    #[error("merge conflict: {} path(s) changed in both sandboxes since the fork: {}", .0.len(), conflict_paths(.0))]
    MergeConflict(Vec<MergeConflict>),
}

fn conflict_paths(c: &[MergeConflict]) -> String {
    const SHOWN: usize = 5;
    let mut s: Vec<&str> = c.iter().take(SHOWN).map(|c| c.path.as_str()).collect();
    if c.len() > SHOWN {
        s.push("...");
    }
    s.join(", ")
}

impl SandboxError {
    /// The errno of a filesystem error (`ENOENT`, ...), for callers that map it.
    pub fn errno(&self) -> Option<Errno> {
        match self {
            SandboxError::Fs(e) => Some(e.errno),
            _ => None,
        }
    }
}

/// The result of every fallible sandbox call.
pub type Result<T, E = SandboxError> = std::result::Result<T, E>;

/// What `list` and `stat` report.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FileInfo {
    /// The last component of the path (`/` for the root).
    pub name: String,
    /// What the path itself is: a symlink is not followed.
    pub kind: FileKind,
    /// Bytes of content for a file, the target's length for a symlink, 0 for a directory.
    pub size: u64,
}

/// The three kinds of node the API distinguishes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FileKind {
    /// A regular file, or one of the devices under `/dev`.
    File,
    /// A directory.
    Dir,
    /// A symbolic link.
    Symlink,
}

impl FileKind {
    /// The wire spelling (`"file"`, `"dir"`, `"symlink"`).
    pub fn as_str(self) -> &'static str {
        match self {
            FileKind::File => "file",
            FileKind::Dir => "dir",
            FileKind::Symlink => "symlink",
        }
    }
}

/// How [`Sandbox::import_state`] opens a blob.
#[derive(Debug, Clone, Default)]
pub struct ImportOptions {
    /// The HMAC key the blob was exported with; a keyed blob does not open without it, and
    /// an unkeyed one does not open with one.
    pub key: Option<Vec<u8>>,
    /// Largest blob (and largest decompressed payload) accepted; default
    /// [`DEFAULT_MAX_STATE_BYTES`].
    pub max_bytes: Option<u64>,
    /// As [`SandboxOptions::cache_dir`].
    pub cache_dir: Option<PathBuf>,
}

/// Per-run options of [`Sandbox::run_with`].
#[derive(Default, Clone)]
pub struct RunOptions {
    /// Overrides the sandbox's timeout for this run.
    pub timeout_ms: Option<u64>,
    /// Receives stdout chunks while the command runs.
    pub on_stdout: Option<ChunkCallback>,
    /// Receives stderr chunks while the command runs.
    pub on_stderr: Option<ChunkCallback>,
    /// Bytes given to the command as its standard input.
    pub stdin: Option<Bytes>,
    /// A standard input fed while the command runs ([`stdin_stream`]); wins over `stdin`.
    pub stdin_stream: Option<StdinStream>,
    /// All or nothing: when the run exits non-zero, times out, is cancelled or hits a limit,
    /// the sandbox is put back exactly as it was before it (files, modes, variables, cwd,
    /// functions, options) and the result says `rolled_back`. O(1) whatever the sandbox holds.
    pub atomic: bool,
    /// What a stream past its cap shows: head + tail with the whole stream in a spill file
    /// (the default), or plain truncation.
    pub truncation: Truncation,
    /// Leaves the result's `usage` empty but for `wall_ms`: the run's filesystem totals are
    /// not read and the receipt is not assembled. What the receipt costs is measured by the
    /// `receipt` group of the `sandbox` bench (docs/runs.md).
    pub skip_usage: bool,
    /// Stops this run when cancelled, from any thread. Unlike [`Sandbox::cancel`] it names
    /// one run, so it can be cancelled before it starts (a run queued behind another ends at
    /// once with `CANCELLED`) and never stops a later run of the same sandbox.
    pub cancel: Option<CancelToken>,
}

/// A run's standard input that its caller feeds while the run goes on (an interactive run:
/// a client typing into a program): the reading end of a pipe, for
/// [`RunOptions::stdin_stream`].
#[derive(Clone)]
pub struct StdinStream {
    reader: wasmsand_exec::PipeReader,
    /// The token the pipe wakes its waiters on: the run's, so a cancel or a timeout reaches
    /// a program blocked reading it.
    cancel: CancelToken,
}

/// The writing end of a [`StdinStream`]. Dropping it (every clone) closes the stream: the
/// run's programs read end of file once they drained what was written.
#[derive(Clone)]
pub struct StdinWriter(wasmsand_exec::PipeWriter);

impl StdinWriter {
    /// Writes all of `data`, blocking while the pipe ([`wasmsand_exec::PIPE_CAPACITY`]
    /// bytes) is full and no program reads it. Fails with `BrokenPipe` once the run ended
    /// (nothing reads it any more) and with `Interrupted` once it was cancelled or timed out,
    /// so a writer never blocks past its run.
    pub fn write_all(&self, data: &[u8]) -> std::io::Result<()> {
        self.0.write_all(data)
    }
}

/// A pipe to feed a run's standard input while it runs. The run must be given `cancel` as
/// its [`RunOptions::cancel`] (a run without one takes it from the stream): the pipe's
/// blocked reads and writes wake when that token is cancelled, which is how a cancel or a
/// timeout reaches a program waiting for input that may never come.
pub fn stdin_stream(cancel: &CancelToken) -> (StdinWriter, StdinStream) {
    let (w, r) = wasmsand_exec::pipe(wasmsand_exec::PIPE_CAPACITY, cancel);
    (
        StdinWriter(w),
        StdinStream {
            reader: r,
            cancel: cancel.clone(),
        },
    )
}

/// What [`Sandbox::merge`] carries besides the files.
#[derive(Debug, Clone, Copy, Default)]
pub struct MergeOptions {
    /// The fork's exported variables replace the parent's (set or changed ones are set, ones
    /// the fork no longer exports are unset); `PWD`/`OLDPWD` follow `cwd` instead, and the
    /// parent's readonly variables are left alone.
    pub env: bool,
    /// The parent moves to the fork's working directory (with its `PWD` and `OLDPWD`).
    pub cwd: bool,
}

/// What [`Sandbox::merge`] applied.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct MergeResult {
    /// Each path set to the fork's state, in path order, with what that did here (a tree
    /// added or deleted whole is one entry).
    pub applied: Vec<MergedPath>,
    /// Variables set, changed or unset (with `env`), by name.
    pub env: Vec<String>,
    /// The new working directory (with `cwd`).
    pub cwd: Option<String>,
}

/// Where a fork came from: its parent and the tree both had at the fork point (moved to the
/// fork's tree as merged after each merge, the base of the next one).
struct Origin {
    parent: u64,
    base: wasmsand_vfs::Checkpoint,
}

struct Inner {
    shell: ShellState,
    vfs: Arc<Mutex<Vfs>>,
    /// Shell state at each snapshot; the files are in the VFS's own snapshots.
    snapshots: BTreeMap<u64, ShellState>,
    /// Set in forks, for [`Sandbox::merge`]. Keeps the fork point's tree alive.
    origin: Option<Origin>,
}

/// Sandbox identities, so a fork knows its parent without holding it.
static NEXT_ID: AtomicU64 = AtomicU64::new(1);

/// One sandbox: a shell session, its filesystem and its limits. `Send + Sync`: a server can
/// share one between threads, and `cancel` works from any thread while `run` is going.
pub struct Sandbox {
    id: u64,
    inner: Mutex<Option<Inner>>,
    running: Mutex<Option<CancelToken>>,
    /// Set by `signal_term` for the run going now: its end runs the shell's TERM trap.
    term: AtomicBool,
    destroyed: AtomicBool,
    limits: Limits,
    exec: &'static Exec,
    /// Host tools offered to guests through the tool-call channel (`from host import tools`).
    tools: Mutex<wasmsand_cpython::ToolSet>,
    /// The network policy; each run gets a door of its own (its own pins and budget).
    network: Mutex<Option<Network>>,
    /// Background processes; never taken while `inner` is held by a run that waits on them.
    /// Shared with the runs' shells, which hand `nohup cmd &` jobs over to it.
    procs: Arc<Mutex<process::ProcTable>>,
    /// The process slots and descriptor pool its runs and processes share.
    shared: process::Shared,
}

/// The prepared filesystem every sandbox starts as: the standard layout with every guest in
/// `/bin` and `/usr/bin`, its bytes shared with the embedded modules (never copied).
fn template() -> &'static Vfs {
    static T: OnceLock<Vfs> = OnceLock::new();
    T.get_or_init(|| {
        let mut vfs = Vfs::new(VfsOptions::default());
        vfs.layout(|v| -> std::result::Result<(), VfsError> {
            v.standard_layout()?;
            v.mkdir_p("/usr/local/share")?;
            // The shell's builtins that stand in for programs win over a guest of the same
            // name: they are builtins because a WASI program cannot do their work (start a
            // program, change permission bits), so `/usr/bin/env` and `/bin/chmod` must be
            // the builtin too.
            let stand_ins: Vec<&str> = wasmsand_shell::builtin_programs()
                .filter(|n| !matches!(*n, "bash" | "sh"))
                .collect();
            for name in wasmsand_guests::command_names() {
                if TEST_GUESTS.contains(&name) || stand_ins.contains(&name) {
                    continue;
                }
                let Some(wasm) = wasmsand_guests::wasm_for_command(name) else {
                    continue;
                };
                let bytes = Bytes::from_static(wasm);
                v.write_shared(&format!("/usr/bin/{name}"), bytes.clone(), 0o755)?;
                v.write_shared(&format!("/bin/{name}"), bytes, 0o755)?;
            }
            // The shell is built in; these files let `ls /bin`, `which bash` and `#!` lines
            // find it.
            for path in ["/bin/bash", "/bin/sh", "/usr/bin/bash", "/usr/bin/sh"] {
                v.write_shared(
                    path,
                    Bytes::from_static(wasmsand_shell::SHELL_MARKER),
                    0o755,
                )?;
            }
            for name in stand_ins {
                let file = Bytes::from(wasmsand_shell::program_file(name));
                for dir in ["/usr/bin", "/bin"] {
                    v.write_shared(&format!("{dir}/{name}"), file.clone(), 0o755)?;
                }
            }
            // CPython: mapped from the build's artifact cache, shared by every sandbox. Without
            // the artifacts the sandbox still works; `python3` is then not found.
            if let Err(e) = wasmsand_cpython::install(v) {
                eprintln!("wasmsand: python3 is not installed in sandboxes: {e}");
            }
            v.write("/etc/hostname", "sandbox\n")?;
            v.write(
                "/etc/passwd",
                "root:x:0:0:root:/root:/bin/bash\nuser:x:1000:1000:user:/home/user:/bin/bash\n",
            )?;
            Ok(())
        })
        .expect("the template layout fits in an empty tree");
        vfs
    })
}

/// The template's tree, which exported state is the difference from.
fn template_checkpoint() -> &'static wasmsand_vfs::Checkpoint {
    static T: OnceLock<wasmsand_vfs::Checkpoint> = OnceLock::new();
    T.get_or_init(|| template().checkpoint())
}

/// The files as portable state carries them. A mounted host folder does not travel: its
/// files are the host's, and reading them all to export them is not what a mount is for.
fn portable_delta(vfs: &Vfs) -> Result<Delta> {
    if let Some(m) = vfs.mounts().first() {
        return Err(SandboxError::Invalid(format!(
            "a sandbox with a host folder mounted ({} at {}) cannot be exported: its files are the host's; take what it changed with changes()",
            m.host.display(),
            m.path
        )));
    }
    Ok(vfs.delta_since(template_checkpoint()))
}

fn exec_for(cache_dir: &Option<PathBuf>) -> &'static Exec {
    preinit::register();
    static EXECS: OnceLock<Mutex<HashMap<PathBuf, &'static Exec>>> = OnceLock::new();
    match cache_dir {
        None => Exec::shared(),
        Some(dir) => {
            let mut map = EXECS.get_or_init(Default::default).lock();
            map.entry(dir.clone()).or_insert_with(|| {
                // One engine per distinct cache directory for the life of the process.
                Box::leak(Box::new(Exec::new(ExecOptions {
                    cache_dir: Some(dir.clone()),
                    no_disk_cache: false,
                })))
            })
        }
    }
}

fn default_env() -> Vec<(String, String)> {
    [
        ("HOME", HOME),
        ("PATH", "/usr/local/bin:/usr/bin:/bin"),
        ("USER", "user"),
        ("LOGNAME", "user"),
        ("SHELL", "/bin/bash"),
        ("LANG", "C.UTF-8"),
        ("TMPDIR", "/tmp"),
        ("TERM", "dumb"),
        ("HOSTNAME", "sandbox"),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_string(), v.to_string()))
    .collect()
}

impl Sandbox {
    /// A new sandbox: an O(1) copy of the prepared template under these limits.
    pub fn new(options: SandboxOptions) -> Sandbox {
        let limits = options.limits;
        let mut vfs = template().with_options(VfsOptions {
            max_file_count: Some(limits.file_count),
            fs_limit_bytes: Some(limits.fs_bytes),
            writable_paths: Some(WRITABLE_PATHS.iter().map(|s| s.to_string()).collect()),
        });
        if !options.files.is_empty() {
            vfs.layout(|v| {
                for (path, data) in &options.files {
                    let p = wasmsand_vfs::path::join(HOME, path);
                    if let Some(parent) = parent_of(&p) {
                        let _ = v.mkdir_p(&parent);
                    }
                    let _ = v.write_shared(&p, data.clone(), 0o644);
                }
            });
        }
        let mut env = default_env();
        for (k, v) in options.env {
            env.retain(|(name, _)| *name != k);
            env.push((k, v));
        }
        // Like `bash -c`: aliases are expanded after `shopt -s expand_aliases`.
        let shell = ShellState::new(&env, HOME);
        Sandbox {
            id: NEXT_ID.fetch_add(1, Ordering::Relaxed),
            inner: Mutex::new(Some(Inner {
                shell,
                vfs: Arc::new(Mutex::new(vfs)),
                snapshots: BTreeMap::new(),
                origin: None,
            })),
            running: Mutex::new(None),
            term: AtomicBool::new(false),
            destroyed: AtomicBool::new(false),
            limits,
            exec: exec_for(&options.cache_dir),
            tools: Mutex::default(),
            network: Mutex::new(options.network),
            procs: Arc::default(),
            shared: process::Shared::new(&limits),
        }
    }

    /// The limits this sandbox was made with (forks share them).
    pub fn limits(&self) -> &Limits {
        &self.limits
    }

    fn with_inner<T>(&self, f: impl FnOnce(&mut Inner) -> Result<T>) -> Result<T> {
        let mut g = self.inner.lock();
        match g.as_mut() {
            Some(inner) => f(inner),
            None => Err(SandboxError::Destroyed),
        }
    }

    /// Runs a command line with the sandbox's limits.
    pub fn run(&self, command: &str) -> Result<RunResult> {
        self.run_with(command, RunOptions::default())
    }

    /// Runs a command line, streaming its output to callbacks while it runs.
    pub fn run_streaming(
        &self,
        command: &str,
        on_stdout: ChunkCallback,
        on_stderr: ChunkCallback,
    ) -> Result<RunResult> {
        self.run_with(
            command,
            RunOptions {
                on_stdout: Some(on_stdout),
                on_stderr: Some(on_stderr),
                ..Default::default()
            },
        )
    }

    /// Runs a command line with per-run options (stdin, env, its own timeout, streaming
    /// callbacks, atomic, ...). Refused before it starts when the sandbox is destroyed
    /// or the command passes `command_bytes`; anything that goes wrong while it runs is in
    /// the [`RunResult`], not an error.
    pub fn run_with(&self, command: &str, opts: RunOptions) -> Result<RunResult> {
        if self.destroyed.load(Ordering::SeqCst) {
            return Err(SandboxError::Destroyed);
        }
        let len = command.len() as u64;
        if len > self.limits.command_bytes {
            let mut r = RunResult::refused(
                format!(
                    "command too long ({len} bytes, limit: {})",
                    self.limits.command_bytes
                ),
                ErrorClass::LimitExceeded,
            );
            r.usage.limits_hit.push("commandBytes".into());
            if let Ok(fs) = self.usage() {
                (r.usage.fs_bytes, r.usage.fs_files) = (fs.bytes_used, fs.files_used);
            }
            return Ok(r);
        }
        let timeout = opts.timeout_ms.unwrap_or(self.limits.timeout_ms);
        self.with_inner(|inner| {
            let started = Instant::now();
            let cancel = opts
                .cancel
                .or_else(|| opts.stdin_stream.as_ref().map(|s| s.cancel.clone()))
                .unwrap_or_default();
            self.term.store(false, Ordering::SeqCst);
            *self.running.lock() = Some(cancel.clone());
            let (out_cap, err_cap) = (self.limits.stdout_bytes, self.limits.stderr_bytes);
            let mut stdout =
                OutputBuffer::from_buffer(spill::buffer(out_cap, &self.limits, opts.truncation));
            if let Some(cb) = opts.on_stdout {
                stdout = stdout.with_callback(cb);
            }
            let mut stderr =
                OutputBuffer::from_buffer(spill::buffer(err_cap, &self.limits, opts.truncation));
            if let Some(cb) = opts.on_stderr {
                stderr = stderr.with_callback(cb);
            }
            let deadline = started + Duration::from_millis(timeout);
            let stdin = match opts.stdin_stream {
                Some(s) => Input::Pipe(s.reader),
                None => opts.stdin.map_or(Input::Empty, Input::Bytes),
            };
            let (activity_before, checkpoint) = {
                let vfs = inner.vfs.lock();
                let saved = opts.atomic.then(|| (vfs.checkpoint(), inner.shell.clone()));
                ((!opts.skip_usage).then(|| vfs.activity()), saved)
            };
            let (channel, net_meter) = self.metered_tool_channel();
            let cfg = self.run_config(inner, deadline, cancel, stdin, [&stdout, &stderr], &channel);
            let mut outcome = wasmsand_shell::run(&mut inner.shell, command, cfg);
            let terminated =
                outcome.abort == Some(Abort::Cancelled) && self.term.swap(false, Ordering::SeqCst);
            if terminated {
                let stats = outcome.stats;
                outcome = self.run_term_trap(inner, deadline, &stdout, &stderr, &channel);
                outcome.stats = stats.then(outcome.stats);
            }
            *self.running.lock() = None;
            let (status, class) = match &outcome.abort {
                None => (outcome.status, None),
                Some(Abort::Timeout) => {
                    stderr.write(b"command timed out\n");
                    (124, Some(ErrorClass::Timeout))
                }
                // Terminated: the trap's `exit` status, or 143 as for SIGTERM.
                Some(Abort::Cancelled) if terminated => {
                    (outcome.status, Some(ErrorClass::Cancelled))
                }
                Some(Abort::Cancelled) => {
                    stderr.write(b"command cancelled\n");
                    (130, Some(ErrorClass::Cancelled))
                }
                // bash's status for a refused fork, whichever subshell was refused (the
                // top level may have gone on and ended 0 before a job's fork failed).
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
            inner.shell.status = status;
            let rolled_back = match checkpoint {
                Some((files, shell)) if status != 0 || class.is_some() => {
                    inner.vfs.lock().rollback(files);
                    inner.shell = shell;
                    true
                }
                _ => false,
            };
            let (stdout, stderr) = (stdout.take(), stderr.take());
            let elapsed = started.elapsed().as_millis() as u64;
            let mut result = RunResult::from_streams(status, &stdout, &stderr, elapsed, class);
            result.rolled_back = rolled_back;
            // A rolled-back run leaves no file behind, a spill file included.
            if !rolled_back {
                spill::finish(&mut inner.vfs.lock(), &stdout, &stderr, &mut result);
            }
            let Some(activity_before) = activity_before else {
                return Ok(result);
            };
            let (activity, fs) = {
                let vfs = inner.vfs.lock();
                (vfs.activity().since(activity_before), vfs.usage())
            };
            let stats = outcome.stats;
            let mut hit: Vec<&str> = Vec::new();
            if class == Some(ErrorClass::Timeout) {
                hit.push("timeoutMs");
            }
            if stats.out_of_memory {
                hit.push("memoryBytes");
            }
            if stdout.truncated() {
                hit.push("stdoutBytes");
            }
            if stderr.truncated() {
                hit.push("stderrBytes");
            }
            if activity.byte_limit_hits > 0 {
                hit.push("fsBytes");
            }
            if activity.count_limit_hits > 0 {
                hit.push("fileCount");
            }
            if channel
                .as_ref()
                .is_some_and(|c| c.calls_used() > c.max_calls)
            {
                hit.push("toolCalls");
            }
            if matches!(outcome.abort, Some(Abort::Limit(_))) {
                hit.push("shell");
            }
            hit.extend(process::Shared::hits(&stats));
            result.usage = Usage {
                wall_ms: elapsed,
                cpu_us: stats.cpu_time.as_micros() as u64,
                peak_memory_bytes: stats.peak_memory,
                processes: stats.processes,
                tool_calls: stats.tool_calls,
                bytes_written: activity.bytes_written,
                files_created: activity.created,
                files_deleted: activity.deleted,
                fs_bytes: fs.bytes_used,
                fs_files: fs.files_used,
                limits_hit: hit.into_iter().map(String::from).collect(),
                ..Usage::default()
            };
            if let Some(m) = &net_meter {
                m.report(&mut result.usage);
            }
            Ok(result)
        })
    }

    /// Asks the command running now to terminate, as SIGTERM would (from another thread).
    /// Its current program is stopped; if the shell has a `trap ... TERM`, the trap then runs
    /// (under a fresh cancel token, so a later [`Self::cancel`] still stops it, the KILL after
    /// a grace period) and the run ends with the trap's `exit` status, else 143. Without a
    /// trap it is [`Self::cancel`] with status 143. Either way the result is `CANCELLED`.
    /// `false` when no command was running.
    pub fn signal_term(&self) -> bool {
        let running = self.running.lock();
        match running.as_ref() {
            Some(c) => {
                self.term.store(true, Ordering::SeqCst);
                c.cancel();
                true
            }
            None => false,
        }
    }

    /// The TERM trap of a run stopped by `signal_term`, in the same session and streams.
    /// What the shell needs for one run of this sandbox: its files, limits and host tools,
    /// with the run's own deadline, cancel token and streams.
    fn run_config(
        &self,
        inner: &Inner,
        deadline: Instant,
        cancel: CancelToken,
        stdin: Input,
        [stdout, stderr]: [&OutputBuffer; 2],
        channel: &Option<wasmsand_exec::ToolChannel>,
    ) -> wasmsand_shell::RunConfig {
        wasmsand_shell::RunConfig {
            exec: self.exec,
            vfs: inner.vfs.clone(),
            deadline: Some(deadline),
            cancel,
            memory_limit: Some(self.limits.memory_bytes),
            tool_channel: channel.clone(),
            stdin,
            stdout: Output::Buffer(stdout.clone()),
            stderr: Output::Buffer(stderr.clone()),
            detach: Some(self.detach_jobs(inner)),
            pids: self.shared.pids.clone(),
            open_files: Some(self.shared.open_files.clone()),
        }
    }

    /// How a run's shell keeps a job after the run (`nohup cmd &`, `cmd & disown`): as a
    /// background process of this sandbox, started as [`Self::spawn`] starts one, with the
    /// shell's state at the `&` and stdin at end of file.
    fn detach_jobs(&self, inner: &Inner) -> wasmsand_shell::DetachFn {
        let procs = self.procs.clone();
        let vfs = inner.vfs.clone();
        let (exec, limits, channel) = (self.exec, self.limits, self.tool_channel());
        let shared = self.shared.clone();
        Arc::new(move |command: &str, shell: ShellState| {
            let launch = process::Launch {
                command: command.to_string(),
                shell,
                cfg_exec: exec,
                vfs: vfs.clone(),
                memory_limit: limits.memory_bytes,
                tool_channel: channel.clone(),
                timeout_ms: limits.timeout_ms,
                ring_bytes: [limits.stdout_bytes, limits.stderr_bytes],
                max_live: limits.background_processes,
                shared: shared.clone(),
            };
            let opts = SpawnOptions {
                close_stdin: true,
                ..SpawnOptions::default()
            };
            match process::start(&procs, launch, opts) {
                Ok(p) => Ok(Arc::new(process::DetachedProcess(p)) as Arc<dyn DetachedJob>),
                Err(e) => Err(format!("{}: {e}", command.split(' ').next().unwrap_or(""))),
            }
        })
    }

    fn run_term_trap(
        &self,
        inner: &mut Inner,
        deadline: Instant,
        stdout: &OutputBuffer,
        stderr: &OutputBuffer,
        channel: &Option<wasmsand_exec::ToolChannel>,
    ) -> wasmsand_shell::RunOutcome {
        const TERM_STATUS: i32 = 128 + 15;
        let action = inner
            .shell
            .traps
            .get("SIGTERM")
            .cloned()
            .unwrap_or_default();
        let terminated = wasmsand_shell::RunOutcome {
            status: TERM_STATUS,
            abort: Some(Abort::Cancelled),
            stats: Default::default(),
        };
        // `trap '' TERM` ignores the signal, but the run is already stopped: it ends as
        // terminated.
        if action.trim().is_empty() {
            return terminated;
        }
        let cancel = CancelToken::new();
        *self.running.lock() = Some(cancel.clone());
        inner.shell.status = TERM_STATUS;
        let cfg = self.run_config(
            inner,
            deadline,
            cancel,
            Input::Empty,
            [stdout, stderr],
            channel,
        );
        // The interrupted script cannot resume: a trap that does not `exit` ends the run as
        // terminated.
        let script = format!("{action}\nexit {TERM_STATUS}");
        let trap = wasmsand_shell::run(&mut inner.shell, &script, cfg);
        match trap.abort {
            Some(Abort::Timeout) => trap,
            // KILLed during the trap, as SIGKILL would end it.
            Some(Abort::Cancelled) => wasmsand_shell::RunOutcome {
                status: 128 + 9,
                abort: Some(Abort::Cancelled),
                stats: trap.stats,
            },
            _ => wasmsand_shell::RunOutcome {
                status: trap.status,
                abort: Some(Abort::Cancelled),
                stats: trap.stats,
            },
        }
    }

    /// Stops the command running now (from another thread): it ends with `CANCELLED`.
    pub fn cancel(&self) {
        if let Some(c) = self.running.lock().as_ref() {
            c.cancel();
        }
    }

    fn abs(inner: &Inner, path: &str) -> String {
        wasmsand_vfs::path::join(&inner.shell.cwd, path)
    }

    /// The whole content of a file.
    pub fn read_file(&self, path: &str) -> Result<Bytes> {
        self.with_inner(|i| Ok(i.vfs.lock().read(&Self::abs(i, path))?))
    }

    /// Writes a file, creating missing parent directories.
    pub fn write_file(&self, path: &str, data: &[u8]) -> Result<()> {
        self.with_inner(|i| {
            let p = Self::abs(i, path);
            let mut vfs = i.vfs.lock();
            if let Some(parent) = parent_of(&p)
                && !vfs.exists(&parent)
            {
                vfs.mkdir_p(&parent)?;
            }
            Ok(vfs.write(&p, data)?)
        })
    }

    /// The entries of a directory, sorted by name.
    pub fn list(&self, path: &str) -> Result<Vec<FileInfo>> {
        self.with_inner(|i| {
            let p = Self::abs(i, path);
            let vfs = i.vfs.lock();
            let entries = vfs.readdir_metadata(&p)?;
            Ok(entries
                .into_iter()
                .map(|(name, m)| FileInfo {
                    name,
                    kind: kind_of(m.file_type),
                    size: if m.file_type == FileType::Dir {
                        0
                    } else {
                        m.size
                    },
                })
                .collect())
        })
    }

    /// What `path` is, without following a final symlink (relative paths from the shell's
    /// cwd).
    pub fn stat(&self, path: &str) -> Result<FileInfo> {
        self.with_inner(|i| {
            let p = Self::abs(i, path);
            let m = i.vfs.lock().lstat(&p)?;
            let name = p
                .rsplit('/')
                .find(|s| !s.is_empty())
                .unwrap_or("/")
                .to_string();
            Ok(FileInfo {
                name,
                kind: kind_of(m.file_type),
                size: if m.file_type == FileType::Dir {
                    0
                } else {
                    m.size
                },
            })
        })
    }

    /// Creates a directory and any missing parents.
    pub fn mkdir(&self, path: &str) -> Result<()> {
        self.with_inner(|i| Ok(i.vfs.lock().mkdir_p(&Self::abs(i, path))?))
    }

    /// Removes a file, an empty directory, or (with `recursive`) a whole tree.
    pub fn remove(&self, path: &str, recursive: bool) -> Result<()> {
        self.with_inner(|i| {
            let p = Self::abs(i, path);
            let mut vfs = i.vfs.lock();
            let m = vfs.lstat(&p)?;
            if m.file_type == FileType::Dir {
                if recursive {
                    vfs.remove_recursive(&p)?;
                } else {
                    vfs.rmdir(&p)?;
                }
            } else {
                vfs.unlink(&p)?;
            }
            Ok(())
        })
    }

    /// An environment variable of the session (`None` when unset).
    pub fn get_env(&self, name: &str) -> Result<Option<String>> {
        self.with_inner(|i| Ok(i.shell.vars.scalar(name).map(str::to_string)))
    }

    /// Sets and exports a variable, as `export NAME=value` would.
    pub fn set_env(&self, name: &str, value: &str) -> Result<()> {
        if !valid_name(name) {
            return Err(SandboxError::Invalid(format!(
                "invalid variable name: {name:?}"
            )));
        }
        self.with_inner(|i| {
            if i.shell
                .vars
                .get(name)
                .is_some_and(|v| v.has(wasmsand_shell::ATTR_READONLY))
            {
                return Err(SandboxError::Invalid(format!("{name}: readonly variable")));
            }
            i.shell.vars.put(
                name,
                wasmsand_shell::Var {
                    value: wasmsand_shell::Value::Str(value.to_string()),
                    attrs: wasmsand_shell::ATTR_EXPORT,
                },
            );
            Ok(())
        })
    }

    /// The session's working directory.
    pub fn cwd(&self) -> Result<String> {
        self.with_inner(|i| Ok(i.shell.cwd.clone()))
    }

    /// Records files and shell state (variables, functions, cwd, options) in O(1).
    pub fn snapshot(&self) -> Result<SnapshotId> {
        self.with_inner(|i| {
            let id = i.vfs.lock().snapshot();
            i.snapshots.insert(id.0, i.shell.clone());
            Ok(id)
        })
    }

    /// Puts files and shell state back as they were at `id`; the snapshot stays usable.
    pub fn restore(&self, id: SnapshotId) -> Result<()> {
        self.with_inner(|i| {
            let Some(shell) = i.snapshots.get(&id.0).cloned() else {
                return Err(SandboxError::UnknownSnapshot(id.to_string()));
            };
            i.vfs
                .lock()
                .restore(id)
                .map_err(|_| SandboxError::UnknownSnapshot(id.to_string()))?;
            i.shell = shell;
            Ok(())
        })
    }

    /// An independent sandbox in O(1): same files, shell state, snapshots and limits; later
    /// changes on either side are invisible to the other.
    pub fn fork(&self) -> Result<Sandbox> {
        self.with_inner(|i| {
            let vfs = i.vfs.lock().cow_clone();
            let base = vfs.checkpoint();
            Ok(Sandbox {
                id: NEXT_ID.fetch_add(1, Ordering::Relaxed),
                inner: Mutex::new(Some(Inner {
                    shell: i.shell.clone(),
                    vfs: Arc::new(Mutex::new(vfs)),
                    snapshots: i.snapshots.clone(),
                    origin: Some(Origin {
                        parent: self.id,
                        base,
                    }),
                })),
                running: Mutex::new(None),
                term: AtomicBool::new(false),
                destroyed: AtomicBool::new(false),
                limits: self.limits,
                exec: self.exec,
                tools: Mutex::new(self.tools.lock().clone()),
                network: Mutex::new(self.network.lock().clone()),
                // A fork starts with no processes: they belong to the sandbox that ran them.
                procs: Arc::default(),
                shared: process::Shared::new(&self.limits),
            })
        })
    }

    /// Brings into this sandbox what `fork` (a [`Self::fork`] of it) changed in its files
    /// since it was forked, or since it was last merged here: three-way against that point,
    /// so a path only the fork changed is applied and a path both changed differently is a
    /// conflict. All or nothing: with a conflict nothing is applied and the error
    /// ([`SandboxError::MergeConflict`]) lists every conflicting path with what each side did;
    /// a result past this sandbox's filesystem limits is refused (`ENOSPC`) and changes
    /// nothing either. Times alone are not merged. `opts` carries the fork's environment and
    /// working directory too. The fork is read as it stands (after the run it may be
    /// doing) and is left as it is. Costs what the two sides changed, not what they hold.
    pub fn merge(&self, fork: &Sandbox, opts: MergeOptions) -> Result<MergeResult> {
        if std::ptr::eq(self, fork) {
            return Err(SandboxError::Invalid(
                "a sandbox cannot be merged into itself".into(),
            ));
        }
        // The fork is read and released before this sandbox is locked: two locks are never
        // held at once, so merges in both directions cannot deadlock.
        let fork_state = fork.with_inner(|f| match &f.origin {
            Some(o) if o.parent == self.id => Ok((
                o.base.clone(),
                f.vfs.lock().checkpoint(),
                (opts.env || opts.cwd).then(|| f.shell.clone()),
            )),
            _ => Err(SandboxError::Invalid(
                "not a fork of this sandbox: only a sandbox forked from this one merges into it"
                    .into(),
            )),
        });
        let (base, theirs, shell) = match fork_state {
            Err(SandboxError::Destroyed) => {
                return Err(SandboxError::Invalid(
                    "the sandbox to merge has been destroyed".into(),
                ));
            }
            other => other?,
        };
        let result = self.merge_trees(&base, &theirs, shell, opts)?;
        // What was merged is now in both: the next merge starts from it.
        let _ = fork.with_inner(|f| {
            if let Some(o) = f.origin.as_mut().filter(|o| o.parent == self.id) {
                o.base = theirs;
            }
            Ok(())
        });
        Ok(result)
    }

    /// [`Self::merge`] against an explicit fork point: what `fork` changed since the state
    /// `base` holds is brought into this sandbox, three-way, with the same rules, conflicts
    /// and options. For forks whose relation to this sandbox is not in memory (the service's
    /// sessions, which hibernate: it keeps each fork's fork point as a saved state). The
    /// caller moves its fork point to the fork's state after a merge that succeeded.
    pub fn merge_from(
        &self,
        base: &Sandbox,
        fork: &Sandbox,
        opts: MergeOptions,
    ) -> Result<MergeResult> {
        if std::ptr::eq(self, fork) {
            return Err(SandboxError::Invalid(
                "a sandbox cannot be merged into itself".into(),
            ));
        }
        let base = base.with_inner(|b| Ok(b.vfs.lock().checkpoint()))?;
        let (theirs, shell) = fork
            .with_inner(|f| {
                Ok((
                    f.vfs.lock().checkpoint(),
                    (opts.env || opts.cwd).then(|| f.shell.clone()),
                ))
            })
            .map_err(|e| match e {
                SandboxError::Destroyed => {
                    SandboxError::Invalid("the sandbox to merge has been destroyed".into())
                }
                e => e,
            })?;
        self.merge_trees(&base, &theirs, shell, opts)
    }

    fn merge_trees(
        &self,
        base: &wasmsand_vfs::Checkpoint,
        theirs: &wasmsand_vfs::Checkpoint,
        shell: Option<ShellState>,
        opts: MergeOptions,
    ) -> Result<MergeResult> {
        self.with_inner(|i| {
            let mut vfs = i.vfs.lock();
            let before = vfs.checkpoint();
            let report = vfs.merge(base, theirs).map_err(|e| match e {
                wasmsand_vfs::MergeError::Conflicts(c) => SandboxError::MergeConflict(c),
                wasmsand_vfs::MergeError::Fs(e) => SandboxError::Fs(e),
            })?;
            let mut result = MergeResult {
                applied: report.applied,
                ..MergeResult::default()
            };
            let Some(theirs_shell) = shell else {
                return Ok(result);
            };
            if opts.cwd {
                let cwd = &theirs_shell.cwd;
                if !vfs.stat(cwd).is_ok_and(|m| m.is_dir()) {
                    vfs.rollback(before);
                    return Err(SandboxError::Invalid(format!(
                        "the fork's working directory {cwd} is not a directory here after the merge"
                    )));
                }
            }
            drop(vfs);
            if opts.env {
                result.env = carry_env(&mut i.shell, &theirs_shell);
            }
            if opts.cwd {
                i.shell.cwd = theirs_shell.cwd.clone();
                for name in ["PWD", "OLDPWD"] {
                    match theirs_shell.vars.get(name) {
                        Some(v) => i.shell.vars.put(name, v.clone()),
                        None => {
                            i.shell.vars.remove(name);
                        }
                    }
                }
                result.cwd = Some(theirs_shell.cwd);
            }
            Ok(result)
        })
    }

    /// Releases the sandbox; every later call fails with [`SandboxError::Destroyed`].
    pub fn destroy(&self) {
        self.destroyed.store(true, Ordering::SeqCst);
        self.procs.lock().close();
        self.cancel();
        *self.inner.lock() = None;
    }

    /// Whether [`Sandbox::destroy`] was called.
    pub fn is_destroyed(&self) -> bool {
        self.destroyed.load(Ordering::SeqCst)
    }

    /// The whole state as a portable blob: files (with modes and times), variables, functions,
    /// cwd, options and limits — versioned, compressed, and authenticated with `key` (HMAC-
    /// SHA256) when one is given, else checksummed. Snapshots and host tools are not part of
    /// it. [`Self::import_state`] opens it in any process running the same wasmsand.
    pub fn export_state(&self, key: Option<&[u8]>) -> Result<Vec<u8>> {
        self.with_inner(|i| {
            let delta = portable_delta(&i.vfs.lock())?;
            let header = state::Header {
                limits: self.limits,
                shell: i.shell.to_portable(),
            };
            Ok(state::encode(&header, &delta, key))
        })
    }

    /// A new sandbox holding the state [`Self::export_state`] wrote. A corrupt, forged,
    /// truncated, oversized or newer-version blob, or one whose files do not fit its limits,
    /// is refused with [`SandboxError::Invalid`] naming the reason.
    pub fn import_state(blob: &[u8], options: ImportOptions) -> Result<Sandbox> {
        let max = options.max_bytes.unwrap_or(DEFAULT_MAX_STATE_BYTES);
        let (header, delta) = state::decode(blob, options.key.as_deref(), max)?;
        let opts = SandboxOptions {
            limits: header.limits,
            cache_dir: options.cache_dir,
            ..SandboxOptions::default()
        };
        Self::rebuild(header.shell, &delta, opts)
    }

    /// The state as [`Self::export_state`] carries it, uncompressed and without a checksum:
    /// for a store that splits, deduplicates, compresses and checks it itself (the service's
    /// hibernated sessions). Equal states give equal bytes, and a change to a few files
    /// changes the bytes of those files only.
    pub fn export_payload(&self) -> Result<Vec<u8>> {
        self.with_inner(|i| {
            let delta = portable_delta(&i.vfs.lock())?;
            let header = state::Header {
                limits: self.limits,
                shell: i.shell.to_portable(),
            };
            Ok(state::encode_bare(&header, &delta))
        })
    }

    /// A sandbox made with `options` (its limits, network, cache; its `env` and `files` are
    /// replaced by the payload's) holding the state [`Self::export_payload`] wrote. A payload
    /// that does not parse, or whose files do not fit `options.limits`, is refused with
    /// [`SandboxError::Invalid`]; nothing checks it against a checksum, so its store must.
    pub fn from_payload(payload: &[u8], options: SandboxOptions) -> Result<Sandbox> {
        let (header, delta) = state::decode_bare(payload)?;
        Self::rebuild(header.shell, &delta, options)
    }

    fn rebuild(
        shell: serde_json::Value,
        delta: &Delta,
        options: SandboxOptions,
    ) -> Result<Sandbox> {
        let shell = ShellState::from_portable(shell)
            .map_err(|e| SandboxError::Invalid(format!("state blob: {e}")))?;
        let limits = options.limits;
        let sb = Sandbox::new(SandboxOptions {
            env: Vec::new(),
            files: Vec::new(),
            ..options
        });
        sb.with_inner(|i| {
            let mut vfs = i.vfs.lock();
            vfs.apply_delta(delta)
                .map_err(|e| SandboxError::Invalid(format!("state blob: {e}")))?;
            let u = vfs.usage();
            if u.bytes_used > limits.fs_bytes || u.files_used > limits.file_count {
                return Err(SandboxError::Invalid(format!(
                    "state blob: its files ({} bytes, {} files) do not fit its limits ({} bytes, {} files)",
                    u.bytes_used, u.files_used, limits.fs_bytes, limits.file_count
                )));
            }
            if !vfs.stat(&shell.cwd).is_ok_and(|m| m.is_dir()) {
                return Err(SandboxError::Invalid(
                    "state blob: its working directory is not a directory of its files".into(),
                ));
            }
            drop(vfs);
            i.shell = shell;
            Ok(())
        })?;
        Ok(sb)
    }

    /// Bytes and files the sandbox's filesystem uses.
    pub fn usage(&self) -> Result<wasmsand_vfs::Usage> {
        self.with_inner(|i| Ok(i.vfs.lock().usage()))
    }

    /// Starts `command` as a background process and returns at once. It runs on its own
    /// threads next to later runs, on the same files, with a copy of the shell state taken
    /// now (plus `opts.env` and `opts.cwd`), its own deadline (`opts.timeout_ms`, default
    /// the sandbox's `timeout_ms`), the per-program memory cap, and its output in two rings
    /// of `stdout_bytes` / `stderr_bytes`. At most `background_processes` are alive at once
    /// ([`ProcessError::LimitExceeded`] past it), and each holds one of the sandbox's
    /// `pids` slots ([`ProcessError::PidsExhausted`] when none is free); `destroy` (or
    /// dropping the sandbox) kills them and a fork does not inherit them.
    pub fn spawn(&self, command: &str, opts: SpawnOptions) -> Result<Process> {
        if self.destroyed.load(Ordering::SeqCst) {
            return Err(SandboxError::Destroyed);
        }
        let len = command.len() as u64;
        if len > self.limits.command_bytes {
            return Err(SandboxError::Invalid(format!(
                "command too long ({len} bytes, limit: {})",
                self.limits.command_bytes
            )));
        }
        for (name, _) in &opts.env {
            if !valid_name(name) {
                return Err(SandboxError::Invalid(format!(
                    "invalid variable name: {name:?}"
                )));
            }
        }
        let launch = self.with_inner(|i| {
            let mut shell = i.shell.clone();
            if let Some(cwd) = &opts.cwd {
                let p = Self::abs(i, cwd);
                if !i.vfs.lock().stat(&p)?.is_dir() {
                    return Err(SandboxError::Invalid(format!("cwd {p}: not a directory")));
                }
                shell.cwd = p;
            }
            for (name, value) in &opts.env {
                shell.vars.put(
                    name,
                    wasmsand_shell::Var {
                        value: wasmsand_shell::Value::Str(value.clone()),
                        attrs: wasmsand_shell::ATTR_EXPORT,
                    },
                );
            }
            Ok(self.launch(command, shell, i.vfs.clone(), opts.timeout_ms))
        })?;
        process::start(&self.procs, launch, opts)
    }

    fn launch(
        &self,
        command: &str,
        shell: ShellState,
        vfs: Arc<Mutex<Vfs>>,
        timeout_ms: Option<u64>,
    ) -> process::Launch {
        process::Launch {
            command: command.to_string(),
            shell,
            cfg_exec: self.exec,
            vfs,
            memory_limit: self.limits.memory_bytes,
            tool_channel: self.tool_channel(),
            timeout_ms: timeout_ms.unwrap_or(self.limits.timeout_ms),
            ring_bytes: [self.limits.stdout_bytes, self.limits.stderr_bytes],
            max_live: self.limits.background_processes,
            shared: self.shared.clone(),
        }
    }

    /// The background process `pid` (running, or ended and still kept).
    pub fn process(&self, pid: u32) -> Result<Process> {
        if self.destroyed.load(Ordering::SeqCst) {
            return Err(SandboxError::Destroyed);
        }
        Ok(self.procs.lock().get(pid)?)
    }

    /// Every background process still known, by pid.
    pub fn processes(&self) -> Result<Vec<ProcessInfo>> {
        if self.destroyed.load(Ordering::SeqCst) {
            return Err(SandboxError::Destroyed);
        }
        Ok(self.procs.lock().list())
    }
}

impl Drop for Sandbox {
    /// Background processes do not outlive their sandbox.
    fn drop(&mut self) {
        self.procs.lock().close();
    }
}

fn kind_of(t: FileType) -> FileKind {
    match t {
        FileType::Dir => FileKind::Dir,
        FileType::Symlink => FileKind::Symlink,
        FileType::File | FileType::CharDevice => FileKind::File,
    }
}

fn parent_of(p: &str) -> Option<String> {
    let t = p.trim_end_matches('/');
    let i = t.rfind('/')?;
    Some(if i == 0 {
        "/".into()
    } else {
        t[..i].to_string()
    })
}

/// Makes `ours`' exported variables those of `theirs` (see [`MergeOptions::env`]); the
/// names of those set or unset, sorted.
fn carry_env(ours: &mut ShellState, theirs: &ShellState) -> Vec<String> {
    let follows_cwd = |name: &str| matches!(name, "PWD" | "OLDPWD");
    let exported = |s: &ShellState| -> BTreeMap<String, wasmsand_shell::Var> {
        s.vars
            .iter()
            .filter(|(k, v)| v.has(wasmsand_shell::ATTR_EXPORT) && !follows_cwd(k))
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect()
    };
    let (mine, wanted) = (exported(ours), exported(theirs));
    let mut changed = Vec::new();
    for (name, var) in &wanted {
        let readonly = ours
            .vars
            .get(name)
            .is_some_and(|v| v.has(wasmsand_shell::ATTR_READONLY));
        let same = mine
            .get(name)
            .is_some_and(|m| m.attrs == var.attrs && m.value == var.value);
        if !same && !readonly {
            ours.vars.put(name, var.clone());
            changed.push(name.clone());
        }
    }
    for (name, var) in &mine {
        if wanted.contains_key(name) || var.has(wasmsand_shell::ATTR_READONLY) {
            continue;
        }
        // Unset in the fork, or kept there unexported (`export -n`).
        match theirs.vars.get(name) {
            Some(v) => ours.vars.put(name, v.clone()),
            None => {
                ours.vars.remove(name);
            }
        }
        changed.push(name.clone());
    }
    changed.sort();
    changed
}

fn valid_name(name: &str) -> bool {
    let mut c = name.chars();
    matches!(c.next(), Some(f) if f == '_' || f.is_ascii_alphabetic())
        && c.all(|x| x == '_' || x.is_ascii_alphanumeric())
}
