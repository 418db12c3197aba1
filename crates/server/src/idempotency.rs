//! `Idempotency-Key`: a create request (a session, a run) runs at most once per (endpoint,
//! user, key, body) within the TTL, on every replica sharing the store; a replay gets the
//! first answer, a different body under the same key a 409.
//!
//! A leaf below the handlers: it knows the store and the reply, not what is created.

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use axum::http::{HeaderMap, HeaderName, StatusCode, header};
use axum::response::{IntoResponse, Response};
use serde_json::{Value, json};

use crate::App;
use crate::error::{ApiError, ApiResult, ErrorCode};
use crate::http::json_response;
use crate::store::{self, IdemEntry};
use crate::util::{canonical_json, iso, sha256_hex};

const MAX_IDEMPOTENCY_KEY: usize = 128;

/// How long a request waits for another one holding its `Idempotency-Key` to answer (and
/// how old a claim must be to count as abandoned by a holder that died).
const IDEM_WAIT: Duration = Duration::from_secs(30);

/// What a create request made: its reply, kept for replays, and the id a conflicting
/// replay is told about.
pub(crate) struct Created {
    pub(crate) status: StatusCode,
    pub(crate) body: Value,
    pub(crate) object_id: String,
    pub(crate) headers: Vec<(HeaderName, String)>,
}

/// Runs `create` at most once per (endpoint, user, key, body) within the TTL: a replay gets
/// the first answer, a different body under the same key a 409.
pub(crate) async fn idempotent<F, Fut>(
    app: &Arc<App>,
    user: &str,
    endpoint: &'static str,
    headers: &HeaderMap,
    body: &Value,
    create: F,
) -> Response
where
    F: FnOnce() -> Fut,
    Fut: Future<Output = ApiResult<Created>>,
{
    let key = match key_of(headers) {
        Ok(k) => k,
        Err(e) => return e.into_response(),
    };
    let Some(key) = key else {
        return match create().await {
            Ok(c) => json_response(c.status, &c.body, &c.headers),
            Err(e) => e.into_response(),
        };
    };
    let claim = Claim {
        endpoint,
        user: user.to_string(),
        fingerprint: sha256_hex(canonical_json(body).as_bytes()),
        key,
    };
    // One request per key in this process at a time; the store's claim orders replicas.
    let lock = local_lock(app, &claim);
    let _guard = lock.lock().await;
    let prior = match claim.wait_for_holder(app).await {
        Ok(p) => p,
        Err(e) => return e.into_response(),
    };
    if let Some(p) = prior {
        return claim.replay(&p);
    }
    match create().await {
        Ok(c) => {
            claim.record(app, &c).await;
            json_response(c.status, &c.body, &c.headers)
        }
        Err(e) => {
            claim.release(app).await;
            e.into_response()
        }
    }
}

/// The request's key, if it sent one; a malformed one is refused rather than ignored.
fn key_of(headers: &HeaderMap) -> ApiResult<Option<String>> {
    match headers.get("idempotency-key") {
        None => Ok(None),
        Some(k) => match k.to_str() {
            Ok(k)
                if !k.is_empty()
                    && k.len() <= MAX_IDEMPOTENCY_KEY
                    && k.bytes().all(|b| b.is_ascii_graphic()) =>
            {
                Ok(Some(k.to_string()))
            }
            _ => Err(ApiError::invalid(format!(
                "Idempotency-Key must be 1 to {MAX_IDEMPOTENCY_KEY} visible ASCII characters"
            ))),
        },
    }
}

fn local_lock(app: &App, claim: &Claim) -> Arc<tokio::sync::Mutex<()>> {
    let lock_name = format!("{}\0{}\0{}", claim.endpoint, claim.user, claim.key);
    let mut locks = app.idem_locks.lock();
    locks.retain(|_, w| w.strong_count() > 0);
    match locks.get(&lock_name).and_then(|w| w.upgrade()) {
        Some(l) => l,
        None => {
            let l = Arc::new(tokio::sync::Mutex::new(()));
            locks.insert(lock_name, Arc::downgrade(&l));
            l
        }
    }
}

