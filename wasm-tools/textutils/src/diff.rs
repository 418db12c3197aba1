//! diff and cmp on top of the uutils `diffutils` library (its own entry points read the process
//! arguments directly, which a multicall binary cannot hand over). Adds `-r` for directories,
//! which the library lacks, in GNU's output shape (`Only in DIR: NAME`, `diff -r A B` headers).

use diffutilslib::params::{Format, Params, parse_params};
use diffutilslib::{cmp, context_diff, ed_diff, normal_diff, side_diff, unified_diff};
use std::ffi::OsString;
use std::io::{self, Read, Write};
use std::path::Path;

fn read(path: &OsString) -> io::Result<Vec<u8>> {
    if path == "-" {
        let mut v = Vec::new();
        io::stdin().read_to_end(&mut v).map(|_| v)
    } else {
        std::fs::read(path)
    }
}

/// Diffs two files; returns 0 (same), 1 (different) or 2 (trouble).
fn diff_files(params: &Params, out: &mut dyn Write) -> i32 {
    let from = read(&params.from);
    let to = read(&params.to);
    let (from, to) = match (from, to) {
        (Ok(a), Ok(b)) => (a, b),
        (a, b) => {
            for (r, p) in [(a.err(), &params.from), (b.err(), &params.to)] {
                if let Some(e) = r {
                    eprintln!(
                        "diff: {}: {}",
                        p.to_string_lossy(),
                        crate::util::errno_text(&e)
                    );
                }
            }
            return 2;
        }
    };
    if from == to {
        if params.report_identical_files {
            let _ = writeln!(
                out,
                "Files {} and {} are identical",
                params.from.to_string_lossy(),
                params.to.to_string_lossy()
            );
        }
        return 0;
    }
    let result = match params.format {
        Format::Normal => collapse_single_line_ranges(&normal_diff::diff(&from, &to, params)),
        Format::Unified => unified_diff::diff(&from, &to, params),
        Format::Context => context_diff::diff(&from, &to, params),
        Format::Ed => match ed_diff::diff(&from, &to, params) {
            Ok(r) => r,
            Err(e) => {
                eprintln!("diff: {e}");
                return 2;
            }
        },
        Format::SideBySide => {
            let mut buf = Vec::new();
            side_diff::diff(&from, &to, &mut buf, params);
            buf
        }
    };
    if result.is_empty() {
        return 0;
    }
    let written = if params.brief {
        writeln!(
            out,
            "Files {} and {} differ",
            params.from.to_string_lossy(),
            params.to.to_string_lossy()
        )
    } else {
        out.write_all(&result)
    };
    if written.is_err() {
        return 2;
    }
    1
}

fn names(dir: &Path) -> io::Result<Vec<OsString>> {
    let mut v: Vec<OsString> = std::fs::read_dir(dir)?
        .filter_map(|e| e.ok().map(|e| e.file_name()))
        .collect();
    v.sort();
    Ok(v)
}

fn diff_dirs(params: &Params, header: &str, out: &mut dyn Write) -> i32 {
    let (a, b) = (Path::new(&params.from), Path::new(&params.to));
    let (la, lb) = match (names(a), names(b)) {
        (Ok(x), Ok(y)) => (x, y),
        _ => {
            eprintln!("diff: cannot read directories");
            return 2;
        }
    };
    let mut all: Vec<&OsString> = la.iter().chain(lb.iter()).collect();
    all.sort();
    all.dedup();
    let mut worst = 0;
    for n in all {
        let pa = a.join(n);
        let pb = b.join(n);
        let code = match (la.contains(n), lb.contains(n)) {
            (true, false) => {
                let _ = writeln!(out, "Only in {}: {}", a.display(), n.to_string_lossy());
                1
            }
            (false, true) => {
                let _ = writeln!(out, "Only in {}: {}", b.display(), n.to_string_lossy());
                1
            }
            _ => {
                let mut sub = params.clone();
                sub.from = pa.clone().into_os_string();
                sub.to = pb.clone().into_os_string();
                match (pa.is_dir(), pb.is_dir()) {
                    (true, true) => diff_dirs(&sub, header, out),
                    (false, false) => {
                        let mut buf = Vec::new();
                        let c = diff_files(&sub, &mut buf);
                        if c == 1 && !params.brief {
                            let _ = writeln!(out, "{header} {} {}", pa.display(), pb.display());
                        }
                        let _ = out.write_all(&buf);
                        c
                    }
                    (da, _) => {
                        let kind = |d: bool| if d { "directory" } else { "regular file" };
                        let _ = writeln!(
                            out,
                            "File {} is a {} while file {} is a {}",
                            pa.display(),
                            kind(da),
                            pb.display(),
                            kind(!da)
                        );
                        1
                    }
                }
            }
        };
        worst = worst.max(code);
    }
    worst
}

