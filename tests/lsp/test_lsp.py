"""`sandboxd lsp` driven by pygls's client over stdio, against the embedded service (wasm)
and, where reachable, a service given by URL. The languages of the Docker runtime are in
test_lsp_docker.py."""

import asyncio
import json
import socket
import subprocess
import urllib.request

import pytest

from lsp_client import SANDBOXD, Session, as_dict, write

pytestmark = pytest.mark.skipif(SANDBOXD is None, reason="no sandboxd (WASMSAND_SANDBOXD_BIN)")


def run(coro):
    return asyncio.run(coro)


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


APP = {
    "app/main.py": "import lib\n\nif __name__ == \"__main__\":\n    lib.work(3)\n",
    "app/lib.py": "def work(n):\n    print('working', n)\n    raise ValueError(f'bad input {n}')\n",
}


def test_python_traceback_lands_on_the_workspace_frame_and_a_passing_rerun_clears_it(tmp_path):
    write(tmp_path, APP)

    async def go():
        async with Session(tmp_path) as s:
            caps = s.init.capabilities
            assert set(caps.execute_command_provider.commands) >= {
                "tldw.sandbox.run",
                "tldw.sandbox.configure",
                "tldw.sandbox.openArtifacts",
            }
            s.open("app/main.py", "python")
            lenses = await s.lenses("app/main.py")
            assert len(lenses) == 1
            lens = lenses[0]
            assert lens.range.start.line == 2
            assert lens.command.command == "tldw.sandbox.run"
            spec = dict(lens.command.arguments[0])
            assert spec == {"command": ["python3", "app/main.py"]}

            started, done = await s.run(spec)
            assert started["run_id"] and started["status"] in ("starting", "queued")
            assert started["log_stream_url"].endswith(f"/runs/{started['run_id']}/stream")
            assert done["exit_code"] == 1, done
            lib = s.uri("app/lib.py")
            diags = s.diagnostics[lib]
            assert len(diags) == 1
            d = diags[0]
            assert d.range.start.line == 2, d
            assert d.message.startswith("ValueError: bad input 3\nexited with code 1"), d.message
            assert d.severity == 1
            # The output reached the client while the run went on, in order.
            out = "".join(l["text"] for l in s.logs if l["stream"] == "stdout")
            err = "".join(l["text"] for l in s.logs if l["stream"] == "stderr")
            assert "working 3" in out
            assert "Traceback (most recent call last)" in err
            kinds = [p["kind"] for p in s.progress]
            assert kinds[0] == "begin" and kinds[-1] == "end", kinds

            # Editing the file clears the diagnostic it no longer matches.
            s.change("app/lib.py", "def work(n):\n    print('fixed', n)\n")
            assert list(await s.next_diagnostics(lib)) == []

            # No argument: the last spec again, with only the changed file sent.
            started2, done2 = await s.run()
            assert done2["exit_code"] == 0, done2
            assert done2["diagnostics"] == []
            assert started2["session_id"] == started["session_id"]
            assert "fixed 3" in "".join(l["text"] for l in s.logs if l["run_id"] == started2["run_id"])

            # A failing run, then a passing one: the diagnostic goes away on its own.
            s.change("app/lib.py", "def work(n):\n    raise KeyError(n)\n", version=3)
            await s.run()
            assert s.diagnostics[lib][0].message.startswith("KeyError: 3")
            s.change("app/lib.py", "def work(n):\n    pass\n", version=4)
            _, ok = await s.run()
            assert ok["exit_code"] == 0
            assert list(s.diagnostics[lib]) == []

    run(go())


