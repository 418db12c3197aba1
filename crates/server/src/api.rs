//! The HTTP surface: routes under [`BASE`], request validation, idempotency, and the views
//! of sessions, runs and artifacts.

use std::collections::{BTreeMap, HashMap};
use std::future::Future;
use std::sync::Arc;
use std::sync::atomic::AtomicI64;
use std::time::Duration;

use axum::body::Body;
use axum::extract::ws::WebSocketUpgrade;
use axum::extract::{DefaultBodyLimit, FromRequest, Multipart, Path, Query, Request, State};
use axum::http::{HeaderMap, HeaderName, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::{Extension, Router};
use base64::Engine;
use serde::Deserialize;
use serde_json::{Value, json};
use wasmsand::Sandbox;

use crate::App;
use crate::artifacts;
use crate::audit;
use crate::auth::Principal;
use crate::config::MIB;
use crate::error::{ApiError, ApiResult};
use crate::images::DEFAULT_IMAGE;
use crate::logs::RunLog;
use crate::observe::TraceId;
use crate::runs::{self, Admission, LiveRun, RunSpec, StopCause};
use crate::sessions::Session;
use crate::store::{self, IdemEntry, Phase, RunRecord};
use crate::upload::{self, Caps, Staged};
use crate::util::{canonical_json, iso, new_id, now_ms, sha256_hex};
use crate::views::{
    self, ArtifactItem, ArtifactList, CancelReply, ImageInfo, ResourcesView, RunCreated, RunView,
    RuntimeInfo, RuntimesReply, UploadReply,
};
use crate::views::{ArchiveBytes, ErrorEnvelope, SessionView, UploadForm};
use utoipa::ToSchema;

pub const BASE: &str = "/api/v1/sandbox";
/// Largest JSON body: inline files are at most 1 MB decoded, about 1.4 MB as base64.
const MAX_JSON_BYTES: usize = 2 * 1024 * 1024;
const MAX_INLINE_FILES_BYTES: u64 = 1024 * 1024;
const MAX_IDEMPOTENCY_KEY: usize = 128;

pub fn router(app: Arc<App>) -> Router {
    let upload_limit = (app.config.max_upload_mb * MIB) as usize + 1024 * 1024;
    let api = Router::new()
        .route("/runtimes", get(runtimes))
        .route("/sessions", post(create_session))
        .route("/sessions/{id}", get(get_session).delete(delete_session))
        .route(
            "/sessions/{id}/files",
            post(upload_files).layer(DefaultBodyLimit::max(upload_limit)),
        )
        .route("/runs", post(create_run))
        .route("/runs/{id}", get(get_run))
        .route("/runs/{id}/stream", get(stream_run))
        .route("/runs/{id}/cancel", post(cancel_run))
        .route("/runs/{id}/artifacts", get(list_artifacts))
        .route("/runs/{id}/artifacts/{*path}", get(get_artifact))
        .route("/admin/runs", get(crate::admin::list_runs))
        .route("/admin/runs/{id}", get(crate::admin::get_run))
        .route("/admin/idempotency", get(crate::admin::list_idempotency))
        .route("/admin/usage", get(crate::admin::usage))
        .route("/admin/usage/summary", get(crate::admin_ops::usage_summary))
        .route("/admin/metrics", get(crate::admin_ops::metrics_json))
        .route("/admin/audit", get(crate::admin_ops::audit))
        .merge(crate::processes::routes())
        .route_layer(axum::middleware::from_fn_with_state(
            app.clone(),
            crate::auth::authenticate,
        ));
    Router::new()
        .route("/openapi.json", get(crate::openapi::serve))
        .route(&format!("{BASE}/openapi.json"), get(crate::openapi::serve))
        .merge(crate::panel::routes())
        .nest(BASE, api)
        .fallback(not_found)
        .method_not_allowed_fallback(method_not_allowed)
        .layer(axum::middleware::from_fn(crate::error::negotiate))
        .with_state(app)
}

async fn not_found(req: Request) -> ApiError {
    ApiError::new(
        StatusCode::NOT_FOUND,
        "not_found",
        format!("no route for {} {}", req.method(), req.uri().path()),
    )
}

async fn method_not_allowed(req: Request) -> ApiError {
    ApiError::new(
        StatusCode::METHOD_NOT_ALLOWED,
        "invalid_request",
        format!(
            "method {} is not allowed on {}",
            req.method(),
            req.uri().path()
        ),
    )
}

// ---- request plumbing ----

/// Reads a JSON object body: content type, size cap and syntax checked, with clear 4xx.
pub(crate) async fn read_json(headers: &HeaderMap, body: Body) -> ApiResult<Value> {
    if let Some(ct) = headers.get(header::CONTENT_TYPE) {
        let ct = ct.to_str().unwrap_or("").to_ascii_lowercase();
        let mime = ct.split(';').next().unwrap_or("").trim();
        if mime != "application/json" && !mime.ends_with("+json") {
            return Err(ApiError::new(
                StatusCode::UNSUPPORTED_MEDIA_TYPE,
                "invalid_request",
                format!("expected an application/json body, got {mime:?}"),
            ));
        }
    }
    let bytes = axum::body::to_bytes(body, MAX_JSON_BYTES)
        .await
        .map_err(|_| {
            // The rest of the body is unread: the connection cannot carry another request.
            ApiError::too_large("the request body", MAX_JSON_BYTES as u64)
                .with_header(header::CONNECTION, "close")
        })?;
    if bytes.is_empty() {
        return Err(ApiError::invalid(
            "the request body is empty; a JSON object is required",
        ));
    }
    let v: Value = serde_json::from_slice(&bytes)
        .map_err(|e| ApiError::invalid(format!("malformed JSON: {e}")))?;
    if !v.is_object() {
        return Err(ApiError::invalid("the request body must be a JSON object"));
    }
    Ok(v)
}

pub(crate) fn typed<T: serde::de::DeserializeOwned>(v: &Value) -> ApiResult<T> {
    serde_json::from_value(v.clone())
        .map_err(|e| ApiError::invalid(format!("invalid request: {e}")))
}

fn check_spec_version(app: &App, v: &Value) -> ApiResult<String> {
    let supported = &app.config.supported_spec_versions;
    match v.get("spec_version") {
        None | Some(Value::Null) => Err(ApiError::invalid("spec_version is required")
            .with_details(json!({ "supported": supported }))),
        Some(Value::String(s)) if supported.contains(s) => Ok(s.clone()),
        Some(Value::String(s)) => Err(ApiError::new(
            StatusCode::BAD_REQUEST,
            "invalid_spec_version",
            format!("Unsupported spec_version '{s}'"),
        )
        .with_details(json!({ "supported": supported, "provided": s }))),
        Some(other) => Err(ApiError::new(
            StatusCode::BAD_REQUEST,
            "invalid_spec_version",
            format!("spec_version must be a string, got {other}"),
        )
        .with_details(json!({ "supported": supported, "provided": other.to_string() }))),
    }
}

fn check_runtime(app: &App, runtime: Option<&str>) -> ApiResult<()> {
    match runtime.unwrap_or(&app.config.default_runtime) {
        "wasm" => Ok(()),
        r @ ("docker" | "firecracker") => Err(ApiError::new(
            StatusCode::SERVICE_UNAVAILABLE,
            "runtime_unavailable",
            format!("Requested runtime '{r}' is not available"),
        )
        .with_details(json!({ "runtime": r, "available": false, "suggested": ["wasm"] }))),
        r => Err(ApiError::invalid(format!(
            "unknown runtime '{r}'; runtimes: wasm, docker, firecracker"
        ))
        .with_details(json!({ "runtime": r, "suggested": ["wasm"] }))),
    }
}

fn check_image(app: &App, image: &str) -> ApiResult<&'static str> {
    app.images.resolve(image).ok_or_else(|| {
        ApiError::invalid(format!(
            "unknown base_image '{image}'; known images: {}",
            app.images.known().join(", ")
        ))
        .with_details(json!({ "base_image": image, "known": app.images.known() }))
    })
}

