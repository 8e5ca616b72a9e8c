"""A real downstream MCP client for mcpwire's end-to-end tests: the Python MCP SDK's `Client`
(PyPI `mcp==2.3.0`), driven by a script of steps, printing one JSON line per step so a Rust
test can assert on what a client we did not write saw.

    python py_mcp_downstream.py [OPTIONS] --url URL
    python py_mcp_downstream.py [OPTIONS] -- COMMAND [ARGS...]       (a stdio server)

Options:
    --steps JSON     a JSON array of steps (default: [{"op": "list_tools"}]):
                       {"op": "list_tools"}
                       {"op": "call", "name": N, "arguments": {...}}
                       {"op": "search", "query": Q, "limit": L}     (calls search_tools)
                       {"op": "list_prompts"}, {"op": "get_prompt", "name": N, "arguments": {...}}
                       {"op": "list_resources"}, {"op": "read_resource", "uri": U}
                       {"op": "pause"}    prints its line, then waits for a line on stdin (or
                                          its end): the test acts meanwhile (kills an upstream)
    --elicit MODE    accept | decline | cancel | none (default none: no elicitation callback,
                     so the client declares no elicitation capability at all)
    --content JSON   the content an accept answers a form with (default {})
    --era ERA        auto (the SDK's default: server/discover, falling back to initialize),
                     legacy (initialize, 2025-11-25) or a modern version (2026-07-28)
    --timeout SECS   the read timeout of every request (default 20)

Output, on stdout, one JSON object per line:
    {"op": "connect", "ok": true, "protocol_version": "...", "server": {...}}
    {"op": "list_tools", "ok": true, "tools": [{"name", "description", "inputSchema", ...}]}
    {"op": "call", "ok": true, "result": {CallToolResult}, "elicitations": [{params}]}
    {"op": ..., "ok": false, "error": {"type": ..., "code"?: ..., "message": ...}}
Each step's "elicitations" holds the params of every elicitation the server made during it
(form and URL mode alike), as the SDK handed them to the callback, and its "notifications" the
methods of the server notifications the SDK surfaced meanwhile (`notifications/tools/list_changed`,
...). A failed connect ends the
run (exit 1); a failed step does not.
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

import anyio
import anyio.to_thread
import mcp_types as types
from mcp.client import Client
from mcp.client.stdio import StdioServerParameters
from mcp.shared.exceptions import MCPError


def emit(obj: dict[str, Any]) -> None:
    sys.stdout.write(json.dumps(obj, sort_keys=True) + "\n")
    sys.stdout.flush()


def dump(model: Any) -> Any:
    return model.model_dump(by_alias=True, mode="json", exclude_none=True)


def error_of(e: BaseException) -> dict[str, Any]:
    out: dict[str, Any] = {"type": type(e).__name__, "message": str(e)}
    if isinstance(e, MCPError):
        out["code"] = e.error.code
        out["message"] = e.error.message
        if e.error.data is not None:
            out["data"] = e.error.data
    return out


def parse_args(argv: list[str]) -> tuple[argparse.Namespace, list[str]]:
    command: list[str] = []
    if "--" in argv:
        i = argv.index("--")
        argv, command = argv[:i], argv[i + 1 :]
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--url")
    p.add_argument("--steps", default='[{"op": "list_tools"}]')
    p.add_argument("--elicit", choices=["accept", "decline", "cancel", "none"], default="none")
    p.add_argument("--content", default="{}")
    p.add_argument("--era", default="auto")
    p.add_argument("--timeout", type=float, default=20.0)
    args = p.parse_args(argv)
    if bool(args.url) == bool(command):
        p.error("give either --url URL or -- COMMAND [ARGS...]")
    return args, command


async def run(args: argparse.Namespace, command: list[str]) -> int:
    steps = json.loads(args.steps)
    content = json.loads(args.content)
    seen: list[Any] = []
    heard: list[str] = []

    async def on_message(message: Any) -> None:
        if isinstance(message, Exception):
            return
        inner = getattr(message, "root", message)
        method = getattr(inner, "method", None)
        if isinstance(method, str):
            heard.append(method)

    async def on_elicit(context: Any, params: types.ElicitRequestParams) -> types.ElicitResult:
        seen.append(dump(params))
        if args.elicit == "accept":
            if getattr(params, "mode", "form") == "url":
                return types.ElicitResult(action="accept")
            return types.ElicitResult(action="accept", content=content)
        return types.ElicitResult(action=args.elicit)

    server: Any
    if args.url:
        server = args.url
    else:
        server = StdioServerParameters(command=command[0], args=command[1:])
    options: dict[str, Any] = {
        "mode": args.era,
        "read_timeout_seconds": args.timeout,
        "message_handler": on_message,
    }
    if args.elicit != "none":
        options["elicitation_callback"] = on_elicit
    try:
        async with Client(server, **options) as client:
            info = client.server_info
            emit(
                {
                    "op": "connect",
                    "ok": True,
                    "protocol_version": client.protocol_version,
                    "server": dump(info) if info is not None else None,
                }
            )
            for step in steps:
                await run_step(client, step, seen, heard)
    except Exception as e:  # the connect, or the session ending under a step
        emit({"op": "connect", "ok": False, "error": error_of(e)})
        return 1
    return 0


async def run_step(client: Client, step: dict[str, Any], seen: list[Any], heard: list[str]) -> None:
    op = step.get("op")
    seen.clear()
    heard.clear()

    def out(obj: dict[str, Any]) -> None:
        emit({**obj, "elicitations": list(seen), "notifications": list(heard)})

    try:
        if op == "list_tools":
            listed = await client.list_tools(cache_mode="bypass")
            out({"op": op, "ok": True, "tools": [dump(t) for t in listed.tools]})
        elif op == "call":
            result = await client.call_tool(step["name"], step.get("arguments") or {})
            out({"op": op, "name": step["name"], "ok": True, "result": dump(result)})
        elif op == "search":
            arguments: dict[str, Any] = {"query": step["query"]}
            if "limit" in step:
                arguments["limit"] = step["limit"]
            result = await client.call_tool("search_tools", arguments)
            out({"op": op, "ok": True, "result": dump(result)})
        elif op == "list_prompts":
            listed = await client.list_prompts()
            out({"op": op, "ok": True, "prompts": [dump(p) for p in listed.prompts]})
        elif op == "get_prompt":
            result = await client.get_prompt(step["name"], step.get("arguments") or {})
            out({"op": op, "name": step["name"], "ok": True, "result": dump(result)})
        elif op == "list_resources":
            listed = await client.list_resources()
            out({"op": op, "ok": True, "resources": [dump(r) for r in listed.resources]})
        elif op == "read_resource":
            result = await client.read_resource(step["uri"])
            out({"op": op, "uri": step["uri"], "ok": True, "result": dump(result)})
        elif op == "pause":
            out({"op": op, "ok": True})
            await anyio.to_thread.run_sync(sys.stdin.readline)
        else:
            out({"op": op, "ok": False, "error": {"type": "BadStep", "message": f"unknown op {op!r}"}})
    except Exception as e:
        out({"op": op, "name": step.get("name"), "ok": False, "error": error_of(e)})


def main() -> None:
    args, command = parse_args(sys.argv[1:])
    sys.exit(anyio.run(run, args, command))


if __name__ == "__main__":
    main()
