//! `network_policy: allowlist` in containers: an internal network with no route out, the
//! service's egress proxy as the only way through (its address in `HTTP_PROXY`/
//! `HTTPS_PROXY`), and the same rules, refusal messages and audit events as the wasm tier.
//! pip, npm and go install from package servers on loopback that this test builds (a PEP 503
//! index of two wheels, an npm registry of two packages, a Go module proxy), reached by a name
//! the service resolves; nothing leaves the host.

use std::net::SocketAddr;
use std::sync::Arc;

use axum::Router;
use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use base64::Engine as _;
use serde_json::{Value, json};
use sha2::Digest as _;

use super::{DockerServer, assert_completed, in_session, inline};
use crate::service::common::{output, stdout};

/// Every file the package servers hand out, by URL path.
struct Packages {
    files: std::collections::HashMap<String, (&'static str, Vec<u8>)>,
}

fn zip_of(entries: &[(&str, &str)]) -> Vec<u8> {
    let mut w = zip::ZipWriter::new(std::io::Cursor::new(Vec::new()));
    let opts = zip::write::SimpleFileOptions::default();
    for (name, data) in entries {
        w.start_file(*name, opts).unwrap();
        std::io::Write::write_all(&mut w, data.as_bytes()).unwrap();
    }
    w.finish().unwrap().into_inner()
}

fn tgz_of(entries: &[(&str, &str)]) -> Vec<u8> {
    let gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
    let mut b = tar::Builder::new(gz);
    for (path, data) in entries {
        let mut h = tar::Header::new_gnu();
        h.set_size(data.len() as u64);
        h.set_mode(0o644);
        h.set_path(path).unwrap();
        h.set_cksum();
        b.append(&h, data.as_bytes()).unwrap();
    }
    b.into_inner().unwrap().finish().unwrap()
}

/// A pure-Python wheel of one module.
fn wheel(name: &str, requires: &[&str], code: &str) -> Vec<u8> {
    let info = format!("{name}-1.0.dist-info");
    let mut meta = format!("Metadata-Version: 2.1\nName: {name}\nVersion: 1.0\n");
    for r in requires {
        meta += &format!("Requires-Dist: {r}\n");
    }
    let record =
        format!("{name}/__init__.py,,\n{info}/METADATA,,\n{info}/WHEEL,,\n{info}/RECORD,,\n");
    zip_of(&[
        (&format!("{name}/__init__.py"), code),
        (&format!("{info}/METADATA"), &meta),
        (
            &format!("{info}/WHEEL"),
            "Wheel-Version: 1.0\nGenerator: wasmsand-test\nRoot-Is-Purelib: true\nTag: py3-none-any\n",
        ),
        (&format!("{info}/RECORD"), &record),
    ])
}

impl Packages {
    fn build(base: &str) -> Packages {
        let mut files = std::collections::HashMap::new();
        let html = "text/html";
        // PyPI: wsdemo needs wsdep.
        for (name, requires, code) in [
            (
                "wsdemo",
                &["wsdep"][..],
                "from wsdep import word\n\ndef hello():\n    return 'hello ' + word()\n",
            ),
            ("wsdep", &[][..], "def word():\n    return 'from pip'\n"),
        ] {
            let whl = wheel(name, requires, code);
            let file = format!("{name}-1.0-py3-none-any.whl");
            let sum = hex::encode(sha2::Sha256::digest(&whl));
            files.insert(
                format!("/simple/{name}/"),
                (
                    html,
                    format!("<html><body><a href=\"/files/{file}#sha256={sum}\">{file}</a></body></html>")
                        .into_bytes(),
                ),
            );
            files.insert(format!("/files/{file}"), ("application/zip", whl));
        }
        // npm: wsnpm needs wsnpmdep.
        for (name, deps, code) in [
            (
                "wsnpm",
                json!({ "wsnpmdep": "1.0.0" }),
                "module.exports = () => 'hello ' + require('wsnpmdep');\n",
            ),
            ("wsnpmdep", json!({}), "module.exports = 'from npm';\n"),
        ] {
            let manifest = json!({ "name": name, "version": "1.0.0", "main": "index.js",
                "dependencies": deps });
            let tgz = tgz_of(&[
                ("package/package.json", &manifest.to_string()),
                ("package/index.js", code),
            ]);
            let integrity = format!(
                "sha512-{}",
                base64::engine::general_purpose::STANDARD.encode(sha2::Sha512::digest(&tgz))
            );
            let tarball = format!("{base}/{name}/-/{name}-1.0.0.tgz");
            let mut version = manifest.clone();
            version["dist"] = json!({ "tarball": tarball, "integrity": integrity });
            let doc = json!({ "name": name, "dist-tags": { "latest": "1.0.0" },
                "versions": { "1.0.0": version } });
            files.insert(
                format!("/{name}"),
                ("application/json", doc.to_string().into_bytes()),
            );
            files.insert(
                format!("/{name}/-/{name}-1.0.0.tgz"),
                ("application/octet-stream", tgz),
            );
        }
        // A Go module proxy (GOPROXY protocol) with example.com/greet v1.0.0.
        let module = "module example.com/greet\n\ngo 1.19\n";
        let source = "package greet\n\nfunc Hello() string { return \"hello from go\" }\n";
        let m = "/example.com/greet/@v";
        files.insert(format!("{m}/list"), ("text/plain", b"v1.0.0\n".to_vec()));
        files.insert(
            format!("{m}/v1.0.0.info"),
            (
                "application/json",
                br#"{"Version":"v1.0.0","Time":"2026-01-01T00:00:00Z"}"#.to_vec(),
            ),
        );
        files.insert(
            format!("{m}/v1.0.0.mod"),
            ("text/plain", module.as_bytes().to_vec()),
        );
        files.insert(
            format!("{m}/v1.0.0.zip"),
            (
                "application/zip",
                zip_of(&[
                    ("example.com/greet@v1.0.0/go.mod", module),
                    ("example.com/greet@v1.0.0/greet.go", source),
                ]),
            ),
        );
        // A Maven repository: the build extension wsext needs wsdep, whose jar carries a
        // resource a Java program reads.
        let group = "/maven2/org/wasmsand/test";
        for (artifact, deps, jar) in [
            (
                "wsext",
                "<dependencies><dependency><groupId>org.wasmsand.test</groupId>\
                 <artifactId>wsdep</artifactId><version>1.0</version></dependency></dependencies>",
                zip_of(&[("META-INF/MANIFEST.MF", "Manifest-Version: 1.0\n")]),
            ),
            (
                "wsdep",
                "",
                zip_of(&[
                    ("META-INF/MANIFEST.MF", "Manifest-Version: 1.0\n"),
                    ("greeting.txt", "hello from maven\n"),
                ]),
            ),
        ] {
            let pom = format!(
                "<?xml version=\"1.0\"?>\n<project><modelVersion>4.0.0</modelVersion>\
                 <groupId>org.wasmsand.test</groupId><artifactId>{artifact}</artifactId>\
                 <version>1.0</version>{deps}</project>\n"
            );
            for (ext, ctype, body) in [
                ("pom", "text/xml", pom.into_bytes()),
                ("jar", "application/java-archive", jar),
            ] {
                let path = format!("{group}/{artifact}/1.0/{artifact}-1.0.{ext}");
                let sha1 = hex::encode(sha1::Sha1::digest(&body));
                files.insert(format!("{path}.sha1"), ("text/plain", sha1.into_bytes()));
                files.insert(path, (ctype, body));
            }
        }
        files.insert(
            "/hello".into(),
            ("text/plain", b"hello through the proxy\n".to_vec()),
        );
        Packages { files }
    }
}

async fn serve(State(p): State<Arc<Packages>>, Path(path): Path<String>) -> Response {
    match p.files.get(&format!("/{path}")) {
        Some((ctype, body)) => ([("content-type", *ctype)], body.clone()).into_response(),
        None => (StatusCode::NOT_FOUND, "not here\n").into_response(),
    }
}

/// The package servers on 127.0.0.1, answering as `pkgs.test:PORT`.
async fn package_host() -> SocketAddr {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let packages = Arc::new(Packages::build(&format!(
        "http://pkgs.test:{}",
        addr.port()
    )));
    let app = Router::new()
        .route("/{*path}", get(serve))
        .with_state(packages);
    tokio::spawn(async move { axum::serve(listener, app).await });
    addr
}

async fn egress_server(name: &str) -> Option<DockerServer> {
    egress_server_with(name, |_| {}).await
}

async fn egress_server_with(
    name: &str,
    f: impl FnOnce(&mut wasmsand_server::Config),
) -> Option<DockerServer> {
    DockerServer::with(name, |c| {
        c.egress_allowlist =
            wasmsand::egress::EgressPolicy::parse(&wasmsand::egress::EgressAllowlist {
                hosts: vec!["pkgs.test".into()],
                ips: vec!["127.0.0.1".into()],
                ..Default::default()
            })
            .unwrap();
        c.egress_resolve
            .insert("pkgs.test".into(), vec!["127.0.0.1".parse().unwrap()]);
        f(c);
    })
    .await
}

/// The allowlist of the sessions: the package host by name, and its loopback address.
fn pkgs_policy() -> Value {
    json!({ "network_policy": "allowlist",
            "egress_allowlist": { "hosts": ["pkgs.test"], "ips": ["127.0.0.1"] } })
}

async fn run_in(d: &DockerServer, sid: &str, script: &str, extra: Value) -> (Value, Vec<Value>) {
    let (_, frames, status) = d
        .srv
        .run(in_session(sid, &["sh", "-c", script], extra))
        .await;
    (status, frames)
}

// Threat: T-CONTAINER-NET
/// Python: the proxy forwards what the policy allows and refuses the rest with the wasm
/// tier's message, a CONNECT tunnel works, there is no other route, pip installs from the
/// allowed index, and every decision is in the audit trail with the run's id.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_python_container_reaches_only_what_the_policy_allows() {
    let pkgs = package_host().await;
    if super::gvisor() {
        // The runsc of the other containers has no network: without a runsc for the
        // allowlist's containers, refused up front, saying why.
        let Some(d) = egress_server_with("egress-py-nonet", |c| {
            c.docker.egress_oci_runtime = None;
        })
        .await
        else {
            return;
        };
        assert_eq!(d.docker_entry().await["egress_allowlist_supported"], false);
        let (s, _, v) = d
            .srv
            .post(
                "/sessions",
                json!({ "spec_version": "1.0", "runtime": "docker",
                        "base_image": "python:3.11-slim", "network_policy": "allowlist" }),
            )
            .await;
        assert_eq!(s, StatusCode::BAD_REQUEST, "{v}");
        assert!(
            v["error"]["message"]
                .as_str()
                .unwrap()
                .contains("cannot give its boxes an egress allowlist"),
            "{v}"
        );
        d.finish().await;
    }
    let Some(d) = egress_server("egress-py").await else {
        return;
    };
    assert_eq!(d.docker_entry().await["egress_allowlist_supported"], true);
    let port = pkgs.port();
    // A host service on every address, as a database or an admin port might be.
    let open = tokio::net::TcpListener::bind("0.0.0.0:0").await.unwrap();
    let open_port = open.local_addr().unwrap().port();
    let sid = d.session("python:3.11-slim", pkgs_policy()).await;
    let probe = format!(
        r#"
import http.client, os, urllib.request, urllib.error
print(urllib.request.urlopen("http://pkgs.test:{port}/hello").read().decode(), end="")
try:
    urllib.request.urlopen("http://nowhere.test:{port}/hello")
except urllib.error.HTTPError as e:
    print("denied", e.code, e.reason)
# A CONNECT tunnel (what https:// uses), here carrying plain HTTP.
proxy = os.environ["HTTP_PROXY"].split("//")[1]
c = http.client.HTTPConnection(proxy)
c.set_tunnel("pkgs.test", {port})
c.request("GET", "/hello")
print("tunnel", c.getresponse().read().decode(), end="")
c = http.client.HTTPConnection(proxy)
c.set_tunnel("nowhere.test", 443)
try:
    c.request("GET", "/")
except OSError as e:
    print("tunnel refused:", e)
# The host's own services are out of reach: only the proxy's port answers on the host.
import socket
try:
    socket.create_connection((proxy.split(":")[0], {open_port}), timeout=2)
    print("host service: reached")
except OSError as e:
    print("host service: unreachable")
"#
    );
    let (status, frames) = run_in(
        &d,
        &sid,
        "python3 probe.py",
        json!({ "files": inline(&[("probe.py", &probe)]) }),
    )
    .await;
    assert_completed(&status, &frames);
    let out = stdout(&frames);
    let lines: Vec<&str> = out.lines().collect();
    assert_eq!(lines[0], "hello through the proxy", "{out}");
    assert_eq!(
        lines[1],
        "denied 403 blocked by sandbox network policy: host nowhere.test not in allowlist \
         (allowlist: hosts pkgs.test; ips 127.0.0.1)",
        "{out}"
    );
    assert_eq!(lines[2], "tunnel hello through the proxy", "{out}");
    assert!(
        lines[3].starts_with("tunnel refused: Tunnel connection failed: 403 blocked by sandbox network policy: host nowhere.test"),
        "{out}"
    );
    assert_eq!(lines[4], "host service: unreachable", "{out}");
    drop(open);
    let run_id = status["run_id"].as_str().unwrap().to_string();
    // Two connections went through (the plain request and the tunnel); the refusals did not.
    assert_eq!(status["resource_usage"]["network_requests"], 2, "{status}");
    assert!(
        status["resource_usage"]["network_bytes"].as_u64().unwrap() > 0,
        "{status}"
    );

