//! `uuencode` and `uudecode` as GNU sharutils writes and reads them: the traditional encoding
//! (45 bytes a line, a length character, six bits a character with `` ` `` for zero) and `-m`'s
//! base64 (`begin-base64 ... ====`), the file's mode on the `begin` line and restored on decode.

use base64::Engine;
use base64::engine::general_purpose::STANDARD;
use std::io::{self, Read, Write};

const USAGE_ENCODE: &str = "uuencode (GNU sharutils) - encode a file into email friendly text\nUsage:  uuencode [ -<flag> | --<name> ]... [<in-file>] <output-name>\nTry 'uuencode --help' for more information.";
const USAGE_DECODE: &str = "uudecode (GNU sharutils) - decode an encoded file\nUsage:  uudecode [ -<flag> [<val>] | --<name>[{=| }<val>] ]... [<file>...]\nTry 'uudecode --help' for more information.";

/// The character for six bits in the traditional encoding.
fn enc(bits: u8) -> u8 {
    if bits == 0 {
        b'`'
    } else {
        (bits & 0o77) + b' '
    }
}

fn dec(c: u8) -> u8 {
    c.wrapping_sub(b' ') & 0o77
}

pub fn uuencode(args: Vec<String>) -> i32 {
    let mut base64 = false;
    let mut names = Vec::new();
    for a in args.into_iter().skip(1) {
        match a.as_str() {
            "-m" | "--base64" => base64 = true,
            "-e" | "--encode-file-name" => {}
            "--help" => {
                println!("{USAGE_ENCODE}");
                return 0;
            }
            s if s.starts_with('-') && s.len() > 1 => {
                eprintln!("{USAGE_ENCODE}");
                return 64;
            }
            _ => names.push(a),
        }
    }
    let (input, name) = match names.as_slice() {
        [name] => (None, name.clone()),
        [input, name] => (Some(input.clone()), name.clone()),
        _ => {
            eprintln!("{USAGE_ENCODE}");
            return 64;
        }
    };
    let (data, mode) = match &input {
        Some(path) => match std::fs::read(path) {
            Ok(d) => (
                d,
                guest_rt::path_mode(std::path::Path::new(path), true).unwrap_or(0o644) & 0o777,
            ),
            Err(e) => {
                eprintln!("uuencode: {path}: {}", guest_rt::errno_text(&e));
                return 1;
            }
        },
        None => {
            let mut d = Vec::new();
            if let Err(e) = io::stdin().read_to_end(&mut d) {
                eprintln!("uuencode: standard input: {}", guest_rt::errno_text(&e));
                return 1;
            }
            // The sandbox's default umask: sharutils writes 0666 less the umask for a stream.
            (d, 0o644)
        }
    };
    let mut out = String::new();
    if base64 {
        out.push_str(&format!("begin-base64 {mode:o} {name}\n"));
        for line in data.chunks(45) {
            out.push_str(&STANDARD.encode(line));
            out.push('\n');
        }
        out.push_str("====\n");
    } else {
        out.push_str(&format!("begin {mode:o} {name}\n"));
        for line in data.chunks(45) {
            let mut l = vec![enc(line.len() as u8)];
            for g in line.chunks(3) {
                let b = [g[0], *g.get(1).unwrap_or(&0), *g.get(2).unwrap_or(&0)];
                l.extend([
                    enc(b[0] >> 2),
                    enc(((b[0] << 4) | (b[1] >> 4)) & 0o77),
                    enc(((b[1] << 2) | (b[2] >> 6)) & 0o77),
                    enc(b[2] & 0o77),
                ]);
            }
            out.push_str(&String::from_utf8_lossy(&l));
            out.push('\n');
        }
        out.push_str("`\nend\n");
    }
    let mut stdout = io::stdout().lock();
    match stdout
        .write_all(out.as_bytes())
        .and_then(|_| stdout.flush())
    {
        Ok(()) => 0,
        Err(e) => crate::util::report_write_error("uuencode", &e),
    }
}

fn fatal(input: &str, msg: &str) -> i32 {
    // sharutils ends this one message without a newline.
    let end = if msg == "Short file" { "" } else { "\n" };
    eprint!("uudecode fatal error:\n{input}: {msg}{end}");
    2
}

