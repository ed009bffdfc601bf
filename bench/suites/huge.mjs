// Benchmark: a 5.4 GiB weights file (scripts/make-huge-weights.mjs: more than a 32-bit wasm
// module can address; one tensor of 1.5 GiB, larger than the headless adapter's 1 GiB
// maxBufferSize) streamed by HttpParameterProvider from nginx into GPU buffers in headless
// Chromium, against a raw baseline in the same page: one fetch() of the file whose body reader
// writes every chunk with writeBuffer into the same buffer layout (a buffer per tensor, the big
// one in the same row-aligned pieces as ours). Each ends at queue.onSubmittedWorkDone().
//
// In one fresh page, in this order:
//   1. our first load (wasm memory growth, the page's ArrayBuffer peak from the DevTools
//      protocol, GPU bytes resident, requests), then every tensor's and every piece's first and
//      last MiB read back from the GPU and compared with the file;
//   2. ROUNDS rounds of [raw, ours] (alternating which goes first): the ratio of MB/s;
//   3. a load aborted at 2.5 GiB: it rejects with CANCELLED and no GPU buffer is left;
//   4. a load suspended at 2 GiB (notify('suspend'), held SUSPEND_MS, checked that no byte
//      arrives meanwhile) and resumed, with the SHA-256 of a sample of tensors (the 1.5 GiB one
//      included) checked by the provider on the way: the bytes fetched twice are reported;
//   5. the same tensors as GGUF: one load, first/last MiB of every tensor read back.
// Also reported: the GPU process's resident memory after a load (SwiftShader keeps "GPU"
// buffers in that process's RAM). Every WebGPU figure here is SwiftShader's.
//
// Keys: huge_file_gib, huge_tensor_gib, huge_load_ratio_vs_raw (+ _spread, _best), huge_load_mbps,
// huge_raw_mbps, huge_wasm_growth_mb, huge_js_array_buffer_peak_mb, huge_js_heap_peak_mb,
// huge_gpu_bytes_gib, huge_gpu_buffers, huge_requests, huge_request_bound, huge_split_pieces,
// huge_device_max_buffer_mib, huge_readback_checked, huge_readback_mismatches,
// huge_abort_at_gib, huge_abort_live_buffers, huge_resume_refetched_mb, huge_resume_stalled_bytes,
// huge_sha_checked_tensors, huge_sha_checked_gib, huge_gguf_load_mbps,
// huge_gguf_readback_mismatches, huge_gpu_process_rss_mb, huge_rounds, huge_raw_retries.
//
// Contract (bench/run.mjs): `export async function run(ctx)` resolves to a flat object of numbers.
// Standalone: `node bench/suites/huge.mjs` prints the object and merges it into latest.json.
// BENCH_HUGE_ROUNDS (default 1) sets the rounds.
import { createHash } from 'node:crypto';
import { existsSync } from 'node:fs';
import { mkdir, open, readFile, readdir, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { ROOT } from '../../scripts/make-bench-weights.mjs';
import { ensureHugeWeights } from '../../scripts/make-huge-weights.mjs';
import { harnessPages } from '../lib/pages.mjs';
import { heapSampler } from '../lib/probes.mjs';
import { median, spread } from '../lib/stats.mjs';

const MIB = 1 << 20;
const GIB = 1 << 30;
// One round by default: here a second raw round failed in writeBuffer with "A valid external
// Instance reference no longer exists" (SwiftShader, two devices each having held 5.4 GiB).
const ROUNDS = Number(process.env.BENCH_HUGE_ROUNDS ?? 1);
/** The provider's default `maxRequestSize` (the bench uses the defaults a user gets). */
const DEFAULT_MAX_REQUEST_SIZE = 64 << 20;
const ABORT_AT = 2.5 * GIB;
const SUSPEND_AT = 2 * GIB;
const SUSPEND_MS = 1500;

/** Runs in the page: `window.hugeBench` with the contenders and the checks. */
async function installHugeBench({ url, sampleSha }) {
  // The raw pipe's device is made at its first run, after our first load (with both devices
  // made up front, SwiftShader reported our 5.4 GiB of buffers out of memory here).
  let device = null;
  const { COPY_DST, STORAGE } = GPUBufferUsage;
  const hex = (buf) => Array.from(new Uint8Array(buf), (b) => b.toString(16).padStart(2, '0')).join('');
  const sha = async (bytes) => hex(await crypto.subtle.digest('SHA-256', bytes));
  let held = null;
  let layout = null; // [{fileOffset, length}] per buffer, from our first load

  /** The raw pipe: one GET of the file, every chunk written where its bytes belong. */
  async function raw() {
    if (!device) {
      const adapter = await navigator.gpu.requestAdapter();
      device = await adapter.requestDevice({
        requiredLimits: {
          maxBufferSize: adapter.limits.maxBufferSize,
          maxStorageBufferBindingSize: adapter.limits.maxStorageBufferBindingSize,
        },
      });
    }
    const t0 = performance.now();
    const buffers = layout.map((r) => device.createBuffer({ size: Math.ceil(r.length / 4) * 4, usage: COPY_DST | STORAGE }));
    const response = await fetch(url, { cache: 'no-store' });
    const reader = response.body.getReader();
    let position = 0; // file offset of the next body byte
    let region = 0;
    let carry = null; // {region, at, bytes} of < 4 bytes waiting for their word
    const put = (r, at, bytes) => {
      // `at` and the buffer's regions start 4-aligned; only a region's end may be ragged.
      const whole = bytes.length - (bytes.length % 4);
      if (whole) device.queue.writeBuffer(buffers[r], at, bytes, 0, whole);
      return bytes.subarray(whole);
    };
    for (;;) {
      const { done, value } = await reader.read();
      if (done) break;
      let offset = 0;
      while (offset < value.length) {
        while (region < layout.length && layout[region].fileOffset + layout[region].length <= position) region += 1;
        if (region >= layout.length) { position += value.length - offset; break; }
        const r = layout[region];
        if (position < r.fileOffset) { // header or padding bytes
          const skip = Math.min(r.fileOffset - position, value.length - offset);
          offset += skip; position += skip; continue;
        }
        const take = Math.min(r.fileOffset + r.length - position, value.length - offset);
        let bytes = value.subarray(offset, offset + take);
        let at = position - r.fileOffset;
        if (carry) { // complete the pending word first
          const word = new Uint8Array(4);
          word.set(carry.bytes);
          const fill = Math.min(4 - carry.bytes.length, bytes.length);
          word.set(bytes.subarray(0, fill), carry.bytes.length);
          const have = carry.bytes.length + fill;
          if (have === 4 || at + fill === r.length) {
            device.queue.writeBuffer(buffers[region], carry.at, word, 0, 4);
            carry = null;
          } else {
            carry = { region, at: carry.at, bytes: word.subarray(0, have) };
          }
          bytes = bytes.subarray(fill); at += fill;
        }
        const rest = put(region, at, bytes);
        if (rest.length) {
          const tail = new Uint8Array(4);
          tail.set(rest);
          const restAt = at + bytes.length - rest.length;
          if (restAt + rest.length === r.length) device.queue.writeBuffer(buffers[region], restAt, tail, 0, 4);
          else carry = { region, at: restAt, bytes: rest.slice() };
        }
        offset += take; position += take;
      }
    }
    await device.queue.onSubmittedWorkDone();
    const ms = performance.now() - t0;
    held = () => { for (const b of buffers) b.destroy(); };
    return { ms, bytes: layout.reduce((n, r) => n + r.length, 0) };
  }

  const provider = new wd.HttpParameterProvider({ cache: 'no-store' });
  await provider.addScope('h', url);
  const keys = provider.keys('h');
  const memoryBefore = wd.wasmMemoryBytes();
  let first = true;

  async function ours() {
    const t0 = performance.now();
    const params = await provider.loadToGpu('h', keys);
    const ms = performance.now() - t0;
    const stats = provider.lastStats();
    const out = { ms, bytes: stats.bytesNeeded, stats, live: provider.liveGpuBuffers() };
    if (first) {
      out.wasmGrowth = wd.wasmMemoryBytes() - memoryBefore;
      out.limits = await provider.gpuLimits();
      const index = Object.fromEntries(keys.map((k) => [k, provider.describe('h', k)]));
      // The layout the raw pipe writes into: our pieces, at their file offsets.
      out.pieces = params.map((p) => ({ key: p.key, pieces: p.pieces }));
      out.index = index;
      first = false;
    }
    held = () => { for (const p of params) p.free(); };
    window.hugeBench.params = params;
    return out;
  }

  /** SHA-256 of the first and last MiB of every loaded tensor and of every piece. */
  async function readBack(params) {
    const out = [];
    for (const p of params) {
      const spans = [[0, Math.min(1 << 20, p.length)], [Math.max(0, p.length - (1 << 20)), Math.min(1 << 20, p.length)]];
      for (const piece of p.pieces.length > 1 ? p.pieces : []) {
        spans.push([piece.offset, 1 << 20], [piece.offset + piece.length - (1 << 20), 1 << 20]);
      }
      for (const [offset, length] of spans) out.push({ key: p.key, offset, length, sha: await sha(await p.read(offset, length)) });
    }
    return out;
  }

  async function aborted() {
    const controller = new AbortController();
    const aborting = new wd.HttpParameterProvider({
      cache: 'no-store',
      onProgress: (e) => { if (e.bytesDone >= 2.5 * 2 ** 30 && !controller.signal.aborted) { controller.abort(); } },
    });
    await aborting.addScope('h', url);
    const t0 = performance.now();
    let code = 'OK';
    try { await aborting.loadToGpu('h', keys, { signal: controller.signal }); } catch (e) { code = e.code; }
    return { code, ms: performance.now() - t0, stats: aborting.lastStats(), live: aborting.liveGpuBuffers() };
  }

  async function suspended() {
    let suspendedAt = null;
    let during = 0;
    const suspending = new wd.HttpParameterProvider({
      cache: 'no-store',
      onProgress: (e) => {
        if (suspendedAt !== null && e.bytesDone > suspendedAt) during = Math.max(during, e.bytesDone - suspendedAt);
        if (suspendedAt === null && e.bytesDone >= 2 * 2 ** 30) {
          suspendedAt = e.bytesDone;
          suspending.notify('suspend');
          setTimeout(() => { window.hugeBench.resumeStalled = during; suspending.notify('resume'); }, 1500);
        }
      },
    });
    await suspending.addScope('h', url, { parameterSha256: sampleSha });
    const params = await suspending.loadToGpu('h', keys);
    const stats = suspending.lastStats();
    for (const p of params) p.free();
    return { stats, suspendedAt, stalled: window.hugeBench.resumeStalled ?? null };
  }

  async function gguf(ggufUrl) {
    const g = new wd.HttpParameterProvider({ cache: 'no-store' });
    await g.addScope('g', ggufUrl);
    const t0 = performance.now();
    const params = await g.loadToGpu('g', g.keys('g'));
    const ms = performance.now() - t0;
    const stats = g.lastStats();
    const checks = await readBack(params);
    for (const p of params) p.free();
    return { ms, bytes: stats.bytesNeeded, checks, live: g.liveGpuBuffers() };
  }

  window.hugeBench = {
    ours,
    raw: () => raw(),
    setLayout(l) { layout = l; },
    readBack: () => readBack(window.hugeBench.params),
    aborted,
    suspended,
    gguf,
    release() { held?.(); held = null; window.hugeBench.params = null; },
    liveGpuBuffers: () => provider.liveGpuBuffers(),
  };
}

/** Resident memory (MiB) of Chromium's GPU process, from /proc; null when not found. */
async function gpuProcessRssMb() {
  for (const pid of await readdir('/proc').catch(() => [])) {
    if (!/^\d+$/.test(pid)) continue;
    try {
      const cmdline = await readFile(`/proc/${pid}/cmdline`, 'utf8');
      if (!cmdline.includes('--type=gpu-process')) continue;
      const status = await readFile(`/proc/${pid}/status`, 'utf8');
      const kb = Number(/VmRSS:\s+(\d+)/.exec(status)?.[1]);
      if (kb) return kb / 1024;
    } catch {
      // the process ended meanwhile
    }
  }
  return null;
}

/** SHA-256 (hex) of `length` bytes at `offset` of `file`. */
async function fileSha(handle, offset, length) {
  const bytes = Buffer.alloc(length);
  await handle.read(bytes, 0, length, offset);
  return createHash('sha256').update(bytes).digest('hex');
}

/** Checks page read-backs against the file: the count of mismatches. */
async function mismatches(file, index, checks) {
  const handle = await open(file, 'r');
  try {
    let bad = 0;
    for (const c of checks) {
      const entry = index.find((e) => e.key === c.key);
      if (!entry || (await fileSha(handle, entry.offset + c.offset, c.length)) !== c.sha) bad += 1;
    }
    return bad;
  } finally {
    await handle.close();
  }
}

export async function run(ctx) {
  if (!existsSync(path.join(ROOT, 'pkg', 'webdelegate.js'))) throw new Error('pkg/ is missing: run `npm run build:pkg`');
  const manifest = await ensureHugeWeights((m) => ctx?.log?.(m));
  const { safetensors, gguf, tensorSha256, tensors } = manifest;
  const tensorBytes = tensors.reduce((n, t) => n + t.length, 0);
  const big = tensors.reduce((a, t) => (t.length > a.length ? t : a));
  // A sample for the provider's SHA-256: the first, the largest, one in the middle, the last.
  const sample = [...new Set([tensors[0], big, tensors[Math.floor(tensors.length / 2)], tensors.at(-1)].map((t) => t.name))];
  const sampleSha = Object.fromEntries(sample.map((k) => [k, tensorSha256[k]]));
  const source = await harnessPages(ctx);
  const rel = (file) => `${source.base}/${path.relative(path.join(ROOT, '.cache'), file)}`;
  const url = rel(manifest.files.safetensors);
  const out = {};
  const page = await source.open();
  try {
    const p = page;
    await p.evaluate(installHugeBench, { url, sampleSha });
    const cdp = await p.page.context().newCDPSession(p.page);
    const measured = async (fn, arg) => {
      const sampler = await heapSampler(p.page);
      try {
        return { ...(await p.evaluate(fn, arg)), heap: await sampler.stop() };
      } catch (e) {
        await sampler.stop();
        throw e;
      }
    };
    ctx?.log?.(`huge: first load of ${(safetensors.size / GIB).toFixed(2)} GiB`);
    const firstLoad = await measured(() => window.hugeBench.ours());
    const rss = await gpuProcessRssMb();
    // The raw pipe writes into the same buffers: one per tensor, the big one in our pieces.
    const layout = [];
    for (const { key, pieces } of firstLoad.pieces) {
      const entry = safetensors.index.find((e) => e.key === key);
      for (const piece of pieces) layout.push({ fileOffset: entry.offset + piece.offset, length: piece.length });
    }
    await p.evaluate((l) => window.hugeBench.setLayout(l), layout);
    ctx?.log?.('huge: reading back the first and last MiB of every tensor and piece');
    const checks = await p.evaluate(() => window.hugeBench.readBack());
    await p.evaluate(() => window.hugeBench.release());
    const bad = await mismatches(manifest.files.safetensors, safetensors.index, checks);
    // The raw pipe's device sometimes fails in writeBuffer here ("A valid external Instance
    // reference no longer exists", SwiftShader with two devices that held 5.4 GiB each): then
    // it runs once more on a page of its own, and the retry is reported.
    let rawRetries = 0;
    const rawRun = async () => {
      try {
        return await p.evaluate(() => window.hugeBench.raw());
      } catch (error) {
        rawRetries += 1;
        ctx?.log?.(`huge: the raw pipe failed (${String(error.message).split('\n')[0]}); again on a fresh page`);
        const fresh = await source.open();
        try {
          await fresh.evaluate(installHugeBench, { url, sampleSha: {} });
          await fresh.evaluate((l) => window.hugeBench.setLayout(l), layout);
          const r = await fresh.evaluate(() => window.hugeBench.raw());
          await fresh.evaluate(() => window.hugeBench.release());
          return r;
        } finally {
          await fresh.page.close().catch(() => {});
        }
      }
    };
    const runs = { ours: [], raw: [] };
    for (let i = 0; i < ROUNDS; i++) {
      for (const name of i % 2 ? ['ours', 'raw'] : ['raw', 'ours']) {
        await cdp.send('HeapProfiler.collectGarbage');
        const r = name === 'raw' ? await rawRun() : await p.evaluate((n) => window.hugeBench[n](), name);
        await p.evaluate(() => window.hugeBench.release());
        runs[name].push(r.bytes / 1e6 / (r.ms / 1000));
        ctx?.log?.(`huge: round ${i + 1} ${name} ${(r.bytes / 1e6 / (r.ms / 1000)).toFixed(0)} MB/s`);
      }
    }
    const ratios = runs.ours.map((m, i) => m / runs.raw[i]);
    ctx?.log?.('huge: a load aborted at 2.5 GiB');
    const abort = await p.evaluate(() => window.hugeBench.aborted());
    ctx?.log?.('huge: a load suspended at 2 GiB and resumed, with a SHA-256 sample');
    const suspend = await p.evaluate(() => window.hugeBench.suspended());
    ctx?.log?.('huge: the same tensors as GGUF');
    const ggufRun = await p.evaluate((u) => window.hugeBench.gguf(u), rel(manifest.files.gguf));
    const ggufBad = await mismatches(manifest.files.gguf, gguf.index, ggufRun.checks);
    await cdp.detach().catch(() => {});
    const bigPieces = firstLoad.pieces.find((x) => x.key === big.name)?.pieces.length ?? 0;
    const sampledBytes = sample.reduce((n, k) => n + tensors.find((t) => t.name === k).length, 0);
    Object.assign(out, {
      huge_file_gib: safetensors.size / GIB,
      huge_tensor_gib: tensorBytes / GIB,
      huge_load_ratio_vs_raw: median(ratios),
      huge_load_ratio_spread: spread(ratios),
      huge_load_ratio_vs_raw_best: Math.max(...runs.ours) / Math.max(...runs.raw),
      huge_load_mbps: median(runs.ours),
      huge_raw_mbps: median(runs.raw),
      huge_first_load_mbps: firstLoad.bytes / 1e6 / (firstLoad.ms / 1000),
      huge_rounds: ROUNDS,
      huge_raw_retries: rawRetries,
      huge_wasm_growth_mb: firstLoad.wasmGrowth / MIB,
      huge_js_array_buffer_peak_mb: firstLoad.heap.arrayBuffers / MIB,
      huge_js_heap_peak_mb: firstLoad.heap.used / MIB,
      huge_gpu_bytes_gib: firstLoad.live.bytes / GIB,
      huge_gpu_buffers: firstLoad.live.count,
      huge_requests: firstLoad.stats.requestsSent,
      huge_request_bound: 1 + Math.ceil(firstLoad.stats.bytesNeeded / DEFAULT_MAX_REQUEST_SIZE),
      huge_split_pieces: bigPieces,
      huge_device_max_buffer_mib: firstLoad.limits.maxBufferSize / MIB,
      huge_readback_checked: checks.length,
      huge_readback_mismatches: bad,
      huge_abort_cancelled: abort.code === 'CANCELLED' ? 1 : 0,
      huge_abort_at_gib: abort.stats.bytesReceived / GIB,
      huge_abort_live_buffers: abort.live.count,
      huge_resume_refetched_mb: (suspend.stats.bytesReceived - suspend.stats.bytesNeeded) / MIB,
      huge_resume_stalled_bytes: suspend.stalled ?? -1,
      huge_sha_checked_tensors: sample.length,
      huge_sha_checked_gib: sampledBytes / GIB,
      huge_gguf_load_mbps: ggufRun.bytes / 1e6 / (ggufRun.ms / 1000),
      huge_gguf_readback_mismatches: ggufBad,
      huge_gpu_process_rss_mb: rss ?? -1,
    });
    ctx?.log?.(`huge: ratio per round ${ratios.map((x) => x.toFixed(3)).join(', ')}`);
  } finally {
    await page.page.close().catch(() => {});
    await source.close();
  }
  return out;
}

// Standalone: prints the numbers and merges them into bench/results/latest.json.
if (process.argv[1] && fileURLToPath(import.meta.url) === path.resolve(process.argv[1])) {
  const numbers = await run({ log: console.log });
  console.log(JSON.stringify(numbers, null, 2));
  const file = path.join(ROOT, 'bench', 'results', 'latest.json');
  await mkdir(path.dirname(file), { recursive: true });
  const previous = existsSync(file) ? JSON.parse(await readFile(file, 'utf8')) : {};
  await writeFile(file, JSON.stringify({ ...previous, ...numbers }, null, 2) + '\n');
}
