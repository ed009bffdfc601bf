// The HTTP parameter provider in headless Chromium (the built package, real WebGPU): weights
// served by nginx loaded with Range requests straight into GPU buffers (the WebGPU backend's,
// written from the response chunks with no copy through wasm memory), every buffer read back
// and compared (SHA-256) with the source, request counts, write paths, live GPU buffers and wasm
// memory checked; IREE status codes on errors; AbortSignal cancellation; and, against our
// fault-injecting server, a dropped body resumed with If-Range, a server ignoring Range, a file
// replaced mid-load, SHA-256 checks; a tensor larger than the largest buffer split at row
// boundaries (a forced small limit) or refused, and a real GPU out of memory (SwiftShader's).
import assert from 'node:assert/strict';
import { createHash } from 'node:crypto';
import { mkdtemp, readFile, rm, truncate, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { after, before, test } from 'node:test';
import { startFaultyServer } from './support/faulty-server.mjs';
import { TEST_TIMEOUT, useBrowserHarness } from './support/fixture.mjs';
import { REPO_ROOT } from './support/server.mjs';
import { safetensorsHeader, seededChunks, writeRandomSafetensors, writeStreamedWeights } from './support/weights.mjs';

const dir = await mkdtemp(path.join(os.tmpdir(), 'webdelegate-weights-'));
const model = await writeRandomSafetensors(path.join(dir, 'model.safetensors'), { seed: 3, count: 40, maxLen: 600_000 });
// A tensor larger than the buffers the split test allows (3001 rows of 1000 bytes), as
// safetensors and as GGUF (innermost dimension first), with a small neighbour.
const SPLIT_TENSORS = [
  { name: 'wide', dtype: 'F32', shape: [3001, 250], length: 3001 * 1000 },
  { name: 'tail', dtype: 'F32', shape: [19], length: 76 },
];
const split = await writeStreamedWeights(
  { safetensors: path.join(dir, 'split.safetensors'), gguf: path.join(dir, 'split.gguf') },
  SPLIT_TENSORS, (i) => seededChunks(40 + i, SPLIT_TENSORS[i].length),
);
// A sparse file (no disk used) whose one tensor is exactly 1 GiB: SwiftShader, whose
// maxBufferSize is 1 GiB, reports a real out-of-memory for a buffer of exactly that size.
const EXACT = [
  { name: 'small', dtype: 'F32', shape: [4, 4], length: 64 },
  { name: 'exact', dtype: 'F32', shape: [262144, 1024], length: 1 << 30 },
];
{
  const head = safetensorsHeader(EXACT);
  await writeFile(path.join(dir, 'exact.safetensors'), head);
  await truncate(path.join(dir, 'exact.safetensors'), head.length + 64 + (1 << 30));
}
const FIXTURES = path.join(REPO_ROOT, 'tests', 'fixtures', 'formats');
const manifest = JSON.parse(await readFile(path.join(FIXTURES, 'manifest.json'), 'utf8'));
const harness = useBrowserHarness({
  locations: [{ prefix: '/weights/', dir }, { prefix: '/fixtures/', dir: FIXTURES }],
});
let faulty;

before(async () => { faulty = await startFaultyServer({ root: dir }); });
after(async () => {
  await faulty?.stop();
  await rm(dir, { recursive: true, force: true });
});

const index = model.index.map(({ key, offset, length, dtype, shape }) => ({ key, offset, length, dtype, shape }));

/** Opens the harness and lets the page reach the fault server (another origin). */
async function page(t) {
  await harness.browser.context.route(`${faulty.url}/**`, (route) => route.continue());
  return harness.openHarnessPage(t);
}

/** In the page: loads `keys` and returns {sha: {key: hex}, stats, growth, events, warnings} or an error. */
const loadInPage = async ({ url, index, keys, options, scopeOptions, abortAfterFirstEvent }) => {
  const hex = (buf) => Array.from(new Uint8Array(buf), (b) => b.toString(16).padStart(2, '0')).join('');
  const events = [];
  const warnings = [];
  const controller = new AbortController();
  const provider = new wd.HttpParameterProvider({
    ...options,
    onProgress: (e) => { events.push(e); if (abortAfterFirstEvent) controller.abort(); },
    onWarning: (m) => warnings.push(m),
  });
  return capture(async () => {
    await provider.addScope('m', url, index ? { index, ...scopeOptions } : scopeOptions);
    const before = wd.wasmMemoryBytes();
    const params = await provider.loadToGpu('m', keys, { signal: controller.signal });
    const growth = wd.wasmMemoryBytes() - before;
    const sha = {};
    for (const p of params) sha[p.key] = hex(await crypto.subtle.digest('SHA-256', await p.read()));
    const lengths = params.map((p) => p.length);
    const liveWhileHeld = provider.liveGpuBuffers();
    for (const p of params) p.free();
    const liveAfterFree = provider.liveGpuBuffers();
    return { sha, stats: provider.lastStats(), growth, events, warnings, lengths, liveWhileHeld, liveAfterFree };
  }).then((r) => ({ ...r, events, warnings }));
};

test('every tensor loads into GPU buffers byte-exact, in few requests, without growing wasm memory', TEST_TIMEOUT, async (t) => {
  const p = await harness.openHarnessPage(t);
  const keys = index.map((e) => e.key);
  const maxRequestSize = 1 << 20;
  // No index given: the provider reads the file's own (format detected from the extension).
  const r = await p.evaluate(loadInPage, {
    url: `${harness.server.url}/weights/model.safetensors`, keys, options: { maxRequestSize },
  });
  assert.ok(r.ok, JSON.stringify(r.error));
  for (const key of keys) assert.equal(r.value.sha[key], model.tensorSha256[key], `bytes of ${key}`);
  const bytes = index.reduce((n, e) => n + e.length, 0);
  const { stats } = r.value;
  assert.ok(stats.requestsPlanned <= 1 + Math.ceil(bytes / maxRequestSize), JSON.stringify(stats));
  assert.equal(stats.bytesReceived, bytes, 'no byte fetched twice, no gap fetched');
  assert.equal(stats.requestsSent, stats.requestsPlanned);
  t.diagnostic(`${(bytes / 1e6).toFixed(1)} MB in ${stats.requestsSent} requests, wasm memory grew ${r.value.growth} bytes; `
    + `${stats.bytesWrittenDirect} bytes written straight to the GPU queue, ${stats.bytesWrittenViaHost} from wasm memory`);
  assert.ok(r.value.growth <= 2 << 20, `wasm memory grew ${r.value.growth} bytes loading ${bytes}`);
  // Zero-copy: response chunks went straight to GPUQueue.writeBuffer; only the bytes carried
  // across chunk boundaries and the unaligned ends of the odd-length u8 tensors passed through
  // wasm memory.
  assert.ok(stats.bytesWrittenDirect >= bytes * 0.99, JSON.stringify(stats));
  assert.ok(stats.bytesWrittenViaHost <= bytes * 0.01, JSON.stringify(stats));
  // The parameters live in the WebGPU backend's counted buffers, freed with their GpuParameter.
  assert.equal(r.value.liveWhileHeld.count, keys.length);
  assert.ok(r.value.liveWhileHeld.bytes >= bytes);
  assert.deepEqual(r.value.liveAfterFree, { count: 0, bytes: 0 });
  const last = r.value.events.at(-1);
  assert.equal(last.bytesDone, last.bytesTotal);
  assert.equal(last.requestsDone, last.requestsTotal);
  assert.deepEqual(r.value.warnings, []);
});

test('safetensors, GGUF and IRPA files (peers\' writers) load byte-exact, splats included', TEST_TIMEOUT, async (t) => {
  const p = await harness.openHarnessPage(t);
  const files = ['mixed.safetensors', 'mixed_v3.gguf', 'align64_v3.gguf', 'mixed.irpa', 'chained.irpa'];
  const r = await p.evaluate(async ({ base, files }) => {
    const hex = (bytes) => Array.from(bytes, (b) => b.toString(16).padStart(2, '0')).join('');
    const provider = new wd.HttpParameterProvider();
    const out = {};
    for (const name of files) {
      out[name] = await capture(async () => {
        await provider.addScope(name, `${base}/fixtures/${name}`);
        const keys = provider.keys(name);
        const params = await provider.loadToGpu(name, keys);
        return Object.fromEntries(await Promise.all(params.map(async (q) => [q.key, hex(await q.read())])));
      });
    }
    return out;
  }, { base: harness.server.url, files });
  for (const name of files) {
    assert.ok(r[name].ok, `${name}: ${JSON.stringify(r[name].error)}`);
    const entries = manifest.files[name].entries;
    assert.equal(Object.keys(r[name].value).length, entries.length, name);
    for (const e of entries) {
      const want = e.bytes_hex ?? e.splat_pattern_hex.repeat(e.length / (e.splat_pattern_hex.length / 2));
      assert.equal(r[name].value[e.key], want, `${name}: ${e.key}`);
    }
  }
});

test('describe gives each format\'s shape in the file\'s own order (GGUF innermost first), as documented', TEST_TIMEOUT, async (t) => {
  const p = await harness.openHarnessPage(t);
  const files = ['mixed.safetensors', 'mixed_v3.gguf', 'mixed.irpa'];
  const r = await p.evaluate(async ({ base, files }) => {
    const provider = new wd.HttpParameterProvider();
    const list = new wd.ParameterProviderList([provider]);
    const out = {};
    for (const name of files) {
      await provider.addScope(name, `${base}/fixtures/${name}`);
      out[name] = Object.fromEntries(provider.keys(name).map((key) => [key, [provider.describe(name, key), list.describe(name, key)]]));
    }
    return out;
  }, { base: harness.server.url, files });
  for (const name of files) {
    for (const e of manifest.files[name].entries) {
      const [direct, viaList] = r[name][e.key];
      const shape = e.shape ?? null;
      const rowMajorShape = shape && name.endsWith('.gguf') ? [...shape].reverse() : shape;
      assert.deepEqual(direct, { length: e.length, dtype: e.dtype ?? null, shape, rowMajorShape }, `${name}: ${e.key}`);
      assert.deepEqual(viaList, direct, `${name}: ${e.key} through a list`);
    }
  }
  // The same [3, 5] matrix: row-major in safetensors, innermost first (reversed) in GGUF.
  assert.deepEqual(r['mixed.safetensors']['embed.weight'][0].shape, [3, 5]);
  assert.deepEqual(r['mixed_v3.gguf']['token_embd.weight'][0].shape, [5, 3]);
  assert.deepEqual(r['mixed_v3.gguf']['token_embd.weight'][0].rowMajorShape, [3, 5]);
});

test('sub-spans, describe, querySupport and IREE status errors', TEST_TIMEOUT, async (t) => {
  const p = await harness.openHarnessPage(t);
  const url = `${harness.server.url}/weights/model.safetensors`;
  const missing = `${harness.server.url}/weights/missing.safetensors`;
  const key = index[4].key;
  const r = await p.evaluate(async ({ url, missing, index, key }) => {
    const provider = new wd.HttpParameterProvider();
    await provider.addScope('m', url, { index });
    const span = await provider.loadToGpu('m', [{ key, offset: 3, length: 1001 }]);
    const bytes = Array.from(await span[0].read());
    return {
      bytes,
      describe: provider.describe('m', key),
      unknown: provider.describe('m', 'nope'),
      supported: [provider.querySupport('m'), provider.querySupport('x')],
      keys: provider.keys('m').length,
      notFoundKey: await capture(() => provider.loadToGpu('m', ['nope'])),
      notFoundScope: await capture(() => provider.loadToGpu('x', [key])),
      outOfRange: await capture(() => provider.loadToGpu('m', [{ key, offset: 1, length: 1e9 }])),
      missingFile: await capture(() => provider.addScope('y', missing, { index })),
      badOption: await capture(() => new wd.HttpParameterProvider({ concurrency: 9 })),
      badSignal: await capture(() => provider.notify('nap')),
      statsAfterFailure: provider.lastStats(),
      // setTimeout holds at most 2^31 - 1 ms: past it every request would time out at once.
      idleTooLong: await capture(() => new wd.HttpParameterProvider({ idleTimeoutMs: 2 ** 31 })),
      backoffTooLong: await capture(() => new wd.HttpParameterProvider({ backoffMs: 2 ** 31 })),
      // Host reads: the same bytes through wasm memory, with IREE codes.
      read: Array.from(await provider.read('m', key, 3, 1001)),
      gathered: Array.from(await provider.gather('m', [{ key, offset: 3, length: 10 }, { key, length: 5, bufferOffset: 20 }])),
      statsAfterRead: provider.lastStats(),
      readPastEnd: await capture(() => provider.read('m', key, 1, 1e9)),
      readNoKey: await capture(() => provider.read('m', 'nope')),
      write: await capture(() => provider.write('m', key, 0, Uint8Array.of(1))),
      writeNoKey: await capture(() => provider.write('m', 'nope', 0, Uint8Array.of(1))),
      noSpan: Array.from(await provider.gather('m', [])),
    };
  }, { url, missing, index, key });
  const entry = index[4];
  assert.deepEqual(Buffer.from(r.bytes), model.bytes.subarray(entry.offset + 3, entry.offset + 3 + 1001));
  assert.deepEqual(r.describe, { length: entry.length, dtype: entry.dtype, shape: entry.shape, rowMajorShape: entry.shape });
  assert.equal(r.unknown, null);
  assert.deepEqual(r.supported, [true, false]);
  assert.equal(r.keys, index.length);
  for (const [what, code, value] of [
    ['notFoundKey', 'NOT_FOUND', 5], ['notFoundScope', 'NOT_FOUND', 5], ['outOfRange', 'OUT_OF_RANGE', 11],
    ['missingFile', 'NOT_FOUND', 5], ['badOption', 'INVALID_ARGUMENT', 3], ['badSignal', 'INVALID_ARGUMENT', 3],
    ['idleTooLong', 'INVALID_ARGUMENT', 3], ['backoffTooLong', 'INVALID_ARGUMENT', 3], ['readPastEnd', 'OUT_OF_RANGE', 11],
    ['readNoKey', 'NOT_FOUND', 5], ['write', 'PERMISSION_DENIED', 7], ['writeNoKey', 'NOT_FOUND', 5],
  ]) {
    assert.equal(r[what].ok, false, what);
    assert.equal(r[what].error.name, 'StatusError', what);
    assert.equal(r[what].error.code, code, `${what}: ${r[what].error.message}`);
    assert.equal(r[what].error.codeValue, value, what);
  }
  assert.match(r.missingFile.error.message, /404/);
  assert.match(r.idleTooLong.error.message, /setTimeout/);
  // Failed loads are recorded with their outcome; a successful read after them too.
  assert.equal(r.statsAfterFailure.outcome, 'OUT_OF_RANGE', JSON.stringify(r.statsAfterFailure));
  assert.match(r.statsAfterFailure.message, /runs past its end/);
  assert.equal(r.statsAfterFailure.requestsSent, 0);
  assert.deepEqual(Buffer.from(r.read), model.bytes.subarray(entry.offset + 3, entry.offset + 3 + 1001));
  const at = (o, n) => Array.from(model.bytes.subarray(entry.offset + o, entry.offset + o + n));
  assert.deepEqual(r.gathered, [...at(3, 10), ...new Array(10).fill(0), ...at(0, 5)]);
  assert.deepEqual(r.noSpan, []);
  assert.equal(r.statsAfterRead.outcome, 'OK');
  assert.equal(r.statsAfterRead.message, null);
  assert.equal(r.statsAfterRead.bytesNeeded, 13, "the two spans share bytes [0, 13)");
  assert.equal(r.statsAfterRead.bytesReceived, 13, JSON.stringify(r.statsAfterRead));
});

test('a tensor larger than the largest buffer is split at row boundaries, or refused before any fetch', TEST_TIMEOUT, async (t) => {
  const p = await harness.openHarnessPage(t);
  const MIB = 1 << 20;
  const r = await p.evaluate(async ({ base, sha }) => {
    const hex = (buf) => Array.from(new Uint8Array(buf), (b) => b.toString(16).padStart(2, '0')).join('');
    const out = {};
    for (const file of ['split.safetensors', 'split.gguf']) {
      const provider = new wd.HttpParameterProvider({ maxRequestSize: 1 << 20 });
      await provider.addScope('m', `${base}/weights/${file}`, { parameterSha256: { wide: sha } });
      const before = wd.wasmMemoryBytes();
      // A forced small limit (the device's is far larger): at most 1 MiB per buffer.
      const [wide, tail] = await provider.loadToGpu('m', ['wide', 'tail'], { maxBufferBytes: 1 << 20 });
      const growth = wd.wasmMemoryBytes() - before;
      const stats = provider.lastStats();
      const pieces = wide.pieces;
      const live = provider.liveGpuBuffers();
      // Read back the first and last KiB of every piece, and the whole span across pieces.
      const edges = [];
      for (const piece of pieces) {
        edges.push([piece.offset, hex(await wide.read(piece.offset, 1024))]);
        const end = piece.offset + piece.length;
        edges.push([end - 1024, hex(await wide.read(end - 1024, 1024))]);
      }
      const whole = hex(await crypto.subtle.digest('SHA-256', await wide.read()));
      const across = hex(await wide.read(pieces[0].length - 3, 7));
      const partial = await provider.loadToGpu('m', [{ key: 'wide', offset: 500, length: 2_500_000 }], { maxBufferBytes: 1 << 20 });
      const partialPieces = partial[0].pieces;
      const partialSha = hex(await crypto.subtle.digest('SHA-256', await partial[0].read()));
      const tailPieces = tail.pieces.length;
      for (const q of [wide, tail, ...partial]) q.free();
      const afterFree = provider.liveGpuBuffers();
      // One buffer asked for: refused before any request, naming the size and the limit.
      const refused = await capture(() => provider.loadToGpu('m', ['wide'], { maxBufferBytes: 1 << 20, singleBuffer: true }));
      const refusedStats = provider.lastStats();
      const badCap = await capture(() => provider.loadToGpu('m', ['wide'], { maxBufferBytes: 0 }));
      // A wrong per-parameter digest over the pieces is DATA_LOSS, and keeps no buffer.
      const wrong = new wd.HttpParameterProvider();
      await wrong.addScope('m', `${base}/weights/${file}`, { parameterSha256: { wide: '00'.repeat(32) } });
      const dataLoss = await capture(() => wrong.loadToGpu('m', ['wide'], { maxBufferBytes: 1 << 20 }));
      out[file] = {
        growth, stats, pieces, live, edges, whole, across, partialPieces, partialSha, tailPieces, afterFree,
        refused, refusedStats, badCap, dataLoss, wrongLive: wrong.liveGpuBuffers(), limits: await provider.gpuLimits(),
      };
    }
    return out;
  }, { base: harness.server.url, sha: split.tensorSha256.wide });
  const wideEntry = split.safetensors.index[0];
  const file = await readFile(path.join(dir, 'split.safetensors'));
  const wide = file.subarray(wideEntry.offset, wideEntry.offset + wideEntry.length);
  const sha = (b) => createHash('sha256').update(b).digest('hex');
  for (const [name, v] of Object.entries(r)) {
    // 1048 rows of 1000 bytes fit in 1 MiB: 3001 rows take 3 pieces, balanced (1001 rows each).
    assert.deepEqual(v.pieces.map((q) => [q.offset, q.length, q.rowStart, q.rowEnd]), [
      [0, 1_001_000, 0, 1001], [1_001_000, 1_001_000, 1001, 2002], [2_002_000, 999_000, 2002, 3001],
    ], name);
    for (const q of v.pieces) assert.ok(q.bufferSize <= MIB, `${name}: a piece of ${q.bufferSize} bytes`);
    assert.equal(v.tailPieces, 1, `${name}: what fits stays whole`);
    assert.equal(v.live.count, 4, `${name}: 3 pieces and the small tensor`);
    for (const [at, got] of v.edges) assert.equal(got, wide.subarray(at, at + 1024).toString('hex'), `${name}: KiB at ${at}`);
    assert.equal(v.whole, split.tensorSha256.wide, `${name}: the whole tensor read across its pieces`);
    assert.equal(v.across, wide.subarray(1_001_000 - 3, 1_001_000 + 4).toString('hex'), `${name}: a read across a cut`);
    // Rows 0..2501 touched, 3 pieces: 834 rows each, cut at the parameter's row boundaries.
    assert.deepEqual(v.partialPieces.map((q) => [q.parameterOffset, q.rowStart, q.rowEnd]), [
      [500, 0, 834], [834_000, 834, 1668], [1_668_000, 1668, 2501],
    ], `${name}: a partial span is cut at the parameter's row boundaries`);
    assert.equal(v.partialSha, sha(wide.subarray(500, 2_500_500)), `${name}: partial span bytes`);
    assert.deepEqual(v.afterFree, { count: 0, bytes: 0 });
    assert.ok(v.growth <= 2 * MIB, `${name}: wasm memory grew ${v.growth} bytes`);
    assert.ok(v.stats.bytesWrittenDirect >= 0.99 * wideEntry.length, JSON.stringify(v.stats));
    assert.equal(v.refused.ok, false);
    assert.equal(v.refused.error.code, 'RESOURCE_EXHAUSTED', v.refused.error.message);
    assert.match(v.refused.error.message, /3001000 bytes.*1048576/);
    assert.equal(v.refusedStats.requestsSent, 0, `${name}: nothing fetched for a refused span`);
    assert.equal(v.badCap.error.code, 'INVALID_ARGUMENT');
    assert.equal(v.dataLoss.error.code, 'DATA_LOSS', v.dataLoss.error.message);
    assert.deepEqual(v.wrongLive, { count: 0, bytes: 0 }, `${name}: a failed load keeps no piece`);
    // The provider's device was granted the adapter's limits, not WebGPU's defaults (256 MiB).
    assert.ok(v.limits.maxBufferSize > 256 * MIB, JSON.stringify(v.limits));
    t.diagnostic(`${name}: device limits ${JSON.stringify(v.limits)}; ${v.stats.requestsSent} requests`);
  }
});

test('a GPU out of memory fails the load with RESOURCE_EXHAUSTED, keeps no buffer, and the provider loads on', TEST_TIMEOUT, async (t) => {
  const p = await harness.openHarnessPage(t);
  const r = await p.evaluate(async ({ url }) => {
    const provider = new wd.HttpParameterProvider();
    await provider.addScope('m', url);
    const limits = await provider.gpuLimits();
    const oom = await capture(() => provider.loadToGpu('m', ['small', 'exact']));
    const stats = provider.lastStats();
    const live = provider.liveGpuBuffers();
    const [small] = await provider.loadToGpu('m', ['small']);
    const after = { length: small.length, live: provider.liveGpuBuffers() };
    small.free();
    return { limits, oom, stats, live, after };
  }, { url: `${harness.server.url}/weights/exact.safetensors` });
  // The precondition of this real fault: the headless adapter's limit is exactly 1 GiB.
  assert.equal(r.limits.maxBufferSize, 1 << 30, JSON.stringify(r.limits));
  assert.equal(r.oom.ok, false, 'a buffer of exactly the limit was expected to run out of memory here');
  assert.equal(r.oom.error.code, 'RESOURCE_EXHAUSTED', r.oom.error.message);
  assert.match(r.oom.error.message, /ran out of memory/);
  assert.equal(r.stats.requestsSent, 0, 'nothing fetched for a load that could not allocate');
  assert.deepEqual(r.live, { count: 0, bytes: 0 }, 'the buffers the load made were dropped');
  assert.equal(r.after.length, 64, 'the provider loads on');
  assert.equal(r.after.live.count, 1);
});

test('an AbortSignal cancels a load: CANCELLED, and no request keeps running', TEST_TIMEOUT, async (t) => {
  const p = await page(t);
  const r = await p.evaluate(loadInPage, {
    url: `${faulty.url}/f/slow=5/model.safetensors`, index, keys: index.map((e) => e.key),
    options: { maxRequestSize: 256 << 10 }, abortAfterFirstEvent: true,
  });
  assert.equal(r.ok, false);
  assert.equal(r.error.code, 'CANCELLED', r.error.message);
  let active = -1;
  for (let i = 0; i < 100 && active !== 0; i++) {
    active = Number(await (await fetch(`${faulty.url}/__active`)).text());
    if (active) await new Promise((res) => setTimeout(res, 30));
  }
  assert.equal(active, 0, 'a response was still being sent after the cancelled load');
});

test('faults from the browser: drop resumed with If-Range, Range ignored, file replaced, SHA-256', TEST_TIMEOUT, async (t) => {
  const p = await page(t);
  const keys = index.slice(0, 12).map((e) => e.key);
  const load = (faults, extra = {}) => p.evaluate(loadInPage, {
    url: `${faulty.url}/f/${faults}/model.safetensors`, index, keys,
    options: { maxRequestSize: 512 << 10, concurrency: 1, backoffMs: 10, idleTimeoutMs: 2000 }, ...extra,
  });
  const logOf = async (faults) => (await (await fetch(`${faulty.url}/__log`)).text())
    .split('\n').filter((l) => l.includes(`/f/${faults}/`)).map((l) => l.split('\t'));

  // Trickled so the page reads what arrives before the drop (a stream that errors drops its queue).
  let r = await load('slow=3,drop=200000,skip=1,times=1');
  assert.ok(r.ok, JSON.stringify(r.error));
  for (const key of keys) assert.equal(r.value.sha[key], model.tensorSha256[key], key);
  const log = await logOf('slow=3,drop=200000,skip=1,times=1');
  const start = (range) => Number(/bytes=(\d+)-/.exec(range)[1]);
  assert.ok(start(log[2][1]) > start(log[1][1]), `resumed past the bytes received: ${JSON.stringify(log)}`);
  assert.ok(start(log[2][1]) <= start(log[1][1]) + 200000);
  assert.notEqual(log[2][2], '-', 'the resumed request carries If-Range');

  r = await load('ignore-range');
  assert.ok(r.ok, JSON.stringify(r.error));
  for (const key of keys) assert.equal(r.value.sha[key], model.tensorSha256[key], key);
  assert.ok(r.warnings.some((w) => /ignores Range/.test(w)), JSON.stringify(r.warnings));

  // Range honoured for the index read and the first data request, then 200s (trickled, so the
  // request in flight answers before the whole-file stream passes it): the first 200 takes over
  // every request not started; the file crosses the wire once more at most.
  const rangeLength = (range) => { const [, a, b] = /bytes=(\d+)-(\d+)/.exec(range); return Number(b) + 1 - Number(a); };
  r = await load('ignore-range,slow=1,skip=2', { options: { maxRequestSize: 256 << 10, concurrency: 2, idleTimeoutMs: 5000 } });
  assert.ok(r.ok, JSON.stringify(r.error));
  for (const key of keys) assert.equal(r.value.sha[key], model.tensorSha256[key], key);
  assert.ok(r.warnings.some((w) => /ignores Range/.test(w)), JSON.stringify(r.warnings));
  const midLog = (await logOf('ignore-range,slow=1,skip=2')).slice(1);
  const ranged = midLog.filter((l) => l[3] === '206').reduce((n, l) => n + rangeLength(l[1]), 0);
  const { stats } = r.value;
  assert.ok(stats.requestsPlanned >= 8, JSON.stringify(stats));
  assert.ok(midLog.length <= 3, `data requests: ${JSON.stringify(midLog)}`);
  assert.ok(stats.bytesReceived <= model.bytes.length + ranged, `${stats.bytesReceived} > ${model.bytes.length} + ${ranged}`);

  r = await load('change-after=2');
  assert.equal(r.ok, false);
  assert.equal(r.error.code, 'ABORTED', r.error.message);
  assert.match(r.error.message, /file changed mid-load/);

  r = await load('-', { scopeOptions: { sha256: model.sha256 } });
  assert.ok(r.ok, JSON.stringify(r.error));
  for (const key of keys) assert.equal(r.value.sha[key], model.tensorSha256[key], key);
  const wrong = model.sha256.replace(/^./, (c) => (c === '0' ? '1' : '0'));
  r = await load('-', { scopeOptions: { sha256: wrong } });
  assert.equal(r.error?.code, 'DATA_LOSS', JSON.stringify(r));
  r = await load('-', { scopeOptions: { parameterSha256: { [keys[1]]: model.tensorSha256[keys[2]] } } });
  assert.equal(r.error?.code, 'DATA_LOSS', JSON.stringify(r));
  assert.match(r.error.message, new RegExp(keys[1].replace('.', '\\.')));
});

// The first 12 tensors of the model through a provider with a persistent cache, in the page:
// resolves to {key: SHA-256 hex} once the cache holds `entries` entries for `url` (they are
// written while the bodies stream).
const CACHED_KEYS = index.slice(0, 12).map((e) => e.key);
const CACHED_MAX_REQUEST = 512 << 10;
const CACHED_DATA_REQUESTS = Math.ceil(index.slice(0, 12).reduce((n, e) => n + e.length, 0) / CACHED_MAX_REQUEST);
const requestsTo = async (faults) => (await (await fetch(`${faulty.url}/__log`)).text())
  .split('\n').filter((l) => l.includes(`/f/${faults}/`)).length;
function loadThroughCache(p, { url, cacheName, entries, revalidate = true }) {
  return p.evaluate(async ({ url, index, keys, cacheName, maxRequestSize, entries, revalidate }) => {
    const hex = (buf) => Array.from(new Uint8Array(buf), (b) => b.toString(16).padStart(2, '0')).join('');
    const provider = new wd.HttpParameterProvider({ persistentCache: cacheName, persistentCacheRevalidate: revalidate, maxRequestSize, concurrency: 1 });
    return capture(async () => {
      await provider.addScope('m', url, { index });
      const params = await provider.loadToGpu('m', keys);
      const sha = {};
      for (const q of params) sha[q.key] = hex(await crypto.subtle.digest('SHA-256', await q.read()));
      const cache = await caches.open(cacheName);
      for (let i = 0; i < 200 && (await cache.keys()).filter((r) => r.url.includes(encodeURIComponent(url))).length < entries; i++) {
        await new Promise((r) => setTimeout(r, 20));
      }
      return sha;
    });
  }, { url, index, keys: CACHED_KEYS, cacheName, maxRequestSize: CACHED_MAX_REQUEST, entries, revalidate });
}

test('a persistent cache serves the next load without data requests, and never a stale version', TEST_TIMEOUT, async (t) => {
  const p = await page(t);
  const keys = CACHED_KEYS;
  const dataRequests = CACHED_DATA_REQUESTS;
  const cacheName = `wd-test-${Date.now()}`;
  const urlOf = (faults) => `${faulty.url}/f/${faults}/model.safetensors`;
  const run = (url) => loadThroughCache(p, { url, cacheName, entries: dataRequests });

  let r = await run(urlOf('skip=0'));
  assert.ok(r.ok, JSON.stringify(r.error));
  assert.equal(await requestsTo('skip=0'), 1 + dataRequests);
  r = await run(urlOf('skip=0'));
  assert.ok(r.ok, JSON.stringify(r.error));
  for (const key of keys) assert.equal(r.value[key], model.tensorSha256[key], key);
  assert.equal(await requestsTo('skip=0'), 2 + dataRequests, 'the second load sends only its index read');

  // The file changes after the first load: the second load must fetch the new version.
  const changing = `change-after=${1 + dataRequests}`;
  r = await run(urlOf(changing));
  assert.ok(r.ok, JSON.stringify(r.error));
  r = await run(urlOf(changing));
  assert.ok(r.ok, JSON.stringify(r.error));
  const { createHash } = await import('node:crypto');
  for (const e of index.slice(0, 12)) {
    const inverted = Buffer.from(model.bytes.subarray(e.offset, e.offset + e.length).map((b) => b ^ 0xff));
    assert.equal(r.value[e.key], createHash('sha256').update(inverted).digest('hex'), `${e.key}: stale cached bytes`);
  }
  assert.equal(await requestsTo(changing), 2 * (1 + dataRequests), 'the new version came from the network');
  await p.evaluate((name) => caches.delete(name), cacheName);
});

test('persistentCacheRevalidate: false: a second page load sends no request; a changed file is not mixed in', TEST_TIMEOUT, async (t) => {
  const p = await page(t);
  const keys = CACHED_KEYS;
  const dataRequests = CACHED_DATA_REQUESTS;
  const cacheName = `wd-offline-${Date.now()}`;
  // The file is replaced (every byte inverted, new ETag) once the first load is done. (`run`
  // names this test's URL apart: the server counts requests per URL.)
  const faults = `change-after=${1 + dataRequests},run=offline`;
  const url = `${faulty.url}/f/${faults}/model.safetensors`;
  const requests = () => requestsTo(faults);
  const run = () => loadThroughCache(p, { url, cacheName, entries: dataRequests + 1, revalidate: false });

  let r = await run();
  assert.ok(r.ok, JSON.stringify(r.error));
  assert.equal(await requests(), 1 + dataRequests, 'the first load: its index read and its data requests');
  r = await run();
  assert.ok(r.ok, JSON.stringify(r.error));
  assert.equal(await requests(), 1 + dataRequests, 'the second load sent no request at all');
  // The server's file changed meanwhile: the cache serves the version it holds, whole and unmixed.
  for (const key of keys) assert.equal(r.value[key], model.tensorSha256[key], `${key}: the cached version`);

  // Cleared, the next load learns the new version from the network.
  await p.evaluate((name) => caches.delete(name), cacheName);
  r = await run();
  assert.ok(r.ok, JSON.stringify(r.error));
  assert.equal(await requests(), 2 * (1 + dataRequests));
  const { createHash } = await import('node:crypto');
  for (const e of index.slice(0, 12)) {
    const inverted = Buffer.from(model.bytes.subarray(e.offset, e.offset + e.length).map((b) => b ^ 0xff));
    assert.equal(r.value[e.key], createHash('sha256').update(inverted).digest('hex'), `${e.key}: the new version`);
  }
  const misuse = await p.evaluate(() => capture(() => new wd.HttpParameterProvider({ persistentCacheRevalidate: false })));
  assert.equal(misuse.error?.code, 'INVALID_ARGUMENT');
  await p.evaluate((name) => caches.delete(name), cacheName);
});

test('notify("suspend") stops every request; notify("resume") finishes the load byte-exact', TEST_TIMEOUT, async (t) => {
  const p = await page(t);
  const keys = index.slice(0, 12).map((e) => e.key);
  const r = await p.evaluate(async ({ url, base, keys }) => {
    const hex = (buf) => Array.from(new Uint8Array(buf), (b) => b.toString(16).padStart(2, '0')).join('');
    let suspended = null;
    const provider = new wd.HttpParameterProvider({
      concurrency: 1,
      onProgress: () => { if (!suspended) { suspended = true; provider.notify('suspend'); } },
    });
    return capture(async () => {
      await provider.addScope('m', url);
      const loading = provider.loadToGpu('m', keys);
      while (!suspended) await new Promise((res) => setTimeout(res, 10));
      // What the network does while suspended, seen from the server: requests logged and body
      // bytes sent. Aborted bodies stop at once on our side; the server sees it when Chromium
      // drops the connection (a loaded machine can take a while), so wait until both counts
      // stand still for 200 ms, then check that nothing moves for 300 ms more. (The server's
      // count of open responses is reported, not asserted: Chromium may keep an aborted
      // connection open, unread, for a while; no byte flows on it.)
      const active = async () => Number(await (await fetch(`${base}/__active`)).text());
      const traffic = async () => {
        const log = (await (await fetch(`${base}/__stats`)).json()).log;
        return `${log.length}/${log.reduce((sum, e) => sum + e.sent, 0)}`;
      };
      const deadline = performance.now() + 10000;
      let atSuspend = await traffic();
      while (performance.now() < deadline) {
        await new Promise((res) => setTimeout(res, 200));
        const now = await traffic();
        if (now === atSuspend) break;
        atSuspend = now;
      }
      await new Promise((res) => setTimeout(res, 300));
      const activeWhileSuspended = await active();
      const trafficWhileSuspended = [atSuspend, await traffic()];
      provider.notify('resume');
      const params = await loading;
      const sha = {};
      for (const q of params) sha[q.key] = hex(await crypto.subtle.digest('SHA-256', await q.read()));
      return { activeWhileSuspended, trafficWhileSuspended, sha, stats: provider.lastStats() };
    });
  }, { url: `${faulty.url}/f/slow=4/model.safetensors`, base: faulty.url, keys });
  assert.ok(r.ok, JSON.stringify(r.error));
  t.diagnostic(`responses still open at the server while suspended: ${r.value.activeWhileSuspended}`);
  const [before, after] = r.value.trafficWhileSuspended;
  assert.equal(after, before, 'requests/bytes moved while suspended (requests/bytes at the server)');
  for (const key of keys) assert.equal(r.value.sha[key], model.tensorSha256[key], key);
  assert.ok(r.value.stats.requestsSent > r.value.stats.requestsPlanned, 'the interrupted request was resumed');
  assert.equal(r.value.stats.bytesReceived, r.value.stats.bytesPlanned, 'resumed from the first byte not consumed');
});

test('a connection closed before any header, or a body the browser cannot decode, is retried and never called CORS', TEST_TIMEOUT, async (t) => {
  // Issue 37 (1). Before: both were PERMISSION_DENIED "... (CORS) ... retrying cannot help"
  // after one GET and one no-cors HEAD, with the retries budget unused. The fault server sends
  // Access-Control-Allow-Origin on every answer, so CORS is never the cause here.
  const p = await page(t);
  const urlOf = (faults) => `${faulty.url}/f/${faults}/model.safetensors`;
  const r = await p.evaluate(async (urls) => {
    const add = (url) => capture(async () => {
      const provider = new wd.HttpParameterProvider({ retries: 3, backoffMs: 20 });
      await provider.addScope('m', url);
      return provider.keys('m').length;
    });
    return {
      hangupOnce: await add(urls.hangupOnce),
      gzipOnce: await add(urls.gzipOnce),
      hangupAlways: await add(urls.hangupAlways),
    };
  }, { hangupOnce: urlOf('hangup,times=1'), gzipOnce: urlOf('bad-gzip,times=1'), hangupAlways: urlOf('hangup') });
  assert.ok(r.hangupOnce.ok, `closed before headers on the first request only: ${JSON.stringify(r.hangupOnce.error)}`);
  assert.ok(r.hangupOnce.value > 0);
  assert.ok(r.gzipOnce.ok, `undecodable body on the first request only: ${JSON.stringify(r.gzipOnce.error)}`);
  assert.equal(r.hangupAlways.ok, false);
  assert.equal(r.hangupAlways.error.code, 'UNAVAILABLE', JSON.stringify(r.hangupAlways.error));
  assert.doesNotMatch(r.hangupAlways.error.message, /retrying cannot help/);
  assert.match(r.hangupAlways.error.message, /not CORS/);
  const log = (await (await fetch(`${faulty.url}/__log`)).text()).split('\n').filter((l) => l.includes('/f/hangup/'));
  assert.ok(log.filter((l) => l.endsWith('hangup')).length >= 4, `the retries were used: ${log.length} requests`);
});
