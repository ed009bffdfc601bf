// In the page (passed to page.evaluate): Gemma 3 270M from tests/fixtures/pte/gemma.pte with its
// weights from .cache/pte/gemma.ptd on the CPU backend, greedy: for each case `{ids, want}`, the
// prompt then one token per `forward` (want.length tokens), the KV caches reset between cases.
// Returns the load time, the wasm memory growth across the load, and per case the tokens and
// the decode tokens/s (the steps after the first).
export async function pteGreedyDecode({ cases }) {
  await wd.ready();
  const before = wd.wasmMemoryBytes();
  const t0 = performance.now();
  const module = await wd.Module.load('/tests/fixtures/pte/gemma.pte', { data: '/.cache/pte/gemma.ptd', backend: 'cpu' });
  const out = { loadMs: performance.now() - t0, growthMiB: (wd.wasmMemoryBytes() - before) / 2 ** 20, cases: [] };
  const i64 = (xs) => ({ shape: [xs.length], data: BigInt64Array.from(xs.map(BigInt)) });
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
    out.cases.push({ got, tps: (c.want.length - 1) / (decodeMs / 1000) });
  }
  module.destroy();
  return out;
}
