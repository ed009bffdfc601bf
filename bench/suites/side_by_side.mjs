// Side by side, in one headless Chromium against one nginx (the runner's), in one run:
// webdelegate (WebGPU and CPU backends) against onnxruntime-web (pinned in package.json) in the
// configurations a speed-minded ORT user would pick, on the same all-MiniLM-L6-v2 weights, and
// the raw pipe (one fetch of model.safetensors + one writeBuffer) as the floor of any load.
// ORT graphs (scripts/prepare-onnx.sh): model.onnx, built from the same model.safetensors by
// scripts/make_onnx.py in the patterns a PyTorch export of BertModel has (so ORT's own session
// fusions can match), and model_opt.onnx, the same through onnxruntime.transformers.optimizer
// (fused Attention, SkipLayerNormalization, BiasGelu). Contenders:
//   ours_webgpu, ours_cpu                 webdelegate's Embedder (ours_cpu: one thread)
//   ours_cpu_mt                           the Embedder on the CPU backend's worker pool with
//                                         min(4, cores) threads (ORT's rule, so both run as many),
//                                         on a cross-origin isolated page
//   ort_webgpu, ort_webgpu_opt            ORT's WebGPU EP on model.onnx / model_opt.onnx
//   ort_wasm, ort_wasm_opt                ORT's wasm EP, one thread (a page without isolation)
//   ort_wasm_mt                           ORT's wasm EP on model_opt.onnx with min(4, cores)
//                                         threads, on a cross-origin isolated page (COOP/COEP
//                                         from nginx: bench/lib/locations.mjs)
// Every ratio is against the BEST ORT figure of its kind (WebGPU: either graph; CPU: any of the
// three, threads included; *_1t_*: one thread only, as ours_cpu runs; ours_cpu_mt's speed
// against ort_wasm_mt's on the same thread count is the cpu_threads suite's ratio).
//
// Load: LOAD_ROUNDS rounds; in each, every contender in a fresh blank page
// (bench/pages/side-by-side.html), after waiting for the browser's processes (its GPU process
// included) to go idle, from "start" to "ready to run" (runtime import + compile, model fetch),
// then at once, in the same page call, its first 1 x 128 inference: first embedding = ready +
// that run, every round, median. The order rotates per round; every round's figures are kept.
// Reported: medians, spreads, the page's wasm memory once ready (wasm memory never shrinks, so
// that is its peak), peak JS heap and array-buffer bytes (DevTools protocol), and the requests
// and bytes nginx served (its access log).
// Repeat visit: per contender, a page load with cacheable responses (nginx ETag + max-age) and
// the model kept in the Cache API (ours: its persistentCache option; ORT: the page stores the
// .onnx bytes there, as transformers.js does) fills the caches, and the next page load in the same
// profile is measured (HTTP cache, V8's wasm code cache, Cache Storage).
// Inference: the last cold round's pages stay open. Per group (ours WebGPU with both ORT WebGPU
// configurations; ours CPU with the three ORT wasm configurations) and batch (1 x 128 and 8 x 128
// tokens, the very same token ids: see bench/lib/inputs.mjs): one first run each at that batch
// size, two untimed warm-ups for contenders whose first run took < 1 s, then rounds in turns with
// a rotating order (so machine noise hits all) until MAX_RUNS rounds or the group's time budget
// is spent, never fewer than MIN_RUNS. A slower machine stops earlier and reports how many runs
// it took (infer_runs_*). BENCH_SIDE_BY_SIDE_MAX_RUNS=<n> lowers the cap (quick checks);
// BENCH_SIDE_BY_SIDE_LOAD_ROUNDS=<n> runs n load rounds (default 5); BENCH_SIDE_BY_SIDE_ONLY=
// <regex> runs only the matching contenders (ours_cpu always: it is the reference), and the keys
// of contenders that did not run (ratios included) are left out.
// Memory (MiniLM's wasm bytes, issue #35): after the 8 x 128 series, on the kept pages, the
// page's count of every wasm memory (ours: the module's memory and, on the pool, the pool's
// shared memory; ORT: its wasm memory, shared on its threads) and, for ours, the Embedder's
// memoryStats() by purpose.
// Correctness: every contender's embeddings (each first inference and each batch size's first
// run) must have cosine >= COSINE_MIN with ours on the CPU (itself tested against the NumPy
// reference), else the suite fails: nobody benchmarks a broken model. ort_webgpu_ran (and
// ort_webgpu_opt_ran) is 1 only if the session was created with the WebGPU EP alone listed (no
// fallback), ORT holds a GPUDevice, and ORT's own node-placement log puts >= 90% of the nodes on
// the WebGPU EP (shape ops go to the CPU by design).
// Every WebGPU figure from this machine is SwiftShader (WebGPU emulated on the CPU).
//
// Units: *_ms milliseconds; memory *_mb MiB (2^20 bytes); *_served_mb MB (10^6 bytes).
// Ratios are ours / theirs of a time: lower is better (1.0 = as fast).
// Keys (c = every contender; raw_pipe only where it applies):
//   ready_ratio_vs_ort_webgpu, ready_ratio_cpu_vs_ort_wasm, ready_ratio_vs_raw_pipe
//   infer_ratio_vs_ort_webgpu_b{1,8}, cpu_infer_ratio_vs_ort_wasm_b{1,8},
//   cpu_infer_ratio_vs_ort_wasm_1t_b{1,8}, infer_best_ort_webgpu_is_opt_b{1,8} (1 when the
//   optimized graph was ORT's faster WebGPU configuration), ort_webgpu_ran, ort_webgpu_opt_ran
//   ready_ms_<c> (median), ready_spread_<c> ((max - min) / median), ready_ms_<c>_r<i> (round i),
//   ready_wasm_mb_<c>, ready_js_heap_peak_mb_<c>, ready_array_buffer_peak_mb_<c>,
//   ready_requests_<c>, ready_served_mb_<c>; ours only: ready_{init,device,before_weights,
//   weights,after_weights}_ms_<c> (package import+init; waiting for the WebGPU device the package
//   acquires at start; config/tokenizer/index and, on WebGPU, compiling every kernel; weight
//   streaming; after the last weight byte until ready), ready_pipelines_ours_webgpu
//   first_embedding_ms_<c> (median), first_embedding_ms_<c>_r<i>, first_embedding_ratio_vs_ort_webgpu,
//   first_embedding_ratio_cpu_vs_ort_wasm, infer_cold_ms_b1_<c> (median of the first inferences)
//   ready_cache_fill_ms_<c>, ready_repeat_ms_<c>, first_embedding_repeat_ms_<c>,
//   ready_repeat_served_mb_<c>, ready_repeat_requests_<c>, ready_repeat_ratio_vs_ort_webgpu,
//   ready_repeat_ratio_cpu_vs_ort_wasm
//   infer_ms_b{1,8}_<c> (median), infer_min_ms_b{1,8}_<c>, infer_cold_ms_b8_<c> (first 8 x 128 run),
//   infer_runs_b{1,8}_<c>, infer_ratio_best_vs_ort_webgpu_b{1,8} (fastest run / fastest run),
//   infer_iqr_pct_b{1,8}_<c> (interquartile range / median), ours: infer_batch_ms_b{1,8}_<c>
//   (execution alone, the Embedder's lastBatchMillis)
//   cosine_min_vs_ours_cpu_<c>, ort_webgpu{,_opt}_nodes_{webgpu,cpu}, ort_graph_transformers_<c>
//   (how many of ORT's graph transformers its verbose log says modified the graph), ort_threads
//   (ort_wasm_mt's), ours_threads (ours_cpu_mt's pool), cross_origin_isolated (ort_wasm_mt's
//   page), side_by_side_seq_tokens, side_by_side_load_rounds
//   minilm_wasm_mb_<c> (c of the CPU group: every wasm memory of the page after the 8 x 128
//   series, its peak), minilm_wasm_mb_ratio_vs_ort_wasm_mt (ours_cpu_mt's / ort_wasm_mt's),
//   minilm_tensor_mb (the tensor bytes of model.safetensors), ours only:
//   minilm_{main_wasm,weights,state,activations,staging}_mb_<c> (memoryStats: the module's
//   memory and what it holds by purpose), minilm_{shared_memory,shared_weights,
//   shared_activations}_mb_ours_cpu_mt (the pool's shared memory and what it holds),
//   minilm_shared_in_use_mb_ours_cpu_mt (what the pool's allocator holds after the series: the
//   rest of its memory is regions it freed, the high-water of an execute's pool results)
// Contract: see bench/run.mjs.
import { open } from 'node:fs/promises';
import path from 'node:path';
import { BATCH, SEQ, makeInputs, verifyWithTokenizers } from '../lib/inputs.mjs';
import { CACHED_PREFIX, ISOLATED_PREFIX } from '../lib/locations.mjs';
import { prepareOnnx } from '../lib/onnx_models.mjs';
import { accessLogWindow, heapSampler, waitForBrowserIdle, withDeadline } from '../lib/probes.mjs';
import { median, minCosine, quantile, spread } from '../lib/stats.mjs';
import { inferOnce, loadOrt, loadOurs, loadRaw } from '../lib/side_by_side_page.mjs';

