//! Request and response plumbing shared by every resource's handlers (and by the auth layer
//! and replica forwarding, which need the API's base path): reading a JSON body with clear
//! 4xx answers, typed views of it, the `Host` a reply's URLs are built from, and JSON
//! replies with extra headers; single `Range` requests.
//!
//! A leaf: it names nothing but the error type and the root's `App`, so any module may use
//! it without pulling the route tree in.

use axum::body::Body;
use axum::http::{HeaderMap, HeaderName, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use serde_json::{Value, json};

use crate::error::{ApiError, ApiResult, ErrorCode};

/// Where every REST route of the service is mounted.
pub const BASE: &str = "/api/v1/sandbox";
/// Largest JSON body: inline files are at most 1 MB decoded, about 1.4 MB as base64.
const MAX_JSON_BYTES: usize = 2 * 1024 * 1024;

/// Reads a JSON object body: content type, size cap and syntax checked, with clear 4xx.
pub(crate) async fn read_json(headers: &HeaderMap, body: Body) -> ApiResult<Value> {
    if let Some(ct) = headers.get(header::CONTENT_TYPE) {
        let ct = ct.to_str().unwrap_or("").to_ascii_lowercase();
        let mime = ct.split(';').next().unwrap_or("").trim();
        if mime != "application/json" && !mime.ends_with("+json") {
            return Err(ApiError::new(
                StatusCode::UNSUPPORTED_MEDIA_TYPE,
                ErrorCode::InvalidRequest,
                format!("expected an application/json body, got {mime:?}"),
            ));
        }
    }
    let bytes = axum::body::to_bytes(body, MAX_JSON_BYTES)
        .await
        .map_err(|_| {
            // The rest of the body is unread: the connection cannot carry another request.
            ApiError::too_large("the request body", MAX_JSON_BYTES as u64)
                .with_header(header::CONNECTION, "close")
        })?;
    if bytes.is_empty() {
        return Err(ApiError::invalid(
            "the request body is empty; a JSON object is required",
        ));
    }
    let v: Value = serde_json::from_slice(&bytes)
        .map_err(|e| ApiError::invalid(format!("malformed JSON: {e}")))?;
    if !v.is_object() {
        return Err(ApiError::invalid("the request body must be a JSON object"));
    }
    Ok(v)
}

/// The body read by [`read_json`] as a request type; the raw value is kept by callers
/// because idempotency fingerprints it.
pub(crate) fn typed<T: serde::de::DeserializeOwned>(v: &Value) -> ApiResult<T> {
    serde_json::from_value(v.clone())
        .map_err(|e| ApiError::invalid(format!("invalid request: {e}")))
}

/// The request's `Host`, when it is one a reply's absolute URLs can safely carry.
pub(crate) fn host_of(headers: &HeaderMap) -> Option<String> {
    headers
        .get(header::HOST)
        .and_then(|h| h.to_str().ok())
        .filter(|h| h.bytes().all(|b| b.is_ascii_graphic()))
        .map(str::to_string)
}

/// A JSON reply with extra headers; a header value that is not valid is left out rather
/// than failing a reply whose work is already done.
pub(crate) fn json_response(
    status: StatusCode,
    body: &Value,
    extra: &[(HeaderName, String)],
) -> Response {
    let mut resp = (status, axum::Json(body.clone())).into_response();
    for (k, v) in extra {
        if let Ok(v) = HeaderValue::from_str(v) {
            resp.headers_mut().insert(k.clone(), v);
        }
    }
    resp
}

/// What a request that would create something gets while the server drains.
pub(crate) fn shutting_down() -> ApiError {
    ApiError::new(
        StatusCode::SERVICE_UNAVAILABLE,
        ErrorCode::Unavailable,
        "the server is shutting down",
    )
    .with_header(header::RETRY_AFTER, "5")
}

/// Largest page a list answers.
const MAX_LIMIT: usize = 200;

/// The paging of a list: `limit` (1 to 200, default 50) and `offset` (default 0).
pub(crate) fn limit_offset(
    q: &std::collections::HashMap<String, String>,
) -> ApiResult<(usize, usize)> {
    let num = |name: &str, default: usize| -> ApiResult<usize> {
        match q.get(name) {
            None => Ok(default),
            Some(v) => v
                .parse::<usize>()
                .map_err(|_| ApiError::invalid(format!("{name} must be a non-negative integer"))),
        }
    };
    let limit = num("limit", 50)?;
    if limit == 0 || limit > MAX_LIMIT {
        return Err(ApiError::invalid(format!(
            "limit must be in [1, {MAX_LIMIT}]"
        )));
    }
    Ok((limit, num("offset", 0)?))
}

pub(crate) enum RangeReq {
    Full,
    Part(u64, u64),
}

/// One `bytes=` range against a length. Several ranges are refused (416); a header that is
/// not a bytes range is ignored, as RFC 9110 allows.
pub(crate) fn parse_range(h: Option<&HeaderValue>, len: u64) -> Result<RangeReq, ApiError> {
    let unsatisfiable = |why: &str| {
        ApiError::new(
            StatusCode::RANGE_NOT_SATISFIABLE,
            ErrorCode::InvalidRequest,
            why.to_string(),
        )
        .with_header(header::CONTENT_RANGE, format!("bytes */{len}"))
        .with_details(json!({ "size": len }))
    };
    let Some(h) = h else {
        return Ok(RangeReq::Full);
    };
    let Ok(s) = h.to_str() else {
        return Ok(RangeReq::Full);
    };
    let Some(spec) = s.trim().strip_prefix("bytes=") else {
        return Ok(RangeReq::Full);
    };
    if spec.contains(',') {
        return Err(unsatisfiable(
            "multiple ranges are not supported; ask for one range",
        ));
    }
    let Some((a, b)) = spec.trim().split_once('-') else {
        return Ok(RangeReq::Full);
    };
    let (a, b) = (a.trim(), b.trim());
    let (start, end) = if a.is_empty() {
        let Ok(n) = b.parse::<u64>() else {
            return Ok(RangeReq::Full);
        };
        if n == 0 {
            return Err(unsatisfiable("empty suffix range"));
        }
        (len.saturating_sub(n), len.saturating_sub(1))
    } else {
        let Ok(start) = a.parse::<u64>() else {
            return Ok(RangeReq::Full);
        };
        let end = if b.is_empty() {
            len.saturating_sub(1)
        } else {
            match b.parse::<u64>() {
                Ok(e) if e >= start => e.min(len.saturating_sub(1)),
                _ => return Ok(RangeReq::Full),
            }
        };
        (start, end)
    };
    if len == 0 || start >= len {
        return Err(unsatisfiable("the range starts past the end"));
    }
    Ok(RangeReq::Part(start, end))
}
