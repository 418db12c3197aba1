//! [`Machine`]: one guest, restored from its saved state, and what the host asks of it.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use base64::Engine as _;
use serde_json::{Map, Value, json};

use crate::accel::{self, Accel, AccelChoice};
use crate::agent::{AgentConn, AgentError, ok_or_failed};
use crate::image::{self, ImageError};
use crate::qemu::{self, Hardware, Qemu, Spawner, Start};
use crate::qmp::Qmp;
use crate::saved::{self, Boot, Saved};

/// The guest's memory when none is asked for, in MiB.
pub const DEFAULT_MEMORY_MB: u64 = 128;
/// The least memory Debian's cloud kernel boots in (with less it cannot even unpack itself).
pub const MIN_MEMORY_MB: u64 = 96;

const MIB: u64 = 1024 * 1024;
/// How long after a command's time limit the host waits for the agent's answer before it
/// restores the machine: the agent kills at the limit and answers within a fraction of a
/// second, even under emulation; a guest silent this long is wedged.
const HOST_GRACE: Duration = Duration::from_secs(10);
/// A restore (QEMU's start, the device state, the agent's thaw) that takes longer failed.
const RESTORE_TIMEOUT: Duration = Duration::from_secs(30);
/// The longest time limit a run keeps (a longer one is this).
const MAX_TIMEOUT: Duration = Duration::from_secs(365 * 24 * 3600);
/// One file chunk or status request.
const OP_TIMEOUT: Duration = Duration::from_secs(30);
/// Files move in chunks of this many bytes (one frame each).
const FILE_CHUNK: usize = 1 << 20;
/// The most stdin a run may be handed (it travels in the run's frame).
pub const MAX_STDIN: usize = 2 << 20;

/// How to start a machine.
#[derive(Debug, Clone)]
pub struct MachineConfig {
    /// The disk image (raw ext4; see the crate's docs). Never written.
    pub image: PathBuf,
    /// Guest memory in MiB (at least [`MIN_MEMORY_MB`]).
    pub memory_mb: u64,
    /// Virtual CPUs.
    pub cpus: u32,
    /// KVM, TCG, or KVM when its probe works.
    pub accel: AccelChoice,
    /// The QEMU binary.
    pub qemu: PathBuf,
    /// Where saved machines, boot files and the KVM verdict are kept (reused across
    /// processes).
    pub state_dir: PathBuf,
    /// Where running QEMUs keep their sockets and disk layers (short paths: Unix socket
    /// names are limited to 107 bytes).
    pub run_dir: PathBuf,
    /// How long a cold boot may take until the agent answers.
    pub boot_timeout: Duration,
}

impl MachineConfig {
    /// The defaults for `image`: [`DEFAULT_MEMORY_MB`], one CPU, KVM when it works.
    pub fn new(image: impl Into<PathBuf>) -> MachineConfig {
        MachineConfig {
            image: image.into(),
            memory_mb: DEFAULT_MEMORY_MB,
            cpus: 1,
            accel: AccelChoice::Auto,
            qemu: "qemu-system-x86_64".into(),
            state_dir: default_state_dir(),
            run_dir: std::env::temp_dir().join("wasmsand-vm"),
            boot_timeout: Duration::from_secs(120),
        }
    }
}

/// `$XDG_CACHE_HOME/wasmsand/vm`, else `~/.cache/wasmsand/vm`.
pub fn default_state_dir() -> PathBuf {
    std::env::var_os("XDG_CACHE_HOME")
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".cache")))
        .unwrap_or_else(|| PathBuf::from("/var/cache"))
        .join("wasmsand")
        .join("vm")
}

