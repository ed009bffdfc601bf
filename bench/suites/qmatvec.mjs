// Quantized GEMV (decode-shaped `linear`) in headless Chromium, both backends, against the
// page's own memory bandwidth measured in the same page.
//
// Matrices (x [1, K] @ W^T, W [N, K] in ggml's layout, random bytes with ordinary f16 scales,
// built in the page and served by an in-memory provider; see QmatvecBench in
// src/web/programs/qmatvec_bench.rs): Q8_0 K=640 x N=262144 (Gemma 3's tied lm_head, 178 MB),
// and Q4_K, Q6_K, Q5_0 with K=2048 x N=640 (an ffn_down-like shape, 0.7-1.1 MB).
// GB/s = weight bytes / time of one execute (submission, the kernel, the [1, N] read-back).
// Baselines: CPU, a wasm simd128 sum over a 256 MB buffer (BandwidthBench); WebGPU, a plain
// WGSL read-and-sum (vec4<u32> loads, grid-stride) over a buffer of the same 256 MB (or the
// adapter's binding limit) on a device of its own from the same adapter. Each figure is the
// median of >= 7 timed runs after 2 warm-ups (>= 3 runs and 20 s at most for the slowest), the
// spread (max - min) / median reported beside it; a run is as many calls in a row as last
// >= 20 ms (the page's clock is coarsened to 0.1 ms; a small GEMV takes ~0.3 ms). The CPU
// baseline is timed before and after the GEMVs, its figure the median of both series (on a
// shared machine the page's bandwidth drifts during the run). In CI the WebGPU adapter is
// SwiftShader (WebGPU on the CPU): its figures measure that emulator, not a GPU.
// The CPU runs twice: its default f32 activations (`cpu`) and the compile spec
// activations = "int8" (`cpu_int8`: the activation row quantized to int8 blocks, as llama.cpp's
// CPU backend does), both against the CPU baseline.
// Keys: qmatvec_gbps_<fmt>_<cpu|cpu_int8|webgpu>, qmatvec_spread_<fmt>_<...>,
//   qmatvec_baseline_gbps_<cpu|webgpu>, qmatvec_bandwidth_fraction_<cpu|cpu_int8|webgpu> (Q8_0
//   lm_head GB/s over the baseline), qmatvec_bandwidth_fraction_<fmt>_<cpu|cpu_int8|webgpu>.
const MATRICES = [
  { format: 'Q8_0', k: 640, n: 262144 },
  { format: 'Q4_K', k: 2048, n: 640 },
  { format: 'Q6_K', k: 2048, n: 640 },
  { format: 'Q5_0', k: 2048, n: 640 },
];
const BASELINE_BYTES = 256 * 1024 * 1024;
const RUNS = 7;
const MAX_MS = 20000;

