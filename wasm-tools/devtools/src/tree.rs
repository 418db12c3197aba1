//! `tree` as tree 2.1 lists directories: entries in byte order, hidden ones with `-a`, the
//! root and symlinks to directories counted as directories, `-I`/`-P` wildcard patterns with
//! `|` alternatives, and the summary line. Lines are drawn in Unicode under a UTF-8 locale and
//! in ASCII otherwise, as tree chooses from the locale.

use std::fs;
use std::path::Path;

const HELP: &str = "\
usage: tree [-adfFlr] [-L level] [-P pattern] [-I pattern] [--noreport] [--dirsfirst]
            [--charset=X] [--] [directory ...]
  -a            all files, also those starting with a dot
  -d            directories only
  -f            print the full path prefix of each file
  -F            append / to directories (and to symlinks to directories)
  -l            follow symbolic links to directories
  -r            reverse the order
  -L level      descend only level directories deep
  -P pattern    list only the files matching the wildcard pattern (a|b for either)
  -I pattern    do not list the files and directories matching the pattern
  --noreport    omit the count of files and directories at the end
  --dirsfirst   list directories before files
  --charset=X   utf-8 (box drawing) or ascii lines
  --help        print this usage
";

struct Opts {
    all: bool,
    dirs_only: bool,
    full: bool,
    classify: bool,
    follow: bool,
    reverse: bool,
    level: Option<usize>,
    include: Option<String>,
    exclude: Option<String>,
    noreport: bool,
    dirsfirst: bool,
    unicode: bool,
}

#[derive(Default)]
struct Count {
    dirs: usize,
    files: usize,
}

/// tree's wildcards: `*`, `?`, `[...]` (with `!`/`^` negation and ranges), `|` alternatives.
pub fn wild(pattern: &str, name: &str) -> bool {
    pattern.split('|').any(|p| {
        let p: Vec<char> = p.chars().collect();
        let n: Vec<char> = name.chars().collect();
        glob(&p, &n)
    })
}

fn glob(p: &[char], n: &[char]) -> bool {
    match p.first() {
        None => n.is_empty(),
        Some('*') => (0..=n.len()).any(|k| glob(&p[1..], &n[k..])),
        Some('?') => !n.is_empty() && glob(&p[1..], &n[1..]),
        Some('[') => {
            let Some(c) = n.first() else { return false };
            let mut k = 1;
            let neg = matches!(p.get(1), Some('!' | '^'));
            if neg {
                k += 1;
            }
            let mut hit = false;
            let start = k;
            while k < p.len() && (p[k] != ']' || k == start) {
                if k + 2 < p.len() && p[k + 1] == '-' && p[k + 2] != ']' {
                    hit |= (p[k]..=p[k + 2]).contains(c);
                    k += 3;
                } else {
                    hit |= p[k] == *c;
                    k += 1;
                }
            }
            if k >= p.len() {
                // No closing bracket: a literal `[`.
                return *c == '[' && glob(&p[1..], &n[1..]);
            }
            hit != neg && glob(&p[k + 1..], &n[1..])
        }
        Some(ch) => n.first() == Some(ch) && glob(&p[1..], &n[1..]),
    }
}

fn utf8_locale() -> bool {
    for v in ["LC_ALL", "LC_CTYPE", "LANG"] {
        if let Ok(s) = std::env::var(v)
            && !s.is_empty()
        {
            let s = s.to_ascii_lowercase();
            return s.contains("utf-8") || s.contains("utf8");
        }
    }
    false
}

