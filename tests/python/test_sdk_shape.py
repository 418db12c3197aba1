"""The SDK shape agent frameworks use (commands.run options, background processes with
handles, files.read/write/exists/make_dir/remove/rename, large files in chunks, AsyncSandbox),
every test on every transport (in-process, RPC, the service)."""

from __future__ import annotations

import asyncio
import gc
import hashlib
import io
import os
import threading
import time
import tracemalloc
from typing import Awaitable, Callable, Iterator

import pytest

from wasmsand import (
    AsyncSandbox,
    CommandExitError,
    CommandHandle,
    CommandResult,
    LimitExceededError,
    NotSupportedError,
    ProcessNotFoundError,
    Sandbox,
    SandboxError,
    WaitTimeoutError,
    WriteEntry,
)

@pytest.fixture
def sb(transport: str) -> Iterator[Sandbox]:
    with Sandbox(transport=transport) as s:
        yield s


# ---- commands.run options ----


def test_envs_and_cwd_hold_for_one_run(sb: Sandbox) -> None:
    sb.commands.run("X=session")
    r = sb.commands.run("pwd; echo $X $Y; python3 -c 'import os; print(os.environ[\"Y\"])'",
                        envs={"X": "it's mine", "Y": "a b"}, cwd="/tmp")
    assert r.stdout == "/tmp\nit's mine a b\na b\n", r.stderr
    assert sb.commands.run("pwd; echo $X $Y").stdout == "/home/user\nsession\n"
    r = sb.commands.run("echo never", cwd="/nope")
    assert r.exit_code == 1 and "/nope" in r.stderr
    with pytest.raises(ValueError):
        sb.commands.run("true", envs={"1BAD": "x"})
    with pytest.raises(TypeError):
        sb.commands.run("true", envs={"A": 1})  # type: ignore[dict-item]


def test_stdin_text_and_bytes(sb: Sandbox) -> None:
    assert sb.commands.run("python3 -c 'print(input())'", stdin="hello\n").stdout == "hello\n"
    r = sb.commands.run("od -An -tx1", stdin=b"\x00\xff")
    assert r.stdout.split() == ["00", "ff"]
    assert sb.commands.run("cat").stdout == ""


def test_timeout_in_seconds_and_ms(sb: Sandbox) -> None:
    r = sb.commands.run("while :; do :; done", timeout=0.3)
    assert (r.exit_code, r.error_class) == (124, "TIMEOUT")
    r = sb.commands.run("sleep 0.3; echo ok", timeout=5)
    assert r.stdout == "ok\n"
    with pytest.raises(ValueError):
        sb.commands.run("true", timeout=1, timeout_ms=1000)
    with pytest.raises(ValueError):
        sb.commands.run("true", timeout=-1)


def test_non_zero_exit_is_a_result_unless_check(sb: Sandbox) -> None:
    r = sb.commands.run("echo out; echo bad >&2; exit 3")
    assert isinstance(r, CommandResult) and r.exit_code == 3
    with pytest.raises(CommandExitError) as e:
        sb.commands.run("echo out; echo bad >&2; exit 3", check=True)
    assert (e.value.exit_code, e.value.stdout, e.value.stderr) == (3, "out\n", "bad\n")
    assert e.value.result.exit_code == 3
    assert "exited with code 3: bad" in str(e.value)
    assert sb.commands.run("true", check=True).exit_code == 0


def test_streaming_callbacks_with_new_options(sb: Sandbox) -> None:
    out: list[str] = []
    r = sb.commands.run("echo $G; echo e >&2", envs={"G": "hi"}, on_stdout=out.append, on_stderr=out.append)
    assert "".join(out) in ("hi\ne\n", "e\nhi\n") and r.stdout == "hi\n"


# ---- background processes ----


