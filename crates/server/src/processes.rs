//! Background processes of a session: started over HTTP, they run next to the session's
//! later runs (same workspace) until they exit, time out, are killed, or the session ends.
//!
//! The engine keeps each process (pid, stdin pipe, result, output rings addressed by byte
//! offsets; [`wasmsand::Process`]); the service adds, per process, the numbered frames of its
//! WebSocket stream (a [`RunLog`], the run stream's format) and a signal for async waiters.
//! Audit events `sandbox.process.started`, `.killed` and `.ended` never carry the command's
//! words, only its SHA-256.

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Weak};
use std::time::Duration;

use axum::Extension;
use axum::body::Body;
use axum::extract::ws::WebSocketUpgrade;
use axum::extract::{Path, Query, State};
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::Response;
use base64::Engine;
use parking_lot::Mutex;
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};
use tokio::sync::watch;
use utoipa::ToSchema;
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;
use wasmsand::{ErrorClass, Process, ProcessError, RunResult, SandboxError, SpawnOptions};

use crate::App;
use crate::error::{ApiError, ApiResult, ErrorCode};
use crate::http::{BASE, PublicOrigin};
use crate::logs::{RunLog, Stream};
use crate::observe::TraceId;
use crate::process_table::{Ending, Tracked, stream_scope};
use crate::sessions::Session;
use crate::util::{canonical_json, iso, sha256_hex};
use crate::views::{self, ErrorEnvelope};

/// Longest a `wait` request holds the connection; a client that wants longer asks again.
pub const MAX_WAIT_MS: u64 = 30_000;

/// The process routes with their OpenAPI paths (merged into `crate::api::api_routes`).
pub(crate) fn routes() -> OpenApiRouter<Arc<App>> {
    OpenApiRouter::new()
        .routes(routes!(start_process, list_processes))
        .routes(routes!(get_process))
        .routes(routes!(wait_process))
        .routes(routes!(kill_process))
        .routes(routes!(write_stdin))
        .routes(routes!(process_output))
        .routes(routes!(stream_process))
}

// ---- bodies ----

/// A shell command line, or an argv (quoted word by word; `["bash", "-c", SCRIPT]` runs
/// SCRIPT), as for runs.
#[derive(Deserialize, ToSchema)]
#[serde(untagged)]
pub(crate) enum CommandSpec {
    Line(String),
    Argv(Vec<String>),
}

#[derive(Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
#[schema(example = json!({
    "command": "python3 -c 'print(input())'", "env": { "MODE": "dev" }, "cwd": ".",
    "timeout_ms": 600000, "stdin": "", "close_stdin": false
}))]
pub(crate) struct StartProcessRequest {
    command: CommandSpec,
    /// Variables exported to the process on top of the session's.
    env: Option<BTreeMap<String, String>>,
    /// Working directory, relative to the workspace (`/home/user`) unless absolute.
    cwd: Option<String>,
    /// Its own wall-clock budget; default the session's `timeout_sec`, at most the server's
    /// `max_timeout_sec`.
    timeout_ms: Option<u64>,
    /// Text written to its stdin at start.
    stdin: Option<String>,
    /// Close stdin after `stdin` (the process then reads end of file); by default it stays
    /// open for `POST .../stdin`.
    close_stdin: Option<bool>,
}

#[derive(Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
#[schema(example = json!({ "data": "hello\n", "close": true }))]
pub(crate) struct StdinRequest {
    /// Text to write.
    data: Option<String>,
    /// Bytes to write, as base64 (instead of `data`).
    data_base64: Option<String>,
    /// Close stdin after the write: the process reads end of file once it drained the pipe.
    close: Option<bool>,
}

#[derive(Serialize, ToSchema)]
pub struct ProcessView {
    /// Per session, from 1.
    pub pid: u32,
    pub session_id: String,
    pub command: String,
    /// `running`; once it ended `exited` (by itself: `exit_code` says how), `killed`,
    /// `timed_out`, or `failed` (a limit stopped it).
    pub status: String,
    pub running: bool,
    /// Set once it ended (137 when killed, 124 when timed out).
    pub exit_code: Option<i32>,
    pub started_at: String,
    /// Its live output over a WebSocket (signed when the server signs stream URLs).
    pub stream_url: String,
}

