//! What Info-ZIP's unzip says and does between finding the end record and reading the first
//! member: it shows the archive comment (pausing at a ^S when extracting), warns about disk
//! numbers and shifted offsets, finds where the central directory really starts, and walks
//! its headers before trusting them. A damaged archive gets its messages and exit statuses
//! (2 error, 3 severe, 51 unexpected end of file) rather than a parser's.

use std::io::{Read, Write};

use crate::eocd::Record;

/// The central file header's signature.
const CENTRAL_SIG: &[u8; 4] = b"PK\x01\x02";
/// The central file header's size without its three variable parts.
const CENTRAL_LEN: u64 = 46;
/// Info-ZIP's name buffer on Unix: longer names are cut to one byte less.
const FILNAMSIZ: u64 = 4096;

const QUIT_PROMPT: &str = "--- Press `Q' to quit, or any other key to continue ---";

const REPORT: &str = "  (please check that you have transferred or created the zipfile in the
  appropriate BINARY mode and that you have compiled UnZip properly)\n";

/// Shows the archive comment on stdout as unzip does: no CR, ESC as `^[`, and at each ^S
/// (with the newline right after it) a pause on stderr that reads one key from stdin when
/// `extracting`; `q` or `Q` there ends the program. A newline follows unless the comment
/// left the cursor at the start of a line. Returns false when the user quit.
pub fn show_comment(comment: &[u8], extracting: bool) -> bool {
    // unzip drops every carriage return first, so CR LF line ends show as LF.
    let comment: Vec<u8> = comment.iter().copied().filter(|&b| b != b'\r').collect();
    let mut text = Vec::new();
    // After the `Archive:` line.
    let mut at_line_start = true;
    let mut i = 0;
    while i < comment.len() {
        let b = comment[i];
        i += 1;
        match b {
            0x1B => text.extend_from_slice(b"^["),
            0x13 => {
                if comment[i..].starts_with(b"\n") {
                    text.push(b'\n');
                    i += 1;
                }
                if let Some(&last) = text.last() {
                    at_line_start = last == b'\n';
                }
                crate::out(&text);
                text.clear();
                if extracting {
                    let _ = std::io::stdout().flush();
                    let mut e = std::io::stderr().lock();
                    let lead = if at_line_start { "" } else { "\n" };
                    let _ = write!(e, "{lead}{QUIT_PROMPT}");
                    let _ = e.flush();
                    let mut key = [0u8; 1];
                    let got = std::io::stdin().read(&mut key).unwrap_or(0);
                    let _ = write!(e, "\r{:57}\r", "");
                    let _ = e.flush();
                    at_line_start = true;
                    if got == 1 && key[0].eq_ignore_ascii_case(&b'q') {
                        return false;
                    }
                }
            }
            _ => text.push(b),
        }
    }
    if let Some(&last) = text.last() {
        at_line_start = last == b'\n';
    }
    if !at_line_start {
        text.push(b'\n');
    }
    crate::out(&text);
    let _ = std::io::stdout().flush();
    true
}

/// Where unzip's diagnostics go: stderr, or stdout when testing (`-t`), where they stay in
/// order with the results.
#[derive(Clone, Copy)]
pub enum Channel {
    Stderr,
    Stdout,
}

impl Channel {
    pub fn say(self, text: &[u8]) {
        match self {
            Channel::Stdout => crate::out(text),
            Channel::Stderr => {
                let _ = std::io::stdout().flush();
                let _ = std::io::stderr().write_all(text);
            }
        }
    }
}

/// How the checks before the members ended.
pub enum Checked {
    /// Read the directory from `cd_start`; members' offsets count from `archive_start`
    /// (bytes before the archive, or negative when some are missing); `status` carries the
    /// warnings and errors so far.
    Go {
        status: i32,
        cd_start: u64,
        archive_start: i64,
    },
    /// Stop with this exit status; the messages are out.
    Stop(i32),
}

