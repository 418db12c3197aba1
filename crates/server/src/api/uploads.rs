//! `POST /sessions/{id}/files`: files into a session's workspace, as multipart parts or one
//! tar, gzip'd tar or zip archive; staged and checked first (`crate::upload`), then written
//! all or nothing.

use std::sync::Arc;

use axum::extract::{FromRequest, Multipart, Path, Request, State};
use axum::http::{StatusCode, header};
use axum::response::Response;
use serde_json::json;

use crate::App;
use crate::config::MIB;
use crate::error::{ApiError, ApiResult, ErrorCode};
use crate::upload::{self, Caps, Staged};
use crate::views::{self, ArchiveBytes, ErrorEnvelope, UploadForm, UploadReply};

#[utoipa::path(
    post,
    path = "/sessions/{id}/files",
    tag = "sessions",
    params(
        ("id" = String, Path, description = "session id"),
        ("exclude" = Option<Vec<String>>, Query, explode = true, description = "`.gitignore` rules of paths to leave out, after the defaults (a later rule wins; `!rule` keeps what an earlier one left out, e.g. `!*.png`)"),
        ("default_excludes" = Option<bool>, Query, description = "false: drop the default rules (version-control folders, dependency caches, binaries by extension); default true"),
    ),
    request_body(
        description = "files as `files[]` parts (their filenames are the paths), or one tar, gzip'd tar or zip archive",
        content(
            (UploadForm = "multipart/form-data"),
            (ArchiveBytes = "application/x-tar"),
            (ArchiveBytes = "application/gzip"),
            (ArchiveBytes = "application/zip"),
        )
    ),
    responses(
        (status = 201, description = "written into the workspace, all or nothing: `file_count` and `bytes_received` (`files` and `bytes` are deprecated aliases); what the rules left out in `excluded_count` and `excluded`", body = UploadReply),
        (status = 400, description = "malformed body, refused path or member (`details.reason`)", body = ErrorEnvelope),
        (status = 404, description = "no such session", body = ErrorEnvelope),
        (status = 410, description = "the session's sandbox is gone", body = ErrorEnvelope),
        (status = 413, description = "over the size, file count or ratio caps, or the workspace cap", body = ErrorEnvelope),
        (status = 415, description = "an unsupported content type", body = ErrorEnvelope),
    )
)]
pub(crate) async fn upload_files(
    State(app): State<Arc<App>>,
    Path(id): Path<String>,
    req: Request,
) -> ApiResult<Response> {
    // A refused upload may leave part of its body unread: the connection cannot carry
    // another request, so the client is told not to reuse it.
    upload_into(app, id, req)
        .await
        .map_err(|e| e.with_header(header::CONNECTION, "close"))
}

async fn upload_into(app: Arc<App>, id: String, req: Request) -> ApiResult<Response> {
    let session = app
        .session(&id)
        .await?
        .ok_or_else(|| ApiError::not_found("session", &id))?;
    let c = &app.config;
    let caps = Caps {
        max_bytes: c.max_upload_mb * MIB,
        max_files: c.max_upload_files,
        max_depth: c.max_upload_depth,
        max_ratio: c.max_upload_ratio,
    };
    let filter = upload_filter(req.uri().query())?;
    let (staged, kind) = stage(req, caps, filter).await?;
    let (session, _guard) = app.lock_session(session).await?;
    let mut staged = staged;
    let files = staged.files.len();
    let bytes = staged.bytes;
    let paths: Vec<String> = staged.files.iter().map(|(p, _)| p.clone()).collect();
    let excluded = std::mem::take(&mut staged.excluded);
    let excluded_count = staged.excluded_count;
    commit(session.boxed.as_ref(), staged).await?;
    app.checkpoint(&session).await;
    crate::observe::upload(&app, kind, bytes, files as u64);
    Ok(views::json(
        StatusCode::CREATED,
        &UploadReply {
            session_id: session.id.clone(),
            kind: kind.into(),
            file_count: files,
            bytes_received: bytes,
            files,
            bytes,
            paths,
            excluded_count,
            excluded,
        },
    ))
}

