#!/usr/bin/env bash
# A/B of builds of one bench client (bench/mcp_clients/src/bin/*): the same calls against one
# reference server, the builds taking turns, medians at the end. For comparing two commits'
# clients (build each with `cargo build --release --manifest-path bench/mcp_clients/Cargo.toml`
# and copy the binary aside), where bench/mcp_clients.sh compares different clients.
#
#   bench/mcp_client_ab.sh ROUNDS TRANSPORT N CONCURRENCY name=BINARY...
#   e.g. SERVER=target/release/mcpwire bench/mcp_client_ab.sh 5 http 5000 1 \
#            before=/tmp/a/mcpwire_smol after=/tmp/b/mcpwire_smol
#
# TRANSPORT is http (the server's `--listen 127.0.0.1:0`) or stdio (`dev mcp-server --stdio` as
# each client's child). Each run: 200 warm-up calls, then N timed ones, CONCURRENCY in flight
# (a client of the old `&mut self` API ignores it), under `perf stat -e
# task-clock,context-switches`. Printed per run and as medians: calls/s (the client's own
# figure), CPU per call (task-clock of the whole client process, warm-up included, divided by
# N + 200; over stdio it includes the child server) and context switches per call.
# Needs perf and bc. SERVER [target/release/mcpwire]. Loopback only.
set -euo pipefail
[ $# -ge 5 ] || { sed -n '2,17p' "$0" >&2; exit 2; }
ROUNDS=$1 TR=$2 N=$3 CONC=$4
shift 4
SERVER=${SERVER:-target/release/mcpwire}
WARMUP=200
W=$(mktemp -d "${TMPDIR:-/tmp}/mcpwire-ab.XXXXXX")
touch "$W/out"
"$SERVER" dev mcp-server --listen 127.0.0.1:0 >"$W/out" 2>"$W/err" &
SPID=$!
trap 'kill $SPID 2>/dev/null || true; rm -rf "$W"' EXIT
URL=
for _ in $(seq 100); do
    URL=$(sed -nE 's/^listening on ([^ ]+).*/\1/p' "$W/out")
    [ -n "$URL" ] && break
    sleep 0.1
done
[ -n "$URL" ] || { echo "the server did not start: $(cat "$W/err")" >&2; exit 1; }
case $TR in
    http) TARGET=$URL ;;
    stdio) TARGET="$SERVER dev mcp-server --stdio" ;;
    *) echo "TRANSPORT is http or stdio, not $TR" >&2; exit 2 ;;
esac
echo "load average before: $(cut -d' ' -f1-3 /proc/loadavg)"
for r in $(seq "$ROUNDS"); do
    for nb in "$@"; do
        name=${nb%%=*} bin=${nb#*=}
        line=$(perf stat -x, -e task-clock,context-switches -o "$W/perf" \
            "$bin" "$TR" "$TARGET" "$N" "$WARMUP" 120 "$CONC")
        rate=$(echo "$line" | sed -nE 's/.*calls_per_s=([^ ]+).*/\1/p')
        tc=$(awk -F, '$3=="task-clock" {print $1}' "$W/perf")
        cs=$(awk -F, '$3=="context-switches" {print $1}' "$W/perf")
        cpu=$(echo "$tc * 1000 / ($N + $WARMUP)" | bc -l)
        sw=$(echo "$cs / ($N + $WARMUP)" | bc -l)
        echo "$name $rate $cpu $sw" >>"$W/res"
        printf '  round %s %-10s %8.0f calls/s  %6.1f us CPU/call  %5.2f switches/call\n' \
            "$r" "$name" "$rate" "$cpu" "$sw"
    done
done
echo "load average after: $(cut -d' ' -f1-3 /proc/loadavg)"
median() { sort -n | awk '{a[NR] = $1} END {print a[int((NR + 1) / 2)]}'; }
for nb in "$@"; do
    name=${nb%%=*}
    col() { awk -v n="$name" -v c="$1" '$1 == n {print $c}' "$W/res" | median; }
    printf 'median %s, %s in flight, %s: %.0f calls/s, %.1f us CPU/call, %.2f switches/call\n' \
        "$TR" "$CONC" "$name" "$(col 2)" "$(col 3)" "$(col 4)"
done
