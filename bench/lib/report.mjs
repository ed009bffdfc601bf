// Renders bench/run.mjs's results as markdown (bench/results/latest.md) and as a chart page that
// the runner screenshots into bench/results/latest.png with the headless Chromium it already
// runs. Pure functions of the results object: no I/O here, so a test can render a fixed object.
//
// The headline rows are the targets of the side-by-side comparisons (against onnxruntime-web and
// the raw pipe; against wllama). Every ratio is ours / theirs of a time (lower is better), except
// load_ratio_vs_raw_90mb, huge_load_ratio_vs_raw and the llm decode/prefill ratios, which are of
// a throughput (higher is better).

/** Target rows: [key, what it is, comparison, bound]. */
export const TARGETS = [
  ['ready_ratio_vs_ort_webgpu', 'time to ready, ours WebGPU / ORT WebGPU EP', '<=', 0.5],
  ['load_ratio_vs_raw_90mb', 'weights load MB/s, ours / raw fetch+writeBuffer', '>=', 0.9],
  ['wasm_growth_mb_90mb', 'wasm memory growth during load (MiB)', '<=', 16],
  ['infer_ratio_vs_ort_webgpu_b1', 'inference 1x128, ours WebGPU / ORT WebGPU EP', '<=', 1.0],
  ['infer_ratio_vs_ort_webgpu_b8', 'inference 8x128, ours WebGPU / ORT WebGPU EP', '<=', 1.0],
  ['cpu_infer_ratio_vs_ort_wasm_b1', 'inference 1x128, ours CPU / ORT wasm EP', '<=', 2.0],
  ['ort_webgpu_ran', "ORT's WebGPU EP really ran (1/0)", '==', 1],
  ['llm_decode_ratio_vs_wllama_cpu', 'Gemma 3 270M decode tok/s, ours CPU / best wllama CPU', '>=', 1.0],
  ['llm_decode_ratio_vs_wllama_1t', 'Gemma 3 270M decode tok/s, ours CPU / wllama 1 thread', '>=', 1.5],
  ['llm_prefill_ratio_vs_wllama_cpu', 'Gemma 3 270M prefill tok/s, ours CPU / best wllama CPU', '>=', 1.0],
  ['llm_ttft_ratio_vs_wllama', 'time to first token from a blank page, ours / wllama', '<=', 0.5],
  ['llm_wasm_mb_ours_webgpu', 'wasm memory, Gemma on our WebGPU backend (MiB)', '<=', 32],
  ['llm_decode_bandwidth_fraction_cpu', 'CPU decode weight bytes/s / page memory bandwidth', '>=', 0.6],
  ['huge_file_gib', 'weights file streamed into GPU buffers (GiB, > wasm32)', '>=', 5],
  ['huge_load_ratio_vs_raw', '5 GiB load MB/s, ours / raw fetch+writeBuffer per chunk', '>=', 0.9],
  ['huge_wasm_growth_mb', 'wasm memory growth, 5 GiB load (MiB)', '<=', 16],
  ['huge_js_array_buffer_peak_mb', 'page ArrayBuffer peak, 5 GiB load (MiB)', '<=', 64],
  ['huge_readback_mismatches', 'GPU read-backs of 5 GiB load differing from the file', '==', 0],
];

