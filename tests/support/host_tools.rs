//! The host programs the integration tests compare guests with. Each must be listed in
//! `scripts/host-tools.txt`, from which `scripts/test.sh` installs it: a comparison with a
//! program that only its author's machine has would fail on a fresh one, far from its cause.
//!
//! Shared as a source file (`#[path]` from each crate's `tests/integration/main.rs`), not a
//! crate: it is a dozen lines and would otherwise be a package of its own in the build graph.

use std::process::Command;

const LIST: &str = include_str!("../../scripts/host-tools.txt");

/// Panics unless every one of `names` is a command of `scripts/host-tools.txt`.
pub fn require_listed(names: &[&str]) {
    for name in names {
        let listed = LIST
            .lines()
            .filter(|l| !l.trim_start().starts_with('#'))
            .filter_map(|l| l.split_whitespace().nth(1))
            .any(|commands| commands.split(',').any(|c| c == *name));
        assert!(
            listed,
            "the tests run the host's `{name}`, which scripts/host-tools.txt does not list: add a \
             line (stage, command, Debian package) so that scripts/test.sh installs it"
        );
    }
}

/// The host's `name`, once it is known to be listed.
pub fn host_tool(name: &str) -> Command {
    require_listed(&[name]);
    Command::new(name)
}