/// What went wrong.
#[derive(Debug, thiserror::Error)]
pub enum VmError {
    /// The disk image is missing, unreadable, not an image or truncated.
    #[error(transparent)]
    Image(#[from] ImageError),
    /// The configuration cannot work.
    #[error("{0}")]
    Config(String),
    /// The machine could not be booted or restored (the text carries QEMU's and the
    /// console's last lines).
    #[error("the machine could not start: {0}")]
    Start(String),
    /// The guest stopped answering (or powered off) during the request, and was restored to
    /// its saved state: what the request did is lost.
    #[error("{why}; the machine was reset to its pristine state")]
    Reset {
        /// What happened.
        why: String,
    },
    /// The guest refused (a file that does not exist, a full disk...).
    #[error("{message}")]
    Guest {
        /// The guest's message.
        message: String,
        /// The errno's name (`ENOENT`), when there is one.
        errno: Option<String>,
    },
    /// [`Machine::shutdown`] was called.
    #[error("the machine is shut down")]
    Shutdown,
}

/// How the machine came up.
#[derive(Debug, Clone)]
pub struct StartReport {
    /// KVM or TCG.
    pub accel: Accel,
    /// Why that acceleration (the KVM probe's verdict).
    pub accel_note: String,
    /// How long the cold boot took, when this start had to boot (no saved machine yet).
    pub cold_boot: Option<Duration>,
    /// How long the first restore took.
    pub restore: Duration,
    /// The saved machine's directory.
    pub saved_machine: PathBuf,
}

/// A machine's state, for `status`.
#[derive(Debug, Clone)]
pub struct Status {
    /// Whether the agent answered.
    pub ready: bool,
    /// KVM or TCG.
    pub accel: Accel,
    /// The guest's memory (what QEMU gives it).
    pub memory_limit_bytes: u64,
    /// Memory the guest uses (its `MemTotal - MemAvailable`).
    pub memory_used_bytes: u64,
    /// Since [`Machine::start`].
    pub uptime: Duration,
    /// Since the current guest was restored (the last reset).
    pub since_reset: Duration,
    /// Resets so far, asked for or forced.
    pub resets: u64,
}

/// An output stream of a run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Stream {
    /// Standard output.
    Stdout,
    /// Standard error.
    Stderr,
}

/// Cancels a run from another thread.
#[derive(Debug, Clone, Default)]
pub struct Cancel {
    cancelled: Arc<AtomicBool>,
    terminate: Arc<AtomicBool>,
}

impl Cancel {
    /// A token not yet cancelled.
    pub fn new() -> Cancel {
        Cancel::default()
    }
    /// Ends the run it is given to, as its deadline would.
    pub fn cancel(&self) {
        self.cancelled.store(true, Ordering::SeqCst);
    }
    /// Whether [`Cancel::cancel`] was called.
    pub fn is_cancelled(&self) -> bool {
        self.cancelled.load(Ordering::SeqCst)
    }
    /// Sends SIGTERM to every process of the run (once), so that its traps and handlers
    /// run before a [`Cancel::cancel`] kills what is left.
    pub fn terminate(&self) {
        self.terminate.store(true, Ordering::SeqCst);
    }
    fn wants_term(&self) -> bool {
        self.terminate.load(Ordering::SeqCst)
    }
}

/// One command.
#[derive(Debug, Clone)]
pub struct RunRequest<'a> {
    /// Run as `bash -c COMMAND` (root, in `/root` unless `cwd` says otherwise).
    pub command: &'a str,
    /// Wall-clock limit; past it every process of the run is killed.
    pub timeout: Duration,
    /// Bytes of stdout kept; the rest is dropped and the outcome says so.
    pub stdout_cap: usize,
    /// Bytes of stderr kept.
    pub stderr_cap: usize,
    /// Its standard input.
    pub stdin: &'a [u8],
    /// Its working directory.
    pub cwd: Option<&'a str>,
    /// Its whole environment, instead of the agent's default one.
    pub env: Option<&'a [(String, String)]>,
    /// Ends the run when cancelled.
    pub cancel: Option<&'a Cancel>,
}

impl<'a> RunRequest<'a> {
    /// `command` with `timeout`, 1 MiB of each output, no stdin.
    pub fn new(command: &'a str, timeout: Duration) -> RunRequest<'a> {
        RunRequest {
            command,
            timeout,
            stdout_cap: 1 << 20,
            stderr_cap: 1 << 20,
            stdin: &[],
            cwd: None,
            env: None,
            cancel: None,
        }
    }
}

/// How a run ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RunEnd {
    /// It exited (or was killed by a signal of its own doing).
    Exited,
    /// Its time limit passed; its processes were killed and the machine is usable.
    TimedOut,
    /// It was cancelled.
    Cancelled,
    /// The guest stopped answering or powered off; the machine was restored to its pristine
    /// state.
    Reset {
        /// What happened.
        why: String,
    },
}

/// What a run did.
#[derive(Debug, Clone)]
pub struct RunOutcome {
    /// How it ended.
    pub end: RunEnd,
    /// Its exit status (128 + the signal when killed by one); `None` when it did not end by
    /// itself.
    pub exit_code: Option<i32>,
    /// The signal that killed it, if one did.
    pub signal: Option<i32>,
    /// Whether stdout went past its cap.
    pub truncated_stdout: bool,
    /// Whether stderr went past its cap.
    pub truncated_stderr: bool,
    /// Whether the guest's OOM killer ended it (its memory share is the guest's memory less
    /// what the agent keeps).
    pub oom_killed: bool,
    /// Whether it met the guest's process limit (a fork bomb).
    pub pids_limited: bool,
    /// Wall-clock time.
    pub duration: Duration,
}

