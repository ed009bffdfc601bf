#!/usr/bin/env bash
# The native WebGPU (Vulkan) kernel benchmarks on a borrowed GPU machine, in under 5 minutes,
# offline, from binaries built beforehand: matmul GFLOP/s, quantized GEMV GB/s (qmatvec, every
# GEMV kernel, per execute and per kernel GPU time) and the Gemma 3 270M decode step
# (benches/decode_step.rs) as configured, with unsplit attention, with the staged GEMV and
# with the workgroup GEMV,
# recorded as one JSON with the adapter, the card's name and its vendor peak figures, and every
# measured number as a fraction of them.
# Nothing depends on this script (CI and `npm test` never run it).
#
#   bash scripts/device-bench.sh --build   # here: release-build the three benches into the
#                                          # git-ignored .device/ (and the Vulkan loader's and
#                                          # glvnd's .debs into .gl/), check they fit the 64 MiB
#                                          # that travels
#   bash scripts/device-bench.sh           # there: run them, write $OUT/device-bench.json
#                                          # (+ device-bench.log), or without OUT
#                                          # bench/results/device-latest.json
#
# The device tool sends tracked and untracked-not-ignored files plus at most 8 carried ignored
# paths, so carry the binaries and the loader: run(command="bash scripts/device-bench.sh",
# carry=[".device", ".gl"], timeout_s=360).
#
# Options of the run mode:
#   --allow-cpu-adapter  benchmark a CPU adapter (lavapipe = llvmpipe) rather than refuse it:
#                        validation on a machine without a GPU
#   --quick              short runs (the benches' --quick; no large matmul shapes)
#   --budget SECONDS     wall-clock limit of the whole run (default 290)
#   --out FILE           where the JSON goes (default as above)
#   --gguf PATH          the decode step on this real GGUF rather than synthetic weights
# Exit status: 0 all ran; 2 no Vulkan adapter; 3 only a CPU adapter (without
# --allow-cpu-adapter); 4 a benchmark failed or ran out of time (the JSON is written anyway);
# 1 anything else (missing binaries, no python3).
set -uo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT" || exit 1
DEVICE_DIR=.device
BENCHES=(matmul qmatvec decode_step)
LIMIT_BYTES=$((64 * 1024 * 1024))

die() {
  echo "device-bench: $*" >&2
  exit "${EXIT:-1}"
}

build() {
  local fetch_vulkan=1
  for arg in "$@"; do
    case "$arg" in
      --no-vulkan-debs) fetch_vulkan=0 ;;
      *) die "--build: unknown option $arg" ;;
    esac
  done
  local cargo=(bash scripts/with-cargo-path.sh cargo)
  local bench_args=()
  for b in "${BENCHES[@]}"; do bench_args+=(--bench "$b"); done
  echo "device-bench: building ${BENCHES[*]} (cargo bench --no-run; the release profile unless" \
    "CARGO_PROFILE_BENCH_* says otherwise)"
  local json
  json="$("${cargo[@]}" bench --no-run --message-format=json-render-diagnostics "${bench_args[@]}")" ||
    die "cargo bench --no-run failed"
  rm -rf "$DEVICE_DIR/bin"
  mkdir -p "$DEVICE_DIR/bin"
  for b in "${BENCHES[@]}"; do
    local exe
    exe="$(printf '%s\n' "$json" | python3 -c '
import json, sys
name = sys.argv[1]
for line in sys.stdin:
    try:
        m = json.loads(line)
    except ValueError:
        continue
    t = m.get("target") or {}
    if m.get("reason") == "compiler-artifact" and t.get("name") == name \
            and "bench" in t.get("kind", []) and m.get("executable"):
        print(m["executable"])
