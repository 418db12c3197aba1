//! rev and xxd: small byte-level tools (and the input reading hexdump shares).

use crate::util::{Out, errno_text};
use std::io::{self, Read, Write};

/// Reads every named file in turn (`-` or none: stdin), reporting unreadable ones GNU-style.
pub fn read_inputs(tool: &str, files: &[String], mut each: impl FnMut(&[u8])) -> bool {
    let mut ok = true;
    let stdin_only = ["-".to_string()];
    let files = if files.is_empty() {
        &stdin_only[..]
    } else {
        files
    };
    for f in files {
        let data = if f == "-" {
            let mut v = Vec::new();
            io::stdin().lock().read_to_end(&mut v).map(|_| v)
        } else {
            std::fs::read(f)
        };
        match data {
            Ok(d) => each(&d),
            Err(e) => {
                eprintln!("{tool}: {f}: {}", errno_text(&e));
                ok = false;
            }
        }
    }
    ok
}

pub fn rev(args: Vec<String>) -> i32 {
    let mut out = Out::stdout();
    let files: Vec<String> = args[1..].iter().filter(|a| *a != "--").cloned().collect();
    let ok = read_inputs("rev", &files, |data| {
        let text = String::from_utf8_lossy(data);
        let mut rest: &str = &text;
        while !rest.is_empty() {
            let (mut line, mut nl, next) = match rest.find('\n') {
                Some(p) => (&rest[..p], true, &rest[p + 1..]),
                None => (rest, false, ""),
            };
            // util-linux reads a line as a C string: it ends at a NUL, and the line end after
            // the NUL goes with the rest.
            if let Some(nul) = line.find('\0') {
                line = &line[..nul];
                nl = false;
            }
            let r: String = line.chars().rev().collect();
            out.write(r.as_bytes());
            if nl {
                out.write(b"\n");
            }
            rest = next;
        }
    });
    out.flush();
    if ok { 0 } else { 1 }
}

fn printable(b: u8) -> char {
    if (0x20..0x7f).contains(&b) {
        b as char
    } else {
        '.'
    }
}

struct XxdOpts {
    cols: usize,
    group: usize,
    len: Option<usize>,
    seek: usize,
    upper: bool,
    plain: bool,
    reverse: bool,
    include: bool,
}

fn parse_int(s: &str) -> Option<usize> {
    let s = s.trim();
    if let Some(h) = s.strip_prefix("0x").or_else(|| s.strip_prefix("0X")) {
        usize::from_str_radix(h, 16).ok()
    } else if s.len() > 1 && s.starts_with('0') {
        usize::from_str_radix(&s[1..], 8).ok()
    } else {
        s.parse().ok()
    }
}

pub fn xxd(args: Vec<String>) -> i32 {
    let mut o = XxdOpts {
        cols: 16,
        group: 2,
        len: None,
        seek: 0,
        upper: false,
        plain: false,
        reverse: false,
        include: false,
    };
    let mut cols_set = false;
    let mut group_set = false;
    let mut files = Vec::new();
    let mut i = 1;
    while i < args.len() {
        let a = args[i].as_str();
        i += 1;
        let mut value = |name: &str| -> Option<usize> {
            // Accept `-c8`, `-c 8` and `-cols 8`.
            let inline = a.trim_start_matches('-').strip_prefix(name).unwrap_or("");
            if !inline.is_empty() {
                return parse_int(inline);
            }
            let v = args.get(i).and_then(|s| parse_int(s));
            i += 1;
            v
        };
        let bad = |a: &str| {
            eprintln!("xxd: invalid option or value: {a}");
            2
        };
        match a {
            "-p" | "-ps" | "-postscript" | "-plain" => o.plain = true,
            "-r" | "-revert" => o.reverse = true,
            "-u" => o.upper = true,
            "-i" | "-include" => o.include = true,
            "-a" | "-autoskip" => {}
            _ if a.starts_with("-c") => match value("c") {
                Some(v) => {
                    o.cols = v;
                    cols_set = true;
                }
                None => return bad(a),
            },
            _ if a.starts_with("-g") => match value("g") {
                Some(v) => {
                    o.group = v;
                    group_set = true;
                }
                None => return bad(a),
            },
            _ if a.starts_with("-l") => match value("l") {
                Some(v) => o.len = Some(v),
                None => return bad(a),
            },
            _ if a.starts_with("-s") => match value("s") {
                Some(v) => o.seek = v,
                None => return bad(a),
            },
            "-" => files.push(a.to_string()),
            _ if a.starts_with('-') => return bad(a),
            _ => files.push(a.to_string()),
        }
    }
    if o.plain && !cols_set {
        o.cols = 30;
    }
    if o.include && !cols_set {
        o.cols = 12;
    }
    let _ = group_set;
    let input = files.first().cloned().unwrap_or_else(|| "-".into());
    let mut data = Vec::new();
    if !read_inputs("xxd", std::slice::from_ref(&input), |d| data = d.to_vec()) {
        return 2;
    }
    let mut sink: Box<dyn Write> = match files.get(1) {
        Some(f) => match std::fs::File::create(f) {
            Ok(file) => Box::new(io::BufWriter::new(file)),
            Err(e) => {
                eprintln!("xxd: {f}: {}", errno_text(&e));
                return 2;
            }
        },
        None => Box::new(Out::stdout()),
    };
    let result = if o.reverse {
        xxd_reverse(&data, o.plain, o.cols, &mut sink)
    } else {
        let start = o.seek.min(data.len());
        let end = o.len.map_or(data.len(), |l| (start + l).min(data.len()));
        xxd_dump(&data[start..end], start, &o, &mut sink)
    };
    match result.and_then(|_| sink.flush()) {
        Ok(()) => 0,
        Err(e) => crate::util::report_write_error("xxd", &e),
    }
}

