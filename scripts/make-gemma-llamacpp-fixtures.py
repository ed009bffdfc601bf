#!/usr/bin/env python3
"""Writes the llama.cpp oracle fixtures for Gemma 3 270M (issue 13), run in .cache/venv-llama
(scripts/setup-llamacpp.sh builds it; not part of `npm test`: the outputs are committed).

  .cache/venv-llama/bin/python scripts/make-gemma-llamacpp-fixtures.py [--model M.gguf]

Writes (all JSON, UTF-8):
  tests/fixtures/gemma/tokenize.json
    {"source", "model_sha256", "notes",
     "cases": [{"text", "add_bos", "parse_special", "ids"}],           # llama_tokenize(text, add_bos, parse_special)
     "pieces": [{"id", "type", "hex"}],                                  # llama_token_to_piece(id, lstrip=0, special=True)
     "pieces_nonspecial": [{"id", "hex"}],                               # same with special=False (control tokens -> "")
     "detokenize": [{"ids", "remove_special", "unparse_special", "hex"}]} # llama_detokenize
  tests/fixtures/gemma/prompts.json
    {"source", "model_sha256", "prompts": [{"name", "text", "ids"}]}    # ids = tokenize(text, add_bos=True, parse_special=True)
  tests/fixtures/gemma/llamacpp_greedy.json
    {"source", "model_sha256", "settings": {...},
     "prompts": [{"name", "prompt_len", "continuation": [32 ids], "margin": [32 floats], "text_hex"}]}
    continuation[i] = argmax of llama.cpp's logits after prompt + continuation[:i] (free-running greedy,
    lowest id on ties); margin[i] = top1 - top2 of those same logits.
"""

from __future__ import annotations

import argparse
import ctypes
import hashlib
import json
import os
import sys
import time

import numpy as np

import llama_cpp

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DEFAULT_MODEL = os.path.join(ROOT, ".cache/models/gemma-3-270m/gemma-3-270m-q4_k_m.gguf")
LLAMA_CPP_COMMIT = "0c1e57098bba43ac29e6e3b677cdceebdd22334f"
N_THREADS = 2
N_CTX = 1024
N_BATCH = 512
N_CONTINUE = 32


def sha256_file(path):
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for b in iter(lambda: f.read(1 << 20), b""):
            h.update(b)
    return h.hexdigest()


