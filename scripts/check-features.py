#!/usr/bin/env python3
"""Checks that building the Python module alone compiles no shared crate a second time.

pip (through maturin) builds `bindings/python` as a package of its own, and cargo resolves
features for that package's graph only. The workspace's test build resolves them for every
member and its dev-dependencies. A crate whose features differ between the two compiles twice,
and so does everything above it. This script compares the two resolutions with `cargo tree`
and exits 1 naming each crate and the features `bindings/python/Cargo.toml` must state.

Stdlib only (Python 3.11). Usage: python3 scripts/check-features.py
"""

from __future__ import annotations

import pathlib
import subprocess
import sys

ROOT = pathlib.Path(__file__).resolve().parent.parent
PACKAGE = "wasmsand-python"


def features(*selection: str) -> dict[str, set[str]]:
    run = subprocess.run(
        ["cargo", "tree", "--locked", *selection, "--prefix", "none", "-f", "{p}|{f}"],
        cwd=ROOT,
        capture_output=True,
        text=True,
    )
    if run.returncode != 0:
        sys.exit(f"check-features: cargo tree {' '.join(selection)} failed:\n{run.stderr}")
    out = run.stdout
    seen: dict[str, set[str]] = {}
    for line in out.splitlines():
        package, _, feats = line.removesuffix(" (*)").partition("|")
        if package:
            seen.setdefault(package, set()).update(f for f in feats.split(",") if f)
    return seen


def main() -> int:
    alone = features("-p", PACKAGE, "-e", "normal,build")
    workspace = features("--workspace", "-e", "normal,build,dev")
    problems = []
    for package, feats in sorted(alone.items()):
        missing = workspace.get(package, set()) - feats
        if missing:
            problems.append(f"  {package}: {', '.join(sorted(missing))}")
    if problems:
        print(
            f"check-features: {PACKAGE} built alone (as pip builds it) resolves fewer features "
            "than the workspace's test build, so these crates and all above them compile twice; "
            "add the features to the feature-unification block of bindings/python/Cargo.toml:",
            *problems,
            sep="\n",
        )
        return 1
    print(f"check-features: {PACKAGE} alone shares every crate with the workspace build")
    return 0


if __name__ == "__main__":
    sys.exit(main())
