#!/usr/bin/env bash
# Runs the crate's wasm-bindgen tests (tests/web_*.rs, wasm_bindgen_test_configure!(run_in_browser))
# in headless Chromium with WebGPU, through wasm-bindgen-test-runner + chromedriver.
# Browser flags live in ../webdriver.json; WASM_BINDGEN_TEST_WEBDRIVER_JSON points the runner
# at it by absolute path, because cargo starts the runner in each package's own directory.
# tests/fixtures is served by nginx (scripts/serve-test-fixtures.mjs) for the tests that fetch
# over HTTP; its URL reaches them at compile time as WEBDELEGATE_TEST_FIXTURES_URL (a fresh port
# each run, so only those test crates rebuild).
# Extra arguments go to cargo test (e.g. `npm run test:wasm -- --test web_registry`).
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
export PATH="${CARGO_HOME:-$HOME/.cargo}/bin:$PATH"

export CARGO_TARGET_WASM32_UNKNOWN_UNKNOWN_RUNNER=wasm-bindgen-test-runner
export CHROMEDRIVER="${CHROMEDRIVER:-/usr/bin/chromedriver}"
export WASM_BINDGEN_TEST_WEBDRIVER_JSON="$ROOT/webdriver.json"
# The runner's limit is for a whole test binary: the op suite in Chromium (SwiftShader, two
# cores) takes ~115 s with the decoder ops, so 120 s made it fail on a busy machine.
export WASM_BINDGEN_TEST_TIMEOUT="${WASM_BINDGEN_TEST_TIMEOUT:-600}"

# nginx for the fixtures: the server reads its stdin from a pipe we hold open, so it also ends
# when this script dies without running its trap.
URL_FILE="$(mktemp)"
exec 3> >(exec node scripts/serve-test-fixtures.mjs >"$URL_FILE")
SERVER_PID=$!
cleanup() {
  exec 3>&-
  kill "$SERVER_PID" 2>/dev/null || true
  wait "$SERVER_PID" 2>/dev/null || true
  rm -f "$URL_FILE"
}
trap cleanup EXIT
for _ in $(seq 1 150); do
  [ -s "$URL_FILE" ] && break
  kill -0 "$SERVER_PID" 2>/dev/null || { echo "test-wasm.sh: the fixture server exited" >&2; exit 1; }
  sleep 0.1
done
WEBDELEGATE_TEST_FIXTURES_URL="$(head -n 1 "$URL_FILE")"
[ -n "$WEBDELEGATE_TEST_FIXTURES_URL" ] || { echo "test-wasm.sh: no fixture server URL" >&2; exit 1; }
export WEBDELEGATE_TEST_FIXTURES_URL

# The test runner's HTTP server (rouille over tiny_http) has four worker threads and can leave a
# fifth connection opened at the same moment unserved while Chromium keeps the others alive: a
# page importing five or more ES modules then hangs at "Loading scripts..." until the renderer
# times out (300 s), about one load in three. The crate's JavaScript snippets are the modules
# every test page imports (tests write their own JavaScript with tests/web_script, not
# inline_js), so there must be at most four of them.
SNIPPETS="$(grep -rhoE 'inline_js *=|module *= *"[^"]+"' src | sort | uniq -c | awk '{ n += ($2 ~ /^inline_js/) ? $1 : 1 } END { print n + 0 }')"
if ((SNIPPETS > 4)); then
  echo "test-wasm.sh: src/ declares $SNIPPETS JavaScript snippet modules; at most 4 load reliably under wasm-bindgen-test-runner (see the comment above this check)" >&2
  exit 1
fi

cargo test --target wasm32-unknown-unknown "$@"
