//! Sessions that outlive their process: a session of a runtime that hibernates (wasm) is
//! written to the store after each run that may have changed it (a *checkpoint*), when it has
//! been idle for `SANDBOX_HIBERNATE_AFTER_SEC` (then dropped from memory: it *hibernates*),
//! and at a clean shutdown; the next request for it, on this process or any replica sharing
//! the store, *wakes* it from there.
//!
//! What is written: the service's record of the session ([`Meta`]) and the sandbox's state
//! (`wasmsand::Sandbox::export_payload`: files, modes, times, links, variables, functions,
//! options, cwd; installed packages are files). The state is cut into content-defined chunks
//! (FastCDC), each named by the SHA-256 of its bytes and stored zstd-compressed once
//! whatever the number of checkpoints that list it: a checkpoint after a run that changed
//! one file sends the chunks around that file, and forks of one session share the rest.
//! Waking checks every chunk against its name and the whole against the checkpoint's length
//! and SHA-256; a checkpoint that does not check out is refused (410 `session_lost`, reason
//! `corrupt_checkpoint`) and audited, never half restored.
//!
//! A checkpoint is taken from an O(1) fork made while the session's lock is held, so it is
//! the state between two runs, and is in the store before the run is reported finished.

use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::Ordering;

use axum::http::StatusCode;
use serde_json::json;
use sha2::{Digest, Sha256};

use crate::App;
use crate::error::{ApiError, ErrorCode};
use crate::runtime::{BoxSpec, ImageRef};
use crate::sessions::{Meta, Saved, Session};
use crate::store::{self, SavedSession, Store, StoreError};

/// Chunk sizes (min, average, max): big enough that the 10 000 small files of a typical
/// workspace are a handful of chunks (a wake reads few rows), small enough that a change
/// resends little.
const CHUNK_MIN: usize = 64 * 1024;
const CHUNK_AVG: usize = 256 * 1024;
const CHUNK_MAX: usize = 1024 * 1024;
/// Level 1: checkpoints are written after every run; higher levels cost several times the
/// time for a few percent.
const ZSTD_LEVEL: i32 = 1;
/// Saves that find a chunk they relied on forgotten meanwhile ask again this many times.
const SAVE_ATTEMPTS: usize = 4;

/// A state cut into chunks: their names in order and where each is in the state.
struct Cut {
    order: Vec<String>,
    at: HashMap<String, std::ops::Range<usize>>,
    sha256: String,
}

fn cut(payload: &[u8]) -> Cut {
    let mut order = Vec::new();
    let mut at = HashMap::new();
    for c in fastcdc::v2020::FastCDC::new(payload, CHUNK_MIN, CHUNK_AVG, CHUNK_MAX) {
        let range = c.offset..c.offset + c.length;
        let name = hex::encode(Sha256::digest(&payload[range.clone()]));
        at.entry(name.clone()).or_insert(range);
        order.push(name);
    }
    Cut {
        order,
        at,
        sha256: hex::encode(Sha256::digest(payload)),
    }
}

/// Why a checkpoint could not be brought back.
#[derive(Debug)]
pub enum WakeError {
    /// It does not check out: the text says what.
    Corrupt(String),
}

/// Reassembles and checks the state a checkpoint lists from the chunks the store gave.
fn assemble(saved: &SavedSession, chunks: Vec<(String, Vec<u8>)>) -> Result<Vec<u8>, WakeError> {
    let chunks: HashMap<String, Vec<u8>> = chunks.into_iter().collect();
    let mut out = Vec::with_capacity(saved.payload_len.min(1 << 30) as usize);
    let mut open: HashMap<&str, Vec<u8>> = HashMap::new();
    for name in &saved.chunks {
        if !open.contains_key(name.as_str()) {
            let packed = chunks.get(name).ok_or_else(|| {
                WakeError::Corrupt(format!("chunk {name} is missing from the store"))
            })?;
            let bytes = zstd::bulk::decompress(packed, CHUNK_MAX).map_err(|e| {
                WakeError::Corrupt(format!("chunk {name} does not decompress: {e}"))
            })?;
            if hex::encode(Sha256::digest(&bytes)) != *name {
                return Err(WakeError::Corrupt(format!(
                    "chunk {name} does not match its checksum"
                )));
            }
            open.insert(name, bytes);
        }
        out.extend_from_slice(&open[name.as_str()]);
        if out.len() as u64 > saved.payload_len {
            break;
        }
    }
    if out.len() as u64 != saved.payload_len
        || hex::encode(Sha256::digest(&out)) != saved.payload_sha256
    {
        return Err(WakeError::Corrupt(format!(
            "the reassembled state ({} bytes) does not match the checkpoint's length ({}) and checksum",
            out.len(),
            saved.payload_len
        )));
    }
    Ok(out)
}

