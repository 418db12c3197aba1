//! The web panel at `/`: three static files built into the binary (no CDN, no build step),
//! talking to the REST API and the run stream of the same server.

use std::sync::Arc;

use axum::Router;
use axum::http::{HeaderValue, header};
use axum::response::{IntoResponse, Response};
use axum::routing::get;

use crate::App;

const INDEX: &str = include_str!("panel/index.html");
const SCRIPT: &str = include_str!("panel/panel.js");
const STYLE: &str = include_str!("panel/panel.css");

/// Only this origin's files, its API and its WebSocket: a page that cannot load or send
/// anything elsewhere.
const CSP: &str = "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; \
                   connect-src 'self' ws: wss:; base-uri 'none'; form-action 'none'; frame-ancestors 'none'";

fn asset(body: &'static str, content_type: &'static str) -> Response {
    let mut resp = body.into_response();
    let h = resp.headers_mut();
    h.insert(header::CONTENT_TYPE, HeaderValue::from_static(content_type));
    h.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-cache"));
    h.insert(
        header::X_CONTENT_TYPE_OPTIONS,
        HeaderValue::from_static("nosniff"),
    );
    h.insert(
        header::CONTENT_SECURITY_POLICY,
        HeaderValue::from_static(CSP),
    );
    resp
}

pub fn routes() -> Router<Arc<App>> {
    Router::new()
        .route(
            "/",
            get(|| async { asset(INDEX, "text/html; charset=utf-8") }),
        )
        // The deep link to a run's full log (docs/service.md, "Web panel"): the same page,
        // which opens the run.
        .route(
            "/webui/sandbox/runs/{id}",
            get(|| async { asset(INDEX, "text/html; charset=utf-8") }),
        )
        .route(
            "/panel/panel.js",
            get(|| async { asset(SCRIPT, "text/javascript; charset=utf-8") }),
        )
        .route(
            "/panel/panel.css",
            get(|| async { asset(STYLE, "text/css; charset=utf-8") }),
        )
}
