"""The tools every framework provider offers, and what the model reads back from them, written
once for all frameworks and for both faces of the SDK (``Sandbox`` and ``AsyncSandbox``).

A tool is an *operation*: a generator that yields the SDK calls it needs (``Call``) and returns
the text the model sees. ``drive`` runs one against a ``Sandbox`` and ``adrive`` against an
``AsyncSandbox``, so the same operation serves a framework's sync and async paths without a
copy, and the async one never blocks the event loop. Whatever goes wrong becomes a short
message that says what happened and what the model can do next (``describe_error``), never an
exception or a traceback: a tool call that failed is information for the model, not the end
of the agent's run.
"""

from __future__ import annotations

import asyncio
import errno
import inspect
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Callable, Generator, Iterable, Mapping

from .._async import AsyncSandbox
from .._errors import (
    InvalidParamsError,
    LimitExceededError,
    NotSupportedError,
    SandboxDestroyedError,
    SandboxError,
)
from .._types import CommandResult, FileInfo

if TYPE_CHECKING:
    from ..sandbox import Sandbox

__all__ = [
    "TOOL_SPECS",
    "Call",
    "Op",
    "Param",
    "ToolSettings",
    "ToolSpec",
    "adrive",
    "describe_error",
    "drive",
    "limit_notes",
    "operation",
    "present_file",
    "present_listing",
    "present_run",
    "run_notes",
    "run_on",
]


# Not frozen: the Agents SDK copies a capability's values attribute by attribute.
@dataclass
class ToolSettings:
    """How much of a result the model is shown, and how long a command may run.

    ``max_output_chars`` caps each of stdout and stderr in a tool's reply (the middle is
    left out, the start and end kept); ``max_read_bytes`` caps ``read_file``;
    ``max_list_entries`` caps ``list_directory``; ``max_timeout`` (seconds) is the longest
    ``timeout`` a model may ask for (a larger one is lowered, and the reply says so);
    ``timeout`` is a command's limit when the model names none (``None``: the sandbox's own,
    30 s unless the sandbox was made with another)."""

    max_output_chars: int = 12_000
    max_read_bytes: int = 64 * 1024
    max_list_entries: int = 500
    max_timeout: float = 300.0
    timeout: float | None = None


@dataclass(frozen=True)
class Param:
    """One argument of a tool, as the model is told about it."""

    name: str
    type: str
    description: str
    required: bool = False


@dataclass(frozen=True)
class ToolSpec:
    """A tool's name, description and arguments, from which each provider builds the
    framework's own tool object."""

    name: str
    description: str
    params: tuple[Param, ...]

    def json_schema(self) -> dict[str, Any]:
        """The arguments as a JSON schema object, the form every framework takes."""
        return {
            "type": "object",
            "properties": {p.name: {"type": p.type, "description": p.description} for p in self.params},
            "required": [p.name for p in self.params if p.required],
            "additionalProperties": False,
        }


_TIMEOUT = Param(
    "timeout",
    "number",
    "Seconds the command may run before it is stopped (optional; the sandbox's default otherwise).",
)

TOOL_SPECS: dict[str, ToolSpec] = {
    s.name: s
    for s in (
        ToolSpec(
            "run_shell",
            "Run a bash command line in the sandbox (an isolated WebAssembly machine with "
            "coreutils, grep, sed, awk, jq, git, python3 and more; no network). Files, the "
            "working directory and variables persist between calls. Returns the exit code, "
            "stdout and stderr.",
            (
                Param("command", "string", "The bash command line to run.", required=True),
                Param("cwd", "string", "Directory to run it in, for this call only (optional)."),
                _TIMEOUT,
            ),
        ),
        ToolSpec(
            "run_python",
            "Run a Python 3 program in the sandbox (CPython with numpy, pandas, scipy, "
            "scikit-learn and matplotlib; no network, no subprocesses). Print what you want to "
            "see. Returns the exit code, stdout and stderr (an exception's traceback is on stderr).",
            (Param("code", "string", "The program's source code.", required=True), _TIMEOUT),
        ),
        ToolSpec(
            "read_file",
            "Read a text file from the sandbox. Long files are cut at a size limit; the reply "
            "says how to read the rest.",
            (Param("path", "string", "Absolute, or relative to the shell's directory.", required=True),),
        ),
        ToolSpec(
            "write_file",
            "Write a text file in the sandbox, replacing it if it exists and creating missing "
            "directories. Writable places are /home/user (the home directory) and /tmp.",
            (
                Param("path", "string", "Absolute, or relative to the shell's directory.", required=True),
                Param("content", "string", "The whole new content of the file.", required=True),
            ),
        ),
        ToolSpec(
            "list_directory",
            "List a directory in the sandbox: each entry's name, type and size.",
            (Param("path", "string", "The directory (optional; the shell's current directory)."),),
        ),
    )
}