/// The end record's consistency checks, with unzip's messages on stderr: disk numbers, bytes
/// before or missing from the archive, and where the directory starts (retried without the
/// shift, as for STZip and ZIPSPLIT archives, when the shifted place holds no header).
pub fn check_record(path: &str, bytes: &[u8], rec: &Record, to: Channel) -> Checked {
    let mut status = 0;
    let mut err = String::new();
    if rec.this_disk != 0 {
        err.push_str(&format!(
            "warning [{path}]:  zipfile claims to be last disk of a multi-part archive;
  attempting to process anyway, assuming all parts have been concatenated
  together in order.  Expect \"errors\" and warnings...true multi-part support
  doesn't exist yet (coming soon).\n"
        ));
        status = 1;
    }
    let mut extra = rec.extra();
    let mut cd_offset = rec.cd_offset;
    if extra < 0 && rec.this_disk == 0 {
        err.push_str(&format!(
            "error [{path}]:  missing {} bytes in zipfile\n  (attempting to process anyway)\n",
            -extra
        ));
        status = 2;
    } else if extra > 0 {
        if cd_offset == 0 && rec.cd_size != 0 {
            err.push_str(&format!(
                "error [{path}]:  NULL central directory offset\n  (attempting to process anyway)\n"
            ));
            cd_offset = extra as u64;
            extra = 0;
            status = 2;
        } else {
            err.push_str(&format!(
                "warning [{path}]:  {extra} extra byte{} at beginning or within zipfile\n  (attempting to process anyway)\n",
                if extra == 1 { "" } else { "s" }
            ));
            status = status.max(1);
        }
    }
    let header_at = |at: i64| {
        usize::try_from(at)
            .ok()
            .and_then(|at| bytes.get(at..at.checked_add(4)?))
            == Some(&CENTRAL_SIG[..])
    };
    let mut cd_start = cd_offset as i64 + extra;
    if !rec.zip64 && !rec.is_empty() && !header_at(cd_start) {
        if header_at(cd_offset as i64) {
            err.push_str(&format!(
                "error [{path}]:  reported length of central directory is
  {} bytes too long (Atari STZip zipfile?  J.H.Holm ZIPSPLIT 1.1
  zipfile?).  Compensating...\n",
                -extra
            ));
            cd_start = cd_offset as i64;
            extra = 0;
            status = 2;
        } else {
            err.push_str(&format!(
                "error [{path}]:  start of central directory not found;\n  zipfile corrupt.\n{REPORT}"
            ));
            to.say(err.as_bytes());
            return Checked::Stop(3);
        }
    }
    to.say(err.as_bytes());
    Checked::Go {
        status,
        cd_start: cd_start.max(0) as u64,
        archive_start: extra,
    }
}

/// Damage that stops unzip's reading of the central directory.
pub struct Fatal {
    /// Its message, naming the member where there is one.
    pub message: Vec<u8>,
    pub code: i32,
    /// Whether `unzip -l` prints the message too (it stops quietly on a bad name or field).
    pub when_listing: bool,
}

/// What walking the central directory found.
pub struct Walk {
    /// Warnings unzip prints as it goes, in order.
    pub warnings: Vec<u8>,
    pub fatal: Option<Fatal>,
    /// How many headers were read whole before any damage, and where the last one ends.
    pub good: u64,
    pub good_end: u64,
}

/// Reads `entries` central headers from `start` the way unzip's own reader does, before any
/// member is extracted: a missing signature, a name running past the end of the file, an
/// extra field that cannot be read. Reads past the end are short, as `read(2)` is.
pub fn walk(bytes: &[u8], start: u64, entries: u64) -> Walk {
    let mut w = Walk {
        warnings: Vec::new(),
        fatal: None,
        good: 0,
        good_end: start,
    };
    let len = bytes.len() as u64;
    let read = |at: u64, n: u64| -> &[u8] {
        if at >= len {
            return &[];
        }
        &bytes[at as usize..(at.saturating_add(n)).min(len) as usize]
    };
    let fail = |message: Vec<u8>, code: i32, when_listing: bool| {
        Some(Fatal {
            message,
            code,
            when_listing,
        })
    };
    let mut at = start;
    for k in 0..entries {
        let sig = read(at, 4);
        if sig.is_empty() {
            w.fatal = fail(Vec::new(), 51, false);
            return w;
        }
        if sig != CENTRAL_SIG {
            let message = format!(
                "error:  expected central file header signature not found (file #{}).\n{REPORT}",
                k + 1
            );
            w.fatal = fail(message.into_bytes(), 3, true);
            return w;
        }
        let head = read(at, CENTRAL_LEN);
        let mut h = [0u8; CENTRAL_LEN as usize];
        h[..head.len()].copy_from_slice(head);
        let u16_at = |o: usize| u64::from(u16::from_le_bytes([h[o], h[o + 1]]));
        let made_by = u16_at(4);
        let (name_len, extra_len, comment_len) = (u16_at(28), u16_at(30), u16_at(32));
        let unix_attrs = u32::from_le_bytes([h[38], h[39], h[40], h[41]]) >> 16 != 0;
        at += CENTRAL_LEN;
        let raw = read(at, name_len);
        let mut name = &raw[..raw.len().min(FILNAMSIZ as usize - 1)];
        if name_len >= FILNAMSIZ {
            w.warnings
                .extend_from_slice(b"warning:  filename too long--truncating.\n");
        }
        name = &name[..name.iter().position(|&b| b == 0).unwrap_or(name.len())];
        let shown = display_name(name, made_by, unix_attrs);
        if name_len > 0 && raw.is_empty() {
            let message = [&shown[..], b":  bad filename length (central)\n"].concat();
            w.fatal = fail(message, 51, false);
            return w;
        }
        at += name_len;
        if extra_len > 0 && read(at, extra_len).is_empty() {
            let message = [&shown[..], b":  bad extra field length (central)\n"].concat();
            w.fatal = fail(message, 51, false);
            return w;
        }
        at += extra_len + comment_len;
        w.good = k + 1;
        w.good_end = at;
    }
    w
}

