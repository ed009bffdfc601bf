#!/usr/bin/env python3
"""Writes the weight-file fixtures of tests/fixtures/formats/ with the real peers' writers.

- safetensors files: the `safetensors` package's own serializer (`safetensors.serialize`).
- GGUF files: llama.cpp's `gguf` package (`GGUFWriter`, `gguf.quants.quantize`).
- IRPA files: IREE's runtime (`iree.runtime.ParameterIndex.create_archive_file`); the one
  chained-archive file joins two archives written by IREE and links the first header to the
  second (the format's documented concatenation: only `next_header_offset` is patched).

It also writes manifest.json: for every file, every entry the writer was given (key, dtype,
shape, the exact bytes or splat pattern) and, as a second oracle, the index IREE's own parsers
(`iree.runtime.ParameterIndex.load`) read from the file. The Rust tests compare our parsers
with both. Nothing here runs in `npm test`: the outputs are committed.

Regenerate (the versions are pinned so the bytes are reproducible):

    python3 -m venv .cache/fixture-venv
    .cache/fixture-venv/bin/pip install numpy==2.4.6 safetensors==0.8.0 gguf==0.19.0 \
        iree-base-runtime==3.13.0
    .cache/fixture-venv/bin/python scripts/make-format-fixtures.py
"""

import json
import os
import struct
import sys
from importlib.metadata import version

import gguf
import iree.runtime as iree_rt
import numpy as np
import safetensors
from gguf import GGMLQuantizationType as Q

OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "fixtures", "formats")
RNG = np.random.default_rng(20260830)
MANIFEST = {"files": {}}


def hexbytes(data) -> str:
    return bytes(data).hex()


def iree_view(path):
    """The index IREE's parser reads from `path`: key, offset, length (or splat pattern)."""
    index = iree_rt.ParameterIndex()
    try:
        index.load(path, mmap=False)
    except Exception as error:  # IREE refusing a file is recorded, not fatal.
        return None, str(error)
    entries = []
    for key, entry in index.items():
        if entry.is_splat:
            entries.append({"key": key, "length": entry.length,
                            "splat_pattern_hex": hexbytes(entry.splat_pattern)})
        else:
            entries.append({"key": key, "length": entry.length, "offset": entry.file_storage[1]})
    return entries, None


def record(name, fmt, entries, **extra):
    path = os.path.join(OUT, name)
    iree_entries, iree_error = iree_view(path)
    MANIFEST["files"][name] = {
        "format": fmt,
        "size": os.path.getsize(path),
        "entries": entries,
        "iree": iree_entries,
        "iree_error": iree_error,
        **extra,
    }


# ---------------------------------------------------------------------------------------------
# safetensors

