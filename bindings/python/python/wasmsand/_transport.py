"""The two ways to reach sandboxes: the dispatcher inside this process, or a ``sandboxd``
child over JSON-RPC on its stdin/stdout. Both speak the same JSON-RPC, so the SDK above them
behaves the same whichever is used."""

from __future__ import annotations

import itertools
import json
import os
import shutil
import subprocess
import sys
import threading
import weakref
from typing import Any, Callable

from ._errors import SandboxDestroyedError, raise_for_error

__all__ = ["Transport", "InProcessTransport", "RpcTransport", "find_sandboxd"]

Notify = Callable[[dict[str, Any]], None]
RequestHandler = Callable[[str, dict[str, Any]], Any]
# (method, params) of a background process's notification (`process.output`, `process.exit`).
ProcessListener = Callable[[str, dict[str, Any]], None]


class Transport:
    """Sends JSON-RPC requests; ``call`` blocks until the answer and returns its result.

    Notifications of background processes are not tied to a request: they are routed by
    (sandboxId, pid) to whoever ``subscribe``d."""

    def __init__(self) -> None:
        self._subs: dict[tuple[str | None, int], list[ProcessListener]] = {}
        self._subs_lock = threading.Lock()

    def subscribe(self, sandbox_id: str | None, pid: int, fn: ProcessListener) -> Callable[[], None]:
        """Calls ``fn(method, params)`` for each notification of that process; returns the
        function that stops it."""
        key = (sandbox_id, pid)
        with self._subs_lock:
            self._subs.setdefault(key, []).append(fn)

        def unsubscribe() -> None:
            with self._subs_lock:
                fns = self._subs.get(key)
                if fns is not None and fn in fns:
                    fns.remove(fn)
                    if not fns:
                        del self._subs[key]

        return unsubscribe

    def _route_process(self, method: str, params: dict[str, Any]) -> None:
        pid = params.get("pid")
        if not isinstance(pid, int):
            return
        sid = params.get("sandboxId")
        with self._subs_lock:
            fns = list(self._subs.get((sid if isinstance(sid, str) else None, pid), ()))
        for fn in fns:
            fn(method, params)

    def call(self, method: str, params: dict[str, Any], on_notify: Notify | None = None) -> Any:
        raise NotImplementedError

    def close(self) -> None:
        raise NotImplementedError

    def set_request_handler(self, handler: RequestHandler | None) -> None:
        """Who answers requests the server sends to the client (host tools)."""
        self._request_handler = handler


class InProcessTransport(Transport):
    """The Rust dispatcher in this process; each request releases the GIL while it runs."""

    def __init__(self) -> None:
        from ._native import NativeDispatcher

        super().__init__()
        self._native = NativeDispatcher()
        self._ids = itertools.count(1)
        self._request_handler: RequestHandler | None = None
        self._closed = False
        # Weak: the native dispatcher keeps the handler alive, and must not keep us alive.
        me = weakref.ref(self)

        def on_process(text: str) -> None:
            t = me()
            if t is not None:
                t._on_native_message(json.loads(text))

        setter = getattr(self._native, "set_notification_handler", None)
        if setter is not None:
            setter(on_process)

    def _on_native_message(self, msg: dict[str, Any]) -> None:
        method = msg.get("method")
        if isinstance(method, str) and method.startswith("process."):
            self._route_process(method, msg.get("params") or {})

    def call(self, method: str, params: dict[str, Any], on_notify: Notify | None = None) -> Any:
        if self._closed:
            raise SandboxDestroyedError("sandbox has been killed", None, {"kind": "sandbox_destroyed"})
        rid = next(self._ids)
        request = json.dumps({"jsonrpc": "2.0", "id": rid, "method": method, "params": params})
        callback = None
        if on_notify is not None or method == "process.start":

            def callback(text: str) -> None:
                msg = json.loads(text)
                if msg.get("method") == "output":
                    if on_notify is not None:
                        on_notify(msg.get("params") or {})
                else:
                    # A process's notifications when no handler could be set.
                    self._on_native_message(msg)

        answer = self._native.call(request, callback)
        if answer is None:
            return None
        msg = json.loads(answer)
        if "error" in msg:
            raise_for_error(msg["error"])
        return msg.get("result")

    def set_request_handler(self, handler: RequestHandler | None) -> None:
        self._request_handler = handler

        def answer(method: str, params: str) -> str:
            h = self._request_handler
            if h is None:
                raise LookupError(f"no handler for {method}")
            return json.dumps(h(method, json.loads(params)))

        self._native.set_request_handler(answer)

    def close(self) -> None:
        self._closed = True


def find_sandboxd(explicit: str | os.PathLike[str] | None = None) -> list[str]:
    """The command that starts a server: ``explicit``, else ``$WASMSAND_SANDBOXD``, else the
    server this package carries (``python -m wasmsand._sandboxd``), else ``sandboxd`` on
    ``PATH``."""
    if explicit is not None:
        return [os.fspath(explicit)]
    env = os.environ.get("WASMSAND_SANDBOXD")
    if env:
        return [env]
    try:
        from . import _native  # noqa: F401

        return [sys.executable, "-m", "wasmsand._sandboxd"]
    except ImportError:
        pass
    found = shutil.which("sandboxd")
    if found:
        return [found]
    raise FileNotFoundError("no sandboxd: pass sandboxd_path= or put sandboxd on PATH")


