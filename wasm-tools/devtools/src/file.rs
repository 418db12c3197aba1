//! `file`: what a file holds, from its first bytes, in the words of file 5.44 for the common
//! types: text (ASCII, UTF-8, ISO-8859, line terminators, long lines), JSON, HTML, XML,
//! scripts by their `#!` line, ELF, PNG, JPEG, GIF, PDF, ZIP, gzip, bzip2, xz, tar, wasm.

use std::fs;
use std::io::Read;

const HELP: &str = "\
Usage: file [-bhiLz] [--mime-type] [--mime-encoding] [-F sep] file ...
Determine the type of each file from its contents.
  -b, --brief            do not prepend file names
  -i, --mime             print MIME type and encoding (type/subtype; charset=...)
      --mime-type        print only the MIME type
      --mime-encoding    print only the encoding
  -L, --dereference      follow symbolic links
  -h, --no-dereference   do not follow symbolic links (the default)
  -F, --separator SEP    use SEP instead of ':' after the file name
  -0, --print0           output a NUL after the file name
      --help             display this help
A file name of - reads standard input.
";

#[derive(Clone, Copy, PartialEq)]
enum Mode {
    Desc,
    Mime,
    MimeType,
    MimeEnc,
}

pub struct Kind {
    desc: String,
    mime: &'static str,
    enc: &'static str,
}

fn kind(desc: impl Into<String>, mime: &'static str, enc: &'static str) -> Kind {
    Kind {
        desc: desc.into(),
        mime,
        enc,
    }
}

pub fn main(args: &[String]) -> i32 {
    let args = crate::split_clusters(args, "F");
    let mut brief = false;
    let mut mode = Mode::Desc;
    let mut follow = false;
    let mut sep = ":".to_string();
    let mut nul = false;
    let mut files = Vec::new();
    let mut i = 0;
    while i < args.len() {
        let a = args[i].as_str();
        if a == "--" {
            files.extend(args[i + 1..].iter().cloned());
            break;
        }
        if !a.starts_with('-') || a == "-" {
            files.push(a.to_string());
            i += 1;
            continue;
        }
        match a {
            "--help" => {
                crate::out(HELP.as_bytes());
                return 0;
            }
            "-v" | "--version" => {
                crate::out(b"file (wasmsand)\n");
                return 0;
            }
            "-b" | "--brief" => brief = true,
            "-i" | "--mime" => mode = Mode::Mime,
            "--mime-type" => mode = Mode::MimeType,
            "--mime-encoding" => mode = Mode::MimeEnc,
            "-L" | "--dereference" => follow = true,
            "-h" | "--no-dereference" => follow = false,
            "-0" | "--print0" => nul = true,
            "-z" | "-s" | "--special-files" | "-k" | "--keep-going" | "-N" | "--no-pad" => {}
            _ if a.starts_with("-F") || a.starts_with("--separator") => {
                let v = if let Some(v) = a.strip_prefix("--separator=") {
                    Some(v.to_string())
                } else if a.len() > 2 && a.starts_with("-F") {
                    Some(a[2..].to_string())
                } else {
                    i += 1;
                    args.get(i).cloned()
                };
                match v {
                    Some(v) => sep = v,
                    None => {
                        eprintln!("file: option requires an argument -- 'F'");
                        return 1;
                    }
                }
            }
            _ => {
                eprintln!(
                    "file: invalid option -- '{}'\nUsage: file [-bhiLz] [--mime-type] file ...\nTry `file --help' for more information.",
                    a.trim_start_matches('-')
                );
                return 1;
            }
        }
        i += 1;
    }
    if files.is_empty() {
        eprintln!(
            "Usage: file [-bhiLz] [--mime-type] [--mime-encoding] [-F sep] file ...\nTry `file --help' for more information."
        );
        return 1;
    }
    let shown: Vec<String> = files
        .iter()
        .map(|f| {
            if f == "-" {
                "/dev/stdin".into()
            } else {
                f.clone()
            }
        })
        .collect();
    let width = shown.iter().map(|s| s.chars().count()).max().unwrap_or(0) + sep.chars().count();
    let mut out = String::new();
    for (f, name) in files.iter().zip(&shown) {
        let text = match describe(f, follow) {
            Ok(k) => match mode {
                Mode::Desc => k.desc,
                Mode::MimeType => k.mime.to_string(),
                Mode::MimeEnc => k.enc.to_string(),
                Mode::Mime => format!("{}; charset={}", k.mime, k.enc),
            },
            Err(e) => format!("cannot open `{f}' ({e})"),
        };
        if !brief {
            out.push_str(name);
            if nul {
                out.push('\0');
            } else {
                out.push_str(&sep);
                let used = name.chars().count() + sep.chars().count();
                out.push_str(&" ".repeat(width - used));
            }
            out.push(' ');
        }
        out.push_str(&text);
        out.push('\n');
    }
    crate::out(out.as_bytes());
    0
}

