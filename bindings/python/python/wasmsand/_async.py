"""``AsyncSandbox``: the same API as coroutines, for asyncio programs (agent frameworks' async
tools). Each blocking request runs on the sandbox's own small thread pool (the Rust sandbox
releases the GIL; ``sandboxd`` answers over a pipe), so the event loop never blocks; the pool
is shut down by ``kill()`` and no thread outlives the sandbox."""

from __future__ import annotations

import asyncio
import concurrent.futures
import functools
import inspect
import os
import time
from typing import (
    TYPE_CHECKING,
    Any,
    AsyncIterator,
    Awaitable,
    BinaryIO,
    Callable,
    Generator,
    Iterable,
    Literal,
    Mapping,
    TypeVar,
    overload,
)

from ._errors import SandboxDestroyedError, WaitTimeoutError
from ._types import (
    Changes,
    CommandResult,
    ExportReport,
    FileInfo,
    Limits,
    MergeResult,
    Mount,
    MountInfo,
    Preview,
    ProcessInfo,
    WriteEntry,
)
from .sandbox import CommandHandle, Sandbox, _timeout_ms

__all__ = ["AsyncSandbox", "AsyncCommands", "AsyncCommandHandle", "AsyncFiles", "AsyncTools"]

T = TypeVar("T")
# A callback may be a plain function or a coroutine function (awaited in order).
AsyncOutputCallback = Callable[[str], "Awaitable[None] | None"]

# The longest a pool thread blocks in one `process.wait`: a cancelled `wait()` then frees
# its thread within this time.
_WAIT_SLICE_S = 0.5
_POLL_S = 0.25


class _Runner:
    """Runs blocking SDK calls on a pool owned by one root sandbox and its forks."""

    def __init__(self) -> None:
        self.pool = concurrent.futures.ThreadPoolExecutor(max_workers=32, thread_name_prefix="wasmsand-async")

    async def __call__(self, fn: Callable[..., T], *args: Any, **kwargs: Any) -> T:
        loop = asyncio.get_running_loop()
        try:
            fut = loop.run_in_executor(self.pool, functools.partial(fn, *args, **kwargs))
        except RuntimeError:
            # Submitting fails only once the pool has ended, which `kill()` does: a call after
            # it is one to a destroyed sandbox, as on `Sandbox`, not an executor's internals.
            raise SandboxDestroyedError(
                "the sandbox has been destroyed (killed)", data={"kind": "sandbox_destroyed"}
            ) from None
        return await fut


def _bridge(
    cb: AsyncOutputCallback | None, loop: asyncio.AbstractEventLoop, pending: list[asyncio.Future[Any]]
) -> Callable[[str], None] | None:
    """A callback the transport's threads may call: it hands each chunk to ``cb`` on the event
    loop, in order; awaitables it returns are collected in ``pending``."""
    if cb is None:
        return None

    def on_loop(data: str) -> None:
        r = cb(data)
        if inspect.isawaitable(r):
            pending.append(asyncio.ensure_future(r))

    def from_thread(data: str) -> None:
        loop.call_soon_threadsafe(on_loop, data)

    return from_thread


