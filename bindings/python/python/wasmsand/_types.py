"""Plain result and option types of the wasmsand SDK."""

from __future__ import annotations

from dataclasses import dataclass, field, fields
from typing import Any, Mapping

__all__ = [
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
]


@dataclass
class Usage:
    """The resource receipt of one run.

    ``cpu_us`` is the guest programs' CPU time in microseconds; ``peak_memory_bytes`` the
    largest linear memory any program of the run had; ``processes`` counts programs,
    subshells and pipeline stages; ``bytes_written``/``files_created``/``files_deleted`` what
    the run did to the filesystem; ``fs_bytes``/``fs_files`` what it holds afterwards;
    ``limits_hit`` names the limits the run ran into (``"timeoutMs"``, ``"memoryBytes"``,
    ``"stdoutBytes"``, ``"stderrBytes"``, ``"fsBytes"``, ``"fileCount"``, ``"toolCalls"``,
    ``"commandBytes"``, ``"shell"``, ``"netRequests"``, ``"netBytes"``); ``net_requests`` and
    ``net_bytes`` are the requests the run sent through its network policy and the bytes it
    received.
    """

    wall_ms: int = 0
    cpu_us: int = 0
    peak_memory_bytes: int = 0
    processes: int = 0
    tool_calls: int = 0
    bytes_written: int = 0
    files_created: int = 0
    files_deleted: int = 0
    fs_bytes: int = 0
    fs_files: int = 0
    net_requests: int = 0
    net_bytes: int = 0
    limits_hit: list[str] = field(default_factory=list)

    @classmethod
    def from_wire(cls, w: Mapping[str, Any] | None) -> "Usage":
        w = w or {}
        return cls(
            wall_ms=int(w.get("wallMs", 0)),
            cpu_us=int(w.get("cpuUs", 0)),
            peak_memory_bytes=int(w.get("peakMemoryBytes", 0)),
            processes=int(w.get("processes", 0)),
            tool_calls=int(w.get("toolCalls", w.get("hostCalls", 0))),
            bytes_written=int(w.get("bytesWritten", 0)),
            files_created=int(w.get("filesCreated", 0)),
            files_deleted=int(w.get("filesDeleted", 0)),
            fs_bytes=int(w.get("fsBytes", 0)),
            fs_files=int(w.get("fsFiles", 0)),
            net_requests=int(w.get("netRequests", 0)),
            net_bytes=int(w.get("netBytes", 0)),
            limits_hit=[str(x) for x in w.get("limitsHit", [])],
        )


@dataclass
class CommandResult:
    """What one command line produced.

    ``truncated`` is ``None`` unless an output stream was cut at its limit, then
    ``{"stdout": bool, "stderr": bool}``; ``error_class`` is ``None`` or one of
    ``"TIMEOUT"``, ``"CANCELLED"``, ``"CAPABILITY_DENIED"``, ``"LIMIT_EXCEEDED"``.
    ``usage`` is the run's resource receipt; ``rolled_back`` is ``True`` when an atomic run
    failed and the sandbox was put back as it was before it. ``spilled`` is ``None`` unless
    a stream passed its cap in head + tail mode, then ``{"stdout": path}`` and/or
    ``{"stderr": path}``: the sandbox file holding the whole stream. ``preview`` is set on
    a run made with ``preview=True``: the fork it ran in and what it changed, for
    ``Sandbox.commit`` or ``Sandbox.discard``.
    """

    stdout: str
    stderr: str
    exit_code: int
    execution_time_ms: float
    truncated: dict[str, bool] | None = None
    error_class: str | None = None
    usage: Usage = field(default_factory=Usage)
    rolled_back: bool = False
    spilled: dict[str, str] | None = None
    preview: Preview | None = None

    @classmethod
    def from_wire(cls, r: Mapping[str, Any]) -> "CommandResult":
        pv = r.get("preview")
        return cls(
            stdout=str(r["stdout"]),
            stderr=str(r["stderr"]),
            exit_code=int(r["exitCode"]),
            execution_time_ms=float(r["executionTimeMs"]),
            truncated=r.get("truncated"),
            error_class=r.get("errorClass"),
            usage=Usage.from_wire(r.get("usage")),
            rolled_back=bool(r.get("rolledBack", False)),
            spilled=r.get("spilled"),
            preview=None if pv is None else Preview.from_wire(pv),
        )


