// The search box: debounced as-you-type queries, each embedded and ranked against the index.
// One query embeds at a time; a query typed while one runs waits, and a newer one replaces it
// (at most one waits), so typing never piles up work. Only the newest query's result is shown:
// a result that arrives after the person typed something else is dropped, error or not.
// Shows the top results with their scores.
import { el } from './dom.js';
import { fmtMs, fmtScore } from './format.js';

export function searchPanel(section, { embedder, index, k = 5, debounceMs = 200 }) {
  const input = section.querySelector('input[type=search]');
  const list = section.querySelector('ol.results');
  const status = section.querySelector('.search-status');
  let timer = 0;
  let latest = ''; // the newest query asked for
  let running = false; // a query is embedding
  let waiting = null; // the query to run when the running one ends (null: none)

  async function search(query) {
    const [vector] = await embedder.embed([query]);
    return index.search(vector, k).map(({ text, topic, score }) => ({ text, topic, score }));
  }

  function render(query, results, ms) {
    status.textContent = `Top ${results.length} of ${index.size} · query embedded in ${fmtMs(embedder.lastBatchMillis)}, ${fmtMs(ms)} in total`;
    list.replaceChildren(...results.map((r) => el(
      'li', {},
      el('span', { className: 'score' }, fmtScore(r.score)),
      el('span', { className: 'bar', style: `--w:${Math.max(0, r.score) * 100}%` }),
      el('span', { className: 'text' }, r.text),
      el('span', { className: 'topic' }, r.topic),
    )));
    list.dataset.query = query;
  }

  async function run(query) {
    running = true;
    const t0 = performance.now();
    try {
      const results = await search(query);
      if (query === latest) render(query, results, performance.now() - t0);
    } catch (e) {
      if (query === latest) {
        console.error(e);
        status.textContent = `Search failed: ${e.code ? `${e.code}: ` : ''}${e.message ?? e}`;
        list.replaceChildren();
        delete list.dataset.query;
      }
    } finally {
      running = false;
      const next = waiting;
      waiting = null;
      if (next !== null && next === latest) run(next);
    }
  }

  function ask(query) {
    latest = query;
    if (!query.trim()) {
      waiting = null;
      list.replaceChildren();
      status.textContent = `Type to search ${index.size} sentences.`;
      delete list.dataset.query;
      return;
    }
    status.textContent = 'Searching…';
    if (running) waiting = query; // replaces an older waiting query
    else run(query);
  }

  input.disabled = false;
  input.placeholder = 'Ask something, e.g. “Will it rain tomorrow?”';
  input.addEventListener('input', () => {
    clearTimeout(timer);
    timer = setTimeout(() => ask(input.value), debounceMs);
  });
  status.textContent = `Type to search ${index.size} sentences.`;
  input.focus();
  return { search };
}
