#!/usr/bin/env bash
# The official MCP conformance suite's SERVER scenarios against `mcpwire-conformance-server`
# (the server core on one of the library's drivers, over Streamable HTTP). run.sh calls it
# twice:
#
#   server.sh run       inside run.sh's network namespace (loopback up): one fresh server per
#                       suite run, then the runner against its URL;
#   server.sh summary   afterwards: prints the results, writes the counts and the problems for
#                       run.sh's total (exit status 0 only when every result is the expected one).
#
# It needs from run.sh's environment: bin (the mcpwire binary), server_bin (mcpwire-conformance-server), here (tests/conformance), out
# (the results folder), SUITE_2026/SUITE_2025 (the runners' node_modules names),
# SCENARIO_TIMEOUT_MS, and node on PATH. SERVER_DRIVERS (default "blocking smol") names the
# drivers to run the whole set on.
#
# What runs, per driver:
#  - @modelcontextprotocol/conformance@0.2.0-alpha.12 `server --requirements 2026-07-28` and
#    `--requirements 2025-11-25` (each revision at its own wire: stateless `_meta` requests for
#    2026-07-28, the initialize handshake for 2025-11-25), with
#    expected-failures-server-<revision>.yaml (empty). The runner itself fails on an unexpected
#    failure or a stale entry among the scored scenarios; this script also checks that every
#    scored scenario passed at least one check and failed none, and holds green the not-scored
#    ones the issue names (http-header-validation) or that pass today (SERVER_HELD_*).
#  - @modelcontextprotocol/conformance@0.1.16 `server --spec-version 2025-11-25` (its active
#    suite): every scenario it runs must pass, with at least one check.
set -euo pipefail

# The scored server scenarios of each revision (requirements/<revision>.yaml, frozen).
SERVER_REQUIRED_2026=(server-stateless completion-complete tools-list tools-call-simple-text
  tools-call-image tools-call-audio tools-call-embedded-resource tools-call-mixed-content
  tools-call-error tools-call-with-progress server-sse-multiple-streams resources-list
  resources-read-text resources-read-binary resources-templates-read sep-2164-resource-not-found
  prompts-list prompts-get-simple prompts-get-with-args prompts-get-embedded-resource
  prompts-get-with-image dns-rebinding-protection caching
  input-required-result-basic-elicitation input-required-result-basic-sampling
  input-required-result-basic-list-roots input-required-result-request-state
  input-required-result-multiple-input-requests input-required-result-multi-round
  input-required-result-missing-input-response input-required-result-non-tool-request
  input-required-result-result-type input-required-result-unsupported-methods
  input-required-result-tampered-state input-required-result-capability-check
  input-required-result-ignore-extra-params input-required-result-validate-input)
SERVER_REQUIRED_2025=(server-initialize logging-set-level ping completion-complete tools-list
  tools-call-simple-text tools-call-image tools-call-audio tools-call-embedded-resource
  tools-call-mixed-content tools-call-with-logging tools-call-error tools-call-with-progress
  tools-call-sampling tools-call-elicitation elicitation-sep1034-defaults
  server-sse-multiple-streams elicitation-sep1330-enums resources-list resources-read-text
  resources-read-binary resources-templates-read resources-subscribe resources-unsubscribe
  prompts-list prompts-get-simple prompts-get-with-args prompts-get-embedded-resource
  prompts-get-with-image dns-rebinding-protection)
# Not scored by the runner (pending against its reference server, or added after the
# revision's anchor) but held green here: the issue requires http-header-validation; the
# others pass and stay so. (The tasks extension, io.modelcontextprotocol/tasks, is not served:
# its scenarios run, fail, and do not count.)
SERVER_HELD_2026=(http-header-validation http-custom-header-server-validation json-schema-2020-12)
SERVER_HELD_2025=(server-session-lifecycle json-schema-2020-12 server-sse-polling)
SERVER_DRIVERS=${SERVER_DRIVERS:-blocking smol}
# How long a started server may take to print its URL.
SERVER_START_SECONDS=20

# Starts `mcpwire-conformance-server --driver $1`, logging to $2; leaves its URL in
# $server_url and its pid in $server_pid (not to be called in a subshell).
start_server() {
  local driver=$1 log=$2 url="" i
  "$server_bin" --listen 127.0.0.1:0 --driver "$driver" >"$log.url" 2>"$log" &
  server_pid=$!
  for ((i = 0; i < SERVER_START_SECONDS * 10; i++)); do
    url=$(head -n 1 "$log.url" 2>/dev/null || true)
    [ -n "$url" ] && break
    kill -0 "$server_pid" 2>/dev/null || break
    sleep 0.1
  done
  if [ -z "$url" ]; then
    echo "conformance: the server (--driver $driver) printed no URL; see $log" >&2
    stop_server
    return 1
  fi
  server_url=$url
}

stop_server() {
  kill -TERM "$server_pid" 2>/dev/null || true
  wait "$server_pid" 2>/dev/null || true
}

