//! The network door: how a guest reaches the network, and only under the sandbox's egress
//! allowlist. Guests (`curl`, `wget`) send `{"v":1,"id":N,"op":"http",...}` frames over the
//! tool-call channel; the host checks the URL's host against the policy, resolves it once per
//! run and pins the answer (no re-resolution mid-run), connects only to an address the policy
//! allows, and sends one request with no redirect followed (the guest follows them, each hop
//! checked again). Every decision is reported to [`Network::on_event`].
//!
//! Names no host rule matches are never resolved (a DNS query is itself egress). Requests and
//! bytes are capped per run ([`NetLimits`]); a request also counts as one host call.
//!
//! Request: `{"v":1,"id":N,"op":"http","method":M,"url":U,"headers":[[K,V],...],
//! "body":BASE64?,"timeout_ms":T?,"addr":A?}`. `addr` is the address the program itself names
//! for the URL's host (curl's `--resolve`): used when the run pinned the name to it or a rule
//! allows it as an address, else refused as `dns_mismatch`. Answer: `{"v":1,"id":N,"ok":true,"status":S,
//! "reason":R,"version":"HTTP/1.1","headers":[[K,V],...],"body":BASE64,"truncated":bool,
//! "ip":A}` or `{"v":1,"id":N,"ok":false,"error":{"kind":K,"message":M}}`, `kind` one of
//! `denied`, `limit`, `resolve`, `connect`, `timeout`, `tls`, `bad_request`, `unsupported`.
//!
//! `{"v":1,"id":N,"op":"connect","host":H}` asks only whether `H` may be reached, resolving and
//! pinning it as a request would (answer `{"ok":true,"ip":A}` or the same refusals): Python's
//! sockets ask it at `connect()`, so a refusal surfaces where programs expect one, before any
//! request is written. It reports denials; the request that follows reports the allowance.

use std::collections::BTreeMap;
use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use base64::Engine as _;
use parking_lot::Mutex;
use serde_json::{Value, json};
use wasmsand_exec::CancelToken;
use wasmsand_model::egress::{DenyReason, EgressPolicy, normalize_host};

/// Caps on one run's use of the network.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct NetLimits {
    /// Requests per run.
    pub max_requests: u64,
    /// Response bytes per run (bodies; a body past what is left is cut and flagged).
    pub max_bytes: u64,
    /// Longest one request may take (connect to last byte).
    pub request_timeout_ms: u64,
}

impl Default for NetLimits {
    fn default() -> Self {
        NetLimits {
            max_requests: 200,
            max_bytes: 64 << 20,
            request_timeout_ms: 30_000,
        }
    }
}

/// One decision of the door, for the embedder's audit trail.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EgressEvent {
    /// The URL's host (a name or an address).
    pub host: String,
    /// The address connected to (or refused); none when the name was never resolved.
    pub ip: Option<IpAddr>,
    /// The rule that matched, as written in the allowlist.
    pub matched_rule: Option<String>,
    /// `None`: allowed; else `no_match`, `dns_mismatch`, `policy_changed` or
    /// `forbidden_address`.
    pub denied: Option<&'static str>,
}

/// Receives every decision.
pub type EgressSink = Arc<dyn Fn(&EgressEvent) + Send + Sync>;

/// Resolves a host name to its addresses (see [`Network::resolver`]).
pub type Resolver = Arc<dyn Fn(&str) -> std::io::Result<Vec<IpAddr>> + Send + Sync>;

/// What a sandbox may reach (network policy `allowlist`). A sandbox without one has no network
/// at all: its `curl` says so.
#[derive(Clone)]
pub struct Network {
    /// The effective allowlist (already narrowed by whoever grants it).
    pub allowlist: EgressPolicy,
    /// Names answered with these addresses instead of DNS (as curl's `--resolve`).
    pub resolve: BTreeMap<String, Vec<IpAddr>>,
    /// Answers names not in [`Self::resolve`] instead of the system's DNS (an embedder's own
    /// resolver, or a test's). Whatever it answers, a run asks once per name: the answer is
    /// pinned for the rest of the run.
    pub resolver: Option<Resolver>,
    /// Caps per run.
    pub limits: NetLimits,
    /// Certificate authorities trusted for `https://` besides the system's (PEM text, one or
    /// more certificates each).
    pub ca_pem: Vec<String>,
    /// Told every decision (allowed and denied), on the run's thread.
    pub on_event: Option<EgressSink>,
}

