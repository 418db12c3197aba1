//! The service's quotas over MCP (`/mcp`): each `sandbox_run` of the MCP endpoint is
//! admitted by [`crate::quotas::admit`] for its user and recorded in the store as a run of
//! that user (`source: mcp`, its command as one shell line), so concurrent runs, runs per
//! minute and execution seconds per day count MCP runs with REST ones, and the admin views
//! and audit trail show them. Its sessions count against the service's `max_sessions` with
//! the REST ones.

use std::sync::{Arc, Weak};

use wasmsand_mcp::{Admission, RunGate, RunTicket};

use crate::App;
use crate::audit::RunContext;
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
}

impl RunGate for McpGate {
    fn admit_session(&self, _principal: Option<&str>, live: usize) -> Result<(), String> {
        let app = self.app.upgrade().ok_or("the service is stopping")?;
        app.admit_mcp_session(live)
    }

    fn begin(&self, principal: Option<&str>, command: &str) -> Admission {
        let app = self.app.upgrade();
        // Without authentication every MCP client is the service's one user.
        let user = principal.map(str::to_string);
        let command = command.to_string();
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
                session_id: None,
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
                policy_hash: app.policy_hash.clone(),
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
            crate::observe::run_started(&app, &record.runtime);
            Ok(Box::new(Ticket { app, record }) as Box<dyn RunTicket>)
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

impl RunTicket for Ticket {
    fn finish(
        self: Box<Self>,
        exit_code: i32,
        timed_out: bool,
        duration_ms: u64,
    ) -> std::pin::Pin<Box<dyn Future<Output = ()> + Send>> {
        let Ticket { app, mut record } = *self;
        Box::pin(async move {
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
}
