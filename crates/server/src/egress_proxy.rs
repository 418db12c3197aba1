//! The Docker tier's way out: containers with `network_policy: allowlist` sit on an internal
//! bridge network (no route off the host, no traffic between containers), whose only
//! reachable address is the host's side of the bridge, where this proxy listens. Their
//! `HTTP_PROXY`/`HTTPS_PROXY` point here. Each container is known by its address on that
//! network and has a [`Gate`]: the wasm tier's rules, pins, caps, refusal messages and audit
//! events, so a name is resolved here (never in the container), checked, pinned and connected
//! to at the pinned address.
//!
//! Two forms, as every HTTP client speaks them to a proxy: `CONNECT host:port` opens a tunnel
//! (TLS stays end to end between the program and the server), and an absolute-form request
//! (`GET http://host/path`) is forwarded once, with `Connection: close`.

use std::collections::HashMap;
use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;
use std::time::Duration;

use parking_lot::Mutex;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use wasmsand::{Gate, GateRefusal};

/// Longest request head a client may send.
const MAX_HEAD: usize = 32 << 10;

pub(crate) struct EgressProxy {
    addr: SocketAddr,
    clients: Mutex<HashMap<IpAddr, Arc<Gate>>>,
    task: tokio::task::JoinHandle<()>,
}

impl Drop for EgressProxy {
    fn drop(&mut self) {
        self.task.abort();
    }
}

impl EgressProxy {
    /// Listens on `bind` (the internal network's gateway), on a port of the system's choice.
    pub(crate) async fn start(bind: IpAddr) -> std::io::Result<Arc<EgressProxy>> {
        let listener = TcpListener::bind((bind, 0)).await?;
        let addr = listener.local_addr()?;
        Ok(Arc::new_cyclic(|me: &std::sync::Weak<EgressProxy>| {
            let me = me.clone();
            let task = tokio::spawn(async move {
                loop {
                    let Ok((stream, peer)) = listener.accept().await else {
                        continue;
                    };
                    let Some(proxy) = me.upgrade() else { return };
                    tokio::spawn(async move { proxy.serve(stream, peer.ip()).await });
                }
            });
            EgressProxy {
                addr,
                clients: Mutex::new(HashMap::new()),
                task,
            }
        }))
    }

    /// Where it listens.
    pub(crate) fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// Lets the container at `ip` through under `gate`.
    pub(crate) fn register(&self, ip: IpAddr, gate: Arc<Gate>) {
        self.clients.lock().insert(ip, gate);
    }

    /// Forgets the container at `ip` (it is gone; its address may be handed out again).
    pub(crate) fn unregister(&self, ip: IpAddr) {
        self.clients.lock().remove(&ip);
    }

    async fn serve(&self, mut client: TcpStream, peer: IpAddr) {
        let gate = self.clients.lock().get(&peer).cloned();
        let Some(gate) = gate else {
            let _ = refuse(
                &mut client,
                403,
                "no sandbox with a network policy has this address",
            )
            .await;
            return;
        };
        let idle = Duration::from_millis(gate.limits().request_timeout_ms);
        let (head, rest) = match tokio::time::timeout(idle, read_head(&mut client)).await {
            Ok(Ok(h)) => h,
            Ok(Err(why)) => {
                let _ = refuse(&mut client, 400, &why).await;
                return;
            }
            Err(_) => return,
        };
        let Some(req) = Head::parse(&head) else {
            let _ = refuse(&mut client, 400, "a malformed request").await;
            return;
        };
        let target = if req.method.eq_ignore_ascii_case("CONNECT") {
            split_authority(&req.target, 443)
        } else {
            absolute(&req.target)
        };
        let Some((host, port, path)) = target else {
            let _ = refuse(
                &mut client,
                400,
                "the proxy takes CONNECT host:port and http:// absolute-form requests only",
            )
            .await;
            return;
        };
        let ip = match gate.admit(&host) {
            Ok(ip) => ip,
            Err(r) => {
                let _ = refuse(&mut client, status_of(&r), &r.message).await;
                return;
            }
        };
        let upstream = match tokio::time::timeout(idle, TcpStream::connect((ip, port))).await {
            Ok(Ok(s)) => s,
            Ok(Err(e)) => {
                let msg = format!("cannot connect to {host} ({ip}:{port}): {e}");
                let _ = refuse(&mut client, 502, &msg).await;
                return;
            }
            Err(_) => {
                let msg = format!("connecting to {host} ({ip}:{port}) timed out");
                let _ = refuse(&mut client, 504, &msg).await;
                return;
            }
        };
        let mut upstream = upstream;
        match path {
            None => {
                if client
                    .write_all(b"HTTP/1.1 200 Connection established\r\n\r\n")
                    .await
                    .is_err()
                {
                    return;
                }
            }
            Some(path) => {
                let mut out = format!("{} {path} {}\r\n", req.method, req.version);
                for (k, v) in &req.headers {
                    let k_low = k.to_ascii_lowercase();
                    if matches!(
                        k_low.as_str(),
                        "proxy-connection" | "proxy-authorization" | "connection" | "keep-alive"
                    ) {
                        continue;
                    }
                    out += &format!("{k}: {v}\r\n");
                }
                out += "Connection: close\r\n\r\n";
                if upstream.write_all(out.as_bytes()).await.is_err() {
                    return;
                }
            }
        }
        if !rest.is_empty() && upstream.write_all(&rest).await.is_err() {
            return;
        }
        pipe(client, upstream, &gate, idle).await;
    }
}

