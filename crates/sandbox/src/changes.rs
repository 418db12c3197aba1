//! Host folders in, changes out: [`Sandbox::mount_host`] puts a host directory under the
//! sandbox's copy-on-write layer, and [`Sandbox::changes`] says what the sandbox changed
//! there (or since a snapshot, or since a fork's parent) as a list of paths and as a patch in
//! `git diff` format that `git apply` takes; [`Sandbox::export_changes`] writes them to a host
//! directory the caller names.

use std::fmt::Write as _;
use std::io::Write as _;
use std::path::{Path, PathBuf};

use bytes::Bytes;
use serde_json::{Value, json};
use sha1::{Digest, Sha1};
use wasmsand_vfs::{Entry, MountInfo, MountOptions, PathChange};

use crate::{HOME, Result, Sandbox, SandboxError, SnapshotId};

/// What [`Sandbox::changes`] compares the sandbox with.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum ChangesSince {
    /// The mounted folder as it was mounted (the default).
    #[default]
    Mount,
    /// A snapshot of this sandbox.
    Snapshot(SnapshotId),
    /// The state the fork was made from (or last merged at): what a merge would bring.
    Parent,
}

/// Options of [`Sandbox::changes`].
#[derive(Debug, Clone, Default)]
pub struct ChangesOptions {
    /// What to compare with.
    pub since: ChangesSince,
    /// The directory whose changes are wanted; paths are given relative to it. Default: the
    /// mount point when one folder is mounted (it must be named when several are), else the
    /// home directory.
    pub path: Option<String>,
}

/// What happened to a path.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ChangeStatus {
    /// It did not exist before.
    Added,
    /// It exists on both sides, with other content, mode or kind.
    Modified,
    /// It exists no more.
    Deleted,
}

impl ChangeStatus {
    /// `"added"`, `"modified"` or `"deleted"`.
    pub fn as_str(self) -> &'static str {
        match self {
            ChangeStatus::Added => "added",
            ChangeStatus::Modified => "modified",
            ChangeStatus::Deleted => "deleted",
        }
    }
}

/// One changed path of [`Changes`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FileChange {
    /// Relative to [`Changes::root`].
    pub path: String,
    /// Added, modified or deleted.
    pub status: ChangeStatus,
    /// `"file"`, `"symlink"`, `"dir"` or `"device"`: what the path is now (was, when
    /// deleted).
    pub kind: &'static str,
    /// Permission bits before (`None` when added).
    pub old_mode: Option<u32>,
    /// Permission bits after (`None` when deleted).
    pub new_mode: Option<u32>,
    /// A side is not text (a NUL byte, or not UTF-8): the patch carries it as a git binary
    /// patch.
    pub binary: bool,
}

/// What [`Sandbox::changes`] found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Changes {
    /// The sandbox directory the paths are relative to.
    pub root: String,
    /// Every changed path (directories included), parents first.
    pub files: Vec<FileChange>,
    /// The changes to files and symlinks as `git diff --binary` writes them: `git apply`
    /// in a copy of the original folder reproduces the sandbox's. Empty when nothing changed.
    /// Directories are not in it (git does not track them), nor are modes git does not keep
    /// (only the owner's execute bit).
    pub patch: String,
    /// The changes as found, with both sides' content, for [`Sandbox::export_changes`].
    raw: Vec<PathChange>,
}

impl Changes {
    /// Whether nothing changed.
    pub fn is_empty(&self) -> bool {
        self.files.is_empty()
    }

    /// As the wire carries it: `{root, files: [{path, status, kind, oldMode, newMode,
    /// binary}], patch}` (modes as octal strings).
    pub fn to_json(&self) -> Value {
        let mode = |m: Option<u32>| m.map(|m| format!("{m:o}"));
        json!({
            "root": self.root,
            "files": self.files.iter().map(|f| json!({
                "path": f.path,
                "status": f.status.as_str(),
                "kind": f.kind,
                "oldMode": mode(f.old_mode),
                "newMode": mode(f.new_mode),
                "binary": f.binary,
            })).collect::<Vec<_>>(),
            "patch": self.patch,
        })
    }
}

