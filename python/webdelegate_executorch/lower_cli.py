"""Running the Rust CLI ``webdelegate-lower``: program JSON in, validated blob out."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path
from typing import Optional, Tuple

ENV_VAR = "WEBDELEGATE_LOWER"


class LoweringToolError(RuntimeError):
    """``webdelegate-lower`` is missing or rejected the program."""


def find_lower_tool() -> str:
    """The path of ``webdelegate-lower``: ``$WEBDELEGATE_LOWER``, else ``PATH``, else
    ``<repo>/target/release/webdelegate-lower`` (``cargo build --release --bin
    webdelegate-lower``) of the repository this package lives in."""
    explicit = os.environ.get(ENV_VAR)
    if explicit:
        if not Path(explicit).is_file():
            raise LoweringToolError(f"${ENV_VAR} is {explicit!r}, which is not a file")
        return explicit
    on_path = shutil.which("webdelegate-lower")
    if on_path:
        return on_path
    repo = Path(__file__).resolve().parents[2]
    for profile in ("release", "debug"):
        candidate = repo / "target" / profile / "webdelegate-lower"
        if candidate.is_file():
            return str(candidate)
    raise LoweringToolError(
        "webdelegate-lower not found: build it with `cargo build --release --bin "
        f"webdelegate-lower` in {repo}, put it on PATH, or set ${ENV_VAR}"
    )


def lower_program_json(program_json: str, dump: bool = False,
                       tool: Optional[str] = None) -> Tuple[bytes, Optional[str]]:
    """Validates ``program_json`` and encodes it: returns the blob (magic ``WDPG``) and, with
    ``dump``, the program's text form. Raises :class:`LoweringToolError` with the tool's
    message when the program does not validate."""
    exe = tool or find_lower_tool()
    args = [exe] + (["--dump"] if dump else []) + ["-", "-"]
    result = subprocess.run(args, input=program_json.encode(), capture_output=True, check=False)
    if result.returncode != 0:
        raise LoweringToolError(result.stderr.decode(errors="replace").strip())
    if not result.stdout.startswith(b"WDPG"):
        raise LoweringToolError(f"{exe} wrote no program blob (magic {result.stdout[:4]!r})")
    text = result.stderr.decode(errors="replace") if dump else None
    return result.stdout, text
