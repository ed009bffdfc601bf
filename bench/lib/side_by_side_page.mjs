// In-page halves of the side-by-side benchmark (bench/suites/side_by_side.mjs). Each function is
// handed to page.evaluate, so it is self-contained: it runs in bench/pages/side-by-side.html (a
// page that has loaded no runtime yet, with `wasmMemoryBytes()` on window) and returns plain data.
//
// loadX(arg) starts the clock, imports the runtime (its JS and wasm come from nginx like the
// model), builds the model and stops the clock when it can run: `readyMs`. It keeps the model on
// `window.contender` for `inferOnce`. With `arg.first` (one batch: `{texts, ids}`) it runs that
// batch at once, in the same evaluate, as the page's first inference: `firstMs` (so nothing a
// runtime still compiles in the background after its load resolved escapes the clock).
// `arg.base` is the server prefix the runtime and the model come from ('/' = no-store, the
// runner's CACHED_PREFIX for repeat visits). Raw pipe: one fetch of model.safetensors and one
// writeBuffer into a GPU buffer, ended by onSubmittedWorkDone (the floor any loader pays).

/**
 * Ours: import + init of the package, then Embedder.load (config, tokenizer, weights index,
 * program, kernels compiled, weights streamed into the backend). Progress events split the load
 * into: before the first weight bytes, streaming the weights, and after the last byte.
 */
export async function loadOurs({ base, modelUrl, backend, seq, batch, persistentCache, first, threads }) {
  const t0 = performance.now();
  const wd = await import(`${base}pkg/webdelegate.js`);
  await wd.default();
  // `threads`: the CPU backend on a worker pool of that many threads (a cross-origin isolated
  // page), started inside the timed load as a page using it would; 'auto' is ORT's rule below
  // (min(4, cores)), so both thread pools run as many threads.
  if (threads) {
    const count = threads === 'auto' ? Math.min(4, navigator.hardwareConcurrency || 1) : threads;
    const { CpuThreadPool } = await import(`${base}pkg/cpu-threads/pool.js`);
    const pool = await CpuThreadPool.start({ threads: count });
    wd.useCpuThreads(pool);
    window.cpuPool = pool;
  }
  const tInit = performance.now();
  // The package acquires its WebGPU device in the background from start; Embedder.load waits
  // for it (on any backend), so waiting here first splits that wait out of the load.
  await wd.ready();
  const tDevice = performance.now();
  let tFirstBytes = NaN;
  let tAllBytes = NaN;
  const onProgress = (e) => {
    const now = performance.now();
    if (Number.isNaN(tFirstBytes) && e.bytesDone > 0) tFirstBytes = now;
    if (e.bytesDone === e.bytesTotal) tAllBytes = now;
  };
  const cache = persistentCache ? { persistentCache } : {};
  const embedder = await wd.Embedder.load(`${base}${modelUrl}`, { backend, maxTokens: seq, batchSize: batch, onProgress, ...cache });
  const t1 = performance.now();
  if (embedder.backend !== backend) throw new Error(`asked for ${backend}, the Embedder runs on ${embedder.backend}`);
  if (embedder.maxTokens !== seq) throw new Error(`maxTokens ${embedder.maxTokens}, expected ${seq}`);
  const run = async (texts) => {
    const rows = await embedder.embed(texts);
    return { rows, batchMs: embedder.lastBatchMillis };
  };
  // memory(): the page's wasm memory, the Embedder's own report by purpose (MemoryStats) and
  // the bytes the pool's allocator holds now (its shared memory less the regions it freed).
  const memory = () => ({ wasmBytes: window.wasmMemoryBytes(), stats: embedder.memoryStats(), poolInUse: window.cpuPool?.bytesInUse ?? 0 });
  window.contender = {
    run,
    inputs: 'texts',
    memory,
    destroy: () => {
      embedder.destroy();
      window.cpuPool?.terminate();
    },
  };
  let firstMs = NaN;
  let firstRows = null;
  if (first) {
    const t2 = performance.now();
    firstRows = (await run(first.texts)).rows.map((r) => Array.from(r));
    firstMs = performance.now() - t2;
  }
  return {
    readyMs: t1 - t0,
    firstMs,
    firstRows,
    initMs: tInit - t0,
    deviceMs: tDevice - tInit,
    beforeWeightsMs: tFirstBytes - tDevice,
    weightsMs: tAllBytes - tFirstBytes,
    afterWeightsMs: t1 - tAllBytes,
    stats: embedder.loadStats(),
    wasmBytes: window.wasmMemoryBytes(),
    threads: Number(wd.getOption('cpu', [{ key: 'threads', value: 0 }])[0].value),
    // Compute pipelines the WebGPU backend compiled during the load (all of them: it compiles
    // every kernel a program can dispatch before init returns).
    pipelines: backend === 'webgpu' ? Number(wd.getOption('webgpu', [{ key: 'pipelines', value: 0 }])[0].value) : 0,
  };
}

