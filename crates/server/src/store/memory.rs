use std::collections::HashMap;

use parking_lot::Mutex;

use super::{AuditEvent, AuditQuery, IdemEntry, Phase, RunRecord, Store, StoreResult, UserUsage};

/// Most audit events kept in memory; the oldest go first.
const MAX_AUDIT_EVENTS: usize = 100_000;

/// Everything in maps; gone with the process.
#[derive(Default)]
pub struct MemoryStore {
    runs: Mutex<HashMap<String, RunRecord>>,
    idem: Mutex<HashMap<(String, String, String), IdemEntry>>,
    audit: Mutex<std::collections::VecDeque<AuditEvent>>,
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

    fn list_idempotency(&self) -> StoreResult<Vec<IdemEntry>> {
        Ok(self.idem.lock().values().cloned().collect())
    }

    fn idem_purge(&self, cutoff: i64) -> StoreResult<usize> {
        let mut m = self.idem.lock();
        let before = m.len();
        m.retain(|_, e| e.created_at >= cutoff);
        Ok(before - m.len())
    }

    fn user_usage(
        &self,
        user_id: &str,
        minute_from: i64,
        day_from: i64,
        now: i64,
    ) -> StoreResult<UserUsage> {
        let mut u = UserUsage::default();
        for r in self.runs.lock().values().filter(|r| r.user_id == user_id) {
            u.add(r, minute_from, day_from, now);
        }
        Ok(u)
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
}

#[cfg(test)]
mod tests {
    #[test]
    fn memory_store_behaves() {
        super::super::tests::exercise(&super::MemoryStore::new());
        super::super::testsuite::exercise_queries(&super::MemoryStore::new());
    }
}
