//! `git` for a local workflow over the sandbox's files, writing git's own on-disk formats
//! (`repo.rs`) so a repository made here is read by real git. Porcelain output follows git
//! 2.47's for the commands and options listed in `HELP`.

#![forbid(unsafe_code)]

mod pack;
mod remote;
mod repo;

use std::collections::{BTreeMap, BTreeSet};
use std::fs;
use std::io::Write;
use std::path::{Path, PathBuf};

use repo::{Entry, Oid, Repo, hash_object, hex};

const HELP: &str = "\
usage: git <command> [<args>]

A git for the sandbox's files: repositories use git's own formats (loose objects, packs with
index v2, refs), so real git reads them.

   init [dir]                   create a repository
   clone [--depth N] [-b <branch>] [--single-branch] [-n] [-o <name>] <url> [<dir>]
   fetch [--depth N|--unshallow] [--tags|--no-tags] [--prune] [--all] [<remote> [<refspec>...]]
   pull [--ff-only] [<remote> [<branch>]]     (fast-forward only)
   ls-remote [--heads] [--tags] [--refs] [--symref] [<url|remote> [<pattern>...]]
   remote [-v] | add <name> <url> | remove <name> | get-url <name> | set-url <name> <url>
   config [--global] [--list] <key> [<value>]
   add [-A] <pathspec>...       stage files (respects .gitignore)
   rm [--cached] [-r] <path>... unstage and delete files
   commit -m <msg> [-a] [--allow-empty] [--amend]
   status [-s|--short|--porcelain]
   diff [--staged|--cached] [--stat] [--name-only] [<commit> [<commit>]] [-- <path>...]
   log [--oneline] [-p] [-n N|-N] [<rev>]
   show [<rev>]
   branch [-r|-a] [-d|-D <name>] [-m <old> <new>] [--show-current] [<name> [<start>]]
   checkout [-b <new>] <branch|commit>   checkout [--] <path>...
   switch [-c <new>] <branch>
   restore [--staged] [--source=<rev>] <path>...
   reset [--soft|--mixed|--hard] [<rev>]   reset [<rev>] -- <path>...
   stash [push [-m <msg>]] | pop | apply | list | drop
   rev-parse [--short] [--abbrev-ref] <rev> | --show-toplevel | --git-dir
   tag [<name> [<rev>]]
   ls-files, cat-file (-t|-p|-s) <obj>, hash-object [-w] <file>

Remotes are reached over http:// and https:// (smart HTTP) through the sandbox's network
policy; with no policy there is no network. Not supported: push, ssh and local-path remotes,
merge, rebase, cherry-pick, submodules, hooks.
";

const COMMANDS: &[&str] = &[
    "add",
    "rm",
    "commit",
    "status",
    "diff",
    "log",
    "show",
    "branch",
    "checkout",
    "switch",
    "restore",
    "reset",
    "stash",
    "rev-parse",
    "tag",
    "ls-files",
    "cat-file",
    "hash-object",
];

fn main() {
    guest_rt::enter_pwd();
    let args: Vec<String> = std::env::args_os()
        .skip(1)
        .map(|a| a.to_string_lossy().into_owned())
        .collect();
    let mut i = 0;
    // `git -C dir cmd` and `git --no-pager cmd`.
    while i < args.len() && args[i].starts_with('-') {
        match args[i].as_str() {
            "-C" if i + 1 < args.len() => {
                if let Err(e) = std::env::set_current_dir(&args[i + 1]) {
                    die(&format!(
                        "cannot change to '{}': {}",
                        args[i + 1],
                        errno(&e)
                    ));
                }
                i += 2;
            }
            "--no-pager" | "-P" | "--no-optional-locks" => i += 1,
            "-c" if i + 1 < args.len() => i += 2,
            "--version" => {
                println!("git version 2.47.0 (wasmsand)");
                return;
            }
            "-h" | "--help" => {
                print!("{HELP}");
                return;
            }
            other => die_usage(&format!("unknown option: {other}")),
        }
    }
    let Some(cmd) = args.get(i) else {
        print!("{HELP}");
        std::process::exit(1);
    };
    let rest = &args[i + 1..];
    if rest.iter().any(|a| a == "-h" || a == "--help") {
        print!("{HELP}");
        return;
    }
    let code = match cmd.as_str() {
        "init" => cmd_init(rest),
        "help" => {
            print!("{HELP}");
            0
        }
        "version" => {
            println!("git version 2.47.0 (wasmsand)");
            0
        }
        "clone" => remote::cmd_clone(rest),
        "ls-remote" => remote::cmd_ls_remote(rest),
        "fetch" => remote::cmd_fetch(&repo(), rest),
        "pull" => remote::cmd_pull(&repo(), rest),
        "remote" => remote::cmd_remote(&repo(), rest),
        "push" => {
            eprintln!(
                "fatal: git push: this sandbox's git fetches (clone, fetch, pull) but does not \
                 push; hand the changes back with `git diff` or a file instead"
            );
            128
        }
        "submodule" => {
            eprintln!("fatal: git submodule: submodules are not supported by this sandbox's git");
            128
        }
        "config" => cmd_config(rest),
        other if !COMMANDS.contains(&other) => {
            eprintln!("git: '{other}' is not a git command. See 'git --help'.");
            1
        }
        _ => {
            let r = repo();
            match cmd.as_str() {
                "add" => cmd_add(&r, rest),
                "rm" => cmd_rm(&r, rest),
                "commit" => cmd_commit(&r, rest),
                "status" => cmd_status(&r, rest),
                "diff" => cmd_diff(&r, rest),
                "log" => cmd_log(&r, rest),
                "show" => cmd_show(&r, rest),
                "branch" => cmd_branch(&r, rest),
                "checkout" => cmd_checkout(&r, rest, false),
                "switch" => cmd_checkout(&r, rest, true),
                "restore" => cmd_restore(&r, rest),
                "reset" => cmd_reset(&r, rest),
                "stash" => cmd_stash(&r, rest),
                "rev-parse" => cmd_rev_parse(&r, rest),
                "tag" => cmd_tag(&r, rest),
                "ls-files" => cmd_ls_files(&r),
                "cat-file" => cmd_cat_file(&r, rest),
                "hash-object" => cmd_hash_object(&r, rest),
                other => {
                    eprintln!("git: '{other}' is not a git command. See 'git --help'.");
                    1
                }
            }
        }
    };
    let _ = std::io::stdout().flush();
    std::process::exit(code);
}

// ---- small helpers ----

fn errno(e: &std::io::Error) -> String {
    let s = e.to_string();
    s.split(" (os error").next().unwrap_or(&s).to_string()
}

fn die(msg: &str) -> ! {
    let _ = std::io::stdout().flush();
    eprintln!("fatal: {msg}");
    std::process::exit(128);
}

fn die_usage(msg: &str) -> ! {
    eprintln!("error: {msg}\n\n{HELP}");
    std::process::exit(129);
}

fn out(s: &str) {
    let mut o = std::io::stdout().lock();
    if o.write_all(s.as_bytes()).is_err() {
        std::process::exit(0);
    }
}

fn io<T>(r: std::io::Result<T>) -> T {
    r.unwrap_or_else(|e| die(&errno(&e)))
}

fn ok<T>(r: Result<T, String>) -> T {
    r.unwrap_or_else(|e| die(&e))
}

fn cwd() -> PathBuf {
    std::env::current_dir().unwrap_or_else(|_| PathBuf::from("/"))
}

fn repo() -> Repo {
    Repo::discover(&cwd())
        .unwrap_or_else(|| die("not a git repository (or any of the parent directories): .git"))
}

fn short(oid: &Oid) -> String {
    hex(oid)[..7].to_string()
}

/// A path given on the command line → the repository-relative path ("" for the root).
fn rel_path(r: &Repo, arg: &str) -> String {
    let abs = if arg.starts_with('/') {
        PathBuf::from(arg)
    } else {
        cwd().join(arg)
    };
    let mut parts: Vec<String> = Vec::new();
    for c in abs.components() {
        match c {
            std::path::Component::ParentDir => {
                parts.pop();
            }
            std::path::Component::Normal(n) => parts.push(n.to_string_lossy().into_owned()),
            _ => {}
        }
    }
    let norm = format!("/{}", parts.join("/"));
    let root = r.root.to_string_lossy().into_owned();
    let root = root.trim_end_matches('/');
    if norm == root || (root.is_empty() && norm == "/") {
        return String::new();
    }
    match norm.strip_prefix(&format!("{root}/")) {
        Some(p) => p.to_string(),
        None => die(&format!("{arg}: '{arg}' is outside repository at '{root}'")),
    }
}

fn under(path: &str, spec: &str) -> bool {
    spec.is_empty() || path == spec || path.starts_with(&format!("{spec}/"))
}

// ---- configuration and identity ----

fn config_files(r: Option<&Repo>) -> Vec<PathBuf> {
    let mut v = Vec::new();
    if let Ok(h) = std::env::var("HOME") {
        v.push(Path::new(&h).join(".gitconfig"));
    }
    if let Some(r) = r {
        v.push(r.git.join("config"));
    }
    v
}

/// `section.key` or `section.sub.key` → value, later files winning.
fn config_get(r: Option<&Repo>, key: &str) -> Option<String> {
    let mut found = None;
    for f in config_files(r) {
        for (k, v) in parse_config(&fs::read_to_string(f).unwrap_or_default()) {
            if k.eq_ignore_ascii_case(key) {
                found = Some(v);
            }
        }
    }
    found
}

/// Every value of a multi-valued key (`remote.origin.fetch`), in file order.
fn config_all(r: Option<&Repo>, key: &str) -> Vec<String> {
    let mut found = Vec::new();
    for f in config_files(r) {
        for (k, v) in parse_config(&fs::read_to_string(f).unwrap_or_default()) {
            if k.eq_ignore_ascii_case(key) {
                found.push(v);
            }
        }
    }
    found
}

/// Drops `[header]` (as written inside the brackets) and its keys from `file`.
fn config_remove_section(file: &Path, header: &str) -> std::io::Result<()> {
    let text = fs::read_to_string(file).unwrap_or_default();
    let want = format!("[{header}]");
    let mut keep = String::new();
    let mut skipping = false;
    for line in text.lines() {
        let t = line.trim();
        if t.starts_with('[') {
            skipping = t == want;
        }
        if !skipping {
            keep += line;
            keep.push('\n');
        }
    }
    fs::write(file, keep)
}

fn parse_config(text: &str) -> Vec<(String, String)> {
    let mut out = Vec::new();
    let mut section = String::new();
    for line in text.lines() {
        let l = line.trim();
        if l.is_empty() || l.starts_with('#') || l.starts_with(';') {
            continue;
        }
        if let Some(s) = l.strip_prefix('[').and_then(|s| s.strip_suffix(']')) {
            section = match s.split_once(' ') {
                Some((a, b)) => format!("{}.{}", a.to_lowercase(), b.trim_matches('"')),
                None => s.to_lowercase(),
            };
            continue;
        }
        let (k, v) = l.split_once('=').unwrap_or((l, "true"));
        let v = v.trim();
        let v = v
            .strip_prefix('"')
            .and_then(|x| x.strip_suffix('"'))
            .unwrap_or(v);
        out.push((
            format!("{section}.{}", k.trim().to_lowercase()),
            v.to_string(),
        ));
    }
    out
}

