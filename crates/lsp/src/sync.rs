//! Workspace sync (seed 003, section 10): which files of the editor's workspace a run needs,
//! and which of those changed since the last upload to the same session. The rules are
//! `.gitignore`-style (the workspace's `.gitignore`s, `.git/info/exclude`, and a
//! `.sandboxignore` beside them), then a denylist of VCS and build directories, binary
//! extensions, files that look binary, and files over a size cap; `include` globs lift the
//! denylist (never the ignore files) for what a user really wants uploaded.

use std::collections::{BTreeMap, BTreeSet};
use std::io::Read;
use std::path::{Component, Path, PathBuf};

use globset::{Glob, GlobSet, GlobSetBuilder};
use sha2::{Digest, Sha256};

/// Directories never uploaded: version control, dependency and build caches.
pub const DENY_DIRS: &[&str] = &[
    ".git",
    ".hg",
    ".svn",
    "node_modules",
    "__pycache__",
    ".venv",
    "venv",
    ".mypy_cache",
    ".pytest_cache",
    ".tox",
    "target",
    ".gradle",
    ".idea",
    ".vscode-test",
];

/// Extensions of binary or generated files never uploaded unless an `include` glob names them.
pub const DENY_EXTENSIONS: &[&str] = &[
    "png", "jpg", "jpeg", "gif", "bmp", "ico", "webp", "tiff", "psd", "pdf", "zip", "tar", "gz",
    "tgz", "bz2", "xz", "zst", "7z", "rar", "jar", "war", "ear", "class", "o", "a", "so", "dylib",
    "dll", "exe", "bin", "wasm", "pyc", "pyo", "whl", "egg", "mp3", "mp4", "mov", "avi", "mkv",
    "wav", "flac", "ogg", "woff", "woff2", "ttf", "otf", "eot", "sqlite", "db", "iso", "dmg",
    "vsix", "node",
];

/// The rules one scan applies.
#[derive(Clone, Debug)]
pub struct Rules {
    /// Files larger than this are left out (and named in the report).
    pub max_file_bytes: u64,
    /// Globs (workspace-relative, `**` allowed) that lift the denylist.
    pub include: Vec<String>,
    /// Extra globs to leave out, beside the ignore files.
    pub exclude: Vec<String>,
}

impl Default for Rules {
    fn default() -> Self {
        Rules {
            max_file_bytes: 1024 * 1024,
            include: Vec::new(),
            exclude: Vec::new(),
        }
    }
}

/// Why a scan failed.
#[derive(Debug, thiserror::Error)]
pub enum SyncError {
    /// An `include`/`exclude` pattern that is not a glob.
    #[error("invalid glob {pattern:?}: {message}")]
    Glob {
        /// The pattern as given.
        pattern: String,
        /// The parser's complaint.
        message: String,
    },
    /// A requested file that is not a workspace-relative path inside the root.
    #[error("{0:?} is not a relative path inside the workspace")]
    OutsideWorkspace(String),
    /// A requested file that is missing or unreadable.
    #[error("{path}: {source}")]
    Read {
        /// The workspace-relative path.
        path: String,
        /// What the file system said.
        source: std::io::Error,
    },
    /// More to upload than the server accepts in one archive.
    #[error(
        "the workspace has {bytes} bytes to upload, over the server's upload cap of {cap} bytes; \
         leave files out with .gitignore or .sandboxignore, or pass `files`"
    )]
    TooLarge {
        /// Bytes of the changed files.
        bytes: u64,
        /// The cap.
        cap: u64,
    },
}

/// A file a scan kept.
#[derive(Clone, Debug)]
pub struct Entry {
    /// Workspace-relative, `/`-separated.
    pub rel: String,
    /// Where it is on disk.
    pub abs: PathBuf,
    /// SHA-256 of its content.
    pub digest: [u8; 32],
    /// Its size when scanned.
    pub size: u64,
    /// Whether any execute bit is set.
    pub executable: bool,
}

