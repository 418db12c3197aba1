//! The store suite on every backend, and what only the shared store does: migrations that
//! two processes may start at once, replicas, ownership, the shared queue.

use std::time::Duration;

use wasmsand_server::store::testsuite::{
    exercise, exercise_queries, exercise_retention, exercise_saved_sessions, sample_run,
};
use wasmsand_server::store::{Cluster, MemoryStore, Phase, PostgresStore, SqliteStore, Store};

const TTL: Duration = Duration::from_secs(10);

fn postgres(url: &str, replica: &str) -> PostgresStore {
    PostgresStore::connect(url, replica, TTL).unwrap()
}

#[test]
fn suite_on_memory() {
    exercise(&MemoryStore::new());
    exercise_queries(&MemoryStore::new());
}

#[test]
fn suite_on_sqlite() {
    let dir = tempfile::tempdir().unwrap();
    exercise(&SqliteStore::open(&dir.path().join("a.db")).unwrap());
    exercise_queries(&SqliteStore::open(&dir.path().join("b.db")).unwrap());
}

#[test]
fn suite_on_postgres() {
    let pg = crate::pg_or_skip!();
    exercise(&postgres(&pg.fresh_db("suite"), "r1"));
    exercise_queries(&postgres(&pg.fresh_db("queries"), "r1"));
    exercise_saved_sessions(&postgres(&pg.fresh_db("saved"), "r1"));
    exercise_retention(&postgres(&pg.fresh_db("retention"), "r1"));
}

#[test]
fn migrations_apply_once_when_replicas_start_together() {
    let pg = crate::pg_or_skip!();
    let url = pg.fresh_db("migrate");
    let stores: Vec<PostgresStore> = std::thread::scope(|s| {
        let handles: Vec<_> = (0..4)
            .map(|i| {
                let url = url.clone();
                s.spawn(move || postgres(&url, &format!("r{i}")))
            })
            .collect();
        handles.into_iter().map(|h| h.join().unwrap()).collect()
    });
    for s in &stores {
        assert_eq!(s.schema_version().unwrap(), 5);
    }
    assert_eq!(
        pg.psql(&url, "SELECT COUNT(*) FROM sandbox_schema_migrations"),
        "5"
    );
    // Reopening applies nothing and keeps the data.
    stores[0]
        .put_run(&sample_run("kept", Phase::Completed))
        .unwrap();
    drop(stores);
    let again = postgres(&url, "r9");
    assert_eq!(again.get_run("kept").unwrap().unwrap().id, "kept");
}

#[test]
fn a_database_newer_than_the_build_is_refused() {
    let pg = crate::pg_or_skip!();
    let url = pg.fresh_db("newer");
    drop(postgres(&url, "r1"));
    pg.psql(
        &url,
        "INSERT INTO sandbox_schema_migrations (version, applied_at) VALUES (99, 0)",
    );
    let e = PostgresStore::connect(&url, "r2", TTL).err().unwrap();
    assert!(e.to_string().contains("schema version 99"), "{e}");
}

#[test]
fn a_bad_url_or_an_unreachable_server_is_a_clear_error() {
    let e = PostgresStore::connect("postgres://u@127.0.0.1:notaport/db", "r", TTL)
        .err()
        .unwrap();
    assert!(e.to_string().contains("invalid store URL"), "{e}");
    // Port 1 on loopback: nothing listens there.
    let e = PostgresStore::connect("postgres://u@127.0.0.1:1/db", "r", TTL)
        .err()
        .unwrap();
    assert!(e.to_string().contains("cannot get a connection"), "{e}");
}

