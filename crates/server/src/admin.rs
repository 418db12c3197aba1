//! Read-only admin API (docs/service.md, "Admin"): runs with filters and paging, one run in
//! full, idempotency entries, artifact usage per user. Backed by the store, with in-flight
//! runs shown as they are now. Admins only (see [`crate::auth`]).

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;

use axum::extract::{Path, Query, State};
use axum::http::StatusCode;
use axum::response::Response;

use crate::App;
use crate::error::{ApiError, ApiResult};
use crate::store::{self, RunRecord};
use crate::util::iso;
use crate::views::{
    self, AdminArtifact, AdminIdemItem, AdminIdemPage, AdminRunDetail, AdminRunPage,
    AdminRunSummary, AdminUsage, AdminUsageItem, ErrorEnvelope, SessionList,
};

/// Parses an ISO-8601 filter bound into epoch milliseconds.
fn bound(q: &HashMap<String, String>, name: &str) -> ApiResult<Option<i64>> {
    let Some(v) = q.get(name) else {
        return Ok(None);
    };
    let t = time::OffsetDateTime::parse(v, &time::format_description::well_known::Rfc3339)
        .map_err(|_| ApiError::invalid(format!("{name} must be an ISO-8601 (RFC 3339) time")))?;
    Ok(Some((t.unix_timestamp_nanos() / 1_000_000) as i64))
}

fn summary(r: &RunRecord) -> AdminRunSummary {
    AdminRunSummary {
        id: r.id.clone(),
        user_id: r.user_id.clone(),
        spec_version: r.spec_version.clone(),
        runtime: r.runtime.clone(),
        runtime_version: r.runtime_version.clone(),
        base_image: r.base_image.clone(),
        phase: r.phase,
        exit_code: r.exit_code,
        started_at: r.started_at.map(iso),
        finished_at: r.finished_at.map(iso),
        image_digest: r.image_digest.clone(),
        policy_hash: r.policy_hash.clone(),
        node_id: r.node_id.clone(),
        worker_id: r.worker_id.clone(),
    }
}

/// Every run the store knows, with live ones as they stand now.
async fn all_runs(app: &Arc<App>) -> ApiResult<Vec<RunRecord>> {
    let mut runs = store::call(&app.store, |s| s.list_runs())
        .await
        .map_err(|e| ApiError::internal(e.to_string()))?;
    for r in &mut runs {
        if let Some(live) = app.live_run(&r.id) {
            *r = live.snapshot();
        }
    }
    Ok(runs)
}

#[utoipa::path(
    get,
    path = "/admin/sessions",
    tag = "admin",
    params(
        ("user_id" = Option<String>, Query),
        ("state" = Option<String>, Query, description = "active or hibernated"),
        ("limit" = Option<u64>, Query, minimum = 1, maximum = 200, description = "page size (default 50)"),
        ("offset" = Option<u64>, Query, description = "items to skip"),
    ),
    responses(
        (status = 200, description = "every user's sessions, live and hibernated, oldest first", body = SessionList),
        (status = 400, description = "a bad filter, limit or offset", body = ErrorEnvelope),
        (status = 403, description = "not an admin", body = ErrorEnvelope),
    )
)]
pub async fn list_sessions(
    State(app): State<Arc<App>>,
    Query(q): Query<HashMap<String, String>>,
) -> ApiResult<Response> {
    crate::api::sessions::session_list(&app, q.get("user_id").map(String::as_str), &q).await
}

