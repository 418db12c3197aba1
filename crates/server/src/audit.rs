//! Audit events (docs/service.md, "Audit"): `sandbox.session.created`, `sandbox.run.created`,
//! `.queued`, `.starting`, `.running`, `.completed`, `.failed`, `.timed_out`, `.killed`, each
//! with the user, the run or session, `source`, `runtime`, `base_image`, `image_digest`,
//! `policy_hash`, `spec_version` and a time stamp; and a session's background processes'
//! `sandbox.process.started`, `.killed` and `.ended`.
//!
//! One writer task takes them in order and writes each to the store, to the log (target
//! `sandbox.audit`) and, when configured, to a JSON-lines file. They never carry the
//! command's words, environment values, file contents or credentials: a run's command is
//! represented by its SHA-256 only.

use std::collections::HashMap;
use std::io::Write;
use std::sync::Arc;

use axum::http::HeaderMap;
use parking_lot::Mutex;
use serde_json::{Value, json};
use tokio::sync::mpsc;

use crate::App;
use crate::store::{self, AuditEvent, Phase, RunRecord, Store};
use crate::util::{canonical_json, iso, new_id, sha256_hex};

/// Where a request came from, as the client says in `X-Sandbox-Source`
/// (`ide`, `mcp`, `web`, `agent`, `api`); `api` when it says nothing usable.
pub fn source_of(headers: &HeaderMap) -> String {
    headers
        .get("x-sandbox-source")
        .and_then(|v| v.to_str().ok())
        .map(|v| v.trim().to_ascii_lowercase())
        .filter(|v| matches!(v.as_str(), "ide" | "mcp" | "web" | "agent" | "api"))
        .unwrap_or_else(|| "api".into())
}

/// What a run's later events need from the request that created it.
#[derive(Clone, Default)]
pub struct RunContext {
    pub source: String,
    pub trace_id: Option<String>,
}

pub struct AuditSink {
    tx: mpsc::UnboundedSender<AuditEvent>,
    runs: Mutex<HashMap<String, RunContext>>,
    /// The app's clock: events are stamped with the time the retention sweep compares against.
    clock: crate::clock::Clock,
}

impl AuditSink {
    /// Starts the writer. Must be called inside a tokio runtime.
    pub fn start(
        store: Arc<dyn Store>,
        file: Option<std::path::PathBuf>,
        clock: crate::clock::Clock,
    ) -> AuditSink {
        let (tx, mut rx) = mpsc::unbounded_channel::<AuditEvent>();
        tokio::spawn(async move {
            let mut out = file.and_then(|p| {
                match std::fs::OpenOptions::new()
                    .create(true)
                    .append(true)
                    .open(&p)
                {
                    Ok(f) => Some(f),
                    Err(e) => {
                        tracing::error!(path = %p.display(), %e, "cannot open the audit log file");
                        None
                    }
                }
            });
            while let Some(e) = rx.recv().await {
                let line = canonical_json(&e.body);
                tracing::info!(target: "sandbox.audit", event = %e.event, audit = %line);
                if let Some(f) = out.as_mut()
                    && let Err(err) = writeln!(f, "{line}")
                {
                    tracing::error!(%err, "cannot append to the audit log file");
                }
                let ev = e.clone();
                if let Err(err) = store::call(&store, move |s| s.put_audit(&ev)).await {
                    tracing::error!(%err, event = %e.event, "cannot store an audit event");
                }
            }
        });
        AuditSink {
            tx,
            runs: Mutex::new(HashMap::new()),
            clock,
        }
    }

    pub(crate) fn emit(
        &self,
        event: &str,
        user_id: &str,
        run_id: Option<&str>,
        session_id: Option<&str>,
        body: Value,
    ) {
        let ts = self.clock.now_ms();
        let mut body = body;
        body["event"] = json!(event);
        body["ts"] = json!(iso(ts));
        body["user_id"] = json!(user_id);
        let _ = self.tx.send(AuditEvent {
            id: new_id(),
            ts,
            event: event.to_string(),
            user_id: user_id.to_string(),
            run_id: run_id.map(str::to_string),
            session_id: session_id.map(str::to_string),
            body,
        });
    }

    pub fn remember_run(&self, run_id: &str, ctx: RunContext) {
        self.runs.lock().insert(run_id.to_string(), ctx);
    }
}

/// An event of a session's background process (`crate::processes`).
pub fn process_event(app: &App, event: &str, user_id: &str, session_id: &str, body: Value) {
    app.audit.emit(event, user_id, None, Some(session_id), body);
}

