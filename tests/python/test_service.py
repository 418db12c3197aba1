"""What only the service transport has (``Sandbox(url=...)``, bindings/python/python/wasmsand/
_service.py): its requests survive a flaky network (a lost answer, a 503, a dropped log
stream) without doing anything twice or losing output, its sandboxes are sessions the
service shows, files move in ranged chunks, the API key is its credential, and what the
service cannot do raises ``NotSupportedError`` before any session exists.

The flaky network is a loopback relay (``Relay``) in front of the test server that loses an
answer or answers 503 on cue and records each request's head, so the tests see what the client
sent, not only what it concluded."""

from __future__ import annotations

import hashlib
import os
import re
import secrets
import socket
import threading
import time
from collections.abc import Iterator
from datetime import datetime
from urllib.parse import urlsplit

import httpx
import pytest

from conftest import Server, start_server, stop_server
from wasmsand import (
    AsyncSandbox,
    InvalidParamsError,
    LimitExceededError,
    MergeConflictError,
    NotSupportedError,
    ProcessNotFoundError,
    Sandbox,
    SandboxDestroyedError,
    SandboxError,
)
from wasmsand._service import ServiceTransport, raise_http

# ---- the relay ----


class Relay:
    """A TCP relay on loopback in front of the service. ``arm(prefix, action)`` makes the next
    request whose head starts with ``prefix`` either lose its answer (``"lose_answer"``: the
    service gets and carries out the request, the client gets a closed connection) or be
    answered ``503`` with ``Retry-After: 0`` by the relay itself (``"busy"``: the service
    never sees it). ``heads`` lists every request's head as sent. A WebSocket upgrade turns
    its connection into a plain pipe."""

    def __init__(self, upstream: str) -> None:
        parts = urlsplit(upstream)
        self.upstream = (parts.hostname or "127.0.0.1", parts.port or 80)
        self.base_path = parts.path
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.heads: list[bytes] = []
        self.rules: list[tuple[bytes, str]] = []
        self.lock = threading.Lock()
        self.closed = False
        threading.Thread(target=self._accept, daemon=True).start()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.listener.getsockname()[1]}{self.base_path}"

    def arm(self, prefix: bytes, action: str) -> None:
        with self.lock:
            self.rules.append((prefix, action))

    def sent(self, prefix: bytes) -> list[bytes]:
        with self.lock:
            return [h for h in self.heads if h.startswith(prefix)]

    def close(self) -> None:
        self.closed = True
        self.listener.close()

    def _action(self, head: bytes) -> str | None:
        with self.lock:
            self.heads.append(head)
            for i, (prefix, action) in enumerate(self.rules):
                if head.startswith(prefix):
                    del self.rules[i]
                    return action
        return None

    def _accept(self) -> None:
        while not self.closed:
            try:
                client, _ = self.listener.accept()
            except OSError:
                return
            upstream = socket.create_connection(self.upstream)
            lose = threading.Event()
            threading.Thread(target=self._requests, args=(client, upstream, lose), daemon=True).start()
            threading.Thread(target=self._answers, args=(upstream, client, lose), daemon=True).start()

    def _requests(self, client: socket.socket, upstream: socket.socket, lose: threading.Event) -> None:
        buf = b""
        body_left = 0
        forward_body = True
        piped = False
        try:
            while True:
                data = client.recv(65536)
                if not data:
                    break
                if piped:
                    upstream.sendall(data)
                    continue
                buf += data
                while True:
                    if body_left:
                        part, buf = buf[:body_left], buf[body_left:]
                        body_left -= len(part)
                        if forward_body:
                            upstream.sendall(part)
                        if body_left:
                            break
                        continue
                    end = buf.find(b"\r\n\r\n")
                    if end < 0:
                        break
                    head, buf = buf[: end + 4], buf[end + 4 :]
                    m = re.search(rb"(?im)^content-length:\s*(\d+)", head)
                    body_left = int(m.group(1)) if m else 0
                    action = self._action(head)
                    forward_body = action != "busy"
                    if action == "busy":
                        body = b'{"error":{"code":"unavailable","message":"busy (test relay)","details":{}}}'
                        client.sendall(
                            b"HTTP/1.1 503 Service Unavailable\r\nRetry-After: 0\r\n"
                            b"Content-Type: application/json\r\nContent-Length: "
                            + str(len(body)).encode()
                            + b"\r\n\r\n"
                            + body
                        )
                        continue
                    if action == "lose_answer":
                        lose.set()
                    upstream.sendall(head)
                    if re.search(rb"(?im)^upgrade:\s*websocket", head):
                        piped = True
                        upstream.sendall(buf)
                        buf = b""
                        break
        except OSError:
            pass
        finally:
            for s in (upstream, client):
                try:
                    s.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass

    def _answers(self, upstream: socket.socket, client: socket.socket, lose: threading.Event) -> None:
        try:
            while True:
                data = upstream.recv(65536)
                if not data:
                    break
                if lose.is_set():
                    # The service has answered, so it did what was asked; the client never
                    # learns it.
                    break
                client.sendall(data)
        except OSError:
            pass
        finally:
            for s in (client, upstream):
                try:
                    s.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass
                s.close()