fn config_set(file: &Path, key: &str, value: &str) -> std::io::Result<()> {
    let text = fs::read_to_string(file).unwrap_or_default();
    let (sect, name) = key.rsplit_once('.').unwrap_or(("core", key));
    let (s1, sub) = match sect.split_once('.') {
        Some((a, b)) => (a.to_lowercase(), Some(b.to_string())),
        None => (sect.to_lowercase(), None),
    };
    let header = match &sub {
        Some(b) => format!("[{s1} \"{b}\"]"),
        None => format!("[{s1}]"),
    };
    let quoted = if value.contains(' ') || value.contains('#') || value.contains(';') {
        format!("\"{value}\"")
    } else {
        value.to_string()
    };
    let mut lines: Vec<String> = text.lines().map(String::from).collect();
    let mut in_sect = false;
    let mut sect_end = None;
    for (i, l) in lines.iter_mut().enumerate() {
        let t = l.trim();
        if t.starts_with('[') {
            in_sect = t.eq_ignore_ascii_case(&header);
            if in_sect {
                sect_end = Some(i + 1);
            }
            continue;
        }
        if in_sect {
            sect_end = Some(i + 1);
            let k = t.split('=').next().unwrap_or("").trim();
            if k.eq_ignore_ascii_case(name) {
                *l = format!("\t{name} = {quoted}");
                return fs::write(file, lines.join("\n") + "\n");
            }
        }
    }
    match sect_end {
        Some(at) => lines.insert(at, format!("\t{name} = {quoted}")),
        None => {
            lines.push(header);
            lines.push(format!("\t{name} = {quoted}"));
        }
    }
    fs::write(file, lines.join("\n") + "\n")
}

/// `Name <email>` and `seconds +zone` for GIT_AUTHOR_* / GIT_COMMITTER_*.
pub fn ident(r: &Repo, who: &str) -> (String, String) {
    let name = std::env::var(format!("GIT_{who}_NAME"))
        .ok()
        .or_else(|| config_get(Some(r), "user.name"))
        .unwrap_or_else(|| std::env::var("USER").unwrap_or_else(|_| "user".into()));
    let email = std::env::var(format!("GIT_{who}_EMAIL"))
        .ok()
        .or_else(|| config_get(Some(r), "user.email"))
        .unwrap_or_else(|| format!("{}@sandbox", std::env::var("USER").unwrap_or("user".into())));
    let date = std::env::var(format!("GIT_{who}_DATE"))
        .ok()
        .map(|d| {
            let d = d.trim().trim_start_matches('@').to_string();
            if d.contains(' ') {
                d
            } else {
                format!("{d} +0000")
            }
        })
        .unwrap_or_else(|| {
            let now = std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(0, |d| d.as_secs());
            format!("{now} +0000")
        });
    (format!("{name} <{email}>"), date)
}

// ---- the work tree ----

struct Ignore {
    /// (directory the pattern file is in, pattern, negated, dir only, anchored)
    rules: Vec<(String, String, bool, bool, bool)>,
}

impl Ignore {
    fn load(r: &Repo) -> Ignore {
        let mut ig = Ignore { rules: Vec::new() };
        ig.add_file(&r.git.join("info/exclude"), "");
        ig.add_file(&r.root.join(".gitignore"), "");
        ig
    }

    fn add_file(&mut self, f: &Path, dir: &str) {
        let Ok(text) = fs::read_to_string(f) else {
            return;
        };
        for line in text.lines() {
            let l = line.trim_end();
            if l.is_empty() || l.starts_with('#') {
                continue;
            }
            let (neg, l) = match l.strip_prefix('!') {
                Some(x) => (true, x),
                None => (false, l),
            };
            let (dir_only, l) = match l.strip_suffix('/') {
                Some(x) => (true, x),
                None => (false, l),
            };
            let anchored = l.contains('/');
            let pat = l.trim_start_matches('/').to_string();
            self.rules
                .push((dir.to_string(), pat, neg, dir_only, anchored));
        }
    }

    fn ignored(&self, path: &str, is_dir: bool) -> bool {
        let mut res = false;
        for (dir, pat, neg, dir_only, anchored) in &self.rules {
            if *dir_only && !is_dir {
                continue;
            }
            let Some(rel) = (if dir.is_empty() {
                Some(path)
            } else {
                path.strip_prefix(&format!("{dir}/"))
            }) else {
                continue;
            };
            let m = if *anchored {
                glob(pat.as_bytes(), rel.as_bytes())
            } else {
                glob(
                    pat.as_bytes(),
                    rel.rsplit('/').next().unwrap_or(rel).as_bytes(),
                )
            };
            if m {
                res = !neg;
            }
        }
        res
    }
}

/// fnmatch with `*` not crossing `/`, `**` crossing it, `?` and `[...]`.
fn glob(p: &[u8], s: &[u8]) -> bool {
    if p.is_empty() {
        return s.is_empty();
    }
    if p.starts_with(b"**") {
        let rest = p[2..].strip_prefix(b"/").unwrap_or(&p[2..]);
        return (0..=s.len()).any(|i| (i == 0 || s[i - 1] == b'/') && glob(rest, &s[i..]))
            || glob(rest, s);
    }
    match p[0] {
        b'*' => (0..=s.len())
            .take_while(|&i| i == 0 || s[i - 1] != b'/')
            .any(|i| glob(&p[1..], &s[i..])),
        b'?' => !s.is_empty() && s[0] != b'/' && glob(&p[1..], &s[1..]),
        b'[' => {
            let Some(end) = p.iter().skip(1).position(|&c| c == b']').map(|e| e + 1) else {
                return !s.is_empty() && s[0] == b'[' && glob(&p[1..], &s[1..]);
            };
            if s.is_empty() {
                return false;
            }
            let set = &p[1..end];
            let (neg, set) = match set.first() {
                Some(b'!') | Some(b'^') => (true, &set[1..]),
                _ => (false, set),
            };
            let mut hit = false;
            let mut k = 0;
            while k < set.len() {
                if k + 2 < set.len() && set[k + 1] == b'-' {
                    hit |= set[k] <= s[0] && s[0] <= set[k + 2];
                    k += 3;
                } else {
                    hit |= set[k] == s[0];
                    k += 1;
                }
            }
            hit != neg && glob(&p[end + 1..], &s[1..])
        }
        b'\\' if p.len() > 1 => !s.is_empty() && s[0] == p[1] && glob(&p[2..], &s[1..]),
        c => !s.is_empty() && s[0] == c && glob(&p[1..], &s[1..]),
    }
}

/// Files of the work tree under `start` (repository-relative), skipping `.git` and, unless
/// `tracked` holds them, ignored paths.
fn walk(r: &Repo, start: &str, ig: &mut Ignore, tracked: &BTreeSet<String>) -> Vec<String> {
    let mut out = Vec::new();
    let mut stack = vec![start.to_string()];
    while let Some(dir) = stack.pop() {
        let abs = if dir.is_empty() {
            r.root.clone()
        } else {
            r.root.join(&dir)
        };
        if !dir.is_empty() {
            ig.add_file(&abs.join(".gitignore"), &dir);
        }
        let Ok(rd) = fs::read_dir(&abs) else { continue };
        let mut names: Vec<(String, bool)> = rd
            .flatten()
            .map(|e| {
                let is_dir = e.file_type().is_ok_and(|t| t.is_dir());
                (e.file_name().to_string_lossy().into_owned(), is_dir)
            })
            .collect();
        names.sort();
        for (name, is_dir) in names.into_iter().rev() {
            if name == ".git" {
                continue;
            }
            let rel = if dir.is_empty() {
                name
            } else {
                format!("{dir}/{name}")
            };
            let has_tracked = tracked
                .range(format!("{rel}/")..)
                .next()
                .is_some_and(|t| t.starts_with(&format!("{rel}/")));
            if ig.ignored(&rel, is_dir) && !tracked.contains(&rel) && !has_tracked {
                continue;
            }
            if is_dir {
                stack.push(rel);
            } else {
                out.push(rel);
            }
        }
    }
    out.sort();
    out
}

/// Mode and content of a work-tree file as git would store it.
fn file_blob(r: &Repo, rel: &str) -> Option<(u32, Vec<u8>)> {
    let p = r.root.join(rel);
    let meta = fs::symlink_metadata(&p).ok()?;
    if meta.file_type().is_symlink() {
        let t = fs::read_link(&p).ok()?;
        return Some((0o120000, t.to_string_lossy().into_owned().into_bytes()));
    }
    if meta.is_dir() {
        return None;
    }
    let data = fs::read(&p).ok()?;
    let exec = guest_rt::path_mode(&p, false).is_some_and(|m| m & 0o111 != 0);
    Some((if exec { 0o100755 } else { 0o100644 }, data))
}

fn mtime_of(r: &Repo, rel: &str) -> u32 {
    fs::symlink_metadata(r.root.join(rel))
        .and_then(|m| m.modified())
        .ok()
        .and_then(|t| t.duration_since(std::time::UNIX_EPOCH).ok())
        .map_or(0, |d| d.as_secs() as u32)
}

fn stage(r: &Repo, rel: &str) -> Option<Entry> {
    let (mode, data) = file_blob(r, rel)?;
    let oid = io(r.write_object("blob", &data));
    Some(Entry {
        path: rel.to_string(),
        mode,
        oid,
        size: data.len() as u32,
        mtime: mtime_of(r, rel),
    })
}

/// Writes a blob to the work tree (a symlink for mode 120000); returns its size.
fn write_file(r: &Repo, rel: &str, mode: u32, oid: &Oid) -> u32 {
    let (_, data) = ok(r.read_object(oid));
    let p = r.root.join(rel);
    if let Some(parent) = p.parent() {
        io(fs::create_dir_all(parent));
    }
    match fs::symlink_metadata(&p) {
        Ok(m) if m.is_dir() => {
            let _ = fs::remove_dir_all(&p);
        }
        Ok(m) if m.file_type().is_symlink() || mode == 0o120000 => {
            let _ = fs::remove_file(&p);
        }
        _ => {}
    }
    if mode == 0o120000 {
        let target = String::from_utf8_lossy(&data).into_owned();
        io(symlink(&target, &p));
    } else {
        io(fs::write(&p, &data));
    }
    data.len() as u32
}

fn symlink(target: &str, at: &Path) -> std::io::Result<()> {
    guest_rt::symlink(target, at)
}

fn remove_file(r: &Repo, rel: &str) {
    let p = r.root.join(rel);
    let _ = fs::remove_file(&p);
    // Directories left empty go too, as git removes them.
    let mut dir = p.parent().map(Path::to_path_buf);
    while let Some(d) = dir {
        if d == r.root || fs::remove_dir(&d).is_err() {
            break;
        }
        dir = d.parent().map(Path::to_path_buf);
    }
}

// ---- revisions ----

fn resolve(r: &Repo, spec: &str) -> Option<Oid> {
    if let Some((base, n)) = spec.rsplit_once('~') {
        let n: usize = if n.is_empty() { 1 } else { n.parse().ok()? };
        let mut o = resolve(r, base)?;
        for _ in 0..n {
            o = *r.read_commit(&o).ok()?.parents.first()?;
        }
        return Some(o);
    }
    if let Some(base) = spec.strip_suffix('^') {
        let o = resolve(r, base)?;
        return r.read_commit(&o).ok()?.parents.first().copied();
    }
    if spec == "HEAD" || spec == "@" {
        return r.head_oid();
    }
    if spec == "FETCH_HEAD" {
        let t = fs::read_to_string(r.git.join("FETCH_HEAD")).ok()?;
        return repo::parse_hex(t.get(..40)?);
    }
    for name in [
        spec.to_string(),
        format!("refs/{spec}"),
        format!("refs/heads/{spec}"),
        format!("refs/tags/{spec}"),
        format!("refs/remotes/{spec}"),
        format!("refs/remotes/{spec}/HEAD"),
    ] {
        if (name.starts_with("refs/") || name == "HEAD")
            && let Some(o) = r.read_ref(&name)
        {
            return Some(o);
        }
    }
    if let Some(o) = repo::parse_hex(spec)
        && r.has_object(&o)
    {
        return Some(o);
    }
    let m = r.objects_with_prefix(spec);
    (m.len() == 1).then(|| m[0])
}

