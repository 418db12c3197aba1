//! The Rust side of the `wasmsand` npm package.
//!
//! The in-process transport is the very server `sandboxd` runs on stdio (`wasmsand_dispatch`'s
//! [`Server`]: one lane per sandbox, `kill` and `create` at once, tool calls to the client),
//! with JSON values handed over in memory instead of lines on a pipe. So the JavaScript client
//! above it is the one it uses for a `sandboxd` child, and both transports schedule, answer and
//! fail the same by construction. Requests run on the server's lane threads, never on the
//! JavaScript thread; everything the server sends (answers, `output` and `process.*`
//! notifications, `tool.call` requests) reaches JavaScript through one thread-safe function.

use std::sync::Arc;

use napi::bindgen_prelude::*;
use napi::threadsafe_function::{ThreadsafeFunction, ThreadsafeFunctionCallMode};
use napi_derive::napi;
use serde_json::Value;
use wasmsand_dispatch::{DispatchConfig, Dispatcher, Notify, Server};

/// The JavaScript function that receives each message of the server as JSON text. Weak (it
/// does not keep Node's event loop alive by itself): the JavaScript side holds the loop open
/// while it waits for an answer, so an idle sandbox never stops a program from exiting.
type OnMessage = ThreadsafeFunction<String, (), String, Status, false, true>;

/// One root sandbox and its forks in this process, behind the JSON-RPC server of `sandboxd`.
#[napi]
pub struct NativeServer {
    server: Arc<Server>,
}

#[napi]
impl NativeServer {
    /// A server whose messages (answers, notifications, requests to the client) are passed to
    /// `onMessage(json)` on the JavaScript thread, in the order the server sent them.
    #[napi(constructor)]
    pub fn new(on_message: OnMessage) -> Self {
        let on_message = Arc::new(on_message);
        let sink: Notify = Arc::new(move |v: Value| {
            // Blocking: a full queue slows the sending thread down instead of dropping output.
            on_message.call(v.to_string(), ThreadsafeFunctionCallMode::Blocking);
        });
        let dispatcher = Arc::new(Dispatcher::new(DispatchConfig::default()));
        NativeServer {
            server: Arc::new(Server::new(dispatcher, sink)),
        }
    }

    /// Hands one JSON-RPC message (a request, or the answer to a `tool.call`) to the server;
    /// returns at once. A malformed one is answered with a JSON-RPC error like any other.
    #[napi]
    pub fn submit(&self, message: String) {
        let Ok(value) = serde_json::from_str::<Value>(&message) else {
            // Answered with -32700, as sandboxd answers a line that is not JSON.
            self.server.submit_line(message.as_bytes());
            return;
        };
        // `create`, `kill` and `sandbox.list` run at arrival on the submitting thread inside
        // `Server::submit` (a `create` with mounts reads host folders, `kill` waits for the
        // commands it ends): they go to a thread of their own, so that the JavaScript thread
        // never waits on a sandbox. Everything else only queues on a lane there.
        let at_arrival = matches!(
            value.get("method").and_then(Value::as_str),
            Some("create" | "kill" | "sandbox.list")
        );
        if at_arrival {
            let server = self.server.clone();
            std::thread::spawn(move || server.submit(value));
        } else {
            self.server.submit(value);
        }
    }

    /// Whether `kill` has run: nothing is answered after its answer.
    #[napi]
    pub fn is_killed(&self) -> bool {
        self.server.dispatcher().is_killed()
    }
}

/// Runs the `sandboxd` server on this process's stdin/stdout with `argv` as its command line
/// (`node bin/sandboxd.js`, the child the RPC transport starts when given no binary); returns
/// its exit status. It blocks the calling thread until the server ends: call it only in a
/// process of its own.
#[napi]
pub fn sandboxd_main(argv: Vec<String>) -> u32 {
    u32::from(sandboxd::run(argv))
}

/// The limits registry as JSON: `[{name, wire, default, unit, doc}]`, in the crate's order.
#[napi]
pub fn limit_specs() -> String {
    wasmsand_dispatch::limit_specs_json()
}

/// The version of the native part (the workspace's).
#[napi]
pub fn native_version() -> String {
    env!("CARGO_PKG_VERSION").to_string()
}
