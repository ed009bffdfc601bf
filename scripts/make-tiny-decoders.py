#!/usr/bin/env python3
"""Tiny random-weight GGUF decoders, one per architecture variant (issue 13), and their oracles.

  # 1. the GGUF files (needs only `gguf` + numpy: .cache/venv-ref or .cache/venv-llama)
  python scripts/make-tiny-decoders.py --gguf-only
  # 2. the files and the llama.cpp + float64 reference fixtures (.cache/venv-llama, scripts/setup-llamacpp.sh)
  .cache/venv-llama/bin/python scripts/make-tiny-decoders.py
  # 3. also check the reference graph against llama.cpp free of quantization (all-F32 copies, F32 KV cache)
  .cache/venv-llama/bin/python scripts/make-tiny-decoders.py --validate-f32 /tmp/tiny-f32

Writes tests/fixtures/decoders/tiny-<variant>.gguf for the variants of VARIANTS (deterministic: fixed
seeds, so a rerun gives the same bytes) and, with llama.cpp, tiny-<variant>.llamacpp.json:
  {"source", "variant", "arch", "gguf_sha256", "settings": {..., "n_ctx": 64}, "n_vocab",
   "window" (0 if none), "llamacpp_ignores_window" (true: llama.cpp attends past the file's window,
   the reference does not; compare llama.cpp only at positions < window),
   "sequences": [{"ids", "llamacpp_logits": [[n_vocab f32] per position], "reference_logits": [[...]],
                  "max_abs_diff", "max_abs_diff_before_window", "max_abs_logit", "top1_agree", "min_top1_margin"}],
   "tokenize": [{"text", "add_bos", "parse_special", "ids"}]}
llamacpp_logits are llama.cpp's (CPU, all positions, logits_all); reference_logits are the float64 NumPy
forward pass of scripts/gemma_reference.py on the same file (rounded to f32), run with n_ctx 64.

Shapes: hidden 64, 4 heads, FFN 256 (so ffn_down can be Q4_K / Q6_K, whose rows need multiples of 256),
2 layers unless stated, F32 norms, weights mixing F32 / F16 / Q8_0 / Q5_0 / Q4_K / Q6_K.
  llama    Llama 2 style: SentencePiece (scores from a small BPE run, byte fallback, add_space_prefix, one
           user-defined `<b>`), 2 KV heads, untied Q8_0 output, NORM RoPE base 1e4.
  llama3   `llama`, GPT-2 byte-level BPE with pre "llama-bpe", RoPE base 5e5, GQA, untied output,
           `rope_freqs.weight` [8] (llama3 factors as conversion/llama.py computes them).
  smollm   `llama`, BPE pre "smollm", tied embeddings, Q6_K and Q4_K.
  mistral  `llama` with attention.sliding_window 8 (ignored by llama.cpp, applied by the reference) and
           linear RoPE scaling factor 4.
  qwen2    BPE pre "qwen2", q/k/v biases, tied, NEOX RoPE base 1e6.
  qwen3    QK-norm, no biases, NEOX, key_length 32 != 64/4, untied, BPE pre "qwen2".
  phi3     fused attn_qkv / ffn_up (gate first), partial NEOX RoPE (8 of 16 dims), long-rope factors
           and rope.scaling.attn_factor, context 128 / original 32 (n_ctx 64 picks the LONG factors),
           sliding_window 2047 written but ignored (as llama.cpp does), SentencePiece.
  gemma2   4 layers, embeddings * sqrt(64), pre+post norms, GeGLU, tied, attention soft-cap 3 and final
           soft-cap 5, window 4 on even layers, key_length 32, SentencePiece.
  gemma3   6 layers (layer 5 global), window 4, QK-norm, key_length 32, 1 KV head, quantized weights.
--validate-f32 DIR writes all-F32 copies of every variant into DIR and prints llama.cpp's (F32 KV cache)
max abs difference from the reference on them, and the difference after switching off, one at a time,
the feature each variant exercises (it must grow: the reference really reads that feature as llama.cpp does).
"""

from __future__ import annotations

import argparse
import collections
import hashlib
import json
import math
import os
import re
import sys

import numpy as np
import gguf
from gguf import GGMLQuantizationType as Q
from gguf.quants import dequantize, quantize

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
OUT = os.path.join(ROOT, "tests/fixtures/decoders")
N_EMBD, N_LAYER, N_HEAD, N_HEAD_KV, HEAD_DIM, N_FF = 64, 2, 4, 2, 16, 256
N_CTX = 64
LLAMA_CPP_COMMIT = "0c1e57098bba43ac29e6e3b677cdceebdd22334f"

CORPUS = (
    "the cat sat on the mat. the dog ran to the park and the cat ran after the dog. "
    "a small bird sang in the tree while the wind moved the leaves. there is a house at the end of the road, "
    "and in the house there is a table, and on the table there is a cup of tea. "
    "def add(a, b):\n    return a + b\n\nfor i in range(10):\n    print(i)\n"
    "Hello World! Hello there, hello again. 1234 5678 90. The year 2024. "
    "café naïve élan. Über straße. привет мир. 日本語 テスト."
)
# more text for the BPE vocabularies of the newer variants (llama3, smollm, qwen3): numbers, contractions, code
CORPUS_MORE = (
    " It's the cat's mat. They're here and we've seen it; you'll see what I'd do. I'm sure it isn't. "
    "100 200 300 1000 2000 123 456 789 12 34 56 2024 2025 3.14 0.5 42 7 99. "
    "    if x == 1:\n        return None\n    else:\n        return x * 2\n"
    "int main() { return 0; } // done\n<div class=\"a\">b</div> https://example.com/a?b=c "
    "!!! ??? ... --- *** === "
)

def sha256_file(path):
    with open(path, "rb") as f:
        return hashlib.sha256(f.read()).hexdigest()


def train_merges(words: list[list[str]], n_merges: int) -> list[tuple[str, str]]:
    """Plain BPE training on symbol sequences: repeatedly merge the most frequent adjacent pair
    (ties: lexicographically smallest pair, so the result is deterministic)."""
    seqs = collections.Counter(tuple(w) for w in words)
    merges = []
    for _ in range(n_merges):
        pairs = collections.Counter()
        for seq, c in seqs.items():
            for a, b in zip(seq, seq[1:]):
                pairs[(a, b)] += c
        if not pairs:
            break
        best = min(pairs.items(), key=lambda kv: (-kv[1], kv[0]))[0]
        if pairs[best] < 2:
            break
        merges.append(best)
        new = collections.Counter()
        for seq, c in seqs.items():
            out, i = [], 0
            while i < len(seq):
                if i + 1 < len(seq) and (seq[i], seq[i + 1]) == best:
                    out.append(seq[i] + seq[i + 1])
                    i += 2
                else:
                    out.append(seq[i])
                    i += 1
            new[tuple(out)] += c
        seqs = new
    return merges


