//! `zip [-r] [-q] [-j] [-0..-9] ARCHIVE FILE...`: adds files (and with `-r` directories'
//! contents) to ARCHIVE, replacing entries of the same name, as Info-ZIP's zip does.

use std::collections::BTreeMap;
use std::fs;
use std::io::{Cursor, Read, Write};
use std::path::Path;

use zip::write::FullFileOptions;
use zip::{CompressionMethod, ZipArchive, ZipWriter};

use crate::{dos_time, errno_text, out};

const HELP: &str = "\
Usage: zip [-options] zipfile list
  The default action is to add or replace zipfile entries from list.
  -r   recurse into directories      -j   junk (don't record) directory names
  -q   quiet operation               -0   store only
  -1   compress faster               -9   compress better
  -D   do not add directory entries  -m   move into zipfile (delete OS files)
  -x   exclude the names that follow (wildcards)
  A list of \"-\" reads one entry's data from standard input.
";

struct Entry {
    data: Vec<u8>,
    dir: bool,
    mtime: i64,
    mode: Option<u32>,
}

pub fn main(args: &[String]) -> i32 {
    let mut recurse = false;
    let mut quiet = false;
    let mut junk = false;
    let mut no_dirs = false;
    let mut move_files = false;
    let mut level: i64 = 6;
    let mut excludes: Vec<String> = Vec::new();
    let mut pos: Vec<String> = Vec::new();
    let mut in_excludes = false;
    for a in args {
        if a == "--help" || a == "-h" {
            out(HELP.as_bytes());
            return 0;
        }
        if a == "-x" {
            in_excludes = true;
            continue;
        }
        if a.starts_with('-') && a.len() > 1 && !a.starts_with("--") {
            in_excludes = false;
            for c in a[1..].chars() {
                match c {
                    'r' | 'R' => recurse = true,
                    'q' => quiet = true,
                    'j' => junk = true,
                    'D' => no_dirs = true,
                    'm' => move_files = true,
                    'y' | 'X' | 'v' | 'o' => {}
                    '0'..='9' => level = i64::from(c as u8 - b'0'),
                    _ => {
                        out(format!(
                            "\nzip error: Invalid command arguments (no such option: {c})\n"
                        )
                        .as_bytes());
                        return 16;
                    }
                }
            }
            continue;
        }
        if in_excludes {
            excludes.push(a.clone());
        } else {
            pos.push(a.clone());
        }
    }
    let Some((archive, names)) = pos.split_first() else {
        out(HELP.as_bytes());
        return 0;
    };
    let mut archive = archive.clone();
    if !Path::new(&archive)
        .file_name()
        .is_some_and(|n| n.to_string_lossy().contains('.'))
    {
        archive.push_str(".zip");
    }

    // Gather the entries to add, in the order given (directories walked in name order).
    let mut adds: Vec<(String, Entry, Option<String>)> = Vec::new();
    let mut warned = false;
    for name in names {
        if name == "-" {
            let mut data = Vec::new();
            if let Err(e) = std::io::stdin().lock().read_to_end(&mut data) {
                eprintln!("zip error: cannot read standard input: {}", errno_text(&e));
                return 18;
            }
            adds.push((
                "-".into(),
                Entry {
                    data,
                    dir: false,
                    mtime: now(),
                    mode: None,
                },
                None,
            ));
            continue;
        }
        if let Err(e) = collect(name, recurse, junk, no_dirs, &excludes, &archive, &mut adds) {
            if e.kind() == std::io::ErrorKind::NotFound {
                eprintln!("\tzip warning: name not matched: {name}");
                warned = true;
            } else {
                eprintln!("zip I/O error: {name}: {}", errno_text(&e));
                return 18;
            }
        }
    }
    if adds.is_empty() {
        out(format!("\nzip error: Nothing to do! ({archive})\n").as_bytes());
        return 12;
    }

    // An existing archive keeps its other entries, in their order.
    let mut kept: Vec<String> = Vec::new();
    let mut old: Option<ZipArchive<Cursor<Vec<u8>>>> = None;
    match fs::read(&archive) {
        Ok(bytes) => match ZipArchive::new(Cursor::new(bytes)) {
            Ok(z) => {
                // The central directory's order, which the rewritten archive keeps.
                kept = (0..z.len())
                    .filter_map(|i| {
                        z.name_for_index(i)
                            .and_then(Result::ok)
                            .map(|n| n.into_owned())
                    })
                    .collect();
                old = Some(z);
            }
            Err(e) => {
                out(
                    format!("\nzip error: Zip file structure invalid ({archive}): {e}\n")
                        .as_bytes(),
                );
                return 3;
            }
        },
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
        Err(e) => {
            eprintln!("zip error: cannot read {archive}: {}", errno_text(&e));
            return 18;
        }
    }
    let new_names: BTreeMap<&str, ()> = adds.iter().map(|(n, _, _)| (n.as_str(), ())).collect();

    let mut w = ZipWriter::new(Cursor::new(Vec::new()));
    let mut lines = String::new();
    if let Some(z) = old.as_mut() {
        for name in &kept {
            if new_names.contains_key(name.as_str()) {
                continue;
            }
            let file = match z.by_name(name) {
                Ok(f) => f,
                Err(e) => {
                    out(
                        format!("\nzip error: Zip file structure invalid ({archive}): {e}\n")
                            .as_bytes(),
                    );
                    return 3;
                }
            };
            if let Err(e) = w.raw_copy_file(file) {
                eprintln!("zip I/O error: {e}");
                return 18;
            }
        }
    }
    for (name, e, _) in &adds {
        let verb = if kept.iter().any(|k| k == name) {
            "updating"
        } else {
            "  adding"
        };
        let mut opts = FullFileOptions::default().last_modified_time(dos_time(e.mtime));
        // Info-ZIP's extended timestamp (0x5455: flags = mtime present, then the exact Unix
        // time), which its unzip and ours read in preference to the rounded DOS field.
        if let Ok(secs) = u32::try_from(e.mtime) {
            let mut ut = vec![1u8];
            ut.extend_from_slice(&secs.to_le_bytes());
            let _ = opts.add_extra_field(0x5455, ut, false);
        }
        if let Some(mode) = e.mode {
            opts = opts.unix_permissions(mode);
        }
        if e.dir {
            if let Err(err) = w.add_directory(name.trim_end_matches('/'), opts) {
                eprintln!("zip I/O error: {err}");
                return 18;
            }
            lines.push_str(&format!("{verb}: {name} (stored 0%)\n"));
            continue;
        }
        // Info-ZIP stores what deflate would not shrink.
        let deflated = (level > 0).then(|| deflate(&e.data, level)).flatten();
        let (method, csize) = match deflated {
            Some(n) if n < e.data.len() => (CompressionMethod::Deflated, n),
            _ => (CompressionMethod::Stored, e.data.len()),
        };
        let mut o = opts
            .compression_method(method)
            .large_file(e.data.len() >= u32::MAX as usize);
        if method == CompressionMethod::Deflated {
            o = o.compression_level(Some(level));
        }
        if let Err(err) = w
            .start_file(name.as_str(), o)
            .map_err(std::io::Error::other)
            .and_then(|()| w.write_all(&e.data))
        {
            eprintln!("zip I/O error: {err}");
            return 18;
        }
        let pct = if e.data.is_empty() || method == CompressionMethod::Stored {
            0
        } else {
            100 - (csize * 100).div_ceil(e.data.len())
        };
        let how = if method == CompressionMethod::Stored {
            "stored"
        } else {
            "deflated"
        };
        lines.push_str(&format!("{verb}: {name} ({how} {pct}%)\n"));
    }
    let bytes = match w.finish() {
        Ok(c) => c.into_inner(),
        Err(e) => {
            eprintln!("zip I/O error: {e}");
            return 18;
        }
    };
    if let Err(e) = fs::write(&archive, bytes) {
        eprintln!("zip I/O error: {archive}: {}", errno_text(&e));
        let _ = fs::remove_file(&archive);
        return 18;
    }
    if !quiet {
        out(lines.as_bytes());
    }
    if move_files {
        // Files first, then directories deepest first, as they are emptied.
        for (_, e, src) in adds.iter().rev() {
            if let Some(src) = src {
                let _ = if e.dir {
                    fs::remove_dir(src)
                } else {
                    fs::remove_file(src)
                };
            }
        }
    }
    // Names that matched nothing were warned about; the rest was archived: success.
    let _ = warned;
    0
}

fn now() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs() as i64)
        .unwrap_or(0)
}

