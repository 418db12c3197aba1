//! grep: GNU-compatible on the options scripts use. Exit status 0 when a line was selected, 1
//! when none was, 2 on trouble (unless -q already found a match, as GNU does).

use crate::matcher::{MatchOptions, Matcher, Syntax};
use crate::util::{Out, glob_match};
use std::io::{self, Read};
use std::path::Path;

#[derive(Default)]
struct Opts {
    syntax: Option<Syntax>,
    ignore_case: bool,
    invert: bool,
    count: bool,
    line_number: bool,
    only_matching: bool,
    files_with_matches: bool,
    files_without_match: bool,
    recursive: bool,
    word: bool,
    line: bool,
    quiet: bool,
    no_messages: bool,
    with_filename: Option<bool>,
    after: usize,
    before: usize,
    max_count: Option<u64>,
    byte_offset: bool,
    text: bool,
    null_data: bool,
    null_after_name: bool,
    includes: Vec<String>,
    excludes: Vec<String>,
    exclude_dirs: Vec<String>,
    label: Option<String>,
}

struct Grep {
    o: Opts,
    matcher: Matcher,
    out: Out,
    error: bool,
    any_selected: bool,
}

const USAGE: &str =
    "Usage: grep [OPTION]... PATTERNS [FILE]...\nTry 'grep --help' for more information.";

fn parse_num(name: &str, v: &str) -> Result<usize, String> {
    v.parse()
        .map_err(|_| format!("grep: {v}: invalid {name} length argument"))
}

pub fn main(args: Vec<String>) -> i32 {
    match run(args) {
        Ok(code) => code,
        Err(msg) => {
            eprintln!("{msg}");
            2
        }
    }
}

