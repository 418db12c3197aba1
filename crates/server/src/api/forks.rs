//! Forks, snapshots and merges of wasm sessions, with the crate's semantics:
//! `POST /sessions/{id}/fork` (an independent session holding what this one holds, in O(1)),
//! `POST|GET /sessions/{id}/snapshots`, `POST /sessions/{id}/snapshots/{sid}/restore`,
//! `DELETE /sessions/{id}/snapshots/{sid}`, and `POST /sessions/{id}/merge` (what a fork
//! changed since it was forked, or last merged, applied here three-way; a conflict applies
//! nothing), and `GET /sessions/{id}/changes` (what a session changed since its fork point or
//! a snapshot, path by path and as a patch `git apply` takes).
//!
//! Everything is kept in the store beside the session's checkpoints, so that forks,
//! snapshots and merges survive hibernation, restarts and replicas: a snapshot is a saved
//! state of its own (`{session}:snapshot:{id}`), and a fork's fork point too
//! (`{fork}:fork-point`, moved to the fork's state after each merge). Their chunks are the
//! session's: a snapshot of an unchanged session costs a row.

use std::sync::Arc;

use axum::Extension;
use axum::body::Body;
use axum::extract::{Path, Query, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::Response;
use serde::{Deserialize, Serialize};
use serde_json::json;
use utoipa::ToSchema;

use crate::App;
use crate::audit;
use crate::error::{ApiError, ApiResult, ErrorCode};
use crate::hibernate::{Head, fork_point_id, read_checkpoint, snapshot_key, write_checkpoint};
use crate::observe::TraceId;
use crate::runtime::{BoxSpec, ImageRef};
use crate::sessions::Session;
use crate::store;
use crate::util::{iso, new_id};
use crate::views::{self, ErrorEnvelope, SessionView};

/// The session behind a path (its owner was checked by the auth layer), if it can fork.
async fn wasm_session(app: &Arc<App>, id: &str) -> ApiResult<Arc<Session>> {
    let s = app
        .session(id)
        .await?
        .ok_or_else(|| ApiError::not_found("session", id))?;
    if !s.runtime.hibernates() {
        return Err(ApiError::invalid(format!(
            "sessions of runtime {} cannot be forked, snapshotted or merged; use runtime wasm",
            s.runtime.name()
        ))
        .with_details(json!({ "runtime": s.runtime.name(), "reason": "not_supported" })));
    }
    Ok(s)
}

fn spec_of(s: &Session) -> BoxSpec {
    BoxSpec {
        image: ImageRef {
            requested: s.base_image.clone(),
            canonical: s.base_image.clone(),
        },
        memory_mb: s.memory_mb,
        cpu: s.cpu,
        env: s.env.clone(),
        owner: s.owner.clone(),
        session: Some(s.id.clone()),
        run: None,
        network: s.egress.clone(),
        limits: s.limits,
    }
}

/// Writes `sb`'s state as the saved state `key` (a snapshot or a fork point) of session `s`.
async fn save_state(
    app: &Arc<App>,
    s: &Session,
    key: String,
    meta: serde_json::Value,
    sb: Arc<wasmsand::Sandbox>,
) -> ApiResult<u64> {
    let head = Head {
        session_id: key,
        user_id: s.owner.clone(),
        saved_at: app.clock.now_ms(),
        expires_at: s.expires_at.load(std::sync::atomic::Ordering::SeqCst),
        meta,
    };
    let store = app.store.clone();
    tokio::task::spawn_blocking(move || {
        let payload = sb.export_payload().map_err(|e| e.to_string())?;
        let len = payload.len() as u64;
        write_checkpoint(store.as_ref(), head, &payload, None)?;
        Ok::<_, String>(len)
    })
    .await
    .map_err(|e| ApiError::internal(e.to_string()))?
    .map_err(|e| ApiError::internal(format!("cannot save the state: {e}")))
}

/// Reads a saved state back as a sandbox made for session `s` (`None`: there is none).
async fn load_state(app: &Arc<App>, s: &Session, key: &str) -> ApiResult<Option<Vec<u8>>> {
    let k = key.to_string();
    let Some((saved, payload)) = store::call(&app.store, move |st| read_checkpoint(st, &k))
        .await
        .map_err(|e| ApiError::internal(e.to_string()))?
    else {
        return Ok(None);
    };
    match payload {
        Ok(p) => Ok(Some(p)),
        Err(crate::hibernate::WakeError::Corrupt(why)) => {
            let message = format!(
                "the saved state {key} of session '{}' is corrupt ({why})",
                s.id
            );
            Err(app.corrupt_state(&saved, &why, &s.id, message))
        }
    }
}

#[derive(Deserialize, ToSchema, Default)]
#[serde(deny_unknown_fields)]
pub(crate) struct ForkRequest {
    /// The fork's time to live; default the server's `SANDBOX_SESSION_TTL_SEC`, at most
    /// `SANDBOX_SESSION_MAX_TTL_SEC`.
    ttl_sec: Option<u64>,
    /// Labels of the fork (default: the session's).
    labels: Option<std::collections::BTreeMap<String, String>>,
}

/// An optional JSON body: none, or an object of type `T`.
async fn optional_body<T: serde::de::DeserializeOwned + Default>(
    headers: &HeaderMap,
    body: Body,
) -> ApiResult<T> {
    let bytes = axum::body::to_bytes(body, 64 * 1024)
        .await
        .map_err(|_| ApiError::too_large("the request body", 64 * 1024))?;
    if bytes.iter().all(u8::is_ascii_whitespace) {
        return Ok(T::default());
    }
    let v = crate::http::read_json(headers, Body::from(bytes)).await?;
    crate::http::typed(&v)
}

#[utoipa::path(
    post,
    path = "/sessions/{id}/fork",
    tag = "sessions",
    params(("id" = String, Path, description = "session id")),
    request_body(content = Option<ForkRequest>, description = "optional"),
    responses(
        (status = 201, description = "the fork: a new session holding what this one holds now, `forked_from` naming it", body = SessionView),
        (status = 400, description = "a session of a runtime that cannot fork, or bad values", body = ErrorEnvelope),
        (status = 404, description = "no such session", body = ErrorEnvelope),
        (status = 429, description = "the server holds its maximum of sessions (`quota_exceeded`)", body = ErrorEnvelope),
    )
)]
pub(crate) async fn fork_session(
    State(app): State<Arc<App>>,
    Path(id): Path<String>,
    trace: Option<Extension<TraceId>>,
    headers: HeaderMap,
    body: Body,
) -> ApiResult<Response> {
    let req: ForkRequest = optional_body(&headers, body).await?;
    let ttl = match req.ttl_sec {
        Some(0) => return Err(ApiError::invalid("ttl_sec must be at least 1")),
        Some(t) => t.min(app.config.session_max_ttl_sec),
        None => app.config.session_default_ttl_sec,
    };
    if app.is_shutting_down() {
        return Err(crate::http::shutting_down());
    }
    let parent = wasm_session(&app, &id).await?;
    let source = audit::source_of(&headers);
    let trace_id = trace.as_ref().map(|t| t.0.0.clone());
    let fork = fork(&app, parent, ttl, req.labels, &source, trace_id.as_deref()).await?;
    Ok(views::json(StatusCode::CREATED, &fork.view()))
}

