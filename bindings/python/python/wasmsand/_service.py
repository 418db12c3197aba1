"""The transport to a remote ``sandboxd serve`` (docs/service.md): each JSON-RPC request of the
SDK becomes the service's REST calls, and a run's output comes over its WebSocket log stream.

It translates rather than tunnels because the service is the code-interpreter API other
clients use too (IDEs, the web panel, agents over MCP): a sandbox there is a *session* with an
id and a TTL, a fork is another session, a run is a record whose output is a numbered frame
stream. The SDK above sees the results and exceptions the other transports give; what the
service has no counterpart for raises ``NotSupportedError`` before anything is sent.

Two properties of a network the other transports never face are handled here: a request whose
answer was lost may have been carried out (so the creating requests carry an
``Idempotency-Key`` and are sent again with the same key, which the service answers with the
original result), and a stream connection may drop in the middle of a run (so the stream is
resumed from the frame after the last one seen, and frames are deduplicated by ``seq``).

``httpx`` and ``websockets`` are imported only when a ``ServiceTransport`` is made, so the
in-process and RPC transports do not need them."""

from __future__ import annotations

import base64
import codecs
import json
import math
import os
import random
import shlex
import socket
import threading
import time
import uuid
from concurrent.futures import ThreadPoolExecutor
from datetime import datetime
from typing import TYPE_CHECKING, Any, Callable, Mapping, NoReturn
from urllib.parse import quote, urlsplit, urlunsplit

from ._errors import (
    InvalidParamsError,
    NotSupportedError,
    SandboxDestroyedError,
    SandboxError,
    WaitTimeoutError,
    raise_for_error,
)
from ._transport import Notify, Transport

if TYPE_CHECKING:
    import httpx
    from websockets.sync.client import ClientConnection

__all__ = ["ServiceTransport", "BASE_PATH", "SPEC_VERSION"]

# Where the service's API lives on its host, and the request-schema version this client speaks.
BASE_PATH = "/api/v1/sandbox"
SPEC_VERSION = "1.0"

# `Sandbox(fs_limit_bytes=...)`'s default: the one value the service accepts, since a
# session's workspace cap is the server's (`SANDBOX_WORKSPACE_CAP_MB`), not the client's.
DEFAULT_FS_LIMIT_BYTES = 256 * 1024 * 1024

# Retries of one request (connection failures, 502/503/504, 429) and of one stream (drops
# without progress). Bounded so that a service that stays down is an error, not a hang.
_RETRIES = 4
# A `Retry-After` longer than this is waited only this long before the next try.
_RETRY_AFTER_CAP_S = 10.0
# The service sends a heartbeat frame every `SANDBOX_WS_HEARTBEAT_SEC` (10 s by default)
# while a run goes on: a stream silent this long is a dead connection, resumed like a drop.
_STREAM_IDLE_S = 45.0
# Attempts one best_of may make: the other transports' cap.
_MAX_ATTEMPTS = 64
# The longest one `.../wait` request holds (the service's own cap is 30 s); a longer wait is
# several requests.
_WAIT_SLICE_MS = 30_000
# The JSON-RPC names of the per-sandbox limits the service leaves to its own configuration.
_LIMIT_NAMES = {
    "stdoutBytes": "stdout_bytes",
    "stderrBytes": "stderr_bytes",
    "commandBytes": "command_bytes",
    "fileCount": "file_count",
    "memoryBytes": "memory_bytes",
    "toolCalls": "tool_calls",
    "rpcBytes": "rpc_bytes",
    "fsBytes": "fs_bytes",
    "spillBytes": "spill_bytes",
    "backgroundProcesses": "background_processes",
    "openFiles": "open_files",
    "sessionOpenFiles": "session_open_files",
    "pids": "pids",
}

Handler = Callable[[dict[str, Any], "Notify | None"], Any]


def not_supported(feature: str) -> NotSupportedError:
    """The error for a feature the service has no counterpart for, naming both."""
    return NotSupportedError(
        f"{feature} is not supported by the service transport (sandboxd serve); "
        "use transport='inprocess' or transport='rpc' for it",
        None,
        {"kind": "not_supported", "feature": feature, "transport": "service"},
    )


def _destroyed() -> SandboxDestroyedError:
    return SandboxDestroyedError("sandbox has been killed", None, {"kind": "sandbox_destroyed"})


def base_url(url: str) -> str:
    """The API's base URL from what a user gives: the URL ``serve`` prints (with the base
    path), or just the server's (``http://host:8787``)."""
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.netloc:
        raise ValueError(f"url must be the http:// or https:// URL of a sandboxd service, not {url!r}")
    path = parts.path.rstrip("/") or BASE_PATH
    return urlunsplit((parts.scheme, parts.netloc, path, "", ""))


def _seg(value: str) -> str:
    """One path segment: ids are the server's, but a snapshot id is the caller's text."""
    return quote(value, safe="")


def _seconds(ms: int) -> int:
    """The service counts whole seconds: a timeout is rounded up, never cut short, and is at
    least 1 (the service refuses 0)."""
    return max(1, math.ceil(ms / 1000))


def _backoff(attempt: int) -> float:
    # Exponential with jitter, so that clients cut off together do not come back together.
    return min(5.0, 0.2 * 2.0**attempt) * (0.5 + random.random() / 2)


def _retry_after(headers: Mapping[str, str]) -> float | None:
    raw = headers.get("retry-after")
    if raw is None:
        return None
    try:
        return min(max(float(raw), 0.0), _RETRY_AFTER_CAP_S)
    except ValueError:
        return None  # an HTTP date: the service never sends one; fall back to backoff


