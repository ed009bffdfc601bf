#!/usr/bin/env python3
"""Validates the float64 NumPy reference (scripts/gemma_reference.py) against llama.cpp on Gemma 3 270M.

Run in .cache/venv-llama (scripts/setup-llamacpp.sh) after scripts/make-gemma-llamacpp-fixtures.py:
  .cache/venv-llama/bin/python scripts/compare-reference-llamacpp.py
Not part of `npm test`; writes tests/fixtures/gemma/reference_vs_llamacpp.json:
  {"source", "model_sha256",
   "logits": [{"name", "positions", "cosine_min", "cosine_mean", "max_abs_min_pos", "max_abs", "top1_agree",
               "top1_disagree": [{"pos", "ref_top1", "llamacpp_top1", "ref_margin", "llamacpp_margin"}]}],
   "teacher_forced": {"positions", "agree", "fraction", "disagreements": [{"name", "step", "llamacpp", "ref_top1",
                      "ref_margin", "ref_gap" (reference logit of its top1 minus of llama.cpp's token)}]}}
Logits: every position of two prompts (one past the 512-token window), llama.cpp with logits_all.
Teacher-forced: every prompt + llama.cpp's greedy 32-token continuation run through the reference; at each
continuation position the reference's top-1 is compared with llama.cpp's next token (the same check the
runtime is held to in issue 13).
"""

from __future__ import annotations

import json
import os
import sys
import time

import numpy as np

import llama_cpp

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, HERE)
import gemma_reference  # noqa: E402

MODEL = os.path.join(ROOT, ".cache/models/gemma-3-270m/gemma-3-270m-q4_k_m.gguf")
FIX = os.path.join(ROOT, "tests/fixtures/gemma")
LOGIT_PROMPTS = ["capital", "lighthouse_long"]


def main() -> int:
    prompts = {p["name"]: p for p in json.load(open(os.path.join(FIX, "prompts.json")))["prompts"]}
    greedy = json.load(open(os.path.join(FIX, "llamacpp_greedy.json")))
    ref = gemma_reference.Model(MODEL)
    out = {"source": greedy["source"], "model_sha256": greedy["model_sha256"], "logits": []}

    llm = llama_cpp.Llama(model_path=MODEL, n_ctx=1024, n_batch=512, n_ubatch=512, n_threads=2, n_threads_batch=2,
                          logits_all=True, verbose=False, seed=0)
    for name in LOGIT_PROMPTS:
        ids = prompts[name]["ids"]
        llm.reset()
        llm.eval(ids)
        lc = np.array(llm.scores[: len(ids)], dtype=np.float64)
        t0 = time.time()
        (_, _, rl), = ref.forward([ids], None)
        secs = time.time() - t0
        cos = np.sum(lc * rl, 1) / (np.linalg.norm(lc, axis=1) * np.linalg.norm(rl, axis=1))
        absd = np.max(np.abs(lc - rl), 1)
        t_l, t_r = np.argmax(lc, 1), np.argmax(rl, 1)

        def margin(z, i):
            s = np.sort(z[i])
            return float(s[-1] - s[-2])

        dis = [{"pos": int(i), "ref_top1": int(t_r[i]), "llamacpp_top1": int(t_l[i]), "ref_margin": margin(rl, i),
                "llamacpp_margin": margin(lc, i)} for i in np.nonzero(t_l != t_r)[0]]
        out["logits"].append({"name": name, "positions": len(ids), "cosine_min": float(cos.min()),
                              "cosine_mean": float(cos.mean()), "cosine_min_pos": int(cos.argmin()),
                              "cosine_min_past_512": float(cos[512:].min()) if len(ids) > 512 else None,
                              "max_abs": float(absd.max()), "max_abs_logit": float(np.abs(rl).max()),
                              "top1_agree": int(np.sum(t_l == t_r)), "top1_disagree": dis, "reference_seconds": round(secs, 1)})
        print(json.dumps({k: v for k, v in out["logits"][-1].items() if k != "top1_disagree"}), "disagree:", dis)
        del lc, rl
    del llm

    seqs, names = [], []
    for g in greedy["prompts"]:
        p = prompts[g["name"]]
        seqs.append(p["ids"] + g["continuation"][:-1])
        names.append(g["name"])
    t0 = time.time()
    res = ref.forward(seqs, [[] for _ in seqs])
    secs = time.time() - t0
    agree, total, dis = 0, 0, []
    per_prompt = []
    for name, g, (top1, margin, _) in zip(names, greedy["prompts"], res):
        n0 = g["prompt_len"] - 1
        a = 0
        for step, tok in enumerate(g["continuation"]):
            pos = n0 + step
            total += 1
            if int(top1[pos]) == tok:
                agree += 1
                a += 1
            else:
                dis.append({"name": name, "step": step, "llamacpp": tok, "ref_top1": int(top1[pos]),
                            "ref_margin": float(margin[pos]), "llamacpp_margin": g["margin"][step]})
        per_prompt.append({"name": name, "agree": a, "of": len(g["continuation"])})
    # the reference's logit gap between its own top-1 and llama.cpp's token, at each disagreement
    if dis:
        by = {}
        for d in dis:
            by.setdefault(d["name"], []).append(d)
        for i, name in enumerate(names):
            if name not in by:
                continue
            g = greedy["prompts"][i]
            ps = [g["prompt_len"] - 1 + d["step"] for d in by[name]]
            (_, _, rl), = ref.forward([seqs[i]], [ps])
            for d, row in zip(by[name], rl):
                d["ref_gap"] = float(row[d["ref_top1"]] - row[d["llamacpp"]])
    out["teacher_forced"] = {"positions": total, "agree": agree, "fraction": agree / total, "per_prompt": per_prompt,
                             "disagreements": dis, "reference_seconds": round(secs, 1)}
    print(json.dumps(out["teacher_forced"], indent=1))
    with open(os.path.join(FIX, "reference_vs_llamacpp.json"), "w") as f:
        json.dump(out, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