/// Reads an upload's body by its content type into what would be written, checked against
/// `caps` and filtered, with the kind it was (`multipart`, `tar`, `tar.gz`, `zip`). Nothing is
/// written yet: a refused upload leaves the workspace as it was.
pub(crate) async fn stage(
    req: Request,
    caps: Caps,
    filter: upload::Filter,
) -> ApiResult<(Staged, &'static str)> {
    let ct = req
        .headers()
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .unwrap_or("")
        .to_ascii_lowercase();
    let mime = ct.split(';').next().unwrap_or("").trim().to_string();
    Ok(match mime.as_str() {
        "multipart/form-data" => {
            let mut mp = Multipart::from_request(req, &())
                .await
                .map_err(|e| upload::refused("malformed", format!("bad multipart body: {e}")))?;
            let mut staged = Staged::default();
            loop {
                let field = match mp.next_field().await {
                    Ok(Some(f)) => f,
                    Ok(None) => break,
                    Err(e) => return Err(multipart_error(e, caps.max_bytes)),
                };
                let name = field.name().unwrap_or("").to_string();
                if name != "files[]" && name != "files" {
                    return Err(upload::refused(
                        "unexpected_field",
                        format!("unexpected form field {name:?}; send files as files[]"),
                    ));
                }
                let Some(filename) = field.file_name().map(str::to_string) else {
                    return Err(upload::refused(
                        "invalid_path",
                        "a files[] part has no filename",
                    ));
                };
                let data = field
                    .bytes()
                    .await
                    .map_err(|e| multipart_error(e, caps.max_bytes))?;
                upload::add_part(&mut staged, &caps, &filter, &filename, data.to_vec())?;
            }
            (staged, "multipart")
        }
        "application/x-tar"
        | "application/tar"
        | "application/gzip"
        | "application/x-gzip"
        | "application/x-gtar"
        | "application/x-compressed-tar"
        | "application/tar+gzip"
        | "application/zip"
        | "application/x-zip-compressed" => {
            let data = axum::body::to_bytes(req.into_body(), caps.max_bytes as usize)
                .await
                .map_err(|_| {
                    ApiError::too_large("the upload", caps.max_bytes)
                        .with_details(json!({ "reason": "too_large", "limit": caps.max_bytes }))
                })?;
            let zip = mime.contains("zip") && !mime.contains("gzip");
            let gzip = !zip
                && (mime != "application/x-tar" && mime != "application/tar"
                    || data.starts_with(&[0x1f, 0x8b]));
            let kind = if zip {
                "zip"
            } else if gzip {
                "tar.gz"
            } else {
                "tar"
            };
            let staged = tokio::task::spawn_blocking(move || {
                if zip {
                    upload::expand_zip(&data, &caps, &filter)
                } else {
                    upload::expand_tar(&data, gzip, &caps, &filter)
                }
            })
            .await
            .map_err(|e| ApiError::internal(e.to_string()))??;
            (staged, kind)
        }
        other => {
            return Err(ApiError::new(
                StatusCode::UNSUPPORTED_MEDIA_TYPE,
                ErrorCode::InvalidRequest,
                format!(
                    "unsupported upload type {other:?}: use multipart/form-data (files[]), application/x-tar, application/gzip or application/zip"
                ),
            ));
        }
    })
}

/// The request's filter: `exclude` (repeatable, `.gitignore` rules after the defaults) and
/// `default_excludes=false` to drop the defaults (`upload::DEFAULT_EXCLUDES`).
pub(crate) fn upload_filter(query: Option<&str>) -> ApiResult<upload::Filter> {
    let mut rules = Vec::new();
    let mut defaults = true;
    for (k, v) in url::form_urlencoded::parse(query.unwrap_or("").as_bytes()) {
        match k.as_ref() {
            "exclude" => rules.push(v.into_owned()),
            "default_excludes" => {
                defaults = match v.as_ref() {
                    "true" | "1" => true,
                    "false" | "0" => false,
                    other => {
                        return Err(upload::refused(
                            "invalid_exclude",
                            format!("default_excludes must be true or false, not {other:?}"),
                        ));
                    }
                }
            }
            _ => {}
        }
    }
    upload::Filter::new(defaults, &rules)
}

fn multipart_error(e: axum::extract::multipart::MultipartError, limit: u64) -> ApiError {
    if e.status() == StatusCode::PAYLOAD_TOO_LARGE {
        ApiError::too_large("the upload", limit)
            .with_details(json!({ "reason": "too_large", "limit": limit }))
    } else {
        upload::refused(
            "malformed",
            format!("bad multipart body: {}", e.body_text()),
        )
    }
}

/// Writes a staged upload into the workspace, all or nothing.
pub(crate) async fn commit(
    boxed: &dyn crate::runtime::SandboxBox,
    staged: Staged,
) -> ApiResult<()> {
    use crate::runtime::FilesError;
    boxed
        .write_files(staged.dirs, staged.files)
        .await
        .map_err(|e| match e {
            FilesError::WorkspaceFull(m) => {
                ApiError::new(StatusCode::PAYLOAD_TOO_LARGE, ErrorCode::QuotaExceeded, m)
                    .with_details(json!({ "reason": "workspace_cap" }))
            }
            FilesError::Conflict(m) => upload::refused("conflict", m),
            FilesError::Gone(m) => ApiError::new(StatusCode::GONE, ErrorCode::NotFound, m),
        })
}
