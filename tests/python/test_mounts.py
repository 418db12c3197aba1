"""Host folders in, changes out, from Python: ``Sandbox(mounts=...)``, ``sb.mount``,
``sb.changes`` (whose patch real ``git apply`` takes) and ``sb.export_changes``, in-process
and over RPC, sync and async; the service transport refuses host folders by name, and runs
previews, commits, discards and best-of-N on the service's forks."""

from __future__ import annotations

import asyncio
import shutil
import subprocess
from pathlib import Path

import pytest

from wasmsand import (
    AsyncSandbox,
    Changes,
    InvalidParamsError,
    MergeConflictError,
    Mount,
    NotSupportedError,
    Sandbox,
    SandboxDestroyedError,
)

LOCAL = ["inprocess", "rpc"]


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    r = tmp_path / "repo"
    (r / "src").mkdir(parents=True)
    (r / "src" / "calc.py").write_text("def add(a, b):\n    return a - b\n")
    (r / "README.md").write_text("# calc\n")
    (r / ".env").write_text("TOKEN=hunter2\n")
    (r / "notes.log").write_text("noise\n")
    (r / ".gitignore").write_text("*.log\n")
    return r


def snapshot_of(root: Path) -> dict[str, bytes]:
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


@pytest.mark.parametrize("transport", LOCAL)
def test_a_mounted_repo_is_edited_and_the_patch_applies(transport: str, repo: Path, tmp_path: Path) -> None:
    before = snapshot_of(repo)
    with Sandbox(transport=transport, mounts=[Mount(str(repo), "repo", gitignore=True)]) as sb:
        listing = sb.commands.run("ls -A repo").stdout.split()
        assert listing == [".gitignore", "README.md", "src"]
        sb.commands.run("sed -i 's/a - b/a + b/' repo/src/calc.py && echo 'x = 1' > repo/src/new.py", check=True)
        out = sb.commands.run("cd repo && python3 -c 'from src.calc import add; print(add(2, 3))'")
        assert out.stdout == "5\n"
        ch = sb.changes()
        assert isinstance(ch, Changes) and ch
        assert ch.root == "/home/user/repo"
        assert [(f.path, f.status) for f in ch.files] == [("src/calc.py", "modified"), ("src/new.py", "added")]
        assert ch.files[1].new_mode == 0o644 and ch.files[1].old_mode is None
        assert "-    return a - b\n+    return a + b\n" in ch.patch
        info = sb.mounts()[0]
        assert info.path == "/home/user/repo" and not info.read_only and info.files_read >= 1

        copy = tmp_path / "copy"
        shutil.copytree(repo, copy)
        subprocess.run(["git", "apply", "-"], input=ch.patch.encode(), cwd=copy, check=True)
        assert (copy / "src" / "calc.py").read_text() == "def add(a, b):\n    return a + b\n"
        assert (copy / "src" / "new.py").read_text() == "x = 1\n"

        out_dir = tmp_path / "out"
        out_dir.mkdir()
        report = sb.export_changes(out_dir)
        assert sorted(report.written) == ["src/calc.py", "src/new.py"]
        assert (out_dir / "src" / "new.py").read_text() == "x = 1\n"
    assert snapshot_of(repo) == before, "the host folder changed"


@pytest.mark.parametrize("transport", LOCAL)
def test_mount_later_read_only_forks_and_snapshots(transport: str, repo: Path) -> None:
    with Sandbox(transport=transport) as sb:
        info = sb.mount(repo, "/home/user/ro", read_only=True, allow_secrets=[".env*"])
        assert info.read_only
        assert sb.files.read("/home/user/ro/.env") == b"TOKEN=hunter2\n"
        r = sb.commands.run("echo x > ro/README.md")
        assert r.exit_code != 0 and "Read-only" in r.stderr
        with pytest.raises(OSError):
            sb.files.write("/home/user/ro/new", "x")
        snap = sb.snapshot()
        sb.files.write("/home/user/after.txt", "later")
        assert [f.path for f in sb.changes(snapshot_id=snap, path="/home/user").files] == ["after.txt"]
        with sb.fork() as fork:
            fork.files.write("/home/user/in-fork.txt", "f")
            assert [f.path for f in fork.changes("parent", path="/home/user").files] == ["in-fork.txt"]
            assert fork.mounts()[0].path == "/home/user/ro"
        with pytest.raises(InvalidParamsError, match="not a fork"):
            sb.changes("parent")
        with pytest.raises(ValueError, match="since"):
            sb.changes("yesterday")
        with pytest.raises(InvalidParamsError, match="unknown secret pattern"):
            sb.mount(repo, "again", allow_secrets=["*.key"])
        with pytest.raises(InvalidParamsError, match="host folder"):
            sb.export_state()


def test_mount_strings_and_bad_specs() -> None:
    assert Mount.coerce("/a/b:work:ro") == Mount("/a/b", "work", read_only=True)
    assert Mount.coerce({"host": "/x", "path": "y", "gitignore": True}).gitignore
    with pytest.raises(ValueError, match="HOST:PATH"):
        Mount.coerce("nowhere")
    with pytest.raises(InvalidParamsError, match="/no/such/dir"):
        Sandbox(mounts=["/no/such/dir:x"])


