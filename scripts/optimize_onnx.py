#!/usr/bin/env python3
"""Writes the ONNX Runtime-optimized graph of all-MiniLM-L6-v2 for the side-by-side benchmark:
what a speed-minded onnxruntime-web user ships. `onnxruntime.transformers.optimizer` (model type
bert, 12 heads, hidden 384, fusions only: opt_level 0, so no CPU-specific kernels are baked in and
the same file serves the WebGPU and wasm EPs) fuses the graph scripts/make_onnx.py builds into
ORT's contrib ops (Attention, SkipLayerNormalization, BiasGelu / Gelu, EmbedLayerNormalization
where its patterns match). Prints the fused-operator counts, then checks the optimized model
under onnxruntime (Python) against tests/fixtures/minilm/reference.json like make_onnx.py --check.

Usage: .cache/venv/bin/python scripts/optimize_onnx.py MODEL.onnx OUT.onnx
"""

import sys
from pathlib import Path

from onnxruntime.transformers.optimizer import optimize_model

sys.path.insert(0, str(Path(__file__).resolve().parent))
from make_onnx import check  # noqa: E402  (the same reference check as the plain graph)


def main():
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    source, target = Path(sys.argv[1]), Path(sys.argv[2])
    model = optimize_model(str(source), model_type="bert", num_heads=12, hidden_size=384, opt_level=0, use_gpu=False)
    fused = {op: n for op, n in model.get_fused_operator_statistics().items() if n}
    print(f"fused operators: {fused}")
    if not fused.get("Attention") and not fused.get("MultiHeadAttention"):
        print("warning: the optimizer fused no attention", file=sys.stderr)
    partial = target.with_suffix(".onnx.partial")
    model.save_model_to_file(str(partial))
    check(partial, source.parent)
    partial.rename(target)
    print(f"wrote {target} ({target.stat().st_size / 1e6:.1f} MB)")


if __name__ == "__main__":
    main()
