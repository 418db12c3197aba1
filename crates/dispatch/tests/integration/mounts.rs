//! Host folders and changes over JSON-RPC: `create`'s `mounts`, `sandbox.mount`,
//! `sandbox.mounts`, `sandbox.diff` (on the root and on a fork) and `sandbox.exportChanges`,
//! with the errors a bad request gets.

use std::fs;
use std::sync::Arc;

use serde_json::{Value, json};
use wasmsand_dispatch::{DispatchConfig, Dispatcher, Notify};

fn answer(d: &Dispatcher, method: &str, params: Value) -> Value {
    let notify: Notify = Arc::new(|_| {});
    let req = json!({"jsonrpc": "2.0", "id": 1, "method": method, "params": params});
    d.handle(&req, &notify).expect("a request is answered")
}

fn ok(d: &Dispatcher, method: &str, params: Value) -> Value {
    let a = answer(d, method, params);
    assert!(a.get("error").is_none(), "{method}: {a}");
    a["result"].clone()
}

fn err(d: &Dispatcher, method: &str, params: Value) -> Value {
    let a = answer(d, method, params);
    assert!(a.get("result").is_none(), "{method} should fail: {a}");
    a["error"].clone()
}

fn folder() -> tempfile::TempDir {
    let t = tempfile::tempdir().unwrap();
    fs::write(t.path().join("a.txt"), "one\ntwo\n").unwrap();
    fs::write(t.path().join(".env"), "SECRET=1\n").unwrap();
    fs::create_dir(t.path().join("src")).unwrap();
    fs::write(t.path().join("src/m.py"), "print(1)\n").unwrap();
    t
}

#[test]
fn create_mounts_and_diff_reports_the_changes() {
    let host = folder();
    let d = Dispatcher::new(DispatchConfig::default());
    ok(
        &d,
        "create",
        json!({"mounts": [{"host": host.path(), "path": "repo"}]}),
    );
    let r = ok(
        &d,
        "run",
        json!({"command": "cd repo && ls -A && sed -i s/two/TWO/ a.txt && rm src/m.py && echo n > new"}),
    );
    assert_eq!(r["stdout"], "a.txt\nsrc\n", "{r}");
    let diff = ok(&d, "sandbox.diff", json!({}));
    assert_eq!(diff["root"], "/home/user/repo");
    let files: Vec<(String, String)> = diff["files"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| {
            (
                f["path"].as_str().unwrap().into(),
                f["status"].as_str().unwrap().into(),
            )
        })
        .collect();
    assert_eq!(
        files,
        [
            ("a.txt".to_string(), "modified".to_string()),
            ("new".into(), "added".into()),
            ("src/m.py".into(), "deleted".into()),
        ]
    );
    assert!(
        diff["patch"].as_str().unwrap().contains("-two\n+TWO\n"),
        "{diff}"
    );
    let m = ok(&d, "sandbox.mounts", json!({}));
    assert_eq!(m["mounts"][0]["path"], "/home/user/repo");
    assert_eq!(m["mounts"][0]["readOnly"], false);

    // A fork's own changes, against its parent.
    let fork = ok(&d, "sandbox.fork", json!({}))["sandboxId"].clone();
    ok(
        &d,
        "run",
        json!({"command": "echo f > /home/user/repo/forked", "sandboxId": fork}),
    );
    let fd = ok(
        &d,
        "sandbox.diff",
        json!({"sandboxId": fork, "since": "parent"}),
    );
    assert_eq!(fd["files"].as_array().unwrap().len(), 1, "{fd}");
    assert_eq!(fd["files"][0]["path"], "forked");

    // Exported into a directory the caller names.
    let out = tempfile::tempdir().unwrap();
    fs::write(out.path().join("a.txt"), "one\ntwo\n").unwrap();
    let e = ok(&d, "sandbox.exportChanges", json!({"dir": out.path()}));
    assert_eq!(e["written"], json!(["a.txt", "new"]), "{e}");
    assert_eq!(
        fs::read_to_string(out.path().join("a.txt")).unwrap(),
        "one\nTWO\n"
    );
    assert_eq!(
        fs::read_to_string(host.path().join("a.txt")).unwrap(),
        "one\ntwo\n"
    );
}

#[test]
fn sandbox_mount_adds_a_folder_read_only_and_since_a_snapshot() {
    let host = folder();
    let d = Dispatcher::new(DispatchConfig::default());
    let m = ok(
        &d,
        "sandbox.mount",
        json!({"host": host.path(), "path": "/home/user/ro", "readOnly": true, "allowSecrets": [".env*"]}),
    );
    assert_eq!(m["readOnly"], true);
    let r = ok(
        &d,
        "run",
        json!({"command": "cat ro/.env; echo x > ro/a.txt"}),
    );
    assert_eq!(r["stdout"], "SECRET=1\n");
    assert_ne!(r["exitCode"], 0);
    let snap = ok(&d, "snapshot.create", json!({}))["id"].clone();
    ok(&d, "run", json!({"command": "echo later > later.txt"}));
    let diff = ok(
        &d,
        "sandbox.diff",
        json!({"since": "snapshot", "snapshotId": snap, "path": "/home/user"}),
    );
    assert_eq!(diff["files"][0]["path"], "later.txt", "{diff}");
}