/// A new session holding what `parent` holds now, its fork point saved, checkpointed and
/// audited as made by `source`.
pub(crate) async fn fork(
    app: &Arc<App>,
    parent: Arc<Session>,
    ttl: u64,
    labels: Option<std::collections::BTreeMap<String, String>>,
    source: &str,
    trace_id: Option<&str>,
) -> ApiResult<Arc<Session>> {
    let (parent, guard) = app.lock_session(parent).await?;
    let boxed = parent
        .runtime
        .fork_box(&parent.boxed, spec_of(&parent))
        .await
        .map_err(|e| ApiError::internal(e.message()))?;
    drop(guard);
    let now = app.clock.now_ms();
    let mut fork = parent.derive(
        new_id(),
        boxed,
        now,
        now + ttl as i64 * 1000,
        Some(parent.id.clone()),
    );
    if let Some(labels) = labels {
        fork.labels = labels;
    }
    let fork = Arc::new(fork);
    let sb = fork.boxed.sandbox().cloned().expect("a wasm box");
    // The fork point first: a merge needs it even if this process dies right after.
    let meta = json!({ "kind": "fork_point", "session_id": fork.id, "parent": parent.id });
    if let Err(e) = save_state(app, &fork, fork_point_id(&fork.id), meta, sb).await {
        fork.boxed.destroy().await;
        return Err(e);
    }
    if !app.insert_session(fork.clone()) {
        fork.boxed.destroy().await;
        let _ = app.forget_saved(&fork.id).await;
        return Err(crate::api::sessions::too_many_sessions(app));
    }
    {
        let _guard = fork.lock.lock().await;
        app.checkpoint(&fork).await;
    }
    crate::replica::record_session_here(app, &fork.id, &fork.owner).await;
    crate::observe::session_created(app, fork.runtime.name());
    audit::session_created(
        app,
        &fork.owner,
        &audit::SessionFacts::of(&fork, source, trace_id),
    );
    Ok(fork)
}

