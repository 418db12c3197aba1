//! ls, written here because uu_ls 0.12 under WASI cannot know what the sandbox holds: it shows
//! every file as `r-xr-xr-x`, owned by `somebody somegroup`, with a made-up `total`. This one
//! takes the type, links, inode and times from wasi-libc's `stat`, the permission bits from the
//! host (`guest_rt::path_mode`), and lays them out as GNU ls does in the C.UTF-8 locale when
//! its output is not a terminal: one name per line unless `-C`, `-x` or `-m` asks otherwise,
//! names unquoted, no colour.

use std::cmp::Ordering;
use std::io::{self, Write};
#[cfg(target_os = "wasi")]
use std::path::Path;

use crate::stat::perm_string;
use crate::time_fmt;

const HELP: &str = "\
Usage: ls [OPTION]... [FILE]...
List information about the FILEs (the current directory by default).
Sort entries alphabetically if none of -cftuvSUX nor --sort is specified.

  -a, --all                  do not ignore entries starting with .
  -A, --almost-all           do not list implied . and ..
  -B, --ignore-backups       do not list implied entries ending with ~
  -c                         with -lt: sort by, and show, ctime; with -l: show ctime
  -C                         list entries by columns
  -d, --directory            list directories themselves, not their contents
  -f                         list all entries in directory order (-aU)
  -F, --classify             append indicator (one of */=@|) to entries
      --file-type            likewise, except do not append '*'
      --format=WORD          across -x, commas -m, long -l, single-column -1, vertical -C
      --full-time            like -l --time-style=full-iso
  -g                         like -l, but do not list owner
      --group-directories-first
                             group directories before files
  -G, --no-group             in a long listing, don't print group names
  -h, --human-readable       with -l and -s, print sizes like 1K 234M 2G etc.
      --si                   likewise, but use powers of 1000 not 1024
  -H, --dereference-command-line
                             follow symbolic links listed on the command line
  -i, --inode                print the index number of each file
  -I, --ignore=PATTERN       do not list implied entries matching shell PATTERN
  -l                         use a long listing format
  -L, --dereference          show information for the file a symbolic link references
  -m                         fill width with a comma separated list of entries
  -n, --numeric-uid-gid      like -l, but list numeric user and group IDs
  -N, --literal              print entry names without quoting
  -o                         like -l, but do not list group information
  -p, --indicator-style=slash
                             append / indicator to directories
  -Q, --quote-name           enclose entry names in double quotes
  -r, --reverse              reverse order while sorting
  -R, --recursive            list subdirectories recursively
  -s, --size                 print the allocated size of each file, in blocks
  -S                         sort by file size, largest first
      --sort=WORD            none (-U), size (-S), time (-t), version (-v), extension (-X)
      --time=WORD            atime (-u), ctime (-c), mtime (default)
      --time-style=STYLE     full-iso, long-iso, iso, locale, or +FORMAT
  -t                         sort by time, newest first
  -u                         with -lt: sort by, and show, access time
  -U                         do not sort; list entries in directory order
  -v                         natural sort of (version) numbers within text
  -w, --width=COLS           set output width to COLS (0 means no limit)
  -x                         list entries by lines instead of by columns
  -X                         sort alphabetically by entry extension
  -1                         list one file per line
      --color[=WHEN]         accepted; output is never coloured here
      --help                 display this help and exit
      --version              output version information and exit

Exit status: 0 if OK, 1 if minor problems (e.g., cannot access subdirectory),
2 if serious trouble (e.g., cannot access command-line argument).

Permission bits are the sandbox's own (chmod, write_file modes); every file is owned by
root (uid 0). Block counts are estimated from sizes (4 KiB blocks) since WASI has none.
";

#[derive(Clone, Copy, PartialEq)]
enum Format {
    OnePerLine,
    Columns,
    Across,
    Commas,
    Long,
}

#[derive(Clone, Copy, PartialEq)]
enum Sort {
    Name,
    None,
    Size,
    Time,
    Version,
    Extension,
}

#[derive(Clone, Copy, PartialEq)]
enum TimeKind {
    Modified,
    Accessed,
    Changed,
}

#[derive(Clone, Copy, PartialEq)]
enum Indicator {
    None,
    Slash,
    FileType,
    Classify,
}

#[derive(Clone, Copy, PartialEq)]
enum Hidden {
    Default,
    AlmostAll,
    All,
}

struct Opts {
    format: Format,
    sort: Sort,
    reverse: bool,
    time: TimeKind,
    hidden: Hidden,
    ignore_backups: bool,
    ignore: Vec<String>,
    directory: bool,
    recursive: bool,
    indicator: Indicator,
    human: Option<u64>,
    inode: bool,
    size: bool,
    numeric: bool,
    show_owner: bool,
    show_group: bool,
    deref_all: bool,
    deref_args: bool,
    quote: bool,
    dirs_first: bool,
    time_style: String,
    width: usize,
}

