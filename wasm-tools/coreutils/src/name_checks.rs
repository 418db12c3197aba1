//! ln's and mv's refusals in GNU's words, where uu_ln and uu_mv (under WASI) word or decide
//! them differently:
//!
//! - `ln`: GNU says "failed to create hard link 'b': File exists" where uu_ln says "failed to
//!   create hard link 'b' => 'a': Already exists", and "failed to access 'nosuch'" for a
//!   missing target where uu_ln says "failed to create hard link 'x' => 'nosuch'".
//! - `mv`: moving one name of a file onto another name of the same file is "mv: 'a' and 'b'
//!   are the same file" (status 1); uucore's hard-link check is Unix-only, so uu_mv renamed,
//!   which for two names of one file does nothing, and reported success.
//!
//! Before the uutils program runs, each (source, destination) pair is checked for those cases;
//! a pair that fails is reported here and left out of what the program is given. Everything
//! else (options, backups, the other errors) is the program's own.

use std::collections::HashSet;
use std::ffi::OsString;
use std::path::{Path, PathBuf};

use crate::cp_modes::is_dir;

/// What of a command line decides its (source, destination) pairs.
#[derive(Default)]
struct Line {
    /// Short flags and long option names seen.
    flags: HashSet<String>,
    target_dir: Option<String>,
    /// Each operand's index in the arguments.
    operands: Vec<usize>,
    /// An option this wrapper does not know (`--help`, a typo) or an argument that is not
    /// UTF-8: the line goes to the program untouched.
    opaque: bool,
}

impl Line {
    fn has(&self, names: &[&str]) -> bool {
        names.iter().any(|n| self.flags.contains(*n))
    }
}

/// Reads a line whose short flags are `short`, whose short options `t` and `S` take a value,
/// and whose long options are `long` (those in `long_valued` take one).
fn read(args: &[OsString], short: &str, long: &[&str], long_valued: &[&str]) -> Line {
    let mut l = Line::default();
    let mut only_operands = false;
    let mut i = 0;
    while i < args.len() {
        let Some(a) = args[i].to_str() else {
            l.opaque = true;
            return l;
        };
        i += 1;
        if only_operands || a == "-" || !a.starts_with('-') {
            l.operands.push(i - 1);
            continue;
        }
        if a == "--" {
            only_operands = true;
            continue;
        }
        let value_at = |i: &mut usize| {
            *i += 1;
            args.get(*i - 1)
                .and_then(|v| v.to_str())
                .map(str::to_string)
        };
        if let Some(long_opt) = a.strip_prefix("--") {
            let (name, value) = match long_opt.split_once('=') {
                Some((n, v)) => (n, Some(v.to_string())),
                None => (long_opt, None),
            };
            if !long.contains(&name) && !long_valued.contains(&name) {
                l.opaque = true;
                return l;
            }
            // `--backup` and `--update` take their value only after `=`.
            let value = match value {
                None if name == "target-directory" || name == "suffix" || name == "context" => {
                    value_at(&mut i)
                }
                v => v,
            };
            if name == "target-directory" {
                l.target_dir = value;
            }
            l.flags.insert(name.to_string());
            continue;
        }
        let flags: Vec<char> = a[1..].chars().collect();
        for (k, &c) in flags.iter().enumerate() {
            if c == 't' || c == 'S' {
                let rest: String = flags[k + 1..].iter().collect();
                let value = if rest.is_empty() {
                    value_at(&mut i)
                } else {
                    Some(rest)
                };
                if c == 't' {
                    l.target_dir = value;
                }
                l.flags.insert(c.to_string());
                break;
            }
            if !short.contains(c) {
                l.opaque = true;
                return l;
            }
            l.flags.insert(c.to_string());
        }
    }
    l
}

/// The (source operand index, destination) pairs; `alone_into_cwd` is ln's one-operand form.
fn pairs(
    l: &Line,
    args: &[OsString],
    no_target_dir: bool,
    follow_dest: bool,
    alone_into_cwd: bool,
) -> Vec<(usize, PathBuf)> {
    let text = |at: usize| args[at].to_str().unwrap_or_default();
    let mut sources = l.operands.clone();
    let (dir, into_dir) = match &l.target_dir {
        Some(d) => (PathBuf::from(d), true),
        None if sources.len() == 1 && alone_into_cwd => (PathBuf::from("."), true),
        None => {
            if sources.len() < 2 {
                return Vec::new();
            }
            let last = sources.pop().expect("two operands");
            let dest = PathBuf::from(text(last));
            let into = !no_target_dir && (sources.len() > 1 || is_dir(&dest, follow_dest));
            (dest, into)
        }
    };
    sources
        .into_iter()
        .map(|at| {
            let to = if into_dir {
                let name = Path::new(text(at).trim_end_matches('/'))
                    .file_name()
                    .map(|n| n.to_os_string())
                    .unwrap_or_default();
                dir.join(name)
            } else {
                dir.clone()
            };
            (at, to)
        })
        .collect()
}