def test_sync_sends_changes_and_deletions_and_honours_ignore_rules(tmp_path):
    write(
        tmp_path,
        {
            "keep.txt": "one\n",
            "gone.txt": "soon deleted\n",
            ".gitignore": "build/\n",
            "build/out.txt": "ignored\n",
            "node_modules/x/index.js": "vendored\n",
            "sub/dir/deep.txt": "deep\n",
        },
    )
    (tmp_path / "blob.bin").write_bytes(b"\x00\x01\x02")

    async def go():
        async with Session(tmp_path) as s:
            listing = {"command": ["bash", "-c", "find . -type f | sort"]}
            _, done = await s.run(listing)
            assert done["exit_code"] == 0
            files = "".join(l["text"] for l in s.logs).split()
            assert "./keep.txt" in files and "./sub/dir/deep.txt" in files
            assert "./build/out.txt" not in files
            assert not any(f.startswith("./node_modules") for f in files)
            assert "./blob.bin" not in files

            (tmp_path / "gone.txt").unlink()
            (tmp_path / "keep.txt").write_text("two\n")
            s.logs.clear()
            _, done = await s.run({"command": ["bash", "-c", "find . -type f | sort; cat keep.txt"]})
            text = "".join(l["text"] for l in s.logs)
            assert "./gone.txt" not in text.split()
            assert "two" in text

    run(go())


def test_a_frame_outside_the_workspace_falls_back_to_the_run_s_file_with_an_artifacts_link(tmp_path):
    write(
        tmp_path,
        {
            "run.sh": "printf 'def f():\\n    raise KeyError(\"k\")\\nf()\\n' > /tmp/gen.py\npython3 /tmp/gen.py\n",
        },
    )

    async def go():
        async with Session(tmp_path) as s:
            _, done = await s.run({"command": ["bash", "run.sh"]})
            assert done["exit_code"] == 1, done
            uri = s.uri("run.sh")
            d = s.diagnostics[uri][0]
            assert d.range.start.line == 0
            assert "/tmp/gen.py:2 (in the sandbox, outside the workspace)" in d.message, d.message
            assert "reveal in artifacts" in d.message
            assert d.code_description.href == done["artifacts_url"]
            assert done["diagnostics"][0]["mapped"] is False

    run(go())


def test_configure_artifacts_env_and_cancel(tmp_path):
    write(tmp_path, {"make.sh": "mkdir -p out\necho \"$GREETING from sandbox\" > out/a.txt\n"})

    async def go():
        async with Session(tmp_path) as s:
            cfg = await s.command(
                "tldw.sandbox.configure",
                {"env": {"GREETING": "hi"}, "capture_patterns": ["out/**"], "timeout_sec": 30},
            )
            cfg = as_dict(cfg)
            assert cfg["defaults"]["env"] == {"GREETING": "hi"}
            assert cfg["embedded"] is True
            started, done = await s.run({"command": ["bash", "make.sh"]})
            assert done["exit_code"] == 0
            arts = as_dict(await s.command("tldw.sandbox.openArtifacts"))
            assert arts["run_id"] == started["run_id"]
            [item] = [i for i in arts["items"] if i["path"] == "out/a.txt"]
            with urllib.request.urlopen(item["url"], timeout=30) as r:
                assert r.read() == b"hi from sandbox\n"
            # The same by run id.
            again = as_dict(await s.command("tldw.sandbox.openArtifacts", {"run_id": started["run_id"]}))
            assert [i["path"] for i in again["items"]] == [i["path"] for i in arts["items"]]

            # A run that would never end is bounded by its timeout and reported.
            _, slow = await s.run({"command": ["bash", "-c", "echo start; sleep 1000"], "timeout_sec": 2}, timeout=60)
            assert slow["phase"] == "timed_out", slow
            assert any("timed out" in m for m in s.shown), s.shown

            # Cancel: a long run stopped by the command, reported as it ended.
            started = await s.command("tldw.sandbox.run", {"command": ["bash", "-c", "sleep 600"], "timeout_sec": 600})
            await asyncio.sleep(1)
            await s.command("tldw.sandbox.cancel", {"run_id": as_dict(started)["run_id"]})
            done = await asyncio.wait_for(s.finished.get(), 60)
            assert done["phase"] == "killed" and done["summary"] == "cancelled", done

        # The defaults and the last spec outlive the server: a new one repeats the last run.
        async with Session(tmp_path) as s:
            cfg = as_dict(await s.command("tldw.sandbox.configure"))
            assert cfg["defaults"]["env"] == {"GREETING": "hi"}
            assert cfg["last_spec"]["command"] == ["bash", "-c", "sleep 600"]
            _, done = await s.run({"command": ["bash", "make.sh"]})
            assert done["exit_code"] == 0

    run(go())


