// A real OpenID Connect provider for mcpwire's OAuth end-to-end test (tests/auth_oidc.rs):
// npm `oidc-provider` (pinned in package.json) on 127.0.0.1, in front of
// tests/peers/py_mcp_auth_server.py.
//
//     node oidc_provider.mjs [PORT]     (0 or nothing: a free port)
//
// Prints one JSON line on stdout once it listens: {"issuer": "http://127.0.0.1:PORT"}.
//
// What it is set up with: dynamic client registration (public native clients, PKCE required),
// resource indicators (RFC 8707: any `resource` is a resource server with the scopes `mcp` and
// `mcp:admin`, audience = the resource, opaque access tokens), token introspection for the
// resource server (the static confidential client `mcp-rs` / `mcp-rs-secret`), refresh tokens
// for every client allowed the refresh_token grant, rotated on every use, access tokens living
// OIDC_ACCESS_TOKEN_TTL seconds (default 5), and the development login and consent pages
// (`devInteractions`: any login and password are accepted).
//
// GET /__stats answers what happened so far, for the test's assertions:
// {"registrations": n, "authorizations": n, "code_grants": n, "refresh_grants": n,
//  "refresh_errors": n}.
import http from 'node:http';

import Provider from 'oidc-provider';

const requestedPort = Number(process.argv[2] ?? 0);
const ttl = Number(process.env.OIDC_ACCESS_TOKEN_TTL ?? 5);

const stats = {
  registrations: 0,
  authorizations: 0,
  code_grants: 0,
  refresh_grants: 0,
  refresh_errors: 0,
};

let handler = (_req, res) => {
  res.statusCode = 503;
  res.end();
};
const server = http.createServer((req, res) => {
  if (req.url === '/__stats') {
    res.setHeader('content-type', 'application/json');
    res.end(JSON.stringify(stats));
    return;
  }
  handler(req, res);
});

server.listen(requestedPort, '127.0.0.1', () => {
  const { port } = server.address();
  const issuer = `http://127.0.0.1:${port}`;
  const provider = new Provider(issuer, {
    clients: [
      {
        client_id: 'mcp-rs',
        client_secret: 'mcp-rs-secret',
        grant_types: [],
        response_types: [],
        redirect_uris: [],
      },
    ],
    scopes: ['openid', 'offline_access'],
    features: {
      devInteractions: { enabled: true },
      registration: { enabled: true },
      introspection: { enabled: true },
      revocation: { enabled: true },
      resourceIndicators: {
        enabled: true,
        defaultResource: async (_ctx, _client, oneOf) => oneOf,
        useGrantedResource: async () => true,
        getResourceServerInfo: async (_ctx, resource) => ({
          scope: 'mcp mcp:admin',
          audience: resource,
          accessTokenTTL: ttl,
          accessTokenFormat: 'opaque',
        }),
      },
    },
    pkce: { required: () => true },
    ttl: { AccessToken: ttl },
    // A refresh token for every client registered for the refresh_token grant: OpenID
    // Connect's `offline_access` needs `prompt=consent`, which an OAuth client (mcpwire) has no
    // reason to send, and without it oidc-provider drops the scope.
    issueRefreshToken: async (_ctx, client) => client.grantTypeAllowed('refresh_token'),
    expiresWithSession: async () => false,
    rotateRefreshToken: true,
  });
  provider.on('registration_create.success', () => {
    stats.registrations += 1;
  });
  provider.on('authorization.success', () => {
    stats.authorizations += 1;
  });
  provider.on('grant.success', (ctx) => {
    const grantType = ctx.oidc.params?.grant_type;
    if (grantType === 'refresh_token') stats.refresh_grants += 1;
    if (grantType === 'authorization_code') stats.code_grants += 1;
  });
  provider.on('grant.error', (ctx, err) => {
    if (ctx.oidc?.params?.grant_type === 'refresh_token') stats.refresh_errors += 1;
    process.stderr.write(`grant error: ${err.message} ${err.error_description ?? ''}\n`);
  });
  const callback = provider.callback();
  handler = (req, res) => callback(req, res);
  process.stdout.write(`${JSON.stringify({ issuer })}\n`);
});
