#!/usr/bin/env python3
"""Checks that every package of the project carries the one version: the workspace's.

The version is stated once, in the root Cargo.toml's `[workspace.package]`. The crates inherit
it (`version.workspace = true`), the Python wheel takes it from its crate through maturin
(`dynamic = ["version"]`), and npm, which needs a literal, states it in package.json and its
lock file, which this script holds to the workspace's. Exits 1 naming each one that differs.

Stdlib only (Python 3.11). Usage: python3 scripts/check-versions.py
"""

from __future__ import annotations

import json
import pathlib
import sys
import tomllib

ROOT = pathlib.Path(__file__).resolve().parent.parent


def main() -> int:
    workspace = tomllib.loads((ROOT / "Cargo.toml").read_text())["workspace"]["package"]["version"]
    problems = []
    for manifest in ("bindings/python/Cargo.toml", "bindings/node/Cargo.toml"):
        package = tomllib.loads((ROOT / manifest).read_text())["package"]
        if package.get("version") != {"workspace": True}:
            problems.append(f"{manifest}: version must be `version.workspace = true`")
    project = tomllib.loads((ROOT / "bindings/python/pyproject.toml").read_text())["project"]
    if "version" in project or "version" not in project.get("dynamic", []):
        problems.append('bindings/python/pyproject.toml: the version must be dynamic = ["version"] (from the crate)')
    pkg = json.loads((ROOT / "bindings/node/package.json").read_text())
    if pkg.get("version") != workspace:
        problems.append(f"bindings/node/package.json: version {pkg.get('version')!r}, the workspace's is {workspace!r}")
    lock = json.loads((ROOT / "bindings/node/package-lock.json").read_text())
    for where, version in (("version", lock.get("version")), ('packages[""].version', lock.get("packages", {}).get("", {}).get("version"))):
        if version != workspace:
            problems.append(f"bindings/node/package-lock.json: {where} {version!r}, the workspace's is {workspace!r}")
    if problems:
        print("check-versions: not every package carries the workspace's version:", *problems, sep="\n  ")
        return 1
    print(f"check-versions: every package is version {workspace}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
