//! The dispatch crate's integration tests.
//!
//! One test binary per crate (modules inside): the test build links once per crate, not
//! once per file (most of them pull in wasmer).

mod mounts;
mod processes;
mod run_cancel;
mod sdk_methods;
