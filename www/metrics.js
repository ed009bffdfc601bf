// Time series for the chart: load throughput (MB/s, from the load tracker) and memory
// (performance.memory.usedJSHeapSize where the browser has it, and the wasm linear memory),
// sampled on a timer and redrawn together.
import { drawLines } from './chart.js';
import { MB } from './format.js';

export function metricsChart(canvas, note, wasmMemory) {
  const t0 = performance.now();
  const throughput = [];
  const heap = [];
  const wasm = [];
  const hasHeap = typeof performance.memory?.usedJSHeapSize === 'number';
  note.textContent = [
    hasHeap ? 'JS heap: performance.memory.usedJSHeapSize' : 'JS heap: not reported by this browser',
    wasmMemory ? 'wasm: linear memory size' : 'wasm memory: not available',
  ].join(' · ');
  const now = () => (performance.now() - t0) / 1000;
  const draw = () => {
    const series = [{ label: 'load MB/s', color: '#3b6fd4', unit: 'MB/s', points: throughput }];
    if (hasHeap) series.push({ label: 'JS heap MB', color: '#c2410c', unit: 'MB', points: heap });
    if (wasmMemory) series.push({ label: 'wasm memory MB', color: '#15803d', unit: 'MB', points: wasm });
    // Memory series share the right-hand scale: draw them with a common max by merging.
    drawLines(canvas, series.length > 2 ? [series[0], mergeScale(series[1], series[2])].flat() : series);
  };
  const sample = () => {
    const t = now();
    if (hasHeap) heap.push([t, performance.memory.usedJSHeapSize / MB]);
    if (wasmMemory) wasm.push([t, wasmMemory.buffer.byteLength / MB]);
    draw();
  };
  const timer = setInterval(sample, 500);
  sample();
  return {
    /** One throughput sample at `tLoad` seconds after the load started at `loadStart` (performance.now()). */
    throughput(loadStart, tLoad, mbps) {
      throughput.push([(loadStart - t0) / 1000 + tLoad, mbps]);
    },
    stop() { clearInterval(timer); sample(); },
  };
}

// Two memory series drawn on one scale: the first is labelled with the common max.
function mergeScale(a, b) {
  const max = Math.max(0, ...a.points.map((p) => p[1]), ...b.points.map((p) => p[1]));
  const pin = (s) => ({ ...s, points: s.points.length ? [...s.points] : [], pinMax: max });
  return [pin(a), pin(b)];
}
