//! `rg`: ripgrep's command line over the ripgrep project's library crates (grep-regex,
//! grep-searcher, grep-printer, ignore). One thread: the directory walk is `ignore`'s
//! sequential walker, sorted by file name in each directory, so output comes in the order
//! `rg --sort path` prints.

#![forbid(unsafe_code)]

mod args;
mod help;
mod rules;

use std::io::{self, IsTerminal, Read, Write};
use std::path::{Path, PathBuf};
use std::process::exit;

use grep_matcher::LineTerminator;
use grep_printer::{
    ColorSpecs, JSON, JSONBuilder, Standard, StandardBuilder, Stats, Summary, SummaryBuilder,
    SummaryKind,
};
use grep_regex::{RegexMatcher, RegexMatcherBuilder};
use grep_searcher::{BinaryDetection, Encoding, Searcher, SearcherBuilder};
use ignore::overrides::OverrideBuilder;
use ignore::types::TypesBuilder;
use ignore::{Walk, WalkBuilder};
use termcolor::{Ansi, NoColor, WriteColor};

use args::{Args, Case, Color, Mode, SortBy};

type Out = Box<dyn WriteColor>;

fn main() {
    START.with(|_| ());
    guest_rt::enter_pwd();
    let argv: Vec<String> = std::env::args_os()
        .skip(1)
        .map(|a| a.to_string_lossy().into_owned())
        .collect();
    let args = match args::parse(&argv) {
        Ok(a) => a,
        Err(msg) => usage_error(&msg),
    };
    if args.json {
        let other = match (args.mode, args.summary) {
            (Mode::Files, _) => Some("--files"),
            (_, Some(args::Summary::Count)) => Some("--count"),
            (_, Some(args::Summary::CountMatches)) => Some("--count-matches"),
            (_, Some(args::Summary::FilesWithMatches)) => Some("--files-with-matches"),
            (_, Some(args::Summary::FilesWithoutMatch)) => Some("--files-without-match"),
            _ => None,
        };
        if let Some(flag) = other {
            usage_error(&format!("{flag} cannot be used with --json"));
        }
    }
    if let Some(msg) = &args.unsupported
        && !matches!(args.mode, Mode::Help { .. } | Mode::Version)
    {
        fatal(msg);
    }
    let code = match args.mode {
        Mode::Help { long } => {
            print_and_exit(if long { help::LONG } else { help::SHORT });
        }
        Mode::Version => print_and_exit(help::VERSION),
        Mode::TypeList => type_list(&args),
        Mode::Files | Mode::Search => run(args),
    };
    exit(code);
}

fn usage_error(msg: &str) -> ! {
    eprintln!("error: {msg}\n\nFor more information try --help");
    exit(2);
}

fn print_and_exit(text: &str) -> ! {
    let mut o = io::stdout().lock();
    let _ = o.write_all(text.as_bytes()).and_then(|()| o.flush());
    exit(0);
}

/// A fatal error before any search (bad regex, glob or type): the message alone, status 2,
/// as ripgrep prints it.
fn fatal(msg: impl std::fmt::Display) -> ! {
    eprintln!("{}", linux_errno(&msg.to_string()));
    exit(2);
}

/// Messages name errors as the Linux kernel numbers them (`(os error 2)`), as ripgrep on the
/// host does; WASI numbers its errno values differently (ENOENT is 44).
fn linux_errno(msg: &str) -> String {
    if !cfg!(target_os = "wasi") {
        return msg.to_string();
    }
    const TAG: &str = "(os error ";
    let mut out = String::with_capacity(msg.len());
    let mut rest = msg;
    while let Some(at) = rest.find(TAG) {
        let after = &rest[at + TAG.len()..];
        let digits = after.bytes().take_while(u8::is_ascii_digit).count();
        out.push_str(&rest[..at + TAG.len()]);
        match after[..digits].parse::<u32>() {
            Ok(n) if after[digits..].starts_with(')') => {
                out.push_str(&wasi_to_linux(n).to_string());
            }
            _ => out.push_str(&after[..digits]),
        }
        rest = &after[digits..];
    }
    out.push_str(rest);
    out
}

