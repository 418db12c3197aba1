//! ripgrep's command line: short flags in clusters (`-inw`), values attached or in the next
//! word (`-A2`, `-e foo`, `--glob=*.rs`, `--glob '*.rs'`), `--` ending the flags, and the
//! first positional word taken as the pattern unless `-e`/`-f` gave one. Where flags
//! contradict each other the last one wins, as in ripgrep.

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum Case {
    Sensitive,
    Insensitive,
    Smart,
}

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum Summary {
    Count,
    CountMatches,
    FilesWithMatches,
    FilesWithoutMatch,
}

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum Mode {
    Search,
    Files,
    TypeList,
    Help { long: bool },
    Version,
}

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum SortBy {
    None,
    Path,
    Modified,
    Accessed,
    Created,
}

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum Color {
    Never,
    Auto,
    Always,
    Ansi,
}

/// Type definitions edits in command-line order (`--type-add`, `--type-clear`), which must
/// be applied before the selections.
#[derive(Debug)]
pub enum TypeEdit {
    Add(String),
    Clear(String),
}

#[derive(Debug)]
pub enum TypeSel {
    Select(String),
    Negate(String),
}

#[derive(Debug)]
pub struct Args {
    pub mode: Mode,
    pub patterns: Vec<String>,
    pub pattern_files: Vec<String>,
    pub paths: Vec<String>,
    pub case: Case,
    pub fixed: bool,
    pub word: bool,
    pub line_regexp: bool,
    pub invert: bool,
    pub only_matching: bool,
    pub line_number: Option<bool>,
    pub heading: Option<bool>,
    pub with_filename: Option<bool>,
    pub summary: Option<Summary>,
    pub quiet: bool,
    pub max_count: Option<u64>,
    after: Option<usize>,
    before: Option<usize>,
    context: usize,
    pub color: Color,
    pub colors: Vec<String>,
    /// `(glob, case-insensitive)` in command-line order.
    pub globs: Vec<(String, bool)>,
    pub glob_case_insensitive: bool,
    pub type_edits: Vec<TypeEdit>,
    pub type_sels: Vec<TypeSel>,
    pub hidden: bool,
    pub no_ignore: bool,
    pub no_ignore_vcs: bool,
    pub no_ignore_parent: bool,
    pub no_ignore_dot: bool,
    pub no_ignore_global: bool,
    pub no_ignore_exclude: bool,
    pub no_ignore_files: bool,
    pub no_require_git: bool,
    pub ignore_files: Vec<String>,
    pub ignore_file_case_insensitive: bool,
    /// `--binary` (or `-uuu`): walked files are searched like named ones, not skipped.
    pub binary: bool,
    /// `-a`: no binary detection at all.
    pub text: bool,
    pub follow: bool,
    pub max_depth: Option<usize>,
    pub max_filesize: Option<u64>,
    pub null: bool,
    pub sort: SortBy,
    pub sort_reverse: bool,
    pub no_messages: bool,
    pub column: bool,
    pub vimgrep: bool,
    pub byte_offset: bool,
    pub passthru: bool,
    pub trim: bool,
    pub include_zero: bool,
    pub multiline: bool,
    pub multiline_dotall: bool,
    pub replace: Option<String>,
    pub context_separator: Option<String>,
    pub field_match_separator: String,
    pub field_context_separator: String,
    pub max_columns: Option<u64>,
    pub max_columns_preview: bool,
    pub crlf: bool,
    pub no_unicode: bool,
    pub one_file_system: bool,
    pub stats: bool,
    pub encoding: Option<String>,
    /// A feature this build lacks (PCRE2, preprocessors, ...): its message ends the run with
    /// status 2, printed plainly as ripgrep prints its own "not available" errors.
    pub unsupported: Option<String>,
    pub json: bool,
}

