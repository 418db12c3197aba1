"""LangChain tools on a wasmsand sandbox, for LangChain agents and LangGraph graphs
(``pip install 'wasmsand[langchain]'``)::

    from wasmsand.integrations.langchain import WasmsandToolkit

    with WasmsandToolkit() as toolkit:               # one sandbox, made on the first call
        tools = toolkit.get_tools()                  # run_shell, run_python, read_file, ...
        model = chat_model.bind_tools(tools)         # any tool-calling chat model
        graph = ...                                  # e.g. a ToolNode loop (docs/integrations.md)

Each tool is a ``BaseTool`` with a sync ``_run`` (on a ``Sandbox``) and an async ``_arun`` (on
an ``AsyncSandbox``, so the event loop never waits on the sandbox). The toolkit owns the
sandbox it makes and ends it on ``close()`` / ``aclose()`` or at the end of its ``with``
block; one given to it (``WasmsandToolkit(sandbox=sb)``) stays the caller's.
"""

from __future__ import annotations

import asyncio
import threading
from typing import TYPE_CHECKING, Any, ClassVar, Coroutine, TypeVar

try:
    from langchain_core.tools import BaseTool, BaseToolkit  # type: ignore[import-not-found, unused-ignore]
    from pydantic import ConfigDict, Field, PrivateAttr, model_validator  # type: ignore[import-not-found, unused-ignore]
except ImportError as e:  # pragma: no cover - the message is the point
    raise ImportError(
        "wasmsand.integrations.langchain needs langchain-core: pip install 'wasmsand[langchain]'"
    ) from e

from .._async import AsyncSandbox
from ..sandbox import Sandbox
from .tools import TOOL_SPECS, ToolSettings, adrive, drive, operation, run_on

if TYPE_CHECKING:
    from types import TracebackType

T = TypeVar("T")

__all__ = [
    "WasmsandListDirectoryTool",
    "WasmsandPythonTool",
    "WasmsandReadFileTool",
    "WasmsandShellTool",
    "WasmsandTool",
    "WasmsandToolkit",
    "WasmsandWriteFileTool",
]


def _blocking(coro: Coroutine[Any, Any, T]) -> T:
    """Runs a coroutine to its end from sync code: an ``AsyncSandbox`` used by a sync tool
    call. In a thread of its own when this thread already runs an event loop."""
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return asyncio.run(coro)
    out: list[T] = []
    err: list[BaseException] = []

    def target() -> None:
        try:
            out.append(asyncio.run(coro))
        except BaseException as e:  # noqa: BLE001 - re-raised in the caller's thread
            err.append(e)

    t = threading.Thread(target=target, name="wasmsand-langchain")
    t.start()
    t.join()
    if err:
        raise err[0]
    return out[0]


class WasmsandToolkit(BaseToolkit):  # type: ignore[misc, unused-ignore]
    """The wasmsand tools on one sandbox.

    ``sandbox``: a ``Sandbox`` or a started ``AsyncSandbox`` to use (never ended here);
    without one, the toolkit makes one on the first tool call with ``sandbox_options``
    (``Sandbox(...)``'s arguments) and ends it on ``close()``/``aclose()``. ``settings``
    caps what the model is shown (``ToolSettings``)."""

    model_config = ConfigDict(arbitrary_types_allowed=True)

    sandbox: Sandbox | AsyncSandbox | None = None
    sandbox_options: dict[str, Any] = Field(default_factory=dict)
    settings: ToolSettings = Field(default_factory=ToolSettings)

    _owned: Sandbox | AsyncSandbox | None = PrivateAttr(default=None)
    _lock: threading.Lock = PrivateAttr(default_factory=threading.Lock)
    _alock: asyncio.Lock | None = PrivateAttr(default=None)

    def get_tools(self) -> list[Any]:
        """``run_shell``, ``run_python``, ``read_file``, ``write_file``, ``list_directory``."""
        return [cls.model_validate({"toolkit": self}) for cls in _TOOL_CLASSES]

    def _current(self) -> Sandbox | AsyncSandbox | None:
        return self.sandbox if self.sandbox is not None else self._owned

    def run(self, name: str, args: dict[str, Any]) -> str:
        """Runs the tool ``name`` with the model's ``args``; the text for the model."""
        with self._lock:
            sb = self._current()
            if sb is None:
                sb = self._owned = Sandbox(**self.sandbox_options)
        op = operation(name, args, self.settings)
        if isinstance(sb, AsyncSandbox):
            return _blocking(adrive(sb, op))
        return drive(sb, op)

    async def arun(self, name: str, args: dict[str, Any]) -> str:
        """``run`` for the event loop: the sandbox's calls never block it."""
        if self._alock is None:
            self._alock = asyncio.Lock()
        async with self._alock:
            sb = self._current()
            if sb is None:
                sb = self._owned = await AsyncSandbox.create(**self.sandbox_options)
        return await run_on(sb, operation(name, args, self.settings))

    def close(self) -> None:
        """Ends the sandbox the toolkit made (a given one is left alone)."""
        owned, self._owned = self._owned, None
        if isinstance(owned, AsyncSandbox):
            _blocking(owned.kill())
        elif owned is not None:
            owned.kill()

    async def aclose(self) -> None:
        """``close`` for the event loop."""
        owned, self._owned = self._owned, None
        if isinstance(owned, AsyncSandbox):
            await owned.kill()
        elif owned is not None:
            await asyncio.to_thread(owned.kill)

    def __enter__(self) -> WasmsandToolkit:
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None) -> None:
        self.close()

    async def __aenter__(self) -> WasmsandToolkit:
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self.aclose()


class WasmsandTool(BaseTool):  # type: ignore[misc, unused-ignore]
    """A wasmsand tool: ``spec`` names its entry of ``TOOL_SPECS`` (name, description and
    arguments, the same in every framework), ``toolkit`` holds the sandbox it runs on."""

    spec: ClassVar[str] = ""
    toolkit: WasmsandToolkit

    @model_validator(mode="before")
    @classmethod
    def _from_spec(cls, data: Any) -> Any:
        if isinstance(data, dict) and cls.spec:
            s = TOOL_SPECS[cls.spec]
            data = {"name": s.name, "description": s.description, "args_schema": s.json_schema(), **data}
        return data

    def _run(self, **kwargs: Any) -> str:
        return self.toolkit.run(self.name, kwargs)

    async def _arun(self, **kwargs: Any) -> str:
        return await self.toolkit.arun(self.name, kwargs)


class WasmsandShellTool(WasmsandTool):
    """``run_shell``: a bash command line, with ``cwd`` and ``timeout`` (seconds)."""

    spec: ClassVar[str] = "run_shell"


class WasmsandPythonTool(WasmsandTool):
    """``run_python``: a Python program, with ``timeout`` (seconds)."""

    spec: ClassVar[str] = "run_python"


class WasmsandReadFileTool(WasmsandTool):
    """``read_file``: a text file, cut at ``ToolSettings.max_read_bytes``."""

    spec: ClassVar[str] = "read_file"


class WasmsandWriteFileTool(WasmsandTool):
    """``write_file``: a text file, replaced whole."""

    spec: ClassVar[str] = "write_file"


class WasmsandListDirectoryTool(WasmsandTool):
    """``list_directory``: a directory's entries."""

    spec: ClassVar[str] = "list_directory"


_TOOL_CLASSES: tuple[type[WasmsandTool], ...] = (
    WasmsandShellTool,
    WasmsandPythonTool,
    WasmsandReadFileTool,
    WasmsandWriteFileTool,
    WasmsandListDirectoryTool,
)
