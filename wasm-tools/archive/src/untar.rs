//! Extracting members the way GNU tar does, where the tar crate's `unpack` does not: symlinks
//! (its WASI build cannot make them), hard links, directories whose modes forbid writing into
//! them, members that replace what is there, `-k`/`--skip-old-files`/`--overwrite`, and member
//! names with `..`.
//!
//! Safety is GNU tar's: a symlink member whose target is absolute or climbs with `..` is first
//! extracted as an empty placeholder file and becomes the link only at the end ("delayed
//! links"), so no later member of the same archive can be written through a link the archive
//! made to somewhere else (`link -> /etc`, then `link/passwd`); a
//! member replaces what is at its path (a symlink there is removed, not followed); and a name
//! containing `..` is refused. Directory modes are set at the end, deepest first, so a
//! directory that is not writable still receives its members.

use std::collections::HashSet;
use std::fs::{self, OpenOptions};
use std::io::{self, Read};
use std::path::{Component, Path, PathBuf};

use crate::errno_text;

/// The umask GNU tar applies to modes for a user other than root (the sandbox's user).
const UMASK: u32 = 0o022;

/// What to do with a member whose path already exists.
#[derive(Clone, Copy, PartialEq, Eq, Default)]
pub(crate) enum Existing {
    /// Remove it and extract (GNU's default).
    #[default]
    Replace,
    /// Write into an existing regular file without unlinking it (`--overwrite`): a hard link
    /// to it sees the new content.
    Overwrite,
    /// Leave it and report an error (`-k`).
    Keep,
    /// Leave it silently (`--skip-old-files`).
    Skip,
}

pub(crate) struct Extractor {
    dest: PathBuf,
    strip: usize,
    existing: Existing,
    /// Placeholders of symlinks not made yet, with their targets, in archive order.
    delayed: Vec<(PathBuf, PathBuf)>,
    pending: HashSet<PathBuf>,
    /// Hard links to a delayed symlink: (the link's target, the link), made after the symlinks.
    late_links: Vec<(PathBuf, PathBuf)>,
    /// Directories to give their modes and times at the end.
    dirs: Vec<(PathBuf, u32, u64)>,
    /// Prefixes already reported as removed.
    reported: HashSet<String>,
    pub(crate) code: i32,
}

/// A member's name as extracted: what is left after the leading `/` and `--strip-components`,
/// or why it is not extracted.
enum Name {
    Path(PathBuf),
    /// Nothing left after stripping: silently skipped.
    Empty,
    /// Contains `..`: refused.
    Dots,
}

impl Extractor {
    pub(crate) fn new(dest: PathBuf, strip: usize, existing: Existing) -> Self {
        Extractor {
            dest,
            strip,
            existing,
            delayed: Vec::new(),
            pending: HashSet::new(),
            late_links: Vec::new(),
            dirs: Vec::new(),
            reported: HashSet::new(),
            code: 0,
        }
    }

    fn fail(&mut self, what: impl std::fmt::Display) {
        eprintln!("tar: {what}");
        self.code = 2;
    }

    /// The path under the destination a member name maps to. `what` says which names these
    /// are in the message GNU prints ("member names", "hard link targets").
    fn name(&mut self, raw: &Path, what: &str) -> Name {
        let text = raw.to_string_lossy();
        let parts: Vec<&str> = text.split('/').collect();
        if let Some(last_dots) = parts.iter().rposition(|p| *p == "..") {
            let prefix = format!("{}/", parts[..=last_dots].join("/"));
            self.report_prefix(&prefix, what);
            return Name::Dots;
        }
        if text.starts_with('/') {
            self.report_prefix("/", what);
        }
        let kept: PathBuf = raw
            .components()
            .filter(|c| matches!(c, Component::Normal(_)))
            .skip(self.strip)
            .collect();
        if kept.as_os_str().is_empty() {
            Name::Empty
        } else {
            Name::Path(kept)
        }
    }

    fn report_prefix(&mut self, prefix: &str, what: &str) {
        if self.reported.insert(format!("{what}\0{prefix}")) {
            eprintln!("tar: Removing leading `{prefix}' from {what}");
        }
    }

