//! Request and response plumbing shared by every resource's handlers (and by the auth layer
//! and replica forwarding, which need the API's base path): reading a JSON body with clear
//! 4xx answers, typed views of it, the origin (scheme and host) a reply's URLs are built from,
//! believing a proxy's `Forwarded` / `X-Forwarded-*` only from a trusted peer, and JSON
//! replies with extra headers; single `Range` requests.
//!
//! A leaf: it names nothing but the error type and the root's `App`, so any module may use
//! it without pulling the route tree in.

use axum::body::Body;
use axum::http::{HeaderMap, HeaderName, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use serde_json::{Value, json};

use crate::error::{ApiError, ApiResult, ErrorCode};

/// Where every REST route of the service is mounted.
pub const BASE: &str = "/api/v1/sandbox";
/// Largest JSON body: inline files are at most 1 MB decoded, about 1.4 MB as base64.
const MAX_JSON_BYTES: usize = 2 * 1024 * 1024;

/// Reads a JSON object body: content type, size cap and syntax checked, with clear 4xx.
pub(crate) async fn read_json(headers: &HeaderMap, body: Body) -> ApiResult<Value> {
    if let Some(ct) = headers.get(header::CONTENT_TYPE) {
        let ct = ct.to_str().unwrap_or("").to_ascii_lowercase();
        let mime = ct.split(';').next().unwrap_or("").trim();
        if mime != "application/json" && !mime.ends_with("+json") {
            return Err(ApiError::new(
                StatusCode::UNSUPPORTED_MEDIA_TYPE,
                ErrorCode::InvalidRequest,
                format!("expected an application/json body, got {mime:?}"),
            ));
        }
    }
    let bytes = axum::body::to_bytes(body, MAX_JSON_BYTES)
        .await
        .map_err(|_| {
            // The rest of the body is unread: the connection cannot carry another request.
            ApiError::too_large("the request body", MAX_JSON_BYTES as u64)
                .with_header(header::CONNECTION, "close")
        })?;
    if bytes.is_empty() {
        return Err(ApiError::invalid(
            "the request body is empty; a JSON object is required",
        ));
    }
    let v: Value = serde_json::from_slice(&bytes)
        .map_err(|e| ApiError::invalid(format!("malformed JSON: {e}")))?;
    if !v.is_object() {
        return Err(ApiError::invalid("the request body must be a JSON object"));
    }
    Ok(v)
}

/// The body read by [`read_json`] as a request type; the raw value is kept by callers
/// because idempotency fingerprints it.
pub(crate) fn typed<T: serde::de::DeserializeOwned>(v: &Value) -> ApiResult<T> {
    serde_json::from_value(v.clone())
        .map_err(|e| ApiError::invalid(format!("invalid request: {e}")))
}

/// `host[:port]` as a reply's absolute URLs can carry it: nothing that would end the
/// authority (`/`, `?`, `#`, `@`) or need escaping.
fn safe_host(h: &str) -> Option<String> {
    let h = h.trim();
    (!h.is_empty()
        && h.len() <= 255
        && h.bytes()
            .all(|b| b.is_ascii_alphanumeric() || b".-_:[]%".contains(&b)))
    .then(|| h.to_string())
}

/// The last value of a header that proxies may send as a comma list or as several fields
/// (`X-Forwarded-Proto: https, http`): the one the direct peer wrote.
fn last_listed(headers: &HeaderMap, name: &str) -> Option<String> {
    let values: Vec<&str> = headers
        .get_all(name)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(','))
        .map(str::trim)
        .filter(|v| !v.is_empty())
        .collect();
    values.last().map(|v| v.to_string())
}

