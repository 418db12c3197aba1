//! Where MCP sessions live. An MCP server alone keeps them in its own table ([`LocalHost`],
//! over `crate::store`); a server that embeds MCP (the HTTP service) hands its own sessions
//! out instead through [`SessionHost`], so that a session made by `session_create` is the
//! embedding server's session: the same id in its REST API, its quotas and TTL, its
//! checkpoints and hibernation.
//!
//! The tools see a session only as a [`SessionLease`]: a sandbox held for the length of one
//! tool call, exclusively (the session's lock, after a run in progress) when the call changes
//! it. A call that changed it tells the host ([`SessionHost::changed`]) before it answers.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;

use wasmsand::{
    Changes, ChangesOptions, ChangesSince, Limits, MergeConflict, MergeOptions, MergeResult,
    Sandbox, SandboxError, SnapshotId,
};

use crate::store::Store;

/// A boxed future of a host: the trait is used as an object.
pub type HostFuture<'a, T> = Pin<Box<dyn Future<Output = T> + Send + 'a>>;

/// Who calls: the client's identity for MCP's own table, and the authenticated user the
/// embedding server knows (`None` for stdio, or HTTP without authentication).
#[derive(Debug, Clone)]
pub struct Caller {
    /// Whom this server's own table files sessions under (the client's identity).
    pub owner: String,
    /// The embedding server's authenticated user, if any.
    pub principal: Option<String>,
}

/// A session held by one tool call; dropping it releases the session (and its lock).
pub struct SessionLease {
    /// The session's id.
    pub id: String,
    /// Its sandbox, for the length of the call.
    pub sandbox: Arc<Sandbox>,
    _hold: Box<dyn Send + Sync>,
}

impl SessionLease {
    /// `hold` is whatever keeps the session in use (and locked) until the lease drops.
    pub fn new(id: String, sandbox: Arc<Sandbox>, hold: impl Send + Sync + 'static) -> Self {
        SessionLease {
            id,
            sandbox,
            _hold: Box::new(hold),
        }
    }
}

/// One line of `session_list`.
#[derive(Debug, Clone)]
pub struct SessionSummary {
    /// Its id.
    pub session_id: String,
    /// The session it was forked from.
    pub parent_session_id: Option<String>,
    /// Since it was made.
    pub age_ms: u64,
    /// Since it was last used.
    pub idle_ms: u64,
}

/// What `sandbox_diff` compares a session with.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum DiffBase {
    /// The host folder mounted in it, as it was mounted.
    Mount,
    /// The session it was forked from, as it was at the fork (or at the last commit).
    Parent,
    /// One of its snapshots (an id [`SessionHost::snapshot`] returned).
    Snapshot(String),
}

/// A fork merged into the session it was forked from.
#[derive(Debug, Clone)]
pub struct Merged {
    /// The session merged into.
    pub parent_session_id: String,
    /// What was applied there.
    pub result: MergeResult,
}

/// The answer to a commit both sides changed differently: every path, with what each did.
pub fn merge_conflict(preview: &str, parent: &str, conflicts: &[MergeConflict]) -> String {
    let list: Vec<String> = conflicts
        .iter()
        .map(|c| {
            format!(
                "{} (session: {}, preview: {})",
                c.path,
                c.ours.as_str(),
                c.theirs.as_str()
            )
        })
        .collect();
    format!(
        "conflict: session {parent} and preview {preview} both changed {} path(s) since the \
         preview began, differently; nothing was committed: {}. Discard the preview \
         (sandbox_discard) and redo it from the session as it is now, or change the session \
         so the paths agree and commit again.",
        conflicts.len(),
        list.join(", ")
    )
}

/// What a host tells `session_list` of its caps.
#[derive(Debug, Clone, Copy)]
pub struct HostCaps {
    /// Sessions one caller may hold.
    pub max_sessions: u64,
    /// How long an idle session lives (for the embedding service: its TTL).
    pub idle_ttl: Duration,
}

