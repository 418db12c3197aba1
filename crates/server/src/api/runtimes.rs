//! `GET /runtimes`: what this server runs, with its caps, so a client can size requests
//! before sending them.

use std::sync::Arc;

use axum::extract::State;
use axum::http::StatusCode;
use axum::response::Response;

use crate::App;
use crate::views::{self, RuntimeInfo, RuntimesReply};

#[utoipa::path(
    get,
    path = "/runtimes",
    tag = "runtimes",
    responses((status = 200, description = "runtimes and their caps", body = RuntimesReply))
)]
pub(crate) async fn runtimes(State(app): State<Arc<App>>) -> Response {
    // What a new session or run gets now (`/admin/policies` may have changed it).
    let policy = app.policy();
    let c = &policy.config;
    let base = |rt: Option<&Arc<dyn crate::runtime::Runtime>>, name: &str| RuntimeInfo {
        name: name.into(),
        available: false,
        default_images: vec![],
        max_cpu: c.max_cpu,
        max_mem_mb: c.max_mem_mb,
        max_upload_mb: c.max_upload_mb,
        max_log_bytes: c.max_log_bytes,
        queue_max_length: c.queue_max_length,
        queue_ttl_sec: c.queue_ttl_sec,
        workspace_cap_mb: c.workspace_cap_mb,
        artifact_ttl_hours: c.artifact_ttl_hours,
        supported_spec_versions: c.supported_spec_versions.clone(),
        interactive_supported: false,
        interactive_limits: None,
        egress_allowlist_supported: false,
        sessions_hibernate: rt.is_some_and(|r| r.hibernates()),
        hibernate_after_sec: rt.filter(|r| r.hibernates()).map(|_| c.hibernate_after_sec),
        store_mode: app.store.mode().into(),
        notes: String::new(),
        runtime_version: None,
        default: None,
        images: None,
        max_concurrent_runs: Some(c.max_concurrent_runs),
        queue_length: Some(app.queue.waiting()),
        oci_runtime: None,
        acceleration: None,
    };
    let mut runtimes = Vec::new();
    for rt in app.runtimes.all() {
        let mut info = rt.describe(base(Some(rt), rt.name())).await;
        // What `POST /runs` checks: the server allows it and the runtime can feed stdin
        // (and serves at all now).
        if c.interactive_enabled && rt.interactive_supported() && info.available {
            info.interactive_supported = true;
            info.interactive_limits = Some(crate::interactive::server_limits(c));
        }
        runtimes.push(info);
    }
    runtimes.push(RuntimeInfo {
        notes: crate::runtime::FIRECRACKER_WHY.into(),
        max_concurrent_runs: None,
        queue_length: None,
        ..base(None, "firecracker")
    });
    let body = RuntimesReply {
        store_mode: app.store.mode().into(),
        default_runtime: c.default_runtime.clone(),
        runtimes,
    };
    views::json(StatusCode::OK, &body)
}
