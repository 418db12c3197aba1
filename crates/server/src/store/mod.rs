//! Where runs, their artifact lists, idempotency entries, audit events and saved sessions
//! live: one trait, an in-memory implementation, a SQLite one and a PostgreSQL one. A live
//! session's sandbox is in the memory of one process; the store keeps its last checkpoint
//! (a [`SavedSession`] and its content-addressed chunks, see `crate::hibernate`), and with
//! PostgreSQL which replica holds it (see [`Cluster`] and `crate::replica`).
//!
//! The trait is synchronous; callers on async threads go through [`call`], which runs a
//! blocking store on tokio's blocking pool and an in-memory one inline.

mod memory;
mod postgres;
mod sqlite;
pub mod testsuite;

use std::sync::Arc;

use serde::{Deserialize, Serialize};
use serde_json::Value;

pub use memory::MemoryStore;
pub use postgres::PostgresStore;
pub use sqlite::SqliteStore;

/// A store call that failed (I/O, a database error, a record that does not decode); the text
/// says what. Handlers answer it as a 5xx.
#[derive(Debug, thiserror::Error)]
#[error("store: {0}")]
pub struct StoreError(pub String);

/// The result of every store call.
pub type StoreResult<T> = Result<T, StoreError>;

/// Where a run is in its life: `queued → starting → running →` one terminal phase.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum Phase {
    /// Waiting for one of the `max_concurrent_runs` slots.
    Queued,
    /// Its sandbox is being prepared (within `startup_timeout_sec`).
    Starting,
    /// The command is executing.
    Running,
    /// Ended with exit status 0.
    Completed,
    /// Ended otherwise: a nonzero status, a limit, a lost session or replica, a shutdown
    /// (`reason_code` says which).
    Failed,
    /// Past `startup_timeout_sec` or `timeout_sec`.
    TimedOut,
    /// Cancelled by its user.
    Killed,
}

impl Phase {
    /// The wire spelling (`"timed_out"`, ...).
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

    /// Whether the run has ended (a terminal phase never changes again).
    pub fn is_terminal(self) -> bool {
        matches!(
            self,
            Phase::Completed | Phase::Failed | Phase::TimedOut | Phase::Killed
        )
    }
}

/// The limits a run ran under, as its status reports them.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, utoipa::ToSchema)]
pub struct Limits {
    /// Always 1: a program runs on one thread.
    pub cpu: f64,
    /// Each program's linear-memory cap.
    pub memory_mb: u64,
    /// `SANDBOX_PIDS_LIMIT`, reported for compatibility (a wasm sandbox has no host pids).
    pub pids: u64,
    /// `SANDBOX_ULIMIT_NOFILE`, reported for compatibility.
    pub nofile: u64,
    /// The run's startup budget after clamping.
    pub startup_timeout_sec: u64,
    /// The run's execution budget after clamping.
    pub timeout_sec: u64,
}

/// The stdin limits of an interactive run (`interactive: true`): the request's, or the
/// server's `SANDBOX_INTERACTIVE_*` defaults, which a request may only lower.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
pub struct StdinLimits {
    /// Bytes of stdin the run may receive in all.
    pub stdin_max_bytes: u64,
    /// Largest payload of one `stdin` frame, in bytes once decoded.
    pub stdin_max_frame_bytes: u64,
    /// Input bytes per second, over all the run's connections (a burst of one second's
    /// worth at most).
    pub stdin_bps: u64,
    /// Stdin is closed after this long without input.
    pub stdin_idle_timeout_sec: u64,
}

/// What a run used, filled in when it ends.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, utoipa::ToSchema)]
pub struct ResourceUsage {
    /// CPU time of the run's guest programs.
    pub cpu_time_sec: f64,
    /// Wall-clock time from start to end of the command.
    pub wall_time_sec: f64,
    /// Largest linear memory of any of its programs; `None` while it runs and for a run that
    /// never executed.
    pub peak_rss_mb: Option<f64>,
    /// Bytes of output it streamed (at most `SANDBOX_MAX_LOG_BYTES`).
    pub log_bytes: u64,
    /// Bytes of the artifacts captured.
    pub artifact_bytes: u64,
    /// Network requests its programs sent (connections, in the Docker tier) under an egress
    /// allowlist.
    #[serde(default)]
    pub network_requests: u64,
    /// Bytes it received over the network.
    #[serde(default)]
    pub network_bytes: u64,
    /// The limits it ran under.
    pub limits: Limits,
}

