//! Deterministic mode for guests: when the run's filesystem carries a [`SharedDet`], the WASI
//! imports `clock_time_get` and `random_get` answer from it instead of the host's clock and
//! entropy, so `date`, `mktemp`, `od /dev/urandom` or Python's `time.time()`, `random` and
//! `uuid4()` print the same from the same state (see `wasmsand_vfs::det`).

use wasmer::{AsStoreMut, Function, FunctionEnv, FunctionEnvMut, Imports, Module};
use wasmsand_vfs::SharedDet;

use crate::bind::Late;
use crate::guard::LateMemory;

const EFAULT: i32 = 21;
const EINVAL: i32 = 28;

struct DetEnv {
    run: Late,
    memory: LateMemory,
}

impl DetEnv {
    fn det(&self) -> Option<SharedDet> {
        self.run.get()?.det.clone()
    }
}

/// Replaces the module's `clock_time_get` / `random_get` imports for a run in a
/// deterministic sandbox (`deterministic`); does nothing otherwise.
pub(crate) fn define(
    store: &mut impl AsStoreMut,
    module: &Module,
    imports: &mut Imports,
    deterministic: bool,
    run: &Late,
    memory: &LateMemory,
) {
    if !deterministic {
        return;
    }
    let env = FunctionEnv::new(
        store,
        DetEnv {
            run: run.clone(),
            memory: memory.clone(),
        },
    );
    for ns in ["wasi_snapshot_preview1", "wasi_unstable"] {
        let wants = |name: &str| {
            module
                .imports()
                .any(|i| i.module() == ns && i.name() == name)
        };
        if wants("clock_time_get") {
            let f = Function::new_typed_with_env(store, &env, clock_time_get);
            imports.define(ns, "clock_time_get", f);
        }
        if wants("random_get") {
            let f = Function::new_typed_with_env(store, &env, random_get);
            imports.define(ns, "random_get", f);
        }
    }
}

fn lock(det: &SharedDet) -> std::sync::MutexGuard<'_, wasmsand_vfs::DetState> {
    det.lock().unwrap_or_else(|e| e.into_inner())
}

/// Every clock (realtime, monotonic, the CPU-time ones) reads the one virtual clock, which
/// moves by its step at each reading.
fn clock_time_get(env: FunctionEnvMut<DetEnv>, clock_id: i32, _precision: i64, out: i32) -> i32 {
    if !(0..=3).contains(&clock_id) {
        return EINVAL;
    }
    let data = env.data();
    let (Some(memory), Some(det)) = (data.memory.get(), data.det()) else {
        return EFAULT;
    };
    let now = lock(&det).now_ns();
    match memory
        .view(&env)
        .write(u64::from(out as u32), &now.to_le_bytes())
    {
        Ok(()) => 0,
        Err(_) => EFAULT,
    }
}

fn random_get(env: FunctionEnvMut<DetEnv>, buf: i32, len: i32) -> i32 {
    let data = env.data();
    let (Some(memory), Some(det)) = (data.memory.get(), data.det()) else {
        return EFAULT;
    };
    let mut bytes = vec![0u8; len as u32 as usize];
    lock(&det).fill(&mut bytes);
    match memory.view(&env).write(u64::from(buf as u32), &bytes) {
        Ok(()) => 0,
        Err(_) => EFAULT,
    }
}
