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

# --- Python venv for model weights: added by a later issue, here ---

echo "setup done"
