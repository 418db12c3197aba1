//! Host folders mounted into a tree: a read-only lower layer under the tree's copy-on-write
//! nodes, read lazily.
//!
//! A mounted directory is a [`Kind::HostDir`] node: its entries are listed from the host the
//! first time something looks inside it, and each entry becomes a node of its own (a lazy
//! directory, a [`Content::Host`] file read on first use, or a symlink). The listing and the
//! bytes are kept once read, in the node shared by every clone, fork and snapshot of the
//! tree, so the host folder costs memory only for what the sandbox reads. A change made in
//! the sandbox replaces the node on its path, as any change does; the host is never written.
//!
//! What is excluded, never listed (so never readable, whatever path leads to it): entries the
//! secret denylist names (unless opted out of by name), the caller's own patterns, `.gitignore`
//! rules when asked for, special files (FIFOs, sockets, devices), names that are not UTF-8, and
//! symlinks whose target leaves the mounted root. A file is read through a descriptor opened
//! without following symlinks and checked to still lie inside the root, so a host folder that
//! changes under the sandbox cannot lead a read outside it.

use std::fs;
use std::io::Read;
use std::os::unix::fs::{MetadataExt, OpenOptionsExt};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, OnceLock};
use std::time::SystemTime;

use bytes::Bytes;
use ignore::gitignore::{Gitignore, GitignoreBuilder};

use crate::node::{Children, Content, Kind, LazyDir, LazyFile, Meta, Name, Node};
use crate::{Errno, VfsError, VfsResult};

/// The secret denylist: entries hidden from every mount unless the caller names them in
/// [`MountOptions::allow_secrets`]. Gitignore syntax, matched at any depth except `.git/config`,
/// which is the repository's own (its credentials are what is hidden: see
/// [`MountOptions::allow_secrets`]).
pub const SECRET_DENYLIST: &[&str] = &[
    ".env*",
    "*.pem",
    "id_*",
    ".aws/",
    ".ssh/",
    ".netrc",
    ".git-credentials",
    ".git/config",
];

/// How a host folder is mounted.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct MountOptions {
    /// The sandbox cannot change anything below the mount point (`EROFS`); without it the
    /// sandbox changes its own copy-on-write layer over the folder.
    pub read_only: bool,
    /// Hide what the folder's `.gitignore` files (at every level, and `.git/info/exclude`)
    /// ignore, as `git status` would.
    pub gitignore: bool,
    /// More entries to hide: gitignore patterns, relative to the mounted folder.
    pub exclude: Vec<String>,
    /// Entries of [`SECRET_DENYLIST`] to show anyway, each named exactly as it is spelled
    /// there. `.git/config` is shown with its credentials (user and password in URLs,
    /// `[credential]` sections, `extraheader` lines) taken out unless it is named here.
    pub allow_secrets: Vec<String>,
    /// Bytes of host files this mount may read in all (`None`: no cap). A read past it
    /// fails with `EIO`.
    pub max_host_bytes: Option<u64>,
}

/// A mount as [`Vfs::mounts`](crate::Vfs::mounts) lists it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MountInfo {
    /// Where the folder appears in the tree (absolute, normalized).
    pub path: String,
    /// The host folder, canonical.
    pub host: PathBuf,
    /// As mounted.
    pub read_only: bool,
    /// Bytes read from the host so far, for every clone of the tree together.
    pub host_bytes_read: u64,
    /// The cap on them.
    pub max_host_bytes: Option<u64>,
    /// Host directories listed so far (a mount lists nothing until something looks inside).
    pub dirs_listed: u64,
    /// Host files read so far.
    pub files_read: u64,
}

/// What every node of one mount shares.
pub(crate) struct Mount {
    id: u64,
    root: PathBuf,
    /// The mount point in the tree: absolute symlink targets inside the root are moved there.
    point: String,
    pub(crate) read_only: bool,
    deny: Gitignore,
    exclude: Gitignore,
    gitignore: bool,
    scrub_git_config: bool,
    next_ino: AtomicU64,
    bytes_read: AtomicU64,
    max_bytes: Option<u64>,
    dirs_listed: AtomicU64,
    files_read: AtomicU64,
}