impl Default for Args {
    fn default() -> Self {
        Args {
            mode: Mode::Search,
            patterns: Vec::new(),
            pattern_files: Vec::new(),
            paths: Vec::new(),
            case: Case::Sensitive,
            fixed: false,
            word: false,
            line_regexp: false,
            invert: false,
            only_matching: false,
            line_number: None,
            heading: None,
            with_filename: None,
            summary: None,
            quiet: false,
            max_count: None,
            after: None,
            before: None,
            context: 0,
            color: Color::Auto,
            colors: Vec::new(),
            globs: Vec::new(),
            glob_case_insensitive: false,
            type_edits: Vec::new(),
            type_sels: Vec::new(),
            hidden: false,
            no_ignore: false,
            no_ignore_vcs: false,
            no_ignore_parent: false,
            no_ignore_dot: false,
            no_ignore_global: false,
            no_ignore_exclude: false,
            no_ignore_files: false,
            no_require_git: false,
            ignore_files: Vec::new(),
            ignore_file_case_insensitive: false,
            binary: false,
            text: false,
            follow: false,
            max_depth: None,
            max_filesize: None,
            null: false,
            sort: SortBy::Path,
            sort_reverse: false,
            no_messages: false,
            column: false,
            vimgrep: false,
            byte_offset: false,
            passthru: false,
            trim: false,
            include_zero: false,
            multiline: false,
            multiline_dotall: false,
            replace: None,
            context_separator: Some("--".into()),
            field_match_separator: ":".into(),
            field_context_separator: "-".into(),
            max_columns: None,
            max_columns_preview: false,
            crlf: false,
            no_unicode: false,
            one_file_system: false,
            stats: false,
            encoding: None,
            unsupported: None,
            json: false,
        }
    }
}

impl Args {
    /// Lines after a match: `-A` wins over `-C` whatever their order, as in ripgrep 14
    /// (ripgrep 13 let the last of `-A/-B/-C` replace the others whole).
    pub fn after(&self) -> usize {
        self.after.unwrap_or(self.context)
    }

    /// Lines before a match: `-B` wins over `-C`, as [`Args::after`].
    pub fn before(&self) -> usize {
        self.before.unwrap_or(self.context)
    }
}

/// Short flags that take a value, and their long names.
const SHORT_WITH_VALUE: &[(char, &str)] = &[
    ('e', "regexp"),
    ('f', "file"),
    ('g', "glob"),
    ('t', "type"),
    ('T', "type-not"),
    ('A', "after-context"),
    ('B', "before-context"),
    ('C', "context"),
    ('m', "max-count"),
    ('d', "max-depth"),
    ('j', "threads"),
    ('M', "max-columns"),
    ('r', "replace"),
    ('E', "encoding"),
];

/// Short flags without a value, and their long names.
const SHORT_SWITCH: &[(char, &str)] = &[
    ('i', "ignore-case"),
    ('s', "case-sensitive"),
    ('S', "smart-case"),
    ('n', "line-number"),
    ('N', "no-line-number"),
    ('l', "files-with-matches"),
    ('c', "count"),
    ('w', "word-regexp"),
    ('x', "line-regexp"),
    ('F', "fixed-strings"),
    ('v', "invert-match"),
    ('o', "only-matching"),
    ('H', "with-filename"),
    ('I', "no-filename"),
    ('.', "hidden"),
    ('u', "unrestricted"),
    ('q', "quiet"),
    ('a', "text"),
    ('L', "follow"),
    ('0', "null"),
    ('b', "byte-offset"),
    ('U', "multiline"),
    ('p', "pretty"),
    ('P', "pcre2"),
    ('z', "search-zip"),
    ('h', "help-short"),
    ('V', "version"),
];

const LONG_WITH_VALUE: &[&str] = &[
    "regexp",
    "file",
    "glob",
    "iglob",
    "type",
    "type-not",
    "type-add",
    "type-clear",
    "after-context",
    "before-context",
    "context",
    "max-count",
    "max-depth",
    "maxdepth",
    "threads",
    "max-columns",
    "replace",
    "encoding",
    "color",
    "colour",
    "colors",
    "sort",
    "sortr",
    "context-separator",
    "field-match-separator",
    "field-context-separator",
    "path-separator",
    "ignore-file",
    "max-filesize",
    "dfa-size-limit",
    "regex-size-limit",
    "engine",
    "pre",
    "pre-glob",
    "hyperlink-format",
];

