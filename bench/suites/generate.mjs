// Text generation with the real Gemma 3 270M Q4_K_M GGUF (253 MB, streamed by Range from nginx)
// in headless Chromium through the built package: correctness against two oracles, speed, and
// wasm memory. Report keys (issue "Text generation in the browser"):
//
//   gen_logits_cosine_min_cpu / _webgpu   lowest cosine between our logits and the float64 NumPy
//                                         reference's (scripts/gemma_reference.py, which
//                                         dequantizes the same file with the `gguf` package) over
//                                         every position the reference stored logits for
//                                         (first, last, 512, 513 of each prompt)
//   gen_top1_agree_cpu / _webgpu          fraction of checked positions whose top-1 (our greedy
//                                         token) equals the reference's; CPU: every position of
//                                         the 12 prompts (2363); WebGPU: every position of the
//                                         shortest prompt (SwiftShader is far too slow for more)
//   gen_teacher_forced_agree_llamacpp_cpu fraction of the positions of llama.cpp's own greedy
//                                         continuations (32 per prompt, llama-cpp-python 0.3.36,
//                                         tests/fixtures/gemma/llamacpp_greedy.json), fed
//                                         through our model, where our top-1 equals llama.cpp's
//                                         next token
//   gen_wasm_memory_mb_webgpu             wasm memory once the WebGPU generator is ready (MiB)
//   gen_prefill_tok_s_cpu                 prompt tokens per second of prefill (a 128-token
//                                         prompt, median of 3 runs after a warm-up)
//   gen_decode_tok_s_cpu / _webgpu        generated tokens per second after the first (CPU:
//                                         32 tokens, median of 3 runs; WebGPU: 4 tokens, one run)
//   kv_cache_bytes_ratio_f16              WebGPU with gpuPrecision 'f16': the KV cache's bytes
//                                         (programStats().stateBytes) over the f32 generator's
//                                         at the same context (target <= 0.55)
//   gen_logits_cosine_min_f16, gen_top1_agree_f16
//                                         the same f16 generator against the float64 reference
//                                         on the WebGPU prompt (targets >= 0.999, >= 0.98);
//                                         only where the adapter has shader-f16
// Every _cpu key also as _cpu_int8: the CPU backend with int8 activations (the load option
// cpuActivations: 'int8'), whose numerics are llama.cpp's CPU backend's.
// plus gen_*_spread ((max - min) / median of the medians' runs), gen_*_positions (how many
// positions a fraction is of) and gen_max_gap_at_disagreement_llamacpp_cpu (our logit margin
// between our top-1 and llama.cpp's token where they differ: small means a near-tie).
//
// The WebGPU figures in CI come from SwiftShader (WebGPU emulated on the CPU): they measure that
// emulator, not a GPU. Needs `npm run setup` (model, reference) and `npm run build:pkg`.
import { readFile } from 'node:fs/promises';
import path from 'node:path';

const MODEL_URL = '/.cache/models/gemma-3-270m/gemma-3-270m-q4_k_m.gguf';
const REFERENCE_URL = '/.cache/reference/gemma-3-270m/';
const RUNS = 3;

/** The lowest cosine between rows of `a` and `b` (`rows` rows of `width`), in float64. */
function minRowCosine(a, b, width, rows) {
  let min = Infinity;
  for (let row = 0; row < rows; row++) {
    let dot = 0;
    let na = 0;
    let nb = 0;
    for (let v = row * width; v < (row + 1) * width; v++) {
      dot += a[v] * b[v];
      na += a[v] * a[v];
      nb += b[v] * b[v];
    }
    min = Math.min(min, dot / Math.sqrt(na * nb));
  }
  return min;
}

function median(values) {
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.floor(sorted.length / 2)];
}

function spread(values) {
  const m = median(values);
  return m > 0 ? (Math.max(...values) - Math.min(...values)) / m : 0;
}

