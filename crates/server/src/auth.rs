//! Who a request comes from, and what it may see.
//!
//! Credentials: API keys (configured as SHA-256 digests, sent as `X-API-Key: KEY` or
//! `Authorization: Bearer KEY`) and bearer JWTs signed HS256 with the configured secret
//! (`sub` is the user; the role claim, `role` by default, says `admin`). A WebSocket stream
//! also accepts the short-lived `token` + `exp` of a signed `log_stream_url`, scoped to its
//! one run (or the `stream_url` of a session's background process, scoped to it).
//!
//! With neither keys nor a JWT secret configured, authentication is off: every request is
//! the configured single user (`default`) with admin rights. The server refuses that on a
//! non-loopback address unless `SANDBOX_ALLOW_ANONYMOUS=true`.
//!
//! Sessions and runs belong to the user that created them: another user gets 404, the same
//! answer as for an id that does not exist, so ids cannot be probed.

use std::collections::HashMap;
use std::sync::Arc;

use axum::extract::{FromRequestParts, MatchedPath, RawPathParams, Request, State};
use axum::http::request::Parts;
use axum::http::{HeaderMap, StatusCode, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use base64::Engine;
use hmac::{Hmac, Mac};
use serde_json::{Value, json};
use sha2::Sha256;

use crate::App;
use crate::error::{ApiError, ErrorCode};
use crate::util::sha256_hex;

/// One configured API key: the digest of the key, never the key itself.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ApiKey {
    /// SHA-256 of the key's bytes, lowercase hex.
    pub sha256: String,
    /// The user a request with this key acts as.
    pub user_id: String,
    /// Whether requests with this key have admin rights (`/admin` and `/metrics`).
    pub admin: bool,
}

fn valid_user_id(u: &str) -> bool {
    !u.is_empty()
        && u.len() <= 128
        && u.bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"-_.@:".contains(&b))
}

fn parse_role(role: &str) -> Option<bool> {
    match role {
        "admin" | "sandbox_admin" => Some(true),
        "user" => Some(false),
        _ => None,
    }
}

/// Entries `SHA256HEX USER [ROLE]` (or `SHA256HEX:USER[:ROLE]`), one a line or separated by
/// `,`/`;`; `#` starts a comment. ROLE is `user` (default) or `admin`.
pub fn parse_api_keys(text: &str) -> Result<Vec<ApiKey>, String> {
    let mut keys = Vec::new();
    for raw in text.split(['\n', ',', ';']) {
        let entry = raw.split('#').next().unwrap_or("").trim();
        if entry.is_empty() {
            continue;
        }
        let parts: Vec<&str> = if entry.contains(char::is_whitespace) {
            entry.split_whitespace().collect()
        } else {
            entry.split(':').collect()
        };
        let (hash, user, role) = match parts.as_slice() {
            [h, u] => (*h, *u, "user"),
            [h, u, r] => (*h, *u, *r),
            _ => return Err(format!("expected `SHA256HEX USER [ROLE]`, got {entry:?}")),
        };
        let hash = hash.to_ascii_lowercase();
        if hash.len() != 64 || !hash.bytes().all(|b| b.is_ascii_hexdigit()) {
            return Err(format!(
                "{hash:?} is not the SHA-256 hex digest of a key (64 hex digits)"
            ));
        }
        if !valid_user_id(user) {
            return Err(format!(
                "user id {user:?}: 1 to 128 characters of A-Z a-z 0-9 - _ . @ :"
            ));
        }
        let admin = parse_role(role).ok_or_else(|| format!("role {role:?}: `user` or `admin`"))?;
        keys.push(ApiKey {
            sha256: hash,
            user_id: user.to_string(),
            admin,
        });
    }
    Ok(keys)
}

/// The authenticated caller of a request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Principal {
    /// Whose sessions, runs and quotas the request concerns.
    pub user_id: String,
    /// Admin rights (`/admin` and `/metrics`).
    pub admin: bool,
}

/// The verifiers, built once from the configuration.
pub(crate) struct Auth {
    keys: HashMap<String, ApiKey>,
    jwt: Option<jsonwebtoken::DecodingKey>,
    role_claim: String,
    ws_secret: Vec<u8>,
    anonymous: Principal,
}

type HmacSha256 = Hmac<Sha256>;

