//! Hard links through the sandbox's filesystem, and stat answers that show them.
//!
//! - `path_link`: wasix "links" in its own inode cache only (`virtual_fs` has no call for it),
//!   so a link seemed made and no second name ever reached the tree. For paths under the root
//!   descriptors (every path wasi-libc resolves) the call is [`Vfs::link`]; other descriptors
//!   are refused with ENOTSUP rather than faked.
//! - `path_filestat_get`: wasix numbers inodes by a hash of the path and counts every node's
//!   links as 1, so two names of one file looked like two files (`cp -a`, `tar`, `du` and
//!   `test -ef` decide by `(st_dev, st_ino)` and `st_nlink`). After wasix answers, the link
//!   count is the tree's, and for a node with more than one name the inode number is the
//!   tree's, which its names share. Other nodes keep wasix's number so that it matches what
//!   `fd_filestat_get` reports for an open descriptor.
//!
//! [`Vfs::link`]: wasmsand_vfs::Vfs::link

use std::sync::Arc;

use wasmer::{
    AsStoreMut, Extern, Function, FunctionEnv, FunctionEnvMut, Imports, Module, RuntimeError, Value,
};
use wasmer_wasix::types::wasi::Errno as WasiErrno;

use crate::bind::Late;
use crate::guard::{LateMemory, ROOT_FDS, RunGuard};
use crate::wasi::file::wasi_errno;

/// `lookupflags.symlink_follow`.
const SYMLINK_FOLLOW: i32 = 1;
/// Where preview1's `filestat` keeps the inode number and the link count.
const FILESTAT_INO: u64 = 8;
const FILESTAT_NLINK: u64 = 24;
/// Only preview1's layout is patched; preview0 has a narrower `filestat`.
const NS: &str = "wasi_snapshot_preview1";

pub(crate) struct LinkEnv {
    run: Late,
    memory: LateMemory,
    /// wasix's `path_filestat_get` (as the runner already wrapped it).
    filestat: Option<Function>,
    guard: Arc<RunGuard>,
}

/// Replaces `path_link` and wraps `path_filestat_get` when the module imports them.
pub(crate) fn define(
    store: &mut impl AsStoreMut,
    module: &Module,
    imports: &mut Imports,
    run: &Late,
    memory: &LateMemory,
    guard: &Arc<RunGuard>,
) {
    let wants = |name: &str| {
        module
            .imports()
            .any(|i| i.module() == NS && i.name() == name)
    };
    let (link, stat) = (wants("path_link"), wants("path_filestat_get"));
    if !link && !stat {
        return;
    }
    let filestat = match imports.get_export(NS, "path_filestat_get") {
        Some(Extern::Function(f)) if stat => Some(f),
        _ => None,
    };
    let wrap_stat = filestat.is_some();
    let env = FunctionEnv::new(
        store,
        LinkEnv {
            run: run.clone(),
            memory: memory.clone(),
            filestat,
            guard: guard.clone(),
        },
    );
    if link {
        let f = Function::new_typed_with_env(store, &env, path_link);
        imports.define(NS, "path_link", f);
    }
    if wrap_stat {
        let f = Function::new_typed_with_env(store, &env, path_filestat_get);
        imports.define(NS, "path_filestat_get", f);
    }
}

/// The sandbox path a root-descriptor-relative guest path names.
fn read_path(env: &FunctionEnvMut<LinkEnv>, ptr: i32, len: i32) -> Result<String, WasiErrno> {
    let memory = env.data().memory.get().ok_or(WasiErrno::Fault)?;
    crate::wasi::modes::root_path(&memory.view(env), ptr, len)
}

#[allow(clippy::too_many_arguments)]
fn path_link(
    env: FunctionEnvMut<LinkEnv>,
    old_fd: i32,
    old_flags: i32,
    old_ptr: i32,
    old_len: i32,
    new_fd: i32,
    new_ptr: i32,
    new_len: i32,
) -> i32 {
    if !ROOT_FDS.contains(&old_fd) || !ROOT_FDS.contains(&new_fd) {
        return WasiErrno::Notsup as i32;
    }
    let paths = read_path(&env, old_ptr, old_len)
        .and_then(|old| Ok((old, read_path(&env, new_ptr, new_len)?)));
    let (old, new) = match paths {
        Ok(p) => p,
        Err(e) => return e as i32,
    };
    let follow = old_flags & SYMLINK_FOLLOW != 0;
    match env.data().run.vfs().lock().link(&old, &new, follow) {
        Ok(()) => WasiErrno::Success as i32,
        Err(e) => wasi_errno(e.errno) as i32,
    }
}

fn path_filestat_get(
    mut env: FunctionEnvMut<LinkEnv>,
    fd: i32,
    flags: i32,
    ptr: i32,
    len: i32,
    buf: i32,
) -> Result<i32, RuntimeError> {
    let (data, mut store) = env.data_and_store_mut();
    let Some(original) = data.filestat.clone() else {
        return Ok(WasiErrno::Nosys as i32);
    };
    let args = [fd, flags, ptr, len, buf].map(Value::I32);
    let out = data
        .guard
        .clone()
        .nested(|| original.call(&mut store, &args))?;
    let code = out
        .first()
        .and_then(Value::i32)
        .unwrap_or(WasiErrno::Io as i32);
    if code != 0 || !ROOT_FDS.contains(&fd) {
        return Ok(code);
    }
    let Ok(path) = read_path(&env, ptr, len) else {
        return Ok(code);
    };
    let data = env.data();
    let meta = {
        let tree = data.run.vfs();
        let vfs = tree.lock();
        if flags & SYMLINK_FOLLOW != 0 {
            vfs.stat(&path)
        } else {
            vfs.lstat(&path)
        }
    };
    let (Ok(meta), Some(memory)) = (meta, data.memory.get()) else {
        return Ok(code);
    };
    let view = memory.view(&env);
    let at = u64::from(buf as u32);
    let _ = view.write(at + FILESTAT_NLINK, &meta.nlink.to_le_bytes());
    if meta.nlink > 1 && !meta.is_dir() {
        let _ = view.write(at + FILESTAT_INO, &meta.ino.to_le_bytes());
    }
    Ok(code)
}
