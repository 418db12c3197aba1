#!/usr/bin/env bash
# The service's OpenAPI document checked against a live server with schemathesis (PyPI):
# `sandboxd serve` on a free loopback port, every operation fuzzed from the document served
# at /openapi.json, and every response must be no 5xx, a documented status and match its
# schema. Runs $SANDBOXD (scripts/test.sh passes target/debug/e2e-sandboxd, which its cargo
# stage builds; default target/debug/sandboxd). Called by scripts/test.sh (`--only api`);
# its arguments are added to schemathesis's own, and SCHEMATHESIS_EXAMPLES sets the examples
# per operation (default 100).
set -euo pipefail
cd "$(dirname "$0")/.."

SANDBOXD="${SANDBOXD:-target/debug/sandboxd}"
VENV="${WASMSAND_SCHEMATHESIS_VENV:-target/schemathesis-venv}"
[ -x "$SANDBOXD" ] || { echo "api-conformance: $SANDBOXD is missing (cargo build -p sandboxd)" >&2; exit 1; }

if [ ! -x "$VENV/bin/schemathesis" ]; then
    python3 -m venv "$VENV"
    "$VENV/bin/python" -m pip install --quiet --upgrade pip
fi
# Pinned: its command line and checks change between releases.
"$VENV/bin/python" -m pip install --quiet "schemathesis==4.32.5"

WORK="$(mktemp -d)"
SERVER_PID=
cleanup() {
    if [ -n "$SERVER_PID" ]; then
        kill "$SERVER_PID" 2>/dev/null || true
        wait "$SERVER_PID" 2>/dev/null || true
    fi
    rm -rf "$WORK"
}
trap cleanup EXIT

# Bounds on what random requests can cost the server: short runs, few sessions. Statuses
# these limits cause (429, 400) are documented like any other.
SANDBOX_MAX_TIMEOUT_SEC=3 SANDBOX_DEFAULT_EXEC_TIMEOUT_SEC=3 SANDBOX_MAX_SESSIONS=16 \
SANDBOX_SESSION_TTL_SEC=120 SANDBOX_MAX_UPLOAD_MB=4 \
    "$SANDBOXD" serve --listen 127.0.0.1:0 --data-dir "$WORK/data" --store memory >"$WORK/out" 2>"$WORK/err" &
SERVER_PID=$!
ADDR=
for _ in $(seq 1 300); do
    ADDR="$(sed -n 's|.*listening on \(http://[0-9.:]*\).*|\1|p' "$WORK/out")"
    [ -n "$ADDR" ] && break
    kill -0 "$SERVER_PID" 2>/dev/null || { cat "$WORK/err" >&2; exit 1; }
    sleep 0.1
done
[ -n "$ADDR" ] || { echo "api-conformance: sandboxd did not start" >&2; cat "$WORK/err" >&2; exit 1; }

start=$(date +%s)
status=0
# One worker: with two threads, hypothesis parses lambda sources concurrently and Python 3.11's
# `ast` keeps one recursion counter for all threads, which once failed a run with "AST
# constructor recursion depth mismatch" (a fault of the tool, not of the API under test).
"$VENV/bin/schemathesis" run "$ADDR/openapi.json" \
    --checks not_a_server_error,status_code_conformance,response_schema_conformance \
    --max-examples "${SCHEMATHESIS_EXAMPLES:-100}" \
    --seed 20261123 \
    --request-timeout 20 \
    --workers 1 \
    --suppress-health-check all \
    --warnings off \
    --report junit,ndjson --report-dir "target/schemathesis-report" "$@" || status=$?
echo "api-conformance: schemathesis took $(( $(date +%s) - start )) s (exit $status)"
if ! kill -0 "$SERVER_PID" 2>/dev/null; then
    echo "api-conformance: the server died" >&2
    cat "$WORK/err" >&2
    exit 1
fi
exit "$status"
