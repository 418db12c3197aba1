//! du, written here rather than taken from uu_du, whose 0.12 release imports
//! `std::os::unix::fs::MetadataExt` on every non-Windows target and so does not build for WASI.
//! GNU's command line: `-a -s -c -h --si -b -k -m -B SIZE -d N --apparent-size -0 -l -x
//! -H/-D -P`. Symbolic links are never followed below the operands (GNU's default `-P`); `-L`
//! is refused. Entries of a directory are listed in name order (GNU uses directory order).
//!
//! WASI reports no `st_blocks`, so there the disk usage is derived from the apparent size the
//! way ext4 would allocate it: regular files rounded up to 4 KiB blocks, directories one 4 KiB
//! block, symlinks shorter than 60 bytes none (ext4 keeps them in the inode). Natively the real
//! `st_blocks` is used, which is what lets the check script compare with GNU du.

use std::collections::HashSet;
use std::ffi::{OsStr, OsString};
use std::io::{self, BufWriter, Write};
use std::path::{Path, PathBuf};

/// What du needs to know about one file.
struct Entry {
    is_dir: bool,
    apparent: u64,
    disk: u64,
    /// (device, inode), when the platform reports a usable one.
    id: Option<(u64, u64)>,
    nlink: u64,
}

#[cfg(not(target_os = "wasi"))]
fn metadata(path: &Path, follow: bool) -> io::Result<std::fs::Metadata> {
    if follow {
        std::fs::metadata(path)
    } else {
        std::fs::symlink_metadata(path)
    }
}

#[cfg(unix)]
fn probe(path: &Path, follow: bool) -> io::Result<Entry> {
    use std::os::unix::fs::MetadataExt;
    let m = metadata(path, follow)?;
    Ok(Entry {
        is_dir: m.is_dir(),
        apparent: m.len(),
        disk: m.blocks() * 512,
        id: Some((m.dev(), m.ino())),
        nlink: m.nlink(),
    })
}

/// Inode and link count come from wasi-libc's stat()/lstat(); one call per entry, as std's
/// own metadata would cost.
#[cfg(target_os = "wasi")]
fn probe(path: &Path, follow: bool) -> io::Result<Entry> {
    use std::os::wasi::ffi::OsStrExt;
    let st = guest_rt::wasi_stat(path.as_os_str().as_bytes(), follow)?;
    let kind = st.st_mode & libc::S_IFMT;
    let apparent = st.st_size as u64;
    let disk = if kind == libc::S_IFDIR {
        4096
    } else if kind == libc::S_IFLNK && apparent < 60 {
        0
    } else {
        apparent.div_ceil(4096) * 4096
    };
    Ok(Entry {
        is_dir: kind == libc::S_IFDIR,
        apparent,
        disk,
        // A runtime that does not track inodes reports 0 for all of them; treating that as an
        // identity would merge unrelated files.
        id: (st.st_ino != 0).then_some((st.st_dev as u64, st.st_ino as u64)),
        nlink: st.st_nlink as u64,
    })
}

#[cfg(not(any(unix, target_os = "wasi")))]
fn probe(path: &Path, follow: bool) -> io::Result<Entry> {
    let m = metadata(path, follow)?;
    Ok(Entry {
        is_dir: m.is_dir(),
        apparent: m.len(),
        disk: m.len().div_ceil(4096) * 4096,
        id: None,
        nlink: 1,
    })
}

enum Unit {
    /// Size in units of `size` bytes, rounded up, followed by `suffix` (`-BM` prints `1M`).
    Blocks { size: u64, suffix: String },
    /// `-h` (base 1024) or `--si` (base 1000).
    Human { base: u64 },
}

