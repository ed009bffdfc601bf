"""A NumPy interpreter of webdelegate programs (the JSON form), for checking the lowering
ahead of time: it follows the op definitions in ``src/program/ops/*.rs`` (f32 math), binds
symbols from the inputs' shapes and reads parameters from a ``{key: array}`` map. It is a
test oracle for the AOT path, not a runtime; the Rust CPU backend is the reference."""

from __future__ import annotations

import math
from typing import Any, Dict, List, Mapping, Sequence

import numpy as np

NP_DTYPES = {"F32": np.float32, "I32": np.int32, "I64": np.int64, "U8": np.uint8}


def _erf(x: np.ndarray) -> np.ndarray:
    return np.vectorize(math.erf, otypes=[np.float64])(x)


def run_program(program: Mapping[str, Any], weights: Mapping[str, np.ndarray],
                inputs: Sequence[np.ndarray],
                states: Dict[int, np.ndarray] | None = None) -> List[np.ndarray]:
    """Runs ``program`` (serde JSON object) on ``inputs``; returns its outputs. ``states``
    (tensor id -> array) carries state tensors across calls: pass the same dict to every
    call of one session (it starts empty: states are zero at init)."""
    tensors = program["tensors"]
    values: Dict[int, np.ndarray] = {}
    symbols: Dict[int, int] = {}

    def dims(tid: int) -> List[int]:
        out = []
        for dim in tensors[tid]["shape"]:
            if "Fixed" in dim:
                out.append(dim["Fixed"])
            else:
                out.append(symbols[dim["Symbol"]])
        return out

    def dtype(tid: int) -> Any:
        d = tensors[tid]["dtype"]
        if isinstance(d, dict):
            return np.float32  # block formats decode to f32 (only f16/bf16 handled here)
        return NP_DTYPES[d]

    for tid, array in zip(program["inputs"], inputs):
        for dim, size in zip(tensors[tid]["shape"], array.shape):
            if "Symbol" in dim:
                symbols.setdefault(dim["Symbol"], int(size))
        values[tid] = np.asarray(array)
    for param in program["params"]:
        values[param["tensor"]] = np.asarray(weights[param["key"]]).astype(
            dtype(param["tensor"])).reshape(dims(param["tensor"]))
    states = {} if states is None else states
    for state in program["states"]:
        if state not in states:
            states[state] = np.zeros(dims(state), dtype(state))
        values[state] = states[state]

    for entry in program["ops"]:
        ((kind, op),) = entry.items()
        out = op["out"]
        v = values.get
        if kind == "Gather":
            result = v(op["table"])[v(op["ids"]).astype(np.int64)]
        elif kind == "Binary":
            a, b = v(op["a"]).astype(np.float32), v(op["b"]).astype(np.float32)
            result = {"Add": np.add, "Sub": np.subtract, "Mul": np.multiply,
                      "Div": np.divide}[op["op"]](a, b)
        elif kind == "Scale":
            result = v(op["x"]) * np.float32(op["scale"]) + np.float32(op["bias"])
        elif kind == "Unary":
            x = v(op["x"]).astype(np.float64)
            fn = op["op"]
            if fn == "Gelu":
                result = x * 0.5 * (1.0 + _erf(x / math.sqrt(2.0)))
            elif fn == "GeluTanh":
                result = 0.5 * x * (1 + np.tanh(math.sqrt(2 / math.pi) * (x + 0.044715 * x ** 3)))
            elif fn == "Tanh":
                result = np.tanh(x)
            elif fn == "Relu":
                result = np.maximum(x, 0)
            else:
                result = x / (1 + np.exp(-x))
        elif kind in ("MatMul", "Linear"):
            a = v(op["a"] if kind == "MatMul" else op["x"]).astype(np.float32)
            if kind == "Linear":
                b = np.swapaxes(v(op["weight"]).astype(np.float32), -1, -2)
            else:
                b = v(op["b"]).astype(np.float32)
                if op["transpose_a"]:
                    a = np.swapaxes(a, -1, -2)
                if op["transpose_b"]:
                    b = np.swapaxes(b, -1, -2)
            result = np.matmul(a, b)
            if op.get("bias") is not None:
                result = result + v(op["bias"])
        elif kind == "LayerNorm":
            x = v(op["x"]).astype(np.float32)
            mean = x.mean(-1, keepdims=True)
            var = ((x - mean) ** 2).mean(-1, keepdims=True)
            result = (x - mean) / np.sqrt(var + np.float32(op["eps"])) * v(op["gamma"]) \
                + v(op["beta"])
        elif kind == "Softmax":
            x = v(op["x"]).astype(np.float32)
            if op.get("mask") is not None:
                x = x + v(op["mask"])
            e = np.exp(x - x.max(-1, keepdims=True))
            result = e / e.sum(-1, keepdims=True)
        elif kind == "Reshape":
            result = v(op["x"]).reshape(dims(out))
        elif kind == "Permute":
            result = np.transpose(v(op["x"]), op["perm"])
        elif kind == "Slice":
            x = v(op["x"])
            index = [slice(None)] * x.ndim
            index[op["axis"]] = slice(op["start"], op["end"])
            result = x[tuple(index)]
        elif kind == "Concat":
            result = np.concatenate([v(i) for i in op["inputs"]], axis=op["axis"])
        elif kind == "Cast":
            result = v(op["x"])
        elif kind == "Argmax":
            result = np.argmax(v(op["x"]), axis=-1)
        elif kind == "Range":
            result = np.arange(dims(out)[0])
        elif kind == "MeanPool":
            x = v(op["x"]).astype(np.float32)
            m = (v(op["mask"]) != 0).astype(np.float32)
            result = (x * m[..., None]).sum(1) / np.maximum(m.sum(1, keepdims=True), 1e-9)
        elif kind == "L2Normalize":
            x = v(op["x"]).astype(np.float32)
            norm = np.sqrt((x * x).sum(-1, keepdims=True))
            result = x / np.maximum(norm, np.float32(op["eps"]))
        elif kind == "RmsNorm":
            x = v(op["x"]).astype(np.float32)
            result = x / np.sqrt((x * x).mean(-1, keepdims=True) + np.float32(op["eps"]))
            if op.get("weight") is not None:
                result = result * v(op["weight"])
        elif kind == "Rope":
            x = v(op["x"]).astype(np.float32)
            dims_, half = op["dims"], op["dims"] // 2
            inv = (1.0 / (np.float64(op["base"]) ** (np.arange(half) * 2.0 / dims_))
                   ).astype(np.float32)
            theta = v(op["positions"]).astype(np.float32)[:, None] * inv[None, :]
            cos, sin = np.cos(theta)[:, None, :], np.sin(theta)[:, None, :]
            result = x.copy()
            if op["style"] == "Neox":
                a, b = x[..., :half], x[..., half:dims_]
                result[..., :half] = a * cos - b * sin
                result[..., half:dims_] = a * sin + b * cos
            else:
                a, b = x[..., 0:dims_:2], x[..., 1:dims_:2]
                result[..., 0:dims_:2] = a * cos - b * sin
                result[..., 1:dims_:2] = a * sin + b * cos
        elif kind == "Attention":
            q, k, vv = v(op["q"]), v(op["k"]), v(op["v"])
            kc, vc = values[op["k_cache"]], values[op["v_cache"]]
            pos = v(op["positions"]).astype(np.int64)
            if pos.min() < 0 or pos.max() >= kc.shape[0] or len(set(pos.tolist())) != len(pos):
                raise ValueError(f"attention positions {pos.tolist()} out of range or repeated")
            kc[pos] = k
            vc[pos] = vv
            group = q.shape[1] // kc.shape[1]
            result = np.zeros(list(q.shape[:2]) + [vc.shape[-1]], np.float32)
            for s_, p in enumerate(pos):
                lo = 0 if op["window"] == 0 else max(0, p + 1 - op["window"])
                for h in range(q.shape[1]):
                    g = h // group
                    logits = (kc[lo:p + 1, g] @ q[s_, h]) * np.float32(op["scale"])
                    if op["softcap"] > 0:
                        logits = np.tanh(logits / op["softcap"]) * op["softcap"]
                    e = np.exp(logits - logits.max())
                    result[s_, h] = (e / e.sum()) @ vc[lo:p + 1, g]
        else:
            raise NotImplementedError(f"reference interpreter: op {kind}")
        result = np.asarray(result).astype(dtype(out))
        if list(result.shape) != dims(out):
            raise ValueError(f"{kind} -> %{out}: shape {list(result.shape)}, "
                             f"declared {dims(out)}")
        values[out] = result
    return [values[o] for o in program["outputs"]]
