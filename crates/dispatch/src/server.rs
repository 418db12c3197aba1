//! Scheduling of requests for a transport: one lane per sandbox, answered through a sink.

use std::collections::{HashMap, VecDeque};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc;
use std::time::Duration;

use parking_lot::{Condvar, Mutex};
use serde_json::{Value, json};

use crate::{Dispatcher, Notify, Request, RpcError, line_protocol};

/// Where a request runs. Requests of one lane run one after another in arrival order, on a
/// thread that exists while the lane has work; different lanes run at the same time.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
enum Lane {
    Root,
    Fork(String),
    /// One request on its own: `process.*` calls other than `process.start`, which must not
    /// wait behind a run of their sandbox (a `process.wait` would block its lane).
    Aside(u64),
}

enum Job {
    Rpc(Request),
    /// A request of the line protocol.
    Line(serde_json::Map<String, Value>),
}

/// A dispatcher driven by a transport: `submit` each incoming line or object in arrival
/// order; answers and notifications go to the sink as whole JSON values. The answer to `kill`
/// is the last thing the sink receives.
pub struct Server {
    inner: Arc<Inner>,
}

struct Inner {
    dispatcher: Arc<Dispatcher>,
    /// Everything sent goes through here (answers, notifications, calls to the client).
    sink: Notify,
    raw_sink: Notify,
    /// Set once `kill` has answered: nothing is sent after that.
    sealed: Arc<Mutex<bool>>,
    /// Pending jobs of each lane with a live worker (the job being run is not in the queue).
    lanes: Mutex<HashMap<Lane, VecDeque<Job>>>,
    idle: Condvar,
    outbox: Outbox,
    next_aside: AtomicU64,
}

impl Server {
    /// A server over `dispatcher` that writes every answer, notification and call to the
    /// client through `sink` (from any thread; the transport serializes the writes).
    pub fn new(dispatcher: Arc<Dispatcher>, sink: Notify) -> Server {
        let sealed = Arc::new(Mutex::new(false));
        let raw_sink = sink;
        let sink: Notify = {
            let sealed = sealed.clone();
            let raw_sink = raw_sink.clone();
            Arc::new(move |v| {
                // Checked and sent under one lock, so nothing slips in after `kill`'s answer
                // (the answers of the commands it cancelled would otherwise race it).
                let sealed = sealed.lock();
                if !*sealed {
                    raw_sink(v);
                }
            })
        };
        let inner = Arc::new(Inner {
            dispatcher,
            outbox: Outbox::new(sink.clone()),
            sink,
            raw_sink,
            sealed,
            lanes: Mutex::new(HashMap::new()),
            idle: Condvar::new(),
            next_aside: AtomicU64::new(0),
        });
        // Background processes notify after their request was answered: through the same
        // sink, so nothing is sent after `kill` either.
        inner.dispatcher.set_notifier(inner.sink.clone());
        // Weak: the dispatcher must not keep its own server alive.
        let weak = Arc::downgrade(&inner);
        inner.dispatcher.set_client(Arc::new(move |method, params| {
            let inner = weak
                .upgrade()
                .ok_or_else(|| "the server is shutting down".to_string())?;
            inner
                .outbox
                .call(method, params, TOOL_CALL_TIMEOUT)
                .map_err(|e| match e {
                    CallError::Remote(e) => e.message,
                    other => other.to_string(),
                })
        }));
        Server { inner }
    }

    /// The dispatcher the requests go to.
    pub fn dispatcher(&self) -> &Arc<Dispatcher> {
        &self.inner.dispatcher
    }

    /// Calls from the server to the client (answers are matched by `submit`).
    pub fn outbox(&self) -> &Outbox {
        &self.inner.outbox
    }

    /// One line of input (without its newline). Blank lines are ignored.
    pub fn submit_line(&self, line: &[u8]) {
        if line.iter().all(u8::is_ascii_whitespace) {
            return;
        }
        match serde_json::from_slice::<Value>(line) {
            Ok(v) => self.submit(v),
            Err(e) => {
                let answer = if line_protocol::looks_like_line_request(line) {
                    line_protocol::malformed_line(line, &e.to_string())
                } else {
                    RpcError::parse_error().response(None)
                };
                (self.inner.sink)(answer);
            }
        }
    }

    /// Answers `-32700 Request too large` for a line the transport did not read whole.
    pub fn reject_too_large(&self) {
        (self.inner.sink)(RpcError::too_large().response(None));
    }

    /// One incoming object, in arrival order.
    pub fn submit(&self, v: Value) {
        let d = &self.inner.dispatcher;
        if let Some(obj) = v.as_object() {
            if !obj.contains_key("method")
                && (obj.contains_key("result") || obj.contains_key("error"))
            {
                // An answer to a call of ours; a stray one has no one to go to.
                self.inner.outbox.deliver(obj);
                return;
            }
            if !obj.contains_key("jsonrpc") && obj.contains_key("type") {
                d.note_arrival();
                let Value::Object(obj) = v else {
                    unreachable!()
                };
                self.enqueue(Lane::Root, Job::Line(obj));
                return;
            }
        }
        let req = match Request::parse(&v) {
            Ok(r) => r,
            Err((id, e)) => {
                (self.inner.sink)(e.response(id.as_ref()));
                return;
            }
        };
        // These act on the whole server, so they take effect at arrival instead of waiting
        // behind a lane: `kill` must stop running commands, `create` must be first, and
        // `run.cancel` must reach a run its lane is busy with (or has not started).
        if req.method == "kill" {
            self.kill(&req);
            return;
        }
        if matches!(
            req.method.as_str(),
            "create" | "sandbox.list" | "run.cancel"
        ) {
            if let Some(answer) = d.execute(&req, &self.inner.sink) {
                (self.inner.sink)(answer);
            }
            return;
        }
        d.note_arrival();
        if req.method.starts_with("process.") && req.method != "process.start" {
            let n = self.inner.next_aside.fetch_add(1, Ordering::Relaxed);
            self.enqueue(Lane::Aside(n), Job::Rpc(req));
            return;
        }
        let lane = match req.params.get("sandboxId") {
            None | Some(Value::Null) => Lane::Root,
            Some(Value::String(id)) => Lane::Fork(id.clone()),
            Some(_) => {
                let e = RpcError::invalid_params("sandboxId must be a string");
                if let Some(answer) = req.respond(Err(e)) {
                    (self.inner.sink)(answer);
                }
                return;
            }
        };
        if req.method == "run"
            && let Some(id) = &req.id
        {
            d.note_run(id);
        }
        self.enqueue(lane, Job::Rpc(req));
    }

