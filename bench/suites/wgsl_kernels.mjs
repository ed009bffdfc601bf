// Every WGSL kernel variant the WebGPU backend can compile, rendered by the kernel builder and
// validated by naga (wgpu's WGSL front end and validator) with no device: the native unit test
// src/backends/webgpu/kernels/variants.rs, run through cargo (it needs no browser; the page
// the runner opens is not used). The test fails, and so does this suite, if naga refuses any
// variant.
// Keys:
//   wgsl_kernels_validated   variants rendered and accepted by naga (count; all of them)
// Contract: see bench/run.mjs.
import { execFileSync } from 'node:child_process';

export async function run(ctx) {
  const output = execFileSync(
    'cargo',
    ['test', '--lib', 'kernels::variants', '--', '--nocapture'],
    { cwd: ctx.root, encoding: 'utf8', stdio: ['ignore', 'pipe', 'pipe'], maxBuffer: 64 << 20 },
  );
  const found = /wgsl_kernels_validated = (\d+)/.exec(output);
  if (!found) throw new Error(`kernels::variants printed no count:\n${output.slice(-2000)}`);
  ctx.log(found[0]);
  return { wgsl_kernels_validated: Number(found[1]) };
}
