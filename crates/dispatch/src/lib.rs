//! `wasmsand-dispatch`: the JSON-RPC 2.0 method table of wasmsand, over one root sandbox and
//! the forks made from it, with no knowledge of any transport.
//!
//! - [`Dispatcher`] answers one request at a time in the calling thread ([`Dispatcher::handle`]).
//!   Every request may name its sandbox with `sandboxId` (absent or null: the root).
//! - [`Server`] adds what a transport needs: requests on the same sandbox run in arrival order,
//!   requests on different sandboxes run concurrently, `kill` and `create` take effect at once,
//!   and the [`Outbox`] lets the server call the client and match its answers by id.
//! - The line protocol (objects with a `type`: `shell`, `write_file`, `read_file`, `reset`,
//!   `status`) is answered by the same dispatcher against the root sandbox
//!   ([`Dispatcher::handle`] picks the protocol from the object's members).
//!
//! ```no_run
//! use std::sync::Arc;
//! use wasmsand_dispatch::{DispatchConfig, Dispatcher};
//! let d = Dispatcher::new(DispatchConfig::default());
//! let req = serde_json::json!({"jsonrpc":"2.0","id":1,"method":"run","params":{"command":"echo hi"}});
//! let resp = d.handle(&req, &(Arc::new(|_| {}) as wasmsand_dispatch::Notify)).unwrap();
//! assert_eq!(resp["result"]["stdout"], "hi\n");
//! ```

#![forbid(unsafe_code)]

mod error;
mod line_protocol;
mod mounts;
mod params;
mod preview;
mod process;
mod sdk;
mod server;
mod text;

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::Instant;

use base64::Engine as _;
use parking_lot::Mutex;
use serde_json::{Map, Value, json};
use wasmsand::{ErrorClass, Limits, LimitsPatch, RunOptions, Sandbox, SandboxOptions, SnapshotId};

pub use error::{RpcError, code, kind};
pub use line_protocol::{
    LineStatus, LineTarget, ShellAnswer, answer_line_request, answer_too_large,
    answer_unparsed_line,
};
pub use server::{CallError, Outbox, Server};

/// The limits registry as JSON, `[{name, wire, default, unit, doc}]` in the crate's order: what
/// the language bindings hand their SDKs, which take the limits' wire names from it.
pub fn limit_specs_json() -> String {
    let specs: Vec<Value> = Limits::SPECS
        .iter()
        .map(|l| {
            serde_json::json!({
                "name": l.name,
                "wire": l.wire,
                "default": l.default,
                "unit": format!("{:?}", l.unit).to_lowercase(),
                "doc": l.doc,
            })
        })
        .collect();
    Value::Array(specs).to_string()
}

use params::Params;

/// Receives the notifications (`output` chunks) a request sends while it runs.
pub type Notify = Arc<dyn Fn(Value) + Send + Sync>;

/// Calls the client (method, params) and waits for its result or its error message: how
/// host tools registered with `tools.register` reach the code that implements them.
pub type ClientCall = Arc<dyn Fn(&str, Value) -> Result<Value, String> + Send + Sync>;

/// Smallest and largest line cap a client may ask for with `create`'s `limits.rpcBytes`, so
/// that a client can neither make every request too large nor lift the memory bound.
pub const MIN_RPC_BYTES: u64 = 1024;
/// See [`MIN_RPC_BYTES`].
pub const MAX_RPC_BYTES: u64 = 128 * 1024 * 1024;

/// How the root sandbox is made (a `create` request can still change its limits).
#[derive(Debug, Clone, Default)]
pub struct DispatchConfig {
    /// The root sandbox's limits; `limits.rpc_bytes` is also the line cap a transport reads
    /// with until a `create` changes it.
    pub limits: Limits,
    /// Environment variables set in the root sandbox's shell (forks inherit them).
    pub env: Vec<(String, String)>,
    /// Where compiled guest modules are cached on disk (`None`: the default cache).
    pub cache_dir: Option<PathBuf>,
    /// Host folders mounted in the root sandbox (the server's `--mount` flags); `create`
    /// may add more.
    pub mounts: Vec<wasmsand::HostMount>,
}

