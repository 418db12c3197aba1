"""Forking for parallel attempts: prepare one sandbox, fork it once per attempt (O(1)), run the
attempts concurrently, and keep the first that passes. Forks never see each other's files, and
the prepared sandbox is untouched, ready for the next round.

    python examples/parallel_attempts.py [--transport rpc]
"""

from __future__ import annotations

import argparse
from concurrent.futures import ThreadPoolExecutor

from wasmsand import Sandbox

ATTEMPTS = {
    "off-by-one": "printf 'def f(n):\\n    return n\\n' > sol.py",
    "right": "printf 'def f(n):\\n    return n + 1\\n' > sol.py",
    "crash": "printf 'def f(n):\\n    raise SystemExit(3)\\n' > sol.py",
}
CHECK = "python3 -c 'from sol import f; assert f(1) == 2' && echo PASS"


def main(transport: str) -> str:
    with Sandbox(transport=transport) as base:
        base.files.write("/home/user/README", "implement f(n) = n + 1 in sol.py\n")

        def attempt(item: tuple[str, str]) -> tuple[str, bool]:
            name, command = item
            with base.fork() as fork:
                r = fork.commands.run(f"{command} && {CHECK}", timeout_ms=10_000)
                return name, r.stdout.strip() == "PASS"

        with ThreadPoolExecutor(max_workers=len(ATTEMPTS)) as pool:
            results = dict(pool.map(attempt, ATTEMPTS.items()))
        untouched = base.commands.run("test -e sol.py && echo dirty || echo clean").stdout.strip()
    lines = [f"{name}: {'pass' if ok else 'fail'}" for name, ok in sorted(results.items())]
    lines.append(f"base after the round: {untouched}")
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--transport", choices=["inprocess", "rpc"], default="inprocess")
    print(main(p.parse_args().transport), end="")