    // Two sandboxes on the egress network cannot reach each other.
    let other = d
        .session("python:3.11-slim", json!({ "network_policy": "allowlist" }))
        .await;
    let mut a_ip = None;
    for (id, labels) in d.engine.containers().await.unwrap() {
        if labels.get(wasmsand_docker::labels::SESSION) == Some(&sid) {
            a_ip = Some(d.engine.container_ip(&id, "wasmsand-egress").await.unwrap());
        }
    }
    let a_ip = a_ip.expect("the first session's container");
    let listen = "import socket\ns = socket.socket()\ns.bind(('', 8000))\ns.listen()\n\
                  print('listening', flush=True)\ns.settimeout(8)\ntry:\n    s.accept()\n    \
                  print('accepted')\nexcept OSError:\n    print('nobody came')\n";
    let started = d
        .srv
        .start_run(in_session(
            &sid,
            &["python3", "-c", listen],
            json!({ "timeout_sec": 30 }),
        ))
        .await;
    let listener_run = started["run_id"].as_str().unwrap().to_string();
    // Knock only once the listener listens, so "unreachable" cannot mean "not yet there".
    {
        use futures::StreamExt as _;
        let mut ws = d.srv.connect(&listener_run).await;
        let mut seen = Vec::new();
        while !String::from_utf8_lossy(&seen).contains("listening") {
            let msg = tokio::time::timeout(std::time::Duration::from_secs(60), ws.next())
                .await
                .expect("the listener starts")
                .expect("the stream stays open")
                .unwrap();
            if let tokio_tungstenite::tungstenite::Message::Text(t) = msg {
                let v: Value = serde_json::from_str(&t).unwrap();
                seen.extend(output(&[v], "stdout"));
            }
        }
    }
    let knock = format!(
        "import socket\ntry:\n    socket.create_connection(('{a_ip}', 8000), timeout=3)\n    \
         print('reached')\nexcept OSError:\n    print('unreachable')\n"
    );
    let (_, frames, status) = d
        .srv
        .run(in_session(&other, &["python3", "-c", &knock], json!({})))
        .await;
    assert_completed(&status, &frames);
    assert_eq!(stdout(&frames), "unreachable\n");
    let frames = d.srv.frames(&listener_run, "").await;
    let status = d.srv.wait_done(&listener_run).await;
    assert_completed(&status, &frames);
    assert_eq!(stdout(&frames), "listening\nnobody came\n");