/// One parsed JSON-RPC request.
#[derive(Debug, Clone)]
pub struct Request {
    /// `None` for a notification (no answer is sent).
    pub id: Option<Value>,
    /// The method name, e.g. `run` or `files.write`.
    pub method: String,
    /// The named parameters (an absent or null `params` is an empty object; positional ones
    /// are refused with `invalid_params`).
    pub params: Map<String, Value>,
}

impl Request {
    /// Validates a JSON-RPC 2.0 request object. On failure, the error comes with the id to
    /// answer with (null when none could be read).
    pub fn parse(v: &Value) -> Result<Request, (Option<Value>, RpcError)> {
        let Some(obj) = v.as_object() else {
            let message = if v.is_array() {
                "Invalid Request: batch requests are not supported"
            } else {
                "Invalid Request: not an object"
            };
            return Err((None, RpcError::invalid_request(message)));
        };
        let id = match obj.get("id") {
            None => None,
            Some(id @ (Value::String(_) | Value::Number(_) | Value::Null)) => Some(id.clone()),
            Some(_) => {
                return Err((
                    None,
                    RpcError::invalid_request("Invalid Request: id must be a string or a number"),
                ));
            }
        };
        if obj.get("jsonrpc").and_then(Value::as_str) != Some("2.0") {
            return Err((
                id,
                RpcError::invalid_request("Invalid Request: jsonrpc must be \"2.0\""),
            ));
        }
        let Some(method) = obj.get("method").and_then(Value::as_str) else {
            return Err((
                id,
                RpcError::invalid_request("Invalid Request: method must be a string"),
            ));
        };
        let params = match obj.get("params") {
            None | Some(Value::Null) => Map::new(),
            Some(Value::Object(m)) => m.clone(),
            Some(_) => {
                return Err((id, RpcError::invalid_params("params must be an object")));
            }
        };
        Ok(Request {
            id,
            method: method.to_string(),
            params,
        })
    }

    /// The answer to this request, or `None` for a notification.
    pub fn respond(&self, outcome: Result<Value, RpcError>) -> Option<Value> {
        let id = self.id.as_ref()?;
        Some(match outcome {
            Ok(result) => json!({"jsonrpc": "2.0", "id": id, "result": result}),
            Err(e) => e.response(Some(id)),
        })
    }
}

struct Root {
    live: Arc<Sandbox>,
    /// Never run on: `reset` forks it to get the initial state back in O(1).
    pristine: Sandbox,
}

struct Fork {
    sandbox: Arc<Sandbox>,
    parent: Option<String>,
}

#[derive(Default)]
struct State {
    root: Option<Root>,
    forks: HashMap<String, Fork>,
    /// Fork ids count up and are never reused, so a stale id can never reach a newer fork.
    next_fork: u64,
}

/// The method table over a root sandbox and its forks. `Send + Sync`; see the crate docs.
pub struct Dispatcher {
    config: DispatchConfig,
    state: Mutex<State>,
    /// Whether any request has arrived: `create` is only accepted as the first.
    seen: AtomicBool,
    killed: AtomicBool,
    rpc_bytes: AtomicU64,
    started: Instant,
    /// How tool calls reach the client; set by the transport.
    client: Mutex<Option<ClientCall>>,
    /// Where background processes' notifications go when the transport has a place that
    /// outlives a request (sandboxd's stdout, the Python module's handler).
    notifier: Mutex<Option<Notify>>,
    /// The cancel token of each `run` queued or running, by its request id as JSON text (so
    /// `1` and `"1"` stay apart): `run.cancel` finds a run here even before its lane starts
    /// it.
    runs: Mutex<HashMap<String, wasmsand::CancelToken>>,
}