    /// Extracts one member; `shown` is its name as the messages give it.
    pub(crate) fn extract<R: Read>(&mut self, entry: &mut tar::Entry<'_, R>, shown: &str) {
        let raw = match entry.path() {
            Ok(p) => p.into_owned(),
            Err(e) => return self.fail(format!("{shown}: {}", errno_text(&e))),
        };
        let rel = match self.name(&raw, "member names") {
            Name::Path(p) => p,
            Name::Empty => return,
            Name::Dots => return self.fail(format!("{shown}: Member name contains '..'")),
        };
        let path = self.dest.join(&rel);
        if let Err(e) = self.parents(&rel) {
            return self.fail(format!("{shown}: Cannot open: {}", errno_text(&e)));
        }
        let header = entry.header();
        let kind = header.entry_type();
        let mode = header.mode().unwrap_or(0o644) & 0o7777;
        let mtime = header.mtime().unwrap_or(0);
        if kind.is_dir() {
            return self.directory(&path, shown, mode, mtime);
        }
        if kind == tar::EntryType::Link && self.already_linked(entry, &path) {
            return;
        }
        // Every other kind takes the path over from what is there.
        match self.clear(&path, shown, kind.is_file()) {
            Ok(true) => {}
            Ok(false) => return,
            Err(e) => return self.fail(format!("{shown}: Cannot open: {}", errno_text(&e))),
        }
        self.pending.remove(&path);
        let result = match kind {
            tar::EntryType::Regular | tar::EntryType::Continuous | tar::EntryType::GNUSparse => {
                self.file(entry, &path, mode, mtime)
            }
            tar::EntryType::Symlink => {
                let target = match entry.link_name() {
                    Ok(Some(t)) => t.into_owned(),
                    _ => return self.fail(format!("{shown}: symlink without a target")),
                };
                if !could_escape(&target) {
                    return match guest_rt::symlink(&target.to_string_lossy(), &path) {
                        Ok(()) => {}
                        Err(e) => self.fail(format!(
                            "{shown}: Cannot create symlink to '{}': {}",
                            target.display(),
                            errno_text(&e)
                        )),
                    };
                }
                // The placeholder: an empty file no one can write through.
                let made = OpenOptions::new().write(true).create_new(true).open(&path);
                made.map(|_| {
                    let _ = guest_rt::set_mode(&path, 0);
                    self.pending.insert(path.clone());
                    self.delayed.push((path.clone(), target));
                })
            }
            tar::EntryType::Link => return self.hard_link(entry, &path, shown),
            _ => {
                return self.fail(format!("{shown}: Cannot mknod: Operation not permitted"));
            }
        };
        if let Err(e) = result {
            self.fail(format!("{shown}: Cannot open: {}", errno_text(&e)));
        }
    }

    /// Makes the member's missing parent directories; a non-directory on the way is ENOTDIR
    /// (a delayed symlink's placeholder among them, which is the point of it).
    fn parents(&self, rel: &Path) -> io::Result<()> {
        let Some(parent) = rel.parent() else {
            return Ok(());
        };
        let mut at = self.dest.clone();
        for c in parent.components() {
            at.push(c);
            match fs::metadata(&at) {
                Ok(m) if m.is_dir() => continue,
                Ok(_) => return Err(not_a_directory()),
                Err(e) if e.kind() == io::ErrorKind::NotFound => {
                    if fs::symlink_metadata(&at).is_ok() {
                        // A dangling symlink: the directory would be made at its target.
                        return Err(not_a_directory());
                    }
                    fs::create_dir(&at)?;
                }
                Err(e) => return Err(e),
            }
        }
        Ok(())
    }

    /// Makes room at `path` for a member; `Ok(false)` when the member is to be left out.
    fn clear(&mut self, path: &Path, shown: &str, regular: bool) -> io::Result<bool> {
        let Ok(meta) = fs::symlink_metadata(path) else {
            return Ok(true);
        };
        let placeholder = self.pending.contains(path);
        match self.existing {
            Existing::Keep => {
                self.fail(format!("{shown}: Cannot open: File exists"));
                return Ok(false);
            }
            Existing::Skip => return Ok(false),
            Existing::Overwrite if regular && meta.is_file() && !placeholder => {
                // Written in place by `file`.
                return Ok(true);
            }
            _ => {}
        }
        if meta.is_dir() {
            fs::remove_dir(path)?;
        } else {
            fs::remove_file(path)?;
        }
        Ok(true)
    }

    fn directory(&mut self, path: &Path, shown: &str, mode: u32, mtime: u64) {
        match fs::symlink_metadata(path) {
            Ok(m) if m.is_dir() => {}
            Ok(_) => {
                if let Err(e) = fs::remove_file(path).and_then(|()| fs::create_dir(path)) {
                    return self.fail(format!("{shown}: Cannot mkdir: {}", errno_text(&e)));
                }
                self.pending.remove(path);
            }
            Err(_) => {
                if let Err(e) = fs::create_dir(path) {
                    return self.fail(format!("{shown}: Cannot mkdir: {}", errno_text(&e)));
                }
            }
        }
        // Writable and searchable until the end, whatever the member's mode says.
        let _ = guest_rt::set_mode(path, (mode & 0o777 & !UMASK) | 0o700);
        self.dirs
            .push((path.to_path_buf(), mode & 0o7777 & !UMASK, mtime));
    }