impl std::fmt::Debug for Network {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Network")
            .field("allowlist", &self.allowlist)
            .field("resolve", &self.resolve)
            .field("limits", &self.limits)
            .finish_non_exhaustive()
    }
}

impl Network {
    /// A policy allowing `allowlist`, with the default limits and DNS.
    pub fn allow(allowlist: EgressPolicy) -> Network {
        Network {
            allowlist,
            resolve: BTreeMap::new(),
            resolver: None,
            limits: NetLimits::default(),
            ca_pem: Vec::new(),
            on_event: None,
        }
    }
}

/// The door's decisions for connections made outside a wasm guest (the Docker tier's egress
/// proxy): the same rules, pins, reasons, messages and events as a run's `curl`. One gate
/// stands for one run; [`Gate::next_run`] starts the next with fresh pins and counts.
pub struct Gate {
    door: Mutex<Arc<Door>>,
}

/// Why the gate refused.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GateRefusal {
    /// `denied`, `resolve` or `limit`.
    pub kind: &'static str,
    /// What an agent can act on: the host, the address and the rule set.
    pub message: String,
}

impl Gate {
    /// A gate for `net`'s policy and limits.
    pub fn new(net: Network) -> Gate {
        Gate {
            door: Mutex::new(Arc::new(Door::new(net))),
        }
    }

    /// Forgets the pins and counts of the run before.
    pub fn next_run(&self) {
        let mut d = self.door.lock();
        *d = Arc::new(Door::new(d.net.clone()));
    }

    /// The caps of each run.
    pub fn limits(&self) -> NetLimits {
        self.door.lock().net.limits
    }

    /// One connection to `host` (a name or an address literal): the pinned address it may
    /// use, counted against the run's request cap and reported as an allowance, or why not
    /// (reported as a denial).
    pub fn admit(&self, host: &str) -> Result<IpAddr, GateRefusal> {
        let door = self.door.lock().clone();
        let bare = host.trim_start_matches('[').trim_end_matches(']');
        let ip = door
            .take_request()
            .and_then(|()| door.pick(bare, bare.parse().ok(), None, true))
            .map(|(ip, _)| ip)
            .map_err(|r| GateRefusal {
                kind: r.kind,
                message: r.message,
            })?;
        door.meter.sent.fetch_add(1, Ordering::SeqCst);
        Ok(ip)
    }

    /// Counts `n` bytes received for the run; false once the run's download cap is passed.
    pub fn downloaded(&self, n: u64) -> bool {
        let door = self.door.lock().clone();
        let max = door.net.limits.max_bytes;
        let within = door
            .meter
            .received
            .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |got| {
                (got + n <= max).then_some(got + n)
            })
            .is_ok();
        if !within {
            door.meter.hit_bytes.store(true, Ordering::SeqCst);
        }
        within
    }

    /// What the current run used: connections made, bytes received, and the caps it hit
    /// (`netRequests`, `netBytes`).
    pub fn used(&self) -> (u64, u64, Vec<String>) {
        let door = self.door.lock().clone();
        let mut u = wasmsand_model::Usage::default();
        door.meter.report(&mut u);
        (u.net_requests, u.net_bytes, u.limits_hit)
    }
}

/// One run's door: the policy, the names pinned so far, and what the run has used.
pub(crate) struct Door {
    net: Network,
    /// Made at the run's first `https://` request.
    tls: std::sync::OnceLock<Result<rustls::ClientConfig, String>>,
    pins: Mutex<BTreeMap<String, Vec<IpAddr>>>,
    /// Requests asked for, refused ones included (what the request cap counts).
    requests: AtomicU64,
    /// What the run used, for its receipt; its bytes are what the download cap counts.
    pub(crate) meter: Arc<NetMeter>,
}

