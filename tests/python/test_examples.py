"""The top-level `examples/` run as a user would run them, so they cannot rot: the Python ones on
every transport (tests/python/conftest.py: in-process, RPC, a `sandboxd serve`), the curl session against a real `sandboxd serve`, the MCP client against
`sandboxd mcp` over stdio, and the MCP client configuration checked for shape."""

from __future__ import annotations

import asyncio
import importlib.util
import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path
from types import ModuleType

import pytest

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
SANDBOXD = [sys.executable, "-m", "wasmsand._sandboxd"]


def load(name: str) -> ModuleType:
    spec = importlib.util.spec_from_file_location(name.replace("/", "_"), EXAMPLES / f"{name}.py")
    assert spec and spec.loader
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_quickstart(transport: str) -> None:
    assert load("quickstart").main(transport) == (
        "most common: 2 a\n"
        "python says: 45\n"
        "ls exit 2: ls: cannot access '/nope': No such file or directory\n"
        "loop: exit 124, TIMEOUT\n"
        "after: still here\n"
    )


def test_background_jobs(transport: str) -> None:
    assert load("background_jobs").main(transport) == (
        "worker started as pid 1\n"
        "while it runs: ['3 squared is 9', '4 squared is 16']\n"
        "worker exit 0: ['3', '4', '5']\n"
        "listed: [(1, False), (2, True)]\n"
        "spinner: exit 137, CANCELLED\n"
        "results: 3 lines\n"
    )


def test_async_tool(transport: str) -> None:
    assert asyncio.run(load("async_tool").main(transport)) == (
        "attempt 1: exit 1 (FAIL: 2 + 2 = 5)\n"
        "attempt 2: exit 0 (ok)\n"
        "streamed: step 1, step 2, step 3\n"
        "job: 500500\n"
    )


def test_agent_loop(transport: str) -> None:
    out = load("agent_loop").main(transport)
    steps = re.findall(r"^\$ (.*)$", out, re.M)
    assert steps == [
        "cat calc.py",
        "bash tests.sh",
        "sed -i 's/return a - b/return a + b/' calc.py",
        "bash tests.sh",
    ]
    assert "return a - b" in out and "FAIL" in out
    assert out.endswith("PASS\ndone\n")


def test_parallel_attempts(transport: str) -> None:
    assert load("parallel_attempts").main(transport) == (
        "crash: fail\noff-by-one: fail\nright: pass\nbase after the round: clean\n"
    )


@pytest.mark.parametrize("transport", ["inprocess", "rpc"])
def test_repo_agent(transport: str, tmp_path: Path) -> None:
    mod = load("repo_agent")
    repo = mod.make_repo(tmp_path / "repo")
    assert mod.main(repo, transport) == (
        "secret visible: False\n"
        "tests before: exit 1\n"
        "attempt 'return b - a': exit 1\n"
        "attempt 'return a + b': exit 0\n"
        "attempt 'return a * b': exit 1\n"
        "tests after commit: tests pass\n"
        "changed: calc.py (modified)\n"
        "repository now: return a - b\n"
    )
    assert mod.main(repo, transport, apply=True).endswith("applied to the repository\nrepository now: return a + b\n")


def test_service_session_with_curl(tmp_path: Path) -> None:
    if shutil.which("curl") is None:
        pytest.skip("curl is not installed")
    server = subprocess.Popen(
        [*SANDBOXD, "serve", "--listen", "127.0.0.1:0", "--data-dir", str(tmp_path / "data")],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
    )
    try:
        assert server.stdout is not None
        line = server.stdout.readline()
        m = re.search(r"(http://127\.0\.0\.1:\d+/api/v1/sandbox)", line)
        assert m, line
        env = {**os.environ, "B": m.group(1), "TMPDIR": str(tmp_path)}
        r = subprocess.run(
            ["bash", str(EXAMPLES / "service_session.sh")],
            env=env,
            capture_output=True,
            text=True,
            timeout=300,
        )
        assert r.returncode == 0, r.stderr
        assert r.stdout == (
            "phase: completed, exit: 0\nartifacts: sum.txt\nsum.txt: 6\nsession deleted\n"
        ), r.stdout
    finally:
        server.terminate()
        server.wait(timeout=60)


def test_mcp_client_over_stdio() -> None:
    r = subprocess.run(
        [sys.executable, str(EXAMPLES / "mcp" / "client.py"), *SANDBOXD, "mcp"],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert r.returncode == 0, r.stderr
    lines = r.stdout.splitlines()
    assert lines[0].startswith("tools: ") and "sandbox_run" in lines[0]
    assert lines[1] == "answer: 42 (exit 0)"


def test_mcp_client_configuration_names_the_server() -> None:
    config = json.loads((EXAMPLES / "mcp" / "claude_desktop_config.json").read_text())
    server = config["mcpServers"]["wasmsand"]
    assert server["command"] == "sandboxd" and server["args"] == ["mcp"]