/// Runs `program` on the arguments less the `dropped` sources, unless every pair was dropped;
/// the status is 1 when any was.
fn run_rest(
    program: fn(std::vec::IntoIter<OsString>) -> i32,
    argv0: OsString,
    args: Vec<OsString>,
    dropped: &[usize],
    pairs: usize,
) -> i32 {
    let status = i32::from(!dropped.is_empty());
    if !dropped.is_empty() && dropped.len() == pairs {
        return status;
    }
    let rest: Vec<OsString> = args
        .into_iter()
        .enumerate()
        .filter(|(n, _)| !dropped.contains(n))
        .map(|(_, a)| a)
        .collect();
    let code = program(
        std::iter::once(argv0)
            .chain(rest)
            .collect::<Vec<_>>()
            .into_iter(),
    );
    if code != 0 { code } else { status }
}

fn split_argv0(args: std::vec::IntoIter<OsString>, name: &str) -> (OsString, Vec<OsString>) {
    let mut args: Vec<OsString> = args.collect();
    let argv0 = if args.is_empty() {
        OsString::from(name)
    } else {
        args.remove(0)
    };
    (argv0, args)
}

pub fn ln(args: std::vec::IntoIter<OsString>) -> i32 {
    let (argv0, args) = split_argv0(args, "ln");
    let l = read(
        &args,
        "sfibLPTnrvdF",
        &[
            "symbolic",
            "force",
            "interactive",
            "logical",
            "physical",
            "no-target-directory",
            "no-dereference",
            "relative",
            "verbose",
            "directory",
        ],
        &["target-directory", "suffix", "backup"],
    );
    let mut dropped = Vec::new();
    let mut count = 0;
    if !l.opaque {
        let symbolic = l.has(&["s", "symbolic"]);
        let replaces = l.has(&[
            "f",
            "i",
            "b",
            "S",
            "force",
            "interactive",
            "backup",
            "suffix",
        ]);
        let logical = l.has(&["L", "logical"]) && !l.has(&["P", "physical"]);
        let kind = if symbolic { "symbolic" } else { "hard" };
        let no_target = l.has(&["T", "no-target-directory"]);
        let follow_dest = !l.has(&["n", "no-dereference"]);
        for (at, link) in pairs(&l, &args, no_target, follow_dest, true) {
            count += 1;
            let target = Path::new(&args[at]);
            if !symbolic {
                let found = if logical {
                    std::fs::metadata(target)
                } else {
                    std::fs::symlink_metadata(target)
                };
                if let Err(e) = found {
                    eprintln!(
                        "ln: failed to access '{}': {}",
                        target.display(),
                        guest_rt::errno_text(&e)
                    );
                    dropped.push(at);
                    continue;
                }
            }
            if !replaces && std::fs::symlink_metadata(&link).is_ok() {
                eprintln!(
                    "ln: failed to create {kind} link '{}': File exists",
                    link.display()
                );
                dropped.push(at);
            }
        }
    }
    run_rest(uu_ln::uumain, argv0, args, &dropped, count)
}

pub fn mv(args: std::vec::IntoIter<OsString>) -> i32 {
    let (argv0, args) = split_argv0(args, "mv");
    let l = read(
        &args,
        "finbTuvZ",
        &[
            "force",
            "interactive",
            "no-clobber",
            "no-target-directory",
            "strip-trailing-slashes",
            "verbose",
            "debug",
            "no-copy",
        ],
        &["target-directory", "suffix", "backup", "update", "context"],
    );
    let mut dropped = Vec::new();
    let mut count = 0;
    if !l.opaque && !l.has(&["b", "S", "backup", "suffix"]) {
        let no_target = l.has(&["T", "no-target-directory"]);
        for (at, to) in pairs(&l, &args, no_target, true, false) {
            count += 1;
            let from = Path::new(&args[at]);
            let (Ok(a), Ok(b)) = (
                std::fs::symlink_metadata(from),
                std::fs::symlink_metadata(&to),
            ) else {
                continue;
            };
            if a.is_dir() || b.is_dir() {
                continue;
            }
            let id = guest_rt::file_id(from, false);
            if id.is_some() && id == guest_rt::file_id(&to, false) {
                eprintln!(
                    "mv: '{}' and '{}' are the same file",
                    from.display(),
                    to.display()
                );
                dropped.push(at);
            }
        }
    }
    run_rest(uu_mv::uumain, argv0, args, &dropped, count)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn os(v: &[&str]) -> Vec<OsString> {
        v.iter().map(OsString::from).collect()
    }

    #[test]
    fn pairs_follow_the_command_forms() {
        let a = os(&["-s", "x", "y"]);
        let l = read(&a, "s", &[], &[]);
        assert!(l.has(&["s"]));
        assert_eq!(
            pairs(&l, &a, false, true, true),
            vec![(1, PathBuf::from("y"))]
        );
        let a = os(&["-t", "/nonexistent-dir", "a", "b/c"]);
        let l = read(&a, "", &[], &["target-directory"]);
        assert_eq!(
            pairs(&l, &a, false, true, true),
            vec![
                (2, PathBuf::from("/nonexistent-dir/a")),
                (3, PathBuf::from("/nonexistent-dir/c"))
            ]
        );
        let a = os(&["dir/file"]);
        let l = read(&a, "", &[], &[]);
        assert_eq!(
            pairs(&l, &a, false, true, true),
            vec![(0, PathBuf::from("./file"))]
        );
        assert!(pairs(&l, &a, false, true, false).is_empty());
        assert!(read(&os(&["--help"]), "f", &["force"], &[]).opaque);
        assert!(read(&os(&["-fv", "a", "b"]), "fv", &[], &[]).has(&["f"]));
    }
}
