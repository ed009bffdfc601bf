// Generates the benchmark's large weights file: a ~1 GB safetensors file of random F32 tensors
// (15 x 64 MiB, so the whole file still fits one WebGPU buffer of the 1 GiB adapter limit for
// the raw baselines), written into the git-ignored .cache/bench/ only when missing.
// Usage: node scripts/make-bench-weights.mjs  ->  prints the file's path.
import { existsSync, statSync } from 'node:fs';
import { mkdir, rename } from 'node:fs/promises';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { writeLargeSafetensors } from '../pkg-tests/support/weights.mjs';

export const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
export const BENCH_DIR = path.join(ROOT, '.cache', 'bench');
export const LARGE_FILE = path.join(BENCH_DIR, 'generated-1gb.safetensors');
const SHAPE = { seed: 7, count: 15, tensorBytes: 64 << 20 };

/** The large file's path, generating it first when missing or of the wrong size. */
export async function ensureLargeWeights() {
  const expected = 15 * (64 << 20);
  if (existsSync(LARGE_FILE) && statSync(LARGE_FILE).size > expected) return LARGE_FILE;
  await mkdir(BENCH_DIR, { recursive: true });
  const partial = `${LARGE_FILE}.partial`;
  await writeLargeSafetensors(partial, SHAPE);
  await rename(partial, LARGE_FILE);
  return LARGE_FILE;
}

if (process.argv[1] && fileURLToPath(import.meta.url) === path.resolve(process.argv[1])) {
  console.log(await ensureLargeWeights());
}
