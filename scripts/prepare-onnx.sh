#!/usr/bin/env bash
# Bench preparation for the side-by-side suite (bench/suites/side_by_side.mjs), idempotent:
#  1. a Python venv in .cache/venv with the pinned packages scripts/make_onnx.py needs;
#  2. .cache/models/all-MiniLM-L6-v2/model.onnx built from the same model.safetensors by
#     scripts/make_onnx.py and checked against tests/fixtures/minilm/reference.json (--check),
#     rebuilt only when it is missing or was built by another version of the script or pins
#     (a stamp file next to it holds their SHA-256). The model is only replaced once it passed.
#  3. model_opt.onnx next to it: the same graph through onnxruntime.transformers.optimizer
#     (scripts/optimize_onnx.py: fused Attention / SkipLayerNormalization / BiasGelu, checked
#     against the same reference), rebuilt like model.onnx; the fused-operator counts are printed.
# Prints "ok ..." or "installing ..." lines like scripts/setup.sh; needs `npm run setup` first
# (the safetensors). Prints the venv's python path last, for the caller.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
VENV=.cache/venv
PINS=(numpy==2.4.6 safetensors==0.8.0 onnx==1.23.2 onnxruntime==1.32.0 tokenizers==0.23.3 sympy==1.14.0)
MODEL_DIR=.cache/models/all-MiniLM-L6-v2
ONNX="$MODEL_DIR/model.onnx"
STAMP="$ONNX.stamp"
OPT="$MODEL_DIR/model_opt.onnx"
OPT_STAMP="$OPT.stamp"

die() { echo "prepare-onnx: $*" >&2; exit 1; }
[[ -f "$MODEL_DIR/model.safetensors" ]] || die "$MODEL_DIR/model.safetensors is missing: run npm run setup"

if [[ ! -x "$VENV/bin/python" ]]; then
  # Debian's python3 makes venvs only with python3-venv (ensurepip) installed.
  if ! python3 -c 'import ensurepip' 2>/dev/null; then
    if [[ $(id -u) -eq 0 ]]; then
      echo "installing python3-venv" >&2
      apt-get update -qq
      DEBIAN_FRONTEND=noninteractive apt-get install -y -qq python3-venv >/dev/null
    else
      die "python3 cannot create a venv; install python3-venv as root: apt-get install -y python3-venv"
    fi
  fi
  echo "installing python venv ($VENV)" >&2
  python3 -m venv "$VENV"
fi
frozen="$("$VENV/bin/python" -m pip freeze 2>/dev/null || true)"
missing=()
for pin in "${PINS[@]}"; do
  grep -qix "$pin" <<<"$frozen" || missing+=("$pin")
done
if ((${#missing[@]})); then
  echo "installing ${missing[*]} into $VENV" >&2
  "$VENV/bin/python" -m pip install --quiet --disable-pip-version-check "${missing[@]}"
else
  echo "ok python venv ($VENV: ${PINS[*]})" >&2
fi

want="$(cat scripts/make_onnx.py <(printf '%s\n' "${PINS[@]}") | sha256sum | cut -d' ' -f1)"
if [[ -f "$ONNX" && -f "$STAMP" && "$(cat "$STAMP")" == "$want" ]]; then
  echo "ok $ONNX" >&2
else
  echo "installing $ONNX (scripts/make_onnx.py --check)" >&2
  "$VENV/bin/python" scripts/make_onnx.py "$MODEL_DIR" --check >&2
  echo "$want" > "$STAMP"
fi
want_opt="$(cat scripts/make_onnx.py scripts/optimize_onnx.py <(printf '%s\n' "${PINS[@]}") | sha256sum | cut -d' ' -f1)"
if [[ -f "$OPT" && -f "$OPT_STAMP" && "$(cat "$OPT_STAMP")" == "$want_opt" ]]; then
  echo "ok $OPT" >&2
else
  echo "installing $OPT (scripts/optimize_onnx.py)" >&2
  "$VENV/bin/python" scripts/optimize_onnx.py "$ONNX" "$OPT" 2>&1 | grep -v '^Model producer not matched' >&2
  [[ -f "$OPT" ]] || die "scripts/optimize_onnx.py did not write $OPT"
  echo "$want_opt" > "$OPT_STAMP"
fi
echo "$ROOT/$VENV/bin/python"
