"""wasmsand: a WebAssembly sandbox for code that LLM agents write.

>>> from wasmsand import Sandbox
>>> with Sandbox() as sb:
...     sb.commands.run("echo hello | wc -c").stdout
'6\\n'
"""

from ._async import AsyncCommandHandle, AsyncCommands, AsyncFiles, AsyncSandbox, AsyncTools
from ._errors import (
    CommandExitError,
    InvalidParamsError,
    LimitExceededError,
    MergeConflictError,
    NotSupportedError,
    ProcessNotFoundError,
    SandboxDestroyedError,
    SandboxError,
    WaitTimeoutError,
)
from ._types import (
    Changes,
    CommandResult,
    ExportReport,
    FileChange,
    FileInfo,
    Limits,
    MergeConflict,
    MergeResult,
    Mount,
    MountInfo,
    Preview,
    ProcessInfo,
    Usage,
    WriteEntry,
)
from .sandbox import CommandHandle, Commands, Files, Sandbox, Tools

__all__ = [
    "Sandbox",
    "AsyncSandbox",
    "AsyncCommands",
    "AsyncCommandHandle",
    "AsyncFiles",
    "AsyncTools",
    "Commands",
    "CommandHandle",
    "Files",
    "Tools",
    "Changes",
    "CommandResult",
    "ExportReport",
    "FileChange",
    "FileInfo",
    "Limits",
    "MergeConflict",
    "MergeResult",
    "Mount",
    "MountInfo",
    "Preview",
    "ProcessInfo",
    "Usage",
    "WriteEntry",
    "SandboxError",
    "CommandExitError",
    "LimitExceededError",
    "SandboxDestroyedError",
    "InvalidParamsError",
    "MergeConflictError",
    "NotSupportedError",
    "ProcessNotFoundError",
    "WaitTimeoutError",
]
__version__ = "0.1.0"
