//! find: GNU expression syntax (tests, actions, operators, -maxdepth and friends). Directory
//! entries are visited in sorted order so output is deterministic. `-exec`, `-execdir`, `-ok`
//! and `-okdir` run their commands through the shell's spawn door (WASI has no processes).

use crate::util::{Out, errno_text, glob_match};
use std::fs::Metadata;
use std::path::Path;
use std::time::SystemTime;

#[derive(Debug, Clone)]
enum Cmp {
    Less(i64),
    More(i64),
    Exact(i64),
}

impl Cmp {
    fn parse(s: &str) -> Option<(Cmp, &str)> {
        let (kind, rest) = match s.as_bytes().first()? {
            b'+' => (1, &s[1..]),
            b'-' => (-1, &s[1..]),
            _ => (0, s),
        };
        let digits = rest.chars().take_while(|c| c.is_ascii_digit()).count();
        let n: i64 = rest[..digits].parse().ok()?;
        let c = match kind {
            1 => Cmp::More(n),
            -1 => Cmp::Less(n),
            _ => Cmp::Exact(n),
        };
        Some((c, &rest[digits..]))
    }
    fn test(&self, v: i64) -> bool {
        match *self {
            Cmp::Less(n) => v < n,
            Cmp::More(n) => v > n,
            Cmp::Exact(n) => v == n,
        }
    }
}

enum Expr {
    And(Box<Expr>, Box<Expr>),
    Or(Box<Expr>, Box<Expr>),
    Not(Box<Expr>),
    Name(String, bool),
    Path(String, bool),
    Regex(regex::Regex),
    Type(Vec<char>),
    Size(Cmp, u64),
    Empty,
    Newer(SystemTime),
    Time(Cmp, i64, bool),
    Perm(u32, char),
    /// `-links N`: the link count.
    Links(Cmp),
    /// `-samefile F` and `-inum N`: the `(device, inode)` or the inode number.
    SameFile(Option<(u64, u64)>),
    Inum(Cmp),
    True,
    False,
    Print,
    Print0,
    Printf(String),
    Delete,
    Prune,
    Quit,
    Exec(Exec),
}

/// `-exec`/`-execdir`/`-ok`/`-okdir`: the command's words (`{}` in any of them is replaced),
/// whether it takes many names at once (`{} +`), runs in the file's directory, or asks first.
struct Exec {
    id: usize,
    words: Vec<String>,
    many: bool,
    in_dir: bool,
    ask: bool,
}

/// Names waiting for a `{} +` command, and the directory they are relative to (`-execdir`).
#[derive(Default)]
struct Batch {
    dir: Option<String>,
    names: Vec<String>,
    bytes: usize,
}

/// Past this many bytes of names a `{} +` batch is run, as a system's ARG_MAX would cut it.
const BATCH_BYTES: usize = 128 * 1024;

struct Cfg {
    maxdepth: usize,
    mindepth: usize,
    depth_first: bool,
    follow: bool,
    now: SystemTime,
}

struct Ctx<'a> {
    path: &'a str,
    name: &'a str,
    start: &'a str,
    depth: usize,
    meta: &'a Metadata,
}

struct Find {
    out: Out,
    error: bool,
    prune: bool,
    quit: bool,
    batches: Vec<Batch>,
}

fn type_char(m: &Metadata) -> char {
    let t = m.file_type();
    if t.is_symlink() {
        'l'
    } else if t.is_dir() {
        'd'
    } else if t.is_file() {
        'f'
    } else {
        'p'
    }
}

/// Permission bits of the file `path` names, whose metadata (already followed or not) is `m`.
fn mode(path: &str, m: &Metadata) -> u32 {
    let follow = !m.file_type().is_symlink();
    if let Some(bits) = guest_rt::path_mode(Path::new(path), follow) {
        return bits;
    }
    // Outside wasmsand's host under WASI: what a typical umask gives.
    let base = if m.is_dir() { 0o755 } else { 0o644 };
    if m.permissions().readonly() {
        base & !0o222
    } else {
        base
    }
}