/// What `stat` says of one file, in the shape the listing needs.
#[derive(Clone)]
struct St {
    /// Type and permission bits, as `st_mode`.
    mode: u32,
    nlink: u64,
    ino: u64,
    size: u64,
    uid: u32,
    gid: u32,
    rdev: u64,
    /// 512-byte blocks.
    blocks: u64,
    mtime: (i64, u32),
    atime: (i64, u32),
    ctime: (i64, u32),
}

const S_IFMT: u32 = 0o170000;
const S_IFDIR: u32 = 0o040000;
const S_IFLNK: u32 = 0o120000;
const S_IFREG: u32 = 0o100000;
const S_IFCHR: u32 = 0o020000;
const S_IFBLK: u32 = 0o060000;
const S_IFIFO: u32 = 0o010000;
const S_IFSOCK: u32 = 0o140000;

impl St {
    fn kind(&self) -> u32 {
        self.mode & S_IFMT
    }
    fn is_dir(&self) -> bool {
        self.kind() == S_IFDIR
    }
    fn is_link(&self) -> bool {
        self.kind() == S_IFLNK
    }
}

#[cfg(unix)]
fn stat(path: &str, follow: bool) -> io::Result<St> {
    use std::os::unix::fs::MetadataExt;
    let m = if follow {
        std::fs::metadata(path)?
    } else {
        std::fs::symlink_metadata(path)?
    };
    Ok(St {
        mode: m.mode(),
        nlink: m.nlink(),
        ino: m.ino(),
        size: m.size(),
        uid: m.uid(),
        gid: m.gid(),
        rdev: m.rdev(),
        blocks: m.blocks(),
        mtime: (m.mtime(), m.mtime_nsec() as u32),
        atime: (m.atime(), m.atime_nsec() as u32),
        ctime: (m.ctime(), m.ctime_nsec() as u32),
    })
}

#[cfg(target_os = "wasi")]
fn stat(path: &str, follow: bool) -> io::Result<St> {
    let st = guest_rt::wasi_stat(path.as_bytes(), follow)?;
    let kind = st.st_mode & S_IFMT;
    let (perm, nlink) = guest_rt::path_meta(Path::new(path), follow).unwrap_or((
        match kind {
            S_IFDIR => 0o755,
            S_IFLNK => 0o777,
            _ => 0o644,
        },
        st.st_nlink,
    ));
    let size = st.st_size as u64;
    // WASI has no block counts: allocate as ext4 would, in 4 KiB blocks.
    let blocks = match kind {
        S_IFREG => size.div_ceil(4096) * 8,
        S_IFDIR => 8,
        _ => 0,
    };
    Ok(St {
        mode: kind | perm,
        nlink,
        ino: st.st_ino,
        size,
        uid: 0,
        gid: 0,
        rdev: 0,
        blocks,
        mtime: (st.st_mtim.tv_sec, st.st_mtim.tv_nsec as u32),
        atime: (st.st_atim.tv_sec, st.st_atim.tv_nsec as u32),
        ctime: (st.st_ctim.tv_sec, st.st_ctim.tv_nsec as u32),
    })
}

#[cfg(not(any(unix, target_os = "wasi")))]
fn stat(_path: &str, _follow: bool) -> io::Result<St> {
    Err(io::Error::from(io::ErrorKind::Unsupported))
}

/// One name to list, with what stat said (`None` when it could not be read).
struct Entry {
    /// As shown: the argument as typed, or the name inside its directory.
    name: String,
    /// Where it is, for stat and for descending.
    path: String,
    st: Option<St>,
    /// Where a symlink points, and what that is.
    target: Option<(String, Option<St>)>,
}

fn errno_text(e: &io::Error) -> String {
    // By kind, not number: WASI's errno values differ from Linux's.
    match e.kind() {
        io::ErrorKind::NotFound => "No such file or directory".into(),
        io::ErrorKind::PermissionDenied => "Permission denied".into(),
        io::ErrorKind::NotADirectory => "Not a directory".into(),
        _ => {
            let s = e.to_string();
            s.split(" (os error").next().unwrap_or(&s).to_string()
        }
    }
}

