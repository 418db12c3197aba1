"""A LangGraph agent with wasmsand's LangChain tools: a model fixes a bug in a sandbox, running
the tests until they pass.

    pip install './bindings/python[langchain]'
    python examples/langchain_agent.py [--transport rpc]

Without OPENAI_API_KEY the model is scripted (it replays the tool calls a model would make),
so the example runs offline; with it, it is langchain-openai's ChatOpenAI (`pip install
langchain-openai`). The graph is LangGraph's tool loop: the model's tool calls go to a
`ToolNode` running the toolkit's tools, their replies go back to the model, until it answers
without a tool call.
"""

from __future__ import annotations

import argparse
import os
from typing import Any

from langchain_core.language_models.fake_chat_models import GenericFakeChatModel
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage
from langgraph.graph import START, MessagesState, StateGraph
from langgraph.prebuilt import ToolNode, tools_condition

from wasmsand import Sandbox
from wasmsand.integrations.langchain import WasmsandToolkit

TASK = "test_calc.py fails. Find out why and fix calc.py."
CALC = "def add(a, b):\n    return a - b\n"
TESTS = "from calc import add\nassert add(2, 3) == 5, add(2, 3)\nprint('tests pass')\n"


class ScriptedChatModel(GenericFakeChatModel):
    """langchain-core's fake chat model, with the tool binding an agent asks of any model
    (the script already says which tools it calls)."""

    def bind_tools(self, tools: Any, **kwargs: Any) -> ScriptedChatModel:
        return self


def call(name: str, n: int, **args: Any) -> AIMessage:
    return AIMessage(content="", tool_calls=[{"name": name, "args": args, "id": f"call_{n}", "type": "tool_call"}])


def scripted_model() -> ScriptedChatModel:
    return ScriptedChatModel(
        messages=iter(
            [
                call("run_shell", 1, command="python3 test_calc.py"),
                call("read_file", 2, path="calc.py"),
                call("write_file", 3, path="calc.py", content=CALC.replace("a - b", "a + b")),
                call("run_shell", 4, command="python3 test_calc.py", timeout=30),
                AIMessage(content="add() subtracted; it adds now and test_calc.py passes."),
            ]
        )
    )


def real_model() -> Any:
    from langchain_openai import ChatOpenAI  # type: ignore[import-not-found]

    return ChatOpenAI(model=os.environ.get("OPENAI_MODEL", "gpt-5"))


def build_graph(model: Any, tools: list[Any]) -> Any:
    bound = model.bind_tools(tools)

    def agent(state: MessagesState) -> dict[str, list[BaseMessage]]:
        return {"messages": [bound.invoke(state["messages"])]}

    graph = StateGraph(MessagesState)
    graph.add_node("agent", agent)
    graph.add_node("tools", ToolNode(tools))
    graph.add_edge(START, "agent")
    graph.add_conditional_edges("agent", tools_condition)
    graph.add_edge("tools", "agent")
    return graph.compile()


def transcript(messages: list[BaseMessage]) -> str:
    out = []
    for m in messages:
        if isinstance(m, AIMessage):
            out += [f"> {c['name']} {c['args']}" for c in m.tool_calls] or [f"answer: {m.content}"]
        elif isinstance(m, ToolMessage):
            out += [f"  {line}" for line in str(m.content).splitlines()]
    return "\n".join(out) + "\n"


def main(transport: str | None = None) -> str:
    model = real_model() if os.environ.get("OPENAI_API_KEY") else scripted_model()
    with Sandbox(transport=transport) as sb:
        sb.files.write("/home/user/calc.py", CALC)
        sb.files.write("/home/user/test_calc.py", TESTS)
        # The toolkit runs its tools in this sandbox and leaves it to this `with` block.
        toolkit = WasmsandToolkit(sandbox=sb)
        state = build_graph(model, toolkit.get_tools()).invoke({"messages": [HumanMessage(TASK)]})
    return transcript(state["messages"])


if __name__ == "__main__":
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--transport", choices=["inprocess", "rpc"], default=None)
    print(main(p.parse_args().transport), end="")
