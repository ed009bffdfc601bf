"""Lowering an edge-dialect FX graph into a webdelegate program.

One :class:`Lowerer` walks the graph in order and gives every node a *value*. Most values are
program tensors (:class:`Tensor`); a few stay *lazy* until a consumer needs a tensor, so that
a consumer can fold them into a better op:

- a permute (``permute_copy``/``transpose``) of a weight feeding ``mm``/``addmm`` becomes a
  ``Linear`` over the untransposed weight; one swapping the last two dims feeding ``bmm``
  becomes ``MatMul``'s ``transpose_a``/``transpose_b``;
- an ``expand_copy`` stays a broadcast: binary ops and batched matmuls broadcast anyway;
- integer constants that are uniform (BERT's all-zero ``token_type_ids`` buffer) or
  ``0, 1, ..., n-1`` along their last dim (position ids, ``arange``) are tracked by value, so
  an embedding of a uniform id becomes a one-row ``Slice`` of the table and an arange becomes
  ``Range`` with a symbolic extent;
- sentence-transformers' pooling (``sum(h * mask) / clamp(sum(mask), 1e-9)``) becomes
  ``MeanPool`` and ``F.normalize`` (``x / clamp(sqrt(sum(x^2)), eps)``) becomes
  ``L2Normalize``.

A lazy value that cannot be made a tensor (a sum that is not part of a pooling) raises
:class:`Unsupported` naming the node; the partitioner uses the same lowering as its support
check, so such nodes stay outside the delegate.

Parameters and constant buffers become ``ParamRef``s with scope ``named_data`` and the
tensor's fully-qualified name as key; their bytes are handed to the caller (``weights``) to
store as named data. Mutable buffers become program states.
"""

from __future__ import annotations

import math
import operator
import sys
from dataclasses import dataclass, field
from typing import Any, Callable, Dict, List, Optional, Sequence, Set, Tuple

import torch
from torch.export import ExportedProgram
from torch.export.graph_signature import InputKind, OutputKind

from .program import Dim, ProgramBuilder, Symbol, dims_text

#: The provider scope of every parameter: ExecuTorch's NamedDataMap.
NAMED_DATA_SCOPE = "named_data"


class Unsupported(Exception):
    """A node the program cannot express; the message names the node and its op."""

    def __init__(self, node: torch.fx.Node, reason: str):
        super().__init__(f"{node.name} ({target_name(node)}): {reason}")
        self.node = node
        self.reason = reason


def target_name(node: torch.fx.Node) -> str:
    """A node's op, e.g. ``aten.addmm.default`` (edge ops print their aten name)."""
    target = node.target
    if node.op != "call_function":
        return node.op
    if target is operator.getitem:
        return "getitem"
    name = getattr(target, "_name", None) or getattr(target, "__name__", None) or str(target)
    # Edge ops: `aten::addmm` with overload; normalise to `aten.addmm.default`.
    overload = getattr(target, "_overloadname", None)
    if "::" in name:
        namespace, op = name.split("::", 1)
        return f"{namespace}.{op}.{overload or 'default'}"
    return name


# ---------------------------------------------------------------- values


@dataclass
class Tensor:
    """A program tensor whose actual shape may be smaller than the node's (a pending broadcast:
    ``shape`` broadcasts to the node's shape)."""

    id: int
    shape: List[Dim]


@dataclass
class Lazy:
    """A value not yet emitted: ``kind`` names it, ``src`` holds its operands."""

    kind: str
    node: torch.fx.Node
    src: Dict[str, Any] = field(default_factory=dict)


@dataclass
class IntConst:
    """An integer tensor known by value: every element ``value`` (``uniform``), or
    ``0..n-1`` along the last dim (``arange``), broadcast to ``shape``."""

    kind: str  # "uniform" | "arange"
    value: int
    shape: List[Dim]
    dtype: str


@dataclass
class Scalar:
    """A Python number (or a symbolic size) in the graph."""

    value: Any


@dataclass
class Tuple_:
    """A tuple result (``native_layer_norm``): only element 0 is lowered."""

    items: List[Any]


TORCH_DTYPES = {
    torch.float32: "F32",
    torch.int32: "I32",
    torch.int64: "I64",
    torch.uint8: "U8",
    torch.bool: "U8",
}

HALF_DTYPES = {torch.float16: "F16", torch.bfloat16: "BF16"}


def op_key(name: str) -> str:
    """Strips an overload: ``aten.add.Tensor`` -> ``aten.add``."""
    parts = name.split(".")
    return ".".join(parts[:2]) if len(parts) >= 2 else name


# ---------------------------------------------------------------- the lowerer


