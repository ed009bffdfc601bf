// Benchmark: loading weights over HTTP into WebGPU buffers in headless Chromium, our provider
// against two raw baselines written in plain JS in the same page, same server, same run:
//   (a) HttpParameterProvider.loadToGpu: coalesced Range requests, chunks straight to the queue;
//   (b1) fetch() + arrayBuffer() + one writeBuffer;  (b2) fetch() body reader + writeBuffer per
//   chunk. Each ends at queue.onSubmittedWorkDone().
// Files: the real all-MiniLM-L6-v2 model.safetensors (90.9 MB, from `npm run setup`) and a
// generated ~1 GB safetensors file (scripts/make-bench-weights.mjs, into .cache/bench).
// Reports MB/s of each, ratio = ours / faster baseline (median of the runs; also from the best
// runs), requests, bytes over
// the wire vs needed, wasm memory growth (wasm memory never shrinks, so the growth over a fresh
// page's load is its peak) and the JS heap after each load.
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

const MODEL_DIR = path.join(ROOT, '.cache', 'models', 'all-MiniLM-L6-v2');
/** The provider's default `maxRequestSize` (the bench uses the defaults a user gets). */
const DEFAULT_MAX_REQUEST_SIZE = 64 << 20;

/** Runs in the page: every contender `runs` times (after one warm-up each), rotating the order. */
async function benchInPage({ url, runs }) {
  const adapter = await navigator.gpu.requestAdapter();
  const device = await adapter.requestDevice({ requiredLimits: { maxBufferSize: adapter.limits.maxBufferSize } });
  const { COPY_DST, STORAGE } = GPUBufferUsage;
  const ceil4 = (n) => Math.ceil(n / 4) * 4;
  const heap = () => (performance.memory ? performance.memory.usedJSHeapSize : 0);

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
    buffer.destroy();
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
    buffer.destroy();
    return { ms, bytes: offset };
  }

  const provider = new wd.HttpParameterProvider({ cache: 'no-store' });
  await provider.addScope('m', url); // reads the file's own index (one 64 KiB request)
  const keys = provider.keys('m');
  const memoryBefore = wd.wasmMemoryBytes();
  let heapPeak = 0;
  async function ours() {
    const t0 = performance.now();
    const params = await provider.loadToGpu('m', keys);
    const ms = performance.now() - t0;
    heapPeak = Math.max(heapPeak, heap());
    const stats = provider.lastStats();
    for (const p of params) p.free();
    return { ms, bytes: stats.bytesNeeded, stats };
  }

  const contenders = { ours, arrayBuffer: arrayBufferBaseline, stream: streamBaseline };
  const results = { ours: [], arrayBuffer: [], stream: [] };
  const names = Object.keys(contenders);
  // The first load of our provider is the one that can grow wasm memory: measure it.
  const first = await ours();
  const wasmGrowth = wd.wasmMemoryBytes() - memoryBefore;
  for (const name of names.slice(1)) await contenders[name](); // warm-ups
  for (let i = 0; i < runs; i++) {
    for (let j = 0; j < names.length; j++) {
      const name = names[(i + j) % names.length];
      results[name].push(await contenders[name]());
    }
  }
  const median = (xs) => { const s = [...xs].sort((a, b) => a - b); return s[Math.floor(s.length / 2)]; };
  const mbps = (name) => median(results[name].map((r) => r.bytes / 1e6 / (r.ms / 1000)));
  const best = (name) => Math.max(...results[name].map((r) => r.bytes / 1e6 / (r.ms / 1000)));
  device.destroy();
  return {
    ours: mbps('ours'), arrayBuffer: mbps('arrayBuffer'), stream: mbps('stream'),
    bestOurs: best('ours'), bestRaw: Math.max(best('arrayBuffer'), best('stream')),
    stats: first.stats, wasmGrowth, heapPeak, bytes: first.bytes,
    staging: provider.stagingBytes(),
  };
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
      const page = await source.open();
      const url = `${source.base}/${path.relative(path.join(ROOT, '.cache'), file)}`;
      const r = await page.evaluate(benchInPage, { url, runs });
      await page.page.close();
      const faster = Math.max(r.arrayBuffer, r.stream);
      Object.assign(out, {
        [`load_mbps_${label}`]: r.ours,
        [`raw_arraybuffer_mbps_${label}`]: r.arrayBuffer,
        [`raw_stream_mbps_${label}`]: r.stream,
        [`load_ratio_vs_raw_${label}`]: r.ours / faster,
        // The same ratio from each contender's best run (a shared machine only ever slows runs).
        [`load_ratio_vs_raw_best_${label}`]: r.bestOurs / r.bestRaw,
        [`load_requests_${label}`]: r.stats.requestsSent,
        [`load_request_bound_${label}`]: 1 + Math.ceil(r.stats.bytesNeeded / DEFAULT_MAX_REQUEST_SIZE),
        [`overfetch_fraction_${label}`]: (r.stats.bytesReceived - r.stats.bytesNeeded) / r.stats.bytesNeeded,
        [`bytes_needed_mb_${label}`]: r.stats.bytesNeeded / 1e6,
        [`bytes_received_mb_${label}`]: r.stats.bytesReceived / 1e6,
        [`wasm_growth_mb_${label}`]: r.wasmGrowth / (1 << 20),
        [`js_heap_peak_mb_${label}`]: r.heapPeak / (1 << 20),
        [`staging_peak_mb_${label}`]: r.staging.peak / (1 << 20),
        // Share of the bytes written straight from response chunks to GPUQueue.writeBuffer.
        [`direct_write_fraction_${label}`]: r.stats.bytesWrittenDirect
          / (r.stats.bytesWrittenDirect + r.stats.bytesWrittenViaHost),
      });
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
