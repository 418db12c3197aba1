//! The behaviour every store must have, as one suite the unit tests run on the memory and
//! SQLite stores and the cluster tests run on PostgreSQL too. Public so that tests outside
//! this crate can run it; it panics on the first difference.

use super::*;

/// A run record of user `u` in `phase` with fixed, valid values elsewhere: a starting point
/// that a test changes only where it matters.
pub fn sample_run(id: &str, phase: Phase) -> RunRecord {
    RunRecord {
        id: id.into(),
        user_id: "u".into(),
        session_id: None,
        spec_version: "1.0".into(),
        runtime: "wasm".into(),
        runtime_version: "0.1.0".into(),
        base_image: "wasmsand/default".into(),
        image_digest: "sha256:00".into(),
        policy_hash: "ab".into(),
        command: vec!["echo".into(), "hi".into()],
        phase,
        reason_code: None,
        message: None,
        exit_code: None,
        created_at: 1000,
        starting_at: None,
        started_at: None,
        finished_at: None,
        resource_usage: ResourceUsage::default(),
        capture_patterns: vec![],
        artifacts: vec![],
        artifacts_expired: false,
        artifacts_capped: false,
        last_seq: 0,
        log_truncated: false,
        frames_dropped: 0,
        node_id: None,
        worker_id: None,
        interactive: None,
    }
}

