// A labelled progress bar (<progress> plus a text line) and a load-progress tracker that turns
// the provider's onProgress events (every file, every load) into MB done/total, requests and a
// smoothed MB/s.
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

const COUNTS = ['bytesDone', 'bytesTotal', 'requestsDone', 'requestsTotal'];
const sum = (a, b) => Object.fromEntries(COUNTS.map((k) => [k, (Number(a[k]) || 0) + (Number(b[k]) || 0)]));
const ZERO = Object.fromEntries(COUNTS.map((k) => [k, 0]));

/**
 * Whether `ev` starts a new load of its scope after `previous`: the provider reports each load
 * (a backend may fetch a file's parameters in several: the CPU backend gathers them in batches)
 * on its own, counting from zero, so a counter that goes back, other totals, or any event after
 * a finished load is the next load.
 */
function startsNewLoad(previous, ev) {
  const finished = previous.bytesDone === previous.bytesTotal && previous.requestsDone === previous.requestsTotal;
  const same = COUNTS.every((k) => previous[k] === ev[k]);
  return ev.bytesDone < previous.bytesDone || ev.requestsDone < previous.requestsDone ||
    ev.bytesTotal !== previous.bytesTotal || ev.requestsTotal !== previous.requestsTotal || (finished && !same);
}

/**
 * Tracks a weights load: the provider's onProgress events summed over every file (scope) and
 * every load of it, so the line counts what the load statistics count. `onSample(tSeconds,
 * mbPerSecond)` gets one rate sample per window; `reset()` starts over (a retry on another
 * backend loads with a new provider).
 */
export function loadTracker(bar, onSample, windowMs = 250) {
  let start = performance.now();
  let last = { t: start, bytes: 0 };
  let rate = NaN;
  // Per scope: the loads that ended (summed) and the current one's latest event.
  let scopes = new Map();
  let latest = null;
  return {
    get start() { return start; },
    event(ev) {
      const scope = scopes.get(ev.scope) ?? { ended: ZERO, current: null };
      if (scope.current && startsNewLoad(scope.current, ev)) scope.ended = sum(scope.ended, scope.current);
      scope.current = Object.fromEntries(COUNTS.map((k) => [k, Number(ev[k]) || 0]));
      scopes.set(ev.scope, scope);
      let e = ZERO;
      for (const s of scopes.values()) e = sum(e, sum(s.ended, s.current));
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
    reset() {
      start = performance.now();
      last = { t: start, bytes: 0 };
      rate = NaN;
      scopes = new Map();
      latest = null;
    },
    get latest() { return latest; },
    elapsedSeconds: () => (performance.now() - start) / 1000,
  };
}

/**
 * The weights line once loaded: bytes received and requests sent from the provider's own load
 * statistics (`embedder.loadStats()`, the numbers the statistics table shows), else from the
 * tracker's progress.
 */
export function loadSummary(stats, progress, secs) {
  const bytes = stats ? stats.bytesReceived : progress?.bytesDone;
  const requests = stats ? stats.requests : progress?.requestsDone;
  if (!Number.isFinite(bytes) || !Number.isFinite(requests)) return `loaded in ${secs.toFixed(1)} s`;
  return `${fmtMB(bytes)} in ${secs.toFixed(1)} s (${fmtRate(bytes / MB / Math.max(1e-3, secs))} avg) · ` +
    `${requests} request${requests === 1 ? '' : 's'}`;
}
