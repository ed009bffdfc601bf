// Side by side, in one headless Chromium against one nginx (the runner's), in one run:
// webdelegate (WebGPU and CPU backends) against onnxruntime-web (pinned in package.json; WebGPU
// EP and wasm EP) on the same all-MiniLM-L6-v2 weights (model.onnx built from the same
// model.safetensors by scripts/make_onnx.py through scripts/prepare-onnx.sh), and the raw pipe
// (one fetch of model.safetensors + one writeBuffer) as the floor of any weights load.
//
// Load: LOAD_ROUNDS rounds; in each, every contender in a fresh blank page
// (bench/pages/side-by-side.html) from "start" to "ready to run", the import and compile of its
// own runtime (JS + wasm from nginx) and the model's fetch included; the order rotates per round.
// Reported: the median time, the page's wasm memory once ready (wasm memory never shrinks, so
// that is its peak), peak JS heap and array-buffer bytes (DevTools protocol), and the requests
// and bytes nginx served (its access log).
// Inference: the last round's pages stay open. Per pair (ours WebGPU vs ORT WebGPU EP, ours CPU
// vs ORT wasm EP) and batch (1 x 128 and 8 x 128 tokens, the very same token ids: see
// bench/lib/inputs.mjs): one cold run each (its output is checked, see below), two untimed
// warm-ups for contenders whose cold run took < 1 s, then rounds alternating the two contenders
// (so machine noise hits both) until MAX_RUNS rounds or the pair's time budget is spent, never
// fewer than MIN_RUNS. The budgets let both batch sizes reach the 20 runs the targets are
// defined on even where WebGPU is SwiftShader on 2 cores (a 8 x 128 round, ours + ORT, takes
// ~60 s there: ~20 min for the pair); a slower machine stops earlier and reports how many runs
// it took (infer_runs_*). BENCH_SIDE_BY_SIDE_MAX_RUNS=<n> lowers the cap (quick checks).
// Correctness: every contender's embeddings must have cosine >= COSINE_MIN with ours on the CPU
// (itself tested against the NumPy reference), else the suite fails: nobody benchmarks a broken
// model. ort_webgpu_ran is 1 only if the session was created with the WebGPU EP alone listed
// (no fallback), ORT holds a GPUDevice, and ORT's own node-placement log puts >= 90% of the nodes
// on the WebGPU EP (shape ops go to the CPU by design).
//
// Units: *_ms milliseconds; memory *_mb MiB (2^20 bytes); ready_served_mb_* MB (10^6 bytes).
// Ratios are ours / theirs of a time: lower is better (1.0 = as fast).
// Keys (c = ours_webgpu, ours_cpu, ort_webgpu, ort_wasm, raw_pipe where it applies):
//   ready_ratio_vs_ort_webgpu, ready_ratio_cpu_vs_ort_wasm, ready_ratio_vs_raw_pipe
//   infer_ratio_vs_ort_webgpu_b1, infer_ratio_vs_ort_webgpu_b8,
//   cpu_infer_ratio_vs_ort_wasm_b1, cpu_infer_ratio_vs_ort_wasm_b8, ort_webgpu_ran
//   ready_ms_<c>, ready_wasm_mb_<c>, ready_js_heap_peak_mb_<c>, ready_array_buffer_peak_mb_<c>,
//   ready_requests_<c>, ready_served_mb_<c>; ours only: ready_{init,device,before_weights,
//   weights,after_weights}_ms_<c> (package import+init; waiting for the WebGPU device the package
//   acquires at start; config/tokenizer/index and, on WebGPU, compiling every kernel; weight
//   streaming; after the last weight byte until ready), ready_pipelines_ours_webgpu
//   first_embedding_ms_<c> (load + cold 1 x 128 run, same page), first_embedding_ratio_vs_ort_webgpu,
//   first_embedding_ratio_cpu_vs_ort_wasm
//   infer_ms_b{1,8}_<c> (median), infer_min_ms_b{1,8}_<c>, infer_cold_ms_b{1,8}_<c>,
//   infer_runs_b{1,8}_<c>, infer_ratio_best_vs_ort_webgpu_b{1,8} (fastest run / fastest run),
//   infer_iqr_pct_b{1,8}_<c> (interquartile range / median), ours: infer_batch_ms_b{1,8}_<c>
//   (execution alone, the Embedder's lastBatchMillis)
//   cosine_min_vs_ours_cpu_<c>, ort_webgpu_nodes_webgpu, ort_webgpu_nodes_cpu, ort_threads,
//   cross_origin_isolated, side_by_side_seq_tokens
// Contract: see bench/run.mjs.
import { execFile } from 'node:child_process';
import path from 'node:path';
import { promisify } from 'node:util';
import { BATCH, SEQ, makeInputs, verifyWithTokenizers } from '../lib/inputs.mjs';
import { accessLogWindow, heapSampler } from '../lib/probes.mjs';
import { inferOnce, loadOrt, loadOurs, loadRaw } from '../lib/side_by_side_page.mjs';

