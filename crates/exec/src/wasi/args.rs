//! `args_*` and `environ_*`, answered from the run's binding (`bind.rs`).
//!
//! An instance is made before its run's argv and environment are known, and wasix keeps its
//! own copy of both out of an embedder's reach once the environment exists; so the four calls
//! that read them are the runner's. They write what wasix's would: the count and the bytes
//! needed, then the pointers and the NUL-terminated strings.

use wasmer::{AsStoreMut, Function, FunctionEnv, FunctionEnvMut, Imports, MemoryView};
use wasmer_wasix::types::wasi::Errno;

use std::sync::Arc;

use crate::bind::{Bound, Late, Strings};
use crate::guard::LateMemory;

struct ArgsEnv {
    run: Late,
    memory: LateMemory,
}

/// Defines the four calls the module imports (from `wanted`, its WASI imports).
pub(crate) fn define(
    store: &mut impl AsStoreMut,
    wanted: &[(String, String)],
    imports: &mut Imports,
    run: &Late,
    memory: &LateMemory,
) {
    let mut env = None;
    for (ns, name) in wanted {
        let f: fn(FunctionEnvMut<ArgsEnv>, i32, i32) -> i32 = match name.as_str() {
            "args_sizes_get" => args_sizes_get,
            "args_get" => args_get,
            "environ_sizes_get" => environ_sizes_get,
            "environ_get" => environ_get,
            _ => continue,
        };
        let env = env.get_or_insert_with(|| {
            FunctionEnv::new(
                store,
                ArgsEnv {
                    run: run.clone(),
                    memory: memory.clone(),
                },
            )
        });
        let f = Function::new_typed_with_env(store, env, f);
        imports.define(ns, name, f);
    }
}

fn args_sizes_get(env: FunctionEnvMut<ArgsEnv>, count: i32, size: i32) -> i32 {
    sizes(&env, |b| &b.args, count, size) as i32
}

fn args_get(env: FunctionEnvMut<ArgsEnv>, pointers: i32, buffer: i32) -> i32 {
    strings(&env, |b| &b.args, pointers, buffer) as i32
}

fn environ_sizes_get(env: FunctionEnvMut<ArgsEnv>, count: i32, size: i32) -> i32 {
    sizes(&env, |b| &b.env, count, size) as i32
}

fn environ_get(env: FunctionEnvMut<ArgsEnv>, pointers: i32, buffer: i32) -> i32 {
    strings(&env, |b| &b.env, pointers, buffer) as i32
}

/// The run's strings `pick` names, and a view of the guest's memory to write them into.
fn bound<'a>(
    env: &'a FunctionEnvMut<ArgsEnv>,
    pick: fn(&Bound) -> &Strings,
) -> Option<(Picked, MemoryView<'a>)> {
    let data = env.data();
    Some((Picked(data.run.get()?, pick), data.memory.get()?.view(env)))
}

/// One of the run's string lists, held with the run's binding it is part of.
struct Picked(Arc<Bound>, fn(&Bound) -> &Strings);

impl std::ops::Deref for Picked {
    type Target = Strings;

    fn deref(&self) -> &Strings {
        (self.1)(&self.0)
    }
}

fn sizes(
    env: &FunctionEnvMut<ArgsEnv>,
    pick: fn(&Bound) -> &Strings,
    count: i32,
    size: i32,
) -> Errno {
    let Some((list, view)) = bound(env, pick) else {
        return Errno::Fault;
    };
    let count_bytes = (list.starts.len() as u32).to_le_bytes();
    let size_bytes = (list.blob.len() as u32).to_le_bytes();
    match view
        .write(u64::from(count as u32), &count_bytes)
        .and_then(|()| view.write(u64::from(size as u32), &size_bytes))
    {
        Ok(()) => Errno::Success,
        Err(_) => Errno::Memviolation,
    }
}

fn strings(
    env: &FunctionEnvMut<ArgsEnv>,
    pick: fn(&Bound) -> &Strings,
    pointers: i32,
    buffer: i32,
) -> Errno {
    let Some((list, view)) = bound(env, pick) else {
        return Errno::Fault;
    };
    let base = buffer as u32;
    let mut table = Vec::with_capacity(list.starts.len() * 4);
    for start in &list.starts {
        let Some(at) = base.checked_add(*start) else {
            return Errno::Overflow;
        };
        table.extend_from_slice(&at.to_le_bytes());
    }
    match view
        .write(u64::from(pointers as u32), &table)
        .and_then(|()| view.write(u64::from(base), &list.blob))
    {
        Ok(()) => Errno::Success,
        Err(_) => Errno::Memviolation,
    }
}