def spm_vocab():
    """SentencePiece-style (llama.cpp `llama` tokenizer model): tokens, scores, types."""
    text = CORPUS.replace(" ", "\u2581")
    chars = sorted(set("\u2581" + text))
    merges = train_merges([list("\u2581" + line) for line in text.split("\n") if line], 120)
    tokens = ["<unk>", "<s>", "</s>"] + [f"<0x{b:02X}>" for b in range(256)]
    types = [2, 3, 3] + [6] * 256  # unknown, control, control, byte
    scores = [0.0, 0.0, 0.0] + [0.0] * 256
    seen = set(tokens)
    for i, (a, b) in enumerate(merges):
        t = a + b
        if t not in seen:
            seen.add(t)
            tokens.append(t)
            types.append(1)
            scores.append(-float(i))
    for i, ch in enumerate(chars):
        if ch not in seen:
            seen.add(ch)
            tokens.append(ch)
            types.append(1)
            scores.append(-1000.0 - i)
    tokens.append("<b>")  # a user-defined piece, as Gemma's HTML tags
    types.append(4)
    scores.append(0.0)
    return tokens, scores, types


def bytes_to_unicode():
    bs = list(range(ord("!"), ord("~") + 1)) + list(range(ord("¡"), ord("¬") + 1)) + list(range(ord("®"), ord("ÿ") + 1))
    cs = bs[:]
    n = 0
    for b in range(256):
        if b not in bs:
            bs.append(b)
            cs.append(256 + n)
            n += 1
    return dict(zip(bs, map(chr, cs)))


def bpe_vocab():
    """GPT-2 byte-level BPE (llama.cpp `gpt2` tokenizer model): tokens, types, merges."""
    b2u = bytes_to_unicode()
    # a rough stand-in for the qwen2 pre-tokenizer: words with their leading space, digits one by one, punctuation
    chunks = re.findall(r" ?[^\W\d_]+|\d| ?[^\s\w]+|\s+", CORPUS)
    words = [[b2u[b] for b in c.encode("utf-8")] for c in chunks]
    merges = train_merges(words, 150)
    tokens = [b2u[b] for b in range(256)]
    seen = set(tokens)
    kept = []
    for a, b in merges:
        t = a + b
        if t not in seen:
            seen.add(t)
            tokens.append(t)
            kept.append(f"{a} {b}")
    types = [1] * len(tokens)
    for special in ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]:
        tokens.append(special)
        types.append(3)
    return tokens, types, kept


# pre-tokenizer stand-ins for training the BPE merges (Python `re` has no \p{L}: [^\W\d_] is a letter);
# only the merges depend on them: llama.cpp's own pre-tokenizer (llama-vocab.cpp) splits the fixtures' text.
BPE_CHUNKERS = {
    # LLAMA3: contractions, letters with one leading non-letter, digits in groups of 1..3, punctuation, spaces
    "llama-bpe": r"'(?:[sStTmMdD]|[rR][eE]|[vV][eE]|[lL][lL])|[^\r\n\w]?[^\W\d_]+|\d{1,3}| ?[^\s\w]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+",
    # QWEN2: the same with single digits
    "qwen2": r"'(?:[sStTmMdD]|[rR][eE]|[vV][eE]|[lL][lL])|[^\r\n\w]?[^\W\d_]+|\d| ?[^\s\w]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+",
    # SMOLLM: single digits, then GPT-2's expression
    "smollm": r"\d|'s|'t|'re|'ve|'m|'ll|'d| ?[^\W\d_]+| ?[^\s\w]+|\s+(?!\S)|\s+",
}


def bpe_vocab_for(pre: str, n_merges: int, specials: list[str], user_defined: list[str], specials_first: bool):
    """GPT-2 byte-level BPE (llama.cpp `gpt2` model) for the newer variants: 256 byte tokens, tokens of
    merges trained on CORPUS + CORPUS_MORE, control tokens (type 3) first or last, user-defined (type 4)."""
    b2u = bytes_to_unicode()
    chunks = re.findall(BPE_CHUNKERS[pre], CORPUS + CORPUS_MORE)
    words = [[b2u[b] for b in c.encode("utf-8")] for c in chunks]
    merges = train_merges(words, n_merges)
    tokens = [b2u[b] for b in range(256)]
    seen = set(tokens)
    kept = []
    for a, b in merges:
        t = a + b
        if t not in seen:
            seen.add(t)
            tokens.append(t)
            kept.append(f"{a} {b}")
    types = [1] * len(tokens)
    if specials_first:
        tokens = specials + tokens
        types = [3] * len(specials) + types
    else:
        tokens += specials
        types += [3] * len(specials)
    tokens += user_defined
    types += [4] * len(user_defined)
    return tokens, types, kept


def spm_vocab_plus(extra: list[tuple[str, int]]):
    """spm_vocab() with extra pieces appended (type 3 control / 4 user-defined, score -1000 as the
    converter gives added tokens)."""
    tokens, scores, types = spm_vocab()
    for t, ty in extra:
        tokens.append(t)
        scores.append(-1000.0)
        types.append(ty)
    return tokens, scores, types


