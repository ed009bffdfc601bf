// The high-level Generator on the real Gemma 3 270M Q4_K_M GGUF (streamed by Range from nginx),
// in headless Chromium through the built package, on the CPU backend. Oracles:
// - tokenization: llama.cpp's own ids (tests/fixtures/gemma/tokenize.json, written by
//   scripts/make-gemma-llamacpp-fixtures.py with llama-cpp-python);
// - generation: the float64 NumPy reference's greedy continuation
//   (tests/fixtures/gemma/greedy_reference.json, scripts/make-greedy-reference.py, with every
//   step's top-1 margin, so a mismatch at a near-tie would be visible as such).
// The API's behaviour (streaming, stop strings, prefix reuse, abort, seeds, errors) is checked
// against the same run's own greedy tokens.
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { mkdir, readFile, truncate, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { test } from 'node:test';
import { useBrowserHarness } from './support/fixture.mjs';
import { REPO_ROOT } from './support/server.mjs';

const MODEL_URL = '/.cache/models/gemma-3-270m/gemma-3-270m-q4_k_m.gguf';
const fixture = async (name) => JSON.parse(await readFile(path.join(REPO_ROOT, 'tests/fixtures/gemma', name), 'utf8'));
const tokenizeFixture = await fixture('tokenize.json');
const greedy = await fixture('greedy_reference.json');
const harness = useBrowserHarness();
const SLOW = { timeout: 600_000 };

test('CPU: load, tokenize like llama.cpp, greedy text equals the float64 reference', SLOW, async (t) => {
  const page = await harness.openHarnessPage(t);
  const cases = tokenizeFixture.cases.filter((c) => c.add_bos === false && c.parse_special === true).slice(0, 80);
  const r = await page.evaluate(async ({ url, cases, prompts }) => {
    const progress = [];
    const t0 = performance.now();
    const gen = await wd.Generator.load(url, { backend: 'cpu', contextLength: 256, onProgress: (e) => progress.push(e) });
    const loadMs = performance.now() - t0;
    const tokenized = cases.map((c) => Array.from(gen.tokenize(c.text, { addSpecial: false, parseSpecial: true })));
    const runs = [];
    for (const p of prompts) {
      const pieces = [];
      for await (const piece of gen.generate(p.text, { maxNewTokens: p.tokens.length })) pieces.push(piece);
      runs.push({ pieces, stats: gen.stats() });
    }
    const memoryMb = wd.wasmMemoryBytes ? wd.wasmMemoryBytes() / 2 ** 20 : null;
    return { loadMs, tokenized, runs, backend: gen.backend, progress: progress.length, lastProgress: progress.at(-1), memoryMb, promptIds: prompts.map((p) => Array.from(gen.tokenize(p.text))) };
  }, { url: MODEL_URL, cases, prompts: greedy.prompts });

  t.diagnostic(`load ${r.loadMs.toFixed(0)} ms on ${r.backend}, wasm memory ${r.memoryMb?.toFixed(1)} MiB`);
  assert.equal(r.backend, 'cpu');
  cases.forEach((c, i) => assert.deepEqual(r.tokenized[i], c.ids, `tokenize ${JSON.stringify(c.text)}`));
  assert.ok(r.progress > 0, 'progress was reported');
  assert.equal(r.lastProgress.bytesDone, r.lastProgress.bytesTotal);

  greedy.prompts.forEach((p, k) => {
    assert.deepEqual(r.promptIds[k], p.ids, `prompt ids of ${JSON.stringify(p.text)}`);
    const run = r.runs[k];
    const tokens = run.pieces.map((x) => x.token);
    assert.deepEqual(tokens, p.tokens, `greedy tokens of ${JSON.stringify(p.text)} (reference margins ${p.margins.map((m) => m.toFixed(3))})`);
    assert.equal(run.pieces.map((x) => x.text).join(''), p.continuation);
    assert.ok(run.pieces.every((x) => x.ms > 0));
    const s = run.stats;
    t.diagnostic(`${JSON.stringify(p.text)}: prefill ${s.prefillMs.toFixed(0)} ms for ${s.promptTokens} tokens, decode ${s.decodeMsPerToken.toFixed(1)} ms/token`);
    assert.equal(s.promptTokens, p.ids.length);
    assert.equal(s.generatedTokens, p.tokens.length);
    assert.equal(s.finishReason, 'length');
    assert.equal(s.architecture, 'gemma3');
    assert.equal(s.vocabSize, 262144);
    assert.equal(s.contextLength, 256);
  });
});

test('WebGPU (SwiftShader here): greedy tokens equal the float64 reference through a lowMemory and a device loss mid-generation', SLOW, async (t) => {
  // Oracles: the float64 reference's greedy tokens; the bytes nginx logged (its access log)
  // against the tensor sizes the `gguf` package reads from the same file.
  const page = await harness.openHarnessPage(t);
  const p = greedy.prompts[0];
  const n = Math.min(6, p.tokens.length);
  const modelPath = path.join(REPO_ROOT, MODEL_URL);
  const tensorBytes = Number(execFileSync(path.join(REPO_ROOT, '.cache/venv-ref/bin/python'), ['-c',
    'import sys, gguf; print(sum(int(t.n_bytes) for t in gguf.GGUFReader(sys.argv[1]).tensors))', modelPath]).toString().trim());
  const log = path.join(harness.server.dir, 'access.log');
  await page.page.exposeFunction('modelBytesServed', async () => {
    let sum = 0;
    for (const line of (await readFile(log, 'utf8')).split('\n')) {
      const m = line.match(/"GET (\S+) HTTP\/[\d.]+" (\d{3}) (\d+)/);
      if (m && m[1] === MODEL_URL && m[2] === '206') sum += Number(m[3]);
    }
    return sum;
  });
  const r = await page.evaluate(async ({ url, text, n }) => {
    const gen = await wd.Generator.load(url, { backend: 'webgpu', contextLength: 64 });
    const memoryMb = wd.wasmMemoryBytes() / 2 ** 20;
    const servedAtLoad = await window.modelBytesServed();
    const pieces = [];
    const marks = {};
    for await (const piece of gen.generate(text, { maxNewTokens: n })) {
      pieces.push(piece);
      if (pieces.length === 2) {
        // lowMemory: the parameters leave the GPU; the next step fetches them again by Range.
        marks.beforeLow = await window.modelBytesServed();
        marks.low = wd.lifecycleNotify('lowMemory').released;
      }
      if (pieces.length === 3) marks.afterLow = await window.modelBytesServed();
      // A device loss: the KV cache is gone; the generator rebuilds it and goes on.
      if (pieces.length === 4) marks.destroyed = wd.destroyWebGpuDevice();
    }
    marks.afterLoss = await window.modelBytesServed();
    return { pieces, stats: gen.stats(), memoryMb, programStats: gen.programStats(), servedAtLoad, marks };
  }, { url: MODEL_URL, text: p.text, n });
  assert.equal(r.stats.backend, 'webgpu');
  assert.deepEqual(r.pieces.map((x) => x.token), p.tokens.slice(0, n), `reference margins ${p.margins.slice(0, n)}`);
  t.diagnostic(`webgpu: wasm memory ${r.memoryMb.toFixed(1)} MiB once ready, prefill ${r.stats.prefillMs.toFixed(0)} ms, decode ${r.stats.decodeMsPerToken.toFixed(0)} ms/token (SwiftShader)`);
  t.diagnostic(`served: ${r.servedAtLoad} bytes at load (tensors ${tensorBytes}); lowMemory released ${JSON.stringify(r.marks.low)}; refetched ${r.marks.afterLow - r.marks.beforeLow}; after the device loss ${r.marks.afterLoss - r.marks.afterLow}`);
  assert.ok(r.programStats.states > 0 && r.programStats.stateBytes > 0, JSON.stringify(r.programStats));
  // gpuPrecision 'auto' (the default) never picks f16 on a fallback (CPU-emulated) adapter.
  assert.equal(r.programStats.precision, 'f32', JSON.stringify(r.programStats));
  assert.equal(r.programStats.kvCacheF16, false);
  assert.ok(r.servedAtLoad >= tensorBytes, 'the load fetched every tensor');
  assert.equal(r.marks.beforeLow, r.servedAtLoad, 'nothing fetched between the load and the lowMemory');
  assert.ok(r.marks.low.gpuBytes >= tensorBytes, `the parameters left the GPU: ${JSON.stringify(r.marks.low)}`);
  assert.equal(r.marks.afterLow - r.marks.beforeLow, tensorBytes, 'after lowMemory: exactly the tensors again, not the header');
  assert.equal(r.marks.destroyed, true);
  assert.equal(r.marks.afterLoss - r.marks.afterLow, tensorBytes, 'after the device loss: the tensors once more');
  assert.equal(r.stats.rebuilds, 1, 'the generator said it rebuilt its cache');
});

test('CPU: evaluate (teacher forcing) gives the float64 reference\'s top-1 and logits (cosine >= 0.9999)', SLOW, async (t) => {
  // Oracle: .cache/reference/gemma-3-270m (scripts/gemma_reference.py, written by npm run setup):
  // the top-1 at every position of the shortest prompt and its full logits where stored.
  const page = await harness.openHarnessPage(t);
  const r = await page.evaluate(async ({ url, referenceUrl }) => {
    const reference = await (await fetch(referenceUrl + 'reference.json')).json();
    const prompt = reference.prompts.reduce((a, b) => (b.ids.length < a.ids.length ? b : a));
    const stored = new Float32Array(await (await fetch(referenceUrl + prompt.logits_file)).arrayBuffer());
    const gen = await wd.Generator.load(url, { backend: 'cpu', contextLength: 64, logits: true });
    const ev = await gen.evaluate(prompt.ids, { logitPositions: prompt.logit_positions });
    const vocab = reference.n_vocab;
    const cosines = prompt.logit_positions.map((_, row) => rowCosine(ev.logits, stored, row, vocab));
    const out = { name: prompt.name, tokens: Array.from(ev.tokens), top1: prompt.top1, cosines, logitsLength: ev.logits.length, rows: prompt.logit_positions.length, vocab };
    // The cache now holds the prompt: generating from it reuses all but its last token.
    out.text = await gen.generateText(gen.detokenize(prompt.ids.slice(1)), { maxNewTokens: 2 });
    out.reused = gen.stats().reusedTokens;
    out.promptLength = prompt.ids.length;
    out.noPositions = (await gen.evaluate(prompt.ids)).logits.length;
    // Each bad call is refused, and the generator still takes the next one.
    out.unordered = await capture(() => gen.evaluate(prompt.ids, { logitPositions: [1, 0] }));
    out.outside = await capture(() => gen.evaluate(prompt.ids, { logitPositions: [prompt.ids.length] }));
    out.notArray = await capture(() => gen.evaluate(prompt.ids, { logitPositions: 3 }));
    out.badId = await capture(() => gen.evaluate([vocab]));
    out.empty = await capture(() => gen.evaluate([]));
    out.tooMany = await capture(() => gen.evaluate(new Array(65).fill(2)));
    out.afterErrors = Array.from((await gen.evaluate(prompt.ids)).tokens);
    gen.destroy();
    const plain = await wd.Generator.load(url, { backend: 'cpu', contextLength: 16 });
    out.withoutLogits = await capture(() => plain.evaluate(prompt.ids, { logitPositions: [0] }));
    out.tokensWithoutLogits = Array.from((await plain.evaluate(prompt.ids)).tokens);
    plain.destroy();
    return out;
  }, { url: MODEL_URL, referenceUrl: '/.cache/reference/gemma-3-270m/' });

  t.diagnostic(`${r.name}: cosines ${r.cosines.map((c) => c.toFixed(7))}`);
  assert.deepEqual(r.tokens, r.top1, 'top-1 at every position equals the reference');
  assert.equal(r.logitsLength, r.rows * r.vocab);
  r.cosines.forEach((c, i) => assert.ok(c >= 0.9999, `cosine ${c} at row ${i}`));
  assert.equal(r.reused, r.promptLength - 1, 'the evaluated prompt stays cached');
  assert.equal(r.noPositions, 0);
  for (const key of ['unordered', 'outside', 'notArray', 'badId', 'empty', 'tooMany']) {
    assert.equal(r[key].ok, false, key);
    assert.equal(r[key].error.code, 'InvalidArgument', `${key}: ${JSON.stringify(r[key].error)}`);
  }
  assert.deepEqual(r.afterErrors, r.top1, 'the generator works after refused calls');
  assert.equal(r.withoutLogits.error.code, 'NotSupported');
  assert.match(r.withoutLogits.error.message, /logits: true/);
  assert.deepEqual(r.tokensWithoutLogits, r.top1, 'greedy tokens need no logits output');
});

test('CPU: stop strings, prefix reuse, seeds, abort, reset and bad input', SLOW, async (t) => {
  const page = await harness.openHarnessPage(t);
  const prompt = greedy.prompts[0];
  const r = await page.evaluate(async ({ url, prompt }) => {
    const gen = await wd.Generator.load(url, { backend: 'cpu', contextLength: 128 });
    const out = {};
    // The whole text, then the same prompt again: its cache is reused but for the last token.
    out.text = await gen.generateText(prompt.text, { maxNewTokens: 6 });
    out.reuse = gen.stats();
    // A stop string cut out of the greedy text: the text ends before it.
    out.stopText = await gen.generateText(prompt.text, { maxNewTokens: 6, stop: prompt.stop });
    out.stopStats = gen.stats();
    // Sampling: the same seed gives the same tokens, another seed (very likely) other ones.
    const sample = async (seed) => {
      const ids = [];
      for await (const p of gen.generate(prompt.text, { maxNewTokens: 8, temperature: 1.5, topK: 0, topP: 1, seed })) ids.push(p.token);
      return ids;
    };
    out.seedA = await sample(7);
    out.seedA2 = await sample(7);
    out.seedB = await sample(8);
    // Suspended mid-generation (a hidden page): no step runs until resumed, then the same
    // tokens as the uninterrupted run.
    const paused = [];
    let resumedAt = 0;
    let stepDuringSuspend = false;
    for await (const p of gen.generate(prompt.text, { maxNewTokens: 8, temperature: 1.5, topK: 0, topP: 1, seed: 7 })) {
      paused.push(p.token);
      if (resumedAt && performance.now() < resumedAt) stepDuringSuspend = true;
      if (paused.length === 3) {
        wd.lifecycleNotify('suspend');
        resumedAt = performance.now() + 600;
        setTimeout(() => wd.lifecycleNotify('resume'), 600);
      }
    }
    out.paused = paused;
    out.stepDuringSuspend = stepDuringSuspend;
    // Breaking out of the loop frees the generator for the next call.
    let n = 0;
    for await (const _ of gen.generate(prompt.text, { maxNewTokens: 50 })) if (++n === 2) break;
    out.afterBreak = await gen.generateText('Hello', { maxNewTokens: 2 });
    // Abort after the second token: next() rejects with InvalidState, within one token.
    const controller = new AbortController();
    const got = [];
    out.abort = await capture(async () => {
      for await (const p of gen.generate(prompt.text, { maxNewTokens: 50, signal: controller.signal })) {
        got.push(p.token);
        if (got.length === 2) controller.abort();
      }
    });
    out.abortedAfter = got.length;
    out.abortReason = gen.stats().finishReason;
    await gen.reset();
    out.text2 = await gen.generateText(prompt.text, { maxNewTokens: 6 });
    out.afterReset = gen.stats();
    out.badOption = await capture(() => gen.generate('x', { temperature: -1 }));
    out.badTopP = await capture(() => gen.generate('x', { topP: 2 }));
    out.tooLong = await capture(() => gen.generateText('word '.repeat(400)));
    out.detok = gen.detokenize(Array.from(gen.tokenize(prompt.text, { addSpecial: false })));
    gen.destroy();
    out.afterDestroy = await capture(() => gen.generateText('x'));
    out.missing = await capture(() => wd.Generator.load('/no/such/model.gguf', { backend: 'cpu' }));
    out.notGguf = await capture(() => wd.Generator.load('/.cache/models/all-MiniLM-L6-v2/config.json', { backend: 'cpu' }));
    out.badContext = await capture(() => wd.Generator.load(url, { backend: 'cpu', contextLength: 0 }));
    out.badPrecision = await capture(() => wd.Generator.load(url, { backend: 'cpu', gpuPrecision: 'bf16' }));
    return out;
  }, { url: MODEL_URL, prompt: { ...prompt, stop: prompt.continuation.slice(4, 9) } });

  assert.equal(r.reuse.reusedTokens, 0, 'first call: nothing cached');
  assert.equal(r.stopStats.reusedTokens, prompt.ids.length - 1, 'same prompt: all but the last token reused');
  assert.equal(r.stopText, r.text.slice(0, r.text.indexOf(prompt.continuation.slice(4, 9))));
  assert.equal(r.stopStats.finishReason, 'stop');
  assert.deepEqual(r.seedA, r.seedA2, 'same seed, same tokens');
  assert.notDeepEqual(r.seedA, r.seedB, 'another seed, other tokens');
  assert.deepEqual(r.paused, r.seedA, 'suspended and resumed mid-generation: the same tokens');
  assert.equal(r.stepDuringSuspend, false, 'no token while suspended');
  assert.equal(typeof r.afterBreak, 'string');
  assert.equal(r.abort.ok, false);
  assert.equal(r.abort.error.code, 'InvalidState');
  assert.match(r.abort.error.message, /aborted/);
  assert.equal(r.abortedAfter, 2, 'no token after the abort');
  assert.equal(r.abortReason, 'aborted');
  assert.equal(r.text2, r.text, 'after reset: the same greedy text');
  assert.equal(r.afterReset.reusedTokens, 0, 'after reset nothing is reused');
  assert.equal(r.badOption.ok, false);
  assert.equal(r.badOption.error.code, 'InvalidArgument');
  assert.equal(r.badTopP.error.code, 'InvalidArgument');
  assert.equal(r.tooLong.ok, false);
  assert.equal(r.tooLong.error.code, 'InvalidArgument');
  assert.match(r.tooLong.error.message, /context/);
  assert.equal(r.detok, prompt.text);
  assert.equal(r.afterDestroy.error.code, 'InvalidState');
  assert.equal(r.missing.ok, false);
  assert.ok(['NotFound', 'AccessFailed'].includes(r.missing.error.code), JSON.stringify(r.missing.error));
  assert.equal(r.notGguf.ok, false);
  assert.equal(r.badContext.error.code, 'InvalidArgument');
  assert.equal(r.badPrecision.error.code, 'InvalidArgument');
  assert.match(r.badPrecision.error.message, /gpuPrecision/);
  t.diagnostic(`errors: ${JSON.stringify([r.missing.error.message, r.notGguf.error.message])}`);
});

test('CPU: destroy() ends a running generation at its next step; a generate() never iterated holds nothing', SLOW, async (t) => {
  // Issue 37 (2, 3). Before: 58 more tokens arrived after destroy(), generateText resolved with
  // the whole text, and a never-iterated generate() blocked the next call until garbage
  // collection. No GC is forced here: a blocked call shows as 'blocked' after 30 s.
  const page = await harness.openHarnessPage(t);
  const r = await page.evaluate(async ({ url }) => {
    const out = {};
    const within = (promise, ms) => Promise.race([promise, new Promise((resolve) => setTimeout(() => resolve('blocked'), ms))]);
    const gen = await wd.Generator.load(url, { backend: 'cpu', contextLength: 128 });
    const idle = gen.generate('The cat', { maxNewTokens: 60 });
    out.afterIdle = await within(gen.generateText('The cat', { maxNewTokens: 3 }), 30_000);
    const first = await idle.next();
    out.idleRuns = first.done === false && typeof first.value.token === 'number';
    await idle.return();
    out.badTopK = await capture(() => gen.generate('x', { topK: -1 }));
    out.badTemperature = await capture(() => gen.generate('x', { temperature: 'hot' }));
    const it = gen.generate('The cat sat on the', { maxNewTokens: 60 });
    await it.next();
    await it.next();
    gen.destroy();
    const more = [];
    try {
      for (;;) {
        const step = await it.next();
        if (step.done) break;
        more.push(step.value.token);
      }
    } catch (e) {
      out.error = { code: e.code, message: e.message };
    }
    out.more = more.length;
    out.finish = it.finishReason;
    out.stats = gen.stats().finishReason;
    const gen2 = await wd.Generator.load(url, { backend: 'cpu', contextLength: 128 });
    const text = gen2.generateText('The cat', { maxNewTokens: 60 });
    gen2.destroy();
    out.textAfterDestroy = await capture(() => text);
    return out;
  }, { url: MODEL_URL });
  assert.equal(typeof r.afterIdle, 'string', `a never-iterated generate() blocked the next call: ${r.afterIdle}`);
  assert.ok(r.idleRuns, 'the idle stream runs once iterated');
  assert.equal(r.more, 0, 'no token after destroy()');
  assert.equal(r.error?.code, 'InvalidState', JSON.stringify(r.error));
  assert.match(r.error.message, /destroyed/);
  assert.equal(r.finish, 'destroyed');
  assert.equal(r.textAfterDestroy.ok, false, 'generateText then destroy() rejects');
  assert.equal(r.textAfterDestroy.error.code, 'InvalidState');
  // Option errors print values as JavaScript writes them (issue 37, 6), not Rust's debug text.
  assert.match(r.badTopK.error.message, /topK must be a non-negative integer, got -1$/);
  assert.match(r.badTemperature.error.message, /got "hot"$/);
  assert.doesNotMatch(r.badTopK.error.message + r.badTemperature.error.message, /JsValue/);
});

test('Hostile GGUF files: one code per cause, refused before wasm memory grows', SLOW, async (t) => {
  // Hand-made files (issue 37): a header declaring 12 million empty token strings (96 MB of
  // zeros, so every count fits the file), the tiny llama fixture cut inside its header, and a
  // tensor of an unknown ggml type. Oracle: the documented code of each cause (README, "Errors")
  // and wasm memory measured around the load.
  const dir = path.join(REPO_ROOT, '.cache/hostile-gguf');
  await mkdir(dir, { recursive: true });
  const writer = () => {
    const bytes = [];
    const w = {
      u32: (v) => { const b = Buffer.alloc(4); b.writeUInt32LE(v); bytes.push(b); return w; },
      u64: (v) => { const b = Buffer.alloc(8); b.writeBigUInt64LE(BigInt(v)); bytes.push(b); return w; },
      str: (s) => { w.u64(Buffer.byteLength(s)); bytes.push(Buffer.from(s)); return w; },
      done: () => Buffer.concat(bytes),
    };
    return w;
  };
  const huge = path.join(dir, 'twelve-million-tokens.gguf');
  const header = writer().u32(0x46554747).u32(3).u64(0).u64(1).str('tokenizer.ggml.tokens').u32(9).u32(8).u64(12_000_000).done();
  await writeFile(huge, header);
  await truncate(huge, header.length + 12_000_000 * 8);
  const fixture = await readFile(path.join(REPO_ROOT, 'tests/fixtures/decoders/tiny-llama.gguf'));
  await writeFile(path.join(dir, 'truncated.gguf'), fixture.subarray(0, 3000));
  const unknown = writer().u32(0x46554747).u32(3).u64(1).u64(0).str('t').u32(1).u64(4).u32(99).u64(0).done();
  await writeFile(path.join(dir, 'unknown-type.gguf'), Buffer.concat([unknown, Buffer.alloc(64)]));

  const page = await harness.openHarnessPage(t);
  const r = await page.evaluate(async (urls) => {
    const out = {};
    for (const [name, url] of Object.entries(urls)) {
      const before = wd.wasmMemoryBytes();
      try {
        (await wd.Generator.load(url, { backend: 'cpu' })).destroy();
        out[name] = { ok: true };
      } catch (e) {
        out[name] = { ok: false, code: e.code, message: e.message };
      }
      out[name].growthMiB = (wd.wasmMemoryBytes() - before) / 2 ** 20;
    }
    return out;
  }, {
    huge: '/.cache/hostile-gguf/twelve-million-tokens.gguf',
    truncated: '/.cache/hostile-gguf/truncated.gguf',
    unknown: '/.cache/hostile-gguf/unknown-type.gguf',
  });
  for (const [name, x] of Object.entries(r)) t.diagnostic(`${name}: ${x.code}: ${x.message} (wasm memory +${x.growthMiB.toFixed(1)} MiB)`);
  assert.equal(r.huge.code, 'InvalidExternalData');
  assert.match(r.huge.message, /12000000 string elements; at most 2097152/);
  assert.ok(r.huge.growthMiB <= 16, `a 12 M-token header grew wasm memory by ${r.huge.growthMiB} MiB`);
  assert.equal(r.truncated.code, 'InvalidExternalData', 'a cut file is malformed, not unreachable');
  assert.equal(r.unknown.code, 'NotSupported', 'an unknown tensor type is a format feature we lack');
});
