//! The protocol loop: requests and notifications on the main thread, runs on a Tokio runtime
//! whose tasks answer and notify through the connection's sender, so a long run never holds
//! the loop (code lenses, other commands and `shutdown` are answered meanwhile).

use std::collections::{BTreeMap, HashMap, HashSet};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicI32, Ordering};
use std::time::{Duration, Instant};

use base64::Engine as _;
use lsp_server::{Connection, ErrorCode, Message, Notification, Request, RequestId, Response};
use parking_lot::Mutex;
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

use crate::service::{Embedded, Service, ServiceError};
use crate::sync::{self, Mirror, Rules};
use crate::traces::{self, Failure, Frame};
use crate::{COMMANDS, LspError, lens};

/// Where the server finds its service, before the client's `initializationOptions`
/// (`serverUrl`, `apiKey`) override it.
#[derive(Clone, Debug, Default)]
pub struct Options {
    /// A service's URL; none: start one in this process.
    pub server_url: Option<String>,
    /// The API key sent as `X-API-KEY`.
    pub api_key: Option<String>,
    /// The compiled-module cache of the embedded service.
    pub cache_dir: Option<PathBuf>,
}

/// Output the editor is sent per stream before it gets a link to the whole log instead
/// (seed 003: "IDE truncates long logs locally (e.g., first 100KB per stream)").
const EDITOR_LOG_CAP: usize = 100 * 1024;
/// The end of each stream kept for finding the failure (traces are printed last).
const TAIL_CAP: usize = 512 * 1024;
/// No frame at all (heartbeats come every ~10 s) for this long: the stream is dead.
const STREAM_IDLE: Duration = Duration::from_secs(30);
/// LSP 3.17's `RequestFailed`: the request was valid, carrying it out failed.
const REQUEST_FAILED: i32 = -32803;

/// Runs the server on stdin/stdout until the client's `exit`.
pub fn run_stdio(options: Options) -> Result<(), LspError> {
    let (connection, io) = Connection::stdio();
    let outcome = run(connection, options);
    // When the client's bytes broke the protocol, the reader thread knows why; the loop
    // only saw its channel close.
    match (outcome, io.join()) {
        (_, Err(e)) => Err(LspError::Protocol(format!(
            "malformed message from the client: {e}"
        ))),
        (outcome, Ok(())) => outcome,
    }
}

/// Runs the server on `connection` until the client's `shutdown`.
pub fn run(connection: Connection, options: Options) -> Result<(), LspError> {
    let capabilities = json!({
        "textDocumentSync": { "openClose": true, "change": 1, "save": { "includeText": false } },
        "codeLensProvider": { "resolveProvider": false },
        "executeCommandProvider": { "commands": COMMANDS },
    });
    let (id, params) = connection
        .initialize_start()
        .map_err(|e| LspError::Protocol(e.to_string()))?;
    let init: Value = params;
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .thread_name("wasmsand-lsp")
        .build()
        .map_err(|e| LspError::Start(e.to_string()))?;
    let opts = &init["initializationOptions"];
    let server_url = opts["serverUrl"]
        .as_str()
        .filter(|s| !s.is_empty())
        .map(str::to_string)
        .or(options.server_url.clone());
    let api_key = opts["apiKey"]
        .as_str()
        .filter(|s| !s.is_empty())
        .map(str::to_string)
        .or(options.api_key.clone());
    let (service, embedded) = match &server_url {
        Some(url) => (
            Service::new(url, api_key).map_err(|e| LspError::Start(e.to_string()))?,
            None,
        ),
        None => {
            let e = Embedded::start(&rt, options.cache_dir.clone())
                .map_err(|e| LspError::Start(e.to_string()))?;
            (e.service.clone(), Some(e))
        }
    };
    let root = workspace_root(&init);
    let result = json!({
        "capabilities": capabilities,
        "serverInfo": { "name": "wasmsand-lsp", "version": env!("CARGO_PKG_VERSION") },
    });
    connection
        .initialize_finish(id, result)
        .map_err(|e| LspError::Protocol(format!("the client left during the handshake ({e})")))?;
    let shared = Arc::new(Shared {
        out: connection.sender.clone(),
        root: root.clone(),
        service,
        embedded: embedded.is_some(),
        progress: init["capabilities"]["window"]["workDoneProgress"]
            .as_bool()
            .unwrap_or(false),
        // A client that handles the `tldw/sandbox/*` notifications says so; others get the
        // log as `window/logMessage`.
        tldw_client: opts["tldwNotifications"].as_bool().unwrap_or(false),
        next_id: AtomicI32::new(1),
        pending: Mutex::new(HashMap::new()),
        state: Mutex::new(State::load(&root)),
        rt: rt.handle().clone(),
    });
    tracing::info!(root = %root.display(), service = %shared.service.origin(), "lsp ready");
    let outcome = main_loop(&connection, &shared);
    if let Some(e) = embedded {
        e.shutdown(&rt);
    }
    rt.shutdown_timeout(Duration::from_secs(2));
    outcome
}

fn workspace_root(init: &Value) -> PathBuf {
    let uri = init["workspaceFolders"][0]["uri"]
        .as_str()
        .or(init["rootUri"].as_str());
    if let Some(p) = uri.and_then(path_of_uri) {
        return p;
    }
    if let Some(p) = init["rootPath"].as_str() {
        return PathBuf::from(p);
    }
    std::env::current_dir().unwrap_or_else(|_| PathBuf::from("."))
}

fn path_of_uri(uri: &str) -> Option<PathBuf> {
    url::Url::parse(uri).ok()?.to_file_path().ok()
}

fn uri_of_path(path: &Path) -> String {
    url::Url::from_file_path(path)
        .map(|u| u.to_string())
        .unwrap_or_else(|_| format!("file://{}", path.display()))
}

struct Shared {
    out: crossbeam_channel::Sender<Message>,
    root: PathBuf,
    service: Service,
    embedded: bool,
    progress: bool,
    tldw_client: bool,
    next_id: AtomicI32,
    pending: Mutex<HashMap<RequestId, tokio::sync::oneshot::Sender<Response>>>,
    state: Mutex<State>,
    rt: tokio::runtime::Handle,
}

