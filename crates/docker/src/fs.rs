//! Single filesystem operations in a container (stat, list, ranged read, write, mkdir,
//! rename, remove), each one exec of coreutils as the run's user: the container's own
//! permissions decide, exactly as for a command the user runs.
//!
//! Failures come back as errno names. coreutils only report them as `strerror` text on
//! stderr, so [`errno_of`] maps that text back (in the C locale every exec here runs with).

use crate::container::{Collected, Container, absolute};
use crate::engine::EngineError;

/// A filesystem operation that failed.
#[derive(Debug, thiserror::Error)]
pub enum FsError {
    /// The operation failed as a system call would: `errno` is its name (`ENOENT`, ...).
    #[error("{message}")]
    Errno {
        /// The errno's name.
        errno: &'static str,
        /// What the helper said (it names the path).
        message: String,
    },
    /// The engine failed.
    #[error(transparent)]
    Engine(#[from] EngineError),
}

/// What a path is, without following a final symlink (lists: the entries' own types).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FsEntry {
    /// The last component of its path.
    pub name: String,
    /// `f` file, `d` directory, `l` symlink, other letters for the rest (`find`'s `%y`).
    pub kind: char,
    /// Bytes; 0 for directories.
    pub size: u64,
}

/// `strerror` texts (glibc, C locale) and the messages of coreutils that name no errno.
const ERRNOS: &[(&str, &str)] = &[
    ("No such file or directory", "ENOENT"),
    ("Not a directory", "ENOTDIR"),
    ("Is a directory", "EISDIR"),
    ("File exists", "EEXIST"),
    ("Directory not empty", "ENOTEMPTY"),
    ("Permission denied", "EACCES"),
    ("Operation not permitted", "EPERM"),
    ("Read-only file system", "EROFS"),
    ("No space left on device", "ENOSPC"),
    ("Disk quota exceeded", "EDQUOT"),
    ("Device or resource busy", "EBUSY"),
    ("File name too long", "ENAMETOOLONG"),
    ("Too many levels of symbolic links", "ELOOP"),
    ("Invalid argument", "EINVAL"),
    // mv -T: a file onto a directory, a directory onto a file.
    ("cannot overwrite directory", "EISDIR"),
    ("cannot overwrite non-directory", "ENOTDIR"),
    // mv of a directory into itself.
    ("cannot move", "EINVAL"),
];

/// The errno a failed helper's stderr names (`EIO` when it names none known).
pub fn errno_of(stderr: &str) -> &'static str {
    ERRNOS
        .iter()
        .find(|(text, _)| stderr.contains(text))
        .map_or("EIO", |(_, e)| e)
}

fn failed(out: &Collected, what: &str, path: &str) -> FsError {
    let text = String::from_utf8_lossy(&out.stderr);
    let text = text.trim();
    let errno = errno_of(text);
    // The helper's own line ("rm: cannot remove '/x': ...") is the clearest message; its
    // absence (a killed helper) still names the operation.
    let message = match text.lines().last() {
        Some(line) if !line.is_empty() => line.to_string(),
        _ => format!("cannot {what} {path}: exit status {}", out.exit_code),
    };
    FsError::Errno { errno, message }
}

/// `find -printf '%y %s %f\0'` records; directories get size 0.
fn entries(raw: &[u8]) -> Vec<(u32, FsEntry)> {
    raw.split(|b| *b == 0)
        .filter_map(|rec| {
            let text = std::str::from_utf8(rec).ok()?;
            let mut it = text.splitn(4, ' ');
            let depth = it.next()?.parse().ok()?;
            let kind = it.next()?.chars().next()?;
            let size = it.next()?.parse().ok()?;
            let name = it.next()?.to_string();
            let size = if kind == 'd' { 0 } else { size };
            Some((depth, FsEntry { name, kind, size }))
        })
        .collect()
}

/// The last component of an absolute path ("/" for the root).
fn base_name(path: &str) -> String {
    path.rsplit('/')
        .find(|s| !s.is_empty())
        .unwrap_or("/")
        .to_string()
}

