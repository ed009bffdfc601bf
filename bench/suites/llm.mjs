// LLM side by side: webdelegate's Generator (CPU and WebGPU backends) against wllama (npm
// @wllama/wllama, pinned in package.json: llama.cpp compiled to wasm, memory64 + JSPI build, in a
// worker) on the same GGUF file (Gemma 3 270M Q4_K_M, 253 MB) from the same nginx in the same
// headless Chromium. Configurations:
//   ours_cpu        our CPU backend on one thread, plain page
//   ours_cpu_mt     our CPU backend on its worker pool with hardwareConcurrency threads (as
//                   wllama_mt), cross-origin isolated page
//   ours_cpu_mt_int8  ours_cpu_mt with the load option cpuActivations: 'int8' (activation rows
//                   quantized to int8 for the quantized projections, as llama.cpp's CPU does)
//   ours_webgpu     our WebGPU backend (SwiftShader here: WebGPU emulated on the CPU), plain page
//   wllama_1t       wllama, 1 thread, n_gpu_layers 0, plain page
//   wllama_mt       wllama, navigator.hardwareConcurrency threads, n_gpu_layers 0, on a
//                   cross-origin isolated page (COOP/COEP from nginx: bench/lib/locations.mjs)
//   wllama_webgpu   wllama asked for its WebGPU backend (n_gpu_layers 99, threads as wllama_mt,
//                   isolated page). llama.cpp's WebGPU backend needs `shader-f16`; when the
//                   adapter lacks it, no WebGPU device registers and every layer stays on the
//                   CPU: llm_wllama_webgpu_layers_on_gpu says how many layers its log placed on
//                   a device other than the CPU, llm_wllama_webgpu_adapter_in_worker and
//                   _adapter_has_shader_f16 what its worker's navigator.gpu offers; one page.
//   ours_cpu_mt_loaded, wllama_mt_loaded  ours_cpu_mt and wllama_mt beside the same competing
//                   load: a Node process spinning on one core, started after the idle wait and
//                   before the page opens, killed when it closes
// Every configuration runs in a fresh blank page (bench/pages/side-by-side.html) per round, each
// in a browser context of its own (own processes, empty storage), in a rotating order, with a wait for the browser's processes to go idle before each load; wllama's
// own model cache (OPFS / Cache Storage) is emptied before each of its pages, and nginx sends
// Cache-Control: no-store, so every page is a first visit for both.
// Same work: the same prompt text, exactly PROMPT_TOKENS tokens for both tokenizers (ours counts
// it; wllama's own prompt_n must equal it, else the suite fails), greedy decoding of NEW_TOKENS
// tokens (ours_webgpu: WEBGPU_NEW_TOKENS, SwiftShader is slow). Before any figure counts, the
// first AGREE_TOKENS generated pieces of every configuration are compared with ours_cpu's:
// llm_first16_equal_<c> is how many leading pieces are equal, of llm_first16_compared_<c> (16, or
// fewer where the configuration generates fewer; reported either way).
//
// Keys (c = ours_cpu, ours_cpu_mt, ours_cpu_mt_int8, ours_webgpu, wllama_1t, wllama_mt, wllama_webgpu,
// ours_cpu_mt_loaded, wllama_mt_loaded):
//   llm_ttft_ms_<c>          time to first token from a blank page: runtime import + compile,
//                            model download, prefill, first token (median over pages)
//   llm_ready_ms_<c>         the same up to "model loaded"
//   llm_prefill_tok_s_<c>    prompt tokens / the contender's own prefill time (ours: Generator
//                            stats; wllama: llama.cpp's timings.prompt_ms)
//   llm_decode_tok_s_<c>     (pieces - 1) / (last piece - first piece), wall clock in the page;
//                            llm_decode_spread_<c> = (max - min) / median over pages
//   llm_wllama_own_decode_tok_s_<c>  llama.cpp's own timings.predicted_per_second (cross-check)
//   llm_wasm_mb_<c>          wasm memory once done (MiB; wasm memory never shrinks: its peak);
//                            wllama's is its worker's memory (read through the worker hooks)
//   llm_js_heap_peak_mb_<c>, llm_array_buffer_peak_mb_<c>  the page's main-thread V8 heap and
//                            array-buffer peaks (DevTools protocol; a worker's own heap is not in it)
//   llm_requests_<c>, llm_served_mb_<c>  requests and body MB (10^6) nginx served for the page
//   llm_pages_<c>, llm_prompt_tokens, llm_new_tokens, llm_threads_wllama_mt
//   llm_<c>_p<i>_decode_tok_s, llm_<c>_p<i>_ttft_ms   every page's own figures
//   llm_decode_ratio_vs_wllama_cpu   ours_cpu decode / the best wllama CPU configuration's
//                                    (higher is better); llm_decode_ratio_vs_wllama_1t likewise
//   llm_prefill_ratio_vs_wllama_cpu  the same for prefill (higher is better)
//   llm_decode_ratio_vs_wllama_same_threads  ours_cpu_mt decode / wllama_mt's, the same thread
//                                    count (llm_threads_ours_cpu_mt = llm_threads_wllama_mt)
//   llm_decode_ratio_vs_wllama_same_threads_int8  the same for ours_cpu_mt_int8
//   llm_shared_mb_ours_cpu_mt        bytes our pool's shared memory held (weights, scratch)
//   llm_wasm_mb_ratio_vs_wllama_cpu_mt  llm_wasm_mb_ours_cpu_mt / llm_wasm_mb_wllama_mt (the same
//                                    thread count; lower is better)
//   llm_decode_ratio_vs_wllama_same_threads_loaded  ours_cpu_mt_loaded decode / wllama_mt_loaded's:
//                                    both beside the same competing load (a process spinning on
//                                    one core for the whole page; higher is better)
//   llm_decode_loaded_over_idle_ours_cpu_mt  ours_cpu_mt_loaded decode / ours_cpu_mt's
//   llm_ttft_ratio_vs_wllama         our best time to first token / wllama's best (lower is better)
//   llm_baseline_gbps_cpu    the page's memory bandwidth: wasm simd128 sum over 256 MiB (the
//                            qmatvec suite's baseline), median of 5 after 2 warm-ups
//   llm_weight_mb_per_token  weight bytes one decode step reads: every tensor of the file once
//                            (the tied Q8_0 table as lm_head; the embedding gather's one row is
//                            negligible) = the tensor bytes our provider fetched
//   llm_decode_bandwidth_fraction_cpu  weight bytes per token x ours_cpu tokens/s / baseline
// Units: *_ms milliseconds, *_mb MiB except served MB. Needs `npm run setup` and build:pkg.
// Environment (quick checks): BENCH_LLM_PAGES=<n> pages per configuration (default 3),
// BENCH_LLM_ONLY=<regex> runs only the matching configurations (the ratios then need ours_cpu and
// both wllama CPU configurations), BENCH_LLM_DEBUG=1 logs each page's steps,
// BENCH_LLM_POOL_SHARE_ALWAYS=1 starts our pools sharing every op with the workers (no adaptive
// fallback to the caller: the pool as it was before 12-08, for a before/after).
import { spawn } from 'node:child_process';
import { ISOLATED_PREFIX } from '../lib/locations.mjs';
import { generateOurs, generateWllama } from '../lib/llm_page.mjs';
import { accessLogWindow, heapSampler, waitForBrowserIdle, withDeadline } from '../lib/probes.mjs';
import { median, spread } from '../lib/stats.mjs';

