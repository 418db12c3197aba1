"""`sandboxd mcp` (as the package carries it: `python -m wasmsand._sandboxd mcp`) driven by the
official MCP Python SDK, over stdio and over streamable HTTP. The SDK validates every
structured result against the tool's output schema."""

from __future__ import annotations

import base64
import subprocess
import sys
from collections.abc import AsyncIterator, Iterator
from typing import Any

import anyio
import jsonschema
import pytest
from mcp import Client, StdioServerParameters
from mcp.shared.exceptions import MCPError

pytestmark = pytest.mark.anyio

SERVER = [sys.executable, "-m", "wasmsand._sandboxd", "mcp"]
TOOLS = {
    "sandbox_run",
    "session_create",
    "session_fork",
    "session_list",
    "session_destroy",
    "files_read",
    "files_write",
    "files_list",
    "snapshot_create",
    "snapshot_restore",
    "sandbox_diff",
    "sandbox_commit",
    "sandbox_discard",
    "sandbox_best_of",
}
# A cold module compile on a busy 2-core machine; a healthy answer takes milliseconds.
PATIENCE = 180


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture(scope="module")
def http_url() -> Iterator[str]:
    proc = subprocess.Popen(
        [*SERVER, "--http", "127.0.0.1:0"],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert proc.stdout is not None
        url = proc.stdout.readline().strip()
        assert url.startswith("http://127.0.0.1:") and url.endswith("/mcp"), url
        yield url
    finally:
        proc.terminate()
        proc.wait(timeout=PATIENCE)


@pytest.fixture(params=["stdio", "http"])
async def client(request: pytest.FixtureRequest) -> AsyncIterator[Client]:
    if request.param == "stdio":
        server: Any = StdioServerParameters(command=SERVER[0], args=SERVER[1:])
    else:
        server = request.getfixturevalue("http_url")
    async with Client(server, read_timeout_seconds=PATIENCE) as c:
        yield c


async def call(c: Client, tool: str, args: dict[str, Any] | None = None, **kw: Any) -> dict[str, Any]:
    r = await c.call_tool(tool, args or {}, **kw)
    assert not r.is_error, f"{tool}({args}): {r.content}"
    assert r.structured_content is not None
    return r.structured_content


async def call_err(c: Client, tool: str, args: dict[str, Any]) -> str:
    r = await c.call_tool(tool, args)
    assert r.is_error, f"{tool}({args}) should fail: {r}"
    return "\n".join(b.text for b in r.content if b.type == "text")


async def test_tools_have_valid_input_and_output_schemas(client: Client) -> None:
    listed = await client.list_tools()
    tools = {t.name: t for t in listed.tools}
    assert set(tools) == TOOLS
    for t in tools.values():
        jsonschema.Draft202012Validator.check_schema(t.input_schema)
        assert t.output_schema is not None, t.name
        jsonschema.Draft202012Validator.check_schema(t.output_schema)
        assert t.description
    run = tools["sandbox_run"]
    assert set(run.input_schema["properties"]) == {
        "command",
        "session_id",
        "files",
        "timeout_ms",
        "env",
        "cwd",
        "stdin",
        "runtime",
        "base_image",
        "preview",
    }
    assert run.input_schema["required"] == ["command"]
    assert "python3" in run.description and "no network" in run.description
    jsonschema.validate({"command": "ls", "timeout_ms": 5}, run.input_schema)
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate({"cmd": "ls"}, run.input_schema)


async def test_run_in_a_fresh_sandbox(client: Client) -> None:
    r = await client.call_tool("sandbox_run", {"command": "echo hi; echo err >&2; exit 4"})
    assert not r.is_error
    assert r.structured_content == {
        "exit_code": 4,
        "stdout": "hi\n",
        "stderr": "err\n",
        "truncated": {"stdout": False, "stderr": False},
        "error_class": None,
        "timed_out": False,
        "duration_ms": r.structured_content["duration_ms"],
        "session_id": None,
        "runtime": "wasm",
        "base_image": "wasmsand/default",
        "run_id": None,
    }
    text = r.content[0].text
    assert text.startswith("hi\n[stderr]\nerr\n[exit code 4"), text

    s = await call(
        client,
        "sandbox_run",
        {
            "command": "wc -c < in.bin; cat -; echo $A",
            "files": [{"path": "in.bin", "content": base64.b64encode(b"\x00\x01\x02").decode(), "encoding": "base64"}],
            "stdin": "piped\n",
            "env": {"A": "b"},
        },
    )
    assert s["stdout"] == "3\npiped\nb\n"


async def test_progress_streams_the_output(client: Client) -> None:
    expected = "line1\nline2\nline3\n"
    seen: list[tuple[float, str]] = []
    all_seen = anyio.Event()

    async def on_progress(progress: float, total: float | None, message: str | None) -> None:
        seen.append((progress, message or ""))
        if sum(len(m) for _, m in seen) >= len(expected):
            all_seen.set()

    s = await call(
        client,
        "sandbox_run",
        {"command": "for i in 1 2 3; do echo line$i; done"},
        progress_callback=on_progress,
    )
    assert s["stdout"] == expected
    # The SDK runs progress callbacks on tasks of their own: they may finish after the result.
    with anyio.fail_after(PATIENCE):
        await all_seen.wait()
    seen.sort()
    assert "".join(m for _, m in seen) == expected
    progress = [p for p, _ in seen]
    assert len(set(progress)) == len(progress)
    assert progress[-1] == len(expected)


async def test_cancelling_a_call_stops_the_run(client: Client) -> None:
    sid = (await call(client, "session_create"))["session_id"]
    started = anyio.Event()

    async def on_progress(progress: float, total: float | None, message: str | None) -> None:
        if message and "started" in message:
            started.set()

    async with anyio.create_task_group() as tg:

        async def long_call() -> None:
            await client.call_tool(
                "sandbox_run",
                {"session_id": sid, "command": "echo started; sleep 600; echo never"},
                progress_callback=on_progress,
            )

        tg.start_soon(long_call)
        with anyio.fail_after(PATIENCE):
            await started.wait()
        tg.cancel_scope.cancel()

    # The session is usable, and its last status is the cancelled run's (130).
    s = await call(client, "sandbox_run", {"session_id": sid, "command": "echo $?; echo ok"})
    assert s["stdout"] == "130\nok\n"


async def test_a_preview_and_best_of_through_the_python_mcp_client(client: Client) -> None:
    sid = (await call(client, "session_create", {"files": [{"path": "v.txt", "content": "1\n"}]}))["session_id"]
    r = await call(client, "sandbox_run", {"session_id": sid, "preview": True, "command": "echo 2 > v.txt"})
    preview = r["preview"]
    assert [(f["path"], f["status"]) for f in preview["changes"]["files"]] == [("v.txt", "modified")]
    assert "-1\n+2\n" in preview["changes"]["patch"]
    assert (await call(client, "files_read", {"session_id": sid, "path": "v.txt"}))["content"] == "1\n"
    await call(client, "sandbox_commit", {"preview_id": preview["preview_id"]})
    assert (await call(client, "files_read", {"session_id": sid, "path": "v.txt"}))["content"] == "2\n"

    best = await call(
        client,
        "sandbox_best_of",
        {"session_id": sid, "attempts": [{"command": "echo $X >> v.txt", "env": {"X": x}} for x in "ab"]},
    )
    ids = [a["preview_id"] for a in best["attempts"]]
    assert ["+a\n" in a["changes"]["patch"] for a in best["attempts"]] == [True, False]
    await call(client, "sandbox_commit", {"preview_id": ids[1]})
    await call(client, "sandbox_discard", {"preview_ids": [ids[0]]})
    assert (await call(client, "files_read", {"session_id": sid, "path": "v.txt"}))["content"] == "2\nb\n"
    await call(client, "session_destroy", {"session_id": sid})


async def test_sessions_files_forks_and_snapshots(client: Client) -> None:
    created = await call(client, "session_create", {"files": [{"path": "a.txt", "content": "one\n"}]})
    sid = created["session_id"]
    assert created["limits"]["timeout_ms"] == 30_000

    await call(client, "files_write", {"session_id": sid, "path": "b.txt", "content": "two\n", "encoding": "utf8"})
    listing = await call(client, "files_list", {"session_id": sid, "path": "."})
    assert [(e["name"], e["type"]) for e in listing["entries"]] == [("a.txt", "file"), ("b.txt", "file")]
    r = await call(client, "files_read", {"session_id": sid, "path": "a.txt"})
    assert (r["content"], r["encoding"], r["size"]) == ("one\n", "utf8", 4)
    await call(client, "files_write", {"session_id": sid, "path": "c.bin", "content": "/w==", "encoding": "base64"})
    r = await call(client, "files_read", {"session_id": sid, "path": "c.bin"})
    assert (r["content"], r["encoding"]) == ("/w==", "base64")

    snap = (await call(client, "snapshot_create", {"session_id": sid}))["snapshot_id"]
    await call(client, "sandbox_run", {"session_id": sid, "command": "rm a.txt; V=later"})
    await call(client, "snapshot_restore", {"session_id": sid, "snapshot_id": snap})
    s = await call(client, "sandbox_run", {"session_id": sid, "command": "cat a.txt; echo ${V:-unset}"})
    assert s["stdout"] == "one\nunset\n"
    assert s["session_id"] == sid

    fork = await call(client, "session_fork", {"session_id": sid})
    fid = fork["session_id"]
    assert fork["parent_session_id"] == sid
    await call(client, "sandbox_run", {"session_id": fid, "command": "echo forked > a.txt"})
    assert (await call(client, "files_read", {"session_id": sid, "path": "a.txt"}))["content"] == "one\n"
    assert (await call(client, "files_read", {"session_id": fid, "path": "a.txt"}))["content"] == "forked\n"

    ids = [s["session_id"] for s in (await call(client, "session_list"))["sessions"]]
    assert sid in ids and fid in ids
    for i in (sid, fid):
        await call(client, "session_destroy", {"session_id": i})
    ids = [s["session_id"] for s in (await call(client, "session_list"))["sessions"]]
    assert sid not in ids and fid not in ids


async def test_errors_are_tool_results_and_the_server_goes_on(client: Client) -> None:
    msg = await call_err(client, "sandbox_run", {"command": "true", "session_id": "s-gone"})
    assert "unknown session_id" in msg
    msg = await call_err(client, "files_read", {"session_id": "s-gone", "path": "x"})
    assert "session_create" in msg
    msg = await call_err(client, "sandbox_run", {"command": "true", "timeout": 1})
    assert "unknown field `timeout`" in msg
    sid = (await call(client, "session_create"))["session_id"]
    msg = await call_err(client, "files_read", {"session_id": sid, "path": "nope.txt"})
    assert "nope.txt" in msg
    msg = await call_err(client, "snapshot_restore", {"session_id": sid, "snapshot_id": "x"})
    assert "unknown snapshot_id" in msg
    with pytest.raises(MCPError, match="sandbox_run"):
        await client.call_tool("sandbox.run", {"command": "true"})
    s = await call(client, "sandbox_run", {"session_id": sid, "command": "echo still fine"})
    assert s["stdout"] == "still fine\n"
    await call(client, "session_destroy", {"session_id": sid})


async def test_python_runs_with_numpy(client: Client) -> None:
    s = await call(
        client,
        "sandbox_run",
        {"command": "python3 -c 'import numpy as np; print(int(np.arange(5).sum()))'"},
    )
    assert s["stdout"] == "10\n", s


async def test_legacy_handshake_clients_are_served() -> None:
    params = StdioServerParameters(command=SERVER[0], args=SERVER[1:])
    async with Client(params, mode="legacy", read_timeout_seconds=PATIENCE) as c:
        s = await call(c, "sandbox_run", {"command": "echo legacy"})
        assert s["stdout"] == "legacy\n"
