//! The store of replicated deployments: every `sandboxd serve` process of a service points at
//! one PostgreSQL database. Runs are their JSON record plus the columns the admin list
//! filters and sorts on; the same database records the replicas (address and heartbeat),
//! which replica owns each session and run, and the places of the shared run queue.
//!
//! The [`Store`] trait is synchronous and called from tokio's blocking pool (see
//! [`super::call`]) or from plain threads. The connections live on a small runtime of the
//! store's own, so a call is a task there that the caller waits for: that works from any
//! thread, inside another runtime or not.

use std::future::Future;
use std::str::FromStr;
use std::time::Duration;

use deadpool_postgres::{Manager, ManagerConfig, Object, Pool, RecyclingMethod};
use tokio_postgres::NoTls;
use tokio_postgres::types::ToSql;

use super::{
    AuditEvent, AuditQuery, Cluster, IdemEntry, ReplicaInfo, RunPage, RunQuery, RunRecord, RunSort,
    SavedSession, Store, StoreError, StoreResult, UserLimits, UserUsage,
};

fn err(e: impl std::fmt::Display) -> StoreError {
    StoreError(format!("postgres: {e}"))
}

/// Serializes schema migrations of processes that start at the same time (an arbitrary
/// constant: the key of a session-level advisory lock).
const MIGRATION_LOCK: i64 = 0x5341_4e44_4d49_4752;
/// Serializes admissions to the shared queue (a transaction-level advisory lock).
const QUEUE_LOCK: i64 = 0x5341_4e44_5155_4555;

const TERMINAL: &str = "('completed','failed','timed_out','killed')";

/// Versioned schema changes, applied in order, each once, in a transaction. Never edit a
/// released step: add one.
const MIGRATIONS: &[(i32, &str)] = &[
    (
        1,
        "CREATE TABLE sandbox_runs (
             id TEXT PRIMARY KEY,
             user_id TEXT NOT NULL,
             phase TEXT NOT NULL,
             runtime TEXT NOT NULL,
             base_image TEXT NOT NULL,
             image_digest TEXT NOT NULL,
             message TEXT,
             created_at BIGINT NOT NULL,
             started_at BIGINT,
             finished_at BIGINT,
             artifact_bytes BIGINT NOT NULL DEFAULT 0,
             has_artifacts BOOLEAN NOT NULL DEFAULT FALSE,
             owner TEXT,
             body JSONB NOT NULL
         );
         -- The admin list pages through these (PRD section 29); NULLS FIRST ascending is
         -- NULLS LAST descending, so one index serves both directions.
         CREATE INDEX idx_runs_started_at ON sandbox_runs (started_at NULLS FIRST, created_at, id);
         CREATE INDEX idx_runs_finished_at ON sandbox_runs (finished_at NULLS FIRST, created_at, id);
         CREATE INDEX idx_runs_phase ON sandbox_runs (phase);
         CREATE INDEX idx_runs_runtime ON sandbox_runs (runtime);
         CREATE INDEX idx_runs_image_digest ON sandbox_runs (image_digest);
         CREATE INDEX idx_runs_base_image ON sandbox_runs (base_image);
         CREATE INDEX idx_runs_user_started_at ON sandbox_runs (user_id, started_at NULLS FIRST, created_at);
         CREATE INDEX idx_runs_user_created_at ON sandbox_runs (user_id, created_at);
         CREATE INDEX idx_runs_user_phase ON sandbox_runs (user_id, phase);
         CREATE INDEX idx_runs_owner_unfinished ON sandbox_runs (owner)
             WHERE phase NOT IN ('completed','failed','timed_out','killed');
         CREATE INDEX idx_runs_artifacts ON sandbox_runs (finished_at) WHERE has_artifacts;
         CREATE TABLE sandbox_idempotency (
             endpoint TEXT NOT NULL,
             user_id TEXT NOT NULL,
             key TEXT NOT NULL,
             created_at BIGINT NOT NULL,
             body JSONB NOT NULL,
             PRIMARY KEY (endpoint, user_id, key)
         );
         CREATE INDEX idx_idem_created_at ON sandbox_idempotency (created_at);
         CREATE INDEX idx_idem_user ON sandbox_idempotency (user_id);
         CREATE TABLE sandbox_replicas (
             id TEXT PRIMARY KEY,
             address TEXT NOT NULL,
             started_at BIGINT NOT NULL,
             heartbeat_at BIGINT NOT NULL,
             stopped BOOLEAN NOT NULL DEFAULT FALSE
         );
         CREATE TABLE sandbox_sessions (
             id TEXT PRIMARY KEY,
             user_id TEXT NOT NULL,
             owner TEXT NOT NULL,
             created_at BIGINT NOT NULL
         );
         CREATE INDEX idx_sessions_owner ON sandbox_sessions (owner);
         CREATE TABLE sandbox_queue (
             run_id TEXT PRIMARY KEY,
             owner TEXT NOT NULL,
             entered_at BIGINT NOT NULL
         );
         CREATE TABLE sandbox_audit (
             seq BIGSERIAL PRIMARY KEY,
             id TEXT NOT NULL UNIQUE,
             ts BIGINT NOT NULL,
             event TEXT NOT NULL,
             user_id TEXT NOT NULL,
             run_id TEXT,
             session_id TEXT,
             body JSONB NOT NULL
         );
         CREATE INDEX idx_audit_ts ON sandbox_audit (ts);
         CREATE INDEX idx_audit_user ON sandbox_audit (user_id, seq);
         CREATE INDEX idx_audit_run ON sandbox_audit (run_id);",
    ),
    (
        2,
        // The admin list's `q` is a substring search: trigram indexes answer it without
        // reading every run (pg_trgm is a trusted extension: the database owner may add it).
        "CREATE EXTENSION IF NOT EXISTS pg_trgm;
         CREATE INDEX idx_runs_base_image_trgm ON sandbox_runs USING gin (lower(base_image) gin_trgm_ops);
         CREATE INDEX idx_runs_message_trgm ON sandbox_runs USING gin (lower(message) gin_trgm_ops);",
    ),
    (
        3,
        // The admin list's node and worker filters read the run's record; these indexes
        // answer them, records older than the fields included.
        "CREATE INDEX idx_runs_node ON sandbox_runs ((body->>'node_id'), started_at NULLS FIRST, created_at, id);
         CREATE INDEX idx_runs_worker ON sandbox_runs ((body->>'worker_id'));",
    ),
    (
        4,
        // The text `q` searches, lowered, in a narrow table of its own. A needle too short
        // for a trigram scans every run; scanning these few bytes a run instead of the runs'
        // rows (about 1 KiB each with the record) makes that scan several times faster. A
        // trigger keeps it in step with every write to sandbox_runs, whatever the statement.
        "CREATE TABLE sandbox_run_text (
             id TEXT PRIMARY KEY,
             image TEXT NOT NULL,
             message TEXT NOT NULL
         );
         INSERT INTO sandbox_run_text (id, image, message)
             SELECT id, lower(base_image), lower(coalesce(message, '')) FROM sandbox_runs;
         CREATE INDEX idx_run_text_image_trgm ON sandbox_run_text USING gin (image gin_trgm_ops);
         CREATE INDEX idx_run_text_message_trgm ON sandbox_run_text USING gin (message gin_trgm_ops);
         DROP INDEX idx_runs_base_image_trgm;
         DROP INDEX idx_runs_message_trgm;
         CREATE FUNCTION sandbox_run_text_sync() RETURNS trigger LANGUAGE plpgsql AS $$
         BEGIN
             IF TG_OP = 'DELETE' THEN
                 DELETE FROM sandbox_run_text WHERE id = OLD.id;
                 RETURN OLD;
             END IF;
             INSERT INTO sandbox_run_text (id, image, message)
                 VALUES (NEW.id, lower(NEW.base_image), lower(coalesce(NEW.message, '')))
                 ON CONFLICT (id) DO UPDATE SET image = EXCLUDED.image, message = EXCLUDED.message;
             RETURN NEW;
         END $$;
         CREATE TRIGGER sandbox_run_text_insert AFTER INSERT ON sandbox_runs
             FOR EACH ROW EXECUTE FUNCTION sandbox_run_text_sync();
         CREATE TRIGGER sandbox_run_text_update AFTER UPDATE ON sandbox_runs
             FOR EACH ROW
             WHEN (OLD.base_image IS DISTINCT FROM NEW.base_image
                   OR OLD.message IS DISTINCT FROM NEW.message)
             EXECUTE FUNCTION sandbox_run_text_sync();
         CREATE TRIGGER sandbox_run_text_delete AFTER DELETE ON sandbox_runs
             FOR EACH ROW EXECUTE FUNCTION sandbox_run_text_sync();",
    ),
    (
        5,
        // Sessions' checkpoints and their content-addressed chunks; `refs` counts the
        // checkpoints listing a chunk, which goes when that falls to 0.
        "CREATE TABLE sandbox_saved_sessions (
             id TEXT PRIMARY KEY,
             user_id TEXT NOT NULL,
             saved_at BIGINT NOT NULL,
             expires_at BIGINT NOT NULL,
             body JSONB NOT NULL
         );
         CREATE INDEX idx_saved_user ON sandbox_saved_sessions (user_id, saved_at);
         CREATE INDEX idx_saved_expires ON sandbox_saved_sessions (expires_at);
         CREATE TABLE sandbox_session_chunks (
             hash TEXT PRIMARY KEY,
             refs BIGINT NOT NULL,
             data BYTEA NOT NULL
         );",
    ),
];

