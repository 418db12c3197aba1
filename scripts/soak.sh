#!/usr/bin/env bash
# The soak benchmarks (scripts/soak.py; a benchmark, not a test stage): a throw-away venv with
# scripts/soak-requirements.txt, and sandboxd built in the dev profile.
#   scripts/soak.sh service [--minutes 60] [--clients 6]
#   scripts/soak.sh stdio [--cycles 100000]
set -euo pipefail
cd "$(dirname "$0")/.."
venv=target/soak-venv
if [ ! -x "$venv/bin/python" ]; then
    python3 -m venv "$venv"
    "$venv/bin/python" -m pip install --quiet -r scripts/soak-requirements.txt
fi
if [ -z "${SANDBOXD:-}" ]; then
    cargo build --quiet -p sandboxd
    export SANDBOXD="$PWD/target/debug/sandboxd"
    "$SANDBOXD" precompile >/dev/null
fi
exec "$venv/bin/python" scripts/soak.py "$@"