/// A run's network use, read when it ends.
#[derive(Debug, Default)]
pub(crate) struct NetMeter {
    /// Requests (connections, in the Docker tier) that went out.
    pub sent: AtomicU64,
    /// Bytes received.
    pub received: AtomicU64,
    pub hit_requests: std::sync::atomic::AtomicBool,
    pub hit_bytes: std::sync::atomic::AtomicBool,
}

impl NetMeter {
    /// Fills the network fields of a run's usage.
    pub(crate) fn report(&self, usage: &mut wasmsand_model::Usage) {
        usage.net_requests = self.sent.load(Ordering::SeqCst);
        usage.net_bytes = self.received.load(Ordering::SeqCst);
        if self.hit_requests.load(Ordering::SeqCst) {
            usage.limits_hit.push("netRequests".into());
        }
        if self.hit_bytes.load(Ordering::SeqCst) {
            usage.limits_hit.push("netBytes".into());
        }
    }
}

/// Why a request was not answered with a response.
struct Refusal {
    kind: &'static str,
    message: String,
}

fn refuse(kind: &'static str, message: impl Into<String>) -> Refusal {
    Refusal {
        kind,
        message: message.into(),
    }
}

impl Door {
    pub(crate) fn new(net: Network) -> Door {
        Door {
            net,
            tls: std::sync::OnceLock::new(),
            pins: Mutex::new(BTreeMap::new()),
            requests: AtomicU64::new(0),
            meter: Arc::default(),
        }
    }

    /// Counts one request against the run's cap; the refusal once it is used up.
    fn take_request(&self) -> Result<(), Refusal> {
        let n = self.requests.fetch_add(1, Ordering::SeqCst) + 1;
        if n > self.net.limits.max_requests {
            self.meter.hit_requests.store(true, Ordering::SeqCst);
            return Err(refuse(
                "limit",
                format!(
                    "the run's network request limit ({}) is used up",
                    self.net.limits.max_requests
                ),
            ));
        }
        Ok(())
    }

    /// Answers one `http` or `connect` frame.
    pub(crate) fn answer(&self, req: &Value, cancel: &CancelToken) -> Value {
        let id = req.get("id").cloned().unwrap_or(Value::Null);
        let outcome = if req["op"] == "connect" {
            self.connect(req)
        } else {
            self.request(req, cancel)
        };
        match outcome {
            Ok(mut ok) => {
                ok["v"] = json!(1);
                ok["id"] = id;
                ok["ok"] = json!(true);
                ok
            }
            Err(r) => json!({
                "v": 1, "id": id, "ok": false,
                "error": { "kind": r.kind, "message": r.message },
            }),
        }
    }

    fn report(
        &self,
        host: &str,
        ip: Option<IpAddr>,
        rule: Option<String>,
        denied: Option<DenyReason>,
    ) {
        if let Some(sink) = &self.net.on_event {
            sink(&EgressEvent {
                host: host.to_string(),
                ip,
                matched_rule: rule,
                denied: denied.map(DenyReason::as_str),
            });
        }
    }

    /// The rules, for a refusal's message.
    fn rules(&self) -> String {
        let l = self.net.allowlist.to_allowlist();
        let mut parts = Vec::new();
        for (name, v) in [("hosts", &l.hosts), ("cidrs", &l.cidrs), ("ips", &l.ips)] {
            if !v.is_empty() {
                parts.push(format!("{name} {}", v.join(" ")));
            }
        }
        if parts.is_empty() {
            "the allowlist is empty".into()
        } else {
            format!("allowlist: {}", parts.join("; "))
        }
    }

    fn connect(&self, req: &Value) -> Result<Value, Refusal> {
        let host = req["host"]
            .as_str()
            .filter(|h| !h.is_empty())
            .ok_or_else(|| refuse("bad_request", "no host"))?;
        let bare = host.trim_start_matches('[').trim_end_matches(']');
        let (ip, _) = self.pick(bare, bare.parse().ok(), None, false)?;
        Ok(json!({ "ip": ip.to_string() }))
    }

