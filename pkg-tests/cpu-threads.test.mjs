// The CPU backend on a worker pool (cpu-threads/pool.js + webdelegate_kernels.wasm): on a
// cross-origin isolated page (COOP/COEP from nginx's /isolated/ location), products with an f32
// weight, block-format (Q8_0, Q4_K) linears, batched products of two activations (b plain and
// transposed), GELU, softmax rows (with a broadcast mask), a permute, scale, layer norm and a
// same-shape add, chained through the shared memory, give the plain single-thread path's results on
// 1, 2 and 3 threads (bit for bit where both run the same kernel, within 1e-5 otherwise) (the oracle: the same program on a CPU backend
// initialised without a pool, whose kernels the unit tests check against f64 references); odd
// shapes that no thread count or tile divides. A worker ended by the test makes the next
// execute fail with a coded error and the one after it succeed on one thread; a worker whose
// script is missing rejects the pool's start. A page without
// isolation runs single-threaded and says why. The real models on two threads: MiniLM's
// embeddings against the float64 NumPy reference (tests/fixtures/minilm/reference.json, the
// embedder test's oracle) and Gemma 3 270M's logits and greedy tokens against the float64
// reference (.cache/reference/gemma-3-270m and tests/fixtures/gemma/greedy_reference.json, the
// generator test's oracles).
import assert from 'node:assert/strict';
import { readFile } from 'node:fs/promises';
import path from 'node:path';
import { test } from 'node:test';
import { TEST_TIMEOUT, useBrowserHarness } from './support/fixture.mjs';
import { REPO_ROOT } from './support/server.mjs';

const fixture = async (file) => JSON.parse(await readFile(path.join(REPO_ROOT, 'tests/fixtures', file), 'utf8'));
const minilm = await fixture('minilm/reference.json');
const greedy = await fixture('gemma/greedy_reference.json');

const ISOLATED = { 'Cross-Origin-Opener-Policy': 'same-origin', 'Cross-Origin-Embedder-Policy': 'require-corp' };
const harness = useBrowserHarness({ locations: [{ prefix: '/isolated/', dir: REPO_ROOT, headers: ISOLATED }] });