/// What a scan found: the files to consider and what the rules left out.
#[derive(Debug, Default)]
pub struct Scan {
    /// Kept files, by relative path.
    pub files: BTreeMap<String, Entry>,
    /// Left out by the denylist, the size cap or binary content, with the reason.
    pub skipped: Vec<(String, &'static str)>,
}

impl Rules {
    /// Whether every `include` and `exclude` pattern is a glob (checked when the workspace's
    /// defaults change, not at the next run).
    pub fn check(&self) -> Result<(), SyncError> {
        globs(&self.include)?;
        globs(&self.exclude)?;
        Ok(())
    }
}

fn globs(patterns: &[String]) -> Result<GlobSet, SyncError> {
    let mut b = GlobSetBuilder::new();
    for p in patterns {
        let g = Glob::new(p).map_err(|e| SyncError::Glob {
            pattern: p.clone(),
            message: e.kind().to_string(),
        })?;
        b.add(g);
    }
    b.build().map_err(|e| SyncError::Glob {
        pattern: patterns.join(","),
        message: e.to_string(),
    })
}

/// A workspace-relative path, checked: no `..`, no root, no prefix.
pub fn relative(path: &str) -> Result<String, SyncError> {
    let p = Path::new(path);
    let mut parts = Vec::new();
    for c in p.components() {
        match c {
            Component::Normal(s) => parts.push(s.to_string_lossy().into_owned()),
            Component::CurDir => {}
            _ => return Err(SyncError::OutsideWorkspace(path.to_string())),
        }
    }
    if parts.is_empty() {
        return Err(SyncError::OutsideWorkspace(path.to_string()));
    }
    Ok(parts.join("/"))
}

/// Scans `root` (all of it, or only `only`: workspace-relative files or directories).
pub fn scan(root: &Path, rules: &Rules, only: Option<&[String]>) -> Result<Scan, SyncError> {
    let include = globs(&rules.include)?;
    let exclude = globs(&rules.exclude)?;
    let mut out = Scan::default();
    let starts: Vec<PathBuf> = match only {
        None => vec![root.to_path_buf()],
        Some(list) => {
            let mut v = Vec::new();
            let canonical_root = root.canonicalize().unwrap_or_else(|_| root.to_path_buf());
            for p in list {
                let rel = relative(p)?;
                let abs = root.join(&rel);
                let meta = std::fs::symlink_metadata(&abs).map_err(|source| SyncError::Read {
                    path: rel.clone(),
                    source,
                })?;
                // A link, or a path through one, could lead out of the workspace: never sent.
                let inside = abs
                    .canonicalize()
                    .is_ok_and(|c| c.starts_with(&canonical_root));
                if meta.file_type().is_symlink() || !inside {
                    out.skipped.push((rel, "symbolic link"));
                    continue;
                }
                v.push(abs);
            }
            v
        }
    };
    for start in starts {
        let mut walk = ignore::WalkBuilder::new(&start);
        walk.hidden(false)
            .git_ignore(true)
            .git_exclude(true)
            .git_global(false)
            .require_git(false)
            .parents(true)
            .follow_links(false)
            .add_custom_ignore_filename(".sandboxignore");
        // Denied directories are pruned whole, unless an include glob names them.
        let include_patterns = rules.include.clone();
        walk.filter_entry(move |e| {
            let is_dir = e.file_type().is_some_and(|t| t.is_dir());
            let name = e.file_name().to_string_lossy();
            !(is_dir
                && DENY_DIRS.contains(&name.as_ref())
                && !include_patterns.iter().any(|p| p.contains(name.as_ref())))
        });
        for item in walk.build() {
            let Ok(e) = item else { continue };
            if !e.file_type().is_some_and(|t| t.is_file()) {
                continue;
            }
            let Ok(rel) = e.path().strip_prefix(root) else {
                continue;
            };
            let rel = rel
                .components()
                .map(|c| c.as_os_str().to_string_lossy())
                .collect::<Vec<_>>()
                .join("/");
            if exclude.is_match(&rel) {
                continue;
            }
            let included = include.is_match(&rel);
            if !included {
                if rel.split('/').any(|part| DENY_DIRS.contains(&part)) {
                    out.skipped.push((rel, "denied directory"));
                    continue;
                }
                let ext = rel
                    .rsplit_once('.')
                    .map(|(_, x)| x.to_ascii_lowercase())
                    .unwrap_or_default();
                if DENY_EXTENSIONS.contains(&ext.as_str()) {
                    out.skipped.push((rel, "binary extension"));
                    continue;
                }
            }
            let Ok(meta) = e.metadata() else { continue };
            if !included && meta.len() > rules.max_file_bytes {
                out.skipped.push((rel, "over the size cap"));
                continue;
            }
            // Streamed: a scan holds no file's content, only its digest.
            let (digest, binary) = match digest_of(e.path()) {
                Ok(d) => d,
                Err(source) => return Err(SyncError::Read { path: rel, source }),
            };
            if !included && binary {
                out.skipped.push((rel, "binary content"));
                continue;
            }
            out.files.insert(
                rel.clone(),
                Entry {
                    rel,
                    abs: e.path().to_path_buf(),
                    digest,
                    size: meta.len(),
                    executable: executable(&meta),
                },
            );
        }
    }
    Ok(out)
}

/// SHA-256 of a file, and whether its first 8 KB hold a NUL byte (what looks binary).
fn digest_of(path: &Path) -> std::io::Result<([u8; 32], bool)> {
    let mut f = std::fs::File::open(path)?;
    let mut hasher = Sha256::new();
    let mut buf = vec![0u8; 64 * 1024];
    let mut first = true;
    let mut binary = false;
    loop {
        let n = f.read(&mut buf)?;
        if n == 0 {
            break;
        }
        if first {
            binary = buf[..n.min(8192)].contains(&0);
            first = false;
        }
        hasher.update(&buf[..n]);
    }
    Ok((hasher.finalize().into(), binary))
}

#[cfg(unix)]
fn executable(meta: &std::fs::Metadata) -> bool {
    use std::os::unix::fs::PermissionsExt;
    meta.permissions().mode() & 0o111 != 0
}

#[cfg(not(unix))]
fn executable(_: &std::fs::Metadata) -> bool {
    false
}

/// What one session holds of the workspace: each uploaded path's digest.
#[derive(Clone, Debug, Default)]
pub struct Mirror {
    sent: BTreeMap<String, [u8; 32]>,
}

/// The difference between a scan and what the session holds.
#[derive(Debug, Default)]
pub struct Plan {
    /// New or changed files.
    pub upload: Vec<Entry>,
    /// Files the session holds that the workspace no longer has (only for a whole-workspace
    /// scan: a scan of some files says nothing of the others).
    pub remove: Vec<String>,
    /// Bytes of `upload`.
    pub bytes: u64,
}

impl Mirror {
    /// What to send so the session matches `scan`.
    pub fn plan(&self, scan: &Scan, whole: bool) -> Plan {
        let mut plan = Plan::default();
        for (rel, e) in &scan.files {
            if self.sent.get(rel) != Some(&e.digest) {
                plan.bytes += e.size;
                plan.upload.push(e.clone());
            }
        }
        if whole {
            let kept: BTreeSet<&String> = scan.files.keys().collect();
            plan.remove = self
                .sent
                .keys()
                .filter(|k| !kept.contains(k))
                .cloned()
                .collect();
        }
        plan
    }

