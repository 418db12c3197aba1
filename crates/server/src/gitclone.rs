//! Server-side git clone + patch (seed 003 sections 3, 6, 13): a session or run may name
//! `git: {url, ref, depth, patch, dir}`; the service fetches that commit with the host's `git`
//! under the server's egress policy, applies the patch, and writes the tree into the
//! workspace before anything runs, under the upload caps. The sandbox itself never gets a
//! network.
//!
//! How the host's `git` is held to the policy: only `http`/`https` URLs without credentials;
//! the host is resolved here (or by `SANDBOX_EGRESS_RESOLVE`), each address checked
//! against `SANDBOX_EGRESS_ALLOWLIST`, and the one allowed pinned with `http.curloptResolve`,
//! so git cannot resolve it elsewhere; redirects are off (a redirect could leave the
//! allowlist); no configuration, credentials, hooks or submodules from anywhere; a wall-clock
//! limit and a cap on what lands on disk.

use std::net::IpAddr;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;

use axum::http::StatusCode;
use serde::Deserialize;
use serde_json::json;
use tokio::process::Command;
use utoipa::ToSchema;
use wasmsand::egress::{DenyReason, EgressPolicy};

use crate::App;
use crate::error::{ApiError, ApiResult, ErrorCode};
use crate::upload::{self, Caps, Staged};

/// Longest patch accepted (it travels in the JSON body, itself capped at 2 MiB).
const MAX_PATCH_BYTES: usize = 1024 * 1024;
/// Deepest history asked for.
const MAX_DEPTH: u32 = 10_000;

/// The `git` field of a session or run request.
#[derive(Debug, Clone, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct GitRequest {
    /// `https://` (or `http://`) URL of the repository; no credentials in it.
    pub url: String,
    /// Branch, tag or commit id to check out (default: the remote's HEAD).
    #[serde(default, rename = "ref")]
    pub git_ref: Option<String>,
    /// Commits of history to fetch (default 1; 0 is the whole history).
    #[serde(default)]
    pub depth: Option<u32>,
    /// A unified diff (as `git diff` or `diff -u` writes it) applied after the checkout.
    #[serde(default)]
    pub patch: Option<String>,
    /// Where in the workspace the tree goes (default: the workspace itself).
    #[serde(default)]
    pub dir: Option<String>,
}

/// A checked-out (and patched) tree, ready to be written into a workspace.
pub(crate) struct Checkout {
    pub staged: Staged,
    /// The commit checked out (before the patch).
    pub commit: String,
    /// The host the clone went to, its address, and the rule that allowed it.
    pub host: String,
    pub ip: IpAddr,
    pub matched_rule: String,
}

impl Checkout {
    /// What the run's log and the audit trail say about it.
    pub(crate) fn summary(&self, g: &GitRequest) -> serde_json::Value {
        json!({
            "url": g.url,
            "ref": g.git_ref,
            "commit": self.commit,
            "patched": g.patch.is_some(),
            "files": self.staged.files.len(),
            "bytes": self.staged.bytes,
            "egress": {
                "host": self.host, "ip": self.ip.to_string(), "matched_rule": self.matched_rule,
                "via": "git",
            },
        })
    }
}

fn invalid(message: impl Into<String>, reason: &str) -> ApiError {
    ApiError::invalid(message).with_details(json!({ "field": "git", "reason": reason }))
}

fn failed(status: StatusCode, reason: &str, message: impl Into<String>) -> ApiError {
    ApiError::new(status, ErrorCode::GitCloneFailed, message)
        .with_details(json!({ "reason": reason }))
}

/// Where a clone goes: scheme, host (a name or an address), port.
#[derive(Debug, PartialEq)]
struct Remote {
    host: String,
    port: u16,
    /// The host is an address literal (no name to resolve or pin).
    literal: Option<IpAddr>,
}

fn check_url(raw: &str) -> ApiResult<Remote> {
    let url = url::Url::parse(raw)
        .map_err(|e| invalid(format!("git.url '{raw}' is not a URL: {e}"), "bad_url"))?;
    if !matches!(url.scheme(), "https" | "http") {
        return Err(invalid(
            format!(
                "git.url: only https:// and http:// repositories can be cloned, not {}://",
                url.scheme()
            ),
            "bad_url",
        ));
    }
    if !url.username().is_empty() || url.password().is_some() {
        return Err(invalid(
            "git.url must not carry credentials (they would be kept in the service's records)",
            "credentials",
        ));
    }
    let port = url.port_or_known_default().unwrap_or(443);
    match url.host() {
        Some(url::Host::Domain(d)) => Ok(Remote {
            host: d.to_ascii_lowercase(),
            port,
            literal: None,
        }),
        Some(url::Host::Ipv4(a)) => Ok(Remote {
            host: a.to_string(),
            port,
            literal: Some(IpAddr::V4(a)),
        }),
        Some(url::Host::Ipv6(a)) => Ok(Remote {
            host: format!("[{a}]"),
            port,
            literal: Some(IpAddr::V6(a)),
        }),
        None => Err(invalid(format!("git.url '{raw}' names no host"), "bad_url")),
    }
}