const MODEL_URL = '/.cache/models/all-MiniLM-L6-v2/';
const ORT_DIST = '/node_modules/onnxruntime-web/dist/';
const PAGE = '/bench/pages/side-by-side.html';
const LOAD_ROUNDS = 3;
const MAX_RUNS = (() => {
  const n = Number(process.env.BENCH_SIDE_BY_SIDE_MAX_RUNS ?? 20);
  if (!Number.isInteger(n) || n < 1) throw new Error(`BENCH_SIDE_BY_SIDE_MAX_RUNS must be a positive integer, got ${process.env.BENCH_SIDE_BY_SIDE_MAX_RUNS}`);
  return n;
})();
const MIN_RUNS = Math.min(3, MAX_RUNS);
/** Seconds of timed rounds per pair and batch size, after which rounds stop (>= MIN_RUNS). */
const BUDGET_S = { 1: 330, 8: 1500 };
const COSINE_MIN = 0.9999;
const MIB = 1 << 20;

const CONTENDERS = {
  ours_webgpu: [loadOurs, { modelUrl: MODEL_URL, backend: 'webgpu', seq: SEQ, batch: BATCH }],
  ours_cpu: [loadOurs, { modelUrl: MODEL_URL, backend: 'cpu', seq: SEQ, batch: BATCH }],
  ort_webgpu: [loadOrt, { modelUrl: `${MODEL_URL}model.onnx`, ep: 'webgpu', distUrl: ORT_DIST, seq: SEQ }],
  ort_wasm: [loadOrt, { modelUrl: `${MODEL_URL}model.onnx`, ep: 'wasm', distUrl: ORT_DIST, seq: SEQ }],
  raw_pipe: [loadRaw, { weightsUrl: `${MODEL_URL}model.safetensors` }],
};
const PAIRS = [['ours_webgpu', 'ort_webgpu'], ['ours_cpu', 'ort_wasm']];

function quantile(xs, q) {
  const s = [...xs].sort((a, b) => a - b);
  const at = (s.length - 1) * q;
  const lo = Math.floor(at);
  return s[lo] + (s[Math.min(lo + 1, s.length - 1)] - s[lo]) * (at - lo);
}
const median = (xs) => quantile(xs, 0.5);

function minCosine(got, want) {
  let worst = 1;
  got.forEach((row, i) => {
    let dot = 0; let ng = 0; let nw = 0;
    for (let k = 0; k < row.length; k++) { dot += row[k] * want[i][k]; ng += row[k] ** 2; nw += want[i][k] ** 2; }
    worst = Math.min(worst, dot / Math.sqrt(ng * nw));
  });
  return worst;
}

/** Builds model.onnx when needed; resolves to the venv's python. */
async function prepare(ctx) {
  const { stdout, stderr } = await promisify(execFile)('bash', [path.join(ctx.root, 'scripts/prepare-onnx.sh')], { maxBuffer: 1 << 24 });
  for (const line of stderr.trim().split('\n')) ctx.log(line);
  return stdout.trim().split('\n').at(-1);
}

/** One load of `name` in a fresh page, with its probes; the page stays open when `keep`. */
async function loadOnce(ctx, name, keep) {
  const [load, arg] = CONTENDERS[name];
  const p = await ctx.openPage(PAGE, () => window.pageReady);
  const sampler = await heapSampler(p.page);
  const served = await accessLogWindow(ctx.accessLog);
  let result;
  let heap;
  try {
    result = await p.evaluate(load, arg);
  } finally {
    heap = await sampler.stop();
  }
  const log = await served.read();
  if (!keep) await p.page.close();
  return { ...result, heap, served: log, page: keep ? p : null };
}