#[test]
fn replicas_ownership_and_the_shared_queue() {
    let pg = crate::pg_or_skip!();
    let url = pg.fresh_db("cluster");
    let a = postgres(&url, "ra");
    let b = postgres(&url, "rb");
    let (ca, cb): (&dyn Cluster, &dyn Cluster) = (a.cluster().unwrap(), b.cluster().unwrap());
    let now = 1_000_000;
    ca.heartbeat("http://127.0.0.1:1", now).unwrap();
    cb.heartbeat("http://127.0.0.1:2", now).unwrap();
    let live: Vec<String> = ca
        .live_replicas(now - 10)
        .unwrap()
        .into_iter()
        .map(|r| r.id)
        .collect();
    assert_eq!(live, ["ra", "rb"]);
    assert_eq!(
        cb.live_replica("ra", now - 10).unwrap().unwrap().address,
        "http://127.0.0.1:1"
    );

    // A run belongs to the replica that stored it first, whoever updates it later.
    a.put_run(&sample_run("run-a", Phase::Running)).unwrap();
    let mut later = sample_run("run-a", Phase::Running);
    later.artifacts_expired = true;
    b.put_run(&later).unwrap();
    assert_eq!(cb.run_owner("run-a").unwrap().as_deref(), Some("ra"));
    assert_eq!(cb.run_owner("nope").unwrap(), None);

    ca.session_put("s1", "u", now).unwrap();
    cb.session_put("s1", "u", now).unwrap();
    assert_eq!(cb.session_owner("s1").unwrap().as_deref(), Some("ra"));

    // A session nobody holds is claimed by the first replica that wakes it; a live holder
    // keeps it; a dead holder's session goes to whoever claims it.
    assert_eq!(cb.session_claim("s2", "u", now - 10, now).unwrap(), Ok(()));
    assert_eq!(
        ca.session_claim("s2", "u", now - 10, now).unwrap(),
        Err("rb".to_string())
    );
    assert_eq!(cb.session_claim("s2", "u", now - 10, now).unwrap(), Ok(()));
    assert_eq!(ca.session_claim("s1", "u", now - 10, now).unwrap(), Ok(()));
    assert_eq!(
        ca.session_claim("s2", "u", now + 1, now + 1).unwrap(),
        Ok(()),
        "rb's heartbeat is older than the window: it counts as dead"
    );
    assert_eq!(ca.session_owner("s2").unwrap().as_deref(), Some("ra"));
    ca.session_delete("s2").unwrap();

    // The queue holds `max` places across both replicas.
    assert_eq!(ca.queue_enter("q1", 2, now).unwrap(), Some(0));
    assert_eq!(cb.queue_enter("q2", 2, now).unwrap(), Some(1));
    assert_eq!(ca.queue_enter("q3", 2, now).unwrap(), None);
    assert_eq!(cb.queue_len().unwrap(), 2);
    cb.queue_leave("q2").unwrap();
    assert_eq!(ca.queue_enter("q3", 2, now).unwrap(), Some(1));

    // B keeps beating, A stops: A's unfinished run fails, its queue places go, its session
    // stays known (the API answers 410 for it) until the forget window passes.
    b.put_run(&sample_run("run-b", Phase::Running)).unwrap();
    cb.heartbeat("http://127.0.0.1:2", now + 20_000).unwrap();
    let failed = cb
        .reap_dead(now + 10_000, 0, "replica_lost", "gone", now + 20_000)
        .unwrap();
    assert_eq!(failed, 1);
    let r = b.get_run("run-a").unwrap().unwrap();
    assert_eq!(r.phase, Phase::Failed);
    assert_eq!(r.reason_code.as_deref(), Some("replica_lost"));
    assert_eq!(r.message.as_deref(), Some("gone"));
    assert_eq!(r.finished_at, Some(now + 20_000));
    assert!(r.artifacts_expired, "the rest of the record is kept");
    assert_eq!(b.get_run("run-b").unwrap().unwrap().phase, Phase::Running);
    assert_eq!(cb.queue_len().unwrap(), 0);
    assert!(cb.live_replica("ra", now + 10_000).unwrap().is_none());
    assert_eq!(cb.session_owner("s1").unwrap().as_deref(), Some("ra"));
    cb.reap_dead(
        now + 10_000,
        now + 10_000,
        "replica_lost",
        "gone",
        now + 20_000,
    )
    .unwrap();
    assert_eq!(cb.session_owner("s1").unwrap(), None);

    // A restarted process is a new replica: at start-up it fails only what no live replica
    // runs (nothing of B's).
    let c = postgres(&url, "rc");
    assert_eq!(
        c.fail_unfinished("server_restart", "m", now + 30_000)
            .unwrap(),
        0
    );
    assert_eq!(c.get_run("run-b").unwrap().unwrap().phase, Phase::Running);

    // A clean stop makes a replica dead at once.
    let wall = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_millis() as i64;
    cb.heartbeat("http://127.0.0.1:2", wall).unwrap();
    assert!(cb.live_replica("rb", wall - 10_000).unwrap().is_some());
    cb.leave().unwrap();
    assert!(cb.live_replica("rb", wall - 10_000).unwrap().is_none());
}