#[allow(clippy::too_many_arguments)]
pub fn session_created(
    app: &App,
    user_id: &str,
    session_id: &str,
    base_image: &str,
    image_digest: &str,
    spec_version: &str,
    source: &str,
    trace_id: Option<&str>,
) {
    app.audit.emit(
        "sandbox.session.created",
        user_id,
        None,
        Some(session_id),
        json!({
            "session_id": session_id,
            "source": source,
            "runtime": "wasm",
            "runtime_version": crate::RUNTIME_VERSION,
            "base_image": base_image,
            "image_digest": image_digest,
            "policy_hash": app.policy_hash,
            "spec_version": spec_version,
            "trace_id": trace_id,
        }),
    );
}

fn event_name(phase: Phase) -> &'static str {
    match phase {
        Phase::Queued => "sandbox.run.queued",
        Phase::Starting => "sandbox.run.starting",
        Phase::Running => "sandbox.run.running",
        Phase::Completed => "sandbox.run.completed",
        Phase::Failed => "sandbox.run.failed",
        Phase::TimedOut => "sandbox.run.timed_out",
        Phase::Killed => "sandbox.run.killed",
    }
}

fn run_body(app: &App, r: &RunRecord, ctx: &RunContext) -> Value {
    json!({
        "run_id": r.id,
        "session_id": r.session_id,
        "source": ctx.source,
        "trace_id": ctx.trace_id,
        "runtime": r.runtime,
        "runtime_version": r.runtime_version,
        "base_image": r.base_image,
        "image_digest": r.image_digest,
        "policy_hash": if r.policy_hash.is_empty() { app.policy_hash.clone() } else { r.policy_hash.clone() },
        "spec_version": r.spec_version,
        "phase": r.phase.as_str(),
        "command_sha256": sha256_hex(canonical_json(&json!(r.command)).as_bytes()),
    })
}

/// `sandbox.run.created`.
pub fn run_created(app: &App, r: &RunRecord) {
    let ctx = app
        .audit
        .runs
        .lock()
        .get(&r.id)
        .cloned()
        .unwrap_or_default();
    let mut body = run_body(app, r, &ctx);
    body["limits"] = json!(r.resource_usage.limits);
    app.audit.emit(
        "sandbox.run.created",
        &r.user_id,
        Some(&r.id),
        r.session_id.as_deref(),
        body,
    );
}

/// The event of a run's new phase; a terminal one carries the outcome and usage summary.
pub fn run_phase(app: &App, r: &RunRecord, phase: Phase) {
    let ctx = if phase.is_terminal() {
        app.audit.runs.lock().remove(&r.id)
    } else {
        app.audit.runs.lock().get(&r.id).cloned()
    }
    .unwrap_or_default();
    let mut body = run_body(app, r, &ctx);
    body["phase"] = json!(phase.as_str());
    if phase.is_terminal() {
        body["exit_code"] = json!(r.exit_code);
        body["reason_code"] = json!(r.reason_code);
        body["message"] = json!(r.message);
        let u = &r.resource_usage;
        body["resource_usage"] = json!({
            "cpu_time_sec": u.cpu_time_sec,
            "wall_time_sec": u.wall_time_sec,
            "peak_rss_mb": u.peak_rss_mb,
            "log_bytes": u.log_bytes,
            "artifact_bytes": u.artifact_bytes,
        });
        body["limits"] = json!(u.limits);
        body["started_at"] = json!(r.started_at.map(iso));
        body["finished_at"] = json!(r.finished_at.map(iso));
    }
    app.audit.emit(
        event_name(phase),
        &r.user_id,
        Some(&r.id),
        r.session_id.as_deref(),
        body,
    );
}

/// The PRD's egress events: `sandbox.run.egress_allowed` {host, ip, matched_rule, runtime,
/// run_id} and `sandbox.run.egress_denied` (with `reason`); `via` says what connected (`git`
/// for a server-side clone).
pub fn egress(
    app: &App,
    user_id: &str,
    run_id: Option<&str>,
    session_id: Option<&str>,
    denied_reason: Option<&str>,
    body: Value,
) {
    let mut body = body;
    body["run_id"] = json!(run_id);
    let event = match denied_reason {
        Some(reason) => {
            body["reason"] = json!(reason);
            "sandbox.run.egress_denied"
        }
        None => "sandbox.run.egress_allowed",
    };
    app.audit.emit(event, user_id, run_id, session_id, body);
}