fn check_network(policy: Option<&str>) -> ApiResult<String> {
    match policy.unwrap_or("deny_all") {
        "deny_all" => Ok("deny_all".into()),
        p => Err(ApiError::invalid(format!(
            "network_policy '{p}' is not available; only deny_all exists"
        ))
        .with_details(json!({ "network_policy": p, "supported": ["deny_all"] }))),
    }
}

fn valid_env_name(name: &str) -> bool {
    let mut c = name.chars();
    matches!(c.next(), Some(f) if f == '_' || f.is_ascii_alphabetic())
        && c.all(|x| x == '_' || x.is_ascii_alphanumeric())
}

pub(crate) fn check_env(env: &BTreeMap<String, String>) -> ApiResult<()> {
    for (k, v) in env {
        if !valid_env_name(k) {
            return Err(ApiError::invalid(format!(
                "invalid environment variable name {k:?}"
            )));
        }
        if v.contains('\0') {
            return Err(ApiError::invalid(format!(
                "environment variable {k} contains NUL"
            )));
        }
    }
    Ok(())
}

#[derive(Deserialize, Default, Clone, Copy, ToSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct Resources {
    cpu: Option<f64>,
    memory_mb: Option<u64>,
}

/// `cpu` → 1 (each program runs on one thread), `memory_mb` → the per-program linear
/// memory cap; both must be within the runtime's maxima.
fn normalize_resources(app: &App, r: Option<Resources>) -> ApiResult<(f64, u64)> {
    let r = r.unwrap_or_default();
    let max_mem = app.config.effective_max_mem_mb();
    if let Some(cpu) = r.cpu
        && (!cpu.is_finite() || cpu <= 0.0 || cpu > app.config.max_cpu)
    {
        return Err(ApiError::invalid(format!(
            "resources.cpu must be in (0, {}]",
            app.config.max_cpu
        ))
        .with_details(json!({ "max_cpu": app.config.max_cpu })));
    }
    let mem = r
        .memory_mb
        .unwrap_or(wasmsand::Limits::DEFAULT_MEMORY_BYTES / MIB);
    if mem == 0 || mem > max_mem {
        return Err(
            ApiError::invalid(format!("resources.memory_mb must be in [1, {max_mem}]"))
                .with_details(json!({ "max_mem_mb": max_mem })),
        );
    }
    Ok((1.0, mem))
}

fn check_timeout(app: &App, name: &str, v: Option<u64>, default: u64) -> ApiResult<u64> {
    match v {
        Some(0) => Err(ApiError::invalid(format!("{name} must be at least 1"))),
        Some(n) => Ok(n.min(app.config.max_timeout_sec)),
        None => Ok(default),
    }
}

pub(crate) fn host_of(headers: &HeaderMap) -> Option<String> {
    headers
        .get(header::HOST)
        .and_then(|h| h.to_str().ok())
        .filter(|h| h.bytes().all(|b| b.is_ascii_graphic()))
        .map(str::to_string)
}

// ---- idempotency ----

struct Created {
    status: StatusCode,
    body: Value,
    object_id: String,
    headers: Vec<(HeaderName, String)>,
}

fn json_response(status: StatusCode, body: &Value, extra: &[(HeaderName, String)]) -> Response {
    let mut resp = (status, axum::Json(body.clone())).into_response();
    for (k, v) in extra {
        if let Ok(v) = HeaderValue::from_str(v) {
            resp.headers_mut().insert(k.clone(), v);
        }
    }
    resp
}

/// How long a request waits for another one holding its `Idempotency-Key` to answer (and
/// how old a claim must be to count as abandoned by a holder that died).
const IDEM_WAIT: Duration = Duration::from_secs(30);

