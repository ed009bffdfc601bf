// A dedicated worker running webdelegate, for pkg-tests/lifecycle.test.mjs: the module wires
// itself to the lifecycle messages the page forwards (forwardLifecycle); this worker answers
// {query: 'state'} with its lifecycleState() and the suspended flag of its webgpu backend.
import init, * as wd from '../pkg/webdelegate.js';

const ready = init().then(() => wd.ready());

self.addEventListener('message', async (event) => {
  if (event.data?.query !== 'state') return;
  await ready;
  const suspended = wd.getOption('webgpu', [{ key: 'suspended', value: false }])[0].value;
  self.postMessage({ state: wd.lifecycleState(), backendSuspended: suspended });
});
