//! The `vm` runtime: a box is one whole Linux machine under QEMU (wasmsand-vm), restored
//! from the saved machine of a disk image `sandboxd images build vm` makes. The strongest
//! isolation this service offers (a kernel of its own per box); seed 003's `firecracker` asks
//! for that class, and this is its engine here (see `named` in the parent module).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};

use axum::http::StatusCode;
use globset::GlobSet;
use serde_json::json;
use sha2::{Digest, Sha256};
use tokio::sync::watch;
use wasmsand_vm::{AccelChoice, Cancel, Machine, MachineConfig, RunEnd, RunRequest, VmError};

use super::{
    BoxSpec, Candidate, EndHint, ExecOutcome, ExecRequest, FilesError, FsEntry, FsFailure, FsOp,
    FsReply, Fut, ImageRef, MAX_WALK, OutputSink, ProvisionError, Runtime, SandboxBox, StopCause,
};
use crate::config::Config;
use crate::error::{ApiError, ErrorCode};
use crate::logs::Stream;
use crate::views::{ImageInfo, RuntimeInfo};

/// The image name of this runtime (its only one: the disk image configured).
pub(crate) const VM_IMAGE: &str = "wasmsand/vm:current";
const ALIASES: &[&str] = &["wasmsand/vm", "vm"];

/// The working directory of every machine's runs, made at its start.
pub(crate) const WORKSPACE: &str = "/workspace";

pub(crate) struct VmRuntime {
    config: Config,
    /// The disk image: configured, else the default build's when it exists.
    image: Option<PathBuf>,
    /// Machines held now (sessions and one-shot runs).
    live: Arc<AtomicUsize>,
    /// `sha256:` of the image file, computed once.
    digest: tokio::sync::OnceCell<String>,
    /// The first machine's acceleration and why (the KVM probe's verdict).
    accel: parking_lot::Mutex<Option<(String, String)>>,
    qemu_version: std::sync::OnceLock<Result<String, String>>,
}

/// A slot of `SANDBOX_VM_MAX_MACHINES`, given back when dropped.
struct Slot(Arc<AtomicUsize>);

impl Drop for Slot {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::SeqCst);
    }
}

impl VmRuntime {
    pub(crate) fn new(config: &Config) -> VmRuntime {
        let image = config.vm.image.clone().or_else(|| {
            let built = wasmsand_vm::images::Recipe::default()
                .image_path(&wasmsand_vm::images::default_cache_dir());
            built.is_file().then_some(built)
        });
        VmRuntime {
            config: config.clone(),
            image,
            live: Arc::default(),
            digest: tokio::sync::OnceCell::new(),
            accel: parking_lot::Mutex::new(None),
            qemu_version: std::sync::OnceLock::new(),
        }
    }

    fn qemu_version(&self) -> Result<String, String> {
        self.qemu_version
            .get_or_init(|| wasmsand_vm::qemu_version(Path::new(&self.config.vm.qemu)))
            .clone()
    }

    /// Why no machine can be made now, if so.
    fn status(&self) -> Result<&Path, String> {
        if !self.config.vm.enabled {
            return Err("the vm runtime is turned off (SANDBOX_VM_ENABLED=false)".into());
        }
        let image = self.image.as_deref().ok_or(
            "no disk image: build one with `sandboxd images build vm`, or name one with \
             SANDBOX_VM_IMAGE",
        )?;
        wasmsand_vm::check_image(image).map_err(|e| e.to_string())?;
        self.qemu_version()?;
        Ok(image)
    }

    fn unavailable(&self, reason: &str) -> ApiError {
        ApiError::new(
            StatusCode::SERVICE_UNAVAILABLE,
            ErrorCode::RuntimeUnavailable,
            "Requested runtime 'vm' is not available",
        )
        .with_details(json!({
            "runtime": "vm", "available": false, "reason": reason, "suggested": ["wasm", "docker"],
        }))
    }

