"""The agent-framework providers (``wasmsand.integrations``), each driven through its
framework's own code path with a scripted model: LangGraph's tool loop for the LangChain
tools, the OpenAI Agents SDK's ``Runner`` with a ``SandboxAgent`` on ``WasmsandSandboxClient``,
and pydantic-ai's ``Agent.run``. No model is called over a network.

The frameworks are not in the main test venv: ``scripts/test.sh`` runs this file again in a
venv of its own with the pinned frameworks (``WASMSAND_TEST_INTEGRATIONS=1``, where a missing
framework fails instead of skipping). The tests of the shared replies need no framework.
"""

from __future__ import annotations

import asyncio
import importlib
import importlib.util
import io
import json
import os
import subprocess
import sys
import tarfile
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

from wasmsand import (
    AsyncSandbox,
    CommandResult,
    InvalidParamsError,
    NotSupportedError,
    Sandbox,
    SandboxDestroyedError,
    Usage,
)
from wasmsand.integrations.tools import (
    TOOL_SPECS,
    ToolSettings,
    adrive,
    describe_error,
    drive,
    operation,
    present_run,
)

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
FRAMEWORKS = ("langchain_core", "langgraph", "agents", "pydantic_ai")


def need(module: str) -> ModuleType:
    """The framework module, or a skip; a failure where the frameworks must be installed."""
    try:
        return importlib.import_module(module)
    except ImportError:
        if os.environ.get("WASMSAND_TEST_INTEGRATIONS") == "1":
            pytest.fail(f"{module} is not installed, and WASMSAND_TEST_INTEGRATIONS=1 says it must be")
        pytest.skip(f"{module} is not installed (pip install 'wasmsand[langchain,pydantic-ai,openai-agents]')")


def load_example(name: str) -> ModuleType:
    spec = importlib.util.spec_from_file_location(f"example_{name}", EXAMPLES / f"{name}.py")
    assert spec and spec.loader
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


@pytest.fixture(autouse=True)
def no_model_keys(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    # The examples pick a real model when a key is set; the tests never call one. The SDK's
    # default sandbox snapshots go under $XDG_STATE_HOME, here the test's own directory.
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "state"))


# ---- the shared replies (no framework) ----------------------------------------------------------


def test_importing_wasmsand_and_its_integrations_imports_no_framework() -> None:
    code = (
        "import sys, wasmsand, wasmsand.integrations, wasmsand.integrations.tools\n"
        f"print(sorted(m for m in sys.modules if m.split('.')[0] in {FRAMEWORKS!r}))\n"
    )
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == "[]"


def result(**kw: Any) -> CommandResult:
    base: dict[str, Any] = {"stdout": "", "stderr": "", "exit_code": 0, "execution_time_ms": 1.0}
    return CommandResult(**{**base, **kw})


def test_a_reply_has_exit_code_streams_and_no_notes_when_nothing_was_cut() -> None:
    assert present_run(result(stdout="hi\n", stderr="warn\n", exit_code=3)) == (
        "exit code 3\n--- stdout ---\nhi\n--- stderr ---\nwarn"
    )
    assert present_run(result()) == "exit code 0\n(no output)"


def test_a_long_stream_keeps_its_start_and_end_and_says_how_to_see_the_rest() -> None:
    text = "".join(f"line {i}\n" for i in range(5000))
    reply = present_run(result(stdout=text), ToolSettings(max_output_chars=1000))
    assert reply.startswith("exit code 0\n--- stdout ---\nline 0\n")
    assert "line 4999" in reply and "line 2500" not in reply
    assert len(reply) < 1600
    assert "characters in the middle of stdout are not shown" in reply and "> /tmp/out.txt" in reply


def test_cut_and_spilled_streams_and_limits_are_explained() -> None:
    reply = present_run(
        result(
            stdout="x",
            truncated={"stdout": True, "stderr": True},
            spilled={"stdout": "/tmp/.wasmsand/stdout-1"},
            exit_code=137,
            error_class="LIMIT_EXCEEDED",
            usage=Usage(limits_hit=["stdoutBytes", "memoryBytes"]),
        )
    )
    assert "all of it is in /tmp/.wasmsand/stdout-1" in reply
    assert "stderr was cut at the sandbox's output limit" in reply
    assert "a program ran out of memory" in reply and "smaller pieces" in reply
    timeout = present_run(result(exit_code=124, error_class="TIMEOUT"), timeout=2.0)
    assert "stopped at its time limit of 2 s (exit code 124)" in timeout and "longer timeout" in timeout