    fn file<R: Read>(
        &mut self,
        entry: &mut tar::Entry<'_, R>,
        path: &Path,
        mode: u32,
        mtime: u64,
    ) -> io::Result<()> {
        let mut out = match fs::symlink_metadata(path) {
            // Left in place by `clear` for `--overwrite`.
            Ok(_) => OpenOptions::new().write(true).truncate(true).open(path)?,
            Err(_) => OpenOptions::new().write(true).create_new(true).open(path)?,
        };
        io::copy(entry, &mut out)?;
        drop(out);
        let _ = guest_rt::set_mode(path, mode & 0o7777 & !UMASK);
        let at = std::time::UNIX_EPOCH + std::time::Duration::from_secs(mtime);
        let _ = guest_rt::set_times(path, at, at);
        Ok(())
    }

    /// A hard link member whose path already names its target (the same file archived twice
    /// is stored as a link to itself): there is nothing to do, and removing the path first
    /// would lose the file.
    fn already_linked<R: Read>(&mut self, entry: &tar::Entry<'_, R>, path: &Path) -> bool {
        let Ok(Some(raw)) = entry.link_name() else {
            return false;
        };
        let Name::Path(rel) = self.name(&raw, "hard link targets") else {
            return false;
        };
        let target = self.dest.join(rel);
        if target == path {
            return true;
        }
        let id = |p: &Path| fs::symlink_metadata(p).ok().and_then(|m| identity(&m, p));
        matches!((id(&target), id(path)), (Some(a), Some(b)) if a == b)
    }

    fn hard_link<R: Read>(&mut self, entry: &tar::Entry<'_, R>, path: &Path, shown: &str) {
        let raw = match entry.link_name() {
            Ok(Some(t)) => t.into_owned(),
            _ => return self.fail(format!("{shown}: hard link without a target")),
        };
        let target = match self.name(&raw, "hard link targets") {
            Name::Path(p) => self.dest.join(p),
            _ => {
                return self.fail(format!(
                    "{shown}: Cannot hard link to '{}': Invalid argument",
                    raw.display()
                ));
            }
        };
        if self.pending.contains(&target) {
            self.late_links.push((target, path.to_path_buf()));
            return;
        }
        if let Err(e) = fs::hard_link(&target, path) {
            self.fail(format!(
                "{shown}: Cannot hard link to '{}': {}",
                raw.display(),
                errno_text(&e)
            ));
        }
    }

    /// Makes the delayed symlinks and the links to them, then sets the directories' modes and
    /// times; returns the exit status so far.
    pub(crate) fn finish(mut self) -> i32 {
        let delayed = std::mem::take(&mut self.delayed);
        let mut made: HashSet<PathBuf> = HashSet::new();
        for (path, target) in delayed {
            if !self.pending.contains(&path) {
                continue;
            }
            let result = fs::remove_file(&path)
                .and_then(|()| guest_rt::symlink(&target.to_string_lossy(), &path));
            match result {
                Ok(()) => {
                    made.insert(path);
                }
                Err(e) => self.fail(format!(
                    "{}: Cannot create symlink to '{}': {}",
                    path.display(),
                    target.display(),
                    errno_text(&e)
                )),
            }
        }
        for (target, link) in std::mem::take(&mut self.late_links) {
            let result = if made.contains(&target) {
                fs::hard_link(&target, &link)
            } else {
                Err(io::Error::from(io::ErrorKind::NotFound))
            };
            if let Err(e) = result {
                self.fail(format!(
                    "{}: Cannot hard link to '{}': {}",
                    link.display(),
                    target.display(),
                    errno_text(&e)
                ));
            }
        }
        for (dir, mode, mtime) in std::mem::take(&mut self.dirs).into_iter().rev() {
            let _ = guest_rt::set_mode(&dir, mode);
            let at = std::time::UNIX_EPOCH + std::time::Duration::from_secs(mtime);
            let _ = guest_rt::set_times(&dir, at, at);
        }
        self.code
    }
}

/// Whether a member name is refused for its `..`.
pub(crate) fn refused(name: &Path) -> bool {
    name.components().any(|c| c == Component::ParentDir)
}

/// Whether a symlink's target can lead outside the extraction (absolute, or with `..`): only
/// those are delayed, as GNU tar delays them; others are made at once.
fn could_escape(target: &Path) -> bool {
    target.is_absolute() || target.components().any(|c| c == Component::ParentDir)
}

fn not_a_directory() -> io::Error {
    io::Error::new(io::ErrorKind::NotADirectory, "Not a directory")
}

/// A file's identity for spotting members already archived (GNU tar stores a second name of
/// one file, or the same file named twice, as a hard link to the first).
pub(crate) fn identity(meta: &fs::Metadata, path: &Path) -> Option<(u64, u64)> {
    if meta.is_dir() {
        return None;
    }
    guest_rt::file_id(path, false)
}
