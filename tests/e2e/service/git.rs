//! Server-side git inputs (`git: {url, ref, depth, patch, dir}` of runs and sessions) against a
//! real smart-HTTP git server on loopback: the host's `git http-backend` behind a small CGI
//! bridge. A name is resolved through `SANDBOX_EGRESS_RESOLVE` (the test's resolver), so the
//! policy's host rules, its address rules and its refusal of loopback are all exercised.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::Stdio;

use axum::body::Body;
use axum::extract::{Request, State};
use axum::http::{HeaderMap, StatusCode as AxumStatus};
use axum::response::Response;
use reqwest::StatusCode;
use serde_json::{Value, json};
use tokio::io::AsyncWriteExt;
use wasmsand::egress::{EgressAllowlist, EgressPolicy};

use super::common::{TestServer, output};

/// A bare repository served over smart HTTP, and the commits of its history.
pub(crate) struct GitHost {
    pub(crate) addr: SocketAddr,
    dir: tempfile::TempDir,
    /// `main` (the second commit) and the tag `v1` (the first).
    pub(crate) head: String,
    v1: String,
}

fn sh(dir: &Path, args: &[&str]) -> String {
    let out = std::process::Command::new("git")
        .current_dir(dir)
        .args(args)
        .env("GIT_CONFIG_NOSYSTEM", "1")
        .env("GIT_CONFIG_GLOBAL", "/dev/null")
        .env("GIT_AUTHOR_DATE", "2026-01-02T03:04:05Z")
        .env("GIT_COMMITTER_DATE", "2026-01-02T03:04:05Z")
        .output()
        .expect("git runs (scripts/host-tools.txt)");
    assert!(out.status.success(), "git {args:?}: {out:?}");
    String::from_utf8(out.stdout).unwrap().trim().to_string()
}

async fn cgi(State(root): State<PathBuf>, req: Request) -> Response {
    let (parts, body) = req.into_parts();
    let body = axum::body::to_bytes(body, 64 << 20).await.unwrap();
    let header = |h: &HeaderMap, n: &str| {
        h.get(n)
            .and_then(|v| v.to_str().ok())
            .unwrap_or("")
            .to_string()
    };
    let mut child = tokio::process::Command::new("git")
        .arg("http-backend")
        .env_clear()
        .env("PATH", "/usr/bin:/bin")
        .env("GIT_PROJECT_ROOT", &root)
        .env("GIT_HTTP_EXPORT_ALL", "1")
        .env("REQUEST_METHOD", parts.method.as_str())
        .env("PATH_INFO", parts.uri.path())
        .env("QUERY_STRING", parts.uri.query().unwrap_or(""))
        .env("CONTENT_TYPE", header(&parts.headers, "content-type"))
        .env("CONTENT_LENGTH", body.len().to_string())
        .env(
            "HTTP_CONTENT_ENCODING",
            header(&parts.headers, "content-encoding"),
        )
        .env("HTTP_GIT_PROTOCOL", header(&parts.headers, "git-protocol"))
        .env("REMOTE_ADDR", "127.0.0.1")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    let feed = async move {
        let _ = stdin.write_all(&body).await;
    };
    let (_, out) = tokio::join!(feed, child.wait_with_output());
    let out = out.unwrap().stdout;
    let split = out
        .windows(4)
        .position(|w| w == b"\r\n\r\n")
        .map(|p| (p, 4))
        .or_else(|| out.windows(2).position(|w| w == b"\n\n").map(|p| (p, 2)))
        .expect("CGI headers");
    let mut resp = Response::builder();
    for line in String::from_utf8_lossy(&out[..split.0]).lines() {
        let Some((k, v)) = line.split_once(':') else {
            continue;
        };
        if k.eq_ignore_ascii_case("status") {
            let code: u16 = v.trim()[..3].parse().unwrap();
            resp = resp.status(AxumStatus::from_u16(code).unwrap());
        } else {
            resp = resp.header(k.trim(), v.trim());
        }
    }
    resp.body(Body::from(out[split.0 + split.1..].to_vec()))
        .unwrap()
}

