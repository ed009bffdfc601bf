// Loading the model: Embedder.load with a progress bar, a cancel button and, when the preferred
// backend fails for a reason other than the network or a cancel, one retry on the CPU backend
// (the person is told why). Resolves to {embedder, notes}; rejects with the error to show.
import { fmtMB } from './format.js';

const NO_RETRY = new Set(['AccessFailed', 'InvalidState', 'InvalidExternalData']);

export async function loadModel(wd, { modelUrl, backend, tracker, signal, onNote }) {
  const options = (b) => ({ backend: b, signal, onProgress: (e) => tracker.event(e) });
  try {
    return await wd.Embedder.load(modelUrl, options(backend));
  } catch (e) {
    if (backend === 'cpu' || NO_RETRY.has(e?.code) || signal.aborted) throw e;
    onNote(`The ${backend} backend failed (${describeError(e)}); falling back to the CPU backend.`);
    tracker.reset(); // a new provider: its load statistics start from zero
    return wd.Embedder.load(modelUrl, options('cpu'));
  }
}

/** A one-line, human explanation of a load or embed error. */
export function describeError(e, modelUrl = '') {
  const code = e?.code;
  const msg = e?.message ?? String(e);
  if (code === 'AccessFailed') return `the model could not be fetched from ${modelUrl || 'the server'} (is the server running and the path right?): ${msg}`;
  if (code === 'InvalidState' && /abort/i.test(msg)) return 'the load was cancelled';
  return code ? `${code}: ${msg}` : msg;
}

export function statsRows(stats) {
  if (!stats || typeof stats !== 'object') return [];
  const rows = [];
  for (const [k, v] of Object.entries(stats)) {
    rows.push([k, /bytes/i.test(k) && typeof v === 'number' ? `${fmtMB(v)} (${v.toLocaleString('en-US')} B)` : String(v)]);
  }
  return rows;
}