impl Shared {
    fn send(&self, m: Message) {
        let _ = self.out.send(m);
    }

    fn notify(&self, method: &str, params: Value) {
        self.send(Message::Notification(Notification::new(
            method.to_string(),
            params,
        )));
    }

    /// A request to the client; the answer comes back through the main loop.
    fn request(&self, method: &str, params: Value) -> tokio::sync::oneshot::Receiver<Response> {
        let id = RequestId::from(format!(
            "wasmsand-{}",
            self.next_id.fetch_add(1, Ordering::Relaxed)
        ));
        let (tx, rx) = tokio::sync::oneshot::channel();
        self.pending.lock().insert(id.clone(), tx);
        self.send(Message::Request(Request::new(
            id,
            method.to_string(),
            params,
        )));
        rx
    }

    fn show(&self, kind: u8, message: &str) {
        self.notify(
            "window/showMessage",
            json!({ "type": kind, "message": message }),
        );
    }

    fn publish(&self, uri: &str, diagnostics: Vec<Value>) {
        self.notify(
            "textDocument/publishDiagnostics",
            json!({ "uri": uri, "diagnostics": diagnostics }),
        );
    }

    /// Clears every diagnostic the last run published.
    fn clear_all(&self) {
        let uris: Vec<String> = self.state.lock().published.drain().collect();
        for u in uris {
            self.publish(&u, Vec::new());
        }
    }

    fn save(&self) {
        let s = self.state.lock();
        s.persist(&self.root);
    }
}

/// What one workspace remembers: its defaults, its last run and the sessions it syncs to.
#[derive(Default)]
struct State {
    defaults: Defaults,
    last_spec: Option<RunSpec>,
    last_run: Option<String>,
    sessions: HashMap<String, SessionEntry>,
    published: HashSet<String>,
    docs: HashMap<String, String>,
    upload_cap: HashMap<String, u64>,
}

struct SessionEntry {
    id: String,
    mirror: Mirror,
}

/// The workspace's defaults (`tldw.sandbox.configure`).
#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
struct Defaults {
    #[serde(skip_serializing_if = "Option::is_none")]
    runtime: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    base_image: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    timeout_sec: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    startup_timeout_sec: Option<u64>,
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    env: BTreeMap<String, String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    capture_patterns: Vec<String>,
    /// Globs that lift the binary/large-file denylist.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    include: Vec<String>,
    /// Globs never uploaded, beside `.gitignore` and `.sandboxignore`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    exclude: Vec<String>,
    /// Largest file uploaded (bytes; default 1 MiB).
    #[serde(skip_serializing_if = "Option::is_none")]
    max_file_bytes: Option<u64>,
}

/// `tldw.sandbox.run`'s argument: the service's run fields plus `files`.
#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
struct RunSpec {
    #[serde(skip_serializing_if = "Option::is_none")]
    command: Option<Vec<String>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    cwd: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    env: Option<BTreeMap<String, String>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    runtime: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    base_image: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    startup_timeout_sec: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    timeout_sec: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    capture_patterns: Option<Vec<String>>,
    /// Workspace-relative files or directories to sync (none: the whole workspace).
    #[serde(skip_serializing_if = "Option::is_none")]
    files: Option<Vec<String>>,
}

impl RunSpec {
    /// `self`'s fields over `base`'s.
    fn over(self, base: &RunSpec) -> RunSpec {
        RunSpec {
            command: self.command.or_else(|| base.command.clone()),
            cwd: self.cwd.or_else(|| base.cwd.clone()),
            env: self.env.or_else(|| base.env.clone()),
            runtime: self.runtime.or_else(|| base.runtime.clone()),
            base_image: self.base_image.or_else(|| base.base_image.clone()),
            startup_timeout_sec: self.startup_timeout_sec.or(base.startup_timeout_sec),
            timeout_sec: self.timeout_sec.or(base.timeout_sec),
            capture_patterns: self
                .capture_patterns
                .or_else(|| base.capture_patterns.clone()),
            files: self.files.or_else(|| base.files.clone()),
        }
    }
}

#[derive(Serialize, Deserialize, Default)]
struct Persisted {
    defaults: Defaults,
    last_spec: Option<RunSpec>,
}

/// Where a workspace's defaults and last spec survive the editor's restarts.
fn persist_path(root: &Path) -> Option<PathBuf> {
    let base = std::env::var_os("XDG_CACHE_HOME")
        .filter(|v| !v.is_empty())
        .map(PathBuf::from)
        .or_else(|| {
            std::env::var_os("HOME")
                .filter(|v| !v.is_empty())
                .map(|h| PathBuf::from(h).join(".cache"))
        })?;
    let key = hex::encode(<sha2::Sha256 as sha2::Digest>::digest(
        root.to_string_lossy().as_bytes(),
    ));
    Some(
        base.join("wasmsand")
            .join("lsp")
            .join(format!("{}.json", &key[..16])),
    )
}

impl State {
    fn load(root: &Path) -> State {
        let p: Persisted = persist_path(root)
            .and_then(|p| std::fs::read(p).ok())
            .and_then(|b| serde_json::from_slice(&b).ok())
            .unwrap_or_default();
        State {
            defaults: p.defaults,
            last_spec: p.last_spec,
            ..State::default()
        }
    }

    fn persist(&self, root: &Path) {
        let Some(path) = persist_path(root) else {
            return;
        };
        let p = Persisted {
            defaults: self.defaults.clone(),
            last_spec: self.last_spec.clone(),
        };
        if let Some(dir) = path.parent() {
            let _ = std::fs::create_dir_all(dir);
        }
        if let Ok(b) = serde_json::to_vec_pretty(&p) {
            // Write-then-rename: a crash never leaves half a file for the next start.
            let tmp = path.with_extension("json.tmp");
            if std::fs::write(&tmp, b).is_ok() {
                let _ = std::fs::rename(tmp, path);
            }
        }
    }
}