@dataclass(frozen=True)
class Call:
    """One SDK call an operation needs: ``target`` is an attribute path on the sandbox
    (``"commands.run"``). With ``head`` the call returns a stream of ``bytes`` and the
    operation gets its first ``head`` bytes at most, the stream then closed: a large file is
    never read whole to show the model its start."""

    target: str
    args: tuple[Any, ...] = ()
    kwargs: Mapping[str, Any] = field(default_factory=dict)
    head: int | None = None


Op = Generator[Call, Any, str]


# ---- the operations -----------------------------------------------------------------------------


def _run_kwargs(cwd: str | None, timeout: float | None, settings: ToolSettings) -> tuple[dict[str, Any], list[str]]:
    kwargs: dict[str, Any] = {}
    notes: list[str] = []
    if cwd:
        kwargs["cwd"] = cwd
    if timeout is None:
        timeout = settings.timeout
    if timeout is not None:
        if not isinstance(timeout, (int, float)) or isinstance(timeout, bool) or timeout <= 0:
            raise ValueError(f"timeout must be a positive number of seconds, not {timeout!r}")
        if timeout > settings.max_timeout:
            notes.append(f"the timeout asked for ({timeout:g} s) was lowered to the maximum, {settings.max_timeout:g} s.")
            timeout = settings.max_timeout
        kwargs["timeout"] = float(timeout)
    return kwargs, notes


def _text_arg(args: Mapping[str, Any], name: str, required: bool = True) -> str | None:
    value = args.get(name)
    if value is None and not required:
        return None
    if not isinstance(value, str) or (required and value == ""):
        raise ValueError(f"argument '{name}' must be a non-empty string")
    return value


def _shell(args: Mapping[str, Any], settings: ToolSettings) -> Op:
    command = _text_arg(args, "command")
    kwargs, notes = _run_kwargs(_text_arg(args, "cwd", required=False), args.get("timeout"), settings)
    result = yield Call("commands.run", (command,), kwargs)
    return present_run(result, settings, timeout=kwargs.get("timeout"), notes=notes)


def _python(args: Mapping[str, Any], settings: ToolSettings) -> Op:
    code = _text_arg(args, "code")
    # `cwd` is not offered to the model; a provider may set it (the workspace's root).
    kwargs, notes = _run_kwargs(_text_arg(args, "cwd", required=False), args.get("timeout"), settings)
    # The program goes on stdin, not in the command line: no quoting to get wrong, and no
    # command-length limit for a long program.
    result = yield Call("commands.run", ("python3 -",), {**kwargs, "stdin": code})
    return present_run(result, settings, timeout=kwargs.get("timeout"), notes=notes)


def _read_file(args: Mapping[str, Any], settings: ToolSettings) -> Op:
    path = _text_arg(args, "path")
    info: FileInfo = yield Call("files.stat", (path,))
    if info.type == "dir":
        return f"{path} is a directory, not a file: list it with list_directory."
    # One byte past the cap tells whether there is more; a symlink's own size says nothing
    # about its target's.
    head: bytes = yield Call("files.read", (path,), {"format": "stream"}, head=settings.max_read_bytes + 1)
    return present_file(str(path), head, info.size if info.type == "file" else None, settings)


def _write_file(args: Mapping[str, Any], settings: ToolSettings) -> Op:
    path = _text_arg(args, "path")
    content = args.get("content")
    if not isinstance(content, str):
        raise ValueError("argument 'content' must be a string")
    data = content.encode("utf-8")
    yield Call("files.write", (path, data))
    return f"wrote {len(data)} bytes to {path}"


