//! gzip, gunzip, zcat, bzip2, bunzip2, bzcat, xz, unxz, xzcat and tar in one multicall binary (dispatch on argv[0]'s basename, or on
//! argv[1] when invoked as `archive TOOL ...`).

#![forbid(unsafe_code)]

mod codec;
mod lzw;
mod squeeze;
mod untar;

use codec::Codec;
use flate2::Compression;
use flate2::read::MultiGzDecoder;
use flate2::write::GzEncoder;
use squeeze::Family;
use std::ffi::OsString;
use std::fs::{self, File};
use std::io::{self, BufRead, BufReader, Read, Write};
use std::path::{Component, Path, PathBuf};

/// The suffixes gunzip takes off a compressed file's name.
const GZ_SUFFIXES: &[&str] = &[".gz", "-gz", ".z", "-z", "_z", ".Z", ".tgz", ".taz"];

const TOOLS: &[&str] = &[
    "gzip", "gunzip", "zcat", "tar", "bzip2", "bunzip2", "bzcat", "xz", "unxz", "xzcat",
];

fn errno_text(e: &io::Error) -> String {
    guest_rt::errno_text(e)
}

/// The end of a (de)compression into `target`: on success the input goes (unless kept); on
/// failure the partial output goes. `Err(None)`: the reader went away (a broken pipe), which
/// is not reported.
fn settle(
    result: io::Result<()>,
    f: &str,
    target: Option<&str>,
    keep: bool,
) -> Result<(), Option<io::Error>> {
    match result {
        Ok(()) => {
            if target.is_some() && !keep && f != "-" {
                let _ = fs::remove_file(f);
            }
            Ok(())
        }
        Err(e) => {
            if let Some(t) = target {
                let _ = fs::remove_file(t);
            }
            if e.kind() == io::ErrorKind::BrokenPipe {
                return Err(None);
            }
            Err(Some(e))
        }
    }
}

fn main() {
    guest_rt::enter_pwd();
    let mut args: Vec<String> = std::env::args_os()
        .map(|a: OsString| a.to_string_lossy().into_owned())
        .collect();
    let base = |s: &str| {
        Path::new(s)
            .file_name()
            .map(|n| n.to_string_lossy().trim_end_matches(".wasm").to_string())
            .unwrap_or_default()
    };
    let mut name = args.first().map(|a| base(a)).unwrap_or_default();
    if !TOOLS.contains(&name.as_str()) {
        match args.get(1).map(|a| base(a)) {
            Some(n) if TOOLS.contains(&n.as_str()) => {
                name = n;
                args.remove(0);
            }
            _ => {
                eprintln!("usage: archive TOOL [ARGS...]\ntools: {}", TOOLS.join(" "));
                std::process::exit(2);
            }
        }
    }
    let code = match name.as_str() {
        "gzip" => gzip(&args[1..], Mode::Compress),
        "gunzip" => gzip(&args[1..], Mode::Decompress),
        "zcat" => gzip(&args[1..], Mode::Cat),
        "bzip2" => squeeze::main(&args[1..], Family::Bzip2, Mode::Compress, "bzip2"),
        "bunzip2" => squeeze::main(&args[1..], Family::Bzip2, Mode::Decompress, "bunzip2"),
        "bzcat" => squeeze::main(&args[1..], Family::Bzip2, Mode::Cat, "bzcat"),
        "xz" => squeeze::main(&args[1..], Family::Xz, Mode::Compress, "xz"),
        "unxz" => squeeze::main(&args[1..], Family::Xz, Mode::Decompress, "unxz"),
        "xzcat" => squeeze::main(&args[1..], Family::Xz, Mode::Cat, "xzcat"),
        _ => tar(&args[1..]),
    };
    std::process::exit(code);
}

#[derive(Clone, Copy, PartialEq)]
enum Mode {
    Compress,
    Decompress,
    Cat,
}

struct GzOpts {
    stdout: bool,
    keep: bool,
    force: bool,
    level: u32,
    test: bool,
    list: bool,
}

