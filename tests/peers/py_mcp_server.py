"""A third-party MCP server for mcpwire's end-to-end tests, on the Python MCP SDK (PyPI `mcp==2.3.0`).

The tests in tests/python_peer.rs reach it through `mcpwire tunnel run`:

    python py_mcp_server.py stdio           newline-delimited JSON-RPC on stdin/stdout
    python py_mcp_server.py http PORT       Streamable HTTP at http://127.0.0.1:PORT/mcp

Tools: `echo` (returns its text), `count_slowly` (reports progress after each step),
`in_region` (its `region` argument is declared with `x-mcp-header`, so a 2026-07-28 call must
carry a matching `Mcp-Param-Region` header, which the tunnel adds from the last tools/list).
"""

from __future__ import annotations

import sys
from typing import Annotated

import anyio
from pydantic import Field

from mcp.server import MCPServer
from mcp.server.mcpserver.context import Context

server = MCPServer("mcpwire-e2e-py", version="1.0.0")


@server.tool()
def echo(text: str) -> str:
    """Return the text as given."""
    return text


@server.tool()
async def count_slowly(steps: int, ctx: Context) -> str:
    """Count up to `steps`, with a progress notification per step."""
    for i in range(1, steps + 1):
        await ctx.report_progress(i, steps, f"at {i}")
        await anyio.sleep(0.02)
    return f"counted {steps}"


@server.tool()
def in_region(
    region: Annotated[str, Field(description="Where to run", json_schema_extra={"x-mcp-header": "Region"})],
) -> str:
    """Say which region the call ran in."""
    return f"ran in {region}"


def main() -> None:
    mode = sys.argv[1] if len(sys.argv) > 1 else "stdio"
    if mode == "stdio":
        server.run("stdio")
    elif mode == "http" and len(sys.argv) == 3:
        server.run("streamable-http", host="127.0.0.1", port=int(sys.argv[2]), streamable_http_path="/mcp")
    else:
        raise SystemExit("usage: py_mcp_server.py stdio | http PORT")


if __name__ == "__main__":
    main()
