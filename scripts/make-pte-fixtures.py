#!/usr/bin/env python3
"""Regenerates the ExecuTorch fixtures in tests/fixtures/pte/ (needs torch + executorch:
python/requirements.txt; run with the venv that has them, e.g. /work/venv-et/bin/python, after
`cargo build --release --bin webdelegate-lower`).

    python scripts/make-pte-fixtures.py [--only block|minilm|decoder|gemma] [--out tests/fixtures/pte]

Fixtures:
- block: a small transformer-encoder block (seed 0, hidden 16, 2 heads, seq 5; linear, layer
  norm, GELU, attention by matmul + softmax, residual adds) exported with
  WebDelegatePartitioner -> block.pte + block.ptd (tag "block"), block.program.txt (the
  lowered program's text dump), block.program.json (its JSON), block.json: the input and the
  expected outputs from (1) ExecuTorch's own runtime (`executorch.runtime`, portable kernels)
  running the NON-delegated export of the same module, weights from its own .ptd, (2) eager
  PyTorch, (3) the NumPy reference interpreter running the lowered program.
- minilm: all-MiniLM-L6-v2 (.cache/models/all-MiniLM-L6-v2) as a sentence embedder
  (SentenceEmbedder: BERT + mean pooling + L2 normalisation), dynamic sequence length ->
  minilm.pte (committed, no weights), minilm.ptd.head (the .ptd's header and index,
  committed), minilm.ptd (tag "minilm", ~90 MB, written to target/pte-fixtures/, NOT
  committed: scripts/make-minilm-ptd.py rebuilds it byte for byte from model.safetensors
  without torch),
  minilm.program.txt, minilm.json: tokenised sentences with sentence-transformers'
  embeddings, eager embeddings, ExecuTorch-runtime embeddings (non-delegated export), the
  reference interpreter's.
- tiny_decoder: a Llama-like TinyDecoder (2 layers, GQA, RoPE, SwiGLU, static KV cache of 16
  positions as buffers -> program states), tokens/input_pos of dynamic length ->
  tiny_decoder.pte + .ptd, tiny_decoder.program.txt/.json, tiny_decoder.json: a prefill and
  five greedy decode steps on one session, logits from the portable runtime (non-delegated
  export, custom ops decomposed), eager, and the reference interpreter.
- gemma: Gemma 3 270M (.cache/models/gemma-3-270m, the Q4_K_M GGUF) loaded by transformers
  (dequantized, f32) as webdelegate_executorch.gemma3.Gemma3ForWebDelegate (KV cache of 1024
  positions as states; tokens/input_pos [S], S dynamic; last-row logits) -> gemma.pte
  (committed), gemma.ptd.head (committed), gemma.ptd (tag "gemma", 1.07 GB, to target/;
  scripts/make-gemma-ptd.py rebuilds it torch-free from the GGUF), gemma.program.txt,
  gemma.json: 4 prompts x 32 greedy tokens + a 697-token prompt (past the 512 sliding window)
  x 8, from transformers eager, the reference interpreter and ExecuTorch's portable runtime
  on the non-delegated export (~13 min on 2 cores; --gemma-no-portable skips it).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import shutil
import sys
import tempfile
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "python"))

import numpy as np  # noqa: E402
import torch  # noqa: E402
from executorch.exir import (  # noqa: E402
    EdgeCompileConfig,
    ExecutorchBackendConfig,
    to_edge_transform_and_lower,
)

from webdelegate_executorch import export_to_pte  # noqa: E402
from webdelegate_executorch.reference import run_program  # noqa: E402

MINILM_DIR = REPO / ".cache" / "models" / "all-MiniLM-L6-v2"
SENTENCES = [
    "The quick brown fox jumps over the lazy dog.",
    "ExecuTorch programs run on webdelegate's registry.",
    "Weights stream into GPU buffers by HTTP Range requests.",
    "A short one.",
]


class Block(torch.nn.Module):
    """A transformer-encoder block, embedding-free: post-norm attention and GELU MLP."""

    def __init__(self, hidden: int = 16, heads: int = 2):
        super().__init__()
        self.heads = heads
        self.query = torch.nn.Linear(hidden, hidden)
        self.key = torch.nn.Linear(hidden, hidden)
        self.value = torch.nn.Linear(hidden, hidden)
        self.output = torch.nn.Linear(hidden, hidden)
        self.norm1 = torch.nn.LayerNorm(hidden)
        self.up = torch.nn.Linear(hidden, 4 * hidden)
        self.down = torch.nn.Linear(4 * hidden, hidden)
        self.norm2 = torch.nn.LayerNorm(hidden)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        b, s, h = x.shape
        d = h // self.heads

        def heads(t: torch.Tensor) -> torch.Tensor:
            return t.view(b, s, self.heads, d).transpose(1, 2)

        q, k, v = heads(self.query(x)), heads(self.key(x)), heads(self.value(x))
        scores = torch.matmul(q, k.transpose(-1, -2)) * (d ** -0.5)
        attended = torch.matmul(torch.softmax(scores, dim=-1), v)
        x = self.norm1(x + self.output(attended.transpose(1, 2).reshape(b, s, h)))
        return self.norm2(x + self.down(torch.nn.functional.gelu(self.up(x))))


class TinyDecoder(torch.nn.Module):
    """A Llama-like decoder (RMSNorm, RoPE, grouped-query attention over a static KV cache,
    SwiGLU MLP, untied head), batch-free: ``(tokens i64 [S], input_pos i64 [S]) -> logits
    [S, V]``. Each layer's KV cache is a pair of buffers ``[C, Hkv, D]`` written through
    ``webdelegate::attention_with_cache``: prefill and decode are one method (S symbolic)."""

    def __init__(self, vocab: int = 64, hidden: int = 32, heads: int = 4, kv_heads: int = 2,
                 head_dim: int = 8, ffn: int = 64, layers: int = 2, context: int = 16,
                 rope_base: float = 10000.0, eps: float = 1e-6):
        super().__init__()
        self.heads, self.kv_heads, self.head_dim = heads, kv_heads, head_dim
        self.rope_base = rope_base
        self.embed = torch.nn.Embedding(vocab, hidden)
        self.layers = torch.nn.ModuleList()
        for i in range(layers):
            layer = torch.nn.Module()
            layer.attn_norm = torch.nn.RMSNorm(hidden, eps=eps)
            layer.q = torch.nn.Linear(hidden, heads * head_dim, bias=False)
            layer.k = torch.nn.Linear(hidden, kv_heads * head_dim, bias=False)
            layer.v = torch.nn.Linear(hidden, kv_heads * head_dim, bias=False)
            layer.o = torch.nn.Linear(heads * head_dim, hidden, bias=False)
            layer.mlp_norm = torch.nn.RMSNorm(hidden, eps=eps)
            layer.gate = torch.nn.Linear(hidden, ffn, bias=False)
            layer.up = torch.nn.Linear(hidden, ffn, bias=False)
            layer.down = torch.nn.Linear(ffn, hidden, bias=False)
            layer.register_buffer("k_cache", torch.zeros(context, kv_heads, head_dim))
            layer.register_buffer("v_cache", torch.zeros(context, kv_heads, head_dim))
            self.layers.append(layer)
        self.norm = torch.nn.RMSNorm(hidden, eps=eps)
        self.head = torch.nn.Linear(hidden, vocab, bias=False)

    def forward(self, tokens: torch.Tensor, input_pos: torch.Tensor) -> torch.Tensor:
        from webdelegate_executorch.custom_ops import attention_with_cache, rope

        s = tokens.shape[0]
        h = self.embed(tokens)
        for layer in self.layers:
            x = layer.attn_norm(h)
            q = layer.q(x).view(s, self.heads, self.head_dim)
            k = layer.k(x).view(s, self.kv_heads, self.head_dim)
            v = layer.v(x).view(s, self.kv_heads, self.head_dim)
            q = rope(q, input_pos, self.head_dim, self.rope_base, True)
            k = rope(k, input_pos, self.head_dim, self.rope_base, True)
            o, k_cache, v_cache = attention_with_cache(q, k, v, layer.k_cache, layer.v_cache,
                                                       input_pos, self.head_dim ** -0.5)
            layer.k_cache.copy_(k_cache)
            layer.v_cache.copy_(v_cache)
            h = h + layer.o(o.reshape(s, self.heads * self.head_dim))
            x = layer.mlp_norm(h)
            h = h + layer.down(torch.nn.functional.silu(layer.gate(x)) * layer.up(x))
        return self.head(self.norm(h))


def tensor_json(t: torch.Tensor | np.ndarray) -> dict:
    """A tensor as {dtype, shape, data (flat list)}."""
    a = t.detach().cpu().numpy() if isinstance(t, torch.Tensor) else np.asarray(t)
    return {"dtype": str(a.dtype), "shape": list(a.shape), "data": a.reshape(-1).tolist()}


def executorch_oracle(module: torch.nn.Module, inputs: tuple, work: Path, name: str,
                      dynamic_shapes=None) -> list:
    """ExecuTorch itself: the NON-delegated export of ``module`` (portable kernels), weights
    in its own .ptd (``external_constants=True``), run by ``executorch.runtime``."""
    from executorch.runtime import Runtime

    with torch.no_grad():
        exported = torch.export.export(module, inputs, dynamic_shapes=dynamic_shapes,
                                       strict=False)
    edge = to_edge_transform_and_lower(exported,
                                       compile_config=EdgeCompileConfig(_check_ir_validity=False))
    program = edge.to_executorch(ExecutorchBackendConfig(external_constants=True))
    pte = work / f"{name}-portable.pte"
    with open(pte, "wb") as f:
        program.write_to_file(f)
    program.write_tensor_data_to_file(str(work))
    ptds = sorted(work.glob("*.ptd"))
    if len(ptds) != 1:
        raise RuntimeError(f"expected one .ptd from the portable export, got {ptds}")
    runtime = Runtime.get()
    loaded = runtime.load_program(pte, data_path=ptds[0])
    method = loaded.load_method("forward")
    return [o.clone() for o in method.execute(list(inputs))]


def sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def make_block(out: Path) -> None:
    torch.manual_seed(0)
    block = Block().eval()
    x = torch.randn(1, 5, 16)
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        result = export_to_pte(block, (x,), tmp / "delegated", "block", external_tag="block",
                               dump_dir=tmp / "dump", strict=True)
        shutil.copy(result.pte_path, out / "block.pte")
        shutil.copy(result.ptd_paths["block"], out / "block.ptd")
        program = json.loads((tmp / "dump" / "program0.json").read_text())
        shutil.copy(tmp / "dump" / "program0.txt", out / "block.program.txt")
        (out / "block.program.json").write_text(json.dumps(program, indent=1) + "\n")
        (tmp / "portable").mkdir()
        oracle = executorch_oracle(block, (x,), tmp / "portable", "block")
    with torch.no_grad():
        eager = block(x)
    weights = {k: v.detach().numpy() for k, v in block.state_dict().items()}
    (reference,) = run_program(program, weights, [x.numpy()])
    doc = {
        "description": "tests/fixtures/pte/block.pte + block.ptd (scripts/make-pte-fixtures.py)",
        "model": "Block(hidden=16, heads=2), torch.manual_seed(0); input torch.randn(1, 5, 16)",
        "backend_id": "WebDelegateBackend",
        "ptd_tag": "block",
        "named_data_keys": sorted(weights),
        "inputs": [tensor_json(x)],
        "expected": {
            "executorch_portable": [tensor_json(t) for t in oracle],
            "eager": [tensor_json(eager)],
            "reference_interpreter": [tensor_json(reference)],
        },
        "how": {
            "executorch_portable": "executorch.runtime (portable kernels) running the "
                                   "non-delegated export of the same module, weights from its "
                                   "own .ptd (ExecutorchBackendConfig(external_constants=True))",
            "eager": "the torch module in eval mode",
            "reference_interpreter": "webdelegate_executorch.reference.run_program on the "
                                     "lowered program (block.program.json) with the module's "
                                     "weights",
        },
        "max_abs_diff": {
            "portable_vs_eager": float((oracle[0] - eager).abs().max()),
            "reference_vs_eager": float(np.abs(reference - eager.numpy()).max()),
        },
        "sha256": {"block.pte": sha256(out / "block.pte"), "block.ptd": sha256(out / "block.ptd")},
    }
    (out / "block.json").write_text(json.dumps(doc, indent=1) + "\n")
    print(f"block: partitions={result.partitions} outside={result.unsupported_ops} "
          f"diffs={doc['max_abs_diff']}")


def make_minilm(out: Path, ptd_dir: Path) -> None:
    from sentence_transformers import SentenceTransformer
    from transformers import AutoModel, AutoTokenizer

    from webdelegate_executorch.sentence import SentenceEmbedder

    bert = AutoModel.from_pretrained(MINILM_DIR, attn_implementation="eager").eval()
    embedder = SentenceEmbedder(bert).eval()
    tokenizer = AutoTokenizer.from_pretrained(MINILM_DIR)
    seq = torch.export.Dim("seq", min=2, max=512)
    dynamic = ({1: seq}, {1: seq})
    example = tokenizer(SENTENCES[0], return_tensors="pt")
    example_inputs = (example["input_ids"], example["attention_mask"])
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        result = export_to_pte(embedder, example_inputs, tmp / "delegated", "minilm",
                               dynamic_shapes=dynamic, external_tag="minilm",
                               dump_dir=tmp / "dump")
        shutil.copy(result.pte_path, out / "minilm.pte")
        ptd_dir.mkdir(parents=True, exist_ok=True)
        shutil.copy(result.ptd_paths["minilm"], ptd_dir / "minilm.ptd")
        # The .ptd's head (header + flatbuffer index, up to the segment base offset) is
        # committed; scripts/make-minilm-ptd.py adds the tensors from model.safetensors.
        ptd = (ptd_dir / "minilm.ptd").read_bytes()
        segment_base = int.from_bytes(ptd[32:40], "little")  # FH01 segment_base_offset
        (out / "minilm.ptd.head").write_bytes(ptd[:segment_base])
        program = json.loads((tmp / "dump" / "program0.json").read_text())
        shutil.copy(tmp / "dump" / "program0.txt", out / "minilm.program.txt")
        (tmp / "portable").mkdir()
        # The oracle's .pte is exported once (dynamic seq) and run per sentence.
        portable = []
        from executorch.runtime import Runtime
        with torch.no_grad():
            exported = torch.export.export(embedder, example_inputs, dynamic_shapes=dynamic,
                                           strict=False)
        edge = to_edge_transform_and_lower(
            exported, compile_config=EdgeCompileConfig(_check_ir_validity=False))
        et = edge.to_executorch(ExecutorchBackendConfig(external_constants=True))
        with open(tmp / "portable" / "minilm-portable.pte", "wb") as f:
            et.write_to_file(f)
        et.write_tensor_data_to_file(str(tmp / "portable"))
        (ptd,) = sorted((tmp / "portable").glob("*.ptd"))
        method = Runtime.get().load_program(tmp / "portable" / "minilm-portable.pte",
                                            data_path=ptd).load_method("forward")
        tokens = [tokenizer(s, return_tensors="pt") for s in SENTENCES]
        for t in tokens:
            portable.append(method.execute([t["input_ids"], t["attention_mask"]])[0].clone())
    st = SentenceTransformer(str(MINILM_DIR), device="cpu")
    st_embeddings = st.encode(SENTENCES, convert_to_numpy=True, normalize_embeddings=False)
    weights = {k: v.detach().numpy() for k, v in embedder.state_dict().items()}
    cases = []
    for i, (sentence, t) in enumerate(zip(SENTENCES, tokens)):
        with torch.no_grad():
            eager = embedder(t["input_ids"], t["attention_mask"])[0]
        (reference,) = run_program(program, weights,
                                   [t["input_ids"].numpy(), t["attention_mask"].numpy()])
        st_e = st_embeddings[i]

        def cos(a, b):
            a, b = np.asarray(a, np.float64).ravel(), np.asarray(b, np.float64).ravel()
            return float(a @ b / np.linalg.norm(a) / np.linalg.norm(b))

        cases.append({
            "sentence": sentence,
            "input_ids": tensor_json(t["input_ids"]),
            "attention_mask": tensor_json(t["attention_mask"]),
            "expected": {
                "sentence_transformers": tensor_json(st_e[None, :]),
                "executorch_portable": tensor_json(portable[i]),
                "eager": tensor_json(eager[None, :]),
                "reference_interpreter": tensor_json(reference),
            },
            "cosine_vs_sentence_transformers": {
                "executorch_portable": cos(portable[i], st_e),
                "eager": cos(eager, st_e),
                "reference_interpreter": cos(reference, st_e),
            },
        })
    doc = {
        "description": "tests/fixtures/pte/minilm.pte; weights minilm.ptd (not committed: "
                       "scripts/make-minilm-ptd.py rebuilds it from model.safetensors)",
        "model": "all-MiniLM-L6-v2 as SentenceEmbedder (mean pooling + L2 normalize); inputs "
                 "input_ids, attention_mask i64 [1, seq], seq dynamic (2..512); output [1, 384]",
        "backend_id": "WebDelegateBackend",
        "ptd_tag": "minilm",
        "partitions": result.partitions,
        "ops_outside_delegate": result.unsupported_ops,
        "kernel_ops_in_pte": list(result.kernel_ops),
        "named_data_keys": sorted(p["key"] for p in program["params"]),
        "cases": cases,
        "how": {
            "sentence_transformers": "SentenceTransformer(model dir).encode(sentences) (its own "
                                     "tokenizer, pooling and Normalize; normalized by the model)",
            "executorch_portable": "executorch.runtime (portable kernels) on the non-delegated "
                                   "export of the same SentenceEmbedder, weights from its .ptd",
            "eager": "SentenceEmbedder in eval mode (transformers, attn_implementation='eager')",
            "reference_interpreter": "webdelegate_executorch.reference.run_program on the "
                                     "lowered program with the checkpoint's weights",
        },
        "sha256": {"minilm.pte": sha256(out / "minilm.pte"),
                   "minilm.ptd": sha256(ptd_dir / "minilm.ptd")},
        "ptd_bytes": (ptd_dir / "minilm.ptd").stat().st_size,
    }
    (out / "minilm.json").write_text(json.dumps(doc, indent=1) + "\n")
    worst = min(min(c["cosine_vs_sentence_transformers"].values()) for c in cases)
    print(f"minilm: partitions={result.partitions} outside={result.unsupported_ops} "
          f"kernels={result.kernel_ops} min cosine vs sentence-transformers={worst:.7f}")


def make_decoder(out: Path) -> None:
    """tiny_decoder.pte/.ptd: prefill + greedy decode from one method, KV cache as state."""
    from executorch.runtime import Runtime

    torch.manual_seed(0)
    model = TinyDecoder().eval()
    # Weights initialised away from PyTorch's tiny defaults so the logits are not flat.
    with torch.no_grad():
        for name, p in model.named_parameters():
            if "norm" in name:
                p.copy_(1.0 + 0.1 * torch.randn_like(p))
    pristine = {k: v.clone() for k, v in model.state_dict().items()}
    seq = torch.export.Dim("seq", min=1, max=16)
    dynamic = ({0: seq}, {0: seq})
    prompt = torch.tensor([3, 17, 42, 5], dtype=torch.long)
    example = (prompt, torch.arange(4))
    steps = 6
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        result = export_to_pte(model, example, tmp / "delegated", "tiny_decoder",
                               dynamic_shapes=dynamic, external_tag="tiny_decoder",
                               dump_dir=tmp / "dump")
        model.load_state_dict(pristine)  # export ran the model: clear its caches
        shutil.copy(result.pte_path, out / "tiny_decoder.pte")
        shutil.copy(result.ptd_paths["tiny_decoder"], out / "tiny_decoder.ptd")
        program = json.loads((tmp / "dump" / "program0.json").read_text())
        shutil.copy(tmp / "dump" / "program0.txt", out / "tiny_decoder.program.txt")
        (out / "tiny_decoder.program.json").write_text(json.dumps(program, indent=1) + "\n")

        # ExecuTorch's own runtime on the non-delegated export (custom ops decomposed into
        # index_put / matmul / softmax / cos / sin; the caches are the method's mutable
        # buffers, kept across execute calls).
        (tmp / "portable").mkdir()
        with torch.no_grad():
            exported = torch.export.export(model, example, dynamic_shapes=dynamic,
                                           strict=False)
        model.load_state_dict(pristine)
        edge = to_edge_transform_and_lower(
            exported, compile_config=EdgeCompileConfig(_check_ir_validity=False))
        et = edge.to_executorch(ExecutorchBackendConfig(external_constants=True))
        with open(tmp / "portable" / "portable.pte", "wb") as f:
            et.write_to_file(f)
        et.write_tensor_data_to_file(str(tmp / "portable"))
        (ptd,) = sorted((tmp / "portable").glob("*.ptd"))
        method = Runtime.get().load_program(tmp / "portable" / "portable.pte",
                                            data_path=ptd).load_method("forward")

        def greedy(run):
            calls, tokens = [], prompt.clone()
            pos = torch.arange(len(prompt))
            for _ in range(steps):
                logits = run(tokens, pos)
                calls.append({"tokens": tokens.tolist(), "input_pos": pos.tolist(),
                              "logits": logits})
                nxt = int(np.argmax(np.asarray(logits)[-1]))
                tokens = torch.tensor([nxt], dtype=torch.long)
                pos = torch.tensor([int(pos[-1]) + 1], dtype=torch.long)
            return calls

        portable = greedy(lambda t, p: method.execute([t, p])[0].clone().numpy())
    with torch.no_grad():
        eager = greedy(lambda t, p: model(t, p).numpy())
    weights = {k: v.detach().numpy() for k, v in pristine.items()}
    states: dict = {}
    reference = greedy(lambda t, p: run_program(program, weights, [t.numpy(), p.numpy()],
                                                states)[0])

    def chosen(calls):
        return [int(np.argmax(c["logits"][-1])) for c in calls]

    doc = {
        "description": "tests/fixtures/pte/tiny_decoder.pte + .ptd "
                       "(scripts/make-pte-fixtures.py)",
        "model": "TinyDecoder (Llama-like: 2 layers, hidden 32, 4 query / 2 KV heads of 8, "
                 "SwiGLU 64, vocab 64, context 16, RoPE neox base 1e4), torch.manual_seed(0); "
                 "inputs tokens i64 [S], input_pos i64 [S], S dynamic 1..16; output logits "
                 "[S, 64]; KV caches: program states",
        "backend_id": "WebDelegateBackend",
        "ptd_tag": "tiny_decoder",
        "partitions": result.partitions,
        "ops_outside_delegate": result.unsupported_ops,
        "kernel_ops_in_pte": list(result.kernel_ops),
        "named_data_keys": sorted(p["key"] for p in program["params"]),
        "state_names": [program["tensors"][t]["name"] for t in program["states"]],
        "calls": [
            {"tokens": e["tokens"], "input_pos": e["input_pos"],
             "expected": {"executorch_portable": tensor_json(pt["logits"]),
                          "eager": tensor_json(e["logits"]),
                          "reference_interpreter": tensor_json(r["logits"])}}
            for e, pt, r in zip(eager, portable, reference)
        ],
        "greedy_tokens": {"executorch_portable": chosen(portable), "eager": chosen(eager),
                          "reference_interpreter": chosen(reference)},
        "max_abs_diff": {
            "portable_vs_eager": max(float(np.abs(a["logits"] - b["logits"]).max())
                                     for a, b in zip(portable, eager)),
            "reference_vs_eager": max(float(np.abs(a["logits"] - b["logits"]).max())
                                      for a, b in zip(reference, eager)),
        },
        "how": "calls run in order on ONE loaded method / session (prefill of 4 tokens at "
               "positions 0..3, then 5 decode steps of 1 token, each the argmax of the "
               "previous call's last row); the caches persist between calls",
        "sha256": {"tiny_decoder.pte": sha256(out / "tiny_decoder.pte"),
                   "tiny_decoder.ptd": sha256(out / "tiny_decoder.ptd")},
    }
    (out / "tiny_decoder.json").write_text(json.dumps(doc, indent=1) + "\n")
    print(f"tiny_decoder: partitions={result.partitions} outside={result.unsupported_ops} "
          f"kernels={result.kernel_ops} greedy={doc['greedy_tokens']} "
          f"diffs={doc['max_abs_diff']}")


GEMMA_DIR = REPO / ".cache" / "models" / "gemma-3-270m"
GEMMA_GGUF = "gemma-3-270m-q4_k_m.gguf"
GEMMA_PROMPTS = [
    "The capital of France is",
    "Once upon a time,",
    "def fibonacci(n):",
    "The three primary colors are",
]
#: A prompt longer than Gemma 3's 512-position sliding window, so its sliding layers drop
#: early positions (the window is exercised): the numbers 1 to 160 (697 tokens with BOS: digits are single tokens).
GEMMA_LONG_PROMPT = "Count with me: " + ", ".join(str(i) for i in range(1, 161)) + ","


def make_gemma(out: Path, ptd_dir: Path, new_tokens: int = 32, long_new_tokens: int = 8,
               max_context: int = 1024, portable: bool = True) -> None:
    """gemma.pte (+ gemma.ptd to ptd_dir, its head committed as gemma.ptd.head): Gemma 3
    270M loaded by transformers from the GGUF (dequantized to f32), prefill + decode from one
    method, KV cache as program states; gemma.json: prompts, token ids and greedy
    continuations from transformers eager, the reference interpreter on the lowered program,
    and ExecuTorch's portable runtime on the non-delegated export."""
    import time

    from transformers import AutoModelForCausalLM, AutoTokenizer, DynamicCache

    from webdelegate_executorch.gemma3 import Gemma3ForWebDelegate

    tokenizer = AutoTokenizer.from_pretrained(GEMMA_DIR, gguf_file=GEMMA_GGUF)
    hf = AutoModelForCausalLM.from_pretrained(GEMMA_DIR, gguf_file=GEMMA_GGUF,
                                              dtype=torch.float32,
                                              attn_implementation="eager").eval()
    prompts = [(p, new_tokens) for p in GEMMA_PROMPTS] + [(GEMMA_LONG_PROMPT, long_new_tokens)]
    prompt_ids = [tokenizer(p, return_tensors="pt")["input_ids"][0] for p, _ in prompts]
    for (p, n), ids in zip(prompts, prompt_ids):
        if len(ids) + n > max_context:
            raise ValueError(f"prompt of {len(ids)} tokens + {n} exceeds {max_context}")

    def eager_greedy(ids: torch.Tensor, n: int) -> list:
        """transformers' own forward with its DynamicCache, argmax each step (generate's
        greedy search, without its stop on EOS)."""
        cache = DynamicCache(config=hf.config)
        chosen, step = [], ids[None]
        with torch.no_grad():
            for _ in range(n):
                logits = hf(input_ids=step, cache=cache, use_cache=True).logits[0, -1]
                chosen.append(int(torch.argmax(logits)))
                step = torch.tensor([[chosen[-1]]])
        return chosen

    eager = [eager_greedy(ids, n) for ids, (_, n) in zip(prompt_ids, prompts)]
    generated = []
    with torch.no_grad():
        for ids, (_, n) in zip(prompt_ids, prompts):
            g = hf.generate(ids[None], max_new_tokens=n, do_sample=False)[0, len(ids):]
            generated.append(g.tolist())
    print("gemma: eager greedy done")

    model = Gemma3ForWebDelegate(hf, max_context=max_context).eval()
    weights = {k: v.detach().numpy() for k, v in model.named_parameters()}
    seq = torch.export.Dim("seq", min=1, max=max_context)
    dynamic = ({0: seq}, {0: seq})
    example = (prompt_ids[0], torch.arange(len(prompt_ids[0])))

    def greedy(run, ids: torch.Tensor, n: int) -> list:
        chosen, tokens, pos = [], ids, torch.arange(len(ids))
        for _ in range(n):
            logits = np.asarray(run(tokens, pos))
            chosen.append(int(np.argmax(logits[-1])))
            tokens = torch.tensor([chosen[-1]], dtype=torch.long)
            pos = torch.tensor([int(pos[-1]) + 1], dtype=torch.long)
        return chosen

    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        started = time.time()
        result = export_to_pte(model, example, tmp / "delegated", "gemma",
                               dynamic_shapes=dynamic, external_tag="gemma",
                               dump_dir=tmp / "dump", strict=True)
        export_seconds = time.time() - started
        model.reset_cache()
        shutil.copy(result.pte_path, out / "gemma.pte")
        ptd_dir.mkdir(parents=True, exist_ok=True)
        shutil.copy(result.ptd_paths["gemma"], ptd_dir / "gemma.ptd")
        with open(ptd_dir / "gemma.ptd", "rb") as f:
            head = f.read(64)
            segment_base = int.from_bytes(head[32:40], "little")  # FH01 segment_base_offset
            f.seek(0)
            (out / "gemma.ptd.head").write_bytes(f.read(segment_base))
        program = json.loads((tmp / "dump" / "program0.json").read_text())
        shutil.copy(tmp / "dump" / "program0.txt", out / "gemma.program.txt")
        print(f"gemma: exported in {export_seconds:.0f} s")

        reference = []
        for ids, (_, n) in zip(prompt_ids, prompts):
            states: dict = {}
            reference.append(greedy(
                lambda t, p: run_program(program, weights, [t.numpy(), p.numpy()], states)[0],
                ids, n))
        print("gemma: reference interpreter done")

        portable_tokens = None
        portable_seconds = None
        if portable:
            from executorch.runtime import Runtime

            (tmp / "portable").mkdir()
            started = time.time()
            with torch.no_grad():
                exported = torch.export.export(model, example, dynamic_shapes=dynamic,
                                               strict=False)
            model.reset_cache()
            edge = to_edge_transform_and_lower(
                exported, compile_config=EdgeCompileConfig(_check_ir_validity=False))
            et = edge.to_executorch(ExecutorchBackendConfig(external_constants=True))
            with open(tmp / "portable" / "portable.pte", "wb") as f:
                et.write_to_file(f)
            et.write_tensor_data_to_file(str(tmp / "portable"))
            del exported, edge, et
            (ptd,) = sorted((tmp / "portable").glob("*.ptd"))
            method = Runtime.get().load_program(tmp / "portable" / "portable.pte",
                                                data_path=ptd).load_method("forward")
            portable_tokens = [
                greedy(lambda t, p: method.execute([t, p])[0].clone().numpy(), ids, n)
                for ids, (_, n) in zip(prompt_ids, prompts)]
            portable_seconds = time.time() - started
            print(f"gemma: portable runtime done in {portable_seconds:.0f} s")

    def agreement(other: list | None) -> dict | None:
        if other is None:
            return None
        equal = sum(a == b for e, o in zip(eager, other) for a, b in zip(e, o))
        total = sum(len(e) for e in eager)
        return {"equal": equal, "total": total, "fraction": equal / total}

    cases = []
    for i, ((prompt, n), ids) in enumerate(zip(prompts, prompt_ids)):
        continuation = {"transformers_eager": eager[i], "reference_interpreter": reference[i]}
        if portable_tokens is not None:
            continuation["executorch_portable"] = portable_tokens[i]
        cases.append({
            "prompt": prompt,
            "prompt_ids": ids.tolist(),
            "new_tokens": n,
            "greedy": continuation,
            "transformers_generate": generated[i],
            "text": {k: tokenizer.decode(v) for k, v in continuation.items()},
        })
    ptd_path = ptd_dir / "gemma.ptd"
    doc = {
        "description": "tests/fixtures/pte/gemma.pte; weights gemma.ptd (~1.07 GB f32, not "
                       "committed: scripts/make-gemma-ptd.py rebuilds it from the GGUF with "
                       "gguf-py and tests/fixtures/pte/gemma.ptd.head)",
        "model": f"Gemma 3 270M ({GEMMA_DIR.name}/{GEMMA_GGUF}) loaded by transformers "
                 "(AutoModelForCausalLM.from_pretrained(dir, gguf_file=...), dequantized, "
                 "f32) as webdelegate_executorch.gemma3.Gemma3ForWebDelegate",
        "backend_id": "WebDelegateBackend",
        "ptd_tag": "gemma",
        "signature": {
            "inputs": [{"name": "tokens", "dtype": "int64", "shape": ["S"]},
                       {"name": "input_pos", "dtype": "int64", "shape": ["S"]}],
            "outputs": [{"name": "logits", "dtype": "float32",
                         "shape": [1, int(hf.config.vocab_size)],
                         "note": "the last row's logits (the next token's)"}],
            "dynamic": {"S": [1, max_context]},
            "max_context": max_context,
            "states": "per layer k_cache and v_cache f32 [max_context, 1, 256]",
        },
        "weights_dtype": "float32 (exactly transformers' parameters: the dequantized GGUF "
                         "tensors, norm weights minus 1 as transformers' GGUF loader stores "
                         "them; the program adds the 1 back with a Scale op, as Gemma3RMSNorm "
                         "does)",
        "partitions": result.partitions,
        "ops_outside_delegate": result.unsupported_ops,
        "kernel_ops_in_pte": list(result.kernel_ops),
        "named_data_keys": sorted(p["key"] for p in program["params"]),
        "state_names": [program["tensors"][t]["name"] for t in program["states"]],
        "program_ops": len(program["ops"]),
        "cases": cases,
        "greedy_agreement_with_transformers": {
            "reference_interpreter": agreement(reference),
            "executorch_portable": agreement(portable_tokens),
            "transformers_generate": agreement(generated),
        },
        "how": {
            "transformers_eager": "Gemma3ForCausalLM forward with its DynamicCache, f32, "
                                  "attn_implementation='eager'; argmax of each step's last "
                                  "row, prompt as prefill then one token per step (no stop at "
                                  "EOS)",
            "transformers_generate": "model.generate(do_sample=False, max_new_tokens=n) "
                                     "(stops at EOS)",
            "reference_interpreter": "webdelegate_executorch.reference.run_program on the "
                                     "lowered program, one session (states) per prompt",
            "executorch_portable": "executorch.runtime (portable kernels) on the "
                                   "NON-delegated export of the same module (custom ops "
                                   "decomposed), weights from its own .ptd; one loaded "
                                   "method for all prompts (positions restart at 0)",
            "agreement": "position-wise equality of the greedy tokens with transformers_eager",
        },
        "export_seconds": round(export_seconds, 1),
        "portable_seconds": None if portable_seconds is None else round(portable_seconds, 1),
        "sha256": {"gemma.pte": sha256(out / "gemma.pte"), "gemma.ptd": sha256(ptd_path)},
        "ptd_bytes": ptd_path.stat().st_size,
        "pte_bytes": (out / "gemma.pte").stat().st_size,
    }
    (out / "gemma.json").write_text(json.dumps(doc, indent=1) + "\n")
    print(f"gemma: partitions={result.partitions} outside={result.unsupported_ops} "
          f"agreement={doc['greedy_agreement_with_transformers']}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--only", choices=["block", "minilm", "decoder", "gemma"])
    parser.add_argument("--gemma-no-portable", action="store_true",
                        help="skip ExecuTorch's portable runtime for Gemma (minutes)")
    parser.add_argument("--out", default=str(REPO / "tests" / "fixtures" / "pte"))
    parser.add_argument("--ptd-dir", default=str(REPO / "target" / "pte-fixtures"),
                        help="where the uncommitted minilm.ptd and gemma.ptd go")
    args = parser.parse_args()
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    if args.only in (None, "block"):
        make_block(out)
    if args.only in (None, "minilm"):
        make_minilm(out, Path(args.ptd_dir))
    if args.only in (None, "decoder"):
        make_decoder(out)
    if args.only in (None, "gemma"):
        make_gemma(out, Path(args.ptd_dir), portable=not args.gemma_no_portable)


if __name__ == "__main__":
    main()