# ---------------------------------------------------------------------------------------------
# Tokenization strings. Hand-written ones first, then systematic families.
# ---------------------------------------------------------------------------------------------
HAND = [
    "", " ", "  ", "   ", "\t", "\n", "\n\n", "\n\n\n", "\r\n", " \n ", "\t\t", " \t\n", "a", " a", "  a", "a ",
    "Hello", "Hello world", " Hello world", "Hello  world", "Hello, world!", "hello\nworld", "hello\n\nworld",
    "The capital of France is", "The quick brown fox jumps over the lazy dog.",
    "I'm can't won't they're you've", "e.g. i.e. etc. Mr. Dr. St.",
    "0", "1", "12", "123", "1234", "12345", "3.14159", "1,000,000", "2026-12-02", "+1 (555) 123-4567",
    "31415926535897932384626433832795028841971693993751", "0x1F 0b1010 1e-6 6.022e23", "v1.2.3-rc.4",
    "naïve café résumé façade", "Straße Größe Übermut", "Ελληνικά γράμματα", "Привет, мир!", "Здравствуйте",
    "日本語のテキスト", "こんにちは世界", "カタカナ ひらがな 漢字", "中文字符测试", "你好，世界！", "한국어 텍스트",
    "안녕하세요", "العربية نص", "مرحبا بالعالم", "עברית", "हिन्दी पाठ", "नमस्ते दुनिया", "தமிழ்", "ไทย ภาษาไทย",
    "Tiếng Việt có dấu", "Ἀρχὴ ἥμισυ παντός", "ᚠᚢᚦᚨᚱᚲ", "𝔘𝔫𝔦𝔠𝔬𝔡𝔢", "𝕳𝖊𝖑𝖑𝖔", "ℕ ℤ ℚ ℝ ℂ", "∀x∈ℝ: x²≥0",
    "😀", "😀😀😀", "👍🏽", "👨‍👩‍👧‍👦", "🏳️‍🌈", "🧑🏿‍💻", "❤️", "☺︎", "🇫🇷🇯🇵", "a😀b", " 🦀 rust",
    "é", "e\u0301", "\u00a0", "a\u00a0b", "\u200b", "zero\u200bwidth", "\u3000全角スペース", "\ufeffBOM",
    "\u2028line sep", "tab\tseparated\tvalues", "trailing spaces   ", "   leading spaces", "mixed \t \n whitespace",
    "\x00", "nul\x00byte", "\x7f\x01\x1b[31mred\x1b[0m", "\ufffd", "replacement \ufffd char", "\U0010ffff", "\ue000",
    "def f(x):\n    return x * 2\n", "    indented = True", "if (a && b) { return c; }", "for i in range(10):\n\tprint(i)",
    "fn main() { println!(\"hi\"); }", "#include <stdio.h>", "SELECT * FROM t WHERE id = 1;", "x = [1, 2, 3]  # comment",
    "const f = (a) => a ?? b;", "<!-- comment -->", "{\"key\": \"value\", \"n\": 42}", "https://example.com/path?q=1&r=2",
    "user@example.com", "C:\\Program Files\\x", "~/.bashrc && ls -la", "$HOME/bin:$PATH", "a_b_c snake_case CamelCase",
    "<b>bold</b>", "<i>italic</i>", "<p>para</p>", "<div class=\"x\">", "<table><tr><td>1</td></tr></table>",
    "<br>", "<h1>Title</h1>", "<code>x</code>", "<unused0>", "<mask>", "[multimodal]", "<start_of_image>",
    "<bos>", "<eos>", "<pad>", "<unk>", "<bos>text", "text<bos>", "a <bos> b", "<start_of_turn>", "<end_of_turn>",
    "<start_of_turn>user\nHi<end_of_turn>\n<start_of_turn>model\n", "<bos><start_of_turn>user", "<start_of_turn", "<bos",
    "<<bos>>", "< bos >", "<eos><eos>", "<0x41>", "<0xFF>", "▁", "▁▁", "▁hello", "<s>", "</s>", "[INST]",
    "....", "!!!", "???", "---", "====", "****", "____", "~~~~", "…", "—", "–", "«guillemets»", "“quotes”", "‘single’",
    "©®™", "°C ±5 µm", "½ ¼ ¾", "€100 £50 ¥1000 ₹500", "§ ¶ † ‡", "♠♥♦♣", "→ ← ↑ ↓", "■□▲△", "█▓▒░",
    "ALL CAPS TEXT", "MiXeD CaSe", "camelCaseIdentifier", "kebab-case-name", "dot.separated.name", "UPPER_SNAKE",
    "a" * 50, "ab" * 40, " " * 16, "\n" * 7, "\t" * 5, "😀" * 10, "ha" * 20 + "!", "1" * 40, "-" * 60, "=" * 33,
]

LINES = [
    "Le petit prince regarda les étoiles.", "Der schnelle braune Fuchs springt über den faulen Hund.",
    "El rápido zorro marrón salta sobre el perro perezoso.", "A raposa marrom rápida pula sobre o cão preguiçoso.",
    "Быстрая коричневая лиса прыгает через ленивую собаку.", "速い茶色の狐がのろまな犬を飛び越える。",
    "敏捷的棕色狐狸跳过了懒狗。", "빠른 갈색 여우가 게으른 개를 뛰어넘는다.", "الثعلب البني السريع يقفز فوق الكلب الكسول.",
    "तेज़ भूरी लोमड़ी आलसी कुत्ते के ऊपर कूदती है।", "Η γρήγορη καφέ αλεπού πηδά πάνω από το τεμπέλικο σκυλί.",
    "Hızlı kahverengi tilki tembel köpeğin üzerinden atlar.", "Szybki brązowy lis przeskakuje nad leniwym psem.",
]