fn run(args: Vec<String>) -> Result<i32, String> {
    let mut o = Opts::default();
    let mut patterns: Vec<String> = Vec::new();
    let mut have_pattern = false;
    let mut operands = Vec::new();
    let mut context: Option<usize> = None;
    let mut after: Option<usize> = None;
    let mut before: Option<usize> = None;
    let mut i = 1;
    let mut only_operands = false;
    while i < args.len() {
        let arg = &args[i];
        i += 1;
        if only_operands || arg == "-" || !arg.starts_with('-') {
            operands.push(arg.clone());
            continue;
        }
        if arg == "--" {
            only_operands = true;
            continue;
        }
        if let Some(long) = arg.strip_prefix("--") {
            let (name, inline) = match long.split_once('=') {
                Some((n, v)) => (n, Some(v.to_string())),
                None => (long, None),
            };
            let value = |i: &mut usize| -> Result<String, String> {
                if let Some(v) = &inline {
                    return Ok(v.clone());
                }
                let v = args.get(*i).cloned().ok_or(format!(
                    "grep: option '--{name}' requires an argument\n{USAGE}"
                ))?;
                *i += 1;
                Ok(v)
            };
            match name {
                "extended-regexp" => o.syntax = Some(Syntax::Extended),
                "fixed-strings" => o.syntax = Some(Syntax::Fixed),
                "basic-regexp" => o.syntax = Some(Syntax::Basic),
                "ignore-case" => o.ignore_case = true,
                "no-ignore-case" => o.ignore_case = false,
                "invert-match" => o.invert = true,
                "count" => o.count = true,
                "line-number" => o.line_number = true,
                "only-matching" => o.only_matching = true,
                "files-with-matches" => o.files_with_matches = true,
                "files-without-match" => o.files_without_match = true,
                "recursive" | "dereference-recursive" => o.recursive = true,
                "word-regexp" => o.word = true,
                "line-regexp" => o.line = true,
                "quiet" | "silent" => o.quiet = true,
                "no-messages" => o.no_messages = true,
                "with-filename" => o.with_filename = Some(true),
                "no-filename" => o.with_filename = Some(false),
                "byte-offset" => o.byte_offset = true,
                "text" => o.text = true,
                "null-data" => o.null_data = true,
                "null" => o.null_after_name = true,
                "color" | "colour" => {}
                "line-buffered" | "no-group-separator" => {}
                "regexp" => {
                    patterns.push(value(&mut i)?);
                    have_pattern = true;
                }
                "file" => {
                    let f = value(&mut i)?;
                    read_pattern_file(&f, &mut patterns)?;
                    have_pattern = true;
                }
                "after-context" => after = Some(parse_num("context", &value(&mut i)?)?),
                "before-context" => before = Some(parse_num("context", &value(&mut i)?)?),
                "context" => context = Some(parse_num("context", &value(&mut i)?)?),
                "max-count" => o.max_count = Some(parse_num("max-count", &value(&mut i)?)? as u64),
                "include" => o.includes.push(value(&mut i)?),
                "exclude" => o.excludes.push(value(&mut i)?),
                "exclude-dir" => o.exclude_dirs.push(value(&mut i)?),
                "label" => o.label = Some(value(&mut i)?),
                "help" => {
                    println!("{USAGE}");
                    return Ok(0);
                }
                "version" => {
                    println!("grep (wasmsand) 0.1");
                    return Ok(0);
                }
                _ => return Err(format!("grep: unrecognized option '--{name}'\n{USAGE}")),
            }
            continue;
        }
        let chars: Vec<char> = arg[1..].chars().collect();
        let mut j = 0;
        while j < chars.len() {
            let c = chars[j];
            j += 1;
            // Options that take a value use the rest of this word or the next argument.
            let mut take = |i: &mut usize| -> Result<String, String> {
                let rest: String = chars[j..].iter().collect();
                if !rest.is_empty() {
                    j = chars.len();
                    return Ok(rest);
                }
                let v = args.get(*i).cloned().ok_or(format!(
                    "grep: option requires an argument -- '{c}'\n{USAGE}"
                ))?;
                *i += 1;
                Ok(v)
            };
            match c {
                'E' => o.syntax = Some(Syntax::Extended),
                'F' => o.syntax = Some(Syntax::Fixed),
                'G' => o.syntax = Some(Syntax::Basic),
                'P' => o.syntax = Some(Syntax::Extended),
                'i' | 'y' => o.ignore_case = true,
                'v' => o.invert = true,
                'c' => o.count = true,
                'n' => o.line_number = true,
                'o' => o.only_matching = true,
                'l' => o.files_with_matches = true,
                'L' => o.files_without_match = true,
                'r' | 'R' => o.recursive = true,
                'w' => o.word = true,
                'x' => o.line = true,
                'q' => o.quiet = true,
                's' => o.no_messages = true,
                'H' => o.with_filename = Some(true),
                'h' => o.with_filename = Some(false),
                'b' => o.byte_offset = true,
                'a' => o.text = true,
                'z' => o.null_data = true,
                'Z' => o.null_after_name = true,
                'I' | 'U' => {}
                'e' => {
                    patterns.push(take(&mut i)?);
                    have_pattern = true;
                }
                'f' => {
                    let f = take(&mut i)?;
                    read_pattern_file(&f, &mut patterns)?;
                    have_pattern = true;
                }
                'A' => after = Some(parse_num("context", &take(&mut i)?)?),
                'B' => before = Some(parse_num("context", &take(&mut i)?)?),
                'C' => context = Some(parse_num("context", &take(&mut i)?)?),
                'm' => o.max_count = Some(parse_num("max-count", &take(&mut i)?)? as u64),
                d if d.is_ascii_digit() => {
                    // `-5` means `-C 5`.
                    let mut n = d.to_digit(10).unwrap() as usize;
                    while j < chars.len() && chars[j].is_ascii_digit() {
                        n = n * 10 + chars[j].to_digit(10).unwrap() as usize;
                        j += 1;
                    }
                    context = Some(n);
                }
                _ => return Err(format!("grep: invalid option -- '{c}'\n{USAGE}")),
            }
        }
    }
    if !have_pattern {
        if operands.is_empty() {
            return Err(USAGE.to_string());
        }
        patterns.push(operands.remove(0));
    }
    // A pattern argument holding newlines is a list of patterns, as in GNU grep.
    let patterns: Vec<String> = patterns
        .iter()
        .flat_map(|p| p.split('\n').map(str::to_string).collect::<Vec<_>>())
        .collect();
    o.after = after.or(context).unwrap_or(0);
    o.before = before.or(context).unwrap_or(0);
    let syntax = o.syntax.unwrap_or(Syntax::Basic);
    let matcher = if patterns.is_empty() {
        // `grep -f /dev/null` matches nothing: no line holds a newline.
        Matcher::new(&["\n".to_string()], &plain(Syntax::Fixed))
    } else {
        Matcher::new(
            &patterns,
            &MatchOptions {
                syntax,
                ignore_case: o.ignore_case,
                word: o.word,
                line: o.line,
            },
        )
    }
    .map_err(|e| format!("grep: {e}"))?;

    // GNU names files found under an implicit `.` without the `./` prefix.
    let implicit_dot = o.recursive && operands.is_empty();
    if operands.is_empty() {
        operands.push(if o.recursive { ".".into() } else { "-".into() });
    }
    let multiple = operands.len() > 1 || o.recursive;
    if o.with_filename.is_none() {
        o.with_filename = Some(multiple);
    }
    let mut g = Grep {
        o,
        matcher,
        out: Out::stdout(),
        error: false,
        any_selected: false,
    };
    for operand in &operands {
        if g.o.quiet && g.any_selected {
            break;
        }
        if operand == "-" {
            let mut data = Vec::new();
            if let Err(e) = io::stdin().lock().read_to_end(&mut data) {
                g.report(&format!(
                    "grep: (standard input): {}",
                    crate::util::errno_text(&e)
                ));
                continue;
            }
            let label =
                g.o.label
                    .clone()
                    .unwrap_or_else(|| "(standard input)".into());
            g.search(&label, &data);
        } else if g.o.recursive {
            let display_strip = implicit_dot && operand == ".";
            g.walk(Path::new(operand), operand, display_strip, true);
        } else {
            g.file(Path::new(operand), operand);
        }
        if g.out.broken() {
            return Ok(if g.any_selected { 0 } else { 2 });
        }
    }
    g.out.flush();
    Ok(if g.error && !(g.o.quiet && g.any_selected) {
        2
    } else if g.any_selected {
        0
    } else {
        1
    })
}

