"""webdelegate's ahead-of-time half for ExecuTorch: a partitioner and a backend whose
processed blob is webdelegate's program, weights in a ``.ptd`` as named data.

    from webdelegate_executorch import export_to_pte
    export_to_pte(model, (input_ids, attention_mask), "out", "minilm")

writes ``out/minilm.pte`` (delegate id ``WebDelegateBackend``) and ``out/model.ptd``.
"""

from .backend import PreprocessError, WebDelegateBackend, compile_specs
from .export import ExportResult, export_to_pte
from .lower_cli import LoweringToolError, find_lower_tool, lower_program_json
from .lowering import NAMED_DATA_SCOPE, Unsupported, supported_op_names
from .partitioner import OPS_TO_NOT_DECOMPOSE, WebDelegatePartitioner

__all__ = [
    "ExportResult",
    "LoweringToolError",
    "NAMED_DATA_SCOPE",
    "OPS_TO_NOT_DECOMPOSE",
    "PreprocessError",
    "Unsupported",
    "WebDelegateBackend",
    "WebDelegatePartitioner",
    "compile_specs",
    "export_to_pte",
    "find_lower_tool",
    "lower_program_json",
    "supported_op_names",
]