fn gzip(args: &[String], mut mode: Mode) -> i32 {
    let mut o = GzOpts {
        stdout: mode == Mode::Cat,
        keep: false,
        force: false,
        level: 6,
        test: false,
        list: false,
    };
    let tool = match mode {
        Mode::Compress => "gzip",
        Mode::Decompress => "gunzip",
        Mode::Cat => "zcat",
    };
    let mut files = Vec::new();
    let mut only_files = false;
    for a in args {
        if only_files || !a.starts_with('-') || a == "-" {
            files.push(a.clone());
            continue;
        }
        match a.as_str() {
            "--" => only_files = true,
            "--stdout" | "--to-stdout" => o.stdout = true,
            "--decompress" | "--uncompress" => mode = Mode::Decompress,
            "--keep" => o.keep = true,
            "--force" => o.force = true,
            "--test" => o.test = true,
            "--list" => o.list = true,
            "--fast" => o.level = 1,
            "--best" => o.level = 9,
            "--quiet" | "--verbose" | "--no-name" | "--name" => {}
            _ if a.starts_with("--") => {
                eprintln!("{tool}: unrecognized option '{a}'");
                return 1;
            }
            _ => {
                for c in a[1..].chars() {
                    match c {
                        'c' => o.stdout = true,
                        'd' => mode = Mode::Decompress,
                        'k' => o.keep = true,
                        'f' => o.force = true,
                        't' => o.test = true,
                        'l' => o.list = true,
                        'q' | 'v' | 'n' | 'N' => {}
                        '1'..='9' => o.level = c.to_digit(10).unwrap(),
                        _ => {
                            eprintln!("{tool}: invalid option -- '{c}'");
                            return 1;
                        }
                    }
                }
            }
        }
    }
    if mode == Mode::Cat {
        o.stdout = true;
    }
    if o.test || o.list {
        mode = Mode::Decompress;
        o.stdout = true;
    }
    if files.is_empty() {
        files.push("-".into());
    }
    let mut code = 0;
    for f in &files {
        if let Err(msg) = gzip_one(f, mode, &o, tool) {
            // A message of gzip's own decoder is whole already (`\ngzip: stdin: ...`).
            if msg.starts_with('\n') {
                eprintln!("{msg}");
            } else if !msg.is_empty() {
                eprintln!("{tool}: {msg}");
            }
            code = 1;
        }
    }
    code
}

