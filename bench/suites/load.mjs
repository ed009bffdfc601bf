// Benchmark: loading weights over HTTP into WebGPU buffers in headless Chromium, our provider
// against two raw baselines written in plain JS in the same page, same server, same run:
//   (a) HttpParameterProvider.loadToGpu: coalesced Range requests, chunks straight to the queue;
//   (b1) fetch() + arrayBuffer() + one writeBuffer;  (b2) fetch() body reader + writeBuffer per
//   chunk. Each ends at queue.onSubmittedWorkDone().
// Files: the real all-MiniLM-L6-v2 model.safetensors (90.9 MB, from `npm run setup`) and a
// generated ~1 GB safetensors file (scripts/make-bench-weights.mjs, into .cache/bench).
// Each file runs on PAGES fresh pages, each with its own runs (rotating order, after one warm-up
// each). Reports MB/s of each (median over pages of each page's median), ratio = ours / faster
// baseline (per page, then the median over pages, with its spread; also from the best runs),
// requests, bytes over the wire vs needed, wasm memory growth (wasm memory never shrinks, so the
// growth over a fresh page's first load is its peak), and per contender the JS heap + array
// buffers: the peak during a load (DevTools protocol, garbage included) and what a finished load
// keeps alive (heap after a forced GC with the load's results still held, minus before it).
//
// Contract (bench/run.mjs): `export async function run(ctx)` resolves to a flat object of numbers.
// With ctx it uses ctx.openHarnessPage() and ctx.serverUrl (whose nginx serves the repo root, so
// the weights are same-origin under /.cache/); without, it starts its own nginx and Chromium.
// Standalone: `node bench/suites/load.mjs` prints the object and merges it into
// bench/results/latest.json.
import { existsSync } from 'node:fs';
import { mkdir, readFile, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { ROOT, ensureLargeWeights } from '../../scripts/make-bench-weights.mjs';
import { harnessPages } from '../lib/pages.mjs';
import { heapSampler } from '../lib/probes.mjs';
import { median, spread } from '../lib/stats.mjs';

const MODEL_DIR = path.join(ROOT, '.cache', 'models', 'all-MiniLM-L6-v2');
/** The provider's default `maxRequestSize` (the bench uses the defaults a user gets). */
const DEFAULT_MAX_REQUEST_SIZE = 64 << 20;

/**
 * Runs in the page: sets up the three contenders on `window.loadBench`. `run(name)` loads the
 * file once and keeps what the load produced (our GPU parameters, the baselines' GPU buffer)
 * until `release()`, so the suite can measure, after a forced GC, what a finished load keeps
 * alive in the JS heap. The first `run('ours')` measures wasm memory growth.
 */
async function installLoadBench({ url }) {
  const adapter = await navigator.gpu.requestAdapter();
  const device = await adapter.requestDevice({ requiredLimits: { maxBufferSize: adapter.limits.maxBufferSize } });
  const { COPY_DST, STORAGE } = GPUBufferUsage;
  const ceil4 = (n) => Math.ceil(n / 4) * 4;
  let held = null; // what the last load produced, until release()

  async function arrayBufferBaseline() {
    const t0 = performance.now();
    const body = await (await fetch(url, { cache: 'no-store' })).arrayBuffer();
    const buffer = device.createBuffer({ size: ceil4(body.byteLength), usage: COPY_DST | STORAGE });
    const whole = body.byteLength - (body.byteLength % 4);
    device.queue.writeBuffer(buffer, 0, body, 0, whole);
    if (whole < body.byteLength) {
      const tail = new Uint8Array(4);
      tail.set(new Uint8Array(body, whole));
      device.queue.writeBuffer(buffer, whole, tail);
    }
    await device.queue.onSubmittedWorkDone();
    const ms = performance.now() - t0;
    held = () => buffer.destroy();
    return { ms, bytes: body.byteLength };
  }

  async function streamBaseline() {
    const t0 = performance.now();
    const response = await fetch(url, { cache: 'no-store' });
    const size = Number(response.headers.get('content-length'));
    const buffer = device.createBuffer({ size: ceil4(size), usage: COPY_DST | STORAGE });
    const reader = response.body.getReader();
    let offset = 0; // bytes written (a multiple of 4)
    let carry = new Uint8Array(0); // < 4 bytes waiting for their word
    for (;;) {
      const { done, value } = await reader.read();
      if (done) break;
      let at = 0;
      if (carry.length) {
        const word = new Uint8Array(4);
        word.set(carry);
        const take = Math.min(4 - carry.length, value.length);
        word.set(value.subarray(0, take), carry.length);
        at = take;
        if (carry.length + take < 4) { carry = word.subarray(0, carry.length + take); continue; }
        device.queue.writeBuffer(buffer, offset, word);
        offset += 4;
        carry = new Uint8Array(0);
      }
      const whole = (value.length - at) - ((value.length - at) % 4);
      if (whole) device.queue.writeBuffer(buffer, offset, value, at, whole);
      offset += whole;
      carry = value.slice(at + whole);
    }
    if (carry.length) {
      const word = new Uint8Array(4);
      word.set(carry);
      device.queue.writeBuffer(buffer, offset, word);
      offset += carry.length;
    }
    await device.queue.onSubmittedWorkDone();
    const ms = performance.now() - t0;
    held = () => buffer.destroy();
    return { ms, bytes: offset };
  }

  const provider = new wd.HttpParameterProvider({ cache: 'no-store' });
  await provider.addScope('m', url); // reads the file's own index (one 64 KiB request)
  const keys = provider.keys('m');
  const memoryBefore = wd.wasmMemoryBytes();
  let first = true;
  async function ours() {
    const t0 = performance.now();
    const params = await provider.loadToGpu('m', keys);
    const ms = performance.now() - t0;
    const stats = provider.lastStats();
    held = () => { for (const p of params) p.free(); };
    const out = { ms, bytes: stats.bytesNeeded, stats, staging: provider.stagingBytes() };
    if (first) out.wasmGrowth = wd.wasmMemoryBytes() - memoryBefore;
    first = false;
    return out;
  }
  const contenders = { ours, arrayBuffer: arrayBufferBaseline, stream: streamBaseline };
  window.loadBench = {
    run: (name) => contenders[name](),
    release() { held?.(); held = null; },
    destroy() { device.destroy(); },
  };
}

const CONTENDERS = ['ours', 'arrayBuffer', 'stream'];
/** Pages per file (each with its own runs), runs per contender per page. */
const PAGES = 3;


/**
 * One page of `url`: our first load (wasm growth), a warm-up of each baseline, then `runs`
 * rounds with a rotating order. Around every load: the page's heap peak (DevTools protocol,
 * garbage included) and, after it, what it keeps alive: the heap after a forced GC minus the
 * heap after a forced GC before it.
 */
async function benchPage(p, url, runs) {
  await p.evaluate(installLoadBench, { url });
  const cdp = await p.page.context().newCDPSession(p.page);
  const gcHeap = async () => {
    await cdp.send('HeapProfiler.collectGarbage');
    const h = await cdp.send('Runtime.getHeapUsage');
    return h.usedSize + (h.backingStorageSize ?? 0);
  };
  const results = Object.fromEntries(CONTENDERS.map((n) => [n, []]));
  async function once(name) {
    const before = await gcHeap();
    const sampler = await heapSampler(p.page);
    let r;
    try {
      r = await p.evaluate((n) => window.loadBench.run(n), name);
    } finally {
      r = { ...r, heap: await sampler.stop() };
    }
    r.retained = (await gcHeap()) - before;
    await p.evaluate(() => window.loadBench.release());
    return r;
  }
  const first = await once('ours');
  for (const name of CONTENDERS.slice(1)) await once(name); // warm-ups
  for (let i = 0; i < runs; i++) {
    for (let j = 0; j < CONTENDERS.length; j++) {
      const name = CONTENDERS[(i + j) % CONTENDERS.length];
      results[name].push(await once(name));
    }
  }
  await p.evaluate(() => window.loadBench.destroy());
  await cdp.detach().catch(() => {});
  const mbps = (r) => r.bytes / 1e6 / (r.ms / 1000);
  const per = Object.fromEntries(CONTENDERS.map((n) => [n, {
    mbps: median(results[n].map(mbps)),
    best: Math.max(...results[n].map(mbps)),
    heapPeak: Math.max(...results[n].map((r) => r.heap.used + r.heap.arrayBuffers)),
    retained: median(results[n].map((r) => r.retained)),
  }]));
  return { per, first };
}

export async function run(ctx) {
  const model = path.join(MODEL_DIR, 'model.safetensors');
  if (!existsSync(model)) throw new Error(`${model} is missing: run \`npm run setup\``);
  if (!existsSync(path.join(ROOT, 'pkg', 'webdelegate.js'))) throw new Error('pkg/ is missing: run `npm run build:pkg`');
  const large = await ensureLargeWeights();
  const source = await harnessPages(ctx);
  const out = {};
  try {
    for (const [label, file, runs] of [
      ['90mb', model, 5],
      ['1gb', large, 3],
    ]) {
      ctx?.log?.(`loading ${path.relative(ROOT, file)} (${runs} runs of each contender)`);
      const url = `${source.base}/${path.relative(path.join(ROOT, '.cache'), file)}`;
      const pages = [];
      for (let i = 0; i < PAGES; i++) {
        const page = await source.open();
        try {
          pages.push(await benchPage(page, url, runs));
        } finally {
          await page.page.close();
        }
      }
      const ratios = pages.map(({ per }) => per.ours.mbps / Math.max(per.arrayBuffer.mbps, per.stream.mbps));
      const r = pages[0].first;
      const across = (n, field) => median(pages.map(({ per }) => per[n][field]));
      ctx?.log?.(`${label}: ratio per page ${ratios.map((x) => x.toFixed(3)).join(', ')}`);
      Object.assign(out, {
        [`load_mbps_${label}`]: across('ours', 'mbps'),
        [`raw_arraybuffer_mbps_${label}`]: across('arrayBuffer', 'mbps'),
        [`raw_stream_mbps_${label}`]: across('stream', 'mbps'),
        [`load_ratio_vs_raw_${label}`]: median(ratios),
        [`load_ratio_spread_${label}`]: spread(ratios),
        [`load_pages_${label}`]: PAGES,
        // The same ratio from each contender's best run (a shared machine only ever slows runs).
        [`load_ratio_vs_raw_best_${label}`]: median(pages.map(({ per }) => per.ours.best / Math.max(per.arrayBuffer.best, per.stream.best))),
        [`load_requests_${label}`]: r.stats.requestsSent,
        [`load_request_bound_${label}`]: 1 + Math.ceil(r.stats.bytesNeeded / DEFAULT_MAX_REQUEST_SIZE),
        [`overfetch_fraction_${label}`]: (r.stats.bytesReceived - r.stats.bytesNeeded) / r.stats.bytesNeeded,
        [`bytes_needed_mb_${label}`]: r.stats.bytesNeeded / 1e6,
        [`bytes_received_mb_${label}`]: r.stats.bytesReceived / 1e6,
        [`wasm_growth_mb_${label}`]: r.wasmGrowth / (1 << 20),
        [`staging_peak_mb_${label}`]: r.staging.peak / (1 << 20),
        // Share of the bytes written straight from response chunks to GPUQueue.writeBuffer.
        [`direct_write_fraction_${label}`]: r.stats.bytesWrittenDirect
          / (r.stats.bytesWrittenDirect + r.stats.bytesWrittenViaHost),
      });
      for (const n of CONTENDERS) {
        const key = n === 'ours' ? 'ours' : n === 'arrayBuffer' ? 'raw_arraybuffer' : 'raw_stream';
        // JS heap + array buffers: the peak during one load (garbage included) and what a
        // finished load keeps alive after a forced GC, per contender (medians over pages).
        out[`js_heap_peak_mb_${key}_${label}`] = across(n, 'heapPeak') / (1 << 20);
        out[`js_retained_mb_${key}_${label}`] = across(n, 'retained') / (1 << 20);
      }
    }
  } finally {
    await source.close();
  }
  return out;
}

// Standalone: prints the numbers and merges them into bench/results/latest.json.
if (process.argv[1] && fileURLToPath(import.meta.url) === path.resolve(process.argv[1])) {
  const numbers = await run();
  console.log(JSON.stringify(numbers, null, 2));
  const file = path.join(ROOT, 'bench', 'results', 'latest.json');
  await mkdir(path.dirname(file), { recursive: true });
  const previous = existsSync(file) ? JSON.parse(await readFile(file, 'utf8')) : {};
  await writeFile(file, JSON.stringify({ ...previous, ...numbers }, null, 2) + '\n');
}
