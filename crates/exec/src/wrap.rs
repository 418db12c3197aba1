//! The WASI calls the runner wraps: a precise errno put back where wasix's mapping lost it,
//! paths that climb above `/` clamped at it, the standard streams never reported as a terminal,
//! zero-timeout clocks, the directory and rename cases wasix's inode cache gets wrong
//! (`wasi/paths.rs`), and the run's descriptor account (`wasi/fds.rs`).

use std::sync::Arc;

use wasmer::{
    AsStoreMut, Extern, Function, FunctionEnv, FunctionEnvMut, Imports, Memory, RuntimeError, Value,
};
use wasmer_wasix::types::wasi::{Errno as WasiErrno, Filetype as WasiFiletype};

use crate::bind::Late;
use crate::guard::{LateMemory, ROOT_FDS, RunGuard};
use crate::wasi::fds::FdTracker;
use crate::wasi::file::ErrnoSlot;
use crate::wasi::paths::{self, Call, Siblings};

/// How a wrapped WASI call is adjusted.
#[derive(Clone, Copy)]
enum Fix {
    /// Put the precise errno of a filesystem failure back into the result.
    Errno,
    /// As `Errno`, and a path argument (dirfd, pointer, length at these argument indexes)
    /// that climbs above `/` from the root preopen is clamped at `/` first.
    PathAt(usize, usize, usize),
    /// Report the standard streams as what they are (pipes or buffers), never as a terminal.
    Fdstat,
    /// Make zero-timeout clocks return at once (see `wasi/poll.rs`).
    ZeroClock,
    /// As `PathAt`, and the entry is brought into wasix's cache first (`wasi/paths.rs`).
    RemoveDirectory,
    /// As `Errno`, and a symlink source wasix could not resolve is renamed (`wasi/paths.rs`).
    Rename,
    /// As `Errno`, and a link whose parent is not a directory is refused before wasix sees it
    /// (`wasi/paths.rs`).
    Symlink,
}

/// WASI calls that can fail on the filesystem or need adjusting, and how.
const WRAPPED: &[(&str, Fix)] = &[
    ("fd_read", Fix::Errno),
    ("fd_pread", Fix::Errno),
    ("fd_write", Fix::Errno),
    ("fd_pwrite", Fix::Errno),
    ("fd_seek", Fix::Errno),
    ("fd_tell", Fix::Errno),
    ("fd_close", Fix::Errno),
    ("fd_sync", Fix::Errno),
    ("fd_datasync", Fix::Errno),
    ("fd_allocate", Fix::Errno),
    ("fd_filestat_get", Fix::Errno),
    ("fd_filestat_set_size", Fix::Errno),
    ("fd_filestat_set_times", Fix::Errno),
    ("fd_readdir", Fix::Errno),
    ("fd_fdstat_get", Fix::Fdstat),
    ("poll_oneoff", Fix::ZeroClock),
    ("fd_renumber", Fix::Errno),
    ("path_open", Fix::PathAt(0, 2, 3)),
    ("path_filestat_get", Fix::PathAt(0, 2, 3)),
    ("path_filestat_set_times", Fix::PathAt(0, 2, 3)),
    ("path_create_directory", Fix::PathAt(0, 1, 2)),
    ("path_remove_directory", Fix::RemoveDirectory),
    ("path_unlink_file", Fix::PathAt(0, 1, 2)),
    ("path_readlink", Fix::PathAt(0, 1, 2)),
    ("path_rename", Fix::Rename),
    ("path_symlink", Fix::Symlink),
];

/// Errnos that stand for "something the mapping to `FsError` lost"; a precise errno from wasix
/// (ENOENT, EEXIST, ...) is never replaced.
const LOSSY: &[WasiErrno] = &[
    WasiErrno::Io,
    WasiErrno::Perm,
    WasiErrno::Inval,
    WasiErrno::Access,
    WasiErrno::Notsup,
    WasiErrno::Nospc,
    WasiErrno::Overflow,
    WasiErrno::Notcapable,
];

