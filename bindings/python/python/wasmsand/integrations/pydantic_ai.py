"""A pydantic-ai toolset on a wasmsand sandbox (``pip install 'wasmsand[pydantic-ai]'``)::

    from pydantic_ai import Agent
    from wasmsand.integrations.pydantic_ai import WasmsandToolset

    agent = Agent("openai:gpt-5", toolsets=[WasmsandToolset()])
    result = agent.run_sync("How many lines has /etc/passwd?")   # a new sandbox for this run

Each run of the agent gets a sandbox of its own, made at its first tool call and ended when
the run ends (the toolset's ``for_run`` gives each run a fresh copy of itself). Two other
shapes share one sandbox instead: ``WasmsandToolset(sandbox=sb)``, for every run of the agent
(the sandbox stays the caller's), or the agent's dependencies: with
``Agent(deps_type=WasmsandDeps)`` and ``agent.run(..., deps=WasmsandDeps(sb))`` the tools use
that run's ``deps.sandbox`` (any deps object with a ``sandbox`` attribute holding a
``Sandbox`` or ``AsyncSandbox`` works the same).
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from typing import Any, Callable, Coroutine, Mapping

try:
    from pydantic_ai import RunContext  # type: ignore[import-not-found, unused-ignore]
    from pydantic_ai.tools import Tool  # type: ignore[import-not-found, unused-ignore]
    from pydantic_ai.toolsets import FunctionToolset  # type: ignore[import-not-found, unused-ignore]
except ImportError as e:  # pragma: no cover - the message is the point
    raise ImportError(
        "wasmsand.integrations.pydantic_ai needs pydantic-ai: pip install 'wasmsand[pydantic-ai]'"
    ) from e

from .._async import AsyncSandbox
from ..sandbox import Sandbox
from .tools import TOOL_SPECS, ToolSettings, operation, run_on

__all__ = ["WasmsandDeps", "WasmsandToolset"]


@dataclass
class WasmsandDeps:
    """Agent dependencies that carry the sandbox of a run: ``Agent(deps_type=WasmsandDeps)``,
    then ``agent.run(prompt, deps=WasmsandDeps(sandbox))``. The caller makes and ends the
    sandbox; ``WasmsandToolset``'s tools run in it."""

    sandbox: Sandbox | AsyncSandbox


class WasmsandToolset(FunctionToolset):  # type: ignore[misc, unused-ignore]
    """``run_shell``, ``run_python``, ``read_file``, ``write_file`` and ``list_directory`` on
    a wasmsand sandbox: the run's ``deps.sandbox`` when its dependencies carry one, else
    ``sandbox`` when given (never ended here), else one made per run with
    ``sandbox_options`` (``Sandbox(...)``'s arguments) and ended with the run. ``settings``
    caps what the model is shown (``ToolSettings``)."""

    def __init__(
        self,
        *,
        sandbox: Sandbox | AsyncSandbox | None = None,
        sandbox_options: Mapping[str, Any] | None = None,
        settings: ToolSettings | None = None,
        id: str | None = "wasmsand",
    ) -> None:
        super().__init__(id=id)
        self._given = sandbox
        self._options = dict(sandbox_options or {})
        self._settings = settings or ToolSettings()
        self._owned: AsyncSandbox | None = None
        self._entered = 0
        self._lock = asyncio.Lock()
        for spec in TOOL_SPECS.values():
            self.add_tool(
                Tool.from_schema(
                    self._tool(spec.name),
                    name=spec.name,
                    description=spec.description,
                    json_schema=spec.json_schema(),
                    takes_ctx=True,
                )
            )

    def _tool(self, name: str) -> Callable[..., Coroutine[Any, Any, str]]:
        async def call(ctx: RunContext[Any], **args: Any) -> str:
            sandbox = await self._sandbox_for(ctx)
            return await run_on(sandbox, operation(name, args, self._settings))

        call.__name__ = name
        return call

    async def _sandbox_for(self, ctx: RunContext[Any]) -> Sandbox | AsyncSandbox:
        from_deps = getattr(ctx.deps, "sandbox", None)
        if isinstance(from_deps, (Sandbox, AsyncSandbox)):
            return from_deps
        if self._given is not None:
            return self._given
        async with self._lock:
            if self._owned is None:
                self._owned = await AsyncSandbox.create(**self._options)
            return self._owned

    async def for_run(self, ctx: RunContext[Any]) -> WasmsandToolset:
        """A fresh copy per run, so each run that needs a sandbox of its own gets one."""
        if self._given is not None or isinstance(getattr(ctx.deps, "sandbox", None), (Sandbox, AsyncSandbox)):
            return self
        return WasmsandToolset(sandbox_options=self._options, settings=self._settings, id=self.id)

    async def __aenter__(self) -> WasmsandToolset:
        self._entered += 1
        return self

    async def __aexit__(self, *args: Any) -> bool | None:
        self._entered -= 1
        if self._entered == 0 and self._owned is not None:
            owned, self._owned = self._owned, None
            await owned.kill()
        return None