def test_bad_input_gets_clear_errors_and_the_server_keeps_answering(tmp_path):
    write(tmp_path, {"a.py": "print(1)\n", "big/one.txt": "x" * 700_000, "big/two.txt": "y" * 700_000})

    async def go():
        async with Session(tmp_path, env={"SANDBOX_MAX_UPLOAD_MB": "1"}) as s:

            async def fails(name, *args):
                with pytest.raises(Exception) as e:
                    await s.command(name, *args)
                return str(e.value)

            assert "unknown command" in await fails("tldw.sandbox.nope")
            assert "there is no earlier run to repeat" in await fails("tldw.sandbox.run")
            assert "unknown field `comand`" in await fails("tldw.sandbox.run", {"comand": ["ls"]})
            assert "non-empty argv" in await fails("tldw.sandbox.run", {"command": []})
            assert "at most one argument" in await fails("tldw.sandbox.run", {"command": ["ls"]}, {})
            assert "unknown field" in await fails("tldw.sandbox.configure", {"runtim": "x"})
            assert "invalid glob" in await fails("tldw.sandbox.configure", {"include": ["a/**["]})
            assert "no run yet" in await fails("tldw.sandbox.openArtifacts")
            assert "not a relative path inside the workspace" in await fails(
                "tldw.sandbox.run", {"command": ["ls"], "files": ["../etc/passwd"]}
            )
            msg = await fails("tldw.sandbox.run", {"command": ["ls"], "base_image": "no-such-image"})
            assert "no-such-image" in msg
            # Over the service's upload cap: said before anything is sent.
            msg = await fails("tldw.sandbox.run", {"command": ["ls"]})
            assert "over the server's upload cap of 1048576 bytes" in msg, msg
            # A smaller file set fits, and runs.
            _, done = await s.run({"command": ["python3", "a.py"], "files": ["a.py"]})
            assert done["exit_code"] == 0

    run(go())


def test_a_service_that_is_down_gets_an_error_not_a_hang(tmp_path):
    write(tmp_path, {"a.py": "print(1)\n"})
    port = free_port()

    async def go():
        async with Session(tmp_path, args=["--server-url", f"http://127.0.0.1:{port}"]) as s:
            with pytest.raises(Exception) as e:
                await s.command("tldw.sandbox.run", {"command": ["python3", "a.py"]})
            assert f"cannot reach the sandbox service at http://127.0.0.1:{port}" in str(e.value)
            assert len(await s.lenses("a.py")) == 1

    run(go())


