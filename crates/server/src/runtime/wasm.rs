//! The `wasm` runtime: a box is one `wasmsand::Sandbox` in this process (a bash session on an
//! in-memory filesystem, every program WebAssembly).

use std::collections::BTreeMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use globset::GlobSet;
use serde_json::json;
use tokio::sync::watch;
use wasmsand::{ErrorClass, FileKind, RunOptions, Sandbox, SandboxOptions};

use super::{
    BoxSpec, Candidate, EgressLog, EndHint, ExecOutcome, ExecRequest, FilesError, FsEntry,
    FsFailure, FsOp, FsReply, Fut, ImageRef, MAX_WALK, OutputSink, ProvisionError, Runtime,
    SandboxBox, StopCause,
};
use crate::config::{Config, MIB};
use crate::error::ApiError;
use crate::images::{DEFAULT_IMAGE, Images};
use crate::logs::Stream;
use crate::views::{ImageInfo, RuntimeInfo};

/// The working directory of every wasm sandbox.
pub(crate) const WORKSPACE: &str = wasmsand::HOME;

pub(crate) struct WasmRuntime {
    config: Config,
    images: Arc<Images>,
}

impl WasmRuntime {
    pub(crate) fn new(config: &Config, images: Arc<Images>) -> WasmRuntime {
        WasmRuntime {
            config: config.clone(),
            images,
        }
    }
}

impl WasmRuntime {
    /// The network of a box with this allowlist (none: no network), reporting to `egress`.
    fn network(
        &self,
        allowlist: Option<wasmsand::egress::EgressPolicy>,
        egress: &EgressLog,
    ) -> Option<wasmsand::Network> {
        allowlist.map(|allowlist| wasmsand::Network {
            allowlist,
            resolve: self.config.egress_resolve.clone(),
            resolver: None,
            limits: wasmsand::NetLimits::default(),
            ca_pem: self.config.egress_ca_pem.iter().cloned().collect(),
            on_event: Some(egress.sink()),
        })
    }

    /// A new sandbox for `spec`, or (`payload`) one holding a saved state.
    async fn make_box(
        &self,
        spec: BoxSpec,
        payload: Option<Vec<u8>>,
    ) -> Result<Arc<dyn SandboxBox>, ProvisionError> {
        let egress = EgressLog::default();
        let network = self.network(spec.network, &egress);
        let mut opts = sandbox_options(
            &self.config,
            spec.memory_mb,
            spec.env.into_iter().collect(),
            network,
        );
        if let Some(l) = spec.limits {
            // Never past the server's own: what it allows any session stays the ceiling.
            let c = opts.limits;
            opts.limits = wasmsand::Limits {
                memory_bytes: l.memory_bytes.min(c.memory_bytes),
                fs_bytes: l.fs_bytes.min(c.fs_bytes),
                file_count: l.file_count.min(c.file_count),
                timeout_ms: l.timeout_ms,
                stdout_bytes: l.stdout_bytes.min(c.stdout_bytes),
                stderr_bytes: l.stderr_bytes.min(c.stderr_bytes),
                ..c
            };
        }
        let sb = tokio::task::spawn_blocking(move || match payload {
            None => Ok(Sandbox::new(opts)),
            Some(p) => Sandbox::from_payload(&p, opts).map_err(|e| e.to_string()),
        })
        .await
        .map_err(|e| ProvisionError::Failed(format!("cannot create the sandbox: {e}")))?
        .map_err(ProvisionError::Failed)?;
        let digest = self.images.digest().await;
        Ok(Arc::new(WasmBox {
            sb: Arc::new(sb),
            digest,
            egress,
        }) as Arc<dyn SandboxBox>)
    }
}

/// The descriptors a session's programs may hold together, in programs' worth
/// (`SANDBOX_ULIMIT_NOFILE` each): a pipeline of a few programs at their cap, not every
/// process the `pids` limit allows.
pub(crate) const SESSION_OPEN_FILES_FACTOR: u64 = 4;

