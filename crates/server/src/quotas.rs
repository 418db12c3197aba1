//! Per-user quotas and rate limits on new runs (docs/service.md, "Quotas"): concurrent runs,
//! runs per minute, execution seconds per (rolling) day, and artifact bytes held. Counted from
//! the store, so replicas sharing one see the same numbers. A refusal is a 429 with the limit,
//! what is used, and a `Retry-After` of when the window frees room.
//!
//! Admission of one user's runs is serialized in this process ([`admit`] until the run is
//! recorded), and the count and the insert are one step of the store ([`record`],
//! `Store::admit_run`: a transaction holding a per-user lock on PostgreSQL), so requests
//! reaching several replicas at the same instant cannot slip past a limit together.

use std::collections::HashMap;
use std::sync::{Arc, Weak};

use axum::http::{StatusCode, header};
use parking_lot::Mutex;
use serde_json::json;

use crate::App;
use crate::config::MIB;
use crate::error::{ApiError, ApiResult, ErrorCode};
use crate::store;

const MINUTE_MS: i64 = 60_000;
const DAY_MS: i64 = 86_400_000;

#[derive(Default)]
pub struct Quotas {
    locks: Mutex<HashMap<String, Weak<tokio::sync::Mutex<()>>>>,
}

/// Held until the admitted run is recorded.
pub type Admission = tokio::sync::OwnedMutexGuard<()>;

pub(crate) fn refuse(
    app: &App,
    code: ErrorCode,
    quota: &'static str,
    message: String,
    limit: u64,
    used: u64,
    retry_after_sec: u64,
) -> ApiError {
    crate::observe::quota_rejected(app, quota);
    let retry = retry_after_sec.max(1);
    ApiError::new(StatusCode::TOO_MANY_REQUESTS, code, message)
        .with_details(json!({
            "quota": quota,
            "limit": limit,
            "used": used,
            "retry_after_sec": retry,
        }))
        .with_header(header::RETRY_AFTER, retry.to_string())
}

fn secs_until(app: &App, ms: i64) -> u64 {
    ((ms - app.clock.now_ms()).max(0) as u64).div_ceil(1000)
}

/// Serializes `user`'s admissions in this process and checks the artifact quota (`captures`:
/// whether the run asks for artifacts). The run counts against the other quotas when
/// [`record`]ed, which the caller does while holding the returned admission.
pub async fn admit(app: &Arc<App>, user: &str, captures: bool) -> ApiResult<Admission> {
    let lock = {
        let mut locks = app.quotas.locks.lock();
        locks.retain(|_, w| w.strong_count() > 0);
        match locks.get(user).and_then(Weak::upgrade) {
            Some(l) => l,
            None => {
                let l = Arc::new(tokio::sync::Mutex::new(()));
                locks.insert(user.to_string(), Arc::downgrade(&l));
                l
            }
        }
    };
    let guard = lock.lock_owned().await;
    let c = &app.config;
    if captures {
        let cap = c.max_artifact_bytes_per_user_mb.saturating_mul(MIB);
        let u = user.to_string();
        let used = store::call(&app.store, move |s| s.user_artifact_bytes(&u))
            .await
            .map_err(|e| ApiError::internal(e.to_string()))?;
        if used >= cap {
            // Room comes back when the user's oldest artifacts pass their TTL.
            let u = user.to_string();
            let ttl = app.config.artifact_ttl().as_millis() as i64;
            let oldest = store::call(&app.store, move |s| {
                Ok(s.runs_with_artifacts_before(i64::MAX)?
                    .into_iter()
                    .filter(|r| r.user_id == u)
                    .filter_map(|r| r.finished_at)
                    .min())
            })
            .await
            .map_err(|e| ApiError::internal(e.to_string()))?;
            let retry = secs_until(app, oldest.unwrap_or_else(|| app.clock.now_ms()) + ttl);
            return Err(refuse(
                app,
                ErrorCode::QuotaExceeded,
                "artifact_bytes_per_user",
                format!(
                    "user '{user}' holds {used} bytes of artifacts (limit {cap}); \
                     runs that capture artifacts are refused until some expire"
                ),
                cap,
                used,
                retry,
            ));
        }
    }
    Ok(guard)
}

