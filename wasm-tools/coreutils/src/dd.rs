//! `dd`, written here: uu_dd needs threads and signals WASI lacks. GNU dd's operands: `if= of=
//! bs= ibs= obs= count= skip= seek=` (numbers with GNU's suffixes and `x` products), `conv=`
//! `ucase lcase swab sync noerror notrunc excl nocreat fsync fdatasync sparse`, `iflag=`
//! `count_bytes skip_bytes fullblock`, `oflag=seek_bytes append`, `status=none|noxfer|progress`,
//! and its summary on stderr.

use std::ffi::OsString;
use std::fs::{File, OpenOptions};
use std::io::{self, Read, Seek, SeekFrom, Write};
use std::time::Instant;

#[derive(Default)]
struct Opts {
    input: Option<String>,
    output: Option<String>,
    ibs: usize,
    obs: usize,
    /// bs= given: each block read is written as it is, without reblocking.
    bs: bool,
    count: Option<u64>,
    skip: u64,
    seek: u64,
    ucase: bool,
    lcase: bool,
    swab: bool,
    sync: bool,
    noerror: bool,
    notrunc: bool,
    excl: bool,
    nocreat: bool,
    fsync: bool,
    count_bytes: bool,
    skip_bytes: bool,
    seek_bytes: bool,
    fullblock: bool,
    append: bool,
    /// 0: all, 1: noxfer, 2: none.
    quiet: u8,
}

fn usage_error(msg: &str) -> i32 {
    eprintln!("dd: {msg}\nTry 'dd --help' for more information.");
    1
}

/// A number as GNU dd reads it: digits with an optional multiplier suffix (`c w b K KB kB M MB
/// ... KiB`), and products of such numbers joined by `x`.
fn number(s: &str) -> Option<u64> {
    let mut total: u64 = 1;
    for part in s.split('x') {
        let digits_end = part
            .find(|c: char| !c.is_ascii_digit())
            .unwrap_or(part.len());
        if digits_end == 0 {
            return None;
        }
        let n: u64 = part[..digits_end].parse().ok()?;
        let suffix = &part[digits_end..];
        let mult: u64 = match suffix {
            "" | "c" => 1,
            "w" => 2,
            "b" => 512,
            _ => {
                let (unit, rest) = suffix.split_at(1);
                let power = match unit {
                    "K" | "k" => 1,
                    "M" => 2,
                    "G" => 3,
                    "T" => 4,
                    "P" => 5,
                    "E" => 6,
                    _ => return None,
                };
                let base: u64 = match rest {
                    "" | "iB" => 1024,
                    "B" => 1000,
                    _ => return None,
                };
                base.checked_pow(power)?
            }
        };
        total = total.checked_mul(n.checked_mul(mult)?)?;
    }
    Some(total)
}

