// The semantic-search demo: load all-MiniLM-L6-v2 (progress, throughput, cancel), embed the
// built-in corpus in batches (per-batch latency), then search as you type. Reports its stage in
// document.body.dataset.state (loading | indexing | ready | error) and exposes
// window.demo.search(query) -> [{text, topic, score}] (and the weights load's summed progress,
// window.demo.loadProgress).
import { drawBars } from './chart.js';
import { corpus } from './corpus.js';
import { el, fillSection, keyValueTable } from './dom.js';
import { fmtMs } from './format.js';
import { VectorIndex } from './index.js';
import { watchLifecycle } from './lifecycle.js';
import { metricsChart } from './metrics.js';
import { describeError, loadModel, statsRows } from './model.js';
import { readParams } from './params.js';
import { loadSummary, loadTracker, progressBar } from './progress.js';
import { searchPanel } from './search.js';

const BATCH = 16;
const setState = (s) => { document.body.dataset.state = s; };

function backendRows(embedder, requested, notes) {
  const info = Object.fromEntries((embedder.backendInfo() ?? []).map(({ key, value }) => [key, String(value)]));
  const adapter = ['adapter.vendor', 'adapter.architecture', 'adapter.device', 'adapter.description']
    .map((k) => info[k]).filter(Boolean).join(' · ');
  const rows = [
    ['backend requested', requested],
    ['backend used', embedder.backend],
    ['fallback', embedder.fallbackReason || notes.join(' ') || 'none'],
    ['adapter', adapter || (embedder.backend === 'cpu' ? 'none (CPU)' : 'not reported')],
    ['embedding size', String(embedder.dim)],
    ['max tokens', String(embedder.maxTokens)],
  ];
  for (const [k, v] of Object.entries(info)) if (!k.startsWith('adapter.')) rows.push([k, v]);
  return rows;
}

export async function runDemo(wd, wasmMemory) {
  setState('loading');
  const params = readParams();
  const model = document.getElementById('model');
  const indexSection = document.getElementById('index');
  const searchSection = document.getElementById('search');
  const lifecycleBadge = document.getElementById('lifecycle');
  const chart = metricsChart(document.getElementById('metrics-chart'), document.getElementById('metrics-note'), wasmMemory);
  let embedder = null;
  let tracker = null;

  // ---- load
  const notes = [...params.warnings];
  const loadBar = progressBar('Weights');
  const controller = new AbortController();
  const cancel = el('button', { type: 'button', onclick: () => controller.abort() }, 'Cancel');
  const noteList = el('ul', { className: 'notes' }, ...notes.map((n) => el('li', {}, n)));
  const addNote = (n) => { notes.push(n); noteList.append(el('li', {}, n)); };
  fillSection(model, 'loading',
    el('p', { className: 'status' }, `Loading ${params.modelUrl} on the ${params.backend} backend…`),
    loadBar.node, cancel, noteList);
  tracker = loadTracker(loadBar, (t, mbps) => chart.throughput(tracker.start, t, mbps));
  const lifecycle = watchLifecycle(wd, lifecycleBadge, document.getElementById('lifecycle-detail'), () => tracker?.latest);
  try {
    embedder = await loadModel(wd, {
      modelUrl: params.modelUrl,
      backend: params.backend,
      tracker,
      signal: controller.signal,
      onNote: addNote,
    });
  } catch (e) {
    console.error(e);
    chart.stop();
    setState('error');
    fillSection(model, 'error',
      el('p', { className: 'status' }, `Could not load the model: ${describeError(e, params.modelUrl)}`),
      noteList);
    searchSection.querySelector('.search-status').textContent = 'Search is unavailable: the model did not load.';
    lifecycle.setPhase('error');
    return;
  }
  lifecycle.setPhase('ready');
  if (embedder.fallbackReason) {
    addNote(`Running on the ${embedder.backend} backend instead: ${embedder.fallbackReason}.`);
  }
  const secs = tracker.elapsedSeconds();
  const loadStats = embedder.loadStats();
  loadBar.set(1, loadSummary(loadStats, tracker.latest, secs));
  fillSection(model, 'ready',
    loadBar.node,
    keyValueTable(backendRows(embedder, params.backend, notes)),
    el('h3', {}, 'Load statistics'),
    keyValueTable(statsRows(loadStats)),
    ...(notes.length ? [noteList] : []));

  // ---- index
  setState('indexing');
  const items = corpus(params.corpusSize);
  const index = new VectorIndex(embedder.dim);
  const indexBar = progressBar('Embedding the corpus');
  const latencyText = el('p', { className: 'status small' }, '');
  const bars = el('canvas', { className: 'bars' });
  fillSection(indexSection, 'loading', indexBar.node, latencyText, bars);
  const latencies = [];
  const t0 = performance.now();
  try {
    for (let i = 0; i < items.length; i += BATCH) {
      const batch = items.slice(i, i + BATCH);
      const tb = performance.now();
      const vectors = await embedder.embed(batch.map((x) => x.text));
      const wall = performance.now() - tb;
      index.add(batch, vectors);
      const ms = Number.isFinite(embedder.lastBatchMillis) ? embedder.lastBatchMillis : wall;
      latencies.push(ms);
      const sorted = [...latencies].sort((a, b) => a - b);
      indexBar.set(index.size / items.length, `${index.size} / ${items.length} sentences`);
      latencyText.textContent = `batch ${latencies.length} (${batch.length} texts): ${fmtMs(ms)} · ` +
        `median ${fmtMs(sorted[Math.floor(sorted.length / 2)])} · max ${fmtMs(sorted.at(-1))} · ` +
        `${(index.size / ((performance.now() - t0) / 1000)).toFixed(1)} sentences/s`;
      drawBars(bars, latencies);
    }
  } catch (e) {
    console.error(e);
    chart.stop();
    setState('error');
    fillSection(indexSection, 'error', el('p', { className: 'status' }, `Embedding the corpus failed: ${describeError(e)}`));
    return;
  }
  chart.stop();
  indexSection.dataset.state = 'ready';
  indexBar.set(1, `${index.size} sentences, ${latencies.length} batches of up to ${BATCH} on ${embedder.backend}, ` +
    `${((performance.now() - t0) / 1000).toFixed(1)} s`);

  // ---- search
  const panel = searchPanel(searchSection, { embedder, index });
  window.demo = { search: (q) => panel.search(String(q)), embedder, loadProgress: tracker.latest };
  searchSection.dataset.state = 'ready';
  setState('ready');
}
