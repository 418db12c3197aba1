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

use crate::store::{Phase, ResourceUsage, StdinLimits};

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
    /// Machine-readable code, one of the registry's (`crate::error::ErrorCode`).
    pub code: crate::error::ErrorCode,
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
    /// The effective allowlist (the server's narrowed by the request's) of
    /// `network_policy: allowlist`; null for `deny_all`.
    #[schema(value_type = Option<Object>)]
    pub egress_allowlist: Option<wasmsand::egress::EgressAllowlist>,
    pub resources: ResourcesView,
    /// Default `timeout_sec` of the session's runs.
    pub timeout_sec: u64,
    pub env: BTreeMap<String, String>,
    pub labels: BTreeMap<String, String>,
    /// The session this one was forked from (`POST /sessions/{id}/fork`), which it merges
    /// back into; null for a session made by `POST /sessions`.
    pub forked_from: Option<String>,
}

/// A session in a list: where it is besides what it is.
#[derive(Serialize, ToSchema)]
pub struct SessionListItem {
    #[serde(flatten)]
    pub session: SessionView,
    /// `active` (in a process's memory: this one, or on replicas another's) or `hibernated`
    /// (in the store only; the next request for it wakes it).
    pub state: String,
    /// The session's owner.
    pub user_id: String,
}

/// A page of sessions, oldest first.
#[derive(Serialize, ToSchema)]
pub struct SessionList {
    pub items: Vec<SessionListItem>,
    pub total: u64,
    pub limit: u64,
    pub offset: u64,
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
    /// Whether the command reads its stdin from `stdin` frames on the run's stream.
    pub interactive: bool,
    /// An interactive run's effective stdin limits (absent for other runs).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub stdin_limits: Option<StdinLimits>,
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
    /// Whether the command reads its stdin from `stdin` frames on the run's stream.
    pub interactive: bool,
    /// An interactive run's stdin limits (absent for other runs).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub stdin_limits: Option<StdinLimits>,
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
    /// Files written into the workspace.
    pub file_count: usize,
    /// Bytes of the files written (an archive's, once expanded).
    pub bytes_received: u64,
    /// Deprecated alias of `file_count`, kept for one release.
    #[schema(deprecated)]
    pub files: usize,
    /// Deprecated alias of `bytes_received`, kept for one release.
    #[schema(deprecated)]
    pub bytes: u64,
    /// Paths written, relative to the workspace.
    pub paths: Vec<String>,
    /// Members the exclude rules left out (files and folders; what is in a left-out folder
    /// counts too).
    pub excluded_count: u64,
    /// The first 100 of them, relative to the workspace.
    pub excluded: Vec<String>,
}

#[derive(Serialize, ToSchema, Clone)]
pub struct ArtifactItem {
    /// Relative to the workspace.
    pub path: String,
    pub size: u64,
    /// Where to GET it (a path on this server, with the same credentials).
    pub download_url: String,
    #[serde(rename = "type")]
    pub content_type: String,
    /// `file` or `symlink` (listed, never followed).
    pub kind: String,
    /// Deprecated alias of `download_url`, kept for one release.
    #[schema(deprecated)]
    pub url: String,
}

