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

export async function run(ctx) {
  const p = await ctx.openHarnessPage();
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
