//! `clone`, `fetch`, `pull`, `ls-remote` and `remote` over git's smart HTTP protocol (version
//! 0, stateless RPC, as `git http-backend`, GitHub and GitLab serve it). Every request goes
//! through the sandbox's network door, so the egress policy decides which hosts a repository
//! may come from; the pack that comes back is checked and indexed by `pack.rs`.

use std::collections::{BTreeSet, HashMap, VecDeque};
use std::fs;

use base64::Engine as _;
use guest_rt::door;

use crate::repo::{Entry, Oid, Repo, hex, parse_hex};
use crate::{
    config_all, config_get, config_remove_section, config_set, cwd, die, die_usage, io,
    is_ancestor, out, short, switch_tree, write_file,
};

const AGENT: &str = "git/2.47.0-wasmsand";

/// Where a remote is, and how to authenticate to it.
struct Remote {
    /// The URL as the user wrote it (and as it is stored in the config).
    url: String,
    /// The URL without credentials or a trailing slash: where requests go.
    base: String,
    /// `Authorization` from credentials in the URL (`https://user:token@host/...`).
    auth: Option<String>,
}

fn parse_remote(url: &str) -> Result<Remote, String> {
    let Some((scheme, rest)) = url.split_once("://") else {
        return Err(format!(
            "'{url}' is not an HTTP(S) URL: this sandbox's git reaches remotes over http:// and \
             https:// only (through the network policy); ssh, git:// and local paths are not \
             supported"
        ));
    };
    if scheme != "http" && scheme != "https" {
        return Err(format!(
            "unsupported protocol '{scheme}' in '{url}': this sandbox's git reaches remotes \
             over http:// and https:// only"
        ));
    }
    let host_end = rest.find('/').unwrap_or(rest.len());
    let (authority, path) = rest.split_at(host_end);
    let (auth, host) = match authority.rsplit_once('@') {
        Some((cred, host)) => {
            let cred = percent_decode(cred);
            let header = base64::engine::general_purpose::STANDARD.encode(cred.as_bytes());
            (Some(format!("Basic {header}")), host)
        }
        None => (None, authority),
    };
    Ok(Remote {
        url: url.to_string(),
        base: format!("{scheme}://{host}{}", path.trim_end_matches('/')),
        auth,
    })
}

fn percent_decode(s: &str) -> String {
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        if b[i] == b'%'
            && let Some(v) = s
                .get(i + 1..i + 3)
                .and_then(|h| u8::from_str_radix(h, 16).ok())
        {
            out.push(v);
            i += 3;
            continue;
        }
        out.push(b[i]);
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// The URL as git shows it in messages: without credentials.
fn shown(remote: &Remote) -> String {
    remote.base.clone()
}

// ---- pkt-lines ----

fn pkt(data: &str) -> String {
    format!("{:04x}{data}", data.len() + 4)
}

enum Pkt<'a> {
    Data(&'a [u8]),
    Flush,
    Delim,
}

/// Reads pkt-lines from a response body.
struct Lines<'a> {
    buf: &'a [u8],
    pos: usize,
}

impl<'a> Lines<'a> {
    fn new(buf: &'a [u8]) -> Self {
        Lines { buf, pos: 0 }
    }

    fn next(&mut self) -> Result<Option<Pkt<'a>>, String> {
        if self.pos >= self.buf.len() {
            return Ok(None);
        }
        let len = self
            .buf
            .get(self.pos..self.pos + 4)
            .and_then(|h| std::str::from_utf8(h).ok())
            .and_then(|h| usize::from_str_radix(h, 16).ok())
            .ok_or("the server's answer is not git's protocol (bad pkt-line)")?;
        match len {
            0 => {
                self.pos += 4;
                Ok(Some(Pkt::Flush))
            }
            1 | 2 => {
                self.pos += 4;
                Ok(Some(Pkt::Delim))
            }
            3 => Err("the server's answer is not git's protocol (bad pkt-line)".into()),
            n => {
                let data = self
                    .buf
                    .get(self.pos + 4..self.pos + n)
                    .ok_or("the server's answer was cut short")?;
                self.pos += n;
                Ok(Some(Pkt::Data(data)))
            }
        }
    }

    fn rest(&self) -> &'a [u8] {
        &self.buf[self.pos.min(self.buf.len())..]
    }
}

fn text(line: &[u8]) -> &str {
    std::str::from_utf8(line)
        .unwrap_or("")
        .trim_end_matches('\n')
}

// ---- the two requests ----

/// What `info/refs` advertised.
struct Advert {
    /// Refs in the server's order (peeled `^{}` entries kept apart).
    refs: Vec<(String, Oid)>,
    /// `refs/tags/x` → the object an annotated tag points at.
    peeled: HashMap<String, Oid>,
    caps: Vec<String>,
    /// What HEAD points at (`refs/heads/main`), when the server says.
    head: Option<String>,
    /// The base URL after redirects: where `git-upload-pack` is posted.
    base: String,
}

impl Advert {
    fn has(&self, cap: &str) -> bool {
        self.caps.iter().any(|c| c == cap)
    }

    fn get(&self, name: &str) -> Option<Oid> {
        self.refs.iter().find(|(n, _)| n == name).map(|(_, o)| *o)
    }

    fn head_oid(&self) -> Option<Oid> {
        self.get("HEAD")
    }

    /// The branch HEAD names: the `symref` capability, or the branch at HEAD's commit.
    fn default_branch(&self) -> Option<String> {
        if let Some(h) = &self.head {
            return Some(h.clone());
        }
        let head = self.head_oid()?;
        let branches: Vec<&String> = self
            .refs
            .iter()
            .filter(|(n, o)| n.starts_with("refs/heads/") && *o == head)
            .map(|(n, _)| n)
            .collect();
        branches
            .iter()
            .find(|n| **n == "refs/heads/main" || **n == "refs/heads/master")
            .or(branches.first())
            .map(|s| s.to_string())
    }
}

fn headers(remote: &Remote, extra: &[(&str, &str)]) -> Vec<(String, String)> {
    let mut h = vec![("User-Agent".to_string(), AGENT.to_string())];
    for (k, v) in extra {
        h.push((k.to_string(), v.to_string()));
    }
    if let Some(a) = &remote.auth {
        h.push(("Authorization".into(), a.clone()));
    }
    h
}

fn unable(remote: &Remote, why: &str) -> String {
    format!("unable to access '{}/': {why}", shown(remote))
}