impl GitHost {
    pub(crate) async fn start() -> GitHost {
        let dir = tempfile::tempdir().unwrap();
        let src = dir.path().join("src");
        std::fs::create_dir(&src).unwrap();
        sh(&src, &["init", "-q", "-b", "main"]);
        sh(&src, &["config", "user.name", "T"]);
        sh(&src, &["config", "user.email", "t@example.com"]);
        std::fs::create_dir(src.join("src")).unwrap();
        std::fs::write(src.join("README.md"), "hello\nworld\n").unwrap();
        std::fs::write(src.join("src/app.py"), "print('v1')\n").unwrap();
        sh(&src, &["add", "."]);
        sh(&src, &["commit", "-q", "-m", "first"]);
        sh(&src, &["tag", "v1"]);
        std::fs::write(src.join("src/app.py"), "print('v2')\n").unwrap();
        std::os::unix::fs::symlink("README.md", src.join("latest")).unwrap();
        sh(&src, &["add", "."]);
        sh(&src, &["commit", "-q", "-m", "second"]);
        // A branch beside main and an annotated tag, for clients that fetch more than HEAD.
        sh(&src, &["checkout", "-q", "-b", "feature"]);
        std::fs::write(src.join("feature.txt"), "on feature\n").unwrap();
        sh(&src, &["add", "."]);
        sh(&src, &["commit", "-q", "-m", "feature work"]);
        sh(&src, &["checkout", "-q", "main"]);
        sh(&src, &["tag", "-a", "release", "-m", "the release"]);
        let head = sh(&src, &["rev-parse", "HEAD"]);
        let v1 = sh(&src, &["rev-parse", "v1^{commit}"]);
        let root = dir.path().join("served");
        std::fs::create_dir(&root).unwrap();
        sh(
            dir.path(),
            &["clone", "-q", "--bare", "src", "served/repo.git"],
        );
        let app = axum::Router::new().fallback(cgi).with_state(root);
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        tokio::spawn(async move { axum::serve(listener, app).await });
        GitHost {
            addr,
            dir,
            head,
            v1,
        }
    }

    /// Commits `content` to `file` on main upstream (and packs the served repository, as a
    /// hosting service keeps it); the new commit's id.
    pub(crate) fn advance(&self, file: &str, content: &str, message: &str) -> String {
        let src = self.dir.path().join("src");
        std::fs::write(src.join(file), content).unwrap();
        sh(&src, &["add", "."]);
        sh(&src, &["commit", "-q", "-m", message]);
        sh(&src, &["push", "-q", "../served/repo.git", "main"]);
        sh(
            &self.dir.path().join("served/repo.git"),
            &["repack", "-adq"],
        );
        sh(&src, &["rev-parse", "HEAD"])
    }

    /// Runs the host's git on a copy of a repository the sandbox made (a tar of it).
    pub(crate) fn host_git_on(&self, tar: &[u8], args: &[&str]) -> String {
        let out = self.dir.path().join("from-sandbox");
        let _ = std::fs::remove_dir_all(&out);
        std::fs::create_dir(&out).unwrap();
        tar::Archive::new(tar).unpack(&out).unwrap();
        sh(&out.join("repo"), args)
    }
}

fn allow(hosts: &[&str], ips: &[&str]) -> EgressPolicy {
    EgressPolicy::parse(&EgressAllowlist {
        hosts: hosts.iter().map(|s| s.to_string()).collect(),
        ips: ips.iter().map(|s| s.to_string()).collect(),
        cidrs: Vec::new(),
    })
    .unwrap()
}

fn run_with_git(script: &str, git: Value) -> Value {
    let mut body = TestServer::script(script);
    body["git"] = git;
    body
}

