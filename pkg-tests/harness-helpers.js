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
export const utf8 = (s) => new TextEncoder().encode(s);
export const fromUtf8 = (b) => new TextDecoder().decode(b);