fn main_loop(connection: &Connection, shared: &Arc<Shared>) -> Result<(), LspError> {
    for msg in &connection.receiver {
        match msg {
            Message::Request(req) => {
                if connection
                    .handle_shutdown(&req)
                    .map_err(|e| LspError::Protocol(e.to_string()))?
                {
                    return Ok(());
                }
                handle_request(shared, req);
            }
            Message::Notification(n) => handle_notification(shared, n),
            Message::Response(r) => {
                if let Some(tx) = shared.pending.lock().remove(&r.id) {
                    let _ = tx.send(r);
                }
            }
        }
    }
    Ok(())
}

fn error(id: RequestId, code: i32, message: impl Into<String>) -> Message {
    Message::Response(Response {
        id,
        result: None,
        error: Some(lsp_server::ResponseError {
            code,
            message: message.into(),
            data: None,
        }),
    })
}

fn handle_request(shared: &Arc<Shared>, req: Request) {
    match req.method.as_str() {
        "workspace/executeCommand" => {
            let command = req.params["command"].as_str().unwrap_or("").to_string();
            let args = req.params["arguments"]
                .as_array()
                .cloned()
                .unwrap_or_default();
            let token = req.params.get("workDoneToken").cloned();
            execute(shared, req.id, &command, args, token);
        }
        "textDocument/codeLens" => {
            let uri = req.params["textDocument"]["uri"]
                .as_str()
                .unwrap_or("")
                .to_string();
            let lenses = code_lenses(shared, &uri);
            shared.send(Message::Response(Response::new_ok(req.id, lenses)));
        }
        m => shared.send(error(
            req.id,
            ErrorCode::MethodNotFound as i32,
            format!("wasmsand-lsp does not handle {m}"),
        )),
    }
}

fn handle_notification(shared: &Arc<Shared>, n: Notification) {
    let uri = n.params["textDocument"]["uri"]
        .as_str()
        .unwrap_or("")
        .to_string();
    match n.method.as_str() {
        "textDocument/didOpen" => {
            if let Some(t) = n.params["textDocument"]["text"].as_str() {
                shared.state.lock().docs.insert(uri, t.to_string());
            }
        }
        "textDocument/didChange" => {
            if let Some(t) = n.params["contentChanges"]
                .as_array()
                .and_then(|c| c.last())
                .and_then(|c| c["text"].as_str())
            {
                shared.state.lock().docs.insert(uri.clone(), t.to_string());
            }
            clear_on_change(shared, &uri);
        }
        "textDocument/didSave" => clear_on_change(shared, &uri),
        "textDocument/didClose" => {
            shared.state.lock().docs.remove(&uri);
        }
        _ => {}
    }
}

/// A run's diagnostic on a file says nothing true once the file changed.
fn clear_on_change(shared: &Arc<Shared>, uri: &str) {
    let had = shared.state.lock().published.remove(uri);
    if had {
        shared.publish(uri, Vec::new());
    }
}

fn code_lenses(shared: &Arc<Shared>, uri: &str) -> Value {
    let Some(path) = path_of_uri(uri) else {
        return json!([]);
    };
    let Ok(rel) = path.strip_prefix(&shared.root) else {
        // Outside the workspace: it would not be in the sandbox.
        return json!([]);
    };
    let rel = rel.to_string_lossy().replace('\\', "/");
    let text = shared
        .state
        .lock()
        .docs
        .get(uri)
        .cloned()
        .or_else(|| std::fs::read_to_string(&path).ok())
        .unwrap_or_default();
    let configured_image = shared.state.lock().defaults.base_image.is_some();
    let lenses: Vec<Value> = lens::lenses(&rel, &text)
        .into_iter()
        .map(|l| {
            let mut arg = json!({ "command": l.command });
            // A file the wasm tier cannot run names the image that can, unless the workspace
            // chose one.
            if let (Some(img), false) = (l.image, configured_image) {
                arg["base_image"] = json!(img);
            }
            json!({
                "range": { "start": { "line": l.line, "character": 0 },
                           "end": { "line": l.line, "character": 0 } },
                "command": { "title": l.title, "command": "tldw.sandbox.run", "arguments": [arg] },
            })
        })
        .collect();
    Value::Array(lenses)
}

