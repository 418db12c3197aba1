"""``AsyncSandbox`` in an asyncio agent: tool calls are coroutines, so an async framework can
run several at once without blocking its event loop.

    python examples/async_tool.py                  # in-process
    python examples/async_tool.py --transport rpc  # a sandboxd child, same API

Two candidate fixes are tried at the same time, each on its own fork; a command's output is
streamed to a coroutine as it comes; a background job runs while the agent does other work.
"""

from __future__ import annotations

import argparse
import asyncio

from wasmsand import AsyncSandbox

TEST = (
    "python3 -c 'from calc import add; r = add(2, 2); "
    "print(\"ok\" if r == 4 else f\"FAIL: 2 + 2 = {r}\"); raise SystemExit(r != 4)'"
)


async def attempt(base: AsyncSandbox, n: int, body: str) -> str:
    fork = await base.fork()
    async with fork:
        await fork.files.write("/home/user/calc.py", f"def add(a, b):\n    return {body}\n")
        r = await fork.commands.run(TEST)
        return f"attempt {n}: exit {r.exit_code} ({r.stdout.strip()})"


async def main(transport: str) -> str:
    out = []
    sb = await AsyncSandbox.create(transport=transport, timeout_ms=60_000)
    async with sb:
        # A long job in the background, started first.
        job = await sb.commands.run("seq 1 1000 | paste -sd+ | bc", background=True)

        # Two fixes at once, on two forks.
        results = await asyncio.gather(attempt(sb, 1, "a + b + 1"), attempt(sb, 2, "a + b"))
        out.extend(results)

        steps: list[str] = []

        async def on_stdout(chunk: str) -> None:
            steps.extend(line for line in chunk.splitlines() if line)

        await sb.commands.run("for i in 1 2 3; do echo step $i; sleep 0.1; done", on_stdout=on_stdout)
        out.append(f"streamed: {', '.join(steps)}")
        out.append(f"job: {(await job.wait(timeout=60)).stdout.strip()}")
    return "\n".join(out) + "\n"


if __name__ == "__main__":
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--transport", choices=["inprocess", "rpc"], default="inprocess")
    print(asyncio.run(main(p.parse_args().transport)), end="")