/** Chart panels: [title, unit, [[label, key], ...]]; a panel shows the bars whose keys exist. */
export const PANELS = [
  ['Time to ready (fresh page, median; WebGPU = SwiftShader here)', 'ms', [
    ['ours WebGPU', 'ready_ms_ours_webgpu'], ['ORT WebGPU', 'ready_ms_ort_webgpu'], ['ORT WebGPU opt', 'ready_ms_ort_webgpu_opt'],
    ['ours CPU', 'ready_ms_ours_cpu'], ['ORT wasm', 'ready_ms_ort_wasm'], ['raw pipe', 'ready_ms_raw_pipe']]],
  ['WebGPU inference (SwiftShader here), median of warm runs', 'ms', [
    ['ours 1 x 128', 'infer_ms_b1_ours_webgpu'], ['ORT 1 x 128', 'infer_ms_b1_ort_webgpu'],
    ['ours 8 x 128', 'infer_ms_b8_ours_webgpu'], ['ORT 8 x 128', 'infer_ms_b8_ort_webgpu']]],
  ['CPU inference (ORT: wasm EP), median of warm runs', 'ms', [
    ['ours 1 x 128', 'infer_ms_b1_ours_cpu'], ['ours pool 1 x 128', 'infer_ms_b1_ours_cpu_mt'], ['ORT 1 x 128', 'infer_ms_b1_ort_wasm'], ['ORT threads 1 x 128', 'infer_ms_b1_ort_wasm_mt'],
    ['ours 8 x 128', 'infer_ms_b8_ours_cpu'], ['ours pool 8 x 128', 'infer_ms_b8_ours_cpu_mt'], ['ORT 8 x 128', 'infer_ms_b8_ort_wasm'], ['ORT threads 8 x 128', 'infer_ms_b8_ort_wasm_mt']]],
  ['Wasm memory once ready', 'MiB', [
    ['ours WebGPU', 'ready_wasm_mb_ours_webgpu'], ['ORT WebGPU', 'ready_wasm_mb_ort_webgpu'],
    ['ours CPU', 'ready_wasm_mb_ours_cpu'], ['ORT wasm', 'ready_wasm_mb_ort_wasm']]],
  ['MiniLM wasm memory after 8 x 128 (every wasm memory of the page)', 'MiB', [
    ['tensor bytes', 'minilm_tensor_mb'], ['ours CPU', 'minilm_wasm_mb_ours_cpu'], ['ours CPU pool', 'minilm_wasm_mb_ours_cpu_mt'],
    ['ORT wasm', 'minilm_wasm_mb_ort_wasm'], ['ORT wasm threads', 'minilm_wasm_mb_ort_wasm_mt']]],
  ['Gemma 3 270M decode (128 tokens, median of pages)', 'tokens/s', [
    ['ours CPU', 'llm_decode_tok_s_ours_cpu'], ['wllama 1 thread', 'llm_decode_tok_s_wllama_1t'],
    ['wllama threads', 'llm_decode_tok_s_wllama_mt'], ['ours WebGPU (SwiftShader)', 'llm_decode_tok_s_ours_webgpu']]],
  ['5.4 GiB weights file into GPU buffers (SwiftShader)', 'MB/s', [
    ['ours', 'huge_load_mbps'], ['raw fetch + writeBuffer', 'huge_raw_mbps'], ['ours, GGUF', 'huge_gguf_load_mbps']]],
  ['Gemma 3 270M time to first token (blank page)', 'ms', [
    ['ours CPU', 'llm_ttft_ms_ours_cpu'], ['wllama 1 thread', 'llm_ttft_ms_wllama_1t'], ['wllama threads', 'llm_ttft_ms_wllama_mt']]],
];

const TOLERANCE = 1e-9;

/** Whether `value` meets `op bound`. */
export function meets(value, op, bound) {
  if (op === '<=') return value <= bound + TOLERANCE;
  if (op === '>=') return value >= bound - TOLERANCE;
  return Math.abs(value - bound) <= TOLERANCE;
}

/**
 * A number as the tables print it: integers as they are, others with 4 significant digits,
 * except values just under 1 (cosines), which get enough decimals to show how far under.
 */
export function formatNumber(value) {
  if (Number.isInteger(value)) return String(value);
  const abs = Math.abs(value);
  if (abs < 1 && 1 - abs < 1e-3) return value.toFixed(Math.min(12, 3 - Math.floor(Math.log10(1 - abs))));
  if (abs >= 1000) return value.toFixed(0);
  if (abs >= 1 || abs === 0) return value.toPrecision(4);
  return value.toPrecision(3);
}