class AsyncCommandHandle:
    """A background process, as ``CommandHandle`` with coroutines; ``async for stdout,
    stderr in handle`` yields output chunks as they arrive. ``poll()`` and iteration share
    one read position, as on ``CommandHandle``."""

    pid: int

    def __init__(self, sync: CommandHandle, run: _Runner, check: bool = False) -> None:
        self._sync = sync
        self._run = run
        self._check = check
        self.pid = sync.pid

    @property
    def dropped_stdout(self) -> int:
        """Bytes of stdout the ring dropped before this handle read them."""
        return self._sync.dropped_stdout

    @property
    def dropped_stderr(self) -> int:
        """Bytes of stderr the ring dropped before this handle read them."""
        return self._sync.dropped_stderr

    async def poll(self) -> tuple[str, str, bool]:
        """The output that arrived since the last read (stdout, stderr) and whether the
        process is still running; never waits for the process."""
        return await self._run(self._sync.poll)

    async def wait(self, timeout: float | None = None, *, timeout_ms: int | None = None) -> CommandResult:
        """Waits until the process ends and returns its result; ``WaitTimeoutError`` past
        ``timeout`` seconds or ``timeout_ms`` (the process goes on)."""
        t = _timeout_ms(timeout, timeout_ms)
        deadline = None if t is None else time.monotonic() + t / 1000
        while True:
            left = _WAIT_SLICE_S if deadline is None else min(_WAIT_SLICE_S, deadline - time.monotonic())
            try:
                return await self._run(self._sync.wait, max(left, 0.0))
            except WaitTimeoutError:
                if deadline is not None and time.monotonic() >= deadline:
                    raise

    async def kill(self) -> bool:
        """Ends the process; ``False`` when it had already ended."""
        return await self._run(self._sync.kill)

    async def send_stdin(self, data: str | bytes) -> int:
        """Writes to the process's standard input; returns the bytes written."""
        return await self._run(self._sync.send_stdin, data)

    async def close_stdin(self) -> None:
        """Closes its standard input: it reads end of file once the pipe is drained."""
        await self._run(self._sync.close_stdin)

    async def __aiter__(self) -> AsyncIterator[tuple[str, str]]:
        loop = asyncio.get_running_loop()
        wake = asyncio.Event()
        h = self._sync._h

        def on_notify(method: str, params: dict[str, Any]) -> None:
            loop.call_soon_threadsafe(wake.set)

        unsubscribe = h.transport.subscribe(h.sandbox_id, self.pid, on_notify)
        try:
            while True:
                wake.clear()
                out, err, running = await self.poll()
                if out or err:
                    yield out, err
                if not running:
                    # Read once more: output written just before the end may postdate the read.
                    out, err, _ = await self.poll()
                    if out or err:
                        yield out, err
                    return
                try:
                    await asyncio.wait_for(wake.wait(), _POLL_S)
                except asyncio.TimeoutError:
                    pass
        finally:
            unsubscribe()

    def __repr__(self) -> str:
        return f"AsyncCommandHandle(pid={self.pid})"


