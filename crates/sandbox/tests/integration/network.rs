//! The network door with `curl` and `wget` against a real HTTP server on loopback: what the
//! allowlist allows goes through (names pinned per run, redirects checked hop by hop), what it
//! does not is refused with curl's exit code and a message naming the host, the address and the
//! rules, every decision reaches the embedder, and the run's caps hold.

use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;

use axum::Router;
use axum::body::Bytes;
use axum::extract::Path;
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Redirect};
use axum::routing::{any, get, post};
use parking_lot::Mutex;
use wasmsand::egress::{EgressAllowlist, EgressPolicy};
use wasmsand::{EgressEvent, NetLimits, Network, Sandbox, SandboxOptions};

/// A test server on 127.0.0.1, on a runtime of its own (the sandbox's runs block).
pub(crate) fn server() -> SocketAddr {
    let app = Router::new()
        .route("/hello", get(|| async { "hello from the host\n" }))
        .route(
            "/echo",
            any(|headers: HeaderMap, body: Bytes| async move {
                let ct = headers
                    .get("content-type")
                    .map(|v| v.to_str().unwrap_or("").to_string())
                    .unwrap_or_default();
                let auth = headers
                    .get("authorization")
                    .map(|v| v.to_str().unwrap_or("").to_string())
                    .unwrap_or_default();
                format!(
                    "ct={ct} auth={auth} body={}\n",
                    String::from_utf8_lossy(&body)
                )
            }),
        )
        .route(
            "/missing",
            get(|| async { (StatusCode::NOT_FOUND, "nope\n") }),
        )
        .route("/to-hello", get(|| async { Redirect::to("/hello") }))
        .route(
            "/to/{host}",
            get(|Path(host): Path<String>| async move {
                Redirect::to(&format!("http://{host}/hello")).into_response()
            }),
        )
        .route("/big", get(|| async { vec![b'x'; 300_000] }))
        // A git server whose pack is larger than a capped run may download.
        .route("/huge.git/info/refs", get(|| async { git_advert() }))
        .route(
            "/huge.git/git-upload-pack",
            post(|| async {
                let mut body = b"0008NAK\n".to_vec();
                body.resize(600_000, b'0');
                (
                    [("content-type", "application/x-git-upload-pack-result")],
                    body,
                )
            }),
        );
    serve(app)
}

/// Serves `app` on 127.0.0.1 from a thread of its own (the tests are synchronous).
pub(crate) fn serve(app: Router) -> SocketAddr {
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        rt.block_on(async move {
            let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
            tx.send(listener.local_addr().unwrap()).unwrap();
            axum::serve(listener, app).await.unwrap();
        });
    });
    rx.recv().unwrap()
}

/// A smart-HTTP ref advertisement of one branch.
fn git_advert() -> impl IntoResponse {
    let pkt = |s: &str| format!("{:04x}{s}", s.len() + 4);
    let id = "1".repeat(40);
    let body = format!(
        "{}0000{}{}0000",
        pkt("# service=git-upload-pack\n"),
        pkt(&format!(
            "{id} HEAD\0side-band-64k ofs-delta symref=HEAD:refs/heads/main\n"
        )),
        pkt(&format!("{id} refs/heads/main\n")),
    );
    (
        [(
            "content-type",
            "application/x-git-upload-pack-advertisement",
        )],
        body,
    )
}

pub(crate) fn policy(hosts: &[&str], ips: &[&str]) -> EgressPolicy {
    EgressPolicy::parse(&EgressAllowlist {
        hosts: hosts.iter().map(|s| s.to_string()).collect(),
        cidrs: Vec::new(),
        ips: ips.iter().map(|s| s.to_string()).collect(),
    })
    .unwrap()
}

pub(crate) type Events = Arc<Mutex<Vec<EgressEvent>>>;

pub(crate) fn sandbox(allow: EgressPolicy, limits: NetLimits) -> (Sandbox, Events) {
    let events: Events = Arc::default();
    let sink = events.clone();
    let loopback: IpAddr = "127.0.0.1".parse().unwrap();
    let sb = Sandbox::new(SandboxOptions {
        network: Some(Network {
            allowlist: allow,
            resolve: [
                ("api.test".to_string(), vec![loopback]),
                ("other.test".to_string(), vec![loopback]),
            ]
            .into(),
            resolver: None,
            limits,
            ca_pem: Vec::new(),
            on_event: Some(Arc::new(move |e: &EgressEvent| sink.lock().push(e.clone()))),
        }),
        ..SandboxOptions::default()
    });
    (sb, events)
}

