// The TypeScript SDK v2 client (@modelcontextprotocol/client, pinned in package.json) in the
// MCP client benchmark. The same command line and result line as the Rust clients
// (bench/mcp_clients/src/lib.rs):
//
//   node client.mjs http  URL               N [WARMUP] [TIME_LIMIT_S] [CONCURRENCY]
//   node client.mjs stdio "PROGRAM ARGS..." N [WARMUP] [TIME_LIMIT_S] [CONCURRENCY]
//
// versionNegotiation 'auto' (server/discover first, 2026-07-28 when the server speaks it), as
// mcpwire's and rmcp's clients are run; then WARMUP calls and N timed calls of tools/call echo,
// each answer checked. CONCURRENCY 1 (the default): one call at a time. Above 1: CONCURRENCY
// async workers on the one Client, each awaiting one call after another while calls are left
// to hand out (the warm-up calls too), so CONCURRENCY promises are in flight at once.
import { readFileSync } from 'node:fs';
import { Client, StreamableHTTPClientTransport } from '@modelcontextprotocol/client';
import { StdioClientTransport } from '@modelcontextprotocol/client/stdio';

const TOOL = 'echo';
const TEXT = 'bench';
const usage = 'usage: node client.mjs http|stdio URL|COMMAND N [WARMUP] [TIME_LIMIT_S] [CONCURRENCY]';

function fail(message) {
  process.stderr.write(`error: ${message}\n`);
  process.exit(1);
}

function number(s, what) {
  if (!/^[0-9]+$/.test(s ?? '')) fail(`${what} must be a whole number, not ${JSON.stringify(s)}; ${usage}`);
  return Number(s);
}

function peakRssKib() {
  const m = /^VmHWM:\s*(\d+)\s*kB/m.exec(readFileSync('/proc/self/status', 'utf8'));
  return m ? Number(m[1]) : 0;
}

const [transportName, target, nText, warmupText, limitText, concurrencyText] = process.argv.slice(2);
if (!transportName || !target || !nText) {
  process.stderr.write(`${usage}\n`);
  process.exit(2);
}
const n = number(nText, 'N');
const warmup = warmupText === undefined ? 200 : number(warmupText, 'WARMUP');
const limitMs = 1000 * (limitText === undefined ? 120 : number(limitText, 'TIME_LIMIT_S'));
const concurrency = concurrencyText === undefined ? 1 : number(concurrencyText, 'CONCURRENCY');
if (concurrency < 1) fail(`CONCURRENCY must be at least 1; ${usage}`);

let transport;
if (transportName === 'http') {
  transport = new StreamableHTTPClientTransport(new URL(target));
} else if (transportName === 'stdio') {
  const [command, ...args] = target.split(/\s+/).filter((w) => w.length > 0);
  if (!command) fail('the stdio command is empty');
  transport = new StdioClientTransport({ command, args, stderr: 'inherit' });
} else {
  fail(`unknown transport ${JSON.stringify(transportName)}; ${usage}`);
}

const client = new Client(
  { name: 'mcpwire-bench-ts', version: '0.0.0' },
  { versionNegotiation: { mode: 'auto' } },
);
try {
  await client.connect(transport);
} catch (e) {
  fail(`connect: ${e?.stack ?? e}`);
}

async function call() {
  let result;
  try {
    result = await client.callTool({ name: TOOL, arguments: { text: TEXT } });
  } catch (e) {
    fail(`tools/call: ${e?.stack ?? e}`);
  }
  if (result.isError === true || result.content?.[0]?.text !== TEXT) {
    fail(`unexpected result: ${JSON.stringify(result)}`);
  }
}

// CONCURRENCY workers sharing `left` calls (and the time limit, when timed); resolves to the
// number of calls made.
async function callsAtOnce(left, timeLeft) {
  let made = 0;
  const worker = async () => {
    while (left > 0 && timeLeft()) {
      left--;
      await call();
      made++;
    }
  };
  await Promise.all(Array.from({ length: concurrency }, worker));
  return made;
}

let cpuStart, start, done;
const elapsedMs = () => Number(process.hrtime.bigint() - start) / 1e6;
if (concurrency === 1) {
  for (let i = 0; i < warmup; i++) await call();
  cpuStart = process.cpuUsage();
  start = process.hrtime.bigint();
  done = 0;
  while (done < n && elapsedMs() < limitMs) {
    await call();
    done++;
  }
} else {
  await callsAtOnce(warmup, () => true);
  cpuStart = process.cpuUsage();
  start = process.hrtime.bigint();
  done = await callsAtOnce(n, () => elapsedMs() < limitMs);
}
const secs = elapsedMs() / 1000;
const cpu = process.cpuUsage(cpuStart);
const cpuMs = Math.round((cpu.user + cpu.system) / 1000);
const rate = secs > 0 ? done / secs : 0;
const version = client.getNegotiatedProtocolVersion() ?? '?';
console.log(
  `client=ts-sdk transport=${transportName} version=${version} n=${done} secs=${secs.toFixed(3)} ` +
    `calls_per_s=${rate.toFixed(1)} cpu_ms=${cpuMs} rss_kib=${peakRssKib()} complete=${done === n ? 'yes' : 'no'} ` +
    `concurrency=${concurrency}`,
);
await client.close();
process.exit(0);
