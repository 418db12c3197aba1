"""Agent-grade runs (docs/runs.md) through the SDK, on every transport: the resource receipt
of every run, atomic runs, portable state, and merging a fork back. The service transport has
no atomic runs, portable state, deterministic mode or per-sandbox limits: there each of those
is asserted to raise ``NotSupportedError``."""

from __future__ import annotations

import asyncio

import pytest

from wasmsand import (
    AsyncSandbox,
    InvalidParamsError,
    MergeConflict,
    MergeConflictError,
    MergeResult,
    NotSupportedError,
    Sandbox,
    SandboxError,
    Usage,
)


@pytest.fixture
def sb(transport: str):
    with Sandbox(transport=transport) as s:
        yield s


def test_every_result_has_a_receipt(sb: Sandbox, transport: str) -> None:
    r = sb.commands.run("echo hello | wc -c; echo data > /tmp/f")
    assert r.stdout == "6\n"
    u = r.usage
    assert isinstance(u, Usage)
    assert u.peak_memory_bytes >= 65536 and u.peak_memory_bytes % 65536 == 0
    assert u.cpu_us > 0
    if transport == "service":
        # A run's `resource_usage` has times, memory and network; what it did to the files
        # is not in it, so those fields stay 0.
        assert 0 <= u.wall_ms < 60_000 and u.wall_ms == round(r.execution_time_ms)
        assert (u.processes, u.files_created, u.bytes_written, u.fs_bytes) == (0, 0, 0, 0)
        assert u.limits_hit == [] and r.rolled_back is False
        return
    assert u.processes >= 2
    assert (u.files_created, u.bytes_written) == (1, 5)
    assert u.fs_bytes > 0 and u.limits_hit == []
    assert r.rolled_back is False


def test_limits_hit_are_named(transport: str) -> None:
    if transport == "service":
        with pytest.raises(NotSupportedError, match="stdout_bytes"):
            Sandbox(transport=transport, limits={"stdout_bytes": 3})
    else:
        with Sandbox(transport=transport, limits={"stdout_bytes": 3}) as s:
            assert s.commands.run("echo hello").usage.limits_hit == ["stdoutBytes"]
    with Sandbox(transport=transport, timeout_ms=300) as s:
        assert s.commands.run("while :; do :; done").usage.limits_hit == ["timeoutMs"]


def test_a_failed_atomic_run_rolls_back(sb: Sandbox, transport: str) -> None:
    if transport == "service":
        with pytest.raises(NotSupportedError, match="atomic"):
            sb.commands.run("echo lost > /home/user/f", atomic=True)
        assert not sb.files.exists("/home/user/f")  # refused before it ran
        return
    sb.commands.run("echo keep > f; X=1; cd /tmp")
    r = sb.commands.run("echo lost > /home/user/f; touch g; X=2; cd /; exit 3", atomic=True)
    assert (r.exit_code, r.rolled_back) == (3, True)
    assert sb.files.read("/home/user/f") == b"keep\n"
    assert sb.commands.run("pwd; echo $X; ls /home/user").stdout == "/tmp\n1\nf\n"
    ok = sb.commands.run("echo kept > /home/user/f", atomic=True)
    assert (ok.exit_code, ok.rolled_back) == (0, False)
    assert sb.files.read("/home/user/f") == b"kept\n"


def test_state_moves_between_transports(transport: str) -> None:
    if transport == "service":
        with Sandbox(transport=transport) as a:
            with pytest.raises(NotSupportedError, match="export_state"):
                a.export_state()
        with Sandbox(transport="inprocess") as local:
            blob = local.export_state()
        with pytest.raises(NotSupportedError, match="import_state"):
            Sandbox.import_state(blob, transport=transport)
        return
    other = "rpc" if transport == "inprocess" else "inprocess"
    with Sandbox(transport=transport, limits={"file_count": 321}) as a:
        a.commands.run("mkdir -p p && echo hi > p/x && chmod 600 p/x && export K=v && g() { echo g$1; } && cd p")
        blob = a.export_state(key=b"k1")
        b = Sandbox.import_state(blob, key=b"k1", transport=other)
        try:
            r = b.commands.run("pwd; cat x; stat -c %a x; echo $K; g 2")
            assert r.stdout == "/home/user/p\nhi\n600\nv\ng2\n"
            # The blob carried the limits: a 322nd file does not fit.
            r = b.commands.run("for i in $(seq 1 400); do touch /tmp/f$i || break; done; ls /tmp | wc -l")
            assert "file count limit" in r.stderr or r.usage.limits_hit == ["fileCount"]
        finally:
            b.kill()