/// Runs `create` at most once per (endpoint, user, key, body) within the TTL: a replay gets
/// the first answer, a different body under the same key a 409.
async fn idempotent<F, Fut>(
    app: &Arc<App>,
    user: &str,
    endpoint: &'static str,
    headers: &HeaderMap,
    body: &Value,
    create: F,
) -> Response
where
    F: FnOnce() -> Fut,
    Fut: Future<Output = ApiResult<Created>>,
{
    let key = match headers.get("idempotency-key") {
        None => None,
        Some(k) => match k.to_str() {
            Ok(k)
                if !k.is_empty()
                    && k.len() <= MAX_IDEMPOTENCY_KEY
                    && k.bytes().all(|b| b.is_ascii_graphic()) =>
            {
                Some(k.to_string())
            }
            _ => {
                return ApiError::invalid(format!(
                    "Idempotency-Key must be 1 to {MAX_IDEMPOTENCY_KEY} visible ASCII characters"
                ))
                .into_response();
            }
        },
    };
    let Some(key) = key else {
        return match create().await {
            Ok(c) => json_response(c.status, &c.body, &c.headers),
            Err(e) => e.into_response(),
        };
    };
    let user = user.to_string();
    let fingerprint = sha256_hex(canonical_json(body).as_bytes());
    let lock_name = format!("{endpoint}\0{user}\0{key}");
    let lock = {
        let mut locks = app.idem_locks.lock();
        locks.retain(|_, w| w.strong_count() > 0);
        match locks.get(&lock_name).and_then(|w| w.upgrade()) {
            Some(l) => l,
            None => {
                let l = Arc::new(tokio::sync::Mutex::new(()));
                locks.insert(lock_name, Arc::downgrade(&l));
                l
            }
        }
    };
    let _guard = lock.lock().await;
    let ttl_ms = app.config.idempotency_ttl_sec as i64 * 1000;
    // The key is claimed in the store before anything is created: with replicas sharing
    // it, one request wins and the others (here or on another replica) wait for its answer.
    let deadline = tokio::time::Instant::now() + IDEM_WAIT;
    let prior = loop {
        let now = now_ms();
        let claim = IdemEntry {
            endpoint: endpoint.into(),
            user_id: user.clone(),
            key: key.clone(),
            fingerprint: fingerprint.clone(),
            object_id: String::new(),
            created_at: now,
            status: 0,
            response: Value::Null,
        };
        let stale = now - IDEM_WAIT.as_millis() as i64;
        let held = match store::call(&app.store, move |s| {
            s.idem_claim(&claim, now - ttl_ms, stale)
        })
        .await
        {
            Ok(h) => h,
            Err(e) => return ApiError::internal(e.to_string()).into_response(),
        };
        match held {
            Some(p) if p.is_pending() && p.fingerprint == fingerprint => {
                if tokio::time::Instant::now() >= deadline {
                    return ApiError::new(
                        StatusCode::CONFLICT,
                        "idempotency_conflict",
                        "a request with this Idempotency-Key is still in progress",
                    )
                    .with_details(json!({
                        "key": key,
                        "idempotency_key_echo": key,
                        "idempotency_status": "in_progress",
                    }))
                    .with_header(header::RETRY_AFTER, "1")
                    .into_response();
                }
                tokio::time::sleep(Duration::from_millis(25)).await;
            }
            other => break other,
        }
    };
    if let Some(p) = prior {
        if p.fingerprint == fingerprint {
            let status = StatusCode::from_u16(p.status).unwrap_or(StatusCode::OK);
            return json_response(
                status,
                &p.response,
                &[(
                    HeaderName::from_static("idempotent-replayed"),
                    "true".into(),
                )],
            );
        }
        return ApiError::new(
            StatusCode::CONFLICT,
            "idempotency_conflict",
            "Idempotency-Key replay with different body",
        )
        .with_details(json!({
            "prior_id": p.object_id,
            "key": key,
            "prior_created_at": iso(p.created_at),
            "idempotency_key_echo": key,
            "idempotency_status": if p.is_pending() { "in_progress" } else { "conflict" },
        }))
        .into_response();
    }
    match create().await {
        Ok(c) => {
            let entry = IdemEntry {
                endpoint: endpoint.into(),
                user_id: user,
                key,
                fingerprint,
                object_id: c.object_id.clone(),
                created_at: now_ms(),
                status: c.status.as_u16(),
                response: c.body.clone(),
            };
            if let Err(e) = store::call(&app.store, move |s| s.idem_put(&entry)).await {
                tracing::error!(%e, "cannot record an idempotency entry");
            }
            json_response(c.status, &c.body, &c.headers)
        }
        Err(e) => {
            // Nothing was created: the key is free for a retry.
            if let Err(e) =
                store::call(&app.store, move |s| s.idem_release(endpoint, &user, &key)).await
            {
                tracing::error!(%e, "cannot release an idempotency claim");
            }
            e.into_response()
        }
    }
}

// ---- runtimes ----

#[utoipa::path(
    get,
    path = "/runtimes",
    tag = "runtimes",
    responses((status = 200, description = "runtimes and their caps", body = RuntimesReply))
)]
async fn runtimes(State(app): State<Arc<App>>) -> Response {
    let c = &app.config;
    let digest = app.images.digest().await;
    let caps = |name: &str, available: bool, notes: &str, images: Vec<String>| RuntimeInfo {
        name: name.into(),
        available,
        default_images: images,
        max_cpu: c.max_cpu,
        max_mem_mb: if available {
            c.effective_max_mem_mb()
        } else {
            c.max_mem_mb
        },
        max_upload_mb: c.max_upload_mb,
        max_log_bytes: c.max_log_bytes,
        queue_max_length: c.queue_max_length,
        queue_ttl_sec: c.queue_ttl_sec,
        workspace_cap_mb: c.workspace_cap_mb,
        artifact_ttl_hours: c.artifact_ttl_hours,
        supported_spec_versions: c.supported_spec_versions.clone(),
        interactive_supported: false,
        egress_allowlist_supported: false,
        store_mode: app.store.mode().into(),
        notes: notes.into(),
        runtime_version: None,
        default: None,
        images: None,
        max_concurrent_runs: None,
        queue_length: None,
    };
    let wasm = RuntimeInfo {
        runtime_version: Some(crate::RUNTIME_VERSION.into()),
        default: Some(true),
        images: Some(vec![ImageInfo {
            name: DEFAULT_IMAGE.into(),
            digest: digest.clone(),
            aliases: c.image_aliases.keys().cloned().collect(),
        }]),
        max_concurrent_runs: Some(c.max_concurrent_runs),
        queue_length: Some(app.queue.waiting()),
        ..caps(
            "wasm",
            true,
            "WebAssembly sandboxes (wasmer): bash-like shell, coreutils, jq, python3; no network. \
             Sessions live in this process's memory and end when it restarts; runs, artifacts and \
             idempotency entries are kept by the store.",
            vec![format!("{DEFAULT_IMAGE}@{digest}")],
        )
    };
    let body = RuntimesReply {
        store_mode: app.store.mode().into(),
        default_runtime: "wasm".into(),
        runtimes: vec![
            wasm,
            caps(
                "docker",
                false,
                "not available in this build; use wasm",
                vec![],
            ),
            caps(
                "firecracker",
                false,
                "not available in this build; use wasm",
                vec![],
            ),
        ],
    };
    views::json(StatusCode::OK, &body)
}

// ---- sessions ----

#[derive(Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
#[allow(dead_code)]
#[schema(example = json!({
    "spec_version": "1.0", "base_image": "wasmsand/default", "resources": { "memory_mb": 64 },
    "timeout_sec": 10, "env": { "GREETING": "hi" }, "labels": { "team": "qa" }, "ttl_sec": 60
}))]
pub(crate) struct SessionRequest {
    /// One of the server's `supported_spec_versions` (see `/runtimes`).
    spec_version: String,
    runtime: Option<String>,
    base_image: Option<String>,
    resources: Option<Resources>,
    timeout_sec: Option<u64>,
    network_policy: Option<String>,
    env: Option<BTreeMap<String, String>>,
    labels: Option<BTreeMap<String, String>>,
    ttl_sec: Option<u64>,
}