// Runs in the page: programs, parameters and the comparison.
async function setUp() {
  await wd.ready();
  const f32 = (n, seed) => Float32Array.from({ length: n }, (_, i) => Math.sin(seed * 977 + i * 0.37) * 0.5);
  const bytesOf = (a) => new Uint8Array(a.buffer, a.byteOffset, a.byteLength);
  // Seeded bytes; every block's f16 scales are set to small normal values (no NaN/Inf).
  const random = (n, seed) => {
    let s = seed * 2654435761 >>> 0 || 1;
    return Uint8Array.from({ length: n }, () => {
      s ^= s << 13; s >>>= 0; s ^= s >>> 17; s ^= s << 5; s >>>= 0;
      return s & 0xff;
    });
  };
  const q8_0 = (rows, k, seed) => {
    const b = random(rows * (k / 32) * 34, seed);
    for (let at = 0; at < b.length; at += 34) { b[at] = 0x00; b[at + 1] = 0x2c; }
    return b;
  };
  const q4_k = (rows, k, seed) => {
    const b = random(rows * (k / 256) * 144, seed);
    for (let at = 0; at < b.length; at += 144) { b[at] = 0x00; b[at + 1] = 0x24; b[at + 2] = 0x00; b[at + 3] = 0x20; }
    return b;
  };
  const K = 45, N = 531, QK8 = 64, QN8 = 67, QK4 = 256, QN4 = 19;
  const b = new wd.ProgramBuilder();
  const x = b.input('x', 'float32', ['batch', K]);
  const w = b.param('w', 'float32', [N, K], 'weights', 'w');
  const bias = b.param('bias', 'float32', [N], 'weights', 'bias');
  const x8 = b.input('x8', 'float32', ['batch', QK8]);
  const w8 = b.param('w8', 'q8_0', [QN8, QK8], 'weights', 'w8');
  const x4 = b.input('x4', 'float32', ['batch', QK4]);
  const w4 = b.param('w4', 'q4_k', [QN4, QK4], 'weights', 'w4');
  // Activation products (attention's shapes: batches of [m, 32] by [32, 40], b plain and
  // transposed) and softmax rows: on the pool once they are large enough (m >= 4 and m >= 55).
  const qa = b.input('qa', 'float32', [4, 'batch', 32]);
  const kb = b.input('kb', 'float32', [4, 32, 40]);
  const kt = b.input('kt', 'float32', [4, 40, 32]);
  const sx = b.input('sx', 'float32', ['batch', 300]);
  b.output(b.gelu(b.matmul(x, w, bias, false, true)));
  b.output(b.linear(x8, w8));
  b.output(b.linear(x4, w4));
  b.output(b.matmul(qa, kb, null, false, false));
  b.output(b.matmul(qa, kt, null, false, true));
  b.output(b.softmax(sx, null));
  // A chain that stays in the shared memory on the pool (m >= 128: 16 Ki values): scores with
  // a per-batch mask [4, 1, 40] through softmax; a head permute, scale, layer norm and a
  // same-shape add of two pool results; tanh (a calling-thread op) reads a pool result through
  // its host copy while the add reads it in place.
  const mk = b.input('mk', 'float32', [4, 1, 40]);
  const gamma = b.param('gamma', 'float32', [32], 'weights', 'gamma');
  const beta = b.param('beta', 'float32', [32], 'weights', 'beta');
  b.output(b.softmax(b.matmul(qa, kt, null, false, true), mk));
  const heads = b.scale(b.permute(qa, [1, 0, 2]), 0.75, 0.125);
  const normed = b.layerNorm(heads, gamma, beta, 1e-5);
  b.output(b.add(normed, heads));
  b.output(b.tanh(heads));
  const blob = b.encode();
  b.free();
  const mem = new wd.MemoryParameterProvider();
  mem.insert('weights', 'w', bytesOf(f32(N * K, 1)), { dtype: 'F32', shape: [N, K] });
  mem.insert('weights', 'bias', bytesOf(f32(N, 2)), { dtype: 'F32', shape: [N] });
  mem.insert('weights', 'w8', q8_0(QN8, QK8, 3), { dtype: 'Q8_0', shape: [QN8, QK8] });
  mem.insert('weights', 'w4', q4_k(QN4, QK4, 4), { dtype: 'Q4_K', shape: [QN4, QK4] });
  mem.insert('weights', 'gamma', bytesOf(f32(32, 12).map((v) => 1 + v)), { dtype: 'F32', shape: [32] });
  mem.insert('weights', 'beta', bytesOf(f32(32, 13)), { dtype: 'F32', shape: [32] });
  const args = (m) => [
    { tag: 'Tensor', dtype: 'float32', shape: [m, K], data: f32(m * K, 5 + m) },
    { tag: 'Tensor', dtype: 'float32', shape: [m, QK8], data: f32(m * QK8, 6 + m) },
    { tag: 'Tensor', dtype: 'float32', shape: [m, QK4], data: f32(m * QK4, 7 + m) },
    { tag: 'Tensor', dtype: 'float32', shape: [4, m, 32], data: f32(4 * m * 32, 8 + m) },
    { tag: 'Tensor', dtype: 'float32', shape: [4, 32, 40], data: f32(4 * 32 * 40, 9) },
    { tag: 'Tensor', dtype: 'float32', shape: [4, 40, 32], data: f32(4 * 40 * 32, 10) },
    { tag: 'Tensor', dtype: 'float32', shape: [m, 300], data: f32(m * 300, 11 + m).map((v) => v * 20) },
    { tag: 'Tensor', dtype: 'float32', shape: [4, 1, 40], data: f32(160, 14).map((v) => (v > 0.3 ? -1e4 : v)) },
    ...Array.from({ length: 9 }, () => ({ tag: 'None' })),
  ];
  const run = async (d, m) => (await d.execute(args(m))).slice(8).map((o) => Array.from(o.data));
  const threadsNow = () => wd.getOption('cpu', [{ key: 'threads', value: 0 }, { key: 'threads_reason', value: '' }]).map((o) => o.value);
  window.cpuThreads = { blob, mem, run, threadsNow };
}