export async function run(ctx) {
  const llamacpp = JSON.parse(await readFile(path.join(ctx.root, 'tests/fixtures/gemma/llamacpp_greedy.json'), 'utf8'));
  const out = {};

  // --- CPU: every prompt, teacher-forced through the reference prompt and llama.cpp's continuation;
  // with its default f32 activations (`_cpu`), then with int8 activations (`_cpu_int8`: the load
  // option cpuActivations 'int8', llama.cpp's CPU numerics) ---
  for (const [suffix, cpuActivations] of [['cpu', 'f32'], ['cpu_int8', 'int8']]) {
    const p = await ctx.openHarnessPage();
    const r = await p.evaluate(
      async ({ modelUrl, referenceUrl, llamacpp, runs, cosineSource, cpuActivations }) => {
        const wd = window.wd;
        const minRowCosine = new Function(`return ${cosineSource}`)();
        const reference = await (await fetch(referenceUrl + 'reference.json')).json();
        const vocab = reference.n_vocab;
        const gen = await wd.Generator.load(modelUrl, { backend: 'cpu', cpuActivations, logits: true, contextLength: 1024 });
        let cosineMin = Infinity;
        let top1Agree = 0;
        let top1Total = 0;
        let forcedAgree = 0;
        let forcedTotal = 0;
        let maxGap = 0;
        const disagreements = [];
        for (const prompt of reference.prompts) {
          const continuation = llamacpp.prompts.find((c) => c.name === prompt.name);
          const forced = continuation ? continuation.continuation.slice(0, -1) : [];
          const ids = [...prompt.ids, ...forced];
          const ev = await gen.evaluate(ids, { logitPositions: prompt.logit_positions });
          // Top-1 over the prompt's positions.
          for (let i = 0; i < prompt.ids.length; i++) {
            top1Total += 1;
            if (ev.tokens[i] === prompt.top1[i]) top1Agree += 1;
          }
          // Cosine at the positions the reference stored logits for.
          const stored = new Float32Array(await (await fetch(referenceUrl + prompt.logits_file)).arrayBuffer());
          cosineMin = Math.min(cosineMin, minRowCosine(ev.logits, stored, vocab, prompt.logit_positions.length));
          // Teacher forcing on llama.cpp's greedy continuation: the prediction after the last
          // prompt token and after each forced token.
          if (continuation) {
            const n = prompt.ids.length;
            const positions = [];
            continuation.continuation.forEach((token, j) => {
              forcedTotal += 1;
              if (ev.tokens[n - 1 + j] === token) forcedAgree += 1;
              else positions.push(n - 1 + j);
            });
            if (positions.length) disagreements.push({ ids, positions, continuation: continuation.continuation, n });
          }
        }
        // The gap at a disagreement needs the logits there: one more pass over those prompts.
        for (const { ids, positions, continuation, n } of disagreements) {
          const ev = await gen.evaluate(ids, { logitPositions: positions });
          positions.forEach((position, row) => {
            const ours = ev.tokens[position];
            const theirs = continuation[position - (n - 1)];
            maxGap = Math.max(maxGap, ev.logits[row * vocab + ours] - ev.logits[row * vocab + theirs]);
          });
        }
        gen.destroy();

        // Speed: a 128-token prompt (the long prompt's first 128 tokens), 32 new tokens.
        const plain = await wd.Generator.load(modelUrl, { backend: 'cpu', cpuActivations, contextLength: 1024 });
        const long = reference.prompts.reduce((a, b) => (b.ids.length > a.ids.length ? b : a));
        const text = plain.detokenize(long.ids.slice(1, 128));
        const prefill = [];
        const decode = [];
        for (let i = 0; i <= runs; i++) {
          await plain.reset();
          await plain.generateText(text, { maxNewTokens: 32 });
          const s = plain.stats();
          if (i === 0) continue; // warm-up
          prefill.push(s.prefillTokensPerSecond);
          decode.push(s.decodeTokensPerSecond);
        }
        const promptTokens = plain.stats().promptTokens;
        plain.destroy();
        return { cosineMin, top1Agree, top1Total, forcedAgree, forcedTotal, maxGap, prefill, decode, promptTokens };
      },
      { modelUrl: MODEL_URL, referenceUrl: REFERENCE_URL, llamacpp, runs: RUNS, cosineSource: minRowCosine.toString(), cpuActivations },
    );
    ctx.log(`${suffix}: cosine min ${r.cosineMin}, top-1 ${r.top1Agree}/${r.top1Total}, teacher-forced ${r.forcedAgree}/${r.forcedTotal} (max gap ${r.maxGap.toFixed(3)}), prefill ${r.prefill.map((v) => v.toFixed(1))} tok/s (${r.promptTokens} tokens), decode ${r.decode.map((v) => v.toFixed(2))} tok/s`);
    Object.assign(out, {
      [`gen_logits_cosine_min_${suffix}`]: r.cosineMin,
      [`gen_top1_agree_${suffix}`]: r.top1Agree / r.top1Total,
      [`gen_top1_positions_${suffix}`]: r.top1Total,
      [`gen_teacher_forced_agree_llamacpp_${suffix}`]: r.forcedAgree / r.forcedTotal,
      [`gen_teacher_forced_positions_llamacpp_${suffix}`]: r.forcedTotal,
      [`gen_max_gap_at_disagreement_llamacpp_${suffix}`]: r.maxGap,
      [`gen_prefill_tok_s_${suffix}`]: median(r.prefill),
      [`gen_prefill_tok_s_${suffix}_spread`]: spread(r.prefill),
      [`gen_decode_tok_s_${suffix}`]: median(r.decode),
      [`gen_decode_tok_s_${suffix}_spread`]: spread(r.decode),
    });
  }

  // --- WebGPU (SwiftShader in CI): the shortest prompt, memory once ready, a few decode steps ---
  let f32StateBytes = 0;
  {
    const p = await ctx.openHarnessPage();
    const r = await p.evaluate(
      async ({ modelUrl, referenceUrl, cosineSource }) => {
        const wd = window.wd;
        const minRowCosine = new Function(`return ${cosineSource}`)();
        if (!(await wd.ready())) throw new Error('no WebGPU device in the benchmark browser');
        const reference = await (await fetch(referenceUrl + 'reference.json')).json();
        const vocab = reference.n_vocab;
        const prompt = reference.prompts.reduce((a, b) => (b.ids.length < a.ids.length ? b : a));
        const gen = await wd.Generator.load(modelUrl, { backend: 'webgpu', logits: true, contextLength: 64 });
        const memoryMb = wd.wasmMemoryBytes() / 2 ** 20;
        const ev = await gen.evaluate(prompt.ids, { logitPositions: prompt.logit_positions });
        let top1Agree = 0;
        prompt.ids.forEach((_, i) => {
          if (ev.tokens[i] === prompt.top1[i]) top1Agree += 1;
        });
        const stored = new Float32Array(await (await fetch(referenceUrl + prompt.logits_file)).arrayBuffer());
        const cosineMin = minRowCosine(ev.logits, stored, vocab, prompt.logit_positions.length);
        await gen.reset();
        await gen.generateText(gen.detokenize(prompt.ids.slice(1)), { maxNewTokens: 5 });
        const s = gen.stats();
        const backend = gen.backend;
        const { stateBytes, precision } = gen.programStats();
        gen.destroy();
        return { memoryMb, top1Agree, top1Total: prompt.ids.length, cosineMin, decode: s.decodeTokensPerSecond, backend, name: prompt.name, stateBytes, precision };
      },
      { modelUrl: MODEL_URL, referenceUrl: REFERENCE_URL, cosineSource: minRowCosine.toString() },
    );
    if (r.backend !== 'webgpu') throw new Error(`the WebGPU generator ran on ${r.backend}`);
    f32StateBytes = r.stateBytes;
    ctx.log(`webgpu (SwiftShader in CI): prompt ${r.name}, precision ${r.precision}, cosine min ${r.cosineMin}, top-1 ${r.top1Agree}/${r.top1Total}, wasm memory ${r.memoryMb.toFixed(1)} MiB, decode ${r.decode.toFixed(4)} tok/s`);
    Object.assign(out, {
      gen_logits_cosine_min_webgpu: r.cosineMin,
      gen_top1_agree_webgpu: r.top1Agree / r.top1Total,
      gen_top1_positions_webgpu: r.top1Total,
      gen_wasm_memory_mb_webgpu: r.memoryMb,
      gen_decode_tok_s_webgpu: r.decode,
    });
  }
  // --- WebGPU with gpuPrecision 'f16' (the KV cache in f16, matmul tiles staged in f16), where
  // the adapter has shader-f16: the same prompt against the float64 reference, every position's
  // top-1, and the cache's bytes against the f32 generator's above (same context) ---
  {
    const p = await ctx.openHarnessPage();
    const r = await p.evaluate(
      async ({ modelUrl, referenceUrl, cosineSource }) => {
        const wd = window.wd;
        const adapter = await navigator.gpu?.requestAdapter();
        if (!adapter?.features.has('shader-f16')) return { absent: 'the adapter has no shader-f16' };
        const minRowCosine = new Function(`return ${cosineSource}`)();
        const reference = await (await fetch(referenceUrl + 'reference.json')).json();
        const prompt = reference.prompts.reduce((a, b) => (b.ids.length < a.ids.length ? b : a));
        const gen = await wd.Generator.load(modelUrl, { backend: 'webgpu', gpuPrecision: 'f16', logits: true, contextLength: 64 });
        const stats = gen.programStats();
        const ev = await gen.evaluate(prompt.ids, { logitPositions: prompt.logit_positions });
        const top1Agree = prompt.ids.filter((_, i) => ev.tokens[i] === prompt.top1[i]).length;
        const stored = new Float32Array(await (await fetch(referenceUrl + prompt.logits_file)).arrayBuffer());
        const cosineMin = minRowCosine(ev.logits, stored, reference.n_vocab, prompt.logit_positions.length);
        gen.destroy();
        return { stats, top1Agree, top1Total: prompt.ids.length, cosineMin };
      },
      { modelUrl: MODEL_URL, referenceUrl: REFERENCE_URL, cosineSource: minRowCosine.toString() },
    );
    if (r.absent) {
      ctx.log(`webgpu f16: not measured (${r.absent}); kv_cache_bytes_ratio_f16 and gen_logits_cosine_min_f16 come from the native test on lavapipe (tests/gemma_webgpu.rs)`);
    } else {
      if (r.stats.precision !== 'f16' || !r.stats.kvCacheF16) throw new Error(`gpuPrecision f16 ran ${JSON.stringify(r.stats)}`);
      ctx.log(`webgpu f16: cosine min ${r.cosineMin}, top-1 ${r.top1Agree}/${r.top1Total}, state ${r.stats.stateBytes} bytes (f32: ${f32StateBytes})`);
      Object.assign(out, {
        kv_cache_bytes_ratio_f16: r.stats.stateBytes / f32StateBytes,
        gen_logits_cosine_min_f16: r.cosineMin,
        gen_top1_agree_f16: r.top1Agree / r.top1Total,
      });
    }
  }
  return out;
}