def test_bad_blobs_raise_and_leave_nothing_running(transport: str) -> None:
    if transport == "service":
        # No blob reaches the service at all (test_state_moves_between_transports).
        with pytest.raises(NotSupportedError):
            Sandbox.import_state(b"definitely not", transport=transport)
        return
    with Sandbox(transport=transport) as a:
        blob = a.export_state()
    with pytest.raises(ValueError, match="checksum mismatch"):
        Sandbox.import_state(blob[:-3] + b"xyz", transport=transport)
    with pytest.raises(ValueError, match="not a wasmsand state blob"):
        Sandbox.import_state(b"definitely not", transport=transport)
    with Sandbox(transport=transport) as a:
        keyed = a.export_state(key=b"s")
    with pytest.raises(ValueError, match="give the key"):
        Sandbox.import_state(keyed, transport=transport)
    newer = bytearray(blob)
    newer[8] = 2
    with pytest.raises(ValueError, match="newer wasmsand"):
        Sandbox.import_state(bytes(newer), transport=transport)


def test_the_examples_in_docs_runs_md_run() -> None:
    import pathlib
    import re

    doc = pathlib.Path(__file__).resolve().parents[2] / "docs" / "runs.md"
    blocks = re.findall(r"```python\n(.*?)```", doc.read_text(), re.S)
    assert len(blocks) == 7
    for code in blocks:
        exec(compile(code, str(doc), "exec"), {})


def test_long_output_is_head_and_tail_with_the_rest_spilled(transport: str) -> None:
    if transport == "service":
        with pytest.raises(NotSupportedError, match="spill_bytes, stdout_bytes"):
            Sandbox(transport=transport, limits={"stdout_bytes": 2048, "spill_bytes": 50_000})
        with Sandbox(transport=transport) as s:
            with pytest.raises(NotSupportedError, match="truncation"):
                s.commands.run("seq 1 30000", truncation="plain")
            # Under the service's log cap the whole output comes back.
            r = s.commands.run("seq 1 30000")
            assert r.stdout == "".join(f"{i}\n" for i in range(1, 30001)) and r.truncated is None
        return
    with Sandbox(transport=transport, limits={"stdout_bytes": 2048, "spill_bytes": 50_000}) as s:
        r = s.commands.run("seq 1 30000")
        assert r.stdout.startswith("1\n2\n") and r.stdout.endswith("29999\n30000\n")
        assert len(r.stdout) <= 2048 and r.truncated == {"stdout": True, "stderr": False}
        assert r.spilled == {"stdout": "/tmp/wasmsand-1.stdout"}
        assert "bytes left out; the whole stream is in /tmp/wasmsand-1.stdout" in r.stdout
        assert s.files.read("/tmp/wasmsand-1.stdout", format="bytes") == "".join(f"{i}\n" for i in range(1, 30001)).encode()[:50_000]
        plain = s.commands.run("seq 1 30000", truncation="plain")
        assert plain.spilled is None and plain.stdout == "".join(f"{i}\n" for i in range(1, 30001))[:2048]
        with pytest.raises(Exception, match="truncation"):
            s.commands.run("true", truncation="middle")


DET_SCRIPT = (
    "date; echo $RANDOM $$; mktemp; od -An -N8 -tx1 /dev/urandom; "
    "python3 -c 'import uuid,random,time; print(uuid.uuid4(), random.random(), time.time())'"
)


def test_deterministic_mode_repeats_across_sandboxes_forks_and_transports(transport: str) -> None:
    if transport == "service":
        with pytest.raises(NotSupportedError, match="deterministic"):
            Sandbox(transport=transport, deterministic={"seed": 5})
        return
    other = "rpc" if transport == "inprocess" else "inprocess"
    with Sandbox(transport=transport, deterministic={"seed": 5}) as a:
        fork = a.fork()
        first = a.commands.run(DET_SCRIPT)
        assert first.exit_code == 0, first.stderr
        assert fork.commands.run(DET_SCRIPT).stdout == first.stdout
    with Sandbox(transport=other, deterministic={"seed": 5}) as b:
        assert b.commands.run(DET_SCRIPT).stdout == first.stdout
    with Sandbox(transport=transport) as c, Sandbox(transport=transport) as d:
        assert c.commands.run(DET_SCRIPT).stdout != d.commands.run(DET_SCRIPT).stdout
    with pytest.raises(ValueError, match="deterministic"):
        Sandbox(transport=transport, deterministic={"sed": 1})


