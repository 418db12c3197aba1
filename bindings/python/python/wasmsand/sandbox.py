"""The ``Sandbox`` object: commands, files, snapshots and forks."""

from __future__ import annotations

import base64
import errno
import os
import posixpath
import secrets
import threading
from typing import Any, BinaryIO, Callable, Iterable, Iterator, Literal, Mapping, overload

from ._errors import CommandExitError, InvalidParamsError, SandboxDestroyedError, SandboxError, raise_for_error
from ._service import ServiceTransport, not_supported
from ._transport import InProcessTransport, RpcTransport, Transport
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

__all__ = ["Sandbox", "Commands", "CommandHandle", "Files", "Tools"]

OutputCallback = Callable[[str], None]


class _Handle:
    """What a sandbox object shares with its ``commands`` and ``files``: the transport, its
    id, and whether it was destroyed."""

    def __init__(
        self,
        transport: Transport,
        sandbox_id: str | None,
        tools: dict[str, Callable[..., Any]] | None = None,
    ) -> None:
        self.transport = transport
        self.sandbox_id = sandbox_id
        self.destroyed = False
        # Bytes per request of a chunked file transfer (less under a small `rpc_bytes`).
        self.chunk_bytes = CHUNK_BYTES
        # The Python functions behind registered tools, shared by a root and its forks (one
        # transport answers every `tool.call`).
        self.tools: dict[str, Callable[..., Any]] = tools if tools is not None else {}
        if tools is None:
            transport.set_request_handler(self._answer)

    def _answer(self, method: str, params: dict[str, Any]) -> Any:
        if method != "tool.call":
            raise LookupError(f"unknown request from the sandbox: {method}")
        name = str(params.get("name"))
        fn = self.tools.get(name)
        if fn is None:
            raise LookupError(f"no tool named {name!r}")
        args = params.get("args")
        if args is None:
            return fn()
        if isinstance(args, dict):
            return fn(**args)
        return fn(args)

    def call(self, method: str, params: dict[str, Any], on_notify: Any = None) -> Any:
        if self.destroyed:
            raise SandboxDestroyedError("sandbox has been destroyed", None, {"kind": "sandbox_destroyed"})
        if self.sandbox_id is not None:
            params["sandboxId"] = self.sandbox_id
        return self.transport.call(method, params, on_notify)


def _timeout_ms(timeout: float | None, timeout_ms: int | None) -> int | None:
    """One per-run timeout in milliseconds from ``timeout`` (seconds) or ``timeout_ms``."""
    if timeout is not None and timeout_ms is not None:
        raise ValueError("give timeout (seconds) or timeout_ms, not both")
    if timeout is not None:
        if isinstance(timeout, bool) or not isinstance(timeout, (int, float)) or timeout < 0:
            raise ValueError(f"timeout must be a non-negative number of seconds, not {timeout!r}")
        return max(1, int(round(timeout * 1000))) if timeout > 0 else 0
    if timeout_ms is not None:
        if isinstance(timeout_ms, bool) or not isinstance(timeout_ms, int) or timeout_ms < 0:
            raise ValueError(f"timeout_ms must be a non-negative integer, not {timeout_ms!r}")
        return timeout_ms
    return None


def _env_param(envs: Mapping[str, str] | None) -> dict[str, str] | None:
    if envs is None:
        return None
    if not isinstance(envs, Mapping):
        raise TypeError(f"envs must be a mapping of str to str, not {type(envs).__name__}")
    out: dict[str, str] = {}
    for k, v in envs.items():
        if not isinstance(k, str) or not isinstance(v, str):
            raise TypeError(f"envs must map str to str, not {k!r}: {v!r}")
        out[k] = v
    return out


def _run_params(
    command: str,
    envs: Mapping[str, str] | None,
    cwd: str | None,
    timeout: float | None,
    timeout_ms: int | None,
) -> dict[str, Any]:
    if not isinstance(command, str):
        raise TypeError(f"command must be a str, not {type(command).__name__}")
    params: dict[str, Any] = {"command": command}
    env = _env_param(envs)
    if env:
        params["env"] = env
    if cwd is not None:
        params["cwd"] = os.fspath(cwd)
    t = _timeout_ms(timeout, timeout_ms)
    if t is not None:
        params["timeoutMs"] = t
    return params


def _stdin_params(stdin: str | bytes | None, text_key: str, bytes_key: str) -> dict[str, Any]:
    if stdin is None:
        return {}
    if isinstance(stdin, str):
        return {text_key: stdin}
    if isinstance(stdin, (bytes, bytearray, memoryview)):
        return {bytes_key: base64.b64encode(bytes(stdin)).decode("ascii")}
    raise TypeError(f"stdin must be str or bytes, not {type(stdin).__name__}")


# A run's timeout when neither the sandbox nor the run names one.
DEFAULT_TIMEOUT_MS = 30_000

# How long an idle iterator sleeps between polls when no notification wakes it (a missed
# or undelivered wake-up costs at most this much latency, never output).
_POLL_S = 0.25