fn parse(args: &[String]) -> Result<(Opts, Vec<String>), String> {
    let mut o = Opts {
        format: Format::OnePerLine,
        sort: Sort::Name,
        reverse: false,
        time: TimeKind::Modified,
        hidden: Hidden::Default,
        ignore_backups: false,
        ignore: Vec::new(),
        directory: false,
        recursive: false,
        indicator: Indicator::None,
        human: None,
        inode: false,
        size: false,
        numeric: false,
        show_owner: true,
        show_group: true,
        deref_all: false,
        deref_args: false,
        quote: false,
        dirs_first: false,
        time_style: "locale".into(),
        width: std::env::var("COLUMNS")
            .ok()
            .and_then(|c| c.parse().ok())
            .filter(|w| *w > 0)
            .unwrap_or(80),
    };
    let mut files = Vec::new();
    let mut only_files = false;
    let mut i = 0;
    let set_long = |o: &mut Opts| o.format = Format::Long;
    while i < args.len() {
        let a = args[i].clone();
        i += 1;
        if only_files || a == "-" || !a.starts_with('-') {
            files.push(a);
            continue;
        }
        if a == "--" {
            only_files = true;
            continue;
        }
        if let Some(long) = a.strip_prefix("--") {
            let (name, inline) = match long.split_once('=') {
                Some((n, v)) => (n, Some(v.to_string())),
                None => (long, None),
            };
            let mut value = |what: &str| -> Result<String, String> {
                if let Some(v) = inline.clone() {
                    return Ok(v);
                }
                let v = args
                    .get(i)
                    .cloned()
                    .ok_or_else(|| format!("option '--{what}' requires an argument"))?;
                i += 1;
                Ok(v)
            };
            // Unambiguous prefixes are accepted, as getopt_long does.
            const LONGS: &[&str] = &[
                "all",
                "almost-all",
                "ignore-backups",
                "classify",
                "color",
                "directory",
                "dereference",
                "dereference-command-line",
                "file-type",
                "format",
                "full-time",
                "group-directories-first",
                "help",
                "human-readable",
                "ignore",
                "indicator-style",
                "inode",
                "literal",
                "no-group",
                "numeric-uid-gid",
                "quote-name",
                "recursive",
                "reverse",
                "si",
                "size",
                "sort",
                "time",
                "time-style",
                "version",
                "width",
            ];
            let full = if LONGS.contains(&name) {
                name.to_string()
            } else {
                let m: Vec<&&str> = LONGS.iter().filter(|l| l.starts_with(name)).collect();
                match m.as_slice() {
                    [one] => one.to_string(),
                    [] => return Err(format!("unrecognized option '--{name}'")),
                    _ => return Err(format!("option '--{name}' is ambiguous")),
                }
            };
            match full.as_str() {
                "all" => o.hidden = Hidden::All,
                "almost-all" => o.hidden = Hidden::AlmostAll,
                "ignore-backups" => o.ignore_backups = true,
                "classify" => o.indicator = Indicator::Classify,
                "file-type" => o.indicator = Indicator::FileType,
                "color" => {}
                "directory" => o.directory = true,
                "dereference" => o.deref_all = true,
                "dereference-command-line" => o.deref_args = true,
                "format" => {
                    o.format = match value("format")?.as_str() {
                        "long" | "verbose" => Format::Long,
                        "single-column" => Format::OnePerLine,
                        "vertical" => Format::Columns,
                        "across" | "horizontal" => Format::Across,
                        "commas" => Format::Commas,
                        v => return Err(format!("invalid argument '{v}' for '--format'")),
                    }
                }
                "full-time" => {
                    set_long(&mut o);
                    o.time_style = "full-iso".into();
                }
                "group-directories-first" => o.dirs_first = true,
                "help" => return Err(String::new()),
                "human-readable" => o.human = Some(1024),
                "si" => o.human = Some(1000),
                "ignore" => o.ignore.push(value("ignore")?),
                "indicator-style" => {
                    o.indicator = match value("indicator-style")?.as_str() {
                        "none" => Indicator::None,
                        "slash" => Indicator::Slash,
                        "file-type" => Indicator::FileType,
                        "classify" => Indicator::Classify,
                        v => return Err(format!("invalid argument '{v}' for '--indicator-style'")),
                    }
                }
                "inode" => o.inode = true,
                "literal" => o.quote = false,
                "no-group" => o.show_group = false,
                "numeric-uid-gid" => {
                    set_long(&mut o);
                    o.numeric = true;
                }
                "quote-name" => o.quote = true,
                "recursive" => o.recursive = true,
                "reverse" => o.reverse = true,
                "size" => o.size = true,
                "sort" => {
                    o.sort = match value("sort")?.as_str() {
                        "none" => Sort::None,
                        "size" => Sort::Size,
                        "time" => Sort::Time,
                        "version" => Sort::Version,
                        "extension" => Sort::Extension,
                        "name" => Sort::Name,
                        v => return Err(format!("invalid argument '{v}' for '--sort'")),
                    }
                }
                "time" => {
                    o.time = match value("time")?.as_str() {
                        "atime" | "access" | "use" => TimeKind::Accessed,
                        "ctime" | "status" => TimeKind::Changed,
                        "mtime" | "modification" => TimeKind::Modified,
                        v => return Err(format!("invalid argument '{v}' for '--time'")),
                    }
                }
                "time-style" => {
                    let v = value("time-style")?;
                    let v = v.strip_prefix("posix-").unwrap_or(&v).to_string();
                    if !(v.starts_with('+')
                        || matches!(v.as_str(), "full-iso" | "long-iso" | "iso" | "locale"))
                    {
                        return Err(format!("invalid argument '{v}' for '--time-style'"));
                    }
                    o.time_style = v;
                }
                "version" => {
                    println!("ls (wasmsand coreutils) 9.4");
                    return Err("\u{0}".into());
                }
                "width" => o.width = parse_width(&value("width")?)?,
                _ => unreachable!("every long option is matched"),
            }
            continue;
        }
        let flags: Vec<char> = a[1..].chars().collect();
        let mut k = 0;
        while k < flags.len() {
            let c = flags[k];
            k += 1;
            // Options with an argument take the rest of this word, or the next one.
            let mut arg = |what: char| -> Result<String, String> {
                let rest: String = flags[k..].iter().collect();
                k = flags.len();
                if !rest.is_empty() {
                    return Ok(rest);
                }
                let v = args
                    .get(i)
                    .cloned()
                    .ok_or_else(|| format!("option requires an argument -- '{what}'"))?;
                i += 1;
                Ok(v)
            };
            match c {
                'a' => o.hidden = Hidden::All,
                'A' => o.hidden = Hidden::AlmostAll,
                'B' => o.ignore_backups = true,
                'c' => o.time = TimeKind::Changed,
                'C' => o.format = Format::Columns,
                'd' => o.directory = true,
                'f' => {
                    o.hidden = Hidden::All;
                    o.sort = Sort::None;
                }
                'F' => o.indicator = Indicator::Classify,
                'g' => {
                    set_long(&mut o);
                    o.show_owner = false;
                }
                'G' => o.show_group = false,
                'h' => o.human = Some(1024),
                'H' => o.deref_args = true,
                'i' => o.inode = true,
                'I' => o.ignore.push(arg('I')?),
                'l' => set_long(&mut o),
                'L' => o.deref_all = true,
                'm' => o.format = Format::Commas,
                'n' => {
                    set_long(&mut o);
                    o.numeric = true;
                }
                'N' => o.quote = false,
                'o' => {
                    set_long(&mut o);
                    o.show_group = false;
                }
                'p' => o.indicator = Indicator::Slash,
                'q' | 'b' | 'T' | 'k' | 'Z' => {}
                'Q' => o.quote = true,
                'r' => o.reverse = true,
                'R' => o.recursive = true,
                's' => o.size = true,
                'S' => o.sort = Sort::Size,
                't' => o.sort = Sort::Time,
                'u' => o.time = TimeKind::Accessed,
                'U' => o.sort = Sort::None,
                'v' => o.sort = Sort::Version,
                'w' => o.width = parse_width(&arg('w')?)?,
                'x' => o.format = Format::Across,
                'X' => o.sort = Sort::Extension,
                '1' => o.format = Format::OnePerLine,
                _ => return Err(format!("invalid option -- '{c}'")),
            }
        }
    }
    Ok((o, files))
}