impl std::fmt::Debug for Mount {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Mount")
            .field("root", &self.root)
            .field("point", &self.point)
            .finish()
    }
}

static NEXT_MOUNT: AtomicU64 = AtomicU64::new(1);

/// Inode numbers of mounted nodes live above this, one range per mount, so they never meet
/// the tree's own (counted up from 1).
const HOST_INO_BASE: u64 = 1 << 62;
const INOS_PER_MOUNT: u64 = 1 << 40;

impl Mount {
    pub(crate) fn info(&self) -> MountInfo {
        MountInfo {
            path: self.point.clone(),
            host: self.root.clone(),
            read_only: self.read_only,
            host_bytes_read: self.bytes_read.load(Ordering::Relaxed),
            max_host_bytes: self.max_bytes,
            dirs_listed: self.dirs_listed.load(Ordering::Relaxed),
            files_read: self.files_read.load(Ordering::Relaxed),
        }
    }

    pub(crate) fn point(&self) -> &str {
        &self.point
    }

    fn ino(&self) -> u64 {
        HOST_INO_BASE
            + (self.id % (1 << 21)) * INOS_PER_MOUNT
            + self.next_ino.fetch_add(1, Ordering::Relaxed) % INOS_PER_MOUNT
    }

    /// Takes `n` bytes of the read cap, or says why not.
    fn reserve(&self, n: u64) -> Result<(), String> {
        let before = self.bytes_read.fetch_add(n, Ordering::Relaxed);
        if let Some(max) = self.max_bytes
            && before + n > max
        {
            self.bytes_read.fetch_sub(n, Ordering::Relaxed);
            return Err(format!(
                "host read limit reached ({before} of {max} bytes read, {n} more needed)"
            ));
        }
        Ok(())
    }
}

/// Builds the mount of `host` at `point` and its root node.
pub(crate) fn mount(
    host: &Path,
    point: &str,
    opts: &MountOptions,
) -> VfsResult<(Arc<Mount>, Node)> {
    let fail = |errno, msg: String| VfsError::new(errno, point, msg);
    let root = fs::canonicalize(host).map_err(|e| {
        fail(
            Errno::ENOENT,
            format!("host folder {}: {e}", host.display()),
        )
    })?;
    let md = fs::metadata(&root).map_err(|e| {
        fail(
            Errno::EACCES,
            format!("host folder {}: {e}", root.display()),
        )
    })?;
    if !md.is_dir() {
        return Err(fail(
            Errno::ENOTDIR,
            format!("host folder {} is not a directory", root.display()),
        ));
    }
    for name in &opts.allow_secrets {
        if !SECRET_DENYLIST.contains(&name.as_str()) {
            return Err(fail(
                Errno::EINVAL,
                format!(
                    "unknown secret pattern {name:?} to allow; the denylist is {}",
                    SECRET_DENYLIST.join(" ")
                ),
            ));
        }
    }
    let mut deny = GitignoreBuilder::new(&root);
    for pattern in SECRET_DENYLIST {
        if *pattern == ".git/config" || opts.allow_secrets.iter().any(|a| a == pattern) {
            continue;
        }
        deny.add_line(None, pattern)
            .map_err(|e| fail(Errno::EINVAL, format!("denylist pattern {pattern}: {e}")))?;
    }
    let mut exclude = GitignoreBuilder::new(&root);
    for pattern in &opts.exclude {
        exclude
            .add_line(None, pattern)
            .map_err(|e| fail(Errno::EINVAL, format!("exclude pattern {pattern:?}: {e}")))?;
    }
    let built = |b: GitignoreBuilder| {
        b.build()
            .map_err(|e| fail(Errno::EINVAL, format!("exclude patterns: {e}")))
    };
    let mount = Arc::new(Mount {
        id: NEXT_MOUNT.fetch_add(1, Ordering::Relaxed),
        root: root.clone(),
        point: point.to_string(),
        read_only: opts.read_only,
        deny: built(deny)?,
        exclude: built(exclude)?,
        gitignore: opts.gitignore,
        scrub_git_config: !opts.allow_secrets.iter().any(|a| a == ".git/config"),
        next_ino: AtomicU64::new(0),
        bytes_read: AtomicU64::new(0),
        max_bytes: opts.max_host_bytes,
        dirs_listed: AtomicU64::new(0),
        files_read: AtomicU64::new(0),
    });
    let mut ignores = Vec::new();
    if opts.gitignore {
        // `.git/info/exclude` is the repository's own ignore file, rooted at the top.
        let mut b = GitignoreBuilder::new(&root);
        let exclude = root.join(".git/info/exclude");
        if is_plain_file(&exclude) {
            let _ = b.add(exclude);
        }
        if let Ok(gi) = b.build()
            && !gi.is_empty()
        {
            ignores.push(Arc::new(gi));
        }
    }
    let dir = HostDir {
        mount: Arc::clone(&mount),
        rel: PathBuf::new(),
        ignores: Arc::new(ignores),
        nlink: md.nlink(),
        listing: OnceLock::new(),
    };
    let node = Node::with_meta(Kind::HostDir(Arc::new(dir)), host_meta(&md, mount.ino()));
    Ok((mount, node))
}