#[derive(Deserialize, ToSchema, Default)]
#[serde(deny_unknown_fields)]
pub(crate) struct SnapshotRequest {
    /// A name for people; snapshots are found by `snapshot_id`.
    label: Option<String>,
}

/// One snapshot of a session.
#[derive(Serialize, Deserialize, ToSchema)]
pub(crate) struct SnapshotView {
    pub(crate) snapshot_id: String,
    session_id: String,
    label: Option<String>,
    created_at: String,
    /// Bytes of the state it holds (before compression; chunks it shares with the session
    /// are stored once).
    size_bytes: u64,
}

#[derive(Serialize, ToSchema)]
pub(crate) struct SnapshotList {
    /// Oldest first.
    items: Vec<SnapshotView>,
}

#[utoipa::path(
    post,
    path = "/sessions/{id}/snapshots",
    tag = "sessions",
    params(("id" = String, Path, description = "session id")),
    request_body(content = Option<SnapshotRequest>, description = "optional"),
    responses(
        (status = 201, description = "the snapshot: the session's files and shell state now, kept in the store until the session ends", body = SnapshotView),
        (status = 400, description = "a session of a runtime that cannot snapshot", body = ErrorEnvelope),
        (status = 404, description = "no such session", body = ErrorEnvelope),
    )
)]
pub(crate) async fn create_snapshot(
    State(app): State<Arc<App>>,
    Path(id): Path<String>,
    headers: HeaderMap,
    body: Body,
) -> ApiResult<Response> {
    let req: SnapshotRequest = optional_body(&headers, body).await?;
    if req.label.as_ref().is_some_and(|l| l.len() > 256) {
        return Err(ApiError::invalid("label is at most 256 bytes"));
    }
    let s = wasm_session(&app, &id).await?;
    let view = snapshot(&app, s, req.label).await?;
    Ok(views::json(StatusCode::CREATED, &view))
}

/// Saves session `s`'s files and shell state now as a snapshot of it.
pub(crate) async fn snapshot(
    app: &Arc<App>,
    s: Arc<Session>,
    label: Option<String>,
) -> ApiResult<SnapshotView> {
    let (s, guard) = app.lock_session(s).await?;
    let sb = s.boxed.sandbox().expect("a wasm box");
    // The state between two runs, in O(1); written after the lock is given back.
    let point = Arc::new(sb.fork().map_err(|e| ApiError::internal(e.to_string()))?);
    drop(guard);
    let snapshot_id = format!("snap-{}", &new_id()[..8]);
    let created_at = iso(app.clock.now_ms());
    let meta = json!({ "kind": "snapshot", "session_id": s.id, "snapshot_id": snapshot_id,
                       "label": label, "created_at": created_at });
    let saved = save_state(
        app,
        &s,
        snapshot_key(&s.id, &snapshot_id),
        meta,
        point.clone(),
    )
    .await;
    point.destroy();
    let size_bytes = saved?;
    Ok(SnapshotView {
        snapshot_id,
        session_id: s.id.clone(),
        label,
        created_at,
        size_bytes,
    })
}

