// ExecuTorch programs through the built package's `Module`, in headless Chromium against nginx:
// the `.pte` fetched whole, its `.ptd` indexed with one small read and streamed by Range into
// the backend's buffers. The fixtures (tests/fixtures/pte) were exported by the webdelegate
// partitioner with executorch 1.5.1; their expected outputs come from ExecuTorch's own runtime
// (portable kernels, non-delegated export), eager PyTorch and, for MiniLM, sentence-transformers.
// Tolerances: 1e-4 absolute (block, tiny decoder logits), equal greedy tokens, cosine >= 0.9999
// (MiniLM). WebGPU here is SwiftShader (WebGPU emulated on the CPU).
import assert from 'node:assert/strict';
import { readFile } from 'node:fs/promises';
import path from 'node:path';
import { test } from 'node:test';
import { expectOk, expectWdError } from './support/expect.mjs';
import { useBrowserHarness } from './support/fixture.mjs';
import { REPO_ROOT } from './support/server.mjs';

const FIXTURES = '/tests/fixtures/pte/';
const fixture = async (name) => JSON.parse(await readFile(path.join(REPO_ROOT, 'tests/fixtures/pte', name), 'utf8'));
const block = await fixture('block.json');
const decoder = await fixture('tiny_decoder.json');
const minilm = await fixture('minilm.json');
const harness = useBrowserHarness();
const SLOW = { timeout: 240_000 };

function maxAbsDiff(got, want) {
  assert.equal(got.length, want.length);
  return got.reduce((m, v, i) => Math.max(m, Math.abs(v - want[i])), 0);
}

function cosine(a, b) {
  let dot = 0; let na = 0; let nb = 0;
  for (let i = 0; i < a.length; i++) { dot += a[i] * b[i]; na += a[i] * a[i]; nb += b[i] * b[i]; }
  return dot / Math.sqrt(na * nb);
}

