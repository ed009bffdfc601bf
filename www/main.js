// Demo entry: loads the webdelegate package, fills the registered-backends and WebGPU-adapter
// sections, and runs the semantic-search demo (demo.js). A failure shows in the section it
// belongs to.
import init, * as wd from 'webdelegate';
import { renderAdapter } from './adapter.js';
import { renderBackends } from './backends.js';
import { runDemo } from './demo.js';
import { el, fillSection } from './dom.js';
import { startCpuThreads } from './threads.js';

function showError(section, what, err) {
  console.error(err);
  fillSection(section, 'error', el('p', { className: 'status' }, `${what}: ${err?.message ?? err}`));
}

async function main() {
  document.body.dataset.state = 'loading';
  const backends = document.getElementById('backends');
  const adapter = document.getElementById('adapter');
  const adapterDone = renderAdapter(adapter).catch((e) => showError(adapter, 'Could not query WebGPU', e));
  let exports;
  try {
    exports = await init();
    document.getElementById('version').textContent = `package v${wd.version()}`;
    // The default backends are registered at start; WebGPU's device arrives asynchronously.
    await wd.ready();
    await startCpuThreads(wd);
    renderBackends(backends, wd);
  } catch (e) {
    showError(backends, 'Could not load the webdelegate package', e);
    showError(document.getElementById('model'), 'Could not load the webdelegate package', e);
    document.body.dataset.state = 'error';
    await adapterDone;
    return;
  }
  await Promise.all([
    adapterDone,
    runDemo(wd, exports?.memory).catch((e) => {
      showError(document.getElementById('model'), 'The demo failed', e);
      document.body.dataset.state = 'error';
    }),
  ]);
}

main();
