#!/usr/bin/env python3
"""Where the Rust test run's time goes: the slowest tests and the time of each test binary,
read from the JUnit report of cargo-nextest's `ci` profile (`target/nextest/ci/junit.xml`,
written by `scripts/test.sh` under CI=true, or by `cargo nextest run --profile ci`).

Usage: python3 scripts/test-times.py [JUNIT_XML] [--top N]

A binary's time is the sum of its tests' times (tests run in parallel, so the sum is CPU-ish
time, not the wall time of the stage). Stdlib only (Python 3.11).
"""

from __future__ import annotations

import argparse
import collections
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("junit", nargs="?", default=str(ROOT / "target/nextest/ci/junit.xml"))
    ap.add_argument("--top", type=int, default=20)
    args = ap.parse_args()
    try:
        tree = ET.parse(args.junit)
    except (OSError, ET.ParseError) as e:
        print(f"test-times: cannot read {args.junit}: {e}", file=sys.stderr)
        return 1
    tests: list[tuple[float, str, str]] = []
    per_binary: dict[str, float] = collections.defaultdict(float)
    count: dict[str, int] = collections.defaultdict(int)
    for suite in tree.getroot().iter("testsuite"):
        binary = suite.get("name", "?")
        for case in suite.iter("testcase"):
            t = float(case.get("time", "0") or 0)
            tests.append((t, binary, case.get("name", "?")))
            per_binary[binary] += t
            count[binary] += 1
    total = sum(per_binary.values())
    print(f"{len(tests)} tests, {total:.0f} s summed over tests\n")
    print(f"| test binary | tests | seconds (sum) |\n|---|---|---|")
    for binary, t in sorted(per_binary.items(), key=lambda x: -x[1]):
        print(f"| {binary} | {count[binary]} | {t:.1f} |")
    print(f"\n| slowest tests | seconds |\n|---|---|")
    for t, binary, name in sorted(tests, reverse=True)[: args.top]:
        print(f"| {binary} {name} | {t:.1f} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
