"""An agent tool loop: a model proposes shell commands, the sandbox runs them, the output goes
back into the transcript, until the task is done or the step budget runs out.

The "model" here is a scripted stand-in so the example runs offline; replace `propose` with a
call to your LLM that returns the next command (or None when it is done). Every command runs
with a per-step timeout, and output is capped, so a bad command costs one turn, not the loop.

    python examples/agent_loop.py [--transport rpc]
"""

from __future__ import annotations

import argparse

from wasmsand import Sandbox

TASK = "Make tests.sh pass: add() in calc.py must add."


def propose(transcript: list[tuple[str, str]]) -> str | None:
    """The next command given what happened so far (a scripted stand-in for a model)."""
    plan = [
        "cat calc.py",
        "bash tests.sh",
        "sed -i 's/return a - b/return a + b/' calc.py",
        "bash tests.sh",
    ]
    if transcript and transcript[-1][0] == "bash tests.sh" and "PASS" in transcript[-1][1]:
        return None
    return plan[len(transcript)] if len(transcript) < len(plan) else None


def run_tool(sb: Sandbox, command: str) -> str:
    """What the model sees of a command: exit status and output, as a tool result."""
    r = sb.commands.run(command, timeout_ms=5_000)
    text = r.stdout + r.stderr
    if r.error_class:
        text += f"[{r.error_class}]\n"
    return f"exit {r.exit_code}\n{text}"


def main(transport: str, max_steps: int = 8) -> str:
    log = [f"task: {TASK}"]
    with Sandbox(transport=transport) as sb:
        sb.files.write("/home/user/calc.py", "def add(a, b):\n    return a - b\n")
        sb.files.write(
            "/home/user/tests.sh",
            "python3 -c 'from calc import add; assert add(2, 3) == 5' && echo PASS || echo FAIL\n",
        )
        transcript: list[tuple[str, str]] = []
        for _ in range(max_steps):
            command = propose(transcript)
            if command is None:
                break
            result = run_tool(sb, command)
            transcript.append((command, result))
            log.append(f"$ {command}\n{result}".rstrip())
        done = transcript and "PASS" in transcript[-1][1]
        log.append("done" if done else "gave up")
    return "\n".join(log) + "\n"


if __name__ == "__main__":
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--transport", choices=["inprocess", "rpc"], default="inprocess")
    print(main(p.parse_args().transport), end="")
