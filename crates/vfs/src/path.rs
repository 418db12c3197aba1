use crate::error::{Errno, VfsError, VfsResult};

/// Longest name of one path component, as on Linux.
pub const NAME_MAX: usize = 255;
/// Longest whole path, as on Linux.
pub const PATH_MAX: usize = 4096;

/// Joins `path` onto `cwd` the way the kernel sees a relative path: nothing is normalized here,
/// so `..` after a symlink is later resolved against the symlink's target, as POSIX requires.
pub fn join(cwd: &str, path: &str) -> String {
    if path.starts_with('/') || cwd.is_empty() {
        path.to_owned()
    } else if path.is_empty() {
        // An empty path names nothing (ENOENT), whatever the cwd.
        String::new()
    } else {
        format!("{}/{}", cwd.trim_end_matches('/'), path)
    }
}

/// Lexically normalized absolute form of `path` (`.` and `..` folded, `..` at `/` stays at
/// `/`, repeated slashes collapsed). Used for prefix tests on already-resolved paths and for
/// configuration such as writable paths, never to resolve a user path (that needs symlinks).
pub fn normalize(path: &str) -> String {
    let mut parts: Vec<&str> = Vec::new();
    for comp in path.split('/') {
        match comp {
            "" | "." => {}
            ".." => {
                parts.pop();
            }
            c => parts.push(c),
        }
    }
    let mut out = String::with_capacity(path.len() + 1);
    for p in &parts {
        out.push('/');
        out.push_str(p);
    }
    if out.is_empty() {
        out.push('/');
    }
    out
}

/// Rejects paths no operation accepts: empty, containing NUL, or too long.
pub(crate) fn validate(path: &str) -> VfsResult<()> {
    if path.is_empty() {
        return Err(VfsError::plain(Errno::ENOENT, path));
    }
    if path.contains('\0') {
        return Err(VfsError::new(
            Errno::EINVAL,
            path.replace('\0', "\\0"),
            "path contains a NUL byte",
        ));
    }
    if path.len() >= PATH_MAX {
        return Err(VfsError::new(
            Errno::ENAMETOOLONG,
            truncate_for_message(path),
            format!("path is {} bytes (max {})", path.len(), PATH_MAX - 1),
        ));
    }
    if let Some(long) = path.split('/').find(|c| c.len() > NAME_MAX) {
        return Err(VfsError::new(
            Errno::ENAMETOOLONG,
            truncate_for_message(path),
            format!("a name is {} bytes (max {NAME_MAX})", long.len()),
        ));
    }
    Ok(())
}

/// The last component as written (`.`/`..` included), for the operations POSIX forbids on
/// them.
pub(crate) fn last_component(path: &str) -> &str {
    path.trim_end_matches('/').rsplit('/').next().unwrap_or("")
}

/// Whether `path` is `prefix` or lies below it; both are normalized absolute paths.
pub(crate) fn is_within(path: &str, prefix: &str) -> bool {
    prefix == "/"
        || path == prefix
        || (path.starts_with(prefix) && path.as_bytes().get(prefix.len()) == Some(&b'/'))
}

fn truncate_for_message(path: &str) -> String {
    const SHOWN: usize = 120;
    if path.len() <= SHOWN {
        return path.to_owned();
    }
    let mut end = SHOWN;
    while !path.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}...", &path[..end])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn join_keeps_absolute_and_prefixes_relative() {
        assert_eq!(join("/home/user", "/etc"), "/etc");
        assert_eq!(join("/home/user", "a/b"), "/home/user/a/b");
        assert_eq!(join("/", "a"), "/a");
        assert_eq!(join("/home/user/", "../x"), "/home/user/../x");
        assert_eq!(join("/home", ""), "");
    }

    #[test]
    fn normalize_never_escapes_root() {
        assert_eq!(normalize("/../../etc"), "/etc");
        assert_eq!(normalize("/a/./b//c/.."), "/a/b");
        assert_eq!(normalize("/"), "/");
        assert_eq!(normalize("/.."), "/");
        assert_eq!(normalize("tmp/"), "/tmp");
    }

    #[test]
    fn validation_errors() {
        assert_eq!(validate("").unwrap_err().errno, Errno::ENOENT);
        assert_eq!(validate("/a\0b").unwrap_err().errno, Errno::EINVAL);
        let long_name = format!("/{}", "x".repeat(256));
        assert_eq!(validate(&long_name).unwrap_err().errno, Errno::ENAMETOOLONG);
        assert!(validate(&format!("/{}", "x".repeat(255))).is_ok());
        let long_path = "/abcdefgh".repeat(512);
        let err = validate(&long_path).unwrap_err();
        assert_eq!(err.errno, Errno::ENAMETOOLONG);
        assert!(err.path.len() < 200, "messages do not echo huge paths");
    }

    #[test]
    fn within() {
        assert!(is_within("/tmp", "/tmp"));
        assert!(is_within("/tmp/a", "/tmp"));
        assert!(!is_within("/tmpx", "/tmp"));
        assert!(is_within("/anything", "/"));
    }
}
