"""wasmsand from Python: a shell, files and python3 in a sandbox, on either transport.

    python examples/quickstart.py               # in-process (the GIL is released while a command runs)
    python examples/quickstart.py --transport rpc   # a sandboxd child over pipes, same API
"""

from __future__ import annotations

import argparse

from wasmsand import Sandbox


def main(transport: str) -> str:
    out = []
    with Sandbox(transport=transport, timeout_ms=10_000) as sb:
        sb.files.write("/home/user/notes.txt", "b\na\nc\na\n")
        r = sb.commands.run("sort notes.txt | uniq -c | sort -rn | head -1")
        out.append(f"most common: {r.stdout.strip()}")

        r = sb.commands.run("python3 -c 'print(sum(range(10)))'")
        out.append(f"python says: {r.stdout.strip()}")

        # A failing command is a result, not an exception.
        r = sb.commands.run("ls /nope")
        out.append(f"ls exit {r.exit_code}: {r.stderr.strip()}")

        # Limits hold and the sandbox stays usable.
        r = sb.commands.run("while :; do :; done", timeout_ms=200)
        out.append(f"loop: exit {r.exit_code}, {r.error_class}")
        out.append(f"after: {sb.commands.run('echo still here').stdout.strip()}")
    return "\n".join(out) + "\n"


if __name__ == "__main__":
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--transport", choices=["inprocess", "rpc"], default="inprocess")
    print(main(p.parse_args().transport), end="")