    fn machine_config(&self, image: &Path, memory_mb: u64) -> MachineConfig {
        let v = &self.config.vm;
        let mut cfg = MachineConfig::new(image);
        cfg.memory_mb = memory_mb;
        cfg.qemu = PathBuf::from(&v.qemu);
        cfg.accel = match v.accel.as_str() {
            "kvm" => AccelChoice::Kvm,
            "tcg" => AccelChoice::Tcg,
            _ => AccelChoice::Auto,
        };
        if let Some(dir) = &v.state_dir {
            cfg.state_dir = dir.clone();
        }
        cfg
    }

    /// A machine of `memory_mb` (booted and saved first when no saved one fits), its
    /// workspace made.
    async fn start(&self, memory_mb: u64) -> Result<(Machine, Slot), ProvisionError> {
        let image = self
            .status()
            .map_err(ProvisionError::Unavailable)?
            .to_path_buf();
        let max = self.config.vm.max_machines;
        if self.live.fetch_add(1, Ordering::SeqCst) >= max {
            self.live.fetch_sub(1, Ordering::SeqCst);
            return Err(ProvisionError::Unavailable(format!(
                "the vm runtime holds its maximum of {max} machines (SANDBOX_VM_MAX_MACHINES)"
            )));
        }
        let slot = Slot(self.live.clone());
        let cfg = self.machine_config(&image, memory_mb);
        let made = tokio::task::spawn_blocking(move || {
            let m = Machine::start(cfg)?;
            m.mkdir(WORKSPACE)?;
            Ok::<_, VmError>(m)
        })
        .await
        .map_err(|e| ProvisionError::Failed(format!("the machine's start panicked: {e}")))?;
        let m = made.map_err(|e| ProvisionError::Failed(e.to_string()))?;
        let r = m.report();
        *self.accel.lock() = Some((r.accel.name().to_string(), r.accel_note.clone()));
        Ok((m, slot))
    }

    async fn image_sha256(&self) -> String {
        let Some(image) = self.image.clone() else {
            return String::new();
        };
        self.digest
            .get_or_init(|| async move {
                tokio::task::spawn_blocking(move || file_sha256(&image))
                    .await
                    .ok()
                    .flatten()
                    .unwrap_or_default()
            })
            .await
            .clone()
    }
}

fn file_sha256(path: &Path) -> Option<String> {
    use std::io::Read;
    let mut f = std::fs::File::open(path).ok()?;
    let mut h = Sha256::new();
    let mut buf = vec![0u8; 1 << 20];
    loop {
        let n = f.read(&mut buf).ok()?;
        if n == 0 {
            break;
        }
        h.update(&buf[..n]);
    }
    Some(format!("sha256:{}", hex::encode(h.finalize())))
}

