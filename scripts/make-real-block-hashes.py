#!/usr/bin/env python3
"""Writes tests/fixtures/quant/gemma-3-270m-blocks.json: for windows of blocks cut from the real
Gemma 3 270M Q4_K_M file (every block type it holds: Q8_0, Q5_0, Q4_K, Q6_K), where they lie in
the file and the SHA-256 of the f32 values the `gguf` package's `gguf.quants.dequantize` makes
of them (llama.cpp's gguf-py: the independent oracle). tests/quant_blocks.rs reads the same
bytes from the file that `scripts/setup.sh` fetched and checks our dequantizer bit for bit,
without committing any of the weights.

Usage: python3 scripts/make-real-block-hashes.py [path/to/gemma-3-270m-q4_k_m.gguf]
(needs `pip install gguf==0.19.0 numpy`)
"""
import hashlib
import json
import pathlib
import sys

import numpy as np
from gguf import GGUFReader
from gguf.quants import dequantize
from gguf.constants import GGML_QUANT_SIZES

ROOT = pathlib.Path(__file__).resolve().parent.parent
DEFAULT = ROOT / ".cache" / "models" / "gemma-3-270m" / "gemma-3-270m-q4_k_m.gguf"
OUT = ROOT / "tests" / "fixtures" / "quant" / "gemma-3-270m-blocks.json"
WINDOW = 40  # blocks per window
TENSORS_PER_TYPE = 2


def main() -> None:
    path = pathlib.Path(sys.argv[1]) if len(sys.argv) > 1 else DEFAULT
    reader = GGUFReader(path)
    seen: dict[str, int] = {}
    windows = []
    for tensor in reader.tensors:
        kind = tensor.tensor_type.name
        if kind not in ("Q8_0", "Q5_0", "Q4_K", "Q6_K"):
            continue
        if seen.get(kind, 0) >= TENSORS_PER_TYPE:
            continue
        seen[kind] = seen.get(kind, 0) + 1
        elems, size = GGML_QUANT_SIZES[tensor.tensor_type]
        raw = np.asarray(tensor.data).view(np.uint8).reshape(-1)
        blocks = raw.size // size
        for start in (0, blocks // 2 - WINDOW // 2, blocks - WINDOW):
            cut = raw[start * size:(start + WINDOW) * size]
            values = dequantize(cut, tensor.tensor_type).astype("<f4").reshape(-1)
            windows.append({
                "tensor": tensor.name,
                "type": kind,
                "offset": int(tensor.data_offset) + start * size,
                "bytes": WINDOW * size,
                "values": int(values.size),
                "first_values": [float(v) for v in values[:4]],
                "sha256_f32_le": hashlib.sha256(values.tobytes()).hexdigest(),
            })
    file_sha = hashlib.sha256(path.read_bytes()).hexdigest()
    OUT.write_text(json.dumps({"file_sha256": file_sha, "gguf": "0.19.0", "windows": windows}, indent=1) + "\n")
    print(f"{OUT}: {len(windows)} windows of {WINDOW} blocks")


if __name__ == "__main__":
    main()
