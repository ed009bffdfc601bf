"""A sentence-transformers embedding model (BERT-family encoder + mean pooling + L2
normalisation) as one exportable module, so the exported graph returns the sentence
embedding itself, exactly sentence-transformers' pipeline for models like
``all-MiniLM-L6-v2``.

The module holds the encoder's ``embeddings`` and ``encoder`` submodules under their own
names, so parameter FQNs (the named-data keys) are the checkpoint's own
(``embeddings.word_embeddings.weight``, ``encoder.layer.0.attention.self.query.weight``, ...)
and a ``.ptd`` can be rebuilt from ``model.safetensors`` without torch.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

#: ``(mask - 1) * F32_MAX``: 0 where attended, the most negative f32 where masked (what
#: Hugging Face's extended attention mask holds: ``(1 - mask) * finfo.min``).
F32_MAX = float(torch.finfo(torch.float32).max)


class SentenceEmbedder(torch.nn.Module):
    """``(input_ids [B, S] i64, attention_mask [B, S] i64) -> embedding [B, H]``.

    Build it from a Hugging Face BERT-family model loaded with
    ``attn_implementation="eager"`` (matmul + softmax attention, which the program expresses;
    the SDPA path traces into mask-building index ops)."""

    def __init__(self, bert: torch.nn.Module, normalize: bool = True):
        super().__init__()
        if getattr(bert.config, "_attn_implementation", "eager") != "eager":
            raise ValueError("load the model with attn_implementation='eager'")
        self.embeddings = bert.embeddings
        self.encoder = bert.encoder
        self.normalize = normalize

    def forward(self, input_ids: torch.Tensor, attention_mask: torch.Tensor) -> torch.Tensor:
        """The sentence embeddings (mean of the unmasked token states, L2-normalised)."""
        mask = attention_mask.to(torch.float32)
        extended = ((mask - 1.0) * F32_MAX)[:, None, None, :]
        hidden = self.embeddings(input_ids=input_ids)
        hidden = self.encoder(hidden, attention_mask=extended)[0]
        # sentence-transformers' Pooling (mean tokens), verbatim.
        expanded = attention_mask.unsqueeze(-1).expand(hidden.size()).to(hidden.dtype)
        summed = torch.sum(hidden * expanded, 1)
        counts = torch.clamp(expanded.sum(1), min=1e-9)
        pooled = summed / counts
        # sentence-transformers' Normalize.
        return F.normalize(pooled, p=2, dim=1) if self.normalize else pooled
