//! A run's artifacts: `GET /runs/{id}/artifacts` lists them, `GET .../artifacts/{path}`
//! serves one, with one `bytes=` range, or gzip'd on the fly for text.

use std::sync::Arc;

use axum::body::Body;
use axum::extract::{Path, State};
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};

use super::runs::load_run;
use crate::App;
use crate::artifacts;
use crate::error::{ApiError, ApiResult, ErrorCode};
use crate::http::{BASE, RangeReq, parse_range};
use crate::views::{self, ArchiveBytes, ArtifactItem, ArtifactList, ErrorEnvelope};

#[utoipa::path(
    get,
    path = "/runs/{id}/artifacts",
    tag = "artifacts",
    params(("id" = String, Path, description = "run id")),
    responses(
        (status = 200, description = "the artifacts captured after the run (empty until it finished): `items` of `{path, size, download_url}` (`artifacts` and `url` are deprecated aliases)", body = ArtifactList),
        (status = 404, description = "no such run", body = ErrorEnvelope),
    )
)]
pub(crate) async fn list_artifacts(
    State(app): State<Arc<App>>,
    Path(id): Path<String>,
) -> ApiResult<Response> {
    let rec = load_run(&app, &id).await?;
    let items: Vec<ArtifactItem> = if rec.artifacts_expired {
        Vec::new()
    } else {
        rec.artifacts
            .iter()
            .map(|a| {
                let download_url = format!("{BASE}/runs/{id}/artifacts/{}", a.path);
                ArtifactItem {
                    path: a.path.clone(),
                    size: a.size,
                    url: download_url.clone(),
                    download_url,
                    content_type: a.content_type.clone(),
                    kind: a.kind.clone(),
                }
            })
            .collect()
    };
    Ok(views::json(
        StatusCode::OK,
        &ArtifactList {
            artifact_bytes: if rec.artifacts_expired {
                0
            } else {
                rec.resource_usage.artifact_bytes
            },
            run_id: id,
            phase: rec.phase,
            artifacts: items.clone(),
            items,
            expired: rec.artifacts_expired,
            capped: rec.artifacts_capped,
        },
    ))
}

/// Text artifacts up to this size are gzip'd on the fly for clients that accept it.
const MAX_GZIP_BYTES: u64 = 32 * 1024 * 1024;

fn is_text(content_type: &str) -> bool {
    content_type.starts_with("text/")
        || ["application/json", "application/xml", "image/svg+xml"]
            .iter()
            .any(|t| content_type.starts_with(t))
}

fn accepts_gzip(headers: &HeaderMap) -> bool {
    headers
        .get_all(header::ACCEPT_ENCODING)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(','))
        .any(|enc| {
            let mut parts = enc.split(';');
            let name = parts.next().unwrap_or("").trim();
            let refused = parts.any(|p| {
                p.trim()
                    .strip_prefix("q=")
                    .and_then(|q| q.trim().parse::<f32>().ok())
                    == Some(0.0)
            });
            name.eq_ignore_ascii_case("gzip") && !refused
        })
}

async fn gzip_file(path: std::path::PathBuf, content_type: &str) -> ApiResult<Response> {
    let body = tokio::task::spawn_blocking(move || -> std::io::Result<Vec<u8>> {
        use std::io::Write;
        let data = std::fs::read(&path)?;
        let mut enc = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
        enc.write_all(&data)?;
        enc.finish()
    })
    .await
    .map_err(|e| ApiError::internal(e.to_string()))?
    .map_err(|e| ApiError::internal(e.to_string()))?;
    let mut resp = (StatusCode::OK, body).into_response();
    let h = resp.headers_mut();
    if let Ok(v) = HeaderValue::from_str(content_type) {
        h.insert(header::CONTENT_TYPE, v);
    }
    h.insert(header::CONTENT_ENCODING, HeaderValue::from_static("gzip"));
    h.insert(header::VARY, HeaderValue::from_static("accept-encoding"));
    h.insert(header::ACCEPT_RANGES, HeaderValue::from_static("bytes"));
    h.insert(
        header::X_CONTENT_TYPE_OPTIONS,
        HeaderValue::from_static("nosniff"),
    );
    Ok(resp)
}

