// The decoder architectures people bring (issue 32), each on its tiny random-weight GGUF
// (tests/fixtures/decoders), in headless Chromium on the CPU backend: the check of
// bench/lib/architecture_check.mjs (logits against llama.cpp's and the float64 reference's,
// tokenization against llama.cpp's), the same as pkg-tests/architectures.test.mjs.
// Keys:
//   decoder_archs_checked_llamacpp   variants (llama, llama3, smollm, mistral, qwen2, qwen3, phi3,
//                                    gemma2, gemma3) whose every check passes
//   decoder_archs_fixtures           variants with a fixture (the count checked against)
// Contract: see bench/run.mjs.
import path from 'node:path';
import { architectureFixtures, checkArchitecture } from '../lib/architecture_check.mjs';

export async function run(ctx) {
  const dir = path.join(ctx.root, 'tests/fixtures/decoders');
  const files = await architectureFixtures(dir);
  const page = await ctx.openHarnessPage();
  let passed = 0;
  for (const file of files) {
    const r = await checkArchitecture(page, dir, '/tests/fixtures/decoders/', file);
    ctx.log(`${r.variant} (${r.architecture}): ${r.failures.length ? `FAILS: ${r.failures[0]}` : 'passes'}; vs llama.cpp max abs ${r.worstCpp.toFixed(3)}, min cosine ${r.minCos.toFixed(5)}`);
    if (r.failures.length === 0) passed += 1;
  }
  return { decoder_archs_checked_llamacpp: passed, decoder_archs_fixtures: files.length };
}