impl Dispatcher {
    /// Lets tools registered by the client (`tools.register`) call it back through `call`.
    pub fn set_client(&self, call: ClientCall) {
        *self.client.lock() = Some(call);
    }

    /// Sends the `process.output` / `process.exit` notifications of background processes
    /// started from now on to `notify`, instead of to the `process.start` request's own.
    pub fn set_notifier(&self, notify: Notify) {
        *self.notifier.lock() = Some(notify);
    }

    /// A dispatcher whose root sandbox is made from `config` on first use.
    pub fn new(config: DispatchConfig) -> Dispatcher {
        Dispatcher {
            rpc_bytes: AtomicU64::new(config.limits.rpc_bytes),
            config,
            state: Mutex::new(State {
                next_fork: 1,
                ..State::default()
            }),
            seen: AtomicBool::new(false),
            killed: AtomicBool::new(false),
            started: Instant::now(),
            client: Mutex::new(None),
            notifier: Mutex::new(None),
            runs: Mutex::new(HashMap::new()),
        }
    }

    /// Makes a `run` request cancellable from its arrival: a transport that queues requests
    /// calls this when it queues one, so a `run.cancel` that overtakes it still stops it.
    pub fn note_run(&self, id: &Value) {
        self.runs.lock().entry(id.to_string()).or_default();
    }

    /// `run.cancel {requestId}`: stops the `run` request with that id, running or queued
    /// (it answers its own request with `errorClass: "CANCELLED"`, exit 130). `cancelled` is
    /// false when no such run is pending, which includes one that has already answered.
    fn cancel_run(&self, p: Params) -> Result<Value, RpcError> {
        let id = match p.0.get("requestId") {
            Some(v @ (Value::String(_) | Value::Number(_))) => v,
            _ => {
                return Err(RpcError::invalid_params(
                    "requestId must be the id (a string or a number) of a run request",
                ));
            }
        };
        let token = self.runs.lock().get(&id.to_string()).cloned();
        if let Some(token) = &token {
            token.cancel();
        }
        Ok(json!({"cancelled": token.is_some()}))
    }

    /// The longest request line a transport should accept now (`create` may change it).
    pub fn rpc_bytes(&self) -> u64 {
        self.rpc_bytes.load(Ordering::Relaxed)
    }

    /// Whether `kill` has run: a transport then stops.
    pub fn is_killed(&self) -> bool {
        self.killed.load(Ordering::SeqCst)
    }

    /// Records that a request arrived, in arrival order (for `create`'s "must be first").
    pub fn note_arrival(&self) {
        self.seen.store(true, Ordering::SeqCst);
    }

    /// Answers one request object of either protocol in the calling thread: a JSON-RPC
    /// request (`"jsonrpc"` member) or a line-protocol request (`"type"` member). `None` for a
    /// JSON-RPC notification.
    pub fn handle(&self, request: &Value, notify: &Notify) -> Option<Value> {
        if let Some(obj) = request.as_object()
            && !obj.contains_key("jsonrpc")
            && obj.contains_key("type")
        {
            self.note_arrival();
            return Some(self.handle_line_request(obj));
        }
        match Request::parse(request) {
            Ok(req) => self.execute(&req, notify),
            Err((id, e)) => Some(e.response(id.as_ref())),
        }
    }

    /// Runs a parsed JSON-RPC request and builds its answer.
    pub fn execute(&self, req: &Request, notify: &Notify) -> Option<Value> {
        let outcome = self.call(req, notify);
        req.respond(outcome)
    }

