//! What each fuzz target holds its surface to, as plain functions of the fuzzer's bytes.
//!
//! `fuzz/` (cargo-fuzz, libFuzzer) drives each of them under coverage guidance;
//! `tests/replay.rs` runs every file of `fuzz/corpus/<target>/` and `fuzz/regressions/<target>/`
//! through them in the ordinary test suite, so an input a fuzzer once broke something with
//! keeps being checked without a fuzzer. A target panics when its surface breaks its
//! contract: a panic of the code under test is a finding, and so is an answer the contract
//! does not allow (an untyped error, a path outside the workspace, a tree that prints
//! differently from how it parses).

pub mod guest;
pub mod jq;
pub mod range;
pub mod shell;
pub mod state;
pub mod stdio;
pub mod upload;
pub mod ws;

/// A fuzz target: the fuzzer's input in, a panic when the contract is broken.
pub type Target = fn(&[u8]);

/// Every target by its name, which is also its `fuzz/fuzz_targets/<name>.rs` and its corpus
/// directory.
pub const TARGETS: &[(&str, Target)] = &[
    ("shell_parse", shell::parse),
    ("shell_print", shell::print),
    ("shell_run", shell::run),
    ("stdio", stdio::run),
    ("upload", upload::run),
    ("range", range::run),
    ("ws_stdin", ws::run),
    ("state_import", state::run),
    ("jq_filter", jq::run),
    ("guest_args", guest::run),
];

/// The target called `name`.
pub fn target(name: &str) -> Option<Target> {
    TARGETS.iter().find(|(n, _)| *n == name).map(|(_, t)| *t)
}
