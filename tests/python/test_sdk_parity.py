"""The SDK's two faces stay one API: every public method and attribute of ``Sandbox`` and the
objects reached from it has a twin of the same name, parameters and kind on ``AsyncSandbox``
(a coroutine where the sync one blocks), and the other way round. The classes are found by
walking the faces' annotations, so a class or method added to one face only fails here. The
async methods that came last (``truncation``, ``import_state``, ``poll``, ...) are exercised on
every transport, and so is the one rule for timeouts."""

from __future__ import annotations

import ast
import asyncio
import inspect
import textwrap
import threading
import time
import typing
from typing import Any, Iterator

import pytest

import wasmsand
from wasmsand import AsyncCommandHandle, AsyncSandbox, NotSupportedError, Sandbox, WaitTimeoutError

# The one name the faces spell differently: `Sandbox(...)` is `await AsyncSandbox.create(...)`
# (a constructor cannot be awaited); the two take the same parameters.
ASYNC_CONSTRUCTOR = "create"
# The async protocol that stands for each sync one.
PROTOCOLS = {"__iter__": "__aiter__", "__enter__": "__aenter__", "__exit__": "__aexit__"}


@pytest.fixture
def sb(transport: str) -> Iterator[Sandbox]:
    with Sandbox(transport=transport) as s:
        yield s


# ---- the walk ----


def _self_assigned(cls: type) -> set[str]:
    """Public attributes a method of ``cls`` sets on ``self``: what ``dir(cls)`` misses."""
    tree = ast.parse(textwrap.dedent(inspect.getsource(cls)))
    names = set()
    for node in ast.walk(tree):
        targets: list[ast.expr] = []
        if isinstance(node, ast.Assign):
            targets = node.targets
        elif isinstance(node, (ast.AnnAssign, ast.AugAssign)):
            targets = [node.target]
        for t in targets:
            if isinstance(t, ast.Attribute) and isinstance(t.value, ast.Name) and t.value.id == "self":
                names.add(t.attr)
    return {n for n in names if not n.startswith("_")}


def _annotations(cls: type) -> dict[str, Any]:
    return {n: h for n, h in typing.get_type_hints(cls).items() if not n.startswith("_")}


def _public(cls: type) -> set[str]:
    names = {n for n in dir(cls) if not n.startswith("_")}
    return names | set(_annotations(cls)) | _self_assigned(cls)


def _kind(cls: type, name: str) -> str:
    try:
        raw = inspect.getattr_static(cls, name)
    except AttributeError:
        return "attribute"  # declared, set per instance
    if isinstance(raw, property):
        return "attribute"
    if isinstance(raw, classmethod):
        return "classmethod"
    if isinstance(raw, staticmethod):
        return "staticmethod"
    if inspect.isfunction(raw):
        return "method"
    return "attribute"


def _function(cls: type, name: str) -> Any:
    raw = inspect.getattr_static(cls, name)
    if isinstance(raw, property):
        return raw.fget
    if isinstance(raw, (classmethod, staticmethod)):
        return raw.__func__
    return raw


def _hint(cls: type, name: str) -> Any:
    """The type a public name gives: an attribute's annotation, a method's return."""
    ann = _annotations(cls)
    if name in ann:
        return ann[name]
    if not hasattr(cls, name):
        return None  # set per instance, undeclared: test_public_instance_attributes_are_declared
    fn = _function(cls, name)
    return typing.get_type_hints(fn).get("return") if callable(fn) else None


def _sdk_classes(hint: Any) -> set[type]:
    if isinstance(hint, type):
        return {hint} if hint.__module__.startswith("wasmsand") else set()
    out: set[type] = set()
    for arg in typing.get_args(hint):
        out |= _sdk_classes(arg)
    return out


def _pairs() -> dict[type, type]:
    """Each sync class reachable from ``Sandbox`` with its async twin: where a name gives an
    SDK class on the sync face and not on the async one, the async face must give the class of
    the same name with ``Async`` in front. Shared classes (``CommandResult``, ...) pair with
    nothing."""
    pairs: dict[type, type] = {}
    todo: list[tuple[type, type]] = [(Sandbox, AsyncSandbox)]
    while todo:
        s, a = todo.pop()
        if s in pairs:
            continue
        pairs[s] = a
        for name in sorted(_public(s) & _public(a)):
            sync_classes, async_classes = _sdk_classes(_hint(s, name)), _sdk_classes(_hint(a, name))
            for c in sorted(sync_classes - async_classes, key=lambda c: c.__name__):
                twins = [x for x in async_classes if x.__name__ == "Async" + c.__name__]
                assert twins, f"{s.__name__}.{name} gives {c.__name__}; {a.__name__}.{name} gives no Async{c.__name__}"
                todo.append((c, twins[0]))
    return pairs


