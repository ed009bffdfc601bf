// The search box: debounced as-you-type queries, each embedded and ranked against the index;
// a newer query supersedes an older one still running. Shows the top results with their scores.
import { el } from './dom.js';
import { fmtMs, fmtScore } from './format.js';

export function searchPanel(section, { embedder, index, k = 5, debounceMs = 200 }) {
  const input = section.querySelector('input[type=search]');
  const list = section.querySelector('ol.results');
  const status = section.querySelector('.search-status');
  let seq = 0;
  let timer = 0;

  async function search(query) {
    const [vector] = await embedder.embed([query]);
    return index.search(vector, k).map(({ text, topic, score }) => ({ text, topic, score }));
  }

  async function run(query) {
    const mine = ++seq;
    if (!query.trim()) {
      list.replaceChildren();
      status.textContent = `Type to search ${index.size} sentences.`;
      delete list.dataset.query;
      return;
    }
    status.textContent = 'Searching…';
    const t0 = performance.now();
    try {
      const results = await search(query);
      if (mine !== seq) return; // superseded
      const ms = performance.now() - t0;
      status.textContent = `Top ${results.length} of ${index.size} · query embedded in ${fmtMs(embedder.lastBatchMillis)}, ${fmtMs(ms)} in total`;
      list.replaceChildren(...results.map((r) => el(
        'li', {},
        el('span', { className: 'score' }, fmtScore(r.score)),
        el('span', { className: 'bar', style: `--w:${Math.max(0, r.score) * 100}%` }),
        el('span', { className: 'text' }, r.text),
        el('span', { className: 'topic' }, r.topic),
      )));
      list.dataset.query = query;
    } catch (e) {
      if (mine !== seq) return;
      console.error(e);
      status.textContent = `Search failed: ${e.code ? `${e.code}: ` : ''}${e.message ?? e}`;
      list.replaceChildren();
    }
  }

  input.disabled = false;
  input.placeholder = 'Ask something, e.g. “Will it rain tomorrow?”';
  input.addEventListener('input', () => {
    clearTimeout(timer);
    timer = setTimeout(() => run(input.value), debounceMs);
  });
  status.textContent = `Type to search ${index.size} sentences.`;
  input.focus();
  return { search };
}