pub fn uumain(args: std::vec::IntoIter<OsString>) -> i32 {
    let mut o = Opts {
        ibs: 512,
        obs: 512,
        ..Opts::default()
    };
    for arg in args.skip(1) {
        let a = arg.to_string_lossy().into_owned();
        match a.as_str() {
            "--help" => {
                println!(
                    "Usage: dd [OPERAND]...\nCopy a file, converting and formatting according to the operands.\n\n  bs=BYTES  ibs=BYTES  obs=BYTES  count=N  skip=N  seek=N\n  if=FILE  of=FILE  conv=CONVS  iflag=FLAGS  oflag=FLAGS  status=LEVEL"
                );
                return 0;
            }
            "--version" => {
                println!("dd (wasmsand)");
                return 0;
            }
            _ => {}
        }
        let Some((key, value)) = a.split_once('=') else {
            return usage_error(&format!("unrecognized operand ‘{a}’"));
        };
        let num = |v: &str| number(v).ok_or_else(|| format!("invalid number: ‘{v}’"));
        let result: Result<(), String> = (|| {
            match key {
                "if" => o.input = Some(value.to_string()),
                "of" => o.output = Some(value.to_string()),
                "bs" => {
                    let n = num(value)?;
                    o.ibs = n.max(1) as usize;
                    o.obs = o.ibs;
                    o.bs = true;
                }
                "ibs" => o.ibs = num(value)?.max(1) as usize,
                "obs" => o.obs = num(value)?.max(1) as usize,
                "count" => o.count = Some(num(value)?),
                "skip" | "iseek" => o.skip = num(value)?,
                "seek" | "oseek" => o.seek = num(value)?,
                "conv" => {
                    for c in value.split(',') {
                        match c {
                            "ucase" => o.ucase = true,
                            "lcase" => o.lcase = true,
                            "swab" => o.swab = true,
                            "sync" => o.sync = true,
                            "noerror" => o.noerror = true,
                            "notrunc" => o.notrunc = true,
                            "excl" => o.excl = true,
                            "nocreat" => o.nocreat = true,
                            "fsync" | "fdatasync" => o.fsync = true,
                            // Holes are not kept in the sandbox's files: writing zeros is the
                            // same content.
                            "sparse" => {}
                            "ascii" | "ebcdic" | "ibm" | "block" | "unblock" => {
                                return Err(format!(
                                    "conversion ‘{c}’ is not supported by this dd"
                                ));
                            }
                            _ => return Err(format!("invalid conversion: ‘{c}’")),
                        }
                    }
                }
                "iflag" | "oflag" => {
                    for f in value.split(',') {
                        match (key, f) {
                            ("iflag", "count_bytes") => o.count_bytes = true,
                            ("iflag", "skip_bytes") => o.skip_bytes = true,
                            ("iflag", "fullblock") => o.fullblock = true,
                            ("oflag", "seek_bytes") => o.seek_bytes = true,
                            ("oflag", "append") => o.append = true,
                            // Meaningless for the sandbox's in-memory files.
                            (
                                _,
                                "direct" | "dsync" | "sync" | "nonblock" | "noatime" | "nocache"
                                | "noctty" | "nofollow" | "binary" | "text",
                            ) => {}
                            _ if key == "iflag" => {
                                return Err(format!("invalid input flag: ‘{f}’"));
                            }
                            _ => return Err(format!("invalid output flag: ‘{f}’")),
                        }
                    }
                }
                "status" => {
                    o.quiet = match value {
                        "none" => 2,
                        "noxfer" => 1,
                        "progress" => 0,
                        _ => return Err(format!("invalid status level: ‘{value}’")),
                    }
                }
                _ => return Err(format!("unrecognized operand ‘{a}’")),
            }
            Ok(())
        })();
        if let Err(msg) = result {
            // GNU dd adds its "Try" line to everything but a bad number.
            if msg.starts_with("invalid number") {
                eprintln!("dd: {msg}");
                return 1;
            }
            return usage_error(&msg);
        }
    }
    if o.ucase && o.lcase {
        eprintln!("dd: cannot combine lcase and ucase");
        return 1;
    }
    run(&o)
}

fn errno(e: &io::Error) -> String {
    guest_rt::errno_text(e)
}

fn run(o: &Opts) -> i32 {
    let mut input: Box<dyn Read> = match &o.input {
        None => Box::new(io::stdin().lock()),
        Some(path) => match File::open(path) {
            Ok(mut f) => {
                if o.skip > 0 {
                    let bytes = if o.skip_bytes {
                        o.skip
                    } else {
                        o.skip.saturating_mul(o.ibs as u64)
                    };
                    if let Err(e) = f.seek(SeekFrom::Start(bytes)) {
                        eprintln!("dd: {path}: cannot skip: {}", errno(&e));
                        return 1;
                    }
                }
                Box::new(f)
            }
            Err(e) => {
                eprintln!("dd: failed to open '{path}': {}", errno(&e));
                return 1;
            }
        },
    };
    // Standard input cannot seek: skipped by reading.
    if o.input.is_none() && o.skip > 0 {
        let bytes = if o.skip_bytes {
            o.skip
        } else {
            o.skip.saturating_mul(o.ibs as u64)
        };
        if let Err(e) = io::copy(&mut (&mut input).take(bytes), &mut io::sink()) {
            eprintln!("dd: standard input: cannot skip: {}", errno(&e));
            return 1;
        }
    }
    let seek_bytes = if o.seek_bytes {
        o.seek
    } else {
        o.seek.saturating_mul(o.obs as u64)
    };
    let mut output: Box<dyn Write> = match &o.output {
        None => {
            if seek_bytes > 0 {
                // Standard output cannot seek: the skipped part is written as zeros, as GNU dd
                // does on a pipe it cannot seek.
                let mut out = io::stdout().lock();
                if let Err(e) = io::copy(&mut io::repeat(0).take(seek_bytes), &mut out) {
                    eprintln!("dd: writing to 'standard output': {}", errno(&e));
                    return 1;
                }
            }
            Box::new(io::stdout().lock())
        }
        Some(path) => {
            let mut opts = OpenOptions::new();
            opts.write(true);
            if o.append {
                opts.append(true);
            }
            if o.excl {
                opts.create_new(true);
            } else if !o.nocreat {
                opts.create(true);
            }
            let mut f = match opts.open(path) {
                Ok(f) => f,
                Err(e) => {
                    eprintln!("dd: failed to open '{path}': {}", errno(&e));
                    return 1;
                }
            };
            if !o.notrunc
                && !o.append
                && let Err(e) = f.set_len(seek_bytes)
            {
                eprintln!(
                    "dd: failed to truncate to {seek_bytes} bytes in output file '{path}': {}",
                    errno(&e)
                );
                return 1;
            }
            if seek_bytes > 0
                && let Err(e) = f.seek(SeekFrom::Start(seek_bytes))
            {
                eprintln!("dd: '{path}': cannot seek: {}", errno(&e));
                return 1;
            }
            Box::new(f)
        }
    };
    let start = Instant::now();
    let mut stats = Stats::default();
    let code = copy(o, &mut input, &mut output, &mut stats);
    if code == 0 && o.fsync {
        let _ = output.flush();
    }
    if o.quiet < 2 {
        stats.report(o.quiet == 1, start.elapsed().as_secs_f64());
    }
    code
}