@pytest.fixture
def relay(service_url: str) -> Iterator[Relay]:
    r = Relay(service_url)
    yield r
    r.close()


def _key(head: bytes) -> bytes:
    m = re.search(rb"(?im)^idempotency-key:\s*(\S+)", head)
    assert m, head
    return m.group(1)


def _sessions(url: str) -> int:
    return int(httpx.get(f"{url}/sessions", params={"limit": 1}).json()["total"])


def _runs(url: str) -> int:
    return int(httpx.get(f"{url}/admin/runs", params={"limit": 1}).json()["total"])


def _session_of(sb: Sandbox) -> str:
    t = sb._h.transport
    assert isinstance(t, ServiceTransport)
    sid = sb.sandbox_id or t.session_id
    assert sid is not None
    return sid


# ---- retries ----


def test_a_lost_answer_is_sent_again_and_nothing_happens_twice(service_url: str, relay: Relay) -> None:
    sessions, runs = _sessions(service_url), _runs(service_url)
    relay.arm(b"POST /api/v1/sandbox/sessions ", "lose_answer")
    relay.arm(b"POST /api/v1/sandbox/runs ", "lose_answer")
    with Sandbox(url=relay.url) as sb:
        # The creation was carried out, its answer lost, and it was sent again with the same
        # key: the service answered the second with the first's session.
        created = relay.sent(b"POST /api/v1/sandbox/sessions ")
        assert len(created) == 2 and _key(created[0]) == _key(created[1])
        assert _sessions(service_url) == sessions + 1
        r = sb.commands.run("echo ran >> /tmp/log; cat /tmp/log")
        started = relay.sent(b"POST /api/v1/sandbox/runs ")
        assert len(started) == 2 and _key(started[0]) == _key(started[1])
        # One run: a second one would have appended a second line.
        assert (r.exit_code, r.stdout) == (0, "ran\n")
        assert _runs(service_url) == runs + 1
        # Each logical request has a key of its own.
        sb.commands.run("true")
        assert _key(relay.sent(b"POST /api/v1/sandbox/runs ")[2]) != _key(started[0])
    assert _sessions(service_url) == sessions


def test_a_503_with_retry_after_is_tried_again(service_url: str, relay: Relay) -> None:
    with Sandbox(url=relay.url) as sb:
        relay.arm(b"POST /api/v1/sandbox/runs ", "busy")
        relay.arm(b"GET /api/v1/sandbox/sessions/", "busy")
        assert sb.commands.run("echo ok").stdout == "ok\n"
        started = relay.sent(b"POST /api/v1/sandbox/runs ")
        assert len(started) == 2 and _key(started[0]) == _key(started[1])
        sb.files.write("/tmp/f", "x")
        assert sb.files.read("/tmp/f") == b"x"  # its GET was refused once, then answered
        assert len(relay.sent(b"GET /api/v1/sandbox/sessions/")) == 2


def test_a_503_without_retry_after_is_final(service_url: str) -> None:
    # `firecracker` is a runtime the service knows and does not have: 503, and no Retry-After
    # says it will have it later.
    with pytest.raises(SandboxError) as e:
        Sandbox(url=service_url, runtime="firecracker")
    assert (e.value.kind, e.value.code) == ("runtime_unavailable", 503)
    with pytest.raises(InvalidParamsError):
        Sandbox(url=service_url, runtime="no-such-runtime")


# ---- the log stream ----