impl Auth {
    pub(crate) fn new(c: &crate::Config) -> Auth {
        let ws_secret = match &c.ws_signing_secret {
            Some(s) => s.as_bytes().to_vec(),
            None => {
                // Per process: replicas need a shared SANDBOX_WS_SIGNING_SECRET for their URLs
                // to be accepted by each other.
                let mut k = uuid::Uuid::new_v4().as_bytes().to_vec();
                k.extend_from_slice(uuid::Uuid::new_v4().as_bytes());
                k
            }
        };
        Auth {
            keys: c
                .api_keys
                .iter()
                .map(|k| (k.sha256.clone(), k.clone()))
                .collect(),
            jwt: c
                .jwt_secret
                .as_ref()
                .map(|s| jsonwebtoken::DecodingKey::from_secret(s.as_bytes())),
            role_claim: c.jwt_role_claim.clone(),
            ws_secret,
            anonymous: Principal {
                user_id: c.user_id.clone(),
                admin: true,
            },
        }
    }

    /// Whether any credential is configured.
    pub fn enabled(&self) -> bool {
        !self.keys.is_empty() || self.jwt.is_some()
    }

    /// The principal of a request's headers: `Ok(None)` when it has no credentials.
    fn of_headers(&self, headers: &HeaderMap) -> Result<Option<Principal>, ApiError> {
        if let Some(v) = headers.get("x-api-key") {
            let key = v.to_str().map_err(|_| unauthorized("invalid_api_key"))?;
            return self.api_key(key.trim()).map(Some);
        }
        let Some(v) = headers.get(header::AUTHORIZATION) else {
            return Ok(None);
        };
        let v = v
            .to_str()
            .map_err(|_| unauthorized("invalid_credentials"))?;
        let Some((scheme, cred)) = v.trim().split_once(' ') else {
            return Err(unauthorized("invalid_credentials"));
        };
        if !scheme.eq_ignore_ascii_case("bearer") {
            return Err(unauthorized("unsupported_scheme"));
        }
        let cred = cred.trim();
        // A JWT is three base64url parts; an API key is anything else.
        if cred.split('.').count() == 3 && self.jwt.is_some() {
            return self.jwt(cred).map(Some);
        }
        self.api_key(cred).map(Some)
    }

    fn api_key(&self, key: &str) -> Result<Principal, ApiError> {
        match self.keys.get(&sha256_hex(key.as_bytes())) {
            Some(k) => Ok(Principal {
                user_id: k.user_id.clone(),
                admin: k.admin,
            }),
            None => Err(unauthorized("invalid_api_key")),
        }
    }

    fn jwt(&self, token: &str) -> Result<Principal, ApiError> {
        let Some(key) = &self.jwt else {
            return Err(unauthorized("invalid_token"));
        };
        let validation = jsonwebtoken::Validation::new(jsonwebtoken::Algorithm::HS256);
        let data = jsonwebtoken::decode::<serde_json::Map<String, Value>>(token, key, &validation)
            .map_err(|e| {
                let reason = match e.kind() {
                    jsonwebtoken::errors::ErrorKind::ExpiredSignature => "token_expired",
                    _ => "invalid_token",
                };
                unauthorized(reason)
            })?;
        let claims = data.claims;
        let user = claims
            .get("sub")
            .and_then(Value::as_str)
            .filter(|u| valid_user_id(u))
            .ok_or_else(|| unauthorized("invalid_token"))?;
        let admin = match claims.get(&self.role_claim) {
            Some(Value::String(r)) => parse_role(r) == Some(true),
            Some(Value::Array(rs)) => rs
                .iter()
                .any(|r| r.as_str().and_then(parse_role) == Some(true)),
            _ => false,
        } || claims.get("is_admin") == Some(&Value::Bool(true));
        Ok(Principal {
            user_id: user.to_string(),
            admin,
        })
    }

    fn mac(&self, run_id: &str, exp: i64) -> HmacSha256 {
        let mut mac =
            HmacSha256::new_from_slice(&self.ws_secret).expect("HMAC takes keys of any size");
        mac.update(format!("wasmsand.ws:v1\n{run_id}\n{exp}").as_bytes());
        mac
    }

    /// `token` and `exp` (RFC 3339) of a signed stream URL for one run, valid `ttl_sec`.
    pub fn sign_ws(&self, run_id: &str, now_ms: i64, ttl_sec: u64) -> (String, String) {
        // Rounded up to whole seconds: never shorter than the TTL.
        let exp = (now_ms + ttl_sec as i64 * 1000 + 999) / 1000;
        let tag = self.mac(run_id, exp).finalize().into_bytes();
        (
            base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(tag),
            crate::util::iso(exp * 1000),
        )
    }

