#!/usr/bin/env python3
"""Rebuilds tests/fixtures/pte/gemma.pte's weights file, gemma.ptd (~1.07 GB, f32), from the
Gemma 3 270M GGUF without torch, transformers or executorch: gguf-py's dequantizer and NumPy
only (e.g. the setup's reference venv: `.cache/venv-ref/bin/python`, gguf==0.19.0), byte for
byte what ExecuTorch 1.5.1 wrote in `scripts/make-pte-fixtures.py --only gemma`.

    .cache/venv-ref/bin/python scripts/make-gemma-ptd.py [--gguf PATH] [--out PATH]

How: a .ptd is `head | segments`. The head (FH01 header + FT01 flatbuffer index, padded to
the segment base offset) is committed as tests/fixtures/pte/gemma.ptd.head: every key (the
parameter's fully-qualified name in transformers' Gemma3ForCausalLM), its TensorLayout and
its segment. Each segment is the raw little-endian f32 bytes of the parameter as transformers
loads it from the GGUF: `gguf.dequantize(tensor.data, tensor.tensor_type)` (the function
transformers' GGUF loader calls), for norm weights minus 1 (transformers' Gemma TensorProcessor
undoes llama.cpp's `1 + w`; the program adds it back), as f32. This script maps GGUF names to
those keys, checks each tensor's shape against the layout, writes the segments at their
offsets (zero padding between) and checks the sha256 recorded in tests/fixtures/pte/gemma.json.
"""

from __future__ import annotations

import argparse
import hashlib
import importlib.util
import json
import re
import sys
from pathlib import Path
from typing import Dict

import numpy as np

REPO = Path(__file__).resolve().parents[1]
FIXTURES = REPO / "tests" / "fixtures" / "pte"
DEFAULT_GGUF = REPO / ".cache" / "models" / "gemma-3-270m" / "gemma-3-270m-q4_k_m.gguf"

# The flatbuffer reader of the MiniLM rebuild (same .ptd format); no __pycache__ in scripts/.
sys.dont_write_bytecode = True
_spec = importlib.util.spec_from_file_location("make_minilm_ptd",
                                               REPO / "scripts" / "make-minilm-ptd.py")
_minilm = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(_minilm)
parse_head = _minilm.parse_head

#: llama.cpp's Gemma 3 tensor names -> transformers' (per layer `blk.N.` -> `model.layers.N.`).
LAYER_NAMES = {
    "attn_q": "self_attn.q_proj",
    "attn_k": "self_attn.k_proj",
    "attn_v": "self_attn.v_proj",
    "attn_output": "self_attn.o_proj",
    "attn_q_norm": "self_attn.q_norm",
    "attn_k_norm": "self_attn.k_norm",
    "attn_norm": "input_layernorm",
    "post_attention_norm": "post_attention_layernorm",
    "ffn_norm": "pre_feedforward_layernorm",
    "post_ffw_norm": "post_feedforward_layernorm",
    "ffn_gate": "mlp.gate_proj",
    "ffn_up": "mlp.up_proj",
    "ffn_down": "mlp.down_proj",
}
GLOBAL_NAMES = {"token_embd": "model.embed_tokens", "output_norm": "model.norm"}


def hf_name(gguf_name: str) -> str:
    """The transformers parameter name of a GGUF tensor (e.g. `blk.3.ffn_norm.weight` ->
    `model.layers.3.pre_feedforward_layernorm.weight`)."""
    base, _, suffix = gguf_name.rpartition(".")
    match = re.fullmatch(r"blk\.(\d+)\.(\w+)", base)
    if match and match.group(2) in LAYER_NAMES:
        return f"model.layers.{match.group(1)}.{LAYER_NAMES[match.group(2)]}.{suffix}"
    if base in GLOBAL_NAMES:
        return f"{GLOBAL_NAMES[base]}.{suffix}"
    raise KeyError(f"GGUF tensor {gguf_name!r} has no Gemma 3 parameter name")