impl Fix {
    /// The (dirfd, pointer, length) argument indexes of a path clamped at `/`.
    fn path_at(self) -> Option<(usize, usize, usize)> {
        match self {
            Fix::PathAt(fd, ptr, len) => Some((fd, ptr, len)),
            Fix::RemoveDirectory => Some((0, 1, 2)),
            _ => None,
        }
    }
}

struct FixEnv {
    original: Function,
    siblings: Arc<Siblings>,
    slot: Arc<ErrnoSlot>,
    memory: LateMemory,
    fix: Fix,
    guard: Arc<RunGuard>,
    /// What this call does to the descriptor table, counted in the run's account (`Bound::fds`).
    fd_op: Option<FdOp>,
    run: Late,
}

/// The calls that change a guest's descriptor table (see `wasi/fds.rs`).
#[derive(Clone, Copy)]
enum FdOp {
    Open,
    Close,
    Renumber,
}

impl FdOp {
    fn of(name: &str) -> Option<FdOp> {
        match name {
            "path_open" => Some(FdOp::Open),
            "fd_close" => Some(FdOp::Close),
            "fd_renumber" => Some(FdOp::Renumber),
            _ => None,
        }
    }
}

/// What `module` imports from WASI's namespaces, `(namespace, name)`.
pub(crate) fn wasi_imports(module: &wasmer::Module) -> Arc<[(String, String)]> {
    module
        .imports()
        .filter(|i| WASI_NAMESPACES.contains(&i.module()))
        .map(|i| (i.module().to_string(), i.name().to_string()))
        .collect()
}

const WASI_NAMESPACES: [&str; 2] = ["wasi_snapshot_preview1", "wasi_unstable"];

pub(crate) fn wrap_imports(
    store: &mut impl AsStoreMut,
    wanted: &[(String, String)],
    imports: &mut Imports,
    slot: &Arc<ErrnoSlot>,
    memory: &LateMemory,
    guard: &Arc<RunGuard>,
    run: &Late,
) {
    let siblings = Arc::new(Siblings::from_imports(imports));
    // Only what the module imports: a wrapper is a function and an environment in the run's
    // store, and most guests import a few of the calls wrapped here.
    let targets: Vec<(String, String, Function, Fix)> = imports
        .iter()
        .filter(|(ns, name, _)| wanted.iter().any(|(m, n)| m == ns && n == name))
        .filter_map(|(ns, name, ext)| {
            let fix = WRAPPED.iter().find(|(n, _)| *n == name)?.1;
            match ext {
                Extern::Function(f) => Some((ns.to_string(), name.to_string(), f.clone(), fix)),
                _ => None,
            }
        })
        .collect();
    for (ns, name, original, fix) in targets {
        let ty = original.ty(&*store);
        let env = FunctionEnv::new(
            store,
            FixEnv {
                original,
                siblings: siblings.clone(),
                slot: slot.clone(),
                memory: memory.clone(),
                fix,
                guard: guard.clone(),
                fd_op: FdOp::of(&name),
                run: run.clone(),
            },
        );
        let wrapped = Function::new_with_env(store, &env, ty, call_fixed);
        imports.define(&ns, &name, wrapped);
    }
}

