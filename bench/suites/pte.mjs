// ExecuTorch programs (issue 36), in headless Chromium against the runner's nginx: all-MiniLM-L6-v2
// exported by the webdelegate partitioner (tests/fixtures/pte/minilm.pte, its weights in
// .cache/pte/minilm.ptd, rebuilt by `npm run setup`) loaded with `Module.load` and run with
// `forward`, against
//   - our own Embedder on the same weights (model.safetensors), same backend;
//   - onnxruntime-web in its strongest configurations (bench/lib/side_by_side_page.mjs): WebGPU EP
//     on model.onnx and on the offline-optimized model_opt.onnx; wasm EP on model_opt.onnx with
//     one thread and with min(4, cores) threads on a cross-origin isolated page. Each ratio is
//     against the best ORT figure of its kind;
//   - the raw pipe for the `.ptd`: one fetch of the whole file and one writeBuffer into a GPU
//     buffer, ended by onSubmittedWorkDone (the floor of any loader).
// Method: ROUNDS rounds; in each, every contender in a fresh blank page (its runtime import and
// compile included), order rotating, browser idle first: time to ready, then INFER_RUNS timed
// 1 x 128 inferences (the same token ids for everyone: bench/lib/inputs.mjs) after one warm-up.
// Medians over rounds of each round's median, spreads ((max - min) / median over rounds).
// Correctness first: the .pte's embeddings of the fixture sentences (minilm.json, token ids from
// the model's tokenizer) against sentence-transformers' (cosine), on both backends; every
// contender's 1 x 128 embedding must agree with the .pte's on the CPU (cosine >= 0.9999), else
// the suite fails.
// Every WebGPU figure from a machine without a GPU is SwiftShader (WebGPU emulated on the CPU).
// Keys:
//   pte_minilm_cosine_min_cpu, pte_minilm_cosine_min_webgpu   lowest cosine vs sentence-transformers
//   pte_ptd_load_ratio_vs_raw      (.ptd MB/s of Module.load on WebGPU, ready to run) / (raw pipe MB/s)
//   pte_ptd_load_mbps_webgpu, pte_ptd_raw_mbps                those two rates (MB = 10^6 bytes)
//   pte_wasm_growth_mb_webgpu      wasm memory growth (MiB) across Module.load on WebGPU (90 MB of weights)
//   pte_wasm_growth_mb_cpu         the same on the CPU backend (the weights live in wasm memory there)
//   pte_minilm_ready_ms_{cpu,webgpu}, pte_minilm_infer_ms_b1_{cpu,webgpu} and their *_spread
//   pte_minilm_ready_ratio_vs_embedder_{cpu,webgpu}, pte_minilm_infer_ratio_vs_embedder_{cpu,webgpu}
//   pte_minilm_infer_ratio_vs_ort_webgpu (best ORT WebGPU), pte_minilm_infer_ratio_vs_ort_wasm
//   (best ORT wasm, threads included), pte_minilm_infer_ratio_vs_ort_wasm_1t (one thread, as our
//   CPU backend runs here); ratios are ours / theirs of a time: lower is better.
//   pte_gemma_greedy_equal_cpu     Gemma 3 270M from tests/fixtures/pte/gemma.pte (f32 weights
//                                  from .cache/pte/gemma.ptd) on the CPU backend: the fraction
//                                  of its greedy tokens (4 prompts x 32) equal to transformers'
//   pte_gemma_decode_tps_cpu       its decode tokens/s (median over the prompts)
//   gguf_gemma_decode_tps_cpu      the Generator's on the setup's Q4_K_M GGUF, same prompts,
//                                  greedy, CPU backend, one thread
//   pte_decode_ratio_vs_gguf_cpu   pte / gguf decode tokens/s (a throughput: higher is better;
//                                  f32 weights against 4-bit ones, so the .pte reads ~4x more)
// Contract: see bench/run.mjs.
import { readFile } from 'node:fs/promises';
import path from 'node:path';
import { SEQ, makeInputs } from '../lib/inputs.mjs';
import { ISOLATED_PREFIX } from '../lib/locations.mjs';
import { prepareOnnx } from '../lib/onnx_models.mjs';
import { waitForBrowserIdle, withDeadline } from '../lib/probes.mjs';
import { pteGreedyDecode } from '../lib/pte_gemma_page.mjs';
import { inferOnce, loadOrt, loadOurs, loadRaw } from '../lib/side_by_side_page.mjs';
import { median, spread } from '../lib/stats.mjs';