impl Container {
    async fn fs_exec(
        &self,
        argv: &[&str],
        input: Option<Vec<u8>>,
        cap: usize,
    ) -> Result<Collected, FsError> {
        let mut full = vec!["/usr/bin/env", "LC_ALL=C"];
        full.extend_from_slice(argv);
        Ok(self.collect(&full, input, cap).await?)
    }

    /// What `path` (absolute, or relative to the workspace) is; a final symlink is not
    /// followed.
    pub async fn fs_stat(&self, path: &str) -> Result<FsEntry, FsError> {
        let abs = absolute(path);
        let out = self
            .fs_exec(
                &[
                    "/usr/bin/find",
                    &abs,
                    "-maxdepth",
                    "0",
                    "-printf",
                    "0 %y %s %f\\0",
                ],
                None,
                64 << 10,
            )
            .await?;
        if out.exit_code != 0 {
            return Err(failed(&out, "stat", &abs));
        }
        let mut e = entries(&out.stdout)
            .into_iter()
            .next()
            .map(|(_, e)| e)
            .ok_or_else(|| FsError::Errno {
                errno: "EIO",
                message: format!("cannot stat {abs}: no answer"),
            })?;
        e.name = base_name(&abs);
        Ok(e)
    }

    /// The entries of a directory (a symlink to one is followed), sorted by name.
    pub async fn fs_list(&self, path: &str) -> Result<Vec<FsEntry>, FsError> {
        let abs = absolute(path);
        let out = self
            .fs_exec(
                &[
                    "/usr/bin/find",
                    "-H",
                    &abs,
                    "-maxdepth",
                    "1",
                    "-printf",
                    "%d %y %s %f\\0",
                ],
                None,
                64 << 20,
            )
            .await?;
        let all = entries(&out.stdout);
        match all.first() {
            Some((0, top)) if top.kind != 'd' => {
                return Err(FsError::Errno {
                    errno: "ENOTDIR",
                    message: format!("cannot list {abs}: Not a directory"),
                });
            }
            Some((0, _)) => {}
            _ => return Err(failed(&out, "list", &abs)),
        }
        // An unreadable directory: find names it (and its top entry) but no children.
        if out.exit_code != 0 && all.len() == 1 {
            return Err(failed(&out, "list", &abs));
        }
        let mut list: Vec<FsEntry> = all
            .into_iter()
            .filter(|(d, _)| *d == 1)
            .map(|(_, e)| e)
            .collect();
        list.sort_by(|a, b| a.name.cmp(&b.name));
        Ok(list)
    }

    /// Bytes `offset..offset+length` of a file (cut at its end, a symlink followed), and
    /// the file's whole size.
    pub async fn fs_read(
        &self,
        path: &str,
        offset: u64,
        length: u64,
    ) -> Result<(Vec<u8>, u64), FsError> {
        let abs = absolute(path);
        let (o, l) = (offset.to_string(), length.to_string());
        // One exec: the size line first, then the range; `test -d` gives directories the
        // errno a read(2) would.
        let script = r#"if [ -d "$1" ]; then echo "$1: Is a directory" >&2; exit 1; fi
stat -L -c %s -- "$1" && exec dd if="$1" iflag=skip_bytes,count_bytes skip="$2" count="$3" bs=65536 status=none"#;
        let cap = usize::try_from(length)
            .unwrap_or(usize::MAX)
            .saturating_add(64);
        let out = self
            .fs_exec(&["/bin/sh", "-c", script, "sh", &abs, &o, &l], None, cap)
            .await?;
        if out.exit_code != 0 {
            return Err(failed(&out, "read", &abs));
        }
        let nl = out.stdout.iter().position(|b| *b == b'\n');
        let size = nl
            .and_then(|i| std::str::from_utf8(&out.stdout[..i]).ok())
            .and_then(|s| s.trim().parse::<u64>().ok());
        match (nl, size) {
            (Some(i), Some(size)) => Ok((out.stdout[i + 1..].to_vec(), size)),
            _ => Err(FsError::Errno {
                errno: "EIO",
                message: format!("cannot read {abs}: no size in the answer"),
            }),
        }
    }

