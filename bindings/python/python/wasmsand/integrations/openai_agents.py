"""A sandbox client for the OpenAI Agents SDK's sandbox agents
(``pip install 'wasmsand[openai-agents]'``)::

    from agents import Runner
    from agents.run import RunConfig
    from agents.sandbox import SandboxAgent, SandboxRunConfig
    from agents.sandbox.capabilities import Capabilities
    from wasmsand.integrations.openai_agents import WasmsandSandboxClient, WasmsandTools

    agent = SandboxAgent(name="Coder", instructions="...",
                         capabilities=[*Capabilities.default(), WasmsandTools()])
    run_config = RunConfig(sandbox=SandboxRunConfig(client=WasmsandSandboxClient()))
    result = await Runner.run(agent, "Make the tests pass.", run_config=run_config)

``WasmsandSandboxClient`` implements the SDK's ``BaseSandboxClient``: the runner makes a
session per run (a new sandbox, ended with the run) or resumes one, and the SDK's own tools
(``exec_command``, ``apply_patch``, ``view_image``) run in it. ``WasmsandTools`` is a
capability that adds ``run_python``, ``read_file``, ``write_file`` and ``list_directory``
(docs/integrations.md). ``WasmsandSandboxClient(sandbox=sb)`` runs every session in a sandbox
the caller made and ends.

The workspace root is ``/home/user`` unless the manifest sets one: the SDK's default,
``/workspace``, is read-only in a wasmsand sandbox.
"""

from __future__ import annotations

import io
import json
import posixpath
import shlex
import stat
import tarfile
import uuid
import weakref
from pathlib import Path, PurePosixPath
from typing import Any, Literal

try:
    from agents.sandbox.capabilities import Capability  # type: ignore[import-not-found, unused-ignore]
    from agents.sandbox.errors import (  # type: ignore[import-not-found, unused-ignore]
        WorkspaceArchiveReadError,
        WorkspaceArchiveWriteError,
        WorkspaceReadNotFoundError,
    )
    from agents.sandbox.files import EntryKind, FileEntry  # type: ignore[import-not-found, unused-ignore]
    from agents.sandbox.manifest import Manifest  # type: ignore[import-not-found, unused-ignore]
    from agents.sandbox.session.base_sandbox_session import (  # type: ignore[import-not-found, unused-ignore]
        BaseSandboxSession,
    )
    from agents.sandbox.session.sandbox_client import (  # type: ignore[import-not-found, unused-ignore]
        BaseSandboxClient,
        BaseSandboxClientOptions,
    )
    from agents.sandbox.session.sandbox_session_state import (  # type: ignore[import-not-found, unused-ignore]
        SandboxSessionState,
    )
    from agents.sandbox.snapshot import resolve_snapshot  # type: ignore[import-not-found, unused-ignore]
    from agents.sandbox.types import ExecResult, Permissions  # type: ignore[import-not-found, unused-ignore]
    from agents.tool import FunctionTool  # type: ignore[import-not-found, unused-ignore]
    from pydantic import Field  # type: ignore[import-not-found, unused-ignore]
except ImportError as e:  # pragma: no cover - the message is the point
    raise ImportError(
        "wasmsand.integrations.openai_agents needs openai-agents: pip install 'wasmsand[openai-agents]'"
    ) from e

from .._async import AsyncSandbox
from .._errors import SandboxError
from .._types import Limits
from .tools import TOOL_SPECS, ToolSettings, adrive, describe_error, operation, run_notes

__all__ = [
    "WasmsandSandboxClient",
    "WasmsandSandboxClientOptions",
    "WasmsandSandboxSession",
    "WasmsandSandboxSessionState",
    "WasmsandTools",
]

# The root every wasmsand sandbox can write (with /tmp).
DEFAULT_ROOT = "/home/user"

# Exit status of an exec the sandbox refused outright (no command ran); the message is on
# stderr. 126 is the shell's "cannot execute".
_REFUSED = 126


class WasmsandSandboxClientOptions(BaseSandboxClientOptions):  # type: ignore[misc, unused-ignore]
    """How a session's sandbox is made: ``Sandbox(...)``'s arguments of the same names
    (``limits`` with snake_case keys, ``network`` an egress allowlist; docs/python.md)."""

    type: Literal["wasmsand"] = "wasmsand"
    transport: str | None = None
    timeout_ms: int | None = None
    fs_limit_bytes: int | None = None
    limits: dict[str, int] | None = None
    network: dict[str, Any] | None = None

    def sandbox_kwargs(self) -> dict[str, Any]:
        kw: dict[str, Any] = {
            "transport": self.transport,
            "timeout_ms": self.timeout_ms,
            "limits": Limits.coerce(self.limits),
            "network": self.network,
        }
        if self.fs_limit_bytes is not None:
            kw["fs_limit_bytes"] = self.fs_limit_bytes
        return kw


