//! diff in GNU's normal, unified and context formats, with the options that decide which lines
//! are equal (`-b`, `-w`, `-i`, `-B`, `--strip-trailing-cr`), `-q`, `-s`, `-N`, `-r`, `-a`,
//! `--label`, `-t` and GNU's getopt (clusters such as `-ubw`, `-U3`, `-5`). Lines are compared
//! by a key built from those options; the lines shown are always the files' own, and equal
//! lines of context come from the first file, as GNU's do. The ed and side-by-side formats stay
//! with the diffutils library (`crate::diff`).

use similar::{Algorithm, DiffOp, capture_diff_slices};
use std::ffi::OsString;
use std::io::{self, Read};
use std::path::Path;

#[derive(Clone, Copy, PartialEq)]
enum Format {
    Normal,
    Unified(usize),
    Context(usize),
}

#[derive(Clone)]
struct Opts {
    format: Format,
    brief: bool,
    report_same: bool,
    space_change: bool,
    all_space: bool,
    blank_lines: bool,
    case: bool,
    strip_cr: bool,
    new_file: bool,
    recursive: bool,
    text: bool,
    expand_tabs: bool,
    labels: Vec<String>,
    /// The command line's options, for the `diff -r` headers of files that differ.
    shown: Vec<String>,
}

/// What the arguments ask for: options and the two operands, or GNU's message and status 2.
fn parse(args: &[String]) -> Result<(Opts, Vec<String>), String> {
    let mut o = Opts {
        format: Format::Normal,
        brief: false,
        report_same: false,
        space_change: false,
        all_space: false,
        blank_lines: false,
        case: false,
        strip_cr: false,
        new_file: false,
        recursive: false,
        text: false,
        expand_tabs: false,
        labels: Vec::new(),
        shown: Vec::new(),
    };
    let mut operands = Vec::new();
    let mut context: Option<usize> = None;
    let number = |v: &str| -> Result<usize, String> {
        v.parse::<usize>()
            .map_err(|_| format!("invalid context length '{v}'"))
    };
    let mut i = 1;
    let mut done = false;
    while i < args.len() {
        let a = args[i].clone();
        i += 1;
        if done || a == "-" || !a.starts_with('-') {
            operands.push(a);
            continue;
        }
        if a == "--" {
            done = true;
            continue;
        }
        o.shown.push(a.clone());
        if let Some(long) = a.strip_prefix("--") {
            let (name, value) = match long.split_once('=') {
                Some((n, v)) => (n, Some(v.to_string())),
                None => (long, None),
            };
            let mut required = || -> Result<String, String> {
                if let Some(v) = value.clone() {
                    return Ok(v);
                }
                i += 1;
                args.get(i - 1)
                    .cloned()
                    .ok_or_else(|| format!("option '--{name}' requires an argument"))
            };
            match name {
                "unified" => {
                    o.format = Format::Unified(value.as_deref().map_or(Ok(3), number)?);
                }
                "context" => {
                    o.format = Format::Context(value.as_deref().map_or(Ok(3), number)?);
                }
                "normal" => o.format = Format::Normal,
                "brief" => o.brief = true,
                "report-identical-files" => o.report_same = true,
                "ignore-space-change" => o.space_change = true,
                "ignore-all-space" => o.all_space = true,
                "ignore-blank-lines" => o.blank_lines = true,
                "ignore-case" => o.case = true,
                "strip-trailing-cr" => o.strip_cr = true,
                "new-file" => o.new_file = true,
                "recursive" => o.recursive = true,
                "text" => o.text = true,
                "expand-tabs" => o.expand_tabs = true,
                "label" => o.labels.push(required()?),
                "ignore-tab-expansion"
                | "ignore-trailing-space"
                | "minimal"
                | "speed-large-files"
                | "no-dereference" => {}
                _ => return Err(format!("unrecognized option '{a}'")),
            }
            continue;
        }
        let body = &a[1..];
        // The obsolete -NUM: that many lines of context.
        if body.bytes().all(|b| b.is_ascii_digit()) {
            context = Some(number(body)?);
            continue;
        }
        for (at, c) in body.char_indices() {
            let rest = &body[at + c.len_utf8()..];
            match c {
                'u' => o.format = Format::Unified(3),
                'c' => o.format = Format::Context(3),
                'q' => o.brief = true,
                's' => o.report_same = true,
                'b' => o.space_change = true,
                'w' => o.all_space = true,
                'B' => o.blank_lines = true,
                'i' => o.case = true,
                'N' => o.new_file = true,
                'r' => o.recursive = true,
                'a' => o.text = true,
                't' => o.expand_tabs = true,
                'E' | 'Z' | 'd' | 'H' | 'p' | 'T' => {}
                'U' | 'C' | 'L' => {
                    let v = if rest.is_empty() {
                        i += 1;
                        args.get(i - 1)
                            .cloned()
                            .ok_or_else(|| format!("option requires an argument -- '{c}'"))?
                    } else {
                        rest.to_string()
                    };
                    match c {
                        'U' => o.format = Format::Unified(number(&v)?),
                        'C' => o.format = Format::Context(number(&v)?),
                        _ => o.labels.push(v),
                    }
                    break;
                }
                _ => return Err(format!("invalid option -- '{c}'")),
            }
        }
    }
    if let Some(n) = context {
        o.format = match o.format {
            Format::Context(_) => Format::Context(n),
            _ => Format::Unified(n),
        };
    }
    match operands.len() {
        0 => Err("missing operand".into()),
        1 => Err(format!("missing operand after '{}'", operands[0])),
        2 => Ok((o, operands)),
        _ => Err(format!("extra operand '{}'", operands[2])),
    }
}