fn http_error(remote: &Remote, status: u16) -> String {
    match status {
        401 => format!("Authentication failed for '{}/'", shown(remote)),
        403 => unable(
            remote,
            "The requested URL returned error: 403 (access denied; credentials go in the URL, \
             https://user:token@host/...)",
        ),
        404 => format!("repository '{}/' not found", shown(remote)),
        s => unable(remote, &format!("The requested URL returned error: {s}")),
    }
}

const SERVICE: &str = "/info/refs?service=git-upload-pack";

fn discover(remote: &Remote) -> Result<Advert, String> {
    let mut url = format!("{}{SERVICE}", remote.base);
    let mut hops = 0;
    let resp = loop {
        let h = headers(remote, &[("Accept", "*/*"), ("Pragma", "no-cache")]);
        let resp = door::send(&door::Request {
            method: "GET",
            url: &url,
            headers: &h,
            body: None,
            timeout_ms: None,
            addr: None,
        })
        .map_err(|f| unable(remote, &f.message))?;
        if matches!(resp.status, 301 | 302 | 303 | 307 | 308)
            && let Some(loc) = resp.header("location")
        {
            hops += 1;
            if hops > 5 {
                return Err(unable(remote, "too many redirects"));
            }
            url = door::join(&url, loc);
            continue;
        }
        break resp;
    };
    if resp.status != 200 {
        return Err(http_error(remote, resp.status));
    }
    if resp.truncated {
        return Err(unable(
            remote,
            "the ref advertisement was cut at the run's download limit",
        ));
    }
    let base = url
        .strip_suffix(SERVICE)
        .ok_or_else(|| unable(remote, "redirected to a URL that is not a git repository"))?
        .to_string();
    let ctype = resp.header("content-type").unwrap_or("");
    if !ctype.starts_with("application/x-git-upload-pack-advertisement") {
        return Err(unable(
            remote,
            "the server speaks git's dumb HTTP protocol (or is not a git server), which this \
             git does not support; it needs smart HTTP",
        ));
    }
    let mut lines = Lines::new(&resp.body);
    let mut adv = Advert {
        refs: Vec::new(),
        peeled: HashMap::new(),
        caps: Vec::new(),
        head: None,
        base,
    };
    let mut first = true;
    while let Some(p) = lines.next()? {
        let Pkt::Data(d) = p else { continue };
        let line = text(d);
        if line.starts_with("# service=") {
            continue;
        }
        if let Some(msg) = line.strip_prefix("ERR ") {
            return Err(format!("remote error: {msg}"));
        }
        let (refpart, caps) = match line.split_once('\0') {
            Some((r, c)) => (r, Some(c)),
            None => (line, None),
        };
        if first && let Some(c) = caps {
            adv.caps = c.split(' ').map(String::from).collect();
            for cap in &adv.caps {
                if let Some(t) = cap.strip_prefix("symref=HEAD:") {
                    adv.head = Some(t.to_string());
                }
            }
        }
        first = false;
        let Some((h, name)) = refpart.split_once(' ') else {
            return Err("the server's ref advertisement is malformed".into());
        };
        let oid = parse_hex(h).ok_or("the server's ref advertisement is malformed")?;
        if name == "capabilities^{}" {
            continue;
        }
        match name.strip_suffix("^{}") {
            Some(tag) => {
                adv.peeled.insert(tag.to_string(), oid);
            }
            None => adv.refs.push((name.to_string(), oid)),
        }
    }
    Ok(adv)
}

/// What an upload-pack exchange gave back.
struct Fetched {
    pack: Vec<u8>,
    shallow: Vec<Oid>,
    unshallow: Vec<Oid>,
}

fn upload_pack(
    remote: &Remote,
    adv: &Advert,
    wants: &[Oid],
    haves: &[Oid],
    depth: Option<u32>,
    shallows: &[Oid],
) -> Result<Fetched, String> {
    let band = if adv.has("side-band-64k") {
        Some("side-band-64k")
    } else if adv.has("side-band") {
        Some("side-band")
    } else {
        None
    };
    let mut caps: Vec<&str> = band.into_iter().collect();
    for c in ["ofs-delta", "include-tag", "no-progress"] {
        if adv.has(c) {
            caps.push(c);
        }
    }
    if depth.is_some() || !shallows.is_empty() {
        if !adv.has("shallow") {
            return Err("the server does not support shallow clones (--depth)".into());
        }
        caps.push("shallow");
    }
    let agent = format!("agent={AGENT}");
    caps.push(&agent);
    let mut body = String::new();
    for (i, w) in wants.iter().enumerate() {
        if i == 0 {
            body += &pkt(&format!("want {} {}\n", hex(w), caps.join(" ")));
        } else {
            body += &pkt(&format!("want {}\n", hex(w)));
        }
    }
    for s in shallows {
        body += &pkt(&format!("shallow {}\n", hex(s)));
    }
    if let Some(d) = depth {
        body += &pkt(&format!("deepen {d}\n"));
    }
    body += "0000";
    for h in haves {
        body += &pkt(&format!("have {}\n", hex(h)));
    }
    body += &pkt("done\n");
    let url = format!("{}/git-upload-pack", adv.base);
    let h = headers(
        remote,
        &[
            ("Content-Type", "application/x-git-upload-pack-request"),
            ("Accept", "application/x-git-upload-pack-result"),
        ],
    );
    let resp = door::send(&door::Request {
        method: "POST",
        url: &url,
        headers: &h,
        body: Some(body.as_bytes()),
        timeout_ms: None,
        addr: None,
    })
    .map_err(|f| unable(remote, &f.message))?;
    if resp.status != 200 {
        return Err(http_error(remote, resp.status));
    }
    if resp.truncated {
        return Err(format!(
            "the pack from '{}' was cut at the run's download limit; raise the sandbox's \
             network byte limit or clone with --depth 1",
            shown(remote)
        ));
    }
    let mut lines = Lines::new(&resp.body);
    let mut got = Fetched {
        pack: Vec::new(),
        shallow: Vec::new(),
        unshallow: Vec::new(),
    };
    loop {
        match lines.next()? {
            None => return Err("the server ended the exchange without sending a pack".into()),
            Some(Pkt::Data(d)) => {
                let line = text(d);
                if let Some(o) = line.strip_prefix("shallow ").and_then(parse_hex) {
                    got.shallow.push(o);
                } else if let Some(o) = line.strip_prefix("unshallow ").and_then(parse_hex) {
                    got.unshallow.push(o);
                } else if line == "NAK" || line.starts_with("ACK ") {
                    break;
                } else if let Some(msg) = line.strip_prefix("ERR ") {
                    return Err(format!("remote error: {msg}"));
                }
            }
            Some(_) => {}
        }
    }
    if band.is_none() {
        got.pack = lines.rest().to_vec();
        return Ok(got);
    }
    while let Some(p) = lines.next()? {
        let Pkt::Data(d) = p else { break };
        match d.first() {
            Some(1) => got.pack.extend_from_slice(&d[1..]),
            Some(2) => {}
            Some(3) => {
                return Err(format!(
                    "remote error: {}",
                    String::from_utf8_lossy(&d[1..]).trim_end()
                ));
            }
            _ => return Err("the server's answer is not git's protocol (bad side band)".into()),
        }
    }
    Ok(got)
}

