#!/usr/bin/env python3
"""Soak benchmarks (issue 35, item 4): a long mixed load on `sandboxd serve` (SQLite store) and
on the stdio server, sampling the process every minute (or every N cycles) and failing when a
resource keeps growing after the warm-up. A benchmark, not a CI test: it runs for an hour.

    scripts/soak.sh service [--minutes 60] [--clients 6] [--max-runs 200000] [--warmup 10]
    scripts/soak.sh stdio [--cycles 100000]

(`scripts/soak.sh` makes a throw-away venv with scripts/soak-requirements.txt: `websockets`
for the log streams, `matplotlib` for the plots.) Results: target/soak/<kind>.json and
docs/soak/<kind>.png.

service: concurrent clients mix sessions (create, tar upload, a run with capture patterns,
artifact list and download, delete), one-shot runs, runs cancelled while they sleep,
WebSocket readers that stall (read one frame, sleep past the heartbeat, then go on) or vanish
(drop the TCP connection mid-stream), and runs with 1 MB of output. Each minute: the
server's RSS, open descriptors and threads (from /proc), the store's bytes on disk (the
SQLite files) and per stored run, the files in the server's TMPDIR, the data directory's
files, and the runs done.

stdio: `sandboxd` on stdin/stdout, 100 000 cycles of sandbox.fork -> run -> sandbox.destroy,
sampled every 1 000 cycles: RSS, descriptors, threads.

Growth rule: the samples after the warm-up are split in halves; a metric fails when the
median of the second half is above the first half's by more than its tolerance (RSS: 10% +
32 MiB; descriptors +16; threads +8; TMPDIR files +16; store bytes per run: 10% + 512).
"""

from __future__ import annotations

import argparse
import io
import json
import os
import pathlib
import random
import re
import socket
import statistics
import subprocess
import sys
import tarfile
import tempfile
import threading
import time
import urllib.error
import urllib.request

ROOT = pathlib.Path(__file__).resolve().parent.parent
BASE = "/api/v1/sandbox"
SERVICE_METRICS = ["rss_mb", "fds", "threads", "store_bytes_per_run", "tmp_files", "iterations"]
STDIO_METRICS = ["rss_mb", "fds", "threads"]
TOLERANCE = {
    "rss_mb": (0.10, 32.0),
    "fds": (0.0, 16.0),
    "threads": (0.0, 8.0),
    "tmp_files": (0.0, 16.0),
    "store_bytes_per_run": (0.10, 512.0),
}


def proc_stats(pid: int) -> dict:
    status = pathlib.Path(f"/proc/{pid}/status").read_text()
    rss_kb = int(re.search(r"VmRSS:\s+(\d+)", status).group(1))
    threads = int(re.search(r"Threads:\s+(\d+)", status).group(1))
    fds = len(os.listdir(f"/proc/{pid}/fd"))
    return {"rss_mb": rss_kb / 1024, "threads": threads, "fds": fds}


def count_files(d: pathlib.Path) -> int:
    return sum(len(files) for _, _, files in os.walk(d)) if d.exists() else 0


def growth(samples: list[dict], warmup_s: float) -> dict:
    """For each metric: the two medians and whether the second passes the tolerance."""
    after = [s for s in samples if s["t"] >= warmup_s]
    out = {}
    if len(after) < 4:
        return {"error": f"only {len(after)} samples after the warm-up"}
    half = len(after) // 2
    for metric, (rel, abs_) in TOLERANCE.items():
        a = [s[metric] for s in after[:half] if metric in s]
        b = [s[metric] for s in after[half:] if metric in s]
        if not a or not b:
            continue
        m1, m2 = statistics.median(a), statistics.median(b)
        limit = m1 * (1 + rel) + abs_
        out[metric] = {"first_half": m1, "second_half": m2, "limit": limit, "ok": m2 <= limit}
    return out


