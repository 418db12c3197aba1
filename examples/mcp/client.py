"""An MCP client (the official `mcp` package) using wasmsand's tools over stdio: what an agent
framework does once `sandboxd mcp` is configured (see claude_desktop_config.json here for
Claude Desktop; docs/mcp.md for other clients).

    python examples/mcp/client.py [SERVER COMMAND...]   # default: this package's sandboxd
"""

from __future__ import annotations

import sys

import anyio
from mcp import Client, StdioServerParameters


async def main(server: list[str]) -> str:
    out = []
    params = StdioServerParameters(command=server[0], args=server[1:])
    async with Client(params, read_timeout_seconds=180) as c:
        tools = await c.list_tools()
        out.append("tools: " + ", ".join(sorted(t.name for t in tools.tools)))
        s = (await c.call_tool("session_create", {})).structured_content or {}
        sid = s["session_id"]
        await c.call_tool("sandbox_run", {"command": "echo 21 > n.txt", "session_id": sid})
        r = (await c.call_tool(
            "sandbox_run", {"command": "python3 -c 'print(2 * int(open(\"n.txt\").read()))'", "session_id": sid}
        )).structured_content or {}
        out.append(f"answer: {r['stdout'].strip()} (exit {r['exit_code']})")
        await c.call_tool("session_destroy", {"session_id": sid})
    return "\n".join(out) + "\n"


if __name__ == "__main__":
    cmd = sys.argv[1:] or [sys.executable, "-m", "wasmsand._sandboxd", "mcp"]
    print(anyio.run(main, cmd), end="")
