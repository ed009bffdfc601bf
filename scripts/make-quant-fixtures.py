#!/usr/bin/env python3
"""Writes tests/fixtures/quant/<TYPE>.blocks and <TYPE>.f32: random ggml blocks and their values
as dequantized by the `gguf` package (llama.cpp's gguf-py, `gguf.quants.dequantize`), the
independent oracle of src/quant (tests/quant_blocks.rs compares bit for bit).

Every byte of a block is random, except that most f16 scale fields are drawn from a range of
ordinary values (random bits would make most of them huge or NaN); a few blocks keep random
scale bits so that subnormal, infinite and NaN scales are covered too.

Usage: python3 scripts/make-quant-fixtures.py  (needs `pip install gguf==0.19.0 numpy`)
"""
import pathlib

import numpy as np
from gguf import GGMLQuantizationType as T
from gguf.quants import dequantize, quantize

OUT = pathlib.Path(__file__).resolve().parent.parent / "tests" / "fixtures" / "quant"
BLOCKS = 12  # per type: 8 with ordinary scales, 4 with raw random scale bits

# type: (elements per block, bytes per block, byte offsets of its f16 scale fields)
TYPES = {
    "F16": (T.F16, 1, 2, []),
    "BF16": (T.BF16, 1, 2, []),
    "Q4_0": (T.Q4_0, 32, 18, [0]),
    "Q5_0": (T.Q5_0, 32, 22, [0]),
    "Q8_0": (T.Q8_0, 32, 34, [0]),
    "Q4_K": (T.Q4_K, 256, 144, [0, 2]),
    "Q5_K": (T.Q5_K, 256, 176, [0, 2]),
    "Q6_K": (T.Q6_K, 256, 210, [208]),
}


def main() -> None:
    rng = np.random.default_rng(20261201)
    OUT.mkdir(parents=True, exist_ok=True)
    for name, (qtype, elems, size, scales) in TYPES.items():
        # F16/BF16 "blocks" are single elements: use 256 of them per fixture row.
        count = BLOCKS * (256 if elems == 1 else 1)
        raw = rng.integers(0, 256, size=(count, size), dtype=np.uint8)
        for i in range(min(count, 8 if elems > 1 else count)):
            if elems == 1:
                break
            for off in scales:
                value = np.float16(rng.uniform(-0.05, 0.05))
                raw[i, off : off + 2] = np.frombuffer(value.tobytes(), dtype=np.uint8)
        if elems == 1 and name == "F16":
            # Ordinary values for most, raw bits (NaN, inf, subnormal) for the rest.
            ordinary = rng.uniform(-4, 4, size=count * 3 // 4).astype(np.float16)
            raw[: len(ordinary)] = ordinary.view(np.uint8).reshape(-1, 2)
        values = dequantize(raw.reshape(-1), qtype).astype(np.float32).reshape(-1)
        assert values.size == count * elems, (name, values.size)
        (OUT / f"{name}.blocks").write_bytes(raw.tobytes())
        (OUT / f"{name}.f32").write_bytes(values.astype("<f4").tobytes())
        print(f"{name}: {count} blocks, {values.size} values")
    activations(np.random.default_rng(20261203))


def activations(rng) -> None:
    """activations.f32: activation rows for the CPU backend's int8 path; activations.q8_0: the
    same values quantized by `gguf.quants.quantize(x, Q8_0)` (ggml's quantize_row_q8_0_ref,
    bit for bit): the oracle of the int8 quants (webdelegate_kernels::int8_dots). Rows cover
    ordinary values, exact ties (x = d * (n + 0.5), rounded away from zero), a zero block,
    tiny and huge magnitudes."""
    blocks = rng.normal(0, 1.5, size=(64, 32)).astype(np.float32)
    blocks[1] = 0
    blocks[2] *= np.float32(1e-30)
    blocks[3] *= np.float32(1e30)
    for b in range(4, 12):
        # amax 127 * 0.25: d = 0.25 exactly, and every other value a tie n + 0.5 steps.
        steps = rng.integers(-126, 126, size=32).astype(np.float32) + np.float32(0.5)
        blocks[b] = steps * np.float32(0.25)
        blocks[b, 0] = np.float32(127 * 0.25)
    x = blocks.reshape(-1)
    q = quantize(x, T.Q8_0)
    (OUT / "activations.f32").write_bytes(x.astype("<f4").tobytes())
    (OUT / "activations.q8_0").write_bytes(q.tobytes())
    print(f"activations: {x.size} values, {q.size} bytes of Q8_0")


if __name__ == "__main__":
    main()
