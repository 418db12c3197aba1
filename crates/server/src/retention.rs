//! Retention: run records older than `SANDBOX_RUN_RETENTION_DAYS` leave the store with their
//! directory on disk (artifacts and all), in bounded batches from the sweeper; and the admin
//! actions that run the sweeps now (`POST /admin/gc`) or prune idempotency entries by age
//! (`DELETE /admin/idempotency`). Admins only (see [`crate::auth`]); both are audited.

use std::collections::HashMap;
use std::sync::Arc;

use axum::extract::{Query, State};
use axum::http::StatusCode;
use axum::response::Response;
use serde::Serialize;
use serde_json::json;
use utoipa::ToSchema;

use crate::App;
use crate::error::{ApiError, ApiResult};
use crate::store;
use crate::views::{self, ErrorEnvelope};

/// Runs deleted by one store call: a sweep never holds the store for long, and the next tick
/// takes the rest.
const PURGE_BATCH: usize = 500;

/// Deletes the finished runs past the retention, with their directories, and forgets them in
/// memory. Returns how many went. A retention of 0 days keeps every run.
pub(crate) async fn purge_runs(app: &Arc<App>) -> u64 {
    let days = app.config.run_retention_days;
    if days == 0 {
        return 0;
    }
    let cutoff = app
        .clock
        .now_ms()
        .saturating_sub((days as i64).saturating_mul(86_400_000));
    let mut total = 0;
    loop {
        let gone = match store::call(&app.store, move |s| s.runs_purge(cutoff, PURGE_BATCH)).await {
            Ok(gone) => gone,
            Err(e) => {
                tracing::warn!(%e, "cannot purge runs past their retention");
                return total;
            }
        };
        let n = gone.len();
        total += n as u64;
        {
            let mut live = app.runs.lock();
            for r in &gone {
                live.remove(&r.id);
            }
        }
        let data_dir = app.config.data_dir.clone();
        let _ = tokio::task::spawn_blocking(move || {
            for r in gone {
                let dir = crate::artifacts::run_dir(&data_dir, &r.user_id, &r.id);
                if let Err(e) = std::fs::remove_dir_all(&dir)
                    && e.kind() != std::io::ErrorKind::NotFound
                {
                    tracing::warn!(path = %dir.display(), %e, "cannot delete a purged run's directory");
                }
            }
        })
        .await;
        if n < PURGE_BATCH {
            return total;
        }
    }
}

/// An admin action's audit body: the fields every audit event has (the admin list reads them
/// back), empty where no run or image is concerned, and what the action did.
pub(crate) fn admin_event(
    app: &App,
    headers: &axum::http::HeaderMap,
    what: serde_json::Value,
) -> serde_json::Value {
    let mut body = json!({
        "source": crate::audit::source_of(headers),
        "runtime": "",
        "runtime_version": "",
        "base_image": "",
        "image_digest": "",
        "spec_version": "",
        "policy_hash": app.policy_hash(),
    });
    if let (Some(b), serde_json::Value::Object(w)) = (body.as_object_mut(), what) {
        b.extend(w);
    }
    body
}

/// What `POST /admin/gc` did.
#[derive(Serialize, ToSchema)]
pub struct GcReport {
    /// Run records past `SANDBOX_RUN_RETENTION_DAYS` deleted, with their artifacts.
    pub runs_deleted: u64,
    /// Runs whose artifacts passed `SANDBOX_ARTIFACT_TTL_HOURS` and were deleted (the records
    /// stay, marked `artifacts_expired`).
    pub artifacts_expired: u64,
    /// Idempotency entries past `SANDBOX_IDEMPOTENCY_TTL_SEC` deleted.
    pub idempotency_deleted: u64,
    /// Audit events past `SANDBOX_AUDIT_RETENTION_DAYS` deleted.
    pub audit_deleted: u64,
    /// How long the sweep took, in milliseconds.
    pub duration_ms: u64,
}