class WasmsandSandboxSessionState(SandboxSessionState):  # type: ignore[misc, unused-ignore]
    """What a session needs to be resumed: the SDK's state and the options of its sandbox."""

    type: Literal["wasmsand"] = "wasmsand"
    options: WasmsandSandboxClientOptions = Field(default_factory=WasmsandSandboxClientOptions)


# The live sessions by id, for the capability's tools: the SDK binds capabilities to its
# wrapper of a session, whose `state` is the one public way back to the session it wraps.
_LIVE: weakref.WeakValueDictionary[uuid.UUID, WasmsandSandboxSession] = weakref.WeakValueDictionary()


class WasmsandSandboxSession(BaseSandboxSession):  # type: ignore[misc, unused-ignore]
    """One session: a wasmsand ``AsyncSandbox``, made when the session starts (or the one
    the client was given) and ended when it shuts down (unless given)."""

    state: WasmsandSandboxSessionState

    def __init__(self, state: WasmsandSandboxSessionState, sandbox: AsyncSandbox | None = None) -> None:
        self.state = state
        self._given = sandbox
        self._sandbox: AsyncSandbox | None = None
        self._env: dict[str, str] | None = None
        _LIVE[state.session_id] = self

    @property
    def sandbox(self) -> AsyncSandbox:
        """The session's sandbox (``RuntimeError`` before the session started)."""
        if self._sandbox is None:
            raise RuntimeError("the wasmsand session has not started: no sandbox yet")
        return self._sandbox

    async def _ensure_backend_started(self) -> None:
        if self._sandbox is None:
            self._sandbox = self._given or await AsyncSandbox.create(**self.state.options.sandbox_kwargs())
        if self._env is None:
            self._env = dict(await self.state.manifest.environment.resolve()) or {}

    async def _shutdown_backend(self) -> None:
        sandbox, self._sandbox = self._sandbox, None
        if sandbox is not None and sandbox is not self._given:
            await sandbox.kill()

    async def running(self) -> bool:
        return self._sandbox is not None

    def _should_compute_snapshot_fingerprint_on_persist(self) -> bool:
        # The fingerprint is a shell script over the workspace; persisting reads the files
        # through the SDK anyway, and a resume without one restores the snapshot.
        return False

    async def _exec_internal(self, *command: str | Path, timeout: float | None = None) -> ExecResult:
        argv = [str(c) for c in command]
        line = argv[0] if len(argv) == 1 else shlex.join(argv)
        try:
            r = await self.sandbox.commands.run(line, timeout=timeout, envs=self._env or None)
        except (SandboxError, OSError, ValueError) as e:
            return ExecResult(stdout=b"", stderr=describe_error(e).encode(), exit_code=_REFUSED)
        notes = "".join(f"note: {n}\n" for n in run_notes(r, timeout))
        stderr = r.stderr if not notes or not r.stderr or r.stderr.endswith("\n") else r.stderr + "\n"
        return ExecResult(stdout=r.stdout.encode(), stderr=(stderr + notes).encode(), exit_code=r.exit_code)

    def _sandbox_path(self, path: Path | str, for_write: bool = False) -> str:
        return str(self.normalize_path(path, for_write=for_write))

    async def read(self, path: Path, *, user: Any = None) -> io.IOBase:
        where = self._sandbox_path(path)
        try:
            return io.BytesIO(await self.sandbox.files.read(where))
        except FileNotFoundError as e:
            raise WorkspaceReadNotFoundError(path=Path(where), cause=e) from e
        except (SandboxError, OSError) as e:
            raise WorkspaceArchiveReadError(path=Path(where), cause=e) from e

    async def write(self, path: Path, data: io.IOBase, *, user: Any = None) -> None:
        where = self._sandbox_path(path, for_write=True)
        payload = data.read()
        if isinstance(payload, str):
            payload = payload.encode("utf-8")
        try:
            await self.sandbox.files.write(where, bytes(payload))
        except (SandboxError, OSError) as e:
            raise WorkspaceArchiveWriteError(path=Path(where), cause=e) from e

    async def mkdir(self, path: Path | str, *, parents: bool = False, user: Any = None) -> None:
        where = self._sandbox_path(path, for_write=True)
        try:
            await self.sandbox.files.make_dir(where)
        except (SandboxError, OSError) as e:
            raise WorkspaceArchiveWriteError(path=Path(where), cause=e) from e

    async def rm(self, path: Path | str, *, recursive: bool = False, user: Any = None) -> None:
        where = self._sandbox_path(path, for_write=True)
        try:
            await self.sandbox.files.rm(where, recursive=recursive)
        except FileNotFoundError:
            if not recursive:
                raise
        except (SandboxError, OSError) as e:
            raise WorkspaceArchiveWriteError(path=Path(where), cause=e) from e

    async def mv(self, source: Path | str, destination: Path | str, *, user: Any = None) -> None:
        src, dst = self._sandbox_path(source, for_write=True), self._sandbox_path(destination, for_write=True)
        try:
            await self.sandbox.files.rename(src, dst)
        except (SandboxError, OSError) as e:
            raise WorkspaceArchiveWriteError(path=Path(dst), cause=e) from e

    async def ls(self, path: Path | str, *, user: Any = None) -> list[FileEntry]:
        where = self._sandbox_path(path)
        try:
            entries = await self.sandbox.files.list(where)
        except (SandboxError, OSError) as e:
            raise WorkspaceArchiveReadError(path=Path(where), cause=e) from e
        kinds = {"dir": EntryKind.DIRECTORY, "file": EntryKind.FILE, "symlink": EntryKind.SYMLINK}
        return [
            FileEntry(
                path=posixpath.join(where, e.name),
                # The sandbox has one user and keeps no modes the SDK could use.
                permissions=Permissions.from_mode((0o755 | stat.S_IFDIR) if e.type == "dir" else 0o644),
                owner="user",
                group="user",
                size=e.size,
                kind=kinds.get(e.type, EntryKind.OTHER),
            )
            for e in entries
        ]

    async def persist_workspace(self) -> io.IOBase:
        """The workspace as a tar stream of workspace-relative members (what the SDK's
        snapshots store), read through the SDK's file calls."""
        root = str(self._workspace_root_path())
        skip = {PurePosixPath(p.as_posix()) for p in self._persist_workspace_skip_relpaths()}
        buf = io.BytesIO()
        try:
            with tarfile.open(fileobj=buf, mode="w") as tar:
                await self._add_tree(tar, root, PurePosixPath(), skip)
        except (SandboxError, OSError) as e:
            raise WorkspaceArchiveReadError(path=Path(root), cause=e) from e
        buf.seek(0)
        return buf

    async def _add_tree(self, tar: tarfile.TarFile, root: str, rel: PurePosixPath, skip: set[PurePosixPath]) -> None:
        for e in await self.sandbox.files.list(posixpath.join(root, str(rel)) if rel.parts else root):
            child = rel / e.name
            if child in skip:
                continue
            info = tarfile.TarInfo(child.as_posix())
            full = posixpath.join(root, child.as_posix())
            if e.type == "dir":
                info.type, info.mode = tarfile.DIRTYPE, 0o755
                tar.addfile(info)
                await self._add_tree(tar, root, child, skip)
            elif e.type == "symlink":
                r = await self.sandbox.commands.run(f"readlink -- {shlex.quote(full)}")
                info.type, info.linkname = tarfile.SYMTYPE, r.stdout.rstrip("\n")
                tar.addfile(info)
            else:
                data = await self.sandbox.files.read(full)
                info.size, info.mode = len(data), 0o644
                tar.addfile(info, io.BytesIO(data))

    async def hydrate_workspace(self, data: io.IOBase) -> None:
        """Unpacks a ``persist_workspace`` stream under the workspace root. Members that
        would land outside it (absolute, ``..``, links pointing out) are refused whole."""
        root = str(self._workspace_root_path())
        raw = data.read()
        payload = raw.encode("utf-8") if isinstance(raw, str) else bytes(raw)
        try:
            with tarfile.open(fileobj=io.BytesIO(payload), mode="r:*") as tar:
                members = tar.getmembers()
                for m in members:
                    _check_member(m)
                await self.sandbox.files.make_dir(root)
                for m in members:
                    await self._extract(tar, m, posixpath.join(root, m.name))
        except (tarfile.TarError, ValueError, SandboxError, OSError) as e:
            raise WorkspaceArchiveWriteError(path=Path(root), cause=e) from e

    async def _extract(self, tar: tarfile.TarFile, m: tarfile.TarInfo, target: str) -> None:
        if m.isdir():
            await self.sandbox.files.make_dir(target)
        elif m.issym():
            await self.sandbox.commands.run(f"ln -sfn -- {shlex.quote(m.linkname)} {shlex.quote(target)}")
        elif m.isfile():
            f = tar.extractfile(m)
            await self.sandbox.files.write(target, f.read() if f is not None else b"")