    /// Checks a signed stream URL's `token` and `exp` against the run it is used on.
    pub fn verify_ws(
        &self,
        run_id: &str,
        token: &str,
        exp: &str,
        now_ms: i64,
    ) -> Result<(), ApiError> {
        let t = time::OffsetDateTime::parse(exp, &time::format_description::well_known::Rfc3339)
            .map_err(|_| unauthorized("invalid_token"))?;
        let exp_s = t.unix_timestamp();
        let tag = base64::engine::general_purpose::URL_SAFE_NO_PAD
            .decode(token)
            .map_err(|_| unauthorized("invalid_token"))?;
        // A token of another run, or an `exp` moved later, fails here.
        self.mac(run_id, exp_s)
            .verify_slice(&tag)
            .map_err(|_| unauthorized("invalid_token"))?;
        if exp_s * 1000 < now_ms {
            return Err(unauthorized("token_expired"));
        }
        Ok(())
    }
}

/// `?token=...&exp=...` of a signed stream URL for `run_id`, valid for the configured TTL.
pub fn signed_query(app: &App, run_id: &str) -> String {
    let (token, exp) =
        app.auth
            .sign_ws(run_id, app.clock.now_ms(), app.config.ws_signed_url_ttl_sec);
    format!("?token={token}&exp={exp}")
}

pub(crate) fn unauthorized(reason: &str) -> ApiError {
    let message = match reason {
        "missing_credentials" => {
            "authentication required: send `Authorization: Bearer <JWT or API key>` or `X-API-Key`"
        }
        "token_expired" => "the credentials have expired",
        _ => "the credentials are not valid",
    };
    ApiError::new(StatusCode::UNAUTHORIZED, ErrorCode::Unauthorized, message)
        .with_details(json!({ "reason": reason }))
        .with_header(header::WWW_AUTHENTICATE, "Bearer")
}

fn forbidden_admin() -> ApiError {
    ApiError::new(
        StatusCode::FORBIDDEN,
        ErrorCode::Forbidden,
        "this endpoint needs an admin (role `admin`)",
    )
    .with_details(json!({ "required_role": "admin" }))
}

impl App {
    /// The caller of a request by its headers, or the single user when auth is off.
    pub(crate) fn principal_of(&self, headers: &HeaderMap) -> Result<Principal, ApiError> {
        if !self.auth.enabled() {
            return Ok(self.auth.anonymous.clone());
        }
        self.auth
            .of_headers(headers)?
            .ok_or_else(|| unauthorized("missing_credentials"))
    }
}

/// Middleware of the REST API: authenticates, keeps non-admins out of `/admin`, and answers
/// 404 for another user's session or run.
pub async fn authenticate(State(app): State<Arc<App>>, mut req: Request, next: Next) -> Response {
    let route = req
        .extensions()
        .get::<MatchedPath>()
        .map(|m| m.as_str().to_string())
        .unwrap_or_default();
    let route = route
        .strip_prefix(crate::http::BASE)
        .unwrap_or(&route)
        .to_string();
    let params = {
        use axum::RequestExt;
        req.extract_parts::<RawPathParams>().await.ok()
    };
    let param = |name: &str| {
        params.as_ref().and_then(|p| {
            p.iter()
                .find(|(k, _)| *k == name)
                .map(|(_, v)| v.to_string())
        })
    };
    let (id, pid) = (param("id"), param("pid"));
    let token = query_param(&req, "token").zip(query_param(&req, "exp"));
    let headers = req.headers().clone();
    match authorize(&app, &route, id.as_deref(), pid.as_deref(), token, &headers).await {
        Ok(p) => {
            tracing::Span::current().record("user_id", p.user_id.as_str());
            req.extensions_mut().insert(p);
            next.run(req).await
        }
        Err(e) => e.into_response(),
    }
}

fn query_param(req: &Request, name: &str) -> Option<String> {
    let q = axum::extract::Query::<HashMap<String, String>>::try_from_uri(req.uri()).ok()?;
    q.0.get(name).cloned()
}