/// GNU's autoscaled format: always rounded up, one decimal below 10 (`1.5K`, `12K`, `1.1M`).
fn human(n: u64, base: u64) -> String {
    const UNITS: &[u8] = b"KMGTPEZY";
    if n < base {
        return n.to_string();
    }
    let unit = |e: usize| {
        if base == 1000 && e == 1 {
            'k'
        } else {
            UNITS[e - 1] as char
        }
    };
    let (n, b) = (u128::from(n), u128::from(base));
    let (mut e, mut d) = (1, b);
    while n / d >= b && e < UNITS.len() {
        e += 1;
        d *= b;
    }
    if n < 10 * d {
        let tenths = (n * 10).div_ceil(d);
        if tenths < 100 {
            return format!("{}.{}{}", tenths / 10, tenths % 10, unit(e));
        }
        return format!("10{}", unit(e));
    }
    let whole = n.div_ceil(d);
    if whole >= b && e < UNITS.len() {
        // Rounding up crossed into the next unit: 1023.5K is shown as 1.0M, as GNU does.
        return format!("1.0{}", unit(e + 1));
    }
    format!("{whole}{}", unit(e))
}

/// Parses a `-B` argument: `1024`, `4K`, `M`, `1MB`, `2KiB`. Without digits the unit letter is
/// printed after every size, like GNU.
fn parse_block_size(s: &str) -> Option<Unit> {
    let digits = s.chars().take_while(|c| c.is_ascii_digit()).count();
    let (num, suffix) = s.split_at(digits);
    let mut chars = suffix.chars();
    let scale: u64 = match chars.next() {
        None => 1,
        Some(c) => {
            let power = "KMGTPE".find(c.to_ascii_uppercase())? as u32 + 1;
            let base: u64 = match chars.as_str() {
                "" | "iB" => 1024,
                "B" => 1000,
                _ => return None,
            };
            base.checked_pow(power)?
        }
    };
    let size = if num.is_empty() {
        scale
    } else {
        num.parse::<u64>().ok()?.checked_mul(scale)?
    };
    if size == 0 {
        return None;
    }
    let shown = if num.is_empty() && !suffix.is_empty() {
        match suffix.strip_suffix('B') {
            // GNU spells the decimal kilo `kB`.
            Some(p) if !p.ends_with('i') => format!("{}B", p.replace('K', "k")),
            _ => suffix.to_string(),
        }
    } else {
        String::new()
    };
    Some(Unit::Blocks {
        size,
        suffix: shown,
    })
}

struct Opts {
    all: bool,
    max_depth: Option<usize>,
    apparent: bool,
    unit: Unit,
    total: bool,
    null: bool,
    count_links: bool,
    one_fs: bool,
    deref_args: bool,
}

struct Du {
    o: Opts,
    out: BufWriter<io::StdoutLock<'static>>,
    /// Files already counted, so hard links (and, with several operands, whole directories)
    /// are counted once, as GNU du does.
    seen: HashSet<(u64, u64)>,
    hash_all: bool,
    ok: bool,
    /// Set by the first failed write; the walk stops there.
    write_error: Option<io::Error>,
}

/// `dir/name`, without doubling a slash the operand ended with (`du -a d/` lists `d/f`).
fn child_path(dir: &Path, name: &OsStr) -> PathBuf {
    let mut s = dir.as_os_str().to_owned();
    if !s.as_encoded_bytes().ends_with(b"/") {
        s.push("/");
    }
    s.push(name);
    PathBuf::from(s)
}

fn errno_text(e: &io::Error) -> String {
    let s = e.to_string();
    s.split(" (os error").next().unwrap_or(&s).to_string()
}

impl Du {
    fn show(&mut self, bytes: u64, name: &Path) {
        if self.write_error.is_some() {
            return;
        }
        let size = match &self.o.unit {
            Unit::Human { base } => human(bytes, *base),
            Unit::Blocks { size, suffix } => format!("{}{suffix}", bytes.div_ceil(*size)),
        };
        let term = if self.o.null { '\0' } else { '\n' };
        if let Err(err) = write!(self.out, "{size}\t{}{term}", name.display()) {
            self.write_error = Some(err);
        }
    }

    /// Whether this file was counted before; records it otherwise.
    fn already_counted(&mut self, e: &Entry) -> bool {
        if self.o.count_links || !(self.hash_all || (!e.is_dir && e.nlink > 1)) {
            return false;
        }
        match e.id {
            Some(id) => !self.seen.insert(id),
            None => false,
        }
    }

