//! Where runs, their artifact lists and idempotency entries live: one trait, an in-memory
//! implementation and a SQLite one. Sessions are not stored: their sandboxes live in memory
//! and end with the process.
//!
//! The trait is synchronous; callers on async threads go through [`call`], which runs a
//! blocking store on tokio's blocking pool and an in-memory one inline.

mod memory;
mod sqlite;

use std::sync::Arc;

use serde::{Deserialize, Serialize};
use serde_json::Value;

pub use memory::MemoryStore;
pub use sqlite::SqliteStore;

#[derive(Debug, thiserror::Error)]
#[error("store: {0}")]
pub struct StoreError(pub String);

pub type StoreResult<T> = Result<T, StoreError>;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum Phase {
    Queued,
    Starting,
    Running,
    Completed,
    Failed,
    TimedOut,
    Killed,
}

impl Phase {
    pub fn as_str(self) -> &'static str {
        match self {
            Phase::Queued => "queued",
            Phase::Starting => "starting",
            Phase::Running => "running",
            Phase::Completed => "completed",
            Phase::Failed => "failed",
            Phase::TimedOut => "timed_out",
            Phase::Killed => "killed",
        }
    }

    pub fn is_terminal(self) -> bool {
        matches!(
            self,
            Phase::Completed | Phase::Failed | Phase::TimedOut | Phase::Killed
        )
    }
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, utoipa::ToSchema)]
pub struct Limits {
    pub cpu: f64,
    pub memory_mb: u64,
    pub pids: u64,
    pub nofile: u64,
    pub startup_timeout_sec: u64,
    pub timeout_sec: u64,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, utoipa::ToSchema)]
pub struct ResourceUsage {
    pub cpu_time_sec: f64,
    pub wall_time_sec: f64,
    pub peak_rss_mb: Option<f64>,
    pub log_bytes: u64,
    pub artifact_bytes: u64,
    pub limits: Limits,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ArtifactEntry {
    /// Relative to the workspace, `/`-separated, normalized.
    pub path: String,
    pub size: u64,
    /// `file` or `symlink` (listed, zero-length, never followed).
    pub kind: String,
    pub content_type: String,
}

/// Everything known about one run; the status endpoint is a view of it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RunRecord {
    pub id: String,
    pub user_id: String,
    pub session_id: Option<String>,
    pub spec_version: String,
    pub runtime: String,
    pub runtime_version: String,
    pub base_image: String,
    pub image_digest: String,
    pub policy_hash: String,
    pub command: Vec<String>,
    pub phase: Phase,
    pub reason_code: Option<String>,
    pub message: Option<String>,
    pub exit_code: Option<i32>,
    pub created_at: i64,
    pub starting_at: Option<i64>,
    pub started_at: Option<i64>,
    pub finished_at: Option<i64>,
    pub resource_usage: ResourceUsage,
    pub capture_patterns: Vec<String>,
    pub artifacts: Vec<ArtifactEntry>,
    /// Set when the sweeper removed the artifacts after their TTL.
    pub artifacts_expired: bool,
    /// Set when the per-run or per-user artifact cap left files out.
    #[serde(default)]
    pub artifacts_capped: bool,
    /// Sequence number of the run's last WebSocket frame (its `end` once finished).
    pub last_seq: u64,
    pub log_truncated: bool,
    /// Frames the run's ring dropped to stay within its size (what a client that fell that
    /// far behind lost, announced to it with `resume`).
    #[serde(default)]
    pub frames_dropped: u64,
}

/// A remembered answer to an idempotent POST.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct IdemEntry {
    /// `sessions` or `runs`: keys are scoped per endpoint.
    pub endpoint: String,
    pub user_id: String,
    pub key: String,
    /// SHA-256 of the canonical request body.
    pub fingerprint: String,
    pub object_id: String,
    pub created_at: i64,
    pub status: u16,
    pub response: Value,
}

pub trait Store: Send + Sync + 'static {
    /// `memory` or `sqlite`, as `/runtimes` reports it.
    fn mode(&self) -> &'static str;
    /// Whether calls do I/O (and so belong on the blocking pool).
    fn blocking(&self) -> bool;
    /// Inserts or replaces.
    fn put_run(&self, run: &RunRecord) -> StoreResult<()>;
    fn get_run(&self, id: &str) -> StoreResult<Option<RunRecord>>;
    /// At start-up: runs left unfinished by a previous process become `failed` with this
    /// reason. Returns how many.
    fn fail_unfinished(&self, reason_code: &str, message: &str, now: i64) -> StoreResult<usize>;
    /// Finished runs, finished before `cutoff`, that still have artifacts.
    fn runs_with_artifacts_before(&self, cutoff: i64) -> StoreResult<Vec<RunRecord>>;
    /// Bytes of unexpired artifacts a user holds.
    fn user_artifact_bytes(&self, user_id: &str) -> StoreResult<u64>;
    fn idem_get(&self, endpoint: &str, user_id: &str, key: &str) -> StoreResult<Option<IdemEntry>>;
    /// Inserts or replaces.
    fn idem_put(&self, entry: &IdemEntry) -> StoreResult<()>;
    /// Forgets entries created before `cutoff`.
    fn idem_purge(&self, cutoff: i64) -> StoreResult<usize>;
    /// Every run (the admin API filters and pages them).
    fn list_runs(&self) -> StoreResult<Vec<RunRecord>>;
    /// Every idempotency entry.
    fn list_idempotency(&self) -> StoreResult<Vec<IdemEntry>>;
}