def tokenize_strings():
    out = list(HAND) + list(LINES)
    # whitespace runs before words, and leading spaces of every length up to 8
    for n in range(1, 9):
        out.append(" " * n + "word")
        out.append("word" + " " * n + "word")
    for n in range(1, 6):
        out.append("x" + "\n" * n + "y")
        out.append("\t" * n + "code")
    # digits of every length 1..20 and a few split points
    for n in range(1, 21):
        out.append("".join(str((i * 7 + 3) % 10) for i in range(n)))
    out += ["year 1999", "in 2024, 42% of 7.5M", "pi=3.14", "12:30pm", "#1 #22 #333", "$1.99", "10^9"]
    # single characters of several scripts and all printable ASCII
    out.append("".join(chr(c) for c in range(32, 127)))
    for c in "!\"#$%&'()*+,-./:;<=>?@[\\]^_`{|}~":
        out.append(c)
    # html tags (user-defined pieces) inside prose
    out += ["Some <b>bold</b> and <i>italic</i> text.", "<ul>\n<li>one</li>\n<li>two</li>\n</ul>",
            "line one<br>line two", "<table>\n<tr>\n<td>a</td>\n</tr>\n</table>"]
    seen, uniq = set(), []
    for s in out:
        if s not in seen:
            seen.add(s)
            uniq.append(s)
    return uniq


# ---------------------------------------------------------------------------------------------
# Prompts: our own text (written for these fixtures), token lengths 5 .. ~700.
# ---------------------------------------------------------------------------------------------
PROSE_LIGHTHOUSE = (
    "The lighthouse stood at the end of a narrow spit of rock, and for forty years the same family had kept "
    "its lamp burning. Every evening the keeper climbed the spiral stair, one hundred and twelve steps, carrying "
    "a can of oil and a cloth for the lens. The lens was the pride of the coast: a great beehive of glass prisms, "
    "ground by hand in a workshop far inland, that gathered the small flame and threw it twenty miles across the "
    "water. Sailors said they could tell the light from any other by its rhythm, two long flashes and a short one, "
    "repeated through the night like a slow heartbeat.\n\n"
    "In winter the storms came from the north-west. The sea rose over the rocks and struck the tower so hard that "
    "the glasses rattled in the cupboard below, and the keeper's children learned to sleep through the noise as "
    "other children sleep through rain. In the morning they would go down to the shore to see what the waves had "
    "brought: planks, rope, glass floats, once a wooden chest with nothing inside but sand. Their mother kept a "
    "notebook in which she wrote the date, the wind, the height of the sea and every ship that passed, and the "
    "notebooks filled a whole shelf by the time the youngest child was grown.\n\n"
)
PROSE_GARDEN = (
    "A garden teaches patience before it teaches anything else. The seeds go into the cold ground in early "
    "spring, and for weeks nothing seems to happen; then, on a warm morning, a row of pale green loops appears, "
    "each one a stem still bent over as if it had pushed the soil aside with its shoulders. After that the work "
    "is steady and small: water in the evening, weeds pulled while they are still young, stakes for the beans, a "
    "net over the strawberries before the birds discover them. By midsummer the beds are crowded and the paths "
    "between them have almost disappeared. The gardener walks through with a basket and comes back with more "
    "than the household can eat, so the neighbours receive courgettes they did not ask for, and jars of jam line "
    "the pantry shelves. In autumn the leaves are raked onto the beds and left to rot, and the whole cycle, which "
    "once seemed so slow, turns out to have been very short after all.\n\n"
)
PROSE_HARBOUR = (
    "The harbour below the lighthouse was small, no more than a curved stone wall and a slipway, but it held "
    "six fishing boats in summer and twice as many in the herring season. The boats were painted in the colours "
    "of the families that owned them, blue and white, red and black, a green so bright that it could be seen "
    "from the top of the hill. On market days the quay was crowded with baskets, nets hung out to dry, and "
    "children selling shells to the few visitors who came on the morning ferry and left on the evening one.\n\n"
)
CODE_PY = (
    "import math\n\n\n"
    "def primes_below(n: int) -> list[int]:\n"
    "    \"\"\"Return every prime smaller than n (sieve of Eratosthenes).\"\"\"\n"
    "    if n < 2:\n"
    "        return []\n"
    "    sieve = bytearray([1]) * n\n"
    "    sieve[0] = sieve[1] = 0\n"
    "    for p in range(2, math.isqrt(n - 1) + 1):\n"
    "        if sieve[p]:\n"
    "            sieve[p * p :: p] = bytearray(len(range(p * p, n, p)))\n"
    "    return [i for i, flag in enumerate(sieve) if flag]\n\n\n"
    "if __name__ == \"__main__\":\n"
    "    print(primes_below(50))\n"
)
CODE_RUST = (
    "/// A fixed-capacity ring buffer.\n"
    "pub struct Ring<T> {\n"
    "    items: Vec<Option<T>>,\n"
    "    head: usize,\n"
    "    len: usize,\n"
    "}\n\n"
    "impl<T> Ring<T> {\n"
    "    pub fn new(capacity: usize) -> Self {\n"
    "        Self { items: (0..capacity).map(|_| None).collect(), head: 0, len: 0 }\n"
    "    }\n\n"
    "    pub fn push(&mut self, value: T) -> Option<T> {\n"
    "        let cap = self.items.len();\n"
    "        let idx = (self.head + self.len) % cap;\n"
    "        let old = self.items[idx].replace(value);\n"
    "        if self.len == cap { self.head = (self.head + 1) % cap; } else { self.len += 1; }\n"
    "        old\n"
    "    }\n"
    "}\n"
)
LIST = (
    "Things to pack for a weekend in the mountains:\n"
    "1. A warm jacket and a waterproof shell\n"
    "2. Two pairs of wool socks\n"
    "3. A map of the valley and a compass\n"
    "4. Water bottles, at least two litres in total\n"
    "5. Bread, cheese, apples and a bar of chocolate\n"
    "6. A small first-aid kit\n"
    "7. A headlamp with spare batteries\n"
    "8."
)
MULTI = (
    "English: The library opens at nine in the morning.\n"
    "Français : La bibliothèque ouvre à neuf heures du matin.\n"
    "Deutsch: Die Bibliothek öffnet um neun Uhr morgens.\n"
    "Español: La biblioteca abre a las nueve de la mañana.\n"
    "Italiano: La biblioteca apre alle nove del mattino.\n"
    "Русский: Библиотека открывается в девять часов утра.\n"
    "日本語：図書館は朝九時に開きます。\n"
    "中文：图书馆早上九点开门。\n"
    "한국어: 도서관은 아침 아홉 시에 문을 엽니다.\n"
    "العربية: تفتح المكتبة في التاسعة صباحًا.\n"
    "हिन्दी: पुस्तकालय सुबह नौ बजे खुलता है।\n"
    "Ελληνικά:"
)
HTML = (
    "<html>\n<head>\n<title>Station timetable</title>\n</head>\n<body>\n<h1>Departures</h1>\n"
    "<table>\n<tr><th>Time</th><th>Destination</th><th>Platform</th></tr>\n"
    "<tr><td>08:15</td><td>Harbour</td><td>2</td></tr>\n"
    "<tr><td>09:40</td><td>Old Town</td><td>1</td></tr>\n"
    "<tr><td>11:05</td><td>Airport</td><td>3</td></tr>\n"
    "</table>\n<p>Trains run <b>every day</b> except"
)
NUMBERS = (
    "Monthly readings of the rain gauge, in millimetres: January 81.4, February 63.0, March 55.7, April 48.2, "
    "May 52.9, June 44.1, July 38.6, August 47.3, September 59.8, October 88.5, November 97.2, December 90.0. "
    "The total for the year is"
)

