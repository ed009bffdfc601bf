"""Gemma 3 (text) from Hugging Face ``transformers`` as one exportable decoder whose KV cache
is the delegate's state.

:class:`Gemma3ForWebDelegate` wraps a loaded ``Gemma3ForCausalLM`` the way ExecuTorch's own
Llama export swaps ``sdpa_with_kv_cache`` into its attention: it keeps every Hugging Face
submodule (and so every parameter's fully-qualified name: ``model.layers.0.self_attn.q_proj.
weight``...) and replaces only

- each layer's ``self_attn`` by :class:`CachedGemma3Attention` (same projections and QK-norms,
  ``webdelegate::rope`` with the layer type's RoPE base, ``webdelegate::attention_with_cache``
  with ``query_pre_attn_scalar ** -0.5``, the sliding window on sliding layers, and a static
  ``[max_context, kv_heads, head_dim]`` key and value cache registered as buffers
  ``model.layers.<i>.self_attn.k_cache`` / ``v_cache``);
- each ``Gemma3RMSNorm`` by :class:`OnePlusRMSNorm`, the same math through ``F.rms_norm``
  with weight ``1 + w`` (so the exported graph keeps ``aten.rms_norm`` whole and the program
  computes ``1 + w`` with a ``Scale`` op: the ``.ptd`` holds ``w`` exactly as ``transformers``
  does).

Everything else is Hugging Face's own code: ``Gemma3DecoderLayer.forward`` (pre/post norms
around attention and the tanh-GELU GeGLU MLP), the scaled word embedding (``* sqrt(hidden)``,
its ``embed_scale`` buffer), the final norm and the tied LM head.

The module is batch-free, like the program's ops: ``forward(tokens i64 [S], input_pos i64
[S]) -> logits f32 [1, vocab]``, the logits of the LAST row only (``h[-1:]``; prefill and
decode are one method with ``S`` dynamic). Only the last row is needed to pick the next
token, and Gemma's vocabulary makes a row 1 MiB: full ``[S, vocab]`` logits would cost ``S``
MiB of output and ``S`` times the LM head's 168M multiply-adds in a prefill.
"""

from __future__ import annotations

from typing import Any, Optional

import torch
import torch.nn.functional as F

from . import custom_ops

#: The default static cache: 1024 positions, 2 KiB per position per layer (keys and values,
#: one KV head of 256 f32), so 36 MiB of state for Gemma 3 270M's 18 layers. It exceeds the
#: 512-position sliding window, so the window is exercised.
DEFAULT_MAX_CONTEXT = 1024


def _config_value(config: Any, name: str, default: Any = None) -> Any:
    value = getattr(config, name, default)
    return default if value is None else value


def rope_base(config: Any, layer_type: str) -> float:
    """The RoPE base of ``layer_type`` (``"sliding_attention"`` / ``"full_attention"``) in a
    ``Gemma3TextConfig``, from ``rope_parameters`` (transformers 5) or the older
    ``rope_theta`` / ``rope_local_base_freq``; only the default (unscaled) RoPE is
    supported."""
    params = getattr(config, "rope_parameters", None)
    if isinstance(params, dict) and layer_type in params and params[layer_type]:
        entry = params[layer_type]
        kind = entry.get("rope_type", "default")
        if kind != "default":
            raise NotImplementedError(
                f"RoPE type {kind!r} for {layer_type} layers (only the default RoPE is "
                "lowered; the program's Rope has no frequency scaling)")
        return float(entry["rope_theta"])
    if layer_type == "sliding_attention":
        return float(_config_value(config, "rope_local_base_freq", 10000.0))
    return float(_config_value(config, "rope_theta", 10000.0))


class OnePlusRMSNorm(torch.nn.Module):
    """Gemma's RMSNorm, ``x / sqrt(mean(x^2) + eps) * (1 + w)``, through ``F.rms_norm`` (one
    ``aten.rms_norm``, lowered to the program's ``RmsNorm`` whose weight is ``Scale(w, 1,
    1)``). Takes over the original module's ``weight`` parameter, so its name is kept."""

    def __init__(self, norm: torch.nn.Module):
        super().__init__()
        self.weight = norm.weight
        self.eps = float(norm.eps)

    def forward(self, x: torch.Tensor) -> torch.Tensor:  # noqa: D102
        if x.dtype != torch.float32:
            raise TypeError(f"OnePlusRMSNorm runs in f32, got {x.dtype}")
        return F.rms_norm(x, (x.shape[-1],), 1.0 + self.weight, self.eps)


