//! `path_remove_directory` and `path_rename` where wasix's inode cache gets them wrong, and
//! `path_symlink` where wasix panics.
//!
//! wasix 0.704 keeps a cache of the directory entries a guest has looked up, and two calls
//! consult only that cache for their last step:
//!
//! - `path_remove_directory` looks the child up in its parent's cached entries and answers
//!   ENOENT when it is not there, so `rmdir DIR` failed unless the program had looked at DIR
//!   first (`rm -r` and `find -delete` read the directory before removing it and worked).
//!   The call is preceded by a `path_filestat_get` of the same path (not following a final
//!   symlink), which brings the entry into the cache; a symlink is refused with ENOTDIR, as
//!   Linux does, where wasix would say ENOENT.
//! - `path_rename` resolves its source following symlinks, so a dangling symlink cannot be
//!   renamed (ENOENT), and `mv link elsewhere` failed. When the source is a symlink and wasix
//!   answered ENOENT, the rename is done as what it means for a symlink: the link's text is read,
//!   a symlink with that text is made at the target (replacing a non-directory there, as
//!   rename does) and the source is removed.
//! - `path_symlink` under a parent that is a file (or a symlink to one) reaches an
//!   `unreachable!` in wasix; the parent is looked up first and ENOTDIR answered, as Linux does.
//!
//! All go through wasix's own imports, so its cache stays consistent with the tree. They need
//! guest memory for the answers (a `filestat`, a link's text): a scratch area next to the path
//! strings is saved, used and put back within the one host call. The guest cannot observe it
//! while it waits in the call; a module with shared memory (threads) could, so for it nothing
//! here runs and wasix's behaviour stands.

use wasmer::{Function, Imports, Memory, MemoryView, RuntimeError, StoreMut, Value};
use wasmer_wasix::types::wasi::Errno as WasiErrno;

use crate::guard::RunGuard;

/// Size of a WASI `filestat`, and where its file type and inode number are.
const FILESTAT: u64 = 64;
const FILESTAT_INO: u64 = 8;
const FILESTAT_TYPE: u64 = 16;
const FILETYPE_DIRECTORY: u8 = 3;
const FILETYPE_SYMLINK: u8 = 7;
/// Longest link text read (Linux's `PATH_MAX`).
const LINK_MAX: u64 = 4096;

/// wasix's own implementations of the calls the fixes are made of.
#[derive(Clone, Default)]
pub(crate) struct Siblings {
    filestat: Option<Function>,
    readlink: Option<Function>,
    unlink: Option<Function>,
    symlink: Option<Function>,
}

impl Siblings {
    /// Takes them from `imports` before any of them is wrapped.
    pub(crate) fn from_imports(imports: &Imports) -> Self {
        let get = |name: &str| match imports.get_export("wasi_snapshot_preview1", name) {
            Some(wasmer::Extern::Function(f)) => Some(f),
            _ => None,
        };
        Siblings {
            filestat: get("path_filestat_get"),
            readlink: get("path_readlink"),
            unlink: get("path_unlink_file"),
            symlink: get("path_symlink"),
        }
    }
}

/// What one call needs: the store, the guest's memory and the guard for calls into wasix.
pub(crate) struct Call<'a, 'b> {
    pub store: &'a mut StoreMut<'b>,
    pub memory: &'a Memory,
    pub guard: &'a RunGuard,
    pub siblings: &'a Siblings,
}

impl Call<'_, '_> {
    fn call(&mut self, f: &Option<Function>, args: &[Value]) -> Result<i32, RuntimeError> {
        let Some(f) = f else {
            return Ok(WasiErrno::Nosys as i32);
        };
        let out = self.guard.nested(|| f.call(&mut *self.store, args))?;
        Ok(match out.first() {
            Some(Value::I32(code)) => *code,
            _ => WasiErrno::Io as i32,
        })
    }

