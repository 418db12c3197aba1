//! The runtime layer: what executes a session's or a run's commands. One trait, three
//! implementations: [`wasm`] (this process's WebAssembly sandboxes, the default and fast tier),
//! [`docker`] (containers on a Docker engine, images built from Debian's packages) and [`vm`]
//! (whole Linux machines under QEMU, restored from a saved machine).
//! Everything above (API, queue, quotas, store, logs, idempotency, policy hash, metrics,
//! audit, MCP) works with [`Runtime`] and [`SandboxBox`] and never asks which one it is.

pub(crate) mod docker;
pub(crate) mod vm;
pub(crate) mod wasm;

use std::collections::BTreeMap;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;

use globset::GlobSet;
use tokio::sync::watch;

use crate::error::ApiError;
use crate::logs::Stream;
use crate::views::RuntimeInfo;

/// Why a run is being stopped from outside.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StopCause {
    None,
    User,
    Shutdown,
}

impl StopCause {
    /// The time between TERM and KILL for this stop: a shutdown waits at most 2 s.
    pub(crate) fn grace(self, configured: Duration) -> Duration {
        match self {
            StopCause::Shutdown => configured.min(Duration::from_secs(2)),
            _ => configured,
        }
    }
}

/// A boxed future: the traits are used as objects.
pub(crate) type Fut<'a, T> = Pin<Box<dyn Future<Output = T> + Send + 'a>>;

/// Where a run's output goes as it comes (the run's log).
pub(crate) type OutputSink = Arc<dyn Fn(Stream, &[u8]) + Send + Sync>;

/// The input of an interactive run, as its stream's `stdin` frames bring it: chunks in
/// order, then end of file when every sender is gone (`crate::interactive` holds the one
/// sender and drops it to close stdin).
pub(crate) type StdinFeed = tokio::sync::mpsc::UnboundedReceiver<bytes::Bytes>;

/// An image a request named, resolved by its runtime.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct ImageRef {
    /// What the request said (`python:3.11-slim`).
    pub requested: String,
    /// What the runtime runs (`wasmsand/python:current`, `wasmsand/default`).
    pub canonical: String,
}

/// What a new box is for.
pub(crate) struct BoxSpec {
    pub image: ImageRef,
    pub memory_mb: u64,
    pub cpu: f64,
    /// The session's environment (a run's own is in [`ExecRequest`]).
    pub env: BTreeMap<String, String>,
    pub owner: String,
    /// The session it serves, or the one-shot run.
    pub session: Option<String>,
    pub run: Option<String>,
    /// The effective egress allowlist (`network_policy: allowlist`); none: no network.
    pub network: Option<wasmsand::egress::EgressPolicy>,
    /// The sandbox's limits instead of those the server's settings give (wasm only).
    pub limits: Option<wasmsand::Limits>,
}

/// A run's egress decisions, kept from the door's (or the proxy's) callback until the run's
/// end takes them for the audit trail.
#[derive(Clone, Default)]
pub(crate) struct EgressLog(Arc<parking_lot::Mutex<Vec<wasmsand::EgressEvent>>>);

impl EgressLog {
    /// The callback that records into this log.
    pub(crate) fn sink(&self) -> wasmsand::EgressSink {
        let log = self.0.clone();
        Arc::new(move |e: &wasmsand::EgressEvent| log.lock().push(e.clone()))
    }

    /// What was recorded since the last take, oldest first.
    pub(crate) fn take(&self) -> Vec<wasmsand::EgressEvent> {
        std::mem::take(&mut *self.0.lock())
    }
}

/// Why a box could not be made.
#[derive(Debug)]
pub(crate) enum ProvisionError {
    /// The image is not on this host; `build` is the command that makes it.
    ImageMissing {
        image: String,
        build: String,
    },
    /// The runtime cannot serve now (engine down, capacity reached).
    Unavailable(String),
    Failed(String),
}

impl ProvisionError {
    pub(crate) fn reason_code(&self) -> &'static str {
        match self {
            ProvisionError::ImageMissing { .. } => "image_pull_failed",
            _ => "provision_failed",
        }
    }

    pub(crate) fn message(&self) -> String {
        match self {
            ProvisionError::ImageMissing { image, build } => {
                format!("image {image} is not built on this host; build it with `{build}`")
            }
            ProvisionError::Unavailable(m) | ProvisionError::Failed(m) => m.clone(),
        }
    }
}