def _params(fn: Any) -> list[tuple[str, str, Any]]:
    """Name, kind and default of each parameter but ``self``/``cls`` and private ones."""
    ps = list(inspect.signature(fn).parameters.values())[1:]
    return [(p.name, p.kind.name, p.default) for p in ps if not p.name.startswith("_")]


# ---- the static checks ----


def test_the_walk_reaches_every_async_class() -> None:
    pairs = _pairs()
    exported = {getattr(wasmsand, n) for n in wasmsand.__all__}
    async_classes = {c for c in exported if isinstance(c, type) and c.__name__.startswith("Async")}
    unreached = sorted(c.__name__ for c in async_classes - set(pairs.values()))
    assert not unreached, f"no annotation on either face leads to {unreached}"
    # Each pair's sync class is exported too, under the name without "Async".
    assert all(getattr(wasmsand, a.__name__[len("Async") :]) is s for s, a in pairs.items())
    assert len(pairs) >= 5  # the sandbox, commands, handles, files, tools


def _check_names(s: type, a: type) -> None:
    extra = {ASYNC_CONSTRUCTOR} if issubclass(s, Sandbox) else set()
    assert sorted(_public(a) - extra) == sorted(_public(s)), f"{s.__name__} vs {a.__name__}"
    for sync_name, async_name in PROTOCOLS.items():
        assert hasattr(s, sync_name) == hasattr(a, async_name), f"{s.__name__}.{sync_name}"


def _check_methods(s: type, a: type) -> None:
    for name in sorted(_public(s)):
        where = f"{s.__name__}.{name} / {a.__name__}.{name}"
        kind = _kind(s, name)
        assert _kind(a, name) == kind, where
        if kind == "attribute":
            continue
        sf, af = _function(s, name), _function(a, name)
        assert not inspect.iscoroutinefunction(sf) and not inspect.isasyncgenfunction(sf), where
        # An async method either is awaited (a coroutine) or is iterated (``read_stream``).
        assert inspect.iscoroutinefunction(af) or inspect.isasyncgenfunction(af), where
        assert _params(af) == _params(sf), where
        s_over, a_over = typing.get_overloads(sf), typing.get_overloads(af)
        assert len(a_over) == len(s_over), where
        for so, ao in zip(s_over, a_over):
            assert _params(ao) == _params(so), where


PAIRS = sorted(_pairs().items(), key=lambda p: p[0].__name__)


@pytest.mark.parametrize("pair", PAIRS, ids=[s.__name__ for s, _ in PAIRS])
def test_the_faces_have_the_same_public_names(pair: tuple[type, type]) -> None:
    _check_names(*pair)


@pytest.mark.parametrize("pair", PAIRS, ids=[s.__name__ for s, _ in PAIRS])
def test_each_method_has_the_same_parameters_and_kind(pair: tuple[type, type]) -> None:
    _check_methods(*pair)


def test_create_takes_the_constructors_parameters() -> None:
    sync = _params(Sandbox.__init__)
    assert _params(_function(AsyncSandbox, ASYNC_CONSTRUCTOR)) == sync
    # `async with AsyncSandbox(...)` takes them too, as `Sandbox(...)` does.
    assert _params(AsyncSandbox.__init__) == sync
    assert [p[1] for p in sync] == ["KEYWORD_ONLY"] * len(sync)


def test_public_instance_attributes_are_declared() -> None:
    # The walk sees an attribute set in `__init__` only through the class's annotations.
    for s, a in _pairs().items():
        for cls in (s, a):
            undeclared = {n for n in _self_assigned(cls) if n not in _annotations(cls) and not hasattr(cls, n)}
            assert not undeclared, f"{cls.__name__}: declare {sorted(undeclared)} in the class body"


class _OneMore(Sandbox):
    def peek(self) -> str:
        return ""


class _Drifted(AsyncSandbox):
    async def restore(self, snapshot: str) -> None:
        pass


