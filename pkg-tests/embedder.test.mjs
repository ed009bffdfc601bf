// The high-level Embedder on the real all-MiniLM-L6-v2 (weights streamed from nginx), in headless
// Chromium through the built package: embeddings on the CPU backend and on WebGPU (SwiftShader)
// compared with the NumPy float64 reference (tests/fixtures/minilm/reference.json: cosine >=
// 0.9999 and max abs difference <= 1e-3 per sentence), the reference's retrieval ranking
// reproduced on both, progress reported, errors and aborts reported with ExecuTorch codes; and
// `bertProgram` + `Delegate.initWithParameters` giving the Embedder's own bits. The Embedder's
// queueing, options, aborts and fallbacks are in embedder-api.test.mjs.
import assert from 'node:assert/strict';
import { readFile } from 'node:fs/promises';
import path from 'node:path';
import { test } from 'node:test';
import { useBrowserHarness } from './support/fixture.mjs';
import { REPO_ROOT } from './support/server.mjs';

const MODEL_URL = '/.cache/models/all-MiniLM-L6-v2/';
const reference = JSON.parse(await readFile(path.join(REPO_ROOT, 'tests/fixtures/minilm/reference.json'), 'utf8'));
const refBytes = Buffer.from(reference.embeddings_f32_le_base64, 'base64');
const refRows = reference.sentences.map((_, i) => new Float32Array(refBytes.buffer, refBytes.byteOffset + i * reference.dim * 4, reference.dim));
const harness = useBrowserHarness();
// SwiftShader runs WebGPU on the CPU: loading and a few short sentences take tens of seconds.
const SLOW = { timeout: 240_000 };

function compare(rows, indices) {
  let minCos = 1;
  let maxAbs = 0;
  indices.forEach((sentence, k) => {
    const got = rows[k];
    const want = refRows[sentence];
    assert.equal(got.length, reference.dim);
    let dot = 0; let ng = 0; let nw = 0;
    for (let i = 0; i < got.length; i++) {
      dot += got[i] * want[i]; ng += got[i] * got[i]; nw += want[i] * want[i];
      maxAbs = Math.max(maxAbs, Math.abs(got[i] - want[i]));
    }
    minCos = Math.min(minCos, dot / Math.sqrt(ng * nw));
  });
  return { minCos, maxAbs };
}

async function embedIn(t, backend, indices, { profiling = false } = {}) {
  const page = await harness.openHarnessPage(t);
  return page.evaluate(async ({ url, backend, texts, profiling }) => {
    const progress = [];
    const embedder = await wd.Embedder.load(url, { backend, onProgress: (e) => progress.push(e) });
    const profileBefore = embedder.lastProfile();
    if (profiling) wd.setOption('webgpu', [{ key: 'profiling', value: true }]);
    const rows = await embedder.embed(texts);
    const result = {
      backend: embedder.backend,
      fallbackReason: embedder.fallbackReason,
      dim: embedder.dim,
      maxTokens: embedder.maxTokens,
      lastBatchMillis: embedder.lastBatchMillis,
      stats: embedder.loadStats(),
      info: embedder.backendInfo(),
      progressEvents: progress.length,
      lastProgress: progress.at(-1),
      rows: rows.map((r) => Array.from(r)),
      profileBefore,
      profile: embedder.lastProfile(),
      programStats: embedder.programStats(),
    };
    embedder.destroy();
    result.afterDestroy = await capture(() => embedder.embed(['x']));
    result.statsAfterDestroy = embedder.programStats();
    return result;
  }, { url: MODEL_URL, backend, texts: indices.map((i) => reference.sentences[i]), profiling });
}

function assertRanking(rowOf) {
  const score = (a, b) => rowOf(a).reduce((s, v, i) => s + v * rowOf(b)[i], 0);
  reference.retrieval.queries.forEach((q, k) => {
    const ranked = [...reference.retrieval.corpus].sort((a, b) => score(q, b) - score(q, a));
    assert.deepEqual(ranked, reference.retrieval.ranking[k], `ranking for ${JSON.stringify(reference.sentences[q])}`);
  });
}

test('CPU backend: every reference sentence matches and the ranking is the same', SLOW, async (t) => {
  const all = reference.sentences.map((_, i) => i);
  const r = await embedIn(t, 'cpu', all);
  assert.equal(r.backend, 'cpu');
  assert.equal(r.dim, 384);
  assert.equal(r.maxTokens, 256, 'from sentence_bert_config.json');
  const { minCos, maxAbs } = compare(r.rows.map((x) => Float32Array.from(x)), all);
  t.diagnostic(`cpu: min cosine ${minCos.toFixed(7)}, max abs ${maxAbs.toExponential(2)}`);
  assert.ok(minCos >= 0.9999, `min cosine ${minCos}`);
  assert.ok(maxAbs <= 1e-3, `max abs ${maxAbs}`);
  assert.equal(r.fallbackReason, undefined);
  assertRanking((sentence) => r.rows[sentence]);
  assert.ok(r.progressEvents > 0, 'progress was reported');
  assert.equal(r.lastProgress.bytesDone, r.lastProgress.bytesTotal);
  assert.ok(r.stats.requests >= 1 && r.stats.requests <= 8, `requests ${r.stats.requests}`);
  assert.equal(r.afterDestroy.ok, false);
  assert.equal(r.afterDestroy.error.code, 'InvalidState');
  assert.equal(r.programStats, null, 'program stats are the WebGPU backend\'s');
  assert.equal(r.profile, null, 'profiles are the WebGPU backend\'s');
});