/// Why files could not be written into a box's workspace.
#[derive(Debug)]
pub(crate) enum FilesError {
    WorkspaceFull(String),
    Conflict(String),
    Gone(String),
}

/// One filesystem operation on a box (the session file API, `crate::api::files`). Paths
/// are absolute, or relative to the workspace.
#[derive(Debug)]
pub(crate) enum FsOp {
    List(String),
    Stat(String),
    /// Bytes `offset..offset+length`, cut at the end of the file.
    Read {
        path: String,
        offset: u64,
        length: u64,
    },
    Write {
        path: String,
        data: Vec<u8>,
        append: bool,
    },
    Mkdir(String),
    Rename {
        from: String,
        to: String,
    },
    Remove {
        path: String,
        recursive: bool,
    },
}

/// A path's name, type (`file`, `dir`, `symlink`, `other`) and size (0 for directories).
#[derive(Debug, Clone, PartialEq, serde::Serialize, utoipa::ToSchema)]
pub(crate) struct FsEntry {
    pub name: String,
    #[serde(rename = "type")]
    pub kind: &'static str,
    pub size: u64,
}

/// What an [`FsOp`] answers.
#[derive(Debug)]
pub(crate) enum FsReply {
    Entries(Vec<FsEntry>),
    Entry(FsEntry),
    /// A range read: the bytes and the file's whole size.
    Data(bytes::Bytes, u64),
    /// A write: the file's new size.
    Size(u64),
    /// A mkdir: whether it made the directory.
    Created(bool),
    Done,
}

/// Why an [`FsOp`] failed.
#[derive(Debug)]
pub(crate) enum FsFailure {
    /// As a system call would: the errno's name and a message naming the path.
    Errno { errno: String, message: String },
    /// The box is gone.
    Gone(String),
}

/// One command of a run.
pub(crate) struct ExecRequest {
    pub command: Vec<String>,
    pub env: BTreeMap<String, String>,
    pub cwd: Option<String>,
    pub timeout: Duration,
    /// Between TERM and KILL when the run is stopped.
    pub grace: Duration,
    /// Whether the box serves a session (whose shell state outlives the run).
    pub in_session: bool,
    /// The command's standard input (none: empty).
    pub stdin: Option<Vec<u8>>,
    /// An interactive run's standard input, fed while it runs (instead of `stdin`); only
    /// given to runtimes whose [`Runtime::interactive_supported`] is true.
    pub stdin_feed: Option<StdinFeed>,
}

/// Why a command ended, beyond its exit status; `runs` maps it to a phase and reason code.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum EndHint {
    Exited,
    Timeout,
    /// Stopped on request (the run's stop cause says by whom).
    Stopped,
    OomKilled,
    PidsLimit,
    LimitExceeded(String),
    SessionDestroyed,
    /// The runtime lost the box during the run (an engine restart).
    Lost(String),
}

pub(crate) struct ExecOutcome {
    pub exit_code: i32,
    pub end: EndHint,
    pub cpu_time_sec: Option<f64>,
    pub peak_rss_mb: Option<f64>,
    /// Network use: requests (connections through the Docker tier's proxy) and bytes
    /// received; zero without a network.
    pub network: (u64, u64),
}

/// A workspace entry a capture pattern matched.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Candidate {
    pub path: String,
    pub symlink: bool,
    pub size: u64,
}

/// Most workspace entries looked at when capturing (a bound on the walk, not on results).
pub(crate) const MAX_WALK: usize = 100_000;