/// Splits `s` at `sep` outside double-quoted strings (RFC 7230 `quoted-string`).
fn split_unquoted(s: &str, sep: char) -> Vec<&str> {
    let mut parts = Vec::new();
    let (mut start, mut quoted, mut escaped) = (0, false, false);
    for (i, c) in s.char_indices() {
        match c {
            _ if escaped => escaped = false,
            '\\' if quoted => escaped = true,
            '"' => quoted = !quoted,
            c if c == sep && !quoted => {
                parts.push(&s[start..i]);
                start = i + c.len_utf8();
            }
            _ => {}
        }
    }
    parts.push(&s[start..]);
    parts
}

/// The parameter `name` of the last element of the `Forwarded` fields (RFC 7239): each proxy
/// appends an element, so the last one is what the direct peer itself says.
fn forwarded_param(headers: &HeaderMap, name: &str) -> Option<String> {
    let fields: Vec<&str> = headers
        .get_all(header::FORWARDED)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .collect();
    let joined = fields.join(",");
    let last = split_unquoted(&joined, ',')
        .into_iter()
        .rfind(|e| !e.trim().is_empty())?;
    split_unquoted(last, ';').into_iter().find_map(|pair| {
        let (k, v) = pair.split_once('=')?;
        if !k.trim().eq_ignore_ascii_case(name) {
            return None;
        }
        let v = v.trim();
        Some(
            match v.strip_prefix('"').and_then(|v| v.strip_suffix('"')) {
                Some(inner) => {
                    let mut out = String::new();
                    let mut chars = inner.chars();
                    while let Some(c) = chars.next() {
                        out.push(if c == '\\' {
                            chars.next().unwrap_or(c)
                        } else {
                            c
                        });
                    }
                    out
                }
                None => v.to_string(),
            },
        )
    })
}

/// `Some(true)` for a scheme reached over TLS, `Some(false)` for plain, `None` for anything
/// else (which then says nothing).
fn secure_scheme(proto: &str) -> Option<bool> {
    match proto.trim().to_ascii_lowercase().as_str() {
        "https" | "wss" => Some(true),
        "http" | "ws" => Some(false),
        _ => None,
    }
}

/// How the client reached the service, for the absolute URLs a reply carries (the stream
/// URLs): whether over TLS, and the host it asked for. The service listens in plain HTTP, so
/// only a TLS-terminating proxy in front of it can say a request came over TLS; and since
/// any client can write `X-Forwarded-*` or `Forwarded`, they count only from a direct peer
/// in `SANDBOX_TRUSTED_PROXIES`. `Forwarded` wins over `X-Forwarded-*` (it is the
/// standard one), each read from what the direct peer appended last.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(crate) struct PublicOrigin {
    /// `wss://` rather than `ws://`.
    pub(crate) secure: bool,
    /// `host[:port]` as the client used it; `None` when the request gave none that is safe to
    /// repeat (then URLs are paths).
    pub(crate) host: Option<String>,
}

impl PublicOrigin {
    /// The origin of a request with `headers` from `peer`, trusting the peers in `trusted`.
    pub(crate) fn of(
        trusted: &[ipnet::IpNet],
        peer: Option<std::net::IpAddr>,
        headers: &HeaderMap,
    ) -> PublicOrigin {
        // An IPv4 client of a dual-stack listener shows as `::ffff:a.b.c.d`.
        let believed = peer
            .map(|p| p.to_canonical())
            .is_some_and(|p| trusted.iter().any(|n| n.contains(&p)));
        let own_host = headers
            .get(header::HOST)
            .and_then(|h| h.to_str().ok())
            .and_then(safe_host);
        if !believed {
            return PublicOrigin {
                secure: false,
                host: own_host,
            };
        }
        let proto = forwarded_param(headers, "proto")
            .or_else(|| last_listed(headers, "x-forwarded-proto"))
            .and_then(|p| secure_scheme(&p));
        let host = forwarded_param(headers, "host")
            .or_else(|| last_listed(headers, "x-forwarded-host"))
            .and_then(|h| safe_host(&h));
        PublicOrigin {
            secure: proto.unwrap_or(false),
            host: host.or(own_host),
        }
    }

