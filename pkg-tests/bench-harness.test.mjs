// The side-by-side benchmark's harness, without running any model (that is `npm run bench`):
// the report writer (markdown table and PNG chart rendered by headless Chromium) on a fixed
// results object, the inputs (texts whose token ids are known), and the blank bench page: it
// serves onnxruntime-web's ES modules with a JavaScript MIME type (nginx's mime.types has no
// .mjs), loads the pinned version, and counts every wasm memory a runtime makes.
import assert from 'node:assert/strict';
import { mkdtemp, readFile, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { test } from 'node:test';
import { BATCH, SEQ, makeInputs } from '../bench/lib/inputs.mjs';
import { TARGETS, formatNumber, markdownReport } from '../bench/lib/report.mjs';
import { writeReports } from '../bench/lib/write_reports.mjs';
import { useBrowserHarness } from './support/fixture.mjs';
import { REPO_ROOT } from './support/server.mjs';

const harness = useBrowserHarness();
const META = { date: '2026-01-02T03:04:05Z', cores: 2, cpu: 'Test CPU', memoryGb: 8, chromium: '1.2.3', gpu: 'google / swiftshader' };
// Three targets met, three missed, one absent (load_ratio_vs_raw_90mb).
const RESULTS = {
  ready_ratio_vs_ort_webgpu: 0.25,
  wasm_growth_mb_90mb: 20.5,
  infer_ratio_vs_ort_webgpu_b1: 1.0,
  infer_ratio_vs_ort_webgpu_b8: 1.5,
  cpu_infer_ratio_vs_ort_wasm_b1: 2.5,
  ort_webgpu_ran: 1,
  ready_ms_ours_webgpu: 500,
  ready_ms_ort_webgpu: 2000,
  infer_ms_b1_ours_webgpu: 75.25,
};
const BY_SUITE = { side_by_side: Object.keys(RESULTS).filter((k) => k !== 'wasm_growth_mb_90mb'), load: ['wasm_growth_mb_90mb'] };

test('the markdown report marks each target met or missed and lists every key', () => {
  const md = markdownReport(RESULTS, BY_SUITE, META);
  assert.match(md, /2 CPU cores \(Test CPU\)/);
  assert.match(md, /google \/ swiftshader/);
  const row = (key) => md.split('\n').find((l) => l.startsWith('|') && l.includes(`\`${key}\``) && /\| (yes|\*\*no\*\*) \|$/.test(l));
  const expected = {
    ready_ratio_vs_ort_webgpu: 'yes',
    wasm_growth_mb_90mb: '**no**',
    infer_ratio_vs_ort_webgpu_b1: 'yes', // exactly at the bound
    infer_ratio_vs_ort_webgpu_b8: '**no**',
    cpu_infer_ratio_vs_ort_wasm_b1: '**no**',
    ort_webgpu_ran: 'yes',
  };
  for (const [key, met] of Object.entries(expected)) {
    assert.ok(row(key), `a target row for ${key}`);
    assert.ok(row(key).endsWith(`| ${met} |`), `${key}: ${row(key)}`);
  }
  assert.equal(row('load_ratio_vs_raw_90mb'), undefined, 'absent keys get no target row');
  assert.equal(new Set(TARGETS.map(([key]) => key)).size, TARGETS.length, 'one target row per key');
  assert.ok(TARGETS.every(([, , op]) => ['<=', '>=', '=='].includes(op)), 'every target compares with <=, >= or ==');
  for (const key of Object.keys(RESULTS)) {
    assert.ok(md.includes(`| \`${key}\` | ${formatNumber(RESULTS[key])} |`), `${key} in its suite's table`);
  }
  assert.equal(formatNumber(75.25), '75.25');
  assert.equal(formatNumber(12345.6), '12346');
});

test('the chart is a PNG rendered by Chromium, bars proportional to the values', async (t) => {
  const dir = await mkdtemp(path.join(os.tmpdir(), 'bench-report-'));
  t.after(() => rm(dir, { recursive: true, force: true }));
  const { png, markdown } = await writeReports(harness.browser, dir, 'x', RESULTS, BY_SUITE, META);
  const bytes = await readFile(png);
  assert.deepEqual([...bytes.subarray(0, 8)], [0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a], 'PNG signature');
  assert.equal(bytes.toString('ascii', 12, 16), 'IHDR');
  assert.equal(bytes.readUInt32BE(16), 1000, 'width');
  assert.ok(bytes.readUInt32BE(20) >= 200, `height ${bytes.readUInt32BE(20)}`);
  assert.match(await readFile(markdown, 'utf8'), /ready_ratio_vs_ort_webgpu/);
  // The same page, inspected: ORT's 2000 ms bar is full width, ours (500 ms) a quarter of it.
  const page = await harness.browser.context.newPage();
  t.after(() => page.close());
  const { chartHtml } = await import('../bench/lib/report.mjs');
  await page.setContent(chartHtml(RESULTS, META));
  const widths = await page.$$eval('section:first-child .bar', (bars) => bars.map((b) => b.getBoundingClientRect().width));
  assert.equal(widths.length, 2);
  assert.ok(Math.abs(widths[0] / widths[1] - 0.25) < 0.01, `bar widths ${widths}`);
});

test('the inputs are 8 texts of 126 vocabulary words, [CLS] ... [SEP] = 128 ids', async () => {
  const { texts, ids } = await makeInputs(path.join(REPO_ROOT, '.cache/models/all-MiniLM-L6-v2'));
  assert.equal(texts.length, BATCH);
  assert.equal(new Set(texts).size, BATCH, 'distinct texts');
  for (const [i, text] of texts.entries()) {
    assert.equal(text.split(' ').length, SEQ - 2);
    assert.equal(ids[i].length, SEQ);
    assert.equal(ids[i][0], 101, '[CLS]');
    assert.equal(ids[i][SEQ - 1], 102, '[SEP]');
  }
});

test('the bench page loads the pinned onnxruntime-web and sees wasm memories', async (t) => {
  const p = await harness.openPage(t, '/bench/pages/side-by-side.html', () => window.pageReady);
  const r = await p.evaluate(async () => {
    const before = window.wasmMemoryBytes();
    const ort = await import('/node_modules/onnxruntime-web/dist/ort.wasm.min.mjs');
    const memory = new WebAssembly.Memory({ initial: 3 });
    return { before, after: window.wasmMemoryBytes(), count: window.wasmMemoryCount(), version: ort.env.versions.web, isMemory: memory instanceof WebAssembly.Memory };
  });
  const pinned = JSON.parse(await readFile(path.join(REPO_ROOT, 'package.json'), 'utf8')).devDependencies['onnxruntime-web'];
  assert.equal(r.version, pinned);
  assert.equal(r.before, 0);
  assert.equal(r.after, 3 * 65536);
  assert.equal(r.count, 1);
  assert.ok(r.isMemory);
});