PROMPTS = [
    ("capital", "The capital of France is"),
    ("once", "Once upon a time, in a small village by the sea,"),
    ("list", LIST),
    ("numbers", NUMBERS),
    ("code_python", CODE_PY),
    ("html", HTML),
    ("multilingual", MULTI),
    ("code_rust", CODE_RUST + "\nimpl<T> Ring<T> {\n    pub fn pop(&mut self) -> Option<T> {\n"),
    ("garden", PROSE_GARDEN + "The best time to plant garlic is"),
    ("turns", "<start_of_turn>user\nWrite one sentence about the sea.<end_of_turn>\n<start_of_turn>model\n"),
    ("lighthouse_long", PROSE_LIGHTHOUSE + PROSE_HARBOUR + PROSE_GARDEN + "When the youngest child finally left the island, she took with her"),
    ("mixed_long", PROSE_LIGHTHOUSE + CODE_PY + "\n" + PROSE_GARDEN + LIST),
]


def piece(vocab, tok: int, special: bool) -> bytes:
    buf = ctypes.create_string_buffer(256)
    n = llama_cpp.llama_token_to_piece(vocab, tok, buf, 256, 0, special)
    if n < 0:
        raise RuntimeError(f"token_to_piece({tok}) needs {-n} bytes")
    return buf.raw[:n]