#[utoipa::path(
    post,
    path = "/sessions",
    tag = "sessions",
    params(("Idempotency-Key" = Option<String>, Header, description = "makes the request idempotent for the TTL (1 to 128 visible ASCII characters)")),
    request_body = SessionRequest,
    responses(
        (status = 201, description = "the session (also the replay of an idempotent request)", body = SessionView),
        (status = 400, description = "invalid body or values (`invalid_request`, `invalid_spec_version`)", body = ErrorEnvelope),
        (status = 409, description = "an `Idempotency-Key` replayed with a different body (`idempotency_conflict`)", body = ErrorEnvelope),
        (status = 413, description = "body over 2 MiB, or inline files over 1 MiB", body = ErrorEnvelope),
        (status = 415, description = "a body that is not `application/json`", body = ErrorEnvelope),
        (status = 429, description = "the server holds its maximum of sessions (`quota_exceeded`)", body = ErrorEnvelope),
        (status = 503, description = "runtime unavailable, or the server is shutting down", body = ErrorEnvelope),
    )
)]
async fn create_session(
    State(app): State<Arc<App>>,
    principal: Principal,
    trace: Option<Extension<TraceId>>,
    headers: HeaderMap,
    body: Body,
) -> Response {
    let value = match read_json(&headers, body).await {
        Ok(v) => v,
        Err(e) => return e.into_response(),
    };
    let app2 = app.clone();
    let v2 = value.clone();
    let user = principal.user_id.clone();
    let source = audit::source_of(&headers);
    idempotent(
        &app,
        &principal.user_id,
        "sessions",
        &headers,
        &value,
        move || async move {
            let app = app2;
            let spec_version = check_spec_version(&app, &v2)?;
            let req: SessionRequest = typed(&v2)?;
            check_runtime(&app, req.runtime.as_deref())?;
            let image = check_image(&app, req.base_image.as_deref().unwrap_or(DEFAULT_IMAGE))?;
            let network_policy = check_network(req.network_policy.as_deref())?;
            let (cpu, memory_mb) = normalize_resources(&app, req.resources)?;
            let env = req.env.unwrap_or_default();
            check_env(&env)?;
            let timeout_sec = check_timeout(
                &app,
                "timeout_sec",
                req.timeout_sec,
                app.config.default_exec_timeout_sec,
            )?;
            let ttl = match req.ttl_sec {
                Some(0) => return Err(ApiError::invalid("ttl_sec must be at least 1")),
                Some(t) => t.min(app.config.session_max_ttl_sec),
                None => app.config.session_default_ttl_sec,
            };
            if app.is_shutting_down() {
                return Err(shutting_down());
            }
            let opts = runs::sandbox_options(
                &app,
                memory_mb,
                env.iter().map(|(k, v)| (k.clone(), v.clone())).collect(),
            );
            let sandbox = tokio::task::spawn_blocking(move || Sandbox::new(opts))
                .await
                .map_err(|e| ApiError::internal(format!("cannot create the sandbox: {e}")))?;
            let now = now_ms();
            let session = Arc::new(Session {
                id: new_id(),
                sandbox: Arc::new(sandbox),
                base_image: req.base_image.unwrap_or_else(|| image.to_string()),
                image_digest: app.images.digest().await,
                spec_version,
                created_at: now,
                expires_at: AtomicI64::new(now + ttl as i64 * 1000),
                env,
                labels: req.labels.unwrap_or_default(),
                cpu,
                memory_mb,
                timeout_sec,
                network_policy,
                lock: Arc::new(tokio::sync::Mutex::new(())),
                owner: user.clone(),
                processes: Default::default(),
            });
            if !app.insert_session(session.clone()) {
                session.sandbox.destroy();
                return Err(ApiError::new(
                    StatusCode::TOO_MANY_REQUESTS,
                    "quota_exceeded",
                    format!(
                        "the server holds its maximum of {} sessions",
                        app.config.max_sessions
                    ),
                )
                .with_details(json!({ "max_sessions": app.config.max_sessions })));
            }
            crate::observe::session_created(&app);
            audit::session_created(
                &app,
                &user,
                &session.id,
                &session.base_image,
                &session.image_digest,
                &session.spec_version,
                &source,
                trace.as_ref().map(|t| t.0.0.as_str()),
            );
            Ok(Created {
                status: StatusCode::CREATED,
                body: serde_json::to_value(session.view(&app.policy_hash))
                    .map_err(|e| ApiError::internal(e.to_string()))?,
                object_id: session.id.clone(),
                headers: Vec::new(),
            })
        },
    )
    .await
}

#[utoipa::path(
    get,
    path = "/sessions/{id}",
    tag = "sessions",
    params(("id" = String, Path, description = "session id")),
    responses(
        (status = 200, description = "the session", body = SessionView),
        (status = 404, description = "no such session (or it expired)", body = ErrorEnvelope),
    )
)]
async fn get_session(State(app): State<Arc<App>>, Path(id): Path<String>) -> ApiResult<Response> {
    let s = app
        .session(&id)
        .ok_or_else(|| ApiError::not_found("session", &id))?;
    Ok(views::json(StatusCode::OK, &s.view(&app.policy_hash)))
}

#[utoipa::path(
    delete,
    path = "/sessions/{id}",
    tag = "sessions",
    params(("id" = String, Path, description = "session id")),
    responses(
        (status = 204, description = "destroyed"),
        (status = 404, description = "no such session", body = ErrorEnvelope),
    )
)]
async fn delete_session(
    State(app): State<Arc<App>>,
    Path(id): Path<String>,
) -> ApiResult<StatusCode> {
    app.remove_session(&id)
        .map(|_| StatusCode::NO_CONTENT)
        .ok_or_else(|| ApiError::not_found("session", &id))
}

fn shutting_down() -> ApiError {
    ApiError::new(
        StatusCode::SERVICE_UNAVAILABLE,
        "unavailable",
        "the server is shutting down",
    )
    .with_header(header::RETRY_AFTER, "5")
}

// ---- uploads ----

#[utoipa::path(
    post,
    path = "/sessions/{id}/files",
    tag = "sessions",
    params(("id" = String, Path, description = "session id")),
    request_body(
        description = "files as `files[]` parts (their filenames are the paths), or one tar, gzip'd tar or zip archive",
        content(
            (UploadForm = "multipart/form-data"),
            (ArchiveBytes = "application/x-tar"),
            (ArchiveBytes = "application/gzip"),
            (ArchiveBytes = "application/zip"),
        )
    ),
    responses(
        (status = 201, description = "written into the workspace, all or nothing", body = UploadReply),
        (status = 400, description = "malformed body, refused path or member (`details.reason`)", body = ErrorEnvelope),
        (status = 404, description = "no such session", body = ErrorEnvelope),
        (status = 410, description = "the session's sandbox is gone", body = ErrorEnvelope),
        (status = 413, description = "over the size, file count or ratio caps, or the workspace cap", body = ErrorEnvelope),
        (status = 415, description = "an unsupported content type", body = ErrorEnvelope),
    )
)]
async fn upload_files(
    State(app): State<Arc<App>>,
    Path(id): Path<String>,
    req: Request,
) -> ApiResult<Response> {
    // A refused upload may leave part of its body unread: the connection cannot carry
    // another request, so the client is told not to reuse it.
    upload_into(app, id, req)
        .await
        .map_err(|e| e.with_header(header::CONNECTION, "close"))
}