    fn view(&self) -> MemoryView<'_> {
        self.memory.view(&*self.store)
    }

    fn shared(&self) -> bool {
        self.memory.ty(&*self.store).shared
    }

    /// Saves `size` bytes of guest memory away from the `avoid` ranges, runs `body` with
    /// their address and puts them back. `None` when no such area fits or memory is shared.
    fn with_scratch<T>(
        &mut self,
        avoid: &[(u64, u64)],
        size: u64,
        body: impl FnOnce(&mut Self, u64) -> Result<T, RuntimeError>,
    ) -> Option<Result<T, RuntimeError>> {
        if self.shared() {
            return None;
        }
        let total = self.view().data_size();
        let end = avoid.iter().map(|(at, len)| at + len).max().unwrap_or(0);
        let start = avoid.iter().map(|(at, _)| *at).min().unwrap_or(0);
        let after = end.div_ceil(8) * 8;
        let at = if after + size <= total {
            after
        } else if start >= size + 8 {
            (start - size) & !7
        } else {
            return None;
        };
        let mut saved = vec![0u8; size as usize];
        self.view().read(at, &mut saved).ok()?;
        let result = body(self, at);
        let _ = self.view().write(at, &saved);
        Some(result)
    }

    /// `(file type, inode)` of a path without following a final symlink, into `buf`.
    fn lstat(
        &mut self,
        fd: i32,
        ptr: i32,
        len: i32,
        buf: u64,
    ) -> Result<Option<(u8, u64)>, RuntimeError> {
        self.stat_with(fd, 0, ptr, len, buf)
    }

    /// As `lstat`, with wasix's lookup flags (1: follow a final symlink).
    fn stat_with(
        &mut self,
        fd: i32,
        flags: i32,
        ptr: i32,
        len: i32,
        buf: u64,
    ) -> Result<Option<(u8, u64)>, RuntimeError> {
        let f = self.siblings.filestat.clone();
        let code = self.call(
            &f,
            &[
                Value::I32(fd),
                Value::I32(flags),
                Value::I32(ptr),
                Value::I32(len),
                Value::I32(buf as i32),
            ],
        )?;
        if code != 0 {
            return Ok(None);
        }
        let mut kind = [0u8; 1];
        let mut ino = [0u8; 8];
        let view = self.view();
        if view.read(buf + FILESTAT_TYPE, &mut kind).is_err()
            || view.read(buf + FILESTAT_INO, &mut ino).is_err()
        {
            return Ok(None);
        }
        Ok(Some((kind[0], u64::from_le_bytes(ino))))
    }
}

/// Brings the entry `path_remove_directory` is about to remove into wasix's cache. Answers
/// ENOTDIR itself for a symlink, which wasix's cache walk reports as missing.
pub(crate) fn before_remove_directory(
    call: &mut Call,
    args: &[Value],
) -> Result<Option<i32>, RuntimeError> {
    let (Some(Value::I32(fd)), Some(Value::I32(ptr)), Some(Value::I32(len))) =
        (args.first(), args.get(1), args.get(2))
    else {
        return Ok(None);
    };
    let (fd, ptr, len) = (*fd, *ptr, *len);
    let range = (u64::from(ptr as u32), u64::from(len as u32));
    let found = call.with_scratch(&[range], FILESTAT, |call, buf| {
        call.lstat(fd, ptr, len, buf)
    });
    Ok(match found.transpose()?.flatten() {
        Some((FILETYPE_SYMLINK, _)) => Some(WasiErrno::Notdir as i32),
        _ => None,
    })
}

