// The CPU backend on every core: all-MiniLM-L6-v2 at 1 x 128 and 8 x 128 on our CPU backend
// with its worker pool, against onnxruntime-web's wasm EP with threads (its optimized graph,
// its fastest CPU configuration here), both on cross-origin isolated pages (nginx's
// /isolated/ location), both with the same thread count: min(4, navigator.hardwareConcurrency),
// what ORT's own default and our pool's default are. First, before ORT's page opens, on our
// page the 8 x 128 series on one thread and on that thread count (the `threads` option of the
// same pool, the same program), in turns.
//
// Timing: per contender and batch size two untimed warm-ups, then rounds in turns with a
// rotating order and a 250 ms pause before each run (machine noise hits every contender alike), medians reported with their
// interquartile spread. Embeddings: every contender's first batch is compared with our
// single-thread CPU's by cosine (>= 0.9999), or the figures mean nothing and the suite fails.
//
// Keys: cpu_threads (threads our pool ran), cpu_threads_ort (ORT's), cpu_mt_infer_ratio_vs_ort_b1
// and _b8 (ours / ORT, median times, lower is better; target <= 1.0),
// cpu_thread_scaling_b8 (8 x 128 on one thread / on cpu_threads; target >= 1.7 on 2 cores),
// cpu_mt_infer_ms_b{1,8}_{ours,ort}, cpu_mt_infer_iqr_pct_b{1,8}_{ours,ort},
// cpu_mt_infer_runs_b{1,8}, cpu_1t_infer_ms_b8_ours, cpu_mt_cosine_min.
// Contract: see bench/run.mjs.
import path from 'node:path';
import { BATCH, SEQ, makeInputs } from '../lib/inputs.mjs';
import { ISOLATED_PREFIX } from '../lib/locations.mjs';
import { prepareOnnx } from '../lib/onnx_models.mjs';
import { waitForBrowserIdle, withDeadline } from '../lib/probes.mjs';
import { inferOnce, loadOrt, loadOurs } from '../lib/side_by_side_page.mjs';
import { median, minCosine, quantile } from '../lib/stats.mjs';

const MODEL_URL = '.cache/models/all-MiniLM-L6-v2/';
const ORT_DIST = 'node_modules/onnxruntime-web/dist/';
const PAGE = 'bench/pages/side-by-side.html';
const RUNS = (() => {
  const n = Number(process.env.BENCH_CPU_THREADS_RUNS ?? 10);
  if (!Number.isInteger(n) || n < 3) throw new Error(`BENCH_CPU_THREADS_RUNS must be an integer >= 3, got ${process.env.BENCH_CPU_THREADS_RUNS}`);
  return n;
})();
const LOAD_DEADLINE_MS = 180_000;
const COSINE_MIN = 0.9999;

async function open(ctx, name, load, arg) {
  await waitForBrowserIdle();
  const p = await ctx.openPage(`${ISOLATED_PREFIX}${PAGE}`, () => window.pageReady);
  const r = await withDeadline(p.evaluate(load, { ...arg, base: ISOLATED_PREFIX }), LOAD_DEADLINE_MS);
  if (r === null) throw new Error(`${name} did not load within ${LOAD_DEADLINE_MS / 1000} s`);
  ctx.log(`${name}: ready in ${r.readyMs.toFixed(0)} ms on ${r.threads} thread(s)`);
  return { page: p, load: r };
}

/**
 * A pause before each timed run: ORT's idle pool threads spin for a while after a run (its
 * intra-op pool allows spinning) and would take a core from whichever run follows.
 */
const settle = () => new Promise((resolve) => setTimeout(resolve, 250));

/** Timed runs in turns: {name: ms[]} after two warm-ups each; `before(name)` runs untimed first. */
async function inTurns(pages, rows, inputs, before = async () => {}) {
  const out = Object.fromEntries(Object.keys(pages).map((n) => [n, []]));
  const names = Object.keys(pages);
  for (const name of names) {
    await before(name);
    for (let i = 0; i < 2; i++) await pages[name].evaluate(inferOnce, { inputs, rows });
  }
  for (let round = 0; round < RUNS; round++) {
    for (let i = 0; i < names.length; i++) {
      const name = names[(i + round) % names.length];
      await before(name);
      await settle();
      out[name].push((await pages[name].evaluate(inferOnce, { inputs, rows })).ms);
    }
  }
  return out;
}

const iqr = (ms) => ((quantile(ms, 0.75) - quantile(ms, 0.25)) / median(ms)) * 100;

