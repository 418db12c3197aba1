//! A session's files one at a time: list, stat, ranged read, write (or append), mkdir,
//! move and remove — what an SDK's `files.*` needs beside the archive upload of
//! `POST /sessions/{id}/files`. Paths are absolute in the sandbox, or relative to the
//! workspace; the sandbox's own permissions apply (a container's run user, the wasm
//! sandbox's read-only system paths).
//!
//! Changes take the session's lock (after a run in progress, like uploads) and are in the
//! session's checkpoint before the answer; reads take no lock.

use std::sync::Arc;

use axum::body::Body;
use axum::extract::{Path, Query, State};
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use serde::{Deserialize, Serialize};
use serde_json::json;
use utoipa::ToSchema;

use crate::App;
use crate::config::MIB;
use crate::error::{ApiError, ApiResult, ErrorCode};
use crate::http::{RangeReq, parse_range, read_json, typed};
use crate::runtime::{FsEntry, FsFailure, FsOp, FsReply};
use crate::sessions::Session;
use crate::views::{self, ErrorEnvelope};

/// Longest path accepted (Linux's `PATH_MAX`).
const MAX_PATH: usize = 4096;

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct PathQuery {
    path: Option<String>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RemoveQuery {
    path: String,
    recursive: Option<bool>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct WriteQuery {
    path: String,
    append: Option<bool>,
}

#[derive(Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct MkdirRequest {
    path: String,
}

#[derive(Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct MoveRequest {
    from: String,
    to: String,
}

#[derive(Serialize, ToSchema)]
pub(crate) struct FileList {
    /// The path as asked.
    path: String,
    /// Sorted by name; a symlink is listed as itself.
    entries: Vec<FsEntry>,
}

#[derive(Serialize, ToSchema)]
pub(crate) struct FileStat {
    path: String,
    name: String,
    /// `file`, `dir`, `symlink` or `other`.
    #[serde(rename = "type")]
    kind: &'static str,
    size: u64,
}

#[derive(Serialize, ToSchema)]
pub(crate) struct WriteReply {
    path: String,
    /// The file's size after the write.
    size: u64,
}

#[derive(Serialize, ToSchema)]
pub(crate) struct MkdirReply {
    path: String,
    /// False when the directory was already there.
    created: bool,
}

pub(crate) fn check_path(name: &str, p: &str) -> ApiResult<()> {
    if p.is_empty() {
        return Err(ApiError::invalid(format!("{name} must not be empty")));
    }
    if p.len() > MAX_PATH {
        return Err(ApiError::invalid(format!(
            "{name} is longer than {MAX_PATH} bytes"
        )));
    }
    if p.contains('\0') {
        return Err(ApiError::invalid(format!("{name} contains a NUL byte")));
    }
    Ok(())
}

/// A failed operation as the API says it: the errno's usual meaning picks the status, and
/// `details.errno` names it for clients that map errors to their own (the Python SDK raises
/// `FileNotFoundError`, ...).
fn fs_error(f: FsFailure, path: &str) -> ApiError {
    match f {
        FsFailure::Errno { errno, message } => errno_error(&errno, message, path),
        FsFailure::Gone(m) => ApiError::new(StatusCode::GONE, ErrorCode::NotFound, m),
    }
}

/// A filesystem failure of the sandbox (a file operation, a merge) as the API says it.
pub(crate) fn errno_error(errno: &str, message: String, path: &str) -> ApiError {
    let (status, code) = match errno {
        "ENOENT" => (StatusCode::NOT_FOUND, ErrorCode::NotFound),
        "EACCES" | "EPERM" | "EROFS" => (StatusCode::FORBIDDEN, ErrorCode::Forbidden),
        "ENOSPC" | "EDQUOT" => (StatusCode::PAYLOAD_TOO_LARGE, ErrorCode::QuotaExceeded),
        _ => (StatusCode::CONFLICT, ErrorCode::Conflict),
    };
    ApiError::new(status, code, message).with_details(json!({
        "reason": "filesystem", "errno": errno, "path": path,
    }))
}

async fn session_of(app: &Arc<App>, id: &str) -> ApiResult<Arc<Session>> {
    app.session(id)
        .await?
        .ok_or_else(|| ApiError::not_found("session", id))
}

fn unexpected(r: FsReply) -> ApiError {
    ApiError::internal(format!("unexpected answer from the runtime: {r:?}"))
}