fn host_meta(md: &fs::Metadata, ino: u64) -> Meta {
    let time = |secs: i64, nanos: i64| {
        let d = std::time::Duration::new(secs.unsigned_abs(), nanos.clamp(0, 999_999_999) as u32);
        if secs >= 0 {
            SystemTime::UNIX_EPOCH + d
        } else {
            SystemTime::UNIX_EPOCH - d
        }
    };
    Meta {
        mode: md.mode() & 0o1777,
        ino,
        atime: time(md.atime(), md.atime_nsec()),
        mtime: time(md.mtime(), md.mtime_nsec()),
        ctime: time(md.ctime(), md.ctime_nsec()),
        link: 0,
        host: true,
    }
}

/// A directory of a mounted folder, listed on first use.
pub(crate) struct HostDir {
    mount: Arc<Mount>,
    /// Below the mount's root.
    rel: PathBuf,
    /// The `.gitignore` matchers that apply here, outermost first.
    ignores: Arc<Vec<Arc<Gitignore>>>,
    nlink: u64,
    listing: OnceLock<Result<Children, (Errno, String)>>,
}

impl LazyDir for HostDir {
    fn children(&self) -> &Children {
        static EMPTY: OnceLock<Children> = OnceLock::new();
        match self.listing.get_or_init(|| self.list()) {
            Ok(c) => c,
            Err(_) => EMPTY.get_or_init(Children::new),
        }
    }

    fn error(&self, path: &str) -> Option<VfsError> {
        let _ = self.children();
        match self.listing.get() {
            Some(Err((errno, msg))) => Some(VfsError::new(*errno, path, msg.clone())),
            _ => None,
        }
    }

    fn nlink(&self) -> u64 {
        self.nlink
    }

    fn read_only(&self) -> bool {
        self.mount.read_only
    }
}