fn gzip_one(f: &str, mode: Mode, o: &GzOpts, tool: &str) -> Result<(), String> {
    let compress = mode == Mode::Compress;
    let input: Box<dyn Read> = if f == "-" {
        Box::new(io::stdin().lock())
    } else {
        let meta = fs::metadata(f).map_err(|e| format!("{f}: {}", errno_text(&e)))?;
        if meta.is_dir() {
            return Err(format!("{f} is a directory -- ignored"));
        }
        if compress && f.ends_with(".gz") && !o.stdout && !o.force {
            return Err(format!("{f} already has .gz suffix -- unchanged"));
        }
        if !compress && !o.stdout && !GZ_SUFFIXES.iter().any(|s| f.ends_with(s)) {
            return Err(format!("{f}: unknown suffix -- ignored"));
        }
        Box::new(BufReader::new(
            File::open(f).map_err(|e| format!("{f}: {}", errno_text(&e)))?,
        ))
    };
    let (target, mut out): (Option<String>, Box<dyn Write>) = if o.stdout || f == "-" {
        (None, Box::new(io::stdout().lock()))
    } else {
        let t = if compress {
            format!("{f}.gz")
        } else if let Some(s) = f.strip_suffix(".tgz").or_else(|| f.strip_suffix(".taz")) {
            format!("{s}.tar")
        } else {
            GZ_SUFFIXES
                .iter()
                .find_map(|s| f.strip_suffix(s))
                .unwrap_or(f)
                .to_string()
        };
        if Path::new(&t).exists() && !o.force {
            return Err(format!("{t} already exists; not overwritten"));
        }
        let file = File::create(&t).map_err(|e| format!("{t}: {}", errno_text(&e)))?;
        (Some(t), Box::new(io::BufWriter::new(file)))
    };
    let result = if compress {
        let mut b = flate2::GzBuilder::new();
        if f != "-" {
            if let Some(n) = Path::new(f).file_name() {
                b = b.filename(n.to_string_lossy().as_bytes());
            }
            if let Ok(m) = fs::metadata(f).and_then(|m| m.modified())
                && let Ok(d) = m.duration_since(std::time::UNIX_EPOCH)
            {
                b = b.mtime(d.as_secs() as u32);
            }
        }
        let mut enc: GzEncoder<&mut Box<dyn Write>> = b.write(&mut out, Compression::new(o.level));
        let mut input = input;
        io::copy(&mut input, &mut enc).and_then(|_| enc.finish().map(|_| ()))
    } else {
        // gzip also reads compress's `.Z` files, told apart by their magic.
        let mut input = BufReader::new(input);
        let is_z = input
            .fill_buf()
            .map(|b| b.starts_with(&lzw::MAGIC))
            .unwrap_or(false);
        let sink: &mut dyn Write = if o.test || o.list {
            &mut io::sink()
        } else {
            &mut out
        };
        if is_z {
            let mut data = Vec::new();
            input.read_to_end(&mut data).and_then(|_| {
                let text = lzw::decompress(&data).map_err(io::Error::other)?;
                sink.write_all(&text)
            })
        } else {
            io::copy(&mut MultiGzDecoder::new(input), sink).map(|_| ())
        }
    };
    let result = result.and_then(|_| out.flush());
    drop(out);
    match settle(result, f, target.as_deref(), o.keep) {
        Ok(()) => Ok(()),
        Err(None) => Err(String::new()),
        Err(Some(e)) => {
            if !compress && e.kind() == io::ErrorKind::InvalidInput {
                return Err(format!("{f}: not in gzip format"));
            }
            if let Some(m) = e.get_ref().and_then(|m| m.downcast_ref::<lzw::Error>()) {
                // zcat and gunzip are gzip to GNU, which says so, and calls `-` stdin.
                let name = if f == "-" { "stdin" } else { f };
                return Err(format!("\ngzip: {name}: {m}"));
            }
            let _ = tool;
            Err(format!("{f}: {}", errno_text(&e)))
        }
    }
}

#[derive(PartialEq, Clone, Copy)]
enum TarOp {
    Create,
    Extract,
    List,
}

struct TarOpts {
    op: Option<TarOp>,
    file: Option<String>,
    /// -z/-j/-J: the compression to write, and to expect when reading.
    codec: Option<Codec>,
    verbose: bool,
    dir: Option<String>,
    to_stdout: bool,
    strip: usize,
    excludes: Vec<String>,
    members: Vec<String>,
    existing: untar::Existing,
}

fn tar_usage(msg: &str) -> i32 {
    eprintln!("tar: {msg}\nTry 'tar --help' for more information.");
    2
}