/// One file captured from a run's workspace after it ended.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ArtifactEntry {
    /// Relative to the workspace, `/`-separated, normalized.
    pub path: String,
    /// Bytes (0 for a symlink).
    pub size: u64,
    /// `file` or `symlink` (listed, zero-length, never followed).
    pub kind: String,
    /// MIME type guessed from the name and first bytes (`inode/symlink` for a symlink).
    pub content_type: String,
}

/// Everything known about one run; the status endpoint is a view of it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RunRecord {
    /// The run id (minted by the server).
    pub id: String,
    /// Whose run it is: other users get 404 for it.
    pub user_id: String,
    /// The session it ran in; `None` for a one-shot run in a fresh sandbox.
    pub session_id: Option<String>,
    /// The `spec_version` of its request.
    pub spec_version: String,
    /// Always `wasm`.
    pub runtime: String,
    /// The server's version ([`crate::RUNTIME_VERSION`]).
    pub runtime_version: String,
    /// The template it ran on, as the request named it (default `wasmsand/default`).
    pub base_image: String,
    /// SHA-256 of the template's files, so a run can be traced to exactly what it ran on.
    pub image_digest: String,
    /// The `policy_hash` of the configuration it ran under.
    pub policy_hash: String,
    /// The command as requested (argv form).
    pub command: Vec<String>,
    /// Where it is in the state machine.
    pub phase: Phase,
    /// Why it ended as it did (`nonzero_exit`, `execution_timeout`, ...); `None` for `completed` and while it runs.
    pub reason_code: Option<String>,
    /// Detail for a human (e.g. the exit status, `canceled_by_user`).
    pub message: Option<String>,
    /// The command's exit status, once it ran (124 on an execution timeout).
    pub exit_code: Option<i32>,
    /// When the request was accepted (epoch ms).
    pub created_at: i64,
    /// When it left the queue (epoch ms).
    pub starting_at: Option<i64>,
    /// When the command began (epoch ms).
    pub started_at: Option<i64>,
    /// When it reached a terminal phase (epoch ms).
    pub finished_at: Option<i64>,
    /// What it used, and its limits.
    pub resource_usage: ResourceUsage,
    /// Globs (relative to the workspace) whose files become its artifacts.
    pub capture_patterns: Vec<String>,
    /// The captured files.
    pub artifacts: Vec<ArtifactEntry>,
    /// Set when the sweeper removed the artifacts after their TTL.
    pub artifacts_expired: bool,
    /// Set when the per-run or per-user artifact cap left files out.
    #[serde(default)]
    pub artifacts_capped: bool,
    /// Sequence number of the run's last WebSocket frame (its `end` once finished).
    pub last_seq: u64,
    /// Whether its output passed `SANDBOX_MAX_LOG_BYTES` (a `truncated` frame was sent).
    pub log_truncated: bool,
    /// Frames the run's ring dropped to stay within its size (what a client that fell that
    /// far behind lost, announced to it with `resume`).
    #[serde(default)]
    pub frames_dropped: u64,
    /// The node (machine or pod: `SANDBOX_NODE_ID`, default the host name) and the worker
    /// (the `sandboxd serve` process, a new id each start) that executed the run, which the
    /// admin list shows and filters on. Absent in records older than these fields.
    #[serde(default)]
    pub node_id: Option<String>,
    /// See `node_id`.
    #[serde(default)]
    pub worker_id: Option<String>,
    /// Set for an interactive run: the stdin limits it ran with. Absent in records older
    /// than interactive runs.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub interactive: Option<StdinLimits>,
}

