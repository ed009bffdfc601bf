"""``WebDelegateBackend``: ExecuTorch's ``BackendDetails`` for webdelegate. ``preprocess``
lowers the tagged subgraph into webdelegate's versioned program blob (through the Rust CLI
``webdelegate-lower``) and hands every weight to ExecuTorch's named data, tagged so that it
lands in the ``.ptd`` file."""

from __future__ import annotations

import logging
import os
from typing import Dict, List

import torch
from executorch.exir._serialize._named_data_store import NamedDataStore
from executorch.exir.backend.backend_details import BackendDetails, PreprocessResult
from executorch.exir.backend.compile_spec_schema import CompileSpec
from torch.export import ExportedProgram

from .lower_cli import lower_program_json
from .lowering import Lowerer, Unsupported

logger = logging.getLogger(__name__)

#: Compile-spec keys ``preprocess`` reads (values are UTF-8 bytes).
SPEC_EXTERNAL_TAG = "external_tag"  # the .ptd name the weights go to (default "model")
SPEC_ALIGNMENT = "alignment"        # byte alignment of each weight (default 16)

#: Environment variable naming a directory for each partition's program JSON and text dump
#: (kept out of the compile specs, which the ``.pte`` records).
DUMP_DIR_ENV = "WEBDELEGATE_DUMP_DIR"

DEFAULT_EXTERNAL_TAG = "model"
DEFAULT_ALIGNMENT = 16


class PreprocessError(RuntimeError):
    """The tagged subgraph cannot be lowered; the message names the node and its op."""


def compile_specs(external_tag: str = DEFAULT_EXTERNAL_TAG,
                  alignment: int = DEFAULT_ALIGNMENT) -> List[CompileSpec]:
    """The compile specs ``WebDelegatePartitioner`` passes to ``preprocess`` (recorded in the
    ``.pte``): the ``.ptd`` tag and the weight alignment. An ``external_tag`` of ``""`` keeps
    the weights inside the ``.pte``."""
    return [
        CompileSpec(SPEC_EXTERNAL_TAG, external_tag.encode()),
        CompileSpec(SPEC_ALIGNMENT, str(alignment).encode()),
    ]


def _specs(specs: List[CompileSpec]) -> Dict[str, str]:
    return {spec.key: bytes(spec.value).decode() for spec in specs}


class WebDelegateBackend(BackendDetails):
    """The backend id written into the ``.pte`` is this class's name, ``WebDelegateBackend``."""

    @staticmethod
    def preprocess(edge_program: ExportedProgram,
                   compile_specs: List[CompileSpec]) -> PreprocessResult:
        """Lowers ``edge_program`` (one partition) into the program blob.

        Program inputs are the partition's tensor inputs and outputs its outputs, in the
        submodule's signature order; parameters and constant buffers are ``ParamRef``s with
        scope ``named_data`` and key = the tensor's fully-qualified name, their bytes stored
        as named data (``external_tag`` = the ``.ptd`` name); mutable buffers are states.
        """
        options = _specs(compile_specs)
        tag = options.get(SPEC_EXTERNAL_TAG, DEFAULT_EXTERNAL_TAG) or None
        alignment = int(options.get(SPEC_ALIGNMENT, DEFAULT_ALIGNMENT))
        try:
            lowerer = Lowerer(edge_program).run()
        except Unsupported as error:
            raise PreprocessError(f"WebDelegateBackend cannot lower {error}") from error
        program_json = lowerer.b.to_json()
        dump_dir = os.environ.get(DUMP_DIR_ENV)
        try:
            blob, text = lower_program_json(program_json, dump=bool(dump_dir))
        except RuntimeError as error:
            raise PreprocessError(
                f"webdelegate-lower rejected the lowered program: {error}") from error
        if dump_dir:
            os.makedirs(dump_dir, exist_ok=True)
            # Partitions are numbered in the order preprocess sees them: program0, program1...
            index = sum(1 for f in os.listdir(dump_dir)
                        if f.startswith("program") and f.endswith(".json"))
            with open(os.path.join(dump_dir, f"program{index}.json"), "w") as f:
                f.write(program_json)
            with open(os.path.join(dump_dir, f"program{index}.txt"), "w") as f:
                f.write(text or "")

        store = NamedDataStore()
        for key, tensor in lowerer.weights.items():
            data = tensor.detach().contiguous()
            store.add_named_data(key, data, alignment=alignment, external_tag=tag)
        logger.info("WebDelegateBackend: %d ops, %d weights, %d bytes of program",
                    len(lowerer.b.ops), len(lowerer.weights), len(blob))
        return PreprocessResult(processed_bytes=blob, debug_handle_map={},
                                data_store_output=store.get_named_data_store_output())