fn tar(args: &[String]) -> i32 {
    let mut o = TarOpts {
        op: None,
        file: None,
        codec: None,
        verbose: false,
        dir: None,
        to_stdout: false,
        strip: 0,
        excludes: Vec::new(),
        members: Vec::new(),
        existing: untar::Existing::default(),
    };
    let mut args: Vec<String> = args.to_vec();
    // Old-style first argument without a dash (`tar czf out.tgz dir`).
    if let Some(first) = args.first()
        && !first.starts_with('-')
        && !first.is_empty()
    {
        args[0] = format!("-{first}");
    }
    let mut i = 0;
    while i < args.len() {
        let a = args[i].clone();
        i += 1;
        if !a.starts_with('-') || a == "-" {
            o.members.push(a);
            continue;
        }
        if let Some(long) = a.strip_prefix("--") {
            let (n, v) = match long.split_once('=') {
                Some((n, v)) => (n, Some(v.to_string())),
                None => (long, None),
            };
            let val = |i: &mut usize| {
                v.clone().or_else(|| {
                    *i += 1;
                    args.get(*i - 1).cloned()
                })
            };
            match n {
                "create" | "extract" | "get" | "list" => {
                    let op = match n {
                        "create" => TarOp::Create,
                        "list" => TarOp::List,
                        _ => TarOp::Extract,
                    };
                    if let Err(code) = set_op(&mut o, op) {
                        return code;
                    }
                }
                "gzip" | "gunzip" | "ungzip" => o.codec = Some(Codec::Gzip),
                "bzip2" => o.codec = Some(Codec::Bzip2),
                "xz" => o.codec = Some(Codec::Xz),
                "verbose" => o.verbose = true,
                "to-stdout" => o.to_stdout = true,
                "file" => o.file = val(&mut i),
                "directory" => o.dir = val(&mut i),
                "strip-components" => {
                    o.strip = val(&mut i).and_then(|s| s.parse().ok()).unwrap_or(0)
                }
                "exclude" => {
                    if let Some(x) = val(&mut i) {
                        o.excludes.push(x);
                    }
                }
                "exclude-from" => match val(&mut i) {
                    Some(f) => {
                        if let Err(code) = exclude_from(&f, &mut o.excludes) {
                            return code;
                        }
                    }
                    None => return tar_usage("option '--exclude-from' requires an argument"),
                },
                // Members are always stored in name order, which is GNU's `--sort=name`.
                "sort" => match val(&mut i).as_deref() {
                    Some("name" | "none" | "inode") => {}
                    Some(other) => {
                        return tar_usage(&format!(
                            "invalid argument '{other}' for '--sort'\nValid arguments are:\n  - 'none'\n  - 'name'\n  - 'inode'"
                        ));
                    }
                    None => return tar_usage("option '--sort' requires an argument"),
                },
                "keep-old-files" => o.existing = untar::Existing::Keep,
                "skip-old-files" => o.existing = untar::Existing::Skip,
                "overwrite" => o.existing = untar::Existing::Overwrite,
                "unlink-first" | "recursive-unlink" => o.existing = untar::Existing::Replace,
                "no-same-owner"
                | "no-same-permissions"
                | "preserve-permissions"
                | "same-owner"
                | "numeric-owner" => {}
                _ => return tar_usage(&format!("unrecognized option '--{n}'")),
            }
            continue;
        }
        let chars: Vec<char> = a[1..].chars().collect();
        for (k, c) in chars.iter().enumerate() {
            let rest: String = chars[k + 1..].iter().collect();
            let val = |i: &mut usize| -> Option<String> {
                if !rest.is_empty() {
                    return Some(rest.clone());
                }
                *i += 1;
                args.get(*i - 1).cloned()
            };
            match c {
                'c' | 'x' | 't' => {
                    let op = match c {
                        'c' => TarOp::Create,
                        'x' => TarOp::Extract,
                        _ => TarOp::List,
                    };
                    if let Err(code) = set_op(&mut o, op) {
                        return code;
                    }
                }
                'z' => o.codec = Some(Codec::Gzip),
                'j' => o.codec = Some(Codec::Bzip2),
                'J' => o.codec = Some(Codec::Xz),
                'v' => o.verbose = true,
                'O' => o.to_stdout = true,
                'p' | 'o' | 'm' => {}
                'k' => o.existing = untar::Existing::Keep,
                'U' => o.existing = untar::Existing::Replace,
                'Z' => {
                    return tar_usage(
                        "compress (-Z) is not available in this sandbox: gzip (-z), bzip2 (-j) and xz (-J) are",
                    );
                }
                'f' | 'C' | 'X' => {
                    let v = val(&mut i);
                    let Some(v) = v else {
                        return tar_usage(&format!("option requires an argument -- '{c}'"));
                    };
                    match c {
                        'f' => o.file = Some(v),
                        'C' => o.dir = Some(v),
                        _ => {
                            if let Err(code) = exclude_from(&v, &mut o.excludes) {
                                return code;
                            }
                        }
                    }
                    // The value used the rest of this cluster.
                    if !rest.is_empty() {
                        break;
                    }
                }
                _ => return tar_usage(&format!("invalid option -- '{c}'")),
            }
        }
    }
    let Some(op) = o.op else {
        return tar_usage(
            "You must specify one of the '-Acdtrux', '--delete' or '--test-label' options",
        );
    };
    let result = match op {
        TarOp::Create => tar_create(&o),
        TarOp::Extract | TarOp::List => tar_read(&o, op),
    };
    match result {
        Ok(code) => code,
        Err(e) => {
            if e.kind() != io::ErrorKind::BrokenPipe {
                eprintln!("tar: {}", errno_text(&e));
            }
            2
        }
    }
}

