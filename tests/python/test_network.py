"""``Sandbox(network=...)``: what the allowlist allows, ``curl`` in the sandbox reaches (a real
HTTP server on loopback); what it does not, it refuses; without it there is no network. Every
transport: the service's sandboxes get the same policy from ``network=`` (narrowing the
server's own, tests/python/conftest.py), but names resolve by the server's ``resolve`` table
only, so a client's ``resolve`` raises ``NotSupportedError`` there."""

from __future__ import annotations

import http.server
import threading
from collections.abc import Iterator

import pytest

from wasmsand import NotSupportedError, Sandbox

NETWORK = {"hosts": ["api.test"], "ips": ["127.0.0.1"], "resolve": {"api.test": ["127.0.0.1"]}}


def _network(transport: str) -> dict[str, object]:
    """The policy of the tests below as the transport takes it: the service resolves
    ``api.test`` by its own table (``SANDBOX_EGRESS_RESOLVE``) and refuses a client's."""
    if transport != "service":
        return dict(NETWORK)
    with pytest.raises(NotSupportedError, match="resolve"):
        Sandbox(transport=transport, network=NETWORK)
    return {k: v for k, v in NETWORK.items() if k != "resolve"}


class _Hello(http.server.BaseHTTPRequestHandler):
    def do_GET(self) -> None:  # noqa: N802 (the stdlib's name)
        body = b"hello from the host\n"
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture(scope="module")
def port() -> Iterator[int]:
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Hello)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield server.server_address[1]
    server.shutdown()


def test_curl_reaches_what_the_allowlist_allows(transport: str, port: int) -> None:
    network = _network(transport)
    with Sandbox(transport=transport, network=network) as sb:
        r = sb.commands.run(f"curl -s http://api.test:{port}/hello")
        assert (r.exit_code, r.stdout) == (0, "hello from the host\n")
        r = sb.commands.run("curl -sS http://example.org/")
        assert r.exit_code == 7
        assert "blocked by sandbox network policy: host example.org not in allowlist" in r.stderr
        # A fork keeps the policy.
        with sb.fork() as child:
            assert child.commands.run(f"curl -s http://api.test:{port}/hello").exit_code == 0


def test_python_in_the_sandbox_uses_the_same_policy(transport: str, port: int) -> None:
    network = _network(transport)
    code = (
        "import urllib.request, urllib.error\n"
        f"print(urllib.request.urlopen('http://api.test:{port}/hello').read().decode(), end='')\n"
        "try:\n"
        "    urllib.request.urlopen('http://example.org/')\n"
        "except urllib.error.URLError as e:\n"
        "    print(e.reason.strerror)\n"
    )
    with Sandbox(transport=transport, network=network) as sb:
        sb.files.write("/tmp/get.py", code)
        r = sb.commands.run("python3 /tmp/get.py")
        assert r.exit_code == 0, r.stderr
        first, second = r.stdout.splitlines()
        assert first == "hello from the host"
        assert second.startswith("blocked by sandbox network policy: host example.org not in allowlist")


def test_without_a_policy_there_is_no_network(transport: str, port: int) -> None:
    with Sandbox(transport=transport) as sb:
        r = sb.commands.run(f"curl -sS http://127.0.0.1:{port}/hello")
        assert r.exit_code == 7
        assert "network access is off in this sandbox" in r.stderr


def test_bad_policies_are_refused(transport: str) -> None:
    with pytest.raises(ValueError, match="unknown key"):
        Sandbox(transport=transport, network={"domains": ["x"]})
    with pytest.raises(Exception, match="two labels"):
        Sandbox(transport=transport, network={"hosts": ["*.com"]})