/// A branch, tag or commit id: what `git fetch` takes as a refspec source, nothing it could
/// read as an option or a refspec with a destination.
fn check_ref(r: &str) -> ApiResult<()> {
    let ok = !r.is_empty()
        && r.len() <= 255
        && !r.starts_with('-')
        && !r.starts_with('+')
        && !r.contains("..")
        && !r.ends_with('/')
        && !r.ends_with(".lock")
        && r.bytes().all(|b| {
            b.is_ascii_graphic() && !matches!(b, b':' | b'~' | b'^' | b'?' | b'*' | b'[' | b'\\')
        });
    if ok {
        Ok(())
    } else {
        Err(invalid(
            format!("git.ref '{r}' is not a branch, tag or commit id"),
            "bad_ref",
        ))
    }
}

/// Checks a `git` request without touching the network (so a bad one is a 400 before
/// anything else happens).
pub(crate) fn check(app: &App, g: &GitRequest) -> ApiResult<()> {
    check_url(&g.url)?;
    if let Some(r) = &g.git_ref {
        check_ref(r)?;
    }
    if g.depth.is_some_and(|d| d > MAX_DEPTH) {
        return Err(invalid(
            format!("git.depth is at most {MAX_DEPTH} (0 fetches the whole history)"),
            "bad_depth",
        ));
    }
    if g.patch.as_ref().is_some_and(|p| p.len() > MAX_PATCH_BYTES) {
        return Err(ApiError::too_large("git.patch", MAX_PATCH_BYTES as u64));
    }
    if let Some(d) = &g.dir {
        upload::check_path(d, app.config.max_upload_depth)?;
    }
    Ok(())
}

/// The address to clone from: the host's addresses (resolved once, here), the first the
/// policy allows; a refusal names the host, the addresses and why.
async fn pin(app: &App, policy: &EgressPolicy, remote: &Remote) -> ApiResult<(IpAddr, String)> {
    let (host, addrs) = match remote.literal {
        Some(ip) => (None, vec![ip]),
        None => {
            let addrs = match app.config.egress_resolve.get(&remote.host) {
                Some(fixed) => fixed.clone(),
                None => tokio::net::lookup_host((remote.host.as_str(), remote.port))
                    .await
                    .map_err(|e| {
                        failed(
                            StatusCode::BAD_GATEWAY,
                            "unresolved",
                            format!("cannot resolve git host {}: {e}", remote.host),
                        )
                    })?
                    .map(|a| a.ip())
                    .collect(),
            };
            (Some(remote.host.as_str()), addrs)
        }
    };
    let mut refusals = Vec::new();
    for ip in addrs {
        let d = policy.check_addr(host, ip);
        if d.allowed() {
            return Ok((ip, d.matched_rule.unwrap_or_default()));
        }
        refusals.push((ip, d));
    }
    let first = refusals.into_iter().next();
    let ip = first.as_ref().map(|(ip, _)| ip.to_string());
    let matched_rule = first.as_ref().and_then(|(_, d)| d.matched_rule.clone());
    let first = first.map(|(_, d)| d);
    let reason = first
        .as_ref()
        .and_then(|d| d.denied)
        .unwrap_or(DenyReason::NoMatch);
    let message = first.map_or_else(
        || format!("git host {} has no address", remote.host),
        |d| d.message,
    );
    Err(ApiError::new(
        StatusCode::FORBIDDEN,
        ErrorCode::Forbidden,
        format!(
            "git clone refused by the server's egress policy (SANDBOX_EGRESS_ALLOWLIST): {message}"
        ),
    )
    .with_details(json!({
        "host": remote.host, "ip": ip, "matched_rule": matched_rule, "reason": reason.as_str(),
        "reason_code": "policy_denied",
    })))
}