struct Parser<'a> {
    toks: &'a [String],
    pos: usize,
    cfg: &'a mut Cfg,
    has_action: bool,
    execs: usize,
}

impl Parser<'_> {
    fn peek(&self) -> Option<&str> {
        self.toks.get(self.pos).map(String::as_str)
    }
    fn next_arg(&mut self, pred: &str) -> Result<String, String> {
        let v = self
            .toks
            .get(self.pos)
            .cloned()
            .ok_or(format!("find: missing argument to `{pred}'"))?;
        self.pos += 1;
        Ok(v)
    }
    fn or(&mut self) -> Result<Expr, String> {
        let mut left = self.and()?;
        while matches!(self.peek(), Some("-o" | "-or" | ",")) {
            self.pos += 1;
            let right = self.and()?;
            left = Expr::Or(Box::new(left), Box::new(right));
        }
        Ok(left)
    }
    fn and(&mut self) -> Result<Expr, String> {
        let mut left = self.unary()?;
        loop {
            match self.peek() {
                None | Some("-o" | "-or" | "," | ")") => return Ok(left),
                Some("-a" | "-and") => self.pos += 1,
                _ => {}
            }
            let right = self.unary()?;
            left = Expr::And(Box::new(left), Box::new(right));
        }
    }
    fn unary(&mut self) -> Result<Expr, String> {
        match self.peek() {
            Some("!" | "-not") => {
                self.pos += 1;
                Ok(Expr::Not(Box::new(self.unary()?)))
            }
            Some("(") => {
                self.pos += 1;
                let e = self.or()?;
                if self.peek() != Some(")") {
                    return Err("find: invalid expression; I was expecting to find a ')' somewhere but did not see one.".into());
                }
                self.pos += 1;
                Ok(e)
            }
            Some(_) => self.primary(),
            None => Err("find: invalid expression".into()),
        }
    }
    /// The command after `-exec` and friends, up to `;` or `{} +`.
    fn exec(&mut self, tok: &str) -> Result<Exec, String> {
        let missing = || format!("find: missing argument to `{tok}'");
        let mut words: Vec<String> = Vec::new();
        let many = loop {
            let Some(w) = self.toks.get(self.pos) else {
                return Err(missing());
            };
            self.pos += 1;
            match w.as_str() {
                ";" => break false,
                "+" if words.last().is_some_and(|l| l == "{}") => {
                    words.pop();
                    break true;
                }
                _ => words.push(w.clone()),
            }
        };
        if words.is_empty() {
            return Err(missing());
        }
        let ask = tok.starts_with("-ok");
        if many && ask {
            return Err(format!("find: {tok} ... {{}} + is not supported"));
        }
        if many && words.iter().any(|w| w.contains("{}")) {
            return Err(format!(
                "find: In `{tok} ... {{}} +' the {{}} must appear by itself, only once"
            ));
        }
        self.execs += 1;
        Ok(Exec {
            id: self.execs - 1,
            words,
            many,
            in_dir: tok.ends_with("dir"),
            ask,
        })
    }

    fn primary(&mut self) -> Result<Expr, String> {
        let tok = self.next_arg("")?;
        let e = match tok.as_str() {
            "-name" => Expr::Name(self.next_arg(&tok)?, false),
            "-iname" => Expr::Name(self.next_arg(&tok)?.to_lowercase(), true),
            "-path" | "-wholename" => Expr::Path(self.next_arg(&tok)?, false),
            "-ipath" | "-iwholename" => Expr::Path(self.next_arg(&tok)?.to_lowercase(), true),
            "-regex" | "-iregex" => {
                let src = self.next_arg(&tok)?;
                let t = crate::posix_re::translate(&src, crate::posix_re::Flavor::Extended)
                    .map_err(|e| format!("find: {e}"))?;
                let re = regex::RegexBuilder::new(&format!("^(?:{})$", t.pattern))
                    .case_insensitive(tok == "-iregex")
                    .build()
                    .map_err(|e| format!("find: {e}"))?;
                Expr::Regex(re)
            }
            "-type" | "-xtype" => {
                let v = self.next_arg(&tok)?;
                let types: Vec<char> = v.split(',').filter_map(|s| s.chars().next()).collect();
                if types.iter().any(|c| !"fdlpscbD".contains(*c)) {
                    return Err(format!("find: Unknown argument to -type: {v}"));
                }
                Expr::Type(types)
            }
            "-size" => {
                let v = self.next_arg(&tok)?;
                let (cmp, unit) =
                    Cmp::parse(&v).ok_or(format!("find: invalid argument `{v}' to `-size'"))?;
                let mult = match unit {
                    "" | "b" => 512,
                    "c" => 1,
                    "w" => 2,
                    "k" => 1024,
                    "M" => 1 << 20,
                    "G" => 1 << 30,
                    _ => return Err(format!("find: invalid -size type `{unit}'")),
                };
                Expr::Size(cmp, mult)
            }
            "-empty" => Expr::Empty,
            "-newer" => {
                let f = self.next_arg(&tok)?;
                let m = std::fs::metadata(&f)
                    .and_then(|m| m.modified())
                    .map_err(|e| format!("find: '{f}': {}", errno_text(&e)))?;
                Expr::Newer(m)
            }
            "-mtime" | "-mmin" => {
                let v = self.next_arg(&tok)?;
                let (cmp, rest) = Cmp::parse(&v)
                    .filter(|(_, r)| r.is_empty())
                    .ok_or(format!("find: invalid argument `{v}' to `{tok}'"))?;
                let _ = rest;
                Expr::Time(
                    cmp,
                    if tok == "-mtime" { 86400 } else { 60 },
                    tok == "-mtime",
                )
            }
            "-perm" => {
                let v = self.next_arg(&tok)?;
                let (kind, digits) = match v.chars().next() {
                    Some(c @ ('-' | '/')) => (c, &v[1..]),
                    _ => ('=', v.as_str()),
                };
                let m = u32::from_str_radix(digits, 8)
                    .map_err(|_| format!("find: invalid mode `{v}'"))?;
                Expr::Perm(m, kind)
            }
            "-links" | "-inum" => {
                let v = self.next_arg(&tok)?;
                let cmp = Cmp::parse(&v)
                    .filter(|(_, r)| r.is_empty())
                    .map(|(c, _)| c)
                    .ok_or(format!("find: invalid argument `{v}' to `{tok}'"))?;
                if tok == "-links" {
                    Expr::Links(cmp)
                } else {
                    Expr::Inum(cmp)
                }
            }
            "-samefile" => {
                let f = self.next_arg(&tok)?;
                std::fs::symlink_metadata(&f)
                    .map_err(|e| format!("find: '{f}': {}", errno_text(&e)))?;
                Expr::SameFile(guest_rt::file_id(Path::new(&f), self.cfg.follow))
            }
            "-true" => Expr::True,
            "-false" => Expr::False,
            "-print" => {
                self.has_action = true;
                Expr::Print
            }
            "-print0" => {
                self.has_action = true;
                Expr::Print0
            }
            "-printf" => {
                self.has_action = true;
                Expr::Printf(self.next_arg(&tok)?)
            }
            "-fprint" | "-fprintf" | "-fls" | "-ls" => {
                return Err(format!("find: {tok} is not supported"));
            }
            "-delete" => {
                self.has_action = true;
                self.cfg.depth_first = true;
                Expr::Delete
            }
            "-prune" => Expr::Prune,
            "-quit" => Expr::Quit,
            "-exec" | "-execdir" | "-ok" | "-okdir" => {
                self.has_action = true;
                Expr::Exec(self.exec(&tok)?)
            }
            "-maxdepth" | "-mindepth" => {
                let v = self.next_arg(&tok)?;
                let n: usize = v.parse().map_err(|_| {
                    format!(
                        "find: Expected a positive decimal integer argument to {tok}, but got `{v}'"
                    )
                })?;
                if tok == "-maxdepth" {
                    self.cfg.maxdepth = n;
                } else {
                    self.cfg.mindepth = n;
                }
                Expr::True
            }
            "-depth" | "-d" => {
                self.cfg.depth_first = true;
                Expr::True
            }
            "-follow" => {
                self.cfg.follow = true;
                Expr::True
            }
            "-xdev" | "-mount" | "-noleaf" | "-nowarn" | "-warn" | "-ignore_readdir_race" => {
                Expr::True
            }
            "-readable" | "-writable" | "-executable" => Expr::True,
            "-user" | "-group" | "-uid" | "-gid" => {
                // No users or groups under WASI: everything belongs to the one user.
                self.next_arg(&tok)?;
                Expr::True
            }
            "-nouser" | "-nogroup" => Expr::False,
            _ if tok.starts_with('-') => return Err(format!("find: unknown predicate `{tok}'")),
            _ => {
                return Err(format!(
                    "find: paths must precede expression: `{tok}'\nfind: possible unquoted pattern after predicate `-name'?"
                ));
            }
        };
        Ok(e)
    }
}

