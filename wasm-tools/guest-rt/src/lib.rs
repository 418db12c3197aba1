//! Start-up shared by every guest program.

#[cfg(feature = "door")]
pub mod door;
#[cfg(any(feature = "door", feature = "spawn"))]
pub mod host;
#[cfg(feature = "spawn")]
pub mod spawn;

/// WASI has no working directory: wasi-libc starts every program at `/`. The host passes the
/// run's directory in `PWD`, as a shell does, and entering it here makes relative paths mean
/// what they mean under bash.
pub fn enter_pwd() {
    if let Some(dir) = std::env::var_os("PWD") {
        // A PWD that does not exist leaves the program at `/`, as wasi-libc would have.
        let _ = std::env::set_current_dir(dir);
    }
}

/// The tool a multicall binary is asked to be: the file name of `arg` (argv[0] or argv[1])
/// without a `.wasm` suffix.
pub fn tool_name(arg: &std::ffi::OsStr) -> String {
    std::path::Path::new(arg)
        .file_name()
        .unwrap_or(arg)
        .to_string_lossy()
        .trim_end_matches(".wasm")
        .to_string()
}

/// An I/O error as C's strerror words it ("No such file or directory"), without Rust's
/// " (os error N)" suffix: the text the real tools print.
pub fn errno_text(e: &std::io::Error) -> String {
    let s = e.to_string();
    s.split(" (os error").next().unwrap_or(&s).to_string()
}

/// A temporary file, removed when dropped.
pub struct TempFile(pub std::path::PathBuf);

impl Drop for TempFile {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.0);
    }
}

/// Creates a new temporary file under $TMPDIR (or /tmp) named after `tag`, holding `contents`.
pub fn temp_file(tag: &str, contents: &[u8]) -> std::io::Result<TempFile> {
    use std::io::Write;
    let dir = std::env::var("TMPDIR")
        .ok()
        .filter(|d| !d.is_empty())
        .unwrap_or_else(|| "/tmp".into());
    let stamp = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos())
        .unwrap_or(0);
    for n in 0u32.. {
        let path =
            std::path::PathBuf::from(format!("{}/{tag}-{stamp:x}-{n}", dir.trim_end_matches('/')));
        match std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .open(&path)
        {
            Ok(mut f) => {
                let file = TempFile(path);
                f.write_all(contents)?;
                return Ok(file);
            }
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => continue,
            Err(e) => return Err(e),
        }
    }
    Err(std::io::ErrorKind::AlreadyExists.into())
}

/// Days since 1970-01-01 to (year, month, day) in the proleptic Gregorian calendar (the
/// guests format dates themselves: WASI gives seconds, and the sandbox's zone is UTC).
pub fn civil_from_days(days: i64) -> (i64, u32, u32) {
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let m = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    (yoe + era * 400 + i64::from(m <= 2), m, d)
}