/// One PostgreSQL database shared by the replicas of a service.
pub struct PostgresStore {
    rt: Option<tokio::runtime::Runtime>,
    pool: Pool,
    replica_id: String,
    /// How long a replica may miss heartbeats before it counts as dead.
    replica_ttl_ms: i64,
}

impl Drop for PostgresStore {
    fn drop(&mut self) {
        // Dropping a runtime blocks, which tokio forbids on its own threads.
        if let Some(rt) = self.rt.take() {
            rt.shutdown_background();
        }
    }
}

impl PostgresStore {
    /// Connects to `url` (`postgres://user:password@host:port/db`), applies the pending
    /// migrations and returns a store that records its runs as replica `replica_id`'s.
    pub fn connect(url: &str, replica_id: &str, replica_ttl: Duration) -> StoreResult<Self> {
        let pg: tokio_postgres::Config = tokio_postgres::Config::from_str(url)
            .map_err(|e| err(format!("invalid store URL: {e}")))?;
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .thread_name("wasmsand-postgres")
            .enable_all()
            .build()
            .map_err(err)?;
        let mgr = Manager::from_config(
            pg,
            NoTls,
            ManagerConfig {
                recycling_method: RecyclingMethod::Fast,
            },
        );
        let pool = Pool::builder(mgr)
            .max_size(16)
            .runtime(deadpool_postgres::Runtime::Tokio1)
            .wait_timeout(Some(Duration::from_secs(30)))
            .create_timeout(Some(Duration::from_secs(10)))
            .recycle_timeout(Some(Duration::from_secs(5)))
            .build()
            .map_err(err)?;
        let store = PostgresStore {
            rt: Some(rt),
            pool,
            replica_id: replica_id.to_string(),
            replica_ttl_ms: replica_ttl.as_millis() as i64,
        };
        store.migrate()?;
        Ok(store)
    }

    /// Runs `f` with a pooled connection on the store's runtime and waits for it.
    fn exec<T, F, Fut>(&self, f: F) -> StoreResult<T>
    where
        F: FnOnce(Object) -> Fut + Send + 'static,
        Fut: Future<Output = StoreResult<T>> + Send + 'static,
        T: Send + 'static,
    {
        let pool = self.pool.clone();
        let rt = self
            .rt
            .as_ref()
            .expect("the runtime lives as long as the store");
        let task = rt.spawn(async move {
            let conn = pool
                .get()
                .await
                .map_err(|e| err(format!("cannot get a connection: {e}")))?;
            f(conn).await
        });
        futures::executor::block_on(task).map_err(|e| err(format!("store task failed: {e}")))?
    }

    /// As [`Self::exec`] with two connections: two statements that each read many rows run
    /// at the same time on two server processes, not one after the other on one.
    fn exec_pair<T, F, Fut>(&self, f: F) -> StoreResult<T>
    where
        F: FnOnce(Object, Object) -> Fut + Send + 'static,
        Fut: Future<Output = StoreResult<T>> + Send + 'static,
        T: Send + 'static,
    {
        let pool = self.pool.clone();
        self.exec(move |a| async move {
            let b = pool
                .get()
                .await
                .map_err(|e| err(format!("cannot get a connection: {e}")))?;
            f(a, b).await
        })
    }

    /// The schema version after start-up (the number of the last migration applied).
    pub fn schema_version(&self) -> StoreResult<i32> {
        self.exec(|c| async move {
            let row = c
                .query_one(
                    "SELECT COALESCE(MAX(version), 0) FROM sandbox_schema_migrations",
                    &[],
                )
                .await
                .map_err(err)?;
            Ok(row.get(0))
        })
    }

