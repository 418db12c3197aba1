//! Uploads into a session's workspace: `multipart/form-data` (`files[]`), tar, gzip'd tar and
//! zip. Everything is expanded into a staging list first, under the caps and path rules;
//! only an upload that passes whole is written, and a write that fails part-way (the
//! workspace cap) is rolled back with a snapshot.

use std::io::Read;

use axum::http::StatusCode;
use serde_json::json;

use crate::error::{ApiError, ErrorCode};

/// The bounds an upload is expanded under (`SANDBOX_MAX_UPLOAD_*`).
#[derive(Debug, Clone, Copy)]
pub struct Caps {
    /// Bytes of file content, after decompression.
    pub max_bytes: u64,
    /// Files and directories.
    pub max_files: u64,
    /// Components of a path.
    pub max_depth: usize,
    /// Expanded bytes per compressed byte, past the first MiB.
    pub max_ratio: u64,
}

/// What an upload expands to.
#[derive(Default, Debug)]
pub struct Staged {
    pub dirs: Vec<String>,
    pub files: Vec<(String, Vec<u8>)>,
    pub bytes: u64,
    /// Members the filter left out: how many, and the first [`EXCLUDED_LISTED`] of them.
    pub excluded_count: u64,
    pub excluded: Vec<String>,
}

/// How many left-out paths an upload's answer names (the count is always whole).
pub const EXCLUDED_LISTED: usize = 100;

/// What the server leaves out of every upload unless the request says
/// `default_excludes=false`: version-control folders, dependency and bytecode caches, and
/// binaries by extension (seed 003: "exclude VCS, build artifacts, and binary files by
/// default"; "binaries are blocked unless explicitly whitelisted"). A request keeps one with
/// a `!` rule of its own (`exclude=!*.png`), which comes after these.
pub const DEFAULT_EXCLUDES: &[&str] = &[
    ".git/",
    ".hg/",
    ".svn/",
    "node_modules/",
    "__pycache__/",
    "*.pyc",
    "*.o",
    "*.a",
    "*.obj",
    "*.so",
    "*.dylib",
    "*.dll",
    "*.exe",
    "*.class",
    "*.jar",
    "*.whl",
    "*.wasm",
    "*.zip",
    "*.tar",
    "*.gz",
    "*.tgz",
    "*.bz2",
    "*.xz",
    "*.zst",
    "*.7z",
    "*.rar",
    "*.iso",
    "*.dmg",
    "*.png",
    "*.jpg",
    "*.jpeg",
    "*.gif",
    "*.bmp",
    "*.ico",
    "*.webp",
    "*.pdf",
    "*.mp3",
    "*.mp4",
    "*.mov",
    "*.avi",
];

/// At most this many `exclude` rules in one request, each at most [`MAX_RULE_BYTES`].
pub const MAX_RULES: usize = 256;
pub const MAX_RULE_BYTES: usize = 1024;

/// Which members of an upload are left out: `.gitignore` rules over the member's path
/// relative to the workspace (a later rule wins, `!` keeps, a rule ending in `/` takes a
/// folder and everything in it). The defaults come first, the request's own after them.
#[derive(Debug)]
pub struct Filter {
    rules: Option<ignore::gitignore::Gitignore>,
}

impl Filter {
    /// Leaves nothing out.
    pub fn none() -> Filter {
        Filter { rules: None }
    }