class CommandHandle:
    """A background process (``commands.run(..., background=True)`` or
    ``commands.connect(pid)``).

    Iterating it yields ``(stdout, stderr)`` text chunks as they arrive (one of the two may
    be empty) until the process has ended and all its output was read; output the ring
    buffer dropped before it was read is skipped (``dropped_stdout``/``dropped_stderr``
    count it). The process runs on whether or not anyone holds its handle."""

    # Declared here so that tools (and tests/python/test_sdk_parity.py) see the public
    # attributes without an instance.
    pid: int
    dropped_stdout: int
    dropped_stderr: int

    def __init__(
        self,
        handle: _Handle,
        pid: int,
        *,
        on_stdout: OutputCallback | None = None,
        on_stderr: OutputCallback | None = None,
        check: bool = False,
    ) -> None:
        self._h = handle
        self.pid = pid
        self._check = check
        self._offsets = [0, 0]
        self.dropped_stdout = 0
        self.dropped_stderr = 0
        self._wake = threading.Event()
        self._unsubscribe = handle.transport.subscribe(handle.sandbox_id, pid, self._on_notify)
        if on_stdout is not None or on_stderr is not None:
            # The callbacks read the rings with their own offsets, so they see every byte
            # in order whenever they started, and do not steal chunks from an iterator.
            pump = CommandHandle(handle, pid)
            threading.Thread(
                target=pump._pump, args=(on_stdout, on_stderr), name=f"wasmsand-pid-{pid}", daemon=True
            ).start()

    def _on_notify(self, method: str, params: dict[str, Any]) -> None:
        self._wake.set()

    def __del__(self) -> None:
        unsubscribe = getattr(self, "_unsubscribe", None)
        if unsubscribe is not None:
            unsubscribe()

    def _pump(self, on_stdout: OutputCallback | None, on_stderr: OutputCallback | None) -> None:
        try:
            for out, err in self:
                if out and on_stdout is not None:
                    on_stdout(out)
                if err and on_stderr is not None:
                    on_stderr(err)
        except (RuntimeError, SandboxError):
            pass  # the sandbox was destroyed, or the process forgotten: nothing more to read
        finally:
            self._unsubscribe()

    def poll(self) -> tuple[str, str, bool]:
        """The output that arrived since the last read (stdout, stderr) and whether the
        process is still running; never blocks."""
        self._wake.clear()
        r = self._h.call(
            "process.output",
            {"pid": self.pid, "stdoutOffset": self._offsets[0], "stderrOffset": self._offsets[1]},
        )
        self._offsets = [int(r["stdoutOffset"]), int(r["stderrOffset"])]
        self.dropped_stdout += int(r.get("droppedStdout", 0))
        self.dropped_stderr += int(r.get("droppedStderr", 0))
        return str(r.get("stdout", "")), str(r.get("stderr", "")), bool(r.get("running"))

    def __iter__(self) -> Iterator[tuple[str, str]]:
        while True:
            out, err, running = self.poll()
            if out or err:
                yield out, err
            if not running:
                # Read once more: output written just before the end may postdate the read.
                out, err, _ = self.poll()
                if out or err:
                    yield out, err
                return
            self._wake.wait(_POLL_S)

    def wait(self, timeout: float | None = None, *, timeout_ms: int | None = None) -> CommandResult:
        """Waits until the process ends and returns its result (``stdout``/``stderr`` are
        what its rings still hold). Past ``timeout`` seconds (or ``timeout_ms``) raises
        ``WaitTimeoutError`` and the process goes on. With ``check=True`` given to ``run``, a
        non-zero exit raises ``CommandExitError``."""
        params: dict[str, Any] = {"pid": self.pid}
        t = _timeout_ms(timeout, timeout_ms)
        if t is not None:
            params["timeoutMs"] = t
        result = CommandResult.from_wire(self._h.call("process.wait", params))
        if self._check and result.exit_code != 0:
            raise CommandExitError(result)
        return result

    def kill(self) -> bool:
        """Ends the process (exit code 137, ``error_class`` ``"CANCELLED"``); ``False`` when
        it had already ended."""
        return bool(self._h.call("process.kill", {"pid": self.pid})["killed"])

    def send_stdin(self, data: str | bytes) -> int:
        """Writes to the process's standard input; returns the bytes written. Blocks while
        its 64 KiB pipe is full and it is not reading."""
        params = {"pid": self.pid, **_stdin_params(data, "data", "dataBase64")}
        return int(self._h.call("process.write", params)["written"])

    def close_stdin(self) -> None:
        """Closes its standard input: it reads end of file once the pipe is drained."""
        self._h.call("process.write", {"pid": self.pid, "eof": True})

    def __repr__(self) -> str:
        return f"CommandHandle(pid={self.pid})"


def _preview_id(p: Preview | CommandResult) -> str:
    if isinstance(p, CommandResult):
        if p.preview is None:
            raise ValueError("this result is not a preview: run it with preview=True")
        p = p.preview
    return p.sandbox_id


