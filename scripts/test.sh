#!/usr/bin/env bash
# The whole test suite from a fresh clone: installs what the build needs through the project's
# own files (the toolchain pinned in rust-toolchain.toml, its wasm32-wasip1 target), builds
# everything in one target dir, and runs every test.
set -euo pipefail
cd "$(dirname "$0")/.."

# rustup installs the pinned toolchain on first use (a no-op when it is there). Its
# wasm32-wasip1 target is NOT added here: the guest build script adds it when it is missing, as
# the README's main-job command needs on a machine whose toolchain lacks it. CI removes the
# target first so that this path is exercised on every run, not only on fresh machines.
rustup toolchain install --profile minimal --no-self-update >/dev/null 2>&1 || rustup show active-toolchain
if [ "${CI:-}" = true ]; then
    rustup target remove wasm32-wasip1 >/dev/null 2>&1 || true
fi

# The crate graph follows ARCHITECTURE.md's layering table (cheap: cargo metadata only).
python3 scripts/check-layers.py
# docs/security.md's threats and the tests that cover them name each other.
python3 scripts/check-security.py

# The host tools that guest-tool tests compare against, from Debian when missing (command:package).
missing=()
for cp in tree:tree bc:bc file:file strings:binutils column:bsdextrautils zip:zip unzip:unzip yq:yq \
    sqlite3:sqlite3 rg:ripgrep node:nodejs git:git; do
    command -v "${cp%%:*}" >/dev/null 2>&1 || missing+=("${cp#*:}")
done
# The sqlite3 guest is C: clang's wasm32 target and wasi-libc's headers (crates/guests/build.rs
# installs them too when missing and run as root, or says what to install).
if ! command -v clang-14 >/dev/null 2>&1 || ! command -v llvm-ar-14 >/dev/null 2>&1 ||
    [ ! -f /usr/include/wasm32-wasi/stdio.h ]; then
    missing+=(clang-14 llvm-14 wasi-libc)
fi
if [ ${#missing[@]} -gt 0 ]; then
    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing[@]}" >/dev/null
fi

# PostgreSQL's server binaries for the replicated-service tests (tests/e2e/sandboxd/cluster):
# the tests start their own throw-away cluster on a loopback port under target/ and stop it.
# Under CI=true those tests fail, not skip, when no server can be started.
if ! ls /usr/lib/postgresql/*/bin/postgres >/dev/null 2>&1; then
    (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends postgresql >/dev/null) ||
        echo "test.sh: could not install postgresql" >&2
fi

cargo test --workspace --locked "$@"

# The Python module: built by pip through its PEP 517 backend (maturin, from PyPI) into a fresh
# venv, reusing the target dir above (the wheel builds in the same dev profile), then its
# pytest suite (tests/python) against both transports.
VENV="${WASMSAND_TEST_VENV:-target/py-test-venv}"
rm -rf "$VENV"
python3 -m venv "$VENV"
"$VENV/bin/python" -m pip install --quiet --upgrade pip
"$VENV/bin/python" -m pip install --quiet "./bindings/python[test]"
"$VENV/bin/python" -m pytest -q tests/python

# The service's OpenAPI document against a live `sandboxd serve` (schemathesis from PyPI in
# its own venv under target/): no 5xx, only documented statuses, bodies matching the schemas.
# Both steps below run target/debug/e2e-sandboxd: the build of sandboxd's main.rs that the
# end-to-end suites start (tests/Cargo.toml), so `cargo test --workspace` above has just brought
# it up to date. The fallback builds it the same way, with the dev-dependencies' features: a
# `cargo build -p` would resolve features without them and rebuild much of the tree.
export SANDBOXD="${SANDBOXD:-$PWD/target/debug/e2e-sandboxd}"
[ -x "$SANDBOXD" ] || cargo test -p wasmsand-e2e --locked --no-run
scripts/api-conformance.sh

# The web panel in headless Chromium from Debian's packages, driven by playwright-core (npm,
# from the committed lock file) against a live `sandboxd serve`. Under CI=true a missing
# Chromium fails the test instead of skipping it.
if [ ! -x /usr/bin/chromium ]; then
    (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends chromium) ||
        echo "test.sh: could not install chromium" >&2
fi
(cd crates/server/tests/panel && npm ci --no-audit --no-fund --loglevel=error && node panel.test.mjs)
