//! Sessions: `POST /sessions` (idempotent), `GET` and `DELETE /sessions/{id}`.

use std::collections::BTreeMap;
use std::sync::Arc;

use axum::Extension;
use axum::body::Body;
use axum::extract::{Path, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use serde::Deserialize;
use serde_json::json;
use utoipa::ToSchema;

use crate::App;
use crate::audit;
use crate::auth::Principal;
use crate::error::{ApiError, ApiResult, ErrorCode};
use crate::http::{read_json, shutting_down, typed};
use crate::idempotency::{Created, idempotent};
use crate::observe::TraceId;
use crate::runtime::{BoxSpec, ProvisionError};
use crate::sessions::{NewSession, Session};
use crate::util::new_id;
use crate::validate::{
    Resources, check_env, check_network, check_spec_version, check_timeout, normalize_resources,
};
use crate::views::{self, ErrorEnvelope, SessionView};

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
    /// With `network_policy: allowlist`: `{hosts, cidrs, ips}`, narrowing the server's
    /// `SANDBOX_EGRESS_ALLOWLIST` (docs/network.md).
    #[schema(value_type = Option<Object>)]
    egress_allowlist: Option<wasmsand::egress::EgressAllowlist>,
    env: Option<BTreeMap<String, String>>,
    labels: Option<BTreeMap<String, String>>,
    ttl_sec: Option<u64>,
    /// A repository to fetch into the new session's workspace (server-side; docs/service.md,
    /// "Git inputs").
    git: Option<crate::gitclone::GitRequest>,
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
        (status = 409, description = "an `Idempotency-Key` replayed with a different body (`idempotency_conflict`; `details`: `prior_id`, `key`, `prior_created_at`, `idempotency_key_echo`, `idempotency_status`)", body = ErrorEnvelope),
        (status = 413, description = "body over 2 MiB, or inline files over 1 MiB", body = ErrorEnvelope),
        (status = 415, description = "a body that is not `application/json`", body = ErrorEnvelope),
        (status = 429, description = "the server holds its maximum of sessions (`quota_exceeded`)", body = ErrorEnvelope),
        (status = 503, description = "runtime unavailable, or the server is shutting down", body = ErrorEnvelope),
    )
)]
pub(crate) async fn create_session(
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
            let (runtime, image) =
                crate::runtime::pick(&app, req.runtime.as_deref(), req.base_image.as_deref())
                    .await?;
            // The session keeps the policy in force now, whatever `/admin/policies` does next.
            let policy = app.policy();
            let network = check_network(
                &policy.config,
                runtime.as_ref(),
                req.network_policy.as_deref(),
                req.egress_allowlist.as_ref(),
            )?;
            let (cpu, memory_mb) = normalize_resources(runtime.as_ref(), req.resources)?;
            let env = req.env.unwrap_or_default();
            check_env(&env)?;
            let timeout_sec = check_timeout(
                &policy.config,
                "timeout_sec",
                req.timeout_sec,
                policy.config.default_exec_timeout_sec,
            )?;
            let ttl = match req.ttl_sec {
                Some(0) => return Err(ApiError::invalid("ttl_sec must be at least 1")),
                Some(t) => t.min(app.config.session_max_ttl_sec),
                None => app.config.session_default_ttl_sec,
            };
            if app.is_shutting_down() {
                return Err(shutting_down());
            }
            let id = new_id();
            let base_image = req
                .base_image
                .clone()
                .unwrap_or_else(|| image.canonical.clone());
            let trace_id = trace.as_ref().map(|t| t.0.0.clone());
            let checkout = match &req.git {
                Some(g) => match crate::gitclone::checkout(&app, g).await {
                    Ok(c) => Some(c),
                    Err(e) => {
                        if e.status == StatusCode::FORBIDDEN {
                            let digest = runtime.image_digest(&image).await;
                            let facts = audit::SessionFacts {
                                session_id: &id,
                                runtime: runtime.name(),
                                runtime_version: &runtime.version(),
                                base_image: &base_image,
                                image_digest: &digest,
                                spec_version: &spec_version,
                                source: &source,
                                trace_id: trace_id.as_deref(),
                                policy_hash: &policy.hash,
                            };
                            let common = facts.common();
                            audit::egress_refused(&app, &user, Some(&id), common, &e.details);
                        }
                        return Err(e);
                    }
                },
                None => None,
            };
            let boxed = runtime
                .create_box(BoxSpec {
                    image: image.clone(),
                    memory_mb,
                    cpu,
                    env: env.clone(),
                    owner: user.clone(),
                    session: Some(id.clone()),
                    run: None,
                    network: network.allowlist.clone(),
                    limits: None,
                })
                .await
                .map_err(provision_error)?;
            let git_summary = match (&req.git, checkout) {
                (Some(g), Some(c)) => {
                    let summary = c.summary(g);
                    if let Err(e) = crate::api::uploads::commit(boxed.as_ref(), c.staged).await {
                        boxed.destroy().await;
                        return Err(e);
                    }
                    Some(summary)
                }
                _ => None,
            };
            let session = Session::new(
                NewSession {
                    id,
                    boxed,
                    runtime,
                    base_image,
                    spec_version,
                    ttl_sec: ttl,
                    env,
                    labels: req.labels.unwrap_or_default(),
                    cpu,
                    memory_mb,
                    timeout_sec,
                    network_policy: network.policy,
                    egress: network.allowlist,
                    owner: user.clone(),
                    limits: None,
                    policy,
                },
                app.clock.now_ms(),
            );
            let session = install(&app, session, &source, trace_id.as_deref()).await?;
            if let Some(mut summary) = git_summary {
                let egress = summary["egress"].take();
                let facts = audit::SessionFacts::of(&session, &source, trace_id.as_deref());
                let common = facts.common();
                audit::egress_allowed(&app, &user, None, Some(&session.id), common, egress);
            }
            Ok(Created {
                status: StatusCode::CREATED,
                body: serde_json::to_value(session.view())
                    .map_err(|e| ApiError::internal(e.to_string()))?,
                object_id: session.id.clone(),
                headers: Vec::new(),
            })
        },
    )
    .await
}