#[derive(Serialize, ToSchema)]
pub struct ProcessList {
    pub session_id: String,
    /// Running ones and the most recently ended ones (the engine keeps 32 ended).
    pub processes: Vec<ProcessView>,
    /// How many may be running at once in the session.
    pub max_running: u64,
}

#[derive(Serialize, ToSchema)]
pub struct ProcessResult {
    pub exit_code: i32,
    /// `exited`, `killed`, `timed_out` or `failed`.
    pub status: String,
    /// `TIMEOUT`, `CANCELLED`, `LIMIT_EXCEEDED`, `CAPABILITY_DENIED`; null for an exit of its own.
    pub error_class: Option<String>,
    /// What its stdout ring holds (the most recent output, up to the log cap), as text.
    pub stdout: String,
    pub stderr: String,
    /// Output was lost to the rings' caps.
    pub truncated: bool,
    pub execution_time_ms: u64,
    pub cpu_time_ms: u64,
    pub peak_memory_bytes: u64,
    /// Limits it ran into (`timeoutMs`, `memoryBytes`, `stdoutBytes`, ...).
    pub limits_hit: Vec<String>,
}

#[derive(Serialize, ToSchema)]
pub struct WaitReply {
    pub pid: u32,
    /// Still running when the wait timed out: `result` is then null.
    pub running: bool,
    pub status: String,
    pub exit_code: Option<i32>,
    pub result: Option<ProcessResult>,
}

#[derive(Serialize, ToSchema)]
pub struct KillReply {
    pub pid: u32,
    /// False when it had already ended.
    pub killed: bool,
    pub message: String,
}

#[derive(Serialize, ToSchema)]
pub struct StdinReply {
    pub pid: u32,
    pub written: u64,
    pub closed: bool,
}

#[derive(Serialize, ToSchema)]
pub struct OutputChunk {
    /// `utf8`, or `base64` when the bytes are not valid UTF-8.
    pub encoding: String,
    pub data: String,
    /// Offset of the first byte of `data`: the offset asked for, or later when the bytes
    /// from there fell out of the ring.
    pub offset: u64,
    /// Offset to ask next. While the process runs, a character split at the end is held
    /// back (not counted here) so that text stays valid UTF-8.
    pub next_offset: u64,
    /// Bytes between the offset asked for and `offset`, lost to the ring.
    pub dropped_bytes: u64,
}