fn parse_width(v: &str) -> Result<usize, String> {
    v.parse::<usize>()
        .map(|w| if w == 0 { usize::MAX } else { w })
        .map_err(|_| format!("invalid line width: '{v}'"))
}

pub fn uumain(args: std::vec::IntoIter<std::ffi::OsString>) -> i32 {
    let args: Vec<String> = args
        .skip(1)
        .map(|a| a.to_string_lossy().into_owned())
        .collect();
    let (opts, mut files) = match parse(&args) {
        Ok(v) => v,
        Err(e) if e.is_empty() => {
            print!("{HELP}");
            return 0;
        }
        Err(e) if e == "\u{0}" => return 0,
        Err(e) => {
            eprintln!("ls: {e}\nTry 'ls --help' for more information.");
            return 2;
        }
    };
    if files.is_empty() {
        files.push(".".into());
    }
    let mut out = io::BufWriter::with_capacity(64 * 1024, io::stdout().lock());
    let mut status = 0;
    let mut lister = Lister {
        o: &opts,
        now: std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_secs() as i64),
        status: &mut status,
    };
    let r = lister.main(&mut out, files);
    let flushed = out.flush();
    if let Err(e) = r.and(flushed) {
        if e.kind() == io::ErrorKind::BrokenPipe {
            return 141;
        }
        eprintln!("ls: write error: {}", errno_text(&e));
        return 2;
    }
    status
}

struct Lister<'a> {
    o: &'a Opts,
    now: i64,
    status: &'a mut i32,
}

