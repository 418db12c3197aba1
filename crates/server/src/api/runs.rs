//! Runs: `POST /runs` (idempotent), `GET /runs/{id}`, its live log (`/stream`, a WebSocket)
//! and `POST .../cancel`. Execution itself is `crate::runs`'s.

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;

use axum::Extension;
use axum::body::Body;
use axum::extract::ws::WebSocketUpgrade;
use axum::extract::{Path, Query, State};
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::{IntoResponse, Response};
use base64::Engine;
use serde::Deserialize;
use serde_json::{Value, json};
use utoipa::ToSchema;

use crate::App;
use crate::artifacts;
use crate::audit;
use crate::auth::Principal;
use crate::error::{ApiError, ApiResult, ErrorCode};
use crate::http::{BASE, PublicOrigin, read_json, shutting_down, typed};
use crate::idempotency::{Created, idempotent};
use crate::interactive::Interactive;
use crate::logs::RunLog;
use crate::observe::TraceId;
use crate::runs::{self, Admission, LiveRun, RunSpec, StopCause};
use crate::runtime::{ImageRef, Runtime};
use crate::sessions::Session;
use crate::store::{self, Phase, RunRecord};
use crate::upload;
use crate::util::{iso, new_id, now_ms};
use crate::validate::{
    Resources, check_env, check_network, check_spec_version, check_timeout, normalize_resources,
};
use crate::views::{self, CancelReply, ErrorEnvelope, ResourcesView, RunCreated, RunView};
use crate::ws::ClientInput;

const MAX_INLINE_FILES_BYTES: u64 = 1024 * 1024;

#[derive(Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct InlineFile {
    path: String,
    /// Base64 of the file's bytes.
    content: String,
}

#[derive(Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
#[allow(dead_code)]
#[schema(example = json!({
    "spec_version": "1.0", "base_image": "wasmsand/default",
    "command": ["bash", "-c", "echo hello; echo oops >&2; mkdir -p out; echo data > out/a.txt"],
    "capture_patterns": ["out/**"], "timeout_sec": 5
}))]
pub(crate) struct RunRequest {
    /// One of the server's `supported_spec_versions` (see `/runtimes`).
    spec_version: String,
    runtime: Option<String>,
    session_id: Option<String>,
    base_image: Option<String>,
    command: Vec<String>,
    env: Option<BTreeMap<String, String>>,
    cwd: Option<String>,
    files: Option<Vec<InlineFile>>,
    capture_patterns: Option<Vec<String>>,
    startup_timeout_sec: Option<u64>,
    timeout_sec: Option<u64>,
    resources: Option<Resources>,
    network_policy: Option<String>,
    /// With `network_policy: allowlist`: `{hosts, cidrs, ips}`, narrowing the server's
    /// `SANDBOX_EGRESS_ALLOWLIST` (docs/network.md); a session's run keeps the session's.
    #[schema(value_type = Option<Object>)]
    egress_allowlist: Option<wasmsand::egress::EgressAllowlist>,
    /// Spec 1.1: the command reads its stdin from `stdin` frames sent on the run's stream
    /// (`{"type":"stdin","encoding":"utf8"|"base64","data":...}`, then `{"type":"stdin_close"}`),
    /// within the four `stdin_*` limits; see `/runtimes` `interactive_supported`.
    interactive: Option<bool>,
    /// Base64 of what the command reads on its standard input (at most 1 MiB; without it,
    /// stdin is empty). Not a stream: the whole input is there when the command starts. Not
    /// with `interactive`.
    stdin: Option<String>,
    /// Interactive runs: stdin bytes the run may receive in all (default and maximum
    /// `SANDBOX_INTERACTIVE_MAX_BYTES`).
    #[schema(minimum = 1)]
    stdin_max_bytes: Option<u64>,
    /// Interactive runs: largest payload of one `stdin` frame, decoded (default and maximum
    /// `SANDBOX_INTERACTIVE_MAX_FRAME_BYTES`).
    #[schema(minimum = 1)]
    stdin_max_frame_bytes: Option<u64>,
    /// Interactive runs: stdin bytes per second over all connections (default and maximum
    /// `SANDBOX_INTERACTIVE_INPUT_BPS`).
    #[schema(minimum = 1)]
    stdin_bps: Option<u64>,
    /// Interactive runs: stdin closes after this long without input (default and maximum
    /// `SANDBOX_INTERACTIVE_IDLE_TIMEOUT_SEC`).
    #[schema(minimum = 1)]
    stdin_idle_timeout_sec: Option<u64>,
    resume_from_seq: Option<u64>,
    /// A repository to fetch into the workspace before the run (server-side; docs/service.md,
    /// "Git inputs").
    git: Option<crate::gitclone::GitRequest>,
}