fn resolve_or_die(r: &Repo, spec: &str) -> Oid {
    resolve(r, spec).unwrap_or_else(|| {
        die(&format!(
            "ambiguous argument '{spec}': unknown revision or path not in the working tree.\n\
             Use '--' to separate paths from revisions, like this:\n\
             'git <command> [<revision>...] -- [<file>...]'"
        ))
    })
}

fn tree_of(r: &Repo, commit: Option<Oid>) -> BTreeMap<String, (u32, Oid)> {
    match commit {
        Some(c) => {
            let c = ok(r.read_commit(&c));
            ok(r.read_tree(&c.tree))
        }
        None => BTreeMap::new(),
    }
}

fn index_map(entries: &[Entry]) -> BTreeMap<String, (u32, Oid)> {
    entries
        .iter()
        .map(|e| (e.path.clone(), (e.mode, e.oid)))
        .collect()
}

// ---- init / config ----

fn cmd_init(args: &[String]) -> i32 {
    let mut quiet = false;
    let mut dir = None;
    let mut branch = None;
    let mut it = args.iter();
    while let Some(a) = it.next() {
        match a.as_str() {
            "-q" | "--quiet" => quiet = true,
            "-b" | "--initial-branch" => branch = it.next().cloned(),
            _ if a.starts_with("--initial-branch=") => {
                branch = Some(a["--initial-branch=".len()..].to_string())
            }
            _ if a.starts_with('-') => die_usage(&format!("unknown option: {a}")),
            _ => dir = Some(a.clone()),
        }
    }
    let root = match &dir {
        Some(d) => {
            io(fs::create_dir_all(d));
            cwd().join(d)
        }
        None => cwd(),
    };
    let root = fs::canonicalize(&root).unwrap_or(root);
    let git = root.join(".git");
    let existed = git.join("HEAD").is_file();
    if !existed {
        let branch = branch
            .or_else(|| config_get(None, "init.defaultbranch"))
            .unwrap_or_else(|| "master".into());
        io(create_repo(&root, &branch));
    }
    if !quiet {
        let what = if existed {
            "Reinitialized existing"
        } else {
            "Initialized empty"
        };
        out(&format!("{what} Git repository in {}/\n", git.display()));
    }
    0
}

/// A new repository's `.git` in `root`, HEAD on the unborn `branch`.
fn create_repo(root: &Path, branch: &str) -> std::io::Result<Repo> {
    let git = root.join(".git");
    for d in [
        "objects/info",
        "objects/pack",
        "refs/heads",
        "refs/tags",
        "info",
    ] {
        fs::create_dir_all(git.join(d))?;
    }
    fs::write(git.join("HEAD"), format!("ref: refs/heads/{branch}\n"))?;
    fs::write(
        git.join("config"),
        "[core]\n\trepositoryformatversion = 0\n\tfilemode = true\n\tbare = false\n\tlogallrefupdates = true\n",
    )?;
    fs::write(
        git.join("description"),
        "Unnamed repository; edit this file 'description' to name the repository.\n",
    )?;
    fs::write(
        git.join("info/exclude"),
        "# git ls-files --others --exclude-from=.git/info/exclude\n",
    )?;
    Ok(Repo::at(root.to_path_buf(), git))
}

fn cmd_config(args: &[String]) -> i32 {
    let mut global = false;
    let mut list = false;
    let mut rest = Vec::new();
    for a in args {
        match a.as_str() {
            "--global" => global = true,
            "--local" => {}
            "-l" | "--list" => list = true,
            "--get" => {}
            _ => rest.push(a.clone()),
        }
    }
    let r = Repo::discover(&cwd());
    let file = if global {
        let home = std::env::var("HOME").unwrap_or_else(|_| "/".into());
        Path::new(&home).join(".gitconfig")
    } else {
        match &r {
            Some(r) => r.git.join("config"),
            None => die("not in a git directory"),
        }
    };
    if list {
        let files = if global {
            vec![file]
        } else {
            config_files(r.as_ref())
        };
        for f in files {
            for (k, v) in parse_config(&fs::read_to_string(f).unwrap_or_default()) {
                out(&format!("{k}={v}\n"));
            }
        }
        return 0;
    }
    match rest.as_slice() {
        [key] => match if global {
            parse_config(&fs::read_to_string(&file).unwrap_or_default())
                .into_iter()
                .rev()
                .find(|(k, _)| k.eq_ignore_ascii_case(key))
                .map(|(_, v)| v)
        } else {
            config_get(r.as_ref(), key)
        } {
            Some(v) => {
                out(&format!("{v}\n"));
                0
            }
            None => 1,
        },
        [key, value] => {
            if !key.contains('.') {
                eprintln!("error: key does not contain a section: {key}");
                return 2;
            }
            io(config_set(&file, key, value));
            0
        }
        _ => die_usage("wrong number of arguments"),
    }
}

// ---- add / rm ----

fn cmd_add(r: &Repo, args: &[String]) -> i32 {
    let mut all = false;
    let mut specs = Vec::new();
    for a in args {
        match a.as_str() {
            "-A" | "--all" => all = true,
            "-u" | "--update" | "-v" | "--verbose" | "-f" | "--force" | "--" => {}
            _ => specs.push(a.clone()),
        }
    }
    if specs.is_empty() {
        if !all {
            eprintln!(
                "Nothing specified, nothing added.\nhint: Maybe you wanted to say 'git add .'?"
            );
            return 0;
        }
        specs.push(r.root.to_string_lossy().into_owned());
    }
    let mut index = ok(r.read_index());
    let tracked: BTreeSet<String> = index.iter().map(|e| e.path.clone()).collect();
    let mut ig = Ignore::load(r);
    let mut map: BTreeMap<String, Entry> = index.drain(..).map(|e| (e.path.clone(), e)).collect();
    for spec in &specs {
        let rel = rel_path(r, spec);
        let abs = r.root.join(&rel);
        let exists = fs::symlink_metadata(&abs).is_ok();
        let in_index = map.keys().any(|p| under(p, &rel));
        if !exists && !in_index {
            die(&format!("pathspec '{spec}' did not match any files"));
        }
        if exists && abs.is_dir() {
            for f in walk(r, &rel, &mut ig, &tracked) {
                if let Some(e) = stage(r, &f) {
                    map.insert(f, e);
                }
            }
        } else if exists {
            if ig.ignored(&rel, false) && !tracked.contains(&rel) {
                eprintln!(
                    "The following paths are ignored by one of your .gitignore files:\n{rel}\nhint: Use -f if you really want to add them."
                );
                return 1;
            }
            if let Some(e) = stage(r, &rel) {
                map.insert(rel.clone(), e);
            }
        }
        // Files gone from the work tree leave the index too (git 2.x's `add <dir>`).
        let gone: Vec<String> = map
            .keys()
            .filter(|p| under(p, &rel) && fs::symlink_metadata(r.root.join(p)).is_err())
            .cloned()
            .collect();
        for g in gone {
            map.remove(&g);
        }
    }
    let mut entries: Vec<Entry> = map.into_values().collect();
    io(r.write_index(&mut entries));
    0
}

fn cmd_rm(r: &Repo, args: &[String]) -> i32 {
    let cached = args.iter().any(|a| a == "--cached");
    let recursive = args.iter().any(|a| a == "-r" || a == "-rf" || a == "-fr");
    let quiet = args.iter().any(|a| a == "-q" || a == "--quiet");
    let specs: Vec<&String> = args.iter().filter(|a| !a.starts_with('-')).collect();
    let mut index = ok(r.read_index());
    for spec in specs {
        let rel = rel_path(r, spec);
        let hits: Vec<String> = index
            .iter()
            .filter(|e| under(&e.path, &rel))
            .map(|e| e.path.clone())
            .collect();
        if hits.is_empty() {
            die(&format!("pathspec '{spec}' did not match any files"));
        }
        if (hits.len() > 1 || hits[0] != rel) && !recursive {
            die(&format!("not removing '{spec}' recursively without -r"));
        }
        for h in hits {
            index.retain(|e| e.path != h);
            if !cached {
                remove_file(r, &h);
            }
            if !quiet {
                out(&format!("rm '{h}'\n"));
            }
        }
    }
    io(r.write_index(&mut index));
    0
}

// ---- diffs ----

fn blob(r: &Repo, oid: &Oid) -> Vec<u8> {
    ok(r.read_object(oid)).1
}

fn is_binary(data: &[u8]) -> bool {
    data.iter().take(8000).any(|&b| b == 0)
}

/// Counts of added and removed lines.
fn line_counts(a: &[u8], b: &[u8]) -> (usize, usize) {
    if is_binary(a) || is_binary(b) {
        return (0, 0);
    }
    let (a, b) = (String::from_utf8_lossy(a), String::from_utf8_lossy(b));
    let d = similar::TextDiff::configure()
        .algorithm(similar::Algorithm::Myers)
        .diff_lines(a.as_ref(), b.as_ref());
    let mut add = 0;
    let mut del = 0;
    for c in d.iter_all_changes() {
        match c.tag() {
            similar::ChangeTag::Insert => add += 1,
            similar::ChangeTag::Delete => del += 1,
            similar::ChangeTag::Equal => {}
        }
    }
    (add, del)
}

type Side = Option<(u32, Oid)>;

/// One file's `diff --git` section, as git prints it.
fn file_diff(r: &Repo, path: &str, old: Side, new: Side, new_data: Option<Vec<u8>>) -> String {
    let mut s = format!("diff --git a/{path} b/{path}\n");
    let old_data = old.map(|(_, o)| blob(r, &o)).unwrap_or_default();
    let new_data = new_data.unwrap_or_else(|| new.map(|(_, o)| blob(r, &o)).unwrap_or_default());
    let zero = "0000000".to_string();
    let oh = old.map_or(zero.clone(), |(_, o)| short(&o));
    let nh = new.map_or(zero, |(_, o)| short(&o));
    match (old, new) {
        (None, Some((m, _))) => s += &format!("new file mode {m:o}\nindex {oh}..{nh}\n"),
        (Some((m, _)), None) => s += &format!("deleted file mode {m:o}\nindex {oh}..{nh}\n"),
        (Some((om, _)), Some((nm, _))) if om != nm => {
            s += &format!("old mode {om:o}\nnew mode {nm:o}\n");
            if oh != nh {
                s += &format!("index {oh}..{nh}\n");
            }
        }
        (Some((m, _)), Some(_)) => s += &format!("index {oh}..{nh} {m:o}\n"),
        (None, None) => {}
    }
    if oh == nh {
        return s;
    }
    let a = if old.is_some() {
        format!("a/{path}")
    } else {
        "/dev/null".into()
    };
    let b = if new.is_some() {
        format!("b/{path}")
    } else {
        "/dev/null".into()
    };
    if is_binary(&old_data) || is_binary(&new_data) {
        s += &format!("Binary files {a} and {b} differ\n");
        return s;
    }
    if old_data.is_empty() && new_data.is_empty() {
        return s;
    }
    s += &format!("--- {a}\n+++ {b}\n");
    s += &hunks(&old_data, &new_data);
    s
}