#[test]
fn curl_and_wget_reach_what_the_allowlist_allows() {
    let addr = server();
    let port = addr.port();
    let (sb, events) = sandbox(policy(&["api.test"], &["127.0.0.1"]), NetLimits::default());

    let r = sb
        .run(&format!("curl -s http://api.test:{port}/hello"))
        .unwrap();
    assert_eq!(
        (r.exit_code, r.stdout.as_str()),
        (0, "hello from the host\n"),
        "{r:?}"
    );
    let seen = events.lock().clone();
    assert_eq!(seen.len(), 1, "{seen:?}");
    assert_eq!(seen[0].host, "api.test");
    assert_eq!(seen[0].ip, Some("127.0.0.1".parse().unwrap()));
    assert_eq!(seen[0].matched_rule.as_deref(), Some("127.0.0.1"));
    assert_eq!(seen[0].denied, None);

    // Options agents use: data, headers, basic auth, -w, -o, -i, -f, -L.
    let script = format!(
        "curl -sS -X PUT -H 'Content-Type: text/plain' -u me:pw --data-binary @- \
         http://api.test:{port}/echo <<< 'payload'; \
         curl -s -o got.txt -w '%{{http_code}} %{{size_download}}\\n' http://api.test:{port}/hello; \
         cat got.txt; \
         curl -si http://api.test:{port}/hello | head -1 | tr -d '\\r'; \
         curl -sSf http://api.test:{port}/missing; echo \"exit=$?\"; \
         curl -s -o /dev/null -w '%{{http_code}}\\n' http://api.test:{port}/missing; \
         curl -sL http://api.test:{port}/to-hello; \
         curl -s -w '%{{http_code}}\\n' http://api.test:{port}/to-hello; \
         wget -q -O - http://api.test:{port}/hello; \
         wget -q http://api.test:{port}/hello && cat hello"
    );
    let r = sb.run(&script).unwrap();
    assert_eq!(
        r.stdout,
        "ct=text/plain auth=Basic bWU6cHc= body=payload\n\n\
         200 20\nhello from the host\n\
         HTTP/1.1 200 OK\n\
         exit=22\n\
         404\n\
         hello from the host\n\
         303\n\
         hello from the host\n\
         hello from the host\n",
        "{}",
        r.stderr
    );
    assert!(
        r.stderr
            .contains("curl: (22) The requested URL returned error: 404"),
        "{}",
        r.stderr
    );
}

#[test]
fn what_the_allowlist_does_not_allow_is_refused_clearly() {
    let addr = server();
    let port = addr.port();
    // api.test is allowed by name, but it resolves to loopback, which no ip rule names.
    let (sb, events) = sandbox(policy(&["api.test"], &[]), NetLimits::default());
    let r = sb
        .run(&format!("curl -sS http://api.test:{port}/hello"))
        .unwrap();
    assert_eq!(r.exit_code, 7, "{r:?}");
    assert!(
        r.stderr.contains("curl: (7) blocked by sandbox network policy: host api.test (127.0.0.1) is a loopback address"),
        "{}",
        r.stderr
    );
    // A name no rule matches is not even resolved.
    let r = sb.run("curl -sS http://example.org/").unwrap();
    assert_eq!(r.exit_code, 7);
    assert_eq!(
        r.stderr,
        "curl: (7) blocked by sandbox network policy: host example.org not in allowlist \
         (allowlist: hosts api.test)\n"
    );
    let r = sb
        .run(&format!("curl -s http://127.0.0.1:{port}/hello"))
        .unwrap();
    assert_eq!(
        (r.exit_code, r.stderr.as_str()),
        (7, ""),
        "-s hides the message"
    );
    let r = sb
        .run(&format!("wget -q http://127.0.0.1:{port}/hello"))
        .unwrap();
    assert_eq!(r.exit_code, 4, "{r:?}");
    let seen = events.lock().clone();
    let reasons: Vec<_> = seen.iter().map(|e| (e.host.as_str(), e.denied)).collect();
    assert_eq!(
        reasons,
        [
            ("api.test", Some("forbidden_address")),
            ("example.org", Some("no_match")),
            ("127.0.0.1", Some("forbidden_address")),
            ("127.0.0.1", Some("forbidden_address")),
        ]
    );

    // A redirect to a host the list does not allow is refused at that hop.
    let (sb, _) = sandbox(policy(&["api.test"], &["127.0.0.1"]), NetLimits::default());
    let r = sb
        .run(&format!(
            "curl -sSL http://api.test:{port}/to/evil.test:{port}"
        ))
        .unwrap();
    assert_eq!(r.exit_code, 7, "{r:?}");
    assert!(
        r.stderr.contains("host evil.test not in allowlist"),
        "{}",
        r.stderr
    );

    // No network policy at all: curl says so, and the sandbox goes on.
    let plain = Sandbox::new(SandboxOptions::default());
    let r = plain.run("curl -sS http://api.test/; echo after").unwrap();
    assert_eq!(r.stdout, "after\n");
    assert!(
        r.stderr
            .contains("curl: (7) network access is off in this sandbox"),
        "{}",
        r.stderr
    );
    let r = sb.run("curl -sS ftp://api.test/").unwrap();
    assert_eq!(r.exit_code, 1, "{r:?}");
    assert!(
        r.stderr.contains("protocol \"ftp\" not supported"),
        "{}",
        r.stderr
    );
}

