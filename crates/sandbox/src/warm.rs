//! Compiling every module a sandbox can run ahead of its first use.
//!
//! A module is compiled for this machine on its first load and kept in the disk cache; CPython's
//! compile takes about a minute of CPU. A deployment (or a test run that starts many processes
//! at once) pays that before it serves, once, instead of in whichever run comes first.

use std::path::PathBuf;

use crate::{Sandbox, SandboxOptions, exec_for};

/// What [`precompile`] did: modules loaded, and how many of them had to be compiled (the others
/// were in the cache already).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Precompiled {
    /// Guest modules and CPython loaded.
    pub modules: u64,
    /// Of those, compiled now.
    pub compiled: u64,
}

/// Why [`precompile`] stopped: a module that does not compile, or a `python3` that does not
/// start.
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct PrecompileError(String);

/// Compiles every embedded guest program and CPython into the module cache of `cache_dir`
/// (`None`: the default, as [`SandboxOptions::cache_dir`]), and captures the memories of the
/// guests whose start-up is done once per process (jq). CPython is warmed by running
/// `python3 -c pass` in a fresh sandbox, the path every later run takes.
pub fn precompile(cache_dir: Option<PathBuf>) -> Result<Precompiled, PrecompileError> {
    let exec = exec_for(&cache_dir);
    let before = exec.cache_stats().compiles;
    let mut seen: Vec<*const u8> = Vec::new();
    for name in wasmsand_guests::command_names() {
        let Some(wasm) = wasmsand_guests::wasm_for_command(name) else {
            continue;
        };
        // Several commands share one module (coreutils, textutils): load each once.
        if seen.contains(&wasm.as_ptr()) {
            continue;
        }
        seen.push(wasm.as_ptr());
        let program = exec
            .load(wasm)
            .map_err(|e| PrecompileError(format!("compiling the `{name}` guest: {e}")))?;
        // A guest whose start-up is done once per process (`preinit.rs`: jq) does it now, so
        // that no run takes the slow start while the capture is under way.
        exec.preinitialize(&program);
    }
    let sb = Sandbox::new(SandboxOptions {
        cache_dir,
        ..SandboxOptions::default()
    });
    let r = sb
        .run("python3 -c pass")
        .map_err(|e| PrecompileError(format!("python3: {e}")))?;
    if r.exit_code != 0 {
        return Err(PrecompileError(format!(
            "python3 did not start: {}",
            r.stderr.trim()
        )));
    }
    Ok(Precompiled {
        modules: seen.len() as u64 + 1,
        compiled: exec.cache_stats().compiles - before,
    })
}
