#!/usr/bin/env bash
# A/B of two builds of the gateway (`mcpwire host serve`): the same upstream reference server
# (NEW's `dev mcp-server --stdio`) behind each, the builds taking turns, each run printing the
# direct and the added latency per tools/call (bench/mcp_clients/src/bin/gateway_latency.rs).
# Build both first (`cargo build --release -p mcpwire-cli --bin mcpwire`, the old one from a
# worktree with its own CARGO_TARGET_DIR) and `gateway_latency` (see bench/gateway.sh).
#
#   bench/gateway_ab.sh OLD_MCPWIRE NEW_MCPWIRE [ROUNDS=5] [N=3000]
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
old=${1:?usage: bench/gateway_ab.sh OLD_MCPWIRE NEW_MCPWIRE [ROUNDS] [N]}
new=${2:?usage: bench/gateway_ab.sh OLD_MCPWIRE NEW_MCPWIRE [ROUNDS] [N]}
rounds=${3:-5}
n=${4:-3000}
target="${CARGO_TARGET_DIR:-$root/target}"
lat="$target/release/gateway_latency"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cat >"$work/mcp.json" <<JSON
{"mcpServers": {"ref": {"command": "$new", "args": ["dev", "mcp-server", "--stdio"], "trust": "trusted"}},
 "permissions": {"allow": ["mcp__ref__echo"]}}
JSON
for r in $(seq "$rounds"); do
  for which in old new; do
    b=${!which}
    echo "== $which round $r (load $(cut -d' ' -f1 /proc/loadavg))"
    timeout 300 "$lat" "$new dev mcp-server --stdio" \
      "$b host serve --config $work/mcp.json --approve-commands --state-dir $work/state" \
      ref__echo "$n" 3 200 2>/dev/null | grep -E "added|direct"
  done
done
