// Proves the package test harness really has WebGPU: in the harness page (headless Chromium with
// --enable-unsafe-webgpu), navigator.gpu exists, requestAdapter() yields an adapter and that
// adapter gives a device. Logs the adapter's info and a few limits for the test output.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { TEST_TIMEOUT, useBrowserHarness } from './support/fixture.mjs';

const harness = useBrowserHarness();

test('navigator.gpu yields an adapter and a device', TEST_TIMEOUT, async (t) => {
  const p = await harness.openHarnessPage(t);
  const r = await p.evaluate(async () => {
    if (!('gpu' in navigator)) return { hasGpu: false };
    const adapter = await navigator.gpu.requestAdapter();
    if (!adapter) return { hasGpu: true, adapter: null };
    const { vendor, architecture, device, description } = adapter.info;
    const limitNames = [
      'maxBufferSize',
      'maxStorageBufferBindingSize',
      'maxComputeInvocationsPerWorkgroup',
      'maxComputeWorkgroupSizeX',
      'maxComputeWorkgroupStorageSize',
    ];
    const dev = await adapter.requestDevice();
    const deviceOk = typeof dev.createBuffer === 'function';
    dev.destroy();
    return {
      hasGpu: true,
      adapter: {
        info: { vendor, architecture, device, description },
        isFallbackAdapter: adapter.info.isFallbackAdapter ?? adapter.isFallbackAdapter ?? null,
        features: [...adapter.features].sort(),
        limits: Object.fromEntries(limitNames.map((n) => [n, adapter.limits[n]])),
      },
      deviceOk,
    };
  });
  assert.equal(r.hasGpu, true, 'navigator.gpu is missing: Chromium was not started with WebGPU');
  assert.ok(r.adapter, 'navigator.gpu.requestAdapter() resolved to null');
  t.diagnostic(`adapter info: ${JSON.stringify(r.adapter.info)} isFallbackAdapter=${r.adapter.isFallbackAdapter}`);
  t.diagnostic(`adapter limits: ${JSON.stringify(r.adapter.limits)}`);
  t.diagnostic(`adapter features: ${r.adapter.features.join(', ')}`);
  assert.equal(typeof r.adapter.info.vendor, 'string');
  assert.equal(typeof r.adapter.info.architecture, 'string');
  for (const [name, value] of Object.entries(r.adapter.limits)) {
    assert.ok(Number.isInteger(value) && value > 0, `adapter limit ${name} = ${value}`);
  }
  assert.equal(r.deviceOk, true, 'adapter.requestDevice() did not give a usable device');
});
