//! Admin aggregates (docs/service.md, "Admin"): usage totals over a window, the metrics as
//! JSON series, and the audit trail. Admins only (see [`crate::auth`]).

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;

use axum::extract::{Query, State};
use axum::http::StatusCode;
use axum::response::Response;

use crate::App;
use crate::error::{ApiError, ApiResult};
use crate::store::{self, AuditQuery, Phase};
use crate::util::{iso, now_ms};
use crate::views::{
    self, AdminMetrics, AuditEventView, AuditPage, ErrorEnvelope, MetricSeries, MetricValue,
    RuntimeUsage, UsageSummary, UsageTotals, UsageWindow, UserUsageTotals,
};

fn time_param(q: &HashMap<String, String>, name: &str) -> ApiResult<Option<i64>> {
    let Some(v) = q.get(name) else {
        return Ok(None);
    };
    let t = time::OffsetDateTime::parse(v, &time::format_description::well_known::Rfc3339)
        .map_err(|_| ApiError::invalid(format!("{name} must be an ISO-8601 (RFC 3339) time")))?;
    Ok(Some((t.unix_timestamp_nanos() / 1_000_000) as i64))
}

fn usize_param(
    q: &HashMap<String, String>,
    name: &str,
    default: usize,
    max: usize,
) -> ApiResult<usize> {
    match q.get(name) {
        None => Ok(default),
        Some(v) => match v.parse::<usize>() {
            Ok(n) if (1..=max).contains(&n) => Ok(n),
            _ => Err(ApiError::invalid(format!(
                "{name} must be an integer in [1, {max}]"
            ))),
        },
    }
}

fn tally(t: &mut UsageTotals, r: &store::RunRecord) {
    t.runs += 1;
    match r.phase {
        Phase::Completed => t.completed += 1,
        Phase::Failed => t.failed += 1,
        Phase::TimedOut => t.timed_out += 1,
        Phase::Killed => t.killed += 1,
        _ => t.in_flight += 1,
    }
    t.log_bytes += r.resource_usage.log_bytes;
    if !r.artifacts_expired {
        t.artifact_bytes += r.resource_usage.artifact_bytes;
    }
    t.wall_time_sec += r.resource_usage.wall_time_sec;
}

fn rounded(mut t: UsageTotals) -> UsageTotals {
    t.wall_time_sec = (t.wall_time_sec * 1000.0).round() / 1000.0;
    t
}

/// `GET /admin/usage/summary?from=&to=&user_id=&runtime=&limit=`: runs created in the
/// window (default: the last 24 h), totals, per runtime, and the top users by runs.
#[utoipa::path(
    get,
    path = "/admin/usage/summary",
    tag = "admin",
    params(
        ("from" = Option<String>, Query, format = DateTime, description = "start of the window (default: `to` minus 24 h)"),
        ("to" = Option<String>, Query, format = DateTime, description = "end of the window (default: now)"),
        ("user_id" = Option<String>, Query),
        ("runtime" = Option<String>, Query),
        ("limit" = Option<u64>, Query, minimum = 1, maximum = 200, description = "top users listed (default 10)"),
    ),
    responses(
        (status = 200, description = "totals of the runs created in the window", body = UsageSummary),
        (status = 400, description = "a bad time, window or limit", body = ErrorEnvelope),
        (status = 403, description = "not an admin", body = ErrorEnvelope),
    )
)]
pub async fn usage_summary(
    State(app): State<Arc<App>>,
    Query(q): Query<HashMap<String, String>>,
) -> ApiResult<Response> {
    let to = time_param(&q, "to")?.unwrap_or_else(now_ms);
    let from = time_param(&q, "from")?.unwrap_or(to - 86_400_000);
    if from > to {
        return Err(ApiError::invalid("from must not be after to"));
    }
    let top = usize_param(&q, "limit", 10, 200)?;
    let user = q.get("user_id").cloned();
    let runtime = q.get("runtime").cloned();
    let runs = store::call(&app.store, |s| s.list_runs())
        .await
        .map_err(|e| ApiError::internal(e.to_string()))?;
    let mut totals = UsageTotals::default();
    let mut by_runtime: BTreeMap<String, UsageTotals> = BTreeMap::new();
    let mut by_user: BTreeMap<String, UsageTotals> = BTreeMap::new();
    for r in runs.iter().filter(|r| {
        r.created_at >= from
            && r.created_at <= to
            && user.as_ref().is_none_or(|u| &r.user_id == u)
            && runtime.as_ref().is_none_or(|rt| &r.runtime == rt)
    }) {
        // A run of this process in flight is reported as it stands now.
        let live = app.live_run(&r.id).map(|l| l.snapshot());
        let r = live.as_ref().unwrap_or(r);
        tally(&mut totals, r);
        tally(by_runtime.entry(r.runtime.clone()).or_default(), r);
        tally(by_user.entry(r.user_id.clone()).or_default(), r);
    }
    let mut users: Vec<(String, UsageTotals)> = by_user.into_iter().collect();
    users.sort_by(|a, b| {
        b.1.runs
            .cmp(&a.1.runs)
            .then(b.1.artifact_bytes.cmp(&a.1.artifact_bytes))
            .then(a.0.cmp(&b.0))
    });
    let top_users = users
        .into_iter()
        .take(top)
        .map(|(user_id, t)| UserUsageTotals {
            user_id,
            totals: rounded(t),
        })
        .collect();
    let by_runtime = by_runtime
        .into_iter()
        .map(|(runtime, t)| RuntimeUsage {
            runtime,
            totals: rounded(t),
        })
        .collect();
    Ok(views::json(
        StatusCode::OK,
        &UsageSummary {
            window: UsageWindow {
                from: iso(from),
                to: iso(to),
            },
            totals: rounded(totals),
            by_runtime,
            top_users,
        },
    ))
}

