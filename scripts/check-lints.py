#!/usr/bin/env python3
"""Checks that the guest workspace (`wasm-tools/`) holds its code to the root's lint policy.

The two workspaces are separate cargo workspaces (the guests build for wasm32-wasip1), so each
states `[workspace.lints]` itself. This fails when the tables differ, or when a member of either
workspace does not opt in with `[lints] workspace = true`.

Stdlib only (Python 3.11). Usage: python3 scripts/check-lints.py
"""

from __future__ import annotations

import pathlib
import sys
import tomllib

ROOT = pathlib.Path(__file__).resolve().parent.parent


def load(path: pathlib.Path) -> dict:
    with path.open("rb") as f:
        return tomllib.load(f)


def members(workspace: pathlib.Path) -> list[pathlib.Path]:
    found = []
    for pattern in load(workspace / "Cargo.toml")["workspace"]["members"]:
        found.extend(sorted(workspace.glob(pattern)))
    return [m for m in found if (m / "Cargo.toml").exists()]


def main() -> int:
    problems = []
    root = load(ROOT / "Cargo.toml")["workspace"].get("lints", {})
    guests = load(ROOT / "wasm-tools" / "Cargo.toml")["workspace"].get("lints", {})
    if root != guests:
        for group in sorted(set(root) | set(guests)):
            a, b = root.get(group, {}), guests.get(group, {})
            for lint in sorted(set(a) | set(b)):
                if a.get(lint) != b.get(lint):
                    problems.append(
                        f"[workspace.lints.{group}] {lint}: Cargo.toml has {a.get(lint)!r}, "
                        f"wasm-tools/Cargo.toml has {b.get(lint)!r}"
                    )
    for workspace in (ROOT, ROOT / "wasm-tools"):
        for member in members(workspace):
            if load(member / "Cargo.toml").get("lints", {}).get("workspace") is not True:
                rel = (member / "Cargo.toml").relative_to(ROOT)
                problems.append(f"{rel}: no `[lints] workspace = true`")
    for p in problems:
        print(f"check-lints: {p}", file=sys.stderr)
    if not problems:
        print("check-lints: both workspaces share one lint policy")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
