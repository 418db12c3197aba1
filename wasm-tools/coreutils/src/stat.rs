//! stat, written here because uu_stat 0.12 does not build for WASI: it needs statfs, device
//! numbers, uid/gid name lookups and Unix mode bits that WASI does not have. Output follows GNU
//! stat's default layout, `-c/--format`, `--printf`, `-t` and `-L`. Under WASI the owner is
//! always uid/gid 0 (`root`) and the permission bits come from the host
//! (`guest_rt::path_mode`), since WASI's filestat has none.

use std::fs::Metadata;
use std::io::Write;
use std::time::{SystemTime, UNIX_EPOCH};

struct Info {
    mode: u32,
    uid: u32,
    gid: u32,
    dev: u64,
    ino: u64,
    nlink: u64,
    atime: (i64, u32),
    mtime: (i64, u32),
    ctime: (i64, u32),
}

// Only the non-Unix path reads times through std.
#[cfg_attr(unix, allow(dead_code))]
fn split(t: std::io::Result<SystemTime>) -> (i64, u32) {
    match t {
        Ok(t) => match t.duration_since(UNIX_EPOCH) {
            Ok(d) => (d.as_secs() as i64, d.subsec_nanos()),
            Err(e) => (-(e.duration().as_secs() as i64), 0),
        },
        Err(_) => (0, 0),
    }
}

#[cfg(unix)]
fn info(m: &Metadata, _path: &str, _follow: bool) -> Info {
    use std::os::unix::fs::MetadataExt;
    Info {
        mode: m.mode(),
        uid: m.uid(),
        gid: m.gid(),
        dev: m.dev(),
        ino: m.ino(),
        nlink: m.nlink(),
        atime: (m.atime(), m.atime_nsec() as u32),
        mtime: (m.mtime(), m.mtime_nsec() as u32),
        ctime: (m.ctime(), m.ctime_nsec() as u32),
    }
}

/// Device, inode, link count and ctime, which std's WASI metadata does not give.
#[cfg(target_os = "wasi")]
fn raw_stat(path: &str, follow: bool) -> Option<(u64, u64, u64, (i64, u32))> {
    let st = guest_rt::wasi_stat(path.as_bytes(), follow).ok()?;
    Some((
        st.st_dev as u64,
        st.st_ino as u64,
        st.st_nlink as u64,
        (st.st_ctim.tv_sec as i64, st.st_ctim.tv_nsec as u32),
    ))
}

#[cfg(not(any(unix, target_os = "wasi")))]
fn raw_stat(_path: &str, _follow: bool) -> Option<(u64, u64, u64, (i64, u32))> {
    None
}

#[cfg(not(unix))]
fn info(m: &Metadata, path: &str, follow: bool) -> Info {
    let ft = m.file_type();
    let (kind, perm) = if ft.is_symlink() {
        (0o120000, 0o777)
    } else if ft.is_dir() {
        (0o040000, 0o755)
    } else {
        (0o100000, 0o644)
    };
    let (dev, ino, nlink, ctime) = raw_stat(path, follow).unwrap_or((0, 0, 1, split(m.modified())));
    let (perm, nlink) = match guest_rt::path_meta(std::path::Path::new(path), follow) {
        Some(real) => real,
        None if m.permissions().readonly() => (perm & !0o222, nlink),
        None => (perm, nlink),
    };
    Info {
        mode: kind | perm,
        uid: 0,
        gid: 0,
        dev,
        ino,
        nlink,
        atime: split(m.accessed()),
        mtime: split(m.modified()),
        ctime,
    }
}

fn user_name(uid: u32) -> String {
    if uid == 0 {
        "root".into()
    } else {
        "UNKNOWN".into()
    }
}

fn file_type(m: &Metadata, mode: u32) -> &'static str {
    let ft = m.file_type();
    if ft.is_symlink() {
        "symbolic link"
    } else if ft.is_dir() {
        "directory"
    } else if ft.is_file() {
        if m.len() == 0 {
            "regular empty file"
        } else {
            "regular file"
        }
    } else {
        match mode & 0o170000 {
            0o010000 => "fifo",
            0o020000 => "character special file",
            0o060000 => "block special file",
            0o140000 => "socket",
            _ => "weird file",
        }
    }
}

