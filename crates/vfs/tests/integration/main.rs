//! The vfs crate's integration tests.
//!
//! One test binary per crate (modules inside): the test build links once per crate, not
//! once per file (most of them pull in wasmer).

mod delta;
mod links;
mod merge;
mod model;
mod mounts;
mod ops;
mod seed_limits;