fn wasi_to_linux(n: u32) -> u32 {
    match n {
        2 => 13,  // EACCES
        8 => 9,   // EBADF
        20 => 17, // EEXIST
        22 => 27, // EFBIG
        28 => 22, // EINVAL
        29 => 5,  // EIO
        31 => 21, // EISDIR
        32 => 40, // ELOOP
        37 => 36, // ENAMETOOLONG
        44 => 2,  // ENOENT
        48 => 12, // ENOMEM
        51 => 28, // ENOSPC
        54 => 20, // ENOTDIR
        55 => 39, // ENOTEMPTY
        63 => 1,  // EPERM
        64 => 32, // EPIPE
        69 => 30, // EROFS
        other => other,
    }
}

fn type_list(args: &Args) -> i32 {
    let types = types_builder(args);
    let mut text = String::new();
    for def in types.definitions() {
        text.push_str(def.name());
        text.push_str(": ");
        text.push_str(&def.globs().join(", "));
        text.push('\n');
    }
    let mut o = io::stdout().lock();
    match o.write_all(text.as_bytes()).and_then(|()| o.flush()) {
        Err(e) if e.kind() != io::ErrorKind::BrokenPipe => fatal(e),
        _ => 0,
    }
}

fn types_builder(args: &Args) -> TypesBuilder {
    let mut b = TypesBuilder::new();
    b.add_defaults();
    for edit in &args.type_edits {
        match edit {
            args::TypeEdit::Add(def) => {
                if let Err(e) = b.add_def(def) {
                    fatal(e);
                }
            }
            args::TypeEdit::Clear(name) => {
                b.clear(name);
            }
        }
    }
    b
}

/// A problem with an ignore file: reported, and the search goes on without its bad lines
/// (ripgrep does not count these as errors for the exit status).
pub fn warn(e: &dyn std::fmt::Display) {
    eprintln!("{}", linux_errno(&e.to_string()));
}

/// How one run ends: whether anything matched (or, for `--files-without-match`, was
/// listed) and whether any error was reported.
struct State {
    matched: bool,
    errored: bool,
    no_messages: bool,
}

impl State {
    fn message(&mut self, msg: impl std::fmt::Display) {
        self.errored = true;
        if !self.no_messages {
            eprintln!("{}", linux_errno(&msg.to_string()));
        }
    }
}

enum Printer {
    Standard(Standard<Out>),
    /// The bool is set for `--files-without-match`, where a listed file (one without a
    /// match) is what makes the status 0, as in ripgrep.
    Summary(Summary<Out>, bool),
    /// `--files`: paths only.
    Paths(Out),
    /// `--json`: ripgrep's JSON Lines, and the statistics of the files that matched for the
    /// closing `summary` message.
    Json(JSON<Out>, Stats),
}