const MODEL_URL = '/.cache/models/gemma-3-270m/gemma-3-270m-q4_k_m.gguf';
const WLLAMA = '/node_modules/@wllama/wllama/esm/';
const PAGE = 'bench/pages/side-by-side.html?hookWorkers=1';
const PROMPT_TOKENS = 128;
const NEW_TOKENS = 128;
const WEBGPU_NEW_TOKENS = 8;
const AGREE_TOKENS = 16;
const CONTEXT = 1024;
const PAGES = Number(process.env.BENCH_LLM_PAGES ?? 3);
const MIB = 1 << 20;

// A passage of plain English prose; the prompt is its first words that make exactly
// PROMPT_TOKENS tokens (BOS included).
const PASSAGE = `The history of the lighthouse is a history of coastlines, trade and the slow work of making
the sea a little less dangerous. Long before electric lamps, sailors relied on fires lit on
hilltops and towers, and the great tower at Alexandria became a wonder of the ancient world.
Through the centuries, builders learned to set stone against the waves, to grind lenses that
gathered weak flames into strong beams, and to give each light its own pattern of flashes so
that a captain could tell one headland from another on a moonless night. Keepers lived in
isolated stations, trimming wicks, winding clockwork and writing the weather into logbooks
that historians still read today. When radio beacons and satellite navigation arrived, many
lights were automated or switched off, yet the towers remain, standing on rocks and cliffs as
reminders of how much of our world was once steered by a single lamp in the dark. Visitors now
climb their spiral stairs to look out over the water and imagine the long watches of the past.`;

