// The Embedder's memory report (`memoryStats()`, issue #35) on the real all-MiniLM-L6-v2 in
// headless Chromium, on the CPU backend on one thread and on the worker pool (two threads, a
// cross-origin isolated page): the weights it reports are the model's tensor bytes (the oracle:
// the data model.safetensors' own header indexes, read here in Node), each held once (on the pool
// the encoder's linear weights only in the pool's shared memory, everything else only in the
// module's memory), the purposes fit in the memories they are said to be in, and the pool's
// embeddings are the one-thread embeddings (both also against the float64 NumPy reference,
// tests/fixtures/minilm/reference.json, the embedder test's oracle).
import assert from 'node:assert/strict';
import { open, readFile } from 'node:fs/promises';
import path from 'node:path';
import { test } from 'node:test';
import { useBrowserHarness } from './support/fixture.mjs';
import { REPO_ROOT } from './support/server.mjs';

const MODEL_URL = '/.cache/models/all-MiniLM-L6-v2/';
const reference = JSON.parse(await readFile(path.join(REPO_ROOT, 'tests/fixtures/minilm/reference.json'), 'utf8'));
const refBytes = Buffer.from(reference.embeddings_f32_le_base64, 'base64');
const refRows = reference.sentences.map((_, i) => new Float32Array(refBytes.buffer, refBytes.byteOffset + i * reference.dim * 4, reference.dim));
const ISOLATED = { 'Cross-Origin-Opener-Policy': 'same-origin', 'Cross-Origin-Embedder-Policy': 'require-corp' };
const harness = useBrowserHarness({ locations: [{ prefix: '/isolated/', dir: REPO_ROOT, headers: ISOLATED }] });
const SLOW = { timeout: 240_000 };
const MIB = 2 ** 20;

/**
 * Tolerance of the weights figure against the tensor bytes: 1%. The program reads every tensor
 * of the file but the pooler (384 x 384 + 384 f32, 0.65% of the file; the Embedder mean-pools)
 * and, where a checkpoint has it, the int64 position_ids buffer; the GEMM panels MiniLM's
 * widths (384, 1536) need no padding. A weight held twice (host and pool) is 47% over.
 */
const WEIGHTS_TOLERANCE = 0.01;
/** Pool and one-thread embeddings: the cpu-threads test's tolerance for kernels that differ. */
const POOL_MAX_ABS = 1e-5;

/** {total, linear}: the bytes of every tensor of the safetensors file, and of the encoder's 2-D
 * linear weights (the ones the pool reads, packed, from its shared memory). */
async function tensorBytes(file) {
  const handle = await open(file);
  try {
    const head = Buffer.alloc(8);
    await handle.read(head, 0, 8, 0);
    const json = Buffer.alloc(Number(head.readBigUInt64LE(0)));
    await handle.read(json, 0, json.length, 8);
    let total = 0;
    let linear = 0;
    for (const [name, info] of Object.entries(JSON.parse(json.toString('utf8')))) {
      if (name === '__metadata__') continue;
      const bytes = info.data_offsets[1] - info.data_offsets[0];
      total += bytes;
      if (/(^|\.)encoder\.layer\.\d+\..*\.weight$/.test(name) && info.shape.length === 2) linear += bytes;
    }
    return { total, linear };
  } finally {
    await handle.close();
  }
}
const tensors = await tensorBytes(path.join(REPO_ROOT, '.cache/models/all-MiniLM-L6-v2/model.safetensors'));

/** In the page: the Embedder loaded with `options`, every reference sentence embedded, its
 * memoryStats() after that, destroyed. */
async function embedAll({ url, texts, options }) {
  const embedder = await wd.Embedder.load(url, { backend: 'cpu', ...options });
  const rows = (await embedder.embed(texts)).map((r) => Array.from(r));
  const memory = embedder.memoryStats();
  const backend = embedder.backend;
  embedder.destroy();
  return { rows, memory, backend, after: embedder.memoryStats() };
}

function againstReference(rows) {
  let minCos = 1;
  let maxAbs = 0;
  rows.forEach((got, i) => {
    const want = refRows[i];
    let dot = 0; let ng = 0; let nw = 0;
    for (let k = 0; k < got.length; k++) {
      dot += got[k] * want[k]; ng += got[k] ** 2; nw += want[k] ** 2;
      maxAbs = Math.max(maxAbs, Math.abs(got[k] - want[k]));
    }
    minCos = Math.min(minCos, dot / Math.sqrt(ng * nw));
  });
  return { minCos, maxAbs };
}

/** The checks every CPU report passes: nothing on the GPU, no state (an encoder has none), the
 * module's purposes within the module's memory and the pool's within the pool's. */
function assertConsistent(m, label) {
  assert.equal(m.backend, 'cpu', label);
  assert.deepEqual([m.gpuWeights, m.gpuState, m.gpuActivations], [0, 0, 0], `${label}: no GPU bytes`);
  assert.equal(m.state, 0, `${label}: an encoder keeps no state`);
  assert.ok(m.activations > 0, `${label}: an embed keeps its intermediates' buffers (${m.activations})`);
  assert.ok(m.staging > 0 && m.staging <= 16 * MIB, `${label}: the load's staging buffer ${m.staging}`);
  const main = m.weights + m.state + m.activations + m.staging;
  assert.ok(main <= m.wasmMemoryBytes, `${label}: weights + state + activations + staging = ${main} > wasm memory ${m.wasmMemoryBytes}`);
  const shared = m.sharedWeights + m.sharedActivations;
  assert.ok(shared <= m.sharedMemoryBytes, `${label}: shared weights + activations = ${shared} > shared memory ${m.sharedMemoryBytes}`);
}

