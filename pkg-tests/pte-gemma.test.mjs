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
  const r = await page.evaluate(async ({ cases }) => {
    await wd.ready();
    const before = wd.wasmMemoryBytes();
    const t0 = performance.now();
    const module = await wd.Module.load('/tests/fixtures/pte/gemma.pte', { data: '/.cache/pte/gemma.ptd', backend: 'cpu' });
    const loadMs = performance.now() - t0;
    const i64 = (xs) => ({ shape: [xs.length], data: BigInt64Array.from(xs.map(BigInt)) });
    const out = { loadMs, growthMiB: (wd.wasmMemoryBytes() - before) / 2 ** 20, cases: [] };
    for (const c of cases) {
      await module.resetState();
      let ids = c.ids;
      let pos = ids.map((_, i) => i);
      const got = [];
      let decodeMs = 0;
      for (let step = 0; step < c.want.length; step++) {
        const s0 = performance.now();
        const [logits] = await module.forward([i64(ids), i64(pos)]);
        if (step > 0) decodeMs += performance.now() - s0;
        const vocab = logits.shape.at(-1);
        const last = logits.data.subarray(logits.data.length - vocab);
        let best = 0;
        for (let v = 1; v < vocab; v++) if (last[v] > last[best]) best = v;
        got.push(best);
        pos = [pos.at(-1) + 1];
        ids = [best];
      }
      out.cases.push({ got, msPerToken: decodeMs / (c.want.length - 1) });
    }
    module.destroy();
    return out;
  }, { cases });
  t.diagnostic(`load ${r.loadMs.toFixed(0)} ms, wasm memory +${r.growthMiB.toFixed(0)} MiB (the f32 weights live there on the CPU backend)`);
  r.cases.forEach((c, i) => {
    t.diagnostic(`${JSON.stringify(cases[i].prompt)}: ${c.msPerToken.toFixed(0)} ms/token`);
    assert.deepEqual(c.got, cases[i].want, `case ${i}: greedy tokens equal transformers'`);
  });
});