fn call_fixed(mut env: FunctionEnvMut<FixEnv>, args: &[Value]) -> Result<Vec<Value>, RuntimeError> {
    let (data, mut store) = env.data_and_store_mut();
    let original = data.original.clone();
    let slot = data.slot.clone();
    let fix = data.fix;
    let guard = data.guard.clone();
    let memory = data.memory.get().cloned();
    let siblings = data.siblings.clone();
    let fds = data
        .fd_op
        .and_then(|op| Some((data.run.get()?.fds.clone()?, op)));
    slot.clear();
    if let Some((tracker, FdOp::Open)) = &fds
        && tracker.before_open().is_err()
    {
        // As the kernel past RLIMIT_NOFILE: the open fails and the program goes on.
        return Ok(vec![Value::I32(WasiErrno::Mfile as i32)]);
    }

    let mut out = match (fix.path_at(), &memory) {
        (Some((fd, ptr, len)), Some(memory)) => {
            let clamp = clamped_path(&store, memory, args, fd, ptr, len);
            let mut args = args.to_vec();
            if let Some((_, _, new_len)) = clamp {
                args[len] = Value::I32(new_len as i32);
            }
            let mut answer = Ok(None);
            if let Fix::RemoveDirectory = fix {
                let mut call = Call {
                    store: &mut store,
                    memory,
                    guard: &guard,
                    siblings: &siblings,
                };
                answer = paths::before_remove_directory(&mut call, &args);
            }
            let result = answer.and_then(|answer| match answer {
                Some(code) => Ok(Box::from([Value::I32(code)])),
                None => guard.nested(|| original.call(&mut store, &args)),
            });
            if let Some((at, original_bytes, _)) = clamp {
                // The guest's string is put back as it was.
                let _ = memory.view(&store).write(at, &original_bytes);
            }
            result?.into_vec()
        }
        (None, Some(memory)) if matches!(fix, Fix::Rename) => {
            let mut out = guard.nested(|| original.call(&mut store, args))?.into_vec();
            if let Some(Value::I32(code)) = out.first_mut()
                && *code == WasiErrno::Noent as i32
            {
                let mut call = Call {
                    store: &mut store,
                    memory,
                    guard: &guard,
                    siblings: &siblings,
                };
                if let Some(real) = paths::rename_symlink(&mut call, args)? {
                    *code = real;
                }
            }
            out
        }
        (None, Some(memory)) if matches!(fix, Fix::Symlink) => {
            let mut call = Call {
                store: &mut store,
                memory,
                guard: &guard,
                siblings: &siblings,
            };
            match paths::before_symlink(&mut call, args)? {
                Some(code) => vec![Value::I32(code)],
                None => guard.nested(|| original.call(&mut store, args))?.into_vec(),
            }
        }
        (None, Some(memory)) if matches!(fix, Fix::ZeroClock) => {
            match (args.first(), args.get(2)) {
                (Some(Value::I32(subs)), Some(Value::I32(n))) => {
                    let changed = crate::wasi::poll::rewrite_zero_clocks(
                        &memory.view(&store),
                        *subs as u32,
                        *n as u32,
                    );
                    let result = guard.nested(|| original.call(&mut store, args));
                    crate::wasi::poll::restore(memory, &store, &changed);
                    result?.into_vec()
                }
                _ => guard.nested(|| original.call(&mut store, args))?.into_vec(),
            }
        }
        _ => guard.nested(|| original.call(&mut store, args))?.into_vec(),
    };

    if let (Some((tracker, op)), Some(Value::I32(code))) = (&fds, out.first()) {
        account_fds(tracker, *op, *code, args, &store, memory.as_ref());
    }
    if let Some(Value::I32(code)) = out.first_mut() {
        if let (Fix::Fdstat, Some(memory), 0, Some(Value::I32(fd)), Some(Value::I32(buf))) =
            (fix, &memory, *code, args.first(), args.get(1))
            && (0..=2).contains(fd)
        {
            // wasix reports descriptors 0-2 as character devices, which wasi-libc's isatty
            // takes for a terminal; a sandbox never has one.
            let _ = memory
                .view(&store)
                .write_u8(u64::from(*buf as u32), WasiFiletype::Unknown as u8);
        }
        if *code != 0
            && LOSSY.iter().any(|e| *e as i32 == *code)
            && let Some(real) = slot.take()
        {
            *code = i32::from(real);
        }
    }
    Ok(out)
}