/// The host-side rules that close the egress network. Docker's internal networks drop
/// forwarded traffic only when the engine manages iptables (it may not: `"iptables": false`),
/// and even then a container may reach every address of the host itself (its INPUT chain).
/// So, whatever the engine does: nothing is forwarded to, from or across the bridge (bridged
/// traffic passes the FORWARD chain with `bridge-nf-call-iptables`, which is required), and
/// from the bridge the host accepts only connections to the proxy, on IPv4, and nothing on
/// IPv6.
pub(crate) struct Seal {
    accept: Vec<String>,
}

async fn iptables(cmd: &str, args: &[String]) -> Result<(), String> {
    let out = tokio::process::Command::new(cmd)
        .arg("-w")
        .args(args)
        .output()
        .await
        .map_err(|e| format!("{cmd}: {e}"))?;
    if out.status.success() {
        Ok(())
    } else {
        Err(format!(
            "{cmd} {}: {}",
            args.join(" "),
            String::from_utf8_lossy(&out.stderr).trim()
        ))
    }
}

/// Adds `rule` to INPUT, first in the chain, unless it is there already.
async fn ensure(cmd: &str, rule: &[String]) -> Result<(), String> {
    let mut r = vec!["INPUT".to_string()];
    r.extend_from_slice(rule);
    ensure_in(cmd, &r).await
}

/// Adds `chain rule...` first in its chain unless it is there already.
async fn ensure_in(cmd: &str, chain_rule: &[String]) -> Result<(), String> {
    let mut check = vec!["-C".to_string()];
    check.extend_from_slice(chain_rule);
    if iptables(cmd, &check).await.is_ok() {
        return Ok(());
    }
    let mut insert = vec!["-I".to_string(), chain_rule[0].clone(), "1".into()];
    insert.extend_from_slice(&chain_rule[1..]);
    iptables(cmd, &insert).await
}

impl Seal {
    /// Drops everything from `iface` to the host, then lets `gateway:port` (the proxy)
    /// through above that.
    pub(crate) async fn close(iface: &str, gateway: IpAddr, port: u16) -> Result<Seal, String> {
        let s = |v: &[&str]| v.iter().map(|x| x.to_string()).collect::<Vec<_>>();
        let bridged = "/proc/sys/net/bridge/bridge-nf-call-iptables";
        if std::fs::read_to_string(bridged).is_ok_and(|v| v.trim() != "1")
            && std::fs::write(bridged, "1").is_err()
        {
            return Err(format!(
                "{bridged} is not 1 (load br_netfilter), so traffic between containers on the \
                 network could not be stopped"
            ));
        }
        for cmd in ["iptables", "ip6tables"] {
            ensure(cmd, &s(&["-i", iface, "-j", "DROP"])).await?;
            for dir in ["-i", "-o"] {
                let mut rule = s(&[dir, iface, "-j", "DROP"]);
                rule.insert(0, "FORWARD".into());
                ensure_in(cmd, &rule).await?;
            }
        }
        let accept = s(&[
            "-i",
            iface,
            "-d",
            &gateway.to_string(),
            "-p",
            "tcp",
            "--dport",
            &port.to_string(),
            "-j",
            "ACCEPT",
        ]);
        ensure("iptables", &accept).await?;
        forget_dead_openings(iface, gateway, port).await;
        Ok(Seal { accept })
    }

