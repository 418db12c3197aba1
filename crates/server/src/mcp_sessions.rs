//! MCP sessions are the service's sessions: `/mcp`'s `session_create` makes a wasm session of
//! the caller's user exactly as `POST /sessions` does (same ids, `max_sessions`, TTL, audit
//! with `source: mcp`), so the REST API and the admin API list it, REST runs and uploads reach
//! it, and it is checkpointed, hibernated and woken like any other. The MCP tools hold it
//! through [`wasmsand_mcp::SessionHost`]: a call that changes it holds the session's lock
//! (after a REST run in progress) and checkpoints it before it answers.
//!
//! The caller's user is the authenticated principal, else the service's one user
//! (`SANDBOX_USER_ID`), as for the REST API. Only wasm sessions are MCP's: a Docker session's
//! id is unknown to the tools, which run in this process's sandboxes.

use std::sync::atomic::Ordering;
use std::sync::{Arc, Weak};
use std::time::Duration;

use wasmsand_mcp::{
    Caller, DiffBase, HostCaps, HostFuture, Merged, SessionHost, SessionLease, SessionSummary,
    merge_conflict, no_parent, not_a_fork, parent_gone, unknown_snapshot,
};

use crate::App;
use crate::error::ApiError;
use crate::sessions::{NewSession, Session};
use crate::util::{new_id, parse_iso};

/// The source MCP's sessions are audited with.
const SOURCE: &str = "mcp";

#[derive(Debug)]
pub(crate) struct McpSessions {
    app: Weak<App>,
}

impl McpSessions {
    pub(crate) fn new(app: &Arc<App>) -> McpSessions {
        McpSessions {
            app: Arc::downgrade(app),
        }
    }

    fn app(&self) -> Result<Arc<App>, String> {
        self.app
            .upgrade()
            .ok_or_else(|| "the service is stopping".to_string())
    }
}

fn user_of(app: &App, caller: &Caller) -> String {
    caller
        .principal
        .clone()
        .unwrap_or_else(|| app.config.user_id.clone())
}

/// An API error as a tool's answer: its code first, as the REST API would say it.
fn text(e: ApiError) -> String {
    format!("{}: {}", e.code, e.message)
}

fn unknown(id: &str, ttl_sec: u64) -> String {
    format!(
        "unknown session_id {id:?}: no session of this client has that id (it was never \
         created, was destroyed, or passed its {ttl_sec} s TTL). Create one with \
         session_create, or call sandbox_run without session_id for a one-off sandbox."
    )
}

/// The caller's wasm session `id`, woken if it sleeps in the store.
async fn session_of(app: &Arc<App>, caller: &Caller, id: &str) -> Result<Arc<Session>, String> {
    let s = app.session(id).await.map_err(text)?;
    match s {
        Some(s) if s.owner == user_of(app, caller) && s.runtime.hibernates() => Ok(s),
        _ => Err(unknown(id, app.config.session_default_ttl_sec)),
    }
}

fn lease(s: Arc<Session>, hold: impl Send + Sync + 'static) -> Result<SessionLease, String> {
    let sb = s
        .boxed
        .sandbox()
        .cloned()
        .ok_or_else(|| format!("session {} has no wasm sandbox", s.id))?;
    Ok(SessionLease::new(s.id.clone(), sb, (s, hold)))
}