    fn call(&self, req: &Request, notify: &Notify) -> Result<Value, RpcError> {
        let p = Params(&req.params);
        if req.method == "create" {
            return self.create(p);
        }
        self.note_arrival();
        match req.method.as_str() {
            "run" => self.run(p, req.id.as_ref(), notify),
            "run.cancel" => self.cancel_run(p),
            "files.write" => self.files_write(p),
            "files.read" => self.files_read(p),
            "files.rename" => self.files_rename(p),
            "files.list" => self.on(p, |sb| {
                let entries: Vec<Value> = sb
                    .list(p.str("path")?)?
                    .into_iter()
                    .map(|e| json!({"name": e.name, "type": e.kind.as_str(), "size": e.size}))
                    .collect();
                Ok(json!({"entries": entries}))
            }),
            "files.mkdir" => self.on(p, |sb| Ok(sb.mkdir(p.str("path")?)?)),
            "files.rm" => {
                let recursive = p.opt_bool("recursive")?.unwrap_or(false);
                self.on(p, |sb| Ok(sb.remove(p.str("path")?, recursive)?))
            }
            "files.stat" => self.on(p, |sb| {
                let info = sb.stat(p.str("path")?)?;
                Ok(json!({"name": info.name, "type": info.kind.as_str(), "size": info.size}))
            }),
            "env.set" => self.on(p, |sb| Ok(sb.set_env(p.str("name")?, p.str("value")?)?)),
            "tools.register" => self.register_tool(p),
            "tools.unregister" => self.on(p, |sb| {
                let name = p.str("name")?;
                Ok(json!({"removed": sb.remove_tool(name)}))
            }),
            "tools.list" => self.on(p, |sb| Ok(json!({"tools": sb.tool_names()}))),
            "env.get" => self.on(p, |sb| Ok(json!({"value": sb.get_env(p.str("name")?)?}))),
            "snapshot.create" => self.on(p, |sb| Ok(json!({"id": sb.snapshot()?.to_string()}))),
            "snapshot.restore" => {
                let id = p.snapshot_id("id")?;
                self.on(p, |sb| Ok(sb.restore(id)?))
            }
            "sandbox.fork" => self.fork(p),
            "sandbox.export" => {
                let key = p.opt_base64("key")?;
                self.on(p, |sb| {
                    let blob = sb.export_state(key.as_deref())?;
                    Ok(json!({"data": base64::engine::general_purpose::STANDARD.encode(&blob)}))
                })
            }
            "sandbox.import" => self.import(p),
            "sandbox.merge" => self.merge(p),
            "sandbox.destroy" => self.destroy_fork(p),
            "sandbox.list" => Ok(self.list()),
            "sandbox.mount" | "sandbox.mounts" | "sandbox.diff" | "sandbox.exportChanges" => {
                self.mounts_call(req.method.as_str(), p)
            }
            "sandbox.commit" => self.commit_preview(p),
            "sandbox.discard" => self.discard_preview(p),
            "sandbox.bestOf" => self.best_of(p),
            m if m.starts_with("process.") => self.process_call(m, p, notify),
            "kill" => {
                self.kill();
                Ok(json!({"ok": true}))
            }
            other => Err(RpcError::method_not_found(other)),
        }
    }

    /// Runs `f` on the sandbox the request names; `()` answers `{ok: true}`.
    fn on<T: IntoResult>(
        &self,
        p: Params,
        f: impl FnOnce(&Sandbox) -> Result<T, Failure>,
    ) -> Result<Value, RpcError> {
        let (sb, fork) = self.resolve(p)?;
        match f(&sb) {
            Ok(v) => Ok(v.into_result()),
            Err(Failure::Rpc(e)) => Err(e),
            Err(Failure::Sandbox(e)) => Err(RpcError::from_sandbox(e, fork.as_deref())),
        }
    }

    /// The sandbox a request addresses, and its fork id (None for the root).
    fn resolve(&self, p: Params) -> Result<(Arc<Sandbox>, Option<String>), RpcError> {
        match p.0.get("sandboxId") {
            None | Some(Value::Null) => self.sandbox(None),
            Some(Value::String(id)) => self.sandbox(Some(id)),
            Some(_) => Err(RpcError::invalid_params("sandboxId must be a string")),
        }
    }

