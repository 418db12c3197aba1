//! The error envelope `{"error": {"code", "message", "details"}}`, and its RFC 7807 form for
//! clients that send `Accept: application/problem+json`.

use std::sync::Arc;

use axum::extract::Request;
use axum::http::{HeaderMap, HeaderName, HeaderValue, StatusCode, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use serde_json::{Value, json};

#[derive(Debug, Clone)]
pub struct ApiError {
    pub status: StatusCode,
    pub code: &'static str,
    pub message: String,
    pub details: Value,
    pub headers: Vec<(HeaderName, String)>,
}

pub type ApiResult<T> = Result<T, ApiError>;

impl ApiError {
    pub fn new(status: StatusCode, code: &'static str, message: impl Into<String>) -> Self {
        ApiError {
            status,
            code,
            message: message.into(),
            details: json!({}),
            headers: Vec::new(),
        }
    }

    pub fn with_details(mut self, details: Value) -> Self {
        self.details = details;
        self
    }

    pub fn with_header(mut self, name: HeaderName, value: impl Into<String>) -> Self {
        self.headers.push((name, value.into()));
        self
    }

    pub fn invalid(message: impl Into<String>) -> Self {
        ApiError::new(StatusCode::BAD_REQUEST, "invalid_request", message)
    }

    pub fn not_found(what: &str, id: &str) -> Self {
        ApiError::new(
            StatusCode::NOT_FOUND,
            "not_found",
            format!("{what} '{id}' not found"),
        )
        .with_details(json!({ "resource": what, "id": id }))
    }

    pub fn too_large(what: &str, limit: u64) -> Self {
        ApiError::new(
            StatusCode::PAYLOAD_TOO_LARGE,
            "invalid_request",
            format!("{what} exceeds the limit of {limit} bytes"),
        )
        .with_details(json!({ "limit_bytes": limit }))
    }

    pub fn internal(message: impl Into<String>) -> Self {
        ApiError::new(StatusCode::INTERNAL_SERVER_ERROR, "internal_error", message)
    }

    fn envelope(&self) -> Value {
        json!({ "error": { "code": self.code, "message": self.message, "details": self.details } })
    }

    fn problem(&self) -> Value {
        let mut p = json!({
            "type": self.code,
            "title": self.message,
            "status": self.status.as_u16(),
            "detail": self.message,
            "code": self.code,
            "details": self.details,
        });
        // RFC 7807 extension members: each detail also at the top level, unless it would
        // shadow a standard member.
        if let (Some(obj), Some(details)) = (p.as_object_mut(), self.details.as_object()) {
            for (k, v) in details {
                obj.entry(k.clone()).or_insert_with(|| v.clone());
            }
        }
        p
    }
}

/// Marks an error response so the content-negotiation layer can re-render it.
#[derive(Clone)]
struct ErrorMark(Arc<ApiError>);

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let mut resp = (self.status, axum::Json(self.envelope())).into_response();
        for (name, value) in &self.headers {
            if let Ok(v) = HeaderValue::from_str(value) {
                resp.headers_mut().insert(name.clone(), v);
            }
        }
        resp.extensions_mut().insert(ErrorMark(Arc::new(self)));
        resp
    }
}

/// Marks an error answer relayed from the replica that owns the object: already in the
/// envelope, or the problem form, the client asked for (the owner saw the same `Accept`).
#[derive(Clone, Copy)]
pub struct Relayed;

/// Whether `body` is an error in the envelope or in its problem form.
pub fn is_envelope(body: &[u8]) -> bool {
    let Ok(v) = serde_json::from_slice::<Value>(body) else {
        return false;
    };
    v.pointer("/error/code").is_some_and(Value::is_string)
        || (v.get("code").is_some_and(Value::is_string)
            && v.get("status").is_some_and(Value::is_u64))
}

fn wants_problem(headers: &HeaderMap) -> bool {
    headers
        .get_all(header::ACCEPT)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .any(|v| v.to_ascii_lowercase().contains("application/problem+json"))
}

/// An error response made by the framework (a path or query that does not decode, ...)
/// rather than by a handler: given the envelope too.
async fn wrap_framework_error(resp: Response) -> Response {
    let status = resp.status();
    let (parts, body) = resp.into_parts();
    let text = axum::body::to_bytes(body, 64 * 1024)
        .await
        .ok()
        .and_then(|b| String::from_utf8(b.to_vec()).ok())
        .filter(|t| !t.trim().is_empty())
        .unwrap_or_else(|| status.canonical_reason().unwrap_or("error").to_string());
    let code = match status {
        StatusCode::NOT_FOUND => "not_found",
        s if s.is_server_error() => "internal_error",
        _ => "invalid_request",
    };
    let mut out = ApiError::new(status, code, text.trim().to_string()).into_response();
    for (name, value) in parts.headers.iter() {
        if name != header::CONTENT_TYPE && name != header::CONTENT_LENGTH {
            out.headers_mut().insert(name.clone(), value.clone());
        }
    }
    out
}

/// Middleware: every error in the envelope, and as `application/problem+json` when the
/// client asks for it.
pub async fn negotiate(req: Request, next: Next) -> Response {
    let problem = wants_problem(req.headers());
    let mut resp = next.run(req).await;
    if resp.extensions().get::<Relayed>().is_some() {
        return resp;
    }
    if (resp.status().is_client_error() || resp.status().is_server_error())
        && resp.extensions().get::<ErrorMark>().is_none()
    {
        resp = wrap_framework_error(resp).await;
    }
    if !problem {
        return resp;
    }
    let Some(ErrorMark(err)) = resp.extensions().get::<ErrorMark>().cloned() else {
        return resp;
    };
    let (mut parts, _) = resp.into_parts();
    let body = serde_json::to_vec(&err.problem()).unwrap_or_default();
    parts.headers.insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/problem+json"),
    );
    parts.headers.remove(header::CONTENT_LENGTH);
    Response::from_parts(parts, axum::body::Body::from(body))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn problem_keeps_details_as_extensions() {
        let e = ApiError::new(
            StatusCode::BAD_REQUEST,
            "invalid_spec_version",
            "Unsupported",
        )
        .with_details(json!({"supported": ["1.0"], "provided": "0.9", "status": "x"}));
        let p = e.problem();
        assert_eq!(p["type"], "invalid_spec_version");
        assert_eq!(p["status"], 400);
        assert_eq!(p["supported"], json!(["1.0"]));
        assert_eq!(p["details"]["status"], "x");
        assert_eq!(e.envelope()["error"]["details"]["provided"], "0.9");
    }
}
