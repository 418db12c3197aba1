"""What the SDK's tests share: the transports every SDK test runs on, and for ``"service"`` a
real ``sandboxd serve`` on loopback, started once per test session from
``$WASMSAND_SANDBOXD_BIN`` (``scripts/test.sh`` exports it). Without that variable the
service transport's tests are skipped, except under ``CI=true``, where they fail: a CI that
skipped them would pass without having tested the transport."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

TRANSPORTS = ["inprocess", "rpc", "service"]

# The network tests' host (tests/python/test_network.py): the service's sandboxes may reach it
# only through the server's own egress policy, which a client can narrow but never widen.
EGRESS_ALLOWLIST = '{"hosts": ["api.test"], "ips": ["127.0.0.1"]}'
EGRESS_RESOLVE = "api.test=127.0.0.1"


@dataclass
class Server:
    """A running ``sandboxd serve``: its API's base URL and its log (stderr)."""

    url: str
    log: Path
    proc: subprocess.Popen[str]


def sandboxd_bin() -> str:
    binary = os.environ.get("WASMSAND_SANDBOXD_BIN")
    if not binary:
        reason = "WASMSAND_SANDBOXD_BIN is not set: no sandboxd binary to serve the service transport's tests"
        if os.environ.get("CI") == "true":
            pytest.fail(f"{reason} (CI=true: a missing server fails, it is not skipped)")
        pytest.skip(reason)
    return binary


def start_server(data_dir: Path, env: dict[str, str] | None = None) -> Server:
    """Starts ``sandboxd serve`` on a free loopback port with the memory store and returns
    once it listens: its first line on stdout names the URL."""
    data_dir.mkdir(parents=True, exist_ok=True)
    log = data_dir / "serve.log"
    full_env = {**os.environ, "SANDBOX_LOG_FORMAT": "text", **(env or {})}
    with open(log, "w") as err:
        proc = subprocess.Popen(
            [sandboxd_bin(), "serve", "--listen", "127.0.0.1:0", "--store", "memory", "--data-dir", str(data_dir)],
            stdout=subprocess.PIPE,
            stderr=err,
            stdin=subprocess.DEVNULL,
            env=full_env,
            text=True,
        )
    assert proc.stdout is not None
    first: list[str] = []
    reader = threading.Thread(target=lambda: first.append(proc.stdout.readline() if proc.stdout else ""), daemon=True)
    reader.start()
    reader.join(120)
    line = first[0] if first else ""
    m = re.match(r"wasmsand service listening on (http://\S+) \(store: ", line)
    if m is None:
        proc.kill()
        proc.wait()
        raise RuntimeError(f"sandboxd serve did not start (first line {line!r}); its log:\n{log.read_text()[-4000:]}")

    # Whatever else it prints on stdout is drained, so a full pipe never blocks the server.
    def drain() -> None:
        assert proc.stdout is not None
        for _ in proc.stdout:
            pass

    threading.Thread(target=drain, daemon=True).start()
    return Server(url=m.group(1), log=log, proc=proc)


def stop_server(server: Server) -> None:
    # SIGTERM: the clean shutdown (runs ended, sessions destroyed), as a deployment stops it.
    server.proc.send_signal(signal.SIGTERM)
    try:
        server.proc.wait(30)
    except subprocess.TimeoutExpired:
        server.proc.kill()
        server.proc.wait()


@pytest.fixture(scope="session")
def service(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    """The service every ``"service"`` test talks to (authentication off: loopback)."""
    server = start_server(
        tmp_path_factory.mktemp("sandboxd-serve"),
        {"SANDBOX_EGRESS_ALLOWLIST": EGRESS_ALLOWLIST, "SANDBOX_EGRESS_RESOLVE": EGRESS_RESOLVE},
    )
    yield server
    stop_server(server)


@pytest.fixture(scope="session")
def service_url(service: Server) -> str:
    return service.url


@pytest.fixture(params=TRANSPORTS)
def transport(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    """Each transport by name. For ``"service"`` the session's server is named by
    ``$WASMSAND_URL``, so a test's ``Sandbox(transport=transport)`` reaches it unchanged."""
    name = str(request.param)
    if name == "service":
        monkeypatch.setenv("WASMSAND_URL", request.getfixturevalue("service_url"))
        monkeypatch.delenv("WASMSAND_API_KEY", raising=False)
    return name