fn describe(f: &str, follow: bool) -> Result<Kind, String> {
    let data = if f == "-" {
        let mut d = Vec::new();
        std::io::stdin()
            .read_to_end(&mut d)
            .map_err(|e| crate::errno_text(&e))?;
        d
    } else {
        let lm = fs::symlink_metadata(f).map_err(|e| crate::errno_text(&e))?;
        if lm.file_type().is_symlink() && !follow {
            let t = fs::read_link(f).map_err(|e| crate::errno_text(&e))?;
            return Ok(kind(
                format!("symbolic link to {}", t.to_string_lossy()),
                "inode/symlink",
                "binary",
            ));
        }
        let m = fs::metadata(f).map_err(|e| crate::errno_text(&e))?;
        if m.is_dir() {
            return Ok(kind("directory", "inode/directory", "binary"));
        }
        // The head of the file is enough for every test here; text statistics look at the
        // first MiB, as file's default -P bytes limit does.
        let mut d = Vec::new();
        fs::File::open(f)
            .and_then(|h| h.take(1 << 20).read_to_end(&mut d))
            .map_err(|e| crate::errno_text(&e))?;
        // ELF keeps its section headers at the end.
        if d.starts_with(b"\x7fELF") && m.len() > d.len() as u64 && m.len() <= 256 << 20 {
            d = fs::read(f).map_err(|e| crate::errno_text(&e))?;
        }
        d
    };
    Ok(classify(&data))
}

fn be16(d: &[u8], at: usize) -> u32 {
    d.get(at..at + 2)
        .map_or(0, |b| u32::from(u16::from_be_bytes([b[0], b[1]])))
}

fn be32(d: &[u8], at: usize) -> u32 {
    d.get(at..at + 4)
        .map_or(0, |b| u32::from_be_bytes([b[0], b[1], b[2], b[3]]))
}

fn le16(d: &[u8], at: usize) -> u32 {
    d.get(at..at + 2)
        .map_or(0, |b| u32::from(u16::from_le_bytes([b[0], b[1]])))
}

fn le32(d: &[u8], at: usize) -> u32 {
    d.get(at..at + 4)
        .map_or(0, |b| u32::from_le_bytes([b[0], b[1], b[2], b[3]]))
}