test('products on 1, 2 and 3 threads give the single-thread path\'s results (isolated page)', TEST_TIMEOUT, async (t) => {
  const p = await harness.openPage(t, '/isolated/pkg-tests/harness.html', () => window.harnessReady || window.harnessError);
  await p.evaluate(setUp);
  const r = await p.evaluate(async () => {
    const { blob, mem, run, threadsNow } = window.cpuThreads;
    const { CpuThreadPool, cpuThreadsUnavailable } = await import('/isolated/pkg/cpu-threads/pool.js');
    const isolated = { crossOriginIsolated, unavailable: cpuThreadsUnavailable() };
    const plain = await wd.Delegate.initWithParameters('cpu', blob, mem);
    // Every op shared (no adaptive fallback to this thread), so the workers' part is what runs.
    const pool = await CpuThreadPool.start({ threads: 3, taskTimeoutMs: 3000, participation: false });
    const before = threadsNow();
    wd.useCpuThreads(pool);
    const idle = pool.bytesInUse;
    const threaded = await wd.Delegate.initWithParameters('cpu', blob, mem);
    const sharedWeights = pool.bytesInUse - idle;
    const runs = [];
    const want37 = await run(plain, 37);
    for (const threads of [1, 2, 3]) {
      wd.setOption('cpu', [{ key: 'threads', value: threads }]);
      for (const m of [1, 3, 37, 200]) {
        const [want, got] = [await run(plain, m), await run(threaded, m)];
        const same = want.map((o, i) => o.length === got[i].length && o.every((v, j) => Object.is(v, got[i][j])));
        const relative = want.map((o, i) => {
          const scale = Math.max(...o.map(Math.abs));
          return Math.max(...o.map((v, j) => Math.abs(v - got[i][j]))) / scale;
        });
        const finite = want.every((o) => o.every(Number.isFinite));
        runs.push({ threads, m, same, relative, finite, reported: threadsNow()[0] });
      }
    }
    let badThreads;
    try { wd.setOption('cpu', [{ key: 'threads', value: 4 }]); } catch (e) { badThreads = { code: e.code, message: e.message }; }
    // The `threads` compile spec caps one program: on 2 of the 3 threads, worker 2 gets no
    // share; on 1, the weights stay on the host; more than the pool has, or not a count, fails.
    const spec = (value) => ({ compileSpecs: [{ key: 'threads', value }] });
    const capped = await wd.Delegate.initWithParameters('cpu', blob, mem, spec('2'));
    const sequences = () => pool.workers.map((w) => w.sequence);
    const beforeCapped = sequences();
    const [cappedWant, cappedGot] = [await run(plain, 200), await run(capped, 200)];
    const afterCapped = sequences();
    const cappedSame = cappedWant.every((o, i) => {
      const scale = o.reduce((m, v) => Math.max(m, Math.abs(v)), 0);
      return o.every((v, j) => Math.abs(v - cappedGot[i][j]) <= 1e-5 * scale);
    });
    capped.destroy();
    const beforeSingle = pool.bytesInUse;
    const single = await wd.Delegate.initWithParameters('cpu', blob, mem, spec('1'));
    const singleShared = pool.bytesInUse - beforeSingle;
    const singleSame = (await run(single, 37))[0].every((v, j) => Object.is(v, want37[0][j]));
    single.destroy();
    const refused = [];
    for (const value of ['4', '0', 'two']) {
      try { await wd.Delegate.initWithParameters('cpu', blob, mem, spec(value)); refused.push({ value, code: 'none' }); } catch (e) { refused.push({ value, code: e.code, message: e.message }); }
    }
    // Suspend parks the pool (every product on this thread), resume wakes it.
    wd.lifecycleNotify('suspend');
    const suspended = threadsNow()[0];
    const [want, got] = [await run(plain, 37), await run(threaded, 37)];
    const suspendedSame = want[0].every((v, j) => Object.is(v, got[0][j]));
    wd.lifecycleNotify('resume');
    const after = threadsNow();
    // LowMemory ends the workers; ops run here meanwhile, and asking for threads (the next op
    // does) starts them again.
    wd.lifecycleNotify('lowMemory');
    const lowMemory = { released: pool.released, workersEnded: pool.workers.every((w) => !w.alive) };
    const lowOut = await run(threaded, 200);
    for (let i = 0; i < 100 && pool.threads !== 3; i++) await new Promise((resolve) => setTimeout(resolve, 50));
    const [restoredWant, restoredGot] = [await run(plain, 200), await run(threaded, 200)];
    const scales = restoredWant.map((o) => o.reduce((m, v) => Math.max(m, Math.abs(v)), 0));
    lowMemory.same = [lowOut, restoredGot].every((o) => o.every((out, i) => out.every((v, j) => Math.abs(v - restoredWant[i][j]) <= 1e-5 * scales[i])));
    lowMemory.restored = { threads: threadsNow()[0], alive: pool.workers.every((w) => w.alive) };
    plain.destroy();
    threaded.destroy();
    const freed = pool.bytesInUse - pool.scratchBytes - idle;
    pool.terminate();
    wd.useCpuThreads(null);
    return { lowMemory, isolated, before, after, runs, sharedWeights, freed, badThreads, suspended, suspendedSame, beforeCapped, afterCapped, cappedSame, singleShared, singleSame, refused };
  });
  assert.deepEqual(r.isolated, { crossOriginIsolated: true, unavailable: null });
  assert.equal(r.before[0], 1, 'one thread before a pool is installed');
  assert.match(r.before[1], /no CPU thread pool/);
  for (const run of r.runs) {
    const at = JSON.stringify(run);
    assert.ok(run.finite, `finite outputs at ${at}`);
    // The matmul and the one-row linears: the same kernels, the same summation per element;
    // so the activation products (whole products per thread), GELU and the softmax rows.
    assert.ok(run.same[0], `bit-identical matmul at ${at}`);
    assert.ok(run.same[3] && run.same[4], `bit-identical activation products at ${at}`);
    assert.ok(run.same[5], `bit-identical softmax at ${at}`);
    assert.ok(run.same[6], `bit-identical masked softmax of a pool product at ${at}`);
    assert.ok(run.same[7] && run.same[8], `bit-identical permute, scale, layer norm, add and tanh at ${at}`);
    if (run.m === 1) assert.ok(run.same[1] && run.same[2], `bit-identical one-row linears at ${at}`);
    // More rows: the single-thread path decodes each weight row once for every activation row
    // (another summation order than the register row dot the pool runs per row), so within the
    // op suite's f32 tolerance.
    for (const rel of run.relative) assert.ok(rel <= 1e-5, `within 1e-5 of the largest output at ${at}`);
    assert.equal(run.reported, run.threads);
  }
  // The f32 weight packed (531 x 45 in 16-wide panels: 544 x 45 floats) plus the block bytes.
  const packedBytes = 544 * 45 * 4;
  const blockBytes = 67 * 2 * 34 + 19 * 144;
  assert.ok(r.sharedWeights >= packedBytes + blockBytes, `weights in shared memory: ${r.sharedWeights} bytes`);
  assert.equal(r.freed, 0, 'destroy frees the shared weights and the program\'s scratch');
  assert.equal(r.badThreads?.code, 'InvalidArgument', `more threads than the pool has is InvalidArgument: ${JSON.stringify(r.badThreads)}`);
  assert.equal(r.suspended, 1, 'a suspended page runs its products on one thread');
  assert.ok(r.suspendedSame, 'and gets the same results');
  assert.equal(r.after[0], 3, 'resume brings the threads back');
  assert.deepEqual({ released: r.lowMemory.released, workersEnded: r.lowMemory.workersEnded }, { released: true, workersEnded: true }, 'lowMemory ends the workers');
  assert.ok(r.lowMemory.same, 'the same results while the workers are gone and after they are back');
  assert.deepEqual(r.lowMemory.restored, { threads: 3, alive: true }, 'the workers come back');
  assert.ok(r.cappedSame, 'a program capped at 2 threads gives the same results');
  assert.ok(r.afterCapped[0] > r.beforeCapped[0], `worker 1 ran shares of the capped program: ${r.beforeCapped} -> ${r.afterCapped}`);
  assert.equal(r.afterCapped[1], r.beforeCapped[1], 'worker 2 ran none: the program is capped at 2 threads');
  assert.equal(r.singleShared, 0, 'threads 1: no weight in the shared memory');
  assert.ok(r.singleSame, 'threads 1: the single-thread results');
  for (const refusal of r.refused) assert.equal(refusal.code, 'InvalidArgument', JSON.stringify(refusal));
  assert.match(r.refused[0].message, /cannot run a program on 4 threads.*3 threads is installed/);
  assert.match(r.after[1], /3 threads is installed; 3 in use/);
});

