#!/usr/bin/env bash
# Builds the API reference (docs/api/, markdown, committed) from pkg/webdelegate.d.ts with
# TypeDoc and typedoc-plugin-markdown (pinned in package.json; options in scripts/typedoc.json,
# intro in scripts/api-docs-intro.md). The descriptions are the `///` docs wasm-bindgen copies
# from src/web/ into the .d.ts, so build the package first (npm run build:pkg).
# pkg-tests/api-docs.test.mjs builds the same into a temporary directory (API_DOCS_OUT) and
# fails when docs/api differs from it.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
[[ -f pkg/webdelegate.d.ts ]] || { echo "build-api-docs.sh: pkg/webdelegate.d.ts is missing: run npm run build:pkg" >&2; exit 1; }
OUT="${API_DOCS_OUT:-$ROOT/docs/api}"
node_modules/.bin/typedoc --options scripts/typedoc.json --out "$OUT" --logLevel Warn
echo "built the API reference in ${OUT#"$ROOT"/} ($(find "$OUT" -name '*.md' | wc -l) pages)"