/// A remembered answer to an idempotent POST.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct IdemEntry {
    /// `sessions` or `runs`: keys are scoped per endpoint.
    pub endpoint: String,
    /// Keys are scoped per user: two users may use the same key.
    pub user_id: String,
    /// The `Idempotency-Key` header's value.
    pub key: String,
    /// SHA-256 of the canonical request body.
    pub fingerprint: String,
    /// The session or run the first request created.
    pub object_id: String,
    /// When the key was claimed (epoch ms); the entry expires `SANDBOX_IDEMPOTENCY_TTL_SEC`
    /// later.
    pub created_at: i64,
    /// The answer's HTTP status; 0 while the request that claimed the key is in flight.
    pub status: u16,
    /// The answer's body, replayed as is.
    pub response: Value,
}

impl IdemEntry {
    /// A claim of a request still creating its object (no answer yet).
    pub fn is_pending(&self) -> bool {
        self.status == 0
    }

    /// Whether a claim may replace this entry.
    pub fn replaceable(&self, expired_before: i64, stale_before: i64) -> bool {
        self.created_at < expired_before || (self.is_pending() && self.created_at < stale_before)
    }
}

/// One audit event: who did what to which run or session, under which policy.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct AuditEvent {
    /// Unique id of the event.
    pub id: String,
    /// Epoch milliseconds.
    pub ts: i64,
    /// `sandbox.session.created`, `sandbox.run.created`, ... `sandbox.run.killed`.
    pub event: String,
    /// Who did it.
    pub user_id: String,
    /// The run concerned, if any.
    pub run_id: Option<String>,
    /// The session concerned, if any.
    pub session_id: Option<String>,
    /// The whole event as logged: `policy_hash`, `spec_version`, `source`, `runtime`, ...
    pub body: Value,
}

/// Which audit events to list; `None` fields do not filter.
#[derive(Debug, Clone, Default)]
pub struct AuditQuery {
    /// Only this user's events.
    pub user_id: Option<String>,
    /// Only events of this run.
    pub run_id: Option<String>,
    /// Only events of this session.
    pub session_id: Option<String>,
    /// Only events of this name.
    pub event: Option<String>,
    /// Most events returned.
    pub limit: usize,
    /// Events skipped first (paging).
    pub offset: usize,
}

/// What the per-user quotas look at.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct UserUsage {
    /// Runs not yet in a terminal phase.
    pub active_runs: u64,
    /// Runs created at or after the minute window's start, and the oldest of their creation
    /// times (when the window frees a slot).
    pub recent_runs: u64,
    /// See `recent_runs`.
    pub oldest_recent: Option<i64>,
    /// CPU milliseconds of runs created at or after the day window's start, and the oldest
    /// creation time of those that used any. A finished run counts the CPU time it was measured to use; a
    /// run in flight, its running time so far (its CPU time is known when it ends), so that
    /// runs started together cannot all pass a nearly used quota.
    pub cpu_ms: u64,
    /// See `cpu_ms`.
    pub oldest_cpu: Option<i64>,
    /// Bytes of artifacts captured by runs created in the day window, and the oldest of those
    /// runs' creation times.
    pub artifact_bytes_day: u64,
    /// See `artifact_bytes_day`.
    pub oldest_artifact: Option<i64>,
}

impl UserUsage {
    /// Folds one of the user's runs in.
    pub fn add(&mut self, r: &RunRecord, minute_from: i64, day_from: i64, now: i64) {
        if !r.phase.is_terminal() {
            self.active_runs += 1;
        }
        if r.created_at >= minute_from {
            self.recent_runs += 1;
            self.oldest_recent = Some(
                self.oldest_recent
                    .map_or(r.created_at, |o| o.min(r.created_at)),
            );
        }
        if r.created_at >= day_from {
            let ms = if r.phase.is_terminal() {
                (r.resource_usage.cpu_time_sec * 1000.0) as u64
            } else {
                r.started_at.map_or(0, |s| (now - s).max(0) as u64)
            };
            // Only runs that used some count for when room comes back.
            if ms > 0 {
                self.cpu_ms += ms;
                self.oldest_cpu = Some(
                    self.oldest_cpu
                        .map_or(r.created_at, |o| o.min(r.created_at)),
                );
            }
            if r.resource_usage.artifact_bytes > 0 {
                self.artifact_bytes_day += r.resource_usage.artifact_bytes;
                self.oldest_artifact = Some(
                    self.oldest_artifact
                        .map_or(r.created_at, |o| o.min(r.created_at)),
                );
            }
        }
    }
}

