//! The `sandboxd` binary over real pipes and loopback (moved from crates/sandboxd/tests).

mod cli;
mod cluster;
mod common;
mod line_protocol;
mod mcp;
mod mounts;
pub(crate) mod nested;
mod processes;
mod rpc;
mod vm;