    /// The origin of a request as the app's configuration judges it.
    pub(crate) fn of_request(app: &crate::App, parts: &axum::http::request::Parts) -> Self {
        let peer = parts
            .extensions
            .get::<axum::extract::ConnectInfo<std::net::SocketAddr>>()
            .map(|c| c.0.ip());
        Self::of(&app.config.trusted_proxies, peer, &parts.headers)
    }

    /// `ws://host` or `wss://host`, when the host is known.
    pub(crate) fn ws_base(&self) -> Option<String> {
        let scheme = if self.secure { "wss" } else { "ws" };
        self.host.as_ref().map(|h| format!("{scheme}://{h}"))
    }

    /// `path` as a WebSocket URL: absolute when the host is known, else the path itself.
    pub(crate) fn ws_url(&self, path: &str) -> String {
        match self.ws_base() {
            Some(base) => format!("{base}{path}"),
            None => path.to_string(),
        }
    }

    /// Says this origin to another replica, replacing what the client sent: the replica
    /// serving the request builds its URLs from it when it trusts this one.
    pub(crate) fn forward_in(&self, headers: &mut HeaderMap) {
        headers.remove(header::FORWARDED);
        headers.remove("x-forwarded-host");
        let proto = if self.secure { "https" } else { "http" };
        headers.insert("x-forwarded-proto", HeaderValue::from_static(proto));
        if let Some(v) = self
            .host
            .as_deref()
            .and_then(|h| HeaderValue::from_str(h).ok())
        {
            headers.insert("x-forwarded-host", v);
        }
    }
}

impl axum::extract::FromRequestParts<std::sync::Arc<crate::App>> for PublicOrigin {
    type Rejection = std::convert::Infallible;

    async fn from_request_parts(
        parts: &mut axum::http::request::Parts,
        app: &std::sync::Arc<crate::App>,
    ) -> Result<Self, Self::Rejection> {
        Ok(Self::of_request(app, parts))
    }
}

/// Middleware of `/mcp`: tells the MCP server the base of the stream URLs its answers carry
/// (seed 003's `sandbox.run` returns a `log_stream_url`), judged as the REST API's are.
pub(crate) async fn mcp_stream_base(
    axum::extract::State(app): axum::extract::State<std::sync::Arc<crate::App>>,
    req: axum::extract::Request,
    next: axum::middleware::Next,
) -> Response {
    let (mut parts, body) = req.into_parts();
    if let Some(base) = PublicOrigin::of_request(&app, &parts).ws_base() {
        parts.extensions.insert(wasmsand_mcp::StreamBase(base));
    }
    next.run(axum::extract::Request::from_parts(parts, body))
        .await
}

/// A JSON reply with extra headers; a header value that is not valid is left out rather
/// than failing a reply whose work is already done.
pub(crate) fn json_response(
    status: StatusCode,
    body: &Value,
    extra: &[(HeaderName, String)],
) -> Response {
    let mut resp = (status, axum::Json(body.clone())).into_response();
    for (k, v) in extra {
        if let Ok(v) = HeaderValue::from_str(v) {
            resp.headers_mut().insert(k.clone(), v);
        }
    }
    resp
}

/// What a request that would create something gets while the server drains.
pub(crate) fn shutting_down() -> ApiError {
    ApiError::new(
        StatusCode::SERVICE_UNAVAILABLE,
        ErrorCode::Unavailable,
        "the server is shutting down",
    )
    .with_header(header::RETRY_AFTER, "5")
}

/// Largest page a list answers.
const MAX_LIMIT: usize = 200;

