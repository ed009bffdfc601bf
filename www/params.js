// The page's URL parameters, checked: ?backend=auto|webgpu|cpu, ?corpus=N (sentences to
// index), ?model=URL (the model directory). Anything invalid falls back to the default and is
// reported, so a typo never silently changes what the page measures.
import { corpus } from './corpus.js';

export const DEFAULT_MODEL_URL = '/.cache/models/all-MiniLM-L6-v2/';
const BACKENDS = ['auto', 'webgpu', 'cpu'];

export function readParams(search = location.search) {
  const q = new URLSearchParams(search);
  const warnings = [];
  let backend = q.get('backend') ?? 'auto';
  if (!BACKENDS.includes(backend)) {
    warnings.push(`?backend=${backend} is not one of ${BACKENDS.join(', ')}; using auto`);
    backend = 'auto';
  }
  const total = corpus().length;
  let corpusSize = total;
  if (q.has('corpus')) {
    const n = Number(q.get('corpus'));
    if (Number.isInteger(n) && n >= 1) corpusSize = Math.min(n, total);
    else warnings.push(`?corpus=${q.get('corpus')} is not a positive integer; using all ${total} sentences`);
  }
  let modelUrl = DEFAULT_MODEL_URL;
  if (q.get('model')) {
    try {
      modelUrl = new URL(q.get('model'), location.href).href;
      if (!modelUrl.endsWith('/')) modelUrl += '/';
    } catch {
      warnings.push(`?model=${q.get('model')} is not a URL; using ${DEFAULT_MODEL_URL}`);
    }
  }
  return { backend, corpusSize, modelUrl, warnings };
}