/// Runs a change under the session's lock and puts it in the session's checkpoint.
async fn change(app: &Arc<App>, id: &str, op: FsOp, path: &str) -> ApiResult<FsReply> {
    let session = session_of(app, id).await?;
    let (session, _guard) = app.lock_session(session).await?;
    let reply = session.boxed.fs(op).await.map_err(|e| fs_error(e, path))?;
    app.checkpoint(&session).await;
    Ok(reply)
}

#[utoipa::path(
    get,
    path = "/sessions/{id}/files",
    tag = "files",
    params(
        ("id" = String, Path, description = "session id"),
        ("path" = Option<String>, Query, description = "a directory: absolute, or relative to the workspace (default: the workspace)"),
    ),
    responses(
        (status = 400, description = "a bad or missing `path`, or an unknown query field", body = ErrorEnvelope),
        (status = 200, description = "the directory's entries, sorted by name", body = FileList),
        (status = 404, description = "no such session, or no such directory (`details.errno`)", body = ErrorEnvelope),
        (status = 409, description = "not a directory (`details.errno: ENOTDIR`)", body = ErrorEnvelope),
    )
)]
pub(crate) async fn list_files(
    State(app): State<Arc<App>>,
    Path(id): Path<String>,
    Query(q): Query<PathQuery>,
) -> ApiResult<Response> {
    let path = q.path.unwrap_or_default();
    if !path.is_empty() {
        check_path("path", &path)?;
    }
    let session = session_of(&app, &id).await?;
    match session
        .boxed
        .fs(FsOp::List(path.clone()))
        .await
        .map_err(|e| fs_error(e, &path))?
    {
        FsReply::Entries(entries) => Ok(views::json(StatusCode::OK, &FileList { path, entries })),
        other => Err(unexpected(other)),
    }
}

#[utoipa::path(
    get,
    path = "/sessions/{id}/files/stat",
    tag = "files",
    params(
        ("id" = String, Path, description = "session id"),
        ("path" = String, Query, description = "absolute, or relative to the workspace"),
    ),
    responses(
        (status = 400, description = "a bad or missing `path`, or an unknown query field", body = ErrorEnvelope),
        (status = 200, description = "what the path is; a symlink is described as itself", body = FileStat),
        (status = 404, description = "no such session or path (`details.errno`)", body = ErrorEnvelope),
    )
)]
pub(crate) async fn stat_file(
    State(app): State<Arc<App>>,
    Path(id): Path<String>,
    Query(q): Query<PathQuery>,
) -> ApiResult<Response> {
    let path = q.path.unwrap_or_default();
    check_path("path", &path)?;
    let session = session_of(&app, &id).await?;
    match session
        .boxed
        .fs(FsOp::Stat(path.clone()))
        .await
        .map_err(|e| fs_error(e, &path))?
    {
        FsReply::Entry(e) => Ok(views::json(
            StatusCode::OK,
            &FileStat {
                path,
                name: e.name,
                kind: e.kind,
                size: e.size,
            },
        )),
        other => Err(unexpected(other)),
    }
}