/// Whether `args` ask for a format this module does not write (ed, side by side, RCS, ifdef).
pub fn wants_library(args: &[OsString]) -> bool {
    args.iter().skip(1).any(|a| {
        let a = a.to_string_lossy();
        matches!(
            a.as_ref(),
            "--ed" | "--side-by-side" | "--rcs" | "-y" | "-e" | "-n" | "--width" | "-W"
        ) || a.starts_with("--ifdef")
            || a.starts_with("--width=")
            || (a.starts_with('-')
                && !a.starts_with("--")
                && a.len() > 2
                && a[1..].chars().all(|c| c.is_ascii_alphabetic())
                && a[1..].contains(['y', 'e', 'n', 'D']))
    })
}

pub fn main(args: Vec<String>) -> i32 {
    let (o, operands) = match parse(&args) {
        Ok(p) => p,
        Err(msg) => {
            eprintln!("diff: {msg}\ndiff: Try 'diff --help' for more information.");
            return 2;
        }
    };
    let mut out = crate::util::Out::stdout();
    let (a, b) = (&operands[0], &operands[1]);
    // Both operands the same standard input: the same file, nothing read.
    if a == "-" && b == "-" {
        return 0;
    }
    let (da, db) = (
        a != "-" && Path::new(a).is_dir(),
        b != "-" && Path::new(b).is_dir(),
    );
    let code = match (da, db) {
        (true, true) => diff_dirs(&o, a, b, &mut out),
        // A directory and a file: the file of the same name in the directory.
        (true, false) => diff_files(&o, &join(a, &base(b)), b, &mut out, false),
        (false, true) => diff_files(&o, a, &join(b, &base(a)), &mut out, false),
        (false, false) => diff_files(&o, a, b, &mut out, false),
    };
    out.flush();
    code
}

fn base(p: &str) -> String {
    p.trim_end_matches('/')
        .rsplit('/')
        .next()
        .unwrap_or(p)
        .to_string()
}

/// `dir/name`, the directory's trailing slashes folded into one, as GNU joins them.
fn join(dir: &str, name: &str) -> String {
    let d = dir.trim_end_matches('/');
    if d.is_empty() {
        format!("/{name}")
    } else {
        format!("{d}/{name}")
    }
}

fn read(path: &str) -> io::Result<Vec<u8>> {
    if path == "-" {
        let mut v = Vec::new();
        io::stdin().read_to_end(&mut v)?;
        Ok(v)
    } else {
        std::fs::read(path)
    }
}

