#!/usr/bin/env python3
"""Writes tests/fixtures/gemma/greedy_reference.json: greedy continuations of a few short prompts
that BOTH independent oracles agree on, for the Generator's end-to-end tests.

1. llama.cpp (llama-cpp-python, built by scripts/setup-llamacpp.sh) tokenizes each prompt and
   continues it greedily (its own argmax, free-running).
2. The float64 NumPy reference (scripts/gemma_reference.py, weights dequantized by gguf-py) runs
   prompt + continuation once, teacher-forced; the continuation is kept up to the first token
   where the reference's top-1 differs. A continuation both agree on at every step IS the
   reference's own greedy continuation (greedy decoding is a fixed point of teacher forcing).
   Each step's reference top-1 minus top-2 logit margin is recorded, so a failing test shows
   whether it failed at a near-tie.

Run in the llama-cpp venv (it has numpy; gguf is pure Python):
  .cache/venv-llama/bin/pip install gguf==0.19.0   # once
  .cache/venv-llama/bin/python scripts/make-greedy-reference.py
"""

import hashlib
import json
import os
import sys

import numpy as np
from llama_cpp import Llama

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "scripts"))
from gemma_reference import Model  # noqa: E402

MODEL = os.path.join(ROOT, ".cache/models/gemma-3-270m/gemma-3-270m-q4_k_m.gguf")
OUT = os.path.join(ROOT, "tests/fixtures/gemma/greedy_reference.json")
PROMPTS = [
    "The capital of France is",
    "Once upon a time, in a small village by the sea,",
    "def fibonacci(n):\n",
]
NEW_TOKENS = 16
# A kept step must be no near-tie for the reference either: a smaller margin ends the
# continuation there (our f32 kernels could legitimately pick the other token).
MIN_MARGIN = 0.05


def sha256(path):
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def main():
    llm = Llama(model_path=MODEL, n_ctx=128, n_batch=128, n_threads=2, logits_all=True, verbose=False)
    candidates = []
    for text in PROMPTS:
        ids = llm.tokenize(text.encode(), add_bos=True, special=True)
        llm.reset()
        llm.eval(ids)
        out = []
        for _ in range(NEW_TOKENS):
            nxt = int(np.argmax(llm.scores[llm.n_tokens - 1]))
            out.append(nxt)
            llm.eval([nxt])
        candidates.append((text, ids, out))
    model = Model(MODEL)
    results = model.forward([ids + out for _, ids, out in candidates], logit_positions=[[] for _ in candidates])
    prompts = []
    for (text, ids, out), (top1, margin, _) in zip(candidates, results):
        kept, margins = [], []
        for i, token in enumerate(out):
            pos = len(ids) - 1 + i
            if int(top1[pos]) != token or margin[pos] < MIN_MARGIN:
                break
            kept.append(token)
            margins.append(float(margin[pos]))
        continuation = llm.detokenize(kept).decode("utf-8", errors="replace")
        print(f"{text!r}: kept {len(kept)}/{len(out)} tokens, min margin {min(margins) if margins else None}: {continuation!r}")
        prompts.append({"text": text, "ids": [int(t) for t in ids], "tokens": kept, "margins": margins,
                        "continuation": continuation, "llamacpp_tokens": out})
    with open(OUT, "w") as f:
        json.dump({
            "source": "llama-cpp-python greedy, checked teacher-forced against scripts/gemma_reference.py (float64)",
            "model_sha256": sha256(MODEL),
            "min_margin": MIN_MARGIN,
            "prompts": prompts,
        }, f, indent=1, ensure_ascii=False)
        f.write("\n")


if __name__ == "__main__":
    main()