def _changes_params(since: str, snapshot_id: str | None, path: str | None) -> dict[str, Any]:
    if snapshot_id is not None:
        if since not in ("mount", "snapshot"):
            raise ValueError("snapshot_id= compares with a snapshot; leave since= out")
        since = "snapshot"
    if since not in ("mount", "parent", "snapshot"):
        raise ValueError(f"since must be 'mount', 'parent' or a snapshot_id=, not {since!r}")
    if since == "snapshot" and snapshot_id is None:
        raise ValueError("since='snapshot' needs snapshot_id=")
    params: dict[str, Any] = {"since": since}
    if snapshot_id is not None:
        params["snapshotId"] = str(snapshot_id)
    if path is not None:
        params["path"] = path
    return params


def _deterministic_params(d: bool | Mapping[str, int]) -> bool | dict[str, int]:
    """``deterministic=True`` or ``{"seed": .., "start_time_ms": .., "step_us": ..}`` in the
    wire's camelCase (docs/runs.md: fixed clock, seeded randomness, ``$$`` and ``TZ``)."""
    if d is True:
        return True
    if not isinstance(d, Mapping):
        raise TypeError("deterministic must be True or a dict")
    names = {"seed": "seed", "start_time_ms": "startTimeMs", "step_us": "stepUs"}
    unknown = sorted(set(d) - set(names))
    if unknown:
        raise ValueError(f"deterministic: unknown key(s): {', '.join(unknown)}; known: seed, start_time_ms, step_us")
    return {names[k]: int(v) for k, v in d.items()}


def _network_params(network: Mapping[str, Any]) -> dict[str, Any]:
    """``network={"hosts": [...], "cidrs": [...], "ips": [...], "resolve": {host: [ip]},
    "ca_pem": [pem]}`` (docs/network.md: what ``curl``/``wget`` in the sandbox may reach) in the
    wire's shape."""
    if not isinstance(network, Mapping):
        raise TypeError("network must be a dict")
    known = ("hosts", "cidrs", "ips", "resolve", "ca_pem")
    unknown = sorted(set(network) - set(known))
    if unknown:
        raise ValueError(f"network: unknown key(s): {', '.join(unknown)}; known: {', '.join(known)}")
    wire: dict[str, Any] = {"allowlist": {k: list(network[k]) for k in ("hosts", "cidrs", "ips") if k in network}}
    if "resolve" in network:
        wire["resolve"] = {str(h): list(a) for h, a in network["resolve"].items()}
    if "ca_pem" in network:
        wire["caPem"] = list(network["ca_pem"])
    return wire


class Commands:
    """Runs command lines in the sandbox's shell (``sb.commands.run(...)``), in the
    foreground or as background processes."""

    def __init__(self, handle: _Handle) -> None:
        self._h = handle

    @overload
    def run(
        self,
        cmd: str,
        *,
        background: Literal[False] = False,
        envs: Mapping[str, str] | None = None,
        cwd: str | None = None,
        stdin: str | bytes | None = None,
        timeout: float | None = None,
        timeout_ms: int | None = None,
        on_stdout: OutputCallback | None = None,
        on_stderr: OutputCallback | None = None,
        atomic: bool = False,
        check: bool = False,
        truncation: str | None = None,
        preview: bool = False,
    ) -> CommandResult: ...

    @overload
    def run(
        self,
        cmd: str,
        *,
        background: Literal[True],
        envs: Mapping[str, str] | None = None,
        cwd: str | None = None,
        stdin: str | bytes | None = None,
        timeout: float | None = None,
        timeout_ms: int | None = None,
        on_stdout: OutputCallback | None = None,
        on_stderr: OutputCallback | None = None,
        atomic: bool = False,
        check: bool = False,
        truncation: str | None = None,
        preview: Literal[False] = False,
    ) -> CommandHandle: ...

    def run(
        self,
        cmd: str,
        *,
        background: bool = False,
        envs: Mapping[str, str] | None = None,
        cwd: str | None = None,
        stdin: str | bytes | None = None,
        timeout: float | None = None,
        timeout_ms: int | None = None,
        on_stdout: OutputCallback | None = None,
        on_stderr: OutputCallback | None = None,
        atomic: bool = False,
        check: bool = False,
        truncation: str | None = None,
        preview: bool = False,
    ) -> CommandResult | CommandHandle:
        """Runs ``cmd`` (bash syntax) and returns its ``CommandResult``; a non-zero exit is
        a result, not an exception, unless ``check=True`` (then ``CommandExitError``).

        - ``envs``/``cwd`` hold for this run only (it runs in a subshell that exports them
          and changes directory first; the session's variables and cwd are as before after).
        - ``stdin`` (text or bytes) is what the command reads as its standard input.
        - ``timeout`` (seconds) or ``timeout_ms`` overrides the sandbox's timeout.
        - ``on_stdout``/``on_stderr`` receive output chunks while it runs.
        - ``atomic=True``: a run that exits non-zero, times out, is cancelled or hits a limit
          leaves the sandbox exactly as before it (its result has ``rolled_back``).
        - ``truncation``: what a stream past its cap shows, ``"headTail"`` (the default: its
          first and last part, the whole in the sandbox file ``result.spilled`` names) or
          ``"plain"`` (its first part only, no file).
        - ``background=True`` returns a ``CommandHandle`` at once: the process runs next to
          later runs on the same files, with a copy of the session's state, under its own
          timeout (default the sandbox's); its stdin stays open until ``close_stdin()``.
        - ``preview=True`` runs it in a fork and leaves this sandbox as it is: the result's
          ``preview`` holds the fork and what the run changed, for ``Sandbox.commit`` or
          ``Sandbox.discard``.
        """
        params = _run_params(cmd, envs, cwd, timeout, timeout_ms)
        if background:
            if atomic:
                raise ValueError("atomic=True applies to foreground runs only")
            if preview:
                raise ValueError("preview=True applies to foreground runs only")
            pid = self._start(params, stdin)
            return CommandHandle(self._h, pid, on_stdout=on_stdout, on_stderr=on_stderr, check=check)
        params.update(_stdin_params(stdin, "stdin", "stdinBase64"))
        if atomic:
            params["atomic"] = True
        if preview:
            params["preview"] = True
        if truncation is not None:
            params["truncation"] = truncation
        notify = None
        if on_stdout is not None or on_stderr is not None:
            params["stream"] = True

            def notify(p: dict[str, Any]) -> None:
                cb = on_stdout if p.get("stream") == "stdout" else on_stderr
                if cb is not None:
                    cb(str(p.get("data", "")))

        result = CommandResult.from_wire(self._h.call("run", params, notify))
        if check and result.exit_code != 0:
            raise CommandExitError(result)
        return result

    def _start(self, params: dict[str, Any], stdin: str | bytes | None) -> int:
        raw: bytes | None = None
        if isinstance(stdin, (bytes, bytearray, memoryview)):
            raw = bytes(stdin)
        elif stdin is not None:
            params.update(_stdin_params(stdin, "stdin", "stdin"))
        pid = int(self._h.call("process.start", params)["pid"])
        if raw:
            self._h.call(
                "process.write",
                {"pid": pid, "dataBase64": base64.b64encode(raw).decode("ascii")},
            )
        return pid

    def connect(
        self,
        pid: int,
        *,
        on_stdout: OutputCallback | None = None,
        on_stderr: OutputCallback | None = None,
    ) -> CommandHandle:
        """A handle on a background process of this sandbox started by anyone (another
        handle, client object or thread). Iterating it starts from the oldest output its
        rings still hold; ``ProcessNotFoundError`` for an unknown pid."""
        pid = int(pid)
        self._h.call("process.output", {"pid": pid, "stdoutOffset": 0, "stderrOffset": 0})
        return CommandHandle(self._h, pid, on_stdout=on_stdout, on_stderr=on_stderr)

    def list(self) -> list[ProcessInfo]:
        """The sandbox's background processes: running ones, then the most recently ended."""
        r = self._h.call("process.list", {})
        return [ProcessInfo.from_wire(p) for p in r["processes"]]

    def kill(self, pid: int) -> bool:
        """Ends a background process; ``False`` when it had already ended."""
        return bool(self._h.call("process.kill", {"pid": int(pid)})["killed"])