/// Brings the program's descriptor account up to date after a call that changes its table.
fn account_fds(
    tracker: &FdTracker,
    op: FdOp,
    code: i32,
    args: &[Value],
    store: &impl wasmer::AsStoreRef,
    memory: Option<&Memory>,
) {
    let arg = |i: usize| match args.get(i) {
        Some(Value::I32(v)) => Some(*v as u32),
        _ => None,
    };
    match op {
        FdOp::Open if code == 0 => {
            // path_open's last argument points at the descriptor it made.
            let fd = arg(8).zip(memory).and_then(|(at, m)| {
                let mut b = [0u8; 4];
                m.view(store).read(u64::from(at), &mut b).ok()?;
                Some(u32::from_le_bytes(b))
            });
            match fd {
                Some(fd) => tracker.opened(fd),
                None => tracker.open_failed(),
            }
        }
        FdOp::Open => tracker.open_failed(),
        FdOp::Close if code == 0 => {
            if let Some(fd) = arg(0) {
                tracker.closed(fd);
            }
        }
        FdOp::Renumber if code == 0 => {
            if let (Some(from), Some(to)) = (arg(0), arg(1)) {
                tracker.renumbered(from, to);
            }
        }
        FdOp::Close | FdOp::Renumber => {}
    }
}

/// For a path relative to the root preopen that climbs above `/` (`..` at the top), writes
/// its form clamped at `/` over the guest's string and returns where, the original bytes
/// and the new length. wasix would otherwise resolve such a path to its own virtual root
/// above the preopen. The clamp is lexical; it can differ from the kernel only for a path
/// that climbs above `/` after passing through a symlink.
fn clamped_path(
    store: &impl wasmer::AsStoreRef,
    memory: &Memory,
    args: &[Value],
    fd: usize,
    ptr: usize,
    len: usize,
) -> Option<(u64, Vec<u8>, usize)> {
    let (Some(Value::I32(dirfd)), Some(Value::I32(p)), Some(Value::I32(n))) =
        (args.get(fd), args.get(ptr), args.get(len))
    else {
        return None;
    };
    if !ROOT_FDS.contains(dirfd) || *n <= 0 || *n > 4096 {
        return None;
    }
    let at = u64::from(*p as u32);
    let mut bytes = vec![0u8; *n as usize];
    memory.view(store).read(at, &mut bytes).ok()?;
    let clamped = clamp_above_root(&bytes)?;
    memory.view(store).write(at, &clamped).ok()?;
    Some((at, bytes, clamped.len()))
}

/// `Some(shorter path)` when `path` climbs above its starting directory; `None` otherwise.
fn clamp_above_root(path: &[u8]) -> Option<Vec<u8>> {
    let mut depth = 0usize;
    let mut climbed = false;
    let mut kept: Vec<&[u8]> = Vec::new();
    for comp in path.split(|b| *b == b'/') {
        match comp {
            b"" | b"." => {}
            b".." if depth == 0 => climbed = true,
            b".." => {
                depth -= 1;
                kept.push(comp);
            }
            _ => {
                depth += 1;
                kept.push(comp);
            }
        }
    }
    if !climbed {
        return None;
    }
    let mut out = kept.join(&b'/');
    if out.is_empty() {
        out.push(b'.');
    }
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::clamp_above_root;

    #[test]
    fn paths_climbing_above_the_root_are_clamped() {
        let c = |p: &str| clamp_above_root(p.as_bytes()).map(|v| String::from_utf8(v).unwrap());
        assert_eq!(c(".."), Some(".".into()));
        assert_eq!(c("../../etc/passwd"), Some("etc/passwd".into()));
        assert_eq!(c("home/../../tmp"), Some("home/../tmp".into()));
        assert_eq!(c("home/user/../.."), None);
        assert_eq!(c("tmp/x"), None);
        assert_eq!(c("./a/./b/.."), None);
    }
}