pub fn parse(argv: &[String]) -> Result<Args, String> {
    let mut a = Args::default();
    let mut positional: Vec<String> = Vec::new();
    let mut i = 0;
    while i < argv.len() {
        let arg = &argv[i];
        i += 1;
        if arg == "--" {
            positional.extend(argv[i..].iter().cloned());
            break;
        }
        if let Some(long) = arg.strip_prefix("--") {
            let (name, inline) = match long.split_once('=') {
                Some((n, v)) => (n, Some(v.to_string())),
                None => (long, None),
            };
            if LONG_WITH_VALUE.contains(&name) {
                let value = match inline {
                    Some(v) => v,
                    None => {
                        let Some(v) = argv.get(i) else {
                            return Err(format!("flag --{name} needs a value"));
                        };
                        i += 1;
                        v.clone()
                    }
                };
                with_value(&mut a, name, value)?;
            } else {
                if inline.is_some() {
                    return Err(format!("flag --{name} does not take a value"));
                }
                switch(&mut a, name)?;
            }
            continue;
        }
        if arg.len() > 1 && arg.starts_with('-') {
            let chars: Vec<char> = arg[1..].chars().collect();
            let mut k = 0;
            while k < chars.len() {
                let c = chars[k];
                k += 1;
                if let Some((_, name)) = SHORT_WITH_VALUE.iter().find(|(s, _)| *s == c) {
                    let rest: String = chars[k..].iter().collect();
                    let value = if !rest.is_empty() {
                        rest.strip_prefix('=').map(str::to_string).unwrap_or(rest)
                    } else {
                        let Some(v) = argv.get(i) else {
                            return Err(format!("flag -{c} needs a value"));
                        };
                        i += 1;
                        v.clone()
                    };
                    with_value(&mut a, name, value)?;
                    break;
                }
                match SHORT_SWITCH.iter().find(|(s, _)| *s == c) {
                    Some((_, name)) => switch(&mut a, name)?,
                    None => return Err(format!("unrecognized flag -{c}")),
                }
            }
            continue;
        }
        positional.push(arg.clone());
    }
    if a.mode == Mode::Search && a.patterns.is_empty() && a.pattern_files.is_empty() {
        if positional.is_empty() {
            return Err(
                "no pattern given (usage: rg [OPTIONS] PATTERN [PATH ...]; see rg --help)".into(),
            );
        }
        a.patterns.push(positional.remove(0));
    }
    a.paths = positional;
    Ok(a)
}

fn number<T: std::str::FromStr>(name: &str, value: &str) -> Result<T, String> {
    value
        .trim()
        .parse()
        .map_err(|_| format!("invalid value {value:?} for --{name}: expected a number"))
}

/// `10K`, `2M`, `1G` or plain bytes, as ripgrep's size flags take them.
fn size(name: &str, value: &str) -> Result<u64, String> {
    let v = value.trim();
    let (digits, mult) = match v.chars().last() {
        Some('K' | 'k') => (&v[..v.len() - 1], 1 << 10),
        Some('M' | 'm') => (&v[..v.len() - 1], 1 << 20),
        Some('G' | 'g') => (&v[..v.len() - 1], 1 << 30),
        _ => (v, 1),
    };
    let n: u64 = number(name, digits)?;
    n.checked_mul(mult)
        .ok_or_else(|| format!("invalid value {value:?} for --{name}: too large"))
}