fn execute(
    shared: &Arc<Shared>,
    id: RequestId,
    command: &str,
    args: Vec<Value>,
    token: Option<Value>,
) {
    let one_object = |args: &[Value]| -> Result<Value, String> {
        match args {
            [] => Ok(Value::Null),
            [v @ Value::Object(_)] => Ok(v.clone()),
            [Value::Null] => Ok(Value::Null),
            _ => Err(format!(
                "{command} takes at most one argument, an object (got {})",
                Value::Array(args.to_vec())
            )),
        }
    };
    let arg = match one_object(&args) {
        Ok(a) => a,
        Err(e) => return shared.send(error(id, ErrorCode::InvalidParams as i32, e)),
    };
    match command {
        "tldw.sandbox.run" => {
            let given: RunSpec = if arg.is_null() {
                RunSpec::default()
            } else {
                match serde_json::from_value(arg) {
                    Ok(s) => s,
                    Err(e) => {
                        return shared.send(error(
                            id,
                            ErrorCode::InvalidParams as i32,
                            format!("tldw.sandbox.run: {e}"),
                        ));
                    }
                }
            };
            let last = shared.state.lock().last_spec.clone();
            // No command: a re-run of the last spec with the given fields changed.
            let spec = if given.command.is_none() {
                match &last {
                    Some(l) => given.over(l),
                    None => {
                        return shared.send(error(
                            id,
                            ErrorCode::InvalidParams as i32,
                            "tldw.sandbox.run needs `command` (an argv array, e.g. \
                             [\"python3\", \"main.py\"]); there is no earlier run to repeat",
                        ));
                    }
                }
            } else {
                given
            };
            if spec.command.as_ref().is_none_or(|c| c.is_empty()) {
                return shared.send(error(
                    id,
                    ErrorCode::InvalidParams as i32,
                    "tldw.sandbox.run: `command` must be a non-empty argv array",
                ));
            }
            let s = shared.clone();
            shared
                .rt
                .spawn(async move { start_run(s, id, spec, token).await });
        }
        "tldw.sandbox.configure" => {
            if !arg.is_null() {
                // Fields given replace the current ones; the others stay.
                let mut merged = serde_json::to_value(&shared.state.lock().defaults)
                    .unwrap_or_else(|_| json!({}));
                for (k, v) in arg.as_object().into_iter().flatten() {
                    if v.is_null() {
                        merged.as_object_mut().map(|m| m.remove(k));
                    } else {
                        merged[k] = v.clone();
                    }
                }
                match serde_json::from_value::<Defaults>(merged) {
                    Ok(d) => {
                        if let Err(e) = rules_of(&d).check() {
                            return shared.send(error(
                                id,
                                ErrorCode::InvalidParams as i32,
                                format!("tldw.sandbox.configure: {e}"),
                            ));
                        }
                        shared.state.lock().defaults = d;
                        shared.save();
                    }
                    Err(e) => {
                        return shared.send(error(
                            id,
                            ErrorCode::InvalidParams as i32,
                            format!("tldw.sandbox.configure: {e}"),
                        ));
                    }
                }
            }
            let st = shared.state.lock();
            let answer = json!({
                "workspace": shared.root.to_string_lossy(),
                "service": shared.service.url(""),
                "embedded": shared.embedded,
                "defaults": st.defaults,
                "last_spec": st.last_spec,
            });
            drop(st);
            shared.send(Message::Response(Response::new_ok(id, answer)));
        }
        "tldw.sandbox.openArtifacts" | "tldw.sandbox.cancel" => {
            let run_id = match arg.get("run_id") {
                Some(Value::String(s)) => Some(s.clone()),
                None | Some(Value::Null) => shared.state.lock().last_run.clone(),
                Some(v) => {
                    return shared.send(error(
                        id,
                        ErrorCode::InvalidParams as i32,
                        format!("{command}: `run_id` must be a string, not {v}"),
                    ));
                }
            };
            if let Some(extra) = arg
                .as_object()
                .and_then(|m| m.keys().find(|k| *k != "run_id"))
            {
                return shared.send(error(
                    id,
                    ErrorCode::InvalidParams as i32,
                    format!("{command}: unknown field `{extra}`, expected `run_id`"),
                ));
            }
            let Some(run_id) = run_id else {
                return shared.send(error(
                    id,
                    ErrorCode::InvalidParams as i32,
                    format!("{command}: no run yet; pass `run_id`"),
                ));
            };
            let s = shared.clone();
            let cancel = command == "tldw.sandbox.cancel";
            shared.rt.spawn(async move {
                let answer = if cancel {
                    s.service.cancel_run(&run_id).await
                } else {
                    artifacts(&s, &run_id).await
                };
                s.send(match answer {
                    Ok(v) => Message::Response(Response::new_ok(id, v)),
                    Err(e) => error(id, REQUEST_FAILED, e.to_string()),
                });
            });
        }
        other => shared.send(error(
            id,
            ErrorCode::InvalidParams as i32,
            format!(
                "unknown command {other:?}; wasmsand-lsp runs {}",
                COMMANDS.join(", ")
            ),
        )),
    }
}

async fn artifacts(s: &Shared, run_id: &str) -> Result<Value, ServiceError> {
    let mut list = s.service.artifacts(run_id).await?;
    let items = list["items"].as_array().cloned().unwrap_or_default();
    let items: Vec<Value> = items
        .into_iter()
        .map(|mut it| {
            if let Some(p) = it["path"].as_str() {
                it["url"] = json!(s.service.url(&format!("/runs/{run_id}/artifacts/{p}")));
            }
            it
        })
        .collect();
    Ok(json!({
        "run_id": run_id,
        "items": items,
        "artifacts_url": s.service.url(&format!("/runs/{run_id}/artifacts")),
        "web_url": web_url(s, run_id),
        "expired": list["artifacts_expired"].take(),
    }))
}

fn web_url(s: &Shared, run_id: &str) -> String {
    format!("{}/webui/sandbox/runs/{run_id}", s.service.origin())
}

fn rules_of(d: &Defaults) -> Rules {
    Rules {
        max_file_bytes: d.max_file_bytes.unwrap_or(Rules::default().max_file_bytes),
        include: d.include.clone(),
        exclude: d.exclude.clone(),
    }
}

