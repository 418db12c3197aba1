//! Checks of the request fields that sessions, runs and processes share (spec version,
//! runtime, image, network policy, environment, resources, timeouts), each refusing with
//! the error code and `details` clients key on.
//!
//! A leaf below the handlers: it reads the configuration through `App` and names no route.

use std::collections::BTreeMap;

use axum::http::StatusCode;
use serde::Deserialize;
use serde_json::{Value, json};
use utoipa::ToSchema;

use crate::App;
use crate::error::{ApiError, ApiResult, ErrorCode};

/// The `spec_version` of a body, one of the server's `supported_spec_versions`.
pub(crate) fn check_spec_version(app: &App, v: &Value) -> ApiResult<String> {
    let supported = &app.config.supported_spec_versions;
    match v.get("spec_version") {
        None | Some(Value::Null) => Err(ApiError::invalid("spec_version is required")
            .with_details(json!({ "supported": supported }))),
        Some(Value::String(s)) if supported.contains(s) => Ok(s.clone()),
        Some(Value::String(s)) => Err(ApiError::new(
            StatusCode::BAD_REQUEST,
            ErrorCode::InvalidSpecVersion,
            format!("Unsupported spec_version '{s}'"),
        )
        .with_details(json!({ "supported": supported, "provided": s }))),
        Some(other) => Err(ApiError::new(
            StatusCode::BAD_REQUEST,
            ErrorCode::InvalidSpecVersion,
            format!("spec_version must be a string, got {other}"),
        )
        .with_details(json!({ "supported": supported, "provided": other.to_string() }))),
    }
}

pub(crate) fn check_network(policy: Option<&str>) -> ApiResult<String> {
    match policy.unwrap_or("deny_all") {
        "deny_all" => Ok("deny_all".into()),
        p => Err(ApiError::invalid(format!(
            "network_policy '{p}' is not available; only deny_all exists"
        ))
        .with_details(json!({ "network_policy": p, "supported": ["deny_all"] }))),
    }
}

fn valid_env_name(name: &str) -> bool {
    let mut c = name.chars();
    matches!(c.next(), Some(f) if f == '_' || f.is_ascii_alphabetic())
        && c.all(|x| x == '_' || x.is_ascii_alphanumeric())
}

/// Names a shell can export, and values without NUL (which no C string can carry).
pub(crate) fn check_env(env: &BTreeMap<String, String>) -> ApiResult<()> {
    for (k, v) in env {
        if !valid_env_name(k) {
            return Err(ApiError::invalid(format!(
                "invalid environment variable name {k:?}"
            )));
        }
        if v.contains('\0') {
            return Err(ApiError::invalid(format!(
                "environment variable {k} contains NUL"
            )));
        }
    }
    Ok(())
}

#[derive(Deserialize, Default, Clone, Copy, ToSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct Resources {
    cpu: Option<f64>,
    pub(crate) memory_mb: Option<u64>,
}

/// `cpu` and `memory_mb` as the runtime applies them (wasm: one CPU, the per-program linear
/// memory cap; docker: the container's CPUs and memory), within its maxima.
pub(crate) fn normalize_resources(
    runtime: &dyn crate::runtime::Runtime,
    r: Option<Resources>,
) -> ApiResult<(f64, u64)> {
    let r = r.unwrap_or_default();
    runtime.normalize(r.cpu, r.memory_mb)
}

/// A timeout in seconds: 0 is refused, a value over the server's maximum is lowered to it.
pub(crate) fn check_timeout(app: &App, name: &str, v: Option<u64>, default: u64) -> ApiResult<u64> {
    match v {
        Some(0) => Err(ApiError::invalid(format!("{name} must be at least 1"))),
        Some(n) => Ok(n.min(app.config.max_timeout_sec)),
        None => Ok(default),
    }
}
