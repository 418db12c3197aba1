//! The HTTP surface: the route tree under [`BASE`], one file per resource. Shared plumbing
//! lives below it, in leaf modules any resource may use: `http` (JSON bodies, replies),
//! `validate` (request fields) and `idempotency`.

use std::sync::Arc;

use axum::Router;
use axum::extract::{DefaultBodyLimit, Request};
use axum::http::StatusCode;
use axum::routing::get;
use utoipa_axum::router::{OpenApiRouter, UtoipaMethodRouterExt};
use utoipa_axum::routes;

use crate::App;
use crate::config::MIB;
use crate::error::{ApiError, ErrorCode};
use crate::http::BASE;

pub(crate) mod artifacts;
pub(crate) mod files;
pub(crate) mod forks;
pub(crate) mod runs;
pub(crate) mod runtimes;
pub(crate) mod sessions;
pub(crate) mod uploads;

/// The API under [`BASE`]: every route with its OpenAPI path, from this one list (a handler's
/// `#[utoipa::path]` gives both its URL and its description). `upload_limit` is the body cap
/// of uploads.
pub(crate) fn api_routes(upload_limit: usize) -> OpenApiRouter<Arc<App>> {
    OpenApiRouter::new()
        .routes(routes!(runtimes::runtimes))
        .routes(routes!(sessions::create_session, sessions::list_sessions))
        .routes(routes!(sessions::get_session, sessions::delete_session))
        .routes(
            routes!(uploads::upload_files, files::list_files, files::remove_file)
                .layer(DefaultBodyLimit::max(upload_limit)),
        )
        .routes(routes!(files::stat_file))
        .routes(
            routes!(files::read_file, files::write_file).layer(DefaultBodyLimit::max(upload_limit)),
        )
        .routes(routes!(files::make_dir))
        .routes(routes!(files::move_file))
        .routes(routes!(forks::fork_session))
        .routes(routes!(forks::create_snapshot, forks::list_snapshots))
        .routes(routes!(forks::restore_snapshot))
        .routes(routes!(forks::delete_snapshot))
        .routes(routes!(forks::merge_session))
        .routes(routes!(forks::session_changes))
        .routes(routes!(runs::create_run))
        .routes(routes!(runs::get_run))
        .routes(routes!(runs::stream_run))
        .routes(routes!(runs::cancel_run))
        .routes(routes!(artifacts::list_artifacts))
        .routes(routes!(artifacts::get_artifact))
        .routes(routes!(crate::admin::list_sessions))
        .routes(routes!(crate::admin::list_runs))
        .routes(routes!(crate::admin::get_run))
        .routes(routes!(
            crate::admin::list_idempotency,
            crate::retention::prune_idempotency
        ))
        .routes(routes!(crate::retention::gc))
        .routes(routes!(crate::admin::usage))
        .routes(routes!(crate::admin_ops::usage_summary))
        .routes(routes!(crate::admin_ops::metrics_json))
        .routes(routes!(crate::admin_ops::audit))
        .routes(routes!(
            crate::admin_policy::get_policies,
            crate::admin_policy::put_policies
        ))
        .routes(routes!(
            crate::admin_policy::get_quotas,
            crate::admin_policy::put_quotas
        ))
        .merge(crate::processes::routes())
}

pub fn router(app: Arc<App>) -> Router {
    let upload_limit = (app.config.max_upload_mb * MIB) as usize + 1024 * 1024;
    let (api, _) = api_routes(upload_limit).split_for_parts();
    // Layered inside authentication: the limits are per authenticated user.
    let api = api
        .route_layer(axum::middleware::from_fn_with_state(
            app.clone(),
            crate::ratelimit::limit,
        ))
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
