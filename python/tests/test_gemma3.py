"""Gemma 3 through our partitioner, on a tiny random ``Gemma3ForCausalLM`` (needs torch,
transformers, executorch and target/release/webdelegate-lower):

    python -m unittest discover -s python/tests

- the whole decoder is ONE delegate (no kernel call), its per-layer caches are program states
  and its parameters named data under transformers' own names (the tied LM head once, as
  ``model.embed_tokens.weight``);
- sliding layers get their window and the local RoPE base, global layers none and the global
  base; the scale is ``query_pre_attn_scalar ** -0.5``; norms are ``RmsNorm(x, Scale(w, 1,
  1))``;
- prefill + decode of the lowered program (NumPy reference) follow transformers' eager
  forward with its DynamicCache past the sliding window, and so does ExecuTorch's portable
  runtime on the non-delegated export.
"""

from __future__ import annotations

import copy
import json
import sys
import tempfile
import unittest
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import numpy as np  # noqa: E402
import torch  # noqa: E402

from webdelegate_executorch import export_to_pte  # noqa: E402
from webdelegate_executorch.reference import run_program  # noqa: E402

try:
    from transformers import DynamicCache, Gemma3ForCausalLM, Gemma3TextConfig
except ImportError:  # pragma: no cover - transformers is in python/requirements.txt
    Gemma3ForCausalLM = None

CONTEXT = 16
WINDOW = 4


def tiny_gemma():
    """A 3-layer Gemma 3 (sliding, sliding, global; window 4), random weights with norm
    weights away from 0 and a query_pre_attn_scalar other than head_dim."""
    torch.manual_seed(0)
    config = Gemma3TextConfig(
        vocab_size=96, hidden_size=32, intermediate_size=64, num_hidden_layers=3,
        num_attention_heads=4, num_key_value_heads=2, head_dim=16, query_pre_attn_scalar=24,
        sliding_window=WINDOW,
        layer_types=["sliding_attention", "sliding_attention", "full_attention"],
        max_position_embeddings=64, attn_implementation="eager")
    model = Gemma3ForCausalLM(config).eval()
    with torch.no_grad():
        for name, p in model.named_parameters():
            if "norm" in name:
                p.copy_(0.2 * torch.randn_like(p))
    return model


@unittest.skipIf(Gemma3ForCausalLM is None, "transformers with Gemma 3 is not installed")
class Gemma3Export(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        from webdelegate_executorch.gemma3 import Gemma3ForWebDelegate

        cls.eager = tiny_gemma()
        cls.model = Gemma3ForWebDelegate(copy.deepcopy(cls.eager), max_context=CONTEXT).eval()
        cls.tmp = tempfile.TemporaryDirectory()
        tmp = Path(cls.tmp.name)
        seq = torch.export.Dim("seq", min=1, max=CONTEXT)
        cls.example = (torch.tensor([5, 17, 42, 7, 9, 3]), torch.arange(6))
        cls.result = export_to_pte(cls.model, cls.example, tmp, "gemma",
                                   dynamic_shapes=({0: seq}, {0: seq}),
                                   dump_dir=tmp / "dump", strict=True)
        cls.model.reset_cache()
        cls.program = json.loads((tmp / "dump" / "program0.json").read_text())
        cls.dynamic = ({0: seq}, {0: seq})

    @classmethod
    def tearDownClass(cls):
        cls.tmp.cleanup()

    def ops(self, kind):
        return [op[kind] for op in self.program["ops"] if kind in op]

    def test_one_delegate_states_and_keys(self):
        self.assertEqual(self.result.partitions, 1)
        self.assertEqual(self.result.kernel_ops, ())
        names = [self.program["tensors"][t]["name"] for t in self.program["states"]]
        self.assertEqual(names, [f"model.layers.{i}.self_attn.{c}_cache"
                                 for i in range(3) for c in ("k", "v")])
        keys = {p["key"] for p in self.program["params"]}
        expected = {k for k in self.eager.state_dict() if k != "lm_head.weight"}
        self.assertEqual(keys, expected)

    def test_layer_attributes(self):
        attention = self.ops("Attention")
        self.assertEqual([a["window"] for a in attention], [WINDOW, WINDOW, 0])
        for a in attention:
            self.assertAlmostEqual(a["scale"], 24 ** -0.5, places=6)
        bases = [r["base"] for r in self.ops("Rope")]
        self.assertEqual(bases, [10000.0] * 4 + [1e6] * 2)
        scales = self.ops("Scale")
        norm_weights = {n["weight"] for n in self.ops("RmsNorm")}
        one_plus = [s for s in scales if s["out"] in norm_weights]
        self.assertEqual(len(one_plus), 3 * 6 + 1)
        self.assertTrue(all(s["scale"] == 1.0 and s["bias"] == 1.0 for s in one_plus))
        self.assertEqual(len(self.ops("Argmax")), 1)  # the last row, h[-1:]

    def greedy_eager(self, prompt, steps):
        cache = DynamicCache(config=self.eager.config)
        logits, step = [], prompt[None]
        with torch.no_grad():
            for _ in range(steps):
                row = self.eager(input_ids=step, cache=cache, use_cache=True).logits[0, -1:]
                logits.append(row.numpy())
                step = torch.argmax(row, -1, keepdim=True)
        return logits

    def greedy(self, run, prompt, steps):
        logits, tokens, pos = [], prompt, torch.arange(len(prompt))
        for _ in range(steps):
            row = np.asarray(run(tokens, pos))
            logits.append(row)
            tokens = torch.tensor([int(np.argmax(row[-1]))])
            pos = torch.tensor([int(pos[-1]) + 1])
        return logits

    def test_reference_follows_transformers_past_the_window(self):
        prompt, steps = self.example[0], CONTEXT - 6
        weights = {k: v.detach().numpy() for k, v in self.model.named_parameters()}
        states: dict = {}
        got = self.greedy(lambda t, p: run_program(self.program, weights,
                                                   [t.numpy(), p.numpy()], states)[0],
                          prompt, steps)
        want = self.greedy_eager(prompt, steps)
        for g, w in zip(got, want):
            self.assertEqual(g.shape, (1, 96))
            np.testing.assert_allclose(g, w, atol=2e-5)

    def test_portable_runtime_follows_transformers(self):
        from executorch.exir import (EdgeCompileConfig, ExecutorchBackendConfig,
                                     to_edge_transform_and_lower)
        from executorch.runtime import Runtime

        with torch.no_grad():
            exported = torch.export.export(self.model, self.example,
                                           dynamic_shapes=self.dynamic, strict=False)
        self.model.reset_cache()
        edge = to_edge_transform_and_lower(
            exported, compile_config=EdgeCompileConfig(_check_ir_validity=False))
        et = edge.to_executorch(ExecutorchBackendConfig())
        with tempfile.TemporaryDirectory() as tmp:
            pte = Path(tmp) / "portable.pte"
            pte.write_bytes(et.buffer)
            method = Runtime.get().load_program(pte).load_method("forward")
            got = self.greedy(lambda t, p: method.execute([t, p])[0].clone().numpy(),
                              self.example[0], CONTEXT - 6)
        want = self.greedy_eager(self.example[0], CONTEXT - 6)
        for g, w in zip(got, want):
            np.testing.assert_allclose(g, w, atol=2e-5)


if __name__ == "__main__":
    unittest.main()
