//! The policy and quotas an operator changes without a restart (seed 003, "Admin (future)":
//! `GET`/`PUT /policies` and `/quotas`, under `/admin` like the other operator routes):
//! `crate::policy::LIVE_POLICY_KEYS` and `LIVE_QUOTA_KEYS`, read and validated exactly as the
//! configuration reads them at start-up. A change applies to what comes next: new sessions
//! and one-shot runs get the new policy (and its `policy_hash`) while a session keeps the one
//! it was made with; the next admission counts against the new quotas. Each change is audited
//! (`sandbox.admin.policy_updated`, `sandbox.admin.quotas_updated`).
//!
//! Changes live in this process until it stops: the configuration stays the source of truth
//! at start-up, and each replica is changed on its own (docs/service.md, "Admin").

use std::collections::BTreeMap;
use std::sync::Arc;

use axum::body::Body;
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode};
use axum::response::Response;
use serde::Serialize;
use serde_json::{Map, Value, json};
use utoipa::ToSchema;

use crate::App;
use crate::error::{ApiError, ApiResult};
use crate::policy::{LIVE_POLICY_KEYS, LIVE_QUOTA_KEYS, Policy};
use crate::views::{self, ErrorEnvelope};

/// The policy new sessions and one-shot runs get now.
#[derive(Serialize, ToSchema)]
pub struct PolicyView {
    /// The `policy_hash` new sessions and runs report (sessions made before keep theirs).
    pub policy_hash: String,
    /// Every key `PUT /admin/policies` may change, with its value in force (as in the
    /// policy hash's input: numbers and booleans as such, the egress allowlist as an object).
    #[schema(value_type = Object)]
    pub policy: Map<String, Value>,
}

/// The per-user and server quotas the next admission counts against.
#[derive(Serialize, ToSchema)]
pub struct QuotasView {
    /// Every key `PUT /admin/quotas` may change, with its value in force (0: no limit, except
    /// `SANDBOX_MAX_SESSIONS`).
    #[schema(value_type = Object)]
    pub quotas: Map<String, Value>,
}

/// The keys to change and their new values, as a configuration would set them (a string,
/// or the JSON number, boolean or object it stands for).
#[derive(ToSchema)]
#[schema(value_type = Object)]
pub struct Changes(#[allow(dead_code)] Map<String, Value>);

fn policy_view(p: &Policy) -> PolicyView {
    PolicyView {
        policy_hash: p.hash.clone(),
        policy: p.values(),
    }
}

/// What a change did, key by key: `{key: {before, after}}` for the keys whose value moved.
fn diff(before: &Map<String, Value>, after: &Map<String, Value>) -> BTreeMap<String, Value> {
    after
        .iter()
        .filter(|(k, v)| before.get(*k) != Some(v))
        .map(|(k, v)| (k.clone(), json!({ "before": before.get(k), "after": v })))
        .collect()
}

/// Reads a PUT's body and applies it to the policy in force through `values`, which names the
/// keys that may change; a value that does not read or validate is a 400 and changes nothing.
async fn change(
    app: &App,
    headers: &HeaderMap,
    body: Body,
    keys: &[&str],
    values: fn(&Policy) -> Map<String, Value>,
) -> ApiResult<(Arc<Policy>, Arc<Policy>, BTreeMap<String, Value>)> {
    let v = crate::http::read_json(headers, body).await?;
    let Value::Object(changes) = v else {
        unreachable!("read_json answers objects only")
    };
    if changes.is_empty() {
        return Err(ApiError::invalid(format!(
            "name at least one key to change: {}",
            keys.join(", ")
        ))
        .with_details(json!({ "keys": keys })));
    }
    let (old, new) = app
        .update_policy(|p| p.with(&changes, keys))
        .map_err(|e| ApiError::invalid(e).with_details(json!({ "keys": keys })))?;
    let changed = diff(&values(&old), &values(&new));
    Ok((old, new, changed))
}

#[utoipa::path(
    get,
    path = "/admin/policies",
    tag = "admin",
    responses(
        (status = 200, description = "the policy new sessions and runs get, and its hash", body = PolicyView),
        (status = 403, description = "not an admin", body = ErrorEnvelope),
    )
)]
pub async fn get_policies(State(app): State<Arc<App>>) -> Response {
    views::json(StatusCode::OK, &policy_view(&app.policy()))
}