class _Pending:
    __slots__ = ("event", "message", "on_notify")

    def __init__(self, on_notify: Notify | None) -> None:
        self.event = threading.Event()
        self.message: dict[str, Any] | None = None
        self.on_notify = on_notify


class RpcTransport(Transport):
    """A ``sandboxd`` child process; one reader thread matches answers to requests by id and
    routes ``output`` notifications to the request that asked for them."""

    def __init__(self, sandboxd_path: str | os.PathLike[str] | None = None) -> None:
        super().__init__()
        cmd = find_sandboxd(sandboxd_path)
        self._proc = subprocess.Popen(
            cmd,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=None,
            # Buffered: answers are read line by line, and an unbuffered pipe would cost one
            # system call per byte. Requests are flushed as they are written.
            bufsize=-1,
        )
        self._ids = itertools.count(1)
        self._pending: dict[int, _Pending] = {}
        self._lock = threading.Lock()
        self._write_lock = threading.Lock()
        self._request_handler: RequestHandler | None = None
        self._dead: str | None = None
        self._closed = False
        self._reader = threading.Thread(target=self._read_loop, name="wasmsand-rpc", daemon=True)
        self._reader.start()

    def _send(self, obj: dict[str, Any]) -> None:
        line = (json.dumps(obj, separators=(",", ":")) + "\n").encode()
        stdin = self._proc.stdin
        assert stdin is not None
        with self._write_lock:
            stdin.write(line)
            stdin.flush()

    def call(self, method: str, params: dict[str, Any], on_notify: Notify | None = None) -> Any:
        rid = next(self._ids)
        slot = _Pending(on_notify)
        with self._lock:
            if self._closed:
                raise SandboxDestroyedError("sandbox has been killed", None, {"kind": "sandbox_destroyed"})
            if self._dead is not None:
                raise RuntimeError(self._dead)
            self._pending[rid] = slot
        try:
            self._send({"jsonrpc": "2.0", "id": rid, "method": method, "params": params})
        except (BrokenPipeError, OSError, ValueError) as e:
            # ValueError: `close()` on another thread closed the pipe after the check above.
            with self._lock:
                self._pending.pop(rid, None)
                closed = self._closed
            if closed:
                raise SandboxDestroyedError("sandbox has been killed", None, {"kind": "sandbox_destroyed"}) from None
            raise RuntimeError(f"sandboxd is not running: {e}") from None
        slot.event.wait()
        msg = slot.message
        if msg is None:
            raise RuntimeError(self._dead or "sandboxd exited")
        if "error" in msg:
            raise_for_error(msg["error"])
        return msg.get("result")

    def _read_loop(self) -> None:
        stdout = self._proc.stdout
        assert stdout is not None
        try:
            for raw in stdout:
                try:
                    msg = json.loads(raw)
                except ValueError:
                    continue
                if not isinstance(msg, dict):
                    continue
                if "method" in msg:
                    self._on_server_message(msg)
                    continue
                rid = msg.get("id")
                with self._lock:
                    slot = self._pending.pop(rid, None) if isinstance(rid, int) else None
                if slot is not None:
                    slot.message = msg
                    slot.event.set()
        finally:
            with self._lock:
                self._dead = "sandboxd exited"
                pending = list(self._pending.values())
                self._pending.clear()
            for slot in pending:
                slot.event.set()

    def _on_server_message(self, msg: dict[str, Any]) -> None:
        params = msg.get("params") or {}
        if "id" not in msg:
            if msg.get("method") == "output":
                rid = params.get("requestId")
                with self._lock:
                    slot = self._pending.get(rid) if isinstance(rid, int) else None
                if slot is not None and slot.on_notify is not None:
                    slot.on_notify(params)
            elif str(msg.get("method")).startswith("process."):
                self._route_process(str(msg["method"]), params)
            return
        # A request from the server (a host tool call): answered on its own thread so the
        # reader keeps delivering answers meanwhile.
        threading.Thread(target=self._answer, args=(msg,), daemon=True).start()

    def _answer(self, msg: dict[str, Any]) -> None:
        handler = self._request_handler
        rid = msg.get("id")
        try:
            if handler is None:
                raise LookupError(f"no handler for {msg.get('method')}")
            result = handler(str(msg.get("method")), msg.get("params") or {})
            reply: dict[str, Any] = {"jsonrpc": "2.0", "id": rid, "result": result}
        except Exception as e:  # the handler's failure goes back to the server, not up
            reply = {"jsonrpc": "2.0", "id": rid, "error": {"code": -32000, "message": str(e)}}
        try:
            self._send(reply)
        except OSError:
            pass

    def close(self) -> None:
        with self._lock:
            self._closed = True
        proc = self._proc
        try:
            if proc.stdin is not None:
                proc.stdin.close()
        except OSError:
            pass
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