class Lowerer:
    """Lowers one graph. With ``probe``, nodes whose lowering fails are recorded in
    ``failed`` and treated as opaque tensors, and ``opaque`` names nodes to treat as such from
    the start (the partitioner's fixed point); without it, the first failure raises."""

    def __init__(self, program: ExportedProgram, probe: bool = False,
                 opaque: Optional[Set[torch.fx.Node]] = None,
                 param_dtype: Optional[str] = None):
        self.ep = program
        self.graph = program.graph_module.graph
        self.probe = probe
        self.opaque = set(opaque or ())
        self.failed: Dict[torch.fx.Node, str] = {}
        self.b = ProgramBuilder()
        self.env: Dict[torch.fx.Node, Any] = {}
        self.materialized: Dict[int, int] = {}
        self.weights: Dict[str, torch.Tensor] = {}
        self.param_dtype = param_dtype
        self.counter = 0
        self.symbol_names: Dict[str, str] = {}
        self.input_kinds: Dict[str, Tuple[InputKind, Optional[str]]] = {}
        for spec in program.graph_signature.input_specs:
            name = getattr(spec.arg, "name", None)
            if name is not None:
                self.input_kinds[name] = (spec.kind, spec.target)
        self.mutations: Dict[str, str] = {}
        for spec in program.graph_signature.output_specs:
            if spec.kind == OutputKind.BUFFER_MUTATION:
                self.mutations[spec.arg.name] = spec.target
        self.state_of_target: Dict[str, int] = {}

    # ------------------------------------------------------------ shapes and names

    def fresh(self, what: str) -> str:
        """A tensor name: the op and a counter, e.g. ``linear.12``."""
        name = f"{what}.{self.counter}"
        self.counter += 1
        return name

    def dim(self, node: torch.fx.Node, size: Any) -> Dim:
        """A FakeTensor size as a program dim; a symbol expression is unsupported."""
        if isinstance(size, int):
            return size
        if isinstance(size, torch.SymInt):
            expr = size.node.expr
            if expr.is_number:
                return int(expr)
            if expr.is_Symbol:
                name = self.symbol_names.setdefault(str(expr), str(expr))
                return self.b.symbol(name)
            raise Unsupported(node, f"dim {expr} is an expression of symbols, which a "
                                    "program dim cannot express (one symbol or a number)")
        raise Unsupported(node, f"unexpected size {size!r}")

    def shape(self, node: torch.fx.Node) -> List[Dim]:
        """The node's output shape as program dims."""
        val = node.meta.get("val")
        if not isinstance(val, torch.Tensor):
            raise Unsupported(node, "the node has no tensor value")
        return [self.dim(node, s) for s in val.shape]

    def dtype(self, node: torch.fx.Node, allow_half: bool = False) -> str:
        """The node's output dtype as a program dtype."""
        val = node.meta.get("val")
        if not isinstance(val, torch.Tensor):
            raise Unsupported(node, "the node has no tensor value")
        if val.dtype in TORCH_DTYPES:
            return TORCH_DTYPES[val.dtype]
        if allow_half and val.dtype in HALF_DTYPES:
            return HALF_DTYPES[val.dtype]
        raise Unsupported(node, f"dtype {val.dtype} has no program dtype")

    def int_list(self, node: torch.fx.Node, values: Sequence[Any]) -> List[Dim]:
        """A list of sizes (ints or SymInts or sym_size nodes) as program dims."""
        out = []
        for v in values:
            if isinstance(v, torch.fx.Node):
                v = v.meta.get("val")
            out.append(self.dim(node, v))
        return out

    # ------------------------------------------------------------ the walk

    def run(self) -> "Lowerer":
        """Lowers every node in graph order."""
        for node in self.graph.nodes:
            if node.op == "placeholder":
                self.placeholder(node)
            elif node.op == "output":
                self.output(node)
            elif node.op == "call_function":
                self.call(node)
            elif node.op == "get_attr":
                self.env[node] = Lazy("attr", node)
            else:
                raise Unsupported(node, f"unexpected node kind {node.op}")
        return self

    def call(self, node: torch.fx.Node) -> None:
        """Lowers one call; in probe mode a failure makes the node opaque."""
        if node in self.opaque:
            self.env[node] = self.opaque_value(node)
            return
        handler = HANDLERS.get(op_key(target_name(node))) or HANDLERS.get(target_name(node))
        try:
            if handler is None:
                raise Unsupported(node, "no lowering for this op")
            self.env[node] = handler(self, node)
        except Unsupported as error:
            if not self.probe:
                raise
            self.failed[error.node] = error.reason
            if error.node is not node:
                # A lazy producer could not be made a tensor for this consumer.
                self.failed.setdefault(node, f"its input {error.node.name} is unsupported")
            self.env[node] = self.opaque_value(node)

    def opaque_value(self, node: torch.fx.Node) -> Any:
        """A value for a node outside the delegate (probe mode): a tensor input."""
        val = node.meta.get("val")
        if isinstance(val, torch.Tensor):
            try:
                shape = self.shape(node)
                dtype = self.dtype(node, allow_half=True)
            except Unsupported:
                shape, dtype = [], "F32"
            return Tensor(self.b.tensor(node.name, dtype, shape), shape)
        if isinstance(val, (tuple, list)):
            return Tuple_([None] * len(val))
        return Scalar(val)

    # ------------------------------------------------------------ placeholders

    def placeholder(self, node: torch.fx.Node) -> None:
        """User inputs become program inputs; parameters, buffers and constants become
        params (or, for integer constants known by value, :class:`IntConst`); mutated buffers
        become states."""
        kind, target = self.input_kinds.get(node.name, (InputKind.USER_INPUT, None))
        val = node.meta.get("val")
        if kind == InputKind.USER_INPUT:
            if isinstance(val, torch.Tensor):
                # Symbols are named after the first input dim that carries them, e.g.
                # `input_ids.1` (the runtime binds them from input shapes).
                for i, size in enumerate(val.shape):
                    if isinstance(size, torch.SymInt) and size.node.expr.is_Symbol:
                        self.symbol_names.setdefault(str(size.node.expr), f"{node.name}.{i}")
            if not isinstance(val, torch.Tensor):
                # An Int EValue: the delegate binds symbols from tensor shapes instead.
                self.env[node] = Scalar(val)
                return
            shape = self.shape(node)
            tid = self.b.tensor(node.name, self.dtype(node), shape)
            self.b.inputs.append(tid)
            self.env[node] = Tensor(tid, shape)
            return
        if kind == InputKind.BUFFER and target in self.mutations.values():
            shape = self.shape(node)
            tid = self.b.tensor(target, self.dtype(node), shape)
            self.b.states.append(tid)
            self.state_of_target[target] = tid
            self.env[node] = Tensor(tid, shape)
            return
        tensor = self.constant_tensor(kind, target)
        if tensor is None:
            raise Unsupported(node, f"no data for {kind.name.lower()} {target!r}")
        known = int_constant(tensor)
        if known is not None:
            self.env[node] = known
        self.env.setdefault(node, Lazy("param", node, {"target": target, "tensor": tensor}))

    def constant_tensor(self, kind: InputKind, target: Optional[str]) -> Optional[torch.Tensor]:
        """The data of a parameter, buffer or lifted constant."""
        if target is None:
            return None
        if target in self.ep.state_dict:
            return self.ep.state_dict[target]
        if target in self.ep.constants:
            value = self.ep.constants[target]
            return value if isinstance(value, torch.Tensor) else None
        return None

    # ------------------------------------------------------------ materialisation

    def tensor(self, node_or_value: Any, consumer: torch.fx.Node,
               full: bool = True) -> Tensor:
        """The program tensor of an operand: lazy values are emitted now. With ``full`` the
        tensor must have the operand node's whole shape (a pending broadcast is refused)."""
        node = node_or_value if isinstance(node_or_value, torch.fx.Node) else None
        value = self.env[node] if node is not None else node_or_value
        if isinstance(value, Tensor):
            result = value
        elif isinstance(value, Lazy):
            result = self.emit_lazy(value)
            self.env[value.node] = result
        elif isinstance(value, IntConst):
            if node is None:
                raise Unsupported(consumer, "an integer constant without a node")
            result = self.emit_int_const(value, node)
            self.env[node] = result
        else:
            raise Unsupported(consumer, f"operand {node_or_value} is not a tensor")
        if full and node is not None and node.meta.get("val") is not None:
            want = self.shape(node)
            if result.shape != want:
                raise Unsupported(consumer, f"operand {node.name} is a broadcast of "
                                            f"{self.text(result.shape)} to {self.text(want)}, "
                                            "which this op does not broadcast")
        return result

    def text(self, shape: Sequence[Dim]) -> str:
        """A shape for messages."""
        return dims_text(shape, self.b.symbols)

    def emit_lazy(self, value: Lazy) -> Tensor:
        """Emits a lazy value as ops."""
        node = value.node
        if value.kind == "param":
            target, data = value.src["target"], value.src["tensor"]
            dtype = self.param_program_dtype(node, data)
            shape = self.shape(node)
            tid = self.b.tensor(target, dtype, shape)
            self.b.param(tid, NAMED_DATA_SCOPE, target)
            self.weights[target] = data
            return Tensor(tid, shape)
        if value.kind == "permute":
            src = self.tensor(value.src["x"], node)
            shape = self.shape(node)
            tid = self.b.op("Permute", self.fresh("permute"), self.b.dtype_of(src.id), shape,
                            x=src.id, perm=list(value.src["perm"]))
            return Tensor(tid, shape)
        if value.kind == "square":
            src = self.tensor(value.src["x"], node)
            shape = self.shape(node)
            tid = self.b.op("Binary", self.fresh("mul"), "F32", shape, op="Mul", a=src.id,
                            b=src.id)
            return Tensor(tid, shape)
        if value.kind == "masked":
            return self.binary_emit(node, "Mul", value.src["x"], value.src["m"])
        if value.kind == "expand":
            src = self.tensor(value.src["x"], node, full=False)
            return Tensor(src.id, src.shape)
        if value.kind == "cast_view":
            x = value.src["x"]
            if val(x).dtype == val(node).dtype:
                return self.reshape_emit(node, x)
            tx = self.tensor(x, node, full=False)
            tid = self.b.op("Cast", self.fresh("cast"), self.dtype(node), tx.shape, x=tx.id)
            return Tensor(tid, tx.shape)
        raise Unsupported(node, f"a {value.kind} here is not part of a pattern the program "
                                "expresses (e.g. mean pooling or L2 normalisation)")

    def param_program_dtype(self, node: torch.fx.Node, data: torch.Tensor) -> str:
        """The program dtype of a weight: its own, f16/bf16 as block formats."""
        if data.dtype in HALF_DTYPES:
            return HALF_DTYPES[data.dtype]
        if data.dtype in TORCH_DTYPES:
            return TORCH_DTYPES[data.dtype]
        raise Unsupported(node, f"weight dtype {data.dtype} has no program dtype")

    def emit_int_const(self, value: IntConst, node: torch.fx.Node) -> Tensor:
        """An integer constant known by value, as ops: an arange is ``Range`` (reshaped and
        broadcast); a uniform constant stays a param."""
        if value.kind == "arange":
            *lead, n = value.shape
            rid = self.b.op("Range", self.fresh("range"), value.dtype, [n])
            if not lead:
                return Tensor(rid, [n])
            ones = [1] * len(lead)
            tid = self.b.op("Reshape", self.fresh("reshape"), value.dtype, ones + [n], x=rid)
            return Tensor(tid, ones + [n])
        raise Unsupported(node, "a uniform integer constant used as a tensor (only an "
                                "embedding lookup of it is lowered)")

    # ------------------------------------------------------------ outputs

    def output(self, node: torch.fx.Node) -> None:
        """Program outputs: the user outputs in order; buffer mutations must write a state."""
        (results,) = node.args
        specs = self.ep.graph_signature.output_specs
        for spec, arg in zip(specs, results):
            if spec.kind == OutputKind.BUFFER_MUTATION:
                # The state must already hold the value: the op that wrote it did so in place.
                state = self.state_of_target.get(spec.target)
                value = self.env.get(arg)
                if state is None or not isinstance(value, Tensor) or value.id != state:
                    raise Unsupported(arg, f"the mutation of buffer {spec.target} is not an "
                                           "in-place write of its state by a program op")
                continue
            if spec.kind != OutputKind.USER_OUTPUT:
                raise Unsupported(node, f"output kind {spec.kind.name} is not supported")
            tensor = self.tensor(arg, node)
            tid = tensor.id
            if (tid in self.b.inputs or tid in self.b.outputs or tid in self.b.states
                    or any(p["tensor"] == tid for p in self.b.params)):
                # An output must be a tensor an op writes: copy through a same-shape reshape.
                tid = self.b.op("Reshape", self.fresh("copy"), self.b.dtype_of(tid),
                                tensor.shape, x=tid)
            self.b.outputs.append(tid)

    # ------------------------------------------------------------ helpers for handlers

    def binary_emit(self, node: torch.fx.Node, op: str, a: Any, b: Any) -> Tensor:
        """``Binary`` with broadcasting; the result may itself be a pending broadcast."""
        ta = self.tensor(a, node, full=False)
        tb = self.tensor(b, node, full=False)
        for t in (ta, tb):
            if self.b.dtype_of(t.id) != "F32":
                raise Unsupported(node, f"{op.lower()} of a {self.b.dtype_of(t.id)} tensor "
                                        "(the program's binary ops are f32)")
        shape = broadcast_shapes(ta.shape, tb.shape)
        if shape is None:
            raise Unsupported(node, f"shapes {self.text(ta.shape)} and {self.text(tb.shape)} "
                                    "do not broadcast")
        tid = self.b.op("Binary", self.fresh(op.lower()), "F32", shape, op=op, a=ta.id,
                        b=tb.id)
        return Tensor(tid, shape)

    def scale_emit(self, node: torch.fx.Node, x: Any, scale: float, bias: float) -> Tensor:
        """``Scale``: ``x * scale + bias``."""
        tx = self.tensor(x, node, full=False)
        if self.b.dtype_of(tx.id) != "F32":
            raise Unsupported(node, "scalar arithmetic on a non-f32 tensor")
        if not (math.isfinite(scale) and math.isfinite(bias)):
            raise Unsupported(node, f"scale {scale} / bias {bias} are not finite")
        tid = self.b.op("Scale", self.fresh("scale"), "F32", tx.shape, x=tx.id,
                        scale=float(scale), bias=float(bias))
        return Tensor(tid, tx.shape)

    def reshape_emit(self, node: torch.fx.Node, x: Any) -> Any:
        """The node's output as a reshape of ``x``: when the shape is unchanged, ``x``'s own
        value (a lazy value stays lazy)."""
        if (isinstance(x, torch.fx.Node) and val(x) is not None
                and tuple(val(x).shape) == tuple(val(node).shape)
                and val(x).dtype == val(node).dtype and x in self.env):
            return self.env[x]
        src = self.tensor(x, node)
        shape = self.shape(node)
        if src.shape == shape:
            return src
        tid = self.b.op("Reshape", self.fresh("reshape"), self.b.dtype_of(src.id), shape,
                        x=src.id)
        return Tensor(tid, shape)

    def scalar(self, node: torch.fx.Node, arg: Any) -> Optional[float]:
        """``arg`` as a Python number when it is one (or a 0-dim constant), else ``None``."""
        if isinstance(arg, (int, float)) and not isinstance(arg, bool):
            return float(arg)
        if isinstance(arg, torch.fx.Node):
            value = self.env.get(arg)
            if isinstance(value, Scalar) and isinstance(value.value, (int, float)):
                return float(value.value)
            if isinstance(value, Lazy) and value.kind == "param":
                data = value.src["tensor"]
                if data.numel() == 1 and data.dim() == 0:
                    return float(data.item())
        return None