for (const backend of ['cpu', 'webgpu']) {
  test(`${backend}: the block's .pte runs with its .ptd streamed by Range and matches ExecuTorch`, SLOW, async (t) => {
    const page = await harness.openHarnessPage(t);
    const r = await page.evaluate(async ({ base, backend, input }) => {
      await wd.ready();
      const progress = [];
      const module = await wd.Module.load(`${base}block.pte`, { data: `${base}block.ptd`, backend, onProgress: (e) => progress.push(e) });
      const meta = module.methodMeta('forward');
      const x = { shape: input.shape, data: new Float32Array(input.data) };
      const first = await module.forward([x]);
      const second = await module.execute('forward', [{ tag: 'Tensor', dtype: 'float32', ...x }]);
      const result = {
        names: module.methodNames,
        backend: module.backend,
        meta,
        stats: module.loadStats(),
        progress: progress.length,
        first: { dtype: first[0].dtype, shape: first[0].shape, data: Array.from(first[0].data) },
        second: Array.from(second[0].data),
        unknownMethod: await capture(() => module.execute('backward', [x])),
        wrongShape: await capture(() => module.forward([{ shape: [1, 4, 16], data: new Float32Array(64) }])),
        wrongDtype: await capture(() => module.forward([{ shape: input.shape, data: new Float64Array(80) }])),
      };
      module.destroy();
      result.afterDestroy = await capture(() => module.forward([x]));
      return result;
    }, { base: FIXTURES, backend, input: block.inputs[0] });
    assert.deepEqual(r.names, ['forward']);
    assert.equal(r.backend, backend);
    assert.deepEqual(r.meta.inputs, [{ tag: 'Tensor', dtype: 'float32', shape: [1, 5, 16], dynamism: 'static', scalarType: 6 }]);
    assert.deepEqual(r.meta.delegates, [{ id: 'WebDelegateBackend', backend }]);
    assert.equal(r.meta.instructions, 1);
    assert.equal(r.first.dtype, 'float32');
    assert.deepEqual(r.first.shape, [1, 5, 16]);
    for (const oracle of ['executorch_portable', 'eager']) {
      const diff = maxAbsDiff(r.first.data, block.expected[oracle][0].data);
      assert.ok(diff <= 1e-4, `${oracle}: max abs diff ${diff}`);
    }
    assert.deepEqual(r.second, r.first.data, 'a second run gives the same output');
    assert.ok(r.stats.bytesNeeded > 0 && r.stats.bytesReceived >= r.stats.bytesNeeded, JSON.stringify(r.stats));
    assert.ok(r.progress > 0, 'progress reported');
    expectWdError(r.unknownMethod, 'InvalidArgument', 'an unknown method');
    expectWdError(r.wrongShape, 'InvalidArgument', 'a wrong input shape');
    expectWdError(r.wrongDtype, 'InvalidArgument', 'a wrong input dtype');
    expectWdError(r.afterDestroy, 'InvalidState', 'forward after destroy');
  });

  test(`${backend}: the tiny decoder prefills and decodes from one .pte, its KV cache kept as delegate state`, SLOW, async (t) => {
    const page = await harness.openHarnessPage(t);
    const r = await page.evaluate(async ({ base, backend, calls }) => {
      await wd.ready();
      const module = await wd.Module.load(`${base}tiny_decoder.pte`, { data: `${base}tiny_decoder.ptd`, backend });
      const meta = module.methodMeta('forward');
      const sequences = [];
      for (let s = 0; s < 2; s++) {
        if (s > 0) await module.resetState();
        const steps = [];
        for (const call of calls) {
          const i64 = (xs) => ({ shape: [xs.length], data: BigInt64Array.from(xs.map(BigInt)) });
          const [logits] = await module.forward([i64(call.tokens), i64(call.input_pos)]);
          const vocab = logits.shape[1];
          const last = logits.data.subarray(logits.data.length - vocab);
          let best = 0;
          for (let v = 1; v < vocab; v++) if (last[v] > last[best]) best = v;
          steps.push({ shape: logits.shape, data: Array.from(logits.data), token: best });
        }
        sequences.push(steps);
      }
      module.destroy();
      return { meta, sequences };
    }, { base: FIXTURES, backend, calls: decoder.calls });
    assert.deepEqual(r.meta.inputs.map((i) => [i.dtype, i.dynamism]), [['int64', 'dynamic_bound'], ['int64', 'dynamic_bound']]);
    for (const steps of r.sequences) {
      assert.deepEqual(steps.map((s) => s.token), decoder.greedy_tokens.executorch_portable);
      steps.forEach((step, k) => {
        const want = decoder.calls[k].expected.executorch_portable;
        assert.deepEqual(step.shape, want.shape, `step ${k}: the output takes the run's length`);
        const diff = maxAbsDiff(step.data, want.data);
        assert.ok(diff <= 1e-4, `step ${k}: max abs diff ${diff}`);
      });
    }
  });

  test(`${backend}: all-MiniLM-L6-v2 from its .pte matches sentence-transformers`, SLOW, async (t) => {
    const page = await harness.openHarnessPage(t);
    const cases = minilm.cases.slice(0, backend === 'webgpu' ? 2 : undefined);
    const r = await page.evaluate(async ({ backend, cases }) => {
      await wd.ready();
      const before = wd.wasmMemoryBytes();
      const module = await wd.Module.load('/tests/fixtures/pte/minilm.pte', { data: '/.cache/pte/minilm.ptd', backend });
      const afterLoad = wd.wasmMemoryBytes();
      const rows = [];
      for (const c of cases) {
        const tensor = (v) => ({ shape: v.shape, data: BigInt64Array.from(v.data.map(BigInt)) });
        const [out] = await module.forward([tensor(c.input_ids), tensor(c.attention_mask)]);
        rows.push(Array.from(out.data));
      }
      const stats = module.loadStats();
      module.destroy();
      return { rows, stats, growthMb: (afterLoad - before) / 2 ** 20, backend: module.backend };
    }, { backend, cases });
    assert.equal(r.backend, backend);
    cases.forEach((c, i) => {
      const cos = cosine(r.rows[i], c.expected.sentence_transformers.data);
      assert.ok(cos >= 0.9999, `${JSON.stringify(c.sentence)}: cosine ${cos}`);
    });
    assert.ok(r.stats.bytesReceived >= 90_000_000, `the weights came over the wire: ${JSON.stringify(r.stats)}`);
    if (backend === 'webgpu') {
      // The 90 MB of weights go from each fetched chunk into GPU buffers, never into wasm memory.
      assert.ok(r.growthMb < 32, `wasm memory grew ${r.growthMb.toFixed(1)} MiB while 90 MB of weights loaded`);
    }
  });
}