fn diff_dirs(o: &Opts, a: &str, b: &str, out: &mut crate::util::Out) -> i32 {
    let names = |d: &str| -> io::Result<Vec<String>> {
        let mut v: Vec<String> = std::fs::read_dir(d)?
            .filter_map(|e| e.ok().map(|e| e.file_name().to_string_lossy().into_owned()))
            .collect();
        v.sort();
        Ok(v)
    };
    let (la, lb) = match (names(a), names(b)) {
        (Ok(x), Ok(y)) => (x, y),
        (x, y) => {
            for (r, d) in [(x.err(), a), (y.err(), b)] {
                if let Some(e) = r {
                    eprintln!("diff: {d}: {}", crate::util::errno_text(&e));
                }
            }
            return 2;
        }
    };
    let mut all: Vec<&String> = la.iter().chain(lb.iter()).collect();
    all.sort();
    all.dedup();
    let mut worst = 0;
    for n in all {
        let (pa, pb) = (join(a, n), join(b, n));
        let (ina, inb) = (la.contains(n), lb.contains(n));
        let (isa, isb) = (Path::new(&pa).is_dir(), Path::new(&pb).is_dir());
        let both = ina && inb;
        let code = if !both && !o.new_file {
            let (dir, _) = if ina { (a, &pa) } else { (b, &pb) };
            out.write(format!("Only in {}: {n}\n", dir.trim_end_matches('/')).as_bytes());
            1
        } else if isa && isb {
            if o.recursive {
                diff_dirs(o, &pa, &pb, out)
            } else {
                out.write(format!("Common subdirectories: {pa} and {pb}\n").as_bytes());
                0
            }
        } else if (isa || isb) && both {
            let kind = |d: bool| if d { "directory" } else { "regular file" };
            out.write(
                format!(
                    "File {pa} is a {} while file {pb} is a {}\n",
                    kind(isa),
                    kind(isb)
                )
                .as_bytes(),
            );
            1
        } else if isa || isb {
            // -N with a directory on one side only: GNU says so and goes on.
            let (dir, _) = if ina { (a, &pa) } else { (b, &pb) };
            out.write(format!("Only in {}: {n}\n", dir.trim_end_matches('/')).as_bytes());
            1
        } else {
            diff_files(o, &pa, &pb, out, true)
        };
        worst = worst.max(code);
    }
    worst
}

/// Diffs two files; 0 same, 1 different, 2 trouble. `in_dir`: part of a `-r` walk, whose
/// differing files get a `diff OPTIONS A B` line first.
fn diff_files(o: &Opts, a: &str, b: &str, out: &mut crate::util::Out, in_dir: bool) -> i32 {
    let missing = |p: &str| p != "-" && o.new_file && !Path::new(p).exists();
    let load = |p: &str| if missing(p) { Ok(Vec::new()) } else { read(p) };
    let (from, to) = match (load(a), load(b)) {
        (Ok(x), Ok(y)) => (x, y),
        (x, y) => {
            for (r, p) in [(x.err(), a), (y.err(), b)] {
                if let Some(e) = r {
                    eprintln!("diff: {p}: {}", crate::util::errno_text(&e));
                }
            }
            return 2;
        }
    };
    let same = |o: &Opts| {
        if o.report_same {
            out_same(a, b)
        } else {
            String::new()
        }
    };
    if from == to {
        out.write(same(o).as_bytes());
        return 0;
    }
    let binary = !o.text && (from.contains(&0) || to.contains(&0));
    if binary {
        out.write(format!("Binary files {a} and {b} differ\n").as_bytes());
        return 1;
    }
    let la = lines(&from);
    let lb = lines(&to);
    let ka: Vec<String> = la.iter().map(|l| key(o, l)).collect();
    let kb: Vec<String> = lb.iter().map(|l| key(o, l)).collect();
    let changes = changes(
        o,
        &capture_diff_slices(Algorithm::Myers, &ka, &kb),
        &la,
        &lb,
    );
    if changes.is_empty() {
        out.write(same(o).as_bytes());
        return 0;
    }
    if o.brief {
        out.write(format!("Files {a} and {b} differ\n").as_bytes());
        return 1;
    }
    if in_dir {
        let mut head = vec!["diff".to_string()];
        head.extend(o.shown.iter().cloned());
        head.push(a.to_string());
        head.push(b.to_string());
        out.write(format!("{}\n", head.join(" ")).as_bytes());
    }
    let text = match o.format {
        Format::Normal => normal(&changes, &la, &lb, o),
        Format::Unified(n) => {
            let mut s = header(o, "---", 0, a) + &header(o, "+++", 1, b);
            s += &unified(&changes, &la, &lb, n, o);
            s
        }
        Format::Context(n) => {
            let mut s = header(o, "***", 0, a) + &header(o, "---", 1, b);
            s += &context(&changes, &la, &lb, n, o);
            s
        }
    };
    out.write(text.as_bytes());
    1
}