/**
 * A competing load: a Node process spinning on one core until `stop()` (the OS schedules it
 * against the page's threads as it would a build or another tab).
 */
function competingLoad() {
  const child = spawn(process.execPath, ['-e', 'for (;;) {}'], { stdio: 'ignore' });
  return { stop: () => child.kill('SIGKILL') };
}

/** How many leading pieces of `a` and `b` are equal, up to `n`. */
function leadingEqual(a, b, n) {
  let k = 0;
  while (k < n && k < a.length && k < b.length && a[k] === b[k]) k += 1;
  return k;
}

/**
 * The prompt (exactly PROMPT_TOKENS tokens with our tokenizer, which matches llama.cpp's on its
 * fixture), the weight bytes a decode step reads, and the page's memory bandwidth, from one
 * harness page.
 */
async function prepare(ctx) {
  const p = await ctx.openHarnessPage({ bench: true }); // BandwidthBench: the bench build
  const prepared = await p.evaluate(async ({ modelUrl, passage, want }) => {
    const wd = window.wd;
    const gen = await wd.Generator.load(modelUrl, { backend: 'cpu', contextLength: 256 });
    const words = passage.split(/\s+/);
    let prompt = null;
    for (let k = 1; k <= words.length && !prompt; k++) {
      const text = words.slice(0, k).join(' ');
      if (gen.tokenize(text).length === want) prompt = text;
    }
    // No word boundary lands on it: cut the token ids instead, if their text tokenizes back.
    if (!prompt) {
      const ids = gen.tokenize(passage);
      const text = gen.detokenize(Array.from(ids.slice(1, want)));
      if (gen.tokenize(text).length === want) prompt = text;
    }
    const weightBytes = gen.stats().bytesLoaded;
    gen.destroy();
    if (!prompt) throw new Error(`no prefix of the passage tokenizes to exactly ${want} tokens`);
    const bench = new wd.BandwidthBench(256 << 20);
    let sink = 0;
    for (let i = 0; i < 2; i++) sink ^= bench.sum();
    const times = [];
    for (let i = 0; i < 5; i++) {
      const t0 = performance.now();
      sink ^= bench.sum();
      times.push(performance.now() - t0);
    }
    times.sort((a, b) => a - b);
    const gbps = bench.bytes / (times[2] / 1000) / 1e9;
    bench.free();
    return { prompt, weightBytes, gbps, sink };
  }, { modelUrl: MODEL_URL, passage: PASSAGE, want: PROMPT_TOKENS });
  await p.page.close();
  return prepared;
}

