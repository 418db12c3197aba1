#!/usr/bin/env bash
# The crates where unsafe code lives (exec: memory mapping, memfd images, the guests' fixed-
# signature imports; cpython: its memory image), their tests under AddressSanitizer.
#
#   scripts/asan.sh [CARGO-TEST-ARGS...]
#
# On the pinned stable compiler: RUSTC_BOOTSTRAP lets it take -Zsanitizer (the standard
# library stays uninstrumented: what ASan sees is the crates' own code and every dependency).
# Its own target dir (target/asan): an instrumented build shares nothing with the main one.
# About 12 minutes cold on 2 cores, 2 minutes of tests. Not a CI stage for that reason; run it
# after changing unsafe code (docs/fuzzing.md, "Unsafe code").
#
# LeakSanitizer is on, with scripts/lsan.supp (libwild keeps its inputs to the end on purpose).
# Two settings are not defaults, each for a reason:
# - stack instrumentation off (-asan-stack=0): guests run on corosensei's coroutine stacks,
#   which ASan does not know are switched to, so poison left there by an instrumented host
#   frame is reported against wasmer's read of its arguments from the generated code's frame
#   (a false "stack-buffer-overflow" in DynamicFunction's wrapper). Heap and globals stay
#   checked.
# - ASan's SIGSEGV/SIGBUS/SIGFPE handlers off: wasmer turns a guest's out-of-bounds access
#   into a trap through its own signal handler, which is how a guest fault is contained.
set -euo pipefail
cd "$(dirname "$0")/.."

export RUSTC_BOOTSTRAP=1
export RUSTFLAGS="-Zsanitizer=address -Cllvm-args=-asan-stack=0"
export ASAN_OPTIONS="detect_leaks=1:handle_segv=0:handle_sigbus=0:handle_sigfpe=0:allow_user_segv_handler=1${ASAN_OPTIONS:+:$ASAN_OPTIONS}"
export LSAN_OPTIONS="suppressions=$PWD/scripts/lsan.supp${LSAN_OPTIONS:+:$LSAN_OPTIONS}"
exec cargo test -p wasmsand-exec -p wasmsand-cpython --locked --no-fail-fast \
    --target "$(rustc -vV | sed -n 's/^host: //p')" --target-dir target/asan "$@"
