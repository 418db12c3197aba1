use std::path::Path;

use parking_lot::Mutex;
use rusqlite::{Connection, OptionalExtension, TransactionBehavior, params};

use super::{
    AuditEvent, AuditQuery, IdemEntry, Phase, RunPage, RunQuery, RunRecord, RunSort, SavedSession,
    Store, StoreError, StoreResult, UserLimits, UserUsage,
};

/// Runs and idempotency entries in one SQLite file. A run is its JSON record plus the few
/// columns queries filter on.
pub struct SqliteStore {
    conn: Mutex<Connection>,
}

fn err(e: impl std::fmt::Display) -> StoreError {
    StoreError(e.to_string())
}

impl SqliteStore {
    /// Opens (creating it and its directory when missing) and migrates the database at
    /// `path`.
    pub fn open(path: &Path) -> StoreResult<SqliteStore> {
        if let Some(dir) = path.parent()
            && !dir.as_os_str().is_empty()
        {
            std::fs::create_dir_all(dir).map_err(|e| err(format!("{}: {e}", dir.display())))?;
        }
        let mut conn =
            Connection::open(path).map_err(|e| err(format!("{}: {e}", path.display())))?;
        // First of all, so that every statement after it (switching to WAL included) waits
        // for a lock another process holds instead of failing at once: a restarted server
        // opens the file while the old process may still be closing it.
        conn.busy_timeout(BUSY_TIMEOUT).map_err(err)?;
        // WAL keeps readers off the writer's back; NORMAL is durable across process crashes,
        // which is what a restart needs.
        set_wal(&conn, BUSY_TIMEOUT)?;
        // The admin list's `q` folds case as the in-memory reference does (Unicode, where
        // SQLite's own lower() folds ASCII only).
        conn.create_scalar_function(
            "rust_lower",
            1,
            rusqlite::functions::FunctionFlags::SQLITE_UTF8
                | rusqlite::functions::FunctionFlags::SQLITE_DETERMINISTIC,
            |ctx| Ok(ctx.get::<Option<String>>(0)?.map(|s| s.to_lowercase())),
        )
        .map_err(err)?;
        migrate(&mut conn)?;
        Ok(SqliteStore {
            conn: Mutex::new(conn),
        })
    }

    /// Stores many runs in one transaction (imports, benchmarks): as `put_run` on each.
    pub fn put_runs(&self, runs: &[RunRecord]) -> StoreResult<()> {
        let mut conn = self.conn.lock();
        let tx = conn
            .transaction_with_behavior(TransactionBehavior::Immediate)
            .map_err(err)?;
        for r in runs {
            put_run(&tx, r)?;
        }
        tx.commit().map_err(err)
    }
}

/// How long a statement waits for a lock another connection holds.
const BUSY_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(5);

/// Switches the file to WAL. Changing the journal mode of a file another connection is
/// converting at the same moment (several processes opening a new file) answers SQLITE_BUSY
/// at once: SQLite does not call the busy handler for it. So it is asked again until the
/// other connection is done, within the same budget the busy handler has.
fn set_wal(conn: &Connection, budget: std::time::Duration) -> StoreResult<()> {
    let start = std::time::Instant::now();
    loop {
        match conn.execute_batch("PRAGMA journal_mode=WAL; PRAGMA synchronous=NORMAL;") {
            Ok(()) => return Ok(()),
            Err(rusqlite::Error::SqliteFailure(e, _))
                if e.code == rusqlite::ErrorCode::DatabaseBusy && start.elapsed() < budget =>
            {
                std::thread::sleep(std::time::Duration::from_millis(5));
            }
            Err(e) => return Err(err(e)),
        }
    }
}

/// Columns of `runs` the admin list filters and sorts on, besides the JSON body: added to
/// files of earlier versions and filled from their bodies (`PRAGMA user_version` 1).
const LIST_COLUMNS: &[(&str, &str)] = &[
    ("created_at", "INTEGER"),
    ("started_at", "INTEGER"),
    ("runtime", "TEXT"),
    ("base_image", "TEXT"),
    ("image_digest", "TEXT"),
    ("message", "TEXT"),
    ("node_id", "TEXT"),
    ("worker_id", "TEXT"),
];

fn migrate(conn: &mut Connection) -> StoreResult<()> {
    // One IMMEDIATE transaction takes the write lock before the version is read: of two
    // processes opening one file at once, the second waits and then finds it migrated.
    let tx = conn
        .transaction_with_behavior(TransactionBehavior::Immediate)
        .map_err(err)?;
    tx.execute_batch(SCHEMA).map_err(err)?;
    let version: i64 = tx
        .query_row("PRAGMA user_version", [], |r| r.get(0))
        .map_err(err)?;
    if version < 1 {
        migrate_list_columns(&tx)?;
    }
    if version < 2 {
        migrate_text_index(&tx)?;
    }
    if version < 3 {
        migrate_lowered_text(&tx)?;
    }
    if version < 4 {
        tx.execute_batch(SAVED_SESSIONS).map_err(err)?;
    }
    if version < 5 {
        tx.execute_batch(USAGE_INDEXES).map_err(err)?;
    }
    tx.commit().map_err(err)
}