def test_background_process_outlives_three_later_runs(sb: Sandbox) -> None:
    h = sb.commands.run(
        "for i in 1 2 3 4 5 6; do echo tick $i >> /tmp/ticks; echo tick $i; sleep 0.25; done; echo done",
        background=True,
        timeout=30,
    )
    assert isinstance(h, CommandHandle) and h.pid >= 1
    seen = []
    for _ in range(3):
        r = sb.commands.run("sleep 0.2; cat /tmp/ticks 2>/dev/null | wc -l")
        seen.append(int(r.stdout))
        assert [p.running for p in sb.commands.list() if p.pid == h.pid] == [True]
    # It ran next to the three runs and they saw the files it wrote.
    assert seen == sorted(seen) and seen[-1] > seen[0] >= 0, seen
    result = h.wait(timeout=20)
    assert result.exit_code == 0
    assert result.stdout.endswith("tick 6\ndone\n")
    assert sb.files.read("/tmp/ticks", format="text").count("tick") == 6
    info = [p for p in sb.commands.list() if p.pid == h.pid]
    assert info and not info[0].running and info[0].exit_code == 0 and "tick" in info[0].command


def test_iteration_yields_chunks_as_they_arrive(sb: Sandbox) -> None:
    # The process goes on only once the loop has seen "a" and answered: had the chunks come
    # all at the end, nothing would answer and the process would end at its timeout.
    h = sb.commands.run("echo a; read go; echo b >&2; echo c", background=True, timeout=60)
    chunks = []
    for out, err in h:
        chunks.append((out, err))
        if "a\n" in out:
            h.send_stdin("go\n")
    assert "".join(o for o, _ in chunks) == "a\nc\n", chunks
    assert "".join(e for _, e in chunks) == "b\n", chunks
    assert h.wait(timeout=20).exit_code == 0


def test_stdin_interaction(sb: Sandbox) -> None:
    h = sb.commands.run("python3 -c 'print(input()); print(input().upper())'", background=True)
    time.sleep(0.2)
    assert [p.running for p in sb.commands.list() if p.pid == h.pid] == [True]
    assert h.send_stdin("hello\n") == 6
    h.send_stdin(b"world\n")
    r = h.wait(timeout=20)
    assert (r.exit_code, r.stdout) == (0, "hello\nWORLD\n"), r.stderr
    # Initial stdin, then close: the reader sees end of file.
    h = sb.commands.run("wc -l", background=True, stdin="1\n2\n")
    h.send_stdin("3\n")
    h.close_stdin()
    assert h.wait(timeout=20).stdout.strip() == "3"
    with pytest.raises(SandboxError) as e:
        h.send_stdin("late\n")
    assert e.value.kind in ("stdin_closed", "not_running")


def test_kill_a_cpu_loop(sb: Sandbox) -> None:
    for cmd in ("while :; do :; done", "python3 -c 'while True: pass'"):
        h = sb.commands.run(cmd, background=True, timeout=60)
        time.sleep(0.3)
        assert sb.commands.run("echo alive").stdout == "alive\n"
        assert h.kill() is True
        r = h.wait(timeout=10)
        assert (r.exit_code, r.error_class) == (137, "CANCELLED")
        assert h.kill() is False
    h = sb.commands.run("sleep 30", background=True)
    assert sb.commands.kill(h.pid) is True
    assert h.wait(timeout=10).exit_code == 137


def test_own_timeout_and_wait_timeout(sb: Sandbox) -> None:
    h = sb.commands.run("sleep 1; echo late", background=True, timeout=0.3)
    r = h.wait(timeout=10)
    assert (r.exit_code, r.error_class) == (124, "TIMEOUT")
    h = sb.commands.run("sleep 0.6; echo fine", background=True)
    with pytest.raises(WaitTimeoutError):
        h.wait(timeout=0.1)
    assert h.wait(timeout=10).stdout == "fine\n"  # it went on
    h = sb.commands.run("exit 4", background=True, check=True)
    with pytest.raises(CommandExitError) as e:
        h.wait(timeout=10)
    assert e.value.exit_code == 4