#[utoipa::path(
    post,
    path = "/runs",
    tag = "runs",
    params(("Idempotency-Key" = Option<String>, Header, description = "makes the request idempotent for the TTL (1 to 128 visible ASCII characters)")),
    request_body = RunRequest,
    responses(
        (status = 200, description = "admitted: the run starts now (`phase: starting`)", body = RunCreated),
        (status = 202, description = "queued (`phase: queued`, `estimated_start_time`)", body = RunCreated),
        (status = 400, description = "invalid body or values (`invalid_request`, `invalid_spec_version`), a command longer than the sandbox shell's 64 KiB (`details.reason: command_too_large`); `interactive` on a runtime without it, a `stdin_*` limit out of `[1, server's]` (`details.field`, `max`) or without `interactive`", body = ErrorEnvelope),
        (status = 409, description = "an `Idempotency-Key` replayed with a different body (`idempotency_conflict`; `details`: `prior_id`, `key`, `prior_created_at`, `idempotency_key_echo`, `idempotency_status`)", body = ErrorEnvelope),
        (status = 413, description = "body over 2 MiB, or inline files or stdin over 1 MiB", body = ErrorEnvelope),
        (status = 415, description = "a body that is not `application/json`", body = ErrorEnvelope),
        (status = 403, description = "execution is disabled on this server (`forbidden`); `interactive: true` when interactive runs are disabled (`details.reason: interactive_disabled`) or for a shell reading its commands from stdin without `SANDBOX_INTERACTIVE_SHELLS` (`details.reason: interactive_shell`)", body = ErrorEnvelope),
        (status = 404, description = "no such session", body = ErrorEnvelope),
        (status = 429, description = "the run queue is full (`rate_limited`, `Retry-After`)", body = ErrorEnvelope),
        (status = 503, description = "runtime unavailable, or the server is shutting down", body = ErrorEnvelope),
    )
)]
pub(crate) async fn create_run(
    State(app): State<Arc<App>>,
    principal: Principal,
    trace: Option<Extension<TraceId>>,
    origin: PublicOrigin,
    headers: HeaderMap,
    body: Body,
) -> Response {
    let value = match read_json(&headers, body).await {
        Ok(v) => v,
        Err(e) => return e.into_response(),
    };
    let app2 = app.clone();
    let v2 = value.clone();
    let ctx = audit::RunContext {
        source: audit::source_of(&headers),
        trace_id: trace.map(|t| t.0.0),
    };
    let user = principal.user_id.clone();
    idempotent(
        &app,
        &principal.user_id,
        "runs",
        &headers,
        &value,
        move || async move { start_run(app2, v2, origin, user, ctx).await },
    )
    .await
}

/// A run request that passed every check: what the executor needs, and what the record and
/// the reply report besides.
pub(crate) struct Checked {
    spec_version: String,
    base_image: String,
    cpu: f64,
    capture_patterns: Vec<String>,
    resume_from_seq: Option<u64>,
    /// The request's `git` input, fetched by [`fetch_inputs`].
    git_request: Option<crate::gitclone::GitRequest>,
    /// What it fetched: the run's log and audit say so once it has an id.
    git: Option<Value>,
    /// An interactive run's stdin limits.
    interactive: Option<store::StdinLimits>,
    /// The policy it runs under: its session's, or the one in force for a one-shot run.
    policy: Arc<crate::policy::Policy>,
    pub(crate) spec: RunSpec,
}

/// A run admitted and handed to the queue.
pub(crate) struct Launched {
    pub(crate) run: Arc<LiveRun>,
    status: StatusCode,
    estimated_start_time: Option<String>,
    admitted: Phase,
    spec_version: String,
    base_image: String,
    cpu: f64,
}

