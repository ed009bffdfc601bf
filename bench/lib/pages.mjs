// Where a suite's pages come from: bench/run.mjs's ctx when given (its nginx serves the repo
// root, so the weights in .cache/ are same-origin at /.cache/...), else a server and a browser of
// the suite's own (a suite run standalone: `node bench/suites/<name>.mjs`).
import path from 'node:path';
import { ROOT } from '../../scripts/make-bench-weights.mjs';
import { startBrowser } from '../../pkg-tests/support/browser.mjs';
import { startServer } from '../../pkg-tests/support/server.mjs';

/**
 * `{base, open(), close()}`: `base` is the URL of .cache/, `open()` a harness page with the
 * package loaded, `close()` stops what this call started.
 */
export async function harnessPages(ctx) {
  if (ctx?.openHarnessPage && ctx.serverUrl) {
    return { base: `${ctx.serverUrl}/.cache`, open: () => ctx.openHarnessPage(), close: async () => {} };
  }
  const server = await startServer({ locations: [{ prefix: '/.cache/', dir: path.join(ROOT, '.cache') }] });
  const browser = await startBrowser({ baseUrl: server.url });
  return {
    base: `${server.url}/.cache`,
    async open() {
      const page = await browser.openPage(null, '/pkg-tests/harness.html', () => window.harnessReady || window.harnessError);
      const failure = await page.evaluate(() => window.harnessError ?? null);
      if (failure) throw new Error(`harness could not load the package: ${failure}`);
      return page;
    },
    async close() {
      await browser.close();
      await server.stop();
    },
  };
}