def test_a_fork_merges_back(sb: Sandbox) -> None:
    sb.commands.run("mkdir -p proj/lib && echo 1 > proj/a && echo 2 > proj/lib/b && ln -s a proj/link && export BASE=1")
    fork = sb.fork()
    fork.commands.run(
        "cd proj && echo 1b > a && chmod 600 lib/b && rm link && ln -s lib/b link"
        " && mkdir -p new/deep && echo n > new/deep/f && export MERGED=yes && cd new"
    )
    sb.commands.run("echo other > side")
    r = sb.merge(fork)
    assert isinstance(r, MergeResult)
    assert r.applied == {
        "/home/user/proj/a": "changed",
        "/home/user/proj/lib/b": "changed",
        "/home/user/proj/link": "changed",
        "/home/user/proj/new": "added",
    }
    assert (r.env, r.cwd) == ([], None)
    out = sb.commands.run("cat proj/a proj/link proj/new/deep/f side; stat -c %a proj/lib/b; readlink proj/link; pwd; echo ${MERGED:-unset}")
    assert out.stdout == "1b\n2\nn\nother\n600\nlib/b\n/home/user\nunset\n"
    # The fork is left as it was; its later changes merge on top of the first merge.
    fork.commands.run("rm -r /home/user/proj/lib")
    r = sb.merge(fork, env=True, cwd=True)
    assert r.applied == {"/home/user/proj/lib": "deleted"}
    assert (r.env, r.cwd) == (["MERGED"], "/home/user/proj/new")
    assert sb.commands.run("pwd; echo $MERGED; ls ..").stdout == "/home/user/proj/new\nyes\na\nlink\nnew\n"


def test_a_conflicting_merge_applies_nothing(sb: Sandbox) -> None:
    sb.commands.run("mkdir d && echo base > d/f && echo base > g")
    fork = sb.fork()
    fork.commands.run("echo theirs > g; rm -r d; echo only > new")
    sb.commands.run("echo ours > g; echo inside > d/added")
    with pytest.raises(MergeConflictError) as info:
        sb.merge(fork)
    e = info.value
    assert isinstance(e, SandboxError) and e.kind == "merge_conflict"
    assert e.conflicts == [
        MergeConflict("/home/user/d", "changed", "deleted"),
        MergeConflict("/home/user/g", "changed", "changed"),
    ]
    assert sb.commands.run("cat g; ls").stdout == "ours\nd\ng\n"


def test_merge_refuses_what_is_not_a_fork_of_it(transport: str) -> None:
    with Sandbox(transport=transport) as a, Sandbox(transport=transport) as b:
        f1, f2 = a.fork(), a.fork()
        grandchild = f1.fork()
        for target, source in [(f1, f2), (a, grandchild), (f1, f1), (a, b), (f1, a)]:
            with pytest.raises(InvalidParamsError):
                target.merge(source)
        grandchild.files.write("/tmp/g", "g")
        assert f1.merge(grandchild).applied == {"/tmp/g": "added"}
        f2.destroy()
        with pytest.raises(SandboxError):
            a.merge(f2)


def test_a_merge_past_the_parents_limits_changes_nothing(transport: str) -> None:
    if transport == "service":
        with pytest.raises(NotSupportedError, match="fs_bytes"):
            Sandbox(transport=transport, limits={"fs_bytes": 3000})
        return
    with Sandbox(transport=transport, limits={"fs_bytes": 3000}) as sb:
        fork = sb.fork()
        fork.files.write("/tmp/big", "x" * 2000)
        sb.files.write("/tmp/mine", "y" * 2000)
        with pytest.raises(OSError) as info:
            sb.merge(fork)
        assert "ENOSPC" in str(info.value) or info.value.errno == 28
        assert not sb.files.exists("/tmp/big")
        sb.files.remove("/tmp/mine")
        assert sb.merge(fork).applied == {"/tmp/big": "added"}


def test_async_merge(transport: str) -> None:
    async def main() -> None:
        sb = await AsyncSandbox.create(transport=transport)
        async with sb:
            fork = await sb.fork()
            await fork.commands.run("echo f > /tmp/f; cd /tmp")
            r = await sb.merge(fork, cwd=True)
            assert (r.applied, r.cwd) == ({"/tmp/f": "added"}, "/tmp")
            await fork.commands.run("echo g > /tmp/f")
            await sb.commands.run("echo h > /tmp/f")
            with pytest.raises(MergeConflictError) as info:
                await sb.merge(fork)
            assert info.value.conflicts == [MergeConflict("/tmp/f", "changed", "changed")]

    asyncio.run(main())