/// Why a run could not be started.
#[derive(Debug, thiserror::Error)]
enum StartFailure {
    #[error(transparent)]
    Service(#[from] ServiceError),
    #[error(transparent)]
    Sync(#[from] sync::SyncError),
    #[error("{0}")]
    Other(String),
}

impl StartFailure {
    fn code(&self) -> i32 {
        match self {
            StartFailure::Sync(sync::SyncError::Glob { .. })
            | StartFailure::Sync(sync::SyncError::OutsideWorkspace(_))
            | StartFailure::Sync(sync::SyncError::Read { .. }) => ErrorCode::InvalidParams as i32,
            StartFailure::Service(ServiceError::Api { status: 400, .. }) => {
                ErrorCode::InvalidParams as i32
            }
            _ => REQUEST_FAILED,
        }
    }
}

async fn start_run(s: Arc<Shared>, id: RequestId, spec: RunSpec, token: Option<Value>) {
    let defaults = s.state.lock().defaults.clone();
    match create(&s, &spec, &defaults).await {
        Ok((created, session_id)) => {
            let run_id = created["run_id"].as_str().unwrap_or("").to_string();
            {
                let mut st = s.state.lock();
                st.last_spec = Some(spec.clone());
                st.last_run = Some(run_id.clone());
            }
            s.save();
            let answer = json!({
                "run_id": run_id,
                "session_id": session_id,
                "status": created["phase"],
                "phase": created["phase"],
                "log_stream_url": created["log_stream_url"],
                "web_url": web_url(&s, &run_id),
                "estimated_start_time": created.get("estimated_start_time"),
            });
            s.send(Message::Response(Response::new_ok(id, answer)));
            follow(&s, &run_id, &spec, &defaults, token).await;
        }
        Err(e) => {
            let code = e.code();
            s.send(error(id, code, e.to_string()));
        }
    }
}

/// The session for the run's runtime and image, synced; then `POST /runs`.
async fn create(
    s: &Arc<Shared>,
    spec: &RunSpec,
    defaults: &Defaults,
) -> Result<(Value, String), StartFailure> {
    let runtime = spec.runtime.clone().or_else(|| defaults.runtime.clone());
    let image = spec
        .base_image
        .clone()
        .or_else(|| defaults.base_image.clone());
    let key = format!(
        "{}|{}",
        runtime.as_deref().unwrap_or(""),
        image.as_deref().unwrap_or("")
    );
    let root = s.root.clone();
    let rules = rules_of(defaults);
    let files = spec.files.clone();
    let scan = tokio::task::spawn_blocking(move || sync::scan(&root, &rules, files.as_deref()))
        .await
        .map_err(|e| StartFailure::Other(e.to_string()))??;
    // A session the service forgot (expired, reaped, the service restarted) is made again and
    // gets the whole workspace: one retry.
    for attempt in 0..2 {
        let (session, mirror) = match s.state.lock().sessions.remove(&key) {
            Some(e) => (e.id, e.mirror),
            None => (String::new(), Mirror::default()),
        };
        let session = if session.is_empty() {
            let mut body = json!({ "spec_version": "1.0" });
            if let Some(r) = &runtime {
                body["runtime"] = json!(r);
            }
            if let Some(i) = &image {
                body["base_image"] = json!(i);
            }
            s.service.create_session(body).await?
        } else {
            session
        };
        let mut mirror = mirror;
        match sync_and_run(s, &session, &mut mirror, &scan, spec, defaults, &runtime).await {
            Ok(created) => {
                s.state.lock().sessions.insert(
                    key.clone(),
                    SessionEntry {
                        id: session.clone(),
                        mirror,
                    },
                );
                return Ok((created, session));
            }
            Err(StartFailure::Service(e)) if e.is_not_found() && attempt == 0 => continue,
            Err(e) => {
                // The session is kept (with what did reach it) for the next run.
                s.state.lock().sessions.insert(
                    key.clone(),
                    SessionEntry {
                        id: session,
                        mirror,
                    },
                );
                return Err(e);
            }
        }
    }
    Err(StartFailure::Other(
        "the sandbox service lost the session twice in a row".into(),
    ))
}

async fn sync_and_run(
    s: &Arc<Shared>,
    session: &str,
    mirror: &mut Mirror,
    scan: &sync::Scan,
    spec: &RunSpec,
    defaults: &Defaults,
    runtime: &Option<String>,
) -> Result<Value, StartFailure> {
    let plan = mirror.plan(scan, spec.files.is_none());
    if !plan.upload.is_empty() {
        let cap = upload_cap(s, runtime.as_deref()).await;
        if let Some(cap) = cap
            && plan.bytes > cap
        {
            return Err(sync::SyncError::TooLarge {
                bytes: plan.bytes,
                cap,
            }
            .into());
        }
        let tar = sync::tar(&plan.upload).map_err(|e| StartFailure::Other(e.to_string()))?;
        s.service.upload_tar(session, tar).await?;
    }
    for rel in &plan.remove {
        s.service.remove_file(session, rel).await?;
    }
    mirror.applied(&plan);
    let mut env = defaults.env.clone();
    env.extend(spec.env.clone().unwrap_or_default());
    let mut body = json!({
        "spec_version": "1.0",
        "session_id": session,
        "command": spec.command,
    });
    if !env.is_empty() {
        body["env"] = json!(env);
    }
    if let Some(c) = &spec.cwd {
        body["cwd"] = json!(c);
    }
    if let Some(t) = spec.timeout_sec.or(defaults.timeout_sec) {
        body["timeout_sec"] = json!(t);
    }
    if let Some(t) = spec.startup_timeout_sec.or(defaults.startup_timeout_sec) {
        body["startup_timeout_sec"] = json!(t);
    }
    let capture = spec
        .capture_patterns
        .clone()
        .unwrap_or_else(|| defaults.capture_patterns.clone());
    if !capture.is_empty() {
        body["capture_patterns"] = json!(capture);
    }
    Ok(s.service.create_run(&body).await?)
}

/// The runtime's upload cap from `/runtimes` (asked once per runtime).
async fn upload_cap(s: &Arc<Shared>, runtime: Option<&str>) -> Option<u64> {
    let name = runtime.unwrap_or("").to_string();
    if let Some(c) = s.state.lock().upload_cap.get(&name) {
        return Some(*c);
    }
    let v = s.service.runtimes().await.ok()?;
    let list = v["runtimes"].as_array()?;
    let pick = list
        .iter()
        .find(|r| r["name"] == name.as_str())
        .or_else(|| list.iter().find(|r| r["name"] == "wasm"))
        .or_else(|| list.first())?;
    let cap = pick["max_upload_mb"].as_u64()? * 1024 * 1024;
    s.state.lock().upload_cap.insert(name, cap);
    Some(cap)
}

/// The end of a stream's output, bounded.
#[derive(Default)]
struct Tail {
    text: String,
    forwarded: usize,
    cut_noted: bool,
}

impl Tail {
    fn push(&mut self, t: &str) {
        self.text.push_str(t);
        if self.text.len() > TAIL_CAP {
            let mut cut = self.text.len() - TAIL_CAP;
            while !self.text.is_char_boundary(cut) {
                cut += 1;
            }
            self.text.drain(..cut);
        }
    }
}

fn frame_text(v: &Value) -> String {
    let data = v["data"].as_str().unwrap_or("");
    if v["encoding"] == "base64" {
        base64::engine::general_purpose::STANDARD
            .decode(data)
            .map(|b| String::from_utf8_lossy(&b).into_owned())
            .unwrap_or_default()
    } else {
        data.to_string()
    }
}

fn terminal(phase: &str) -> bool {
    matches!(phase, "completed" | "failed" | "killed" | "timed_out")
}

/// Streams a run's output to the client, then publishes its diagnostics.
async fn follow(
    s: &Arc<Shared>,
    run_id: &str,
    spec: &RunSpec,
    defaults: &Defaults,
    token: Option<Value>,
) {
    let argv = spec.command.clone().unwrap_or_default().join(" ");
    let token = match token {
        Some(t) if !t.is_null() => Some(t),
        _ if s.progress => {
            let t = json!(format!("wasmsand-run-{run_id}"));
            let rx = s.request("window/workDoneProgress/create", json!({ "token": t }));
            match tokio::time::timeout(Duration::from_secs(5), rx).await {
                Ok(Ok(r)) if r.error.is_none() => Some(t),
                _ => None,
            }
        }
        _ => None,
    };
    let progress = |value: Value| {
        if let Some(t) = &token {
            s.notify("$/progress", json!({ "token": t, "value": value }));
        }
    };
    progress(json!({
        "kind": "begin", "title": "Run in Sandbox", "message": argv, "cancellable": false,
    }));
    let web = web_url(s, run_id);
    let mut out = Tail::default();
    let mut err = Tail::default();
    let mut last_report = Instant::now();
    let mut end: Option<Value> = None;
    let ended = s
        .service
        .stream(run_id, STREAM_IDLE, |v| {
            let kind = v["type"].as_str().unwrap_or("");
            match kind {
                "stdout" | "stderr" => {
                    let text = frame_text(v);
                    let tail = if kind == "stdout" { &mut out } else { &mut err };
                    tail.push(&text);
                    let room = EDITOR_LOG_CAP.saturating_sub(tail.forwarded);
                    if room > 0 {
                        let mut n = text.len().min(room);
                        while !text.is_char_boundary(n) {
                            n -= 1;
                        }
                        tail.forwarded += n;
                        send_log(s, run_id, kind, &text[..n], v["seq"].as_u64());
                    }
                    if tail.forwarded >= EDITOR_LOG_CAP && !tail.cut_noted {
                        tail.cut_noted = true;
                        send_log(
                            s,
                            run_id,
                            kind,
                            &format!("\n[{kind} shown up to 100 KB here; the full log: {web}]\n"),
                            None,
                        );
                    }
                    if last_report.elapsed() > Duration::from_millis(250) {
                        last_report = Instant::now();
                        if let Some(line) = text.lines().rev().find(|l| !l.trim().is_empty()) {
                            let line: String = line.chars().take(120).collect();
                            progress(json!({ "kind": "report", "message": line }));
                        }
                    }
                }
                "truncated" => send_log(
                    s,
                    run_id,
                    "stderr",
                    &format!(
                        "\n[the service cut this run's log ({}); the full log: {web}]\n",
                        v["reason"].as_str().unwrap_or("log cap")
                    ),
                    None,
                ),
                "event" if v["event"] == "end" => end = Some(v["data"].clone()),
                "event" if v["event"] == "phase" => {
                    if let Some(p) = v["data"]["phase"].as_str() {
                        progress(json!({ "kind": "report", "message": format!("{argv}: {p}") }));
                    }
                }
                _ => {}
            }
        })
        .await;
    // The stream broke or went silent: the run's record says how it ended (polled, up to
    // the run's own time limits and a minute more).
    let limit = Duration::from_secs(
        spec.timeout_sec.or(defaults.timeout_sec).unwrap_or(60)
            + spec
                .startup_timeout_sec
                .or(defaults.startup_timeout_sec)
                .unwrap_or(60)
            + 60,
    );
    let started = Instant::now();
    let mut record = Value::Null;
    loop {
        match s.service.get_run(run_id).await {
            Ok(r) => {
                record = r;
                if terminal(record["phase"].as_str().unwrap_or("")) {
                    break;
                }
            }
            Err(e) if ended.is_err() || started.elapsed() > limit => {
                record = json!({ "phase": "unknown", "message": e.to_string() });
                break;
            }
            Err(_) => {}
        }
        if started.elapsed() > limit {
            let _ = s.service.cancel_run(run_id).await;
            record["message"] = json!(format!(
                "the run did not finish within {} s; it was cancelled",
                limit.as_secs()
            ));
            break;
        }
        tokio::time::sleep(Duration::from_millis(if end.is_some() { 50 } else { 500 })).await;
    }
    if let Err(e) = &ended {
        send_log(
            s,
            run_id,
            "stderr",
            &format!("\n[the run's log stream failed: {e}]\n"),
            None,
        );
    }
    let phase = record["phase"]
        .as_str()
        .or_else(|| end.as_ref().and_then(|e| e["phase"].as_str()))
        .unwrap_or("unknown")
        .to_string();
    let exit_code = record["exit_code"]
        .as_i64()
        .or_else(|| end.as_ref().and_then(|e| e["exit_code"].as_i64()));
    let message = record["message"]
        .as_str()
        .or_else(|| end.as_ref().and_then(|e| e["message"].as_str()))
        .map(str::to_string);
    let passed = phase == "completed" && exit_code == Some(0);
    let diags = if passed {
        s.clear_all();
        Vec::new()
    } else {
        let target = target_file(&s.root, spec);
        let found = diagnose(
            &s.root,
            spec.cwd.as_deref(),
            &err.text,
            &out.text,
            &Outcome {
                run_id,
                phase: &phase,
                exit_code,
                message: message.as_deref(),
                artifacts_url: &s.service.url(&format!("/runs/{run_id}/artifacts")),
            },
            target.as_deref(),
        );
        s.clear_all();
        let mut by_uri: BTreeMap<String, Vec<Value>> = BTreeMap::new();
        for d in &found {
            by_uri
                .entry(d.uri.clone())
                .or_default()
                .push(d.diagnostic.clone());
        }
        {
            let mut st = s.state.lock();
            st.published.extend(by_uri.keys().cloned());
        }
        for (uri, ds) in &by_uri {
            s.publish(uri, ds.clone());
        }
        if found.is_empty() {
            // No file to put it on: the editor still hears why the run failed.
            s.show(
                1,
                &format!(
                    "Run in Sandbox: {argv} {}{}; log: {web}",
                    summary(&phase, exit_code),
                    message
                        .as_deref()
                        .map(|m| format!(": {m}"))
                        .unwrap_or_default()
                ),
            );
        }
        found
    };
    let summary_text = summary(&phase, exit_code);
    progress(json!({ "kind": "end", "message": summary_text }));
    s.notify(
        "tldw/sandbox/runFinished",
        json!({
            "run_id": run_id,
            "phase": phase,
            "exit_code": exit_code,
            "message": message,
            "summary": summary_text,
            "diagnostics": diags.iter().map(|d| json!({
                "uri": d.uri, "line": d.diagnostic["range"]["start"]["line"],
                "message": d.diagnostic["message"],
                "mapped": d.mapped,
            })).collect::<Vec<_>>(),
            "artifacts_url": s.service.url(&format!("/runs/{run_id}/artifacts")),
            "web_url": web,
        }),
    );
    if !s.tldw_client {
        s.notify(
            "window/logMessage",
            json!({ "type": if passed { 3 } else { 1 }, "message": format!("[{run_id}] {argv}: {summary_text}") }),
        );
    }
}

fn send_log(s: &Shared, run_id: &str, stream: &str, text: &str, seq: Option<u64>) {
    if text.is_empty() {
        return;
    }
    if s.tldw_client {
        s.notify(
            "tldw/sandbox/log",
            json!({ "run_id": run_id, "stream": stream, "text": text, "seq": seq }),
        );
    } else {
        // Clients without the extension's handler see the output in their LSP log.
        s.notify(
            "window/logMessage",
            json!({ "type": if stream == "stderr" { 2 } else { 4 }, "message": text }),
        );
    }
}

fn summary(phase: &str, exit_code: Option<i64>) -> String {
    match (phase, exit_code) {
        ("completed" | "failed", Some(c)) => format!("exited with code {c}"),
        ("timed_out", _) => "timed out".to_string(),
        ("killed", _) => "cancelled".to_string(),
        (p, Some(c)) => format!("{p} (exit code {c})"),
        (p, None) => p.to_string(),
    }
}

/// The workspace file a run is about: the first argument of its command that names one.
fn target_file(root: &Path, spec: &RunSpec) -> Option<PathBuf> {
    let cwd = spec.cwd.as_deref().unwrap_or("");
    spec.command.as_ref()?.iter().skip(1).find_map(|a| {
        let rel = sync::relative(&Path::new(cwd).join(a).to_string_lossy()).ok()?;
        let p = root.join(rel);
        p.is_file().then_some(p)
    })
}

struct Outcome<'a> {
    run_id: &'a str,
    phase: &'a str,
    exit_code: Option<i64>,
    message: Option<&'a str>,
    artifacts_url: &'a str,
}

struct Found {
    uri: String,
    diagnostic: Value,
    mapped: bool,
}

/// Where the sandboxes keep the workspace: the wasm tier's home, the containers' and
/// machines' `/workspace`.
const SANDBOX_ROOTS: &[&str] = &["/home/user", "/workspace"];

/// The workspace file a frame names, if any.
fn map_frame(root: &Path, cwd: Option<&str>, frame: &Frame) -> Option<PathBuf> {
    if traces::is_vendor(&frame.path) {
        return None;
    }
    let path = frame.path.strip_prefix("file://").unwrap_or(&frame.path);
    let candidates: Vec<String> = if frame.by_suffix {
        return find_by_suffix(root, path);
    } else if path.starts_with('/') {
        let mut v = Vec::new();
        for r in SANDBOX_ROOTS {
            if let Some(rest) = path.strip_prefix(r)
                && rest.starts_with('/')
            {
                v.push(rest.trim_start_matches('/').to_string());
            }
        }
        if let Ok(rest) = Path::new(path).strip_prefix(root) {
            v.push(rest.to_string_lossy().into_owned());
        }
        v
    } else {
        let mut v = Vec::new();
        if let Some(c) = cwd {
            v.push(Path::new(c).join(path).to_string_lossy().into_owned());
        }
        v.push(path.to_string());
        v
    };
    candidates.into_iter().find_map(|rel| {
        let rel = sync::relative(&rel).ok()?;
        let p = root.join(&rel);
        (p.is_file() && !traces::is_vendor(&format!("/{rel}"))).then_some(p)
    })
}

/// Java names a file by package and name only: the workspace file whose path ends so.
fn find_by_suffix(root: &Path, suffix: &str) -> Option<PathBuf> {
    let want = format!("/{suffix}");
    let mut walk = ignore::WalkBuilder::new(root);
    walk.hidden(false).require_git(false);
    walk.build()
        .filter_map(Result::ok)
        .filter(|e| e.file_type().is_some_and(|t| t.is_file()))
        .map(|e| e.into_path())
        .find(|p| {
            let s = p.to_string_lossy();
            s.ends_with(&want) && !traces::is_vendor(&s)
        })
}

/// The diagnostics of a failed run: the first failure with a frame in the workspace, on that
/// frame's line; else the first failure found, on the run's file with the sandbox path and
/// an artifacts link; else the exit summary on the run's file.
fn diagnose(
    root: &Path,
    cwd: Option<&str>,
    stderr: &str,
    stdout: &str,
    o: &Outcome<'_>,
    target: Option<&Path>,
) -> Vec<Found> {
    let mut failures: Vec<Failure> = traces::parse(stderr);
    failures.extend(traces::parse(stdout));
    let exit = summary(o.phase, o.exit_code);
    let diag = |line: u32, col: Option<u32>, msg: String, lang: &str, href: Option<&str>| {
        let line = line.saturating_sub(1);
        let col = col.map(|c| c.saturating_sub(1)).unwrap_or(0);
        let mut d = json!({
            "range": { "start": { "line": line, "character": col },
                       "end": { "line": line, "character": if col == 0 { 1000 } else { col + 1 } } },
            "severity": 1,
            "source": format!("sandbox ({lang})"),
            "code": o.run_id,
            "message": msg,
            "data": { "run_id": o.run_id },
        });
        if let Some(h) = href {
            d["codeDescription"] = json!({ "href": h });
        }
        d
    };
    for f in &failures {
        for fr in &f.frames {
            if let Some(p) = map_frame(root, cwd, fr) {
                return vec![Found {
                    uri: uri_of_path(&p),
                    diagnostic: diag(
                        fr.line,
                        fr.column,
                        format!("{}\n{exit} (run {})", f.message, o.run_id),
                        f.lang.name(),
                        None,
                    ),
                    mapped: true,
                }];
            }
        }
    }
    let Some(target) = target else {
        return Vec::new();
    };
    let uri = uri_of_path(target);
    if let Some(f) = failures.first() {
        // The innermost frame that is not the runtime's own, else the innermost.
        let fr = f
            .frames
            .iter()
            .find(|fr| !traces::is_vendor(&fr.path))
            .or(f.frames.first());
        let at = fr
            .map(|fr| {
                format!(
                    " at {}:{} (in the sandbox, outside the workspace)",
                    fr.path, fr.line
                )
            })
            .unwrap_or_default();
        return vec![Found {
            uri,
            diagnostic: diag(
                1,
                None,
                format!(
                    "{}{at}\n{exit} (run {}); reveal in artifacts: {}",
                    f.message, o.run_id, o.artifacts_url
                ),
                f.lang.name(),
                Some(o.artifacts_url),
            ),
            mapped: false,
        }];
    }
    let last = stderr
        .lines()
        .rev()
        .find(|l| !l.trim().is_empty())
        .map(|l| format!(": {}", l.trim()))
        .or_else(|| o.message.map(|m| format!(": {m}")))
        .unwrap_or_default();
    vec![Found {
        uri,
        diagnostic: diag(
            1,
            None,
            format!("{exit}{last} (run {})", o.run_id),
            "run",
            Some(o.artifacts_url),
        ),
        mapped: false,
    }]
}

#[cfg(test)]
mod tests {
    use super::*;