/// Checks the request, admits it against the user's quotas, records it and submits it to
/// the queue; the reply reports the admission decision.
async fn start_run(
    app: Arc<App>,
    v: Value,
    origin: PublicOrigin,
    user: String,
    ctx: audit::RunContext,
) -> ApiResult<Created> {
    let mut checked = check_run(&app, &v, &user).await?;
    fetch_inputs(&app, &mut checked, &user, &ctx).await?;
    let Launched {
        run,
        status,
        estimated_start_time,
        admitted,
        spec_version,
        base_image,
        cpu,
    } = launch(&app, checked, &user, ctx, None).await?;
    let id = run.id.clone();
    let rec = run.snapshot();
    let (memory_mb, startup_timeout_sec, timeout_sec) = (
        rec.resource_usage.limits.memory_mb,
        rec.resource_usage.limits.startup_timeout_sec,
        rec.resource_usage.limits.timeout_sec,
    );
    let body = RunCreated {
        run_id: id.clone(),
        session_id: rec.session_id,
        phase: admitted,
        log_stream_url: stream_url(&app, &origin, &id),
        policy_hash: rec.policy_hash,
        spec_version,
        runtime: rec.runtime,
        runtime_version: rec.runtime_version,
        base_image,
        image_digest: rec.image_digest,
        created_at: iso(rec.created_at),
        resources: ResourcesView { cpu, memory_mb },
        startup_timeout_sec,
        timeout_sec,
        interactive: rec.interactive.is_some(),
        stdin_limits: rec.interactive,
        estimated_start_time,
    };
    Ok(Created {
        status,
        body: serde_json::to_value(&body).map_err(|e| ApiError::internal(e.to_string()))?,
        object_id: id.clone(),
        headers: vec![(header::LOCATION, format!("{BASE}/runs/{id}"))],
    })
}

/// Admits a checked run against the user's quotas, records it and submits it to the queue;
/// its output goes to `tap` as well when given.
pub(crate) async fn launch(
    app: &Arc<App>,
    checked: Checked,
    user: &str,
    ctx: audit::RunContext,
    tap: Option<crate::runtime::OutputSink>,
) -> ApiResult<Launched> {
    if app.is_shutting_down() {
        return Err(shutting_down());
    }
    // Held until the run is recorded, so the user's next request counts it.
    let quota = crate::quotas::admit(app, user, checked.spec.capture.is_some()).await?;
    let id = new_id();
    let record = new_record(app, &id, user, &checked).await;
    let Checked {
        spec_version,
        base_image,
        cpu,
        resume_from_seq,
        mut spec,
        git,
        interactive,
        policy,
        ..
    } = checked;
    let log = RunLog::new(app.config.ws_ring_bytes, policy.config.max_log_bytes);
    let stdin = interactive.map(|limits| {
        let (input, feed) = Interactive::new(app, &id, limits, log.clone());
        spec.stdin_feed = Some(feed);
        input
    });
    let run = LiveRun::new(
        record.clone(),
        spec,
        log.clone(),
        resume_from_seq,
        stdin,
        app.clock.clone(),
    );
    if let Some(t) = tap {
        run.set_tap(t);
    }
    crate::quotas::record(app, &quota, &record).await?;
    app.add_live_run(run.clone());
    app.audit.remember_run(&id, ctx.clone());
    if let Some(mut summary) = git {
        let egress = summary["egress"].take();
        audit::egress_allowed(
            app,
            user,
            Some(&id),
            None,
            audit::run_body(app, &record, &ctx),
            egress,
        );
        run.log.event("git", summary);
    }
    let (status, estimated_start_time, admitted) = submit(app, &run, record).await?;
    runs::spawn_heartbeat(app, log);
    Ok(Launched {
        run,
        status,
        estimated_start_time,
        admitted,
        spec_version,
        base_image,
        cpu,
    })
}

/// Fetches the request's `git` input into its files: the one step of a request that goes to
/// the network, after every other check. A refusal by the egress policy is audited as
/// `sandbox.run.egress_denied` (the run has no id yet).
async fn fetch_inputs(
    app: &App,
    c: &mut Checked,
    user: &str,
    ctx: &audit::RunContext,
) -> ApiResult<()> {
    let Some(g) = c.git_request.take() else {
        return Ok(());
    };
    match crate::gitclone::checkout(app, &g).await {
        Ok(co) => {
            c.git = Some(co.summary(&g));
            c.spec.files.extend(co.staged.files);
            c.spec.dirs = co.staged.dirs;
            Ok(())
        }
        Err(e) => {
            if e.status == StatusCode::FORBIDDEN {
                let (session_id, digest) = match &c.spec.session {
                    Some(s) => (Some(s.id.clone()), s.image_digest.clone()),
                    None => (None, c.spec.runtime.image_digest(&c.spec.image).await),
                };
                let common = json!({
                    "session_id": session_id,
                    "source": ctx.source,
                    "trace_id": ctx.trace_id,
                    "runtime": c.spec.runtime.name(),
                    "base_image": c.base_image,
                    "image_digest": digest,
                    "policy_hash": c.policy.hash,
                    "spec_version": c.spec_version,
                });
                audit::egress_refused(app, user, session_id.as_deref(), common, &e.details);
            }
            Err(e)
        }
    }
}

