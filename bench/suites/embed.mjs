// Real-model correctness as numbers, in headless Chromium: all-MiniLM-L6-v2 loaded with the
// Embedder from nginx (same origin, /.cache/models/), every sentence of
// tests/fixtures/minilm/reference.json embedded on the CPU backend and on WebGPU, and the lowest
// cosine similarity to the NumPy float64 reference reported. Keys:
//   embed_cosine_min_cpu, embed_cosine_min_webgpu   lowest cosine over the fixture sentences
//   embed_max_abs_diff_cpu, embed_max_abs_diff_webgpu   largest element difference
// Contract: see bench/run.mjs.
import { readFile } from 'node:fs/promises';
import path from 'node:path';

const MODEL_URL = '/.cache/models/all-MiniLM-L6-v2/';

export async function run(ctx) {
  const reference = JSON.parse(await readFile(path.join(ctx.root, 'tests/fixtures/minilm/reference.json'), 'utf8'));
  const bytes = Buffer.from(reference.embeddings_f32_le_base64, 'base64');
  const want = (i) => new Float32Array(bytes.buffer, bytes.byteOffset + i * reference.dim * 4, reference.dim);
  const result = {};
  for (const backend of ['cpu', 'webgpu']) {
    const page = await ctx.openHarnessPage();
    const rows = await page.evaluate(async ({ url, backend, texts }) => {
      await wd.ready();
      // One sentence per batch on WebGPU: SwiftShader is slow, and padding every short sentence to
      // the 256-token one would multiply the work.
      const embedder = await wd.Embedder.load(url, { backend, batchSize: backend === 'webgpu' ? 1 : 16 });
      const out = await embedder.embed(texts);
      embedder.destroy();
      return out.map((r) => Array.from(r));
    }, { url: MODEL_URL, backend, texts: reference.sentences });
    let minCos = 1;
    let maxAbs = 0;
    rows.forEach((got, i) => {
      const w = want(i);
      let dot = 0; let ng = 0; let nw = 0;
      for (let k = 0; k < got.length; k++) {
        dot += got[k] * w[k]; ng += got[k] * got[k]; nw += w[k] * w[k];
        maxAbs = Math.max(maxAbs, Math.abs(got[k] - w[k]));
      }
      minCos = Math.min(minCos, dot / Math.sqrt(ng * nw));
    });
    ctx.log(`${backend}: ${rows.length} sentences, min cosine ${minCos.toFixed(7)}, max abs ${maxAbs.toExponential(2)}`);
    result[`embed_cosine_min_${backend}`] = minCos;
    result[`embed_max_abs_diff_${backend}`] = maxAbs;
  }
  return result;
}
