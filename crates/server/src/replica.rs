//! Replicas sharing one PostgreSQL store behave as one service.
//!
//! A session's sandbox lives in the memory of the process that created it, and a run's
//! live state (its frames, its cancel) in the process executing it. So ownership is
//! recorded in the store (`sandbox_sessions.owner`, `sandbox_runs.owner`) next to every
//! replica's advertised address and heartbeat, and a replica that gets a request for a
//! session or run it does not hold forwards it to the owner, WebSocket streams included.
//! A forwarded request carries [`FORWARDED`] and is never forwarded again.
//!
//! When an owner stops heartbeating for `replica_ttl_sec`, the others fail its unfinished
//! runs (`replica_lost`) and answer 410 `session_lost` for its sessions.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use axum::body::Body;
use axum::extract::ws::{self, WebSocket, WebSocketUpgrade};
use axum::extract::{FromRequestParts, Request, State};
use axum::http::{HeaderMap, HeaderName, HeaderValue, Method, StatusCode, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use futures::{SinkExt, StreamExt};
use serde_json::{Value, json};
use tokio_tungstenite::tungstenite;

use crate::error::{ApiError, ErrorCode};
use crate::http::BASE;
use crate::store::{self, StoreError};
use crate::{App, StartError};

/// Marks a request one replica forwarded to another (its value: the sender's id).
pub const FORWARDED: &str = "x-sandbox-forwarded-by";
/// Reason code of the runs of a replica that stopped heartbeating.
pub const REASON_REPLICA_LOST: &str = "replica_lost";
/// How long a dead replica's sessions keep answering 410 before they are forgotten.
const FORGET_AFTER_MS: i64 = 24 * 3600 * 1000;
/// Largest `POST /runs` body looked into for its `session_id` (the API's own cap).
const MAX_RUN_BODY: usize = 2 * 1024 * 1024;

/// The forwarding side of a replica: its address and an HTTP client for its peers.
pub struct Replica {
    client: reqwest::Client,
    address: parking_lot::Mutex<Option<String>>,
}

impl Default for Replica {
    fn default() -> Self {
        Replica {
            client: reqwest::Client::builder()
                .connect_timeout(Duration::from_secs(5))
                .build()
                .expect("the HTTP client builds"),
            address: parking_lot::Mutex::new(None),
        }
    }
}

fn store_err(e: StoreError) -> ApiError {
    ApiError::internal(e.to_string())
}

pub(crate) fn alive_since(app: &App) -> i64 {
    app.clock.now_ms() - app.config.replica_ttl_sec as i64 * 1000
}

/// Registers this replica in a shared store and keeps its heartbeat (and the reaping of dead
/// peers) going until shutdown. Nothing to do with a store of one process.
pub(crate) async fn start(app: &Arc<App>, local: SocketAddr) -> Result<(), StartError> {
    if app.store.cluster().is_none() {
        return Ok(());
    }
    let address = match &app.config.advertise_url {
        Some(u) => u.clone(),
        None if local.ip().is_unspecified() => {
            return Err(StartError::Config(format!(
                "listening on {local} with a shared store: set SANDBOX_ADVERTISE_URL to the URL \
                 other replicas reach this one at"
            )));
        }
        None => format!("http://{local}"),
    };
    *app.replica.address.lock() = Some(address.clone());
    beat(app, &address).await?;
    let weak = Arc::downgrade(app);
    let every = Duration::from_secs(app.config.replica_heartbeat_sec);
    tokio::spawn(async move {
        let mut tick = tokio::time::interval_at(tokio::time::Instant::now() + every, every);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            tick.tick().await;
            let Some(app) = weak.upgrade() else { break };
            if app.is_shutting_down() {
                break;
            }
            if let Err(e) = beat(&app, &address).await {
                tracing::error!(%e, "replica heartbeat failed");
            }
        }
    });
    Ok(())
}

