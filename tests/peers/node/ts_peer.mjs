// A third-party MCP server for the MCP client's end-to-end tests (tests/mcp_peers_ts.rs), on the
// TypeScript SDK v2 (npm `@modelcontextprotocol/server`, with `@modelcontextprotocol/node` for
// Node's http module). The client talks to it directly (no tunnel).
//
//     node ts_peer.mjs stdio          newline-delimited JSON-RPC on stdin/stdout (serveStdio)
//     node ts_peer.mjs http PORT      Streamable HTTP at http://127.0.0.1:PORT/mcp (createMcpHandler)
//
// Both serve 2026-07-28 and the legacy era (the SDK's stateless legacy fallback over HTTP; a
// connection pinned to the era of its opening message on stdio). `tools/list` results carry
// `ttlMs` 60000. The surface is the one tests/support/mcp_scenarios.rs describes:
//
// - `echo(text)`: the text.
// - `in_region(region)`: `region` carries `x-mcp-header: Region`; the SDK refuses a 2026-07-28
//   call without a matching `Mcp-Param-Region` header (-32020).
// - `confirm_action(target)`: a form elicitation (MRTR `input_required` on 2026-07-28; the SDK's
//   legacy shim turns it into an `elicitation/create` request on a legacy connection).
// - `count_slowly(steps)`: a progress notification per step.
// - `touch_tools()`: publishes `notifications/tools/list_changed` to `subscriptions/listen`.
// - `add_tool(name)`: registers a tool `name` (it answers its own name) and announces the change
//   (on stdio, where one server lives for the connection; a no-op when it exists already).
// - `slow(seconds)`: sleeps (at most 30 s); a sleep ended by cancellation is counted.
// - `stats()`: what this process saw, as JSON: requests per method, the protocol versions they
//   named, how many `slow` calls started and were cancelled.
// - the prompt `greet(name)` and the resource `peer://readme`.
//
// The requests are counted where they come in (before the SDK sees them): the HTTP bridge below
// and a wrapper around the stdio transport.
import http from 'node:http';
import { localhostHostValidation, localhostOriginValidation, toNodeHandler } from '@modelcontextprotocol/node';
import { McpServer, createMcpHandler, fromJsonSchema, inputRequired, inputResponse } from '@modelcontextprotocol/server';
import { StdioServerTransport, serveStdio } from '@modelcontextprotocol/server/stdio';

const VERSION_KEY = 'io.modelcontextprotocol/protocolVersion';

const methods = {};
const versions = new Set();
const slowCalls = { started: 0, cancelled: 0 };

/** Counts one inbound message (requests only) and notes the version it names. */
function count(message, headerVersion) {
    if (message === null || typeof message !== 'object' || Array.isArray(message)) return;
    if (typeof message.method !== 'string' || message.id === undefined) return;
    methods[message.method] = (methods[message.method] ?? 0) + 1;
    const named = message.params?._meta?.[VERSION_KEY] ?? headerVersion ?? (message.method === 'initialize' ? message.params?.protocolVersion : undefined);
    if (typeof named === 'string') versions.add(named);
}

const text = t => ({ content: [{ type: 'text', text: t }] });
const schema = (properties, required = Object.keys(properties)) => fromJsonSchema({ type: 'object', properties, required });
const confirmSchema = {
    type: 'object',
    properties: { confirm: { type: 'boolean', description: 'Proceed?' } },
    required: ['confirm']
};

/** Resolves after `ms`, or rejects when `signal` aborts first. */
function sleep(ms, signal) {
    return new Promise((resolve, reject) => {
        if (signal.aborted) return reject(signal.reason ?? new Error('cancelled'));
        const timer = setTimeout(() => {
            signal.removeEventListener('abort', onAbort);
            resolve();
        }, ms);
        const onAbort = () => {
            clearTimeout(timer);
            reject(signal.reason ?? new Error('cancelled'));
        };
        signal.addEventListener('abort', onAbort, { once: true });
    });
}

// Set in HTTP mode: the handler's publisher for subscriptions/listen streams.
let notifier;