def test_reattach_by_pid(sb: Sandbox) -> None:
    h = sb.commands.run("echo first; sleep 0.6; echo second", background=True)
    pid = h.pid
    del h
    gc.collect()
    found: dict[str, object] = {}

    def other_client() -> None:
        # A client object of its own, on another thread: only the pid is shared.
        again = sb.commands.connect(pid)
        found["out"] = "".join(o for o, _ in again)
        found["result"] = again.wait(timeout=10)

    t = threading.Thread(target=other_client)
    t.start()
    t.join(20)
    assert found["out"] == "first\nsecond\n"
    assert isinstance(found["result"], CommandResult) and found["result"].exit_code == 0
    with pytest.raises(ProcessNotFoundError):
        sb.commands.connect(9999)
    # A fork does not inherit processes.
    with sb.fork() as child:
        with pytest.raises(ProcessNotFoundError):
            child.commands.connect(pid)
        assert child.commands.list() == []


def test_background_callbacks_get_every_chunk(sb: Sandbox) -> None:
    out: list[str] = []
    err: list[str] = []
    done = threading.Event()
    h = sb.commands.run(
        "for i in 1 2 3; do echo o$i; echo e$i >&2; sleep 0.1; done",
        background=True,
        on_stdout=out.append,
        on_stderr=lambda s: (err.append(s), "e3" in "".join(err) and done.set()),
    )
    h.wait(timeout=10)
    # Bounded waits for what the pumps deliver after the end: hang guards, not time bounds.
    assert done.wait(60)
    deadline = time.monotonic() + 60
    while "".join(out) != "o1\no2\no3\n" and time.monotonic() < deadline:
        time.sleep(0.05)
    assert "".join(out) == "o1\no2\no3\n"
    assert "".join(err) == "e1\ne2\ne3\n"


def test_limit_on_live_processes(transport: str) -> None:
    if transport == "service":
        # The service's limit is its own (`SANDBOX_MAX_PROCESSES_PER_SESSION`; tested in
        # test_service.py), not the client's.
        with pytest.raises(NotSupportedError, match="background_processes"):
            Sandbox(transport=transport, limits={"background_processes": 2})
        return
    with Sandbox(transport=transport, limits={"background_processes": 2}) as s:
        a = s.commands.run("sleep 30", background=True)
        b = s.commands.run("sleep 30", background=True)
        with pytest.raises(LimitExceededError) as e:
            s.commands.run("sleep 30", background=True)
        assert "2" in str(e.value)
        a.kill()
        a.wait(timeout=10)
        c = s.commands.run("echo room", background=True)
        assert c.wait(timeout=10).stdout == "room\n"
        b.kill()


def test_background_is_not_atomic(sb: Sandbox) -> None:
    with pytest.raises(ValueError):
        sb.commands.run("true", background=True, atomic=True)


# ---- files ----