def _envelope(body: bytes) -> tuple[str, str, dict[str, Any]]:
    """``(code, message, details)`` of the service's error envelope
    (``{"error": {"code", "message", "details"}}``); empty when the body is not one (a proxy's
    page)."""
    try:
        value = json.loads(body)
    except ValueError:
        return "", "", {}
    err = value.get("error") if isinstance(value, dict) else None
    if not isinstance(err, dict):
        return "", "", {}
    details = err.get("details")
    return str(err.get("code") or ""), str(err.get("message") or ""), details if isinstance(details, dict) else {}


def _kind(status: int, code: str, details: Mapping[str, Any]) -> str:
    """The SDK's ``data.kind`` for an error of the service, from its code and details (never
    its message): the kinds ``raise_for_error`` turns into the exceptions the other
    transports raise."""
    reason = details.get("reason")
    if isinstance(details.get("errno"), str):
        return "filesystem"
    if reason == "not_supported":
        return "not_supported"
    if code == "conflict":
        return reason if isinstance(reason, str) else "conflict"
    if code == "not_found":
        if status == 410:
            return "sandbox_destroyed"  # the session expired meanwhile
        resource = details.get("resource")
        return {"process": "no_such_process", "snapshot": "unknown_snapshot", "session": "unknown_sandbox"}.get(
            resource if isinstance(resource, str) else "", "not_found"
        )
    if code == "session_lost":
        return "sandbox_destroyed"
    if code in ("invalid_request", "invalid_spec_version"):
        return "invalid_params"
    if code == "quota_exceeded" and reason == "processes":
        return "limit_exceeded"
    return code or f"http_{status}"


def raise_http(status: int, body: bytes, reason: str = "") -> NoReturn:
    """Raises the SDK's exception for an error answer of the service. ``code`` of the
    exception is the HTTP status; ``data`` holds the envelope's details with ``kind``,
    ``code`` (the service's error code) and ``status``."""
    code, message, details = _envelope(body)
    if not message:
        message = f"HTTP {status} {reason}".rstrip()
    data: dict[str, Any] = {**details, "kind": _kind(status, code, details), "code": code or None, "status": status}
    if data["kind"] == "limit_exceeded":
        data.setdefault("limit", "backgroundProcesses")
        data.setdefault("value", details.get("max_running"))
    raise_for_error({"code": status, "message": message, "data": data})


def _utf8(chunk: Mapping[str, Any]) -> str:
    """Text of an output chunk of a background process: ``utf8`` as it is, ``base64`` (bytes
    that are not UTF-8) decoded with replacement characters, as the other transports do."""
    data = str(chunk.get("data", ""))
    if chunk.get("encoding") == "base64":
        return base64.b64decode(data).decode("utf-8", "replace")
    return data


def _epoch_ms(iso: Any) -> int:
    if not isinstance(iso, str):
        return 0
    try:
        return int(datetime.fromisoformat(iso).timestamp() * 1000)
    except ValueError:
        return 0


class _Output:
    """What one run's stream delivered: each stream's bytes, and the same bytes decoded for
    the caller's callbacks as they arrive (a character split between two frames is held
    until its end arrives, so a callback never sees half of one)."""

    def __init__(self, notify: Notify | None) -> None:
        self.data = {"stdout": bytearray(), "stderr": bytearray()}
        self.decoders = {k: codecs.getincrementaldecoder("utf-8")("replace") for k in self.data}
        self.notify = notify
        # The log cap cut the output, or frames fell out of the ring before they were read.
        self.cut = False

    def add(self, stream: str, chunk: bytes) -> None:
        self.data[stream] += chunk
        if self.notify is not None:
            text = self.decoders[stream].decode(chunk)
            if text:
                self.notify({"stream": stream, "data": text})

    def finish(self) -> None:
        if self.notify is None:
            return
        for stream, decoder in self.decoders.items():
            text = decoder.decode(b"", final=True)
            if text:
                self.notify({"stream": stream, "data": text})

    def text(self, stream: str) -> str:
        return self.data[stream].decode("utf-8", "replace")


def _frame_bytes(frame: Mapping[str, Any]) -> bytes:
    data = frame.get("data")
    if not isinstance(data, str):
        return b""
    if frame.get("encoding") == "base64":
        return base64.b64decode(data)
    return data.encode("utf-8")