test('WebGPU matches the reference and ranks the same', SLOW, async (t) => {
  // The retrieval set (short sentences: SwiftShader is slow), plus the shortest sentence and a
  // longer one for the padding and the mask.
  const { queries, corpus } = reference.retrieval;
  const picks = [...new Set([...queries, ...corpus, 9, 24])];
  const r = await embedIn(t, 'webgpu', picks, { profiling: true });
  assert.equal(r.backend, 'webgpu');
  assert.equal(r.fallbackReason, undefined, 'the backend asked for was used: nothing to explain');
  const { minCos, maxAbs } = compare(r.rows.map((x) => Float32Array.from(x)), picks);
  t.diagnostic(`webgpu over ${picks.length} sentences: min cosine ${minCos.toFixed(7)}, max abs ${maxAbs.toExponential(2)}`);
  assert.ok(minCos >= 0.9999, `min cosine ${minCos}`);
  assert.ok(maxAbs <= 1e-3, `max abs ${maxAbs}`);
  assertRanking((sentence) => r.rows[picks.indexOf(sentence)]);
  const vendor = r.info.find((o) => o.key === 'adapter.vendor');
  assert.ok(vendor && vendor.value.length > 0, `backendInfo reports the adapter: ${JSON.stringify(r.info)}`);
  assert.ok(r.lastBatchMillis > 0);

  // Program stats: every weight of the model is on the GPU once, activations share an arena.
  const s = r.programStats;
  t.diagnostic(`program stats: ${JSON.stringify(s)}`);
  t.diagnostic(`parameter bytes on the GPU ${s.paramBytes}, bytes the load needed ${r.stats.bytesNeeded}`);
  assert.ok(s.paramBytes > 80e6 && s.paramBytes < 95e6, `parameter bytes ${s.paramBytes}`);
  assert.equal(s.paramsResident, true);
  assert.equal(s.paramLoads, 1);
  assert.ok(s.arenaBytes > 0 && s.arenaBytes < s.arenaBytesWithoutReuse, `arena ${s.arenaBytes} of ${s.arenaBytesWithoutReuse}`);
  assert.ok(s.kernels > 5 && s.dispatches > s.kernels);
  assert.equal(r.statsAfterDestroy, null);

  // Profile of the last batch: one entry per op of the program, in order, with the encoder's ops.
  assert.equal(r.profileBefore, null, 'no profile before a profiled execute');
  const p = r.profile;
  assert.ok(p, 'profiling on gives a profile');
  assert.ok(p.ops.length > 50, `${p.ops.length} ops`);
  p.ops.forEach((op, i) => assert.equal(op.opIndex, i));
  const names = new Set(p.ops.map((op) => op.name));
  for (const name of ['gather', 'matmul', 'layer_norm', 'softmax', 'gelu', 'mean_pool', 'l2_normalize']) {
    assert.ok(names.has(name), `${name} in ${[...names]}`);
  }
  assert.equal(p.ops.reduce((n, op) => n + op.dispatches, 0), s.dispatches, 'the profile covers every dispatch of the plan');
  if (p.timestamps) {
    const sum = p.ops.reduce((ms, op) => ms + (op.gpuMs ?? 0), 0);
    assert.ok(Math.abs(sum - p.totalGpuMs) < 1e-6 * Math.max(1, sum));
    assert.ok(p.totalGpuMs > 0);
    const byName = {};
    for (const op of p.ops) byName[op.name] = (byName[op.name] ?? 0) + (op.gpuMs ?? 0);
    t.diagnostic(`GPU ms by op: ${JSON.stringify(byName)}`);
  } else {
    assert.ok(p.ops.every((op) => op.gpuMs === null), 'no times without timestamps');
    t.diagnostic('the adapter has no timestamp-query: the profile lists ops without times');
  }
});

test('a missing model directory and an aborted load reject with codes', SLOW, async (t) => {
  const page = await harness.openHarnessPage(t);
  const r = await page.evaluate(async (url) => {
    const missing = await capture(() => wd.Embedder.load('/no/such/model/', { backend: 'cpu' }));
    const controller = new AbortController();
    controller.abort();
    const aborted = await capture(() => wd.Embedder.load(url, { backend: 'cpu', signal: controller.signal }));
    const badBackend = await capture(() => wd.Embedder.load(url, { backend: 'nope' }));
    return { missing, aborted, badBackend };
  }, MODEL_URL);
  assert.equal(r.missing.error.code, 'AccessFailed');
  assert.match(r.missing.error.message, /config\.json/);
  assert.equal(r.aborted.error.code, 'InvalidState');
  assert.equal(r.badBackend.error.code, 'NotFound');
});