def test_files_sdk_shape(sb: Sandbox) -> None:
    sb.files.write("/home/user/t.txt", "text ✓\n")
    assert sb.files.read("/home/user/t.txt", format="text") == "text ✓\n"
    assert sb.files.read("/home/user/t.txt") == "text ✓\n".encode()
    assert sb.files.read("/home/user/t.txt", format="bytes") == "text ✓\n".encode()
    sb.files.write("rel/b.bin", b"\x00\x01")
    assert b"".join(sb.files.read("/home/user/rel/b.bin", format="stream")) == b"\x00\x01"
    sb.files.write("/home/user/f.bin", io.BytesIO(b"from a file object"))
    assert sb.files.read("f.bin") == b"from a file object"
    sb.files.write("/home/user/empty1", b"")
    sb.files.write("/home/user/empty2", io.BytesIO(b""))
    assert [sb.files.stat(f"empty{i}").size for i in (1, 2)] == [0, 0]
    assert sb.files.read("empty2") == b"" and list(sb.files.read("empty1", format="stream")) == []
    sb.files.write_files(
        [WriteEntry("/tmp/w/1", "one"), {"path": "/tmp/w/2", "data": b"two"}, ("/tmp/w/3", io.BytesIO(b"3"))]
    )
    assert [f.name for f in sb.files.list("/tmp/w")] == ["1", "2", "3"]
    assert sb.files.exists("/tmp/w/2") and not sb.files.exists("/tmp/w/4")
    assert not sb.files.exists("/tmp/w/2/under-a-file")
    assert sb.files.make_dir("/tmp/d/e") is True
    assert sb.files.make_dir("/tmp/d/e") is False
    with pytest.raises(FileExistsError):
        sb.files.make_dir("/tmp/w/1")
    sb.files.rename("/tmp/w/1", "/tmp/d/e/uno")
    assert sb.files.read("/tmp/d/e/uno") == b"one" and not sb.files.exists("/tmp/w/1")
    with pytest.raises(FileNotFoundError):
        sb.files.rename("/tmp/w/nope", "/tmp/x")
    sb.files.remove("/tmp/d")  # a whole tree
    assert not sb.files.exists("/tmp/d")
    # The old names stay.
    sb.files.mkdir("/tmp/old")
    sb.files.rm("/tmp/old")
    assert sb.files.stat("/tmp/w/2").size == 3
    with pytest.raises(ValueError):
        sb.files.read("/tmp/w/2", format="json")  # type: ignore[call-overload]
    with pytest.raises(TypeError):
        sb.files.write("/tmp/x", io.StringIO("text mode"))  # type: ignore[arg-type]


class _Failing(io.RawIOBase):
    """A binary stream that breaks after ``limit`` bytes, like a dropped upload."""

    def __init__(self, limit: int) -> None:
        self.left = limit

    def readable(self) -> bool:
        return True

    def readinto(self, b: bytearray) -> int:  # type: ignore[override]
        if self.left <= 0:
            raise OSError("connection reset while reading the source")
        n = min(len(b), self.left)
        b[:n] = b"z" * n
        self.left -= n
        return n


def test_failed_upload_leaves_no_partial_file(transport: str) -> None:
    # Small chunks (a small line cap) make the source fail after a few of them; the service
    # takes no line cap, so there the source fails after a few of its 1 MiB chunks.
    limits, size = {"rpc_bytes": 64 * 1024}, 500_000
    if transport == "service":
        with pytest.raises(NotSupportedError, match="rpc_bytes"):
            Sandbox(transport=transport, limits=limits)
        limits, size = {}, 3_500_000
    with Sandbox(transport=transport, limits=limits) as s:
        s.files.write("/tmp/keep.bin", b"old content")
        with pytest.raises(OSError, match="connection reset"):
            s.files.write("/tmp/keep.bin", _Failing(size))
        with pytest.raises(OSError, match="connection reset"):
            s.files.write("/tmp/new.bin", _Failing(size))
        assert s.files.read("/tmp/keep.bin") == b"old content"
        assert not s.files.exists("/tmp/new.bin")
        assert sorted(f.name for f in s.files.list("/tmp")) == ["keep.bin"]  # no temp left


def test_many_small_chunks_under_a_small_line_cap(transport: str) -> None:
    # 64 KiB lines: a 1 MB file goes as ~21 appends and comes back as ~21 reads.
    if transport == "service":
        # Its requests are not lines (test_service.py counts its chunks).
        with pytest.raises(NotSupportedError, match="rpc_bytes"):
            Sandbox(transport=transport, limits={"rpc_bytes": 64 * 1024})
        return
    with Sandbox(transport=transport, limits={"rpc_bytes": 64 * 1024}) as s:
        data = os.urandom(1_000_003)
        s.files.write("/home/user/r.bin", data)
        assert s.files.read("/home/user/r.bin", "bytes") == data
        chunks = list(s.files.read("/home/user/r.bin", "stream"))
        assert len(chunks) > 15 and b"".join(chunks) == data
        assert s.commands.run("wc -c < r.bin").stdout.strip() == "1000003"