impl HostDir {
    fn list(&self) -> Result<Children, (Errno, String)> {
        self.mount.dirs_listed.fetch_add(1, Ordering::Relaxed);
        let dir = self.mount.root.join(&self.rel);
        let io = |e: std::io::Error| {
            let errno = match e.kind() {
                std::io::ErrorKind::NotFound => Errno::ENOENT,
                std::io::ErrorKind::PermissionDenied => Errno::EACCES,
                _ => Errno::EIO,
            };
            (errno, format!("host folder {}: {e}", dir.display()))
        };
        // The directory itself must still be a directory inside the root, not a symlink
        // swapped in since its parent was listed.
        let md = fs::symlink_metadata(&dir).map_err(io)?;
        if !md.is_dir() {
            return Err((
                Errno::EIO,
                format!("host folder {} changed under the mount", dir.display()),
            ));
        }
        let mut ignores = Arc::clone(&self.ignores);
        if self.mount.gitignore && is_plain_file(&dir.join(".gitignore")) {
            let (gi, err) = Gitignore::new(dir.join(".gitignore"));
            if err.is_none() && !gi.is_empty() {
                let mut more = (*self.ignores).clone();
                more.push(Arc::new(gi));
                ignores = Arc::new(more);
            }
        }
        let mut children = Children::new();
        for entry in fs::read_dir(&dir).map_err(io)? {
            let Ok(entry) = entry else { continue };
            let Ok(name) = entry.file_name().into_string() else {
                continue;
            };
            let Ok(md) = entry.path().symlink_metadata() else {
                continue;
            };
            let rel = self.rel.join(&name);
            let ft = md.file_type();
            if self.hidden(&dir.join(&name), &rel, ft.is_dir(), &ignores) {
                continue;
            }
            let ino = self.mount.ino();
            let meta = host_meta(&md, ino);
            let kind = if ft.is_dir() {
                Kind::HostDir(Arc::new(HostDir {
                    mount: Arc::clone(&self.mount),
                    rel,
                    ignores: Arc::clone(&ignores),
                    nlink: md.nlink(),
                    listing: OnceLock::new(),
                }))
            } else if ft.is_file() {
                let scrub = self.mount.scrub_git_config && is_git_config(&rel);
                Kind::File(Content::Host(Arc::new(HostFile {
                    mount: Arc::clone(&self.mount),
                    rel,
                    size: md.len(),
                    scrub,
                    bytes: OnceLock::new(),
                })))
            } else if ft.is_symlink() {
                match self.link_target(&dir, &entry.path()) {
                    Some(t) => Kind::Symlink(Arc::from(t.as_str())),
                    None => continue,
                }
            } else {
                // FIFOs, sockets and devices: nothing a sandbox may open on the host.
                continue;
            };
            children.insert(Name::from(name.as_str()), Node::with_meta(kind, meta));
        }
        Ok(children)
    }

    fn hidden(&self, abs: &Path, rel: &Path, is_dir: bool, ignores: &[Arc<Gitignore>]) -> bool {
        let m = &self.mount;
        if m.deny.matched(abs, is_dir).is_ignore() || m.exclude.matched(abs, is_dir).is_ignore() {
            return true;
        }
        if rel == Path::new(".git") {
            return false;
        }
        // The innermost `.gitignore` that has a say decides, as in git.
        for gi in ignores.iter().rev() {
            let r = gi.matched(abs, is_dir);
            if r.is_ignore() {
                return true;
            }
            if r.is_whitelist() {
                return false;
            }
        }
        false
    }

    /// The target a mounted symlink keeps, or `None` when it leads outside the root. Relative
    /// targets stay as they are; absolute ones inside the root move to the mount point.
    fn link_target(&self, dir: &Path, link: &Path) -> Option<String> {
        let target = fs::read_link(link).ok()?;
        let target = target.to_str()?;
        if target.is_empty() {
            return None;
        }
        if let Some(abs) = target.strip_prefix('/') {
            let norm = crate::path::normalize(&format!("/{abs}"));
            let root = self.mount.root.to_str()?;
            let inside = crate::path::is_within(&norm, root);
            if !inside {
                return None;
            }
            let below = norm[root.len()..].trim_start_matches('/');
            return Some(if below.is_empty() {
                self.mount.point.clone()
            } else {
                crate::path::join(&self.mount.point, below)
            });
        }
        // Resolved lexically from the link's own directory: each symlink the path crosses
        // is checked the same way when it is listed, so none of them leaves the root either.
        let from = dir.to_str()?;
        let norm = crate::path::normalize(&format!("{from}/{target}"));
        crate::path::is_within(&norm, self.mount.root.to_str()?).then(|| target.to_string())
    }
}

