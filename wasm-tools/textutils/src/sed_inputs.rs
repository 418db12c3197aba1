//! sed's inputs as one stream. GNU sed reads its files as one stream of lines, so a file whose
//! last line has no newline still gets one when more input follows (`sed p a b` where `a` ends
//! in `one` prints `one\none\n` before `b`'s lines). The uutils sed crate keeps each file's
//! missing newline, gluing the next file's first line onto it.
//!
//! Only that case is changed: when sed would read two or more inputs as one stream (no `-i`,
//! `-s` or `-z`) and an input other than the last lacks its final newline, the inputs are
//! joined (with that newline added where more input follows) into one temporary file that sed
//! reads instead. Otherwise
//! the arguments pass through untouched.

use std::ffi::OsString;
use std::io::{Read, Seek, SeekFrom};

use crate::util::{TempFile, temp_file};

/// The arguments to give uu_sed, and the joined file they name (kept alive until sed ends).
pub fn prepare(args: Vec<OsString>) -> (Vec<OsString>, Option<TempFile>) {
    match join(&args) {
        Some((new_args, joined)) => (new_args, Some(joined)),
        None => (args, None),
    }
}

fn join(args: &[OsString]) -> Option<(Vec<OsString>, TempFile)> {
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
    // Only the last byte of each input but the last decides; standard input there can only be
    // known by reading it, and once read, sed must get it from the joined file. A missing or
    // unreadable file is left to sed to report, in its place.
    let (head, _) = operands.split_at(operands.len() - 1);
    let mut glued = false;
    for &at in head {
        if strs[at] == "-" {
            glued = true;
            continue;
        }
        let mut f = std::fs::File::open(strs[at]).ok()?;
        let len = f.metadata().ok()?.len();
        if len > 0 {
            let mut last = [0u8];
            f.seek(SeekFrom::Start(len - 1)).ok()?;
            f.read_exact(&mut last).ok()?;
            glued |= last[0] != b'\n';
        }
    }
    if !glued {
        return None;
    }
    // Files first, so that standard input is not consumed when a file fails.
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
    // The newline goes in only where more input follows: when the rest is empty, the last line
    // stays without one, as GNU sed leaves it.
    let mut all = Vec::new();
    for (n, d) in inputs.iter().enumerate() {
        let more = inputs[n + 1..].iter().any(|later| !later.is_empty());
        all.extend_from_slice(d);
        if more && !d.is_empty() && !d.ends_with(b"\n") {
            all.push(b'\n');
        }
    }
    let joined = temp_file("sed-input", &all).ok()?;
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
