#!/usr/bin/env python3
"""Writes the ExecuTorch `.ptd` fixtures of tests/fixtures/ptd/ with ExecuTorch's own writers.

- mixed.ptd: `NamedDataStore.add_named_data` (tensors of many dtypes, so each gets the
  `TensorLayout` ExecuTorch infers; a scalar; a channels-last tensor, whose dim order is not
  the identity; raw bytes with no layout; alignments 1 to 256), serialized by
  `FlatTensorSerializer` as `to_executorch` does for one external tag.
- shared.ptd: two keys whose tensors have equal bytes (the store deduplicates them into one
  buffer, so the file has one segment for both) and a third key of its own.
- empty.ptd: a payload with no named data (no segments).
- linear.ptd: the weights of a tiny exported model, written by the real pipeline
  (`torch.export` -> `to_edge` -> `to_executorch(ExecutorchBackendConfig(external_constants=
  True))` -> `write_tensor_data_to_file`).

It also writes manifest.json: per file, its size, the extended header as ExecuTorch's
`FlatTensorHeader.from_bytes` reads it, and per key what ExecuTorch's own deserializer
(`FlatTensorSerializer.deserialize`, which decodes the flatbuffer with flatc) returns: segment
index, the exact bytes, the layout (scalar type code, sizes, dim order); plus the dtype name and
row-major shape our index is expected to report (null where it reports none). The Rust tests
(tests/formats_ptd.rs, tests/http_ptd.rs) compare our parser with it. The script asserts that
the deserializer gives back what the store was given. Nothing here runs in `npm test`: the
outputs are committed.

Regenerate with the pinned wheels (executorch 1.5.1, torch 2.14.1):

    /work/venv-et/bin/python scripts/make-ptd-fixtures.py
"""

import json
import os
import tempfile

import torch
from executorch.exir import ExecutorchBackendConfig, to_edge
from executorch.exir._serialize._named_data_store import NamedDataStore
from executorch.exir._serialize.data_serializer import DataPayload
from executorch.exir.scalar_type import ScalarType
from executorch.exir.tensor_layout import TensorLayout
from executorch.extension.flat_tensor.serialize.serialize import (
    FlatTensorHeader,
    FlatTensorSerializer,
)

OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "fixtures", "ptd")
MANIFEST = {"files": {}}
GEN = torch.Generator().manual_seed(20260901)

# What our index reports for each ExecuTorch scalar type code: the dtype names the other formats
# use (safetensors' names), written out here independently of the Rust code.
DTYPE_NAMES = {
    0: "U8", 1: "I8", 2: "I16", 3: "I32", 4: "I64", 5: "F16", 6: "F32", 7: "F64", 11: "BOOL",
    15: "BF16", 23: "F8_E5M2", 24: "F8_E4M3", 27: "U16", 28: "U32", 29: "U64",
    # Types ExecuTorch's schema has and our named data cannot bind: c10's names
    # (safetensors' for the FNUZ floats).
    12: "QInt8", 13: "QUInt8", 14: "QInt32", 16: "QUInt4x2", 17: "QUInt2x4", 22: "Bits16",
    25: "F8_E5M2FNUZ", 26: "F8_E4M3FNUZ",
}


def random_tensor(shape, dtype):
    if dtype == torch.bool:
        return torch.randint(0, 2, shape, generator=GEN).bool()
    if dtype.is_floating_point:
        return torch.randn(shape, generator=GEN).to(dtype)
    if dtype in (torch.uint8, torch.uint16, torch.uint32, torch.uint64):
        return torch.randint(0, 200, shape, generator=GEN).to(dtype)
    return torch.randint(-100, 100, shape, generator=GEN).to(dtype)


def store_payload(store: NamedDataStore, tag: str) -> DataPayload:
    """The payload `to_executorch` serializes for `tag` (exir/_serialize/_serialize.py)."""
    out = store.get_named_data_store_output()
    return DataPayload(buffers=out.buffers, named_data=out.external_data.get(tag, {}))


def record(name: str, data: bytes, given: dict):
    """Writes `name` and its manifest entry; `given` maps key -> the bytes the writer got."""
    with open(os.path.join(OUT, name), "wb") as f:
        f.write(data)
    header = FlatTensorHeader.from_bytes(data[8:])
    assert header.is_valid(), name
    payload = FlatTensorSerializer().deserialize(data)
    entries = []
    for key, entry in payload.named_data.items():
        stored = bytes(payload.buffers[entry.buffer_index])
        assert stored == given[key], f"{name}/{key}: ExecuTorch reads back other bytes"
        layout = entry.tensor_layout
        row = {
            "key": key,
            "segment_index": entry.buffer_index,
            "length": len(stored),
            "bytes_hex": stored.hex(),
            "layout": None,
            "dtype": None,
            "shape": None,
        }
        if layout is not None:
            code = int(layout.scalar_type)
            row["layout"] = {
                "scalar_type": code,
                "sizes": list(layout.sizes),
                "dim_order": list(layout.dim_order),
            }
            if list(layout.dim_order) == list(range(len(layout.sizes))):
                row["dtype"] = DTYPE_NAMES[code]
                row["shape"] = list(layout.sizes)
        entries.append(row)
    assert sorted(given) == sorted(e["key"] for e in entries), name
    MANIFEST["files"][name] = {
        "size": len(data),
        "header": {
            "length": header.length,
            "flatbuffer_offset": header.flatbuffer_offset,
            "flatbuffer_size": header.flatbuffer_size,
            "segment_base_offset": header.segment_base_offset,
            "segment_data_size": header.segment_data_size,
        },
        "segments": len(payload.buffers),
        "entries": entries,
    }