/// What [`Sandbox::export_changes`] did to the host directory.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ExportReport {
    /// Files and symlinks written (relative paths).
    pub written: Vec<String>,
    /// Paths removed.
    pub removed: Vec<String>,
    /// Directories made.
    pub dirs: Vec<String>,
}

/// A host folder to mount, as a command line names it (`HOST:SANDBOX[:ro]`) or a request
/// carries it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HostMount {
    /// The host directory.
    pub host: PathBuf,
    /// Where it appears in the sandbox (relative: from the home directory).
    pub at: String,
    /// How.
    pub options: MountOptions,
}

impl HostMount {
    /// `HOST:SANDBOX`, `HOST:SANDBOX:ro` or `HOST:SANDBOX:rw`; without `:SANDBOX`, the folder
    /// appears under its own name in the home directory.
    pub fn parse(spec: &str) -> std::result::Result<HostMount, String> {
        let (rest, read_only) = match spec.rsplit_once(':') {
            Some((rest, "ro")) => (rest, true),
            Some((rest, "rw")) => (rest, false),
            _ => (spec, false),
        };
        let (host, at) = match rest.rsplit_once(':') {
            Some((h, a)) if !h.is_empty() && !a.is_empty() => (h.to_string(), a.to_string()),
            Some(_) => return Err(format!("mount {spec:?}: expected HOST:SANDBOX[:ro]")),
            None => {
                let name = Path::new(rest)
                    .file_name()
                    .and_then(|n| n.to_str())
                    .ok_or_else(|| format!("mount {spec:?}: name where it goes: HOST:SANDBOX"))?;
                (rest.to_string(), name.to_string())
            }
        };
        if host.is_empty() {
            return Err(format!("mount {spec:?}: the host folder is empty"));
        }
        Ok(HostMount {
            host: PathBuf::from(host),
            at,
            options: MountOptions {
                read_only,
                ..MountOptions::default()
            },
        })
    }
}

impl Sandbox {
    /// Mounts the host directory `host` at `at` (relative: from the home directory) under
    /// the sandbox's copy-on-write layer: the sandbox sees the folder, reads it lazily and
    /// changes its own copy; the host is never written. What [`MountOptions`] excludes, and
    /// the secret denylist, stay invisible. The sandbox's limits count what it adds there,
    /// not what the folder holds (whose reads have a cap of their own,
    /// [`MountOptions::max_host_bytes`]). A fork or snapshot taken later shares the mount.
    pub fn mount_host(&self, host: &Path, at: &str, opts: &MountOptions) -> Result<MountInfo> {
        self.with_inner(|i| {
            let at = wasmsand_vfs::path::join(HOME, at);
            Ok(i.vfs.lock().mount_host(&at, host, opts)?)
        })
    }

    /// [`Self::mount_host`] for each of `mounts`, in order; the first that fails stops and
    /// says which.
    pub fn mount_all(&self, mounts: &[HostMount]) -> Result<Vec<MountInfo>> {
        mounts
            .iter()
            .map(|m| {
                self.mount_host(&m.host, &m.at, &m.options)
                    .map_err(|e| match e {
                        SandboxError::Fs(f) => SandboxError::Invalid(format!(
                            "mounting {} at {}: {}",
                            m.host.display(),
                            m.at,
                            f.message
                        )),
                        e => e,
                    })
            })
            .collect()
    }

    /// The host folders mounted in this sandbox.
    pub fn mounts(&self) -> Result<Vec<MountInfo>> {
        self.with_inner(|i| Ok(i.vfs.lock().mounts()))
    }

