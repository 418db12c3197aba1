//! cp's permission bits, which uutils cp cannot set under WASI (std's `set_permissions` has no
//! WASI call behind it): `cp -p` and `cp -a` failed with "Function not implemented", and a
//! plain `cp` gave every new file 0644, so a copied script lost its execute bits.
//!
//! uu_cp runs without mode preservation; before it, the (source, target) pairs it will copy
//! are worked out by cp's rules, and after it the modes are set through the host
//! (`guest_rt::set_mode`): the source's bits with `-p`/`-a`/`--preserve=mode`, and otherwise,
//! for a target that did not exist before, the source's bits less the umask, as GNU cp
//! creates files. A target that existed keeps its mode unless the mode is preserved.

use std::ffi::OsString;
use std::path::{Path, PathBuf};

/// What of cp's command line decides which files get which mode.
#[derive(Default)]
struct Plan {
    preserve_mode: bool,
    /// Set here too: uu_cp's way fails on a symlink under WASI ("Wasm not implemented"),
    /// which `cp -a` of any tree with a link met.
    preserve_times: bool,
    /// `--no-preserve=mode`: new files keep the mode they were created with (0666 less the
    /// umask), not the source's bits.
    default_modes: bool,
    recursive: bool,
    /// Symlinks followed everywhere (`-L`), on the command line only (`-H`), or never (`-P`,
    /// `-d`, `-a`); `None`: cp's default for the mode (follow unless recursive).
    deref: Option<Deref>,
    no_target_dir: bool,
    target_dir: Option<String>,
    /// Links or attributes only, or targets laid out by `--parents`: modes are left alone.
    skip: bool,
    no_clobber: bool,
    operands: Vec<String>,
}

#[derive(Clone, Copy, PartialEq)]
enum Deref {
    Always,
    CommandLine,
    Never,
}