#[derive(Serialize, ToSchema)]
pub struct OutputReply {
    pub pid: u32,
    /// Read before the output: when false, the output is complete.
    pub running: bool,
    pub stdout: OutputChunk,
    pub stderr: OutputChunk,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct WaitQuery {
    timeout_ms: Option<u64>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct OutputQuery {
    stdout_offset: Option<u64>,
    stderr_offset: Option<u64>,
}

// ---- helpers ----

async fn session_of(app: &Arc<App>, id: &str) -> ApiResult<Arc<Session>> {
    app.session(id)
        .await?
        .ok_or_else(|| ApiError::not_found("session", id))
}

fn engine_error(e: SandboxError, session_id: &str) -> ApiError {
    let conflict = |reason: &str, msg: String, pid: u32| {
        ApiError::new(StatusCode::CONFLICT, ErrorCode::Conflict, msg)
            .with_details(json!({ "reason": reason, "pid": pid }))
    };
    match e {
        SandboxError::Process(ProcessError::NoSuchProcess(pid)) => {
            ApiError::not_found("process", &pid.to_string())
        }
        SandboxError::Process(ProcessError::LimitExceeded(max)) => ApiError::new(
            StatusCode::TOO_MANY_REQUESTS,
            ErrorCode::QuotaExceeded,
            format!(
                "the session already runs its maximum of {max} background processes; wait for \
                 or kill one"
            ),
        )
        .with_details(json!({ "max_running": max, "reason": "processes" })),
        SandboxError::Process(e @ ProcessError::PidsExhausted(max)) => ApiError::new(
            StatusCode::TOO_MANY_REQUESTS,
            ErrorCode::QuotaExceeded,
            format!("{e}; wait for or kill a process or job of the session"),
        )
        .with_details(json!({ "max_running": max, "reason": "pids_limit_exceeded" })),
        SandboxError::Process(ProcessError::StdinClosed(pid)) => conflict(
            "stdin_closed",
            format!("the stdin of process {pid} is closed"),
            pid,
        ),
        SandboxError::Process(ProcessError::NotRunning(pid)) => {
            conflict("not_running", format!("process {pid} has ended"), pid)
        }
        SandboxError::Destroyed => ApiError::not_found("session", session_id),
        SandboxError::Invalid(m) => ApiError::invalid(m),
        // Only the start's `cwd` is looked up in the files.
        SandboxError::Fs(e) => ApiError::invalid(format!("cwd: {e}")),
        other => ApiError::internal(other.to_string()),
    }
}

fn sb_alive(session: &Session, pid: u32) -> bool {
    session
        .boxed
        .sandbox()
        .is_some_and(|sb| sb.process(pid).is_ok())
}

fn tracked_of(session: &Session, pid: u32) -> Option<Arc<Tracked>> {
    session.processes.get(pid)
}

fn find(session: &Session, pid: u32) -> ApiResult<Process> {
    session
        .wasm_sandbox()?
        .process(pid)
        .map_err(|e| engine_error(e, &session.id))
}

fn status_of(r: &RunResult) -> &'static str {
    match r.error_class {
        None => "exited",
        Some(ErrorClass::Cancelled) => "killed",
        Some(ErrorClass::Timeout) => "timed_out",
        Some(_) => "failed",
    }
}

/// The result of a process that ended, without waiting.
fn ended_result(p: &Process) -> Option<RunResult> {
    p.wait(Some(Duration::ZERO)).ok()
}

fn result_view(r: RunResult) -> ProcessResult {
    ProcessResult {
        exit_code: r.exit_code,
        status: status_of(&r).into(),
        error_class: r.error_class.map(|c| c.as_str().to_string()),
        truncated: r.truncated.is_some(),
        execution_time_ms: r.execution_time_ms,
        cpu_time_ms: r.usage.cpu_us / 1000,
        peak_memory_bytes: r.usage.peak_memory_bytes,
        limits_hit: r.usage.limits_hit,
        stdout: r.stdout,
        stderr: r.stderr,
    }
}

fn stream_url(app: &App, origin: &PublicOrigin, session_id: &str, pid: u32) -> String {
    let mut path = format!("{BASE}/sessions/{session_id}/processes/{pid}/stream");
    if app.config.ws_signed_urls {
        path.push_str(&crate::auth::signed_query(
            app,
            &stream_scope(session_id, &pid.to_string()),
        ));
    }
    origin.ws_url(&path)
}

fn view(app: &App, origin: &PublicOrigin, session_id: &str, p: &Process) -> ProcessView {
    let info = p.info();
    let status = if info.running {
        "running".to_string()
    } else {
        ended_result(p)
            .map_or("exited", |r| status_of(&r))
            .to_string()
    };
    ProcessView {
        pid: info.pid,
        session_id: session_id.to_string(),
        command: info.command,
        status,
        running: info.running,
        exit_code: info.exit_code,
        started_at: iso(info.started_at_ms as i64),
        stream_url: stream_url(app, origin, session_id, info.pid),
    }
}

/// Bytes of one stream as text when they are UTF-8. While more may come, an incomplete
/// character at the end is held back for the next read.
fn chunk(out: wasmsand::StreamOutput, asked: u64, more: bool) -> OutputChunk {
    let start = out.next_offset - out.data.len() as u64;
    debug_assert_eq!(start, asked.min(out.next_offset) + out.dropped);
    let (encoding, data, len) = match std::str::from_utf8(&out.data) {
        Ok(t) => ("utf8", t.to_string(), out.data.len()),
        Err(e) if more && e.error_len().is_none() => {
            let ok = &out.data[..e.valid_up_to()];
            (
                "utf8",
                String::from_utf8_lossy(ok).into_owned(),
                e.valid_up_to(),
            )
        }
        Err(_) => (
            "base64",
            base64::engine::general_purpose::STANDARD.encode(&out.data),
            out.data.len(),
        ),
    };
    OutputChunk {
        encoding: encoding.into(),
        data,
        offset: start,
        next_offset: start + len as u64,
        dropped_bytes: out.dropped,
    }
}

fn parse_pid(raw: &str) -> ApiResult<u32> {
    match raw.parse::<u32>() {
        Ok(n) if n >= 1 => Ok(n),
        _ => Err(ApiError::invalid(format!(
            "pid must be a positive integer, got {raw:?}"
        ))),
    }
}

// ---- the end of a process: frames, waiters, audit, metrics ----

struct Context {
    app: Weak<App>,
    user: String,
    session_id: String,
    /// The fields every audit event of the process carries.
    base: Value,
}

impl Context {
    fn body(&self, pid: u32) -> Value {
        let mut b = self.base.clone();
        b["pid"] = json!(pid);
        b
    }
}

/// What every audit event carries (`crate::audit`), for one of the session's processes.
fn audit_base(s: &Session, headers: &HeaderMap, trace: Option<String>) -> Value {
    json!({
        "session_id": s.id,
        "source": crate::audit::source_of(headers),
        "trace_id": trace,
        "runtime": s.runtime.name(),
        "runtime_version": s.runtime_version,
        "base_image": s.base_image,
        "image_digest": s.image_digest,
        "policy_hash": s.policy.hash,
        "spec_version": s.spec_version,
    })
}

/// Called once both the pid and the result are known (whichever came last).
fn ended(ctx: &Context, tracked: &Tracked, pid: u32, r: &RunResult) {
    let status = status_of(r);
    tracked.log.end(json!({
        "pid": pid,
        "status": status,
        "exit_code": r.exit_code,
        "error_class": r.error_class.map(|c| c.as_str()),
    }));
    tracked.ended.send_replace(true);
    let Some(app) = ctx.app.upgrade() else {
        return;
    };
    let mut body = ctx.body(pid);
    body["status"] = json!(status);
    body["exit_code"] = json!(r.exit_code);
    body["execution_time_ms"] = json!(r.execution_time_ms);
    body["cpu_time_ms"] = json!(r.usage.cpu_us / 1000);
    body["limits_hit"] = json!(r.usage.limits_hit);
    crate::audit::process_event(
        &app,
        "sandbox.process.ended",
        &ctx.user,
        &ctx.session_id,
        body,
    );
    crate::observe::process_ended(&app, status);
}

// ---- handlers ----

#[utoipa::path(
    post,
    path = "/sessions/{id}/processes",
    tag = "processes",
    params(("id" = String, Path, description = "session id")),
    request_body = StartProcessRequest,
    responses(
        (status = 201, description = "started: its pid, status and stream URL", body = ProcessView),
        (status = 400, description = "invalid body or values, or a `cwd` that is not a directory", body = ErrorEnvelope),
        (status = 404, description = "no such session", body = ErrorEnvelope),
        (status = 413, description = "body over 2 MiB", body = ErrorEnvelope),
        (status = 415, description = "a body that is not `application/json`", body = ErrorEnvelope),
        (status = 429, description = "the session runs its maximum of background processes (`quota_exceeded`)", body = ErrorEnvelope),
    )
)]
pub(crate) async fn start_process(
    State(app): State<Arc<App>>,
    Path(id): Path<String>,
    trace: Option<Extension<TraceId>>,
    origin: PublicOrigin,
    headers: HeaderMap,
    body: Body,
) -> ApiResult<Response> {
    let value = crate::http::read_json(&headers, body).await?;
    let req: StartProcessRequest = crate::http::typed(&value)?;
    let session = session_of(&app, &id).await?;
    let command = match req.command {
        CommandSpec::Line(l) if !l.trim().is_empty() => l,
        CommandSpec::Argv(a) if !a.is_empty() && !a[0].is_empty() => {
            crate::runtime::wasm::command_line(&a)
        }
        _ => return Err(ApiError::invalid("command must not be empty")),
    };
    if command.contains('\0') {
        return Err(ApiError::invalid("command contains NUL"));
    }
    let env = req.env.unwrap_or_default();
    crate::validate::check_env(&env)?;
    let cwd = match req.cwd {
        Some(c) if c.is_empty() || c.contains('\0') => {
            return Err(ApiError::invalid("cwd must be a non-empty path"));
        }
        Some(c) if c.starts_with('/') => Some(c),
        Some(c) => Some(format!("{}/{c}", crate::runtime::wasm::WORKSPACE)),
        None => Some(crate::runtime::wasm::WORKSPACE.to_string()),
    };
    let max_ms = session.policy.config.max_timeout_sec.saturating_mul(1000);
    let timeout_ms = match req.timeout_ms {
        Some(0) => return Err(ApiError::invalid("timeout_ms must be at least 1")),
        Some(t) => t.min(max_ms),
        None => session.timeout_sec.saturating_mul(1000).min(max_ms),
    };
    if app.is_shutting_down() {
        return Err(ApiError::new(
            StatusCode::SERVICE_UNAVAILABLE,
            ErrorCode::Unavailable,
            "the server is shutting down",
        )
        .with_header(header::RETRY_AFTER, "5"));
    }

    let log = RunLog::new(app.config.ws_ring_bytes, u64::MAX);
    let ending = Arc::new(Mutex::new(Ending {
        pid: None,
        result: None,
    }));
    let tracked = Arc::new(Tracked {
        log: log.clone(),
        ended: watch::channel(false).0,
        ending: ending.clone(),
    });
    let mut base = audit_base(&session, &headers, trace.map(|t| t.0.0));
    base["command_sha256"] = json!(sha256_hex(canonical_json(&json!(command)).as_bytes()));
    let ctx = Arc::new(Context {
        app: Arc::downgrade(&app),
        user: session.owner.clone(),
        session_id: session.id.clone(),
        base,
    });
    let (out_log, err_log) = (log.clone(), log.clone());
    let (exit_ctx, exit_tracked, exit_ending) = (ctx.clone(), tracked.clone(), ending.clone());
    let opts = SpawnOptions {
        env: env.into_iter().collect(),
        cwd,
        timeout_ms: Some(timeout_ms),
        stdin: req.stdin.map(|s| s.into_bytes().into()),
        close_stdin: req.close_stdin.unwrap_or(false),
        on_stdout: Some(Arc::new(move |b: &[u8]| out_log.output(Stream::Stdout, b))),
        on_stderr: Some(Arc::new(move |b: &[u8]| err_log.output(Stream::Stderr, b))),
        on_exit: Some(Arc::new(move |r: &RunResult| {
            let mut e = exit_ending.lock();
            e.result = Some(r.clone());
            if let Some(pid) = e.pid {
                ended(&exit_ctx, &exit_tracked, pid, r);
            }
        })),
    };

    // In submission order with the session's runs and uploads: a process started after a
    // run sees what the run wrote.
    let (locked, _guard) = app.lock_session(session.clone()).await?;
    if !Arc::ptr_eq(&locked, &session) {
        return Err(ApiError::new(
            StatusCode::SERVICE_UNAVAILABLE,
            ErrorCode::RuntimeUnavailable,
            "the session hibernated while the process was being started; retry",
        )
        .with_header(header::RETRY_AFTER, "1"));
    }
    let sb = session.wasm_sandbox()?.clone();
    let line = command.clone();
    let proc = tokio::task::spawn_blocking(move || sb.spawn(&line, opts))
        .await
        .map_err(|e| ApiError::internal(format!("cannot start the process: {e}")))?
        .map_err(|e| engine_error(e, &session.id))?;
    let pid = proc.pid();
    {
        let mut table = session.processes.0.lock();
        // Ended processes the engine forgot are forgotten here too.
        table.retain(|p, _| sb_alive(&session, *p));
        table.insert(pid, tracked.clone());
    }
    crate::audit::process_event(
        &app,
        "sandbox.process.started",
        &ctx.user,
        &ctx.session_id,
        {
            let mut b = ctx.body(pid);
            b["timeout_ms"] = json!(timeout_ms);
            b
        },
    );
    crate::observe::process_started(&app);
    {
        let mut e = ending.lock();
        e.pid = Some(pid);
        if let Some(r) = e.result.clone() {
            ended(&ctx, &tracked, pid, &r);
        }
    }
    crate::runs::spawn_heartbeat(&app, log);
    let body = view(&app, &origin, &session.id, &proc);
    let mut resp = views::json(StatusCode::CREATED, &body);
    if let Ok(v) = format!("{BASE}/sessions/{}/processes/{pid}", session.id).parse() {
        resp.headers_mut().insert(header::LOCATION, v);
    }
    Ok(resp)
}