def _run_result(run_id: str, status: Mapping[str, Any], out: _Output) -> dict[str, Any]:
    """A run's status and stream as the JSON-RPC ``run`` result (``CommandResult.from_wire``).

    The service records why a run ended as a phase and a reason code; the SDK's result has
    an exit code and an error class, so the phases map onto those. A run that never reached
    its command because its ``cwd`` is not a directory (``provision_failed``) is the exit 1
    the other transports give a failed ``cd``, with the service's reason on stderr; one that
    ended for reasons outside the command (the session deleted, the server stopping, the
    queue's TTL) raises."""
    phase = status.get("phase")
    reason = status.get("reason_code")
    message = status.get("message")
    code = status.get("exit_code")
    exit_code = code if isinstance(code, int) else None
    stderr = out.text("stderr")
    error_class: str | None = None
    limits_hit: list[str] = []
    if phase == "completed":
        exit_code = 0 if exit_code is None else exit_code
    elif phase == "timed_out":
        exit_code, error_class, limits_hit = 124 if exit_code is None else exit_code, "TIMEOUT", ["timeoutMs"]
    elif phase == "killed":
        exit_code, error_class = 137 if exit_code is None else exit_code, "CANCELLED"
    elif phase == "failed" and reason == "session_destroyed":
        raise SandboxDestroyedError(
            f"sandbox has been destroyed (run {run_id} failed: {message or reason})",
            None,
            {"kind": "sandbox_destroyed", "run_id": run_id},
        )
    elif phase == "failed" and reason == "oom_killed":
        exit_code, error_class, limits_hit = 137 if exit_code is None else exit_code, "LIMIT_EXCEEDED", ["memoryBytes"]
    elif phase == "failed" and reason in ("limit_exceeded", "pids_limit_exceeded"):
        exit_code, error_class = 1 if exit_code is None else exit_code, "LIMIT_EXCEEDED"
    elif phase == "failed" and reason == "provision_failed" and exit_code is None:
        exit_code = 1
        if message:
            stderr += f"{message}\n"
    elif phase == "failed" and exit_code is not None and reason in (None, "nonzero_exit"):
        pass
    else:
        raise SandboxError(
            f"run {run_id} ended {phase} ({reason}): {message or 'the command did not complete'}",
            None,
            {"kind": str(reason or phase or "run_failed"), "run_id": run_id, "phase": phase, "reason_code": reason},
        )
    usage = status.get("resource_usage")
    u: Mapping[str, Any] = usage if isinstance(usage, dict) else {}
    wall_s = float(u.get("wall_time_sec") or 0.0)
    truncated = out.cut or bool(status.get("log_truncated"))
    return {
        "stdout": out.text("stdout"),
        "stderr": stderr,
        "exitCode": exit_code,
        "executionTimeMs": wall_s * 1000,
        # The service caps a run's log as a whole (`SANDBOX_MAX_LOG_BYTES`), not per stream:
        # once it cut, neither stream is complete.
        "truncated": {"stdout": True, "stderr": True} if truncated else None,
        "errorClass": error_class,
        "usage": {
            "wallMs": round(wall_s * 1000),
            "cpuUs": round(float(u.get("cpu_time_sec") or 0.0) * 1e6),
            "peakMemoryBytes": round(float(u.get("peak_rss_mb") or 0.0) * 1024 * 1024),
            "netRequests": int(u.get("network_requests") or 0),
            "netBytes": int(u.get("network_bytes") or 0),
            "limitsHit": limits_hit,
        },
    }


def _process_result(r: Mapping[str, Any]) -> dict[str, Any]:
    """A background process's result (``.../wait``) as the JSON-RPC ``process.wait`` one."""
    return {
        "stdout": str(r.get("stdout", "")),
        "stderr": str(r.get("stderr", "")),
        "exitCode": int(r["exit_code"]),
        "executionTimeMs": float(r.get("execution_time_ms") or 0),
        # One flag for both rings, as for runs.
        "truncated": {"stdout": True, "stderr": True} if r.get("truncated") else None,
        "errorClass": r.get("error_class"),
        "usage": {
            "wallMs": int(r.get("execution_time_ms") or 0),
            "cpuUs": int(r.get("cpu_time_ms") or 0) * 1000,
            "peakMemoryBytes": int(r.get("peak_memory_bytes") or 0),
            "limitsHit": [str(x) for x in r.get("limits_hit") or []],
        },
    }


def _create_body(params: Mapping[str, Any]) -> dict[str, Any]:
    """``POST /sessions``'s body from the SDK's ``create`` params; what has no counterpart on
    the service raises ``NotSupportedError`` here, before a session exists."""
    timeout_ms = int(params["timeoutMs"]) if params.get("timeoutMs") is not None else 30_000
    limits: dict[str, Any] = dict(params.get("limits") or {})
    if "timeoutMs" in limits:
        # A session's run timeout is the one limit the service takes from a client.
        timeout_ms = int(limits.pop("timeoutMs"))
    if limits:
        names = ", ".join(sorted(_LIMIT_NAMES.get(k, str(k)) for k in limits))
        raise not_supported(f"limits= ({names}; the service's own limits apply)")
    if params.get("deterministic"):
        raise not_supported("deterministic=")
    if int(params.get("fsLimitBytes", DEFAULT_FS_LIMIT_BYTES)) != DEFAULT_FS_LIMIT_BYTES:
        raise not_supported("fs_limit_bytes= (the service's workspace cap applies)")
    body: dict[str, Any] = {"spec_version": SPEC_VERSION, "timeout_sec": _seconds(timeout_ms)}
    network = params.get("network")
    if network is None:
        # A sandbox without `network=` has none, whatever the server's default policy.
        body["network_policy"] = "deny_all"
    else:
        if "resolve" in network:
            raise not_supported("network resolve= (the server's SANDBOX_EGRESS_RESOLVE applies)")
        if "caPem" in network:
            raise not_supported("network ca_pem= (the server's SANDBOX_EGRESS_CA_FILE applies)")
        body["network_policy"] = "allowlist"
        body["egress_allowlist"] = dict(network.get("allowlist") or {})
    for key, field in (("runtime", "runtime"), ("baseImage", "base_image"), ("ttlSec", "ttl_sec"), ("env", "env")):
        if params.get(key) is not None:
            body[field] = params[key]
    return body


