// The Embedder's behaviour around the embeddings, in headless Chromium through the built package,
// on the real all-MiniLM-L6-v2 served by nginx (CPU backend: fast enough to load several times):
// - embed() calls made while one runs wait their turn, first come first served, and give the
//   same rows as one call at a time; destroy() rejects the waiting ones at once;
// - bad options reject with InvalidArgument before any request (integers converted without
//   truncation, the signal checked to be an AbortSignal);
// - an abort stops the load at once wherever it is (before it starts, during config.json,
//   during the index read, while the weights stream) and leaves no request running;
// - with backend 'auto' and no WebGPU (navigator.gpu taken away before the module starts, as in
//   a browser without WebGPU) the load falls back to CPU and says why.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { useBrowserHarness } from './support/fixture.mjs';

const MODEL_URL = '/.cache/models/all-MiniLM-L6-v2/';
const WEIGHTS_PATH = `${MODEL_URL}model.safetensors`;
const harness = useBrowserHarness();
const SLOW = { timeout: 120_000 };
const NO_WEBGPU = { initScript: () => { delete Navigator.prototype.gpu; } };

test('embed() calls made while one runs queue in call order and match one-at-a-time results', SLOW, async (t) => {
  const page = await harness.openHarnessPage(t);
  const r = await page.evaluate(async (url) => {
    const e = await wd.Embedder.load(url, { backend: 'cpu', batchSize: 3, maxTokens: 128 });
    const groups = [
      ['A man is eating food.'],
      ['The girl is carrying a baby.', 'A woman is playing violin.', 'A monkey is playing drums.', 'Two men pushed carts through the woods.'],
      ['What is the capital of France?'],
      ['The weather today is sunny with a light breeze.', 'He practices guitar in the garage.'],
      ['Gradient descent updates parameters against the gradient of the loss.'],
    ];
    const same = (a, b) => a.length === b.length && a.every((row, i) => row.length === b[i].length && row.every((v, j) => Object.is(v, b[i][j])));
    const oneAtATime = [];
    for (const g of groups) oneAtATime.push(await e.embed(g));

    const finished = [];
    const calls = groups.map((g, i) => e.embed(g).then((rows) => { finished.push(i); return rows; }));
    const pendingRightAfter = e.pendingEmbeds;
    const together = await Promise.all(calls);
    const pendingAfter = e.pendingEmbeds;

    // destroy() while two calls wait: the running one finishes, the waiting ones reject now.
    const running = capture(() => e.embed(groups[1]));
    const waiting = [capture(() => e.embed(groups[0])), capture(() => e.embed(groups[2]))];
    const waitingBeforeDestroy = e.pendingEmbeds;
    e.destroy();
    const waitingAfterDestroy = e.pendingEmbeds;
    const settled = await Promise.all([running, ...waiting]);
    const later = await capture(() => e.embed(['x']));
    return {
      batchSize: e.batchSize,
      maxTokens: e.maxTokens,
      pendingRightAfter,
      pendingAfter,
      finished,
      equal: together.map((rows, i) => same(rows, oneAtATime[i])),
      rowsPerCall: together.map((rows) => rows.length),
      runningOk: settled[0].ok && same(settled[0].value, oneAtATime[1]),
      waitingErrors: settled.slice(1).map((s) => s.error),
      waitingBeforeDestroy,
      waitingAfterDestroy,
      later: later.error,
    };
  }, MODEL_URL);
  assert.equal(r.batchSize, 3);
  assert.equal(r.maxTokens, 128);
  assert.equal(r.pendingRightAfter, 4, 'four calls wait behind the first');
  assert.equal(r.pendingAfter, 0);
  assert.deepEqual(r.finished, [0, 1, 2, 3, 4], 'first come, first served');
  assert.deepEqual(r.rowsPerCall, [1, 4, 1, 2, 1]);
  assert.deepEqual(r.equal, [true, true, true, true, true], 'rows equal to one call at a time');
  assert.ok(r.runningOk, 'the running embed finishes after destroy()');
  assert.equal(r.waitingBeforeDestroy, 2);
  assert.equal(r.waitingAfterDestroy, 0);
  for (const error of r.waitingErrors) {
    assert.equal(error.code, 'InvalidState');
    assert.match(error.message, /destroyed while the embed\(\) waited/);
  }
  assert.equal(r.later.code, 'InvalidState');
  assert.match(r.later.message, /destroyed/);
});