/// `POST /admin/gc`: every retention sweep at once, now, instead of on the sweeper's next
/// tick (seed 003: "trigger store GC/retention sweeps").
#[utoipa::path(
    post,
    path = "/admin/gc",
    tag = "admin",
    responses(
        (status = 200, description = "what each sweep removed", body = GcReport),
        (status = 403, description = "not an admin", body = ErrorEnvelope),
        (status = 500, description = "the store failed", body = ErrorEnvelope),
    )
)]
pub async fn gc(
    State(app): State<Arc<App>>,
    principal: crate::auth::Principal,
    headers: axum::http::HeaderMap,
) -> ApiResult<Response> {
    let started = std::time::Instant::now();
    let now = app.clock.now_ms();
    let idem_cutoff = now - app.config.idempotency_ttl_sec as i64 * 1000;
    let idempotency_deleted = store::call(&app.store, move |s| s.idem_purge(idem_cutoff))
        .await
        .map_err(|e| ApiError::internal(e.to_string()))? as u64;
    let audit_cutoff = now - app.config.audit_retention_days as i64 * 86_400_000;
    let audit_deleted = store::call(&app.store, move |s| s.audit_purge(audit_cutoff))
        .await
        .map_err(|e| ApiError::internal(e.to_string()))? as u64;
    let artifacts_expired = crate::artifacts::sweep(&app).await;
    let runs_deleted = purge_runs(&app).await;
    app.forget_expired_saved().await;
    let report = GcReport {
        runs_deleted,
        artifacts_expired,
        idempotency_deleted,
        audit_deleted,
        duration_ms: started.elapsed().as_millis() as u64,
    };
    app.audit.emit(
        "sandbox.admin.gc",
        &principal.user_id,
        None,
        None,
        admin_event(
            &app,
            &headers,
            json!({
                "runs_deleted": report.runs_deleted,
                "artifacts_expired": report.artifacts_expired,
                "idempotency_deleted": report.idempotency_deleted,
                "audit_deleted": report.audit_deleted,
            }),
        ),
    );
    Ok(views::json(StatusCode::OK, &report))
}

/// What `DELETE /admin/idempotency` removed.
#[derive(Serialize, ToSchema)]
pub struct IdemPruned {
    pub deleted: u64,
    /// The entries created before this time went.
    pub cutoff: String,
}

/// `DELETE /admin/idempotency?older_than_sec=N`: forgets the idempotency entries created more
/// than `N` seconds ago (default 0: all of them), so a retried request after this runs
/// again instead of getting the remembered answer.
#[utoipa::path(
    delete,
    path = "/admin/idempotency",
    tag = "admin",
    params(
        ("older_than_sec" = Option<u64>, Query, description = "only entries older than this (default 0: every entry)"),
    ),
    responses(
        (status = 200, description = "how many entries went", body = IdemPruned),
        (status = 400, description = "older_than_sec is not a number of seconds", body = ErrorEnvelope),
        (status = 403, description = "not an admin", body = ErrorEnvelope),
    )
)]
pub async fn prune_idempotency(
    State(app): State<Arc<App>>,
    principal: crate::auth::Principal,
    headers: axum::http::HeaderMap,
    Query(q): Query<HashMap<String, String>>,
) -> ApiResult<Response> {
    let older = match q.get("older_than_sec") {
        None => 0,
        Some(v) => v
            .parse::<u64>()
            .ok()
            .filter(|&n| n <= 100 * 365 * 86_400)
            .ok_or_else(|| {
                ApiError::invalid("older_than_sec must be a number of seconds (at most 100 years)")
            })?,
    };
    // Entries made in the current millisecond are older than nothing; +1 takes them too when
    // the caller asks for all.
    let cutoff = app.clock.now_ms() - older as i64 * 1000 + i64::from(older == 0);
    let deleted = store::call(&app.store, move |s| s.idem_purge(cutoff))
        .await
        .map_err(|e| ApiError::internal(e.to_string()))? as u64;
    app.audit.emit(
        "sandbox.admin.idempotency_pruned",
        &principal.user_id,
        None,
        None,
        admin_event(
            &app,
            &headers,
            json!({ "deleted": deleted, "older_than_sec": older }),
        ),
    );
    Ok(views::json(
        StatusCode::OK,
        &IdemPruned {
            deleted,
            cutoff: crate::util::iso(cutoff),
        },
    ))
}