#[utoipa::path(
    get,
    path = "/sessions/{id}/snapshots",
    tag = "sessions",
    params(("id" = String, Path, description = "session id")),
    responses(
        (status = 200, description = "the session's snapshots, oldest first", body = SnapshotList),
        (status = 404, description = "no such session", body = ErrorEnvelope),
    )
)]
pub(crate) async fn list_snapshots(
    State(app): State<Arc<App>>,
    Path(id): Path<String>,
) -> ApiResult<Response> {
    let s = wasm_session(&app, &id).await?;
    let (prefix, user) = (snapshot_key(&s.id, ""), s.owner.clone());
    let saved = store::call(&app.store, move |st| {
        let ids = st.saved_ids_with_prefix(&prefix)?;
        let all = st.saved_sessions(Some(&user))?;
        Ok(all
            .into_iter()
            .filter(|x| ids.contains(&x.session_id))
            .collect::<Vec<_>>())
    })
    .await
    .map_err(|e| ApiError::internal(e.to_string()))?;
    let mut items: Vec<SnapshotView> = saved
        .iter()
        .map(|x| SnapshotView {
            snapshot_id: x.meta["snapshot_id"].as_str().unwrap_or_default().into(),
            session_id: s.id.clone(),
            label: x.meta["label"].as_str().map(str::to_string),
            created_at: x.meta["created_at"].as_str().unwrap_or_default().into(),
            size_bytes: x.payload_len,
        })
        .collect();
    items.sort_by(|a, b| (&a.created_at, &a.snapshot_id).cmp(&(&b.created_at, &b.snapshot_id)));
    Ok(views::json(StatusCode::OK, &SnapshotList { items }))
}

#[utoipa::path(
    post,
    path = "/sessions/{id}/snapshots/{snapshot_id}/restore",
    tag = "sessions",
    params(
        ("id" = String, Path, description = "session id"),
        ("snapshot_id" = String, Path, description = "snapshot id"),
    ),
    responses(
        (status = 200, description = "the session, its files and shell state as the snapshot holds them (the snapshot stays)", body = SessionView),
        (status = 404, description = "no such session or snapshot", body = ErrorEnvelope),
        (status = 410, description = "the snapshot's saved state is corrupt (`session_lost`, `corrupt_checkpoint`)", body = ErrorEnvelope),
    )
)]
pub(crate) async fn restore_snapshot(
    State(app): State<Arc<App>>,
    Path((id, snapshot_id)): Path<(String, String)>,
) -> ApiResult<Response> {
    let s = wasm_session(&app, &id).await?;
    let restored = restore(&app, s, &snapshot_id).await?;
    Ok(views::json(StatusCode::OK, &restored.view()))
}

/// Puts session `s` back as its snapshot `snapshot_id` holds it; the session as it is now.
pub(crate) async fn restore(
    app: &Arc<App>,
    s: Arc<Session>,
    snapshot_id: &str,
) -> ApiResult<Arc<Session>> {
    let (s, guard) = app.lock_session(s).await?;
    let Some(payload) = load_state(app, &s, &snapshot_key(&s.id, snapshot_id)).await? else {
        return Err(ApiError::not_found("snapshot", snapshot_id));
    };
    let boxed = s
        .runtime
        .revive(payload, spec_of(&s))
        .await
        .map_err(|e| ApiError::internal(e.message()))?;
    Ok(app.replace_session(&s, guard, boxed).await)
}

#[utoipa::path(
    delete,
    path = "/sessions/{id}/snapshots/{snapshot_id}",
    tag = "sessions",
    params(
        ("id" = String, Path, description = "session id"),
        ("snapshot_id" = String, Path, description = "snapshot id"),
    ),
    responses(
        (status = 204, description = "forgotten"),
        (status = 404, description = "no such session or snapshot", body = ErrorEnvelope),
    )
)]
pub(crate) async fn delete_snapshot(
    State(app): State<Arc<App>>,
    Path((id, snapshot_id)): Path<(String, String)>,
) -> ApiResult<StatusCode> {
    let s = wasm_session(&app, &id).await?;
    let key = snapshot_key(&s.id, &snapshot_id);
    let gone = store::call(&app.store, move |st| st.session_forget(&key))
        .await
        .map_err(|e| ApiError::internal(e.to_string()))?;
    if gone {
        Ok(StatusCode::NO_CONTENT)
    } else {
        Err(ApiError::not_found("snapshot", &snapshot_id))
    }
}

