//! `curl` and `wget` for the sandbox. A WASI program has no sockets: each request goes to the
//! host through the tool-call channel (`host.call`, an `http` frame), which checks it against
//! the sandbox's egress policy, pins the host's address and answers with the response. The
//! programs follow redirects themselves, so every hop is checked again.

use std::io::Write;

use base64::Engine as _;

use guest_rt::door::{self, Request, Response, join, send};

/// The last path segment of a URL, for `-O` and wget's default name.
fn remote_name(url: &str) -> String {
    let rest = url.split_once("://").map_or(url, |(_, r)| r);
    let path = rest.find('/').map_or("", |i| &rest[i..]);
    let path = path.split(['?', '#']).next().unwrap_or("");
    path.rsplit('/').next().unwrap_or("").to_string()
}

fn write_out(path: Option<&str>, data: &[u8]) -> std::io::Result<()> {
    match path {
        None | Some("-") => {
            let mut out = std::io::stdout().lock();
            out.write_all(data)?;
            out.flush()
        }
        Some(p) => std::fs::write(p, data),
    }
}

fn main() {
    guest_rt::enter_pwd();
    let args: Vec<String> = std::env::args().collect();
    let tool = guest_rt::tool_name(std::ffi::OsStr::new(args.first().map_or("curl", |s| s)));
    let code = match tool.as_str() {
        "wget" => wget(&args[1..]),
        _ => curl(&args[1..]),
    };
    std::process::exit(code);
}

// ---- curl ----

#[derive(Default)]
struct Curl {
    urls: Vec<String>,
    method: Option<String>,
    headers: Vec<(String, String)>,
    data: Option<Vec<u8>>,
    output: Option<String>,
    remote_name: bool,
    silent: bool,
    show_error: bool,
    fail: bool,
    fail_with_body: bool,
    location: bool,
    max_redirs: u32,
    include: bool,
    head: bool,
    write_out: Option<String>,
    max_time_ms: Option<u64>,
    verbose: bool,
    /// `--resolve HOST:PORT:ADDR`: (host in lower case, port, address).
    resolve: Vec<(String, u16, String)>,
}

fn curl_usage(msg: &str) -> i32 {
    eprintln!("curl: {msg}");
    eprintln!("curl: try 'curl --help' for more information");
    2
}

fn read_data(arg: &str, binary: bool) -> std::io::Result<Vec<u8>> {
    match arg.strip_prefix('@') {
        Some("-") => {
            let mut v = Vec::new();
            std::io::Read::read_to_end(&mut std::io::stdin(), &mut v)?;
            Ok(if binary { v } else { strip_newlines(v) })
        }
        Some(path) => {
            let v = std::fs::read(path)?;
            Ok(if binary { v } else { strip_newlines(v) })
        }
        None => Ok(arg.as_bytes().to_vec()),
    }
}

/// `-d @file` sends the file without its carriage returns and newlines, as curl does.
fn strip_newlines(v: Vec<u8>) -> Vec<u8> {
    v.into_iter()
        .filter(|b| *b != b'\n' && *b != b'\r')
        .collect()
}