pub fn main(args: &[String]) -> i32 {
    let args = crate::split_clusters(args, "LPI");
    let mut o = Opts {
        all: false,
        dirs_only: false,
        full: false,
        classify: false,
        follow: false,
        reverse: false,
        level: None,
        include: None,
        exclude: None,
        noreport: false,
        dirsfirst: false,
        unicode: utf8_locale(),
    };
    let mut roots = Vec::new();
    let mut i = 0;
    while i < args.len() {
        let a = args[i].as_str();
        if a == "--" {
            roots.extend(args[i + 1..].iter().cloned());
            break;
        }
        if !a.starts_with('-') || a == "-" {
            roots.push(a.to_string());
            i += 1;
            continue;
        }
        let (opt, inline) = if a.starts_with("--") {
            match a.split_once('=') {
                Some((k, v)) => (k.to_string(), Some(v.to_string())),
                None => (a.to_string(), None),
            }
        } else if a.len() > 2 {
            (a[..2].to_string(), Some(a[2..].to_string()))
        } else {
            (a.to_string(), None)
        };
        let mut value = || -> Option<String> {
            inline.clone().or_else(|| {
                i += 1;
                args.get(i).cloned()
            })
        };
        match opt.as_str() {
            "--help" => {
                crate::out(HELP.as_bytes());
                return 0;
            }
            "--version" => {
                crate::out(b"tree (wasmsand)\n");
                return 0;
            }
            "-a" => o.all = true,
            "-d" => o.dirs_only = true,
            "-f" => o.full = true,
            "-F" => o.classify = true,
            "-l" => o.follow = true,
            "-r" => o.reverse = true,
            "-n" | "-C" => {}
            "--noreport" => o.noreport = true,
            "--dirsfirst" => o.dirsfirst = true,
            "--charset" => match value().map(|v| v.to_ascii_lowercase()) {
                Some(v) if v == "ascii" => o.unicode = false,
                Some(_) => o.unicode = true,
                None => return missing("charset"),
            },
            "-L" => match value().map(|v| v.parse::<usize>()) {
                Some(Ok(n)) if n > 0 => o.level = Some(n),
                Some(_) => {
                    eprintln!("tree: Invalid level, must be greater than 0.");
                    return 1;
                }
                None => return missing("L"),
            },
            "-P" => match value() {
                Some(v) => o.include = Some(v),
                None => return missing("P"),
            },
            "-I" => match value() {
                Some(v) => o.exclude = Some(v),
                None => return missing("I"),
            },
            _ => {
                eprintln!("tree: Invalid argument -`{}'.", opt.trim_start_matches('-'));
                crate::out(HELP.as_bytes());
                return 1;
            }
        }
        i += 1;
    }
    if roots.is_empty() {
        roots.push(".".into());
    }
    let mut count = Count::default();
    let mut out = String::new();
    let mut status = 0;
    for root in &roots {
        let p = Path::new(root);
        match fs::metadata(p) {
            Ok(m) if m.is_dir() => {
                count.dirs += 1;
                out.push_str(root);
                if o.classify && !root.ends_with('/') {
                    out.push('/');
                }
                out.push('\n');
                walk(&o, p, root, "", 1, &mut count, &mut out);
            }
            Ok(_) => {
                count.files += 1;
                out.push_str(&format!("{root}  [error opening dir]\n"));
            }
            Err(_) => {
                status = 2;
                out.push_str(&format!("{root}  [error opening dir]\n"));
            }
        }
    }
    if !o.noreport {
        let plural =
            |n: usize, one: &str, many: &str| format!("{n} {}", if n == 1 { one } else { many });
        out.push('\n');
        out.push_str(&plural(count.dirs, "directory", "directories"));
        if !o.dirs_only {
            out.push_str(", ");
            out.push_str(&plural(count.files, "file", "files"));
        }
        out.push('\n');
    }
    crate::out(out.as_bytes());
    status
}

fn missing(opt: &str) -> i32 {
    eprintln!("tree: Missing argument to -{opt} option.");
    1
}

struct Entry {
    name: String,
    is_dir: bool,
    link: Option<String>,
}

fn walk(
    o: &Opts,
    dir: &Path,
    shown: &str,
    prefix: &str,
    depth: usize,
    count: &mut Count,
    out: &mut String,
) {
    if o.level.is_some_and(|l| depth > l) {
        return;
    }
    let Ok(rd) = fs::read_dir(dir) else {
        return;
    };
    let mut ents: Vec<Entry> = Vec::new();
    for e in rd.flatten() {
        let name = e.file_name().to_string_lossy().into_owned();
        if !o.all && name.starts_with('.') {
            continue;
        }
        let path = e.path();
        let lmeta = fs::symlink_metadata(&path);
        let link = lmeta
            .as_ref()
            .ok()
            .filter(|m| m.file_type().is_symlink())
            .and_then(|_| fs::read_link(&path).ok())
            .map(|t| t.to_string_lossy().into_owned());
        let is_dir = fs::metadata(&path).is_ok_and(|m| m.is_dir());
        if o.exclude.as_deref().is_some_and(|p| wild(p, &name)) {
            continue;
        }
        if o.dirs_only && !is_dir {
            continue;
        }
        // A symlink tree does not descend into is a file to -P.
        let descends = is_dir && (link.is_none() || o.follow);
        if !descends && o.include.as_deref().is_some_and(|p| !wild(p, &name)) {
            continue;
        }
        ents.push(Entry { name, is_dir, link });
    }
    ents.sort_by(|a, b| {
        let first = if o.dirsfirst {
            b.is_dir.cmp(&a.is_dir)
        } else {
            std::cmp::Ordering::Equal
        };
        first.then_with(|| {
            let c = a.name.as_bytes().cmp(b.name.as_bytes());
            if o.reverse { c.reverse() } else { c }
        })
    });
    let (tee, corner, bar, blank) = if o.unicode {
        ("├── ", "└── ", "│\u{a0}\u{a0} ", "    ")
    } else {
        ("|-- ", "`-- ", "|   ", "    ")
    };
    let n = ents.len();
    for (k, e) in ents.into_iter().enumerate() {
        let last = k + 1 == n;
        let path_shown = format!("{}/{}", shown.trim_end_matches('/'), e.name);
        out.push_str(prefix);
        out.push_str(if last { corner } else { tee });
        out.push_str(if o.full { &path_shown } else { &e.name });
        match &e.link {
            Some(t) => {
                out.push_str(" -> ");
                out.push_str(t);
                if o.classify && e.is_dir {
                    out.push('/');
                }
            }
            None if o.classify && e.is_dir => out.push('/'),
            None => {}
        }
        out.push('\n');
        if e.is_dir {
            count.dirs += 1;
            if e.link.is_none() || o.follow {
                let next = format!("{prefix}{}", if last { blank } else { bar });
                walk(
                    o,
                    &dir.join(&e.name),
                    &path_shown,
                    &next,
                    depth + 1,
                    count,
                    out,
                );
            }
        } else {
            count.files += 1;
        }
    }
}