@dataclass
class ProcessInfo:
    """A background process as ``commands.list()`` reports it: ``exit_code`` is ``None``
    while it runs; ``started_at_ms`` is wall-clock milliseconds since the Unix epoch."""

    pid: int
    command: str
    running: bool
    exit_code: int | None
    started_at_ms: int

    @classmethod
    def from_wire(cls, w: Mapping[str, Any]) -> "ProcessInfo":
        code = w.get("exitCode")
        return cls(
            pid=int(w["pid"]),
            command=str(w.get("command", "")),
            running=bool(w.get("running", False)),
            exit_code=None if code is None else int(code),
            started_at_ms=int(w.get("startedAtMs", 0)),
        )


@dataclass
class WriteEntry:
    """One file of ``files.write_files``: ``data`` is text (written as UTF-8), bytes or a
    binary file object."""

    path: str
    data: Any


@dataclass
class FileInfo:
    """An entry of ``files.list`` or the answer of ``files.stat``; ``type`` is ``"file"``,
    ``"dir"`` or ``"symlink"``."""

    name: str
    type: str
    size: int


def _wire(name: str) -> str:
    """The camelCase wire name of a snake_case limit (``stdout_bytes`` -> ``stdoutBytes``).
    tests/python/test_registries.py checks the ``Limits`` fields against the crate's limits
    registry, wire names included."""
    head, *rest = name.split("_")
    return head + "".join(part.capitalize() for part in rest)


@dataclass
class Limits:
    """Resource limits; a field left ``None`` keeps its default (stdout/stderr 1 MiB each,
    command 64 KiB, 10 000 files, 512 MiB per program, 500 tool calls per run, 8 live
    background processes, 1024 open descriptors per program and 4096 for a sandbox's programs
    together, 256 processes alive at once)."""

    stdout_bytes: int | None = None
    stderr_bytes: int | None = None
    command_bytes: int | None = None
    file_count: int | None = None
    memory_bytes: int | None = None
    tool_calls: int | None = None
    rpc_bytes: int | None = None
    fs_bytes: int | None = None
    timeout_ms: int | None = None
    spill_bytes: int | None = None
    background_processes: int | None = None
    open_files: int | None = None
    session_open_files: int | None = None
    pids: int | None = None

    @classmethod
    def coerce(cls, value: "Limits | Mapping[str, Any] | None") -> "Limits":
        """A ``Limits`` from ``None``, a ``Limits`` or a dict with snake_case keys."""
        if value is None:
            return cls()
        if isinstance(value, Limits):
            return value
        if not isinstance(value, Mapping):
            raise TypeError(f"limits must be a dict or a Limits, not {type(value).__name__}")
        known = {f.name for f in fields(cls)}
        unknown = sorted(set(value) - known)
        if unknown:
            raise ValueError(f"unknown limit(s): {', '.join(unknown)}; known: {', '.join(sorted(known))}")
        return cls(**dict(value))

    def to_wire(self) -> dict[str, int]:
        """The camelCase form the server takes, with only the fields that are set."""
        out: dict[str, int] = {}
        for f in fields(self):
            v = getattr(self, f.name)
            if v is None:
                continue
            if isinstance(v, bool) or not isinstance(v, int) or v < 0:
                raise ValueError(f"limit {f.name} must be a non-negative integer, not {v!r}")
            out[_wire(f.name)] = v
        return out