fn with_value(a: &mut Args, name: &str, value: String) -> Result<(), String> {
    match name {
        "regexp" => a.patterns.push(value),
        "file" => a.pattern_files.push(value),
        "glob" => a.globs.push((value, false)),
        "iglob" => a.globs.push((value, true)),
        "type" => a.type_sels.push(TypeSel::Select(value)),
        "type-not" => a.type_sels.push(TypeSel::Negate(value)),
        "type-add" => a.type_edits.push(TypeEdit::Add(value)),
        "type-clear" => a.type_edits.push(TypeEdit::Clear(value)),
        "after-context" => a.after = Some(number(name, &value)?),
        "before-context" => a.before = Some(number(name, &value)?),
        "context" => a.context = number(name, &value)?,
        "max-count" => a.max_count = Some(number(name, &value)?),
        "max-depth" | "maxdepth" => a.max_depth = Some(number(name, &value)?),
        // One thread always (WASI has none); the value is still checked.
        "threads" => {
            number::<usize>(name, &value)?;
        }
        "max-columns" => {
            let n: u64 = number(name, &value)?;
            a.max_columns = (n > 0).then_some(n);
        }
        "replace" => a.replace = Some(value),
        "encoding" => {
            if !matches!(
                value.to_ascii_lowercase().as_str(),
                "auto" | "none" | "utf-8" | "utf8"
            ) && grep_searcher::Encoding::new(&value).is_err()
            {
                return Err(format!("unknown encoding: {value}"));
            }
            a.encoding = Some(value);
        }
        "color" | "colour" => {
            a.color = match value.as_str() {
                "never" => Color::Never,
                "auto" => Color::Auto,
                "always" => Color::Always,
                "ansi" => Color::Ansi,
                _ => {
                    return Err(format!(
                        "invalid value {value:?} for --color (choose never, auto, always or ansi)"
                    ));
                }
            }
        }
        "colors" => a.colors.push(value),
        "sort" | "sortr" => {
            a.sort = match value.as_str() {
                "none" => SortBy::None,
                "path" => SortBy::Path,
                "modified" => SortBy::Modified,
                "accessed" => SortBy::Accessed,
                "created" => SortBy::Created,
                _ => {
                    return Err(format!(
                        "invalid value {value:?} for --{name} (choose path, modified, \
                         accessed, created or none)"
                    ));
                }
            };
            a.sort_reverse = name == "sortr";
        }
        "context-separator" => a.context_separator = Some(unescape(&value)),
        "field-match-separator" => a.field_match_separator = unescape(&value),
        "field-context-separator" => a.field_context_separator = unescape(&value),
        "path-separator" => {
            if value != "/" {
                return Err("--path-separator: only / is supported in this sandbox".into());
            }
        }
        "ignore-file" => a.ignore_files.push(value),
        "max-filesize" => a.max_filesize = Some(size(name, &value)?),
        "dfa-size-limit" | "regex-size-limit" => {
            size(name, &value)?;
        }
        "engine" => {
            if value != "default" && value != "auto" {
                a.unsupported = Some("PCRE2 is not available in this build of ripgrep.".into());
            }
        }
        "hyperlink-format" => {}
        "pre" | "pre-glob" => {
            a.unsupported = Some(format!(
                "--{name} is not supported: the sandbox cannot start preprocessor programs"
            ));
        }
        _ => return Err(format!("unrecognized flag --{name}")),
    }
    Ok(())
}