/// One operation per command line, as GNU tar insists.
fn set_op(o: &mut TarOpts, op: TarOp) -> Result<(), i32> {
    if o.op.is_some_and(|had| had != op) {
        eprintln!(
            "tar: You may not specify more than one '-Acdtrux', '--delete' or  '--test-label' \
             option\nTry 'tar --help' or 'tar --usage' for more information."
        );
        return Err(2);
    }
    o.op = Some(op);
    Ok(())
}

/// `-X FILE`: one exclude pattern a line.
fn exclude_from(file: &str, excludes: &mut Vec<String>) -> Result<(), i32> {
    match fs::read_to_string(file) {
        Ok(text) => {
            excludes.extend(text.lines().filter(|l| !l.is_empty()).map(str::to_string));
            Ok(())
        }
        Err(e) => {
            eprintln!("tar: {file}: {}", errno_text(&e));
            eprintln!("tar: Error is not recoverable: exiting now");
            Err(2)
        }
    }
}

/// GNU's unanchored exclusion: a pattern excludes a member when it matches any run of the
/// member's whole components (`e` and `d/e` both exclude `d/e/f`), `*` crossing slashes.
fn excluded(o: &TarOpts, path: &Path) -> bool {
    if o.excludes.is_empty() {
        return false;
    }
    let comps: Vec<String> = path
        .components()
        .filter_map(|c| match c {
            Component::Normal(n) => Some(n.to_string_lossy().into_owned()),
            _ => None,
        })
        .collect();
    o.excludes.iter().any(|x| {
        let x = x.trim_end_matches('/');
        (0..comps.len()).any(|i| (i..comps.len()).any(|j| glob(x, &comps[i..=j].join("/"))))
    })
}

/// Minimal `*`/`?` matching for --exclude patterns.
fn glob(p: &str, s: &str) -> bool {
    fn rec(p: &[char], s: &[char]) -> bool {
        match p.first() {
            None => s.is_empty(),
            Some('*') => (0..=s.len()).any(|k| rec(&p[1..], &s[k..])),
            Some('?') => !s.is_empty() && rec(&p[1..], &s[1..]),
            Some(c) => s.first() == Some(c) && rec(&p[1..], &s[1..]),
        }
    }
    let p: Vec<char> = p.chars().collect();
    let s: Vec<char> = s.chars().collect();
    rec(&p, &s)
}