#[utoipa::path(
    get,
    path = "/admin/runs",
    tag = "admin",
    params(
        ("limit" = Option<u64>, Query, minimum = 1, maximum = 200, description = "page size (default 50)"),
        ("offset" = Option<u64>, Query, description = "items to skip"),
        ("user_id" = Option<String>, Query),
        ("node_id" = Option<String>, Query, description = "the node that executed the run (`SANDBOX_NODE_ID`)"),
        ("worker_id" = Option<String>, Query, description = "the process that executed the run"),
        ("phase" = Option<String>, Query, description = "queued, starting, running, completed, failed, timed_out or killed"),
        ("runtime" = Option<String>, Query),
        ("image_digest" = Option<String>, Query),
        ("base_image" = Option<String>, Query),
        ("q" = Option<String>, Query, description = "substring of the base image or message"),
        ("started_at_from" = Option<String>, Query, format = DateTime),
        ("started_at_to" = Option<String>, Query, format = DateTime),
        ("finished_at_from" = Option<String>, Query, format = DateTime),
        ("finished_at_to" = Option<String>, Query, format = DateTime),
        ("sort" = Option<String>, Query, description = "started_at or finished_at, with :asc or :desc"),
    ),
    responses(
        (status = 200, description = "one page of the runs that match, sorted", body = AdminRunPage),
        (status = 400, description = "a bad filter, limit, offset or sort", body = ErrorEnvelope),
        (status = 403, description = "not an admin", body = ErrorEnvelope),
    )
)]
pub async fn list_runs(
    State(app): State<Arc<App>>,
    Query(q): Query<HashMap<String, String>>,
) -> ApiResult<Response> {
    let (limit, offset) = crate::http::limit_offset(&q)?;
    let (sort_key, desc) = match q.get("sort").map(String::as_str) {
        None => ("started_at", true),
        Some(s) => {
            let (k, dir) = s.split_once(':').unwrap_or((s, "desc"));
            if !matches!(k, "started_at" | "finished_at") || !matches!(dir, "asc" | "desc") {
                return Err(ApiError::invalid(
                    "sort must be started_at or finished_at, optionally with :asc or :desc",
                ));
            }
            (k, dir == "desc")
        }
    };
    let text = |name: &str| q.get(name).cloned();
    // The store filters, sorts and pages (SQL stores from their indexes); runs in flight on
    // this replica are then shown as they stand now.
    let query = store::RunQuery {
        user_id: text("user_id"),
        node_id: text("node_id"),
        worker_id: text("worker_id"),
        phase: text("phase"),
        runtime: text("runtime"),
        image_digest: text("image_digest"),
        base_image: text("base_image"),
        q: text("q"),
        started_from: bound(&q, "started_at_from")?,
        started_to: bound(&q, "started_at_to")?,
        finished_from: bound(&q, "finished_at_from")?,
        finished_to: bound(&q, "finished_at_to")?,
        sort: if sort_key == "started_at" {
            store::RunSort::StartedAt
        } else {
            store::RunSort::FinishedAt
        },
        desc,
        limit,
        offset,
    };
    let page = store::call(&app.store, move |s| s.query_runs(&query))
        .await
        .map_err(|e| ApiError::internal(e.to_string()))?;
    let items: Vec<AdminRunSummary> = page
        .items
        .iter()
        .map(|r| match app.live_run(&r.id) {
            Some(live) => summary(&live.snapshot()),
            None => summary(r),
        })
        .collect();
    let has_more = ((offset + items.len()) as u64) < page.total;
    Ok(views::json(
        StatusCode::OK,
        &AdminRunPage {
            items,
            total: page.total,
            limit: limit as u64,
            offset: offset as u64,
            has_more,
        },
    ))
}

#[utoipa::path(
    get,
    path = "/admin/runs/{id}",
    tag = "admin",
    params(("id" = String, Path, description = "run id")),
    responses(
        (status = 200, description = "the run in full, with `resource_usage` and its artifacts", body = AdminRunDetail),
        (status = 403, description = "not an admin", body = ErrorEnvelope),
        (status = 404, description = "no such run", body = ErrorEnvelope),
    )
)]
pub async fn get_run(State(app): State<Arc<App>>, Path(id): Path<String>) -> ApiResult<Response> {
    let r = app
        .run_record(&id)
        .await
        .map_err(|e| ApiError::internal(e.to_string()))?
        .ok_or_else(|| ApiError::not_found("run", &id))?;
    // Under `SANDBOX_REDACT_PATHS` (as in force now) an admin sees digests of the paths.
    let redact = app.policy().config.redact_paths;
    let artifacts = if r.artifacts_expired {
        Vec::new()
    } else {
        r.artifacts
            .iter()
            .map(|a| AdminArtifact {
                path: if redact {
                    crate::redact::path(&a.path)
                } else {
                    a.path.clone()
                },
                size: a.size,
            })
            .collect()
    };
    let message = match &r.message {
        Some(m) if redact => Some(crate::redact::text(m)),
        m => m.clone(),
    };
    Ok(views::json(
        StatusCode::OK,
        &AdminRunDetail {
            summary: summary(&r),
            message,
            reason_code: r.reason_code.clone(),
            session_id: r.session_id.clone(),
            created_at: iso(r.created_at),
            resource_usage: r.resource_usage.clone(),
            artifacts,
        },
    ))
}