class AsyncCommands:
    """``sb.commands`` of an ``AsyncSandbox``."""

    def __init__(self, sb: Sandbox, run: _Runner) -> None:
        self._sb = sb
        self._run = run
        self._pumps: set[asyncio.Task[None]] = set()

    @overload
    async def run(
        self,
        cmd: str,
        *,
        background: Literal[False] = False,
        envs: Mapping[str, str] | None = None,
        cwd: str | None = None,
        stdin: str | bytes | None = None,
        timeout: float | None = None,
        timeout_ms: int | None = None,
        on_stdout: AsyncOutputCallback | None = None,
        on_stderr: AsyncOutputCallback | None = None,
        atomic: bool = False,
        check: bool = False,
        truncation: str | None = None,
        preview: bool = False,
    ) -> CommandResult: ...

    @overload
    async def run(
        self,
        cmd: str,
        *,
        background: Literal[True],
        envs: Mapping[str, str] | None = None,
        cwd: str | None = None,
        stdin: str | bytes | None = None,
        timeout: float | None = None,
        timeout_ms: int | None = None,
        on_stdout: AsyncOutputCallback | None = None,
        on_stderr: AsyncOutputCallback | None = None,
        atomic: bool = False,
        check: bool = False,
        truncation: str | None = None,
        preview: Literal[False] = False,
    ) -> AsyncCommandHandle: ...

    async def run(
        self,
        cmd: str,
        *,
        background: bool = False,
        envs: Mapping[str, str] | None = None,
        cwd: str | None = None,
        stdin: str | bytes | None = None,
        timeout: float | None = None,
        timeout_ms: int | None = None,
        on_stdout: AsyncOutputCallback | None = None,
        on_stderr: AsyncOutputCallback | None = None,
        atomic: bool = False,
        check: bool = False,
        truncation: str | None = None,
        preview: bool = False,
    ) -> CommandResult | AsyncCommandHandle:
        """As ``Commands.run``; callbacks run on the event loop and may be coroutines."""
        kw: dict[str, Any] = dict(
            envs=envs,
            cwd=cwd,
            stdin=stdin,
            timeout=timeout,
            timeout_ms=timeout_ms,
            atomic=atomic,
            check=check,
            truncation=truncation,
            preview=preview,
        )
        if background:
            if preview:
                raise ValueError("preview=True applies to foreground runs only")

            def start() -> CommandHandle:
                return self._sb.commands.run(
                    cmd,
                    background=True,
                    envs=envs,
                    cwd=cwd,
                    stdin=stdin,
                    timeout=timeout,
                    timeout_ms=timeout_ms,
                    atomic=atomic,
                    check=check,
                    truncation=truncation,
                )

            sync = await self._run(start)
            handle = AsyncCommandHandle(sync, self._run, check)
            if on_stdout is not None or on_stderr is not None:
                self._pump(handle, on_stdout, on_stderr)
            return handle
        loop = asyncio.get_running_loop()
        pending: list[asyncio.Future[Any]] = []
        result: CommandResult = await self._run(
            self._sb.commands.run,
            cmd,
            on_stdout=_bridge(on_stdout, loop, pending),
            on_stderr=_bridge(on_stderr, loop, pending),
            **kw,
        )
        if pending:
            await asyncio.gather(*pending)
        return result

    def _pump(
        self, handle: AsyncCommandHandle, on_stdout: AsyncOutputCallback | None, on_stderr: AsyncOutputCallback | None
    ) -> None:
        # The callbacks read with a handle of their own, as on ``Commands.run``: they see
        # every chunk and do not take chunks from the caller's ``poll()`` or ``async for``.
        reader = AsyncCommandHandle(CommandHandle(handle._sync._h, handle.pid), self._run)

        async def pump() -> None:
            try:
                async for out, err in reader:
                    for cb, data in ((on_stdout, out), (on_stderr, err)):
                        if cb is not None and data:
                            r = cb(data)
                            if inspect.isawaitable(r):
                                await r
            except (RuntimeError, LookupError):
                pass  # the sandbox was destroyed or the process forgotten

        task = asyncio.ensure_future(pump())
        self._pumps.add(task)
        task.add_done_callback(self._pumps.discard)

    async def connect(
        self,
        pid: int,
        *,
        on_stdout: AsyncOutputCallback | None = None,
        on_stderr: AsyncOutputCallback | None = None,
    ) -> AsyncCommandHandle:
        """As ``Commands.connect``: a handle on a background process of this sandbox."""
        sync = await self._run(self._sb.commands.connect, pid)
        handle = AsyncCommandHandle(sync, self._run)
        if on_stdout is not None or on_stderr is not None:
            self._pump(handle, on_stdout, on_stderr)
        return handle

    async def list(self) -> list[ProcessInfo]:
        return await self._run(self._sb.commands.list)

    async def kill(self, pid: int) -> bool:
        return await self._run(self._sb.commands.kill, pid)


