//! `sandboxd lsp`: a Language Server that runs the editor's workspace in the sandbox (seed 003,
//! section 10). It is thin over the service: an embedded one on a loopback port by default,
//! or one given by URL and API key, with the same behaviour either way.
//!
//! - `workspace/executeCommand`: `tldw.sandbox.run` (one object of the service's run fields
//!   plus `files`; no argument repeats the last run), `tldw.sandbox.configure` (the
//!   workspace's defaults), `tldw.sandbox.openArtifacts` (a run's artifacts), and
//!   `tldw.sandbox.cancel`.
//! - Code lenses "Run in Sandbox" on runnable files ([`lens`]).
//! - A run syncs what changed in the workspace ([`sync`]), streams its output to the client
//!   (`tldw/sandbox/log` notifications, or `window/logMessage` for clients that did not ask
//!   for them, and `$/progress`), and at its end publishes a diagnostic on the first stack
//!   frame inside the workspace ([`traces`]), or clears the last run's when it passed.

pub mod lens;
mod server;
pub mod service;
pub mod sync;
pub mod traces;

pub use server::{Options, run, run_stdio};

/// The commands the server registers, in the order it lists them.
pub const COMMANDS: &[&str] = &[
    "tldw.sandbox.run",
    "tldw.sandbox.configure",
    "tldw.sandbox.openArtifacts",
    "tldw.sandbox.cancel",
];

/// Why the server stopped other than by a client's `shutdown` and `exit`.
#[derive(Debug, thiserror::Error)]
pub enum LspError {
    /// The connection broke or the client broke the protocol's start-up.
    #[error("language server protocol: {0}")]
    Protocol(String),
    /// The runtime or the embedded service could not start.
    #[error("{0}")]
    Start(String),
}