/// Keeps MCP sessions. Errors are the tool's answer, as text an agent can act on.
pub trait SessionHost: Send + Sync + std::fmt::Debug {
    /// A new session whose sandbox has `limits` (already clamped to the server's ceiling),
    /// leased exclusively to the caller.
    fn create<'a>(
        &'a self,
        caller: &'a Caller,
        limits: Limits,
    ) -> HostFuture<'a, Result<SessionLease, String>>;
    /// A copy of session `id` (files, variables, cwd) as a new session; its id.
    fn fork<'a>(
        &'a self,
        caller: &'a Caller,
        id: &'a str,
    ) -> HostFuture<'a, Result<String, String>>;
    /// The caller's session `id` (another caller's is unknown, exactly like one that never
    /// existed); `exclusive` waits for the session's lock.
    fn open<'a>(
        &'a self,
        caller: &'a Caller,
        id: &'a str,
        exclusive: bool,
    ) -> HostFuture<'a, Result<SessionLease, String>>;
    /// Called under an exclusive lease after the call changed the session, before it answers.
    fn changed<'a>(&'a self, lease: &'a SessionLease) -> HostFuture<'a, ()>;
    /// Ends the session and everything in it.
    fn destroy<'a>(&'a self, caller: &'a Caller, id: &'a str)
    -> HostFuture<'a, Result<(), String>>;
    /// The caller's sessions, oldest first.
    fn list<'a>(
        &'a self,
        caller: &'a Caller,
    ) -> HostFuture<'a, Result<Vec<SessionSummary>, String>>;
    /// Records files and shell state; the id `restore` takes.
    fn snapshot<'a>(
        &'a self,
        caller: &'a Caller,
        id: &'a str,
    ) -> HostFuture<'a, Result<String, String>>;
    /// Puts the session back as `snapshot_id` holds it.
    fn restore<'a>(
        &'a self,
        caller: &'a Caller,
        id: &'a str,
        snapshot_id: &'a str,
    ) -> HostFuture<'a, Result<(), String>>;
    /// What session `id` changed against `base`; `path` narrows it to a directory (relative:
    /// under the home directory).
    fn changes<'a>(
        &'a self,
        caller: &'a Caller,
        id: &'a str,
        base: &'a DiffBase,
        path: Option<&'a str>,
    ) -> HostFuture<'a, Result<Changes, String>>;
    /// Brings what fork `id` changed since it was forked (or last merged) into the session it
    /// was forked from, three-way; a conflict applies nothing. The fork stays.
    fn merge<'a>(
        &'a self,
        caller: &'a Caller,
        id: &'a str,
        opts: MergeOptions,
    ) -> HostFuture<'a, Result<Merged, String>>;
    /// What `session_list` reports of the caps.
    fn caps(&self) -> HostCaps;
}

/// Makes an MCP sandbox with given limits (the server's env, cache, network and mounted
/// folders around them).
pub(crate) type SandboxFactory = Arc<dyn Fn(Limits) -> Result<Sandbox, String> + Send + Sync>;

/// An MCP server's own sessions: in memory, ended by an idle TTL.
pub(crate) struct LocalHost {
    pub store: Arc<Store>,
    pub factory: SandboxFactory,
}

impl std::fmt::Debug for LocalHost {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LocalHost")
            .field("sessions", &self.store.len())
            .finish()
    }
}

/// Runs blocking sandbox work off the async threads.
async fn blocking<T: Send + 'static>(f: impl FnOnce() -> T + Send + 'static) -> Result<T, String> {
    tokio::task::spawn_blocking(f)
        .await
        .map_err(|e| format!("internal error: {e}"))
}

