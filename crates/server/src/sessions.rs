//! Sessions: a sandbox (a wasm sandbox or a container, see `crate::runtime`) kept between
//! runs, with its workspace, until its TTL or a DELETE. A live session is in this process's
//! memory; one of a runtime that hibernates is also checkpointed to the store and may be
//! asleep there (`crate::hibernate`), and [`App::session`] wakes it. Others end with their
//! process (the docker runtime's reaper removes their containers).

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicI64, Ordering};

use crate::App;
use crate::runtime::{Runtime, SandboxBox};
use crate::util::iso;
use crate::views::{ResourcesView, SessionView};

pub struct Session {
    pub id: String,
    /// Its sandbox, made by its runtime.
    pub boxed: Arc<dyn SandboxBox>,
    pub runtime: Arc<dyn Runtime>,
    pub runtime_version: String,
    pub base_image: String,
    pub image_digest: String,
    pub spec_version: String,
    pub created_at: i64,
    pub expires_at: AtomicI64,
    pub env: BTreeMap<String, String>,
    pub labels: BTreeMap<String, String>,
    pub cpu: f64,
    pub memory_mb: u64,
    /// Default `timeout_sec` of the session's runs.
    pub timeout_sec: u64,
    pub network_policy: String,
    /// The effective egress allowlist of `network_policy: allowlist`.
    pub egress: Option<wasmsand::egress::EgressPolicy>,
    /// Runs of one session execute one at a time, in submission order; uploads wait too.
    pub lock: Arc<tokio::sync::Mutex<()>>,
    /// The user that created it: nobody else sees it.
    pub owner: String,
    /// The service's side of its background processes (their stream frames).
    pub processes: crate::process_table::ProcessTable,
    /// When a request last used it (epoch ms): what hibernation counts idle time from.
    pub last_used: AtomicI64,
    /// Set (under `lock`) when its sandbox went to the store and this object was dropped
    /// from the map: a request still holding it looks the session up again, which wakes it.
    pub hibernated: AtomicBool,
    /// Its checkpoints, one at a time (`crate::hibernate`).
    pub saving: tokio::sync::Mutex<Saved>,
    /// The session it was forked from (`crate::api::forks`).
    pub forked_from: Option<String>,
    /// Its sandbox's own limits instead of the server's (an MCP session's, asked by
    /// `session_create`).
    pub limits: Option<wasmsand::Limits>,
    /// The policy it was made with, kept when `/admin/policies` changes the server's: its runs
    /// and processes follow it, and it reports its `policy_hash`.
    pub policy: Arc<crate::policy::Policy>,
}

/// The service's record of a session besides its id, owner and TTL: what its view shows, and
/// what its checkpoint keeps beside its sandbox's state (`crate::hibernate`).
#[derive(Debug, Clone, Serialize, Deserialize)]
pub(crate) struct Meta {
    pub runtime: String,
    pub runtime_version: String,
    pub base_image: String,
    pub image_digest: String,
    pub spec_version: String,
    pub created_at: i64,
    pub env: BTreeMap<String, String>,
    pub labels: BTreeMap<String, String>,
    pub cpu: f64,
    pub memory_mb: u64,
    pub timeout_sec: u64,
    pub network_policy: String,
    pub egress_allowlist: Option<wasmsand::egress::EgressAllowlist>,
    #[serde(default)]
    pub forked_from: Option<String>,
    #[serde(default)]
    pub limits: Option<wasmsand::Limits>,
    /// Its policy's `policy_hash` and live keys (`crate::policy::LIVE_POLICY_KEYS`), so that
    /// it wakes with the policy it was made with; absent in checkpoints of older versions.
    #[serde(default)]
    pub policy_hash: Option<String>,
    #[serde(default)]
    pub policy: Option<serde_json::Map<String, serde_json::Value>>,
}

