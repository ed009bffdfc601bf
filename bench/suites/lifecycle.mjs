// Benchmark: the page lifecycle in headless Chromium against nginx, with the real
// all-MiniLM-L6-v2 weights (90.9 MB).
//   (a) Hidden mid-load: the provider loads every tensor into WebGPU buffers with its default
//       options; at the first progress event the page becomes hidden (visibilityState set and
//       the DOM's own visibilitychange dispatched: this headless Chromium never hides a page),
//       500 ms later visible again. nginx's access log gives the body bytes it sent for each
//       request, so the bytes sent twice are what it sent beyond what the load needed.
//   (b) A loaded model (Embedder on webgpu, one sentence embedded): what Suspend releases on
//       the GPU (activations), what LowMemory releases (parameters), and what the next embed
//       fetches again (it must give the same vector).
// Keys:
//   resume_refetch_chunks        bytes sent twice / (chunk bytes x interrupted requests); the
//                                chunk is the provider's default 1 MiB. At full localhost speed
//                                this is the network's buffering (browser + kernel) at the abort.
//   suspend_released_mb          host + staging memory the provider released on the suspend.
//   suspend_interrupted_requests requests aborted by the suspend and resumed.
//   suspend_released_gpu_mb_ready GPU memory a Suspend released from the loaded model.
//   low_memory_released_gpu_mb   GPU memory a LowMemory released (parameters included).
//   low_memory_refetch_mb        bytes fetched again by the next embed.
//   low_memory_embed_cosine      cosine of that embed with the one before (1 = identical).
import { readFile } from 'node:fs/promises';
import path from 'node:path';
import { ROOT } from '../../scripts/make-bench-weights.mjs';

const CHUNK = 1 << 20;
const MB = 1 << 20;

async function hiddenMidLoad({ url }) {
  const setVisibility = (state) => {
    Object.defineProperty(document, 'visibilityState', { value: state, configurable: true });
    document.dispatchEvent(new Event('visibilitychange'));
  };
  const events = [];
  wd.addLifecycleListener((e) => events.push(e));
  let hidden = false;
  const provider = new wd.HttpParameterProvider({
    cache: 'no-store',
    onProgress: () => { if (!hidden) { hidden = true; setVisibility('hidden'); } },
  });
  await provider.addScope('m', url);
  const loading = provider.loadToGpu('m', provider.keys('m'));
  while (!hidden) await new Promise((r) => setTimeout(r, 5));
  await new Promise((r) => setTimeout(r, 500));
  setVisibility('visible');
  const params = await loading;
  for (const p of params) p.free();
  return { stats: provider.lastStats(), events };
}

async function loadedModel({ base }) {
  const embedder = await wd.Embedder.load(base, { backend: 'webgpu', batchSize: 1 });
  const text = ['A man is eating food.'];
  const [before] = await embedder.embed(text);
  const received = embedder.loadStats().bytesReceived;
  const setVisibility = (state) => {
    Object.defineProperty(document, 'visibilityState', { value: state, configurable: true });
    document.dispatchEvent(new Event('visibilitychange'));
  };
  const events = [];
  wd.addLifecycleListener((e) => events.push(e));
  setVisibility('hidden');
  setVisibility('visible');
  const low = wd.lifecycleNotify('lowMemory');
  const [after] = await embedder.embed(text);
  const refetched = embedder.loadStats().bytesReceived - received;
  let dot = 0;
  let na = 0;
  let nb = 0;
  for (let i = 0; i < before.length; i++) { dot += before[i] * after[i]; na += before[i] ** 2; nb += after[i] ** 2; }
  embedder.destroy();
  return { suspend: events.find((e) => e.signal === 'suspend').released, low: low.released, refetched, cosine: dot / Math.sqrt(na * nb), backend: embedder.backend };
}

/** Body bytes nginx sent per request to `file`, in order (the combined log format). */
async function sentPerRequest(accessLog, file) {
  const lines = (await readFile(accessLog, 'utf8')).split('\n');
  return lines
    .map((line) => /"GET ([^ ]+) HTTP\/[\d.]+" (\d{3}) (\d+)/.exec(line))
    .filter((m) => m && m[1].endsWith(file))
    .map((m) => ({ status: Number(m[2]), sent: Number(m[3]) }));
}

export async function run(ctx) {
  const models = path.join(ROOT, '.cache', 'models');
  const server = await ctx.startServer({ locations: [{ prefix: '/models/', dir: models }] });
  const open = async () => {
    const p = await ctx.openHarnessPage();
    // The browser context blocks other origins; this nginx is ours.
    await p.page.context().route(`${server.url}/**`, (route) => route.continue());
    await p.page.goto(`${server.url}/pkg-tests/harness.html`);
    await p.page.waitForFunction(() => window.harnessReady || window.harnessError);
    await p.evaluate(() => wd.ready());
    return p;
  };

  ctx.log('hidden mid-load (90.9 MB)');
  let p = await open();
  const a = await p.evaluate(hiddenMidLoad, { url: `${server.url}/models/all-MiniLM-L6-v2/model.safetensors` });
  const requests = await sentPerRequest(path.join(server.dir, 'access.log'), '/all-MiniLM-L6-v2/model.safetensors');
  // The first request is the index read; the rest carried the load.
  const sent = requests.slice(1).reduce((sum, r) => sum + r.sent, 0);
  const interrupted = a.stats.requestsSent - a.stats.requestsPlanned;
  const twice = sent - a.stats.bytesNeeded;
  const suspend = a.events.find((e) => e.signal === 'suspend');
  ctx.log(`planned ${a.stats.requestsPlanned} requests, sent ${a.stats.requestsSent}; nginx sent ${sent} bytes for ${a.stats.bytesNeeded} needed`);

  ctx.log('loaded model: suspend, lowMemory, embed again');
  p = await open();
  const b = await p.evaluate(loadedModel, { base: `${server.url}/models/all-MiniLM-L6-v2/` });
  ctx.log(`backend ${b.backend}; suspend released ${JSON.stringify(b.suspend)}, lowMemory ${JSON.stringify(b.low)}`);
  return {
    resume_refetch_chunks: twice / (CHUNK * Math.max(interrupted, 1)),
    suspend_interrupted_requests: interrupted,
    suspend_released_mb: suspend ? suspend.released.hostBytes / MB : 0,
    suspend_released_gpu_mb_ready: b.suspend.gpuBytes / MB,
    low_memory_released_gpu_mb: b.low.gpuBytes / MB,
    low_memory_refetch_mb: b.refetched / MB,
    low_memory_embed_cosine: b.cosine,
  };
}