#[derive(Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct MergeRequest {
    /// The fork to merge (a session made by `POST /sessions/{id}/fork` of this one).
    fork_session_id: String,
    /// The fork's exported variables replace this session's.
    #[serde(default)]
    env: bool,
    /// This session moves to the fork's working directory.
    #[serde(default)]
    cwd: bool,
}

#[derive(Serialize, ToSchema)]
pub(crate) struct MergedPathView {
    path: String,
    /// `added`, `changed` or `deleted`.
    change: String,
}

#[derive(Serialize, ToSchema)]
pub(crate) struct MergeReply {
    /// Each path set to the fork's state, in path order.
    applied: Vec<MergedPathView>,
    added: usize,
    changed: usize,
    deleted: usize,
    /// Variables set, changed or unset (with `env`).
    env: Vec<String>,
    /// The new working directory (with `cwd`).
    cwd: Option<String>,
}

#[utoipa::path(
    post,
    path = "/sessions/{id}/merge",
    tag = "sessions",
    params(("id" = String, Path, description = "the session merged into (the fork's parent)")),
    request_body = MergeRequest,
    responses(
        (status = 200, description = "what the fork changed since it was forked (or last merged) is applied here", body = MergeReply),
        (status = 400, description = "not a fork of this session, or the session itself", body = ErrorEnvelope),
        (status = 404, description = "no such session or fork", body = ErrorEnvelope),
        (status = 409, description = "both changed some path differently (`conflict`, `details.conflicts`: path, ours, theirs): nothing is applied", body = ErrorEnvelope),
    )
)]
pub(crate) async fn merge_session(
    State(app): State<Arc<App>>,
    Path(id): Path<String>,
    headers: HeaderMap,
    body: Body,
) -> ApiResult<Response> {
    let v = crate::http::read_json(&headers, body).await?;
    let req: MergeRequest = crate::http::typed(&v)?;
    if req.fork_session_id == id {
        return Err(ApiError::invalid("a session cannot be merged into itself"));
    }
    let parent = wasm_session(&app, &id).await?;
    let fork = match app.session_user(&req.fork_session_id).await? {
        Some(owner) if owner == parent.owner => wasm_session(&app, &req.fork_session_id).await?,
        _ => return Err(ApiError::not_found("session", &req.fork_session_id)),
    };
    let opts = wasmsand::MergeOptions {
        env: req.env,
        cwd: req.cwd,
    };
    let r = match merge(&app, parent, fork, opts).await? {
        Ok(r) => r,
        Err(conflicts) => {
            let list: Vec<_> = conflicts
                .iter()
                .map(|c| json!({ "path": c.path, "ours": c.ours.as_str(), "theirs": c.theirs.as_str() }))
                .collect();
            return Err(ApiError::new(
                StatusCode::CONFLICT,
                ErrorCode::Conflict,
                format!(
                    "the session and its fork changed {} path(s) differently; nothing was merged",
                    list.len()
                ),
            )
            .with_details(json!({ "reason": "merge_conflict", "conflicts": list })));
        }
    };
    let count = |c: wasmsand::SideChange| r.applied.iter().filter(|a| a.change == c).count();
    Ok(views::json(
        StatusCode::OK,
        &MergeReply {
            added: count(wasmsand::SideChange::Added),
            changed: count(wasmsand::SideChange::Changed),
            deleted: count(wasmsand::SideChange::Deleted),
            applied: r
                .applied
                .iter()
                .map(|a| MergedPathView {
                    path: a.path.clone(),
                    change: a.change.as_str().into(),
                })
                .collect(),
            env: r.env,
            cwd: r.cwd,
        },
    ))
}