fn deflate(data: &[u8], level: i64) -> Option<usize> {
    let mut enc =
        flate2::write::DeflateEncoder::new(Vec::new(), flate2::Compression::new(level as u32));
    enc.write_all(data).ok()?;
    enc.finish().ok().map(|v| v.len())
}

/// `path` (a file, or a directory and with `recurse` what it holds) as archive entries.
fn collect(
    path: &str,
    recurse: bool,
    junk: bool,
    no_dirs: bool,
    excludes: &[String],
    archive: &str,
    adds: &mut Vec<(String, Entry, Option<String>)>,
) -> std::io::Result<()> {
    let meta = fs::metadata(path)?;
    let mut name = path
        .trim_start_matches("./")
        .trim_start_matches('/')
        .to_string();
    while name.starts_with("../") {
        name = name[3..].to_string();
    }
    if junk {
        name = Path::new(&name)
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or(name);
    }
    let mtime = meta
        .modified()
        .ok()
        .and_then(|t| t.duration_since(std::time::UNIX_EPOCH).ok())
        .map(|d| d.as_secs() as i64)
        .unwrap_or_else(now);
    let mode = guest_rt::path_mode(Path::new(path), true);
    if excludes
        .iter()
        .any(|x| crate::wildmatch(x, &name) || crate::wildmatch(x, path))
    {
        return Ok(());
    }
    if meta.is_dir() {
        let dir_name = format!("{}/", name.trim_end_matches('/'));
        if !no_dirs && !junk && dir_name != "/" {
            push(
                adds,
                dir_name,
                Entry {
                    data: Vec::new(),
                    dir: true,
                    mtime,
                    mode: mode.map(|m| m | 0o40000),
                },
                path,
            );
        }
        if recurse {
            let mut children: Vec<String> = fs::read_dir(path)?
                .filter_map(Result::ok)
                .map(|e| e.file_name().to_string_lossy().into_owned())
                .collect();
            children.sort();
            for c in children {
                let child = format!("{}/{c}", path.trim_end_matches('/'));
                collect(&child, recurse, junk, no_dirs, excludes, archive, adds)?;
            }
        }
        return Ok(());
    }
    // The archive being written is never added to itself.
    if Path::new(path).canonicalize().ok() == Path::new(archive).canonicalize().ok() {
        return Ok(());
    }
    let data = fs::read(path)?;
    push(
        adds,
        name,
        Entry {
            data,
            dir: false,
            mtime,
            mode: mode.map(|m| m | 0o100000),
        },
        path,
    );
    Ok(())
}

fn push(adds: &mut Vec<(String, Entry, Option<String>)>, name: String, e: Entry, src: &str) {
    if let Some(slot) = adds.iter_mut().find(|(n, _, _)| *n == name) {
        slot.1 = e;
        return;
    }
    adds.push((name, e, Some(src.to_string())));
}