/// The tables of the first version, which the migrations below build on.
const SCHEMA: &str = "
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
    );
    CREATE TABLE IF NOT EXISTS audit (
        seq INTEGER PRIMARY KEY AUTOINCREMENT,
        id TEXT NOT NULL UNIQUE,
        ts INTEGER NOT NULL,
        event TEXT NOT NULL,
        user_id TEXT NOT NULL,
        run_id TEXT,
        session_id TEXT,
        body TEXT NOT NULL
    );
    CREATE INDEX IF NOT EXISTS audit_run ON audit(run_id);
    CREATE INDEX IF NOT EXISTS audit_user ON audit(user_id);
    CREATE INDEX IF NOT EXISTS audit_ts ON audit(ts);
";

/// Version 3: the text a `q` too short for a trigram searches, lowered, in a narrow table of
/// its own, kept in step by triggers. Such a needle is tested against every run: reading a
/// few lowered bytes a run instead of each run's row (about 1 KiB with its record) and
/// calling no function per row makes that several times faster. The triggers call
/// `rust_lower`, which every connection of this store registers before it writes.
fn migrate_lowered_text(tx: &Connection) -> StoreResult<()> {
    tx.execute_batch(
        "CREATE TABLE runs_lower (
             seq INTEGER PRIMARY KEY,
             image TEXT NOT NULL,
             message TEXT NOT NULL
         );
         INSERT INTO runs_lower (seq, image, message)
             SELECT seq, rust_lower(base_image), coalesce(rust_lower(message), '') FROM runs;
         CREATE TRIGGER runs_lower_insert AFTER INSERT ON runs BEGIN
             INSERT OR REPLACE INTO runs_lower (seq, image, message)
             VALUES (new.seq, rust_lower(new.base_image), coalesce(rust_lower(new.message), ''));
         END;
         CREATE TRIGGER runs_lower_delete AFTER DELETE ON runs BEGIN
             DELETE FROM runs_lower WHERE seq = old.seq;
         END;
         CREATE TRIGGER runs_lower_update AFTER UPDATE OF base_image, message, seq ON runs
         WHEN old.base_image IS NOT new.base_image OR old.message IS NOT new.message
             OR old.seq IS NOT new.seq
         BEGIN
             DELETE FROM runs_lower WHERE seq = old.seq;
             INSERT OR REPLACE INTO runs_lower (seq, image, message)
             VALUES (new.seq, rust_lower(new.base_image), coalesce(rust_lower(new.message), ''));
         END;
         PRAGMA user_version = 3;",
    )
    .map_err(err)
}

/// Version 4: sessions' checkpoints and their content-addressed chunks (`refs`: how many
/// checkpoints list the chunk; it goes when that falls to 0).
const SAVED_SESSIONS: &str = "
    CREATE TABLE saved_sessions (
        id TEXT PRIMARY KEY,
        user_id TEXT NOT NULL,
        saved_at INTEGER NOT NULL,
        expires_at INTEGER NOT NULL,
        body TEXT NOT NULL
    );
    CREATE INDEX saved_sessions_user ON saved_sessions(user_id, saved_at);
    CREATE INDEX saved_sessions_expires ON saved_sessions(expires_at);
    CREATE TABLE session_chunks (
        hash TEXT PRIMARY KEY,
        refs INTEGER NOT NULL,
        data BLOB NOT NULL
    );
    PRAGMA user_version = 4;";

/// Version 5: an admission finds a user's unfinished runs and the runs of its quota window
/// from these, without reading the rest of the user's history (see `user_usage`).
const USAGE_INDEXES: &str = "
    CREATE INDEX runs_user_phase ON runs(user_id, phase);
    CREATE INDEX runs_user_created ON runs(user_id, created_at);
    PRAGMA user_version = 5;";

/// Version 2: the admin list's `q` (a substring of `base_image` or `message`) answered from
/// an FTS5 trigram index instead of reading every run. The index reads its text from
/// `runs` (external content) and triggers keep it in step with every write, whoever makes
/// it. Its key is `seq`, a number given to each run once: a table without an INTEGER
/// PRIMARY KEY may see its rowids renumbered by VACUUM, which would detach the index.
/// The head of the admin list's conditions that consult the text index or the lowered text.
const TEXT_MATCH: &str = "seq IN";
/// The condition that tests a short needle against the lowered text (version 3).
const LOWER_MATCH: &str =
    "seq IN (SELECT seq FROM runs_lower WHERE instr(image, ?) > 0 OR instr(message, ?) > 0)";

fn migrate_text_index(tx: &Connection) -> StoreResult<()> {
    tx.execute_batch(
        "ALTER TABLE runs ADD COLUMN seq INTEGER;
         UPDATE runs SET seq = rowid;
         CREATE UNIQUE INDEX runs_seq ON runs(seq);
         CREATE VIRTUAL TABLE runs_text USING fts5(
             base_image, message, content='runs', content_rowid='seq', tokenize='trigram');
         CREATE TRIGGER runs_text_insert AFTER INSERT ON runs BEGIN
             INSERT INTO runs_text(rowid, base_image, message)
             VALUES (new.seq, new.base_image, new.message);
         END;
         CREATE TRIGGER runs_text_delete AFTER DELETE ON runs BEGIN
             INSERT INTO runs_text(runs_text, rowid, base_image, message)
             VALUES ('delete', old.seq, old.base_image, old.message);
         END;
         CREATE TRIGGER runs_text_update AFTER UPDATE OF base_image, message, seq ON runs
         WHEN old.base_image IS NOT new.base_image OR old.message IS NOT new.message
             OR old.seq IS NOT new.seq
         BEGIN
             INSERT INTO runs_text(runs_text, rowid, base_image, message)
             VALUES ('delete', old.seq, old.base_image, old.message);
             INSERT INTO runs_text(rowid, base_image, message)
             VALUES (new.seq, new.base_image, new.message);
         END;
         INSERT INTO runs_text(runs_text) VALUES ('rebuild');
         PRAGMA user_version = 2;",
    )
    .map_err(err)
}