/// One running guest and the host's connections to it.
struct Instance {
    qemu: Qemu,
    qmp: Mutex<Qmp>,
    agent: AgentConn,
    restored: Instant,
    generation: u64,
}

impl Instance {
    /// What ended a guest that is gone.
    fn why_gone(&self, said: &str) -> String {
        // The port closes a moment before QEMU has exited.
        if !self.qemu.wait_exit(Duration::from_secs(2)) {
            said.to_string()
        } else {
            "the machine stopped (it powered off, rebooted or crashed)".to_string()
        }
    }

    fn stop(&self) {
        self.agent.close();
        if let Ok(mut q) = self.qmp.try_lock() {
            let _ = q.execute("quit", Value::Null);
        }
        self.qemu.kill();
    }
}

struct Current {
    instance: Option<Arc<Instance>>,
    generation: u64,
}

struct Inner {
    hw: Hardware,
    saved: Saved,
    spawner: Spawner,
    report: StartReport,
    current: Mutex<Current>,
    created: Instant,
    resets: AtomicU64,
    shut: AtomicBool,
}

/// A Linux machine under QEMU, restored from its saved state. Cheap to clone (the clones are
/// one machine); safe to use from several threads (runs may overlap; a reset waits for none
/// of them, and they end as [`RunEnd::Reset`]).
#[derive(Clone)]
pub struct Machine {
    inner: Arc<Inner>,
}

impl std::fmt::Debug for Machine {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Machine")
            .field("image", &self.inner.hw.image)
            .field("accel", &self.inner.hw.accel)
            .finish_non_exhaustive()
    }
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

impl Machine {
    /// Starts a machine: checks the image, decides KVM or TCG, boots and saves the machine
    /// if no saved one fits (once per image, memory and acceleration; other processes
    /// wait for that boot and then use it), and restores it.
    pub fn start(cfg: MachineConfig) -> Result<Machine, VmError> {
        if cfg.memory_mb < MIN_MEMORY_MB {
            return Err(VmError::Config(format!(
                "{} MB is too little memory for the machine: Debian's cloud kernel needs at \
                 least {MIN_MEMORY_MB} MB",
                cfg.memory_mb
            )));
        }
        if cfg.cpus == 0 {
            return Err(VmError::Config("a machine needs at least one CPU".into()));
        }
        image::check_image(&cfg.image)?;
        let state = &cfg.state_dir;
        std::fs::create_dir_all(state)
            .map_err(|e| VmError::Config(format!("{}: {e}", state.display())))?;
        let qemu_version = qemu::version(&cfg.qemu).map_err(VmError::Start)?;
        let image_id =
            saved::image_identity(&cfg.image).map_err(|source| ImageError::Unreadable {
                path: cfg.image.clone(),
                source,
            })?;
        let boot = Boot::at(state, &image_id);
        if !boot.present() {
            extract(&cfg.image, &boot)?;
        }
        let (mut accel, mut accel_note) =
            accel::decide(cfg.accel, &cfg.qemu, &boot.kernel, state).map_err(VmError::Config)?;
        let spawner = Spawner::new(cfg.run_dir.clone())
            .map_err(|e| VmError::Config(format!("{}: {e}", cfg.run_dir.display())))?;
        loop {
            let hw = Hardware {
                qemu: cfg.qemu.clone(),
                accel,
                memory_mb: cfg.memory_mb,
                cpus: cfg.cpus,
                kernel: boot.kernel.clone(),
                initrd: boot.initrd.clone(),
                image: cfg.image.clone(),
            };
            let saved = Saved::at(state, &image_id, &qemu_version, &hw.fingerprint());
            let attempt = (|| {
                let mut cold_boot = boot_and_save(&spawner, &hw, &saved, &image_id, &cfg)?;
                let t = Instant::now();
                let first = match restore(&spawner, &hw, &saved, 1) {
                    Ok(i) => i,
                    Err(e) if cold_boot.is_some() => return Err(e),
                    Err(_) => {
                        // A saved machine this QEMU no longer loads: boot a new one.
                        saved.remove();
                        cold_boot = boot_and_save(&spawner, &hw, &saved, &image_id, &cfg)?;
                        restore(&spawner, &hw, &saved, 1)?
                    }
                };
                Ok((first, cold_boot, t.elapsed()))
            })();
            match attempt {
                Ok((first, cold_boot, restore_took)) => {
                    saved::forget_older(state, &cfg.image, &image_id);
                    let report = StartReport {
                        accel,
                        accel_note,
                        cold_boot,
                        restore: restore_took,
                        saved_machine: saved.dir.clone(),
                    };
                    return Ok(Machine {
                        inner: Arc::new(Inner {
                            hw,
                            saved,
                            spawner,
                            report,
                            current: Mutex::new(Current {
                                instance: Some(Arc::new(first)),
                                generation: 1,
                            }),
                            created: Instant::now(),
                            resets: AtomicU64::new(0),
                            shut: AtomicBool::new(false),
                        }),
                    });
                }
                Err(e) if e.hung && accel == Accel::Kvm && cfg.accel == AccelChoice::Auto => {
                    // The probe passed but a real machine failed: TCG, for this host boot.
                    let why = format!("a KVM machine failed after the probe passed: {e}");
                    accel::forget_kvm(state, &why);
                    accel = Accel::Tcg;
                    accel_note = format!("TCG: {why}");
                }
                Err(e) => {
                    spawner.close();
                    return Err(VmError::Start(e.message));
                }
            }
        }
    }