    /// The sandbox named by a fork id (`None`: the root), and that id.
    fn sandbox(&self, id: Option<&str>) -> Result<(Arc<Sandbox>, Option<String>), RpcError> {
        let Some(id) = id else {
            return Ok((self.root()?, None));
        };
        match self.state.lock().forks.get(id) {
            Some(f) => Ok((f.sandbox.clone(), Some(id.to_string()))),
            None => Err(RpcError::unknown_sandbox(id)),
        }
    }

    /// The root sandbox, made with the configured limits on first use when no `create` came.
    fn root(&self) -> Result<Arc<Sandbox>, RpcError> {
        if self.is_killed() {
            return Err(RpcError::destroyed());
        }
        let mut state = self.state.lock();
        if state.root.is_none() {
            state.root = Some(self.make_root(self.config.limits, &[])?);
        }
        Ok(state.root.as_ref().expect("just set").live.clone())
    }

    /// The root sandbox with the configured mounts and then `more`; its pristine copy (for
    /// `reset`) is taken after them, so a reset keeps the host folders.
    fn make_root(&self, limits: Limits, more: &[wasmsand::HostMount]) -> Result<Root, RpcError> {
        let live = Sandbox::new(SandboxOptions {
            limits,
            env: self.config.env.clone(),
            cache_dir: self.config.cache_dir.clone(),
            ..SandboxOptions::default()
        });
        for mounts in [&self.config.mounts[..], more] {
            live.mount_all(mounts)
                .map_err(|e| RpcError::from_sandbox(e, None))?;
        }
        let pristine = live.fork().expect("a new sandbox forks");
        Ok(Root {
            live: Arc::new(live),
            pristine,
        })
    }

    fn create(&self, p: Params) -> Result<Value, RpcError> {
        if self.seen.swap(true, Ordering::SeqCst) {
            let created = self.state.lock().root.is_some();
            return Err(RpcError::invalid_request(if created {
                "Sandbox already created"
            } else {
                "create must be the first request"
            }));
        }
        let made = self.create_root(p);
        if made.is_err() && self.state.lock().root.is_none() {
            // Nothing was made: the client may correct the request and send `create` again.
            self.seen.store(false, Ordering::SeqCst);
        }
        made
    }

    fn create_root(&self, p: Params) -> Result<Value, RpcError> {
        let mut limits = self.config.limits;
        if let Some(t) = p.opt_u64("timeoutMs")? {
            limits.timeout_ms = t;
        }
        if let Some(b) = p.opt_u64("fsLimitBytes")? {
            limits.fs_bytes = b;
        }
        if let Some(v) = p.0.get("limits").filter(|v| !v.is_null()) {
            let patch: LimitsPatch = serde_json::from_value(v.clone())
                .map_err(|e| RpcError::invalid_params(format!("Invalid param: limits: {e}")))?;
            limits.apply(&patch);
        }
        let deterministic = p.determinism()?;
        let network = p.network()?;
        let rpc = limits.rpc_bytes.clamp(MIN_RPC_BYTES, MAX_RPC_BYTES);
        self.rpc_bytes.store(rpc, Ordering::Relaxed);
        let root = self.make_root(limits, &mounts::mounts_param(p)?)?;
        if network.is_some() {
            // The pristine copy too, so `reset` keeps the network.
            for sb in [&*root.live, &root.pristine] {
                sb.set_network(network.clone());
            }
        }
        if deterministic.is_some() {
            // The pristine copy too, so `reset` comes back deterministic.
            for sb in [&*root.live, &root.pristine] {
                sb.set_deterministic(deterministic)
                    .map_err(|e| RpcError::from_sandbox(e, None))?;
            }
        }
        self.state.lock().root = Some(root);
        Ok(json!({"ok": true}))
    }

    fn run(&self, p: Params, id: Option<&Value>, notify: &Notify) -> Result<Value, RpcError> {
        let registered = id.map(|id| {
            let key = id.to_string();
            let token = self.runs.lock().entry(key.clone()).or_default().clone();
            RunEntry {
                runs: &self.runs,
                key,
                token,
            }
        });
        let cancel = registered.as_ref().map(|r| r.token.clone());
        self.run_as(p, id, notify, cancel)
    }