fn execution_disabled() -> ApiError {
    ApiError::new(
        StatusCode::FORBIDDEN,
        ErrorCode::Forbidden,
        "execution is disabled on this server (SANDBOX_ENABLE_EXECUTION=false)",
    )
    .with_details(json!({ "reason": "execution_disabled", "reason_code": "policy_denied" }))
}

/// Every check of a run request, in the order clients see their errors.
pub(crate) async fn check_run(app: &Arc<App>, v: &Value, user: &str) -> ApiResult<Checked> {
    let spec_version = check_spec_version(app, v)?;
    let req: RunRequest = typed(v)?;
    // Refused before the session is looked up when no policy allows execution at all.
    if !app.policy().config.enable_execution && req.session_id.is_none() {
        return Err(execution_disabled());
    }
    let (session, runtime, image) = session_or_image(app, &req, user).await?;
    let policy = session
        .as_ref()
        .map_or_else(|| app.policy(), |s| s.policy.clone());
    if !policy.config.enable_execution {
        return Err(execution_disabled());
    }
    let c = &policy.config;
    let base_image = match &session {
        Some(s) => s.base_image.clone(),
        None => image.requested.clone(),
    };
    let egress = match &session {
        Some(s) => {
            if req.network_policy.is_some() || req.egress_allowlist.is_some() {
                let asked = check_network(
                    c,
                    runtime.as_ref(),
                    req.network_policy.as_deref(),
                    req.egress_allowlist.as_ref(),
                )?;
                if asked.policy != s.network_policy || asked.allowlist != s.egress {
                    return Err(ApiError::invalid(
                        "network_policy and egress_allowlist are fixed by the session",
                    )
                    .with_details(json!({ "session_network_policy": s.network_policy })));
                }
            }
            None
        }
        None => {
            check_network(
                c,
                runtime.as_ref(),
                req.network_policy.as_deref(),
                req.egress_allowlist.as_ref(),
            )?
            .allowlist
        }
    };
    check_command(&req)?;
    let interactive = crate::interactive::check(
        c,
        runtime.as_ref(),
        &crate::interactive::Asked {
            interactive: req.interactive,
            stdin_max_bytes: req.stdin_max_bytes,
            stdin_max_frame_bytes: req.stdin_max_frame_bytes,
            stdin_bps: req.stdin_bps,
            stdin_idle_timeout_sec: req.stdin_idle_timeout_sec,
            inline_stdin: req.stdin.is_some(),
            command: &req.command,
        },
    )?;
    let env = req.env.unwrap_or_default();
    check_env(&env)?;
    let (cpu, memory_mb) = match &session {
        Some(s) => {
            let (_, mem) = normalize_resources(runtime.as_ref(), req.resources)?;
            if req.resources.is_some_and(|r| r.memory_mb.is_some()) && mem != s.memory_mb {
                return Err(ApiError::invalid(format!(
                    "resources.memory_mb is fixed by the session ({} MB)",
                    s.memory_mb
                )));
            }
            (s.cpu, s.memory_mb)
        }
        None => normalize_resources(runtime.as_ref(), req.resources)?,
    };
    let startup_timeout_sec = check_timeout(
        c,
        "startup_timeout_sec",
        req.startup_timeout_sec,
        c.default_startup_timeout_sec,
    )?;
    let default_timeout = session
        .as_ref()
        .map_or(c.default_exec_timeout_sec, |s| s.timeout_sec);
    let timeout_sec = check_timeout(c, "timeout_sec", req.timeout_sec, default_timeout)?;
    let cwd = match req.cwd {
        Some(c) if c.is_empty() || c.contains('\0') => {
            return Err(ApiError::invalid("cwd must be a non-empty path"));
        }
        other => other,
    };
    check_command_size(&env, cwd.as_deref(), &req.command)?;
    let files = inline_files(app, req.files.unwrap_or_default())?;
    let stdin = match req.stdin {
        None => None,
        Some(b64) => {
            let data = base64::engine::general_purpose::STANDARD
                .decode(b64.as_bytes())
                .map_err(|e| ApiError::invalid(format!("stdin is not valid base64: {e}")))?;
            if data.len() as u64 > MAX_INLINE_FILES_BYTES {
                return Err(ApiError::too_large("stdin", MAX_INLINE_FILES_BYTES));
            }
            Some(data)
        }
    };
    let capture_patterns = req.capture_patterns.unwrap_or_default();
    let capture = if capture_patterns.is_empty() {
        None
    } else {
        Some(artifacts::compile_patterns(&capture_patterns).map_err(ApiError::invalid)?)
    };
    Ok(Checked {
        spec_version,
        base_image,
        cpu,
        capture_patterns,
        resume_from_seq: req.resume_from_seq,
        git_request: req.git,
        git: None,
        interactive,
        policy,
        spec: RunSpec {
            session,
            runtime,
            image,
            cpu,
            command: req.command,
            env,
            cwd,
            files,
            dirs: Vec::new(),
            egress,
            capture,
            startup_timeout_sec,
            timeout_sec,
            memory_mb,
            stdin,
            stdin_feed: None,
        },
    })
}

