#!/usr/bin/env bash
# The tunnel path on loopback: MCP client -> `mcpwire dev control-plane` -> `mcpwire tunnel run`
# -> `mcpwire dev mcp-server`, against the same reference server called directly, in one run.
#
#   bench/tunnel.sh [DRIVER...]          (default: blocking smol)
#
# For each driver, two `tunnel run` processes (both with --control-plane.max-inflight LOAD_C):
#   a) MCP forwards at the default concurrency (10): a latency run (1 request in flight), then
#      a load run (LOAD_C in flight);
#   b) --mcp.max-concurrent-requests LOAD_C: the same load run.
# Each run alternates direct and tunnel rounds (cli/examples/tunnel_load.rs); the latency run
# also times the floor of the tunnel path in the same rounds (the three loopback HTTP exchanges
# the path adds, made directly with the same body sizes: tunnel_load --floor) and gives the added
# latency as a ratio to it. The tunnel
# client's peak RSS is the VmHWM of its /proc status after each run. The stripped size of the
# release binary is measured on a stripped copy.
# A driver the binary says is not built is skipped, with its message.
#
# Environment (defaults in brackets):
#   N_LATENCY [4000]  requests per target at 1 in flight      N_LOAD [20000]  at LOAD_C in flight
#   LOAD_C [100]      in flight during the load run             ROUNDS [4]      alternations
#   TIME_LIMIT_S [300] per run
#   TUNNEL_ARGS       extra `tunnel run` flags (after the bench's own)
#   SKIP_BUILD=1      use target/release as it is
set -euo pipefail