class AsyncFiles:
    """``sb.files`` of an ``AsyncSandbox``."""

    def __init__(self, sb: Sandbox, run: _Runner) -> None:
        self._sb = sb
        self._run = run

    @overload
    async def read(self, path: str, format: Literal["bytes"] = "bytes") -> bytes: ...
    @overload
    async def read(self, path: str, format: Literal["text"]) -> str: ...
    @overload
    async def read(self, path: str, format: Literal["stream"]) -> AsyncIterator[bytes]: ...

    async def read(self, path: str, format: str = "bytes") -> str | bytes | AsyncIterator[bytes]:
        """As ``Files.read``: ``"bytes"`` (the default), ``"text"``, or ``"stream"`` (an async
        iterator of chunks, as ``read_stream``)."""
        if format == "stream":
            return self.read_stream(path)
        if format not in ("text", "bytes"):
            raise ValueError(f"format must be 'text', 'bytes' or 'stream', not {format!r}")
        return await self._run(self._sb.files.read, path, format)

    async def read_stream(self, path: str) -> AsyncIterator[bytes]:
        """The file's bytes in chunks, never whole in this process."""
        it = self._sb.files.read_stream(path)
        done = object()
        while True:
            chunk = await self._run(next, it, done)
            if chunk is done:
                return
            assert isinstance(chunk, bytes)
            yield chunk

    async def write(self, path: str, data: str | bytes | bytearray | memoryview | BinaryIO) -> None:
        await self._run(self._sb.files.write, path, data)

    async def write_files(
        self, files: Iterable[WriteEntry | Mapping[str, Any] | tuple[str, str | bytes | BinaryIO]]
    ) -> None:
        await self._run(self._sb.files.write_files, list(files))

    async def exists(self, path: str) -> bool:
        return await self._run(self._sb.files.exists, path)

    async def list(self, path: str) -> list[FileInfo]:
        return await self._run(self._sb.files.list, path)

    async def make_dir(self, path: str) -> bool:
        return await self._run(self._sb.files.make_dir, path)

    async def mkdir(self, path: str) -> None:
        await self._run(self._sb.files.mkdir, path)

    async def remove(self, path: str) -> None:
        await self._run(self._sb.files.remove, path)

    async def rm(self, path: str, recursive: bool = False) -> None:
        await self._run(self._sb.files.rm, path, recursive)

    async def rename(self, old_path: str, new_path: str) -> None:
        await self._run(self._sb.files.rename, old_path, new_path)

    async def stat(self, path: str) -> FileInfo:
        return await self._run(self._sb.files.stat, path)


class AsyncTools:
    """``sb.tools`` of an ``AsyncSandbox``; tool functions are plain (sync) callables, called
    on the transport's threads."""

    def __init__(self, sb: Sandbox, run: _Runner) -> None:
        self._sb = sb
        self._run = run

    async def register(
        self,
        name: str,
        fn: Callable[..., Any],
        *,
        description: str | None = None,
        input_schema: dict[str, Any] | None = None,
    ) -> None:
        await self._run(self._sb.tools.register, name, fn, description=description, input_schema=input_schema)

    async def unregister(self, name: str) -> bool:
        return await self._run(self._sb.tools.unregister, name)

    async def list(self) -> list[str]:
        return await self._run(self._sb.tools.list)


# What `_attach` sets: the attributes an unstarted `AsyncSandbox(...)` lacks.
_STARTED_ATTRS = frozenset({"commands", "files", "tools", "_sync", "_run"})


