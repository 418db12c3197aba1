//! `unzip [-l|-t|-z] [-p] [-q] [-o|-n] [-j] [-d DIR] ARCHIVE [MEMBER...] [-x EXCLUDE...]`,
//! with Info-ZIP's messages and exit statuses (1 warning, 2 error, 3 severe error, 9 no
//! archive, 11 no member matched, 50 disk full, 51 unexpected end of file).

use std::fs;
use std::io::{BufRead, Read, Write};
use std::path::{Component, Path, PathBuf};

use zip::ZipArchive;

use crate::central::{self, Channel, Checked};
use crate::{errno_text, out, wildmatch};

const HELP: &str = "\
Usage: unzip [-Z] [-opts[modifiers]] file[.zip] [list] [-x xlist] [-d exdir]
  Default action is to extract files in list, except those in xlist, to exdir;
  file[.zip] may be a wildcard.
  -p  extract files to pipe, no messages     -l  list files (short format)
  -t  test compressed archive data           -z  display archive comment only
  -d  extract files into exdir               -x  exclude files that follow
modifiers:
  -n  never overwrite existing files         -q  quiet mode
  -o  overwrite files WITHOUT prompting      -j  junk paths (do not make directories)
Names that would leave exdir (\"../\", absolute) are extracted without those parts.
";

const LIST_HEADER: &str =
    "  Length      Date    Time    Name\n---------  ---------- -----   ----\n";

#[derive(PartialEq, Clone, Copy)]
enum Overwrite {
    Ask,
    Always,
    Never,
}

pub fn main(args: &[String]) -> i32 {
    let mut list = false;
    let mut test = false;
    let mut comment_only = false;
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
                    't' => test = true,
                    'z' => comment_only = true,
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
    let name_it = || {
        if announce {
            out(format!("Archive:  {path}\n").as_bytes());
        } else {
            eprintln!("[{path}]");
        }
    };
    let to = if test {
        Channel::Stdout
    } else {
        Channel::Stderr
    };
    let Some(rec) = crate::eocd::find(&bytes) else {
        name_it();
        eprintln!("{}", crate::eocd::NOT_FOUND);
        if !pipe {
            eprintln!(
                "unzip:  cannot find zipfile directory in one of {archive} or\n        {archive}.zip, and cannot find {archive}.ZIP, period."
            );
        }
        return 9;
    };
    if announce || (comment_only && quiet == 0) {
        name_it();
    }
    if comment_only || announce {
        let extracting = !list && !test && !comment_only;
        if !central::show_comment(&rec.comment, extracting) {
            return 0;
        }
    }
    if comment_only {
        return 0;
    }
    let (mut status, cd_start, archive_start) = match central::check_record(&path, &bytes, &rec, to)
    {
        Checked::Go {
            status,
            cd_start,
            archive_start,
        } => (status, cd_start, archive_start),
        Checked::Stop(code) => return code,
    };
    if rec.is_empty() {
        to.say(format!("warning [{path}]:  zipfile is empty\n").as_bytes());
        return status.max(1);
    }
    // unzip reads the whole directory before the first member: its warnings and the damage
    // that ends it come first, then what was sound is extracted (or listed: there the rows
    // come first).
    // A Zip64 archive keeps its counts elsewhere: the zip crate reads it unwalked.
    let (bytes, warnings, fatal) = if rec.zip64 {
        (bytes, Vec::new(), None)
    } else {
        let walk = central::walk(&bytes, cd_start, rec.entries);
        if !list {
            to.say(&walk.warnings);
            if let Some(f) = &walk.fatal {
                to.say(&f.message);
            }
        }
        let odd = status > 0 || rec.this_disk != 0 || rec.cd_disk != 0;
        let bytes = if odd || walk.fatal.is_some() {
            central::repaired(&bytes, cd_start, archive_start, &walk)
        } else {
            bytes
        };
        (bytes, walk.warnings, walk.fatal)
    };
    if let Some(f) = &fatal {
        status = status.max(f.code);
    }
    let mut z = match ZipArchive::new(std::io::Cursor::new(bytes)) {
        Ok(z) => z,
        Err(e) => {
            to.say(
                format!("error [{path}]:  the central directory cannot be read ({e})\n").as_bytes(),
            );
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

    // What unzip says of a member it cannot open: a local header that is not where the
    // directory says names the offset in the file, and when bytes stand before the archive
    // unzip tries once more without them (status 3 when that fails too).
    let missing = (-archive_start).max(0) as u64;
    // Members it cannot decode are skipped with the reason: status 81 for a method it lacks,
    // 5 for a password it cannot ask for (there is no terminal).
    let unreadable = |z: &ZipArchive<_>, i: usize, name: &str, e: &zip::result::ZipError| {
        use zip::result::ZipError as E;
        let skip = |why: String, code| (format!("   skipping: {name:<22}  {why}\n"), code);
        match e {
            E::CompressionMethodNotSupported(m) => {
                return skip(format!("unsupported compression method {m}"), 81);
            }
            E::InvalidPassword => return skip("unable to get password".into(), 5),
            E::UnsupportedArchive(why) if *why == E::PASSWORD_REQUIRED => {
                return skip("unable to get password".into(), 5);
            }
            E::UnsupportedArchive(why) => return skip(why.to_lowercase(), 81),
            E::InvalidArchive(_) => {}
            other => return (format!("error:  {name}: {other}\n"), 2),
        }
        let at = z.metadata().entry(i).map(|e| e.header_start()).unwrap_or(0);
        let line = format!(
            "file #{}:  bad zipfile offset (local header sig):  {}\n",
            i + 1,
            at.saturating_sub(missing)
        );
        if archive_start > 0 {
            (format!("{line}  (attempting to re-compensate)\n{line}"), 3)
        } else {
            (line, 2)
        }
    };

    if list {
        if fatal.is_none() {
            to.say(&warnings);
        }
        let mut s = String::from(LIST_HEADER);
        let (mut total, mut count) = (0u64, 0usize);
        for i in 0..z.len() {
            // A listing needs only the directory: a member whose local header is damaged is
            // listed from its central one (with the DOS time).
            let raw = z.by_index_raw(i).map(|f| {
                let name = f.name().map(|n| n.into_owned()).unwrap_or_default();
                (name, f.size(), entry_mtime(&f))
            });
            let (name, size, secs) = match raw {
                Ok(found) => found,
                Err(_) => {
                    let meta = z.metadata();
                    let Ok(e) = meta.entry(i) else { continue };
                    let name = e.name().map(|n| n.into_owned()).unwrap_or_default();
                    (name, e.size(), dos_seconds(e.last_modified()))
                }
            };
            if !selected(&name) {
                continue;
            }
            let secs = secs.unwrap_or(DOS_EPOCH);
            let (y, mo, d) = guest_rt::civil_from_days(secs.div_euclid(86_400));
            let rem = secs.rem_euclid(86_400);
            s.push_str(&format!(
                "{:>9}  {y:04}-{mo:02}-{d:02} {:02}:{:02}   {name}\n",
                size,
                rem / 3600,
                rem % 3600 / 60,
            ));
            total += size;
            count += 1;
        }
        if let Some(f) = &fatal {
            if quiet > 1 {
                s.drain(..LIST_HEADER.len());
            }
            out(s.as_bytes());
            to.say(&warnings);
            if f.when_listing {
                to.say(&f.message);
            }
            return status;
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

    if test {
        let mut bad = fatal.is_some();
        let (mut tested, mut skipped) = (0, 0);
        for i in 0..z.len() {
            let name = match z.name_for_index(i) {
                Some(Ok(n)) => n.to_string(),
                _ => format!("#{}", i + 1),
            };
            if !selected(&name) {
                continue;
            }
            if let Some(m) = unsupported_method(&mut z, i) {
                if quiet == 0 {
                    out(
                        format!("   skipping: {name:<22}  unsupported compression method {m}\n")
                            .as_bytes(),
                    );
                }
                status = status.max(81);
                skipped += 1;
                continue;
            }
            let problem = match z.by_index(i).map(|mut f| test_member(&mut f)) {
                Ok(problem) => problem,
                Err(e) => {
                    let (message, code) = unreadable(&z, i, &name, &e);
                    out(message.as_bytes());
                    status = status.max(code);
                    if code == 81 {
                        skipped += 1;
                    } else {
                        bad = true;
                    }
                    continue;
                }
            };
            tested += 1;
            match problem {
                None if quiet == 0 => out(format!("    testing: {name:<22}   OK\n").as_bytes()),
                None => {}
                Some(p) => {
                    bad = true;
                    // unzip -tq keeps only the failures, without the verb and one space less.
                    let (lead, gap) = if quiet == 0 {
                        ("    testing: ", "  ")
                    } else {
                        ("", " ")
                    };
                    out(format!("{lead}{name:<22} {gap}{p}\n").as_bytes());
                }
            }
        }
        report_unmatched(&mut status);
        if quiet < 2 {
            let mut verdict = if bad || !unmatched.is_empty() {
                format!("At least one error was detected in {path}.\n")
            } else if tested == 0 && skipped > 0 {
                format!("Caution:  zero files tested in {path}.\n")
            } else if skipped > 0 {
                format!(
                    "No errors detected in {path} for the {tested} file{} tested.\n",
                    if tested == 1 { "" } else { "s" }
                )
            } else {
                format!("No errors detected in compressed data of {path}.\n")
            };
            if skipped > 0 {
                verdict.push_str(&format!(
                    "{skipped} file{} skipped because of unsupported compression or encoding.\n",
                    if skipped == 1 { "" } else { "s" }
                ));
            }
            out(verdict.as_bytes());
        }
        return if bad { status.max(2) } else { status };
    }

    let base = PathBuf::from(exdir.as_deref().unwrap_or(""));
    let shown = |p: &Path| p.to_string_lossy().into_owned();
    let stdin = std::io::stdin();
    let mut answers = stdin.lock();
    for i in 0..z.len() {
        let name = match z.name_for_index(i) {
            Some(Ok(n)) if selected(&n) => n.into_owned(),
            _ => continue,
        };
        if let Some(m) = unsupported_method(&mut z, i) {
            if quiet == 0 && !pipe {
                let _ = std::io::stdout().flush();
                eprintln!("   skipping: {name:<22}  unsupported compression method {m}");
            }
            status = status.max(81);
            continue;
        }
        if let Err(e) = z.by_index(i).map(drop) {
            let (message, code) = unreadable(&z, i, &name, &e);
            let _ = std::io::stdout().flush();
            eprint!("{message}");
            status = status.max(code);
            continue;
        }
        let Ok(mut f) = z.by_index(i) else { continue };
        if pipe {
            if !f.is_dir() {
                let mut stdout = std::io::stdout().lock();
                match copy_checked(&mut f, &mut stdout) {
                    Ok(None) => {}
                    Ok(Some(bad_crc)) => {
                        drop(stdout);
                        eprintln!("{name:<22}  {bad_crc}");
                        status = status.max(2);
                    }
                    Err(Failed::Read) => {
                        drop(stdout);
                        eprintln!("  error:  invalid compressed data to inflate");
                        status = status.max(2);
                    }
                    // A closed pipe ends the program quietly, as SIGPIPE would.
                    Err(Failed::Write(e)) if e.kind() == std::io::ErrorKind::BrokenPipe => {
                        return status;
                    }
                    Err(Failed::Write(e)) => {
                        drop(stdout);
                        eprintln!("write error: {}", errno_text(&e));
                        return status.max(1);
                    }
                }
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
            out(format!("{verb}: {:<22} ", shown(&target)).as_bytes());
        }
        let end_line = || {
            if quiet == 0 {
                out(b" \n");
            }
        };
        match extract(&mut f, &target) {
            Ok(None) => end_line(),
            Ok(Some(bad_crc)) => {
                // unzip keeps the file and says so on the member's line.
                if quiet == 0 {
                    out(format!("  {bad_crc}\n").as_bytes());
                } else {
                    out(format!("{:<22}  {bad_crc}\n", shown(&target)).as_bytes());
                }
                status = status.max(2);
            }
            Err(Failed::Read) => {
                end_line();
                eprintln!("  error:  invalid compressed data to inflate");
                status = status.max(2);
            }
            Err(Failed::Write(e)) if is_full(&e) => {
                end_line();
                let _ = fs::remove_file(&target);
                eprintln!(
                    "{}:  write error (disk full?).  Continue? (y/n/^C) \nerror: {}: {}",
                    shown(&target),
                    name,
                    errno_text(&e)
                );
                return 50;
            }
            Err(Failed::Write(e)) => {
                end_line();
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

/// The method number of member `i` when this build cannot inflate it (only stored and
/// deflated members can be).
fn unsupported_method<R: Read + std::io::Seek>(z: &mut ZipArchive<R>, i: usize) -> Option<u16> {
    #[allow(deprecated)]
    match z.by_index_raw(i).ok()?.compression() {
        zip::CompressionMethod::Unsupported(m) => Some(m),
        _ => None,
    }
}

/// Why a member could not be copied out.
enum Failed {
    /// Its data does not inflate.
    Read,
    /// Its file cannot be created or written.
    Write(std::io::Error),
}

/// Copies a member into `sink` while summing its CRC: `Some` with unzip's words when the sum
/// differs from the one recorded. The zip crate fails the last read of such a member; all of
/// its data has been delivered then.
fn copy_checked<R: Read>(
    f: &mut zip::read::ZipFile<'_, R>,
    sink: &mut impl Write,
) -> Result<Option<String>, Failed> {
    let expected = f.crc32();
    let size = f.size();
    let mut crc = flate2::Crc::new();
    let mut buf = vec![0u8; 64 * 1024];
    loop {
        match f.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => {
                crc.update(&buf[..n]);
                sink.write_all(&buf[..n]).map_err(Failed::Write)?;
            }
            Err(_) if u64::from(crc.amount()) == size & 0xFFFF_FFFF && crc.sum() != expected => {
                break;
            }
            Err(_) => return Err(Failed::Read),
        }
    }
    Ok((crc.sum() != expected)
        .then(|| format!("bad CRC {:08x}  (should be {expected:08x})", crc.sum())))
}

/// Reads a member through as `unzip -t` does: None when it is intact, else what unzip says.
fn test_member<R: Read>(f: &mut zip::read::ZipFile<'_, R>) -> Option<String> {
    match copy_checked(f, &mut std::io::sink()) {
        Ok(verdict) => verdict,
        Err(_) => Some("error:  invalid compressed data to inflate".to_string()),
    }
}

/// Streams the entry into `target` (never all in memory: a bomb stops at the first refused
/// write) and sets its mode and time. `Some` names a CRC mismatch; the file stays.
fn extract(
    f: &mut zip::read::ZipFile<'_, std::io::Cursor<Vec<u8>>>,
    target: &Path,
) -> Result<Option<String>, Failed> {
    let mut file = fs::File::create(target).map_err(Failed::Write)?;
    let verdict = copy_checked(f, &mut file)?;
    file.flush().map_err(Failed::Write)?;
    if let Some(secs) = entry_mtime(f).filter(|s| *s >= 0) {
        let _ =
            file.set_modified(std::time::UNIX_EPOCH + std::time::Duration::from_secs(secs as u64));
    }
    Ok(verdict)
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
    dos_seconds(f.last_modified())
}

/// A DOS date and time (local time; the sandbox runs in UTC) in seconds since the epoch.
fn dos_seconds(t: Option<zip::DateTime>) -> Option<i64> {
    let t = t?;
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
