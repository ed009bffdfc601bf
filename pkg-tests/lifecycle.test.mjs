// The lifecycle in headless Chromium (the built package, real WebGPU): page visibility, freeze
// and pagehide as suspend/resume for every provider and backend, the bytes the server sent
// twice over a hidden-mid-load cycle, LowMemory and a destroyed GPU device between executes
// (same outputs, parameters fetched again once), signals during init and execute and twice in a
// row, and a worker following its page.
//
// Visibility: this headless Chromium keeps every page "visible" (measured: a second tab brought
// to the front, a minimised window and Page.setWebLifecycleState leave visibilityState and the
// freeze event untouched), so the tests set `document.visibilityState` and dispatch the DOM's
// own events; the freeze test asks the DevTools protocol first and reports what it did. The
// weights come from our counting server (pkg-tests/support/faulty-server.mjs, no faults) so the
// bytes it sent can be counted per request.
import assert from 'node:assert/strict';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { after, before, test } from 'node:test';
import { startFaultyServer } from './support/faulty-server.mjs';
import { TEST_TIMEOUT, useBrowserHarness } from './support/fixture.mjs';
import { writeRandomSafetensors } from './support/weights.mjs';

const dir = await mkdtemp(path.join(os.tmpdir(), 'webdelegate-lifecycle-'));
const model = await writeRandomSafetensors(path.join(dir, 'model.safetensors'), { seed: 11, count: 40, maxLen: 600_000 });

// The MLP's weights, f32, deterministic: dense.weight [OUT, IN] and dense.bias [OUT]. A small
// one, and a big one (2 MiB) whose load reports progress before it ends.
const IN = 96;
const OUT = 48;
const BIG_IN = 1024;
const BIG_OUT = 512;
function mlpSafetensors(inputs, outputs) {
  const values = (n, seed) => Float32Array.from({ length: n }, (_, i) => Math.sin(seed * 1000 + i * 0.37) * 0.5);
  const w = Buffer.from(values(outputs * inputs, 1).buffer);
  const b = Buffer.from(values(outputs, 2).buffer);
  const header = {
    'dense.weight': { dtype: 'F32', shape: [outputs, inputs], data_offsets: [0, w.length] },
    'dense.bias': { dtype: 'F32', shape: [outputs], data_offsets: [w.length, w.length + b.length] },
  };
  let json = JSON.stringify(header);
  while (json.length % 8) json += ' ';
  const prefix = Buffer.alloc(8);
  prefix.writeBigUInt64LE(BigInt(json.length));
  return { bytes: Buffer.concat([prefix, Buffer.from(json), w, b]), paramBytes: w.length + b.length };
}
const mlp = mlpSafetensors(IN, OUT);
await writeFile(path.join(dir, 'mlp.safetensors'), mlp.bytes);
await writeFile(path.join(dir, 'big.safetensors'), mlpSafetensors(BIG_IN, BIG_OUT).bytes);

const harness = useBrowserHarness();
let server;
before(async () => { server = await startFaultyServer({ root: dir }); });
after(async () => {
  await server?.stop();
  await rm(dir, { recursive: true, force: true });
});

async function page(t) {
  await harness.browser.context.route(`${server.url}/**`, (route) => route.continue());
  const p = await harness.openHarnessPage(t);
  await p.evaluate(async () => {
    await wd.ready();
    // The page's visibility, driven the way the browser does it: the property, then the event.
    window.setVisibility = (state) => {
      Object.defineProperty(document, 'visibilityState', { value: state, configurable: true });
      document.dispatchEvent(new Event('visibilitychange'));
    };
    window.sleep = (ms) => new Promise((r) => setTimeout(r, ms));
  });
  return p;
}

const stats = async () => (await fetch(`${server.url}/__stats`)).json();

/**
 * Loads the model from `file` on the counting server, hides the page at the first progress
 * event, shows it again once every request has stopped, and returns what the page and the
 * server saw: {v: the page's observations, sent: bytes the server sent for the load's data
 * requests, interrupted: requests resumed, twice: bytes sent twice}.
 */
