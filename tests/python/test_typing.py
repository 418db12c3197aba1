"""The SDK's annotations are complete: a user program (``typing_sample.py``) and the package
itself pass ``mypy --strict``, and the sample runs."""

from __future__ import annotations

import asyncio
import os
import site
import subprocess
import sys
from pathlib import Path

import wasmsand

HERE = Path(__file__).resolve().parent


def _mypy(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ)
    root = str(Path(wasmsand.__file__).resolve().parent.parent)
    # mypy finds an installed package by itself; one imported from elsewhere (a checkout on
    # PYTHONPATH) it must be shown.
    if root not in {str(Path(p).resolve()) for p in site.getsitepackages()}:
        env["MYPYPATH"] = root
    return subprocess.run(
        [sys.executable, "-m", "mypy", "--strict", "--no-incremental", *args],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )


def test_a_user_program_passes_mypy_strict(tmp_path: Path) -> None:
    r = _mypy(str(HERE / "typing_sample.py"), cwd=tmp_path)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "Success" in r.stdout


def test_mypy_strict_sees_wrong_use(tmp_path: Path) -> None:
    bad = tmp_path / "bad.py"
    bad.write_text(
        "from wasmsand import Sandbox\n"
        "sb = Sandbox()\n"
        "n: int = sb.files.read('/x')\n"  # bytes
        "sb.commands.run('true', background=True).stdout\n"  # a handle has no stdout
        "sb.commands.run('true', timeout='5')\n"
    )
    r = _mypy(str(bad), cwd=tmp_path)
    assert r.returncode == 1
    assert r.stdout.count("error:") == 3, r.stdout


def test_the_package_passes_mypy_strict(tmp_path: Path) -> None:
    r = _mypy("-p", "wasmsand", cwd=tmp_path)
    assert r.returncode == 0, r.stdout + r.stderr


def test_the_sample_runs() -> None:
    spec_globals: dict[str, object] = {"__name__": "typing_sample"}
    exec(compile((HERE / "typing_sample.py").read_text(), "typing_sample.py", "exec"), spec_globals)
    sync_program = spec_globals["sync_program"]
    async_program = spec_globals["async_program"]
    assert callable(sync_program) and callable(async_program)
    for transport in ("inprocess", "rpc"):
        notes = sync_program(transport)
        assert notes[:4] == ["me", "exit 3", "typed", "0"]
        assert "no such pid" in notes and "killed True" in notes
        assert "merged ['/tmp/merged'] conflict ['/tmp/merged']" in notes
        assert notes[-1] == "True ['a.txt'] False"
        assert asyncio.run(async_program(transport)) == ["async", "bg", "0", "xx"]
