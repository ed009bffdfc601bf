// The chat and text-generation demo: Generator.load streams the GGUF's tensors by Range into the
// backend (progress, MB/s, cancel); then the Chat section talks to the model through
// chat.completions.create (./chat.js) and each Generate streams pieces as they arrive with live
// prefill and decode rates; Stop aborts within one token. URL parameters:
// ?backend=auto|webgpu|cpu, ?model=URL of a .gguf, ?context=N, ?template=URL of a Jinja chat
// template (default: the file's own; for the default model, which is the base Gemma 3 270M and
// has none, the llama.cpp Gemma template that `npm run setup` fetches). Reports its stage in
// document.body.dataset.state (loading | ready | generating | error) and exposes
// window.generateDemo = {generator, run(prompt, options) -> {text, tokens, stats},
// chat: {send(text, options) -> {content, finish, usage}}}.
import init, * as wd from 'webdelegate';
import { renderAdapter } from './adapter.js';
import { el, fillSection, keyValueTable } from './dom.js';
import { fmtMB, fmtMs } from './format.js';
import { watchLifecycle } from './lifecycle.js';
import { startCpuThreads } from './threads.js';
import { metricsChart } from './metrics.js';
import { startChat } from './chat.js';
import { describeError } from './model.js';
import { loadSummary, loadTracker, progressBar } from './progress.js';

export const DEFAULT_GGUF_URL = '/.cache/models/gemma-3-270m/gemma-3-270m-q4_k_m.gguf';
// The default model is a base model without a chat template: the Gemma turn format from the
// llama.cpp sources (fetched by `npm run setup`, not committed).
const DEFAULT_TEMPLATE_URL = '/.cache/chat-templates/templates/google-gemma-2-2b-it.jinja';
const BACKENDS = ['auto', 'webgpu', 'cpu'];
const setState = (s) => { document.body.dataset.state = s; };

function readParams(search = location.search) {
  const q = new URLSearchParams(search);
  const warnings = [];
  let backend = q.get('backend') ?? 'auto';
  if (!BACKENDS.includes(backend)) {
    warnings.push(`?backend=${backend} is not one of ${BACKENDS.join(', ')}; using auto`);
    backend = 'auto';
  }
  let modelUrl = DEFAULT_GGUF_URL;
  if (q.get('model')) {
    try { modelUrl = new URL(q.get('model'), location.href).href; } catch { warnings.push(`?model=${q.get('model')} is not a URL`); }
  }
  let context = 1024;
  if (q.has('context')) {
    const n = Number(q.get('context'));
    if (Number.isInteger(n) && n >= 2) context = n; else warnings.push(`?context=${q.get('context')} is not an integer >= 2; using ${context}`);
  }
  let templateUrl = q.has('model') ? null : DEFAULT_TEMPLATE_URL;
  if (q.get('template')) {
    try { templateUrl = new URL(q.get('template'), location.href).href; } catch { warnings.push(`?template=${q.get('template')} is not a URL`); }
  }
  return { backend, modelUrl, context, templateUrl, warnings };
}

function numberField(id) {
  const v = Number(document.getElementById(id).value);
  return Number.isFinite(v) ? v : undefined;
}

