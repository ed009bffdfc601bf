// Writes a results object as `<name>.md` and `<name>.png` into a folder: the markdown of
// report.mjs, and its chart page rendered and screenshotted by a headless Chromium the caller
// already runs (pkg-tests/support/browser.mjs), so the chart needs no drawing library.
import { mkdir, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { chartHtml, markdownReport } from './report.mjs';

/** Chart width in CSS pixels (the page's body is laid out for it); the height follows the content. */
const CHART_WIDTH = 1000;

/**
 * @param {{context: import('playwright-core').BrowserContext}} browser  from startBrowser()
 * @returns {Promise<{markdown: string, png: string}>} the two files' paths
 */
export async function writeReports(browser, dir, name, results, bySuite, meta) {
  await mkdir(dir, { recursive: true });
  const markdown = path.join(dir, `${name}.md`);
  const png = path.join(dir, `${name}.png`);
  await writeFile(markdown, markdownReport(results, bySuite, meta));
  const page = await browser.context.newPage();
  try {
    await page.setViewportSize({ width: CHART_WIDTH, height: 400 });
    await page.setContent(chartHtml(results, meta));
    await page.screenshot({ path: png, fullPage: true });
  } finally {
    await page.close();
  }
  return { markdown, png };
}