/**
 * A page in a browser context of its own (own processes, empty caches and storage: a first
 * visit), at `url`, once the blank page is ready. An uncaught page error fails the suite.
 * (A cross-origin isolated page opened in the runner's shared context, after the harness page,
 * hung its renderer here: the DevTools protocol never attached.)
 */
async function freshPage(browser, url) {
  const context = await browser.newContext();
  const page = await context.newPage();
  const errors = [];
  page.on('pageerror', (e) => errors.push(e));
  await page.goto(url);
  await page.waitForFunction(() => window.pageReady, undefined, { timeout: 30_000 });
  return {
    page,
    evaluate: async (fn, arg) => {
      const r = await page.evaluate(fn, arg);
      if (errors.length) throw new Error(`uncaught page error: ${errors[0].stack ?? errors[0]}`);
      return r;
    },
    close: () => context.close(),
  };
}

export async function run(ctx) {
  const { prompt, weightBytes, gbps } = await prepare(ctx);
  ctx.log(`prompt: ${PROMPT_TOKENS} tokens (${prompt.length} characters); weights read per token ${(weightBytes / 1e6).toFixed(1)} MB; page bandwidth ${gbps.toFixed(2)} GB/s`);

  const common = { modelUrl: MODEL_URL, prompt, contextLength: CONTEXT, ...(process.env.BENCH_LLM_POOL_SHARE_ALWAYS ? { participation: false } : {}) };
  const wllama = { ...common, wasmUrl: `${WLLAMA}wasm/wllama.wasm`, moduleUrl: `${WLLAMA}index.js`, newTokens: NEW_TOKENS };
  const blank = await ctx.openPage(`/${PAGE}`, () => window.pageReady);
  const cores = await blank.evaluate(() => navigator.hardwareConcurrency || 1);
  const browser = blank.page.context().browser();
  await blank.page.close();
  const ONLY = process.env.BENCH_LLM_ONLY ? new RegExp(process.env.BENCH_LLM_ONLY) : null;
  const CONFIGS = {
    ours_cpu: { fn: generateOurs, arg: { ...common, backend: 'cpu', newTokens: NEW_TOKENS }, pages: PAGES },
    ours_cpu_mt: { fn: generateOurs, arg: { ...common, backend: 'cpu', newTokens: NEW_TOKENS, threads: cores }, pages: PAGES, isolated: true },
    ours_cpu_mt_int8: { fn: generateOurs, arg: { ...common, backend: 'cpu', newTokens: NEW_TOKENS, threads: cores, cpuActivations: 'int8' }, pages: PAGES, isolated: true },
    ours_webgpu: { fn: generateOurs, arg: { ...common, backend: 'webgpu', newTokens: WEBGPU_NEW_TOKENS }, pages: 1 },
    wllama_1t: { fn: generateWllama, arg: { ...wllama, threads: 1, gpuLayers: 0 }, pages: PAGES },
    wllama_mt: { fn: generateWllama, arg: { ...wllama, threads: cores, gpuLayers: 0 }, pages: PAGES, isolated: true },
    wllama_webgpu: { fn: generateWllama, arg: { ...wllama, threads: cores, gpuLayers: 99, newTokens: 32, verbose: true }, pages: 1, isolated: true },
    // The pool configurations again, each beside the same competing load (a process spinning on
    // one core from before its page opens until it closes).
    ours_cpu_mt_loaded: { fn: generateOurs, arg: { ...common, backend: 'cpu', newTokens: NEW_TOKENS, threads: cores }, pages: PAGES, isolated: true, loaded: true },
    wllama_mt_loaded: { fn: generateWllama, arg: { ...wllama, threads: cores, gpuLayers: 0 }, pages: PAGES, isolated: true, loaded: true },
  };
  const names = Object.keys(CONFIGS).filter((n) => !ONLY || ONLY.test(n));
  const runs = Object.fromEntries(names.map((n) => [n, []]));
  const rounds = Math.max(...names.map((n) => CONFIGS[n].pages));
  for (let round = 0; round < rounds; round++) {
    for (let i = 0; i < names.length; i++) {
      const name = names[(i + round) % names.length];
      const { fn, arg, pages, isolated, loaded } = CONFIGS[name];
      if (runs[name].length >= pages) continue;
      const waited = await waitForBrowserIdle();
      const load = loaded ? competingLoad() : null;
      if (process.env.BENCH_LLM_DEBUG) ctx.log(`${name}: idle after ${waited} ms, opening its page`);
      const p = await freshPage(browser, `${ctx.serverUrl}${isolated ? ISOLATED_PREFIX : '/'}${PAGE}`);
      // Attaching the DevTools protocol to a cross-origin isolated page opened in the runner's
      // shared context once never resolved here: give up on the heap probe after 10 s.
      const sampler = await withDeadline(heapSampler(p.page), 10_000) ?? { stop: async () => ({ used: NaN, arrayBuffers: NaN }) };
      const served = await accessLogWindow(ctx.accessLog);
      let r;
      let heap;
      // A progress line every 30 s while a page runs (its stage, where the contender sets one).
      const started = Date.now();
      const watch = setInterval(() => {
        p.page.evaluate(() => window.__stage ?? 'running').then((stage) => ctx.log(`${name}: ${stage} for ${Math.round((Date.now() - started) / 1000)} s`), () => {});
      }, 30_000);
      try {
        r = await p.evaluate(fn, arg);
      } finally {
        clearInterval(watch);
        heap = await sampler.stop();
      }
      const log = await served.read();
      if (name.startsWith('wllama')) {
        // wllama's own worker is the first the page started; its pthread workers sit in
        // Atomics.wait and never answer an evaluate, so each ask has a deadline.
        const ask = (w, fn) => withDeadline(w.evaluate(fn).catch(() => null), 5_000);
        const main = p.page.workers()[0];
        r.wasmBytes = main ? (await ask(main, () => (self.wasmMemoryBytes ? self.wasmMemoryBytes() : 0))) ?? 0 : 0;
        // What WebGPU the worker sees (llama.cpp's WebGPU backend needs shader-f16).
        r.workerAdapter = main ? await ask(main, async () => {
          const adapter = await navigator.gpu?.requestAdapter();
          return adapter ? { f16: adapter.features.has('shader-f16') } : null;
        }) : null;
        r.isolated = await p.evaluate(() => self.crossOriginIsolated);
        await p.evaluate(() => window.wllamaInstance?.exit()).catch(() => {});
      }
      await p.close();
      load?.stop();
      runs[name].push({ ...r, heap, served: log });
      ctx.log(`${name} page ${runs[name].length} (after ${waited} ms idle wait): ttft ${r.ttftMs.toFixed(0)} ms, prefill ${r.promptTokens} tok in ${r.prefillMs.toFixed(0)} ms, decode ${r.decodeTokS.toFixed(2)} tok/s over ${r.generated}, wasm ${(r.wasmBytes / MIB).toFixed(1)} MiB, ${log.requests} requests ${(log.bytes / 1e6).toFixed(1)} MB${r.participation ? `; pool shared ${r.participation.sharedOps} ops, alone ${r.participation.soloOps}, fallbacks ${r.participation.fallbacks}` : ''}${r.log ? `; ${r.log.filter((l) => /backend_ptrs|device/.test(l)).slice(0, 2).join(' | ')}` : ''}`);
    }
  }

  const out = { llm_prompt_tokens: PROMPT_TOKENS, llm_new_tokens: NEW_TOKENS, llm_baseline_gbps_cpu: gbps, llm_weight_mb_per_token: weightBytes / MIB };
  // Our CPU backend's continuation is the reference; with BENCH_LLM_ONLY leaving it out, the
  // first configuration that ran.
  const reference = (runs.ours_cpu?.[0] ?? Object.values(runs).flat()[0]).texts;
  const problems = [];
  for (const [name, list] of Object.entries(runs)) {
    for (const r of list) {
      if (r.promptTokens !== PROMPT_TOKENS) problems.push(`${name}: its prompt had ${r.promptTokens} tokens, not ${PROMPT_TOKENS}`);
    }
    const tok = list.map((r) => r.decodeTokS);
    Object.assign(out, {
      [`llm_ttft_ms_${name}`]: median(list.map((r) => r.ttftMs)),
      [`llm_ready_ms_${name}`]: median(list.map((r) => r.readyMs)),
      [`llm_prefill_tok_s_${name}`]: median(list.map((r) => r.promptTokens / (r.prefillMs / 1000))),
      [`llm_decode_tok_s_${name}`]: median(tok),
      [`llm_decode_spread_${name}`]: spread(tok),
      [`llm_wasm_mb_${name}`]: Math.max(...list.map((r) => r.wasmBytes)) / MIB,
      [`llm_requests_${name}`]: median(list.map((r) => r.served.requests)),
      [`llm_served_mb_${name}`]: median(list.map((r) => r.served.bytes / 1e6)),
      [`llm_pages_${name}`]: list.length,
      [`llm_first16_equal_${name}`]: Math.min(...list.map((r) => leadingEqual(r.texts, reference, AGREE_TOKENS))),
      [`llm_first16_compared_${name}`]: Math.min(AGREE_TOKENS, ...list.map((r) => r.generated)),
    });
    const heaps = list.filter((r) => Number.isFinite(r.heap.used));
    if (heaps.length) {
      out[`llm_js_heap_peak_mb_${name}`] = Math.max(...heaps.map((r) => r.heap.used)) / MIB;
      out[`llm_array_buffer_peak_mb_${name}`] = Math.max(...heaps.map((r) => r.heap.arrayBuffers)) / MIB;
    } else ctx.log(`${name}: no heap figures (the DevTools protocol did not attach to its pages)`);
    list.forEach((r, i) => {
      out[`llm_${name}_p${i + 1}_decode_tok_s`] = r.decodeTokS;
      out[`llm_${name}_p${i + 1}_ttft_ms`] = r.ttftMs;
    });
    if (name.startsWith('wllama')) out[`llm_wllama_own_decode_tok_s_${name}`] = median(list.map((r) => r.ownDecodeTokS));
  }
  if (problems.length) throw new Error(`not the same work:\n${problems.join('\n')}`);
  for (const [name, list] of Object.entries(runs)) {
    const k = out[`llm_first16_equal_${name}`];
    if (k < out[`llm_first16_compared_${name}`]) ctx.log(`${name}: only the first ${k} of ${AGREE_TOKENS} pieces equal ours_cpu's: ${JSON.stringify(list[0].texts.slice(0, AGREE_TOKENS).join(''))} vs ${JSON.stringify(reference.slice(0, AGREE_TOKENS).join(''))}`);
  }
  if (runs.wllama_webgpu?.length) {
    const gpuLog = runs.wllama_webgpu[0].log;
    out.llm_wllama_webgpu_adapter_in_worker = runs.wllama_webgpu[0].workerAdapter ? 1 : 0;
    out.llm_wllama_webgpu_adapter_has_shader_f16 = runs.wllama_webgpu[0].workerAdapter?.f16 ? 1 : 0;
    out.llm_wllama_webgpu_layers_on_gpu = gpuLog.filter((l) => /assigned to device/.test(l) && !/device CPU/.test(l)).length;
    ctx.log(`wllama_webgpu log: ${gpuLog.filter((l) => /backend_ptrs|webgpu|f16/i.test(l)).slice(0, 6).join(' | ') || '(no WebGPU line)'}`);
  }
  out.llm_threads_wllama_mt = runs.wllama_mt[0].threads;
  if (runs.ours_cpu_mt?.length) {
    out.llm_threads_ours_cpu_mt = runs.ours_cpu_mt[0].threads;
    out.llm_shared_mb_ours_cpu_mt = Math.max(...runs.ours_cpu_mt.map((r) => r.sharedMb));
    if (out.llm_threads_ours_cpu_mt !== out.llm_threads_wllama_mt) problems.push(`ours_cpu_mt ran ${out.llm_threads_ours_cpu_mt} threads, wllama_mt ${out.llm_threads_wllama_mt}: not the same thread count`);
  }
  if (runs.ours_cpu_mt_int8?.length && runs.ours_cpu_mt_int8[0].threads !== out.llm_threads_wllama_mt) problems.push(`ours_cpu_mt_int8 ran ${runs.ours_cpu_mt_int8[0].threads} threads, wllama_mt ${out.llm_threads_wllama_mt}: not the same thread count`);
  if (!runs.wllama_mt.every((r) => r.isolated && r.multithread)) problems.push('wllama_mt did not run multi-threaded on a cross-origin isolated page');
  if (problems.length) throw new Error(problems.join('\n'));

  const bestCpu = Math.max(out.llm_decode_tok_s_wllama_1t, out.llm_decode_tok_s_wllama_mt);
  out.llm_decode_ratio_vs_wllama_cpu = out.llm_decode_tok_s_ours_cpu / bestCpu;
  out.llm_decode_ratio_vs_wllama_1t = out.llm_decode_tok_s_ours_cpu / out.llm_decode_tok_s_wllama_1t;
  if (runs.ours_cpu_mt?.length) out.llm_decode_ratio_vs_wllama_same_threads = out.llm_decode_tok_s_ours_cpu_mt / out.llm_decode_tok_s_wllama_mt;
  if (runs.ours_cpu_mt_int8?.length) out.llm_decode_ratio_vs_wllama_same_threads_int8 = out.llm_decode_tok_s_ours_cpu_mt_int8 / out.llm_decode_tok_s_wllama_mt;
  out.llm_prefill_ratio_vs_wllama_cpu = out.llm_prefill_tok_s_ours_cpu / Math.max(out.llm_prefill_tok_s_wllama_1t, out.llm_prefill_tok_s_wllama_mt);
  // Over the configurations that ran (BENCH_LLM_ONLY may leave some out).
  const fastest = (names) => Math.min(...names.map((n) => out[`llm_ttft_ms_${n}`]).filter(Number.isFinite));
  out.llm_ttft_ratio_vs_wllama = fastest(['ours_cpu', 'ours_cpu_mt', 'ours_webgpu']) / fastest(['wllama_1t', 'wllama_mt', 'wllama_webgpu']);
  out.llm_wasm_mb_wllama = Math.max(out.llm_wasm_mb_wllama_1t, out.llm_wasm_mb_wllama_mt);
  if (runs.ours_cpu_mt?.length) out.llm_wasm_mb_ratio_vs_wllama_cpu_mt = out.llm_wasm_mb_ours_cpu_mt / out.llm_wasm_mb_wllama_mt;
  if (runs.ours_cpu_mt_loaded?.length && runs.wllama_mt_loaded?.length) out.llm_decode_ratio_vs_wllama_same_threads_loaded = out.llm_decode_tok_s_ours_cpu_mt_loaded / out.llm_decode_tok_s_wllama_mt_loaded;
  if (runs.ours_cpu_mt_loaded?.length && runs.ours_cpu_mt?.length) out.llm_decode_loaded_over_idle_ours_cpu_mt = out.llm_decode_tok_s_ours_cpu_mt_loaded / out.llm_decode_tok_s_ours_cpu_mt;
  out.llm_decode_bandwidth_fraction_cpu = (weightBytes * out.llm_decode_tok_s_ours_cpu) / (gbps * 1e9);
  // A quick check (BENCH_LLM_ONLY) leaves out the ratios of configurations that did not run.
  if (ONLY) for (const [key, value] of Object.entries(out)) if (!Number.isFinite(value)) delete out[key];
  return out;
}
