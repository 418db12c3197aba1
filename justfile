# Developer tasks. The README's two commands work without `just`.

# The whole test suite, as CI runs it.
test *ARGS:
    ./scripts/test.sh {{ARGS}}

# Formatting and lints, as required before a commit.
lint:
    cargo fmt --all --check
    cargo clippy --workspace --all-targets -- -D warnings

# Criterion benchmarks (VFS clone/snapshot cost, chunked writes, run latency, module cache).
# The dev profile is optimized (see Cargo.toml), so this reuses the test build.
bench *ARGS:
    cargo bench --profile dev --workspace {{ARGS}}

# Repeated code introduced by the working-tree change.
dupes:
    duplicates --change
