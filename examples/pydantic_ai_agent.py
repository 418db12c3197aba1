"""A pydantic-ai agent with wasmsand's toolset: the model explores a small project in a
sandbox of its own and answers from what the tools showed it.

    pip install './bindings/python[pydantic-ai]'
    python examples/pydantic_ai_agent.py

Without OPENAI_API_KEY the model is pydantic-ai's `FunctionModel` running a script (the tool
calls a model would make, one per turn), so the example runs offline; with it, the agent uses
`openai:$OPENAI_MODEL` (default gpt-5; `pip install 'pydantic-ai-slim[openai]'`). The agent
gets its files through its dependencies: `WasmsandDeps` carries the run's sandbox, which this
program fills first and ends afterwards.
"""

from __future__ import annotations

import os
from typing import Any

from pydantic_ai import Agent
from pydantic_ai.messages import ModelMessage, ModelResponse, TextPart, ToolCallPart, ToolReturnPart
from pydantic_ai.models.function import AgentInfo, FunctionModel

from wasmsand import Sandbox
from wasmsand.integrations.pydantic_ai import WasmsandDeps, WasmsandToolset

QUESTION = "What does this project log, and how big is its biggest log file?"

SCRIPT: list[tuple[str, dict[str, Any]]] = [
    ("list_directory", {"path": "logs"}),
    ("run_shell", {"command": "grep -c ERROR logs/*.log", "cwd": "/home/user"}),
    ("read_file", {"path": "logs/archive.gz"}),
    ("run_python", {"code": "import os\nprint(max(os.listdir('logs'), key=lambda n: os.path.getsize('logs/' + n)))"}),
]


def scripted(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
    """One tool call per turn from SCRIPT, then the answer."""
    turn = sum(isinstance(m, ModelResponse) for m in messages)
    if turn < len(SCRIPT):
        name, args = SCRIPT[turn]
        return ModelResponse(parts=[ToolCallPart(name, args, tool_call_id=f"call_{turn}")])
    return ModelResponse(parts=[TextPart("It logs app and worker events with a few errors; archive.gz is the biggest.")])


def main(transport: str | None = None) -> str:
    model: Any = FunctionModel(scripted)
    if os.environ.get("OPENAI_API_KEY"):
        model = f"openai:{os.environ.get('OPENAI_MODEL', 'gpt-5')}"
    agent = Agent(model, deps_type=WasmsandDeps, toolsets=[WasmsandToolset()])
    with Sandbox(transport=transport) as sb:
        sb.files.write("/home/user/logs/app.log", "INFO start\nERROR disk\nINFO stop\n")
        sb.files.write("/home/user/logs/worker.log", "INFO job 1\nINFO job 2\n")
        sb.files.write("/home/user/logs/archive.gz", bytes(range(256)) * 8)
        result = agent.run_sync(QUESTION, deps=WasmsandDeps(sb))
    lines = [line for m in result.all_messages() for p in m.parts for line in shown(p)]
    return "\n".join([*lines, f"answer: {result.output}"]) + "\n"


def shown(part: Any) -> list[str]:
    """A tool call and a tool's reply as the transcript shows them."""
    if isinstance(part, ToolCallPart):
        return [f"> {part.tool_name} {part.args}"]
    if isinstance(part, ToolReturnPart):
        return [f"  {line}" for line in str(part.content).splitlines()]
    return []


if __name__ == "__main__":
    print(main(), end="")