@dataclass
class MergeConflict:
    """A path both sandboxes changed differently since the fork: ``ours`` is what the
    sandbox merged into did, ``theirs`` what the fork did (``"added"``, ``"changed"`` or
    ``"deleted"``)."""

    path: str
    ours: str
    theirs: str

    @classmethod
    def from_wire(cls, w: Mapping[str, Any]) -> "MergeConflict":
        return cls(path=str(w["path"]), ours=str(w["ours"]), theirs=str(w["theirs"]))


@dataclass
class MergeResult:
    """What ``Sandbox.merge`` applied: ``applied`` maps each path set to the fork's state to
    what that did here (``"added"``, ``"changed"``, ``"deleted"``; a tree added or deleted
    whole is one path), in path order; ``env`` names the variables set or unset (with
    ``env=True``); ``cwd`` is the new working directory (with ``cwd=True``)."""

    applied: dict[str, str] = field(default_factory=dict)
    env: list[str] = field(default_factory=list)
    cwd: str | None = None

    @classmethod
    def from_wire(cls, w: Mapping[str, Any]) -> "MergeResult":
        cwd = w.get("cwd")
        return cls(
            applied={str(a["path"]): str(a["change"]) for a in w.get("applied", [])},
            env=[str(x) for x in w.get("env", [])],
            cwd=None if cwd is None else str(cwd),
        )


@dataclass
class Mount:
    """A host folder to mount into a sandbox (``Sandbox(mounts=[...])``, ``sb.mount(...)``):
    ``host`` is the host directory, ``path`` where it appears (relative: from
    ``/home/user``). The sandbox reads it lazily under its own copy-on-write layer and never
    writes it. ``read_only`` refuses every change there; ``gitignore`` hides what the
    folder's ``.gitignore`` files ignore; ``exclude`` hides more (gitignore patterns);
    ``allow_secrets`` shows entries of the secret denylist (``.env*``, ``*.pem``, ``id_*``,
    ``.aws/``, ``.ssh/``, ``.netrc``, ``.git-credentials``, ``.git/config``'s credentials),
    each named as the list spells it; ``max_host_bytes`` caps the bytes read from the host.
    A string ``"HOST:PATH[:ro]"`` is accepted where a ``Mount`` is."""

    host: str
    path: str
    read_only: bool = False
    gitignore: bool = False
    exclude: tuple[str, ...] = ()
    allow_secrets: tuple[str, ...] = ()
    max_host_bytes: int | None = None

    @classmethod
    def coerce(cls, m: "Mount | str | Mapping[str, Any]") -> "Mount":
        if isinstance(m, Mount):
            return m
        if isinstance(m, str):
            spec, read_only = m, False
            for suffix, ro in ((":ro", True), (":rw", False)):
                if spec.endswith(suffix):
                    spec, read_only = spec[: -len(suffix)], ro
                    break
            host, sep, path = spec.rpartition(":")
            if not sep or not host or not path:
                raise ValueError(f"mount {m!r}: expected 'HOST:PATH[:ro]'")
            return cls(host=host, path=path, read_only=read_only)
        if isinstance(m, Mapping):
            return cls(**dict(m))
        raise TypeError(f"a mount is a Mount, a 'HOST:PATH[:ro]' string or a dict, not {type(m).__name__}")

    def to_wire(self) -> dict[str, Any]:
        import os

        w: dict[str, Any] = {"host": os.fspath(self.host), "path": self.path}
        if self.read_only:
            w["readOnly"] = True
        if self.gitignore:
            w["gitignore"] = True
        if self.exclude:
            w["exclude"] = list(self.exclude)
        if self.allow_secrets:
            w["allowSecrets"] = list(self.allow_secrets)
        if self.max_host_bytes is not None:
            w["maxHostBytes"] = int(self.max_host_bytes)
        return w


