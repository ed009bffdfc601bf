// The webpack-built demo (www/dist, made by `npm run build:www`, which `npm run test:pkg` runs
// first) served by nginx: it must list the registered backends (as many as a fresh harness page
// reports) and show the same WebGPU adapter info the browser reports, plus its limits table.
// Saves a screenshot to pkg-tests/artifacts/www.png.
import assert from 'node:assert/strict';
import { existsSync } from 'node:fs';
import { mkdir } from 'node:fs/promises';
import path from 'node:path';
import { test } from 'node:test';
import { TEST_TIMEOUT, useBrowserHarness } from './support/fixture.mjs';
import { REPO_ROOT } from './support/server.mjs';

const ARTIFACTS = path.join(REPO_ROOT, 'pkg-tests', 'artifacts');
const harness = useBrowserHarness();

test('the demo page shows the backends and the WebGPU adapter', TEST_TIMEOUT, async (t) => {
  assert.ok(existsSync(path.join(REPO_ROOT, 'www/dist/index.html')), 'www/dist is missing: run `npm run build:www`');

  // What the page should show, asked independently from a fresh harness page.
  const ref = await harness.openHarnessPage(t);
  const expected = await ref.evaluate(async () => {
    await wd.ready(); // the demo lists the backends once the WebGPU device is acquired: so do we
    const adapter = await navigator.gpu?.requestAdapter();
    return {
      backends: wd.listBackends().map((name) => ({ name, available: wd.isBackendAvailable(name) })),
      version: wd.version(),
      vendor: adapter?.info.vendor ?? null,
      architecture: adapter?.info.architecture ?? null,
      maxBufferSize: adapter?.limits.maxBufferSize ?? null,
    };
  });

  const demo = await harness.openPage(
    t,
    '/www/dist/index.html',
    () => ['backends', 'adapter'].every((id) => document.getElementById(id)?.dataset.state !== 'loading'),
  );
  const shown = await demo.evaluate(() => {
    const section = (id) => document.getElementById(id);
    const rows = (table) => Object.fromEntries([...(table?.rows ?? [])].map((r) => [r.cells[0].textContent, r.cells[1].textContent]));
    const adapter = section('adapter');
    return {
      backendsState: section('backends').dataset.state,
      backendsText: section('backends').textContent,
      backends: [...section('backends').querySelectorAll('li.backend')].map((li) => ({
        name: li.querySelector('.name').textContent,
        available: li.querySelector('.available') !== null,
      })),
      version: document.getElementById('version').textContent,
      adapterState: adapter.dataset.state,
      adapterText: adapter.textContent,
      info: rows(adapter.querySelector('table:not(.limits)')),
      limits: rows(adapter.querySelector('table.limits')),
    };
  });

  await mkdir(ARTIFACTS, { recursive: true });
  await demo.page.screenshot({ path: path.join(ARTIFACTS, 'www.png'), fullPage: true });

  assert.equal(shown.backendsState, 'ready', `backends section: ${shown.backendsText}`);
  assert.deepEqual(shown.backends, expected.backends);
  if (expected.backends.length === 0) assert.match(shown.backendsText, /No backends registered/);
  assert.equal(shown.version, `package v${expected.version}`);

  assert.ok(expected.vendor !== null, 'the browser has no WebGPU adapter');
  assert.equal(shown.adapterState, 'ready', `adapter section: ${shown.adapterText}`);
  assert.equal(shown.info.vendor, expected.vendor || '(empty)');
  assert.equal(shown.info.architecture, expected.architecture || '(empty)');
  for (const key of ['device', 'description', 'isFallbackAdapter']) assert.ok(key in shown.info, `adapter info row ${key}`);
  assert.ok(Object.keys(shown.limits).length >= 10, `limits table has ${Object.keys(shown.limits).length} rows`);
  assert.equal(shown.limits.maxBufferSize, new Intl.NumberFormat('en-US').format(expected.maxBufferSize));
});