/// The run's session (the user's own) or its image: exactly one of the two is given, and a
/// session fixes the runtime and the image.
async fn session_or_image(
    app: &Arc<App>,
    req: &RunRequest,
    user: &str,
) -> ApiResult<(Option<Arc<Session>>, Arc<dyn Runtime>, ImageRef)> {
    match (&req.session_id, &req.base_image) {
        (Some(_), Some(_)) => Err(ApiError::invalid(
            "give either session_id or base_image, not both (the session fixes the image)",
        )),
        (None, None) => Err(ApiError::invalid(
            "base_image is required when session_id is not given",
        )),
        (Some(id), None) => {
            // Another user's session is not woken for them: its owner is read first.
            if app
                .session_user(id)
                .await?
                .is_none_or(|owner| owner != user)
            {
                return Err(ApiError::not_found("session", id));
            }
            let s = app
                .session(id)
                .await?
                .filter(|s| s.owner == user)
                .ok_or_else(|| ApiError::not_found("session", id))?;
            if let Some(r) = req.runtime.as_deref()
                && r != s.runtime.name()
            {
                return Err(ApiError::invalid(format!(
                    "runtime '{r}' does not match the session's runtime '{}'",
                    s.runtime.name()
                ))
                .with_details(json!({ "runtime": r, "session_runtime": s.runtime.name() })));
            }
            s.runtime.check_available().await?;
            let image = s.runtime.resolve_image(&s.base_image)?;
            Ok((Some(s.clone()), s.runtime.clone(), image))
        }
        (None, Some(img)) => {
            let (rt, image) = crate::runtime::pick(app, req.runtime.as_deref(), Some(img)).await?;
            Ok((None, rt, image))
        }
    }
}

/// The command and the run options this server refuses rather than ignores.
fn check_command(req: &RunRequest) -> ApiResult<()> {
    if req.command.is_empty() || req.command[0].is_empty() {
        return Err(ApiError::invalid(
            "command must be a non-empty array of strings",
        ));
    }
    if req.command.iter().any(|a| a.contains('\0')) {
        return Err(ApiError::invalid("command arguments must not contain NUL"));
    }
    if req.resume_from_seq == Some(0) {
        return Err(ApiError::invalid("resume_from_seq starts at 1"));
    }
    Ok(())
}

/// Refuses a command the sandbox's shell would refuse to run (`commandBytes`): the run would
/// only fail after admission, having taken a place in the queue and the user's quotas.
fn check_command_size(
    env: &BTreeMap<String, String>,
    cwd: Option<&str>,
    argv: &[String],
) -> ApiResult<()> {
    let size = crate::runtime::wasm::run_line(env, cwd, argv).len() as u64;
    let limit = crate::runtime::wasm::max_command_bytes();
    if size > limit {
        return Err(ApiError::invalid(format!(
            "the command is {size} bytes as a shell line (with its env and cwd); at most {limit}"
        ))
        .with_details(json!({ "field": "command", "reason": "command_too_large", "size": size, "limit": limit })));
    }
    Ok(())
}