fn parse_curl(args: &[String]) -> Result<Curl, i32> {
    let mut c = Curl {
        max_redirs: 50,
        ..Curl::default()
    };
    let mut i = 0;
    let mut datas: Vec<Vec<u8>> = Vec::new();
    let value = |i: &mut usize, name: &str| -> Result<String, i32> {
        *i += 1;
        args.get(*i)
            .cloned()
            .ok_or_else(|| curl_usage(&format!("option {name}: requires parameter")))
    };
    while i < args.len() {
        let a = args[i].clone();
        // Short flags may be bundled (`-fsSL`); one taking a value ends the bundle.
        if a.starts_with('-') && !a.starts_with("--") && a.len() > 2 {
            let flags: Vec<char> = a[1..].chars().collect();
            let mut expanded = Vec::new();
            for (k, f) in flags.iter().enumerate() {
                expanded.push(format!("-{f}"));
                if "oXHdumAwe".contains(*f) {
                    let rest: String = flags[k + 1..].iter().collect();
                    if !rest.is_empty() {
                        expanded.push(rest);
                    }
                    break;
                }
            }
            let mut next: Vec<String> = args[..i].to_vec();
            next.extend(expanded);
            next.extend(args[i + 1..].iter().cloned());
            return parse_curl(&next);
        }
        match a.as_str() {
            "-s" | "--silent" => c.silent = true,
            "-S" | "--show-error" => c.show_error = true,
            "-f" | "--fail" => c.fail = true,
            "--fail-with-body" => c.fail_with_body = true,
            "-L" | "--location" => c.location = true,
            "-i" | "--include" => c.include = true,
            "-I" | "--head" => c.head = true,
            "-O" | "--remote-name" => c.remote_name = true,
            "-v" | "--verbose" => c.verbose = true,
            "-k"
            | "--insecure"
            | "--compressed"
            | "-#"
            | "--progress-bar"
            | "--no-progress-meter" => {}
            "-o" | "--output" => c.output = Some(value(&mut i, &a)?),
            "-X" | "--request" => c.method = Some(value(&mut i, &a)?),
            "-H" | "--header" => {
                let h = value(&mut i, &a)?;
                match h.split_once(':') {
                    Some((k, v)) => c.headers.push((k.trim().to_string(), v.trim().to_string())),
                    None => return Err(curl_usage(&format!("bad header {h:?}"))),
                }
            }
            "-A" | "--user-agent" => {
                let ua = value(&mut i, &a)?;
                c.headers.push(("User-Agent".into(), ua));
            }
            "-u" | "--user" => {
                let up = value(&mut i, &a)?;
                let token = base64::engine::general_purpose::STANDARD.encode(up.as_bytes());
                c.headers
                    .push(("Authorization".into(), format!("Basic {token}")));
            }
            "-d" | "--data" | "--data-ascii" | "--data-binary" | "--data-raw" => {
                let v = value(&mut i, &a)?;
                let d = if a == "--data-raw" {
                    v.into_bytes()
                } else {
                    read_data(&v, a == "--data-binary").map_err(|e| {
                        eprintln!(
                            "curl: (26) Failed to open/read local data from file/application: {e}"
                        );
                        26
                    })?
                };
                datas.push(d);
            }
            "-w" | "--write-out" => c.write_out = Some(value(&mut i, &a)?),
            "-m" | "--max-time" => {
                let v = value(&mut i, &a)?;
                let secs: f64 = v.parse().map_err(|_| {
                    curl_usage(&format!(
                        "option {a}: expected a proper numerical parameter"
                    ))
                })?;
                c.max_time_ms = Some((secs * 1000.0) as u64);
            }
            "--connect-timeout" => {
                value(&mut i, &a)?;
            }
            "--max-redirs" => {
                let v = value(&mut i, &a)?;
                c.max_redirs = v.parse().map_err(|_| {
                    curl_usage(&format!(
                        "option {a}: expected a proper numerical parameter"
                    ))
                })?;
            }
            "--url" => c.urls.push(value(&mut i, &a)?),
            "--resolve" => {
                let v = value(&mut i, &a)?;
                c.resolve.push(parse_resolve(&v).ok_or_else(|| {
                    curl_usage(&format!(
                        "option --resolve: {v:?} is not HOST:PORT:ADDRESS[,ADDRESS]..."
                    ))
                })?);
            }
            _ if a.starts_with('-') && a != "-" => {
                return Err(curl_usage(&format!("option {a}: is unknown")));
            }
            _ => c.urls.push(a),
        }
        i += 1;
    }
    if !datas.is_empty() {
        let mut joined = Vec::new();
        for (k, d) in datas.into_iter().enumerate() {
            if k > 0 {
                joined.push(b'&');
            }
            joined.extend(d);
        }
        c.data = Some(joined);
    }
    Ok(c)
}

