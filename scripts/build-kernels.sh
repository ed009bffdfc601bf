#!/usr/bin/env bash
# Builds the CPU worker pool's kernel module: the no_std crate in kernels/ for wasm32 with
# atomics, importing one shared WebAssembly.Memory (each worker and the main thread
# instantiate it against that memory; see src/browser/cpu_threads/pool.js). Stable Rust's
# prebuilt core has no atomics, hence --no-check-features: core's code is plain loads and
# stores, which are correct on a shared memory, and the module's data segments are passive,
# initialised once by the start function wasm-ld emits for shared memory.
# Writes pkg/webdelegate_kernels.wasm and the pool's JavaScript (src/browser/cpu_threads/ ->
# pkg/cpu-threads/); run after wasm-pack, which rewrites pkg/ (scripts/package-manifest.mjs then
# lists both in pkg/package.json). The first argument names another package directory (the bench's build:
# pkg-bench). The build goes to $CARGO_TARGET_DIR/kernels (default target/kernels).
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
PKG="${1:-pkg}"
TARGET_DIR="${CARGO_TARGET_DIR:-target}/kernels"
export PATH="${CARGO_HOME:-$HOME/.cargo}/bin:$PATH"
# 4 GiB: the largest a wasm32 memory can be (the pool grows it as weights arrive).
MAX_MEMORY=4294967296
# Each instance's own stack is 1 MiB: the main thread's is the linker's, each worker's is
# a region the pool allocates and points __stack_pointer at.
LOG="$(mktemp)"
trap 'rm -f "$LOG"' EXIT
# rustc warns that `atomics` is an unstable target feature; the build is stable Rust.
RUSTFLAGS="-C target-feature=+atomics,+bulk-memory,+mutable-globals,+simd128 \
-C link-arg=--shared-memory -C link-arg=--import-memory -C link-arg=--max-memory=$MAX_MEMORY \
-C link-arg=--no-check-features -C link-arg=--export=__stack_pointer \
-C link-arg=--export=__heap_base -C link-arg=-zstack-size=1048576" \
  cargo rustc --quiet -p webdelegate-kernels --release --target wasm32-unknown-unknown \
  --target-dir "$TARGET_DIR" --crate-type cdylib --features module 2>"$LOG" || { cat "$LOG" >&2; exit 1; }
OUT="$TARGET_DIR"/wasm32-unknown-unknown/release/webdelegate_kernels.wasm
[[ -f "$OUT" ]] || { echo "build-kernels.sh: $OUT was not built" >&2; exit 1; }
mkdir -p "$PKG"
# binaryen's wasm-opt (an npm dependency), as wasm-pack runs it on the main module:
# --low-memory-unused lets it fold constant address additions into the loads' offsets (the
# first 1 KiB of memory is never addressed: the data and the stacks lie above it), one
# instruction fewer per load in the dot kernels.
"$ROOT/node_modules/.bin/wasm-opt" -O3 --low-memory-unused --enable-threads --enable-bulk-memory \
  --enable-mutable-globals --enable-simd --enable-sign-ext --enable-nontrapping-float-to-int \
  "$OUT" -o "$PKG/webdelegate_kernels.wasm"
mkdir -p "$PKG/cpu-threads"
cp src/browser/cpu_threads/pool.js src/browser/cpu_threads/participation.js src/browser/cpu_threads/worker.js "$PKG/cpu-threads/"
echo "built $PKG/webdelegate_kernels.wasm ($(stat -c %s "$PKG/webdelegate_kernels.wasm") bytes) and $PKG/cpu-threads/"