const MODEL_URL = '.cache/models/all-MiniLM-L6-v2/';
const PTE_URL = 'tests/fixtures/pte/minilm.pte';
const PTD_URL = '.cache/pte/minilm.ptd';
const ORT_DIST = 'node_modules/onnxruntime-web/dist/';
const PAGE = 'bench/pages/side-by-side.html';
const ROUNDS = Number(process.env.BENCH_PTE_ROUNDS ?? 3);
const INFER_RUNS = Number(process.env.BENCH_PTE_INFER_RUNS ?? 8);
const COSINE_MIN = 0.9999;
const MIB = 1 << 20;
const LOAD_DEADLINE_MS = 240_000;

/**
 * In the page: Module.load of the .pte with its .ptd, timed from the package import; keeps a
 * contender taking token ids (batch 1) on `window.contender`.
 */
async function loadPte({ base, pteUrl, ptdUrl, backend }) {
  const t0 = performance.now();
  const wd = await import(`${base}pkg/webdelegate.js`);
  await wd.default();
  await wd.ready();
  const before = window.wasmMemoryBytes();
  const tReady = performance.now();
  let tFirstBytes = NaN;
  let tAllBytes = NaN;
  const onProgress = (e) => {
    const now = performance.now();
    if (Number.isNaN(tFirstBytes) && e.bytesDone > 0) tFirstBytes = now;
    if (e.bytesDone === e.bytesTotal) tAllBytes = now;
  };
  const module = await wd.Module.load(`${base}${pteUrl}`, { data: `${base}${ptdUrl}`, backend, onProgress });
  const t1 = performance.now();
  if (module.backend !== backend) throw new Error(`asked for ${backend}, the module runs on ${module.backend}`);
  const run = async (ids) => {
    if (ids.length !== 1) throw new Error('the exported MiniLM takes one row');
    const row = ids[0];
    const tensor = (values) => ({ shape: [1, row.length], data: BigInt64Array.from(values, BigInt) });
    const [out] = await module.forward([tensor(row), tensor(row.map(() => 1))]);
    return { rows: [out.data] };
  };
  window.contender = { run, inputs: 'ids', destroy: () => module.destroy() };
  return {
    readyMs: t1 - t0,
    loadMs: t1 - tReady,
    weightsMs: tAllBytes - tFirstBytes,
    growthBytes: window.wasmMemoryBytes() - before,
    stats: module.loadStats(),
  };
}

/** In the page: the fixture sentences through a loaded `window.contender` (token ids given). */
async function embedCases({ cases }) {
  const rows = [];
  for (const c of cases) {
    const out = await window.contender.run([c.input_ids.data]);
    rows.push(Array.from(out.rows[0]));
  }
  return rows;
}

function cosine(a, b) {
  let dot = 0; let na = 0; let nb = 0;
  for (let i = 0; i < a.length; i++) { dot += a[i] * b[i]; na += a[i] * a[i]; nb += b[i] * b[i]; }
  return dot / Math.sqrt(na * nb);
}

