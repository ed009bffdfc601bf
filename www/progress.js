// A labelled progress bar (<progress> plus a text line) and a load-progress tracker that turns
// the provider's onProgress events into MB done/total, requests and a smoothed MB/s.
import { el } from './dom.js';
import { MB, fmtMB, fmtRate } from './format.js';

export function progressBar(label) {
  const bar = el('progress', { max: 1, value: 0 });
  const text = el('span', { className: 'progress-text' }, '');
  const node = el('div', { className: 'progress' }, el('div', { className: 'progress-label' }, el('strong', {}, label), text), bar);
  return {
    node,
    set(fraction, line) {
      if (Number.isFinite(fraction)) bar.value = Math.min(1, Math.max(0, fraction));
      else bar.removeAttribute('value'); // indeterminate
      text.textContent = line;
    },
  };
}

/** Tracks a weights load; `onSample(tSeconds, mbPerSecond)` gets one rate sample per window. */
export function loadTracker(bar, onSample, windowMs = 250) {
  const start = performance.now();
  let last = { t: start, bytes: 0 };
  let rate = NaN;
  const scopes = new Map(); // the provider reports each scope (file) on its own
  let latest = null;
  return {
    start,
    event(ev) {
      scopes.set(ev.scope, ev);
      const e = { bytesDone: 0, bytesTotal: 0, requestsDone: 0, requestsTotal: 0 };
      for (const s of scopes.values()) for (const k in e) e[k] += Number(s[k]) || 0;
      latest = e;
      const now = performance.now();
      if (now - last.t >= windowMs || e.bytesDone === e.bytesTotal) {
        const dt = (now - last.t) / 1000;
        if (dt > 0) {
          rate = Math.max(0, e.bytesDone - last.bytes) / MB / dt;
          onSample((now - start) / 1000, rate);
        }
        last = { t: now, bytes: e.bytesDone };
      }
      const avg = e.bytesDone / MB / Math.max(1e-3, (now - start) / 1000);
      bar.set(
        e.bytesTotal > 0 ? e.bytesDone / e.bytesTotal : NaN,
        `${fmtMB(e.bytesDone)} / ${fmtMB(e.bytesTotal)} · requests ${e.requestsDone}/${e.requestsTotal} · ` +
          `${fmtRate(rate)} (avg ${fmtRate(avg)})${scopes.size > 1 ? ` · ${scopes.size} files` : ''}`,
      );
    },
    get latest() { return latest; },
    elapsedSeconds: () => (performance.now() - start) / 1000,
  };
}