    let (status, frames) = run_in(
        &d,
        &sid,
        &format!(
            "pip install -q --user --break-system-packages --index-url \
             http://pkgs.test:{port}/simple --trusted-host pkgs.test wsdemo \
             && python3 -c 'import wsdemo; print(wsdemo.hello())'"
        ),
        json!({ "timeout_sec": 120 }),
    )
    .await;
    assert_completed(&status, &frames);
    assert_eq!(stdout(&frames), "hello from pip\n");

    // The probe's decisions, with the PRD's fields.
    let audit = |event: &'static str| {
        let srv = &d.srv;
        async move {
            let (_, v) = srv
                .get(&format!("/admin/audit?event={event}&limit=100"))
                .await;
            v["items"].as_array().unwrap().clone()
        }
    };
    let denied = audit("sandbox.run.egress_denied").await;
    assert!(
        denied.iter().any(|e| e["run_id"] == run_id.as_str()
            && e["host"] == "nowhere.test"
            && e["reason"] == "no_match"
            && e["runtime"] == "docker"),
        "{denied:?}"
    );
    let allowed = audit("sandbox.run.egress_allowed").await;
    assert!(
        allowed.iter().any(|e| e["run_id"] == run_id.as_str()
            && e["host"] == "pkgs.test"
            && e["ip"] == "127.0.0.1"),
        "{allowed:?}"
    );
    d.finish().await;
}