/// The usage of `user_id` among `runs`, counting its finished runs created at or after
/// `from` and every run of it not finished yet.
pub(crate) fn fold_usage<'a>(
    runs: impl IntoIterator<Item = &'a RunRecord>,
    user_id: &str,
    from: i64,
    minute_from: i64,
    day_from: i64,
    now: i64,
) -> UserUsage {
    let mut u = UserUsage::default();
    for r in runs {
        if r.user_id == user_id && (!r.phase.is_terminal() || r.created_at >= from) {
            u.add(r, minute_from, day_from, now);
        }
    }
    u
}

/// The per-user limits a new run must fit in (0: no limit).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct UserLimits {
    /// Runs of the user not finished yet (`SANDBOX_USER_MAX_CONCURRENT_RUNS`).
    pub concurrent_runs: u64,
    /// Runs the user created in the last minute (`SANDBOX_USER_RUNS_PER_MINUTE`).
    pub runs_per_minute: u64,
    /// CPU seconds in the last 24 h (`SANDBOX_USER_CPU_SECONDS_PER_DAY`).
    pub cpu_seconds_per_day: u64,
    /// Artifact bytes captured in the last 24 h (`SANDBOX_USER_ARTIFACT_MB_PER_DAY`); only
    /// runs that capture artifacts are refused by it.
    pub artifact_bytes_per_day: u64,
}

impl UserLimits {
    /// Whether any limit is on (if none is, admitting a run needs no usage query).
    pub fn any(&self) -> bool {
        self.concurrent_runs > 0
            || self.runs_per_minute > 0
            || self.cpu_seconds_per_day > 0
            || self.artifact_bytes_per_day > 0
    }

    /// The earliest creation time of a finished run that can count against these limits:
    /// a day back for the daily quotas, a minute for the rate, and none at all (only runs
    /// not finished yet count) when only concurrency is capped, as by default. An admission
    /// reads that much of the user's history and no more: a busy user's day of runs is not
    /// read for every run it starts.
    pub fn counted_from(&self, minute_from: i64, day_from: i64) -> i64 {
        if self.cpu_seconds_per_day > 0 || self.artifact_bytes_per_day > 0 {
            day_from.min(minute_from)
        } else if self.runs_per_minute > 0 {
            minute_from
        } else {
            i64::MAX
        }
    }

    /// The usage `run`'s admission sees (read by `usage` from the creation time
    /// [`Self::counted_from`] gives, and only when a limit is on) and whether `run` fits.
    pub fn check(
        &self,
        run: &RunRecord,
        minute_from: i64,
        day_from: i64,
        usage: impl FnOnce(i64) -> StoreResult<UserUsage>,
    ) -> StoreResult<(UserUsage, bool)> {
        let u = if self.any() {
            usage(self.counted_from(minute_from, day_from))?
        } else {
            UserUsage::default()
        };
        let ok = self.admit(&u, !run.capture_patterns.is_empty());
        Ok((u, ok))
    }

    /// Whether one more run (`captures`: one that asks for artifacts) fits beside `u`.
    pub fn admit(&self, u: &UserUsage, captures: bool) -> bool {
        !(self.concurrent_runs > 0 && u.active_runs >= self.concurrent_runs
            || self.runs_per_minute > 0 && u.recent_runs >= self.runs_per_minute
            || self.cpu_seconds_per_day > 0 && u.cpu_ms / 1000 >= self.cpu_seconds_per_day
            || captures
                && self.artifact_bytes_per_day > 0
                && u.artifact_bytes_day >= self.artifact_bytes_per_day)
    }
}

/// Which time the admin list sorts on (then on `created_at`, in the same direction).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum RunSort {
    /// `started_at`, when the command began.
    #[default]
    StartedAt,
    /// `finished_at`, when the run ended.
    FinishedAt,
}