/// A session's view from its checkpoint's record (a session asleep, or live on another
/// replica).
/// `current`: the hash reported for a checkpoint of a version that did not record its own.
fn view_of_saved(saved: &SavedSession, current: &str) -> Option<crate::views::SessionView> {
    let m: Meta = serde_json::from_value(saved.meta.clone()).ok()?;
    let hash = m.policy_hash.clone().unwrap_or_else(|| current.to_string());
    Some(m.into_view(saved.session_id.clone(), saved.expires_at, &hash))
}

/// The saved state that is a session's fork point: what the fork and its parent both held
/// when it was forked, or when it was last merged back (`crate::api::forks`).
pub(crate) fn fork_point_id(session: &str) -> String {
    format!("{session}:fork-point")
}

/// The saved state of one of a session's snapshots.
pub(crate) fn snapshot_key(session: &str, snapshot: &str) -> String {
    format!("{session}:snapshot:{snapshot}")
}

/// Whether a saved state is a session's checkpoint (not a fork point or a snapshot, whose
/// record says what it is in `kind`): only those wake.
fn is_session(saved: &SavedSession) -> bool {
    saved.meta.get("kind").is_none()
}

/// What a checkpoint says of its session besides the state.
#[derive(Debug, Clone)]
pub struct Head {
    /// The session id.
    pub session_id: String,
    /// Its owner.
    pub user_id: String,
    /// When it is written (epoch ms).
    pub saved_at: i64,
    /// When the session's TTL ends (epoch ms).
    pub expires_at: i64,
    /// The service's record of the session.
    pub meta: serde_json::Value,
}

/// What [`write_checkpoint`] wrote.
#[derive(Debug, Clone)]
pub struct Written {
    /// The checkpoint's chunks, in order.
    pub chunks: Vec<String>,
    /// How many of them were new to the store.
    pub new_chunks: usize,
    /// Their compressed bytes.
    pub bytes_sent: u64,
}

/// Writes `payload` (`wasmsand::Sandbox::export_payload`) as the checkpoint of `head`'s
/// session: cuts it into chunks, sends the store only those it lacks, compressed, and
/// replaces the session's previous checkpoint in one transaction. `None` (nothing written)
/// when the chunks are `unchanged` (those of the checkpoint written last). Blocking.
pub fn write_checkpoint(
    store: &dyn Store,
    head: Head,
    payload: &[u8],
    unchanged: Option<&[String]>,
) -> Result<Option<Written>, String> {
    let cut = cut(payload);
    if unchanged.is_some_and(|u| u == cut.order.as_slice()) {
        return Ok(None);
    }
    let saved = SavedSession {
        session_id: head.session_id,
        user_id: head.user_id,
        saved_at: head.saved_at,
        expires_at: head.expires_at,
        meta: head.meta,
        chunks: cut.order.clone(),
        payload_len: payload.len() as u64,
        payload_sha256: cut.sha256.clone(),
    };
    let mut unique: Vec<String> = cut.at.keys().cloned().collect();
    unique.sort();
    let mut wanted = store.chunks_missing(&unique).map_err(|e| e.to_string())?;
    let (mut new_chunks, mut bytes_sent) = (0, 0u64);
    for _ in 0..SAVE_ATTEMPTS {
        let packed: Vec<(String, Vec<u8>)> = wanted
            .into_iter()
            .map(|h| {
                let z = zstd::bulk::compress(&payload[cut.at[&h].clone()], ZSTD_LEVEL)
                    .expect("compressing into memory cannot fail");
                (h, z)
            })
            .collect();
        new_chunks += packed.len();
        bytes_sent += packed.iter().map(|(_, z)| z.len() as u64).sum::<u64>();
        wanted = store
            .session_save(&saved, &packed)
            .map_err(|e| e.to_string())?;
        if wanted.is_empty() {
            return Ok(Some(Written {
                chunks: saved.chunks,
                new_chunks,
                bytes_sent,
            }));
        }
    }
    Err("the store kept forgetting the chunks this checkpoint shares".into())
}

