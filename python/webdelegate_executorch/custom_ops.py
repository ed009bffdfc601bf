"""Custom ops for decoders with a KV cache, in the program's own terms:

- ``webdelegate::rope(x, positions, dims, base, neox)``: rotary embedding of ``x`` ``[.., S,
  H, D]`` at ``positions`` ``[S]`` (the program's ``Rope``);
- ``webdelegate::attention_with_cache(q, k, v, k_cache, v_cache, positions, scale, window,
  softcap) -> (out, k_cache', v_cache')``: stores this step's keys and values at their
  positions and attends causally over the cache (the program's ``Attention``, ExecuTorch's
  ``sdpa_with_kv_cache``). Functional: the module writes the returned caches back into its
  buffers (``self.k_cache.copy_(k_cache')``), which ``torch.export`` turns into buffer
  mutations; tagged into the delegate, those buffers become program states.

Each has a CompositeImplicitAutograd implementation in plain ATen ops (``index_put``,
``matmul``, ``softmax``, ``cos``/``sin``...), so eager PyTorch runs them and an export WITHOUT
our partitioner decomposes them into ops ExecuTorch's portable kernels run (the oracle);
``WebDelegatePartitioner`` keeps them whole (``ops_to_not_decompose``) and lowers each to one
program op. Layouts are batch-free, as the program's: ``q`` ``[S, Hq, D]``, ``k``/``v``
``[S, Hkv, D]``, caches ``[C, Hkv, D]``, positions i64 ``[S]``.
"""

from __future__ import annotations

import torch

LIBRARY = torch.library.Library("webdelegate", "DEF")
LIBRARY.define("rope(Tensor x, Tensor positions, int dims, float base, bool neox) -> Tensor")
LIBRARY.define(
    "attention_with_cache(Tensor q, Tensor k, Tensor v, Tensor k_cache, Tensor v_cache, "
    "Tensor positions, float scale, int window=0, float softcap=0.0) -> "
    "(Tensor, Tensor, Tensor)")


def _rope(x: torch.Tensor, positions: torch.Tensor, dims: int, base: float,
          neox: bool) -> torch.Tensor:
    """Reference rotary embedding (f32): pairs ``(i, i + dims/2)`` (neox) or ``(2i, 2i+1)``."""
    half = dims // 2
    inv_freq = (1.0 / (base ** (torch.arange(0, half, dtype=torch.float64) * 2.0 / dims))
                ).to(torch.float32)
    theta = positions.to(torch.float32)[:, None] * inv_freq[None, :]  # [S, half]
    cos = torch.cos(theta)[:, None, :]  # [S, 1, half], broadcast over heads
    sin = torch.sin(theta)[:, None, :]
    rot, rest = x[..., :dims], x[..., dims:]
    if neox:
        a, b = rot[..., :half], rot[..., half:]
        out = torch.cat([a * cos - b * sin, a * sin + b * cos], dim=-1)
    else:
        pairs = rot.reshape(*rot.shape[:-1], half, 2)
        a, b = pairs[..., 0], pairs[..., 1]
        out = torch.stack([a * cos - b * sin, a * sin + b * cos], dim=-1).reshape(rot.shape)
    return torch.cat([out, rest], dim=-1)


def _attention_with_cache(q, k, v, k_cache, v_cache, positions, scale: float,
                          window: int = 0, softcap: float = 0.0):
    """Reference: store rows at ``positions``, then causal (optionally sliding-window,
    soft-capped) attention of each query over cache positions ``lo..=p``."""
    k_cache = k_cache.index_put((positions,), k)
    v_cache = v_cache.index_put((positions,), v)
    c, hkv, d = k_cache.shape
    s, hq, _ = q.shape
    group = hq // hkv
    keys = k_cache[:, :, None, :].expand(c, hkv, group, d).reshape(c, hq, d)
    values = v_cache[:, :, None, :].expand(c, hkv, group, v_cache.shape[-1]) \
        .reshape(c, hq, v_cache.shape[-1])
    logits = torch.matmul(q.transpose(0, 1), keys.permute(1, 2, 0)) * scale  # [Hq, S, C]
    if softcap > 0.0:
        logits = torch.tanh(logits / softcap) * softcap
    j = torch.arange(c)[None, :]
    p = positions[:, None]
    allowed = j <= p
    if window > 0:
        allowed = allowed & (j > p - window)
    logits = torch.where(allowed[None, :, :], logits,
                         torch.full_like(logits, float("-inf")))
    weights = torch.softmax(logits, dim=-1)
    out = torch.matmul(weights, values.transpose(0, 1)).transpose(0, 1)  # [S, Hq, Dv]
    return out.contiguous(), k_cache, v_cache


LIBRARY.impl("rope", _rope, "CompositeImplicitAutograd")
LIBRARY.impl("attention_with_cache", _attention_with_cache, "CompositeImplicitAutograd")

rope = torch.ops.webdelegate.rope.default
attention_with_cache = torch.ops.webdelegate.attention_with_cache.default
