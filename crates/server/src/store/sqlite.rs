use std::path::Path;

use parking_lot::Mutex;
use rusqlite::{Connection, OptionalExtension, params};

use super::{IdemEntry, Phase, RunRecord, Store, StoreError, StoreResult};

/// Runs and idempotency entries in one SQLite file. A run is its JSON record plus the few
/// columns queries filter on.
pub struct SqliteStore {
    conn: Mutex<Connection>,
}

fn err(e: impl std::fmt::Display) -> StoreError {
    StoreError(e.to_string())
}

impl SqliteStore {
    pub fn open(path: &Path) -> StoreResult<SqliteStore> {
        if let Some(dir) = path.parent()
            && !dir.as_os_str().is_empty()
        {
            std::fs::create_dir_all(dir).map_err(|e| err(format!("{}: {e}", dir.display())))?;
        }
        let conn = Connection::open(path).map_err(|e| err(format!("{}: {e}", path.display())))?;
        // WAL keeps readers off the writer's back; NORMAL is durable across process crashes,
        // which is what a restart needs.
        conn.execute_batch(
            "PRAGMA journal_mode=WAL;
             PRAGMA synchronous=NORMAL;
             PRAGMA busy_timeout=5000;
             CREATE TABLE IF NOT EXISTS runs (
                 id TEXT PRIMARY KEY,
                 user_id TEXT NOT NULL,
                 phase TEXT NOT NULL,
                 finished_at INTEGER,
                 artifact_bytes INTEGER NOT NULL DEFAULT 0,
                 has_artifacts INTEGER NOT NULL DEFAULT 0,
                 body TEXT NOT NULL
             );
             CREATE INDEX IF NOT EXISTS runs_phase ON runs(phase);
             CREATE INDEX IF NOT EXISTS runs_user ON runs(user_id);
             CREATE TABLE IF NOT EXISTS idempotency (
                 endpoint TEXT NOT NULL,
                 user_id TEXT NOT NULL,
                 key TEXT NOT NULL,
                 created_at INTEGER NOT NULL,
                 body TEXT NOT NULL,
                 PRIMARY KEY (endpoint, user_id, key)
             );",
        )
        .map_err(err)?;
        Ok(SqliteStore {
            conn: Mutex::new(conn),
        })
    }
}

fn decode_run(body: String) -> StoreResult<RunRecord> {
    serde_json::from_str(&body).map_err(|e| err(format!("corrupt run record: {e}")))
}