/// A filtered, sorted page of runs (`GET /admin/runs`). Text filters are exact except `q`, a
/// case-insensitive substring of `base_image` or `message`; time bounds are inclusive epoch
/// milliseconds, and a run without that time does not match a bounded filter. Runs without
/// the sort time come first ascending and last descending.
#[derive(Debug, Clone, Default)]
pub struct RunQuery {
    /// Only this user's runs.
    pub user_id: Option<String>,
    /// Only runs executed on this node.
    pub node_id: Option<String>,
    /// Only runs executed by this worker process.
    pub worker_id: Option<String>,
    /// Only runs in this phase (its wire spelling).
    pub phase: Option<String>,
    /// Only runs of this runtime.
    pub runtime: Option<String>,
    /// Only runs on the template with this digest.
    pub image_digest: Option<String>,
    /// Only runs that named this template.
    pub base_image: Option<String>,
    /// Case-insensitive substring of `base_image` or `message`.
    pub q: Option<String>,
    /// Runs started at or after.
    pub started_from: Option<i64>,
    /// Runs started at or before.
    pub started_to: Option<i64>,
    /// Runs finished at or after.
    pub finished_from: Option<i64>,
    /// Runs finished at or before.
    pub finished_to: Option<i64>,
    /// The time sorted on.
    pub sort: RunSort,
    /// Newest first.
    pub desc: bool,
    /// Most runs in the page.
    pub limit: usize,
    /// Runs skipped before the page.
    pub offset: usize,
}

impl RunQuery {
    /// Whether `r` passes every filter (sorting and paging aside).
    pub fn matches(&self, r: &RunRecord) -> bool {
        let eq = |f: &Option<String>, v: &str| f.as_deref().is_none_or(|f| f == v);
        let within = |from: Option<i64>, to: Option<i64>, t: Option<i64>| match (from, to, t) {
            (None, None, _) => true,
            (_, _, None) => false,
            (f, e, Some(t)) => f.is_none_or(|f| t >= f) && e.is_none_or(|e| t <= e),
        };
        let needle = self.q.as_ref().map(|n| n.to_lowercase());
        let opt = |f: &Option<String>, v: &Option<String>| {
            f.as_deref().is_none_or(|f| v.as_deref() == Some(f))
        };
        eq(&self.user_id, &r.user_id)
            && opt(&self.node_id, &r.node_id)
            && opt(&self.worker_id, &r.worker_id)
            && eq(&self.phase, r.phase.as_str())
            && eq(&self.runtime, &r.runtime)
            && eq(&self.image_digest, &r.image_digest)
            && eq(&self.base_image, &r.base_image)
            && needle.is_none_or(|n| {
                r.base_image.to_lowercase().contains(&n)
                    || r.message
                        .as_deref()
                        .is_some_and(|m| m.to_lowercase().contains(&n))
            })
            && within(self.started_from, self.started_to, r.started_at)
            && within(self.finished_from, self.finished_to, r.finished_at)
    }

    /// Filters, sorts and pages runs in memory: the reference the SQL stores follow.
    pub fn apply(&self, runs: Vec<RunRecord>) -> RunPage {
        let mut runs: Vec<RunRecord> = runs.into_iter().filter(|r| self.matches(r)).collect();
        let sort = self.sort;
        runs.sort_by(|a, b| {
            let key = |r: &RunRecord| match sort {
                RunSort::StartedAt => r.started_at,
                RunSort::FinishedAt => r.finished_at,
            };
            let o = key(a)
                .cmp(&key(b))
                .then(a.created_at.cmp(&b.created_at))
                .then(a.id.cmp(&b.id));
            if self.desc { o.reverse() } else { o }
        });
        let total = runs.len() as u64;
        let items = runs
            .into_iter()
            .skip(self.offset)
            .take(self.limit)
            .collect();
        RunPage { items, total }
    }
}

/// One page of a [`RunQuery`].
#[derive(Debug, Clone, PartialEq)]
pub struct RunPage {
    /// The runs of the page, in the query's order.
    pub items: Vec<RunRecord>,
    /// Runs matching the filters, all pages together.
    pub total: u64,
}

