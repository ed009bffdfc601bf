// The package as a user installs it: `npm pack` of pkg/ (what `npm publish` would upload), the
// tarball installed into a fresh Vite app and a fresh webpack app, each built with its bundler's
// defaults and run in headless Chromium on a cross-origin isolated page: `init`, an Embedder
// (all-MiniLM-L6-v2) and a Generator (Gemma 3 270M Q4_K_M) on the CPU backend, with the worker
// pool from `webdelegate/cpu-threads` on two threads. Needs `npm run build:pkg` and
// `npm run setup` (the models, and the npm cache the installs read).
//
// The apps install offline (`npm install --offline`, from the npm cache) with a lockfile cut from
// this repository's package-lock.json: the exact vite, webpack and webpack-cli versions pinned
// there and their dependency closure, so nothing is resolved anew and no network is needed.
//
// Oracles: the embeddings of tests/fixtures/minilm/reference.json (NumPy float64: cosine >=
// 0.9999 per sentence) and the greedy tokens and text of tests/fixtures/gemma/
// greedy_reference.json's first prompt (float64 NumPy forward pass over the GGUF's weights).
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { createHash } from 'node:crypto';
import { existsSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { mkdir, readFile, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { after, test } from 'node:test';
import { promisify } from 'node:util';
import { useBrowserHarness } from './support/fixture.mjs';
import { REPO_ROOT } from './support/server.mjs';

const run = promisify(execFile);
const PKG = path.join(REPO_ROOT, 'pkg');
const WORK = mkdtempSync(path.join(os.tmpdir(), 'webdelegate-packed-'));
after(() => rmSync(WORK, { recursive: true, force: true }));
const ISOLATED = { 'Cross-Origin-Opener-Policy': 'same-origin', 'Cross-Origin-Embedder-Policy': 'require-corp', 'Cache-Control': 'no-store' };
const APPS = ['vite', 'webpack'];
const harness = useBrowserHarness({
  headers: ISOLATED,
  locations: APPS.map((app) => ({ prefix: `/${app}-app/`, dir: path.join(WORK, `${app}-app`, 'dist'), headers: ISOLATED })),
});
const SLOW = { timeout: 300_000 };

const LOCK = JSON.parse(readFileSync(path.join(REPO_ROOT, 'package-lock.json'), 'utf8'));
const minilm = JSON.parse(readFileSync(path.join(REPO_ROOT, 'tests/fixtures/minilm/reference.json'), 'utf8'));
const greedy = JSON.parse(readFileSync(path.join(REPO_ROOT, 'tests/fixtures/gemma/greedy_reference.json'), 'utf8')).prompts[0];
const SENTENCES = [0, 1, 2];

/** The version this repository's lockfile pins for the top-level package `name`. */
function pinned(name) {
  const entry = LOCK.packages[`node_modules/${name}`];
  assert.ok(entry, `${name} is not in package-lock.json`);
  return entry.version;
}

/**
 * The lockfile entries (path -> entry) that installing `names` needs: each top-level package and
 * what its dependencies resolve to, the way Node resolves them (the nearest node_modules up the
 * path). Optional dependencies and optional peers the lockfile lacks are left out. Each entry
 * gets its tarball's URL on `registry` (the repository's lockfile omits them), so npm finds the
 * tarball in its cache by that URL and the integrity, without asking for the package's metadata.
 */
function closure(names, registry) {
  const out = {};
  const visit = (key) => {
    if (out[key]) return;
    const entry = LOCK.packages[key];
    const name = entry.name ?? key.slice(key.lastIndexOf('node_modules/') + 'node_modules/'.length);
    out[key] = { resolved: `${registry}${name}/-/${name.split('/').pop()}-${entry.version}.tgz`, ...entry };
    const wanted = { ...entry.dependencies, ...entry.optionalDependencies };
    for (const [peer] of Object.entries(entry.peerDependencies ?? {})) {
      if (!entry.peerDependenciesMeta?.[peer]?.optional) wanted[peer] = true;
    }
    for (const dep of Object.keys(wanted)) {
      let base = key;
      let found = null;
      for (;;) {
        const candidate = `${base}/node_modules/${dep}`;
        if (LOCK.packages[candidate]) {
          found = candidate;
          break;
        }
        const up = base.lastIndexOf('/node_modules/');
        if (up < 0) break;
        base = base.slice(0, up);
      }
      if (!found && LOCK.packages[`node_modules/${dep}`]) found = `node_modules/${dep}`;
      if (found) visit(found);
      else if (!entry.optionalDependencies?.[dep] && !entry.peerDependencies?.[dep]) throw new Error(`${key} needs ${dep}, which package-lock.json lacks`);
    }
  };
  for (const name of names) visit(`node_modules/${name}`);
  return out;
}

/** npm's registry URL (as configured here), ending in '/'. */
async function registry() {
  const { stdout } = await run('npm', ['config', 'get', 'registry']);
  return stdout.trim().replace(/\/?$/, '/');
}

/** `npm pack pkg/` into WORK: the tarball's path and npm's list of what it holds. */
let packed;
async function pack() {
  if (packed) return packed;
  assert.ok(existsSync(path.join(PKG, 'webdelegate.js')), 'pkg/ is missing: run npm run build:pkg');
  const { stdout } = await run('npm', ['pack', PKG, '--pack-destination', WORK, '--json', '--silent'], { cwd: WORK, maxBuffer: 1 << 24 });
  const [info] = JSON.parse(stdout);
  packed = { tarball: path.join(WORK, info.filename), files: info.files.map((f) => f.path), info };
  return packed;
}

// The app's code: what a user writes after `npm install webdelegate`.
const MAIN_JS = `import init, { Embedder, Generator, getOption, ready, useCpuThreads, version } from 'webdelegate';
import { CpuThreadPool, cpuThreadsUnavailable } from 'webdelegate/cpu-threads';

window.runApp = async ({ modelDir, gguf, sentences, prompt, maxNewTokens, threads }) => {
  await init();
  const gpu = await ready();
  const unavailable = cpuThreadsUnavailable();
  if (unavailable) throw new Error('no CPU threads: ' + unavailable);
  useCpuThreads(await CpuThreadPool.start({ threads }));
  const embedder = await Embedder.load(modelDir, { backend: 'cpu' });
  const rows = (await embedder.embed(sentences)).map((row) => Array.from(row));
  const embedderBackend = embedder.backend;
  embedder.destroy();
  const generator = await Generator.load(gguf, { backend: 'cpu', contextLength: 64 });
  const tokens = [];
  let text = '';
  for await (const piece of generator.generate(prompt, { maxNewTokens })) {
    tokens.push(piece.token);
    text += piece.text;
  }
  const cpuThreads = Number(getOption('cpu', [{ key: 'threads', value: 0 }])[0].value);
  generator.destroy();
  return { version: version(), gpu, rows, embedderBackend, tokens, text, cpuThreads };
};
window.appReady = true;
`;

const INDEX_HTML = (script) => `<!doctype html>
<meta charset="utf-8">
<title>webdelegate app</title>
${script}
`;

/** Writes the app `name` (package.json, lockfile, sources) into WORK/<name>-app and installs it offline. */
async function installApp(name, devDependencies, files) {
  const { tarball } = await pack();
  const dir = path.join(WORK, `${name}-app`);
  await mkdir(dir, { recursive: true });
  const tgz = `file:../${path.basename(tarball)}`;
  const manifest = { name: `${name}-app`, version: '0.0.0', private: true, type: 'module', dependencies: { webdelegate: tgz }, devDependencies };
  const integrity = `sha512-${createHash('sha512').update(await readFile(tarball)).digest('base64')}`;
  const lock = {
    name: manifest.name,
    version: manifest.version,
    lockfileVersion: 3,
    requires: true,
    packages: {
      '': { name: manifest.name, version: manifest.version, dependencies: manifest.dependencies, devDependencies },
      'node_modules/webdelegate': { version: packed.info.version, resolved: tgz, integrity, license: 'MIT' },
      ...closure(Object.keys(devDependencies), await registry()),
    },
  };
  await writeFile(path.join(dir, 'package.json'), JSON.stringify(manifest, null, 2));
  await writeFile(path.join(dir, 'package-lock.json'), JSON.stringify(lock, null, 2));
  for (const [file, text] of Object.entries(files)) await writeFile(path.join(dir, file), text);
  // --offline: the npm cache only; --ignore-scripts: no install script runs (none is needed).
  await run('npm', ['install', '--offline', '--ignore-scripts', '--no-audit', '--no-fund', '--loglevel=error'], { cwd: dir, maxBuffer: 1 << 24 });
  const installed = JSON.parse(await readFile(path.join(dir, 'node_modules/webdelegate/package.json'), 'utf8'));
  assert.equal(installed.version, packed.info.version);
  for (const [dep, version] of Object.entries(devDependencies)) {
    assert.equal(JSON.parse(await readFile(path.join(dir, 'node_modules', dep, 'package.json'), 'utf8')).version, version, `${dep} as the lockfile pins it`);
  }
  return dir;
}

/** Opens the built app at /<name>-app/ and runs it; asserts the results against the references. */
async function runApp(t, name) {
  const page = await harness.openPage(t, `/${name}-app/index.html`, () => window.appReady);
  const r = await page.evaluate((args) => window.runApp(args), {
    modelDir: '/.cache/models/all-MiniLM-L6-v2/',
    gguf: '/.cache/models/gemma-3-270m/gemma-3-270m-q4_k_m.gguf',
    sentences: SENTENCES.map((i) => minilm.sentences[i]),
    prompt: greedy.text,
    maxNewTokens: greedy.tokens.length,
    threads: 2,
  });
  t.diagnostic(`${name}: webdelegate ${r.version}, WebGPU device ${r.gpu}, CPU threads ${r.cpuThreads}`);
  assert.equal(r.version, packed.info.version);
  assert.equal(r.cpuThreads, 2, 'the worker pool of webdelegate/cpu-threads runs the CPU backend');
  assert.equal(r.embedderBackend, 'cpu');
  const refBytes = Buffer.from(minilm.embeddings_f32_le_base64, 'base64');
  SENTENCES.forEach((sentence, k) => {
    const want = new Float32Array(refBytes.buffer, refBytes.byteOffset + sentence * minilm.dim * 4, minilm.dim);
    const got = r.rows[k];
    assert.equal(got.length, minilm.dim);
    let dot = 0, ng = 0, nw = 0;
    for (let i = 0; i < minilm.dim; i++) {
      dot += got[i] * want[i];
      ng += got[i] * got[i];
      nw += want[i] * want[i];
    }
    const cosine = dot / Math.sqrt(ng * nw);
    assert.ok(cosine >= 0.9999, `${name}: sentence ${sentence} cosine ${cosine} against the float64 reference`);
  });
  assert.deepEqual(r.tokens, greedy.tokens, `${name}: greedy tokens of ${JSON.stringify(greedy.text)}`);
  assert.equal(r.text, greedy.continuation);
}

test('npm pack gives a package with its exports, types, README and LICENSE', async () => {
  const { files, info } = await pack();
  for (const file of ['package.json', 'README.md', 'LICENSE', 'webdelegate.js', 'webdelegate.d.ts', 'webdelegate_bg.wasm', 'webdelegate_kernels.wasm', 'cpu-threads/pool.js', 'cpu-threads/participation.js', 'cpu-threads/worker.js']) {
    assert.ok(files.includes(file), `${file} is not in the tarball: ${files}`);
  }
  assert.ok(files.some((f) => f.startsWith('snippets/')), 'the wasm-bindgen snippets are packed');
  assert.ok(!files.some((f) => f.endsWith('.gitignore')), 'no .gitignore in the tarball');
  assert.equal(info.name, 'webdelegate');
  const manifest = JSON.parse(await readFile(path.join(PKG, 'package.json'), 'utf8'));
  assert.deepEqual(manifest.exports['.'], { types: './webdelegate.d.ts', default: './webdelegate.js' });
  assert.equal(manifest.exports['./cpu-threads'], './cpu-threads/pool.js');
  for (const target of Object.values(manifest.exports).flatMap((e) => (typeof e === 'string' ? [e] : Object.values(e)))) {
    assert.ok(files.includes(target.replace(/^\.\//, '')), `exports names ${target}, which is not packed`);
  }
  assert.equal(manifest.license, 'MIT');
});

test('a fresh Vite app: installs the tarball offline, builds, runs an Embedder and a Generator', SLOW, async (t) => {
  const dir = await installApp('vite', { vite: pinned('vite') }, {
    'index.html': INDEX_HTML('<script type="module" src="./main.js"></script>'),
    'main.js': MAIN_JS,
    // Relative asset URLs, so the build runs under /vite-app/.
    'vite.config.js': "export default { base: './' };\n",
  });
  await run(path.join(dir, 'node_modules/.bin/vite'), ['build', '--logLevel', 'warn'], { cwd: dir, maxBuffer: 1 << 24 });
  await runApp(t, 'vite');
});

test('a fresh webpack app: installs the tarball offline, builds, runs an Embedder and a Generator', SLOW, async (t) => {
  const dir = await installApp('webpack', { webpack: pinned('webpack'), 'webpack-cli': pinned('webpack-cli') }, {
    'main.js': MAIN_JS,
    'webpack.config.js': `import path from 'node:path';
export default { mode: 'production', entry: './main.js', output: { path: path.resolve('dist'), clean: true }, performance: { hints: false } };
`,
  });
  await run(path.join(dir, 'node_modules/.bin/webpack'), ['--no-color'], { cwd: dir, maxBuffer: 1 << 24 });
  await writeFile(path.join(dir, 'dist', 'index.html'), INDEX_HTML('<script src="./main.js"></script>'));
  await runApp(t, 'webpack');
});
