//! The sandbox crate's integration tests.
//!
//! One test binary per crate (modules inside): the test build links once per crate, not
//! once per file (most of them pull in wasmer).

mod builtins;
mod conformance;
mod deterministic;
mod guests_hostile;
#[path = "../../../../tests/support/host_tools.rs"]
mod host_tools;
mod merge;
mod mounts;
mod mutations;
mod network;
mod node_git;
mod os_limits;
mod pristine;
mod processes;
mod python;
mod python_net;
mod receipts;
mod rg_shell;
mod sandbox;
mod spill;
mod state;
mod timeout_which;