/// Runs a store call off the async threads when the store blocks.
pub async fn call<T, F>(store: &Arc<dyn Store>, f: F) -> StoreResult<T>
where
    F: FnOnce(&dyn Store) -> StoreResult<T> + Send + 'static,
    T: Send + 'static,
{
    if !store.blocking() {
        return f(store.as_ref());
    }
    let s = store.clone();
    tokio::task::spawn_blocking(move || f(s.as_ref()))
        .await
        .map_err(|e| StoreError(format!("store task failed: {e}")))?
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    pub fn sample_run(id: &str, phase: Phase) -> RunRecord {
        RunRecord {
            id: id.into(),
            user_id: "u".into(),
            session_id: None,
            spec_version: "1.0".into(),
            runtime: "wasm".into(),
            runtime_version: "0.1.0".into(),
            base_image: "wasmsand/default".into(),
            image_digest: "sha256:00".into(),
            policy_hash: "ab".into(),
            command: vec!["echo".into(), "hi".into()],
            phase,
            reason_code: None,
            message: None,
            exit_code: None,
            created_at: 1000,
            starting_at: None,
            started_at: None,
            finished_at: None,
            resource_usage: ResourceUsage::default(),
            capture_patterns: vec![],
            artifacts: vec![],
            artifacts_expired: false,
            artifacts_capped: false,
            last_seq: 0,
            log_truncated: false,
            frames_dropped: 0,
        }
    }

    /// The behaviour every store must have.
    pub fn exercise(store: &dyn Store) {
        let mut done = sample_run("r1", Phase::Completed);
        done.finished_at = Some(2000);
        done.exit_code = Some(0);
        done.resource_usage.artifact_bytes = 10;
        done.artifacts = vec![ArtifactEntry {
            path: "out.txt".into(),
            size: 10,
            kind: "file".into(),
            content_type: "text/plain".into(),
        }];
        store.put_run(&done).unwrap();
        store.put_run(&sample_run("r2", Phase::Running)).unwrap();
        store.put_run(&sample_run("r3", Phase::Queued)).unwrap();
        assert_eq!(store.get_run("r1").unwrap().unwrap(), done);
        assert!(store.get_run("nope").unwrap().is_none());

        assert_eq!(
            store.fail_unfinished("server_restart", "m", 5000).unwrap(),
            2
        );
        let r2 = store.get_run("r2").unwrap().unwrap();
        assert_eq!(r2.phase, Phase::Failed);
        assert_eq!(r2.reason_code.as_deref(), Some("server_restart"));
        assert_eq!(r2.finished_at, Some(5000));
        assert_eq!(
            store.get_run("r1").unwrap().unwrap().phase,
            Phase::Completed
        );

        assert_eq!(store.user_artifact_bytes("u").unwrap(), 10);
        assert_eq!(store.user_artifact_bytes("other").unwrap(), 0);
        assert_eq!(store.runs_with_artifacts_before(1999).unwrap().len(), 0);
        let old = store.runs_with_artifacts_before(2001).unwrap();
        assert_eq!(old.len(), 1);
        let mut expired = old[0].clone();
        expired.artifacts_expired = true;
        store.put_run(&expired).unwrap();
        assert_eq!(store.runs_with_artifacts_before(2001).unwrap().len(), 0);
        assert_eq!(store.user_artifact_bytes("u").unwrap(), 0);

        let e = IdemEntry {
            endpoint: "runs".into(),
            user_id: "u".into(),
            key: "k".into(),
            fingerprint: "f".into(),
            object_id: "r1".into(),
            created_at: 100,
            status: 202,
            response: serde_json::json!({"run_id": "r1"}),
        };
        store.idem_put(&e).unwrap();
        assert_eq!(store.idem_get("runs", "u", "k").unwrap().unwrap(), e);
        assert!(store.idem_get("sessions", "u", "k").unwrap().is_none());
        assert!(store.idem_get("runs", "v", "k").unwrap().is_none());
        assert_eq!(store.list_idempotency().unwrap(), vec![e.clone()]);
        let mut ids: Vec<String> = store
            .list_runs()
            .unwrap()
            .into_iter()
            .map(|r| r.id)
            .collect();
        ids.sort();
        assert_eq!(ids, ["r1", "r2", "r3"]);
        assert_eq!(store.idem_purge(100).unwrap(), 0);
        assert_eq!(store.idem_purge(101).unwrap(), 1);
        assert!(store.idem_get("runs", "u", "k").unwrap().is_none());
    }
}