/// Before `path_symlink`: ENOTDIR when the new link's parent is not a directory (a file, or
/// a symlink to one), as Linux answers. wasix 0.704 reaches an `unreachable!` there and
/// panics. `None`: the call goes on to wasix.
pub(crate) fn before_symlink(call: &mut Call, args: &[Value]) -> Result<Option<i32>, RuntimeError> {
    let [
        Value::I32(old_ptr),
        Value::I32(old_len),
        Value::I32(fd),
        Value::I32(new_ptr),
        Value::I32(new_len),
    ] = *args
    else {
        return Ok(None);
    };
    let mut path = vec![0u8; new_len.max(0) as usize];
    if call
        .view()
        .read(u64::from(new_ptr as u32), &mut path)
        .is_err()
    {
        return Ok(None);
    }
    let trimmed = path.len() - path.iter().rev().take_while(|&&c| c == b'/').count();
    // The parent is the text before the last `/` (the directory `fd` itself when there is
    // none, and `/` when it is the first byte: both directories).
    let Some(parent_len) = path[..trimmed].iter().rposition(|&c| c == b'/') else {
        return Ok(None);
    };
    if parent_len == 0 {
        return Ok(None);
    }
    let ranges = [
        (u64::from(old_ptr as u32), u64::from(old_len as u32)),
        (u64::from(new_ptr as u32), u64::from(new_len as u32)),
    ];
    let parent = call.with_scratch(&ranges, FILESTAT, |call, buf| {
        call.stat_with(fd, 1, new_ptr, parent_len as i32, buf)
    });
    Ok(match parent.transpose()?.flatten() {
        Some((kind, _)) if kind != FILETYPE_DIRECTORY => Some(WasiErrno::Notdir as i32),
        _ => None,
    })
}

/// After wasix answered `path_rename` with ENOENT: renames the source when it is a symlink,
/// and returns the errno to answer with (`None`: keep wasix's).
pub(crate) fn rename_symlink(call: &mut Call, args: &[Value]) -> Result<Option<i32>, RuntimeError> {
    let [
        Value::I32(old_fd),
        Value::I32(old_ptr),
        Value::I32(old_len),
        Value::I32(new_fd),
        Value::I32(new_ptr),
        Value::I32(new_len),
    ] = *args
    else {
        return Ok(None);
    };
    let ranges = [
        (u64::from(old_ptr as u32), u64::from(old_len as u32)),
        (u64::from(new_ptr as u32), u64::from(new_len as u32)),
    ];
    let size = FILESTAT + LINK_MAX + 8;
    let done = call.with_scratch(&ranges, size, |call, at| {
        let Some((FILETYPE_SYMLINK, source_ino)) = call.lstat(old_fd, old_ptr, old_len, at)? else {
            return Ok(None);
        };
        let text = at + FILESTAT;
        let used = text + LINK_MAX;
        let f = call.siblings.readlink.clone();
        let code = call.call(
            &f,
            &[
                Value::I32(old_fd),
                Value::I32(old_ptr),
                Value::I32(old_len),
                Value::I32(text as i32),
                Value::I32(LINK_MAX as i32),
                Value::I32(used as i32),
            ],
        )?;
        if code != 0 {
            return Ok(Some(code));
        }
        let mut n = [0u8; 4];
        if call.view().read(used, &mut n).is_err() {
            return Ok(Some(WasiErrno::Fault as i32));
        }
        let n = u32::from_le_bytes(n);
        match call.lstat(new_fd, new_ptr, new_len, at)? {
            // Renaming a link onto itself (under another spelling) changes nothing.
            Some((_, ino)) if ino != 0 && ino == source_ino => return Ok(Some(0)),
            Some((FILETYPE_DIRECTORY, _)) => return Ok(Some(WasiErrno::Isdir as i32)),
            Some(_) => {
                let f = call.siblings.unlink.clone();
                let code = call.call(
                    &f,
                    &[Value::I32(new_fd), Value::I32(new_ptr), Value::I32(new_len)],
                )?;
                if code != 0 {
                    return Ok(Some(code));
                }
            }
            None => {}
        }
        let f = call.siblings.symlink.clone();
        let code = call.call(
            &f,
            &[
                Value::I32(text as i32),
                Value::I32(n as i32),
                Value::I32(new_fd),
                Value::I32(new_ptr),
                Value::I32(new_len),
            ],
        )?;
        if code != 0 {
            return Ok(Some(code));
        }
        let f = call.siblings.unlink.clone();
        call.call(
            &f,
            &[Value::I32(old_fd), Value::I32(old_ptr), Value::I32(old_len)],
        )
        .map(Some)
    });
    done.unwrap_or(Ok(None))
}