/// A session as its last checkpoint left it in the store: what the service needs to list it,
/// check it and bring it back, and the chunks of its sandbox's state in order. Chunks are
/// named by the SHA-256 of their (uncompressed) bytes and stored once however many saved
/// sessions use them; a chunk is forgotten with the last saved session that uses it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SavedSession {
    /// The session id.
    pub session_id: String,
    /// Its owner.
    pub user_id: String,
    /// When the checkpoint was written (epoch ms).
    pub saved_at: i64,
    /// When the session's TTL ends (epoch ms): the sweeper forgets it then.
    pub expires_at: i64,
    /// The service's record of the session (runtime, image, env, labels, ...) as
    /// `crate::hibernate` writes it.
    pub meta: Value,
    /// SHA-256 (hex) of each chunk of the sandbox's state, in order (a chunk may repeat).
    pub chunks: Vec<String>,
    /// Length of the reassembled state.
    pub payload_len: u64,
    /// SHA-256 (hex) of the reassembled state.
    pub payload_sha256: String,
}

/// The chunks a save starts using and stops using: `(added, removed)`, each without
/// repeats, compared as sets.
pub fn chunk_diff(old: &[String], new: &[String]) -> (Vec<String>, Vec<String>) {
    use std::collections::BTreeSet;
    let old: BTreeSet<&String> = old.iter().collect();
    let new: BTreeSet<&String> = new.iter().collect();
    (
        new.difference(&old).map(|h| (*h).clone()).collect(),
        old.difference(&new).map(|h| (*h).clone()).collect(),
    )
}

/// A `sandboxd serve` process registered in a shared store.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReplicaInfo {
    /// Its replica id (a new one each start).
    pub id: String,
    /// Base URL other replicas forward requests to, e.g. `http://10.0.0.7:8787`.
    pub address: String,
    /// When it registered (epoch ms).
    pub started_at: i64,
    /// Its last heartbeat (epoch ms): how the others tell it is alive.
    pub heartbeat_at: i64,
}

/// What replicas sharing one store need from it: who is alive, who owns which session and
/// run, and the queue's shared length. Only a shared store (PostgreSQL) provides it.
pub trait Cluster: Send + Sync {
    /// This process's replica id: runs it stores are recorded as its own.
    fn replica_id(&self) -> &str;
    /// Registers this replica or refreshes its heartbeat.
    fn heartbeat(&self, address: &str, now: i64) -> StoreResult<()>;
    /// Unregisters this replica (a clean shutdown): its sessions are gone at once.
    fn leave(&self) -> StoreResult<()>;
    /// A replica whose heartbeat is not older than `alive_since`.
    fn live_replica(&self, id: &str, alive_since: i64) -> StoreResult<Option<ReplicaInfo>>;
    /// Every replica whose heartbeat is not older than `alive_since`.
    fn live_replicas(&self, alive_since: i64) -> StoreResult<Vec<ReplicaInfo>>;
    /// The replica that stored the run first (the one executing it).
    fn run_owner(&self, run_id: &str) -> StoreResult<Option<String>>;
    /// Records that this replica holds the session.
    fn session_put(&self, session_id: &str, user_id: &str, now: i64) -> StoreResult<()>;
    /// The replica holding the session.
    fn session_owner(&self, session_id: &str) -> StoreResult<Option<String>>;
    /// The replica holding the session and the user it belongs to.
    fn session_holder(&self, session_id: &str) -> StoreResult<Option<(String, String)>>;
    /// Forgets the session (it was destroyed or expired).
    fn session_delete(&self, session_id: &str) -> StoreResult<()>;
    /// Makes this replica the holder of a session nobody live holds (its holder died, left,
    /// or hibernated it), as one step: two replicas waking it at once cannot both win.
    /// `Err(owner)`: a live replica holds it.
    fn session_claim(
        &self,
        session_id: &str,
        user_id: &str,
        alive_since: i64,
        now: i64,
    ) -> StoreResult<Result<(), String>>;
    /// Unfinished runs of replicas not seen since `alive_since` (or unregistered) end
    /// `failed` with this reason; queue places and sessions of replicas gone for longer than
    /// `forget_before` are dropped. Returns the runs failed.
    fn reap_dead(
        &self,
        alive_since: i64,
        forget_before: i64,
        reason_code: &str,
        message: &str,
        now: i64,
    ) -> StoreResult<usize>;
    /// Takes a place in the queue shared by all replicas unless `max` are waiting. Returns
    /// how many were waiting before, or `None` when the queue is full.
    fn queue_enter(&self, run_id: &str, max: usize, now: i64) -> StoreResult<Option<usize>>;
    /// Gives up the run's place in the shared queue (it started or ended).
    fn queue_leave(&self, run_id: &str) -> StoreResult<()>;
    /// Runs waiting in the shared queue, all replicas together.
    fn queue_len(&self) -> StoreResult<usize>;
}

