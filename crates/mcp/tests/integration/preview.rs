//! Previews, commits, discards, best-of-N and diffs through MCP, over a host folder the
//! operator mounts: rmcp's client over real HTTP, against a real folder on disk.

use std::fs;
use std::path::Path;
use std::process::Command;

use rmcp::RoleClient;
use rmcp::model::CallToolResult;
use rmcp::service::RunningService;
use serde_json::{Value, json};
use wasmsand::{HostMount, MountOptions};
use wasmsand_mcp::{Mcp, McpConfig};

use crate::http::{call, client, serve};

type Client = RunningService<RoleClient, ()>;

/// A project folder with a secret and an ignored build output beside its code.
fn project() -> tempfile::TempDir {
    let t = tempfile::tempdir().unwrap();
    fs::write(t.path().join("main.py"), "print('hello')\n").unwrap();
    fs::write(t.path().join("notes.txt"), "one\n").unwrap();
    fs::write(t.path().join(".env"), "KEY=secret\n").unwrap();
    t
}

fn mounted(host: &Path) -> McpConfig {
    McpConfig {
        mounts: vec![HostMount {
            host: host.to_path_buf(),
            at: "repo".into(),
            options: MountOptions::default(),
        }],
        ..McpConfig::default()
    }
}

fn ok(r: &CallToolResult) -> Value {
    assert_ne!(r.is_error, Some(true), "{r:?}");
    r.structured_content.clone().expect("structured content")
}

fn err_text(r: &CallToolResult) -> String {
    assert_eq!(r.is_error, Some(true), "{r:?}");
    r.content
        .iter()
        .filter_map(|c| c.as_text().map(|t| t.text.clone()))
        .collect()
}

async fn session(c: &Client) -> String {
    ok(&call(c, "session_create", json!({})).await)["session_id"]
        .as_str()
        .unwrap()
        .to_string()
}

async fn sh(c: &Client, sid: &str, command: &str) -> String {
    let out = ok(&call(
        c,
        "sandbox_run",
        json!({"session_id": sid, "command": command}),
    )
    .await);
    assert_eq!(out["exit_code"], 0, "{out}");
    out["stdout"].as_str().unwrap().to_string()
}

fn paths(changes: &Value) -> Vec<String> {
    changes["files"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| {
            format!(
                "{} {}",
                f["status"].as_str().unwrap(),
                f["path"].as_str().unwrap()
            )
        })
        .collect()
}

/// `git apply` of `patch` in a copy of `host`; the copy.
fn applied_copy(host: &Path, patch: &str) -> tempfile::TempDir {
    let copy = tempfile::tempdir().unwrap();
    let cp = Command::new("cp")
        .arg("-a")
        .arg(format!("{}/.", host.display()))
        .arg(copy.path())
        .status()
        .unwrap();
    assert!(cp.success());
    let file = copy.path().join("changes.patch");
    fs::write(&file, patch).unwrap();
    let out = Command::new("git")
        .args(["apply", "--whitespace=nowarn", "changes.patch"])
        .current_dir(copy.path())
        .output()
        .expect("git runs");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    fs::remove_file(&file).unwrap();
    copy
}