    /// How the machine came up.
    pub fn report(&self) -> &StartReport {
        &self.inner.report
    }

    /// KVM or TCG.
    pub fn accel(&self) -> Accel {
        self.inner.hw.accel
    }

    /// The guest's memory in bytes.
    pub fn memory_limit_bytes(&self) -> u64 {
        self.inner.hw.memory_mb * MIB
    }

    fn instance(&self) -> Result<Arc<Instance>, VmError> {
        let mut cur = lock(&self.inner.current);
        if self.inner.shut.load(Ordering::SeqCst) {
            return Err(VmError::Shutdown);
        }
        if let Some(i) = &cur.instance {
            return Ok(i.clone());
        }
        let generation = cur.generation + 1;
        let i = Arc::new(
            restore(
                &self.inner.spawner,
                &self.inner.hw,
                &self.inner.saved,
                generation,
            )
            .map_err(|f| VmError::Start(f.message))?,
        );
        cur.generation = generation;
        cur.instance = Some(i.clone());
        Ok(i)
    }

    /// Replaces the guest `failed` (unless that already happened) by a restored one, and says
    /// why in the error every interrupted request returns.
    fn recover(&self, failed: &Instance, why: &str) -> VmError {
        let why = failed.why_gone(why);
        let mut cur = lock(&self.inner.current);
        if self.inner.shut.load(Ordering::SeqCst) {
            return VmError::Shutdown;
        }
        let same = cur
            .instance
            .as_ref()
            .is_some_and(|i| i.generation == failed.generation);
        if !same {
            return VmError::Reset { why };
        }
        if let Some(old) = cur.instance.take() {
            old.stop();
        }
        self.inner.resets.fetch_add(1, Ordering::Relaxed);
        let generation = cur.generation + 1;
        match restore(
            &self.inner.spawner,
            &self.inner.hw,
            &self.inner.saved,
            generation,
        ) {
            Ok(i) => {
                cur.generation = generation;
                cur.instance = Some(Arc::new(i));
                VmError::Reset { why }
            }
            // The next request tries again.
            Err(e) => VmError::Reset {
                why: format!("{why} (and its restore failed: {e})"),
            },
        }
    }

    fn agent_error(&self, inst: &Instance, e: AgentError, what: &str) -> VmError {
        match e {
            AgentError::Failed { message, errno } => VmError::Guest { message, errno },
            AgentError::Gone(why) => self.recover(inst, &why),
            AgentError::Timeout => self.recover(
                inst,
                &format!(
                    "the machine did not answer {what} within {} s",
                    OP_TIMEOUT.as_secs()
                ),
            ),
        }
    }