/// The limits in force now: `PUT /admin/quotas` changes them for the next admission.
fn limits(app: &App) -> store::UserLimits {
    let c = &app.policy().config;
    store::UserLimits {
        concurrent_runs: c.user_max_concurrent_runs,
        runs_per_minute: c.user_runs_per_minute,
        cpu_seconds_per_day: c.user_cpu_seconds_per_day,
        artifact_bytes_per_day: c.user_artifact_mb_per_day.saturating_mul(MIB),
    }
}

/// Stores a new run if its user's quotas leave room for it, atomically across replicas;
/// otherwise nothing is stored and the answer is the 429 naming the quota.
pub async fn record(
    app: &Arc<App>,
    _admitted: &Admission,
    run: &store::RunRecord,
) -> ApiResult<()> {
    let limits = limits(app);
    let now = app.clock.now_ms();
    let r = run.clone();
    let (usage, stored) = store::call(&app.store, move |s| {
        s.admit_run(&r, &limits, now - MINUTE_MS, now - DAY_MS, now)
    })
    .await
    .map_err(|e| ApiError::internal(e.to_string()))?;
    if stored {
        return Ok(());
    }
    Err(refusal(app, &run.user_id, &limits, &usage, now))
}

/// Why `usage` leaves no room under `l`.
fn refusal(
    app: &App,
    user: &str,
    l: &store::UserLimits,
    usage: &store::UserUsage,
    now: i64,
) -> ApiError {
    if l.concurrent_runs > 0 && usage.active_runs >= l.concurrent_runs {
        let retry = app.queue.wait_estimate_ms(0).div_ceil(1000);
        return refuse(
            app,
            ErrorCode::QuotaExceeded,
            "concurrent_runs",
            format!(
                "user '{user}' already has {} runs in flight (limit {})",
                usage.active_runs, l.concurrent_runs
            ),
            l.concurrent_runs,
            usage.active_runs,
            retry,
        );
    }
    if l.runs_per_minute > 0 && usage.recent_runs >= l.runs_per_minute {
        let retry = secs_until(app, usage.oldest_recent.unwrap_or(now) + MINUTE_MS);
        return refuse(
            app,
            ErrorCode::RateLimited,
            "runs_per_minute",
            format!(
                "user '{user}' started {} runs in the last minute (limit {})",
                usage.recent_runs, l.runs_per_minute
            ),
            l.runs_per_minute,
            usage.recent_runs,
            retry,
        );
    }
    let used_sec = usage.cpu_ms / 1000;
    if l.cpu_seconds_per_day > 0 && used_sec >= l.cpu_seconds_per_day {
        let retry = secs_until(app, usage.oldest_cpu.unwrap_or(now) + DAY_MS);
        return refuse(
            app,
            ErrorCode::QuotaExceeded,
            "cpu_seconds_per_day",
            format!(
                "user '{user}' used {used_sec} CPU seconds in the last 24 h (limit {})",
                l.cpu_seconds_per_day
            ),
            l.cpu_seconds_per_day,
            used_sec,
            retry,
        );
    }
    let retry = secs_until(app, usage.oldest_artifact.unwrap_or(now) + DAY_MS);
    refuse(
        app,
        ErrorCode::QuotaExceeded,
        "artifact_bytes_per_day",
        format!(
            "user '{user}' captured {} bytes of artifacts in the last 24 h (limit {}); runs \
             that capture artifacts are refused until the day's first ones are older",
            usage.artifact_bytes_day, l.artifact_bytes_per_day
        ),
        l.artifact_bytes_per_day,
        usage.artifact_bytes_day,
        retry,
    )
}
