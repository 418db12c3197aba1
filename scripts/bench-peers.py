#!/usr/bin/env python3
"""Per-command cost of wasmsand against its peers, measured side by side in one run.

    python3 scripts/bench-peers.py [--peers wasmsand,bashkit,just-bash] [--seconds S]
                                   [--wasmsand-python PY] [--sandboxd PATH]
                                   [--process-runs N] [--json FILE]

Each sandbox runs the same command lines in a process of its own (wasmsand: its Python module
in-process; bashkit: its Python module; just-bash: its npm package under node), one row after
the other, and the driver prints the median per call of each as a Markdown table. Every answer
is checked against the output real bash gives on this machine: a peer that answers something
else is timed all the same and marked `(wrong output)`, one that lacks the command gets `—`.

The peers are installed on first use into throw-away environments under
`target/bench-peers/` (bashkit from PyPI into a venv, just-bash from npm), at the versions the
issue's figures were taken with. wasmsand is the wheel `pip wheel ./bindings/python` builds (the
same dev profile as the tests), installed into a venv there too, unless `--wasmsand-python`
names an interpreter that already imports it.

Two figures are per process, not per call, and are measured for wasmsand only: the first
`python3` of a new process (from `Sandbox()` to the answer, the import excluded), and a new
`sandboxd` answering its first `echo` (from the spawn to the answer's line).

Compare figures within one run, on a quiet machine: a loaded machine moves wasmsand's figures
(which start programs on threads) far more than an interpreter's.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
BASHKIT = "bashkit==0.20.1"
JUST_BASH = "just-bash@3.4.2"

# (key, label, command line). The expected output is what the host's bash prints for the line.
ROWS = [
    ("wc", "`echo hello | wc -c`", "echo hello | wc -c"),
    ("jq", "`echo '{\"a\":[1,2,3]}' | jq '.a | add'`", "echo '{\"a\":[1,2,3]}' | jq '.a | add'"),
    (
        "pipeline",
        "`seq 1 5000 | grep 7 | sed … | awk …`",
        "seq 1 5000 | grep 7 | sed 's/7/seven/g' | awk '{ n += length($0) } END { print NR, n }'",
    ),
    (
        "subst",
        "function + `$(f $i)` loop, 500 times",
        "f() { echo $(( $1 * 2 )); }; s=0; for i in $(seq 1 500); do s=$(( s + $(f $i) )); done; echo $s",
    ),
    (
        "fileloop",
        "2000-line loop into a file",
        'for i in $(seq 1 2000); do echo "line $i"; done > /tmp/bench-out.txt; wc -l < /tmp/bench-out.txt',
    ),
    ("python", "`python3 -c 'print(1)'`", "python3 -c 'print(1)'"),
]
SPECIAL = [
    ("fork", "fork"),
    ("new", "new sandbox + `true`"),
]

# The runner each Python peer executes: reads {rows, seconds, peer} on stdin, prints
# {key: {"median_ms", "n", "ok"|"error"}} on stdout.
PY_RUNNER = r'''
import json, statistics, sys, time
spec = json.load(sys.stdin)
peer, budget = spec["peer"], spec["seconds"]
if peer == "wasmsand":
    from wasmsand import Sandbox
    CALLS_PER_SESSION = None
    def new():
        return Sandbox()
    def run(sb, cmd):
        r = sb.commands.run(cmd)
        return r.stdout, r.exit_code
    def fork(sb):
        return sb.fork()
    def drop(sb):
        # A fork is destroyed; a root is killed (which would end its forks too).
        sb.destroy() if sb._h.sandbox_id is not None else sb.kill()
else:
    import bashkit
    # A bashkit session refuses its 1001st exec() call and its 100 001st command ("session
    # ... limit exceeded"), so its rows use a fresh session every 40 calls (the loops run
    # 2 000 commands a call), made outside the timed calls.
    CALLS_PER_SESSION = 40
    def new():
        return bashkit.Bash()
    def run(sb, cmd):
        r = sb.execute_sync(cmd)
        return r.stdout, r.exit_code
    def fork(sb):
        return bashkit.Bash.from_snapshot(sb.snapshot())
    def drop(sb):
        pass

def measure(fn, after=None):
    # Warm up for a while (caches, modules compiled or captured on first use, in the
    # background for some), then time calls until the budget is spent.
    warm_until = time.perf_counter() + min(1.0, budget / 2)
    n = 0
    while n < 3 or time.perf_counter() < warm_until:
        after(fn())
        n += 1
    samples, spent = [], 0.0
    while (spent < budget and len(samples) < 5000) or len(samples) < 5:
        t = time.perf_counter()
        x = fn()
        dt = time.perf_counter() - t
        after(x)
        samples.append(dt)
        spent += dt
    return {"median_ms": statistics.median(samples) * 1e3, "n": len(samples), "ok": True}

class Wrong(Exception):
    pass

def row(cmd, expected):
    state = {"sb": new(), "calls": 0}
    def call():
        state["calls"] += 1
        return run(state["sb"], cmd)
    def check(answer):
        got, status = answer
        if got != expected:
            raise Wrong(got)
        if CALLS_PER_SESSION and state["calls"] >= CALLS_PER_SESSION:
            state["sb"], state["calls"] = new(), 0
    got, status = run(state["sb"], cmd)
    if status == 127 and not got:
        return {"error": "missing"}
    if got != expected:
        # Timed all the same (a peer's figure for work it did not do right is still a figure),
        # and flagged.
        return measure(call, lambda answer: check((expected, 0))) | {"wrong": got[:200]}
    try:
        return measure(call, check)
    except Wrong as e:
        return {"error": "wrong", "got": str(e)[:200]}

out = {}
for key, cmd, expected in spec["rows"]:
    try:
        out[key] = row(cmd, expected)
    except Exception as e:
        out[key] = {"error": f"{type(e).__name__}: {e}"[:200]}
sb = new()
out["fork"] = measure(lambda: fork(sb), drop)
def new_true():
    s = new()
    run(s, "true")
    return s
out["new"] = measure(new_true, drop)
json.dump(out, sys.stdout)
'''

# just-bash is ESM and async; the spec arrives as an argument (a file path).
JS_RUNNER = r"""
import { readFileSync } from "node:fs";
import { Bash } from "just-bash";
const spec = JSON.parse(readFileSync(process.argv[2], "utf8"));
const budget = spec.seconds;
const opts = { python: true };
async function measure(fn) {
  const warmUntil = performance.now() + Math.min(1000, budget * 500);
  for (let i = 0; i < 3 || performance.now() < warmUntil; i++) await fn();
  const samples = [];
  let spent = 0;
  while ((spent < budget && samples.length < 5000) || samples.length < 5) {
    const t = process.hrtime.bigint();
    await fn();
    const dt = Number(process.hrtime.bigint() - t) / 1e9;
    samples.push(dt);
    spent += dt;
  }
  samples.sort((a, b) => a - b);
  const m = samples.length;
  const median = m % 2 ? samples[(m - 1) / 2] : (samples[m / 2 - 1] + samples[m / 2]) / 2;
  return { median_ms: median * 1e3, n: m };
}
const out = {};
const sb = new Bash(opts);
for (const [key, cmd, expected] of spec.rows) {
  let r;
  try {
    r = await sb.exec(cmd);
  } catch (e) {
    out[key] = { error: String(e).slice(0, 200) };
    continue;
  }
  if (r.exitCode === 127 && r.stdout === "") {
    out[key] = { error: "missing" };
  } else if (r.stdout !== expected) {
    out[key] = { ...(await measure(() => sb.exec(cmd))), wrong: r.stdout.slice(0, 200) };
  } else {
    out[key] = { ...(await measure(() => sb.exec(cmd))), ok: true };
  }
}
out.new = { ...(await measure(async () => { const s = new Bash(opts); await s.exec("true"); })), ok: true };
process.stdout.write(JSON.stringify(out));
"""


def sh(*args: str, **kw) -> None:
    print("+", " ".join(args), file=sys.stderr)
    subprocess.run(args, check=True, **kw)


def peers_dir() -> Path:
    d = ROOT / "target" / "bench-peers"
    d.mkdir(parents=True, exist_ok=True)
    return d


def venv_with(name: str, requirement: str, marker: str) -> Path:
    """A venv under target/bench-peers holding `requirement`, made once (`marker` records what
    it was made with, so a changed requirement makes it again)."""
    v = peers_dir() / name
    py = v / "bin" / "python"
    stamp = v / "made-with"
    if py.exists() and stamp.exists() and stamp.read_text() == marker:
        return py
    shutil.rmtree(v, ignore_errors=True)
    sh(sys.executable, "-m", "venv", str(v))
    sh(str(py), "-m", "pip", "install", "--quiet", "--upgrade", "pip")
    sh(str(py), "-m", "pip", "install", "--quiet", requirement)
    stamp.write_text(marker)
    return py


def wasmsand_python() -> Path:
    """A venv with the wheel of this checkout (rebuilt each run: cargo decides what changed)."""
    wheels = peers_dir() / "wheels"
    shutil.rmtree(wheels, ignore_errors=True)
    sh(sys.executable, "-m", "pip", "wheel", "--quiet", "--no-deps", "--wheel-dir", str(wheels),
       str(ROOT / "bindings" / "python"))
    wheel = next(wheels.glob("wasmsand-*.whl"))
    v = peers_dir() / "wasmsand-venv"
    py = v / "bin" / "python"
    if not py.exists():
        sh(sys.executable, "-m", "venv", str(v))
    sh(str(py), "-m", "pip", "install", "--quiet", "--force-reinstall", "--no-deps", str(wheel))
    return py


def just_bash_dir() -> Path:
    d = peers_dir() / "just-bash"
    stamp = d / "made-with"
    if stamp.exists() and stamp.read_text() == JUST_BASH:
        return d
    shutil.rmtree(d, ignore_errors=True)
    d.mkdir()
    (d / "package.json").write_text('{"name": "bench-just-bash", "private": true, "type": "module"}\n')
    sh("npm", "install", "--silent", "--no-audit", "--no-fund", JUST_BASH, cwd=d)
    stamp.write_text(JUST_BASH)
    return d


def expected_rows() -> list[list[str]]:
    rows = []
    for key, _, cmd in ROWS:
        out = subprocess.run(["bash", "-c", cmd], capture_output=True, text=True, check=True).stdout
        rows.append([key, cmd, out])
    return rows


def run_python_peer(peer: str, py: Path, rows, seconds: float) -> dict:
    spec = json.dumps({"peer": peer, "rows": rows, "seconds": seconds})
    p = subprocess.run([str(py), "-c", PY_RUNNER], input=spec, capture_output=True, text=True)
    if p.returncode != 0:
        raise SystemExit(f"{peer}'s runner failed:\n{p.stderr}")
    return json.loads(p.stdout)


def run_just_bash(d: Path, rows, seconds: float) -> dict:
    runner = d / "runner.mjs"
    runner.write_text(JS_RUNNER)
    spec = d / "spec.json"
    spec.write_text(json.dumps({"rows": rows, "seconds": seconds}))
    p = subprocess.run(["node", str(runner), str(spec)], capture_output=True, text=True, cwd=d)
    if p.returncode != 0:
        raise SystemExit(f"just-bash's runner failed:\n{p.stderr}")
    return json.loads(p.stdout)


def first_python(py: Path, runs: int) -> list[float]:
    """The first `python3` call of a new process, in ms, once per new process."""
    code = (
        "import time\nfrom wasmsand import Sandbox\nsb = Sandbox()\nt = time.perf_counter()\n"
        "r = sb.commands.run(\"python3 -c 'print(1)'\")\nassert r.stdout == '1\\n', r\n"
        "print((time.perf_counter() - t) * 1e3)\n"
    )
    return [float(subprocess.run([str(py), "-c", code], capture_output=True, text=True,
                                 check=True).stdout) for _ in range(runs)]


def first_echo(sandboxd: Path, runs: int) -> list[float]:
    """From spawning `sandboxd` to its answer to one `echo`, in ms, once per new process."""
    req = json.dumps({"jsonrpc": "2.0", "id": 1, "method": "run", "params": {"command": "echo hi"}})
    out = []
    for _ in range(runs):
        t = time.perf_counter()
        p = subprocess.Popen([str(sandboxd)], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                             stderr=subprocess.DEVNULL, text=True)
        p.stdin.write(req + "\n")
        p.stdin.flush()
        line = p.stdout.readline()
        dt = (time.perf_counter() - t) * 1e3
        p.stdin.close()
        p.wait()
        if '"hi\\n"' not in line:
            raise SystemExit(f"sandboxd answered: {line!r}")
        out.append(dt)
    return out


def cell(r: dict | None) -> str:
    if r is None:
        return "—"
    if "error" in r:
        return "—" if r["error"] == "missing" else r["error"]
    m = r["median_ms"]
    text = f"{m:.3f} ms" if m < 0.1 else f"{m:.2f} ms" if m < 10 else f"{m:.0f} ms"
    return f"{text} (wrong output)" if "wrong" in r else text


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--peers", default="wasmsand,bashkit,just-bash")
    ap.add_argument("--seconds", type=float, default=2.0, help="time budget per row and peer")
    ap.add_argument("--wasmsand-python", type=Path, help="an interpreter that imports wasmsand")
    ap.add_argument("--sandboxd", type=Path, help="the sandboxd binary for the first-echo figure "
                    "(default: target/debug/sandboxd, built with cargo when missing)")
    ap.add_argument("--process-runs", type=int, default=10, help="new processes per per-process figure")
    ap.add_argument("--json", type=Path, help="also write the raw figures here")
    args = ap.parse_args()
    peers = [p.strip() for p in args.peers.split(",") if p.strip()]
    rows = expected_rows()

    pys: dict[str, Path] = {}
    if "wasmsand" in peers:
        pys["wasmsand"] = args.wasmsand_python or wasmsand_python()
    if "bashkit" in peers:
        pys["bashkit"] = venv_with("bashkit-venv", BASHKIT, BASHKIT)
    jb = just_bash_dir() if "just-bash" in peers else None

    results: dict[str, dict] = {}
    for peer in peers:
        print(f"measuring {peer} ...", file=sys.stderr)
        if peer == "just-bash":
            results[peer] = run_just_bash(jb, rows, args.seconds)
        else:
            results[peer] = run_python_peer(peer, pys[peer], rows, args.seconds)

    extra = {}
    if "wasmsand" in peers:
        extra["first python3 of a new process"] = first_python(pys["wasmsand"], args.process_runs)
        sandboxd = args.sandboxd or ROOT / "target" / "debug" / "sandboxd"
        if not sandboxd.exists():
            sh("cargo", "build", "--quiet", "-p", "sandboxd", cwd=ROOT)
        # One answer first, so the module cache on disk is warm as on any machine but the first.
        first_echo(sandboxd, 1)
        extra["new sandboxd answering its first `echo`"] = first_echo(sandboxd, args.process_runs)

    print(f"| work | {' | '.join(peers)} |")
    print(f"|---|{'---|' * len(peers)}")
    for key, label in [(k, lbl) for k, lbl, _ in ROWS] + SPECIAL:
        label = label.replace("|", "\\|")
        print(f"| {label} | {' | '.join(cell(results[p].get(key)) for p in peers)} |")
    for label, samples in extra.items():
        print(f"| {label} (per process) | {statistics.median(samples):.1f} ms |"
              f"{' — |' * (len(peers) - 1)}")
    print(f"\n{os.cpu_count()} cores; medians; {args.seconds:g} s per row and peer; "
          f"{time.strftime('%Y-%m-%d')}", file=sys.stderr)
    if args.json:
        args.json.write_text(json.dumps({"results": results, "per_process": extra}, indent=1))


if __name__ == "__main__":
    main()