/// The options of a service sandbox (a session's, a one-shot run's, an MCP session's).
pub(crate) fn sandbox_options(
    c: &Config,
    memory_mb: u64,
    env: Vec<(String, String)>,
    network: Option<wasmsand::Network>,
) -> SandboxOptions {
    SandboxOptions {
        limits: wasmsand::Limits {
            memory_bytes: memory_mb * MIB,
            fs_bytes: c.workspace_cap_mb * MIB,
            file_count: c.workspace_file_count,
            timeout_ms: c.default_exec_timeout_sec * 1000,
            // The stream callbacks only see what the run's own buffers keep: past the log
            // cap by one byte, so the log notices the overflow and says `truncated`.
            stdout_bytes: c.max_log_bytes.saturating_add(1),
            stderr_bytes: c.max_log_bytes.saturating_add(1),
            background_processes: c.max_processes_per_session,
            // A wasm sandbox has one user and no host processes: the pids cgroup and
            // RLIMIT_NPROC bound the same thing there, the processes of the session.
            pids: c.pids_limit.min(c.ulimit_nproc),
            open_files: c.ulimit_nofile,
            session_open_files: c.ulimit_nofile.saturating_mul(SESSION_OPEN_FILES_FACTOR),
            ..Default::default()
        },
        env,
        cache_dir: c.cache_dir.clone(),
        files: Vec::new(),
        network,
    }
}

impl Runtime for WasmRuntime {
    fn egress_supported(&self) -> bool {
        true
    }

    fn interactive_supported(&self) -> bool {
        true
    }

    fn name(&self) -> &'static str {
        "wasm"
    }

    fn version(&self) -> String {
        crate::RUNTIME_VERSION.into()
    }

    fn knows_image(&self, name: &str) -> bool {
        self.images.resolve(name).is_some()
    }

    fn image_names(&self) -> Vec<String> {
        self.images.known()
    }

    fn resolve_image(&self, name: &str) -> Result<ImageRef, ApiError> {
        let canonical = self.images.resolve(name).ok_or_else(|| {
            ApiError::invalid(format!(
                "unknown base_image '{name}' for runtime wasm; known images: {}",
                self.images.known().join(", ")
            ))
            .with_details(
                json!({ "base_image": name, "runtime": "wasm", "known": self.images.known() }),
            )
        })?;
        Ok(ImageRef {
            requested: name.to_string(),
            canonical: canonical.to_string(),
        })
    }

    fn default_image(&self) -> &'static str {
        DEFAULT_IMAGE
    }

    fn image_digest<'a>(&'a self, _image: &'a ImageRef) -> Fut<'a, String> {
        Box::pin(async move { self.images.digest().await })
    }

    fn normalize(&self, cpu: Option<f64>, memory_mb: Option<u64>) -> Result<(f64, u64), ApiError> {
        let max_mem = self.config.effective_max_mem_mb();
        check_cpu(&self.config, cpu, self.config.max_cpu)?;
        let mem = memory_mb.unwrap_or(wasmsand::Limits::default().memory_bytes / MIB);
        if mem == 0 || mem > max_mem {
            return Err(ApiError::invalid(format!(
                "resources.memory_mb must be in [1, {max_mem}]"
            ))
            .with_details(json!({ "max_mem_mb": max_mem })));
        }
        // Each program runs on one thread whatever is asked.
        Ok((1.0, mem))
    }

    fn check_available(&self) -> Fut<'_, Result<(), ApiError>> {
        Box::pin(async { Ok(()) })
    }

    fn create_box(&self, spec: BoxSpec) -> Fut<'_, Result<Arc<dyn SandboxBox>, ProvisionError>> {
        Box::pin(self.make_box(spec, None))
    }

    fn hibernates(&self) -> bool {
        true
    }

    fn revive(
        &self,
        payload: Vec<u8>,
        spec: BoxSpec,
    ) -> Fut<'_, Result<Arc<dyn SandboxBox>, ProvisionError>> {
        Box::pin(self.make_box(spec, Some(payload)))
    }

    fn fork_box<'a>(
        &'a self,
        from: &'a Arc<dyn SandboxBox>,
        spec: BoxSpec,
    ) -> Fut<'a, Result<Arc<dyn SandboxBox>, ProvisionError>> {
        Box::pin(async move {
            let sb = from
                .sandbox()
                .ok_or_else(|| ProvisionError::Failed("not a wasm box".into()))?;
            let fork = sb
                .fork()
                .map_err(|e| ProvisionError::Failed(e.to_string()))?;
            // The fork's egress decisions are its own run's, not its parent's.
            let egress = EgressLog::default();
            fork.set_network(self.network(spec.network, &egress));
            Ok(Arc::new(WasmBox {
                sb: Arc::new(fork),
                digest: self.images.digest().await,
                egress,
            }) as Arc<dyn SandboxBox>)
        })
    }

    fn describe(&self, base: RuntimeInfo) -> Fut<'_, RuntimeInfo> {
        Box::pin(async move {
            let c = &self.config;
            let digest = self.images.digest().await;
            RuntimeInfo {
                available: true,
                runtime_version: Some(self.version()),
                default: Some(c.default_runtime == "wasm"),
                max_cpu: c.max_cpu,
                max_mem_mb: c.effective_max_mem_mb(),
                images: Some(vec![ImageInfo {
                    name: DEFAULT_IMAGE.into(),
                    digest: digest.clone(),
                    aliases: self.images.aliases(),
                }]),
                default_images: vec![format!("{DEFAULT_IMAGE}@{digest}")],
                egress_allowlist_supported: true,
                notes: "WebAssembly sandboxes (wasmer): bash-like shell, coreutils, jq, python3; \
                        network only by an egress allowlist (`network_policy: allowlist`; curl \
                        and wget over http and https). Sessions hibernate: idle ones (SANDBOX_HIBERNATE_AFTER_SEC) \
                        and all at shutdown are written to the store, each is checkpointed after \
                        its runs, and a request wakes it on any replica sharing the store."
                    .into(),
                ..base
            }
        })
    }

    fn reap(&self) -> Fut<'_, ()> {
        Box::pin(async {})
    }
}