def _list_directory(args: Mapping[str, Any], settings: ToolSettings) -> Op:
    path = _text_arg(args, "path", required=False) or "."
    entries: list[FileInfo] = yield Call("files.list", (path,))
    return present_listing(path, entries, settings)


_OPERATIONS: dict[str, Callable[[Mapping[str, Any], ToolSettings], Op]] = {
    "run_shell": _shell,
    "run_python": _python,
    "read_file": _read_file,
    "write_file": _write_file,
    "list_directory": _list_directory,
}


def operation(name: str, args: Mapping[str, Any], settings: ToolSettings | None = None) -> Op:
    """The operation of the tool ``name`` (a key of ``TOOL_SPECS``) with the model's
    arguments; arguments it refuses come back as a message when it is driven."""
    return _OPERATIONS[name](args, settings or ToolSettings())


# ---- driving an operation -----------------------------------------------------------------------


def _step(op: Op, value: Any = None, error: Exception | None = None) -> Call | str:
    """Resumes ``op`` with a call's value (or its exception); the next call, or the reply."""
    try:
        return op.throw(error) if error is not None else op.send(value)
    except StopIteration as stop:
        return str(stop.value)
    except Exception as e:  # noqa: BLE001 - any failure is a message for the model
        return describe_error(e)


def _target(sandbox: Any, call: Call) -> Callable[..., Any]:
    obj = sandbox
    for part in call.target.split("."):
        obj = getattr(obj, part)
    fn: Callable[..., Any] = obj
    return fn


def drive(sandbox: Sandbox, op: Op) -> str:
    """Runs an operation against a ``Sandbox``; the text for the model."""
    step = _step(op)
    while isinstance(step, Call):
        try:
            value = _target(sandbox, step)(*step.args, **step.kwargs)
            if step.head is not None:
                value = _head(value, step.head)
        except Exception as e:  # noqa: BLE001 - handed to the operation, then to the model
            step = _step(op, error=e)
        else:
            step = _step(op, value)
    return step


async def run_on(sandbox: Sandbox | AsyncSandbox, op: Op) -> str:
    """Runs an operation from the event loop on either face of the SDK: an ``AsyncSandbox``
    directly, a ``Sandbox`` on a worker thread (the loop never waits on the sandbox)."""
    if isinstance(sandbox, AsyncSandbox):
        return await adrive(sandbox, op)
    return await asyncio.to_thread(drive, sandbox, op)


async def adrive(sandbox: AsyncSandbox, op: Op) -> str:
    """Runs an operation against an ``AsyncSandbox``; the text for the model."""
    step = _step(op)
    while isinstance(step, Call):
        try:
            value = _target(sandbox, step)(*step.args, **step.kwargs)
            if inspect.isawaitable(value):
                value = await value
            if step.head is not None:
                value = await _ahead(value, step.head)
        except Exception as e:  # noqa: BLE001 - handed to the operation, then to the model
            step = _step(op, error=e)
        else:
            step = _step(op, value)
    return step


def _head(stream: Iterable[bytes], limit: int) -> bytes:
    buf = bytearray()
    it = iter(stream)
    try:
        for chunk in it:
            buf += chunk
            if len(buf) >= limit:
                break
    finally:
        close = getattr(it, "close", None)
        if close is not None:
            close()
    return bytes(buf[:limit])


async def _ahead(stream: Any, limit: int) -> bytes:
    buf = bytearray()
    try:
        async for chunk in stream:
            buf += chunk
            if len(buf) >= limit:
                break
    finally:
        aclose = getattr(stream, "aclose", None)
        if aclose is not None:
            await aclose()
    return bytes(buf[:limit])


# ---- what the model reads -----------------------------------------------------------------------


def _clip(text: str, limit: int) -> tuple[str, int]:
    """``text`` within ``limit`` characters, its start and end kept; and how many were cut."""
    if len(text) <= limit:
        return text, 0
    head = limit * 3 // 5
    tail = limit - head
    cut = len(text) - head - tail
    return f"{text[:head]}\n[... {cut} characters left out ...]\n{text[len(text) - tail:]}", cut


