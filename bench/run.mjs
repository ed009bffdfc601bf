// Benchmark runner (`npm run bench`, after the package is built into pkg/ and the bench's build
// into pkg-bench/): runs every suite in
// bench/suites/*.mjs in headless Chromium against a real nginx serving the repo root, merges
// their results into one flat JSON object of numbers, writes it to bench/results/latest.json,
// the same as a markdown table with the date and the machine to bench/results/latest.md, and a
// chart of the side-by-side numbers to bench/results/latest.png (rendered by the same Chromium;
// see bench/lib/report.mjs), all git-ignored, and prints a table.
//
// Suite contract: a suite module exports `async function run(ctx)` that resolves to a flat
// object `{ key: number }` (finite numbers; keys unique across suites, snake_case, units in the
// name, e.g. `matmul_gflops_webgpu_384`). Suites run one after another, in file-name order.
// `ctx` holds:
//   serverUrl              the origin nginx serves the repo root at, e.g. http://127.0.0.1:PORT
//                          (every response Cache-Control: no-store). The same nginx also serves
//                          the repo root under ISOLATED_PREFIX (/isolated/) with COOP/COEP, so a
//                          page there is cross-origin isolated (wasm threads), and under
//                          CACHED_PREFIX (/cached/) with cacheable responses (repeat visits)
//   root                   absolute path of the repo root (what nginx serves)
//   openPage(path, ready?) opens `path` in a fresh page; `ready` (a function evaluated in the
//                          page) is awaited when given. Resolves to { page, evaluate(fn, arg) }.
//                          Pages close when the suite ends; an uncaught page error fails it.
//   openHarnessPage(opts?) opens pkg-tests/harness.html: the built package as `window.wd`;
//                          with { bench: true } the bench's own build (pkg-bench/, from
//                          `npm run build:pkg:bench`), which adds MatmulBench, QmatvecBench
//                          and BandwidthBench (cargo feature `bench`; not in the published pkg/)
//   startServer(options)   another nginx (see pkg-tests/support/server.mjs), stopped when the
//                          suite ends: e.g. to serve weight files from another directory
//   accessLog              path of that nginx's access log (combined format): a suite can
//                          count the requests and bytes the server sent during a step
//   log(message)           a progress line on stderr
// Environment: BENCH_FILTER=<regex> runs only the suites whose file name matches.
import { mkdir, readdir, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { startBrowser } from '../pkg-tests/support/browser.mjs';
import { REPO_ROOT, startServer } from '../pkg-tests/support/server.mjs';
import { serverLocations } from './lib/locations.mjs';
import { writeReports } from './lib/write_reports.mjs';

const HERE = path.dirname(fileURLToPath(import.meta.url));
const SUITES = path.join(HERE, 'suites');
const RESULTS = path.join(HERE, 'results');

function log(message) {
  process.stderr.write(`[bench] ${message}\n`);
}

/** A ctx for one suite and the cleanup that closes what the suite opened. */
function suiteContext(name, server, browser) {
  const cleanups = [];
  // browser.openPage ties pages to a node:test context; this stand-in collects their cleanups.
  const owner = { name, after: (fn) => cleanups.push(fn) };
  const ctx = {
    serverUrl: server.url,
    root: REPO_ROOT,
    accessLog: path.join(server.dir, 'access.log'),
    openPage: (urlPath, ready) => browser.openPage(owner, urlPath, ready),
    async openHarnessPage({ bench = false } = {}) {
      const url = bench ? '/pkg-tests/harness.html?pkg=bench' : '/pkg-tests/harness.html';
      const p = await browser.openPage(owner, url, () => window.harnessReady || window.harnessError);
      const failure = await p.evaluate(() => window.harnessError ?? null);
      if (failure) throw new Error(`harness could not load the package (run npm run ${bench ? 'build:pkg:bench' : 'build:pkg'}): ${failure}`);
      return p;
    },
    async startServer(options) {
      const extra = await startServer(options);
      cleanups.push(() => extra.stop());
      return extra;
    },
    log: (message) => log(`${name}: ${message}`),
  };
  async function close() {
    const errors = [];
    for (const fn of cleanups.reverse()) {
      try {
        await fn();
      } catch (error) {
        errors.push(error);
      }
    }
    if (errors.length) throw errors[0];
  }
  return { ctx, close };
}

function checkResult(name, result, merged) {
  if (result === null || typeof result !== 'object' || Array.isArray(result)) {
    throw new Error(`suite ${name} must resolve to a flat object of numbers, got ${typeof result}`);
  }
  for (const [key, value] of Object.entries(result)) {
    if (typeof value !== 'number' || !Number.isFinite(value)) {
      throw new Error(`suite ${name}: ${key} = ${value} is not a finite number`);
    }
    if (key in merged) throw new Error(`suite ${name}: key ${key} is already reported by another suite`);
  }
}

function table(results) {
  const keys = Object.keys(results).sort();
  const width = Math.max(...keys.map((k) => k.length), 6);
  const lines = [`${'metric'.padEnd(width)}  value`, `${'-'.repeat(width)}  ${'-'.repeat(12)}`];
  for (const key of keys) {
    const value = results[key];
    lines.push(`${key.padEnd(width)}  ${Number.isInteger(value) ? value : value.toFixed(3)}`);
  }
  return lines.join('\n');
}

/** Date, CPU, memory, browser and WebGPU adapter of this run, for the report. */
async function machine(browser, server) {
  const cpus = os.cpus();
  let gpu = 'none';
  const owner = { name: 'machine', after: () => {} };
  const p = await browser.openPage(owner, '/bench/pages/side-by-side.html', () => window.pageReady);
  try {
    gpu = await p.evaluate(async () => {
      const adapter = await navigator.gpu?.requestAdapter();
      if (!adapter) return 'none';
      const { vendor, architecture, description } = adapter.info;
      return [vendor, architecture, description].filter(Boolean).join(' / ');
    });
  } finally {
    await p.page.close();
  }
  return {
    date: new Date().toISOString().replace(/\.\d+Z$/, 'Z'),
    cores: cpus.length,
    cpu: cpus[0]?.model?.trim() ?? 'unknown',
    memoryGb: Math.round(os.totalmem() / 1e9),
    chromium: browser.browser.version(),
    gpu,
    server: server.url,
  };
}

async function main() {
  const filter = process.env.BENCH_FILTER ? new RegExp(process.env.BENCH_FILTER) : null;
  const files = (await readdir(SUITES))
    .filter((f) => f.endsWith('.mjs') && (!filter || filter.test(f)))
    .sort();
  if (files.length === 0) throw new Error(`no benchmark suites in ${SUITES}${filter ? ` matching ${filter}` : ''}`);
  const server = await startServer({ locations: serverLocations(REPO_ROOT) });
  let browser;
  const merged = {};
  const bySuite = {};
  let meta;
  try {
    // The HTTP cache stays on (repeat visits); other hosts are refused by the resolver rules.
    browser = await startBrowser({ baseUrl: server.url, httpCache: true });
    meta = await machine(browser, server);
    for (const file of files) {
      const name = path.basename(file, '.mjs');
      const suite = await import(path.join(SUITES, file));
      if (typeof suite.run !== 'function') throw new Error(`suite ${file} does not export run(ctx)`);
      log(`running ${name}`);
      const started = Date.now();
      const { ctx, close } = suiteContext(name, server, browser);
      let result;
      try {
        result = await suite.run(ctx);
      } finally {
        await close();
      }
      checkResult(name, result, merged);
      Object.assign(merged, result);
      bySuite[name] = Object.keys(result);
      log(`${name} done in ${((Date.now() - started) / 1000).toFixed(1)} s`);
    }
    const sorted = Object.fromEntries(Object.keys(merged).sort().map((k) => [k, merged[k]]));
    await mkdir(RESULTS, { recursive: true });
    const out = path.join(RESULTS, 'latest.json');
    await writeFile(out, `${JSON.stringify(sorted, null, 2)}\n`);
    await writeReports(browser, RESULTS, 'latest', sorted, bySuite, meta);
    console.log(table(sorted));
    log(`wrote ${path.relative(REPO_ROOT, out)}, latest.md and latest.png`);
  } finally {
    await browser?.close();
    await server.stop();
  }
}

main().catch((error) => {
  console.error(error?.stack ?? error);
  process.exit(1);
});