def transformers_weight(tensor, dequantize) -> np.ndarray:
    """The tensor as transformers holds it: dequantized, norms minus 1 (in the dequantized
    dtype, as its TensorProcessor does), f32."""
    weights = dequantize(tensor.data, tensor.tensor_type)
    if "norm.weight" in tensor.name:
        weights = weights - 1
    return np.ascontiguousarray(weights, dtype=np.float32)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--gguf", default=str(DEFAULT_GGUF))
    parser.add_argument("--head", default=str(FIXTURES / "gemma.ptd.head"))
    parser.add_argument("--out", default=str(REPO / "target" / "pte-fixtures" / "gemma.ptd"))
    parser.add_argument("--expect-sha256", default=None,
                        help="default: the sha256 in tests/fixtures/pte/gemma.json; '' skips "
                             "the check")
    args = parser.parse_args()
    if args.expect_sha256 is None:
        args.expect_sha256 = json.loads((FIXTURES / "gemma.json").read_text()
                                        )["sha256"]["gemma.ptd"]
    try:
        from gguf import GGUFReader, dequantize
    except ImportError:
        sys.exit("gguf-py is needed: pip install gguf==0.19.0 (or run with "
                 ".cache/venv-ref/bin/python)")

    head = Path(args.head).read_bytes()
    index = parse_head(head)
    reader = GGUFReader(args.gguf)
    tensors: Dict[str, object] = {}
    for tensor in reader.tensors:
        tensors[hf_name(tensor.name)] = tensor
    first_key: Dict[int, Dict] = {}
    for entry in index["named_data"]:
        if entry["key"] not in tensors:
            sys.exit(f"{entry['key']}: no GGUF tensor maps to it")
        first_key.setdefault(entry["segment"], entry)
    unused = set(tensors) - {e["key"] for e in index["named_data"]}
    if unused:
        sys.exit(f"GGUF tensors not in the .ptd: {sorted(unused)}")

    out_path = Path(args.out)
    out_path.parent.mkdir(parents=True, exist_ok=True)
    digest = hashlib.sha256()
    with open(out_path, "wb") as out:
        out.write(head)
        digest.update(head)
        written = 0
        for number, (offset, size) in enumerate(index["segments"]):
            entry = first_key.get(number)
            if entry is None:
                sys.exit(f"segment {number} has no key")
            key, layout = entry["key"], entry["layout"]
            if _minilm.SCALAR_TYPES[layout["scalar_type"]][0] != "F32":
                sys.exit(f"{key}: the .ptd layout is not f32")
            data = transformers_weight(tensors[key], dequantize)
            if list(data.shape) != layout["sizes"]:
                sys.exit(f"{key}: dequantized shape {list(data.shape)}, the .ptd layout "
                         f"{layout['sizes']}")
            raw = data.astype("<f4", copy=False).tobytes()
            if len(raw) != size:
                sys.exit(f"{key}: {len(raw)} bytes, the segment holds {size}")
            if offset < written:
                sys.exit(f"segment {number} at {offset} overlaps the previous one")
            pad = b"\0" * (offset - written)
            out.write(pad)
            out.write(raw)
            digest.update(pad)
            digest.update(raw)
            written = offset + size
        if written != index["segment_data_size"]:
            sys.exit(f"segments end at {written}, header says {index['segment_data_size']}")
    got = digest.hexdigest()
    if args.expect_sha256 and got != args.expect_sha256:
        sys.exit(f"{out_path}: sha256 {got}, expected {args.expect_sha256}")
    checked = "matches the export" if args.expect_sha256 else "not checked"
    print(f"{out_path}: {out_path.stat().st_size} bytes, {len(index['named_data'])} keys, "
          f"{len(index['segments'])} segments, sha256 {got} ({checked})")


if __name__ == "__main__":
    main()