test('bertProgram builds, from a provider the page made, the program the Embedder runs', SLOW, async (t) => {
  const page = await harness.openHarnessPage(t);
  const sentences = [0, 24].map((i) => reference.sentences[i]);
  const r = await page.evaluate(async ({ url, sentences }) => {
    const provider = new wd.HttpParameterProvider();
    await provider.addScope('minilm', `${url}model.safetensors`);
    const config = await (await fetch(`${url}config.json`)).text();
    const blob = wd.bertProgram(provider, 'minilm', config);
    const delegate = await wd.Delegate.initWithParameters('cpu', blob, provider, { methodName: 'sentence_embedding' });
    const embedder = await wd.Embedder.load(url, { backend: 'cpu' });
    const tokens = embedder.tokenize(sentences);
    const shape = [tokens.batch, tokens.seq];
    const out = await delegate.execute([
      { tag: 'Tensor', dtype: 'int64', shape, data: tokens.inputIds },
      { tag: 'Tensor', dtype: 'int64', shape, data: tokens.attentionMask },
      { tag: 'None' },
    ]);
    const rows = await embedder.embed(sentences);
    const bigger = JSON.stringify({ ...JSON.parse(config), hidden_size: 768 });
    // Any provider kind serves: a list whose member holds the scope builds the same blob.
    const list = new wd.ParameterProviderList([new wd.MemoryParameterProvider(), provider]);
    const viaList = wd.bertProgram(list, 'minilm', config);
    const errors = {
      notProvider: (await capture(() => wd.bertProgram({ addScope() {} }, 'minilm', config))).error,
      unknownScope: (await capture(() => wd.bertProgram(provider, 'nope', config))).error,
      notBert: (await capture(() => wd.bertProgram(provider, 'minilm', '{"model_type": "gpt2"}'))).error,
      notJson: (await capture(() => wd.bertProgram(provider, 'minilm', 'config'))).error,
      mismatch: (await capture(() => wd.bertProgram(provider, 'minilm', bigger))).error,
    };
    delegate.destroy();
    embedder.destroy();
    return {
      sameViaList: viaList.length === blob.length && viaList.every((v, i) => v === blob[i]),
      blobType: blob.constructor.name,
      blobBytes: blob.length,
      batch: tokens.batch,
      seq: tokens.seq,
      ids: Array.from(tokens.inputIds, Number),
      mask: Array.from(tokens.attentionMask, Number),
      output: { dtype: out[2].dtype, shape: out[2].shape, data: Array.from(out[2].data) },
      embedded: rows.map((row) => Array.from(row)),
      errors,
    };
  }, { url: MODEL_URL, sentences });
  assert.equal(r.blobType, 'Uint8Array');
  t.diagnostic(`bertProgram blob: ${r.blobBytes} bytes`);
  // The tokenizer gives the reference's token ids, padded to the longer sentence.
  assert.equal(r.batch, 2);
  const want = [0, 24].map((i) => reference.token_ids[i]);
  assert.equal(r.seq, Math.max(...want.map((ids) => ids.length)));
  want.forEach((ids, row) => {
    const got = r.ids.slice(row * r.seq, (row + 1) * r.seq);
    const mask = r.mask.slice(row * r.seq, (row + 1) * r.seq);
    assert.deepEqual(got.slice(0, ids.length), ids, `token ids of sentence ${row}`);
    assert.deepEqual(mask, ids.map(() => 1).concat(Array(r.seq - ids.length).fill(0)), `mask of sentence ${row}`);
  });
  // Same program, same backend, same inputs: the same bits as the Embedder.
  assert.equal(r.output.dtype, 'float32');
  assert.deepEqual(r.output.shape, [2, 384]);
  assert.deepEqual(r.output.data, r.embedded.flat());
  const { minCos } = compare([r.output.data.slice(0, 384), r.output.data.slice(384)], [0, 24]);
  assert.ok(minCos >= 0.9999, `min cosine to the reference ${minCos}`);
  assert.equal(r.sameViaList, true, 'a provider list serving the scope builds the same program');
  assert.equal(r.errors.notProvider.code, 'InvalidArgument');
  assert.equal(r.errors.unknownScope.code, 'NotFound');
  assert.match(r.errors.unknownScope.message, /scope "nope"/);
  assert.equal(r.errors.notBert.code, 'InvalidArgument');
  assert.equal(r.errors.notJson.code, 'InvalidArgument');
  assert.equal(r.errors.mismatch.code, 'InvalidExternalData');
  assert.match(r.errors.mismatch.message, /embeddings\./);
});