/// `PUT /admin/policies`: changes some of the policy keys for the sessions and runs made from
/// now on, all or none.
#[utoipa::path(
    put,
    path = "/admin/policies",
    tag = "admin",
    request_body(content = Changes, description = "keys of `GET /admin/policies` with new values, e.g. `{\"SANDBOX_ENABLE_EXECUTION\": false}`"),
    responses(
        (status = 200, description = "the policy now in force, and its hash", body = PolicyView),
        (status = 400, description = "an empty, malformed or non-object body, a key that cannot change here, or a value the configuration would refuse (nothing changed)", body = ErrorEnvelope),
        (status = 403, description = "not an admin", body = ErrorEnvelope),
        (status = 413, description = "the body is too large", body = ErrorEnvelope),
        (status = 415, description = "the body is not JSON", body = ErrorEnvelope),
    )
)]
pub async fn put_policies(
    State(app): State<Arc<App>>,
    principal: crate::auth::Principal,
    headers: HeaderMap,
    body: Body,
) -> ApiResult<Response> {
    let (old, new, changed) =
        change(&app, &headers, body, LIVE_POLICY_KEYS, Policy::values).await?;
    let mut event = crate::retention::admin_event(
        &app,
        &headers,
        json!({
            "changed": changed,
            "policy_hash_before": old.hash,
            "policy_hash_after": new.hash,
        }),
    );
    event["policy_hash"] = json!(new.hash);
    app.audit.emit(
        "sandbox.admin.policy_updated",
        &principal.user_id,
        None,
        None,
        event,
    );
    tracing::info!(user_id = %principal.user_id, policy_hash = %new.hash, "policy changed");
    Ok(views::json(StatusCode::OK, &policy_view(&new)))
}

#[utoipa::path(
    get,
    path = "/admin/quotas",
    tag = "admin",
    responses(
        (status = 200, description = "the quotas in force", body = QuotasView),
        (status = 403, description = "not an admin", body = ErrorEnvelope),
    )
)]
pub async fn get_quotas(State(app): State<Arc<App>>) -> Response {
    views::json(
        StatusCode::OK,
        &QuotasView {
            quotas: app.policy().quota_values(),
        },
    )
}