class _Blocking(AsyncSandbox):
    def snapshot(self) -> str:  # type: ignore[override]
        return ""


def test_the_checks_catch_a_face_that_drifts() -> None:
    with pytest.raises(AssertionError, match="Sandbox"):
        _check_names(_OneMore, AsyncSandbox)
    with pytest.raises(AssertionError, match="restore"):
        _check_methods(Sandbox, _Drifted)
    with pytest.raises(AssertionError, match="snapshot"):
        _check_methods(Sandbox, _Blocking)


def test_every_timeout_parameter_follows_the_rule() -> None:
    """``timeout`` is seconds (a float), ``timeout_ms`` milliseconds (an int), both optional
    and offered together, on both faces; nothing else names a timeout."""
    found = []
    for s, a in _pairs().items():
        for cls in (s, a):
            for name in _public(cls) | {"__init__"}:
                if name == "__init__" and cls is not Sandbox or _kind(cls, name) == "attribute":
                    continue
                fn = _function(cls, name)
                sig = inspect.signature(fn)
                hints = typing.get_type_hints(fn)
                named = [p for p in sig.parameters if "timeout" in p]
                if not named:
                    continue
                found.append(f"{cls.__name__}.{name}")
                assert sorted(named) == ["timeout", "timeout_ms"], f"{cls.__name__}.{name}: {named}"
                assert hints["timeout"] == float | None and hints["timeout_ms"] == int | None, name
                assert sig.parameters["timeout"].default is None and sig.parameters["timeout_ms"].default is None
                assert sig.parameters["timeout_ms"].kind is inspect.Parameter.KEYWORD_ONLY
    for where in ("Sandbox.__init__", "AsyncSandbox.create", "Commands.run", "AsyncCommands.run"):
        assert where in found
    assert "CommandHandle.wait" in found and "AsyncCommandHandle.wait" in found


# ---- the same names on live objects, both transports ----


def _live_public(obj: object) -> set[str]:
    return {n for n in dir(obj) if not n.startswith("_")}


def test_live_objects_have_the_same_names(transport: str) -> None:
    async def main() -> None:
        with Sandbox(transport=transport) as s:
            a = await AsyncSandbox.create(transport=transport)
            async with a:
                sh = s.commands.run("sleep 0.1", background=True)
                ah = await a.commands.run("sleep 0.1", background=True)
                assert _live_public(a) - {ASYNC_CONSTRUCTOR} == _live_public(s)
                for name in ("commands", "files", "tools"):
                    assert _live_public(getattr(a, name)) == _live_public(getattr(s, name)), name
                assert _live_public(ah) == _live_public(sh)
                sh.wait(timeout=10)
                await ah.wait(timeout=10)

    asyncio.run(main())


# ---- the async methods that came last ----


def test_async_truncation(transport: str) -> None:
    numbers = "".join(f"{i}\n" for i in range(1, 30001))

    async def main() -> None:
        if transport == "service":
            with pytest.raises(NotSupportedError, match="stdout_bytes"):
                await AsyncSandbox.create(transport=transport, limits={"stdout_bytes": 2048, "spill_bytes": 50_000})
            s = await AsyncSandbox.create(transport=transport)
            async with s:
                with pytest.raises(NotSupportedError, match="truncation"):
                    await s.commands.run("seq 1 30000", truncation="plain")
            return
        a = await AsyncSandbox.create(transport=transport, limits={"stdout_bytes": 2048, "spill_bytes": 50_000})
        async with a:
            r = await a.commands.run("seq 1 30000")
            assert r.stdout.startswith("1\n2\n") and r.stdout.endswith("29999\n30000\n")
            assert r.spilled == {"stdout": "/tmp/wasmsand-1.stdout"}
            plain = await a.commands.run("seq 1 30000", truncation="plain")
            assert plain.spilled is None and plain.stdout == numbers[:2048]
            assert plain.truncated == {"stdout": True, "stderr": False}
            with pytest.raises(Exception, match="truncation"):
                await a.commands.run("true", truncation="middle")

    asyncio.run(main())