    /// Runs a command, handing its output to `on_output` as it comes.
    pub fn run(
        &self,
        req: &RunRequest<'_>,
        on_output: &mut dyn FnMut(Stream, &[u8]),
    ) -> Result<RunOutcome, VmError> {
        if req.stdin.len() > MAX_STDIN {
            return Err(VmError::Config(format!(
                "stdin of {} bytes is over the {MAX_STDIN} bytes a run may be handed",
                req.stdin.len()
            )));
        }
        let inst = self.instance()?;
        let started = Instant::now();
        let mut fields = Map::new();
        fields.insert("cmd".into(), req.command.into());
        fields.insert(
            "timeout_ms".into(),
            u64::try_from(req.timeout.min(MAX_TIMEOUT).as_millis())
                .unwrap_or(u64::MAX)
                .into(),
        );
        fields.insert("stdout_cap".into(), req.stdout_cap.into());
        fields.insert("stderr_cap".into(), req.stderr_cap.into());
        if !req.stdin.is_empty() {
            fields.insert("stdin".into(), b64(req.stdin).into());
        }
        if let Some(cwd) = req.cwd {
            fields.insert("cwd".into(), cwd.into());
        }
        if let Some(env) = req.env {
            let env: Map<String, Value> = env
                .iter()
                .map(|(k, v)| (k.clone(), Value::from(v.as_str())))
                .collect();
            fields.insert("env".into(), Value::Object(env));
        }
        let reset = |this: &Machine, why: &str| -> Result<RunOutcome, VmError> {
            match this.recover(&inst, why) {
                VmError::Reset { why } => Ok(RunOutcome {
                    end: RunEnd::Reset { why },
                    exit_code: None,
                    signal: None,
                    truncated_stdout: false,
                    truncated_stderr: false,
                    oom_killed: false,
                    pids_limited: false,
                    duration: started.elapsed(),
                }),
                other => Err(other),
            }
        };
        let call = match inst.agent.start("run", fields) {
            Ok(c) => c,
            Err(AgentError::Gone(why)) => return reset(self, &why),
            Err(e) => return Err(self.agent_error(&inst, e, "the run")),
        };
        // A limit of years is no limit; it must not overflow the clock either.
        let host_deadline = started + req.timeout.min(MAX_TIMEOUT) + HOST_GRACE;
        let mut cancel_deadline: Option<Instant> = None;
        let mut term_sent = false;
        let caps = [req.stdout_cap, req.stderr_cap];
        let mut kept = [0usize; 2];
        let mut truncated = [false; 2];
        loop {
            if !term_sent && req.cancel.is_some_and(Cancel::wants_term) {
                term_sent = true;
                let mut f = Map::new();
                f.insert("run".into(), call.id.into());
                f.insert("signal".into(), 15.into());
                if let Ok(c) = inst.agent.start("signal", f) {
                    drop(c);
                }
            }
            if cancel_deadline.is_none() && req.cancel.is_some_and(Cancel::is_cancelled) {
                let mut f = Map::new();
                f.insert("run".into(), call.id.into());
                // Its answer is of no interest: the run's own answer says `cancelled`.
                if let Ok(c) = inst.agent.start("cancel", f) {
                    drop(c);
                }
                cancel_deadline = Some(Instant::now() + HOST_GRACE);
            }
            let limit = cancel_deadline.map_or(host_deadline, |c| c.min(host_deadline));
            let now = Instant::now();
            if now >= limit {
                inst.agent.forget(&call);
                return reset(
                    self,
                    &format!(
                        "the machine did not answer within {} s of the command's end",
                        HOST_GRACE.as_secs()
                    ),
                );
            }
            let frame = match call.next((limit - now).min(Duration::from_millis(100))) {
                Ok(f) => f,
                Err(AgentError::Timeout) => continue,
                Err(AgentError::Gone(why)) => return reset(self, &why),
                Err(e) => return Err(self.agent_error(&inst, e, "the run")),
            };
            if frame.get("ev").is_some() {
                let which = match frame.get("fd").and_then(Value::as_u64) {
                    Some(2) => 1,
                    _ => 0,
                };
                let data = data_of(&frame);
                // The agent keeps to the caps; the host does not rely on it.
                let room = caps[which].saturating_sub(kept[which]);
                let take = data.len().min(room);
                if take < data.len() {
                    truncated[which] = true;
                }
                if take > 0 {
                    kept[which] += take;
                    on_output(
                        if which == 0 {
                            Stream::Stdout
                        } else {
                            Stream::Stderr
                        },
                        &data[..take],
                    );
                }
                continue;
            }
            let answer = ok_or_failed(frame).map_err(|e| self.agent_error(&inst, e, "the run"))?;
            let flag = |k: &str| answer.get(k).and_then(Value::as_bool).unwrap_or(false);
            let trunc = |k: &str| {
                answer
                    .get("truncated")
                    .and_then(|t| t.get(k))
                    .and_then(Value::as_bool)
                    .unwrap_or(false)
            };
            let end = if flag("timed_out") {
                RunEnd::TimedOut
            } else if flag("cancelled") {
                RunEnd::Cancelled
            } else {
                RunEnd::Exited
            };
            let code = |k: &str| {
                answer
                    .get(k)
                    .and_then(Value::as_i64)
                    .and_then(|c| i32::try_from(c).ok())
            };
            return Ok(RunOutcome {
                exit_code: if end == RunEnd::Exited {
                    code("exit_code")
                } else {
                    None
                },
                signal: code("signal"),
                end,
                truncated_stdout: truncated[0] || trunc("stdout"),
                truncated_stderr: truncated[1] || trunc("stderr"),
                oom_killed: flag("oom_kill"),
                pids_limited: flag("pids_max"),
                duration: started.elapsed(),
            });
        }
    }

