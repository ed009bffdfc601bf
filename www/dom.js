// Tiny DOM helpers for the demo page: build elements, and set a section's state and message.

/** el('td', {className: 'num'}, '42') */
export function el(tag, props = {}, ...children) {
  const node = Object.assign(document.createElement(tag), props);
  node.append(...children);
  return node;
}

/** Replaces everything under the section's heading and marks its state (loading|ready|error). */
export function fillSection(section, state, ...content) {
  const heading = section.querySelector('h2');
  section.replaceChildren(heading, ...content);
  section.dataset.state = state;
}

/** A two-column table from [label, value] rows. */
export function keyValueTable(rows, { numeric = false } = {}) {
  return el(
    'table',
    {},
    el('tbody', {}, ...rows.map(([k, v]) => el('tr', {}, el('th', { scope: 'row' }, k), el('td', { className: numeric ? 'num' : '' }, v)))),
  );
}