    /// What the sandbox changed (see [`ChangesOptions`]): the paths, and a patch that `git
    /// apply` takes. Costs what changed: directories nothing changed in are skipped, and
    /// host files are read only where the sandbox changed them.
    pub fn changes(&self, opts: &ChangesOptions) -> Result<Changes> {
        self.with_inner(|i| {
            let vfs = i.vfs.lock();
            let mounts = vfs.mounts();
            let named = opts
                .path
                .as_deref()
                .map(|p| wasmsand_vfs::path::normalize(&wasmsand_vfs::path::join(HOME, p)));
            let (root, raw) = match opts.since {
                ChangesSince::Mount => {
                    let root = match (named, mounts.as_slice()) {
                        (Some(p), _) => p,
                        (None, [one]) => one.path.clone(),
                        (None, []) => {
                            return Err(SandboxError::Invalid(
                                "no host folder is mounted in this sandbox: compare with a snapshot or the parent instead".into(),
                            ));
                        }
                        (None, _) => {
                            return Err(SandboxError::Invalid(format!(
                                "several host folders are mounted ({}): name the one to compare with",
                                mounts.iter().map(|m| m.path.as_str()).collect::<Vec<_>>().join(", ")
                            )));
                        }
                    };
                    let raw = vfs.mount_changes(&root)?;
                    (root, raw)
                }
                ChangesSince::Snapshot(id) => {
                    let base = vfs
                        .snapshot_checkpoint(id)
                        .map_err(|_| SandboxError::UnknownSnapshot(id.to_string()))?;
                    let root = named.unwrap_or_else(|| default_root(&mounts));
                    let raw = vfs.changes_since(&base, &root);
                    (root, raw)
                }
                ChangesSince::Parent => {
                    let Some(origin) = &i.origin else {
                        return Err(SandboxError::Invalid(
                            "this sandbox is not a fork: it has no parent to compare with".into(),
                        ));
                    };
                    let root = named.unwrap_or_else(|| default_root(&mounts));
                    let raw = vfs.changes_since(&origin.base, &root);
                    (root, raw)
                }
            };
            Ok(render(root, raw))
        })
    }

    /// What this sandbox changed against another sandbox's tree: for a caller that keeps a
    /// fork point or a snapshot itself (a service stores them, and a fork woken from its
    /// store no longer knows its parent), loaded back as a sandbox. `path` as in
    /// [`ChangesOptions::path`].
    pub fn changes_against(&self, base: &Sandbox, path: Option<&str>) -> Result<Changes> {
        if std::ptr::eq(self, base) {
            return Ok(render(HOME.to_string(), Vec::new()));
        }
        // Each sandbox is locked on its own, never both at once (as in merges).
        let base = base.with_inner(|b| Ok(b.vfs.lock().checkpoint()))?;
        self.with_inner(|i| {
            let vfs = i.vfs.lock();
            let root = match path {
                Some(p) => wasmsand_vfs::path::normalize(&wasmsand_vfs::path::join(HOME, p)),
                None => default_root(&vfs.mounts()),
            };
            let raw = vfs.changes_since(&base, &root);
            Ok(render(root, raw))
        })
    }