    fn enqueue(&self, lane: Lane, job: Job) {
        let mut lanes = self.inner.lanes.lock();
        if let Some(queue) = lanes.get_mut(&lane) {
            queue.push_back(job);
            return;
        }
        lanes.insert(lane.clone(), VecDeque::from([job]));
        drop(lanes);
        let inner = self.inner.clone();
        let worker_lane = lane.clone();
        let spawned = std::thread::Builder::new()
            .name("dispatch-lane".into())
            .spawn(move || inner.work(&worker_lane));
        if spawned.is_err() {
            // Out of threads: the lane still runs, only on the caller's thread.
            self.inner.work(&lane);
        }
    }

    /// Requests not answered when `kill` arrives are never answered: the server is sealed
    /// before the sandboxes are destroyed, and `kill`'s answer is the last message.
    fn kill(&self, req: &Request) {
        *self.inner.sealed.lock() = true;
        if let Some(answer) = self.inner.dispatcher.execute(req, &self.inner.sink) {
            (self.inner.raw_sink)(answer);
        }
    }

    /// Blocks until every submitted request has been answered.
    pub fn wait_idle(&self) {
        let mut lanes = self.inner.lanes.lock();
        while !lanes.is_empty() {
            self.inner.idle.wait(&mut lanes);
        }
    }
}

impl Inner {
    fn work(&self, lane: &Lane) {
        loop {
            let job = {
                let mut lanes = self.lanes.lock();
                let queue = lanes
                    .get_mut(lane)
                    .expect("a lane with a worker has an entry");
                match queue.pop_front() {
                    Some(job) => job,
                    None => {
                        lanes.remove(lane);
                        self.idle.notify_all();
                        return;
                    }
                }
            };
            self.run(job);
        }
    }

    fn run(&self, job: Job) {
        let answer = match job {
            Job::Rpc(req) => self.dispatcher.execute(&req, &self.sink),
            Job::Line(obj) => Some(self.dispatcher.handle_line_request(&obj)),
        };
        if let Some(answer) = answer {
            (self.sink)(answer);
        }
    }
}

/// How long a tool call may wait for the client's answer.
pub const TOOL_CALL_TIMEOUT: Duration = Duration::from_secs(300);

/// Why a call to the client failed.
#[derive(Debug, thiserror::Error)]
pub enum CallError {
    /// The client answered with a JSON-RPC error object.
    #[error("the client answered with an error: {0}")]
    Remote(RpcError),
    /// No answer within the call's timeout; a late answer is dropped.
    #[error("the client did not answer within {0:?}")]
    Timeout(Duration),
}

/// Requests from the server to the client over the same stream. Ids are `cb_<n>`, which no
/// client-chosen request id is mistaken for since answers to them carry no `method`.
pub struct Outbox {
    sink: Notify,
    next: AtomicU64,
    pending: Mutex<HashMap<String, mpsc::Sender<Result<Value, RpcError>>>>,
}

impl Outbox {
    fn new(sink: Notify) -> Outbox {
        Outbox {
            sink,
            next: AtomicU64::new(1),
            pending: Mutex::new(HashMap::new()),
        }
    }

    /// Sends a request to the client and waits for its answer.
    pub fn call(&self, method: &str, params: Value, timeout: Duration) -> Result<Value, CallError> {
        let id = format!("cb_{}", self.next.fetch_add(1, Ordering::Relaxed));
        let (tx, rx) = mpsc::channel();
        self.pending.lock().insert(id.clone(), tx);
        (self.sink)(json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}));
        let answer = rx.recv_timeout(timeout);
        self.pending.lock().remove(&id);
        match answer {
            Ok(Ok(v)) => Ok(v),
            Ok(Err(e)) => Err(CallError::Remote(e)),
            Err(_) => Err(CallError::Timeout(timeout)),
        }
    }

    /// Hands an answer to the call waiting for it; false when none is.
    pub fn deliver(&self, answer: &serde_json::Map<String, Value>) -> bool {
        let Some(id) = answer.get("id").and_then(Value::as_str) else {
            return false;
        };
        let Some(tx) = self.pending.lock().remove(id) else {
            return false;
        };
        let outcome = match answer.get("error") {
            Some(e) if !e.is_null() => Err(RpcError {
                code: e.get("code").and_then(Value::as_i64).unwrap_or(0),
                message: e
                    .get("message")
                    .and_then(Value::as_str)
                    .unwrap_or_default()
                    .to_string(),
                data: e.get("data").cloned(),
            }),
            _ => Ok(answer.get("result").cloned().unwrap_or(Value::Null)),
        };
        tx.send(outcome).is_ok()
    }
}