async function hiddenMidLoad(t, file) {
  const p = await page(t);
  const before = (await stats()).log.length;
  const r = await p.evaluate(async ({ url, base, keys }) => {
    const hex = (buf) => Array.from(new Uint8Array(buf), (b) => b.toString(16).padStart(2, '0')).join('');
    const events = [];
    wd.addLifecycleListener((e) => events.push(e));
    let hidden = false;
    const provider = new wd.HttpParameterProvider({
      concurrency: 2,
      maxRequestSize: 4 << 20,
      onProgress: () => { if (!hidden) { hidden = true; setVisibility('hidden'); } },
    });
    return capture(async () => {
      await provider.addScope('m', url);
      const loading = provider.loadToGpu('m', keys);
      while (!hidden) await sleep(5);
      const stateHidden = wd.lifecycleState();
      // Requests logged and body bytes sent, at the server: wait until both stand still for
      // 200 ms (aborts reach the server when Chromium drops the connections), then check that
      // nothing moves for 300 ms more. Open responses are reported, not asserted (Chromium may
      // keep an aborted connection open, unread, for a while; no byte flows on it).
      const active = async () => Number(await (await fetch(`${base}/__active`)).text());
      const traffic = async () => {
        const log = (await (await fetch(`${base}/__stats`)).json()).log;
        return [log.length, log.reduce((sum, e) => sum + e.sent, 0)];
      };
      const deadline = performance.now() + 10000;
      let atSuspend = await traffic();
      while (performance.now() < deadline) {
        await sleep(200);
        const now = await traffic();
        if (now[0] === atSuspend[0] && now[1] === atSuspend[1]) break;
        atSuspend = now;
      }
      await sleep(300);
      const afterWait = await traffic();
      const sentWhileHidden = afterWait[0] - atSuspend[0];
      const bytesWhileHidden = afterWait[1] - atSuspend[1];
      const activeWhileHidden = await active();
      setVisibility('visible');
      const params = await loading;
      const sha = {};
      for (const q of params) sha[q.key] = hex(await crypto.subtle.digest('SHA-256', await q.read()));
      return { stateHidden, activeWhileHidden, sentWhileHidden, bytesWhileHidden, stateAfter: wd.lifecycleState(), events, sha, stats: provider.lastStats() };
    });
  }, { url: `${server.url}${file}`, base: server.url, keys: model.index.map((e) => e.key) });
  assert.ok(r.ok, JSON.stringify(r.error));
  const v = r.value;
  const log = (await stats()).log.slice(before).filter((e) => e.url === file && e.range && e.range !== 'bytes=0-65535');
  const sent = log.reduce((sum, e) => sum + e.sent, 0);
  const interrupted = v.stats.requestsSent - v.stats.requestsPlanned;
  const twice = sent - v.stats.bytesNeeded;
  t.diagnostic(`responses open at the server while hidden: ${v.activeWhileHidden}; requests planned ${v.stats.requestsPlanned}, sent ${v.stats.requestsSent}; server sent ${sent} for ${v.stats.bytesNeeded} needed: ${twice} bytes twice = ${(twice / (CHUNK * Math.max(interrupted, 1))).toFixed(3)} chunks per interrupted request`);
  return { v, sent, interrupted, twice };
}

const CHUNK = 1 << 20; // the provider's default chunk size

/** What every hidden-mid-load cycle must show. */
function checkCycle({ v, interrupted, twice }) {
  assert.deepEqual(v.stateHidden.reasons, ['hidden']);
  assert.equal(v.stateHidden.suspended, true);
  assert.equal(v.bytesWhileHidden, 0, 'no body byte flowed while hidden');
  assert.equal(v.sentWhileHidden, 0, 'no request was sent while hidden');
  assert.equal(v.stateAfter.suspended, false);
  assert.deepEqual(v.events.map((e) => e.signal), ['suspend', 'resume']);
  assert.ok(v.events[0].released.requestsAborted >= 1, JSON.stringify(v.events[0]));
  for (const key of model.index.map((e) => e.key)) assert.equal(v.sha[key], model.tensorSha256[key], key);
  assert.ok(interrupted >= 1, 'the load was interrupted');
  assert.ok(twice >= 0);
  assert.equal(v.stats.bytesReceived, v.stats.bytesPlanned, 'the client consumed no byte twice');
}

test('hidden mid-load over a network slower than the GPU writes: byte-exact, at most one chunk per interrupted request sent twice', TEST_TIMEOUT, async (t) => {
  // 16 KiB every 2 ms (8 MB/s): slower than the page consumes, as any real network is.
  const cycle = await hiddenMidLoad(t, '/f/slow=2/model.safetensors');
  checkCycle(cycle);
  assert.ok(cycle.twice <= CHUNK * cycle.interrupted, `${cycle.twice} bytes sent twice > ${cycle.interrupted} x ${CHUNK}`);
});

