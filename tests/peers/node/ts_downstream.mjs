// A real downstream MCP client for mcpwire's end-to-end tests: the TypeScript SDK v2 `Client`
// (npm `@modelcontextprotocol/client`, pinned in package.json), driven by a script of steps,
// printing one JSON line per step so a Rust test can assert on what a client we did not write
// saw.
//
//     node ts_downstream.mjs [OPTIONS] --url URL
//     node ts_downstream.mjs [OPTIONS] -- COMMAND [ARGS...]        (a stdio server)
//
// Options:
//     --steps JSON     a JSON array of steps (default: [{"op": "list_tools"}]):
//                        {"op": "list_tools"}
//                        {"op": "call", "name": N, "arguments": {...}}
//                        {"op": "search", "query": Q, "limit": L}     (calls search_tools)
//                        {"op": "pause"}   prints its line, then waits for a line on stdin (or
//                                          its end): the test acts meanwhile (kills an upstream)
//                        {"op": "wait_notification", "method": M, "timeout_ms": T}
//                                          waits (default 10 s) until M has arrived since the
//                                          last step printed; ok false when it did not
//     --elicit MODE    accept | decline | cancel | none (default none: no elicitation handler
//                      and no elicitation capability declared)
//     --content JSON   the content an accept answers a form with (default {})
//     --era ERA        legacy (the SDK's default: initialize, 2025-11-25), auto (server/discover,
//                      falling back to initialize) or a version to pin (2026-07-28)
//     --timeout SECS   the timeout of every request (default 20)
//
// Output, on stdout, one JSON object per line:
//     {"op": "connect", "ok": true, "protocol_version": "...", "era": "modern"|"legacy", "server": {...}}
//     {"op": "list_tools", "ok": true, "tools": [...]}
//     {"op": "call", "ok": true, "result": {CallToolResult}, "elicitations": [{params}]}
//     {"op": ..., "ok": false, "error": {"type": ..., "code"?: ..., "message": ...}}
// Each step's "elicitations" holds the params of every elicitation the server made during it
// (an MRTR input request on 2026-07-28, an `elicitation/create` request on 2025-11-25), and its
// "notifications" the list-changed notifications that arrived meanwhile. A failed
// connect ends the run (exit 1); a failed step does not.
import { Client, StreamableHTTPClientTransport } from '@modelcontextprotocol/client';
import { StdioClientTransport } from '@modelcontextprotocol/client/stdio';
import { createInterface } from 'node:readline';

function emit(obj) {
    process.stdout.write(JSON.stringify(sortKeys(obj)) + '\n');
}

function sortKeys(v) {
    if (Array.isArray(v)) return v.map(sortKeys);
    if (v !== null && typeof v === 'object') {
        return Object.fromEntries(Object.keys(v).sort().map(k => [k, sortKeys(v[k])]));
    }
    return v;
}

function errorOf(e) {
    const out = { type: e?.constructor?.name ?? typeof e, message: String(e?.message ?? e) };
    if (typeof e?.code === 'number') out.code = e.code;
    if (e?.data !== undefined) out.data = e.data;
    return out;
}

function usage(message) {
    process.stderr.write(`ts_downstream.mjs: ${message}\n`);
    process.exit(2);
}

function parseArgs(argv) {
    const dash = argv.indexOf('--');
    const command = dash >= 0 ? argv.slice(dash + 1) : [];
    const opts = dash >= 0 ? argv.slice(0, dash) : argv;
    const args = { steps: '[{"op": "list_tools"}]', elicit: 'none', content: '{}', era: 'legacy', timeout: 20 };
    for (let i = 0; i < opts.length; i += 2) {
        const key = opts[i];
        const value = opts[i + 1];
        if (!key.startsWith('--') || value === undefined) usage(`bad option ${key}`);
        args[key.slice(2)] = value;
    }
    if (Boolean(args.url) === command.length > 0) usage('give either --url URL or -- COMMAND [ARGS...]');
    if (!['accept', 'decline', 'cancel', 'none'].includes(args.elicit)) usage(`--elicit ${args.elicit}`);
    return { args, command };
}

