//! The OpenAPI 3.1 description of the REST API, served at `/openapi.json` (and under the API
//! base). It is derived by utoipa from the route list (`crate::api::api_routes`, whose
//! handlers' `#[utoipa::path]` attributes give each route its URL and its description) and
//! the request/response types, never written by hand.

use std::sync::{Arc, OnceLock};

use axum::extract::State;
use axum::http::{HeaderValue, header};
use axum::response::{IntoResponse, Response};
use utoipa::openapi::security::{
    ApiKey, ApiKeyValue, HttpAuthScheme, HttpBuilder, SecurityRequirement, SecurityScheme,
};
use utoipa::openapi::{ContentBuilder, Ref, ResponseBuilder};
use utoipa::{Modify, OpenApi};

use crate::App;
use crate::observe;

/// The tags of the API under the base path; its paths come from the route list
/// (`crate::api::api_routes`), so no route can be served undescribed or described unserved.
#[derive(OpenApi)]
#[openapi(
    tags(
        (name = "runtimes", description = "what this server runs"),
        (name = "sessions", description = "sandboxes kept between runs, and uploads into them"),
        (name = "processes", description = "background processes of a session: start, status, wait, kill, stdin, output and live output"),
        (name = "runs", description = "commands executed in the background, their live log and cancel"),
        (name = "artifacts", description = "files captured after a run"),
        (name = "admin", description = "operator views and maintenance: runs, idempotency, usage, metrics, audit, garbage collection (admins only when authentication is on)"),
    )
)]
struct SandboxApi;

#[derive(OpenApi)]
#[openapi(
    info(
        title = "wasmsand code-interpreter service",
        description = "Sessions, runs, live logs over WebSocket, cancel, uploads and artifacts \
                       (see docs/service.md). Every error carries the `ErrorEnvelope`, or its \
                       RFC 7807 form when `Accept: application/problem+json` is sent."
    ),
    paths(observe::metrics_endpoint),
    tags((name = "observability", description = "Prometheus metrics (admins only when authentication is on)"))
)]
pub struct ApiDoc;

/// The credentials of `crate::auth`: a bearer JWT or API key, or an API key in `X-API-Key`.
/// Without configured keys or JWT secret the server runs without authentication, so no
/// credential is also a valid choice (the empty requirement). With them, every operation
/// can answer 401 with the envelope: added here to each one rather than repeated on every
/// handler.
struct Credentials;

impl Modify for Credentials {
    fn modify(&self, doc: &mut utoipa::openapi::OpenApi) {
        let components = doc.components.get_or_insert_with(Default::default);
        components.add_security_scheme(
            "bearer",
            SecurityScheme::Http(
                HttpBuilder::new()
                    .scheme(HttpAuthScheme::Bearer)
                    .description(Some("a JWT (HS256) or an API key"))
                    .build(),
            ),
        );
        components.add_security_scheme(
            "api_key",
            SecurityScheme::ApiKey(ApiKey::Header(ApiKeyValue::new("X-API-Key"))),
        );
        doc.security = Some(vec![
            SecurityRequirement::new("bearer", Vec::<String>::new()),
            SecurityRequirement::new("api_key", Vec::<String>::new()),
            SecurityRequirement::default(),
        ]);
        let unauthorized = error_response(
            "authentication is on and the credentials are missing, invalid or expired",
        );
        for item in doc.paths.paths.values_mut() {
            for op in [
                &mut item.get,
                &mut item.post,
                &mut item.put,
                &mut item.delete,
                &mut item.patch,
            ]
            .into_iter()
            .flatten()
            {
                op.responses
                    .responses
                    .entry("401".into())
                    .or_insert_with(|| unauthorized.clone().into());
            }
        }
    }
}

/// A response added to operations besides their own: its body is the `ErrorEnvelope`.
fn error_response(description: &str) -> utoipa::openapi::Response {
    ResponseBuilder::new()
        .description(description)
        .content(
            "application/json",
            ContentBuilder::new()
                .schema(Some(Ref::from_schema_name("ErrorEnvelope")))
                .build(),
        )
        .build()
}

/// Adds the 429s every operation can answer besides its own (paths as routed, before the
/// base path is added): `crate::ratelimit`'s, from the classification the middleware uses,
/// and a session's wake refused when the server is full.
fn document_429s(paths: &mut utoipa::openapi::Paths) {
    let limited = error_response(
        "the user's rate limit for this kind of request is used up (`rate_limited`, \
         `Retry-After`)",
    );
    // Any request on a session may have to wake it from the store, and when every live
    // session is busy there is no room for it.
    let full = error_response(
        "the session is asleep and the server holds its maximum of live sessions, none idle \
         (`quota_exceeded`)",
    );
    for (path, item) in paths.paths.iter_mut() {
        for (method, op) in [
            (axum::http::Method::GET, &mut item.get),
            (axum::http::Method::POST, &mut item.post),
            (axum::http::Method::PUT, &mut item.put),
            (axum::http::Method::DELETE, &mut item.delete),
            (axum::http::Method::PATCH, &mut item.patch),
        ] {
            let Some(op) = op else { continue };
            if crate::ratelimit::Class::of(&method, path).is_some() {
                op.responses
                    .responses
                    .entry("429".into())
                    .or_insert_with(|| limited.clone().into());
            }
            if path.starts_with("/sessions/{id}") {
                op.responses
                    .responses
                    .entry("429".into())
                    .or_insert_with(|| full.clone().into());
            }
        }
    }
}

