"""``WebDelegatePartitioner``: tags every edge op the program can express for the
``WebDelegateBackend``; ops it cannot lower stay outside and are recorded."""

from __future__ import annotations

import logging
from typing import Callable, Dict, List, Optional, Set, Tuple

import torch
from executorch.exir.backend.compile_spec_schema import CompileSpec
from executorch.exir.backend.partitioner import (
    DelegationSpec,
    Partitioner,
    PartitionResult,
)
from executorch.exir.backend.utils import tag_constant_data, tag_mutated_buffer
from torch.export import ExportedProgram
from torch.fx.passes.infra.partitioner import CapabilityBasedPartitioner
from torch.fx.passes.operator_support import OperatorSupportBase

from . import custom_ops
from .backend import WebDelegateBackend
from .backend import compile_specs as make_compile_specs
from .lowering import Lowerer, target_name

logger = logging.getLogger(__name__)

#: Ops kept whole through ``to_edge_transform_and_lower`` (the program has them as one op).
OPS_TO_NOT_DECOMPOSE = [
    torch.ops.aten.linear.default,
    torch.ops.aten.rms_norm.default,
    custom_ops.rope,
    custom_ops.attention_with_cache,
    torch.ops.aten.layer_norm.default,
    torch.ops.aten.gelu.default,
    torch.ops.aten.silu.default,
    torch.ops.aten.matmul.default,
]


class _Supported(OperatorSupportBase):
    """Support is membership in the set the probing lowering accepted."""

    def __init__(self, supported: Set[str]):
        super().__init__()
        self.supported = supported

    def is_node_supported(self, submodules, node: torch.fx.Node) -> bool:  # noqa: D102
        return node.op == "call_function" and node.name in self.supported


def _sym_sizes_per_partition(graph: torch.fx.Graph) -> None:
    """Gives each partition its own copy of a ``sym_size`` node that several partitions (or
    the partition and the graph outside) read, so no Int EValue crosses a delegate boundary:
    each delegate binds the symbol from the tensor it receives."""
    for node in list(graph.nodes):
        if node.op != "call_function" or "sym_size" not in str(node.target):
            continue
        own = node.meta.get("delegation_tag")
        by_tag: Dict[Optional[str], List[torch.fx.Node]] = {}
        for user in node.users:
            by_tag.setdefault(user.meta.get("delegation_tag"), []).append(user)
        for tag, users in by_tag.items():
            if tag == own:
                continue
            with graph.inserting_after(node):
                copy = graph.call_function(node.target, node.args, node.kwargs)
            copy.meta = dict(node.meta)
            if tag is None:
                copy.meta.pop("delegation_tag", None)
            else:
                copy.meta["delegation_tag"] = tag
            for user in users:
                user.replace_input_with(node, copy)


class WebDelegatePartitioner(Partitioner):
    """Tags the nodes of an edge program that webdelegate's program can run.

    Support is decided by running the same lowering ``WebDelegateBackend.preprocess`` runs,
    in probe mode, to a fixed point: a node whose lowering fails (no lowering for its op, a
    dtype or shape the program cannot express, a lazy value such as a bare ``sum`` that no
    pattern consumes) is treated as an opaque input and the graph is probed again, until no
    new failure appears. The glue (``getitem``, ``_clone_dim_order``, ``sym_size``) is
    claimed with the rest, so a transformer lands in one delegate.

    After :meth:`partition`, :attr:`unsupported_ops` maps each op left outside to a count and
    :attr:`unsupported_nodes` maps node names to the reason (both are also logged).
    """

    def __init__(self, compile_specs: Optional[List[CompileSpec]] = None,
                 external_tag: str = "model", alignment: int = 16,
                 max_probe_rounds: int = 16):
        """``compile_specs`` (see :func:`webdelegate_executorch.backend.compile_specs`) win
        over the convenience arguments: ``external_tag`` names the ``.ptd`` the weights go to
        (``""`` keeps them in the ``.pte``), ``alignment`` is each weight's byte alignment."""
        super().__init__()
        if compile_specs is None:
            compile_specs = make_compile_specs(external_tag, alignment)
        self.delegation_spec = DelegationSpec(WebDelegateBackend.__name__,
                                              list(compile_specs))
        self.max_probe_rounds = max_probe_rounds
        self.unsupported_nodes: Dict[str, str] = {}
        self.unsupported_ops: Dict[str, int] = {}
        self.partition_count = 0

    def ops_to_not_decompose(
        self, ep: ExportedProgram
    ) -> Tuple[List[torch._ops.OpOverload], Optional[Callable[[torch.fx.Node], bool]]]:
        """``linear``, ``layer_norm``, ``rms_norm``, ``gelu``, ``matmul`` and our custom
        ``rope`` / ``attention_with_cache`` stay whole (one program op each)."""
        return OPS_TO_NOT_DECOMPOSE, None

    def probe(self, exported_program: ExportedProgram) -> Dict[torch.fx.Node, str]:
        """The nodes the lowering cannot express, with reasons (a fixed point)."""
        opaque: Dict[torch.fx.Node, str] = {}
        for _ in range(self.max_probe_rounds):
            lowerer = Lowerer(exported_program, probe=True, opaque=set(opaque))
            try:
                lowerer.run()
            except Exception as error:  # a placeholder or output the lowering refuses
                node = getattr(error, "node", None)
                if node is None or node in opaque:
                    raise
                opaque[node] = str(error)
                continue
            new = {n: r for n, r in lowerer.failed.items() if n not in opaque}
            # A node consumed by an opaque node must be a tensor at the delegate boundary.
            for node in exported_program.graph.nodes:
                if node.op != "call_function" or node in opaque or node in new:
                    continue
                if any(user in opaque or user in new for user in node.users):
                    try:
                        lowerer.tensor(node, node)
                    except Exception as error:  # noqa: BLE001 - any failure keeps it out
                        new[node] = f"its value is needed outside the delegate: {error}"
            if not new:
                return opaque
            opaque.update(new)
        raise RuntimeError("WebDelegatePartitioner: support did not converge in "
                           f"{self.max_probe_rounds} rounds")

    def partition(self, exported_program: ExportedProgram) -> PartitionResult:
        """Tags the supported nodes (one tag per connected partition), then the constants
        and mutable buffers only they read."""
        unsupported = self.probe(exported_program)
        supported = {
            node.name
            for node in exported_program.graph.nodes
            if node.op == "call_function" and node not in unsupported
        }
        self.unsupported_nodes = {n.name: reason for n, reason in unsupported.items()}
        self.unsupported_ops = {}
        for node in unsupported:
            name = target_name(node)
            self.unsupported_ops[name] = self.unsupported_ops.get(name, 0) + 1
        for node, reason in unsupported.items():
            logger.warning("WebDelegatePartitioner: %s (%s) stays outside the delegate: %s",
                           node.name, target_name(node), reason)

        partitioner = CapabilityBasedPartitioner(
            exported_program.graph_module,
            _Supported(supported),
            allows_single_node_partition=True,
        )
        partitions = partitioner.propose_partitions()
        tags = {}
        for partition in partitions:
            tag = f"webdelegate_{partition.id}"
            for node in partition.nodes:
                node.meta["delegation_tag"] = tag
            tags[tag] = self.delegation_spec
        self.partition_count = len(partitions)
        _sym_sizes_per_partition(exported_program.graph_module.graph)
        tag_constant_data(exported_program)
        tag_mutated_buffer(exported_program)
        logger.info("WebDelegatePartitioner: %d partition(s), %d node(s) outside",
                    len(partitions), len(unsupported))
        return PartitionResult(tagged_exported_program=exported_program, partition_tags=tags)