def test_async_mounts_and_changes(repo: Path) -> None:
    async def main() -> None:
        async with await AsyncSandbox.create(transport="rpc", mounts=[f"{repo}:r"]) as sb:
            await sb.commands.run("rm r/README.md")
            ch = await sb.changes()
            assert [(f.path, f.status) for f in ch.files] == [("README.md", "deleted")]
            assert "deleted file mode 100644" in ch.patch
            assert (await sb.mounts())[0].path == "/home/user/r"

    asyncio.run(main())
    assert (repo / "README.md").exists()


def test_the_service_refuses_host_folders(service_url: str, repo: Path) -> None:
    with pytest.raises(NotSupportedError, match="host folders"):
        Sandbox(url=service_url, mounts=[f"{repo}:r"])


@pytest.mark.parametrize("transport", LOCAL)
def test_preview_commit_discard_and_best_of(transport: str, repo: Path) -> None:
    with Sandbox(transport=transport, mounts=[Mount(str(repo), "repo")]) as sb:
        r = sb.commands.run("sed -i 's/a - b/a + b/' repo/src/calc.py", preview=True)
        assert r.exit_code == 0 and r.preview is not None
        assert [f.path for f in r.preview.changes.files] == ["src/calc.py"]
        assert b"a - b" in sb.files.read("repo/src/calc.py")
        merged = sb.commit(r)
        assert merged.applied == {"/home/user/repo/src/calc.py": "changed"}
        assert b"a + b" in sb.files.read("repo/src/calc.py")

        junk = sb.commands.run("echo junk > repo/junk", preview=True)
        sb.discard(junk)
        assert not sb.files.exists("repo/junk")
        with pytest.raises(ValueError, match="not a preview"):
            sb.commit(sb.commands.run("true"))

        tries = sb.best_of(
            [("echo $N > repo/n; test $N = 2", {"N": str(n)}) for n in (1, 2, 3)],
            concurrency=2,
        )
        assert [t.exit_code for t in tries] == [1, 0, 1]
        sb.commit(tries[1])
        for t in (tries[0], tries[2]):
            sb.discard(t)
        assert sb.files.read("repo/n") == b"2\n"
    assert "a - b" in (repo / "src" / "calc.py").read_text(), "the host folder changed"


def test_async_previews(repo: Path) -> None:
    async def main() -> None:
        async with await AsyncSandbox.create(transport="inprocess") as sb:
            r = await sb.commands.run("echo hi > f", preview=True)
            assert not await sb.files.exists("f")
            await sb.commit(r)
            assert await sb.files.read("f") == b"hi\n"
            tries = await sb.best_of(["echo a > g", "echo b > g"])
            await sb.commit(tries[1])
            assert await sb.files.read("g") == b"b\n"

    asyncio.run(main())


def test_previews_and_best_of_on_the_service(service_url: str, tmp_path: Path) -> None:
    with Sandbox(url=service_url) as sb:
        sb.files.write("calc.py", "def add(a, b):\n    return a - b\n")
        r = sb.commands.run("sed -i 's/a - b/a + b/' calc.py; echo new > added.txt", preview=True)
        assert r.exit_code == 0 and r.preview is not None
        assert [(f.path, f.status) for f in r.preview.changes.files] == [
            ("added.txt", "added"),
            ("calc.py", "modified"),
        ]
        assert "-    return a - b\n+    return a + b\n" in r.preview.changes.patch
        assert b"a - b" in sb.files.read("calc.py")
        merged = sb.commit(r)
        assert merged.applied == {"/home/user/added.txt": "added", "/home/user/calc.py": "changed"}
        assert b"a + b" in sb.files.read("calc.py")
        with pytest.raises(SandboxDestroyedError):
            sb.commit(r)

        junk = sb.commands.run("echo junk > junk", preview=True)
        sb.discard(junk)
        assert not sb.files.exists("junk")

        # A conflicting commit applies nothing and keeps the preview.
        theirs = sb.commands.run("echo theirs > added.txt", preview=True)
        sb.files.write("added.txt", "ours\n")
        with pytest.raises(MergeConflictError):
            sb.commit(theirs)
        assert sb.files.read("added.txt") == b"ours\n"
        sb.discard(theirs)

        tries = sb.best_of([("echo $N > n; test $N = 2", {"N": str(n)}) for n in (1, 2, 3)], concurrency=2)
        assert [t.exit_code for t in tries] == [1, 0, 1]
        assert [t.preview.changes.files[0].path for t in tries if t.preview] == ["n", "n", "n"]
        sb.commit(tries[1], env=True)
        for t in (tries[0], tries[2]):
            sb.discard(t)
        assert sb.files.read("n") == b"2\n"
        assert sb.commands.run("echo $N").stdout == "2\n"

        # What the session changed since a snapshot; a mount diff is not the service's.
        snap = sb.snapshot()
        sb.commands.run("rm n")
        c = sb.changes(since="snapshot", snapshot_id=snap)
        assert [(f.path, f.status) for f in c.files] == [("n", "deleted")]
        with pytest.raises(NotSupportedError, match="host folders"):
            sb.changes()