/// The behaviour every store must have.
pub fn exercise(store: &dyn Store) {
    let mut done = sample_run("r1", Phase::Completed);
    done.finished_at = Some(2000);
    done.exit_code = Some(0);
    done.resource_usage.artifact_bytes = 10;
    done.artifacts = vec![ArtifactEntry {
        path: "out.txt".into(),
        size: 10,
        kind: "file".into(),
        content_type: "text/plain".into(),
    }];
    store.put_run(&done).unwrap();
    store.put_run(&sample_run("r2", Phase::Running)).unwrap();
    store.put_run(&sample_run("r3", Phase::Queued)).unwrap();
    assert_eq!(store.get_run("r1").unwrap().unwrap(), done);
    assert!(store.get_run("nope").unwrap().is_none());

    assert_eq!(
        store.fail_unfinished("server_restart", "m", 5000).unwrap(),
        2
    );
    let r2 = store.get_run("r2").unwrap().unwrap();
    assert_eq!(r2.phase, Phase::Failed);
    assert_eq!(r2.reason_code.as_deref(), Some("server_restart"));
    assert_eq!(r2.finished_at, Some(5000));
    assert_eq!(
        store.get_run("r1").unwrap().unwrap().phase,
        Phase::Completed
    );

    assert_eq!(store.user_artifact_bytes("u").unwrap(), 10);
    assert_eq!(store.user_artifact_bytes("other").unwrap(), 0);
    assert_eq!(store.runs_with_artifacts_before(1999).unwrap().len(), 0);
    let old = store.runs_with_artifacts_before(2001).unwrap();
    assert_eq!(old.len(), 1);
    let mut expired = old[0].clone();
    expired.artifacts_expired = true;
    store.put_run(&expired).unwrap();
    assert_eq!(store.runs_with_artifacts_before(2001).unwrap().len(), 0);
    assert_eq!(store.user_artifact_bytes("u").unwrap(), 0);

    let e = IdemEntry {
        endpoint: "runs".into(),
        user_id: "u".into(),
        key: "k".into(),
        fingerprint: "f".into(),
        object_id: "r1".into(),
        created_at: 100,
        status: 202,
        response: serde_json::json!({"run_id": "r1"}),
    };
    store.idem_put(&e).unwrap();
    assert_eq!(store.idem_get("runs", "u", "k").unwrap().unwrap(), e);
    assert!(store.idem_get("sessions", "u", "k").unwrap().is_none());
    assert!(store.idem_get("runs", "v", "k").unwrap().is_none());
    assert_eq!(store.list_idempotency().unwrap(), vec![e.clone()]);
    let mut ids: Vec<String> = store
        .list_runs()
        .unwrap()
        .into_iter()
        .map(|r| r.id)
        .collect();
    ids.sort();
    assert_eq!(ids, ["r1", "r2", "r3"]);
    assert_eq!(store.idem_purge(100).unwrap(), 0);
    assert_eq!(store.idem_purge(101).unwrap(), 1);
    assert!(store.idem_get("runs", "u", "k").unwrap().is_none());
    exercise_idem_claims(store);

    // Quota view: r2 and r1 were created at 1000 (r2 failed at restart, so none active).
    let mut live = sample_run("r4", Phase::Running);
    live.created_at = 9000;
    store.put_run(&live).unwrap();
    let mut long = sample_run("r5", Phase::Completed);
    long.created_at = 8000;
    long.resource_usage.wall_time_sec = 9.0;
    long.resource_usage.cpu_time_sec = 2.5;
    long.resource_usage.artifact_bytes = 300;
    store.put_run(&long).unwrap();
    let u = store.user_usage("u", 8500, 5000, 10_000).unwrap();
    assert_eq!(u.active_runs, 1);
    assert_eq!((u.recent_runs, u.oldest_recent), (1, Some(9000)));
    // The finished run counts its CPU time (not its wall time); the one in flight, nothing
    // until it starts.
    assert_eq!((u.cpu_ms, u.oldest_cpu), (2500, Some(8000)));
    assert_eq!((u.artifact_bytes_day, u.oldest_artifact), (300, Some(8000)));
    let mut started = live.clone();
    started.started_at = Some(9400);
    store.put_run(&started).unwrap();
    let u = store.user_usage("u", 8500, 5000, 10_000).unwrap();
    assert_eq!(u.cpu_ms, 2500 + 600);
    store.put_run(&live).unwrap();
    let u = store.user_usage("u", 8500, 5000, 10_000).unwrap();
    assert_eq!(
        store.user_usage("v", 0, 0, 10_000).unwrap(),
        UserUsage::default()
    );
    // Admission: the count and the insert are one step; a refused run is not stored.
    let one = UserLimits {
        concurrent_runs: 1,
        ..Default::default()
    };
    let (seen, stored) = store
        .admit_run(&sample_run("r6", Phase::Queued), &one, 8500, 5000, 10_000)
        .unwrap();
    assert!(!stored);
    assert!(store.get_run("r6").unwrap().is_none());
    // With only concurrency capped, an admission reads the runs in flight and none of the
    // finished ones (r5's CPU and artifacts are not looked at); with a rate, the minute's.
    let in_flight = UserUsage {
        active_runs: 1,
        recent_runs: 1,
        oldest_recent: Some(9000),
        ..Default::default()
    };
    assert_eq!(seen, in_flight);
    let rate = UserLimits {
        runs_per_minute: 1,
        ..Default::default()
    };
    let (seen, stored) = store
        .admit_run(&sample_run("r6", Phase::Queued), &rate, 8500, 5000, 10_000)
        .unwrap();
    assert_eq!((seen, stored), (in_flight, false));
    let day = UserLimits {
        cpu_seconds_per_day: 2,
        ..Default::default()
    };
    let (seen, stored) = store
        .admit_run(&sample_run("r6", Phase::Queued), &day, 8500, 5000, 10_000)
        .unwrap();
    assert_eq!((seen, stored), (u.clone(), false));
    assert!(store.get_run("r6").unwrap().is_none());
    let two = UserLimits {
        concurrent_runs: 2,
        runs_per_minute: 2,
        cpu_seconds_per_day: 4,
        artifact_bytes_per_day: 1000,
    };
    let (_, stored) = store
        .admit_run(&sample_run("r6", Phase::Queued), &two, 8500, 5000, 10_000)
        .unwrap();
    assert!(stored);
    assert_eq!(
        store
            .user_usage("u", 8500, 5000, 10_000)
            .unwrap()
            .active_runs,
        2
    );
    // Now two in flight: the limit of two refuses the next; no limit admits it.
    let (seen, stored) = store
        .admit_run(&sample_run("r7", Phase::Queued), &two, 8500, 5000, 10_000)
        .unwrap();
    assert_eq!((seen.active_runs, stored), (2, false));
    let (_, stored) = store
        .admit_run(
            &sample_run("r7", Phase::Queued),
            &Default::default(),
            0,
            0,
            10_000,
        )
        .unwrap();
    assert!(stored && store.get_run("r7").unwrap().is_some());
    // The day's artifact bytes refuse only runs that capture artifacts.
    let bytes = UserLimits {
        artifact_bytes_per_day: 300,
        ..Default::default()
    };
    let mut captures = sample_run("r8", Phase::Queued);
    captures.capture_patterns = vec!["*.csv".into()];
    let (seen, stored) = store
        .admit_run(&captures, &bytes, 8500, 5000, 10_000)
        .unwrap();
    assert_eq!((seen.artifact_bytes_day, stored), (300, false));
    let (_, stored) = store
        .admit_run(&sample_run("r8", Phase::Queued), &bytes, 8500, 5000, 10_000)
        .unwrap();
    assert!(stored);

    for (i, (event, run)) in [
        ("sandbox.run.created", "r4"),
        ("sandbox.run.running", "r4"),
        ("sandbox.session.created", ""),
    ]
    .iter()
    .enumerate()
    {
        store
            .put_audit(&AuditEvent {
                id: format!("a{i}"),
                ts: 100 + i as i64,
                event: event.to_string(),
                user_id: if run.is_empty() {
                    "v".into()
                } else {
                    "u".into()
                },
                run_id: (!run.is_empty()).then(|| run.to_string()),
                session_id: run.is_empty().then(|| "s1".to_string()),
                body: serde_json::json!({ "event": event }),
            })
            .unwrap();
    }
    let q = |f: &dyn Fn(&mut AuditQuery)| {
        let mut q = AuditQuery {
            limit: 10,
            ..Default::default()
        };
        f(&mut q);
        store.list_audit(&q).unwrap()
    };
    let (all, n) = q(&|_| {});
    assert_eq!(n, 3);
    assert_eq!(
        all.iter().map(|e| e.id.as_str()).collect::<Vec<_>>(),
        ["a0", "a1", "a2"]
    );
    assert_eq!(all[2].body["event"], "sandbox.session.created");
    let (r4, n) = q(&|q| q.run_id = Some("r4".into()));
    assert_eq!((r4.len(), n), (2, 2));
    let (page, n) = q(&|q| {
        q.user_id = Some("u".into());
        q.limit = 1;
        q.offset = 1;
    });
    assert_eq!((page[0].id.as_str(), n), ("a1", 2));
    let (ev, _) = q(&|q| q.event = Some("sandbox.session.created".into()));
    assert_eq!(ev[0].session_id.as_deref(), Some("s1"));
    assert_eq!(store.audit_purge(101).unwrap(), 1);
    assert_eq!(q(&|_| {}).1, 2);
}