/// Indexes a fetched pack into the repository and records the shallow boundary.
fn store(r: &Repo, got: &Fetched) -> Result<usize, String> {
    let mut objects = 0;
    if got.pack.len() > 32 || got.pack.get(8..12).is_some_and(|n| n != [0, 0, 0, 0]) {
        let dir = r.git.join("objects/pack");
        let indexed = crate::pack::index_pack(&got.pack, &dir, &|id| r.read_object(id).ok())?;
        objects = indexed.objects;
        r.reload_packs();
    }
    if !got.shallow.is_empty() || !got.unshallow.is_empty() {
        let mut set: BTreeSet<String> = fs::read_to_string(r.git.join("shallow"))
            .unwrap_or_default()
            .lines()
            .map(String::from)
            .collect();
        for s in &got.shallow {
            set.insert(hex(s));
        }
        for s in &got.unshallow {
            set.remove(&hex(s));
        }
        let text: String = set.iter().map(|s| format!("{s}\n")).collect();
        if text.is_empty() {
            let _ = fs::remove_file(r.git.join("shallow"));
        } else {
            fs::write(r.git.join("shallow"), text).map_err(|e| e.to_string())?;
        }
    }
    Ok(objects)
}

fn shallows_of(r: &Repo) -> Vec<Oid> {
    fs::read_to_string(r.git.join("shallow"))
        .unwrap_or_default()
        .lines()
        .filter_map(|l| parse_hex(l.trim()))
        .collect()
}

/// Commits the server may share with us: every local ref's history, newest first, capped.
fn haves(r: &Repo) -> Vec<Oid> {
    let mut queue: VecDeque<Oid> = r.refs().into_values().collect();
    let mut seen = BTreeSet::new();
    let mut out = Vec::new();
    while let Some(o) = queue.pop_front() {
        if out.len() >= 256 || !seen.insert(o) {
            continue;
        }
        let Ok(c) = r.read_commit(&o) else { continue };
        out.push(o);
        queue.extend(c.parents);
    }
    out
}

fn delete_ref(r: &Repo, name: &str) {
    let _ = fs::remove_file(r.git.join(name));
    let _ = fs::remove_file(r.git.join("logs").join(name));
    if let Ok(p) = fs::read_to_string(r.git.join("packed-refs")) {
        let kept: String = p
            .lines()
            .filter(|l| l.split_once(' ').is_none_or(|(_, n)| n != name))
            .map(|l| format!("{l}\n"))
            .collect();
        let _ = fs::write(r.git.join("packed-refs"), kept);
    }
}

/// Writes `commit`'s tree into an empty work tree and the index.
fn checkout_fresh(r: &Repo, commit: &Oid) -> Result<(), String> {
    let c = r.read_commit(commit)?;
    let tree = r.read_tree(&c.tree)?;
    let mut entries = Vec::with_capacity(tree.len());
    for (path, (mode, oid)) in tree {
        if mode == 0o160000 {
            // A submodule: git leaves an empty directory for it.
            let _ = fs::create_dir_all(r.root.join(&path));
            continue;
        }
        let size = write_file(r, &path, mode, &oid);
        entries.push(Entry {
            mtime: crate::mtime_of(r, &path),
            path,
            mode,
            oid,
            size,
        });
    }
    r.write_index(&mut entries).map_err(|e| e.to_string())
}

// ---- clone ----

fn value<'a>(a: &'a str, it: &mut std::slice::Iter<'a, String>, name: &str) -> &'a str {
    match a.split_once('=') {
        Some((_, v)) => v,
        None => it
            .next()
            .map(String::as_str)
            .unwrap_or_else(|| die_usage(&format!("option `{name}' requires a value"))),
    }
}

fn depth_value(v: &str) -> u32 {
    match v.parse::<u32>() {
        Ok(d) if d > 0 => d,
        _ => die(&format!("depth {v} is not a positive number")),
    }
}

/// The directory `git clone URL` makes: the URL's last segment without `.git`.
fn humanish(url: &str) -> String {
    let u = url.trim_end_matches('/');
    let u = u.strip_suffix("/.git").unwrap_or(u);
    let last = u.rsplit(['/', ':']).next().unwrap_or(u);
    let last = last.strip_suffix(".git").unwrap_or(last);
    if last.is_empty() || last.contains('@') {
        "repository".into()
    } else {
        last.to_string()
    }
}

