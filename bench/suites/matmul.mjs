// Matmul GFLOP/s in headless Chromium on the WebGPU backend (SwiftShader: WebGPU on the CPU),
// the tiled kernel and the naive one-thread-per-output kernel measured in the same page, for
// 384x384x384, 128x384x1536 and 1536x384x128 (M x K x N).
//
// Each execution runs 4 independent matmuls and reads one output back (see MatmulBench in
// src/web/webgpu.rs); a measurement is 2 warm-up executions, then executions until at least
// 3 and 1.5 s, timed with performance.now() around whole executions (submission and read-back
// included). Keys:
//   matmul_gflops_webgpu_384, matmul_gflops_webgpu_naive_384, matmul_tiled_over_naive_webgpu
//   matmul_gflops_webgpu_128x384x1536, ..._naive_128x384x1536, matmul_tiled_over_naive_webgpu_128x384x1536
//   matmul_gflops_webgpu_1536x384x128, ..._naive_1536x384x128, matmul_tiled_over_naive_webgpu_1536x384x128
// The CPU backend's numbers (matmul_gflops_cpu_*) join once that backend is registered by the
// package (it is not yet).
const SHAPES = [
  { m: 384, k: 384, n: 384, suffix: '384' },
  { m: 128, k: 384, n: 1536, suffix: '128x384x1536' },
  { m: 1536, k: 384, n: 128, suffix: '1536x384x128' },
];
const REPEATS = 4;
const MIN_MS = 1500;

export async function run(ctx) {
  const p = await ctx.openHarnessPage();
  const measured = await p.evaluate(
    async ({ shapes, repeats, minMs }) => {
      const wd = window.wd;
      if (!(await wd.registerWebGpuBackend('webgpu'))) throw new Error('no WebGPU device in the benchmark browser');
      async function gflops(backend, { m, k, n }, compileSpecs) {
        const bench = await wd.MatmulBench.create(backend, m, k, n, repeats, compileSpecs);
        try {
          await bench.run(2);
          let iterations = 0;
          const start = performance.now();
          let now = start;
          while (iterations < 3 || now - start < minMs) {
            await bench.run(1);
            iterations += 1;
            now = performance.now();
          }
          return (bench.flopsPerRun * iterations) / ((now - start) / 1000) / 1e9;
        } finally {
          bench.destroy();
        }
      }
      const rows = [];
      for (const shape of shapes) {
        const tiled = await gflops('webgpu', shape, []);
        const naive = await gflops('webgpu', shape, [{ key: 'matmul_kernel', value: 'naive' }]);
        rows.push({ suffix: shape.suffix, tiled, naive });
      }
      return rows;
    },
    { shapes: SHAPES, repeats: REPEATS, minMs: MIN_MS },
  );
  const result = {};
  for (const { suffix, tiled, naive } of measured) {
    ctx.log(`${suffix}: tiled ${tiled.toFixed(2)} GFLOP/s, naive ${naive.toFixed(2)} GFLOP/s`);
    result[`matmul_gflops_webgpu_${suffix}`] = tiled;
    result[`matmul_gflops_webgpu_naive_${suffix}`] = naive;
    result[suffix === '384' ? 'matmul_tiled_over_naive_webgpu' : `matmul_tiled_over_naive_webgpu_${suffix}`] = tiled / naive;
  }
  return result;
}
