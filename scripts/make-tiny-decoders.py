#!/usr/bin/env python3
"""Tiny random-weight GGUF decoders for the `llama` and `qwen2` builders (issue 13), and their oracles.

  # 1. the GGUF files (needs only `gguf` + numpy: .cache/venv-ref or .cache/venv-llama)
  python scripts/make-tiny-decoders.py --gguf-only
  # 2. the files and the llama.cpp + float64 reference fixtures (.cache/venv-llama, scripts/setup-llamacpp.sh)
  .cache/venv-llama/bin/python scripts/make-tiny-decoders.py

Writes tests/fixtures/decoders/tiny-llama.gguf, tiny-qwen2.gguf (deterministic: fixed seed, so a rerun
gives the same bytes) and, with llama.cpp, tiny-llama.llamacpp.json / tiny-qwen2.llamacpp.json:
  {"source", "gguf_sha256", "settings",
   "sequences": [{"ids", "llamacpp_logits": [[n_vocab f32] per position], "reference_logits": [[...]],
                  "max_abs_diff"}],
   "tokenize": [{"text", "add_bos", "parse_special", "ids"}]}
llamacpp_logits are llama.cpp's (CPU, all positions, logits_all); reference_logits are the float64 NumPy
forward pass of scripts/gemma_reference.py on the same file (rounded to f32).

The models: hidden 64, 2 layers, 4 heads, 2 KV heads (GQA 2), head dim 16, FFN 256 (so ffn_down can be
Q4_K, whose rows need multiples of 256), F32 norms, weights mixing F32 / F16 / Q8_0 / Q5_0 / Q4_K.
llama: SentencePiece vocabulary (scores from a small BPE training run, byte fallback <0x00>..<0xFF>,
add_space_prefix), untied Q8_0 `output.weight`, NORM (adjacent-pair) RoPE.
qwen2: GPT-2 byte-level BPE (vocab + merges trained here, pre-tokenizer "qwen2"), q/k/v biases, tied
lm_head (no output.weight), NEOX RoPE, base 1e6.
--validate-f32 DIR also writes all-F32 copies (and an all-F32 tiny gemma3 with a 4-token sliding window) into
DIR and prints llama.cpp's (F32 KV cache) max abs difference from the reference on them.
"""

from __future__ import annotations

import argparse
import collections
import hashlib
import json
import os
import re
import sys

import numpy as np
import gguf
from gguf import GGMLQuantizationType as Q
from gguf.quants import quantize

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
OUT = os.path.join(ROOT, "tests/fixtures/decoders")
N_EMBD, N_LAYER, N_HEAD, N_HEAD_KV, HEAD_DIM, N_FF = 64, 2, 4, 2, 16, 256