def broadcast_shapes(a: Sequence[Dim], b: Sequence[Dim]) -> Optional[List[Dim]]:
    """NumPy broadcasting of two program shapes (symbols equal only to themselves)."""
    out: List[Dim] = []
    for i in range(max(len(a), len(b))):
        da = a[len(a) - 1 - i] if i < len(a) else 1
        db = b[len(b) - 1 - i] if i < len(b) else 1
        if da == db or db == 1:
            out.append(da)
        elif da == 1:
            out.append(db)
        else:
            return None
    return out[::-1]


def int_constant(tensor: torch.Tensor) -> Optional[IntConst]:
    """An integer constant known by value: uniform, or ``0..n-1`` along the last dim."""
    if tensor.dtype not in (torch.int64, torch.int32) or tensor.numel() == 0:
        return None
    dtype = TORCH_DTYPES[tensor.dtype]
    flat = tensor.reshape(-1)
    if bool((flat == flat[0]).all()):
        return IntConst("uniform", int(flat[0]), list(tensor.shape), dtype)
    if tensor.dim() >= 1:
        n = tensor.shape[-1]
        ramp = torch.arange(n, dtype=tensor.dtype).expand_as(tensor)
        if bool((tensor == ramp).all()):
            return IntConst("arange", 0, list(tensor.shape), dtype)
    return None