def test_a_dropped_stream_is_resumed_without_losing_or_repeating_output(service_url: str) -> None:
    with Sandbox(url=service_url) as sb:
        t = sb._h.transport
        assert isinstance(t, ServiceTransport)
        expected = "".join(f"line {i}\n" for i in range(1, 301))
        got: list[str] = []
        cut: list[int] = []

        def on_stdout(text: str) -> None:
            got.append(text)
            lines = "".join(got).count("\n")
            # Cut the connection twice mid-run, as a network would.
            if (not cut and lines >= 100) or (len(cut) == 1 and lines >= 200):
                cut.append(t._drop_streams())

        # About 3 s of output: lines are still to come when each cut lands, so the stream can
        # only go on through a new connection.
        r = sb.commands.run("for i in $(seq 1 300); do echo line $i; sleep 0.01; done", on_stdout=on_stdout)
        assert cut == [1, 1]
        assert t.stream_reconnects >= 1
        assert r.stdout == expected and r.exit_code == 0 and r.truncated is None
        assert "".join(got) == expected


def test_a_run_its_caller_gives_up_on_is_cancelled(service_url: str) -> None:
    class Enough(Exception):
        pass

    def stop(_text: str) -> None:
        raise Enough

    with Sandbox(url=service_url) as sb:
        with pytest.raises(Enough):
            sb.commands.run("echo start; sleep 60; echo never", on_stdout=stop)
        # The session is free at once: the next run does not queue behind a minute of sleep.
        started = time.monotonic()
        assert sb.commands.run("echo next").stdout == "next\n"
        assert time.monotonic() - started < 20
        latest = httpx.get(f"{service_url}/admin/runs", params={"limit": 2}).json()["items"]
        assert [r["phase"] for r in latest] == ["completed", "killed"]


def test_output_that_is_not_utf8_and_split_characters(service_url: str) -> None:
    with Sandbox(url=service_url) as sb:
        # A byte that is no UTF-8 comes as base64; it reads as U+FFFD, as on the other
        # transports.
        assert sb.commands.run("printf '\\377ok\\n'").stdout == "\ufffdok\n"
        chunks: list[str] = []
        r = sb.commands.run("printf '\\303'; sleep 0.2; printf '\\251\\n'", on_stdout=chunks.append)
        assert r.stdout == "é\n" and "".join(chunks) == "é\n"


# ---- sessions ----


def test_the_sandbox_is_a_session_with_the_constructors_settings(service_url: str) -> None:
    with Sandbox(url=service_url, runtime="wasm", image="wasmsand/default", ttl_sec=120, env={"GREETING": "hi"}, timeout=1.2) as sb:
        sid = _session_of(sb)
        view = httpx.get(f"{service_url}/sessions/{sid}").json()
        assert (view["runtime"], view["base_image"], view["env"]) == ("wasm", "wasmsand/default", {"GREETING": "hi"})
        # Seconds on the service: a timeout is rounded up, never cut.
        assert view["timeout_sec"] == 2
        assert view["network_policy"] == "deny_all"
        lifetime = datetime.fromisoformat(view["expires_at"]) - datetime.fromisoformat(view["created_at"])
        assert 115 <= lifetime.total_seconds() <= 125
        assert sb.commands.run("echo $GREETING").stdout == "hi\n"
        r = sb.commands.run("while :; do :; done")
        assert (r.exit_code, r.error_class, r.usage.limits_hit) == (124, "TIMEOUT", ["timeoutMs"])
    assert httpx.get(f"{service_url}/sessions/{sid}").status_code == 404
    # `Limits(timeout_ms=...)` is the one limit the service takes: it is the session's.
    with Sandbox(url=service_url, limits={"timeout_ms": 3_000}) as sb:
        assert httpx.get(f"{service_url}/sessions/{_session_of(sb)}").json()["timeout_sec"] == 3


def test_forks_are_sessions_and_kill_ends_them_all(service_url: str) -> None:
    sb = Sandbox(url=service_url)
    root = _session_of(sb)
    sb.commands.run("echo base > f; echo base > g")
    fork = sb.fork()
    grandchild = fork.fork()
    view = httpx.get(f"{service_url}/sessions/{fork.sandbox_id}").json()
    assert view["forked_from"] == root
    fork.commands.run("echo theirs > f; echo new > h; cd /tmp")
    assert sb.merge(fork, cwd=True).applied == {"/home/user/f": "changed", "/home/user/h": "added"}
    assert sb.commands.run("pwd; cat /home/user/f").stdout == "/tmp\ntheirs\n"
    fork.commands.run("echo again > /home/user/g")
    sb.commands.run("echo ours > /home/user/g")
    with pytest.raises(MergeConflictError) as e:
        sb.merge(fork)
    assert [(c.path, c.ours, c.theirs) for c in e.value.conflicts] == [("/home/user/g", "changed", "changed")]
    # Only into its own parent (the service says 400: not a fork of it).
    with pytest.raises(InvalidParamsError):
        sb.merge(grandchild)
    fork.destroy()
    assert httpx.get(f"{service_url}/sessions/{fork.sandbox_id}").status_code == 404
    with pytest.raises(SandboxDestroyedError):
        fork.commands.run("true")
    sb.kill()
    for sid in (root, grandchild.sandbox_id):
        assert httpx.get(f"{service_url}/sessions/{sid}").status_code == 404
    with pytest.raises(SandboxDestroyedError):
        grandchild.commands.run("true")


