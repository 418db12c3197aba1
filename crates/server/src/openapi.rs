//! The OpenAPI 3.1 description of the REST API, served at `/openapi.json` (and under the API
//! base). It is derived at build time by utoipa from the handlers' `#[utoipa::path]`
//! attributes and the request/response types, never written by hand.

use std::sync::{Arc, OnceLock};

use axum::extract::State;
use axum::http::{HeaderValue, header};
use axum::response::{IntoResponse, Response};
use utoipa::OpenApi;

use crate::App;
use crate::api;

#[derive(OpenApi)]
#[openapi(
    paths(
        api::runtimes,
        api::create_session,
        api::get_session,
        api::delete_session,
        api::upload_files,
        api::create_run,
        api::get_run,
        api::stream_run,
        api::cancel_run,
        api::list_artifacts,
        api::get_artifact,
    ),
    tags(
        (name = "runtimes", description = "what this server runs"),
        (name = "sessions", description = "sandboxes kept between runs, and uploads into them"),
        (name = "runs", description = "commands executed in the background, their live log and cancel"),
        (name = "artifacts", description = "files captured after a run"),
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
    nest((path = "/api/v1/sandbox", api = SandboxApi))
)]
pub struct ApiDoc;

/// The document, built once.
pub fn document() -> &'static str {
    static DOC: OnceLock<String> = OnceLock::new();
    DOC.get_or_init(|| {
        let mut doc = ApiDoc::openapi();
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
            "/api/v1/sandbox/runs",
            "/api/v1/sandbox/runs/{id}",
            "/api/v1/sandbox/runs/{id}/stream",
            "/api/v1/sandbox/runs/{id}/cancel",
            "/api/v1/sandbox/runs/{id}/artifacts",
            "/api/v1/sandbox/runs/{id}/artifacts/{path}",
        ] {
            assert!(paths.contains_key(p), "{p} missing from the document");
        }
        let schemas = doc["components"]["schemas"].as_object().unwrap();
        for s in [
            "ErrorEnvelope",
            "RunView",
            "RunRequest",
            "SessionView",
            "ResourceUsage",
        ] {
            assert!(schemas.contains_key(s), "schema {s} missing");
        }
    }
}
