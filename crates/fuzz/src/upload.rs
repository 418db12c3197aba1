//! `upload`: `POST /sessions/{id}/files` bodies (multipart, tar, tar.gz, zip) as the service
//! stages them before writing. Whatever the body, the answer is a staged set inside the
//! caps with every path relative, normalized and within the depth cap (so nothing can land
//! outside the workspace), or a 4xx refusal; never a 5xx, never a panic.
//!
//! Half the inputs are raw bodies; the other half are archives built from fuzzer-chosen
//! members (names with `..`, absolute and drive paths, links, devices, deep and duplicate
//! paths), which a byte-level fuzzer would take long to assemble past the checksums.

use std::io::Write as _;

use arbitrary::{Arbitrary, Unstructured};
use wasmsand_server::fuzzing::{self, Caps};

const CAPS: Caps = Caps {
    max_bytes: 256 << 10,
    max_files: 64,
    max_depth: 6,
    max_ratio: 50,
};

#[derive(Debug, Arbitrary)]
struct Member {
    name: String,
    kind: u8,
    link: String,
    mode: u16,
    data: Vec<u8>,
    /// A size larger than the data (a bomb's claim), for tar only.
    claimed: Option<u32>,
}

#[derive(Debug, Arbitrary)]
enum Body {
    Raw {
        content_type: u8,
        bytes: Vec<u8>,
    },
    Tar {
        gzip: bool,
        members: Vec<Member>,
    },
    Zip {
        deflate: bool,
        members: Vec<Member>,
    },
    Multipart {
        boundary: u8,
        parts: Vec<(String, Option<String>, Vec<u8>)>,
    },
}

#[derive(Debug, Arbitrary)]
struct Input {
    excludes: Vec<String>,
    default_excludes: bool,
    body: Body,
}

const CONTENT_TYPES: &[&str] = &[
    "application/x-tar",
    "application/gzip",
    "application/zip",
    "multipart/form-data; boundary=X",
    "application/tar+gzip",
    "application/x-gtar",
    "text/plain",
    "multipart/form-data",
];

fn tar_of(members: &[Member], gzip: bool) -> Vec<u8> {
    let mut b = tar::Builder::new(Vec::new());
    for m in members.iter().take(80) {
        let mut h = tar::Header::new_gnu();
        // Raw name fields: `set_path` would refuse the very names worth trying.
        let name = m.name.as_bytes();
        let old = h.as_old_mut();
        let n = name.len().min(old.name.len());
        old.name[..n].copy_from_slice(&name[..n]);
        let link = m.link.as_bytes();
        let n = link.len().min(old.linkname.len());
        old.linkname[..n].copy_from_slice(&link[..n]);
        h.set_entry_type(match m.kind % 8 {
            0 | 1 => tar::EntryType::Regular,
            2 => tar::EntryType::Directory,
            3 => tar::EntryType::Symlink,
            4 => tar::EntryType::Link,
            5 => tar::EntryType::Char,
            6 => tar::EntryType::Fifo,
            _ => tar::EntryType::new(m.kind),
        });
        h.set_mode(u32::from(m.mode));
        h.set_size(m.claimed.map_or(m.data.len() as u64, u64::from));
        h.set_cksum();
        // A claimed size past the data makes the archive end early, as a truncated upload.
        let _ = b.append(&h, m.data.as_slice());
    }
    let tar = b.into_inner().unwrap_or_default();
    if !gzip {
        return tar;
    }
    let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
    let _ = gz.write_all(&tar);
    gz.finish().unwrap_or_default()
}

fn zip_of(members: &[Member], deflate: bool) -> Vec<u8> {
    let mut z = zip::ZipWriter::new(std::io::Cursor::new(Vec::new()));
    let method = if deflate {
        zip::CompressionMethod::Deflated
    } else {
        zip::CompressionMethod::Stored
    };
    for m in members.iter().take(80) {
        let opts = zip::write::SimpleFileOptions::default()
            .compression_method(method)
            .unix_permissions(u32::from(m.mode));
        let _ = match m.kind % 4 {
            0 | 1 => z
                .start_file(m.name.as_str(), opts)
                .and_then(|()| z.write_all(&m.data).map_err(Into::into)),
            2 => z.add_directory(m.name.as_str(), opts),
            _ => z.add_symlink(m.name.as_str(), m.link.as_str(), opts),
        };
    }
    z.finish().map(|c| c.into_inner()).unwrap_or_default()
}

