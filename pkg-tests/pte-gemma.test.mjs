// Gemma 3 270M as an ExecuTorch program in headless Chromium: tests/fixtures/pte/gemma.pte
// (exported by the webdelegate partitioner from transformers' model loaded from the setup's
// GGUF) with its f32 weights streamed by Range from .cache/pte/gemma.ptd (1.07 GB, rebuilt
// torch-free by `npm run setup`), loaded with `Module.load` on the CPU backend: prefill, then
// greedy decode one token per `forward`, its KV caches kept as delegate state and reset between
// prompts by `resetState()`.
// Oracle: transformers' own greedy tokens (eager, f32), recorded in tests/fixtures/pte/gemma.json
// with ExecuTorch's portable runtime agreeing. Every token must be equal.
import assert from 'node:assert/strict';
import { readFile } from 'node:fs/promises';
import path from 'node:path';
import { test } from 'node:test';
import { pteGreedyDecode } from '../bench/lib/pte_gemma_page.mjs';
import { useBrowserHarness } from './support/fixture.mjs';
import { REPO_ROOT } from './support/server.mjs';

const harness = useBrowserHarness();
const SLOW = { timeout: 900_000 };
const TOKENS = 16;

test('CPU: Gemma 3 270M from its .pte (weights from the .ptd by Range) decodes transformers\' greedy tokens', SLOW, async (t) => {
  const fixture = JSON.parse(await readFile(path.join(REPO_ROOT, 'tests/fixtures/pte/gemma.json'), 'utf8'));
  const cases = fixture.cases.slice(0, 2).map((c) => ({
    prompt: c.prompt, ids: c.prompt_ids, want: c.greedy.transformers_eager.slice(0, TOKENS),
  }));
  const page = await harness.openHarnessPage(t);
  const r = await page.evaluate(pteGreedyDecode, { cases });
  t.diagnostic(`load ${r.loadMs.toFixed(0)} ms, wasm memory +${r.growthMiB.toFixed(0)} MiB (the f32 weights live there on the CPU backend)`);
  r.cases.forEach((c, i) => {
    t.diagnostic(`${JSON.stringify(cases[i].prompt)}: ${c.tps.toFixed(2)} tokens/s`);
    assert.deepEqual(c.got, cases[i].want, `case ${i}: greedy tokens equal transformers'`);
  });
});
