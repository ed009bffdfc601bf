// One decoder architecture's tiny GGUF (tests/fixtures/decoders) checked in a harness page,
// shared by pkg-tests/architectures.test.mjs and the `architectures` bench suite: the page
// loads the file with `Generator.load` (CPU backend, 64 positions, logits), evaluates every
// fixture sequence at every position and tokenizes every fixture string; the comparison with
// the fixture's oracles runs here in Node:
//   - the float64 NumPy reference (scripts/gemma_reference.py): max abs <= 2e-4, same top-1;
//   - llama.cpp's logits (llama-cpp-python): cosine >= 0.99 and max abs <= 1.0, before the
//     window where llama.cpp ignores the file's (`llamacpp_ignores_window`);
//   - llama.cpp's tokenization: ids equal.
import { readdir, readFile } from 'node:fs/promises';
import path from 'node:path';

export const REFERENCE_MAX_ABS = 2e-4;
export const LLAMACPP_MIN_COSINE = 0.99;
export const LLAMACPP_MAX_ABS = 1.0;

/** The fixture files (`tiny-*.llamacpp.json`) under `dir`, sorted. */
export async function architectureFixtures(dir) {
  return (await readdir(dir)).filter((f) => f.endsWith('.llamacpp.json')).sort();
}

const argmax = (v) => v.reduce((b, x, i) => (x > v[b] ? i : b), 0);

/**
 * Runs the fixture `file` of `dir` in `page` (a harness page with `wd`), served at `urlDir`.
 * Resolves to `{ variant, architecture, failures: [text], worstRef, worstCpp, minCos, tokenized }`.
 */
export async function checkArchitecture(page, dir, urlDir, file) {
  const fixture = JSON.parse(await readFile(path.join(dir, file), 'utf8'));
  const url = `${urlDir}${file.replace('.llamacpp.json', '.gguf')}`;
  const r = await page.evaluate(async ({ url, sequences, tokenize }) => {
    const gen = await wd.Generator.load(url, { backend: 'cpu', contextLength: 64, logits: true });
    const runs = [];
    for (const ids of sequences) {
      const ev = await gen.evaluate(ids, { logitPositions: ids.map((_, i) => i) });
      runs.push(Array.from(ev.logits));
    }
    const tokenized = tokenize.map((c) => Array.from(gen.tokenize(c.text, { addSpecial: c.add_bos, parseSpecial: c.parse_special })));
    const out = { runs, tokenized, architecture: gen.stats().architecture, vocab: gen.stats().vocabSize };
    gen.destroy();
    return out;
  }, { url, sequences: fixture.sequences.map((s) => s.ids), tokenize: fixture.tokenize });

  const failures = [];
  const vocab = fixture.n_vocab;
  if (r.vocab !== vocab) failures.push(`vocabulary ${r.vocab}, fixture ${vocab}`);
  const window = fixture.window ?? 0;
  const cppUntil = fixture.llamacpp_ignores_window && window > 0 ? window : Infinity;
  let worstRef = 0, worstCpp = 0, minCos = 1;
  fixture.sequences.forEach((seq, k) => {
    const ours = r.runs[k];
    if (ours.length !== seq.ids.length * vocab) {
      failures.push(`sequence ${k}: ${ours.length} logits`);
      return;
    }
    for (let p = 0; p < seq.ids.length; p++) {
      const row = ours.slice(p * vocab, (p + 1) * vocab);
      const ref = seq.reference_logits[p];
      const maxRef = Math.max(...row.map((v, i) => Math.abs(v - ref[i])));
      worstRef = Math.max(worstRef, maxRef);
      if (!(maxRef <= REFERENCE_MAX_ABS)) failures.push(`sequence ${k} position ${p}: max abs ${maxRef} vs the reference`);
      if (argmax(row) !== argmax(ref)) failures.push(`sequence ${k} position ${p}: top-1 ${argmax(row)}, reference ${argmax(ref)}`);
      if (p >= cppUntil) continue;
      const cpp = seq.llamacpp_logits[p];
      const maxCpp = Math.max(...row.map((v, i) => Math.abs(v - cpp[i])));
      let dot = 0, na = 0, nb = 0;
      row.forEach((v, i) => { dot += v * cpp[i]; na += v * v; nb += cpp[i] * cpp[i]; });
      const cos = dot / Math.sqrt(na * nb);
      worstCpp = Math.max(worstCpp, maxCpp);
      minCos = Math.min(minCos, cos);
      if (!(cos >= LLAMACPP_MIN_COSINE && maxCpp <= LLAMACPP_MAX_ABS)) failures.push(`sequence ${k} position ${p}: vs llama.cpp cosine ${cos}, max abs ${maxCpp}`);
    }
  });
  fixture.tokenize.forEach((c, i) => {
    if (JSON.stringify(r.tokenized[i]) !== JSON.stringify(c.ids)) {
      failures.push(`tokenize ${JSON.stringify(c.text)} (add_bos ${c.add_bos}, special ${c.parse_special}): ${JSON.stringify(r.tokenized[i])}, llama.cpp ${JSON.stringify(c.ids)}`);
    }
  });
  return { variant: file.replace('.llamacpp.json', ''), architecture: r.architecture, failures, worstRef, worstCpp, minCos, tokenized: fixture.tokenize.length };
}