fn hunks(a: &[u8], b: &[u8]) -> String {
    let (a, b) = (String::from_utf8_lossy(a), String::from_utf8_lossy(b));
    let al: Vec<&str> = a.split_inclusive('\n').collect();
    let bl: Vec<&str> = b.split_inclusive('\n').collect();
    let diff = similar::TextDiff::configure()
        .algorithm(similar::Algorithm::Myers)
        .diff_slices(&al, &bl);
    let mut s = String::new();
    for group in diff.grouped_ops(3) {
        let (Some(first), Some(last)) = (group.first(), group.last()) else {
            continue;
        };
        let os = first.old_range().start;
        let oe = last.old_range().end;
        let ns = first.new_range().start;
        let ne = last.new_range().end;
        let range = |start: usize, len: usize| match len {
            0 => format!("{start},0"),
            1 => format!("{}", start + 1),
            _ => format!("{},{len}", start + 1),
        };
        let func = al[..os]
            .iter()
            .rev()
            .find(|l| {
                l.chars()
                    .next()
                    .is_some_and(|c| c.is_ascii_alphabetic() || c == '_' || c == '$')
            })
            .map(|l| {
                let t = l.trim_end().to_string();
                let t: String = t.chars().take(80).collect();
                format!(" {t}")
            })
            .unwrap_or_default();
        s += &format!(
            "@@ -{} +{} @@{func}\n",
            range(os, oe - os),
            range(ns, ne - ns)
        );
        for op in &group {
            for change in diff.iter_changes(op) {
                let sign = match change.tag() {
                    similar::ChangeTag::Equal => ' ',
                    similar::ChangeTag::Delete => '-',
                    similar::ChangeTag::Insert => '+',
                };
                let line = change.value();
                s.push(sign);
                s += line;
                if !line.ends_with('\n') {
                    s += "\n\\ No newline at end of file\n";
                }
            }
        }
    }
    s
}

/// What differs between two snapshots: (path, old, new), in path order.
fn changes(
    a: &BTreeMap<String, (u32, Oid)>,
    b: &BTreeMap<String, (u32, Oid)>,
) -> Vec<(String, Side, Side)> {
    let keys: BTreeSet<&String> = a.keys().chain(b.keys()).collect();
    keys.into_iter()
        .filter_map(|k| {
            let (x, y) = (a.get(k).copied(), b.get(k).copied());
            (x != y).then(|| (k.clone(), x, y))
        })
        .collect()
}

/// The work tree's version of the index's files (only those that differ are hashed in).
fn worktree_map(r: &Repo, index: &[Entry]) -> BTreeMap<String, (u32, Oid)> {
    let mut m = BTreeMap::new();
    for e in index {
        if let Some((mode, data)) = file_blob(r, &e.path) {
            let oid = if data.len() as u32 == e.size
                && mode == e.mode
                && hash_object("blob", &data) == e.oid
            {
                e.oid
            } else {
                hash_object("blob", &data)
            };
            m.insert(e.path.clone(), (mode, oid));
        }
    }
    m
}

fn print_changes(
    r: &Repo,
    list: &[(String, Side, Side)],
    stat: bool,
    name_only: bool,
    name_status: bool,
    from_worktree: bool,
) {
    if name_only || name_status {
        for (p, o, n) in list {
            if name_status {
                let c = match (o, n) {
                    (None, _) => 'A',
                    (_, None) => 'D',
                    _ => 'M',
                };
                out(&format!("{c}\t{p}\n"));
            } else {
                out(&format!("{p}\n"));
            }
        }
        return;
    }
    if stat {
        print!("{}", diffstat(r, list, from_worktree));
        return;
    }
    for (p, o, n) in list {
        let data = if from_worktree && n.is_some() {
            file_blob(r, p).map(|x| x.1)
        } else {
            None
        };
        out(&file_diff(r, p, *o, *n, data));
    }
}

fn data_of(r: &Repo, path: &str, side: &Side, from_worktree: bool) -> Vec<u8> {
    match side {
        None => Vec::new(),
        Some((_, o)) => {
            if from_worktree && let Some((_, d)) = file_blob(r, path) {
                return d;
            }
            blob(r, o)
        }
    }
}

fn diffstat(r: &Repo, list: &[(String, Side, Side)], from_worktree: bool) -> String {
    let mut rows = Vec::new();
    let (mut ti, mut td) = (0, 0);
    for (p, o, n) in list {
        let a = data_of(r, p, o, false);
        let b = data_of(r, p, n, from_worktree);
        let (i, d) = line_counts(&a, &b);
        ti += i;
        td += d;
        rows.push((p.clone(), i, d, is_binary(&a) || is_binary(&b)));
    }
    let w = rows.iter().map(|x| x.0.len()).max().unwrap_or(0);
    let maxc = rows.iter().map(|x| x.1 + x.2).max().unwrap_or(0);
    let cw = maxc.to_string().len();
    let mut s = String::new();
    for (p, i, d, bin) in &rows {
        if *bin {
            s += &format!(" {p:w$} | Bin\n");
            continue;
        }
        let total = i + d;
        let (pi, pd) = if maxc > 40 {
            let sc = |x: usize| {
                if x == 0 {
                    0
                } else {
                    (x * 40).div_ceil(maxc).max(1)
                }
            };
            (sc(*i), sc(*d))
        } else {
            (*i, *d)
        };
        s += &format!(
            " {p:w$} | {total:>cw$} {}{}\n",
            "+".repeat(pi),
            "-".repeat(pd)
        )
        .replace(" \n", "\n");
    }
    s += &summary_line(rows.len(), ti, td);
    s
}

fn summary_line(files: usize, ins: usize, del: usize) -> String {
    let mut s = format!(" {files} file{} changed", if files == 1 { "" } else { "s" });
    if ins > 0 || del == 0 {
        s += &format!(", {ins} insertion{}(+)", if ins == 1 { "" } else { "s" });
    }
    if del > 0 || ins == 0 {
        s += &format!(", {del} deletion{}(-)", if del == 1 { "" } else { "s" });
    }
    s + "\n"
}

fn cmd_diff(r: &Repo, args: &[String]) -> i32 {
    let mut staged = false;
    let mut stat = false;
    let mut name_only = false;
    let mut name_status = false;
    let mut quiet = false;
    let mut revs = Vec::new();
    let mut paths = Vec::new();
    let mut after_dd = false;
    for a in args {
        if after_dd {
            paths.push(rel_path(r, a));
            continue;
        }
        match a.as_str() {
            "--staged" | "--cached" => staged = true,
            "--stat" => stat = true,
            "--name-only" => name_only = true,
            "--name-status" => name_status = true,
            "--quiet" | "--exit-code" => quiet = a == "--quiet",
            "--no-color" | "--color=never" | "-p" | "--patch" => {}
            "--" => after_dd = true,
            _ if a.starts_with('-') => {}
            _ => {
                if resolve(r, a).is_some() && !r.root.join(rel_path(r, a)).exists() {
                    revs.push(resolve_or_die(r, a));
                } else if let Some((x, y)) = a.split_once("..")
                    && let (Some(x), Some(y)) = (resolve(r, x), resolve(r, y))
                {
                    revs.push(x);
                    revs.push(y);
                } else {
                    paths.push(rel_path(r, a));
                }
            }
        }
    }
    let index = ok(r.read_index());
    let (a, b, wt) = match (revs.as_slice(), staged) {
        ([], false) => (index_map(&index), worktree_map(r, &index), true),
        ([], true) => (tree_of(r, r.head_oid()), index_map(&index), false),
        ([x], false) => (tree_of(r, Some(*x)), worktree_map(r, &index), true),
        ([x], true) => (tree_of(r, Some(*x)), index_map(&index), false),
        ([x, y, ..], _) => (tree_of(r, Some(*x)), tree_of(r, Some(*y)), false),
    };
    let list: Vec<_> = changes(&a, &b)
        .into_iter()
        .filter(|(p, _, _)| paths.is_empty() || paths.iter().any(|s| under(p, s)))
        .collect();
    if !quiet {
        print_changes(r, &list, stat, name_only, name_status, wt);
    }
    i32::from(args.iter().any(|a| a == "--exit-code" || a == "--quiet") && !list.is_empty())
}

// ---- commit ----

fn cmd_commit(r: &Repo, args: &[String]) -> i32 {
    let mut msgs: Vec<String> = Vec::new();
    let mut all = false;
    let mut allow_empty = false;
    let mut amend = false;
    let mut quiet = false;
    let mut it = args.iter();
    while let Some(a) = it.next() {
        match a.as_str() {
            "-m" | "--message" => msgs.push(
                it.next()
                    .cloned()
                    .unwrap_or_else(|| die_usage("switch `m' requires a value")),
            ),
            "-a" | "--all" => all = true,
            // Clusters of short flags: -am, -qm, -aqm MESSAGE, -amMESSAGE.
            _ if a.len() > 2
                && !a.starts_with("--")
                && a[1..].starts_with(|c| "aqn".contains(c)) =>
            {
                for (k, c) in a[1..].char_indices() {
                    match c {
                        'a' => all = true,
                        'q' => quiet = true,
                        'n' => {}
                        'm' => {
                            let inline = &a[k + 2..];
                            msgs.push(if inline.is_empty() {
                                it.next()
                                    .cloned()
                                    .unwrap_or_else(|| die_usage("switch `m' requires a value"))
                            } else {
                                inline.to_string()
                            });
                            break;
                        }
                        _ => die_usage(&format!("unknown switch `{c}'")),
                    }
                }
            }
            "--allow-empty" => allow_empty = true,
            "--amend" => amend = true,
            "-q" | "--quiet" => quiet = true,
            "--no-edit" | "--no-verify" | "-n" => {}
            "-F" | "--file" => {
                let f = it.next().cloned().unwrap_or_default();
                let text = if f == "-" {
                    let mut s = String::new();
                    let _ = std::io::Read::read_to_string(&mut std::io::stdin(), &mut s);
                    s
                } else {
                    io(fs::read_to_string(&f))
                };
                msgs.push(text);
            }
            _ if a.starts_with("--message=") => msgs.push(a["--message=".len()..].to_string()),
            _ if a.starts_with("-m") => msgs.push(a[2..].to_string()),
            _ => {}
        }
    }
    let mut index = ok(r.read_index());
    if all {
        let mut changed = Vec::new();
        for e in &index {
            match stage(r, &e.path) {
                Some(n) => changed.push(n),
                None => changed.push(Entry {
                    size: u32::MAX,
                    ..e.clone()
                }),
            }
        }
        index = changed.into_iter().filter(|e| e.size != u32::MAX).collect();
    }
    let head = r.head_oid();
    let parent_commit = if amend {
        let Some(h) = head else {
            die("You have nothing to amend.")
        };
        Some(ok(r.read_commit(&h)))
    } else {
        None
    };
    if msgs.is_empty() {
        match &parent_commit {
            Some(c) => msgs.push(c.message.trim_end().to_string()),
            None => {
                eprintln!(
                    "Aborting commit due to empty commit message.\n(this git runs no editor: use -m MESSAGE)"
                );
                return 1;
            }
        }
    }
    let tree = io(r.write_tree(&index));
    let parents: Vec<Oid> = match &parent_commit {
        Some(c) => c.parents.clone(),
        None => head.into_iter().collect(),
    };
    let parent_tree = parents.first().map(|p| ok(r.read_commit(p)).tree);
    if parent_tree == Some(tree) && !allow_empty && !amend
        || (parent_tree.is_none() && index.is_empty() && !allow_empty)
    {
        let st = status_text(r, true);
        out(&st);
        return 1;
    }
    let (author, adate) = ident(r, "AUTHOR");
    let (committer, cdate) = ident(r, "COMMITTER");
    let mut message = msgs.join("\n\n");
    message = message.trim_end().to_string() + "\n";
    let mut body = format!("tree {}\n", hex(&tree));
    for p in &parents {
        body += &format!("parent {}\n", hex(p));
    }
    body += &format!("author {author} {adate}\ncommitter {committer} {cdate}\n\n{message}");
    let oid = io(r.write_object("commit", body.as_bytes()));
    let subject = message.lines().next().unwrap_or("").to_string();
    let kind = if amend {
        "commit (amend)"
    } else if parents.is_empty() {
        "commit (initial)"
    } else {
        "commit"
    };
    io(r.update_head(&oid, &format!("{kind}: {subject}")));
    io(r.write_index(&mut index));
    if !quiet {
        let branch = match r.head() {
            Ok(b) => b,
            Err(_) => "detached HEAD".into(),
        };
        let root = if parents.is_empty() {
            " (root-commit)"
        } else {
            ""
        };
        let mut s = format!("[{branch}{root} {}] {subject}\n", short(&oid));
        let before = parent_tree.map(|t| ok(r.read_tree(&t))).unwrap_or_default();
        let after = ok(r.read_tree(&tree));
        let list = changes(&before, &after);
        let (mut ti, mut td) = (0, 0);
        for (p, o, n) in &list {
            let (i, d) = line_counts(&data_of(r, p, o, false), &data_of(r, p, n, false));
            ti += i;
            td += d;
        }
        s += &summary_line(list.len(), ti, td);
        for (p, o, n) in &list {
            match (o, n) {
                (None, Some((m, _))) => s += &format!(" create mode {m:o} {p}\n"),
                (Some((m, _)), None) => s += &format!(" delete mode {m:o} {p}\n"),
                (Some((a, _)), Some((b, _))) if a != b => {
                    s += &format!(" mode change {a:o} => {b:o} {p}\n")
                }
                _ => {}
            }
        }
        out(&s);
    }
    0
}

