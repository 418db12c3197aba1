#!/usr/bin/env python3
"""What `python3` costs a machine and a process, measured through the real `sandboxd` binary.

1. First use on a machine: an empty module-cache directory, one `sandboxd exec` of
   `python3 -c 'print(1)'`: wall time and the process's peak RSS (compile included).
2. First use in a process: the same with the cache filled, from process start to exit (the
   answer is printed just before), median of several runs.
3. Memory of several processes: N `sandboxd` servers (JSON-RPC on stdio) each run `python3`
   once and stay up; the sum of their PSS (/proc/PID/smaps_rollup) counts shared pages once.

Usage: python3 scripts/python-costs.py [--sandboxd target/debug/sandboxd] [--processes 4]
       [--skip-cold]
Stdlib only. Prints one line per figure.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import tempfile
import time

COMMAND = "python3 -c 'print(1)'"


def peak_rss_of(argv: list[str], env: dict[str, str]) -> tuple[float, int, bytes]:
    start = time.perf_counter()
    proc = subprocess.Popen(argv, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    _, status, usage = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - start
    out = proc.stdout.read()
    err = proc.stderr.read()
    if os.waitstatus_to_exitcode(status) != 0 or out != b"1\n":
        raise SystemExit(f"{argv} failed: {out!r} {err.decode(errors='replace')}")
    return wall, usage.ru_maxrss, err


def pss_kib(pid: int) -> int:
    with open(f"/proc/{pid}/smaps_rollup") as f:
        for line in f:
            if line.startswith("Pss:"):
                return int(line.split()[1])
    raise SystemExit(f"no Pss line for {pid}")


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--sandboxd", default="target/debug/sandboxd")
    ap.add_argument("--processes", type=int, default=4)
    ap.add_argument("--skip-cold", action="store_true")
    args = ap.parse_args()

    cache = tempfile.mkdtemp(prefix="wasmsand-costs-")
    env = dict(os.environ, WASMSAND_CACHE_DIR=cache)
    if not args.skip_cold:
        wall, rss, err = peak_rss_of([args.sandboxd, "exec", COMMAND], env)
        print(f"first python3 on a machine (empty cache): {wall:.1f} s, peak RSS {rss / 1024:.0f} MiB")
        for line in err.decode(errors="replace").splitlines():
            print(f"  stderr: {line}")
    else:
        env = dict(os.environ)

    walls = []
    for _ in range(7):
        wall, rss, _ = peak_rss_of([args.sandboxd, "exec", COMMAND], env)
        walls.append(wall)
    print(
        f"first python3 of a process (warm cache): median {statistics.median(walls) * 1000:.0f} ms "
        f"(min {min(walls) * 1000:.0f}), peak RSS {rss / 1024:.0f} MiB"
    )

    procs = []
    try:
        for _ in range(args.processes):
            p = subprocess.Popen(
                [args.sandboxd],
                env=env,
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=subprocess.DEVNULL,
            )
            request = {"jsonrpc": "2.0", "id": 1, "method": "run", "params": {"command": COMMAND}}
            p.stdin.write((json.dumps(request) + "\n").encode())
            p.stdin.flush()
            answer = json.loads(p.stdout.readline())
            if answer.get("result", {}).get("stdout") != "1\n":
                raise SystemExit(f"unexpected answer: {answer}")
            procs.append(p)
        pss = [pss_kib(p.pid) for p in procs]
        print(
            f"{args.processes} sandboxd processes after one python3 each: PSS "
            f"{sum(pss) / 1024:.0f} MiB in all ({', '.join(f'{x / 1024:.0f}' for x in pss)} MiB)"
        )
    finally:
        for p in procs:
            p.stdin.close()
            p.wait(timeout=30)
    if not args.skip_cold:
        subprocess.run(["rm", "-rf", cache], check=False)


if __name__ == "__main__":
    main()
