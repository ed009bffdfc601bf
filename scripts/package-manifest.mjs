// Completes the package.json wasm-pack writes (run after wasm-pack and scripts/build-kernels.sh,
// which both write into the package directory): `node scripts/package-manifest.mjs [pkg]`.
// - `files`: what wasm-pack lists, plus the worker pool's kernel module and JavaScript, the
//   README and the LICENSE (npm packs those two anyway; listed so the manifest says so);
// - `exports`: the module with its types (`webdelegate`), the worker pool
//   (`webdelegate/cpu-threads`, also under its file name `webdelegate/cpu-threads/pool.js`),
//   the two wasm files (for a page that passes their URLs itself) and package.json. With
//   `exports`, nothing else in the package can be imported.
import { existsSync, readFileSync, writeFileSync } from 'node:fs';
import path from 'node:path';

const dir = process.argv[2] ?? 'pkg';
const file = path.join(dir, 'package.json');
const manifest = JSON.parse(readFileSync(file, 'utf8'));
for (const required of ['webdelegate.js', 'webdelegate.d.ts', 'webdelegate_bg.wasm', 'webdelegate_kernels.wasm', 'cpu-threads/pool.js', 'cpu-threads/participation.js', 'cpu-threads/worker.js', 'README.md', 'LICENSE']) {
  if (!existsSync(path.join(dir, required))) throw new Error(`package-manifest.mjs: ${dir}/${required} is missing (run wasm-pack, then scripts/build-kernels.sh)`);
}
manifest.files = [...new Set([...(manifest.files ?? []), 'webdelegate_kernels.wasm', 'cpu-threads/', 'README.md', 'LICENSE'])];
manifest.exports = {
  '.': { types: './webdelegate.d.ts', default: './webdelegate.js' },
  './cpu-threads': './cpu-threads/pool.js',
  './cpu-threads/pool.js': './cpu-threads/pool.js',
  './webdelegate_bg.wasm': './webdelegate_bg.wasm',
  './webdelegate_kernels.wasm': './webdelegate_kernels.wasm',
  './package.json': './package.json',
};
writeFileSync(file, JSON.stringify(manifest, null, 2) + '\n');
console.log(`completed ${file}: files and exports`);