/// `cpu` within (0, max].
pub(crate) fn check_cpu(c: &Config, cpu: Option<f64>, max: f64) -> Result<(), ApiError> {
    if let Some(cpu) = cpu
        && (!cpu.is_finite() || cpu <= 0.0 || cpu > max)
    {
        return Err(
            ApiError::invalid(format!("resources.cpu must be in (0, {max}]"))
                .with_details(json!({ "max_cpu": max, "configured_max_cpu": c.max_cpu })),
        );
    }
    Ok(())
}

pub(crate) struct WasmBox {
    sb: Arc<Sandbox>,
    digest: String,
    egress: EgressLog,
}

fn absolute(path: &str) -> String {
    if path.starts_with('/') {
        path.to_string()
    } else {
        format!("{WORKSPACE}/{path}")
    }
}

impl SandboxBox for WasmBox {
    fn take_egress(&self) -> Vec<wasmsand::EgressEvent> {
        self.egress.take()
    }

    fn is_alive(&self) -> bool {
        !self.sb.is_destroyed()
    }

    fn image_digest(&self) -> String {
        self.digest.clone()
    }

    fn write_files(
        &self,
        dirs: Vec<String>,
        files: Vec<(String, Vec<u8>)>,
    ) -> Fut<'_, Result<(), FilesError>> {
        let sb = self.sb.clone();
        Box::pin(async move {
            tokio::task::spawn_blocking(move || commit(&sb, &dirs, &files))
                .await
                .map_err(|e| FilesError::Gone(e.to_string()))?
        })
    }

    fn is_dir<'a>(&'a self, cwd: &'a str) -> Fut<'a, bool> {
        let sb = self.sb.clone();
        let abs = absolute(cwd);
        Box::pin(async move {
            tokio::task::spawn_blocking(move || {
                sb.stat(&abs).is_ok_and(|i| i.kind == FileKind::Dir)
            })
            .await
            .unwrap_or(false)
        })
    }

    fn run(
        &self,
        req: ExecRequest,
        out: OutputSink,
        stop: watch::Receiver<StopCause>,
    ) -> Fut<'_, Result<ExecOutcome, String>> {
        let sb = self.sb.clone();
        Box::pin(async move {
            let (line, restore) = command_script(&sb, &req).await;
            let done = Arc::new(AtomicBool::new(false));
            let stopper = tokio::spawn(stop_when_asked(
                sb.clone(),
                stop.clone(),
                req.grace,
                done.clone(),
            ));
            let (o, e) = (out.clone(), out);
            let mut opts = RunOptions {
                timeout_ms: Some(req.timeout.as_millis() as u64),
                on_stdout: Some(Arc::new(move |b: &[u8]| o(Stream::Stdout, b))),
                on_stderr: Some(Arc::new(move |b: &[u8]| e(Stream::Stderr, b))),
                stdin: req.stdin.map(bytes::Bytes::from),
                // The run's log is the service's output (with its own cap); a spill file
                // would appear in the user's workspace unasked.
                truncation: wasmsand::Truncation::Plain,
                ..RunOptions::default()
            };
            if let Some(feed) = req.stdin_feed {
                opts.stdin_stream = Some(feed_stdin(feed));
            }
            let sb2 = sb.clone();
            let result = tokio::task::spawn_blocking(move || sb2.run_with(&line, opts)).await;
            done.store(true, Ordering::SeqCst);
            stopper.abort();
            if !restore.is_empty() {
                let sb3 = sb.clone();
                let _ = tokio::task::spawn_blocking(move || sb3.run(&restore.join("\n"))).await;
            }
            let r = match result {
                Ok(Ok(r)) => r,
                Ok(Err(err)) => return Err(err.to_string()),
                Err(err) => return Err(format!("the run panicked: {err}")),
            };
            let stopped = *stop.borrow() != StopCause::None;
            let end = match r.error_class {
                _ if stopped => EndHint::Stopped,
                Some(ErrorClass::Timeout) => EndHint::Timeout,
                Some(ErrorClass::LimitExceeded)
                    if r.usage.limits_hit.iter().any(|h| h == "pids") =>
                {
                    EndHint::PidsLimit
                }
                Some(ErrorClass::LimitExceeded) => EndHint::LimitExceeded(
                    r.stderr
                        .lines()
                        .last()
                        .unwrap_or("a resource limit was exceeded")
                        .to_string(),
                ),
                Some(ErrorClass::Cancelled) => EndHint::SessionDestroyed,
                _ if r.exit_code == 137 && r.stderr.contains("out of memory") => EndHint::OomKilled,
                _ => EndHint::Exited,
            };
            Ok(ExecOutcome {
                exit_code: r.exit_code,
                end,
                // The guest programs' own CPU time, and the largest linear memory any of
                // them had: the sandbox's closest measure of a process's resident set.
                cpu_time_sec: Some(r.usage.cpu_us as f64 / 1e6),
                peak_rss_mb: Some(r.usage.peak_memory_bytes as f64 / (1024.0 * 1024.0)),
                network: (r.usage.net_requests, r.usage.net_bytes),
            })
        })
    }

    fn candidates<'a>(&'a self, set: &'a GlobSet) -> Fut<'a, (Vec<Candidate>, bool)> {
        let sb = self.sb.clone();
        let set = set.clone();
        Box::pin(async move {
            tokio::task::spawn_blocking(move || walk(&sb, &set))
                .await
                .unwrap_or_default()
        })
    }

    fn read(&self, paths: Vec<String>, cap: u64) -> Fut<'_, Vec<(String, Vec<u8>)>> {
        let sb = self.sb.clone();
        Box::pin(async move {
            tokio::task::spawn_blocking(move || {
                let mut out = Vec::new();
                let mut total = 0u64;
                for p in paths {
                    let Ok(data) = sb.read_file(&format!("{WORKSPACE}/{p}")) else {
                        continue;
                    };
                    total += data.len() as u64;
                    if total > cap {
                        break;
                    }
                    out.push((p, data.to_vec()));
                }
                out
            })
            .await
            .unwrap_or_default()
        })
    }

    fn fs(&self, op: FsOp) -> Fut<'_, Result<FsReply, FsFailure>> {
        let sb = self.sb.clone();
        Box::pin(async move {
            tokio::task::spawn_blocking(move || fs_op(&sb, op))
                .await
                .unwrap_or_else(|e| Err(FsFailure::Gone(format!("the operation panicked: {e}"))))
        })
    }

    fn destroy(&self) -> Fut<'_, ()> {
        let sb = self.sb.clone();
        // `destroy` waits for the run going on in it to stop: not on an async thread.
        Box::pin(async move {
            let _ = tokio::task::spawn_blocking(move || sb.destroy()).await;
        })
    }

    fn sandbox(&self) -> Option<&Arc<Sandbox>> {
        Some(&self.sb)
    }
}