export async function run(ctx) {
  const fixture = JSON.parse(await readFile(path.join(ctx.root, 'tests/fixtures/pte/minilm.json'), 'utf8'));
  const inputs = await makeInputs(path.join(ctx.root, MODEL_URL));
  await prepareOnnx(ctx);
  const first = { ids: inputs.ids.slice(0, 1), texts: inputs.texts.slice(0, 1) };
  const contenders = {
    pte_cpu: [loadPte, { pteUrl: PTE_URL, ptdUrl: PTD_URL, backend: 'cpu' }],
    pte_webgpu: [loadPte, { pteUrl: PTE_URL, ptdUrl: PTD_URL, backend: 'webgpu' }],
    embedder_cpu: [loadOurs, { modelUrl: MODEL_URL, backend: 'cpu', seq: SEQ, batch: 1 }],
    embedder_webgpu: [loadOurs, { modelUrl: MODEL_URL, backend: 'webgpu', seq: SEQ, batch: 1 }],
    ort_webgpu: [loadOrt, { modelUrl: `${MODEL_URL}model.onnx`, ep: 'webgpu', distUrl: ORT_DIST, seq: SEQ }],
    ort_webgpu_opt: [loadOrt, { modelUrl: `${MODEL_URL}model_opt.onnx`, ep: 'webgpu', distUrl: ORT_DIST, seq: SEQ }],
    ort_wasm_opt: [loadOrt, { modelUrl: `${MODEL_URL}model_opt.onnx`, ep: 'wasm', distUrl: ORT_DIST, seq: SEQ }],
    ort_wasm_mt: [loadOrt, { modelUrl: `${MODEL_URL}model_opt.onnx`, ep: 'wasm', distUrl: ORT_DIST, seq: SEQ }, { isolated: true }],
    raw_ptd: [loadRaw, { weightsUrl: PTD_URL }],
  };
  const result = {};

  // Correctness of the .pte against sentence-transformers, both backends.
  for (const backend of ['cpu', 'webgpu']) {
    const p = await ctx.openPage(`/${PAGE}`, () => window.pageReady);
    const loaded = await p.evaluate(loadPte, { base: '/', pteUrl: PTE_URL, ptdUrl: PTD_URL, backend });
    const rows = await p.evaluate(embedCases, { cases: fixture.cases });
    const cosines = rows.map((row, i) => cosine(row, fixture.cases[i].expected.sentence_transformers.data));
    result[`pte_minilm_cosine_min_${backend}`] = Math.min(...cosines);
    result[`pte_wasm_growth_mb_${backend}`] = loaded.growthBytes / MIB;
    ctx.log(`${backend}: cosine min ${Math.min(...cosines).toFixed(7)}, wasm growth ${(loaded.growthBytes / MIB).toFixed(1)} MiB over Module.load`);
    await p.page.close();
  }

  // Rounds: every contender in a fresh page, rotating order; time to ready, then 1 x 128 runs.
  const names = Object.keys(contenders);
  const perRound = Object.fromEntries(names.map((n) => [n, { ready: [], infer: [] }]));
  let reference = null;
  for (let round = 0; round < ROUNDS; round++) {
    const order = names.map((_, i) => names[(i + round) % names.length]);
    for (const name of order) {
      const [load, arg, { isolated = false } = {}] = contenders[name];
      await waitForBrowserIdle();
      const base = isolated ? ISOLATED_PREFIX : '/';
      const p = await ctx.openPage(`${base}${PAGE}`, () => window.pageReady);
      const loaded = await withDeadline(p.evaluate(load, { ...arg, base, first: null }), LOAD_DEADLINE_MS);
      if (!loaded) throw new Error(`${name}: load did not finish in ${LOAD_DEADLINE_MS} ms`);
      perRound[name].ready.push(loaded.readyMs);
      if (name === 'raw_ptd') {
        perRound[name].bytes = loaded.bytes;
      } else {
        const check = await p.evaluate(inferOnce, { inputs: first, rows: 1, returnRows: true });
        if (name === 'pte_cpu' && !reference) reference = check.rows[0];
        const times = [];
        for (let r = 0; r < INFER_RUNS; r++) times.push((await p.evaluate(inferOnce, { inputs: first, rows: 1, returnRows: false })).ms);
        perRound[name].infer.push(median(times));
        perRound[name].rows = check.rows[0];
      }
      await p.page.close();
    }
  }
  for (const name of names) {
    if (name === 'raw_ptd' || !reference) continue;
    const c = cosine(perRound[name].rows, reference);
    if (!(c >= COSINE_MIN)) throw new Error(`${name}: 1 x ${SEQ} embedding has cosine ${c} with the .pte's on the CPU`);
  }
  const ready = (n) => median(perRound[n].ready);
  const infer = (n) => median(perRound[n].infer);
  for (const backend of ['cpu', 'webgpu']) {
    const pte = `pte_${backend}`;
    result[`pte_minilm_ready_ms_${backend}`] = ready(pte);
    result[`pte_minilm_ready_spread_${backend}`] = spread(perRound[pte].ready);
    result[`pte_minilm_infer_ms_b1_${backend}`] = infer(pte);
    result[`pte_minilm_infer_spread_${backend}`] = spread(perRound[pte].infer);
    result[`pte_minilm_ready_ratio_vs_embedder_${backend}`] = ready(pte) / ready(`embedder_${backend}`);
    result[`pte_minilm_infer_ratio_vs_embedder_${backend}`] = infer(pte) / infer(`embedder_${backend}`);
  }
  result.pte_minilm_infer_ratio_vs_ort_webgpu = infer('pte_webgpu') / Math.min(infer('ort_webgpu'), infer('ort_webgpu_opt'));
  result.pte_minilm_infer_ratio_vs_ort_wasm = infer('pte_cpu') / Math.min(infer('ort_wasm_opt'), infer('ort_wasm_mt'));
  result.pte_minilm_infer_ratio_vs_ort_wasm_1t = infer('pte_cpu') / infer('ort_wasm_opt');
  const bytes = perRound.raw_ptd.bytes;
  result.pte_ptd_raw_mbps = bytes / 1e6 / (ready('raw_ptd') / 1e3);
  result.pte_ptd_load_mbps_webgpu = bytes / 1e6 / (ready('pte_webgpu') / 1e3);
  result.pte_ptd_load_ratio_vs_raw = result.pte_ptd_load_mbps_webgpu / result.pte_ptd_raw_mbps;
  for (const name of names) {
    ctx.log(`${name}: ready ${ready(name).toFixed(0)} ms${name === 'raw_ptd' ? '' : `, 1 x ${SEQ} ${infer(name).toFixed(1)} ms`}`);
  }
  Object.assign(result, await gemmaFromPte(ctx));
  return result;
}