def _check_member(m: tarfile.TarInfo) -> None:
    path = PurePosixPath(m.name)
    if path.is_absolute() or ".." in path.parts:
        raise ValueError(f"archive member outside the workspace: {m.name}")
    if m.issym() and (PurePosixPath(m.linkname).is_absolute() or ".." in (path.parent / m.linkname).parts):
        raise ValueError(f"archive link pointing outside the workspace: {m.name} -> {m.linkname}")
    if not (m.isdir() or m.isfile() or m.issym()):
        raise ValueError(f"archive member of an unsupported type: {m.name}")


def _with_root(manifest: Manifest | None) -> Manifest:
    if manifest is None:
        return Manifest(root=DEFAULT_ROOT)
    if "root" not in manifest.model_fields_set:
        return manifest.model_copy(update={"root": DEFAULT_ROOT})
    return manifest


class WasmsandSandboxClient(BaseSandboxClient[WasmsandSandboxClientOptions]):  # type: ignore[misc, unused-ignore]
    """Makes and resumes wasmsand sessions for ``SandboxRunConfig(client=...)``; options
    (``WasmsandSandboxClientOptions``) are optional. With ``sandbox``, every session runs in
    that ``AsyncSandbox`` (started, and ended by the caller) instead of a new one."""

    backend_id = "wasmsand"
    supports_default_options = True

    def __init__(
        self,
        sandbox: AsyncSandbox | None = None,
        *,
        instrumentation: Any = None,
        dependencies: Any = None,
    ) -> None:
        self._sandbox = sandbox
        self._instrumentation = instrumentation
        self._dependencies = dependencies

    async def create(
        self,
        *,
        snapshot: Any = None,
        manifest: Manifest | None = None,
        options: WasmsandSandboxClientOptions | None = None,
    ) -> Any:
        manifest = self._validate_manifest_for_create(_with_root(manifest))
        session_id = uuid.uuid4()
        state = WasmsandSandboxSessionState(
            session_id=session_id,
            manifest=manifest,
            snapshot=resolve_snapshot(snapshot, str(session_id)),
            options=options or WasmsandSandboxClientOptions(),
        )
        inner = WasmsandSandboxSession(state, sandbox=self._sandbox)
        return self._wrap_session(inner, instrumentation=self._instrumentation)

    async def delete(self, session: Any) -> Any:
        # The runner shuts a session down before deleting it; a caller that only deletes
        # still ends the sandbox (shutting down twice is harmless).
        await session.shutdown()
        return session

    async def resume(self, state: SandboxSessionState) -> Any:
        if not isinstance(state, WasmsandSandboxSessionState):
            raise TypeError("WasmsandSandboxClient.resume expects a WasmsandSandboxSessionState")
        # A sandbox lives in one process: a resumed session gets a new one, which the SDK
        # fills from the state's snapshot when it starts.
        inner = WasmsandSandboxSession(state, sandbox=self._sandbox)
        return self._wrap_session(inner, instrumentation=self._instrumentation)

    def deserialize_session_state(self, payload: dict[str, object]) -> SandboxSessionState:
        return self._deserialize_session_state_payload(payload, WasmsandSandboxSessionState)