    fn run_as(
        &self,
        p: Params,
        id: Option<&Value>,
        notify: &Notify,
        cancel: Option<wasmsand::CancelToken>,
    ) -> Result<Value, RpcError> {
        let command = sdk::scoped_command(p)?;
        let stream = p.opt_bool("stream")?.unwrap_or(false);
        let (sb, fork) = self.resolve(p)?;
        let mut opts = RunOptions {
            // A per-run override of the sandbox's timeout (the Python SDK's `timeout_ms=`).
            timeout_ms: p.opt_u64("timeoutMs")?,
            // All or nothing: a failed run leaves the sandbox as it was (`rolledBack`).
            atomic: p.opt_bool("atomic")?.unwrap_or(false),
            // Bytes the command reads as its standard input (the SDKs' `stdin=`).
            stdin: sdk::run_stdin(p)?.map(Into::into),
            // Past a stream's cap: head + tail and a spill file, or (`plain`) the first
            // `cap` bytes only.
            truncation: p.truncation()?,
            // `usage: false`: no receipt (only `wallMs`), for callers that never read it.
            skip_usage: !p.opt_bool("usage")?.unwrap_or(true),
            cancel,
            ..RunOptions::default()
        };
        // Chunks are decoded as UTF-8 across chunk boundaries, so a character split between
        // two writes is not turned into two replacement characters.
        let streams = match (stream, id) {
            (true, Some(id)) => {
                let out = text::StreamSender::new(id.clone(), "stdout", notify.clone());
                let err = text::StreamSender::new(id.clone(), "stderr", notify.clone());
                opts.on_stdout = Some(out.callback());
                opts.on_stderr = Some(err.callback());
                Some((out, err))
            }
            _ => None,
        };
        if p.opt_bool("preview")?.unwrap_or(false) {
            let made = sb.preview(&command, opts);
            if let Some((out, err)) = streams {
                out.finish();
                err.finish();
            }
            let made = made.map_err(|e| RpcError::from_sandbox(e, fork.as_deref()))?;
            return self.preview_answer(made, fork);
        }
        let result = sb.run_with(&command, opts);
        if let Some((out, err)) = streams {
            out.finish();
            err.finish();
        }
        let result = result.map_err(|e| RpcError::from_sandbox(e, fork.as_deref()))?;
        serde_json::to_value(result).map_err(RpcError::internal)
    }

    /// `tools.register {name, description?, inputSchema?}`: a tool guests call (`from host
    /// import tools`) that the client implements; each call becomes a `tool.call {name, args,
    /// sandboxId}` request to the client, whose error message (never a traceback) reaches
    /// the guest as `host.ToolError`.
    fn register_tool(&self, p: Params) -> Result<Value, RpcError> {
        let name = p.str("name")?.to_string();
        let description = match p.0.get("description") {
            None | Some(Value::Null) => String::new(),
            Some(Value::String(s)) => s.clone(),
            Some(_) => {
                return Err(RpcError::invalid_params(
                    "Invalid param: description must be a string",
                ));
            }
        };
        let input_schema = p.0.get("inputSchema").filter(|v| !v.is_null()).cloned();
        let Some(client) = self.client.lock().clone() else {
            return Err(RpcError::invalid_request(
                "this transport cannot call the client back, so it cannot host tools",
            ));
        };
        let sandbox_id = p.0.get("sandboxId").cloned().unwrap_or(Value::Null);
        let tool_name = name.clone();
        let handler: wasmsand::ToolHandler = Arc::new(move |args: Value| {
            client(
                "tool.call",
                json!({"name": tool_name, "args": args, "sandboxId": sandbox_id}),
            )
        });
        self.on(p, |sb| {
            sb.add_tool(wasmsand::Tool {
                name,
                description,
                input_schema,
                handler,
            })
            .map_err(|e| Failure::Rpc(RpcError::invalid_params(e.to_string())))?;
            Ok(json!({"ok": true}))
        })
    }

