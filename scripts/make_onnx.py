#!/usr/bin/env python3
"""Builds an ONNX model of all-MiniLM-L6-v2 sentence embeddings from the same safetensors the
runtime streams, for the side-by-side benchmark against onnxruntime-web.

The graph is written with the `onnx` package's helpers (no PyTorch export): BERT embeddings,
encoder layers (opset 17 LayerNormalization, GELU in its exact erf form), masked mean pooling and
L2 normalisation inside the graph, so ONNX Runtime computes exactly what webdelegate computes.
Inputs: input_ids int64 [batch, seq], attention_mask int64 [batch, seq]; output:
sentence_embedding float32 [batch, hidden]. With --check, runs it under onnxruntime (Python) on
the reference sentences and compares with tests/fixtures/minilm/reference.json.

Usage:
  .cache/venv/bin/pip install numpy==2.4.6 safetensors==0.8.0 onnx==1.23.2 onnxruntime==1.32.0 tokenizers==0.23.3
  .cache/venv/bin/python scripts/make_onnx.py .cache/models/all-MiniLM-L6-v2 [--check]
"""

import base64
import json
import math
import sys
from pathlib import Path

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper
from safetensors.numpy import load_file

OPSET = 17


class Graph:
    def __init__(self, weights):
        self.weights = weights
        self.nodes, self.inits, self.count = [], {}, 0

    def name(self, hint):
        self.count += 1
        return f"{hint}_{self.count}"

    def init(self, name, array):
        if name not in self.inits:
            self.inits[name] = numpy_helper.from_array(np.asarray(array), name)
        return name

    def w(self, key):
        return self.init(key, self.weights[key].astype(np.float32))

    def const(self, hint, value, dtype=np.float32):
        return self.init(self.name(hint), np.array(value, dtype=dtype))

    def op(self, op_type, inputs, hint, **attrs):
        out = self.name(hint)
        self.nodes.append(helper.make_node(op_type, inputs, [out], name=out, **attrs))
        return out

    def linear(self, x, prefix):
        # PyTorch Linear: x @ W^T + b; store W^T as an initializer so MatMul needs no Transpose.
        wt = self.init(prefix + ".weight.T", self.weights[prefix + ".weight"].astype(np.float32).T.copy())
        return self.op("Add", [self.op("MatMul", [x, wt], "mm"), self.w(prefix + ".bias")], "linear")

    def layer_norm(self, x, prefix, eps):
        return self.op("LayerNormalization", [x, self.w(prefix + ".weight"), self.w(prefix + ".bias")], "ln", axis=-1, epsilon=eps)

    def gelu(self, x):
        scaled = self.op("Div", [x, self.const("sqrt2", math.sqrt(2.0))], "gelu_div")
        erf = self.op("Erf", [scaled], "erf")
        one_plus = self.op("Add", [erf, self.const("one", 1.0)], "gelu_add")
        half_x = self.op("Mul", [x, self.const("half", 0.5)], "gelu_half")
        return self.op("Mul", [half_x, one_plus], "gelu")