class AsyncSandbox:
    """``Sandbox`` for asyncio: every method is a coroutine. ``async with AsyncSandbox(...) as
    sb:`` starts a sandbox with ``Sandbox(...)``'s arguments and ends it (and its thread pool)
    on leaving; ``sb = await AsyncSandbox.create(...)`` (or ``await AsyncSandbox(...)``) starts
    one to end with ``await sb.kill()``."""

    commands: AsyncCommands
    files: AsyncFiles
    tools: AsyncTools

    def __init__(
        self,
        *,
        timeout: float | None = None,
        timeout_ms: int | None = None,
        fs_limit_bytes: int = 256 * 1024 * 1024,
        limits: Limits | Mapping[str, Any] | None = None,
        transport: str | None = None,
        sandboxd_path: str | os.PathLike[str] | None = None,
        tools: Mapping[str, Callable[..., Any]] | None = None,
        deterministic: bool | Mapping[str, int] | None = None,
        network: Mapping[str, Any] | None = None,
        url: str | None = None,
        api_key: str | None = None,
        runtime: str | None = None,
        image: str | None = None,
        ttl_sec: int | None = None,
        env: Mapping[str, str] | None = None,
        mounts: Iterable[Mount | str | Mapping[str, Any]] | None = None,
    ) -> None:
        # Starting a sandbox blocks (a process to spawn, a service to call), which a
        # constructor cannot await: it happens in `__aenter__` or `__await__`.
        self._pending: Callable[[], Sandbox] | None = functools.partial(
            Sandbox,
            timeout=timeout,
            timeout_ms=timeout_ms,
            fs_limit_bytes=fs_limit_bytes,
            limits=limits,
            transport=transport,
            sandboxd_path=sandboxd_path,
            tools=tools,
            deterministic=deterministic,
            network=network,
            url=url,
            api_key=api_key,
            runtime=runtime,
            image=image,
            ttl_sec=ttl_sec,
            env=env,
            mounts=mounts,
        )

    def _attach(self, sync: Sandbox, run: _Runner) -> None:
        self._pending = None
        self._sync = sync
        self._run = run
        self.commands = AsyncCommands(sync, run)
        self.files = AsyncFiles(sync, run)
        self.tools = AsyncTools(sync, run)

    @classmethod
    def _wrap(cls, sync: Sandbox, run: _Runner) -> "AsyncSandbox":
        sb = cls.__new__(cls)
        sb._attach(sync, run)
        return sb

    if not TYPE_CHECKING:
        # Only for what an unstarted sandbox lacks; hidden from type checkers so a misspelt
        # name stays an error there.
        def __getattr__(self, name: str) -> Any:
            if name in _STARTED_ATTRS and self.__dict__.get("_pending") is not None:
                raise RuntimeError(
                    "this AsyncSandbox is not started: use `async with AsyncSandbox(...) as sb:` "
                    "or `sb = await AsyncSandbox.create(...)`"
                )
            raise AttributeError(f"'AsyncSandbox' object has no attribute {name!r}")

    async def _start(self) -> "AsyncSandbox":
        make = self.__dict__.get("_pending")
        if make is None:
            if "_sync" not in self.__dict__:
                raise RuntimeError("this AsyncSandbox is already starting: await it once")
            return self
        self._pending = None
        # The new root's requests run on a pool of its own, which its forks share.
        run = _Runner()
        try:
            sync = await run(make)
        except BaseException:
            run.pool.shutdown(wait=False)
            self._pending = make
            raise
        self._attach(sync, run)
        return self

    def __await__(self) -> Generator[Any, None, "AsyncSandbox"]:
        return self._start().__await__()

    @classmethod
    async def create(
        cls,
        *,
        timeout: float | None = None,
        timeout_ms: int | None = None,
        fs_limit_bytes: int = 256 * 1024 * 1024,
        limits: Limits | Mapping[str, Any] | None = None,
        transport: str | None = None,
        sandboxd_path: str | os.PathLike[str] | None = None,
        tools: Mapping[str, Callable[..., Any]] | None = None,
        deterministic: bool | Mapping[str, int] | None = None,
        network: Mapping[str, Any] | None = None,
        url: str | None = None,
        api_key: str | None = None,
        runtime: str | None = None,
        image: str | None = None,
        ttl_sec: int | None = None,
        env: Mapping[str, str] | None = None,
        mounts: Iterable[Mount | str | Mapping[str, Any]] | None = None,
    ) -> "AsyncSandbox":
        """A new sandbox, started; the arguments are ``Sandbox``'s."""
        # Every parameter goes on to the constructor by name, as it came.
        kw = {k: v for k, v in locals().items() if k not in ("cls", "__class__")}
        return await cls(**kw)

    @classmethod
    async def import_state(
        cls,
        blob: bytes,
        *,
        key: bytes | None = None,
        transport: str = "inprocess",
        sandboxd_path: str | os.PathLike[str] | None = None,
    ) -> "AsyncSandbox":
        """As ``Sandbox.import_state``: a new sandbox holding the state ``export_state``
        wrote; a blob it refuses raises ``ValueError`` and leaves no sandbox running."""
        return await cls._open(
            functools.partial(Sandbox.import_state, blob, key=key, transport=transport, sandboxd_path=sandboxd_path)
        )

    @classmethod
    async def _open(cls, make: Callable[[], Sandbox]) -> "AsyncSandbox":
        sb = cls.__new__(cls)
        sb._pending = make
        return await sb._start()

    @property
    def sandbox_id(self) -> str | None:
        """The fork's id on its server; ``None`` for a root sandbox."""
        return self._sync.sandbox_id

    async def snapshot(self) -> str:
        """Records files and shell state in O(1); returns an id for ``restore``."""
        return await self._run(self._sync.snapshot)

    async def restore(self, snapshot_id: str) -> None:
        """Puts files and shell state back as they were at ``snapshot_id``."""
        await self._run(self._sync.restore, snapshot_id)

    async def export_state(self, key: bytes | None = None) -> bytes:
        """As ``Sandbox.export_state``: the whole state as a blob for ``import_state``."""
        return await self._run(self._sync.export_state, key)

    async def fork(self) -> "AsyncSandbox":
        """A fork sharing this sandbox's server and thread pool."""
        return AsyncSandbox._wrap(await self._run(self._sync.fork), self._run)

    async def merge(self, fork: "AsyncSandbox", *, env: bool = False, cwd: bool = False) -> MergeResult:
        """As ``Sandbox.merge``: applies here what ``fork`` changed since it was forked."""
        return await self._run(self._sync.merge, fork._sync, env=env, cwd=cwd)

    async def mount(
        self,
        host: str | os.PathLike[str],
        path: str,
        *,
        read_only: bool = False,
        gitignore: bool = False,
        exclude: Iterable[str] = (),
        allow_secrets: Iterable[str] = (),
        max_host_bytes: int | None = None,
    ) -> MountInfo:
        """As ``Sandbox.mount``: mounts a host folder at ``path``."""
        return await self._run(
            functools.partial(
                self._sync.mount,
                host,
                path,
                read_only=read_only,
                gitignore=gitignore,
                exclude=tuple(exclude),
                allow_secrets=tuple(allow_secrets),
                max_host_bytes=max_host_bytes,
            )
        )

    async def mounts(self) -> list[MountInfo]:
        """The host folders mounted in this sandbox."""
        return await self._run(self._sync.mounts)

    async def changes(
        self, since: str = "mount", *, snapshot_id: str | None = None, path: str | None = None
    ) -> Changes:
        """As ``Sandbox.changes``: what the sandbox changed, as paths and a git patch."""
        return await self._run(
            functools.partial(self._sync.changes, since, snapshot_id=snapshot_id, path=path)
        )

    async def export_changes(
        self,
        dir: str | os.PathLike[str],
        since: str = "mount",
        *,
        snapshot_id: str | None = None,
        path: str | None = None,
    ) -> ExportReport:
        """As ``Sandbox.export_changes``: writes the changes into a host directory."""
        return await self._run(
            functools.partial(self._sync.export_changes, dir, since, snapshot_id=snapshot_id, path=path)
        )

    async def commit(self, preview: Preview | CommandResult, *, env: bool = False, cwd: bool = False) -> MergeResult:
        """As ``Sandbox.commit``: brings a preview's changes into this sandbox."""
        return await self._run(functools.partial(self._sync.commit, preview, env=env, cwd=cwd))

    async def discard(self, preview: Preview | CommandResult) -> None:
        """As ``Sandbox.discard``: drops a preview."""
        await self._run(self._sync.discard, preview)

    async def best_of(
        self,
        attempts: Iterable[str | tuple[str, Mapping[str, str]] | Mapping[str, Any]],
        *,
        concurrency: int | None = None,
        timeout: float | None = None,
        timeout_ms: int | None = None,
    ) -> list[CommandResult]:
        """As ``Sandbox.best_of``: every attempt in a fork of its own, results in order."""
        return await self._run(
            functools.partial(
                self._sync.best_of,
                list(attempts),
                concurrency=concurrency,
                timeout=timeout,
                timeout_ms=timeout_ms,
            )
        )

    async def destroy(self) -> None:
        """Destroys this fork; a root sandbox is ended with ``kill()``."""
        await self._run(self._sync.destroy)

    async def kill(self) -> None:
        """Destroys the root and every fork and ends the thread pool."""
        for task in list(self.commands._pumps):
            task.cancel()
        try:
            await self._run(self._sync.kill)
        finally:
            # The calls still running end at once: their sandbox is gone.
            self._run.pool.shutdown(wait=False, cancel_futures=True)

    async def __aenter__(self) -> "AsyncSandbox":
        return await self._start()

    async def __aexit__(self, *exc: object) -> None:
        if self._sync.sandbox_id is not None:
            try:
                await self.destroy()
            except Exception:
                pass
        else:
            await self.kill()
