// Page lifecycle: when the tab is hidden the embedder is told to 'suspend' (the weights provider
// pauses its requests), when it is visible again to 'resume'. Returns {refresh, detach}.
export function watchLifecycle(embedderRef, badge) {
  const show = (state, note = '') => {
    badge.textContent = note ? `${state} (${note})` : state;
    badge.dataset.state = state;
  };
  const apply = () => {
    const hidden = document.visibilityState === 'hidden';
    const embedder = embedderRef();
    if (!embedder) return show(hidden ? 'suspended' : 'active', 'no model yet');
    try {
      embedder.notify(hidden ? 'suspend' : 'resume');
      show(hidden ? 'suspended' : 'active');
    } catch (e) {
      console.error(e);
      show(hidden ? 'suspended' : 'active', `notify failed: ${e.code ?? e.message}`);
    }
  };
  document.addEventListener('visibilitychange', apply);
  apply();
  return { refresh: apply, detach: () => document.removeEventListener('visibilitychange', apply) };
}