export async function run(ctx) {
  await prepareOnnx(ctx);
  const inputs = await makeInputs(path.join(ctx.root, '.cache/models/all-MiniLM-L6-v2'));
  const ours = await open(ctx, 'ours_cpu_mt', loadOurs, { modelUrl: MODEL_URL, backend: 'cpu', seq: SEQ, batch: BATCH, threads: await defaultThreads(ctx) });
  const threads = ours.load.threads;
  if (threads < 2) throw new Error(`our CPU backend runs ${threads} thread(s) on an isolated page`);
  const setThreads = (n) => ours.page.evaluate(async (t) => {
    const wd = await import('/isolated/pkg/webdelegate.js');
    wd.setOption('cpu', [{ key: 'threads', value: t }]);
  }, n);
  // Ours on one thread is the reference every contender's embeddings are checked against.
  await setThreads(1);
  const want = (await ours.page.evaluate(inferOnce, { inputs, rows: BATCH, returnRows: true })).rows;

  // Scaling first, before ORT's page exists (its idle threads would compete for the cores):
  // the same page and program on one thread and on `threads`, in turns.
  const scaling = { one: [], many: [] };
  for (let round = 0; round < RUNS; round++) {
    for (const [key, n] of round % 2 ? [['many', threads], ['one', 1]] : [['one', 1], ['many', threads]]) {
      await setThreads(n);
      if (round === 0) await ours.page.evaluate(inferOnce, { inputs, rows: BATCH });
      await settle();
      scaling[key].push((await ours.page.evaluate(inferOnce, { inputs, rows: BATCH })).ms);
    }
  }
  await setThreads(threads);
  const result = { cpu_threads: threads };
  result.cpu_1t_infer_ms_b8_ours = median(scaling.one);
  result.cpu_thread_scaling_b8 = median(scaling.one) / median(scaling.many);
  ctx.log(`8 x ${SEQ}: one thread ${median(scaling.one).toFixed(1)} ms, ${threads} threads ${median(scaling.many).toFixed(1)} ms: scaling ${result.cpu_thread_scaling_b8.toFixed(2)}`);

  const ort = await open(ctx, 'ort_wasm_mt', loadOrt, { modelUrl: `${MODEL_URL}model_opt.onnx`, ep: 'wasm', distUrl: ORT_DIST, seq: SEQ });
  if (ort.load.threads !== threads) throw new Error(`ORT runs ${ort.load.threads} threads, ours ${threads}: not the same thread count`);
  const pages = { ours: ours.page, ort: ort.page };
  const cosine = Math.min(...await Promise.all(Object.values(pages).map(async (p) => minCosine((await p.evaluate(inferOnce, { inputs, rows: BATCH, returnRows: true })).rows, want))));
  if (!(cosine >= COSINE_MIN)) throw new Error(`embeddings disagree with our single-thread CPU: cosine ${cosine}`);
  Object.assign(result, { cpu_threads_ort: ort.load.threads, cpu_mt_cosine_min: cosine });
  for (const rows of [1, BATCH]) {
    const s = await inTurns(pages, rows, inputs);
    for (const name of Object.keys(pages)) {
      result[`cpu_mt_infer_ms_b${rows}_${name}`] = median(s[name]);
      result[`cpu_mt_infer_iqr_pct_b${rows}_${name}`] = iqr(s[name]);
    }
    result[`cpu_mt_infer_runs_b${rows}`] = RUNS;
    result[`cpu_mt_infer_ratio_vs_ort_b${rows}`] = result[`cpu_mt_infer_ms_b${rows}_ours`] / result[`cpu_mt_infer_ms_b${rows}_ort`];
    ctx.log(`${rows} x ${SEQ} on ${threads} threads: ours ${result[`cpu_mt_infer_ms_b${rows}_ours`].toFixed(1)} ms, ORT ${result[`cpu_mt_infer_ms_b${rows}_ort`].toFixed(1)} ms`);
  }

  for (const p of Object.values(pages)) await p.evaluate(() => window.contender?.destroy()).catch(() => {});
  return result;
}

/** min(4, navigator.hardwareConcurrency), as the browser reports it. */
async function defaultThreads(ctx) {
  const p = await ctx.openPage(`${ISOLATED_PREFIX}${PAGE}`, () => window.pageReady);
  const n = await p.evaluate(() => Math.min(4, navigator.hardwareConcurrency || 1));
  await p.page.close();
  return n;
}