/// A checkpoint read back: its record, and the state it holds if that checks out.
pub type Checkpoint = (SavedSession, Result<Vec<u8>, WakeError>);

/// A session's checkpoint and, if it checks out, the state it holds (what
/// `wasmsand::Sandbox::from_payload` opens); `None` when the session has none. Blocking.
pub fn read_checkpoint(
    store: &dyn Store,
    session_id: &str,
) -> Result<Option<Checkpoint>, StoreError> {
    let Some(saved) = store.session_saved(session_id)? else {
        return Ok(None);
    };
    let mut hashes = saved.chunks.clone();
    hashes.sort();
    hashes.dedup();
    let chunks = store.chunks_get(&hashes)?;
    let payload = assemble(&saved, chunks);
    Ok(Some((saved, payload)))
}

impl App {
    /// Whether checkpoints outlive this process (a SQLite or PostgreSQL store): only then are
    /// sessions checkpointed after their runs.
    pub(crate) fn durable_store(&self) -> bool {
        self.store.mode() != "memory"
    }

    /// The session, live or woken from the store (here or, on a shared store, from a replica
    /// that hibernated it or died), marked used; `None` when there is no such session.
    pub(crate) async fn session(
        self: &Arc<Self>,
        id: &str,
    ) -> Result<Option<Arc<Session>>, ApiError> {
        if let Some(s) = self.session_live(id) {
            return Ok(Some(s));
        }
        self.wake(id).await
    }

    /// The owner of a session, live or asleep, without waking it.
    pub(crate) async fn session_user(&self, id: &str) -> Result<Option<String>, ApiError> {
        if let Some(s) = self.session_live(id) {
            return Ok(Some(s.owner.clone()));
        }
        let sid = id.to_string();
        let saved = store::call(&self.store, move |s| s.session_saved(&sid))
            .await
            .map_err(|e| ApiError::internal(e.to_string()))?;
        Ok(saved
            .filter(|s| is_session(s) && s.expires_at > self.clock.now_ms())
            .map(|s| s.user_id))
    }

    /// Takes the session's lock (runs, uploads and process starts go one at a time). A
    /// session that hibernated while the caller waited is woken again and that one locked.
    pub(crate) async fn lock_session(
        self: &Arc<Self>,
        mut s: Arc<Session>,
    ) -> Result<(Arc<Session>, tokio::sync::OwnedMutexGuard<()>), ApiError> {
        loop {
            let guard = s.lock.clone().lock_owned().await;
            if !s.hibernated.load(Ordering::SeqCst) {
                return Ok((s, guard));
            }
            drop(guard);
            let id = s.id.clone();
            s = self
                .session(&id)
                .await?
                .ok_or_else(|| ApiError::not_found("session", &id))?;
        }
    }

    /// Puts `boxed` in place of the session's sandbox (a snapshot restored), under the
    /// session's lock (`guard`): the session object is replaced in the map, and a request
    /// still holding the old one finds it marked and looks the session up again, as after a
    /// hibernation. Its background processes end with the old sandbox.
    pub(crate) async fn replace_session(
        self: &Arc<Self>,
        old: &Arc<Session>,
        guard: tokio::sync::OwnedMutexGuard<()>,
        boxed: Arc<dyn crate::runtime::SandboxBox>,
    ) -> Arc<Session> {
        let new = Arc::new(old.derive(
            old.id.clone(),
            boxed,
            old.created_at,
            old.expires_at.load(Ordering::SeqCst),
            old.forked_from.clone(),
        ));
        new.touch(self.clock.now_ms());
        old.hibernated.store(true, Ordering::SeqCst);
        self.sessions.lock().insert(old.id.clone(), new.clone());
        drop(guard);
        old.boxed.destroy().await;
        {
            let _guard = new.lock.lock().await;
            self.checkpoint(&new).await;
        }
        new
    }

