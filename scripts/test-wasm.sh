#!/usr/bin/env bash
# Runs the crate's wasm-bindgen tests (tests/web_*.rs, wasm_bindgen_test_configure!(run_in_browser))
# in headless Chromium with WebGPU, through wasm-bindgen-test-runner + chromedriver.
# Browser flags live in ../webdriver.json; WASM_BINDGEN_TEST_WEBDRIVER_JSON points the runner
# at it by absolute path, because cargo starts the runner in each package's own directory.
# Extra arguments go to cargo test (e.g. `npm run test:wasm -- --test web_registry`).
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
export PATH="${CARGO_HOME:-$HOME/.cargo}/bin:$PATH"

export CARGO_TARGET_WASM32_UNKNOWN_UNKNOWN_RUNNER=wasm-bindgen-test-runner
export CHROMEDRIVER="${CHROMEDRIVER:-/usr/bin/chromedriver}"
export WASM_BINDGEN_TEST_WEBDRIVER_JSON="$ROOT/webdriver.json"
export WASM_BINDGEN_TEST_TIMEOUT="${WASM_BINDGEN_TEST_TIMEOUT:-120}"

exec cargo test --target wasm32-unknown-unknown "$@"