async fn beat(app: &Arc<App>, address: &str) -> Result<(), StoreError> {
    let address = address.to_string();
    let alive = alive_since(app);
    let now = app.clock.now_ms();
    let failed = store::call(&app.store, move |s| {
        let c = s.cluster().expect("a shared store");
        c.heartbeat(&address, now)?;
        c.reap_dead(
            alive,
            now - FORGET_AFTER_MS,
            REASON_REPLICA_LOST,
            "the replica executing this run stopped (no heartbeat within replica_ttl_sec)",
            now,
        )
    })
    .await?;
    if failed > 0 {
        tracing::warn!(failed, "runs of a dead replica marked failed");
    }
    Ok(())
}

/// A clean stop: the queue places of this replica go and its sessions are lost at once.
pub(crate) async fn leave(app: &Arc<App>) {
    if app.store.cluster().is_none() || app.replica.address.lock().is_none() {
        return;
    }
    if let Err(e) = store::call(&app.store, |s| s.cluster().expect("shared").leave()).await {
        tracing::error!(%e, "cannot unregister the replica");
    }
}

/// Takes a place in the queue all replicas share (`queue_max_length` in all): `Some` with
/// how many wait, `None` when full. A store of one process has no shared queue. Called on
/// the admission path, which is synchronous: the store answers on threads of its own.
pub(crate) fn queue_enter(app: &App, run_id: &str) -> Result<Option<usize>, StoreError> {
    match app.store.cluster() {
        None => Ok(Some(0)),
        Some(c) => c.queue_enter(run_id, app.config.queue_max_length, app.clock.now_ms()),
    }
}

pub(crate) async fn queue_leave(app: &Arc<App>, run_id: &str) {
    if app.store.cluster().is_none() {
        return;
    }
    let id = run_id.to_string();
    if let Err(e) = store::call(&app.store, move |s| {
        s.cluster().expect("shared").queue_leave(&id)
    })
    .await
    {
        tracing::error!(%e, run_id, "cannot leave the shared queue");
    }
}

enum Route {
    Local,
    To(String),
    Lost(String),
}

/// Where a request for another replica's object goes, and the user the object belongs to.
struct Remote {
    route: Route,
    user_id: String,
}

/// Where a session's requests go: here (`None`: held here, or unknown to the store), its
/// live owner, or nowhere (owner dead).
async fn session_route(app: &Arc<App>, id: &str) -> Result<Option<Remote>, ApiError> {
    if app.session_live(id).is_some() {
        return Ok(None);
    }
    let sid = id.to_string();
    let alive = alive_since(app);
    let found = store::call(&app.store, move |s| {
        let c = s.cluster().expect("shared");
        let Some((owner, user_id)) = c.session_holder(&sid)? else {
            return Ok(None);
        };
        if owner == c.replica_id() {
            return Ok(None);
        }
        let live = c.live_replica(&owner, alive)?;
        // Its holder died, but it was checkpointed: this replica wakes it.
        if live.is_none() && s.session_saved(&sid)?.is_some() {
            return Ok(None);
        }
        Ok(Some((owner, user_id, live)))
    })
    .await
    .map_err(store_err)?;
    Ok(found.map(|(owner, user_id, live)| Remote {
        route: match live {
            Some(r) => Route::To(r.address),
            None => Route::Lost(owner),
        },
        user_id,
    }))
}

/// Where a run's requests go: its live owner when another replica executes it, else here
/// (`None`: the store has its record; a dead owner's runs were failed by the reaper).
async fn run_route(app: &Arc<App>, id: &str) -> Result<Option<Remote>, ApiError> {
    if app.live_run(id).is_some() {
        return Ok(None);
    }
    let rid = id.to_string();
    let alive = alive_since(app);
    let found = store::call(&app.store, move |s| {
        let c = s.cluster().expect("shared");
        match c.run_owner(&rid)? {
            Some(owner) if owner != c.replica_id() => {
                let Some(live) = c.live_replica(&owner, alive)? else {
                    return Ok(None);
                };
                Ok(s.get_run(&rid)?.map(|r| (live.address, r.user_id)))
            }
            _ => Ok(None),
        }
    })
    .await
    .map_err(store_err)?;
    Ok(found.map(|(address, user_id)| Remote {
        route: Route::To(address),
        user_id,
    }))
}

