//! Python's HTTP clients and pip over the network door, against real servers on loopback:
//! `urllib.request`, `http.client` and (once pip installed it) `requests` unchanged, TLS
//! verified by the host, refusals raised where the clients expect them, and `pip install`
//! of pure wheels (with their dependencies) from a PEP 503 index built from wheels that pip
//! downloaded from PyPI, seen by later runs and by forks.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use axum::Router;
use axum::extract::Path as UrlPath;
use axum::http::StatusCode;
use axum::response::{Html, IntoResponse};
use axum::routing::get;
use wasmsand::{NetLimits, Sandbox, SandboxOptions};

use crate::network::{policy, sandbox, secure_sandbox, serve, server, tls_server};

/// Runs `code` as a Python program; its stdout, with stderr on failure.
fn py(sb: &Sandbox, code: &str) -> (i32, String, String) {
    sb.write_file("/tmp/prog.py", code.as_bytes()).unwrap();
    let r = sb.run("python3 /tmp/prog.py").unwrap();
    (r.exit_code, r.stdout, r.stderr)
}

#[test]
fn urllib_and_http_client_go_through_the_door() {
    let addr = server();
    let port = addr.port();
    let (sb, events) = sandbox(policy(&["api.test"], &["127.0.0.1"]), NetLimits::default());
    let code = format!(
        r#"
import http.client, json, urllib.request, urllib.error
base = "http://api.test:{port}"
print(urllib.request.urlopen(base + "/hello").read().decode(), end="")
req = urllib.request.Request(base + "/echo", data=b"payload", method="PUT",
                             headers={{"Content-Type": "text/plain", "Authorization": "Bearer t"}})
print(urllib.request.urlopen(req).read().decode(), end="")
# urllib follows the redirect itself; each hop goes through the policy.
r = urllib.request.urlopen(base + "/to-hello")
print(r.status, r.url.endswith("/hello"), r.read().decode(), end="")
try:
    urllib.request.urlopen(base + "/missing")
except urllib.error.HTTPError as e:
    print("HTTPError", e.code, e.read().decode(), end="")
c = http.client.HTTPConnection("api.test", {port}, timeout=10)
c.request("POST", "/echo", body=iter([b"chunk", b"ed"]), headers={{"Content-Type": "a/b"}})
r = c.getresponse()
print(r.status, r.getheader("Connection"), r.read().decode(), end="")
c.request("GET", "/big")
print(len(c.getresponse().read()))
"#
    );
    let (rc, out, err) = py(&sb, &code);
    assert_eq!(rc, 0, "{err}");
    assert_eq!(
        out,
        "hello from the host\n\
         ct=text/plain auth=Bearer t body=payload\n\
         200 True hello from the host\n\
         HTTPError 404 nope\n\
         200 close ct=a/b auth= body=chunked\n\
         300000\n"
    );
    assert!(events.lock().iter().all(|e| e.denied.is_none()));

    // Refusals: at connect (a URLError naming the host and the rules), and at a redirect's hop.
    let code = format!(
        r#"
import socket, urllib.request, urllib.error
for url in ["http://example.org/", "http://api.test:{port}/to/denied.example"]:
    try:
        urllib.request.urlopen(url)
    except urllib.error.URLError as e:
        print(type(e.reason).__name__, e.reason.strerror)
try:
    socket.create_connection(("169.254.169.254", 80))
except ConnectionRefusedError as e:
    print("metadata:", e.strerror)
try:
    socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
except OSError as e:
    print("udp:", e.strerror)
"#
    );
    events.lock().clear();
    let (rc, out, err) = py(&sb, &code);
    assert_eq!(rc, 0, "{err}");
    let lines: Vec<&str> = out.lines().collect();
    assert_eq!(lines.len(), 4, "{out}");
    assert_eq!(
        lines[0],
        "ConnectionRefusedError blocked by sandbox network policy: host example.org not in \
         allowlist (allowlist: hosts api.test; ips 127.0.0.1)"
    );
    assert!(
        lines[1].starts_with("ConnectionRefusedError blocked by sandbox network policy: host denied.example not in allowlist"),
        "{out}"
    );
    assert!(
        lines[2]
            .starts_with("metadata: blocked by sandbox network policy: address 169.254.169.254"),
        "{out}"
    );
    assert!(lines[3].starts_with("udp: only TCP streams"), "{out}");
    let denied: Vec<_> = events
        .lock()
        .iter()
        .filter_map(|e| e.denied.map(|d| (e.host.clone(), d)))
        .collect();
    assert_eq!(
        denied,
        [
            ("example.org".to_string(), "no_match"),
            ("denied.example".to_string(), "no_match"),
            ("169.254.169.254".to_string(), "forbidden_address"),
        ]
    );
}