fn classify(d: &[u8]) -> Kind {
    if d.is_empty() {
        return kind("empty", "inode/x-empty", "binary");
    }
    if d.starts_with(b"\x7fELF") {
        return crate::file_elf::describe(d);
    }
    if d.starts_with(b"\x89PNG\r\n\x1a\n") {
        let color = match d.get(25) {
            Some(0) => format!("{}-bit grayscale", d[24]),
            Some(2) => format!("{}-bit/color RGB", d[24]),
            Some(3) => format!("{}-bit colormap", d[24]),
            Some(4) => format!("{}-bit gray+alpha", d[24]),
            Some(6) => format!("{}-bit/color RGBA", d[24]),
            _ => String::from("unknown color type"),
        };
        let inter = if d.get(28) == Some(&1) {
            "interlaced"
        } else {
            "non-interlaced"
        };
        return kind(
            format!(
                "PNG image data, {} x {}, {color}, {inter}",
                be32(d, 16),
                be32(d, 20)
            ),
            "image/png",
            "binary",
        );
    }
    if d.starts_with(b"GIF87a") || d.starts_with(b"GIF89a") {
        return kind(
            format!(
                "GIF image data, version {}, {} x {}",
                String::from_utf8_lossy(&d[3..6]),
                le16(d, 6),
                le16(d, 8)
            ),
            "image/gif",
            "binary",
        );
    }
    if d.starts_with(b"\xff\xd8\xff") {
        return kind(jpeg(d), "image/jpeg", "binary");
    }
    if d.starts_with(b"%PDF-") {
        let ver: String = d[5..]
            .iter()
            .take_while(|b| b.is_ascii_digit() || **b == b'.')
            .map(|&b| b as char)
            .collect();
        return kind(
            format!("PDF document, version {ver}"),
            "application/pdf",
            text_encoding(d),
        );
    }
    if d.starts_with(b"PK\x03\x04") {
        let need = le16(d, 4);
        let method = match le16(d, 8) {
            0 => "store".to_string(),
            8 => "deflate".to_string(),
            12 => "bzip2".to_string(),
            14 => "lzma".to_string(),
            93 => "zstd".to_string(),
            n => n.to_string(),
        };
        return kind(
            format!(
                "Zip archive data, at least v{}.{} to extract, compression method={method}",
                need / 10,
                need % 10
            ),
            "application/zip",
            "binary",
        );
    }
    if d.starts_with(b"PK\x05\x06") {
        return kind("Zip archive data (empty)", "application/zip", "binary");
    }
    if d.starts_with(b"\x1f\x8b") {
        return kind(gzip(d), "application/gzip", "binary");
    }
    if d.starts_with(b"BZh") && d.get(3).is_some_and(|b| (b'1'..=b'9').contains(b)) {
        return kind(
            format!("bzip2 compressed data, block size = {}00k", d[3] as char),
            "application/x-bzip2",
            "binary",
        );
    }
    if d.starts_with(b"\xfd7zXZ\x00") {
        let check = match d.get(7).map(|b| b & 0x0f) {
            Some(0) => "none",
            Some(1) => "CRC32",
            Some(4) => "CRC64",
            Some(10) => "SHA-256",
            _ => "unknown",
        };
        return kind(
            format!("XZ compressed data, checksum {check}"),
            "application/x-xz",
            "binary",
        );
    }
    if d.starts_with(b"\x28\xb5\x2f\xfd") {
        return kind(
            "Zstandard compressed data (v0.8+)",
            "application/zstd",
            "binary",
        );
    }
    if d.starts_with(b"\0asm") {
        return kind(
            format!(
                "WebAssembly (wasm) binary module version {:#x}{}",
                le32(d, 4),
                if le32(d, 4) == 1 { " (MVP)" } else { "" }
            ),
            "application/wasm",
            "binary",
        );
    }
    if d.len() >= 262 && &d[257..262] == b"ustar" {
        let gnu = &d[257..265] == b"ustar  \0";
        return kind(
            if gnu {
                "POSIX tar archive (GNU)"
            } else {
                "POSIX tar archive"
            },
            "application/x-tar",
            "binary",
        );
    }
    if d.starts_with(b"SQLite format 3\0") {
        return kind(
            format!(
                "SQLite 3.x database, last written using SQLite version {}",
                be32(d, 96)
            ),
            "application/vnd.sqlite3",
            "binary",
        );
    }
    text(d)
}

fn jpeg(d: &[u8]) -> String {
    let mut s = String::from("JPEG image data");
    let mut at = 2;
    let mut first = true;
    while at + 4 <= d.len() && d[at] == 0xff {
        let marker = d[at + 1];
        let len = be16(d, at + 2) as usize;
        if marker == 0xe0 && first && d.get(at + 4..at + 9) == Some(b"JFIF\0") {
            let p = at + 9;
            s.push_str(&format!(", JFIF standard {}.{:02}", d[p], d[p + 1]));
            match d.get(p + 2) {
                Some(0) => s.push_str(", aspect ratio"),
                Some(1) => s.push_str(", resolution (DPI)"),
                Some(2) => s.push_str(", resolution (DPCM)"),
                _ => {}
            }
            s.push_str(&format!(
                ", density {}x{}, segment length {len}",
                be16(d, p + 3),
                be16(d, p + 5)
            ));
        } else if marker == 0xe1 && first && d.get(at + 4..at + 10) == Some(b"Exif\0\0") {
            s.push_str(", Exif standard: [TIFF image data]");
        }
        if matches!(marker, 0xc0..=0xc3) {
            let kindname = match marker {
                0xc0 => "baseline",
                0xc1 => "extended sequential",
                0xc2 => "progressive",
                _ => "lossless",
            };
            s.push_str(&format!(
                ", {kindname}, precision {}, {}x{}, components {}",
                d.get(at + 4).copied().unwrap_or(0),
                be16(d, at + 7),
                be16(d, at + 5),
                d.get(at + 9).copied().unwrap_or(0)
            ));
            break;
        }
        if marker == 0xda || marker == 0xd9 {
            break;
        }
        first = false;
        at += 2 + len;
    }
    s
}

