//! The shell crate's integration tests: the builtin registry against the docs, parser and
//! robustness.
//!
//! One test binary per crate (modules inside): the test build links once per crate, not
//! once per file (most of them pull in wasmer).

mod builtins;
mod parser;
mod parser_snapshots;
mod robustness;