#[utoipa::path(
    get,
    path = "/sessions/{id}/processes",
    tag = "processes",
    params(("id" = String, Path, description = "session id")),
    responses(
        (status = 200, description = "the session's processes, by pid", body = ProcessList),
        (status = 404, description = "no such session", body = ErrorEnvelope),
    )
)]
pub(crate) async fn list_processes(
    State(app): State<Arc<App>>,
    Path(id): Path<String>,
    origin: PublicOrigin,
) -> ApiResult<Response> {
    let session = session_of(&app, &id).await?;
    let sb = session.wasm_sandbox()?;
    let infos = sb.processes().map_err(|e| engine_error(e, &id))?;
    let processes = infos
        .iter()
        .filter_map(|i| sb.process(i.pid).ok())
        .map(|p| view(&app, &origin, &id, &p))
        .collect();
    Ok(views::json(
        StatusCode::OK,
        &ProcessList {
            session_id: id,
            processes,
            max_running: app.config.max_processes_per_session,
        },
    ))
}

#[utoipa::path(
    get,
    path = "/sessions/{id}/processes/{pid}",
    tag = "processes",
    params(
        ("id" = String, Path, description = "session id"),
        ("pid" = u32, Path, minimum = 1, description = "process id in the session"),
    ),
    responses(
        (status = 200, description = "its status; `exit_code` once it ended", body = ProcessView),
        (status = 400, description = "`pid` is not a positive integer", body = ErrorEnvelope),
        (status = 404, description = "no such session or process", body = ErrorEnvelope),
    )
)]
pub(crate) async fn get_process(
    State(app): State<Arc<App>>,
    Path((id, pid)): Path<(String, String)>,
    origin: PublicOrigin,
) -> ApiResult<Response> {
    let pid = parse_pid(&pid)?;
    let session = session_of(&app, &id).await?;
    let p = find(&session, pid)?;
    Ok(views::json(StatusCode::OK, &view(&app, &origin, &id, &p)))
}