const MODEL_URL = '.cache/models/all-MiniLM-L6-v2/';
const ORT_DIST = 'node_modules/onnxruntime-web/dist/';
const PAGE = 'bench/pages/side-by-side.html';
const LOAD_ROUNDS = (() => {
  const n = Number(process.env.BENCH_SIDE_BY_SIDE_LOAD_ROUNDS ?? 5);
  if (!Number.isInteger(n) || n < 1) throw new Error(`BENCH_SIDE_BY_SIDE_LOAD_ROUNDS must be a positive integer, got ${process.env.BENCH_SIDE_BY_SIDE_LOAD_ROUNDS}`);
  return n;
})();
const ONLY = process.env.BENCH_SIDE_BY_SIDE_ONLY ? new RegExp(process.env.BENCH_SIDE_BY_SIDE_ONLY) : null;
const MAX_RUNS = (() => {
  const n = Number(process.env.BENCH_SIDE_BY_SIDE_MAX_RUNS ?? 20);
  if (!Number.isInteger(n) || n < 1) throw new Error(`BENCH_SIDE_BY_SIDE_MAX_RUNS must be a positive integer, got ${process.env.BENCH_SIDE_BY_SIDE_MAX_RUNS}`);
  return n;
})();
const MIN_RUNS = Math.min(3, MAX_RUNS);
/** Seconds of timed rounds per group and batch size, after which rounds stop (>= MIN_RUNS). */
const BUDGET_S = { 1: 330, 8: 1500 };
const COSINE_MIN = 0.9999;
const MIB = 1 << 20;
const PERSISTENT_CACHE = 'bench-side-by-side';

