// The semantic-search demo (www/dist, built by `npm run build:www`) on all-MiniLM-L6-v2 served
// by nginx, on the CPU backend with a 60-sentence corpus (WebGPU in the test Chromium runs on
// SwiftShader, too slow for this): it must load, index, and rank as you type — the top hit of an
// unambiguous query is from the right topic, scores descend, and window.demo.search agrees with
// what the page shows; typing while the embedder is busy shows no error and only the newest
// query's results. A missing model must put the page in its error state with a message; a page
// without WebGPU (navigator.gpu taken away before the demo starts) must run on the CPU with the
// fallback shown; its weights line must agree with its load statistics. Saves screenshots to pkg-tests/artifacts/demo.png and demo-no-webgpu.png.
import assert from 'node:assert/strict';
import { existsSync } from 'node:fs';
import { mkdir } from 'node:fs/promises';
import path from 'node:path';
import { test } from 'node:test';
import { useBrowserHarness } from './support/fixture.mjs';
import { REPO_ROOT } from './support/server.mjs';

const ARTIFACTS = path.join(REPO_ROOT, 'pkg-tests', 'artifacts');
const SLOW = { timeout: 240_000 };
const settled = () => ['ready', 'error'].includes(document.body.dataset.state);
const harness = useBrowserHarness();

const NO_WEBGPU = { initScript: () => { delete Navigator.prototype.gpu; } };

async function openDemo(t, query, options) {
  // openPage's own wait is short; loading and indexing on CPU can take longer, so wait here.
  const demo = await harness.openPage(t, `/www/dist/index.html${query}`, undefined, options);
  await demo.page.waitForFunction(settled, undefined, { timeout: 200_000, polling: 250 });
  return demo;
}

async function typeAndRead(demo, query) {
  const input = demo.page.locator('#search input[type=search]');
  await input.fill('');
  await input.pressSequentially(query, { delay: 10 });
  await demo.page.waitForFunction((q) => document.querySelector('#search ol.results')?.dataset.query === q, query, { timeout: 30_000 });
  return demo.evaluate(() => [...document.querySelectorAll('#search ol.results li')].map((li) => ({
    text: li.querySelector('.text').textContent,
    topic: li.querySelector('.topic').textContent,
    score: Number(li.querySelector('.score').textContent),
  })));
}