@pytest.mark.parametrize(
    ("error", "expected"),
    [
        (FileNotFoundError(2, "No such file", "/home/user/x"), "No such file or directory: /home/user/x. Check the path"),
        (FileNotFoundError("no path"), "No such file or directory. Check the path"),
        (PermissionError(30, "Read-only", "/etc/x"), "Read-only: /etc/x. Only /home/user and /tmp are writable"),
        (OSError(28, "No space left"), "disk is full"),
        (SandboxDestroyedError("gone"), "has been shut down"),
        (NotSupportedError("host tools"), "cannot do that: host tools"),
        (InvalidParamsError("bad cwd"), "refused the arguments: bad cwd"),
        (ValueError("timeout must be positive"), "Invalid arguments: timeout must be positive"),
        (KeyError("boom"), "The tool failed: KeyError"),
    ],
)
def test_errors_become_what_happened_and_what_to_do(error: Exception, expected: str) -> None:
    message = describe_error(error)
    assert expected in message
    assert "Traceback" not in message


def test_tool_specs_are_json_schemas_with_their_required_arguments() -> None:
    assert sorted(TOOL_SPECS) == ["list_directory", "read_file", "run_python", "run_shell", "write_file"]
    schema = TOOL_SPECS["run_shell"].json_schema()
    assert schema["required"] == ["command"] and set(schema["properties"]) == {"command", "cwd", "timeout"}
    assert TOOL_SPECS["write_file"].json_schema()["required"] == ["path", "content"]


# ---- the operations on a real sandbox, both faces ------------------------------------------------


def test_operations_on_a_sandbox() -> None:
    settings = ToolSettings(max_read_bytes=100, max_timeout=1.0)
    with Sandbox() as sb:

        def tool(name: str, **args: Any) -> str:
            return drive(sb, operation(name, args, settings))

        assert tool("write_file", path="/home/user/d/a.txt", content="héllo\n") == "wrote 7 bytes to /home/user/d/a.txt"
        assert tool("read_file", path="d/a.txt") == "héllo\n"
        assert tool("list_directory", path="d") == "a.txt  7 bytes"
        assert tool("run_shell", command="pwd; echo oops >&2; exit 4", cwd="/tmp") == (
            "exit code 4\n--- stdout ---\n/tmp\n--- stderr ---\noops"
        )
        r = tool("run_python", code="import sys\nprint(sum(range(10)))\nsys.exit('bad')")
        assert r == "exit code 1\n--- stdout ---\n45\n--- stderr ---\nbad"
        slow = tool("run_python", code="while True: pass", timeout=30)
        assert slow.startswith("exit code 124\n")
        assert "was lowered to the maximum, 1 s" in slow and "time limit of 1 s" in slow
        sb.files.write("/home/user/big.txt", "0123456789" * 30)
        assert "[showing the first 100 of 300 bytes of big.txt" in tool("read_file", path="big.txt")
        sb.files.write("/home/user/blob", bytes(range(256)))
        assert tool("read_file", path="blob").startswith("blob is a binary file (256 bytes)")
        assert tool("read_file", path="d").startswith("d is a directory")
        missing = tool("read_file", path="nope")
        assert missing.startswith("No such file or directory: ") and "nope. Check the path" in missing
        assert tool("write_file", path="/etc/x", content="x").startswith("Read-only: /etc")
        assert tool("run_shell", command="") == "Invalid arguments: argument 'command' must be a non-empty string. Correct them and retry."
        assert tool("run_shell", command="true", timeout=-1).startswith("Invalid arguments: timeout must be a positive")


def test_a_multibyte_character_at_the_cap_is_not_taken_for_binary() -> None:
    with Sandbox() as sb:
        sb.files.write("/tmp/u.txt", "é" * 100)  # 200 bytes; the cap falls inside a character
        reply = drive(sb, operation("read_file", {"path": "/tmp/u.txt"}, ToolSettings(max_read_bytes=51)))
        assert reply.startswith("é" * 25 + "\n[showing the first 51 of 200 bytes")


def test_operations_on_an_async_sandbox() -> None:
    async def go() -> tuple[str, str]:
        async with AsyncSandbox() as sb:
            wrote = await adrive(sb, operation("write_file", {"path": "/tmp/a", "content": "x"}))
            ran = await adrive(sb, operation("run_shell", {"command": "cat /tmp/a"}))
        return wrote, ran

    assert asyncio.run(go()) == ("wrote 1 bytes to /tmp/a", "exit code 0\n--- stdout ---\nx")