/// The admin list: every filter, both sorts and directions, and paging give the same
/// answer as the in-memory reference ([`RunQuery::apply`]). Expects an empty store.
pub fn exercise_queries(store: &dyn Store) {
    let phases = [
        Phase::Completed,
        Phase::Failed,
        Phase::Running,
        Phase::Queued,
        Phase::Killed,
    ];
    for i in 0..40i64 {
        let mut r = sample_run(&format!("q{i:02}"), phases[i as usize % phases.len()]);
        r.user_id = format!("user{}", i % 3);
        r.created_at = 1_000 + i * 10;
        // Some runs share a start time (the tie is broken by created_at, then id); a few
        // never started.
        r.started_at = (i % 7 != 0).then_some(2_000 + (i / 2) * 10);
        r.finished_at = r.phase.is_terminal().then_some(3_000 + i * 5);
        r.base_image = if i % 4 == 0 {
            "python:3.11-slim".into()
        } else {
            "wasmsand/default".into()
        };
        r.image_digest = format!("sha256:{:02x}", i % 5);
        r.message = (i % 6 == 0).then(|| format!("Nonzero exit {i}"));
        // Records older than the node fields have none.
        r.node_id = (i % 8 != 0).then(|| format!("node-{}", i % 2));
        r.worker_id = (i % 8 != 0).then(|| format!("worker-{}", i % 4));
        store.put_run(&r).unwrap();
    }
    let all = store.list_runs().unwrap();
    assert_eq!(all.len(), 40);
    let base = RunQuery {
        limit: 200,
        ..RunQuery::default()
    };
    let mut queries = Vec::new();
    for sort in [RunSort::StartedAt, RunSort::FinishedAt] {
        for desc in [false, true] {
            queries.push(RunQuery {
                sort,
                desc,
                ..base.clone()
            });
            queries.push(RunQuery {
                sort,
                desc,
                limit: 7,
                offset: 5,
                ..base.clone()
            });
        }
    }
    queries.extend([
        RunQuery {
            user_id: Some("user1".into()),
            ..base.clone()
        },
        RunQuery {
            phase: Some("failed".into()),
            desc: true,
            ..base.clone()
        },
        RunQuery {
            runtime: Some("docker".into()),
            ..base.clone()
        },
        RunQuery {
            image_digest: Some("sha256:03".into()),
            ..base.clone()
        },
        RunQuery {
            base_image: Some("python:3.11-slim".into()),
            ..base.clone()
        },
        RunQuery {
            q: Some("PYTHON".into()),
            ..base.clone()
        },
        RunQuery {
            q: Some("nonzero exit 1".into()),
            ..base.clone()
        },
        // Wildcards of SQL's LIKE are plain characters here.
        RunQuery {
            q: Some("%_".into()),
            ..base.clone()
        },
        RunQuery {
            started_from: Some(2_050),
            started_to: Some(2_100),
            ..base.clone()
        },
        RunQuery {
            finished_from: Some(3_100),
            sort: RunSort::FinishedAt,
            desc: true,
            ..base.clone()
        },
        RunQuery {
            user_id: Some("user2".into()),
            phase: Some("completed".into()),
            finished_to: Some(3_150),
            limit: 2,
            offset: 1,
            ..base.clone()
        },
        RunQuery {
            offset: 100,
            ..base.clone()
        },
        RunQuery {
            node_id: Some("node-1".into()),
            ..base.clone()
        },
        RunQuery {
            node_id: Some("node-0".into()),
            worker_id: Some("worker-2".into()),
            phase: Some("running".into()),
            ..base.clone()
        },
        RunQuery {
            node_id: Some("no-such-node".into()),
            ..base.clone()
        },
        // The text search with other filters (a store may answer the search alone apart).
        RunQuery {
            q: Some("py".into()),
            user_id: Some("user1".into()),
            sort: RunSort::FinishedAt,
            limit: 3,
            ..base.clone()
        },
        RunQuery {
            q: Some("exit".into()),
            started_from: Some(2_000),
            offset: 2,
            ..base.clone()
        },
    ]);
    let check = |q: &RunQuery, all: Vec<RunRecord>| {
        let got = store.query_runs(q).unwrap();
        let want = q.apply(all);
        let ids = |p: &RunPage| p.items.iter().map(|r| r.id.clone()).collect::<Vec<_>>();
        assert_eq!(ids(&got), ids(&want), "items of {q:?}");
        assert_eq!(got.total, want.total, "total of {q:?}");
        assert_eq!(got.items, want.items, "records of {q:?}");
    };
    for q in &queries {
        check(q, all.clone());
    }
    // A run's text changes with its record: the search finds the new words, not the old.
    let mut changed = all.iter().find(|r| r.id == "q06").unwrap().clone();
    changed.message = Some("Killed by the reaper".into());
    changed.base_image = "alpine:3".into();
    store.put_run(&changed).unwrap();
    let all = store.list_runs().unwrap();
    for needle in ["REAPER", "alpine", "nonzero exit 6", "python"] {
        let q = RunQuery {
            q: Some(needle.into()),
            ..base.clone()
        };
        check(&q, all.clone());
    }
    assert_eq!(
        store
            .query_runs(&RunQuery {
                q: Some("reaper".into()),
                ..base.clone()
            })
            .unwrap()
            .total,
        1
    );
}

