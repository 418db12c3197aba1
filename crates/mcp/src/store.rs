//! The live sessions of one MCP server: minted ids, caps per client and in total, and the idle
//! TTL. Every transport (stdio, each HTTP request) shares one store.

use std::collections::HashMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Weak};
use std::time::{Duration, Instant};

use parking_lot::Mutex;
use wasmsand::Sandbox;

/// One live session: a sandbox that persists between tool calls.
pub(crate) struct Session {
    pub id: String,
    pub owner: String,
    pub parent: Option<String>,
    pub sandbox: Arc<Sandbox>,
    /// Runs on one session go one at a time, so that cancelling a run can only ever stop that
    /// run (`Sandbox::cancel` stops whatever command is running in the sandbox).
    pub run_lock: Arc<tokio::sync::Mutex<()>>,
    created: Instant,
    last_used: Mutex<Instant>,
    /// Calls working on the session now: a session in use is never reaped.
    in_use: AtomicUsize,
}

impl Session {
    pub fn age(&self) -> Duration {
        self.created.elapsed()
    }

    pub fn idle(&self) -> Duration {
        if self.in_use.load(Ordering::SeqCst) > 0 {
            Duration::ZERO
        } else {
            self.last_used.lock().elapsed()
        }
    }
}

/// A session held by a tool call: it stays out of the reaper's reach until dropped, and the
/// drop counts as the session's last use.
pub(crate) struct Lease(Arc<Session>);

impl std::ops::Deref for Lease {
    type Target = Session;
    fn deref(&self) -> &Session {
        &self.0
    }
}

impl Drop for Lease {
    fn drop(&mut self) {
        *self.0.last_used.lock() = Instant::now();
        self.0.in_use.fetch_sub(1, Ordering::SeqCst);
    }
}

fn lease(s: &Arc<Session>) -> Lease {
    s.in_use.fetch_add(1, Ordering::SeqCst);
    Lease(s.clone())
}

#[derive(Debug, Clone, Copy)]
pub(crate) struct Caps {
    pub global: usize,
    pub per_owner: usize,
    pub idle_ttl: Duration,
}

pub(crate) struct Store {
    sessions: Mutex<HashMap<String, Arc<Session>>>,
    /// The table's size, readable without its lock.
    live: AtomicUsize,
    pub caps: Caps,
}

impl Store {
    /// A store whose idle sessions a background thread reaps; the thread ends with the store.
    pub fn new(caps: Caps) -> Arc<Store> {
        let store = Arc::new(Store {
            sessions: Mutex::new(HashMap::new()),
            live: AtomicUsize::new(0),
            caps,
        });
        let weak: Weak<Store> = Arc::downgrade(&store);
        let period = (caps.idle_ttl / 4).clamp(Duration::from_millis(10), Duration::from_secs(5));
        std::thread::Builder::new()
            .name("wasmsand-mcp-reaper".into())
            .spawn(move || {
                loop {
                    std::thread::sleep(period);
                    match weak.upgrade() {
                        Some(store) => store.reap(Instant::now()),
                        None => return,
                    }
                }
            })
            .expect("spawning the session reaper thread");
        store
    }

    /// Destroys every session idle for longer than the TTL at `now`.
    pub fn reap(&self, now: Instant) {
        let expired: Vec<Arc<Session>> = {
            let mut map = self.sessions.lock();
            let ids: Vec<String> = map
                .values()
                .filter(|s| {
                    s.in_use.load(Ordering::SeqCst) == 0
                        && now.saturating_duration_since(*s.last_used.lock()) > self.caps.idle_ttl
                })
                .map(|s| s.id.clone())
                .collect();
            let gone: Vec<Arc<Session>> = ids.iter().filter_map(|id| map.remove(id)).collect();
            self.live.store(map.len(), Ordering::SeqCst);
            gone
        };
        for s in expired {
            s.sandbox.destroy();
        }
    }

    /// Registers a new sandbox for `owner` under a fresh id, if the caps allow one more.
    pub fn insert(
        &self,
        owner: &str,
        parent: Option<String>,
        sandbox: Sandbox,
    ) -> Result<Lease, String> {
        self.reap(Instant::now());
        let mut map = self.sessions.lock();
        if map.len() >= self.caps.global {
            return Err(format!(
                "the server already holds its maximum of {} live sessions; destroy one with \
                 session_destroy, or run without session_id for a one-off sandbox",
                self.caps.global
            ));
        }
        let mine = map.values().filter(|s| s.owner == owner).count();
        if mine >= self.caps.per_owner {
            return Err(format!(
                "this client already holds its maximum of {} live sessions; destroy one with \
                 session_destroy (session_list shows them)",
                self.caps.per_owner
            ));
        }
        self.live.store(map.len() + 1, Ordering::SeqCst);
        let id = mint_id();
        let now = Instant::now();
        let session = Arc::new(Session {
            id: id.clone(),
            owner: owner.to_string(),
            parent,
            sandbox: Arc::new(sandbox),
            run_lock: Arc::new(tokio::sync::Mutex::new(())),
            created: now,
            last_used: Mutex::new(now),
            in_use: AtomicUsize::new(0),
        });
        let held = lease(&session);
        map.insert(id, session);
        Ok(held)
    }