test('semantic search demo: loads, indexes and ranks on the CPU backend', SLOW, async (t) => {
  assert.ok(existsSync(path.join(REPO_ROOT, 'www/dist/index.html')), 'www/dist is missing: run `npm run build:www`');
  const demo = await openDemo(t, '?backend=cpu&corpus=60');
  const state = await demo.evaluate(() => ({
    state: document.body.dataset.state,
    model: document.getElementById('model').textContent,
    index: document.getElementById('index').textContent,
    lifecycle: document.getElementById('lifecycle').textContent,
  }));
  assert.equal(state.state, 'ready', `model: ${state.model}\nindex: ${state.index}`);
  assert.match(state.model, /backend used\s*cpu/);
  assert.match(state.index, /60 sentences/);
  assert.equal(state.lifecycle, 'ready');

  // The weights line counts what the load statistics count: every load of the file (the CPU
  // backend gathers its parameters in several), not only the last one's progress.
  const weights = await demo.evaluate(() => ({
    line: document.querySelector('#model .progress-text').textContent,
    stats: window.demo.embedder.loadStats(),
    progress: window.demo.loadProgress,
  }));
  t.diagnostic(`weights line: ${weights.line}; stats ${JSON.stringify(weights.stats)}; progress ${JSON.stringify(weights.progress)}`);
  const mb = (bytes) => `${(bytes / (1024 * 1024)).toFixed(1)} MB`;
  const requests = weights.stats.requests;
  assert.ok(weights.stats.bytesReceived >= weights.stats.bytesNeeded && weights.stats.bytesNeeded > 0, JSON.stringify(weights.stats));
  assert.ok(weights.line.startsWith(`${mb(weights.stats.bytesReceived)} in `), weights.line);
  assert.ok(weights.line.endsWith(`· ${requests} request${requests === 1 ? '' : 's'}`), weights.line);
  // The live progress, summed over loads, reached the same totals (no retries against nginx).
  assert.equal(weights.progress.bytesDone, weights.progress.bytesTotal);
  assert.equal(weights.progress.requestsDone, weights.progress.requestsTotal);
  assert.equal(weights.progress.requestsDone, requests);
  assert.equal(weights.progress.bytesDone, weights.stats.bytesReceived);

  const cases = [
    ['How is the weather today?', 'weather', /sunny and warm/],
    ['my kitten naps by the window', 'animals', /cat sleeps/],
    ['when does the rocket go to orbit', 'space', /rocket launched/],
  ];
  for (const [query, topic, sentence] of cases) {
    const shown = await typeAndRead(demo, query);
    t.diagnostic(`${query} -> ${shown.map((r) => `${r.score} ${r.text}`).join(' | ')}`);
    assert.equal(shown.length, 5, `${query}: 5 results`);
    assert.equal(shown[0].topic, topic, `${query}: top result ${shown[0].text}`);
    assert.match(shown[0].text, sentence);
    for (let i = 1; i < shown.length; i++) assert.ok(shown[i - 1].score >= shown[i].score, `${query}: scores descend`);
    assert.ok(shown[0].score > 0.3 && shown[0].score <= 1.0001, `${query}: top score ${shown[0].score}`);

    const api = await demo.evaluate((q) => window.demo.search(q), query);
    assert.deepEqual(api.map((r) => r.text), shown.map((r) => r.text), `${query}: window.demo.search agrees`);
    api.forEach((r, i) => assert.ok(Math.abs(r.score - shown[i].score) < 1e-3));
  }

  // Lifecycle: a hidden page suspends, a visible one resumes (visibilityState set in-page: this
  // headless Chromium never hides a page), and the page shows what was released.
  const lifecycle = await demo.evaluate(() => {
    const set = (v) => {
      Object.defineProperty(document, 'visibilityState', { configurable: true, get: () => v });
      document.dispatchEvent(new Event('visibilitychange'));
      return [document.getElementById('lifecycle').textContent, document.getElementById('lifecycle-detail').textContent];
    };
    const hidden = set('hidden');
    const visible = set('visible');
    delete document.visibilityState;
    return { hidden, visible };
  });
  assert.equal(lifecycle.hidden[0], 'suspended (hidden)');
  assert.match(lifecycle.hidden[1], /suspend: released [\d.]+ MB host, [\d.]+ MB GPU/);
  assert.equal(lifecycle.visible[0], 'resumed');
  assert.match(lifecycle.visible[1], /suspends 1, resumes 1/);

  // Typing while the embedder is busy (a bulk embed of the page's own holds it): the first query
  // waits its turn, later ones replace each other while waiting (at most one waits), nothing
  // fails, and only the last query's results are shown.
  await demo.evaluate(() => {
    const status = document.querySelector('#search .search-status');
    const list = document.querySelector('#search ol.results');
    const seen = { statuses: [], rendered: [], bulkDone: false, bulkRows: 0 };
    window.seen = seen;
    new MutationObserver(() => seen.statuses.push(status.textContent))
      .observe(status, { childList: true, characterData: true, subtree: true });
    new MutationObserver(() => { if (list.dataset.query) seen.rendered.push(list.dataset.query); })
      .observe(list, { attributes: true, attributeFilter: ['data-query'] });
    const long = 'The committee met on Tuesday to review the budget, the schedule and the plans for the new library. ';
    // 25 batches of 16 short texts: embed() lets the page's events in between batches, and
    // the whole call outlasts typing three queries by far (about 5 s on the CPU backend here).
    const texts = Array.from({ length: 400 }, (_, i) => `${i}. ${long}`);
    const t0 = performance.now();
    window.demo.embedder.embed(texts).then((rows) => {
      Object.assign(seen, { bulkDone: true, bulkRows: rows.length, bulkMs: performance.now() - t0 });
    });
  });
  const input = demo.page.locator('#search input[type=search]');
  const settleDebounce = () => new Promise((r) => setTimeout(r, 300)); // the page's debounce is 200 ms
  await input.fill('my kitten naps by the window');
  await demo.page.waitForFunction(() => window.demo.embedder.pendingEmbeds === 1, undefined, { timeout: 10_000 });
  await input.fill('when does the rocket go to orbit');
  await settleDebounce();
  await input.fill('How is the weather today?');
  await settleDebounce();
  const busy = await demo.evaluate(() => ({ bulkDone: window.seen.bulkDone, pending: window.demo.embedder.pendingEmbeds }));
  assert.deepEqual(busy, { bulkDone: false, pending: 1 }, 'three queries asked while the bulk embed runs: one embed waits');
  await demo.page.waitForFunction(() => document.querySelector('#search ol.results')?.dataset.query === 'How is the weather today?', undefined, { timeout: 60_000 });
  const seen = await demo.evaluate(() => ({ ...window.seen, pending: window.demo.embedder.pendingEmbeds, top: document.querySelector('#search ol.results li .topic')?.textContent }));
  t.diagnostic(`bulk embed of 400 texts: ${seen.bulkMs?.toFixed(0)} ms; statuses: ${JSON.stringify(seen.statuses)}`);
  assert.ok(seen.bulkDone && seen.bulkRows === 400, 'the bulk embed resolved');
  assert.ok(!seen.statuses.some((s) => /fail/i.test(s)), `no failure shown: ${JSON.stringify(seen.statuses)}`);
  assert.deepEqual(seen.rendered, ['How is the weather today?'], 'only the newest query was rendered');
  assert.equal(seen.top, 'weather');
  assert.equal(seen.pending, 0);

  await typeAndRead(demo, 'How is the weather today?');
  await mkdir(ARTIFACTS, { recursive: true });
  await demo.page.screenshot({ path: path.join(ARTIFACTS, 'demo.png'), fullPage: true });
});