#[test]
fn the_runs_network_caps_hold_and_the_sandbox_stays_usable() {
    let addr = server();
    let port = addr.port();
    let limits = NetLimits {
        max_requests: 3,
        max_bytes: 500_000,
        request_timeout_ms: 5_000,
    };
    let (sb, _) = sandbox(policy(&["api.test"], &["127.0.0.1"]), limits);
    let r = sb
        .run(&format!(
            "for i in 1 2 3 4; do curl -sS -o /dev/null http://api.test:{port}/hello; echo \"$i:$?\"; done"
        ))
        .unwrap();
    assert_eq!(r.stdout, "1:0\n2:0\n3:0\n4:56\n", "{}", r.stderr);
    // The receipt says what went out and what came back, and which cap was hit.
    assert_eq!(r.usage.net_requests, 3);
    assert_eq!(r.usage.net_bytes, 3 * "hello from the host\n".len() as u64);
    assert!(
        r.usage.limits_hit.contains(&"netRequests".to_string()),
        "{:?}",
        r.usage
    );
    assert!(
        r.stderr.contains("network request limit (3)"),
        "{}",
        r.stderr
    );
    // A new run has a fresh budget; 300 kB twice passes the 500 kB cap.
    let r = sb
        .run(&format!(
            "curl -s http://api.test:{port}/big | wc -c; curl -sS http://api.test:{port}/big | wc -c"
        ))
        .unwrap();
    assert_eq!(r.stdout, "300000\n200000\n", "{}", r.stderr);
    assert!(r.stderr.contains("download limit"), "{}", r.stderr);
    assert_eq!((r.usage.net_requests, r.usage.net_bytes), (2, 500_000));
    assert_eq!(r.usage.limits_hit, vec!["netBytes".to_string()]);
    // A clone whose pack the cap cuts fails saying so, and leaves nothing behind.
    let r = sb
        .run(&format!(
            "cd /tmp && git clone http://api.test:{port}/huge.git; echo \"exit=$?\"; ls huge"
        ))
        .unwrap();
    assert!(r.stdout.starts_with("exit=128\n"), "{}", r.stdout);
    assert!(
        r.stderr
            .contains("was cut at the run's download limit; raise the sandbox's network byte limit or clone with --depth 1"),
        "{}",
        r.stderr
    );
    assert!(
        r.stderr.contains("No such file or directory"),
        "{}",
        r.stderr
    );
    let r = sb.run("echo still here").unwrap();
    assert_eq!(r.stdout, "still here\n");
}

/// Accepts TLS on a loopback listener with a certificate for `secure.test` signed by a test CA.
struct TlsListener {
    tcp: tokio::net::TcpListener,
    acceptor: tokio_rustls::TlsAcceptor,
}

impl axum::serve::Listener for TlsListener {
    type Io = tokio_rustls::server::TlsStream<tokio::net::TcpStream>;
    type Addr = SocketAddr;

