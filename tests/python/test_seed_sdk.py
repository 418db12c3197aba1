"""Seed 001's Python SDK, used as the seed writes it, on every transport.

``seed_program`` calls only what the seed's SDK steps define (``Sandbox(timeout_ms=...,
fs_limit_bytes=...)``, ``commands.run(command)``, ``files.read/write/list/mkdir/rm/stat``,
``snapshot``/``restore``, ``fork``, ``destroy``, ``kill``, the context manager) and names no
transport: ``$WASMSAND_TRANSPORT`` moves it, as it would move a user's program. Then the
``AsyncSandbox(...)`` constructor, used the way ``Sandbox(...)`` is."""

from __future__ import annotations

import asyncio

import pytest

from wasmsand import AsyncSandbox, FileInfo, Sandbox, SandboxDestroyedError


def seed_program() -> None:
    with Sandbox(timeout_ms=30_000, fs_limit_bytes=256 * 1024 * 1024) as sb:
        result = sb.commands.run("echo hello")
        assert result.stdout == "hello\n"
        assert result.stderr == ""
        assert result.exit_code == 0
        assert isinstance(result.execution_time_ms, float)
        assert result.truncated is None
        assert result.error_class is None

        # files.read returns bytes, whatever was written and whoever wrote it.
        sb.files.write("/tmp/test.txt", b"data\x00\xff")
        assert sb.files.read("/tmp/test.txt") == b"data\x00\xff"
        sb.files.write("/tmp/text.txt", "text ✓")
        assert sb.files.read("/tmp/text.txt") == "text ✓".encode("utf-8")
        sb.commands.run("echo from-shell > /tmp/shell.txt")
        assert sb.files.read("/tmp/shell.txt") == b"from-shell\n"

        sb.files.mkdir("/tmp/d")
        sb.files.write("/tmp/d/a", b"abc")
        assert sb.files.list("/tmp/d") == [FileInfo(name="a", type="file", size=3)]
        assert sb.files.stat("/tmp/d/a") == FileInfo(name="a", type="file", size=3)
        sb.files.rm("/tmp/d/a")
        assert sb.files.list("/tmp/d") == []

        snap = sb.snapshot()
        assert isinstance(snap, str)
        sb.files.write("/tmp/test.txt", b"changed")
        sb.restore(snap)
        assert sb.files.read("/tmp/test.txt") == b"data\x00\xff"

        # A fork, a fork's fork, and reading after a write in each.
        fork = sb.fork()
        assert fork.files.read("/tmp/test.txt") == b"data\x00\xff"
        fork.files.write("/tmp/test.txt", b"fork")
        assert fork.files.read("/tmp/test.txt") == b"fork"
        assert sb.files.read("/tmp/test.txt") == b"data\x00\xff"
        grandchild = fork.fork()
        assert grandchild.files.read("/tmp/test.txt") == b"fork"
        assert grandchild.commands.run("cat /tmp/test.txt").stdout == "fork"
        grandchild.files.write("/tmp/new.txt", "grandchild")
        assert grandchild.files.read("/tmp/new.txt") == b"grandchild"
        grandchild.destroy()
        fork.destroy()
        try:
            sb.destroy()
        except RuntimeError as e:
            assert "kill" in str(e)
        else:
            raise AssertionError("destroy() on the root must refuse and name kill()")

    with Sandbox(timeout_ms=300, fs_limit_bytes=256 * 1024 * 1024) as sb:
        r = sb.commands.run("while true; do :; done")
        assert r.error_class == "TIMEOUT"
        assert sb.commands.run("echo alive").stdout == "alive\n"


@pytest.fixture
def named_by_env(transport: str, monkeypatch: pytest.MonkeyPatch) -> str:
    monkeypatch.setenv("WASMSAND_TRANSPORT", transport)
    return transport


def test_the_seed_program_runs_on_every_transport(named_by_env: str) -> None:
    seed_program()


def test_the_environment_picks_the_transport(named_by_env: str) -> None:
    with Sandbox() as sb:
        # Only the service has sessions; only RPC has a sandboxd child behind it.
        kind = type(sb._h.transport).__name__
        assert kind == {"inprocess": "InProcessTransport", "rpc": "RpcTransport", "service": "ServiceTransport"}[named_by_env]


def test_an_unknown_transport_in_the_environment_is_a_clear_error(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("WASMSAND_TRANSPORT", "carrier-pigeon")
    with pytest.raises(ValueError, match="carrier-pigeon"):
        Sandbox()


def test_async_sandbox_is_constructed_like_sandbox(transport: str) -> None:
    async def main() -> None:
        async with AsyncSandbox(transport=transport, timeout_ms=30_000) as sb:
            await sb.files.write("/tmp/a", b"\x00a")
            assert await sb.files.read("/tmp/a") == b"\x00a"
            assert await sb.files.read("/tmp/a", format="text") == "\x00a"
            fork = await sb.fork()
            assert await fork.files.read("/tmp/a") == b"\x00a"
            assert (await fork.commands.run("echo fork")).stdout == "fork\n"
        # `await AsyncSandbox(...)` starts one too, as `create` does.
        sb2 = await AsyncSandbox(transport=transport)
        try:
            assert (await sb2.commands.run("echo awaited")).stdout == "awaited\n"
            assert await sb2 is sb2  # awaiting a started sandbox gives it back
        finally:
            await sb2.kill()
        # After `kill()`, as on `Sandbox`: the sandbox is gone, not the thread pool.
        with pytest.raises(SandboxDestroyedError):
            await sb2.commands.run("true")
        with pytest.raises(SandboxDestroyedError):
            await sb2.files.read("/tmp/a")

    asyncio.run(main())


def test_an_unstarted_async_sandbox_says_how_to_start_it() -> None:
    sb = AsyncSandbox()
    for use in (lambda: sb.commands, lambda: sb.files, lambda: sb.sandbox_id, lambda: asyncio.run(sb.snapshot())):
        with pytest.raises(RuntimeError, match=r"async with AsyncSandbox\(\.\.\.\) as sb:.*AsyncSandbox\.create"):
            use()
    with pytest.raises(AttributeError):
        sb.no_such_thing  # noqa: B018 - a misspelt name stays an AttributeError


def test_a_failed_start_can_be_retried() -> None:
    async def main() -> None:
        sb = AsyncSandbox(transport="rpc", sandboxd_path="/nonexistent/sandboxd")
        for _ in range(2):
            with pytest.raises(Exception) as e:
                async with sb:
                    pass
            assert "sandboxd" in str(e.value)
        with pytest.raises(RuntimeError, match="not started"):
            sb.files  # noqa: B018

    asyncio.run(main())