fn run(args: Args) -> i32 {
    let mut state = State {
        matched: false,
        errored: false,
        no_messages: args.no_messages,
    };
    let color = matches!(args.color, Color::Always | Color::Ansi);
    let stdout = io::BufWriter::with_capacity(64 * 1024, io::stdout().lock());
    let out: Out = if color {
        Box::new(Ansi::new(stdout))
    } else {
        Box::new(NoColor::new(stdout))
    };

    // No path: ripgrep searches stdin when it is readable and not a terminal, and the
    // current directory otherwise. A sandbox's stdin is never a terminal but is often empty
    // (a run without input), so the first read decides: bytes mean stdin is searched, an
    // immediate end of input means `./` is.
    let mut stdin_head: Option<Vec<u8>> = None;
    // `-f -` has stdin for its patterns, which leaves the directory to search.
    let patterns_on_stdin = args.pattern_files.iter().any(|f| f == "-");
    if args.mode == Mode::Search
        && args.paths.is_empty()
        && !patterns_on_stdin
        && !io::stdin().is_terminal()
    {
        let mut buf = vec![0u8; 64 * 1024];
        loop {
            match io::stdin().read(&mut buf) {
                Ok(0) => break,
                Ok(n) => {
                    buf.truncate(n);
                    stdin_head = Some(buf);
                    break;
                }
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(_) => break,
            }
        }
    }

    let implicit_cwd = args.paths.is_empty() && stdin_head.is_none();
    let with_filename = args.with_filename.unwrap_or_else(|| {
        if stdin_head.is_some() {
            false
        } else if implicit_cwd {
            true
        } else {
            args.paths.len() > 1 || Path::new(&args.paths[0]).is_dir()
        }
    });

    let mut printer = if args.mode == Mode::Files {
        Printer::Paths(out)
    } else {
        build_printer(&args, with_filename, out)
    };

    if args.mode == Mode::Files {
        walk_all(&args, implicit_cwd, &mut state, &mut |path, _, _, st| {
            if let Printer::Paths(out) = &mut printer {
                let mut bytes = path_bytes(path);
                bytes.push(if args.null { 0 } else { b'\n' });
                if let Err(e) = out.write_all(&bytes) {
                    write_failed(e);
                }
                st.matched = true;
            }
            true
        });
        return finish(&args, printer, &state);
    }

    let matcher = build_matcher(&args);
    let mut searcher = build_searcher(&args);

    if let Some(head) = stdin_head {
        let reader = io::Cursor::new(head).chain(io::stdin());
        search_reader(
            &args,
            &mut printer,
            &matcher,
            &mut searcher,
            reader,
            &mut state,
        );
        return finish(&args, printer, &state);
    }

    walk_all(
        &args,
        implicit_cwd,
        &mut state,
        &mut |display, real, explicit, st| {
            match real {
                None => {
                    let stdin = io::stdin();
                    search_reader(&args, &mut printer, &matcher, &mut searcher, stdin, st);
                }
                Some(real) => {
                    searcher.set_binary_detection(binary_detection(&args, explicit));
                    search_path(&mut printer, &matcher, &mut searcher, real, display, st);
                }
            }
            // `-q` has its answer at the first match.
            !(args.quiet && st.matched)
        },
    );
    finish(&args, printer, &state)
}

fn finish(args: &Args, printer: Printer, state: &State) -> i32 {
    let mut out = match printer {
        Printer::Standard(p) => p.into_inner(),
        Printer::Summary(p, _) => p.into_inner(),
        Printer::Paths(o) => o,
        Printer::Json(p, stats) => {
            let mut o = p.into_inner();
            let line = json_summary(&stats, START.with(|s| s.elapsed()));
            if let Err(e) = o.write_all(line.as_bytes()) {
                write_failed(e);
            }
            o
        }
    };
    if let Err(e) = out.flush() {
        write_failed(e);
    }
    if state.matched && (args.quiet || !state.errored) {
        0
    } else if state.errored {
        2
    } else {
        1
    }
}

/// A closed stdout ends the program quietly, as SIGPIPE ends ripgrep.
fn write_failed(e: io::Error) -> ! {
    if e.kind() == io::ErrorKind::BrokenPipe {
        exit(0);
    }
    fatal(e)
}

fn path_bytes(path: &Path) -> Vec<u8> {
    path.to_string_lossy().into_owned().into_bytes()
}

fn binary_detection(args: &Args, explicit: bool) -> BinaryDetection {
    if args.text {
        BinaryDetection::none()
    } else if explicit || args.binary {
        // Named files (and everything with `--binary`) are searched to the end; a NUL
        // turns the output into ripgrep's "binary file matches" line.
        BinaryDetection::convert(b'\x00')
    } else {
        // Files found by walking are dropped at their first NUL, as ripgrep does.
        BinaryDetection::quit(b'\x00')
    }
}

