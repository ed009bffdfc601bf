#!/usr/bin/env python3
"""Writes tests/fixtures/pte/real/*.pte: tiny programs exported by ExecuTorch itself, so the
.pte reader's tests (tests/pte_reader.rs) read what upstream's serializer really writes, not
only what our test writer (tests/pte_support) believes it writes.

- linear.pte: `torch.nn.Linear(4, 3)` via `to_edge` + `to_executorch`, no delegate: its
  operators are portable aten kernels (the runtime runs none: `OperatorMissing`), its weights
  constants in the constant segment.
- linear_xnnpack.pte: the same module lowered with the XNNPACK partitioner: one delegate
  (`XnnpackBackend`) whose blob is a segment; its weights are named data in the .pte.
- add.pte: `x + x`, no delegate, no weights: the constant segment is empty, so ExecuTorch
  writes no extended header although the program lists one (empty) segment.

The weights are seeded, the exports deterministic: rerunning rewrites the same bytes with the
same executorch release. Usage: /work/venv-et/bin/python scripts/make-pte-reader-fixtures.py
(executorch 1.5.1, torch 2.14.1).
"""
import pathlib

import torch
from executorch.exir import to_edge, to_edge_transform_and_lower

OUT = pathlib.Path(__file__).resolve().parent.parent / "tests" / "fixtures" / "pte" / "real"


class Add(torch.nn.Module):
    def forward(self, x):
        return x + x


def linear():
    torch.manual_seed(0)
    return torch.nn.Linear(4, 3).eval()


def write(name, program):
    path = OUT / name
    path.write_bytes(program.buffer)
    print(f"{path}: {len(program.buffer)} bytes")


def main():
    OUT.mkdir(parents=True, exist_ok=True)
    x = (torch.randn(2, 4),)

    exported = torch.export.export(linear(), x)
    write("linear.pte", to_edge(exported).to_executorch())

    from executorch.backends.xnnpack.partition.xnnpack_partitioner import XnnpackPartitioner

    exported = torch.export.export(linear(), x)
    lowered = to_edge_transform_and_lower(exported, partitioner=[XnnpackPartitioner()])
    write("linear_xnnpack.pte", lowered.to_executorch())

    exported = torch.export.export(Add(), x)
    write("add.pte", to_edge(exported).to_executorch())


if __name__ == "__main__":
    main()
