//! The `wasmsand.path_meta` import: what WASI's `filestat` cannot express about a path, its
//! permission bits and (for directories) its link count; and `wasmsand.path_set_mode`, which
//! sets the bits.
//!
//! WASI's `filestat` has a file type but no mode, so wasi-libc makes `st_mode` up and every
//! guest would show `r-xr-xr-x` whatever `chmod` set; its link count comes through wasix as 1
//! for directories. The guests this project builds (`stat`, `ls`, `find -perm`) ask the host
//! through this import instead.
//!
//! Guest side: `wasmsand.path_meta(path_ptr, path_len, follow) -> i64`. The path is UTF-8
//! bytes, absolute (the guest joins a relative one to its working directory; a relative path is
//! taken from the run's directory). `follow` non-zero follows a final symlink (`stat`), zero
//! does not (`lstat`). The answer is `nlink << 16 | mode` with the permission bits in `mode`
//! (`0o7777` at most), or a negative Linux errno (`-2` for a missing path).

use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use wasmer::{
    AsStoreMut, Extern, Function, FunctionEnv, FunctionEnvMut, Imports, MemoryView, Module,
    RuntimeError, Value,
};
use wasmer_wasix::types::wasi::Errno as WasiErrno;

use crate::bind::Late;
use crate::guard::{LateMemory, ROOT_FDS, RunGuard};
use crate::wasi::file::wasi_errno;

/// Longest path the import reads (Linux's `PATH_MAX`).
const MAX_PATH: u32 = 4096;

const EFAULT: i32 = 14;
const ENAMETOOLONG: i32 = 36;
const EILSEQ: i32 = 84;

pub(crate) struct ModeEnv {
    run: Late,
    memory: LateMemory,
}

/// Defines `wasmsand.path_meta` and `wasmsand.path_set_mode` in `imports` when the module
/// imports them.
pub(crate) fn define(
    store: &mut impl AsStoreMut,
    module: &Module,
    imports: &mut Imports,
    run: &Late,
    memory: &LateMemory,
) {
    let wants = |name: &str| {
        module
            .imports()
            .any(|i| i.module() == "wasmsand" && i.name() == name)
    };
    let (meta, set_mode) = (wants("path_meta"), wants("path_set_mode"));
    if !meta && !set_mode {
        return;
    }
    let env = FunctionEnv::new(
        store,
        ModeEnv {
            run: run.clone(),
            memory: memory.clone(),
        },
    );
    if meta {
        let f = Function::new_typed_with_env(store, &env, path_meta);
        imports.define("wasmsand", "path_meta", f);
    }
    if set_mode {
        let f = Function::new_typed_with_env(store, &env, path_set_mode);
        imports.define("wasmsand", "path_set_mode", f);
    }
}

/// The absolute path a guest passed, or the negative errno to answer with.
fn guest_path(env: &FunctionEnvMut<ModeEnv>, ptr: i32, len: i32) -> Result<String, i32> {
    let data = env.data();
    let len = len as u32;
    if len > MAX_PATH {
        return Err(-ENAMETOOLONG);
    }
    let Some(memory) = data.memory.get() else {
        return Err(-EFAULT);
    };
    let mut raw = vec![0u8; len as usize];
    if memory
        .view(env)
        .read(u64::from(ptr as u32), &mut raw)
        .is_err()
    {
        return Err(-EFAULT);
    }
    let Ok(path) = String::from_utf8(raw) else {
        return Err(-EILSEQ);
    };
    Ok(if path.starts_with('/') {
        path
    } else {
        let run = data.run.get();
        let cwd = run.as_ref().map_or("/", |b| b.cwd.as_str());
        format!("{}/{path}", cwd.trim_end_matches('/'))
    })
}

/// `wasmsand.path_set_mode(path_ptr, path_len, mode) -> i32`: `chmod(2)` (a final symlink is
/// followed) with the permission bits in `mode`; 0, or a negative Linux errno. WASI has no call
/// for it, so `cp -p` and the mode a plain `cp` gives a new file come through here.
fn path_set_mode(env: FunctionEnvMut<ModeEnv>, ptr: i32, len: i32, mode: i32) -> i32 {
    let path = match guest_path(&env, ptr, len) {
        Ok(p) => p,
        Err(code) => return code,
    };
    match env
        .data()
        .run
        .vfs()
        .lock()
        .chmod(&path, mode as u32 & 0o7777)
    {
        Ok(()) => 0,
        Err(e) => -e.errno.code(),
    }
}