fn out_same(a: &str, b: &str) -> String {
    format!("Files {a} and {b} are identical\n")
}

/// A file's lines, each with its newline when it has one.
fn lines(data: &[u8]) -> Vec<String> {
    data.split_inclusive(|b| *b == b'\n')
        .map(|l| String::from_utf8_lossy(l).into_owned())
        .collect()
}

/// What a line is compared by. GNU treats a missing final newline as white space under -b
/// and -w.
fn key(o: &Opts, line: &str) -> String {
    let mut l = line.strip_suffix('\n').unwrap_or(line).to_string();
    let newline = line.ends_with('\n');
    if o.strip_cr && l.ends_with('\r') {
        l.pop();
    }
    if o.all_space {
        l.retain(|c| !c.is_whitespace());
    } else if o.space_change {
        let mut s = String::new();
        let mut blank = false;
        for c in l.chars() {
            if c.is_whitespace() {
                blank = true;
            } else {
                if blank && !s.is_empty() {
                    s.push(' ');
                }
                blank = false;
                s.push(c);
            }
        }
        if blank && !s.is_empty() {
            s.push(' ');
        }
        l = s.trim_end().to_string();
    }
    if o.case {
        l = l.to_lowercase();
    }
    let blanks_ignored = o.all_space || o.space_change;
    if !newline && !blanks_ignored {
        // The last line without a newline differs from the same text with one.
        l.push('\u{0}');
    }
    l
}

/// One change: lines `a..a_end` of the first file replaced by `b..b_end` of the second.
#[derive(Clone, Copy)]
struct Change {
    a: usize,
    a_end: usize,
    b: usize,
    b_end: usize,
}

/// The diff's changes, with `-B`'s blank-only ones left out.
fn changes(o: &Opts, ops: &[DiffOp], la: &[String], lb: &[String]) -> Vec<Change> {
    let mut out: Vec<Change> = Vec::new();
    for op in ops {
        let c = match *op {
            DiffOp::Equal { .. } => continue,
            DiffOp::Delete {
                old_index,
                old_len,
                new_index,
            } => Change {
                a: old_index,
                a_end: old_index + old_len,
                b: new_index,
                b_end: new_index,
            },
            DiffOp::Insert {
                old_index,
                new_index,
                new_len,
            } => Change {
                a: old_index,
                a_end: old_index,
                b: new_index,
                b_end: new_index + new_len,
            },
            DiffOp::Replace {
                old_index,
                old_len,
                new_index,
                new_len,
            } => Change {
                a: old_index,
                a_end: old_index + old_len,
                b: new_index,
                b_end: new_index + new_len,
            },
        };
        // Adjacent operations are one change (a delete next to an insert is a replacement).
        match out.last_mut() {
            Some(last) if last.a_end == c.a && last.b_end == c.b => {
                last.a_end = c.a_end;
                last.b_end = c.b_end;
            }
            _ => out.push(c),
        }
    }
    if o.blank_lines {
        let blank = |l: &String| l.trim().is_empty();
        out.retain(|c| !(la[c.a..c.a_end].iter().all(blank) && lb[c.b..c.b_end].iter().all(blank)));
    }
    out
}

/// `a,b` of 1-based lines, or one number when the range is one line; an empty range is the
/// line before it.
fn range(start: usize, end: usize) -> String {
    if end == start + 1 {
        format!("{}", start + 1)
    } else if end == start {
        format!("{start}")
    } else {
        format!("{},{end}", start + 1)
    }
}