test('hidden mid-load at full localhost speed: byte-exact; what the network buffered is reported', TEST_TIMEOUT, async (t) => {
  // Faster than the page consumes: the browser's and the kernel's socket buffers are full when
  // the requests are aborted, and what they held is sent again (bench: resume_refetch_chunks).
  checkCycle(await hiddenMidLoad(t, '/f/-/model.safetensors'));
});

test('freeze while hidden does not resume on unfreeze; pagehide/pageshow; app reasons; opt-out', TEST_TIMEOUT, async (t) => {
  const p = await page(t);
  const cdp = await harness.browser.context.newCDPSession(p.page);
  await p.evaluate(() => { window.freezeEvents = 0; document.addEventListener('freeze', () => { window.freezeEvents += 1; }); });
  await cdp.send('Page.setWebLifecycleState', { state: 'frozen' });
  await cdp.send('Page.setWebLifecycleState', { state: 'active' });
  const delivered = await p.evaluate(() => window.freezeEvents);
  t.diagnostic(`Page.setWebLifecycleState delivered ${delivered} freeze event(s)`);
  const r = await p.evaluate(async (delivered) => {
    const suspended = () => wd.getOption('webgpu', [{ key: 'suspended', value: false }])[0].value;
    const steps = [];
    const note = (what) => steps.push({ what, ...wd.lifecycleState(), backend: suspended() });
    setVisibility('hidden'); note('hidden');
    // The browser's freeze, when DevTools could not deliver it.
    if (!delivered) document.dispatchEvent(new Event('freeze'));
    note('frozen');
    document.dispatchEvent(new Event('resume')); note('unfrozen, still hidden');
    setVisibility('visible'); note('visible');
    window.dispatchEvent(new PageTransitionEvent('pagehide', { persisted: true })); note('pagehide');
    window.dispatchEvent(new PageTransitionEvent('pageshow', { persisted: true })); note('pageshow (bfcache)');
    const first = wd.lifecycleNotify('suspend');
    const second = wd.lifecycleNotify('suspend');
    note('app suspend');
    const resumed = wd.lifecycleNotify('resume');
    const again = wd.lifecycleNotify('resume');
    const bad = await capture(() => wd.lifecycleNotify('nap'));
    wd.setLifecycleAutomatic(false);
    setVisibility('hidden'); note('hidden, automatic off');
    wd.setLifecycleAutomatic(true); note('automatic on while hidden');
    setVisibility('visible'); note('visible again');
    return { steps, first: first.signal, second: second.signal, resumed: resumed.signal, again: again.signal, bad };
  }, delivered);
  const at = (what) => r.steps.find((s) => s.what === what);
  assert.deepEqual(at('hidden').reasons, ['hidden']);
  assert.equal(at('hidden').backend, true, 'the webgpu backend was told');
  assert.deepEqual(at('frozen').reasons, ['hidden', 'frozen']);
  assert.equal(at('unfrozen, still hidden').suspended, true);
  assert.equal(at('visible').suspended, false);
  assert.equal(at('visible').backend, false);
  assert.deepEqual(at('pagehide').reasons, ['pagehide']);
  assert.equal(at('pageshow (bfcache)').suspended, false);
  assert.equal(r.first, 'suspend');
  assert.equal(r.second, null, 'Suspend twice is one suspend');
  assert.equal(r.resumed, 'resume');
  assert.equal(r.again, null, 'Resume without Suspend is a no-op');
  assert.equal(r.bad.error.code, 'InvalidArgument');
  assert.equal(at('hidden, automatic off').suspended, false);
  assert.equal(at('hidden, automatic off').automatic, false);
  assert.deepEqual(at('automatic on while hidden').reasons, ['hidden']);
  assert.equal(at('visible again').suspended, false);
  // Every transition counted once: hidden, pagehide, app, automatic-on-while-hidden.
  assert.equal(at('visible again').suspends, 4);
  assert.equal(at('visible again').resumes, 4);
});

