#!/usr/bin/env bash
# MCP clients compared: the same N `tools/call echo` round trips against the same local server
# (`mcpwire dev mcp-server`), over Streamable HTTP and over stdio, made by
#   mcpwire-blocking  mcpwire's blocking client     (bench/mcp_clients/src/bin/mcpwire_blocking.rs)
#   mcpwire-smol      mcpwire's smol client         (bench/mcp_clients/src/bin/mcpwire_smol.rs)
#   rmcp              rmcp, the official Rust SDK, on the multi-thread Tokio runtime
#                     `#[tokio::main]` builds        (bench/mcp_clients/src/bin/rmcp_client.rs)
#   rmcp-current      the same on a current-thread Tokio runtime
#   ts-sdk            the TypeScript SDK v2 client on Node (bench/mcp_clients/ts/client.mjs)
# each one process of its own given (transport, URL or command, N, ..., CONCURRENCY), all in
# one run. Every client negotiates with `server/discover` (auto) and prints the version it
# agreed.
#
#   bench/mcp_clients.sh [CLIENT...]                   (default: all five; sequential)
#   CONCURRENCY=16 bench/mcp_clients.sh [CLIENT...]    (16 calls in flight)
#
# Each client makes WARMUP calls, then N timed calls; every answer is checked.
#   CONCURRENCY=1 (the default): one call at a time, on the client's main thread or task.
#   CONCURRENCY=C > 1: C calls in flight on ONE client (one HTTP client, or one stdio child
#     process): C workers share the client, each makes calls one after another while calls
#     are left (a shared counter hands out the N calls), so a new call starts as each one
#     ends; the warm-up calls are made the same way. The workers: mcpwire-blocking, C threads
#     on clones of the one handle; mcpwire-smol, C futures joined (`join_all`) on the main
#     task; rmcp and rmcp-current, C `tokio::spawn`ed tasks on clones of the `Peer`; ts-sdk,
#     C async functions awaiting `callTool` on the one `Client`. mcpwire's clients get
#     `max_exchanges` and `max_in_flight` of at least C (defaults 16 and 64). The HTTP server
#     runs a thread per connection; the stdio server serves up to 64 requests at once.
# calls/s is the timed calls over the time from the first timed call's start to the last
# one's end. Rounds alternate the clients (so a busy neighbour slows all of them); the table
# shows the median calls/s over the rounds, the median CPU time of the client process per timed
# call (user + system, all its threads; /proc/self/stat, 10 ms ticks; Node: process.cpuUsage)
# and the largest peak RSS (VmHWM of the client's own /proc/self/status, read after its last
# call). The stdio server is a child process of the client: neither its CPU nor its RSS is
# counted. Ratios are against `rmcp`: calls/s (higher is faster) and RSS (lower is smaller).
#
# Environment (defaults in brackets):
#   N_HTTP [2000]  N_STDIO [5000]  WARMUP [200]  ROUNDS [3]  CONCURRENCY [1]
#   TIME_LIMIT_S [120]  per client run (the loop stops there; the process is killed 30 s later)
#   SKIP_BUILD=1   use target/release and bench/mcp_clients/ts/node_modules as they are
#   CARGO_TARGET_DIR  where the binaries are built and looked for [./target]
# Builds: `cargo build --release -p mcpwire-cli --bin mcpwire` (the server), the bench crate
# (its own workspace: `--manifest-path bench/mcp_clients/Cargo.toml`, into the same target/),
# and `npm ci` in bench/mcp_clients/ts when its node_modules is missing. Loopback only.
# Not part of .ci/run (it takes minutes); .ci/run only checks that the bench crate builds.
set -euo pipefail

cd "$(dirname "$0")/.."
CLIENTS=("$@")
[ ${#CLIENTS[@]} -gt 0 ] || CLIENTS=(mcpwire-blocking mcpwire-smol rmcp rmcp-current ts-sdk)
N_HTTP=${N_HTTP:-2000}
N_STDIO=${N_STDIO:-5000}
WARMUP=${WARMUP:-200}
ROUNDS=${ROUNDS:-3}
TIME_LIMIT_S=${TIME_LIMIT_S:-120}
CONCURRENCY=${CONCURRENCY:-1}
case $CONCURRENCY in
    '' | *[!0-9]* | 0) echo "CONCURRENCY must be a whole number of at least 1, not '$CONCURRENCY'" >&2; exit 2 ;;
esac

TARGET_DIR=${CARGO_TARGET_DIR:-$PWD/target}
REL=$TARGET_DIR/release
SERVER=$REL/mcpwire
TS_DIR=$PWD/bench/mcp_clients/ts
WORK=$(mktemp -d "${TMPDIR:-/tmp}/mcpwire-mcp-clients.XXXXXX")
SPID=
cleanup() {
    if [ -n "$SPID" ]; then kill "$SPID" 2>/dev/null || true; wait "$SPID" 2>/dev/null || true; fi
    rm -rf "$WORK"
}
trap cleanup EXIT

if [ "${SKIP_BUILD:-0}" != 1 ]; then
    echo "== cargo build --release -p mcpwire-cli --bin mcpwire"
    cargo build --release -q -p mcpwire-cli --bin mcpwire
    echo "== cargo build --release --manifest-path bench/mcp_clients/Cargo.toml"
    cargo build --release -q --manifest-path bench/mcp_clients/Cargo.toml --target-dir "$TARGET_DIR"
    if [ ! -d "$TS_DIR/node_modules/@modelcontextprotocol/client" ]; then
        echo "== npm ci (bench/mcp_clients/ts)"
        (cd "$TS_DIR" && npm ci --no-audit --no-fund --loglevel=error)
    fi
fi

command_of() { # client -> the command line that runs it (before its arguments)
    case $1 in
        mcpwire-blocking) echo "$REL/mcpwire_blocking" ;;
        mcpwire-smol) echo "$REL/mcpwire_smol" ;;
        rmcp) echo "env RMCP_RUNTIME=multi $REL/rmcp_client" ;;
        rmcp-current) echo "env RMCP_RUNTIME=current $REL/rmcp_client" ;;
        ts-sdk) echo "node $TS_DIR/client.mjs" ;;
        *) echo "unknown client $1 (mcpwire-blocking, mcpwire-smol, rmcp, rmcp-current, ts-sdk)" >&2; exit 2 ;;
    esac
}
for c in "${CLIENTS[@]}"; do command_of "$c" >/dev/null; done