pub fn main(args: Vec<String>) -> i32 {
    let mut i = 1;
    let mut follow = false;
    while i < args.len() && matches!(args[i].as_str(), "-L" | "-H" | "-P") {
        follow = args[i] == "-L";
        i += 1;
    }
    let mut paths = Vec::new();
    while i < args.len() {
        let a = &args[i];
        if (a.starts_with('-') && a.len() > 1) || a == "!" || a == "(" {
            break;
        }
        paths.push(a.clone());
        i += 1;
    }
    if paths.is_empty() {
        paths.push(".".into());
    }
    let mut cfg = Cfg {
        maxdepth: usize::MAX,
        mindepth: 0,
        depth_first: false,
        follow,
        now: SystemTime::now(),
    };
    let toks = &args[i..];
    let mut p = Parser {
        toks,
        pos: 0,
        cfg: &mut cfg,
        has_action: false,
        execs: 0,
    };
    let expr = if toks.is_empty() {
        Expr::True
    } else {
        match p.or() {
            Ok(e) if p.pos == toks.len() => e,
            Ok(_) => {
                eprintln!("find: invalid expression; you have too many ')'");
                return 1;
            }
            Err(msg) => {
                eprintln!("{msg}");
                return 1;
            }
        }
    };
    let expr = if p.has_action {
        expr
    } else {
        Expr::And(Box::new(expr), Box::new(Expr::Print))
    };
    let execs = p.execs;
    let mut f = Find {
        out: Out::stdout(),
        error: false,
        prune: false,
        quit: false,
        batches: (0..execs).map(|_| Batch::default()).collect(),
    };
    for start in &paths {
        f.visit(&cfg, &expr, start, start, 0);
        if f.quit || f.out.broken() {
            break;
        }
    }
    f.run_batches(&expr);
    f.out.flush();
    i32::from(f.error)
}