/// `PUT /admin/quotas`: changes some of the quotas for the next admission, all or none.
#[utoipa::path(
    put,
    path = "/admin/quotas",
    tag = "admin",
    request_body(content = Changes, description = "keys of `GET /admin/quotas` with new values, e.g. `{\"SANDBOX_USER_MAX_CONCURRENT_RUNS\": 2}`"),
    responses(
        (status = 200, description = "the quotas now in force", body = QuotasView),
        (status = 400, description = "an empty, malformed or non-object body, a key that cannot change here, or a value the configuration would refuse (nothing changed)", body = ErrorEnvelope),
        (status = 403, description = "not an admin", body = ErrorEnvelope),
        (status = 413, description = "the body is too large", body = ErrorEnvelope),
        (status = 415, description = "the body is not JSON", body = ErrorEnvelope),
    )
)]
pub async fn put_quotas(
    State(app): State<Arc<App>>,
    principal: crate::auth::Principal,
    headers: HeaderMap,
    body: Body,
) -> ApiResult<Response> {
    let (_, new, changed) =
        change(&app, &headers, body, LIVE_QUOTA_KEYS, Policy::quota_values).await?;
    let event = crate::retention::admin_event(&app, &headers, json!({ "changed": changed }));
    app.audit.emit(
        "sandbox.admin.quotas_updated",
        &principal.user_id,
        None,
        None,
        event,
    );
    tracing::info!(user_id = %principal.user_id, "quotas changed");
    Ok(views::json(
        StatusCode::OK,
        &QuotasView {
            quotas: new.quota_values(),
        },
    ))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::Config;

    fn changes(v: Value) -> Map<String, Value> {
        v.as_object().unwrap().clone()
    }

    #[test]
    fn a_change_is_read_as_the_configuration_reads_it() {
        let p = Policy::new(Config::default());
        let q = p
            .with(
                &changes(json!({
                    "SANDBOX_MAX_TIMEOUT_SEC": "30",
                    "SANDBOX_ENABLE_EXECUTION": false,
                    "SANDBOX_EGRESS_ALLOWLIST": { "hosts": ["example.com"] },
                    "SANDBOX_NETWORK_DEFAULT": "allowlist",
                })),
                LIVE_POLICY_KEYS,
            )
            .unwrap();
        assert_eq!(q.config.max_timeout_sec, 30);
        assert!(!q.config.enable_execution);
        assert_eq!(q.config.network_default, "allowlist");
        assert_ne!(p.hash, q.hash);
        let d = diff(&p.values(), &q.values());
        assert_eq!(d.len(), 4, "{d:?}");
        assert_eq!(
            d["SANDBOX_MAX_TIMEOUT_SEC"],
            json!({ "before": 3600, "after": 30 })
        );
        // The same values again: the same hash.
        let again = Policy::new(Config::default())
            .with(&q.values(), LIVE_POLICY_KEYS)
            .unwrap();
        assert_eq!(again.hash, q.hash);
    }

    #[test]
    fn a_bad_change_names_the_key_and_is_refused_whole() {
        let p = Policy::new(Config::default());
        for (c, says) in [
            (
                json!({ "SANDBOX_MAX_TIMEOUT_SEC": "soon" }),
                "SANDBOX_MAX_TIMEOUT_SEC: not a valid number",
            ),
            (
                json!({ "SANDBOX_ENABLE_EXECUTION": "perhaps" }),
                "SANDBOX_ENABLE_EXECUTION: not a boolean",
            ),
            (
                json!({ "SANDBOX_NETWORK_DEFAULT": "allowlist" }),
                "needs SANDBOX_EGRESS_ALLOWLIST",
            ),
            (
                json!({ "SANDBOX_MAX_CPU": 2 }),
                "SANDBOX_MAX_CPU cannot be changed here",
            ),
            (json!({ "NOPE": 1 }), "NOPE is not a key"),
            (
                json!({ "SANDBOX_MAX_LOG_BYTES": null }),
                "a value is required",
            ),
            (
                json!({ "SANDBOX_USER_RUNS_PER_MINUTE": 5 }),
                "cannot be changed here",
            ),
        ] {
            let e = p.with(&changes(c.clone()), LIVE_POLICY_KEYS).unwrap_err();
            assert!(e.contains(says), "{c}: {e}");
        }
        let e = p
            .with(
                &changes(json!({ "SANDBOX_USER_RUNS_PER_MINUTE": -1 })),
                LIVE_QUOTA_KEYS,
            )
            .unwrap_err();
        assert!(e.contains("not a valid number"), "{e}");
    }

    #[test]
    fn quotas_do_not_move_the_hash() {
        let p = Policy::new(Config::default());
        let q = p
            .with(
                &changes(
                    json!({ "SANDBOX_USER_MAX_CONCURRENT_RUNS": 1, "SANDBOX_MAX_SESSIONS": "7" }),
                ),
                LIVE_QUOTA_KEYS,
            )
            .unwrap();
        assert_eq!(q.config.user_max_concurrent_runs, 1);
        assert_eq!(q.config.max_sessions, 7);
        assert_eq!(p.hash, q.hash);
        assert_eq!(q.quota_values()["SANDBOX_MAX_SESSIONS"], 7);
    }
}
