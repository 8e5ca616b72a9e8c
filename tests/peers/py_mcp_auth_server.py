"""A protected MCP server for mcpwire's OAuth end-to-end test (tests/auth_oidc.rs), on the Python
MCP SDK (PyPI `mcp==2.3.0`) as a resource server of a real authorization server
(tests/peers/node/oidc_provider.mjs, npm `oidc-provider`).

    python py_mcp_auth_server.py PORT ISSUER     Streamable HTTP at http://127.0.0.1:PORT/mcp

The SDK serves the Protected Resource Metadata (authorization server: ISSUER, scopes: `mcp`) and
answers 401 with `WWW-Authenticate` without a valid token. Tokens are checked by introspection
at ISSUER (as the confidential client `mcp-rs`), and must be for this server's URL (RFC 8707
audience). Tools: `echo` (scope `mcp`) and `admin` (also needs `mcp:admin`: without it the
call is answered `403` `insufficient_scope`, the challenge naming `mcp:admin`, by the small ASGI
wrapper below, the SDK having no per-tool scopes).
"""

from __future__ import annotations

import json
import logging
import sys
import time

import httpx2 as httpx  # the HTTP client mcp 2.3.0 depends on
import uvicorn
from starlette.types import ASGIApp, Receive, Scope, Send

from mcp.server import MCPServer
from mcp.server.auth.middleware.auth_context import get_access_token
from mcp.server.auth.provider import AccessToken
from mcp.server.auth.settings import AuthSettings

RS_CLIENT = ("mcp-rs", "mcp-rs-secret")
ADMIN_SCOPE = "mcp:admin"


class IntrospectionVerifier:
    """RFC 7662 introspection at the authorization server."""

    def __init__(self, endpoint: str, resource: str):
        self.endpoint = endpoint
        self.resource = resource

    async def verify_token(self, token: str) -> AccessToken | None:
        async with httpx.AsyncClient(timeout=10) as client:
            r = await client.post(self.endpoint, data={"token": token}, auth=RS_CLIENT)
        if r.status_code != 200:
            return None
        info = r.json()
        if not info.get("active"):
            return None
        aud = info.get("aud")
        auds = aud if isinstance(aud, list) else [aud]
        resource = next((a for a in auds if isinstance(a, str) and a.rstrip("/") == self.resource), None)
        return AccessToken(
            token=token,
            client_id=info.get("client_id", ""),
            scopes=(info.get("scope") or "").split(),
            expires_at=info.get("exp"),
            resource=resource,
            subject=info.get("sub"),
            claims={"iss": info.get("iss")},
        )


class ToolScopes:
    """Answers a `tools/call` of `admin` with 403 insufficient_scope unless the token has
    `mcp:admin` (a missing or bad token is left to the SDK's 401)."""

    def __init__(self, app: ASGIApp, verifier: IntrospectionVerifier, metadata_url: str):
        self.app = app
        self.verifier = verifier
        self.metadata_url = metadata_url

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope["method"] != "POST" or scope["path"] != "/mcp":
            return await self.app(scope, receive, send)
        messages = []
        body = b""
        while True:
            message = await receive()
            messages.append(message)
            if message["type"] != "http.request":
                break
            body += message.get("body", b"")
            if not message.get("more_body"):
                break
        try:
            msg = json.loads(body)
        except ValueError:
            msg = None
        if (
            isinstance(msg, dict)
            and msg.get("method") == "tools/call"
            and isinstance(msg.get("params"), dict)
            and msg["params"].get("name") == "admin"
        ):
            headers = dict(scope["headers"])
            auth = headers.get(b"authorization", b"").decode()
            info = await self.verifier.verify_token(auth[7:]) if auth.lower().startswith("bearer ") else None
            if info is not None and ADMIN_SCOPE not in info.scopes:
                challenge = (
                    f'Bearer error="insufficient_scope", scope="{ADMIN_SCOPE}", '
                    f'resource_metadata="{self.metadata_url}", error_description="admin needs {ADMIN_SCOPE}"'
                )
                out = json.dumps({"error": "insufficient_scope"}).encode()
                await send(
                    {
                        "type": "http.response.start",
                        "status": 403,
                        "headers": [
                            (b"content-type", b"application/json"),
                            (b"content-length", str(len(out)).encode()),
                            (b"www-authenticate", challenge.encode()),
                        ],
                    }
                )
                await send({"type": "http.response.body", "body": out})
                return

        async def replay() -> dict:
            if messages:
                return messages.pop(0)
            return await receive()

        await self.app(scope, replay, send)


def main() -> None:
    if len(sys.argv) != 3:
        raise SystemExit("usage: py_mcp_auth_server.py PORT ISSUER")
    port, issuer = int(sys.argv[1]), sys.argv[2]
    logging.getLogger("httpx2").setLevel(logging.WARNING)
    logging.getLogger("httpx").setLevel(logging.WARNING)
    resource = f"http://127.0.0.1:{port}/mcp"
    metadata_url = f"http://127.0.0.1:{port}/.well-known/oauth-protected-resource/mcp"
    for _ in range(100):
        try:
            config = httpx.get(f"{issuer}/.well-known/openid-configuration", timeout=5).json()
            break
        except httpx.HTTPError:
            time.sleep(0.1)
    else:
        raise SystemExit(f"no authorization server at {issuer}")
    verifier = IntrospectionVerifier(config["introspection_endpoint"], resource)
    server = MCPServer(
        "mcpwire-e2e-auth-py",
        version="1.0.0",
        token_verifier=verifier,
        auth=AuthSettings(
            issuer_url=issuer,
            resource_server_url=resource,
            required_scopes=["mcp"],
            validate_token_resource=True,
        ),
    )

    @server.tool()
    def echo(text: str) -> str:
        """Return the text as given."""
        return text

    @server.tool()
    def admin() -> str:
        """An administrative action: needs the scope mcp:admin."""
        token = get_access_token()
        return f"admin ok for {token.subject if token else '?'}"

    app = ToolScopes(server.streamable_http_app(streamable_http_path="/mcp"), verifier, metadata_url)
    uvicorn.run(app, host="127.0.0.1", port=port, log_level="warning")


if __name__ == "__main__":
    main()
