// Serves tests/fixtures (and pkg/) with nginx on a free 127.0.0.1 port for the wasm-bindgen browser tests
// (their page lives on wasm-bindgen-test-runner's origin, so the location sends CORS headers and
// answers preflights: the HTTP provider's Range requests carry If-Range). Prints the base URL
// (e.g. http://127.0.0.1:PORT/fixtures) as its first line of output, then serves until it gets
// SIGTERM or SIGINT, or its stdin closes. Used by scripts/test-wasm.sh.
import path from 'node:path';
import { REPO_ROOT, startServer } from '../pkg-tests/support/server.mjs';

const CORS = {
  'Cache-Control': 'no-store',
  'Access-Control-Allow-Origin': '*',
  'Access-Control-Allow-Methods': 'GET, HEAD, OPTIONS',
  'Access-Control-Allow-Headers': 'Range, If-Range',
  'Access-Control-Expose-Headers': 'Content-Range, Content-Length, ETag, Last-Modified, Accept-Ranges, Content-Encoding',
  'Access-Control-Max-Age': '600',
};
// /pkg/ (the built package, for the CPU thread pool's pool.js, worker.js and kernel module)
// is served beside /fixtures/ for tests/ops_cpu_threads.rs.
const server = await startServer({
  locations: [
    { prefix: '/fixtures/', dir: path.join(REPO_ROOT, 'tests', 'fixtures'), preflight: true, headers: CORS },
    { prefix: '/pkg/', dir: path.join(REPO_ROOT, 'pkg'), preflight: true, headers: CORS },
  ],
});
process.stdout.write(`${server.url}/fixtures\n`);

let stopping = false;
async function stop() {
  if (stopping) return;
  stopping = true;
  await server.stop();
  process.exit(0);
}
process.on('SIGTERM', stop);
process.on('SIGINT', stop);
process.stdin.on('end', stop);
process.stdin.on('error', stop);
process.stdin.resume();