def _in_root(name: str, args: dict[str, Any], root: str) -> dict[str, Any]:
    """The model's arguments with paths relative to the workspace root, as the SDK's own
    tools take them (the sandbox's shell would take them from its own directory)."""
    args = dict(args)
    path = args.get("path")
    if isinstance(path, str) and path and not path.startswith("/"):
        args["path"] = posixpath.join(root, path)
    elif path is None and name == "list_directory":
        args["path"] = root
    if name == "run_python":
        args.setdefault("cwd", root)
    return args


class WasmsandTools(Capability):  # type: ignore[misc, unused-ignore]
    """A capability for a ``SandboxAgent`` on a wasmsand session: ``run_python``,
    ``read_file``, ``write_file`` and ``list_directory`` (the SDK's ``Shell`` capability
    already runs commands), with the replies every wasmsand provider gives
    (``settings``: ``ToolSettings``)."""

    type: Literal["wasmsand_tools"] = "wasmsand_tools"
    settings: ToolSettings = Field(default_factory=ToolSettings, exclude=True)

    def tools(self) -> list[Any]:
        if self.session is None:
            raise ValueError("WasmsandTools is not bound to a sandbox session")
        session, settings = self.session, self.settings

        def invoker(name: str) -> Any:
            async def invoke(_ctx: Any, raw: str) -> str:
                live = _LIVE.get(session.state.session_id)
                if live is None:
                    return "These tools need a wasmsand sandbox session (WasmsandSandboxClient)."
                try:
                    args = json.loads(raw or "{}")
                except json.JSONDecodeError as e:
                    return f"Invalid arguments: not JSON ({e.msg}). Send a JSON object."
                if not isinstance(args, dict):
                    return "Invalid arguments: send a JSON object."
                return await adrive(live.sandbox, operation(name, _in_root(name, args, live.state.manifest.root), settings))

            return invoke

        return [
            FunctionTool(
                name=spec.name,
                description=spec.description,
                params_json_schema=spec.json_schema(),
                on_invoke_tool=invoker(spec.name),
                strict_json_schema=False,
            )
            for spec in TOOL_SPECS.values()
            if spec.name != "run_shell"
        ]