/** One server instance (the SDK asks for one per HTTP request, one per stdio connection). */
function build() {
    const server = new McpServer(
        { name: 'mcpwire-client-peer-ts', version: '1.0.0' },
        { cacheHints: { 'tools/list': { ttlMs: 60_000 } } }
    );
    // The tools `add_tool` registered on this instance.
    const added = new Set();
    server.registerTool(
        'echo',
        { description: 'Return the text as given.', inputSchema: schema({ text: { type: 'string' } }) },
        async ({ text: t }) => text(t)
    );
    server.registerTool(
        'in_region',
        {
            description: 'Say which region the call ran in.',
            inputSchema: schema({ region: { type: 'string', description: 'Where to run', 'x-mcp-header': 'Region' } })
        },
        async ({ region }) => text(`ran in ${region}`)
    );
    server.registerTool(
        'confirm_action',
        { description: 'Ask the user to confirm before acting.', inputSchema: schema({ target: { type: 'string' } }) },
        async ({ target }, ctx) => {
            const answer = inputResponse(ctx.mcpReq.inputResponses, 'confirm');
            if (answer.kind === 'missing') {
                return inputRequired({
                    inputRequests: {
                        confirm: inputRequired.elicit({ message: `Really act on ${target}?`, requestedSchema: confirmSchema })
                    }
                });
            }
            if (answer.kind === 'elicit' && answer.action === 'accept') {
                return text(`${answer.content?.confirm === true ? 'confirmed' : 'not confirmed'}: ${target}`);
            }
            const action = answer.kind === 'elicit' ? answer.action : answer.kind;
            return { ...text(`the user did not confirm (${action === 'decline' ? 'declined' : action})`), isError: true };
        }
    );
    server.registerTool(
        'count_slowly',
        { description: 'Count up to `steps`, with a progress notification per step.', inputSchema: schema({ steps: { type: 'integer' } }) },
        async ({ steps }, ctx) => {
            const token = ctx.mcpReq._meta?.progressToken;
            for (let i = 1; i <= Math.min(steps, 20); i++) {
                if (token !== undefined) {
                    await ctx.mcpReq.notify({
                        method: 'notifications/progress',
                        params: { progressToken: token, progress: i, total: steps, message: `at ${i}` }
                    });
                }
                await sleep(20, ctx.mcpReq.signal);
            }
            return text(`counted ${steps}`);
        }
    );
    server.registerTool('touch_tools', { description: 'Tell listeners that the tool list changed.' }, async () => {
        if (notifier === undefined) server.sendToolListChanged();
        else notifier.toolsChanged();
        return text('touched');
    });
    server.registerTool(
        'add_tool',
        { description: 'Add a tool named `name` to this server.', inputSchema: schema({ name: { type: 'string' } }) },
        async ({ name }) => {
            if (!added.has(name)) {
                added.add(name);
                server.registerTool(name, { description: `Added by add_tool.` }, async () => text(name));
                if (notifier === undefined) server.sendToolListChanged();
                else notifier.toolsChanged();
            }
            return text(`added ${name}`);
        }
    );
    server.registerTool(
        'slow',
        { description: 'Sleep for `seconds` (at most 30).', inputSchema: schema({ seconds: { type: 'number' } }) },
        async ({ seconds }, ctx) => {
            slowCalls.started += 1;
            try {
                await sleep(Math.min(seconds, 30) * 1000, ctx.mcpReq.signal);
            } catch (e) {
                slowCalls.cancelled += 1;
                throw e;
            }
            return text('woke up');
        }
    );
    server.registerTool('stats', { description: 'What this process saw so far.' }, async () =>
        text(JSON.stringify({ methods, versions: [...versions].sort(), slow: slowCalls }))
    );
    server.registerPrompt(
        'greet',
        { description: 'Greet someone.', argsSchema: schema({ name: { type: 'string' } }) },
        async ({ name }) => ({ messages: [{ role: 'user', content: { type: 'text', text: `Please greet ${name} warmly.` } }] })
    );
    server.registerResource('readme', 'peer://readme', { description: 'A static text resource.', mimeType: 'text/plain' }, async uri => ({
        contents: [{ uri: uri.href, mimeType: 'text/plain', text: 'mcpwire client peer resource' }]
    }));
    return server;
}

/** The stdio transport, with every inbound message counted before the SDK sees it. */
class CountingTransport {
    constructor(inner) {
        this.inner = inner;
        inner.onmessage = (message, extra) => {
            count(message);
            this.onmessage?.(message, extra);
        };
        inner.onclose = () => this.onclose?.();
        inner.onerror = e => this.onerror?.(e);
    }
    start() {
        return this.inner.start();
    }
    close() {
        return this.inner.close();
    }
    send(message, options) {
        return this.inner.send(message, options);
    }
}

function serveHttp(port) {
    const handler = createMcpHandler(() => build(), { onerror: () => {} });
    notifier = handler.notify;
    const node = toNodeHandler(handler);
    const validHost = localhostHostValidation();
    const validOrigin = localhostOriginValidation();
    const server = http.createServer(async (req, res) => {
        if (!validHost(req, res) || !validOrigin(req, res)) return;
        if (new URL(req.url ?? '/', 'http://127.0.0.1').pathname !== '/mcp') {
            res.writeHead(404).end();
            return;
        }
        let parsed;
        if (req.method === 'POST') {
            const chunks = [];
            for await (const c of req) chunks.push(c);
            try {
                parsed = JSON.parse(Buffer.concat(chunks).toString('utf8'));
            } catch {
                res.writeHead(400, { 'content-type': 'text/plain' }).end('not JSON');
                return;
            }
            const header = req.headers['mcp-protocol-version'];
            for (const m of Array.isArray(parsed) ? parsed : [parsed]) count(m, typeof header === 'string' ? header : undefined);
        }
        await node(req, res, parsed);
    });
    server.listen(port, '127.0.0.1', () => console.error(`listening on 127.0.0.1:${port}`));
}

const mode = process.argv[2] ?? 'stdio';
if (mode === 'stdio') {
    serveStdio(() => build(), { transport: new CountingTransport(new StdioServerTransport()), onerror: () => {} });
} else if (mode === 'http' && process.argv.length === 4) {
    serveHttp(Number(process.argv[3]));
} else {
    console.error('usage: node ts_peer.mjs stdio | http PORT');
    process.exit(2);
}
