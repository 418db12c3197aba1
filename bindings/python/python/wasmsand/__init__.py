"""wasmsand: a WebAssembly sandbox for code that LLM agents write.

>>> from wasmsand import Sandbox
>>> with Sandbox() as sb:
...     sb.commands.run("echo hello | wc -c").stdout
'6\\n'
"""

from ._errors import SandboxError
from ._types import CommandResult, FileInfo, Limits, Usage
from .sandbox import Commands, Files, Sandbox, Tools

__all__ = [
    "Sandbox",
    "Commands",
    "Files",
    "Tools",
    "CommandResult",
    "FileInfo",
    "Limits",
    "Usage",
    "SandboxError",
]
__version__ = "0.1.0"
