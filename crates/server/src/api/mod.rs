//! The HTTP surface: the route tree under [`BASE`], one file per resource. Shared plumbing
//! lives below it, in leaf modules any resource may use: `http` (JSON bodies, replies),
//! `validate` (request fields) and `idempotency`.

use std::sync::Arc;

use axum::Router;
use axum::extract::{DefaultBodyLimit, Request};
use axum::http::StatusCode;
use axum::routing::{get, post};

use crate::App;
use crate::config::MIB;
use crate::error::{ApiError, ErrorCode};
use crate::http::BASE;

pub(crate) mod artifacts;
pub(crate) mod runs;
pub(crate) mod runtimes;
pub(crate) mod sessions;
pub(crate) mod uploads;

pub fn router(app: Arc<App>) -> Router {
    let upload_limit = (app.config.max_upload_mb * MIB) as usize + 1024 * 1024;
    let api = Router::new()
        .route("/runtimes", get(runtimes::runtimes))
        .route("/sessions", post(sessions::create_session))
        .route(
            "/sessions/{id}",
            get(sessions::get_session).delete(sessions::delete_session),
        )
        .route(
            "/sessions/{id}/files",
            post(uploads::upload_files).layer(DefaultBodyLimit::max(upload_limit)),
        )
        .route("/runs", post(runs::create_run))
        .route("/runs/{id}", get(runs::get_run))
        .route("/runs/{id}/stream", get(runs::stream_run))
        .route("/runs/{id}/cancel", post(runs::cancel_run))
        .route("/runs/{id}/artifacts", get(artifacts::list_artifacts))
        .route("/runs/{id}/artifacts/{*path}", get(artifacts::get_artifact))
        .route("/admin/runs", get(crate::admin::list_runs))
        .route("/admin/runs/{id}", get(crate::admin::get_run))
        .route("/admin/idempotency", get(crate::admin::list_idempotency))
        .route("/admin/usage", get(crate::admin::usage))
        .route("/admin/usage/summary", get(crate::admin_ops::usage_summary))
        .route("/admin/metrics", get(crate::admin_ops::metrics_json))
        .route("/admin/audit", get(crate::admin_ops::audit))
        .merge(crate::processes::routes())
        .route_layer(axum::middleware::from_fn_with_state(
            app.clone(),
            crate::auth::authenticate,
        ));
    Router::new()
        .route("/openapi.json", get(crate::openapi::serve))
        .route(&format!("{BASE}/openapi.json"), get(crate::openapi::serve))
        .merge(crate::panel::routes())
        .nest(BASE, api)
        .fallback(not_found)
        .method_not_allowed_fallback(method_not_allowed)
        .layer(axum::middleware::from_fn(crate::error::negotiate))
        .with_state(app)
}

async fn not_found(req: Request) -> ApiError {
    ApiError::new(
        StatusCode::NOT_FOUND,
        ErrorCode::NotFound,
        format!("no route for {} {}", req.method(), req.uri().path()),
    )
}

async fn method_not_allowed(req: Request) -> ApiError {
    ApiError::new(
        StatusCode::METHOD_NOT_ALLOWED,
        ErrorCode::InvalidRequest,
        format!(
            "method {} is not allowed on {}",
            req.method(),
            req.uri().path()
        ),
    )
}