/// One `git` command in `dir`, with nothing of the host's configuration or credentials.
fn git(dir: &Path, home: &Path) -> Command {
    let mut c = Command::new("git");
    c.current_dir(dir)
        .env_clear()
        .env("PATH", "/usr/local/bin:/usr/bin:/bin")
        .env("HOME", home)
        .env("LC_ALL", "C")
        .env("GIT_CONFIG_NOSYSTEM", "1")
        .env("GIT_CONFIG_GLOBAL", "/dev/null")
        .env("GIT_TERMINAL_PROMPT", "0")
        .env("GIT_ASKPASS", "/bin/false")
        .env("GIT_ALLOW_PROTOCOL", "http:https")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true);
    c
}

/// Runs a git command to its end: its stdout, or its stderr as the error.
async fn run(mut c: Command) -> Result<String, String> {
    let out = c
        .output()
        .await
        .map_err(|e| format!("cannot run git: {e}"))?;
    if out.status.success() {
        Ok(String::from_utf8_lossy(&out.stdout).into_owned())
    } else {
        Err(String::from_utf8_lossy(&out.stderr).trim().to_string())
    }
}

/// Bytes of the files under `dir` (what a clone has written so far).
fn disk_bytes(dir: &Path) -> u64 {
    let mut total = 0;
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        let Ok(rd) = std::fs::read_dir(&d) else {
            continue;
        };
        for e in rd.flatten() {
            match e.file_type() {
                Ok(t) if t.is_dir() => stack.push(e.path()),
                Ok(t) if t.is_file() => total += e.metadata().map_or(0, |m| m.len()),
                _ => {}
            }
        }
    }
    total
}

/// Fetches, checks out and patches the commit `g` names, under `app`'s policy and caps.
pub(crate) async fn checkout(app: &App, g: &GitRequest) -> ApiResult<Checkout> {
    check(app, g)?;
    let remote = check_url(&g.url)?;
    // The server's own fetch follows the allowlist in force now (`/admin/policies`).
    let current = app.policy();
    let policy = &current.config.egress_allowlist;
    let (ip, matched_rule) = pin(app, policy, &remote).await?;
    let caps = Caps {
        max_bytes: app.config.max_upload_mb * (1024 * 1024),
        max_files: app.config.max_upload_files,
        max_depth: app.config.max_upload_depth,
        max_ratio: u64::MAX,
    };
    let scratch = tempfile::Builder::new()
        .prefix("wasmsand-git-")
        .tempdir()
        .map_err(|e| ApiError::internal(format!("cannot make a scratch directory: {e}")))?;
    let root = scratch.path().to_path_buf();
    let repo = root.join("repo");
    let home = root.join("home");
    for d in [&repo, &home] {
        std::fs::create_dir(d)
            .map_err(|e| ApiError::internal(format!("cannot make a scratch directory: {e}")))?;
    }
    // What git may write: the tree, its history, the packs while they arrive.
    let disk_cap = caps.max_bytes.saturating_mul(3);
    let limit = Duration::from_secs(app.config.git_timeout_sec);
    let work = fetch_and_patch(g, &remote, ip, &repo, &home);
    let watch = async {
        loop {
            tokio::time::sleep(Duration::from_millis(200)).await;
            let r = repo.clone();
            let used = tokio::task::spawn_blocking(move || disk_bytes(&r))
                .await
                .unwrap_or(0);
            if used > disk_cap {
                return used;
            }
        }
    };
    let commit = tokio::select! {
        r = tokio::time::timeout(limit, work) => match r {
            Ok(r) => r?,
            Err(_) => {
                return Err(failed(
                    StatusCode::GATEWAY_TIMEOUT,
                    "timeout",
                    format!(
                        "git clone of {} did not finish within SANDBOX_GIT_TIMEOUT_SEC ({}s)",
                        g.url, app.config.git_timeout_sec
                    ),
                ));
            }
        },
        used = watch => {
            return Err(ApiError::too_large("git clone", disk_cap).with_details(json!({
                "reason": "too_large", "written": used, "limit": disk_cap,
            })));
        }
    };
    let prefix = match &g.dir {
        Some(d) => format!("{}/", upload::check_path(d, caps.max_depth)?),
        None => String::new(),
    };
    let staged = tokio::task::spawn_blocking(move || stage(&repo, &prefix, &caps))
        .await
        .map_err(|e| ApiError::internal(e.to_string()))??;
    drop(scratch);
    Ok(Checkout {
        staged,
        commit,
        host: remote.host,
        ip,
        matched_rule,
    })
}