fn xxd_dump(data: &[u8], base: usize, o: &XxdOpts, w: &mut dyn Write) -> io::Result<()> {
    let hex = |b: u8| {
        if o.upper {
            format!("{b:02X}")
        } else {
            format!("{b:02x}")
        }
    };
    if o.plain {
        let cols = if o.cols == 0 { usize::MAX } else { o.cols };
        for chunk in data.chunks(cols.min(data.len().max(1))) {
            let line: String = chunk.iter().map(|&b| hex(b)).collect();
            writeln!(w, "{line}")?;
        }
        return Ok(());
    }
    if o.include {
        for (n, chunk) in data.chunks(o.cols.max(1)).enumerate() {
            let items: Vec<String> = chunk.iter().map(|&b| format!("0x{}", hex(b))).collect();
            let last = (n + 1) * o.cols.max(1) >= data.len();
            writeln!(w, "  {}{}", items.join(", "), if last { "" } else { "," })?;
        }
        return Ok(());
    }
    let cols = o.cols.max(1);
    let group = if o.group == 0 { cols } else { o.group };
    // Width of a full line's hex area, so short last lines keep the text column aligned.
    let full = cols * 2 + cols.div_ceil(group);
    for (n, chunk) in data.chunks(cols).enumerate() {
        let mut line = format!("{:08x}: ", base + n * cols);
        let mut hexpart = String::new();
        for (k, &b) in chunk.iter().enumerate() {
            hexpart.push_str(&hex(b));
            if (k + 1) % group == 0 {
                hexpart.push(' ');
            }
        }
        while hexpart.len() < full {
            hexpart.push(' ');
        }
        line.push_str(&hexpart);
        line.push(' ');
        line.extend(chunk.iter().map(|&b| printable(b)));
        writeln!(w, "{line}")?;
    }
    Ok(())
}

/// xxd's `-r`, read as xxd reads: per line of a normal dump, the offset (hex digits up to the
/// first other character), then hex pairs until `cols` bytes (the text column after them is
/// skipped). A character that is not a hex digit drops a half-read pair; three in a row (counting
/// the end of a pair) end the line; non-digits at the start of a line are skipped. `-p` input
/// is one stream of pairs with spaces and line ends ignored. Output goes where the offsets say:
/// gaps are zero bytes, and going back is refused as xxd refuses it on a pipe (the output is
/// written as it is read, as xxd writes it).
fn xxd_reverse(data: &[u8], plain: bool, cols: usize, w: &mut dyn Write) -> io::Result<()> {
    fn digit(c: u8) -> i32 {
        (c as char).to_digit(16).map_or(-1, |d| d as i32)
    }
    // Bytes written so far: xxd's have_off.
    let mut have: u64 = 0;
    // The last three characters as hex digits (-1: not one), newest first.
    let (mut n1, mut n2) = (-1i32, 0i32);
    let mut n3: i32;
    let mut skip_garbage = true;
    let mut p = cols;
    let mut want_off: u64 = 0;
    let mut i = 0;
    let skip_to_eol = |i: &mut usize| -> Option<u8> {
        while *i < data.len() {
            *i += 1;
            if data[*i - 1] == b'\n' {
                return Some(b'\n');
            }
        }
        None
    };
    while i < data.len() {
        let mut c = Some(data[i]);
        i += 1;
        let ch = data[i - 1];
        if ch == b'\r' || (plain && matches!(ch, b' ' | b'\n' | b'\t')) {
            continue;
        }
        n3 = n2;
        n2 = n1;
        n1 = digit(ch);
        if n1 == -1 && skip_garbage {
            continue;
        }
        skip_garbage = false;
        if !plain && p >= cols {
            if n1 < 0 {
                p = 0;
            } else {
                want_off = want_off.wrapping_shl(4) | n1 as u64;
            }
            continue;
        }
        if want_off < have {
            w.flush()?;
            eprintln!("xxd: Sorry, cannot seek backwards.");
            std::process::exit(5);
        }
        const ZEROES: [u8; 4096] = [0; 4096];
        while have < want_off {
            let n = (want_off - have).min(ZEROES.len() as u64);
            w.write_all(&ZEROES[..n as usize])?;
            have += n;
        }
        if n2 >= 0 && n1 >= 0 {
            w.write_all(&[((n2 << 4) | n1) as u8])?;
            have += 1;
            want_off += 1;
            n1 = -1;
            if !plain {
                p += 1;
                if p >= cols {
                    c = skip_to_eol(&mut i);
                }
            }
        } else if n1 < 0 && n2 < 0 && n3 < 0 {
            c = skip_to_eol(&mut i);
        }
        if c == Some(b'\n') {
            if !plain {
                want_off = 0;
            }
            p = cols;
            skip_garbage = true;
        }
    }
    Ok(())
}
