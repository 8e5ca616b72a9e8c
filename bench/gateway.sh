#!/usr/bin/env bash
# The gateway's added latency per tools/call: mcpwire's blocking client calls `echo` of the
# reference server (`mcpwire dev mcp-server --stdio`) straight, and through
# `mcpwire host serve` in front of the same server (client -> gateway over stdio -> upstream
# over stdio), in interleaved rounds of one run (bench/mcp_clients/src/bin/gateway_latency.rs).
# The upstream is trusted and `echo` allowed in the config, so no approval form is involved:
# what is measured is the routing, the consent decision and the extra hop.
#
#   bench/gateway.sh                       N=5000 calls each, ROUNDS=5, WARMUP=200
#   N=20000 ROUNDS=10 bench/gateway.sh
#   SKIP_BUILD=1                           use target/release as it is
#   LAYOUT=free                            the scheduler places every process (the default)
#   LAYOUT=one-cpu                         every process on CPU 0 (taskset): no wake-up crosses
#                                          CPUs, so what is left is the work and the switches
#   LAYOUT=split                           the client on CPU 0, the servers (and the gateway)
#                                          on CPU 1: a host app and its servers on two cores
#
# On a small VM the free layout swings with where the scheduler puts the processes: a
# wake-up of an idle vCPU costs tens of microseconds, and the direct call (two processes)
# often keeps both on one CPU while the gateway's three do not (bench/README.md).
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$root"
N=${N:-5000}
ROUNDS=${ROUNDS:-5}
WARMUP=${WARMUP:-200}
target="${CARGO_TARGET_DIR:-$root/target}"
case $target in /*) ;; *) target="$root/$target" ;; esac

if [ -z "${SKIP_BUILD:-}" ]; then
  cargo build --locked --release -p mcpwire-cli --bin mcpwire
  (cd bench/mcp_clients && CARGO_TARGET_DIR="$target" cargo build --locked --release --bin gateway_latency)
fi
bin="$target/release/mcpwire"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cat >"$work/mcp.json" <<JSON
{"mcpServers": {"ref": {"command": "$bin", "args": ["dev", "mcp-server", "--stdio"], "trust": "trusted"}},
 "permissions": {"allow": ["mcp__ref__echo"]}}
JSON
LAYOUT=${LAYOUT:-free}
client=() servers=""
case $LAYOUT in
  free) ;;
  one-cpu) client=(taskset -c 0) ;;
  split) client=(taskset -c 0) servers="taskset -c 1 " ;;
  *) echo "LAYOUT is free, one-cpu or split, not '$LAYOUT'" >&2; exit 2 ;;
esac
if [ "$LAYOUT" != free ] && ! command -v taskset >/dev/null; then
  echo "LAYOUT=$LAYOUT needs taskset (util-linux)" >&2
  exit 2
fi
echo "gateway_latency: N=$N ROUNDS=$ROUNDS WARMUP=$WARMUP LAYOUT=$LAYOUT ($(nproc) cores)"
timeout 600 "${client[@]}" "$target/release/gateway_latency" \
  "${servers}$bin dev mcp-server --stdio" \
  "${servers}$bin host serve --config $work/mcp.json --approve-commands --state-dir $work/state" \
  ref__echo "$N" "$ROUNDS" "$WARMUP" 2>"$work/stderr" ||
  { echo "gateway_latency failed; its stderr (the gateway's log among it):" >&2; cat "$work/stderr" >&2; exit 1; }