#[test]
fn python_without_a_network_policy_is_told_so() {
    let sb = Sandbox::new(SandboxOptions::default());
    let (rc, out, err) = py(
        &sb,
        "import urllib.request\ntry:\n    urllib.request.urlopen('http://example.org/')\n\
         except OSError as e:\n    print(e.reason)\n",
    );
    assert_eq!(rc, 0, "{err}");
    assert_eq!(
        out,
        "[Errno 14] network access is off in this sandbox (it has no network policy)\n"
    );
}

#[test]
fn python_https_is_verified_by_the_host() {
    let (addr, ca_pem) = tls_server();
    let port = addr.port();
    let make = secure_sandbox;
    let code = format!(
        r#"
import ssl, urllib.request, urllib.error, http.client
url = "https://secure.test:{port}/hello"
try:
    print(urllib.request.urlopen(url).read().decode(), end="")
except urllib.error.URLError as e:
    print("URLError", type(e.reason).__name__, "CERTIFICATE_VERIFY_FAILED" if isinstance(e.reason, ssl.SSLCertVerificationError) else e.reason)
c = http.client.HTTPSConnection("secure.test", {port}, context=ssl.create_default_context())
try:
    c.request("GET", "/hello")
    print(c.getresponse().read().decode(), end="")
except ssl.SSLError as e:
    print("SSLError", type(e).__name__)
"#
    );
    let (rc, out, err) = py(&make(vec![ca_pem]), &code);
    assert_eq!(rc, 0, "{err}");
    assert_eq!(out, "hello over TLS\nhello over TLS\n");
    // Without the test CA the host refuses the certificate, whatever the program asked for.
    let (rc, out, err) = py(&make(Vec::new()), &code);
    assert_eq!(rc, 0, "{err}");
    assert_eq!(
        out,
        "URLError SSLCertVerificationError CERTIFICATE_VERIFY_FAILED\n\
         SSLError SSLCertVerificationError\n"
    );
}

/// The wheels of `requests` and the dependencies the sandbox does not bundle, fetched once by
/// pip from its configured index (PyPI) with their hashes checked, kept in the target dir.
fn index_wheels() -> PathBuf {
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join("index-wheels-1");
    let wanted = [
        (
            "requests==2.32.3",
            "70761cfe03c773ceb22aa2f671b4757976145175cdfca038c02654d061d6dcc6",
        ),
        (
            "urllib3==2.8.0",
            "0cf3cae568d36aa9576b28dfb35f11328f1cb974ca7647d9475ebb86c75ac6e3",
        ),
        (
            "idna==3.20",
            "ab7ae7122974553370f0bdb919e1a960b2cd1bc1ef0276416d896db81c14582c",
        ),
        (
            "certifi==2026.10.19.post1",
            "1324c476b4811eff41a8bc2122cd0bbd4d9c7234c725446d99ab1612b3a7fdd2",
        ),
    ];
    if dir.is_dir() {
        return dir;
    }
    let staging = dir.with_extension(format!("part-{}", std::process::id()));
    std::fs::create_dir_all(&staging).unwrap();
    let reqs = staging.join("requirements.txt");
    let text: String = wanted
        .iter()
        .map(|(r, h)| format!("{r} --hash=sha256:{h}\n"))
        .collect();
    std::fs::write(&reqs, text).unwrap();
    let python = std::env::var("PYTHON").unwrap_or_else(|_| "python3".into());
    let status = std::process::Command::new(&python)
        .args([
            "-m",
            "pip",
            "download",
            "--no-deps",
            "--require-hashes",
            "--quiet",
        ])
        .args([
            "--only-binary",
            ":all:",
            "--disable-pip-version-check",
            "-r",
        ])
        .arg(&reqs)
        .arg("-d")
        .arg(&staging)
        .status()
        .expect("run pip to fetch the test index's wheels");
    assert!(
        status.success(),
        "`{python} -m pip download` of the test index's wheels failed"
    );
    std::fs::remove_file(&reqs).unwrap();
    // Another test process may have finished first; either copy is the same.
    if std::fs::rename(&staging, &dir).is_err() {
        std::fs::remove_dir_all(&staging).unwrap();
    }
    dir
}