/// npm and go fetch their packages through the proxy with nothing but the proxy variables
/// the container already has (and the registry's address).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn npm_and_go_install_through_the_proxy() {
    let pkgs = package_host().await;
    let Some(d) = egress_server("egress-npm-go").await else {
        return;
    };
    let port = pkgs.port();
    let policy = pkgs_policy();
    let sid = d.session("node:20", policy.clone()).await;
    let (status, frames) = run_in(
        &d,
        &sid,
        &format!(
            "npm install --no-audit --no-fund --no-update-notifier --registry \
             http://pkgs.test:{port}/ wsnpm >/dev/null && node -e \
             'console.log(require(\"wsnpm\")())'"
        ),
        json!({ "timeout_sec": 120 }),
    )
    .await;
    assert_completed(&status, &frames);
    assert_eq!(stdout(&frames), "hello from npm\n");

    let sid = d.session("golang:1.22", policy).await;
    let files = inline(&[
        (
            "go.mod",
            "module demo\n\ngo 1.19\n\nrequire example.com/greet v1.0.0\n",
        ),
        (
            "main.go",
            "package main\n\nimport (\n\t\"fmt\"\n\n\t\"example.com/greet\"\n)\n\nfunc main() { fmt.Println(greet.Hello()) }\n",
        ),
    ]);
    let (status, frames) = run_in(
        &d,
        &sid,
        "go run .",
        json!({ "files": files, "timeout_sec": 300,
                "env": { "GOPROXY": format!("http://pkgs.test:{port}"), "GOSUMDB": "off" } }),
    )
    .await;
    assert_completed(&status, &frames);
    assert_eq!(
        stdout(&frames),
        "hello from go\n",
        "{}",
        String::from_utf8_lossy(&output(&frames, "stderr"))
    );
    d.finish().await;
}