fn build_matcher(args: &Args) -> RegexMatcher {
    let mut patterns = args.patterns.clone();
    for file in &args.pattern_files {
        let text = if file == "-" {
            let mut s = Vec::new();
            io::stdin()
                .read_to_end(&mut s)
                .unwrap_or_else(|e| fatal(format!("{file}: {e}")));
            s
        } else {
            std::fs::read(file).unwrap_or_else(|e| fatal(format!("{file}: {e}")))
        };
        let text = String::from_utf8_lossy(&text);
        patterns.extend(text.lines().map(str::to_string));
    }
    // No pattern at all (an empty `-f` file) matches nothing: ripgrep ends at once, without
    // looking at the paths.
    if patterns.is_empty() {
        exit(1);
    }
    let mut b = RegexMatcherBuilder::new();
    b.case_insensitive(args.case == Case::Insensitive)
        .case_smart(args.case == Case::Smart)
        .word(args.word)
        .whole_line(args.line_regexp)
        .fixed_strings(args.fixed)
        .multi_line(true)
        .unicode(!args.no_unicode)
        .dot_matches_new_line(args.multiline && args.multiline_dotall);
    // `crlf` sets the matcher's line terminator too, which a multi-line search must not have.
    if args.crlf {
        b.crlf(true);
        if args.multiline {
            b.line_terminator(None);
        }
    } else if !args.multiline {
        b.line_terminator(Some(b'\n'));
    }
    b.build_many(&patterns).unwrap_or_else(|e| {
        // The library wraps each pattern in `(?:...)` before parsing, so its message shows
        // that wrapper; ripgrep's message shows the patterns as typed, joined by `|`.
        if !args.fixed
            && let Err(pe) = regex_syntax::ParserBuilder::new()
                .unicode(!args.no_unicode)
                .utf8(false)
                .build()
                .parse(&patterns.join("|"))
        {
            fatal(pe);
        }
        let msg = e.to_string();
        // regex's older wording, which ripgrep 13 prints.
        match msg
            .strip_prefix("compiled regex exceeds size limit of ")
            .filter(|n| n.bytes().all(|b| b.is_ascii_digit()))
        {
            Some(n) => fatal(format!("Compiled regex exceeds size limit of {n} bytes.")),
            None => fatal(msg),
        }
    })
}

fn build_searcher(args: &Args) -> Searcher {
    let line_numbers = args.summary.is_none()
        && (args.line_number.unwrap_or(false) || args.column || args.vimgrep || args.json)
        && args.line_number != Some(false);
    let mut b = SearcherBuilder::new();
    b.line_terminator(if args.crlf {
        LineTerminator::crlf()
    } else {
        LineTerminator::byte(b'\n')
    })
    .invert_match(args.invert)
    .line_number(line_numbers)
    .multi_line(args.multiline)
    .max_matches(args.max_count)
    .bom_sniffing(true);
    if args.summary.is_none() && !args.quiet {
        b.before_context(args.before())
            .after_context(args.after())
            .passthru(args.passthru);
    }
    if let Some(label) = &args.encoding {
        let label = label.to_ascii_lowercase();
        if label == "none" {
            b.bom_sniffing(false);
        } else if label != "auto" {
            b.encoding(Some(
                Encoding::new(&label).unwrap_or_else(|e| fatal(format!("{e}"))),
            ));
        }
    }
    b.build()
}

fn color_specs(args: &Args) -> ColorSpecs {
    let mut specs = grep_printer::default_color_specs();
    for s in &args.colors {
        match s.parse() {
            Ok(spec) => specs.push(spec),
            Err(e) => fatal(e),
        }
    }
    ColorSpecs::new(&specs)
}