/// `[+]HOST:PORT:ADDR[,ADDR]...` (curl's `--resolve`; an address may be `[v6]`). Only the
/// first address is used: the host decides whether the run may connect to it.
fn parse_resolve(v: &str) -> Option<(String, u16, String)> {
    let v = v.strip_prefix('+').unwrap_or(v);
    let (host, rest) = v.split_once(':')?;
    let (port, addrs) = rest.split_once(':')?;
    let first = addrs.split(',').next()?.trim();
    let bare = first.trim_start_matches('[').trim_end_matches(']');
    if host.is_empty() || bare.parse::<std::net::IpAddr>().is_err() {
        return None;
    }
    Some((
        host.to_ascii_lowercase(),
        port.parse().ok()?,
        bare.to_string(),
    ))
}

/// The host (lower case, IPv6 without brackets) and port of an `http(s)` URL.
fn url_host_port(url: &str) -> Option<(String, u16)> {
    let (scheme, rest) = url.split_once("://")?;
    let authority = rest.split(['/', '?', '#']).next()?;
    let hostport = authority.rsplit_once('@').map_or(authority, |(_, h)| h);
    let default = if scheme.eq_ignore_ascii_case("https") {
        443
    } else {
        80
    };
    let (host, port) = match hostport.strip_prefix('[') {
        Some(v6) => {
            let (h, after) = v6.split_once(']')?;
            (h, after.strip_prefix(':'))
        }
        None => match hostport.split_once(':') {
            Some((h, p)) => (h, Some(p)),
            None => (hostport, None),
        },
    };
    let port = match port {
        Some(p) if !p.is_empty() => p.parse().ok()?,
        _ => default,
    };
    Some((host.to_ascii_lowercase(), port))
}

/// curl's exit code and message for a request the door refused.
fn curl_failure(f: &door::Fail, url: &str, port_hint: &str) -> (i32, String) {
    match f.kind.as_str() {
        "denied" | "off" => (7, f.message.clone()),
        "resolve" => (
            6,
            f.message
                .replace("could not resolve host", "Could not resolve host"),
        ),
        "timeout" => (28, format!("Operation timed out: {}", f.message)),
        "bad_request" => (3, format!("URL rejected: {url}: {}", f.message)),
        "unsupported" => (1, f.message.clone()),
        "tls" => (60, f.message.clone()),
        "limit" => (56, f.message.clone()),
        _ => (
            7,
            format!("Failed to connect to {port_hint}: {}", f.message),
        ),
    }
}

fn host_port(url: &str) -> String {
    let rest = url.split_once("://").map_or(url, |(_, r)| r);
    let hp = rest.split(['/', '?', '#']).next().unwrap_or("");
    if hp.contains(':') && !hp.ends_with(']') {
        hp.replacen(':', " port ", 1)
    } else {
        format!("{hp} port 80")
    }
}