    /// Takes this proxy's opening away again (the drop stays: the network outlives us).
    pub(crate) async fn open_no_more(&self) {
        let mut del = vec!["-D".to_string(), "INPUT".into()];
        del.extend_from_slice(&self.accept);
        let _ = iptables("iptables", &del).await;
    }
}

/// Removes the openings of proxies that are gone (a service that crashed or was killed could
/// not take its own away): an ACCEPT for a port on the gateway where nothing listens any
/// more. Live proxies of other instances answer, and keep theirs.
async fn forget_dead_openings(iface: &str, gateway: IpAddr, ours: u16) {
    let Ok(out) = tokio::process::Command::new("iptables")
        .args(["-w", "-S", "INPUT"])
        .output()
        .await
    else {
        return;
    };
    let prefix = format!("-A INPUT -d {gateway}/32 -i {iface} -p tcp -m tcp --dport ");
    for line in String::from_utf8_lossy(&out.stdout).lines() {
        let Some(port) = line
            .strip_prefix(&prefix)
            .and_then(|r| r.strip_suffix(" -j ACCEPT"))
            .and_then(|p| p.parse::<u16>().ok())
        else {
            continue;
        };
        let connect = TcpStream::connect((gateway, port));
        let refused = matches!(
            tokio::time::timeout(Duration::from_secs(1), connect).await,
            Ok(Err(e)) if e.kind() == std::io::ErrorKind::ConnectionRefused
        );
        if port != ours && refused {
            let rule: Vec<String> = line
                .replacen("-A ", "-D ", 1)
                .split(' ')
                .map(String::from)
                .collect();
            let _ = iptables("iptables", &rule).await;
        }
    }
}

fn status_of(r: &GateRefusal) -> u16 {
    match r.kind {
        "limit" => 429,
        "resolve" => 502,
        _ => 403,
    }
}

/// Answers with `status` and `message`, which also goes in the reason phrase: clients report
/// a failed CONNECT by its status line (`Tunnel connection failed: 403 blocked by ...`).
async fn refuse(client: &mut TcpStream, status: u16, message: &str) -> std::io::Result<()> {
    let reason: String = message
        .chars()
        .map(|c| {
            if c.is_ascii_graphic() || c == ' ' {
                c
            } else {
                '?'
            }
        })
        .take(300)
        .collect();
    let body = format!("{message}\n");
    let text = format!(
        "HTTP/1.1 {status} {reason}\r\nContent-Type: text/plain; charset=utf-8\r\n\
         Content-Length: {}\r\nX-Wasmsand-Egress: refused\r\nConnection: close\r\n\r\n{body}",
        body.len()
    );
    client.write_all(text.as_bytes()).await?;
    client.shutdown().await
}

/// Reads up to the blank line that ends a request head; the head, and what followed it.
async fn read_head(client: &mut TcpStream) -> Result<(Vec<u8>, Vec<u8>), String> {
    let mut buf = Vec::with_capacity(4096);
    let mut chunk = [0u8; 4096];
    loop {
        if let Some(end) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
            let rest = buf.split_off(end + 4);
            return Ok((buf, rest));
        }
        if buf.len() > MAX_HEAD {
            return Err(format!("a request head longer than {MAX_HEAD} bytes"));
        }
        let n = client
            .read(&mut chunk)
            .await
            .map_err(|e| format!("reading the request: {e}"))?;
        if n == 0 {
            return Err("the connection closed before a whole request head".into());
        }
        buf.extend_from_slice(&chunk[..n]);
    }
}

struct Head {
    method: String,
    target: String,
    version: String,
    headers: Vec<(String, String)>,
}