/**
 * The inference series of one pair at `rows` rows: {name: {cold, ms[], batchMs[], rows}}; `cold`
 * is the first run at this batch size (its embeddings are `rows`), `ms` the timed warm runs.
 */
async function series(ctx, pages, pair, rows, inputs) {
  const out = {};
  for (const name of pair) {
    const cold = await pages[name].evaluate(inferOnce, { inputs, rows, returnRows: true });
    out[name] = { cold: cold.ms, ms: [], batchMs: [], rows: cold.rows };
    if (cold.ms < 1000) for (let i = 0; i < 2; i++) await pages[name].evaluate(inferOnce, { inputs, rows });
  }
  const started = Date.now();
  for (let round = 0; round < MAX_RUNS; round++) {
    if (round >= MIN_RUNS && Date.now() - started > BUDGET_S[rows] * 1000) break;
    const order = round % 2 ? [...pair].reverse() : pair;
    for (const name of order) {
      const r = await pages[name].evaluate(inferOnce, { inputs, rows });
      out[name].ms.push(r.ms);
      if (r.batchMs !== null) out[name].batchMs.push(r.batchMs);
    }
  }
  for (const name of pair) {
    ctx.log(`${rows} x ${SEQ}: ${name} median ${median(out[name].ms).toFixed(1)} ms over ${out[name].ms.length} runs (cold ${out[name].cold.toFixed(0)} ms)`);
  }
  return out;
}

