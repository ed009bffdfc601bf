// Demo entry: loads the webdelegate package, then fills the page's two sections
// (registered backends, WebGPU adapter); a failure shows in the section it belongs to.
import init, * as wd from 'webdelegate';
import { renderAdapter } from './adapter.js';
import { renderBackends } from './backends.js';
import { el, fillSection } from './dom.js';

function showError(section, what, err) {
  console.error(err);
  fillSection(section, 'error', el('p', { className: 'status' }, `${what}: ${err?.message ?? err}`));
}

async function main() {
  const backends = document.getElementById('backends');
  const adapter = document.getElementById('adapter');
  const adapterDone = renderAdapter(adapter).catch((e) => showError(adapter, 'Could not query WebGPU', e));
  try {
    await init();
    document.getElementById('version').textContent = `package v${wd.version()}`;
    // The default backends are registered at start; WebGPU's device arrives asynchronously.
    await wd.ready();
    renderBackends(backends, wd);
  } catch (e) {
    showError(backends, 'Could not load the webdelegate package', e);
  }
  await adapterDone;
}

main();