/// Claims of idempotency keys: one holder at a time, its answer replaces its claim, expired
/// entries and abandoned claims are taken over, a release frees only a claim.
pub fn exercise_idem_claims(store: &dyn Store) {
    let claim = |key: &str, at: i64| IdemEntry {
        endpoint: "runs".into(),
        user_id: "u".into(),
        key: key.into(),
        fingerprint: "f".into(),
        object_id: String::new(),
        created_at: at,
        status: 0,
        response: Value::Null,
    };
    let c1 = claim("c", 1000);
    assert_eq!(store.idem_claim(&c1, 0, 0).unwrap(), None);
    // Held: a second claimant sees the pending claim.
    let held = store.idem_claim(&claim("c", 1001), 0, 0).unwrap().unwrap();
    assert!(held.is_pending());
    assert_eq!(held, c1);
    // Another user or endpoint is another key.
    let mut other = claim("c", 1001);
    other.user_id = "v".into();
    assert_eq!(store.idem_claim(&other, 0, 0).unwrap(), None);
    // The holder's answer replaces its claim; a release then leaves it alone.
    let done = IdemEntry {
        object_id: "r9".into(),
        status: 200,
        response: serde_json::json!({"run_id": "r9"}),
        ..claim("c", 1002)
    };
    store.idem_put(&done).unwrap();
    store.idem_release("runs", "u", "c").unwrap();
    assert_eq!(
        store.idem_claim(&claim("c", 1003), 0, 5000).unwrap(),
        Some(done.clone())
    );
    // An answer is kept until it expires, then the key is free.
    assert_eq!(
        store.idem_claim(&claim("c", 1004), 1002, 5000).unwrap(),
        Some(done)
    );
    assert_eq!(store.idem_claim(&claim("c", 1005), 1003, 0).unwrap(), None);
    // A claim is abandoned once older than the stale bound, and released claims are gone.
    assert!(
        store
            .idem_claim(&claim("c", 1006), 0, 1005)
            .unwrap()
            .is_some()
    );
    let taken = claim("c", 1007);
    assert_eq!(store.idem_claim(&taken, 0, 1006).unwrap(), None);
    assert_eq!(store.idem_get("runs", "u", "c").unwrap(), Some(taken));
    store.idem_release("runs", "u", "c").unwrap();
    assert_eq!(store.idem_get("runs", "u", "c").unwrap(), None);
    store.idem_release("runs", "v", "c").unwrap();
    assert_eq!(store.idem_purge(i64::MAX).unwrap(), 0);
}