    /// Writes a file (parents created), with permission bits `mode`.
    pub fn write_file(&self, path: &str, data: &[u8], mode: u32) -> Result<(), VmError> {
        self.put_file(path, data, mode, false).map(|_| ())
    }

    /// Writes a file, or with `append` adds to its end (parents created; `mode` for a new
    /// file, and for a rewritten one); answers the file's new size.
    pub fn put_file(
        &self,
        path: &str,
        data: &[u8],
        mode: u32,
        append: bool,
    ) -> Result<u64, VmError> {
        let inst = self.instance()?;
        let mut chunks: Vec<&[u8]> = data.chunks(FILE_CHUNK).collect();
        if chunks.is_empty() {
            chunks.push(&[]);
        }
        let mut size = 0;
        for (i, chunk) in chunks.into_iter().enumerate() {
            let mut f = Map::new();
            f.insert("path".into(), path.into());
            f.insert("data".into(), b64(chunk).into());
            f.insert("mode".into(), mode.into());
            f.insert("append".into(), (append || i > 0).into());
            let v = inst
                .agent
                .call("write", f, OP_TIMEOUT)
                .map_err(|e| self.agent_error(&inst, e, "a file write"))?;
            size = v.get("size").and_then(Value::as_u64).unwrap_or(0);
        }
        Ok(size)
    }

    /// One request to the agent and its answer (`what` names it in errors).
    pub(crate) fn call(
        &self,
        op: &str,
        fields: Map<String, Value>,
        what: &str,
    ) -> Result<Value, VmError> {
        let inst = self.instance()?;
        inst.agent
            .call(op, fields, OP_TIMEOUT)
            .map_err(|e| self.agent_error(&inst, e, what))
    }

    /// Reads a regular file, refusing one over `max_bytes`.
    pub fn read_file(&self, path: &str, max_bytes: u64) -> Result<Vec<u8>, VmError> {
        let inst = self.instance()?;
        let mut out = Vec::new();
        loop {
            let mut f = Map::new();
            f.insert("path".into(), path.into());
            f.insert("offset".into(), out.len().into());
            f.insert("length".into(), FILE_CHUNK.into());
            let v = inst
                .agent
                .call("read", f, OP_TIMEOUT)
                .map_err(|e| self.agent_error(&inst, e, "a file read"))?;
            let size = v.get("size").and_then(Value::as_u64).unwrap_or(0);
            if size > max_bytes {
                return Err(VmError::Guest {
                    message: format!("{path}: {size} bytes, over the {max_bytes} bytes allowed"),
                    errno: Some("EFBIG".into()),
                });
            }
            let data = data_of(&v);
            let eof = v.get("eof").and_then(Value::as_bool).unwrap_or(true);
            if data.is_empty() || out.len() as u64 + data.len() as u64 > max_bytes {
                if !data.is_empty() {
                    return Err(VmError::Guest {
                        message: format!("{path}: over the {max_bytes} bytes allowed"),
                        errno: Some("EFBIG".into()),
                    });
                }
                return Ok(out);
            }
            out.extend_from_slice(&data);
            if eof {
                return Ok(out);
            }
        }
    }

    /// Back to the pristine image: the guest is replaced by a restore of the saved machine.
    /// Runs still going end as [`RunEnd::Reset`].
    pub fn reset(&self) -> Result<(), VmError> {
        let mut cur = lock(&self.inner.current);
        if self.inner.shut.load(Ordering::SeqCst) {
            return Err(VmError::Shutdown);
        }
        if let Some(old) = cur.instance.take() {
            old.stop();
        }
        self.inner.resets.fetch_add(1, Ordering::Relaxed);
        let generation = cur.generation + 1;
        let i = restore(
            &self.inner.spawner,
            &self.inner.hw,
            &self.inner.saved,
            generation,
        )
        .map_err(|f| VmError::Start(f.message))?;
        cur.generation = generation;
        cur.instance = Some(Arc::new(i));
        Ok(())
    }

