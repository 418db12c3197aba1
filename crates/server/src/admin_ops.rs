//! Admin aggregates (PRD §30, v0.3): usage totals over a window, the metrics as JSON series,
//! and the audit trail. Admins only (see [`crate::auth`]).

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;

use axum::extract::{Query, State};
use axum::response::{IntoResponse, Response};
use serde_json::{Value, json};

use crate::App;
use crate::error::{ApiError, ApiResult};
use crate::store::{self, AuditQuery, Phase};
use crate::util::{iso, now_ms};

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

#[derive(Default)]
struct Tally {
    runs: u64,
    completed: u64,
    failed: u64,
    timed_out: u64,
    killed: u64,
    in_flight: u64,
    log_bytes: u64,
    artifact_bytes: u64,
    wall_time_sec: f64,
}

impl Tally {
    fn add(&mut self, r: &store::RunRecord) {
        self.runs += 1;
        match r.phase {
            Phase::Completed => self.completed += 1,
            Phase::Failed => self.failed += 1,
            Phase::TimedOut => self.timed_out += 1,
            Phase::Killed => self.killed += 1,
            _ => self.in_flight += 1,
        }
        self.log_bytes += r.resource_usage.log_bytes;
        if !r.artifacts_expired {
            self.artifact_bytes += r.resource_usage.artifact_bytes;
        }
        self.wall_time_sec += r.resource_usage.wall_time_sec;
    }

    fn json(&self) -> Value {
        json!({
            "runs": self.runs,
            "completed": self.completed,
            "failed": self.failed,
            "timed_out": self.timed_out,
            "killed": self.killed,
            "in_flight": self.in_flight,
            "log_bytes": self.log_bytes,
            "artifact_bytes": self.artifact_bytes,
            "wall_time_sec": (self.wall_time_sec * 1000.0).round() / 1000.0,
        })
    }
}

/// `GET /admin/usage/summary?from=&to=&user_id=&runtime=&limit=`: runs created in the
/// window (default: the last 24 h), totals, per runtime, and the top users by runs.
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
    let mut totals = Tally::default();
    let mut by_runtime: BTreeMap<String, Tally> = BTreeMap::new();
    let mut by_user: BTreeMap<String, Tally> = BTreeMap::new();
    for r in runs.iter().filter(|r| {
        r.created_at >= from
            && r.created_at <= to
            && user.as_ref().is_none_or(|u| &r.user_id == u)
            && runtime.as_ref().is_none_or(|rt| &r.runtime == rt)
    }) {
        // A run of this process in flight is reported as it stands now.
        let live = app.live_run(&r.id).map(|l| l.snapshot());
        let r = live.as_ref().unwrap_or(r);
        totals.add(r);
        by_runtime.entry(r.runtime.clone()).or_default().add(r);
        by_user.entry(r.user_id.clone()).or_default().add(r);
    }
    let mut users: Vec<(String, Tally)> = by_user.into_iter().collect();
    users.sort_by(|a, b| {
        b.1.runs
            .cmp(&a.1.runs)
            .then(b.1.artifact_bytes.cmp(&a.1.artifact_bytes))
            .then(a.0.cmp(&b.0))
    });
    let users: Vec<Value> = users
        .into_iter()
        .take(top)
        .map(|(u, t)| {
            let mut v = t.json();
            v["user_id"] = json!(u);
            v
        })
        .collect();
    let runtimes: Vec<Value> = by_runtime
        .into_iter()
        .map(|(rt, t)| {
            let mut v = t.json();
            v["runtime"] = json!(rt);
            v
        })
        .collect();
    Ok(axum::Json(json!({
        "window": { "from": iso(from), "to": iso(to) },
        "totals": totals.json(),
        "by_runtime": runtimes,
        "top_users": users,
    }))
    .into_response())
}

/// `GET /admin/metrics`: every series of `/metrics`, grouped by metric name, one entry per
/// label set (`?name=` keeps the metrics whose name starts with it).
pub async fn metrics_json(
    State(app): State<Arc<App>>,
    Query(q): Query<HashMap<String, String>>,
) -> ApiResult<Response> {
    let prefix = q.get("name").cloned().unwrap_or_default();
    let mut out: BTreeMap<String, Vec<Value>> = BTreeMap::new();
    for (name, labels, value) in crate::observe::parse_exposition(&crate::observe::render(&app)) {
        if !name.starts_with(&prefix) {
            continue;
        }
        let labels: serde_json::Map<String, Value> =
            labels.into_iter().map(|(k, v)| (k, json!(v))).collect();
        let value = if value.is_finite() {
            json!(value)
        } else {
            json!(value.to_string())
        };
        out.entry(name)
            .or_default()
            .push(json!({ "labels": labels, "value": value }));
    }
    Ok(axum::Json(out).into_response())
}

/// `GET /admin/audit?run_id=&session_id=&user_id=&event=&limit=&offset=`: audit events in
/// the order they happened.
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
    let (events, total) = store::call(&app.store, move |s| s.list_audit(&query))
        .await
        .map_err(|e| ApiError::internal(e.to_string()))?;
    let items: Vec<Value> = events.into_iter().map(|e| e.body).collect();
    Ok(axum::Json(json!({
        "items": items,
        "total": total,
        "limit": limit,
        "offset": offset,
        "has_more": offset + items.len() < total,
    }))
    .into_response())
}