def plot(samples: list[dict], metrics: list[str], title: str, xkey: str, path: pathlib.Path):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(len(metrics), 1, figsize=(8, 1.9 * len(metrics)), sharex=True)
    for ax, m in zip(axes, metrics):
        ax.plot([s[xkey] / (60 if xkey == "t" else 1) for s in samples], [s.get(m, 0) for s in samples], lw=1.2)
        ax.set_ylabel(m, fontsize=8)
        ax.set_ylim(bottom=0)
        ax.grid(alpha=0.3)
        ax.tick_params(labelsize=7)
    axes[-1].set_xlabel("minutes" if xkey == "t" else xkey, fontsize=8)
    fig.suptitle(title, fontsize=9)
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=90)


# ---- the service --------------------------------------------------------------------------


class Client:
    def __init__(self, origin: str):
        self.origin = origin

    def call(self, method: str, path: str, body=None, content_type="application/json", raw=False):
        data = None
        if body is not None:
            data = body if isinstance(body, bytes) else json.dumps(body).encode()
        req = urllib.request.Request(self.origin + BASE + path, data=data, method=method)
        if data is not None:
            req.add_header("content-type", content_type)
        try:
            with urllib.request.urlopen(req, timeout=120) as r:
                payload = r.read()
                return r.status, (payload if raw else (json.loads(payload) if payload else None))
        except urllib.error.HTTPError as e:
            return e.code, e.read()

    def wait(self, run_id: str, limit=120):
        end = time.time() + limit
        while time.time() < end:
            status, run = self.call("GET", f"/runs/{run_id}")
            if status == 200 and run["phase"] in ("completed", "failed", "timed_out", "killed"):
                return run
            time.sleep(0.05)
        raise RuntimeError(f"run {run_id} did not end")


def small_tar() -> bytes:
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w") as t:
        for name, text in [("src/main.py", "print(sum(range(100)))\n"), ("data.txt", "x\n" * 100)]:
            b = text.encode()
            info = tarfile.TarInfo(name)
            info.size = len(b)
            t.addfile(info, io.BytesIO(b))
    return buf.getvalue()


def one_shot(c: Client, command, **extra):
    body = {"spec_version": "1.0", "base_image": "wasmsand/default", "command": command, **extra}
    status, created = c.call("POST", "/runs", body)
    if status == 429:
        time.sleep(0.5)
        return None
    assert status in (200, 202), (status, created)
    return created["run_id"]


def work_session(c: Client, ws_url: str):
    status, s = c.call("POST", "/sessions", {"spec_version": "1.0"})
    if status == 429:
        time.sleep(0.5)
        return
    sid = s["session_id"]
    c.call("POST", f"/sessions/{sid}/files", small_tar(), content_type="application/x-tar")
    status, created = c.call("POST", "/runs", {
        "spec_version": "1.0", "session_id": sid,
        "command": ["bash", "-c", "mkdir -p out; python3 src/main.py > out/sum.txt; wc -l data.txt"],
        "capture_patterns": ["out/**"],
    })
    if status in (200, 202):
        run = c.wait(created["run_id"])
        if run["phase"] == "completed":
            c.call("GET", f"/runs/{created['run_id']}/artifacts")
            c.call("GET", f"/runs/{created['run_id']}/artifacts/out/sum.txt", raw=True)
    c.call("DELETE", f"/sessions/{sid}")


def run_waited(c: Client, command):
    rid = one_shot(c, command)
    if rid:
        c.wait(rid)


def work_one_shot(c: Client, ws_url: str):
    run_waited(c, ["bash", "-c", "seq 1 200 | awk '{s+=$1} END {print s}'"])


def work_cancel(c: Client, ws_url: str):
    rid = one_shot(c, ["bash", "-c", "sleep 30"])
    if rid:
        time.sleep(0.2)
        c.call("POST", f"/runs/{rid}/cancel", {})
        c.wait(rid)


def work_big_output(c: Client, ws_url: str):
    run_waited(c, ["bash", "-c", "yes 'a line of output' | head -c 1000000"])


def work_stalled_reader(c: Client, ws_url: str):
    from websockets.sync.client import connect

    rid = one_shot(c, ["bash", "-c", "for i in $(seq 1 40); do echo line $i; sleep 0.05; done"])
    if not rid:
        return
    with connect(f"{ws_url}/runs/{rid}/stream", open_timeout=30) as ws:
        ws.recv(timeout=30)
        time.sleep(random.uniform(1, 12))  # stalls: the server must not wait for it
        try:
            while True:
                frame = json.loads(ws.recv(timeout=30))
                if frame.get("type") == "event" and frame.get("event") == "end":
                    break
        except Exception:
            pass
    c.wait(rid)