/// Checks the caller before anything about another replica's object is revealed (where it
/// lives, that its owner died): no or bad credentials are 401 and another user's object is
/// 404, as on the owner itself. A signed stream URL is checked against its run alone.
fn guard(
    app: &App,
    req: &Request,
    kind: &str,
    id: &str,
    remote: &Remote,
) -> Result<(), Box<Response>> {
    let deny = |e: ApiError| Box::new(e.into_response());
    if kind == "run"
        && app.config.ws_signed_urls
        && req.uri().path().ends_with("/stream")
        && let Some((token, exp)) = signed_params(req)
    {
        return app
            .auth
            .verify_ws(id, &token, &exp, app.clock.now_ms())
            .map_err(deny);
    }
    // A session's process stream: its signed URL names the session and the pid.
    if kind == "session"
        && app.config.ws_signed_urls
        && let Some((token, exp)) = signed_params(req)
        && let Some(pid) = req
            .uri()
            .path()
            .strip_suffix("/stream")
            .and_then(|p| p.rsplit_once("/processes/"))
            .map(|(_, pid)| pid)
    {
        let scope = crate::process_table::stream_scope(id, pid);
        return app
            .auth
            .verify_ws(&scope, &token, &exp, app.clock.now_ms())
            .map_err(deny);
    }
    let p = app.principal_of(req.headers()).map_err(deny)?;
    if p.user_id != remote.user_id {
        return Err(deny(ApiError::not_found(kind, id)));
    }
    Ok(())
}

fn signed_params(req: &Request) -> Option<(String, String)> {
    let q =
        axum::extract::Query::<std::collections::HashMap<String, String>>::try_from_uri(req.uri())
            .ok()?;
    Some((q.0.get("token")?.clone(), q.0.get("exp")?.clone()))
}

fn session_lost(id: &str, owner: &str) -> Response {
    ApiError::new(
        StatusCode::GONE,
        ErrorCode::SessionLost,
        format!(
            "session '{id}' was held by a replica that stopped; its workspace is gone. Create \
             a new session"
        ),
    )
    .with_details(json!({ "session_id": id, "replica_id": owner }))
    .into_response()
}

