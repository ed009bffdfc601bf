"""Round trip of the AOT path (needs torch + executorch and target/release/webdelegate-lower):

    python -m unittest discover -s python/tests

- a transformer block exports into ONE delegate, no kernel call (`operators == []`), the
  `.pte`'s only instruction a DelegateCall to `WebDelegateBackend` with args = inputs then
  outputs; the delegate blob is `webdelegate-lower`'s output for the dumped program JSON and
  `--dump` accepts it; the `.ptd` holds every weight under its FQN; the lowered program run by
  the NumPy reference equals eager PyTorch;
- an op the program cannot express (`torch.cumsum`) stays outside, named by the partitioner;
- dynamic dims become program symbols, with no Int EValue crossing into the delegate.
"""

from __future__ import annotations

import json
import subprocess
import sys
import tempfile
import unittest
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import numpy as np  # noqa: E402
import torch  # noqa: E402
from executorch.exir._serialize._program import deserialize_pte_binary  # noqa: E402
from executorch.exir.schema import DelegateCall, KernelCall, Tensor  # noqa: E402
from executorch.extension.flat_tensor.serialize.serialize import (  # noqa: E402
    FlatTensorSerializer,
)
from executorch.exir._serialize._cord import Cord  # noqa: E402

from webdelegate_executorch import export_to_pte, find_lower_tool  # noqa: E402
from webdelegate_executorch.reference import run_program  # noqa: E402


class Block(torch.nn.Module):
    def __init__(self, hidden: int = 16, heads: int = 2, extra=None):
        super().__init__()
        self.heads = heads
        self.qkv = torch.nn.ModuleList(torch.nn.Linear(hidden, hidden) for _ in range(3))
        self.out = torch.nn.Linear(hidden, hidden)
        self.norm = torch.nn.LayerNorm(hidden)
        self.extra = extra

    def forward(self, x):
        b, s, h = x.shape
        q, k, v = (m(x).view(b, s, self.heads, -1).transpose(1, 2) for m in self.qkv)
        a = torch.softmax(q @ k.transpose(-1, -2) * 0.25, dim=-1) @ v
        y = self.norm(x + self.out(a.transpose(1, 2).reshape(b, s, h)))
        return self.extra(y) if self.extra is not None else y


def plan_of(pte: Path):
    program = deserialize_pte_binary(pte.read_bytes()).program
    (plan,) = program.execution_plan
    return program, plan