def work_vanishing_reader(c: Client, ws_url: str):
    from websockets.sync.client import connect

    rid = one_shot(c, ["bash", "-c", "yes vanish | head -c 400000"])
    if not rid:
        return
    ws = connect(f"{ws_url}/runs/{rid}/stream", open_timeout=30)
    ws.recv(timeout=30)
    # Gone without a close frame: the TCP connection is reset under the server.
    ws.socket.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, b"\x01\x00\x00\x00\x00\x00\x00\x00")
    ws.socket.close()
    c.wait(rid)


WORK = [
    (work_session, 3),
    (work_one_shot, 3),
    (work_cancel, 1),
    (work_big_output, 1),
    (work_stalled_reader, 1),
    (work_vanishing_reader, 1),
]


def service(args) -> int:
    sandboxd = os.environ.get("SANDBOXD") or str(ROOT / "target/debug/sandboxd")
    work = pathlib.Path(tempfile.mkdtemp(prefix="wasmsand-soak-"))
    data, tmp = work / "data", work / "tmp"
    tmp.mkdir(parents=True)
    env = dict(os.environ, TMPDIR=str(tmp), SANDBOX_LOG_FORMAT="json", RUST_LOG="warn")
    env.pop("SANDBOX_STORE_BACKEND", None)
    srv = subprocess.Popen(
        [sandboxd, "serve", "--listen", "127.0.0.1:0", "--data-dir", str(data),
         "--set", "SANDBOX_USER_RUNS_PER_MINUTE=1000000", "--set", "SANDBOX_MAX_CONCURRENT_RUNS=8",
         "--set", "SANDBOX_QUEUE_MAX_LENGTH=100"],
        stdout=subprocess.PIPE, stderr=open(work / "server.log", "w"), env=env, text=True,
    )
    line = srv.stdout.readline()
    m = re.search(r"http://([0-9.:]+)", line)
    if not m:
        print("soak: the server did not start:", line, (work / "server.log").read_text()[-2000:])
        return 2
    origin = f"http://{m.group(1)}"
    ws_url = origin.replace("http://", "ws://") + BASE
    c = Client(origin)
    stop = threading.Event()
    counts = {"iterations": 0, "errors": 0}
    errors: list[str] = []
    lock = threading.Lock()

    def client_loop(seed: int):
        rnd = random.Random(seed)
        funcs = [f for f, w in WORK for _ in range(w)]
        while not stop.is_set():
            f = rnd.choice(funcs)
            try:
                f(c, ws_url)
                with lock:
                    counts["iterations"] += 1
            except Exception as e:  # a soak counts and goes on; the errors are in the report
                with lock:
                    counts["errors"] += 1
                    if len(errors) < 50:
                        errors.append(f"{f.__name__}: {e!r}")

    threads = [threading.Thread(target=client_loop, args=(i,), daemon=True) for i in range(args.clients)]
    for t in threads:
        t.start()
    samples = []
    t0 = time.time()
    store = data / "meta"
    try:
        while True:
            elapsed = time.time() - t0
            status, page = c.call("GET", "/admin/runs?limit=1")
            stored = page.get("total") if isinstance(page, dict) else None
            store_bytes = sum(p.stat().st_size for p in store.glob("sandbox_store.db*")) if store.exists() else 0
            s = {"t": elapsed, **proc_stats(srv.pid), "store_bytes": store_bytes,
                 "tmp_files": count_files(tmp), "data_files": count_files(data),
                 "iterations": counts["iterations"], "errors": counts["errors"]}
            if stored:
                s["stored_runs"] = stored
                s["store_bytes_per_run"] = store_bytes / stored
            samples.append(s)
            print(json.dumps({k: (round(v, 1) if isinstance(v, float) else v) for k, v in s.items()}), flush=True)
            if elapsed >= args.minutes * 60 or counts["iterations"] >= args.max_runs:
                break
            time.sleep(max(0.0, args.sample_sec - (time.time() - t0 - elapsed)))
    finally:
        stop.set()
        for t in threads:
            t.join(60)
        srv.terminate()
        srv.wait(120)
    verdict = growth(samples, args.warmup * 60)
    report = {"kind": "service", "clients": args.clients, "minutes": args.minutes,
              "samples": samples, "growth": verdict, "errors": errors}
    out = ROOT / "target/soak/service.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(report, indent=1))
    replot(report)
    return verdict_exit(verdict, counts)