    /// The address to connect to for `host`, by the policy and the run's pins; `claimed` is
    /// an address the program names for it itself. Denials are always reported, allowances
    /// when `report_allowed`.
    fn pick(
        &self,
        host: &str,
        literal: Option<IpAddr>,
        claimed: Option<IpAddr>,
        report_allowed: bool,
    ) -> Result<(IpAddr, String), Refusal> {
        let allowed = |d: wasmsand_model::egress::Decision, ip: IpAddr| {
            let rule = d.matched_rule.clone().unwrap_or_default();
            if report_allowed {
                self.report(host, Some(ip), d.matched_rule, None);
            }
            (ip, rule)
        };
        let policy = &self.net.allowlist;
        let deny = |d: wasmsand_model::egress::Decision, ip: Option<IpAddr>| {
            self.report(host, ip, d.matched_rule.clone(), d.denied);
            refuse(
                "denied",
                format!(
                    "blocked by sandbox network policy: {} ({})",
                    d.message,
                    self.rules()
                ),
            )
        };
        if let Some(ip) = literal {
            let d = policy.check_addr(None, ip);
            return if d.allowed() {
                Ok(allowed(d, ip))
            } else {
                Err(deny(d, Some(ip)))
            };
        }
        let name = normalize_host(host);
        if let Some(ip) = claimed {
            // An address the policy allows as an address needs no name behind it.
            let d = policy.check_addr(None, ip);
            if d.allowed() {
                return Ok(allowed(d, ip));
            }
        }
        let fixed = self.net.resolve.get(&name);
        if policy.host_rule(&name).is_none() && fixed.is_none() {
            self.report(host, None, None, Some(DenyReason::NoMatch));
            return Err(refuse(
                "denied",
                format!(
                    "blocked by sandbox network policy: host {name} not in allowlist ({})",
                    self.rules()
                ),
            ));
        }
        let addrs = {
            let pinned = self.pins.lock().get(&name).cloned();
            match pinned {
                Some(a) => a,
                None => {
                    let a = match (fixed, &self.net.resolver) {
                        (Some(a), _) => Ok(a.clone()),
                        (None, Some(r)) => r(&name),
                        (None, None) => resolve(&name),
                    }
                    .map_err(|e| {
                        refuse("resolve", format!("could not resolve host: {name} ({e})"))
                    })?;
                    // Pinned for the rest of the run: a later answer cannot move the name.
                    self.pins.lock().entry(name.clone()).or_insert(a).clone()
                }
            }
        };
        if let Some(ip) = claimed
            && !addrs.contains(&ip)
        {
            self.report(
                host,
                Some(ip),
                policy.host_rule(&name).map(ToString::to_string),
                Some(DenyReason::DnsMismatch),
            );
            let pinned: Vec<String> = addrs.iter().map(ToString::to_string).collect();
            return Err(refuse(
                "denied",
                format!(
                    "blocked by sandbox network policy: host {name} is pinned to {} for this \
                     run, not {ip} ({})",
                    pinned.join(", "),
                    self.rules()
                ),
            ));
        }
        let addrs = claimed.map_or(addrs, |ip| vec![ip]);
        let mut first_refusal = None;
        for ip in addrs {
            let d = policy.check_addr(Some(&name), ip);
            if d.allowed() {
                return Ok(allowed(d, ip));
            }
            first_refusal.get_or_insert((d, ip));
        }
        match first_refusal {
            Some((d, ip)) => Err(deny(d, Some(ip))),
            None => Err(refuse(
                "resolve",
                format!("could not resolve host: {name} (no address)"),
            )),
        }
    }

