#!/usr/bin/env python3
"""Checks that building a binding alone compiles no shared crate a second time.

pip (through maturin) builds `bindings/python`, and `npm install` builds `bindings/node`, as a
package of its own, and cargo resolves features for that package's graph only. The workspace's test build resolves them for every
member and its dev-dependencies. A crate whose features differ between the two compiles twice,
and so does everything above it. This script compares the two resolutions with `cargo tree`
and exits 1 naming each crate and the features the binding's Cargo.toml must state.

Stdlib only (Python 3.11). Usage: python3 scripts/check-features.py
"""

from __future__ import annotations

import pathlib
import subprocess
import sys

ROOT = pathlib.Path(__file__).resolve().parent.parent
# Package name -> the manifest whose feature-unification block lists the features.
PACKAGES = {"wasmsand-python": "bindings/python/Cargo.toml", "wasmsand-node": "bindings/node/Cargo.toml"}


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
    workspace = features("--workspace", "-e", "normal,build,dev")
    failed = False
    for package, manifest in PACKAGES.items():
        alone = features("-p", package, "-e", "normal,build")
        problems = []
        for dep, feats in sorted(alone.items()):
            missing = workspace.get(dep, set()) - feats
            if missing:
                problems.append(f"  {dep}: {', '.join(sorted(missing))}")
        if problems:
            failed = True
            print(
                f"check-features: {package} built alone (as its package manager builds it) resolves "
                "fewer features than the workspace's test build, so these crates and all above them "
                f"compile twice; add the features to the feature-unification block of {manifest}:",
                *problems,
                sep="\n",
            )
        else:
            print(f"check-features: {package} alone shares every crate with the workspace build")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
