// Launches the system Chromium (/usr/bin/chromium) headless through playwright-core, with WebGPU
// enabled and every background network feature off; playwright never downloads a browser here.
// Each browser gets its own temporary profile. Pages opened through it surface console errors and
// uncaught page errors in the test output, and an uncaught page error fails the test that opened it.
import { chromium } from 'playwright-core';

export const CHROMIUM = process.env.CHROMIUM_BIN ?? '/usr/bin/chromium';
export const CHROMIUM_ARGS = [
  '--enable-unsafe-webgpu',
  '--no-sandbox',
  '--disable-background-networking',
  '--disable-component-update',
  '--disable-sync',
  '--disable-quic',
  '--no-first-run',
  // Nothing but this machine resolves (a second guard beside the route below, and the only one
  // where the route is off).
  '--host-resolver-rules=MAP * ~NOTFOUND, EXCLUDE localhost, EXCLUDE 127.0.0.1',
];
const LOAD_TIMEOUT_MS = 30_000;

/**
 * @param {{baseUrl: string, httpCache?: boolean}} opts  baseUrl: where the nginx of
 *   support/server.mjs serves the repo root. httpCache: keep Chromium's HTTP cache on (default
 *   off); playwright turns the cache off while any route is set, so then requests to other
 *   origins are refused only by the host resolver rules above (benchmarks measuring repeat
 *   visits need the cache).
 */
export async function startBrowser({ baseUrl, httpCache = false }) {
  // launch() gives a fresh temporary user-data-dir, deleted on close.
  const browser = await chromium.launch({ executablePath: CHROMIUM, headless: true, args: CHROMIUM_ARGS });
  const context = await browser.newContext();
  // Nothing but the local server may be reached from a page.
  if (!httpCache) await context.route(
    (url) => url.origin !== new URL(baseUrl).origin && !['data:', 'blob:'].includes(url.protocol),
    (route) => route.abort('blockedbyclient'),
  );

  /**
   * Opens `urlPath` on the local server in a new page, tied to the node:test context `t`:
   * the page closes when the test ends, and the test fails if the page threw an uncaught error.
   * Resolves once `readyFn` (evaluated in the page) returns truthy. `initScript` (a function)
   * runs in the page before any of its own scripts, e.g. to take `navigator.gpu` away.
   */
  async function openPage(t, urlPath, readyFn, { initScript } = {}) {
    const page = await context.newPage();
    if (initScript) await page.addInitScript(initScript);
    const pageErrors = [];
    const label = t?.name ?? urlPath;
    page.on('console', (msg) => {
      if (msg.type() === 'error' || msg.type() === 'warning') {
        console.error(`[page console.${msg.type()}] (${label}) ${msg.text()}`);
      }
    });
    page.on('pageerror', (err) => {
      pageErrors.push(err);
      console.error(`[uncaught page error] (${label}) ${err.stack ?? err}`);
    });
    t?.after(async () => {
      await page.close();
      if (pageErrors.length) {
        throw new Error(`uncaught page error(s) in ${urlPath}:\n${pageErrors.map((e) => e.stack ?? e).join('\n')}`);
      }
    });
    await page.goto(new URL(urlPath, baseUrl).href);
    if (readyFn) await page.waitForFunction(readyFn, undefined, { timeout: LOAD_TIMEOUT_MS });
    return {
      page,
      pageErrors,
      /** Runs fn(arg) in the page and returns its (serializable) result. */
      evaluate: (fn, arg) => page.evaluate(fn, arg),
    };
  }

  /**
   * Opens pkg-tests/harness.html: the built package (pkg/) imported and initialised, exposed as
   * `window.wd`, with the helpers of harness-helpers.js on `window`. Throws if the package failed.
   * `options`: as openPage's (`initScript`).
   */
  async function openHarnessPage(t, options) {
    const p = await openPage(t, '/pkg-tests/harness.html', () => window.harnessReady || window.harnessError, options);
    const failure = await p.evaluate(() => window.harnessError ?? null);
    if (failure) throw new Error(`harness could not load the package: ${failure}`);
    return p;
  }

  return {
    browser,
    context,
    openPage,
    openHarnessPage,
    async close() {
      await context.close().catch(() => {});
      await browser.close();
    },
  };
}
