#!/usr/bin/env bash
# The whole test suite from a fresh clone: installs what the build needs through the project's
# own files (the toolchain pinned in rust-toolchain.toml, its wasm32-wasip1 target), builds
# everything in one target dir, and runs every test.
set -euo pipefail
cd "$(dirname "$0")/.."

# rustup installs the pinned toolchain on first use but not always the extra target of an
# already-installed one; both commands are no-ops when everything is there.
rustup toolchain install --profile minimal --no-self-update >/dev/null 2>&1 || rustup show active-toolchain
rustup target add wasm32-wasip1 >/dev/null

cargo test --workspace --locked "$@"