fn push_line(s: &mut String, prefix: &str, line: &str, o: &Opts) {
    s.push_str(prefix);
    if o.expand_tabs {
        let mut col = 0;
        for c in line.chars() {
            if c == '\t' {
                let n = 8 - col % 8;
                s.push_str(&" ".repeat(n));
                col += n;
            } else {
                s.push(c);
                col += 1;
            }
        }
    } else {
        s.push_str(line);
    }
    if !line.ends_with('\n') {
        s.push_str("\n\\ No newline at end of file\n");
    }
}

fn normal(changes: &[Change], la: &[String], lb: &[String], o: &Opts) -> String {
    let mut s = String::new();
    for c in changes {
        let (del, ins) = (c.a_end > c.a, c.b_end > c.b);
        let cmd = match (del, ins) {
            (true, true) => 'c',
            (true, false) => 'd',
            _ => 'a',
        };
        s += &format!("{}{cmd}{}\n", range(c.a, c.a_end), range(c.b, c.b_end));
        for l in &la[c.a..c.a_end] {
            push_line(&mut s, "< ", l, o);
        }
        if del && ins {
            s += "---\n";
        }
        for l in &lb[c.b..c.b_end] {
            push_line(&mut s, "> ", l, o);
        }
    }
    s
}

/// Changes grouped into hunks: changes closer than `2 * n` equal lines share one.
fn hunks(changes: &[Change], n: usize) -> Vec<&[Change]> {
    let mut out = Vec::new();
    let mut start = 0;
    for i in 1..=changes.len() {
        if i == changes.len() || changes[i].a - changes[i - 1].a_end > 2 * n {
            out.push(&changes[start..i]);
            start = i;
        }
    }
    out
}

/// The hunk's extent with its context: first-file and second-file line ranges.
fn extent(h: &[Change], n: usize, la: usize, lb: usize) -> (usize, usize, usize, usize) {
    let (first, last) = (h[0], h[h.len() - 1]);
    let before = n.min(first.a);
    let after = n.min(la - last.a_end).min(lb - last.b_end);
    (
        first.a - before,
        last.a_end + after,
        first.b - before,
        last.b_end + after,
    )
}

fn unified_range(start: usize, end: usize) -> String {
    match end - start {
        0 => format!("{start},0"),
        1 => format!("{}", start + 1),
        len => format!("{},{len}", start + 1),
    }
}

fn unified(changes: &[Change], la: &[String], lb: &[String], n: usize, o: &Opts) -> String {
    let mut s = String::new();
    for h in hunks(changes, n) {
        let (a0, a1, b0, b1) = extent(h, n, la.len(), lb.len());
        s += &format!(
            "@@ -{} +{} @@\n",
            unified_range(a0, a1),
            unified_range(b0, b1)
        );
        let mut a = a0;
        for c in h {
            for l in &la[a..c.a] {
                push_line(&mut s, " ", l, o);
            }
            for l in &la[c.a..c.a_end] {
                push_line(&mut s, "-", l, o);
            }
            for l in &lb[c.b..c.b_end] {
                push_line(&mut s, "+", l, o);
            }
            a = c.a_end;
        }
        for l in &la[a..a1] {
            push_line(&mut s, " ", l, o);
        }
    }
    s
}

fn context_range(start: usize, end: usize) -> String {
    match end - start {
        0 => format!("{start}"),
        1 => format!("{}", start + 1),
        _ => format!("{},{end}", start + 1),
    }
}

fn context(changes: &[Change], la: &[String], lb: &[String], n: usize, o: &Opts) -> String {
    let mut s = String::new();
    for h in hunks(changes, n) {
        let (a0, a1, b0, b1) = extent(h, n, la.len(), lb.len());
        s += "***************\n";
        s += &format!("*** {} ****\n", context_range(a0, a1));
        let old: Vec<_> = h.iter().map(|c| (c.a, c.a_end, c.b_end > c.b)).collect();
        context_side(&mut s, la, a0, a1, &old, "- ", o);
        s += &format!("--- {} ----\n", context_range(b0, b1));
        let new: Vec<_> = h.iter().map(|c| (c.b, c.b_end, c.a_end > c.a)).collect();
        context_side(&mut s, lb, b0, b1, &new, "+ ", o);
    }
    s
}