async fn upload_into(app: Arc<App>, id: String, req: Request) -> ApiResult<Response> {
    let session = app
        .session(&id)
        .ok_or_else(|| ApiError::not_found("session", &id))?;
    let c = &app.config;
    let caps = Caps {
        max_bytes: c.max_upload_mb * MIB,
        max_files: c.max_upload_files,
        max_depth: c.max_upload_depth,
        max_ratio: c.max_upload_ratio,
    };
    let ct = req
        .headers()
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .unwrap_or("")
        .to_ascii_lowercase();
    let mime = ct.split(';').next().unwrap_or("").trim().to_string();
    let (staged, kind) = match mime.as_str() {
        "multipart/form-data" => {
            let mut mp = Multipart::from_request(req, &())
                .await
                .map_err(|e| upload::refused("malformed", format!("bad multipart body: {e}")))?;
            let mut staged = Staged::default();
            loop {
                let field = match mp.next_field().await {
                    Ok(Some(f)) => f,
                    Ok(None) => break,
                    Err(e) => return Err(multipart_error(e, caps.max_bytes)),
                };
                let name = field.name().unwrap_or("").to_string();
                if name != "files[]" && name != "files" {
                    return Err(upload::refused(
                        "unexpected_field",
                        format!("unexpected form field {name:?}; send files as files[]"),
                    ));
                }
                let Some(filename) = field.file_name().map(str::to_string) else {
                    return Err(upload::refused(
                        "invalid_path",
                        "a files[] part has no filename",
                    ));
                };
                let data = field
                    .bytes()
                    .await
                    .map_err(|e| multipart_error(e, caps.max_bytes))?;
                upload::add_part(&mut staged, &caps, &filename, data.to_vec())?;
            }
            (staged, "multipart")
        }
        "application/x-tar"
        | "application/tar"
        | "application/gzip"
        | "application/x-gzip"
        | "application/x-gtar"
        | "application/x-compressed-tar"
        | "application/tar+gzip"
        | "application/zip"
        | "application/x-zip-compressed" => {
            let data = axum::body::to_bytes(req.into_body(), caps.max_bytes as usize)
                .await
                .map_err(|_| {
                    ApiError::too_large("the upload", caps.max_bytes)
                        .with_details(json!({ "reason": "too_large", "limit": caps.max_bytes }))
                })?;
            let zip = mime.contains("zip") && !mime.contains("gzip");
            let gzip = !zip
                && (mime != "application/x-tar" && mime != "application/tar"
                    || data.starts_with(&[0x1f, 0x8b]));
            let kind = if zip {
                "zip"
            } else if gzip {
                "tar.gz"
            } else {
                "tar"
            };
            let staged = tokio::task::spawn_blocking(move || {
                if zip {
                    upload::expand_zip(&data, &caps)
                } else {
                    upload::expand_tar(&data, gzip, &caps)
                }
            })
            .await
            .map_err(|e| ApiError::internal(e.to_string()))??;
            (staged, kind)
        }
        other => {
            return Err(ApiError::new(
                StatusCode::UNSUPPORTED_MEDIA_TYPE,
                "invalid_request",
                format!(
                    "unsupported upload type {other:?}: use multipart/form-data (files[]), application/x-tar, application/gzip or application/zip"
                ),
            ));
        }
    };
    let _guard = session.lock.clone().lock_owned().await;
    let sb = session.sandbox.clone();
    let files = staged.files.len();
    let bytes = staged.bytes;
    let paths: Vec<String> = staged.files.iter().map(|(p, _)| p.clone()).collect();
    tokio::task::spawn_blocking(move || commit(&sb, &staged))
        .await
        .map_err(|e| ApiError::internal(e.to_string()))??;
    crate::observe::upload(&app, kind, bytes, files as u64);
    Ok(views::json(
        StatusCode::CREATED,
        &UploadReply {
            session_id: session.id.clone(),
            kind: kind.into(),
            files,
            bytes,
            paths,
        },
    ))
}

fn multipart_error(e: axum::extract::multipart::MultipartError, limit: u64) -> ApiError {
    if e.status() == StatusCode::PAYLOAD_TOO_LARGE {
        ApiError::too_large("the upload", limit)
            .with_details(json!({ "reason": "too_large", "limit": limit }))
    } else {
        upload::refused(
            "malformed",
            format!("bad multipart body: {}", e.body_text()),
        )
    }
}

/// Writes a staged upload into the workspace, all or nothing.
fn commit(sb: &Sandbox, staged: &Staged) -> ApiResult<()> {
    let snap = sb
        .snapshot()
        .map_err(|e| ApiError::new(StatusCode::GONE, "not_found", e.to_string()))?;
    let home = runs::WORKSPACE;
    let result = (|| -> Result<(), wasmsand::SandboxError> {
        for d in &staged.dirs {
            sb.mkdir(&format!("{home}/{d}"))?;
        }
        for (p, data) in &staged.files {
            sb.write_file(&format!("{home}/{p}"), data)?;
        }
        Ok(())
    })();
    match result {
        Ok(()) => Ok(()),
        Err(e) => {
            let _ = sb.restore(snap);
            Err(match e.errno() {
                Some(wasmsand::Errno::ENOSPC) => ApiError::new(
                    StatusCode::PAYLOAD_TOO_LARGE,
                    "quota_exceeded",
                    format!("the upload does not fit in the workspace: {e}"),
                )
                .with_details(json!({ "reason": "workspace_cap" })),
                _ => upload::refused("conflict", format!("cannot write the upload: {e}")),
            })
        }
    }
}

// ---- runs ----

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
    interactive: Option<bool>,
    stdin_max_bytes: Option<u64>,
    stdin_max_frame_bytes: Option<u64>,
    stdin_bps: Option<u64>,
    stdin_idle_timeout_sec: Option<u64>,
    resume_from_seq: Option<u64>,
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
        (status = 400, description = "invalid body or values (`invalid_request`, `invalid_spec_version`)", body = ErrorEnvelope),
        (status = 409, description = "an `Idempotency-Key` replayed with a different body (`idempotency_conflict`)", body = ErrorEnvelope),
        (status = 413, description = "body over 2 MiB, or inline files over 1 MiB", body = ErrorEnvelope),
        (status = 415, description = "a body that is not `application/json`", body = ErrorEnvelope),
        (status = 403, description = "execution is disabled on this server (`forbidden`)", body = ErrorEnvelope),
        (status = 404, description = "no such session", body = ErrorEnvelope),
        (status = 429, description = "the run queue is full (`rate_limited`, `Retry-After`)", body = ErrorEnvelope),
        (status = 503, description = "runtime unavailable, or the server is shutting down", body = ErrorEnvelope),
    )
)]
async fn create_run(
    State(app): State<Arc<App>>,
    principal: Principal,
    trace: Option<Extension<TraceId>>,
    headers: HeaderMap,
    body: Body,
) -> Response {
    let value = match read_json(&headers, body).await {
        Ok(v) => v,
        Err(e) => return e.into_response(),
    };
    let app2 = app.clone();
    let v2 = value.clone();
    let host = host_of(&headers);
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
        move || async move { start_run(app2, v2, host, user, ctx).await },
    )
    .await
}