pub(crate) const PATCH: &str =
    "--- a/README.md\n+++ b/README.md\n@@ -1,2 +1,2 @@\n hello\n-world\n+patched\n";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_run_fetches_a_repository_applies_a_patch_and_sees_its_history() {
    let host = GitHost::start().await;
    let srv = TestServer::with(|c| {
        c.egress_allowlist = allow(&["git.test"], &["127.0.0.1"]);
        c.egress_resolve
            .insert("git.test".into(), vec!["127.0.0.1".parse().unwrap()]);
    })
    .await;
    let url = format!("http://git.test:{}/repo.git", host.addr.port());

    let (_, frames, status) = srv
        .run(run_with_git(
            "cat README.md src/app.py latest; echo; git log --oneline | cut -d' ' -f2-",
            json!({ "url": url, "patch": PATCH }),
        ))
        .await;
    assert_eq!(
        status["phase"],
        "completed",
        "{status} {}",
        String::from_utf8_lossy(&output(&frames, "stderr"))
    );
    assert_eq!(
        String::from_utf8_lossy(&output(&frames, "stdout")),
        "hello\npatched\nprint('v2')\nREADME.md\nsecond\n"
    );
    let git = frames
        .iter()
        .find(|f| f["event"] == "git")
        .expect("a git frame");
    assert_eq!(git["data"]["commit"], host.head.as_str(), "{git}");
    assert_eq!(git["data"]["patched"], true);

    // A tag, the whole history, into a directory.
    let (_, frames, status) = srv
        .run(run_with_git(
            "cat code/src/app.py; cd code && git log --oneline | wc -l",
            json!({ "url": url, "ref": "v1", "depth": 0, "dir": "code" }),
        ))
        .await;
    assert_eq!(status["phase"], "completed", "{status}");
    assert_eq!(
        String::from_utf8_lossy(&output(&frames, "stdout")),
        "print('v1')\n1\n"
    );
    let git = frames.iter().find(|f| f["event"] == "git").unwrap();
    assert_eq!(git["data"]["commit"], host.v1.as_str());

    // A session starts with the tree.
    let sid = srv.session(json!({ "git": { "url": url } })).await;
    let body = json!({ "spec_version": "1.0", "session_id": sid,
        "command": ["bash", "-c", "cat src/app.py"] });
    let (_, frames, status) = srv.run(body).await;
    assert_eq!(status["phase"], "completed", "{status}");
    assert_eq!(output(&frames, "stdout"), b"print('v2')\n");

    // What cannot be fetched or applied is refused before anything runs.
    let bad_patch = PATCH.replace(" hello\n", " goodbye\n");
    for (git, status, want) in [
        (
            json!({ "url": url, "patch": bad_patch }),
            StatusCode::BAD_REQUEST,
            "the hunk at README.md:1 does not match",
        ),
        (
            json!({ "url": url, "ref": "no-such-branch" }),
            StatusCode::BAD_REQUEST,
            "git.ref not found",
        ),
        (
            json!({ "url": format!("http://user:pw@git.test:{}/repo.git", host.addr.port()) }),
            StatusCode::BAD_REQUEST,
            "must not carry credentials",
        ),
        (
            json!({ "url": "file:///etc/repo.git" }),
            StatusCode::BAD_REQUEST,
            "only https:// and http://",
        ),
        (
            json!({ "url": url, "ref": "--upload-pack=touch /tmp/x" }),
            StatusCode::BAD_REQUEST,
            "is not a branch, tag or commit id",
        ),
        (
            json!({ "url": url, "dir": "../out" }),
            StatusCode::BAD_REQUEST,
            "",
        ),
    ] {
        let (s, _, v) = srv.post("/runs", run_with_git("true", git.clone())).await;
        assert_eq!(s, status, "{git}: {v}");
        let message = v["error"]["message"].as_str().unwrap();
        assert!(message.contains(want), "{git}: {message}");
    }
    let (_, _, v) = srv
        .post(
            "/runs",
            run_with_git("true", json!({ "url": url, "patch": bad_patch })),
        )
        .await;
    assert_eq!(v["error"]["details"]["file"], "README.md", "{v}");
    assert_eq!(v["error"]["details"]["line"], 1, "{v}");

    // Each clone that went is in the audit trail with the PRD's fields: two runs, a session.
    let allowed = audit(&srv, "sandbox.run.egress_allowed", 3).await;
    for e in &allowed {
        assert_eq!(e["host"], "git.test", "{e}");
        assert_eq!(e["ip"], "127.0.0.1", "{e}");
        assert_eq!(e["matched_rule"], "127.0.0.1", "{e}");
        assert_eq!(e["runtime"], "wasm", "{e}");
        assert_eq!(e["via"], "git", "{e}");
    }
    assert_eq!(
        allowed.iter().filter(|e| e["run_id"].is_string()).count(),
        2,
        "{allowed:?}"
    );
    srv.stop().await;
}

