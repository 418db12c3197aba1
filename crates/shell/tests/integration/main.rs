//! The shell crate's integration tests: parser and robustness.
//!
//! One test binary per crate (modules inside): the test build links once per crate, not
//! once per file (most of them pull in wasmer).

mod parser;
mod robustness;