#[utoipa::path(
    post,
    path = "/sessions/{id}/processes/{pid}/wait",
    tag = "processes",
    params(
        ("id" = String, Path, description = "session id"),
        ("pid" = u32, Path, minimum = 1, description = "process id in the session"),
        ("timeout_ms" = Option<u64>, Query, description = "longest wait (default and at most 30000); 0 answers at once"),
    ),
    responses(
        (status = 200, description = "its result once it ended, or `running: true` when the wait timed out first", body = WaitReply),
        (status = 400, description = "a bad `pid` or `timeout_ms`", body = ErrorEnvelope),
        (status = 404, description = "no such session or process", body = ErrorEnvelope),
    )
)]
pub(crate) async fn wait_process(
    State(app): State<Arc<App>>,
    Path((id, pid)): Path<(String, String)>,
    Query(q): Query<WaitQuery>,
) -> ApiResult<Response> {
    let pid = parse_pid(&pid)?;
    let session = session_of(&app, &id).await?;
    let p = find(&session, pid)?;
    let wait = Duration::from_millis(q.timeout_ms.unwrap_or(MAX_WAIT_MS).min(MAX_WAIT_MS));
    let result = match ended_result(&p) {
        Some(r) => Some(r),
        None => match tracked_of(&session, pid) {
            Some(t) => {
                let mut rx = t.ended.subscribe();
                // Dropped with the session: the process then ended too.
                drop(session);
                let _ = tokio::time::timeout(wait, rx.wait_for(|e| *e)).await;
                ended_result(&p)
            }
            None => {
                let p2 = p.clone();
                tokio::task::spawn_blocking(move || p2.wait(Some(wait)).ok())
                    .await
                    .map_err(|e| ApiError::internal(e.to_string()))?
            }
        },
    };
    let reply = match result {
        Some(r) => WaitReply {
            pid,
            running: false,
            status: status_of(&r).into(),
            exit_code: Some(r.exit_code),
            result: Some(result_view(r)),
        },
        None => WaitReply {
            pid,
            running: true,
            status: "running".into(),
            exit_code: None,
            result: None,
        },
    };
    Ok(views::json(StatusCode::OK, &reply))
}

