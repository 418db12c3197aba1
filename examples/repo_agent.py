"""An agent on a real repository: the host folder is mounted (secrets hidden, never written),
the agent's candidate fixes run as best-of-N previews (each in a fork, with the repository's
tests), the winner is committed, and what changed leaves as a patch `git apply` takes, written
into the repository only at the end, when the caller says so.

    python examples/repo_agent.py PATH/TO/REPO [--transport rpc] [--apply]

Without a path it makes a small repository of its own in a temporary directory.
"""

from __future__ import annotations

import argparse
import pathlib
import subprocess
import tempfile

from wasmsand import Mount, Sandbox

# What a model would propose: candidate edits of the bug, tried all at once.
CANDIDATES = [
    "sed -i 's/return a - b/return b - a/' calc.py",
    "sed -i 's/return a - b/return a + b/' calc.py",
    "sed -i 's/return a - b/return a * b/' calc.py",
]
TESTS = "python3 test_calc.py"


def make_repo(root: pathlib.Path) -> pathlib.Path:
    root.mkdir(parents=True, exist_ok=True)
    (root / "calc.py").write_text("def add(a, b):\n    return a - b\n")
    (root / "test_calc.py").write_text(
        "from calc import add\nassert add(2, 3) == 5, add(2, 3)\nassert add(-1, 1) == 0\nprint('tests pass')\n"
    )
    (root / ".env").write_text("API_KEY=do-not-leak\n")
    return root


def main(repo: pathlib.Path, transport: str = "inprocess", apply: bool = False) -> str:
    lines: list[str] = []
    with Sandbox(transport=transport, mounts=[Mount(str(repo), "repo")]) as sb:
        sb.commands.run("cd repo")
        leaked = sb.commands.run("cat .env 2>&1 || true").stdout.strip()
        lines.append(f"secret visible: {'API_KEY' in leaked}")
        first = sb.commands.run(TESTS)
        lines.append(f"tests before: exit {first.exit_code}")

        tries = sb.best_of([f"{c} && {TESTS}" for c in CANDIDATES], concurrency=3)
        for cand, t in zip(CANDIDATES, tries):
            lines.append(f"attempt {cand.split('/')[2]!r}: exit {t.exit_code}")
        winner = next(t for t in tries if t.exit_code == 0)
        for t in tries:
            if t is not winner:
                sb.discard(t)
        sb.commit(winner)
        lines.append(f"tests after commit: {sb.commands.run(TESTS).stdout.strip()}")

        changes = sb.changes()
        lines.append("changed: " + ", ".join(f"{f.path} ({f.status})" for f in changes.files))
        if apply:
            subprocess.run(["git", "apply", "-"], input=changes.patch.encode(), cwd=repo, check=True)
            lines.append("applied to the repository")
    lines.append(f"repository now: {(repo / 'calc.py').read_text().splitlines()[1].strip()}")
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("repo", nargs="?", type=pathlib.Path)
    p.add_argument("--transport", choices=["inprocess", "rpc"], default="inprocess")
    p.add_argument("--apply", action="store_true", help="write the winning change into the repository")
    a = p.parse_args()
    if a.repo is None:
        with tempfile.TemporaryDirectory() as tmp:
            print(main(make_repo(pathlib.Path(tmp, "repo")), a.transport, a.apply), end="")
    else:
        print(main(a.repo, a.transport, a.apply), end="")