#[utoipa::path(
    get,
    path = "/sessions/{id}/files/content",
    tag = "files",
    params(
        ("id" = String, Path, description = "session id"),
        ("path" = String, Query, description = "a file (a symlink is followed): absolute, or relative to the workspace"),
        ("Range" = Option<String>, Header, description = "one `bytes=` range"),
    ),
    responses(
        (status = 400, description = "a bad or missing `path`, or an unknown query field", body = ErrorEnvelope),
        (status = 200, description = "the whole file; `X-File-Size` is its size", content_type = "application/octet-stream", body = [u8]),
        (status = 206, description = "the range asked; `Content-Range` has the file's size", content_type = "application/octet-stream", body = [u8]),
        (status = 404, description = "no such session or file (`details.errno`)", body = ErrorEnvelope),
        (status = 409, description = "a directory (`details.errno: EISDIR`)", body = ErrorEnvelope),
        (status = 413, description = "a whole file over `SANDBOX_MAX_UPLOAD_MB`: ask for ranges", body = ErrorEnvelope),
        (status = 416, description = "a range past the end, or several ranges", body = ErrorEnvelope),
    )
)]
pub(crate) async fn read_file(
    State(app): State<Arc<App>>,
    Path(id): Path<String>,
    Query(q): Query<PathQuery>,
    headers: HeaderMap,
) -> ApiResult<Response> {
    let path = q.path.unwrap_or_default();
    check_path("path", &path)?;
    let session = session_of(&app, &id).await?;
    let read = |offset, length| {
        let path = path.clone();
        let boxed = session.boxed.clone();
        async move {
            let op = FsOp::Read {
                path: path.clone(),
                offset,
                length,
            };
            match boxed.fs(op).await {
                Ok(FsReply::Data(d, size)) => Ok((d, size)),
                Ok(other) => Err(unexpected(other)),
                Err(e) => Err(fs_error(e, &path)),
            }
        }
    };
    // The size first (nothing read), so that the range is checked against it. An empty file
    // has no byte to range over: it is answered whole, as RFC 9110 lets a server do.
    let (_, size) = read(0, 0).await?;
    let range = match size {
        0 => RangeReq::Full,
        _ => parse_range(headers.get(header::RANGE), size)?,
    };
    let (status, start, count) = match range {
        RangeReq::Full => (StatusCode::OK, 0, size),
        RangeReq::Part(s, e) => (StatusCode::PARTIAL_CONTENT, s, e - s + 1),
    };
    let cap = app.config.max_upload_mb * MIB;
    if count > cap {
        return Err(ApiError::new(
            StatusCode::PAYLOAD_TOO_LARGE,
            ErrorCode::InvalidRequest,
            format!(
                "{path} has {count} bytes, more than one answer carries ({cap}): ask for ranges (Range: bytes=0-{})",
                cap - 1
            ),
        )
        .with_details(json!({ "size": size, "limit": cap })));
    }
    let (data, now) = if count == 0 {
        (bytes::Bytes::new(), size)
    } else {
        read(start, count).await?
    };
    if status == StatusCode::PARTIAL_CONTENT && data.is_empty() {
        // The file shrank below the range since its size was read.
        return Err(ApiError::new(
            StatusCode::RANGE_NOT_SATISFIABLE,
            ErrorCode::InvalidRequest,
            format!("{path} shrank to {now} bytes: the range starts past its end"),
        )
        .with_header(header::CONTENT_RANGE, format!("bytes */{now}"))
        .with_details(json!({ "size": now })));
    }
    let mut resp = (status, Body::from(data.clone())).into_response();
    let h = resp.headers_mut();
    h.insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/octet-stream"),
    );
    h.insert(header::ACCEPT_RANGES, HeaderValue::from_static("bytes"));
    h.insert("x-file-size", HeaderValue::from(now));
    if status == StatusCode::PARTIAL_CONTENT && !data.is_empty() {
        let end = start + data.len() as u64 - 1;
        if let Ok(v) = HeaderValue::from_str(&format!("bytes {start}-{end}/{now}")) {
            h.insert(header::CONTENT_RANGE, v);
        }
    }
    Ok(resp)
}

#[utoipa::path(
    put,
    path = "/sessions/{id}/files/content",
    tag = "files",
    params(
        ("id" = String, Path, description = "session id"),
        ("path" = String, Query, description = "absolute, or relative to the workspace; missing parent directories are made"),
        ("append" = Option<bool>, Query, description = "add to the end of the file (made if missing) instead of replacing it"),
    ),
    request_body(content = [u8], content_type = "application/octet-stream", description = "the bytes (at most `SANDBOX_MAX_UPLOAD_MB`)"),
    responses(
        (status = 400, description = "a bad or missing `path`, or an unknown query field", body = ErrorEnvelope),
        (status = 200, description = "written; `size` is the file's size now", body = WriteReply),
        (status = 403, description = "the sandbox refuses the write (`details.errno`: `EACCES`, `EROFS`)", body = ErrorEnvelope),
        (status = 404, description = "no such session", body = ErrorEnvelope),
        (status = 409, description = "a directory is in the way (`details.errno`)", body = ErrorEnvelope),
        (status = 413, description = "over `SANDBOX_MAX_UPLOAD_MB`, or the workspace is full (`quota_exceeded`)", body = ErrorEnvelope),
    )
)]
pub(crate) async fn write_file(
    State(app): State<Arc<App>>,
    Path(id): Path<String>,
    Query(q): Query<WriteQuery>,
    body: Body,
) -> ApiResult<Response> {
    check_path("path", &q.path)?;
    let cap = app.config.max_upload_mb * MIB;
    let data = axum::body::to_bytes(body, cap as usize)
        .await
        .map_err(|_| {
            ApiError::too_large("the file", cap)
                .with_details(json!({ "reason": "too_large", "limit": cap }))
                .with_header(header::CONNECTION, "close")
        })?;
    let bytes = data.len() as u64;
    let op = FsOp::Write {
        path: q.path.clone(),
        data: data.to_vec(),
        append: q.append.unwrap_or(false),
    };
    match change(&app, &id, op, &q.path).await? {
        FsReply::Size(size) => {
            crate::observe::upload(&app, "file", bytes, 1);
            Ok(views::json(
                StatusCode::OK,
                &WriteReply { path: q.path, size },
            ))
        }
        other => Err(unexpected(other)),
    }
}

