#!/usr/bin/env python3
"""Rebuilds tests/fixtures/pte/minilm.pte's weights file, minilm.ptd, from all-MiniLM-L6-v2's
model.safetensors without torch or executorch (Python standard library only), byte for byte
what ExecuTorch 1.5.1's FlatTensorSerializer wrote in scripts/make-pte-fixtures.py.

    python3 scripts/make-minilm-ptd.py [--safetensors PATH] [--out PATH]

How: a .ptd is `head | segments`. The head (the FT01 flatbuffer with its FH01 header, padded
to the segment base offset: 13 KB) is committed as tests/fixtures/pte/minilm.ptd.head; it
lists every key, its TensorLayout and its segment (offset, size). Each segment is the raw
little-endian bytes of one tensor, which is exactly that tensor's bytes in model.safetensors
(the checkpoint is f32; keys are the checkpoint's names). This script parses the head (a small
flatbuffer reader below), checks each key's dtype, shape and size against the safetensors
header, writes every segment at its offset (zero padding between), and checks the sha256
recorded in tests/fixtures/pte/minilm.json.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import struct
import sys
from pathlib import Path
from typing import Dict, List, Tuple

REPO = Path(__file__).resolve().parents[1]
FIXTURES = REPO / "tests" / "fixtures" / "pte"
DEFAULT_SAFETENSORS = REPO / ".cache" / "models" / "all-MiniLM-L6-v2" / "model.safetensors"

# executorch_flatbuffer.ScalarType values (scalar_type.fbs) -> (safetensors dtype, bytes).
SCALAR_TYPES = {6: ("F32", 4), 4: ("I64", 8), 3: ("I32", 4), 5: ("F16", 2), 15: ("BF16", 2),
                0: ("U8", 1)}


class FlatBuffer:
    """Just enough of a flatbuffer reader for flat_tensor.fbs (offsets are bounds-checked by
    Python's slicing; a bad file raises)."""

    def __init__(self, data: bytes):
        self.data = data

    def u8(self, pos: int) -> int:
        return self.data[pos]

    def u16(self, pos: int) -> int:
        return struct.unpack_from("<H", self.data, pos)[0]

    def u32(self, pos: int) -> int:
        return struct.unpack_from("<I", self.data, pos)[0]

    def i32(self, pos: int) -> int:
        return struct.unpack_from("<i", self.data, pos)[0]

    def u64(self, pos: int) -> int:
        return struct.unpack_from("<Q", self.data, pos)[0]

    def field(self, table: int, index: int) -> int:
        """The absolute position of field ``index`` of ``table``, or 0 when absent."""
        vtable = table - self.i32(table)
        vt_size = self.u16(vtable)
        slot = 4 + 2 * index
        if slot >= vt_size:
            return 0
        offset = self.u16(vtable + slot)
        return table + offset if offset else 0

    def deref(self, pos: int) -> int:
        return pos + self.u32(pos)

    def vector(self, pos: int) -> Tuple[int, int]:
        """(length, position of element 0) of the vector referenced at ``pos``."""
        start = self.deref(pos)
        return self.u32(start), start + 4

    def tables(self, pos: int) -> List[int]:
        n, first = self.vector(pos)
        return [self.deref(first + 4 * i) for i in range(n)]

    def string(self, pos: int) -> str:
        n, first = self.vector(pos)
        return self.data[first:first + n].decode()


def parse_head(head: bytes) -> Dict:
    """The FH01 header and the FT01 flatbuffer's segments and named data."""
    if head[4:8] != b"FT01" or head[8:12] != b"FH01":
        raise ValueError("not a .ptd head (identifier FT01, header FH01 expected)")
    length, fb_offset, fb_size, base, data_size = struct.unpack_from("<IQQQQ", head, 12)
    if len(head) != base:
        raise ValueError(f"head is {len(head)} bytes, the segment base offset is {base}")
    fb = FlatBuffer(head)
    root = fb.deref(0)
    segments = []
    for seg in fb.tables(fb.field(root, 1)):
        segments.append((fb.u64(fb.field(seg, 0)) if fb.field(seg, 0) else 0,
                         fb.u64(fb.field(seg, 1)) if fb.field(seg, 1) else 0))
    named = []
    for entry in fb.tables(fb.field(root, 2)):
        key = fb.string(fb.field(entry, 0))
        index = fb.u32(fb.field(entry, 1)) if fb.field(entry, 1) else 0
        layout_pos = fb.field(entry, 2)
        layout = None
        if layout_pos:
            layout_table = fb.deref(layout_pos)
            st = fb.field(layout_table, 0)
            n, first = fb.vector(fb.field(layout_table, 1))
            sizes = [fb.i32(first + 4 * i) for i in range(n)]
            layout = {"scalar_type": fb.u8(st) if st else 0, "sizes": sizes}
        named.append({"key": key, "segment": index, "layout": layout})
    return {"segment_base_offset": base, "segment_data_size": data_size,
            "segments": segments, "named_data": named}


def read_safetensors_header(path: Path) -> Tuple[Dict, int]:
    with open(path, "rb") as f:
        (n,) = struct.unpack("<Q", f.read(8))
        header = json.loads(f.read(n))
    return header, 8 + n


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--safetensors", default=str(DEFAULT_SAFETENSORS))
    parser.add_argument("--head", default=str(FIXTURES / "minilm.ptd.head"))
    parser.add_argument("--out", default=str(REPO / "target" / "pte-fixtures" / "minilm.ptd"))
    parser.add_argument("--expect-sha256",
                        default=json.loads((FIXTURES / "minilm.json").read_text())
                        ["sha256"]["minilm.ptd"])
    args = parser.parse_args()

    head = Path(args.head).read_bytes()
    index = parse_head(head)
    header, data_start = read_safetensors_header(Path(args.safetensors))
    first_key: Dict[int, Dict] = {}
    for entry in index["named_data"]:
        first_key.setdefault(entry["segment"], entry)
    out_path = Path(args.out)
    out_path.parent.mkdir(parents=True, exist_ok=True)
    digest = hashlib.sha256()
    with open(args.safetensors, "rb") as src, open(out_path, "wb") as out:
        out.write(head)
        digest.update(head)
        written = 0
        for number, (offset, size) in enumerate(index["segments"]):
            entry = first_key.get(number)
            if entry is None:
                sys.exit(f"segment {number} has no key")
            key = entry["key"]
            info = header.get(key)
            if info is None:
                sys.exit(f"{key}: not in {args.safetensors}")
            layout = entry["layout"]
            dtype, width = SCALAR_TYPES[layout["scalar_type"]]
            if info["dtype"] != dtype or info["shape"] != layout["sizes"]:
                sys.exit(f"{key}: safetensors has {info['dtype']} {info['shape']}, the .ptd "
                         f"layout {dtype} {layout['sizes']}")
            begin, end = info["data_offsets"]
            if end - begin != size:
                sys.exit(f"{key}: {end - begin} bytes in safetensors, segment holds {size}")
            pad = b"\0" * (offset - written)
            src.seek(data_start + begin)
            data = src.read(size)
            out.write(pad + data)
            digest.update(pad + data)
            written = offset + size
        if written != index["segment_data_size"]:
            sys.exit(f"segments end at {written}, header says {index['segment_data_size']}")
    got = digest.hexdigest()
    if args.expect_sha256 and got != args.expect_sha256:
        sys.exit(f"{out_path}: sha256 {got}, expected {args.expect_sha256}")
    print(f"{out_path}: {base_size(out_path)} bytes, {len(index['named_data'])} keys, "
          f"{len(index['segments'])} segments, sha256 {got} (matches the export)")


def base_size(path: Path) -> int:
    return path.stat().st_size


if __name__ == "__main__":
    main()