pub fn cmd_clone(args: &[String]) -> i32 {
    let mut quiet = false;
    let mut depth = None;
    let mut branch: Option<String> = None;
    let mut single = false;
    let mut checkout = true;
    let mut origin = "origin".to_string();
    let mut tags = true;
    let mut pos = Vec::new();
    let mut it = args.iter();
    while let Some(a) = it.next() {
        let name = a.split('=').next().unwrap_or(a);
        match name {
            "-q" | "--quiet" => quiet = true,
            "-v" | "--verbose" | "--progress" | "--no-progress" => {}
            "--depth" => depth = Some(depth_value(value(a, &mut it, "--depth"))),
            "-b" | "--branch" => branch = Some(value(a, &mut it, "--branch").to_string()),
            "--single-branch" => single = true,
            "--no-single-branch" => single = false,
            "-n" | "--no-checkout" => checkout = false,
            "-o" | "--origin" => origin = value(a, &mut it, "--origin").to_string(),
            "--no-tags" => tags = false,
            "--recurse-submodules" | "--recursive" | "--shallow-submodules" => {
                eprintln!("warning: submodules are not fetched by this sandbox's git");
            }
            "--filter" | "--bare" | "--mirror" | "--reference" | "--separate-git-dir" => {
                die_usage(&format!("{name} is not supported by this sandbox's git"))
            }
            _ if a.starts_with('-') && a.len() > 1 => die_usage(&format!("unknown option: {a}")),
            _ => pos.push(a.clone()),
        }
    }
    let (url, dir) = match pos.as_slice() {
        [u] => (u.clone(), humanish(u)),
        [u, d] => (u.clone(), d.clone()),
        [] => die_usage("You must specify a repository to clone."),
        _ => die_usage("Too many arguments."),
    };
    // A shallow clone fetches one branch unless told otherwise, as git's does.
    if depth.is_some() && !args.iter().any(|a| a == "--no-single-branch") {
        single = true;
    }
    let remote = parse_remote(&url).unwrap_or_else(|e| die(&e));
    let root = cwd().join(&dir);
    let existed = root.exists();
    if existed && fs::read_dir(&root).is_ok_and(|mut d| d.next().is_some()) {
        die(&format!(
            "destination path '{dir}' already exists and is not an empty directory."
        ));
    }
    if !quiet {
        eprintln!("Cloning into '{dir}'...");
    }
    let made = root.clone();
    let cleanup = |msg: String| -> ! {
        if existed {
            if let Ok(rd) = fs::read_dir(&made) {
                for e in rd.flatten() {
                    let _ = fs::remove_dir_all(e.path()).or_else(|_| fs::remove_file(e.path()));
                }
            }
        } else {
            let _ = fs::remove_dir_all(&made);
        }
        die(&msg)
    };
    let adv = discover(&remote).unwrap_or_else(|e| die(&e));
    io(fs::create_dir_all(&root));
    let root = fs::canonicalize(&root).unwrap_or(root);
    let default = adv.default_branch();
    let init_branch = default
        .as_deref()
        .and_then(|d| d.strip_prefix("refs/heads/"))
        .map(String::from)
        .or_else(|| config_get(None, "init.defaultbranch"))
        .unwrap_or_else(|| "master".into());
    let r = crate::create_repo(&root, &init_branch).unwrap_or_else(|e| cleanup(e.to_string()));
    let config = r.git.join("config");
    let set = |k: &str, v: &str| {
        config_set(&config, k, v).unwrap_or_else(|e| cleanup(e.to_string()));
    };
    set(&format!("remote.{origin}.url"), &url);
    if adv.refs.is_empty() {
        set(
            &format!("remote.{origin}.fetch"),
            &format!("+refs/heads/*:refs/remotes/{origin}/*"),
        );
        eprintln!("warning: You appear to have cloned an empty repository.");
        return 0;
    }
    // What to check out: a branch (`-b` or the remote's HEAD) or, for `-b TAG`, a tag.
    let (target_ref, detached) = match &branch {
        Some(b) => {
            if adv.get(&format!("refs/heads/{b}")).is_some() {
                (format!("refs/heads/{b}"), false)
            } else if adv.get(&format!("refs/tags/{b}")).is_some() {
                (format!("refs/tags/{b}"), true)
            } else {
                cleanup(format!("Remote branch {b} not found in upstream {origin}"));
            }
        }
        None => match default {
            Some(d) => (d, false),
            None => cleanup("the remote HEAD names no branch".into()),
        },
    };
    let refspec = if single && !detached {
        let b = target_ref.trim_start_matches("refs/heads/");
        format!("+refs/heads/{b}:refs/remotes/{origin}/{b}")
    } else {
        format!("+refs/heads/*:refs/remotes/{origin}/*")
    };
    set(&format!("remote.{origin}.fetch"), &refspec);
    let mut wants: Vec<Oid> = Vec::new();
    for (name, oid) in &adv.refs {
        let wanted = if single {
            *name == target_ref
        } else {
            name.starts_with("refs/heads/") || (tags && name.starts_with("refs/tags/"))
        };
        if wanted && !wants.contains(oid) {
            wants.push(*oid);
        }
    }
    let got = upload_pack(&remote, &adv, &wants, &[], depth, &[]).unwrap_or_else(|e| cleanup(e));
    store(&r, &got)
        .unwrap_or_else(|e| cleanup(format!("{e} (fetching from '{}')", shown(&remote))));
    let msg = format!("clone: from {}", shown(&remote));
    let write = |name: &str, oid: &Oid| {
        r.write_ref(name, oid, None, &msg)
            .unwrap_or_else(|e| cleanup(e.to_string()));
    };
    for (name, oid) in &adv.refs {
        if let Some(b) = name.strip_prefix("refs/heads/") {
            if !single || *name == target_ref {
                write(&format!("refs/remotes/{origin}/{b}"), oid);
            }
        } else if name.starts_with("refs/tags/") && tags && r.has_object(oid) {
            write(name, oid);
        }
    }
    if let Some(d) = adv.default_branch()
        && (!single || d == target_ref)
    {
        let b = d.trim_start_matches("refs/heads/");
        let p = r.git.join(format!("refs/remotes/{origin}/HEAD"));
        io(fs::write(p, format!("ref: refs/remotes/{origin}/{b}\n")));
    }
    let tip = adv.get(&target_ref).unwrap();
    let commit = r.peel(&tip);
    if detached {
        io(fs::write(r.git.join("HEAD"), format!("{}\n", hex(&commit))));
        io(r.reflog("HEAD", None, &commit, &msg));
    } else {
        let b = target_ref.trim_start_matches("refs/heads/").to_string();
        io(fs::write(
            r.git.join("HEAD"),
            format!("ref: refs/heads/{b}\n"),
        ));
        write(&target_ref, &tip);
        io(r.reflog("HEAD", None, &tip, &msg));
        set(&format!("branch.{b}.remote"), &origin);
        set(&format!("branch.{b}.merge"), &target_ref);
    }
    if checkout {
        checkout_fresh(&r, &commit).unwrap_or_else(|e| cleanup(e));
        if detached && !quiet {
            eprintln!(
                "Note: switching to '{}'.\n\nYou are in 'detached HEAD' state.",
                hex(&commit)
            );
        }
    }
    0
}

// ---- fetch / pull ----

/// `[+]src[:dst]`, with at most one `*` on each side.
struct Refspec {
    force: bool,
    src: String,
    dst: Option<String>,
}

fn parse_refspec(s: &str) -> Refspec {
    let (force, s) = match s.strip_prefix('+') {
        Some(rest) => (true, rest),
        None => (false, s),
    };
    let (src, dst) = match s.split_once(':') {
        Some((a, b)) => (a.to_string(), (!b.is_empty()).then(|| b.to_string())),
        None => (s.to_string(), None),
    };
    Refspec { force, src, dst }
}