/// The paging of a list: `limit` (1 to 200, default 50) and `offset` (default 0).
pub(crate) fn limit_offset(
    q: &std::collections::HashMap<String, String>,
) -> ApiResult<(usize, usize)> {
    let num = |name: &str, default: usize| -> ApiResult<usize> {
        match q.get(name) {
            None => Ok(default),
            Some(v) => v
                .parse::<usize>()
                .map_err(|_| ApiError::invalid(format!("{name} must be a non-negative integer"))),
        }
    };
    let limit = num("limit", 50)?;
    if limit == 0 || limit > MAX_LIMIT {
        return Err(ApiError::invalid(format!(
            "limit must be in [1, {MAX_LIMIT}]"
        )));
    }
    Ok((limit, num("offset", 0)?))
}

pub(crate) enum RangeReq {
    Full,
    Part(u64, u64),
}

/// One `bytes=` range against a length. Several ranges are refused (416); a header that is
/// not a bytes range is ignored, as RFC 9110 allows.
pub(crate) fn parse_range(h: Option<&HeaderValue>, len: u64) -> Result<RangeReq, ApiError> {
    let unsatisfiable = |why: &str| {
        ApiError::new(
            StatusCode::RANGE_NOT_SATISFIABLE,
            ErrorCode::InvalidRequest,
            why.to_string(),
        )
        .with_header(header::CONTENT_RANGE, format!("bytes */{len}"))
        .with_details(json!({ "size": len }))
    };
    let Some(h) = h else {
        return Ok(RangeReq::Full);
    };
    let Ok(s) = h.to_str() else {
        return Ok(RangeReq::Full);
    };
    // Range units are case-insensitive (RFC 9110 section 14.1): `Bytes=0-9` is a range.
    let s = s.trim();
    let Some(spec) = s
        .get(..6)
        .filter(|unit| unit.eq_ignore_ascii_case("bytes="))
        .map(|_| &s[6..])
    else {
        return Ok(RangeReq::Full);
    };
    if spec.contains(',') {
        return Err(unsatisfiable(
            "multiple ranges are not supported; ask for one range",
        ));
    }
    let Some((a, b)) = spec.trim().split_once('-') else {
        return Ok(RangeReq::Full);
    };
    let (a, b) = (a.trim(), b.trim());
    let (start, end) = if a.is_empty() {
        let Ok(n) = b.parse::<u64>() else {
            return Ok(RangeReq::Full);
        };
        if n == 0 {
            return Err(unsatisfiable("empty suffix range"));
        }
        (len.saturating_sub(n), len.saturating_sub(1))
    } else {
        let Ok(start) = a.parse::<u64>() else {
            return Ok(RangeReq::Full);
        };
        let end = if b.is_empty() {
            len.saturating_sub(1)
        } else {
            match b.parse::<u64>() {
                Ok(e) if e >= start => e.min(len.saturating_sub(1)),
                _ => return Ok(RangeReq::Full),
            }
        };
        (start, end)
    };
    if len == 0 || start >= len {
        return Err(unsatisfiable("the range starts past the end"));
    }
    Ok(RangeReq::Part(start, end))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn headers(pairs: &[(&str, &str)]) -> HeaderMap {
        let mut h = HeaderMap::new();
        for (k, v) in pairs {
            h.append(
                HeaderName::from_bytes(k.as_bytes()).unwrap(),
                HeaderValue::from_str(v).unwrap(),
            );
        }
        h
    }

    fn origin(trusted: &str, peer: &str, pairs: &[(&str, &str)]) -> PublicOrigin {
        let trusted: Vec<ipnet::IpNet> = trusted
            .split(',')
            .filter(|t| !t.is_empty())
            .map(|t| t.parse().unwrap())
            .collect();
        PublicOrigin::of(&trusted, Some(peer.parse().unwrap()), &headers(pairs))
    }

    #[test]
    fn forwarding_headers_count_only_from_trusted_peers() {
        let h = [
            ("host", "inner:8787"),
            ("x-forwarded-proto", "https"),
            ("x-forwarded-host", "api.example.com"),
        ];
        let plain = PublicOrigin {
            secure: false,
            host: Some("inner:8787".into()),
        };
        assert_eq!(origin("", "10.0.0.5", &h), plain);
        assert_eq!(origin("10.0.0.6/32", "10.0.0.5", &h), plain);
        let public = PublicOrigin {
            secure: true,
            host: Some("api.example.com".into()),
        };
        assert_eq!(origin("10.0.0.5/32", "10.0.0.5", &h), public);
        assert_eq!(origin("10.0.0.0/8", "10.0.0.5", &h), public);
        assert_eq!(origin("10.0.0.0/8", "::ffff:10.0.0.5", &h), public);
        assert_eq!(
            origin("10.0.0.0/8", "10.0.0.5", &h).ws_url("/s"),
            "wss://api.example.com/s"
        );
        assert_eq!(origin("", "10.0.0.5", &h).ws_url("/s"), "ws://inner:8787/s");
        assert_eq!(PublicOrigin::default().ws_url("/s"), "/s");
    }

    #[test]
    fn forwarded_wins_and_the_last_hop_speaks() {
        let t = "127.0.0.0/8";
        // RFC 7239: the element the direct peer appended is the last one.
        let o = origin(
            t,
            "127.0.0.1",
            &[
                ("host", "inner"),
                ("forwarded", "for=1.2.3.4;proto=http;host=spoofed"),
                (
                    "forwarded",
                    r#"for="[2001:db8::1]:4711";proto=https;host="a.example:8443""#,
                ),
                ("x-forwarded-proto", "http"),
            ],
        );
        assert_eq!(o.ws_url("/s"), "wss://a.example:8443/s");
        // A list in one field: the last value.
        let o = origin(
            t,
            "127.0.0.1",
            &[("host", "inner"), ("x-forwarded-proto", "http, https")],
        );
        assert_eq!(o.ws_url("/s"), "wss://inner/s");
        // The last element without `proto`: X-Forwarded-Proto says it.
        let o = origin(
            t,
            "127.0.0.1",
            &[
                ("host", "inner"),
                ("forwarded", "proto=http, for=10.0.0.1"),
                ("x-forwarded-proto", "https"),
            ],
        );
        assert!(o.secure);
        // Unknown schemes and hosts that would break the URL say nothing.
        let o = origin(
            t,
            "127.0.0.1",
            &[
                ("host", "inner"),
                ("x-forwarded-proto", "gopher"),
                ("x-forwarded-host", "evil.example/path?"),
            ],
        );
        assert_eq!(o.ws_url("/s"), "ws://inner/s");
        let o = origin("", "127.0.0.1", &[("host", "a@b")]);
        assert_eq!(o.host, None);
    }

    #[test]
    fn a_replica_passes_its_judgement_on() {
        let mut h = headers(&[("forwarded", "proto=http"), ("x-forwarded-host", "spoofed")]);
        PublicOrigin {
            secure: true,
            host: Some("api.example.com".into()),
        }
        .forward_in(&mut h);
        assert!(h.get(header::FORWARDED).is_none());
        assert_eq!(h["x-forwarded-proto"], "https");
        assert_eq!(h["x-forwarded-host"], "api.example.com");
    }

    #[test]
    fn range_units_are_case_insensitive() {
        let part = |h: &str, len| match parse_range(Some(&HeaderValue::from_str(h).unwrap()), len) {
            Ok(RangeReq::Part(a, b)) => Some((a, b)),
            Ok(RangeReq::Full) => None,
            Err(e) => panic!("{h}: {}", e.message),
        };
        assert_eq!(part("bytes=0-9", 100), Some((0, 9)));
        assert_eq!(part("Bytes=0-9", 100), Some((0, 9)));
        assert_eq!(part("BYTES=-5", 100), Some((95, 99)));
        assert_eq!(part(" bytes=90-", 100), Some((90, 99)));
        assert_eq!(part("items=0-9", 100), None);
        assert_eq!(part("bytes", 100), None);
    }
}