test('LowMemory and a destroyed device between executes: same outputs, parameters fetched again once; signals during init and execute', TEST_TIMEOUT, async (t) => {
  const p = await page(t);
  const r = await p.evaluate(async ({ url, slowUrl, base, IN, OUT, BIG_IN, BIG_OUT }) => {
    const option = (key) => wd.getOption('webgpu', [{ key, value: 0 }])[0].value;
    const mlpProgram = (inputs, outputs) => {
      const b = new wd.ProgramBuilder();
      const x = b.input('x', 'float32', ['batch', inputs]);
      const w = b.param('w', 'float32', [outputs, inputs], 'weights', 'dense.weight');
      const bias = b.param('bias', 'float32', [outputs], 'weights', 'dense.bias');
      b.output(b.gelu(b.matmul(x, w, bias, false, true)));
      const blob = b.encode();
      b.free();
      return blob;
    };
    const blob = mlpProgram(IN, OUT);
    const input = Float32Array.from({ length: 4 * IN }, (_, i) => Math.cos(i * 0.11));
    const args = () => [{ tag: 'Tensor', dtype: 'float32', shape: [4, IN], data: input }, { tag: 'None' }];
    const out = async (d) => Array.from((await d.execute(args()))[1].data);
    const dataBytes = async () => (await (await fetch(`${base}/__stats`)).json()).log
      .filter((e) => e.url.endsWith('/mlp.safetensors') && e.range && e.range !== 'bytes=0-65535')
      .reduce((sum, e) => sum + e.sent, 0);
    return capture(async () => {
      const provider = new wd.HttpParameterProvider();
      await provider.addScope('weights', url);
      const gpu = await wd.Delegate.initWithParameters('webgpu', blob, provider);
      const bytesAfterInit = await dataBytes();
      const cpu = await wd.Delegate.initWithParameters('cpu', blob, provider);
      const reference = await out(cpu);
      const first = await out(gpu);
      const bytesBase = await dataBytes();
      const liveBefore = option('live_buffer_bytes');
      const low = wd.lifecycleNotify('lowMemory');
      const liveAfterLow = option('live_buffer_bytes');
      const afterLow = await out(gpu);
      const again = await out(gpu);
      const bytesAfterLow = await dataBytes();
      const generation = option('device_generation');
      const destroyed = wd.destroyWebGpuDevice();
      const afterLoss = await out(gpu);
      const generationAfter = option('device_generation');
      const bytesAfterLoss = await dataBytes();
      // Signals while an execute is in flight (it has its GPU state: the release waits for it
      // to finish), then twice in a row.
      const running = out(gpu);
      await sleep(0);
      const s1 = wd.lifecycleNotify('suspend');
      const lm = wd.lifecycleNotify('lowMemory');
      const duringExecute = await running;
      const s2 = wd.lifecycleNotify('suspend');
      // Its parameters were released and the provider is suspended: the next execute waits for
      // the resume, then fetches them and completes.
      let executedWhileSuspended = false;
      const waiting = out(gpu).then((o) => { executedWhileSuspended = true; return o; });
      await sleep(300);
      const doneBeforeResume = executedWhileSuspended;
      const r1 = wd.lifecycleNotify('resume');
      const whileSuspended = await waiting;
      const r2 = wd.lifecycleNotify('resume');
      // Signals during init: suspend while the provider streams the parameters, then resume.
      const slow = new wd.HttpParameterProvider({
        onProgress: () => { if (!slow.suspendedOnce) { slow.suspendedOnce = true; wd.lifecycleNotify('suspend'); } },
      });
      await slow.addScope('weights', slowUrl);
      let initDone = false;
      const initing = wd.Delegate.initWithParameters('webgpu', mlpProgram(BIG_IN, BIG_OUT), slow).then((d) => { initDone = true; return d; });
      while (!slow.suspendedOnce) await sleep(5);
      await sleep(300);
      const doneWhileSuspended = initDone;
      wd.lifecycleNotify('resume');
      const late = await initing;
      const bigInput = Float32Array.from({ length: 2 * BIG_IN }, (_, i) => Math.cos(i * 0.11));
      const bigArgs = () => [{ tag: 'Tensor', dtype: 'float32', shape: [2, BIG_IN], data: bigInput }, { tag: 'None' }];
      const fromLate = Array.from((await late.execute(bigArgs()))[1].data);
      const lateCpu = await wd.Delegate.initWithParameters('cpu', mlpProgram(BIG_IN, BIG_OUT), slow);
      const lateReference = Array.from((await lateCpu.execute(bigArgs()))[1].data);
      lateCpu.destroy();
      for (const d of [gpu, cpu, late]) d.destroy();
      return {
        reference, first, afterLow, again, afterLoss, duringExecute, whileSuspended, fromLate, lateReference,
        low: low.released, liveBefore, liveAfterLow, bytesAfterInit, bytesBase, bytesAfterLow, bytesAfterLoss,
        generation, destroyed, generationAfter,
        signals: [s1.signal, lm.signal, s2.signal, r1.signal, r2.signal], doneWhileSuspended, doneBeforeResume,
        liveEnd: option('live_buffers'),
      };
    });
  }, { url: `${server.url}/f/-/mlp.safetensors`, slowUrl: `${server.url}/f/slow=2/big.safetensors`, base: server.url, IN, OUT, BIG_IN, BIG_OUT });
  assert.ok(r.ok, JSON.stringify(r.error));
  const v = r.value;
  // WebGPU against the CPU backend: |gpu - cpu| <= 1e-5 + 1e-4 |cpu|.
  v.reference.forEach((c, i) => assert.ok(Math.abs(v.first[i] - c) <= 1e-5 + 1e-4 * Math.abs(c), `element ${i}: ${v.first[i]} vs ${c}`));
  v.lateReference.forEach((c, i) => assert.ok(Math.abs(v.fromLate[i] - c) <= 1e-5 + 1e-4 * Math.abs(c), `big element ${i}: ${v.fromLate[i]} vs ${c}`));
  for (const name of ['afterLow', 'again', 'afterLoss', 'duringExecute', 'whileSuspended']) {
    assert.deepEqual(v[name], v.first, `${name}: outputs differ from the first run`);
  }
  t.diagnostic(`lowMemory released ${JSON.stringify(v.low)}; live GPU bytes ${v.liveBefore} -> ${v.liveAfterLow}`);
  assert.ok(v.low.gpuBytes >= mlp.paramBytes, 'the parameters left the GPU');
  assert.ok(v.liveAfterLow <= v.liveBefore - mlp.paramBytes);
  assert.equal(v.bytesAfterInit, mlp.paramBytes, 'init fetched each parameter byte once');
  assert.equal(v.bytesAfterLow - v.bytesBase, mlp.paramBytes, 'fetched again once after LowMemory');
  assert.equal(v.destroyed, true);
  assert.equal(v.generationAfter, v.generation + 1, 'a new device');
  assert.equal(v.bytesAfterLoss - v.bytesAfterLow, mlp.paramBytes, 'fetched again once after the device loss');
  assert.deepEqual(v.signals, ['suspend', 'lowMemory', null, 'resume', null]);
  assert.equal(v.doneWhileSuspended, false, 'init waited while suspended');
  assert.equal(v.doneBeforeResume, false, 'an execute that must fetch parameters waits for the resume');
  assert.equal(v.liveEnd, 0, 'destroy freed every GPU buffer');
});