impl Lister<'_> {
    fn fail(&mut self, code: i32) {
        *self.status = (*self.status).max(code);
    }

    fn main(&mut self, out: &mut impl Write, args: Vec<String>) -> io::Result<()> {
        let mut plain = Vec::new();
        let mut dirs = Vec::new();
        // GNU's rule: links named on the command line are followed with -L/-H; without them,
        // only a link to a directory is, and not at all under -l, -d or -F.
        let follow_all = self.o.deref_all || self.o.deref_args;
        let follow_dirs = !(self.o.format == Format::Long
            || self.o.directory
            || self.o.indicator == Indicator::Classify);
        for a in &args {
            let st = match stat(a, false) {
                Ok(st) => st,
                Err(e) => {
                    out.flush()?;
                    eprintln!("ls: cannot access '{a}': {}", errno_text(&e));
                    self.fail(2);
                    continue;
                }
            };
            let st = if st.is_link() && (follow_all || follow_dirs) {
                match stat(a, true) {
                    Ok(t) if follow_all || t.is_dir() => t,
                    _ => st,
                }
            } else {
                st
            };
            let entry = self.entry(a.clone(), a.clone(), Some(st));
            if entry.st.as_ref().is_some_and(St::is_dir) && !self.o.directory {
                dirs.push(entry);
            } else {
                plain.push(entry);
            }
        }
        self.sort(&mut plain);
        self.sort(&mut dirs);
        let headers = args.len() > 1 || self.o.recursive;
        let mut first = true;
        if !plain.is_empty() {
            self.print_entries(out, &plain, false)?;
            first = false;
        }
        for d in dirs {
            self.list_dir(out, &d.path, &d.name, headers, &mut first)?;
        }
        Ok(())
    }

    fn entry(&self, name: String, path: String, st: Option<St>) -> Entry {
        let target = match &st {
            Some(s) if s.is_link() => std::fs::read_link(&path).ok().map(|t| {
                let t = t.to_string_lossy().into_owned();
                (t, stat(&path, true).ok())
            }),
            _ => None,
        };
        Entry {
            name,
            path,
            st,
            target,
        }
    }

    fn list_dir(
        &mut self,
        out: &mut impl Write,
        path: &str,
        shown: &str,
        header: bool,
        first: &mut bool,
    ) -> io::Result<()> {
        let read = match std::fs::read_dir(path) {
            Ok(r) => r,
            Err(e) => {
                out.flush()?;
                eprintln!("ls: cannot open directory '{shown}': {}", errno_text(&e));
                self.fail(if *first && !header { 2 } else { 1 });
                return Ok(());
            }
        };
        if header {
            if !*first {
                writeln!(out)?;
            }
            writeln!(out, "{shown}:")?;
        }
        *first = false;
        let mut entries = Vec::new();
        if self.o.hidden == Hidden::All {
            for dot in [".", ".."] {
                if !self.shown(dot) {
                    continue;
                }
                let p = join(path, dot);
                let st = stat(&p, true).ok();
                entries.push(self.entry(dot.into(), p, st));
            }
        }
        for de in read {
            let de = match de {
                Ok(d) => d,
                Err(e) => {
                    out.flush()?;
                    eprintln!("ls: reading directory '{shown}': {}", errno_text(&e));
                    self.fail(1);
                    continue;
                }
            };
            let name = de.file_name().to_string_lossy().into_owned();
            if !self.shown(&name) {
                continue;
            }
            let p = join(path, &name);
            let st = match stat(&p, self.o.deref_all).or_else(|_| stat(&p, false)) {
                Ok(st) => Some(st),
                Err(e) => {
                    out.flush()?;
                    eprintln!(
                        "ls: cannot access '{}': {}",
                        join(shown, &name),
                        errno_text(&e)
                    );
                    self.fail(1);
                    None
                }
            };
            entries.push(self.entry(name, p, st));
        }
        self.sort(&mut entries);
        if self.o.format == Format::Long || self.o.size {
            let blocks: u64 = entries
                .iter()
                .filter_map(|e| e.st.as_ref())
                .map(|s| s.blocks)
                .sum();
            let total = match self.o.human {
                Some(base) => human(blocks * 512, base),
                None => blocks.div_ceil(2).to_string(),
            };
            writeln!(out, "total {total}")?;
        }
        self.print_entries(out, &entries, true)?;
        if self.o.recursive {
            for e in &entries {
                if e.name == "." || e.name == ".." {
                    continue;
                }
                if e.st.as_ref().is_some_and(St::is_dir) {
                    self.list_dir(out, &e.path, &join(shown, &e.name), true, first)?;
                }
            }
        }
        Ok(())
    }

    fn shown(&self, name: &str) -> bool {
        if name.starts_with('.') && self.o.hidden == Hidden::Default {
            return false;
        }
        if self.o.ignore_backups && name.ends_with('~') {
            return false;
        }
        // -a overrides neither -B nor -I in GNU ls.
        !self
            .o
            .ignore
            .iter()
            .any(|p| glob(p.as_bytes(), name.as_bytes()))
    }

    fn time_of(&self, s: &St) -> (i64, u32) {
        match self.o.time {
            TimeKind::Modified => s.mtime,
            TimeKind::Accessed => s.atime,
            TimeKind::Changed => s.ctime,
        }
    }

    fn sort(&self, v: &mut [Entry]) {
        let o = self.o;
        if o.sort == Sort::None {
            if o.reverse {
                v.reverse();
            }
            return;
        }
        let by_name = |a: &Entry, b: &Entry| a.name.as_bytes().cmp(b.name.as_bytes());
        v.sort_by(|a, b| {
            let ord = match o.sort {
                Sort::Name | Sort::None => Ordering::Equal,
                Sort::Size => {
                    let (x, y) = (size_of(a), size_of(b));
                    y.cmp(&x)
                }
                Sort::Time => {
                    let t = |e: &Entry| e.st.as_ref().map(|s| self.time_of(s)).unwrap_or_default();
                    t(b).cmp(&t(a))
                }
                Sort::Version => version_cmp(&a.name, &b.name),
                Sort::Extension => ext(&a.name).cmp(ext(&b.name)),
            };
            let ord = ord.then_with(|| by_name(a, b));
            if o.reverse { ord.reverse() } else { ord }
        });
        if o.dirs_first {
            // Stable: keeps the order just made inside each group.
            v.sort_by_key(|e| !e.st.as_ref().is_some_and(St::is_dir));
        }
    }

    fn indicator(&self, st: Option<&St>) -> &'static str {
        let Some(s) = st else { return "" };
        match (self.o.indicator, s.kind()) {
            (Indicator::None, _) => "",
            (_, S_IFDIR) => "/",
            (Indicator::Slash, _) => "",
            (_, S_IFLNK) => "@",
            (_, S_IFIFO) => "|",
            (_, S_IFSOCK) => "=",
            (Indicator::Classify, S_IFREG) if s.mode & 0o111 != 0 => "*",
            _ => "",
        }
    }

    fn display_name(&self, e: &Entry) -> String {
        let name = if self.o.quote {
            format!("\"{}\"", e.name.replace('\\', "\\\\").replace('"', "\\\""))
        } else {
            e.name.clone()
        };
        // In a long listing a link shows its target, and the indicator goes to the target.
        if self.o.format == Format::Long
            && let Some((t, tst)) = &e.target
        {
            let t = if self.o.quote {
                format!("\"{t}\"")
            } else {
                t.clone()
            };
            let ind = match tst {
                Some(ts) => self.indicator(Some(ts)),
                None => "",
            };
            return format!("{name} -> {t}{ind}");
        }
        format!("{name}{}", self.indicator(e.st.as_ref()))
    }

    fn print_entries(&self, out: &mut impl Write, v: &[Entry], _in_dir: bool) -> io::Result<()> {
        if v.is_empty() {
            return Ok(());
        }
        if self.o.format == Format::Long {
            return self.print_long(out, v);
        }
        let ino_w = if self.o.inode {
            v.iter()
                .map(|e| e.st.as_ref().map_or(1, |s| s.ino.to_string().len()))
                .max()
                .unwrap_or(1)
        } else {
            0
        };
        let blk_w = if self.o.size {
            v.iter()
                .map(|e| self.blocks_text(e).len())
                .max()
                .unwrap_or(1)
        } else {
            0
        };
        let cells: Vec<String> = v
            .iter()
            .map(|e| {
                let mut c = String::new();
                if self.o.inode {
                    let ino = e.st.as_ref().map_or("?".into(), |s| s.ino.to_string());
                    c.push_str(&format!("{ino:>ino_w$} "));
                }
                if self.o.size {
                    c.push_str(&format!("{:>blk_w$} ", self.blocks_text(e)));
                }
                c.push_str(&self.display_name(e));
                c
            })
            .collect();
        match self.o.format {
            Format::Columns | Format::Across => {
                self.print_grid(out, &cells, self.o.format == Format::Across)
            }
            Format::Commas => {
                let mut col = 0;
                for (i, c) in cells.iter().enumerate() {
                    let last = i + 1 == cells.len();
                    let piece = if last { c.clone() } else { format!("{c},") };
                    if col > 0 && col + 1 + piece.chars().count() > self.o.width {
                        writeln!(out)?;
                        col = 0;
                    } else if col > 0 {
                        write!(out, " ")?;
                        col += 1;
                    }
                    write!(out, "{piece}")?;
                    col += piece.chars().count();
                }
                writeln!(out)
            }
            _ => {
                for c in cells {
                    writeln!(out, "{c}")?;
                }
                Ok(())
            }
        }
    }

    /// Lays cells out in columns (down, or across with `-x`) as wide as `-w` allows, each
    /// column as wide as its longest cell plus two spaces, the last without padding.
    fn print_grid(&self, out: &mut impl Write, cells: &[String], across: bool) -> io::Result<()> {
        let lens: Vec<usize> = cells.iter().map(|c| c.chars().count()).collect();
        let n = cells.len();
        let mut chosen = (1, n, vec![lens.iter().copied().max().unwrap_or(0)]);
        for cols in (2..=n).rev() {
            let rows = n.div_ceil(cols);
            // Column-major layouts with empty trailing columns are not a real choice.
            if !across && rows * (cols - 1) >= n {
                continue;
            }
            let mut widths = vec![0usize; cols];
            for (i, l) in lens.iter().enumerate() {
                let col = if across { i % cols } else { i / rows };
                widths[col] = widths[col].max(*l);
            }
            let total: usize = widths.iter().sum::<usize>() + 2 * (cols - 1);
            if total <= self.o.width {
                chosen = (cols, rows, widths);
                break;
            }
        }
        let (cols, rows, widths) = chosen;
        for r in 0..rows {
            let mut line = String::new();
            for (c, width) in widths.iter().enumerate().take(cols) {
                let i = if across { r * cols + c } else { c * rows + r };
                if i >= n {
                    break;
                }
                let next = if across { i + 1 } else { i + rows };
                let is_last = c + 1 == cols || next >= n;
                line.push_str(&cells[i]);
                if !is_last {
                    line.push_str(&" ".repeat(width - lens[i] + 2));
                }
            }
            writeln!(out, "{line}")?;
        }
        Ok(())
    }

    fn blocks_text(&self, e: &Entry) -> String {
        let b = e.st.as_ref().map_or(0, |s| s.blocks);
        match self.o.human {
            Some(base) => human(b * 512, base),
            None => b.div_ceil(2).to_string(),
        }
    }

    fn print_long(&self, out: &mut impl Write, v: &[Entry]) -> io::Result<()> {
        struct Row {
            ino: String,
            blocks: String,
            mode: String,
            nlink: String,
            owner: String,
            group: String,
            size: String,
            time: String,
            name: String,
        }
        let rows: Vec<Row> = v
            .iter()
            .map(|e| match &e.st {
                Some(s) => Row {
                    ino: s.ino.to_string(),
                    blocks: self.blocks_text(e),
                    mode: perm_string(s.mode),
                    nlink: s.nlink.to_string(),
                    owner: self.id_name(s.uid),
                    group: self.id_name(s.gid),
                    size: if matches!(s.kind(), S_IFCHR | S_IFBLK) {
                        format!("{}, {}", s.rdev >> 8, s.rdev & 0xff)
                    } else {
                        match self.o.human {
                            Some(base) => human(s.size, base),
                            None => s.size.to_string(),
                        }
                    },
                    time: self.time_text(self.time_of(s)),
                    name: self.display_name(e),
                },
                None => Row {
                    ino: "?".into(),
                    blocks: "?".into(),
                    mode: "l?????????".into(),
                    nlink: "?".into(),
                    owner: "?".into(),
                    group: "?".into(),
                    size: "?".into(),
                    time: "?".into(),
                    name: self.display_name(e),
                },
            })
            .collect();
        let w =
            |f: fn(&Row) -> &String| rows.iter().map(|r| f(r).chars().count()).max().unwrap_or(0);
        let (wi, wb, wl, wo, wg, ws, wt) = (
            w(|r| &r.ino),
            w(|r| &r.blocks),
            w(|r| &r.nlink),
            w(|r| &r.owner),
            w(|r| &r.group),
            w(|r| &r.size),
            w(|r| &r.time),
        );
        for r in &rows {
            let mut line = String::new();
            if self.o.inode {
                line.push_str(&format!("{:>wi$} ", r.ino));
            }
            if self.o.size {
                line.push_str(&format!("{:>wb$} ", r.blocks));
            }
            line.push_str(&format!("{} {:>wl$} ", r.mode, r.nlink));
            if self.o.show_owner {
                line.push_str(&format!("{:<wo$} ", r.owner));
            }
            if self.o.show_group {
                line.push_str(&format!("{:<wg$} ", r.group));
            }
            line.push_str(&format!("{:>ws$} {:<wt$} {}", r.size, r.time, r.name));
            writeln!(out, "{line}")?;
        }
        Ok(())
    }

    fn id_name(&self, id: u32) -> String {
        if self.o.numeric || id != 0 {
            id.to_string()
        } else {
            "root".into()
        }
    }

    fn time_text(&self, (secs, nanos): (i64, u32)) -> String {
        let style = self.o.time_style.as_str();
        // GNU's rule: "recent" is within six months before now, and not in the future.
        let six_months = 31_556_952 / 2;
        let recent = secs <= self.now && self.now - secs < six_months;
        match style {
            "full-iso" => time_fmt::format(secs, nanos, "%Y-%m-%d %H:%M:%S.%N %z"),
            "long-iso" => time_fmt::format(secs, nanos, "%Y-%m-%d %H:%M"),
            "iso" if recent => time_fmt::format(secs, nanos, "%m-%d %H:%M"),
            "iso" => time_fmt::format(secs, nanos, "%Y-%m-%d "),
            s if s.starts_with('+') => {
                // `+RECENT\nOLD` gives the two formats separately.
                let f = &s[1..];
                let f = match f.split_once('\n') {
                    Some((r, o)) => {
                        if recent {
                            r
                        } else {
                            o
                        }
                    }
                    None => f,
                };
                time_fmt::format(secs, nanos, f)
            }
            _ if recent => time_fmt::format(secs, nanos, "%b %e %H:%M"),
            _ => time_fmt::format(secs, nanos, "%b %e  %Y"),
        }
    }
}