/// Days since 1970-01-01 of a proleptic Gregorian date (month 1-12): the inverse of
/// [`civil_from_days`].
pub fn days_from_civil(y: i64, m: u32, d: u32) -> i64 {
    let y = if m <= 2 { y - 1 } else { y };
    let era = y.div_euclid(400);
    let yoe = y.rem_euclid(400);
    let mp = (i64::from(m) + 9) % 12;
    let doy = (153 * mp + 2) / 5 + i64::from(d) - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

/// `stat()` (or `lstat()` without `follow`) through wasi-libc: std's WASI `MetadataExt` is
/// unstable, so this is where inode, device, link count and ctime come from.
#[cfg(target_os = "wasi")]
pub fn wasi_stat(path: &[u8], follow: bool) -> std::io::Result<libc::stat> {
    let c = std::ffi::CString::new(path)
        .map_err(|_| std::io::Error::from(std::io::ErrorKind::InvalidInput))?;
    // SAFETY: `st` is plain data that stat() fills in; `c` outlives the call.
    let mut st: libc::stat = unsafe { std::mem::zeroed() };
    let rc = unsafe {
        if follow {
            libc::stat(c.as_ptr(), &mut st)
        } else {
            libc::lstat(c.as_ptr(), &mut st)
        }
    };
    if rc != 0 {
        return Err(std::io::Error::last_os_error());
    }
    Ok(st)
}

/// Permission bits (`0o7777` at most) and link count of `path` as the sandbox's filesystem
/// holds them, or `None` where the host cannot say (the path is gone, or the program runs
/// outside wasmsand's host). WASI has no mode in its `filestat`, so wasi-libc's `st_mode` and
/// std's `Permissions` make bits up, and wasix counts every directory's links as 1; the host's
/// `wasmsand.path_meta` import knows the real ones.
#[cfg(target_os = "wasi")]
pub fn path_meta(path: &std::path::Path, follow: bool) -> Option<(u32, u64)> {
    #[link(wasm_import_module = "wasmsand")]
    unsafe extern "C" {
        #[link_name = "path_meta"]
        fn host_path_meta(ptr: *const u8, len: usize, follow: i32) -> i64;
    }
    use std::os::wasi::ffi::OsStrExt;
    let abs = if path.is_absolute() {
        path.to_path_buf()
    } else {
        std::env::current_dir().ok()?.join(path)
    };
    let bytes = abs.as_os_str().as_bytes();
    // SAFETY: the host reads `len` bytes at `ptr`, which `bytes` keeps alive for the call.
    let rc = unsafe { host_path_meta(bytes.as_ptr(), bytes.len(), i32::from(follow)) };
    (rc >= 0).then_some(((rc & 0o7777) as u32, (rc >> 16) as u64))
}

/// Outside WASI the operating system's own modes are right.
#[cfg(unix)]
pub fn path_meta(path: &std::path::Path, follow: bool) -> Option<(u32, u64)> {
    use std::os::unix::fs::MetadataExt;
    let m = if follow {
        std::fs::metadata(path)
    } else {
        std::fs::symlink_metadata(path)
    };
    m.ok().map(|m| (m.mode() & 0o7777, m.nlink()))
}

#[cfg(not(any(unix, target_os = "wasi")))]
pub fn path_meta(_path: &std::path::Path, _follow: bool) -> Option<(u32, u64)> {
    None
}

/// Sets the permission bits of `path` (following a final symlink, as `chmod(2)`) in the
/// sandbox's filesystem through the host's `wasmsand.path_set_mode` import: WASI has no call
/// for it and std's `set_permissions` fails there.
#[cfg(target_os = "wasi")]
pub fn set_mode(path: &std::path::Path, mode: u32) -> std::io::Result<()> {
    #[link(wasm_import_module = "wasmsand")]
    unsafe extern "C" {
        #[link_name = "path_set_mode"]
        fn host_path_set_mode(ptr: *const u8, len: usize, mode: i32) -> i32;
    }
    use std::os::wasi::ffi::OsStrExt;
    let abs = if path.is_absolute() {
        path.to_path_buf()
    } else {
        std::env::current_dir()?.join(path)
    };
    let bytes = abs.as_os_str().as_bytes();
    // SAFETY: the host reads `len` bytes at `ptr`, which `bytes` keeps alive for the call.
    let rc = unsafe { host_path_set_mode(bytes.as_ptr(), bytes.len(), (mode & 0o7777) as i32) };
    use std::io::ErrorKind as K;
    // The host answers in Linux's numbering, which is not WASI's (what a raw OS error means
    // here), so the common ones become kinds with Linux's words.
    let (kind, text) = match -rc {
        0 => return Ok(()),
        1 => (K::PermissionDenied, "Operation not permitted"),
        2 => (K::NotFound, "No such file or directory"),
        13 => (K::PermissionDenied, "Permission denied"),
        20 => (K::NotADirectory, "Not a directory"),
        30 => (K::ReadOnlyFilesystem, "Read-only file system"),
        36 => (K::InvalidFilename, "File name too long"),
        _ => (K::Other, "Input/output error"),
    };
    Err(std::io::Error::new(kind, text))
}

/// Outside WASI the operating system sets modes.
#[cfg(unix)]
pub fn set_mode(path: &std::path::Path, mode: u32) -> std::io::Result<()> {
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode & 0o7777))
}

#[cfg(not(any(unix, target_os = "wasi")))]
pub fn set_mode(_path: &std::path::Path, _mode: u32) -> std::io::Result<()> {
    Err(std::io::ErrorKind::Unsupported.into())
}

