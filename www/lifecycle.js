// The page lifecycle as the runtime sees it. webdelegate wires the page's own events
// (visibilitychange, freeze/resume, pagehide/pageshow) to its providers and backends by itself;
// this badge shows the result: the model's phase (loading / ready), whether it is suspended and
// why, the load position a suspend paused at, and what each signal released.
// Returns {setPhase(phase)}.
const MB = 1048576;
const mb = (bytes) => `${(bytes / MB).toFixed(1)} MB`;

export function watchLifecycle(wd, badge, detail, progress) {
  let phase = 'loading';
  let last = null;
  const render = () => {
    const state = wd.lifecycleState();
    const label = state.suspended ? 'suspended' : last?.signal === 'resume' ? 'resumed' : phase;
    badge.textContent = state.suspended ? `suspended (${state.reasons.join(', ')})` : label;
    badge.dataset.state = state.suspended ? 'suspended' : label;
    const parts = [];
    const p = progress();
    if (phase === 'loading' && p) parts.push(`${state.suspended ? 'paused at' : 'loading'} ${mb(p.bytesDone)} of ${mb(p.bytesTotal)}`);
    if (last) {
      const r = last.released;
      if (last.signal === 'resume') parts.push('resumed: loads continue from the first byte not yet on the GPU');
      else parts.push(`${last.signal}: released ${mb(r.hostBytes)} host, ${mb(r.gpuBytes)} GPU` +
        (r.requestsAborted ? `, ${r.requestsAborted} request${r.requestsAborted === 1 ? '' : 's'} paused` : ''));
    }
    parts.push(`suspends ${state.suspends}, resumes ${state.resumes}`);
    detail.textContent = parts.join(' · ');
  };
  wd.addLifecycleListener((event) => { last = event; render(); });
  render();
  return { setPhase: (p) => { phase = p; render(); } };
}