# ---------------------------------------------------------------- handlers

Handler = Callable[[Lowerer, torch.fx.Node], Any]
HANDLERS: Dict[str, Handler] = {}


def handles(*names: str) -> Callable[[Handler], Handler]:
    """Registers a handler for ops named without overload (``aten.add``) or with it."""

    def register(fn: Handler) -> Handler:
        for name in names:
            HANDLERS[name] = fn
        return fn

    return register


def arg(node: torch.fx.Node, index: int, name: str, default: Any = None) -> Any:
    """Positional-or-keyword argument of a call node."""
    if index < len(node.args):
        return node.args[index]
    return node.kwargs.get(name, default)


def val(node: Any) -> Any:
    """The FakeTensor (or value) of a node argument."""
    return node.meta.get("val") if isinstance(node, torch.fx.Node) else node


def lazy_kind(lw: Lowerer, x: Any, kind: str) -> Optional[Lazy]:
    """The lazy value of node ``x`` when it is of ``kind``."""
    value = lw.env.get(x) if isinstance(x, torch.fx.Node) else None
    return value if isinstance(value, Lazy) and value.kind == kind else None


@handles("aten.sym_size")
def _sym_size(lw: Lowerer, node: torch.fx.Node) -> Any:
    """A symbolic size: the program binds symbols from input shapes, so nothing is emitted."""
    return Scalar(node.meta.get("val"))


@handles("getitem")
def _getitem(lw: Lowerer, node: torch.fx.Node) -> Any:
    """Element ``i`` of a tuple result (only ``native_layer_norm``'s output 0 is lowered)."""
    src, index = node.args
    value = lw.env[src]
    if not isinstance(value, Tuple_) or value.items[index] is None:
        raise Unsupported(node, f"element {index} of {src.name} is not lowered (a layer "
                                "norm's mean and rstd are not)")
    return value.items[index]


@handles("aten.linear")
def _linear(lw: Lowerer, node: torch.fx.Node) -> Any:
    """``linear(x, W[N,K], b?)`` -> ``Linear``."""
    x, w, b = arg(node, 0, "input"), arg(node, 1, "weight"), arg(node, 2, "bias")
    return linear_emit(lw, node, x, w, b)


def linear_emit(lw: Lowerer, node: torch.fx.Node, x: Any, w: Any, b: Any,
                weight_tensor: Optional[Tensor] = None) -> Tensor:
    """``Linear`` writing the node's output."""
    tx = lw.tensor(x, node)
    tw = weight_tensor or lw.tensor(w, node)
    tb = lw.tensor(b, node) if b is not None else None
    shape = lw.shape(node)
    tid = lw.b.op("Linear", lw.fresh("linear"), "F32", shape, x=tx.id, weight=tw.id,
                  bias=tb.id if tb else None)
    return Tensor(tid, shape)


@handles("aten.addmm", "aten.mm")
def _addmm(lw: Lowerer, node: torch.fx.Node) -> Any:
    """``addmm(bias, a, b)`` / ``mm(a, b)``: ``Linear`` when ``b`` is a transposed weight
    (``permute_copy(W, [1, 0])``), else ``MatMul``."""
    is_addmm = op_key(target_name(node)) == "aten.addmm"
    if is_addmm:
        bias, a, b = node.args[:3]
        if node.kwargs.get("beta", 1) != 1 or node.kwargs.get("alpha", 1) != 1:
            raise Unsupported(node, "addmm with beta or alpha other than 1")
        if val(bias) is None or len(val(bias).shape) != 1:
            raise Unsupported(node, "addmm's bias is not a [N] vector")
    else:
        a, b = node.args[:2]
        bias = None
    perm = lazy_kind(lw, b, "permute")
    if perm is not None and list(perm.src["perm"]) == [1, 0]:
        return linear_emit(lw, node, a, None, bias, weight_tensor=lw.tensor(perm.src["x"], node))
    return matmul_emit(lw, node, a, b, bias)


def matmul_emit(lw: Lowerer, node: torch.fx.Node, a: Any, b: Any, bias: Any) -> Tensor:
    """``MatMul``, folding a pending transpose of the last two dims of either operand."""
    flags = {}
    operands = []
    for name, x in (("a", a), ("b", b)):
        perm = lazy_kind(lw, x, "permute")
        p = list(perm.src["perm"]) if perm else None
        rank = len(p) if p else 0
        if p and rank >= 2 and p == list(range(rank - 2)) + [rank - 1, rank - 2]:
            operands.append(lw.tensor(perm.src["x"], node, full=False))
            flags[f"transpose_{name}"] = True
        else:
            operands.append(lw.tensor(x, node, full=False))
            flags[f"transpose_{name}"] = False
    tb = lw.tensor(bias, node) if bias is not None else None
    shape = lw.shape(node)
    tid = lw.b.op("MatMul", lw.fresh("matmul"), "F32", shape, a=operands[0].id,
                  b=operands[1].id, bias=tb.id if tb else None, **flags)
    return Tensor(tid, shape)


@handles("aten.bmm", "aten.matmul")
def _bmm(lw: Lowerer, node: torch.fx.Node) -> Any:
    """``bmm``/``matmul`` -> ``MatMul`` (batch dims broadcast)."""
    return matmul_emit(lw, node, node.args[0], node.args[1], None)


