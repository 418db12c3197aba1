//! The response bodies of the REST API as types: handlers build these, and the OpenAPI
//! document (`crate::openapi`) derives its schemas from the same types, so the description
//! cannot drift from what is sent.
//!
//! Bodies go out through [`json`], which passes them through `serde_json::Value`: the wire
//! keeps the sorted key order the service has always had (the idempotency store replays
//! bodies as `Value`s, so a first answer and its replay are byte for byte the same).

use std::collections::BTreeMap;

use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use serde::Serialize;
use utoipa::ToSchema;

use crate::store::{Phase, ResourceUsage};

/// `status` with `body` as JSON.
pub fn json<T: Serialize>(status: StatusCode, body: &T) -> Response {
    match serde_json::to_value(body) {
        Ok(v) => (status, axum::Json(v)).into_response(),
        Err(e) => crate::error::ApiError::internal(format!("cannot encode the response: {e}"))
            .into_response(),
    }
}

/// The error envelope every 4xx/5xx carries (as `application/problem+json`, RFC 7807, when
/// the client's `Accept` asks for it).
#[derive(Serialize, ToSchema)]
pub struct ErrorEnvelope {
    pub error: ErrorBody,
}

#[derive(Serialize, ToSchema)]
pub struct ErrorBody {
    /// Machine-readable code: `invalid_request`, `invalid_spec_version`, `not_found`,
    /// `idempotency_conflict`, `rate_limited`, `quota_exceeded`, `runtime_unavailable`,
    /// `forbidden`, `unavailable`, `internal_error`, ...
    pub code: String,
    pub message: String,
    /// Context of the error (limits, supported values, ...); `{}` when there is none.
    #[schema(value_type = Object)]
    pub details: serde_json::Value,
}

/// Normalized resources of a session or run: `cpu` is always 1 (a program runs on one
/// thread), `memory_mb` the per-program linear-memory cap.
#[derive(Serialize, ToSchema, Clone, Copy)]
pub struct ResourcesView {
    pub cpu: f64,
    pub memory_mb: u64,
}

#[derive(Serialize, ToSchema)]
pub struct SessionView {
    pub session_id: String,
    pub expires_at: String,
    pub created_at: String,
    pub runtime: String,
    pub runtime_version: String,
    pub base_image: String,
    pub image_digest: String,
    pub policy_hash: String,
    pub spec_version: String,
    pub network_policy: String,
    pub resources: ResourcesView,
    /// Default `timeout_sec` of the session's runs.
    pub timeout_sec: u64,
    pub env: BTreeMap<String, String>,
    pub labels: BTreeMap<String, String>,
}

/// The answer to `POST /runs`: the admission (`starting` or `queued`) and the run's
/// reproducible spec.
#[derive(Serialize, ToSchema)]
pub struct RunCreated {
    pub run_id: String,
    pub session_id: Option<String>,
    /// `starting` (200) or `queued` (202).
    pub phase: Phase,
    /// `ws://host/...` when the request had a `Host`, else the path.
    pub log_stream_url: String,
    pub policy_hash: String,
    pub spec_version: String,
    pub runtime: String,
    pub runtime_version: String,
    pub base_image: String,
    pub image_digest: String,
    pub created_at: String,
    pub resources: ResourcesView,
    pub startup_timeout_sec: u64,
    pub timeout_sec: u64,
    /// When a queued run is expected to start.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub estimated_start_time: Option<String>,
}

#[derive(Serialize, ToSchema)]
pub struct RunView {
    pub run_id: String,
    /// Same as `run_id`.
    pub id: String,
    pub session_id: Option<String>,
    pub phase: Phase,
    pub reason_code: Option<String>,
    pub message: Option<String>,
    pub exit_code: Option<i32>,
    pub created_at: String,
    pub starting_at: Option<String>,
    pub started_at: Option<String>,
    pub finished_at: Option<String>,
    pub runtime: String,
    pub runtime_version: String,
    pub base_image: String,
    pub image_digest: String,
    pub policy_hash: String,
    pub spec_version: String,
    pub command: Vec<String>,
    pub resource_usage: ResourceUsage,
    pub log_truncated: bool,
    pub frames_dropped: u64,
    pub artifact_count: usize,
    pub artifacts_expired: bool,
    pub artifacts_capped: bool,
    /// Seq of the run's last WebSocket frame so far.
    pub last_seq: u64,
}

#[derive(Serialize, ToSchema)]
pub struct CancelReply {
    pub run_id: String,
    pub phase: Phase,
    /// False when the run had already finished.
    pub cancel_requested: bool,
    /// Seconds between TERM and KILL; absent when nothing was cancelled.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub grace_sec: Option<u64>,
    pub message: String,
}

#[derive(Serialize, ToSchema)]
pub struct UploadReply {
    pub session_id: String,
    /// `multipart`, `tar`, `tar.gz` or `zip`.
    pub kind: String,
    pub files: usize,
    pub bytes: u64,
    /// Paths written, relative to the workspace.
    pub paths: Vec<String>,
}

#[derive(Serialize, ToSchema)]
pub struct ArtifactItem {
    pub path: String,
    pub size: u64,
    #[serde(rename = "type")]
    pub content_type: String,
    /// `file` or `symlink` (listed, never followed).
    pub kind: String,
    pub url: String,
}

#[derive(Serialize, ToSchema)]
pub struct ArtifactList {
    pub run_id: String,
    pub phase: Phase,
    pub artifacts: Vec<ArtifactItem>,
    pub artifact_bytes: u64,
    pub expired: bool,
    pub capped: bool,
}

#[derive(Serialize, ToSchema)]
pub struct ImageInfo {
    pub name: String,
    pub digest: String,
    pub aliases: Vec<String>,
}

/// One runtime and its caps. The fields after `notes` are given for available runtimes only.
#[derive(Serialize, ToSchema)]
pub struct RuntimeInfo {
    pub name: String,
    pub available: bool,
    pub default_images: Vec<String>,
    pub max_cpu: f64,
    pub max_mem_mb: u64,
    pub max_upload_mb: u64,
    pub max_log_bytes: u64,
    pub queue_max_length: usize,
    pub queue_ttl_sec: u64,
    pub workspace_cap_mb: u64,
    pub artifact_ttl_hours: u64,
    pub supported_spec_versions: Vec<String>,
    pub interactive_supported: bool,
    pub egress_allowlist_supported: bool,
    pub store_mode: String,
    pub notes: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub runtime_version: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub default: Option<bool>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub images: Option<Vec<ImageInfo>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub max_concurrent_runs: Option<usize>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub queue_length: Option<usize>,
}

#[derive(Serialize, ToSchema)]
pub struct RuntimesReply {
    pub store_mode: String,
    pub default_runtime: String,
    pub runtimes: Vec<RuntimeInfo>,
}

/// Raw bytes (an archive upload, an artifact download).
#[derive(serde::Deserialize, ToSchema)]
#[schema(format = Binary)]
pub struct ArchiveBytes(#[allow(dead_code)] String);

/// `multipart/form-data` upload: one `files[]` part per file, its filename the path in the
/// workspace (relative, no `..`).
#[derive(serde::Deserialize, ToSchema)]
#[allow(dead_code)]
pub struct UploadForm {
    #[serde(rename = "files[]")]
    #[schema(min_items = 1)]
    files: Vec<ArchiveBytes>,
}