    fn request(&self, req: &Value, cancel: &CancelToken) -> Result<Value, Refusal> {
        let raw_url = req["url"]
            .as_str()
            .ok_or_else(|| refuse("bad_request", "no url"))?;
        let url = url::Url::parse(raw_url)
            .map_err(|e| refuse("bad_request", format!("URL rejected: {e}")))?;
        let tls = match url.scheme() {
            "http" => None,
            "https" => Some(
                self.tls
                    .get_or_init(|| tls_config(&self.net.ca_pem))
                    .clone()
                    .map_err(|e| refuse("tls", e))?,
            ),
            s => {
                return Err(refuse(
                    "unsupported",
                    format!("protocol \"{s}\" not supported"),
                ));
            }
        };
        if !url.username().is_empty() || url.password().is_some() {
            return Err(refuse(
                "bad_request",
                "credentials in the URL are not sent; use an Authorization header",
            ));
        }
        let (host, literal) = match url.host() {
            Some(url::Host::Domain(d)) => (d.to_string(), None),
            Some(url::Host::Ipv4(a)) => (a.to_string(), Some(IpAddr::V4(a))),
            Some(url::Host::Ipv6(a)) => (a.to_string(), Some(IpAddr::V6(a))),
            None => return Err(refuse("bad_request", "URL has no host")),
        };
        let port = url.port_or_known_default().unwrap_or(80);
        let claimed = match req.get("addr").and_then(Value::as_str) {
            Some(a) => Some(
                a.trim_start_matches('[')
                    .trim_end_matches(']')
                    .parse::<IpAddr>()
                    .map_err(|_| refuse("bad_request", format!("{a:?} is not an address")))?,
            ),
            None => None,
        };
        self.take_request()?;
        let (ip, _rule) = self.pick(&host, literal, claimed, true)?;
        let method = hyper::Method::from_bytes(req["method"].as_str().unwrap_or("GET").as_bytes())
            .map_err(|_| refuse("bad_request", "bad method"))?;
        let mut headers = hyper::HeaderMap::new();
        if let Some(list) = req["headers"].as_array() {
            for h in list {
                let (Some(k), Some(v)) = (h[0].as_str(), h[1].as_str()) else {
                    continue;
                };
                let name = hyper::header::HeaderName::from_bytes(k.as_bytes())
                    .map_err(|_| refuse("bad_request", format!("bad header name {k:?}")))?;
                let value = hyper::header::HeaderValue::from_str(v)
                    .map_err(|_| refuse("bad_request", format!("bad value of header {k}")))?;
                headers.append(name, value);
            }
        }
        let body = match req["body"].as_str() {
            Some(b) => Some(
                base64::engine::general_purpose::STANDARD
                    .decode(b)
                    .map_err(|_| refuse("bad_request", "body is not base64"))?,
            ),
            None => None,
        };
        let timeout = Duration::from_millis(
            req["timeout_ms"]
                .as_u64()
                .unwrap_or(u64::MAX)
                .min(self.net.limits.request_timeout_ms),
        );
        let left = self
            .net
            .limits
            .max_bytes
            .saturating_sub(self.meter.received.load(Ordering::SeqCst));
        if left == 0 {
            self.meter.hit_bytes.store(true, Ordering::SeqCst);
            return Err(refuse(
                "limit",
                format!(
                    "the run's download limit ({} bytes) is used up",
                    self.net.limits.max_bytes
                ),
            ));
        }
        let pinned = SocketAddr::new(ip, port);
        let cancel = cancel.clone();
        let outcome = std::thread::scope(|s| {
            s.spawn(|| {
                fetch(
                    url, pinned, tls, method, headers, body, timeout, left, &cancel,
                )
            })
            .join()
            .unwrap_or_else(|_| Err(refuse("connect", "the request failed inside the host")))
        })?;
        self.meter.sent.fetch_add(1, Ordering::SeqCst);
        self.meter
            .received
            .fetch_add(outcome.body.len() as u64, Ordering::SeqCst);
        if outcome.truncated {
            self.meter.hit_bytes.store(true, Ordering::SeqCst);
        }
        Ok(json!({
            "status": outcome.status,
            "reason": outcome.reason,
            "version": outcome.version,
            "headers": outcome.headers,
            "body": base64::engine::general_purpose::STANDARD.encode(&outcome.body),
            "truncated": outcome.truncated,
            "ip": ip.to_string(),
        }))
    }
}

/// The system's trusted roots (`/etc/ssl/certs`), read once per process.
fn system_roots() -> &'static rustls::RootCertStore {
    static ROOTS: std::sync::OnceLock<rustls::RootCertStore> = std::sync::OnceLock::new();
    ROOTS.get_or_init(|| {
        let mut store = rustls::RootCertStore::empty();
        for cert in rustls_native_certs::load_native_certs().certs {
            // A certificate the store cannot use is skipped, as every TLS client does.
            let _ = store.add(cert);
        }
        store
    })
}