class CachedGemma3Attention(torch.nn.Module):
    """A ``Gemma3Attention`` over a static KV cache, batch-free: ``hidden [S, hidden]`` at
    ``position_ids`` i64 ``[S]`` -> ``(out [S, hidden], None)``.

    Takes over the original's ``q_proj``/``k_proj``/``v_proj``/``o_proj`` and ``q_norm``/
    ``k_norm`` (names kept) and adds the buffers ``k_cache``/``v_cache`` ``[max_context,
    kv_heads, head_dim]`` (zeros), written through ``webdelegate::attention_with_cache``'s
    returned caches (``copy_``), which the partitioner turns into program states."""

    def __init__(self, attention: torch.nn.Module, config: Any, max_context: int):
        super().__init__()
        if getattr(attention, "attn_logit_softcapping", None):
            self.softcap = float(attention.attn_logit_softcapping)
        else:
            self.softcap = 0.0
        if getattr(config, "use_bidirectional_attention", False):
            raise NotImplementedError("bidirectional Gemma 3 attention is not causal: the "
                                      "program's Attention is")
        for name in ("q_proj", "k_proj", "v_proj", "o_proj", "q_norm", "k_norm"):
            setattr(self, name, getattr(attention, name))
        self.layer_idx = attention.layer_idx
        self.head_dim = int(attention.head_dim)
        self.heads = int(config.num_attention_heads)
        self.kv_heads = int(config.num_key_value_heads)
        self.scale = float(attention.scaling)
        self.window = int(attention.sliding_window or 0)
        layer_type = getattr(attention, "layer_type", None) or (
            "sliding_attention" if self.window else "full_attention")
        self.layer_type = layer_type
        self.rope_base = rope_base(config, layer_type)
        self.register_buffer("k_cache", torch.zeros(max_context, self.kv_heads, self.head_dim))
        self.register_buffer("v_cache", torch.zeros(max_context, self.kv_heads, self.head_dim))

    def forward(self, hidden_states: torch.Tensor, position_embeddings: Any = None,
                attention_mask: Any = None, position_ids: Optional[torch.Tensor] = None,
                **_: Any):
        """Projections, QK-norm, RoPE, then attention over the cache (which it updates)."""
        if position_ids is None:
            raise ValueError("CachedGemma3Attention needs position_ids i64 [S]")
        s = hidden_states.shape[0]
        d = self.head_dim
        q = self.q_norm(self.q_proj(hidden_states).view(s, self.heads, d))
        k = self.k_norm(self.k_proj(hidden_states).view(s, self.kv_heads, d))
        v = self.v_proj(hidden_states).view(s, self.kv_heads, d)
        q = custom_ops.rope(q, position_ids, d, self.rope_base, True)
        k = custom_ops.rope(k, position_ids, d, self.rope_base, True)
        out, k_cache, v_cache = custom_ops.attention_with_cache(
            q, k, v, self.k_cache, self.v_cache, position_ids, self.scale, self.window,
            self.softcap)
        self.k_cache.copy_(k_cache)
        self.v_cache.copy_(v_cache)
        return self.o_proj(out.reshape(s, self.heads * d)), None


class Gemma3ForWebDelegate(torch.nn.Module):
    """``(tokens i64 [S], input_pos i64 [S]) -> logits f32 [1, vocab]`` (the last row's).

    Built from a ``Gemma3ForCausalLM`` loaded in f32 (e.g. ``AutoModelForCausalLM.
    from_pretrained(dir, gguf_file=..., dtype=torch.float32)``); the Hugging Face model is
    modified in place (its attention and norm modules are replaced), so keep a separate copy
    as the eager oracle. ``max_context`` is the static cache length: positions must lie in
    ``0..max_context``.
    """

    def __init__(self, causal_lm: torch.nn.Module, max_context: int = DEFAULT_MAX_CONTEXT):
        super().__init__()
        config = causal_lm.config
        if getattr(config, "model_type", "") not in ("gemma3_text", "gemma3"):
            raise ValueError(f"not a Gemma 3 text model: model_type "
                             f"{getattr(config, 'model_type', None)!r}")
        if getattr(config, "final_logit_softcapping", None):
            raise NotImplementedError("final logit soft-capping is not lowered (Gemma 3 has "
                                      "none)")
        if any(p.dtype != torch.float32 for p in causal_lm.parameters()):
            raise TypeError("load the model in f32 (dtype=torch.float32)")
        if max_context < 1:
            raise ValueError(f"max_context must be positive, got {max_context}")
        self.config = config
        self.max_context = int(max_context)
        self.model = causal_lm.model
        lm_head = causal_lm.get_output_embeddings().weight
        if lm_head is not self.model.embed_tokens.weight:
            raise NotImplementedError("an untied LM head (Gemma 3 ties it to the token "
                                      "embedding)")
        for layer in self.model.layers:
            layer.self_attn = CachedGemma3Attention(layer.self_attn, config, max_context)
        _replace_norms(self)

    def forward(self, tokens: torch.Tensor, input_pos: torch.Tensor) -> torch.Tensor:
        """Runs ``tokens`` at ``input_pos`` (prefill: ``0..S``; decode: one token at the next
        position), storing their keys and values; returns the last row's logits."""
        h = self.model.embed_tokens(tokens)
        for layer in self.model.layers:
            h = layer(h, position_ids=input_pos)
        h = self.model.norm(h)
        # The tied LM head, read through the embedding's own name (one named-data key).
        return F.linear(h[-1:], self.model.embed_tokens.weight)

    def reset_cache(self) -> None:
        """Zeros every layer's cache (a fresh session; not needed for correctness: positions
        past the current one are never read)."""
        with torch.no_grad():
            for layer in self.model.layers:
                layer.self_attn.k_cache.zero_()
                layer.self_attn.v_cache.zero_()


def _replace_norms(module: torch.nn.Module) -> None:
    for name, child in list(module.named_children()):
        if type(child).__name__ == "Gemma3RMSNorm":
            setattr(module, name, OnePlusRMSNorm(child))
        else:
            _replace_norms(child)