/// The document, built once.
pub fn document() -> &'static str {
    static DOC: OnceLock<String> = OnceLock::new();
    DOC.get_or_init(|| {
        let (_, mut api) = crate::api::api_routes(0).split_for_parts();
        api.merge(SandboxApi::openapi());
        document_429s(&mut api.paths);
        // axum's catch-all `{*path}` is OpenAPI's `{path}`.
        let paths = std::mem::take(&mut api.paths.paths);
        api.paths.paths = paths
            .into_iter()
            .map(|(p, item)| (p.replace("{*", "{"), item))
            .collect();
        let mut doc = ApiDoc::openapi().nest(crate::http::BASE, api);
        // After nesting, so that every operation gets its 401.
        Credentials.modify(&mut doc);
        doc.info.version = crate::RUNTIME_VERSION.to_string();
        doc.to_pretty_json()
            .expect("the OpenAPI document serializes")
    })
}

pub async fn serve(State(_): State<Arc<App>>) -> Response {
    let mut resp = document().into_response();
    resp.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/json"),
    );
    resp
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_route_is_described() {
        let doc: serde_json::Value = serde_json::from_str(document()).unwrap();
        assert_eq!(doc["openapi"], "3.1.0");
        let paths = doc["paths"].as_object().unwrap();
        for p in [
            "/api/v1/sandbox/runtimes",
            "/api/v1/sandbox/sessions",
            "/api/v1/sandbox/sessions/{id}",
            "/api/v1/sandbox/sessions/{id}/files",
            "/api/v1/sandbox/sessions/{id}/processes",
            "/api/v1/sandbox/sessions/{id}/processes/{pid}",
            "/api/v1/sandbox/sessions/{id}/processes/{pid}/wait",
            "/api/v1/sandbox/sessions/{id}/processes/{pid}/kill",
            "/api/v1/sandbox/sessions/{id}/processes/{pid}/stdin",
            "/api/v1/sandbox/sessions/{id}/processes/{pid}/output",
            "/api/v1/sandbox/sessions/{id}/processes/{pid}/stream",
            "/api/v1/sandbox/runs",
            "/api/v1/sandbox/runs/{id}",
            "/api/v1/sandbox/runs/{id}/stream",
            "/api/v1/sandbox/runs/{id}/cancel",
            "/api/v1/sandbox/runs/{id}/artifacts",
            "/api/v1/sandbox/runs/{id}/artifacts/{path}",
            "/api/v1/sandbox/admin/runs",
            "/api/v1/sandbox/admin/runs/{id}",
            "/api/v1/sandbox/admin/idempotency",
            "/api/v1/sandbox/admin/usage",
            "/api/v1/sandbox/admin/usage/summary",
            "/api/v1/sandbox/admin/metrics",
            "/api/v1/sandbox/admin/audit",
            "/api/v1/sandbox/admin/gc",
            "/api/v1/sandbox/admin/policies",
            "/api/v1/sandbox/admin/quotas",
            "/metrics",
        ] {
            assert!(paths.contains_key(p), "{p} missing from the document");
        }
        for (p, item) in paths {
            for (method, op) in item.as_object().unwrap() {
                assert!(
                    op["responses"]["401"].is_object(),
                    "{method} {p} does not document 401"
                );
            }
        }
        let schemas = doc["components"]["schemas"].as_object().unwrap();
        for s in [
            "ErrorEnvelope",
            "RunView",
            "RunRequest",
            "SessionView",
            "StartProcessRequest",
            "ProcessView",
            "ProcessList",
            "WaitReply",
            "OutputReply",
            "ResourceUsage",
            "AdminRunPage",
            "AdminRunDetail",
            "AdminIdemPage",
            "AdminUsage",
            "UsageSummary",
            "AdminMetrics",
            "AuditPage",
            "PolicyView",
            "QuotasView",
        ] {
            assert!(schemas.contains_key(s), "schema {s} missing");
        }
        // The admin bodies are typed, not free-form objects.
        for (p, item) in paths.iter().filter(|(p, _)| p.contains("/admin/")) {
            let ops = item.as_object().unwrap();
            let mut methods = 0;
            for m in ["get", "post", "put", "delete"] {
                let Some(op) = ops.get(m) else { continue };
                methods += 1;
                let ok = &op["responses"]["200"]["content"]["application/json"]["schema"];
                assert!(ok["$ref"].is_string(), "{m} {p}: 200 body is {ok}");
            }
            assert!(methods > 0, "{p} has no operation");
        }
        for (method, p) in [
            ("post", "/api/v1/sandbox/sessions"),
            ("post", "/api/v1/sandbox/sessions/{id}/files"),
            ("put", "/api/v1/sandbox/sessions/{id}/files/content"),
            ("get", "/api/v1/sandbox/sessions/{id}/files/content"),
            ("get", "/api/v1/sandbox/runs/{id}/artifacts/{path}"),
            ("post", "/api/v1/sandbox/admin/gc"),
        ] {
            assert!(
                paths[p][method]["responses"]["429"].is_object(),
                "{method} {p} does not document its rate limit"
            );
        }
        let metrics = &paths["/metrics"]["get"]["responses"]["200"]["content"];
        assert!(metrics["text/plain"].is_object(), "{metrics}");
    }
}