def test_async_import_state(transport: str) -> None:
    other = "rpc" if transport == "inprocess" else "inprocess"
    before = threading.active_count()
    if transport == "service":

        async def refused() -> None:
            a = await AsyncSandbox.create(transport=transport)
            async with a:
                with pytest.raises(NotSupportedError, match="export_state"):
                    await a.export_state()
            with pytest.raises(NotSupportedError, match="import_state"):
                await AsyncSandbox.import_state(b"any blob", transport=transport)

        asyncio.run(refused())
        return

    async def main() -> None:
        a = await AsyncSandbox.create(transport=transport, limits={"file_count": 321})
        async with a:
            await a.commands.run("mkdir -p p && echo hi > p/x && export K=v && cd p")
            blob = await a.export_state(key=b"k1")
        b = await AsyncSandbox.import_state(blob, key=b"k1", transport=other)
        async with b:
            assert b.sandbox_id is None
            r = await b.commands.run("pwd; cat x; echo $K")
            assert r.stdout == "/home/user/p\nhi\nv\n"
            # It is a root with a pool of its own: it forks, and the fork shares the pool.
            f = await b.fork()
            assert (await f.files.read("/home/user/p/x")) == b"hi\n"
        # A blob from the sync face opens on the async one and the other way round.
        with Sandbox(transport=transport) as s:
            s.files.write("/tmp/from-sync", "s")
            sync_blob = s.export_state()
        c = await AsyncSandbox.import_state(sync_blob, transport=transport)
        async with c:
            assert await c.files.read("/tmp/from-sync") == b"s"
            back = Sandbox.import_state(await c.export_state(), transport=other)
            try:
                assert back.files.read("/tmp/from-sync") == b"s"
            finally:
                back.kill()
        with pytest.raises(ValueError, match="give the key"):
            await AsyncSandbox.import_state(blob, transport=transport)
        with pytest.raises(ValueError, match="not a wasmsand state blob"):
            await AsyncSandbox.import_state(b"definitely not", transport=transport)

    asyncio.run(main())
    # A refused blob leaves no sandbox, server or pool thread behind.
    deadline = time.monotonic() + 10
    while threading.active_count() > before and time.monotonic() < deadline:
        time.sleep(0.05)
    assert threading.active_count() <= before, [t.name for t in threading.enumerate()]


def test_async_poll_shares_the_read_position_with_iteration(transport: str) -> None:
    async def main() -> None:
        a = await AsyncSandbox.create(transport=transport)
        async with a:
            h = await a.commands.run("echo one; echo err >&2; read x; echo two", background=True)
            assert isinstance(h, AsyncCommandHandle)
            out, err = "", ""
            for _ in range(200):
                o, e, running = await h.poll()
                out, err = out + o, err + e
                if out and err:
                    break
                await asyncio.sleep(0.02)
            assert (out, err, running) == ("one\n", "err\n", True)
            assert await h.poll() == ("", "", True)  # nothing new: it never waits
            await h.send_stdin("go\n")
            # Iteration goes on from where poll stopped: "one" is not read twice.
            assert "".join([o async for o, _ in h]) == "two\n"
            assert await h.poll() == ("", "", False)
            assert (h.dropped_stdout, h.dropped_stderr) == (0, 0)
            assert (await h.wait(timeout=10)).exit_code == 0

    asyncio.run(main())


def test_async_dropped_counts_what_the_ring_lost(transport: str) -> None:
    if transport == "service":
        # The rings are the server's size (`SANDBOX_MAX_LOG_BYTES`), not the client's.
        with pytest.raises(NotSupportedError, match="stdout_bytes"):
            asyncio.run(AsyncSandbox.create(transport=transport, limits={"stdout_bytes": 4096}))
        return

    async def main() -> None:
        a = await AsyncSandbox.create(transport=transport, limits={"stdout_bytes": 4096})
        async with a:
            h = await a.commands.run("seq 1 20000; echo end", background=True)
            await h.wait(timeout=30)
            text = "".join([o async for o, _ in h])
            assert text.endswith("20000\nend\n") and len(text) <= 4096
            total = len("".join(f"{i}\n" for i in range(1, 20001))) + len("end\n")
            assert h.dropped_stdout == total - len(text) and h.dropped_stderr == 0

    asyncio.run(main())
    # The sync face counts the same.
    with Sandbox(transport=transport, limits={"stdout_bytes": 4096}) as s:
        h = s.commands.run("seq 1 20000; echo end", background=True)
        h.wait(timeout=30)
        text = "".join(o for o, _ in h)
        assert h.dropped_stdout == len("".join(f"{i}\n" for i in range(1, 20001))) + 4 - len(text)