    /// Every session of `user` (all users: `None`), live here or elsewhere or asleep in the
    /// store, oldest first: `(view, state, owner)`.
    pub(crate) async fn list_sessions(
        &self,
        user: Option<&str>,
    ) -> Result<Vec<crate::views::SessionListItem>, ApiError> {
        let now = self.clock.now_ms();
        let mut items: Vec<(i64, crate::views::SessionListItem)> = self
            .sessions
            .lock()
            .values()
            .filter(|s| user.is_none_or(|u| s.owner == u) && !s.expired(now))
            .map(|s| {
                (
                    s.created_at,
                    crate::views::SessionListItem {
                        session: s.view(),
                        state: "active".into(),
                        user_id: s.owner.clone(),
                    },
                )
            })
            .collect();
        let live: std::collections::HashSet<String> = items
            .iter()
            .map(|(_, i)| i.session.session_id.clone())
            .collect();
        let u = user.map(str::to_string);
        let alive = crate::replica::alive_since(self);
        let saved = store::call(&self.store, move |s| {
            let saved = s.saved_sessions(u.as_deref())?;
            // On replicas, a checkpointed session another live replica holds is active there.
            let held = match s.cluster() {
                Some(c) => {
                    let replicas: std::collections::HashSet<String> =
                        c.live_replicas(alive)?.into_iter().map(|r| r.id).collect();
                    let mut held = std::collections::HashSet::new();
                    for x in &saved {
                        if let Some(owner) = c.session_owner(&x.session_id)?
                            && replicas.contains(&owner)
                        {
                            held.insert(x.session_id.clone());
                        }
                    }
                    held
                }
                None => Default::default(),
            };
            Ok((saved, held))
        })
        .await
        .map_err(|e| ApiError::internal(e.to_string()))?;
        let (saved, held) = saved;
        let current_hash = self.policy_hash();
        for x in saved {
            if !is_session(&x) || x.expires_at <= now || live.contains(&x.session_id) {
                continue;
            }
            let Some(view) = view_of_saved(&x, &current_hash) else {
                continue;
            };
            let created = x.meta["created_at"].as_i64().unwrap_or(x.saved_at);
            let state = if held.contains(&x.session_id) {
                "active"
            } else {
                "hibernated"
            };
            items.push((
                created,
                crate::views::SessionListItem {
                    session: view,
                    state: state.into(),
                    user_id: x.user_id,
                },
            ));
        }
        items.sort_by(|a, b| (a.0, &a.1.session.session_id).cmp(&(b.0, &b.1.session.session_id)));
        Ok(items.into_iter().map(|(_, i)| i).collect())
    }

    /// Forgets a session's checkpoint, its snapshots and its fork point (and, on a shared
    /// store, who holds it); whether it had a checkpoint.
    pub(crate) async fn forget_saved(&self, id: &str) -> Result<bool, ApiError> {
        let sid = id.to_string();
        store::call(&self.store, move |s| {
            if let Some(c) = s.cluster() {
                c.session_delete(&sid)?;
            }
            for derived in s.saved_ids_with_prefix(&format!("{sid}:"))? {
                s.session_forget(&derived)?;
            }
            s.session_forget(&sid)
        })
        .await
        .map_err(|e| ApiError::internal(e.to_string()))
    }

    /// Writes the session's state as it is now as its checkpoint (unless it is the one
    /// written last), and returns once it is in the store: a run is reported finished, an
    /// upload or a new session answered, only after, so a crash loses none of them. Call it
    /// with the session's lock held: the O(1) fork taken here is the state between two runs
    /// (background processes may go on writing meanwhile).
    pub(crate) async fn checkpoint(self: &Arc<Self>, s: &Arc<Session>) {
        if !self.durable_store() || !s.runtime.hibernates() || s.hibernated.load(Ordering::SeqCst) {
            return;
        }
        let Some(sb) = s.boxed.sandbox() else { return };
        let fork = match sb.fork() {
            Ok(f) => Arc::new(f),
            Err(e) => {
                tracing::warn!(session_id = %s.id, %e, "cannot fork the session to checkpoint it");
                return;
            }
        };
        let mut saved = s.saving.lock().await;
        if let Err(e) = self.save(s, &fork, &mut saved).await {
            tracing::warn!(session_id = %s.id, %e, "cannot checkpoint the session");
        }
        fork.destroy();
    }