fn tar_create(o: &TarOpts) -> io::Result<i32> {
    if o.members.is_empty() {
        eprintln!(
            "tar: Cowardly refusing to create an empty archive\nTry 'tar --help' for more information."
        );
        return Ok(2);
    }
    let to_stdout = o.file.as_deref().is_none_or(|f| f == "-");
    let sink: Box<dyn Write> = if to_stdout {
        Box::new(io::stdout().lock())
    } else {
        let f = o.file.as_deref().expect("checked");
        Box::new(io::BufWriter::new(File::create(f).map_err(|e| {
            io::Error::new(e.kind(), format!("{f}: Cannot open: {}", errno_text(&e)))
        })?))
    };
    let sink = Codec::encoder(o.codec, sink);
    let mut b = tar::Builder::new(sink);
    b.follow_symlinks(false);
    let base = PathBuf::from(o.dir.clone().unwrap_or_else(|| ".".into()));
    let mut code = 0;
    let mut reported = std::collections::HashSet::new();
    let mut seen = std::collections::HashMap::new();
    for m in &o.members {
        let (name, prefix) = member_name(m);
        if let Some(prefix) = prefix
            && reported.insert(prefix.clone())
        {
            eprintln!("tar: Removing leading `{prefix}' from member names");
        }
        let src = base.join(m);
        let mut ctx = Adding {
            b: &mut b,
            o,
            to_stdout,
            seen: &mut seen,
        };
        if let Err(e) = add_path(&mut ctx, &src, &name) {
            eprintln!("tar: {m}: Cannot stat: {}", errno_text(&e));
            code = 2;
        }
    }
    b.into_inner()?.finish()?;
    if code != 0 {
        eprintln!("tar: Exiting with failure status due to previous errors");
    }
    Ok(code)
}

/// A member name as GNU tar stores it, and the prefix it removed: a leading `/`, or everything
/// up to the last `..` component (`./../d/../x` is stored as `x`).
fn member_name(m: &str) -> (PathBuf, Option<String>) {
    let parts: Vec<&str> = m.split('/').collect();
    let (rest, prefix) = match parts.iter().rposition(|p| *p == "..") {
        Some(k) => (
            parts[k + 1..].join("/"),
            Some(format!("{}/", parts[..=k].join("/"))),
        ),
        None if m.starts_with('/') => (m.to_string(), Some("/".to_string())),
        None => (m.to_string(), None),
    };
    let name = Path::new(&rest)
        .components()
        .filter(|c| !matches!(c, Component::RootDir | Component::Prefix(_)))
        .collect();
    (name, prefix)
}

/// What adding members shares: the archive, the options, and the files already stored.
struct Adding<'a, 'b> {
    b: &'a mut tar::Builder<codec::Encoder<'b>>,
    o: &'a TarOpts,
    to_stdout: bool,
    /// Identity of each file stored so far, with its member name: a later name of the same
    /// file becomes a hard link to it.
    seen: &'a mut std::collections::HashMap<(u64, u64), PathBuf>,
}

fn add_path(ctx: &mut Adding<'_, '_>, src: &Path, name: &Path) -> io::Result<()> {
    let (o, to_stdout) = (ctx.o, ctx.to_stdout);
    if excluded(o, name) {
        return Ok(());
    }
    let meta = fs::symlink_metadata(src)?;
    let shown = if meta.is_dir() {
        format!("{}/", name.display())
    } else {
        name.display().to_string()
    };
    if o.verbose {
        if to_stdout {
            eprintln!("{shown}");
        } else {
            println!("{shown}");
        }
    }
    let b = &mut *ctx.b;
    if let Some(id) = untar::identity(&meta, src) {
        if let Some(first) = ctx.seen.get(&id) {
            let mut h = tar::Header::new_gnu();
            h.set_entry_type(tar::EntryType::Link);
            h.set_size(0);
            h.set_mode(guest_rt::path_mode(src, false).map_or(0o644, |m| m & 0o7777));
            set_owner(&mut h);
            h.set_mtime(mtime(&meta));
            return b.append_link(&mut h, name, first);
        }
        ctx.seen.insert(id, name.to_path_buf());
    }
    if meta.is_dir() {
        if !name.as_os_str().is_empty() && name != Path::new(".") {
            append_dir_entry(b, src, name, &meta)?;
        }
        let mut entries: Vec<_> = fs::read_dir(src)?.filter_map(|e| e.ok()).collect();
        entries.sort_by_key(|e| e.file_name());
        for e in entries {
            add_path(ctx, &e.path(), &name.join(e.file_name()))?;
        }
        Ok(())
    } else if meta.file_type().is_symlink() {
        let target = fs::read_link(src)?;
        let mut h = tar::Header::new_gnu();
        h.set_entry_type(tar::EntryType::Symlink);
        h.set_size(0);
        h.set_mode(0o777);
        set_owner(&mut h);
        h.set_mtime(mtime(&meta));
        b.append_link(&mut h, name, target)
    } else {
        // `Header::set_metadata` is unimplemented for wasm32 in the tar crate (it panics); the
        // mode comes from the sandbox through guest-rt (WASI's stat has none).
        let mut h = tar::Header::new_gnu();
        h.set_entry_type(tar::EntryType::Regular);
        h.set_size(meta.len());
        h.set_mode(guest_rt::path_mode(src, false).map_or(0o644, |m| m & 0o7777));
        set_owner(&mut h);
        h.set_mtime(mtime(&meta));
        let mut f = File::open(src)?;
        b.append_data(&mut h, name, &mut f)
    }
}