/// The run's stdin as a pipe fed from `feed` by a thread of its own (a write blocks while
/// the program does not read). The thread ends when the feed closes (the client closed
/// stdin, a limit did, or the run ended) or when nothing reads the pipe any more: the run
/// ended, or was cancelled or timed out (the stream takes the run's token when the run has
/// none of its own, so those wake a blocked write).
fn feed_stdin(mut feed: super::StdinFeed) -> wasmsand::StdinStream {
    let (writer, stream) = wasmsand::stdin_stream(&wasmsand::CancelToken::new());
    tokio::task::spawn_blocking(move || {
        while let Some(chunk) = feed.blocking_recv() {
            if writer.write_all(&chunk).is_err() {
                break;
            }
        }
    });
    stream
}

/// TERM once the run is asked to stop (its trap runs), then cancel after the grace. The
/// command may not have started yet when the stop comes: TERM is retried until it lands.
async fn stop_when_asked(
    sb: Arc<Sandbox>,
    mut stop: watch::Receiver<StopCause>,
    grace: Duration,
    done: Arc<AtomicBool>,
) {
    let _ = stop.wait_for(|c| *c != StopCause::None).await;
    let grace = stop.borrow().grace(grace);
    let deadline = tokio::time::Instant::now() + grace;
    let mut term_sent = false;
    while !done.load(Ordering::SeqCst) {
        if !term_sent {
            term_sent = sb.signal_term();
        }
        if term_sent && tokio::time::Instant::now() >= deadline {
            sb.cancel();
        }
        let pause = if term_sent {
            deadline
                .saturating_duration_since(tokio::time::Instant::now())
                .clamp(Duration::from_millis(20), Duration::from_millis(200))
        } else {
            Duration::from_millis(2)
        };
        tokio::time::sleep(pause).await;
    }
}