    /// Writes the state of `sb` as the session's checkpoint, unless it is the one written last.
    async fn save(
        self: &Arc<Self>,
        s: &Session,
        sb: &Arc<wasmsand::Sandbox>,
        last: &mut Saved,
    ) -> Result<(), String> {
        let t0 = std::time::Instant::now();
        let head = Head {
            session_id: s.id.clone(),
            user_id: s.owner.clone(),
            saved_at: self.clock.now_ms(),
            expires_at: s.expires_at.load(Ordering::SeqCst),
            meta: serde_json::to_value(Meta::of(s)).map_err(|e| e.to_string())?,
        };
        let (sb, store) = (sb.clone(), self.store.clone());
        let unchanged = (last.expires_at == head.expires_at).then(|| last.chunks.clone());
        let expires_at = head.expires_at;
        let written = tokio::task::spawn_blocking(move || {
            let payload = sb.export_payload().map_err(|e| e.to_string())?;
            write_checkpoint(store.as_ref(), head, &payload, unchanged.as_deref())
        })
        .await
        .map_err(|e| e.to_string())??;
        if let Some(w) = written {
            last.chunks = w.chunks;
            last.expires_at = expires_at;
            crate::observe::checkpoint(self, t0.elapsed(), w.bytes_sent);
        }
        Ok(())
    }

    /// Hibernates a live session that is idle: checkpoints it, drops it from memory and
    /// (on a shared store) lets any replica claim it. Whether it went; a session in use (a
    /// run, an upload, a background process) stays.
    /// `idle_before`: only if it was last used before then (`None`: at shutdown, whatever
    /// it is doing).
    pub(crate) async fn hibernate(
        self: &Arc<Self>,
        s: &Arc<Session>,
        idle_before: Option<i64>,
    ) -> bool {
        if !s.runtime.hibernates() {
            return false;
        }
        let Ok(guard) = s.lock.clone().try_lock_owned() else {
            return false;
        };
        let shutdown = idle_before.is_none();
        // Used since it was picked: not idle.
        if idle_before.is_some_and(|t| s.last_used.load(Ordering::SeqCst) > t) {
            return false;
        }
        let Some(sb) = s.boxed.sandbox().cloned() else {
            return false;
        };
        if !shutdown && sb.processes().is_ok_and(|p| p.iter().any(|p| p.running)) {
            return false;
        }
        if !self
            .sessions
            .lock()
            .get(&s.id)
            .is_some_and(|m| Arc::ptr_eq(m, s))
        {
            return false;
        }
        {
            let mut saved = s.saving.lock().await;
            if let Err(e) = self.save(s, &sb, &mut saved).await {
                tracing::warn!(session_id = %s.id, %e, "cannot hibernate the session; it stays in memory");
                return false;
            }
        }
        // On replicas, the holder row goes first, while this process still holds the lock:
        // a request another replica takes from then on wakes the checkpoint just written, and
        // this copy can no longer change. (Released after the map, a request forwarded here in
        // between would wake it here again, and the release would then leave two copies.)
        if !shutdown && self.store.cluster().is_some() {
            let id = s.id.clone();
            if let Err(e) = store::call(&self.store, move |st| {
                st.cluster().expect("shared").session_delete(&id)
            })
            .await
            {
                tracing::warn!(session_id = %s.id, %e, "cannot release a session; it stays in memory");
                return false;
            }
        }
        s.hibernated.store(true, Ordering::SeqCst);
        {
            let mut map = self.sessions.lock();
            if map.get(&s.id).is_some_and(|m| Arc::ptr_eq(m, s)) {
                map.remove(&s.id);
            }
        }
        drop(guard);
        s.boxed.destroy().await;
        crate::observe::hibernated(self);
        tracing::debug!(session_id = %s.id, "session hibernated");
        true
    }