# Bytes per files.write / files.read request of a chunked transfer (base64 makes the line a
# third longer; sandboxd's default line cap is 8 MiB).
CHUNK_BYTES = 1 << 20


def _chunks(data: str | bytes | bytearray | memoryview | BinaryIO, size: int) -> Iterator[bytes]:
    if isinstance(data, str):
        data = data.encode("utf-8")
    if isinstance(data, (bytes, bytearray, memoryview)):
        view = memoryview(data).cast("B")
        for i in range(0, max(len(view), 1), size):
            yield bytes(view[i : i + size])
        return
    read = getattr(data, "read", None)
    if read is None:
        raise TypeError(f"data must be str, bytes or a binary file object, not {type(data).__name__}")
    first = True
    while True:
        chunk = read(size)
        if isinstance(chunk, str):
            raise TypeError("the file object must be opened in binary mode")
        if not chunk and not first:
            return
        first = False
        yield bytes(chunk)
        if not chunk:
            return


class Files:
    """The sandbox's filesystem (``sb.files.read(...)``). Paths are absolute, or relative to
    the shell's current directory (on the service transport: to the session's workspace,
    ``/home/user``, whatever the shell's). Large files move in chunks of ``chunk_bytes``."""

    def __init__(self, handle: _Handle) -> None:
        self._h = handle

    @overload
    def read(self, path: str, format: Literal["bytes"] = "bytes") -> bytes: ...
    @overload
    def read(self, path: str, format: Literal["text"]) -> str: ...
    @overload
    def read(self, path: str, format: Literal["stream"]) -> Iterator[bytes]: ...

    def read(self, path: str, format: str = "bytes") -> str | bytes | Iterator[bytes]:
        """The content of a file: ``bytes`` (the default, as seed 001's SDK returns),
        ``format="text"`` (decoded as UTF-8), or ``"stream"``: an iterator of ``bytes``
        chunks, so a large file never sits whole in this process."""
        if format == "stream":
            return self._stream(path)
        if format not in ("text", "bytes"):
            raise ValueError(f"format must be 'text', 'bytes' or 'stream', not {format!r}")
        size_hint = self._h.chunk_bytes
        r = self._h.call("files.read", {"path": path, "offset": 0, "length": size_hint})
        first = base64.b64decode(r["data"])
        size = int(r["size"])
        if len(first) >= size:
            data = first
        else:
            buf = bytearray(size)
            buf[: len(first)] = first
            filled = len(first)
            del first
            for chunk in self._stream(path, filled):
                end = min(filled + len(chunk), size)
                buf[filled:end] = chunk[: end - filled]
                filled = end
                if filled >= size:
                    break
            data = bytes(buf[:filled]) if filled < size else bytes(buf)
        return data.decode("utf-8") if format == "text" else data

    def read_stream(self, path: str) -> Iterator[bytes]:
        """The file's bytes in chunks (``read(path, format="stream")``), never whole in this
        process."""
        return self._stream(path)

    def _stream(self, path: str, offset: int = 0) -> Iterator[bytes]:
        while True:
            r = self._h.call("files.read", {"path": path, "offset": offset, "length": self._h.chunk_bytes})
            chunk = base64.b64decode(r["data"])
            if not chunk:
                return
            offset += len(chunk)
            yield chunk
            if offset >= int(r["size"]):
                return

    def write(self, path: str, data: str | bytes | bytearray | memoryview | BinaryIO) -> None:
        """Writes a file (``str`` as UTF-8, ``bytes``, or a binary file object read in
        chunks), creating missing parent directories. A file larger than one chunk is
        uploaded next to the target under a hidden temporary name and renamed into place
        when complete, so a failed upload never leaves a partial file at ``path`` (the new
        file has the default mode, and a symlink at ``path`` is replaced, not followed)."""
        chunks = _chunks(data, self._h.chunk_bytes)
        first = next(chunks)
        second = next(chunks, None)
        if second is None:
            self._put(path, first, append=False)
            return
        head, tail = posixpath.split(path)
        temp = posixpath.join(head, f".{tail}.upload-{secrets.token_hex(6)}")
        try:
            self._put(temp, first, append=False)
            del first
            self._put(temp, second, append=True)
            del second
            for chunk in chunks:
                self._put(temp, chunk, append=True)
            self._h.call("files.rename", {"from": temp, "to": path})
        except BaseException:
            try:
                self._h.call("files.rm", {"path": temp, "recursive": False})
            except Exception:
                pass
            raise

    def _put(self, path: str, chunk: bytes, append: bool) -> None:
        params: dict[str, Any] = {"path": path, "data": base64.b64encode(chunk).decode("ascii")}
        if append:
            params["append"] = True
        self._h.call("files.write", params)

    def write_files(
        self,
        files: Iterable[WriteEntry | Mapping[str, Any] | tuple[str, str | bytes | BinaryIO]],
    ) -> None:
        """Writes several files: ``WriteEntry(path, data)``, ``{"path": ..., "data": ...}``
        or ``(path, data)`` each, in order."""
        for f in files:
            if isinstance(f, WriteEntry):
                path, data = f.path, f.data
            elif isinstance(f, Mapping):
                path, data = f["path"], f["data"]
            else:
                path, data = f
            self.write(path, data)

    def exists(self, path: str) -> bool:
        """Whether a file, directory or symlink is at ``path``."""
        try:
            self._h.call("files.stat", {"path": path})
        except (FileNotFoundError, NotADirectoryError):
            return False
        return True

    def list(self, path: str) -> list[FileInfo]:
        """The entries of a directory, sorted by name."""
        r = self._h.call("files.list", {"path": path})
        return [FileInfo(name=e["name"], type=e["type"], size=e["size"]) for e in r["entries"]]

    def make_dir(self, path: str) -> bool:
        """Creates a directory and any missing parents; ``False`` if it already existed
        (``FileExistsError`` if something else is there)."""
        try:
            st = self.stat(path)
        except FileNotFoundError:
            self._h.call("files.mkdir", {"path": path})
            return True
        if st.type != "dir":
            raise FileExistsError(errno.EEXIST, "File exists", path)
        return False

    def mkdir(self, path: str) -> None:
        """Creates a directory and any missing parents (``make_dir`` without the answer)."""
        self._h.call("files.mkdir", {"path": path})

    def remove(self, path: str) -> None:
        """Removes a file, or a directory with everything in it."""
        self._h.call("files.rm", {"path": path, "recursive": True})

    def rm(self, path: str, recursive: bool = False) -> None:
        """Removes a file or an empty directory; a whole tree with ``recursive=True``."""
        self._h.call("files.rm", {"path": path, "recursive": bool(recursive)})

    def rename(self, old_path: str, new_path: str) -> None:
        """Renames a file or directory by ``rename(2)``'s rules (a file replaces a file, a
        directory only an empty directory)."""
        self._h.call("files.rename", {"from": old_path, "to": new_path})

    def stat(self, path: str) -> FileInfo:
        """Name, type and size of a path (a symlink itself, not its target)."""
        r = self._h.call("files.stat", {"path": path})
        return FileInfo(name=r["name"], type=r["type"], size=r["size"])


