"""Mapping of server errors to Python exceptions."""

from __future__ import annotations

import errno as _errno
from typing import TYPE_CHECKING, Any, NoReturn

if TYPE_CHECKING:
    from ._types import CommandResult

__all__ = [
    "SandboxError",
    "CommandExitError",
    "ProcessNotFoundError",
    "WaitTimeoutError",
    "LimitExceededError",
    "SandboxDestroyedError",
    "InvalidParamsError",
    "MergeConflictError",
    "NotSupportedError",
    "raise_for_error",
]


class SandboxError(RuntimeError):
    """A request the sandbox refused; ``code`` is the JSON-RPC error code, ``data`` its
    details and ``kind`` its ``data.kind`` when it has one (``"stdin_closed"``,
    ``"not_running"``, ...)."""

    def __init__(self, message: str, code: int | None = None, data: Any = None) -> None:
        super().__init__(message)
        self.code = code
        self.data = data

    @property
    def kind(self) -> str | None:
        if isinstance(self.data, dict) and isinstance(self.data.get("kind"), str):
            return str(self.data["kind"])
        return None


class ProcessNotFoundError(SandboxError, LookupError):
    """No background process has that pid in this sandbox (or it was forgotten: only the 32
    most recently ended ones are kept)."""


class WaitTimeoutError(SandboxError, TimeoutError):
    """``wait(timeout=...)`` ran out before the background process ended; it goes on."""


class LimitExceededError(SandboxError):
    """Too many live background processes (``data["limit"]`` names the limit)."""


class SandboxDestroyedError(SandboxError):
    """The sandbox addressed is gone: destroyed, ended by ``kill``, or a fork id never issued
    (``kind`` is ``"sandbox_destroyed"`` or ``"unknown_sandbox"``)."""


class InvalidParamsError(SandboxError, ValueError):
    """A request's params were missing, ill-typed or refused (``kind`` is
    ``"invalid_params"`` or ``"unknown_snapshot"``); also a ``ValueError``."""


class NotSupportedError(SandboxError):
    """What the transport in use cannot do (``kind`` is ``"not_supported"``): the service
    transport has no host tools, portable state, per-sandbox limits, deterministic mode,
    atomic runs or truncation modes, and forks only on runtimes that checkpoint. The message
    names the feature and the transport; nothing was changed."""


class MergeConflictError(SandboxError):
    """``merge`` found paths both sandboxes changed since the fork; nothing was applied.
    ``conflicts`` lists them (``MergeConflict``: ``path``, ``ours``, ``theirs``)."""

    def __init__(self, message: str, code: int | None = None, data: Any = None) -> None:
        super().__init__(message, code, data)
        from ._types import MergeConflict

        raw = data.get("conflicts", []) if isinstance(data, dict) else []
        self.conflicts = [MergeConflict.from_wire(c) for c in raw if isinstance(c, dict)]


class CommandExitError(SandboxError):
    """A command run with ``check=True`` exited non-zero; ``result`` is its whole
    ``CommandResult`` (``exit_code``, ``stdout`` and ``stderr`` are repeated here)."""

    def __init__(self, result: "CommandResult") -> None:
        detail = result.stderr.strip().splitlines()[-1:] or [""]
        super().__init__(f"command exited with code {result.exit_code}: {detail[0]}".rstrip(": "))
        self.result = result
        self.exit_code = result.exit_code
        self.stdout = result.stdout
        self.stderr = result.stderr


_KINDS: dict[str, type[SandboxError]] = {
    "no_such_process": ProcessNotFoundError,
    "wait_timeout": WaitTimeoutError,
    "limit_exceeded": LimitExceededError,
    "sandbox_destroyed": SandboxDestroyedError,
    "unknown_sandbox": SandboxDestroyedError,
    "invalid_params": InvalidParamsError,
    "unknown_snapshot": InvalidParamsError,
    "merge_conflict": MergeConflictError,
    "not_supported": NotSupportedError,
}


_FS = {
    "ENOENT": FileNotFoundError,
    "EEXIST": FileExistsError,
    "EISDIR": IsADirectoryError,
    "ENOTDIR": NotADirectoryError,
    "EROFS": PermissionError,
    "EACCES": PermissionError,
}


def raise_for_error(error: dict[str, Any]) -> NoReturn:
    """Raises the exception matching a JSON-RPC ``error`` object, chosen by its
    ``data.kind`` (and ``data.errno`` for filesystem errors), never by its message."""
    code = error.get("code")
    number_code = code if isinstance(code, int) else None
    message = str(error.get("message", "sandbox error"))
    data = error.get("data")
    details: dict[str, Any] = data if isinstance(data, dict) else {}
    kind = details.get("kind")
    if isinstance(details.get("errno"), str):
        name = details["errno"]
        number = getattr(_errno, name, None)
        cls = _FS.get(name, OSError)
        if number is not None:
            raise cls(number, message, details.get("path"))
        raise cls(message)
    if isinstance(kind, str) and kind in _KINDS:
        if kind == "unknown_sandbox":
            message = f"sandbox has been destroyed ({message})"
        raise _KINDS[kind](message, number_code, data)
    if kind is None and code == -32602:
        raise InvalidParamsError(message, number_code, data)
    raise SandboxError(message, number_code, data)