class _Pseudo(io.RawIOBase):
    """``size`` deterministic pseudo-random bytes, generated as they are read."""

    def __init__(self, size: int) -> None:
        self.left = size
        self.block = hashlib.sha256(b"seed").digest() * 4096  # 128 KiB pattern
        self.n = 0
        self.digest = hashlib.sha256()

    def readable(self) -> bool:
        return True

    def readinto(self, b: bytearray) -> int:  # type: ignore[override]
        n = min(len(b), self.left, len(self.block))
        chunk = bytes([self.n & 0xFF]) + self.block[1:n]
        self.n += 1
        b[:n] = chunk[:n]
        self.digest.update(chunk[:n])
        self.left -= n
        return n


def _peak_rss_reset() -> bool:
    try:
        with open("/proc/self/clear_refs", "w") as f:
            f.write("5")
        return True
    except OSError:
        return False


def _peak_rss() -> int:
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) * 1024
    return 0


def test_100_mb_round_trip_with_bounded_client_memory(transport: str) -> None:
    size = 100 * 1024 * 1024
    # The service's workspace cap is the server's (256 MiB by default), not the client's.
    fs = {} if transport == "service" else {"fs_limit_bytes": 300 * 1024 * 1024}
    with Sandbox(transport=transport, timeout_ms=120_000, **fs) as s:
        src = io.BufferedReader(_Pseudo(size), buffer_size=1 << 20)
        rss_ok = _peak_rss_reset()
        rss_before = _peak_rss()
        tracemalloc.start()
        try:
            s.files.write("/home/user/big.bin", src)
            back = hashlib.sha256()
            total = 0
            for chunk in s.files.read("/home/user/big.bin", format="stream"):
                back.update(chunk)
                total += len(chunk)
            _, peak = tracemalloc.get_traced_memory()
        finally:
            tracemalloc.stop()
        rss_growth = _peak_rss() - rss_before
        assert total == size
        assert back.hexdigest() == src.raw.digest.hexdigest()  # type: ignore[attr-defined]
        assert s.files.stat("/home/user/big.bin").size == size
        print(f"\n{transport}: client Python heap peak {peak / 2**20:.1f} MiB, peak RSS growth "
              f"{rss_growth / 2**20:.1f} MiB")
        # A few chunks (1 MiB and their base64 and JSON text) at a time, never the file.
        assert peak < 24 * 2**20, peak
        if transport == "rpc" and rss_ok:
            # The sandbox is in the sandboxd child: this process holds only chunks.
            assert rss_growth < 48 * 2**20, rss_growth


# ---- AsyncSandbox ----