fn gzip(d: &[u8]) -> String {
    let mut s = String::from("gzip compressed data");
    let flags = d.get(3).copied().unwrap_or(0);
    let mtime = le32(d, 4);
    let mut at = 10;
    if flags & 4 != 0 {
        at += 2 + le16(d, 10) as usize;
    }
    if flags & 8 != 0 {
        let end = d[at.min(d.len())..]
            .iter()
            .position(|&b| b == 0)
            .map_or(d.len(), |p| at + p);
        s.push_str(&format!(
            ", was \"{}\"",
            String::from_utf8_lossy(&d[at.min(d.len())..end])
        ));
    }
    if mtime != 0 {
        s.push_str(&format!(", last modified: {}", asctime(i64::from(mtime))));
    }
    match d.get(8) {
        Some(2) => s.push_str(", max compression"),
        Some(4) => s.push_str(", max speed"),
        _ => {}
    }
    let os = match d.get(9) {
        Some(0) => "FAT filesystem (MS-DOS, OS/2, NT)",
        Some(3) => "Unix",
        Some(7) => "Macintosh",
        Some(11) => "NTFS filesystem (NT)",
        _ => "",
    };
    if !os.is_empty() {
        s.push_str(&format!(", from {os}"));
    }
    if d.len() >= 18 {
        s.push_str(&format!(
            ", original size modulo 2^32 {}",
            le32(d, d.len() - 4)
        ));
    }
    s
}

/// `Mon Nov 23 18:41:23 2026`, in UTC (the sandbox's zone).
fn asctime(secs: i64) -> String {
    let days = secs.div_euclid(86_400);
    let rem = secs.rem_euclid(86_400);
    let (y, m, d) = guest_rt::civil_from_days(days);
    let wd = ["Thu", "Fri", "Sat", "Sun", "Mon", "Tue", "Wed"][days.rem_euclid(7) as usize];
    let mon = [
        "Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec",
    ][m as usize - 1];
    format!(
        "{wd} {mon} {d:2} {:02}:{:02}:{:02} {y}",
        rem / 3600,
        rem % 3600 / 60,
        rem % 60
    )
}

/// file's "text" bytes: BEL..CR, ESC, and the printable ASCII range.
fn text_byte(b: u8) -> bool {
    matches!(b, 0x07..=0x0d | 0x1b | 0x20..=0x7e)
}

/// The charset `file -i` reports for text-like contents.
fn text_encoding(d: &[u8]) -> &'static str {
    if is_ascii_text(d) {
        "us-ascii"
    } else if std::str::from_utf8(d).is_ok() {
        "utf-8"
    } else if d.iter().all(|&b| text_byte(b) || b >= 0xa0) {
        "iso-8859-1"
    } else {
        "binary"
    }
}

fn is_ascii_text(d: &[u8]) -> bool {
    d.iter().all(|&b| text_byte(b))
}