# One runner invocation against a fresh server: $1 name of the result, $2 driver, then the
# runner's arguments (the URL is added).
run_one() {
  local name=$1 driver=$2
  shift 2
  local url rc
  if ! start_server "$driver" "$out/$name.server.log"; then
    echo 97 >"$out/$name.rc"
    return 0
  fi
  url=$server_url
  echo "--- server $name: $* (server at $url)"
  set +e
  node "$@" --url "$url" -o "$out/$name" >"$out/$name.log" 2>"$out/$name.err"
  rc=$?
  set -e
  echo "$rc" >"$out/$name.rc"
  stop_server
}

server_run() {
  local d
  for d in $SERVER_DRIVERS; do
    run_one "server-2026-07-28-$d" "$d" "$here/node_modules/$SUITE_2026/dist/index.js" server \
      --requirements 2026-07-28 --expected-failures "$here/expected-failures-server-2026-07-28.yaml" \
      --timeout "$SCENARIO_TIMEOUT_MS"
    run_one "server-2025-11-25-$d" "$d" "$here/node_modules/$SUITE_2026/dist/index.js" server \
      --requirements 2025-11-25 --expected-failures "$here/expected-failures-server-2025-11-25.yaml" \
      --timeout "$SCENARIO_TIMEOUT_MS"
    run_one "server-0.1.16-2025-11-25-$d" "$d" "$here/node_modules/$SUITE_2025/dist/index.js" server \
      --spec-version 2025-11-25
  done
}

# The runner's line for scenario $2 in log $1 passes: at least one check, none failed.
passes() {
  local line
  line=$(grep -E "^(✓|✗) $2: " "$1" | tail -n 1 || true)
  [[ $line =~ ^✓\ [^:]+:\ ([0-9]+)\ passed,\ 0\ failed$ ]] && [ "${BASH_REMATCH[1]}" -gt 0 ]
}

server_summary() {
  local passed=0 failed=0 problems=() names=() d rev name log rc s line n
  for d in $SERVER_DRIVERS; do
    for rev in 2026-07-28 2025-11-25; do
      name="server-$rev-$d"
      log="$out/$name.log"
      echo
      printf '==> conformance: server scenarios, --requirements %s, %s driver (@modelcontextprotocol/conformance@0.2.0-alpha.12):\n' "$rev" "$d"
      sed -n '/=== SUMMARY ===/,$p' "$log" 2>/dev/null | sed 's/^/    /'
      rc=$(cat "$out/$name.rc" 2>/dev/null || echo 99)
      if [ "$rev" = 2026-07-28 ]; then
        names=("${SERVER_REQUIRED_2026[@]}" "${SERVER_HELD_2026[@]}")
      else
        names=("${SERVER_REQUIRED_2025[@]}" ${SERVER_HELD_2025[@]+"${SERVER_HELD_2025[@]}"})
      fi
      for s in "${names[@]}"; do
        if passes "$log" "$s"; then
          passed=$((passed + 1))
        else
          failed=$((failed + 1))
          line=$(grep -E "^(✓|✗) $s: " "$log" 2>/dev/null | tail -n 1 || true)
          problems+=("server $rev ($d) $s: ${line:-did not run}")
        fi
      done
      if [ "$rc" != 0 ]; then
        failed=$((failed + 1))
        problems+=("server $rev ($d): the runner exited $rc (an unexpected failure or a stale expected-failures entry; see $log and $out/$name.err)")
      fi
    done
    # 0.1.16: every scenario it ran passes.
    name="server-0.1.16-2025-11-25-$d"
    log="$out/$name.log"
    echo
    printf '==> conformance: server scenarios, --spec-version 2025-11-25, %s driver (@modelcontextprotocol/conformance@0.1.16):\n' "$d"
    sed -n '/=== SUMMARY ===/,$p' "$log" 2>/dev/null | sed 's/^/    /'
    rc=$(cat "$out/$name.rc" 2>/dev/null || echo 99)
    n=0
    while IFS= read -r line; do
      s=${line#? }
      s=${s%%: *}
      n=$((n + 1))
      if passes "$log" "$s"; then
        passed=$((passed + 1))
      else
        failed=$((failed + 1))
        problems+=("server 0.1.16 2025-11-25 ($d) $s: $line")
      fi
    done < <(sed -n '/=== SUMMARY ===/,$p' "$log" 2>/dev/null | grep -E '^(✓|✗) [^:]+: ' || true)
    if [ "$n" = 0 ]; then
      failed=$((failed + 1))
      problems+=("server 0.1.16 2025-11-25 ($d): no scenario ran (see $log)")
    fi
    if [ "$rc" != 0 ]; then
      failed=$((failed + 1))
      problems+=("server 0.1.16 2025-11-25 ($d): the runner exited $rc (see $log)")
    fi
  done
  echo "$passed $failed" >"$out/server.counts"
  printf '%s\n' ${problems[@]+"${problems[@]}"} >"$out/server.problems"
  [ "$failed" = 0 ]
}

case ${1:-} in
  run) server_run ;;
  summary) server_summary ;;
  *)
    echo "usage: server.sh run|summary (run.sh calls it)" >&2
    exit 2
    ;;
esac