@dataclass
class MountInfo:
    """A mounted host folder: where it is (``path``), the canonical ``host`` directory,
    ``read_only``, and what has been read from the host so far (``host_bytes_read``,
    ``files_read``, ``dirs_listed``; a folder is read only where the sandbox looks)."""

    path: str
    host: str
    read_only: bool
    host_bytes_read: int = 0
    max_host_bytes: int | None = None
    dirs_listed: int = 0
    files_read: int = 0

    @classmethod
    def from_wire(cls, w: Mapping[str, Any]) -> "MountInfo":
        cap = w.get("maxHostBytes")
        return cls(
            path=str(w["path"]),
            host=str(w["host"]),
            read_only=bool(w.get("readOnly", False)),
            host_bytes_read=int(w.get("hostBytesRead", 0)),
            max_host_bytes=None if cap is None else int(cap),
            dirs_listed=int(w.get("dirsListed", 0)),
            files_read=int(w.get("filesRead", 0)),
        )


@dataclass
class FileChange:
    """One changed path of ``Changes``: ``path`` (relative to ``Changes.root``), ``status``
    (``"added"``, ``"modified"``, ``"deleted"``), ``kind`` (``"file"``, ``"symlink"``,
    ``"dir"``, ``"device"``), ``old_mode``/``new_mode`` (permission bits, ``None`` on the side
    where the path does not exist) and ``binary`` (the patch carries it as a git binary
    patch)."""

    path: str
    status: str
    kind: str
    old_mode: int | None = None
    new_mode: int | None = None
    binary: bool = False

    @classmethod
    def from_wire(cls, w: Mapping[str, Any]) -> "FileChange":
        def mode(v: Any) -> int | None:
            return None if v is None else int(str(v), 8)

        return cls(
            path=str(w["path"]),
            status=str(w["status"]),
            kind=str(w["kind"]),
            old_mode=mode(w.get("oldMode")),
            new_mode=mode(w.get("newMode")),
            binary=bool(w.get("binary", False)),
        )


@dataclass
class Changes:
    """What ``Sandbox.changes`` found: ``root`` (the sandbox directory the paths are relative
    to), ``files`` (every changed path, parents first) and ``patch`` (the changes to files and
    symlinks in ``git diff --binary`` format: ``git apply`` in a copy of the original folder
    reproduces the sandbox's). Empty when nothing changed."""

    root: str
    files: list[FileChange] = field(default_factory=list)
    patch: str = ""

    def __bool__(self) -> bool:
        return bool(self.files)

    @classmethod
    def from_wire(cls, w: Mapping[str, Any]) -> "Changes":
        return cls(
            root=str(w["root"]),
            files=[FileChange.from_wire(f) for f in w.get("files", [])],
            patch=str(w.get("patch", "")),
        )


@dataclass
class ExportReport:
    """What ``Sandbox.export_changes`` did to the host directory: files and symlinks
    ``written``, paths ``removed``, directories made (``dirs``), relative paths."""

    written: list[str] = field(default_factory=list)
    removed: list[str] = field(default_factory=list)
    dirs: list[str] = field(default_factory=list)

    @classmethod
    def from_wire(cls, w: Mapping[str, Any]) -> "ExportReport":
        return cls(
            written=[str(x) for x in w.get("written", [])],
            removed=[str(x) for x in w.get("removed", [])],
            dirs=[str(x) for x in w.get("dirs", [])],
        )


@dataclass
class Preview:
    """A run made in a fork (``commands.run(..., preview=True)``, ``Sandbox.best_of``): the
    fork's ``sandbox_id`` and what the run ``changes``d against the sandbox at its start.
    ``Sandbox.commit`` brings it in, ``Sandbox.discard`` drops it."""

    sandbox_id: str
    changes: Changes

    @classmethod
    def from_wire(cls, w: Mapping[str, Any]) -> "Preview":
        return cls(sandbox_id=str(w["sandboxId"]), changes=Changes.from_wire(w["changes"]))