    /// Uptime, guest memory, limit, readiness and acceleration. A guest that does not answer
    /// is reported not ready (and is restored, as for any request).
    pub fn status(&self) -> Status {
        let mut st = Status {
            ready: false,
            accel: self.inner.hw.accel,
            memory_limit_bytes: self.memory_limit_bytes(),
            memory_used_bytes: 0,
            uptime: self.inner.created.elapsed(),
            since_reset: Duration::ZERO,
            resets: self.inner.resets.load(Ordering::Relaxed),
        };
        let Ok(inst) = self.instance() else {
            return st;
        };
        st.since_reset = inst.restored.elapsed();
        match inst.agent.call("status", Map::new(), OP_TIMEOUT) {
            Ok(v) => {
                let n = |k: &str| v.get(k).and_then(Value::as_u64).unwrap_or(0);
                st.ready = true;
                st.memory_used_bytes = n("mem_total").saturating_sub(n("mem_available"));
            }
            Err(e) => {
                let _ = self.agent_error(&inst, e, "status");
            }
        }
        st
    }

    /// Stops the machine; every later request answers [`VmError::Shutdown`].
    pub fn shutdown(&self) {
        self.inner.shutdown();
    }
}

impl Inner {
    fn shutdown(&self) {
        let mut cur = lock(&self.current);
        self.shut.store(true, Ordering::SeqCst);
        if let Some(old) = cur.instance.take() {
            old.stop();
        }
        self.spawner.close();
    }
}

impl Drop for Inner {
    fn drop(&mut self) {
        self.shutdown();
    }
}

/// Why a boot or a restore failed; `hung` when the guest went silent instead of failing (on
/// a host whose KVM does not work, that is how a KVM guest fails).
struct Failure {
    message: String,
    hung: bool,
}

impl From<String> for Failure {
    fn from(message: String) -> Failure {
        Failure {
            message,
            hung: false,
        }
    }
}

impl std::fmt::Display for Failure {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.message)
    }
}

/// The bytes of an agent frame's base64 `data` field (none when absent or not base64).
pub(crate) fn data_of(v: &Value) -> Vec<u8> {
    v.get("data")
        .and_then(Value::as_str)
        .and_then(|d| base64::engine::general_purpose::STANDARD.decode(d).ok())
        .unwrap_or_default()
}

fn b64(data: &[u8]) -> String {
    base64::engine::general_purpose::STANDARD.encode(data)
}

fn shell_quote(p: &Path) -> String {
    format!("'{}'", p.display().to_string().replace('\'', r"'\''"))
}

/// The image's kernel and initramfs into the state directory (under temporary names first:
/// another process may be reading the same files).
fn extract(image: &Path, boot: &Boot) -> Result<(), VmError> {
    let dir = boot
        .kernel
        .parent()
        .expect("boot files live in a directory");
    std::fs::create_dir_all(dir).map_err(|e| VmError::Config(format!("{}: {e}", dir.display())))?;
    let tag = format!("{}.tmp", std::process::id());
    let kernel = boot.kernel.with_extension(&tag);
    let initrd = boot.initrd.with_extension(&tag);
    image::extract_boot_files(image, &kernel, &initrd)?;
    for (from, to) in [(&kernel, &boot.kernel), (&initrd, &boot.initrd)] {
        std::fs::rename(from, to).map_err(|e| VmError::Config(format!("{}: {e}", to.display())))?;
    }
    Ok(())
}