/// The request's `files`, decoded, with the same path rules as uploads and a total cap.
fn inline_files(app: &App, files: Vec<InlineFile>) -> ApiResult<Vec<(String, Vec<u8>)>> {
    let mut out = Vec::new();
    let mut inline_bytes = 0u64;
    for f in files {
        let path = upload::check_path(&f.path, app.config.max_upload_depth).map_err(|e| {
            ApiError::invalid(format!("files: {}", e.message)).with_details(e.details)
        })?;
        let data = base64::engine::general_purpose::STANDARD
            .decode(f.content.as_bytes())
            .map_err(|e| {
                ApiError::invalid(format!("files: '{}' is not valid base64: {e}", f.path))
            })?;
        inline_bytes += data.len() as u64;
        if inline_bytes > MAX_INLINE_FILES_BYTES {
            return Err(ApiError::too_large("inline files", MAX_INLINE_FILES_BYTES));
        }
        out.push((path, data));
    }
    Ok(out)
}

/// The record of a run accepted but not yet in the queue.
async fn new_record(app: &App, id: &str, user: &str, c: &Checked) -> RunRecord {
    let created_at = app.clock.now_ms();
    RunRecord {
        id: id.to_string(),
        user_id: user.to_string(),
        session_id: c.spec.session.as_ref().map(|s| s.id.clone()),
        spec_version: c.spec_version.clone(),
        runtime: c.spec.runtime.name().into(),
        runtime_version: match &c.spec.session {
            Some(s) => s.runtime_version.clone(),
            None => c.spec.runtime.version(),
        },
        base_image: c.base_image.clone(),
        image_digest: match &c.spec.session {
            Some(s) => s.image_digest.clone(),
            None => c.spec.runtime.image_digest(&c.spec.image).await,
        },
        policy_hash: c.policy.hash.clone(),
        command: c.spec.command.clone(),
        phase: Phase::Queued,
        reason_code: None,
        message: None,
        exit_code: None,
        created_at,
        starting_at: None,
        started_at: None,
        finished_at: None,
        resource_usage: store::ResourceUsage {
            limits: store::Limits {
                cpu: c.cpu,
                memory_mb: c.spec.memory_mb,
                pids: app.config.pids_limit,
                nofile: app.config.ulimit_nofile,
                startup_timeout_sec: c.spec.startup_timeout_sec,
                timeout_sec: c.spec.timeout_sec,
            },
            ..Default::default()
        },
        capture_patterns: c.capture_patterns.clone(),
        artifacts: Vec::new(),
        artifacts_expired: false,
        artifacts_capped: false,
        node_id: Some(app.node_id.clone()),
        worker_id: Some(app.worker_id.clone()),
        last_seq: 0,
        log_truncated: false,
        frames_dropped: 0,
        interactive: c.interactive,
    }
}

/// Hands the run to the queue: the reply's status, `estimated_start_time` and phase, or a
/// 429 when the line is full. The reply reports the admission decision, not the live phase:
/// a fast run may already be running (or finished) by the time its snapshot is taken.
async fn submit(
    app: &Arc<App>,
    run: &Arc<LiveRun>,
    record: RunRecord,
) -> ApiResult<(StatusCode, Option<String>, Phase)> {
    match runs::submit(app, run.clone()) {
        Admission::Started => Ok((StatusCode::OK, None, Phase::Starting)),
        Admission::Queued { estimated_start } => Ok((
            StatusCode::ACCEPTED,
            Some(iso(estimated_start)),
            Phase::Queued,
        )),
        Admission::Full { retry_after_sec } => {
            app.remove_live_run(&record.id);
            let id = record.id.clone();
            let now = app.clock.now_ms();
            let _ = store::call(&app.store, move |s| {
                // The client gets a 429 and no run id; the record only says why.
                let mut r = s.get_run(&id)?.unwrap_or(record);
                r.phase = Phase::Failed;
                r.reason_code = Some("queue_full".into());
                r.finished_at = Some(now);
                s.put_run(&r)
            })
            .await;
            Err(ApiError::new(
                StatusCode::TOO_MANY_REQUESTS,
                ErrorCode::RateLimited,
                format!(
                    "the run queue is full ({} waiting); retry later",
                    app.config.queue_max_length
                ),
            )
            .with_details(json!({
                "queue_max_length": app.config.queue_max_length,
                "retry_after_sec": retry_after_sec,
            }))
            .with_header(header::RETRY_AFTER, retry_after_sec.to_string()))
        }
    }
}