/// Brings what `fork` changed since it was forked (or last merged) into `parent`, three-way
/// against the fork point kept in the store (so it works after either slept or the service
/// restarted); `Ok(Err(conflicts))` when both changed paths differently, and then nothing is
/// applied. The fork point moves to the fork's state and the parent is checkpointed.
pub(crate) async fn merge(
    app: &Arc<App>,
    parent: Arc<Session>,
    fork: Arc<Session>,
    opts: wasmsand::MergeOptions,
) -> ApiResult<Result<wasmsand::MergeResult, Vec<wasmsand::MergeConflict>>> {
    if fork.forked_from.as_deref() != Some(parent.id.as_str()) {
        return Err(ApiError::invalid(format!(
            "session '{}' is not a fork of session '{}'",
            fork.id, parent.id
        ))
        .with_details(json!({ "fork_session_id": fork.id, "forked_from": fork.forked_from })));
    }
    // Two locks, always in id order: merges both ways cannot deadlock.
    let (parent, fork, _g1, _g2) = if parent.id < fork.id {
        let (p, g1) = app.lock_session(parent).await?;
        let (f, g2) = app.lock_session(fork).await?;
        (p, f, g1, g2)
    } else {
        let (f, g2) = app.lock_session(fork).await?;
        let (p, g1) = app.lock_session(parent).await?;
        (p, f, g1, g2)
    };
    let Some(base) = load_state(app, &fork, &fork_point_id(&fork.id)).await? else {
        return Err(ApiError::internal(format!(
            "the fork point of session '{}' is missing from the store",
            fork.id
        )));
    };
    let (psb, fsb) = (
        parent.boxed.sandbox().cloned().expect("a wasm box"),
        fork.boxed.sandbox().cloned().expect("a wasm box"),
    );
    let limits = *psb.limits();
    let (psb2, fsb2) = (psb.clone(), fsb.clone());
    let merged = tokio::task::spawn_blocking(move || {
        let base = wasmsand::Sandbox::from_payload(
            &base,
            wasmsand::SandboxOptions {
                limits,
                ..Default::default()
            },
        )?;
        let r = psb2.merge_from(&base, &fsb2, opts);
        base.destroy();
        r
    })
    .await
    .map_err(|e| ApiError::internal(e.to_string()))?;
    let r = match merged {
        Ok(r) => r,
        Err(wasmsand::SandboxError::MergeConflict(conflicts)) => return Ok(Err(conflicts)),
        Err(wasmsand::SandboxError::Fs(e)) => {
            let path = e.path.clone();
            return Err(crate::api::files::errno_error(
                e.errno.name(),
                e.to_string(),
                &path,
            ));
        }
        Err(e) => return Err(ApiError::invalid(e.to_string())),
    };
    // What was merged is now in both: the next merge starts from it.
    let meta = json!({ "kind": "fork_point", "session_id": fork.id, "parent": parent.id });
    save_state(app, &fork, fork_point_id(&fork.id), meta, fsb).await?;
    app.checkpoint(&parent).await;
    Ok(Ok(r))
}