#[utoipa::path(
    get,
    // `{*path}`: the rest of the URL, slashes included (the document shows it as `{path}`).
    path = "/runs/{id}/artifacts/{*path}",
    tag = "artifacts",
    params(
        ("id" = String, Path, description = "run id"),
        ("path" = String, Path, description = "the artifact's path, relative to the workspace"),
        ("Range" = Option<String>, Header, description = "one `bytes=` range"),
    ),
    responses(
        (status = 200, description = "the artifact (gzip'd for text when `Accept-Encoding` allows; a symlink is an empty `inode/symlink` body)", content_type = "application/octet-stream", body = ArchiveBytes),
        (status = 206, description = "the requested range", content_type = "application/octet-stream", body = ArchiveBytes),
        (status = 400, description = "a path that is absolute or has `..`", body = ErrorEnvelope),
        (status = 404, description = "no such run or artifact", body = ErrorEnvelope),
        (status = 410, description = "the run's artifacts expired", body = ErrorEnvelope),
        (status = 416, description = "a range past the end, or several ranges", body = ErrorEnvelope),
    )
)]
pub(crate) async fn get_artifact(
    State(app): State<Arc<App>>,
    Path((id, path)): Path<(String, String)>,
    headers: HeaderMap,
) -> ApiResult<Response> {
    let Some(rel) = artifacts::normalize(&path) else {
        return Err(ApiError::invalid(format!(
            "artifact path {path:?} is refused: it must be relative, without '..'"
        )));
    };
    let rec = load_run(&app, &id).await?;
    if rec.artifacts_expired {
        return Err(ApiError::new(
            StatusCode::GONE,
            ErrorCode::NotFound,
            format!("the artifacts of run '{id}' have expired"),
        ));
    }
    let entry = rec
        .artifacts
        .iter()
        .find(|a| a.path == rel)
        .ok_or_else(|| ApiError::not_found("artifact", &rel))?
        .clone();
    if entry.kind == "symlink" {
        let mut resp = (StatusCode::OK, Body::empty()).into_response();
        let h = resp.headers_mut();
        h.insert(
            header::CONTENT_TYPE,
            HeaderValue::from_static("inode/symlink"),
        );
        h.insert("x-artifact-kind", HeaderValue::from_static("symlink"));
        return Ok(resp);
    }
    let root = artifacts::artifacts_dir(&app.config.data_dir, &rec.user_id, &rec.id);
    let file_path = root.join(&rel);
    // Never follow a link, wherever it came from.
    let meta = tokio::fs::symlink_metadata(&file_path)
        .await
        .map_err(|_| ApiError::not_found("artifact", &rel))?;
    if !meta.is_file() {
        return Err(ApiError::not_found("artifact", &rel));
    }
    let len = meta.len();
    let range = parse_range(headers.get(header::RANGE), len)?;
    if matches!(range, RangeReq::Full)
        && is_text(&entry.content_type)
        && accepts_gzip(&headers)
        && len <= MAX_GZIP_BYTES
    {
        return gzip_file(file_path, &entry.content_type).await;
    }
    let mut file = tokio::fs::File::open(&file_path)
        .await
        .map_err(|_| ApiError::not_found("artifact", &rel))?;
    use tokio::io::{AsyncReadExt, AsyncSeekExt};
    let (status, start, count) = match range {
        RangeReq::Full => (StatusCode::OK, 0, len),
        RangeReq::Part(s, e) => (StatusCode::PARTIAL_CONTENT, s, e - s + 1),
    };
    if start > 0 {
        file.seek(std::io::SeekFrom::Start(start))
            .await
            .map_err(|e| ApiError::internal(e.to_string()))?;
    }
    let stream = tokio_util::io::ReaderStream::new(file.take(count));
    let mut resp = (status, Body::from_stream(stream)).into_response();
    let h = resp.headers_mut();
    if let Ok(v) = HeaderValue::from_str(&entry.content_type) {
        h.insert(header::CONTENT_TYPE, v);
    }
    h.insert(header::ACCEPT_RANGES, HeaderValue::from_static("bytes"));
    h.insert(header::CONTENT_LENGTH, HeaderValue::from(count));
    h.insert(
        header::X_CONTENT_TYPE_OPTIONS,
        HeaderValue::from_static("nosniff"),
    );
    if status == StatusCode::PARTIAL_CONTENT
        && let Ok(v) =
            HeaderValue::from_str(&format!("bytes {}-{}/{len}", start, start + count - 1))
    {
        h.insert(header::CONTENT_RANGE, v);
    }
    Ok(resp)
}
