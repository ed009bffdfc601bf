// Generates the `huge` benchmark's weights: 5.4 GiB of F32 tensors, larger than a 32-bit wasm
// module can address, written once into the git-ignored .cache/bench/ as safetensors and as GGUF
// (the same tensors, the same bytes), with a manifest of their indices and per-tensor SHA-256.
//   - 40 tensors of 64-512 MiB (rows of 4 KiB: [rows, 1024]);
//   - one of 1.5 GiB, larger than the headless adapter's 1 GiB maxBufferSize, so a load must
//     split it into buffers at row boundaries.
// Content is deterministic (xorshift, seeded per tensor): the same files on every machine.
// Usage: node scripts/make-huge-weights.mjs  ->  prints the manifest's path.
import { existsSync, statSync } from 'node:fs';
import { mkdir, readFile, rename, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { seededChunks, writeStreamedWeights } from '../pkg-tests/support/weights.mjs';
import { BENCH_DIR } from './make-bench-weights.mjs';

const MIB = 1 << 20;
/** Bump when the layout or the content changes: older files are then rewritten. */
const LAYOUT_VERSION = 1;
const MANIFEST = path.join(BENCH_DIR, 'huge.json');
const FILES = {
  safetensors: path.join(BENCH_DIR, 'huge-5gib.safetensors'),
  gguf: path.join(BENCH_DIR, 'huge-5gib.gguf'),
};
const COLS = 1024;

/** The tensors, in file order: sizes in MiB cycle so the big one sits in the middle. */
export function hugeTensors() {
  const cycle = [64, 64, 64, 64, 64, 64, 64, 96, 128, 256];
  const sizes = [];
  for (let group = 0; group < 4; group++) {
    for (const mib of cycle) sizes.push(group === 3 && mib === 256 ? 512 : mib);
    if (group === 1) sizes.push(1536);
  }
  return sizes.map((mib, i) => ({
    name: mib === 1536 ? 'huge.weight' : `layer${i}.weight`,
    dtype: 'F32',
    shape: [(mib * MIB) / (4 * COLS), COLS],
    length: mib * MIB,
  }));
}

/** The manifest `{version, files: {safetensors, gguf}, tensors, tensorSha256, safetensors:
 * {index, size}, gguf: {index, size}}`, generating the files first when missing or stale. */
export async function ensureHugeWeights(log = () => {}) {
  if (existsSync(MANIFEST)) {
    const manifest = JSON.parse(await readFile(MANIFEST, 'utf8'));
    const intact = manifest.version === LAYOUT_VERSION
      && Object.entries(FILES).every(([kind, file]) => existsSync(file) && statSync(file).size === manifest[kind]?.size);
    if (intact) return manifest;
  }
  await mkdir(BENCH_DIR, { recursive: true });
  const tensors = hugeTensors();
  const total = tensors.reduce((n, t) => n + t.length, 0);
  log(`writing ${(total / 2 ** 30).toFixed(2)} GiB of tensors as safetensors and GGUF into ${path.relative(process.cwd(), BENCH_DIR)}`);
  const partial = { safetensors: `${FILES.safetensors}.partial`, gguf: `${FILES.gguf}.partial` };
  const written = await writeStreamedWeights(partial, tensors, (i) => seededChunks(1000 + i, tensors[i].length));
  await rename(partial.safetensors, FILES.safetensors);
  await rename(partial.gguf, FILES.gguf);
  const manifest = { version: LAYOUT_VERSION, files: FILES, tensors, ...written };
  await writeFile(MANIFEST, JSON.stringify(manifest));
  return manifest;
}

if (process.argv[1] && fileURLToPath(import.meta.url) === path.resolve(process.argv[1])) {
  await ensureHugeWeights(console.log);
  console.log(MANIFEST);
}
