// Starts a real nginx (Debian nginx-light) as a child process on 127.0.0.1 with a free port, from
// a config written to a fresh temp dir (pid, logs and every temp path inside it), so it needs no
// privileges (run as root, its worker stays root so it can read a checkout under /root).
// Serves `root` (default: the repo root, so pages can import '/pkg/webdelegate.js'), with
// application/wasm for .wasm, text/javascript for .mjs, and nginx's own Range / ETag / Last-Modified handling, plus optional
// extra locations (e.g. weight files from another dir, with CORS headers).
// Promise: startServer() resolves only once nginx answers; stop() ends it and removes the temp dir.
import { spawn } from 'node:child_process';
import { once } from 'node:events';
import { rmSync } from 'node:fs';
import { mkdtemp, mkdir, readFile, rm, writeFile } from 'node:fs/promises';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

export const REPO_ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..');
const NGINX = process.env.NGINX_BIN ?? '/usr/sbin/nginx';
const MIME_TYPES = '/etc/nginx/mime.types';
const READY_PATH = '/__nginx_ready';
const START_TIMEOUT_MS = 10_000;
const DEFAULT_HEADERS = { 'Cache-Control': 'no-store' };

/** Asks the kernel for a free loopback port (nginx is told to bind it right after). */
async function freePort() {
  const srv = net.createServer();
  srv.listen(0, '127.0.0.1');
  await once(srv, 'listening');
  const { port } = srv.address();
  srv.close();
  await once(srv, 'close');
  return port;
}

function quote(s) {
  if (/["\\$\n]/.test(s)) throw new Error(`unsupported character in nginx config value: ${s}`);
  return `"${s}"`;
}

function headerLines(headers, indent) {
  return Object.entries(headers ?? {})
    .map(([k, v]) => `${indent}add_header ${k} ${quote(String(v))} always;`)
    .join('\n');
}

/**
 * Writes the nginx config.
 * locations: [{ prefix: '/weights/', dir: '/abs/dir', headers: { 'Access-Control-Allow-Origin': '*' }, preflight: true }]
 * preflight: answer CORS preflight requests (OPTIONS) with 204 and the location's headers, for
 * pages on another origin that send non-safelisted headers (If-Range).
 */
function config({ dir, port, root, headers, locations }) {
  // nginx drops inherited add_header lines in a location that has its own, so repeat them.
  const user = process.getuid?.() === 0 ? 'user root root;' : '';
  const locs = locations
    .map(({ prefix, dir: locDir, headers: h, preflight }) => {
      if (!prefix.startsWith('/') || !prefix.endsWith('/')) throw new Error(`location prefix must be /.../: ${prefix}`);
      return `    location ^~ ${prefix} {
      alias ${quote(path.resolve(locDir) + '/')};
${headerLines({ ...headers, ...h }, '      ')}${preflight ? '\n      if ($request_method = OPTIONS) { return 204; }' : ''}
    }`;
    })
    .join('\n');
  return `# written by pkg-tests/support/server.mjs
${user}
daemon off;
worker_processes 1;
pid ${quote(path.join(dir, 'nginx.pid'))};
error_log ${quote(path.join(dir, 'error.log'))} warn;
events { worker_connections 256; }
http {
  include ${quote(MIME_TYPES)};
  # ES modules (.mjs, e.g. onnxruntime-web's dist files): mime.types does not map them. A second
  # types block at the same level adds to the first, so every location (aliases too) gets it.
  types { text/javascript mjs; }
  default_type application/octet-stream;
  access_log ${quote(path.join(dir, 'access.log'))};
  client_body_temp_path ${quote(path.join(dir, 'tmp/client_body'))};
  proxy_temp_path ${quote(path.join(dir, 'tmp/proxy'))};
  fastcgi_temp_path ${quote(path.join(dir, 'tmp/fastcgi'))};
  uwsgi_temp_path ${quote(path.join(dir, 'tmp/uwsgi'))};
  scgi_temp_path ${quote(path.join(dir, 'tmp/scgi'))};
  sendfile on;
  server {
    listen 127.0.0.1:${port};
    server_name localhost;
    root ${quote(path.resolve(root))};
${headerLines(headers, '    ')}
    location = ${READY_PATH} { return 204; }
${locs}
  }
}
`;
}

async function waitUntilServing(url, child, errorLog) {
  const deadline = Date.now() + START_TIMEOUT_MS;
  let exited = null;
  child.once('exit', (code, signal) => { exited = { code, signal }; });
  child.once('error', (error) => { exited = { error: String(error) }; }); // e.g. no nginx binary
  for (;;) {
    if (exited) {
      const log = await readFile(errorLog, 'utf8').catch(() => '');
      throw new Error(`nginx exited (${JSON.stringify(exited)}) before serving:\n${log}`);
    }
    try {
      const res = await fetch(url + READY_PATH);
      if (res.status === 204) return;
    } catch {
      // not listening yet
    }
    if (Date.now() > deadline) throw new Error(`nginx did not answer on ${url} within ${START_TIMEOUT_MS} ms`);
    await new Promise((r) => setTimeout(r, 25)); // poll interval while waiting on the condition above
  }
}

async function stopChild(child) {
  if (child.exitCode !== null || child.signalCode !== null) return;
  const exited = once(child, 'exit');
  child.kill('SIGTERM'); // nginx: fast shutdown, the master also ends its worker
  const timer = setTimeout(() => child.kill('SIGKILL'), 5_000);
  await exited;
  clearTimeout(timer);
}

/**
 * headers: added to every response (default Cache-Control: no-store); locations add their own.
 * @param {{root?: string, headers?: Record<string,string>, locations?: {prefix: string, dir: string, headers?: Record<string,string>, preflight?: boolean}[]}} [opts]
 * @returns {Promise<{url: string, port: number, dir: string, stop: () => Promise<void>}>}
 */
export async function startServer({ root = REPO_ROOT, headers = DEFAULT_HEADERS, locations = [] } = {}) {
  const mime = await readFile(MIME_TYPES, 'utf8');
  if (!/application\/wasm\s+wasm\s*;/.test(mime)) throw new Error(`${MIME_TYPES} does not map .wasm to application/wasm`);

  let lastError;
  for (let attempt = 0; attempt < 3; attempt++) {
    const dir = await mkdtemp(path.join(os.tmpdir(), 'webdelegate-nginx-'));
    await mkdir(path.join(dir, 'tmp'));
    const port = await freePort();
    const conf = path.join(dir, 'nginx.conf');
    await writeFile(conf, config({ dir, port, root, headers, locations }));
    const errorLog = path.join(dir, 'error.log');
    const child = spawn(NGINX, ['-e', errorLog, '-p', dir, '-c', conf], { stdio: ['ignore', 'inherit', 'inherit'] });
    const url = `http://127.0.0.1:${port}`;
    try {
      await waitUntilServing(url, child, errorLog);
    } catch (err) {
      lastError = err;
      await stopChild(child);
      await rm(dir, { recursive: true, force: true });
      continue; // e.g. the port was taken between freePort() and bind: try another
    }
    // Safety net: never leave nginx behind if the test process exits without calling stop().
    const killOnExit = () => {
      child.kill('SIGTERM'); // the master then ends its worker
      rmSync(dir, { recursive: true, force: true });
    };
    process.once('exit', killOnExit);
    return {
      url,
      port,
      dir,
      async stop() {
        process.removeListener('exit', killOnExit);
        await stopChild(child);
        await rm(dir, { recursive: true, force: true });
      },
    };
  }
  throw lastError;
}