    /// Hibernates the sessions idle for `SANDBOX_HIBERNATE_AFTER_SEC`, oldest first.
    pub(crate) async fn hibernate_idle(self: &Arc<Self>) -> usize {
        let after = self.config.hibernate_after_sec;
        if after == 0 {
            return 0;
        }
        let cutoff = self.clock.now_ms() - after as i64 * 1000;
        let mut idle: Vec<Arc<Session>> = self
            .sessions
            .lock()
            .values()
            .filter(|s| s.runtime.hibernates() && s.last_used.load(Ordering::SeqCst) <= cutoff)
            .cloned()
            .collect();
        idle.sort_by_key(|s| s.last_used.load(Ordering::SeqCst));
        let mut n = 0;
        for s in idle {
            if self.is_shutting_down() {
                break;
            }
            if self.hibernate(&s, Some(cutoff)).await {
                n += 1;
            }
        }
        if n > 0 {
            // What the dropped sandboxes held goes back to the system, not to the heap.
            wasmsand::release_free_memory();
        }
        n
    }

    /// Hibernates the least recently used live session that is idle (no run, upload or
    /// background process) other than `except`. Whether one went.
    async fn make_room(self: &Arc<Self>, except: &str) -> bool {
        let mut live: Vec<(i64, Arc<Session>)> = self
            .sessions
            .lock()
            .values()
            .filter(|s| s.id != except && s.runtime.hibernates())
            .map(|s| (s.last_used.load(Ordering::SeqCst), s.clone()))
            .collect();
        live.sort_by_key(|(used, _)| *used);
        for (used, s) in live {
            if self.hibernate(&s, Some(used)).await {
                return true;
            }
        }
        false
    }

    /// At a clean shutdown: every live session that can hibernates, so that none is lost.
    pub(crate) async fn hibernate_all(self: &Arc<Self>) -> usize {
        let all: Vec<Arc<Session>> = self.sessions.lock().values().cloned().collect();
        let mut n = 0;
        for s in all {
            if self.hibernate(&s, None).await {
                n += 1;
            }
        }
        n
    }

    /// Forgets the checkpoints whose TTL ended.
    pub(crate) async fn forget_expired_saved(&self) {
        let now = self.clock.now_ms();
        let ids = match store::call(&self.store, move |s| s.saved_expired(now)).await {
            Ok(ids) => ids,
            Err(e) => {
                tracing::warn!(%e, "cannot list expired checkpoints");
                return;
            }
        };
        for id in ids {
            if self.sessions.lock().contains_key(&id) {
                continue;
            }
            if let Err(e) = self.forget_saved(&id).await {
                tracing::warn!(session_id = %id, ?e, "cannot forget an expired checkpoint");
            }
        }
    }

    /// Brings a session back from its checkpoint; `None` when it has none (or it expired).
    async fn wake(self: &Arc<Self>, id: &str) -> Result<Option<Arc<Session>>, ApiError> {
        // One wake per session at a time: a burst of requests for a sleeping session wakes it once.
        let gate = self
            .waking
            .lock()
            .entry(id.to_string())
            .or_default()
            .clone();
        let _one = gate.lock().await;
        let woken = self.wake_locked(id).await;
        {
            let mut w = self.waking.lock();
            if w.get(id).is_some_and(|g| Arc::ptr_eq(g, &gate)) && Arc::strong_count(&gate) <= 2 {
                w.remove(id);
            }
        }
        woken
    }