impl Store for SqliteStore {
    fn mode(&self) -> &'static str {
        "sqlite"
    }

    fn blocking(&self) -> bool {
        true
    }

    fn put_run(&self, run: &RunRecord) -> StoreResult<()> {
        let body = serde_json::to_string(run).map_err(err)?;
        let has = !run.artifacts.is_empty() && !run.artifacts_expired;
        self.conn
            .lock()
            .execute(
                "INSERT OR REPLACE INTO runs (id, user_id, phase, finished_at, artifact_bytes, has_artifacts, body)
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)",
                params![
                    run.id,
                    run.user_id,
                    run.phase.as_str(),
                    run.finished_at,
                    if has { run.resource_usage.artifact_bytes as i64 } else { 0 },
                    has,
                    body
                ],
            )
            .map_err(err)?;
        Ok(())
    }

    fn get_run(&self, id: &str) -> StoreResult<Option<RunRecord>> {
        let body: Option<String> = self
            .conn
            .lock()
            .query_row("SELECT body FROM runs WHERE id = ?1", [id], |r| r.get(0))
            .optional()
            .map_err(err)?;
        body.map(decode_run).transpose()
    }

    fn fail_unfinished(&self, reason_code: &str, message: &str, now: i64) -> StoreResult<usize> {
        let mut conn = self.conn.lock();
        let tx = conn.transaction().map_err(err)?;
        let bodies: Vec<String> = {
            let mut st = tx
                .prepare(
                    "SELECT body FROM runs WHERE phase NOT IN ('completed','failed','timed_out','killed')",
                )
                .map_err(err)?;
            st.query_map([], |r| r.get(0))
                .map_err(err)?
                .collect::<Result<_, _>>()
                .map_err(err)?
        };
        let n = bodies.len();
        for body in bodies {
            let mut r = decode_run(body)?;
            r.phase = Phase::Failed;
            r.reason_code = Some(reason_code.into());
            r.message = Some(message.into());
            r.finished_at = Some(now);
            let body = serde_json::to_string(&r).map_err(err)?;
            tx.execute(
                "UPDATE runs SET phase = ?2, finished_at = ?3, body = ?4 WHERE id = ?1",
                params![r.id, r.phase.as_str(), now, body],
            )
            .map_err(err)?;
        }
        tx.commit().map_err(err)?;
        Ok(n)
    }

    fn runs_with_artifacts_before(&self, cutoff: i64) -> StoreResult<Vec<RunRecord>> {
        let conn = self.conn.lock();
        let mut st = conn
            .prepare("SELECT body FROM runs WHERE has_artifacts = 1 AND finished_at < ?1")
            .map_err(err)?;
        let bodies: Vec<String> = st
            .query_map([cutoff], |r| r.get(0))
            .map_err(err)?
            .collect::<Result<_, _>>()
            .map_err(err)?;
        bodies.into_iter().map(decode_run).collect()
    }

    fn user_artifact_bytes(&self, user_id: &str) -> StoreResult<u64> {
        let n: i64 = self
            .conn
            .lock()
            .query_row(
                "SELECT COALESCE(SUM(artifact_bytes), 0) FROM runs WHERE user_id = ?1 AND has_artifacts = 1",
                [user_id],
                |r| r.get(0),
            )
            .map_err(err)?;
        Ok(n.max(0) as u64)
    }

    fn idem_get(&self, endpoint: &str, user_id: &str, key: &str) -> StoreResult<Option<IdemEntry>> {
        let body: Option<String> = self
            .conn
            .lock()
            .query_row(
                "SELECT body FROM idempotency WHERE endpoint = ?1 AND user_id = ?2 AND key = ?3",
                params![endpoint, user_id, key],
                |r| r.get(0),
            )
            .optional()
            .map_err(err)?;
        body.map(|b| serde_json::from_str(&b).map_err(err))
            .transpose()
    }

    fn idem_put(&self, entry: &IdemEntry) -> StoreResult<()> {
        let body = serde_json::to_string(entry).map_err(err)?;
        self.conn
            .lock()
            .execute(
                "INSERT OR REPLACE INTO idempotency (endpoint, user_id, key, created_at, body)
                 VALUES (?1, ?2, ?3, ?4, ?5)",
                params![
                    entry.endpoint,
                    entry.user_id,
                    entry.key,
                    entry.created_at,
                    body
                ],
            )
            .map_err(err)?;
        Ok(())
    }

    fn list_runs(&self) -> StoreResult<Vec<RunRecord>> {
        let conn = self.conn.lock();
        let mut st = conn.prepare("SELECT body FROM runs").map_err(err)?;
        let bodies: Vec<String> = st
            .query_map([], |r| r.get(0))
            .map_err(err)?
            .collect::<Result<_, _>>()
            .map_err(err)?;
        bodies.into_iter().map(decode_run).collect()
    }

    fn list_idempotency(&self) -> StoreResult<Vec<IdemEntry>> {
        let conn = self.conn.lock();
        let mut st = conn.prepare("SELECT body FROM idempotency").map_err(err)?;
        let bodies: Vec<String> = st
            .query_map([], |r| r.get(0))
            .map_err(err)?
            .collect::<Result<_, _>>()
            .map_err(err)?;
        bodies
            .into_iter()
            .map(|b| serde_json::from_str(&b).map_err(err))
            .collect()
    }

    fn idem_purge(&self, cutoff: i64) -> StoreResult<usize> {
        self.conn
            .lock()
            .execute("DELETE FROM idempotency WHERE created_at < ?1", [cutoff])
            .map_err(err)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sqlite_store_behaves_and_survives_reopening() {
        let dir = std::env::temp_dir().join(format!("wasmsand-store-{}", uuid::Uuid::new_v4()));
        let path = dir.join("meta").join("s.db");
        super::super::tests::exercise(&SqliteStore::open(&path).unwrap());
        let mut r = super::super::tests::sample_run("kept", Phase::Completed);
        r.finished_at = Some(9);
        SqliteStore::open(&path).unwrap().put_run(&r).unwrap();
        let again = SqliteStore::open(&path).unwrap();
        assert_eq!(again.get_run("kept").unwrap().unwrap(), r);
        let _ = std::fs::remove_dir_all(dir);
    }
}