' "$b")"
    [ -n "$exe" ] && [ -x "$exe" ] || die "no executable for bench $b in cargo's output"
    cp "$exe" "$DEVICE_DIR/bin/$b"
  done
  {
    echo "commit $(git rev-parse HEAD 2>/dev/null)$(git diff --quiet HEAD 2>/dev/null || echo ' (with uncommitted changes)')"
    echo "built $(date -u +%Y-%m-%dT%H:%M:%SZ) on $(uname -m)"
    echo "rustc $(bash scripts/with-cargo-path.sh rustc --version)"
    echo "lto ${CARGO_PROFILE_BENCH_LTO:-profile default} codegen-units ${CARGO_PROFILE_BENCH_CODEGEN_UNITS:-profile default}"
  } >"$DEVICE_DIR/BUILD"
  if [ "$fetch_vulkan" = 1 ] && ! ls .gl/libglvnd0_*.deb >/dev/null 2>&1; then
    # The device machine may lack the Vulkan loader (libvulkan.so.1), and the NVIDIA ICD's
    # library needs glvnd's dispatch libraries: with the loader alone wgpu finds no adapter
    # (seen on an H200 machine, 2026-12-04). Debian's packages, unpacked there.
    echo "device-bench: fetching the Vulkan loader's and glvnd's .debs into .gl/"
    mkdir -p .gl /tmp/amd64/partial
    local o=(-oAPT::Architecture=amd64 -oAPT::Architectures=amd64 -oDir::State::Lists=/tmp/amd64)
    if ! { apt-get "${o[@]}" update >/dev/null && (cd .gl && apt-get "${o[@]}" download \
      libvulkan1 libegl1 libglvnd0 libopengl0 libgl1 libglx0 libgles2); }; then
      echo "device-bench: warning: could not fetch the loaders; the run needs them there" >&2
    fi
  fi
  ls -l "$DEVICE_DIR/bin" .gl 2>/dev/null
  # What travels: tracked + untracked-not-ignored files, plus the carried folders.
  local tree carried total
  tree=$( (git ls-files -z --cached --others --exclude-standard | xargs -0 -r stat -c %s 2>/dev/null) |
    awk '{s += $1} END {print s + 0}')
  carried=$(du -sb "$DEVICE_DIR" .gl 2>/dev/null | awk '{s += $1} END {print s + 0}')
  total=$((tree + carried))
  awk -v t="$total" -v w="$tree" -v c="$carried" -v l="$LIMIT_BYTES" 'BEGIN {
    m = 1048576
    printf "device-bench: %.1f MiB would travel (tree %.1f + .device and .gl %.1f) of %d MiB\n",
      t / m, w / m, c / m, l / m }'
  [ "$total" -le "$LIMIT_BYTES" ] || EXIT=1 die "over the 64 MiB the device tool sends"
  echo 'device-bench: on the device: run(command="bash scripts/device-bench.sh", carry=[".device", ".gl"], timeout_s=360)'
}

# Vendor spec figures (datasheets; not measured): adapter-name substring | memory bandwidth
# GB/s | FP32 non-tensor TFLOP/s. First match wins, so longer names come first.
PEAKS='NVIDIA H200 NVL|4800|60|H200 NVL datasheet
NVIDIA H200|4800|67|H200 SXM datasheet (HBM3e 4.8 TB/s, FP32 67 TFLOP/s)
NVIDIA H100 PCIe|2000|51|H100 PCIe datasheet
NVIDIA H100 NVL|3900|60|H100 NVL datasheet
NVIDIA H100|3350|67|H100 SXM datasheet
NVIDIA A100-SXM4-80GB|2039|19.5|A100 80GB SXM datasheet
NVIDIA A100|1555|19.5|A100 40GB datasheet
NVIDIA L4|300|30.3|L4 datasheet'
# More rows (same format, one per line) can come in DEVICE_BENCH_PEAKS; they are tried first.
PEAKS="${DEVICE_BENCH_PEAKS:+$DEVICE_BENCH_PEAKS
}$PEAKS"