    /// The request's `exclude` rules after the defaults (unless `defaults` is false). A rule
    /// that does not parse, or too many or too long ones, are a 400 naming it.
    pub fn new(defaults: bool, rules: &[String]) -> Result<Filter, ApiError> {
        if rules.len() > MAX_RULES {
            return Err(refused(
                "invalid_exclude",
                format!("{} exclude rules (at most {MAX_RULES})", rules.len()),
            ));
        }
        let mut b = ignore::gitignore::GitignoreBuilder::new("");
        let mut any = false;
        if defaults {
            for r in DEFAULT_EXCLUDES {
                b.add_line(None, r)
                    .map_err(|e| ApiError::internal(format!("default exclude {r:?}: {e}")))?;
                any = true;
            }
        }
        for r in rules {
            if r.len() > MAX_RULE_BYTES || r.contains('\0') {
                return Err(refused(
                    "invalid_exclude",
                    format!("exclude rule longer than {MAX_RULE_BYTES} bytes or with a NUL"),
                ));
            }
            b.add_line(None, r)
                .map_err(|e| refused("invalid_exclude", format!("exclude rule {r:?}: {e}")))?;
            any = true;
        }
        if !any {
            return Ok(Filter::none());
        }
        let rules = b
            .build()
            .map_err(|e| refused("invalid_exclude", format!("exclude rules: {e}")))?;
        Ok(Filter { rules: Some(rules) })
    }

    /// Whether `path` (checked, relative) is left out, itself or through a folder it is in.
    pub fn excludes(&self, path: &str, is_dir: bool) -> bool {
        self.rules
            .as_ref()
            .is_some_and(|g| g.matched_path_or_any_parents(path, is_dir).is_ignore())
    }
}

pub fn refused(reason: &'static str, message: impl Into<String>) -> ApiError {
    ApiError::invalid(message).with_details(json!({ "reason": reason }))
}

fn too_large(reason: &'static str, message: impl Into<String>, limit: u64) -> ApiError {
    ApiError::new(
        StatusCode::PAYLOAD_TOO_LARGE,
        ErrorCode::InvalidRequest,
        message,
    )
    .with_details(json!({ "reason": reason, "limit": limit }))
}

/// Checks and normalizes an archive member's name: relative, no `..`, no backslash or NUL,
/// within the depth cap. Leading `./` is dropped.
pub fn check_path(raw: &str, max_depth: usize) -> Result<String, ApiError> {
    if raw.starts_with('/') || (raw.len() > 1 && raw.as_bytes()[1] == b':') {
        return Err(refused(
            "absolute_path",
            format!("absolute path refused: {raw:?}"),
        ));
    }
    if raw.contains('\\') || raw.contains('\0') {
        return Err(refused(
            "invalid_path",
            format!("path with a backslash or NUL refused: {raw:?}"),
        ));
    }
    let mut parts = Vec::new();
    for seg in raw.split('/') {
        match seg {
            "" | "." => {}
            ".." => {
                return Err(refused(
                    "path_traversal",
                    format!("path with '..' refused: {raw:?}"),
                ));
            }
            s => parts.push(s),
        }
    }
    if parts.is_empty() {
        return Err(refused(
            "invalid_path",
            format!("empty path refused: {raw:?}"),
        ));
    }
    if parts.len() > max_depth {
        return Err(refused(
            "too_deep",
            format!(
                "path {raw:?} is {} levels deep (limit {max_depth})",
                parts.len()
            ),
        ));
    }
    Ok(parts.join("/"))
}

impl Staged {
    /// A directory is an entry like a file: a stream of millions of directory headers is
    /// refused at the cap, not kept.
    fn count_entry(&self, caps: &Caps) -> Result<(), ApiError> {
        if (self.files.len() + self.dirs.len()) as u64 >= caps.max_files {
            return Err(too_large(
                "too_many_files",
                format!(
                    "more than {} files and directories in the upload",
                    caps.max_files
                ),
                caps.max_files,
            ));
        }
        Ok(())
    }

    pub fn add_dir(&mut self, caps: &Caps, path: String) -> Result<(), ApiError> {
        self.count_entry(caps)?;
        self.dirs.push(path);
        Ok(())
    }

    pub fn exclude(&mut self, path: String) {
        self.excluded_count += 1;
        if self.excluded.len() < EXCLUDED_LISTED {
            self.excluded.push(path);
        }
    }

    pub fn add_file(&mut self, caps: &Caps, path: String, data: Vec<u8>) -> Result<(), ApiError> {
        self.count_entry(caps)?;
        self.bytes += data.len() as u64;
        if self.bytes > caps.max_bytes {
            return Err(too_large(
                "too_large",
                format!("the upload expands past {} bytes", caps.max_bytes),
                caps.max_bytes,
            ));
        }
        self.files.push((path, data));
        Ok(())
    }
}