/// One request's hold on its key.
struct Claim {
    endpoint: &'static str,
    user: String,
    key: String,
    fingerprint: String,
}

impl Claim {
    /// Claims the key in the store before anything is created: with replicas sharing it,
    /// one request wins and the others (here or on another replica) wait for its answer.
    /// `Some` is the entry of an earlier request (finished, or pending with another body).
    async fn wait_for_holder(&self, app: &App) -> ApiResult<Option<IdemEntry>> {
        let ttl_ms = app.config.idempotency_ttl_sec as i64 * 1000;
        let deadline = tokio::time::Instant::now() + IDEM_WAIT;
        loop {
            let now = app.clock.now_ms();
            let entry = IdemEntry {
                endpoint: self.endpoint.into(),
                user_id: self.user.clone(),
                key: self.key.clone(),
                fingerprint: self.fingerprint.clone(),
                object_id: String::new(),
                created_at: now,
                status: 0,
                response: Value::Null,
            };
            let stale = now - IDEM_WAIT.as_millis() as i64;
            let held = store::call(&app.store, move |s| {
                s.idem_claim(&entry, now - ttl_ms, stale)
            })
            .await
            .map_err(|e| ApiError::internal(e.to_string()))?;
            match held {
                Some(p) if p.is_pending() && p.fingerprint == self.fingerprint => {
                    if tokio::time::Instant::now() >= deadline {
                        return Err(ApiError::new(
                            StatusCode::CONFLICT,
                            ErrorCode::IdempotencyConflict,
                            "a request with this Idempotency-Key is still in progress",
                        )
                        .with_details(json!({
                            "key": self.key,
                            "idempotency_key_echo": self.key,
                            "idempotency_status": "in_progress",
                        }))
                        .with_header(header::RETRY_AFTER, "1"));
                    }
                    tokio::time::sleep(Duration::from_millis(25)).await;
                }
                other => return Ok(other),
            }
        }
    }

    /// The first answer again for the same body; a 409 for another one.
    fn replay(&self, p: &IdemEntry) -> Response {
        if p.fingerprint == self.fingerprint {
            let status = StatusCode::from_u16(p.status).unwrap_or(StatusCode::OK);
            return json_response(
                status,
                &p.response,
                &[(
                    HeaderName::from_static("idempotent-replayed"),
                    "true".into(),
                )],
            );
        }
        ApiError::new(
            StatusCode::CONFLICT,
            ErrorCode::IdempotencyConflict,
            "Idempotency-Key replay with different body",
        )
        .with_details(json!({
            "prior_id": p.object_id,
            "key": self.key,
            "prior_created_at": iso(p.created_at),
            "idempotency_key_echo": self.key,
            "idempotency_status": if p.is_pending() { "in_progress" } else { "conflict" },
        }))
        .into_response()
    }

    async fn record(self, app: &App, c: &Created) {
        let entry = IdemEntry {
            endpoint: self.endpoint.into(),
            user_id: self.user,
            key: self.key,
            fingerprint: self.fingerprint,
            object_id: c.object_id.clone(),
            created_at: app.clock.now_ms(),
            status: c.status.as_u16(),
            response: c.body.clone(),
        };
        if let Err(e) = store::call(&app.store, move |s| s.idem_put(&entry)).await {
            tracing::error!(%e, "cannot record an idempotency entry");
        }
    }

    /// Nothing was created: the key is free for a retry.
    async fn release(self, app: &App) {
        let Claim {
            endpoint,
            user,
            key,
            ..
        } = self;
        if let Err(e) =
            store::call(&app.store, move |s| s.idem_release(endpoint, &user, &key)).await
        {
            tracing::error!(%e, "cannot release an idempotency claim");
        }
    }
}