#[derive(Serialize, ToSchema)]
pub struct ArtifactList {
    /// The run's artifacts (empty until it finished, and once they expired).
    pub items: Vec<ArtifactItem>,
    pub run_id: String,
    pub phase: Phase,
    /// Deprecated alias of `items`, kept for one release.
    #[schema(deprecated)]
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
    /// Runs may be `interactive: true` (spec 1.1; `SANDBOX_INTERACTIVE_ENABLED`).
    pub interactive_supported: bool,
    /// Where `interactive_supported`: the server's stdin limits, each the default of a run
    /// that gives none and the most one may ask for.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub interactive_limits: Option<StdinLimits>,
    pub egress_allowlist_supported: bool,
    /// Whether its sessions survive a restart or a replica's loss: they hibernate to the
    /// store when idle and at shutdown, are checkpointed after each run, and wake on any
    /// replica. A session of a runtime that does not ends with its replica.
    pub sessions_hibernate: bool,
    /// `SANDBOX_HIBERNATE_AFTER_SEC` where sessions hibernate (0: only at shutdown).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub hibernate_after_sec: Option<u64>,
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
    /// The OCI runtime containers run under (`runc`, or gVisor's `runsc`): docker only.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub oci_runtime: Option<String>,
    /// How the machines run (`kvm`, or `tcg`: software emulation), once known: vm only.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub acceleration: Option<String>,
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

// ---- admin (`/admin/*`) ----

/// One run of the admin list.
#[derive(Serialize, ToSchema)]
pub struct AdminRunSummary {
    pub id: String,
    pub user_id: String,
    pub spec_version: String,
    pub runtime: String,
    pub runtime_version: String,
    pub base_image: String,
    pub phase: Phase,
    pub exit_code: Option<i32>,
    pub started_at: Option<String>,
    pub finished_at: Option<String>,
    pub image_digest: String,
    pub policy_hash: String,
    /// The node (machine or pod) that executed the run; null in records older than it.
    pub node_id: Option<String>,
    /// The `sandboxd serve` process that executed the run.
    pub worker_id: Option<String>,
}

/// A page of a list: `has_more` when items follow `offset + items`.
#[derive(Serialize, ToSchema)]
pub struct AdminRunPage {
    pub items: Vec<AdminRunSummary>,
    pub total: u64,
    pub limit: u64,
    pub offset: u64,
    pub has_more: bool,
}

#[derive(Serialize, ToSchema)]
pub struct AdminArtifact {
    pub path: String,
    pub size: u64,
}

/// One run in full.
#[derive(Serialize, ToSchema)]
pub struct AdminRunDetail {
    #[serde(flatten)]
    pub summary: AdminRunSummary,
    pub message: Option<String>,
    pub reason_code: Option<String>,
    pub session_id: Option<String>,
    pub created_at: String,
    pub resource_usage: ResourceUsage,
    /// Empty once the artifacts expired.
    pub artifacts: Vec<AdminArtifact>,
}

#[derive(Serialize, ToSchema)]
pub struct AdminIdemItem {
    /// `runs` or `sessions`.
    pub endpoint: String,
    /// The user the key belongs to.
    pub user_key: String,
    pub key: String,
    pub created_at: String,
    /// The run or session the key created (empty while its request is in flight).
    pub object_id: String,
}

#[derive(Serialize, ToSchema)]
pub struct AdminIdemPage {
    pub items: Vec<AdminIdemItem>,
    pub total: u64,
    pub limit: u64,
    pub offset: u64,
    pub has_more: bool,
}

#[derive(Serialize, ToSchema)]
pub struct AdminUsageItem {
    pub user_id: String,
    /// Bytes of the user's unexpired artifacts.
    pub artifact_bytes: u64,
}

#[derive(Serialize, ToSchema)]
pub struct AdminUsage {
    /// Largest first.
    pub items: Vec<AdminUsageItem>,
}

/// Counts and sums over the runs of a window.
#[derive(Serialize, ToSchema, Default, Clone)]
pub struct UsageTotals {
    pub runs: u64,
    pub completed: u64,
    pub failed: u64,
    pub timed_out: u64,
    pub killed: u64,
    /// Runs not finished yet.
    pub in_flight: u64,
    pub log_bytes: u64,
    pub artifact_bytes: u64,
    pub wall_time_sec: f64,
}

#[derive(Serialize, ToSchema)]
pub struct RuntimeUsage {
    pub runtime: String,
    #[serde(flatten)]
    pub totals: UsageTotals,
}

#[derive(Serialize, ToSchema)]
pub struct UserUsageTotals {
    pub user_id: String,
    #[serde(flatten)]
    pub totals: UsageTotals,
}

#[derive(Serialize, ToSchema)]
pub struct UsageWindow {
    pub from: String,
    pub to: String,
}

/// Runs created in the window: totals, per runtime, and the top users by runs.
#[derive(Serialize, ToSchema)]
pub struct UsageSummary {
    pub window: UsageWindow,
    pub totals: UsageTotals,
    pub by_runtime: Vec<RuntimeUsage>,
    pub top_users: Vec<UserUsageTotals>,
}

/// A sample's value: a number, or `NaN`, `+Inf`, `-Inf` as text.
#[derive(Serialize, ToSchema)]
#[serde(untagged)]
pub enum MetricValue {
    Number(f64),
    Text(String),
}

/// One series of a metric: its label set and current value.
#[derive(Serialize, ToSchema)]
pub struct MetricSeries {
    pub labels: BTreeMap<String, String>,
    pub value: MetricValue,
}

/// Every series of `/metrics` by metric name (histograms as `_bucket`, `_sum`, `_count`).
#[derive(Serialize, ToSchema)]
#[serde(transparent)]
pub struct AdminMetrics(pub BTreeMap<String, Vec<MetricSeries>>);

/// One audit event as stored. Run events also carry `phase`, `command_sha256`
/// and `limits`; terminal ones the outcome (`exit_code`, `reason_code`, `message`,
/// `resource_usage`, `started_at`, `finished_at`).
#[derive(Serialize, serde::Deserialize, ToSchema)]
pub struct AuditEventView {
    /// `sandbox.session.created`, `sandbox.run.created`, `sandbox.run.queued`, ...
    pub event: String,
    pub ts: String,
    pub user_id: String,
    /// `api`, `ide`, `mcp`, `web` or `agent` (`X-Sandbox-Source`).
    pub source: String,
    pub policy_hash: String,
    pub spec_version: String,
    pub runtime: String,
    pub base_image: String,
    pub image_digest: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub run_id: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub session_id: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub trace_id: Option<String>,
    /// The event's other fields.
    #[serde(flatten)]
    #[schema(ignore)]
    pub rest: serde_json::Map<String, serde_json::Value>,
}

#[derive(Serialize, ToSchema)]
pub struct AuditPage {
    /// In the order they happened.
    pub items: Vec<AuditEventView>,
    pub total: u64,
    pub limit: u64,
    pub offset: u64,
    pub has_more: bool,
}