impl Find {
    fn visit(&mut self, cfg: &Cfg, expr: &Expr, path: &str, start: &str, depth: usize) {
        let meta = if cfg.follow || depth == 0 {
            std::fs::metadata(path).or_else(|_| std::fs::symlink_metadata(path))
        } else {
            std::fs::symlink_metadata(path)
        };
        let meta = match meta {
            Ok(m) => m,
            Err(e) => {
                self.out.flush();
                eprintln!("find: '{path}': {}", errno_text(&e));
                self.error = true;
                return;
            }
        };
        let name = if depth == 0 {
            path.to_string()
        } else {
            Path::new(path)
                .file_name()
                .map(|s| s.to_string_lossy().into_owned())
                .unwrap_or_default()
        };
        let ctx = Ctx {
            path,
            name: &name,
            start,
            depth,
            meta: &meta,
        };
        let in_range = depth >= cfg.mindepth && depth <= cfg.maxdepth;
        self.prune = false;
        if !cfg.depth_first && in_range {
            self.eval(cfg, expr, &ctx);
        }
        let descend = meta.is_dir() && depth < cfg.maxdepth && !self.prune && !self.quit;
        if descend {
            match std::fs::read_dir(path) {
                Ok(rd) => {
                    let mut names: Vec<String> = rd
                        .filter_map(|e| e.ok())
                        .map(|e| e.file_name().to_string_lossy().into_owned())
                        .collect();
                    names.sort();
                    for n in names {
                        let child = if path.ends_with('/') {
                            format!("{path}{n}")
                        } else {
                            format!("{path}/{n}")
                        };
                        self.visit(cfg, expr, &child, start, depth + 1);
                        if self.quit || self.out.broken() {
                            return;
                        }
                    }
                }
                Err(e) => {
                    self.out.flush();
                    eprintln!("find: '{path}': {}", errno_text(&e));
                    self.error = true;
                }
            }
        }
        if cfg.depth_first && in_range && !self.quit {
            self.eval(cfg, expr, &ctx);
        }
    }