    /// Counts `path` (already probed as `e`) and everything below it; prints what the options
    /// ask for. Returns the bytes counted.
    fn visit(&mut self, path: &Path, e: &Entry, depth: usize, dev: Option<u64>) -> u64 {
        let mut bytes = if self.o.apparent { e.apparent } else { e.disk };
        if e.is_dir {
            match std::fs::read_dir(path) {
                Ok(rd) => {
                    let mut names: Vec<OsString> = Vec::new();
                    for ent in rd {
                        match ent {
                            Ok(ent) => names.push(ent.file_name()),
                            Err(err) => self.fail("cannot read directory", path, &err),
                        }
                    }
                    names.sort();
                    for name in names {
                        if self.write_error.is_some() {
                            break;
                        }
                        let child = child_path(path, &name);
                        let ce = match probe(&child, false) {
                            Ok(ce) => ce,
                            Err(err) => {
                                self.fail("cannot access", &child, &err);
                                continue;
                            }
                        };
                        if self.o.one_fs
                            && ce.is_dir
                            && let (Some(d), Some((cd, _))) = (dev, ce.id)
                            && d != cd
                        {
                            continue;
                        }
                        if self.already_counted(&ce) {
                            continue;
                        }
                        bytes += self.visit(&child, &ce, depth + 1, dev);
                    }
                }
                Err(err) => self.fail("cannot read directory", path, &err),
            }
        }
        let within = self.o.max_depth.is_none_or(|m| depth <= m);
        if within && (depth == 0 || e.is_dir || self.o.all) {
            self.show(bytes, path);
        }
        bytes
    }

    fn fail(&mut self, what: &str, path: &Path, err: &io::Error) {
        eprintln!("du: {what} '{}': {}", path.display(), errno_text(err));
        self.ok = false;
    }

    /// One command-line operand: returns the bytes it adds to the grand total.
    fn operand(&mut self, name: &str) -> u64 {
        // Like GNU's fts, two or more trailing slashes are printed as one (`d//` as `d/`).
        let mut len = name.len();
        if len > 2 && name.ends_with('/') {
            while len > 1 && name.as_bytes()[len - 2] == b'/' {
                len -= 1;
            }
        }
        let label = Path::new(&name[..len]);
        let e = match probe(label, self.o.deref_args) {
            Ok(e) => e,
            Err(err) => {
                self.fail("cannot access", label, &err);
                return 0;
            }
        };
        if self.already_counted(&e) {
            return 0;
        }
        self.visit(label, &e, 0, e.id.map(|(d, _)| d))
    }
}

const USAGE: &str = "Usage: du [OPTION]... [FILE]...
Summarize disk usage of each FILE, recursively for directories.

  -0, --null            end each output line with NUL, not newline
  -a, --all             write counts for all files, not just directories
      --apparent-size   print apparent sizes rather than disk usage
  -B, --block-size=SIZE  scale sizes by SIZE before printing them (K, M, G, KB, MB, ...)
  -b, --bytes           equivalent to '--apparent-size --block-size=1'
  -c, --total           produce a grand total
  -D, -H, --dereference-args  dereference symlinks listed on the command line
  -d, --max-depth=N     print the total for a directory only if it is N or fewer
                          levels below the command line argument
  -h, --human-readable  print sizes in human readable format (e.g., 1K 234M 2G)
      --si              like -h, but use powers of 1000 not 1024
  -k                    like --block-size=1K
  -m                    like --block-size=1M
  -l, --count-links     count sizes many times if hard linked
  -P, --no-dereference  don't follow any symbolic links (this is the default)
  -s, --summarize       display only a total for each argument
  -x, --one-file-system  skip directories on different file systems
      --help            display this help and exit

Under WASI disk usage is estimated from the apparent size (4 KiB blocks).
";

const LONG: &[&str] = &[
    "all",
    "apparent-size",
    "block-size",
    "bytes",
    "total",
    "dereference-args",
    "max-depth",
    "human-readable",
    "si",
    "count-links",
    "no-dereference",
    "null",
    "summarize",
    "one-file-system",
    "help",
    "version",
    // GNU options this du does not implement; named so they get a clear message.
    "dereference",
    "exclude",
    "exclude-from",
    "files0-from",
    "inodes",
    "separate-dirs",
    "threshold",
    "time",
    "time-style",
];