class Tools:
    """Host functions that code in the sandbox calls: in ``python3``, ``from host import
    tools; tools.name(key=value)`` calls the registered function with those keyword
    arguments and gets its (JSON-serializable) return value. An exception in the function
    raises ``host.ToolError`` with its message in the guest, without the host's traceback.
    Each run may make at most ``limits["tool_calls"]`` calls (500 by default)."""

    def __init__(self, handle: _Handle) -> None:
        self._h = handle

    def register(
        self,
        name: str,
        fn: Callable[..., Any],
        *,
        description: str | None = None,
        input_schema: dict[str, Any] | None = None,
    ) -> None:
        """Offers ``fn`` as ``name``; registering a name again replaces it. Forks made
        later carry the tool."""
        if not callable(fn):
            raise TypeError("a tool must be callable")
        params: dict[str, Any] = {
            "name": name,
            "description": description if description is not None else (fn.__doc__ or "").strip(),
        }
        if input_schema is not None:
            params["inputSchema"] = input_schema
        self._h.tools[name] = fn
        self._h.call("tools.register", params)

    def unregister(self, name: str) -> bool:
        """Withdraws a tool; ``False`` if there was none of that name."""
        return bool(self._h.call("tools.unregister", {"name": name})["removed"])

    def list(self) -> list[str]:
        """The names of the registered tools, sorted."""
        return list(self._h.call("tools.list", {})["tools"])