impl SessionHost for McpSessions {
    fn create<'a>(
        &'a self,
        caller: &'a Caller,
        limits: wasmsand::Limits,
    ) -> HostFuture<'a, Result<SessionLease, String>> {
        Box::pin(async move {
            let app = self.app()?;
            if app.is_shutting_down() {
                return Err("unavailable: the service is shutting down".into());
            }
            let (runtime, image) = crate::runtime::pick(&app, Some("wasm"), None)
                .await
                .map_err(text)?;
            let policy = app.policy();
            let network =
                crate::validate::check_network(&policy.config, runtime.as_ref(), None, None)
                    .map_err(text)?;
            let memory_mb = limits.memory_bytes.div_ceil(crate::config::MIB).max(1);
            let (cpu, memory_mb) = runtime.normalize(None, Some(memory_mb)).map_err(text)?;
            let user = user_of(&app, caller);
            let id = new_id();
            let boxed = runtime
                .create_box(crate::runtime::BoxSpec {
                    image: image.clone(),
                    memory_mb,
                    cpu,
                    env: Default::default(),
                    owner: user.clone(),
                    session: Some(id.clone()),
                    run: None,
                    network: network.allowlist.clone(),
                    limits: Some(limits),
                })
                .await
                .map_err(|e| format!("{}: {}", e.reason_code(), e.message()))?;
            let session = Session::new(
                NewSession {
                    id,
                    boxed,
                    runtime,
                    base_image: image.canonical,
                    spec_version: app
                        .config
                        .supported_spec_versions
                        .first()
                        .cloned()
                        .unwrap_or_else(|| "1.0".into()),
                    ttl_sec: app.config.session_default_ttl_sec,
                    env: Default::default(),
                    labels: [("source".to_string(), SOURCE.to_string())].into(),
                    cpu,
                    memory_mb,
                    timeout_sec: limits.timeout_ms.div_ceil(1000).max(1),
                    network_policy: network.policy,
                    egress: network.allowlist,
                    owner: user,
                    limits: Some(limits),
                    policy,
                },
                app.clock.now_ms(),
            );
            let s = crate::api::sessions::install(&app, session, SOURCE, None)
                .await
                .map_err(text)?;
            crate::replica::record_session_here(&app, &s.id, &s.owner).await;
            let (s, guard) = app.lock_session(s).await.map_err(text)?;
            lease(s, guard)
        })
    }

    fn fork<'a>(
        &'a self,
        caller: &'a Caller,
        id: &'a str,
    ) -> HostFuture<'a, Result<String, String>> {
        Box::pin(async move {
            let app = self.app()?;
            let parent = session_of(&app, caller, id).await?;
            let ttl = app.config.session_default_ttl_sec;
            let fork = crate::api::forks::fork(&app, parent, ttl, None, SOURCE, None)
                .await
                .map_err(text)?;
            Ok(fork.id.clone())
        })
    }

    fn open<'a>(
        &'a self,
        caller: &'a Caller,
        id: &'a str,
        exclusive: bool,
    ) -> HostFuture<'a, Result<SessionLease, String>> {
        Box::pin(async move {
            let app = self.app()?;
            let s = session_of(&app, caller, id).await?;
            if exclusive {
                let (s, guard) = app.lock_session(s).await.map_err(text)?;
                lease(s, guard)
            } else {
                lease(s, ())
            }
        })
    }

    fn changed<'a>(&'a self, lease: &'a SessionLease) -> HostFuture<'a, ()> {
        Box::pin(async move {
            let Ok(app) = self.app() else { return };
            // The lease holds the session's lock, so it is live here and not hibernating.
            if let Some(s) = app.session_live(&lease.id) {
                app.checkpoint(&s).await;
            }
        })
    }

    fn destroy<'a>(
        &'a self,
        caller: &'a Caller,
        id: &'a str,
    ) -> HostFuture<'a, Result<(), String>> {
        Box::pin(async move {
            let app = self.app()?;
            session_of(&app, caller, id).await?;
            app.delete_session(id).await.map_err(text)?;
            Ok(())
        })
    }

    fn list<'a>(
        &'a self,
        caller: &'a Caller,
    ) -> HostFuture<'a, Result<Vec<SessionSummary>, String>> {
        Box::pin(async move {
            let app = self.app()?;
            let user = user_of(&app, caller);
            let items = app.list_sessions(Some(&user)).await.map_err(text)?;
            let u = user.clone();
            let saved_at: std::collections::HashMap<String, i64> =
                crate::store::call(&app.store, move |st| st.saved_sessions(Some(&u)))
                    .await
                    .map_err(|e| e.to_string())?
                    .into_iter()
                    .map(|x| (x.session_id, x.saved_at))
                    .collect();
            let now = app.clock.now_ms();
            let since = |t: i64| now.saturating_sub(t).max(0) as u64;
            Ok(items
                .into_iter()
                .filter(|i| i.session.runtime == "wasm")
                .map(|i| {
                    let id = i.session.session_id;
                    let created = parse_iso(&i.session.created_at).unwrap_or(now);
                    // Idle since its last use when live, since its last checkpoint (its last
                    // change) when asleep.
                    let last = app
                        .live_session_last_used(&id)
                        .or_else(|| saved_at.get(&id).copied())
                        .unwrap_or(created);
                    SessionSummary {
                        session_id: id,
                        parent_session_id: i.session.forked_from,
                        age_ms: since(created),
                        idle_ms: since(last),
                    }
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
            let app = self.app()?;
            let s = session_of(&app, caller, id).await?;
            let view = crate::api::forks::snapshot(&app, s, None)
                .await
                .map_err(text)?;
            Ok(view.snapshot_id)
        })
    }

    fn restore<'a>(
        &'a self,
        caller: &'a Caller,
        id: &'a str,
        snapshot_id: &'a str,
    ) -> HostFuture<'a, Result<(), String>> {
        Box::pin(async move {
            let app = self.app()?;
            let s = session_of(&app, caller, id).await?;
            match crate::api::forks::restore(&app, s, snapshot_id).await {
                Ok(_) => Ok(()),
                Err(e) if e.status == axum::http::StatusCode::NOT_FOUND => {
                    Err(unknown_snapshot(snapshot_id, id))
                }
                Err(e) => Err(text(e)),
            }
        })
    }

    fn changes<'a>(
        &'a self,
        caller: &'a Caller,
        id: &'a str,
        base: &'a DiffBase,
        path: Option<&'a str>,
    ) -> HostFuture<'a, Result<wasmsand::Changes, String>> {
        Box::pin(async move {
            let app = self.app()?;
            let s = session_of(&app, caller, id).await?;
            let path = path.map(str::to_string);
            // A fork point and a snapshot are kept in the store (they outlive sleep and
            // restarts), so the comparison is with what the store holds.
            let key = match base {
                DiffBase::Mount => {
                    let sb = s
                        .boxed
                        .sandbox()
                        .cloned()
                        .ok_or_else(|| format!("session {id} has no wasm sandbox"))?;
                    let opts = wasmsand::ChangesOptions {
                        since: wasmsand::ChangesSince::Mount,
                        path,
                    };
                    return tokio::task::spawn_blocking(move || sb.changes(&opts))
                        .await
                        .map_err(|e| format!("internal error: {e}"))?
                        .map_err(|e| e.to_string());
                }
                DiffBase::Parent if s.forked_from.is_none() => {
                    return Err(no_parent(id, "snapshot"));
                }
                DiffBase::Parent => crate::hibernate::fork_point_id(id),
                DiffBase::Snapshot(sid) => crate::hibernate::snapshot_key(id, sid),
            };
            match crate::api::forks::changes_since_saved(&app, s, &key, path)
                .await
                .map_err(text)?
            {
                Some(c) => Ok(c),
                None => match base {
                    DiffBase::Snapshot(sid) => Err(unknown_snapshot(sid, id)),
                    _ => Err(format!(
                        "internal: the fork point of session {id} is missing from the store"
                    )),
                },
            }
        })
    }

    fn merge<'a>(
        &'a self,
        caller: &'a Caller,
        id: &'a str,
        opts: wasmsand::MergeOptions,
    ) -> HostFuture<'a, Result<Merged, String>> {
        Box::pin(async move {
            let app = self.app()?;
            let fork = session_of(&app, caller, id).await?;
            let Some(parent_id) = fork.forked_from.clone() else {
                return Err(not_a_fork(id));
            };
            let parent = session_of(&app, caller, &parent_id)
                .await
                .map_err(|_| parent_gone(id, &parent_id))?;
            match crate::api::forks::merge(&app, parent, fork, opts)
                .await
                .map_err(text)?
            {
                Ok(result) => Ok(Merged {
                    parent_session_id: parent_id,
                    result,
                }),
                Err(conflicts) => Err(merge_conflict(id, &parent_id, &conflicts)),
            }
        })
    }

    fn caps(&self) -> HostCaps {
        let (max, ttl) = self
            .app
            .upgrade()
            .map(|a| {
                (
                    a.policy().config.max_sessions,
                    a.config.session_default_ttl_sec,
                )
            })
            .unwrap_or_default();
        HostCaps {
            max_sessions: max as u64,
            idle_ttl: Duration::from_secs(ttl),
        }
    }
}

impl App {
    /// When a live session was last used (epoch ms), without marking it used.
    pub(crate) fn live_session_last_used(&self, id: &str) -> Option<i64> {
        self.sessions
            .lock()
            .get(id)
            .map(|s| s.last_used.load(Ordering::SeqCst))
    }
}