fn curl(args: &[String]) -> i32 {
    let c = match parse_curl(args) {
        Ok(c) => c,
        Err(code) => return code,
    };
    if c.urls.is_empty() {
        return curl_usage("no URL specified");
    }
    let complain = |code: i32, msg: &str| {
        if !c.silent || c.show_error {
            eprintln!("curl: ({code}) {msg}");
        }
        code
    };
    let mut status = 0;
    for first in &c.urls {
        let url = if first.contains("://") {
            first.clone()
        } else {
            format!("http://{first}")
        };
        let mut method = c.method.clone().unwrap_or_else(|| {
            if c.head {
                "HEAD".into()
            } else if c.data.is_some() {
                "POST".into()
            } else {
                "GET".into()
            }
        });
        let mut headers = c.headers.clone();
        if !headers
            .iter()
            .any(|(k, _)| k.eq_ignore_ascii_case("user-agent"))
        {
            headers.push(("User-Agent".into(), "curl/8.5.0 (wasmsand)".into()));
        }
        if !headers
            .iter()
            .any(|(k, _)| k.eq_ignore_ascii_case("accept"))
        {
            headers.push(("Accept".into(), "*/*".into()));
        }
        if c.data.is_some()
            && !headers
                .iter()
                .any(|(k, _)| k.eq_ignore_ascii_case("content-type"))
        {
            headers.push((
                "Content-Type".into(),
                "application/x-www-form-urlencoded".into(),
            ));
        }
        let mut body = c.data.clone();
        let mut current = url.clone();
        let mut redirects = 0;
        let mut shown_heads = String::new();
        let resp = loop {
            if c.verbose {
                eprintln!("> {method} {current}");
            }
            // Each hop of a redirect is matched again, as curl does.
            let addr = url_host_port(&current).and_then(|(h, p)| {
                c.resolve
                    .iter()
                    .find(|(rh, rp, _)| *rh == h && *rp == p)
                    .map(|(_, _, a)| a.as_str())
            });
            let r = send(&Request {
                method: &method,
                url: &current,
                headers: &headers,
                body: body.as_deref(),
                timeout_ms: c.max_time_ms,
                addr,
            });
            let resp = match r {
                Ok(r) => r,
                Err(f) => {
                    let (code, msg) = curl_failure(&f, &current, &host_port(&current));
                    return complain(code, &msg);
                }
            };
            if c.verbose {
                eprint!("< {}", resp.head().replace("\r\n", "\n< "));
                eprintln!();
            }
            let redirect = matches!(resp.status, 301 | 302 | 303 | 307 | 308);
            if c.location
                && redirect
                && let Some(loc) = resp.header("location")
            {
                if redirects >= c.max_redirs {
                    return complain(
                        47,
                        &format!("Maximum ({}) redirects followed", c.max_redirs),
                    );
                }
                redirects += 1;
                if c.include || c.head {
                    shown_heads += &resp.head();
                }
                current = join(&current, loc);
                if matches!(resp.status, 301..=303) && method != "HEAD" {
                    if c.method.is_none() || resp.status == 303 {
                        method = "GET".into();
                    }
                    body = None;
                }
                continue;
            }
            break resp;
        };
        if (c.fail || c.fail_with_body) && resp.status >= 400 {
            if c.fail_with_body {
                let _ = write_out(c.output.as_deref(), &resp.body);
            }
            status = complain(
                22,
                &format!("The requested URL returned error: {}", resp.status),
            );
            continue;
        }
        let mut out = Vec::new();
        if c.include || c.head {
            out.extend_from_slice(shown_heads.as_bytes());
            out.extend_from_slice(resp.head().as_bytes());
        }
        if !c.head {
            out.extend_from_slice(&resp.body);
        }
        let target = if c.remote_name {
            let name = remote_name(&current);
            if name.is_empty() {
                return complain(23, "Remote file name has no length");
            }
            Some(name)
        } else {
            c.output.clone()
        };
        if let Err(e) = write_out(target.as_deref(), &out) {
            return complain(23, &format!("Failure writing output to destination: {e}"));
        }
        if let Some(w) = &c.write_out {
            let text = expand_write_out(w, &resp, &current, redirects);
            let _ = write_out(None, text.as_bytes());
        }
        if resp.truncated {
            status = complain(
                63,
                "Maximum file size exceeded (the sandbox's download limit)",
            );
        }
    }
    status
}

fn expand_write_out(format: &str, r: &Response, url: &str, redirects: u32) -> String {
    let mut s = format
        .replace("\\n", "\n")
        .replace("\\t", "\t")
        .replace("\\r", "\r");
    for (k, v) in [
        ("%{http_code}", format!("{:03}", r.status)),
        ("%{response_code}", format!("{:03}", r.status)),
        ("%{url_effective}", url.to_string()),
        ("%{size_download}", r.body.len().to_string()),
        (
            "%{content_type}",
            r.header("content-type").unwrap_or("").to_string(),
        ),
        ("%{num_redirects}", redirects.to_string()),
    ] {
        s = s.replace(k, &v);
    }
    s
}

// ---- wget ----