impl Head {
    fn parse(raw: &[u8]) -> Option<Head> {
        let text = std::str::from_utf8(raw).ok()?;
        let mut lines = text.split("\r\n");
        let mut first = lines.next()?.split(' ');
        let (method, target, version) = (first.next()?, first.next()?, first.next()?);
        if first.next().is_some() || !version.starts_with("HTTP/1.") || method.is_empty() {
            return None;
        }
        if !method.bytes().all(|b| b.is_ascii_alphabetic()) {
            return None;
        }
        let mut headers = Vec::new();
        for l in lines.filter(|l| !l.is_empty()) {
            let (k, v) = l.split_once(':')?;
            if k.is_empty() || k.bytes().any(|b| b.is_ascii_whitespace()) {
                return None;
            }
            headers.push((k.to_string(), v.trim().to_string()));
        }
        Some(Head {
            method: method.to_string(),
            target: target.to_string(),
            version: version.to_string(),
            headers,
        })
    }
}

/// A URL's host as the gate takes it: a name, or an address without brackets.
fn host_of(url: &url::Url) -> Option<String> {
    Some(match url.host()? {
        url::Host::Domain(d) => d.to_string(),
        url::Host::Ipv4(v4) => v4.to_string(),
        url::Host::Ipv6(v6) => v6.to_string(),
    })
}

/// `host:port` (or `[v6]:port`) of a CONNECT; no path.
fn split_authority(a: &str, default_port: u16) -> Option<(String, u16, Option<String>)> {
    let url = url::Url::parse(&format!("http://{a}/")).ok()?;
    if !url.username().is_empty() || url.path() != "/" {
        return None;
    }
    let host = host_of(&url)?;
    Some((host, url.port().unwrap_or(default_port), None))
}

/// `http://host[:port]/path?query` of a forwarded request: host, port and origin-form path.
fn absolute(target: &str) -> Option<(String, u16, Option<String>)> {
    let url = url::Url::parse(target).ok()?;
    if url.scheme() != "http" || !url.username().is_empty() {
        return None;
    }
    let host = host_of(&url)?;
    let mut path = url.path().to_string();
    if let Some(q) = url.query() {
        path = format!("{path}?{q}");
    }
    Some((host, url.port().unwrap_or(80), Some(path)))
}

/// Copies both ways until either side ends, nothing moves for `idle`, or the run's download
/// cap is passed (then the connection is cut).
async fn pipe(client: TcpStream, upstream: TcpStream, gate: &Gate, idle: Duration) {
    let (mut cr, mut cw) = client.into_split();
    let (mut ur, mut uw) = upstream.into_split();
    let up = copy(&mut cr, &mut uw, idle, None);
    let down = copy(&mut ur, &mut cw, idle, Some(gate));
    tokio::select! {
        _ = up => {}
        _ = down => {}
    }
}

async fn copy<R, W>(r: &mut R, w: &mut W, idle: Duration, count: Option<&Gate>)
where
    R: AsyncRead + Unpin,
    W: AsyncWrite + Unpin,
{
    let mut buf = vec![0u8; 64 << 10];
    loop {
        let n = match tokio::time::timeout(idle, r.read(&mut buf)).await {
            Ok(Ok(0)) | Ok(Err(_)) | Err(_) => break,
            Ok(Ok(n)) => n,
        };
        if let Some(g) = count
            && !g.downloaded(n as u64)
        {
            break;
        }
        if w.write_all(&buf[..n]).await.is_err() {
            break;
        }
    }
    let _ = w.shutdown().await;
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn request_targets() {
        assert_eq!(
            split_authority("pypi.org:443", 443),
            Some(("pypi.org".into(), 443, None))
        );
        assert_eq!(
            split_authority("[::1]:8443", 443),
            Some(("::1".into(), 8443, None))
        );
        assert_eq!(split_authority("u@h:1", 443), None);
        assert_eq!(
            absolute("http://files.test:8080/a/b?c=d"),
            Some(("files.test".into(), 8080, Some("/a/b?c=d".into())))
        );
        assert_eq!(absolute("https://x/"), None);
        assert_eq!(absolute("/relative"), None);
        let h = Head::parse(b"GET http://a/ HTTP/1.1\r\nHost: a\r\nX: y z\r\n\r\n").unwrap();
        assert_eq!((h.method.as_str(), h.version.as_str()), ("GET", "HTTP/1.1"));
        assert_eq!(h.headers[1], ("X".into(), "y z".into()));
        assert!(Head::parse(b"GET / HTTP/2\r\n\r\n").is_none());
        assert!(Head::parse(b"G-T / HTTP/1.1\r\n\r\n").is_none());
        assert!(Head::parse(b"GET / HTTP/1.1\r\nbad header\r\n\r\n").is_none());
    }
}