// ---- status ----

struct Status {
    staged: Vec<(String, Side, Side)>,
    unstaged: Vec<(String, Side, Side)>,
    untracked: Vec<String>,
}

fn status(r: &Repo) -> Status {
    let index = ok(r.read_index());
    let head = tree_of(r, r.head_oid());
    let idx = index_map(&index);
    let wt = worktree_map(r, &index);
    let staged = changes(&head, &idx);
    let unstaged = changes(&idx, &wt);
    let tracked: BTreeSet<String> = idx.keys().cloned().collect();
    let mut ig = Ignore::load(r);
    let files = walk(r, "", &mut ig, &tracked);
    let mut untracked: Vec<String> = Vec::new();
    for f in files.into_iter().filter(|f| !tracked.contains(f)) {
        // A directory holding no tracked file is shown once, as `dir/`.
        let parts: Vec<&str> = f.split('/').collect();
        let mut shown = f.clone();
        for k in 1..parts.len() {
            let dir = parts[..k].join("/");
            let prefix = format!("{dir}/");
            if !tracked.iter().any(|t| t.starts_with(&prefix)) {
                shown = prefix;
                break;
            }
        }
        if untracked.last() != Some(&shown) {
            untracked.push(shown);
        }
    }
    Status {
        staged,
        unstaged,
        untracked,
    }
}

/// A repository-relative path as git shows it from the current directory.
fn show_path(r: &Repo, p: &str) -> String {
    let here = rel_path(r, ".");
    if here.is_empty() {
        return p.to_string();
    }
    let mut base: Vec<&str> = here.split('/').collect();
    let mut target: Vec<&str> = p.split('/').collect();
    while !base.is_empty() && !target.is_empty() && base[0] == target[0] && target.len() > 1 {
        base.remove(0);
        target.remove(0);
    }
    let mut s = "../".repeat(base.len());
    s += &target.join("/");
    s
}

/// The long status; `committing` is `git commit`'s variant of it (with nothing to commit).
fn status_text(r: &Repo, committing: bool) -> String {
    let st = status(r);
    let mut s = String::new();
    match r.head() {
        Ok(b) => {
            s += &format!("On branch {b}\n");
            if let Some((up, ahead, behind)) = remote::tracking(r, &b) {
                let n = |k: usize| if k == 1 { "commit" } else { "commits" };
                s += &match (ahead, behind) {
                    (0, 0) => format!("Your branch is up to date with '{up}'.\n"),
                    (a, 0) => format!(
                        "Your branch is ahead of '{up}' by {a} {}.\n  (use \"git push\" to publish your local commits)\n",
                        n(a)
                    ),
                    (0, b) => format!(
                        "Your branch is behind '{up}' by {b} {}, and can be fast-forwarded.\n  (use \"git pull\" to update your local branch)\n",
                        n(b)
                    ),
                    (a, b) => format!(
                        "Your branch and '{up}' have diverged,\nand have {a} and {b} different commits each, respectively.\n"
                    ),
                };
                if !committing {
                    s.push('\n');
                }
            }
        }
        Err(o) => s += &format!("HEAD detached at {}\n", short(&o)),
    }
    let no_commits = r.head_oid().is_none();
    if no_commits {
        s += if committing {
            "\nInitial commit\n\n"
        } else {
            "\nNo commits yet\n\n"
        };
    }
    let kind = |o: &Side, n: &Side| match (o, n) {
        (None, _) => "new file:   ",
        (_, None) => "deleted:    ",
        (Some((a, x)), Some((b, y))) if a != b && x == y => "typechange: ",
        _ => "modified:   ",
    };
    if !st.staged.is_empty() {
        s += "Changes to be committed:\n";
        s += if no_commits {
            "  (use \"git rm --cached <file>...\" to unstage)\n"
        } else {
            "  (use \"git restore --staged <file>...\" to unstage)\n"
        };
        for (p, o, n) in &st.staged {
            s += &format!("\t{}{}\n", kind(o, n), show_path(r, p));
        }
        s += "\n";
    }
    if !st.unstaged.is_empty() {
        s += "Changes not staged for commit:\n";
        if st.unstaged.iter().any(|x| x.2.is_none()) {
            s += "  (use \"git add/rm <file>...\" to update what will be committed)\n";
        } else {
            s += "  (use \"git add <file>...\" to update what will be committed)\n";
        }
        s += "  (use \"git restore <file>...\" to discard changes in working directory)\n";
        for (p, o, n) in &st.unstaged {
            s += &format!("\t{}{}\n", kind(o, n), show_path(r, p));
        }
        s += "\n";
    }
    if !st.untracked.is_empty() {
        s += "Untracked files:\n  (use \"git add <file>...\" to include in what will be committed)\n";
        for p in &st.untracked {
            s += &format!("\t{}\n", show_path(r, p));
        }
        s += "\n";
    }
    if st.staged.is_empty() {
        if !st.unstaged.is_empty() {
            s += "no changes added to commit (use \"git add\" and/or \"git commit -a\")\n";
        } else if !st.untracked.is_empty() {
            s += "nothing added to commit but untracked files present (use \"git add\" to track)\n";
        } else if no_commits {
            s += "nothing to commit (create/copy files and use \"git add\" to track)\n";
        } else {
            s += "nothing to commit, working tree clean\n";
        }
    }
    s
}

fn cmd_status(r: &Repo, args: &[String]) -> i32 {
    let short_fmt = args
        .iter()
        .any(|a| a == "-s" || a == "--short" || a.starts_with("--porcelain"));
    let branch = args
        .iter()
        .any(|a| a == "-b" || a == "--branch" || a == "-sb");
    if !short_fmt && !args.iter().any(|a| a == "-sb") {
        out(&status_text(r, false));
        return 0;
    }
    let st = status(r);
    let mut s = String::new();
    if branch {
        match r.head() {
            Ok(b) if r.head_oid().is_none() => s += &format!("## No commits yet on {b}\n"),
            Ok(b) => s += &format!("## {b}\n"),
            Err(_) => s += "## HEAD (no branch)\n",
        }
    }
    let mut rows: BTreeMap<String, [char; 2]> = BTreeMap::new();
    let code = |o: &Side, n: &Side| match (o, n) {
        (None, _) => 'A',
        (_, None) => 'D',
        (Some((a, x)), Some((b, y))) if a != b && x == y => 'T',
        _ => 'M',
    };
    for (p, o, n) in &st.staged {
        rows.entry(p.clone()).or_insert([' ', ' '])[0] = code(o, n);
    }
    for (p, o, n) in &st.unstaged {
        rows.entry(p.clone()).or_insert([' ', ' '])[1] = code(o, n);
    }
    for (p, c) in rows {
        s += &format!("{}{} {}\n", c[0], c[1], show_path(r, &p));
    }
    for p in &st.untracked {
        s += &format!("?? {}\n", show_path(r, p));
    }
    out(&s);
    0
}

// ---- log / show ----

fn format_date(stamp: &str) -> String {
    let mut it = stamp.split(' ');
    let secs: i64 = it.next().and_then(|x| x.parse().ok()).unwrap_or(0);
    let zone = it.next().unwrap_or("+0000");
    let sign = if zone.starts_with('-') { -1 } else { 1 };
    let zh: i64 = zone.get(1..3).and_then(|x| x.parse().ok()).unwrap_or(0);
    let zm: i64 = zone.get(3..5).and_then(|x| x.parse().ok()).unwrap_or(0);
    let t = secs + sign * (zh * 3600 + zm * 60);
    let days = t.div_euclid(86_400);
    let rem = t.rem_euclid(86_400);
    let (y, m, d) = guest_rt::civil_from_days(days);
    const WD: [&str; 7] = ["Thu", "Fri", "Sat", "Sun", "Mon", "Tue", "Wed"];
    const MO: [&str; 12] = [
        "Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec",
    ];
    format!(
        "{} {} {} {:02}:{:02}:{:02} {y} {zone}",
        WD[days.rem_euclid(7) as usize],
        MO[(m - 1) as usize],
        d,
        rem / 3600,
        rem % 3600 / 60,
        rem % 60
    )
}

/// `Name <email> 123 +0000` → (`Name <email>`, `123 +0000`).
fn split_ident(s: &str) -> (String, String) {
    match s.rfind('>') {
        Some(i) => (s[..=i].to_string(), s[i + 1..].trim().to_string()),
        None => (s.to_string(), String::new()),
    }
}

fn commit_diff(r: &Repo, c: &repo::Commit) -> String {
    let before = c
        .parents
        .first()
        .map(|p| tree_of(r, Some(*p)))
        .unwrap_or_default();
    let after = ok(r.read_tree(&c.tree));
    changes(&before, &after)
        .into_iter()
        .map(|(p, o, n)| file_diff(r, &p, o, n, None))
        .collect()
}

// git decorates refs only on a terminal; the sandbox's output never is one.
fn print_commit(r: &Repo, oid: &Oid, c: &repo::Commit, oneline: bool, patch: bool) {
    let mut s = String::new();
    if oneline {
        s += &format!("{} {}\n", short(oid), c.subject());
    } else {
        s += &format!("commit {}\n", hex(oid));
        if c.parents.len() > 1 {
            let ps: Vec<String> = c.parents.iter().map(short).collect();
            s += &format!("Merge: {}\n", ps.join(" "));
        }
        let (who, when) = split_ident(&c.author);
        s += &format!("Author: {who}\nDate:   {}\n\n", format_date(&when));
        for l in c.message.trim_end_matches('\n').lines() {
            if l.is_empty() {
                s += "\n";
            } else {
                s += &format!("    {l}\n");
            }
        }
    }
    if patch {
        let diff = commit_diff(r, c);
        if !diff.is_empty() {
            if !oneline {
                s += "\n";
            }
            s += &diff;
        }
    }
    out(&s);
}