    fn migrate(&self) -> StoreResult<()> {
        self.exec(|mut c| async move {
            // A session lock, held across the migration transactions: a second process that
            // starts at the same time waits here, then finds nothing left to do.
            c.execute("SELECT pg_advisory_lock($1)", &[&MIGRATION_LOCK])
                .await
                .map_err(err)?;
            let result = async {
                c.batch_execute(
                    "CREATE TABLE IF NOT EXISTS sandbox_schema_migrations (
                         version INTEGER PRIMARY KEY,
                         applied_at BIGINT NOT NULL
                     )",
                )
                .await
                .map_err(err)?;
                let row = c
                    .query_one(
                        "SELECT COALESCE(MAX(version), 0) FROM sandbox_schema_migrations",
                        &[],
                    )
                    .await
                    .map_err(err)?;
                let current: i32 = row.get(0);
                if let Some(latest) = MIGRATIONS.last()
                    && current > latest.0
                {
                    return Err(err(format!(
                        "the database has schema version {current}, newer than this build's {}; \
                         upgrade this replica",
                        latest.0
                    )));
                }
                for (version, sql) in MIGRATIONS.iter().filter(|(v, _)| *v > current) {
                    let tx = c.transaction().await.map_err(err)?;
                    tx.batch_execute(sql)
                        .await
                        .map_err(|e| err(format!("migration {version}: {e}")))?;
                    tx.execute(
                        "INSERT INTO sandbox_schema_migrations (version, applied_at) VALUES ($1, $2)",
                        &[version, &crate::util::now_ms()],
                    )
                    .await
                    .map_err(err)?;
                    tx.commit().await.map_err(err)?;
                }
                Ok(())
            }
            .await;
            let unlocked = c
                .execute("SELECT pg_advisory_unlock($1)", &[&MIGRATION_LOCK])
                .await;
            result?;
            unlocked.map_err(err)?;
            Ok(())
        })
    }

    /// Stores many runs in one transaction, pipelined (imports, benchmarks): as `put_run` on
    /// each, in far fewer round trips.
    pub fn put_runs(&self, runs: &[RunRecord]) -> StoreResult<()> {
        let rows: Vec<(RunRecord, String)> = runs
            .iter()
            .map(|r| Ok((r.clone(), serde_json::to_string(r).map_err(err)?)))
            .collect::<StoreResult<_>>()?;
        let owner = self.replica_id.clone();
        self.exec(move |mut c| async move {
            let tx = c.transaction().await.map_err(err)?;
            let st = tx.prepare(PUT_RUN).await.map_err(err)?;
            for chunk in rows.chunks(512) {
                let puts = chunk.iter().map(|(r, body)| {
                    let has = !r.artifacts.is_empty() && !r.artifacts_expired;
                    let bytes: i64 = if has {
                        r.resource_usage.artifact_bytes as i64
                    } else {
                        0
                    };
                    let (tx, st, owner) = (&tx, &st, &owner);
                    async move {
                        tx.execute(
                            st,
                            &[
                                &r.id,
                                &r.user_id,
                                &r.phase.as_str(),
                                &r.runtime,
                                &r.base_image,
                                &r.image_digest,
                                &r.message,
                                &r.created_at,
                                &r.started_at,
                                &r.finished_at,
                                &bytes,
                                &has,
                                owner,
                                body,
                            ],
                        )
                        .await
                    }
                });
                futures::future::try_join_all(puts).await.map_err(err)?;
            }
            tx.commit().await.map_err(err)
        })
    }

    fn alive_since(&self, now: i64) -> i64 {
        now - self.replica_ttl_ms
    }
}

fn decode_run(body: &str) -> StoreResult<RunRecord> {
    serde_json::from_str(body).map_err(|e| err(format!("corrupt run record: {e}")))
}

fn decode_runs(rows: Vec<tokio_postgres::Row>) -> StoreResult<Vec<RunRecord>> {
    rows.iter().map(|r| decode_run(r.get(0))).collect()
}

fn to_u64(n: i64) -> u64 {
    n.max(0) as u64
}

/// Upserts a run. The owner is set once, by the replica that stored the run first: a
/// replica that later updates it (the artifact sweeper, the reaper) does not take it over.
const PUT_RUN: &str = "INSERT INTO sandbox_runs
     (id, user_id, phase, runtime, base_image, image_digest, message, created_at, started_at,
      finished_at, artifact_bytes, has_artifacts, owner, body)
     VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, CAST($14::text AS jsonb))
     ON CONFLICT (id) DO UPDATE SET
      user_id = EXCLUDED.user_id, phase = EXCLUDED.phase, runtime = EXCLUDED.runtime,
      base_image = EXCLUDED.base_image, image_digest = EXCLUDED.image_digest,
      message = EXCLUDED.message, created_at = EXCLUDED.created_at,
      started_at = EXCLUDED.started_at, finished_at = EXCLUDED.finished_at,
      artifact_bytes = EXCLUDED.artifact_bytes, has_artifacts = EXCLUDED.has_artifacts,
      body = EXCLUDED.body";

/// The first key of the per-user admission locks (`pg_advisory_xact_lock(int, int)`): apart
/// from the single-key locks above.
const USER_LOCK_SPACE: i32 = 0x5155_4f54;

/// A user's unfinished runs and those created since `$2`: what the quotas count.
// The user's unfinished runs, then its finished ones created since $2: two ranges of the
// (user_id, phase) and (user_id, created_at) indexes.
const USER_USAGE: &str = "SELECT body::text FROM sandbox_runs WHERE user_id = $1
         AND phase IN ('queued','starting','running')
     UNION ALL
     SELECT body::text FROM sandbox_runs WHERE user_id = $1 AND created_at >= $2
         AND phase IN ('completed','failed','timed_out','killed')";

async fn write_run(
    c: &impl tokio_postgres::GenericClient,
    st: &tokio_postgres::Statement,
    r: &RunRecord,
    owner: &str,
    body: &str,
) -> StoreResult<()> {
    let has = !r.artifacts.is_empty() && !r.artifacts_expired;
    let bytes: i64 = if has {
        r.resource_usage.artifact_bytes as i64
    } else {
        0
    };
    c.execute(
        st,
        &[
            &r.id,
            &r.user_id,
            &r.phase.as_str(),
            &r.runtime,
            &r.base_image,
            &r.image_digest,
            &r.message,
            &r.created_at,
            &r.started_at,
            &r.finished_at,
            &bytes,
            &has,
            &owner,
            &body,
        ],
    )
    .await
    .map_err(err)?;
    Ok(())
}