impl Meta {
    pub(crate) fn of(s: &Session) -> Meta {
        Meta {
            runtime: s.runtime.name().into(),
            runtime_version: s.runtime_version.clone(),
            base_image: s.base_image.clone(),
            image_digest: s.image_digest.clone(),
            spec_version: s.spec_version.clone(),
            created_at: s.created_at,
            env: s.env.clone(),
            labels: s.labels.clone(),
            cpu: s.cpu,
            memory_mb: s.memory_mb,
            timeout_sec: s.timeout_sec,
            network_policy: s.network_policy.clone(),
            egress_allowlist: s.egress.as_ref().map(|e| e.to_allowlist()),
            forked_from: s.forked_from.clone(),
            limits: s.limits,
            policy_hash: Some(s.policy.hash.clone()),
            policy: Some(s.policy.values()),
        }
    }

    /// The session's view (`GET /sessions/{id}`).
    pub(crate) fn into_view(self, id: String, expires_at: i64, policy_hash: &str) -> SessionView {
        SessionView {
            session_id: id,
            expires_at: iso(expires_at),
            created_at: iso(self.created_at),
            runtime: self.runtime,
            runtime_version: self.runtime_version,
            base_image: self.base_image,
            image_digest: self.image_digest,
            policy_hash: policy_hash.into(),
            spec_version: self.spec_version,
            network_policy: self.network_policy,
            egress_allowlist: self.egress_allowlist,
            resources: ResourcesView {
                cpu: self.cpu,
                memory_mb: self.memory_mb,
            },
            timeout_sec: self.timeout_sec,
            env: self.env,
            labels: self.labels,
            forked_from: self.forked_from,
        }
    }
}

/// What a session's last checkpoint wrote, so that an unchanged session is not written again.
#[derive(Default)]
pub struct Saved {
    /// Its chunks, in order.
    pub chunks: Vec<String>,
    /// The TTL it recorded.
    pub expires_at: i64,
}

/// What a new session is made of (`POST /sessions`, MCP's `session_create`).
pub(crate) struct NewSession {
    pub id: String,
    pub boxed: Arc<dyn SandboxBox>,
    pub runtime: Arc<dyn Runtime>,
    pub base_image: String,
    pub spec_version: String,
    pub ttl_sec: u64,
    pub env: BTreeMap<String, String>,
    pub labels: BTreeMap<String, String>,
    pub cpu: f64,
    pub memory_mb: u64,
    pub timeout_sec: u64,
    pub network_policy: String,
    pub egress: Option<wasmsand::egress::EgressPolicy>,
    pub owner: String,
    pub limits: Option<wasmsand::Limits>,
    pub policy: Arc<crate::policy::Policy>,
}

impl Session {
    pub(crate) fn new(n: NewSession, now: i64) -> Session {
        Session {
            id: n.id,
            image_digest: n.boxed.image_digest(),
            boxed: n.boxed,
            runtime_version: n.runtime.version(),
            runtime: n.runtime,
            base_image: n.base_image,
            spec_version: n.spec_version,
            created_at: now,
            expires_at: AtomicI64::new(now + n.ttl_sec as i64 * 1000),
            env: n.env,
            labels: n.labels,
            cpu: n.cpu,
            memory_mb: n.memory_mb,
            timeout_sec: n.timeout_sec,
            network_policy: n.network_policy,
            egress: n.egress,
            lock: Arc::new(tokio::sync::Mutex::new(())),
            owner: n.owner,
            processes: Default::default(),
            last_used: AtomicI64::new(now),
            hibernated: Default::default(),
            saving: Default::default(),
            forked_from: None,
            limits: n.limits,
            policy: n.policy,
        }
    }

    pub fn view(&self) -> SessionView {
        Meta::of(self).into_view(
            self.id.clone(),
            self.expires_at.load(Ordering::SeqCst),
            &self.policy.hash,
        )
    }