    /// Records a plan as done.
    pub fn applied(&mut self, plan: &Plan) {
        for e in &plan.upload {
            self.sent.insert(e.rel.clone(), e.digest);
        }
        for r in &plan.remove {
            self.sent.remove(r);
        }
    }

    /// How many files the session holds.
    pub fn len(&self) -> usize {
        self.sent.len()
    }

    /// Whether nothing was uploaded yet.
    pub fn is_empty(&self) -> bool {
        self.sent.is_empty()
    }
}

/// The tar (ustar, relative paths, modes kept) of the files to upload.
pub fn tar(entries: &[Entry]) -> std::io::Result<Vec<u8>> {
    let mut b = tar::Builder::new(Vec::new());
    for e in entries {
        let mut h = tar::Header::new_gnu();
        // Read now, not at scan time: a file that changed since is sent as it is now (and
        // again by the next run, whose scan finds a digest other than the one recorded).
        let data = std::fs::read(&e.abs)?;
        h.set_size(data.len() as u64);
        h.set_mode(if e.executable { 0o755 } else { 0o644 });
        h.set_entry_type(tar::EntryType::Regular);
        h.set_mtime(0);
        b.append_data(&mut h, &e.rel, data.as_slice())?;
    }
    b.into_inner()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn write(root: &Path, rel: &str, data: &[u8]) {
        let p = root.join(rel);
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(p, data).unwrap();
    }

    #[test]
    fn ignore_files_denylist_and_caps_decide_what_is_sent() {
        let d = tempfile::tempdir().unwrap();
        let r = d.path();
        write(r, "app/main.py", b"print(1)\n");
        write(r, ".gitignore", b"build/\n*.log\n");
        write(r, "build/out.txt", b"x");
        write(r, "run.log", b"x");
        write(r, ".sandboxignore", b"secret.txt\n");
        write(r, "secret.txt", b"x");
        write(r, "node_modules/x/index.js", b"x");
        write(r, ".git/HEAD", b"ref");
        write(r, "logo.png", b"png");
        write(r, "data.txt", b"a\0b");
        write(r, "big.txt", &vec![b'a'; 2048]);
        write(r, "fixtures/keep.png", b"png");
        let rules = Rules {
            max_file_bytes: 1024,
            include: vec!["fixtures/**".into()],
            exclude: vec![],
        };
        let s = scan(r, &rules, None).unwrap();
        let kept: Vec<&str> = s.files.keys().map(String::as_str).collect();
        assert_eq!(
            kept,
            vec![
                ".gitignore",
                ".sandboxignore",
                "app/main.py",
                "fixtures/keep.png"
            ]
        );
        let why: BTreeMap<&str, &str> = s.skipped.iter().map(|(p, w)| (p.as_str(), *w)).collect();
        assert_eq!(why["logo.png"], "binary extension");
        assert_eq!(why["data.txt"], "binary content");
        assert_eq!(why["big.txt"], "over the size cap");
    }

    #[test]
    fn only_changed_files_are_planned_and_deletions_follow_a_whole_scan() {
        let d = tempfile::tempdir().unwrap();
        let r = d.path();
        write(r, "a.py", b"1");
        write(r, "b.py", b"2");
        let rules = Rules::default();
        let mut m = Mirror::default();
        let p = m.plan(&scan(r, &rules, None).unwrap(), true);
        assert_eq!(p.upload.len(), 2);
        m.applied(&p);
        assert!(
            m.plan(&scan(r, &rules, None).unwrap(), true)
                .upload
                .is_empty()
        );
        write(r, "a.py", b"changed");
        std::fs::remove_file(r.join("b.py")).unwrap();
        let p = m.plan(&scan(r, &rules, None).unwrap(), true);
        assert_eq!(
            p.upload.iter().map(|e| e.rel.as_str()).collect::<Vec<_>>(),
            ["a.py"]
        );
        assert_eq!(p.remove, ["b.py"]);
        // A scan of some files never removes the others.
        let p = m.plan(&scan(r, &rules, Some(&["a.py".into()])).unwrap(), false);
        assert!(p.remove.is_empty());
    }

    #[cfg(unix)]
    #[test]
    fn symlinks_are_not_followed_out_of_the_workspace() {
        let outside = tempfile::tempdir().unwrap();
        write(outside.path(), "secret.txt", b"host secret");
        write(outside.path(), "dir/key.txt", b"host key");
        let d = tempfile::tempdir().unwrap();
        write(d.path(), "ok.txt", b"fine");
        std::os::unix::fs::symlink(outside.path().join("secret.txt"), d.path().join("link.txt"))
            .unwrap();
        std::os::unix::fs::symlink(outside.path().join("dir"), d.path().join("linkdir")).unwrap();
        let s = scan(d.path(), &Rules::default(), None).unwrap();
        assert_eq!(s.files.keys().collect::<Vec<_>>(), ["ok.txt"]);
        for through in ["linkdir", "linkdir/key.txt", "link.txt"] {
            let s = scan(d.path(), &Rules::default(), Some(&[through.into()])).unwrap();
            assert!(s.files.is_empty(), "{through}");
            assert_eq!(s.skipped[0].1, "symbolic link");
        }
    }

    #[test]
    fn requested_paths_stay_inside_the_workspace() {
        let d = tempfile::tempdir().unwrap();
        for bad in ["../x", "/etc/passwd", "", "a/../../b"] {
            assert!(
                scan(d.path(), &Rules::default(), Some(&[bad.into()])).is_err(),
                "{bad}"
            );
        }
        assert!(matches!(
            scan(d.path(), &Rules::default(), Some(&["missing.py".into()])),
            Err(SyncError::Read { .. })
        ));
    }

    #[test]
    fn the_archive_keeps_relative_paths_and_execute_bits() {
        let d = tempfile::tempdir().unwrap();
        let e = |rel: &str, x| {
            let abs = d.path().join(rel.replace('/', "_"));
            std::fs::write(&abs, b"hi").unwrap();
            Entry {
                rel: rel.into(),
                abs,
                digest: [0; 32],
                size: 2,
                executable: x,
            }
        };
        let bytes = tar(&[e("a/run.sh", true), e("b.txt", false)]).unwrap();
        let mut a = tar::Archive::new(bytes.as_slice());
        let got: Vec<(String, u32)> = a
            .entries()
            .unwrap()
            .map(|e| {
                let e = e.unwrap();
                (
                    e.path().unwrap().to_string_lossy().into_owned(),
                    e.header().mode().unwrap(),
                )
            })
            .collect();
        assert_eq!(
            got,
            vec![("a/run.sh".into(), 0o755), ("b.txt".into(), 0o644)]
        );
    }
}