impl Refspec {
    /// The remote ref `name` matched by this spec, and where it goes locally.
    fn map(&self, name: &str, remote: &str) -> Option<Option<String>> {
        if let Some((pre, post)) = self.src.split_once('*') {
            let mid = name.strip_prefix(pre)?.strip_suffix(post)?;
            return Some(self.dst.as_ref().map(|d| d.replacen('*', mid, 1)));
        }
        let full = [
            self.src.clone(),
            format!("refs/{}", self.src),
            format!("refs/heads/{}", self.src),
            format!("refs/tags/{}", self.src),
        ];
        if !full.iter().any(|f| f == name) {
            return None;
        }
        Some(match &self.dst {
            Some(d) if d.starts_with("refs/") => Some(d.clone()),
            Some(d) => Some(format!("refs/heads/{d}")),
            // `git fetch origin main` also moves origin/main, as git does since 1.8.4.
            None => name
                .strip_prefix("refs/heads/")
                .map(|b| format!("refs/remotes/{remote}/{b}")),
        })
    }
}

/// One ref the fetch moved (or would have).
struct Update {
    flag: char,
    summary: String,
    from: String,
    to: String,
}

fn short_ref(name: &str) -> String {
    for p in ["refs/heads/", "refs/tags/", "refs/remotes/"] {
        if let Some(s) = name.strip_prefix(p) {
            return s.to_string();
        }
    }
    name.to_string()
}

/// What a fetch did: the refs named for merging (FETCH_HEAD's first lines), and whether any
/// update was refused.
struct FetchResult {
    merge: Vec<(String, Oid)>,
    failed: bool,
}

struct FetchOpts {
    quiet: bool,
    depth: Option<u32>,
    unshallow: bool,
    tags: Option<bool>,
    prune: bool,
}

fn remote_of(r: &Repo, name: &str) -> Result<(Remote, Option<String>), String> {
    if name.contains("://") {
        return Ok((parse_remote(name)?, None));
    }
    match config_get(Some(r), &format!("remote.{name}.url")) {
        Some(u) => Ok((parse_remote(&u)?, Some(name.to_string()))),
        None => Err(format!(
            "'{name}' does not appear to be a git repository\nfatal: Could not read from \
             remote repository.\n\nPlease make sure you have the correct access rights\nand \
             the repository exists."
        )),
    }
}

fn upstream_remote(r: &Repo) -> String {
    r.head()
        .ok()
        .and_then(|b| config_get(Some(r), &format!("branch.{b}.remote")))
        .unwrap_or_else(|| "origin".into())
}

fn fetch(r: &Repo, name: &str, specs: &[String], opts: &FetchOpts) -> Result<FetchResult, String> {
    let (remote, named) = remote_of(r, name)?;
    let adv = discover(&remote)?;
    let cli = !specs.is_empty();
    let specs: Vec<Refspec> = if cli {
        specs.iter().map(|s| parse_refspec(s)).collect()
    } else {
        named
            .as_ref()
            .map(|n| config_all(Some(r), &format!("remote.{n}.fetch")))
            .unwrap_or_default()
            .iter()
            .map(|s| parse_refspec(s))
            .collect()
    };
    let label = named.clone().unwrap_or_default();
    // (remote ref, id, local ref, forced)
    let mut plan: Vec<(String, Oid, Option<String>, bool)> = Vec::new();
    for spec in &specs {
        let mut matched = false;
        for (n, o) in &adv.refs {
            if n == "HEAD" {
                continue;
            }
            if let Some(dst) = spec.map(n, &label) {
                matched = true;
                let dst = if named.is_none() && !cli { None } else { dst };
                plan.push((n.clone(), *o, dst, spec.force));
            }
        }
        if cli && !matched && !spec.src.contains('*') {
            return Err(format!("couldn't find remote ref {}", spec.src));
        }
    }
    // Tags: every one with --tags; otherwise those that point into what we fetch or have.
    let mut wanted: Vec<Oid> = plan.iter().map(|p| p.1).collect();
    let follow = opts.tags.unwrap_or(!cli || named.is_some());
    for (n, o) in &adv.refs {
        if !n.starts_with("refs/tags/") || plan.iter().any(|p| p.0 == *n) {
            continue;
        }
        let target = adv.peeled.get(n).copied().unwrap_or(*o);
        let take = match opts.tags {
            Some(true) => true,
            Some(false) => false,
            None => follow && (wanted.contains(&target) || r.has_object(&target)),
        };
        if take && r.read_ref(n).is_none_or(|cur| cur != *o) {
            plan.push((n.clone(), *o, Some(n.clone()), opts.tags == Some(true)));
        }
    }
    wanted = plan.iter().map(|p| p.1).collect();
    let mut wants: Vec<Oid> = Vec::new();
    for o in &wanted {
        if (!r.has_object(o) || opts.depth.is_some() || opts.unshallow) && !wants.contains(o) {
            wants.push(*o);
        }
    }
    let shallow = shallows_of(r);
    if opts.unshallow && shallow.is_empty() {
        return Err("--unshallow on a complete repository does not make sense".into());
    }
    if !wants.is_empty() {
        let depth = if opts.unshallow {
            Some(0x7fff_ffff)
        } else {
            opts.depth
        };
        let got = upload_pack(&remote, &adv, &wants, &haves(r), depth, &shallow)?;
        store(r, &got)?;
        // Tags the server included (`include-tag`) for history that only now arrived.
        if opts.tags.is_none() && follow {
            for (n, o) in &adv.refs {
                if n.starts_with("refs/tags/")
                    && !plan.iter().any(|p| p.0 == *n)
                    && r.read_ref(n).is_none()
                    && r.has_object(o)
                    && r.has_object(&r.peel(o))
                {
                    plan.push((n.clone(), *o, Some(n.clone()), false));
                }
            }
        }
    }
    // Update refs, as git reports them.
    let mut updates = Vec::new();
    let mut failed = false;
    let msg = format!("fetch: from {}", shown(&remote));
    for (src, oid, dst, force) in &plan {
        let Some(dst) = dst else { continue };
        let old = r.read_ref(dst);
        let (from, to) = (short_ref(src), short_ref(dst));
        let up = match old {
            Some(o) if o == *oid => continue,
            None => {
                let what = if dst.starts_with("refs/tags/") {
                    "[new tag]"
                } else if src.starts_with("refs/heads/") {
                    "[new branch]"
                } else {
                    "[new ref]"
                };
                Update {
                    flag: '*',
                    summary: what.into(),
                    from,
                    to,
                }
            }
            Some(o) => {
                let ff = !dst.starts_with("refs/tags/") && is_ancestor(r, &o, Some(r.peel(oid)));
                if ff {
                    Update {
                        flag: ' ',
                        summary: format!("{}..{}", short(&o), short(oid)),
                        from,
                        to,
                    }
                } else if *force {
                    Update {
                        flag: '+',
                        summary: format!("{}...{}", short(&o), short(oid)),
                        from,
                        to: format!("{to}  (forced update)"),
                    }
                } else {
                    failed = true;
                    let why = if dst.starts_with("refs/tags/") {
                        "would clobber existing tag"
                    } else {
                        "non-fast-forward"
                    };
                    updates.push(Update {
                        flag: '!',
                        summary: "[rejected]".into(),
                        from,
                        to: format!("{to}  ({why})"),
                    });
                    continue;
                }
            }
        };
        r.write_ref(dst, oid, old, &msg)
            .map_err(|e| e.to_string())?;
        updates.push(up);
    }
    if opts.prune
        && let Some(n) = &named
    {
        let prefix = format!("refs/remotes/{n}/");
        for (local, _) in r.refs() {
            let Some(b) = local.strip_prefix(&prefix) else {
                continue;
            };
            if b == "HEAD" || adv.get(&format!("refs/heads/{b}")).is_some() {
                continue;
            }
            delete_ref(r, &local);
            updates.push(Update {
                flag: '-',
                summary: "[deleted]".into(),
                from: "(none)".into(),
                to: short_ref(&local),
            });
        }
    }
    if !opts.quiet && !updates.is_empty() {
        let w = updates
            .iter()
            .map(|u| u.from.len())
            .max()
            .unwrap_or(0)
            .max(10);
        let mut s = format!("From {}\n", shown(&remote));
        for u in &updates {
            s += &format!(" {} {:<17} {:<w$} -> {}\n", u.flag, u.summary, u.from, u.to);
        }
        eprint!("{s}");
    }
    // FETCH_HEAD: what pull merges first, then the rest marked not-for-merge.
    let cur = r.head().ok();
    let merge_ref = cur
        .as_ref()
        .filter(|b| {
            named.is_some()
                && config_get(Some(r), &format!("branch.{b}.remote")).as_deref() == named.as_deref()
        })
        .and_then(|b| config_get(Some(r), &format!("branch.{b}.merge")));
    let mut merge = Vec::new();
    let mut head = String::new();
    let mut rest = String::new();
    for (i, (src, oid, _, _)) in plan.iter().enumerate() {
        let kind = if let Some(b) = src.strip_prefix("refs/heads/") {
            format!("branch '{b}'")
        } else if let Some(t) = src.strip_prefix("refs/tags/") {
            format!("tag '{t}'")
        } else {
            format!("'{src}'")
        };
        let for_merge = if cli {
            i == 0
        } else {
            Some(src) == merge_ref.as_ref()
        };
        if for_merge {
            merge.push((src.clone(), *oid));
            head += &format!("{}\t\t{kind} of {}\n", hex(oid), shown(&remote));
        } else {
            rest += &format!(
                "{}\tnot-for-merge\t{kind} of {}\n",
                hex(oid),
                shown(&remote)
            );
        }
    }
    fs::write(r.git.join("FETCH_HEAD"), head + &rest).map_err(|e| e.to_string())?;
    Ok(FetchResult { merge, failed })
}