echo "== machine"
echo "$(nproc) cores ($(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ *//')), $(uname -sr)"
echo "$(rustc --version); node $(node --version)"
echo "rmcp $(sed -nE '/^name = "rmcp"$/{n;s/^version = "(.*)"/\1/p}' bench/mcp_clients/Cargo.lock)," \
    "@modelcontextprotocol/client $(node -p "require('$TS_DIR/node_modules/@modelcontextprotocol/client/package.json').version")"
echo "load average before: $(cut -d' ' -f1-3 /proc/loadavg)"

"$SERVER" dev mcp-server --listen 127.0.0.1:0 >"$WORK/server.out" 2>"$WORK/server.err" &
SPID=$!
URL=
for _ in $(seq 150); do
    URL=$(sed -nE 's/^listening on ([^ ]+).*/\1/p' "$WORK/server.out")
    [ -z "$URL" ] || break
    kill -0 "$SPID" 2>/dev/null || break
    sleep 0.1
done
if [ -z "$URL" ]; then
    echo "the server did not start:" >&2
    cat "$WORK/server.err" >&2
    exit 1
fi
STDIO_CMD="$SERVER dev mcp-server --stdio"
echo "HTTP server: $URL (pid $SPID); stdio server: $STDIO_CMD (one per client run)"
echo "N: $N_HTTP over HTTP, $N_STDIO over stdio; $WARMUP warm-up calls each; $ROUNDS rounds;" \
    "$CONCURRENCY call(s) in flight per client"

# Runs one client; appends its result line to $WORK/results.
run_one() { # client transport target n
    local client=$1 transport=$2 target=$3 n=$4 line
    # shellcheck disable=SC2046 # the command is words on purpose
    if ! line=$(timeout $((TIME_LIMIT_S + 30)) $(command_of "$client") "$transport" "$target" "$n" \
        "$WARMUP" "$TIME_LIMIT_S" "$CONCURRENCY" 2>"$WORK/err"); then
        echo "  $client over $transport failed: $(tail -n 5 "$WORK/err")" >&2
        exit 1
    fi
    echo "  $line"
    echo "$line" >>"$WORK/results"
}

for round in $(seq "$ROUNDS"); do
    echo "== round $round of $ROUNDS"
    for c in "${CLIENTS[@]}"; do
        run_one "$c" http "$URL" "$N_HTTP"
        run_one "$c" stdio "$STDIO_CMD" "$N_STDIO"
    done
done

echo
echo "load average after: $(cut -d' ' -f1-3 /proc/loadavg)"
echo
echo "$CONCURRENCY call(s) in flight per client:"
echo
echo "| transport | client | version | calls/s (median of $ROUNDS) | vs rmcp | client CPU per call | peak RSS | vs rmcp |"
echo "|---|---|---|---:|---:|---:|---:|---:|"
for transport in http stdio; do
    for c in "${CLIENTS[@]}"; do echo "$transport $c"; done
done | awk -v results="$WORK/results" '
    function field(line, key,   m) {
        if (match(line, " " key "=[^ ]+")) return substr(line, RSTART + length(key) + 2, RLENGTH - length(key) - 2)
        return ""
    }
    BEGIN {
        while ((getline line < results) > 0) {
            line = " " line
            k = field(line, "transport") " " field(line, "client")
            count[k]++
            rate[k, count[k]] = field(line, "calls_per_s") + 0
            cpu[k, count[k]] = 1000 * field(line, "cpu_ms") / (field(line, "n") + 0 > 0 ? field(line, "n") : 1)
            r = field(line, "rss_kib") + 0
            if (r > rss[k]) rss[k] = r
            version[k] = field(line, "version")
            if (field(line, "complete") != "yes") cut[k] = 1
        }
    }
    function median(k, what,   n, i, j, t, a) {
        n = count[k]
        for (i = 1; i <= n; i++) a[i] = (what == "cpu") ? cpu[k, i] : rate[k, i]
        for (i = 2; i <= n; i++) for (j = i; j > 1 && a[j - 1] > a[j]; j--) { t = a[j]; a[j] = a[j - 1]; a[j - 1] = t }
        return n % 2 ? a[(n + 1) / 2] : (a[n / 2] + a[n / 2 + 1]) / 2
    }
    { order[++rows] = $0 }
    END {
        for (i = 1; i <= rows; i++) {
            split(order[i], p, " "); k = order[i]; base = p[1] " rmcp"
            m = median(k, "rate"); mb = (base in count) ? median(base, "rate") : 0
            rr = (mb > 0) ? sprintf("%.2fx", m / mb) : "-"
            sr = (rss[base] > 0) ? sprintf("%.2fx", rss[k] / rss[base]) : "-"
            printf "| %s | %s%s | %s | %.0f | %s | %.0f µs | %.1f MiB | %s |\n", p[1], p[2], (k in cut) ? " (time limit hit)" : "", version[k], m, rr, median(k, "cpu"), rss[k] / 1024, sr
        }
    }'