    fn fork(&self, p: Params) -> Result<Value, RpcError> {
        let (parent, parent_id) = self.resolve(p)?;
        let child = parent
            .fork()
            .map_err(|e| RpcError::from_sandbox(e, parent_id.as_deref()))?;
        let id = self.register_fork(child, parent_id)?;
        Ok(json!({"sandboxId": id}))
    }

    /// Names a fork of `parent` (None: the root) with a new `sandboxId`.
    fn register_fork(&self, child: Sandbox, parent: Option<String>) -> Result<String, RpcError> {
        let mut state = self.state.lock();
        if self.is_killed() {
            child.destroy();
            return Err(RpcError::destroyed());
        }
        let id = state.next_fork.to_string();
        state.next_fork += 1;
        state.forks.insert(
            id.clone(),
            Fork {
                sandbox: Arc::new(child),
                parent,
            },
        );
        Ok(id)
    }

    /// `sandbox.merge {sandboxId?, from, env?, cwd?}`: the files fork `from` changed since it
    /// was forked from `sandboxId` (or last merged into it) are applied there, three-way; a
    /// conflict applies nothing and answers `data.kind = "merge_conflict"` with the list.
    fn merge(&self, p: Params) -> Result<Value, RpcError> {
        let from = p.str("from")?;
        let opts = wasmsand::MergeOptions {
            env: p.opt_bool("env")?.unwrap_or(false),
            cwd: p.opt_bool("cwd")?.unwrap_or(false),
        };
        let (parent, parent_id) = self.resolve(p)?;
        if parent_id.as_deref() == Some(from) {
            return Err(RpcError::invalid_params(
                "Invalid param: from names the sandbox merged into; a sandbox cannot be merged into itself",
            ));
        }
        let fork = {
            let state = self.state.lock();
            match state.forks.get(from) {
                Some(f) => f.sandbox.clone(),
                None => return Err(RpcError::unknown_sandbox(from)),
            }
        };
        let r = parent
            .merge(&fork, opts)
            .map_err(|e| RpcError::from_sandbox(e, parent_id.as_deref()))?;
        let count = |c: wasmsand::SideChange| r.applied.iter().filter(|a| a.change == c).count();
        let applied: Vec<Value> = r
            .applied
            .iter()
            .map(|a| json!({"path": a.path, "change": a.change.as_str()}))
            .collect();
        Ok(json!({
            "applied": applied,
            "added": count(wasmsand::SideChange::Added),
            "changed": count(wasmsand::SideChange::Changed),
            "deleted": count(wasmsand::SideChange::Deleted),
            "env": r.env,
            "cwd": r.cwd,
        }))
    }

    /// `sandbox.import {data, key?}`: the root becomes the sandbox the blob describes (its
    /// files, shell state and limits); forks are left as they are. A blob that does not open
    /// changes nothing.
    fn import(&self, p: Params) -> Result<Value, RpcError> {
        if !matches!(p.0.get("sandboxId"), None | Some(Value::Null)) {
            return Err(RpcError::invalid_params(
                "sandbox.import replaces the root sandbox; it takes no sandboxId",
            ));
        }
        let data = p.base64("data")?;
        let key = p.opt_base64("key")?;
        self.root()?;
        let imported = Sandbox::import_state(
            &data,
            wasmsand::ImportOptions {
                key,
                // The files, their paths and the shell state: a payload past twice the
                // configured filesystem size is no sandbox this server would hold.
                max_bytes: Some(
                    (self.config.limits.fs_bytes.saturating_mul(2) + (16 << 20))
                        .min(wasmsand::DEFAULT_MAX_STATE_BYTES),
                ),
                cache_dir: self.config.cache_dir.clone(),
            },
        )
        .map_err(|e| RpcError::from_sandbox(e, None))?;
        let old = {
            let mut state = self.state.lock();
            let Some(root) = state.root.as_mut() else {
                return Err(RpcError::destroyed());
            };
            std::mem::replace(&mut root.live, Arc::new(imported))
        };
        old.destroy();
        Ok(json!({"ok": true}))
    }