async function main() {
  setState('loading');
  const params = readParams();
  const model = document.getElementById('model');
  const adapter = document.getElementById('adapter');
  const adapterDone = renderAdapter(adapter).catch((e) => fillSection(adapter, 'error', el('p', { className: 'status' }, String(e))));
  let exports;
  try {
    exports = await init();
    document.getElementById('version').textContent = `package v${wd.version()}`;
    await wd.ready();
    await startCpuThreads(wd);
  } catch (e) {
    fillSection(model, 'error', el('p', { className: 'status' }, `Could not load the webdelegate package: ${e?.message ?? e}`));
    setState('error');
    return;
  }
  const chart = metricsChart(document.getElementById('metrics-chart'), document.getElementById('metrics-note'), exports?.memory);
  const loadBar = progressBar('Weights');
  const controller = new AbortController();
  const cancel = el('button', { type: 'button', onclick: () => controller.abort() }, 'Cancel');
  const notes = el('ul', { className: 'notes' }, ...params.warnings.map((n) => el('li', {}, n)));
  fillSection(model, 'loading', el('p', { className: 'status' }, `Loading ${params.modelUrl} on the ${params.backend} backend…`), loadBar.node, cancel, notes);
  const tracker = loadTracker(loadBar, (t, mbps) => chart.throughput(tracker.start, t, mbps));
  const lifecycle = watchLifecycle(wd, document.getElementById('lifecycle'), document.getElementById('lifecycle-detail'), () => tracker.latest);

  let chatTemplate;
  if (params.templateUrl) {
    try {
      const response = await fetch(params.templateUrl);
      if (!response.ok) throw new Error(`HTTP ${response.status}`);
      chatTemplate = await response.text();
    } catch (e) {
      notes.append(el('li', {}, `Could not fetch the chat template ${params.templateUrl} (${e.message}); using the file's own`));
    }
  }
  let generator;
  try {
    generator = await wd.Generator.load(params.modelUrl, {
      chatTemplate,
      backend: params.backend,
      contextLength: params.context,
      signal: controller.signal,
      onProgress: (e) => tracker.event(e),
    });
  } catch (e) {
    console.error(e);
    chart.stop();
    setState('error');
    lifecycle.setPhase('error');
    fillSection(model, 'error', el('p', { className: 'status' }, `Could not load the model: ${describeError(e, params.modelUrl)}`), notes);
    await adapterDone;
    return;
  }
  chart.stop();
  lifecycle.setPhase('ready');
  const secs = tracker.elapsedSeconds();
  const stats = generator.stats();
  loadBar.set(1, loadSummary({ bytesReceived: stats.bytesLoaded, requests: stats.requests }, tracker.latest, secs));
  const rows = [
    ['backend requested', params.backend],
    ['backend used', generator.backend],
    ['why', generator.fallbackReason || 'as requested'],
    ['architecture', stats.architecture],
    ['vocabulary', stats.vocabSize.toLocaleString('en-US')],
    ['context', `${stats.contextLength} tokens`],
    ['weights received', `${fmtMB(stats.bytesLoaded)} in ${stats.requests} requests`],
  ];
  fillSection(model, 'ready', loadBar.node, keyValueTable(rows), notes);

  const prompt = document.getElementById('prompt');
  const runButton = document.getElementById('run');
  const stopButton = document.getElementById('stop');
  const output = document.getElementById('output');
  const rates = document.getElementById('rates');
  let running = null;

  async function run(text, options = {}) {
    running = new AbortController();
    setState('generating');
    runButton.disabled = true;
    stopButton.disabled = false;
    output.textContent = '';
    output.append(el('span', { className: 'prompt-echo' }, text));
    const tokens = [];
    let generated = '';
    let first = null;
    const t0 = performance.now();
    let error = null;
    try {
      for await (const piece of generator.generate(text, { ...options, signal: running.signal })) {
        if (first === null) first = piece.ms;
        tokens.push(piece.token);
        generated += piece.text;
        output.append(piece.text);
        const s = generator.stats();
        const decodeSecs = (performance.now() - t0 - first) / 1000;
        rates.textContent = `prefill ${fmtMs(first)} · ${tokens.length} tokens · decode ` +
          `${tokens.length > 1 ? ((tokens.length - 1) / decodeSecs).toFixed(1) : '–'} tokens/s` +
          (s.promptTokens ? ` · prompt ${s.promptTokens} tokens` : '');
      }
    } catch (e) {
      error = e;
      if (!/aborted/.test(e?.message ?? '')) rates.textContent = `Generation failed: ${describeError(e)}`;
    }
    const s = generator.stats();
    if (!error || /aborted/.test(error?.message ?? '')) {
      rates.textContent = `prefill ${s.promptTokens} tokens in ${fmtMs(s.prefillMs)} (${s.prefillTokensPerSecond.toFixed(1)} tokens/s) · ` +
        `decode ${s.generatedTokens} tokens, ${Number.isFinite(s.decodeTokensPerSecond) ? s.decodeTokensPerSecond.toFixed(1) : '–'} tokens/s · ` +
        `ended: ${s.finishReason} · ${generator.backend}`;
    }
    running = null;
    runButton.disabled = false;
    stopButton.disabled = true;
    setState('ready');
    return { text: generated, tokens, stats: s, error: error ? String(error.message ?? error) : null };
  }

  runButton.onclick = () => run(prompt.value, {
    maxNewTokens: numberField('max-tokens'),
    temperature: numberField('temperature'),
    topK: numberField('top-k'),
    topP: numberField('top-p'),
    seed: numberField('seed'),
  });
  stopButton.onclick = () => running?.abort();
  prompt.disabled = false;
  runButton.disabled = false;
  document.getElementById('generate').dataset.state = 'ready';
  let chat = null;
  const templateNote = document.getElementById('chat-template-note');
  try {
    generator.applyChatTemplate([{ role: 'user', content: 'hi' }]);
    chat = startChat(generator, { setState });
    templateNote.textContent = `OpenAI-shaped chat.completions.create over ${chatTemplate ? `the template ${params.templateUrl}` : "the model file's chat template"}; each turn feeds only what the KV cache lacks.`;
  } catch (e) {
    templateNote.textContent = `Chat is off: ${describeError(e)}`;
    document.getElementById('chat').dataset.state = 'error';
  }
  window.generateDemo = { generator, run, chat };
  setState('ready');
  await adapterDone;
}

main();
