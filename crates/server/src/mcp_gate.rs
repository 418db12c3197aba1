//! The service's quotas over MCP (`/mcp`): each `sandbox_run` of the MCP endpoint is
//! admitted by [`crate::quotas::admit`] for its user and recorded in the store as a run of
//! that user (`source: mcp`, its command as one shell line), so concurrent runs, runs per
//! minute and execution seconds per day count MCP runs with REST ones, and the admin views
//! and audit trail show them. Its sessions are the service's (`crate::mcp_sessions`).
//!
//! A `sandbox_run` that names another runtime or image (`"runtime": "docker"`, `"base_image":
//! "python:3.11-slim"`) is the gate's as a [`RunHost`]: it becomes a one-shot run of the
//! service, checked, admitted, queued, recorded and audited as `POST /runs` would be (`source:
//! mcp`), whose output streams back to the MCP call while it runs.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Weak};

use base64::Engine as _;
use serde_json::json;
use tokio_util::sync::CancellationToken;
use wasmsand_mcp::{
    Admission, HostedEnd, HostedFuture, HostedRun, OutputSender, OutputStream, RunGate, RunHost,
    RunTicket,
};

use crate::App;
use crate::audit::RunContext;
use crate::logs::Stream;
use crate::runs::StopCause;
use crate::runtime::OutputSink;
use crate::store::{self, Phase, RunRecord};
use crate::util::new_id;

#[derive(Debug)]
pub struct McpGate {
    app: Weak<App>,
}

impl McpGate {
    pub fn new(app: &Arc<App>) -> McpGate {
        McpGate {
            app: Arc::downgrade(app),
        }
    }
}

struct Ticket {
    app: Arc<App>,
    record: RunRecord,
    /// The run's egress decisions, audited with the run when it ends.
    egress: crate::runtime::EgressLog,
}

impl RunGate for McpGate {
    fn begin(&self, principal: Option<&str>, command: &str, session: Option<&str>) -> Admission {
        let app = self.app.upgrade();
        // Without authentication every MCP client is the service's one user.
        let user = principal.map(str::to_string);
        let command = command.to_string();
        let session_id = session.map(str::to_string);
        Box::pin(async move {
            let app = app.ok_or("the service is stopping")?;
            if app.is_shutting_down() {
                return Err("the service is stopping".into());
            }
            let user = user.unwrap_or_else(|| app.config.user_id.clone());
            let admitted = crate::quotas::admit(&app, &user, false)
                .await
                .map_err(refusal)?;
            let now = app.clock.now_ms();
            let mut record = RunRecord {
                id: new_id(),
                user_id: user,
                session_id,
                spec_version: app
                    .config
                    .supported_spec_versions
                    .first()
                    .cloned()
                    .unwrap_or_else(|| "1.0".into()),
                runtime: "wasm".into(),
                runtime_version: crate::RUNTIME_VERSION.into(),
                base_image: "wasmsand/default".into(),
                image_digest: app.images.digest().await,
                policy_hash: app.policy_hash(),
                command: vec!["sh".into(), "-c".into(), command],
                phase: Phase::Running,
                reason_code: None,
                message: None,
                exit_code: None,
                created_at: now,
                starting_at: Some(now),
                started_at: Some(now),
                finished_at: None,
                resource_usage: Default::default(),
                capture_patterns: Vec::new(),
                artifacts: Vec::new(),
                artifacts_expired: false,
                artifacts_capped: false,
                last_seq: 0,
                log_truncated: false,
                frames_dropped: 0,
                node_id: Some(app.node_id.clone()),
                worker_id: Some(app.worker_id.clone()),
                interactive: None,
            };
            record.resource_usage.limits.cpu = 1.0;
            // Recorded before the admission is released: the user's next request counts it.
            crate::quotas::record(&app, &admitted, &record)
                .await
                .map_err(refusal)?;
            drop(admitted);
            app.audit.remember_run(
                &record.id,
                RunContext {
                    source: "mcp".into(),
                    trace_id: None,
                },
            );
            crate::audit::run_created(&app, &record);
            crate::audit::run_phase(&app, &record, Phase::Running);
            // It runs at once: no queue, and running from its creation.
            crate::observe::run_started(&app, &record);
            crate::observe::queue_wait(&app, &record, 0.0);
            crate::observe::start_latency(&app, &record);
            Ok(Box::new(Ticket {
                app,
                record,
                egress: Default::default(),
            }) as Box<dyn RunTicket>)
        })
    }
}