/// One session's or one-shot run's sandbox: a wasm sandbox or a container.
pub(crate) trait SandboxBox: Send + Sync {
    /// False once destroyed or lost.
    fn is_alive(&self) -> bool;
    /// The image and its digest (what exactly runs).
    fn image_digest(&self) -> String;
    /// Writes files and directories (relative to the workspace), all or nothing.
    fn write_files(
        &self,
        dirs: Vec<String>,
        files: Vec<(String, Vec<u8>)>,
    ) -> Fut<'_, Result<(), FilesError>>;
    /// Whether `cwd` (relative to the workspace, or absolute) is a directory.
    fn is_dir<'a>(&'a self, cwd: &'a str) -> Fut<'a, bool>;
    /// Runs one command to its end, streaming its output; stops (TERM, grace, KILL) when
    /// `stop` changes.
    fn run(
        &self,
        req: ExecRequest,
        out: OutputSink,
        stop: watch::Receiver<StopCause>,
    ) -> Fut<'_, Result<ExecOutcome, String>>;
    /// Files and symlinks under the workspace that `set` matches (links not followed).
    fn candidates<'a>(&'a self, set: &'a GlobSet) -> Fut<'a, (Vec<Candidate>, bool)>;
    /// Contents of regular files, until `cap` bytes.
    fn read(&self, paths: Vec<String>, cap: u64) -> Fut<'_, Vec<(String, Vec<u8>)>>;
    /// One filesystem operation, with the permissions a run of the session has.
    fn fs(&self, op: FsOp) -> Fut<'_, Result<FsReply, FsFailure>>;
    /// Ends it and everything running in it; idempotent.
    fn destroy(&self) -> Fut<'_, ()>;
    /// The egress decisions of the last run, oldest first (for the audit trail).
    fn take_egress(&self) -> Vec<wasmsand::EgressEvent> {
        Vec::new()
    }
    /// The wasm sandbox behind it, for what only wasm has (background processes).
    fn sandbox(&self) -> Option<&Arc<wasmsand::Sandbox>> {
        None
    }
}

/// A runtime: makes boxes and says what it offers.
pub(crate) trait Runtime: Send + Sync {
    fn name(&self) -> &'static str;
    /// `runtime_version` of sessions and runs.
    fn version(&self) -> String;
    /// Whether this runtime knows `name` (its own images and their aliases), without
    /// asking whether it is available.
    fn knows_image(&self, name: &str) -> bool;
    /// The image names a request may give, for clients' help texts (MCP's tool description).
    fn image_names(&self) -> Vec<String>;
    /// The image a request names: 400 when unknown to this runtime.
    fn resolve_image(&self, name: &str) -> Result<ImageRef, ApiError>;
    /// The default `base_image` of a session that names none.
    fn default_image(&self) -> &'static str;
    /// The digest of an image, when known without making a box.
    fn image_digest<'a>(&'a self, image: &'a ImageRef) -> Fut<'a, String>;
    /// `cpu` and `memory_mb` as this runtime applies them, or the 400 for bad values.
    fn normalize(&self, cpu: Option<f64>, memory_mb: Option<u64>) -> Result<(f64, u64), ApiError>;
    /// 503 when it cannot serve now.
    fn check_available(&self) -> Fut<'_, Result<(), ApiError>>;
    /// Whether its boxes can have an egress allowlist (`network_policy: allowlist`).
    fn egress_supported(&self) -> bool {
        false
    }
    /// Whether its runs can be interactive: stdin fed while they run
    /// ([`ExecRequest::stdin_feed`]).
    fn interactive_supported(&self) -> bool {
        false
    }
    fn create_box(&self, spec: BoxSpec) -> Fut<'_, Result<Arc<dyn SandboxBox>, ProvisionError>>;
    /// Whether its sessions hibernate: written to the store when idle and at shutdown,
    /// checkpointed after each run, and woken from there on any replica
    /// (`crate::hibernate`).
    fn hibernates(&self) -> bool {
        false
    }
    /// A new box holding what `from` (one of this runtime's boxes) holds now, made for
    /// `spec`; later changes on either side are invisible to the other. Only runtimes that
    /// hibernate.
    fn fork_box<'a>(
        &'a self,
        _from: &'a Arc<dyn SandboxBox>,
        _spec: BoxSpec,
    ) -> Fut<'a, Result<Arc<dyn SandboxBox>, ProvisionError>> {
        Box::pin(async move {
            Err(ProvisionError::Failed(format!(
                "runtime {} cannot fork a session",
                self.name()
            )))
        })
    }
    /// A box holding the sandbox state `payload` (`wasmsand::Sandbox::export_payload`), made
    /// for `spec` as [`Runtime::create_box`] makes a new one. Only runtimes that hibernate.
    fn revive(
        &self,
        _payload: Vec<u8>,
        _spec: BoxSpec,
    ) -> Fut<'_, Result<Arc<dyn SandboxBox>, ProvisionError>> {
        Box::pin(async move {
            Err(ProvisionError::Failed(format!(
                "runtime {} does not hibernate sessions",
                self.name()
            )))
        })
    }
    /// Its `/runtimes` entry (the caps the caller fills in are shared).
    fn describe(&self, base: RuntimeInfo) -> Fut<'_, RuntimeInfo>;
    /// Gets ready, at the service's start, what its first box would otherwise wait for.
    fn prepare(&self) -> Fut<'_, ()> {
        Box::pin(async {})
    }
    /// Removes what an earlier life of this service left behind, and what this one lost.
    fn reap(&self) -> Fut<'_, ()>;
    /// Releases what it keeps ready (a clean shutdown).
    fn shutdown(&self) -> Fut<'_, ()> {
        Box::pin(async {})
    }
}