/** Gemma 3 270M from its `.pte` against transformers' greedy tokens and against our GGUF path. */
async function gemmaFromPte(ctx) {
  const fixture = JSON.parse(await readFile(path.join(ctx.root, 'tests/fixtures/pte/gemma.json'), 'utf8'));
  const cases = fixture.cases.slice(0, 4).map((c) => ({ prompt: c.prompt, ids: c.prompt_ids, want: c.greedy.transformers_eager }));
  const page = await ctx.openHarnessPage();
  const pte = await page.evaluate(pteGreedyDecode, { cases });
  const gguf = await page.evaluate(async ({ cases }) => {
    const gen = await wd.Generator.load('/.cache/models/gemma-3-270m/gemma-3-270m-q4_k_m.gguf', { backend: 'cpu', contextLength: 256 });
    const gguf = [];
    for (const c of cases) {
      await gen.reset();
      await gen.generateText(c.prompt, { maxNewTokens: c.want.length, temperature: 0 });
      gguf.push(gen.stats().decodeTokensPerSecond);
    }
    gen.destroy();
    return gguf;
  }, { cases });
  const r = { pte: pte.cases, gguf };
  let equal = 0;
  let total = 0;
  r.pte.forEach((x, i) => {
    cases[i].want.forEach((t, j) => { total += 1; if (x.got[j] === t) equal += 1; });
  });
  const pteTps = median(r.pte.map((x) => x.tps));
  const ggufTps = median(r.gguf);
  ctx.log(`gemma .pte: ${equal}/${total} greedy tokens equal transformers'; decode ${pteTps.toFixed(2)} tokens/s (f32) vs GGUF ${ggufTps.toFixed(2)} (Q4_K_M)`);
  await page.page?.close?.();
  return {
    pte_gemma_greedy_equal_cpu: equal / total,
    pte_gemma_decode_tps_cpu: pteTps,
    gguf_gemma_decode_tps_cpu: ggufTps,
    pte_decode_ratio_vs_gguf_cpu: pteTps / ggufTps,
  };
}