@handles("aten.embedding")
def _embedding(lw: Lowerer, node: torch.fx.Node) -> Any:
    """``embedding(table, ids)`` -> ``Gather``; uniform ids -> one row of the table,
    broadcast."""
    table, ids = node.args[:2]
    ids_value = lw.env.get(ids)
    tt = lw.tensor(table, node)
    if isinstance(ids_value, IntConst) and ids_value.kind == "uniform":
        hidden = lw.b.shape_of(tt.id)[-1]
        row = ids_value.value
        sid = lw.b.op("Slice", lw.fresh("slice"), lw.b.dtype_of(tt.id), [1, hidden],
                      x=tt.id, axis=0, start=row, end=row + 1)
        return Tensor(sid, [1, hidden])
    if lw.b.dtype_of(tt.id) not in ("F32", "F16", "BF16"):
        raise Unsupported(node, f"embedding table of dtype {lw.b.dtype_of(tt.id)}")
    ti = lw.tensor(ids, node)
    shape = lw.shape(node)
    tid = lw.b.op("Gather", lw.fresh("gather"), "F32", shape, table=tt.id, ids=ti.id)
    return Tensor(tid, shape)


BINARY_OPS = {"aten.add": "Add", "aten.sub": "Sub", "aten.mul": "Mul", "aten.div": "Div"}


@handles("aten.add", "aten.sub", "aten.mul", "aten.div", "aten.rsub")
def _binary(lw: Lowerer, node: torch.fx.Node) -> Any:
    """Element-wise arithmetic: two tensors -> ``Binary``; a tensor and a number ->
    ``Scale``; plus the pooling / normalisation patterns (see the module doc)."""
    key = op_key(target_name(node))
    a, b = node.args[:2]
    alpha = node.kwargs.get("alpha", node.args[2] if len(node.args) > 2 else 1)
    if alpha != 1:
        raise Unsupported(node, f"alpha {alpha} (only 1 is lowered)")
    if key == "aten.div" and node.kwargs.get("rounding_mode") is not None:
        raise Unsupported(node, "division with a rounding mode")
    sa, sb = lw.scalar(node, a), lw.scalar(node, b)
    if key == "aten.rsub":
        if sb is None:
            raise Unsupported(node, "rsub of two tensors")
        return lw.scale_emit(node, a, -1.0, sb)
    if sa is not None and sb is not None:
        raise Unsupported(node, "arithmetic on two numbers")
    if sb is not None or sa is not None:
        x, c = (a, sb) if sb is not None else (b, sa)
        if key == "aten.add":
            return lw.scale_emit(node, x, 1.0, c)
        if key == "aten.sub":
            return lw.scale_emit(node, x, 1.0, -c) if sb is not None else \
                lw.scale_emit(node, x, -1.0, c)
        if key == "aten.mul":
            return lw.scale_emit(node, x, c, 0.0)
        if sb is not None and c != 0:
            # x / c as x * (1 / c): exact for powers of two, else within an ulp.
            return lw.scale_emit(node, x, 1.0 / c, 0.0)
        raise Unsupported(node, "a number divided by a tensor")
    if key == "aten.mul":
        mask = mask_source(lw, b) or mask_source(lw, a)
        if mask is not None:
            x = a if mask_source(lw, b) is not None else b
            return Lazy("masked", node, {"x": x, "m": b if x is a else a, "mask": mask})
        if a is b:
            return Lazy("square", node, {"x": a})
        for x, other in ((a, b), (b, a)):
            sig = lazy_kind(lw, other, "sigmoid")
            if sig is not None and sig.src["x"] is x:
                # x * sigmoid(x): SiLU as decomposed by export.
                tx = lw.tensor(x, node)
                shape = lw.shape(node)
                tid = lw.b.op("Unary", lw.fresh("silu"), "F32", shape, op="Silu", x=tx.id)
                return Tensor(tid, shape)
    if key == "aten.div":
        pooled = lazy_kind(lw, a, "masked_sum")
        count = lazy_kind(lw, b, "mask_count")
        if pooled is not None and count is not None and \
                pooled.src["mask"] is count.src["mask"] and \
                0.0 < count.src.get("eps", -1.0) <= 1.0:
            # MeanPool divides by max(count, 1e-9); any eps in (0, 1] agrees on whole counts.
            return mean_pool_emit(lw, node, pooled.src["x"], pooled.src["mask"])
        norm = strip_expand(lw, b, "norm")
        if norm is not None and norm.src["x"] is a and norm.src.get("eps") is not None:
            tx = lw.tensor(a, node)
            shape = lw.shape(node)
            tid = lw.b.op("L2Normalize", lw.fresh("l2_normalize"), "F32", shape, x=tx.id,
                          eps=float(norm.src["eps"]))
            return Tensor(tid, shape)
    return lw.binary_emit(node, BINARY_OPS[key], a, b)


def strip_expand(lw: Lowerer, x: Any, kind: str) -> Optional[Lazy]:
    """The lazy value of ``kind`` behind ``x`` or behind an ``expand`` of it."""
    value = lw.env.get(x) if isinstance(x, torch.fx.Node) else None
    while isinstance(value, Lazy) and value.kind == "expand":
        value = lw.env.get(value.src["x"])
    return value if isinstance(value, Lazy) and value.kind == kind else None


def mask_source(lw: Lowerer, x: Any) -> Optional[torch.fx.Node]:
    """The ``[B, S]`` mask node behind ``x`` when ``x`` is the mask unsqueezed to
    ``[B, S, 1]``, cast to float and possibly expanded (sentence-transformers' pooling)."""
    value = lw.env.get(x) if isinstance(x, torch.fx.Node) else None
    while isinstance(value, Lazy) and value.kind in ("expand", "cast_view"):
        if value.kind == "cast_view":
            return value.src["unsqueezed_from"]
        value = lw.env.get(value.src["x"])
    return None


def mean_pool_emit(lw: Lowerer, node: torch.fx.Node, x: Any, mask: torch.fx.Node) -> Tensor:
    """``MeanPool(x, mask)``."""
    tx = lw.tensor(x, node)
    tm = lw.tensor(mask, node)
    shape = lw.shape(node)
    tid = lw.b.op("MeanPool", lw.fresh("mean_pool"), "F32", shape, x=tx.id, mask=tm.id)
    return Tensor(tid, shape)


@handles("aten.sum")
def _sum(lw: Lowerer, node: torch.fx.Node) -> Any:
    """Sums exist only inside patterns: ``sum(h * mask, 1)``, ``sum(mask, 1)`` (mean pooling)
    and ``sum(x * x, -1, keepdim)`` (L2 norm)."""
    x = node.args[0]
    dims = arg(node, 1, "dim")
    keepdim = arg(node, 2, "keepdim", False)
    rank = len(val(x).shape)
    dims = [d % rank for d in (dims or [])]
    masked = lazy_kind(lw, x, "masked")
    if masked is not None and dims == [1] and not keepdim:
        return Lazy("masked_sum", node, {"x": masked.src["x"], "mask": masked.src["mask"]})
    mask = mask_source(lw, x)
    if mask is not None and dims == [1] and not keepdim:
        return Lazy("mask_count", node, {"mask": mask})
    square = lazy_kind(lw, x, "square")
    if square is not None and dims == [rank - 1] and keepdim:
        return Lazy("sum_sq", node, {"x": square.src["x"]})
    return Lazy("sum", node, {"x": x})