// Threat: T-HOST-MOUNT (docs/security.md)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_preview_shows_its_changes_and_lands_only_when_committed() {
    let host = project();
    let mcp = Mcp::new(mounted(host.path()));
    let c = client(&serve(&mcp).await, "dana").await;
    let sid = session(&c).await;
    assert_eq!(sh(&c, &sid, "ls -A repo").await, "main.py\nnotes.txt\n");

    let run = ok(&call(
        &c,
        "sandbox_run",
        json!({
            "session_id": sid,
            "preview": true,
            "command": "cd repo && sed -i s/hello/bye/ main.py && echo new > added.txt && rm notes.txt && python3 main.py",
        }),
    )
    .await);
    assert_eq!(run["exit_code"], 0, "{run}");
    assert_eq!(run["stdout"], "bye\n");
    let preview = &run["preview"];
    let pid = preview["preview_id"].as_str().unwrap().to_string();
    assert_eq!(preview["parent_session_id"], sid.as_str());
    assert_eq!(run["session_id"], pid.as_str());
    assert_eq!(
        paths(&preview["changes"]),
        ["added added.txt", "modified main.py", "deleted notes.txt"]
    );
    assert_eq!(preview["changes"]["root"], "/home/user/repo");
    // The session has not moved, and it has nothing to show against its folder.
    assert_eq!(sh(&c, &sid, "cat repo/main.py").await, "print('hello')\n");
    let diff = ok(&call(&c, "sandbox_diff", json!({"session_id": sid})).await);
    assert_eq!(diff["since"], "mount");
    assert!(diff["files"].as_array().unwrap().is_empty(), "{diff}");
    // The preview can be looked into before it is chosen; its diff defaults to its parent.
    let pdiff = ok(&call(&c, "sandbox_diff", json!({"session_id": pid})).await);
    assert_eq!(pdiff["since"], "parent");
    assert_eq!(pdiff["patch"], preview["changes"]["patch"]);

    let committed = ok(&call(&c, "sandbox_commit", json!({"preview_id": pid})).await);
    assert_eq!(committed["session_id"], sid.as_str());
    assert_eq!(
        committed["applied"].as_array().unwrap().len(),
        3,
        "{committed}"
    );
    assert_eq!(sh(&c, &sid, "cat repo/main.py").await, "print('bye')\n");
    // Committed previews are gone.
    let again = err_text(&call(&c, "sandbox_commit", json!({"preview_id": pid})).await);
    assert!(again.contains("unknown session_id"), "{again}");

    // What the session changed in the folder, as a patch the real git applies.
    let diff = ok(&call(&c, "sandbox_diff", json!({"session_id": sid})).await);
    assert_eq!(
        paths(&diff),
        ["added added.txt", "modified main.py", "deleted notes.txt"]
    );
    let copy = applied_copy(host.path(), diff["patch"].as_str().unwrap());
    assert_eq!(
        fs::read_to_string(copy.path().join("main.py")).unwrap(),
        "print('bye')\n"
    );
    assert_eq!(
        fs::read_to_string(copy.path().join("added.txt")).unwrap(),
        "new\n"
    );
    assert!(!copy.path().join("notes.txt").exists());
    // The host folder itself is never written.
    assert_eq!(
        fs::read_to_string(host.path().join("main.py")).unwrap(),
        "print('hello')\n"
    );
    assert!(host.path().join("notes.txt").exists());
    assert!(!host.path().join("added.txt").exists());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_conflicting_commit_applies_nothing_and_the_preview_can_be_discarded() {
    let mcp = Mcp::new(McpConfig::default());
    let c = client(&serve(&mcp).await, "erin").await;
    let sid = session(&c).await;
    sh(&c, &sid, "echo base > a.txt").await;
    let run = ok(&call(
        &c,
        "sandbox_run",
        json!({"session_id": sid, "preview": true, "command": "echo theirs > a.txt; echo more > b.txt"}),
    )
    .await);
    let pid = run["preview"]["preview_id"].as_str().unwrap().to_string();
    sh(&c, &sid, "echo ours > a.txt").await;

    let conflict = err_text(&call(&c, "sandbox_commit", json!({"preview_id": pid})).await);
    assert!(
        conflict.contains("conflict")
            && conflict.contains("a.txt")
            && conflict.contains("nothing was committed"),
        "{conflict}"
    );
    assert_eq!(sh(&c, &sid, "cat a.txt; ls").await, "ours\na.txt\n");

    // A typo discards nothing; a session that is not a preview is refused.
    let typo = err_text(&call(&c, "sandbox_discard", json!({"preview_ids": [pid, "nope"]})).await);
    assert!(typo.contains("unknown preview_id \"nope\""), "{typo}");
    let not_preview = err_text(&call(&c, "sandbox_discard", json!({"preview_ids": [sid]})).await);
    assert!(not_preview.contains("not a preview"), "{not_preview}");
    let not_fork = err_text(&call(&c, "sandbox_commit", json!({"preview_id": sid})).await);
    assert!(not_fork.contains("not forked"), "{not_fork}");

    let gone = ok(&call(&c, "sandbox_discard", json!({"preview_ids": [pid]})).await);
    assert_eq!(gone["discarded"], json!([pid]));
    let list = ok(&call(&c, "session_list", json!({})).await);
    assert_eq!(list["sessions"].as_array().unwrap().len(), 1, "{list}");

    // A preview needs a session to commit into; the diff of a session that is neither
    // forked nor mounted says what it can compare with.
    let no_session = err_text(
        &call(
            &c,
            "sandbox_run",
            json!({"command": "true", "preview": true}),
        )
        .await,
    );
    assert!(
        no_session.contains("preview needs session_id"),
        "{no_session}"
    );
    let no_mount = err_text(&call(&c, "sandbox_diff", json!({"session_id": sid})).await);
    assert!(no_mount.contains("no host folder is mounted"), "{no_mount}");
    let snap = ok(&call(&c, "snapshot_create", json!({"session_id": sid})).await);
    sh(&c, &sid, "rm a.txt").await;
    let since_snap = ok(&call(
        &c,
        "sandbox_diff",
        json!({"session_id": sid, "snapshot_id": snap["snapshot_id"]}),
    )
    .await);
    assert_eq!(since_snap["since"], "snapshot");
    assert_eq!(paths(&since_snap), ["deleted a.txt"]);
    let bad = err_text(
        &call(
            &c,
            "sandbox_diff",
            json!({"session_id": sid, "since": "snapshot"}),
        )
        .await,
    );
    assert!(bad.contains("needs snapshot_id"), "{bad}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn best_of_runs_every_attempt_in_its_own_preview_and_one_is_committed() {
    let host = project();
    let mcp = Mcp::new(McpConfig {
        max_best_of: 4,
        ..mounted(host.path())
    });
    let c = client(&serve(&mcp).await, "fay").await;
    let sid = session(&c).await;
    let attempt = |word: &str| {
        json!({"command": "cd repo && sed -i \"s/hello/$WORD/\" main.py && python3 main.py && test \"$WORD\" != bad",
               "env": {"WORD": word}})
    };
    let out = ok(&call(
        &c,
        "sandbox_best_of",
        json!({"session_id": sid, "attempts": [attempt("hi"), attempt("bad"), attempt("hey")], "concurrency": 2}),
    )
    .await);
    let attempts = out["attempts"].as_array().unwrap();
    assert_eq!(attempts.len(), 3);
    let codes: Vec<i64> = attempts
        .iter()
        .map(|a| a["exit_code"].as_i64().unwrap())
        .collect();
    assert_eq!(codes, [0, 1, 0]);
    for (a, word) in attempts.iter().zip(["hi", "bad", "hey"]) {
        assert_eq!(a["stdout"], format!("{word}\n"));
        assert_eq!(paths(&a["changes"]), ["modified main.py"]);
        assert!(
            a["changes"]["patch"]
                .as_str()
                .unwrap()
                .contains(&format!("+print('{word}')")),
            "{a}"
        );
    }
    assert_eq!(sh(&c, &sid, "cat repo/main.py").await, "print('hello')\n");

    let winner = attempts[2]["preview_id"].as_str().unwrap();
    ok(&call(&c, "sandbox_commit", json!({"preview_id": winner})).await);
    let rest: Vec<&str> = attempts[..2]
        .iter()
        .map(|a| a["preview_id"].as_str().unwrap())
        .collect();
    ok(&call(&c, "sandbox_discard", json!({"preview_ids": rest})).await);
    assert_eq!(sh(&c, &sid, "python3 repo/main.py").await, "hey\n");
    let list = ok(&call(&c, "session_list", json!({})).await);
    assert_eq!(list["sessions"].as_array().unwrap().len(), 1, "{list}");

    let too_many = err_text(
        &call(
            &c,
            "sandbox_best_of",
            json!({"session_id": sid, "attempts": vec![attempt("x"); 5]}),
        )
        .await,
    );
    assert!(too_many.contains("1 to 4 attempts, not 5"), "{too_many}");
}

/// More attempts than the client may hold sessions: nothing is left behind.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn best_of_past_the_session_cap_keeps_no_preview() {
    let mcp = Mcp::new(McpConfig {
        max_sessions_per_client: 3,
        ..McpConfig::default()
    });
    let c = client(&serve(&mcp).await, "gus").await;
    let sid = session(&c).await;
    let e = err_text(
        &call(
            &c,
            "sandbox_best_of",
            json!({"session_id": sid, "attempts": [{"command": "true"}, {"command": "true"}, {"command": "true"}]}),
        )
        .await,
    );
    assert!(e.contains("a preview, a session, per attempt"), "{e}");
    let list = ok(&call(&c, "session_list", json!({})).await);
    assert_eq!(list["sessions"].as_array().unwrap().len(), 1, "{list}");
}