const ORT_PLAIN = `${MODEL_URL}model.onnx`;
const ORT_OPT = `${MODEL_URL}model_opt.onnx`;
/** name: [load function, its argument, page options]. */
const CONTENDERS = {
  ours_webgpu: [loadOurs, { modelUrl: MODEL_URL, backend: 'webgpu', seq: SEQ, batch: BATCH }],
  ours_cpu: [loadOurs, { modelUrl: MODEL_URL, backend: 'cpu', seq: SEQ, batch: BATCH }],
  ours_cpu_mt: [loadOurs, { modelUrl: MODEL_URL, backend: 'cpu', seq: SEQ, batch: BATCH, threads: 'auto' }, { isolated: true }],
  ort_webgpu: [loadOrt, { modelUrl: ORT_PLAIN, ep: 'webgpu', distUrl: ORT_DIST, seq: SEQ }],
  ort_webgpu_opt: [loadOrt, { modelUrl: ORT_OPT, ep: 'webgpu', distUrl: ORT_DIST, seq: SEQ }],
  ort_wasm: [loadOrt, { modelUrl: ORT_PLAIN, ep: 'wasm', distUrl: ORT_DIST, seq: SEQ }],
  ort_wasm_opt: [loadOrt, { modelUrl: ORT_OPT, ep: 'wasm', distUrl: ORT_DIST, seq: SEQ }],
  ort_wasm_mt: [loadOrt, { modelUrl: ORT_OPT, ep: 'wasm', distUrl: ORT_DIST, seq: SEQ }, { isolated: true }],
  raw_pipe: [loadRaw, { weightsUrl: `${MODEL_URL}model.safetensors` }],
};
/** Inference groups: ours and every ORT configuration of the same kind, timed in turns. */
const GROUPS = [['ours_webgpu', 'ort_webgpu', 'ort_webgpu_opt'], ['ours_cpu', 'ours_cpu_mt', 'ort_wasm', 'ort_wasm_opt', 'ort_wasm_mt']];
const ORT_WEBGPU = ['ort_webgpu', 'ort_webgpu_opt'];
const ORT_WASM = ['ort_wasm', 'ort_wasm_opt', 'ort_wasm_mt'];
const ORT_WASM_1T = ['ort_wasm', 'ort_wasm_opt'];


