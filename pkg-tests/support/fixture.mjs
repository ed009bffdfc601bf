// One nginx + one headless Chromium per test file: useBrowserHarness() registers node:test
// before/after hooks that start both once and always stop both (even after a failure).
// Tests then open a fresh page each, so every test starts from a fresh wasm instance
// (the backend registry is global per instance and cannot be emptied).
import { after, before } from 'node:test';
import { startBrowser } from './browser.mjs';
import { startServer } from './server.mjs';

export const TEST_TIMEOUT = { timeout: 60_000 };

export function useBrowserHarness(serverOptions = {}) {
  const h = { server: null, browser: null };
  before(async () => {
    h.server = await startServer(serverOptions);
    h.browser = await startBrowser({ baseUrl: h.server.url });
  }, { timeout: 60_000 });
  after(async () => {
    try {
      await h.browser?.close();
    } finally {
      await h.server?.stop();
    }
  });
  return {
    get server() { return h.server; },
    get browser() { return h.browser; },
    openHarnessPage: (t, options) => h.browser.openHarnessPage(t, options),
    openPage: (t, urlPath, readyFn, options) => h.browser.openPage(t, urlPath, readyFn, options),
  };
}