def detok(vocab, ids, remove_special: bool, unparse_special: bool) -> bytes:
    arr = (llama_cpp.llama_token * len(ids))(*ids)
    cap = 64 + 64 * len(ids)
    buf = ctypes.create_string_buffer(cap)
    n = llama_cpp.llama_detokenize(vocab, arr, len(ids), buf, cap, remove_special, unparse_special)
    if n < 0:
        raise RuntimeError("detokenize buffer too small")
    return buf.raw[:n]


def main(argv=None) -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--model", default=DEFAULT_MODEL)
    ap.add_argument("--out", default=os.path.join(ROOT, "tests/fixtures/gemma"))
    ap.add_argument("--tokenize-only", action="store_true", help="write tokenize.json only")
    a = ap.parse_args(argv)
    model_sha = sha256_file(a.model)
    source = f"llama-cpp-python {llama_cpp.__version__} (llama.cpp {LLAMA_CPP_COMMIT})"
    llm = llama_cpp.Llama(model_path=a.model, n_ctx=N_CTX, n_batch=N_BATCH, n_ubatch=N_BATCH, n_threads=N_THREADS,
                          n_threads_batch=N_THREADS, logits_all=True, verbose=False, seed=0)
    vocab = llama_cpp.llama_model_get_vocab(llm.model)
    n_vocab = llama_cpp.llama_vocab_n_tokens(vocab)
    os.makedirs(a.out, exist_ok=True)

    # --- tokenize.json ---
    strings = tokenize_strings()
    cases = []
    for i, s in enumerate(strings):
        b = s.encode("utf-8")
        cases.append({"text": s, "add_bos": False, "parse_special": True, "ids": llm.tokenize(b, add_bos=False, special=True)})
        if i % 3 == 0 or "<" in s:
            cases.append({"text": s, "add_bos": True, "parse_special": True, "ids": llm.tokenize(b, add_bos=True, special=True)})
            cases.append({"text": s, "add_bos": False, "parse_special": False, "ids": llm.tokenize(b, add_bos=False, special=False)})
    # invalid UTF-8 input cannot be a JSON string: it is recorded by hex instead
    bad = [b"\xff", b"abc\xc3", b"\xc3\x28", b"\xed\xa0\x80", b"\xf0\x9f\x98", b"ok\x80ok"]
    byte_cases = [{"hex": x.hex(), "add_bos": False, "parse_special": True, "ids": llm.tokenize(x, add_bos=False, special=True)} for x in bad]
    types = [llama_cpp.llama_vocab_get_attr(vocab, t) for t in range(n_vocab)]
    ids = set(range(0, 600)) | set(range(n_vocab - 200, n_vocab))
    rng = np.random.default_rng(13)
    ids |= set(int(x) for x in rng.choice(n_vocab, 700, replace=False))
    ids |= {t for t in range(n_vocab) if types[t] & (llama_cpp.LLAMA_TOKEN_ATTR_USER_DEFINED)}
    ids |= set(t for t in range(n_vocab) if types[t] & llama_cpp.LLAMA_TOKEN_ATTR_CONTROL and t % 40 == 0)
    for c in cases:
        ids |= set(c["ids"])
    ids = sorted(ids)
    pieces = [{"id": t, "attr": int(types[t]), "hex": piece(vocab, t, True).hex()} for t in ids]
    pieces_ns = [{"id": t, "hex": piece(vocab, t, False).hex()} for t in ids if piece(vocab, t, False) != piece(vocab, t, True)]
    detoks = []
    for s in ["Hello world", " leading", "<b>x</b>\n\n", "👨‍👩‍👧‍👦 日本語", "<start_of_turn>user\nHi<end_of_turn>"]:
        tids = llm.tokenize(s.encode(), add_bos=True, special=True)
        for rs, us in [(False, True), (True, False), (False, False)]:
            detoks.append({"ids": tids, "remove_special": rs, "unparse_special": us, "hex": detok(vocab, tids, rs, us).hex()})
    split = llm.tokenize("👨‍👩‍👧‍👦".encode(), add_bos=False, special=True)
    for k in range(1, len(split) + 1):
        detoks.append({"ids": split[:k], "remove_special": False, "unparse_special": False, "hex": detok(vocab, split[:k], False, False).hex()})
    counts = {}
    for t in types:
        counts[int(t)] = counts.get(int(t), 0) + 1
    doc = {
        "source": source, "model_sha256": model_sha,
        "notes": "eog_ids: the ids llama.cpp ends generation on (llama_vocab_is_eog). ids from llama_tokenize(text utf-8, add_bos, parse_special); pieces from llama_token_to_piece(id, lstrip=0, "
                 "special=True) as hex; attr = llama_token_attr bits (1 unknown, 2 unused, 4 normal, 8 control, 16 user_defined, "
                 "32 byte, ...); pieces_nonspecial lists only the ids whose special=False piece differs; byte_cases are "
                 "non-UTF-8 inputs given by hex.",
        "n_vocab": n_vocab,
        "eog_ids": [t for t in range(n_vocab) if llama_cpp.llama_vocab_is_eog(vocab, t)],
        "bos_id": llama_cpp.llama_vocab_bos(vocab), "eos_id": llama_cpp.llama_vocab_eos(vocab),
        "attr_counts": {str(k): v for k, v in sorted(counts.items())},
        "cases": cases, "byte_cases": byte_cases, "pieces": pieces, "pieces_nonspecial": pieces_ns, "detokenize": detoks,
    }
    with open(os.path.join(a.out, "tokenize.json"), "w", encoding="utf-8") as f:
        json.dump(doc, f, ensure_ascii=False, indent=0)
    print(f"tokenize.json: {len(strings)} strings, {len(cases)} cases, {len(pieces)} pieces")
    if a.tokenize_only:
        return 0

    # --- prompts.json ---
    prompts = []
    for name, text in PROMPTS:
        prompts.append({"name": name, "text": text, "ids": llm.tokenize(text.encode(), add_bos=True, special=True)})
        print(f"prompt {name}: {len(prompts[-1]['ids'])} tokens")
    with open(os.path.join(a.out, "prompts.json"), "w", encoding="utf-8") as f:
        json.dump({"source": source, "model_sha256": model_sha, "tokenize": {"add_bos": True, "parse_special": True},
                   "prompts": prompts}, f, ensure_ascii=False, indent=1)

    # --- llamacpp_greedy.json ---
    out = []
    t0 = time.time()
    for p in prompts:
        llm.reset()
        llm.eval(p["ids"])
        cont, margins = [], []
        for step in range(N_CONTINUE):
            z = np.asarray(llm.scores[llm.n_tokens - 1], dtype=np.float64)
            top = int(np.argmax(z))
            second = float(np.max(np.delete(z, top)))
            cont.append(top)
            margins.append(round(float(z[top]) - second, 6))
            if step + 1 < N_CONTINUE:
                llm.eval([top])
        text = detok(vocab, cont, False, False)
        out.append({"name": p["name"], "prompt_len": len(p["ids"]), "continuation": cont, "margin": margins, "text_hex": text.hex(),
                    "text": text.decode("utf-8", "replace")})
        print(f"greedy {p['name']}: {text.decode('utf-8', 'replace')!r} min margin {min(margins):.4f}")
    secs = time.time() - t0
    settings = {"n_threads": N_THREADS, "n_ctx": N_CTX, "n_batch": N_BATCH, "n_ubatch": N_BATCH, "logits_all": True,
                "flash_attn": "disabled (llama-cpp-python default)", "kv_cache_type": "f16 (default)", "swa_full": "true (llama-cpp-python default: full-size SWA cache)",
                "sampling": "argmax of llama.cpp's logits (temperature 0), lowest id on ties; prompt evaluated in one "
                            "llm.eval (n_batch chunks), then one token per eval", "backend": "CPU",
                "cpu_build": "GGML_NATIVE=OFF, AVX AVX2 FMA F16C BMI2 (scripts/setup-llamacpp.sh)",
                "system_info": llama_cpp.llama_print_system_info().decode(), "seconds": round(secs, 1)}
    with open(os.path.join(a.out, "llamacpp_greedy.json"), "w", encoding="utf-8") as f:
        json.dump({"source": source, "model_sha256": model_sha, "settings": settings, "n_continue": N_CONTINUE, "prompts": out},
                  f, ensure_ascii=False, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
