// In-page halves of the LLM side-by-side (bench/suites/llm.mjs). Each function is handed to
// page.evaluate, so it is self-contained: it runs in bench/pages/side-by-side.html (a page that
// has loaded no runtime yet) and returns plain data.
//
// Both contenders run the same steps from the same blank page, timed on the page's clock from
// before the runtime's import: load (runtime JS + wasm + the GGUF from nginx), then one greedy
// generation of `newTokens` tokens from the same prompt text, streamed piece by piece. Time to
// first token = the first piece's arrival; prefill = the contender's own prompt-processing time;
// decode tokens/s = (pieces - 1) / (last arrival - first arrival), on the same wall clock for
// both. Each piece's text is kept so the suite can check both produce the same tokens.

/**
 * webdelegate's Generator on `backend`; with `threads`, the CPU backend on a worker pool of
 * that many threads (a cross-origin isolated page), started inside the timed load; with
 * `cpuActivations`, that load option (the CPU backend's `'int8'` activations); `participation`,
 * the pool's option of that name (`false`: every op shared with the workers).
 */
export async function generateOurs({ modelUrl, backend, prompt, newTokens, contextLength, threads, cpuActivations, participation }) {
  const t0 = performance.now();
  const wd = await import('/pkg/webdelegate.js');
  await wd.default();
  let pool = null;
  if (threads) {
    const { CpuThreadPool } = await import('/isolated/pkg/cpu-threads/pool.js');
    pool = await CpuThreadPool.start({ threads, ...(participation === undefined ? {} : { participation }) });
    wd.useCpuThreads(pool);
  }
  const gen = await wd.Generator.load(modelUrl, { backend, contextLength, ...(cpuActivations ? { cpuActivations } : {}) });
  const tReady = performance.now();
  if (gen.backend !== backend) throw new Error(`asked for ${backend}, the Generator runs on ${gen.backend} (${gen.fallbackReason})`);
  const arrivals = [];
  const texts = [];
  for await (const piece of gen.generate(prompt, { maxNewTokens: newTokens })) {
    arrivals.push(performance.now());
    texts.push(piece.text);
  }
  const stats = gen.stats();
  const out = {
    readyMs: tReady - t0,
    ttftMs: arrivals[0] - t0,
    promptTokens: stats.promptTokens,
    prefillMs: stats.prefillMs,
    generated: arrivals.length,
    decodeTokS: (arrivals.length - 1) / ((arrivals.at(-1) - arrivals[0]) / 1000),
    texts,
    weightBytes: stats.bytesLoaded,
    requests: stats.requests,
    wasmBytes: window.wasmMemoryBytes(),
    threads: Number(wd.getOption('cpu', [{ key: 'threads', value: 0 }])[0].value),
    sharedMb: pool ? pool.bytesInUse / 2 ** 20 : 0,
    // The pool's adaptive participation: ops shared, ops run on the caller alone, fallbacks.
    participation: pool?.participationStats ?? null,
    detail: `${stats.backend}, ${stats.finishReason}`,
  };
  gen.destroy();
  pool?.terminate();
  return out;
}

/**
 * wllama (llama.cpp in wasm, in a worker of its own): `threads` (1 = its single-thread build;
 * more needs a cross-origin isolated page), `gpuLayers` (0 = CPU only; 99 = every layer on its
 * WebGPU backend, if that backend starts). Its model cache (OPFS / Cache Storage of this origin)
 * is emptied first, outside the clock, so every load is a first visit. `verbose`: llama.cpp's
 * debug log (where it places each layer), kept filtered in `log`.
 */
export async function generateWllama({ modelUrl, wasmUrl, moduleUrl, prompt, newTokens, contextLength, threads, gpuLayers, verbose }) {
  window.__stage = 'clearing caches';
  const root = await navigator.storage.getDirectory();
  for await (const name of root.keys()) await root.removeEntry(name, { recursive: true });
  for (const key of await caches.keys()) await caches.delete(key);
  const log = [];
  const keep = (...args) => {
    const line = args.map(String).join(' ');
    if (/backend_ptrs|assigned to device|webgpu|shader-f16|n_threads|system_info/i.test(line)) log.push(line.slice(0, 300));
  };
  const logger = { debug: keep, log: keep, warn: keep, error: keep };

  const t0 = performance.now();
  window.__stage = 'loading';
  const { Wllama } = await import(moduleUrl);
  const wllama = new Wllama({ default: wasmUrl }, { logger });
  await wllama.loadModelFromUrl(modelUrl, { n_ctx: contextLength, n_threads: threads, n_gpu_layers: gpuLayers, n_parallel: 1, ...(verbose ? { log_level: 0 } : {}) });
  const tReady = performance.now();
  window.__stage = 'generating';
  const arrivals = [];
  const texts = [];
  let timings = null;
  await wllama.createCompletion({
    prompt,
    max_tokens: newTokens,
    temperature: 0,
    cache_prompt: false,
    stream: true,
    onData: (chunk) => {
      if (chunk.timings) timings = chunk.timings;
      const choice = chunk.choices?.[0];
      if (!choice || (choice.text === '' && choice.finish_reason)) return;
      arrivals.push(performance.now());
      texts.push(choice.text);
    },
  });
  const out = {
    readyMs: tReady - t0,
    ttftMs: arrivals[0] - t0,
    promptTokens: timings?.prompt_n ?? NaN,
    prefillMs: timings?.prompt_ms ?? NaN,
    generated: arrivals.length,
    decodeTokS: (arrivals.length - 1) / ((arrivals.at(-1) - arrivals[0]) / 1000),
    ownDecodeTokS: timings?.predicted_per_second ?? NaN,
    texts,
    threads: wllama.getNumThreads(),
    multithread: wllama.isMultithread(),
    // What llama.cpp's worker sees of WebGPU: an adapter, and whether it has shader-f16 (its
    // WebGPU backend requires it).
    workerAdapter: null,
    log,
  };
  window.wllamaInstance = wllama;
  return out;
}
