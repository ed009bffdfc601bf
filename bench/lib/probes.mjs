// Measuring probes of the side-by-side benchmark that watch from outside the page:
//  - heapSampler(page): polls the page's V8 heap through the Chrome DevTools Protocol
//    (Runtime.getHeapUsage: usedSize, and backingStorageSize = array buffer backing stores) and
//    keeps the peaks. performance.memory is coarse and cached in Chromium without
//    --enable-precise-memory-info; the protocol gives exact values. A sample lands between the
//    page's tasks, so a peak inside one long task that is freed before it ends can be missed.
//  - accessLogWindow(file): the requests and body bytes nginx logged from now until `read()`.
//  - waitForBrowserIdle(): waits for the browser's processes to go quiet between loads.
//  - withDeadline(promise, ms): the promise, or null once ms passed.
import { open, readFile, readdir, stat } from 'node:fs/promises';

const SAMPLE_EVERY_MS = 20;

/**
 * Starts sampling `page` (a playwright Page); `stop()` resolves to the peaks in bytes. With
 * `collectGarbage`, each sample first runs a full GC (HeapProfiler.collectGarbage), so the peaks
 * are of memory still referenced, not of garbage not yet collected (array buffers a load has
 * dropped stay counted until a GC frees them).
 */
export async function heapSampler(page, { collectGarbage = false } = {}) {
  const cdp = await page.context().newCDPSession(page);
  const peak = { used: 0, arrayBuffers: 0, samples: 0 };
  const sample = async () => {
    if (collectGarbage) await cdp.send('HeapProfiler.collectGarbage');
    const h = await cdp.send('Runtime.getHeapUsage');
    peak.used = Math.max(peak.used, h.usedSize);
    peak.arrayBuffers = Math.max(peak.arrayBuffers, h.backingStorageSize ?? 0);
    peak.samples += 1;
  };
  await sample();
  let running = true;
  const loop = (async () => {
    while (running) {
      await new Promise((r) => setTimeout(r, SAMPLE_EVERY_MS)); // the sampling period
      if (running) await sample().catch(() => {});
    }
  })();
  return {
    async stop() {
      running = false;
      await loop;
      await sample().catch(() => {});
      await cdp.detach().catch(() => {});
      return peak;
    },
  };
}

// nginx "combined": $remote_addr - $remote_user [$time_local] "$request" $status $body_bytes_sent ...
const COMBINED = /"(\S+) (\S+) [^"]*" (\d{3}) (\d+)/;

/** Marks the end of `file` now; `read()` parses the lines nginx appended since. */
export async function accessLogWindow(file) {
  const start = (await stat(file)).size;
  return {
    async read() {
      // nginx writes a line when it finalises a request, right after the last byte went out.
      await new Promise((r) => setTimeout(r, 50)); // let the last request's line land
      const handle = await open(file, 'r');
      try {
        const { size } = await handle.stat();
        const buffer = Buffer.alloc(size - start);
        await handle.read(buffer, 0, buffer.length, start);
        const requests = [];
        for (const line of buffer.toString('utf8').split('\n')) {
          const m = COMBINED.exec(line);
          if (m) requests.push({ method: m[1], path: m[2], status: Number(m[3]), bytes: Number(m[4]) });
        }
        return { requests: requests.length, bytes: requests.reduce((s, r) => s + r.bytes, 0), list: requests };
      } finally {
        await handle.close();
      }
    },
  };
}

/** CPU seconds used so far by every Chromium process on the machine (from /proc). */
async function chromiumCpuSeconds() {
  const ticksPerSecond = 100; // USER_HZ on Linux
  let total = 0;
  for (const pid of await readdir('/proc').catch(() => [])) {
    if (!/^\d+$/.test(pid)) continue;
    try {
      const stat = await readFile(`/proc/${pid}/stat`, 'utf8');
      const close = stat.lastIndexOf(')');
      const comm = stat.slice(stat.indexOf('(') + 1, close);
      if (!/chrom/i.test(comm)) continue;
      const fields = stat.slice(close + 2).split(' ');
      total += (Number(fields[11]) + Number(fields[12])) / ticksPerSecond; // utime + stime
    } catch {
      // the process ended meanwhile
    }
  }
  return total;
}

/**
 * Waits until the browser's processes (GPU process included: it may still be compiling the last
 * contender's shaders) use under `threshold` of one core over a `windowMs` window, or `maxMs`
 * passed. Resolves to the milliseconds waited.
 */
export async function waitForBrowserIdle({ threshold = 0.1, windowMs = 1000, maxMs = 30_000 } = {}) {
  const start = Date.now();
  let before = await chromiumCpuSeconds();
  for (;;) {
    await new Promise((r) => setTimeout(r, windowMs)); // the measuring window
    const now = await chromiumCpuSeconds();
    if ((now - before) / (windowMs / 1000) < threshold || Date.now() - start > maxMs) return Date.now() - start;
    before = now;
  }
}

/** `promise`, or null once `ms` passed (a probe or page call that may never answer). */
export function withDeadline(promise, ms) {
  let timer;
  const deadline = new Promise((resolve) => { timer = setTimeout(resolve, ms, null); });
  return Promise.race([promise, deadline]).finally(() => clearTimeout(timer));
}