test('bad options reject with InvalidArgument before any request', SLOW, async (t) => {
  const page = await harness.openHarnessPage(t);
  const r = await page.evaluate(async (url) => {
    const cases = [
      ['batchSize', 0], ['batchSize', -1], ['batchSize', 1.5], ['batchSize', 2 ** 32 + 16],
      ['batchSize', 1025], ['batchSize', '16'], ['batchSize', NaN], ['batchSize', Infinity],
      ['maxTokens', 0], ['maxTokens', 1], ['maxTokens', 2.5], ['maxTokens', -2],
      ['maxTokens', 2 ** 32 + 8], ['maxTokens', 2 ** 53], ['maxTokens', 1e6],
      ['signal', {}], ['signal', 'abort'], ['signal', new EventTarget()], ['signal', new AbortController()],
      ['backend', 3], ['backend', ''], ['weights', ''],
    ];
    const fetches = trackFetches();
    const results = [];
    for (const [key, value] of cases) {
      const outcome = await capture(() => wd.Embedder.load(url, { backend: 'cpu', [key]: value }));
      results.push({ key, value: String(value), ok: outcome.ok, error: outcome.error });
    }
    const requestsForBadOptions = fetches.entries.length;
    // In range for the options, out of range for this model (512 positions): found after config.json.
    const tooLong = await capture(() => wd.Embedder.load(url, { backend: 'cpu', maxTokens: 513 }));
    await fetches.settled();
    fetches.restore();
    return { results, requestsForBadOptions, tooLong: tooLong.error };
  }, MODEL_URL);
  for (const c of r.results) {
    assert.equal(c.ok, false, `${c.key} = ${c.value} was accepted`);
    assert.equal(c.error.code, 'InvalidArgument', `${c.key} = ${c.value}: ${c.error.message}`);
    assert.match(c.error.message, new RegExp(c.key), `${c.key} = ${c.value}: the message names the option`);
  }
  assert.equal(r.requestsForBadOptions, 0, 'no request for a load with bad options');
  assert.equal(r.tooLong.code, 'InvalidArgument');
  assert.match(r.tooLong.message, /maxTokens 513 exceeds the model's max_position_embeddings 512/);
});

/** Loads with an AbortController that `arm(controller, fetches)` wires to abort somewhere. */
async function abortedLoad(page, arm) {
  return page.evaluate(async ({ url, arm }) => {
    const controller = new AbortController();
    let abortedAt = null;
    controller.signal.addEventListener('abort', () => { abortedAt = performance.now(); });
    const armed = new Function('controller', 'entry', `return (${arm})(controller, entry);`);
    const progress = [];
    const fetches = trackFetches((entry) => armed(controller, entry));
    const t0 = performance.now();
    const outcome = await capture(() => {
      const p = wd.Embedder.load(url, {
        backend: 'cpu',
        signal: controller.signal,
        onProgress: (e) => { progress.push(e); armed(controller, { progress: e }); },
      });
      armed(controller, { called: true });
      return p;
    });
    const rejectedAt = performance.now();
    const startedByRejection = fetches.entries.length;
    await fetches.settled();
    // One more task: anything the load would still start shows up now.
    await new Promise((resolve) => setTimeout(resolve, 0));
    fetches.restore();
    return {
      outcome,
      aborted: abortedAt !== null,
      abortedAfterMs: abortedAt === null ? null : abortedAt - t0,
      rejectedAfterAbortMs: abortedAt === null ? null : rejectedAt - abortedAt,
      startedByRejection,
      fetches: fetches.snapshot().map((e) => ({ ...e, beforeAbort: abortedAt !== null && e.start < abortedAt, endedBeforeAbort: abortedAt !== null && e.end <= abortedAt })),
      lastProgress: progress.at(-1) ?? null,
    };
  }, { url: MODEL_URL, arm: arm.toString() });
}

function assertAbortedCleanly(r, what) {
  assert.ok(r.aborted, `${what}: the abort fired`);
  assert.equal(r.outcome.ok, false, `${what}: the load did not reject`);
  assert.equal(r.outcome.error.code, 'InvalidState', `${what}: ${r.outcome.error.message}`);
  assert.match(r.outcome.error.message, /load aborted/);
  assert.equal(r.fetches.length, r.startedByRejection, `${what}: a fetch started after the load rejected`);
  for (const f of r.fetches) {
    // A fetch that had not finished when the abort came was aborted, not left to run.
    if (!(f.state === 'resolved' && f.endedBeforeAbort)) {
      assert.equal(f.state, 'rejected', `${what}: ${f.path} ${JSON.stringify(f)}`);
      assert.equal(f.error, 'AbortError', `${what}: ${f.path}`);
    }
  }
}

test('an abort right after load() rejects at once, before any request', SLOW, async (t) => {
  const page = await harness.openHarnessPage(t);
  const r = await abortedLoad(page, (controller, entry) => { if (entry.called) controller.abort(); });
  assertAbortedCleanly(r, 'abort right after the call');
  assert.equal(r.fetches.length, 0, JSON.stringify(r.fetches));
});

test('an abort while config.json is fetched aborts that fetch and starts no other', SLOW, async (t) => {
  const page = await harness.openHarnessPage(t);
  const r = await abortedLoad(page, (controller, entry) => { if (entry.path?.endsWith('/config.json')) controller.abort(); });
  assertAbortedCleanly(r, 'abort during config.json');
  assert.deepEqual(r.fetches.map((f) => [f.path.split('/').at(-1), f.state, f.error]), [['config.json', 'rejected', 'AbortError']]);
});

test('an abort while the index and tokenizer are fetched aborts every fetch in flight', SLOW, async (t) => {
  const page = await harness.openHarnessPage(t);
  // Aborted one task after the weights file's first (index) request starts: the tokenizer and
  // sentence_bert_config fetches started with it are in flight too.
  const r = await abortedLoad(page, (controller, entry) => {
    if (entry.path?.endsWith('/model.safetensors')) setTimeout(() => controller.abort(), 0);
  });
  assertAbortedCleanly(r, 'abort during the index read');
  const names = r.fetches.map((f) => f.path.split('/').at(-1));
  assert.ok(names.includes('tokenizer.json') && names.includes('model.safetensors'), names.join());
  assert.equal(r.lastProgress, null, 'no weights were streamed');
});

test('an abort while the weights stream stops their requests', SLOW, async (t) => {
  const page = await harness.openHarnessPage(t);
  const network = [];
  page.page.on('request', (req) => { if (req.url().endsWith(WEIGHTS_PATH)) network.push({ req, end: null }); });
  const ended = (how) => (req) => { const n = network.find((x) => x.req === req); if (n) n.end = how === 'failed' ? `failed: ${req.failure()?.errorText}` : 'finished'; };
  page.page.on('requestfinished', ended('finished'));
  page.page.on('requestfailed', ended('failed'));
  const r = await abortedLoad(page, (controller, entry) => { if (entry.progress?.bytesDone > 0) controller.abort(); });
  assertAbortedCleanly(r, 'abort while streaming');
  assert.ok(r.lastProgress && r.lastProgress.bytesDone < r.lastProgress.bytesTotal, JSON.stringify(r.lastProgress));
  // Every weights request the browser made has ended; those streaming the weights were aborted.
  const deadline = Date.now() + 10_000;
  while (network.some((n) => n.end === null) && Date.now() < deadline) await new Promise((res) => setTimeout(res, 50));
  t.diagnostic(`weights requests: ${network.map((n) => n.end).join(', ')}`);
  assert.ok(network.every((n) => n.end !== null), 'a weights request is still running');
  assert.ok(network.some((n) => /ABORTED/.test(n.end)), 'the streaming request was aborted');
});

test("'auto' prefers the CPU backend over a fallback adapter (WebGPU emulated on the CPU), and says so", SLOW, async (t) => {
  const page = await harness.openHarnessPage(t);
  const r = await page.evaluate(async (url) => {
    await wd.ready();
    const fallback = wd.getOption('webgpu', [{ key: 'adapter.fallback', value: false }])[0].value;
    const e = await wd.Embedder.load(url, { backend: 'auto' });
    const result = { fallback, backend: e.backend, fallbackReason: e.fallbackReason };
    e.destroy();
    return result;
  }, MODEL_URL);
  t.diagnostic(`adapter.fallback ${r.fallback}: auto ran on ${r.backend} (${r.fallbackReason ?? 'no fallback'})`);
  if (r.fallback) {
    // Chromium's SwiftShader here: matmul ~1.3 GFLOP/s on WebGPU against ~60 on the CPU backend.
    assert.equal(r.backend, 'cpu');
    assert.match(r.fallbackReason ?? '', /webgpu has only a fallback adapter/);
  } else {
    assert.equal(r.backend, 'webgpu', 'a real GPU adapter is the first choice');
    assert.equal(r.fallbackReason, undefined);
  }
});

test("'auto' without WebGPU falls back to CPU and says why", SLOW, async (t) => {
  const page = await harness.openHarnessPage(t, NO_WEBGPU);
  const r = await page.evaluate(async (url) => {
    const hasGpu = 'gpu' in navigator;
    const webgpuReady = await wd.ready();
    const e = await wd.Embedder.load(url, { backend: 'auto' });
    const result = { hasGpu, webgpuReady, backend: e.backend, fallbackReason: e.fallbackReason };
    const [row] = await e.embed(['A man is eating food.']);
    result.dim = row.length;
    e.destroy();
    result.explicit = (await capture(() => wd.Embedder.load(url, { backend: 'webgpu' }))).error;
    return result;
  }, MODEL_URL);
  assert.equal(r.hasGpu, false, 'the init script took navigator.gpu away');
  assert.equal(r.webgpuReady, false);
  assert.equal(r.backend, 'cpu');
  assert.equal(r.dim, 384);
  assert.match(r.fallbackReason ?? '', /^webgpu unavailable: navigator\.gpu is missing/);
  assert.equal(r.explicit?.code, 'NotFound', 'backend webgpu without WebGPU rejects');
  t.diagnostic(`explicit webgpu: ${r.explicit.code}: ${r.explicit.message}`);
});
