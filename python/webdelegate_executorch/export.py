"""``export_to_pte``: ``torch.export`` -> ``to_edge_transform_and_lower`` with
``WebDelegatePartitioner`` -> ``<name>.pte`` and ``<tag>.ptd``."""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Dict, Optional, Tuple

import torch
from executorch.exir import EdgeCompileConfig, ExecutorchBackendConfig, to_edge_transform_and_lower

from .backend import DUMP_DIR_ENV
from .partitioner import WebDelegatePartitioner


@dataclass
class ExportResult:
    """What :func:`export_to_pte` wrote and what stayed outside the delegate."""

    pte_path: Path
    ptd_paths: Dict[str, Path]
    partitions: int
    unsupported_ops: Dict[str, int] = field(default_factory=dict)
    unsupported_nodes: Dict[str, str] = field(default_factory=dict)
    kernel_ops: Tuple[str, ...] = ()


def export_to_pte(model: torch.nn.Module, example_inputs: Tuple[Any, ...],
                  out_dir: os.PathLike | str, name: str,
                  dynamic_shapes: Optional[Any] = None, external_tag: str = "model",
                  alignment: int = 16, dump_dir: Optional[os.PathLike | str] = None,
                  strict: bool = False) -> ExportResult:
    """Exports ``model`` for webdelegate: writes ``<out_dir>/<name>.pte`` (the program, whose
    delegate blob names ``WebDelegateBackend``) and ``<out_dir>/<external_tag>.ptd`` (every
    weight the delegate reads, keyed by fully-qualified name).

    ``dynamic_shapes`` is passed to ``torch.export.export``; dynamic dims become program
    symbols. ``dump_dir`` receives each partition's program JSON and text dump. With
    ``strict``, an op left outside the delegate is an error instead of a
    kernel call in the ``.pte``.
    """
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    model = model.eval()
    with torch.no_grad():
        exported = torch.export.export(model, tuple(example_inputs),
                                       dynamic_shapes=dynamic_shapes, strict=False)
    partitioner = WebDelegatePartitioner(external_tag=external_tag, alignment=alignment)
    saved = os.environ.get(DUMP_DIR_ENV)
    if dump_dir:
        os.environ[DUMP_DIR_ENV] = os.fspath(dump_dir)
    try:
        edge = to_edge_transform_and_lower(
            exported,
            partitioner=[partitioner],
            compile_config=EdgeCompileConfig(_check_ir_validity=False),
        )
    finally:
        if dump_dir:
            if saved is None:
                os.environ.pop(DUMP_DIR_ENV, None)
            else:
                os.environ[DUMP_DIR_ENV] = saved
    kernel_ops = tuple(sorted({
        str(node.target) for node in edge.exported_program().graph.nodes
        if node.op == "call_function" and "executorch_call_delegate" not in str(node.target)
        and "getitem" not in str(node.target)
    }))
    if strict and (partitioner.unsupported_ops or partitioner.partition_count != 1):
        raise RuntimeError(
            f"{name}: not one delegate ({partitioner.partition_count} partitions); outside: "
            f"{partitioner.unsupported_nodes}")
    program = edge.to_executorch(ExecutorchBackendConfig())
    pte_path = out / f"{name}.pte"
    with open(pte_path, "wb") as f:
        program.write_to_file(f)
    program.write_tensor_data_to_file(os.fspath(out))
    ptd_paths = {tag: out / f"{tag}.ptd" for tag in [external_tag] if external_tag
                 and (out / f"{tag}.ptd").exists()}
    return ExportResult(pte_path, ptd_paths, partitioner.partition_count,
                        dict(partitioner.unsupported_ops), dict(partitioner.unsupported_nodes),
                        kernel_ops)