fn saved(id: &str, user: &str, saved_at: i64, chunks: &[&str]) -> SavedSession {
    SavedSession {
        session_id: id.into(),
        user_id: user.into(),
        saved_at,
        expires_at: saved_at + 1000,
        meta: serde_json::json!({ "env": { "A": "1" } }),
        chunks: chunks.iter().map(|c| c.to_string()).collect(),
        payload_len: 3,
        payload_sha256: "ff".into(),
    }
}

fn chunk(h: &str) -> (String, Vec<u8>) {
    (h.to_string(), format!("bytes of {h}").into_bytes())
}

/// Checkpoints: saved and read back, chunks stored once and shared, a chunk forgotten with
/// the last checkpoint listing it, a save that lists a chunk nobody gave refused.
pub fn exercise_saved_sessions(store: &dyn Store) {
    assert!(store.session_saved("s1").unwrap().is_none());
    assert!(!store.session_forget("s1").unwrap());
    let all = ["a".to_string(), "b".into(), "c".into()];
    assert_eq!(store.chunks_missing(&all).unwrap(), all.to_vec());

    // A save listing a chunk it neither gives nor finds writes nothing and names it.
    let s1 = saved("s1", "u", 10, &["a", "b", "a"]);
    assert_eq!(
        store.session_save(&s1, &[chunk("a")]).unwrap(),
        vec!["b".to_string()]
    );
    assert!(store.session_saved("s1").unwrap().is_none());
    assert_eq!(
        store.chunk_totals().unwrap().0,
        0,
        "a refused save keeps no chunk"
    );

    assert!(
        store
            .session_save(&s1, &[chunk("a"), chunk("b")])
            .unwrap()
            .is_empty()
    );
    assert_eq!(store.session_saved("s1").unwrap().unwrap(), s1);
    assert_eq!(store.chunks_missing(&all).unwrap(), vec!["c".to_string()]);
    let mut got = store.chunks_get(&all).unwrap();
    got.sort();
    assert_eq!(got, vec![chunk("a"), chunk("b")]);

    // A fork sharing "b" sends only what is new; the shared chunk is stored once.
    let s2 = saved("s2", "v", 20, &["b", "c"]);
    assert!(store.session_save(&s2, &[chunk("c")]).unwrap().is_empty());
    assert_eq!(store.chunk_totals().unwrap().0, 3);

    // A new checkpoint of s1 drops "a"; "b" stays for s2 (and s1).
    let s1b = saved("s1", "u", 30, &["b", "d"]);
    assert!(store.session_save(&s1b, &[chunk("d")]).unwrap().is_empty());
    assert_eq!(store.chunks_missing(&all).unwrap(), vec!["a".to_string()]);
    assert_eq!(store.session_saved("s1").unwrap().unwrap(), s1b);

    let ids = |v: Vec<SavedSession>| v.into_iter().map(|s| s.session_id).collect::<Vec<_>>();
    assert_eq!(ids(store.saved_sessions(None).unwrap()), vec!["s2", "s1"]);
    assert_eq!(ids(store.saved_sessions(Some("u")).unwrap()), vec!["s1"]);
    assert!(store.saved_sessions(Some("w")).unwrap().is_empty());
    assert_eq!(store.saved_expired(1020).unwrap(), vec!["s2".to_string()]);
    assert_eq!(store.saved_ids_with_prefix("s").unwrap(), vec!["s1", "s2"]);
    assert_eq!(store.saved_ids_with_prefix("s1").unwrap(), vec!["s1"]);
    assert!(store.saved_ids_with_prefix("s1:").unwrap().is_empty());
    assert!(store.saved_ids_with_prefix("%").unwrap().is_empty());
    assert!(store.saved_expired(1019).unwrap().is_empty());

    // Forgetting s1 frees "d"; "b" and "c" stay for s2; forgetting s2 frees everything.
    assert!(store.session_forget("s1").unwrap());
    assert!(!store.session_forget("s1").unwrap());
    let mut left = store
        .chunks_get(&["b".into(), "c".into(), "d".into()])
        .unwrap();
    left.sort();
    assert_eq!(left, vec![chunk("b"), chunk("c")]);
    assert!(store.session_forget("s2").unwrap());
    assert_eq!(store.chunk_totals().unwrap(), (0, 0));
    assert!(store.saved_sessions(None).unwrap().is_empty());
}

