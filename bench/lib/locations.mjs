// The runner's nginx (bench/run.mjs) serves the repo root three ways: at / with every response
// Cache-Control: no-store (first visits), under ISOLATED_PREFIX with COOP/COEP so a page there is
// cross-origin isolated (SharedArrayBuffer, wasm threads), and under CACHED_PREFIX with cacheable
// responses (nginx's ETag / Last-Modified plus max-age, and COEP) for repeat visits. All three are one
// origin, so a page on one prefix loads code and weights from another without CORS.

/** Where the runner's nginx serves the repo root to cross-origin isolated pages. */
export const ISOLATED_PREFIX = '/isolated/';
/** Where it serves the repo root with cacheable responses, for repeat visits. */
export const CACHED_PREFIX = '/cached/';

/** The extra locations of the runner's nginx (pkg-tests/support/server.mjs `locations`). */
export function serverLocations(root) {
  return [
    { prefix: ISOLATED_PREFIX, dir: root, headers: { 'Cross-Origin-Opener-Policy': 'same-origin', 'Cross-Origin-Embedder-Policy': 'require-corp' } },
    // COEP too, as a cross-origin isolated site serves every response: a dedicated worker's
    // script (the CPU pool's) must carry it to start on an isolated page (a repeat visit of
    // ours_cpu_mt); on a page without isolation the header changes nothing.
    { prefix: CACHED_PREFIX, dir: root, headers: { 'Cache-Control': 'public, max-age=3600', 'Cross-Origin-Embedder-Policy': 'require-corp' } },
  ];
}