/// The runtimes of one service instance.
pub(crate) struct Runtimes {
    pub wasm: Arc<dyn Runtime>,
    pub docker: Arc<dyn Runtime>,
    pub vm: Arc<dyn Runtime>,
}

impl Runtimes {
    pub(crate) fn all(&self) -> [&Arc<dyn Runtime>; 3] {
        [&self.wasm, &self.docker, &self.vm]
    }

    pub(crate) fn get(&self, name: &str) -> Option<&Arc<dyn Runtime>> {
        self.all().into_iter().find(|r| r.name() == name)
    }
}

/// The runtime of a request: the one it names, else the one whose image it names, else
/// the default. Its availability and the image are checked next (in that order, so that a
/// client asking for a runtime that is down hears that first).
pub(crate) fn choose(
    app: &crate::App,
    runtime: Option<&str>,
    image: Option<&str>,
) -> Result<Arc<dyn Runtime>, ApiError> {
    Ok(match runtime {
        Some(name) => named(app, name)?,
        None => match image {
            Some(img) => app
                .runtimes
                .all()
                .into_iter()
                .find(|r| r.knows_image(img))
                .cloned()
                .unwrap_or_else(|| default_runtime(app)),
            None => default_runtime(app),
        },
    })
}

/// [`choose`], the runtime's availability, then the image it resolves.
pub(crate) async fn pick(
    app: &crate::App,
    runtime: Option<&str>,
    image: Option<&str>,
) -> Result<(Arc<dyn Runtime>, ImageRef), ApiError> {
    let rt = choose(app, runtime, image)?;
    rt.check_available().await?;
    let image = rt.resolve_image(image.unwrap_or(rt.default_image()))?;
    Ok((rt, image))
}

fn default_runtime(app: &crate::App) -> Arc<dyn Runtime> {
    app.runtimes
        .get(&app.config.default_runtime)
        .unwrap_or(&app.runtimes.wasm)
        .clone()
}

/// A runtime by name: 400 for a name no runtime has, 503 for `firecracker` (known to the
/// spec; no Firecracker binary exists in the registries this project builds from, and the
/// `vm` runtime is the microVM-class isolation here).
fn named(app: &crate::App, name: &str) -> Result<Arc<dyn Runtime>, ApiError> {
    use axum::http::StatusCode;
    use serde_json::json;
    if let Some(r) = app.runtimes.get(name) {
        return Ok(r.clone());
    }
    if name == "firecracker" {
        return Err(ApiError::new(
            StatusCode::SERVICE_UNAVAILABLE,
            crate::error::ErrorCode::RuntimeUnavailable,
            "Requested runtime 'firecracker' is not available",
        )
        .with_details(json!({
            "runtime": name,
            "available": false,
            "reason": FIRECRACKER_WHY,
            "suggested": ["vm", "wasm"],
        })));
    }
    Err(ApiError::invalid(format!(
        "unknown runtime '{name}'; runtimes: wasm, docker, vm, firecracker"
    ))
    .with_details(json!({ "runtime": name, "suggested": ["wasm", "docker", "vm"] })))
}

/// Why `firecracker` is never available, in `/runtimes` and in its 503.
pub(crate) const FIRECRACKER_WHY: &str = "not available in this build: there is no Firecracker \
     binary in the registries this service is built from; the vm runtime gives the same class \
     of isolation (a whole machine with its own kernel, under QEMU)";