/// The audit events named `event` once there are `n` of them.
async fn audit(srv: &TestServer, event: &str, n: usize) -> Vec<Value> {
    let started = std::time::Instant::now();
    loop {
        let (s, v) = srv
            .get(&format!("/admin/audit?event={event}&limit=100"))
            .await;
        assert_eq!(s, StatusCode::OK, "{v}");
        let items = v["items"].as_array().unwrap().clone();
        if items.len() >= n {
            return items;
        }
        assert!(
            started.elapsed() < std::time::Duration::from_secs(60),
            "{} of {n} {event} events: {v}",
            items.len()
        );
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
}

/// The server's policy decides where a clone may go: a host rule does not open loopback, an
/// address no rule names is refused, and a remote that never answers ends at the timeout.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn clones_outside_the_servers_egress_policy_are_refused() {
    let host = GitHost::start().await;
    let silent = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let silent_port = silent.local_addr().unwrap().port();
    let srv = TestServer::with(|c| {
        c.egress_allowlist = allow(&["git.test", "slow.test"], &[]);
        c.egress_resolve
            .insert("git.test".into(), vec!["127.0.0.1".parse().unwrap()]);
        c.git_timeout_sec = 1;
    })
    .await;
    let port = host.addr.port();
    for (url, reason) in [
        (
            format!("http://git.test:{port}/repo.git"),
            "forbidden_address",
        ),
        (
            format!("http://127.0.0.1:{port}/repo.git"),
            "forbidden_address",
        ),
    ] {
        let (s, _, v) = srv
            .post("/runs", run_with_git("true", json!({ "url": url })))
            .await;
        assert_eq!(s, StatusCode::FORBIDDEN, "{v}");
        assert_eq!(v["error"]["details"]["reason"], reason, "{v}");
        assert!(
            v["error"]["message"]
                .as_str()
                .unwrap()
                .contains("is a loopback address"),
            "{v}"
        );
    }
    let denied = audit(&srv, "sandbox.run.egress_denied", 2).await;
    assert_eq!(denied[0]["reason"], "forbidden_address", "{denied:?}");
    assert_eq!(denied[0]["ip"], "127.0.0.1", "{denied:?}");
    assert_eq!(denied[0]["run_id"], Value::Null, "{denied:?}");
    srv.stop().await;

    // Loopback named by an address rule: the clone goes; a name the policy does not list, no.
    let srv = TestServer::with(|c| {
        c.egress_allowlist = allow(&["slow.test"], &["127.0.0.1"]);
        c.egress_resolve
            .insert("git.test".into(), vec!["127.0.0.1".parse().unwrap()]);
        c.egress_resolve
            .insert("slow.test".into(), vec!["127.0.0.1".parse().unwrap()]);
        c.git_timeout_sec = 1;
    })
    .await;
    let (s, _, v) = srv
        .post(
            "/runs",
            run_with_git(
                "true",
                json!({ "url": format!("http://git.test:{port}/repo.git") }),
            ),
        )
        .await;
    // The address is allowed by its own rule, whatever the name.
    assert!(s.is_success(), "{s} {v}");
    let (s, _, v) = srv
        .post(
            "/runs",
            run_with_git(
                "true",
                json!({ "url": format!("http://198.51.100.1:{port}/repo.git") }),
            ),
        )
        .await;
    assert_eq!(s, StatusCode::FORBIDDEN, "{v}");
    assert_eq!(v["error"]["details"]["reason"], "no_match", "{v}");
    assert_eq!(v["error"]["details"]["reason_code"], "policy_denied", "{v}");
    // A remote that accepts and never answers.
    let (s, _, v) = srv
        .post(
            "/runs",
            run_with_git(
                "true",
                json!({ "url": format!("http://slow.test:{silent_port}/repo.git") }),
            ),
        )
        .await;
    assert_eq!(s, StatusCode::GATEWAY_TIMEOUT, "{v}");
    assert_eq!(v["error"]["code"], "git_clone_failed", "{v}");
    drop(silent);
    srv.stop().await;
}