#[utoipa::path(
    post,
    path = "/sessions/{id}/processes/{pid}/kill",
    tag = "processes",
    params(
        ("id" = String, Path, description = "session id"),
        ("pid" = u32, Path, minimum = 1, description = "process id in the session"),
    ),
    responses(
        (status = 200, description = "killed (it ends with exit code 137, status `killed`), or it had already ended (`killed: false`)", body = KillReply),
        (status = 400, description = "`pid` is not a positive integer", body = ErrorEnvelope),
        (status = 404, description = "no such session or process", body = ErrorEnvelope),
    )
)]
pub(crate) async fn kill_process(
    State(app): State<Arc<App>>,
    Path((id, pid)): Path<(String, String)>,
    trace: Option<Extension<TraceId>>,
    headers: HeaderMap,
) -> ApiResult<Response> {
    let pid = parse_pid(&pid)?;
    let session = session_of(&app, &id).await?;
    let p = find(&session, pid)?;
    let tracked = tracked_of(&session, pid);
    let recording = tracked.as_ref().map(|t| t.ending.lock());
    let killed = p.kill();
    if killed {
        crate::audit::process_event(&app, "sandbox.process.killed", &session.owner, &id, {
            let mut b = audit_base(&session, &headers, trace.map(|t| t.0.0));
            b["pid"] = json!(pid);
            b
        });
    }
    drop(recording);
    Ok(views::json(
        StatusCode::OK,
        &KillReply {
            pid,
            killed,
            message: if killed {
                "killed".into()
            } else {
                "the process had already ended".into()
            },
        },
    ))
}