    async fn accept(&mut self) -> (Self::Io, Self::Addr) {
        loop {
            let Ok((tcp, addr)) = self.tcp.accept().await else {
                continue;
            };
            // A client that fails the handshake (the untrusting one) is just dropped.
            if let Ok(tls) = self.acceptor.accept(tcp).await {
                return (tls, addr);
            }
        }
    }

    fn local_addr(&self) -> std::io::Result<Self::Addr> {
        self.tcp.local_addr()
    }
}

/// An HTTPS server for `secure.test` on 127.0.0.1, and the PEM of the CA that signed it.
pub(crate) fn tls_server() -> (SocketAddr, String) {
    use rcgen::{BasicConstraints, CertificateParams, IsCa, Issuer, KeyPair};
    let ca_key = KeyPair::generate().unwrap();
    let mut ca_params = CertificateParams::new(Vec::<String>::new()).unwrap();
    ca_params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    let ca_cert = ca_params.self_signed(&ca_key).unwrap();
    let issuer = Issuer::new(ca_params, ca_key);
    let key = KeyPair::generate().unwrap();
    let cert = CertificateParams::new(vec!["secure.test".to_string()])
        .unwrap()
        .signed_by(&key, &issuer)
        .unwrap();
    let chain = vec![cert.der().clone()];
    let der_key = rustls::pki_types::PrivateKeyDer::Pkcs8(key.serialize_der().into());
    let config = rustls::ServerConfig::builder_with_provider(Arc::new(
        rustls::crypto::ring::default_provider(),
    ))
    .with_safe_default_protocol_versions()
    .unwrap()
    .with_no_client_auth()
    .with_single_cert(chain, der_key)
    .unwrap();
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        rt.block_on(async move {
            let tcp = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
            tx.send(tcp.local_addr().unwrap()).unwrap();
            let listener = TlsListener {
                tcp,
                acceptor: tokio_rustls::TlsAcceptor::from(Arc::new(config)),
            };
            let app = Router::new().route("/hello", get(|| async { "hello over TLS\n" }));
            axum::serve(listener, app).await.unwrap();
        });
    });
    (rx.recv().unwrap(), ca_cert.pem())
}

/// A sandbox that may reach `secure.test` (pinned to loopback), trusting `cas` besides the
/// system's roots.
pub(crate) fn secure_sandbox(cas: Vec<String>) -> Sandbox {
    let loopback: IpAddr = "127.0.0.1".parse().unwrap();
    Sandbox::new(SandboxOptions {
        network: Some(Network {
            ca_pem: cas,
            resolve: [("secure.test".to_string(), vec![loopback])].into(),
            ..Network::allow(policy(&["secure.test"], &["127.0.0.1"]))
        }),
        ..SandboxOptions::default()
    })
}

#[test]
fn https_is_verified_against_the_system_roots_and_the_configured_cas() {
    let (addr, ca_pem) = tls_server();
    let port = addr.port();
    let make = secure_sandbox;
    let trusting = make(vec![ca_pem]);
    let r = trusting
        .run(&format!(
            "curl -sS https://secure.test:{port}/hello; wget -qO- https://secure.test:{port}/hello"
        ))
        .unwrap();
    assert_eq!(r.stdout, "hello over TLS\nhello over TLS\n", "{}", r.stderr);

    // The certificate names secure.test: reached by its address, it does not verify.
    let r = trusting
        .run(&format!("curl -sS https://127.0.0.1:{port}/hello"))
        .unwrap();
    assert_eq!(r.exit_code, 60, "{r:?}");
    assert!(
        r.stderr.contains("curl: (60) SSL certificate problem"),
        "{}",
        r.stderr
    );

    // Without the test CA, only the system's roots: refused.
    let plain = make(Vec::new());
    let r = plain
        .run(&format!("curl -sS https://secure.test:{port}/hello"))
        .unwrap();
    assert_eq!(r.exit_code, 60, "{r:?}");
    assert!(r.stderr.contains("SSL certificate problem"), "{}", r.stderr);
    let r = plain
        .run(&format!("wget -q https://secure.test:{port}/hello"))
        .unwrap();
    assert_eq!(r.exit_code, 5, "{r:?}");
}

