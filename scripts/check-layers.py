#!/usr/bin/env python3
"""Checks the workspace's crate dependency graph against the layering table of ARCHITECTURE.md.

The table between `<!-- layers:begin` and `<!-- layers:end -->` lists, for each crate, the
workspace crates it may depend on. This script reads the real graph with `cargo metadata`
(normal and build dependencies; dev-dependencies are free) and exits 1, naming each offending
edge, when a crate depends on a workspace crate not in its row or is missing from the table.

Stdlib only (Python 3.11). Usage: python3 scripts/check-layers.py
"""

from __future__ import annotations

import json
import pathlib
import subprocess
import sys

ROOT = pathlib.Path(__file__).resolve().parent.parent


def allowed_edges(text: str) -> dict[str, set[str]]:
    begin = text.index("<!-- layers:begin")
    end = text.index("<!-- layers:end -->")
    rows: dict[str, set[str]] = {}
    for line in text[begin:end].splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) != 3 or cells[0] in ("dir", "") or set(cells[0]) <= {"-"}:
            continue
        package, deps = cells[1], cells[2]
        rows[package] = {d.strip() for d in deps.split(",") if d.strip()}
    if not rows:
        sys.exit("check-layers: no rows found in ARCHITECTURE.md's layers table")
    return rows


def main() -> int:
    allowed = allowed_edges((ROOT / "ARCHITECTURE.md").read_text())
    meta = json.loads(
        subprocess.run(
            ["cargo", "metadata", "--format-version", "1", "--no-deps", "--offline"],
            cwd=ROOT,
            check=True,
            capture_output=True,
            text=True,
        ).stdout
    )
    members = {p["name"]: p for p in meta["packages"]}
    problems = []
    for name, pkg in sorted(members.items()):
        if name not in allowed:
            problems.append(f"{name}: not in ARCHITECTURE.md's layers table")
            continue
        for dep in pkg["dependencies"]:
            if dep["name"] not in members or dep.get("kind") == "dev":
                continue
            if dep["name"] not in allowed[name]:
                kind = dep.get("kind") or "normal"
                problems.append(f"{name} -> {dep['name']} ({kind}): not allowed by the layering")
    for name in sorted(set(allowed) - set(members)):
        problems.append(f"{name}: in ARCHITECTURE.md's layers table but not in the workspace")
    for p in problems:
        print(f"check-layers: {p}", file=sys.stderr)
    if not problems:
        print(f"check-layers: {len(members)} crates follow ARCHITECTURE.md's layering")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