#[utoipa::path(
    post,
    path = "/sessions/{id}/files/mkdir",
    tag = "files",
    params(("id" = String, Path, description = "session id")),
    request_body = MkdirRequest,
    responses(
        (status = 400, description = "a bad or missing `path`, or an unknown query field", body = ErrorEnvelope),
        (status = 200, description = "the directory and any missing parents exist", body = MkdirReply),
        (status = 404, description = "no such session", body = ErrorEnvelope),
        (status = 409, description = "something else is at the path (`details.errno: EEXIST`)", body = ErrorEnvelope),
    )
)]
pub(crate) async fn make_dir(
    State(app): State<Arc<App>>,
    Path(id): Path<String>,
    headers: HeaderMap,
    body: Body,
) -> ApiResult<Response> {
    let req: MkdirRequest = typed(&read_json(&headers, body).await?)?;
    check_path("path", &req.path)?;
    match change(&app, &id, FsOp::Mkdir(req.path.clone()), &req.path).await? {
        FsReply::Created(created) => Ok(views::json(
            StatusCode::OK,
            &MkdirReply {
                path: req.path,
                created,
            },
        )),
        other => Err(unexpected(other)),
    }
}

#[utoipa::path(
    post,
    path = "/sessions/{id}/files/move",
    tag = "files",
    params(("id" = String, Path, description = "session id")),
    request_body = MoveRequest,
    responses(
        (status = 400, description = "a body that is not `{from, to}`, or a bad path", body = ErrorEnvelope),
        (status = 204, description = "renamed, by `rename(2)`'s rules: a file replaces a file, a directory only an empty directory"),
        (status = 404, description = "no such session or source (`details.errno`)", body = ErrorEnvelope),
        (status = 409, description = "the target is in the way (`details.errno`)", body = ErrorEnvelope),
    )
)]
pub(crate) async fn move_file(
    State(app): State<Arc<App>>,
    Path(id): Path<String>,
    headers: HeaderMap,
    body: Body,
) -> ApiResult<StatusCode> {
    let req: MoveRequest = typed(&read_json(&headers, body).await?)?;
    check_path("from", &req.from)?;
    check_path("to", &req.to)?;
    let op = FsOp::Rename {
        from: req.from.clone(),
        to: req.to,
    };
    change(&app, &id, op, &req.from).await?;
    Ok(StatusCode::NO_CONTENT)
}

#[utoipa::path(
    delete,
    path = "/sessions/{id}/files",
    tag = "files",
    params(
        ("id" = String, Path, description = "session id"),
        ("path" = String, Query, description = "absolute, or relative to the workspace"),
        ("recursive" = Option<bool>, Query, description = "remove a directory with everything in it (without it: a file, a symlink or an empty directory)"),
    ),
    responses(
        (status = 400, description = "a bad or missing `path`, or an unknown query field", body = ErrorEnvelope),
        (status = 204, description = "removed"),
        (status = 404, description = "no such session or path (`details.errno`)", body = ErrorEnvelope),
        (status = 409, description = "a directory that is not empty, without `recursive` (`details.errno: ENOTEMPTY`)", body = ErrorEnvelope),
    )
)]
pub(crate) async fn remove_file(
    State(app): State<Arc<App>>,
    Path(id): Path<String>,
    Query(q): Query<RemoveQuery>,
) -> ApiResult<StatusCode> {
    check_path("path", &q.path)?;
    let op = FsOp::Remove {
        path: q.path.clone(),
        recursive: q.recursive.unwrap_or(false),
    };
    change(&app, &id, op, &q.path).await?;
    Ok(StatusCode::NO_CONTENT)
}
