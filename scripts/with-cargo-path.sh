#!/usr/bin/env bash
# Runs the given command with ~/.cargo/bin first on PATH, so npm scripts find the
# rustup-managed cargo, wasm-pack and wasm-bindgen however the shell was started.
# Everything else on PATH (npm's node_modules/.bin with binaryen's wasm-opt) is kept.
set -euo pipefail
export PATH="${CARGO_HOME:-$HOME/.cargo}/bin:$PATH"
exec "$@"