def write_safetensors(name, tensors, metadata=None):
    """tensors: list of (key, safetensors dtype name, logical shape, raw bytes)."""
    keep = []
    specs = {}
    for key, dtype, shape, raw in tensors:
        buffer = np.frombuffer(raw, dtype=np.uint8).copy() if raw else np.zeros(1, np.uint8)
        keep.append(buffer)
        if dtype == "float4_e2m1fn_x2":  # TensorSpec takes the packed (storage) shape
            shape = (*shape[:-1], shape[-1] // 2)
        specs[key] = safetensors.TensorSpec(dtype=dtype, shape=list(shape),
                                            data_ptr=buffer.ctypes.data, data_len=len(raw))
    data = safetensors.serialize(specs, metadata)
    with open(os.path.join(OUT, name), "wb") as out:
        out.write(bytes(data))
    header_dtypes = {"float32": "F32", "float16": "F16", "bfloat16": "BF16", "float64": "F64",
                     "int8": "I8", "uint8": "U8", "int16": "I16", "uint16": "U16", "int32": "I32",
                     "uint32": "U32", "int64": "I64", "uint64": "U64", "bool": "BOOL",
                     "float8_e4m3fn": "F8_E4M3", "float8_e5m2": "F8_E5M2",
                     "float8_e8m0fnu": "F8_E8M0", "float4_e2m1fn_x2": "F4", "complex64": "C64"}
    entries = [{"key": key, "dtype": header_dtypes[dtype], "shape": list(shape),
                "length": len(raw), "bytes_hex": hexbytes(raw)}
               for key, dtype, shape, raw in tensors]
    record(name, "safetensors", entries, metadata=metadata or {})


def random_bytes(count):
    return RNG.integers(0, 256, size=count, dtype=np.uint8).tobytes()


def safetensors_fixtures():
    tensors = [
        ("embed.weight", "float32", (3, 5), np.arange(15, dtype=np.float32).tobytes()),
        ("layer.0.bias", "float16", (7,), np.linspace(-1, 1, 7).astype(np.float16).tobytes()),
        ("layer.0.bf16", "bfloat16", (2, 3), random_bytes(12)),
        ("scalar", "float64", (), np.array(3.25).tobytes()),
        ("empty", "float32", (0, 4), b""),
        ("mask", "bool", (5,), bytes([1, 0, 1, 1, 0])),
        ("ids", "int64", (3,), np.array([1, -2, 3], dtype=np.int64).tobytes()),
        ("odd.u8", "uint8", (3, 3, 3), random_bytes(27)),
        ("i16", "int16", (5,), random_bytes(10)),
        ("u32", "uint32", (1, 3), random_bytes(12)),
        ("fp8", "float8_e4m3fn", (9,), random_bytes(9)),
        ("fp8b", "float8_e5m2", (1,), random_bytes(1)),
        ("e8m0", "float8_e8m0fnu", (2,), random_bytes(2)),
        ("fp4", "float4_e2m1fn_x2", (6,), random_bytes(3)),
        ("complex", "complex64", (2,), random_bytes(16)),
        ("unicode.κλειδί", "int8", (4,), random_bytes(4)),
    ]
    write_safetensors("mixed.safetensors", tensors,
                      {"format": "pt", "note": "fixture with \"quotes\" and unicode é"})
    write_safetensors("single.safetensors", [("only", "float32", (2, 2), random_bytes(16))])
    write_safetensors("empty.safetensors", [])
    # A header longer than the 64 KiB first read: the parser needs a second read.
    many = [(f"layers.{i}.w", "uint8", (1,), random_bytes(1)) for i in range(1100)]
    write_safetensors("large_header.safetensors", many, {"purpose": "header over 64 KiB"})


# ---------------------------------------------------------------------------------------------
# GGUF

GGUF_TYPE_NAMES = {
    gguf.GGUFValueType.UINT8: "u8", gguf.GGUFValueType.INT8: "i8",
    gguf.GGUFValueType.UINT16: "u16", gguf.GGUFValueType.INT16: "i16",
    gguf.GGUFValueType.UINT32: "u32", gguf.GGUFValueType.INT32: "i32",
    gguf.GGUFValueType.FLOAT32: "f32", gguf.GGUFValueType.BOOL: "bool",
    gguf.GGUFValueType.STRING: "str", gguf.GGUFValueType.ARRAY: "arr",
    gguf.GGUFValueType.UINT64: "u64", gguf.GGUFValueType.INT64: "i64",
    gguf.GGUFValueType.FLOAT64: "f64",
}


def write_gguf(name, tensors, metadata, alignment=None, version_override=None):
    """tensors: list of (key, ggml type, numpy logical shape, raw bytes).
    metadata: list of (key, value type, value[, array element type])."""
    path = os.path.join(OUT, name)
    previous = gguf.gguf_writer.GGUF_VERSION
    if version_override is not None:
        gguf.gguf_writer.GGUF_VERSION = version_override  # v2 and v3 share the layout
    try:
        writer = gguf.GGUFWriter(path, arch="fixture")
        if alignment is not None:
            writer.add_custom_alignment(alignment)
        for key, vtype, value, *sub in metadata:
            writer.add_key_value(key, value, vtype, sub_type=sub[0] if sub else None)
        for key, qtype, shape, raw in tensors:
            array = np.frombuffer(raw, dtype=np.uint8)
            byte_shape = gguf.quant_shape_to_byte_shape(shape, qtype) if shape else (len(raw),)
            writer.add_tensor(key, array.reshape(byte_shape), raw_dtype=qtype)
        writer.write_header_to_file()
        writer.write_kv_data_to_file()
        writer.write_tensors_to_file()
        writer.close()
    finally:
        gguf.gguf_writer.GGUF_VERSION = previous
    entries = [{"key": key, "dtype": qtype.name, "shape": list(reversed(shape)) or [len(raw)],
                "length": len(raw), "bytes_hex": hexbytes(raw)}
               for key, qtype, shape, raw in tensors]
    expected_metadata = [{"key": "general.architecture", "type": "str", "value": "fixture"}]
    if alignment is not None:
        expected_metadata.append({"key": "general.alignment", "type": "u32", "value": alignment})
    for key, vtype, value, *_ in metadata:
        if isinstance(value, list) and len(value) > 100:  # a vocabulary: its size and ends only
            summary = {"len": len(value), "first": value[0], "last": value[-1]}
            expected_metadata.append({"key": key, "type": "arr", "summary": summary})
        else:
            expected_metadata.append({"key": key, "type": GGUF_TYPE_NAMES[vtype], "value": value})
    record(name, "gguf", entries, gguf_metadata=expected_metadata,
           alignment=alignment or 32, version=version_override or 3)


def quantized(qtype, shape):
    """Bytes of a tensor of `shape` quantized with gguf-py, or random blocks where gguf-py
    cannot quantize the type (the writer stores them the same way)."""
    values = RNG.standard_normal(shape).astype(np.float32)
    try:
        data = gguf.quants.quantize(values, qtype)
    except (NotImplementedError, gguf.quants.QuantError):
        data = np.frombuffer(random_bytes(int(np.prod(gguf.quant_shape_to_byte_shape(shape, qtype)))),
                             dtype=np.uint8)
    return np.ascontiguousarray(data).view(np.uint8).tobytes()


def plain(dtype, shape):
    if np.issubdtype(dtype, np.floating):
        return RNG.standard_normal(shape).astype(dtype).tobytes()
    return RNG.integers(-100, 100, size=shape).astype(dtype).tobytes()


V = gguf.GGUFValueType


def gguf_fixtures():
    tensors = [
        ("token_embd.weight", Q.F32, (3, 5), plain(np.float32, (3, 5))),
        ("blk.0.attn_norm.weight", Q.F16, (7,), plain(np.float16, (7,))),
        ("blk.0.bf16", Q.BF16, (2, 3), random_bytes(12)),
        ("blk.0.q8_0", Q.Q8_0, (2, 64), quantized(Q.Q8_0, (2, 64))),
        ("blk.0.q4_0", Q.Q4_0, (3, 32), quantized(Q.Q4_0, (3, 32))),
        ("blk.0.q4_1", Q.Q4_1, (1, 32), quantized(Q.Q4_1, (1, 32))),
        ("blk.0.q5_0", Q.Q5_0, (1, 32), quantized(Q.Q5_0, (1, 32))),
        ("blk.0.q5_1", Q.Q5_1, (1, 32), quantized(Q.Q5_1, (1, 32))),
        ("blk.0.q2_k", Q.Q2_K, (1, 256), quantized(Q.Q2_K, (1, 256))),
        ("blk.0.q3_k", Q.Q3_K, (1, 256), quantized(Q.Q3_K, (1, 256))),
        ("blk.0.q4_k", Q.Q4_K, (2, 256), quantized(Q.Q4_K, (2, 256))),
        ("blk.0.q5_k", Q.Q5_K, (1, 256), quantized(Q.Q5_K, (1, 256))),
        ("blk.0.q6_k", Q.Q6_K, (1, 256), quantized(Q.Q6_K, (1, 256))),
        ("blk.0.iq4_nl", Q.IQ4_NL, (1, 32), quantized(Q.IQ4_NL, (1, 32))),
        ("blk.0.iq4_xs", Q.IQ4_XS, (1, 256), quantized(Q.IQ4_XS, (1, 256))),
        ("blk.0.iq2_xxs", Q.IQ2_XXS, (1, 256), quantized(Q.IQ2_XXS, (1, 256))),
        ("blk.0.tq2_0", Q.TQ2_0, (1, 256), quantized(Q.TQ2_0, (1, 256))),
        ("blk.0.mxfp4", Q.MXFP4, (1, 32), quantized(Q.MXFP4, (1, 32))),
        ("i8", Q.I8, (5,), plain(np.int8, (5,))),
        ("i16", Q.I16, (3,), plain(np.int16, (3,))),
        ("i32", Q.I32, (2, 2), plain(np.int32, (2, 2))),
        ("i64", Q.I64, (3,), plain(np.int64, (3,))),
        ("f64", Q.F64, (1,), plain(np.float64, (1,))),
        ("odd.f32", Q.F32, (1, 3, 5, 7), plain(np.float32, (1, 3, 5, 7))),
    ]
    metadata = [
        ("general.name", V.STRING, "mixed fixture"),
        ("test.u8", V.UINT8, 200),
        ("test.i8", V.INT8, -100),
        ("test.u16", V.UINT16, 60000),
        ("test.i16", V.INT16, -30000),
        ("test.u32", V.UINT32, 4000000000),
        ("test.i32", V.INT32, -2000000000),
        ("test.f32", V.FLOAT32, 0.5),
        ("test.bool", V.BOOL, True),
        ("test.u64", V.UINT64, 18000000000000000000),
        ("test.i64", V.INT64, -9000000000000000000),
        ("test.f64", V.FLOAT64, -1.25),
        ("test.unicode", V.STRING, "ключ ✓"),
        ("test.array.i32", V.ARRAY, [1, -2, 3], V.INT32),
        ("test.array.str", V.ARRAY, ["a", "", "ccc"], V.STRING),
        ("test.array.f32", V.ARRAY, [0.25, -8.0], V.FLOAT32),
        ("test.array.bool", V.ARRAY, [True, False, True], V.BOOL),
        ("test.array.nested", V.ARRAY, [[1, 2], [3]], V.ARRAY),
    ]
    write_gguf("mixed_v3.gguf", tensors, metadata)
    # Without BF16 and nested arrays, which IREE's GGUF parser does not support, so that IREE's
    # index is a second oracle for these two.
    iree_readable = tensors[:2] + tensors[3:6] + tensors[-1:]
    write_gguf("align64_v3.gguf", iree_readable,
               [("general.name", V.STRING, "alignment 64")], alignment=64)
    write_gguf("mixed_v2.gguf", iree_readable,
               [("general.name", V.STRING, "version 2"), ("test.array.u8", V.ARRAY, [1, 2], V.UINT8)],
               version_override=2)
    write_gguf("no_tensors.gguf", [], [("general.name", V.STRING, "metadata only")])
    # Metadata larger than the 64 KiB first read (a vocabulary), read with growing reads.
    vocab = [f"tok_{i:05d}" for i in range(4500)]
    write_gguf("vocab.gguf", tensors[:2],
               [("tokenizer.ggml.tokens", V.ARRAY, vocab, V.STRING),
                ("tokenizer.ggml.scores", V.ARRAY, [float(i % 7) for i in range(4500)], V.FLOAT32)])


# ---------------------------------------------------------------------------------------------
# IRPA

def write_irpa(name, items):
    """items: list of ("data", key, numpy array, metadata) or ("splat", key, pattern bytes, length)."""
    index = iree_rt.ParameterIndex()
    entries = []
    for item in items:
        if item[0] == "data":
            _, key, array, metadata = item
            index.add_buffer(key, array, metadata=metadata)
            raw = array.tobytes()
            entries.append({"key": key, "length": len(raw), "bytes_hex": hexbytes(raw),
                            "metadata": metadata or ""})
        else:
            _, key, pattern, length = item
            index.add_splat(key, np.frombuffer(pattern, dtype=np.uint8), length)
            entries.append({"key": key, "length": length, "splat_pattern_hex": hexbytes(pattern),
                            "metadata": ""})
    index.create_archive_file(os.path.join(OUT, name))
    return entries


def irpa_fixtures():
    items = [
        ("data", "weight", np.arange(15, dtype=np.float32), "dtype=f32;shape=15"),
        ("splat", "zeros", b"\x00", 64),
        ("data", "bias", np.arange(7, dtype=np.int16), None),
        ("splat", "ones16", np.array([1], dtype=np.float16).tobytes(), 32),
        ("splat", "pattern4", b"\xaa\xbb\xcc\xdd", 16),
        ("splat", "pattern8", bytes(range(8)), 40),
        ("splat", "pattern16", bytes(range(16, 32)), 48),
        ("data", "odd", np.frombuffer(random_bytes(13), dtype=np.uint8), None),
        ("data", "unicode.κλειδί", np.frombuffer(random_bytes(3), dtype=np.uint8), "é"),
    ]
    entries = write_irpa("mixed.irpa", items)
    record("mixed.irpa", "irpa", entries)
    entries = write_irpa("single.irpa", [("data", "only", np.arange(4, dtype=np.float32), None)])
    record("single.irpa", "irpa", entries)
    # An entry table longer than the 64 KiB first read.
    many = [("splat", f"model.layers.{i}.splatted.weight", b"\x01\x02", 2 * (i + 1))
            for i in range(700)]
    entries = write_irpa("large_table.irpa", many)
    record("large_table.irpa", "irpa", entries)
    # Two archives chained by next_header_offset (IREE-written; only that field is patched).
    first = write_irpa("chain_a.tmp", [("data", "first", np.arange(3, dtype=np.int32), None)])
    second = write_irpa("chain_b.tmp", [("data", "second", np.arange(5, dtype=np.int8), None),
                                        ("splat", "second.splat", b"\x07", 8)])
    with open(os.path.join(OUT, "chain_a.tmp"), "rb") as a, \
            open(os.path.join(OUT, "chain_b.tmp"), "rb") as b:
        head, tail = bytearray(a.read()), b.read()
    struct.pack_into("<Q", head, 16, len(head))  # prefix.next_header_offset
    with open(os.path.join(OUT, "chained.irpa"), "wb") as out:
        out.write(bytes(head) + tail)
    os.remove(os.path.join(OUT, "chain_a.tmp"))
    os.remove(os.path.join(OUT, "chain_b.tmp"))
    record("chained.irpa", "irpa", first + second)


def compact_json(manifest) -> str:
    """The manifest with one entry per line: small, and still readable in a diff."""
    def dump(value):
        return json.dumps(value, ensure_ascii=False, separators=(",", ":"))
    lines = ["{", f' "generator":{dump(manifest["generator"])},',
             f' "ggml_quant_sizes":{dump(manifest["ggml_quant_sizes"])},',
             f' "ggml_type_ids":{dump(manifest["ggml_type_ids"])},', ' "files":{']
    files = list(manifest["files"].items())
    for position, (name, file) in enumerate(files):
        lines.append(f"  {dump(name)}:{{")
        fields = list(file.items())
        for index, (key, value) in enumerate(fields):
            end = "," if index + 1 < len(fields) else ""
            if isinstance(value, list) and value and isinstance(value[0], dict):
                lines.append(f"   {dump(key)}:[")
                lines.extend(f"    {dump(item)}{',' if i + 1 < len(value) else ''}"
                             for i, item in enumerate(value))
                lines.append(f"   ]{end}")
            else:
                lines.append(f"   {dump(key)}:{dump(value)}{end}")
        lines.append("  }" + ("," if position + 1 < len(files) else ""))
    lines += [" }", "}", ""]
    return "\n".join(lines)


def main():
    os.makedirs(OUT, exist_ok=True)
    MANIFEST["generator"] = {name: version(name) for name in
                             ("numpy", "safetensors", "gguf", "iree-base-runtime")}
    MANIFEST["ggml_quant_sizes"] = {qtype.name: list(sizes)
                                    for qtype, sizes in gguf.GGML_QUANT_SIZES.items()}
    MANIFEST["ggml_type_ids"] = {qtype.name: int(qtype) for qtype in Q}
    safetensors_fixtures()
    gguf_fixtures()
    irpa_fixtures()
    with open(os.path.join(OUT, "manifest.json"), "w", encoding="utf-8") as out:
        out.write(compact_json(MANIFEST))
    for name, file in sorted(MANIFEST["files"].items()):
        note = "" if file["iree"] is not None else f"  (IREE: {file['iree_error']})"
        print(f"{name}: {file['size']} bytes, {len(file['entries'])} entries{note}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