/// A PEP 503 simple index on 127.0.0.1 serving `wheels`, plus two projects pip must refuse:
/// one with only a platform wheel, one with only a source distribution (neither is ever
/// downloaded, so their files are not served).
fn index_server(wheels: PathBuf) -> SocketAddr {
    let mut projects: std::collections::BTreeMap<String, Vec<String>> = Default::default();
    for entry in std::fs::read_dir(&wheels).unwrap() {
        let name = entry.unwrap().file_name().into_string().unwrap();
        let project = name
            .split('-')
            .next()
            .unwrap()
            .replace('_', "-")
            .to_lowercase();
        projects.entry(project).or_default().push(name);
    }
    projects.insert(
        "nativeonly".into(),
        vec!["nativeonly-1.0-cp312-cp312-manylinux_2_17_x86_64.whl".into()],
    );
    projects.insert("srconly".into(), vec!["srconly-1.0.tar.gz".into()]);
    let projects = Arc::new(projects);
    let listing = projects.clone();
    let app = Router::new()
        .route(
            "/simple/{project}/",
            get(move |UrlPath(project): UrlPath<String>| {
                let projects = listing.clone();
                async move {
                    let Some(files) = projects.get(&project) else {
                        return (StatusCode::NOT_FOUND, "no such project").into_response();
                    };
                    let links: String = files
                        .iter()
                        .map(|f| format!("<a href=\"/files/{f}\">{f}</a><br>\n"))
                        .collect();
                    Html(format!(
                        "<!DOCTYPE html><html><body>\n{links}</body></html>"
                    ))
                    .into_response()
                }
            }),
        )
        .route(
            "/files/{file}",
            get(move |UrlPath(file): UrlPath<String>| {
                let wheels = wheels.clone();
                async move {
                    match std::fs::read(wheels.join(&file)) {
                        Ok(bytes) if !file.contains('/') => bytes.into_response(),
                        _ => (StatusCode::NOT_FOUND, "no such file").into_response(),
                    }
                }
            }),
        );
    serve(app)
}

#[test]
fn pip_installs_pure_wheels_with_their_dependencies_from_an_allowlisted_index() {
    let index = index_server(index_wheels());
    let web = server();
    let (sb, _events) = sandbox(policy(&["api.test"], &["127.0.0.1"]), NetLimits::default());
    let simple = format!("http://api.test:{}/simple/", index.port());
    sb.write_file("/home/user/requirements.txt", b"requests==2.32.3\n")
        .unwrap();
    let r = sb
        .run(&format!(
            "PIP_INDEX_URL={simple} PIP_TRUSTED_HOST=api.test pip install -r requirements.txt"
        ))
        .unwrap();
    assert_eq!(r.exit_code, 0, "{}\n{}", r.stdout, r.stderr);
    assert!(
        r.stdout
            .contains("Successfully installed certifi-2026.10.19.post1 idna-3.20 requests-2.32.3 urllib3-2.8.0"),
        "{}",
        r.stdout
    );
    // charset-normalizer is bundled with the interpreter: pip sees it and takes it.
    assert!(
        r.stdout
            .contains("Requirement already satisfied: charset-normalizer"),
        "{}",
        r.stdout
    );

    let code = format!(
        "import requests\nr = requests.get('http://api.test:{}/hello', timeout=10)\n\
         print(r.status_code, r.text, end='')\n",
        web.port()
    );
    let (rc, out, err) = py(&sb, &code);
    assert_eq!(
        (rc, out.as_str()),
        (0, "200 hello from the host\n"),
        "{err}"
    );
    let fork = sb.fork().unwrap();
    let (rc, out, err) = py(&fork, &code);
    assert_eq!(
        (rc, out.as_str()),
        (0, "200 hello from the host\n"),
        "{err}"
    );
    let r = fork
        .run("python3 -m pip list | grep -E '^(requests|urllib3) '")
        .unwrap();
    assert_eq!(
        r.stdout.split_whitespace().collect::<Vec<_>>(),
        ["requests", "2.32.3", "urllib3", "2.8.0"],
        "{}",
        r.stderr
    );
    // requests reports a refusal as its ConnectionError, with the policy's words.
    let (rc, out, err) = py(
        &sb,
        "import requests\ntry:\n    requests.get('http://example.org/', timeout=5)\n\
         except requests.ConnectionError as e:\n    print('refused:', 'not in allowlist' in str(e))\n",
    );
    assert_eq!((rc, out.as_str()), (0, "refused: True\n"), "{err}");

    let r = sb
        .run(&format!(
            "pip install --trusted-host api.test --index-url {simple} nativeonly"
        ))
        .unwrap();
    assert_eq!(r.exit_code, 1, "{r:?}");
    assert!(
        r.stderr.contains(
            "nativeonly has only wheels built for other platforms (such as \
             nativeonly-1.0-cp312-cp312-manylinux_2_17_x86_64.whl)"
        ) && r
            .stderr
            .contains("installs pure-Python wheels (py3-none-any) only"),
        "{}",
        r.stderr
    );
    let r = sb
        .run(&format!(
            "pip install --trusted-host api.test --index-url {simple} srconly"
        ))
        .unwrap();
    assert_eq!(r.exit_code, 1, "{r:?}");
    assert!(
        r.stderr
            .contains("srconly publishes only source distributions (such as srconly-1.0.tar.gz)"),
        "{}",
        r.stderr
    );
    let r = sb
        .run("pip install --retries 1 --index-url https://example.org/simple/ flask")
        .unwrap();
    assert_eq!(r.exit_code, 1, "{r:?}");
    assert!(
        format!("{}{}", r.stdout, r.stderr)
            .contains("blocked by sandbox network policy: host example.org not in allowlist"),
        "{r:?}"
    );
}