    fn eval(&mut self, cfg: &Cfg, e: &Expr, c: &Ctx) -> bool {
        match e {
            Expr::And(a, b) => self.eval(cfg, a, c) && self.eval(cfg, b, c),
            Expr::Or(a, b) => self.eval(cfg, a, c) || self.eval(cfg, b, c),
            Expr::Not(a) => !self.eval(cfg, a, c),
            Expr::Name(p, ci) => {
                // find matches the last component; `find dir/ -name dir` still sees `dir`.
                let base = if c.depth == 0 {
                    // The last component, trailing slashes aside: `.///` is `.`, `//` is `/`.
                    match c.name.trim_end_matches('/') {
                        "" if c.name.starts_with('/') => "/".to_string(),
                        t => t.rsplit('/').next().unwrap_or(t).to_string(),
                    }
                } else {
                    c.name.to_string()
                };
                if *ci {
                    glob_match(p, &base.to_lowercase())
                } else {
                    glob_match(p, &base)
                }
            }
            Expr::Path(p, ci) => {
                if *ci {
                    glob_match(p, &c.path.to_lowercase())
                } else {
                    glob_match(p, c.path)
                }
            }
            Expr::Regex(re) => re.is_match(c.path),
            Expr::Type(ts) => ts.contains(&type_char(c.meta)),
            Expr::Size(cmp, mult) => {
                let units = c.meta.len().div_ceil(*mult);
                cmp.test(units as i64)
            }
            Expr::Empty => {
                if c.meta.is_dir() {
                    std::fs::read_dir(c.path).is_ok_and(|mut rd| rd.next().is_none())
                } else {
                    c.meta.is_file() && c.meta.len() == 0
                }
            }
            Expr::Newer(t) => c.meta.modified().is_ok_and(|m| m > *t),
            Expr::Time(cmp, unit, days) => {
                let Ok(m) = c.meta.modified() else {
                    return false;
                };
                let age = cfg
                    .now
                    .duration_since(m)
                    .map(|d| d.as_secs() as i64)
                    .unwrap_or(0);
                // -mtime rounds down to whole days; -mmin to whole (rounded-up) minutes.
                let v = if *days {
                    age / unit
                } else {
                    (age + unit - 1) / unit
                };
                cmp.test(v)
            }
            Expr::Perm(want, kind) => {
                let m = mode(c.path, c.meta);
                match kind {
                    '-' => m & want == *want,
                    '/' => *want == 0 || m & want != 0,
                    _ => m == *want,
                }
            }
            Expr::Links(cmp) => {
                let follow = !c.meta.file_type().is_symlink();
                let n = guest_rt::path_meta(Path::new(c.path), follow).map_or(1, |(_, n)| n);
                cmp.test(n as i64)
            }
            Expr::SameFile(want) => {
                let follow = !c.meta.file_type().is_symlink();
                want.is_some() && guest_rt::file_id(Path::new(c.path), follow) == *want
            }
            Expr::Inum(cmp) => {
                let follow = !c.meta.file_type().is_symlink();
                guest_rt::file_id(Path::new(c.path), follow)
                    .is_some_and(|(_, ino)| cmp.test(ino as i64))
            }
            Expr::True => true,
            Expr::False => false,
            Expr::Print => {
                self.out.write(c.path.as_bytes());
                self.out.write(b"\n");
                true
            }
            Expr::Print0 => {
                self.out.write(c.path.as_bytes());
                self.out.write(b"\0");
                true
            }
            Expr::Printf(fmt) => {
                let s = printf(fmt, c);
                self.out.write(s.as_bytes());
                true
            }
            Expr::Delete => {
                let r = if c.meta.is_dir() {
                    std::fs::remove_dir(c.path)
                } else {
                    std::fs::remove_file(c.path)
                };
                if let Err(e) = r {
                    if c.depth == 0 && c.path == "." {
                        return true;
                    }
                    self.out.flush();
                    eprintln!("find: cannot delete '{}': {}", c.path, errno_text(&e));
                    self.error = true;
                    return false;
                }
                true
            }
            Expr::Prune => {
                self.prune = true;
                true
            }
            Expr::Quit => {
                self.quit = true;
                true
            }
            Expr::Exec(x) => self.exec(x, c.path),
        }
    }