function escapeHtml(s) {
  return String(s).replace(/[&<>"]/g, (c) => ({ '&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;' })[c]);
}

/** One line describing where the numbers come from. */
export function machineLine(meta) {
  const parts = [
    meta.date,
    `${meta.cores} CPU cores (${meta.cpu})`,
    `${meta.memoryGb} GB RAM`,
    `Chromium ${meta.chromium}`,
    `WebGPU adapter: ${meta.gpu}`,
  ];
  return parts.filter(Boolean).join(', ');
}

/**
 * The markdown report: targets (those present), then every key by suite.
 * @param {Record<string, number>} results  merged results
 * @param {Record<string, string[]>} bySuite  suite name -> its keys
 * @param {{date: string, cores: number, cpu: string, memoryGb: number, chromium: string, gpu: string}} meta
 */
export function markdownReport(results, bySuite, meta) {
  const lines = ['# webdelegate benchmark results', '', `Machine: ${machineLine(meta)}.`, ''];
  const targets = TARGETS.filter(([key]) => key in results);
  if (targets.length) {
    lines.push('Ratios are ours / theirs of a time (lower is better), except load MB/s (higher is better).', '');
    lines.push('| target | key | value | bound | met |', '| --- | --- | ---: | ---: | :---: |');
    for (const [key, what, op, bound] of targets) {
      lines.push(`| ${what} | \`${key}\` | ${formatNumber(results[key])} | ${op} ${bound} | ${meets(results[key], op, bound) ? 'yes' : '**no**'} |`);
    }
    lines.push('');
  }
  for (const [suite, keys] of Object.entries(bySuite)) {
    lines.push(`## ${suite}`, '', '| key | value |', '| --- | ---: |');
    for (const key of [...keys].sort()) lines.push(`| \`${key}\` | ${formatNumber(results[key])} |`);
    lines.push('');
  }
  return lines.join('\n');
}

/** The chart as a self-contained HTML page (no scripts, no network): bars drawn with CSS. */
export function chartHtml(results, meta) {
  const panels = [];
  for (const [title, unit, bars] of PANELS) {
    const present = bars.filter(([, key]) => key in results);
    if (!present.length) continue;
    const max = Math.max(...present.map(([, key]) => results[key]), Number.MIN_VALUE);
    const rows = present.map(([label, key]) => {
      const value = results[key];
      const width = Math.max(0, Math.min(100, (value / max) * 100));
      const ours = label.startsWith('ours') ? ' ours' : '';
      return `<div class="row"><span class="label">${escapeHtml(label)}</span><span class="track"><span class="bar${ours}" style="width:${width.toFixed(2)}%"></span></span><span class="value">${escapeHtml(formatNumber(value))} ${escapeHtml(unit)}</span></div>`;
    });
    panels.push(`<section><h2>${escapeHtml(title)}</h2>${rows.join('')}</section>`);
  }
  const targets = TARGETS.filter(([key]) => key in results).map(([key, what, op, bound]) => {
    const ok = meets(results[key], op, bound);
    return `<tr class="${ok ? 'met' : 'missed'}"><td>${escapeHtml(what)}</td><td>${escapeHtml(formatNumber(results[key]))}</td><td>${escapeHtml(`${op} ${bound}`)}</td><td>${ok ? 'met' : 'missed'}</td></tr>`;
  });
  const body = panels.length || targets.length
    ? `${panels.join('')}${targets.length ? `<section class="wide"><h2>Targets (ours / theirs; time: lower is better)</h2><table>${targets.join('')}</table></section>` : ''}`
    : '<section class="wide"><h2>No side-by-side results in this run</h2></section>';
  return `<!doctype html><meta charset="utf-8"><title>webdelegate benchmark</title>
<style>
  body { font: 14px/1.35 system-ui, sans-serif; margin: 16px; width: 968px; background: #fff; color: #222; }
  h1 { font-size: 18px; margin: 0 0 4px; } .meta { color: #555; margin-bottom: 12px; font-size: 12px; }
  main { display: grid; grid-template-columns: 1fr 1fr; gap: 12px; }
  section { border: 1px solid #ddd; border-radius: 6px; padding: 8px 10px; } section.wide { grid-column: 1 / 3; }
  h2 { font-size: 14px; margin: 0 0 6px; }
  .row { display: flex; align-items: center; gap: 6px; margin: 3px 0; }
  .label { width: 96px; flex: none; } .value { width: 110px; flex: none; text-align: right; font-variant-numeric: tabular-nums; }
  .track { flex: 1; height: 14px; background: #f2f2f2; } .bar { display: block; height: 100%; background: #9aa5b1; } .bar.ours { background: #2f6fdf; }
  table { border-collapse: collapse; width: 100%; } td { padding: 2px 6px; border-bottom: 1px solid #eee; }
  tr.met td:last-child { color: #18794e; font-weight: 600; } tr.missed td:last-child { color: #c4320a; font-weight: 600; }
</style>
<h1>webdelegate vs onnxruntime-web vs the raw pipe (all-MiniLM-L6-v2)</h1>
<div class="meta">${escapeHtml(machineLine(meta))}</div>
<main>${body}</main>`;
}