/// The shell script of the run (its env, cwd and command), and the script that gives a
/// session its previous env and cwd back afterwards: per-run values are the run's only.
async fn command_script(sb: &Arc<Sandbox>, req: &ExecRequest) -> (String, Vec<String>) {
    let mut line = String::new();
    let mut restore = Vec::new();
    if req.in_session && (!req.env.is_empty() || req.cwd.is_some()) {
        let sb = sb.clone();
        let names: Vec<String> = req.env.keys().cloned().collect();
        let saved = tokio::task::spawn_blocking(move || {
            let cwd = sb.cwd().unwrap_or_else(|_| WORKSPACE.to_string());
            let vars: Vec<(String, Option<String>)> = names
                .into_iter()
                .map(|n| {
                    let v = sb.get_env(&n).ok().flatten();
                    (n, v)
                })
                .collect();
            (cwd, vars)
        })
        .await
        .unwrap_or_default();
        restore.push(format!("cd {}", shell_quote(&saved.0)));
        for (name, value) in saved.1 {
            restore.push(match value {
                Some(v) => format!("export {name}={}", shell_quote(&v)),
                None => format!("unset {name}"),
            });
        }
    }
    line.push_str(&run_line(&req.env, req.cwd.as_deref(), &req.command));
    (line, restore)
}