/** onnxruntime-web: import of its ES module bundle, then InferenceSession.create(url). */
export async function loadOrt({ base, modelUrl, ep, distUrl, seq, first, persistentCache }) {
  const t0 = performance.now();
  const dist = `${base}${distUrl}`;
  const ort = await import(`${dist}${ep === 'webgpu' ? 'ort.webgpu.min.mjs' : 'ort.wasm.min.mjs'}`);
  ort.env.wasm.wasmPaths = dist;
  // Threads need SharedArrayBuffer, i.e. a cross-origin isolated page; webdelegate runs on one.
  const threads = self.crossOriginIsolated ? Math.min(4, navigator.hardwareConcurrency || 1) : 1;
  ort.env.wasm.numThreads = threads;
  ort.env.wasm.proxy = false;
  ort.env.logLevel = 'warning';
  // No fallback EP listed: if this one cannot start, create() rejects.
  const options = { executionProviders: [ep], graphOptimizationLevel: 'all' };
  // With `persistentCache`, the model's bytes come through the Cache API as a page caching its
  // model would keep them (transformers.js does this): fetched and stored on the first visit.
  let model = `${base}${modelUrl}`;
  if (persistentCache) {
    const cache = await caches.open(persistentCache);
    let response = await cache.match(model);
    if (!response) {
      await cache.put(model, await fetch(model));
      response = await cache.match(model);
    }
    model = new Uint8Array(await response.arrayBuffer());
  }
  const session = await ort.InferenceSession.create(model, options);
  const t1 = performance.now();
  const webgpuDevice = ep === 'webgpu' ? Boolean(await ort.env.webgpu.device) : false;
  /**
   * Which provider ORT placed the graph's nodes on: a second session of the same model, created
   * with ORT's verbose log captured (not part of any timing). Resolves to {counts: {provider:
   * nodes}, transformers: the graph transformers ORT's log says modified the graph (its fusions)}.
   */
  const placements = async () => {
    window.captureConsole = [];
    let lines;
    try {
      const probe = await ort.InferenceSession.create(model, { ...options, logSeverityLevel: 0, logVerbosityLevel: 0 });
      await probe.release();
    } finally {
      lines = window.captureConsole;
      window.captureConsole = undefined;
    }
    const counts = {};
    for (const line of lines) {
      const all = /All nodes placed on \[(\w+)\]\. Number of nodes: (\d+)/.exec(line);
      if (all) counts[all[1]] = (counts[all[1]] ?? 0) + Number(all[2]);
      const some = /Node\(s\) placed on \[(\w+)\]\. Number of nodes: (\d+)/.exec(line);
      if (some) counts[some[1]] = (counts[some[1]] ?? 0) + Number(some[2]);
    }
    const transformers = [...new Set(lines.map((l) => /GraphTransformer (\w+) modified: (?:true|1)/.exec(l)?.[1]).filter(Boolean))];
    return { counts, transformers, lines: lines.filter((l) => /placed on|Node placements/.test(l)).slice(0, 40) };
  };
  const run = async (ids) => {
    const rows = ids.length;
    const flat = BigInt64Array.from(ids.flat(), (v) => BigInt(v));
    const feeds = {
      input_ids: new ort.Tensor('int64', flat, [rows, seq]),
      attention_mask: new ort.Tensor('int64', new BigInt64Array(rows * seq).fill(1n), [rows, seq]),
    };
    const out = await session.run(feeds);
    const data = await out.sentence_embedding.getData();
    const dim = data.length / rows;
    return { rows: Array.from({ length: rows }, (_, i) => data.slice(i * dim, (i + 1) * dim)) };
  };
  const memory = () => ({ wasmBytes: window.wasmMemoryBytes(), stats: null });
  window.contender = { run, inputs: 'ids', placements, memory, destroy: () => session.release() };
  let firstMs = NaN;
  let firstRows = null;
  if (first) {
    const t2 = performance.now();
    firstRows = (await run(first.ids)).rows.map((r) => Array.from(r));
    firstMs = performance.now() - t2;
  }
  return { readyMs: t1 - t0, firstMs, firstRows, wasmBytes: window.wasmMemoryBytes(), threads, webgpuDevice, version: ort.env.versions?.web ?? '' };
}

/** The raw pipe: adapter + device, one fetch of the whole file, one writeBuffer. */
export async function loadRaw({ base, weightsUrl }) {
  const t0 = performance.now();
  const adapter = await navigator.gpu.requestAdapter();
  const device = await adapter.requestDevice({ requiredLimits: { maxBufferSize: adapter.limits.maxBufferSize } });
  const body = await (await fetch(`${base}${weightsUrl}`)).arrayBuffer();
  const size = Math.ceil(body.byteLength / 4) * 4;
  const buffer = device.createBuffer({ size, usage: GPUBufferUsage.COPY_DST | GPUBufferUsage.STORAGE });
  const padded = size === body.byteLength ? body : (() => { const b = new Uint8Array(size); b.set(new Uint8Array(body)); return b; })();
  device.queue.writeBuffer(buffer, 0, padded);
  await device.queue.onSubmittedWorkDone();
  const t1 = performance.now();
  buffer.destroy();
  device.destroy();
  return { readyMs: t1 - t0, bytes: body.byteLength, wasmBytes: window.wasmMemoryBytes(), threads: 1 };
}

/**
 * One timed run of `window.contender` on the first `rows` of `inputs` ({texts, ids}, the same
 * batch as texts for ours and as token ids for ORT), from the call to the embeddings in JS
 * arrays (ours: tokenisation included; ORT: tensor creation and getData included). Returns the
 * milliseconds, ours' own batch time (`lastBatchMillis`, execution only) and, when asked, the
 * embeddings.
 */
export async function inferOnce({ inputs, rows, returnRows }) {
  const c = window.contender;
  const input = c.inputs === 'texts' ? inputs.texts.slice(0, rows) : inputs.ids.slice(0, rows);
  const t0 = performance.now();
  const out = await c.run(input);
  const ms = performance.now() - t0;
  return {
    ms,
    batchMs: out.batchMs ?? null,
    rows: returnRows ? out.rows.map((r) => Array.from(r)) : null,
  };
}