def tensor_bytes(tensor: torch.Tensor) -> bytes:
    if not tensor.is_contiguous():
        return bytes(tensor.untyped_storage())
    if tensor.dtype == torch.bfloat16:
        return tensor.view(torch.uint16).numpy().tobytes()
    return tensor.numpy().tobytes()


def mixed():
    store = NamedDataStore()
    given = {}
    tensors = [
        ("model.f32", [2, 3], torch.float32, 1),
        ("model.f16", [4], torch.float16, 16),
        ("model.bf16", [2, 2], torch.bfloat16, 64),
        ("model.f64", [3], torch.float64, 1),
        ("model.i64", [2, 1, 2], torch.int64, 8),
        ("model.i32", [5], torch.int32, 1),
        ("model.i16", [3], torch.int16, 1),
        ("model.i8", [7], torch.int8, 1),
        ("model.u8", [9], torch.uint8, 256),
        ("model.bool", [6], torch.bool, 1),
        ("model.u16", [2], torch.uint16, 1),
        ("model.u32", [2], torch.uint32, 1),
        ("model.scalar", [], torch.float32, 1),
        ("model.empty", [0, 3], torch.float32, 1),
    ]
    for key, shape, dtype, alignment in tensors:
        tensor = random_tensor(shape, dtype)
        store.add_named_data(key, tensor, alignment=alignment, external_tag="model")
        given[key] = tensor_bytes(tensor)
    # Element types numpy cannot hold: their bytes, with the layout given explicitly (as a
    # backend that packs its own weights would).
    for key, code, shape, element_bytes in [
        ("model.f8_e4m3", ScalarType.FLOAT8E4M3FN, [4], 1),
        ("model.f8_e5m2", ScalarType.FLOAT8E5M2, [2, 2], 1),
        ("model.u64", ScalarType.UINT64, [2], 8),
        ("model.qint8", ScalarType.QINT8, [3], 1),
    ]:
        count = 1
        for dim in shape:
            count *= dim
        raw = bytes(torch.randint(0, 256, [count * element_bytes], generator=GEN).tolist())
        layout = TensorLayout(scalar_type=code, sizes=shape, dim_order=list(range(len(shape))))
        store.add_named_data(key, raw, external_tag="model", tensor_layout=layout)
        given[key] = raw
    # A channels-last conv weight: its dim order is (0, 2, 3, 1).
    conv = random_tensor([2, 3, 2, 2], torch.float32).to(memory_format=torch.channels_last)
    store.add_named_data("model.conv_cl", conv, external_tag="model")
    given["model.conv_cl"] = tensor_bytes(conv)
    raw = b"opaque delegate blob \x00\x01\x02"
    store.add_named_data("backend.blob", raw, alignment=32, external_tag="model")
    given["backend.blob"] = raw
    record("mixed.ptd", bytes(FlatTensorSerializer().serialize(store_payload(store, "model"))),
           given)


def shared():
    store = NamedDataStore()
    weight = random_tensor([4, 8], torch.float32)
    tied = weight.clone()
    bias = random_tensor([8], torch.float32)
    store.add_named_data("encoder.weight", weight, external_tag="model")
    store.add_named_data("bias", bias, external_tag="model")
    store.add_named_data("decoder.weight", tied, external_tag="model")
    given = {
        "encoder.weight": tensor_bytes(weight),
        "bias": tensor_bytes(bias),
        "decoder.weight": tensor_bytes(tied),
    }
    data = bytes(FlatTensorSerializer().serialize(store_payload(store, "model")))
    record("shared.ptd", data, given)
    entries = {e["key"]: e for e in MANIFEST["files"]["shared.ptd"]["entries"]}
    assert entries["encoder.weight"]["segment_index"] == entries["decoder.weight"]["segment_index"]
    assert MANIFEST["files"]["shared.ptd"]["segments"] == 2


def empty():
    data = bytes(FlatTensorSerializer().serialize(DataPayload(buffers=[], named_data={})))
    record("empty.ptd", data, {})


class Tiny(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.linear = torch.nn.Linear(4, 3)
        self.register_buffer("scale", torch.full([3], 0.5))

    def forward(self, x):
        return self.linear(x) * self.scale


def linear():
    torch.manual_seed(7)
    model = Tiny().eval()
    exported = torch.export.export(model, (torch.randn(2, 4),))
    program = to_edge(exported).to_executorch(
        ExecutorchBackendConfig(external_constants=True)
    )
    with tempfile.TemporaryDirectory() as d:
        program.write_tensor_data_to_file(d)
        (name,) = os.listdir(d)
        with open(os.path.join(d, name), "rb") as f:
            data = f.read()
    state = dict(model.named_parameters()) | dict(model.named_buffers())
    given = {key: tensor_bytes(value.detach().contiguous()) for key, value in state.items()}
    record("linear.ptd", data, given)


def main():
    os.makedirs(OUT, exist_ok=True)
    mixed()
    shared()
    empty()
    linear()
    import executorch.version as et_version

    MANIFEST["writer"] = {"executorch": et_version.__version__, "torch": torch.__version__}
    with open(os.path.join(OUT, "manifest.json"), "w") as f:
        json.dump(MANIFEST, f, indent=1, sort_keys=True)
        f.write("\n")


if __name__ == "__main__":
    main()
