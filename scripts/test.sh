#!/usr/bin/env bash
# The whole test suite from a fresh clone: installs what the build and the tests need through
# the project's own files (the toolchain pinned in rust-toolchain.toml, Debian's packages named
# in scripts/host-tools.txt, PyPI and npm packages from the bindings' and the panel's own
# manifests), builds everything in one target dir, and runs every stage.
#
#   scripts/test.sh                         every stage, in the order below
#   scripts/test.sh --only cargo,python     only these stages
#   scripts/test.sh --only cargo -E 'test(/merge/)'   arguments after the options go to each
#                                           selected stage's runner (see STAGES)
#   scripts/test.sh --list                  the stages and what each runs
#
# Each stage prints one closing line `stage NAME: ok|FAILED (N s)`; the last line counts them
# (`stages: N passed, N failed`).
# A failing stage does not stop the ones after it (a red CI shows every failure at once); the
# exit status is non-zero when any stage failed.
set -uo pipefail
cd "$(dirname "$0")/.."
ROOT="$PWD"

# name|runner the extra arguments reach|what it runs
STAGES=(
    "checks|-|crate layers, module cycles, threat ids, shared features, one version (python3 scripts/check-*.py)"
    "lint|cargo clippy|cargo fmt --check and clippy -D warnings, on the workspace and on wasm-tools/ (for wasm32-wasip1)"
    "cargo|cargo nextest run|every Rust test of the workspace (one build of each test binary)"
    "docker|cargo nextest run|the docker runtime against a real engine (dockerd started here when none runs; images built from Debian's packages, cached under target/docker-images)"
    "vm|cargo nextest run|the VM runtime (crates/vm, sandboxd --mode v86, the service's vm runtime) against real QEMU (TCG when KVM does not work), booting the disk image built from Debian's packages (cached under target/vm-images)"
    "wasm-tools|cargo test|the unit tests of the guest programs in wasm-tools/, built for the host"
    "python|pytest|the Python module built by pip into a fresh venv, then tests/python"
    "api|schemathesis run|the OpenAPI document fuzzed against a live sandboxd serve"
    "panel|-|the web panel in headless Chromium (node)"
    "lsp|pytest|sandboxd lsp driven by real LSP clients (pygls over stdio, headless Neovim) against the embedded service, and on the Docker runtime's Node.js, Go and Java when an engine starts; the VS Code extension's node tests and its .vsix (vsce)"
    "node|node --test|the npm package (bindings/node): its addon built by npm ci (cargo, dev profile), tsc --strict on its samples, node --test on every transport, then wasmsand/ai against the AI SDK pinned in test/ai-sdk (its own npm ci)"
    "fuzz|-|each fuzz target (fuzz/, cargo-fuzz over libFuzzer) built with coverage instrumentation in target/fuzz, replaying its corpus and regressions, then fuzzing 20 s (scripts/fuzz.sh ci; WASMSAND_FUZZ_SECONDS)"
)

usage() {
    sed -n '2,16p' "$0" | sed 's/^# \{0,1\}//'
    exit "${1:-0}"
}

ONLY=""
while [ $# -gt 0 ]; do
    case "$1" in
    --only) ONLY="${2:?--only needs a comma-separated list of stages}"; shift 2 ;;
    --only=*) ONLY="${1#--only=}"; shift ;;
    --list)
        for s in "${STAGES[@]}"; do IFS='|' read -r n r d <<<"$s"; printf '%-11s %-20s %s\n' "$n" "($r)" "$d"; done
        exit 0 ;;
    -h | --help) usage 0 ;;
    --) shift; break ;;
    *) break ;;
    esac
done
EXTRA=("$@")

ALL=()
for s in "${STAGES[@]}"; do ALL+=("${s%%|*}"); done
SELECTED=()
if [ -z "$ONLY" ]; then
    SELECTED=("${ALL[@]}")