/// GNU tar stores directory names with a trailing `/`; the tar crate's path setter drops it, so
/// short names are written into the header directly.
/// The sandbox's files all belong to root (`ls -l` says so): its members name that owner.
fn set_owner(h: &mut tar::Header) {
    h.set_uid(0);
    h.set_gid(0);
    let _ = h.set_username("root");
    let _ = h.set_groupname("root");
}

fn append_dir_entry(
    b: &mut tar::Builder<codec::Encoder<'_>>,
    src: &Path,
    name: &Path,
    meta: &fs::Metadata,
) -> io::Result<()> {
    let mut h = tar::Header::new_gnu();
    h.set_entry_type(tar::EntryType::Directory);
    h.set_size(0);
    h.set_mode(guest_rt::path_mode(src, false).map_or(0o755, |m| m & 0o7777));
    set_owner(&mut h);
    h.set_mtime(mtime(meta));
    let with_slash = format!("{}/", name.to_string_lossy());
    if with_slash.len() < 100 {
        let gnu = h.as_gnu_mut().expect("new_gnu header");
        gnu.name = [0; 100];
        gnu.name[..with_slash.len()].copy_from_slice(with_slash.as_bytes());
        h.set_cksum();
        b.append(&h, io::empty())
    } else {
        b.append_data(&mut h, name, io::empty())
    }
}

fn mtime(m: &fs::Metadata) -> u64 {
    m.modified()
        .ok()
        .and_then(|t| t.duration_since(std::time::UNIX_EPOCH).ok())
        .map_or(0, |d| d.as_secs())
}

