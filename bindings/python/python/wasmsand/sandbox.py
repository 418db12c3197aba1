"""The ``Sandbox`` object: commands, files, snapshots and forks."""

from __future__ import annotations

import base64
import os
import threading
from typing import Any, Callable, Mapping

from ._transport import InProcessTransport, RpcTransport, Transport
from ._types import CommandResult, FileInfo, Limits, Usage

__all__ = ["Sandbox", "Commands", "Files", "Tools"]

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
            raise RuntimeError("sandbox has been destroyed")
        if self.sandbox_id is not None:
            params["sandboxId"] = self.sandbox_id
        return self.transport.call(method, params, on_notify)


class Commands:
    """Runs command lines in the sandbox's shell (``sb.commands.run(...)``)."""

    def __init__(self, handle: _Handle) -> None:
        self._h = handle

    def run(
        self,
        command: str,
        *,
        timeout_ms: int | None = None,
        on_stdout: OutputCallback | None = None,
        on_stderr: OutputCallback | None = None,
        atomic: bool = False,
    ) -> CommandResult:
        """Runs ``command`` (bash syntax) and returns its result. ``timeout_ms`` overrides
        the sandbox's timeout for this run; ``on_stdout``/``on_stderr`` receive output
        chunks while the command runs. With ``atomic=True`` a run that exits non-zero, times
        out, is cancelled or hits a limit leaves the sandbox exactly as it was before it
        (files, variables, cwd, functions, options) and its result has ``rolled_back``."""
        params: dict[str, Any] = {"command": command}
        if timeout_ms is not None:
            params["timeoutMs"] = int(timeout_ms)
        if atomic:
            params["atomic"] = True
        notify = None
        if on_stdout is not None or on_stderr is not None:
            params["stream"] = True

            def notify(p: dict[str, Any]) -> None:
                cb = on_stdout if p.get("stream") == "stdout" else on_stderr
                if cb is not None:
                    cb(str(p.get("data", "")))

        r = self._h.call("run", params, notify)
        return CommandResult(
            stdout=r["stdout"],
            stderr=r["stderr"],
            exit_code=r["exitCode"],
            execution_time_ms=r["executionTimeMs"],
            truncated=r.get("truncated"),
            error_class=r.get("errorClass"),
            usage=Usage.from_wire(r.get("usage")),
            rolled_back=bool(r.get("rolledBack", False)),
        )


class Files:
    """The sandbox's filesystem (``sb.files.read(...)``). Paths are absolute, or relative to
    the shell's current directory."""

    def __init__(self, handle: _Handle) -> None:
        self._h = handle

    def read(self, path: str) -> bytes:
        """The whole content of a file."""
        r = self._h.call("files.read", {"path": path})
        return base64.b64decode(r["data"])

    def write(self, path: str, data: bytes | str) -> None:
        """Writes a file (``str`` as UTF-8), creating missing parent directories."""
        if isinstance(data, str):
            data = data.encode("utf-8")
        encoded = base64.b64encode(bytes(data)).decode("ascii")
        self._h.call("files.write", {"path": path, "data": encoded})

    def list(self, path: str) -> list[FileInfo]:
        """The entries of a directory, sorted by name."""
        r = self._h.call("files.list", {"path": path})
        return [FileInfo(name=e["name"], type=e["type"], size=e["size"]) for e in r["entries"]]

    def mkdir(self, path: str) -> None:
        """Creates a directory and any missing parents."""
        self._h.call("files.mkdir", {"path": path})

    def rm(self, path: str, recursive: bool = False) -> None:
        """Removes a file or an empty directory; a whole tree with ``recursive=True``."""
        self._h.call("files.rm", {"path": path, "recursive": bool(recursive)})

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


class Sandbox:
    """A WebAssembly sandbox: a bash-like shell with coreutils, jq and more over an
    in-memory copy-on-write filesystem, with hard limits.

    ``transport="inprocess"`` runs it inside this process (the GIL is released while a
    command runs); ``transport="rpc"`` talks to a ``sandboxd`` child (``sandboxd_path``, else
    ``$WASMSAND_SANDBOXD``, else the server this package carries). Forks of an RPC sandbox
    share its child process.

    Use it as a context manager: leaving the block destroys a fork and kills a root.
    """

    def __init__(
        self,
        *,
        timeout_ms: int = 30_000,
        fs_limit_bytes: int = 256 * 1024 * 1024,
        limits: Limits | Mapping[str, Any] | None = None,
        transport: str = "inprocess",
        sandboxd_path: str | os.PathLike[str] | None = None,
        tools: Mapping[str, Callable[..., Any]] | None = None,
        _handle: _Handle | None = None,
    ) -> None:
        if _handle is not None:
            self._h = _handle
        else:
            lim = Limits.coerce(limits)
            params: dict[str, Any] = {
                "timeoutMs": int(timeout_ms),
                "fsLimitBytes": int(fs_limit_bytes),
            }
            wire = lim.to_wire()
            if wire:
                params["limits"] = wire
            if transport == "inprocess":
                if sandboxd_path is not None:
                    raise ValueError("sandboxd_path is only used with transport='rpc'")
                t: Transport = InProcessTransport()
            elif transport == "rpc":
                t = RpcTransport(sandboxd_path)
            else:
                raise ValueError(f"transport must be 'inprocess' or 'rpc', not {transport!r}")
            try:
                t.call("create", params)
            except BaseException:
                t.close()
                raise
            self._h = _Handle(t, None)
        self.commands = Commands(self._h)
        self.files = Files(self._h)
        self.tools = Tools(self._h)
        for name, fn in (tools or {}).items():
            self.tools.register(name, fn)
        self._kill_lock = threading.Lock()

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
        and no sandbox is left running."""
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
        return Sandbox(_handle=_Handle(self._h.transport, str(r["sandboxId"]), self._h.tools))

    def destroy(self) -> None:
        """Destroys this fork; a root sandbox is ended with ``kill()``."""
        if self._h.sandbox_id is None:
            raise RuntimeError("Cannot destroy root sandbox; use kill() instead")
        if self._h.destroyed:
            raise RuntimeError("sandbox has been destroyed")
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
