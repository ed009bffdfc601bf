#!/usr/bin/env bash
# Regenerates src/executorch_schema/*_generated.rs from the upstream schema files in
# schema/executorch/ with the flatc that ships in the pinned executorch wheel (flatc 24.3.25 in
# executorch 1.5.1). Usage: scripts/gen-executorch-schema.sh [PATH_TO_FLATC]
# Without an argument, downloads the wheel (pip, no dependencies) into a temporary folder and
# uses its data/bin/flatc; it also refreshes the .fbs copies from that wheel.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
ET_VERSION=1.5.1
FLATC="${1:-}"
if [[ -z "$FLATC" ]]; then
  TMP="$(mktemp -d)"; trap 'rm -rf "$TMP"' EXIT
  python3 -m pip download -q "executorch==$ET_VERSION" --no-deps -d "$TMP"
  (cd "$TMP" && python3 -m zipfile -e executorch-*.whl x)
  FLATC="$TMP/x/executorch/data/bin/flatc"; chmod +x "$FLATC"
  cp "$TMP/x/executorch/schema/program.fbs" "$TMP/x/executorch/schema/scalar_type.fbs" \
     "$TMP/x/executorch/extension/flat_tensor/serialize/flat_tensor.fbs" "$ROOT/schema/executorch/"
fi
OUT="$ROOT/src/executorch_schema/generated"
rm -rf "$OUT"; mkdir -p "$OUT"
# One root file that includes both schemas, so --gen-all writes one module tree (mod.rs) for both.
WRAP="$(mktemp -d)"
printf 'include "program.fbs";\ninclude "flat_tensor.fbs";\n' > "$WRAP/executorch_schemas.fbs"
"$FLATC" --rust --rust-module-root-file --gen-all -o "$OUT" -I "$ROOT/schema/executorch" \
  "$WRAP/executorch_schemas.fbs"
rm -rf "$WRAP"
# flatc 24.3.25 imports alloc's String into every file, which clashes with program.fbs's own
# table `String` (a KernelTypes variant); no generated code uses alloc's String.
find "$OUT" -name '*.rs' -exec sed -i 's/^use alloc::string::{String, ToString};$/use alloc::string::ToString;/' {} +
echo "generated with $("$FLATC" --version) from executorch $ET_VERSION's schema into $OUT"