pub(crate) fn perm_string(mode: u32) -> String {
    let t = match mode & 0o170000 {
        0o040000 => 'd',
        0o120000 => 'l',
        0o010000 => 'p',
        0o020000 => 'c',
        0o060000 => 'b',
        0o140000 => 's',
        _ => '-',
    };
    let mut s = String::from(t);
    let bits = [
        (0o400, 'r'),
        (0o200, 'w'),
        (0o100, 'x'),
        (0o040, 'r'),
        (0o020, 'w'),
        (0o010, 'x'),
        (0o004, 'r'),
        (0o002, 'w'),
        (0o001, 'x'),
    ];
    for (i, (bit, c)) in bits.iter().enumerate() {
        let set = mode & bit != 0;
        let special = match i {
            2 => mode & 0o4000 != 0,
            5 => mode & 0o2000 != 0,
            8 => mode & 0o1000 != 0,
            _ => false,
        };
        s.push(match (set, special, i) {
            (true, true, 8) => 't',
            (false, true, 8) => 'T',
            (true, true, _) => 's',
            (false, true, _) => 'S',
            (true, false, _) => *c,
            (false, false, _) => '-',
        });
    }
    s
}

/// The sandbox's time zone is UTC.
fn human_time((secs, nanos): (i64, u32)) -> String {
    let (y, mo, d) = guest_rt::civil_from_days(secs.div_euclid(86_400));
    let rem = secs.rem_euclid(86_400);
    format!(
        "{y:04}-{mo:02}-{d:02} {:02}:{:02}:{:02}.{nanos:09} +0000",
        rem / 3600,
        rem / 60 % 60,
        rem % 60
    )
}

fn quote(name: &str) -> String {
    format!("'{}'", name.replace('\'', "'\\''"))
}

fn expand(fmt: &str, name: &str, m: &Metadata, i: &Info, escapes: bool) -> String {
    let mut out = String::new();
    let chars: Vec<char> = fmt.chars().collect();
    let mut k = 0;
    while k < chars.len() {
        let c = chars[k];
        k += 1;
        if escapes && c == '\\' && k < chars.len() {
            let e = chars[k];
            k += 1;
            let ch = match e {
                'n' => '\n',
                't' => '\t',
                '\\' => '\\',
                '"' => '"',
                'a' => '\x07',
                'r' => '\r',
                '0' => '\0',
                other => {
                    out.push('\\');
                    other
                }
            };
            out.push(ch);
            continue;
        }
        if c != '%' || k >= chars.len() {
            out.push(c);
            continue;
        }
        let mut flags = String::new();
        while k < chars.len() && (chars[k] == '-' || chars[k] == '0' || chars[k].is_ascii_digit()) {
            flags.push(chars[k]);
            k += 1;
        }
        let Some(&d) = chars.get(k) else {
            out.push('%');
            out.push_str(&flags);
            break;
        };
        k += 1;
        let target = || {
            std::fs::read_link(name)
                .map(|t| t.to_string_lossy().into_owned())
                .unwrap_or_default()
        };
        let v = match d {
            '%' => "%".to_string(),
            'n' => name.to_string(),
            'N' => {
                if m.file_type().is_symlink() {
                    format!("{} -> {}", quote(name), quote(&target()))
                } else {
                    quote(name)
                }
            }
            's' => m.len().to_string(),
            'a' => format!("{:o}", i.mode & 0o7777),
            'A' => perm_string(i.mode),
            'f' => format!("{:x}", i.mode),
            'F' => file_type(m, i.mode).to_string(),
            'u' => i.uid.to_string(),
            'g' => i.gid.to_string(),
            'U' => user_name(i.uid),
            'G' => user_name(i.gid),
            'i' => i.ino.to_string(),
            'h' => i.nlink.to_string(),
            'd' => i.dev.to_string(),
            'D' => format!("{:x}", i.dev),
            'b' => m.len().div_ceil(512).to_string(),
            'B' => "512".into(),
            'o' => "4096".into(),
            't' | 'T' => "0".into(),
            'x' => human_time(i.atime),
            'y' => human_time(i.mtime),
            'z' => human_time(i.ctime),
            'w' => "-".into(),
            'X' => i.atime.0.to_string(),
            'Y' => i.mtime.0.to_string(),
            'Z' => i.ctime.0.to_string(),
            'W' => "0".into(),
            'm' => "/".into(),
            other => format!("?{other}"),
        };
        let width: usize = flags.trim_start_matches('-').parse().unwrap_or(0);
        if flags.starts_with('-') {
            out.push_str(&format!("{v:<width$}"));
        } else if flags.starts_with('0') {
            out.push_str(&format!("{v:0>width$}"));
        } else {
            out.push_str(&format!("{v:>width$}"));
        }
    }
    out
}