/// The run's WebSocket URL: absolute (`ws://`, or `wss://` behind a trusted TLS proxy) when
/// the request's host is known, signed when the server requires signed stream URLs.
fn stream_url(app: &App, origin: &PublicOrigin, id: &str) -> String {
    let mut stream_path = format!("{BASE}/runs/{id}/stream");
    if app.config.ws_signed_urls {
        stream_path.push_str(&crate::auth::signed_query(app, id));
    }
    origin.ws_url(&stream_path)
}

fn run_view(r: &RunRecord, live: Option<&LiveRun>) -> RunView {
    let mut usage = r.resource_usage.clone();
    let frames_dropped = live.map_or(r.frames_dropped, |l| l.log.evicted());
    if !r.phase.is_terminal() {
        if let Some(started) = r.started_at {
            let secs =
                (live.map_or_else(now_ms, |l| l.clock.now_ms()) - started).max(0) as f64 / 1000.0;
            usage.wall_time_sec = secs;
            usage.cpu_time_sec = secs;
        }
        if let Some(l) = live {
            usage.log_bytes = l.log.log_bytes();
        }
    }
    RunView {
        run_id: r.id.clone(),
        id: r.id.clone(),
        session_id: r.session_id.clone(),
        phase: r.phase,
        reason_code: r.reason_code.clone(),
        message: r.message.clone(),
        exit_code: r.exit_code,
        created_at: iso(r.created_at),
        starting_at: r.starting_at.map(iso),
        started_at: r.started_at.map(iso),
        finished_at: r.finished_at.map(iso),
        runtime: r.runtime.clone(),
        runtime_version: r.runtime_version.clone(),
        base_image: r.base_image.clone(),
        image_digest: r.image_digest.clone(),
        policy_hash: r.policy_hash.clone(),
        spec_version: r.spec_version.clone(),
        command: r.command.clone(),
        resource_usage: usage,
        log_truncated: r.log_truncated,
        frames_dropped,
        artifact_count: r.artifacts.len(),
        artifacts_expired: r.artifacts_expired,
        artifacts_capped: r.artifacts_capped,
        last_seq: r.last_seq,
        interactive: r.interactive.is_some(),
        stdin_limits: r.interactive,
    }
}

/// The run's record, from the store when this process no longer holds it.
pub(super) async fn load_run(app: &App, id: &str) -> ApiResult<RunRecord> {
    app.run_record(id)
        .await
        .map_err(|e| ApiError::internal(e.to_string()))?
        .ok_or_else(|| ApiError::not_found("run", id))
}

#[utoipa::path(
    get,
    path = "/runs/{id}",
    tag = "runs",
    params(("id" = String, Path, description = "run id")),
    responses(
        (status = 200, description = "the run's status and resource usage", body = RunView),
        (status = 404, description = "no such run", body = ErrorEnvelope),
    )
)]
pub(crate) async fn get_run(
    State(app): State<Arc<App>>,
    Path(id): Path<String>,
) -> ApiResult<Response> {
    let live = app.live_run(&id);
    let rec = match &live {
        Some(l) => l.snapshot(),
        None => load_run(&app, &id).await?,
    };
    Ok(views::json(
        StatusCode::OK,
        &run_view(&rec, live.as_deref()),
    ))
}

#[utoipa::path(
    post,
    path = "/runs/{id}/cancel",
    tag = "runs",
    params(("id" = String, Path, description = "run id")),
    responses(
        (status = 200, description = "the run had already finished: nothing to cancel", body = CancelReply),
        (status = 202, description = "cancel requested: TERM now, KILL after the grace period", body = CancelReply),
        (status = 404, description = "no such run", body = ErrorEnvelope),
    )
)]
pub(crate) async fn cancel_run(
    State(app): State<Arc<App>>,
    Path(id): Path<String>,
) -> ApiResult<Response> {
    if let Some(run) = app.live_run(&id) {
        if runs::stop(&run, StopCause::User) {
            return Ok(views::json(
                StatusCode::ACCEPTED,
                &CancelReply {
                    run_id: id,
                    phase: run.phase(),
                    cancel_requested: true,
                    grace_sec: Some(app.config.cancel_grace_seconds),
                    message: "cancel requested: TERM now, KILL after the grace period".into(),
                },
            ));
        }
        let rec = run.snapshot();
        if !rec.phase.is_terminal() {
            return Ok(views::json(
                StatusCode::ACCEPTED,
                &CancelReply {
                    run_id: id,
                    phase: rec.phase,
                    cancel_requested: true,
                    grace_sec: Some(app.config.cancel_grace_seconds),
                    message: "cancel already requested".into(),
                },
            ));
        }
    }
    let rec = load_run(&app, &id).await?;
    Ok(views::json(
        StatusCode::OK,
        &CancelReply {
            run_id: id,
            phase: rec.phase,
            cancel_requested: false,
            grace_sec: None,
            message: "the run had already finished; nothing to cancel".into(),
        },
    ))
}

