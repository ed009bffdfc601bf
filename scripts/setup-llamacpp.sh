#!/usr/bin/env bash
# Builds llama-cpp-python (an exactly pinned version) from its PyPI sdist into the git-ignored venv
# .cache/venv-llama. It is the independent llama.cpp oracle for the Gemma 3 / llama / qwen2 fixtures
# (scripts/make-gemma-llamacpp-fixtures.py, scripts/make-tiny-decoders.py).
#
# NOT part of `npm test` or CI: the fixtures it produces are committed under tests/fixtures/gemma/ and
# tests/fixtures/decoders/, so tests never need llama.cpp. Run it by hand only to regenerate them.
#
# PyPI has no binary wheel of llama-cpp-python: pip compiles the vendored llama.cpp with CMake (the
# `cmake` PyPI wheel) and the system g++: 35 minutes (2093 s) measured on two shared cores. Idempotent: a venv that
# already imports the pinned version is kept.
#
# Portability: GGML_NATIVE=OFF with an explicit x86-64-v3 feature set (AVX2, FMA, F16C, BMI2), so the
# build does not depend on the CPU it was compiled on beyond that level, and the SIMD path (and hence
# the numerics of the committed fixtures) is fixed. Tests, examples, tools, server and curl are off.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
VENV="${VENV_LLAMA:-$ROOT/.cache/venv-llama}"
LLAMA_CPP_PYTHON_VERSION=0.3.36
# The llama.cpp commit vendored in llama-cpp-python v0.3.36 (its vendor/llama.cpp submodule pointer).
LLAMA_CPP_COMMIT=0c1e57098bba43ac29e6e3b677cdceebdd22334f
CMAKE_VERSION=4.4.5
NUMPY_VERSION=2.3.5
GGUF_VERSION=0.19.0
JOBS="${JOBS:-2}"

if [[ -x "$VENV/bin/python" ]] &&
  [[ "$("$VENV/bin/python" -c 'import llama_cpp; print(llama_cpp.__version__)' 2>/dev/null)" == "$LLAMA_CPP_PYTHON_VERSION" ]]; then
  echo "ok llama-cpp-python ($LLAMA_CPP_PYTHON_VERSION, llama.cpp $LLAMA_CPP_COMMIT) in $VENV"
  exit 0
fi

echo "installing llama-cpp-python $LLAMA_CPP_PYTHON_VERSION into $VENV (compiles llama.cpp; many minutes)"
rm -rf "$VENV"
python3 -m venv "$VENV"
"$VENV/bin/pip" install --quiet "cmake==$CMAKE_VERSION" "numpy==$NUMPY_VERSION" "gguf==$GGUF_VERSION" \
  scikit-build-core ninja
start=$(date +%s)
CMAKE_ARGS="-DGGML_NATIVE=OFF -DGGML_AVX=ON -DGGML_AVX2=ON -DGGML_FMA=ON -DGGML_F16C=ON -DGGML_BMI2=ON \
-DGGML_OPENMP=OFF -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF -DLLAMA_BUILD_TOOLS=OFF \
-DLLAMA_BUILD_SERVER=OFF -DLLAMA_CURL=OFF -DLLAVA_BUILD=OFF -DLLAMA_BUILD_COMMON=ON" \
  CMAKE_BUILD_PARALLEL_LEVEL="$JOBS" \
  PATH="$VENV/bin:$PATH" \
  "$VENV/bin/pip" install --no-binary llama-cpp-python --no-build-isolation --verbose \
  "llama-cpp-python==$LLAMA_CPP_PYTHON_VERSION"
echo "built llama-cpp-python $LLAMA_CPP_PYTHON_VERSION in $(($(date +%s) - start)) s"
"$VENV/bin/python" -c 'import llama_cpp; print("ok llama-cpp-python", llama_cpp.__version__)'
