// The WebGPU backend through the built package in headless Chromium: "webgpu" and "cpu" are
// registered when the module starts and ready() resolves once the device is acquired;
// registerWebGpuBackend(name) adds another instance; getOption reports the adapter and limits, a small
// MatmulBench program initialises, executes and is destroyed, and the backend's live GPU
// buffers go back to zero.
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
    const bench = await wd.MatmulBench.create('gpu', 33, 17, 65, 2);
    await bench.run(3);
    const during = live();
    bench.destroy();
    const rejected = await capture(() => bench.run(1));
    const naive = await wd.MatmulBench.create('gpu', 8, 8, 8, 1, [{ key: 'matmul_kernel', value: 'naive' }]);
    await naive.run(1);
    naive.destroy();
    const badSpec = await capture(() => wd.MatmulBench.create('gpu', 8, 8, 8, 1, [{ key: 'tile', value: '9' }]));
    return { flops: bench.flopsPerRun, during, after: live(), rejected, badSpec };
  });
  assert.equal(r.flops, 2 * 33 * 17 * 65 * 2);
  assert.ok(r.during > 0);
  assert.equal(r.after, 0);
  assert.equal(r.rejected.error.code, 'InvalidState');
  assert.equal(r.badSpec.error.code, 'InvalidArgument');
});