fn migrate_list_columns(tx: &Connection) -> StoreResult<()> {
    let have: Vec<String> = {
        let mut st = tx.prepare("PRAGMA table_info(runs)").map_err(err)?;
        st.query_map([], |r| r.get::<_, String>(1))
            .map_err(err)?
            .collect::<Result<_, _>>()
            .map_err(err)?
    };
    for (col, ty) in LIST_COLUMNS {
        if !have.iter().any(|h| h == col) {
            tx.execute_batch(&format!(
                "ALTER TABLE runs ADD COLUMN {col} {ty};
                 UPDATE runs SET {col} = json_extract(body, '$.{col}');"
            ))
            .map_err(err)?;
        }
    }
    // NULL sorts first ascending and last descending in SQLite, as the admin list wants:
    // one index serves both directions of each sort.
    tx.execute_batch(
        "CREATE INDEX IF NOT EXISTS runs_started ON runs(started_at, created_at, id);
         CREATE INDEX IF NOT EXISTS runs_finished ON runs(finished_at, created_at, id);
         CREATE INDEX IF NOT EXISTS runs_user_started ON runs(user_id, started_at, created_at, id);
         CREATE INDEX IF NOT EXISTS runs_runtime ON runs(runtime);
         CREATE INDEX IF NOT EXISTS runs_image_digest ON runs(image_digest);
         CREATE INDEX IF NOT EXISTS runs_base_image ON runs(base_image);
         CREATE INDEX IF NOT EXISTS runs_node ON runs(node_id, started_at, created_at, id);
         CREATE INDEX IF NOT EXISTS runs_worker ON runs(worker_id);
         PRAGMA user_version = 1;",
    )
    .map_err(err)
}

fn put_run(conn: &Connection, run: &RunRecord) -> StoreResult<()> {
    let body = serde_json::to_string(run).map_err(err)?;
    let has = !run.artifacts.is_empty() && !run.artifacts_expired;
    // An upsert, not INSERT OR REPLACE: the replaced row's delete would not fire the text
    // index's trigger (recursive triggers are off), and the run keeps its `seq`.
    conn.prepare_cached(
        "INSERT INTO runs (id, user_id, phase, finished_at, artifact_bytes,
             has_artifacts, body, created_at, started_at, runtime, base_image, image_digest,
             message, node_id, worker_id, seq)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, ?15,
             (SELECT COALESCE(MAX(seq), 0) + 1 FROM runs))
         ON CONFLICT (id) DO UPDATE SET user_id = excluded.user_id, phase = excluded.phase,
             finished_at = excluded.finished_at, artifact_bytes = excluded.artifact_bytes,
             has_artifacts = excluded.has_artifacts, body = excluded.body,
             created_at = excluded.created_at, started_at = excluded.started_at,
             runtime = excluded.runtime, base_image = excluded.base_image,
             image_digest = excluded.image_digest, message = excluded.message,
             node_id = excluded.node_id, worker_id = excluded.worker_id",
    )
    .map_err(err)?
    .execute(params![
        run.id,
        run.user_id,
        run.phase.as_str(),
        run.finished_at,
        if has {
            run.resource_usage.artifact_bytes as i64
        } else {
            0
        },
        has,
        body,
        run.created_at,
        run.started_at,
        run.runtime,
        run.base_image,
        run.image_digest,
        run.message,
        run.node_id,
        run.worker_id,
    ])
    .map_err(err)?;
    Ok(())
}

fn saved_of(conn: &Connection, id: &str) -> StoreResult<Option<SavedSession>> {
    let body: Option<String> = conn
        .query_row("SELECT body FROM saved_sessions WHERE id = ?1", [id], |r| {
            r.get(0)
        })
        .optional()
        .map_err(err)?;
    body.map(|b| serde_json::from_str(&b).map_err(err))
        .transpose()
}

/// One checkpoint fewer lists each of these chunks; those no checkpoint lists go.
fn release(conn: &Connection, removed: &[String]) -> StoreResult<()> {
    let mut down = conn
        .prepare_cached("UPDATE session_chunks SET refs = refs - 1 WHERE hash = ?1")
        .map_err(err)?;
    let mut gone = conn
        .prepare_cached("DELETE FROM session_chunks WHERE hash = ?1 AND refs <= 0")
        .map_err(err)?;
    for h in removed {
        down.execute([h]).map_err(err)?;
        gone.execute([h]).map_err(err)?;
    }
    Ok(())
}

