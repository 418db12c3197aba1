//! sed's inputs as one stream. GNU sed reads its files as one stream of lines, so a file whose
//! last line has no newline still gets one when more input follows (`sed p a b` where `a` ends
//! in `one` prints `one\none\n` before `b`'s lines). The uutils sed crate keeps each file's
//! missing newline, gluing the next file's first line onto it.
//!
//! Only that case is changed: when sed would read two or more inputs as one stream (no `-i`,
//! `-s` or `-z`) and an input other than the last lacks its final newline, the inputs are
//! joined (with that newline added) into one temporary file that sed reads instead. Otherwise
//! the arguments pass through untouched.

use std::ffi::OsString;
use std::io::Read;
use std::path::PathBuf;

/// Removes the joined file when sed is done.
pub struct Joined(PathBuf);

impl Drop for Joined {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.0);
    }
}

/// The arguments to give uu_sed, and the joined file they name (kept alive until sed ends).
pub fn prepare(args: Vec<OsString>) -> (Vec<OsString>, Option<Joined>) {
    match join(&args) {
        Some((new_args, joined)) => (new_args, Some(joined)),
        None => (args, None),
    }
}

fn join(args: &[OsString]) -> Option<(Vec<OsString>, Joined)> {
    let strs: Vec<&str> = args.iter().map(|a| a.to_str()).collect::<Option<_>>()?;
    let mut operands: Vec<usize> = Vec::new();
    let mut have_script = false;
    let mut only_operands = false;
    let mut i = 1;
    while i < strs.len() {
        let a = strs[i];
        i += 1;
        if only_operands || a == "-" || !a.starts_with('-') {
            operands.push(i - 1);
            continue;
        }
        if a == "--" {
            only_operands = true;
            continue;
        }
        if let Some(long) = a.strip_prefix("--") {
            let name = long.split_once('=').map_or(long, |(n, _)| n);
            match name {
                "in-place" | "separate" | "null-data" | "zero-terminated" => return None,
                "expression" | "file" => {
                    have_script = true;
                    if !long.contains('=') {
                        i += 1;
                    }
                }
                "line-length" if !long.contains('=') => i += 1,
                _ => {}
            }
            continue;
        }
        let flags: Vec<char> = a[1..].chars().collect();
        for (k, c) in flags.iter().enumerate() {
            match c {
                'i' | 's' | 'z' => return None,
                'e' | 'f' | 'l' => {
                    if *c != 'l' {
                        have_script = true;
                    }
                    if k + 1 == flags.len() {
                        i += 1;
                    }
                    break;
                }
                _ => {}
            }
        }
    }
    if !have_script {
        // The first operand is the script.
        if operands.is_empty() {
            return None;
        }
        operands.remove(0);
    }
    if operands.len() < 2 {
        return None;
    }
    // Files first: a missing or unreadable one is left to sed to report, in its place, and
    // standard input must not have been consumed by then.
    let mut inputs = vec![Vec::new(); operands.len()];
    for (slot, &at) in inputs.iter_mut().zip(&operands) {
        if strs[at] != "-" {
            std::fs::File::open(strs[at])
                .and_then(|mut f| f.read_to_end(slot))
                .ok()?;
        }
    }
    if let Some(n) = operands.iter().position(|&at| strs[at] == "-") {
        std::io::stdin().read_to_end(&mut inputs[n]).ok()?;
    }
    let glued = inputs[..inputs.len() - 1]
        .iter()
        .any(|d| !d.is_empty() && !d.ends_with(b"\n"));
    if !glued {
        if operands.iter().any(|&at| strs[at] == "-") {
            // Standard input was read; sed must get it from the joined file after all.
        } else {
            return None;
        }
    }
    let mut all = Vec::new();
    let last = inputs.len() - 1;
    for (n, d) in inputs.into_iter().enumerate() {
        let newline = n < last && !d.is_empty() && !d.ends_with(b"\n");
        all.extend(d);
        if newline {
            all.push(b'\n');
        }
    }
    let joined = write_temp(&all)?;
    let mut out: Vec<OsString> = Vec::with_capacity(args.len());
    let first = operands[0];
    for (n, a) in args.iter().enumerate() {
        if n == first {
            out.push(joined.0.clone().into_os_string());
        } else if !operands.contains(&n) {
            out.push(a.clone());
        }
    }
    Some((out, joined))
}

fn write_temp(bytes: &[u8]) -> Option<Joined> {
    let dir = std::env::var("TMPDIR")
        .ok()
        .filter(|d| !d.is_empty())
        .unwrap_or_else(|| "/tmp".into());
    let stamp = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos())
        .unwrap_or(0);
    for n in 0..100 {
        let path = PathBuf::from(format!(
            "{}/sed-input-{stamp:x}-{n}",
            dir.trim_end_matches('/')
        ));
        let file = std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .open(&path);
        match file {
            Ok(mut f) => {
                let joined = Joined(path);
                std::io::Write::write_all(&mut f, bytes).ok()?;
                return Some(joined);
            }
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => continue,
            Err(_) => return None,
        }
    }
    None
}