impl Runtime for VmRuntime {
    fn name(&self) -> &'static str {
        "vm"
    }

    fn version(&self) -> String {
        self.qemu_version().unwrap_or_else(|_| "unknown".into())
    }

    fn knows_image(&self, name: &str) -> bool {
        name == VM_IMAGE || ALIASES.contains(&name)
    }

    fn image_names(&self) -> Vec<String> {
        let mut v = vec![VM_IMAGE.to_string()];
        v.extend(ALIASES.iter().map(|a| a.to_string()));
        v
    }

    fn resolve_image(&self, name: &str) -> Result<ImageRef, ApiError> {
        if !self.knows_image(name) {
            return Err(ApiError::invalid(format!(
                "unknown base_image '{name}' for runtime vm; known images: {}",
                self.image_names().join(", ")
            ))
            .with_details(
                json!({ "base_image": name, "runtime": "vm", "known": self.image_names() }),
            ));
        }
        Ok(ImageRef {
            requested: name.to_string(),
            canonical: VM_IMAGE.to_string(),
        })
    }

    fn default_image(&self) -> &'static str {
        VM_IMAGE
    }

    fn image_digest<'a>(&'a self, _image: &'a ImageRef) -> Fut<'a, String> {
        Box::pin(self.image_sha256())
    }

    fn normalize(&self, cpu: Option<f64>, memory_mb: Option<u64>) -> Result<(f64, u64), ApiError> {
        // One virtual CPU: each machine shape is booted and saved once, and a second vCPU
        // under emulation buys nothing on this kind of host.
        super::wasm::check_cpu(&self.config, cpu, self.config.max_cpu.min(1.0))?;
        let (min, max) = (wasmsand_vm::MIN_MEMORY_MB, self.config.max_mem_mb);
        let mem = memory_mb.unwrap_or(self.config.vm.default_mem_mb);
        if !(min..=max).contains(&mem) {
            return Err(ApiError::invalid(format!(
                "resources.memory_mb must be in [{min}, {max}] for runtime vm (the guest's memory)"
            ))
            .with_details(json!({ "max_mem_mb": max, "min_mem_mb": min })));
        }
        Ok((cpu.unwrap_or(1.0), mem))
    }

    fn check_available(&self) -> Fut<'_, Result<(), ApiError>> {
        Box::pin(async move { self.status().map(|_| ()).map_err(|r| self.unavailable(&r)) })
    }

    fn create_box(&self, spec: BoxSpec) -> Fut<'_, Result<Arc<dyn SandboxBox>, ProvisionError>> {
        Box::pin(async move {
            let digest = self.image_sha256().await;
            let (machine, slot) = self.start(spec.memory_mb).await?;
            Ok(Arc::new(VmBox {
                machine,
                digest,
                env: spec.env,
                log_cap: self.config.max_log_bytes,
                alive: AtomicBool::new(true),
                slot: parking_lot::Mutex::new(Some(slot)),
            }) as Arc<dyn SandboxBox>)
        })
    }

    fn describe(&self, base: RuntimeInfo) -> Fut<'_, RuntimeInfo> {
        Box::pin(async move {
            let status = self.status().map(Path::to_path_buf);
            let accel = self.accel.lock().clone();
            let mut images = Vec::new();
            let mut default_images = Vec::new();
            let notes = match &status {
                Ok(image) => {
                    let digest = self.image_sha256().await;
                    default_images.push(format!("{VM_IMAGE}@{digest}"));
                    images.push(ImageInfo {
                        name: VM_IMAGE.into(),
                        digest,
                        aliases: ALIASES.iter().map(|a| a.to_string()).collect(),
                    });
                    let how = match &accel {
                        Some((a, why)) => format!("under {a} ({why})"),
                        None => format!(
                            "acceleration {} (decided at the first machine's start: KVM when \
                             a short probe boot works, else TCG)",
                            self.config.vm.accel
                        ),
                    };
                    format!(
                        "Whole Linux machines under QEMU {how}, one per session or one-shot \
                         run, restored from a saved machine of the disk image {}: a kernel of \
                         their own, no network, one virtual CPU, memory_mb as the guest's \
                         memory (each size booted and saved once). The workspace is \
                         {WORKSPACE} on the guest's disk (bounded by the image's free space, \
                         not by workspace_cap_mb). Sessions do not hibernate.",
                        image.display()
                    )
                }
                Err(e) => e.clone(),
            };
            RuntimeInfo {
                available: status.is_ok(),
                runtime_version: status.as_ref().ok().and_then(|_| self.qemu_version().ok()),
                default: Some(self.config.default_runtime == "vm"),
                max_cpu: self.config.max_cpu.min(1.0),
                images: status.as_ref().ok().map(|_| images),
                default_images,
                notes,
                acceleration: accel.map(|(a, _)| a),
                ..base
            }
        })
    }

    fn prepare(&self) -> Fut<'_, ()> {
        Box::pin(async move {
            // The first machine of the default size boots and saves it: done now, not on a
            // client's first request (a cold boot under emulation takes tens of seconds).
            if self.status().is_err() {
                return;
            }
            match self.start(self.config.vm.default_mem_mb).await {
                Ok((m, _slot)) => {
                    let r = m.report();
                    tracing::info!(
                        accel = r.accel.name(),
                        cold_boot_ms = r.cold_boot.map(|d| d.as_millis() as u64),
                        restore_ms = r.restore.as_millis() as u64,
                        "the vm runtime's saved machine is ready"
                    );
                    let _ = tokio::task::spawn_blocking(move || m.shutdown()).await;
                }
                Err(e) => tracing::warn!(e = %e.message(), "the vm runtime cannot start a machine"),
            }
            self.image_sha256().await;
        })
    }

    fn reap(&self) -> Fut<'_, ()> {
        // Every machine is a child QEMU of this process that dies with it (wasmsand-vm
        // kills it on drop and the kernel on this process's death): nothing to reap.
        Box::pin(async {})
    }
}