test('when sharing does not pay, ops run on this thread alone with the same results, and sharing is probed again', TEST_TIMEOUT, async (t) => {
  const p = await harness.openPage(t, '/isolated/pkg-tests/harness.html', () => window.harnessReady || window.harnessError);
  await p.evaluate(setUp);
  const r = await p.evaluate(async () => {
    const { blob, mem, run } = window.cpuThreads;
    const { CpuThreadPool } = await import('/isolated/pkg/cpu-threads/pool.js');
    const plain = await wd.Delegate.initWithParameters('cpu', blob, mem);
    // A gain no shared op can meet: every window of 4 shared ops gives sharing up, first for 6
    // ops, then 12, then 24 (the stretch doubles after each failed probe).
    const pool = await CpuThreadPool.start({ threads: 2, taskTimeoutMs: 3000, participation: { window: 4, gain: 1e-9, patience: 1, soloOps: 6, maxSoloOps: 24 } });
    wd.useCpuThreads(pool);
    const threaded = await wd.Delegate.initWithParameters('cpu', blob, mem);
    const checks = [];
    const trace = [];
    for (let i = 0; i < 12; i++) {
      const before = { sequence: pool.workers[0].sequence, ...pool.participationStats };
      const [want, got] = [await run(plain, 37), await run(threaded, 37)];
      const after = { sequence: pool.workers[0].sequence, ...pool.participationStats };
      trace.push({ before, after });
      const scales = want.map((o) => o.reduce((m, v) => Math.max(m, Math.abs(v)), 0));
      checks.push(want.every((o, k) => o.length === got[k].length && o.every((v, j) => Math.abs(v - got[k][j]) <= 1e-5 * scales[k])));
    }
    // An execute wholly in a solo stretch posts the worker nothing.
    const quiet = trace.filter(({ before, after }) => before.solo && after.solo && after.soloOps - before.soloOps > 0 && after.sharedOps === before.sharedOps);
    const stats = pool.participationStats;
    plain.destroy();
    threaded.destroy();
    pool.terminate();
    wd.useCpuThreads(null);
    // The policy refuses settings it cannot use.
    const refused = [];
    for (const participation of [{ window: 0 }, { gain: 0 }, { gain: 1.5 }, { soloOps: 2.5 }]) {
      try { await CpuThreadPool.start({ threads: 2, participation }); refused.push('started'); } catch (e) { refused.push(`${e.name}: ${e.message}`); }
    }
    return { checks, stats, quiet: quiet.map(({ before, after }) => after.sequence - before.sequence), refused };
  });
  assert.ok(r.checks.every(Boolean), `the same results shared and alone: ${r.checks}`);
  t.diagnostic(`participation: ${JSON.stringify(r.stats)}`);
  assert.ok(r.stats.fallbacks >= 3, `sharing given up after each window: ${JSON.stringify(r.stats)}`);
  assert.ok(r.stats.soloOps >= 6 + 12 + 24, `ops ran alone in doubling stretches: ${JSON.stringify(r.stats)}`);
  assert.ok(r.stats.sharedOps >= 4 * 3, `and windows were shared to probe: ${JSON.stringify(r.stats)}`);
  assert.ok(r.quiet.length > 0, 'some execute ran wholly alone');
  assert.ok(r.quiet.every((posted) => posted === 0), `nothing was posted to the worker while alone: ${r.quiet}`);
  assert.equal(r.refused.length, 4);
  for (const why of r.refused) assert.match(why, /^RangeError: participation (window|gain|soloOps)/);
});