/// The middleware in front of the API on replicas of a shared store.
pub(crate) async fn forward(State(app): State<Arc<App>>, req: Request, next: Next) -> Response {
    if app.store.cluster().is_none() {
        return next.run(req).await;
    }
    // A forwarded request is served here whatever the store says (no second hop), but what
    // it creates or deletes is still recorded.
    let forwarded = req.headers().contains_key(FORWARDED);
    let path = req.uri().path().to_string();
    let Some(rest) = path.strip_prefix(BASE) else {
        return next.run(req).await;
    };
    let segs: Vec<&str> = rest.trim_start_matches('/').split('/').collect();
    let method = req.method().clone();
    let route = match (&method, segs.as_slice()) {
        (&Method::POST, ["sessions"]) => {
            let resp = next.run(req).await;
            return record_session(&app, resp).await;
        }
        (_, ["sessions", id, ..]) => {
            let id = id.to_string();
            let remote = if forwarded {
                Ok(None)
            } else {
                session_route(&app, &id).await
            };
            match remote {
                Ok(None) if method == Method::DELETE && segs.len() == 2 => {
                    let resp = next.run(req).await;
                    if resp.status() == StatusCode::NO_CONTENT {
                        let _ = store::call(&app.store, move |s| {
                            s.cluster().expect("shared").session_delete(&id)
                        })
                        .await;
                    }
                    return resp;
                }
                Ok(None) => Route::Local,
                Ok(Some(remote)) => {
                    if let Err(resp) = guard(&app, &req, "session", &id, &remote) {
                        return *resp;
                    }
                    match remote.route {
                        Route::Lost(owner) => return session_lost(&id, &owner),
                        r => r,
                    }
                }
                Err(e) => return e.into_response(),
            }
        }
        _ if forwarded => Route::Local,
        (&Method::POST, ["runs"]) => {
            let (parts, body) = req.into_parts();
            let bytes = match axum::body::to_bytes(body, MAX_RUN_BODY).await {
                Ok(b) => b,
                Err(_) => {
                    return ApiError::too_large("the request body", MAX_RUN_BODY as u64)
                        .with_header(header::CONNECTION, "close")
                        .into_response();
                }
            };
            let session = serde_json::from_slice::<Value>(&bytes).ok().and_then(|v| {
                v.get("session_id")
                    .and_then(Value::as_str)
                    .map(str::to_string)
            });
            let req = Request::from_parts(parts, Body::from(bytes));
            let route = match session {
                None => Route::Local,
                Some(id) => match session_route(&app, &id).await {
                    Ok(None) => Route::Local,
                    Ok(Some(remote)) => {
                        if let Err(resp) = guard(&app, &req, "session", &id, &remote) {
                            return *resp;
                        }
                        match remote.route {
                            Route::Lost(owner) => return session_lost(&id, &owner),
                            r => r,
                        }
                    }
                    Err(e) => return e.into_response(),
                },
            };
            return match route {
                Route::To(addr) => proxy(&app, &addr, req).await,
                _ => next.run(req).await,
            };
        }
        (_, ["runs", id, ..]) => match run_route(&app, id).await {
            Ok(None) => Route::Local,
            Ok(Some(remote)) => {
                if let Err(resp) = guard(&app, &req, "run", id, &remote) {
                    return *resp;
                }
                remote.route
            }
            Err(e) => return e.into_response(),
        },
        _ => Route::Local,
    };
    match route {
        Route::To(addr) => proxy(&app, &addr, req).await,
        _ => next.run(req).await,
    }
}

/// Records this replica as the holder of a session it made other than by `POST /sessions`
/// (a fork, an MCP session), so that requests through other replicas find it.
pub(crate) async fn record_session_here(app: &Arc<App>, id: &str, user: &str) {
    if app.store.cluster().is_none() {
        return;
    }
    let (id, user, now) = (id.to_string(), user.to_string(), app.clock.now_ms());
    if let Err(e) = store::call(&app.store, move |s| {
        s.cluster().expect("shared").session_put(&id, &user, now)
    })
    .await
    {
        tracing::error!(%e, "cannot record a session's holder");
    }
}

/// Records this replica as the owner of a session it just created (before the client gets
/// the id, so a request through another replica can already find it).
async fn record_session(app: &Arc<App>, resp: Response) -> Response {
    if resp.status() != StatusCode::CREATED || resp.headers().contains_key("idempotent-replayed") {
        return resp;
    }
    let (parts, body) = resp.into_parts();
    let bytes = match axum::body::to_bytes(body, 1024 * 1024).await {
        Ok(b) => b,
        Err(e) => return ApiError::internal(e.to_string()).into_response(),
    };
    let id = serde_json::from_slice::<Value>(&bytes).ok().and_then(|v| {
        v.get("session_id")
            .or_else(|| v.get("id"))
            .and_then(Value::as_str)
            .map(str::to_string)
    });
    if let Some(id) = id {
        // The session's user as the handler recorded it (the authenticated caller).
        let user = app
            .session_live(&id)
            .map(|s| s.owner.clone())
            .unwrap_or_else(|| app.config.user_id.clone());
        let now = app.clock.now_ms();
        if let Err(e) = store::call(&app.store, move |s| {
            s.cluster().expect("shared").session_put(&id, &user, now)
        })
        .await
        {
            return store_err(e).into_response();
        }
    }
    Response::from_parts(parts, Body::from(bytes))
}