def _open_transport(
    transport: str | None,
    sandboxd_path: str | os.PathLike[str] | None,
    url: str | None,
    api_key: str | None,
    service_params: dict[str, Any],
) -> Transport:
    """The transport ``Sandbox(...)``'s arguments ask for (none: ``$WASMSAND_TRANSPORT``, else
    in-process); ``url`` (or ``transport="service"`` with ``$WASMSAND_URL``) selects the
    service, and the service's own arguments are refused elsewhere rather than ignored."""
    if transport is None:
        # `$WASMSAND_TRANSPORT` moves a program that names none (`Sandbox()`, as seed 001's
        # SDK is used) to another transport without a change to its code.
        transport = "service" if url is not None else os.environ.get("WASMSAND_TRANSPORT") or "inprocess"
    if transport == "service":
        if sandboxd_path is not None:
            raise ValueError("sandboxd_path is only used with transport='rpc'")
        url = url if url is not None else os.environ.get("WASMSAND_URL") or None
        if url is None:
            raise ValueError("transport='service' needs url= (or $WASMSAND_URL): the URL sandboxd serve prints")
        key = api_key if api_key is not None else os.environ.get("WASMSAND_API_KEY") or None
        return ServiceTransport(url, key)
    if url is not None:
        raise ValueError(f"url= selects the service transport; it cannot be used with transport={transport!r}")
    given = sorted(k for k, v in {"api_key": api_key, **service_params}.items() if v is not None)
    if given:
        raise ValueError(f"{', '.join(given)}: only used with the service transport (url=)")
    if transport == "inprocess":
        if sandboxd_path is not None:
            raise ValueError("sandboxd_path is only used with transport='rpc'")
        return InProcessTransport()
    if transport == "rpc":
        return RpcTransport(sandboxd_path)
    raise ValueError(f"transport must be 'inprocess', 'rpc' or 'service', not {transport!r}")


