//! The error envelope `{"error": {"code", "message", "details"}}`, and its RFC 7807 form for
//! clients that send `Accept: application/problem+json`.

use std::sync::Arc;

use axum::extract::Request;
use axum::http::{HeaderMap, HeaderName, HeaderValue, StatusCode, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use serde_json::{Value, json};

/// Declares every error code once: its wire name, the HTTP statuses it may travel with and
/// when it is sent. The enum, the OpenAPI schema and the table in docs/service.md all come
/// from this list (`error_table_in_the_docs_is_the_registry` checks the docs).
macro_rules! error_codes {
    ($($variant:ident = $wire:literal, [$($status:literal),+], $when:literal;)+) => {
        /// The machine-readable `error.code` of every error answer.
        #[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, utoipa::ToSchema)]
        // snake_case of each variant is its wire name (a test checks); a per-variant
        // `rename = $wire` would be lost on utoipa, which does not read a literal passed
        // through a macro.
        #[serde(rename_all = "snake_case")]
        pub enum ErrorCode {
            $(#[doc = $when] $variant,)+
        }

        impl ErrorCode {
            /// Every code, in the order of the docs' table.
            pub const ALL: &'static [ErrorCode] = &[$(ErrorCode::$variant),+];

            /// The wire name.
            pub fn as_str(self) -> &'static str {
                match self {
                    $(ErrorCode::$variant => $wire,)+
                }
            }

            /// The HTTP statuses this code is sent with; the first is the usual one.
            pub fn statuses(self) -> &'static [u16] {
                match self {
                    $(ErrorCode::$variant => &[$($status),+],)+
                }
            }

            /// When the server sends it, as the docs say.
            pub fn when(self) -> &'static str {
                match self {
                    $(ErrorCode::$variant => $when,)+
                }
            }
        }
    };
}

error_codes! {
    InvalidRequest = "invalid_request", [400, 405, 413, 415, 416, 426],
        "malformed JSON, wrong types, unknown fields, bad values (a run's `command` over the sandbox shell's 64 KiB: `details.reason: command_too_large`); bodies over their cap (JSON bodies 2 MiB); not JSON; bad ranges; a path or query the framework cannot decode; a WebSocket route asked without the upgrade";
    InvalidSpecVersion = "invalid_spec_version", [400],
        "a `spec_version` this server does not speak: `details.supported`, `details.provided`";
    Unauthorized = "unauthorized", [401],
        "with authentication on: no credentials, or credentials that are not valid (`details.reason`: `missing_credentials`, `unsupported_scheme`, `invalid_api_key`, `invalid_credentials`, `invalid_token`, `token_expired`; `WWW-Authenticate: Bearer`)";
    Forbidden = "forbidden", [403],
        "execution is off (`SANDBOX_ENABLE_EXECUTION=false`), or a key without the admin role asks for an admin route; an interactive run the policy refuses (`details.reason`: `interactive_disabled`, `interactive_shell`); the sandbox refuses a file operation (`details.reason: filesystem`, `errno`: `EACCES`, `EPERM`, `EROFS`; `path`)";
    NotFound = "not_found", [404, 410],
        "unknown session, run, process, artifact or route; a file operation's path that does not exist (`details.reason: filesystem`, `errno: ENOENT`, `path`); 410 for an expired artifact or a session that expired meanwhile";
    SessionLost = "session_lost", [410],
        "the session cannot be brought back: on replicas, the replica that held a session without a checkpoint (a docker session) is gone and the sandbox with it; or its checkpoint in the store is corrupt (`details.reason: corrupt_checkpoint`) or asks for a network policy the server no longer allows (`policy_changed`)";
    IdempotencyConflict = "idempotency_conflict", [409],
        "an `Idempotency-Key` reused with a different body: `details.prior_id`, `key`, `prior_created_at`, and for audit `idempotency_key_echo` (the key) and `idempotency_status` (`conflict`, or `in_progress` while the key's first request is still being answered)";
    Conflict = "conflict", [409],
        "a background process's stdin is closed, or it has ended (`details.reason`); a session and its fork changed some path differently, so a merge applied nothing (`details.reason: merge_conflict`, `details.conflicts`: `path`, `ours`, `theirs`); a file operation meets the wrong kind of entry (`details.reason: filesystem`, `errno`: `EEXIST`, `EISDIR`, `ENOTDIR`, `ENOTEMPTY`, ...; `path`)";
    RateLimited = "rate_limited", [429],
        "the run queue is full (`Retry-After`)";
    QuotaExceeded = "quota_exceeded", [429, 413],
        "too many sessions, runs or running background processes for a user or session (`details.quota`, `limit`, `used`, `Retry-After`); an upload or a file write past the workspace cap (413)";
    RuntimeUnavailable = "runtime_unavailable", [503],
        "a runtime that cannot serve now (not built here, turned off, its engine down, its capacity reached): `details.runtime`, `available: false`, `reason`, `suggested`; on replicas, the replica owning the object does not answer or answers something that is not this API (`details.replica`, `Retry-After: 1`)";
    ImagePullFailed = "image_pull_failed", [503],
        "a docker session's image is not built on this host: `details.image`, `build_command` (`sandboxd images build <name>`); a run's record carries the same as its `reason_code`";
    GitCloneFailed = "git_clone_failed", [502, 504],
        "a `git` input could not be fetched: the remote failed or could not be resolved (502), or the clone passed `SANDBOX_GIT_TIMEOUT_SEC` (504); `details.reason`";
    Unavailable = "unavailable", [503],
        "the server is shutting down";
    InternalError = "internal_error", [500],
        "a fault of the server (its store failed, a response could not be encoded); the message says what";
}