async fn start_run(
    app: Arc<App>,
    v: Value,
    host: Option<String>,
    user: String,
    ctx: audit::RunContext,
) -> ApiResult<Created> {
    let spec_version = check_spec_version(&app, &v)?;
    let req: RunRequest = typed(&v)?;
    check_runtime(&app, req.runtime.as_deref())?;
    if !app.config.enable_execution {
        return Err(ApiError::new(
            StatusCode::FORBIDDEN,
            "forbidden",
            "execution is disabled on this server (SANDBOX_ENABLE_EXECUTION=false)",
        ));
    }
    let session = match (&req.session_id, &req.base_image) {
        (Some(_), Some(_)) => {
            return Err(ApiError::invalid(
                "give either session_id or base_image, not both (the session fixes the image)",
            ));
        }
        (None, None) => {
            return Err(ApiError::invalid(
                "base_image is required when session_id is not given",
            ));
        }
        (Some(id), None) => Some(
            app.session(id)
                .filter(|s| s.owner == user)
                .ok_or_else(|| ApiError::not_found("session", id))?,
        ),
        (None, Some(_)) => None,
    };
    let base_image = match (&session, &req.base_image) {
        (Some(s), _) => s.base_image.clone(),
        (None, Some(img)) => {
            check_image(&app, img)?;
            img.clone()
        }
        (None, None) => unreachable!("checked above"),
    };
    check_network(req.network_policy.as_deref())?;
    if req.command.is_empty() || req.command[0].is_empty() {
        return Err(ApiError::invalid(
            "command must be a non-empty array of strings",
        ));
    }
    if req.command.iter().any(|a| a.contains('\0')) {
        return Err(ApiError::invalid("command arguments must not contain NUL"));
    }
    if req.interactive == Some(true) {
        return Err(
            ApiError::invalid("interactive runs are not supported by this server")
                .with_details(json!({ "interactive_supported": false })),
        );
    }
    if req.resume_from_seq == Some(0) {
        return Err(ApiError::invalid("resume_from_seq starts at 1"));
    }
    let env = req.env.unwrap_or_default();
    check_env(&env)?;
    let (cpu, memory_mb) = match &session {
        Some(s) => {
            let (cpu, mem) = normalize_resources(&app, req.resources)?;
            if req.resources.is_some_and(|r| r.memory_mb.is_some()) && mem != s.memory_mb {
                return Err(ApiError::invalid(format!(
                    "resources.memory_mb is fixed by the session ({} MB)",
                    s.memory_mb
                )));
            }
            (cpu, s.memory_mb)
        }
        None => normalize_resources(&app, req.resources)?,
    };
    let startup_timeout_sec = check_timeout(
        &app,
        "startup_timeout_sec",
        req.startup_timeout_sec,
        app.config.default_startup_timeout_sec,
    )?;
    let default_timeout = session
        .as_ref()
        .map_or(app.config.default_exec_timeout_sec, |s| s.timeout_sec);
    let timeout_sec = check_timeout(&app, "timeout_sec", req.timeout_sec, default_timeout)?;
    let cwd = match req.cwd {
        Some(c) if c.is_empty() || c.contains('\0') => {
            return Err(ApiError::invalid("cwd must be a non-empty path"));
        }
        other => other,
    };
    let mut files = Vec::new();
    let mut inline_bytes = 0u64;
    for f in req.files.unwrap_or_default() {
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
        files.push((path, data));
    }
    let patterns = req.capture_patterns.unwrap_or_default();
    let capture = if patterns.is_empty() {
        None
    } else {
        Some(artifacts::compile_patterns(&patterns).map_err(ApiError::invalid)?)
    };
    if app.is_shutting_down() {
        return Err(shutting_down());
    }
    // Held until the run is recorded, so the user's next request counts it.
    let quota = crate::quotas::admit(&app, &user, capture.is_some()).await?;

    let id = new_id();
    let now = now_ms();
    let record = RunRecord {
        id: id.clone(),
        user_id: user.clone(),
        session_id: session.as_ref().map(|s| s.id.clone()),
        spec_version: spec_version.clone(),
        runtime: "wasm".into(),
        runtime_version: crate::RUNTIME_VERSION.into(),
        base_image: base_image.clone(),
        image_digest: app.images.digest().await,
        policy_hash: app.policy_hash.clone(),
        command: req.command.clone(),
        phase: Phase::Queued,
        reason_code: None,
        message: None,
        exit_code: None,
        created_at: now,
        starting_at: None,
        started_at: None,
        finished_at: None,
        resource_usage: store::ResourceUsage {
            limits: store::Limits {
                cpu,
                memory_mb,
                pids: app.config.pids_limit,
                nofile: app.config.ulimit_nofile,
                startup_timeout_sec,
                timeout_sec,
            },
            ..Default::default()
        },
        capture_patterns: patterns,
        artifacts: Vec::new(),
        artifacts_expired: false,
        artifacts_capped: false,
        node_id: Some(app.node_id.clone()),
        worker_id: Some(app.worker_id.clone()),
        last_seq: 0,
        log_truncated: false,
        frames_dropped: 0,
    };
    let spec = RunSpec {
        session,
        command: req.command,
        env,
        cwd,
        files,
        capture,
        startup_timeout_sec,
        timeout_sec,
        memory_mb,
    };
    let log = RunLog::new(app.config.ws_ring_bytes, app.config.max_log_bytes);
    let run = LiveRun::new(record.clone(), spec, log.clone(), req.resume_from_seq);
    crate::quotas::record(&app, &quota, &record).await?;
    app.add_live_run(run.clone());
    app.audit.remember_run(&id, ctx);
    let admission = runs::submit(&app, run.clone());
    // The reply reports the admission decision, not the live phase: a fast run may already be
    // running (or finished) by the time the snapshot below is taken.
    let (status, extra, admitted) = match admission {
        Admission::Started => (StatusCode::OK, None, Phase::Starting),
        Admission::Queued { estimated_start } => (
            StatusCode::ACCEPTED,
            Some(iso(estimated_start)),
            Phase::Queued,
        ),
        Admission::Full { retry_after_sec } => {
            app.remove_live_run(&id);
            let _ = store::call(&app.store, {
                let id = id.clone();
                move |s| {
                    // The client gets a 429 and no run id; the record only says why.
                    let mut r = s.get_run(&id)?.unwrap_or(record);
                    r.phase = Phase::Failed;
                    r.reason_code = Some("queue_full".into());
                    r.finished_at = Some(now_ms());
                    s.put_run(&r)
                }
            })
            .await;
            return Err(ApiError::new(
                StatusCode::TOO_MANY_REQUESTS,
                "rate_limited",
                format!(
                    "the run queue is full ({} waiting); retry later",
                    app.config.queue_max_length
                ),
            )
            .with_details(json!({
                "queue_max_length": app.config.queue_max_length,
                "retry_after_sec": retry_after_sec,
            }))
            .with_header(header::RETRY_AFTER, retry_after_sec.to_string()));
        }
    };
    runs::spawn_heartbeat(&app, log);
    let rec = run.snapshot();
    let mut stream_path = format!("{BASE}/runs/{id}/stream");
    if app.config.ws_signed_urls {
        stream_path.push_str(&crate::auth::signed_query(&app, &id));
    }
    let url = match host {
        Some(h) => format!("ws://{h}{stream_path}"),
        None => stream_path,
    };
    let body = RunCreated {
        run_id: id.clone(),
        session_id: rec.session_id,
        phase: admitted,
        log_stream_url: url,
        policy_hash: app.policy_hash.clone(),
        spec_version,
        runtime: "wasm".into(),
        runtime_version: crate::RUNTIME_VERSION.into(),
        base_image,
        image_digest: rec.image_digest,
        created_at: iso(rec.created_at),
        resources: ResourcesView { cpu, memory_mb },
        startup_timeout_sec,
        timeout_sec,
        estimated_start_time: extra,
    };
    Ok(Created {
        status,
        body: serde_json::to_value(&body).map_err(|e| ApiError::internal(e.to_string()))?,
        object_id: id.clone(),
        headers: vec![(header::LOCATION, format!("{BASE}/runs/{id}"))],
    })
}