/// What the sandbox's shell is given to run: the run's `env` exported, its `cwd` entered,
/// then its command.
pub fn run_line(env: &BTreeMap<String, String>, cwd: Option<&str>, argv: &[String]) -> String {
    let mut line = String::new();
    for (k, v) in env {
        line.push_str(&format!("export {k}={}\n", shell_quote(v)));
    }
    if let Some(cwd) = cwd {
        line.push_str(&format!("cd {} || exit 1\n", shell_quote(&absolute(cwd))));
    }
    line.push_str(&command_line(argv));
    line
}

/// Largest shell line a run may give the sandbox: the engine's `command_bytes`, which the
/// service's sandboxes keep at its default. A longer one would fail the run after admission,
/// so requests are held to it up front.
pub fn max_command_bytes() -> u64 {
    wasmsand::Limits::default().command_bytes
}

/// Files and symlinks under the workspace that `set` matches; true when the walk was cut.
fn walk(sb: &Sandbox, set: &GlobSet) -> (Vec<Candidate>, bool) {
    let mut out = Vec::new();
    let mut stack = vec![String::new()];
    let mut seen = 0usize;
    while let Some(rel) = stack.pop() {
        let abs = if rel.is_empty() {
            WORKSPACE.to_string()
        } else {
            format!("{WORKSPACE}/{rel}")
        };
        let Ok(list) = sb.list(&abs) else { continue };
        for e in list {
            seen += 1;
            if seen > MAX_WALK {
                return (out, true);
            }
            let path = if rel.is_empty() {
                e.name.clone()
            } else {
                format!("{rel}/{}", e.name)
            };
            match e.kind {
                FileKind::Dir => stack.push(path),
                _ if !set.is_match(&path) => {}
                kind => out.push(Candidate {
                    path,
                    symlink: kind == FileKind::Symlink,
                    size: if kind == FileKind::Symlink { 0 } else { e.size },
                }),
            }
        }
    }
    (out, false)
}

/// A path of the session file API in the sandbox: relative ones are under the workspace
/// (never the shell's cwd, which a run may have changed).
fn in_workspace(path: &str) -> String {
    if path.starts_with('/') {
        path.to_string()
    } else {
        format!("{WORKSPACE}/{path}")
    }
}

fn fs_entry(info: wasmsand::FileInfo) -> FsEntry {
    FsEntry {
        name: info.name,
        kind: match info.kind {
            FileKind::File => "file",
            FileKind::Dir => "dir",
            FileKind::Symlink => "symlink",
        },
        size: info.size,
    }
}

fn fs_op(sb: &Sandbox, op: FsOp) -> Result<FsReply, FsFailure> {
    let fail = |e: wasmsand::SandboxError| match e.errno() {
        Some(errno) => FsFailure::Errno {
            errno: errno.name().to_string(),
            message: e.to_string(),
        },
        None => FsFailure::Gone(e.to_string()),
    };
    Ok(match op {
        FsOp::List(p) => FsReply::Entries(
            sb.list(&in_workspace(&p))
                .map_err(fail)?
                .into_iter()
                .map(fs_entry)
                .collect(),
        ),
        FsOp::Stat(p) => FsReply::Entry(fs_entry(sb.stat(&in_workspace(&p)).map_err(fail)?)),
        FsOp::Read {
            path,
            offset,
            length,
        } => {
            // The file's bytes are shared, not copied: only the range leaves.
            let data = sb.read_file(&in_workspace(&path)).map_err(fail)?;
            let size = data.len() as u64;
            let start = offset.min(size);
            let end = start.saturating_add(length).min(size);
            FsReply::Data(data.slice(start as usize..end as usize), size)
        }
        FsOp::Write { path, data, append } => {
            let p = in_workspace(&path);
            if append {
                sb.append_file(&p, &data).map_err(fail)?;
            } else {
                sb.write_file(&p, &data).map_err(fail)?;
            }
            FsReply::Size(sb.stat(&p).map_err(fail)?.size)
        }
        FsOp::Mkdir(p) => {
            let p = in_workspace(&p);
            let existed = matches!(sb.stat(&p), Ok(i) if i.kind == FileKind::Dir);
            if !existed {
                sb.mkdir(&p).map_err(fail)?;
            }
            FsReply::Created(!existed)
        }
        FsOp::Rename { from, to } => {
            sb.rename(&in_workspace(&from), &in_workspace(&to))
                .map_err(fail)?;
            FsReply::Done
        }
        FsOp::Remove { path, recursive } => {
            sb.remove(&in_workspace(&path), recursive).map_err(fail)?;
            FsReply::Done
        }
    })
}