fn switch(a: &mut Args, name: &str) -> Result<(), String> {
    match name {
        "ignore-case" => a.case = Case::Insensitive,
        "case-sensitive" => a.case = Case::Sensitive,
        "smart-case" => a.case = Case::Smart,
        "line-number" => a.line_number = Some(true),
        "no-line-number" => a.line_number = Some(false),
        "files-with-matches" => a.summary = Some(Summary::FilesWithMatches),
        "files-without-match" => a.summary = Some(Summary::FilesWithoutMatch),
        "count" => a.summary = Some(Summary::Count),
        "count-matches" => a.summary = Some(Summary::CountMatches),
        "word-regexp" => a.word = true,
        "line-regexp" => a.line_regexp = true,
        "fixed-strings" => a.fixed = true,
        "no-fixed-strings" => a.fixed = false,
        "invert-match" => a.invert = true,
        "no-invert-match" => a.invert = false,
        "only-matching" => a.only_matching = true,
        "heading" => a.heading = Some(true),
        "no-heading" => a.heading = Some(false),
        "with-filename" => a.with_filename = Some(true),
        "no-filename" => a.with_filename = Some(false),
        "files" => a.mode = Mode::Files,
        "type-list" => a.mode = Mode::TypeList,
        "hidden" => a.hidden = true,
        "no-hidden" => a.hidden = false,
        "no-ignore" => a.no_ignore = true,
        "ignore" => a.no_ignore = false,
        "no-ignore-vcs" => a.no_ignore_vcs = true,
        "ignore-vcs" => a.no_ignore_vcs = false,
        "no-ignore-parent" => a.no_ignore_parent = true,
        "ignore-parent" => a.no_ignore_parent = false,
        "no-ignore-dot" => a.no_ignore_dot = true,
        "ignore-dot" => a.no_ignore_dot = false,
        "no-ignore-global" => a.no_ignore_global = true,
        "ignore-global" => a.no_ignore_global = false,
        "no-ignore-exclude" => a.no_ignore_exclude = true,
        "ignore-exclude" => a.no_ignore_exclude = false,
        "no-ignore-files" => a.no_ignore_files = true,
        "ignore-files" => a.no_ignore_files = false,
        "no-require-git" => a.no_require_git = true,
        "require-git" => a.no_require_git = false,
        "ignore-file-case-insensitive" => a.ignore_file_case_insensitive = true,
        "glob-case-insensitive" => a.glob_case_insensitive = true,
        "no-glob-case-insensitive" => a.glob_case_insensitive = false,
        "unrestricted" => {
            if a.no_ignore && a.hidden {
                a.binary = true;
            } else if a.no_ignore {
                a.hidden = true;
            } else {
                a.no_ignore = true;
            }
        }
        "quiet" => a.quiet = true,
        "text" => a.text = true,
        "no-text" => a.text = false,
        "binary" => a.binary = true,
        "no-binary" => a.binary = false,
        "follow" => a.follow = true,
        "no-follow" => a.follow = false,
        "null" => a.null = true,
        "sort-files" => {
            a.sort = SortBy::Path;
            a.sort_reverse = false;
        }
        "no-sort-files" => a.sort = SortBy::None,
        "no-messages" => a.no_messages = true,
        "messages" => a.no_messages = false,
        "column" => a.column = true,
        "no-column" => a.column = false,
        "vimgrep" => a.vimgrep = true,
        "byte-offset" => a.byte_offset = true,
        "no-byte-offset" => a.byte_offset = false,
        "passthru" | "passthrough" => a.passthru = true,
        "trim" => a.trim = true,
        "no-trim" => a.trim = false,
        "include-zero" => a.include_zero = true,
        "no-include-zero" => a.include_zero = false,
        "multiline" => a.multiline = true,
        "no-multiline" => a.multiline = false,
        "multiline-dotall" => a.multiline_dotall = true,
        "no-multiline-dotall" => a.multiline_dotall = false,
        "no-context-separator" => a.context_separator = None,
        "max-columns-preview" => a.max_columns_preview = true,
        "no-max-columns-preview" => a.max_columns_preview = false,
        "crlf" => a.crlf = true,
        "no-crlf" => a.crlf = false,
        "no-unicode" => a.no_unicode = true,
        "unicode" => a.no_unicode = false,
        "one-file-system" => a.one_file_system = true,
        "no-one-file-system" => a.one_file_system = false,
        "stats" => a.stats = true,
        "no-stats" => a.stats = false,
        "pretty" => {
            a.color = Color::Always;
            a.heading = Some(true);
            a.line_number = Some(true);
        }
        "help-short" => a.mode = Mode::Help { long: false },
        "help" => a.mode = Mode::Help { long: true },
        "version" => a.mode = Mode::Version,
        // Accepted and meaningless here: one thread, no memory maps, no config file, output
        // is block-buffered into the sandbox's pipe either way.
        "no-config"
        | "mmap"
        | "no-mmap"
        | "line-buffered"
        | "block-buffered"
        | "no-line-buffered"
        | "no-block-buffered"
        | "debug"
        | "trace"
        | "no-pcre2-unicode"
        | "pcre2-unicode"
        | "no-pcre2"
        | "no-search-zip"
        | "no-pre"
        | "auto-hybrid-regex"
        | "no-auto-hybrid-regex" => {}
        "pcre2" => {
            a.unsupported = Some("PCRE2 is not available in this build of ripgrep.".into());
        }
        "search-zip" => {
            a.unsupported = Some(
                "--search-zip is not supported: the sandbox cannot start decompression programs"
                    .into(),
            );
        }
        "json" => a.json = true,
        "no-json" => a.json = false,
        _ => return Err(format!("unrecognized flag --{name}")),
    }
    Ok(())
}