test('the shared memory grows by what its free end lacks, and freed regions are reused', TEST_TIMEOUT, async (t) => {
  const p = await harness.openPage(t, '/isolated/pkg-tests/harness.html', () => window.harnessReady || window.harnessError);
  const r = await p.evaluate(async () => {
    const { CpuThreadPool } = await import('/isolated/pkg/cpu-threads/pool.js');
    const pool = await CpuThreadPool.start({ threads: 2 });
    const MIB = 2 ** 20;
    const size = () => pool.buffer.byteLength;
    // Fill to the end, leaving no free bytes, then free an 8 MiB region at the end.
    const first = pool.alloc(size() - pool.bytesInUse);
    const grown0 = size();
    const a = pool.alloc(4 * MIB);
    const b = pool.alloc(8 * MIB);
    const afterAB = size();
    pool.free(b);
    // 12 MiB: the free 8 MiB at the end and 4 MiB more.
    const c = pool.alloc(12 * MIB);
    const afterC = size();
    pool.free(a);
    // 4 MiB fits the hole a left: no growth.
    const d = pool.alloc(4 * MIB);
    const afterD = size();
    const reused = d === a;
    for (const at of [first, c, d]) pool.free(at);
    pool.terminate();
    return { grown0, afterAB, afterC, afterD, reused, cAt: c, bAt: b };
  });
  const MIB = 2 ** 20;
  assert.ok(r.afterAB - r.grown0 >= 12 * MIB && r.afterAB - r.grown0 < 12 * MIB + 2 * 65536, `a and b: +${r.afterAB - r.grown0} bytes`);
  assert.equal(r.cAt, r.bAt, 'the 12 MiB region starts where the freed 8 MiB did');
  assert.ok(r.afterC - r.afterAB <= 4 * MIB + 65536, `12 MiB over a free 8 MiB end grew by ${r.afterC - r.afterAB} bytes (4 MiB lacked)`);
  assert.equal(r.afterD, r.afterC, 'a freed hole is reused without growth');
  assert.ok(r.reused);
});

test('a worker that dies fails the next execute with a coded error, and the one after runs on one thread', TEST_TIMEOUT, async (t) => {
  const p = await harness.openPage(t, '/isolated/pkg-tests/harness.html', () => window.harnessReady || window.harnessError);
  await p.evaluate(setUp);
  const r = await p.evaluate(async () => {
    const { blob, mem, run, threadsNow } = window.cpuThreads;
    const { CpuThreadPool } = await import('/isolated/pkg/cpu-threads/pool.js');
    const plain = await wd.Delegate.initWithParameters('cpu', blob, mem);
    const pool = await CpuThreadPool.start({ threads: 2, taskTimeoutMs: 1500 });
    wd.useCpuThreads(pool);
    const threaded = await wd.Delegate.initWithParameters('cpu', blob, mem);
    const m = 37;
    const want = await run(plain, m);
    const first = await run(threaded, m);
    // Chromium does not end a worker that sleeps in Atomics.wait on terminate() (seen here: it
    // still ran a share posted 1 s later), so the test ends it through its control block with
    // the exit word (the worker leaves its loop and closes itself, as the pool's terminate()
    // makes it): it is gone as a crashed one would be, and the pool only finds out when its
    // next share is not done.
    const dying = pool.workers[0];
    const words = new Int32Array(pool.memory.buffer, dying.control, 32);
    words[2] = 0;
    Atomics.store(words, 0, dying.sequence + 1);
    Atomics.notify(words, 0);
    dying.sequence += 1;
    await new Promise((resolve) => setTimeout(resolve, 300));
    let failure;
    const t0 = performance.now();
    try { await run(threaded, m); } catch (e) { failure = { name: e.name, code: e.code, message: e.message }; }
    const t1 = performance.now();
    const again = await run(threaded, m);
    const t2 = performance.now();
    const state = threadsNow();
    const same = (a, b) => a.every((o, i) => {
      const scale = Math.max(...o.map(Math.abs));
      return o.every((v, j) => Math.abs(v - b[i][j]) <= 1e-5 * scale);
    });
    pool.terminate();
    return { failure, state, firstSame: same(want, first), againSame: same(want, again), failMs: t1 - t0, againMs: t2 - t1 };
  });
  assert.ok(r.firstSame);
  t.diagnostic(`failed after ${r.failMs.toFixed(0)} ms; the next execute took ${r.againMs.toFixed(0)} ms`);
  assert.equal(r.failure?.name, 'WebDelegateError', JSON.stringify(r));
  assert.equal(r.failure.code, 'Internal', r.failure.message);
  assert.match(r.failure.message, /CPU worker 1 did not finish/);
  assert.ok(r.againSame, 'the next execute succeeds with the same results');
  assert.equal(r.state[0], 1);
  assert.match(r.state[1], /CPU worker 1 did not finish .*running on one thread/);
});