#[test]
fn bad_mount_requests_are_clear_errors_and_create_can_be_sent_again() {
    let host = folder();
    let d = Dispatcher::new(DispatchConfig::default());
    let e = err(
        &d,
        "create",
        json!({"mounts": [{"host": "/no/such/dir", "path": "x"}]}),
    );
    assert_eq!(e["code"], -32602, "{e}");
    assert!(
        e["message"].as_str().unwrap().contains("/no/such/dir"),
        "{e}"
    );
    let e = err(
        &d,
        "create",
        json!({"mounts": [{"host": host.path(), "path": "x", "colour": 1}]}),
    );
    assert!(
        e["message"].as_str().unwrap().contains("mounts[0].colour"),
        "{e}"
    );
    let e = err(
        &d,
        "create",
        json!({"mounts": [{"host": host.path(), "path": "x", "allowSecrets": ["*.key"]}]}),
    );
    assert!(
        e["message"]
            .as_str()
            .unwrap()
            .contains("unknown secret pattern"),
        "{e}"
    );
    // The corrected request is taken.
    ok(
        &d,
        "create",
        json!({"mounts": [{"host": host.path(), "path": "x"}]}),
    );
    let e = err(&d, "sandbox.diff", json!({"since": "yesterday"}));
    assert_eq!(e["code"], -32602);
    let e = err(&d, "sandbox.diff", json!({"since": "parent"}));
    assert!(e["message"].as_str().unwrap().contains("not a fork"), "{e}");
    let e = err(&d, "sandbox.exportChanges", json!({"dir": "/no/such/out"}));
    assert!(
        e["message"].as_str().unwrap().contains("/no/such/out"),
        "{e}"
    );
    let e = err(&d, "sandbox.export", json!({}));
    assert!(
        e["message"].as_str().unwrap().contains("host folder"),
        "{e}"
    );
    // And the sandbox still works.
    assert_eq!(
        ok(&d, "run", json!({"command": "cat x/a.txt"}))["stdout"],
        "one\ntwo\n"
    );
}

#[test]
fn run_with_preview_then_commit_or_discard() {
    let host = folder();
    let d = Dispatcher::new(DispatchConfig::default());
    ok(
        &d,
        "create",
        json!({"mounts": [{"host": host.path(), "path": "repo"}]}),
    );
    let r = ok(
        &d,
        "run",
        json!({"command": "sed -i s/one/ONE/ repo/a.txt && cat repo/a.txt", "preview": true}),
    );
    assert_eq!(r["stdout"], "ONE\ntwo\n");
    let id = r["preview"]["sandboxId"].as_str().unwrap().to_string();
    assert_eq!(r["preview"]["changes"]["files"][0]["path"], "a.txt", "{r}");
    // The preview is a fork: it can be looked at before choosing.
    let seen = ok(
        &d,
        "run",
        json!({"command": "cat repo/a.txt", "sandboxId": id}),
    );
    assert_eq!(seen["stdout"], "ONE\ntwo\n");
    assert_eq!(
        ok(&d, "run", json!({"command": "cat repo/a.txt"}))["stdout"],
        "one\ntwo\n"
    );
    let c = ok(&d, "sandbox.commit", json!({"preview": id}));
    assert_eq!(c["applied"][0]["path"], "/home/user/repo/a.txt", "{c}");
    assert_eq!(
        ok(&d, "run", json!({"command": "cat repo/a.txt"}))["stdout"],
        "ONE\ntwo\n"
    );
    let gone = err(&d, "sandbox.commit", json!({"preview": id}));
    assert_eq!(gone["code"], -32602, "a committed preview is gone: {gone}");

    let r = ok(
        &d,
        "run",
        json!({"command": "rm repo/a.txt", "preview": true}),
    );
    let id = r["preview"]["sandboxId"].as_str().unwrap().to_string();
    ok(&d, "sandbox.discard", json!({"preview": id}));
    assert_eq!(
        ok(&d, "run", json!({"command": "cat repo/a.txt"}))["stdout"],
        "ONE\ntwo\n"
    );

    // A conflict applies nothing and keeps the preview.
    let r = ok(
        &d,
        "run",
        json!({"command": "echo theirs > repo/a.txt", "preview": true}),
    );
    let id = r["preview"]["sandboxId"].as_str().unwrap().to_string();
    ok(&d, "run", json!({"command": "echo ours > repo/a.txt"}));
    let e = err(&d, "sandbox.commit", json!({"preview": id}));
    assert_eq!(e["data"]["kind"], "merge_conflict", "{e}");
    ok(&d, "sandbox.discard", json!({"preview": id}));
}

#[test]
fn best_of_answers_every_attempt_as_a_preview() {
    let d = Dispatcher::new(DispatchConfig::default());
    ok(&d, "run", json!({"command": "echo 0 > n"}));
    let r = ok(
        &d,
        "sandbox.bestOf",
        json!({"attempts": [
            {"command": "echo $V > n; test $V -gt 1", "env": {"V": "1"}},
            {"command": "echo $V > n; test $V -gt 1", "env": {"V": "2"}},
            {"command": "echo $V > n; test $V -gt 1", "env": {"V": "3"}}
        ], "concurrency": 2}),
    );
    let a = r["attempts"].as_array().unwrap();
    let codes: Vec<i64> = a.iter().map(|x| x["exitCode"].as_i64().unwrap()).collect();
    assert_eq!(codes, [1, 0, 0]);
    let pick = a[2]["preview"]["sandboxId"].as_str().unwrap();
    ok(&d, "sandbox.commit", json!({"preview": pick}));
    assert_eq!(ok(&d, "run", json!({"command": "cat n"}))["stdout"], "3\n");
    for bad in [
        json!({"attempts": []}),
        json!({"attempts": [{"env": {}}]}),
        json!({"attempts": [{"command": "true", "env": {"X": 1}}]}),
        json!({}),
    ] {
        let e = err(&d, "sandbox.bestOf", bad.clone());
        assert_eq!(e["code"], -32602, "{bad}: {e}");
    }
}