impl std::fmt::Display for ErrorCode {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The docs' table of error codes, rendered from the registry.
#[cfg(test)]
fn markdown_table() -> String {
    let mut out = String::from("| code | HTTP | when |\n|---|---|---|\n");
    for code in ErrorCode::ALL {
        let statuses: Vec<String> = code.statuses().iter().map(u16::to_string).collect();
        out.push_str(&format!(
            "| `{}` | {} | {} |\n",
            code.as_str(),
            statuses.join(", "),
            code.when()
        ));
    }
    out
}

#[derive(Debug, Clone)]
pub struct ApiError {
    pub status: StatusCode,
    pub code: ErrorCode,
    pub message: String,
    pub details: Value,
    pub headers: Vec<(HeaderName, String)>,
}

pub type ApiResult<T> = Result<T, ApiError>;

impl ApiError {
    pub fn new(status: StatusCode, code: ErrorCode, message: impl Into<String>) -> Self {
        debug_assert!(
            code.statuses().contains(&status.as_u16()),
            "{code} is not registered for HTTP {status}"
        );
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
        ApiError::new(StatusCode::BAD_REQUEST, ErrorCode::InvalidRequest, message)
    }

    pub fn not_found(what: &str, id: &str) -> Self {
        ApiError::new(
            StatusCode::NOT_FOUND,
            ErrorCode::NotFound,
            format!("{what} '{id}' not found"),
        )
        .with_details(json!({ "resource": what, "id": id }))
    }

    pub fn too_large(what: &str, limit: u64) -> Self {
        ApiError::new(
            StatusCode::PAYLOAD_TOO_LARGE,
            ErrorCode::InvalidRequest,
            format!("{what} exceeds the limit of {limit} bytes"),
        )
        .with_details(json!({ "limit_bytes": limit }))
    }

    pub fn internal(message: impl Into<String>) -> Self {
        ApiError::new(
            StatusCode::INTERNAL_SERVER_ERROR,
            ErrorCode::InternalError,
            message,
        )
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
        StatusCode::NOT_FOUND => ErrorCode::NotFound,
        s if s.is_server_error() => ErrorCode::InternalError,
        _ => ErrorCode::InvalidRequest,
    };
    // Built without `new`'s check: the status is whatever the framework chose.
    let mut out = ApiError {
        status,
        code,
        message: text.trim().to_string(),
        details: json!({}),
        headers: Vec::new(),
    }
    .into_response();
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
    fn error_table_in_the_docs_is_the_registry() {
        let page = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../docs/service.md");
        crate::doc_block::check(&page, "error-codes", &markdown_table());
    }

    #[test]
    fn wire_names_are_unique_and_serde_agrees() {
        let mut seen = std::collections::HashSet::new();
        for code in ErrorCode::ALL {
            assert!(seen.insert(code.as_str()), "{code} twice");
            assert_eq!(json!(code), json!(code.as_str()));
            assert!(!code.statuses().is_empty() && !code.when().is_empty());
        }
        let doc: Value = serde_json::from_str(crate::openapi::document()).unwrap();
        let wire: Vec<&str> = ErrorCode::ALL.iter().map(|c| c.as_str()).collect();
        assert_eq!(
            doc["components"]["schemas"]["ErrorCode"]["enum"],
            json!(wire)
        );
    }

    #[test]
    fn problem_keeps_details_as_extensions() {
        let e = ApiError::new(
            StatusCode::BAD_REQUEST,
            ErrorCode::InvalidSpecVersion,
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