/// The refusal reads as the REST one: code, message and when to retry.
fn refusal(e: crate::error::ApiError) -> String {
    let retry = e.details.get("retry_after_sec").and_then(|v| v.as_u64());
    match retry {
        Some(s) => format!("{}: {} (retry after {s} s)", e.code, e.message),
        None => format!("{}: {}", e.code, e.message),
    }
}

impl RunHost for McpGate {
    fn offer(&self) -> Option<String> {
        let app = self.app.upgrade()?;
        let mut offers = Vec::new();
        if app.config.docker.enabled {
            offers.push(format!(
                "runtime docker (Linux containers with real toolchains), base_image one of {}",
                app.runtimes.docker.image_names().join(", ")
            ));
        }
        let wasm: Vec<String> = app
            .runtimes
            .wasm
            .image_names()
            .into_iter()
            .filter(|i| i != crate::images::DEFAULT_IMAGE)
            .collect();
        if !wasm.is_empty() {
            offers.push(format!("runtime wasm with base_image {}", wasm.join(", ")));
        }
        (!offers.is_empty()).then(|| format!("{}.", offers.join("; ")))
    }

    fn run(
        &self,
        principal: Option<&str>,
        run: HostedRun,
        output: OutputSender,
        cancel: CancellationToken,
    ) -> HostedFuture {
        let app = self.app.upgrade();
        let user = principal.map(str::to_string);
        Box::pin(async move {
            let app = app.ok_or("the service is stopping")?;
            let user = user.unwrap_or_else(|| app.config.user_id.clone());
            hosted_run(app, user, run, output, cancel).await
        })
    }
}

/// A hosted MCP run as a one-shot run of the service: the same checks, quotas, queue, record
/// and audit as `POST /runs`, with the MCP call's stdin and its output tapped.
async fn hosted_run(
    app: Arc<App>,
    user: String,
    run: HostedRun,
    output: OutputSender,
    cancel: CancellationToken,
) -> Result<HostedEnd, String> {
    let base_image = match &run.base_image {
        Some(i) => i.clone(),
        None => crate::runtime::choose(&app, run.runtime.as_deref(), None)
            .map_err(refusal)?
            .default_image()
            .to_string(),
    };
    let files: Vec<_> = run
        .files
        .iter()
        .map(|(path, data)| {
            json!({
                "path": path,
                "content": base64::engine::general_purpose::STANDARD.encode(data),
            })
        })
        .collect();
    let body = json!({
        "spec_version": app.config.supported_spec_versions.first(),
        "runtime": run.runtime,
        "base_image": base_image,
        "command": ["bash", "-c", run.command],
        "env": run.env,
        "cwd": run.cwd,
        "files": files,
        // The service's limits are in whole seconds.
        "timeout_sec": run.timeout_ms.div_ceil(1000).max(1),
    });
    let mut checked = crate::api::runs::check_run(&app, &body, &user)
        .await
        .map_err(refusal)?;
    checked.spec.stdin = run.stdin;
    let context = RunContext {
        source: "mcp".into(),
        trace_id: None,
    };
    let tap = capped_tap(output, [run.stdout_cap, run.stderr_cap]);
    let live = crate::api::runs::launch(&app, checked, &user, context, Some(tap))
        .await
        .map_err(refusal)?
        .run;
    let mut changes = live.log.subscribe();
    let mut cancelled = false;
    while !live.log.ended() {
        tokio::select! {
            changed = changes.changed() => if changed.is_err() { break },
            _ = cancel.cancelled(), if !cancelled => {
                cancelled = true;
                crate::runs::stop(&live, StopCause::User);
            }
        }
    }
    ending(live.snapshot())
}