@handles("aten.pow")
def _pow(lw: Lowerer, node: torch.fx.Node) -> Any:
    """``x ** 2`` (a square, kept lazy for the L2 norm pattern) and ``sum_sq ** 0.5``."""
    x, exponent = node.args[:2]
    if exponent == 2:
        return Lazy("square", node, {"x": x})
    sum_sq = lazy_kind(lw, x, "sum_sq")
    if exponent == 0.5 and sum_sq is not None:
        return Lazy("norm", node, {"x": sum_sq.src["x"]})
    raise Unsupported(node, f"power {exponent}")


@handles("aten.sqrt")
def _sqrt(lw: Lowerer, node: torch.fx.Node) -> Any:
    """``sqrt(sum(x * x, -1, keepdim))``: the L2 norm pattern."""
    sum_sq = lazy_kind(lw, node.args[0], "sum_sq")
    if sum_sq is None:
        raise Unsupported(node, "sqrt outside an L2 normalisation")
    return Lazy("norm", node, {"x": sum_sq.src["x"]})


@handles("aten.linalg_vector_norm")
def _vector_norm(lw: Lowerer, node: torch.fx.Node) -> Any:
    """``linalg_vector_norm(x, 2, [-1], keepdim=True)``: the L2 norm pattern."""
    x = node.args[0]
    ord_ = arg(node, 1, "ord", 2)
    dims = arg(node, 2, "dim")
    keepdim = arg(node, 3, "keepdim", False)
    rank = len(val(x).shape)
    if ord_ != 2 or [d % rank for d in (dims or [])] != [rank - 1] or not keepdim:
        raise Unsupported(node, "a vector norm other than the L2 norm over the last dim")
    return Lazy("norm", node, {"x": x})


@handles("aten.sigmoid")
def _sigmoid(lw: Lowerer, node: torch.fx.Node) -> Any:
    """``sigmoid(x)`` exists only as SiLU's half: ``x * sigmoid(x)``."""
    return Lazy("sigmoid", node, {"x": node.args[0]})


@handles("aten.clamp", "aten.clamp_min")
def _clamp(lw: Lowerer, node: torch.fx.Node) -> Any:
    """``clamp(norm, min=eps)`` and ``clamp(sum(mask), min=eps)``: the patterns' stabilisers."""
    x = node.args[0]
    lo = arg(node, 1, "min")
    hi = arg(node, 2, "max") if op_key(target_name(node)) == "aten.clamp" else None
    if hi is not None or lo is None:
        raise Unsupported(node, "clamp other than clamp(min=eps)")
    for kind in ("norm", "mask_count"):
        value = lazy_kind(lw, x, kind)
        if value is not None:
            return Lazy(kind, node, {**value.src, "eps": float(lo)})
    raise Unsupported(node, "clamp outside mean pooling or L2 normalisation")


UNARY = {"aten.relu": "Relu", "aten.tanh": "Tanh", "aten.silu": "Silu"}


@handles("aten.gelu", "aten.relu", "aten.tanh", "aten.silu")
def _unary(lw: Lowerer, node: torch.fx.Node) -> Any:
    """``gelu`` (erf or tanh form), ``relu``, ``tanh``, ``silu`` -> ``Unary``."""
    key = op_key(target_name(node))
    if key == "aten.gelu":
        approximate = node.kwargs.get("approximate", node.args[1] if len(node.args) > 1
                                      else "none")
        fn = {"none": "Gelu", "tanh": "GeluTanh"}.get(approximate)
        if fn is None:
            raise Unsupported(node, f"gelu approximate={approximate!r}")
    else:
        fn = UNARY[key]
    tx = lw.tensor(node.args[0], node)
    shape = lw.shape(node)
    tid = lw.b.op("Unary", lw.fresh(fn.lower()), "F32", shape, op=fn, x=tx.id)
    return Tensor(tid, shape)


@handles("aten.native_layer_norm", "aten.layer_norm")
def _layer_norm(lw: Lowerer, node: torch.fx.Node) -> Any:
    """Layer norm over the last dim with weight and bias -> ``LayerNorm``."""
    x, normalized_shape, weight, bias = node.args[:4]
    eps = node.args[4] if len(node.args) > 4 else node.kwargs.get("eps", 1e-5)
    if len(normalized_shape) != 1:
        raise Unsupported(node, "layer norm over more than the last dim")
    if weight is None or bias is None:
        raise Unsupported(node, "layer norm without weight or bias")
    tx = lw.tensor(x, node)
    tg, tb = lw.tensor(weight, node), lw.tensor(bias, node)
    shape = [lw.dim(node, s) for s in val(x).shape]
    tid = lw.b.op("LayerNorm", lw.fresh("layer_norm"), "F32", shape, x=tx.id, gamma=tg.id,
                  beta=tb.id, eps=float(eps))
    result = Tensor(tid, shape)
    if op_key(target_name(node)) == "aten.native_layer_norm":
        return Tuple_([result, None, None])
    return result


@handles("aten._softmax", "aten.softmax")
def _softmax(lw: Lowerer, node: torch.fx.Node) -> Any:
    """Softmax over the last dim -> ``Softmax``; ``x + mask`` folds into its mask."""
    x, dim = node.args[:2]
    rank = len(val(x).shape)
    if dim % rank != rank - 1:
        raise Unsupported(node, f"softmax over dim {dim}, not the last")
    tx = lw.tensor(x, node)
    shape = lw.shape(node)
    tid = lw.b.op("Softmax", lw.fresh("softmax"), "F32", shape, x=tx.id, mask=None)
    return Tensor(tid, shape)


@handles("aten.view_copy", "aten.view", "aten.reshape", "aten._unsafe_view", "aten.alias_copy",
         "aten.alias", "aten.squeeze_copy", "aten.clone", "dim_order_ops._clone_dim_order")
def _view(lw: Lowerer, node: torch.fx.Node) -> Any:
    """Views and copies -> ``Reshape`` (nothing when the shape is unchanged)."""
    key = target_name(node)
    if "dim_order" in key or "clone" in key:
        check_contiguous(node)
    return lw.reshape_emit(node, node.args[0])


