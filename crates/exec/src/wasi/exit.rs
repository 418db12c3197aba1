//! `proc_exit` without a backtrace.
//!
//! A guest's exit unwinds its stack: the host function returns an error, which wasmer raises as
//! a trap. wasix's `proc_exit` returns its own error type, and wasmer turns every trap whose
//! error is not already a `RuntimeError` into one by walking the native stack and looking up
//! each wasm frame, for a backtrace nobody reads: 3 % of a small guest's run (`wc -c`). This
//! one returns a `RuntimeError` made with an empty trace around the same `WasiError::Exit`,
//! which wasmer passes through as it is; the runner reads the code from it as before
//! (`run::classify`).
//!
//! What wasix's version does besides: it runs the signal handlers still pending (the runner
//! sends none to a guest that exits: its watchdog's stop is decided apart from the exit code)
//! and returns from a vfork (a wasix call, which no `wasi_snapshot_preview1` module makes).

use wasmer::sys::vm::Trap;
use wasmer::{BackendTrap, Function, Imports, RuntimeError, Store};
use wasmer_wasix::WasiError;
use wasmer_wasix::types::wasi::ExitCode;

/// Defines `proc_exit` in each WASI namespace `wasi_imports` has it in.
pub(crate) fn define(store: &mut Store, wasi_imports: &[(String, String)], imports: &mut Imports) {
    for (ns, name) in wasi_imports {
        if name == "proc_exit" {
            imports.define(ns, name, Function::new_typed(store, proc_exit));
        }
    }
}

fn proc_exit(code: ExitCode) -> Result<(), RuntimeError> {
    let trap = Trap::user(Box::new(WasiError::Exit(code)));
    Err(RuntimeError::new_from_source(
        BackendTrap::Sys(trap),
        Vec::new(),
        None,
    ))
}
