//! wasmsand's end-to-end suites: the system driven from outside, across crates.
//!
//! - `sandboxd`: the `sandboxd` binary as a child process over real pipes (JSON-RPC lines, the
//!   `type` line protocol, the command line, `sandboxd mcp`), and replicated deployments
//!   (`cluster`: real `sandboxd serve` replicas on a throw-away PostgreSQL, the Kubernetes
//!   example).
//! - `docker`: the service's docker runtime against a real Docker engine (skipped, printing
//!   so, without `WASMSAND_TEST_DOCKER`; the `docker` stage of scripts/test.sh sets it).
//! - `service`: the HTTP + WebSocket service of `wasmsand-server` on loopback, driven by real
//!   HTTP, WebSocket and MCP clients.
//! - `conformance`: the cross-binding conformance cases (`tests/conformance/cases`, run by the
//!   Python and Node suites too, on each of their transports) against the crate's `Sandbox`.
//!
//! The Python module's suite (pytest) is `tests/python/`, run by `scripts/test.sh`.
//!
//! The binary these tests start is `e2e-sandboxd`, this package's build of sandboxd's own
//! `main.rs` (see `tests/Cargo.toml` for why): `env!("CARGO_BIN_EXE_e2e-sandboxd")`.
//!
//! `cargo test -p wasmsand-e2e --test e2e [sandboxd::|service::|conformance::]<filter>`

#![forbid(unsafe_code)]

mod conformance;
mod docker;
mod sandboxd;
mod service;