/// The archive as the zip crate should see it after unzip's checks: the directory's sound
/// headers followed by a fresh end record that claims no other disk and places the directory
/// where it was found. Bytes missing from the front come back as zeros, so that every
/// member's offset stays right.
pub fn repaired(bytes: &[u8], cd_start: u64, archive_start: i64, walk: &Walk) -> Vec<u8> {
    let missing = (-archive_start).max(0) as u64;
    let mut b = vec![0u8; missing as usize];
    b.extend_from_slice(&bytes[..(walk.good_end as usize).min(bytes.len())]);
    let (start, end) = (cd_start + missing, walk.good_end + missing);
    b.resize(end as usize, 0);
    // The crate takes the archive to start where the directory's offset, counted back from
    // where the directory is, says: put it where unzip found it.
    let offset = start - (archive_start + missing as i64) as u64;
    b.extend_from_slice(b"PK\x05\x06");
    b.extend_from_slice(&[0; 4]);
    let count = u16::try_from(walk.good).unwrap_or(u16::MAX).to_le_bytes();
    b.extend_from_slice(&count);
    b.extend_from_slice(&count);
    b.extend_from_slice(&u32::try_from(end - start).unwrap_or(u32::MAX).to_le_bytes());
    b.extend_from_slice(&u32::try_from(offset).unwrap_or(u32::MAX).to_le_bytes());
    b.extend_from_slice(&[0; 2]);
    b
}

/// A member's name as unzip prints it: names from MS-DOS hosts go from code page 850 to
/// Latin-1 (unless a Unix-aware zip made them), and control characters show as `^X`.
fn display_name(name: &[u8], made_by: u64, unix_attrs: bool) -> Vec<u8> {
    let host = made_by >> 8;
    let version = made_by & 0xFF;
    let oem = host == 0 && !(unix_attrs && matches!(version, 25 | 26 | 40));
    let mut out = Vec::with_capacity(name.len());
    for &b in name {
        let b = if oem && b >= 0x80 {
            CP850_TO_LATIN1[usize::from(b - 0x80)]
        } else {
            b
        };
        if b < 0x20 {
            out.push(b'^');
            out.push(b + 64);
        } else {
            out.push(b);
        }
    }
    out
}

/// Bytes 0x80..=0xFF of code page 850 as unzip renders them in Latin-1: the letters and signs
/// Latin-1 has, and box-drawing characters approximated by `+`, `-`, `¦` and `_`. Recorded
/// from Debian's unzip 6.0 listing a member named with every high byte.
const CP850_TO_LATIN1: [u8; 128] = [
    0xc7, 0xfc, 0xe9, 0xe2, 0xe4, 0xe0, 0xe5, 0xe7, 0xea, 0xeb, 0xe8, 0xef, 0xee, 0xec, 0xc4, 0xc5,
    0xc9, 0xe6, 0xc6, 0xf4, 0xf6, 0xf2, 0xfb, 0xf9, 0xff, 0xd6, 0xdc, 0xf8, 0xa3, 0xd8, 0xd7, 0x83,
    0xe1, 0xed, 0xf3, 0xfa, 0xf1, 0xd1, 0xaa, 0xba, 0xbf, 0xae, 0xac, 0xbd, 0xbc, 0xa1, 0xab, 0xbb,
    0xa6, 0xa6, 0xa6, 0xa6, 0xa6, 0xc1, 0xc2, 0xc0, 0xa9, 0xa6, 0xa6, 0x2b, 0x2b, 0xa2, 0xa5, 0x2b,
    0x2b, 0x2d, 0x2d, 0x2b, 0x2d, 0x2b, 0xe3, 0xc3, 0x2b, 0x2b, 0x2d, 0x2d, 0xa6, 0x2d, 0x2b, 0xa4,
    0xf0, 0xd0, 0xca, 0xcb, 0xc8, 0x69, 0xcd, 0xce, 0xcf, 0x2b, 0x2b, 0xa6, 0x5f, 0xa6, 0xcc, 0xaf,
    0xd3, 0xdf, 0xd4, 0xd2, 0xf5, 0xd5, 0xb5, 0xfe, 0xde, 0xda, 0xdb, 0xd9, 0xfd, 0xdd, 0xaf, 0xb4,
    0xad, 0xb1, 0x3d, 0xbe, 0xb6, 0xa7, 0xf7, 0xb8, 0xb0, 0xa8, 0xb7, 0xb9, 0xb3, 0xb2, 0xa6, 0xa0,
];