/// The run's frames over a WebSocket: an HTTP GET with `Upgrade: websocket` (RFC 6455),
/// answered 101; then text frames, one JSON envelope each (`stdout`, `stderr`, `event`,
/// `heartbeat`, `truncated`), numbered by `seq`, until the `end` event and a close (1000).
/// An interactive run's owner sends its stdin on it: `{"type":"stdin","encoding":"utf8"|"base64","data":...}`
/// and `{"type":"stdin_close"}`; stdin closing (the client, a limit, the run's end) is one
/// `stdin_closed` event with `data.reason`.
#[utoipa::path(
    get,
    path = "/runs/{id}/stream",
    tag = "runs",
    params(
        ("id" = String, Path, description = "run id"),
        ("from_seq" = Option<u64>, Query, minimum = 1, description = "first seq to send (inclusive); default: the run's `resume_from_seq`, else 1"),
    ),
    responses(
        (status = 101, description = "switching to the WebSocket protocol"),
        (status = 400, description = "`from_seq` is not an integer >= 1", body = ErrorEnvelope),
        (status = 404, description = "no such run", body = ErrorEnvelope),
        (status = 426, description = "a plain GET without `Upgrade: websocket`", body = ErrorEnvelope),
    )
)]
pub(crate) async fn stream_run(
    State(app): State<Arc<App>>,
    principal: Principal,
    Path(id): Path<String>,
    Query(q): Query<HashMap<String, String>>,
    ws: Result<WebSocketUpgrade, axum::extract::ws::rejection::WebSocketUpgradeRejection>,
) -> ApiResult<Response> {
    let from = match q.get("from_seq") {
        None => None,
        Some(s) => match s.parse::<u64>() {
            Ok(n) if n >= 1 => Some(n),
            _ => {
                return Err(ApiError::invalid(format!(
                    "from_seq must be an integer >= 1, got {s:?}"
                )));
            }
        },
    };
    let (log, default_from, input) = match app.live_run(&id) {
        Some(run) => {
            let owner = run.record.lock().user_id.clone();
            // Every connection the stream accepts is the owner's today (another user's is
            // 404, a signed URL acts as the owner); checked again here so that stdin never
            // follows if the readers allowed ever widen (admins watching runs).
            let stdin = run.stdin.clone().filter(|_| principal.user_id == owner);
            let otherwise = if run.stdin.is_some() {
                "not_owner"
            } else {
                crate::interactive::NOT_INTERACTIVE
            };
            (
                run.log.clone(),
                run.resume_from_seq.unwrap_or(1),
                ClientInput::Run { stdin, otherwise },
            )
        }
        None => {
            let rec = load_run(&app, &id).await?;
            let otherwise = if rec.interactive.is_some() {
                crate::interactive::RUN_ENDED
            } else {
                crate::interactive::NOT_INTERACTIVE
            };
            let log = RunLog::starting_at(app.config.ws_ring_bytes, 0, rec.last_seq.max(1));
            log.end(json!({
                "phase": rec.phase.as_str(),
                "exit_code": rec.exit_code,
                "reason_code": rec.reason_code,
                "message": rec.message,
            }));
            (
                log,
                1,
                ClientInput::Run {
                    stdin: None,
                    otherwise,
                },
            )
        }
    };
    let ws = ws.map_err(|e| {
        ApiError::new(
            StatusCode::UPGRADE_REQUIRED,
            ErrorCode::InvalidRequest,
            format!("this endpoint is a WebSocket: {e}"),
        )
        .with_header(header::UPGRADE, "websocket")
    })?;
    let from = from.unwrap_or(default_from);
    let ws = ws
        .max_message_size(crate::interactive::ws_message_limit(&app.config))
        .max_frame_size(crate::interactive::ws_message_limit(&app.config));
    Ok(
        ws.on_upgrade(move |socket| {
            crate::ws::serve(socket, log, from, app.metrics.clone(), input)
        }),
    )
}
