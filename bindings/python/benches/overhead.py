"""Per-call overhead of the Python SDK, in-process vs over RPC (a sandboxd child).

    python bindings/python/benches/overhead.py [--iterations N]

Prints the median and p90 per call of ``commands.run("true")`` (a shell builtin, so the
figure is the SDK and transport cost, not a program's) and ``files.read`` of a 1 KiB file.
"""

from __future__ import annotations

import argparse
import statistics
import time

from wasmsand import Sandbox


def measure(fn, n: int) -> tuple[float, float]:
    for _ in range(min(50, n)):
        fn()
    samples = []
    for _ in range(n):
        t = time.perf_counter()
        fn()
        samples.append(time.perf_counter() - t)
    samples.sort()
    return statistics.median(samples), samples[int(len(samples) * 0.9)]


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--iterations", type=int, default=2000)
    args = ap.parse_args()
    print(f"{'transport':<10} {'call':<22} {'median':>10} {'p90':>10}")
    for transport in ("inprocess", "rpc"):
        with Sandbox(transport=transport) as sb:
            sb.files.write("/home/user/f", b"x" * 1024)
            for name, fn in (
                ('commands.run("true")', lambda: sb.commands.run("true")),
                ("files.read (1 KiB)", lambda: sb.files.read("/home/user/f")),
                ('commands.run("echo hi | wc -c")', lambda: sb.commands.run("echo hi | wc -c")),
            ):
                n = args.iterations if "wc" not in name else max(200, args.iterations // 10)
                med, p90 = measure(fn, n)
                print(f"{transport:<10} {name:<22} {med * 1e6:>8.1f}µs {p90 * 1e6:>8.1f}µs")


if __name__ == "__main__":
    main()