fn text(d: &[u8]) -> Kind {
    let (body, bom) = match d.strip_prefix(b"\xef\xbb\xbf") {
        Some(rest) => (rest, true),
        None => (d, false),
    };
    let (charset, enc, mime_enc) = if is_ascii_text(body) && !bom {
        ("ASCII", "ASCII", "us-ascii")
    } else if std::str::from_utf8(body)
        .is_ok_and(|s| s.chars().all(|c| !c.is_ascii() || text_byte(c as u8)))
    {
        if bom {
            ("UTF-8", "Unicode text, UTF-8 (with BOM)", "utf-8")
        } else {
            ("UTF-8", "Unicode text, UTF-8", "utf-8")
        }
    } else if body.iter().all(|&b| text_byte(b) || b >= 0xa0) {
        ("ISO-8859", "ISO-8859", "iso-8859-1")
    } else if body.iter().all(|&b| text_byte(b) || b >= 0x80) {
        ("extended-ASCII", "Non-ISO extended-ASCII", "unknown-8bit")
    } else {
        return kind("data", "application/octet-stream", "binary");
    };
    let _ = charset;
    let s = String::from_utf8_lossy(body);
    let trimmed = s.trim_start();
    // Scripts by their #! line.
    if let Some(rest) = s.strip_prefix("#!") {
        let line = rest.lines().next().unwrap_or("").trim();
        let mut parts = line.split_whitespace();
        let prog = parts.next().unwrap_or("");
        let mut name = prog.rsplit('/').next().unwrap_or(prog).to_string();
        if name == "env" {
            name = parts
                .find(|p| !p.starts_with('-'))
                .unwrap_or("")
                .rsplit('/')
                .next()
                .unwrap_or("")
                .to_string();
        }
        let base = name.trim_end_matches(|c: char| c.is_ascii_digit() || c == '.');
        let tail = format!("{enc} text executable");
        let (desc, mime) = match base {
            "sh" | "dash" | "ash" => (format!("POSIX shell script, {tail}"), "text/x-shellscript"),
            "bash" => (
                format!("Bourne-Again shell script, {tail}"),
                "text/x-shellscript",
            ),
            "zsh" => (
                format!("Paul Falstad's zsh script, {tail}"),
                "text/x-shellscript",
            ),
            "python" => (format!("Python script, {tail}"), "text/x-script.python"),
            "perl" => ("Perl script text executable".to_string(), "text/x-perl"),
            "node" | "nodejs" => (
                format!("Node.js script executable, {enc} text"),
                "application/javascript",
            ),
            "awk" | "gawk" | "mawk" => (format!("awk script, {tail}"), "text/x-awk"),
            "ruby" => (format!("Ruby script, {tail}"), "text/x-ruby"),
            _ => (format!("a {prog} script, {tail}"), "text/plain"),
        };
        return kind(desc, mime, mime_enc);
    }
    let lower: String = trimmed
        .chars()
        .take(64)
        .collect::<String>()
        .to_ascii_lowercase();
    if lower.starts_with("<?xml") {
        let ver = trimmed
            .split("version=\"")
            .nth(1)
            .and_then(|v| v.split('"').next())
            .unwrap_or("1.0");
        return kind(
            format!("XML {ver} document, {enc} text{}", annotations(body)),
            "text/xml",
            mime_enc,
        );
    }
    if lower.starts_with("<!doctype html") || lower.starts_with("<html") {
        return kind(
            format!("HTML document, {enc} text{}", annotations(body)),
            "text/html",
            mime_enc,
        );
    }
    if (trimmed.starts_with('{') || trimmed.starts_with('[')) && crate::json::valid(trimmed) {
        return kind("JSON text data", "application/json", mime_enc);
    }
    kind(
        format!("{enc} text{}", annotations(body)),
        "text/plain",
        mime_enc,
    )
}

fn annotations(d: &[u8]) -> String {
    let mut out = String::new();
    let (mut crlf, mut lf, mut cr) = (false, false, false);
    let mut longest = 0;
    let mut cur = 0;
    let mut esc = false;
    let mut over = false;
    let mut k = 0;
    while k < d.len() {
        match d[k] {
            b'\r' if d.get(k + 1) == Some(&b'\n') => {
                crlf = true;
                longest = longest.max(cur);
                cur = 0;
                k += 1;
            }
            b'\r' => {
                cr = true;
                longest = longest.max(cur);
                cur = 0;
            }
            b'\n' => {
                lf = true;
                longest = longest.max(cur);
                cur = 0;
            }
            0x1b => {
                esc = true;
                cur += 1;
            }
            0x08 => {
                over = true;
                cur += 1;
            }
            _ => cur += 1,
        }
        k += 1;
    }
    longest = longest.max(cur);
    if longest > 300 {
        out.push_str(&format!(", with very long lines ({longest})"));
    }
    let terms: Vec<&str> = [(crlf, "CRLF"), (cr, "CR"), (lf, "LF")]
        .iter()
        .filter(|(on, _)| *on)
        .map(|(_, n)| *n)
        .collect();
    match terms.as_slice() {
        [] => out.push_str(", with no line terminators"),
        ["LF"] => {}
        t => out.push_str(&format!(", with {} line terminators", t.join(", "))),
    }
    if esc {
        out.push_str(", with escape sequences");
    }
    if over {
        out.push_str(", with overstriking");
    }
    out
}

pub fn elf_kind(desc: String, mime: &'static str) -> Kind {
    kind(desc, mime, "binary")
}