impl Store for PostgresStore {
    fn mode(&self) -> &'static str {
        "postgres"
    }

    fn blocking(&self) -> bool {
        true
    }

    fn put_run(&self, run: &RunRecord) -> StoreResult<()> {
        let body = serde_json::to_string(run).map_err(err)?;
        let r = run.clone();
        let owner = self.replica_id.clone();
        self.exec(move |c| async move {
            let st = c.prepare_cached(PUT_RUN).await.map_err(err)?;
            write_run(&**c, &st, &r, &owner, &body).await
        })
    }

    fn admit_run(
        &self,
        run: &RunRecord,
        limits: &UserLimits,
        minute_from: i64,
        day_from: i64,
        now: i64,
    ) -> StoreResult<(UserUsage, bool)> {
        if !limits.any() {
            // Nothing to count: no transaction, no lock.
            return self.put_run(run).map(|()| (UserUsage::default(), true));
        }
        let body = serde_json::to_string(run).map_err(err)?;
        let r = run.clone();
        let owner = self.replica_id.clone();
        let limits = *limits;
        let from = limits.counted_from(minute_from, day_from);
        self.exec(move |mut c| async move {
            let tx = c.transaction().await.map_err(err)?;
            // The user's admissions on every replica queue on one lock (its name hashed),
            // held until the commit: each counts the runs stored before it.
            let st = tx
                .prepare_cached("SELECT pg_advisory_xact_lock($1, hashtext($2))")
                .await
                .map_err(err)?;
            tx.query(&st, &[&USER_LOCK_SPACE, &r.user_id])
                .await
                .map_err(err)?;
            let st = tx.prepare_cached(USER_USAGE).await.map_err(err)?;
            let mut u = UserUsage::default();
            for run in decode_runs(tx.query(&st, &[&r.user_id, &from]).await.map_err(err)?)? {
                u.add(&run, minute_from, day_from, now);
            }
            let ok = limits.admit(&u, !r.capture_patterns.is_empty());
            if ok {
                let st = tx.prepare_cached(PUT_RUN).await.map_err(err)?;
                write_run(&*tx, &st, &r, &owner, &body).await?;
            }
            tx.commit().await.map_err(err)?;
            Ok((u, ok))
        })
    }

    fn get_run(&self, id: &str) -> StoreResult<Option<RunRecord>> {
        let id = id.to_string();
        self.exec(move |c| async move {
            let st = c
                .prepare_cached("SELECT body::text FROM sandbox_runs WHERE id = $1")
                .await
                .map_err(err)?;
            let row = c.query_opt(&st, &[&id]).await.map_err(err)?;
            row.map(|r| decode_run(r.get(0))).transpose()
        })
    }

    /// Fails the unfinished runs no live replica is executing: this replica's own (none at
    /// start-up, since a process gets a new id), those stored without an owner, and those of
    /// replicas whose heartbeat stopped. Runs of live replicas are theirs to finish.
    fn fail_unfinished(&self, reason_code: &str, message: &str, now: i64) -> StoreResult<usize> {
        let (reason, message) = (reason_code.to_string(), message.to_string());
        let me = self.replica_id.clone();
        let alive_since = self.alive_since(now);
        self.exec(move |c| async move {
            fail_orphans(&c, Some(&me), alive_since, &reason, &message, now).await
        })
    }

    fn runs_with_artifacts_before(&self, cutoff: i64) -> StoreResult<Vec<RunRecord>> {
        self.exec(move |c| async move {
            let rows = c
                .query(
                    "SELECT body::text FROM sandbox_runs WHERE has_artifacts AND finished_at < $1",
                    &[&cutoff],
                )
                .await
                .map_err(err)?;
            decode_runs(rows)
        })
    }

    fn runs_purge(&self, cutoff: i64, limit: usize) -> StoreResult<Vec<RunRecord>> {
        let limit = limit as i64;
        self.exec(move |c| async move {
            // SKIP LOCKED: replicas sweeping at once each take rows the other has not.
            let rows = c
                .query(
                    "DELETE FROM sandbox_runs WHERE id IN (
                         SELECT id FROM sandbox_runs
                         WHERE finished_at IS NOT NULL AND finished_at < $1
                           AND phase IN ('completed', 'failed', 'timed_out', 'killed')
                         ORDER BY finished_at LIMIT $2
                         FOR UPDATE SKIP LOCKED)
                     RETURNING body::text",
                    &[&cutoff, &limit],
                )
                .await
                .map_err(err)?;
            decode_runs(rows)
        })
    }

    fn user_artifact_bytes(&self, user_id: &str) -> StoreResult<u64> {
        let user = user_id.to_string();
        self.exec(move |c| async move {
            let row = c
                .query_one(
                    "SELECT COALESCE(SUM(artifact_bytes), 0)::BIGINT FROM sandbox_runs
                     WHERE user_id = $1 AND has_artifacts",
                    &[&user],
                )
                .await
                .map_err(err)?;
            Ok(to_u64(row.get(0)))
        })
    }

    fn idem_get(&self, endpoint: &str, user_id: &str, key: &str) -> StoreResult<Option<IdemEntry>> {
        let (e, u, k) = (endpoint.to_string(), user_id.to_string(), key.to_string());
        self.exec(move |c| async move {
            let st = c
                .prepare_cached(
                    "SELECT body::text FROM sandbox_idempotency
                     WHERE endpoint = $1 AND user_id = $2 AND key = $3",
                )
                .await
                .map_err(err)?;
            let row = c.query_opt(&st, &[&e, &u, &k]).await.map_err(err)?;
            row.map(|r| serde_json::from_str(r.get::<_, &str>(0)).map_err(err))
                .transpose()
        })
    }

    fn idem_put(&self, entry: &IdemEntry) -> StoreResult<()> {
        let body = serde_json::to_string(entry).map_err(err)?;
        let e = entry.clone();
        self.exec(move |c| async move {
            let st = c
                .prepare_cached(
                    "INSERT INTO sandbox_idempotency (endpoint, user_id, key, created_at, body)
                     VALUES ($1, $2, $3, $4, CAST($5::text AS jsonb))
                     ON CONFLICT (endpoint, user_id, key)
                     DO UPDATE SET created_at = EXCLUDED.created_at, body = EXCLUDED.body",
                )
                .await
                .map_err(err)?;
            c.execute(
                &st,
                &[&e.endpoint, &e.user_id, &e.key, &e.created_at, &body],
            )
            .await
            .map_err(err)?;
            Ok(())
        })
    }

    fn idem_claim(
        &self,
        claim: &IdemEntry,
        expired_before: i64,
        stale_before: i64,
    ) -> StoreResult<Option<IdemEntry>> {
        let body = serde_json::to_string(claim).map_err(err)?;
        let e = claim.clone();
        self.exec(move |c| async move {
            // The unique key decides between replicas: one INSERT wins, the others see its
            // row (the conflict waits for the winner's commit).
            let insert = c
                .prepare_cached(
                    "INSERT INTO sandbox_idempotency (endpoint, user_id, key, created_at, body)
                     VALUES ($1, $2, $3, $4, CAST($5::text AS jsonb))
                     ON CONFLICT (endpoint, user_id, key) DO UPDATE
                     SET created_at = EXCLUDED.created_at, body = EXCLUDED.body
                     WHERE sandbox_idempotency.created_at < $6
                        OR ((sandbox_idempotency.body->>'status')::int = 0
                            AND sandbox_idempotency.created_at < $7)",
                )
                .await
                .map_err(err)?;
            let select = c
                .prepare_cached(
                    "SELECT body::text FROM sandbox_idempotency
                     WHERE endpoint = $1 AND user_id = $2 AND key = $3",
                )
                .await
                .map_err(err)?;
            // A holder's row can vanish between the two statements (purged, released): then
            // the key is free again and the claim is retried.
            for _ in 0..8 {
                let n = c
                    .execute(
                        &insert,
                        &[
                            &e.endpoint,
                            &e.user_id,
                            &e.key,
                            &e.created_at,
                            &body,
                            &expired_before,
                            &stale_before,
                        ],
                    )
                    .await
                    .map_err(err)?;
                if n == 1 {
                    return Ok(None);
                }
                if let Some(row) = c
                    .query_opt(&select, &[&e.endpoint, &e.user_id, &e.key])
                    .await
                    .map_err(err)?
                {
                    return Ok(Some(
                        serde_json::from_str(row.get::<_, &str>(0)).map_err(err)?,
                    ));
                }
            }
            Err(err("the idempotency key kept changing hands"))
        })
    }

    fn idem_release(&self, endpoint: &str, user_id: &str, key: &str) -> StoreResult<()> {
        let (e, u, k) = (endpoint.to_string(), user_id.to_string(), key.to_string());
        self.exec(move |c| async move {
            c.execute(
                "DELETE FROM sandbox_idempotency
                 WHERE endpoint = $1 AND user_id = $2 AND key = $3
                   AND (body->>'status')::int = 0",
                &[&e, &u, &k],
            )
            .await
            .map_err(err)?;
            Ok(())
        })
    }

    fn idem_purge(&self, cutoff: i64) -> StoreResult<usize> {
        self.exec(move |c| async move {
            let n = c
                .execute(
                    "DELETE FROM sandbox_idempotency WHERE created_at < $1",
                    &[&cutoff],
                )
                .await
                .map_err(err)?;
            Ok(n as usize)
        })
    }

    fn list_runs(&self) -> StoreResult<Vec<RunRecord>> {
        self.exec(|c| async move {
            let rows = c
                .query("SELECT body::text FROM sandbox_runs", &[])
                .await
                .map_err(err)?;
            decode_runs(rows)
        })
    }

    fn list_idempotency(&self) -> StoreResult<Vec<IdemEntry>> {
        self.exec(|c| async move {
            let rows = c
                .query("SELECT body::text FROM sandbox_idempotency", &[])
                .await
                .map_err(err)?;
            rows.iter()
                .map(|r| serde_json::from_str(r.get::<_, &str>(0)).map_err(err))
                .collect()
        })
    }

    fn query_runs(&self, q: &RunQuery) -> StoreResult<RunPage> {
        let q = q.clone();
        self.exec_pair(move |c, c2| async move {
            let mut conds: Vec<String> = Vec::new();
            let mut params: Vec<Box<dyn ToSql + Sync + Send>> = Vec::new();
            let mut bind = |conds: &mut Vec<String>, sql: &str, p: Box<dyn ToSql + Sync + Send>| {
                params.push(p);
                conds.push(sql.replace('?', &format!("${}", params.len())));
            };
            for (col, v) in [
                ("user_id", &q.user_id),
                ("phase", &q.phase),
                ("runtime", &q.runtime),
                ("image_digest", &q.image_digest),
                ("base_image", &q.base_image),
            ] {
                if let Some(v) = v {
                    bind(&mut conds, &format!("{col} = ?"), Box::new(v.clone()));
                }
            }
            for (field, v) in [("node_id", &q.node_id), ("worker_id", &q.worker_id)] {
                if let Some(v) = v {
                    bind(
                        &mut conds,
                        &format!("(body->>'{field}') = ?"),
                        Box::new(v.clone()),
                    );
                }
            }
            for (col, from, to) in [
                ("started_at", q.started_from, q.started_to),
                ("finished_at", q.finished_from, q.finished_to),
            ] {
                if let Some(f) = from {
                    bind(&mut conds, &format!("{col} >= ?"), Box::new(f));
                }
                if let Some(t) = to {
                    bind(&mut conds, &format!("{col} <= ?"), Box::new(t));
                }
            }
            // The text search goes last, so that `conds` before it are the other filters.
            let others = conds.len();
            if let Some(n) = &q.q {
                // LIKE (with its wildcards escaped) rather than strpos: the trigram indexes
                // serve LIKE.
                let pattern = format!(
                    "%{}%",
                    n.to_lowercase()
                        .replace('\\', "\\\\")
                        .replace('%', "\\%")
                        .replace('_', "\\_")
                );
                bind(
                    &mut conds,
                    "id IN (SELECT id FROM sandbox_run_text WHERE image LIKE ? OR message LIKE ?)",
                    Box::new(pattern),
                );
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
            let order = if q.desc {
                format!("{col} DESC NULLS LAST, created_at DESC, id DESC")
            } else {
                format!("{col} ASC NULLS FIRST, created_at ASC, id ASC")
            };
            let refs: Vec<&(dyn ToSql + Sync)> = params
                .iter()
                .map(|p| p.as_ref() as &(dyn ToSql + Sync))
                .collect();
            // The page's ids come from the index alone (no record read for the rows an
            // offset skips), then only its records are read, in the page's order. The count
            // runs at the same time on a second connection: a text search (a scan, for a
            // needle too short for a trigram) then costs one scan's time, not two.
            // The text search alone is counted in its narrow table, without a join.
            let count_sql = if others == 0 && q.q.is_some() {
                "SELECT COUNT(*) FROM sandbox_run_text WHERE image LIKE $1 OR message LIKE $1"
                    .to_string()
            } else {
                format!("SELECT COUNT(*) FROM sandbox_runs {where_}")
            };
            let page_sql = format!(
                "SELECT r.body::text FROM unnest(ARRAY(
                     SELECT id FROM sandbox_runs {where_} ORDER BY {order} LIMIT {} OFFSET {}
                 )) WITH ORDINALITY AS p(id, n)
                 JOIN sandbox_runs r ON r.id = p.id ORDER BY p.n",
                q.limit, q.offset
            );
            let (count, rows) = futures::future::try_join(
                c.query_one(&count_sql, &refs),
                c2.query(&page_sql, &refs),
            )
            .await
            .map_err(err)?;
            let total: i64 = count.get(0);
            Ok(RunPage {
                items: decode_runs(rows)?,
                total: to_u64(total),
            })
        })
    }

    fn user_usage(
        &self,
        user_id: &str,
        minute_from: i64,
        day_from: i64,
        now: i64,
    ) -> StoreResult<UserUsage> {
        let user = user_id.to_string();
        let from = minute_from.min(day_from);
        let runs = self.exec(move |c| async move {
            let st = c.prepare_cached(USER_USAGE).await.map_err(err)?;
            decode_runs(c.query(&st, &[&user, &from]).await.map_err(err)?)
        })?;
        let mut u = UserUsage::default();
        for r in &runs {
            u.add(r, minute_from, day_from, now);
        }
        Ok(u)
    }

    fn put_audit(&self, event: &AuditEvent) -> StoreResult<()> {
        let e = event.clone();
        let body = serde_json::to_string(&e.body).map_err(err)?;
        self.exec(move |c| async move {
            c.execute(
                "INSERT INTO sandbox_audit (id, ts, event, user_id, run_id, session_id, body)
                 VALUES ($1, $2, $3, $4, $5, $6, CAST($7::text AS jsonb))",
                &[
                    &e.id,
                    &e.ts,
                    &e.event,
                    &e.user_id,
                    &e.run_id,
                    &e.session_id,
                    &body,
                ],
            )
            .await
            .map_err(err)?;
            Ok(())
        })
    }

    fn list_audit(&self, q: &AuditQuery) -> StoreResult<(Vec<AuditEvent>, usize)> {
        let q = q.clone();
        self.exec(move |c| async move {
            let filter = "($1::text IS NULL OR user_id = $1) AND ($2::text IS NULL OR run_id = $2)
                 AND ($3::text IS NULL OR session_id = $3) AND ($4::text IS NULL OR event = $4)";
            let p: [&(dyn ToSql + Sync); 4] = [&q.user_id, &q.run_id, &q.session_id, &q.event];
            let total: i64 = c
                .query_one(
                    &format!("SELECT COUNT(*) FROM sandbox_audit WHERE {filter}"),
                    &p,
                )
                .await
                .map_err(err)?
                .get(0);
            let rows = c
                .query(
                    &format!(
                        "SELECT id, ts, event, user_id, run_id, session_id, body::text
                         FROM sandbox_audit WHERE {filter} ORDER BY seq LIMIT {} OFFSET {}",
                        q.limit, q.offset
                    ),
                    &p,
                )
                .await
                .map_err(err)?;
            let items = rows
                .iter()
                .map(|r| {
                    Ok(AuditEvent {
                        id: r.get(0),
                        ts: r.get(1),
                        event: r.get(2),
                        user_id: r.get(3),
                        run_id: r.get(4),
                        session_id: r.get(5),
                        body: serde_json::from_str(r.get::<_, &str>(6)).map_err(err)?,
                    })
                })
                .collect::<StoreResult<Vec<_>>>()?;
            Ok((items, to_u64(total) as usize))
        })
    }

    fn audit_purge(&self, cutoff: i64) -> StoreResult<usize> {
        self.exec(move |c| async move {
            let n = c
                .execute("DELETE FROM sandbox_audit WHERE ts < $1", &[&cutoff])
                .await
                .map_err(err)?;
            Ok(n as usize)
        })
    }

    fn chunks_missing(&self, hashes: &[String]) -> StoreResult<Vec<String>> {
        let hashes = hashes.to_vec();
        self.exec(move |c| async move {
            let rows = c
                .query(
                    "SELECT hash FROM sandbox_session_chunks WHERE hash = ANY($1)",
                    &[&hashes],
                )
                .await
                .map_err(err)?;
            let have: std::collections::HashSet<String> = rows.iter().map(|r| r.get(0)).collect();
            Ok(hashes.into_iter().filter(|h| !have.contains(h)).collect())
        })
    }

    fn session_save(
        &self,
        saved: &SavedSession,
        chunks: &[(String, Vec<u8>)],
    ) -> StoreResult<Vec<String>> {
        let saved = saved.clone();
        let chunks = chunks.to_vec();
        self.exec(move |mut c| async move {
            let tx = c.transaction().await.map_err(err)?;
            // The row lock orders two saves of one session; chunks are locked row by row by
            // the updates below, so a save racing a forget of a shared chunk either sees the
            // chunk gone (and asks for it) or keeps it alive.
            let old: Option<String> = tx
                .query_opt(
                    "SELECT body::text FROM sandbox_saved_sessions WHERE id = $1 FOR UPDATE",
                    &[&saved.session_id],
                )
                .await
                .map_err(err)?
                .map(|r| r.get(0));
            let old: Vec<String> = match old {
                Some(b) => {
                    serde_json::from_str::<SavedSession>(&b)
                        .map_err(err)?
                        .chunks
                }
                None => Vec::new(),
            };
            let (added, removed) = super::chunk_diff(&old, &saved.chunks);
            for (h, data) in &chunks {
                tx.execute(
                    "INSERT INTO sandbox_session_chunks (hash, refs, data) VALUES ($1, 0, $2)
                     ON CONFLICT (hash) DO NOTHING",
                    &[h, data],
                )
                .await
                .map_err(err)?;
            }
            let raised = tx
                .query(
                    "UPDATE sandbox_session_chunks SET refs = refs + 1 WHERE hash = ANY($1)
                     RETURNING hash",
                    &[&added],
                )
                .await
                .map_err(err)?;
            let raised: std::collections::HashSet<String> =
                raised.iter().map(|r| r.get(0)).collect();
            let missing: Vec<String> = added.into_iter().filter(|h| !raised.contains(h)).collect();
            if !missing.is_empty() {
                tx.rollback().await.map_err(err)?;
                return Ok(missing);
            }
            release_chunks(&tx, &removed).await?;
            let given: Vec<String> = chunks.iter().map(|(h, _)| h.clone()).collect();
            tx.execute(
                "DELETE FROM sandbox_session_chunks WHERE hash = ANY($1) AND refs <= 0",
                &[&given],
            )
            .await
            .map_err(err)?;
            let body = serde_json::to_string(&saved).map_err(err)?;
            tx.execute(
                "INSERT INTO sandbox_saved_sessions (id, user_id, saved_at, expires_at, body)
                 VALUES ($1, $2, $3, $4, CAST($5::text AS jsonb))
                 ON CONFLICT (id) DO UPDATE SET user_id = EXCLUDED.user_id,
                     saved_at = EXCLUDED.saved_at, expires_at = EXCLUDED.expires_at,
                     body = EXCLUDED.body",
                &[
                    &saved.session_id,
                    &saved.user_id,
                    &saved.saved_at,
                    &saved.expires_at,
                    &body,
                ],
            )
            .await
            .map_err(err)?;
            tx.commit().await.map_err(err)?;
            Ok(Vec::new())
        })
    }

    fn session_saved(&self, session_id: &str) -> StoreResult<Option<SavedSession>> {
        let id = session_id.to_string();
        self.exec(move |c| async move {
            let row = c
                .query_opt(
                    "SELECT body::text FROM sandbox_saved_sessions WHERE id = $1",
                    &[&id],
                )
                .await
                .map_err(err)?;
            row.map(|r| serde_json::from_str(r.get::<_, &str>(0)).map_err(err))
                .transpose()
        })
    }

    fn chunks_get(&self, hashes: &[String]) -> StoreResult<Vec<(String, Vec<u8>)>> {
        let hashes = hashes.to_vec();
        self.exec(move |c| async move {
            let rows = c
                .query(
                    "SELECT hash, data FROM sandbox_session_chunks WHERE hash = ANY($1)",
                    &[&hashes],
                )
                .await
                .map_err(err)?;
            Ok(rows.iter().map(|r| (r.get(0), r.get(1))).collect())
        })
    }

    fn session_forget(&self, session_id: &str) -> StoreResult<bool> {
        let id = session_id.to_string();
        self.exec(move |mut c| async move {
            let tx = c.transaction().await.map_err(err)?;
            let old = tx
                .query_opt(
                    "DELETE FROM sandbox_saved_sessions WHERE id = $1 RETURNING body::text",
                    &[&id],
                )
                .await
                .map_err(err)?;
            let Some(old) = old else {
                return Ok(false);
            };
            let old: SavedSession = serde_json::from_str(old.get::<_, &str>(0)).map_err(err)?;
            let (_, removed) = super::chunk_diff(&old.chunks, &[]);
            release_chunks(&tx, &removed).await?;
            tx.commit().await.map_err(err)?;
            Ok(true)
        })
    }

    fn saved_sessions(&self, user_id: Option<&str>) -> StoreResult<Vec<SavedSession>> {
        let user = user_id.map(str::to_string);
        self.exec(move |c| async move {
            let rows = c
                .query(
                    "SELECT body::text FROM sandbox_saved_sessions
                     WHERE $1::text IS NULL OR user_id = $1 ORDER BY saved_at, id",
                    &[&user],
                )
                .await
                .map_err(err)?;
            rows.iter()
                .map(|r| serde_json::from_str(r.get::<_, &str>(0)).map_err(err))
                .collect()
        })
    }

    fn saved_ids_with_prefix(&self, prefix: &str) -> StoreResult<Vec<String>> {
        let prefix = prefix.to_string();
        self.exec(move |c| async move {
            let rows = c
                .query(
                    "SELECT id FROM sandbox_saved_sessions WHERE starts_with(id, $1) ORDER BY id",
                    &[&prefix],
                )
                .await
                .map_err(err)?;
            Ok(rows.iter().map(|r| r.get(0)).collect())
        })
    }

    fn saved_expired(&self, now: i64) -> StoreResult<Vec<String>> {
        self.exec(move |c| async move {
            let rows = c
                .query(
                    "SELECT id FROM sandbox_saved_sessions WHERE expires_at <= $1",
                    &[&now],
                )
                .await
                .map_err(err)?;
            Ok(rows.iter().map(|r| r.get(0)).collect())
        })
    }

    fn chunk_totals(&self) -> StoreResult<(u64, u64)> {
        self.exec(move |c| async move {
            let r = c
                .query_one(
                    "SELECT COUNT(*), COALESCE(SUM(length(data)), 0)::BIGINT
                     FROM sandbox_session_chunks",
                    &[],
                )
                .await
                .map_err(err)?;
            Ok((to_u64(r.get(0)), to_u64(r.get(1))))
        })
    }

    fn cluster(&self) -> Option<&dyn Cluster> {
        Some(self)
    }
}