/// Puts a new session in service: in the table (within `SANDBOX_MAX_SESSIONS`; else its
/// sandbox is destroyed), checkpointed at once (a crash before its first run does not lose
/// it), counted and audited as made by `source`.
pub(crate) async fn install(
    app: &Arc<App>,
    session: Session,
    source: &str,
    trace_id: Option<&str>,
) -> ApiResult<Arc<Session>> {
    let session = Arc::new(session);
    if !app.insert_session(session.clone()) {
        session.boxed.destroy().await;
        return Err(too_many_sessions(app));
    }
    {
        let _guard = session.lock.lock().await;
        app.checkpoint(&session).await;
    }
    crate::observe::session_created(app, session.runtime.name());
    let facts = audit::SessionFacts::of(&session, source, trace_id);
    audit::session_created(app, &session.owner, &facts);
    Ok(session)
}

/// The sessions of one user (`None`: all), filtered by `state`, one page.
pub(crate) async fn session_list(
    app: &Arc<App>,
    user: Option<&str>,
    q: &std::collections::HashMap<String, String>,
) -> ApiResult<Response> {
    let state = q.get("state").map(String::as_str);
    if state.is_some_and(|s| !matches!(s, "active" | "hibernated")) {
        return Err(ApiError::invalid("state must be active or hibernated"));
    }
    let mut all = app.list_sessions(user).await?;
    all.retain(|i| state.is_none_or(|s| i.state == s));
    let (limit, offset) = crate::http::limit_offset(q)?;
    let total = all.len() as u64;
    let items = all.into_iter().skip(offset).take(limit).collect();
    Ok(views::json(
        StatusCode::OK,
        &views::SessionList {
            items,
            total,
            limit: limit as u64,
            offset: offset as u64,
        },
    ))
}

#[utoipa::path(
    get,
    path = "/sessions",
    tag = "sessions",
    params(
        ("state" = Option<String>, Query, description = "active or hibernated"),
        ("limit" = Option<u64>, Query, minimum = 1, maximum = 200, description = "page size (default 50)"),
        ("offset" = Option<u64>, Query, description = "items to skip"),
    ),
    responses(
        (status = 200, description = "the caller's sessions, live and hibernated, oldest first", body = views::SessionList),
        (status = 400, description = "a bad filter, limit or offset", body = ErrorEnvelope),
    )
)]
pub(crate) async fn list_sessions(
    State(app): State<Arc<App>>,
    principal: Principal,
    axum::extract::Query(q): axum::extract::Query<std::collections::HashMap<String, String>>,
) -> ApiResult<Response> {
    session_list(&app, Some(&principal.user_id), &q).await
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
pub(crate) async fn get_session(
    State(app): State<Arc<App>>,
    Path(id): Path<String>,
) -> ApiResult<Response> {
    let s = app
        .session(&id)
        .await?
        .ok_or_else(|| ApiError::not_found("session", &id))?;
    Ok(views::json(StatusCode::OK, &s.view()))
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
pub(crate) async fn delete_session(
    State(app): State<Arc<App>>,
    Path(id): Path<String>,
) -> ApiResult<StatusCode> {
    if app.delete_session(&id).await? {
        Ok(StatusCode::NO_CONTENT)
    } else {
        Err(ApiError::not_found("session", &id))
    }
}

/// The answer when the server holds its maximum of live sessions.
pub(crate) fn too_many_sessions(app: &App) -> ApiError {
    let max = app.policy().config.max_sessions;
    ApiError::new(
        StatusCode::TOO_MANY_REQUESTS,
        ErrorCode::QuotaExceeded,
        format!("the server holds its maximum of {max} sessions"),
    )
    .with_details(json!({ "max_sessions": max }))
}

/// A box that could not be made: 503 with what to do (build the image, wait for the engine).
fn provision_error(e: ProvisionError) -> ApiError {
    match &e {
        ProvisionError::ImageMissing { image, build } => ApiError::new(
            StatusCode::SERVICE_UNAVAILABLE,
            ErrorCode::ImagePullFailed,
            e.message(),
        )
        .with_details(json!({ "image": image, "build_command": build })),
        ProvisionError::Unavailable(m) => ApiError::new(
            StatusCode::SERVICE_UNAVAILABLE,
            ErrorCode::RuntimeUnavailable,
            m.clone(),
        )
        .with_details(json!({ "available": false, "reason": m })),
        ProvisionError::Failed(m) => ApiError::internal(m.clone()),
    }
}