const within = (got, want, tolerance) => Math.abs(got - want) <= tolerance * want;
const mib = (bytes) => `${(bytes / MIB).toFixed(1)} MiB`;

test('one thread, no pool: the weights are the tensor bytes, all in the module\'s memory', SLOW, async (t) => {
  const page = await harness.openHarnessPage(t);
  const r = await page.evaluate(embedAll, { url: MODEL_URL, texts: reference.sentences, options: {} });
  const m = r.memory;
  t.diagnostic(`one thread: ${JSON.stringify(m)}; tensors ${tensors.total} bytes`);
  assert.equal(r.backend, 'cpu');
  assertConsistent(m, 'one thread');
  assert.deepEqual([m.sharedMemoryBytes, m.sharedWeights, m.sharedActivations], [0, 0, 0], 'no pool, no shared memory');
  assert.ok(within(m.weights, tensors.total, WEIGHTS_TOLERANCE), `weights ${m.weights} vs tensor bytes ${tensors.total}`);
  assert.equal(r.after, null, 'no report after destroy()');
  const { minCos, maxAbs } = againstReference(r.rows);
  assert.ok(minCos >= 0.9999 && maxAbs <= 1e-3, `one thread against the reference: cosine ${minCos}, max abs ${maxAbs}`);
});

test('on the pool: the linear weights only in the shared memory, the rest only in the module\'s; the one-thread embeddings', SLOW, async (t) => {
  const page = await harness.openPage(t, '/isolated/pkg-tests/harness.html', () => window.harnessReady || window.harnessError);
  const r = await page.evaluate(async ({ url, texts, embedAll }) => {
    await wd.ready();
    const { CpuThreadPool } = await import('/isolated/pkg/cpu-threads/pool.js');
    const pool = await CpuThreadPool.start({ threads: 2 });
    wd.useCpuThreads(pool);
    const run = new Function(`return (${embedAll})`)();
    // The pool first, on a fresh page: its module memory is its own high-water mark.
    const onPool = await run({ url, texts, options: { threads: 2 } });
    const threads = Number(wd.getOption('cpu', [{ key: 'threads', value: 0 }])[0].value);
    const oneThread = await run({ url, texts, options: { threads: 1 } });
    const poolBytes = pool.bytesInUse;
    pool.terminate();
    return { onPool, oneThread, threads, poolBytes, isolated: self.crossOriginIsolated };
  }, { url: MODEL_URL, texts: reference.sentences, embedAll: embedAll.toString() });
  assert.equal(r.isolated, true);
  assert.equal(r.threads, 2, 'no worker failed');
  const p = r.onPool.memory;
  const one = r.oneThread.memory;
  t.diagnostic(`pool: ${JSON.stringify(p)}`);
  t.diagnostic(`threads: 1 beside the pool: ${JSON.stringify(one)}`);
  t.diagnostic(`tensors ${mib(tensors.total)} (encoder linear weights ${mib(tensors.linear)}); pool: ${mib(p.weights)} weights in the module's memory (of ${mib(p.wasmMemoryBytes)}), ${mib(p.sharedWeights)} in the shared memory (of ${mib(p.sharedMemoryBytes)})`);

  assertConsistent(p, 'pool');
  // Each weight once, where it is used: the packed linear weights in the shared memory (and
  // not on the host), the embedding tables, biases and norms on the host.
  assert.ok(within(p.weights + p.sharedWeights, tensors.total, WEIGHTS_TOLERANCE), `pool: weights ${p.weights} + shared ${p.sharedWeights} vs tensor bytes ${tensors.total}`);
  assert.ok(within(p.sharedWeights, tensors.linear, WEIGHTS_TOLERANCE), `pool: shared weights ${p.sharedWeights} vs the encoder's linear weights ${tensors.linear}`);
  assert.ok(p.weights <= (tensors.total - tensors.linear) * (1 + WEIGHTS_TOLERANCE), `pool: ${p.weights} bytes of weights left in the module's memory (${tensors.total - tensors.linear} are not the pool's)`);
  assert.ok(p.sharedMemoryBytes >= p.sharedWeights + p.sharedActivations && p.sharedMemoryBytes > 0);
  assert.ok(p.sharedActivations > 0, 'the pool staged operands for the embed');
  // The module's memory never held the linear weights all at once (they pass through the
  // staging batches one at a time and are moved to the pool as each lands).
  assert.ok(p.wasmMemoryBytes < tensors.total, `pool: the module's memory ${p.wasmMemoryBytes} reached the tensor bytes ${tensors.total}`);

  // threads: 1 with the pool installed: the one-thread placement.
  assertConsistent(one, 'threads 1');
  assert.equal(one.sharedWeights, 0, 'threads: 1 keeps no weight in the pool');
  assert.ok(within(one.weights, tensors.total, WEIGHTS_TOLERANCE), `threads 1: weights ${one.weights} vs tensor bytes ${tensors.total}`);
  assert.equal(one.sharedMemoryBytes, p.sharedMemoryBytes, 'the same pool, whose memory never shrinks');

  let maxAbs = 0;
  r.onPool.rows.forEach((row, i) => row.forEach((v, k) => { maxAbs = Math.max(maxAbs, Math.abs(v - r.oneThread.rows[i][k])); }));
  t.diagnostic(`pool vs one thread: max abs ${maxAbs}`);
  assert.ok(maxAbs <= POOL_MAX_ABS, `pool vs one-thread embeddings: max abs ${maxAbs}`);
  for (const [label, rows] of [['pool', r.onPool.rows], ['one thread', r.oneThread.rows]]) {
    const { minCos, maxAbs: refAbs } = againstReference(rows);
    assert.ok(minCos >= 0.9999 && refAbs <= 1e-3, `${label} against the reference: cosine ${minCos}, max abs ${refAbs}`);
  }
});
