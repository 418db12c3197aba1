#!/usr/bin/env bash
# The fuzz targets of fuzz/ (cargo-fuzz over libFuzzer; docs/fuzzing.md says what each holds
# its surface to).
#
#   scripts/fuzz.sh list                       the targets
#   scripts/fuzz.sh build                      builds every target, instrumented, in target/fuzz
#   scripts/fuzz.sh run TARGET [SECONDS] [-- LIBFUZZER-OPTIONS]
#                                              fuzzes one target (default: until stopped), its
#                                              working corpus in target/fuzz-corpus/TARGET,
#                                              seeded from fuzz/corpus/ and fuzz/regressions/
#   scripts/fuzz.sh ci [SECONDS]               each target replays everything kept for it,
#                                              then fuzzes SECONDS (default 20): the test
#                                              suite's short pass
#   scripts/fuzz.sh cmin TARGET                merges the working corpus into fuzz/corpus/TARGET,
#                                              keeping only inputs that reach new edges (hit
#                                              counts aside: the committed seeds stay small)
#
# A crash is written to fuzz/artifacts/TARGET/ (ignored by git); reproduce it with
# `scripts/fuzz.sh run TARGET -- fuzz/artifacts/TARGET/crash-...`, fix its cause, and keep the
# input under fuzz/regressions/TARGET/ named after what it found: the ordinary tests
# (crates/fuzz/tests/replay.rs) replay it from then on without a fuzzer.
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT="$PWD"

# cargo-fuzz from crates.io, into the target dir (a fresh clone installs it once).
CARGO_FUZZ_VERSION=0.13.1
TOOLS="$ROOT/target/tools"
if ! "$TOOLS/bin/cargo-fuzz" --version 2>/dev/null | grep -q " $CARGO_FUZZ_VERSION\$"; then
    cargo install --quiet --locked --root "$TOOLS" cargo-fuzz --version "$CARGO_FUZZ_VERSION"
fi
export PATH="$TOOLS/bin:$PATH"

# Stable Rust: no sanitizer (they need nightly's -Z flags), coverage instrumentation only; the
# contracts in crates/fuzz check what a sanitizer would not (typed errors, models, bounds), and
# debug assertions and overflow checks are on. 16 codegen units: a cold build of the whole tree
# in about half the time of cargo-fuzz's default of one, for fuzzing a little slower.
BUILD=(-O -a --sanitizer none --codegen-units 16 --target-dir "$ROOT/target/fuzz")
# The short pass builds the whole tree once for seconds of fuzzing per target: fuzz/Cargo.toml's
# dev profile, built for build time (the project's driven crates at opt-level 1, the rest at 0).
# The runs above keep the release profile.
BUILD_CI=(--dev --sanitizer none --codegen-units 16 --target-dir "$ROOT/target/fuzz")

targets() {
    sed -n 's/^name = "\(.*\)"$/\1/p' fuzz/Cargo.toml | grep -v '^wasmsand-fuzz-targets$'
}

# libFuzzer's options for every run: a run of any target ends in seconds (the shell and stdio
# targets run commands bounded at 1 s, killed at 5 s); memory well below the machine's.
OPTS=(-timeout=30 -rss_limit_mb=3072 -max_len=65536 -print_final_stats=1)

# A target's dictionary of words, when it has one (fuzz/dicts/TARGET.dict, libFuzzer's format).
dict() {
    [ -f "fuzz/dicts/$1.dict" ] && printf '%s\n' "-dict=fuzz/dicts/$1.dict"
    return 0
}

corpora() {
    local t="$1"
    mkdir -p "target/fuzz-corpus/$t" "fuzz/corpus/$t"
    printf '%s\n' "target/fuzz-corpus/$t" "fuzz/corpus/$t"
    [ -d "fuzz/regressions/$t" ] && printf '%s\n' "fuzz/regressions/$t"
    return 0
}

case "${1:-}" in
list) targets ;;
build) cargo fuzz build "${BUILD[@]}" ;;
run)
    t="${2:?run needs a target (scripts/fuzz.sh list)}"
    shift 2
    secs=()
    if [ $# -gt 0 ] && [ "$1" != -- ]; then
        secs=("-max_total_time=$1")
        shift
    fi
    [ "${1:-}" = -- ] && shift
    mapfile -t dirs < <(corpora "$t")
    mapfile -t words < <(dict "$t")
    cargo fuzz run "${BUILD[@]}" "$t" "${dirs[@]}" -- "${OPTS[@]}" "${words[@]}" "${secs[@]}" "$@"
    ;;
ci)
    secs="${2:-20}"
    cargo fuzz build "${BUILD_CI[@]}"
    failed=()
    for t in $(targets); do
        echo "fuzz: $t: replaying its corpus, then ${secs} s of fuzzing"
        mapfile -t dirs < <(corpora "$t")
        mapfile -t words < <(dict "$t")
        # A fixed seed: the same code and corpus fuzz the same way, so the pass fails when a
        # change broke something, not when a long-standing finding happens to come up.
        cargo fuzz run "${BUILD_CI[@]}" "$t" "${dirs[@]}" -- "${OPTS[@]}" "${words[@]}" "-max_total_time=$secs" -seed=1 \
            >"target/fuzz-$t.log" 2>&1 || failed+=("$t")
        grep -E '^(stat::|INFO: Loaded|Done|==[0-9]+== ERROR)|panicked at' "target/fuzz-$t.log" | head -n 20 || true
    done
    if [ ${#failed[@]} -gt 0 ]; then
        for t in "${failed[@]}"; do
            echo "fuzz: $t FAILED; its log (target/fuzz-$t.log) ends:" >&2
            tail -n 60 "target/fuzz-$t.log" >&2
        done
        exit 1
    fi
    ;;
cmin)
    t="${2:?cmin needs a target}"
    mkdir -p "target/fuzz-corpus/$t" "fuzz/corpus/$t"
    tmp="target/fuzz-cmin-$t"
    rm -rf "$tmp" && mkdir -p "$tmp"
    cargo fuzz run "${BUILD[@]}" "$t" "$tmp" "fuzz/corpus/$t" "target/fuzz-corpus/$t" -- \
        -merge=1 -use_counters=0 "${OPTS[@]}"
    rm -rf "fuzz/corpus/$t" && mv "$tmp" "fuzz/corpus/$t"
    echo "fuzz: fuzz/corpus/$t: $(ls "fuzz/corpus/$t" | wc -l) inputs"
    ;;
*)
    sed -n '2,21p' "$0" | sed 's/^# \{0,1\}//'
    exit 2
    ;;
esac