/// One checkpoint fewer lists each of these chunks; those no checkpoint lists go.
async fn release_chunks(
    tx: &tokio_postgres::Transaction<'_>,
    removed: &[String],
) -> StoreResult<()> {
    if removed.is_empty() {
        return Ok(());
    }
    tx.execute(
        "UPDATE sandbox_session_chunks SET refs = refs - 1 WHERE hash = ANY($1)",
        &[&removed],
    )
    .await
    .map_err(err)?;
    tx.execute(
        "DELETE FROM sandbox_session_chunks WHERE hash = ANY($1) AND refs <= 0",
        &[&removed],
    )
    .await
    .map_err(err)?;
    Ok(())
}

/// Fails unfinished runs whose owner is `me`, unset, or not a replica seen since
/// `alive_since`. The record's JSON is patched in the same statement.
async fn fail_orphans(
    c: &Object,
    me: Option<&str>,
    alive_since: i64,
    reason: &str,
    message: &str,
    now: i64,
) -> StoreResult<usize> {
    let n = c
        .execute(
            &format!(
                "UPDATE sandbox_runs SET phase = 'failed', message = $2, finished_at = $3,
                 body = body || jsonb_build_object('phase', 'failed', 'reason_code', $1::text,
                                                   'message', $2::text, 'finished_at', $3::bigint)
                 WHERE phase NOT IN {TERMINAL}
                   AND (owner IS NULL OR owner = $4 OR owner NOT IN
                        (SELECT id FROM sandbox_replicas WHERE heartbeat_at >= $5 AND NOT stopped))"
            ),
            &[&reason, &message, &now, &me, &alive_since],
        )
        .await
        .map_err(err)?;
    Ok(n as usize)
}