fn cmd_log(r: &Repo, args: &[String]) -> i32 {
    let mut oneline = false;
    let mut patch = false;
    let mut limit = usize::MAX;
    let mut start = None;
    let mut paths = Vec::new();
    let mut it = args.iter();
    let mut after_dd = false;
    while let Some(a) = it.next() {
        if after_dd {
            paths.push(rel_path(r, a));
            continue;
        }
        match a.as_str() {
            "--oneline" => oneline = true,
            "-p" | "--patch" | "-u" => patch = true,
            "-n" | "--max-count" => {
                limit = it.next().and_then(|x| x.parse().ok()).unwrap_or(usize::MAX)
            }
            "--" => after_dd = true,
            _ if a.starts_with("--max-count=") => limit = a[12..].parse().unwrap_or(usize::MAX),
            _ if a.starts_with("-n") && a[2..].parse::<usize>().is_ok() => {
                limit = a[2..].parse().unwrap()
            }
            _ if a.starts_with('-') && a[1..].parse::<usize>().is_ok() => {
                limit = a[1..].parse().unwrap()
            }
            _ if a.starts_with('-') => {}
            _ => {
                if let Some(o) = resolve(r, a) {
                    start = Some(o);
                } else {
                    paths.push(rel_path(r, a));
                }
            }
        }
    }
    let Some(mut cur) = start.or_else(|| r.head_oid()) else {
        let b = r.head().unwrap_or_default();
        die(&format!(
            "your current branch '{b}' does not have any commits yet"
        ));
    };
    let mut n = 0;
    loop {
        let c = ok(r.read_commit(&cur));
        let touches = paths.is_empty() || {
            let before = c
                .parents
                .first()
                .map(|p| tree_of(r, Some(*p)))
                .unwrap_or_default();
            let after = ok(r.read_tree(&c.tree));
            changes(&before, &after)
                .iter()
                .any(|(p, _, _)| paths.iter().any(|s| under(p, s)))
        };
        if touches {
            if n >= limit {
                break;
            }
            if n > 0 && !oneline {
                out("\n");
            }
            print_commit(r, &cur, &c, oneline, patch);
            n += 1;
        }
        match c.parents.first() {
            Some(p) => cur = *p,
            None => break,
        }
    }
    0
}

fn cmd_show(r: &Repo, args: &[String]) -> i32 {
    let oneline = args.iter().any(|a| a == "--oneline");
    let stat = args.iter().any(|a| a == "--stat");
    let name_only = args.iter().any(|a| a == "--name-only");
    let spec = args
        .iter()
        .find(|a| !a.starts_with('-'))
        .map_or("HEAD", |s| s.as_str());
    if let Some((rev, path)) = spec.split_once(':') {
        let oid = resolve_or_die(r, if rev.is_empty() { "HEAD" } else { rev });
        let tree = tree_of(r, Some(oid));
        let Some((_, b)) = tree.get(path.trim_start_matches("./")) else {
            die(&format!("path '{path}' does not exist in '{rev}'"));
        };
        let _ = std::io::stdout().write_all(&blob(r, b));
        return 0;
    }
    let oid = resolve_or_die(r, spec);
    let c = ok(r.read_commit(&oid));
    if stat || name_only {
        print_commit(r, &oid, &c, oneline, false);
        let before = c
            .parents
            .first()
            .map(|p| tree_of(r, Some(*p)))
            .unwrap_or_default();
        let after = ok(r.read_tree(&c.tree));
        let list = changes(&before, &after);
        if !oneline && stat {
            out("\n");
        }
        print_changes(r, &list, stat, name_only, false, false);
        return 0;
    }
    print_commit(r, &oid, &c, oneline, true);
    0
}

// ---- branches and checkout ----

fn valid_branch(name: &str) -> bool {
    !name.is_empty()
        && !name.starts_with('-')
        && !name.contains("..")
        && !name.ends_with('/')
        && !name.ends_with(".lock")
        && !name
            .chars()
            .any(|c| c.is_whitespace() || "~^:?*[\\".contains(c))
}

fn cmd_branch(r: &Repo, args: &[String]) -> i32 {
    let pos: Vec<&String> = args.iter().filter(|a| !a.starts_with('-')).collect();
    let flag = |f: &[&str]| args.iter().any(|a| f.contains(&a.as_str()));
    if flag(&["--show-current"]) {
        if let Ok(b) = r.head() {
            out(&format!("{b}\n"));
        }
        return 0;
    }
    if flag(&["-d", "-D", "--delete"]) {
        for name in pos {
            if r.head().is_ok_and(|h| h == *name) {
                eprintln!(
                    "error: cannot delete branch '{name}' used by worktree at '{}'",
                    r.root.display()
                );
                return 1;
            }
            let Some(o) = r.read_ref(&format!("refs/heads/{name}")) else {
                eprintln!("error: branch '{name}' not found");
                return 1;
            };
            if flag(&["-d"]) && !is_ancestor(r, &o, r.head_oid()) {
                eprintln!(
                    "error: the branch '{name}' is not fully merged\nhint: If you are sure you want to delete it, run 'git branch -D {name}'"
                );
                return 1;
            }
            let _ = fs::remove_file(r.git.join("refs/heads").join(name));
            let _ = fs::remove_file(r.git.join("logs/refs/heads").join(name));
            out(&format!("Deleted branch {name} (was {}).\n", short(&o)));
        }
        return 0;
    }
    if flag(&["-m", "-M", "--move"]) {
        let (old, new) = match pos.as_slice() {
            [n] => (
                r.head().unwrap_or_else(|_| die("not on a branch")),
                n.to_string(),
            ),
            [o, n] => (o.to_string(), n.to_string()),
            _ => die_usage("branch -m takes one or two names"),
        };
        let Some(o) = r.read_ref(&format!("refs/heads/{old}")) else {
            die(&format!("no branch named '{old}'"));
        };
        io(r.write_ref(
            &format!("refs/heads/{new}"),
            &o,
            None,
            &format!("Branch: renamed refs/heads/{old} to refs/heads/{new}"),
        ));
        let _ = fs::remove_file(r.git.join("refs/heads").join(&old));
        if r.head().is_ok_and(|h| h == old) {
            io(fs::write(
                r.git.join("HEAD"),
                format!("ref: refs/heads/{new}\n"),
            ));
        }
        return 0;
    }
    match pos.as_slice() {
        [] => {
            let head = r.head();
            let mut s = String::new();
            let remotes = flag(&["-r", "--remotes"]);
            if !remotes {
                if let Err(o) = &head {
                    s += &format!("* (HEAD detached at {})\n", short(o));
                }
                for (b, _) in r.branches() {
                    let cur = head.as_ref().is_ok_and(|h| *h == b);
                    s += &format!("{} {b}\n", if cur { '*' } else { ' ' });
                }
            }
            if remotes || flag(&["-a", "--all"]) {
                let prefix = if remotes { "" } else { "remotes/" };
                for (b, to) in remote::remote_branches(r) {
                    match to {
                        Some(t) => s += &format!("  {prefix}{b} -> {t}\n"),
                        None => s += &format!("  {prefix}{b}\n"),
                    }
                }
            }
            out(&s);
            0
        }
        [name, rest @ ..] => {
            if !valid_branch(name) {
                die(&format!("'{name}' is not a valid branch name"));
            }
            if r.read_ref(&format!("refs/heads/{name}")).is_some() {
                die(&format!("a branch named '{name}' already exists"));
            }
            let start = match rest.first() {
                Some(s) => resolve_or_die(r, s),
                None => r.head_oid().unwrap_or_else(|| {
                    die(&format!(
                        "not a valid object name: '{}'",
                        r.head().unwrap_or_default()
                    ))
                }),
            };
            io(r.write_ref(
                &format!("refs/heads/{name}"),
                &start,
                None,
                "branch: Created from HEAD",
            ));
            0
        }
    }
}

fn is_ancestor(r: &Repo, a: &Oid, b: Option<Oid>) -> bool {
    let mut stack: Vec<Oid> = b.into_iter().collect();
    let mut seen = BTreeSet::new();
    while let Some(o) = stack.pop() {
        if o == *a {
            return true;
        }
        if !seen.insert(o) {
            continue;
        }
        if let Ok(c) = r.read_commit(&o) {
            stack.extend(c.parents);
        }
    }
    false
}

/// Moves the work tree and index from the HEAD tree to `target`'s, keeping local changes to
/// files the two trees agree on (git's two-way merge); refuses when a local change would be
/// lost.
fn switch_tree(r: &Repo, target: &Oid, force: bool) -> Result<(), Vec<String>> {
    let cur = tree_of(r, r.head_oid());
    let new = tree_of(r, Some(*target));
    let index = ok(r.read_index());
    let idx = index_map(&index);
    let wt = worktree_map(r, &index);
    let mut conflicts = Vec::new();
    if !force {
        for (p, o, n) in changes(&cur, &new) {
            let local_index = idx.get(&p).copied() != o;
            let local_wt = wt.get(&p).copied() != idx.get(&p).copied();
            if (local_index && idx.get(&p).copied() != n) || local_wt {
                conflicts.push(p.clone());
            }
            if o.is_none() && !idx.contains_key(&p) && r.root.join(&p).exists() {
                conflicts.push(p.clone());
            }
        }
        if !conflicts.is_empty() {
            conflicts.dedup();
            return Err(conflicts);
        }
    }
    let mut map: BTreeMap<String, Entry> = index.into_iter().map(|e| (e.path.clone(), e)).collect();
    let list = if force {
        changes(&idx, &new)
    } else {
        changes(&cur, &new)
    };
    for (p, _, n) in list {
        match n {
            Some((mode, oid)) => {
                write_file(r, &p, mode, &oid);
                let size = blob(r, &oid).len() as u32;
                map.insert(
                    p.clone(),
                    Entry {
                        path: p.clone(),
                        mode,
                        oid,
                        size,
                        mtime: mtime_of(r, &p),
                    },
                );
            }
            None => {
                remove_file(r, &p);
                map.remove(&p);
            }
        }
    }
    if force {
        for (p, (mode, oid)) in &new {
            if wt.get(p) != Some(&(*mode, *oid)) {
                write_file(r, p, *mode, oid);
            }
        }
    }
    let mut entries: Vec<Entry> = map.into_values().collect();
    io(r.write_index(&mut entries));
    Ok(())
}