pub fn diff_main(args: Vec<OsString>) -> i32 {
    let mut recursive = false;
    let mut kept = Vec::new();
    let mut header_opts = Vec::new();
    for (i, a) in args.into_iter().enumerate() {
        let s = a.to_string_lossy().into_owned();
        if i > 0 && (s == "-r" || s == "--recursive") {
            recursive = true;
            header_opts.push("-r".to_string());
            continue;
        }
        // Short option clusters such as -ru: pull the r out, keep the rest.
        if i > 0
            && s.starts_with('-')
            && !s.starts_with("--")
            && s.len() > 2
            && s.contains('r')
            && s[1..].chars().all(|c| c.is_ascii_alphabetic())
        {
            recursive = true;
            header_opts.push(s.clone());
            kept.push(OsString::from(s.replace('r', "")));
            continue;
        }
        if i > 0 && s.starts_with('-') && s != "-" {
            header_opts.push(s.clone());
        }
        kept.push(a);
    }
    let params = match parse_params(kept.into_iter().peekable()) {
        Ok(p) => p,
        Err(e) => {
            eprintln!("{e}");
            return 2;
        }
    };
    let mut out = crate::util::Out::stdout();
    let both_dirs = Path::new(&params.from).is_dir() && Path::new(&params.to).is_dir();
    let code = if both_dirs && recursive {
        let header = std::iter::once("diff".to_string())
            .chain(header_opts)
            .collect::<Vec<_>>()
            .join(" ");
        diff_dirs(&params, &header, &mut out)
    } else if both_dirs {
        eprintln!("diff: comparing directories needs -r in this build");
        2
    } else {
        diff_files(&params, &mut out)
    };
    out.flush();
    code
}

pub fn cmp_main(args: Vec<OsString>) -> i32 {
    let quiet = args
        .iter()
        .skip(1)
        .any(|a| a == "-s" || a == "--quiet" || a == "--silent");
    let params = match cmp::parse_params(args.into_iter().peekable()) {
        Ok(p) => p,
        Err(e) => {
            eprintln!("{e}");
            return 2;
        }
    };
    match cmp::cmp(&params) {
        Ok(cmp::Cmp::Equal) => 0,
        Ok(cmp::Cmp::Different) => 1,
        Err(e) => {
            if !quiet {
                eprintln!("{e}");
            }
            2
        }
    }
}

/// The diffutils library writes a one-line range as `4,4` in some normal-format commands
/// (`3a4,4`) where GNU diff writes `4`. Command lines are the only lines of normal output that
/// start with a digit (content lines start with `<`, `>` or `---`), so only those are touched.
fn collapse_single_line_ranges(out: &[u8]) -> Vec<u8> {
    let mut fixed = Vec::with_capacity(out.len());
    for line in out.split_inclusive(|b| *b == b'\n') {
        if !line.first().is_some_and(u8::is_ascii_digit) {
            fixed.extend_from_slice(line);
            continue;
        }
        let text = String::from_utf8_lossy(line);
        let body = text.trim_end_matches('\n');
        let Some(at) = body.find(['a', 'c', 'd']) else {
            fixed.extend_from_slice(line);
            continue;
        };
        let collapse = |range: &str| match range.split_once(',') {
            Some((a, b)) if a == b => a.to_string(),
            _ => range.to_string(),
        };
        fixed.extend_from_slice(collapse(&body[..at]).as_bytes());
        fixed.push(body.as_bytes()[at]);
        fixed.extend_from_slice(collapse(&body[at + 1..]).as_bytes());
        if line.ends_with(b"\n") {
            fixed.push(b'\n');
        }
    }
    fixed
}

#[cfg(test)]
mod tests {
    use super::collapse_single_line_ranges;

    #[test]
    fn one_line_ranges_are_written_as_gnu_does() {
        let got =
            collapse_single_line_ranges(b"2c2\n< two\n---\n> 2\n3a4,4\n> four\n5,5d4\n< 5,5x\n");
        assert_eq!(got, b"2c2\n< two\n---\n> 2\n3a4\n> four\n5d4\n< 5,5x\n");
    }
}