class RoundTrip(unittest.TestCase):
    def test_block_one_delegate(self):
        torch.manual_seed(0)
        model = Block().eval()
        x = torch.randn(1, 5, 16)
        with tempfile.TemporaryDirectory() as tmp:
            tmp = Path(tmp)
            result = export_to_pte(model, (x,), tmp, "block", external_tag="w",
                                   dump_dir=tmp / "dump", strict=True)
            self.assertEqual(result.partitions, 1)
            self.assertEqual(result.kernel_ops, ())
            program, plan = plan_of(result.pte_path)
            self.assertEqual(plan.operators, [])
            (instr,) = plan.chains[0].instructions
            self.assertIsInstance(instr.instr_args, DelegateCall)
            self.assertEqual(list(instr.instr_args.args), list(plan.inputs) + list(plan.outputs))
            (delegate,) = plan.delegates
            self.assertEqual(delegate.id, "WebDelegateBackend")
            blob = bytes(program.backend_delegate_data[delegate.processed.index].data)
            self.assertEqual(blob[:4], b"WDPG")
            dumped = (tmp / "dump" / "program0.json").read_text()
            lowered = subprocess.run([find_lower_tool(), "--dump", "-", "-"],
                                     input=dumped.encode(), capture_output=True, check=True)
            self.assertEqual(lowered.stdout, blob)
            self.assertIn("webdelegate program format", lowered.stderr.decode())
            payload = FlatTensorSerializer().deserialize(
                Cord(result.ptd_paths["w"].read_bytes()))
            self.assertEqual(set(payload.named_data), set(model.state_dict()))
            prog = json.loads(dumped)
            self.assertTrue(all(p["scope"] == "named_data" for p in prog["params"]))
            weights = {k: v.detach().numpy() for k, v in model.state_dict().items()}
            (out,) = run_program(prog, weights, [x.numpy()])
            np.testing.assert_allclose(out, model(x).detach().numpy(), atol=1e-5)

    def test_unsupported_op_stays_outside(self):
        torch.manual_seed(0)
        model = Block(extra=lambda y: torch.cumsum(y, dim=-1)).eval()
        with tempfile.TemporaryDirectory() as tmp:
            result = export_to_pte(model, (torch.randn(1, 5, 16),), tmp, "m")
            self.assertEqual(result.unsupported_ops, {"aten.cumsum.default": 1})
            _, plan = plan_of(result.pte_path)
            kinds = [type(i.instr_args) for i in plan.chains[0].instructions]
            self.assertEqual(kinds, [DelegateCall, KernelCall])
            self.assertEqual(plan.operators[0].name, "aten::cumsum")

    def test_dynamic_dims_are_symbols(self):
        torch.manual_seed(0)
        model = Block().eval()
        seq = torch.export.Dim("seq", min=2, max=64)
        with tempfile.TemporaryDirectory() as tmp:
            tmp = Path(tmp)
            result = export_to_pte(model, (torch.randn(1, 5, 16),), tmp, "m",
                                   dynamic_shapes=({1: seq},), dump_dir=tmp / "dump")
            _, plan = plan_of(result.pte_path)
            (instr,) = plan.chains[0].instructions
            args = list(instr.instr_args.args)
            self.assertTrue(all(isinstance(plan.values[i].val, Tensor) for i in args))
            prog = json.loads((tmp / "dump" / "program0.json").read_text())
            self.assertEqual(prog["symbols"], ["x.1"])
            weights = {k: v.detach().numpy() for k, v in model.state_dict().items()}
            for s in (3, 9):
                x = torch.randn(1, s, 16)
                (out,) = run_program(prog, weights, [x.numpy()])
                np.testing.assert_allclose(out, model(x).detach().numpy(), atol=1e-5)

    def test_kv_cache_buffers_become_states(self):
        import webdelegate_executorch.custom_ops as ops

        class Step(torch.nn.Module):
            def __init__(self):
                super().__init__()
                self.q = torch.nn.Linear(8, 8, bias=False)
                self.register_buffer("k_cache", torch.zeros(6, 1, 4))
                self.register_buffer("v_cache", torch.zeros(6, 1, 4))

            def forward(self, x, pos):
                q = ops.rope(self.q(x).view(-1, 2, 4), pos, 4, 1e4, True)
                kv = x.view(-1, 2, 4)[:, :1, :]
                o, k, v = ops.attention_with_cache(q, kv, kv, self.k_cache, self.v_cache,
                                                   pos, 0.5)
                self.k_cache.copy_(k)
                self.v_cache.copy_(v)
                return torch.nn.functional.silu(o.reshape(-1, 8))

        torch.manual_seed(0)
        model = Step().eval()
        seq = torch.export.Dim("seq", min=1, max=6)
        with tempfile.TemporaryDirectory() as tmp:
            tmp = Path(tmp)
            result = export_to_pte(model, (torch.randn(3, 8), torch.arange(3)), tmp, "m",
                                   dynamic_shapes=({0: seq}, {0: seq}),
                                   dump_dir=tmp / "dump", strict=True)
            _, plan = plan_of(result.pte_path)
            self.assertEqual(plan.operators, [])
            prog = json.loads((tmp / "dump" / "program0.json").read_text())
            names = [prog["tensors"][t]["name"] for t in prog["states"]]
            self.assertEqual(names, ["k_cache", "v_cache"])
            self.assertNotIn("k_cache", {p["key"] for p in prog["params"]})
            fresh = Step().eval()
            fresh.load_state_dict(model.state_dict())
            fresh.k_cache.zero_()
            fresh.v_cache.zero_()
            weights = {"q.weight": fresh.q.weight.detach().numpy()}
            states: dict = {}
            for xs, ps in ((torch.randn(3, 8), torch.arange(3)),
                           (torch.randn(1, 8), torch.tensor([3]))):
                (out,) = run_program(prog, weights, [xs.numpy(), ps.numpy()], states)
                np.testing.assert_allclose(out, fresh(xs, ps).detach().numpy(), atol=1e-5)


if __name__ == "__main__":
    unittest.main()