/// Reads cp's arguments (after argv[0]) and returns the arguments to give uu_cp.
fn plan(args: &[OsString]) -> (Plan, Vec<OsString>) {
    let mut p = Plan::default();
    let mut out = Vec::new();
    let mut it = args.iter();
    let mut operands_only = false;
    // Where each operand sits in `out`.
    let mut slots = Vec::new();
    while let Some(a) = it.next() {
        let Some(s) = a.to_str() else {
            if !operands_only {
                out.push(a.clone());
            }
            p.skip = true;
            continue;
        };
        if operands_only || s == "-" || !s.starts_with('-') {
            p.operands.push(s.to_string());
            slots.push(out.len());
            out.push(a.clone());
            continue;
        }
        if s == "--" {
            operands_only = true;
            out.push(a.clone());
            continue;
        }
        if let Some(long) = s.strip_prefix("--") {
            let (name, value) = match long.split_once('=') {
                Some((n, v)) => (n, Some(v)),
                None => (long, None),
            };
            match name {
                "archive" => {
                    p.preserve_mode = true;
                    p.preserve_times = true;
                    p.recursive = true;
                    p.deref = Some(Deref::Never);
                    out.push("-dR".into());
                    out.push("--preserve=links".into());
                    continue;
                }
                "preserve" => {
                    let list = value.unwrap_or("mode,ownership,timestamps");
                    let mut kept = Vec::new();
                    for attr in list.split(',') {
                        match attr {
                            "mode" => p.preserve_mode = true,
                            "timestamps" => p.preserve_times = true,
                            "all" => {
                                p.preserve_mode = true;
                                p.preserve_times = true;
                                kept.push("links");
                            }
                            // uutils has no ownership under WASI; the sandbox has one owner.
                            "ownership" => {}
                            other => kept.push(other),
                        }
                    }
                    if !kept.is_empty() {
                        out.push(format!("--preserve={}", kept.join(",")).into());
                    }
                    continue;
                }
                "no-preserve" => {
                    let list = value.unwrap_or("");
                    for x in list.split(',') {
                        if x == "mode" || x == "all" {
                            p.preserve_mode = false;
                            p.default_modes = true;
                        }
                        if x == "timestamps" || x == "all" {
                            p.preserve_times = false;
                        }
                    }
                }
                "recursive" => p.recursive = true,
                "dereference" => {
                    p.deref = Some(Deref::Always);
                    continue;
                }
                "no-dereference" => {
                    p.deref = Some(Deref::Never);
                    continue;
                }
                "no-target-directory" => p.no_target_dir = true,
                "no-clobber" => p.no_clobber = true,
                "target-directory" => match value {
                    Some(v) => p.target_dir = Some(v.to_string()),
                    None => {
                        out.push(a.clone());
                        if let Some(v) = it.next() {
                            p.target_dir = v.to_str().map(str::to_string);
                            out.push(v.clone());
                        }
                        continue;
                    }
                },
                "parents" | "link" | "symbolic-link" | "attributes-only" => p.skip = true,
                _ => {}
            }
            out.push(a.clone());
            continue;
        }
        // A cluster of short options; `-t` takes the rest or the next argument.
        let mut kept = String::from("-");
        let chars: Vec<char> = s[1..].chars().collect();
        let mut i = 0;
        while i < chars.len() {
            match chars[i] {
                'p' => {
                    p.preserve_mode = true;
                    p.preserve_times = true;
                }
                'a' => {
                    p.preserve_mode = true;
                    p.preserve_times = true;
                    p.recursive = true;
                    p.deref = Some(Deref::Never);
                    kept.push_str("dR");
                    out.push("--preserve=links".into());
                }
                'r' | 'R' => {
                    p.recursive = true;
                    kept.push(chars[i]);
                }
                'L' => p.deref = Some(Deref::Always),
                'H' => p.deref = Some(Deref::CommandLine),
                'P' => p.deref = Some(Deref::Never),
                'd' => {
                    p.deref = Some(Deref::Never);
                    kept.push('d');
                }
                'T' => {
                    p.no_target_dir = true;
                    kept.push('T');
                }
                'n' => {
                    p.no_clobber = true;
                    kept.push('n');
                }
                'l' | 's' => {
                    p.skip = true;
                    kept.push(chars[i]);
                }
                't' => {
                    let rest: String = chars[i + 1..].iter().collect();
                    if kept.len() > 1 {
                        out.push(std::mem::replace(&mut kept, "-".into()).into());
                    }
                    if rest.is_empty() {
                        out.push("-t".into());
                        if let Some(v) = it.next() {
                            p.target_dir = v.to_str().map(str::to_string);
                            out.push(v.clone());
                        }
                    } else {
                        p.target_dir = Some(rest.clone());
                        out.push(format!("-t{rest}").into());
                    }
                    i = chars.len();
                    continue;
                }
                c => kept.push(c),
            }
            i += 1;
        }
        if kept.len() > 1 {
            out.push(kept.into());
        }
    }
    follow_command_line_links(&p, &slots, &mut out);
    // Of -L, -H and -P the last one given decides, as in GNU cp; uu_cp lets -L win whatever
    // the order, so it is given only the one that counts (first, before any `--`).
    let deref = match p.deref {
        Some(Deref::Always) => Some("-L"),
        Some(Deref::CommandLine) => Some("-H"),
        Some(Deref::Never) => Some("-P"),
        None => None,
    };
    if let Some(flag) = deref {
        out.insert(0, flag.into());
    }
    (p, out)
}

/// `-H` with `-R`: a source operand that is a symlink to a directory is copied as that
/// directory, with the symlinks inside it kept. uu_cp copies it as a file instead (and fails:
/// std's copy refuses a directory), so such an operand is given with a trailing `/`, which
/// resolves the link itself and nothing below it; the copy keeps the operand's name.
fn follow_command_line_links(p: &Plan, slots: &[usize], out: &mut [OsString]) {
    if !p.recursive || p.deref != Some(Deref::CommandLine) {
        return;
    }
    let sources = match p.target_dir {
        Some(_) => slots,
        None => &slots[..slots.len().saturating_sub(1)],
    };
    for &at in sources {
        let Some(s) = out[at].to_str() else {
            continue;
        };
        let path = Path::new(s);
        let is_link = std::fs::symlink_metadata(path).is_ok_and(|m| m.file_type().is_symlink());
        if is_link && is_dir(path, true) {
            out[at] = format!("{s}/").into();
        }
    }
}

/// One file cp will make: where from, where to, whether the target was there before, and
/// whether the source's own mode (not a symlink's target's) is what is copied.
struct Pair {
    source: PathBuf,
    target: PathBuf,
    existed: bool,
    follow: bool,
}

fn exists(path: &Path) -> bool {
    std::fs::symlink_metadata(path).is_ok()
}

pub(crate) fn is_dir(path: &Path, follow: bool) -> bool {
    let m = if follow {
        std::fs::metadata(path)
    } else {
        std::fs::symlink_metadata(path)
    };
    m.is_ok_and(|m| m.is_dir())
}