    fn outcome() -> Outcome<'static> {
        Outcome {
            run_id: "r1",
            phase: "completed",
            exit_code: Some(1),
            message: None,
            artifacts_url: "http://x/api/v1/sandbox/runs/r1/artifacts",
        }
    }

    fn workspace(files: &[&str]) -> tempfile::TempDir {
        let d = tempfile::tempdir().unwrap();
        for f in files {
            let p = d.path().join(f);
            std::fs::create_dir_all(p.parent().unwrap()).unwrap();
            std::fs::write(p, "x\n").unwrap();
        }
        d
    }

    #[test]
    fn the_first_workspace_frame_nearest_the_failure_wins() {
        let w = workspace(&["app/main.py", "app/lib.py", ".venv/lib/site-packages/x.py"]);
        let t = "Traceback (most recent call last):\n  File \"/home/user/app/main.py\", line 5, in <module>\n  File \"/home/user/app/lib.py\", line 2, in f\n  File \"/home/user/.venv/lib/site-packages/x.py\", line 9, in g\nValueError: bad\n";
        let f = diagnose(w.path(), None, t, "", &outcome(), None);
        assert_eq!(f.len(), 1);
        assert!(f[0].mapped);
        assert!(f[0].uri.ends_with("/app/lib.py"), "{}", f[0].uri);
        assert_eq!(f[0].diagnostic["range"]["start"]["line"], 1);
        let msg = f[0].diagnostic["message"].as_str().unwrap();
        assert!(
            msg.starts_with("ValueError: bad\nexited with code 1"),
            "{msg}"
        );
    }