fn plain(syntax: Syntax) -> MatchOptions {
    MatchOptions {
        syntax,
        ignore_case: false,
        word: false,
        line: false,
    }
}

fn read_pattern_file(f: &str, patterns: &mut Vec<String>) -> Result<(), String> {
    let data = if f == "-" {
        let mut s = String::new();
        io::stdin()
            .read_to_string(&mut s)
            .map_err(|e| e.to_string())?;
        s
    } else {
        std::fs::read_to_string(f)
            .map_err(|e| format!("grep: {f}: {}", crate::util::errno_text(&e)))?
    };
    patterns.extend(data.lines().map(str::to_string));
    Ok(())
}

impl Grep {
    fn report(&mut self, msg: &str) {
        self.error = true;
        if !self.o.no_messages {
            self.out.flush();
            eprintln!("{msg}");
        }
    }

    fn file(&mut self, path: &Path, name: &str) {
        match std::fs::metadata(path) {
            Ok(m) if m.is_dir() => {
                if !self.o.no_messages {
                    self.out.flush();
                    eprintln!("grep: {name}: Is a directory");
                }
                // GNU grep skips directories named on the command line with a message but,
                // since 3.x, without making that an error for the exit status.
                return;
            }
            _ => {}
        }
        match std::fs::read(path) {
            Ok(data) => self.search(name, &data),
            Err(e) => self.report(&format!("grep: {name}: {}", crate::util::errno_text(&e))),
        }
    }

    fn walk(&mut self, path: &Path, display: &str, strip_dot: bool, top: bool) {
        let meta = if top {
            std::fs::metadata(path)
        } else {
            std::fs::symlink_metadata(path)
        };
        let meta = match meta {
            Ok(m) => m,
            Err(e) => {
                self.report(&format!("grep: {display}: {}", crate::util::errno_text(&e)));
                return;
            }
        };
        if meta.is_dir() {
            let base = path.file_name().map(|s| s.to_string_lossy().into_owned());
            if !top
                && let Some(b) = &base
                && self.o.exclude_dirs.iter().any(|g| glob_match(g, b))
            {
                return;
            }
            let mut entries: Vec<String> = match std::fs::read_dir(path) {
                Ok(rd) => rd
                    .filter_map(|e| e.ok())
                    .map(|e| e.file_name().to_string_lossy().into_owned())
                    .collect(),
                Err(e) => {
                    self.report(&format!("grep: {display}: {}", crate::util::errno_text(&e)));
                    return;
                }
            };
            entries.sort();
            for name in entries {
                let child_display = if strip_dot {
                    name.clone()
                } else if display.ends_with('/') {
                    format!("{display}{name}")
                } else {
                    format!("{display}/{name}")
                };
                self.walk(&path.join(&name), &child_display, false, false);
                if self.out.broken() || (self.o.quiet && self.any_selected) {
                    return;
                }
            }
        } else if meta.is_file() || top {
            let base = path
                .file_name()
                .map(|s| s.to_string_lossy().into_owned())
                .unwrap_or_default();
            if !self.o.includes.is_empty() && !self.o.includes.iter().any(|g| glob_match(g, &base))
            {
                return;
            }
            if self.o.excludes.iter().any(|g| glob_match(g, &base)) {
                return;
            }
            self.file(path, display);
        }
    }

