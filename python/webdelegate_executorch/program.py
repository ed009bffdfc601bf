"""The program a delegate runs, built in Python and serialised as the JSON form that
``webdelegate-lower`` reads (serde's form of ``webdelegate::program::Program``).

Field names and op semantics are defined once, in the Rust crate (``src/program/ir.rs``,
``src/program/tensor.rs`` and one file per op under ``src/program/ops/``); this module only
spells them. Validation is the Rust side's: a program that ``webdelegate-lower`` accepts is a
program a backend's ``init`` accepts.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any, Dict, List, Sequence, Union

#: A dim: a fixed extent or the index of a symbol in ``Program.symbols``.
Dim = Union[int, "Symbol"]

#: Dense dtypes by their serde names; block formats are ``{"Block": "F16"}`` etc.
DENSE_DTYPES = ("F32", "I32", "I64", "U8")
BLOCK_FORMATS = ("F16", "BF16", "Q4_0", "Q5_0", "Q8_0", "Q4_K", "Q5_K", "Q6_K")


@dataclass(frozen=True)
class Symbol:
    """A symbolic dim: index into ``Program.symbols``."""

    index: int


def dtype_json(dtype: str) -> Any:
    """The serde form of a dtype named ``"F32"``, ``"I64"``, ... or a block format ``"F16"``."""
    if dtype in DENSE_DTYPES:
        return dtype
    if dtype in BLOCK_FORMATS:
        return {"Block": dtype}
    raise ValueError(f"unknown program dtype {dtype!r}")


def dim_json(dim: Dim) -> Dict[str, int]:
    """The serde form of one dim."""
    if isinstance(dim, Symbol):
        return {"Symbol": dim.index}
    if isinstance(dim, int) and dim >= 0:
        return {"Fixed": dim}
    raise ValueError(f"bad dim {dim!r}")


@dataclass
class TensorDecl:
    """A declared tensor: name (for messages and dumps), dtype, shape."""

    name: str
    dtype: str
    shape: List[Dim]


@dataclass
class ProgramBuilder:
    """Accumulates symbols, tensors, params, ops, inputs, outputs and states of one program.

    Ops are given as ``(variant, fields)``, e.g. ``("Linear", {"x": 0, "weight": 1,
    "bias": None, "out": 2})``; the builder does not check them (``webdelegate-lower`` does).
    """

    symbols: List[str] = field(default_factory=list)
    tensors: List[TensorDecl] = field(default_factory=list)
    inputs: List[int] = field(default_factory=list)
    outputs: List[int] = field(default_factory=list)
    params: List[Dict[str, Any]] = field(default_factory=list)
    ops: List[Dict[str, Dict[str, Any]]] = field(default_factory=list)
    states: List[int] = field(default_factory=list)

    def symbol(self, name: str) -> Symbol:
        """The symbol named ``name``, declared on first use."""
        if name not in self.symbols:
            self.symbols.append(name)
        return Symbol(self.symbols.index(name))

    def tensor(self, name: str, dtype: str, shape: Sequence[Dim]) -> int:
        """Declares a tensor and returns its id."""
        dtype_json(dtype)
        for dim in shape:
            dim_json(dim)
        self.tensors.append(TensorDecl(name, dtype, list(shape)))
        return len(self.tensors) - 1

    def param(self, tensor: int, scope: str, key: str) -> None:
        """Marks ``tensor`` as filled from the parameter provider: ``key`` in ``scope``."""
        self.params.append({"tensor": tensor, "scope": scope, "key": key})

    def op(self, variant: str, out_name: str, dtype: str, shape: Sequence[Dim],
           **fields: Any) -> int:
        """Declares the output tensor ``out_name`` and appends op ``variant`` writing it."""
        out = self.tensor(f"{out_name}", dtype, shape)
        self.ops.append({variant: {**fields, "out": out}})
        return out

    def shape_of(self, tensor: int) -> List[Dim]:
        """The declared shape of ``tensor``."""
        return list(self.tensors[tensor].shape)

    def dtype_of(self, tensor: int) -> str:
        """The declared dtype of ``tensor``."""
        return self.tensors[tensor].dtype

    def to_json_obj(self) -> Dict[str, Any]:
        """The program as serde's JSON object."""
        return {
            "symbols": list(self.symbols),
            "tensors": [
                {
                    "name": t.name,
                    "dtype": dtype_json(t.dtype),
                    "shape": [dim_json(d) for d in t.shape],
                }
                for t in self.tensors
            ],
            "inputs": list(self.inputs),
            "outputs": list(self.outputs),
            "params": list(self.params),
            "ops": list(self.ops),
            "states": list(self.states),
        }

    def to_json(self) -> str:
        """The program as serde's JSON text."""
        return json.dumps(self.to_json_obj())


def dims_text(shape: Sequence[Dim], symbols: Sequence[str]) -> str:
    """A shape for messages, e.g. ``[$seq, 384]``."""
    parts = [f"${symbols[d.index]}" if isinstance(d, Symbol) else str(d) for d in shape]
    return "[" + ", ".join(parts) + "]"
