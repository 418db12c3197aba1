"""Mapping of server errors to Python exceptions."""

from __future__ import annotations

import errno as _errno
from typing import Any

__all__ = ["SandboxError", "raise_for_error"]


class SandboxError(RuntimeError):
    """A request the sandbox refused; ``code`` is the JSON-RPC error code, ``data`` its
    details."""

    def __init__(self, message: str, code: int | None = None, data: Any = None) -> None:
        super().__init__(message)
        self.code = code
        self.data = data


_FS = {
    "ENOENT": FileNotFoundError,
    "EEXIST": FileExistsError,
    "EISDIR": IsADirectoryError,
    "ENOTDIR": NotADirectoryError,
    "EROFS": PermissionError,
    "EACCES": PermissionError,
}


def raise_for_error(error: dict[str, Any]) -> None:
    """Raises the exception matching a JSON-RPC ``error`` object."""
    code = error.get("code")
    message = str(error.get("message", "sandbox error"))
    data = error.get("data")
    if isinstance(data, dict) and isinstance(data.get("errno"), str):
        name = data["errno"]
        number = getattr(_errno, name, None)
        path = data.get("path")
        cls = _FS.get(name, OSError)
        if number is not None:
            raise cls(number, message, path)
        raise cls(message)
    if code == -32602 and "Unknown sandboxId" in message:
        raise RuntimeError(f"sandbox has been destroyed ({message})")
    if code == -32602:
        raise ValueError(message)
    raise SandboxError(message, code, data)
