"""A third-party MCP server for the MCP client's end-to-end tests (tests/mcp_peers.rs), on the
Python MCP SDK (PyPI `mcp==2.3.0`). The client talks to it directly (no tunnel).

    python py_mcp_client_peer.py stdio           newline-delimited JSON-RPC on stdin/stdout
    python py_mcp_client_peer.py http PORT       Streamable HTTP at http://127.0.0.1:PORT/mcp

It serves 2026-07-28 and the legacy era on the same endpoint. `tools/list` and
`resources/read` results carry `ttlMs` 60000 (the client may cache them) and the SDK's default
`cacheScope: "private"`. Tools:

- `echo(text)`: the text.
- `in_region(region)`: `region` is declared with `x-mcp-header: Region`, so a 2026-07-28 call
  must carry a matching `Mcp-Param-Region` header (the SDK answers -32020 otherwise).
- `confirm_action(target)`: asks for a form elicitation (MRTR `input_required` on 2026-07-28).
  A 2026-07-28 call that did not declare form elicitation gets `-32021` from the SDK's resolver.
- `count_slowly(steps)`: a progress notification per step.
- `touch_tools()`: publishes `notifications/tools/list_changed` to `subscriptions/listen` streams.
- `slow(seconds)`: sleeps (at most 30 s); a cancelled sleep is counted.
- `stats()`: what this process saw, as JSON: request counts per method, the protocol versions
  requests named, and how many `slow` calls started and were cancelled.

Also the prompt `greet(name)` and the resources `peer://readme` and `peer://whoami` (a private
answer: which read this was).
"""

from __future__ import annotations

import json
import sys
from collections import Counter
from typing import Annotated, Any

import anyio
from pydantic import BaseModel, Field

from mcp.server import MCPServer
from mcp.server.caching import CacheHint
from mcp.server.mcpserver.context import Context
from mcp.server.mcpserver.resolve import Elicit, Resolve

methods: Counter[str] = Counter()
versions: set[str] = set()
slow_calls = {"started": 0, "cancelled": 0}


async def count_requests(ctx: Any, call_next: Any) -> Any:
    """Server middleware: counts every inbound request by method and notes its version."""
    if ctx.request_id is not None:
        methods[ctx.method] += 1
        if ctx.protocol_version:
            versions.add(str(ctx.protocol_version))
    return await call_next(ctx)


server = MCPServer(
    "mcpwire-client-peer-py",
    version="1.0.0",
    cache_hints={
        "tools/list": CacheHint(ttl_ms=60_000),
        "resources/read": CacheHint(ttl_ms=60_000, scope="private"),
    },
    middleware=[count_requests],
)


@server.tool()
def echo(text: str) -> str:
    """Return the text as given."""
    return text


@server.tool()
def in_region(
    region: Annotated[str, Field(description="Where to run", json_schema_extra={"x-mcp-header": "Region"})],
) -> str:
    """Say which region the call ran in."""
    return f"ran in {region}"


class Confirmation(BaseModel):
    confirm: bool = Field(description="Proceed?")


def ask_confirmation(target: str) -> Elicit[Confirmation]:
    return Elicit(f"Really act on {target}?", Confirmation)


@server.tool()
def confirm_action(target: str, answer: Annotated[Confirmation, Resolve(ask_confirmation)]) -> str:
    """Ask the user to confirm before acting."""
    return f"{'confirmed' if answer.confirm else 'not confirmed'}: {target}"


@server.tool()
async def count_slowly(steps: int, ctx: Context) -> str:
    """Count up to `steps`, with a progress notification per step."""
    for i in range(1, min(steps, 20) + 1):
        await ctx.report_progress(i, steps, f"at {i}")
        await anyio.sleep(0.02)
    return f"counted {steps}"


@server.tool()
async def touch_tools(ctx: Context) -> str:
    """Tell listeners that the tool list changed."""
    await ctx.notify_tools_changed()
    return "touched"


@server.tool()
async def slow(seconds: float) -> str:
    """Sleep for `seconds` (at most 30)."""
    slow_calls["started"] += 1
    try:
        await anyio.sleep(min(seconds, 30.0))
    except anyio.get_cancelled_exc_class():
        slow_calls["cancelled"] += 1
        raise
    return "woke up"


@server.tool()
def stats() -> str:
    """What this process saw so far."""
    return json.dumps({"methods": dict(methods), "versions": sorted(versions), "slow": slow_calls})


@server.prompt()
def greet(name: str) -> str:
    """Greet someone."""
    return f"Please greet {name} warmly."


@server.resource("peer://readme", mime_type="text/plain")
def readme() -> str:
    """A static text resource."""
    return "mcpwire client peer resource"


whoami_reads = 0


@server.resource("peer://whoami", mime_type="text/plain")
def whoami() -> str:
    """Which read of this resource this was (a private answer)."""
    global whoami_reads
    whoami_reads += 1
    return f"read {whoami_reads}"


def main() -> None:
    mode = sys.argv[1] if len(sys.argv) > 1 else "stdio"
    if mode == "stdio":
        server.run("stdio")
    elif mode == "http" and len(sys.argv) == 3:
        server.run("streamable-http", host="127.0.0.1", port=int(sys.argv[2]), streamable_http_path="/mcp")
    else:
        raise SystemExit("usage: py_mcp_client_peer.py stdio | http PORT")


if __name__ == "__main__":
    main()