#[utoipa::path(
    get,
    path = "/admin/idempotency",
    tag = "admin",
    params(
        ("limit" = Option<u64>, Query, minimum = 1, maximum = 200, description = "page size (default 50)"),
        ("offset" = Option<u64>, Query, description = "items to skip"),
        ("endpoint" = Option<String>, Query, description = "runs, sessions or any"),
        ("user_id" = Option<String>, Query),
    ),
    responses(
        (status = 200, description = "one page of the entries, newest first", body = AdminIdemPage),
        (status = 400, description = "a bad filter, limit or offset", body = ErrorEnvelope),
        (status = 403, description = "not an admin", body = ErrorEnvelope),
    )
)]
pub async fn list_idempotency(
    State(app): State<Arc<App>>,
    Query(q): Query<HashMap<String, String>>,
) -> ApiResult<Response> {
    let (limit, offset) = crate::http::limit_offset(&q)?;
    let endpoint = q.get("endpoint").map(String::as_str).unwrap_or("any");
    if !matches!(endpoint, "runs" | "sessions" | "any") {
        return Err(ApiError::invalid("endpoint must be runs, sessions or any"));
    }
    let mut entries = store::call(&app.store, |s| s.list_idempotency())
        .await
        .map_err(|e| ApiError::internal(e.to_string()))?;
    let user = q.get("user_id");
    entries.retain(|e| {
        (endpoint == "any" || e.endpoint == endpoint) && user.is_none_or(|u| &e.user_id == u)
    });
    entries.sort_by_key(|e| std::cmp::Reverse(e.created_at));
    let total = entries.len();
    let items: Vec<AdminIdemItem> = entries
        .iter()
        .skip(offset)
        .take(limit)
        .map(|e| AdminIdemItem {
            endpoint: e.endpoint.clone(),
            user_key: e.user_id.clone(),
            key: e.key.clone(),
            created_at: iso(e.created_at),
            object_id: e.object_id.clone(),
        })
        .collect();
    let has_more = offset + items.len() < total;
    Ok(views::json(
        StatusCode::OK,
        &AdminIdemPage {
            items,
            total: total as u64,
            limit: limit as u64,
            offset: offset as u64,
            has_more,
        },
    ))
}

#[utoipa::path(
    get,
    path = "/admin/usage",
    tag = "admin",
    params(
        ("limit" = Option<u64>, Query, minimum = 1, maximum = 200, description = "page size (default 50)"),
        ("offset" = Option<u64>, Query, description = "items to skip"),
    ),
    responses(
        (status = 200, description = "artifact bytes per user, largest first", body = AdminUsage),
        (status = 400, description = "a bad limit or offset", body = ErrorEnvelope),
        (status = 403, description = "not an admin", body = ErrorEnvelope),
    )
)]
pub async fn usage(
    State(app): State<Arc<App>>,
    Query(q): Query<HashMap<String, String>>,
) -> ApiResult<Response> {
    let (limit, _) = crate::http::limit_offset(&q)?;
    let mut by_user: BTreeMap<String, u64> = BTreeMap::new();
    for r in all_runs(&app).await? {
        let bytes = if r.artifacts_expired {
            0
        } else {
            r.resource_usage.artifact_bytes
        };
        *by_user.entry(r.user_id).or_default() += bytes;
    }
    let mut items: Vec<(String, u64)> = by_user.into_iter().collect();
    items.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(&b.0)));
    let items = items
        .into_iter()
        .take(limit)
        .map(|(user_id, artifact_bytes)| AdminUsageItem {
            user_id,
            artifact_bytes,
        })
        .collect();
    Ok(views::json(StatusCode::OK, &AdminUsage { items }))
}