    /// `-exec` and friends on one file: true when the command exits 0 (always, for `{} +`,
    /// whose failures show in find's status).
    fn exec(&mut self, x: &Exec, path: &str) -> bool {
        let (dir, name) = if x.in_dir {
            let (parent, base) = match path.trim_end_matches('/').rsplit_once('/') {
                Some(("", b)) => ("/".to_string(), b.to_string()),
                Some((p, b)) => (p.to_string(), b.to_string()),
                None => (".".to_string(), path.to_string()),
            };
            (Some(absolute(&parent)), format!("./{base}"))
        } else {
            (None, path.to_string())
        };
        if x.many {
            let b = &mut self.batches[x.id];
            if b.dir != dir || b.bytes + name.len() + 1 > BATCH_BYTES {
                let names = std::mem::take(&mut b.names);
                let old = std::mem::replace(&mut b.dir, dir);
                b.bytes = 0;
                self.run_batch(x, old, names);
            }
            let b = &mut self.batches[x.id];
            b.bytes += name.len() + 1;
            b.names.push(name);
            return true;
        }
        let argv: Vec<String> = x.words.iter().map(|w| w.replace("{}", &name)).collect();
        if x.ask && !self.confirm(&argv[0], &name) {
            return false;
        }
        self.spawn(&argv, dir.as_deref()) == Some(0)
    }

    /// `-ok`: the command on stderr, then a line from stdin that starts with `y` or `Y`.
    fn confirm(&mut self, command: &str, name: &str) -> bool {
        self.out.flush();
        eprint!("< {command} ... {name} > ? ");
        let mut line = String::new();
        std::io::stdin().read_line(&mut line).is_ok() && line.starts_with(['y', 'Y'])
    }

    fn run_batch(&mut self, x: &Exec, dir: Option<String>, names: Vec<String>) {
        if names.is_empty() {
            return;
        }
        let mut argv = x.words.clone();
        argv.extend(names);
        if self.spawn(&argv, dir.as_deref()) != Some(0) {
            self.error = true;
        }
    }

    /// What is left in every `{} +` batch, once the walk is over.
    fn run_batches(&mut self, e: &Expr) {
        match e {
            Expr::And(a, b) | Expr::Or(a, b) => {
                self.run_batches(a);
                self.run_batches(b);
            }
            Expr::Not(a) => self.run_batches(a),
            Expr::Exec(x) if x.many => {
                let b = std::mem::take(&mut self.batches[x.id]);
                self.run_batch(x, b.dir, b.names);
            }
            _ => {}
        }
    }