test('semantic search demo: an unreachable model is reported, not hung on', SLOW, async (t) => {
  const demo = await openDemo(t, '?backend=cpu&model=/no/such/model/');
  const shown = await demo.evaluate(() => ({
    state: document.body.dataset.state,
    model: document.getElementById('model').textContent,
    search: document.querySelector('#search .search-status').textContent,
    disabled: document.querySelector('#search input').disabled,
  }));
  assert.equal(shown.state, 'error');
  assert.match(shown.model, /Could not load the model: .*could not be fetched/);
  assert.match(shown.search, /unavailable/);
  assert.ok(shown.disabled);
});

test('semantic search demo: without WebGPU, auto falls back to the CPU backend and says why', SLOW, async (t) => {
  const demo = await openDemo(t, '?corpus=12', NO_WEBGPU);
  const shown = await demo.evaluate(() => ({
    state: document.body.dataset.state,
    model: document.getElementById('model').innerText,
    notes: [...document.querySelectorAll('#model ul.notes li')].map((li) => li.textContent),
    adapter: document.getElementById('adapter').textContent,
    backends: document.getElementById('backends').textContent,
  }));
  assert.equal(shown.state, 'ready', shown.model);
  assert.match(shown.model, /backend requested\s*auto/);
  assert.match(shown.model, /backend used\s*cpu/);
  assert.match(shown.model, /fallback\s*webgpu unavailable: navigator\.gpu is missing/);
  assert.ok(shown.notes.some((n) => /^Running on the cpu backend instead: webgpu unavailable: navigator\.gpu is missing/.test(n)), JSON.stringify(shown.notes));
  assert.match(shown.adapter, /WebGPU is not available/);
  assert.match(shown.backends, /webgpu\s*unavailable/);
  const results = await typeAndRead(demo, 'How is the weather today?');
  assert.equal(results[0].topic, 'weather');
  await mkdir(ARTIFACTS, { recursive: true });
  await demo.page.screenshot({ path: path.join(ARTIFACTS, 'demo-no-webgpu.png'), fullPage: true });
});