    /// The session `id` of `owner`. Another client's session is reported as unknown, exactly
    /// like a session that never existed.
    pub fn get(&self, owner: &str, id: &str) -> Result<Lease, String> {
        self.reap(Instant::now());
        let map = self.sessions.lock();
        match map.get(id) {
            Some(s) if s.owner == owner => Ok(lease(s)),
            _ => Err(self.unknown(id)),
        }
    }

    pub fn remove(&self, owner: &str, id: &str) -> Result<(), String> {
        let removed = {
            let mut map = self.sessions.lock();
            let removed = match map.get(id) {
                Some(s) if s.owner == owner => map.remove(id),
                _ => None,
            };
            self.live.store(map.len(), Ordering::SeqCst);
            removed
        };
        match removed {
            Some(s) => {
                s.sandbox.destroy();
                Ok(())
            }
            None => Err(self.unknown(id)),
        }
    }

    /// The sessions of `owner`, oldest first.
    pub fn list(&self, owner: &str) -> Vec<Arc<Session>> {
        self.reap(Instant::now());
        let mut mine: Vec<Arc<Session>> = self
            .sessions
            .lock()
            .values()
            .filter(|s| s.owner == owner)
            .cloned()
            .collect();
        mine.sort_by_key(|s| std::cmp::Reverse(s.age()));
        mine
    }

    /// Destroys every session.
    pub fn clear(&self) {
        let all: Vec<Arc<Session>> = {
            let mut map = self.sessions.lock();
            self.live.store(0, Ordering::SeqCst);
            map.drain().map(|(_, s)| s).collect()
        };
        for s in all {
            s.sandbox.destroy();
        }
    }

    pub fn len(&self) -> usize {
        self.live.load(Ordering::SeqCst)
    }

    fn unknown(&self, id: &str) -> String {
        format!(
            "unknown session_id {id:?}: no live session of this client has that id (it was \
             never created, was destroyed, or expired after {} s idle). Create one with \
             session_create, or call sandbox_run without session_id for a one-off sandbox.",
            self.caps.idle_ttl.as_secs_f64()
        )
    }
}

impl Drop for Store {
    fn drop(&mut self) {
        for s in self.sessions.get_mut().values() {
            s.sandbox.destroy();
        }
    }
}

/// 128 random bits: ids are the only thing that names a session, so they must not be guessed.
fn mint_id() -> String {
    let mut bytes = [0u8; 16];
    getrandom::fill(&mut bytes).expect("the OS random source works");
    let mut id = String::with_capacity(34);
    id.push_str("s-");
    for b in bytes {
        id.push_str(&format!("{b:02x}"));
    }
    id
}

#[cfg(test)]
mod tests {
    use super::*;
    use wasmsand::SandboxOptions;

    fn store(global: usize, per_owner: usize, ttl: Duration) -> Arc<Store> {
        Store::new(Caps {
            global,
            per_owner,
            idle_ttl: ttl,
        })
    }

    fn sandbox() -> Sandbox {
        Sandbox::new(SandboxOptions::default())
    }

    #[test]
    fn ids_are_distinct_and_unguessable_in_shape() {
        let a = mint_id();
        let b = mint_id();
        assert_ne!(a, b);
        assert_eq!(a.len(), 34);
        assert!(a.starts_with("s-"));
    }

    #[test]
    fn caps_per_owner_and_global() {
        let s = store(3, 2, Duration::from_secs(3600));
        let a1 = s.insert("a", None, sandbox()).unwrap().id.clone();
        s.insert("a", None, sandbox()).unwrap();
        let err = s.insert("a", None, sandbox()).err().unwrap();
        assert!(err.contains("maximum of 2"), "{err}");
        s.insert("b", None, sandbox()).unwrap();
        let err = s.insert("c", None, sandbox()).err().unwrap();
        assert!(err.contains("maximum of 3 live sessions"), "{err}");
        s.remove("a", &a1).unwrap();
        s.insert("c", None, sandbox()).unwrap();
        assert_eq!(s.len(), 3);
    }

    #[test]
    fn another_owners_session_is_unknown() {
        let s = store(10, 10, Duration::from_secs(3600));
        let id = s.insert("a", None, sandbox()).unwrap().id.clone();
        assert!(s.get("a", &id).is_ok());
        let err = s.get("b", &id).err().unwrap();
        assert!(err.contains("unknown session_id"), "{err}");
        assert!(s.remove("b", &id).is_err());
        assert!(s.list("b").is_empty());
        assert_eq!(s.list("a").len(), 1);
    }

    #[test]
    fn idle_sessions_are_reaped_and_destroyed_but_not_while_in_use() {
        let s = store(10, 10, Duration::from_secs(60));
        let held = s.insert("a", None, sandbox()).unwrap();
        let idle_id = s.insert("a", None, sandbox()).unwrap().id.clone();
        let idle = s.get("a", &idle_id).unwrap().sandbox.clone();
        let later = Instant::now() + Duration::from_secs(61);
        s.reap(later);
        assert!(idle.is_destroyed());
        assert!(s.get("a", &idle_id).is_err());
        assert!(!held.sandbox.is_destroyed());
        let held_id = held.id.clone();
        drop(held);
        assert!(s.get("a", &held_id).is_ok());
        s.reap(Instant::now() + Duration::from_secs(61));
        assert!(s.get("a", &held_id).is_err());
    }
}