    /// A session with this one's settings and owner around another box: a fork (a new id)
    /// or this session with its state replaced (the same id).
    pub fn derive(
        &self,
        id: String,
        boxed: Arc<dyn SandboxBox>,
        now: i64,
        expires_at: i64,
        forked_from: Option<String>,
    ) -> Session {
        Session {
            id,
            image_digest: self.image_digest.clone(),
            boxed,
            runtime: self.runtime.clone(),
            runtime_version: self.runtime_version.clone(),
            base_image: self.base_image.clone(),
            spec_version: self.spec_version.clone(),
            created_at: now,
            expires_at: AtomicI64::new(expires_at),
            env: self.env.clone(),
            labels: self.labels.clone(),
            cpu: self.cpu,
            memory_mb: self.memory_mb,
            timeout_sec: self.timeout_sec,
            network_policy: self.network_policy.clone(),
            egress: self.egress.clone(),
            lock: Arc::new(tokio::sync::Mutex::new(())),
            owner: self.owner.clone(),
            processes: Default::default(),
            last_used: AtomicI64::new(now),
            hibernated: AtomicBool::new(false),
            saving: Default::default(),
            forked_from,
            limits: self.limits,
            policy: self.policy.clone(),
        }
    }

    /// Marks it used now.
    pub fn touch(&self, now: i64) {
        self.last_used.fetch_max(now, Ordering::SeqCst);
    }

    pub fn expired(&self, now: i64) -> bool {
        self.expires_at.load(Ordering::SeqCst) <= now
    }
}

impl App {
    /// The session if it is live in this process (not asleep in the store), marked used.
    pub(crate) fn session_live(&self, id: &str) -> Option<Arc<Session>> {
        let s = self.sessions.lock().get(id).cloned()?;
        let now = self.clock.now_ms();
        if s.expired(now) {
            self.remove_session(id);
            return None;
        }
        s.touch(now);
        Some(s)
    }

    pub(crate) fn insert_session(&self, s: Arc<Session>) -> bool {
        let mut map = self.sessions.lock();
        if map.len() >= self.policy().config.max_sessions {
            return false;
        }
        map.insert(s.id.clone(), s);
        true
    }

    /// Removes a session, live or asleep, and waits until its sandbox is gone (for a
    /// container: removed from the engine) and its checkpoint forgotten, so that a 204 means
    /// nothing of it is left. Whether there was one.
    pub(crate) async fn delete_session(
        self: &Arc<Self>,
        id: &str,
    ) -> Result<bool, crate::error::ApiError> {
        let live = self.sessions.lock().remove(id);
        if let Some(s) = &live {
            s.boxed.destroy().await;
        }
        let saved = self.forget_saved(id).await?;
        Ok(live.is_some() || saved)
    }

    /// Ends a session that expired: its sandbox and its checkpoint go.
    pub(crate) fn remove_session(&self, id: &str) -> Option<Arc<Session>> {
        let s = self.sessions.lock().remove(id)?;
        // A run going on in it ends (its result is recorded as failed: the sandbox is gone).
        // The destroy is tracked: a clean shutdown waits for it.
        let boxed = s.boxed.clone();
        if tokio::runtime::Handle::try_current().is_ok() {
            let store = self.store.clone();
            let id = id.to_string();
            let saves = s.runtime.hibernates();
            self.destroys.spawn(async move {
                boxed.destroy().await;
                if saves
                    && let Err(e) =
                        crate::store::call(&store, move |st| st.session_forget(&id)).await
                {
                    tracing::warn!(%e, "cannot forget an expired session's checkpoint");
                }
            });
        }
        Some(s)
    }

    /// Sessions held now (expired ones not yet reaped included).
    pub fn session_count(&self) -> usize {
        self.sessions.lock().len()
    }

    pub(crate) fn reap_sessions(&self) -> usize {
        let now = self.clock.now_ms();
        let expired: Vec<String> = self
            .sessions
            .lock()
            .values()
            .filter(|s| s.expired(now))
            .map(|s| s.id.clone())
            .collect();
        for id in &expired {
            self.remove_session(id);
        }
        expired.len()
    }
}

impl Session {
    /// The wasm sandbox behind it, for background processes; 400 on other runtimes.
    pub(crate) fn wasm_sandbox(&self) -> Result<&Arc<wasmsand::Sandbox>, crate::error::ApiError> {
        self.boxed.sandbox().ok_or_else(|| {
            crate::error::ApiError::invalid(format!(
                "background processes are not available on runtime {}; use runs",
                self.runtime.name()
            ))
            .with_details(
                serde_json::json!({ "runtime": self.runtime.name(), "reason": "not_supported" }),
            )
        })
    }
}
