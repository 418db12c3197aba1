use std::collections::HashMap;

use parking_lot::Mutex;

use super::{
    AuditEvent, AuditQuery, IdemEntry, Phase, RunRecord, SavedSession, Store, StoreResult,
    UserLimits, UserUsage, fold_usage,
};

/// Most audit events kept in memory; the oldest go first.
const MAX_AUDIT_EVENTS: usize = 100_000;

/// Everything in maps; gone with the process.
#[derive(Default)]
pub struct MemoryStore {
    runs: Mutex<HashMap<String, RunRecord>>,
    idem: Mutex<HashMap<(String, String, String), IdemEntry>>,
    audit: Mutex<std::collections::VecDeque<AuditEvent>>,
    saved: Mutex<Saved>,
}

/// Checkpoints and their chunks under one lock, as one transaction.
#[derive(Default)]
struct Saved {
    sessions: HashMap<String, SavedSession>,
    /// hash -> (users, compressed bytes)
    chunks: HashMap<String, (u64, Vec<u8>)>,
}

impl MemoryStore {
    /// An empty store; everything in it is lost with the process.
    pub fn new() -> Self {
        Self::default()
    }
}

impl Store for MemoryStore {
    fn mode(&self) -> &'static str {
        "memory"
    }

    fn blocking(&self) -> bool {
        false
    }

    fn put_run(&self, run: &RunRecord) -> StoreResult<()> {
        self.runs.lock().insert(run.id.clone(), run.clone());
        Ok(())
    }

    fn get_run(&self, id: &str) -> StoreResult<Option<RunRecord>> {
        Ok(self.runs.lock().get(id).cloned())
    }

    fn fail_unfinished(&self, reason_code: &str, message: &str, now: i64) -> StoreResult<usize> {
        let mut n = 0;
        for r in self.runs.lock().values_mut() {
            if !r.phase.is_terminal() {
                r.phase = Phase::Failed;
                r.reason_code = Some(reason_code.into());
                r.message = Some(message.into());
                r.finished_at = Some(now);
                n += 1;
            }
        }
        Ok(n)
    }

    fn runs_with_artifacts_before(&self, cutoff: i64) -> StoreResult<Vec<RunRecord>> {
        Ok(self
            .runs
            .lock()
            .values()
            .filter(|r| {
                !r.artifacts_expired
                    && !r.artifacts.is_empty()
                    && r.finished_at.is_some_and(|f| f < cutoff)
            })
            .cloned()
            .collect())
    }

    fn runs_purge(&self, cutoff: i64, limit: usize) -> StoreResult<Vec<RunRecord>> {
        let mut runs = self.runs.lock();
        let mut old: Vec<(i64, String)> = runs
            .values()
            .filter(|r| r.phase.is_terminal())
            .filter_map(|r| {
                r.finished_at
                    .filter(|&f| f < cutoff)
                    .map(|f| (f, r.id.clone()))
            })
            .collect();
        old.sort();
        Ok(old
            .into_iter()
            .take(limit)
            .filter_map(|(_, id)| runs.remove(&id))
            .collect())
    }

    fn user_artifact_bytes(&self, user_id: &str) -> StoreResult<u64> {
        Ok(self
            .runs
            .lock()
            .values()
            .filter(|r| r.user_id == user_id && !r.artifacts_expired)
            .map(|r| r.resource_usage.artifact_bytes)
            .sum())
    }

    fn idem_get(&self, endpoint: &str, user_id: &str, key: &str) -> StoreResult<Option<IdemEntry>> {
        Ok(self
            .idem
            .lock()
            .get(&(endpoint.to_string(), user_id.to_string(), key.to_string()))
            .cloned())
    }

    fn idem_put(&self, entry: &IdemEntry) -> StoreResult<()> {
        self.idem.lock().insert(
            (
                entry.endpoint.clone(),
                entry.user_id.clone(),
                entry.key.clone(),
            ),
            entry.clone(),
        );
        Ok(())
    }

    fn idem_claim(
        &self,
        claim: &IdemEntry,
        expired_before: i64,
        stale_before: i64,
    ) -> StoreResult<Option<IdemEntry>> {
        let mut m = self.idem.lock();
        let k = (
            claim.endpoint.clone(),
            claim.user_id.clone(),
            claim.key.clone(),
        );
        match m.get(&k) {
            Some(e) if !e.replaceable(expired_before, stale_before) => Ok(Some(e.clone())),
            _ => {
                m.insert(k, claim.clone());
                Ok(None)
            }
        }
    }

    fn idem_release(&self, endpoint: &str, user_id: &str, key: &str) -> StoreResult<()> {
        let mut m = self.idem.lock();
        let k = (endpoint.to_string(), user_id.to_string(), key.to_string());
        if m.get(&k).is_some_and(IdemEntry::is_pending) {
            m.remove(&k);
        }
        Ok(())
    }

    fn list_runs(&self) -> StoreResult<Vec<RunRecord>> {
        Ok(self.runs.lock().values().cloned().collect())
    }

    fn user_usage(
        &self,
        user_id: &str,
        minute_from: i64,
        day_from: i64,
        now: i64,
    ) -> StoreResult<UserUsage> {
        let from = minute_from.min(day_from);
        let runs = self.runs.lock();
        Ok(fold_usage(
            runs.values(),
            user_id,
            from,
            minute_from,
            day_from,
            now,
        ))
    }

    // Counted and stored under one lock, without copying the runs out: every run started
    // with a quota on passes here.
    fn admit_run(
        &self,
        run: &RunRecord,
        limits: &UserLimits,
        minute_from: i64,
        day_from: i64,
        now: i64,
    ) -> StoreResult<(UserUsage, bool)> {
        let mut runs = self.runs.lock();
        let (u, ok) = limits.check(run, minute_from, day_from, |from| {
            Ok(fold_usage(
                runs.values(),
                &run.user_id,
                from,
                minute_from,
                day_from,
                now,
            ))
        })?;
        if ok {
            runs.insert(run.id.clone(), run.clone());
        }
        Ok((u, ok))
    }

    fn list_idempotency(&self) -> StoreResult<Vec<IdemEntry>> {
        Ok(self.idem.lock().values().cloned().collect())
    }

    fn idem_purge(&self, cutoff: i64) -> StoreResult<usize> {
        let mut m = self.idem.lock();
        let before = m.len();
        m.retain(|_, e| e.created_at >= cutoff);
        Ok(before - m.len())
    }

    fn put_audit(&self, event: &AuditEvent) -> StoreResult<()> {
        let mut a = self.audit.lock();
        if a.len() >= MAX_AUDIT_EVENTS {
            a.pop_front();
        }
        a.push_back(event.clone());
        Ok(())
    }

    fn list_audit(&self, q: &AuditQuery) -> StoreResult<(Vec<AuditEvent>, usize)> {
        let a = self.audit.lock();
        let matching: Vec<&AuditEvent> = a.iter().filter(|e| super::audit_matches(q, e)).collect();
        let total = matching.len();
        Ok((
            matching
                .into_iter()
                .skip(q.offset)
                .take(q.limit)
                .cloned()
                .collect(),
            total,
        ))
    }

    fn audit_purge(&self, cutoff: i64) -> StoreResult<usize> {
        let mut a = self.audit.lock();
        let before = a.len();
        a.retain(|e| e.ts >= cutoff);
        Ok(before - a.len())
    }

    fn chunks_missing(&self, hashes: &[String]) -> StoreResult<Vec<String>> {
        let saved = self.saved.lock();
        Ok(hashes
            .iter()
            .filter(|h| !saved.chunks.contains_key(*h))
            .cloned()
            .collect())
    }

    fn session_save(
        &self,
        s: &SavedSession,
        chunks: &[(String, Vec<u8>)],
    ) -> StoreResult<Vec<String>> {
        let mut saved = self.saved.lock();
        let saved = &mut *saved;
        let old = saved
            .sessions
            .get(&s.session_id)
            .map(|o| o.chunks.clone())
            .unwrap_or_default();
        let (added, removed) = super::chunk_diff(&old, &s.chunks);
        let missing: Vec<String> = added
            .iter()
            .filter(|h| !saved.chunks.contains_key(*h) && !chunks.iter().any(|(c, _)| c == *h))
            .cloned()
            .collect();
        if !missing.is_empty() {
            return Ok(missing);
        }
        for (h, data) in chunks {
            saved
                .chunks
                .entry(h.clone())
                .or_insert_with(|| (0, data.clone()));
        }
        for h in &added {
            if let Some(c) = saved.chunks.get_mut(h) {
                c.0 += 1;
            }
        }
        release(&mut saved.chunks, &removed);
        // A chunk given but listed by no checkpoint is not kept.
        for (h, _) in chunks {
            if saved.chunks.get(h).is_some_and(|c| c.0 == 0) {
                saved.chunks.remove(h);
            }
        }
        saved.sessions.insert(s.session_id.clone(), s.clone());
        Ok(Vec::new())
    }

    fn session_saved(&self, session_id: &str) -> StoreResult<Option<SavedSession>> {
        Ok(self.saved.lock().sessions.get(session_id).cloned())
    }

    fn chunks_get(&self, hashes: &[String]) -> StoreResult<Vec<(String, Vec<u8>)>> {
        let saved = self.saved.lock();
        Ok(hashes
            .iter()
            .filter_map(|h| saved.chunks.get(h).map(|c| (h.clone(), c.1.clone())))
            .collect())
    }

    fn session_forget(&self, session_id: &str) -> StoreResult<bool> {
        let mut saved = self.saved.lock();
        let Some(old) = saved.sessions.remove(session_id) else {
            return Ok(false);
        };
        let (_, removed) = super::chunk_diff(&old.chunks, &[]);
        release(&mut saved.chunks, &removed);
        Ok(true)
    }

    fn saved_sessions(&self, user_id: Option<&str>) -> StoreResult<Vec<SavedSession>> {
        let mut v: Vec<SavedSession> = self
            .saved
            .lock()
            .sessions
            .values()
            .filter(|s| user_id.is_none_or(|u| s.user_id == u))
            .cloned()
            .collect();
        v.sort_by(|a, b| (a.saved_at, &a.session_id).cmp(&(b.saved_at, &b.session_id)));
        Ok(v)
    }

    fn saved_ids_with_prefix(&self, prefix: &str) -> StoreResult<Vec<String>> {
        let mut ids: Vec<String> = self
            .saved
            .lock()
            .sessions
            .keys()
            .filter(|k| k.starts_with(prefix))
            .cloned()
            .collect();
        ids.sort();
        Ok(ids)
    }

    fn saved_expired(&self, now: i64) -> StoreResult<Vec<String>> {
        Ok(self
            .saved
            .lock()
            .sessions
            .values()
            .filter(|s| s.expires_at <= now)
            .map(|s| s.session_id.clone())
            .collect())
    }

    fn chunk_totals(&self) -> StoreResult<(u64, u64)> {
        let saved = self.saved.lock();
        Ok((
            saved.chunks.len() as u64,
            saved.chunks.values().map(|c| c.1.len() as u64).sum(),
        ))
    }
}

/// One user fewer for each chunk; a chunk nobody uses is forgotten.
fn release(chunks: &mut HashMap<String, (u64, Vec<u8>)>, removed: &[String]) {
    for h in removed {
        if let Some(c) = chunks.get_mut(h) {
            c.0 = c.0.saturating_sub(1);
            if c.0 == 0 {
                chunks.remove(h);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn memory_store_behaves() {
        super::super::tests::exercise(&super::MemoryStore::new());
        super::super::testsuite::exercise_queries(&super::MemoryStore::new());
        super::super::testsuite::exercise_saved_sessions(&super::MemoryStore::new());
        super::super::testsuite::exercise_retention(&super::MemoryStore::new());
    }
}