/// Sets the access and modification times of `path` (a final symlink followed) by its path:
/// through an open descriptor wasix keeps the times to itself, while `utimensat` reaches the
/// sandbox's filesystem.
#[cfg(target_os = "wasi")]
pub fn set_times(
    path: &std::path::Path,
    accessed: std::time::SystemTime,
    modified: std::time::SystemTime,
) -> std::io::Result<()> {
    use std::os::wasi::ffi::OsStrExt;
    let spec = |t: std::time::SystemTime| {
        let d = t.duration_since(std::time::UNIX_EPOCH).unwrap_or_default();
        libc::timespec {
            tv_sec: d.as_secs() as libc::time_t,
            tv_nsec: d.subsec_nanos() as _,
        }
    };
    let c = std::ffi::CString::new(path.as_os_str().as_bytes())
        .map_err(|_| std::io::Error::from(std::io::ErrorKind::InvalidInput))?;
    let times = [spec(accessed), spec(modified)];
    // SAFETY: `c` and `times` outlive the call, which only reads them.
    let rc = unsafe { libc::utimensat(libc::AT_FDCWD, c.as_ptr(), times.as_ptr(), 0) };
    if rc != 0 {
        return Err(std::io::Error::last_os_error());
    }
    Ok(())
}

/// Outside WASI an open descriptor's times are the file's.
#[cfg(not(target_os = "wasi"))]
pub fn set_times(
    path: &std::path::Path,
    accessed: std::time::SystemTime,
    modified: std::time::SystemTime,
) -> std::io::Result<()> {
    let times = std::fs::FileTimes::new()
        .set_accessed(accessed)
        .set_modified(modified);
    std::fs::File::open(path)?.set_times(times)
}

/// The identity of what `path` names, `(st_dev, st_ino)`, following a final symlink with
/// `follow`: equal for two names of one file (hard links), and for one file reached by
/// different paths. `None` when it cannot be known (the path is gone, or the runtime reports
/// inode 0 for everything, which would make unrelated files look the same).
#[cfg(target_os = "wasi")]
pub fn file_id(path: &std::path::Path, follow: bool) -> Option<(u64, u64)> {
    use std::os::wasi::ffi::OsStrExt;
    let st = wasi_stat(path.as_os_str().as_bytes(), follow).ok()?;
    (st.st_ino != 0).then_some((st.st_dev as u64, st.st_ino as u64))
}

/// The identity of what `path` names (see the WASI version).
#[cfg(unix)]
pub fn file_id(path: &std::path::Path, follow: bool) -> Option<(u64, u64)> {
    use std::os::unix::fs::MetadataExt;
    let m = if follow {
        std::fs::metadata(path)
    } else {
        std::fs::symlink_metadata(path)
    };
    m.ok().map(|m| (m.dev(), m.ino()))
}

#[cfg(not(any(unix, target_os = "wasi")))]
pub fn file_id(_path: &std::path::Path, _follow: bool) -> Option<(u64, u64)> {
    None
}

/// The permission bits of [`path_meta`].
pub fn path_mode(path: &std::path::Path, follow: bool) -> Option<u32> {
    path_meta(path, follow).map(|(mode, _)| mode)
}

/// Creates a symbolic link `at` → `target` (std's WASI `symlink_path` is unstable; wasi-libc's
/// `symlink` is the same call).
#[cfg(target_os = "wasi")]
pub fn symlink(target: &str, at: &std::path::Path) -> std::io::Result<()> {
    use std::os::wasi::ffi::OsStrExt;
    let t = std::ffi::CString::new(target)
        .map_err(|_| std::io::Error::from(std::io::ErrorKind::InvalidInput))?;
    let a = std::ffi::CString::new(at.as_os_str().as_bytes())
        .map_err(|_| std::io::Error::from(std::io::ErrorKind::InvalidInput))?;
    // SAFETY: both strings are NUL-terminated and outlive the call.
    if unsafe { libc::symlink(t.as_ptr(), a.as_ptr()) } != 0 {
        return Err(std::io::Error::last_os_error());
    }
    Ok(())
}

/// Creates a symbolic link `at` → `target`.
#[cfg(unix)]
pub fn symlink(target: &str, at: &std::path::Path) -> std::io::Result<()> {
    std::os::unix::fs::symlink(target, at)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn civil_dates() {
        assert_eq!(civil_from_days(0), (1970, 1, 1));
        assert_eq!(civil_from_days(19_723), (2024, 1, 1));
        assert_eq!(civil_from_days(-1), (1969, 12, 31));
        assert_eq!(civil_from_days(11_016), (2000, 2, 29));
    }

    #[test]
    fn tool_names() {
        assert_eq!(tool_name("/bin/ls".as_ref()), "ls");
        assert_eq!(tool_name("coreutils.wasm".as_ref()), "coreutils");
    }
}