run() {
  local allow_cpu=0 quick=0 budget=290 out="" gguf=""
  while [ $# -gt 0 ]; do
    case "$1" in
      --allow-cpu-adapter) allow_cpu=1 ;;
      --quick) quick=1 ;;
      --budget) budget="$2"; shift ;;
      --out) out="$2"; shift ;;
      --gguf) gguf="$2"; shift ;;
      *) die "unknown option $1 (see the head of $0)" ;;
    esac
    shift
  done
  local start=$SECONDS
  if [ -z "$out" ]; then
    if [ -n "${OUT:-}" ]; then out="$OUT/device-bench.json"; else out=bench/results/device-latest.json; fi
  fi
  mkdir -p "$(dirname "$out")"
  local log="${out%.json}.log"
  local work
  work="$(mktemp -d)"
  : >"$log"
  say() { echo "$*" | tee -a "$log"; }

  command -v python3 >/dev/null || die "python3 is needed to write the JSON"
  for b in "${BENCHES[@]}"; do
    [ -f "$DEVICE_DIR/bin/$b" ] || die "$DEVICE_DIR/bin/$b is missing: run 'bash scripts/device-bench.sh --build' here first and carry $DEVICE_DIR"
    [ -x "$DEVICE_DIR/bin/$b" ] || chmod +x "$DEVICE_DIR/bin/$b" || die "cannot make $DEVICE_DIR/bin/$b executable"
  done
  [ -f "$DEVICE_DIR/BUILD" ] && say "build: $(tr '\n' ';' <"$DEVICE_DIR/BUILD")"

  # The Vulkan loader and glvnd: unpack the carried Debian packages when the machine lacks
  # either (the NVIDIA ICD's library needs libGLdispatch.so.0 beside the loader).
  local loader=system
  if ! ldconfig -p 2>/dev/null | grep -q 'libvulkan\.so\.1' ||
    ! ldconfig -p 2>/dev/null | grep -q 'libGLdispatch\.so\.0'; then
    if ls .gl/*.deb >/dev/null 2>&1; then
      say "no libvulkan.so.1 or libGLdispatch.so.0 here: unpacking .gl/*.deb into /"
      for f in .gl/*.deb; do dpkg -x "$f" / || say "warning: dpkg -x $f failed"; done
      ldconfig
      loader="unpacked from .gl"
    else
      say "warning: no libvulkan.so.1 or libGLdispatch.so.0 here and no .gl/*.deb to unpack"
      loader=missing
    fi
  fi
  # The NVIDIA ICD, where the driver is mounted but no loader search path names it.
  local nvidia_icd=/usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json
  if [ -z "${VK_DRIVER_FILES:-}${VK_ICD_FILENAMES:-}" ] && [ -f "$nvidia_icd" ] &&
    ! ls /usr/share/vulkan/icd.d/nvidia* /etc/vulkan/icd.d/nvidia* /usr/local/share/vulkan/icd.d/nvidia* >/dev/null 2>&1; then
    export VK_DRIVER_FILES="$nvidia_icd"
    say "VK_DRIVER_FILES=$VK_DRIVER_FILES"
  fi

  if command -v nvidia-smi >/dev/null; then
    nvidia-smi --query-gpu=name,memory.total,clocks.max.sm,clocks.max.memory,driver_version,power.limit \
      --format=csv,noheader >"$work/nvidia-smi.csv" 2>>"$log" || true
    say "nvidia-smi: $(cat "$work/nvidia-smi.csv")"
  else
    say "nvidia-smi: not on this machine"
  fi

  # Which adapter wgpu picks, before any benchmark.
  local probe_rc
  "$DEVICE_DIR/bin/decode_step" --adapter-only --json "$work/adapter.json" 2>&1 |
    grep -v XDG_RUNTIME_DIR | tee -a "$log"
  probe_rc=${PIPESTATUS[0]}
  local fallback
  fallback="$(python3 -c 'import json,sys; print(str(json.load(open(sys.argv[1])).get("adapter.fallback")).lower())' "$work/adapter.json" 2>/dev/null)"
  local verdict=""
  if [ "$probe_rc" -ne 0 ] || [ -z "$fallback" ] || [ "$fallback" = none ]; then
    verdict="no Vulkan adapter: wgpu found none (is libvulkan.so.1 there, and a driver's ICD json?)"
    EXIT=2
  elif [ "$fallback" = true ] && [ "$allow_cpu" = 0 ]; then
    verdict="the only Vulkan adapter is a CPU one (see above; lavapipe = llvmpipe), not a GPU: refusing to benchmark it (--allow-cpu-adapter does)"
    EXIT=3
  fi

  local statuses="$work/status"
  : >"$statuses"
  if [ -z "$verdict" ]; then
    local gpu_flag=()
    [ "$allow_cpu" = 1 ] || gpu_flag=(--require-gpu)
    local q=()
    [ "$quick" = 1 ] && q=(--quick)
    local matmul_args=("${q[@]}")
    if [ "$fallback" = false ] && [ "$quick" = 0 ]; then
      # A real GPU: the default shapes, and large ones that can approach its peak.
      for s in 384x384x384 128x384x1536 1536x384x128 1024x1024x1024 2048x2048x2048 4096x4096x4096; do
        matmul_args+=(--shape "$s")
      done
    fi
    local decode_args=("${q[@]}")
    [ -n "$gguf" ] && decode_args+=(--gguf "$gguf")
    # run name | bench binary | its own limit in seconds | its arguments. The decode step runs
    # as configured (real GPUs split attention; the subgroup GEMV where the device has
    # subgroups, else the workgroup one; neighbouring ops fused) and four times more, each with
    # one choice changed: unsplit attention, the staged GEMV (not yet auto's choice), the
    # workgroup GEMV, and every op dispatched alone (fusion off).
    local plan=("matmul|matmul|100|${matmul_args[*]}" "qmatvec|qmatvec|100|webgpu ${q[*]}"
      "decode_step|decode_step|50|${decode_args[*]}"
      "decode_step_unsplit|decode_step|40|${decode_args[*]} --spec attention_splits=1"
      "decode_step_staged|decode_step|40|${decode_args[*]} --spec gemv_kernel=staged"
      "decode_step_workgroup|decode_step|40|${decode_args[*]} --spec gemv_kernel=workgroup"
      "decode_step_unfused|decode_step|40|${decode_args[*]} --spec fusion=off")
    local entry name binary limit bench_args left rc
    for entry in "${plan[@]}"; do
      IFS='|' read -r name binary limit bench_args <<<"$entry"
      left=$((budget - (SECONDS - start) - 10))
      [ "$left" -lt "$limit" ] && limit=$left
      if [ "$limit" -lt 15 ]; then
        say "== $name: skipped, out of time"
        echo "$name skipped" >>"$statuses"
        continue
      fi
      say "== $name $bench_args (limit ${limit} s)"
      # shellcheck disable=SC2086 # bench_args is a list of words
      timeout --kill-after=5 "$limit" "$DEVICE_DIR/bin/$binary" $bench_args "${gpu_flag[@]}" \
        --json "$work/$name.json" 2>&1 | grep -v XDG_RUNTIME_DIR | tee -a "$log"
      rc=${PIPESTATUS[0]}
      case "$rc" in
        0) echo "$name ok" >>"$statuses" ;;
        124 | 137) echo "$name timeout" >>"$statuses"; say "$name: stopped at its limit of $limit s" ;;
        *) echo "$name failed:$rc" >>"$statuses"; say "$name: exit status $rc" ;;
      esac
    done
  fi

  PEAKS="$PEAKS" LOADER="$loader" VK_DRIVER_FILES="${VK_DRIVER_FILES:-}" python3 - "$work" "$out" "$((SECONDS - start))" "$verdict" >>"$log" 2>&1 <<'PY'
import json, os, platform, sys, time
work, out, seconds, verdict = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4]

def load(name):
    try:
        with open(os.path.join(work, name)) as f:
            return json.load(f)
    except (OSError, ValueError):
        return {}

adapter = load("adapter.json")
result = {
    "date": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
    "host": {"machine": platform.machine(), "cpus": os.cpu_count(), "kernel": platform.release()},
    "seconds": seconds,
    "error": verdict or None,
    "vulkan": {"loader": os.environ["LOADER"], "VK_DRIVER_FILES": os.environ["VK_DRIVER_FILES"] or None},
    "adapter": {k.split(".", 1)[1]: v for k, v in adapter.items() if k.startswith("adapter.")},
    "device": {k: v for k, v in adapter.items() if k.startswith(("limits.", "features."))},
}
try:
    with open(".device/BUILD") as f:
        result["build"] = f.read().strip().splitlines()
except OSError:
    pass
try:
    with open(os.path.join(work, "nvidia-smi.csv")) as f:
        rows = [r.strip() for r in f if r.strip()]
    keys = ["name", "memory_total", "max_sm_clock", "max_memory_clock", "driver", "power_limit"]
    result["nvidia_smi"] = [dict(zip(keys, (c.strip() for c in r.split(",")))) for r in rows]
except OSError:
    result["nvidia_smi"] = None

card = result["adapter"].get("description", "")
names = [card] + [g.get("name", "") for g in result.get("nvidia_smi") or []]
peak = None
for line in os.environ["PEAKS"].splitlines():
    key, bw, fp32, source = line.split("|")
    if any(key in n for n in names):
        peak = {"match": key, "memory_gbps": float(bw), "fp32_tflops": float(fp32),
                "source": "vendor spec: " + source}
        break
result["card"] = (result.get("nvidia_smi") or [{}])[0].get("name") or card
result["peak"] = peak

statuses = {}
try:
    with open(os.path.join(work, "status")) as f:
        for line in f:
            name, status = line.split()
            statuses[name] = status
except OSError:
    pass
result["status"] = statuses

measured = {}
for name in ("matmul", "qmatvec", "decode_step", "decode_step_unsplit", "decode_step_staged",
             "decode_step_workgroup", "decode_step_unfused"):
    values = load(name + ".json")
    for key, value in values.items():
        if key != "bench" and not key.startswith(("adapter.", "limits.", "features.")):
            # A variant's decode_step_* keys are named after the run (decode_step_unsplit_*).
            if name != "decode_step" and key.startswith("decode_step_"):
                key = name + key[len("decode_step"):]
            measured[key] = value
result["measured"] = measured

fractions = {}
if peak:
    for key, value in measured.items():
        if not isinstance(value, (int, float)):
            continue
        if key.endswith("_gflops"):
            fractions[key[: -len("_gflops")] + "_of_peak_fp32"] = value / (peak["fp32_tflops"] * 1e3)
        elif key.endswith("_gbps"):
            fractions[key[: -len("_gbps")] + "_of_peak_bandwidth"] = value / peak["memory_gbps"]
result["fraction_of_peak"] = fractions
# The issue's report keys: the best GEMM shape as a fraction of the FP32 peak, for the default
# register-tiled kernel and for the first tiled kernel (tiled_v1) of the same run.
for suffix, kernel in (("", "tiled"), ("_v1", "tiled_v1")):
    best = [v for k, v in fractions.items()
            if k.startswith("matmul_") and k.endswith("_" + kernel + "_of_peak_fp32")]
    result["device_matmul_fraction_of_peak" + suffix] = max(best) if best else None
# Against the read bandwidth measured in the same run (qmatvec's plain WGSL sum).
baseline = measured.get("qmatvec_webgpu_baseline_gbps")
result["fraction_of_measured_bandwidth"] = {
    key[: -len("_gbps")]: value / baseline
    for key, value in measured.items()
    if baseline and key.endswith("_gbps") and isinstance(value, (int, float))
    and key.startswith("decode_step_")
}

with open(out, "w") as f:
    json.dump(result, f, indent=2, sort_keys=False)
    f.write("\n")
print("device-bench: wrote", out)
PY
  [ $? -eq 0 ] || die "could not write $out (see $log)"
  local unfinished
  unfinished="$(grep -v ' ok$' "$statuses" | tr '\n' ' ')"
  rm -rf "$work"
  say "device-bench: wrote $out and $log in $((SECONDS - start)) s"
  [ -z "$verdict" ] || die "$verdict"
  [ -z "$unfinished" ] || EXIT=4 die "not every benchmark completed: $unfinished"
}

case "${1:-}" in
  --build) shift; build "$@" ;;
  *) run "$@" ;;
esac