def test_a_killed_sandbox_is_a_message_not_an_exception() -> None:
    sb = Sandbox()
    sb.kill()
    assert drive(sb, operation("run_shell", {"command": "true"})).startswith("The sandbox has been shut down")

    async def killed_async() -> str:
        asb = await AsyncSandbox.create()
        await asb.kill()
        return await adrive(asb, operation("run_shell", {"command": "true"}))

    assert asyncio.run(killed_async()).startswith("The sandbox has been shut down")


# ---- LangChain / LangGraph ---------------------------------------------------------------------


def tool_messages(messages: list[Any]) -> dict[str, str]:
    """The tool replies of a LangGraph run, by tool call id."""
    lc = need("langchain_core.messages")
    return {m.tool_call_id: str(m.content) for m in messages if isinstance(m, lc.ToolMessage)}


def langgraph_script(example: ModuleType) -> Any:
    return example.ScriptedChatModel(
        messages=iter(
            [
                example.call("write_file", 1, path="/home/user/s.py", content="print('from the sandbox')\n"),
                example.call("run_shell", 2, command="python3 s.py && ls /nope", cwd="/home/user"),
                example.call("read_file", 3, path="/home/user/missing.txt"),
                example.call("run_python", 4, code="while True: pass", timeout=0.5),
                example.call("write_file", 5, path="/usr/bin/x", content="x"),
                need("langchain_core.messages").AIMessage(content="done"),
            ]
        )
    )


@pytest.mark.parametrize("face", ["sync", "async"])
def test_langgraph_tool_loop_runs_the_toolkit(face: str) -> None:
    need("langgraph")
    example = load_example("langchain_agent")
    from wasmsand.integrations.langchain import WasmsandToolkit

    toolkit = WasmsandToolkit()
    graph = example.build_graph(langgraph_script(example), toolkit.get_tools())
    start = {"messages": [need("langchain_core.messages").HumanMessage("go")]}
    if face == "sync":
        with toolkit:
            state = graph.invoke(start)
            owned = toolkit._owned
        assert isinstance(owned, Sandbox)
    else:

        async def run() -> Any:
            async with toolkit:
                out = await graph.ainvoke(start)
                assert isinstance(toolkit._owned, AsyncSandbox)  # _arun ran on the async face
                return out

        state = asyncio.run(run())
    replies = tool_messages(state["messages"])
    assert replies["call_1"] == "wrote 26 bytes to /home/user/s.py"
    assert replies["call_2"].startswith("exit code 2\n--- stdout ---\nfrom the sandbox\n--- stderr ---\nls: ")
    assert replies["call_3"].startswith("No such file or directory: ")
    assert replies["call_3"].endswith("missing.txt. Check the path; list_directory shows what exists.")
    assert replies["call_4"].startswith("exit code 124\n") and "time limit of 0.5 s" in replies["call_4"]
    assert replies["call_5"].startswith("Read-only: /usr/bin") and "/tmp are writable" in replies["call_5"]
    assert state["messages"][-1].content == "done"
    assert toolkit._owned is None  # the block ended the toolkit's sandbox


def test_langchain_toolkit_leaves_a_given_sandbox_running() -> None:
    need("langchain_core")
    from wasmsand.integrations.langchain import WasmsandShellTool, WasmsandToolkit

    with Sandbox() as sb:
        with WasmsandToolkit(sandbox=sb) as toolkit:
            tools = toolkit.get_tools()
            assert [t.name for t in tools] == list(TOOL_SPECS)
            assert isinstance(tools[0], WasmsandShellTool)
            assert tools[0].invoke({"command": "echo $((6 * 7)) > /tmp/n"}) == "exit code 0\n(no output)"
        assert sb.commands.run("cat /tmp/n").stdout == "42\n"


def test_langchain_sync_call_on_a_given_async_sandbox() -> None:
    need("langchain_core")
    from wasmsand.integrations.langchain import WasmsandToolkit

    async def make() -> AsyncSandbox:
        return await AsyncSandbox.create()

    asb = asyncio.run(make())
    try:
        shell = WasmsandToolkit(sandbox=asb).get_tools()[0]
        assert shell.invoke({"command": "echo hi"}) == "exit code 0\n--- stdout ---\nhi"
    finally:
        asyncio.run(asb.kill())


def test_langchain_example_fixes_the_bug() -> None:
    need("langgraph")
    out = load_example("langchain_agent").main()
    assert "> run_shell {'command': 'python3 test_calc.py'}\n  exit code 1\n" in out
    assert "AssertionError: -1" in out
    assert "  exit code 0\n  --- stdout ---\n  tests pass\n" in out
    assert out.endswith("answer: add() subtracted; it adds now and test_calc.py passes.\n")


# ---- OpenAI Agents SDK ---------------------------------------------------------------------------