fn multipart_of(boundary: u8, parts: &[(String, Option<String>, Vec<u8>)]) -> (String, Vec<u8>) {
    let b = format!("b{boundary:02x}zz");
    let mut body = Vec::new();
    for (name, filename, data) in parts.iter().take(80) {
        body.extend_from_slice(
            format!("--{b}\r\nContent-Disposition: form-data; name=\"{name}\"").as_bytes(),
        );
        if let Some(f) = filename {
            body.extend_from_slice(format!("; filename=\"{f}\"").as_bytes());
        }
        body.extend_from_slice(b"\r\n\r\n");
        body.extend_from_slice(data);
        body.extend_from_slice(b"\r\n");
    }
    body.extend_from_slice(format!("--{b}--\r\n").as_bytes());
    (format!("multipart/form-data; boundary={b}"), body)
}

/// A staged path as the workspace may take it: relative, no empty, `.` or `..` component, no
/// NUL, no backslash turned separator, within the depth cap.
fn check_path(p: &str) {
    assert!(!p.is_empty(), "an empty path was staged");
    assert!(!p.starts_with('/'), "an absolute path was staged: {p:?}");
    assert!(!p.contains('\0'), "a path with NUL was staged: {p:?}");
    let parts: Vec<&str> = p.split('/').collect();
    for c in &parts {
        assert!(
            !c.is_empty() && *c != "." && *c != "..",
            "a path that is not normalized (or climbs) was staged: {p:?}"
        );
    }
    assert!(
        parts.len() <= CAPS.max_depth,
        "a path deeper than {} was staged: {p:?}",
        CAPS.max_depth
    );
}

/// The target.
pub fn run(data: &[u8]) {
    let Ok(input) = Input::arbitrary_take_rest(Unstructured::new(data)) else {
        return;
    };
    let (content_type, body) = match &input.body {
        Body::Raw {
            content_type,
            bytes,
        } => (
            CONTENT_TYPES[*content_type as usize % CONTENT_TYPES.len()].to_string(),
            bytes.clone(),
        ),
        Body::Tar { gzip, members } => (
            if *gzip {
                "application/gzip"
            } else {
                "application/x-tar"
            }
            .to_string(),
            tar_of(members, *gzip),
        ),
        Body::Zip { deflate, members } => {
            ("application/zip".to_string(), zip_of(members, *deflate))
        }
        Body::Multipart { boundary, parts } => multipart_of(*boundary, parts),
    };
    let excludes: Vec<String> = input.excludes.iter().take(8).cloned().collect();
    match fuzzing::upload(&content_type, &excludes, input.default_excludes, body, CAPS) {
        Ok(staged) => {
            assert!(
                staged.files.len() as u64 <= CAPS.max_files,
                "{} files staged over a cap of {}",
                staged.files.len(),
                CAPS.max_files
            );
            let sum: u64 = staged.files.iter().map(|(_, d)| d.len() as u64).sum();
            assert!(sum <= CAPS.max_bytes, "{sum} bytes staged over the cap");
            assert!(
                sum <= staged.bytes,
                "{sum} bytes staged, {} counted",
                staged.bytes
            );
            for d in &staged.dirs {
                check_path(d);
            }
            // A later member of the same path replaces an earlier one when written, as
            // extracting the archive would: duplicates are not a staging error.
            for (p, _) in &staged.files {
                check_path(p);
            }
        }
        Err(r) => {
            assert!(
                (400..500).contains(&r.status),
                "an upload refused with {}: {r:?}",
                r.status
            );
            assert!(!r.message.is_empty(), "a refusal without a message: {r:?}");
        }
    }
}