fn size_of(e: &Entry) -> u64 {
    e.st.as_ref().map_or(0, |s| s.size)
}

fn join(dir: &str, name: &str) -> String {
    if dir.ends_with('/') {
        format!("{dir}{name}")
    } else {
        format!("{dir}/{name}")
    }
}

fn ext(name: &str) -> &str {
    match name.rfind('.') {
        Some(i) if i > 0 => &name[i..],
        _ => "",
    }
}

/// GNU ls's `-h`: rounded up, one decimal below 10, a unit letter (`k` for `--si`).
fn human(n: u64, base: u64) -> String {
    if n < base {
        return n.to_string();
    }
    let units = if base == 1000 {
        ["k", "M", "G", "T", "P", "E"]
    } else {
        ["K", "M", "G", "T", "P", "E"]
    };
    let mut v = n as f64;
    let mut u = 0;
    v /= base as f64;
    while v >= base as f64 && u + 1 < units.len() {
        v /= base as f64;
        u += 1;
    }
    if v < 10.0 {
        let r = (v * 10.0).ceil() / 10.0;
        if r >= 10.0 {
            format!("{}{}", r.ceil() as u64, units[u])
        } else {
            format!("{r:.1}{}", units[u])
        }
    } else {
        let r = v.ceil() as u64;
        if r >= base && u + 1 < units.len() {
            format!("1.0{}", units[u + 1])
        } else {
            format!("{r}{}", units[u])
        }
    }
}