/// Reads one member with the running totals enforced while it decompresses: the total
/// cap, and the ratio of expanded to compressed bytes (a bomb is stopped at the first
/// chunk past either, whatever its headers claim).
fn read_member(
    r: &mut impl Read,
    staged: &Staged,
    caps: &Caps,
    compressed: u64,
) -> Result<Vec<u8>, ApiError> {
    // Small archives expand legitimately by large factors (a file of zeros): the ratio only
    // applies past 1 MiB.
    let ratio_cap = (compressed.saturating_mul(caps.max_ratio)).max(1024 * 1024);
    let mut out = Vec::new();
    let mut buf = vec![0u8; 64 * 1024];
    loop {
        let n = r
            .read(&mut buf)
            .map_err(|e| refused("malformed", format!("cannot read the archive: {e}")))?;
        if n == 0 {
            return Ok(out);
        }
        out.extend_from_slice(&buf[..n]);
        let total = staged.bytes + out.len() as u64;
        if total > caps.max_bytes {
            return Err(too_large(
                "too_large",
                format!("the upload expands past {} bytes", caps.max_bytes),
                caps.max_bytes,
            ));
        }
        if total > ratio_cap {
            return Err(too_large(
                "compression_ratio",
                format!(
                    "the upload expands more than {}x its compressed size",
                    caps.max_ratio
                ),
                caps.max_ratio,
            ));
        }
    }
}

/// The archive stream as the tar reader sees it (decompressed), counted: headers, padding and
/// left-out members weigh as much as kept files, so an archive of nothing but directory
/// headers or long-name records is stopped like one of big files.
struct Counted<R> {
    inner: R,
    read: u64,
    cap: u64,
    /// Why the stream was stopped, for the error the tar reader turns it into.
    tripped: std::rc::Rc<std::cell::Cell<Option<&'static str>>>,
    over: &'static str,
}

impl<R: Read> Read for Counted<R> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        let n = self.inner.read(buf)?;
        self.read += n as u64;
        if self.read > self.cap {
            self.tripped.set(Some(self.over));
            return Err(std::io::Error::other("the archive stream passed its cap"));
        }
        Ok(n)
    }
}

pub fn expand_tar(
    data: &[u8],
    gzip: bool,
    caps: &Caps,
    filter: &Filter,
) -> Result<Staged, ApiError> {
    let tripped = std::rc::Rc::new(std::cell::Cell::new(None));
    // A plain tar is the body, already within the size cap. A gzip'd one may expand to no
    // more than an uncompressed upload could be, and within the ratio.
    let (reader, compressed): (Box<dyn Read>, u64) = if gzip {
        let ratio_cap = (data.len() as u64)
            .saturating_mul(caps.max_ratio)
            .max(1024 * 1024);
        let (cap, over) = if ratio_cap < caps.max_bytes {
            (ratio_cap, "compression_ratio")
        } else {
            (caps.max_bytes, "too_large")
        };
        let counted = Counted {
            inner: flate2::read::GzDecoder::new(data),
            read: 0,
            cap,
            tripped: tripped.clone(),
            over,
        };
        (Box::new(counted), data.len() as u64)
    } else {
        (Box::new(data), u64::MAX / caps.max_ratio.max(1))
    };
    let stopped = |e: std::io::Error, what: &str| match tripped.get() {
        Some("compression_ratio") => too_large(
            "compression_ratio",
            format!(
                "the upload expands more than {}x its compressed size",
                caps.max_ratio
            ),
            caps.max_ratio,
        ),
        Some(_) => too_large(
            "too_large",
            format!("the upload expands past {} bytes", caps.max_bytes),
            caps.max_bytes,
        ),
        None => refused("malformed", format!("{what}: {e}")),
    };
    let mut archive = tar::Archive::new(reader);
    let mut staged = Staged::default();
    let entries = archive
        .entries()
        .map_err(|e| stopped(e, "not a tar archive"))?;
    for entry in entries {
        let mut entry = entry.map_err(|e| stopped(e, "corrupt tar archive"))?;
        let raw = String::from_utf8(entry.path_bytes().into_owned())
            .map_err(|_| refused("invalid_path", "a member's name is not UTF-8"))?;
        let kind = entry.header().entry_type();
        use tar::EntryType as T;
        match kind {
            T::Symlink => return Err(refused("symlink", format!("symlink refused: {raw:?}"))),
            T::Link => return Err(refused("hardlink", format!("hard link refused: {raw:?}"))),
            T::Char | T::Block | T::Fifo => {
                return Err(refused(
                    "device",
                    format!("device or fifo refused: {raw:?}"),
                ));
            }
            _ => {}
        }
        let path = check_path(&raw, caps.max_depth)?;
        match kind {
            T::Directory if filter.excludes(&path, true) => staged.exclude(path),
            T::Directory => staged.add_dir(caps, path)?,
            T::Regular | T::Continuous if filter.excludes(&path, false) => staged.exclude(path),
            T::Regular | T::Continuous => {
                let data =
                    read_member(&mut entry, &staged, caps, compressed).map_err(
                        |e| match tripped.get() {
                            Some(_) => stopped(std::io::Error::other(""), ""),
                            None => e,
                        },
                    )?;
                staged.add_file(caps, path, data)?;
            }
            other => {
                return Err(refused(
                    "unsupported_entry",
                    format!("tar entry type {other:?} refused: {raw:?}"),
                ));
            }
        }
    }
    Ok(staged)
}