def _cut_note(stream: str, r: CommandResult, cut: int) -> str | None:
    spilled = (r.spilled or {}).get(stream)
    if spilled:
        return (
            f"{stream} was longer than the sandbox keeps; all of it is in {spilled}: search or page "
            f"that file (grep, head, tail, sed -n) rather than printing it whole."
        )
    if (r.truncated or {}).get(stream):
        return (
            f"{stream} was cut at the sandbox's output limit: send it to a file "
            f"(command > /tmp/out.txt) and read the parts you need with grep, head or tail."
        )
    if cut:
        return (
            f"{cut} characters in the middle of {stream} are not shown: send it to a file "
            f"(command > /tmp/out.txt) and read the parts you need with grep, head or tail."
        )
    return None


# What a limit named in `usage.limits_hit` means, and what to do about it. Output limits are
# left to the truncation notes, the time limit to the TIMEOUT note.
_LIMITS = {
    "memoryBytes": "a program ran out of memory (the sandbox caps each program's memory): work on smaller pieces of the data",
    "fsBytes": "the sandbox's disk space is full: delete files you no longer need",
    "fileCount": "the sandbox holds as many files as it may: delete files you no longer need",
    "commandBytes": "the command line is too long: write the script to a file and run the file",
    "shell": "the shell's own bounds (nesting depth, a value's size, a glob's matches): split the work into smaller steps",
    "toolCalls": "the host tool calls of one run are used up: make fewer calls per run",
    "netRequests": "the network requests of one run are used up: make fewer requests per run",
    "netBytes": "the network bytes of one run are used up: fetch less per run",
}


def limit_notes(r: CommandResult, timeout: float | None = None) -> list[str]:
    """Short, actionable sentences on the limits a run ran into (empty when none)."""
    notes: list[str] = []
    if r.error_class == "TIMEOUT":
        within = f" of {timeout:g} s" if timeout else ""
        notes.append(
            f"the command was stopped at its time limit{within} (exit code {r.exit_code}): make it do "
            f"less per call (less data, fewer iterations), or run it again with a longer timeout."
        )
    elif r.error_class == "CANCELLED":
        notes.append("the command was cancelled before it ended.")
    elif r.error_class == "CAPABILITY_DENIED":
        notes.append(
            "the command asked for something this sandbox does not provide (it has no host "
            "processes, devices or network unless given one): do it another way inside the sandbox."
        )
    hit = [_LIMITS[name] for name in r.usage.limits_hit if name in _LIMITS]
    if hit:
        notes.append("a sandbox limit was hit: " + "; ".join(hit) + ".")
    elif r.error_class == "LIMIT_EXCEEDED":
        notes.append("the command hit a sandbox limit and was stopped: split the work into smaller steps.")
    return notes


def run_notes(r: CommandResult, timeout: float | None = None, cuts: Mapping[str, int] | None = None) -> list[str]:
    """Every note on a run: streams cut (by the sandbox, or by ``cuts``: characters this
    reply left out of each stream), then the limits it ran into."""
    notes = [_cut_note(name, r, (cuts or {}).get(name, 0)) for name in ("stdout", "stderr")]
    return [n for n in notes if n] + limit_notes(r, timeout)


def present_run(
    r: CommandResult,
    settings: ToolSettings | None = None,
    *,
    timeout: float | None = None,
    notes: Iterable[str] = (),
) -> str:
    """A command's result as the model reads it: exit code, stdout, stderr, then notes."""
    settings = settings or ToolSettings()
    parts = [f"exit code {r.exit_code}"]
    cuts: dict[str, int] = {}
    for name, text in (("stdout", r.stdout), ("stderr", r.stderr)):
        shown, cuts[name] = _clip(text, settings.max_output_chars)
        if text:
            parts.append(f"--- {name} ---\n{shown.rstrip(chr(10))}")
    if not r.stdout and not r.stderr:
        parts.append("(no output)")
    parts.extend(f"note: {n}" for n in [*notes, *run_notes(r, timeout, cuts)])
    return "\n".join(parts)


def _looks_binary(data: bytes) -> bool:
    return b"\0" in data[:8192]


def _decode_head(data: bytes, complete: bool) -> str | None:
    """``data`` as UTF-8, or ``None`` when it is not text. A cut file may end inside a
    character; those last bytes are dropped rather than calling the file binary."""
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as e:
        if not complete and e.start >= len(data) - 3 and e.reason == "unexpected end of data":
            return data[: e.start].decode("utf-8", errors="strict")
        return None


