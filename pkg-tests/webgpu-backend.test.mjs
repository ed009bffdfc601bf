// The WebGPU backend through the built package in headless Chromium: "webgpu" and "cpu" are
// registered when the module starts and ready() resolves once the device is acquired;
// registerWebGpuBackend(name) adds another instance; getOption reports the adapter and limits, a small
// matmul program (tiled and naive kernels, against a float64 product) initialises, executes and
// is destroyed, and the backend's live GPU buffers go back to zero. (The benchmark fixture
// MatmulBench is only in the bench's build; bench/suites/matmul.mjs checks its own limits.)
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { TEST_TIMEOUT, useBrowserHarness } from './support/fixture.mjs';

const harness = useBrowserHarness();

test('webgpu and cpu are registered by default; ready() resolves once the device is had', TEST_TIMEOUT, async (t) => {
  const p = await harness.openHarnessPage(t);
  const r = await p.evaluate(async () => {
    const defaults = wd.listBackends();
    const available = await wd.ready();
    const options = wd.getOption('webgpu', [
      { key: 'adapter.vendor', value: '' },
      { key: 'adapter.backend', value: '' },
      { key: 'adapter.fallback', value: false },
      { key: 'limits.max_buffer_size', value: 0 },
      { key: 'limits.max_compute_invocations_per_workgroup', value: 0 },
    ]);
    const duplicate = await capture(() => wd.registerWebGpuBackend('webgpu'));
    const unknown = capture(() => wd.getOption('webgpu', [{ key: 'adapter.colour', value: '' }]));
    return { defaults, available, isAvailable: wd.isBackendAvailable('webgpu'), cpu: wd.isBackendAvailable('cpu'), options, duplicate, unknown: await unknown };
  });
  assert.deepEqual(r.defaults, ['webgpu', 'cpu']);
  assert.equal(r.cpu, true);
  assert.equal(r.available, true);
  assert.equal(r.isAvailable, true);
  const value = (key) => r.options.find((o) => o.key === key).value;
  t.diagnostic(`adapter: ${JSON.stringify(r.options)}`);
  assert.equal(value('adapter.backend'), 'webgpu');
  assert.ok(value('adapter.vendor').length > 0);
  assert.equal(typeof value('adapter.fallback'), 'boolean');
  assert.ok(Number(value('limits.max_buffer_size')) >= 256 * 1024 * 1024, 'the device asks for the adapter limits');
  assert.ok(Number(value('limits.max_compute_invocations_per_workgroup')) >= 64);
  assert.equal(r.duplicate.ok, false);
  assert.equal(r.duplicate.error.code, 'InvalidArgument');
  assert.equal(r.unknown.ok, false);
  assert.equal(r.unknown.error.code, 'InvalidArgument');
});

test('a matmul program runs and destroy frees its GPU buffers', TEST_TIMEOUT, async (t) => {
  const p = await harness.openHarnessPage(t);
  const r = await p.evaluate(async () => {
    await wd.registerWebGpuBackend('gpu');
    const live = () => Number(wd.getOption('gpu', [{ key: 'live_buffers', value: 0 }])[0].value);
    const [M, K, N] = [33, 17, 65];
    const values = (count, seed) => Float32Array.from({ length: count }, (_, i) => Math.sin(i * 0.37 + seed));
    const b = new wd.ProgramBuilder();
    const x = b.input('x', 'float32', [M, K]);
    const w = b.param('w', 'float32', [K, N], 'weights', 'w');
    b.output(b.matmul(x, w));
    b.output(b.matmul(b.scale(x, 2), w));
    const blob = b.encode();
    b.free();
    const wData = values(K * N, 1);
    const mem = new wd.MemoryParameterProvider();
    mem.insert('weights', 'w', new Uint8Array(wData.buffer), { dtype: 'F32', shape: [K, N] });
    const xData = values(M * K, 2);
    const args = () => [{ tag: 'Tensor', dtype: 'float32', shape: [M, K], data: xData }, { tag: 'None' }, { tag: 'None' }];
    // The oracle: the same product in float64 in JavaScript.
    const want = new Float64Array(M * N);
    for (let i = 0; i < M; i++) for (let j = 0; j < N; j++) for (let k = 0; k < K; k++) want[i * N + j] += xData[i * K + k] * wData[k * N + j];
    const maxDiff = (out, factor) => Math.max(...Array.from(out.data, (v, i) => Math.abs(v - factor * want[i])));
    const tiled = await wd.Delegate.initWithParameters('gpu', blob, mem);
    let outs;
    for (let i = 0; i < 3; i++) outs = await tiled.execute(args());
    const during = live();
    const diffs = [maxDiff(outs[1], 1), maxDiff(outs[2], 2)];
    tiled.destroy();
    const rejected = await capture(() => tiled.execute(args()));
    const naive = await wd.Delegate.initWithParameters('gpu', blob, mem, { compileSpecs: [{ key: 'matmul_kernel', value: 'naive' }] });
    const naiveOuts = await naive.execute(args());
    diffs.push(maxDiff(naiveOuts[1], 1), maxDiff(naiveOuts[2], 2));
    naive.destroy();
    const badSpec = await capture(() => wd.Delegate.initWithParameters('gpu', blob, mem, { compileSpecs: [{ key: 'tile', value: '9' }] }));
    return { diffs, during, after: live(), rejected, badSpec, alive: wd.listBackends().length };
  });
  for (const diff of r.diffs) assert.ok(diff <= 1e-4, `max |webgpu - float64| ${r.diffs}`);
  assert.ok(r.during > 0);
  assert.equal(r.after, 0);
  assert.equal(r.rejected.error.code, 'InvalidState');
  assert.equal(r.badSpec.error.code, 'InvalidArgument');
  assert.ok(r.alive > 0, 'the module still answers');
});

