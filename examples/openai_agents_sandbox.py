"""An OpenAI Agents SDK sandbox agent whose workspace is a wasmsand sandbox: the SDK's own
shell tool (`exec_command`) and wasmsand's `run_python`, `write_file`, ... run in it.

    pip install './bindings/python[openai-agents]'
    python examples/openai_agents_sandbox.py

Without OPENAI_API_KEY the model is the SDK's `ScriptedModel` (it replays the tool calls a
model would make), so the example runs offline; with it, the agent uses OpenAI's model
(`$OPENAI_MODEL`, default gpt-5). The runner makes a new sandbox for the run from
`WasmsandSandboxClient` and ends it when the run ends; the manifest puts the input file in
the workspace (/home/user) before the model's first turn.
"""

from __future__ import annotations

import asyncio
import os
from typing import Any

from agents import Runner
from agents.items import ToolCallItem, ToolCallOutputItem
from agents.run import RunConfig
from agents.sandbox import Manifest, SandboxAgent, SandboxRunConfig
from agents.sandbox.capabilities import Capabilities
from agents.sandbox.entries import File
from agents.testing import ScriptedModel, assistant_message, function_call

from wasmsand.integrations.openai_agents import WasmsandSandboxClient, WasmsandTools

TASK = "sales.csv has one sale per line. Which region sold the most? Save a summary to summary.txt."
SALES = "region,amount\nnorth,120\nsouth,75\nnorth,30\neast,200\n"
PROGRAM = """\
import csv, collections
totals = collections.Counter()
for row in csv.DictReader(open("sales.csv")):
    totals[row["region"]] += int(row["amount"])
best, amount = totals.most_common(1)[0]
print(f"{best} sold the most: {amount}")
"""


def scripted_model() -> ScriptedModel:
    steps = [
        function_call("exec_command", {"cmd": "head -n 3 sales.csv; wc -l sales.csv"}, call_id="c1"),
        function_call("run_python", {"code": PROGRAM}, call_id="c2"),
        function_call("write_file", {"path": "summary.txt", "content": "east sold the most: 200\n"}, call_id="c3"),
        function_call("exec_command", {"cmd": "cat summary.txt"}, call_id="c4"),
        assistant_message("east sold the most (200); the summary is in summary.txt."),
    ]
    return ScriptedModel([[step] for step in steps])


def agent(model: Any) -> SandboxAgent[Any]:
    return SandboxAgent(
        name="Analyst",
        instructions="Answer from the files in your workspace; check your results with the tools.",
        model=model,
        default_manifest=Manifest(entries={"sales.csv": File(content=SALES.encode())}),
        capabilities=[*Capabilities.default(), WasmsandTools()],
    )


async def main() -> str:
    model = os.environ.get("OPENAI_MODEL", "gpt-5") if os.environ.get("OPENAI_API_KEY") else scripted_model()
    run_config = RunConfig(sandbox=SandboxRunConfig(client=WasmsandSandboxClient()), tracing_disabled=True)
    result = await Runner.run(agent(model), TASK, run_config=run_config)
    out = []
    for item in result.new_items:
        if isinstance(item, ToolCallItem):
            out.append(f"> {getattr(item.raw_item, 'name', '?')}")
        elif isinstance(item, ToolCallOutputItem):
            out += [f"  {line}" for line in str(item.output).splitlines()]
    out.append(f"answer: {result.final_output}")
    return "\n".join(out) + "\n"


if __name__ == "__main__":
    print(asyncio.run(main()), end="")