def present_file(path: str, head: bytes, size: int | None, settings: ToolSettings | None = None) -> str:
    """The start of a file (``head``: at most one byte more than ``max_read_bytes``) as the
    model reads it, with a note when it is cut, empty or binary; ``size`` is the file's size
    when known."""
    settings = settings or ToolSettings()
    shown = head[: settings.max_read_bytes]
    complete = len(head) <= settings.max_read_bytes
    of_size = f"{size} bytes" if size is not None else "size unknown"
    if not head:
        return f"{path} is empty (0 bytes)."
    text = None if _looks_binary(shown) else _decode_head(shown, complete)
    if text is None:
        return (
            f"{path} is a binary file ({of_size}), not shown as text. Look into it with a "
            f"command instead, e.g. `head -c 256 {path} | od -c`, or with a Python program."
        )
    if complete:
        return text
    of_total = f" of {size}" if size is not None else ""
    return (
        f"{text}\n[showing the first {len(shown)}{of_total} bytes of {path}; read further with a "
        f"command, e.g. `tail -c +{len(shown) + 1} {path} | head -c {settings.max_read_bytes}`, "
        f"or search it with grep]"
    )


def present_listing(path: str, entries: list[FileInfo], settings: ToolSettings | None = None) -> str:
    """A directory's entries, one a line: ``name/`` for a directory, ``name -> (link)`` for a
    symlink, ``name  N bytes`` for a file."""
    settings = settings or ToolSettings()
    if not entries:
        return f"{path} is empty."
    lines = []
    for e in entries[: settings.max_list_entries]:
        if e.type == "dir":
            lines.append(f"{e.name}/")
        elif e.type == "symlink":
            lines.append(f"{e.name} -> (symlink)")
        else:
            lines.append(f"{e.name}  {e.size} bytes")
    rest = len(entries) - settings.max_list_entries
    if rest > 0:
        lines.append(f"[{rest} more entries not shown: narrow it down with a command, e.g. `ls {path} | grep PATTERN`]")
    return "\n".join(lines)


# What an SDK exception means for the model, most specific first: `{path}` is ": PATH" when
# the OSError names a path, `{message}` the exception's message, `{kind}` a SandboxError's kind.
_MESSAGES: tuple[tuple[type[Exception], str], ...] = (
    (FileNotFoundError, "No such file or directory{path}. Check the path; list_directory shows what exists."),
    (IsADirectoryError, "It is a directory{path}. Use list_directory for a directory."),
    (NotADirectoryError, "Not a directory{path}. A part of the path is a file."),
    (FileExistsError, "Already exists{path}. Choose another path or remove it first."),
    (PermissionError, "Read-only{path}. Only /home/user and /tmp are writable in this sandbox; write there instead."),
    (SandboxDestroyedError, "The sandbox has been shut down; nothing more can run in it. Finish with what you have."),
    (NotSupportedError, "This sandbox cannot do that: {message}. Do it another way."),
    (LimitExceededError, "A sandbox limit was reached: {message}. Wait for or end running work, then retry."),
    (InvalidParamsError, "The sandbox refused the arguments: {message}. Correct them and retry."),
    (SandboxError, "The sandbox refused the request{kind}: {message}."),
    (ValueError, "Invalid arguments: {message}. Correct them and retry."),
)


def describe_error(e: BaseException) -> str:
    """What a failed call means for the model: what happened, and what it can do next."""
    if isinstance(e, OSError) and e.errno == errno.ENOSPC:
        return "The sandbox's disk is full (its size or file-count limit): delete files you no longer need, then retry."
    path = f": {e.filename}" if isinstance(e, OSError) and e.filename else ""
    kind = f" ({e.kind})" if isinstance(e, SandboxError) and e.kind else ""
    for cls, template in _MESSAGES:
        if isinstance(e, cls):
            return template.format(path=path, message=e, kind=kind)
    if isinstance(e, OSError):
        return f"The sandbox refused it ({e.strerror or e}){path}."
    return f"The tool failed: {type(e).__name__}: {e}."
