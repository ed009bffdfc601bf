// Every decoder architecture on its tiny random-weight GGUF (tests/fixtures/decoders, written
// with the `gguf` package by scripts/make-tiny-decoders.py), loaded by `Generator.load` from
// nginx in headless Chromium on the CPU backend, against two oracles in each fixture:
// - llama.cpp's own logits (llama-cpp-python 0.3.36, CPU, n_ctx 64): cosine >= 0.99 and max
//   abs <= 1.0 at every position (llama.cpp rounds activations to 8 bits and keeps an f16 KV
//   cache), and its tokenization (ids equal, no tolerance);
// - the float64 NumPy reference (scripts/gemma_reference.py): max abs <= 2e-4 at every
//   position, the same top-1.
// Where llama.cpp ignores a file's sliding window (`llama`, `phi3`), it is compared only
// before the window; the reference follows the window everywhere.
import assert from 'node:assert/strict';
import { readdir, readFile } from 'node:fs/promises';
import path from 'node:path';
import { test } from 'node:test';
import { useBrowserHarness } from './support/fixture.mjs';
import { REPO_ROOT } from './support/server.mjs';

const DIR = path.join(REPO_ROOT, 'tests/fixtures/decoders');
const files = (await readdir(DIR)).filter((f) => f.endsWith('.llamacpp.json')).sort();
const harness = useBrowserHarness();
const SLOW = { timeout: 600_000 };

test('every architecture in Chromium: logits like llama.cpp and the float64 reference, tokens like llama.cpp', SLOW, async (t) => {
  assert.ok(files.length >= 2, `fixtures in ${DIR}`);
  const page = await harness.openHarnessPage(t);
  for (const file of files) {
    const fixture = JSON.parse(await readFile(path.join(DIR, file), 'utf8'));
    const url = `/tests/fixtures/decoders/${file.replace('.llamacpp.json', '.gguf')}`;
    const tokenize = fixture.tokenize;
    const r = await page.evaluate(async ({ url, sequences, tokenize }) => {
      const gen = await wd.Generator.load(url, { backend: 'cpu', contextLength: 64, logits: true });
      const runs = [];
      for (const ids of sequences) {
        const positions = ids.map((_, i) => i);
        const ev = await gen.evaluate(ids, { logitPositions: positions });
        runs.push(Array.from(ev.logits));
      }
      const tokenized = tokenize.map((c) => Array.from(gen.tokenize(c.text, { addSpecial: c.add_bos, parseSpecial: c.parse_special })));
      const out = { runs, tokenized, architecture: gen.stats().architecture, vocab: gen.stats().vocabSize };
      gen.destroy();
      return out;
    }, { url, sequences: fixture.sequences.map((s) => s.ids), tokenize });

    const vocab = fixture.n_vocab;
    assert.equal(r.vocab, vocab, `${file}: vocabulary`);
    const window = fixture.window ?? 0;
    const cppUntil = fixture.llamacpp_ignores_window && window > 0 ? window : Infinity;
    let worstRef = 0, worstCpp = 0, minCos = 1;
    fixture.sequences.forEach((seq, k) => {
      const ours = r.runs[k];
      assert.equal(ours.length, seq.ids.length * vocab, `${file} sequence ${k}: logits`);
      for (let p = 0; p < seq.ids.length; p++) {
        const row = ours.slice(p * vocab, (p + 1) * vocab);
        const ref = seq.reference_logits[p];
        const maxRef = Math.max(...row.map((v, i) => Math.abs(v - ref[i])));
        assert.ok(maxRef <= 2e-4, `${file} sequence ${k} position ${p}: max abs ${maxRef} vs the reference`);
        const argmax = (v) => v.reduce((b, x, i) => (x > v[b] ? i : b), 0);
        assert.equal(argmax(row), argmax(ref), `${file} sequence ${k} position ${p}: top-1`);
        worstRef = Math.max(worstRef, maxRef);
        if (p < cppUntil) {
          const cpp = seq.llamacpp_logits[p];
          const maxCpp = Math.max(...row.map((v, i) => Math.abs(v - cpp[i])));
          let dot = 0, na = 0, nb = 0;
          row.forEach((v, i) => { dot += v * cpp[i]; na += v * v; nb += cpp[i] * cpp[i]; });
          const cos = dot / Math.sqrt(na * nb);
          assert.ok(cos >= 0.99 && maxCpp <= 1.0, `${file} sequence ${k} position ${p}: vs llama.cpp cosine ${cos}, max abs ${maxCpp}`);
          worstCpp = Math.max(worstCpp, maxCpp);
          minCos = Math.min(minCos, cos);
        }
      }
    });
    tokenize.forEach((c, i) => assert.deepEqual(r.tokenized[i], c.ids, `${file}: tokenize ${JSON.stringify(c.text)} (add_bos ${c.add_bos}, special ${c.parse_special})`));
    t.diagnostic(`${file} (${r.architecture}): max abs vs reference ${worstRef.toExponential(2)}; vs llama.cpp ${worstCpp.toFixed(3)} (min cosine ${minCos.toFixed(5)}); ${tokenize.length} tokenizations equal`);
  }
});
