//! Read-only admin API (PRD §30): runs with filters and paging, one run in full, idempotency
//! entries, artifact usage per user. Backed by the store, with in-flight runs shown as they
//! are now. The service has no auth yet, so these endpoints are as open as the rest.

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;

use axum::extract::{Path, Query, State};
use axum::response::{IntoResponse, Response};
use serde_json::{Value, json};

use crate::App;
use crate::error::{ApiError, ApiResult};
use crate::store::{self, RunRecord};
use crate::util::iso;
use crate::views::ErrorEnvelope;

const MAX_LIMIT: usize = 200;

fn limit_offset(q: &HashMap<String, String>) -> ApiResult<(usize, usize)> {
    let num = |name: &str, default: usize| -> ApiResult<usize> {
        match q.get(name) {
            None => Ok(default),
            Some(v) => v
                .parse::<usize>()
                .map_err(|_| ApiError::invalid(format!("{name} must be a non-negative integer"))),
        }
    };
    let limit = num("limit", 50)?;
    if limit == 0 || limit > MAX_LIMIT {
        return Err(ApiError::invalid(format!(
            "limit must be in [1, {MAX_LIMIT}]"
        )));
    }
    Ok((limit, num("offset", 0)?))
}

/// Parses an ISO-8601 filter bound into epoch milliseconds.
fn bound(q: &HashMap<String, String>, name: &str) -> ApiResult<Option<i64>> {
    let Some(v) = q.get(name) else {
        return Ok(None);
    };
    let t = time::OffsetDateTime::parse(v, &time::format_description::well_known::Rfc3339)
        .map_err(|_| ApiError::invalid(format!("{name} must be an ISO-8601 (RFC 3339) time")))?;
    Ok(Some((t.unix_timestamp_nanos() / 1_000_000) as i64))
}

fn summary(r: &RunRecord) -> Value {
    json!({
        "id": r.id,
        "user_id": r.user_id,
        "spec_version": r.spec_version,
        "runtime": r.runtime,
        "runtime_version": r.runtime_version,
        "base_image": r.base_image,
        "phase": r.phase.as_str(),
        "exit_code": r.exit_code,
        "started_at": r.started_at.map(iso),
        "finished_at": r.finished_at.map(iso),
        "image_digest": r.image_digest,
        "policy_hash": r.policy_hash,
    })
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
    path = "/admin/runs",
    tag = "admin",
    params(
        ("limit" = Option<u64>, Query, minimum = 1, maximum = 200, description = "page size (default 50)"),
        ("offset" = Option<u64>, Query, description = "items to skip"),
        ("user_id" = Option<String>, Query),
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
        (status = 200, description = "`items`, `total`, `limit`, `offset`, `has_more`", body = Object),
        (status = 400, description = "a bad filter, limit, offset or sort", body = ErrorEnvelope),
        (status = 403, description = "not an admin", body = ErrorEnvelope),
    )
)]
pub async fn list_runs(
    State(app): State<Arc<App>>,
    Query(q): Query<HashMap<String, String>>,
) -> ApiResult<Response> {
    let (limit, offset) = limit_offset(&q)?;
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
    let items: Vec<Value> = page
        .items
        .iter()
        .map(|r| match app.live_run(&r.id) {
            Some(live) => summary(&live.snapshot()),
            None => summary(r),
        })
        .collect();
    let total = page.total as usize;
    Ok(axum::Json(json!({
        "items": items,
        "total": total,
        "limit": limit,
        "offset": offset,
        "has_more": offset + items.len() < total,
    }))
    .into_response())
}

#[utoipa::path(
    get,
    path = "/admin/runs/{id}",
    tag = "admin",
    params(("id" = String, Path, description = "run id")),
    responses(
        (status = 200, description = "the run in full, with `resource_usage` and its artifacts", body = Object),
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
    let mut v = summary(&r);
    v["message"] = json!(r.message);
    v["reason_code"] = json!(r.reason_code);
    v["session_id"] = json!(r.session_id);
    v["created_at"] = json!(iso(r.created_at));
    v["resource_usage"] = json!(r.resource_usage);
    v["artifacts"] = if r.artifacts_expired {
        json!([])
    } else {
        json!(
            r.artifacts
                .iter()
                .map(|a| json!({ "path": a.path, "size": a.size }))
                .collect::<Vec<_>>()
        )
    };
    Ok(axum::Json(v).into_response())
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
        (status = 200, description = "`items`, `total`, `limit`, `offset`, `has_more`", body = Object),
        (status = 400, description = "a bad filter, limit or offset", body = ErrorEnvelope),
        (status = 403, description = "not an admin", body = ErrorEnvelope),
    )
)]
pub async fn list_idempotency(
    State(app): State<Arc<App>>,
    Query(q): Query<HashMap<String, String>>,
) -> ApiResult<Response> {
    let (limit, offset) = limit_offset(&q)?;
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
    let items: Vec<Value> = entries
        .iter()
        .skip(offset)
        .take(limit)
        .map(|e| {
            json!({
                "endpoint": e.endpoint,
                "user_key": e.user_id,
                "key": e.key,
                "created_at": iso(e.created_at),
                "object_id": e.object_id,
            })
        })
        .collect();
    Ok(axum::Json(json!({
        "items": items, "total": total, "limit": limit, "offset": offset,
        "has_more": offset + items.len() < total,
    }))
    .into_response())
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
        (status = 200, description = "`items`: artifact bytes per user, largest first", body = Object),
        (status = 400, description = "a bad limit or offset", body = ErrorEnvelope),
        (status = 403, description = "not an admin", body = ErrorEnvelope),
    )
)]
pub async fn usage(
    State(app): State<Arc<App>>,
    Query(q): Query<HashMap<String, String>>,
) -> ApiResult<Response> {
    let (limit, _) = limit_offset(&q)?;
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
    let items: Vec<Value> = items
        .into_iter()
        .take(limit)
        .map(|(u, b)| json!({ "user_id": u, "artifact_bytes": b }))
        .collect();
    Ok(axum::Json(json!({ "items": items })).into_response())
}
