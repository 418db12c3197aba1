"""Background processes from Python: start a long job, keep working, come back to it.

    python examples/background_jobs.py                  # in-process
    python examples/background_jobs.py --transport rpc  # a sandboxd child, same API

A worker reads jobs on its stdin while later commands run next to it on the same files; the
agent reattaches to it by pid (as a second tool call, or a client after a restart, would),
closes its input and collects its result; a runaway loop is killed.
"""

from __future__ import annotations

import argparse

from wasmsand import Sandbox

WORKER = """
import sys
for line in sys.stdin:
    n = int(line)
    with open('/tmp/results.txt', 'a') as f:
        f.write(f'{n} squared is {n * n}\\n')
    print('done', n, flush=True)
"""


def main(transport: str) -> str:
    out = []
    with Sandbox(transport=transport) as sb:
        sb.files.write("/home/user/worker.py", WORKER)
        worker = sb.commands.run("python3 worker.py", background=True, timeout=120)
        out.append(f"worker started as pid {worker.pid}")

        for n in (3, 4):
            worker.send_stdin(f"{n}\n")
        # Its output as it comes, until it has done both.
        seen = ""
        for stdout, _stderr in worker:
            seen += stdout
            if "done 4" in seen:
                break
        # Meanwhile the sandbox takes other commands; they see the worker's files.
        r = sb.commands.run("cat /tmp/results.txt")
        out.append(f"while it runs: {r.stdout.splitlines()}")

        # Another part of the program only knows the pid.
        again = sb.commands.connect(worker.pid)
        again.send_stdin("5\n")
        again.close_stdin()
        result = again.wait(timeout=60)
        out.append(f"worker exit {result.exit_code}: {result.stdout.split()[1::2]}")

        spinner = sb.commands.run("while :; do :; done", background=True, timeout=120)
        listed = sorted((p.pid, p.running) for p in sb.commands.list())
        out.append(f"listed: {listed}")
        spinner.kill()
        r = spinner.wait()
        out.append(f"spinner: exit {r.exit_code}, {r.error_class}")
        out.append(f"results: {sb.files.read('/tmp/results.txt', format='text').count('squared')} lines")
    return "\n".join(out) + "\n"


if __name__ == "__main__":
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--transport", choices=["inprocess", "rpc"], default="inprocess")
    print(main(p.parse_args().transport), end="")
