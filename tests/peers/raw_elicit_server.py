"""A minimal 2025-11-25 MCP server over stdio, written by hand (no SDK), for
tests/downstream_clients.rs: it asks exactly the `elicitation/create` params it is given, so
the test can check that real clients take the forms mcpwire's gateway builds, and what they
answer.

    python raw_elicit_server.py PARAMS_FILE

It answers `initialize` (2025-11-25, the `tools` capability), `ping` and `tools/list` (one tool,
`gated`); a `tools/call` of `gated` sends `elicitation/create` with the JSON of PARAMS_FILE as its
params, waits for the client's answer, and returns that answer (the `ElicitResult`, or the error)
as the tool's text. Everything else is `-32601`. Only the standard library.
"""

from __future__ import annotations

import json
import sys


def send(message: dict) -> None:
    sys.stdout.write(json.dumps(message) + "\n")
    sys.stdout.flush()


def main() -> None:
    with open(sys.argv[1], encoding="utf-8") as f:
        params = json.load(f)
    pending: dict = {}  # the elicitation's id -> the tools/call id waiting for it
    next_id = 0
    for line in sys.stdin:
        line = line.strip()
        if not line:
            continue
        msg = json.loads(line)
        method = msg.get("method")
        mid = msg.get("id")
        if method is None and mid in pending:
            answer = msg.get("result", {"error": msg.get("error")})
            send({"jsonrpc": "2.0", "id": pending.pop(mid), "result": {"content": [{"type": "text", "text": json.dumps(answer, sort_keys=True)}]}})
        elif mid is None:
            continue  # notifications
        elif method == "initialize":
            send({"jsonrpc": "2.0", "id": mid, "result": {"protocolVersion": "2025-11-25", "capabilities": {"tools": {}}, "serverInfo": {"name": "raw-elicit", "version": "1.0.0"}}})
        elif method == "ping":
            send({"jsonrpc": "2.0", "id": mid, "result": {}})
        elif method == "tools/list":
            send({"jsonrpc": "2.0", "id": mid, "result": {"tools": [{"name": "gated", "inputSchema": {"type": "object"}}]}})
        elif method == "tools/call" and msg.get("params", {}).get("name") == "gated":
            next_id += 1
            eid = f"elicit-{next_id}"
            pending[eid] = mid
            send({"jsonrpc": "2.0", "id": eid, "method": "elicitation/create", "params": params})
        else:
            send({"jsonrpc": "2.0", "id": mid, "error": {"code": -32601, "message": f"no method {method}"}})


if __name__ == "__main__":
    main()