/// The git side: fetch the one commit, check it out, apply the patch, and leave the history
/// as loose objects (which every git reads, this project's wasm `git` included).
async fn fetch_and_patch(
    g: &GitRequest,
    remote: &Remote,
    ip: IpAddr,
    repo: &Path,
    home: &Path,
) -> ApiResult<String> {
    let fail = |e: String| -> ApiError {
        if e.contains("couldn't find remote ref") || e.contains("not our ref") {
            invalid(
                format!("git.ref not found in {}: {e}", g.url),
                "ref_not_found",
            )
        } else if e.contains("not found") && e.contains("repository") {
            invalid(format!("git.url: no repository there: {e}"), "not_found")
        } else {
            failed(
                StatusCode::BAD_GATEWAY,
                "remote_error",
                format!("git clone of {} failed: {e}", g.url),
            )
        }
    };
    let mut init = git(repo, home);
    init.args(["init", "-q", "--template=", "."]);
    run(init).await.map_err(ApiError::internal)?;
    for (k, v) in [
        ("core.symlinks", "false"),
        ("core.hooksPath", "/dev/null"),
        ("core.fsmonitor", "false"),
    ] {
        let mut c = git(repo, home);
        c.args(["config", k, v]);
        run(c).await.map_err(ApiError::internal)?;
    }
    let mut fetch = git(repo, home);
    if remote.literal.is_none() {
        let pinned = match ip {
            IpAddr::V6(v6) => format!("[{v6}]"),
            v4 => v4.to_string(),
        };
        fetch.args([
            "-c",
            &format!(
                "http.curloptResolve={}:{}:{pinned}",
                remote.host, remote.port
            ),
        ]);
    }
    fetch.args([
        "-c",
        "http.followRedirects=false",
        "-c",
        "protocol.allow=never",
        "-c",
        "protocol.https.allow=always",
        "-c",
        "protocol.http.allow=always",
        "-c",
        "fetch.recurseSubmodules=false",
        "-c",
        "transfer.fsckObjects=true",
        "-c",
        "http.lowSpeedLimit=1",
        "-c",
        "http.lowSpeedTime=30",
        "fetch",
        "-q",
        "--no-tags",
    ]);
    match g.depth.unwrap_or(1) {
        0 => {}
        d => {
            fetch.arg(format!("--depth={d}"));
        }
    }
    fetch.args(["--", &g.url, g.git_ref.as_deref().unwrap_or("HEAD")]);
    run(fetch).await.map_err(fail)?;
    let mut co = git(repo, home);
    co.args(["checkout", "-q", "--detach", "FETCH_HEAD"]);
    run(co).await.map_err(ApiError::internal)?;
    let mut head = git(repo, home);
    head.args(["rev-parse", "HEAD"]);
    let commit = run(head)
        .await
        .map_err(ApiError::internal)?
        .trim()
        .to_string();

    if let Some(patch) = &g.patch {
        let file = home.join("request.patch");
        std::fs::write(&file, patch).map_err(|e| ApiError::internal(e.to_string()))?;
        let mut check = git(repo, home);
        check
            .args(["apply", "--check", "--whitespace=nowarn"])
            .arg(&file);
        if let Err(e) = run(check).await {
            return Err(patch_refused(&e));
        }
        let mut apply = git(repo, home);
        apply.args(["apply", "--whitespace=nowarn"]).arg(&file);
        run(apply).await.map_err(|e| patch_refused(&e))?;
    }
    explode_packs(repo, home).await?;
    Ok(commit)
}

/// The 400 for a patch that does not apply, naming the first hunk that failed.
fn patch_refused(stderr: &str) -> ApiError {
    // git says `error: patch failed: PATH:LINE`, or names a file that is not there.
    let first = stderr
        .lines()
        .find(|l| l.starts_with("error: "))
        .unwrap_or(stderr)
        .trim_start_matches("error: ")
        .to_string();
    let (file, line) = match first.strip_prefix("patch failed: ") {
        Some(at) => match at.rsplit_once(':') {
            Some((f, l)) => (Some(f.to_string()), l.parse::<u64>().ok()),
            None => (Some(at.to_string()), None),
        },
        None => (None, None),
    };
    let message = match (&file, line) {
        (Some(f), Some(l)) => format!(
            "git.patch does not apply: the hunk at {f}:{l} does not match the checked-out tree"
        ),
        _ if first.is_empty() => "git.patch is not a patch git can read".to_string(),
        _ => format!("git.patch does not apply: {first}"),
    };
    ApiError::invalid(message).with_details(json!({
        "field": "git.patch", "reason": "patch_failed", "file": file, "line": line, "git": stderr,
    }))
}