def test_a_session_deleted_elsewhere_is_a_destroyed_sandbox(service_url: str) -> None:
    with Sandbox(url=service_url) as sb:
        assert httpx.delete(f"{service_url}/sessions/{_session_of(sb)}").status_code == 204
        with pytest.raises(SandboxDestroyedError) as e:
            sb.commands.run("true")
        assert e.value.kind == "unknown_sandbox"


def test_snapshots_are_the_sessions(service_url: str) -> None:
    with Sandbox(url=service_url) as sb:
        sb.commands.run("echo v1 > f; V=1")
        snap = sb.snapshot()
        listed = httpx.get(f"{service_url}/sessions/{_session_of(sb)}/snapshots").json()["items"]
        assert [s["snapshot_id"] for s in listed] == [snap]
        sb.commands.run("echo v2 > f; V=2")
        sb.restore(snap)
        assert sb.commands.run("cat f; echo $V").stdout == "v1\n1\n"
        with pytest.raises(InvalidParamsError) as e:
            sb.restore("no/such snapshot")
        assert e.value.kind == "unknown_snapshot"


def test_a_runtime_without_forks_is_refused_before_any_request(service_url: str, relay: Relay) -> None:
    with Sandbox(url=relay.url) as sb:
        t = sb._h.transport
        assert isinstance(t, ServiceTransport)
        # What `/runtimes` says of docker (`sessions_hibernate: false`), said of this one.
        t._runtimes = {"wasm": {"name": "wasm", "sessions_hibernate": False}}
        before = len(relay.heads)
        for call in (sb.fork, sb.snapshot):
            with pytest.raises(NotSupportedError, match="runtime 'wasm'"):
                call()
        assert len(relay.heads) == before


# ---- files and processes ----


def test_files_move_in_ranged_chunks(service_url: str, relay: Relay) -> None:
    data = os.urandom(3 * 2**20 + 5)
    with Sandbox(url=relay.url) as sb:
        sb.files.write("/home/user/big.bin", data)
        puts = relay.sent(b"PUT /api/v1/sandbox/sessions/")
        # Four chunks into a hidden file, then one rename onto the path.
        assert len(puts) == 4 and all(b"upload-" in h.split(b"\r\n")[0] for h in puts)
        assert [b"append=true" in h.split(b"\r\n")[0] for h in puts] == [False, True, True, True]
        assert len(relay.sent(b"POST /api/v1/sandbox/sessions/")) == 1  # files/move
        assert sb.files.read("big.bin", format="bytes") == data  # relative to the workspace
        gets = [h for h in relay.sent(b"GET /api/v1/sandbox/sessions/") if b"/files/content?" in h]
        ranges = [re.search(rb"(?im)^range:\s*(\S+)", h) for h in gets]
        assert [m.group(1) for m in ranges if m] == [
            b"bytes=0-1048575",
            b"bytes=1048576-2097151",
            b"bytes=2097152-3145727",
            b"bytes=3145728-4194303",
        ]
        r = sb.commands.run("sha256sum big.bin")
        assert r.stdout.split()[0] == hashlib.sha256(data).hexdigest()
        assert [f.name for f in sb.files.list("/home/user")] == ["big.bin"]  # no upload left


def test_files_paths_are_relative_to_the_workspace(service_url: str) -> None:
    with Sandbox(url=service_url) as sb:
        sb.commands.run("mkdir -p /home/user/sub && cd /home/user/sub")
        sb.files.write("rel.txt", "r")
        assert sb.commands.run("pwd; cat /home/user/rel.txt").stdout == "/home/user/sub\nr"
        with pytest.raises(FileNotFoundError):
            sb.files.read("sub/rel.txt")