/// Where runs, artifact lists, idempotency entries and audit events are kept; one
/// implementation per backend, each passing [`testsuite`].
pub trait Store: Send + Sync + 'static {
    /// `memory`, `sqlite` or `postgres`, as `/runtimes` reports it.
    fn mode(&self) -> &'static str;
    /// Whether calls do I/O (and so belong on the blocking pool).
    fn blocking(&self) -> bool;
    /// Inserts or replaces.
    fn put_run(&self, run: &RunRecord) -> StoreResult<()>;
    /// The run with this id.
    fn get_run(&self, id: &str) -> StoreResult<Option<RunRecord>>;
    /// At start-up: runs left unfinished by a previous process become `failed` with this
    /// reason. Returns how many.
    fn fail_unfinished(&self, reason_code: &str, message: &str, now: i64) -> StoreResult<usize>;
    /// Finished runs, finished before `cutoff`, that still have artifacts.
    fn runs_with_artifacts_before(&self, cutoff: i64) -> StoreResult<Vec<RunRecord>>;
    /// Deletes the records of finished runs that finished before `cutoff`, the oldest first
    /// and at most `limit` of them (so one sweep never holds the store long), and returns
    /// them: their artifacts on disk go with them (`SANDBOX_RUN_RETENTION_DAYS`).
    fn runs_purge(&self, cutoff: i64, limit: usize) -> StoreResult<Vec<RunRecord>>;
    /// Bytes of unexpired artifacts a user holds.
    fn user_artifact_bytes(&self, user_id: &str) -> StoreResult<u64>;
    /// The entry of this key, if any (expired or not).
    fn idem_get(&self, endpoint: &str, user_id: &str, key: &str) -> StoreResult<Option<IdemEntry>>;
    /// Inserts or replaces.
    fn idem_put(&self, entry: &IdemEntry) -> StoreResult<()>;
    /// Forgets entries created before `cutoff`.
    fn idem_purge(&self, cutoff: i64) -> StoreResult<usize>;
    /// Claims a key for the request about to create its object, atomically (replicas
    /// sharing the store race here): stores `claim` (an [`IdemEntry::is_pending`] entry)
    /// unless the key has an entry created at or after `expired_before`, or a pending one
    /// created at or after `stale_before` (a claim whose holder died). `None`: the caller
    /// holds the key and must [`Store::idem_put`] the answer or [`Store::idem_release`] it;
    /// else the entry that holds it.
    fn idem_claim(
        &self,
        claim: &IdemEntry,
        expired_before: i64,
        stale_before: i64,
    ) -> StoreResult<Option<IdemEntry>>;
    /// Drops the pending claim of a request that created nothing.
    fn idem_release(&self, endpoint: &str, user_id: &str, key: &str) -> StoreResult<()>;
    /// Every run (the admin API filters and pages them).
    fn list_runs(&self) -> StoreResult<Vec<RunRecord>>;
    /// Every idempotency entry.
    fn list_idempotency(&self) -> StoreResult<Vec<IdemEntry>>;
    /// What the quotas of `user_id` see at `now` (see [`UserUsage`]). The default reads every
    /// run; stores override it with a query.
    fn user_usage(
        &self,
        user_id: &str,
        minute_from: i64,
        day_from: i64,
        now: i64,
    ) -> StoreResult<UserUsage> {
        let from = minute_from.min(day_from);
        Ok(fold_usage(
            &self.list_runs()?,
            user_id,
            from,
            minute_from,
            day_from,
            now,
        ))
    }
    /// Stores a new run unless its user's usage at `now` (without it) leaves no room under
    /// `limits`, as one step: replicas admitting the same user at the same instant are
    /// serialized, so none slips past a limit. Returns the usage seen and whether the run
    /// was stored. The default suits a store only this process uses (whose callers admit
    /// one user at a time).
    fn admit_run(
        &self,
        run: &RunRecord,
        limits: &UserLimits,
        minute_from: i64,
        day_from: i64,
        now: i64,
    ) -> StoreResult<(UserUsage, bool)> {
        let (u, ok) = limits.check(run, minute_from, day_from, |from| {
            let runs = self.list_runs()?;
            Ok(fold_usage(
                &runs,
                &run.user_id,
                from,
                minute_from,
                day_from,
                now,
            ))
        })?;
        if ok {
            self.put_run(run)?;
        }
        Ok((u, ok))
    }
    /// Appends an audit event. Stores that keep none say so (the event still goes to the log
    /// sink).
    fn put_audit(&self, _event: &AuditEvent) -> StoreResult<()> {
        Err(StoreError(format!(
            "the {} store does not keep audit events",
            self.mode()
        )))
    }
    /// Audit events matching `q` in the order they were appended, and how many match.
    fn list_audit(&self, _q: &AuditQuery) -> StoreResult<(Vec<AuditEvent>, usize)> {
        Ok((Vec::new(), 0))
    }
    /// Forgets audit events older than `cutoff` (the retention).
    fn audit_purge(&self, _cutoff: i64) -> StoreResult<usize> {
        Ok(0)
    }
    /// One page of runs for the admin list; SQL stores answer it from their indexes.
    fn query_runs(&self, q: &RunQuery) -> StoreResult<RunPage> {
        Ok(q.apply(self.list_runs()?))
    }
    /// Which of these chunks the store does not hold: a save sends only those.
    fn chunks_missing(&self, hashes: &[String]) -> StoreResult<Vec<String>>;
    /// Writes a session's checkpoint in one transaction, replacing its previous one: stores
    /// `chunks` (hash, zstd-compressed bytes) that are new, counts the checkpoint as a user
    /// of each chunk it lists and forgets the chunks only the previous one used. When a chunk
    /// it lists is neither given nor stored (another save forgot it meanwhile), nothing is
    /// written and those hashes are returned: the caller sends them and saves again.
    fn session_save(
        &self,
        saved: &SavedSession,
        chunks: &[(String, Vec<u8>)],
    ) -> StoreResult<Vec<String>>;
    /// The checkpoint of a session, if any.
    fn session_saved(&self, session_id: &str) -> StoreResult<Option<SavedSession>>;
    /// The compressed bytes of these chunks, those the store holds.
    fn chunks_get(&self, hashes: &[String]) -> StoreResult<Vec<(String, Vec<u8>)>>;
    /// Forgets a session's checkpoint and the chunks nothing else uses; whether there was one.
    fn session_forget(&self, session_id: &str) -> StoreResult<bool>;
    /// Every checkpoint, of one user or of all, oldest first (the lists of sessions).
    fn saved_sessions(&self, user_id: Option<&str>) -> StoreResult<Vec<SavedSession>>;
    /// Ids of the saved states whose id starts with `prefix` (a session's snapshots and fork
    /// point extend its id).
    fn saved_ids_with_prefix(&self, prefix: &str) -> StoreResult<Vec<String>>;
    /// Sessions whose checkpoint's TTL ended at or before `now`.
    fn saved_expired(&self, now: i64) -> StoreResult<Vec<String>>;
    /// How many chunks and compressed bytes the store holds for checkpoints.
    fn chunk_totals(&self) -> StoreResult<(u64, u64)>;
    /// The replica coordination of a shared store; `None` for a single process's store.
    fn cluster(&self) -> Option<&dyn Cluster> {
        None
    }
}

/// Whether an event passes the query's filters (paging aside).
pub fn audit_matches(q: &AuditQuery, e: &AuditEvent) -> bool {
    q.user_id.as_ref().is_none_or(|u| &e.user_id == u)
        && q.run_id
            .as_ref()
            .is_none_or(|r| e.run_id.as_ref() == Some(r))
        && q.session_id
            .as_ref()
            .is_none_or(|s| e.session_id.as_ref() == Some(s))
        && q.event.as_ref().is_none_or(|ev| &e.event == ev)
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
    pub use super::testsuite::{exercise, sample_run};
}
