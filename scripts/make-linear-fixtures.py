#!/usr/bin/env python3
"""Writes tests/fixtures/linear/<CASE>.{weight,x,bias,want,scale}: the independent oracle of the
`linear` op (tests/common/cases/linear_fixtures.rs runs it on every backend).

Per case: a weight [N, K] in one ggml format, as the file's bytes (`.weight`): random normal
values quantized by the `gguf` package (`gguf.quants.quantize`) for F16, BF16, Q4_0, Q5_0 and
Q8_0; random blocks with ordinary f16 scales for Q4_K, Q5_K and Q6_K (gguf-py cannot quantize
k-quants; every other byte is random, so every quant value and 6-bit scale occurs). Then
activations x [17, K] (`.x`, f32), a bias [N] (`.bias`, f32), and with the weight dequantized
by `gguf.quants.dequantize`, in float64: want = x @ W^T + bias (`.want`, [17, N]) and
scale = |x| @ |W|^T + |bias| (`.scale`), the yardstick of the test's tolerance. The test takes
M = 1, 3 and 17 rows of the same x (rows are independent).

Shapes are not multiples of the kernels' tiles (16-row GEMV workgroups, 32 x 32 tiles, 2048-value
staging passes): N = 37 / K = 64 for the 32-value blocks (K = 70 for F16 and BF16: not a multiple of 8), N = 13 /
K = 512 for the k-quants, and Q8_0 with K = 4160 (two full staging passes and a partial one).
The `_odd` cases (appended last, so the others keep their bytes) have rows of an odd number of
blocks: with 34-, 22- and 210-byte blocks every other row starts half a word in, and their K
spans several passes of the staged GEMV (12 Q8_0, 17 Q5_0, 3 Q6_K, 4 Q4_K blocks per pass).

Usage: python3 scripts/make-linear-fixtures.py  (needs `pip install gguf==0.19.0 numpy`)
"""
import pathlib

import numpy as np
from gguf import GGMLQuantizationType as T
from gguf.quants import dequantize, quantize

OUT = pathlib.Path(__file__).resolve().parent.parent / "tests" / "fixtures" / "linear"
M = 17

# case: (type, N, K, byte offsets of the f16 scale fields in a block of random bytes, or None
# to quantize random values)
CASES = {
    "F16": (T.F16, 37, 70, None),
    "BF16": (T.BF16, 37, 70, None),
    "Q4_0": (T.Q4_0, 37, 64, None),
    "Q5_0": (T.Q5_0, 37, 64, None),
    "Q8_0": (T.Q8_0, 37, 64, None),
    "Q8_0_long": (T.Q8_0, 9, 4160, None),
    "Q4_K": (T.Q4_K, 13, 512, [0, 2]),
    "Q5_K": (T.Q5_K, 13, 512, [0, 2]),
    "Q6_K": (T.Q6_K, 13, 512, [208]),
    # Rows an odd number of 2-byte-aligned blocks long, so every other row starts half a word
    # in (34-, 22- and 210-byte blocks), over several passes of the staged GEMV.
    "Q8_0_odd": (T.Q8_0, 45, 800, None),
    "Q5_0_odd": (T.Q5_0, 45, 96, None),
    "Q6_K_odd": (T.Q6_K, 19, 1280, [208]),
    "Q4_K_odd": (T.Q4_K, 19, 1280, [0, 2]),
}
BLOCK_BYTES = {T.Q4_K: 144, T.Q5_K: 176, T.Q6_K: 210}


def weight_bytes(rng, qtype, n, k, scales):
    if scales is None:
        values = rng.standard_normal((n, k)).astype(np.float32)
        return np.ascontiguousarray(quantize(values, qtype)).view(np.uint8).reshape(-1)
    size = BLOCK_BYTES[qtype]
    raw = rng.integers(0, 256, size=(n * k // 256, size), dtype=np.uint8)
    for block in raw:
        for off in scales:
            value = np.float16(rng.uniform(-0.05, 0.05))
            block[off : off + 2] = np.frombuffer(value.tobytes(), dtype=np.uint8)
    return raw.reshape(-1)


def main() -> None:
    rng = np.random.default_rng(20261202)
    OUT.mkdir(parents=True, exist_ok=True)
    total = 0
    for name, (qtype, n, k, scales) in CASES.items():
        raw = weight_bytes(rng, qtype, n, k, scales)
        w = dequantize(raw, qtype).astype(np.float64).reshape(n, k)
        assert np.isfinite(w).all(), name
        x = rng.uniform(-2, 2, size=(M, k)).astype(np.float32)
        bias = rng.uniform(-1, 1, size=n).astype(np.float32)
        x64, b64 = x.astype(np.float64), bias.astype(np.float64)
        want = x64 @ w.T + b64
        scale = np.abs(x64) @ np.abs(w).T + np.abs(b64)
        files = {
            "weight": raw.tobytes(),
            "x": x.astype("<f4").tobytes(),
            "bias": bias.astype("<f4").tobytes(),
            "want": want.astype("<f8").tobytes(),
            "scale": scale.astype("<f8").tobytes(),
        }
        for ext, data in files.items():
            (OUT / f"{name}.{ext}").write_bytes(data)
            total += len(data)
        print(f"{name}: {qtype.name} N={n} K={k}, {len(raw)} weight bytes")
    print(f"total {total} bytes")


if __name__ == "__main__":
    main()