#[derive(Default)]
struct Stats {
    full_in: u64,
    part_in: u64,
    full_out: u64,
    part_out: u64,
    bytes: u64,
}

impl Stats {
    fn report(&self, noxfer: bool, secs: f64) {
        let mut s = format!(
            "{}+{} records in\n{}+{} records out\n",
            self.full_in, self.part_in, self.full_out, self.part_out
        );
        if !noxfer {
            let b = self.bytes;
            let size = if b < 1000 {
                format!("{b} byte{} copied", if b == 1 { "" } else { "s" })
            } else {
                format!(
                    "{b} bytes ({}, {}) copied",
                    human(b as f64, 1000.0, ""),
                    human(b as f64, 1024.0, "i")
                )
            };
            let rate = if secs > 0.0 {
                format!("{}/s", human(b as f64 / secs, 1000.0, ""))
            } else {
                "Infinity B/s".to_string()
            };
            s.push_str(&format!("{size}, {} s, {rate}\n", g_format(secs)));
        }
        eprint!("{s}");
    }
}

/// A size as GNU dd's summary writes it: three significant digits and an SI (or IEC) unit.
fn human(x: f64, base: f64, i: &str) -> String {
    const UNITS: [&str; 9] = ["", "k", "M", "G", "T", "P", "E", "Z", "Y"];
    let mut v = x;
    let mut u = 0;
    while v >= base && u + 1 < UNITS.len() {
        v /= base;
        u += 1;
    }
    let unit = if u == 0 {
        "B".to_string()
    } else if i.is_empty() {
        format!("{}B", UNITS[u])
    } else {
        format!("{}iB", UNITS[u].to_uppercase())
    };
    let digits = if v < 10.0 {
        format!("{v:.1}")
    } else {
        format!("{v:.0}")
    };
    format!("{digits} {unit}")
}

/// printf's `%g` for the elapsed seconds.
fn g_format(x: f64) -> String {
    if x == 0.0 {
        return "0".into();
    }
    let exp = x.abs().log10().floor() as i32;
    if !(-4..6).contains(&exp) {
        let s = format!("{x:.5e}");
        let (m, e) = s.split_once('e').unwrap_or((&s, "0"));
        let m = m.trim_end_matches('0').trim_end_matches('.');
        let e: i32 = e.parse().unwrap_or(0);
        return format!("{m}e{}{:02}", if e < 0 { '-' } else { '+' }, e.abs());
    }
    let decimals = (5 - exp).max(0) as usize;
    let s = format!("{x:.decimals$}");
    if s.contains('.') {
        s.trim_end_matches('0').trim_end_matches('.').to_string()
    } else {
        s
    }
}

/// Reads up to `want` bytes: one read, or (iflag=fullblock) until the block is full or the
/// input ends.
fn read_block(input: &mut dyn Read, buf: &mut [u8], fullblock: bool) -> io::Result<usize> {
    let mut got = 0;
    while got < buf.len() {
        match input.read(&mut buf[got..]) {
            Ok(0) => break,
            Ok(n) => {
                got += n;
                if !fullblock {
                    break;
                }
            }
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(e),
        }
    }
    Ok(got)
}