test('a worker that cannot start rejects the pool with the reason, and the page runs on one thread', TEST_TIMEOUT, async (t) => {
  const p = await harness.openPage(t, '/isolated/pkg-tests/harness.html', () => window.harnessReady || window.harnessError);
  const r = await p.evaluate(async () => {
    const { CpuThreadPool } = await import('/isolated/pkg/cpu-threads/pool.js');
    const t0 = performance.now();
    let message;
    try {
      await CpuThreadPool.start({ threads: 2, workerUrl: '/isolated/pkg/cpu-threads/missing-worker.js', startTimeoutMs: 5000 });
    } catch (e) { message = e.message; }
    return { message, ms: performance.now() - t0, threads: Number(wd.getOption('cpu', [{ key: 'threads', value: 0 }])[0].value) };
  });
  assert.match(r.message ?? '', /CPU worker 1 failed to start: its script .*missing-worker\.js did not load/);
  t.diagnostic(`rejected after ${r.ms.toFixed(0)} ms: ${r.message}`);
  assert.equal(r.threads, 1);
});

test('a page without cross-origin isolation runs single-threaded and says why', TEST_TIMEOUT, async (t) => {
  const p = await harness.openHarnessPage(t);
  await p.evaluate(setUp);
  const r = await p.evaluate(async () => {
    const { threadsNow } = window.cpuThreads;
    const { CpuThreadPool, cpuThreadsUnavailable } = await import('/pkg/cpu-threads/pool.js');
    let started;
    try { await CpuThreadPool.start({ threads: 2 }); started = 'started'; } catch (e) { started = e.message; }
    let set;
    try { wd.setOption('cpu', [{ key: 'threads', value: 2 }]); set = 'set'; } catch (e) { set = { code: e.code, message: e.message }; }
    wd.setOption('cpu', [{ key: 'threads', value: 1 }]);
    return { isolated: crossOriginIsolated, reason: cpuThreadsUnavailable(), started, set, state: threadsNow() };
  });
  assert.equal(r.isolated, false);
  assert.match(r.reason, /not cross-origin isolated/);
  assert.equal(r.started, r.reason);
  assert.equal(r.set.code, 'InvalidArgument', JSON.stringify(r.set));
  assert.match(r.set.message, /cannot use 2 threads/);
  assert.deepEqual(r.state[0], 1);
  assert.match(r.state[1], /no CPU thread pool is installed/);
});