fn cmd_checkout(r: &Repo, args: &[String], switch: bool) -> i32 {
    let mut create = None;
    let mut force = false;
    let mut detach = false;
    let mut pos = Vec::new();
    let mut paths = Vec::new();
    let mut after_dd = false;
    let mut it = args.iter();
    while let Some(a) = it.next() {
        if after_dd {
            paths.push(a.clone());
            continue;
        }
        match a.as_str() {
            "-b" | "-c" | "-B" | "-C" | "--create" => create = it.next().cloned(),
            "-f" | "--force" | "--discard-changes" => force = true,
            "--detach" | "-d" => detach = true,
            "-q" | "--quiet" => {}
            "--" => after_dd = true,
            _ => pos.push(a.clone()),
        }
    }
    // `checkout [rev] -- paths` and `checkout file` restore files.
    if !switch && create.is_none() {
        if !paths.is_empty() {
            let mut v = Vec::new();
            if let Some(rev) = pos.first() {
                v.push(format!("--source={rev}"));
                v.push("--staged".into());
                v.push("--worktree".into());
            }
            v.extend(paths);
            return cmd_restore(r, &v);
        }
        if pos.len() == 1
            && resolve(r, &pos[0]).is_none()
            && r.read_ref(&format!("refs/heads/{}", pos[0])).is_none()
            && remote::guess_remote_branch(r, &pos[0]).is_none()
        {
            let rel = rel_path(r, &pos[0]);
            if ok(r.read_index()).iter().any(|e| under(&e.path, &rel)) {
                return cmd_restore(r, &pos);
            }
            eprintln!(
                "error: pathspec '{}' did not match any file(s) known to git",
                pos[0]
            );
            return 1;
        }
    }
    if let Some(name) = create {
        if !valid_branch(&name) {
            die(&format!("'{name}' is not a valid branch name"));
        }
        if r.read_ref(&format!("refs/heads/{name}")).is_some() {
            die(&format!("a branch named '{name}' already exists"));
        }
        let start = match pos.first() {
            Some(s) => Some(resolve_or_die(r, s)),
            None => r.head_oid(),
        };
        if let Some(s) = start {
            if Some(s) != r.head_oid()
                && let Err(c) = switch_tree(r, &s, force)
            {
                return refuse(&c, switch);
            }
            io(r.write_ref(
                &format!("refs/heads/{name}"),
                &s,
                None,
                "branch: Created from HEAD",
            ));
        }
        let old = r.head_oid();
        io(fs::write(
            r.git.join("HEAD"),
            format!("ref: refs/heads/{name}\n"),
        ));
        if let Some(s) = start {
            io(r.reflog("HEAD", old, &s, &format!("checkout: moving to {name}")));
        }
        eprintln!("Switched to a new branch '{name}'");
        return 0;
    }
    let Some(target) = pos.first() else {
        die_usage("you must specify a branch to switch to");
    };
    let target = if target == "-" {
        previous_branch(r).unwrap_or_else(|| die("no previous branch"))
    } else {
        target.clone()
    };
    let mut is_branch = r.read_ref(&format!("refs/heads/{target}"));
    // `git checkout feature` with only `origin/feature`: a local branch that tracks it.
    if is_branch.is_none()
        && !detach
        && resolve(r, &target).is_none()
        && let Some((tracking, oid)) = remote::guess_remote_branch(r, &target)
    {
        if let Err(c) = switch_tree(r, &oid, force) {
            return refuse(&c, switch);
        }
        let name = tracking.trim_start_matches("refs/remotes/");
        let remote = name.split('/').next().unwrap_or("origin");
        io(r.write_ref(
            &format!("refs/heads/{target}"),
            &oid,
            None,
            &format!("branch: Created from {name}"),
        ));
        let config = r.git.join("config");
        io(config_set(
            &config,
            &format!("branch.{target}.remote"),
            remote,
        ));
        io(config_set(
            &config,
            &format!("branch.{target}.merge"),
            &format!("refs/heads/{target}"),
        ));
        is_branch = Some(oid);
        eprintln!("branch '{target}' set up to track '{name}'.");
    }
    if switch && is_branch.is_none() && !detach {
        die(&format!("invalid reference: {target}"));
    }
    let oid = is_branch.unwrap_or_else(|| resolve_or_die(r, &target));
    if r.head().as_ref().is_ok_and(|h| *h == target) {
        eprintln!("Already on '{target}'");
        return 0;
    }
    if let Err(c) = switch_tree(r, &oid, force) {
        return refuse(&c, switch);
    }
    let old = r.head_oid();
    let from = match r.head() {
        Ok(b) => b,
        Err(o) => hex(&o),
    };
    if is_branch.is_some() && !detach {
        io(fs::write(
            r.git.join("HEAD"),
            format!("ref: refs/heads/{target}\n"),
        ));
        io(r.reflog(
            "HEAD",
            old,
            &oid,
            &format!("checkout: moving from {from} to {target}"),
        ));
        eprintln!("Switched to branch '{target}'");
    } else {
        io(fs::write(r.git.join("HEAD"), format!("{}\n", hex(&oid))));
        io(r.reflog(
            "HEAD",
            old,
            &oid,
            &format!("checkout: moving from {from} to {target}"),
        ));
        let c = ok(r.read_commit(&oid));
        eprintln!(
            "Note: switching to '{target}'.\n\nYou are in 'detached HEAD' state. You can look around, make experimental\nchanges and commit them, and you can discard any commits you make in this\nstate without impacting any branches by switching back to a branch.\n\nHEAD is now at {} {}",
            short(&oid),
            c.subject()
        );
    }
    0
}

fn previous_branch(r: &Repo) -> Option<String> {
    let log = fs::read_to_string(r.git.join("logs/HEAD")).ok()?;
    log.lines().rev().find_map(|l| {
        let m = l.split_once("checkout: moving from ")?.1;
        Some(m.split(" to ").next()?.to_string())
    })
}

fn refuse(files: &[String], switch: bool) -> i32 {
    let verb = if switch { "switch" } else { "checkout" };
    let mut s = format!(
        "error: Your local changes to the following files would be overwritten by {verb}:\n"
    );
    for f in files {
        s += &format!("\t{f}\n");
    }
    s += "Please commit your changes or stash them before you switch branches.\nAborting\n";
    eprint!("{s}");
    1
}

fn cmd_restore(r: &Repo, args: &[String]) -> i32 {
    let mut staged = false;
    let mut worktree = false;
    let mut source = None;
    let mut paths = Vec::new();
    let mut it = args.iter();
    while let Some(a) = it.next() {
        match a.as_str() {
            "--staged" | "-S" => staged = true,
            "--worktree" | "-W" => worktree = true,
            "-s" | "--source" => source = it.next().cloned(),
            "--" => {}
            _ if a.starts_with("--source=") => source = Some(a[9..].to_string()),
            _ => paths.push(rel_path(r, a)),
        }
    }
    if paths.is_empty() {
        die("you must specify path(s) to restore");
    }
    if !staged {
        worktree = true;
    }
    let mut index = ok(r.read_index());
    let from_tree = if staged || source.is_some() {
        let rev = source.as_deref().unwrap_or("HEAD");
        Some(match resolve(r, rev) {
            Some(o) => tree_of(r, Some(o)),
            None if rev == "HEAD" => BTreeMap::new(),
            None => die(&format!("could not resolve {rev}")),
        })
    } else {
        None
    };
    for p in &paths {
        let src: BTreeMap<String, (u32, Oid)> = match &from_tree {
            Some(t) => t
                .iter()
                .filter(|(k, _)| under(k, p))
                .map(|(k, v)| (k.clone(), *v))
                .collect(),
            None => index
                .iter()
                .filter(|e| under(&e.path, p))
                .map(|e| (e.path.clone(), (e.mode, e.oid)))
                .collect(),
        };
        let known = !src.is_empty() || index.iter().any(|e| under(&e.path, p));
        if !known {
            eprintln!("error: pathspec '{p}' did not match any file(s) known to git");
            return 1;
        }
        if staged {
            index.retain(|e| !under(&e.path, p) || src.contains_key(&e.path));
            for (k, (mode, oid)) in &src {
                let size = blob(r, oid).len() as u32;
                match index.iter_mut().find(|e| e.path == *k) {
                    Some(e) => {
                        e.mode = *mode;
                        e.oid = *oid;
                        e.size = size;
                    }
                    None => index.push(Entry {
                        path: k.clone(),
                        mode: *mode,
                        oid: *oid,
                        size,
                        mtime: 0,
                    }),
                }
            }
        }
        if worktree {
            let src = if from_tree.is_some() {
                src
            } else {
                index
                    .iter()
                    .filter(|e| under(&e.path, p))
                    .map(|e| (e.path.clone(), (e.mode, e.oid)))
                    .collect()
            };
            for (k, (mode, oid)) in &src {
                write_file(r, k, *mode, oid);
            }
            if from_tree.is_some() {
                for e in index
                    .iter()
                    .filter(|e| under(&e.path, p) && !src.contains_key(&e.path))
                {
                    remove_file(r, &e.path);
                }
            }
        }
    }
    io(r.write_index(&mut index));
    0
}

fn cmd_reset(r: &Repo, args: &[String]) -> i32 {
    let mut mode = "mixed";
    let mut pos = Vec::new();
    let mut paths = Vec::new();
    let mut after_dd = false;
    for a in args {
        if after_dd {
            paths.push(a.clone());
            continue;
        }
        match a.as_str() {
            "--soft" => mode = "soft",
            "--mixed" => mode = "mixed",
            "--hard" => mode = "hard",
            "-q" | "--quiet" => {}
            "--" => after_dd = true,
            _ => pos.push(a.clone()),
        }
    }
    if pos.len() == 1 && paths.is_empty() && resolve(r, &pos[0]).is_none() {
        paths.push(pos.remove(0));
    } else if pos.len() > 1 {
        paths.extend(pos.drain(1..));
    }
    if !paths.is_empty() {
        let mut v = vec!["--staged".to_string()];
        if let Some(rev) = pos.first() {
            v.push(format!("--source={rev}"));
        }
        v.extend(paths);
        return cmd_restore(r, &v);
    }
    let target = match pos.first() {
        Some(s) => resolve_or_die(r, s),
        None => match r.head_oid() {
            Some(o) => o,
            None => {
                let mut empty = Vec::new();
                io(r.write_index(&mut empty));
                return 0;
            }
        },
    };
    let c = ok(r.read_commit(&target));
    if mode == "hard" {
        let _ = switch_tree(r, &target, true);
    }
    let before = ok(r.read_index());
    if mode != "soft" {
        let tree = ok(r.read_tree(&c.tree));
        let mut entries: Vec<Entry> = tree
            .iter()
            .map(|(p, (m, o))| {
                let keep = before.iter().find(|e| e.path == *p && e.oid == *o);
                Entry {
                    path: p.clone(),
                    mode: *m,
                    oid: *o,
                    size: keep.map_or_else(|| blob(r, o).len() as u32, |e| e.size),
                    mtime: keep.map_or(0, |e| e.mtime),
                }
            })
            .collect();
        io(r.write_index(&mut entries));
    }
    io(r.update_head(
        &target,
        &format!(
            "reset: moving to {}",
            pos.first().map_or("HEAD", |s| s.as_str())
        ),
    ));
    if mode == "hard" {
        out(&format!(
            "HEAD is now at {} {}\n",
            short(&target),
            c.subject()
        ));
    } else if mode == "mixed" {
        let index = ok(r.read_index());
        let wt = worktree_map(r, &index);
        let list = changes(&index_map(&index), &wt);
        if !list.is_empty() {
            let mut s = String::from("Unstaged changes after reset:\n");
            for (p, _, n) in list {
                s += &format!("{}\t{p}\n", if n.is_none() { 'D' } else { 'M' });
            }
            out(&s);
        }
    }
    0
}

// ---- stash ----

fn stash_list(r: &Repo) -> Vec<(Oid, String)> {
    let log = fs::read_to_string(r.git.join("logs/refs/stash")).unwrap_or_default();
    let mut v: Vec<(Oid, String)> = log
        .lines()
        .filter_map(|l| {
            let mut parts = l.splitn(3, ' ');
            parts.next()?;
            let new = repo::parse_hex(parts.next()?)?;
            let msg = l
                .split_once('\t')
                .map(|x| x.1.to_string())
                .unwrap_or_default();
            Some((new, msg))
        })
        .collect();
    v.reverse();
    v
}

fn write_stash_list(r: &Repo, list: &[(Oid, String)]) {
    let log = r.git.join("logs/refs/stash");
    if list.is_empty() {
        let _ = fs::remove_file(r.git.join("refs/stash"));
        let _ = fs::remove_file(log);
        return;
    }
    let (who, when) = ident(r, "COMMITTER");
    let mut text = String::new();
    let mut prev = [0u8; 20];
    for (o, m) in list.iter().rev() {
        text += &format!("{} {} {who} {when}\t{m}\n", hex(&prev), hex(o));
        prev = *o;
    }
    io(fs::write(log, text));
    io(fs::write(
        r.git.join("refs/stash"),
        format!("{}\n", hex(&list[0].0)),
    ));
}