def test_the_services_process_limit(service_url: str) -> None:
    with Sandbox(url=service_url) as sb:
        sid = _session_of(sb)
        limit = int(httpx.get(f"{service_url}/sessions/{sid}/processes").json()["max_running"])
        handles = [sb.commands.run("sleep 60", background=True) for _ in range(limit)]
        with pytest.raises(LimitExceededError) as e:
            sb.commands.run("sleep 60", background=True)
        assert e.value.data["value"] == limit
        assert handles[0].kill() is True
        assert handles[0].wait(timeout=10).exit_code == 137
        assert sb.commands.run("echo room", background=True).wait(timeout=10).stdout == "room\n"
        with pytest.raises(ProcessNotFoundError):
            sb.commands.connect(10_000)
        for h in handles[1:]:
            h.kill()


# ---- what the service cannot do ----


@pytest.mark.parametrize(
    ("kwargs", "feature"),
    [
        ({"limits": {"memory_bytes": 1 << 20}}, "memory_bytes"),
        ({"deterministic": True}, "deterministic"),
        ({"fs_limit_bytes": 1 << 20}, "fs_limit_bytes"),
        ({"network": {"hosts": ["api.test"], "ca_pem": ["-----BEGIN CERTIFICATE-----"]}}, "ca_pem"),
        ({"network": {"hosts": ["api.test"], "resolve": {"api.test": ["127.0.0.1"]}}}, "resolve"),
        ({"tools": {"f": print}}, "host tools"),
    ],
)
def test_what_the_service_cannot_do_is_refused_before_a_session_exists(
    service_url: str, kwargs: dict[str, object], feature: str
) -> None:
    before = _sessions(service_url)
    with pytest.raises(NotSupportedError, match=feature) as e:
        Sandbox(url=service_url, **kwargs)  # type: ignore[arg-type]
    assert e.value.kind == "not_supported" and "service transport" in str(e.value)
    assert _sessions(service_url) == before


def test_what_a_live_service_sandbox_cannot_do(service_url: str) -> None:
    with Sandbox(url=service_url) as sb:
        for feature, call in [
            ("atomic", lambda: sb.commands.run("touch /tmp/x", atomic=True)),
            ("truncation", lambda: sb.commands.run("touch /tmp/x", truncation="plain")),
            ("export_state", lambda: sb.export_state()),
            ("host tools", lambda: sb.tools.register("f", print)),
            ("host tools", lambda: sb.tools.unregister("f")),
        ]:
            with pytest.raises(NotSupportedError, match=feature):
                call()
        assert not sb.files.exists("/tmp/x")
    with pytest.raises(NotSupportedError, match="import_state"):
        Sandbox.import_state(b"blob", transport="service")


def test_the_transport_is_chosen_by_url(service_url: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("WASMSAND_URL", raising=False)
    for kwargs in (
        {"url": service_url, "transport": "rpc"},
        {"url": service_url, "transport": "inprocess"},
        {"url": service_url, "sandboxd_path": "/bin/true"},
        {"transport": "service"},  # no URL anywhere
        {"api_key": "k"},
        {"runtime": "wasm"},
        {"image": "wasmsand/default"},
        {"env": {"A": "b"}},
        {"url": "ftp://127.0.0.1/"},
        {"url": service_url, "ttl_sec": 0},
    ):
        with pytest.raises(ValueError):
            Sandbox(**kwargs)  # type: ignore[arg-type]
    # `transport="service"` takes its URL from the environment; the server's root URL works
    # as well as the one with the API's path.
    monkeypatch.setenv("WASMSAND_URL", service_url.removesuffix("/api/v1/sandbox"))
    with Sandbox(transport="service") as sb:
        assert sb.commands.run("echo via env").stdout == "via env\n"


def test_async_sandbox_on_the_service(service_url: str) -> None:
    import asyncio

    async def main() -> None:
        sb = await AsyncSandbox.create(url=service_url, env={"K": "v"})
        async with sb:
            fork = await sb.fork()
            r1, r2 = await asyncio.gather(sb.commands.run("sleep 0.2; echo $K"), fork.commands.run("echo f"))
            assert (r1.stdout, r2.stdout) == ("v\n", "f\n")
            with pytest.raises(NotSupportedError):
                await sb.export_state()

    asyncio.run(main())


# ---- credentials ----


@pytest.fixture(scope="module")
def keyed_service(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Server, str]]:
    """A second server with authentication on: one API key, of the user ``alice``."""
    key = "wsk-" + secrets.token_hex(16)
    digest = hashlib.sha256(key.encode()).hexdigest()
    server = start_server(tmp_path_factory.mktemp("sandboxd-keyed"), {"SANDBOX_API_KEYS": f"{digest}:alice"})
    yield server, key
    stop_server(server)