async fn authorize(
    app: &Arc<App>,
    route: &str,
    id: Option<&str>,
    pid: Option<&str>,
    token: Option<(String, String)>,
    headers: &HeaderMap,
) -> Result<Principal, ApiError> {
    // A signed URL of a process stream is its own credential, for that one process.
    if app.config.ws_signed_urls
        && route == "/sessions/{id}/processes/{pid}/stream"
        && let (Some(id), Some(pid), Some((token, exp))) = (id, pid, &token)
    {
        app.auth.verify_ws(
            &crate::process_table::stream_scope(id, pid),
            token,
            exp,
            app.clock.now_ms(),
        )?;
        let owner = app
            .session_user(id)
            .await?
            .ok_or_else(|| ApiError::not_found("session", id))?;
        return Ok(Principal {
            user_id: owner,
            admin: false,
        });
    }
    // A signed stream URL is its own credential, for its one run only.
    if app.config.ws_signed_urls
        && route == "/runs/{id}/stream"
        && let (Some(id), Some((token, exp))) = (id, token)
    {
        app.auth.verify_ws(id, &token, &exp, app.clock.now_ms())?;
        let run = app
            .run_record(id)
            .await
            .map_err(|e| ApiError::internal(e.to_string()))?
            .ok_or_else(|| ApiError::not_found("run", id))?;
        return Ok(Principal {
            user_id: run.user_id,
            admin: false,
        });
    }
    let p = app.principal_of(headers)?;
    if route.starts_with("/admin") && !p.admin {
        return Err(forbidden_admin());
    }
    let Some(id) = id else {
        return Ok(p);
    };
    if route.starts_with("/sessions/{id}") {
        if let Some(owner) = app.session_user(id).await?
            && owner != p.user_id
        {
            return Err(ApiError::not_found("session", id));
        }
    } else if route.starts_with("/runs/{id}") {
        let owner = app
            .run_record(id)
            .await
            .map_err(|e| ApiError::internal(e.to_string()))?
            .map(|r| r.user_id);
        if owner.is_some_and(|o| o != p.user_id) {
            return Err(ApiError::not_found("run", id));
        }
    }
    Ok(p)
}

/// Middleware of `/mcp`: the same credentials; MCP sessions then belong to the user
/// ([`wasmsand_mcp::Principal`]). Without auth, MCP clients share the anonymous client.
pub async fn authenticate_mcp(
    State(app): State<Arc<App>>,
    mut req: Request,
    next: Next,
) -> Response {
    if !app.auth.enabled() {
        return next.run(req).await;
    }
    match app.principal_of(req.headers()) {
        Ok(p) => {
            req.extensions_mut()
                .insert(wasmsand_mcp::Principal(p.user_id));
            next.run(req).await
        }
        Err(e) => e.into_response(),
    }
}

/// Middleware of operator endpoints outside the API (`/metrics`): admins only.
pub async fn require_admin(State(app): State<Arc<App>>, req: Request, next: Next) -> Response {
    match app.principal_of(req.headers()) {
        Ok(p) if p.admin => next.run(req).await,
        Ok(_) => forbidden_admin().into_response(),
        Err(e) => e.into_response(),
    }
}

/// The caller, as handlers take it: set by [`authenticate`].
impl FromRequestParts<Arc<App>> for Principal {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, app: &Arc<App>) -> Result<Self, ApiError> {
        if let Some(p) = parts.extensions.get::<Principal>() {
            return Ok(p.clone());
        }
        app.principal_of(&parts.headers)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn api_key_lists_parse_and_refuse_bad_entries() {
        let h = sha256_hex(b"k1");
        let keys = parse_api_keys(&format!(
            "# keys\n{h} alice admin\n{} bob # a comment\n",
            sha256_hex(b"k2")
        ))
        .unwrap();
        assert_eq!(keys.len(), 2);
        assert!(keys[0].admin && !keys[1].admin);
        assert_eq!(keys[1].user_id, "bob");
        let inline = parse_api_keys(&format!("{h}:carol,{}:dave:user", sha256_hex(b"x"))).unwrap();
        assert_eq!(inline[0].user_id, "carol");
        assert!(parse_api_keys("abc alice").is_err());
        assert!(parse_api_keys(&format!("{h} al/ice")).is_err());
        assert!(parse_api_keys(&format!("{h} alice root")).is_err());
    }

    #[test]
    fn signed_ws_tokens_are_scoped_and_expire() {
        let c = crate::Config {
            ws_signing_secret: Some("0123456789abcdef".into()),
            ..crate::Config::default()
        };
        let auth = Auth::new(&c);
        let now = 1_700_000_000_000;
        let (tok, exp) = auth.sign_ws("run-a", now, 60);
        assert!(auth.verify_ws("run-a", &tok, &exp, now).is_ok());
        assert!(auth.verify_ws("run-b", &tok, &exp, now).is_err());
        assert!(auth.verify_ws("run-a", &tok, &exp, now + 61_000).is_err());
        let later = crate::util::iso(now + 3_600_000);
        assert!(auth.verify_ws("run-a", &tok, &later, now).is_err());
    }
}
