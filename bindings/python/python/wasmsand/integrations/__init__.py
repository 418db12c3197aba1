"""Providers for Python agent frameworks, one module per framework:

- ``wasmsand.integrations.openai_agents``: a sandbox client for the OpenAI Agents SDK's
  ``SandboxAgent`` (``pip install 'wasmsand[openai-agents]'``);
- ``wasmsand.integrations.langchain``: LangChain tools and a toolkit, usable in LangGraph
  (``pip install 'wasmsand[langchain]'``);
- ``wasmsand.integrations.pydantic_ai``: a pydantic-ai toolset and an agent dependency
  (``pip install 'wasmsand[pydantic-ai]'``).

Each imports its framework when it is imported itself; ``import wasmsand`` and this package
import none. What the tools do and what the model reads back is defined once, in
``wasmsand.integrations.tools`` (docs/integrations.md).
"""

from .tools import TOOL_SPECS, ToolSettings, ToolSpec

__all__ = ["TOOL_SPECS", "ToolSettings", "ToolSpec"]