/// `GET /admin/metrics`: every series of `/metrics`, grouped by metric name, one entry per
/// label set (`?name=` keeps the metrics whose name starts with it).
#[utoipa::path(
    get,
    path = "/admin/metrics",
    tag = "admin",
    params(("name" = Option<String>, Query, description = "keeps the metrics whose name starts with it")),
    responses(
        (status = 200, description = "series per label set, by metric name", body = AdminMetrics),
        (status = 403, description = "not an admin", body = ErrorEnvelope),
    )
)]
pub async fn metrics_json(
    State(app): State<Arc<App>>,
    Query(q): Query<HashMap<String, String>>,
) -> ApiResult<Response> {
    let prefix = q.get("name").cloned().unwrap_or_default();
    let mut out: BTreeMap<String, Vec<MetricSeries>> = BTreeMap::new();
    for (name, labels, value) in crate::observe::parse_exposition(&crate::observe::render(&app)) {
        if !name.starts_with(&prefix) {
            continue;
        }
        let value = if value.is_finite() {
            MetricValue::Number(value)
        } else {
            MetricValue::Text(value.to_string())
        };
        out.entry(name).or_default().push(MetricSeries {
            labels: labels.into_iter().collect(),
            value,
        });
    }
    Ok(views::json(StatusCode::OK, &AdminMetrics(out)))
}

/// `GET /admin/audit?run_id=&session_id=&user_id=&event=&limit=&offset=`: audit events in
/// the order they happened.
#[utoipa::path(
    get,
    path = "/admin/audit",
    tag = "admin",
    params(
        ("run_id" = Option<String>, Query),
        ("session_id" = Option<String>, Query),
        ("user_id" = Option<String>, Query),
        ("event" = Option<String>, Query, description = "e.g. `sandbox.run.completed`"),
        ("limit" = Option<u64>, Query, minimum = 1, maximum = 200, description = "page size (default 50)"),
        ("offset" = Option<u64>, Query, description = "items to skip"),
    ),
    responses(
        (status = 200, description = "one page of the audit events, oldest first", body = AuditPage),
        (status = 400, description = "a bad limit or offset", body = ErrorEnvelope),
        (status = 403, description = "not an admin", body = ErrorEnvelope),
    )
)]
pub async fn audit(
    State(app): State<Arc<App>>,
    Query(q): Query<HashMap<String, String>>,
) -> ApiResult<Response> {
    let limit = usize_param(&q, "limit", 50, 200)?;
    let offset = match q.get("offset") {
        None => 0,
        Some(v) => v
            .parse::<usize>()
            .map_err(|_| ApiError::invalid("offset must be a non-negative integer"))?,
    };
    let query = AuditQuery {
        user_id: q.get("user_id").cloned(),
        run_id: q.get("run_id").cloned(),
        session_id: q.get("session_id").cloned(),
        event: q.get("event").cloned(),
        limit,
        offset,
    };
    app.audit.settled(std::time::Duration::from_secs(5)).await;
    let (events, total) = store::call(&app.store, move |s| s.list_audit(&query))
        .await
        .map_err(|e| ApiError::internal(e.to_string()))?;
    let items = events
        .into_iter()
        .map(|e| {
            serde_json::from_value::<AuditEventView>(e.body).map_err(|err| {
                ApiError::internal(format!("audit event {} is not well formed: {err}", e.id))
            })
        })
        .collect::<ApiResult<Vec<_>>>()?;
    let has_more = offset + items.len() < total;
    Ok(views::json(
        StatusCode::OK,
        &AuditPage {
            items,
            total: total as u64,
            limit: limit as u64,
            offset: offset as u64,
            has_more,
        },
    ))
}