    /// Writes (or with `append`, appends to) a file, creating missing parent directories;
    /// answers the file's new size.
    pub async fn fs_write(&self, path: &str, data: Vec<u8>, append: bool) -> Result<u64, FsError> {
        let abs = absolute(path);
        let script = r#"mkdir -p -- "$(dirname -- "$1")" || exit 1
if [ "$2" = 1 ]; then cat >> "$1"; else cat > "$1"; fi || exit 1
stat -c %s -- "$1""#;
        let out = self
            .fs_exec(
                &[
                    "/bin/sh",
                    "-c",
                    script,
                    "sh",
                    &abs,
                    if append { "1" } else { "0" },
                ],
                Some(data),
                64,
            )
            .await?;
        if out.exit_code != 0 {
            return Err(failed(&out, "write", &abs));
        }
        String::from_utf8_lossy(&out.stdout)
            .trim()
            .parse()
            .map_err(|_| FsError::Errno {
                errno: "EIO",
                message: format!("cannot write {abs}: no size in the answer"),
            })
    }

    /// `mkdir -p`; whether the directory was made (false: it was there).
    pub async fn fs_mkdir(&self, path: &str) -> Result<bool, FsError> {
        let abs = absolute(path);
        let script = r#"if [ -d "$1" ]; then echo 0; else mkdir -p -- "$1" && echo 1; fi"#;
        let out = self
            .fs_exec(&["/bin/sh", "-c", script, "sh", &abs], None, 64)
            .await?;
        if out.exit_code != 0 {
            return Err(failed(&out, "make directory", &abs));
        }
        Ok(out.stdout.starts_with(b"1"))
    }

    /// Renames by `rename(2)`'s rules (`mv -T`: never into a directory of that name).
    pub async fn fs_rename(&self, from: &str, to: &str) -> Result<(), FsError> {
        let (a, b) = (absolute(from), absolute(to));
        let out = self
            .fs_exec(&["/bin/mv", "-T", "--", &a, &b], None, 0)
            .await?;
        if out.exit_code != 0 {
            return Err(failed(&out, "rename", &a));
        }
        Ok(())
    }

    /// Removes a file, symlink or empty directory; with `recursive`, a whole tree.
    pub async fn fs_remove(&self, path: &str, recursive: bool) -> Result<(), FsError> {
        let abs = absolute(path);
        let flag = if recursive { "-r" } else { "-d" };
        let out = self
            .fs_exec(&["/bin/rm", flag, "--", &abs], None, 0)
            .await?;
        if out.exit_code != 0 {
            return Err(failed(&out, "remove", &abs));
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn coreutils_messages_map_to_errnos() {
        assert_eq!(
            errno_of("rm: cannot remove '/w/x': No such file or directory"),
            "ENOENT"
        );
        assert_eq!(
            errno_of("rm: cannot remove '/w/d': Directory not empty"),
            "ENOTEMPTY"
        );
        assert_eq!(
            errno_of("mv: cannot overwrite directory '/w/d' with non-directory"),
            "EISDIR"
        );
        assert_eq!(
            errno_of("mv: cannot overwrite non-directory '/w/f' with directory '/w/d'"),
            "ENOTDIR"
        );
        assert_eq!(
            errno_of("sh: 2: cannot create /etc/x: Permission denied"),
            "EACCES"
        );
        assert_eq!(errno_of("something else"), "EIO");
    }

    #[test]
    fn find_records_parse_with_spaces_in_names() {
        let raw = b"0 d 4096 w\x001 f 3 a b.txt\x001 l 7 link\x00";
        let e = entries(raw);
        assert_eq!(e.len(), 3);
        assert_eq!(e[0].1.size, 0);
        assert_eq!(e[1].1.name, "a b.txt");
        assert_eq!((e[2].1.kind, e[2].1.size), ('l', 7));
    }
}