/// TLS for `https://`: ring's primitives, the system's roots plus `extra` (PEM).
fn tls_config(extra: &[String]) -> Result<rustls::ClientConfig, String> {
    use rustls::pki_types::CertificateDer;
    use rustls::pki_types::pem::PemObject as _;
    let mut roots = system_roots().clone();
    for pem in extra {
        for cert in CertificateDer::pem_slice_iter(pem.as_bytes()) {
            let cert =
                cert.map_err(|e| format!("a configured CA certificate is unreadable: {e}"))?;
            roots
                .add(cert)
                .map_err(|e| format!("a configured CA certificate is refused: {e}"))?;
        }
    }
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    // hyper-rustls sets ALPN itself (HTTP/1.1 only: `enable_http1`).
    let cfg = rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|e| e.to_string())?
        .with_root_certificates(roots)
        .with_no_client_auth();
    Ok(cfg)
}

fn resolve(name: &str) -> std::io::Result<Vec<IpAddr>> {
    use std::net::ToSocketAddrs;
    let mut out: Vec<IpAddr> = Vec::new();
    for a in (name, 0).to_socket_addrs()? {
        if !out.contains(&a.ip()) {
            out.push(a.ip());
        }
    }
    Ok(out)
}

struct Fetched {
    status: u16,
    reason: String,
    version: &'static str,
    headers: Vec<(String, String)>,
    body: Vec<u8>,
    truncated: bool,
}

/// Connects every name to the one pinned address (the client is made per request).
#[derive(Clone)]
struct Pinned(SocketAddr);

impl tower_service::Service<hyper_util::client::legacy::connect::dns::Name> for Pinned {
    type Response = std::iter::Once<SocketAddr>;
    type Error = std::io::Error;
    type Future = std::future::Ready<Result<Self::Response, Self::Error>>;

