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
                "Runs that reached a terminal phase, by outcome, reason and exit code"
            );
            describe_histogram!(
                "sandbox_run_duration_seconds",
                metrics::Unit::Seconds,
                "Execution time of finished runs (running to terminal)"
            );
            describe_histogram!(
                "sandbox_queue_wait_seconds",
                metrics::Unit::Seconds,
                "Time runs waited in the queue (0 for a run that started at once)"
            );
            describe_histogram!(
                "sandbox_run_start_latency_seconds",
                metrics::Unit::Seconds,
                "Time from a run's creation to its running phase (queue and sandbox start)"
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

/// The labels every run metric carries: what ran it, in which image, under which spec.
fn run_labels(r: &RunRecord) -> Vec<(&'static str, String)> {
    vec![
        ("runtime", r.runtime.clone()),
        ("base_image", r.base_image.clone()),
        ("spec_version", r.spec_version.clone()),
    ]
}

/// [`run_labels`] and more.
fn with_labels(r: &RunRecord, more: &[(&'static str, &str)]) -> Vec<(&'static str, String)> {
    let mut l = run_labels(r);
    l.extend(more.iter().map(|(k, v)| (*k, v.to_string())));
    l
}

pub fn run_started(app: &App, r: &RunRecord) {
    if let Some(t) = &app.otel {
        t.run_started(r);
    }
    let labels = run_labels(r);
    app.metrics
        .with(|| counter!("sandbox_runs_started_total", &labels).increment(1));
}

/// How long the run waited for a place among the concurrent runs: 0 for one that started
/// at once; for one that waited, the time until it left the line (to start, or because it
/// was cancelled or expired there).
pub fn queue_wait(app: &App, r: &RunRecord, secs: f64) {
    if let Some(t) = &app.otel
        && r.phase == crate::store::Phase::Starting
        && secs > 0.0
    {
        t.run_phase(r, "starting");
    }
    let labels = run_labels(r);
    app.metrics
        .with(|| histogram!("sandbox_queue_wait_seconds", &labels).record(secs));
}

/// Creation to `running` (the queue, then the sandbox's provisioning), at the transition.
pub fn start_latency(app: &App, r: &RunRecord) {
    let Some(started) = r.started_at else { return };
    if let Some(t) = &app.otel {
        t.run_phase(r, "running");
    }
    let secs = (started - r.created_at).max(0) as f64 / 1000.0;
    let labels = run_labels(r);
    app.metrics
        .with(|| histogram!("sandbox_run_start_latency_seconds", &labels).record(secs));
}

pub fn queue_full(app: &App, runtime: &str) {
    let runtime = runtime.to_string();
    app.metrics.with(|| {
        counter!("sandbox_queue_full_total", "component" => "orchestrator", "runtime" => runtime, "reason" => "queue_full")
            .increment(1)
    });
}

pub fn queue_ttl_expired(app: &App, runtime: &str) {
    let runtime = runtime.to_string();
    app.metrics.with(|| {
        counter!("sandbox_queue_ttl_expired_total", "component" => "orchestrator", "runtime" => runtime, "reason" => "queue_ttl_expired")
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

/// The `exit_code` label: the codes that mean something of their own (1 general error, 2
/// misuse, 126 not executable, 127 not found), `128+signal` for a death by signal, `none`
/// for a run whose command never ended on its own account (never started, or lost).
fn exit_code_label(code: Option<i32>) -> &'static str {
    match code {
        None => "none",
        Some(0) => "0",
        Some(1) => "1",
        Some(2) => "2",
        Some(126) => "126",
        Some(127) => "127",
        Some(c) if c > 128 => "128+signal",
        Some(_) => "other",
    }
}

pub fn run_finished(app: &App, r: &RunRecord) {
    let outcome = r.phase.as_str();
    let reason = reason_label(r);
    let labels = with_labels(r, &[("outcome", outcome), ("reason", &reason)]);
    let completed = with_labels(
        r,
        &[
            ("outcome", outcome),
            ("reason", &reason),
            ("exit_code", exit_code_label(r.exit_code)),
        ],
    );
    let end = r.finished_at.unwrap_or_else(crate::util::now_ms);
    let secs = r
        .started_at
        .map(|s| (end - s).max(0) as f64 / 1000.0)
        .unwrap_or(0.0);
    if let Some(t) = &app.otel {
        t.run_finished(r, &reason);
    }
    let runtime = r.runtime.clone();
    let (log_bytes, truncated) = (r.resource_usage.log_bytes, r.log_truncated);
    app.metrics.with(|| {
        counter!("sandbox_runs_completed_total", &completed).increment(1);
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

/// Every (outcome, reason) a finished run can end with (`reason_label`): the series of
/// `sandbox_runs_completed_total` and `sandbox_run_duration_seconds` present from start-up.
/// A test below holds it to the reason codes runs.rs ends runs with.
pub(crate) const RUN_ENDINGS: &[(&str, &str)] = &[
    ("completed", "exit_code_0"),
    ("failed", "nonzero_exit"),
    ("failed", "oom_killed"),
    ("failed", "pids_limit_exceeded"),
    ("failed", "limit_exceeded"),
    ("failed", "session_destroyed"),
    ("failed", "exec_failed"),
    ("failed", "provision_failed"),
    ("failed", "image_pull_failed"),
    ("failed", "server_shutdown"),
    ("failed", "queue_ttl_expired"),
    ("timed_out", "execution_timeout"),
    ("timed_out", "startup_timeout"),
    ("killed", "canceled_by_user"),
];

/// The per-user quotas of crate::quotas (the `quota` label); a test holds it to that file.
pub(crate) const QUOTAS: &[&str] = &[
    "concurrent_runs",
    "runs_per_minute",
    "cpu_seconds_per_day",
    "artifact_bytes_per_day",
    "artifact_bytes_per_user",
    // The request rate limits of crate::ratelimit.
    "sessions_per_minute",
    "uploads_per_minute",
    "downloads_per_minute",
    "admin_requests_per_minute",
];

/// The `exit_code` label values of [`exit_code_label`] a run that ended with `reason` can
/// have, as far as known before it ends.
fn exit_codes_of(reason: &str) -> &'static [&'static str] {
    match reason {
        "exit_code_0" => &["0"],
        "nonzero_exit" => &["1", "2", "126", "127", "128+signal", "other"],
        _ => &["none"],
    }
}

/// Puts every series whose labels are known before any traffic into the registry at zero,
/// so that a scrape (and a rate or an alert on it) sees them from start-up rather than from
/// their first event: per enabled runtime, its default image and each supported
/// `spec_version` for the run metrics, and the closed label sets of the others.
pub fn init_series(app: &App) {
    let mut runtimes = vec![&app.runtimes.wasm];
    if app.config.docker.enabled {
        runtimes.push(&app.runtimes.docker);
    }
    app.metrics.with(|| {
        for &c in &[
            "sandbox_sessions_hibernated_total",
            "sandbox_sessions_woken_total",
            "sandbox_session_checkpoint_bytes_total",
        ] {
            counter!(c).absolute(0);
        }
        // Registering a histogram is enough for it to be rendered, with no observation.
        let _ = histogram!("sandbox_session_wake_seconds");
        let _ = histogram!("sandbox_session_checkpoint_seconds");
        for decision in [
            "allowed",
            "no_match",
            "dns_mismatch",
            "policy_changed",
            "forbidden_address",
        ] {
            counter!("sandbox_egress_total", "decision" => decision).absolute(0);
        }
        for kind in ["multipart", "tar", "tar.gz", "zip", "file"] {
            counter!("sandbox_upload_bytes_total", "kind" => kind).absolute(0);
            counter!("sandbox_upload_files_total", "kind" => kind).absolute(0);
        }
        counter!("sandbox_log_truncations_total", "component" => "ws", "reason" => "log_cap")
            .absolute(0);
        for c in [
            "sandbox_ws_connections_opened_total",
            "sandbox_ws_heartbeats_sent_total",
            "sandbox_ws_disconnects_total",
        ] {
            counter!(c, "component" => "ws").absolute(0);
        }
        counter!("sandbox_ws_queue_drops_total", "component" => "ws", "reason" => "drop_oldest")
            .absolute(0);
        for &quota in QUOTAS {
            counter!("sandbox_quota_rejections_total", "quota" => quota).absolute(0);
        }
        for phase in ["queued", "starting", "running"] {
            gauge!("sandbox_runs_in_flight", "phase" => phase).set(0.0);
        }
        gauge!("sandbox_queue_length").set(0.0);
        gauge!("sandbox_sessions_active").set(0.0);
        gauge!("sandbox_processes_running").set(0.0);
        // Background processes run in wasm sessions only.
        counter!("sandbox_processes_started_total", "runtime" => "wasm").absolute(0);
        for status in ["exited", "killed", "timed_out", "failed"] {
            counter!("sandbox_processes_ended_total", "runtime" => "wasm", "status" => status)
                .absolute(0);
        }
        for rt in &runtimes {
            let runtime = rt.name();
            counter!("sandbox_sessions_created_total", "runtime" => runtime).absolute(0);
            counter!("sandbox_log_bytes_total", "runtime" => runtime).absolute(0);
            for (c, reason) in [
                ("sandbox_queue_full_total", "queue_full"),
                ("sandbox_queue_ttl_expired_total", "queue_ttl_expired"),
            ] {
                counter!(c, "component" => "orchestrator", "runtime" => runtime, "reason" => reason)
                    .absolute(0);
            }
            for spec in &app.config.supported_spec_versions {
                let run = [
                    ("runtime", runtime.to_string()),
                    ("base_image", rt.default_image().to_string()),
                    ("spec_version", spec.clone()),
                ];
                counter!("sandbox_runs_started_total", &run).absolute(0);
                let _ = histogram!("sandbox_queue_wait_seconds", &run);
                let _ = histogram!("sandbox_run_start_latency_seconds", &run);
                for &(outcome, reason) in RUN_ENDINGS {
                    let mut ended = run.to_vec();
                    ended.push(("outcome", outcome.to_string()));
                    ended.push(("reason", reason.to_string()));
                    let _ = histogram!("sandbox_run_duration_seconds", &ended);
                    for &code in exit_codes_of(reason) {
                        let mut l = ended.clone();
                        l.push(("exit_code", code.to_string()));
                        counter!("sandbox_runs_completed_total", &l).absolute(0);
                    }
                }
            }
        }
    });
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

/// A trace id per request, echoed in the answer as `X-Request-Id`; every log line of the
/// request carries it, and one line sums the request up. Without OpenTelemetry it is an
/// incoming `X-Request-Id` of sane shape, else a new one; with it, the id of the request's
/// span's trace (see [`crate::otel::Tracing::request`]), and a caller's `X-Request-Id` that
/// is not a trace id is logged as `request_id`. The request's future carries the span's
/// context, so that a run it creates makes its span a child of it.
pub async fn trace(State(app): State<Arc<App>>, req: Request, next: Next) -> Response {
    let request_id = req
        .headers()
        .get("x-request-id")
        .and_then(|v| v.to_str().ok())
        .filter(|v| {
            !v.is_empty()
                && v.len() <= 128
                && v.bytes()
                    .all(|b| b.is_ascii_alphanumeric() || b"-_.".contains(&b))
        })
        .map(str::to_string);
    let otel = app
        .otel
        .as_ref()
        .map(|t| t.request(req.method().as_str(), req.uri().path(), req.headers()));
    let trace_id = match &otel {
        Some(cx) => crate::otel::trace_id(cx),
        None => request_id
            .clone()
            .unwrap_or_else(|| uuid::Uuid::new_v4().simple().to_string()),
    };
    let span = tracing::info_span!(
        "request",
        trace_id = %trace_id,
        request_id = tracing::field::Empty,
        method = %req.method(),
        path = %req.uri().path(),
        user_id = tracing::field::Empty,
    );
    if let Some(id) = request_id.filter(|id| *id != trace_id) {
        span.record("request_id", id);
    }
    let start = Instant::now();
    let mut req = req;
    req.extensions_mut().insert(TraceId(trace_id.clone()));
    let mut resp = match &otel {
        Some(cx) => {
            use opentelemetry::context::FutureExt;
            next.run(req)
                .with_context(cx.clone())
                .instrument(span.clone())
                .await
        }
        None => next.run(req).instrument(span.clone()).await,
    };
    let status = resp.status().as_u16();
    if let Some(cx) = &otel {
        crate::otel::Tracing::request_done(cx, status);
    }
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

    #[test]
    fn exit_codes_fall_into_their_buckets() {
        let cases = [
            (None, "none"),
            (Some(0), "0"),
            (Some(1), "1"),
            (Some(2), "2"),
            (Some(3), "other"),
            (Some(126), "126"),
            (Some(127), "127"),
            (Some(128), "other"),
            (Some(137), "128+signal"),
            (Some(143), "128+signal"),
            (Some(-1), "other"),
        ];
        for (code, want) in cases {
            assert_eq!(exit_code_label(code), want, "{code:?}");
        }
    }

    /// The phase and reason code of each `Ending::new(Phase::X, "reason", ...)` in `src`.
    fn endings_in(src: &str) -> Vec<(String, String)> {
        src.split("Ending::new(")
            .skip(1)
            .filter_map(|rest| {
                let rest = rest.trim_start().strip_prefix("Phase::")?;
                let (phase, rest) = rest.split_once(',')?;
                let reason = rest.trim_start().strip_prefix('"')?.split('"').next()?;
                Some((phase.trim().to_string(), reason.to_string()))
            })
            .collect()
    }

    #[test]
    fn every_run_ending_is_a_known_series() {
        let outcome = |phase: &str| match phase {
            "Completed" => "completed",
            "Failed" => "failed",
            "TimedOut" => "timed_out",
            "Killed" => "killed",
            other => panic!("unexpected terminal phase {other}"),
        };
        let src = include_str!("runs.rs")
            .split_whitespace()
            .collect::<Vec<_>>()
            .join(" ");
        let mut found = endings_in(&src);
        // The queue's endings are a (phase, reason, message) table.
        for (phase, reason) in [
            ("Killed", "canceled_by_user"),
            ("Failed", "server_shutdown"),
            ("Failed", "queue_ttl_expired"),
        ] {
            let entry = format!("Phase::{phase}, \"{reason}\",");
            assert!(src.contains(&entry), "{entry} is no longer a queue ending");
            found.push((phase.into(), reason.into()));
        }
        assert!(found.len() > 10, "{found:?}");
        for (phase, reason) in found {
            // A clean exit's reason code is empty: its label is `exit_code_0`.
            let reason = if reason.is_empty() {
                "exit_code_0".to_string()
            } else {
                reason
            };
            assert!(
                RUN_ENDINGS.contains(&(outcome(&phase), reason.as_str())),
                "({phase}, {reason}) is missing from RUN_ENDINGS"
            );
        }
        for code in ["provision_failed", "image_pull_failed"] {
            assert!(include_str!("runtime/mod.rs").contains(&format!("=> \"{code}\"")));
        }
    }

    #[test]
    fn every_quota_is_a_known_series() {
        let src = include_str!("quotas.rs");
        let lines: Vec<&str> = src.lines().collect();
        let named: Vec<&str> = lines
            .windows(2)
            .filter(|w| w[0].trim_start().starts_with("ErrorCode::"))
            .filter_map(|w| w[1].trim().strip_suffix(','))
            .filter_map(|q| q.strip_prefix('"')?.strip_suffix('"'))
            .collect();
        let mut named: Vec<&str> = named
            .into_iter()
            .chain(crate::ratelimit::Class::ALL.iter().map(|c| c.name()))
            .collect();
        named.sort();
        let mut known = QUOTAS.to_vec();
        known.sort();
        assert_eq!(
            named, known,
            "QUOTAS is not the quotas and rate limits refused"
        );
    }
}
