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
echo "gateway_latency: N=$N ROUNDS=$ROUNDS WARMUP=$WARMUP ($(nproc) cores)"
timeout 600 "$target/release/gateway_latency" \
  "$bin dev mcp-server --stdio" \
  "$bin host serve --config $work/mcp.json --approve-commands --state-dir $work/state" \
  ref__echo "$N" "$ROUNDS" "$WARMUP" 2>"$work/stderr" ||
  { echo "gateway_latency failed; its stderr (the gateway's log among it):" >&2; cat "$work/stderr" >&2; exit 1; }