    /// Writes `changes` (from [`Self::changes`]) into the host directory `dir`, which must
    /// exist: files and symlinks written, deleted paths removed, directories made. `dir` is
    /// what the caller names, and nothing outside it is touched: a path that would lead
    /// through a symlink in `dir` is refused before anything is written.
    pub fn export_changes(&self, changes: &Changes, dir: &Path) -> Result<ExportReport> {
        let dir = std::fs::canonicalize(dir).map_err(|e| {
            SandboxError::Invalid(format!("export directory {}: {e}", dir.display()))
        })?;
        if !dir.is_dir() {
            return Err(SandboxError::Invalid(format!(
                "export directory {} is not a directory",
                dir.display()
            )));
        }
        let mut targets = Vec::new();
        for c in &changes.raw {
            let rel = relative(&changes.root, &c.path);
            if rel.is_empty() {
                continue;
            }
            let target = safe_target(&dir, rel)?;
            targets.push((rel.to_string(), target, c));
        }
        let mut report = ExportReport::default();
        let fail = |what: &str, p: &Path, e: std::io::Error| {
            SandboxError::Invalid(format!("export: {what} {}: {e}", p.display()))
        };
        for (rel, target, c) in targets {
            // A changed file whose unchanged parents the directory does not have yet.
            if c.new.is_some()
                && let Some(parent) = target.parent()
                && !parent.exists()
            {
                std::fs::create_dir_all(parent).map_err(|e| fail("mkdir", parent, e))?;
                let made = relative(&dir.to_string_lossy(), &parent.to_string_lossy()).to_string();
                report.dirs.push(made);
            }
            let existing = std::fs::symlink_metadata(&target).ok();
            let keep_dir = matches!(c.new, Some(Entry::Dir { .. }))
                && existing.as_ref().is_some_and(|m| m.is_dir());
            if let Some(m) = &existing
                && !keep_dir
            {
                let gone = if m.is_dir() {
                    std::fs::remove_dir_all(&target)
                } else {
                    std::fs::remove_file(&target)
                };
                gone.map_err(|e| fail("remove", &target, e))?;
                if c.new.is_none() {
                    report.removed.push(rel.clone());
                }
            }
            match &c.new {
                None | Some(Entry::Device) => {}
                Some(Entry::Dir { mode }) => {
                    if !keep_dir {
                        std::fs::create_dir(&target).map_err(|e| fail("mkdir", &target, e))?;
                        report.dirs.push(rel.clone());
                    }
                    set_mode(&target, *mode).map_err(|e| fail("chmod", &target, e))?;
                }
                Some(Entry::File { mode, data }) => {
                    let mut f = std::fs::OpenOptions::new()
                        .write(true)
                        .create_new(true)
                        .open(&target)
                        .map_err(|e| fail("write", &target, e))?;
                    f.write_all(data).map_err(|e| fail("write", &target, e))?;
                    set_mode(&target, *mode).map_err(|e| fail("chmod", &target, e))?;
                    report.written.push(rel.clone());
                }
                Some(Entry::Symlink { target: to }) => {
                    std::os::unix::fs::symlink(to, &target)
                        .map_err(|e| fail("symlink", &target, e))?;
                    report.written.push(rel.clone());
                }
            }
        }
        Ok(report)
    }
}

fn set_mode(p: &Path, mode: u32) -> std::io::Result<()> {
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(p, std::fs::Permissions::from_mode(mode & 0o7777))
}

/// `dir`/`rel`, refused when `rel` climbs out or a directory on the way is a symlink on the
/// host (which could lead a write anywhere).
fn safe_target(dir: &Path, rel: &str) -> Result<PathBuf> {
    let mut p = dir.to_path_buf();
    let comps: Vec<&str> = rel.split('/').collect();
    for (n, c) in comps.iter().enumerate() {
        if c.is_empty() || *c == "." || *c == ".." {
            return Err(SandboxError::Invalid(format!(
                "export: refusing the path {rel:?}"
            )));
        }
        p.push(c);
        if n + 1 < comps.len()
            && std::fs::symlink_metadata(&p).is_ok_and(|m| m.file_type().is_symlink())
        {
            return Err(SandboxError::Invalid(format!(
                "export: {} is a symlink on the host; refusing to write through it",
                p.display()
            )));
        }
    }
    Ok(p)
}

fn default_root(mounts: &[MountInfo]) -> String {
    match mounts {
        [one] => one.path.clone(),
        _ => HOME.to_string(),
    }
}

fn relative<'a>(root: &str, path: &'a str) -> &'a str {
    if path == root {
        return "";
    }
    if root == "/" {
        return path.trim_start_matches('/');
    }
    path.strip_prefix(root)
        .and_then(|r| r.strip_prefix('/'))
        .unwrap_or(path)
}

/// One side of a path as git sees it: a mode git keeps and the bytes it stores.
struct GitSide {
    mode: &'static str,
    data: Bytes,
}

fn git_side(e: &Option<Entry>) -> Option<GitSide> {
    match e {
        Some(Entry::File { mode, data }) => Some(GitSide {
            mode: if mode & 0o100 != 0 {
                "100755"
            } else {
                "100644"
            },
            data: data.clone(),
        }),
        Some(Entry::Symlink { target }) => Some(GitSide {
            mode: "120000",
            data: Bytes::from(target.clone().into_bytes()),
        }),
        _ => None,
    }
}

