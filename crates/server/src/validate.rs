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

use wasmsand::egress::{EgressAllowlist, EgressPolicy};

use crate::App;
use crate::config::Config;
use crate::error::{ApiError, ApiResult, ErrorCode};
use crate::runtime::Runtime;

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

/// A request's network: `deny_all`, or `allowlist` with the effective list (the server's
/// `SANDBOX_EGRESS_ALLOWLIST` narrowed by the request's `egress_allowlist`).
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct NetworkChoice {
    pub policy: String,
    pub allowlist: Option<EgressPolicy>,
}

impl NetworkChoice {
    fn deny_all() -> NetworkChoice {
        NetworkChoice {
            policy: "deny_all".into(),
            allowlist: None,
        }
    }
}

/// `network_policy` and `egress_allowlist` of a session or a one-shot run on `runtime`. Without
/// either, `SANDBOX_NETWORK_DEFAULT` decides (`allowlist` on a runtime without egress support
/// is then `deny_all`; asked for explicitly, it is a 400). `c`: the policy that applies (a
/// session's own, or the one in force for a new session or one-shot run).
pub(crate) fn check_network(
    c: &Config,
    runtime: &dyn Runtime,
    policy: Option<&str>,
    list: Option<&EgressAllowlist>,
) -> ApiResult<NetworkChoice> {
    let explicit = policy.is_some() || list.is_some();
    let policy = match (policy, list) {
        (Some(p), _) => p,
        (None, Some(_)) => "allowlist",
        (None, None) => c.network_default.as_str(),
    };
    match policy {
        "deny_all" if list.is_some() => Err(ApiError::invalid(
            "egress_allowlist needs network_policy 'allowlist' (deny_all allows nothing)",
        )
        .with_details(json!({ "network_policy": "deny_all" }))),
        "deny_all" => Ok(NetworkChoice::deny_all()),
        "allowlist" => {
            if !runtime.egress_supported() {
                if !explicit {
                    return Ok(NetworkChoice::deny_all());
                }
                return Err(ApiError::invalid(format!(
                    "runtime {} cannot give its boxes an egress allowlist here (see /runtimes: \
                     egress_allowlist_supported and the runtime's notes); use network_policy \
                     deny_all or runtime wasm",
                    runtime.name()
                ))
                .with_details(json!({
                    "network_policy": "allowlist", "runtime": runtime.name(),
                    "egress_allowlist_supported": false,
                })));
            }
            let server = &c.egress_allowlist;
            if server.is_empty() {
                return Err(ApiError::invalid(
                    "this server allows no egress (SANDBOX_EGRESS_ALLOWLIST is empty), so \
                     network_policy 'allowlist' has nothing to allow",
                )
                .with_details(json!({ "network_policy": "allowlist", "server_allowlist": {} })));
            }
            let effective = match list {
                None => server.clone(),
                Some(l) => {
                    let asked = EgressPolicy::parse(l).map_err(|e| {
                        ApiError::invalid(format!("egress_allowlist.{e}"))
                            .with_details(json!({ "field": format!("egress_allowlist.{}", e.field), "entry": e.entry }))
                    })?;
                    let effective = server.intersect(&asked);
                    if effective.is_empty() {
                        return Err(ApiError::invalid(
                            "nothing of egress_allowlist is allowed by the server's egress \
                             policy (a request can only narrow it)",
                        )
                        .with_details(json!({
                            "dropped": asked.dropped_by(&effective),
                            "server_allowlist": server.to_allowlist(),
                        })));
                    }
                    effective
                }
            };
            Ok(NetworkChoice {
                policy: "allowlist".into(),
                allowlist: Some(effective),
            })
        }
        p => Err(ApiError::invalid(format!(
            "network_policy '{p}' is not one of deny_all, allowlist"
        ))
        .with_details(json!({ "network_policy": p, "supported": ["deny_all", "allowlist"] }))),
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
    runtime: &dyn Runtime,
    r: Option<Resources>,
) -> ApiResult<(f64, u64)> {
    let r = r.unwrap_or_default();
    runtime.normalize(r.cpu, r.memory_mb)
}

/// A timeout in seconds: 0 is refused, a value over the policy's maximum is lowered to it.
pub(crate) fn check_timeout(
    c: &Config,
    name: &str,
    v: Option<u64>,
    default: u64,
) -> ApiResult<u64> {
    match v {
        Some(0) => Err(ApiError::invalid(format!("{name} must be at least 1"))),
        Some(n) => Ok(n.min(c.max_timeout_sec)),
        None => Ok(default),
    }
}