fn tar_read(o: &TarOpts, op: TarOp) -> io::Result<i32> {
    let raw: Box<dyn Read> = match o.file.as_deref() {
        None | Some("-") => Box::new(io::stdin().lock()),
        Some(f) => Box::new(File::open(f).map_err(|e| {
            io::Error::new(e.kind(), format!("{f}: Cannot open: {}", errno_text(&e)))
        })?),
    };
    let mut raw = BufReader::new(raw);
    // Like GNU tar, recognise compressed input by its magic number whatever the options say.
    let (sniffed, empty) = {
        let head = raw.fill_buf()?;
        (Codec::sniff(head), head.is_empty())
    };
    if empty && let Some(codec) = o.codec {
        // What GNU tar passes on from the decompressor it runs, and its own verdict.
        let (said, status) = match codec {
            Codec::Gzip => ("\ngzip: stdin: unexpected end of file", 1),
            Codec::Bzip2 => (
                "\nbzip2: Compressed file ends unexpectedly;\n\tperhaps it is corrupted?",
                2,
            ),
            Codec::Xz => ("xz: (stdin): File format not recognized", 1),
        };
        eprintln!(
            "{said}\ntar: Child returned status {status}\ntar: Error is not recoverable: exiting now"
        );
        return Ok(2);
    }
    let reader: Box<dyn Read> = match sniffed.or(o.codec) {
        Some(codec) => codec
            .decoder(raw)
            .map_err(|e| io::Error::new(e.kind(), format!("Child returned status 1: {e}")))?,
        None => Box::new(raw),
    };
    if empty && o.codec.is_none() {
        eprintln!(
            "tar: This does not look like a tar archive\n\
             tar: Exiting with failure status due to previous errors"
        );
        return Ok(2);
    }
    let mut ar = tar::Archive::new(reader);
    let dest = PathBuf::from(o.dir.clone().unwrap_or_else(|| ".".into()));
    let mut extractor = untar::Extractor::new(dest, o.strip, o.existing);
    let mut matched = vec![false; o.members.len()];
    let stdout = io::stdout();
    let mut out = stdout.lock();
    for entry in ar.entries()? {
        let mut entry = entry?;
        let path = entry.path()?.into_owned();
        let shown = path.display().to_string();
        if !o.members.is_empty() {
            let hit = o.members.iter().position(|m| {
                let m = m.trim_end_matches('/');
                shown == m || shown.starts_with(&format!("{m}/"))
            });
            match hit {
                Some(k) => matched[k] = true,
                None => continue,
            }
        }
        if excluded(o, &path) {
            continue;
        }
        if op == TarOp::List {
            if o.verbose {
                let h = entry.header();
                let kind = match h.entry_type() {
                    tar::EntryType::Directory => 'd',
                    tar::EntryType::Symlink => 'l',
                    tar::EntryType::Link => 'h',
                    _ => '-',
                };
                let mode = h.mode().unwrap_or(0o644);
                let mut perms = String::from(kind);
                for shift in [6, 3, 0] {
                    let bits = (mode >> shift) & 7;
                    perms.push(if bits & 4 != 0 { 'r' } else { '-' });
                    perms.push(if bits & 2 != 0 { 'w' } else { '-' });
                    perms.push(if bits & 1 != 0 { 'x' } else { '-' });
                }
                // A member without owner names shows its numeric ids, as GNU tar shows them.
                let name_or_id = |name: Option<&str>, id: io::Result<u64>| match name {
                    Some(n) if !n.is_empty() => n.to_string(),
                    _ => id.map_or_else(|_| "0".into(), |i| i.to_string()),
                };
                let owner = format!(
                    "{}/{}",
                    name_or_id(h.username().ok().flatten(), h.uid()),
                    name_or_id(h.groupname().ok().flatten(), h.gid())
                );
                let secs = h.mtime().unwrap_or(0) as i64;
                let (y, mo, d) = guest_rt::civil_from_days(secs.div_euclid(86_400));
                let rem = secs.rem_euclid(86_400);
                let link = match entry.link_name().ok().flatten() {
                    Some(t) if kind == 'l' => format!(" -> {}", t.display()),
                    Some(t) if kind == 'h' => format!(" link to {}", t.display()),
                    _ => String::new(),
                };
                writeln!(
                    out,
                    "{perms} {owner} {:>8} {y:04}-{mo:02}-{d:02} {:02}:{:02} {shown}{link}",
                    h.size().unwrap_or(0),
                    rem / 3600,
                    rem / 60 % 60
                )?;
            } else {
                writeln!(out, "{shown}")?;
            }
            continue;
        }
        // A member refused for its name is not listed, as GNU tar does not list it.
        if o.verbose && (o.to_stdout || !untar::refused(&path)) {
            writeln!(out, "{shown}")?;
        }
        if o.to_stdout {
            if entry.header().entry_type().is_file() {
                io::copy(&mut entry, &mut out)?;
            }
            continue;
        }
        extractor.extract(&mut entry, &shown);
    }
    out.flush()?;
    let mut code = extractor.finish();
    for (k, m) in o.members.iter().enumerate() {
        if !matched[k] {
            eprintln!("tar: {m}: Not found in archive");
            code = 2;
        }
    }
    if code != 0 {
        eprintln!("tar: Exiting with failure status due to previous errors");
    }
    Ok(code)
}