fn hop_by_hop(name: &HeaderName) -> bool {
    matches!(
        name.as_str(),
        "connection"
            | "keep-alive"
            | "proxy-connection"
            | "transfer-encoding"
            | "te"
            | "trailer"
            | "upgrade"
            | "proxy-authorization"
            | "proxy-authenticate"
    )
}

/// The owner of the object did not answer, or answered something that is not the API's:
/// the object's runtime is out of reach from here for now.
fn unreachable(addr: &str, e: impl std::fmt::Display) -> Response {
    ApiError::new(
        StatusCode::SERVICE_UNAVAILABLE,
        ErrorCode::RuntimeUnavailable,
        format!("the replica that owns this object ({addr}) did not answer: {e}"),
    )
    .with_details(json!({
        "runtime": "wasm",
        "available": false,
        "replica": addr,
        "suggested": [],
    }))
    .with_header(header::RETRY_AFTER, "1")
    .into_response()
}

/// An error answer of the owner, relayed as it is when it is the API's envelope; anything
/// else (a proxy's HTML page, a truncated body) becomes `runtime_unavailable`.
fn relay_error(addr: &str, status: StatusCode, headers: &HeaderMap, body: &[u8]) -> Response {
    if !crate::error::is_envelope(body) {
        return unreachable(
            addr,
            format!("its answer ({status}) is not an error of this API"),
        );
    }
    let mut resp = Response::new(Body::from(body.to_vec()));
    *resp.status_mut() = status;
    for (k, v) in headers {
        if !hop_by_hop(k) && k != header::CONTENT_LENGTH {
            resp.headers_mut().append(k, v.clone());
        }
    }
    resp.extensions_mut().insert(crate::error::Relayed);
    resp
}

/// Sends the request to the replica at `addr` and streams its answer back.
async fn proxy(app: &Arc<App>, addr: &str, req: Request) -> Response {
    let is_ws = req
        .headers()
        .get(header::UPGRADE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.eq_ignore_ascii_case("websocket"));
    let me = app
        .store
        .cluster()
        .map(|c| c.replica_id().to_string())
        .unwrap_or_default();
    let pq = req
        .uri()
        .path_and_query()
        .map(|p| p.as_str().to_string())
        .unwrap_or_else(|| "/".into());
    if is_ws {
        return proxy_ws(addr, &pq, &me, req).await;
    }
    let (parts, body) = req.into_parts();
    // The owner builds the answer's stream URLs; it cannot see the client's peer address,
    // so this replica, which can, says what it made of the forwarding headers.
    let mut headers = parts.headers.clone();
    crate::http::PublicOrigin::of_request(app, &parts).forward_in(&mut headers);
    let mut rb = app
        .replica
        .client
        .request(parts.method.clone(), format!("{addr}{pq}"));
    for (k, v) in headers.iter() {
        if !hop_by_hop(k) {
            rb = rb.header(k, v);
        }
    }
    rb = rb
        .header(FORWARDED, me)
        .body(reqwest::Body::wrap_stream(body.into_data_stream()));
    let upstream = match rb.send().await {
        Ok(r) => r,
        Err(e) => return unreachable(addr, e),
    };
    let status = upstream.status();
    // A HEAD answer has no body to check.
    if (status.is_client_error() || status.is_server_error()) && parts.method != Method::HEAD {
        let headers = upstream.headers().clone();
        return match upstream.bytes().await {
            Ok(body) => relay_error(addr, status, &headers, &body),
            Err(e) => unreachable(addr, e),
        };
    }
    let mut resp = Response::builder().status(status);
    if let Some(h) = resp.headers_mut() {
        for (k, v) in upstream.headers() {
            if !hop_by_hop(k) {
                h.append(k, v.clone());
            }
        }
    }
    resp.body(Body::from_stream(upstream.bytes_stream()))
        .unwrap_or_else(|e| ApiError::internal(e.to_string()).into_response())
}