    fn prefix(&mut self, name: &str, lineno: usize, offset: usize, sep: u8) {
        if self.o.with_filename == Some(true) {
            self.out.write(name.as_bytes());
            let sep_byte = if self.o.null_after_name { 0 } else { sep };
            self.out.write(&[sep_byte]);
        }
        if self.o.line_number {
            self.out.write(lineno.to_string().as_bytes());
            self.out.write(&[sep]);
        }
        if self.o.byte_offset {
            self.out.write(offset.to_string().as_bytes());
            self.out.write(&[sep]);
        }
    }

    fn search(&mut self, name: &str, data: &[u8]) {
        let eol = if self.o.null_data { b'\0' } else { b'\n' };
        let binary = !self.o.text && !self.o.null_data && data.contains(&0);
        let mut lines: Vec<(usize, &[u8])> = Vec::new();
        let mut start = 0;
        while start < data.len() {
            // In a binary file GNU grep takes NUL bytes for line ends too ("zapping" them), so
            // `.` never matches across one and counts are of the pieces.
            let found = if binary {
                memchr::memchr2(eol, 0, &data[start..])
            } else {
                memchr::memchr(eol, &data[start..])
            };
            let end = found.map_or(data.len(), |p| start + p);
            lines.push((start, &data[start..end]));
            start = end + 1;
        }
        let o = &self.o;
        let list_only = o.files_with_matches || o.files_without_match;
        let mut count: u64 = 0;
        let mut last_printed: Option<usize> = None;
        let mut after_left = 0usize;
        let mut printed_any_group = false;
        let max = o.max_count.unwrap_or(u64::MAX);
        let quiet = o.quiet;
        let count_only = o.count;
        let (before, after) = (o.before, o.after);
        let context = (before > 0 || after > 0) && !o.only_matching;
        for idx in 0..lines.len() {
            if count >= max {
                // Trailing context after the last permitted match is still printed.
                if after_left > 0 && !quiet && !count_only && !list_only && !binary {
                    let (off, line) = lines[idx];
                    if !self.line_selected(line) {
                        self.emit_line(name, idx, off, line, b'-', eol);
                        last_printed = Some(idx);
                        after_left -= 1;
                        continue;
                    }
                }
                break;
            }
            let (off, line) = lines[idx];
            let selected = self.line_selected(line);
            if selected {
                count += 1;
                self.any_selected = true;
                if quiet {
                    return;
                }
                if list_only {
                    break;
                }
                if count_only {
                    continue;
                }
                if binary {
                    // GNU grep 3.8's notice, on stderr.
                    self.out.flush();
                    eprintln!("grep: {name}: binary file matches");
                    return;
                }
                if context {
                    let from = idx.saturating_sub(before);
                    let from = match last_printed {
                        Some(lp) if lp + 1 > from => lp + 1,
                        _ => from,
                    };
                    if printed_any_group && last_printed.is_none_or(|lp| from > lp + 1) {
                        self.out.write(b"--\n");
                    }
                    for (k, &(coff, cline)) in lines.iter().enumerate().take(idx).skip(from) {
                        self.emit_line(name, k, coff, cline, b'-', eol);
                    }
                    printed_any_group = true;
                }
                if self.o.only_matching {
                    if !self.o.invert {
                        let mut pos = 0;
                        while pos <= line.len() {
                            let Some((s, e)) = self.matcher.find_at(line, pos) else {
                                break;
                            };
                            if e == s {
                                pos = e + 1;
                                continue;
                            }
                            self.prefix(name, idx + 1, off + s, b':');
                            self.out.write(&line[s..e]);
                            self.out.write(&[eol]);
                            pos = e;
                        }
                    }
                } else {
                    self.emit_line(name, idx, off, line, b':', eol);
                }
                last_printed = Some(idx);
                after_left = after;
            } else if context && after_left > 0 {
                self.emit_line(name, idx, off, line, b'-', eol);
                last_printed = Some(idx);
                after_left -= 1;
            }
        }
        if count_only {
            if self.o.with_filename == Some(true) {
                self.out.write(name.as_bytes());
                self.out
                    .write(if self.o.null_after_name { b"\0" } else { b":" });
            }
            self.out.write(format!("{count}\n").as_bytes());
        }
        let term: &[u8] = if self.o.null_after_name { b"\0" } else { b"\n" };
        if (self.o.files_with_matches && count > 0) || (self.o.files_without_match && count == 0) {
            self.out.write(name.as_bytes());
            self.out.write(term);
        }
    }

    fn line_selected(&self, line: &[u8]) -> bool {
        self.matcher.is_match(line) != self.o.invert
    }

    fn emit_line(&mut self, name: &str, idx: usize, off: usize, line: &[u8], sep: u8, eol: u8) {
        self.prefix(name, idx + 1, off, sep);
        self.out.write(line);
        self.out.write(&[eol]);
    }
}