fn replica_row(r: &tokio_postgres::Row) -> ReplicaInfo {
    ReplicaInfo {
        id: r.get(0),
        address: r.get(1),
        started_at: r.get(2),
        heartbeat_at: r.get(3),
    }
}

impl Cluster for PostgresStore {
    fn replica_id(&self) -> &str {
        &self.replica_id
    }

    fn heartbeat(&self, address: &str, now: i64) -> StoreResult<()> {
        let (id, addr) = (self.replica_id.clone(), address.to_string());
        self.exec(move |c| async move {
            c.execute(
                "INSERT INTO sandbox_replicas (id, address, started_at, heartbeat_at)
                 VALUES ($1, $2, $3, $3)
                 ON CONFLICT (id) DO UPDATE SET address = EXCLUDED.address,
                     heartbeat_at = EXCLUDED.heartbeat_at",
                &[&id, &addr, &now],
            )
            .await
            .map_err(err)?;
            Ok(())
        })
    }

    fn leave(&self) -> StoreResult<()> {
        let id = self.replica_id.clone();
        self.exec(move |mut c| async move {
            let tx = c.transaction().await.map_err(err)?;
            tx.execute("DELETE FROM sandbox_queue WHERE owner = $1", &[&id])
                .await
                .map_err(err)?;
            // Dead at once (its sessions answer 410), forgotten with the others.
            tx.execute(
                "UPDATE sandbox_replicas SET stopped = TRUE WHERE id = $1",
                &[&id],
            )
            .await
            .map_err(err)?;
            tx.commit().await.map_err(err)
        })
    }

