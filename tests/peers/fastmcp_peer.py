"""A third-party MCP server for the MCP client's end-to-end tests (tests/mcp_peers_fastmcp.rs), on
FastMCP (PyPI `fastmcp==4.1.6`, which runs on the Python SDK `mcp==2.3.0`). The client talks to
it directly (no tunnel).

    python fastmcp_peer.py stdio           newline-delimited JSON-RPC on stdin/stdout
    python fastmcp_peer.py http PORT       Streamable HTTP at http://127.0.0.1:PORT/mcp

It serves the surface of tests/support/mcp_scenarios.rs, written the FastMCP way:

- `cache_ttl=60, cache_scope="private"` on the server: FastMCP puts `ttlMs` 60000 and
  `cacheScope: "private"` on every cacheable result (the lists, `server/discover`,
  `resources/read`); it has no per-component hint.
- `confirm_action(target)` asks for a form elicitation with FastMCP's guard pattern on
  2026-07-28 (return an `InputRequiredResult`, read `ctx.input_responses` on the retry) and
  with `ctx.elicit()` on the legacy era. A 2026-07-28 call that did not declare the form
  elicitation capability gets `-32021` (missing required client capability) with
  `requiredCapabilities`, which FastMCP passes through as a JSON-RPC error.
- `touch_tools()` sends `notifications/tools/list_changed` with `ctx.send_notification`: FastMCP
  relates it to the running request, so on 2026-07-28 it rides the `tools/call` response
  stream. FastMCP 4.1.6 does not serve `subscriptions/listen`.
- `stats()` counts requests by method with a FastMCP middleware.

Also `echo`, `in_region` (`x-mcp-header: Region`), `count_slowly` (progress), `slow`, the prompt
`greet` and the resources `peer://readme` and `peer://whoami`.
"""

from __future__ import annotations

import json
import os
import sys
from collections import Counter
from typing import Annotated, Any

# Read by FastMCP's settings at import: no banner, and never a look-up of newer releases.
os.environ.setdefault("FASTMCP_SHOW_SERVER_BANNER", "false")
os.environ.setdefault("FASTMCP_CHECK_FOR_UPDATES", "off")

import anyio  # noqa: E402
import mcp_types  # noqa: E402
from fastmcp import Context, FastMCP  # noqa: E402
from fastmcp.exceptions import ToolError  # noqa: E402
from fastmcp.server.middleware import Middleware, MiddlewareContext  # noqa: E402
from mcp.shared.exceptions import MCPError  # noqa: E402
from mcp_types.jsonrpc import MISSING_REQUIRED_CLIENT_CAPABILITY  # noqa: E402
from pydantic import BaseModel, Field  # noqa: E402

methods: Counter[str] = Counter()
versions: set[str] = set()
slow_calls = {"started": 0, "cancelled": 0}
whoami_reads = 0


class CountRequests(Middleware):
    """Counts every request by method and notes the protocol version it named."""

    async def on_request(self, context: MiddlewareContext[Any], call_next: Any) -> Any:
        ctx = context.fastmcp_context
        rc = ctx.request_context if ctx is not None else None
        http = rc.request if rc is not None else None
        # To check the `Mcp-Param-*` headers of a 2026-07-28 `tools/call`, the SDK runs the
        # server's own `tools/list` handler (through this middleware) inside that HTTP request;
        # only what came over the wire is counted.
        wire_method = http.headers.get("mcp-method") if http is not None else None
        if context.method and wire_method in (None, context.method):
            methods[context.method] += 1
            if rc is not None and rc.protocol_version:
                versions.add(str(rc.protocol_version))
        return await call_next(context)


mcp = FastMCP(
    "mcpwire-client-peer-fastmcp",
    version="1.0.0",
    cache_ttl=60,
    cache_scope="private",
    middleware=[CountRequests()],
)


@mcp.tool
def echo(text: str) -> str:
    """Return the text as given."""
    return text


@mcp.tool
def in_region(
    region: Annotated[str, Field(description="Where to run", json_schema_extra={"x-mcp-header": "Region"})],
) -> str:
    """Say which region the call ran in."""
    return f"ran in {region}"