/// `ls -v` / `sort -V`: runs of digits compare as numbers, the rest byte by byte.
fn version_cmp(a: &str, b: &str) -> Ordering {
    let (a, b) = (a.as_bytes(), b.as_bytes());
    let (mut i, mut j) = (0, 0);
    while i < a.len() && j < b.len() {
        if a[i].is_ascii_digit() && b[j].is_ascii_digit() {
            let si = i;
            while i < a.len() && a[i].is_ascii_digit() {
                i += 1;
            }
            let sj = j;
            while j < b.len() && b[j].is_ascii_digit() {
                j += 1;
            }
            let x = std::str::from_utf8(&a[si..i])
                .unwrap_or("0")
                .trim_start_matches('0');
            let y = std::str::from_utf8(&b[sj..j])
                .unwrap_or("0")
                .trim_start_matches('0');
            let ord = x.len().cmp(&y.len()).then_with(|| x.cmp(y));
            if ord != Ordering::Equal {
                return ord;
            }
        } else {
            if a[i] != b[j] {
                return a[i].cmp(&b[j]);
            }
            i += 1;
            j += 1;
        }
    }
    (a.len() - i).cmp(&(b.len() - j))
}

/// Shell pattern match for `-I`/`--ignore`: `*`, `?`, `[...]` (with `!`/`^` and ranges),
/// backslash escapes.
fn glob(p: &[u8], s: &[u8]) -> bool {
    let (mut pi, mut si) = (0, 0);
    let mut star: Option<(usize, usize)> = None;
    while si < s.len() {
        if pi < p.len() {
            match p[pi] {
                b'*' => {
                    star = Some((pi, si));
                    pi += 1;
                    continue;
                }
                b'?' => {
                    pi += 1;
                    si += 1;
                    continue;
                }
                b'[' => {
                    if let Some((matched, next)) = class(&p[pi..], s[si])
                        && matched
                    {
                        pi += next;
                        si += 1;
                        continue;
                    }
                }
                b'\\' if pi + 1 < p.len() && p[pi + 1] == s[si] => {
                    pi += 2;
                    si += 1;
                    continue;
                }
                // An escape that does not match is no literal backslash either.
                b'\\' if pi + 1 < p.len() => {}
                c if c == s[si] => {
                    pi += 1;
                    si += 1;
                    continue;
                }
                _ => {}
            }
        }
        match star {
            Some((sp, ss)) => {
                pi = sp + 1;
                si = ss + 1;
                star = Some((sp, ss + 1));
            }
            None => return false,
        }
    }
    p[pi..].iter().all(|&c| c == b'*')
}