struct VmBox {
    machine: Machine,
    digest: String,
    /// The session's environment.
    env: BTreeMap<String, String>,
    log_cap: u64,
    alive: AtomicBool,
    slot: parking_lot::Mutex<Option<Slot>>,
}

/// `path` in the guest: absolute, or relative to the workspace.
fn absolute(path: &str) -> String {
    if path.starts_with('/') {
        path.to_string()
    } else {
        format!("{WORKSPACE}/{}", path.trim_start_matches("./"))
    }
}

/// The shell line of a run: its environment exported, then its argv exec'd. The
/// environment goes in the line, not in the agent's `env`, so the run takes the agent's
/// spare shell (a new one costs hundreds of milliseconds under emulation).
fn command_line(session_env: &BTreeMap<String, String>, req: &ExecRequest) -> String {
    let mut env = session_env.clone();
    env.extend(req.env.clone());
    let mut line = String::new();
    for (k, v) in &env {
        if is_name(k) {
            line.push_str(&format!("export {k}={}\n", super::wasm::shell_quote(v)));
        }
    }
    line.push_str("exec");
    for a in &req.command {
        line.push(' ');
        line.push_str(&super::wasm::shell_quote(a));
    }
    line
}

fn is_name(k: &str) -> bool {
    let mut c = k.chars();
    c.next()
        .is_some_and(|f| f == '_' || f.is_ascii_alphabetic())
        && c.all(|ch| ch == '_' || ch.is_ascii_alphanumeric())
}

fn errno_of(e: &VmError) -> Option<&str> {
    match e {
        VmError::Guest { errno, .. } => errno.as_deref(),
        _ => None,
    }
}

fn fs_failure(e: VmError) -> FsFailure {
    match e {
        VmError::Guest { message, errno } => FsFailure::Errno {
            errno: errno.unwrap_or_else(|| "EIO".into()),
            message,
        },
        other => FsFailure::Gone(other.to_string()),
    }
}

impl VmBox {
    async fn blocking<T: Send + 'static>(
        &self,
        f: impl FnOnce(&Machine) -> T + Send + 'static,
    ) -> Result<T, String> {
        let m = self.machine.clone();
        tokio::task::spawn_blocking(move || f(&m))
            .await
            .map_err(|e| format!("the operation panicked: {e}"))
    }
}

impl SandboxBox for VmBox {
    fn is_alive(&self) -> bool {
        self.alive.load(Ordering::SeqCst)
    }

    fn image_digest(&self) -> String {
        self.digest.clone()
    }