/// Java reads no proxy variables: the JVM gets the proxy as system properties, which Java's
/// own HTTP client and Maven 3.8's transport both follow.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn java_and_maven_fetch_through_the_proxy() {
    let pkgs = package_host().await;
    let Some(d) = egress_server("egress-java").await else {
        return;
    };
    let port = pkgs.port();
    let policy = pkgs_policy();
    let sid = d.session("eclipse-temurin:17", policy).await;
    let repo = format!("http://pkgs.test:{port}/maven2");
    // What an agent behind a company repository writes: one mirror for everything.
    let settings = format!(
        "<settings><mirrors><mirror><id>pkgs</id><mirrorOf>*</mirrorOf><url>{repo}</url>\
         </mirror></mirrors></settings>\n"
    );
    let pom = "<project><modelVersion>4.0.0</modelVersion><groupId>demo</groupId>\
        <artifactId>demo</artifactId><version>1</version><packaging>pom</packaging></project>\n";
    // A core extension: resolved, with its dependencies, before the build reads the project.
    let extensions = "<extensions><extension><groupId>org.wasmsand.test</groupId>\
        <artifactId>wsext</artifactId><version>1.0</version></extension></extensions>\n";
    let main = format!(
        r#"import java.net.URI;
import java.net.http.*;

public class Main {{
    public static void main(String[] args) throws Exception {{
        var greeting = Main.class.getResourceAsStream("/greeting.txt").readAllBytes();
        System.out.print(new String(greeting));
        var client = HttpClient.newHttpClient();
        for (var host : new String[] {{"pkgs.test", "nowhere.test"}}) {{
            var req = HttpRequest.newBuilder(URI.create("http://" + host + ":{port}/hello")).build();
            var res = client.send(req, HttpResponse.BodyHandlers.ofString());
            System.out.print(host + " " + res.statusCode() + " " + res.body());
        }}
    }}
}}
"#
    );
    let (status, frames) = run_in(
        &d,
        &sid,
        "mvn -B -q -s settings.xml validate && javac -d out Main.java && \
         java -cp out:/tmp/m2/repository/org/wasmsand/test/wsdep/1.0/wsdep-1.0.jar Main",
        json!({ "files": inline(&[("settings.xml", &settings), ("pom.xml", pom),
                    (".mvn/extensions.xml", extensions), ("Main.java", &main)]),
                "timeout_sec": 300 }),
    )
    .await;
    assert_completed(&status, &frames);
    let out = stdout(&frames);
    let lines: Vec<&str> = out.lines().collect();
    assert_eq!(lines[0], "hello from maven", "{out}");
    assert_eq!(lines[1], "pkgs.test 200 hello through the proxy", "{out}");
    assert!(
        lines[2].starts_with("nowhere.test 403 blocked by sandbox network policy"),
        "{out}"
    );
    d.finish().await;
}
