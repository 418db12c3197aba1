"""A user program written against the SDK's types; ``test_typing.py`` checks it with
``mypy --strict`` (and runs it), so the annotations users see stay complete and right."""

from __future__ import annotations

import asyncio
import io

from wasmsand import (
    AsyncCommandHandle,
    AsyncSandbox,
    CommandExitError,
    CommandHandle,
    CommandResult,
    FileInfo,
    Limits,
    MergeConflict,
    MergeConflictError,
    MergeResult,
    ProcessInfo,
    ProcessNotFoundError,
    Sandbox,
    WaitTimeoutError,
    WriteEntry,
)


def sync_program(transport: str) -> list[str]:
    notes: list[str] = []
    with Sandbox(transport=transport, limits=Limits(timeout_ms=20_000)) as sb:
        r: CommandResult = sb.commands.run("echo $WHO", envs={"WHO": "me"}, cwd="/tmp", timeout=5.0)
        notes.append(r.stdout.strip())
        try:
            sb.commands.run("exit 3", check=True)
        except CommandExitError as e:
            notes.append(f"exit {e.exit_code}")
        h: CommandHandle = sb.commands.run("python3 -c 'print(input())'", background=True)
        h.send_stdin("typed\n")
        h.close_stdin()
        for out, err in h:
            notes.append(out.strip() + err)
        done: CommandResult = h.wait(timeout=10)
        notes.append(str(done.exit_code))
        procs: list[ProcessInfo] = sb.commands.list()
        notes.append(str(len(procs)))
        try:
            sb.commands.connect(12345)
        except ProcessNotFoundError:
            notes.append("no such pid")
        slow = sb.commands.run("sleep 5", background=True)
        try:
            slow.wait(timeout=0.05)
        except WaitTimeoutError:
            notes.append(f"killed {slow.kill()}")
        fork = sb.fork()
        fork.files.write("/tmp/merged", "m")
        merged: MergeResult = sb.merge(fork, env=False, cwd=False)
        fork.files.write("/tmp/merged", "n")
        sb.files.write("/tmp/merged", "o")
        try:
            sb.merge(fork)
        except MergeConflictError as mc:
            conflicts: list[MergeConflict] = mc.conflicts
            notes.append(f"merged {list(merged.applied)} conflict {[c.path for c in conflicts]}")
        fork.destroy()
        sb.files.write("/tmp/a.txt", "text")
        sb.files.write("/tmp/b.bin", b"\x00")
        sb.files.write("/tmp/c.bin", io.BytesIO(b"stream"))
        sb.files.write_files([WriteEntry("/tmp/d", "d"), ("/tmp/e", b"e"), {"path": "/tmp/f", "data": "f"}])
        text: str = sb.files.read("/tmp/a.txt", format="text")
        raw: bytes = sb.files.read("/tmp/b.bin")
        streamed: bytes = b"".join(sb.files.read("/tmp/c.bin", format="stream"))
        notes.append(f"{text} {raw!r} {streamed!r}")
        made: bool = sb.files.make_dir("/tmp/dir")
        sb.files.rename("/tmp/a.txt", "/tmp/dir/a.txt")
        listing: list[FileInfo] = sb.files.list("/tmp/dir")
        notes.append(f"{made} {[f.name for f in listing]} {sb.files.exists('/tmp/a.txt')}")
        sb.files.remove("/tmp/dir")
    return notes


async def async_program(transport: str) -> list[str]:
    notes: list[str] = []
    async with AsyncSandbox(transport=transport) as sb:
        r: CommandResult = await sb.commands.run("echo async")
        notes.append(r.stdout.strip())
        h: AsyncCommandHandle = await sb.commands.run("echo bg", background=True)
        async for out, _err in h:
            notes.append(out.strip())
        notes.append(str((await h.wait()).exit_code))
        await sb.files.write("/tmp/x", "x")
        x: str = await sb.files.read("/tmp/x", format="text")
        xb: bytes = await sb.files.read("/tmp/x")
        notes.append(x + xb.decode())
        fork = await sb.fork()
        await fork.files.write("/tmp/y", "y")
        merged: MergeResult = await sb.merge(fork, cwd=False)
        assert merged.applied == {"/tmp/y": "added"} and merged.cwd is None
    return notes


if __name__ == "__main__":
    print(sync_program("inprocess"))
    print(asyncio.run(async_program("rpc")))
