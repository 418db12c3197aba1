//! Audit events (docs/service.md, "Audit"): `sandbox.session.created`, `sandbox.run.created`,
//! `.queued`, `.starting`, `.running`, `.completed`, `.failed`, `.timed_out`, `.killed`, each
//! with the user, the run or session, `source`, `runtime`, `base_image`, `image_digest`,
//! `policy_hash`, `spec_version` and a time stamp; and a session's background processes'
//! `sandbox.process.started`, `.killed` and `.ended`; and an interactive run's
//! `sandbox.run.stdin_closed` (its input's SHA-256 and size, not the input unless
//! `SANDBOX_AUDIT_STDIN_CONTENT` asks). A run's end lists its artifacts; under
//! `SANDBOX_REDACT_PATHS` their paths and those in its message are digests ([`crate::redact`]).
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
use crate::store::{self, AuditEvent, Phase, RunRecord, SavedSession, Store};
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
    /// Events with their place in the order of emission; the mutex keeps that place and the
    /// channel's order the same when several tasks emit at once.
    tx: Mutex<(u64, mpsc::UnboundedSender<(u64, AuditEvent)>)>,
    /// The place of the last event the writer has finished with (stored or failed).
    written: tokio::sync::watch::Receiver<u64>,
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
        let (tx, mut rx) = mpsc::unbounded_channel::<(u64, AuditEvent)>();
        let (done, written) = tokio::sync::watch::channel(0u64);
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
            while let Some((seq, e)) = rx.recv().await {
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
                done.send_replace(seq);
            }
        });
        AuditSink {
            tx: Mutex::new((0, tx)),
            written,
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
        let mut tx = self.tx.lock();
        tx.0 += 1;
        let seq = tx.0;
        let _ = tx.1.send((
            seq,
            AuditEvent {
                id: new_id(),
                ts,
                event: event.to_string(),
                user_id: user_id.to_string(),
                run_id: run_id.map(str::to_string),
                session_id: session_id.map(str::to_string),
                body,
            },
        ));
    }

    /// Waits until every event emitted before the call is stored, so that a reader of the
    /// trail sees what an answer it already has caused. Bounded by `within`: a store that
    /// does not answer must not hold the reader forever; it then reads what is there.
    pub async fn settled(&self, within: std::time::Duration) {
        let target = self.tx.lock().0;
        let mut written = self.written.clone();
        let _ = tokio::time::timeout(within, written.wait_for(|&w| w >= target)).await;
    }

    /// What the request that created a run said of it (defaults once forgotten).
    fn context(&self, run_id: &str) -> RunContext {
        self.runs.lock().get(run_id).cloned().unwrap_or_default()
    }

    pub fn remember_run(&self, run_id: &str, ctx: RunContext) {
        self.runs.lock().insert(run_id.to_string(), ctx);
    }
}

/// An event of a session's background process (`crate::processes`).
pub fn process_event(app: &App, event: &str, user_id: &str, session_id: &str, body: Value) {
    app.audit.emit(event, user_id, None, Some(session_id), body);
}

/// What a session's events carry (before the session exists, for a refused `git` input:
/// the digest of the image it would have run).
pub struct SessionFacts<'a> {
    pub session_id: &'a str,
    pub runtime: &'a str,
    pub runtime_version: &'a str,
    pub base_image: &'a str,
    pub image_digest: &'a str,
    pub spec_version: &'a str,
    pub source: &'a str,
    pub trace_id: Option<&'a str>,
    /// The session's policy's (the one in force, before it exists).
    pub policy_hash: &'a str,
}

impl<'a> SessionFacts<'a> {
    /// A session's facts, as made by `source`.
    pub fn of(s: &'a crate::sessions::Session, source: &'a str, trace_id: Option<&'a str>) -> Self {
        SessionFacts {
            session_id: &s.id,
            runtime: s.runtime.name(),
            runtime_version: &s.runtime_version,
            base_image: &s.base_image,
            image_digest: &s.image_digest,
            spec_version: &s.spec_version,
            source,
            trace_id,
            policy_hash: &s.policy.hash,
        }
    }

    pub fn common(&self) -> Value {
        json!({
            "session_id": self.session_id,
            "source": self.source,
            "runtime": self.runtime,
            "runtime_version": self.runtime_version,
            "base_image": self.base_image,
            "image_digest": self.image_digest,
            "policy_hash": self.policy_hash,
            "spec_version": self.spec_version,
            "trace_id": self.trace_id,
        })
    }
}

pub fn session_created(app: &App, user_id: &str, facts: &SessionFacts<'_>) {
    app.audit.emit(
        "sandbox.session.created",
        user_id,
        None,
        Some(facts.session_id),
        facts.common(),
    );
}