fn build_printer(args: &Args, with_filename: bool, out: Out) -> Printer {
    if args.json && !args.quiet {
        let mut b = JSONBuilder::new();
        b.replacement(args.replace.clone().map(String::into_bytes));
        return Printer::Json(b.build(out), Stats::new());
    }
    let specs = color_specs(args);
    let summary = match (args.summary, args.quiet) {
        (Some(args::Summary::FilesWithoutMatch), true) => Some(SummaryKind::QuietWithoutMatch),
        (_, true) => Some(SummaryKind::QuietWithMatch),
        (Some(args::Summary::Count), false) if args.only_matching => {
            Some(SummaryKind::CountMatches)
        }
        (Some(args::Summary::Count), false) => Some(SummaryKind::Count),
        (Some(args::Summary::CountMatches), false) => Some(SummaryKind::CountMatches),
        (Some(args::Summary::FilesWithMatches), false) => Some(SummaryKind::PathWithMatch),
        (Some(args::Summary::FilesWithoutMatch), false) => Some(SummaryKind::PathWithoutMatch),
        (None, false) => None,
    };
    if let Some(kind) = summary {
        let mut b = SummaryBuilder::new();
        b.kind(kind)
            .color_specs(specs)
            .path(with_filename)
            .exclude_zero(!args.include_zero)
            .separator_field(args.field_match_separator.clone().into_bytes())
            .path_terminator(args.null.then_some(0));
        let without = matches!(
            kind,
            SummaryKind::PathWithoutMatch | SummaryKind::QuietWithoutMatch
        );
        return Printer::Summary(b.build(out), without);
    }
    let heading = args.heading.unwrap_or(false) && !args.vimgrep;
    let context = args.before() > 0 || args.after() > 0;
    let ctx_sep = args.context_separator.clone().map(String::into_bytes);
    let file_sep = if heading {
        Some(Vec::new())
    } else if context {
        ctx_sep.clone()
    } else {
        None
    };
    let mut b = StandardBuilder::new();
    b.color_specs(specs)
        .heading(heading)
        .path(with_filename)
        .only_matching(args.only_matching)
        .per_match(args.vimgrep)
        .column(args.column || args.vimgrep)
        .byte_offset(args.byte_offset)
        .trim_ascii(args.trim)
        .max_columns(args.max_columns)
        .max_columns_preview(args.max_columns_preview)
        .replacement(args.replace.clone().map(String::into_bytes))
        .separator_search(file_sep)
        .separator_context(ctx_sep)
        .separator_field_match(args.field_match_separator.clone().into_bytes())
        .separator_field_context(args.field_context_separator.clone().into_bytes())
        .path_terminator(args.null.then_some(0));
    Printer::Standard(b.build(out))
}

fn search_path(
    printer: &mut Printer,
    matcher: &RegexMatcher,
    searcher: &mut Searcher,
    path: &Path,
    display: &Path,
    st: &mut State,
) {
    let result = match printer {
        Printer::Standard(p) => {
            let mut sink = p.sink_with_path(matcher, display);
            searcher
                .search_path(matcher, path, &mut sink)
                .map(|()| sink.has_match())
        }
        Printer::Summary(p, without) => {
            let without = *without;
            let mut sink = p.sink_with_path(matcher, display);
            searcher
                .search_path(matcher, path, &mut sink)
                .map(|()| sink.has_match() != without)
        }
        Printer::Json(p, stats) => {
            let mut sink = p.sink_with_path(matcher, display);
            let r = searcher.search_path(matcher, path, &mut sink);
            json_stats(r, &sink, stats)
        }
        Printer::Paths(_) => unreachable!("--files does not search"),
    };
    settle(result, display, st);
}

fn search_reader<R: Read>(
    args: &Args,
    printer: &mut Printer,
    matcher: &RegexMatcher,
    searcher: &mut Searcher,
    reader: R,
    st: &mut State,
) {
    searcher.set_binary_detection(binary_detection(args, true));
    let label = Path::new("<stdin>");
    let result = match printer {
        Printer::Standard(p) => {
            let mut sink = p.sink_with_path(matcher, label);
            searcher
                .search_reader(matcher, reader, &mut sink)
                .map(|()| sink.has_match())
        }
        Printer::Summary(p, without) => {
            let without = *without;
            let mut sink = p.sink_with_path(matcher, label);
            searcher
                .search_reader(matcher, reader, &mut sink)
                .map(|()| sink.has_match() != without)
        }
        Printer::Json(p, stats) => {
            let mut sink = p.sink_with_path(matcher, label);
            let r = searcher.search_reader(matcher, reader, &mut sink);
            json_stats(r, &sink, stats)
        }
        Printer::Paths(_) => unreachable!("--files does not search"),
    };
    settle(result, label, st);
}

