// In-page helpers for the package tests (loaded by harness.html, used inside page.evaluate):
// they turn thrown errors and rejections into plain, serializable descriptions, so the node
// side can assert on `code` / `codeValue` (which do not survive playwright's own error path).

/** A serializable description of anything thrown. */
export function describeError(e) {
  if (e === null || typeof e !== 'object') return { isError: false, thrownType: typeof e, message: String(e) };
  return {
    isError: e instanceof Error,
    name: e.name,
    code: e.code,
    codeValue: e.codeValue,
    message: String(e.message),
  };
}

/** Runs fn (sync or async): {ok: true, value} or {ok: false, error: describeError(...)}. */
export async function capture(fn) {
  try {
    return { ok: true, value: await fn() };
  } catch (e) {
    return { ok: false, error: describeError(e) };
  }
}

/** The smallest valid JS backend; `overrides` replace any of its methods. */
export function stubBackend(overrides = {}) {
  return {
    isAvailable: () => true,
    init: () => ({}),
    execute: () => {},
    ...overrides,
  };
}

/** Bytes of a UTF-8 string, and back. */
/** Cosine similarity of row `row` (of `width` values) of `a` and of `b`. */
export function rowCosine(a, b, row, width) {
  let dot = 0, na = 0, nb = 0;
  for (let v = row * width; v < (row + 1) * width; v++) {
    dot += a[v] * b[v]; na += a[v] * a[v]; nb += b[v] * b[v];
  }
  return dot / Math.sqrt(na * nb);
}

export const utf8 = (s) => new TextEncoder().encode(s);
export const fromUtf8 = (b) => new TextDecoder().decode(b);

/**
 * Records every `fetch` the page makes from now on (the package's own fetches included: they
 * call the global `fetch`): entries `{path, state: 'pending' | 'resolved' | 'rejected', error,
 * start, end}` with times from performance.now(). `onStart(entry)` runs right after each fetch
 * starts. `settled()` resolves once every recorded fetch has settled; `restore()` puts the
 * original `fetch` back.
 */
export function trackFetches(onStart) {
  const original = globalThis.fetch;
  const entries = [];
  globalThis.fetch = function trackedFetch(input, init) {
    const url = input instanceof Request ? input.url : String(input);
    const entry = { path: new URL(url, location.href).pathname, state: 'pending', start: performance.now() };
    const promise = original.call(this, input, init);
    entry.done = promise.then(
      () => { entry.state = 'resolved'; entry.end = performance.now(); },
      (e) => { entry.state = 'rejected'; entry.error = e?.name ?? String(e); entry.end = performance.now(); },
    );
    entries.push(entry);
    onStart?.(entry);
    return promise;
  };
  return {
    entries,
    settled: () => Promise.all(entries.map((e) => e.done)),
    restore: () => { globalThis.fetch = original; },
    /** Serializable copies of the entries. */
    snapshot: () => entries.map(({ done, ...rest }) => ({ ...rest })),
  };
}