test('MiniLM embeddings and Gemma 3 270M logits and greedy tokens on two threads match the float64 references', { timeout: 300_000 }, async (t) => {
  const p = await harness.openPage(t, '/isolated/pkg-tests/harness.html', () => window.harnessReady || window.harnessError);
  const prompt = greedy.prompts.reduce((a, b) => (b.tokens.length < a.tokens.length ? b : a));
  const r = await p.evaluate(async ({ sentences, prompt }) => {
    await wd.ready();
    const { CpuThreadPool } = await import('/isolated/pkg/cpu-threads/pool.js');
    const pool = await CpuThreadPool.start({ threads: 2 });
    wd.useCpuThreads(pool);
    const threads = Number(wd.getOption('cpu', [{ key: 'threads', value: 0 }])[0].value);
    // The load option `threads` (the CPU backend's compile spec): more than the pool has is
    // refused at init, before any weight is fetched; 2 runs the embedder on both threads.
    let tooMany;
    try { await wd.Embedder.load('/.cache/models/all-MiniLM-L6-v2/', { backend: 'cpu', threads: 3 }); } catch (e) { tooMany = { code: e.code, message: e.message }; }
    const embedder = await wd.Embedder.load('/.cache/models/all-MiniLM-L6-v2/', { backend: 'cpu', threads: 2 });
    const rows = (await embedder.embed(sentences)).map((row) => Array.from(row));
    embedder.destroy();
    const referenceUrl = '/.cache/reference/gemma-3-270m/';
    const reference = await (await fetch(`${referenceUrl}reference.json`)).json();
    const scored = reference.prompts.reduce((a, b) => (b.ids.length < a.ids.length ? b : a));
    const stored = new Float32Array(await (await fetch(referenceUrl + scored.logits_file)).arrayBuffer());
    const gen = await wd.Generator.load('/.cache/models/gemma-3-270m/gemma-3-270m-q4_k_m.gguf', { backend: 'cpu', contextLength: 64, logits: true });
    const sharedMb = pool.bytesInUse / 2 ** 20;
    const memory = gen.memoryStats();
    const ev = await gen.evaluate(scored.ids, { logitPositions: scored.logit_positions });
    const vocab = reference.n_vocab;
    const cosines = scored.logit_positions.map((_, row) => rowCosine(ev.logits, stored, row, vocab));
    const pieces = [];
    for await (const piece of gen.generate(prompt.text, { maxNewTokens: prompt.tokens.length })) pieces.push(piece.token);
    gen.destroy();
    const after = Number(wd.getOption('cpu', [{ key: 'threads', value: 0 }])[0].value);
    pool.terminate();
    return { threads, after, rows, cosines, tokens: Array.from(ev.tokens), top1: scored.top1, pieces, sharedMb, memory, tooMany };
  }, { sentences: minilm.sentences, prompt });
  assert.equal(r.threads, 2);
  assert.equal(r.after, 2, 'no worker failed');
  assert.equal(r.tooMany?.code, 'InvalidArgument', JSON.stringify(r.tooMany));
  assert.match(r.tooMany.message, /3 threads/);
  const refBytes = Buffer.from(minilm.embeddings_f32_le_base64, 'base64');
  r.rows.forEach((got, i) => {
    const want = new Float32Array(refBytes.buffer, refBytes.byteOffset + i * minilm.dim * 4, minilm.dim);
    let dot = 0; let ng = 0; let nw = 0; let maxAbs = 0;
    for (let k = 0; k < got.length; k++) {
      dot += got[k] * want[k]; ng += got[k] ** 2; nw += want[k] ** 2;
      maxAbs = Math.max(maxAbs, Math.abs(got[k] - want[k]));
    }
    assert.ok(dot / Math.sqrt(ng * nw) >= 0.9999 && maxAbs <= 1e-3, `MiniLM sentence ${i}: cosine ${dot / Math.sqrt(ng * nw)}, max abs ${maxAbs}`);
  });
  t.diagnostic(`Gemma weights in the pool's shared memory: ${r.sharedMb.toFixed(1)} MiB; memoryStats ${JSON.stringify(r.memory)}`);
  // Every block weight (the tied table included, gathered from there) lives only in the
  // pool's memory: what stays in wasm memory is the f32 norms (under 1 MiB) and the KV cache
  // of 64 positions (18 layers x K and V x 256 x 4 bytes).
  assert.equal(r.memory.backend, 'cpu');
  assert.ok(r.memory.sharedWeights >= 230 * 2 ** 20, `shared weights ${r.memory.sharedWeights}`);
  assert.ok(r.memory.weights < 2 ** 20, `weights left in wasm memory: ${r.memory.weights} bytes`);
  assert.equal(r.memory.state, 18 * 2 * 256 * 4 * 64);
  assert.ok(r.memory.sharedMemoryBytes >= r.memory.sharedWeights);
  assert.deepEqual(r.tokens, r.top1, 'teacher-forced top-1 at every position');
  for (const c of r.cosines) assert.ok(c >= 0.9999, `logits cosine ${c}`);
  assert.deepEqual(r.pieces, prompt.tokens, `greedy tokens of ${JSON.stringify(prompt.text)}`);
});

