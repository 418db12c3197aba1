//! The sandboxd crate's integration tests.
//!
//! One test binary per crate (modules inside): the test build links once per crate, not
//! once per file (most of them pull in wasmer).

mod cli;
mod cluster;
mod common;
mod mcp;
mod processes;
mod rpc;
mod typed;
