#!/usr/bin/env python3
"""Writes tests/fixtures/chat/llamacpp_chat_tokens.json: llama.cpp's token ids of rendered chats,
the oracle for tests/chat_tokens.rs. Not part of `npm test` (llama.cpp is a long build): run by
hand with llama.cpp's `llama-tokenize` (built from the llama.cpp sources vendored in the
llama-cpp-python 0.3.36 sdist, the same llama.cpp as the other fixtures) after `npm run setup`:

  .cache/venv-chat/bin/python scripts/make-chat-token-fixtures.py --llama-tokenize PATH

For each (model file, template): every conversation of tests/fixtures/chat/conversations.json
that jinja2 renders (transformers' render_jinja_template, with the special-token texts of the
model's own vocabulary) is tokenized by llama.cpp with parse_special and without added specials
(`llama-tokenize --no-bos --no-escape`, as a chat prompt that carries its own BOS is tokenized). Stored:
the render's SHA-256 (so a test can tell a render difference from a tokenization one) and the ids.
Also the whitespace runs that Hugging Face's conversion of Gemma's vocabulary tokenizes
differently (40 spaces: llama.cpp [167, 145], HF tokenizers [152, 160]).
"""
import argparse
import hashlib
import importlib.util
import json
import pathlib
import subprocess
import sys
import tempfile

ROOT = pathlib.Path(__file__).resolve().parent.parent
PAIRS = [
    (".cache/models/gemma-3-270m/gemma-3-270m-q4_k_m.gguf", "google-gemma-2-2b-it"),
    ("tests/fixtures/decoders/tiny-qwen2.gguf", "Qwen-Qwen2.5-7B-Instruct"),
    ("tests/fixtures/decoders/tiny-qwen2.gguf", "Qwen-Qwen3-0.6B"),
]


def chat_templates():
    """scripts/chat-templates.py as a module (its GGUF reader and fixed-clock renderer)."""
    spec = importlib.util.spec_from_file_location("chat_templates", ROOT / "scripts/chat-templates.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def gguf_specials(path):
    """bos/eos/unk/pad token texts from a GGUF header (transformers' special_tokens_map)."""
    names = {"bos": "bos", "eos": "eos", "unknown": "unk", "padding": "pad"}
    keys = {"tokenizer.ggml.tokens"} | {f"tokenizer.ggml.{n}_token_id" for n in names}
    with open(path, "rb") as f:
        meta = chat_templates().gguf_metadata(f, keys)
    tokens = meta["tokenizer.ggml.tokens"]
    out = {}
    for name, short in names.items():
        token_id = meta.get(f"tokenizer.ggml.{name}_token_id")
        if token_id is not None and token_id < len(tokens):
            out[f"{short}_token"] = tokens[token_id]
    return out


def llama_tokenize(binary, model, text):
    with tempfile.NamedTemporaryFile("w", encoding="utf-8", suffix=".txt", delete=False) as f:
        f.write(text)
        name = f.name
    out = subprocess.run([binary, "-m", model, "-f", name, "--ids", "--no-bos", "--no-escape", "--log-disable"],
                         capture_output=True, text=True, check=True).stdout.strip().splitlines()[-1]
    pathlib.Path(name).unlink()
    return json.loads(out)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--llama-tokenize", required=True)
    args = parser.parse_args()
    ctu = chat_templates().fixed_clock_renderer()
    cases = json.loads((ROOT / "tests/fixtures/chat/conversations.json").read_text())
    out = {"source": "llama.cpp llama-tokenize (llama-cpp-python 0.3.36's vendored llama.cpp), --no-bos, parse_special",
           "fixed_ms": chat_templates().FIXED_MS, "sets": [], "whitespace": []}
    for model, template in PAIRS:
        model_path = str(ROOT / model)
        specials = gguf_specials(model_path)
        source = (ROOT / ".cache/chat-templates/templates" / f"{template}.jinja").read_text()
        entries = []
        for case in cases:
            try:
                text = ctu.render_jinja_template(conversations=[case["messages"]], tools=case.get("tools"),
                                                 chat_template=source, add_generation_prompt=case["add_generation_prompt"],
                                                 **specials, **case.get("extra", {}))[0][0]
            except Exception:
                continue
            entries.append({"id": case["id"], "text_sha256": hashlib.sha256(text.encode()).hexdigest(),
                            "ids": llama_tokenize(args.llama_tokenize, model_path, text)})
        model_sha = hashlib.sha256(pathlib.Path(model_path).read_bytes()).hexdigest()
        out["sets"].append({"model": model, "model_sha256": model_sha, "template": template,
                            "specials": specials, "cases": entries})
        print(f"{model} x {template}: {len(entries)} conversations")
    gemma = str(ROOT / PAIRS[0][0])
    for text in [" " * n for n in (9, 16, 17, 31, 32, 40, 64, 100)] + ["\n" * 12, "\t" * 9, " \n" * 7, "a" + " " * 40 + "b"]:
        out["whitespace"].append({"model": PAIRS[0][0], "text": text, "ids": llama_tokenize(args.llama_tokenize, gemma, text)})
    path = ROOT / "tests/fixtures/chat/llamacpp_chat_tokens.json"
    path.write_text(json.dumps(out, ensure_ascii=False) + "\n")
    print(f"wrote {path}")


if __name__ == "__main__":
    main()