/// Run retention: finished runs older than the cutoff go, oldest first and at most `limit` a
/// call; unfinished runs and newer ones stay whatever their age.
pub fn exercise_retention(store: &dyn Store) {
    for (id, phase, finished) in [
        ("old1", Phase::Completed, Some(100)),
        ("old2", Phase::Failed, Some(200)),
        ("old3", Phase::Killed, Some(300)),
        ("new", Phase::Completed, Some(5000)),
        ("running", Phase::Running, None),
        ("queued", Phase::Queued, None),
    ] {
        let mut r = sample_run(id, phase);
        r.created_at = 50;
        r.finished_at = finished;
        store.put_run(&r).unwrap();
    }
    let first = store.runs_purge(1000, 2).unwrap();
    let ids: Vec<&str> = first.iter().map(|r| r.id.as_str()).collect();
    assert_eq!(ids, ["old1", "old2"]);
    assert!(store.get_run("old1").unwrap().is_none());
    let rest = store.runs_purge(1000, 100).unwrap();
    assert_eq!(rest.len(), 1);
    assert_eq!(rest[0].id, "old3");
    assert!(store.runs_purge(1000, 100).unwrap().is_empty());
    for id in ["new", "running", "queued"] {
        assert!(store.get_run(id).unwrap().is_some(), "{id}");
    }
    let mut left: Vec<String> = store
        .list_runs()
        .unwrap()
        .into_iter()
        .map(|r| r.id)
        .collect();
    left.sort();
    assert_eq!(left, ["new", "queued", "running"]);
}