class Sandbox:
    """A WebAssembly sandbox: a bash-like shell with coreutils, jq and more over an
    in-memory copy-on-write filesystem, with hard limits.

    ``transport="inprocess"`` runs it inside this process (the GIL is released while a
    command runs); ``transport="rpc"`` talks to a ``sandboxd`` child (``sandboxd_path``, else
    ``$WASMSAND_SANDBOXD``, else the server this package carries). Forks of an RPC sandbox
    share its child process. ``url="http://HOST:PORT/api/v1/sandbox"`` (or
    ``transport="service"`` and ``$WASMSAND_URL``) makes it a session of a remote
    ``sandboxd serve``, with ``api_key`` (else ``$WASMSAND_API_KEY``) as its bearer
    credential, ``runtime`` (``"wasm"``, ``"docker"``) and ``image`` its runtime and base
    image, ``ttl_sec`` its lifetime and ``env`` its variables; docs/python.md lists what that
    transport cannot do (``NotSupportedError``). ``timeout`` (seconds) or ``timeout_ms`` is
    each run's timeout when the run names none (30 s). ``network={"hosts": [...], "cidrs":
    [...], "ips": [...]}`` lets ``curl`` and ``wget`` in the sandbox reach what that egress
    allowlist allows (with ``"resolve": {host: [ip]}`` and ``"ca_pem": [pem]`` optional;
    docs/network.md); without it the sandbox has no network. ``mounts=[Mount(host, path),
    "HOST:PATH:ro", ...]`` puts host folders in the sandbox (read lazily, never written,
    secrets hidden: see ``Mount``); ``changes()`` then says what the sandbox did to them.

    Use it as a context manager: leaving the block destroys a fork and kills a root.
    """

    commands: Commands
    files: Files
    tools: Tools

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
        _handle: _Handle | None = None,
    ) -> None:
        if _handle is not None:
            self._h = _handle
        else:
            lim = Limits.coerce(limits)
            t_ms = _timeout_ms(timeout, timeout_ms)
            params: dict[str, Any] = {
                "timeoutMs": DEFAULT_TIMEOUT_MS if t_ms is None else t_ms,
                "fsLimitBytes": int(fs_limit_bytes),
            }
            wire = lim.to_wire()
            if wire:
                params["limits"] = wire
            if deterministic:
                params["deterministic"] = _deterministic_params(deterministic)
            if network is not None:
                params["network"] = _network_params(network)
            if mounts:
                params["mounts"] = [Mount.coerce(m).to_wire() for m in mounts]
            if ttl_sec is not None and (isinstance(ttl_sec, bool) or not isinstance(ttl_sec, int) or ttl_sec < 1):
                raise ValueError(f"ttl_sec must be a positive integer, not {ttl_sec!r}")
            service = {"runtime": runtime, "baseImage": image, "ttlSec": ttl_sec, "env": _env_param(env)}
            t = _open_transport(
                transport,
                sandboxd_path,
                url,
                api_key,
                {"runtime": runtime, "image": image, "ttl_sec": ttl_sec, "env": env},
            )
            try:
                if isinstance(t, ServiceTransport):
                    if mounts:
                        raise not_supported("host folders (mounts=): the service's sandboxes see no host files")
                    if tools:
                        # Refused before a session exists: none is left behind.
                        raise not_supported("host tools (tools=, sb.tools)")
                    params.update({k: v for k, v in service.items() if v is not None})
                t.call("create", params)
            except BaseException:
                t.close()
                raise
            self._h = _Handle(t, None)
            if lim.rpc_bytes is not None:
                # A request line holds a chunk in base64 plus its JSON envelope.
                self._h.chunk_bytes = max(256, min(CHUNK_BYTES, (lim.rpc_bytes - 512) * 3 // 4))
        self.commands = Commands(self._h)
        self.files = Files(self._h)
        self.tools = Tools(self._h)
        self._kill_lock = threading.Lock()
        try:
            for name, fn in (tools or {}).items():
                self.tools.register(name, fn)
        except BaseException:
            # A sandbox its caller never receives is not left running.
            if _handle is None:
                self.kill()
            raise

    @property
    def sandbox_id(self) -> str | None:
        """The fork's id on its server; ``None`` for a root sandbox."""
        return self._h.sandbox_id

    def snapshot(self) -> str:
        """Records files and shell state in O(1); returns an id for ``restore``."""
        return str(self._h.call("snapshot.create", {})["id"])

    def restore(self, snapshot_id: str) -> None:
        """Puts files and shell state back as they were at ``snapshot_id``."""
        self._h.call("snapshot.restore", {"id": snapshot_id})

    def export_state(self, key: bytes | None = None) -> bytes:
        """The whole state (files with modes and times, variables, functions, cwd, options,
        limits) as a versioned, compressed blob, authenticated with ``key`` (HMAC-SHA256)
        when given. ``Sandbox.import_state`` opens it, in this process or any other."""
        params: dict[str, Any] = {}
        if key is not None:
            params["key"] = base64.b64encode(bytes(key)).decode("ascii")
        r = self._h.call("sandbox.export", params)
        return base64.b64decode(r["data"])

    @classmethod
    def import_state(
        cls,
        blob: bytes,
        *,
        key: bytes | None = None,
        transport: str = "inprocess",
        sandboxd_path: str | os.PathLike[str] | None = None,
    ) -> "Sandbox":
        """A new sandbox holding the state ``export_state`` wrote (its limits included). A
        corrupt, forged, truncated, oversized or newer-version blob raises ``ValueError``
        and no sandbox is left running. The service transport has no portable state
        (``NotSupportedError``)."""
        if transport == "service":
            raise not_supported("import_state()")
        sb = cls(transport=transport, sandboxd_path=sandboxd_path)
        params: dict[str, Any] = {"data": base64.b64encode(bytes(blob)).decode("ascii")}
        if key is not None:
            params["key"] = base64.b64encode(bytes(key)).decode("ascii")
        try:
            sb._h.call("sandbox.import", params)
        except BaseException:
            sb.kill()
            raise
        return sb

    def fork(self) -> "Sandbox":
        """An independent copy in O(1): files, variables, functions, cwd and limits."""
        r = self._h.call("sandbox.fork", {})
        h = _Handle(self._h.transport, str(r["sandboxId"]), self._h.tools)
        h.chunk_bytes = self._h.chunk_bytes
        return Sandbox(_handle=h)

    def merge(self, fork: "Sandbox", *, env: bool = False, cwd: bool = False) -> MergeResult:
        """Applies here the files ``fork`` (a fork of this sandbox) changed since it was
        forked, or since it was last merged here: three-way, so a path only the fork changed
        is applied and one both changed differently is a conflict. All or nothing: a conflict
        raises ``MergeConflictError`` (``.conflicts``) and applies nothing. ``env=True``
        carries the fork's exported variables, ``cwd=True`` its working directory. The fork
        is left as it is."""
        if fork._h.transport is not self._h.transport or fork._h.sandbox_id is None:
            raise InvalidParamsError(
                "not a fork of this sandbox: only a sandbox forked from this one merges into it",
                -32602,
                {"kind": "invalid_params"},
            )
        if fork._h.destroyed:
            raise SandboxDestroyedError("sandbox has been destroyed", None, {"kind": "sandbox_destroyed"})
        r = self._h.call("sandbox.merge", {"from": fork._h.sandbox_id, "env": bool(env), "cwd": bool(cwd)})
        return MergeResult.from_wire(r)

    def mount(
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
        """Mounts the host directory ``host`` at ``path`` (see ``Mount`` for the options):
        read lazily under the sandbox's copy-on-write layer, never written. Forks made later
        share it."""
        m = Mount(
            host=os.fspath(host),
            path=path,
            read_only=read_only,
            gitignore=gitignore,
            exclude=tuple(exclude),
            allow_secrets=tuple(allow_secrets),
            max_host_bytes=max_host_bytes,
        )
        return MountInfo.from_wire(self._h.call("sandbox.mount", m.to_wire()))

    def mounts(self) -> list[MountInfo]:
        """The host folders mounted in this sandbox."""
        return [MountInfo.from_wire(m) for m in self._h.call("sandbox.mounts", {})["mounts"]]

    def changes(
        self,
        since: str = "mount",
        *,
        snapshot_id: str | None = None,
        path: str | None = None,
    ) -> Changes:
        """What the sandbox changed, as paths and as a patch ``git apply`` takes: against the
        mounted folder (``since="mount"``, the default), a snapshot (``snapshot_id=``) or the
        sandbox this one was forked from (``since="parent"``: what a merge would bring).
        ``path`` names the directory (default: the mount point when one folder is mounted,
        else the home directory); the paths are relative to it."""
        return Changes.from_wire(self._h.call("sandbox.diff", _changes_params(since, snapshot_id, path)))

    def export_changes(
        self,
        dir: str | os.PathLike[str],
        since: str = "mount",
        *,
        snapshot_id: str | None = None,
        path: str | None = None,
    ) -> ExportReport:
        """Writes what ``changes()`` finds into the host directory ``dir`` (which must
        exist): files written, deleted paths removed, directories made; nothing outside
        ``dir`` is touched."""
        params = _changes_params(since, snapshot_id, path)
        params["dir"] = os.fspath(dir)
        return ExportReport.from_wire(self._h.call("sandbox.exportChanges", params))

    def commit(self, preview: Preview | CommandResult, *, env: bool = False, cwd: bool = False) -> MergeResult:
        """Brings a preview's changes into this sandbox (three-way, as ``merge``; a conflict
        raises ``MergeConflictError``, applies nothing and keeps the preview). The preview is
        gone afterwards."""
        r = self._h.call("sandbox.commit", {"preview": _preview_id(preview), "env": bool(env), "cwd": bool(cwd)})
        return MergeResult.from_wire(r)

    def discard(self, preview: Preview | CommandResult) -> None:
        """Drops a preview and what it changed."""
        self._h.call("sandbox.discard", {"preview": _preview_id(preview)})

    def best_of(
        self,
        attempts: Iterable[str | tuple[str, Mapping[str, str]] | Mapping[str, Any]],
        *,
        concurrency: int | None = None,
        timeout: float | None = None,
        timeout_ms: int | None = None,
    ) -> list[CommandResult]:
        """Runs each attempt (a command, ``(command, env)``, or ``{"command", "env"}``) in a
        fork of its own, ``concurrency`` at a time, and returns their results in order, each
        with its ``preview``; commit the one to keep (``commit``), the rest can be
        discarded. A failed attempt raises its error."""
        wire: list[dict[str, Any]] = []
        for a in attempts:
            if isinstance(a, str):
                wire.append({"command": a})
            elif isinstance(a, tuple):
                cmd, env = a
                wire.append({"command": cmd, "env": dict(env)})
            else:
                wire.append(dict(a))
        params: dict[str, Any] = {"attempts": wire}
        if concurrency is not None:
            params["concurrency"] = int(concurrency)
        t = _timeout_ms(timeout, timeout_ms)
        if t is not None:
            params["timeoutMs"] = t
        out: list[CommandResult] = []
        for r in self._h.call("sandbox.bestOf", params)["attempts"]:
            if "error" in r:
                raise_for_error(r["error"])
            out.append(CommandResult.from_wire(r))
        return out

    def destroy(self) -> None:
        """Destroys this fork; a root sandbox is ended with ``kill()``."""
        if self._h.sandbox_id is None:
            raise RuntimeError("Cannot destroy root sandbox; use kill() instead")
        if self._h.destroyed:
            raise SandboxDestroyedError("sandbox has been destroyed", None, {"kind": "sandbox_destroyed"})
        self._h.transport.call("sandbox.destroy", {"sandboxId": self._h.sandbox_id})
        self._h.destroyed = True

    def kill(self) -> None:
        """Destroys the root and every fork, and stops the server of an RPC sandbox."""
        with self._kill_lock:
            if self._h.destroyed:
                return
            try:
                self._h.transport.call("kill", {})
            except Exception:
                pass
            self._h.destroyed = True
            self._h.transport.close()

    def __enter__(self) -> "Sandbox":
        return self

    def __exit__(self, *exc: object) -> None:
        if self._h.sandbox_id is not None:
            if not self._h.destroyed:
                try:
                    self.destroy()
                except Exception:
                    pass
        else:
            self.kill()