impl SessionHost for LocalHost {
    fn create<'a>(
        &'a self,
        caller: &'a Caller,
        limits: Limits,
    ) -> HostFuture<'a, Result<SessionLease, String>> {
        Box::pin(async move {
            let factory = self.factory.clone();
            let sb = blocking(move || factory(limits)).await??;
            let lease = self.store.insert(&caller.owner, None, sb)?;
            let run_lock = lease.run_lock.clone().lock_owned().await;
            Ok(SessionLease::new(
                lease.id.clone(),
                lease.sandbox.clone(),
                (lease, run_lock),
            ))
        })
    }

    fn fork<'a>(
        &'a self,
        caller: &'a Caller,
        id: &'a str,
    ) -> HostFuture<'a, Result<String, String>> {
        Box::pin(async move {
            let parent = self.store.get(&caller.owner, id)?;
            let sb = parent.sandbox.clone();
            let child = blocking(move || sb.fork().map_err(|e| e.to_string())).await??;
            let lease = self
                .store
                .insert(&caller.owner, Some(parent.id.clone()), child)?;
            Ok(lease.id.clone())
        })
    }

    fn open<'a>(
        &'a self,
        caller: &'a Caller,
        id: &'a str,
        exclusive: bool,
    ) -> HostFuture<'a, Result<SessionLease, String>> {
        Box::pin(async move {
            let lease = self.store.get(&caller.owner, id)?;
            let lock = if exclusive {
                Some(lease.run_lock.clone().lock_owned().await)
            } else {
                None
            };
            Ok(SessionLease::new(
                lease.id.clone(),
                lease.sandbox.clone(),
                (lease, lock),
            ))
        })
    }

    fn changed<'a>(&'a self, _lease: &'a SessionLease) -> HostFuture<'a, ()> {
        // Nothing outlives this process's memory: there is nothing to write.
        Box::pin(async {})
    }

    fn destroy<'a>(
        &'a self,
        caller: &'a Caller,
        id: &'a str,
    ) -> HostFuture<'a, Result<(), String>> {
        let store = self.store.clone();
        let (owner, id) = (caller.owner.clone(), id.to_string());
        Box::pin(async move { blocking(move || store.remove(&owner, &id)).await? })
    }

    fn list<'a>(
        &'a self,
        caller: &'a Caller,
    ) -> HostFuture<'a, Result<Vec<SessionSummary>, String>> {
        Box::pin(async move {
            Ok(self
                .store
                .list(&caller.owner)
                .iter()
                .map(|s| SessionSummary {
                    session_id: s.id.clone(),
                    parent_session_id: s.parent.clone(),
                    age_ms: s.age().as_millis() as u64,
                    idle_ms: s.idle().as_millis() as u64,
                })
                .collect())
        })
    }

    fn snapshot<'a>(
        &'a self,
        caller: &'a Caller,
        id: &'a str,
    ) -> HostFuture<'a, Result<String, String>> {
        Box::pin(async move {
            let lease = self.store.get(&caller.owner, id)?;
            let sb = lease.sandbox.clone();
            let id = blocking(move || sb.snapshot().map_err(|e| e.to_string())).await??;
            Ok(id.to_string())
        })
    }

    fn restore<'a>(
        &'a self,
        caller: &'a Caller,
        id: &'a str,
        snapshot_id: &'a str,
    ) -> HostFuture<'a, Result<(), String>> {
        Box::pin(async move {
            let lease = self.store.get(&caller.owner, id)?;
            let unknown = || unknown_snapshot(snapshot_id, id);
            let sid: SnapshotId = snapshot_id.parse().map_err(|_| unknown())?;
            let sb = lease.sandbox.clone();
            blocking(move || sb.restore(sid))
                .await?
                .map_err(|e| match e {
                    SandboxError::UnknownSnapshot(_) => unknown(),
                    other => other.to_string(),
                })
        })
    }

    fn changes<'a>(
        &'a self,
        caller: &'a Caller,
        id: &'a str,
        base: &'a DiffBase,
        path: Option<&'a str>,
    ) -> HostFuture<'a, Result<Changes, String>> {
        Box::pin(async move {
            let lease = self.store.get(&caller.owner, id)?;
            let since = match base {
                DiffBase::Mount => ChangesSince::Mount,
                DiffBase::Parent => ChangesSince::Parent,
                DiffBase::Snapshot(s) => {
                    ChangesSince::Snapshot(s.parse().map_err(|_| unknown_snapshot(s, id))?)
                }
            };
            let opts = ChangesOptions {
                since,
                path: path.map(str::to_string),
            };
            let sb = lease.sandbox.clone();
            blocking(move || sb.changes(&opts))
                .await?
                .map_err(|e| match (e, base) {
                    (SandboxError::UnknownSnapshot(_), DiffBase::Snapshot(s)) => {
                        unknown_snapshot(s, id)
                    }
                    (SandboxError::Invalid(m), DiffBase::Parent) if m.contains("not a fork") => {
                        no_parent(id, "mount or snapshot")
                    }
                    (e, _) => e.to_string(),
                })
        })
    }

    fn merge<'a>(
        &'a self,
        caller: &'a Caller,
        id: &'a str,
        opts: MergeOptions,
    ) -> HostFuture<'a, Result<Merged, String>> {
        Box::pin(async move {
            let fork = self.store.get(&caller.owner, id)?;
            let Some(parent_id) = fork.parent.clone() else {
                return Err(not_a_fork(id));
            };
            let parent = self
                .store
                .get(&caller.owner, &parent_id)
                .map_err(|_| parent_gone(id, &parent_id))?;
            // Neither runs while the merge reads one and writes the other; the locks are taken
            // in id order so that merges both ways cannot deadlock.
            let (first, second) = if parent.id < fork.id {
                (&parent, &fork)
            } else {
                (&fork, &parent)
            };
            let _g1 = first.run_lock.clone().lock_owned().await;
            let _g2 = second.run_lock.clone().lock_owned().await;
            let (psb, fsb) = (parent.sandbox.clone(), fork.sandbox.clone());
            let result = blocking(move || psb.merge(&fsb, opts))
                .await?
                .map_err(|e| match e {
                    SandboxError::MergeConflict(c) => merge_conflict(id, &parent_id, &c),
                    e => e.to_string(),
                })?;
            Ok(Merged {
                parent_session_id: parent_id.clone(),
                result,
            })
        })
    }

    fn caps(&self) -> HostCaps {
        HostCaps {
            max_sessions: self.store.caps.per_owner as u64,
            idle_ttl: self.store.caps.idle_ttl,
        }
    }
}

/// The answer to committing a session that was not forked from another.
pub fn not_a_fork(id: &str) -> String {
    format!(
        "session {id} was made by session_create, not forked: only a preview (sandbox_run with \
         preview, sandbox_best_of) or a session_fork can be committed into the session it came \
         from"
    )
}

/// The answer to a diff against the parent of a session that has none; `since` names what it
/// can be compared with instead.
pub fn no_parent(id: &str, since: &str) -> String {
    format!(
        "session {id} was made by session_create, not forked: it has no parent to compare with \
         (since: {since})"
    )
}

/// The answer to committing a fork whose parent session has ended.
pub fn parent_gone(id: &str, parent_id: &str) -> String {
    format!(
        "session {parent_id}, which {id} was forked from, no longer exists: there is nothing to \
         commit into"
    )
}

/// The answer to a snapshot id this session does not have.
pub fn unknown_snapshot(snapshot_id: &str, session_id: &str) -> String {
    format!(
        "unknown snapshot_id {snapshot_id:?} in session {session_id}: use an id snapshot_create \
         returned for this session"
    )
}