/// Boots the machine and saves it, unless a saved one is there (or another process saves it
/// meanwhile: the lock orders them). `Some(duration)` when this call booted.
fn boot_and_save(
    spawner: &Spawner,
    hw: &Hardware,
    saved: &Saved,
    image_id: &str,
    cfg: &MachineConfig,
) -> Result<Option<Duration>, Failure> {
    if saved.complete() {
        return Ok(None);
    }
    let _lock = saved
        .lock()
        .map_err(|e| format!("{}: {e}", saved.dir.display()))?;
    if saved.complete() {
        return Ok(None);
    }
    let started = Instant::now();
    saved.remove();
    std::fs::create_dir_all(&saved.dir).map_err(|e| format!("{}: {e}", saved.dir.display()))?;
    let ram = saved.dir.join("ram.partial");
    let devices = saved.dir.join("devices.partial");
    let q = spawner.start(hw, Start::ColdBoot { ram: &ram })?;
    let fail = |q: &Qemu, what: String| format!("{what}{}", q.diagnostics());
    let deadline = started + cfg.boot_timeout;
    let mut alive = || q.alive();
    let agent = AgentConn::connect(&q.dir.join("agent.sock"), deadline, &mut alive)
        .map_err(|e| fail(&q, e))?;
    // One ping, answered once the agent is up: the host's bytes wait in the socket until the
    // guest opens its port.
    let ping = agent
        .start("ping", Map::new())
        .map_err(|e| fail(&q, format!("{e:?}")))?;
    loop {
        match ping.next(Duration::from_millis(200)) {
            Ok(v) => {
                ok_or_failed(v).map_err(|e| fail(&q, format!("the agent: {e:?}")))?;
                break;
            }
            Err(AgentError::Timeout) => {
                if !q.alive() {
                    return Err(fail(&q, "the machine stopped while booting".into()).into());
                }
                if Instant::now() >= deadline {
                    return Err(Failure {
                        message: fail(
                            &q,
                            format!(
                                "the agent did not answer within {} s of the boot",
                                cfg.boot_timeout.as_secs()
                            ),
                        ),
                        hung: true,
                    });
                }
            }
            Err(e) => {
                return Err(fail(&q, format!("the machine stopped while booting: {e:?}")).into());
            }
        }
    }
    agent
        .call("prepare", Map::new(), Duration::from_secs(60))
        .map_err(|e| fail(&q, format!("the agent could not prepare: {e:?}")))?;
    let mut qmp = Qmp::connect(
        &q.dir.join("qmp.sock"),
        Instant::now() + Duration::from_secs(10),
        &mut alive,
    )
    .map_err(|e| fail(&q, e))?;
    let save = (|| {
        qmp.execute("stop", Value::Null)?;
        qmp.execute(
            "migrate-set-capabilities",
            json!({ "capabilities": [{ "capability": "x-ignore-shared", "state": true }] }),
        )?;
        qmp.execute(
            "migrate",
            json!({ "uri": format!("exec:cat > {}", shell_quote(&devices)) }),
        )?;
        qmp.wait_migration(Instant::now() + Duration::from_secs(60))
    })();
    save.map_err(|e| fail(&q, format!("saving the machine: {e}")))?;
    let _ = qmp.execute("quit", Value::Null);
    q.wait_exit(Duration::from_secs(10));
    drop(agent);
    drop(q);
    std::fs::rename(&ram, saved.ram()).map_err(|e| e.to_string())?;
    std::fs::rename(&devices, saved.devices()).map_err(|e| e.to_string())?;
    let canonical = std::fs::canonicalize(&hw.image).unwrap_or_else(|_| hw.image.clone());
    saved
        .commit(&json!({
            "image": canonical.display().to_string(),
            "image_id": image_id,
            "accel": hw.accel.name(),
            "memory_mb": hw.memory_mb,
            "hardware": hw.fingerprint(),
            "boot_ms": started.elapsed().as_millis() as u64,
        }))
        .map_err(|e| format!("{}: {e}", saved.dir.display()))?;
    Ok(Some(started.elapsed()))
}

/// A new guest from the saved machine, thawed and ready.
fn restore(
    spawner: &Spawner,
    hw: &Hardware,
    saved: &Saved,
    generation: u64,
) -> Result<Instance, Failure> {
    let started = Instant::now();
    let deadline = started + RESTORE_TIMEOUT;
    let ram = saved.ram();
    let q = spawner.start(hw, Start::Restore { ram: &ram })?;
    let fail =
        |q: &Qemu, what: String| format!("restoring the saved machine: {what}{}", q.diagnostics());
    let mut alive = || q.alive();
    let mut qmp =
        Qmp::connect(&q.dir.join("qmp.sock"), deadline, &mut alive).map_err(|e| fail(&q, e))?;
    let load = (|| {
        qmp.execute(
            "migrate-set-capabilities",
            json!({ "capabilities": [{ "capability": "x-ignore-shared", "state": true }] }),
        )?;
        qmp.execute(
            "migrate-incoming",
            json!({ "uri": format!("exec:cat {}", shell_quote(&saved.devices())) }),
        )?;
        qmp.wait_migration(deadline)?;
        qmp.execute("cont", Value::Null)
    })();
    load.map_err(|e| fail(&q, e))?;
    let agent = AgentConn::connect(&q.dir.join("agent.sock"), deadline, &mut alive)
        .map_err(|e| fail(&q, e))?;
    let mut seed = [0u8; 32];
    getrandom::fill(&mut seed).map_err(|e| format!("no randomness for the guest: {e}"))?;
    let now_ns = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_nanos() as u64)
        .unwrap_or(0);
    let mut f = Map::new();
    f.insert("time_ns".into(), now_ns.into());
    f.insert("seed".into(), b64(&seed).into());
    f.insert("rw".into(), true.into());
    agent
        .call(
            "thaw",
            f,
            deadline.saturating_duration_since(Instant::now()),
        )
        .map_err(|e| Failure {
            hung: e == AgentError::Timeout,
            message: fail(&q, format!("the agent did not wake: {e:?}")),
        })?;
    Ok(Instance {
        qemu: q,
        qmp: Mutex::new(qmp),
        agent,
        restored: Instant::now(),
        generation,
    })
}
