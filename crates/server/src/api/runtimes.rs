//! `GET /runtimes`: what this server runs, with its caps, so a client can size requests
//! before sending them.

use std::sync::Arc;

use axum::extract::State;
use axum::http::StatusCode;
use axum::response::Response;

use crate::App;
use crate::images::DEFAULT_IMAGE;
use crate::views::{self, ImageInfo, RuntimeInfo, RuntimesReply};

#[utoipa::path(
    get,
    path = "/runtimes",
    tag = "runtimes",
    responses((status = 200, description = "runtimes and their caps", body = RuntimesReply))
)]
pub(crate) async fn runtimes(State(app): State<Arc<App>>) -> Response {
    let c = &app.config;
    let digest = app.images.digest().await;
    let caps = |name: &str, available: bool, notes: &str, images: Vec<String>| RuntimeInfo {
        name: name.into(),
        available,
        default_images: images,
        max_cpu: c.max_cpu,
        max_mem_mb: if available {
            c.effective_max_mem_mb()
        } else {
            c.max_mem_mb
        },
        max_upload_mb: c.max_upload_mb,
        max_log_bytes: c.max_log_bytes,
        queue_max_length: c.queue_max_length,
        queue_ttl_sec: c.queue_ttl_sec,
        workspace_cap_mb: c.workspace_cap_mb,
        artifact_ttl_hours: c.artifact_ttl_hours,
        supported_spec_versions: c.supported_spec_versions.clone(),
        interactive_supported: false,
        egress_allowlist_supported: false,
        store_mode: app.store.mode().into(),
        notes: notes.into(),
        runtime_version: None,
        default: None,
        images: None,
        max_concurrent_runs: None,
        queue_length: None,
    };
    let wasm = RuntimeInfo {
        runtime_version: Some(crate::RUNTIME_VERSION.into()),
        default: Some(true),
        images: Some(vec![ImageInfo {
            name: DEFAULT_IMAGE.into(),
            digest: digest.clone(),
            aliases: c.image_aliases.keys().cloned().collect(),
        }]),
        max_concurrent_runs: Some(c.max_concurrent_runs),
        queue_length: Some(app.queue.waiting()),
        ..caps(
            "wasm",
            true,
            "WebAssembly sandboxes (wasmer): bash-like shell, coreutils, jq, python3; no network. \
             Sessions live in this process's memory and end when it restarts; runs, artifacts and \
             idempotency entries are kept by the store.",
            vec![format!("{DEFAULT_IMAGE}@{digest}")],
        )
    };
    let body = RuntimesReply {
        store_mode: app.store.mode().into(),
        default_runtime: "wasm".into(),
        runtimes: vec![
            wasm,
            caps(
                "docker",
                false,
                "not available in this build; use wasm",
                vec![],
            ),
            caps(
                "firecracker",
                false,
                "not available in this build; use wasm",
                vec![],
            ),
        ],
    };
    views::json(StatusCode::OK, &body)
}
