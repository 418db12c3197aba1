//! `tac`: uu_tac spools standard input to a temporary file, and WASI has no temporary
//! directory (std's `temp_dir` panics), so this module's tac reads its input into memory.
//! Options as GNU: `-b/--before`, `-r/--regex`, `-s/--separator`.

use std::ffi::OsString;
use std::io::{Read, Write};

pub fn uumain(args: std::vec::IntoIter<OsString>) -> i32 {
    let mut before = false;
    let mut regex = false;
    let mut separator: Option<String> = None;
    let mut files: Vec<String> = Vec::new();
    let mut args = args.skip(1).map(|a| a.to_string_lossy().into_owned());
    let mut only_files = false;
    while let Some(a) = args.next() {
        if only_files || a == "-" || !a.starts_with('-') {
            files.push(a);
            continue;
        }
        match a.as_str() {
            "--" => only_files = true,
            "-b" | "--before" => before = true,
            "-r" | "--regex" => regex = true,
            "-s" | "--separator" => match args.next() {
                Some(s) => separator = Some(s),
                None => {
                    eprintln!("tac: option requires an argument -- 's'");
                    return 1;
                }
            },
            "--help" => {
                println!(
                    "Usage: tac [OPTION]... [FILE]...\nWrite each FILE to standard output, last line first.\n\n  -b, --before             attach the separator before instead of after\n  -r, --regex              interpret the separator as a regular expression\n  -s, --separator=STRING   use STRING as the separator instead of newline"
                );
                return 0;
            }
            s if s.starts_with("--separator=") => {
                separator = Some(s["--separator=".len()..].to_string())
            }
            s if s.starts_with("-s") => separator = Some(s[2..].to_string()),
            s => {
                // Clustered short flags (`-br`).
                let mut ok = true;
                for c in s[1..].chars() {
                    match c {
                        'b' => before = true,
                        'r' => regex = true,
                        _ => ok = false,
                    }
                }
                if !ok {
                    eprintln!(
                        "tac: unrecognized option '{s}'\nTry 'tac --help' for more information."
                    );
                    return 1;
                }
            }
        }
    }
    if files.is_empty() {
        files.push("-".into());
    }
    let sep = separator.unwrap_or_else(|| "\n".into());
    if sep.is_empty() {
        eprintln!("tac: separator cannot be empty");
        return 1;
    }
    let matcher = if regex {
        match regex::bytes::Regex::new(&sep) {
            Ok(r) => Some(r),
            Err(e) => {
                eprintln!("tac: invalid regular expression: {e}");
                return 1;
            }
        }
    } else {
        None
    };
    let mut status = 0;
    let stdout = std::io::stdout();
    let mut out = stdout.lock();
    for f in files {
        let mut data = Vec::new();
        let r = if f == "-" {
            std::io::stdin().read_to_end(&mut data)
        } else {
            std::fs::File::open(&f).and_then(|mut h| h.read_to_end(&mut data))
        };
        if let Err(e) = r {
            let what = if f == "-" {
                "standard input".to_string()
            } else {
                format!("'{f}'")
            };
            let msg = match e.kind() {
                std::io::ErrorKind::NotFound => "No such file or directory".to_string(),
                std::io::ErrorKind::IsADirectory => "Is a directory".to_string(),
                _ => e.to_string(),
            };
            eprintln!("tac: failed to open {what} for reading: {msg}");
            status = 1;
            continue;
        }
        // Separator positions (start, end) in order.
        let seps: Vec<(usize, usize)> = match &matcher {
            Some(re) => re
                .find_iter(&data)
                .filter(|m| m.end() > m.start())
                .map(|m| (m.start(), m.end()))
                .collect(),
            None => {
                let s = sep.as_bytes();
                let mut v = Vec::new();
                let mut i = 0;
                while i + s.len() <= data.len() {
                    if &data[i..i + s.len()] == s {
                        v.push((i, i + s.len()));
                        i += s.len();
                    } else {
                        i += 1;
                    }
                }
                v
            }
        };
        // Records: with the separator after (default) or before (-b) their text.
        let mut records: Vec<&[u8]> = Vec::new();
        if before {
            let mut start = 0;
            for &(a, _) in &seps {
                if a > start {
                    records.push(&data[start..a]);
                }
                start = a;
            }
            if start < data.len() {
                records.push(&data[start..]);
            }
        } else {
            let mut start = 0;
            for &(_, b) in &seps {
                records.push(&data[start..b]);
                start = b;
            }
            if start < data.len() {
                records.push(&data[start..]);
            }
        }
        for r in records.iter().rev() {
            if let Err(e) = out.write_all(r) {
                if e.kind() == std::io::ErrorKind::BrokenPipe {
                    return 1;
                }
                eprintln!("tac: write error: {e}");
                return 1;
            }
        }
    }
    status
}