fn try_help() -> i32 {
    eprintln!("Try 'du --help' for more information.");
    1
}

pub fn uumain(args: std::vec::IntoIter<OsString>) -> i32 {
    let args: Vec<String> = args.map(|a| a.to_string_lossy().into_owned()).collect();
    let mut o = Opts {
        all: false,
        max_depth: None,
        apparent: false,
        unit: Unit::Blocks {
            size: 1024,
            suffix: String::new(),
        },
        total: false,
        null: false,
        count_links: false,
        one_fs: false,
        deref_args: false,
    };
    let mut summarize = false;
    let mut files: Vec<String> = Vec::new();
    let mut only_files = false;
    let mut i = 1;
    while i < args.len() {
        let a = &args[i];
        i += 1;
        if only_files || a == "-" || !a.starts_with('-') {
            files.push(a.clone());
            continue;
        }
        if a == "--" {
            only_files = true;
            continue;
        }
        // (option letter or long name, value if it takes one)
        let mut opts: Vec<(String, Option<String>)> = Vec::new();
        if let Some(long) = a.strip_prefix("--") {
            let (name, inline) = match long.split_once('=') {
                Some((n, v)) => (n, Some(v.to_string())),
                None => (long, None),
            };
            // getopt_long accepts any unambiguous prefix.
            let full = match LONG.iter().find(|l| **l == name) {
                Some(l) => *l,
                None => {
                    let hits: Vec<&&str> = LONG.iter().filter(|l| l.starts_with(name)).collect();
                    match hits.as_slice() {
                        [one] => **one,
                        [] => {
                            eprintln!("du: unrecognized option '{a}'");
                            return try_help();
                        }
                        _ => {
                            eprintln!("du: option '{a}' is ambiguous");
                            return try_help();
                        }
                    }
                }
            };
            let value = if full == "max-depth" || full == "block-size" {
                match inline {
                    Some(v) => Some(v),
                    None if i < args.len() => {
                        i += 1;
                        Some(args[i - 1].clone())
                    }
                    None => {
                        eprintln!("du: option '--{full}' requires an argument");
                        return try_help();
                    }
                }
            } else if inline.is_some() && !matches!(full, "exclude" | "time" | "threshold") {
                eprintln!("du: option '--{full}' doesn't allow an argument");
                return try_help();
            } else {
                None
            };
            opts.push((full.to_string(), value));
        } else {
            let cluster: Vec<char> = a[1..].chars().collect();
            let mut k = 0;
            while k < cluster.len() {
                let c = cluster[k];
                k += 1;
                if c == 'd' || c == 'B' {
                    let rest: String = cluster[k..].iter().collect();
                    let value = if !rest.is_empty() {
                        rest
                    } else if i < args.len() {
                        i += 1;
                        args[i - 1].clone()
                    } else {
                        eprintln!("du: option requires an argument -- '{c}'");
                        return try_help();
                    };
                    opts.push((c.to_string(), Some(value)));
                    break;
                }
                opts.push((c.to_string(), None));
            }
        }
        for (name, value) in opts {
            match name.as_str() {
                "0" | "null" => o.null = true,
                "a" | "all" => o.all = true,
                "apparent-size" => o.apparent = true,
                "b" | "bytes" => {
                    o.apparent = true;
                    o.unit = Unit::Blocks {
                        size: 1,
                        suffix: String::new(),
                    };
                }
                "c" | "total" => o.total = true,
                "D" | "H" | "dereference-args" => o.deref_args = true,
                "P" | "no-dereference" => o.deref_args = false,
                "h" | "human-readable" => o.unit = Unit::Human { base: 1024 },
                "si" => o.unit = Unit::Human { base: 1000 },
                "k" | "m" => {
                    o.unit = Unit::Blocks {
                        size: if name == "k" { 1024 } else { 1024 * 1024 },
                        suffix: String::new(),
                    }
                }
                "l" | "count-links" => o.count_links = true,
                "s" | "summarize" => summarize = true,
                "x" | "one-file-system" => o.one_fs = true,
                "d" | "max-depth" => {
                    let v = value.unwrap_or_default();
                    match v.parse::<usize>() {
                        Ok(n) => o.max_depth = Some(n),
                        Err(_) => {
                            eprintln!("du: invalid maximum depth '{v}'");
                            return try_help();
                        }
                    }
                }
                "B" | "block-size" => {
                    let v = value.unwrap_or_default();
                    match parse_block_size(&v) {
                        Some(u) => o.unit = u,
                        None => {
                            let flag = if name == "B" { "-B" } else { "--block-size" };
                            eprintln!("du: invalid {flag} argument '{v}'");
                            return 1;
                        }
                    }
                }
                "help" => {
                    print!("{USAGE}");
                    return 0;
                }
                "version" => {
                    println!("du (wasmsand coreutils) 0.1.0");
                    return 0;
                }
                _ if name.len() > 1 || "LStX".contains(name.as_str()) => {
                    let shown = if name.len() > 1 {
                        format!("--{name}")
                    } else {
                        format!("-{name}")
                    };
                    eprintln!("du: {shown} is not supported in this sandbox");
                    return 1;
                }
                _ => {
                    eprintln!("du: invalid option -- '{name}'");
                    return try_help();
                }
            }
        }
    }
    if summarize {
        if o.all {
            eprintln!("du: cannot both summarize and show all entries");
            return try_help();
        }
        match o.max_depth {
            Some(n) if n != 0 => {
                eprintln!("du: warning: summarizing conflicts with --max-depth={n}");
                return try_help();
            }
            _ => o.max_depth = Some(0),
        }
    }
    if files.is_empty() {
        files.push(".".into());
    }

    let mut du = Du {
        hash_all: files.len() > 1,
        o,
        out: BufWriter::new(io::stdout().lock()),
        seen: HashSet::new(),
        ok: true,
        write_error: None,
    };
    let mut grand = 0;
    for f in &files {
        grand += du.operand(f);
    }
    if du.o.total {
        du.show(grand, Path::new("total"));
    }
    if du.write_error.is_none()
        && let Err(err) = du.out.flush()
    {
        du.write_error = Some(err);
    }
    match du.write_error {
        // A reader that went away (`du | head`) is not an error worth reporting.
        Some(err) if err.kind() == io::ErrorKind::BrokenPipe => i32::from(!du.ok),
        Some(err) => {
            eprintln!("du: write error: {}", errno_text(&err));
            1
        }
        None => i32::from(!du.ok),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn human_matches_gnu() {
        // Reference values from GNU du 9.1 `-h --apparent-size` / `--si --apparent-size`.
        let cases = [
            (0, "0", "0"),
            (1023, "1023", "1.1k"),
            (1024, "1.0K", "1.1k"),
            (1025, "1.1K", "1.1k"),
            (1536, "1.5K", "1.6k"),
            (10239, "10K", "11k"),
            (10240, "10K", "11k"),
            (10241, "11K", "11k"),
            (12000, "12K", "12k"),
            (1048575, "1.0M", "1.1M"),
            (1048576, "1.0M", "1.1M"),
            (1100000, "1.1M", "1.1M"),
            (10485759, "10M", "11M"),
            (1073741823, "1.0G", "1.1G"),
        ];
        for (n, h, si) in cases {
            assert_eq!(human(n, 1024), h, "{n}");
            assert_eq!(human(n, 1000), si, "{n}");
        }
    }

    #[test]
    fn block_sizes() {
        let b = |s| match parse_block_size(s) {
            Some(Unit::Blocks { size, suffix }) => Some((size, suffix)),
            _ => None,
        };
        assert_eq!(b("M"), Some((1 << 20, "M".into())));
        assert_eq!(b("1M"), Some((1 << 20, String::new())));
        assert_eq!(b("KB"), Some((1000, "kB".into())));
        assert_eq!(b("2KiB"), Some((2048, String::new())));
        assert_eq!(b("512"), Some((512, String::new())));
        assert_eq!(b("0"), None);
        assert_eq!(b("x"), None);
    }
}