pub fn expand_zip(data: &[u8], caps: &Caps, filter: &Filter) -> Result<Staged, ApiError> {
    let mut archive = zip::ZipArchive::new(std::io::Cursor::new(data))
        .map_err(|e| refused("malformed", format!("not a zip archive: {e}")))?;
    let mut staged = Staged::default();
    for i in 0..archive.len() {
        let mut f = archive
            .by_index(i)
            .map_err(|e| refused("malformed", format!("corrupt zip archive: {e}")))?;
        let raw = String::from_utf8(f.name_raw().to_vec())
            .map_err(|_| refused("invalid_path", "a member's name is not UTF-8"))?;
        let mode = f.unix_mode().unwrap_or(0) & 0o170000;
        if f.is_symlink() || mode == 0o120000 {
            return Err(refused("symlink", format!("symlink refused: {raw:?}")));
        }
        if matches!(mode, 0o020000 | 0o060000 | 0o010000 | 0o140000) {
            return Err(refused(
                "device",
                format!("device, fifo or socket refused: {raw:?}"),
            ));
        }
        let path = check_path(&raw, caps.max_depth)?;
        if filter.excludes(&path, f.is_dir()) {
            staged.exclude(path);
            continue;
        }
        if f.is_dir() {
            staged.add_dir(caps, path)?;
            continue;
        }
        let data = read_member(&mut f, &staged, caps, data.len() as u64)?;
        staged.add_file(caps, path, data)?;
    }
    Ok(staged)
}