def test_against_a_service_by_url_with_an_api_key(tmp_path):
    """The same behaviour against `sandboxd serve` as against the embedded service."""
    import hashlib

    write(tmp_path, APP)
    key = "lsp-test-key-0123456789"
    digest = hashlib.sha256(key.encode()).hexdigest()
    port = free_port()
    srv = subprocess.Popen(
        [SANDBOXD, "serve", "--listen", f"127.0.0.1:{port}", "--store", "memory",
         "--data-dir", str(tmp_path / ".data"), "--set", f"SANDBOX_API_KEYS={digest}:dev"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        line = srv.stdout.readline()
        assert "listening" in line, line + srv.stderr.read()

        async def go():
            # A wrong key: the service's own refusal, word for word.
            async with Session(tmp_path, args=["--server-url", f"http://127.0.0.1:{port}", "--api-key", "wrong"]) as s:
                with pytest.raises(Exception) as e:
                    await s.command("tldw.sandbox.run", {"command": ["python3", "app/main.py"]})
                assert "HTTP 401" in str(e.value), str(e.value)
            async with Session(
                tmp_path,
                args=["--server-url", f"http://127.0.0.1:{port}/api/v1/sandbox"],
                env={"TLDW_SANDBOX_API_KEY": key},
            ) as s:
                _, done = await s.run({"command": ["python3", "app/main.py"]})
                assert done["exit_code"] == 1
                d = s.diagnostics[s.uri("app/lib.py")][0]
                assert d.range.start.line == 2 and d.message.startswith("ValueError")
                assert done["web_url"].startswith(f"http://127.0.0.1:{port}/webui/sandbox/runs/")

        run(go())
    finally:
        srv.terminate()
        srv.wait(30)


def test_clients_without_the_extension_get_the_log_as_log_messages(tmp_path):
    write(tmp_path, {"hello.sh": "echo hello from the sandbox\nexit 3\n"})

    async def go():
        async with Session(tmp_path, tldw=False) as s:
            _, done = await s.run({"command": ["bash", "hello.sh"]})
            assert done["exit_code"] == 3
            assert any("hello from the sandbox" in m for m in s.log_messages), s.log_messages
            assert s.logs == []
            d = s.diagnostics[s.uri("hello.sh")][0]
            assert d.message.startswith("exited with code 3"), d.message

    run(go())


def test_huge_output_is_cut_in_the_editor_with_a_link_to_the_whole_log(tmp_path):
    write(tmp_path, {"noise.sh": "yes 'a line of output' | head -c 3000000\necho done >&2\n"})

    async def go():
        async with Session(tmp_path) as s:
            started, done = await s.run({"command": ["bash", "noise.sh"]})
            assert done["exit_code"] == 0, done
            out = "".join(l["text"] for l in s.logs if l["stream"] == "stdout")
            shown, _, notice = out.rpartition("\n[stdout shown up to 100 KB here; the full log: ")
            assert len(shown.encode()) <= 100 * 1024 + 1, len(shown)
            assert notice.startswith(f"http://127.0.0.1:") and started["run_id"] in notice, notice
            assert "done" in "".join(l["text"] for l in s.logs if l["stream"] == "stderr")

    run(go())


def test_broken_framing_ends_the_server_with_a_clear_error_and_eof_ends_it_cleanly(tmp_path):
    def frame(obj):
        body = json.dumps(obj).encode()
        return b"Content-Length: %d\r\n\r\n" % len(body) + body

    init = frame({"jsonrpc": "2.0", "id": 1, "method": "initialize",
                  "params": {"processId": None, "rootUri": tmp_path.as_uri(), "capabilities": {}}})
    for data, status, words in [
        (b"Content-Length: 5\r\n\r\n{bad}", 1, "malformed LSP payload"),
        (b"hello\r\n\r\n", 1, "malformed header"),
        (init, 1, "the client left during the handshake"),
        (init + frame({"jsonrpc": "2.0", "method": "initialized", "params": {}}), 0, ""),
    ]:
        p = subprocess.run([SANDBOXD, "lsp"], input=data, capture_output=True, timeout=60)
        assert p.returncode == status, (data, p.stderr)
        assert words in p.stderr.decode(), p.stderr


def test_an_https_service_with_an_untrusted_certificate_is_refused_by_tls(tmp_path):
    """The https path is rustls with the system's roots: a self-signed service is refused with
    the TLS reason, not hung and not trusted."""
    import http.server
    import shutil
    import ssl
    import threading

    if shutil.which("openssl") is None:
        pytest.skip("no openssl to make a certificate")
    key, cert = tmp_path / "key.pem", tmp_path / "cert.pem"
    subprocess.run(
        ["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", key, "-out", cert,
         "-days", "1", "-subj", "/CN=127.0.0.1"],
        check=True, capture_output=True,
    )
    srv = http.server.HTTPServer(("127.0.0.1", 0), http.server.BaseHTTPRequestHandler)
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.load_cert_chain(cert, key)
    srv.socket = ctx.wrap_socket(srv.socket, server_side=True)
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    write(tmp_path / "ws", {"a.py": "print(1)\n"})

    async def go():
        async with Session(tmp_path / "ws", args=["--server-url", f"https://127.0.0.1:{srv.server_address[1]}"]) as s:
            with pytest.raises(Exception) as e:
                await s.command("tldw.sandbox.run", {"command": ["python3", "a.py"]})
            assert "cannot reach the sandbox service at https://127.0.0.1" in str(e.value)
            assert "certificate" in str(e.value).lower(), str(e.value)

    try:
        run(go())
    finally:
        srv.shutdown()