test('Delegate: programStats and the per-op profile of a profiled execute; null on the CPU backend', TEST_TIMEOUT, async (t) => {
  const p = await harness.openHarnessPage(t);
  const r = await p.evaluate(async () => {
    await wd.ready();
    const b = new wd.ProgramBuilder();
    const x = b.input('x', 'float32', ['batch', 24]);
    const w = b.input('w', 'float32', [24, 16]);
    const h = b.gelu(b.matmul(x, w));
    b.output(b.softmax(b.add(h, h)));
    const blob = b.encode();
    b.free();
    const args = () => [
      { tag: 'Tensor', dtype: 'float32', shape: [5, 24], data: Float32Array.from({ length: 120 }, (_, i) => Math.sin(i * 0.3)) },
      { tag: 'Tensor', dtype: 'float32', shape: [24, 16], data: Float32Array.from({ length: 384 }, (_, i) => Math.cos(i * 0.07) * 0.2) },
      { tag: 'None' },
    ];
    const gpu = await wd.Delegate.init('webgpu', blob);
    const cpu = await wd.Delegate.init('cpu', blob);
    const before = { stats: gpu.programStats(), profile: gpu.lastProfile() };
    const plain = (await gpu.execute(args()))[2].data;
    const unprofiled = gpu.lastProfile();
    wd.setOption('webgpu', [{ key: 'profiling', value: true }]);
    const running = gpu.execute(args());
    const whileRunning = gpu.lastProfile();
    const profiled = (await running)[2].data;
    wd.setOption('webgpu', [{ key: 'profiling', value: false }]);
    const want = (await cpu.execute(args()))[2].data;
    const result = {
      before, unprofiled, whileRunning,
      profile: gpu.lastProfile(), stats: gpu.programStats(),
      cpuStats: cpu.programStats(), cpuProfile: cpu.lastProfile(),
      maxDiff: Math.max(...Array.from(want, (v, i) => Math.max(Math.abs(v - plain[i]), Math.abs(v - profiled[i])))),
    };
    gpu.destroy();
    cpu.destroy();
    result.destroyed = gpu.programStats();
    return result;
  });
  t.diagnostic(`profile: ${JSON.stringify(r.profile)}; stats: ${JSON.stringify(r.stats)}`);
  // Softmax rows sum to 1; the WebGPU kernels agree with the CPU backend to 1e-5 absolute.
  assert.ok(r.maxDiff <= 1e-5, `max |webgpu - cpu| ${r.maxDiff}`);
  assert.equal(r.before.profile, null);
  assert.equal(r.unprofiled, null, 'no profile while profiling is off');
  assert.equal(r.whileRunning, null, 'nothing to read while executing');
  assert.deepEqual(r.profile.ops.map((op) => op.name), ['matmul', 'gelu', 'add', 'softmax']);
  assert.deepEqual(r.profile.ops.map((op) => op.opIndex), [0, 1, 2, 3]);
  assert.ok(r.profile.ops.every((op) => op.dispatches >= 1));
  if (r.profile.timestamps) {
    assert.ok(r.profile.ops.every((op) => op.gpuMs !== null && op.gpuMs >= 0));
    assert.ok(r.profile.totalGpuMs >= 0);
  } else {
    assert.equal(r.profile.totalGpuMs, null);
  }
  assert.equal(r.before.stats.paramBytes, 0, 'a program without parameters');
  assert.equal(r.stats.params, 0);
  assert.ok(r.stats.arenaBytes > 0, 'the first execute planned an arena');
  assert.ok(r.stats.arenaBytes <= r.stats.arenaBytesWithoutReuse);
  assert.equal(r.stats.dispatches, r.profile.ops.reduce((n, op) => n + op.dispatches, 0));
  assert.equal(r.cpuStats, null);
  assert.equal(r.cpuProfile, null);
  assert.equal(r.destroyed, null);
});

test('a lost device is replaced once when two delegates recover at the same time', TEST_TIMEOUT, async (t) => {
  const p = await harness.openHarnessPage(t);
  const r = await p.evaluate(async () => {
    await wd.ready();
    const generation = () => Number(wd.getOption('webgpu', [{ key: 'device_generation', value: 0 }])[0].value);
    const b = new wd.ProgramBuilder();
    const x = b.input('x', 'float32', [3, 7]);
    b.output(b.tanh(b.scale(x, 0.5, 0.25)));
    const blob = b.encode();
    b.free();
    const args = () => [{ tag: 'Tensor', dtype: 'float32', shape: [3, 7], data: Float32Array.from({ length: 21 }, (_, i) => i * 0.1 - 1) }, { tag: 'None' }];
    const delegates = await Promise.all([wd.Delegate.init('webgpu', blob), wd.Delegate.init('webgpu', blob), wd.Delegate.init('webgpu', blob)]);
    const before = await Promise.all(delegates.map(async (d) => Array.from((await d.execute(args()))[1].data)));
    const generationBefore = generation();
    const destroyed = wd.destroyWebGpuDevice();
    // Let the browser report the loss before the executes find it.
    await new Promise((resolve) => setTimeout(resolve, 200));
    const after = await Promise.all(delegates.map(async (d) => Array.from((await d.execute(args()))[1].data)));
    const result = { destroyed, generationBefore, generationAfter: generation(), before, after, recoveries: delegates.map((d) => d.programStats().deviceRecoveries) };
    delegates.forEach((d) => d.destroy());
    return result;
  });
  assert.equal(r.destroyed, true);
  assert.deepEqual(r.recoveries, [1, 1, 1], 'every delegate moved to the new device');
  assert.equal(r.generationAfter, r.generationBefore + 1, 'one new device for all of them');
  assert.deepEqual(r.after, r.before, 'same results on the new device');
});