def test_callbacks_do_not_take_chunks_from_poll(transport: str) -> None:
    async def main() -> None:
        a = await AsyncSandbox.create(transport=transport)
        async with a:
            got: list[str] = []
            h = await a.commands.run("echo a; sleep 0.2; echo b", background=True, on_stdout=got.append)
            await h.wait(timeout=10)
            assert "".join([o async for o, _ in h]) == "a\nb\n"
            for _ in range(100):
                if "".join(got) == "a\nb\n":
                    break
                await asyncio.sleep(0.05)
            assert "".join(got) == "a\nb\n"

    asyncio.run(main())


def test_read_stream_on_both_faces(sb: Sandbox, transport: str) -> None:
    data = bytes(range(256)) * 9000
    sb.files.write("/tmp/s.bin", data)
    assert b"".join(sb.files.read_stream("/tmp/s.bin")) == data

    async def main() -> None:
        a = await AsyncSandbox.create(transport=transport)
        async with a:
            await a.files.write("/tmp/s.bin", data)
            it = await a.files.read("/tmp/s.bin", format="stream")
            assert b"".join([c async for c in it]) == data
            assert b"".join([c async for c in a.files.read_stream("/tmp/s.bin")]) == data
            with pytest.raises(ValueError):
                await a.files.read("/tmp/s.bin", format="json")  # type: ignore[call-overload]

    asyncio.run(main())


# ---- timeouts: one rule on both faces ----


def test_sandbox_timeout_in_seconds_or_ms(transport: str) -> None:
    for kw in ({"timeout": 0.3}, {"timeout_ms": 300}):
        with Sandbox(transport=transport, **kw) as s:
            r = s.commands.run("while :; do :; done")
            assert (r.exit_code, r.error_class) == (124, "TIMEOUT"), kw
            assert s.commands.run("sleep 0.5; echo ok", timeout=5).stdout == "ok\n"
    for bad in ({"timeout": 1, "timeout_ms": 1000}, {"timeout": -1}, {"timeout_ms": 1.5}, {"timeout": "5"}):
        with pytest.raises(ValueError):
            Sandbox(transport=transport, **bad)

    async def main() -> None:
        a = await AsyncSandbox.create(transport=transport, timeout=0.3)
        async with a:
            r = await a.commands.run("while :; do :; done")
            assert (r.exit_code, r.error_class) == (124, "TIMEOUT")
        # `create` takes every argument of `Sandbox(...)`, `deterministic` too.
        if transport == "service":
            with pytest.raises(NotSupportedError, match="deterministic"):
                await AsyncSandbox.create(transport=transport, deterministic={"seed": 5})
            with pytest.raises(ValueError):
                await AsyncSandbox.create(transport=transport, timeout=1, timeout_ms=1000)
            return
        d = await AsyncSandbox.create(transport=transport, deterministic={"seed": 5})
        async with d:
            with Sandbox(transport=transport, deterministic={"seed": 5}) as s:
                script = "echo $RANDOM; od -An -N8 -tx1 /dev/urandom"
                assert (await d.commands.run(script)).stdout == s.commands.run(script).stdout
        with pytest.raises(ValueError):
            await AsyncSandbox.create(transport=transport, timeout=1, timeout_ms=1000)

    asyncio.run(main())


def test_wait_timeout_in_seconds_or_ms(sb: Sandbox, transport: str) -> None:
    h = sb.commands.run("sleep 0.8; echo fine", background=True)
    with pytest.raises(WaitTimeoutError):
        h.wait(timeout_ms=100)
    with pytest.raises(ValueError):
        h.wait(timeout=1, timeout_ms=1000)
    with pytest.raises(ValueError):
        h.wait(timeout=-1)
    assert h.wait(timeout_ms=10_000).stdout == "fine\n"

    async def main() -> None:
        a = await AsyncSandbox.create(transport=transport)
        async with a:
            ah = await a.commands.run("sleep 0.8; echo fine", background=True)
            start = time.monotonic()
            with pytest.raises(WaitTimeoutError):
                await ah.wait(timeout_ms=200)
            assert time.monotonic() - start >= 0.15  # milliseconds, not microseconds
            with pytest.raises(ValueError):
                await ah.wait(timeout=1, timeout_ms=1000)
            with pytest.raises(ValueError):
                await ah.wait(timeout=-1)
            assert (await ah.wait(timeout_ms=10_000)).stdout == "fine\n"

    asyncio.run(main())