/// `\t`, `\n`, `\x7F` and `\\` in separators, as ripgrep reads them.
fn unescape(s: &str) -> String {
    let mut out = String::new();
    let mut it = s.chars().peekable();
    while let Some(c) = it.next() {
        if c != '\\' {
            out.push(c);
            continue;
        }
        match it.next() {
            Some('t') => out.push('\t'),
            Some('n') => out.push('\n'),
            Some('r') => out.push('\r'),
            Some('0') => out.push('\0'),
            Some('\\') => out.push('\\'),
            Some('x') => {
                let hex: String = it.by_ref().take(2).collect();
                match u8::from_str_radix(&hex, 16) {
                    Ok(b) if b < 0x80 => out.push(b as char),
                    _ => {
                        out.push_str("\\x");
                        out.push_str(&hex);
                    }
                }
            }
            Some(other) => {
                out.push('\\');
                out.push(other);
            }
            None => out.push('\\'),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn p(args: &[&str]) -> Args {
        parse(&args.iter().map(|s| s.to_string()).collect::<Vec<_>>()).unwrap()
    }

    #[test]
    fn clusters_values_and_positionals() {
        let a = p(&["-inA2", "-e", "x", "-gfoo", "--glob=*.rs", "dir", "-"]);
        assert_eq!(a.case, Case::Insensitive);
        assert_eq!(a.line_number, Some(true));
        assert_eq!(a.after(), 2);
        assert_eq!(a.patterns, ["x"]);
        assert_eq!(
            a.globs,
            [("foo".to_string(), false), ("*.rs".to_string(), false)]
        );
        assert_eq!(a.paths, ["dir", "-"]);
    }

    #[test]
    fn first_positional_is_the_pattern_and_double_dash_ends_flags() {
        let a = p(&["--", "-v", "a"]);
        assert_eq!(a.patterns, ["-v"]);
        assert_eq!(a.paths, ["a"]);
        assert!(!a.invert);
    }

    #[test]
    fn unrestricted_counts() {
        let a = p(&["-uuu", "x"]);
        assert!(a.no_ignore && a.hidden && a.binary);
        let a = p(&["-u", "x"]);
        assert!(a.no_ignore && !a.hidden);
    }

    #[test]
    fn a_and_b_win_over_c_in_any_order() {
        for argv in [&["-A1", "-C3", "x"], &["-C3", "-A1", "x"]] {
            let a = p(argv);
            assert_eq!((a.before(), a.after()), (3, 1));
        }
    }

    #[test]
    fn bad_input_is_an_error() {
        let parse_err = |v: &[&str]| parse(&v.iter().map(|s| s.to_string()).collect::<Vec<_>>());
        assert!(parse_err(&["-A", "x", "p"]).is_err());
        assert!(parse_err(&["--nope", "p"]).is_err());
        assert!(parse_err(&[]).is_err());
        assert!(parse_err(&["-e"]).is_err());
    }
}
