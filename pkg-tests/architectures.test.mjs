// Every decoder architecture on its tiny random-weight GGUF (tests/fixtures/decoders, written
// with the `gguf` package by scripts/make-tiny-decoders.py), loaded by `Generator.load` from
// nginx in headless Chromium on the CPU backend, against the fixture's oracles: llama.cpp's own
// logits and tokenization (llama-cpp-python) and the float64 NumPy reference. The check and its
// tolerances live in bench/lib/architecture_check.mjs (the `architectures` bench suite counts
// the variants that pass it).
import assert from 'node:assert/strict';
import path from 'node:path';
import { test } from 'node:test';
import { architectureFixtures, checkArchitecture } from '../bench/lib/architecture_check.mjs';
import { useBrowserHarness } from './support/fixture.mjs';
import { REPO_ROOT } from './support/server.mjs';

const DIR = path.join(REPO_ROOT, 'tests/fixtures/decoders');
const VARIANTS = ['gemma2', 'gemma3', 'llama', 'llama3', 'mistral', 'phi3', 'qwen2', 'qwen3', 'smollm'];
const harness = useBrowserHarness();

test('every architecture in Chromium: logits like llama.cpp and the float64 reference, tokens like llama.cpp', { timeout: 600_000 }, async (t) => {
  const files = await architectureFixtures(DIR);
  assert.deepEqual(files.map((f) => f.replace('tiny-', '').replace('.llamacpp.json', '')), VARIANTS, 'one fixture per variant');
  const page = await harness.openHarnessPage(t);
  for (const file of files) {
    const r = await checkArchitecture(page, DIR, '/tests/fixtures/decoders/', file);
    t.diagnostic(`${r.variant} (${r.architecture}): max abs vs reference ${r.worstRef.toExponential(2)}; vs llama.cpp ${r.worstCpp.toFixed(3)} (min cosine ${r.minCos.toFixed(5)}); ${r.tokenized} tokenizations`);
    assert.deepEqual(r.failures.slice(0, 10), [], `${r.variant}: ${r.failures.length} failures`);
  }
});