#[utoipa::path(
    post,
    path = "/sessions/{id}/processes/{pid}/stdin",
    tag = "processes",
    params(
        ("id" = String, Path, description = "session id"),
        ("pid" = u32, Path, minimum = 1, description = "process id in the session"),
    ),
    request_body = StdinRequest,
    responses(
        (status = 200, description = "written (the answer waits while the pipe is full and the process does not read); closed when asked", body = StdinReply),
        (status = 400, description = "a bad `pid`, body or base64, or nothing to do", body = ErrorEnvelope),
        (status = 404, description = "no such session or process", body = ErrorEnvelope),
        (status = 409, description = "its stdin is closed, or it has ended (`conflict`, `details.reason`)", body = ErrorEnvelope),
        (status = 413, description = "body over 2 MiB", body = ErrorEnvelope),
        (status = 415, description = "a body that is not `application/json`", body = ErrorEnvelope),
    )
)]
pub(crate) async fn write_stdin(
    State(app): State<Arc<App>>,
    Path((id, pid)): Path<(String, String)>,
    headers: HeaderMap,
    body: Body,
) -> ApiResult<Response> {
    let pid = parse_pid(&pid)?;
    let value = crate::http::read_json(&headers, body).await?;
    let req: StdinRequest = crate::http::typed(&value)?;
    let data = match (req.data, req.data_base64) {
        (Some(_), Some(_)) => {
            return Err(ApiError::invalid(
                "send either data or data_base64, not both",
            ));
        }
        (Some(t), None) => t.into_bytes(),
        (None, Some(b)) => base64::engine::general_purpose::STANDARD
            .decode(b.as_bytes())
            .map_err(|e| ApiError::invalid(format!("data_base64 is not base64: {e}")))?,
        (None, None) => Vec::new(),
    };
    let close = req.close.unwrap_or(false);
    if data.is_empty() && !close {
        return Err(ApiError::invalid(
            "nothing to do: send data, data_base64 or close: true",
        ));
    }
    let session = session_of(&app, &id).await?;
    let p = find(&session, pid)?;
    drop(session);
    let written = tokio::task::spawn_blocking(move || -> Result<u64, SandboxError> {
        let n = if data.is_empty() {
            0
        } else {
            p.write_stdin(&data)?
        };
        if close {
            p.close_stdin()?;
        }
        Ok(n as u64)
    })
    .await
    .map_err(|e| ApiError::internal(e.to_string()))?
    .map_err(|e| engine_error(e, &id))?;
    Ok(views::json(
        StatusCode::OK,
        &StdinReply {
            pid,
            written,
            closed: close,
        },
    ))
}

