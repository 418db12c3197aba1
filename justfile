# Developer tasks. The README's two commands work without `just`.

# The whole test suite, as CI runs it; `just test --only cargo -E 'test(/merge/)'` runs one
# stage with arguments for its runner (`./scripts/test.sh --list`).
test *ARGS:
    ./scripts/test.sh {{ARGS}}

# Formatting, lints and the structure checks, as CI runs them and as required before a commit.
lint:
    ./scripts/test.sh --only checks,lint

# Criterion benchmarks (VFS clone/snapshot cost, chunked writes, run latency, module cache).
# The dev profile is optimized (see Cargo.toml), so this reuses the test build.
bench *ARGS:
    cargo bench --profile dev --workspace {{ARGS}}

# Repeated code introduced by the working-tree change.
dupes:
    duplicates --change
