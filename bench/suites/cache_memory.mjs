// Benchmark: the page's memory while a load writes the persistent cache (`persistentCache`), on
// the real 90 MB all-MiniLM-L6-v2 model, against the same load without the cache in the same
// run. Each load runs in a fresh page with the provider's defaults (requests of up to 64 MiB, 2
// in flight); the V8 heap and the array buffer backing stores still referenced (a full GC before
// each sample) are sampled through the DevTools protocol every 20 ms (bench/lib/probes.mjs) from
// before the load until every cache entry is written. What it shows: how much of the response bodies the page holds while a cache entry is
// written next to the load (bounded by the cache writer's queue, see
// src/browser/cache_writer.js), against a load that holds only its current chunks.
//
// Contract (bench/run.mjs): `export async function run(ctx)` resolves to a flat object of numbers.
// Standalone: `node bench/suites/cache_memory.mjs` prints them.
import { existsSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { heapSampler } from '../lib/probes.mjs';
import { ROOT } from '../../scripts/make-bench-weights.mjs';
import { harnessPages } from '../lib/pages.mjs';

const MODEL_DIR = path.join(ROOT, '.cache', 'models', 'all-MiniLM-L6-v2');
const MIB = 1 << 20;

/** In the page: one load of every tensor, with the persistent cache named `cacheName` or none. */
async function loadInPage({ url, cacheName }) {
  const options = cacheName ? { persistentCache: cacheName } : {};
  const provider = new wd.HttpParameterProvider({ ...options, cache: 'no-store' });
  await provider.addScope('m', url);
  const keys = provider.keys('m');
  const t0 = performance.now();
  const params = await provider.loadToGpu('m', keys);
  const ms = performance.now() - t0;
  const stats = provider.lastStats();
  for (const p of params) p.free();
  let entries = 0;
  if (cacheName) {
    // Entries are written while the bodies stream: wait until every data request's is in.
    const cache = await caches.open(cacheName);
    for (let i = 0; i < 500; i++) {
      entries = (await cache.keys()).length;
      if (entries >= stats.requestsPlanned) break;
      await new Promise((r) => setTimeout(r, 20));
    }
    await provider.clearPersistentCache();
  }
  provider.free();
  return { ms, stats, entries };
}

export async function run(ctx) {
  const model = path.join(MODEL_DIR, 'model.safetensors');
  if (!existsSync(model)) throw new Error(`${model} is missing: run \`npm run setup\``);
  const source = await harnessPages(ctx);
  const url = `${source.base}/models/all-MiniLM-L6-v2/model.safetensors`;
  const out = {};
  const RUNS = 3;
  const results = { nocache: [], cache: [] };
  try {
    for (let run = 0; run < RUNS; run++) {
      // Alternate the order: a shared machine's noise hits both modes alike.
      const modes = run % 2 ? ['cache', 'nocache'] : ['nocache', 'cache'];
      for (const label of modes) {
        const cacheName = label === 'cache' ? `wd-bench-${Date.now()}-${run}` : null;
        ctx?.log?.(`run ${run + 1}/${RUNS}: the 90 MB model ${cacheName ? 'writing the persistent cache' : 'without the cache'}`);
        const page = await source.open();
        // Live memory only: every sample runs a full GC first.
        const sampler = await heapSampler(page.page, { collectGarbage: true });
        const base = await sampler.stop();
        const during = await heapSampler(page.page, { collectGarbage: true });
        const r = await page.evaluate(loadInPage, { url, cacheName });
        const peak = await during.stop();
        await page.page.close();
        if (cacheName && r.entries < r.stats.requestsPlanned) {
          throw new Error(`only ${r.entries} of ${r.stats.requestsPlanned} cache entries were written`);
        }
        results[label].push({ r, peak, base });
      }
    }
  } finally {
    await source.close();
  }
  const median = (xs) => { const s = [...xs].sort((a, b) => a - b); return s[Math.floor(s.length / 2)]; };
  for (const [label, runs] of Object.entries(results)) {
    Object.assign(out, {
      [`${label}_load_mbps_90mb`]: median(runs.map(({ r }) => r.stats.bytesNeeded / 1e6 / (r.ms / 1000))),
      [`${label}_peak_array_buffers_mb_90mb`]: Math.max(...runs.map(({ peak }) => peak.arrayBuffers)) / MIB,
      [`${label}_median_peak_array_buffers_mb_90mb`]: median(runs.map(({ peak }) => peak.arrayBuffers)) / MIB,
      [`${label}_peak_js_heap_mb_90mb`]: Math.max(...runs.map(({ peak }) => peak.used)) / MIB,
      [`${label}_heap_samples_90mb`]: runs.reduce((n, { peak }) => n + peak.samples, 0),
    });
  }
  out.cache_load_speed_ratio_90mb = out['cache_load_mbps_90mb'] / out['nocache_load_mbps_90mb'];
  return out;
}

if (process.argv[1] && fileURLToPath(import.meta.url) === path.resolve(process.argv[1])) {
  console.log(JSON.stringify(await run(), null, 2));
}