#[utoipa::path(
    get,
    path = "/sessions/{id}/processes/{pid}/output",
    tag = "processes",
    params(
        ("id" = String, Path, description = "session id"),
        ("pid" = u32, Path, minimum = 1, description = "process id in the session"),
        ("stdout_offset" = Option<u64>, Query, description = "first stdout byte wanted (default 0)"),
        ("stderr_offset" = Option<u64>, Query, description = "first stderr byte wanted (default 0)"),
    ),
    responses(
        (status = 200, description = "output from the offsets, from the process's rings; `dropped_bytes` says what fell out of them", body = OutputReply),
        (status = 400, description = "a bad `pid` or offset", body = ErrorEnvelope),
        (status = 404, description = "no such session or process", body = ErrorEnvelope),
    )
)]
pub(crate) async fn process_output(
    State(app): State<Arc<App>>,
    Path((id, pid)): Path<(String, String)>,
    Query(q): Query<OutputQuery>,
) -> ApiResult<Response> {
    let pid = parse_pid(&pid)?;
    let session = session_of(&app, &id).await?;
    let p = find(&session, pid)?;
    // Read before the output: a process seen ended has all its output in the rings.
    let running = p.is_running();
    let (so, se) = (q.stdout_offset.unwrap_or(0), q.stderr_offset.unwrap_or(0));
    let [out, err] = p.output(so, se);
    Ok(views::json(
        StatusCode::OK,
        &OutputReply {
            pid,
            running,
            stdout: chunk(out, so, running),
            stderr: chunk(err, se, running),
        },
    ))
}

/// Live output over a WebSocket, in the frames of a run's stream: `stdout`/`stderr`,
/// `heartbeat`, `resume` when frames before `from_seq` fell out of the ring, and one `end`
/// event (`pid`, `status`, `exit_code`, `error_class`) before the close.
#[utoipa::path(
    get,
    path = "/sessions/{id}/processes/{pid}/stream",
    tag = "processes",
    params(
        ("id" = String, Path, description = "session id"),
        ("pid" = u32, Path, minimum = 1, description = "process id in the session"),
        ("from_seq" = Option<u64>, Query, minimum = 1, description = "first seq to send (inclusive; default 1): the last seq seen + 1 resumes a dropped connection"),
    ),
    responses(
        (status = 101, description = "switching to the WebSocket protocol"),
        (status = 400, description = "a bad `pid` or `from_seq`", body = ErrorEnvelope),
        (status = 404, description = "no such session or process", body = ErrorEnvelope),
        (status = 426, description = "a plain GET without `Upgrade: websocket`", body = ErrorEnvelope),
    )
)]
pub(crate) async fn stream_process(
    State(app): State<Arc<App>>,
    Path((id, pid)): Path<(String, String)>,
    Query(q): Query<HashMap<String, String>>,
    ws: Result<WebSocketUpgrade, axum::extract::ws::rejection::WebSocketUpgradeRejection>,
) -> ApiResult<Response> {
    let pid = parse_pid(&pid)?;
    let from = match q.get("from_seq") {
        None => 1,
        Some(s) => match s.parse::<u64>() {
            Ok(n) if n >= 1 => n,
            _ => {
                return Err(ApiError::invalid(format!(
                    "from_seq must be an integer >= 1, got {s:?}"
                )));
            }
        },
    };
    let session = session_of(&app, &id).await?;
    find(&session, pid)?;
    let log = session
        .processes
        .get(pid)
        .ok_or_else(|| ApiError::not_found("process", &pid.to_string()))?
        .log
        .clone();
    let ws = ws.map_err(|e| {
        ApiError::new(
            StatusCode::UPGRADE_REQUIRED,
            ErrorCode::InvalidRequest,
            format!("this endpoint is a WebSocket: {e}"),
        )
        .with_header(header::UPGRADE, "websocket")
    })?;
    Ok(ws.on_upgrade(move |socket| {
        crate::ws::serve(
            socket,
            log,
            from,
            app.metrics.clone(),
            crate::ws::ClientInput::Ignored,
        )
    }))
}