/// Writes staged files into the workspace, all or nothing.
fn commit(sb: &Sandbox, dirs: &[String], files: &[(String, Vec<u8>)]) -> Result<(), FilesError> {
    let snap = sb.snapshot().map_err(|e| FilesError::Gone(e.to_string()))?;
    let result = (|| -> Result<(), wasmsand::SandboxError> {
        for d in dirs {
            sb.mkdir(&format!("{WORKSPACE}/{d}"))?;
        }
        for (p, data) in files {
            sb.write_file(&format!("{WORKSPACE}/{p}"), data)?;
        }
        Ok(())
    })();
    match result {
        Ok(()) => Ok(()),
        Err(e) => {
            let _ = sb.restore(snap);
            Err(match e.errno() {
                Some(wasmsand::Errno::ENOSPC) => FilesError::WorkspaceFull(format!(
                    "the upload does not fit in the workspace: {e}"
                )),
                _ => FilesError::Conflict(format!("cannot write the upload: {e}")),
            })
        }
    }
}

/// Quotes a word for the shell: inside single quotes nothing is special.
pub fn shell_quote(s: &str) -> String {
    if !s.is_empty()
        && s.bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"-_./=:,+@%".contains(&b))
    {
        return s.to_string();
    }
    format!("'{}'", s.replace('\'', "'\\''"))
}

/// The shell line of an argv. `bash -c SCRIPT [NAME [ARGS...]]` (or `sh`) runs SCRIPT as the
/// run's own script, so its traps (`trap ... TERM`) are the run's; anything else is run as one
/// command with every word quoted, so nothing in it is parsed by the shell.
pub fn command_line(argv: &[String]) -> String {
    let prog = argv[0].rsplit('/').next().unwrap_or("");
    if matches!(prog, "bash" | "sh") && argv.len() >= 3 && argv[1] == "-c" {
        let script = &argv[2];
        if argv.len() > 4 {
            let args: Vec<String> = argv[4..].iter().map(|a| shell_quote(a)).collect();
            return format!("set -- {}\n{script}", args.join(" "));
        }
        return script.clone();
    }
    argv.iter()
        .map(|a| shell_quote(a))
        .collect::<Vec<_>>()
        .join(" ")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn argv(words: &[&str]) -> Vec<String> {
        words.iter().map(|w| w.to_string()).collect()
    }

    #[test]
    fn words_are_quoted_so_the_shell_parses_nothing() {
        assert_eq!(shell_quote("plain-word_1.txt"), "plain-word_1.txt");
        assert_eq!(shell_quote(""), "''");
        assert_eq!(shell_quote("a b"), "'a b'");
        assert_eq!(shell_quote("it's"), "'it'\\''s'");
        assert_eq!(shell_quote("$(rm -rf /)"), "'$(rm -rf /)'");
        assert_eq!(
            command_line(&argv(&["echo", "$HOME", "*", "a;b"])),
            "echo '$HOME' '*' 'a;b'"
        );
    }

    #[test]
    fn bash_c_runs_its_script_with_positional_arguments() {
        assert_eq!(command_line(&argv(&["bash", "-c", "echo $1"])), "echo $1");
        assert_eq!(
            command_line(&argv(&["/bin/sh", "-c", "echo $1 $2", "name", "x y", "z"])),
            "set -- 'x y' z\necho $1 $2"
        );
        // Other flags or programs are plain argv.
        assert_eq!(
            command_line(&argv(&["bash", "-x", "script.sh"])),
            "bash -x script.sh"
        );
        assert_eq!(command_line(&argv(&["bash", "-c"])), "bash -c");
    }
}