    fn live_replica(&self, id: &str, alive_since: i64) -> StoreResult<Option<ReplicaInfo>> {
        let id = id.to_string();
        self.exec(move |c| async move {
            let st = c
                .prepare_cached(
                    "SELECT id, address, started_at, heartbeat_at FROM sandbox_replicas
                     WHERE id = $1 AND heartbeat_at >= $2 AND NOT stopped",
                )
                .await
                .map_err(err)?;
            Ok(c.query_opt(&st, &[&id, &alive_since])
                .await
                .map_err(err)?
                .as_ref()
                .map(replica_row))
        })
    }

    fn live_replicas(&self, alive_since: i64) -> StoreResult<Vec<ReplicaInfo>> {
        self.exec(move |c| async move {
            let rows = c
                .query(
                    "SELECT id, address, started_at, heartbeat_at FROM sandbox_replicas
                     WHERE heartbeat_at >= $1 AND NOT stopped ORDER BY started_at, id",
                    &[&alive_since],
                )
                .await
                .map_err(err)?;
            Ok(rows.iter().map(replica_row).collect())
        })
    }

    fn run_owner(&self, run_id: &str) -> StoreResult<Option<String>> {
        let id = run_id.to_string();
        self.exec(move |c| async move {
            let st = c
                .prepare_cached("SELECT owner FROM sandbox_runs WHERE id = $1")
                .await
                .map_err(err)?;
            Ok(c.query_opt(&st, &[&id])
                .await
                .map_err(err)?
                .and_then(|r| r.get(0)))
        })
    }

