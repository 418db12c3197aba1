#!/usr/bin/env python3
"""Regenerate the expected outputs of the shell conformance suite.

Reads every `crates/sandbox/tests/conformance/*.cases` file (sorted by name), runs each case
with the real GNU bash of this machine and writes
`crates/sandbox/tests/conformance/expected.json`: a JSON array of
`{"file", "name", "script", "stdout", "exit"}` objects, in file order then case order.

Why the environment is what it is: the sandbox starts every run with a small, fixed
environment (HOME is the initial working directory, a plain PATH, a UTF-8 C locale, USER=user,
TERM=dumb, SHELL=/bin/bash) and nothing else. `env -i` strips everything this machine's session
carries (its own HOME, locale, BASH_ENV, aliases, ...), so bash sees the same variables the
sandbox provides. Each case gets a fresh empty temporary directory that is both HOME and the
working directory, mirroring `/home/user` in a fresh sandbox; stdin is /dev/null (a run of
`Sandbox::run` has no stdin), the umask is 022 (the sandbox's default) and the locale is
C.UTF-8, so sorting and globbing are by code point and `${#x}` counts characters.

Usage:
  python3 scripts/gen-conformance.py            # rewrite expected.json
  python3 scripts/gen-conformance.py --check    # exit 1 (with a summary) if it is stale
  python3 scripts/gen-conformance.py --only NAME [--only NAME2]
                                                # run just these cases, print their results,
                                                # and update their entries in expected.json

Stdlib only (Python 3.11).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
CASES_DIR = ROOT / "crates" / "sandbox" / "tests" / "conformance"
EXPECTED = CASES_DIR / "expected.json"
TIMEOUT_S = 10
NAME_RE = re.compile(r"^[a-z0-9]+(?:-[a-z0-9]+)*$")


class CaseError(Exception):
    pass


def parse_file(path: Path) -> list[dict]:
    """Split one .cases file into cases.

    A case starts with `### <name>`; its script is every following line up to the next `###`
    line or the end of the file, verbatim, with trailing blank lines dropped. Before the first
    case, only blank lines and `#` comment lines are allowed.
    """
    cases: list[dict] = []
    current: dict | None = None
    lines: list[str] = []

    def finish() -> None:
        if current is None:
            return
        while lines and lines[-1].strip() == "":
            lines.pop()
        if not lines:
            raise CaseError(f"{path.name}: case {current['name']!r} has an empty script")
        current["script"] = "\n".join(lines)
        cases.append(current)

    text = path.read_text(encoding="utf-8")
    for lineno, line in enumerate(text.split("\n"), 1):
        if line.startswith("###"):
            finish()
            name = line[3:].strip()
            if not NAME_RE.match(name):
                raise CaseError(f"{path.name}:{lineno}: bad case name {name!r} (kebab-case)")
            current = {"file": path.name, "name": name, "line": lineno}
            lines = []
        elif current is None:
            if line.strip() and not line.startswith("#"):
                raise CaseError(f"{path.name}:{lineno}: text before the first '### name' line")
        else:
            lines.append(line)
    finish()
    return cases


def load_cases() -> list[dict]:
    files = sorted(CASES_DIR.glob("*.cases"))
    if not files:
        raise CaseError(f"no .cases files in {CASES_DIR}")
    cases: list[dict] = []
    seen: dict[str, str] = {}
    for f in files:
        for case in parse_file(f):
            where = f"{case['file']}:{case['line']}"
            if case["name"] in seen:
                raise CaseError(
                    f"duplicate case name {case['name']!r}: {seen[case['name']]} and {where}"
                )
            seen[case["name"]] = where
            cases.append(case)
    return cases


def run_case(case: dict) -> dict:
    home = tempfile.mkdtemp(prefix="conformance-")
    try:
        env_cmd = [
            "env",
            "-i",
            f"HOME={home}",
            "PATH=/usr/local/bin:/usr/bin:/bin",
            "LC_ALL=C.UTF-8",
            "LANG=C.UTF-8",
            "USER=user",
            "TERM=dumb",
            "SHELL=/bin/bash",
            "bash",
            "-c",
            case["script"],
        ]
        proc = subprocess.Popen(
            env_cmd,
            cwd=home,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            start_new_session=True,
            preexec_fn=lambda: os.umask(0o022),
        )
        try:
            out, _err = proc.communicate(timeout=TIMEOUT_S)
        except subprocess.TimeoutExpired:
            try:
                os.killpg(proc.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            proc.communicate()
            raise CaseError(f"{case['file']}: case {case['name']!r} timed out after {TIMEOUT_S} s")
        # Background jobs a case left behind must not outlive it.
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        try:
            stdout = out.decode("utf-8")
        except UnicodeDecodeError as e:
            raise CaseError(f"{case['file']}: case {case['name']!r} printed non-UTF-8 output: {e}")
        return {
            "file": case["file"],
            "name": case["name"],
            "script": case["script"],
            "stdout": stdout,
            "exit": proc.returncode,
        }
    finally:
        shutil.rmtree(home, ignore_errors=True)


def render(results: list[dict]) -> str:
    return json.dumps(results, indent=1, ensure_ascii=False) + "\n"


def summarize_diff(old: list[dict], new: list[dict]) -> list[str]:
    old_by = {c["name"]: c for c in old}
    new_by = {c["name"]: c for c in new}
    msgs = []
    for name in new_by:
        if name not in old_by:
            msgs.append(f"added: {name}")
        elif old_by[name] != new_by[name]:
            fields = [k for k in ("file", "script", "stdout", "exit") if old_by[name].get(k) != new_by[name].get(k)]
            msgs.append(f"changed: {name} ({', '.join(fields)})")
    for name in old_by:
        if name not in new_by:
            msgs.append(f"removed: {name}")
    if not msgs and [c["name"] for c in old] != [c["name"] for c in new]:
        msgs.append("order changed")
    return msgs


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--check", action="store_true", help="exit 1 if expected.json is stale")
    ap.add_argument("--only", action="append", metavar="NAME", help="run only this case (repeatable)")
    args = ap.parse_args()

    try:
        cases = load_cases()
        if args.only:
            wanted = set(args.only)
            unknown = wanted - {c["name"] for c in cases}
            if unknown:
                raise CaseError(f"unknown case(s): {', '.join(sorted(unknown))}")
            cases = [c for c in cases if c["name"] in wanted]
        results = [run_case(c) for c in cases]
    except CaseError as e:
        print(f"gen-conformance: {e}", file=sys.stderr)
        return 2

    old: list[dict] = []
    if EXPECTED.exists():
        old = json.loads(EXPECTED.read_text(encoding="utf-8"))

    if args.only:
        for r in results:
            print(f"### {r['name']} (exit {r['exit']})")
            sys.stdout.write(r["stdout"])
        if args.check:
            old_by = {c["name"]: c for c in old}
            stale = [r["name"] for r in results if old_by.get(r["name"]) != r]
            for n in stale:
                print(f"stale: {n}", file=sys.stderr)
            return 1 if stale else 0
        by_name = {r["name"]: r for r in results}
        merged = [by_name.get(c["name"], c) for c in old]
        missing = [r for r in results if r["name"] not in {c["name"] for c in old}]
        if missing:
            print("gen-conformance: new case(s) not in expected.json; run without --only "
                  "to place them", file=sys.stderr)
        else:
            EXPECTED.write_text(render(merged), encoding="utf-8")
        return 0

    if args.check:
        msgs = summarize_diff(old, results)
        if msgs or render(old) != render(results):
            print(f"expected.json is stale ({len(msgs)} difference(s)); run "
                  "python3 scripts/gen-conformance.py", file=sys.stderr)
            for m in msgs[:50]:
                print(f"  {m}", file=sys.stderr)
            if len(msgs) > 50:
                print(f"  ... and {len(msgs) - 50} more", file=sys.stderr)
            return 1
        print(f"expected.json is up to date ({len(results)} cases)")
        return 0

    EXPECTED.write_text(render(results), encoding="utf-8")
    print(f"wrote {EXPECTED.relative_to(ROOT)} ({len(results)} cases)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
