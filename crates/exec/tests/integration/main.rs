//! The exec crate's integration tests.
//!
//! One test binary per crate (modules inside): the test build links once per crate, not
//! once per file (most of them pull in wasmer).

mod cache;
mod common;
mod devtools;
mod git;
mod guests;
#[path = "../../../../tests/support/host_tools.rs"]
mod host_tools;
mod isolation;
mod limits;
mod node;
mod redirect;
mod rg;
mod sqlite_zip;
mod tool_call;