    async fn wake_locked(self: &Arc<Self>, id: &str) -> Result<Option<Arc<Session>>, ApiError> {
        if let Some(s) = self.session_live(id) {
            return Ok(Some(s));
        }
        let t0 = std::time::Instant::now();
        let sid = id.to_string();
        let Some((saved, payload)) = store::call(&self.store, move |s| read_checkpoint(s, &sid))
            .await
            .map_err(|e| ApiError::internal(e.to_string()))?
        else {
            return Ok(None);
        };
        if !is_session(&saved) {
            return Ok(None);
        }
        let now = self.clock.now_ms();
        if saved.expires_at <= now {
            self.forget_saved(id).await?;
            return Ok(None);
        }
        if self.is_shutting_down() {
            return Err(crate::http::shutting_down());
        }
        let payload = match payload {
            Ok(p) => p,
            Err(WakeError::Corrupt(why)) => return Err(self.corrupt(&saved, &why)),
        };
        if self.store.cluster().is_some() {
            let (sid, user) = (id.to_string(), saved.user_id.clone());
            let alive = crate::replica::alive_since(self);
            let claim = store::call(&self.store, move |s| {
                s.cluster()
                    .expect("shared")
                    .session_claim(&sid, &user, alive, now)
            })
            .await
            .map_err(|e| ApiError::internal(e.to_string()))?;
            if let Err(owner) = claim {
                return Err(ApiError::new(
                    StatusCode::SERVICE_UNAVAILABLE,
                    ErrorCode::RuntimeUnavailable,
                    format!("session '{id}' is being woken by replica {owner}; retry"),
                )
                .with_details(json!({ "replica": owner, "session_id": id }))
                .with_header(axum::http::header::RETRY_AFTER, "1"));
            }
        }
        let meta: Meta = serde_json::from_value(saved.meta.clone())
            .map_err(|e| self.corrupt(&saved, &format!("its record does not parse: {e}")))?;
        let Some(runtime) = self.runtimes.get(&meta.runtime).cloned() else {
            return Err(self.corrupt(&saved, &format!("unknown runtime {}", meta.runtime)));
        };
        // The network is checked against the policy in force now, not the session's: a server
        // restarted (or changed) to allow less must not wake a box that reaches more.
        let current = self.policy();
        let network = crate::validate::check_network(
            &current.config,
            runtime.as_ref(),
            Some(&meta.network_policy),
            meta.egress_allowlist.as_ref(),
        )
        .map_err(|e| {
            ApiError::new(
                StatusCode::GONE,
                ErrorCode::SessionLost,
                format!(
                    "session '{id}' cannot be woken: the server no longer allows its network \
                     policy ({})",
                    e.message
                ),
            )
            .with_details(json!({ "session_id": id, "reason": "policy_changed" }))
        })?;
        let boxed = runtime
            .revive(
                payload,
                BoxSpec {
                    image: ImageRef {
                        requested: meta.base_image.clone(),
                        canonical: meta.base_image.clone(),
                    },
                    memory_mb: meta.memory_mb,
                    cpu: meta.cpu,
                    env: meta.env.clone(),
                    owner: saved.user_id.clone(),
                    session: Some(id.to_string()),
                    run: None,
                    network: network.allowlist.clone(),
                    limits: meta.limits,
                },
            )
            .await
            .map_err(|e| self.corrupt(&saved, &e.message()))?;
        let session = Arc::new(Session {
            id: id.to_string(),
            boxed,
            runtime,
            runtime_version: meta.runtime_version,
            base_image: meta.base_image,
            image_digest: meta.image_digest,
            spec_version: meta.spec_version,
            created_at: meta.created_at,
            expires_at: std::sync::atomic::AtomicI64::new(saved.expires_at),
            env: meta.env,
            labels: meta.labels,
            cpu: meta.cpu,
            memory_mb: meta.memory_mb,
            timeout_sec: meta.timeout_sec,
            network_policy: network.policy,
            egress: network.allowlist,
            lock: Arc::new(tokio::sync::Mutex::new(())),
            owner: saved.user_id.clone(),
            processes: Default::default(),
            last_used: std::sync::atomic::AtomicI64::new(now),
            hibernated: Default::default(),
            saving: tokio::sync::Mutex::new(Saved {
                chunks: saved.chunks.clone(),
                expires_at: saved.expires_at,
            }),
            forked_from: meta.forked_from,
            limits: meta.limits,
            // The policy it was made with, over what cannot change without a restart; one a
            // checkpoint of an older version did not record, or that no longer validates,
            // is the policy in force.
            policy: meta
                .policy
                .as_ref()
                .and_then(|v| {
                    current
                        .with(v, crate::policy::LIVE_POLICY_KEYS)
                        .map_err(|e| tracing::warn!(session_id = %id, %e, "a woken session's policy is replaced by the current one"))
                        .ok()
                })
                .map(Arc::new)
                .unwrap_or(current),
        });
        // A session that exists stays usable when the server is full of others: the least
        // recently used idle one goes to sleep to make room for it.
        let inserted = self.insert_session(session.clone())
            || self.make_room(id).await && self.insert_session(session.clone());
        if !inserted {
            session.boxed.destroy().await;
            return Err(crate::api::sessions::too_many_sessions(self));
        }
        crate::observe::woken(self, t0.elapsed());
        tracing::debug!(session_id = %id, ms = t0.elapsed().as_millis() as u64, "session woken");
        Ok(Some(session))
    }