class ServiceTransport(Transport):
    """A ``sandboxd serve`` at ``url`` (``http://HOST:PORT/api/v1/sandbox``, or the server's
    root URL), with ``api_key`` sent as ``Authorization: Bearer``. The root sandbox is the
    session ``create`` makes; each fork is a session of its own, named by its id. One
    ``httpx.Client`` (a keep-alive pool, safe across threads) carries every request; each
    run's stream is a WebSocket of its own."""

    def __init__(self, url: str, api_key: str | None = None) -> None:
        try:
            import httpx
            import websockets.sync.client  # noqa: F401 (checked here, used by each run)
        except ImportError as e:
            raise ImportError(
                "the service transport needs httpx and websockets: pip install 'wasmsand[service]'"
            ) from e
        super().__init__()
        self.url = base_url(url)
        parts = urlsplit(self.url)
        self._ws_base = urlunsplit(("wss" if parts.scheme == "https" else "ws", parts.netloc, parts.path, "", ""))
        self._auth: dict[str, str] = {"Authorization": f"Bearer {api_key}"} if api_key else {}
        self._client = httpx.Client(
            base_url=self.url,
            headers=self._auth,
            # Reads allow for a `.../wait` (at most 30 s) and a 1 MiB chunk on a slow link.
            timeout=httpx.Timeout(120.0, connect=10.0),
        )
        self._lock = threading.Lock()
        self._closed = False
        self._root: str | None = None
        # Every fork this client made and has not destroyed: `kill` ends them with the root.
        self._forks: set[str] = set()
        # The previews this client made and has not committed or discarded, with their parents.
        self._parents: dict[str, str] = {}
        self._runtime: str | None = None
        self._ttl_sec: int | None = None
        self._runtimes: dict[str, Any] | None = None
        self._streams: set[ClientConnection] = set()
        # How many times a run's stream was resumed after its connection dropped.
        self.stream_reconnects = 0
        self._methods: dict[str, Handler] = {
            "create": self._create,
            "run": self._run,
            "process.start": self._process_start,
            "process.output": self._process_output,
            "process.wait": self._process_wait,
            "process.kill": self._process_kill,
            "process.write": self._process_write,
            "process.list": self._process_list,
            "files.read": self._files_read,
            "files.write": self._files_write,
            "files.rename": self._files_rename,
            "files.list": self._files_list,
            "files.mkdir": self._files_mkdir,
            "files.rm": self._files_rm,
            "files.stat": self._files_stat,
            "snapshot.create": self._snapshot_create,
            "snapshot.restore": self._snapshot_restore,
            "sandbox.fork": self._fork,
            "sandbox.merge": self._merge,
            "sandbox.diff": self._diff,
            "sandbox.commit": self._commit,
            "sandbox.discard": self._discard,
            "sandbox.bestOf": self._best_of,
            "sandbox.destroy": self._destroy,
            "kill": self._kill,
        }

    @property
    def session_id(self) -> str | None:
        """The root sandbox's session on the service (``None`` before ``create``)."""
        return self._root

    # ---- the JSON-RPC surface ----

    def call(self, method: str, params: dict[str, Any], on_notify: Notify | None = None) -> Any:
        if self._closed:
            raise _destroyed()
        handler = self._methods.get(method)
        if handler is not None:
            return handler(params, on_notify)
        if method.startswith("tools."):
            raise not_supported("host tools (tools=, sb.tools)")
        if method in ("sandbox.mount", "sandbox.mounts", "sandbox.exportChanges"):
            raise not_supported("host folders (mount, mounts, export_changes)")
        if method == "sandbox.export":
            raise not_supported("export_state()")
        if method == "sandbox.import":
            raise not_supported("import_state()")
        raise SandboxError(f"unknown method {method!r}", -32601, {"kind": "method_not_found"})

    def close(self) -> None:
        with self._lock:
            self._closed = True
        self._client.close()

    # ---- HTTP ----

    def _request(
        self,
        method: str,
        path: str,
        *,
        idempotent: bool = False,
        idempotency_key: bool = False,
        headers: Mapping[str, str] | None = None,
        **kw: Any,
    ) -> httpx.Response:
        """Sends one request, again (a bounded number of times) when that is safe: always when
        it never left (no connection), when the service answered 429 or a 503 with
        ``Retry-After`` (it did nothing), and for idempotent requests on a lost answer or a
        502/503/504. ``idempotency_key`` makes a creating request idempotent: one key per
        logical request, the same on every try, so a try whose answer was lost is answered
        by the service with its original result instead of creating a second object."""
        import httpx

        hdrs = dict(headers or {})
        if idempotency_key:
            hdrs["Idempotency-Key"] = str(uuid.uuid4())
            idempotent = True
        attempt = 0
        while True:
            failure: Exception
            try:
                resp = self._client.request(method, path, headers=hdrs, **kw)
            except (httpx.ConnectError, httpx.ConnectTimeout, httpx.PoolTimeout) as e:
                failure, safe = e, True
            except httpx.TransportError as e:
                failure, safe = e, idempotent
            except RuntimeError:
                if self._closed:  # `kill()` from another thread closed the client
                    raise _destroyed() from None
                raise
            else:
                # httpx 0.28 ties a response and its (already read and closed) body stream in
                # a reference cycle (encode/httpx#3733), so each response, its content and its
                # request's body would live until the cyclic GC runs, which counts objects,
                # not bytes: a file moved in 1 MiB chunks would pile up tens of MiB. Cut it.
                resp.stream = httpx.ByteStream(b"")
                delay = self._retry_delay(resp, attempt, idempotent)
                if delay is None or attempt >= _RETRIES:
                    return resp
                time.sleep(delay)
                attempt += 1
                continue
            if not safe or attempt >= _RETRIES or self._closed:
                raise SandboxError(
                    f"{method} {path}: no answer from the service at {self.url}: {failure}",
                    None,
                    {"kind": "unavailable", "url": self.url},
                ) from failure
            time.sleep(_backoff(attempt))
            attempt += 1

    @staticmethod
    def _retry_delay(resp: httpx.Response, attempt: int, idempotent: bool) -> float | None:
        status = resp.status_code
        after = _retry_after(resp.headers)
        if status == 429:
            if _envelope(resp.content)[2].get("reason") == "processes":
                return None  # the session's limit of running processes: LimitExceededError
            return _backoff(attempt) if after is None else after
        if status == 503 and after is not None:
            return after
        if status in (502, 503, 504) and idempotent:
            return _backoff(attempt) if after is None else after
        return None

    @staticmethod
    def _json(resp: httpx.Response, *ok: int) -> dict[str, Any]:
        if resp.status_code not in ok:
            raise_http(resp.status_code, resp.content, resp.reason_phrase)
        value = resp.json() if resp.content else {}
        if not isinstance(value, dict):
            raise SandboxError(f"unexpected answer from the service: {value!r}", resp.status_code, {"kind": "protocol"})
        return value

    def _session(self, params: Mapping[str, Any]) -> str:
        """The session a request addresses: the fork's (``sandboxId``) or the root's."""
        sid = params.get("sandboxId")
        if isinstance(sid, str):
            return sid
        if self._root is None:
            raise SandboxError("no sandbox yet: create must be the first request", None, {"kind": "invalid_request"})
        return self._root

    def _files_path(self, params: Mapping[str, Any], tail: str = "") -> str:
        return f"/sessions/{_seg(self._session(params))}/files{tail}"

    # ---- sessions ----

    def _create(self, params: dict[str, Any], _notify: Notify | None) -> Any:
        if self._root is not None:
            raise SandboxError("Sandbox already created", None, {"kind": "invalid_request"})
        body = _create_body(params)
        session = self._json(self._request("POST", "/sessions", json=body, idempotency_key=True), 200, 201)
        self._root = str(session["session_id"])
        self._runtime = str(session.get("runtime") or "") or None
        self._ttl_sec = body.get("ttl_sec")
        return {"ok": True}

    def _forkable(self, what: str) -> None:
        """Forks, snapshots and merges exist for the runtimes whose sessions checkpoint
        (``/runtimes``: ``sessions_hibernate``; wasm, not docker). Asked once per client, so
        a docker session's refusal is a ``NotSupportedError`` before any request."""
        if self._runtimes is None:
            reply = self._json(self._request("GET", "/runtimes", idempotent=True), 200)
            self._runtimes = {
                str(r.get("name")): r for r in reply.get("runtimes", []) if isinstance(r, dict)
            }
        info = self._runtimes.get(self._runtime or "")
        if info is not None and info.get("sessions_hibernate") is False:
            raise not_supported(f"{what} on runtime {self._runtime!r}")

    def _fork(self, params: dict[str, Any], _notify: Notify | None) -> Any:
        self._forkable("fork()")
        body: dict[str, Any] = {} if self._ttl_sec is None else {"ttl_sec": self._ttl_sec}
        path = f"/sessions/{_seg(self._session(params))}/fork"
        session = self._json(self._request("POST", path, json=body), 200, 201)
        fork = str(session["session_id"])
        with self._lock:
            self._forks.add(fork)
        return {"sandboxId": fork}

    # ---- changes, previews and best-of-N (forks of the service, diffed by the service) ----

    def _diff(self, params: dict[str, Any], _notify: Notify | None) -> Any:
        since = params.get("since") or "mount"
        if since == "mount":
            raise not_supported("changes(since='mount') (the service mounts no host folders)")
        self._forkable("changes()")
        query: dict[str, str] = {"since": str(since)}
        if since == "snapshot":
            query["snapshot_id"] = str(params.get("snapshotId", ""))
        if params.get("path") is not None:
            query["path"] = str(params["path"])
        path = f"/sessions/{_seg(self._session(params))}/changes"
        c = self._json(self._request("GET", path, params=query, idempotent=True), 200)
        return {
            "root": c.get("root"),
            "files": [
                {
                    "path": f.get("path"),
                    "status": f.get("status"),
                    "kind": f.get("kind"),
                    "oldMode": f.get("old_mode"),
                    "newMode": f.get("new_mode"),
                    "binary": bool(f.get("binary")),
                }
                for f in c.get("files", [])
            ],
            "patch": c.get("patch", ""),
        }

    def _preview_run(self, params: dict[str, Any], on_notify: Notify | None) -> Any:
        """A run in a fresh fork, answered with the fork as its preview and what it changed
        there; a preview that did not run is not left behind."""
        parent = self._session(params)
        fork = self._fork({"sandboxId": parent}, None)["sandboxId"]
        try:
            result = self._run({**params, "preview": False, "sandboxId": fork}, on_notify)
            changes = self._diff({"sandboxId": fork, "since": "parent"}, None)
        except BaseException:
            self._drop_fork(fork)
            raise
        with self._lock:
            self._parents[fork] = parent
        result["preview"] = {"sandboxId": fork, "changes": changes}
        return result

    def _drop_fork(self, fork: str) -> None:
        try:
            self._destroy({"sandboxId": fork}, None)
        except SandboxError:
            pass  # `kill` deletes it again, or its TTL ends it

    def _preview_of(self, params: Mapping[str, Any]) -> tuple[str, str]:
        pid = str(params.get("preview", ""))
        with self._lock:
            parent = self._parents.get(pid)
        if parent is None:
            raise SandboxDestroyedError(
                f"no preview {pid!r}: it was committed, discarded, or never made by this client",
                None,
                {"kind": "unknown_sandbox"},
            )
        return pid, parent

    def _commit(self, params: dict[str, Any], _notify: Notify | None) -> Any:
        pid, parent = self._preview_of(params)
        merged = self._merge({"sandboxId": parent, "from": pid, "env": params.get("env"), "cwd": params.get("cwd")}, None)
        with self._lock:
            self._parents.pop(pid, None)
        self._drop_fork(pid)
        return {"applied": merged.get("applied", []), "env": merged.get("env", []), "cwd": merged.get("cwd")}

    def _discard(self, params: dict[str, Any], _notify: Notify | None) -> Any:
        pid, _parent = self._preview_of(params)
        self._destroy({"sandboxId": pid}, None)
        with self._lock:
            self._parents.pop(pid, None)
        return {"ok": True}

    def _best_of(self, params: dict[str, Any], _notify: Notify | None) -> Any:
        attempts = params.get("attempts")
        if not isinstance(attempts, list) or not 1 <= len(attempts) <= _MAX_ATTEMPTS:
            raise InvalidParamsError(
                f"Invalid param: attempts must hold 1 to {_MAX_ATTEMPTS} attempts",
                -32602,
                {"kind": "invalid_params"},
            )
        parent = self._session(params)
        workers = int(params.get("concurrency") or 0) or (os.cpu_count() or 1)

        def one(a: Mapping[str, Any]) -> dict[str, Any]:
            # The attempt's variables are exported in its fork, as on the other transports
            # (a run's own `env` would hold for that run only).
            exports = "".join(
                f"export {k}={shlex.quote(str(v))}; " for k, v in dict(a.get("env") or {}).items()
            )
            run = {"sandboxId": parent, "command": exports + str(a["command"]), "preview": True}
            if params.get("timeoutMs") is not None:
                run["timeoutMs"] = params["timeoutMs"]
            try:
                return dict(self._preview_run(run, None))
            except SandboxError as e:
                return {"error": {"code": e.code, "message": str(e), "data": e.data}}

        with ThreadPoolExecutor(max_workers=max(1, min(workers, len(attempts)))) as pool:
            return {"attempts": list(pool.map(one, attempts))}

    def _merge(self, params: dict[str, Any], _notify: Notify | None) -> Any:
        self._forkable("merge()")
        body = {"fork_session_id": str(params["from"]), "env": bool(params.get("env")), "cwd": bool(params.get("cwd"))}
        path = f"/sessions/{_seg(self._session(params))}/merge"
        # The reply has the JSON-RPC result's names (`applied: [{path, change}]`, `env`, `cwd`).
        return self._json(self._request("POST", path, json=body), 200)

    def _snapshot_create(self, params: dict[str, Any], _notify: Notify | None) -> Any:
        self._forkable("snapshot()")
        path = f"/sessions/{_seg(self._session(params))}/snapshots"
        snap = self._json(self._request("POST", path, json={}), 200, 201)
        return {"id": str(snap["snapshot_id"])}

    def _snapshot_restore(self, params: dict[str, Any], _notify: Notify | None) -> Any:
        self._forkable("restore()")
        path = f"/sessions/{_seg(self._session(params))}/snapshots/{_seg(str(params['id']))}/restore"
        self._json(self._request("POST", path), 200)
        return {"ok": True}

    def _destroy(self, params: dict[str, Any], _notify: Notify | None) -> Any:
        sid = self._session(params)
        self._json(self._request("DELETE", f"/sessions/{_seg(sid)}"), 200, 204)
        # Only once it is gone: a fork whose deletion failed is deleted again by `kill`.
        with self._lock:
            self._forks.discard(sid)
        return {"ok": True}

    def _kill(self, params: dict[str, Any], _notify: Notify | None) -> Any:
        with self._lock:
            sessions = sorted(self._forks) + ([self._root] if self._root is not None else [])
            self._forks.clear()
        for sid in sessions:
            try:
                self._request("DELETE", f"/sessions/{_seg(sid)}")
            except SandboxError:
                pass  # unreachable now: the session's TTL ends it
        return {"ok": True}

    # ---- runs ----

    def _run(self, params: dict[str, Any], on_notify: Notify | None) -> Any:
        if params.get("atomic"):
            raise not_supported("atomic=True")
        if params.get("preview"):
            return self._preview_run(params, on_notify)
        if params.get("truncation") is not None:
            raise not_supported("truncation=")
        body: dict[str, Any] = {
            "spec_version": SPEC_VERSION,
            "session_id": self._session(params),
            # `bash -c LINE` is the line itself to the service's wasm shell: it runs in the
            # session's shell, whose state (cd, variables, functions) the next run sees.
            "command": ["bash", "-c", str(params["command"])],
        }
        if params.get("env"):
            body["env"] = params["env"]
        if params.get("cwd") is not None:
            body["cwd"] = params["cwd"]
        if params.get("timeoutMs") is not None:
            body["timeout_sec"] = _seconds(int(params["timeoutMs"]))
        if params.get("stdin") is not None:
            body["stdin"] = base64.b64encode(str(params["stdin"]).encode("utf-8")).decode("ascii")
        elif params.get("stdinBase64") is not None:
            body["stdin"] = str(params["stdinBase64"])
        created = self._json(self._request("POST", "/runs", json=body, idempotency_key=True), 200, 202)
        run_id = str(created["run_id"])
        out = _Output(on_notify if params.get("stream") else None)
        try:
            self._follow(run_id, out)
        except BaseException:
            # The caller gives up on it (an interrupt, a lost stream): the run should not go
            # on holding the session.
            self._cancel(run_id)
            raise
        out.finish()
        status = self._json(self._request("GET", f"/runs/{_seg(run_id)}", idempotent=True), 200)
        return _run_result(run_id, status, out)

    def _cancel(self, run_id: str) -> None:
        try:
            self._request("POST", f"/runs/{_seg(run_id)}/cancel")
        except Exception:
            pass  # best effort: the run's own timeout ends it otherwise

    def _connect(self, path: str, from_seq: int) -> ClientConnection:
        from websockets.exceptions import InvalidStatus
        from websockets.sync.client import connect

        try:
            return connect(
                f"{self._ws_base}{path}?from_seq={from_seq}",
                additional_headers=self._auth,
                open_timeout=10,
                # Frames are at most 64 KiB of JSON text: compressing them costs more than it
                # saves on the links this runs over.
                compression=None,
            )
        except InvalidStatus as e:
            status = e.response.status_code
            if status < 500 and status != 429:
                # The run or its owner is not this client's: no reconnect will change that.
                raise_http(status, bytes(e.response.body or b""), e.response.reason_phrase)
            raise

    def _follow(self, run_id: str, out: _Output) -> None:
        """Reads a run's stream to its ``end`` frame. A connection that drops (or stays silent
        past the heartbeats) is reopened at ``from_seq`` = the last seq seen + 1, and a frame
        whose seq was seen is skipped, so no output is lost or repeated while the service's
        ring still holds it (a ``resume`` frame says when it did not: the result is then
        ``truncated``)."""
        from websockets.exceptions import ConnectionClosed, InvalidHandshake

        last = 0
        failures = 0
        path = f"/runs/{_seg(run_id)}/stream"
        while True:
            ws: ClientConnection | None = None
            try:
                ws = self._connect(path, last + 1)
                with self._lock:
                    self._streams.add(ws)
                # As a context manager: closed however this ends (websockets asks for it).
                with ws:
                    while True:
                        raw = ws.recv(timeout=_STREAM_IDLE_S)
                        frame = json.loads(raw)
                        if not isinstance(frame, dict):
                            continue
                        seq = frame.get("seq")
                        # A resume note carries the seq of the frame after it (seed 003's
                        # `seq: m`): it is no frame of the run, so it neither moves nor is
                        # judged by the last seq seen.
                        if isinstance(seq, int) and frame.get("event") != "resume":
                            if seq <= last:
                                continue
                            last = seq
                        failures = 0
                        if self._take(frame, out):
                            return
            except (ConnectionClosed, InvalidHandshake, OSError, TimeoutError) as e:
                failures += 1
                if failures > _RETRIES or self._closed:
                    if self._closed:
                        raise _destroyed() from e
                    raise SandboxError(
                        f"lost the output stream of run {run_id} (last frame {last}): {e}",
                        None,
                        {"kind": "stream_lost", "run_id": run_id, "last_seq": last},
                    ) from e
                with self._lock:
                    self.stream_reconnects += 1
                time.sleep(_backoff(failures - 1))
            finally:
                if ws is not None:
                    with self._lock:
                        self._streams.discard(ws)

    @staticmethod
    def _take(frame: Mapping[str, Any], out: _Output) -> bool:
        """Applies one frame; ``True`` for the last (``end``)."""
        kind = frame.get("type")
        if kind in ("stdout", "stderr"):
            out.add(str(kind), _frame_bytes(frame))
        elif kind == "truncated":
            out.cut = True
        elif kind == "event":
            data = frame.get("data")
            event = data if isinstance(data, dict) else {}
            if frame.get("event") == "resume" and int(event.get("lost_count") or 0) > 0:
                out.cut = True
            elif frame.get("event") == "end":
                return True
        return False

    def _drop_streams(self) -> int:
        """Cuts the connection of every run stream open now, as a failing network would
        (each is then resumed from its last frame); returns how many. For tests of that
        path, which a healthy loopback never takes."""
        with self._lock:
            streams = list(self._streams)
        for ws in streams:
            try:
                ws.socket.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
        return len(streams)

    # ---- background processes ----

    def _process_path(self, params: Mapping[str, Any], tail: str = "") -> str:
        sid = _seg(self._session(params))
        if "pid" not in params:
            return f"/sessions/{sid}/processes{tail}"
        return f"/sessions/{sid}/processes/{int(params['pid'])}{tail}"

    def _process_start(self, params: dict[str, Any], _notify: Notify | None) -> Any:
        body: dict[str, Any] = {"command": str(params["command"])}
        if params.get("env"):
            body["env"] = params["env"]
        if params.get("cwd") is not None:
            body["cwd"] = params["cwd"]
        if params.get("timeoutMs") is not None:
            body["timeout_ms"] = int(params["timeoutMs"])
        if params.get("stdin") is not None:
            body["stdin"] = str(params["stdin"])
        view = self._json(self._request("POST", self._process_path(params), json=body), 200, 201)
        return {"pid": int(view["pid"])}

    def _process_output(self, params: dict[str, Any], _notify: Notify | None) -> Any:
        query = {"stdout_offset": int(params.get("stdoutOffset") or 0), "stderr_offset": int(params.get("stderrOffset") or 0)}
        r = self._json(self._request("GET", self._process_path(params, "/output"), params=query, idempotent=True), 200)
        out, err = r["stdout"], r["stderr"]
        return {
            "stdout": _utf8(out),
            "stderr": _utf8(err),
            "stdoutOffset": int(out["next_offset"]),
            "stderrOffset": int(err["next_offset"]),
            "droppedStdout": int(out.get("dropped_bytes") or 0),
            "droppedStderr": int(err.get("dropped_bytes") or 0),
            "running": bool(r.get("running")),
        }

    def _process_wait(self, params: dict[str, Any], _notify: Notify | None) -> Any:
        timeout_ms = params.get("timeoutMs")
        deadline = None if timeout_ms is None else time.monotonic() + int(timeout_ms) / 1000
        path = self._process_path(params, "/wait")
        while True:
            left = _WAIT_SLICE_MS
            if deadline is not None:
                left = min(left, max(0, math.ceil((deadline - time.monotonic()) * 1000)))
            r = self._json(self._request("POST", path, params={"timeout_ms": left}, idempotent=True), 200)
            if not r.get("running") and isinstance(r.get("result"), dict):
                return _process_result(r["result"])
            if deadline is not None and time.monotonic() >= deadline:
                raise WaitTimeoutError(
                    f"process {params['pid']} is still running after {timeout_ms} ms",
                    None,
                    {"kind": "wait_timeout", "pid": params["pid"]},
                )

    def _process_kill(self, params: dict[str, Any], _notify: Notify | None) -> Any:
        r = self._json(self._request("POST", self._process_path(params, "/kill")), 200)
        return {"killed": bool(r.get("killed"))}

    def _process_write(self, params: dict[str, Any], _notify: Notify | None) -> Any:
        body: dict[str, Any] = {}
        if params.get("data") is not None:
            body["data"] = str(params["data"])
        if params.get("dataBase64") is not None:
            body["data_base64"] = str(params["dataBase64"])
        if params.get("eof"):
            body["close"] = True
        r = self._json(self._request("POST", self._process_path(params, "/stdin"), json=body), 200)
        return {"written": int(r.get("written") or 0)}

    def _process_list(self, params: dict[str, Any], _notify: Notify | None) -> Any:
        r = self._json(self._request("GET", self._process_path(params), idempotent=True), 200)
        return {
            "processes": [
                {
                    "pid": int(p["pid"]),
                    "command": str(p.get("command", "")),
                    "running": bool(p.get("running")),
                    "exitCode": p.get("exit_code"),
                    "startedAtMs": _epoch_ms(p.get("started_at")),
                }
                for p in r.get("processes", [])
                if isinstance(p, dict)
            ]
        }

    # ---- files ----

    def _files_read(self, params: dict[str, Any], _notify: Notify | None) -> Any:
        """One chunk: a ``Range`` request, always, since the service refuses a whole-file read
        past its cap (413). The JSON-RPC result carries the chunk in base64 and the file's
        size, as the other transports' do."""
        offset = int(params.get("offset") or 0)
        length = params.get("length")
        end = "" if length is None else str(offset + max(1, int(length)) - 1)
        resp = self._request(
            "GET",
            self._files_path(params, "/content"),
            params={"path": str(params["path"])},
            headers={"Range": f"bytes={offset}-{end}"},
            idempotent=True,
        )
        if resp.status_code == 416:
            # A start at or past the end (an empty file, or one that shrank between two
            # chunks): nothing more. `Content-Range: bytes */SIZE` says its size.
            unsatisfied = resp.headers.get("content-range", "")
            tail = unsatisfied.rsplit("/", 1)[-1]
            return {"data": "", "size": int(tail) if unsatisfied.startswith("bytes */") and tail.isdigit() else offset}
        if resp.status_code not in (200, 206):
            raise_http(resp.status_code, resp.content, resp.reason_phrase)
        content = resp.content
        if resp.status_code == 200:
            # The whole file (an empty one, or a server that ignored the range).
            content = content[offset : None if length is None else offset + int(length)]
        # The size when the chunk was read (`Content-Range: bytes A-B/TOTAL` says the same).
        total = resp.headers.get("x-file-size")
        size = int(total) if total is not None else offset + len(content)
        return {"data": base64.b64encode(content).decode("ascii"), "size": size}

    def _files_write(self, params: dict[str, Any], _notify: Notify | None) -> Any:
        query: dict[str, str] = {"path": str(params["path"])}
        append = bool(params.get("append"))
        if append:
            query["append"] = "true"
        resp = self._request(
            "PUT",
            self._files_path(params, "/content"),
            params=query,
            content=base64.b64decode(params.get("data") or ""),
            headers={"Content-Type": "application/octet-stream"},
            # Writing the same bytes again leaves the same file; appending them would not.
            idempotent=not append,
        )
        return self._json(resp, 200, 201)

    def _files_rename(self, params: dict[str, Any], _notify: Notify | None) -> Any:
        body = {"from": str(params["from"]), "to": str(params["to"])}
        self._json(self._request("POST", self._files_path(params, "/move"), json=body), 200, 204)
        return {"ok": True}

    def _files_list(self, params: dict[str, Any], _notify: Notify | None) -> Any:
        query = {"path": str(params["path"])}
        r = self._json(self._request("GET", self._files_path(params), params=query, idempotent=True), 200)
        return {"entries": r.get("entries", [])}

    def _files_mkdir(self, params: dict[str, Any], _notify: Notify | None) -> Any:
        body = {"path": str(params["path"])}
        return self._json(self._request("POST", self._files_path(params, "/mkdir"), json=body), 200, 201)

    def _files_rm(self, params: dict[str, Any], _notify: Notify | None) -> Any:
        query = {"path": str(params["path"]), "recursive": "true" if params.get("recursive") else "false"}
        self._json(self._request("DELETE", self._files_path(params), params=query), 200, 204)
        return {"ok": True}

    def _files_stat(self, params: dict[str, Any], _notify: Notify | None) -> Any:
        query = {"path": str(params["path"])}
        return self._json(self._request("GET", self._files_path(params, "/stat"), params=query, idempotent=True), 200)