/// Adds one multipart file.
pub fn add_part(
    staged: &mut Staged,
    caps: &Caps,
    filter: &Filter,
    name: &str,
    data: Vec<u8>,
) -> Result<(), ApiError> {
    let path = check_path(name, caps.max_depth)?;
    if filter.excludes(&path, false) {
        staged.exclude(path);
        return Ok(());
    }
    staged.add_file(caps, path, data)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn caps() -> Caps {
        Caps {
            max_bytes: 1 << 20,
            max_files: 10,
            max_depth: 3,
            max_ratio: 100,
        }
    }

    #[test]
    fn path_rules() {
        assert_eq!(check_path("./a//b", 3).unwrap(), "a/b");
        for (bad, reason) in [
            ("/etc/x", "absolute_path"),
            ("a/../../x", "path_traversal"),
            ("a\\b", "invalid_path"),
            ("a/b/c/d", "too_deep"),
            ("C:/x", "absolute_path"),
        ] {
            let e = check_path(bad, 3).unwrap_err();
            assert_eq!(e.details["reason"], reason, "{bad}");
        }
    }

    #[test]
    fn gzip_bomb_is_stopped_while_streaming() {
        use std::io::Write;
        let mut header = tar::Header::new_gnu();
        let size = 50u64 << 20;
        header.set_size(size);
        header.set_mode(0o644);
        header.set_entry_type(tar::EntryType::Regular);
        header.set_path("zeros").unwrap();
        header.set_cksum();
        let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::best());
        gz.write_all(header.as_bytes()).unwrap();
        let zeros = vec![0u8; 1 << 20];
        for _ in 0..50 {
            gz.write_all(&zeros).unwrap();
        }
        let data = gz.finish().unwrap();
        let mut c = caps();
        c.max_bytes = 64 << 20;
        let e = expand_tar(&data, true, &c, &Filter::none()).unwrap_err();
        assert_eq!(e.details["reason"], "compression_ratio");
    }

    /// A gzip of two million directory headers (a gigabyte of tar in a few megabytes) is
    /// stopped early with bounded memory, by the entry cap or, with a cap too high to
    /// matter, by the stream's own caps; nothing of it is kept.
    #[test]
    fn a_stream_of_directory_headers_is_stopped() {
        use std::io::Write;
        let mut header = tar::Header::new_gnu();
        header.set_size(0);
        header.set_mode(0o755);
        header.set_entry_type(tar::EntryType::Directory);
        header.set_path("d/").unwrap();
        header.set_cksum();
        let mut block = Vec::new();
        for _ in 0..2048 {
            block.extend_from_slice(header.as_bytes());
        }
        let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::best());
        for _ in 0..1000 {
            gz.write_all(&block).unwrap();
        }
        let data = gz.finish().unwrap();
        let mut c = caps();
        c.max_bytes = 64 << 20;
        let e = expand_tar(&data, true, &c, &Filter::none()).unwrap_err();
        assert_eq!(e.details["reason"], "too_many_files", "{:?}", e.details);
        c.max_files = u64::MAX;
        c.max_bytes = 1 << 40;
        let e = expand_tar(&data, true, &c, &Filter::none()).unwrap_err();
        assert_eq!(e.details["reason"], "compression_ratio", "{:?}", e.details);
        c.max_bytes = 64 << 20;
        c.max_ratio = u64::MAX / (1 << 40);
        let e = expand_tar(&data, true, &c, &Filter::none()).unwrap_err();
        assert_eq!(e.details["reason"], "too_large", "{:?}", e.details);
        // Left-out members are read past, never kept, and still weigh on the stream.
        let e = expand_tar(
            &data,
            true,
            &c,
            &Filter::new(false, &["d/".into()]).unwrap(),
        )
        .unwrap_err();
        assert_eq!(e.details["reason"], "too_large", "{:?}", e.details);
    }

    #[test]
    fn filter_rules() {
        let f = Filter::new(true, &["build/".into(), "!keep.png".into(), "*.log".into()]).unwrap();
        for (path, dir, out) in [
            (".git", true, true),
            (".git/objects/ab", false, true),
            ("src/.git/HEAD", false, true),
            ("node_modules/x/index.js", false, true),
            ("a/b.png", false, true),
            ("keep.png", false, false),
            ("build", true, true),
            ("build/out.txt", false, true),
            ("x.log", false, true),
            ("src/main.py", false, false),
            ("README.md", false, false),
        ] {
            assert_eq!(f.excludes(path, dir), out, "{path}");
        }
        let none = Filter::new(false, &[]).unwrap();
        assert!(!none.excludes(".git/HEAD", false));
        let e = Filter::new(false, &["x[z-a]".into()]).unwrap_err();
        assert_eq!(e.details["reason"], "invalid_exclude");
        let many: Vec<String> = (0..=MAX_RULES).map(|i| format!("f{i}")).collect();
        assert!(Filter::new(false, &many).is_err());
    }
}