/** Most a load (with its first inference) may take: SwiftShader's slowest is ~15 s. */
const LOAD_DEADLINE_MS = 180_000;

/**
 * One load of `name` in a fresh page, with its probes and its first 1 x SEQ inference right after
 * ready (`first`); waits for the browser to go idle first. The page stays open when `keep`.
 * `visit`: 'cold' (no-store responses, every cache defeated) or 'cached' (cacheable responses
 * under CACHED_PREFIX; ours with its persistent cache).
 */
async function loadOnce(ctx, name, { keep = false, visit = 'cold', first = null } = {}) {
  const [load, arg, { isolated = false } = {}] = CONTENDERS[name];
  await waitForBrowserIdle();
  const base = visit === 'cached' ? CACHED_PREFIX : isolated ? ISOLATED_PREFIX : '/';
  const p = await ctx.openPage(`${isolated ? ISOLATED_PREFIX : '/'}${PAGE}`, () => window.pageReady);
  // Attaching the DevTools protocol to a cross-origin isolated page in the shared context has
  // hung here: give up on the heap probe after 10 s (its figures are then NaN and not reported).
  const sampler = await withDeadline(heapSampler(p.page), 10_000) ?? { stop: async () => ({ used: NaN, arrayBuffers: NaN }) };
  const served = await accessLogWindow(ctx.accessLog);
  let result;
  let heap;
  const persistentCache = visit === 'cached' ? PERSISTENT_CACHE : undefined;
  try {
    result = await withDeadline(p.evaluate(load, { ...arg, base, first, persistentCache }), LOAD_DEADLINE_MS);
    if (result === null) throw new Error(`${name} (${visit} visit) did not finish within ${LOAD_DEADLINE_MS / 1000} s`);
  } finally {
    heap = await sampler.stop();
  }
  const log = await served.read();
  if (!keep) {
    await p.evaluate(() => window.contender?.destroy()).catch(() => {});
    await p.page.close();
  }
  return { ...result, heap, served: log, page: keep ? p : null };
}

/**
 * The inference series of one group at `rows` rows: {name: {first, ms[], batchMs[], rows}};
 * `first` is the first run at this batch size on the kept page (its embeddings are `rows`),
 * `ms` the timed warm runs, taken in turns with a rotating order so machine noise hits all.
 */
async function series(ctx, pages, group, rows, inputs) {
  const out = {};
  for (const name of group) {
    const first = await pages[name].evaluate(inferOnce, { inputs, rows, returnRows: true });
    out[name] = { first: first.ms, ms: [], batchMs: [], rows: first.rows };
    if (first.ms < 1000) for (let i = 0; i < 2; i++) await pages[name].evaluate(inferOnce, { inputs, rows });
  }
  const started = Date.now();
  for (let round = 0; round < MAX_RUNS; round++) {
    if (round >= MIN_RUNS && Date.now() - started > BUDGET_S[rows] * 1000) break;
    for (let i = 0; i < group.length; i++) {
      const name = group[(i + round) % group.length];
      const r = await pages[name].evaluate(inferOnce, { inputs, rows });
      out[name].ms.push(r.ms);
      if (r.batchMs !== null) out[name].batchMs.push(r.batchMs);
    }
  }
  for (const name of group) {
    ctx.log(`${rows} x ${SEQ}: ${name} median ${median(out[name].ms).toFixed(1)} ms over ${out[name].ms.length} runs (first ${out[name].first.toFixed(0)} ms)`);
  }
  return out;
}