else
    IFS=',' read -r -a SELECTED <<<"$ONLY"
    for want in "${SELECTED[@]}"; do
        found=no
        for have in "${ALL[@]}"; do [ "$want" = "$have" ] && found=yes; done
        if [ $found = no ]; then
            echo "test.sh: no stage '$want' (stages: ${ALL[*]})" >&2
            exit 2
        fi
    done
fi
selected() {
    local s
    for s in "${SELECTED[@]}"; do [ "$s" = "$1" ] && return 0; done
    return 1
}
if [ ${#EXTRA[@]} -gt 0 ]; then
    for s in "${STAGES[@]}"; do
        IFS='|' read -r n r _ <<<"$s"
        if selected "$n" && [ "$r" = - ]; then
            echo "test.sh: stage '$n' takes no arguments; choose stages with --only (see --list)" >&2
            exit 2
        fi
    done
fi
in_ci() { [ "${CI:-}" = true ]; }

# A CI run builds a fresh clone once and throws the tree away: incremental compilation only
# writes a second copy of every workspace crate's codegen (tens of GB over the suite's test
# binaries at opt-level 2) that no later build reads. A CI run of 2026-12-03 filled its disk
# with it and failed every stage after the cargo build. Local runs keep cargo's default.
if in_ci; then
    export CARGO_INCREMENTAL="${CARGO_INCREMENTAL:-0}"
    # pip's cache would keep a second copy of every wheel the venvs install (the frameworks of
    # the integrations venv among them) on the disk the build needs.
    export PIP_NO_CACHE_DIR="${PIP_NO_CACHE_DIR:-1}"
fi
# The footprint of a cold CI run of every stage, from the stage figures of the CI run of
# 2026-12-06 less what a CI run now deletes (the README gives the figure); a full disk shows up
# as a cascade of unrelated stage failures, so say it before the first build.
NEED_GB=12
mkdir -p target
free_gb="$(df -Pk target | awk 'NR == 2 { print int($4 / 1048576) }')"
used_gb="$(du -sk target 2>/dev/null | awk '{ print int($1 / 1048576) }')"
if [ "$((free_gb + used_gb))" -lt "$NEED_GB" ]; then
    echo "test.sh: warning: ${free_gb} GB free beside the ${used_gb} GB of target/; a cold run of every stage needs about ${NEED_GB} GB" >&2
fi

# ---- set-up shared by the stages -------------------------------------------------------------

# rustup installs the pinned toolchain on first use (a no-op when it is there). Its
# wasm32-wasip1 target is NOT added here: the guest build script adds it when it is missing, as
# the README's main-job command needs on a machine whose toolchain lacks it. In CI the cargo
# stage removes the target before it builds, so that this path is exercised on every run, not
# only on fresh machines (the lint stage, which runs before it, adds the target for clippy).
rustup toolchain install --profile minimal --no-self-update >/dev/null 2>&1 || rustup show active-toolchain

# Debian's packages the build and the tests need, each named once in scripts/host-tools.txt
# (a command the tests run, or a file the build needs, and the package that provides it).
# Only the lines of the selected stages are installed.
apt_updated=no
apt_install() {
    [ $# -gt 0 ] || return 0
    if [ $apt_updated = no ]; then
        apt-get update -qq || return 1
        apt_updated=yes
    fi
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "$@" >/dev/null
}
missing=()
while read -r stages what pkg _; do
    case "$stages" in '' | '#'*) continue ;; esac
    need=no
    IFS=',' read -r -a for_stages <<<"$stages"
    for s in "${for_stages[@]}"; do selected "$s" && need=yes; done
    [ $need = yes ] || continue
    case "$what" in
    /*) compgen -G "$what" >/dev/null || missing+=("$pkg") ;;
    *)
        IFS=',' read -r -a commands <<<"$what"
        for c in "${commands[@]}"; do
            command -v "$c" >/dev/null 2>&1 || { missing+=("$pkg"); break; }
        done ;;
    esac
done <scripts/host-tools.txt
if [ ${#missing[@]} -gt 0 ]; then
    mapfile -t missing < <(printf '%s\n' "${missing[@]}" | sort -u)
    echo "test.sh: installing from Debian: ${missing[*]}"
    apt_install "${missing[@]}" || echo "test.sh: could not install ${missing[*]}" >&2
fi

# The end-to-end suites, the OpenAPI fuzzing and the panel start target/debug/e2e-sandboxd:
# the build of sandboxd's main.rs that `cargo nextest run --workspace` builds with the
# dev-dependencies' features (tests/Cargo.toml). The other stages bring it up to date the same
# way (a no-op once built; `cargo build -p sandboxd` would resolve other features and rebuild
# much of the tree).
export SANDBOXD="${SANDBOXD:-$ROOT/target/debug/e2e-sandboxd}"
need_sandboxd() {
    if [ "$TEST_BINARIES_DROPPED" = 1 ]; then
        [ -x "$SANDBOXD" ]
        return
    fi
    cargo nextest run --workspace --locked --no-run
}

# The stages that run the workspace's test binaries. A CI run deletes those binaries and the
# examples (3.5 GB of a cold run's target/) once the last of these stages has run: nothing after
# reads them, and the run of 2026-12-06 filled its disk in the python stage with them still there.
# need_sandboxd then only checks that sandboxd is there, since `--no-run` would build them again.
NEXTEST_STAGES=(cargo docker vm)
TEST_BINARIES_DROPPED=0
drop_test_binaries() {
    local s rest=0 past=0
    for s in "${ALL[@]}"; do
        if [ $past = 1 ] && selected "$s" && [[ " ${NEXTEST_STAGES[*]} " == *" $s "* ]]; then rest=1; fi
        [ "$s" = "$1" ] && past=1
    done
    in_ci && [ $rest = 0 ] && [[ " ${NEXTEST_STAGES[*]} " == *" $1 "* ]] && [ -x "$SANDBOXD" ] || return 0
    local before
    before="$(du -sk target/debug | cut -f1)"
    cargo nextest list --workspace --locked --list-type binaries-only --message-format json 2>/dev/null |
        python3 -c 'import json, sys; print("\n".join(b["binary-path"] for b in json.load(sys.stdin)["rust-binaries"].values()))' |
        while read -r bin; do [ "$bin" -ef "$SANDBOXD" ] || rm -f "$bin"; done
    rm -rf target/debug/examples
    TEST_BINARIES_DROPPED=1
    echo "test.sh: CI run: deleted the test binaries and examples ($(((before - $(du -sk target/debug | cut -f1)) / 1024)) MB), which no later stage runs"
}

# One PostgreSQL cluster for every test that needs one (tests/e2e/sandboxd/cluster): the test
# runner gives each test a process of its own, and initdb per process would cost a second each.
# Started under target/ on a free loopback port, stopped when this script exits.
PG_DIR=""
PG_PID=""
start_postgres() {
    local bin
    bin="$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -n1)"
    if [ -z "$bin" ] || [ ! -x "$bin/postgres" ]; then
        echo "test.sh: no PostgreSQL server; the PostgreSQL tests start none and skip (fail under CI=true)" >&2
        return 0
    fi
    PG_DIR="$ROOT/target/test-postgres"
    rm -rf "$PG_DIR"
    mkdir -p "$PG_DIR"
    local as=()
    if [ "$(id -u)" = 0 ]; then
        chown postgres:postgres "$PG_DIR"
        as=(runuser -u postgres --)
    fi
    "${as[@]}" "$bin/initdb" -D "$PG_DIR/data" -U postgres -A trust -E UTF8 --no-sync >"$PG_DIR/initdb.log" 2>&1 ||
        { cat "$PG_DIR/initdb.log" >&2; return 1; }
    local port
    port="$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')"
    "${as[@]}" "$bin/postgres" -D "$PG_DIR/data" -p "$port" -k "$PG_DIR" -c listen_addresses=127.0.0.1 \
        -c fsync=off -c synchronous_commit=off -c full_page_writes=off -c max_connections=300 \
        >"$PG_DIR/server.log" 2>&1 &
    PG_PID=$!
    local i
    for i in $(seq 1 600); do
        "$bin/pg_isready" -q -h 127.0.0.1 -p "$port" -U postgres && break
        kill -0 "$PG_PID" 2>/dev/null || { cat "$PG_DIR/server.log" >&2; return 1; }
        sleep 0.1
    done
    export WASMSAND_TEST_PG_PORT="$port"
}
stop_postgres() {
    if [ -n "$PG_PID" ]; then
        # runuser keeps the server as its child: a fast shutdown of the server itself.
        pkill -INT -P "$PG_PID" postgres 2>/dev/null || kill -INT "$PG_PID" 2>/dev/null || true
        wait "$PG_PID" 2>/dev/null || true
        PG_PID=""
    fi
    [ -n "$PG_DIR" ] && rm -rf "$PG_DIR/data"
}
cleanup() {
    stop_postgres
    scripts/dockerd.sh stop
}
trap cleanup EXIT

# ---- the stages --------------------------------------------------------------------------------

stage_checks() {
    # The crate graph follows ARCHITECTURE.md's layering table (cheap: cargo metadata only).
    python3 scripts/check-layers.py &&
        # No module cycle inside a crate, and the shell's syntax layer (parser, tree,
        # arithmetic, syntax errors) imports nothing above it.
        python3 scripts/check-modules.py --leaf crates/shell/src/syntax crates/model crates/vfs \
            crates/exec crates/guests crates/cpython crates/shell crates/sandbox crates/dispatch \
            crates/mcp crates/docker crates/vm crates/lsp crates/server crates/sandboxd crates/fuzz bindings/python bindings/node &&
        # docs/security.md's threats and the tests that cover them name each other.
        python3 scripts/check-security.py &&
        # pip's build of the Python module and npm's of the Node addon reuse the workspace
        # build's crates.
        python3 scripts/check-features.py &&
        # The guest workspace states the root's lint policy, and every crate opts into it.
        python3 scripts/check-lints.py &&
        # One version for the crates, the wheel and the npm package.
        python3 scripts/check-versions.py
}

stage_lint() {
    cargo fmt --all --check &&
        cargo fmt --manifest-path wasm-tools/Cargo.toml --all --check &&
        cargo fmt --manifest-path fuzz/Cargo.toml --all --check &&
        cargo clippy --workspace --all-targets --locked "${EXTRA[@]}" -- -D warnings &&
        # The guests for the target they ship for (their WASI-only code is compiled there and
        # nowhere else), beside their wasm build in one target dir. The C compiler settings are
        # crates/guests/build.rs's defaults: the sqlite and jq crates' build scripts compile C even
        # for a check.
        rustup target add wasm32-wasip1 >/dev/null &&
        CC_wasm32_wasip1="${WASMSAND_WASM_CC:-clang-14}" \
            AR_wasm32_wasip1="${WASMSAND_WASM_AR:-llvm-ar-14}" \
            CFLAGS_wasm32_wasip1="${WASMSAND_WASM_CFLAGS:---target=wasm32-wasi}" \
            cargo clippy --manifest-path wasm-tools/Cargo.toml --workspace --all-targets --locked \
            --target wasm32-wasip1 --target-dir target/guests "${EXTRA[@]}" -- -D warnings
}

# Compiles every guest and CPython into the module cache before tests run them: each test is a
# process of its own, and two starting on an empty cache would each spend a minute compiling
# CPython.
precompile() {
    need_sandboxd && "$SANDBOXD" precompile
}

stage_cargo() {
    local profile=default
    if in_ci; then
        profile=ci
        rustup target remove wasm32-wasip1 >/dev/null 2>&1 || true
    fi
    precompile && start_postgres || return 1
    cargo nextest run --workspace --locked --profile "$profile" "${EXTRA[@]}"
    local rc=$?
    stop_postgres
    return $rc
}

# The docker runtime's tests (tests/e2e/docker, and crates/docker's own) against a real engine:
# the one running, else Debian's dockerd started as root and stopped when this script ends. The
# images are built from Debian's packages (a no-op when the engine has them; a re-import when the
# cache under target/ has their root filesystems). Without an engine and not root, the stage is
# skipped, except under CI=true where it fails.
stage_docker() {
    local profile=default
    in_ci && profile=ci
    if ! scripts/dockerd.sh start; then
        if in_ci; then
            echo "test.sh: docker stage: no Docker engine could be started" >&2
            return 1
        fi
        echo "test.sh: docker stage skipped: no Docker engine (run as root to start Debian's dockerd)"
        return 0
    fi
    need_sandboxd &&
        "$SANDBOXD" images build --cache-dir "$ROOT/target/docker-images" &&
        WASMSAND_TEST_DOCKER=1 WASMSAND_TEST_DOCKERD_CTL="$ROOT/scripts/dockerd.sh" \
            cargo nextest run --workspace --locked --profile "$profile" \
            -E 'test(/^docker::/) | package(wasmsand-docker)' "${EXTRA[@]}" &&
        # The languages, sessions, hostile programs, MCP runs, the egress refusal and sandboxd
        # nested in a container again under gVisor (runsc).
        WASMSAND_TEST_DOCKER=1 WASMSAND_TEST_DOCKER_RUNTIME=runsc \
            cargo nextest run --workspace --locked --profile "$profile" \
            -E 'test(/^docker::(languages|sessions|hostile|mcp|egress|nested)::/) - test(/engine_restart|gvisor/)' "${EXTRA[@]}"
}

# The VM runtime's tests (crates/vm's own, sandboxd --mode v86 in tests/e2e/sandboxd/vm.rs, and
# the service's vm runtime in tests/e2e/service/vm.rs) against real QEMU, booting the image `sandboxd images build vm` makes from Debian's packages
# (a no-op when target/vm-images has one of the same recipe). All of them restore one saved
# machine under target/vm-state: the first boots and saves it. Building the image needs root;
# not root, the stage is skipped, except under CI=true where it fails.
stage_vm() {
    local profile=default
    in_ci && profile=ci
    if [ "$(id -u)" != 0 ]; then
        if in_ci; then
            echo "test.sh: vm stage: building the VM image needs root" >&2
            return 1
        fi
        echo "test.sh: vm stage skipped: building the VM image needs root"
        return 0
    fi
    local image
    need_sandboxd &&
        image="$("$SANDBOXD" images build vm --cache-dir "$ROOT/target/vm-images" | tail -n 1)" &&
        [ -f "$image" ] &&
        WASMSAND_TEST_VM_IMAGE="$image" WASMSAND_TEST_VM_STATE="$ROOT/target/vm-state" \
            cargo nextest run --workspace --locked --profile "$profile" \
            -E 'package(wasmsand-vm) | test(/^sandboxd::vm::/) | test(/^service::vm::/)' "${EXTRA[@]}"
}

stage_wasm_tools() {
    # The guests' pure logic (formatting, option parsing, regex translation) is tested on the
    # host: the same code, without a wasm runner. Only the crates that have unit tests.
    # Beside the wasm build of the same workspace in the one target dir (crates/guests/build.rs).
    # A CI run then deletes that host build (1.7 GB of a cold run), which nothing else reads.
    local host rc
    host="$(rustc -vV | sed -n 's/^host: //p')"
    cargo test --manifest-path wasm-tools/Cargo.toml --locked --target-dir target/guests \
        --target "$host" -p guest-rt -p wasm-coreutils -p wasm-textutils -p wasm-awk -p wasm-rg -p wasm-net -p wasm-git -p wasm-jq -p wasm-jq-c -p wasm-node "${EXTRA[@]}"
    rc=$?
    if in_ci && [ -n "$host" ]; then
        rm -rf "target/guests/$host"
    fi
    return $rc
}

stage_python() {
    # Built by pip through its PEP 517 backend (maturin, from PyPI) into a wheel, once, reusing
    # the target dir (the wheel builds in the same dev profile); installed into a fresh venv
    # with the test tools, then the pytest suite against every transport: the service
    # transport's tests start `$SANDBOXD serve` (built by `precompile`), which they find by
    # WASMSAND_SANDBOXD_BIN (tests/python/conftest.py).
    local venv="${WASMSAND_TEST_VENV:-target/py-test-venv}"
    local wheels=target/py-wheels
    rm -rf "$venv" "$wheels"
    python3 -m venv "$venv" &&
        "$venv/bin/python" -m pip install --quiet --upgrade pip &&
        "$venv/bin/python" -m pip wheel --quiet --no-deps --wheel-dir "$wheels" ./bindings/python &&
        "$venv/bin/python" -m pip install --quiet "$(ls "$wheels"/wasmsand-*.whl)[test]" &&
        precompile || return 1
    local rc=0
    WASMSAND_SANDBOXD_BIN="$SANDBOXD" "$venv/bin/python" -m pytest -q tests/python "${EXTRA[@]}" || rc=1
    python_integrations "$(ls "$wheels"/wasmsand-*.whl)" || rc=1
    return $rc
}

# The agent-framework providers against the pinned frameworks (the `integrations-test` extra),
# in a venv of their own so that no framework is in the main one (`import wasmsand` must work
# without any). The same wheel; only tests/python/test_integrations.py, where a missing
# framework fails instead of skipping. Arguments that select no test of that file (pytest's
# exit 5) are not a failure here: they were meant for the main run.
python_integrations() {
    local venv="${WASMSAND_TEST_INTEGRATIONS_VENV:-target/py-integrations-venv}"
    local t rc
    t=$(date +%s)
    rm -rf "$venv"
    python3 -m venv "$venv" &&
        "$venv/bin/python" -m pip install --quiet "$1[integrations-test]" || return 1
    WASMSAND_TEST_INTEGRATIONS=1 "$venv/bin/python" -m pytest -q tests/python/test_integrations.py "${EXTRA[@]}"
    rc=$?
    echo "python integrations: $(($(date +%s) - t)) s"
    [ $rc = 0 ] || [ $rc = 5 ]
}

stage_api() {
    need_sandboxd && scripts/api-conformance.sh "${EXTRA[@]}"
}

stage_panel() {
    # Chromium from Debian's packages (scripts/host-tools.txt); under CI=true a missing one
    # fails the test instead of skipping it.
    need_sandboxd && (cd crates/server/tests/panel && npm ci --no-audit --no-fund --loglevel=error &&
        node panel.test.mjs)
}

stage_lsp() {
    # pygls from PyPI (tests/lsp/requirements.txt) in a venv of its own; Neovim from Debian
    # (scripts/host-tools.txt). The Docker languages' tests need the engine and the images the
    # docker stage builds (cached by recipe under target/docker-images: a no-op after it);
    # without an engine they are skipped, except under CI=true.
    local venv="${WASMSAND_TEST_LSP_VENV:-target/lsp-venv}"
    rm -rf "$venv"
    python3 -m venv "$venv" &&
        "$venv/bin/python" -m pip install --quiet -r tests/lsp/requirements.txt &&
        precompile || return 1
    local rc=0 docker=0
    if scripts/dockerd.sh start; then
        "$SANDBOXD" images build --cache-dir "$ROOT/target/docker-images" >/dev/null && docker=1 || rc=1
    elif in_ci; then
        echo "test.sh: lsp stage: no Docker engine could be started" >&2
        rc=1
    fi
    WASMSAND_SANDBOXD_BIN="$SANDBOXD" WASMSAND_TEST_DOCKER=$docker \
        "$venv/bin/python" -m pytest -q -p no:cacheprovider tests/lsp "${EXTRA[@]}" || rc=1
    (cd editors/vscode && npm ci --no-audit --no-fund --loglevel=error && npm test &&
        rm -rf dist && npm run package --silent &&
        unzip -l dist/tldw-sandbox.vsix extension/out/extension.js >/dev/null) || rc=1
    return $rc
}

stage_node() {
    # `npm ci` runs the package's install script, which builds the addon with cargo in this
    # target dir and profile (one build of each shared crate: its Cargo.toml states the
    # workspace's features) and copies it next to package.json. The rpc and service tests
    # start $SANDBOXD (found by WASMSAND_SANDBOXD_BIN); under CI=true a missing one fails.
    precompile &&
        (cd bindings/node && npm ci --no-audit --no-fund --loglevel=error &&
            npx --no-install tsc -p examples/tsconfig.json) || return 1
    local rc=0
    (cd bindings/node && WASMSAND_SANDBOXD_BIN="$SANDBOXD" node --test "${EXTRA[@]}" test/*.test.js) || rc=1
    node_ai_sdk || rc=1
    return $rc
}

# The Vercel AI SDK provider (`wasmsand/ai`) against the SDK pinned in test/ai-sdk's own
# package-lock.json, installed there and never among bindings/node's dependencies
# (`require('wasmsand')` must work without it). Its postinstall links `wasmsand` into that
# node_modules, and Node keeps the link's path (--preserve-symlinks), so lib/ai.mjs finds `ai`
# there as in a project that has both. A missing SDK fails the stage.
node_ai_sdk() {
    local t rc
    t=$(date +%s)
    (cd bindings/node/test/ai-sdk && npm ci --no-audit --no-fund --loglevel=error) &&
        (cd bindings/node && npx --no-install tsc -p test/ai-sdk/tsconfig.json) &&
        (cd bindings/node/test/ai-sdk && node --preserve-symlinks --test "${EXTRA[@]}" ai-sdk.test.mjs)
    rc=$?
    echo "node ai-sdk: $(($(date +%s) - t)) s"
    return $rc
}

# The short fuzz pass: a decoder that regressed is caught on the next landing. The inputs kept
# for each target also run in the cargo stage (crates/fuzz/tests/replay.rs); this stage adds
# libFuzzer's mutations around them.
stage_fuzz() {
    # The fuzz targets build into a target dir of their own (target/fuzz, 4 GB), and this is the
    # last stage: in a CI run nothing reads the main build's outputs any more, and a CI run of
    # 2026-12-05 ran out of disk during this build with them still there. Local runs keep them.
    if in_ci && [ -d target/debug ]; then
        echo "fuzz: CI run: removing target/debug ($(du -sh target/debug | cut -f1)), which no later stage reads"
        rm -rf target/debug
    fi
    scripts/fuzz.sh ci "${WASMSAND_FUZZ_SECONDS:-20}"
}

# ---- run them --------------------------------------------------------------------------------

SUMMARY=()
FAILED=0
T0=$(date +%s)
for s in "${ALL[@]}"; do
    selected "$s" || continue
    echo "==== stage $s"
    t=$(date +%s)
    "stage_${s//-/_}"
    rc=$?
    dt=$(($(date +%s) - t))
    if [ $rc = 0 ]; then
        line="stage $s: ok (${dt} s)"
    else
        line="stage $s: FAILED, status $rc (${dt} s)"
        FAILED=$((FAILED + 1))
    fi
    drop_test_binaries "$s"
    # A full disk fails whichever stage writes next, far from what filled it: CI logs what
    # each stage left behind.
    if in_ci; then
        line="$line [$(df -Pk target | awk 'NR == 2 { printf "%.1f", $4 / 1048576 }') GB free, target/ $(du -sk target 2>/dev/null | awk '{ printf "%.1f", $1 / 1048576 }') GB]"
    fi
    echo "$line"
    SUMMARY+=("$line")
done
echo "==== summary ($(($(date +%s) - T0)) s)"
printf '%s\n' "${SUMMARY[@]}"
echo "stages: $((${#SUMMARY[@]} - FAILED)) passed, $FAILED failed"
[ $FAILED = 0 ]