def test_openai_agents_runner_runs_a_sandbox_agent_in_wasmsand() -> None:
    need("agents")
    out = asyncio.run(load_example("openai_agents_sandbox").main())
    lines = out.splitlines()
    assert [line for line in lines if line.startswith(">")] == [
        "> exec_command",
        "> run_python",
        "> write_file",
        "> exec_command",
    ]
    assert "  region,amount" in lines and "  5 sales.csv" in lines  # the manifest's file
    assert "  exit code 0" in lines and "  east sold the most: 200" in lines
    assert "  wrote 24 bytes to /home/user/summary.txt" in lines
    assert out.endswith("answer: east sold the most (200); the summary is in summary.txt.\n")


def test_openai_agents_exec_reports_limits_and_refusals() -> None:
    need("agents")
    from agents import Runner
    from agents.items import ToolCallOutputItem
    from agents.run import RunConfig
    from agents.sandbox import SandboxAgent, SandboxRunConfig
    from agents.testing import ScriptedModel, assistant_message, function_call

    from wasmsand.integrations.openai_agents import WasmsandSandboxClient, WasmsandTools

    steps = [
        function_call("exec_command", {"cmd": "while :; do :; done", "yield_time_ms": 300}, call_id="c1"),
        function_call("exec_command", {"cmd": "seq 1 500000"}, call_id="c2"),
        function_call("read_file", {"path": "/nope"}, call_id="c3"),
        function_call("list_directory", "not json", call_id="c4"),
        assistant_message("done"),
    ]
    agent = SandboxAgent(name="t", model=ScriptedModel([[s] for s in steps]), capabilities=[WasmsandTools(), *_shell()])
    config = RunConfig(sandbox=SandboxRunConfig(client=WasmsandSandboxClient()), tracing_disabled=True)
    result = asyncio.run(Runner.run(agent, "go", run_config=config))
    outputs = [str(i.output) for i in result.new_items if isinstance(i, ToolCallOutputItem)]
    assert len(outputs) == 4
    assert "Process exited with code 124" in outputs[0] and "stopped at its time limit of 0.3 s" in outputs[0]
    assert "Process exited with code 0" in outputs[1] and "stdout was longer than the sandbox keeps" in outputs[1]
    assert outputs[2].startswith("No such file or directory: ") and "nope" in outputs[2]
    assert outputs[3].startswith("Invalid arguments: not JSON")


def _shell() -> list[Any]:
    from agents.sandbox.capabilities import Shell

    return [Shell()]


def test_openai_agents_session_persists_and_hydrates_its_workspace() -> None:
    need("agents")
    from agents.sandbox.snapshot import NoopSnapshotSpec

    from wasmsand.integrations.openai_agents import WasmsandSandboxClient

    async def go() -> tuple[list[str], str, str]:
        client = WasmsandSandboxClient()
        first = await client.create(snapshot=NoopSnapshotSpec())
        async with first:
            await first.write(Path("src/a.py"), io.BytesIO(b"print(1)\n"))
            await first.exec("ln -s a.py src/link.py && mkdir -p empty")
            archive = await first.persist_workspace()
        names = sorted(tarfile.open(fileobj=io.BytesIO(archive.read())).getnames())
        archive.seek(0)
        second = await client.create(snapshot=NoopSnapshotSpec())
        async with second:
            await second.hydrate_workspace(archive)
            copied = (await second.read(Path("src/a.py"))).read().decode()
            linked = (await second.exec("cat src/link.py")).stdout.decode()
            evil = io.BytesIO()
            with tarfile.open(fileobj=evil, mode="w") as tar:
                tar.addfile(tarfile.TarInfo("../escape"), io.BytesIO(b""))
            evil.seek(0)
            with pytest.raises(Exception, match="failed to write archive"):
                await second.hydrate_workspace(evil)
        return names, copied, linked

    names, copied, linked = asyncio.run(go())
    assert names == ["empty", "src", "src/a.py", "src/link.py"]
    assert (copied, linked) == ("print(1)\n", "print(1)\n")


def test_openai_agents_client_runs_sessions_in_a_given_sandbox() -> None:
    need("agents")
    from agents.sandbox.snapshot import NoopSnapshotSpec

    from wasmsand.integrations.openai_agents import WasmsandSandboxClient

    async def go() -> str:
        async with AsyncSandbox() as sb:
            session = await WasmsandSandboxClient(sb).create(snapshot=NoopSnapshotSpec())
            async with session:
                assert (await session.exec("pwd")).stdout == b"/home/user\n"
                await session.exec("echo kept > /home/user/k")
            return (await sb.commands.run("cat /home/user/k")).stdout  # still running

    assert asyncio.run(go()) == "kept\n"