/// A name is resolved once per run and pinned: a resolver that changes its answer mid-run
/// does not move the run's requests, and the next run asks again and gets the new answer.
#[test]
fn names_are_pinned_for_the_run_and_resolved_again_by_the_next() {
    let port = server().port();
    let asked = Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let count = asked.clone();
    let events: Events = Arc::default();
    let sink = events.clone();
    let sb = Sandbox::new(SandboxOptions {
        network: Some(Network {
            allowlist: policy(&["flip.test"], &["127.0.0.1"]),
            resolve: Default::default(),
            // The first answer is the server's address; every later one moves the name to
            // 127.0.0.2, where nothing listens.
            resolver: Some(Arc::new(move |name: &str| {
                assert_eq!(name, "flip.test");
                let n = count.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
                Ok(vec![
                    if n == 0 { "127.0.0.1" } else { "127.0.0.2" }
                        .parse()
                        .unwrap(),
                ])
            })),
            limits: NetLimits::default(),
            ca_pem: Vec::new(),
            on_event: Some(Arc::new(move |e: &EgressEvent| sink.lock().push(e.clone()))),
        }),
        ..SandboxOptions::default()
    });
    let url = format!("http://flip.test:{port}/hello");
    let r = sb
        .run(&format!("curl -s {url}; curl -s {url}; wget -qO- {url}"))
        .unwrap();
    assert_eq!(r.stdout, "hello from the host\n".repeat(3), "{}", r.stderr);
    assert_eq!(asked.load(std::sync::atomic::Ordering::SeqCst), 1);
    // The next run resolves afresh: the name now answers 127.0.0.2, a loopback address no rule
    // names, so the rebinding is refused.
    let r = sb
        .run(&format!("curl -sS {url}; echo \"exit=$?\""))
        .unwrap();
    assert_eq!(r.stdout, "exit=7\n");
    assert!(
        r.stderr
            .contains("host flip.test (127.0.0.2) is a loopback address (127.0.0.0/8)"),
        "{}",
        r.stderr
    );
    let ips: Vec<String> = events
        .lock()
        .iter()
        .map(|e| e.ip.map(|i| i.to_string()).unwrap_or_default())
        .collect();
    assert_eq!(ips, ["127.0.0.1", "127.0.0.1", "127.0.0.1", "127.0.0.2"]);
}

/// curl's `--resolve` names an address for a host: the run connects there only when it pinned
/// the name to it or a rule allows the address itself; any other is `dns_mismatch`.
#[test]
fn an_address_the_program_names_must_be_the_pinned_one() {
    let port = server().port();
    let (sb, events) = sandbox(policy(&["api.test"], &["127.0.0.1"]), NetLimits::default());
    let url = format!("http://api.test:{port}/hello");
    let r = sb
        .run(&format!(
            "curl -s --resolve api.test:{port}:127.0.0.1 {url}"
        ))
        .unwrap();
    assert_eq!(r.stdout, "hello from the host\n", "{}", r.stderr);

    let r = sb
        .run(&format!(
            "curl -sS --resolve api.test:{port}:127.0.0.3 {url}; echo \"exit=$?\""
        ))
        .unwrap();
    assert_eq!(r.stdout, "exit=7\n");
    assert!(
        r.stderr.contains(
            "curl: (7) blocked by sandbox network policy: host api.test is pinned to 127.0.0.1 \
             for this run, not 127.0.0.3 (allowlist: hosts api.test; ips 127.0.0.1)"
        ),
        "{}",
        r.stderr
    );
    let last = events.lock().last().cloned().unwrap();
    assert_eq!(
        last,
        EgressEvent {
            host: "api.test".into(),
            ip: Some("127.0.0.3".parse().unwrap()),
            matched_rule: Some("api.test".into()),
            denied: Some("dns_mismatch"),
        }
    );

    // An entry for another port does not apply; an address an ips rule allows needs no name
    // behind it.
    let r = sb
        .run(&format!(
            "curl -s --resolve api.test:1:127.0.0.3 {url}; \
             curl -s --resolve nameless.test:{port}:127.0.0.1 http://nameless.test:{port}/hello"
        ))
        .unwrap();
    assert_eq!(r.stdout, "hello from the host\n".repeat(2), "{}", r.stderr);
    let r = sb
        .run("curl --resolve api.test:80:nowhere http://api.test/; echo \"exit=$?\"")
        .unwrap();
    assert_eq!(r.stdout, "exit=2\n");
    assert!(r.stderr.contains("option --resolve"), "{}", r.stderr);
}
