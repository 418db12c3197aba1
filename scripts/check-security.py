#!/usr/bin/env python3
"""Checks that docs/security.md and the tests name each other.

Every threat id (`### T-...`) lists its tests as `path::function`; each such test must exist
(a `fn function` in that file) and carry a `// Threat: ID` comment naming that id in the lines
just above it or in its body. And every `Threat:` comment in the repository's tests must name an
id the page has. Exits 1 with each problem named.

Stdlib only (Python 3.11). Usage: python3 scripts/check-security.py
"""

from __future__ import annotations

import pathlib
import re
import sys

ROOT = pathlib.Path(__file__).resolve().parent.parent
THREAT = re.compile(r"^### (T-[A-Z0-9-]+)", re.M)
TEST_REF = re.compile(r"`([\w./-]+\.rs)::(\w+)`")
TAG = re.compile(r"//\s*Threat:\s*([T\-A-Z0-9, ]+)")


def test_span(src: str, name: str) -> str | None:
    """The comment lines above `fn name` and its body (to the next top-level item)."""
    m = re.search(rf"^(?:async )?fn {name}\b", src, re.M)
    if not m:
        return None
    start = src.rfind("\n\n", 0, m.start())
    end = re.search(r"^}", src[m.start():], re.M)
    stop = m.start() + end.end() if end else len(src)
    return src[start if start >= 0 else 0 : stop]


def main() -> int:
    page = (ROOT / "docs/security.md").read_text()
    problems: list[str] = []
    ids = THREAT.findall(page)
    sections = THREAT.split(page)[1:]
    refs: dict[str, list[tuple[str, str]]] = {}
    for tid, body in zip(sections[0::2], sections[1::2]):
        refs[tid] = TEST_REF.findall(body)
        if not refs[tid]:
            problems.append(f"{tid}: names no test")
    for tid, tests in refs.items():
        for path, name in tests:
            f = ROOT / path
            if not f.exists():
                problems.append(f"{tid}: {path} does not exist")
                continue
            span = test_span(f.read_text(), name)
            if span is None:
                problems.append(f"{tid}: no fn {name} in {path}")
            elif not any(tid in [t.strip() for t in m.split(",")] for m in TAG.findall(span)):
                problems.append(f"{tid}: {path}::{name} has no `// Threat: {tid}` comment")
    known = set(ids)
    tests = sorted(ROOT.glob("crates/**/tests/**/*.rs")) + sorted(ROOT.glob("tests/**/*.rs"))
    for f in tests + sorted(ROOT.glob("crates/*/src/**/*.rs")):
        if "target" in f.parts:
            continue
        for m in TAG.findall(f.read_text()):
            for tid in (t.strip() for t in m.split(",")):
                if tid and tid not in known:
                    problems.append(f"{f.relative_to(ROOT)}: names unknown threat {tid}")
    for p in problems:
        print(f"check-security: {p}", file=sys.stderr)
    if not problems:
        n = sum(len(t) for t in refs.values())
        print(f"check-security: {len(ids)} threats, {n} tests, each naming the other")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