def test_openai_agents_state_round_trips_through_the_client() -> None:
    need("agents")
    from wasmsand.integrations.openai_agents import (
        WasmsandSandboxClient,
        WasmsandSandboxClientOptions,
        WasmsandSandboxSessionState,
    )

    async def go() -> WasmsandSandboxSessionState:
        client = WasmsandSandboxClient()
        session = await client.create(options=WasmsandSandboxClientOptions(timeout_ms=5000))
        payload = json.loads(json.dumps(client.serialize_session_state(session.state)))
        state = client.deserialize_session_state(payload)
        assert isinstance(state, WasmsandSandboxSessionState)
        return state

    state = asyncio.run(go())
    assert state.options.timeout_ms == 5000 and state.manifest.root == "/home/user"


# ---- pydantic-ai --------------------------------------------------------------------------------


def tool_returns(result: Any) -> dict[str, str]:
    messages = need("pydantic_ai.messages")
    return {
        p.tool_call_id: str(p.content)
        for m in result.all_messages()
        for p in m.parts
        if isinstance(p, messages.ToolReturnPart)
    }


def scripted_pydantic_model(calls: list[tuple[str, dict[str, Any]]]) -> Any:
    messages = need("pydantic_ai.messages")
    function = need("pydantic_ai.models.function")

    def respond(history: list[Any], info: Any) -> Any:
        turn = sum(isinstance(m, messages.ModelResponse) for m in history)
        if turn < len(calls):
            name, args = calls[turn]
            return messages.ModelResponse(parts=[messages.ToolCallPart(name, args, tool_call_id=f"p{turn}")])
        return messages.ModelResponse(parts=[messages.TextPart("done")])

    return function.FunctionModel(respond)


def test_pydantic_ai_gives_each_run_a_sandbox_of_its_own() -> None:
    pai = need("pydantic_ai")
    from wasmsand.integrations.pydantic_ai import WasmsandToolset

    toolset = WasmsandToolset()
    write = [("write_file", {"path": "/tmp/run.txt", "content": "one"}), ("read_file", {"path": "/tmp/run.txt"})]
    first = pai.Agent(scripted_pydantic_model(write), toolsets=[toolset]).run_sync("go")
    assert tool_returns(first) == {"p0": "wrote 3 bytes to /tmp/run.txt", "p1": "one"}
    second = pai.Agent(scripted_pydantic_model([("read_file", {"path": "/tmp/run.txt"})]), toolsets=[toolset]).run_sync("go")
    assert tool_returns(second)["p0"].startswith("No such file or directory: ") and "run.txt" in tool_returns(second)["p0"]
    assert toolset._owned is None  # the toolset itself never made one: each run's copy did


def test_pydantic_ai_tools_use_the_sandbox_in_the_runs_deps() -> None:
    pai = need("pydantic_ai")
    from wasmsand.integrations.pydantic_ai import WasmsandDeps, WasmsandToolset

    calls = [
        ("run_shell", {"command": "echo $((2 ** 10)) > n.txt; cat n.txt", "timeout": 10}),
        ("run_python", {"code": "print(open('n.txt').read().strip() * 2)"}),
        ("list_directory", {}),
        ("run_shell", {"command": "sleep 5", "timeout": 0.2}),
    ]
    agent = pai.Agent(scripted_pydantic_model(calls), deps_type=WasmsandDeps, toolsets=[WasmsandToolset()])

    async def go() -> tuple[Any, str]:
        async with AsyncSandbox() as sb:
            r = await agent.run("go", deps=WasmsandDeps(sb))
            return r, await sb.files.read("/home/user/n.txt", format="text")

    result, kept = asyncio.run(go())
    replies = tool_returns(result)
    assert replies["p0"] == "exit code 0\n--- stdout ---\n1024"
    assert replies["p1"] == "exit code 0\n--- stdout ---\n10241024"
    assert "n.txt  5 bytes" in replies["p2"].splitlines()
    assert replies["p3"].startswith("exit code 124") and "time limit of 0.2 s" in replies["p3"]
    assert kept == "1024\n" and result.output == "done"


def test_pydantic_ai_example_runs() -> None:
    need("pydantic_ai")
    out = load_example("pydantic_ai_agent").main()
    assert "  app.log  32 bytes" in out
    assert "  logs/app.log:1" in out and "  logs/worker.log:0" in out
    assert "  logs/archive.gz is a binary file (2048 bytes), not shown as text. Look into it" in out
    assert "  archive.gz" in out
    assert out.endswith("answer: It logs app and worker events with a few errors; archive.gz is the biggest.\n")