def test_the_api_key_is_the_bearer_credential(keyed_service: tuple[Server, str], monkeypatch: pytest.MonkeyPatch) -> None:
    server, key = keyed_service
    monkeypatch.delenv("WASMSAND_API_KEY", raising=False)
    for wrong in (None, "wsk-not-the-key"):
        with pytest.raises(SandboxError) as e:
            Sandbox(url=server.url, api_key=wrong)
        assert (e.value.kind, e.value.code) == ("unauthorized", 401)
    with Sandbox(url=server.url, api_key=key) as sb:
        # The run's stream is a WebSocket: the key goes on its handshake too.
        chunks: list[str] = []
        assert sb.commands.run("echo hi", on_stdout=chunks.append).stdout == "hi\n" and chunks == ["hi\n"]
        sb.files.write("/tmp/k", "k")
        assert sb.files.read("/tmp/k") == b"k"
        listed = httpx.get(f"{server.url}/sessions", headers={"Authorization": f"Bearer {key}"}).json()["items"]
        assert [(s["session_id"], s["user_id"]) for s in listed] == [(_session_of(sb), "alice")]
    monkeypatch.setenv("WASMSAND_API_KEY", key)
    with Sandbox(url=server.url) as sb:
        assert sb.commands.run("echo from env").stdout == "from env\n"


# ---- the error mapping (no server) ----


def _envelope(code: str, details: dict[str, object]) -> bytes:
    import json

    return json.dumps({"error": {"code": code, "message": "the service's words", "details": details}}).encode()


@pytest.mark.parametrize(
    ("status", "code", "details", "exc", "kind"),
    [
        (404, "not_found", {"errno": "ENOENT", "path": "/x"}, FileNotFoundError, None),
        (409, "conflict", {"errno": "EEXIST", "path": "/x"}, FileExistsError, None),
        (409, "conflict", {"errno": "ENOTEMPTY", "path": "/x"}, OSError, None),
        (403, "forbidden", {"errno": "EROFS", "path": "/etc/x"}, PermissionError, None),
        (404, "not_found", {"resource": "session", "id": "s"}, SandboxDestroyedError, "unknown_sandbox"),
        (410, "session_lost", {"reason": "corrupt_checkpoint"}, SandboxDestroyedError, "sandbox_destroyed"),
        (410, "not_found", {"resource": "session", "id": "s"}, SandboxDestroyedError, "sandbox_destroyed"),
        (404, "not_found", {"resource": "process", "id": "9"}, ProcessNotFoundError, "no_such_process"),
        (404, "not_found", {"resource": "snapshot", "id": "9"}, InvalidParamsError, "unknown_snapshot"),
        (400, "invalid_request", {}, InvalidParamsError, "invalid_params"),
        (400, "invalid_request", {"runtime": "docker", "reason": "not_supported"}, NotSupportedError, "not_supported"),
        (409, "conflict", {"reason": "stdin_closed", "pid": 1}, SandboxError, "stdin_closed"),
        (429, "quota_exceeded", {"max_running": 8, "reason": "processes"}, LimitExceededError, "limit_exceeded"),
        (401, "unauthorized", {"reason": "missing_credentials"}, SandboxError, "unauthorized"),
    ],
)
def test_errors_map_by_code_and_details(
    status: int, code: str, details: dict[str, object], exc: type[BaseException], kind: str | None
) -> None:
    with pytest.raises(exc) as e:
        raise_http(status, _envelope(code, details))
    assert type(e.value) is exc
    if kind is not None:
        assert isinstance(e.value, SandboxError) and e.value.kind == kind and e.value.code == status
    else:
        assert isinstance(e.value, OSError) and e.value.filename == details["path"]


def test_a_merge_conflict_carries_its_paths() -> None:
    conflicts = [{"path": "/home/user/g", "ours": "changed", "theirs": "deleted"}]
    with pytest.raises(MergeConflictError) as e:
        raise_http(409, _envelope("conflict", {"reason": "merge_conflict", "conflicts": conflicts}))
    assert e.value.kind == "merge_conflict"
    assert [(c.path, c.ours, c.theirs) for c in e.value.conflicts] == [("/home/user/g", "changed", "deleted")]


def test_an_answer_that_is_not_the_services_is_a_sandbox_error() -> None:
    with pytest.raises(SandboxError) as e:
        raise_http(502, b"<html>bad gateway</html>", "Bad Gateway")
    assert (e.value.kind, e.value.code) == ("http_502", 502)
    assert "502" in str(e.value)