    /// The answer to a checkpoint that does not check out, audited.
    fn corrupt(&self, saved: &SavedSession, why: &str) -> ApiError {
        let message = format!(
            "session '{}' cannot be woken: its saved state is corrupt ({why}); delete it and \
             create a new session",
            saved.session_id
        );
        self.corrupt_state(saved, why, &saved.session_id, message)
    }

    /// A saved state (a checkpoint, a snapshot, a fork point) that does not check out:
    /// logged, audited, and answered `410 session_lost` (`corrupt_checkpoint`) for session
    /// `session_id` with `message`.
    pub(crate) fn corrupt_state(
        &self,
        saved: &SavedSession,
        why: &str,
        session_id: &str,
        message: String,
    ) -> ApiError {
        tracing::error!(saved = %saved.session_id, why, "a saved session state is corrupt");
        crate::audit::session_corrupt(self, saved, why);
        ApiError::new(StatusCode::GONE, ErrorCode::SessionLost, message)
            .with_details(json!({ "session_id": session_id, "reason": "corrupt_checkpoint" }))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn saved_of(payload: &[u8]) -> (SavedSession, Vec<(String, Vec<u8>)>) {
        let c = cut(payload);
        let chunks =
            c.at.iter()
                .map(|(h, r)| {
                    (
                        h.clone(),
                        zstd::bulk::compress(&payload[r.clone()], 1).unwrap(),
                    )
                })
                .collect();
        let saved = SavedSession {
            session_id: "s".into(),
            user_id: "u".into(),
            saved_at: 0,
            expires_at: 1,
            meta: json!({}),
            chunks: c.order,
            payload_len: payload.len() as u64,
            payload_sha256: c.sha256,
        };
        (saved, chunks)
    }

    fn noise(n: usize, seed: u64) -> Vec<u8> {
        let mut x = seed;
        (0..n)
            .map(|_| {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                x as u8
            })
            .collect()
    }

    #[test]
    fn a_state_reassembles_from_its_chunks() {
        let payload = noise(3 << 20, 7);
        let (saved, chunks) = saved_of(&payload);
        assert!(saved.chunks.len() > 3, "{}", saved.chunks.len());
        assert_eq!(assemble(&saved, chunks).unwrap(), payload);
        let (empty, none) = saved_of(b"");
        assert_eq!(assemble(&empty, none).unwrap(), b"");
    }

    #[test]
    fn a_change_in_the_middle_changes_few_chunks() {
        let a = noise(4 << 20, 9);
        let mut b = a.clone();
        b.splice(
            2_000_000..2_000_010,
            b"inserted, longer text".iter().copied(),
        );
        let (ca, cb) = (cut(&a), cut(&b));
        let shared = cb.order.iter().filter(|h| ca.at.contains_key(*h)).count();
        assert!(
            shared + 3 >= cb.order.len(),
            "{shared} of {} shared",
            cb.order.len()
        );
    }

    #[test]
    fn corrupt_missing_or_forged_chunks_are_refused() {
        let payload = noise(1 << 20, 3);
        let (saved, chunks) = saved_of(&payload);
        let expect =
            |chunks: Vec<(String, Vec<u8>)>, saved: &SavedSession, needle: &str| match assemble(
                saved, chunks,
            ) {
                Err(WakeError::Corrupt(m)) => assert!(m.contains(needle), "{m}"),
                other => panic!("{other:?}"),
            };
        expect(chunks[1..].to_vec(), &saved, "missing");
        let mut flipped = chunks.clone();
        let z = &mut flipped[0].1;
        let mid = z.len() / 2;
        z[mid] ^= 0x40;
        expect(flipped, &saved, "chunk");
        // Chunks exchanged under each other's names.
        let mut swapped = chunks.clone();
        let (a, b) = (swapped[0].1.clone(), swapped[1].1.clone());
        swapped[0].1 = b;
        swapped[1].1 = a;
        expect(swapped, &saved, "checksum");
        let mut short = saved.clone();
        short.payload_len -= 1;
        expect(chunks.clone(), &short, "does not match");
        let mut forged = saved.clone();
        forged.payload_sha256 = "00".into();
        expect(chunks, &forged, "does not match");
    }
}
