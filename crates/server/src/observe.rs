//! Metrics (docs/service.md, "Metrics") through the `metrics` facade into a Prometheus
//! recorder of this app's own, structured logs with a trace id per request, and
//! `GET /metrics`.
//!
//! The recorder is per [`crate::App`], not the process-global one: several servers in one
//! process (the tests start dozens) each count their own runs. Every recording goes through
//! [`Metrics::with`], which makes the app's recorder the thread's for the call.

use std::sync::Arc;
use std::time::Instant;

use axum::extract::{Request, State};
use axum::http::{HeaderValue, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use metrics::{counter, describe_counter, describe_gauge, describe_histogram, gauge, histogram};
use metrics_exporter_prometheus::{
    Matcher, PrometheusBuilder, PrometheusHandle, PrometheusRecorder,
};
use tracing::Instrument;

use crate::App;
use crate::store::RunRecord;

const DURATION_BUCKETS: &[f64] = &[
    0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 300.0, 900.0, 3600.0,
];

pub struct Metrics {
    recorder: PrometheusRecorder,
    handle: PrometheusHandle,
}

impl Default for Metrics {
    fn default() -> Self {
        Self::new()
    }
}

impl Metrics {
    pub fn new() -> Metrics {
        let recorder = PrometheusBuilder::new()
            .set_buckets_for_metric(Matcher::Suffix("_seconds".into()), DURATION_BUCKETS)
            .expect("the bucket list is not empty")
            .build_recorder();
        let handle = recorder.handle();
        let m = Metrics { recorder, handle };
        m.with(|| {
            describe_counter!("sandbox_sessions_created_total", "Sessions created");
            describe_counter!(
                "sandbox_sessions_hibernated_total",
                "Idle sessions written to the store and dropped from memory"
            );
            describe_counter!(
                "sandbox_sessions_woken_total",
                "Sessions brought back from the store"
            );
            describe_histogram!(
                "sandbox_session_wake_seconds",
                metrics::Unit::Seconds,
                "Time to wake a session from the store"
            );
            describe_histogram!(
                "sandbox_session_checkpoint_seconds",
                metrics::Unit::Seconds,
                "Time to write a session's checkpoint"
            );
            describe_counter!(
                "sandbox_session_checkpoint_bytes_total",
                "Compressed bytes of new chunks checkpoints sent to the store"
            );
            describe_counter!(
                "sandbox_egress_total",
                "Connections the network door decided on, by decision (allowed, or the reason)"
            );
            describe_counter!(
                "sandbox_runs_started_total",
                "Runs accepted (started or queued)"
            );
            describe_counter!(
                "sandbox_runs_completed_total",
                "Runs that reached a terminal phase, by outcome and reason"
            );
            describe_histogram!(
                "sandbox_run_duration_seconds",
                metrics::Unit::Seconds,
                "Execution time of finished runs (running to terminal)"
            );
            describe_histogram!(
                "sandbox_queue_wait_seconds",
                metrics::Unit::Seconds,
                "Time runs waited in the queue before starting"
            );
            describe_counter!(
                "sandbox_queue_full_total",
                "Runs refused because the queue was full"
            );
            describe_counter!(
                "sandbox_queue_ttl_expired_total",
                "Queued runs that waited longer than the queue TTL"
            );
            describe_counter!("sandbox_upload_bytes_total", "Bytes uploaded into sessions");
            describe_counter!("sandbox_upload_files_total", "Files uploaded into sessions");
            describe_counter!(
                "sandbox_log_bytes_total",
                "stdout/stderr bytes of finished runs"
            );
            describe_counter!(
                "sandbox_log_truncations_total",
                "Runs whose output passed the log cap"
            );
            describe_counter!(
                "sandbox_ws_connections_opened_total",
                "WebSocket streams opened"
            );
            describe_counter!(
                "sandbox_ws_heartbeats_sent_total",
                "Heartbeat frames emitted"
            );
            describe_counter!("sandbox_ws_disconnects_total", "WebSocket streams closed");
            describe_counter!(
                "sandbox_ws_queue_drops_total",
                "Frames a slow or late client lost to the ring"
            );
            describe_counter!(
                "sandbox_quota_rejections_total",
                "Requests refused by a per-user quota or rate limit"
            );
            describe_gauge!("sandbox_runs_in_flight", "Runs by non-terminal phase");
            describe_gauge!(
                "sandbox_queue_length",
                "Runs waiting in this process's queue"
            );
            describe_gauge!("sandbox_sessions_active", "Sessions held by this process");
            describe_counter!(
                "sandbox_processes_started_total",
                "Background processes started in sessions"
            );
            describe_counter!(
                "sandbox_processes_ended_total",
                "Background processes that ended, by status"
            );
            describe_gauge!(
                "sandbox_processes_running",
                "Background processes running in this process's sessions"
            );
        });
        m
    }

    /// Runs `f` with this app's recorder as the thread's.
    pub fn with<T>(&self, f: impl FnOnce() -> T) -> T {
        metrics::with_local_recorder(&self.recorder, f)
    }

    /// The Prometheus text exposition.
    pub fn render(&self) -> String {
        self.handle.run_upkeep();
        self.handle.render()
    }
}

pub fn session_created(app: &App, runtime: &str) {
    let runtime = runtime.to_string();
    app.metrics
        .with(|| counter!("sandbox_sessions_created_total", "runtime" => runtime).increment(1));
}

/// A checkpoint written: how long it took and the compressed bytes it sent to the store.
pub fn checkpoint(app: &App, took: std::time::Duration, bytes: u64) {
    app.metrics.with(|| {
        histogram!("sandbox_session_checkpoint_seconds").record(took.as_secs_f64());
        counter!("sandbox_session_checkpoint_bytes_total").increment(bytes);
    });
}

/// A session hibernated.
pub fn hibernated(app: &App) {
    app.metrics
        .with(|| counter!("sandbox_sessions_hibernated_total").increment(1));
}

/// A session woken from the store, and how long that took.
pub fn woken(app: &App, took: std::time::Duration) {
    app.metrics.with(|| {
        counter!("sandbox_sessions_woken_total").increment(1);
        histogram!("sandbox_session_wake_seconds").record(took.as_secs_f64());
    });
}

/// The network door's decisions of one run.
pub fn egress(app: &App, events: &[wasmsand::EgressEvent]) {
    app.metrics.with(|| {
        for e in events {
            let decision = e.denied.unwrap_or("allowed");
            counter!("sandbox_egress_total", "decision" => decision).increment(1);
        }
    });
}

pub fn run_started(app: &App, runtime: &str) {
    let runtime = runtime.to_string();
    app.metrics
        .with(|| counter!("sandbox_runs_started_total", "runtime" => runtime).increment(1));
}

pub fn queue_wait(app: &App, secs: f64) {
    app.metrics
        .with(|| histogram!("sandbox_queue_wait_seconds", "runtime" => "wasm").record(secs));
}

pub fn queue_full(app: &App) {
    app.metrics.with(|| {
        counter!("sandbox_queue_full_total", "component" => "orchestrator", "runtime" => "wasm", "reason" => "queue_full")
            .increment(1)
    });
}

pub fn queue_ttl_expired(app: &App) {
    app.metrics.with(|| {
        counter!("sandbox_queue_ttl_expired_total", "component" => "orchestrator", "runtime" => "wasm", "reason" => "queue_ttl_expired")
            .increment(1)
    });
}

pub fn upload(app: &App, kind: &str, bytes: u64, files: u64) {
    let kind = kind.to_string();
    app.metrics.with(|| {
        counter!("sandbox_upload_bytes_total", "kind" => kind.clone()).increment(bytes);
        counter!("sandbox_upload_files_total", "kind" => kind).increment(files);
    });
}

pub fn process_started(app: &App) {
    app.metrics
        .with(|| counter!("sandbox_processes_started_total", "runtime" => "wasm").increment(1));
}

pub fn process_ended(app: &App, status: &'static str) {
    app.metrics.with(|| {
        counter!("sandbox_processes_ended_total", "runtime" => "wasm", "status" => status)
            .increment(1)
    });
}

pub fn quota_rejected(app: &App, quota: &'static str) {
    app.metrics
        .with(|| counter!("sandbox_quota_rejections_total", "quota" => quota).increment(1));
}

/// The `reason` label of a finished run: its reason code, `exit_code_0` for a clean exit.
fn reason_label(r: &RunRecord) -> String {
    match &r.reason_code {
        Some(c) => c.clone(),
        None => format!("exit_code_{}", r.exit_code.unwrap_or(0)),
    }
}

pub fn run_finished(app: &App, r: &RunRecord) {
    let labels = [
        ("runtime", r.runtime.clone()),
        ("outcome", r.phase.as_str().to_string()),
        ("reason", reason_label(r)),
    ];
    let end = r.finished_at.unwrap_or_else(crate::util::now_ms);
    let secs = r
        .started_at
        .map(|s| (end - s).max(0) as f64 / 1000.0)
        .unwrap_or(0.0);
    let runtime = r.runtime.clone();
    let (log_bytes, truncated) = (r.resource_usage.log_bytes, r.log_truncated);
    app.metrics.with(|| {
        counter!("sandbox_runs_completed_total", &labels).increment(1);
        histogram!("sandbox_run_duration_seconds", &labels).record(secs);
        counter!("sandbox_log_bytes_total", "runtime" => runtime).increment(log_bytes);
        if truncated {
            counter!("sandbox_log_truncations_total", "component" => "ws", "reason" => "log_cap")
                .increment(1);
        }
    });
}

pub fn ws_opened(m: &Metrics) {
    m.with(|| counter!("sandbox_ws_connections_opened_total", "component" => "ws").increment(1));
}

pub fn ws_closed(m: &Metrics) {
    m.with(|| counter!("sandbox_ws_disconnects_total", "component" => "ws").increment(1));
}

pub fn ws_dropped(m: &Metrics, frames: u64) {
    m.with(|| {
        counter!("sandbox_ws_queue_drops_total", "component" => "ws", "reason" => "drop_oldest")
            .increment(frames)
    });
}

pub fn heartbeat(m: &Metrics) {
    m.with(|| counter!("sandbox_ws_heartbeats_sent_total", "component" => "ws").increment(1));
}

/// Gauges are set from the live state when scraped.
fn refresh_gauges(app: &App) {
    let (mut queued, mut starting, mut running) = (0u64, 0u64, 0u64);
    for r in app.runs.lock().values() {
        match r.phase() {
            crate::store::Phase::Queued => queued += 1,
            crate::store::Phase::Starting => starting += 1,
            crate::store::Phase::Running => running += 1,
            _ => {}
        }
    }
    let waiting = app.queue.waiting() as f64;
    let sessions = app.session_count() as f64;
    let held: Vec<_> = app.sessions.lock().values().cloned().collect();
    let processes = held
        .iter()
        .filter_map(|s| s.boxed.sandbox()?.processes().ok())
        .flatten()
        .filter(|p| p.running)
        .count() as f64;
    app.metrics.with(|| {
        gauge!("sandbox_processes_running").set(processes);
        gauge!("sandbox_runs_in_flight", "phase" => "queued").set(queued as f64);
        gauge!("sandbox_runs_in_flight", "phase" => "starting").set(starting as f64);
        gauge!("sandbox_runs_in_flight", "phase" => "running").set(running as f64);
        gauge!("sandbox_queue_length").set(waiting);
        gauge!("sandbox_sessions_active").set(sessions);
    });
}

pub fn render(app: &App) -> String {
    refresh_gauges(app);
    app.metrics.render()
}

/// `GET /metrics`.
#[utoipa::path(
    get,
    path = "/metrics",
    tag = "observability",
    responses(
        (status = 200, description = "every metric in the Prometheus text format", body = String, content_type = "text/plain"),
        (status = 403, description = "not an admin", body = crate::views::ErrorEnvelope),
    )
)]
pub async fn metrics_endpoint(State(app): State<Arc<App>>) -> Response {
    let mut resp = render(&app).into_response();
    resp.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("text/plain; version=0.0.4; charset=utf-8"),
    );
    resp
}