/// A session's checkpoint that did not check out when it was to be woken. What its record
/// says of the session is reported as far as it can be read.
pub fn session_corrupt(app: &App, saved: &SavedSession, why: &str) {
    let m = &saved.meta;
    let field = |k: &str| m.get(k).and_then(Value::as_str).unwrap_or("unknown");
    app.audit.emit(
        "sandbox.session.corrupt",
        &saved.user_id,
        None,
        Some(&saved.session_id),
        json!({
            "session_id": saved.session_id,
            "source": "api",
            "runtime": field("runtime"),
            "runtime_version": field("runtime_version"),
            "base_image": field("base_image"),
            "image_digest": field("image_digest"),
            "spec_version": field("spec_version"),
            "policy_hash": m.get("policy_hash").and_then(Value::as_str).map_or_else(|| app.policy_hash(), str::to_string),
            "reason": "corrupt_checkpoint",
            "detail": why,
            "saved_at": iso(saved.saved_at),
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

/// The fields every event of a run carries.
pub fn run_body(app: &App, r: &RunRecord, ctx: &RunContext) -> Value {
    json!({
        "run_id": r.id,
        "session_id": r.session_id,
        "source": ctx.source,
        "trace_id": ctx.trace_id,
        "runtime": r.runtime,
        "runtime_version": r.runtime_version,
        "base_image": r.base_image,
        "image_digest": r.image_digest,
        "policy_hash": if r.policy_hash.is_empty() { app.policy_hash() } else { r.policy_hash.clone() },
        "spec_version": r.spec_version,
        "phase": r.phase.as_str(),
        "command_sha256": sha256_hex(canonical_json(&json!(r.command)).as_bytes()),
    })
}

/// `sandbox.run.created`; an interactive run's carries its stdin limits as `interactive`.
pub fn run_created(app: &App, r: &RunRecord) {
    let mut body = run_body(app, r, &app.audit.context(&r.id));
    body["limits"] = json!(r.resource_usage.limits);
    if let Some(i) = &r.interactive {
        body["interactive"] = json!(i);
    }
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
        // What left the sandbox is part of the outcome; under `SANDBOX_REDACT_PATHS` its
        // paths (and any in the message) are digests.
        let redact = app.policy().config.redact_paths;
        let shown = |p: &str| {
            if redact {
                crate::redact::path(p)
            } else {
                p.to_string()
            }
        };
        body["message"] = json!(r.message.as_deref().map(|m| if redact {
            crate::redact::text(m)
        } else {
            m.to_string()
        }));
        body["artifacts"] = json!(
            r.artifacts
                .iter()
                .map(|a| json!({ "path": shown(&a.path), "size": a.size }))
                .collect::<Vec<_>>()
        );
        let u = &r.resource_usage;
        body["resource_usage"] = json!({
            "cpu_time_sec": u.cpu_time_sec,
            "wall_time_sec": u.wall_time_sec,
            "peak_rss_mb": u.peak_rss_mb,
            "log_bytes": u.log_bytes,
            "artifact_bytes": u.artifact_bytes,
            "network_requests": u.network_requests,
            "network_bytes": u.network_bytes,
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

/// `sandbox.run.stdin_closed`: an interactive run's stdin closed, with why and what came
/// through it (`extra`: `reason`, `stdin_bytes`, `stdin_frames`, `stdin_sha256`, and
/// `stdin_base64` only under `SANDBOX_AUDIT_STDIN_CONTENT`).
pub fn run_stdin_closed(app: &App, r: &RunRecord, extra: Value) {
    let mut body = run_body(app, r, &app.audit.context(&r.id));
    merge(&mut body, &extra);
    app.audit.emit(
        "sandbox.run.stdin_closed",
        &r.user_id,
        Some(&r.id),
        r.session_id.as_deref(),
        body,
    );
}

/// Emits `sandbox.run.egress_allowed`, or `sandbox.run.egress_denied` with its `reason`
/// (seed 003: `{host, ip, matched_rule, reason?, runtime, run_id}`). `body` holds the event's
/// common fields (a run's or a session's), the decision's and `via`, what connected (`git`
/// for a server-side clone, `sandbox` for the network door).
fn egress_event(
    app: &App,
    user_id: &str,
    run_id: Option<&str>,
    session_id: Option<&str>,
    mut body: Value,
    denied: Option<&str>,
) {
    body["run_id"] = json!(run_id);
    let event = match denied {
        Some(reason) => {
            body["reason"] = json!(reason);
            "sandbox.run.egress_denied"
        }
        None => "sandbox.run.egress_allowed",
    };
    let session_id = session_id
        .map(str::to_string)
        .or_else(|| body["session_id"].as_str().map(str::to_string));
    app.audit
        .emit(event, user_id, run_id, session_id.as_deref(), body);
}

/// A server-side clone that went: `egress` (`{host, ip, matched_rule, via}`) over `common`.
pub fn egress_allowed(
    app: &App,
    user_id: &str,
    run_id: Option<&str>,
    session_id: Option<&str>,
    common: Value,
    egress: Value,
) {
    let mut body = common;
    merge(&mut body, &egress);
    egress_event(app, user_id, run_id, session_id, body, None);
}

/// A request refused by the egress policy, from its error's details (`host`, `ip`,
/// `matched_rule`, `reason`); the run never got an id.
pub fn egress_refused(
    app: &App,
    user_id: &str,
    session_id: Option<&str>,
    common: Value,
    details: &Value,
) {
    let mut body = common;
    for k in ["host", "ip", "matched_rule"] {
        body[k] = details[k].clone();
    }
    body["via"] = json!("git");
    egress_event(
        app,
        user_id,
        None,
        session_id,
        body,
        details["reason"].as_str(),
    );
}

fn merge(body: &mut Value, extra: &Value) {
    if let (Some(b), Some(e)) = (body.as_object_mut(), extra.as_object()) {
        for (k, v) in e {
            b.insert(k.clone(), v.clone());
        }
    }
}

/// A run's egress decision (the network door's).
pub fn run_egress(app: &App, r: &RunRecord, e: &wasmsand::EgressEvent) {
    let mut body = run_body(app, r, &app.audit.context(&r.id));
    body["host"] = json!(e.host);
    body["ip"] = json!(e.ip.map(|ip| ip.to_string()));
    body["matched_rule"] = json!(e.matched_rule);
    body["via"] = json!("sandbox");
    egress_event(
        app,
        &r.user_id,
        Some(&r.id),
        r.session_id.as_deref(),
        body,
        e.denied,
    );
}
