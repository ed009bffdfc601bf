// Matmul GFLOP/s in headless Chromium, measured in one page: the WebGPU backend (SwiftShader:
// WebGPU on the CPU) with its tiled kernel and with the naive one-thread-per-output kernel, and
// the CPU backend (wasm, simd128), for 384x384x384, 128x384x1536 and 1536x384x128 (M x K x N).
//
// Each execution runs 4 independent matmuls, all outputs (see MatmulBench in
// src/web/programs/bench.rs); a measurement is 2 warm-up executions, then executions until at least
// 3 and 0.7 s, timed with performance.now() around whole executions (submission and read-back
// included). The backends are measured in alternating rounds and each reports its best round
// (the machine is shared and noisy). Keys:
//   matmul_gflops_webgpu_384, matmul_gflops_webgpu_naive_384, matmul_tiled_over_naive_webgpu
//   matmul_gflops_webgpu_128x384x1536, ..._naive_128x384x1536, matmul_tiled_over_naive_webgpu_128x384x1536
//   matmul_gflops_webgpu_1536x384x128, ..._naive_1536x384x128, matmul_tiled_over_naive_webgpu_1536x384x128
//   matmul_gflops_cpu_384, matmul_gflops_cpu_128x384x1536, matmul_gflops_cpu_1536x384x128
//   matmul_webgpu_over_cpu_384 (tiled WebGPU over CPU, same shape)
const SHAPES = [
  { m: 384, k: 384, n: 384, suffix: '384' },
  { m: 128, k: 384, n: 1536, suffix: '128x384x1536' },
  { m: 1536, k: 384, n: 128, suffix: '1536x384x128' },
];
const REPEATS = 4;
const ROUNDS = 2;
const MIN_MS = 700;

/**
 * The fixture's own contract, checked before anything is timed (MatmulBench is only in the
 * bench's build, so no pkg-test reaches it): its FLOP count, `run` after `destroy` rejected, a
 * bad compile spec and sizes that would overflow or exhaust wasm memory refused before anything
 * is allocated. Throws, failing the suite, when one does not hold.
 */
async function checkFixture(p) {
  const failures = await p.evaluate(async () => {
    const wd = window.wd;
    await wd.ready();
    const problems = [];
    const code = async (fn) => (await capture(fn)).error?.code ?? 'resolved';
    const bench = await wd.MatmulBench.create('cpu', 33, 17, 65, 2);
    await bench.run(1);
    if (bench.flopsPerRun !== 2 * 33 * 17 * 65 * 2) problems.push(`flopsPerRun ${bench.flopsPerRun}`);
    bench.destroy();
    const expect = async (what, want, fn) => {
      const got = await code(fn);
      if (got !== want) problems.push(`${what}: ${got}, want ${want}`);
    };
    await expect('run after destroy', 'InvalidState', () => bench.run(1));
    await expect('bad compile spec', 'InvalidArgument', () => wd.MatmulBench.create('webgpu', 8, 8, 8, 1, [{ key: 'tile', value: '9' }]));
    await expect('65536^3', 'InvalidArgument', () => wd.MatmulBench.create('webgpu', 65536, 65536, 65536, 1));
    await expect('16384 x 16384 x 8', 'InvalidArgument', () => wd.MatmulBench.create('webgpu', 16384, 16384, 8, 1));
    await expect('100000 repeats', 'InvalidArgument', () => wd.MatmulBench.create('webgpu', 8, 8, 8, 100000));
    return problems;
  });
  if (failures.length) throw new Error(`MatmulBench: ${failures.join('; ')}`);
}

export async function run(ctx) {
  const p = await ctx.openHarnessPage({ bench: true }); // MatmulBench: the bench build
  await checkFixture(p);
  const measured = await p.evaluate(
    async ({ shapes, repeats, rounds, minMs }) => {
      const wd = window.wd;
      // "webgpu" and "cpu" are registered when the package starts; ready() awaits the device.
      if (!(await wd.ready())) throw new Error('no WebGPU device in the benchmark browser');
      async function gflops(bench) {
        let iterations = 0;
        const start = performance.now();
        let now = start;
        while (iterations < 3 || now - start < minMs) {
          await bench.run(1);
          iterations += 1;
          now = performance.now();
        }
        return (bench.flopsPerRun * iterations) / ((now - start) / 1000) / 1e9;
      }
      const rows = [];
      for (const { m, k, n, suffix } of shapes) {
        const benches = {
          tiled: await wd.MatmulBench.create('webgpu', m, k, n, repeats, []),
          naive: await wd.MatmulBench.create('webgpu', m, k, n, repeats, [{ key: 'matmul_kernel', value: 'naive' }]),
          cpu: await wd.MatmulBench.create('cpu', m, k, n, repeats, []),
        };
        const best = { tiled: 0, naive: 0, cpu: 0 };
        try {
          for (const bench of Object.values(benches)) await bench.run(2);
          for (let round = 0; round < rounds; round++) {
            for (const [name, bench] of Object.entries(benches)) best[name] = Math.max(best[name], await gflops(bench));
          }
        } finally {
          for (const bench of Object.values(benches)) bench.destroy();
        }
        rows.push({ suffix, ...best });
      }
      return rows;
    },
    { shapes: SHAPES, repeats: REPEATS, rounds: ROUNDS, minMs: MIN_MS },
  );
  const result = {};
  for (const { suffix, tiled, naive, cpu } of measured) {
    ctx.log(`${suffix}: webgpu tiled ${tiled.toFixed(2)}, naive ${naive.toFixed(2)}, cpu ${cpu.toFixed(2)} GFLOP/s`);
    result[`matmul_gflops_webgpu_${suffix}`] = tiled;
    result[`matmul_gflops_webgpu_naive_${suffix}`] = naive;
    result[`matmul_gflops_cpu_${suffix}`] = cpu;
    result[suffix === '384' ? 'matmul_tiled_over_naive_webgpu' : `matmul_tiled_over_naive_webgpu_${suffix}`] = tiled / naive;
    if (suffix === '384') result.matmul_webgpu_over_cpu_384 = tiled / cpu;
  }
  return result;
}