test('a long Gemma 3 270M prefill on the pool grows the module\'s memory by its live intermediates only', { timeout: 300_000 }, async (t) => {
  const p = await harness.openPage(t, '/isolated/pkg-tests/harness.html', () => window.harnessReady || window.harnessError);
  const r = await p.evaluate(async () => {
    await wd.ready();
    const { CpuThreadPool } = await import('/isolated/pkg/cpu-threads/pool.js');
    const pool = await CpuThreadPool.start({ threads: 2 });
    wd.useCpuThreads(pool);
    const gen = await wd.Generator.load('/.cache/models/gemma-3-270m/gemma-3-270m-q4_k_m.gguf', { backend: 'cpu', contextLength: 256 });
    const words = 'the keeper climbed the stair at dusk to trim the wick and wind the clockwork of the lamp'.split(' ');
    let count = 150;
    const text = () => Array.from({ length: count }, (_, i) => words[i % words.length]).join(' ');
    while (gen.tokenize(text()).length < 200) count += 1;
    const before = gen.memoryStats();
    for await (const piece of gen.generate(text(), { maxNewTokens: 1 })) void piece;
    const after = gen.memoryStats();
    const tokens = gen.stats().promptTokens;
    gen.destroy();
    pool.terminate();
    return { tokens, before, after };
  });
  const MIB = 2 ** 20;
  const grew = (r.after.wasmMemoryBytes - r.before.wasmMemoryBytes) / MIB;
  t.diagnostic(`${r.tokens}-token prefill on the pool: module memory ${(r.before.wasmMemoryBytes / MIB).toFixed(1)} -> ${(r.after.wasmMemoryBytes / MIB).toFixed(1)} MiB (+${grew.toFixed(1)}), shared ${(r.before.sharedMemoryBytes / MIB).toFixed(1)} -> ${(r.after.sharedMemoryBytes / MIB).toFixed(1)} MiB`);
  assert.ok(r.tokens >= 200 && r.tokens <= 202, `${r.tokens} prompt tokens`);
  // The oracle: the native single-thread prefill of 128 tokens peaks 6.0 MiB above what the
  // program holds (tests/cpu_memory.rs, a counting allocator), and on the pool most results
  // live in the shared memory. Before 12-08 every host copy of a shared result was kept until
  // the execution ended: 0.29 MiB per prompt token, 58 MiB here.
  assert.ok(grew <= 16, `the module memory grew by ${grew.toFixed(1)} MiB over a 200-token prefill`);
});

test('Gemma 3 270M with int8 activations: the same logits on 1 and 2 threads, close to the float64 reference', { timeout: 300_000 }, async (t) => {
  const p = await harness.openPage(t, '/isolated/pkg-tests/harness.html', () => window.harnessReady || window.harnessError);
  const r = await p.evaluate(async () => {
    await wd.ready();
    const { CpuThreadPool } = await import('/isolated/pkg/cpu-threads/pool.js');
    const pool = await CpuThreadPool.start({ threads: 2 });
    wd.useCpuThreads(pool);
    const referenceUrl = '/.cache/reference/gemma-3-270m/';
    const reference = await (await fetch(`${referenceUrl}reference.json`)).json();
    const scored = reference.prompts.reduce((a, b) => (b.ids.length < a.ids.length ? b : a));
    const stored = new Float32Array(await (await fetch(referenceUrl + scored.logits_file)).arrayBuffer());
    const model = '/.cache/models/gemma-3-270m/gemma-3-270m-q4_k_m.gguf';
    const logits = {};
    const tokens = {};
    for (const threads of [2, 1]) {
      const gen = await wd.Generator.load(model, { backend: 'cpu', contextLength: 64, logits: true, threads, cpuActivations: 'int8' });
      const ev = await gen.evaluate(scored.ids, { logitPositions: scored.logit_positions });
      logits[threads] = ev.logits;
      tokens[threads] = Array.from(ev.tokens);
      gen.destroy();
    }
    let bad;
    try { await wd.Generator.load(model, { backend: 'cpu', cpuActivations: 'int4' }); } catch (e) { bad = { code: e.code, message: e.message }; }
    pool.terminate();
    let maxRel = 0;
    for (let i = 0; i < logits[1].length; i++) {
      maxRel = Math.max(maxRel, Math.abs(logits[1][i] - logits[2][i]) / Math.max(1, Math.abs(logits[1][i])));
    }
    const vocab = reference.n_vocab;
    const cosines = scored.logit_positions.map((_, row) => rowCosine(logits[2], stored, row, vocab));
    return { maxRel, cosines, tokens, top1: scored.top1, bad };
  });
  const agree = r.tokens[2].filter((id, i) => id === r.top1[i]).length;
  t.diagnostic(`int8 activations: 1 vs 2 threads max relative difference ${r.maxRel}; cosines to the float64 reference min ${Math.min(...r.cosines).toFixed(5)}; top-1 ${agree} of ${r.top1.length}`);
  assert.equal(r.maxRel, 0, `1 and 2 threads run the same kernels: their logits must be the same bits (differ by ${r.maxRel})`);
  assert.deepEqual(r.tokens[1], r.tokens[2], '1 and 2 threads choose the same tokens');
  for (const c of r.cosines) assert.ok(c >= 0.995, `int8 logits cosine ${c}`);
  assert.ok(agree >= Math.ceil(0.9 * r.top1.length), `teacher-forced top-1 agrees at ${agree} of ${r.top1.length} positions`);
  assert.equal(r.bad?.code, 'InvalidArgument', JSON.stringify(r.bad));
  assert.match(r.bad.message, /cpuActivations must be "f32" or "int8"/);
});