/// A regular file, not a symlink (which could lead outside the folder) nor a FIFO (which
/// would hang the reader): the only kind of ignore file that is read.
fn is_plain_file(p: &Path) -> bool {
    fs::symlink_metadata(p).is_ok_and(|m| m.file_type().is_file())
}

fn is_git_config(rel: &Path) -> bool {
    rel.file_name().is_some_and(|n| n == "config")
        && rel
            .parent()
            .and_then(|p| p.file_name())
            .is_some_and(|n| n == ".git")
}

/// A regular file of a mounted folder, read on first use.
pub(crate) struct HostFile {
    mount: Arc<Mount>,
    rel: PathBuf,
    /// As the host listed it; the length until the file is read.
    size: u64,
    scrub: bool,
    bytes: OnceLock<Result<Bytes, (Errno, String)>>,
}

impl LazyFile for HostFile {
    fn len(&self) -> u64 {
        match self.bytes.get() {
            Some(Ok(b)) => b.len() as u64,
            _ if self.scrub => self.loaded().len() as u64,
            _ => self.size,
        }
    }

    fn loaded(&self) -> &Bytes {
        static EMPTY: Bytes = Bytes::new();
        match self.bytes.get_or_init(|| self.read()) {
            Ok(b) => b,
            Err(_) => &EMPTY,
        }
    }

    fn load(&self, path: &str) -> VfsResult<()> {
        match self.bytes.get_or_init(|| self.read()) {
            Ok(_) => Ok(()),
            Err((errno, msg)) => Err(VfsError::new(*errno, path, msg.clone())),
        }
    }

    fn key(&self) -> (usize, &Path) {
        (Arc::as_ptr(&self.mount) as usize, &self.rel)
    }
}

impl HostFile {
    fn read(&self) -> Result<Bytes, (Errno, String)> {
        self.mount.files_read.fetch_add(1, Ordering::Relaxed);
        let path = self.mount.root.join(&self.rel);
        let io = |e: std::io::Error| {
            let errno = match e.raw_os_error() {
                Some(libc::ELOOP) => Errno::EIO,
                _ => match e.kind() {
                    std::io::ErrorKind::NotFound => Errno::ENOENT,
                    std::io::ErrorKind::PermissionDenied => Errno::EACCES,
                    _ => Errno::EIO,
                },
            };
            (errno, format!("host file {}: {e}", path.display()))
        };
        let mut file = fs::OpenOptions::new()
            .read(true)
            .custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK)
            .open(&path)
            .map_err(io)?;
        let md = file.metadata().map_err(io)?;
        if !md.is_file() {
            return Err((
                Errno::EIO,
                format!("host file {} is no longer a regular file", path.display()),
            ));
        }
        // A directory above the file swapped for a symlink since it was listed would lead
        // the open elsewhere: the descriptor's own path says where it really is.
        #[cfg(target_os = "linux")]
        if let Ok(real) = fs::read_link(format!("/proc/self/fd/{}", {
            use std::os::fd::AsRawFd;
            file.as_raw_fd()
        })) && !real.starts_with(&self.mount.root)
        {
            return Err((
                Errno::EIO,
                format!(
                    "host file {} leads outside the mounted folder",
                    path.display()
                ),
            ));
        }
        if md.len() > crate::MAX_FILE_SIZE {
            return Err((
                Errno::EFBIG,
                format!(
                    "host file {} is {} bytes, more than a sandbox file may hold",
                    path.display(),
                    md.len()
                ),
            ));
        }
        // The cap is taken as the bytes come, so a file that grew since it was listed is
        // read up to the cap and no further; a read that fails gives its share back.
        let mut buf = Vec::with_capacity(md.len() as usize);
        let mut chunk = vec![0u8; 64 * 1024];
        let mut taken = 0u64;
        let give_back = |n: u64| {
            self.mount.bytes_read.fetch_sub(n, Ordering::Relaxed);
        };
        loop {
            let n = match file.read(&mut chunk) {
                Ok(0) => break,
                Ok(n) => n,
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
                Err(e) => {
                    give_back(taken);
                    return Err(io(e));
                }
            };
            if let Err(m) = self.mount.reserve(n as u64) {
                give_back(taken);
                return Err((Errno::EIO, format!("{m}: {}", path.display())));
            }
            taken += n as u64;
            if taken > crate::MAX_FILE_SIZE {
                give_back(taken);
                return Err((
                    Errno::EFBIG,
                    format!(
                        "host file {} grew past what a sandbox file may hold",
                        path.display()
                    ),
                ));
            }
            buf.extend_from_slice(&chunk[..n]);
        }
        if self.scrub {
            buf = scrub_git_config(&buf);
        }
        Ok(Bytes::from(buf))
    }
}