fn wget(args: &[String]) -> i32 {
    let mut quiet = false;
    let mut output: Option<String> = None;
    let mut headers: Vec<(String, String)> = vec![
        ("User-Agent".into(), "Wget/1.21.3 (wasmsand)".into()),
        ("Accept".into(), "*/*".into()),
    ];
    let mut post: Option<Vec<u8>> = None;
    let mut timeout_ms = None;
    let mut max_redirect = 20u32;
    let mut urls = Vec::new();
    let mut i = 0;
    while i < args.len() {
        let a = &args[i];
        let (name, inline) = match a.split_once('=') {
            Some((n, v)) if n.starts_with("--") => (n, Some(v.to_string())),
            _ => (a.as_str(), None),
        };
        let mut value = || -> Result<String, i32> {
            if let Some(v) = inline.clone() {
                return Ok(v);
            }
            i += 1;
            args.get(i).cloned().ok_or_else(|| {
                eprintln!("wget: option requires an argument -- '{name}'");
                2
            })
        };
        match name {
            "-q" | "--quiet" => quiet = true,
            "-O" | "--output-document" => match value() {
                Ok(v) => output = Some(v),
                Err(c) => return c,
            },
            "-qO" => match value() {
                Ok(v) => {
                    quiet = true;
                    output = Some(v);
                }
                Err(c) => return c,
            },
            "--header" => match value() {
                Ok(h) => {
                    if let Some((k, v)) = h.split_once(':') {
                        headers.push((k.trim().to_string(), v.trim().to_string()));
                    }
                }
                Err(c) => return c,
            },
            "--post-data" => match value() {
                Ok(v) => post = Some(v.into_bytes()),
                Err(c) => return c,
            },
            "-T" | "--timeout" => match value().map(|v| v.parse::<f64>()) {
                Ok(Ok(s)) => timeout_ms = Some((s * 1000.0) as u64),
                _ => return 2,
            },
            "--max-redirect" => match value().map(|v| v.parse::<u32>()) {
                Ok(Ok(n)) => max_redirect = n,
                _ => return 2,
            },
            "-nv" | "--no-verbose" | "--no-check-certificate" | "-c" | "--continue" => {}
            _ if a.starts_with("-O") && a.len() > 2 => output = Some(a[2..].to_string()),
            _ if a.starts_with("-qO") && a.len() > 3 => {
                quiet = true;
                output = Some(a[3..].to_string());
            }
            _ if a.starts_with('-') && a != "-" => {
                eprintln!("wget: unrecognized option '{a}'");
                eprintln!("Usage: wget [OPTION]... [URL]...");
                return 2;
            }
            _ => urls.push(a.clone()),
        }
        i += 1;
    }
    if urls.is_empty() {
        eprintln!("wget: missing URL");
        eprintln!("Usage: wget [OPTION]... [URL]...");
        return 1;
    }
    if post.is_some() {
        headers.push((
            "Content-Type".into(),
            "application/x-www-form-urlencoded".into(),
        ));
    }
    let mut status = 0;
    for first in urls {
        let mut current = if first.contains("://") {
            first.clone()
        } else {
            format!("http://{first}")
        };
        let mut method = if post.is_some() { "POST" } else { "GET" };
        let mut body = post.clone();
        let mut redirects = 0;
        if !quiet {
            eprintln!("--  {current}");
        }
        let resp = loop {
            let r = send(&Request {
                method,
                url: &current,
                headers: &headers,
                body: body.as_deref(),
                timeout_ms,
                addr: None,
            });
            let resp = match r {
                Ok(r) => r,
                Err(f) => {
                    eprintln!("wget: {}", f.message);
                    return if f.kind == "tls" { 5 } else { 4 };
                }
            };
            if !quiet {
                eprintln!(
                    "HTTP request sent, awaiting response... {} {}",
                    resp.status, resp.reason
                );
            }
            if matches!(resp.status, 301 | 302 | 303 | 307 | 308)
                && let Some(loc) = resp.header("location")
            {
                if redirects >= max_redirect {
                    eprintln!("{max_redirect} redirections exceeded.");
                    return 8;
                }
                redirects += 1;
                current = join(&current, loc);
                if !quiet {
                    eprintln!("Location: {loc} [following]");
                }
                if resp.status != 307 && resp.status != 308 {
                    method = "GET";
                    body = None;
                }
                continue;
            }
            break resp;
        };
        if resp.status >= 400 {
            eprintln!("wget: ERROR {}: {}.", resp.status, resp.reason);
            status = 8;
            continue;
        }
        let target = output.clone().unwrap_or_else(|| {
            let name = remote_name(&current);
            if name.is_empty() {
                "index.html".into()
            } else {
                name
            }
        });
        if let Err(e) = write_out(Some(&target), &resp.body) {
            eprintln!("wget: {target}: {e}");
            return 3;
        }
        if !quiet && target != "-" {
            eprintln!("Saving to: '{target}'");
            eprintln!("'{target}' saved [{}]", resp.body.len());
        }
        if resp.truncated {
            eprintln!("wget: the sandbox's download limit cut the response short");
            status = 4;
        }
    }
    status
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn locations_join_like_a_browser() {
        let base = "http://a.test:8080/x/y/z.html?q=1";
        assert_eq!(join(base, "http://b.test/p"), "http://b.test/p");
        assert_eq!(join(base, "//c.test/p"), "http://c.test/p");
        assert_eq!(join(base, "/root"), "http://a.test:8080/root");
        assert_eq!(join(base, "sib.html"), "http://a.test:8080/x/y/sib.html");
        assert_eq!(join("http://a.test", "p"), "http://a.test/p");
    }

    #[test]
    fn remote_names_are_the_last_segment() {
        assert_eq!(
            remote_name("http://a.test/dir/file.tar.gz?x=1"),
            "file.tar.gz"
        );
        assert_eq!(remote_name("http://a.test/"), "");
        assert_eq!(remote_name("http://a.test"), "");
    }

    #[test]
    fn resolve_entries_and_url_hosts() {
        assert_eq!(
            parse_resolve("Pkgs.Test:443:10.0.0.5,10.0.0.6"),
            Some(("pkgs.test".into(), 443, "10.0.0.5".into()))
        );
        assert_eq!(
            parse_resolve("+h:80:[::1]"),
            Some(("h".into(), 80, "::1".into()))
        );
        assert_eq!(parse_resolve("h:80:nowhere"), None);
        assert_eq!(parse_resolve("h:x:1.2.3.4"), None);
        assert_eq!(parse_resolve("h:80"), None);
        assert_eq!(
            url_host_port("https://u:p@Example.org/x?y"),
            Some(("example.org".into(), 443))
        );
        assert_eq!(
            url_host_port("http://example.org:8080"),
            Some(("example.org".into(), 8080))
        );
        assert_eq!(url_host_port("http://[::1]:81/"), Some(("::1".into(), 81)));
        assert_eq!(url_host_port("http://[::1]/"), Some(("::1".into(), 80)));
        assert_eq!(url_host_port("example.org"), None);
    }

    #[test]
    fn bundled_flags_and_data() {
        let args: Vec<String> = ["-fsSL", "-d", "a=1", "-d", "b=2", "-oout.txt", "http://x"]
            .iter()
            .map(|s| s.to_string())
            .collect();
        let c = parse_curl(&args).ok().unwrap();
        assert!(c.fail && c.silent && c.show_error && c.location);
        assert_eq!(c.data.as_deref(), Some(&b"a=1&b=2"[..]));
        assert_eq!(c.output.as_deref(), Some("out.txt"));
        assert_eq!(c.urls, ["http://x"]);
    }

    #[test]
    fn write_out_formats() {
        let r = Response {
            status: 204,
            reason: "No Content".into(),
            version: "HTTP/1.1".into(),
            headers: vec![("Content-Type".into(), "text/plain".into())],
            body: b"abc".to_vec(),
            truncated: false,
        };
        assert_eq!(
            expand_write_out(
                "%{http_code} %{size_download} %{content_type}\\n",
                &r,
                "u",
                0
            ),
            "204 3 text/plain\n"
        );
    }
}