/// One sample of the text exposition: name, labels, value.
pub type Sample = (String, Vec<(String, String)>, f64);

/// Reads the samples back out of the text exposition (for `GET /admin/metrics`).
pub fn parse_exposition(text: &str) -> Vec<Sample> {
    let mut out = Vec::new();
    for line in text.lines() {
        let line = line.trim();
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        let (name, rest) = match line.find(['{', ' ']) {
            Some(i) => line.split_at(i),
            None => continue,
        };
        let mut labels = Vec::new();
        let mut rest = rest;
        if let Some(body) = rest.strip_prefix('{') {
            let mut chars = body.char_indices().peekable();
            let mut end = None;
            // label="value" pairs; values escape \\, \" and \n.
            loop {
                while chars.peek().is_some_and(|(_, c)| *c == ',' || *c == ' ') {
                    chars.next();
                }
                match chars.peek() {
                    Some((i, '}')) => {
                        end = Some(*i);
                        break;
                    }
                    None => break,
                    _ => {}
                }
                let mut key = String::new();
                for (_, c) in chars.by_ref() {
                    if c == '=' {
                        break;
                    }
                    key.push(c);
                }
                if chars.next().map(|(_, c)| c) != Some('"') {
                    break;
                }
                let mut val = String::new();
                while let Some((_, c)) = chars.next() {
                    match c {
                        '\\' => match chars.next().map(|(_, c)| c) {
                            Some('n') => val.push('\n'),
                            Some(o) => val.push(o),
                            None => break,
                        },
                        '"' => break,
                        c => val.push(c),
                    }
                }
                labels.push((key.trim().to_string(), val));
            }
            let Some(end) = end else { continue };
            rest = &body[end + 1..];
        }
        let Some(value) = rest.split_whitespace().next() else {
            continue;
        };
        let value = match value {
            "+Inf" => f64::INFINITY,
            "-Inf" => f64::NEG_INFINITY,
            v => match v.parse::<f64>() {
                Ok(v) => v,
                Err(_) => continue,
            },
        };
        out.push((name.to_string(), labels, value));
    }
    out
}