fn fetch_opts<'a>(a: &'a str, it: &mut std::slice::Iter<'a, String>, o: &mut FetchOpts) -> bool {
    let name = a.split('=').next().unwrap_or(a);
    match name {
        "-q" | "--quiet" => o.quiet = true,
        "-v" | "--verbose" | "--progress" | "--no-progress" | "-f" | "--force" => {}
        "--depth" => o.depth = Some(depth_value(value(a, it, "--depth"))),
        "--unshallow" => o.unshallow = true,
        "-t" | "--tags" => o.tags = Some(true),
        "-n" | "--no-tags" => o.tags = Some(false),
        "-p" | "--prune" => o.prune = true,
        _ => return false,
    }
    true
}

fn new_opts() -> FetchOpts {
    FetchOpts {
        quiet: false,
        depth: None,
        unshallow: false,
        tags: None,
        prune: false,
    }
}

pub fn cmd_fetch(r: &Repo, args: &[String]) -> i32 {
    let mut o = new_opts();
    let mut all = false;
    let mut pos = Vec::new();
    let mut it = args.iter();
    while let Some(a) = it.next() {
        if fetch_opts(a, &mut it, &mut o) {
            continue;
        }
        match a.as_str() {
            "--all" => all = true,
            _ if a.starts_with('-') => die_usage(&format!("unknown option: {a}")),
            _ => pos.push(a.clone()),
        }
    }
    let remotes = if all {
        remote_names(r)
    } else {
        vec![pos.first().cloned().unwrap_or_else(|| upstream_remote(r))]
    };
    let specs = if all || pos.len() < 2 {
        &[][..]
    } else {
        &pos[1..]
    };
    let mut code = 0;
    for name in remotes {
        match fetch(r, &name, specs, &o) {
            Ok(res) if res.failed => {
                eprintln!("error: some local refs could not be updated");
                code = 1;
            }
            Ok(_) => {}
            Err(e) => die(&e),
        }
    }
    code
}