    fn destroy_fork(&self, p: Params) -> Result<Value, RpcError> {
        let id = match p.0.get("sandboxId") {
            None | Some(Value::Null) => {
                return Err(RpcError::invalid_params(
                    "Missing required param: sandboxId (the root is ended with kill)",
                ));
            }
            Some(Value::String(s)) => s.clone(),
            Some(_) => return Err(RpcError::invalid_params("sandboxId must be a string")),
        };
        let fork = self.state.lock().forks.remove(&id);
        match fork {
            Some(f) => {
                f.sandbox.destroy();
                Ok(json!({"ok": true}))
            }
            None => Err(RpcError::unknown_sandbox(&id)),
        }
    }

    fn list(&self) -> Value {
        let state = self.state.lock();
        let mut ids: Vec<(&String, &Fork)> = state.forks.iter().collect();
        ids.sort_by(|a, b| (a.0.len(), a.0).cmp(&(b.0.len(), b.0)));
        let forks: Vec<Value> = ids
            .into_iter()
            .map(|(id, f)| json!({"sandboxId": id, "parent": f.parent}))
            .collect();
        Value::Array(forks)
    }

    /// Destroys every fork and the root; commands running in them end as cancelled.
    pub fn kill(&self) {
        self.killed.store(true, Ordering::SeqCst);
        let (root, forks) = {
            let mut state = self.state.lock();
            (state.root.take(), std::mem::take(&mut state.forks))
        };
        for f in forks.into_values() {
            f.sandbox.destroy();
        }
        if let Some(r) = root {
            r.live.destroy();
            r.pristine.destroy();
        }
    }

    /// Puts the root back to its initial state (files, variables, cwd, snapshots).
    fn reset_root(&self) -> Result<(), RpcError> {
        self.root()?;
        let old = {
            let mut state = self.state.lock();
            let root = state.root.as_mut().expect("root() made it");
            let fresh = root
                .pristine
                .fork()
                .map_err(|e| RpcError::from_sandbox(e, None))?;
            std::mem::replace(&mut root.live, Arc::new(fresh))
        };
        old.destroy();
        Ok(())
    }

    fn uptime_ms(&self) -> u64 {
        self.started.elapsed().as_millis() as u64
    }
}

/// What a method body can fail with.
enum Failure {
    Rpc(RpcError),
    Sandbox(wasmsand::SandboxError),
}

impl From<RpcError> for Failure {
    fn from(e: RpcError) -> Self {
        Failure::Rpc(e)
    }
}

impl From<wasmsand::SandboxError> for Failure {
    fn from(e: wasmsand::SandboxError) -> Self {
        Failure::Sandbox(e)
    }
}

trait IntoResult {
    fn into_result(self) -> Value;
}

impl IntoResult for () {
    fn into_result(self) -> Value {
        json!({"ok": true})
    }
}

impl IntoResult for Value {
    fn into_result(self) -> Value {
        self
    }
}

/// A run's place in [`Dispatcher::runs`], left when the run answers however it ends (an
/// invalid parameter included), so a later `run.cancel` of that id finds nothing.
struct RunEntry<'a> {
    runs: &'a Mutex<HashMap<String, wasmsand::CancelToken>>,
    key: String,
    token: wasmsand::CancelToken,
}

impl Drop for RunEntry<'_> {
    fn drop(&mut self) {
        self.runs.lock().remove(&self.key);
    }
}

fn is_timeout(r: &wasmsand::RunResult) -> bool {
    r.error_class == Some(ErrorClass::Timeout)
}

fn parse_snapshot_id(s: &str) -> Result<SnapshotId, RpcError> {
    s.parse()
        .map_err(|_| RpcError::invalid_params(format!("Unknown snapshot: {s}")))
}

#[cfg(test)]
mod agent_tests;
#[cfg(test)]
mod tests;