/// A trace id per request (an incoming `X-Request-Id` of sane shape, else a new one),
/// echoed in the answer; every log line of the request carries it, and one line sums the
/// request up.
pub async fn trace(req: Request, next: Next) -> Response {
    let trace_id = req
        .headers()
        .get("x-request-id")
        .and_then(|v| v.to_str().ok())
        .filter(|v| {
            !v.is_empty()
                && v.len() <= 128
                && v.bytes()
                    .all(|b| b.is_ascii_alphanumeric() || b"-_.".contains(&b))
        })
        .map(str::to_string)
        .unwrap_or_else(|| uuid::Uuid::new_v4().simple().to_string());
    let span = tracing::info_span!(
        "request",
        trace_id = %trace_id,
        method = %req.method(),
        path = %req.uri().path(),
        user_id = tracing::field::Empty,
    );
    let start = Instant::now();
    let mut req = req;
    req.extensions_mut().insert(TraceId(trace_id.clone()));
    let mut resp = next.run(req).instrument(span.clone()).await;
    let status = resp.status().as_u16();
    span.in_scope(|| {
        tracing::info!(
            status,
            latency_ms = start.elapsed().as_secs_f64() * 1000.0,
            "request"
        )
    });
    if let Ok(v) = HeaderValue::from_str(&trace_id) {
        resp.headers_mut().insert("x-request-id", v);
    }
    resp
}