@handles("aten.unsqueeze_copy", "aten.unsqueeze")
def _unsqueeze(lw: Lowerer, node: torch.fx.Node) -> Any:
    """``unsqueeze`` -> ``Reshape``; an integer mask unsqueezed at the end stays lazy for
    mean pooling."""
    x, dim = node.args[:2]
    rank = len(val(x).shape)
    value = lw.env.get(x)
    if isinstance(value, IntConst):
        shape = list(value.shape)
        shape.insert(dim % (rank + 1), 1)
        return IntConst(value.kind, value.value, shape, value.dtype) \
            if value.kind == "uniform" or dim % (rank + 1) != rank else lw.reshape_emit(node, x)
    if rank == 2 and dim % 3 == 2 and val(x).dtype in (torch.int64, torch.int32, torch.bool):
        return Lazy("cast_view", node, {"x": x, "unsqueezed_from": x, "reshape_of": x})
    return lw.reshape_emit(node, x)


def check_contiguous(node: torch.fx.Node) -> None:
    """Refuses a dim-order op that asks for a non-contiguous layout."""
    dim_order = node.kwargs.get("dim_order")
    if dim_order is not None and list(dim_order) != list(range(len(dim_order))):
        raise Unsupported(node, f"dim order {list(dim_order)} (only contiguous tensors)")


@handles("dim_order_ops._to_dim_order_copy", "aten._to_copy")
def _to_copy(lw: Lowerer, node: torch.fx.Node) -> Any:
    """dtype conversions -> ``Cast`` (a same-dtype copy is nothing)."""
    check_contiguous(node)
    x = node.args[0]
    mask = mask_source(lw, x)
    if mask is not None and val(node).dtype == torch.float32:
        # The pooling mask's float view stays lazy (and can still be emitted).
        return Lazy("cast_view", node, {"x": x, "unsqueezed_from": mask})
    if val(x).dtype == val(node).dtype:
        return lw.reshape_emit(node, x)
    tx = lw.tensor(x, node)
    shape = lw.shape(node)
    tid = lw.b.op("Cast", lw.fresh("cast"), lw.dtype(node), shape, x=tx.id)
    return Tensor(tid, shape)


@handles("aten.permute_copy", "aten.permute", "aten.transpose_copy", "aten.transpose",
         "aten.t_copy", "aten.t")
def _permute(lw: Lowerer, node: torch.fx.Node) -> Any:
    """Permutes stay lazy (a consumer may fold them); emitted as ``Permute``."""
    x = node.args[0]
    rank = len(val(x).shape)
    key = op_key(target_name(node))
    if key in ("aten.permute_copy", "aten.permute"):
        perm = [d % rank for d in node.args[1]]
    elif key in ("aten.t_copy", "aten.t"):
        perm = [1, 0] if rank == 2 else list(range(rank))
    else:
        d0, d1 = node.args[1] % rank, node.args[2] % rank
        perm = list(range(rank))
        perm[d0], perm[d1] = perm[d1], perm[d0]
    if perm == list(range(rank)):
        return lw.reshape_emit(node, x)
    return Lazy("permute", node, {"x": x, "perm": perm})


@handles("aten.expand_copy", "aten.expand")
def _expand(lw: Lowerer, node: torch.fx.Node) -> Any:
    """``expand`` is a pending broadcast: binary ops and batched matmuls broadcast."""
    x = node.args[0]
    value = lw.env.get(x)
    if isinstance(value, IntConst):
        return IntConst(value.kind, value.value, lw.shape(node), value.dtype)
    if tuple(val(x).shape) == tuple(val(node).shape):
        return value
    if isinstance(value, Lazy) and value.kind in ("cast_view", "norm", "expand"):
        return Lazy("expand", node, {"x": x})
    tx = lw.tensor(x, node, full=False)
    if tx.shape == lw.shape(node):
        return tx
    return Tensor(tx.id, tx.shape)


@handles("aten.slice_copy", "aten.slice")
def _slice(lw: Lowerer, node: torch.fx.Node) -> Any:
    """``slice`` with step 1 -> ``Slice``; a slice of a known integer constant stays
    known."""
    x = node.args[0]
    dim = arg(node, 1, "dim", 0)
    start = arg(node, 2, "start", None) or 0
    end = arg(node, 3, "end", None)
    step = arg(node, 4, "step", 1)
    rank = len(val(x).shape)
    dim %= rank
    if step != 1:
        raise Unsupported(node, f"slice step {step}")
    value = lw.env.get(x)
    if isinstance(value, IntConst) and (value.kind == "uniform" or
                                        (dim == rank - 1 and start == 0)):
        return IntConst(value.kind, value.value, lw.shape(node), value.dtype)
    if isinstance(start, torch.fx.Node):
        raise Unsupported(node, "slice with a symbolic start")
    extent = val(x).shape[dim]
    if isinstance(end, torch.fx.Node):
        end = val(end)
    if end is not None and not isinstance(end, int):
        if str(end) == str(extent):
            end = None
        else:
            raise Unsupported(node, f"slice with a symbolic end {end}")
    elif end is not None and (end >= sys.maxsize or (isinstance(extent, int) and end >= extent)):
        end = None
    if isinstance(extent, int):
        # Python's negative bounds, counted from a fixed extent.
        if start < 0:
            start = max(0, start + extent)
        if end is not None and end < 0:
            end = max(0, end + extent)
    elif start == -1 and end is None:
        return last_row_emit(lw, node, x, dim)
    tx = lw.tensor(x, node)
    shape = lw.shape(node)
    if start == 0 and end is None:
        return tx
    if start < 0 or (end is not None and end < 0):
        raise Unsupported(node, "slice with a negative bound along a symbolic dim (only "
                                "x[-1:], the last row, is lowered)")
    tid = lw.b.op("Slice", lw.fresh("slice"), lw.b.dtype_of(tx.id), shape, x=tx.id,
                  axis=dim, start=int(start), end=None if end is None else int(end))
    return Tensor(tid, shape)


def last_row_emit(lw: Lowerer, node: torch.fx.Node, x: Any, dim: int) -> Tensor:
    """``x[-1:]`` along dim 0 of symbolic extent ``S`` (a decoder's last-token logits): the
    program's ``Slice`` has a fixed start, so the row index ``S - 1`` is computed in the
    program, exactly: ``Argmax`` of the f32 ramp ``Range(S)`` (integers below 2^24 are exact in
    f32, and the ramp's maximum is unique), then ``Gather`` of that row (of ``x`` viewed as
    ``[S, rest]`` when it has more than two dims)."""
    if dim != 0:
        raise Unsupported(node, "x[-1:] along a symbolic dim other than the first")
    tx = lw.tensor(x, node)
    if lw.b.dtype_of(tx.id) != "F32":
        raise Unsupported(node, "x[-1:] of a non-f32 tensor")
    if len(tx.shape) < 2:
        raise Unsupported(node, "x[-1:] of a 1-D tensor (the program gathers rows)")
    rows = tx.shape[0]
    rest = tx.shape[1:]
    table = tx.id
    if len(rest) > 1:
        width = 1
        for d in rest:
            if not isinstance(d, int):
                raise Unsupported(node, "x[-1:] of a tensor with more than one symbolic dim")
            width *= d
        table = lw.b.op("Reshape", lw.fresh("reshape"), "F32", [rows, width], x=table)
    ramp = lw.b.op("Range", lw.fresh("range"), "F32", [rows])
    ramp = lw.b.op("Reshape", lw.fresh("reshape"), "F32", [1, rows], x=ramp)
    last = lw.b.op("Argmax", lw.fresh("last_index"), "I32", [1], x=ramp)
    width_shape = [1, lw.b.shape_of(table)[-1]]
    tid = lw.b.op("Gather", lw.fresh("last_row"), "F32", width_shape, table=table, ids=last)
    shape = lw.shape(node)
    if shape != width_shape:
        tid = lw.b.op("Reshape", lw.fresh("reshape"), "F32", shape, x=tid)
    return Tensor(tid, shape)