export async function run(ctx) {
  const python = await prepare(ctx);
  const modelDir = path.join(ctx.root, '.cache/models/all-MiniLM-L6-v2');
  const inputs = await makeInputs(modelDir);
  await verifyWithTokenizers(python, modelDir, inputs.texts, inputs.ids);
  ctx.log(`inputs: ${BATCH} texts of exactly ${SEQ} tokens each (checked with the tokenizers package)`);

  // Load rounds; the last round's pages (not the raw pipe's) stay open for inference.
  const loads = Object.fromEntries(Object.keys(CONTENDERS).map((n) => [n, []]));
  const pages = {};
  const names = Object.keys(CONTENDERS);
  for (let round = 0; round < LOAD_ROUNDS; round++) {
    const last = round === LOAD_ROUNDS - 1;
    for (let i = 0; i < names.length; i++) {
      const name = names[(i + round) % names.length];
      const keep = last && name !== 'raw_pipe';
      const r = await loadOnce(ctx, name, keep);
      loads[name].push(r);
      if (keep) pages[name] = r.page;
    }
    ctx.log(`load round ${round + 1}: ${names.map((n) => `${n} ${loads[n].at(-1).readyMs.toFixed(0)} ms`).join(', ')}`);
  }

  const result = { side_by_side_seq_tokens: SEQ };
  for (const [name, runs] of Object.entries(loads)) {
    const last = runs.at(-1);
    Object.assign(result, {
      [`ready_ms_${name}`]: median(runs.map((r) => r.readyMs)),
      [`ready_wasm_mb_${name}`]: Math.max(...runs.map((r) => r.wasmBytes)) / MIB,
      [`ready_js_heap_peak_mb_${name}`]: Math.max(...runs.map((r) => r.heap.used)) / MIB,
      [`ready_array_buffer_peak_mb_${name}`]: Math.max(...runs.map((r) => r.heap.arrayBuffers)) / MIB,
      [`ready_requests_${name}`]: last.served.requests,
      [`ready_served_mb_${name}`]: last.served.bytes / 1e6,
    });
    if (name.startsWith('ours')) {
      for (const [key, field] of [['init', 'initMs'], ['device', 'deviceMs'], ['before_weights', 'beforeWeightsMs'], ['weights', 'weightsMs'], ['after_weights', 'afterWeightsMs']]) {
        result[`ready_${key}_ms_${name}`] = median(runs.map((r) => r[field]));
      }
    }
  }
  result.ready_ratio_vs_ort_webgpu = result.ready_ms_ours_webgpu / result.ready_ms_ort_webgpu;
  result.ready_ratio_cpu_vs_ort_wasm = result.ready_ms_ours_cpu / result.ready_ms_ort_wasm;
  result.ready_ratio_vs_raw_pipe = result.ready_ms_ours_webgpu / result.ready_ms_raw_pipe;
  result.ready_pipelines_ours_webgpu = loads.ours_webgpu.at(-1).pipelines;
  result.ort_threads = loads.ort_wasm.at(-1).threads;
  result.cross_origin_isolated = (await pages.ort_wasm.evaluate(() => self.crossOriginIsolated)) ? 1 : 0;

  // Inference, pair by pair.
  const measured = {};
  for (const pair of PAIRS) {
    for (const rows of [1, BATCH]) {
      const s = await series(ctx, pages, pair, rows, inputs);
      for (const name of pair) (measured[name] ??= {})[rows] = s[name];
    }
  }
  for (const [name, byRows] of Object.entries(measured)) {
    for (const [rows, s] of Object.entries(byRows)) {
      const b = `b${rows}_${name}`;
      const mid = median(s.ms);
      Object.assign(result, {
        [`infer_ms_${b}`]: mid,
        [`infer_min_ms_${b}`]: Math.min(...s.ms),
        [`infer_cold_ms_${b}`]: s.cold,
        [`infer_runs_${b}`]: s.ms.length,
        [`infer_iqr_pct_${b}`]: ((quantile(s.ms, 0.75) - quantile(s.ms, 0.25)) / mid) * 100,
      });
      if (s.batchMs.length) result[`infer_batch_ms_${b}`] = median(s.batchMs);
    }
  }
  // Time to the first embedding: the kept page's load plus its cold 1 x 128 run (ORT compiles
  // its WebGPU shaders on the first run, webdelegate before its load resolves).
  for (const name of Object.keys(measured)) {
    result[`first_embedding_ms_${name}`] = loads[name].at(-1).readyMs + measured[name][1].cold;
  }
  result.first_embedding_ratio_vs_ort_webgpu = result.first_embedding_ms_ours_webgpu / result.first_embedding_ms_ort_webgpu;
  result.first_embedding_ratio_cpu_vs_ort_wasm = result.first_embedding_ms_ours_cpu / result.first_embedding_ms_ort_wasm;
  for (const rows of [1, BATCH]) {
    result[`infer_ratio_vs_ort_webgpu_b${rows}`] = result[`infer_ms_b${rows}_ours_webgpu`] / result[`infer_ms_b${rows}_ort_webgpu`];
    result[`cpu_infer_ratio_vs_ort_wasm_b${rows}`] = result[`infer_ms_b${rows}_ours_cpu`] / result[`infer_ms_b${rows}_ort_wasm`];
    // The same from each side's fastest run: a shared machine only ever slows runs down.
    result[`infer_ratio_best_vs_ort_webgpu_b${rows}`] = result[`infer_min_ms_b${rows}_ours_webgpu`] / result[`infer_min_ms_b${rows}_ort_webgpu`];
  }

  // Same answers, or the numbers mean nothing.
  const broken = [];
  for (const name of ['ours_webgpu', 'ort_webgpu', 'ort_wasm']) {
    const cos = Math.min(...[1, BATCH].map((rows) => minCosine(measured[name][rows].rows, measured.ours_cpu[rows].rows)));
    result[`cosine_min_vs_ours_cpu_${name}`] = cos;
    if (!(cos >= COSINE_MIN)) broken.push(`${name}: min cosine ${cos} with ours on the CPU`);
  }
  if (broken.length) throw new Error(`embeddings differ (need cosine >= ${COSINE_MIN}):\n${broken.join('\n')}`);

  // Did ORT's WebGPU EP really run the graph?
  const placed = await pages.ort_webgpu.evaluate(() => window.contender.placements());
  const onGpu = placed.counts.WebGpuExecutionProvider ?? 0;
  const total = Object.values(placed.counts).reduce((a, b) => a + b, 0);
  result.ort_webgpu_nodes_webgpu = onGpu;
  result.ort_webgpu_nodes_cpu = placed.counts.CPUExecutionProvider ?? 0;
  result.ort_webgpu_ran = loads.ort_webgpu.every((r) => r.webgpuDevice) && total > 0 && onGpu >= 0.9 * total ? 1 : 0;
  ctx.log(`ORT WebGPU placements: ${JSON.stringify(placed.counts)} -> ort_webgpu_ran ${result.ort_webgpu_ran}`);
  for (const p of Object.values(pages)) await p.evaluate(() => window.contender.destroy()).catch(() => {});
  return result;
}