/// The pairs cp will copy, worked out before it runs.
fn pairs(p: &Plan) -> Vec<Pair> {
    let mut sources = p.operands.clone();
    let dest = match &p.target_dir {
        Some(d) => d.clone(),
        None => match sources.pop() {
            Some(d) if !sources.is_empty() => d,
            _ => return Vec::new(),
        },
    };
    let into_dir = p.target_dir.is_some()
        || (!p.no_target_dir && (sources.len() > 1 || is_dir(Path::new(&dest), true)));
    let top_follow = match p.deref {
        Some(Deref::Always) | Some(Deref::CommandLine) => true,
        Some(Deref::Never) => false,
        None => !p.recursive,
    };
    let mut out = Vec::new();
    for s in &sources {
        let source = PathBuf::from(s);
        let target = if into_dir {
            let name = Path::new(s.trim_end_matches('/'))
                .file_name()
                .map(|n| n.to_os_string())
                .unwrap_or_default();
            Path::new(&dest).join(name)
        } else {
            PathBuf::from(&dest)
        };
        if p.recursive && is_dir(&source, top_follow) {
            let inner = p.deref == Some(Deref::Always);
            walk(&source, &target, inner, &mut out);
        } else {
            out.push(Pair {
                existed: exists(&target),
                source,
                target,
                follow: top_follow,
            });
        }
    }
    out
}

fn walk(source: &Path, target: &Path, follow: bool, out: &mut Vec<Pair>) {
    out.push(Pair {
        source: source.to_path_buf(),
        target: target.to_path_buf(),
        existed: exists(target),
        follow: true,
    });
    let Ok(entries) = std::fs::read_dir(source) else {
        return;
    };
    for e in entries.flatten() {
        let (s, t) = (e.path(), target.join(e.file_name()));
        if is_dir(&s, follow) {
            walk(&s, &t, follow, out);
        } else {
            out.push(Pair {
                existed: exists(&t),
                source: s,
                target: t,
                follow,
            });
        }
    }
}

/// Sets the modes the copy should have had; false after a failure (reported as GNU cp does).
fn apply(p: &Plan, pairs: &[Pair]) -> bool {
    let mut ok = true;
    for pair in pairs {
        // A symlink copied as a symlink has no bits of its own to set.
        let source_is_link =
            std::fs::symlink_metadata(&pair.source).is_ok_and(|m| m.file_type().is_symlink());
        if (source_is_link && !pair.follow)
            || std::fs::symlink_metadata(&pair.target).is_ok_and(|m| m.file_type().is_symlink())
        {
            continue;
        }
        let Some(source_mode) = guest_rt::path_mode(&pair.source, true) else {
            continue;
        };
        let Some(made) = guest_rt::path_mode(&pair.target, false) else {
            continue;
        };
        if pair.existed && p.no_clobber {
            continue;
        }
        if p.preserve_times {
            let times = std::fs::metadata(&pair.source)
                .and_then(|m| guest_rt::set_times(&pair.target, m.accessed()?, m.modified()?));
            if let Err(e) = times {
                eprintln!("cp: preserving times for '{}': {e}", pair.target.display());
                ok = false;
            }
        }
        let mode = if p.preserve_mode {
            source_mode
        } else if pair.existed || p.default_modes {
            continue;
        } else {
            // The new target got 0666 or 0777 less the umask; the umask's execute bits are
            // taken to follow its read bits (true of 022, 027, 077, 002 and 007).
            let allowed = made | ((made & 0o444) >> 2);
            source_mode & 0o777 & allowed
        };
        if mode == made {
            continue;
        }
        if let Err(e) = guest_rt::set_mode(&pair.target, mode) {
            eprintln!(
                "cp: preserving permissions for '{}': {e}",
                pair.target.display()
            );
            ok = false;
        }
    }
    ok
}

/// cp: uu_cp for the copying, then the modes.
pub fn main(args: std::vec::IntoIter<OsString>) -> i32 {
    let mut args: Vec<OsString> = args.collect();
    let argv0 = if args.is_empty() {
        OsString::from("cp")
    } else {
        args.remove(0)
    };
    let (plan, mut rest) = plan(&args);
    let pairs = if plan.skip { Vec::new() } else { pairs(&plan) };
    if plan.skip && plan.preserve_times {
        // Links or `--parents`: no pairs here, so uu_cp keeps the timestamps itself.
        rest.push("--preserve=timestamps".into());
    }
    let status = uu_cp::uumain(
        std::iter::once(argv0)
            .chain(rest)
            .collect::<Vec<_>>()
            .into_iter(),
    );
    if !apply(&plan, &pairs) && status == 0 {
        return 1;
    }
    status
}