@handles("aten.cat", "aten.concat")
def _cat(lw: Lowerer, node: torch.fx.Node) -> Any:
    """``cat`` -> ``Concat``."""
    tensors = node.args[0]
    dim = arg(node, 1, "dim", 0)
    rank = len(val(node).shape)
    ids = [lw.tensor(t, node).id for t in tensors]
    shape = lw.shape(node)
    tid = lw.b.op("Concat", lw.fresh("concat"), lw.dtype(node), shape, inputs=ids,
                  axis=dim % rank)
    return Tensor(tid, shape)


@handles("aten.arange")
def _arange(lw: Lowerer, node: torch.fx.Node) -> Any:
    """``arange(0, n, 1)`` -> a known ramp, emitted as ``Range`` where a tensor is needed."""
    key = target_name(node)
    args = list(node.args)
    if key.endswith(".default") or len(args) == 1:
        start, end, step = 0, args[0], 1
    else:
        start = args[0]
        end = args[1]
        step = args[2] if len(args) > 2 else node.kwargs.get("step", 1)
    if start != 0 or step != 1:
        raise Unsupported(node, f"arange({start}, {end}, {step}): only 0..n step 1")
    return IntConst("arange", 0, lw.shape(node), lw.dtype(node))


@handles("aten.gather")
def _gather(lw: Lowerer, node: torch.fx.Node) -> Any:
    """``gather`` of a uniform integer constant (BERT's buffered ``token_type_ids`` gathered
    at the position ids) is that constant; other gathers are not lowered."""
    value = lw.env.get(node.args[0])
    if isinstance(value, IntConst) and value.kind == "uniform":
        return IntConst("uniform", value.value, lw.shape(node), value.dtype)
    raise Unsupported(node, "gather along a dim (only embedding lookups are lowered)")


@handles("aten.scalar_tensor")
def _scalar_tensor(lw: Lowerer, node: torch.fx.Node) -> Any:
    """A 0-dim constant: a number for the arithmetic that consumes it."""
    return Scalar(node.args[0])


def supported_op_names() -> List[str]:
    """The ops the lowering knows (some only inside patterns)."""
    return sorted(HANDLERS)


# ---------------------------------------------------------------- decoders


def positions_i32(lw: Lowerer, node: torch.fx.Node, positions: Any) -> int:
    """The program's i32 ``[S]`` positions for an i32/i64 positions operand (one ``Cast``
    per operand, shared by every op that reads it)."""
    memo = lw.__dict__.setdefault("_positions_i32", {})
    if positions in memo:
        return memo[positions]
    tp = lw.tensor(positions, node)
    if len(tp.shape) != 1:
        raise Unsupported(node, f"positions are {lw.text(tp.shape)}, expected [S]")
    pid = tp.id
    if lw.b.dtype_of(pid) != "I32":
        if lw.b.dtype_of(pid) != "I64":
            raise Unsupported(node, "positions must be i32 or i64")
        pid = lw.b.op("Cast", lw.fresh("positions"), "I32", tp.shape, x=pid)
    memo[positions] = pid
    return pid


@handles("aten.rms_norm")
def _rms_norm(lw: Lowerer, node: torch.fx.Node) -> Any:
    """``rms_norm(x, [H], weight?, eps)`` -> ``RmsNorm``."""
    x, normalized_shape = node.args[:2]
    weight = arg(node, 2, "weight")
    eps = arg(node, 3, "eps")
    if len(normalized_shape) != 1:
        raise Unsupported(node, "RMS norm over more than the last dim")
    if eps is None:
        eps = float(torch.finfo(val(x).dtype).eps)
    tx = lw.tensor(x, node)
    tw = lw.tensor(weight, node) if weight is not None else None
    shape = lw.shape(node)
    tid = lw.b.op("RmsNorm", lw.fresh("rms_norm"), "F32", shape, x=tx.id,
                  weight=tw.id if tw else None, eps=float(eps))
    return Tensor(tid, shape)


@handles("webdelegate.rope")
def _rope(lw: Lowerer, node: torch.fx.Node) -> Any:
    """``webdelegate::rope`` -> ``Rope``."""
    x, positions, dims, base, neox = node.args[:5]
    tx = lw.tensor(x, node)
    pid = positions_i32(lw, node, positions)
    shape = lw.shape(node)
    tid = lw.b.op("Rope", lw.fresh("rope"), "F32", shape, x=tx.id, positions=pid,
                  dims=int(dims), base=float(base), style="Neox" if neox else "GptJ")
    return Tensor(tid, shape)


@handles("webdelegate.attention_with_cache")
def _attention_with_cache(lw: Lowerer, node: torch.fx.Node) -> Any:
    """``webdelegate::attention_with_cache`` -> ``Attention`` writing the two cache states in
    place: the op's cache results ARE the states, so the buffer mutations they feed need no
    copy."""
    q, k, v, k_cache, v_cache, positions = node.args[:6]
    scale = arg(node, 6, "scale")
    window = arg(node, 7, "window", 0)
    softcap = arg(node, 8, "softcap", 0.0)
    caches = []
    for name, cache in (("k_cache", k_cache), ("v_cache", v_cache)):
        tc = lw.tensor(cache, node)
        if tc.id not in lw.b.states:
            raise Unsupported(node, f"{name} ({cache.name}) is not a mutable buffer of the "
                                    "delegate (tag it with the partition: it becomes a state)")
        caches.append(tc)
    tq, tk, tv = (lw.tensor(t, node) for t in (q, k, v))
    pid = positions_i32(lw, node, positions)
    out_val = node.meta["val"][0]
    shape = [lw.dim(node, s) for s in out_val.shape]
    tid = lw.b.op("Attention", lw.fresh("attention"), "F32", shape, q=tq.id, k=tk.id,
                  v=tv.id, k_cache=caches[0].id, v_cache=caches[1].id, positions=pid,
                  scale=float(scale), window=int(window), softcap=float(softcap))
    return Tuple_([Tensor(tid, shape), caches[0], caches[1]])