const DEFAULT: &str = "  File: %N\n  Size: %-10s\tBlocks: %-10b IO Block: %-6o %F\nDevice: %Dh/%dd\tInode: %-11i Links: %h\nAccess: (%04a/%A)  Uid: (%5u/%8U)   Gid: (%5g/%8G)\nAccess: %x\nModify: %y\nChange: %z\n Birth: %w\n";
const TERSE: &str = "%n %s %b %f %u %g %D %i %h %t %T %X %Y %Z %W %o\n";

pub fn uumain(args: std::vec::IntoIter<std::ffi::OsString>) -> i32 {
    let args: Vec<String> = args.map(|a| a.to_string_lossy().into_owned()).collect();
    let mut format: Option<(String, bool)> = None;
    let mut follow = false;
    let mut terse = false;
    let mut files = Vec::new();
    let mut i = 1;
    let mut only_files = false;
    while i < args.len() {
        let a = &args[i];
        i += 1;
        if only_files || !a.starts_with('-') || a == "-" {
            files.push(a.clone());
            continue;
        }
        let value = |i: &mut usize, inline: Option<&str>| -> Option<String> {
            if let Some(v) = inline {
                return Some(v.to_string());
            }
            let v = args.get(*i).cloned();
            *i += 1;
            v
        };
        match a.as_str() {
            "--" => only_files = true,
            "-L" | "--dereference" => follow = true,
            "-t" | "--terse" => terse = true,
            "-f" | "--file-system" => {
                eprintln!("stat: --file-system is not supported in this sandbox");
                return 1;
            }
            _ if a == "-c" || a == "--format" || a.starts_with("--format=") => {
                match value(&mut i, a.strip_prefix("--format=")) {
                    Some(f) => format = Some((f + "\n", false)),
                    None => {
                        eprintln!("stat: option requires an argument -- 'c'");
                        return 1;
                    }
                }
            }
            _ if a.starts_with("-c") => format = Some((a[2..].to_string() + "\n", false)),
            _ if a == "--printf" || a.starts_with("--printf=") => {
                match value(&mut i, a.strip_prefix("--printf=")) {
                    Some(f) => format = Some((f, true)),
                    None => {
                        eprintln!("stat: option '--printf' requires an argument");
                        return 1;
                    }
                }
            }
            _ => {
                eprintln!("stat: invalid option -- '{}'", a.trim_start_matches('-'));
                eprintln!("Try 'stat --help' for more information.");
                return 1;
            }
        }
    }
    if files.is_empty() {
        eprintln!("stat: missing operand\nTry 'stat --help' for more information.");
        return 1;
    }
    let (fmt, escapes) =
        format.unwrap_or_else(|| (if terse { TERSE } else { DEFAULT }.to_string(), false));
    let mut code = 0;
    let stdout = std::io::stdout();
    let mut out = stdout.lock();
    for f in &files {
        let meta = if follow {
            std::fs::metadata(f)
        } else {
            std::fs::symlink_metadata(f)
        };
        match meta {
            Ok(m) => {
                let inf = info(&m, f, follow);
                let text = expand(&fmt, f, &m, &inf, escapes);
                if out.write_all(text.as_bytes()).is_err() {
                    return 1;
                }
            }
            Err(e) => {
                let msg = e.to_string();
                let msg = msg.split(" (os error").next().unwrap_or(&msg).to_string();
                eprintln!("stat: cannot statx '{f}': {msg}");
                code = 1;
            }
        }
    }
    code
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dates() {
        assert_eq!(human_time((0, 0)), "1970-01-01 00:00:00.000000000 +0000");
        assert_eq!(
            human_time((1_700_000_000, 5)),
            "2023-11-14 22:13:20.000000005 +0000"
        );
    }

    #[test]
    fn perms() {
        assert_eq!(perm_string(0o100644), "-rw-r--r--");
        assert_eq!(perm_string(0o041777), "drwxrwxrwt");
    }
}
