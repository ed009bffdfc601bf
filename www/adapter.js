// Shows the WebGPU adapter the browser gives (navigator.gpu): its info and all of its limits,
// or a clear message when WebGPU is missing or yields no adapter.
import { el, fillSection, keyValueTable } from './dom.js';

const number = new Intl.NumberFormat('en-US');

function limitsRows(limits) {
  const names = [];
  for (const name in limits) if (typeof limits[name] === 'number') names.push(name);
  return names.sort().map((name) => [name, number.format(limits[name])]);
}

export async function renderAdapter(section) {
  if (!('gpu' in navigator)) {
    fillSection(
      section,
      'error',
      el('p', { className: 'status' }, 'WebGPU is not available in this browser (navigator.gpu is missing). ' +
        'Use a browser with WebGPU enabled, on a secure origin such as localhost.'),
    );
    return;
  }
  const adapter = await navigator.gpu.requestAdapter();
  if (!adapter) {
    fillSection(section, 'error', el('p', { className: 'status' }, 'WebGPU is present, but requestAdapter() returned no adapter.'));
    return;
  }
  const info = adapter.info;
  const fallback = info.isFallbackAdapter ?? adapter.isFallbackAdapter;
  fillSection(
    section,
    'ready',
    keyValueTable([
      ['vendor', info.vendor || '(empty)'],
      ['architecture', info.architecture || '(empty)'],
      ['device', info.device || '(empty)'],
      ['description', info.description || '(empty)'],
      ['isFallbackAdapter', String(fallback)],
    ]),
    el('h3', {}, 'Limits'),
    Object.assign(keyValueTable(limitsRows(adapter.limits), { numeric: true }), { className: 'limits' }),
  );
}