test('a JavaScript backend chosen by name receives the delegate: blob, compile specs and named data', SLOW, async (t) => {
  const page = await harness.openHarnessPage(t);
  const r = await page.evaluate(async ({ base }) => {
    await wd.ready();
    const seen = {};
    wd.registerBackend('pte-probe', stubBackend({
      init(processed, compileSpecs, context) {
        seen.magic = new TextDecoder().decode(processed.subarray(0, 4));
        seen.specs = compileSpecs.map((s) => s.key).sort();
        seen.methodName = context.methodName;
        const map = context.namedDataMap;
        seen.numKeys = map.numKeys();
        seen.layout = map.tensorLayout('query.weight');
        seen.dataPromise = map.data('query.bias');
        return { calls: 0 };
      },
      execute(handle, args) {
        handle.calls += 1;
        seen.args = args.map((a) => a.tag);
        args[1] = { tag: 'Tensor', dtype: 'float32', shape: args[0].shape, data: args[0].data.map((v) => v * 2) };
      },
    }));
    const module = await wd.Module.load(`${base}block.pte`, { data: `${base}block.ptd`, backend: 'pte-probe' });
    const input = new Float32Array(80).map((_, i) => i);
    const [out] = await module.forward([{ shape: [1, 5, 16], data: input }]);
    const meta = module.methodMeta('forward');
    module.destroy();
    const bias = await seen.dataPromise;
    delete seen.dataPromise;
    return { seen, out: Array.from(out.data.slice(0, 4)), meta, biasBytes: bias.byteLength ?? bias.length };
  }, { base: FIXTURES });
  assert.equal(r.seen.magic, 'WDPG');
  assert.deepEqual(r.seen.specs, ['alignment', 'external_tag']);
  assert.equal(r.seen.methodName, 'forward');
  assert.equal(r.seen.numKeys, block.named_data_keys.length, 'the named data map lists the .ptd keys');
  assert.deepEqual([r.seen.layout.sizes, r.seen.layout.scalarType], [[16, 16], 'Float']);
  assert.equal(r.biasBytes, 16 * 4, 'named data reads its bytes from the .ptd');
  assert.deepEqual(r.seen.args, ['Tensor', 'None']);
  assert.deepEqual(r.out, [0, 2, 4, 6]);
  assert.deepEqual(r.meta.delegates, [{ id: 'WebDelegateBackend', backend: 'pte-probe' }]);
});

test('bad programs and files fail the load with coded errors', SLOW, async (t) => {
  const page = await harness.openHarnessPage(t);
  const r = await page.evaluate(async ({ base }) => {
    await wd.ready();
    const load = (url, options) => capture(() => wd.Module.load(url, options));
    const controller = new AbortController();
    controller.abort();
    return {
      missingFile: await load(`${base}no-such.pte`),
      notAProgram: await load(`${base}block.ptd`),
      jsonAsProgram: await load(`${base}block.json`),
      noData: await load(`${base}block.pte`, { backend: 'cpu' }),
      wrongData: await load(`${base}block.pte`, { data: `${base}tiny_decoder.ptd`, backend: 'cpu' }),
      missingData: await load(`${base}block.pte`, { data: `${base}no-such.ptd`, backend: 'cpu' }),
      unknownBackend: await load(`${base}block.pte`, { data: `${base}block.ptd`, backend: 'nobody' }),
      emptyBackend: await load(`${base}block.pte`, { backend: '' }),
      aborted: await load(`${base}block.pte`, { data: `${base}block.ptd`, signal: controller.signal }),
      stillWorks: await capture(async () => {
        const m = await wd.Module.load(`${base}block.pte`, { data: `${base}block.ptd`, backend: 'cpu' });
        m.destroy();
        return m.methodNames;
      }),
    };
  }, { base: FIXTURES });
  expectWdError(r.missingFile, 'AccessFailed', 'a .pte that is not there');
  expectWdError(r.notAProgram, 'InvalidProgram', 'a .ptd given as the program');
  expectWdError(r.jsonAsProgram, 'InvalidProgram', 'a JSON file given as the program');
  const noData = expectWdError(r.noData, 'NotFound', 'weights without a .ptd');
  assert.match(noData.message, /\.ptd/);
  assert.ok(!r.wrongData.ok && ['NotFound', 'InvalidExternalData'].includes(r.wrongData.error.code), JSON.stringify(r.wrongData));
  assert.equal(r.missingData.ok, false, 'a .ptd that is not there');
  expectWdError(r.unknownBackend, 'NotFound', 'a backend nobody registered');
  expectWdError(r.emptyBackend, 'InvalidArgument', 'an empty backend name');
  expectWdError(r.aborted, 'InvalidState', 'an aborted load');
  assert.deepEqual(expectOk(r.stillWorks, 'a load after the failures'), ['forward']);
});
