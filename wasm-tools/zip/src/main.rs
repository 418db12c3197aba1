//! `zip` and `unzip` (one multicall binary, dispatch on argv[0] or argv[1]): Info-ZIP's
//! common options on the `zip` crate.
//!
//! Entry names that would leave the destination (`../x`, `/etc/x`) lose those components on
//! extraction, with Info-ZIP's warning and status 1: nothing is ever written outside the
//! destination. Extraction streams each entry into its file, so an archive that inflates past
//! the sandbox's byte or file limits (a zip bomb) stops at the first write the filesystem
//! refuses, with `disk full` and status 50, and the partial file removed.

#![forbid(unsafe_code)]

mod central;
mod eocd;
mod unzip;
mod zip_cmd;

use std::io::Write;

const TOOLS: &[&str] = &["zip", "unzip"];

fn main() {
    guest_rt::enter_pwd();
    let mut args: Vec<String> = std::env::args_os()
        .map(|a| a.to_string_lossy().into_owned())
        .collect();
    let mut name = args
        .first()
        .map(|a| guest_rt::tool_name(a.as_ref()))
        .unwrap_or_default();
    if !TOOLS.contains(&name.as_str()) {
        match args.get(1).map(|a| guest_rt::tool_name(a.as_ref())) {
            Some(n) if TOOLS.contains(&n.as_str()) => {
                name = n;
                args.remove(0);
            }
            _ => {
                eprintln!("usage: ziptools zip|unzip [ARGS...]");
                std::process::exit(2);
            }
        }
    }
    let code = if name == "zip" {
        zip_cmd::main(&args[1..])
    } else {
        unzip::main(&args[1..])
    };
    let _ = std::io::stdout().flush();
    std::process::exit(code);
}

/// The text of an I/O error without Rust's ` (os error N)` suffix, as C tools print it.
pub fn errno_text(e: &std::io::Error) -> String {
    let s = e.to_string();
    s.split(" (os error").next().unwrap_or(&s).to_string()
}

/// Writes to stdout; a closed pipe ends the program quietly, as SIGPIPE would.
pub fn out(data: &[u8]) {
    let mut o = std::io::stdout().lock();
    if let Err(e) = o.write_all(data) {
        if e.kind() == std::io::ErrorKind::BrokenPipe {
            std::process::exit(0);
        }
        eprintln!("write error: {}", errno_text(&e));
        std::process::exit(1);
    }
}

/// Shell-style wildcard (`*`, `?`, `[...]`) over a whole name, as unzip matches members.
pub fn wildmatch(pattern: &str, name: &str) -> bool {
    fn go(p: &[char], s: &[char]) -> bool {
        match p.first() {
            None => s.is_empty(),
            Some('*') => (0..=s.len()).any(|k| go(&p[1..], &s[k..])),
            Some('?') => !s.is_empty() && go(&p[1..], &s[1..]),
            Some('[') => {
                let Some(end) = p.iter().skip(1).position(|&c| c == ']').map(|e| e + 1) else {
                    return !s.is_empty() && s[0] == '[' && go(&p[1..], &s[1..]);
                };
                if s.is_empty() {
                    return false;
                }
                let set = &p[1..end];
                let (neg, set) = match set.first() {
                    Some('!') | Some('^') => (true, &set[1..]),
                    _ => (false, set),
                };
                let mut hit = false;
                let mut i = 0;
                while i < set.len() {
                    if i + 2 < set.len() && set[i + 1] == '-' {
                        hit |= set[i] <= s[0] && s[0] <= set[i + 2];
                        i += 3;
                    } else {
                        hit |= set[i] == s[0];
                        i += 1;
                    }
                }
                hit != neg && go(&p[end + 1..], &s[1..])
            }
            Some(&c) => !s.is_empty() && s[0] == c && go(&p[1..], &s[1..]),
        }
    }
    let p: Vec<char> = pattern.chars().collect();
    let s: Vec<char> = name.chars().collect();
    go(&p, &s)
}

/// Seconds since the epoch to zip's DOS date and time (UTC: the sandbox's zone). DOS time counts
/// in 2-second steps; Info-ZIP rounds an odd second up, and so do we, so both zips write the
/// same field for the same file.
pub fn dos_time(secs: i64) -> zip::DateTime {
    let secs = secs + (secs & 1);
    let days = secs.div_euclid(86_400);
    let rem = secs.rem_euclid(86_400);
    let (y, m, d) = guest_rt::civil_from_days(days);
    let y = y.clamp(1980, 2107) as u16;
    zip::DateTime::from_date_and_time(
        y,
        m as u8,
        d as u8,
        (rem / 3600) as u8,
        (rem % 3600 / 60) as u8,
        (rem % 60) as u8,
    )
    .unwrap_or_default()
}