    #[test]
    fn frames_outside_the_workspace_fall_back_to_the_run_s_file_with_an_artifacts_link() {
        let w = workspace(&["main.py"]);
        let t = "Traceback (most recent call last):\n  File \"/tmp/gen/other.py\", line 3, in <module>\nKeyError: 'k'\n";
        let target = w.path().join("main.py");
        let f = diagnose(w.path(), None, t, "", &outcome(), Some(&target));
        assert!(!f[0].mapped);
        assert!(f[0].uri.ends_with("/main.py"));
        let d = &f[0].diagnostic;
        assert_eq!(d["codeDescription"]["href"], outcome().artifacts_url);
        assert!(
            d["message"]
                .as_str()
                .unwrap()
                .contains("/tmp/gen/other.py:3")
        );
        // Nothing to attach it to: none.
        assert!(diagnose(w.path(), None, t, "", &outcome(), None).is_empty());
    }

    #[test]
    fn java_frames_are_found_by_package_path() {
        let w = workspace(&["src/main/java/com/acme/App.java"]);
        let t = "Exception in thread \"main\" java.lang.IllegalStateException: boom\n\tat com.acme.App.run(App.java:7)\n";
        let f = diagnose(w.path(), None, t, "", &outcome(), None);
        assert!(f[0].uri.ends_with("src/main/java/com/acme/App.java"));
        assert_eq!(f[0].diagnostic["range"]["start"]["line"], 6);
    }