def random_q4_k(rng, rows: int, cols: int) -> np.ndarray:
    """Random Q4_K blocks (144 bytes per 256 values): f16 d, f16 dmin, 12 bytes of 6-bit scales/mins,
    128 bytes of 4-bit quants. dmin ~ 7.5 d keeps the values centred near zero."""
    assert cols % 256 == 0
    nb = rows * cols // 256
    d = (rng.uniform(0.5, 1.0, nb) * 0.02 / 64).astype(np.float16)
    dmin = (d.astype(np.float32) * rng.uniform(6.0, 9.0, nb)).astype(np.float16)
    blocks = np.empty((nb, 144), dtype=np.uint8)
    blocks[:, 0:2] = d.view(np.uint8).reshape(nb, 2)
    blocks[:, 2:4] = dmin.view(np.uint8).reshape(nb, 2)
    blocks[:, 4:144] = rng.integers(0, 256, (nb, 140), dtype=np.uint8)
    return blocks.reshape(rows, cols // 256 * 144)


def random_q6_k(rng, rows: int, cols: int) -> np.ndarray:
    """Random Q6_K blocks (210 bytes per 256 values, gguf-py quants.py / ggml block_q6_K): 128 bytes ql
    (low 4 bits), 64 bytes qh (high 2 bits), 16 int8 scales (one per 16 values), f16 d; value =
    d * scale * (q - 32). Scales in [-40, 40] with d ~ 1e-4 give values of std ~ 0.03, centred on zero."""
    assert cols % 256 == 0
    nb = rows * cols // 256
    blocks = np.empty((nb, 210), dtype=np.uint8)
    blocks[:, 0:192] = rng.integers(0, 256, (nb, 192), dtype=np.uint8)
    blocks[:, 192:208] = rng.integers(-40, 41, (nb, 16)).astype(np.int8).view(np.uint8)
    d = (rng.uniform(0.5, 1.0, nb) * 1.5e-4).astype(np.float16)
    blocks[:, 208:210] = d.view(np.uint8).reshape(nb, 2)
    return blocks.reshape(rows, cols // 256 * 210)


RANDOM_BLOCKS = {Q.Q4_K: random_q4_k, Q.Q6_K: random_q6_k}
BLOCK_BYTES = {Q.F32: (1, 4), Q.F16: (1, 2), Q.Q8_0: (32, 34), Q.Q5_0: (32, 22), Q.Q4_K: (256, 144), Q.Q6_K: (256, 210)}


def add_weight(w: gguf.GGUFWriter, rng, name: str, out_dim: int, in_dim: int, qtype, scale: float, all_f32=False):
    """A random [out_dim, in_dim] matrix (gguf ne = [in_dim, out_dim]) of type qtype; all_f32 stores the
    same values as F32 (exactly the dequantized ones for Q4_K / Q6_K, the unrounded ones otherwise)."""
    if qtype in RANDOM_BLOCKS:
        blocks = RANDOM_BLOCKS[qtype](rng, out_dim, in_dim)
        if all_f32:
            w.add_tensor(name, dequantize(blocks, qtype).reshape(out_dim, in_dim).astype(np.float32))
        else:
            w.add_tensor(name, blocks, raw_dtype=qtype)
        return
    if all_f32:
        qtype = Q.F32
    x = (rng.standard_normal((out_dim, in_dim)) * scale).astype(np.float32)
    if qtype == Q.F32:
        w.add_tensor(name, x)
    elif qtype == Q.F16:
        w.add_tensor(name, x.astype(np.float16))
    else:
        w.add_tensor(name, quantize(x, qtype), raw_dtype=qtype)


# per layer: q, k, v, o, gate, up, down
LAYER_TYPES = [
    {"attn_q": Q.F16, "attn_k": Q.Q5_0, "attn_v": Q.Q8_0, "attn_output": Q.F32, "ffn_gate": Q.Q5_0, "ffn_up": Q.F16, "ffn_down": Q.Q4_K},
    {"attn_q": Q.Q8_0, "attn_k": Q.F16, "attn_v": Q.Q5_0, "attn_output": Q.Q8_0, "ffn_gate": Q.F32, "ffn_up": Q.Q5_0, "ffn_down": Q.Q4_K},
]


def write_model(arch: str, path: str, seed: int, all_f32: bool = False):
    """Writes the tiny model; all_f32 stores every weight as F32 (same random values for the non-Q4_K
    ones), for the exactness check of --validate-f32."""
    rng = np.random.default_rng(seed)
    w = gguf.GGUFWriter(path, arch)
    w.add_name(f"tiny-{arch}-random")
    w.add_context_length(256)
    w.add_embedding_length(N_EMBD)
    w.add_block_count(N_LAYER)
    w.add_feed_forward_length(N_FF)
    w.add_head_count(N_HEAD)
    w.add_head_count_kv(N_HEAD_KV)
    w.add_layer_norm_rms_eps(1e-5 if arch == "llama" else 1e-6)
    w.add_rope_dimension_count(HEAD_DIM)
    w.add_rope_freq_base(10000.0 if arch == "llama" else 1000000.0)
    w.add_file_type(1)  # mostly F16 (informational)
    if arch == "llama":
        tokens, scores, types = spm_vocab()
        w.add_tokenizer_model("llama")
        w.add_tokenizer_pre("default")
        w.add_token_list(tokens)
        w.add_token_scores(scores)
        w.add_token_types(types)
        w.add_unk_token_id(0)
        w.add_bos_token_id(1)
        w.add_eos_token_id(2)
        w.add_add_bos_token(True)
        w.add_add_eos_token(False)
        w.add_add_space_prefix(True)
        w.add_vocab_size(len(tokens))
    else:
        tokens, types, merges = bpe_vocab()
        w.add_tokenizer_model("gpt2")
        w.add_tokenizer_pre("qwen2")
        w.add_token_list(tokens)
        w.add_token_types(types)
        w.add_token_merges(merges)
        eot = tokens.index("<|endoftext|>")
        w.add_eos_token_id(eot)
        w.add_pad_token_id(eot)
        w.add_bos_token_id(eot)
        w.add_add_bos_token(False)
    n_vocab = len(tokens)
    add_weight(w, rng, "token_embd.weight", n_vocab, N_EMBD, Q.Q8_0, 0.5, all_f32)
    w.add_tensor("output_norm.weight", rng.uniform(0.8, 1.2, N_EMBD).astype(np.float32))
    if arch == "llama":
        add_weight(w, rng, "output.weight", n_vocab, N_EMBD, Q.Q8_0, 0.2, all_f32)
    for il in range(N_LAYER):
        b = f"blk.{il}."
        t = LAYER_TYPES[il]
        w.add_tensor(b + "attn_norm.weight", rng.uniform(0.8, 1.2, N_EMBD).astype(np.float32))
        w.add_tensor(b + "ffn_norm.weight", rng.uniform(0.8, 1.2, N_EMBD).astype(np.float32))
        add_weight(w, rng, b + "attn_q.weight", N_HEAD * HEAD_DIM, N_EMBD, t["attn_q"], 0.25, all_f32)
        add_weight(w, rng, b + "attn_k.weight", N_HEAD_KV * HEAD_DIM, N_EMBD, t["attn_k"], 0.25, all_f32)
        add_weight(w, rng, b + "attn_v.weight", N_HEAD_KV * HEAD_DIM, N_EMBD, t["attn_v"], 0.25, all_f32)
        if arch == "qwen2":
            for n, dim in (("attn_q", N_HEAD * HEAD_DIM), ("attn_k", N_HEAD_KV * HEAD_DIM), ("attn_v", N_HEAD_KV * HEAD_DIM)):
                w.add_tensor(b + n + ".bias", (rng.standard_normal(dim) * 0.3).astype(np.float32))
        add_weight(w, rng, b + "attn_output.weight", N_EMBD, N_HEAD * HEAD_DIM, t["attn_output"], 0.15, all_f32)
        add_weight(w, rng, b + "ffn_gate.weight", N_FF, N_EMBD, t["ffn_gate"], 0.2, all_f32)
        add_weight(w, rng, b + "ffn_up.weight", N_FF, N_EMBD, t["ffn_up"], 0.2, all_f32)
        add_weight(w, rng, b + "ffn_down.weight", N_EMBD, N_FF, t["ffn_down"], 0.1, all_f32)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    return n_vocab


def llama3_rope_factors(base: float, dim: int, factor: float, low_freq_factor: float, high_freq_factor: float,
                        old_context_len: int) -> np.ndarray:
    """conversion/llama.py generate_extra_tensors for rope_type "llama3" (float32 as torch computes it):
    pairs whose wavelength is under old_context_len/high_freq_factor keep 1, over old_context_len/low_freq_factor
    get `factor`, between them a smooth interpolation."""
    freqs = (np.float32(1.0) / (np.float32(base) ** (np.arange(0, dim, 2, dtype=np.float32) / np.float32(dim)))).astype(np.float32)
    low_freq_wavelen = old_context_len / low_freq_factor
    high_freq_wavelen = old_context_len / high_freq_factor
    out = []
    for freq in freqs:
        wavelen = np.float32(2 * math.pi) / freq
        if wavelen < high_freq_wavelen:
            out.append(1.0)
        elif wavelen > low_freq_wavelen:
            out.append(factor)
        else:
            smooth = (old_context_len / wavelen - low_freq_factor) / (high_freq_factor - low_freq_factor)
            out.append(1 / ((1 - smooth) / factor + smooth))
    return np.array(out, dtype=np.float32)


# llama3 factors: at head_dim 16 / base 5e5 the wavelengths are 6.3, 32, 167, 861, 4.4e3, ... so with
# old_context_len 1024, low 1, high 8 (bounds 128 and 1024) the pairs get 1, 1, ~1.3, ~6.7, 8, 8, 8, 8.
LLAMA3_ROPE = dict(factor=8.0, low_freq_factor=1.0, high_freq_factor=8.0, old_context_len=1024)
PHI3_CTX, PHI3_CTX_ORIG = 128, 32
PHI3_LONG = [1.0, 1.6, 3.2, 6.4]
PHI3_SHORT = [1.0, 1.05, 1.1, 1.2]
# conversion/phi.py: longrope attn_factor = sqrt(1 + ln(scale) / ln(original_max_position_embeddings)),
# scale = max_position_embeddings / original_max_position_embeddings
PHI3_ATTN_FACTOR = math.sqrt(1 + math.log(PHI3_CTX / PHI3_CTX_ORIG) / math.log(PHI3_CTX_ORIG))

# Per variant: arch, seed, layers, KV heads, head_k, the weight types per layer (cycled), and what llama.cpp
# does with the file's window. q, k, v, o, gate, up, down (phi3: qkv, o, up (fused), down). Seeds and phi3's
# smaller q/k/v scale were picked so that llama.cpp's quantized logits stay close (cosine >= 0.998) and no
# position's reference top-1 is a near-tie (margin >= 3e-3).
VARIANT_SPECS = {
    "llama3": dict(arch="llama", seed=2468, n_layer=2, n_head_kv=2, head_k=16, layer_types=[
        dict(attn_q=Q.Q8_0, attn_k=Q.F16, attn_v=Q.Q5_0, attn_output=Q.Q8_0, ffn_gate=Q.F16, ffn_up=Q.Q8_0, ffn_down=Q.Q6_K),
        dict(attn_q=Q.Q5_0, attn_k=Q.Q8_0, attn_v=Q.F16, attn_output=Q.F32, ffn_gate=Q.Q8_0, ffn_up=Q.Q5_0, ffn_down=Q.Q4_K)]),
    "smollm": dict(arch="llama", seed=1358, n_layer=2, n_head_kv=2, head_k=16, layer_types=[
        dict(attn_q=Q.F16, attn_k=Q.Q8_0, attn_v=Q.Q8_0, attn_output=Q.Q5_0, ffn_gate=Q.Q8_0, ffn_up=Q.F16, ffn_down=Q.Q6_K),
        dict(attn_q=Q.Q8_0, attn_k=Q.Q5_0, attn_v=Q.F16, attn_output=Q.F16, ffn_gate=Q.Q5_0, ffn_up=Q.Q8_0, ffn_down=Q.Q4_K)]),
    "mistral": dict(arch="llama", seed=3581, n_layer=2, n_head_kv=2, head_k=16, window=8, llamacpp_ignores_window=True, layer_types=[
        dict(attn_q=Q.Q5_0, attn_k=Q.Q8_0, attn_v=Q.F16, attn_output=Q.Q5_0, ffn_gate=Q.F16, ffn_up=Q.Q8_0, ffn_down=Q.Q6_K),
        dict(attn_q=Q.F16, attn_k=Q.F16, attn_v=Q.Q8_0, attn_output=Q.Q8_0, ffn_gate=Q.Q8_0, ffn_up=Q.Q5_0, ffn_down=Q.Q4_K)]),
    "qwen3": dict(arch="qwen3", seed=4680, n_layer=2, n_head_kv=2, head_k=32, layer_types=[
        dict(attn_q=Q.Q8_0, attn_k=Q.Q5_0, attn_v=Q.Q8_0, attn_output=Q.F16, ffn_gate=Q.Q5_0, ffn_up=Q.Q8_0, ffn_down=Q.Q6_K),
        dict(attn_q=Q.F16, attn_k=Q.Q8_0, attn_v=Q.Q5_0, attn_output=Q.Q8_0, ffn_gate=Q.F16, ffn_up=Q.F32, ffn_down=Q.Q4_K)]),
    "phi3": dict(arch="phi3", seed=5791, n_layer=2, n_head_kv=2, head_k=16, qkv_scale=0.15, window=0, llamacpp_ignores_window=True, layer_types=[
        dict(attn_qkv=Q.Q8_0, attn_output=Q.F16, ffn_up=Q.Q5_0, ffn_down=Q.Q4_K),
        dict(attn_qkv=Q.F16, attn_output=Q.Q8_0, ffn_up=Q.Q8_0, ffn_down=Q.Q6_K)]),
    "gemma2": dict(arch="gemma2", seed=6802, n_layer=4, n_head_kv=2, head_k=32, window=4, layer_types=[
        dict(attn_q=Q.Q8_0, attn_k=Q.F16, attn_v=Q.Q5_0, attn_output=Q.Q8_0, ffn_gate=Q.Q5_0, ffn_up=Q.F16, ffn_down=Q.Q4_K),
        dict(attn_q=Q.F16, attn_k=Q.Q8_0, attn_v=Q.Q8_0, attn_output=Q.Q5_0, ffn_gate=Q.Q8_0, ffn_up=Q.Q8_0, ffn_down=Q.Q6_K)]),
    "gemma3": dict(arch="gemma3", seed=7913, n_layer=6, n_head_kv=1, head_k=32, window=4, layer_types=[
        dict(attn_q=Q.Q8_0, attn_k=Q.Q5_0, attn_v=Q.F16, attn_output=Q.Q8_0, ffn_gate=Q.F16, ffn_up=Q.Q5_0, ffn_down=Q.Q6_K),
        dict(attn_q=Q.F16, attn_k=Q.Q8_0, attn_v=Q.Q8_0, attn_output=Q.Q5_0, ffn_gate=Q.Q8_0, ffn_up=Q.Q8_0, ffn_down=Q.Q4_K),
        dict(attn_q=Q.Q5_0, attn_k=Q.F16, attn_v=Q.Q5_0, attn_output=Q.F16, ffn_gate=Q.Q5_0, ffn_up=Q.F16, ffn_down=Q.Q6_K)]),
}


def add_spm(w: gguf.GGUFWriter, tokens, scores, types, add_space_prefix: bool):
    w.add_tokenizer_model("llama")
    w.add_tokenizer_pre("default")
    w.add_token_list(tokens)
    w.add_token_scores(scores)
    w.add_token_types(types)
    w.add_unk_token_id(0)
    w.add_bos_token_id(1)
    w.add_eos_token_id(2)
    w.add_add_bos_token(True)
    w.add_add_eos_token(False)
    w.add_add_space_prefix(add_space_prefix)
    return 1  # BOS


def add_bpe(w: gguf.GGUFWriter, pre: str, tokens, types, merges, bos: str, eos: str, add_bos: bool, pad: str | None = None):
    w.add_tokenizer_model("gpt2")
    w.add_tokenizer_pre(pre)
    w.add_token_list(tokens)
    w.add_token_types(types)
    w.add_token_merges(merges)
    w.add_bos_token_id(tokens.index(bos))
    w.add_eos_token_id(tokens.index(eos))
    if pad is not None:
        w.add_pad_token_id(tokens.index(pad))
    w.add_add_bos_token(add_bos)
    return tokens.index(bos)


def write_variant(variant: str, path: str, all_f32: bool = False, zero_ffn: bool = False) -> tuple[int, dict]:
    """Writes tiny-<variant> (a VARIANT_SPECS entry); returns (n_vocab, info for the fixture).
    zero_ffn (a --validate-f32 diagnostic): ffn_down all zeros, so the FFN (and its GELU) adds nothing."""
    spec = VARIANT_SPECS[variant]
    arch, nl, nkv, hk = spec["arch"], spec["n_layer"], spec["n_head_kv"], spec["head_k"]
    rng = np.random.default_rng(spec["seed"])
    w = gguf.GGUFWriter(path, arch)
    w.add_name(f"tiny-{variant}-random")
    w.add_context_length(PHI3_CTX if variant == "phi3" else 256)
    w.add_embedding_length(N_EMBD)
    w.add_block_count(nl)
    w.add_feed_forward_length(N_FF)
    w.add_head_count(N_HEAD)
    w.add_head_count_kv(nkv)
    if hk != N_EMBD // N_HEAD:
        w.add_key_length(hk)
        w.add_value_length(hk)
    w.add_layer_norm_rms_eps(1e-6 if arch in ("qwen3", "gemma2", "gemma3") else 1e-5)
    n_rot = hk // 2 if variant == "phi3" else hk
    if arch in ("llama", "phi3"):
        w.add_rope_dimension_count(n_rot)
    w.add_rope_freq_base({"llama3": 500000.0, "qwen3": 1000000.0, "gemma3": 1000000.0}.get(variant, 10000.0))
    if variant == "mistral":
        w.add_sliding_window(spec["window"])
        w.add_rope_scaling_type(gguf.RopeScalingType.LINEAR)
        w.add_rope_scaling_factor(4.0)
    if variant == "phi3":
        w.add_rope_scaling_orig_ctx_len(PHI3_CTX_ORIG)
        w.add_rope_scaling_attn_factors(PHI3_ATTN_FACTOR)
        w.add_sliding_window(2047)  # as real Phi-3 files; llama.cpp (phi3.cpp) disables Phi SWA
    if arch in ("gemma2", "gemma3"):
        w.add_sliding_window(spec["window"])
    if arch == "gemma2":
        w.add_attn_logit_softcapping(3.0)
        w.add_final_logit_softcapping(5.0)
    w.add_file_type(1)  # informational

    if variant == "llama3":
        tokens, types, merges = bpe_vocab_for("llama-bpe", 200, ["<|begin_of_text|>", "<|end_of_text|>", "<|start_header_id|>",
                                                                 "<|end_header_id|>", "<|eot_id|>"], [], specials_first=False)
        bos = add_bpe(w, "llama-bpe", tokens, types, merges, "<|begin_of_text|>", "<|end_of_text|>", True)
    elif variant == "smollm":
        tokens, types, merges = bpe_vocab_for("smollm", 180, ["<|endoftext|>", "<|im_start|>", "<|im_end|>"], [], specials_first=True)
        bos = add_bpe(w, "smollm", tokens, types, merges, "<|im_start|>", "<|im_end|>", False, pad="<|im_end|>")
        w.add_unk_token_id(0)
    elif variant == "qwen3":
        tokens, types, merges = bpe_vocab_for("qwen2", 160, ["<|endoftext|>", "<|im_start|>", "<|im_end|>"], ["<think>", "</think>"],
                                              specials_first=False)
        bos = add_bpe(w, "qwen2", tokens, types, merges, "<|endoftext|>", "<|im_end|>", False, pad="<|endoftext|>")
    elif variant == "phi3":
        tokens, scores, types = spm_vocab_plus([("<|endoftext|>", 3), ("<|user|>", 3), ("<|assistant|>", 3), ("<|end|>", 3)])
        bos = add_spm(w, tokens, scores, types, True)
    elif variant == "gemma2":
        tokens, scores, types = spm_vocab_plus([("<start_of_turn>", 3), ("<end_of_turn>", 3)])
        bos = add_spm(w, tokens, scores, types, False)
    else:  # mistral (Llama 2 vocabulary), gemma3 (as its all-F32 predecessor)
        tokens, scores, types = spm_vocab()
        bos = add_spm(w, tokens, scores, types, variant == "mistral")
    n_vocab = len(tokens)

    gemma = arch in ("gemma2", "gemma3")
    norm = (lambda n: rng.uniform(0.5, 1.5, n).astype(np.float32)) if gemma else (lambda n: rng.uniform(0.8, 1.2, n).astype(np.float32))  # noqa: E731
    tied = variant in ("smollm",) or gemma
    add_weight(w, rng, "token_embd.weight", n_vocab, N_EMBD, Q.Q8_0, 0.2 if arch == "gemma3" else 0.5, all_f32)
    if variant == "llama3":
        w.add_tensor("rope_freqs.weight", llama3_rope_factors(500000.0, hk, **LLAMA3_ROPE))
    if variant == "phi3":
        w.add_tensor("rope_factors_long.weight", np.array(PHI3_LONG, dtype=np.float32))
        w.add_tensor("rope_factors_short.weight", np.array(PHI3_SHORT, dtype=np.float32))
    w.add_tensor("output_norm.weight", norm(N_EMBD))
    if not tied:
        add_weight(w, rng, "output.weight", n_vocab, N_EMBD, Q.F16 if variant == "llama3" else Q.Q8_0, 0.2, all_f32)
    nq, nk = N_HEAD * hk, nkv * hk
    for il in range(nl):
        b = f"blk.{il}."
        t = spec["layer_types"][il % len(spec["layer_types"])]
        w.add_tensor(b + "attn_norm.weight", norm(N_EMBD))
        if gemma:
            w.add_tensor(b + "post_attention_norm.weight", norm(N_EMBD))
        w.add_tensor(b + "ffn_norm.weight", norm(N_EMBD))
        if gemma:
            w.add_tensor(b + "post_ffw_norm.weight", norm(N_EMBD))
        if arch in ("qwen3", "gemma3"):
            w.add_tensor(b + "attn_q_norm.weight", norm(hk))
            w.add_tensor(b + "attn_k_norm.weight", norm(hk))
        qkv_scale = spec.get("qkv_scale", 0.2 if gemma else 0.25)
        if arch == "phi3":
            add_weight(w, rng, b + "attn_qkv.weight", nq + 2 * nk, N_EMBD, t["attn_qkv"], qkv_scale, all_f32)
        else:
            add_weight(w, rng, b + "attn_q.weight", nq, N_EMBD, t["attn_q"], qkv_scale, all_f32)
            add_weight(w, rng, b + "attn_k.weight", nk, N_EMBD, t["attn_k"], qkv_scale, all_f32)
            add_weight(w, rng, b + "attn_v.weight", nk, N_EMBD, t["attn_v"], qkv_scale, all_f32)
        add_weight(w, rng, b + "attn_output.weight", N_EMBD, nq, t["attn_output"], 0.1 if gemma else 0.15, all_f32)
        if arch == "phi3":
            add_weight(w, rng, b + "ffn_up.weight", 2 * N_FF, N_EMBD, t["ffn_up"], 0.2, all_f32)
        else:
            add_weight(w, rng, b + "ffn_gate.weight", N_FF, N_EMBD, t["ffn_gate"], 0.2, all_f32)
            add_weight(w, rng, b + "ffn_up.weight", N_FF, N_EMBD, t["ffn_up"], 0.2, all_f32)
        if zero_ffn:
            w.add_tensor(b + "ffn_down.weight", np.zeros((N_EMBD, N_FF), dtype=np.float32))
        else:
            add_weight(w, rng, b + "ffn_down.weight", N_EMBD, N_FF, t["ffn_down"], 0.1, all_f32)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    return n_vocab, {"arch": arch, "bos": bos, "window": spec.get("window", 0),
                     "llamacpp_ignores_window": spec.get("llamacpp_ignores_window", False)}


def check_tensor_bytes(path: str):
    """Every tensor's stored byte length is exactly its element count at its type's block size."""
    r = gguf.GGUFReader(path)
    for t in r.tensors:
        bs, nbytes = BLOCK_BYTES[Q(t.tensor_type)]
        n = int(np.prod([int(v) for v in t.shape]))
        assert n % bs == 0 and int(t.data.nbytes) == n // bs * nbytes, (path, t.name, t.tensor_type, t.shape, t.data.nbytes)


# The first 51 are the original set (kept first, in order); the rest are edge cases for every tokenizer.
TOKENIZE_STRINGS = [
    "", " ", "  ", "the cat", " the cat", "the  cat", "The Cat", "the cat sat on the mat.", "hello world",
    "Hello World!", "HELLO", "a", "ab", "abc", "xyz qrs", "\n", "\n\n", "a\nb", "\t", "tab\there", "   spaces",
    "trailing ", "1", "12", "1234", "2024-12-02", "3.14159", "def add(a, b):\n    return a + b\n", "print(i)",
    "café", "naïve", "Über", "straße", "привет", "日本語", "テスト", "😀", "👨‍👩‍👧", "é", "€5", "<b>bold", "a<b>b",
    "<s>", "</s>", "<s>the", "<|endoftext|>", "x<|im_start|>y", "<unk>", "the cat<|im_end|>", "\u00a0", "zz zz zz",
    # whitespace
    "   ", "    ", "        ", " a", "  a", "a  ", "a   b", " \n ", "\n ", " \n", "\r\n", "a\r\nb", "\r", "\t\t",
    " \t x", "\n\n\n", "a\n\n\nb", "  \n\n  x", "\u3000", "x\u00a0y", "\u2009thin", "\u000b", "\u000c", "word\tword",
    "end of line \n", "\u200b", "\ufeffbom", "\u00adsoft",
    # numbers of different lengths (llama3 splits digits in groups of 3)
    "0", "00", "007", "123", "12345", "123456", "1234567", "12345678901", "1,234,567", "1.5e-10", "-42", "+3",
    "3.0", "99 bottles", "v1.2.3", "0x1F", "2^10=1024", "a1b22c333", "١٢٣", "５６７", "½", "x²", "Ⅻ", "10%",
    "$100.00", "€1.234,56", "£5", "¥500", "°C", "12:30", "555-0199",
    # contractions
    "it's", "don't", "they're", "we've", "you'll", "he'd", "I'm", "IT'S", "DON'T", "She'S", "'s", "'t", "''",
    "rock 'n' roll", "o'clock", "y'all'd've", "the cat's", "'re 've 'll 'd", "can't won't",
    # code
    "fn main() {\n    println!(\"hi\");\n}", "x += 1;", "if (a && b) || !c {", "#include <stdio.h>",
    "SELECT * FROM t WHERE id = 1;", "<div class=\"a\">b</div>", "a->b", "a::b", "foo_bar_baz", "camelCaseName",
    "snake_case_2", "$HOME/bin", "C:\\path\\to", "https://example.com/a?b=c&d=e", "user@example.com",
    "\"quoted\"", "'single'", "`backtick`", "[1, 2, 3]", "{\"k\": \"v\"}", "#!/bin/sh\n", "// comment",
    "/* block */", "lambda x: x**2", "\tindented\n\t\tmore", "    if x == 1:\n        return None\n",
    # punctuation runs
    "...", "!!!", "?!?!", "---", "***", "===", "!!!???", "a...b", "—", "–", "“quotes”", "‘apos’", "«guillemets»",
    "¡Hola!", "¿Qué?", "()", "[]{}<>", "~`!@#$%^&*()_+", ".,;:", "end.", "a, b, c.",
    # emoji sequences
    "😀😀", "👍🏽", "🇯🇵", "❤️", "🏳️‍🌈", "a😀b", " 😀", "🤖 robot", "✨", "👨‍💻", "😀 😃 😄",
    # CJK
    "中文", "你好，世界！", "日本語のテキスト", "カタカナ", "ひらがな", "한국어", "안녕하세요", "漢字かな交じり",
    "中文English混合", "全角：テスト",
    # RTL
    "שלום", "مرحبا", "مرحبا بالعالم", "abc שלום def", "\u200fRTL mark", "فارسی",
    # combining marks and other scripts
    "e\u0301", "n\u0303", "a\u0308\u0301", "Z\u0351\u0358", "ﬁ", "\u212b", "ǅ", "İstanbul", "ß", "ΣΊΣΥΦΟΣ", "ς",
    "Ελληνικά", "Ünïcödé", "Việt Nam", "हिन्दी", "தமிழ்", "ไทย", "ქართული", "Հայերեն",
    # mixed scripts
    "hello世界", "Привет, world!", "abc123def", "A1B2C3", "naïve café résumé", "Straße München", "¿Dónde está?",
    "x²+y²=z²", "π≈3.14159", "∑∫√∞", "→←↑↓", "©®™",
    # control tokens in text (each vocabulary has some of them)
    "<|begin_of_text|>hello", "<|eot_id|>", "<|start_header_id|>user<|end_header_id|>\n\nhi<|eot_id|>",
    "<|im_start|>user\nhi<|im_end|>\n", "<|im_start|>", "<|user|>\nhi<|end|>\n<|assistant|>",
    "<start_of_turn>user\nhi<end_of_turn>", "<think>x</think>", "<s> <s>", "</s></s>", "< s>",
    "<|endoftext|><|endoftext|>", "text<|endoftext|>text", "<b></b>", "<<b>>", " <s>", "<|end_of_text|>",
    # repetition and longer text
    "the the the the", "cat\ncat\ncat", "The cat sat on the mat. The dog ran to the park.",
    "Hello World! Hello there, hello again. 1234 5678 90. The year 2024.",
    "a small bird sang in the tree while the wind moved the leaves",
]
assert len(set(TOKENIZE_STRINGS)) == len(TOKENIZE_STRINGS), "duplicate tokenize strings"
assert len(TOKENIZE_STRINGS) >= 200, len(TOKENIZE_STRINGS)

SEQUENCES = {
    "llama": [[1], [1, 260, 300, 261, 290, 301], [1] + [(i * 37 + 11) % 380 + 3 for i in range(23)]],
    "qwen2": [[5], [100, 200, 256, 300, 301, 99], [(i * 53 + 7) % 400 for i in range(24)]],
}


def sequences(variant: str, n_vocab: int, bos: int, window: int) -> list[list[int]]:
    """Token ids run through both oracles: 1, 6 and 32 tokens (and 48 where there is a window), from BOS."""
    if variant in SEQUENCES:
        return [[i % n_vocab for i in ids] for ids in SEQUENCES[variant]]
    seqs = [[bos], [bos] + [(i * 71 + 17) % (n_vocab - 3) + 3 for i in range(5)],
            [bos] + [(i * 37 + 11) % (n_vocab - 3) + 3 for i in range(31)]]
    if window:
        seqs.append([bos] + [(i * 53 + 29) % (n_vocab - 3) + 3 for i in range(47)])
    return seqs


def ablations(variant: str):
    """(label, change) pairs for --validate-f32: each switches off one feature of the reference's reading
    of the file; llama.cpp's distance from it must then grow (checks that the feature matters and is read
    as llama.cpp reads it). `all positions` marks a change compared at every position even where llama.cpp
    ignores the window."""
    def swapped_swiglu(ref):
        def ffn(b, W, f):
            gu = ref.linear(f, b + "ffn_up", W["ffn_up"])
            n = gu.shape[1] // 2
            return ref.linear(gemma_reference.silu(gu[:, n:]) * gu[:, :n], b + "ffn_down", W["ffn_down"])
        ref._ffn = ffn

    def swapped_geglu(ref):
        def ffn(b, W, f):
            g, u = ref.linear(f, b + "ffn_gate", W["ffn_gate"]), ref.linear(f, b + "ffn_up", W["ffn_up"])
            return ref.linear(gemma_reference.gelu_tanh(u) * g, b + "ffn_down", W["ffn_down"])
        ref._ffn = ffn

    def setattr_(name, value):
        return lambda ref: setattr(ref, name, value(ref) if callable(value) else value)

    return {
        "llama3": [("without rope_freqs", setattr_("rope_factors", None))],
        "mistral": [("without the window, all positions", setattr_("n_swa", 0)),
                    ("without linear scaling (freq_scale 1)", lambda r: (setattr(r, "freq_scale", 1.0), setattr(r, "freq_scale_swa", 1.0)))],
        "qwen3": [("without QK-norm", setattr_("qk_norm", False)),
                  ("scale 1/sqrt(n_embd/n_head)", setattr_("kq_scale", 0.25))],
        "phi3": [("attn_factor 1", setattr_("attn_factor", 1.0)),
                 ("short factors", setattr_("rope_factors", lambda r: r.weight("rope_factors_short.weight"))),
                 ("no factors", setattr_("rope_factors", None)),
                 ("gate = second half of ffn_up", swapped_swiglu)],
        "gemma2": [("without the attention soft-cap", setattr_("attn_softcap", 0.0)),
                   ("without the final soft-cap", setattr_("softcap", 0.0)),
                   ("without the window", setattr_("n_swa", 0)),
                   ("window on odd layers", setattr_("swa_layers", lambda r: [not s for s in r.swa_layers])),
                   ("scale 1/sqrt(n_embd/n_head)", setattr_("q_scale", 0.25)),
                   ("GELU on ffn_up instead of ffn_gate", swapped_geglu)],
        "gemma3": [("without the window", setattr_("n_swa", 0)),
                   ("without QK-norm", setattr_("qk_norm", False))],
    }.get(variant, [])


def f16_gelu(x):
    """llama.cpp's CPU GELU (ggml-cpu vec.h, GGML_GELU_FP16): x rounded to f16 looks up a table of
    f16(gelu_tanh(x)); x <= -10 gives 0, x >= 10 gives x."""
    h = x.astype(np.float16).astype(np.float64)
    y = (0.5 * h * (1.0 + np.tanh(math.sqrt(2.0 / math.pi) * (h + 0.044715 * h ** 3)))).astype(np.float16).astype(np.float64)
    return np.where(x <= -10.0, 0.0, np.where(x >= 10.0, x, y))


def emulations(variant: str):
    """(label, change) pairs for --validate-f32 that make the reference imitate one of llama.cpp's own
    roundings: the distance must shrink (explains the gap that remains with F32 weights)."""
    if variant in ("gemma2", "gemma3"):
        return [("with llama.cpp's f16 GELU table", lambda r: setattr(r, "_gelu", f16_gelu))]
    return []


gemma_reference = None


def f32_rows(a: np.ndarray) -> list[list[float]]:
    """Rows of f32 values as the shortest decimals that read back (as f64, then cast to f32) to the
    same f32: half the JSON of the full f64 repr."""
    a32 = np.asarray(a).astype(np.float32)
    out = [[float(str(x)) for x in row] for row in a32]  # str(np.float32): the shortest round-trip digits
    back = np.array(out, dtype=np.float64).astype(np.float32)
    assert np.array_equal(back, a32), "f32 decimal round trip"
    return out


def oracles(variant: str, path: str, n_vocab: int, info: dict, write: bool = True, f32_kv: bool = False,
            quiet: bool = False):
    global gemma_reference
    import llama_cpp  # only here: the GGUF step needs no llama.cpp
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    import gemma_reference as gr
    gemma_reference = gr

    llm = llama_cpp.Llama(model_path=path, n_ctx=N_CTX, n_batch=64, n_ubatch=64, n_threads=2, n_threads_batch=2,
                          logits_all=True, verbose=False, seed=0,
                          **({"type_k": 0, "type_v": 0} if f32_kv else {}))  # 0 = GGML_TYPE_F32
    ref = gr.Model(path, n_ctx=N_CTX)
    window, ignores = info["window"], info["llamacpp_ignores_window"]
    until = window if ignores and window > 0 else None  # llama.cpp is compared before this position only
    seqs, lcs = [], []
    worst = worst_before = 0.0
    for ids in sequences(variant, n_vocab, info["bos"], window):
        llm.reset()
        llm.eval(ids)
        lc = np.array(llm.scores[: len(ids)], dtype=np.float32)
        lcs.append((ids, lc))
        (_, margin, rl), = ref.forward([ids])
        diff = np.max(np.abs(lc.astype(np.float64) - rl), axis=1)
        d = float(diff.max())
        d_before = float(diff[:until].max())
        worst, worst_before = max(worst, d), max(worst_before, d_before)
        entry = {"ids": ids, "llamacpp_logits": f32_rows(lc), "reference_logits": f32_rows(rl), "max_abs_diff": d}
        if until is not None:
            entry["max_abs_diff_before_window"] = d_before
        entry.update({"max_abs_logit": float(np.max(np.abs(rl))),
                      "top1_agree": int(np.sum(np.argmax(lc, 1) == np.argmax(rl, 1))),
                      "min_top1_margin": float(np.min(margin))})
        seqs.append(entry)
    agree = f"top1 agree {[s['top1_agree'] for s in seqs]} of {[len(s['ids']) for s in seqs]}"
    diffs = f"max |llama.cpp - reference| = {worst:.3e}"
    if until is not None:
        diffs = f"max |llama.cpp - reference| = {worst_before:.3e} before position {until} ({worst:.3e} at all positions)"
    if not write:
        print(f"{os.path.basename(path)} (F32 weights, F32 KV cache): {diffs}; {agree}")
        if quiet:
            return
        for label, change in ablations(variant):
            r = gr.Model(path, n_ctx=N_CTX)
            change(r)
            stop = None if "all positions" in label else until
            d = max(float(np.max(np.abs(lc[:stop].astype(np.float64) - r.forward([ids])[0][2][:stop]))) for ids, lc in lcs)
            print(f"    reference {label}: {d:.3e}")
        for label, change in emulations(variant):
            r = gr.Model(path, n_ctx=N_CTX)
            change(r)
            saved = gr.gelu_tanh
            gr.gelu_tanh = getattr(r, "_gelu", saved)
            try:
                d = max(float(np.max(np.abs(lc[:until].astype(np.float64) - r.forward([ids])[0][2][:until]))) for ids, lc in lcs)
            finally:
                gr.gelu_tanh = saved
            print(f"    reference {label}: {d:.3e} (llama.cpp's own rounding, not the graph)")
        return
    toks = []
    for s in TOKENIZE_STRINGS:
        for add_bos, special in ((False, True), (True, True), (False, False)):
            toks.append({"text": s, "add_bos": add_bos, "parse_special": special,
                         "ids": llm.tokenize(s.encode(), add_bos=add_bos, special=special)})
    doc = {"source": f"llama-cpp-python {llama_cpp.__version__} (llama.cpp {LLAMA_CPP_COMMIT})",
           "variant": variant, "arch": info["arch"], "gguf_sha256": sha256_file(path),
           "settings": {"n_threads": 2, "n_ctx": N_CTX, "n_batch": 64, "n_ubatch": 64, "logits_all": True, "backend": "CPU",
                        "kv_cache": "f16 (llama.cpp default)", "flash_attn": False,
                        "reference": f"scripts/gemma_reference.py float64 with n_ctx {N_CTX}, rounded to f32"},
           "n_vocab": n_vocab, "window": window, "llamacpp_ignores_window": ignores,
           "sequences": seqs, "tokenize": toks}
    out = path.replace(".gguf", ".llamacpp.json")
    with open(out, "w", encoding="utf-8") as f:
        json.dump(doc, f, ensure_ascii=False)
    print(f"{os.path.basename(out)}: {len(seqs)} sequences, {diffs}; {agree}; "
          f"max |logit| {max(s['max_abs_logit'] for s in seqs):.2f}, min top-1 margin {min(s['min_top1_margin'] for s in seqs):.2e}")


VARIANTS = ["llama", "llama3", "smollm", "mistral", "qwen2", "qwen3", "phi3", "gemma2", "gemma3"]
LEGACY_SEEDS = {"llama": 1234, "qwen2": 5678}  # written by write_model, byte-identical to the first fixtures


def write_any(variant: str, path: str, all_f32: bool = False) -> tuple[int, dict]:
    if variant in LEGACY_SEEDS:
        n_vocab = write_model(variant, path, LEGACY_SEEDS[variant], all_f32)
        bos = 1 if variant == "llama" else bpe_vocab()[0].index("<|endoftext|>")
        info = {"arch": variant, "bos": bos, "window": 0, "llamacpp_ignores_window": False}
    else:
        n_vocab, info = write_variant(variant, path, all_f32)
    check_tensor_bytes(path)
    return n_vocab, info


def main(argv=None) -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--gguf-only", action="store_true")
    ap.add_argument("--validate-f32", metavar="DIR", help="also write all-F32 copies into DIR and compare llama.cpp "
                    "(F32 KV cache) with the reference on them: checks the reference graph itself, free of quantization")
    ap.add_argument("--only", nargs="*", choices=VARIANTS, help="just these variants")
    a = ap.parse_args(argv)
    os.makedirs(OUT, exist_ok=True)
    for variant in a.only or VARIANTS:
        path = os.path.join(OUT, f"tiny-{variant}.gguf")
        n_vocab, info = write_any(variant, path)
        print(f"{os.path.basename(path)}: {os.path.getsize(path)} bytes, vocab {n_vocab}, sha256 {sha256_file(path)}")
        if not a.gguf_only:
            oracles(variant, path, n_vocab, info)
        if a.validate_f32:
            os.makedirs(a.validate_f32, exist_ok=True)
            p32 = os.path.join(a.validate_f32, f"tiny-{variant}-f32.gguf")
            write_any(variant, p32, all_f32=True)
            oracles(variant, p32, n_vocab, info, write=False, f32_kv=True)
            if VARIANT_SPECS.get(variant, {}).get("arch") in ("gemma2", "gemma3"):
                # the same graph with every ffn_down zero: no GELU, so llama.cpp's f16 GELU table is out of it
                p0 = os.path.join(a.validate_f32, f"tiny-{variant}-f32-no-ffn.gguf")
                write_variant(variant, p0, all_f32=True, zero_ffn=True)
                oracles(variant, p0, n_vocab, info, write=False, f32_kv=True, quiet=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