pub fn cmd_pull(r: &Repo, args: &[String]) -> i32 {
    let mut o = new_opts();
    let mut pos = Vec::new();
    let mut it = args.iter();
    while let Some(a) = it.next() {
        if fetch_opts(a, &mut it, &mut o) {
            continue;
        }
        match a.as_str() {
            "--ff-only" | "--ff" | "--no-rebase" | "--stat" | "--no-stat" | "--no-edit" => {}
            "-r" | "--rebase" | "--no-ff" | "--squash" => die(&format!(
                "git pull {a}: this sandbox's git can only fast-forward (it has no merge or \
                 rebase)"
            )),
            _ if a.starts_with('-') => die_usage(&format!("unknown option: {a}")),
            _ => pos.push(a.clone()),
        }
    }
    let name = pos.first().cloned().unwrap_or_else(|| upstream_remote(r));
    if pos.len() < 2 {
        let b = r.head().ok();
        let tracked = b
            .as_ref()
            .and_then(|b| config_get(Some(r), &format!("branch.{b}.merge")));
        if tracked.is_none() {
            eprintln!(
                "There is no tracking information for the current branch.\nPlease specify \
                 which branch you want to merge with.\n\n    git pull <remote> <branch>\n\nIf \
                 you wish to set tracking information for this branch you can do so with:\n\n    \
                 git branch --set-upstream-to={name}/<branch> {}\n",
                b.unwrap_or_else(|| "<branch>".into())
            );
            return 1;
        }
    }
    let res = match fetch(r, &name, &pos[pos.len().min(1)..], &o) {
        Ok(res) => res,
        Err(e) => die(&e),
    };
    let Some((src, theirs)) = res.merge.first().cloned() else {
        die(&format!(
            "couldn't find remote ref {}",
            r.head()
                .ok()
                .and_then(|b| config_get(Some(r), &format!("branch.{b}.merge")))
                .unwrap_or_default()
        ));
    };
    let theirs = r.peel(&theirs);
    let ours = r.head_oid();
    let msg = format!("pull: Fast-forward from {}", short_ref(&src));
    let Some(ours) = ours else {
        // An unborn branch takes the fetched commit as it is.
        if let Err(e) = checkout_fresh(r, &theirs) {
            die(&e);
        }
        io(r.update_head(&theirs, &msg));
        return 0;
    };
    if ours == theirs || is_ancestor(r, &theirs, Some(ours)) {
        if !o.quiet {
            out("Already up to date.\n");
        }
        return 0;
    }
    if !is_ancestor(r, &ours, Some(theirs)) {
        eprintln!(
            "hint: Your branch and '{}' have diverged; this sandbox's git can only \
             fast-forward\nhint: (it has no merge or rebase). Keep your commits on another \
             branch and\nhint: reset to the fetched one: git branch keep && git reset --hard \
             {}",
            short_ref(&src),
            hex(&theirs)
        );
        die("Not possible to fast-forward, aborting.");
    }
    let before = crate::tree_of(r, Some(ours));
    if let Err(files) = switch_tree(r, &theirs, false) {
        let mut s = "error: Your local changes to the following files would be overwritten by \
                     merge:\n"
            .to_string();
        for f in files {
            s += &format!("\t{f}\n");
        }
        s += "Please commit your changes or stash them before you merge.\nAborting\n";
        eprint!("{s}");
        return 1;
    }
    io(r.update_head(&theirs, &msg));
    if !o.quiet {
        let after = crate::tree_of(r, Some(theirs));
        let list = crate::changes(&before, &after);
        out(&format!(
            "Updating {}..{}\nFast-forward\n{}",
            short(&ours),
            short(&theirs),
            crate::diffstat(r, &list, false)
        ));
    }
    0
}

// ---- ls-remote / remote ----

pub fn cmd_ls_remote(args: &[String]) -> i32 {
    let (mut heads, mut tags, mut refs_only, mut get_url, mut symref) =
        (false, false, false, false, false);
    let mut pos = Vec::new();
    for a in args {
        match a.as_str() {
            "--heads" | "--branches" | "-b" => heads = true,
            "-t" | "--tags" => tags = true,
            "--refs" => refs_only = true,
            "-q" | "--quiet" | "--exit-code" => {}
            "--get-url" => get_url = true,
            "--symref" => symref = true,
            _ if a.starts_with('-') => die_usage(&format!("unknown option: {a}")),
            _ => pos.push(a.clone()),
        }
    }
    let r = Repo::discover(&cwd());
    let name = match pos.first() {
        Some(n) => n.clone(),
        None => match &r {
            Some(r) => upstream_remote(r),
            None => die("No remote configured to list refs from."),
        },
    };
    let remote = match &r {
        Some(r) => remote_of(r, &name).map(|x| x.0),
        None => parse_remote(&name),
    }
    .unwrap_or_else(|e| die(&e));
    if get_url {
        out(&format!("{}\n", remote.url));
        return 0;
    }
    let adv = discover(&remote).unwrap_or_else(|e| die(&e));
    let patterns = &pos[pos.len().min(1)..];
    let mut s = String::new();
    if symref && let Some(h) = &adv.head {
        s += &format!("ref: {h}\tHEAD\n");
    }
    for (n, o) in &adv.refs {
        let kind_ok = (!heads && !tags)
            || (heads && n.starts_with("refs/heads/"))
            || (tags && n.starts_with("refs/tags/"));
        if !kind_ok || (refs_only && n == "HEAD") {
            continue;
        }
        if !patterns.is_empty()
            && !patterns
                .iter()
                .any(|p| n == p || n.ends_with(&format!("/{p}")))
        {
            continue;
        }
        s += &format!("{}\t{n}\n", hex(o));
        if !refs_only && let Some(p) = adv.peeled.get(n) {
            s += &format!("{}\t{n}^{{}}\n", hex(p));
        }
    }
    out(&s);
    0
}

fn remote_names(r: &Repo) -> Vec<String> {
    let mut names: Vec<String> = Vec::new();
    for line in fs::read_to_string(r.git.join("config"))
        .unwrap_or_default()
        .lines()
    {
        let t = line.trim();
        if let Some(n) = t
            .strip_prefix("[remote \"")
            .and_then(|x| x.strip_suffix("\"]"))
            && !names.iter().any(|x| x == n)
        {
            names.push(n.to_string());
        }
    }
    names
}