/// A git config without what authenticates to a remote: user and password in URLs,
/// `[credential]` sections and `extraheader` lines (where tokens are put). The rest is kept
/// line for line, so git in the sandbox still knows its remotes and branches.
pub(crate) fn scrub_git_config(data: &[u8]) -> Vec<u8> {
    let text = String::from_utf8_lossy(data);
    let mut out = String::with_capacity(text.len());
    let mut in_credential = false;
    for line in text.split_inclusive('\n') {
        let t = line.trim_start();
        if let Some(header) = t.strip_prefix('[') {
            let section = header
                .split([']', ' ', '"', '.'])
                .next()
                .unwrap_or("")
                .to_ascii_lowercase();
            in_credential = section == "credential";
            if in_credential {
                continue;
            }
        } else if in_credential {
            continue;
        }
        let key = t
            .split(['=', ' ', '\t'])
            .next()
            .unwrap_or("")
            .to_ascii_lowercase();
        if key == "extraheader" {
            continue;
        }
        out.push_str(&strip_userinfo(line));
    }
    out.into_bytes()
}

/// `https://user:token@host/x` → `https://host/x`, wherever a URL appears in the line.
fn strip_userinfo(line: &str) -> String {
    let mut out = String::with_capacity(line.len());
    let mut rest = line;
    while let Some(i) = rest.find("://") {
        let (head, tail) = rest.split_at(i + 3);
        out.push_str(head);
        let end = tail
            .find(|c: char| c == '/' || c.is_whitespace() || c == '"')
            .unwrap_or(tail.len());
        let authority = &tail[..end];
        match authority.rfind('@') {
            Some(at) => out.push_str(&authority[at + 1..]),
            None => out.push_str(authority),
        }
        rest = &tail[end..];
    }
    out.push_str(rest);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn git_config_loses_its_credentials_only() {
        let cfg = b"[core]\n\tbare = false\n[remote \"origin\"]\n\turl = https://me:ghp_secret@github.com/o/r.git\n\tfetch = +refs/heads/*:refs/remotes/origin/*\n[credential]\n\thelper = store\n[http \"https://x\"]\n\textraheader = AUTHORIZATION: basic abc\n\tsslVerify = true\n";
        let out = String::from_utf8(scrub_git_config(cfg)).unwrap();
        assert!(out.contains("url = https://github.com/o/r.git"), "{out}");
        assert!(out.contains("fetch = +refs/heads/*"));
        assert!(!out.contains("secret") && !out.contains("me:"));
        assert!(!out.contains("helper") && !out.contains("[credential]"));
        assert!(!out.contains("AUTHORIZATION"));
        assert!(out.contains("sslVerify = true"));
    }

    #[test]
    fn urls_without_userinfo_are_kept() {
        assert_eq!(
            strip_userinfo("url = git@github.com:o/r.git\n"),
            "url = git@github.com:o/r.git\n"
        );
        assert_eq!(
            strip_userinfo("a ssh://u@h/x and https://h2/y\n"),
            "a ssh://h/x and https://h2/y\n"
        );
    }
}