    #[test]
    fn relative_frames_resolve_against_the_run_s_directory() {
        let w = workspace(&["svc/main.go"]);
        let f = diagnose(
            w.path(),
            Some("svc"),
            "./main.go:5:2: undefined: x\n",
            "",
            &outcome(),
            None,
        );
        assert!(f[0].uri.ends_with("/svc/main.go"));
        assert_eq!(f[0].diagnostic["range"]["start"]["character"], 1);
    }

    #[test]
    fn no_trace_gives_the_exit_summary_and_the_last_error_line() {
        let w = workspace(&["run.sh"]);
        let target = w.path().join("run.sh");
        let f = diagnose(
            w.path(),
            None,
            "oops\nfatal: no\n",
            "",
            &outcome(),
            Some(&target),
        );
        assert_eq!(
            f[0].diagnostic["message"],
            "exited with code 1: fatal: no (run r1)"
        );
    }

    #[test]
    fn a_re_run_merges_its_fields_over_the_last_spec() {
        let last = RunSpec {
            command: Some(vec!["python3".into(), "a.py".into()]),
            timeout_sec: Some(5),
            ..RunSpec::default()
        };
        let next = RunSpec {
            timeout_sec: Some(9),
            ..RunSpec::default()
        }
        .over(&last);
        assert_eq!(next.command, last.command);
        assert_eq!(next.timeout_sec, Some(9));
        let err = serde_json::from_value::<RunSpec>(json!({ "comand": ["x"] })).unwrap_err();
        assert!(err.to_string().contains("unknown field `comand`"), "{err}");
    }
}