/// Matches `c` against the bracket expression at the start of `p`; returns whether it matched
/// and the expression's length, or `None` if `p` has no closing bracket.
fn class(p: &[u8], c: u8) -> Option<(bool, usize)> {
    let mut i = 1;
    let negate = matches!(p.get(i), Some(b'!' | b'^'));
    if negate {
        i += 1;
    }
    let mut matched = false;
    let mut first = true;
    while i < p.len() {
        if p[i] == b']' && !first {
            return Some((matched != negate, i + 1));
        }
        first = false;
        if i + 2 < p.len() && p[i + 1] == b'-' && p[i + 2] != b']' {
            if p[i] <= c && c <= p[i + 2] {
                matched = true;
            }
            i += 3;
        } else {
            if p[i] == c {
                matched = true;
            }
            i += 1;
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn human_sizes_round_up_like_gnu() {
        assert_eq!(human(0, 1024), "0");
        assert_eq!(human(1023, 1024), "1023");
        assert_eq!(human(1024, 1024), "1.0K");
        assert_eq!(human(1025, 1024), "1.1K");
        assert_eq!(human(4096, 1024), "4.0K");
        assert_eq!(human(10 * 1024, 1024), "10K");
        assert_eq!(human(10 * 1024 + 1, 1024), "11K");
        assert_eq!(human(1536 * 1024, 1024), "1.5M");
        assert_eq!(human(1000, 1000), "1.0k");
    }

    #[test]
    fn versions_and_globs() {
        assert_eq!(version_cmp("a2", "a10"), Ordering::Less);
        assert_eq!(version_cmp("a10", "a10"), Ordering::Equal);
        assert!(glob(b"*.txt", b"a.txt"));
        assert!(!glob(b"*.txt", b"a.txt~"));
        assert!(glob(b"[ab]?", b"bz"));
        assert!(glob(b"[!a]*", b"bz"));
        assert!(!glob(b"[!a]*", b"az"));
    }
}
