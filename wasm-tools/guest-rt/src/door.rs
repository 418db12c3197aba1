//! The network door as a guest sees it: one `http` frame through the tool-call channel
//! (`host.call`), which the host checks against the sandbox's egress policy, pins and answers
//! with the whole response. A WASI program has no sockets; `curl`, `wget` and `git` all reach
//! the network this way, so every request is the host's decision.

use base64::Engine as _;
use serde_json::{Value, json};

/// Why the door did not answer with a response.
pub struct Fail {
    /// The host's class of refusal (`denied`, `resolve`, `connect`, `tls`, `timeout`,
    /// `limit`, ...) or `off` when the sandbox has no network policy.
    pub kind: String,
    /// The host's words, naming the host, address and rule set where it has them.
    pub message: String,
}

/// Sends one frame; the answer's fields, or why there is none.
pub fn call(frame: &Value) -> Result<Value, Fail> {
    let bytes = serde_json::to_vec(frame).unwrap_or_default();
    let answer = crate::host::call(&bytes).map_err(|rc| Fail {
        kind: "off".into(),
        message: if rc == -1 {
            "network access is off in this sandbox (it has no network policy)".into()
        } else {
            "the sandbox's network door failed".into()
        },
    })?;
    let v: Value = serde_json::from_slice(&answer).map_err(|_| Fail {
        kind: "off".into(),
        message: "the sandbox's network door answered something unreadable".into(),
    })?;
    if v["ok"] == true {
        Ok(v)
    } else {
        Err(Fail {
            kind: v["error"]["kind"].as_str().unwrap_or("connect").to_string(),
            message: v["error"]["message"]
                .as_str()
                .unwrap_or("failed")
                .to_string(),
        })
    }
}

/// One response, decoded.
pub struct Response {
    /// The status code.
    pub status: u16,
    /// The reason phrase.
    pub reason: String,
    /// `HTTP/1.1` or `HTTP/2`.
    pub version: String,
    /// Headers in the server's order.
    pub headers: Vec<(String, String)>,
    /// The whole body (decoded from the frame).
    pub body: Vec<u8>,
    /// The body was cut at the run's download limit.
    pub truncated: bool,
}

impl Response {
    /// The first header named `name` (any case).
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(k, _)| k.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }

    /// The status line and headers as the server sent them (CRLF, a blank line after).
    pub fn head(&self) -> String {
        let mut s = format!("{} {} {}\r\n", self.version, self.status, self.reason);
        for (k, v) in &self.headers {
            s += &format!("{k}: {v}\r\n");
        }
        s + "\r\n"
    }
}

/// One request.
pub struct Request<'a> {
    /// `GET`, `POST`, ...
    pub method: &'a str,
    /// An `http` or `https` URL.
    pub url: &'a str,
    /// Headers to send, in order.
    pub headers: &'a [(String, String)],
    /// The body, if any.
    pub body: Option<&'a [u8]>,
    /// The caller's own time limit (the host's per-request cap still applies).
    pub timeout_ms: Option<u64>,
    /// The address the caller names for the URL's host itself (curl's `--resolve`); the host
    /// refuses it unless the run pinned the name to it or a rule allows the address.
    pub addr: Option<&'a str>,
}

/// Sends `r` through the door.
pub fn send(r: &Request) -> Result<Response, Fail> {
    let mut frame = json!({
        "v": 1, "id": 1, "op": "http", "method": r.method, "url": r.url,
        "headers": r.headers.iter().map(|(k, v)| json!([k, v])).collect::<Vec<_>>(),
    });
    if let Some(b) = r.body {
        frame["body"] = json!(base64::engine::general_purpose::STANDARD.encode(b));
    }
    if let Some(t) = r.timeout_ms {
        frame["timeout_ms"] = json!(t);
    }
    if let Some(a) = r.addr {
        frame["addr"] = json!(a);
    }
    let v = call(&frame)?;
    let headers = v["headers"]
        .as_array()
        .map(|a| {
            a.iter()
                .filter_map(|h| Some((h[0].as_str()?.to_string(), h[1].as_str()?.to_string())))
                .collect()
        })
        .unwrap_or_default();
    Ok(Response {
        status: v["status"].as_u64().unwrap_or(0) as u16,
        reason: v["reason"].as_str().unwrap_or("").to_string(),
        version: v["version"].as_str().unwrap_or("HTTP/1.1").to_string(),
        headers,
        body: base64::engine::general_purpose::STANDARD
            .decode(v["body"].as_str().unwrap_or(""))
            .unwrap_or_default(),
        truncated: v["truncated"] == true,
    })
}

/// `location` against `base`: absolute, scheme-relative, host-relative or relative, as a
/// browser joins a redirect's target.
pub fn join(base: &str, location: &str) -> String {
    if location.contains("://") {
        return location.to_string();
    }
    let (scheme, rest) = base.split_once("://").unwrap_or(("http", base));
    if let Some(l) = location.strip_prefix("//") {
        return format!("{scheme}://{l}");
    }
    let host_end = rest.find('/').unwrap_or(rest.len());
    let origin = format!("{scheme}://{}", &rest[..host_end]);
    if location.starts_with('/') {
        return origin + location;
    }
    let path = &rest[host_end..];
    let path = path.split(['?', '#']).next().unwrap_or("");
    let dir = match path.rfind('/') {
        Some(i) => &path[..=i],
        None => "/",
    };
    format!("{origin}{dir}{location}")
}