export async function run(ctx) {
  const p = await ctx.openHarnessPage({ bench: true }); // QmatvecBench, BandwidthBench: the bench build
  const measured = await p.evaluate(
    async ({ matrices, baselineBytes, runs, maxMs }) => {
      const wd = window.wd;
      if (!(await wd.ready())) throw new Error('no WebGPU device in the benchmark browser');
      // Median and spread of `runs` timings of `once` (after 2 warm-ups), in bytes / s. A page
      // that is not cross-origin isolated reads a clock coarsened to 0.1 ms, so a timing is of
      // as many calls in a row as make it last >= 20 ms (a small GEMV takes ~0.3 ms).
      async function rate(bytes, once) {
        await once();
        const w0 = performance.now();
        await once();
        const reps = Math.max(1, Math.min(1000, Math.ceil(20 / Math.max(performance.now() - w0, 0.01))));
        const times = [];
        const start = performance.now();
        while (times.length < runs && (times.length < 3 || performance.now() - start < maxMs)) {
          const t0 = performance.now();
          for (let i = 0; i < reps; i++) await once();
          times.push((performance.now() - t0) / reps);
        }
        return summary(bytes, times);
      }
      // GB/s of the median of `times` (ms per call), with their spread.
      function summary(bytes, times) {
        times.sort((a, b) => a - b);
        const median = times[Math.floor(times.length / 2)];
        const gbps = (t) => bytes / (t / 1000) / 1e9;
        return { gbps: gbps(median), spread: (times.at(-1) - times[0]) / median, runs: times.length, times };
      }

      // CPU baseline: wasm simd128 sum (timed again after the GEMVs, below).
      const cpuBaseline = new wd.BandwidthBench(baselineBytes);
      let sink = 0;
      const cpuSum = async () => {
        sink ^= cpuBaseline.sum();
      };
      const cpuBefore = await rate(cpuBaseline.bytes, cpuSum);

      // WebGPU baseline: a plain WGSL read-and-sum on a device of its own.
      const adapter = await navigator.gpu.requestAdapter();
      const limit = Math.min(adapter.limits.maxStorageBufferBindingSize, adapter.limits.maxBufferSize);
      const device = await adapter.requestDevice({
        requiredLimits: {
          maxStorageBufferBindingSize: adapter.limits.maxStorageBufferBindingSize,
          maxBufferSize: adapter.limits.maxBufferSize,
        },
      });
      const gpuBytes = Math.floor(Math.min(baselineBytes, limit) / 16) * 16;
      const words = gpuBytes / 16;
      const data = device.createBuffer({ size: gpuBytes, usage: GPUBufferUsage.STORAGE, mappedAtCreation: true });
      new Uint32Array(data.getMappedRange()).fill(1);
      data.unmap();
      const groups = 4096;
      const out = device.createBuffer({ size: groups * 256 * 4, usage: GPUBufferUsage.STORAGE });
      const module = device.createShaderModule({
        code: `
          @group(0) @binding(0) var<storage, read> data: array<vec4<u32>>;
          @group(0) @binding(1) var<storage, read_write> out: array<u32>;
          @compute @workgroup_size(256)
          fn main(@builtin(global_invocation_id) gid: vec3<u32>) {
            var acc = vec4<u32>(0u);
            for (var i = gid.x; i < ${words}u; i = i + ${groups * 256}u) {
              acc = acc + data[i];
            }
            out[gid.x] = acc.x + acc.y + acc.z + acc.w;
          }`,
      });
      const pipeline = device.createComputePipeline({ layout: 'auto', compute: { module, entryPoint: 'main' } });
      const bind = device.createBindGroup({
        layout: pipeline.getBindGroupLayout(0),
        entries: [
          { binding: 0, resource: { buffer: data } },
          { binding: 1, resource: { buffer: out } },
        ],
      });
      const webgpu = await rate(gpuBytes, async () => {
        const encoder = device.createCommandEncoder();
        const pass = encoder.beginComputePass();
        pass.setPipeline(pipeline);
        pass.setBindGroup(0, bind);
        pass.dispatchWorkgroups(groups);
        pass.end();
        device.queue.submit([encoder.finish()]);
        await device.queue.onSubmittedWorkDone();
      });
      data.destroy();
      out.destroy();
      device.destroy();

      const rows = [];
      for (const { format, k, n } of matrices) {
        // cpu_int8: the CPU backend with the compile spec activations = "int8" (the activation
        // row quantized to int8 blocks, llama.cpp's CPU numerics); cpu: its default f32 path.
        for (const [backend, name, activations] of [['cpu', 'cpu'], ['cpu', 'cpu_int8', 'int8'], ['webgpu', 'webgpu']]) {
          const bench = await wd.QmatvecBench.create(backend, format, k, n, activations);
          try {
            let first = 0;
            const r = await rate(bench.weightBytes, async () => {
              first = await bench.run();
            });
            if (!Number.isFinite(first)) throw new Error(`${format} on ${name}: output ${first}`);
            const { gbps, spread, runs: timed } = r;
            rows.push({ format, backend: name, baseline: backend, gbps, spread, runs: timed });
          } finally {
            bench.destroy();
            bench.free();
          }
        }
      }
      const cpuAfter = await rate(cpuBaseline.bytes, cpuSum);
      const cpu = summary(cpuBaseline.bytes, [...cpuBefore.times, ...cpuAfter.times]);
      cpuBaseline.free();
      return { baseline: { cpu, webgpu, gpuBytes, sink }, rows };
    },
    { matrices: MATRICES, baselineBytes: BASELINE_BYTES, runs: RUNS, maxMs: MAX_MS },
  );
  const result = {};
  const { baseline } = measured;
  for (const backend of ['cpu', 'webgpu']) {
    const b = baseline[backend];
    ctx.log(`${backend} baseline ${b.gbps.toFixed(2)} GB/s (spread ${(b.spread * 100).toFixed(0)}%, ${b.runs} runs)`);
    result[`qmatvec_baseline_gbps_${backend}`] = b.gbps;
    result[`qmatvec_baseline_spread_${backend}`] = b.spread;
  }
  for (const { format, backend, baseline: against, gbps, spread, runs } of measured.rows) {
    const fmt = format.toLowerCase();
    const fraction = gbps / baseline[against].gbps;
    ctx.log(`${format} ${backend}: ${gbps.toFixed(2)} GB/s (spread ${(spread * 100).toFixed(0)}%, ${runs} runs), ${fraction.toFixed(2)} of the baseline`);
    result[`qmatvec_gbps_${fmt}_${backend}`] = gbps;
    result[`qmatvec_spread_${fmt}_${backend}`] = spread;
    result[`qmatvec_bandwidth_fraction_${fmt}_${backend}`] = fraction;
    if (format === 'Q8_0') result[`qmatvec_bandwidth_fraction_${backend}`] = fraction;
  }
  return result;
}