fn run_view(r: &RunRecord, live: Option<&LiveRun>) -> RunView {
    let mut usage = r.resource_usage.clone();
    let frames_dropped = live.map_or(r.frames_dropped, |l| l.log.evicted());
    if !r.phase.is_terminal() {
        if let Some(started) = r.started_at {
            let secs = (now_ms() - started).max(0) as f64 / 1000.0;
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
    }
}

async fn load_run(app: &App, id: &str) -> ApiResult<RunRecord> {
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
async fn get_run(State(app): State<Arc<App>>, Path(id): Path<String>) -> ApiResult<Response> {
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
async fn cancel_run(State(app): State<Arc<App>>, Path(id): Path<String>) -> ApiResult<Response> {
    if let Some(run) = app.live_run(&id) {
        let grace = app.config.grace();
        if runs::stop(&run, StopCause::User, grace) {
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
async fn stream_run(
    State(app): State<Arc<App>>,
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
    let (log, default_from) = match app.live_run(&id) {
        Some(run) => (run.log.clone(), run.resume_from_seq.unwrap_or(1)),
        None => {
            let rec = load_run(&app, &id).await?;
            let log = RunLog::starting_at(app.config.ws_ring_bytes, 0, rec.last_seq.max(1));
            log.end(json!({
                "phase": rec.phase.as_str(),
                "exit_code": rec.exit_code,
                "reason_code": rec.reason_code,
                "message": rec.message,
            }));
            (log, 1)
        }
    };
    let ws = ws.map_err(|e| {
        ApiError::new(
            StatusCode::UPGRADE_REQUIRED,
            "invalid_request",
            format!("this endpoint is a WebSocket: {e}"),
        )
        .with_header(header::UPGRADE, "websocket")
    })?;
    let from = from.unwrap_or(default_from);
    Ok(ws.on_upgrade(move |socket| crate::ws::serve(socket, log, from, app.metrics.clone())))
}

// ---- artifacts ----

#[utoipa::path(
    get,
    path = "/runs/{id}/artifacts",
    tag = "artifacts",
    params(("id" = String, Path, description = "run id")),
    responses(
        (status = 200, description = "the artifacts captured after the run (empty until it finished)", body = ArtifactList),
        (status = 404, description = "no such run", body = ErrorEnvelope),
    )
)]
async fn list_artifacts(
    State(app): State<Arc<App>>,
    Path(id): Path<String>,
) -> ApiResult<Response> {
    let rec = load_run(&app, &id).await?;
    let items: Vec<ArtifactItem> = if rec.artifacts_expired {
        Vec::new()
    } else {
        rec.artifacts
            .iter()
            .map(|a| ArtifactItem {
                path: a.path.clone(),
                size: a.size,
                content_type: a.content_type.clone(),
                kind: a.kind.clone(),
                url: format!("{BASE}/runs/{id}/artifacts/{}", a.path),
            })
            .collect()
    };
    Ok(views::json(
        StatusCode::OK,
        &ArtifactList {
            artifact_bytes: if rec.artifacts_expired {
                0
            } else {
                rec.resource_usage.artifact_bytes
            },
            run_id: id,
            phase: rec.phase,
            artifacts: items,
            expired: rec.artifacts_expired,
            capped: rec.artifacts_capped,
        },
    ))
}

enum RangeReq {
    Full,
    Part(u64, u64),
}

/// One `bytes=` range against a length. Several ranges are refused (416); a header that is
/// not a bytes range is ignored, as RFC 9110 allows.
fn parse_range(h: Option<&HeaderValue>, len: u64) -> Result<RangeReq, ApiError> {
    let unsatisfiable = |why: &str| {
        ApiError::new(
            StatusCode::RANGE_NOT_SATISFIABLE,
            "invalid_request",
            why.to_string(),
        )
        .with_header(header::CONTENT_RANGE, format!("bytes */{len}"))
        .with_details(json!({ "size": len }))
    };
    let Some(h) = h else {
        return Ok(RangeReq::Full);
    };
    let Ok(s) = h.to_str() else {
        return Ok(RangeReq::Full);
    };
    let Some(spec) = s.trim().strip_prefix("bytes=") else {
        return Ok(RangeReq::Full);
    };
    if spec.contains(',') {
        return Err(unsatisfiable(
            "multiple ranges are not supported; ask for one range",
        ));
    }
    let Some((a, b)) = spec.trim().split_once('-') else {
        return Ok(RangeReq::Full);
    };
    let (a, b) = (a.trim(), b.trim());
    let (start, end) = if a.is_empty() {
        let Ok(n) = b.parse::<u64>() else {
            return Ok(RangeReq::Full);
        };
        if n == 0 {
            return Err(unsatisfiable("empty suffix range"));
        }
        (len.saturating_sub(n), len.saturating_sub(1))
    } else {
        let Ok(start) = a.parse::<u64>() else {
            return Ok(RangeReq::Full);
        };
        let end = if b.is_empty() {
            len.saturating_sub(1)
        } else {
            match b.parse::<u64>() {
                Ok(e) if e >= start => e.min(len.saturating_sub(1)),
                _ => return Ok(RangeReq::Full),
            }
        };
        (start, end)
    };
    if len == 0 || start >= len {
        return Err(unsatisfiable(
            "the range starts past the end of the artifact",
        ));
    }
    Ok(RangeReq::Part(start, end))
}

/// Text artifacts up to this size are gzip'd on the fly for clients that accept it.
const MAX_GZIP_BYTES: u64 = 32 * 1024 * 1024;

fn is_text(content_type: &str) -> bool {
    content_type.starts_with("text/")
        || ["application/json", "application/xml", "image/svg+xml"]
            .iter()
            .any(|t| content_type.starts_with(t))
}

fn accepts_gzip(headers: &HeaderMap) -> bool {
    headers
        .get_all(header::ACCEPT_ENCODING)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(','))
        .any(|enc| {
            let mut parts = enc.split(';');
            let name = parts.next().unwrap_or("").trim();
            let refused = parts.any(|p| {
                p.trim()
                    .strip_prefix("q=")
                    .and_then(|q| q.trim().parse::<f32>().ok())
                    == Some(0.0)
            });
            name.eq_ignore_ascii_case("gzip") && !refused
        })
}

async fn gzip_file(path: std::path::PathBuf, content_type: &str) -> ApiResult<Response> {
    let body = tokio::task::spawn_blocking(move || -> std::io::Result<Vec<u8>> {
        use std::io::Write;
        let data = std::fs::read(&path)?;
        let mut enc = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
        enc.write_all(&data)?;
        enc.finish()
    })
    .await
    .map_err(|e| ApiError::internal(e.to_string()))?
    .map_err(|e| ApiError::internal(e.to_string()))?;
    let mut resp = (StatusCode::OK, body).into_response();
    let h = resp.headers_mut();
    if let Ok(v) = HeaderValue::from_str(content_type) {
        h.insert(header::CONTENT_TYPE, v);
    }
    h.insert(header::CONTENT_ENCODING, HeaderValue::from_static("gzip"));
    h.insert(header::VARY, HeaderValue::from_static("accept-encoding"));
    h.insert(header::ACCEPT_RANGES, HeaderValue::from_static("bytes"));
    h.insert(
        header::X_CONTENT_TYPE_OPTIONS,
        HeaderValue::from_static("nosniff"),
    );
    Ok(resp)
}

#[utoipa::path(
    get,
    path = "/runs/{id}/artifacts/{path}",
    tag = "artifacts",
    params(
        ("id" = String, Path, description = "run id"),
        ("path" = String, Path, description = "the artifact's path, relative to the workspace"),
        ("Range" = Option<String>, Header, description = "one `bytes=` range"),
    ),
    responses(
        (status = 200, description = "the artifact (gzip'd for text when `Accept-Encoding` allows; a symlink is an empty `inode/symlink` body)", content_type = "application/octet-stream", body = ArchiveBytes),
        (status = 206, description = "the requested range", content_type = "application/octet-stream", body = ArchiveBytes),
        (status = 400, description = "a path that is absolute or has `..`", body = ErrorEnvelope),
        (status = 404, description = "no such run or artifact", body = ErrorEnvelope),
        (status = 410, description = "the run's artifacts expired", body = ErrorEnvelope),
        (status = 416, description = "a range past the end, or several ranges", body = ErrorEnvelope),
    )
)]
async fn get_artifact(
    State(app): State<Arc<App>>,
    Path((id, path)): Path<(String, String)>,
    headers: HeaderMap,
) -> ApiResult<Response> {
    let Some(rel) = artifacts::normalize(&path) else {
        return Err(ApiError::invalid(format!(
            "artifact path {path:?} is refused: it must be relative, without '..'"
        )));
    };
    let rec = load_run(&app, &id).await?;
    if rec.artifacts_expired {
        return Err(ApiError::new(
            StatusCode::GONE,
            "not_found",
            format!("the artifacts of run '{id}' have expired"),
        ));
    }
    let entry = rec
        .artifacts
        .iter()
        .find(|a| a.path == rel)
        .ok_or_else(|| ApiError::not_found("artifact", &rel))?
        .clone();
    if entry.kind == "symlink" {
        let mut resp = (StatusCode::OK, Body::empty()).into_response();
        let h = resp.headers_mut();
        h.insert(
            header::CONTENT_TYPE,
            HeaderValue::from_static("inode/symlink"),
        );
        h.insert("x-artifact-kind", HeaderValue::from_static("symlink"));
        return Ok(resp);
    }
    let root = artifacts::artifacts_dir(&app.config.data_dir, &rec.user_id, &rec.id);
    let file_path = root.join(&rel);
    // Never follow a link, wherever it came from.
    let meta = tokio::fs::symlink_metadata(&file_path)
        .await
        .map_err(|_| ApiError::not_found("artifact", &rel))?;
    if !meta.is_file() {
        return Err(ApiError::not_found("artifact", &rel));
    }
    let len = meta.len();
    let range = parse_range(headers.get(header::RANGE), len)?;
    if matches!(range, RangeReq::Full)
        && is_text(&entry.content_type)
        && accepts_gzip(&headers)
        && len <= MAX_GZIP_BYTES
    {
        return gzip_file(file_path, &entry.content_type).await;
    }
    let mut file = tokio::fs::File::open(&file_path)
        .await
        .map_err(|_| ApiError::not_found("artifact", &rel))?;
    use tokio::io::{AsyncReadExt, AsyncSeekExt};
    let (status, start, count) = match range {
        RangeReq::Full => (StatusCode::OK, 0, len),
        RangeReq::Part(s, e) => (StatusCode::PARTIAL_CONTENT, s, e - s + 1),
    };
    if start > 0 {
        file.seek(std::io::SeekFrom::Start(start))
            .await
            .map_err(|e| ApiError::internal(e.to_string()))?;
    }
    let stream = tokio_util::io::ReaderStream::new(file.take(count));
    let mut resp = (status, Body::from_stream(stream)).into_response();
    let h = resp.headers_mut();
    if let Ok(v) = HeaderValue::from_str(&entry.content_type) {
        h.insert(header::CONTENT_TYPE, v);
    }
    h.insert(header::ACCEPT_RANGES, HeaderValue::from_static("bytes"));
    h.insert(header::CONTENT_LENGTH, HeaderValue::from(count));
    h.insert(
        header::X_CONTENT_TYPE_OPTIONS,
        HeaderValue::from_static("nosniff"),
    );
    if status == StatusCode::PARTIAL_CONTENT
        && let Ok(v) =
            HeaderValue::from_str(&format!("bytes {}-{}/{len}", start, start + count - 1))
    {
        h.insert(header::CONTENT_RANGE, v);
    }
    Ok(resp)
}