/// One file's side of a context hunk, `lines[start..end]`, when the hunk changes anything on
/// it: each change (its range on this side, and whether the other side changed too, which
/// makes it `! `) among lines of context.
fn context_side(
    s: &mut String,
    lines: &[String],
    start: usize,
    end: usize,
    changes: &[(usize, usize, bool)],
    alone: &str,
    o: &Opts,
) {
    if !changes.iter().any(|(from, to, _)| to > from) {
        return;
    }
    let mut at = start;
    for &(from, to, both) in changes {
        for l in &lines[at..from] {
            push_line(s, "  ", l, o);
        }
        let mark = if both { "! " } else { alone };
        for l in &lines[from..to] {
            push_line(s, mark, l, o);
        }
        at = to;
    }
    for l in &lines[at..end] {
        push_line(s, "  ", l, o);
    }
}

/// `--- NAME\tTIME` (or the label given for that side), the time as GNU writes it.
fn header(o: &Opts, mark: &str, side: usize, path: &str) -> String {
    if let Some(label) = o.labels.get(side) {
        return format!("{mark} {label}\n");
    }
    let modified = if path == "-" {
        Some(std::time::SystemTime::now())
    } else {
        std::fs::metadata(path).and_then(|m| m.modified()).ok()
    };
    let (secs, nanos) = modified
        .and_then(|t| t.duration_since(std::time::UNIX_EPOCH).ok())
        .map_or((0, 0), |d| (d.as_secs() as i64, d.subsec_nanos()));
    let (y, m, d) = guest_rt::civil_from_days(secs.div_euclid(86_400));
    let rem = secs.rem_euclid(86_400);
    format!(
        "{mark} {path}\t{y:04}-{m:02}-{d:02} {:02}:{:02}:{:02}.{nanos:09} +0000\n",
        rem / 3600,
        rem / 60 % 60,
        rem % 60
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn opts(args: &[&str]) -> Opts {
        let mut v = vec!["diff".to_string()];
        v.extend(args.iter().map(|s| s.to_string()));
        v.extend(["a".to_string(), "b".to_string()]);
        parse(&v).map(|(o, _)| o).unwrap_or_else(|e| panic!("{e}"))
    }

    fn udiff(o: &Opts, a: &str, b: &str) -> String {
        let (la, lb) = (lines(a.as_bytes()), lines(b.as_bytes()));
        let ka: Vec<String> = la.iter().map(|l| key(o, l)).collect();
        let kb: Vec<String> = lb.iter().map(|l| key(o, l)).collect();
        let c = changes(
            o,
            &capture_diff_slices(Algorithm::Myers, &ka, &kb),
            &la,
            &lb,
        );
        unified(&c, &la, &lb, 3, o)
    }

    #[test]
    fn clusters_and_whitespace_keys() {
        let o = opts(&["-ubw"]);
        assert!(o.space_change && o.all_space && o.format == Format::Unified(3));
        assert!(opts(&["-U1"]).format == Format::Unified(1));
        assert!(opts(&["-5"]).format == Format::Unified(5));
        let b = opts(&["-b"]);
        assert_eq!(key(&b, "a\t \tc\n"), key(&b, "a \t c\n"));
        assert_eq!(key(&b, "abc "), key(&b, "abc"));
        assert_ne!(key(&opts(&[]), "x"), key(&opts(&[]), "x\n"));
    }

    #[test]
    fn hunks_take_context_from_the_first_file() {
        let o = opts(&["-ub"]);
        assert_eq!(
            udiff(&o, "a c\n", "abc\na  c\ndef\n"),
            "@@ -1 +1,3 @@\n+abc\n a c\n+def\n"
        );
        let b = opts(&["-uB"]);
        assert_eq!(udiff(&b, "\na\n\n", "a\n"), "");
        assert_eq!(udiff(&b, "\nb\n\n", "a\n"), "@@ -1,3 +1 @@\n-\n-b\n-\n+a\n");
    }
}