/// The trace id of the request being served.
#[derive(Debug, Clone)]
pub struct TraceId(pub String);

/// Installs the process's log subscriber: JSON lines (or text) on stderr, filtered by
/// `SANDBOX_LOG` (default `info`). A second call is a no-op.
pub fn init_logging(format: &str) {
    use tracing_subscriber::EnvFilter;
    let filter = EnvFilter::try_from_env("SANDBOX_LOG").unwrap_or_else(|_| EnvFilter::new("info"));
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr);
    let _ = if format == "text" {
        builder.try_init()
    } else {
        builder
            .json()
            .with_current_span(true)
            .with_span_list(false)
            .flatten_event(true)
            .try_init()
    };
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn exposition_parses_back_into_samples() {
        let m = Metrics::new();
        m.with(|| {
            counter!("sandbox_x_total", "a" => "q\"uo\\te", "b" => "2").increment(3);
            histogram!("sandbox_y_seconds").record(0.2);
        });
        let samples = parse_exposition(&m.render());
        let x = samples
            .iter()
            .find(|s| s.0 == "sandbox_x_total")
            .expect("counter rendered");
        assert_eq!(x.2, 3.0);
        assert!(x.1.contains(&("a".into(), "q\"uo\\te".into())));
        assert!(samples.iter().any(|s| s.0 == "sandbox_y_seconds_bucket"
            && s.1.iter().any(|(k, v)| k == "le" && v == "+Inf")
            && s.2 == 1.0));
        assert!(
            samples
                .iter()
                .any(|s| s.0 == "sandbox_y_seconds_sum" && (s.2 - 0.2).abs() < 1e-9)
        );
        // Another app's recorder does not see these.
        assert!(!Metrics::new().render().contains("sandbox_x_total"));
    }
}