/** Bytes of the tensors in the safetensors file at `file`: the data its header indexes. */
async function safetensorsTensorBytes(file) {
  const handle = await open(file);
  try {
    const head = Buffer.alloc(8);
    await handle.read(head, 0, 8, 0);
    const length = Number(head.readBigUInt64LE(0));
    const json = Buffer.alloc(length);
    await handle.read(json, 0, length, 8);
    const header = JSON.parse(json.toString('utf8'));
    let bytes = 0;
    for (const [name, info] of Object.entries(header)) {
      if (name !== '__metadata__') bytes += info.data_offsets[1] - info.data_offsets[0];
    }
    return bytes;
  } finally {
    await handle.close();
  }
}

/** The fastest (lowest) value of `key(c)` over the contenders `names`, and which one it was. */
function best(result, names, key) {
  let at = names[0];
  for (const n of names) if (result[key(n)] < result[key(at)]) at = n;
  return { value: result[key(at)], name: at };
}

export async function run(ctx) {
  const python = await prepareOnnx(ctx);
  const modelDir = path.join(ctx.root, '.cache/models/all-MiniLM-L6-v2');
  const inputs = await makeInputs(modelDir);
  await verifyWithTokenizers(python, modelDir, inputs.texts, inputs.ids);
  ctx.log(`inputs: ${BATCH} texts of exactly ${SEQ} tokens each (checked with the tokenizers package)`);
  const first = { texts: inputs.texts.slice(0, 1), ids: inputs.ids.slice(0, 1) };

  // Cold load rounds (each with its first inference); the last round's pages (not the raw
  // pipe's) stay open for the inference series.
  const names = Object.keys(CONTENDERS).filter((n) => n === 'ours_cpu' || !ONLY || ONLY.test(n));
  const loads = Object.fromEntries(names.map((n) => [n, []]));
  const pages = {};
  /** Those of `list` that run in this run (BENCH_SIDE_BY_SIDE_ONLY). */
  const ran = (list) => list.filter((n) => names.includes(n));
  for (let round = 0; round < LOAD_ROUNDS; round++) {
    const last = round === LOAD_ROUNDS - 1;
    for (let i = 0; i < names.length; i++) {
      const name = names[(i + round) % names.length];
      const keep = last && name !== 'raw_pipe';
      const r = await loadOnce(ctx, name, { keep, first: name === 'raw_pipe' ? null : first });
      loads[name].push(r);
      if (keep) pages[name] = r.page;
    }
    ctx.log(`load round ${round + 1}: ${names.map((n) => `${n} ${loads[n].at(-1).readyMs.toFixed(0)}+${(loads[n].at(-1).firstMs || 0).toFixed(0)} ms`).join(', ')}`);
  }

  const result = { side_by_side_seq_tokens: SEQ, side_by_side_load_rounds: LOAD_ROUNDS };
  for (const [name, runs] of Object.entries(loads)) {
    const last = runs.at(-1);
    Object.assign(result, {
      [`ready_ms_${name}`]: median(runs.map((r) => r.readyMs)),
      [`ready_spread_${name}`]: spread(runs.map((r) => r.readyMs)),
      [`ready_wasm_mb_${name}`]: Math.max(...runs.map((r) => r.wasmBytes)) / MIB,
      [`ready_js_heap_peak_mb_${name}`]: Math.max(...runs.map((r) => r.heap.used)) / MIB,
      [`ready_array_buffer_peak_mb_${name}`]: Math.max(...runs.map((r) => r.heap.arrayBuffers)) / MIB,
      [`ready_requests_${name}`]: last.served.requests,
      [`ready_served_mb_${name}`]: last.served.bytes / 1e6,
    });
    runs.forEach((r, i) => { result[`ready_ms_${name}_r${i + 1}`] = r.readyMs; });
    if (name !== 'raw_pipe') {
      result[`first_embedding_ms_${name}`] = median(runs.map((r) => r.readyMs + r.firstMs));
      result[`infer_cold_ms_b1_${name}`] = median(runs.map((r) => r.firstMs));
      runs.forEach((r, i) => { result[`first_embedding_ms_${name}_r${i + 1}`] = r.readyMs + r.firstMs; });
    }
    if (name.startsWith('ours')) {
      for (const [key, field] of [['init', 'initMs'], ['device', 'deviceMs'], ['before_weights', 'beforeWeightsMs'], ['weights', 'weightsMs'], ['after_weights', 'afterWeightsMs']]) {
        result[`ready_${key}_ms_${name}`] = median(runs.map((r) => r[field]));
      }
    }
  }
  const readyOrtWebgpu = best(result, ran(ORT_WEBGPU), (n) => `ready_ms_${n}`);
  const readyOrtWasm = best(result, ran(ORT_WASM), (n) => `ready_ms_${n}`);
  result.ready_ratio_vs_ort_webgpu = result.ready_ms_ours_webgpu / readyOrtWebgpu.value;
  result.ready_ratio_cpu_vs_ort_wasm = result.ready_ms_ours_cpu / readyOrtWasm.value;
  result.ready_ratio_vs_raw_pipe = result.ready_ms_ours_webgpu / result.ready_ms_raw_pipe;
  result.first_embedding_ratio_vs_ort_webgpu = result.first_embedding_ms_ours_webgpu / best(result, ran(ORT_WEBGPU), (n) => `first_embedding_ms_${n}`).value;
  result.first_embedding_ratio_cpu_vs_ort_wasm = result.first_embedding_ms_ours_cpu / best(result, ran(ORT_WASM), (n) => `first_embedding_ms_${n}`).value;
  if (loads.ours_webgpu) result.ready_pipelines_ours_webgpu = loads.ours_webgpu.at(-1).pipelines;
  if (pages.ort_wasm_mt) {
    result.ort_threads = loads.ort_wasm_mt.at(-1).threads;
    result.cross_origin_isolated = (await pages.ort_wasm_mt.evaluate(() => self.crossOriginIsolated)) ? 1 : 0;
    if (result.cross_origin_isolated !== 1 || result.ort_threads < 2) ctx.log(`warning: ort_wasm_mt ran ${result.ort_threads} thread(s), isolated ${result.cross_origin_isolated}`);
  }
  if (pages.ours_cpu_mt) {
    result.ours_threads = loads.ours_cpu_mt.at(-1).threads;
    const isolated = await pages.ours_cpu_mt.evaluate(() => self.crossOriginIsolated);
    if (!isolated || result.ours_threads < 2) ctx.log(`warning: ours_cpu_mt ran ${result.ours_threads} thread(s), isolated ${isolated}`);
  }

  // Inference, group by group.
  const measured = {};
  for (const group of GROUPS.map(ran).filter((g) => g.length)) {
    for (const rows of [1, BATCH]) {
      const s = await series(ctx, pages, group, rows, inputs);
      for (const name of group) (measured[name] ??= {})[rows] = s[name];
    }
  }
  for (const [name, byRows] of Object.entries(measured)) {
    for (const [rows, s] of Object.entries(byRows)) {
      const b = `b${rows}_${name}`;
      const mid = median(s.ms);
      Object.assign(result, {
        [`infer_ms_${b}`]: mid,
        [`infer_min_ms_${b}`]: Math.min(...s.ms),
        [`infer_runs_${b}`]: s.ms.length,
        [`infer_iqr_pct_${b}`]: ((quantile(s.ms, 0.75) - quantile(s.ms, 0.25)) / mid) * 100,
      });
      if (Number(rows) !== 1) result[`infer_cold_ms_${b}`] = s.first;
      if (s.batchMs.length) result[`infer_batch_ms_${b}`] = median(s.batchMs);
    }
  }
  for (const rows of [1, BATCH]) {
    const ortGpu = best(result, ran(ORT_WEBGPU), (n) => `infer_ms_b${rows}_${n}`);
    const ortWasm = best(result, ran(ORT_WASM), (n) => `infer_ms_b${rows}_${n}`);
    const ortWasm1t = best(result, ran(ORT_WASM_1T), (n) => `infer_ms_b${rows}_${n}`);
    result[`infer_ratio_vs_ort_webgpu_b${rows}`] = result[`infer_ms_b${rows}_ours_webgpu`] / ortGpu.value;
    if (ortGpu.name) result[`infer_best_ort_webgpu_is_opt_b${rows}`] = ortGpu.name === 'ort_webgpu_opt' ? 1 : 0;
    result[`cpu_infer_ratio_vs_ort_wasm_b${rows}`] = result[`infer_ms_b${rows}_ours_cpu`] / ortWasm.value;
    result[`cpu_infer_ratio_vs_ort_wasm_1t_b${rows}`] = result[`infer_ms_b${rows}_ours_cpu`] / ortWasm1t.value;
    ctx.log(`${rows} x ${SEQ}: best ORT WebGPU ${ortGpu.name}, best ORT wasm ${ortWasm.name} (one thread: ${ortWasm1t.name})`);
    // The same from each side's fastest run: a shared machine only ever slows runs down.
    result[`infer_ratio_best_vs_ort_webgpu_b${rows}`] = result[`infer_min_ms_b${rows}_ours_webgpu`]
      / best(result, ran(ORT_WEBGPU), (n) => `infer_min_ms_b${rows}_${n}`).value;
  }

  // MiniLM's wasm bytes (issue #35), on the kept pages after the 8 x 128 series (wasm memory
  // never shrinks: these are the peaks of the whole page): the page's count of every wasm
  // memory, and ours by purpose from the Embedder's memoryStats().
  for (const name of ran(['ours_cpu', 'ours_cpu_mt', ...ORT_WASM])) {
    const { wasmBytes, stats, poolInUse } = await pages[name].evaluate(() => window.contender.memory());
    result[`minilm_wasm_mb_${name}`] = wasmBytes / MIB;
    if (!stats) {
      ctx.log(`${name}: wasm memory ${(wasmBytes / MIB).toFixed(1)} MiB after the ${BATCH} x ${SEQ} series`);
      continue;
    }
    const main = [['main_wasm', 'wasmMemoryBytes'], ['weights', 'weights'], ['state', 'state'], ['activations', 'activations'], ['staging', 'staging']];
    const shared = [['shared_memory', 'sharedMemoryBytes'], ['shared_weights', 'sharedWeights'], ['shared_activations', 'sharedActivations']];
    for (const [key, field] of name === 'ours_cpu_mt' ? [...main, ...shared] : main) {
      result[`minilm_${key}_mb_${name}`] = stats[field] / MIB;
    }
    if (name === 'ours_cpu_mt') result.minilm_shared_in_use_mb_ours_cpu_mt = poolInUse / MIB;
    ctx.log(`${name}: wasm memory ${(wasmBytes / MIB).toFixed(1)} MiB after the ${BATCH} x ${SEQ} series; memoryStats ${JSON.stringify(stats)}${poolInUse ? `; the pool's allocator holds ${(poolInUse / MIB).toFixed(1)} MiB` : ''}`);
  }
  result.minilm_wasm_mb_ratio_vs_ort_wasm_mt = result.minilm_wasm_mb_ours_cpu_mt / result.minilm_wasm_mb_ort_wasm_mt;
  result.minilm_tensor_mb = (await safetensorsTensorBytes(path.join(modelDir, 'model.safetensors'))) / MIB;

  // Same answers, or the numbers mean nothing: every contender's first inference (right after
  // its load) and its first run at each batch size, against ours on the CPU.
  const broken = [];
  for (const name of Object.keys(measured).filter((n) => n !== 'ours_cpu')) {
    const cos = Math.min(
      ...[1, BATCH].map((rows) => minCosine(measured[name][rows].rows, measured.ours_cpu[rows].rows)),
      ...loads[name].map((r) => minCosine(r.firstRows, measured.ours_cpu[1].rows)),
    );
    result[`cosine_min_vs_ours_cpu_${name}`] = cos;
    if (!(cos >= COSINE_MIN)) broken.push(`${name}: min cosine ${cos} with ours on the CPU`);
  }
  if (broken.length) throw new Error(`embeddings differ (need cosine >= ${COSINE_MIN}):\n${broken.join('\n')}`);

  // Did ORT's WebGPU EP really run each graph, and what did ORT's own optimizer fuse?
  for (const name of ran([...ORT_WEBGPU, ...ORT_WASM])) {
    const placed = await pages[name].evaluate(() => window.contender.placements());
    const total = Object.values(placed.counts).reduce((a, b) => a + b, 0);
    result[`ort_graph_transformers_${name}`] = placed.transformers.length;
    ctx.log(`${name}: placements ${JSON.stringify(placed.counts)}; graph transformers that modified the graph: ${placed.transformers.join(', ') || 'none logged'}`);
    if (name.startsWith('ort_webgpu')) {
      const onGpu = placed.counts.WebGpuExecutionProvider ?? 0;
      const suffix = name === 'ort_webgpu' ? '' : '_opt';
      result[`ort_webgpu${suffix}_nodes_webgpu`] = onGpu;
      result[`ort_webgpu${suffix}_nodes_cpu`] = placed.counts.CPUExecutionProvider ?? 0;
      result[`ort_webgpu${suffix}_ran`] = loads[name].every((r) => r.webgpuDevice) && total > 0 && onGpu >= 0.9 * total ? 1 : 0;
    }
  }
  for (const p of Object.values(pages)) await p.evaluate(() => window.contender.destroy()).catch(() => {});
  for (const p of Object.values(pages)) await p.page.close().catch(() => {});

  // Repeat visit (see the top): one visit fills the caches, the next page load in the same
  // browser profile is measured (time to the first embedding included).
  const repeated = [];
  for (const name of names.filter((n) => n !== 'raw_pipe')) {
    let fill;
    let again;
    try {
      fill = await loadOnce(ctx, name, { visit: 'cached', first });
      again = await loadOnce(ctx, name, { visit: 'cached', first });
    } catch (error) {
      // Reported, not fatal: the cold figures above stand without it.
      ctx.log(`repeat visit ${name}: no figure (${error.message})`);
      continue;
    }
    repeated.push(name);
    Object.assign(result, {
      [`ready_cache_fill_ms_${name}`]: fill.readyMs,
      [`ready_repeat_ms_${name}`]: again.readyMs,
      [`first_embedding_repeat_ms_${name}`]: again.readyMs + again.firstMs,
      [`ready_repeat_served_mb_${name}`]: again.served.bytes / 1e6,
      [`ready_repeat_requests_${name}`]: again.served.requests,
    });
    ctx.log(`repeat visit ${name}: fill ${fill.readyMs.toFixed(0)} ms, repeat ${again.readyMs.toFixed(0)} ms (+${again.firstMs.toFixed(0)} ms first embedding), ${again.served.requests} requests ${(again.served.bytes / 1e6).toFixed(1)} MB served`);
  }
  const had = (list) => list.filter((n) => repeated.includes(n));
  result.ready_repeat_ratio_vs_ort_webgpu = result.ready_repeat_ms_ours_webgpu / best(result, had(ORT_WEBGPU), (n) => `ready_repeat_ms_${n}`).value;
  result.ready_repeat_ratio_cpu_vs_ort_wasm = result.ready_repeat_ms_ours_cpu / best(result, had(ORT_WASM), (n) => `ready_repeat_ms_${n}`).value;
  for (const key of Object.keys(result)) if (!Number.isFinite(result[key])) delete result[key];
  return result;
}