def build(model_dir: Path) -> onnx.ModelProto:
    config = json.loads((model_dir / "config.json").read_text())
    weights = load_file(str(model_dir / "model.safetensors"))
    hidden, heads = config["hidden_size"], config["num_attention_heads"]
    head_dim, eps = hidden // heads, config["layer_norm_eps"]
    g = Graph(weights)

    ids, mask = "input_ids", "attention_mask"
    shape = g.op("Shape", [ids], "shape")
    seq = g.op("Gather", [shape, g.const("one_i", 1, np.int64)], "seq", axis=0)
    positions = g.op("Range", [g.const("zero_i", 0, np.int64), seq, g.const("step", 1, np.int64)], "positions")
    word = g.op("Gather", [g.w("embeddings.word_embeddings.weight"), ids], "word", axis=0)
    pos = g.op("Gather", [g.w("embeddings.position_embeddings.weight"), positions], "pos", axis=0)
    type0 = g.init("token_type0", weights["embeddings.token_type_embeddings.weight"][0].astype(np.float32))
    x = g.op("Add", [g.op("Add", [word, pos], "emb"), type0], "emb_type")
    x = g.layer_norm(x, "embeddings.LayerNorm", eps)

    mask_f = g.op("Cast", [mask], "mask_f", to=TensorProto.FLOAT)
    # The additive mask and the score scaling as a PyTorch export of Hugging Face's BertModel
    # writes them (mask[:, None, None, :] cast to float, (1 - mask) * -10000; scores / sqrt(head_dim)
    # after Q K^T): the patterns ONNX Runtime's attention fusion (in the session and in
    # onnxruntime.transformers.optimizer) matches.
    mask_u1 = g.op("Unsqueeze", [mask, g.const("axis1u", [1], np.int64)], "mask_u1")
    mask_u2 = g.op("Unsqueeze", [mask_u1, g.const("axis2u", [2], np.int64)], "mask_u2")
    mask4_f = g.op("Cast", [mask_u2], "mask4_f", to=TensorProto.FLOAT)
    mask4 = g.op("Mul", [g.op("Sub", [g.const("one_m", 1.0), mask4_f], "mask_sub"), g.const("big", -10000.0)], "mask4")
    split_shape = g.const("split_shape", [0, 0, heads, head_dim], np.int64)
    merge_shape = g.const("merge_shape", [0, 0, hidden], np.int64)
    sqrt_d = g.const("sqrt_d", math.sqrt(head_dim))

    for layer in range(config["num_hidden_layers"]):
        p = f"encoder.layer.{layer}."
        def heads_of(t, transpose):
            return g.op("Transpose", [g.op("Reshape", [t, split_shape], "split")], "heads", perm=transpose)
        q = heads_of(g.linear(x, p + "attention.self.query"), [0, 2, 1, 3])
        k = heads_of(g.linear(x, p + "attention.self.key"), [0, 2, 3, 1])
        v = heads_of(g.linear(x, p + "attention.self.value"), [0, 2, 1, 3])
        scores = g.op("Div", [g.op("MatMul", [q, k], "scores"), sqrt_d], "scaled")
        scores = g.op("Add", [scores, mask4], "masked")
        probs = g.op("Softmax", [scores], "probs", axis=-1)
        context = g.op("Transpose", [g.op("MatMul", [probs, v], "context")], "context_t", perm=[0, 2, 1, 3])
        context = g.op("Reshape", [context, merge_shape], "merged")
        attn = g.linear(context, p + "attention.output.dense")
        x = g.layer_norm(g.op("Add", [attn, x], "res1"), p + "attention.output.LayerNorm", eps)
        inter = g.gelu(g.linear(x, p + "intermediate.dense"))
        out = g.linear(inter, p + "output.dense")
        x = g.layer_norm(g.op("Add", [out, x], "res2"), p + "output.LayerNorm", eps)

    mask3 = g.op("Unsqueeze", [mask_f, g.const("axis2", [2], np.int64)], "mask3")
    summed = g.op("ReduceSum", [g.op("Mul", [x, mask3], "masked_x"), g.const("axis1", [1], np.int64)], "sum", keepdims=0)
    count = g.op("ReduceSum", [mask3, g.const("axis1b", [1], np.int64)], "count", keepdims=0)
    pooled = g.op("Div", [summed, g.op("Max", [count, g.const("min_count", 1e-9)], "count_clamped")], "pooled")
    norm = g.op("ReduceL2", [pooled], "norm", axes=[-1], keepdims=1)  # axes is an attribute until opset 18
    norm = g.op("Max", [norm, g.const("eps", 1e-12)], "norm_clamped")
    g.nodes.append(helper.make_node("Div", [pooled, norm], ["sentence_embedding"], name="sentence_embedding"))

    graph = helper.make_graph(
        g.nodes,
        "all-MiniLM-L6-v2-sentence-embedding",
        [
            helper.make_tensor_value_info(ids, TensorProto.INT64, ["batch", "seq"]),
            helper.make_tensor_value_info(mask, TensorProto.INT64, ["batch", "seq"]),
        ],
        [helper.make_tensor_value_info("sentence_embedding", TensorProto.FLOAT, ["batch", hidden])],
        list(g.inits.values()),
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", OPSET)], producer_name="webdelegate")
    model.ir_version = 8
    onnx.checker.check_model(model)
    return model


def check(model_path: Path, model_dir: Path):
    import onnxruntime as ort
    from tokenizers import Tokenizer

    fixture = json.loads((Path(__file__).resolve().parent.parent / "tests/fixtures/minilm/reference.json").read_text())
    reference = np.frombuffer(base64.b64decode(fixture["embeddings_f32_le_base64"]), "<f4").reshape(-1, fixture["dim"])
    session = ort.InferenceSession(str(model_path), providers=["CPUExecutionProvider"])
    worst_cos, worst_abs = 1.0, 0.0
    for ids, expected in zip(fixture["token_ids"], reference):
        ids = np.array([ids], dtype=np.int64)
        (got,) = session.run(None, {"input_ids": ids, "attention_mask": np.ones_like(ids)})
        worst_cos = min(worst_cos, float(got[0] @ expected / np.linalg.norm(got[0]) / np.linalg.norm(expected)))
        worst_abs = max(worst_abs, float(np.abs(got[0] - expected).max()))
    # A padded batch must give the same rows as single sentences.
    tokenizer = Tokenizer.from_file(str(model_dir / "tokenizer.json"))
    tokenizer.enable_truncation(max_length=fixture["max_tokens"])
    tokenizer.enable_padding()
    batch = tokenizer.encode_batch(fixture["sentences"][:8])
    ids = np.array([e.ids for e in batch], dtype=np.int64)
    mask = np.array([e.attention_mask for e in batch], dtype=np.int64)
    (got,) = session.run(None, {"input_ids": ids, "attention_mask": mask})
    batch_abs = float(np.abs(got - reference[:8]).max())
    print(f"onnxruntime vs reference: min cosine {worst_cos:.7f}, max abs diff {worst_abs:.2e}, padded batch max abs diff {batch_abs:.2e}")
    if worst_cos < 0.9999 or worst_abs > 1e-3 or batch_abs > 1e-3:
        sys.exit("the ONNX model does not match the reference embeddings")


def main():
    args = [a for a in sys.argv[1:] if not a.startswith("--")]
    model_dir = Path(args[0] if args else ".cache/models/all-MiniLM-L6-v2")
    out = model_dir / "model.onnx"
    # Written next to the target and renamed over it only once it passed --check, so a reader
    # never sees a half-written or failing model.
    partial = model_dir / "model.onnx.partial"
    onnx.save(build(model_dir), str(partial))
    print(f"wrote {partial} ({partial.stat().st_size / 1e6:.1f} MB)")
    if "--check" in sys.argv:
        check(partial, model_dir)
    partial.replace(out)
    print(f"renamed it to {out}")


if __name__ == "__main__":
    main()