fn settle(result: io::Result<bool>, display: &Path, st: &mut State) {
    match result {
        Ok(found) => st.matched |= found,
        Err(e) if e.kind() == io::ErrorKind::BrokenPipe => exit(0),
        Err(e) => st.message(format!("{}: {e}", display.display())),
    }
}

thread_local! {
    /// When the run started, for `--json`'s `elapsed_total`.
    static START: std::time::Instant = std::time::Instant::now();
}

/// ripgrep counts into `--json`'s summary only the files that matched.
fn json_stats(
    result: io::Result<()>,
    sink: &grep_printer::JSONSink<'_, '_, &RegexMatcher, Out>,
    stats: &mut Stats,
) -> io::Result<bool> {
    result?;
    if sink.has_match() {
        *stats += sink.stats();
    }
    Ok(sink.has_match())
}

/// `--json`'s closing message, keys in the order ripgrep's serializer writes them.
fn json_summary(stats: &Stats, total: std::time::Duration) -> String {
    let time = |d: std::time::Duration| {
        format!(
            "{{\"human\":\"{:0.6}s\",\"nanos\":{},\"secs\":{}}}",
            d.as_secs_f64(),
            d.subsec_nanos(),
            d.as_secs()
        )
    };
    format!(
        "{{\"data\":{{\"elapsed_total\":{},\"stats\":{{\"bytes_printed\":{},\"bytes_searched\":{},\
         \"elapsed\":{},\"matched_lines\":{},\"matches\":{},\"searches\":{},\
         \"searches_with_match\":{}}}}},\"type\":\"summary\"}}\n",
        time(total),
        stats.bytes_printed(),
        stats.bytes_searched(),
        time(stats.elapsed()),
        stats.matched_lines(),
        stats.matches(),
        stats.searches(),
        stats.searches_with_match()
    )
}

/// The walk of one root, given as an absolute path: order, depth, size, `-g` and `-t` by the
/// walker, ignore files and hidden names by [`rules::Rules`].
fn walker(args: &Args, root: &Path, cwd: &Path) -> Walk {
    let mut b = WalkBuilder::new(root);
    b.follow_links(args.follow)
        .max_depth(args.max_depth)
        .max_filesize(args.max_filesize)
        .standard_filters(false)
        .same_file_system(args.one_file_system);
    let mut ob = OverrideBuilder::new(cwd);
    let mut insensitive = false;
    for (glob, icase) in &args.globs {
        let want = *icase || args.glob_case_insensitive;
        if want != insensitive {
            ob.case_insensitive(want).unwrap_or_else(|e| fatal(e));
            insensitive = want;
        }
        if let Err(e) = ob.add(glob) {
            fatal(e);
        }
    }
    let overrides = ob.build().unwrap_or_else(|e| fatal(e));
    let mut tb = types_builder(args);
    for sel in &args.type_sels {
        match sel {
            args::TypeSel::Select(n) => tb.select(n),
            args::TypeSel::Negate(n) => tb.negate(n),
        };
    }
    let types = tb.build().unwrap_or_else(|e| fatal(e));
    b.overrides(overrides.clone()).types(types.clone());
    let rules = rules::Rules::new(args, root, cwd, overrides, types);
    b.filter_entry(move |dent| rules.keep(dent));
    let reverse = args.sort_reverse;
    match args.sort {
        SortBy::None => {}
        SortBy::Path => {
            b.sort_by_file_name(move |x, y| if reverse { y.cmp(x) } else { x.cmp(y) });
        }
        kind => {
            b.sort_by_file_path(move |x, y| {
                let t = |p: &Path| {
                    std::fs::metadata(p).ok().and_then(|m| match kind {
                        SortBy::Modified => m.modified().ok(),
                        SortBy::Accessed => m.accessed().ok(),
                        _ => m.created().ok(),
                    })
                };
                let o = t(x).cmp(&t(y));
                if reverse { o.reverse() } else { o }
            });
        }
    }
    b.build()
}

