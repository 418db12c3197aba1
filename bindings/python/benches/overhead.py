"""Per-call overhead of the Python SDK, in-process vs over RPC (a sandboxd child), and over
the service transport when ``--url`` names a running ``sandboxd serve``.

    python bindings/python/benches/overhead.py [--iterations N] [--large-mb M] [--url URL]

Prints the median and p90 per call of ``commands.run("true")`` (a shell builtin, so the
figure is the SDK and transport cost, not a program's) and ``files.read`` of a 1 KiB file;
then, per transport, the time of ``files.write`` and of a streamed ``files.read`` of an
M MiB file (100 by default) with the client's peak Python heap meanwhile, next to the time
the sandbox itself takes to write that many bytes (``head -c`` of ``/dev/zero`` in it).
"""

from __future__ import annotations

import argparse
import io
import os
import statistics
import time
import tracemalloc

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
    ap.add_argument("--large-mb", type=int, default=100)
    ap.add_argument("--url", help="a sandboxd serve to measure the service transport against")
    args = ap.parse_args()
    transports = ("inprocess", "rpc") + (("service",) if args.url else ())
    print(f"{'transport':<10} {'call':<22} {'median':>10} {'p90':>10}")
    for transport in transports:
        with open_sandbox(transport, args.url) as sb:
            sb.files.write("/home/user/f", b"x" * 1024)
            for name, fn in (
                ('commands.run("true")', lambda: sb.commands.run("true")),
                ("files.read (1 KiB)", lambda: sb.files.read("/home/user/f")),
                ('commands.run("echo hi | wc -c")', lambda: sb.commands.run("echo hi | wc -c")),
            ):
                n = args.iterations if "wc" not in name else max(200, args.iterations // 10)
                med, p90 = measure(fn, n)
                print(f"{transport:<10} {name:<22} {med * 1e6:>8.1f}µs {p90 * 1e6:>8.1f}µs")
    large(args.large_mb, transports, args.url)


def open_sandbox(transport: str, url: str | None, **kw: object) -> Sandbox:
    if transport == "service":
        # The service's sessions have its own caps; only the timeout carries over.
        return Sandbox(url=url, timeout_ms=kw.get("timeout_ms"))  # type: ignore[arg-type]
    return Sandbox(transport=transport, **kw)  # type: ignore[arg-type]


def large(mb: int, transports: tuple[str, ...], url: str | None, repeat: int = 3) -> None:
    size = mb * 2**20
    data = os.urandom(size)
    print(f"\n{'transport':<10} {mb} MiB file{'':<21} {'best of ' + str(repeat):>12} {'MiB/s':>8} {'client heap peak':>17}")
    for transport in transports:
        with open_sandbox(transport, url, fs_limit_bytes=3 * size + 2**26, timeout_ms=600_000) as sb:
            rows = []

            def write() -> None:
                sb.files.write("/home/user/big.bin", io.BytesIO(data))

            def read() -> None:
                n = sum(len(c) for c in sb.files.read("/home/user/big.bin", format="stream"))
                assert n == size

            def in_sandbox() -> None:
                r = sb.commands.run(f"head -c {size} /dev/zero > /home/user/zero.bin")
                assert r.exit_code == 0, r.stderr

            for name, fn in (
                ("files.write (file object)", write),
                ("files.read (stream)", read),
                ("in the sandbox: head -c", in_sandbox),
            ):
                best = float("inf")
                for _ in range(repeat):
                    t = time.perf_counter()
                    fn()
                    best = min(best, time.perf_counter() - t)
                # Once more under tracemalloc (which slows allocation) for the peak only.
                tracemalloc.start()
                fn()
                peak = tracemalloc.get_traced_memory()[1]
                tracemalloc.stop()
                rows.append((name, best, peak))
            for name, best, peak in rows:
                print(f"{transport:<10} {name:<30} {best * 1e3:>10.0f}ms {mb / best:>8.0f} {peak / 2**20:>14.1f}MiB")


if __name__ == "__main__":
    main()