/// Sends each stream on until one byte past its cap: enough to say it was cut, and the MCP
/// call holds no more than it keeps, however much the command writes.
fn capped_tap(output: OutputSender, caps: [u64; 2]) -> OutputSink {
    let sent = [AtomicU64::new(0), AtomicU64::new(0)];
    Arc::new(move |stream: Stream, data: &[u8]| {
        let (i, s) = match stream {
            Stream::Stdout => (0, OutputStream::Stdout),
            Stream::Stderr => (1, OutputStream::Stderr),
        };
        let limit = caps[i].saturating_add(1);
        let before = sent[i].fetch_add(data.len() as u64, Ordering::Relaxed);
        if before < limit {
            let take = (limit - before).min(data.len() as u64) as usize;
            let _ = output.send((s, bytes::Bytes::copy_from_slice(&data[..take])));
        }
    })
}

/// What the MCP call answers for a run that ended: a result for a command that ran (or was
/// cancelled), an error naming the reason for one that could not run.
fn ending(rec: RunRecord) -> Result<HostedEnd, String> {
    let reason = rec.reason_code.clone().unwrap_or_default();
    let message = rec.message.clone().unwrap_or_default();
    let (exit_code, error_class) = match (rec.phase, rec.exit_code) {
        (Phase::Killed, _) => (130, Some(wasmsand::ErrorClass::Cancelled)),
        (Phase::TimedOut, Some(_)) => (124, Some(wasmsand::ErrorClass::Timeout)),
        (Phase::Completed, Some(code)) => (code, None),
        (Phase::Failed, Some(code)) if reason == "nonzero_exit" => (code, None),
        (Phase::Failed, Some(code))
            if matches!(
                reason.as_str(),
                "oom_killed" | "pids_limit_exceeded" | "limit_exceeded"
            ) =>
        {
            (code, Some(wasmsand::ErrorClass::LimitExceeded))
        }
        _ => {
            return Err(format!(
                "{reason}: {message} (run {}; GET /v1/runs/{} has its record)",
                rec.id, rec.id
            ));
        }
    };
    Ok(HostedEnd {
        facts: facts_of(&rec),
        run_id: rec.id,
        runtime: rec.runtime,
        base_image: rec.base_image,
        exit_code,
        message: error_class.map(|_| message),
        error_class,
        duration_ms: (rec.resource_usage.wall_time_sec * 1000.0).round() as u64,
    })
}

/// What `sandbox.run` reports of a run the service records.
fn facts_of(rec: &RunRecord) -> wasmsand_mcp::RunFacts {
    wasmsand_mcp::RunFacts {
        policy_hash: Some(rec.policy_hash.clone()),
        image_digest: Some(rec.image_digest.clone()),
        log_stream_path: Some(format!("{}/runs/{}/stream", crate::http::BASE, rec.id)),
    }
}

impl RunTicket for Ticket {
    fn finish(
        self: Box<Self>,
        exit_code: i32,
        timed_out: bool,
        duration_ms: u64,
    ) -> std::pin::Pin<Box<dyn Future<Output = ()> + Send>> {
        let Ticket {
            app,
            mut record,
            egress,
        } = *self;
        Box::pin(async move {
            let egress = egress.take();
            for e in &egress {
                crate::audit::run_egress(&app, &record, e);
            }
            crate::observe::egress(&app, &egress);
            record.finished_at = Some(app.clock.now_ms());
            record.exit_code = Some(exit_code);
            record.resource_usage.wall_time_sec = duration_ms as f64 / 1000.0;
            (record.phase, record.reason_code) = if timed_out {
                (Phase::TimedOut, Some("execution_timeout".into()))
            } else if exit_code == 0 {
                (Phase::Completed, None)
            } else {
                (Phase::Failed, Some("nonzero_exit".into()))
            };
            crate::audit::run_phase(&app, &record, record.phase);
            crate::observe::run_finished(&app, &record);
            if let Err(e) = store::call(&app.store, move |s| s.put_run(&record)).await {
                tracing::error!(%e, "cannot record the end of an MCP run");
            }
        })
    }

    fn run_id(&self) -> Option<String> {
        Some(self.record.id.clone())
    }

    fn facts(&self) -> wasmsand_mcp::RunFacts {
        facts_of(&self.record)
    }

    fn egress_sink(&self) -> Option<wasmsand::EgressSink> {
        Some(self.egress.sink())
    }
}