fn copy(o: &Opts, input: &mut dyn Read, output: &mut dyn Write, st: &mut Stats) -> i32 {
    let in_name = o.input.as_deref().unwrap_or("standard input");
    let out_name = o.output.as_deref().unwrap_or("standard output");
    let mut buf = vec![0u8; o.ibs];
    // Output waiting to fill an obs-sized block (when not bs=).
    let mut pending: Vec<u8> = Vec::new();
    let mut odd: Option<u8> = None;
    let mut left_bytes = if o.count_bytes { o.count } else { None };
    let mut left_blocks = if o.count_bytes { None } else { o.count };
    let write_out = |data: &[u8], st: &mut Stats, output: &mut dyn Write| -> io::Result<()> {
        output.write_all(data)?;
        st.bytes += data.len() as u64;
        Ok(())
    };
    loop {
        if left_blocks == Some(0) || left_bytes == Some(0) {
            break;
        }
        let want = match left_bytes {
            Some(b) => (b as usize).min(o.ibs),
            None => o.ibs,
        };
        let n = match read_block(input, &mut buf[..want], o.fullblock) {
            Ok(0) => break,
            Ok(n) => n,
            Err(e) => {
                eprintln!("dd: error reading '{in_name}': {}", errno(&e));
                if o.noerror {
                    st.part_in += 1;
                    continue;
                }
                return 1;
            }
        };
        if n == o.ibs {
            st.full_in += 1;
        } else {
            st.part_in += 1;
        }
        if let Some(b) = left_bytes.as_mut() {
            *b -= n as u64;
        }
        if let Some(c) = left_blocks.as_mut() {
            *c -= 1;
        }
        let mut block = buf[..n].to_vec();
        if o.sync && n < o.ibs {
            block.resize(o.ibs, 0);
        }
        if o.swab {
            // Pairs run across blocks: an odd block's last byte waits for the next one.
            if let Some(b) = odd.take() {
                block.insert(0, b);
            }
            if block.len() % 2 == 1 {
                odd = block.pop();
            }
            for pair in block.chunks_exact_mut(2) {
                pair.swap(0, 1);
            }
        }
        if o.ucase {
            block.make_ascii_uppercase();
        } else if o.lcase {
            block.make_ascii_lowercase();
        }
        let result = if o.bs {
            if block.len() == o.obs {
                st.full_out += 1;
            } else {
                st.part_out += 1;
            }
            write_out(&block, st, output)
        } else {
            pending.extend_from_slice(&block);
            let mut r = Ok(());
            while pending.len() >= o.obs && r.is_ok() {
                let rest = pending.split_off(o.obs);
                r = write_out(&pending, st, output);
                st.full_out += 1;
                pending = rest;
            }
            r
        };
        if let Err(e) = result {
            eprintln!("dd: error writing '{out_name}': {}", errno(&e));
            return 1;
        }
    }
    if let Some(b) = odd {
        pending.push(b);
    }
    if !pending.is_empty() {
        st.part_out += 1;
        if let Err(e) = write_out(&pending, st, output) {
            eprintln!("dd: error writing '{out_name}': {}", errno(&e));
            return 1;
        }
    }
    if let Err(e) = output.flush() {
        eprintln!("dd: error writing '{out_name}': {}", errno(&e));
        return 1;
    }
    0
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn numbers_take_gnu_suffixes() {
        for (s, n) in [
            ("512", 512),
            ("2b", 1024),
            ("3w", 6),
            ("1K", 1024),
            ("1kB", 1000),
            ("1KiB", 1024),
            ("2M", 2 << 20),
            ("1MB", 1_000_000),
            ("2x3", 6),
            ("1Kx2", 2048),
        ] {
            assert_eq!(number(s), Some(n), "{s}");
        }
        for s in ["", "x", "1q", "k", "1x", "99999999999999999999"] {
            assert_eq!(number(s), None, "{s}");
        }
    }

    #[test]
    fn summary_numbers_as_gnu_writes_them() {
        assert_eq!(human(5120.0, 1000.0, ""), "5.1 kB");
        assert_eq!(human(5120.0, 1024.0, "i"), "5.0 KiB");
        assert_eq!(human(16384.0, 1000.0, ""), "16 kB");
        assert_eq!(g_format(0.000123), "0.000123");
        assert_eq!(g_format(1.5), "1.5");
        assert_eq!(g_format(2.1e-5), "2.1e-05");
    }
}
