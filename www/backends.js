// Renders the package's registered backends, in registration order, each with its availability.
import { el, fillSection } from './dom.js';

function availability(wd, name) {
  try {
    return wd.isBackendAvailable(name)
      ? el('span', { className: 'available' }, 'available')
      : el('span', { className: 'unavailable' }, 'unavailable');
  } catch (e) {
    return el('span', { className: 'unavailable' }, `error: ${e.code ?? e.message}`);
  }
}

export function renderBackends(section, wd) {
  const names = wd.listBackends();
  if (names.length === 0) {
    fillSection(section, 'ready', el('p', { className: 'status' }, 'No backends registered.'));
    return;
  }
  const items = names.map((name) =>
    el('li', { className: 'backend' }, el('span', { className: 'name' }, name), availability(wd, name)),
  );
  fillSection(section, 'ready', el('ul', { className: 'backends' }, ...items));
}