def verdict_exit(verdict: dict, counts: dict) -> int:
    print(json.dumps({"growth": verdict, **counts}, indent=1))
    if "error" in verdict:
        return 1
    return 0 if all(v["ok"] for v in verdict.values()) else 1


# ---- the stdio server -------------------------------------------------------------------


def stdio(args) -> int:
    sandboxd = os.environ.get("SANDBOXD") or str(ROOT / "target/debug/sandboxd")
    p = subprocess.Popen([sandboxd], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, bufsize=1)
    next_id = [0]

    def call(method, params=None):
        next_id[0] += 1
        p.stdin.write(json.dumps({"jsonrpc": "2.0", "id": next_id[0], "method": method, "params": params or {}}) + "\n")
        p.stdin.flush()
        resp = json.loads(p.stdout.readline())
        if "error" in resp:
            raise RuntimeError(f"{method}: {resp['error']}")
        return resp["result"]

    call("run", {"command": "mkdir -p /home/user/w && echo base > /home/user/w/f"})
    samples = []
    t0 = time.time()
    for i in range(1, args.cycles + 1):
        sid = call("sandbox.fork")["sandboxId"]
        r = call("run", {"sandboxId": sid, "command": f"echo {i} >> w/f; wc -l < w/f"})
        assert r["stdout"].strip() == "2", r
        call("sandbox.destroy", {"sandboxId": sid})
        if i % args.sample_every == 0:
            s = {"t": time.time() - t0, "cycles": i, **proc_stats(p.pid)}
            samples.append(s)
            print(json.dumps({k: (round(v, 1) if isinstance(v, float) else v) for k, v in s.items()}), flush=True)
    call("kill")
    p.stdin.close()
    p.wait(60)
    # The warm-up is the first tenth of the cycles.
    verdict = growth([{**s, "t": s["cycles"]} for s in samples], args.cycles / 10)
    report = {"kind": "stdio", "cycles": args.cycles, "seconds": time.time() - t0, "samples": samples, "growth": verdict}
    out = ROOT / "target/soak/stdio.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(report, indent=1))
    replot(report)
    return verdict_exit(verdict, {"cycles": args.cycles})


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = ap.add_subparsers(dest="kind", required=True)
    s = sub.add_parser("service")
    s.add_argument("--minutes", type=float, default=60)
    s.add_argument("--clients", type=int, default=6)
    s.add_argument("--max-runs", type=int, default=200_000)
    s.add_argument("--warmup", type=float, default=10, help="minutes before growth counts")
    s.add_argument("--sample-sec", type=float, default=60)
    d = sub.add_parser("stdio")
    d.add_argument("--cycles", type=int, default=100_000)
    d.add_argument("--sample-every", type=int, default=1000)
    p = sub.add_parser("plot", help="draw the PNG of a saved report again")
    p.add_argument("report", type=pathlib.Path)
    args = ap.parse_args()
    if args.kind == "plot":
        return replot(json.loads(args.report.read_text()))
    return service(args) if args.kind == "service" else stdio(args)


def replot(report: dict) -> int:
    if report["kind"] == "stdio":
        plot(report["samples"], STDIO_METRICS, f"sandboxd (stdio), {report['cycles']} fork/run/destroy cycles",
             "cycles", ROOT / "docs/soak/stdio.png")
    else:
        plot(report["samples"], SERVICE_METRICS,
             f"sandboxd serve (SQLite), {report['clients']} clients, {report['minutes']:g} min", "t",
             ROOT / "docs/soak/service.png")
    return 0


if __name__ == "__main__":
    sys.exit(main())