    fn write_files(
        &self,
        dirs: Vec<String>,
        files: Vec<(String, Vec<u8>)>,
    ) -> Fut<'_, Result<(), FilesError>> {
        Box::pin(async move {
            let done = self
                .blocking(move |m| {
                    for d in &dirs {
                        m.mkdir(&absolute(d))?;
                    }
                    let mut written: Vec<String> = Vec::new();
                    for (path, data) in &files {
                        let abs = absolute(path);
                        if let Err(e) = m.put_file(&abs, data, 0o644, false) {
                            // All or nothing: what this call wrote goes again.
                            for w in &written {
                                let _ = m.remove(w, false);
                            }
                            return Err(e);
                        }
                        written.push(abs);
                    }
                    Ok(())
                })
                .await
                .map_err(FilesError::Gone)?;
            done.map_err(|e| match errno_of(&e) {
                Some("ENOSPC" | "EDQUOT" | "EFBIG") => FilesError::WorkspaceFull(e.to_string()),
                Some(_) => FilesError::Conflict(e.to_string()),
                None => FilesError::Gone(e.to_string()),
            })
        })
    }

    fn is_dir<'a>(&'a self, cwd: &'a str) -> Fut<'a, bool> {
        let abs = absolute(cwd);
        Box::pin(async move {
            self.blocking(move |m| m.stat(&abs).is_ok_and(|e| e.kind == "dir"))
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
        Box::pin(async move {
            let line = command_line(&self.env, &req);
            let cwd = absolute(req.cwd.as_deref().unwrap_or(WORKSPACE));
            let stdin = req.stdin.unwrap_or_default();
            if stdin.len() > wasmsand_vm::MAX_STDIN {
                return Err(format!(
                    "stdin of {} bytes is over the {} bytes a vm run may be handed",
                    stdin.len(),
                    wasmsand_vm::MAX_STDIN
                ));
            }
            let cancel = Cancel::new();
            // TERM to every process of the run when asked to stop, then the kill after the
            // grace (a shutdown's at most 2 s).
            let stopper = tokio::spawn({
                let cancel = cancel.clone();
                let mut stop = stop.clone();
                let grace = req.grace;
                async move {
                    if stop.wait_for(|c| *c != StopCause::None).await.is_err() {
                        return;
                    }
                    let grace = stop.borrow().grace(grace);
                    cancel.terminate();
                    tokio::time::sleep(grace).await;
                    cancel.cancel();
                }
            });
            // One more byte than the log keeps: the log sees that it was cut.
            let cap = usize::try_from(self.log_cap.saturating_add(1)).unwrap_or(usize::MAX);
            let timeout = req.timeout;
            let ran = self
                .blocking(move |m| {
                    let mut r = RunRequest::new(&line, timeout);
                    r.stdout_cap = cap;
                    r.stderr_cap = cap;
                    r.stdin = &stdin;
                    r.cwd = Some(&cwd);
                    r.cancel = Some(&cancel);
                    let ran = m.run(&r, &mut |s, b| {
                        out(
                            match s {
                                wasmsand_vm::Stream::Stdout => Stream::Stdout,
                                wasmsand_vm::Stream::Stderr => Stream::Stderr,
                            },
                            b,
                        )
                    });
                    // A restored machine is the pristine image: the session's next runs
                    // still need their workspace.
                    if let Ok(o) = &ran
                        && matches!(o.end, RunEnd::Reset { .. })
                    {
                        let _ = m.mkdir(WORKSPACE);
                    }
                    ran
                })
                .await;
            stopper.abort();
            let o = match ran? {
                Ok(o) => o,
                Err(VmError::Shutdown) => {
                    return Ok(outcome(-1, EndHint::SessionDestroyed));
                }
                Err(e) => return Err(e.to_string()),
            };
            let stopped = *stop.borrow() != StopCause::None;
            let code = o.exit_code.unwrap_or(-1);
            let end = match o.end {
                RunEnd::Reset { why } => EndHint::Lost(format!(
                    "{why}; the machine was reset to its pristine state (what the session \
                     held is gone)"
                )),
                _ if stopped => EndHint::Stopped,
                RunEnd::TimedOut => EndHint::Timeout,
                RunEnd::Cancelled => EndHint::Stopped,
                RunEnd::Exited if o.oom_killed => EndHint::OomKilled,
                RunEnd::Exited if o.pids_limited => EndHint::PidsLimit,
                RunEnd::Exited => EndHint::Exited,
            };
            Ok(outcome(code, end))
        })
    }

    fn candidates<'a>(&'a self, set: &'a GlobSet) -> Fut<'a, (Vec<Candidate>, bool)> {
        Box::pin(async move {
            let Ok(Ok((list, cut))) = self.blocking(|m| m.walk(WORKSPACE, MAX_WALK)).await else {
                return (Vec::new(), false);
            };
            let out = list
                .into_iter()
                .filter(|e| set.is_match(&e.path))
                .map(|e| Candidate {
                    path: e.path,
                    symlink: e.symlink,
                    size: e.size,
                })
                .collect();
            (out, cut)
        })
    }

    fn read(&self, paths: Vec<String>, cap: u64) -> Fut<'_, Vec<(String, Vec<u8>)>> {
        Box::pin(async move {
            self.blocking(move |m| {
                let mut out = Vec::new();
                let mut total = 0u64;
                for p in paths {
                    let Ok(data) = m.read_file(&absolute(&p), cap.saturating_sub(total)) else {
                        continue;
                    };
                    total += data.len() as u64;
                    if total > cap {
                        break;
                    }
                    out.push((p, data));
                }
                out
            })
            .await
            .unwrap_or_default()
        })
    }

    fn fs(&self, op: FsOp) -> Fut<'_, Result<FsReply, FsFailure>> {
        Box::pin(async move {
            let entry = |e: wasmsand_vm::Entry| FsEntry {
                name: e.name,
                kind: e.kind,
                size: e.size,
            };
            self.blocking(move |m| match op {
                FsOp::List(p) => m
                    .list(&absolute(&p))
                    .map(|l| FsReply::Entries(l.into_iter().map(entry).collect())),
                FsOp::Stat(p) => m.stat(&absolute(&p)).map(|e| FsReply::Entry(entry(e))),
                FsOp::Read {
                    path,
                    offset,
                    length,
                } => m
                    .read_range(&absolute(&path), offset, length)
                    .map(|(d, size)| FsReply::Data(d.into(), size)),
                FsOp::Write { path, data, append } => m
                    .put_file(&absolute(&path), &data, 0o644, append)
                    .map(FsReply::Size),
                FsOp::Mkdir(p) => m.mkdir(&absolute(&p)).map(FsReply::Created),
                FsOp::Rename { from, to } => m
                    .rename(&absolute(&from), &absolute(&to))
                    .map(|()| FsReply::Done),
                FsOp::Remove { path, recursive } => m
                    .remove(&absolute(&path), recursive)
                    .map(|()| FsReply::Done),
            })
            .await
            .map_err(FsFailure::Gone)?
            .map_err(fs_failure)
        })
    }

    fn destroy(&self) -> Fut<'_, ()> {
        Box::pin(async move {
            if !self.alive.swap(false, Ordering::SeqCst) {
                return;
            }
            // The QEMU ends; runs going on in it answer `Shutdown` (SessionDestroyed).
            let _ = self.blocking(|m| m.shutdown()).await;
            self.slot.lock().take();
        })
    }
}

fn outcome(exit_code: i32, end: EndHint) -> ExecOutcome {
    ExecOutcome {
        exit_code,
        end,
        cpu_time_sec: None,
        peak_rss_mb: None,
        network: (0, 0),
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    #[test]
    fn a_run_s_line_exports_its_environment_and_execs_its_argv() {
        let req = ExecRequest {
            command: vec!["python3".into(), "-c".into(), "print('a b')".into()],
            env: BTreeMap::from([("B".into(), "it's".into()), ("bad name".into(), "x".into())]),
            cwd: None,
            timeout: Duration::from_secs(1),
            grace: Duration::from_secs(1),
            in_session: true,
            stdin: None,
            stdin_feed: None,
        };
        let session = BTreeMap::from([("A".into(), "1".into()), ("B".into(), "0".into())]);
        let line = command_line(&session, &req);
        assert_eq!(
            line,
            "export A=1\nexport B='it'\\''s'\nexec python3 -c 'print('\\''a b'\\'')'"
        );
        assert_eq!(absolute("a/b"), "/workspace/a/b");
        assert_eq!(absolute("./a"), "/workspace/a");
        assert_eq!(absolute("/etc"), "/etc");
    }
}