/// What session `s` changed against one of its saved states (its fork point, or a snapshot:
/// `key`); `None` when the store has no such state. The saved state is read back as a
/// sandbox, so this works whether `s` slept or the service restarted since.
pub(crate) async fn changes_since_saved(
    app: &Arc<App>,
    s: Arc<Session>,
    key: &str,
    path: Option<String>,
) -> ApiResult<Option<wasmsand::Changes>> {
    let Some(payload) = load_state(app, &s, key).await? else {
        return Ok(None);
    };
    let sb = s.boxed.sandbox().cloned().expect("a wasm box");
    let limits = *sb.limits();
    let changes = tokio::task::spawn_blocking(move || {
        let base = wasmsand::Sandbox::from_payload(
            &payload,
            wasmsand::SandboxOptions {
                limits,
                ..Default::default()
            },
        )?;
        let r = sb.changes_against(&base, path.as_deref());
        base.destroy();
        r
    })
    .await
    .map_err(|e| ApiError::internal(e.to_string()))?;
    changes
        .map(Some)
        .map_err(|e| ApiError::invalid(e.to_string()))
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct ChangesQuery {
    since: Option<String>,
    snapshot_id: Option<String>,
    path: Option<String>,
}

/// One changed path.
#[derive(Serialize, ToSchema)]
pub(crate) struct FileChangeView {
    /// Relative to `root`.
    path: String,
    /// `added`, `modified` or `deleted`.
    status: String,
    /// `file`, `symlink`, `dir` or `device`: what it is now (was, when deleted).
    kind: String,
    /// Permission bits before, in octal (null when added).
    old_mode: Option<String>,
    /// Permission bits after, in octal (null when deleted).
    new_mode: Option<String>,
    /// Not text: the patch carries it as a git binary patch.
    binary: bool,
}

/// What a session changed.
#[derive(Serialize, ToSchema)]
pub(crate) struct ChangesView {
    session_id: String,
    /// `parent` or `snapshot`.
    since: String,
    /// The directory the paths are relative to.
    root: String,
    /// Every changed path (directories included), parents first.
    files: Vec<FileChangeView>,
    /// The changes in `git diff --binary` format; empty when nothing changed.
    patch: String,
}

#[utoipa::path(
    get,
    path = "/sessions/{id}/changes",
    tag = "sessions",
    params(
        ("id" = String, Path, description = "session id"),
        ("since" = Option<String>, Query, description = "`parent`: what a fork changed since it was forked (or last merged), what a merge would bring; `snapshot`: since one of its snapshots (`snapshot_id`). Default: `snapshot` with a `snapshot_id`, else `parent`"),
        ("snapshot_id" = Option<String>, Query, description = "with `since=snapshot`"),
        ("path" = Option<String>, Query, description = "only this directory (relative: under the workspace); paths are relative to it"),
    ),
    responses(
        (status = 200, description = "the changed paths and a patch `git apply` takes", body = ChangesView),
        (status = 400, description = "a bad `since`, a `snapshot_id` without `since=snapshot` (or the reverse), `parent` of a session that is not a fork, or a session of a runtime that cannot fork", body = ErrorEnvelope),
        (status = 404, description = "no such session or snapshot", body = ErrorEnvelope),
    )
)]
pub(crate) async fn session_changes(
    State(app): State<Arc<App>>,
    Path(id): Path<String>,
    Query(q): Query<ChangesQuery>,
) -> ApiResult<Response> {
    let since = match (q.since.as_deref(), &q.snapshot_id) {
        (Some("snapshot") | None, Some(_)) => "snapshot",
        (Some("parent") | None, None) => "parent",
        (Some("snapshot"), None) => {
            return Err(ApiError::invalid("since=snapshot needs snapshot_id"));
        }
        (Some("parent"), Some(_)) => {
            return Err(ApiError::invalid("snapshot_id goes with since=snapshot"));
        }
        (Some(other), _) => {
            return Err(ApiError::invalid(format!(
                "since must be parent or snapshot, not {other:?}"
            )));
        }
    };
    if let Some(p) = &q.path {
        crate::api::files::check_path("path", p)?;
    }
    let s = wasm_session(&app, &id).await?;
    let key = match &q.snapshot_id {
        Some(sid) => snapshot_key(&s.id, sid),
        None if s.forked_from.is_none() => {
            return Err(ApiError::invalid(format!(
                "session '{id}' is not a fork: it has no parent to compare with (since=snapshot)"
            )));
        }
        None => fork_point_id(&s.id),
    };
    let Some(c) = changes_since_saved(&app, s, &key, q.path).await? else {
        return Err(match q.snapshot_id {
            Some(sid) => ApiError::not_found("snapshot", &sid),
            None => ApiError::internal(format!(
                "the fork point of session '{id}' is missing from the store"
            )),
        });
    };
    let mode = |m: Option<u32>| m.map(|m| format!("{m:o}"));
    Ok(views::json(
        StatusCode::OK,
        &ChangesView {
            session_id: id,
            since: since.into(),
            root: c.root.clone(),
            files: c
                .files
                .iter()
                .map(|f| FileChangeView {
                    path: f.path.clone(),
                    status: f.status.as_str().into(),
                    kind: f.kind.into(),
                    old_mode: mode(f.old_mode),
                    new_mode: mode(f.new_mode),
                    binary: f.binary,
                })
                .collect(),
            patch: c.patch,
        },
    ))
}