fn path_meta(env: FunctionEnvMut<ModeEnv>, ptr: i32, len: i32, follow: i32) -> i64 {
    let path = match guest_path(&env, ptr, len) {
        Ok(p) => p,
        Err(code) => return i64::from(code),
    };
    let tree = env.data().run.vfs();
    let vfs = tree.lock();
    let meta = if follow != 0 {
        vfs.stat(&path)
    } else {
        vfs.lstat(&path)
    };
    match meta {
        Ok(m) => (m.nlink.min(1 << 40) as i64) << 16 | i64::from(m.mode & 0o7777),
        Err(e) => -i64::from(e.errno.code()),
    }
}

/// Replaces wasix's `path_filestat_set_times` for paths under the preopened root, which is
/// every path wasi-libc resolves (`utimensat`, so `touch -d`, `touch -r`, Python's
/// `os.utime`): wasix stores the new times in its cached stat of the *directory* descriptor and
/// never reaches the filesystem, so the file's times did not change. Other descriptors keep
/// wasix's call.
pub(crate) fn define_set_times(
    store: &mut impl AsStoreMut,
    module: &Module,
    imports: &mut Imports,
    run: &Late,
    memory: &LateMemory,
    guard: &Arc<RunGuard>,
) {
    for ns in ["wasi_snapshot_preview1", "wasi_unstable"] {
        let wanted = module
            .imports()
            .any(|i| i.module() == ns && i.name() == "path_filestat_set_times");
        let original = match imports.get_export(ns, "path_filestat_set_times") {
            Some(Extern::Function(f)) if wanted => f,
            _ => continue,
        };
        let env = FunctionEnv::new(
            store,
            TimesEnv {
                run: run.clone(),
                memory: memory.clone(),
                original,
                guard: guard.clone(),
            },
        );
        let f = Function::new_typed_with_env(store, &env, set_times);
        imports.define(ns, "path_filestat_set_times", f);
    }
}

pub(crate) struct TimesEnv {
    run: Late,
    memory: LateMemory,
    original: Function,
    guard: Arc<RunGuard>,
}

const SET_ATIM: i32 = 1;
const SET_ATIM_NOW: i32 = 2;
const SET_MTIM: i32 = 4;
const SET_MTIM_NOW: i32 = 8;

#[allow(clippy::too_many_arguments)]
fn set_times(
    mut env: FunctionEnvMut<TimesEnv>,
    fd: i32,
    flags: i32,
    ptr: i32,
    len: i32,
    atim: i64,
    mtim: i64,
    fst: i32,
) -> Result<i32, RuntimeError> {
    let (data, mut store) = env.data_and_store_mut();
    let errno = |e: WasiErrno| Ok(e as i32);
    let memory = match data.memory.get() {
        Some(m) if ROOT_FDS.contains(&fd) => m.clone(),
        _ => {
            let original = data.original.clone();
            let args = [fd, flags, ptr, len].map(Value::I32);
            let args = [
                &args[..],
                &[Value::I64(atim), Value::I64(mtim), Value::I32(fst)],
            ]
            .concat();
            let out = data
                .guard
                .clone()
                .nested(|| original.call(&mut store, &args))?;
            return Ok(out.first().and_then(Value::i32).unwrap_or(0));
        }
    };
    if (fst & SET_ATIM != 0 && fst & SET_ATIM_NOW != 0)
        || (fst & SET_MTIM != 0 && fst & SET_MTIM_NOW != 0)
    {
        return errno(WasiErrno::Inval);
    }
    let path = match root_path(&memory.view(&store), ptr, len) {
        Ok(p) => p,
        Err(e) => return errno(e),
    };
    let now = SystemTime::now();
    let pick = |set: i32, now_flag: i32, nanos: i64| {
        if fst & set != 0 {
            Some(UNIX_EPOCH + Duration::from_nanos(nanos as u64))
        } else if fst & now_flag != 0 {
            Some(now)
        } else {
            None
        }
    };
    let atime = pick(SET_ATIM, SET_ATIM_NOW, atim);
    let mtime = pick(SET_MTIM, SET_MTIM_NOW, mtim);
    match data.run.vfs().lock().set_times(&path, atime, mtime) {
        Ok(()) => errno(WasiErrno::Success),
        Err(e) => errno(wasi_errno(e.errno)),
    }
}

/// The sandbox path a guest's path relative to the root descriptors names (`..` above `/`
/// stays at it, as the VFS resolves), read from guest memory.
pub(crate) fn root_path(view: &MemoryView<'_>, ptr: i32, len: i32) -> Result<String, WasiErrno> {
    let len = len as u32;
    if len > MAX_PATH {
        return Err(WasiErrno::Nametoolong);
    }
    let mut raw = vec![0u8; len as usize];
    view.read(u64::from(ptr as u32), &mut raw)
        .map_err(|_| WasiErrno::Fault)?;
    let rel = String::from_utf8(raw).map_err(|_| WasiErrno::Ilseq)?;
    Ok(format!("/{}", rel.trim_start_matches('/')))
}