pub fn cmd_remote(r: &Repo, args: &[String]) -> i32 {
    let config = r.git.join("config");
    let exists = |n: &str| config_get(Some(r), &format!("remote.{n}.url")).is_some();
    let verbose = args.first().is_some_and(|a| a == "-v" || a == "--verbose");
    let args: Vec<&String> = if verbose { &args[1..] } else { args }.iter().collect();
    match args.first().map(|s| s.as_str()) {
        None => {
            let mut s = String::new();
            for n in remote_names(r) {
                if verbose {
                    let u = config_get(Some(r), &format!("remote.{n}.url")).unwrap_or_default();
                    s += &format!("{n}\t{u} (fetch)\n{n}\t{u} (push)\n");
                } else {
                    s += &format!("{n}\n");
                }
            }
            out(&s);
            0
        }
        Some("add") => {
            let [_, name, url] = args.as_slice() else {
                die_usage("usage: git remote add <name> <url>");
            };
            if exists(name) {
                eprintln!("error: remote {name} already exists.");
                return 3;
            }
            if let Err(e) = parse_remote(url) {
                die(&e);
            }
            io(config_set(&config, &format!("remote.{name}.url"), url));
            io(config_set(
                &config,
                &format!("remote.{name}.fetch"),
                &format!("+refs/heads/*:refs/remotes/{name}/*"),
            ));
            0
        }
        Some("get-url") => {
            let [_, name] = args.as_slice() else {
                die_usage("usage: git remote get-url <name>");
            };
            match config_get(Some(r), &format!("remote.{name}.url")) {
                Some(u) => {
                    out(&format!("{u}\n"));
                    0
                }
                None => {
                    eprintln!("error: No such remote '{name}'");
                    2
                }
            }
        }
        Some("set-url") => {
            let [_, name, url] = args.as_slice() else {
                die_usage("usage: git remote set-url <name> <newurl>");
            };
            if !exists(name) {
                eprintln!("error: No such remote '{name}'");
                return 2;
            }
            if let Err(e) = parse_remote(url) {
                die(&e);
            }
            io(config_set(&config, &format!("remote.{name}.url"), url));
            0
        }
        Some("remove" | "rm") => {
            let [_, name] = args.as_slice() else {
                die_usage("usage: git remote remove <name>");
            };
            if !exists(name) {
                eprintln!("error: No such remote: '{name}'");
                return 2;
            }
            io(config_remove_section(
                &config,
                &format!("remote \"{name}\""),
            ));
            for (n, _) in r.refs() {
                if n.starts_with(&format!("refs/remotes/{name}/")) {
                    delete_ref(r, &n);
                }
            }
            let _ = fs::remove_file(r.git.join(format!("refs/remotes/{name}/HEAD")));
            0
        }
        Some(other) => die_usage(&format!(
            "git remote {other} is not supported by this sandbox's git (add, remove, get-url, \
             set-url and -v are)"
        )),
    }
}

/// `git branch -r` / `-a`: the remote-tracking branches, as `origin/main`.
pub fn remote_branches(r: &Repo) -> Vec<(String, Option<String>)> {
    let mut out = Vec::new();
    for (n, _) in r.refs() {
        if let Some(b) = n.strip_prefix("refs/remotes/") {
            out.push((b.to_string(), None));
        }
    }
    // `origin/HEAD -> origin/main`: HEAD is a symbolic ref, not in `Repo::refs`.
    if let Ok(rd) = fs::read_dir(r.git.join("refs/remotes")) {
        for e in rd.flatten() {
            let name = e.file_name().to_string_lossy().into_owned();
            if let Some(t) = fs::read_to_string(e.path().join("HEAD"))
                .ok()
                .and_then(|t| {
                    t.trim()
                        .strip_prefix("ref: refs/remotes/")
                        .map(String::from)
                })
            {
                out.push((format!("{name}/HEAD"), Some(t)));
            }
        }
    }
    out.sort();
    out
}

/// Where `branch` tracks and how far apart they are: `(upstream, ahead, behind)`.
pub fn tracking(r: &Repo, branch: &str) -> Option<(String, usize, usize)> {
    let remote = config_get(Some(r), &format!("branch.{branch}.remote"))?;
    let merge = config_get(Some(r), &format!("branch.{branch}.merge"))?;
    let b = merge.strip_prefix("refs/heads/")?;
    let up = format!("{remote}/{b}");
    let theirs = r.read_ref(&format!("refs/remotes/{up}"))?;
    let ours = r.head_oid();
    // Just cloned, fetched or pulled: nothing to walk.
    if Some(theirs) == ours {
        return Some((up, 0, 0));
    }
    let reach = |o: Option<Oid>| -> BTreeSet<Oid> {
        let mut seen = BTreeSet::new();
        let mut stack: Vec<Oid> = o.into_iter().collect();
        while let Some(x) = stack.pop() {
            if seen.len() > 100_000 || !seen.insert(x) {
                continue;
            }
            if let Ok(c) = r.read_commit(&x) {
                stack.extend(c.parents);
            }
        }
        seen
    };
    let a = reach(ours);
    let t = reach(Some(theirs));
    Some((up, a.difference(&t).count(), t.difference(&a).count()))
}

/// The path of a remote-tracking ref that `name` (`main`) could start a local branch from,
/// when exactly one remote has it: git's `checkout <branch>` guess.
pub fn guess_remote_branch(r: &Repo, name: &str) -> Option<(String, Oid)> {
    let found: Vec<(String, Oid)> = r
        .refs()
        .into_iter()
        .filter(|(n, _)| {
            n.strip_prefix("refs/remotes/")
                .and_then(|x| x.split_once('/'))
                .is_some_and(|(_, b)| b == name)
        })
        .collect();
    (found.len() == 1).then(|| found.into_iter().next().unwrap())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn urls_and_names() {
        let r = parse_remote("https://u:p%40ss@h.example/a/b.git/").unwrap();
        assert_eq!(r.base, "https://h.example/a/b.git");
        assert_eq!(
            r.auth.as_deref(),
            Some(&*format!(
                "Basic {}",
                base64::engine::general_purpose::STANDARD.encode("u:p@ss")
            ))
        );
        assert!(parse_remote("git@github.com:a/b.git").is_err());
        assert!(parse_remote("ssh://h/x").is_err());
        assert_eq!(humanish("http://h/a/repo.git"), "repo");
        assert_eq!(humanish("http://h/a/repo/"), "repo");
        assert_eq!(humanish("http://h/a/repo/.git"), "repo");
    }

    #[test]
    fn refspecs_map_like_git() {
        let s = parse_refspec("+refs/heads/*:refs/remotes/origin/*");
        assert!(s.force);
        assert_eq!(
            s.map("refs/heads/feat/x", "origin"),
            Some(Some("refs/remotes/origin/feat/x".into()))
        );
        assert_eq!(s.map("refs/tags/v1", "origin"), None);
        let s = parse_refspec("main");
        assert_eq!(
            s.map("refs/heads/main", "origin"),
            Some(Some("refs/remotes/origin/main".into()))
        );
        let s = parse_refspec("main:local");
        assert_eq!(
            s.map("refs/heads/main", "origin"),
            Some(Some("refs/heads/local".into()))
        );
    }

    #[test]
    fn pkt_lines_parse() {
        let body = format!("{}0000{}0001", pkt("a\n"), pkt("bc"));
        let mut l = Lines::new(body.as_bytes());
        assert!(matches!(l.next().unwrap(), Some(Pkt::Data(b"a\n"))));
        assert!(matches!(l.next().unwrap(), Some(Pkt::Flush)));
        assert!(matches!(l.next().unwrap(), Some(Pkt::Data(b"bc"))));
        assert!(matches!(l.next().unwrap(), Some(Pkt::Delim)));
        assert!(l.next().unwrap().is_none());
        let mut bad = Lines::new(b"zz");
        assert!(bad.next().is_err());
    }
}