cd "$(dirname "$0")/.."
DRIVERS=("$@")
[ ${#DRIVERS[@]} -gt 0 ] || DRIVERS=(blocking smol)
N_LATENCY=${N_LATENCY:-4000}
N_LOAD=${N_LOAD:-20000}
LOAD_C=${LOAD_C:-100}
ROUNDS=${ROUNDS:-4}
TIME_LIMIT_S=${TIME_LIMIT_S:-300}
EXTRA=()
[ -z "${TUNNEL_ARGS:-}" ] || read -r -a EXTRA <<<"$TUNNEL_ARGS"

TARGET_DIR=${CARGO_TARGET_DIR:-target}
BIN=$TARGET_DIR/release/mcpwire
LOAD=$TARGET_DIR/release/examples/tunnel_load
WORK=$(mktemp -d "${TMPDIR:-/tmp}/mcpwire-bench.XXXXXX")
PIDS=()
TPID=
cleanup() {
    for p in ${TPID:+"$TPID"} ${PIDS[@]+"${PIDS[@]}"}; do kill "$p" 2>/dev/null || true; done
    wait 2>/dev/null || true
    rm -rf "$WORK"
}
trap cleanup EXIT

if [ "${SKIP_BUILD:-0}" != 1 ]; then
    echo "== cargo build --release -p mcpwire-cli --bin mcpwire --example tunnel_load"
    cargo build --release -q -p mcpwire-cli --bin mcpwire --example tunnel_load
fi

echo "== machine"
echo "$(nproc) cores ($(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ *//')), $(uname -sr), $(rustc --version)"
echo "load average before: $(cut -d' ' -f1-3 /proc/loadavg)"

echo "== binary"
cp "$BIN" "$WORK/mcpwire.stripped"
strip "$WORK/mcpwire.stripped"
size_of() { stat -c %s "$1"; }
mib() { awk -v b="$1" 'BEGIN { printf "%.2f MiB (%d bytes)", b / 1048576, b }'; }
echo "release binary as built (both drivers): $(mib "$(size_of "$BIN")")"
echo "stripped copy: $(mib "$(size_of "$WORK/mcpwire.stripped")")"

# Waits until FILE has a line matching PATTERN (or PID dies, or 15 s pass); prints the line.
wait_line() {
    local file=$1 pattern=$2 pid=$3
    for _ in $(seq 150); do
        if grep -m1 -E "$pattern" "$file" 2>/dev/null; then return 0; fi
        kill -0 "$pid" 2>/dev/null || return 1
        sleep 0.1
    done
    return 1
}

start_server() { # name, then the command; sets URL to the first word after 'listening on'
    local name=$1; shift
    "$@" >"$WORK/$name.out" 2>"$WORK/$name.err" &
    local pid=$!
    PIDS+=("$pid")
    local line
    if ! line=$(wait_line "$WORK/$name.out" '^listening on ' "$pid"); then
        echo "$name did not start:" >&2
        cat "$WORK/$name.err" >&2
        exit 1
    fi
    URL=$(sed -E 's/^listening on ([^ ]+).*/\1/' <<<"$line")
}

export MCPWIRE_BENCH_KEY="bench-$RANDOM-$RANDOM"
start_server mcp-server "$BIN" dev mcp-server --listen 127.0.0.1:0
MCP_URL=$URL
start_server control-plane "$BIN" dev control-plane --listen 127.0.0.1:0 --api-key env:MCPWIRE_BENCH_KEY
CP_URL=$URL
echo "reference server $MCP_URL, control plane $CP_URL"

hwm() { awk '/^VmHWM/ { print $2 }' "/proc/$1/status"; }
kib_mib() { awk -v k="$1" 'BEGIN { printf "%.1f MiB", k / 1024 }'; }

# Starts `tunnel run --driver $1` for tunnel id $2 with `--mcp.max-concurrent-requests $3`;
# sets TPID and HEALTH, or returns 3 when the binary says the driver is not built.
start_tunnel() {
    local driver=$1 tunnel_id=$2 mcp_conc=$3 log=$WORK/tunnel-$2.err line
    CONTROL_PLANE_API_KEY=$MCPWIRE_BENCH_KEY "$BIN" tunnel run --driver "$driver" \
        --control-plane.base-url "$CP_URL" --control-plane.tunnel-id "$tunnel_id" \
        --mcp.server-url "$MCP_URL" --health.listen-addr 127.0.0.1:0 \
        --control-plane.max-inflight "$LOAD_C" --mcp.max-concurrent-requests "$mcp_conc" \
        ${EXTRA[@]+"${EXTRA[@]}"} >"$log" 2>&1 &
    TPID=$!
    if ! line=$(wait_line "$log" 'health listener' "$TPID"); then
        wait "$TPID" 2>/dev/null || true
        TPID=
        if grep -qi 'not built' "$log"; then
            echo "skipping $driver: $(head -1 "$log")"
            return 3
        fi
        echo "tunnel run --driver $driver did not start:" >&2
        cat "$log" >&2
        exit 1
    fi
    HEALTH=$(sed -E 's/.*addr=([^ ]+).*/\1/' <<<"$line")
    echo "tunnel run --driver $driver --control-plane.max-inflight $LOAD_C --mcp.max-concurrent-requests $mcp_conc:" \
        "pid $TPID, RSS at start $(kib_mib "$(hwm "$TPID")")"
}

stop_tunnel() {
    kill -TERM "$TPID"
    wait "$TPID" || true
    TPID=
}

load() { # tunnel id, label, requests, concurrency, extra flags...; output in $WORK/<label>
    local tunnel_id=$1 label=$2 requests=$3 conc=$4
    shift 4
    "$LOAD" --direct "$MCP_URL" --tunnel "$CP_URL/v1/mcp/$tunnel_id" --metrics "http://$HEALTH/metrics" \
        --rounds "$ROUNDS" --time-limit-s "$TIME_LIMIT_S" --requests "$requests" --concurrency "$conc" \
        --label "$label" "$@" | tee "$WORK/$label"
}
field() { sed -nE "s/.* $2=([^ ]+).*/\1/p" "$WORK/$1"; }
threads() { awk '/^Threads/ { print $2 }' "/proc/$1/status"; }

LAT=()
LOADS=()
for driver in "${DRIVERS[@]}"; do
    echo
    echo "== driver $driver, MCP forwards at the default concurrency (10)"
    id="tunnel_bench_${driver}_a"
    if ! start_tunnel "$driver" "$id" 10; then
        LAT+=("| $driver | skipped: not built into this binary | | | | | | |")
        continue
    fi
    load "$id" "$driver-c1" "$N_LATENCY" 1 --floor
    hwm1=$(hwm "$TPID")
    echo "  tunnel run peak RSS so far: $(kib_mib "$hwm1")"
    load "$id" "$driver-cN" "$N_LOAD" "$LOAD_C"
    hwmN=$(hwm "$TPID")
    echo "  tunnel run peak RSS so far: $(kib_mib "$hwmN") (threads: $(threads "$TPID"))"
    stop_tunnel
    LAT+=("| $driver | $(field "$driver-c1" direct_p50_us) / $(field "$driver-c1" tunnel_p50_us) | $(field "$driver-c1" added_p50_us) | $(field "$driver-c1" floor_p50_us) | $(field "$driver-c1" added_over_floor_p50)x | $(field "$driver-c1" direct_p99_us) / $(field "$driver-c1" tunnel_p99_us) | $(field "$driver-c1" added_p99_us) | $(field "$driver-c1" tunnel_per_s) |")
    LOADS+=("| $driver | 10 | $(field "$driver-cN" in_flight_max) | $(field "$driver-cN" tunnel_per_s) | $(field "$driver-cN" direct_per_s) | $(field "$driver-cN" added_p50_us) / $(field "$driver-cN" added_p99_us) | $(kib_mib "$hwm1") | $(kib_mib "$hwmN") |")

    echo
    echo "== driver $driver, MCP forwards at concurrency $LOAD_C"
    id="tunnel_bench_${driver}_b"
    start_tunnel "$driver" "$id" "$LOAD_C"
    load "$id" "$driver-cN-wide" "$N_LOAD" "$LOAD_C"
    hwmW=$(hwm "$TPID")
    echo "  tunnel run peak RSS: $(kib_mib "$hwmW") (threads: $(threads "$TPID"))"
    stop_tunnel
    LOADS+=("| $driver | $LOAD_C | $(field "$driver-cN-wide" in_flight_max) | $(field "$driver-cN-wide" tunnel_per_s) | $(field "$driver-cN-wide" direct_per_s) | $(field "$driver-cN-wide" added_p50_us) / $(field "$driver-cN-wide" added_p99_us) | | $(kib_mib "$hwmW") |")
done

echo
echo "load average after: $(cut -d' ' -f1-3 /proc/loadavg)"
echo
echo "1 request in flight ($N_LATENCY per target):"
echo
echo "| driver | p50 direct / tunnel (us) | added p50 (us) | floor p50 (us) | added / floor (p50) | p99 direct / tunnel (us) | added p99 (us) | tunnel cmds/s |"
echo "|---|---:|---:|---:|---:|---:|---:|---:|"
printf '%s\n' "${LAT[@]}"
echo
echo "$LOAD_C requests in flight ($N_LOAD per target; --control-plane.max-inflight $LOAD_C):"
echo
echo "| driver | --mcp.max-concurrent-requests | tunnel commands in flight (max seen) | tunnel cmds/s | direct cmds/s | added p50 / p99 (us) | peak RSS after the 1-in-flight run | peak RSS |"
echo "|---|---:|---:|---:|---:|---:|---:|---:|"
printf '%s\n' "${LOADS[@]}"