def test_async_api(transport: str) -> None:
    before = threading.active_count()

    async def main() -> None:
        sb = await AsyncSandbox.create(transport=transport)
        async with sb:
            r = await sb.commands.run("echo $A; pwd", envs={"A": "x"}, cwd="/tmp")
            assert r.stdout == "x\n/tmp\n"
            with pytest.raises(CommandExitError):
                await sb.commands.run("exit 2", check=True)
            seen: list[str] = []

            async def on_out(data: str) -> None:
                seen.append(data)

            r = await sb.commands.run("echo s1; echo s2", on_stdout=on_out)
            assert "".join(seen) == "s1\ns2\n" == r.stdout
            # Two runs at once on two forks, the loop free meanwhile: each run's output waits
            # for the other's, which only a loop that serves both at once delivers.
            f1, f2 = await sb.fork(), await sb.fork()
            printed = {1: asyncio.Event(), 2: asyncio.Event()}
            waited: list[bool] = []

            def meet(me: int, other: int) -> Callable[[str], Awaitable[None]]:
                async def on_out(_data: str) -> None:
                    printed[me].set()
                    try:
                        await asyncio.wait_for(printed[other].wait(), 60)
                        waited.append(True)
                    except asyncio.TimeoutError:
                        waited.append(False)

                return on_out

            r1, r2 = await asyncio.gather(
                f1.commands.run("echo 1; sleep 0.1", on_stdout=meet(1, 2)),
                f2.commands.run("echo 2; sleep 0.1", on_stdout=meet(2, 1)),
            )
            assert (r1.stdout, r2.stdout) == ("1\n", "2\n")
            assert waited == [True, True]
            # Background processes: async iteration, stdin, wait, kill, reattach.
            h = await sb.commands.run("python3 -c 'print(input())'; echo after", background=True)
            await h.send_stdin("ping\n")
            chunks = [out async for out, _ in h]
            assert "".join(chunks) == "ping\nafter\n"
            assert (await h.wait(timeout=10)).exit_code == 0
            loop = await sb.commands.run("while :; do :; done", background=True, timeout=60)
            again = await sb.commands.connect(loop.pid)
            with pytest.raises(WaitTimeoutError):
                await again.wait(timeout=0.3)
            assert [p.running for p in await sb.commands.list() if p.pid == loop.pid] == [True]
            assert await sb.commands.kill(loop.pid) is True
            assert (await loop.wait(timeout=10)).exit_code == 137
            got: list[str] = []
            h = await sb.commands.run("echo cb1; sleep 0.1; echo cb2", background=True, on_stdout=got.append)
            await h.wait(timeout=10)
            for _ in range(100):
                if "".join(got) == "cb1\ncb2\n":
                    break
                await asyncio.sleep(0.05)
            assert "".join(got) == "cb1\ncb2\n"
            # Files.
            await sb.files.write("/tmp/a/b.txt", "hé")
            assert await sb.files.read("/tmp/a/b.txt", format="text") == "hé"
            assert await sb.files.read("/tmp/a/b.txt", format="bytes") == "hé".encode()
            await sb.files.write("/tmp/big", os.urandom(3 * 2**20 + 5))
            parts = [c async for c in sb.files.read_stream("/tmp/big")]
            assert sum(map(len, parts)) == 3 * 2**20 + 5 and len(parts) == 4
            await sb.files.write_files([("/tmp/c1", "1"), ("/tmp/c2", b"2")])
            assert await sb.files.exists("/tmp/c2")
            assert await sb.files.make_dir("/tmp/m") is True
            await sb.files.rename("/tmp/c1", "/tmp/m/c1")
            assert [f.name for f in await sb.files.list("/tmp/m")] == ["c1"]
            await sb.files.remove("/tmp/m")
            assert not await sb.files.exists("/tmp/m")
            snap = await sb.snapshot()
            await sb.files.write("/tmp/c2", "changed")
            await sb.restore(snap)
            assert await sb.files.read("/tmp/c2") == b"2"

    asyncio.run(main())
    # No thread outlives the sandbox: the pool, the pumps and the RPC reader have ended.
    deadline = time.monotonic() + 60
    while threading.active_count() > before and time.monotonic() < deadline:
        time.sleep(0.05)
    assert threading.active_count() <= before, [t.name for t in threading.enumerate()]


# ---- the documentation's examples ----


def _doc_blocks() -> tuple[list[str], list[str]]:
    """The SDK section's examples: those of the local transports, and those of the service
    (which name ``WASMSAND_URL``)."""
    import pathlib
    import re

    doc = (pathlib.Path(__file__).resolve().parents[2] / "docs" / "python.md").read_text()
    sdk = doc[doc.index("# The Python SDK") :]
    blocks = re.findall(r"```python\n(.*?)```", sdk, re.S)
    service = [b for b in blocks if "WASMSAND_URL" in b]
    return [b for b in blocks if b not in service], service


def test_docs_examples_run() -> None:
    local, _ = _doc_blocks()
    assert len(local) == 4
    for block in local:
        exec(compile(block, "docs/python.md", "exec"), {"__name__": "docs_example"})


def test_docs_service_example_runs(service_url: str, monkeypatch: pytest.MonkeyPatch) -> None:
    _, service = _doc_blocks()
    assert len(service) == 1
    monkeypatch.setenv("WASMSAND_URL", service_url)
    for block in service:
        exec(compile(block, "docs/python.md", "exec"), {"__name__": "docs_example"})