fn is_binary(data: &[u8]) -> bool {
    data[..data.len().min(8000)].contains(&0) || std::str::from_utf8(data).is_err()
}

fn render(root: String, raw: Vec<PathChange>) -> Changes {
    let mut files = Vec::new();
    let mut patch = String::new();
    for c in &raw {
        let rel = relative(&root, &c.path);
        let status = match (&c.old, &c.new) {
            (None, _) => ChangeStatus::Added,
            (_, None) => ChangeStatus::Deleted,
            _ => ChangeStatus::Modified,
        };
        let (old, new) = (git_side(&c.old), git_side(&c.new));
        let binary = [&old, &new]
            .into_iter()
            .flatten()
            .any(|s| s.mode != "120000" && is_binary(&s.data));
        files.push(FileChange {
            path: if rel.is_empty() {
                ".".into()
            } else {
                rel.into()
            },
            status,
            kind: c
                .new
                .as_ref()
                .or(c.old.as_ref())
                .map_or("file", Entry::kind),
            old_mode: c.old.as_ref().map(Entry::mode),
            new_mode: c.new.as_ref().map(Entry::mode),
            binary,
        });
        if rel.is_empty() {
            continue;
        }
        match (old, new) {
            (None, None) => {}
            (Some(o), Some(n)) if o.mode == "120000" && n.mode != "120000" => {
                file_patch(&mut patch, rel, Some(&o), None);
                file_patch(&mut patch, rel, None, Some(&n));
            }
            (Some(o), Some(n)) if n.mode == "120000" && o.mode != "120000" => {
                file_patch(&mut patch, rel, Some(&o), None);
                file_patch(&mut patch, rel, None, Some(&n));
            }
            (o, n) => file_patch(&mut patch, rel, o.as_ref(), n.as_ref()),
        }
    }
    Changes {
        root,
        files,
        patch,
        raw,
    }
}

/// Appends one file's section of a `git diff --binary`.
fn file_patch(out: &mut String, rel: &str, old: Option<&GitSide>, new: Option<&GitSide>) {
    if let (Some(o), Some(n)) = (old, new)
        && o.mode == n.mode
        && o.data == n.data
    {
        // Only bits git does not keep changed.
        return;
    }
    let a = quote(&format!("a/{rel}"));
    let b = quote(&format!("b/{rel}"));
    let _ = writeln!(out, "diff --git {a} {b}");
    match (old, new) {
        (None, Some(n)) => {
            let _ = writeln!(out, "new file mode {}", n.mode);
        }
        (Some(o), None) => {
            let _ = writeln!(out, "deleted file mode {}", o.mode);
        }
        (Some(o), Some(n)) if o.mode != n.mode => {
            let _ = writeln!(out, "old mode {}\nnew mode {}", o.mode, n.mode);
        }
        _ => {}
    }
    let empty = Bytes::new();
    let od = old.map_or(&empty, |s| &s.data);
    let nd = new.map_or(&empty, |s| &s.data);
    if od == nd {
        return;
    }
    let binary = is_binary(od) || is_binary(nd);
    if binary {
        let _ = writeln!(
            out,
            "index {}..{}",
            blob_id(old.map(|s| &s.data[..])),
            blob_id(new.map(|s| &s.data[..]))
        );
        let _ = writeln!(out, "GIT binary patch");
        binary_literal(out, nd);
        return;
    }
    let from = if old.is_some() {
        a.as_str()
    } else {
        "/dev/null"
    };
    let to = if new.is_some() {
        b.as_str()
    } else {
        "/dev/null"
    };
    let _ = writeln!(out, "--- {from}\n+++ {to}");
    let (os, ns) = (
        std::str::from_utf8(od).expect("checked to be text"),
        std::str::from_utf8(nd).expect("checked to be text"),
    );
    let diff = similar::TextDiff::from_lines(os, ns);
    for hunk in diff
        .unified_diff()
        .context_radius(3)
        .missing_newline_hint(true)
        .iter_hunks()
    {
        let _ = write!(out, "{hunk}");
    }
}