/// Opens the same stream on the owner, then bridges the client's WebSocket to it frame by
/// frame. A refusal of the owner (404, 401, ...) reaches the client as it was.
async fn proxy_ws(addr: &str, pq: &str, me: &str, req: Request) -> Response {
    let (mut parts, _) = req.into_parts();
    let upgrade = match WebSocketUpgrade::from_request_parts(&mut parts, &()).await {
        Ok(u) => u,
        Err(e) => return e.into_response(),
    };
    let ws_url = format!(
        "{}{pq}",
        addr.replacen("http://", "ws://", 1)
            .replacen("https://", "wss://", 1)
    );
    let mut up = match tungstenite::client::IntoClientRequest::into_client_request(ws_url.as_str())
    {
        Ok(r) => r,
        Err(e) => return unreachable(addr, e),
    };
    copy_auth_headers(&parts.headers, up.headers_mut());
    if let Ok(v) = HeaderValue::from_str(me) {
        up.headers_mut().insert(FORWARDED, v);
    }
    let upstream = match tokio_tungstenite::connect_async(up).await {
        Ok((s, _)) => s,
        Err(tungstenite::Error::Http(r)) => {
            let (p, body) = r.into_parts();
            return relay_error(addr, p.status, &p.headers, &body.unwrap_or_default());
        }
        Err(e) => return unreachable(addr, e),
    };
    upgrade.on_upgrade(move |client| bridge(client, upstream))
}

fn copy_auth_headers(from: &HeaderMap, to: &mut HeaderMap) {
    for (k, v) in from.iter() {
        let keep = matches!(
            k.as_str(),
            "authorization" | "x-api-key" | "cookie" | "origin" | "x-request-id" | "traceparent"
        );
        if keep {
            to.append(k, v.clone());
        }
    }
}

type Upstream =
    tokio_tungstenite::WebSocketStream<tokio_tungstenite::MaybeTlsStream<tokio::net::TcpStream>>;

async fn bridge(client: WebSocket, upstream: Upstream) {
    let (mut c_tx, mut c_rx) = client.split();
    let (mut u_tx, mut u_rx) = upstream.split();
    let down = async {
        while let Some(Ok(m)) = u_rx.next().await {
            let m = match m {
                tungstenite::Message::Text(t) => ws::Message::Text(t.as_str().into()),
                tungstenite::Message::Binary(b) => ws::Message::Binary(b),
                tungstenite::Message::Ping(b) => ws::Message::Ping(b),
                tungstenite::Message::Pong(b) => ws::Message::Pong(b),
                tungstenite::Message::Close(f) => {
                    let _ = c_tx
                        .send(ws::Message::Close(f.map(|f| ws::CloseFrame {
                            code: f.code.into(),
                            reason: f.reason.as_str().into(),
                        })))
                        .await;
                    break;
                }
                tungstenite::Message::Frame(_) => continue,
            };
            if c_tx.send(m).await.is_err() {
                break;
            }
        }
        let _ = c_tx.close().await;
    };
    let up = async {
        while let Some(Ok(m)) = c_rx.next().await {
            let m = match m {
                ws::Message::Text(t) => tungstenite::Message::Text(t.as_str().into()),
                ws::Message::Binary(b) => tungstenite::Message::Binary(b),
                ws::Message::Ping(b) => tungstenite::Message::Ping(b),
                ws::Message::Pong(b) => tungstenite::Message::Pong(b),
                ws::Message::Close(f) => {
                    let _ = u_tx
                        .send(tungstenite::Message::Close(f.map(|f| {
                            tungstenite::protocol::CloseFrame {
                                code: f.code.into(),
                                reason: f.reason.as_str().into(),
                            }
                        })))
                        .await;
                    break;
                }
            };
            if u_tx.send(m).await.is_err() {
                break;
            }
        }
    };
    // Either side ending ends the bridge: the owner closing after `end`, or the client
    // going away (the owner's stream then ends too).
    tokio::select! {
        _ = down => {}
        _ = up => {}
    }
}