/// `dir/../x` → `x` without touching the filesystem (WASI has no `canonicalize`).
fn normalize(path: &Path) -> PathBuf {
    use std::path::Component;
    let mut out = PathBuf::new();
    for c in path.components() {
        match c {
            Component::CurDir => {}
            Component::ParentDir => {
                if !out.pop() {
                    out.push("/");
                }
            }
            other => out.push(other.as_os_str()),
        }
    }
    out
}

/// What [`walk_all`] calls for each file: `(display path, real path or None for stdin,
/// named on the command line, state)`; false stops the walk.
type Visit<'a> = dyn FnMut(&Path, Option<&Path>, bool, &mut State) -> bool + 'a;

/// Walks each path of the command line in turn (or `./`), showing paths as they were given:
/// the walk itself runs on absolute paths.
fn walk_all(args: &Args, implicit_cwd: bool, st: &mut State, visit: &mut Visit<'_>) {
    let cwd = std::env::current_dir().unwrap_or_else(|_| PathBuf::from("/"));
    let default = ["./".to_string()];
    let roots: &[String] = if args.paths.is_empty() {
        &default
    } else {
        &args.paths
    };
    for given in roots {
        if given == "-" {
            if !visit(Path::new("<stdin>"), None, true, st) {
                return;
            }
            continue;
        }
        if let Err(e) = std::fs::symlink_metadata(given) {
            st.message(format!("{given}: {e}"));
            continue;
        }
        let root = normalize(&cwd.join(given));
        let shown = |real: &Path| -> PathBuf {
            let rel = real.strip_prefix(&root).unwrap_or(real);
            if implicit_cwd {
                rel.to_path_buf()
            } else if rel.as_os_str().is_empty() {
                PathBuf::from(given)
            } else {
                Path::new(given).join(rel)
            }
        };
        // Messages name paths as the command line did.
        let root_text = root.to_string_lossy().into_owned();
        let local = |msg: String| -> String {
            let with = if implicit_cwd {
                format!("{root_text}/")
            } else {
                root_text.clone()
            };
            let to = if implicit_cwd { "" } else { given.as_str() };
            msg.replace(&with, to)
        };
        for item in walker(args, &root, &cwd) {
            let dent = match item {
                Ok(d) => d,
                Err(e) => {
                    st.message(local(e.to_string()));
                    continue;
                }
            };
            if let Some(e) = dent.error() {
                st.message(local(e.to_string()));
            }
            let explicit = dent.depth() == 0;
            let is_file = match dent.file_type() {
                Some(ft) => ft.is_file() || (explicit && !ft.is_dir()),
                None => false,
            };
            if !is_file {
                continue;
            }
            let real = dent.path();
            if !visit(&shown(real), Some(real), explicit, st) {
                return;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn normalize_is_lexical() {
        assert_eq!(
            normalize(Path::new("/a/b/../c/./d")),
            PathBuf::from("/a/c/d")
        );
        assert_eq!(normalize(Path::new("/a/./")), PathBuf::from("/a"));
        assert_eq!(normalize(Path::new("/../x")), PathBuf::from("/x"));
    }

    #[test]
    fn wasi_errno_numbers_become_linux_ones() {
        let msg = "x: No such file or directory (os error 44)";
        let want = if cfg!(target_os = "wasi") {
            "x: No such file or directory (os error 2)"
        } else {
            msg
        };
        assert_eq!(linux_errno(msg), want);
        assert_eq!(wasi_to_linux(54), 20);
    }
}