/// A blob's id as git computes it (all zeros for a missing side).
fn blob_id(data: Option<&[u8]>) -> String {
    let Some(data) = data else {
        return "0".repeat(40);
    };
    let mut h = Sha1::new();
    h.update(format!("blob {}\0", data.len()).as_bytes());
    h.update(data);
    hex(&h.finalize())
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// A `literal` hunk of a git binary patch: the new content, zlib-compressed, in git's
/// base-85 lines of up to 52 bytes, then the blank line that ends the hunk.
fn binary_literal(out: &mut String, data: &[u8]) {
    let mut z = flate2::write::ZlibEncoder::new(Vec::new(), flate2::Compression::default());
    z.write_all(data).expect("writing to memory");
    let deflated = z.finish().expect("writing to memory");
    let _ = writeln!(out, "literal {}", data.len());
    for line in deflated.chunks(52) {
        let n = line.len() as u8;
        out.push(if n <= 26 {
            (b'A' + n - 1) as char
        } else {
            (b'a' + n - 27) as char
        });
        base85(out, line);
        out.push('\n');
    }
    out.push('\n');
}

fn base85(out: &mut String, data: &[u8]) {
    const ALPHABET: &[u8; 85] =
        b"0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz!#$%&()*+-;<=>?@^_`{|}~";
    for chunk in data.chunks(4) {
        let mut word = [0u8; 4];
        word[..chunk.len()].copy_from_slice(chunk);
        let mut v = u32::from_be_bytes(word);
        let mut enc = [0u8; 5];
        for slot in enc.iter_mut().rev() {
            *slot = ALPHABET[(v % 85) as usize];
            v /= 85;
        }
        out.extend(enc.iter().map(|&c| c as char));
    }
}

/// A path as git writes it in a patch: as is, or C-quoted when it holds a quote, a
/// backslash, a control character or a byte beyond ASCII.
fn quote(p: &str) -> String {
    if !p
        .bytes()
        .any(|b| b == b'"' || b == b'\\' || !(0x20..0x7f).contains(&b))
    {
        return p.to_string();
    }
    let mut s = String::from("\"");
    for b in p.bytes() {
        match b {
            b'"' => s.push_str("\\\""),
            b'\\' => s.push_str("\\\\"),
            b'\n' => s.push_str("\\n"),
            b'\t' => s.push_str("\\t"),
            0x20..=0x7e => s.push(b as char),
            _ => {
                let _ = write!(s, "\\{b:03o}");
            }
        }
    }
    s.push('"');
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mount_specs_parse() {
        let m = HostMount::parse("/src/repo:work/repo:ro").unwrap();
        assert_eq!(
            (m.host.to_str().unwrap(), m.at.as_str(), m.options.read_only),
            ("/src/repo", "work/repo", true)
        );
        let m = HostMount::parse("./repo:/home/user/r").unwrap();
        assert_eq!(
            (m.at.as_str(), m.options.read_only),
            ("/home/user/r", false)
        );
        let m = HostMount::parse("/data/set").unwrap();
        assert_eq!(m.at, "set");
        assert!(HostMount::parse(":x").is_err());
        assert!(HostMount::parse("/a:").is_err());
    }

    #[test]
    fn base85_matches_gits_alphabet() {
        // git's own encoding of these bytes (base85.c): 4 bytes become 5 characters.
        let mut s = String::new();
        base85(&mut s, &[0, 0, 0, 0]);
        assert_eq!(s, "00000");
        s.clear();
        base85(&mut s, &[0xff, 0xff, 0xff, 0xff]);
        assert_eq!(s, "|NsC0");
    }

    #[test]
    fn odd_paths_are_quoted_as_git_does() {
        assert_eq!(quote("a/plain name.txt"), "a/plain name.txt");
        assert_eq!(quote("a/caf\u{e9}"), "\"a/caf\\303\\251\"");
        assert_eq!(quote("a/q\"t"), "\"a/q\\\"t\"");
    }

    #[test]
    fn the_empty_blob_has_gits_id() {
        assert_eq!(
            blob_id(Some(b"")),
            "e69de29bb2d1d6434b8b29ae775ad8c2e48c5391"
        );
    }
}