/// Unpacks every pack into loose objects and removes it.
async fn explode_packs(repo: &Path, home: &Path) -> ApiResult<()> {
    let pack_dir = repo.join(".git/objects/pack");
    let packs: Vec<PathBuf> = std::fs::read_dir(&pack_dir)
        .map(|rd| {
            rd.flatten()
                .map(|e| e.path())
                .filter(|p| p.extension().is_some_and(|x| x == "pack"))
                .collect()
        })
        .unwrap_or_default();
    for pack in packs {
        // `unpack-objects` skips objects the repository has: the pack must be out of it.
        let moved = home.join(pack.file_name().unwrap_or_default());
        std::fs::rename(&pack, &moved).map_err(|e| ApiError::internal(e.to_string()))?;
        let _ = std::fs::remove_file(pack.with_extension("idx"));
        let _ = std::fs::remove_file(pack.with_extension("rev"));
        let input = std::fs::File::open(&moved).map_err(|e| ApiError::internal(e.to_string()))?;
        let mut c = git(repo, home);
        c.args(["unpack-objects", "-q"]).stdin(Stdio::from(input));
        run(c)
            .await
            .map_err(|e| ApiError::internal(format!("cannot unpack the fetched objects: {e}")))?;
        let _ = std::fs::remove_file(&moved);
    }
    Ok(())
}

/// The tree (and its `.git`) as an upload, under the upload caps; what git keeps only for
/// itself (`index`, `FETCH_HEAD`, `logs`) stays out.
fn stage(repo: &Path, prefix: &str, caps: &Caps) -> ApiResult<Staged> {
    let mut staged = Staged::default();
    let mut stack = vec![(repo.to_path_buf(), String::new())];
    while let Some((dir, rel)) = stack.pop() {
        let mut entries: Vec<_> = std::fs::read_dir(&dir)
            .map_err(|e| ApiError::internal(e.to_string()))?
            .flatten()
            .collect();
        entries.sort_by_key(|e| e.file_name());
        for e in entries {
            let name = e.file_name().to_string_lossy().into_owned();
            let path = if rel.is_empty() {
                name.clone()
            } else {
                format!("{rel}/{name}")
            };
            if matches!(
                path.as_str(),
                ".git/FETCH_HEAD" | ".git/logs" | ".git/index"
            ) {
                continue;
            }
            let t = e
                .file_type()
                .map_err(|e| ApiError::internal(e.to_string()))?;
            let full = format!("{prefix}{path}");
            if t.is_dir() {
                staged.dirs.push(upload::check_path(&full, caps.max_depth)?);
                stack.push((e.path(), path));
            } else if t.is_file() {
                let data =
                    std::fs::read(e.path()).map_err(|e| ApiError::internal(e.to_string()))?;
                let checked = upload::check_path(&full, caps.max_depth)?;
                staged.add_file(caps, checked, data)?;
            }
            // Nothing else can be there: symlinks are checked out as files.
        }
    }
    Ok(staged)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn urls_are_http_without_credentials() {
        assert_eq!(
            check_url("https://Example.com/a/b.git").unwrap(),
            Remote {
                host: "example.com".into(),
                port: 443,
                literal: None
            }
        );
        let r = check_url("http://127.0.0.1:8080/r.git").unwrap();
        assert_eq!(
            (r.port, r.literal),
            (8080, Some("127.0.0.1".parse().unwrap()))
        );
        for bad in [
            "ssh://example.com/r.git",
            "git@example.com:r.git",
            "file:///etc",
            "https://user:pw@example.com/r.git",
            "https://token@example.com/r.git",
            "ext::sh -c touch% /tmp/x",
        ] {
            assert!(check_url(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn refs_cannot_be_options_or_refspecs() {
        for good in ["main", "v1.2.3", "feature/x", "0123abcd"] {
            check_ref(good).unwrap();
        }
        for bad in [
            "--upload-pack=x",
            "a:b",
            "a..b",
            "+x",
            "x y",
            "",
            "a/",
            "x.lock",
        ] {
            assert!(check_ref(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn a_failed_hunk_is_named() {
        let e = patch_refused(
            "error: patch failed: src/main.c:12\nerror: src/main.c: patch does not apply\n",
        );
        assert_eq!(e.details["file"], "src/main.c");
        assert_eq!(e.details["line"], 12);
        assert!(e.message.contains("src/main.c:12"), "{}", e.message);
        let e = patch_refused("error: missing.txt: No such file or directory\n");
        assert!(e.message.contains("missing.txt"), "{}", e.message);
    }
}