    fn session_put(&self, session_id: &str, user_id: &str, now: i64) -> StoreResult<()> {
        let (id, user, owner) = (
            session_id.to_string(),
            user_id.to_string(),
            self.replica_id.clone(),
        );
        self.exec(move |c| async move {
            c.execute(
                "INSERT INTO sandbox_sessions (id, user_id, owner, created_at)
                 VALUES ($1, $2, $3, $4) ON CONFLICT (id) DO NOTHING",
                &[&id, &user, &owner, &now],
            )
            .await
            .map_err(err)?;
            Ok(())
        })
    }

    fn session_owner(&self, session_id: &str) -> StoreResult<Option<String>> {
        let id = session_id.to_string();
        self.exec(move |c| async move {
            let st = c
                .prepare_cached("SELECT owner FROM sandbox_sessions WHERE id = $1")
                .await
                .map_err(err)?;
            Ok(c.query_opt(&st, &[&id])
                .await
                .map_err(err)?
                .map(|r| r.get(0)))
        })
    }

    fn session_holder(&self, session_id: &str) -> StoreResult<Option<(String, String)>> {
        let id = session_id.to_string();
        self.exec(move |c| async move {
            let st = c
                .prepare_cached("SELECT owner, user_id FROM sandbox_sessions WHERE id = $1")
                .await
                .map_err(err)?;
            Ok(c.query_opt(&st, &[&id])
                .await
                .map_err(err)?
                .map(|r| (r.get(0), r.get(1))))
        })
    }

    fn session_delete(&self, session_id: &str) -> StoreResult<()> {
        let id = session_id.to_string();
        self.exec(move |c| async move {
            c.execute("DELETE FROM sandbox_sessions WHERE id = $1", &[&id])
                .await
                .map_err(err)?;
            Ok(())
        })
    }

    fn session_claim(
        &self,
        session_id: &str,
        user_id: &str,
        alive_since: i64,
        now: i64,
    ) -> StoreResult<Result<(), String>> {
        let (id, user, me) = (
            session_id.to_string(),
            user_id.to_string(),
            self.replica_id.clone(),
        );
        self.exec(move |c| async move {
            let row = c
                .query_opt(
                    "INSERT INTO sandbox_sessions (id, user_id, owner, created_at)
                     VALUES ($1, $2, $3, $4)
                     ON CONFLICT (id) DO UPDATE SET owner = EXCLUDED.owner
                     WHERE sandbox_sessions.owner = EXCLUDED.owner
                        OR sandbox_sessions.owner NOT IN (SELECT id FROM sandbox_replicas
                            WHERE heartbeat_at >= $5 AND NOT stopped)
                     RETURNING owner",
                    &[&id, &user, &me, &now, &alive_since],
                )
                .await
                .map_err(err)?;
            if row.is_some() {
                return Ok(Ok(()));
            }
            let owner: Option<String> = c
                .query_opt("SELECT owner FROM sandbox_sessions WHERE id = $1", &[&id])
                .await
                .map_err(err)?
                .map(|r| r.get(0));
            Ok(Err(owner.unwrap_or_default()))
        })
    }

    fn reap_dead(
        &self,
        alive_since: i64,
        forget_before: i64,
        reason_code: &str,
        message: &str,
        now: i64,
    ) -> StoreResult<usize> {
        let (reason, message) = (reason_code.to_string(), message.to_string());
        self.exec(move |mut c| async move {
            let failed = fail_orphans(&c, None, alive_since, &reason, &message, now).await?;
            let tx = c.transaction().await.map_err(err)?;
            // A dead replica's queue places would hold the shared queue full forever.
            tx.execute(
                "DELETE FROM sandbox_queue WHERE owner NOT IN
                     (SELECT id FROM sandbox_replicas WHERE heartbeat_at >= $1 AND NOT stopped)",
                &[&alive_since],
            )
            .await
            .map_err(err)?;
            // A replica gone for longer than the forget window is dropped with its sessions;
            // until then its sessions answer 410 (lost) rather than 404.
            tx.execute(
                "DELETE FROM sandbox_replicas WHERE heartbeat_at < $1",
                &[&forget_before],
            )
            .await
            .map_err(err)?;
            tx.execute(
                "DELETE FROM sandbox_sessions WHERE owner NOT IN (SELECT id FROM sandbox_replicas)",
                &[],
            )
            .await
            .map_err(err)?;
            tx.commit().await.map_err(err)?;
            Ok(failed)
        })
    }

    fn queue_enter(&self, run_id: &str, max: usize, now: i64) -> StoreResult<Option<usize>> {
        let (id, owner) = (run_id.to_string(), self.replica_id.clone());
        let max = max as i64;
        self.exec(move |mut c| async move {
            let tx = c.transaction().await.map_err(err)?;
            tx.execute("SELECT pg_advisory_xact_lock($1)", &[&QUEUE_LOCK])
                .await
                .map_err(err)?;
            let waiting: i64 = tx
                .query_one("SELECT COUNT(*) FROM sandbox_queue", &[])
                .await
                .map_err(err)?
                .get(0);
            if waiting >= max {
                return Ok(None);
            }
            tx.execute(
                "INSERT INTO sandbox_queue (run_id, owner, entered_at) VALUES ($1, $2, $3)
                 ON CONFLICT (run_id) DO NOTHING",
                &[&id, &owner, &now],
            )
            .await
            .map_err(err)?;
            tx.commit().await.map_err(err)?;
            Ok(Some(waiting as usize))
        })
    }

    fn queue_leave(&self, run_id: &str) -> StoreResult<()> {
        let id = run_id.to_string();
        self.exec(move |c| async move {
            c.execute("DELETE FROM sandbox_queue WHERE run_id = $1", &[&id])
                .await
                .map_err(err)?;
            Ok(())
        })
    }

    fn queue_len(&self) -> StoreResult<usize> {
        self.exec(|c| async move {
            let n: i64 = c
                .query_one("SELECT COUNT(*) FROM sandbox_queue", &[])
                .await
                .map_err(err)?
                .get(0);
            Ok(to_u64(n) as usize)
        })
    }
}