    fn poll_ready(
        &mut self,
        _: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Result<(), Self::Error>> {
        std::task::Poll::Ready(Ok(()))
    }

    fn call(&mut self, _: hyper_util::client::legacy::connect::dns::Name) -> Self::Future {
        std::future::ready(Ok(std::iter::once(self.0)))
    }
}

type Body = http_body_util::Full<bytes::Bytes>;

/// One request on a runtime of its own (the caller is a guest's thread), connected to `addr`
/// whatever the URL's host says (the host name still goes in `Host` and in TLS's SNI, and the
/// certificate is verified against it).
#[allow(clippy::too_many_arguments)]
fn fetch(
    url: url::Url,
    addr: SocketAddr,
    tls: Option<rustls::ClientConfig>,
    method: hyper::Method,
    headers: hyper::HeaderMap,
    body: Option<Vec<u8>>,
    timeout: Duration,
    max_body: u64,
    cancel: &CancelToken,
) -> Result<Fetched, Refusal> {
    use hyper_util::client::legacy::Client;
    use hyper_util::client::legacy::connect::HttpConnector;
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| refuse("connect", e.to_string()))?;
    let mut req = hyper::Request::builder()
        .method(method)
        .uri(url.as_str())
        .body(Body::new(body.unwrap_or_default().into()))
        .map_err(|e| refuse("bad_request", e.to_string()))?;
    *req.headers_mut() = headers;
    rt.block_on(async {
        let mut http = HttpConnector::new_with_resolver(Pinned(addr));
        http.enforce_http(tls.is_none());
        http.set_connect_timeout(Some(timeout));
        let builder = Client::builder(hyper_util::rt::TokioExecutor::new());
        let work = async {
            match tls {
                None => {
                    let mut b = builder;
                    exchange(b.pool_max_idle_per_host(0).build(http), req, max_body).await
                }
                Some(cfg) => {
                    let https = hyper_rustls::HttpsConnectorBuilder::new()
                        .with_tls_config(cfg)
                        .https_only()
                        .enable_http1()
                        .wrap_connector(http);
                    let mut b = builder;
                    exchange(b.pool_max_idle_per_host(0).build(https), req, max_body).await
                }
            }
        };
        let cancelled = async {
            while !cancel.is_cancelled() {
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
        };
        tokio::select! {
            r = tokio::time::timeout(timeout, work) => r.unwrap_or_else(|_| {
                Err(refuse("timeout", format!("operation timed out after {} ms", timeout.as_millis())))
            }),
            () = cancelled => Err(refuse("timeout", "the run was stopped")),
        }
    })
}

/// Sends `req` and reads the response, its body up to `max_body` bytes.
async fn exchange<C>(
    client: hyper_util::client::legacy::Client<C, Body>,
    req: hyper::Request<Body>,
    max_body: u64,
) -> Result<Fetched, Refusal>
where
    C: hyper_util::client::legacy::connect::Connect + Clone + Send + Sync + 'static,
{
    use http_body_util::BodyExt as _;
    let resp = client.request(req).await.map_err(|e| classify(&e))?;
    let status = resp.status();
    let version = match resp.version() {
        hyper::Version::HTTP_10 => "HTTP/1.0",
        hyper::Version::HTTP_2 => "HTTP/2",
        _ => "HTTP/1.1",
    };
    let headers = resp
        .headers()
        .iter()
        .map(|(k, v)| {
            (
                k.as_str().to_string(),
                String::from_utf8_lossy(v.as_bytes()).into_owned(),
            )
        })
        .collect();
    let mut incoming = resp.into_body();
    let mut body = Vec::new();
    let mut truncated = false;
    while let Some(frame) = incoming.frame().await {
        let frame = frame.map_err(|e| {
            refuse(
                "connect",
                format!("the response broke off: {}", root_cause(&e)),
            )
        })?;
        let Ok(chunk) = frame.into_data() else {
            continue;
        };
        let room = max_body.saturating_sub(body.len() as u64) as usize;
        if chunk.len() > room {
            body.extend_from_slice(&chunk[..room]);
            truncated = true;
            break;
        }
        body.extend_from_slice(&chunk);
    }
    Ok(Fetched {
        status: status.as_u16(),
        reason: status.canonical_reason().unwrap_or("").to_string(),
        version,
        headers,
        body,
        truncated,
    })
}

fn classify(e: &hyper_util::client::legacy::Error) -> Refusal {
    let cause = root_cause(e);
    if cause.contains("certificate") || cause.contains("InvalidCertificate") {
        refuse("tls", format!("SSL certificate problem: {cause}"))
    } else if e.is_connect() {
        refuse("connect", format!("failed to connect: {cause}"))
    } else {
        refuse("connect", cause)
    }
}

fn root_cause(e: &dyn std::error::Error) -> String {
    let mut cur = e;
    while let Some(next) = cur.source() {
        cur = next;
    }
    cur.to_string()
}

/// A run's tool-call channel when the sandbox has a network: `http` frames go to the door,
/// everything else to the host tools.
pub(crate) struct Channel {
    pub tools: wasmsand_cpython::ToolSetHandler,
    pub door: Door,
}

fn is_http(request: &[u8]) -> Option<Value> {
    let v: Value = serde_json::from_slice(request).ok()?;
    (v["op"] == "http" || v["op"] == "connect").then_some(v)
}

impl wasmsand_exec::ToolCallHandler for Channel {
    fn call(
        &self,
        request: &[u8],
        index: u64,
        cancel: &CancelToken,
    ) -> Result<Vec<u8>, wasmsand_exec::ToolCallFault> {
        match is_http(request) {
            Some(v) => serde_json::to_vec(&self.door.answer(&v, cancel))
                .map_err(|e| wasmsand_exec::ToolCallFault(e.to_string())),
            None => self.tools.call(request, index, cancel),
        }
    }

    fn over_budget(
        &self,
        request: &[u8],
        max_calls: u64,
    ) -> Result<Vec<u8>, wasmsand_exec::ToolCallFault> {
        match is_http(request) {
            Some(v) => serde_json::to_vec(&json!({
                "v": 1, "id": v["id"], "ok": false,
                "error": {
                    "kind": "limit",
                    "message": format!("the run's host call limit ({max_calls}) is used up"),
                },
            }))
            .map_err(|e| wasmsand_exec::ToolCallFault(e.to_string())),
            None => self.tools.over_budget(request, max_calls),
        }
    }

    fn counts(&self, request: &[u8]) -> bool {
        is_http(request).is_some() || self.tools.counts(request)
    }
}
