//! `unzip [-l] [-p] [-q] [-o|-n] [-j] [-d DIR] ARCHIVE [MEMBER...] [-x EXCLUDE...]`, with
//! Info-ZIP's messages and exit statuses (1 warning, 9 no archive, 11 no member matched,
//! 50 disk full).

use std::fs;
use std::io::{BufRead, Read, Write};
use std::path::{Component, Path, PathBuf};

use zip::ZipArchive;

use crate::{errno_text, out, wildmatch};

const HELP: &str = "\
Usage: unzip [-Z] [-opts[modifiers]] file[.zip] [list] [-x xlist] [-d exdir]
  Default action is to extract files in list, except those in xlist, to exdir;
  file[.zip] may be a wildcard.
  -p  extract files to pipe, no messages     -l  list files (short format)
  -d  extract files into exdir               -x  exclude files that follow
modifiers:
  -n  never overwrite existing files         -q  quiet mode
  -o  overwrite files WITHOUT prompting      -j  junk paths (do not make directories)
Names that would leave exdir (\"../\", absolute) are extracted without those parts.
";

#[derive(PartialEq, Clone, Copy)]
enum Overwrite {
    Ask,
    Always,
    Never,
}

pub fn main(args: &[String]) -> i32 {
    let mut list = false;
    let mut pipe = false;
    let mut quiet = 0;
    let mut overwrite = Overwrite::Ask;
    let mut junk = false;
    let mut exdir: Option<String> = None;
    let mut archive: Option<String> = None;
    let mut members: Vec<String> = Vec::new();
    let mut excludes: Vec<String> = Vec::new();
    let mut in_excludes = false;
    let mut it = args.iter();
    while let Some(a) = it.next() {
        if a == "--help" || a == "-h" {
            out(HELP.as_bytes());
            return 0;
        }
        if a.starts_with('-') && a.len() > 1 {
            in_excludes = false;
            let body: Vec<char> = a[1..].chars().collect();
            let mut k = 0;
            while k < body.len() {
                match body[k] {
                    'l' => list = true,
                    'p' => pipe = true,
                    'q' => quiet += 1,
                    'o' => overwrite = Overwrite::Always,
                    'n' => overwrite = Overwrite::Never,
                    'j' => junk = true,
                    'x' => in_excludes = true,
                    'd' => {
                        let rest: String = body[k + 1..].iter().collect();
                        exdir = if rest.is_empty() {
                            it.next().cloned()
                        } else {
                            Some(rest)
                        };
                        if exdir.is_none() {
                            eprintln!(
                                "error:  must specify directory to which to extract with -d option"
                            );
                            return 10;
                        }
                        break;
                    }
                    'a' | 'b' | 'C' | 'L' | 'U' | 'X' | 'K' | 'D' | 'u' | 'f' => {}
                    c => {
                        eprintln!("unzip:  invalid option -{c}\n{HELP}");
                        return 10;
                    }
                }
                k += 1;
            }
            continue;
        }
        if archive.is_none() {
            archive = Some(a.clone());
        } else if in_excludes {
            excludes.push(a.clone());
        } else {
            members.push(a.clone());
        }
    }
    let Some(archive) = archive else {
        out(HELP.as_bytes());
        return 0;
    };
    let (path, bytes) = match open(&archive) {
        Some(found) => found,
        None => {
            eprintln!("unzip:  cannot find or open {archive}, {archive}.zip or {archive}.ZIP.");
            return 9;
        }
    };
    // Info-ZIP names the archive first: `Archive:` on standard output, or `[name]` before
    // a message when piping (-p) or quiet.
    let announce = !pipe && quiet == 0;
    let mut named = false;
    let name_it = |named: &mut bool| {
        if announce {
            out(format!("Archive:  {path}\n").as_bytes());
        } else {
            eprintln!("[{path}]");
        }
        *named = true;
    };
    let mut status = 0;
    match crate::eocd::survey(&bytes) {
        crate::eocd::Survey::NotFound => {
            name_it(&mut named);
            eprintln!("{}", crate::eocd::NOT_FOUND);
            if !pipe {
                eprintln!(
                    "unzip:  cannot find zipfile directory in one of {archive} or\n        {archive}.zip, and cannot find {archive}.ZIP, period."
                );
            }
            return 9;
        }
        crate::eocd::Survey::Empty { extra } => {
            if announce {
                name_it(&mut named);
            }
            if extra > 0 {
                eprintln!("{}", crate::eocd::extra_warning(&path, extra));
            }
            eprintln!("warning [{path}]:  zipfile is empty");
            return 1;
        }
        crate::eocd::Survey::Members { extra } => {
            if announce {
                name_it(&mut named);
            }
            if extra > 0 {
                eprintln!("{}", crate::eocd::extra_warning(&path, extra));
                status = 1;
            }
        }
    }
    let mut z = match ZipArchive::new(std::io::Cursor::new(bytes)) {
        Ok(z) => z,
        Err(e) => {
            if !named {
                name_it(&mut named);
            }
            eprintln!("error [{path}]:  the central directory cannot be read ({e})");
            return 3;
        }
    };
    let selected = |name: &str| {
        (members.is_empty() || members.iter().any(|m| wildmatch(m, name)))
            && !excludes.iter().any(|x| wildmatch(x, name))
    };
    let mut matched = vec![false; members.len()];
    for i in 0..z.len() {
        if let Some(Ok(n)) = z.name_for_index(i) {
            for (k, m) in members.iter().enumerate() {
                if wildmatch(m, &n) {
                    matched[k] = true;
                }
            }
        }
    }
    let unmatched: Vec<&String> = members
        .iter()
        .zip(&matched)
        .filter(|(_, m)| !**m)
        .map(|(n, _)| n)
        .collect();
    let report_unmatched = |status: &mut i32| {
        for m in &unmatched {
            eprintln!("caution: filename not matched:  {m}");
        }
        if !unmatched.is_empty() {
            *status = 11;
        }
    };

    if list {
        let mut s = String::from(
            "  Length      Date    Time    Name\n---------  ---------- -----   ----\n",
        );
        let (mut total, mut count) = (0u64, 0usize);
        for i in 0..z.len() {
            let Ok(f) = z.by_index_raw(i) else { continue };
            let name = f.name().map(|n| n.into_owned()).unwrap_or_default();
            if !selected(&name) {
                continue;
            }
            let secs = entry_mtime(&f).unwrap_or(DOS_EPOCH);
            let (y, mo, d) = guest_rt::civil_from_days(secs.div_euclid(86_400));
            let rem = secs.rem_euclid(86_400);
            s.push_str(&format!(
                "{:>9}  {y:04}-{mo:02}-{d:02} {:02}:{:02}   {name}\n",
                f.size(),
                rem / 3600,
                rem % 3600 / 60,
            ));
            total += f.size();
            count += 1;
        }
        s.push_str(&format!(
            "---------                     -------\n{total:>9}                     {count} file{}\n",
            if count == 1 { "" } else { "s" }
        ));
        if quiet > 1 {
            // -q drops the archive line (above); -qq the headers and totals too.
            let lines: Vec<&str> = s.lines().collect();
            s = lines[2..lines.len() - 2]
                .iter()
                .map(|l| format!("{l}\n"))
                .collect();
        }
        out(s.as_bytes());
        report_unmatched(&mut status);
        return status;
    }

    let base = PathBuf::from(exdir.as_deref().unwrap_or(""));
    let shown = |p: &Path| p.to_string_lossy().into_owned();
    let stdin = std::io::stdin();
    let mut answers = stdin.lock();
    for i in 0..z.len() {
        let mut f = match z.by_index(i) {
            Ok(f) => f,
            Err(e) => {
                eprintln!("error:  invalid entry {i}: {e}");
                status = status.max(2);
                continue;
            }
        };
        let name = f.name().map(|n| n.into_owned()).unwrap_or_default();
        if !selected(&name) {
            continue;
        }
        if pipe {
            if !f.is_dir() {
                let mut data = Vec::new();
                if let Err(e) = f.read_to_end(&mut data) {
                    eprintln!("error:  {name}: {e}");
                    status = status.max(2);
                    continue;
                }
                out(&data);
            }
            continue;
        }
        let (rel, skipped) = safe_relative(&name);
        if skipped {
            // Info-ZIP prints this warning on stdout, among the entries.
            out(format!("warning:  skipped \"../\" path component(s) in {name}\n").as_bytes());
            status = status.max(1);
        }
        let rel = if junk {
            match rel.file_name() {
                Some(n) if !f.is_dir() => PathBuf::from(n),
                _ => continue,
            }
        } else {
            rel
        };
        if rel.as_os_str().is_empty() {
            continue;
        }
        let target = base.join(&rel);
        if f.is_dir() {
            if quiet == 0 && !target.is_dir() {
                out(format!("   creating: {}/\n", shown(&target).trim_end_matches('/')).as_bytes());
            }
            if let Err(e) = fs::create_dir_all(&target) {
                eprintln!(
                    "checkdir error:  cannot create {}\n                 {}",
                    shown(&target),
                    errno_text(&e)
                );
                status = status.max(if is_full(&e) { 50 } else { 1 });
                if status == 50 {
                    return status;
                }
            }
            continue;
        }
        if let Some(parent) = target.parent().filter(|p| !p.as_os_str().is_empty())
            && let Err(e) = fs::create_dir_all(parent)
        {
            eprintln!(
                "checkdir error:  cannot create {}\n                 {}",
                shown(parent),
                errno_text(&e)
            );
            if is_full(&e) {
                return 50;
            }
            status = status.max(1);
            continue;
        }
        if fs::symlink_metadata(&target).is_ok() {
            match overwrite {
                Overwrite::Always => {}
                Overwrite::Never => continue,
                Overwrite::Ask => {
                    eprint!(
                        "replace {}? [y]es, [n]o, [A]ll, [N]one, [r]ename: ",
                        shown(&target)
                    );
                    let mut line = String::new();
                    match answers.read_line(&mut line) {
                        Ok(n) if n > 0 => match line.trim() {
                            "y" | "yes" => {}
                            "A" => overwrite = Overwrite::Always,
                            "N" => {
                                overwrite = Overwrite::Never;
                                continue;
                            }
                            _ => continue,
                        },
                        _ => {
                            eprintln!(" NULL\n(EOF or read error, treating as \"[N]one\" ...)");
                            overwrite = Overwrite::Never;
                            status = status.max(1);
                            continue;
                        }
                    }
                }
            }
        }
        let verb = if f.compression() == zip::CompressionMethod::Stored {
            " extracting"
        } else {
            "  inflating"
        };
        if quiet == 0 {
            out(format!("{verb}: {:<22}  \n", shown(&target)).as_bytes());
        }
        match extract(&mut f, &target) {
            Ok(()) => {}
            Err(e) if is_full(&e) => {
                let _ = fs::remove_file(&target);
                eprintln!(
                    "{}:  write error (disk full?).  Continue? (y/n/^C) \nerror: {}: {}",
                    shown(&target),
                    name,
                    errno_text(&e)
                );
                return 50;
            }
            Err(e) => {
                let _ = fs::remove_file(&target);
                eprintln!(
                    "error:  cannot create {}\n        {}",
                    shown(&target),
                    errno_text(&e)
                );
                status = status.max(1);
            }
        }
    }
    report_unmatched(&mut status);
    status
}

/// ARCHIVE, or ARCHIVE.zip / ARCHIVE.ZIP as unzip tries them.
fn open(archive: &str) -> Option<(String, Vec<u8>)> {
    for candidate in [
        archive.to_string(),
        format!("{archive}.zip"),
        format!("{archive}.ZIP"),
    ] {
        if let Ok(bytes) = fs::read(&candidate) {
            return Some((candidate, bytes));
        }
    }
    None
}

/// The entry's name below the destination: `..`, root and prefix components dropped
/// (true when any was).
fn safe_relative(name: &str) -> (PathBuf, bool) {
    let mut out = PathBuf::new();
    let mut skipped = false;
    for c in Path::new(name).components() {
        match c {
            Component::Normal(part) => out.push(part),
            Component::CurDir => {}
            Component::ParentDir | Component::RootDir | Component::Prefix(_) => skipped = true,
        }
    }
    (out, skipped && name.contains(".."))
}

fn is_full(e: &std::io::Error) -> bool {
    matches!(
        e.kind(),
        std::io::ErrorKind::StorageFull | std::io::ErrorKind::QuotaExceeded
    ) || e.raw_os_error().is_some_and(|c| c == 51 || c == 19)
}

/// Streams the entry into `target` (never all in memory: a bomb stops at the first refused
/// write) and sets its mode and time.
fn extract(
    f: &mut zip::read::ZipFile<'_, std::io::Cursor<Vec<u8>>>,
    target: &Path,
) -> std::io::Result<()> {
    let mut file = fs::File::create(target)?;
    let mut buf = vec![0u8; 64 * 1024];
    loop {
        let n = f.read(&mut buf)?;
        if n == 0 {
            break;
        }
        file.write_all(&buf[..n])?;
    }
    file.flush()?;
    if let Some(secs) = entry_mtime(f).filter(|s| *s >= 0) {
        let _ =
            file.set_modified(std::time::UNIX_EPOCH + std::time::Duration::from_secs(secs as u64));
    }
    Ok(())
}

/// 1980-01-01, the earliest DOS time: what an entry without a valid time shows.
const DOS_EPOCH: i64 = 315_532_800;

/// An entry's modification time in seconds since the epoch. Info-ZIP's zip stores it twice: the
/// DOS field (local time, 2-second steps, odd seconds rounded *up*) and the extended-timestamp
/// field (exact Unix time), and its unzip prefers the latter; so must we, or a file written at
/// hh:mm:59 lists and extracts a minute late.
fn entry_mtime<R: Read>(f: &zip::read::ZipFile<'_, R>) -> Option<i64> {
    let exact = f.extra_data_fields().find_map(|field| match field {
        zip::extra_fields::ExtraField::ExtendedTimestamp(t) => t.mod_time(),
        _ => None,
    });
    if let Some(t) = exact {
        return Some(i64::from(t));
    }
    let t = f.last_modified()?;
    let days = guest_rt::days_from_civil(
        i64::from(t.year()),
        u32::from(t.month()),
        u32::from(t.day()),
    );
    Some(
        days * 86_400
            + i64::from(t.hour()) * 3600
            + i64::from(t.minute()) * 60
            + i64::from(t.second()),
    )
}