class Confirmation(BaseModel):
    confirm: bool = Field(description="Proceed?")


CONFIRM_SCHEMA = {
    "type": "object",
    "properties": {"confirm": {"type": "boolean", "description": "Proceed?"}},
    "required": ["confirm"],
}


def declared_form_elicitation(ctx: Context) -> bool:
    caps = ctx.session.client_capabilities
    elicitation = caps.elicitation if caps is not None else None
    return elicitation is not None and (elicitation.form is not None or elicitation.url is None)


@mcp.tool
async def confirm_action(target: str, ctx: Context) -> str | mcp_types.InputRequiredResult:
    """Ask the user to confirm before acting."""
    if ctx.request_context is None or ctx.request_context.protocol_version != "2026-07-28":
        # The legacy era: a server-to-client elicitation/create request.
        answer = await ctx.elicit(f"Really act on {target}?", Confirmation)
        if answer.action != "accept":
            raise ToolError(f"the user chose {answer.action}: decline")
        return f"{'confirmed' if answer.data.confirm else 'not confirmed'}: {target}"
    if not declared_form_elicitation(ctx):
        raise MCPError(
            code=MISSING_REQUIRED_CLIENT_CAPABILITY,
            message="confirm_action needs the form elicitation capability",
            data={"requiredCapabilities": {"elicitation": {"form": {}}}},
        )
    responses = ctx.input_responses
    if not responses or "confirm" not in responses:
        return mcp_types.InputRequiredResult(
            input_requests={
                "confirm": mcp_types.ElicitRequest(
                    params=mcp_types.ElicitRequestFormParams(
                        message=f"Really act on {target}?", requested_schema=CONFIRM_SCHEMA
                    )
                )
            },
            request_state=json.dumps({"target": target}),
        )
    answer = responses["confirm"]
    action = getattr(answer, "action", None)
    if action != "accept":
        raise ToolError(f"the user chose {action}: decline")
    content = getattr(answer, "content", None) or {}
    return f"{'confirmed' if content.get('confirm') else 'not confirmed'}: {target}"


@mcp.tool
async def count_slowly(steps: int, ctx: Context) -> str:
    """Count up to `steps`, with a progress notification per step."""
    for i in range(1, min(steps, 20) + 1):
        await ctx.report_progress(i, steps, f"at {i}")
        await anyio.sleep(0.02)
    return f"counted {steps}"


@mcp.tool
async def touch_tools(ctx: Context) -> str:
    """Tell the client that the tool list changed."""
    await ctx.send_notification(mcp_types.ToolListChangedNotification())
    return "touched"


@mcp.tool
async def slow(seconds: float) -> str:
    """Sleep for `seconds` (at most 30)."""
    slow_calls["started"] += 1
    try:
        await anyio.sleep(min(seconds, 30.0))
    except anyio.get_cancelled_exc_class():
        slow_calls["cancelled"] += 1
        raise
    return "woke up"


@mcp.tool
def stats() -> str:
    """What this process saw so far."""
    return json.dumps(
        {
            "methods": dict(methods),
            "versions": sorted(versions),
            "slow": slow_calls,
            "whoami_reads": whoami_reads,
        }
    )


@mcp.prompt
def greet(name: str) -> str:
    """Greet someone."""
    return f"Please greet {name} warmly."


@mcp.resource("peer://readme", mime_type="text/plain")
def readme() -> str:
    """A static text resource."""
    return "mcpwire client peer resource"


@mcp.resource("peer://whoami", mime_type="text/plain")
def whoami() -> str:
    """Who asked, as the server saw it (a private answer: cached per authorization context)."""
    global whoami_reads
    whoami_reads += 1
    return f"read {whoami_reads}"


def main() -> None:
    mode = sys.argv[1] if len(sys.argv) > 1 else "stdio"
    if mode == "stdio":
        mcp.run("stdio", show_banner=False)
    elif mode == "http" and len(sys.argv) == 3:
        mcp.run("http", show_banner=False, host="127.0.0.1", port=int(sys.argv[2]), path="/mcp")
    else:
        raise SystemExit("usage: fastmcp_peer.py stdio | http PORT")


if __name__ == "__main__":
    main()