    /// The command's exit status; `None` when it could not be run (said on stderr, as
    /// GNU find says a failed execvp).
    fn spawn(&mut self, argv: &[String], dir: Option<&str>) -> Option<i32> {
        self.out.flush();
        match guest_rt::spawn::run(argv, dir) {
            Ok(status) => Some(status),
            Err(f) if f.kind == "noent" => {
                eprintln!("find: \u{2018}{}\u{2019}: {}", argv[0], f.message);
                None
            }
            Err(f) => {
                eprintln!("find: cannot run {}: {}", argv[0], f.message);
                self.error = true;
                if f.kind == "off" || f.kind == "cancelled" {
                    self.quit = true;
                }
                None
            }
        }
    }
}

/// `dir` made absolute against this program's directory.
fn absolute(dir: &str) -> String {
    if dir.starts_with('/') {
        return dir.to_string();
    }
    let here = std::env::current_dir()
        .map(|p| p.to_string_lossy().into_owned())
        .unwrap_or_else(|_| "/".into());
    match dir {
        "." => here,
        _ => format!(
            "{}/{}",
            here.trim_end_matches('/'),
            dir.trim_start_matches("./")
        ),
    }
}

fn printf(fmt: &str, c: &Ctx) -> String {
    let mut out = String::new();
    let chars: Vec<char> = fmt.chars().collect();
    let mut i = 0;
    while i < chars.len() {
        let ch = chars[i];
        i += 1;
        if ch == '\\' && i < chars.len() {
            let e = chars[i];
            i += 1;
            match e {
                'n' => out.push('\n'),
                't' => out.push('\t'),
                '0' => out.push('\0'),
                '\\' => out.push('\\'),
                other => {
                    out.push('\\');
                    out.push(other);
                }
            }
            continue;
        }
        if ch != '%' || i >= chars.len() {
            out.push(ch);
            continue;
        }
        // Optional field width, e.g. %-10p.
        let mut spec = String::new();
        while i < chars.len() && (chars[i] == '-' || chars[i].is_ascii_digit()) {
            spec.push(chars[i]);
            i += 1;
        }
        let Some(&d) = chars.get(i) else { break };
        i += 1;
        let rel = c
            .path
            .strip_prefix(c.start)
            .map(|s| s.trim_start_matches('/'))
            .unwrap_or(c.path);
        let val = match d {
            '%' => "%".to_string(),
            'p' => c.path.to_string(),
            'f' => c.name.rsplit('/').next().unwrap_or(c.name).to_string(),
            'P' => rel.to_string(),
            'h' => match c.path.rfind('/') {
                Some(0) => "/".into(),
                Some(p) => c.path[..p].to_string(),
                None => ".".into(),
            },
            'H' => c.start.to_string(),
            's' => c.meta.len().to_string(),
            'd' => c.depth.to_string(),
            'm' => format!("{:o}", mode(c.path, c.meta)),
            'y' => type_char(c.meta).to_string(),
            'u' | 'g' => "root".into(),
            'U' | 'G' => "0".into(),
            'T' | 't' => {
                let secs = c
                    .meta
                    .modified()
                    .ok()
                    .and_then(|m| m.duration_since(SystemTime::UNIX_EPOCH).ok())
                    .map_or(0, |d| d.as_secs());
                if d == 'T' && chars.get(i) == Some(&'@') {
                    i += 1;
                }
                secs.to_string()
            }
            other => format!("%{other}"),
        };
        let width: usize = spec.trim_start_matches('-').parse().unwrap_or(0);
        if spec.starts_with('-') {
            out.push_str(&format!("{val:<width$}"));
        } else {
            out.push_str(&format!("{val:>width$}"));
        }
    }
    out
}