async function main() {
    const { args, command } = parseArgs(process.argv.slice(2));
    const steps = JSON.parse(args.steps);
    const content = JSON.parse(args.content);
    const timeout = Number(args.timeout) * 1000;
    const mode = args.era === 'legacy' || args.era === 'auto' ? args.era : { pin: args.era };
    const seen = [];
    const heard = [];
    // One line of stdin at a time, for `pause` (the end of stdin releases every pause).
    const stdinLines = [];
    const stdinWaiters = [];
    let stdinEnded = false;
    const rl = createInterface({ input: process.stdin });
    rl.on('line', line => (stdinWaiters.length ? stdinWaiters.shift()(line) : stdinLines.push(line)));
    rl.on('close', () => {
        stdinEnded = true;
        while (stdinWaiters.length) stdinWaiters.shift()(null);
    });
    const nextStdinLine = () =>
        stdinLines.length || stdinEnded ? Promise.resolve(stdinLines.shift() ?? null) : new Promise(r => stdinWaiters.push(r));

    const client = new Client(
        { name: 'mcpwire-ts-downstream', version: '1.0.0' },
        {
            capabilities: args.elicit === 'none' ? {} : { elicitation: { form: {}, url: {} } },
            versionNegotiation: { mode }
        }
    );
    if (args.elicit !== 'none') {
        client.setRequestHandler('elicitation/create', async request => {
            const params = request.params;
            seen.push(params);
            if (args.elicit !== 'accept') return { action: args.elicit };
            if (params.mode === 'url') return { action: 'accept' };
            return { action: 'accept', content };
        });
    }
    for (const method of ['notifications/tools/list_changed', 'notifications/prompts/list_changed', 'notifications/resources/list_changed']) {
        client.setNotificationHandler(method, () => {
            heard.push(method);
        });
    }
    const transport = args.url
        ? new StreamableHTTPClientTransport(new URL(args.url))
        : new StdioClientTransport({ command: command[0], args: command.slice(1), stderr: 'inherit' });
    try {
        await client.connect(transport, { timeout });
    } catch (e) {
        emit({ op: 'connect', ok: false, error: errorOf(e) });
        process.exitCode = 1;
        return;
    }
    emit({
        op: 'connect',
        ok: true,
        protocol_version: client.getNegotiatedProtocolVersion() ?? null,
        era: client.getProtocolEra() ?? null,
        server: client.getServerVersion() ?? null
    });
    for (const step of steps) {
        const op = step.op;
        // What arrived since the last step printed (a notification between two steps belongs
        // to the second), then cleared.
        const out = obj => {
            emit({ ...obj, elicitations: [...seen], notifications: [...heard] });
            seen.length = 0;
            heard.length = 0;
        };
        try {
            if (op === 'list_tools') {
                const listed = await client.listTools(undefined, { timeout, cacheMode: 'bypass' });
                out({ op, ok: true, tools: listed.tools });
            } else if (op === 'call') {
                const result = await client.callTool({ name: step.name, arguments: step.arguments ?? {} }, { timeout });
                out({ op, name: step.name, ok: true, result });
            } else if (op === 'search') {
                const argumentsOf = { query: step.query };
                if (step.limit !== undefined) argumentsOf.limit = step.limit;
                const result = await client.callTool({ name: 'search_tools', arguments: argumentsOf }, { timeout });
                out({ op, ok: true, result });
            } else if (op === 'wait_notification') {
                const until = Date.now() + (step.timeout_ms ?? 10_000);
                while (!heard.includes(step.method) && Date.now() < until) {
                    await new Promise(resolve => setTimeout(resolve, 20));
                }
                out({ op, method: step.method, ok: heard.includes(step.method) });
            } else if (op === 'pause') {
                out({ op, ok: true });
                await nextStdinLine();
            } else {
                out({ op, ok: false, error: { type: 'BadStep', message: `unknown op ${JSON.stringify(op)}` } });
            }
        } catch (e) {
            out({ op, name: step.name ?? null, ok: false, error: errorOf(e) });
        }
    }
    rl.close();
    await client.close();
}

await main();
