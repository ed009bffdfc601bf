#!/usr/bin/env python3
"""Float64 NumPy reference forward pass for GGUF decoder LLMs: `gemma2`, `gemma3`, `llama`, `phi3`, `qwen2`, `qwen3`.

The oracle for the Rust decoder builders (issue 13). Weights are dequantized with
`gguf.quants.dequantize` (bit-exact with ggml's own dequantization, so the weights are identical to
the ones our kernels see), cast to float64, and every operation runs in float64. The graphs follow
llama.cpp's at 0c1e57098 exactly (src/models/{gemma2,gemma3,llama,phi3,qwen2,qwen3}.cpp, the hparams of
src/llama-model.cpp / llama-context.cpp, build_qkv / build_ffn / build_attn_mha of src/llama-graph.cpp,
ggml-cpu ops.cpp rope), except the one deviation marked below (a `llama` file's sliding window).

Common: h = rms(x)*attn_norm (rms: x / sqrt(mean(x^2) + eps), eps = attention.layer_norm_rms_epsilon);
  q, k, v = h W (+ bias where the tensors exist: qwen2); attention over all previous positions (causal),
  softmax in f64; residual adds; FFN f = rms(x)*ffn_norm; logits = rms(x)*output_norm W_out (output.weight,
  or token_embd when tied) (+ output.bias).
RoPE (`rope`): pair i of the first n_rot = rope.dimension_count dims (default head_k) turns by
  theta_i = pos * freq_scale * base^(-2i/n_rot) / factor_i, cos and sin both times attn_factor (so only
  the rotated dims are scaled; dims n_rot.. pass through). NORM (llama) pairs (2i, 2i+1); NEOX (every other
  arch) pairs (i, i + n_rot/2). freq_scale = 1/rope.scaling.factor (type "linear", llama.cpp's default
  type; 1 without the key or for "none"); attn_factor = rope.scaling.attn_factor (default 1; llama.cpp
  multiplies its context's yarn_attn_factor 1.0 by it, for every arch, nothing else for longrope);
  factor_i from llama_model::get_rope_factors: `rope_freqs.weight` (llama3, [n_rot/2]) when present,
  else (phi3 always, llama only for rope.scaling.type "longrope") `rope_factors_long.weight` when
  n_ctx > rope.scaling.original_context_length, else `rope_factors_short.weight`; none for the others.
llama / qwen2: q k^T / sqrt(head_k); FFN (silu(f W_gate) * (f W_up)) W_down.
  `llama` with attention.sliding_window (Mistral) -- NOT llama.cpp, whose models/llama.cpp never reads
  the key and attends to every position: here every layer is local the HF Mistral way, the query at p
  seeing keys p' with p - p' < window (LLAMA_SWA_TYPE_STANDARD's rule). Compare llama.cpp only before it.
qwen3: as qwen2 without biases, plus QK-norm: q = rms_head(q)*attn_q_norm, k = rms_head(k)*attn_k_norm
  (over head_k, per head, before RoPE); head_k may differ from n_embd/n_head (attention.key_length).
phi3: fused attn_qkv.weight [(n_head + 2 n_head_kv) head_k, n_embd] split by rows into Q | K | V (that
  order); RoPE NEOX on n_rot (partial) dims with the long/short factors and attn_factor; Q *= 1/sqrt(head_k)
  (f32) after RoPE; fused ffn_up.weight [2 n_ff, n_embd] with LLM_FFN_SWIGLU: ggml_swiglu(x) =
  silu(x[:n_ff]) * x[n_ff:], the GATE is the FIRST half of the rows; attention.sliding_window is ignored
  (phi3.cpp sets n_swa 0: Phi SWA disabled), here too.
gemma2: x = embd[ids] * sqrtf(n_embd); per layer: q, k, v; NEOX RoPE (swa base = rope.freq_base_swa, default
  the global base); q *= f_attention_scale (1/sqrtf(head_k); 1/sqrtf(n_embd/n_head) for the 46-layer 27B);
  s = q k^T; s = cap_a * tanh(s / cap_a) (attn_logit_softcapping, default 50); causal softmax, local layers
  (load_swa_pattern(ml, 2): il % 2 < 1, i.e. even layers) also masking p_q - p_k >= sliding_window (default
  4096); o = attn W_o; x += rms(o)*post_attention_norm; f = (gelu_tanh(f W_gate) * (f W_up)) W_down;
  x += rms(f)*post_ffw_norm; logits = cap_f * tanh(logits / cap_f) (final_logit_softcapping, default 30;
  always applied). Tied output.
gemma3: as gemma2 without the attention soft-cap, plus QK-norm before RoPE; a window only when
  sliding_window > 0, pattern 6 (il % 6 < 5 local); local layers use base rope.freq_base_swa (default 1e4)
  and freq_scale 1; final soft-cap only when the key is present.
Norm weights of gemma files already hold the +1 (the converter adds it): plain x*w.

Memory: per-layer dequantization; the lm_head is applied in row chunks (token_embd of Gemma 3 is
671 MB as f32), all prompts at once, so the whole vocabulary is never held as float64.

CLI (writes the Gemma 3 reference used by the tests; run by scripts/setup.sh):
  gemma_reference.py --model M.gguf --prompts tests/fixtures/gemma/prompts.json --out DIR
writes DIR/reference.json and one DIR/<name>.f32 per prompt (see `write_reference`).
As a module: `Model(path, n_ctx=None).forward([ids, ...], logit_positions=[[...], ...])`.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import math
import os
import sys
import time

import numpy as np
from gguf import GGUFReader
from gguf.constants import GGMLQuantizationType
from gguf.quants import dequantize

LM_HEAD_CHUNK_ROWS = 8192


def sha256_file(path: str) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def _field_value(field):
    """Decode a GGUFReader field into a Python scalar, string or list."""
    from gguf.constants import GGUFValueType

    vtype = field.types[0]
    if vtype == GGUFValueType.ARRAY:
        etype = field.types[1] if len(field.types) > 1 else None
        if etype == GGUFValueType.STRING:
            return [bytes(field.parts[i]).decode("utf-8", "replace") for i in field.data]
        return [field.parts[i].tolist()[0] for i in field.data]
    if vtype == GGUFValueType.STRING:
        return bytes(field.parts[field.data[0]]).decode("utf-8")
    return field.parts[field.data[0]].tolist()[0]


def rms_norm(x: np.ndarray, w: np.ndarray | None, eps: float) -> np.ndarray:
    y = x / np.sqrt(np.mean(x * x, axis=-1, keepdims=True) + eps)
    return y * w if w is not None else y


def gelu_tanh(x: np.ndarray) -> np.ndarray:
    return 0.5 * x * (1.0 + np.tanh(math.sqrt(2.0 / math.pi) * (x + 0.044715 * x * x * x)))


def silu(x: np.ndarray) -> np.ndarray:
    return x / (1.0 + np.exp(-x))


def rope(x: np.ndarray, pos: np.ndarray, n_rot: int, base: float, neox: bool, freq_scale: float = 1.0,
         factors: np.ndarray | None = None, attn_factor: float = 1.0) -> np.ndarray:
    """ggml_rope_ext without YaRN (ext_factor 0; ggml-cpu ops.cpp rope_yarn / ggml_rope_cache_init).
    x: [T, heads, head_dim]; rotates the first n_rot dims, the rest pass through unchanged.

    Pair i (0 <= i < n_rot/2): theta_i = pos * freq_scale * base^(-2i/n_rot) / factors[i];
    cos and sin are both multiplied by attn_factor, so only the rotated dims are scaled.
    NORM (llama): pairs (2i, 2i+1); NEOX (the others): pairs (i, i + n_rot/2).
    """
    half = n_rot // 2
    inv = base ** (-np.arange(half, dtype=np.float64) * 2.0 / n_rot)
    if factors is not None:
        inv = inv / np.asarray(factors[:half], dtype=np.float64)
    ang = pos.astype(np.float64)[:, None] * inv[None, :]  # [T, half]
    if freq_scale != 1.0:
        ang = ang * freq_scale
    cos = np.cos(ang)[:, None, :]
    sin = np.sin(ang)[:, None, :]
    if attn_factor != 1.0:
        cos = cos * attn_factor
        sin = sin * attn_factor
    out = x.copy()
    if neox:
        x0 = x[..., :half]
        x1 = x[..., half:n_rot]
        out[..., :half] = x0 * cos - x1 * sin
        out[..., half:n_rot] = x0 * sin + x1 * cos
    else:
        x0 = x[..., 0:n_rot:2]
        x1 = x[..., 1:n_rot:2]
        out[..., 0:n_rot:2] = x0 * cos - x1 * sin
        out[..., 1:n_rot:2] = x0 * sin + x1 * cos
    return out


ARCHS = ("gemma2", "gemma3", "llama", "phi3", "qwen2", "qwen3")
F32 = np.float32


class Model:
    """A GGUF decoder read for the float64 reference forward pass.

    n_ctx: the context (KV cache) size the file is run with; only used where llama.cpp picks the RoPE
    factors by it (`rope_factors_long` when n_ctx > rope.scaling.original_context_length, else
    `rope_factors_short`). Default: the file's context_length, as llama.cpp with n_ctx 0.
    """

    def __init__(self, path: str, n_ctx: int | None = None):
        self.path = path
        self.reader = GGUFReader(path)
        self.meta = {f.name: _field_value(f) for f in self.reader.fields.values() if not f.name.startswith("tokenizer.ggml.")}
        self.tensors = {t.name: t for t in self.reader.tensors}
        arch = self.meta["general.architecture"]
        if arch not in ARCHS:
            raise ValueError(f"unsupported architecture {arch!r} ({', '.join(ARCHS)})")
        self.arch = arch

        def key(name, default=None):
            full = f"{arch}.{name}"
            if full in self.meta:
                return self.meta[full]
            if default is None:
                raise ValueError(f"missing metadata key {full}")
            return default

        self.n_embd = int(key("embedding_length"))
        self.n_layer = int(key("block_count"))
        self.n_head = int(key("attention.head_count"))
        self.n_head_kv = int(key("attention.head_count_kv", self.n_head))
        self.head_k = int(key("attention.key_length", self.n_embd // self.n_head))
        self.head_v = int(key("attention.value_length", self.n_embd // self.n_head))
        self.n_rot = int(key("rope.dimension_count", self.head_k))
        self.eps = float(key("attention.layer_norm_rms_epsilon"))
        self.rope_base = float(key("rope.freq_base", 10000.0))
        self.n_ctx_train = int(key("context_length", 0))
        self.n_ctx = int(n_ctx) if n_ctx else self.n_ctx_train

        # RoPE scaling (llama-model.cpp load_hparams, llama-context.cpp): the type defaults to "linear";
        # freq_scale = 1/rope.scaling.factor (f32) when the factor is present and non-zero, else 1;
        # "none" forces 1; YaRN is not implemented here. attn_factor = rope.scaling.attn_factor (the
        # context's yarn_attn_factor 1.0 times it) scales cos and sin.
        self.rope_scaling = str(key("rope.scaling.type", "linear"))
        if self.rope_scaling not in ("none", "linear", "longrope"):
            raise ValueError(f"{arch}.rope.scaling.type = {self.rope_scaling!r} is not supported by this reference")
        factor = float(key("rope.scaling.factor", 0.0))
        self.freq_scale = 1.0 if factor == 0.0 or self.rope_scaling == "none" else float(F32(1.0) / F32(factor))
        self.attn_factor = float(F32(key("rope.scaling.attn_factor", 1.0)))
        self.n_ctx_orig = int(key("rope.scaling.original_context_length", self.n_ctx_train))
        # per-pair RoPE divisors (llama_model::get_rope_factors): `rope_freqs` (llama3) wins, else
        # long / short by the context size. `llama` loads long/short only for a longrope file, `phi3`
        # always; the other builders pass none.
        self.rope_factors = None
        self.rope_factors_name = None
        if arch in ("llama", "phi3"):
            if arch == "llama" and self.has("rope_freqs.weight"):
                self.rope_factors_name = "rope_freqs.weight"
            elif arch == "phi3" or self.rope_scaling == "longrope":
                name = "rope_factors_long.weight" if self.n_ctx > self.n_ctx_orig else "rope_factors_short.weight"
                if self.has(name):
                    self.rope_factors_name = name
        if self.rope_factors_name:
            self.rope_factors = self.weight(self.rope_factors_name)

        # sliding windows: which layers are local and how far they see
        self.n_swa = 0
        self.swa_layers = [False] * self.n_layer
        self.rope_base_swa = self.rope_base
        self.freq_scale_swa = self.freq_scale
        self.softcap = 0.0
        self.attn_softcap = 0.0
        if arch in ("gemma2", "gemma3"):
            if arch == "gemma2":  # models/gemma2.cpp: window 4096 unless the key says, pattern 2
                self.n_swa = int(key("attention.sliding_window", 4096))
                default_pattern = 2
                self.rope_base_swa = float(key("rope.freq_base_swa", self.rope_base))
                self.attn_softcap = float(key("attn_logit_softcapping", 50.0))
                self.softcap = float(key("final_logit_softcapping", 30.0))
            else:  # models/gemma3.cpp: a window only when the key is > 0, pattern 6, swa base 1e4, swa scale 1
                self.n_swa = int(key("attention.sliding_window", 0))
                default_pattern = 6
                self.rope_base_swa = float(key("rope.freq_base_swa", 10000.0))
                self.freq_scale_swa = 1.0
                self.softcap = float(key("final_logit_softcapping", 0.0))
            pattern = self.meta.get(f"{arch}.attention.sliding_window_pattern", default_pattern)
            if self.n_swa > 0:
                if isinstance(pattern, list):  # per-layer bools (load_swa_pattern)
                    self.swa_layers = [bool(v) for v in pattern[: self.n_layer]]
                else:  # llama_hparams::set_swa_pattern: il % n < n - 1 is local
                    n = int(pattern)
                    self.swa_layers = [n == 0 or il % n < n - 1 for il in range(self.n_layer)]
            # gemma2.cpp / gemma3.cpp f_attention_scale: the 27B types use n_embd/n_head
            is_27b = (arch == "gemma2" and self.n_layer == 46) or (arch == "gemma3" and self.n_layer == 62)
            self.q_scale = float(F32(1.0) / np.sqrt(F32(self.n_embd // self.n_head if is_27b else self.head_k)))
        elif arch == "llama" and f"{arch}.attention.sliding_window" in self.meta:
            # NOT llama.cpp: models/llama.cpp never reads attention.sliding_window (it attends to all
            # positions). Here the window is applied the HF Mistral way on every layer: the query at p
            # sees keys p' with p - p' < window (LLAMA_SWA_TYPE_STANDARD's rule).
            self.n_swa = int(key("attention.sliding_window"))
            self.swa_layers = [self.n_swa > 0] * self.n_layer
        # phi3: phi3.cpp sets n_swa = 0 (Phi SWA disabled), so its window key is ignored here too.
        self.neox = arch != "llama"
        self.qk_norm = arch in ("gemma3", "qwen3")
        self.post_norms = arch in ("gemma2", "gemma3")
        self.embd_scale = arch in ("gemma2", "gemma3")
        self.geglu = arch in ("gemma2", "gemma3")
        self.kq_scale = 1.0 / math.sqrt(self.head_k)
        embd = self.tensors["token_embd.weight"]
        self.n_vocab = int(embd.shape[1])
        self.out_name = "output.weight" if "output.weight" in self.tensors else "token_embd.weight"

    # --- weights ---
    def has(self, name: str) -> bool:
        return name in self.tensors

    def weight(self, name: str) -> np.ndarray:
        """Dequantized tensor as float64, numpy shape = reversed ggml ne ([out, in] for a matrix)."""
        t = self.tensors[name]
        return dequantize(t.data, GGMLQuantizationType(t.tensor_type)).astype(np.float64)

    def rows(self, name: str, ids) -> np.ndarray:
        """Rows `ids` of a 2-D tensor, dequantized (only those rows) as float64."""
        t = self.tensors[name]
        data = t.data
        ids = np.asarray(ids, dtype=np.int64)
        if ids.size and (ids.min() < 0 or ids.max() >= data.shape[0]):
            raise ValueError(f"token id out of range 0..{data.shape[0] - 1}")
        return dequantize(np.ascontiguousarray(data[ids]), GGMLQuantizationType(t.tensor_type)).astype(np.float64).reshape(len(ids), -1)

    def row_chunks(self, name: str, chunk: int):
        t = self.tensors[name]
        data = t.data
        for r0 in range(0, data.shape[0], chunk):
            r1 = min(r0 + chunk, data.shape[0])
            w = dequantize(np.ascontiguousarray(data[r0:r1]), GGMLQuantizationType(t.tensor_type))
            yield r0, w.reshape(r1 - r0, -1).astype(np.float64)

    def linear(self, x: np.ndarray, name: str, w: np.ndarray | None = None) -> np.ndarray:
        w = self.weight(name + ".weight") if w is None else w
        y = x @ w.T
        if self.has(name + ".bias"):
            y = y + self.weight(name + ".bias")
        return y

    # --- the graph ---
    def is_swa(self, il: int) -> bool:
        return self.n_swa > 0 and self.swa_layers[il]

    def _attention(self, q, k, v, il):
        """q [T, H, D], k/v [T, Hkv, D] -> [T, H*Dv]; causal (+ sliding window) softmax in f64.
        q arrives already scaled for gemma2 / gemma3 / phi3 (they scale Q, kq_scale 1); the others
        scale the scores by 1/sqrt(head_k). gemma2 then soft-caps: s = cap * tanh(s / cap)."""
        T = q.shape[0]
        group = self.n_head // self.n_head_kv
        p = np.arange(T)
        masked = p[None, :] > p[:, None]
        if self.is_swa(il):
            masked |= (p[:, None] - p[None, :]) >= self.n_swa
        out = np.empty((T, self.n_head, v.shape[2]), dtype=np.float64)
        pre_scaled = self.arch in ("gemma2", "gemma3", "phi3")
        for h in range(self.n_head):
            kh = k[:, h // group, :]
            s = (q[:, h, :] @ kh.T) * (1.0 if pre_scaled else self.kq_scale)
            if self.attn_softcap:
                s = np.tanh(s / self.attn_softcap) * self.attn_softcap
            s = np.where(masked, -np.inf, s)
            s = s - s.max(axis=1, keepdims=True)
            e = np.exp(s)
            a = e / e.sum(axis=1, keepdims=True)
            out[:, h, :] = a @ v[:, h // group, :]
        return out.reshape(T, -1)

    def _qkv(self, b: str, W: dict, h: np.ndarray):
        T = h.shape[0]
        nq, nk = self.n_head * self.head_k, self.n_head_kv * self.head_k
        if "attn_qkv" in W:  # fused (phi3): rows [Q | K | V] (build_qkv's views at 0, n_q, n_q + n_k)
            qkv = self.linear(h, b + "attn_qkv", W["attn_qkv"])
            q, k, v = qkv[:, :nq], qkv[:, nq : nq + nk], qkv[:, nq + nk :]
        else:
            q = self.linear(h, b + "attn_q", W["attn_q"])
            k = self.linear(h, b + "attn_k", W["attn_k"])
            v = self.linear(h, b + "attn_v", W["attn_v"])
        return (q.reshape(T, self.n_head, self.head_k), k.reshape(T, self.n_head_kv, self.head_k),
                v.reshape(T, self.n_head_kv, self.head_v))

    def _ffn(self, b: str, W: dict, f: np.ndarray) -> np.ndarray:
        if "ffn_gate" in W:
            g = self.linear(f, b + "ffn_gate", W["ffn_gate"])
            u = self.linear(f, b + "ffn_up", W["ffn_up"])
        else:  # fused (phi3, LLM_FFN_SWIGLU on one tensor): ggml_swiglu = silu(first half) * second half
            gu = self.linear(f, b + "ffn_up", W["ffn_up"])
            n_ff = gu.shape[1] // 2
            g, u = gu[:, :n_ff], gu[:, n_ff:]
        return self.linear((gelu_tanh(g) if self.geglu else silu(g)) * u, b + "ffn_down", W["ffn_down"])

    def hidden(self, prompts: list[list[int]]) -> list[np.ndarray]:
        """Final normed hidden states [T, n_embd] per prompt (before the lm_head)."""
        xs = []
        for ids in prompts:
            x = self.rows("token_embd.weight", ids)
            if self.embd_scale:
                x = x * float(np.float32(math.sqrt(self.n_embd)))  # ggml_scale by sqrtf(n_embd) (f32 scalar)
            xs.append(x)
        mats = ("attn_q", "attn_k", "attn_v", "attn_qkv", "attn_output", "ffn_gate", "ffn_up", "ffn_down")
        for il in range(self.n_layer):
            b = f"blk.{il}."
            W = {n: self.weight(b + n + ".weight") for n in mats if self.has(b + n + ".weight")}
            norms = {n: self.weight(b + n + ".weight") for n in ("attn_norm", "ffn_norm", "attn_q_norm", "attn_k_norm", "post_attention_norm", "post_ffw_norm") if self.has(b + n + ".weight")}
            swa = self.is_swa(il)
            base = self.rope_base_swa if swa else self.rope_base
            scale = self.freq_scale_swa if swa else self.freq_scale
            for i, x in enumerate(xs):
                T = x.shape[0]
                pos = np.arange(T)
                h = rms_norm(x, norms["attn_norm"], self.eps)
                q, k, v = self._qkv(b, W, h)
                if self.qk_norm:  # per head, over head_k, before RoPE
                    q = rms_norm(q, norms["attn_q_norm"], self.eps)
                    k = rms_norm(k, norms["attn_k_norm"], self.eps)
                q = rope(q, pos, self.n_rot, base, self.neox, scale, self.rope_factors, self.attn_factor)
                k = rope(k, pos, self.n_rot, base, self.neox, scale, self.rope_factors, self.attn_factor)
                if self.arch in ("gemma2", "gemma3"):
                    q = q * self.q_scale
                elif self.arch == "phi3":
                    q = q * float(F32(1.0) / np.sqrt(F32(self.head_k)))
                a = self.linear(self._attention(q, k, v, il), b + "attn_output", W["attn_output"])
                if self.post_norms:
                    a = rms_norm(a, norms["post_attention_norm"], self.eps)
                x = x + a
                f = self._ffn(b, W, rms_norm(x, norms["ffn_norm"], self.eps))
                if self.post_norms:
                    f = rms_norm(f, norms["post_ffw_norm"], self.eps)
                xs[i] = x + f
        out_norm = self.weight("output_norm.weight")
        return [rms_norm(x, out_norm, self.eps) for x in xs]

    def forward(self, prompts: list[list[int]], logit_positions: list[list[int]] | None = None):
        """Per prompt: (top1 [T] int, margin [T] f64 = top1 - top2 logit, logits [len(positions), V] f64).

        `logit_positions[i]` lists the positions of prompt i whose full logits are returned
        (None: all positions). Ties in top-1 go to the lowest id (numpy argmax order).
        """
        hs = self.hidden(prompts)
        if logit_positions is None:
            logit_positions = [list(range(len(p))) for p in prompts]
        H = np.concatenate(hs, axis=0)
        offsets = np.cumsum([0] + [h.shape[0] for h in hs])
        N = H.shape[0]
        best_v = np.full(N, -np.inf)
        best_i = np.zeros(N, dtype=np.int64)
        second_v = np.full(N, -np.inf)
        full = [np.empty((len(lp), self.n_vocab), dtype=np.float64) for lp in logit_positions]
        out_bias = self.weight("output.bias") if self.has("output.bias") else None
        for r0, w in self.row_chunks(self.out_name, LM_HEAD_CHUNK_ROWS):
            z = H @ w.T  # [N, rows]
            if out_bias is not None:
                z = z + out_bias[r0 : r0 + w.shape[0]]
            if self.softcap:
                z = np.tanh(z / self.softcap) * self.softcap
            for i, lp in enumerate(logit_positions):
                if lp:
                    full[i][:, r0 : r0 + w.shape[0]] = z[offsets[i] + np.asarray(lp)]
            # merge chunk top-2 into the running top-2 (ties: lowest id wins, chunks come in id order)
            c1 = np.argmax(z, axis=1)
            c1v = z[np.arange(N), c1]
            zz = z.copy()
            zz[np.arange(N), c1] = -np.inf
            c2v = zz.max(axis=1) if z.shape[1] >= 2 else np.full(N, -np.inf)
            del zz
            new_best = c1v > best_v
            second_v = np.where(new_best, np.maximum(best_v, c2v), np.maximum(second_v, c1v))
            best_i = np.where(new_best, r0 + c1, best_i)
            best_v = np.where(new_best, c1v, best_v)
        res = []
        for i in range(len(prompts)):
            s = slice(offsets[i], offsets[i + 1])
            res.append((best_i[s], best_v[s] - second_v[s], full[i]))
        return res


def default_logit_positions(T: int) -> list[int]:
    """First, last, 512 and 513 (the first positions whose 512-token sliding window no longer reaches
    position 0; when present), and three more spread over the prompt."""
    ps = {0, T - 1, T // 4, T // 2, (3 * T) // 4}
    if T > 513:
        ps.update((512, 513))
    return sorted(p for p in ps if 0 <= p < T)


def write_reference(model_path: str, prompts_path: str, out_dir: str) -> dict:
    """Writes out_dir/reference.json and out_dir/<name>.f32.

    reference.json: {"model_sha256", "script_sha256", "prompts_sha256", "seconds",
      "prompts": [{"name", "ids", "top1": [T ints], "margin": [T floats, top1 - top2 logit],
                   "logit_positions": [sorted ints], "logits_file": "<name>.f32"}]}
    <name>.f32: the full logits at logit_positions, rows in position order, n_vocab little-endian f32 each
    (computed in f64, rounded to f32 once).
    """
    with open(prompts_path) as f:
        prompts = json.load(f)["prompts"]
    t0 = time.time()
    model = Model(model_path)
    ids = [p["ids"] for p in prompts]
    lps = [default_logit_positions(len(x)) for x in ids]
    results = model.forward(ids, lps)
    secs = time.time() - t0
    os.makedirs(out_dir, exist_ok=True)
    entries = []
    for p, x, lp, (top1, margin, logits) in zip(prompts, ids, lps, results):
        fname = p["name"] + ".f32"
        logits.astype("<f4").tofile(os.path.join(out_dir, fname))
        entries.append({"name": p["name"], "ids": x, "top1": [int(v) for v in top1], "margin": [round(float(v), 6) for v in margin],
                        "logit_positions": lp, "logits_file": fname})
    doc = {"model_sha256": sha256_file(model_path), "script_sha256": sha256_file(os.path.abspath(__file__)),
           "prompts_sha256": sha256_file(prompts_path), "n_vocab": model.n_vocab, "seconds": round(secs, 1),
           "prompts": entries}
    tmp = os.path.join(out_dir, "reference.json.tmp")
    with open(tmp, "w") as f:
        json.dump(doc, f)
    os.replace(tmp, os.path.join(out_dir, "reference.json"))
    return doc


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--model", required=True)
    ap.add_argument("--prompts", required=True, help="prompts.json with [{name, ids}]")
    ap.add_argument("--out", required=True)
    a = ap.parse_args(argv)
    doc = write_reference(a.model, a.prompts, a.out)
    n = sum(len(p["ids"]) for p in doc["prompts"])
    print(f"reference: {len(doc['prompts'])} prompts, {n} positions, {doc['seconds']} s -> {a.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