pub fn uudecode(args: Vec<String>) -> i32 {
    let mut output: Option<String> = None;
    let mut files = Vec::new();
    let mut it = args.into_iter().skip(1);
    while let Some(a) = it.next() {
        match a.as_str() {
            "-o" | "--output-file" => match it.next() {
                Some(o) => output = Some(o),
                None => {
                    eprintln!("{USAGE_DECODE}");
                    return 64;
                }
            },
            "--help" => {
                println!("{USAGE_DECODE}");
                return 0;
            }
            s if s.starts_with("-o") && s.len() > 2 => output = Some(s[2..].to_string()),
            s if s.starts_with("--output-file=") => {
                output = Some(s["--output-file=".len()..].to_string())
            }
            s if s.starts_with('-') && s.len() > 1 => {
                eprintln!("{USAGE_DECODE}");
                return 64;
            }
            _ => files.push(a),
        }
    }
    if files.is_empty() {
        files.push("-".into());
    }
    let mut status = 0;
    for f in &files {
        let (data, shown) = if f == "-" {
            let mut d = Vec::new();
            if let Err(e) = io::stdin().read_to_end(&mut d) {
                eprintln!("uudecode: standard input: {}", guest_rt::errno_text(&e));
                return 4;
            }
            (d, "standard input".to_string())
        } else {
            match std::fs::read(f) {
                Ok(d) => (d, f.clone()),
                Err(e) => {
                    eprintln!("uudecode: {f}: {}", guest_rt::errno_text(&e));
                    status = status.max(4);
                    continue;
                }
            }
        };
        let code = decode_one(&data, &shown, output.as_deref());
        if code != 0 {
            return code;
        }
    }
    status
}

fn decode_one(data: &[u8], shown: &str, output: Option<&str>) -> i32 {
    let text = String::from_utf8_lossy(data);
    let mut lines = text.lines();
    let (base64, mode, name) = loop {
        let Some(line) = lines.next() else {
            return fatal(shown, "Invalid or missing 'begin' line");
        };
        let (base64, rest) = if let Some(r) = line.strip_prefix("begin-base64 ") {
            (true, r)
        } else if let Some(r) = line.strip_prefix("begin ") {
            (false, r)
        } else {
            continue;
        };
        let rest = rest.trim_start();
        let Some((mode, name)) = rest.split_once(' ') else {
            continue;
        };
        let Ok(mode) = u32::from_str_radix(mode, 8) else {
            continue;
        };
        break (base64, mode, name.trim_start().to_string());
    };
    let mut bytes = Vec::new();
    let mut ended = false;
    for line in lines.by_ref() {
        let line = line.trim_end_matches('\r');
        if base64 {
            if line == "====" {
                ended = true;
                break;
            }
            match STANDARD.decode(line.trim_end()) {
                Ok(b) => bytes.extend(b),
                Err(_) => return fatal(shown, "Illegal character in input"),
            }
        } else {
            let raw = line.as_bytes();
            let Some(&first) = raw.first() else {
                return fatal(shown, "Short file");
            };
            let n = dec(first) as usize;
            if n == 0 {
                ended = true;
                break;
            }
            let body = &raw[1..];
            let mut got = Vec::with_capacity(n + 2);
            for g in body.chunks(4) {
                let c = |k: usize| dec(*g.get(k).unwrap_or(&b'`'));
                got.push((c(0) << 2) | (c(1) >> 4));
                got.push((c(1) << 4) | (c(2) >> 2));
                got.push((c(2) << 6) | c(3));
            }
            if got.len() < n {
                return fatal(shown, "Short file");
            }
            bytes.extend_from_slice(&got[..n]);
        }
    }
    if !ended {
        return fatal(shown, "Short file");
    }
    if !base64 && lines.next().map(str::trim_end) != Some("end") {
        return fatal(shown, "No `end' line");
    }
    let target = output.map(str::to_string).unwrap_or(name);
    if target == "-" || target == "/dev/stdout" {
        let mut out = io::stdout().lock();
        return match out.write_all(&bytes).and_then(|_| out.flush()) {
            Ok(()) => 0,
            Err(e) => crate::util::report_write_error("uudecode", &e),
        };
    }
    if let Err(e) = std::fs::write(&target, &bytes) {
        eprintln!("uudecode: {target}: {}", guest_rt::errno_text(&e));
        return 4;
    }
    let _ = guest_rt::set_mode(std::path::Path::new(&target), mode & 0o7777);
    0
}