/// `git clone`, `fetch`, `pull` and `ls-remote` inside the sandbox, over smart HTTP through the
/// network door: under the session's allowlist only, with the server's own pack (deltas,
/// an annotated tag, a symlink) indexed in the guest into a repository real git accepts.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn git_in_the_sandbox_clones_fetches_and_pulls_under_the_policy() {
    let host = GitHost::start().await;
    let srv = TestServer::with(|c| {
        c.egress_allowlist = allow(&["git.test"], &["127.0.0.1"]);
        c.egress_resolve
            .insert("git.test".into(), vec!["127.0.0.1".parse().unwrap()]);
    })
    .await;
    let port = host.addr.port();
    let url = format!("http://git.test:{port}/repo.git");
    let sid = srv
        .session(json!({ "network_policy": "allowlist",
            "egress_allowlist": { "hosts": ["git.test"], "ips": ["127.0.0.1"] } }))
        .await;
    let run = |script: String| {
        let srv = &srv;
        let sid = sid.clone();
        async move {
            // Each run starts in /tmp: a session keeps the last run's directory.
            let body = json!({ "spec_version": "1.0", "session_id": sid,
                "command": ["bash", "-c", format!("cd /tmp && {script}")] });
            let (_, frames, status) = srv.run(body).await;
            assert_eq!(
                status["phase"],
                "completed",
                "{script}: {status} {}",
                String::from_utf8_lossy(&output(&frames, "stderr"))
            );
            (
                String::from_utf8_lossy(&output(&frames, "stdout")).into_owned(),
                String::from_utf8_lossy(&output(&frames, "stderr")).into_owned(),
            )
        }
    };

    let (out, err) = run(format!(
        "git clone {url} && cd repo && git log --oneline | cut -d' ' -f2- && cat src/app.py \
         && readlink latest && git status && git branch -a && git tag && git rev-parse HEAD"
    ))
    .await;
    assert_eq!(
        out,
        format!(
            "second\nfirst\nprint('v2')\nREADME.md\nOn branch main\nYour branch is up to date \
             with 'origin/main'.\n\nnothing to commit, working tree clean\n* main\n  \
             remotes/origin/HEAD -> origin/main\n  remotes/origin/feature\n  \
             remotes/origin/main\nrelease\nv1\n{}\n",
            host.head
        ),
        "{err}"
    );
    assert_eq!(err, "Cloning into 'repo'...\n");

    // Upstream moves on: fetch reports it as git does, status counts it, pull fast-forwards.
    let next = host.advance("src/app.py", "print('v3')\n", "third");
    let (out, err) = run(
        "cd repo && git fetch && git status | sed -n 2p && git pull && cat src/app.py \
         && git rev-parse HEAD && git checkout -q feature && cat feature.txt && git status | \
         sed -n 2p"
            .into(),
    )
    .await;
    assert_eq!(
        out,
        format!(
            "Your branch is behind 'origin/main' by 1 commit, and can be fast-forwarded.\n\
             Updating {}..{}\nFast-forward\n src/app.py | 2 +-\n 1 file changed, 1 insertion(+), \
             1 deletion(-)\nprint('v3')\n{next}\non feature\nYour branch is up to date with \
             'origin/feature'.\n",
            &host.head[..7],
            &next[..7]
        ),
        "{err}"
    );
    assert!(
        err.starts_with(&format!(
            "From {url}\n   {}..{}  main       -> origin/main\n",
            &host.head[..7],
            &next[..7]
        )),
        "{err}"
    );

    // What the sandbox made is a repository the host's git checks and reads as it is.
    let body = json!({ "spec_version": "1.0", "session_id": sid,
        "command": ["bash", "-c", "cd /tmp && tar cf - repo"] });
    let (_, frames, _) = srv.run(body).await;
    let tar = output(&frames, "stdout");
    host.host_git_on(&tar, &["fsck", "--strict", "--no-dangling"]);
    assert_eq!(
        host.host_git_on(&tar, &["log", "--format=%s", "origin/main"]),
        "third\nsecond\nfirst"
    );

    // A shallow clone of one branch, deepened later; ls-remote.
    let (out, err) = run(format!(
        "git clone -q --depth 1 -b main {url} shallow && cd shallow && git log --oneline | wc -l \
         && git fetch -q --unshallow && git log --oneline | wc -l && git ls-remote --heads \
         origin | cut -f2"
    ))
    .await;
    assert_eq!(out, "1\n3\nrefs/heads/feature\nrefs/heads/main\n", "{err}");

    // Refusals name what to do: a host outside the allowlist, a repository that is not
    // there, ssh; a refused clone leaves no directory behind.
    let (out, err) = run(format!(
        "git clone http://nowhere.test:{port}/repo.git o1; echo $?; git clone \
         http://git.test:{port}/none.git o2; echo $?; git clone git@example.org:x/y.git; echo \
         $?; ls -d o1 o2 2>/dev/null | wc -l; cd repo && git push; echo $?"
    ))
    .await;
    assert_eq!(out, "128\n128\n128\n0\n128\n", "{err}");
    for want in [
        "fatal: unable to access 'http://nowhere.test:",
        "blocked by sandbox network policy: host nowhere.test not in allowlist",
        "fatal: repository 'http://git.test:",
        "is not an HTTP(S) URL",
        "does not push",
    ] {
        assert!(err.contains(want), "{want}: {err}");
    }
    let denied = audit(&srv, "sandbox.run.egress_denied", 1).await;
    assert!(
        denied
            .iter()
            .any(|e| e["host"] == "nowhere.test" && e["reason"] == "no_match"),
        "{denied:?}"
    );
    // Without a policy there is no network at all.
    let plain = srv.session(json!({})).await;
    let body = json!({ "spec_version": "1.0", "session_id": plain,
        "command": ["bash", "-c", format!("git clone {url}")] });
    let (_, frames, _) = srv.run(body).await;
    assert!(
        String::from_utf8_lossy(&output(&frames, "stderr"))
            .contains("network access is off in this sandbox"),
        "{frames:?}"
    );
    srv.stop().await;
}