test('a worker follows its page through forwardLifecycle', TEST_TIMEOUT, async (t) => {
  const p = await page(t);
  const r = await p.evaluate(async () => {
    const worker = new Worker('/pkg-tests/lifecycle-worker.js', { type: 'module' });
    const ask = () => new Promise((resolve) => {
      worker.addEventListener('message', (e) => resolve(e.data), { once: true });
      worker.postMessage({ query: 'state' });
    });
    await ask(); // the worker's module is up
    const forwarder = wd.forwardLifecycle(worker);
    setVisibility('hidden');
    const hidden = await ask();
    setVisibility('visible');
    const visible = await ask();
    forwarder.notify('lowMemory');
    const low = await ask();
    setVisibility('hidden');
    forwarder.stop();
    const stopped = await ask();
    setVisibility('visible');
    worker.terminate();
    const bad = await capture(() => wd.forwardLifecycle({}));
    return { hidden, visible, low, stopped, bad };
  });
  assert.deepEqual(r.hidden.state.reasons, ['hidden']);
  assert.equal(r.hidden.backendSuspended, true, "the worker's backend was suspended");
  assert.equal(r.visible.state.suspended, false);
  assert.equal(r.visible.backendSuspended, false);
  assert.equal(r.low.state.lowMemory, 1);
  assert.equal(r.stopped.state.suspended, false, 'stop() clears the page reasons it forwarded');
  assert.equal(r.bad.error.code, 'InvalidArgument');
});