fn user_usage(
    conn: &Connection,
    user_id: &str,
    from: i64,
    minute_from: i64,
    day_from: i64,
    now: i64,
) -> StoreResult<UserUsage> {
    // The user's unfinished runs, then its finished ones created since `from`: two index
    // ranges, so the cost follows what is counted, not how many runs the user ever made.
    let mut st = conn
        .prepare_cached(
            "SELECT body FROM runs WHERE user_id = ?1
                 AND phase IN ('queued','starting','running')
             UNION ALL
             SELECT body FROM runs WHERE user_id = ?1 AND created_at >= ?2
                 AND phase IN ('completed','failed','timed_out','killed')",
        )
        .map_err(err)?;
    let bodies: Vec<String> = st
        .query_map(params![user_id, from], |r| r.get(0))
        .map_err(err)?
        .collect::<Result<_, _>>()
        .map_err(err)?;
    let mut u = UserUsage::default();
    for b in bodies {
        u.add(&decode_run(b)?, minute_from, day_from, now);
    }
    Ok(u)
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
        put_run(&self.conn.lock(), run)
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
        // IMMEDIATE, as every transaction here that reads before it writes: a deferred one
        // whose snapshot another process's commit has made stale cannot take the write lock
        // and fails at once, busy timeout or not (a restart racing the old process's last
        // writes did).
        let tx = conn
            .transaction_with_behavior(TransactionBehavior::Immediate)
            .map_err(err)?;
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
                "UPDATE runs SET phase = ?2, finished_at = ?3, body = ?4, message = ?5 WHERE id = ?1",
                params![r.id, r.phase.as_str(), now, body, r.message],
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

    fn runs_purge(&self, cutoff: i64, limit: usize) -> StoreResult<Vec<RunRecord>> {
        let mut conn = self.conn.lock();
        let tx = conn
            .transaction_with_behavior(TransactionBehavior::Immediate)
            .map_err(err)?;
        let bodies: Vec<String> = {
            let mut st = tx
                .prepare(
                    "DELETE FROM runs WHERE id IN (
                         SELECT id FROM runs
                         WHERE finished_at IS NOT NULL AND finished_at < ?1
                           AND phase IN ('completed', 'failed', 'timed_out', 'killed')
                         ORDER BY finished_at LIMIT ?2)
                     RETURNING body",
                )
                .map_err(err)?;
            st.query_map(rusqlite::params![cutoff, limit as i64], |r| r.get(0))
                .map_err(err)?
                .collect::<Result<_, _>>()
                .map_err(err)?
        };
        tx.commit().map_err(err)?;
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

    fn idem_claim(
        &self,
        claim: &IdemEntry,
        expired_before: i64,
        stale_before: i64,
    ) -> StoreResult<Option<IdemEntry>> {
        let mut conn = self.conn.lock();
        // IMMEDIATE: the write lock is taken before the read, so two processes sharing the
        // file cannot both find the key free.
        let tx = conn
            .transaction_with_behavior(TransactionBehavior::Immediate)
            .map_err(err)?;
        let prior: Option<String> = tx
            .query_row(
                "SELECT body FROM idempotency WHERE endpoint = ?1 AND user_id = ?2 AND key = ?3",
                params![claim.endpoint, claim.user_id, claim.key],
                |r| r.get(0),
            )
            .optional()
            .map_err(err)?;
        if let Some(prior) = prior {
            let prior: IdemEntry = serde_json::from_str(&prior).map_err(err)?;
            if !prior.replaceable(expired_before, stale_before) {
                return Ok(Some(prior));
            }
        }
        tx.execute(
            "INSERT OR REPLACE INTO idempotency (endpoint, user_id, key, created_at, body)
             VALUES (?1, ?2, ?3, ?4, ?5)",
            params![
                claim.endpoint,
                claim.user_id,
                claim.key,
                claim.created_at,
                serde_json::to_string(claim).map_err(err)?
            ],
        )
        .map_err(err)?;
        tx.commit().map_err(err)?;
        Ok(None)
    }

    fn idem_release(&self, endpoint: &str, user_id: &str, key: &str) -> StoreResult<()> {
        self.conn
            .lock()
            .execute(
                "DELETE FROM idempotency WHERE endpoint = ?1 AND user_id = ?2 AND key = ?3
                 AND json_extract(body, '$.status') = 0",
                params![endpoint, user_id, key],
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

    fn user_usage(
        &self,
        user_id: &str,
        minute_from: i64,
        day_from: i64,
        now: i64,
    ) -> StoreResult<UserUsage> {
        let from = minute_from.min(day_from);
        user_usage(&self.conn.lock(), user_id, from, minute_from, day_from, now)
    }

    fn admit_run(
        &self,
        run: &RunRecord,
        limits: &UserLimits,
        minute_from: i64,
        day_from: i64,
        now: i64,
    ) -> StoreResult<(UserUsage, bool)> {
        // One connection serves the process, and a file serves one process: the lock held
        // from the count to the insert makes the pair one step; the transaction makes it
        // one write.
        let mut conn = self.conn.lock();
        let tx = conn
            .transaction_with_behavior(TransactionBehavior::Immediate)
            .map_err(err)?;
        let (u, ok) = limits.check(run, minute_from, day_from, |from| {
            user_usage(&tx, &run.user_id, from, minute_from, day_from, now)
        })?;
        if ok {
            put_run(&tx, run)?;
        }
        tx.commit().map_err(err)?;
        Ok((u, ok))
    }

    fn put_audit(&self, e: &AuditEvent) -> StoreResult<()> {
        let body = serde_json::to_string(&e.body).map_err(err)?;
        self.conn
            .lock()
            .execute(
                "INSERT INTO audit (id, ts, event, user_id, run_id, session_id, body)
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)",
                params![e.id, e.ts, e.event, e.user_id, e.run_id, e.session_id, body],
            )
            .map_err(err)?;
        Ok(())
    }

    fn list_audit(&self, q: &AuditQuery) -> StoreResult<(Vec<AuditEvent>, usize)> {
        let filter = "(?1 IS NULL OR user_id = ?1) AND (?2 IS NULL OR run_id = ?2)
                      AND (?3 IS NULL OR session_id = ?3) AND (?4 IS NULL OR event = ?4)";
        let conn = self.conn.lock();
        let args = params![q.user_id, q.run_id, q.session_id, q.event];
        let total: i64 = conn
            .query_row(
                &format!("SELECT COUNT(*) FROM audit WHERE {filter}"),
                args,
                |r| r.get(0),
            )
            .map_err(err)?;
        let mut st = conn
            .prepare(&format!(
                "SELECT id, ts, event, user_id, run_id, session_id, body FROM audit
                 WHERE {filter} ORDER BY seq LIMIT ?5 OFFSET ?6"
            ))
            .map_err(err)?;
        let rows = st
            .query_map(
                params![
                    q.user_id,
                    q.run_id,
                    q.session_id,
                    q.event,
                    q.limit as i64,
                    q.offset as i64
                ],
                |r| {
                    Ok((
                        AuditEvent {
                            id: r.get(0)?,
                            ts: r.get(1)?,
                            event: r.get(2)?,
                            user_id: r.get(3)?,
                            run_id: r.get(4)?,
                            session_id: r.get(5)?,
                            body: serde_json::Value::Null,
                        },
                        r.get::<_, String>(6)?,
                    ))
                },
            )
            .map_err(err)?
            .collect::<Result<Vec<_>, _>>()
            .map_err(err)?;
        let events = rows
            .into_iter()
            .map(|(mut e, body)| {
                e.body = serde_json::from_str(&body).map_err(err)?;
                Ok(e)
            })
            .collect::<StoreResult<Vec<_>>>()?;
        Ok((events, total.max(0) as usize))
    }

    fn chunks_missing(&self, hashes: &[String]) -> StoreResult<Vec<String>> {
        let conn = self.conn.lock();
        let mut st = conn
            .prepare_cached("SELECT 1 FROM session_chunks WHERE hash = ?1")
            .map_err(err)?;
        let mut out = Vec::new();
        for h in hashes {
            if !st.exists([h]).map_err(err)? {
                out.push(h.clone());
            }
        }
        Ok(out)
    }

    fn session_save(
        &self,
        saved: &SavedSession,
        chunks: &[(String, Vec<u8>)],
    ) -> StoreResult<Vec<String>> {
        let mut conn = self.conn.lock();
        let tx = conn
            .transaction_with_behavior(TransactionBehavior::Immediate)
            .map_err(err)?;
        let old = saved_of(&tx, &saved.session_id)?.map(|o| o.chunks);
        let (added, removed) = super::chunk_diff(old.as_deref().unwrap_or(&[]), &saved.chunks);
        {
            let mut put = tx
                .prepare_cached(
                    "INSERT INTO session_chunks (hash, refs, data) VALUES (?1, 0, ?2)
                     ON CONFLICT(hash) DO NOTHING",
                )
                .map_err(err)?;
            for (h, data) in chunks {
                put.execute(params![h, data]).map_err(err)?;
            }
            let mut up = tx
                .prepare_cached("UPDATE session_chunks SET refs = refs + 1 WHERE hash = ?1")
                .map_err(err)?;
            let mut missing = Vec::new();
            for h in &added {
                if up.execute([h]).map_err(err)? == 0 {
                    missing.push(h.clone());
                }
            }
            if !missing.is_empty() {
                // Dropping the transaction rolls it back.
                return Ok(missing);
            }
            release(&tx, &removed)?;
            let mut unused = tx
                .prepare_cached("DELETE FROM session_chunks WHERE hash = ?1 AND refs <= 0")
                .map_err(err)?;
            for (h, _) in chunks {
                unused.execute([h]).map_err(err)?;
            }
        }
        let body = serde_json::to_string(saved).map_err(err)?;
        tx.execute(
            "INSERT INTO saved_sessions (id, user_id, saved_at, expires_at, body)
             VALUES (?1, ?2, ?3, ?4, ?5)
             ON CONFLICT(id) DO UPDATE SET user_id = excluded.user_id,
                 saved_at = excluded.saved_at, expires_at = excluded.expires_at,
                 body = excluded.body",
            params![
                saved.session_id,
                saved.user_id,
                saved.saved_at,
                saved.expires_at,
                body
            ],
        )
        .map_err(err)?;
        tx.commit().map_err(err)?;
        Ok(Vec::new())
    }

    fn session_saved(&self, session_id: &str) -> StoreResult<Option<SavedSession>> {
        saved_of(&self.conn.lock(), session_id)
    }

    fn chunks_get(&self, hashes: &[String]) -> StoreResult<Vec<(String, Vec<u8>)>> {
        let conn = self.conn.lock();
        let mut st = conn
            .prepare_cached("SELECT data FROM session_chunks WHERE hash = ?1")
            .map_err(err)?;
        let mut out = Vec::with_capacity(hashes.len());
        let mut seen = std::collections::HashSet::new();
        for h in hashes {
            if !seen.insert(h) {
                continue;
            }
            if let Some(data) = st
                .query_row([h], |r| r.get::<_, Vec<u8>>(0))
                .optional()
                .map_err(err)?
            {
                out.push((h.clone(), data));
            }
        }
        Ok(out)
    }

    fn session_forget(&self, session_id: &str) -> StoreResult<bool> {
        let mut conn = self.conn.lock();
        let tx = conn
            .transaction_with_behavior(TransactionBehavior::Immediate)
            .map_err(err)?;
        let Some(old) = saved_of(&tx, session_id)? else {
            return Ok(false);
        };
        let (_, removed) = super::chunk_diff(&old.chunks, &[]);
        release(&tx, &removed)?;
        tx.execute("DELETE FROM saved_sessions WHERE id = ?1", [session_id])
            .map_err(err)?;
        tx.commit().map_err(err)?;
        Ok(true)
    }

    fn saved_sessions(&self, user_id: Option<&str>) -> StoreResult<Vec<SavedSession>> {
        let conn = self.conn.lock();
        let mut st = conn
            .prepare_cached(
                "SELECT body FROM saved_sessions WHERE ?1 IS NULL OR user_id = ?1
                 ORDER BY saved_at, id",
            )
            .map_err(err)?;
        let bodies: Vec<String> = st
            .query_map([user_id], |r| r.get(0))
            .map_err(err)?
            .collect::<Result<_, _>>()
            .map_err(err)?;
        bodies
            .iter()
            .map(|b| serde_json::from_str(b).map_err(err))
            .collect()
    }

    fn saved_ids_with_prefix(&self, prefix: &str) -> StoreResult<Vec<String>> {
        let conn = self.conn.lock();
        let mut st = conn
            .prepare_cached(
                "SELECT id FROM saved_sessions WHERE substr(id, 1, length(?1)) = ?1 ORDER BY id",
            )
            .map_err(err)?;
        st.query_map([prefix], |r| r.get(0))
            .map_err(err)?
            .collect::<Result<_, _>>()
            .map_err(err)
    }

    fn saved_expired(&self, now: i64) -> StoreResult<Vec<String>> {
        let conn = self.conn.lock();
        let mut st = conn
            .prepare_cached("SELECT id FROM saved_sessions WHERE expires_at <= ?1")
            .map_err(err)?;
        st.query_map([now], |r| r.get(0))
            .map_err(err)?
            .collect::<Result<_, _>>()
            .map_err(err)
    }

    fn chunk_totals(&self) -> StoreResult<(u64, u64)> {
        self.conn
            .lock()
            .query_row(
                "SELECT COUNT(*), COALESCE(SUM(length(data)), 0) FROM session_chunks",
                [],
                |r| Ok((r.get::<_, i64>(0)? as u64, r.get::<_, i64>(1)? as u64)),
            )
            .map_err(err)
    }

    fn audit_purge(&self, cutoff: i64) -> StoreResult<usize> {
        self.conn
            .lock()
            .execute("DELETE FROM audit WHERE ts < ?1", [cutoff])
            .map_err(err)
    }

    fn query_runs(&self, q: &RunQuery) -> StoreResult<RunPage> {
        let mut conds: Vec<String> = Vec::new();
        let mut args: Vec<rusqlite::types::Value> = Vec::new();
        let mut bind = |conds: &mut Vec<String>, sql: &str, v: rusqlite::types::Value| {
            args.push(v);
            conds.push(sql.replace('?', &format!("?{}", args.len())));
        };
        for (col, v) in [
            ("user_id", &q.user_id),
            ("phase", &q.phase),
            ("runtime", &q.runtime),
            ("image_digest", &q.image_digest),
            ("base_image", &q.base_image),
            ("node_id", &q.node_id),
            ("worker_id", &q.worker_id),
        ] {
            if let Some(v) = v {
                bind(&mut conds, &format!("{col} = ?"), v.clone().into());
            }
        }
        if let Some(n) = &q.q {
            if n.chars().count() >= 3 && n.is_ascii() {
                // The trigram index answers a needle of 3 characters or more: its phrase
                // match is a substring match, case folded as the reference does for ASCII.
                bind(
                    &mut conds,
                    &format!("{TEXT_MATCH} (SELECT rowid FROM runs_text WHERE runs_text MATCH ?)"),
                    format!("\"{}\"", n.replace('"', "\"\"")).into(),
                );
            } else {
                // Shorter needles have no trigram, and beyond ASCII the index's case folding
                // is not Rust's: every run's lowered text is read. instr, not LIKE: no
                // wildcard to escape.
                bind(&mut conds, LOWER_MATCH, n.to_lowercase().into());
            }
        }
        for (col, from, to) in [
            ("started_at", q.started_from, q.started_to),
            ("finished_at", q.finished_from, q.finished_to),
        ] {
            if let Some(f) = from {
                bind(&mut conds, &format!("{col} >= ?"), f.into());
            }
            if let Some(t) = to {
                bind(&mut conds, &format!("{col} <= ?"), t.into());
            }
        }
        let where_ = if conds.is_empty() {
            String::new()
        } else {
            format!("WHERE {}", conds.join(" AND "))
        };
        let col = match q.sort {
            RunSort::StartedAt => "started_at",
            RunSort::FinishedAt => "finished_at",
        };
        let dir = if q.desc { "DESC" } else { "ASC" };
        let conn = self.conn.lock();
        // A text search alone is counted in its index or its table (one entry per run).
        let count = match conds.as_slice() {
            [only] if *only == LOWER_MATCH.replace('?', "?1") => {
                "SELECT COUNT(*) FROM runs_lower WHERE instr(image, ?1) > 0 OR instr(message, ?1) > 0"
                    .to_string()
            }
            [only] if only.starts_with(TEXT_MATCH) => {
                "SELECT COUNT(*) FROM runs_text WHERE runs_text MATCH ?1".to_string()
            }
            _ => format!("SELECT COUNT(*) FROM runs {where_}"),
        };
        let total: i64 = conn
            .prepare_cached(&count)
            .map_err(err)?
            .query_row(rusqlite::params_from_iter(args.iter()), |r| r.get(0))
            .map_err(err)?;
        // With many matches, the page walks the sort's index and tests each run against the
        // text search's matches (`+seq`: not through the seq index, which would fetch and
        // sort every match first): a common needle fills the page in a few steps. Few
        // matches are fetched and sorted: walking would read most of the index for them.
        let where_ = if total > 5_000 {
            where_.replace(TEXT_MATCH, &format!("+{TEXT_MATCH}"))
        } else {
            where_
        };
        // The page's row ids come from the indexes alone (the rows an offset skips are
        // never read), then only the page's records are.
        let rowids: Vec<i64> = conn
            .prepare_cached(&format!(
                "SELECT rowid FROM runs {where_}
                 ORDER BY {col} {dir}, created_at {dir}, id {dir} LIMIT {} OFFSET {}",
                q.limit, q.offset
            ))
            .map_err(err)?
            .query_map(rusqlite::params_from_iter(args.iter()), |r| r.get(0))
            .map_err(err)?
            .collect::<Result<_, _>>()
            .map_err(err)?;
        let mut get = conn
            .prepare_cached("SELECT body FROM runs WHERE rowid = ?1")
            .map_err(err)?;
        let items = rowids
            .into_iter()
            .map(|id| decode_run(get.query_row([id], |r| r.get(0)).map_err(err)?))
            .collect::<StoreResult<Vec<_>>>()?;
        Ok(RunPage {
            items,
            total: total.max(0) as u64,
        })
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
        super::super::testsuite::exercise_saved_sessions(&SqliteStore::open(&path).unwrap());
        super::super::testsuite::exercise_retention(&SqliteStore::open(&dir.join("r.db")).unwrap());
        let mut r = super::super::tests::sample_run("kept", Phase::Completed);
        r.finished_at = Some(9);
        SqliteStore::open(&path).unwrap().put_run(&r).unwrap();
        let again = SqliteStore::open(&path).unwrap();
        assert_eq!(again.get_run("kept").unwrap().unwrap(), r);
        let _ = std::fs::remove_dir_all(dir);
    }

    /// A restarted server fails the runs left in flight while the old process may still be
    /// writing its last records to the same file: the read-then-write must wait for the
    /// other writer, not fail with "database is locked" (it did, as a deferred transaction).
    #[test]
    fn failing_unfinished_runs_waits_for_another_process_writing() {
        let dir = std::env::temp_dir().join(format!("wasmsand-store-{}", uuid::Uuid::new_v4()));
        let path = dir.join("s.db");
        let store = SqliteStore::open(&path).unwrap();
        let writer_path = path.clone();
        let writer = std::thread::spawn(move || {
            let c = Connection::open(&writer_path).unwrap();
            c.busy_timeout(std::time::Duration::from_secs(5)).unwrap();
            for i in 0..200 {
                c.execute_batch("BEGIN IMMEDIATE").unwrap();
                c.execute(
                    "INSERT INTO idempotency (endpoint, user_id, key, created_at, body)
                     VALUES ('runs', 'u', ?1, 0, '{}')",
                    params![i.to_string()],
                )
                .unwrap();
                std::thread::sleep(std::time::Duration::from_millis(1));
                c.execute_batch("COMMIT").unwrap();
            }
        });
        let mut failed = 0;
        while !writer.is_finished() {
            let id = format!("r{failed}");
            store
                .put_run(&super::super::tests::sample_run(&id, Phase::Running))
                .unwrap();
            failed += store
                .fail_unfinished("server_restart", "restart", 1)
                .unwrap();
        }
        writer.join().unwrap();
        assert!(failed > 0);
        let _ = std::fs::remove_dir_all(dir);
    }

    /// Several processes (here threads with their own connections) opening one new file at
    /// once: one migrates it, the others wait and find it done.
    #[test]
    fn concurrent_opens_of_a_new_file_migrate_it_once() {
        let dir = std::env::temp_dir().join(format!("wasmsand-store-{}", uuid::Uuid::new_v4()));
        let path = dir.join("s.db");
        let opens: Vec<_> = (0..6)
            .map(|_| {
                let path = path.clone();
                std::thread::spawn(move || SqliteStore::open(&path).map(drop))
            })
            .collect();
        for o in opens {
            o.join().unwrap().unwrap();
        }
        let c = Connection::open(&path).unwrap();
        let version: i64 = c
            .query_row("PRAGMA user_version", [], |r| r.get(0))
            .unwrap();
        assert_eq!(version, 5);
        let _ = std::fs::remove_dir_all(dir);
    }

    #[test]
    fn a_file_of_the_first_schema_gains_the_list_columns_from_its_records() {
        let dir = std::env::temp_dir().join(format!("wasmsand-store-{}", uuid::Uuid::new_v4()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("old.db");
        let mut r = super::super::tests::sample_run("old", Phase::Completed);
        r.started_at = Some(1500);
        r.finished_at = Some(2500);
        r.node_id = Some("n1".into());
        r.message = Some("Exit Status 3".into());
        {
            let c = Connection::open(&path).unwrap();
            c.execute_batch(
                "CREATE TABLE runs (id TEXT PRIMARY KEY, user_id TEXT NOT NULL,
                     phase TEXT NOT NULL, finished_at INTEGER,
                     artifact_bytes INTEGER NOT NULL DEFAULT 0,
                     has_artifacts INTEGER NOT NULL DEFAULT 0, body TEXT NOT NULL)",
            )
            .unwrap();
            c.execute(
                "INSERT INTO runs (id, user_id, phase, finished_at, body) VALUES (?1, ?2, ?3, ?4, ?5)",
                params![r.id, r.user_id, "completed", 2500, serde_json::to_string(&r).unwrap()],
            )
            .unwrap();
        }
        let store = SqliteStore::open(&path).unwrap();
        let page = store
            .query_runs(&RunQuery {
                node_id: Some("n1".into()),
                q: Some("status 3".into()),
                started_from: Some(1500),
                limit: 10,
                ..RunQuery::default()
            })
            .unwrap();
        assert_eq!((page.total, page.items.clone()), (1, vec![r.clone()]));
        // The lowered text of the old records is filled too (a needle without a trigram).
        let short = store
            .query_runs(&RunQuery {
                q: Some("3".into()),
                limit: 10,
                ..RunQuery::default()
            })
            .unwrap();
        assert_eq!((short.total, short.items), (1, vec![r]));
        let _ = std::fs::remove_dir_all(dir);
    }

    #[test]
    fn the_text_index_follows_every_write_and_survives_vacuum() {
        let dir = std::env::temp_dir().join(format!("wasmsand-store-{}", uuid::Uuid::new_v4()));
        let path = dir.join("t.db");
        let store = SqliteStore::open(&path).unwrap();
        let ids = |store: &SqliteStore, needle: &str| -> Vec<String> {
            let mut v: Vec<String> = store
                .query_runs(&RunQuery {
                    q: Some(needle.into()),
                    limit: 100,
                    ..RunQuery::default()
                })
                .unwrap()
                .items
                .into_iter()
                .map(|r| r.id)
                .collect();
            v.sort();
            v
        };
        for i in 0..20 {
            let mut r = super::super::tests::sample_run(&format!("z{i:02}"), Phase::Completed);
            r.base_image = "other/image".into();
            r.message = Some(if i == 0 { "Échec" } else { "nothing to see" }.into());
            store.put_run(&r).unwrap();
        }
        for (id, image, message) in [
            ("a", "python/3.12", Some("Killed By \"OOM\"")),
            ("b", "wasmsand/default", Some("exit status 3")),
            ("c", "wasmsand/default", None),
        ] {
            let mut r = super::super::tests::sample_run(id, Phase::Running);
            r.base_image = image.into();
            r.message = message.map(str::to_string);
            store.put_run(&r).unwrap();
        }
        assert_eq!(ids(&store, "PYTHON"), ["a"]);
        assert_eq!(ids(&store, "by \"oom"), ["a"]);
        assert_eq!(ids(&store, "default"), ["b", "c"]);
        assert_eq!(ids(&store, "us 3"), ["b"]);
        // Two characters: no trigram, the fallback reads every run.
        assert_eq!(ids(&store, "3."), ["a"]);
        assert!(ids(&store, "absent").is_empty());
        // Beyond ASCII, Rust's case folding over every run.
        assert_eq!(ids(&store, "éCHEC"), ["z00"]);
        // A run stored again with other text is found by the new text only.
        let mut b = store.get_run("b").unwrap().unwrap();
        b.message = Some("timed out".into());
        store.put_run(&b).unwrap();
        assert!(ids(&store, "us 3").is_empty());
        assert_eq!(ids(&store, "TIMED"), ["b"]);
        // So is it by a needle too short for a trigram (the lowered text's table).
        assert_eq!(ids(&store, "OU"), ["b"]);
        // The start-up sweep rewrites unfinished runs' messages in SQL.
        store
            .fail_unfinished("server_restart", "lost in a restart", 5)
            .unwrap();
        assert_eq!(ids(&store, "restart"), ["a", "b", "c"]);
        assert!(ids(&store, "TIMED").is_empty());
        assert_eq!(ids(&store, "st"), ["a", "b", "c"]);
        assert!(ids(&store, "ou").is_empty());
        drop(store);
        {
            let c = Connection::open(&path).unwrap();
            c.execute_batch("VACUUM").unwrap();
            c.execute_batch("INSERT INTO runs_text(runs_text) VALUES ('integrity-check')")
                .unwrap();
        }
        let store = SqliteStore::open(&path).unwrap();
        assert_eq!(ids(&store, "python"), ["a"]);
        assert_eq!(ids(&store, "in a rest"), ["a", "b", "c"]);
        assert_eq!(ids(&store, "sT"), ["a", "b", "c"]);
        let _ = std::fs::remove_dir_all(dir);
    }
}