CORPUS = (
    "the cat sat on the mat. the dog ran to the park and the cat ran after the dog. "
    "a small bird sang in the tree while the wind moved the leaves. there is a house at the end of the road, "
    "and in the house there is a table, and on the table there is a cup of tea. "
    "def add(a, b):\n    return a + b\n\nfor i in range(10):\n    print(i)\n"
    "Hello World! Hello there, hello again. 1234 5678 90. The year 2024. "
    "café naïve élan. Über straße. привет мир. 日本語 テスト."
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


def add_weight(w: gguf.GGUFWriter, rng, name: str, out_dim: int, in_dim: int, qtype, scale: float, all_f32=False):
    if all_f32 and qtype == Q.Q4_K:
        from gguf.quants import dequantize
        w.add_tensor(name, dequantize(random_q4_k(rng, out_dim, in_dim), Q.Q4_K).reshape(out_dim, in_dim).astype(np.float32))
        return
    if all_f32:
        qtype = Q.F32
    if qtype == Q.Q4_K:
        w.add_tensor(name, random_q4_k(rng, out_dim, in_dim), raw_dtype=Q.Q4_K)
        return
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


TOKENIZE_STRINGS = [
    "", " ", "  ", "the cat", " the cat", "the  cat", "The Cat", "the cat sat on the mat.", "hello world",
    "Hello World!", "HELLO", "a", "ab", "abc", "xyz qrs", "\n", "\n\n", "a\nb", "\t", "tab\there", "   spaces",
    "trailing ", "1", "12", "1234", "2024-12-02", "3.14159", "def add(a, b):\n    return a + b\n", "print(i)",
    "café", "naïve", "Über", "straße", "привет", "日本語", "テスト", "😀", "👨‍👩‍👧", "é", "€5", "<b>bold", "a<b>b",
    "<s>", "</s>", "<s>the", "<|endoftext|>", "x<|im_start|>y", "<unk>", "the cat<|im_end|>", "\u00a0", "zz zz zz",
]

SEQUENCES = {
    "llama": [[1], [1, 260, 300, 261, 290, 301], [1] + [(i * 37 + 11) % 380 + 3 for i in range(23)]],
    "qwen2": [[5], [100, 200, 256, 300, 301, 99], [(i * 53 + 7) % 400 for i in range(24)]],
    "gemma3": [[1], [1, 260, 300, 261, 290, 301], [1] + [(i * 37 + 11) % 370 + 3 for i in range(23)]],
}


def write_tiny_gemma3_f32(path: str, seed: int = 4321) -> int:
    """An all-F32 tiny `gemma3` (6 layers so layer 5 is global as in the real file's pattern, sliding
    window 4, 4 query heads sharing 1 KV head, key_length 32 != n_embd/n_head, GeGLU, post-norms,
    QK-norm): checks the reference's Gemma 3 graph against llama.cpp free of quantization."""
    rng = np.random.default_rng(seed)
    hk, nl = 32, 6
    w = gguf.GGUFWriter(path, "gemma3")
    w.add_name("tiny-gemma3-random-f32")
    w.add_context_length(256)
    w.add_embedding_length(N_EMBD)
    w.add_block_count(nl)
    w.add_feed_forward_length(N_FF)
    w.add_head_count(N_HEAD)
    w.add_head_count_kv(1)
    w.add_key_length(hk)
    w.add_value_length(hk)
    w.add_layer_norm_rms_eps(1e-6)
    w.add_rope_freq_base(1000000.0)
    w.add_sliding_window(4)
    w.add_file_type(0)
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
    w.add_add_space_prefix(False)
    n_vocab = len(tokens)
    f32 = lambda *shape, s=1.0: (rng.standard_normal(shape) * s).astype(np.float32)  # noqa: E731
    norm = lambda n: rng.uniform(0.5, 1.5, n).astype(np.float32)  # noqa: E731
    w.add_tensor("token_embd.weight", f32(n_vocab, N_EMBD, s=0.1))
    w.add_tensor("output_norm.weight", norm(N_EMBD))
    for il in range(nl):
        b = f"blk.{il}."
        for n in ("attn_norm", "post_attention_norm", "ffn_norm", "post_ffw_norm"):
            w.add_tensor(b + n + ".weight", norm(N_EMBD))
        w.add_tensor(b + "attn_q_norm.weight", norm(hk))
        w.add_tensor(b + "attn_k_norm.weight", norm(hk))
        w.add_tensor(b + "attn_q.weight", f32(N_HEAD * hk, N_EMBD, s=0.2))
        w.add_tensor(b + "attn_k.weight", f32(hk, N_EMBD, s=0.2))
        w.add_tensor(b + "attn_v.weight", f32(hk, N_EMBD, s=0.2))
        w.add_tensor(b + "attn_output.weight", f32(N_EMBD, N_HEAD * hk, s=0.1))
        w.add_tensor(b + "ffn_gate.weight", f32(N_FF, N_EMBD, s=0.2))
        w.add_tensor(b + "ffn_up.weight", f32(N_FF, N_EMBD, s=0.2))
        w.add_tensor(b + "ffn_down.weight", f32(N_EMBD, N_FF, s=0.1))
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    return n_vocab


def oracles(arch: str, path: str, n_vocab: int, write: bool = True, f32_kv: bool = False):
    import llama_cpp  # only here: the GGUF step needs no llama.cpp
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    import gemma_reference

    llm = llama_cpp.Llama(model_path=path, n_ctx=64, n_batch=64, n_ubatch=64, n_threads=2, n_threads_batch=2,
                          logits_all=True, verbose=False, seed=0,
                          **({"type_k": 0, "type_v": 0} if f32_kv else {}))  # 0 = GGML_TYPE_F32
    ref = gemma_reference.Model(path)
    seqs = []
    worst = 0.0
    for ids in SEQUENCES[arch]:
        ids = [i % n_vocab for i in ids]
        llm.reset()
        llm.eval(ids)
        lc = np.array(llm.scores[: len(ids)], dtype=np.float32)
        (_, _, rl), = ref.forward([ids])
        d = float(np.max(np.abs(lc.astype(np.float64) - rl)))
        worst = max(worst, d)
        seqs.append({"ids": ids, "llamacpp_logits": [[float(v) for v in row] for row in lc],
                     "reference_logits": [[float(np.float32(v)) for v in row] for row in rl], "max_abs_diff": d,
                     "max_abs_logit": float(np.max(np.abs(rl))),
                     "top1_agree": int(np.sum(np.argmax(lc, 1) == np.argmax(rl, 1)))})
    toks = []
    for s in TOKENIZE_STRINGS:
        for add_bos, special in ((False, True), (True, True), (False, False)):
            toks.append({"text": s, "add_bos": add_bos, "parse_special": special,
                         "ids": llm.tokenize(s.encode(), add_bos=add_bos, special=special)})
    doc = {"source": f"llama-cpp-python {llama_cpp.__version__} (llama.cpp 0c1e57098bba43ac29e6e3b677cdceebdd22334f)",
           "gguf_sha256": sha256_file(path),
           "settings": {"n_threads": 2, "n_ctx": 64, "n_batch": 64, "logits_all": True, "backend": "CPU",
                        "reference": "scripts/gemma_reference.py float64, rounded to f32"},
           "n_vocab": n_vocab, "sequences": seqs, "tokenize": toks}
    if not write:
        print(f"{os.path.basename(path)} (F32 weights, F32 KV cache): max |llama.cpp - reference| = {worst:.3e}; "
              f"top1 agree {[s['top1_agree'] for s in seqs]} of {[len(s['ids']) for s in seqs]}")
        return
    out = path.replace(".gguf", ".llamacpp.json")
    with open(out, "w", encoding="utf-8") as f:
        json.dump(doc, f, ensure_ascii=False)
    print(f"{os.path.basename(out)}: {len(seqs)} sequences, max |llama.cpp - reference| = {worst:.3e}; "
          f"top1 agree {[s['top1_agree'] for s in seqs]} of {[len(s['ids']) for s in seqs]}")


def main(argv=None) -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--gguf-only", action="store_true")
    ap.add_argument("--validate-f32", metavar="DIR", help="also write all-F32 copies into DIR and compare llama.cpp "
                    "(F32 KV cache) with the reference on them: checks the reference graph itself, free of quantization")
    a = ap.parse_args(argv)
    os.makedirs(OUT, exist_ok=True)
    for arch, seed in (("llama", 1234), ("qwen2", 5678)):
        path = os.path.join(OUT, f"tiny-{arch}.gguf")
        n_vocab = write_model(arch, path, seed)
        print(f"{os.path.basename(path)}: {os.path.getsize(path)} bytes, vocab {n_vocab}, sha256 {sha256_file(path)}")
        if not a.gguf_only:
            oracles(arch, path, n_vocab)
        if a.validate_f32:
            os.makedirs(a.validate_f32, exist_ok=True)
            p32 = os.path.join(a.validate_f32, f"tiny-{arch}-f32.gguf")
            write_model(arch, p32, seed, all_f32=True)
            oracles(arch, p32, n_vocab, write=False, f32_kv=True)
    if a.validate_f32:
        p32 = os.path.join(a.validate_f32, "tiny-gemma3-f32.gguf")
        oracles("gemma3", p32, write_tiny_gemma3_f32(p32), write=False, f32_kv=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