fn cmd_stash(r: &Repo, args: &[String]) -> i32 {
    let sub = args.first().map_or("push", |s| s.as_str());
    let stash_ref = |args: &[String]| -> usize {
        args.iter()
            .skip(1)
            .find(|a| !a.starts_with('-'))
            .and_then(|a| {
                a.trim_start_matches("stash@{")
                    .trim_end_matches('}')
                    .parse()
                    .ok()
            })
            .unwrap_or(0)
    };
    match sub {
        "push" | "save" | "-m" | "-q" | "--quiet" | "-u" | "--include-untracked" => {
            let msg = args
                .iter()
                .position(|a| a == "-m" || a == "--message")
                .and_then(|i| args.get(i + 1).cloned());
            let Some(head) = r.head_oid() else {
                eprintln!("You do not have the initial commit yet");
                return 1;
            };
            let index = ok(r.read_index());
            let idx = index_map(&index);
            let wt = worktree_map(r, &index);
            let head_tree = tree_of(r, Some(head));
            if changes(&head_tree, &idx).is_empty() && changes(&idx, &wt).is_empty() {
                out("No local changes to save\n");
                return 0;
            }
            let hc = ok(r.read_commit(&head));
            let branch = r.head().unwrap_or_else(|_| "(no branch)".into());
            let (who, when) = ident(r, "COMMITTER");
            let base = format!("{}: {} {}", branch, short(&head), hc.subject());
            let commit = |tree: Oid, parents: &[Oid], msg: &str| -> Oid {
                let mut b = format!("tree {}\n", hex(&tree));
                for p in parents {
                    b += &format!("parent {}\n", hex(p));
                }
                // git ends the index commit's message with a newline and the stash's not.
                b += &format!("author {who} {when}\ncommitter {who} {when}\n\n{msg}");
                io(r.write_object("commit", b.as_bytes()))
            };
            let itree = io(r.write_tree(&index));
            let icommit = commit(itree, &[head], &format!("index on {base}\n"));
            let mut wentries: Vec<Entry> = index
                .iter()
                .filter_map(|e| match wt.get(&e.path) {
                    Some((m, _)) => stage(r, &e.path).map(|n| Entry { mode: *m, ..n }),
                    None => None,
                })
                .collect();
            wentries.sort_by(|a, b| a.path.cmp(&b.path));
            let wtree = io(r.write_tree(&wentries));
            let title = match &msg {
                Some(m) => format!("On {branch}: {m}"),
                None => format!("WIP on {base}"),
            };
            let w = commit(wtree, &[head, icommit], &title);
            let mut list = stash_list(r);
            list.insert(0, (w, title.clone()));
            write_stash_list(r, &list);
            let _ = switch_tree(r, &head, true);
            out(&format!(
                "Saved working directory and index state {title}\n"
            ));
            0
        }
        "list" => {
            for (i, (_, m)) in stash_list(r).iter().enumerate() {
                out(&format!("stash@{{{i}}}: {m}\n"));
            }
            0
        }
        "pop" | "apply" | "drop" => {
            let n = stash_ref(args);
            let mut list = stash_list(r);
            let Some((w, _)) = list.get(n).cloned() else {
                eprintln!("error: stash@{{{n}}} is not a valid reference");
                return 1;
            };
            if sub != "drop" {
                let wc = ok(r.read_commit(&w));
                let base = tree_of(r, wc.parents.first().copied());
                let stashed = ok(r.read_tree(&wc.tree));
                let index = ok(r.read_index());
                let wt = worktree_map(r, &index);
                let mut conflicts = Vec::new();
                for (p, _, _) in changes(&base, &stashed) {
                    if wt.get(&p) != base.get(&p) {
                        conflicts.push(p);
                    }
                }
                if !conflicts.is_empty() {
                    let mut s = String::from(
                        "error: Your local changes to the following files would be overwritten by merge:\n",
                    );
                    for c in &conflicts {
                        s += &format!("\t{c}\n");
                    }
                    s += "Please commit your changes or stash them before you merge.\nAborting\n";
                    eprint!("{s}");
                    return 1;
                }
                let mut idx: BTreeMap<String, Entry> =
                    index.into_iter().map(|e| (e.path.clone(), e)).collect();
                for (p, _, n) in changes(&base, &stashed) {
                    match n {
                        Some((m, o)) => {
                            write_file(r, &p, m, &o);
                            if !idx.contains_key(&p) {
                                let size = blob(r, &o).len() as u32;
                                idx.insert(
                                    p.clone(),
                                    Entry {
                                        path: p.clone(),
                                        mode: m,
                                        oid: o,
                                        size,
                                        mtime: 0,
                                    },
                                );
                            }
                        }
                        None => remove_file(r, &p),
                    }
                }
                let mut entries: Vec<Entry> = idx.into_values().collect();
                io(r.write_index(&mut entries));
                out(&status_text(r, false));
            }
            if sub != "apply" {
                list.remove(n);
                write_stash_list(r, &list);
                out(&format!("Dropped refs/stash@{{{n}}} ({})\n", hex(&w)));
            }
            0
        }
        "clear" => {
            write_stash_list(r, &[]);
            0
        }
        "show" => {
            let n = stash_ref(args);
            let Some((w, _)) = stash_list(r).get(n).cloned() else {
                eprintln!("error: stash@{{{n}}} is not a valid reference");
                return 1;
            };
            let wc = ok(r.read_commit(&w));
            let list = changes(
                &tree_of(r, wc.parents.first().copied()),
                &ok(r.read_tree(&wc.tree)),
            );
            let patch = args.iter().any(|a| a == "-p" || a == "--patch");
            print_changes(r, &list, !patch, false, false, false);
            0
        }
        other => {
            eprintln!("error: unknown subcommand: {other}");
            129
        }
    }
}

// ---- plumbing ----

fn cmd_rev_parse(r: &Repo, args: &[String]) -> i32 {
    let mut short_len = None;
    let mut abbrev_ref = false;
    let mut code = 0;
    for a in args {
        match a.as_str() {
            "--show-toplevel" => out(&format!("{}\n", r.root.display())),
            "--git-dir" => {
                let here = cwd();
                if here == r.root {
                    out(".git\n");
                } else {
                    out(&format!("{}\n", r.git.display()));
                }
            }
            "--is-inside-work-tree" => out("true\n"),
            "--is-bare-repository" => out("false\n"),
            "--show-prefix" => {
                let p = rel_path(r, ".");
                out(&if p.is_empty() {
                    "\n".to_string()
                } else {
                    format!("{p}/\n")
                });
            }
            "--short" => short_len = Some(7),
            "--abbrev-ref" => abbrev_ref = true,
            "--verify" | "-q" | "--quiet" => {}
            _ if a.starts_with("--short=") => short_len = a[8..].parse().ok(),
            _ => {
                if abbrev_ref && (a == "HEAD" || a == "@") && r.head_oid().is_some() {
                    match r.head() {
                        Ok(b) => out(&format!("{b}\n")),
                        Err(_) => out("HEAD\n"),
                    }
                    continue;
                }
                if abbrev_ref && r.read_ref(&format!("refs/heads/{a}")).is_some() {
                    out(&format!("{a}\n"));
                    continue;
                }
                match resolve(r, a) {
                    Some(o) => {
                        let h = hex(&o);
                        out(&format!("{}\n", &h[..short_len.unwrap_or(40).clamp(4, 40)]));
                    }
                    None => {
                        out(&format!("{a}\n"));
                        eprintln!(
                            "fatal: ambiguous argument '{a}': unknown revision or path not in the working tree.\nUse '--' to separate paths from revisions, like this:\n'git <command> [<revision>...] -- [<file>...]'"
                        );
                        code = 128;
                    }
                }
            }
        }
    }
    code
}

fn cmd_tag(r: &Repo, args: &[String]) -> i32 {
    let pos: Vec<&String> = args.iter().filter(|a| !a.starts_with('-')).collect();
    if args.iter().any(|a| a == "-d") {
        for t in pos {
            let o = r.read_ref(&format!("refs/tags/{t}"));
            let _ = fs::remove_file(r.git.join("refs/tags").join(t));
            if let Some(o) = o {
                out(&format!("Deleted tag '{t}' (was {})\n", short(&o)));
            }
        }
        return 0;
    }
    match pos.as_slice() {
        [] => {
            let mut names: Vec<String> = fs::read_dir(r.git.join("refs/tags"))
                .map(|d| {
                    d.flatten()
                        .map(|e| e.file_name().to_string_lossy().into_owned())
                        .collect()
                })
                .unwrap_or_default();
            names.sort();
            for n in names {
                out(&format!("{n}\n"));
            }
            0
        }
        [name, rest @ ..] => {
            if r.read_ref(&format!("refs/tags/{name}")).is_some() {
                die(&format!("tag '{name}' already exists"));
            }
            let o = match rest.first() {
                Some(s) => resolve_or_die(r, s),
                None => r
                    .head_oid()
                    .unwrap_or_else(|| die("Failed to resolve 'HEAD' as a valid ref.")),
            };
            let path = r.git.join("refs/tags").join(name);
            io(fs::create_dir_all(path.parent().unwrap()));
            io(fs::write(path, format!("{}\n", hex(&o))));
            0
        }
    }
}

fn cmd_ls_files(r: &Repo) -> i32 {
    let mut s = String::new();
    for e in ok(r.read_index()) {
        s += &format!("{}\n", show_path(r, &e.path));
    }
    out(&s);
    0
}

fn cmd_cat_file(r: &Repo, args: &[String]) -> i32 {
    let (Some(flag), Some(spec)) = (args.first(), args.get(1)) else {
        die_usage("git cat-file (-t | -s | -p) <object>");
    };
    let oid = resolve(r, spec).unwrap_or_else(|| die(&format!("Not a valid object name {spec}")));
    let (kind, data) = ok(r.read_object(&oid));
    match flag.as_str() {
        "-t" => out(&format!("{kind}\n")),
        "-s" => out(&format!("{}\n", data.len())),
        "-e" => {}
        _ if kind == "tree" => {
            let mut pos = 0;
            let mut s = String::new();
            while pos < data.len() {
                let sp = pos + data[pos..].iter().position(|&b| b == b' ').unwrap_or(0);
                let nul = sp + data[sp..].iter().position(|&b| b == 0).unwrap_or(0);
                let mode = String::from_utf8_lossy(&data[pos..sp]).into_owned();
                let name = String::from_utf8_lossy(&data[sp + 1..nul]).into_owned();
                let child: Oid = data[nul + 1..nul + 21].try_into().unwrap_or([0; 20]);
                let k = if mode == "40000" { "tree" } else { "blob" };
                s += &format!("{mode:0>6} {k} {}\t{name}\n", hex(&child));
                pos = nul + 21;
            }
            out(&s);
        }
        _ => {
            let _ = std::io::stdout().write_all(&data);
        }
    }
    0
}

fn cmd_hash_object(r: &Repo, args: &[String]) -> i32 {
    let write = args.iter().any(|a| a == "-w");
    for f in args.iter().filter(|a| !a.starts_with('-')) {
        let data = io(fs::read(f));
        let oid = if write {
            io(r.write_object("blob", &data))
        } else {
            hash_object("blob", &data)
        };
        out(&format!("{}\n", hex(&oid)));
    }
    0
}
