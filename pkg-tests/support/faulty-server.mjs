// A small HTTP/1.1 file server that misbehaves on purpose, for what nginx cannot be made to do:
// drop a connection mid-body, answer with bursts of 5xx, ignore Range (200 instead of 206),
// replace the file mid-load (new ETag, honouring or ignoring If-Range), stall or trickle a body,
// send a wrong Content-Range or too many bytes. Used by the native Rust tests (spawned as
// `node faulty-server.mjs --root DIR`, it prints {"port": N} on its first stdout line) and by
// the browser tests (import { startFaultyServer }).
//
// URL: /f/<faults>/<file>, <faults> a comma-separated list (or "-" for none):
//   skip=N           faults apply only after the first N requests to this URL (default 0)
//   times=N          ... and to at most N requests (default: all)
//   status=C         answer with status C and no body
//   hangup           close a GET's connection before any header (the browser:
//                    ERR_EMPTY_RESPONSE); HEADs are answered
//   bad-gzip         send the body as is under Content-Encoding: gzip (the browser cannot
//                    decode it)
//   drop=N           send N body bytes, then destroy the socket
//   stall=N          send N body bytes, then send nothing more (keep the socket open)
//   slow=MS          send the body in 16 KiB pieces, MS milliseconds apart
//   short=N          send only N body bytes, chunked, and end the response cleanly
//   extra=N          send N bytes past the requested range (Content-Length counts them)
//   wrong-range      Content-Range one byte off from the bytes requested (earlier if it can)
//   ignore-range     always 200 with the whole file (counts towards skip/times too)
//   change-after=N   after N requests the file is a new version (bytes inverted, new ETag and
//                    Last-Modified); If-Range is honoured (a stale validator gets a 200)
//   change-ignores-if-range  with change-after: serve the new version's range as a 206 anyway
//   no-validators    send neither ETag nor Last-Modified
// Every response carries Access-Control-Allow-Origin: * and exposes its headers.
// GET /__stats -> {requests: {url: count}, active: N, log: [{url, range, ifRange, status, sent}]}
//   (`sent`: body bytes handed to the socket, whether or not the client read them)
// GET /__active -> the number of responses still being sent.
// GET /__log -> one tab-separated line per request: url, range, if-range, status.
// GET /__reset -> clears counters and log.
import http from 'node:http';
import { readFile } from 'node:fs/promises';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

const PIECE = 16 << 10;

function parseFaults(spec) {
  const faults = {};
  if (spec === '-' || spec === '') return faults;
  for (const item of spec.split(',')) {
    const [k, v] = item.split('=');
    faults[k] = v === undefined ? true : Number(v);
  }
  return faults;
}

function parseRange(header, size) {
  const m = /^bytes=(\d+)-(\d*)$/.exec(header ?? '');
  if (!m) return null;
  const start = Number(m[1]);
  const last = m[2] === '' ? size - 1 : Math.min(Number(m[2]), size - 1);
  if (start > last || start >= size) return 'unsatisfiable';
  return { start, end: last + 1 };
}

export async function startFaultyServer({ root, port = 0 } = {}) {
  const counts = new Map();
  const log = [];
  const sockets = new Set();
  let active = 0;

  const server = http.createServer(async (req, res) => {
    res.setHeader('Access-Control-Allow-Origin', '*');
    res.setHeader('Access-Control-Allow-Headers', 'Range, If-Range');
    res.setHeader('Access-Control-Expose-Headers', 'Content-Range, Content-Length, ETag, Last-Modified, Accept-Ranges');
    res.setHeader('Cache-Control', 'no-store');
    const url = new URL(req.url, 'http://x');
    if (req.method === 'OPTIONS') return res.writeHead(204).end();
    if (url.pathname === '/__stats') {
      return res.writeHead(200, { 'Content-Type': 'application/json' })
        .end(JSON.stringify({ requests: Object.fromEntries(counts), active, log }));
    }
    if (url.pathname === '/__active') return res.writeHead(200).end(String(active));
    if (url.pathname === '/__log') {
      // One line per request: url, range, if-range, status (tab-separated; "-" for none).
      const lines = log.map((e) => [e.url, e.range ?? '-', e.ifRange ?? '-', e.status].join('\t'));
      return res.writeHead(200, { 'Content-Type': 'text/plain' }).end(lines.join('\n'));
    }
    if (url.pathname === '/__reset') {
      counts.clear();
      log.length = 0;
      return res.writeHead(204).end();
    }
    const m = /^\/f\/([^/]+)\/(.+)$/.exec(url.pathname);
    if (!m) return res.writeHead(404).end();
    const faults = parseFaults(decodeURIComponent(m[1]));
    const file = path.join(root, path.normalize(decodeURIComponent(m[2])).replace(/^(\.\.[/\\])+/, ''));
    let original;
    try {
      original = await readFile(file);
    } catch {
      return res.writeHead(404).end();
    }
    const n = (counts.get(url.pathname) ?? 0) + 1;
    counts.set(url.pathname, n);
    const applies = n > (faults.skip ?? 0) && (faults.times === undefined || n <= (faults.skip ?? 0) + faults.times);
    const changed = faults['change-after'] !== undefined && n > faults['change-after'];
    const body = changed ? Buffer.from(original.map((b) => b ^ 0xff)) : original;
    const etag = changed ? '"v2-' + body.length + '"' : '"v1-' + body.length + '"';
    const lastModified = changed ? 'Tue, 02 Jan 2024 00:00:00 GMT' : 'Mon, 01 Jan 2024 00:00:00 GMT';
    const entry = { url: url.pathname, range: req.headers.range ?? null, ifRange: req.headers['if-range'] ?? null, status: 0, sent: 0 };
    log.push(entry);

    active += 1;
    let finished = false;
    const done = () => { if (!finished) { finished = true; active -= 1; } };
    res.on('close', done);

    if (!faults['no-validators']) {
      res.setHeader('ETag', etag);
      res.setHeader('Last-Modified', lastModified);
    }
    res.setHeader('Accept-Ranges', 'bytes');
    if (applies && faults.hangup && req.method === 'GET') {
      entry.status = 'hangup';
      return req.socket.destroy();
    }
    if (applies && faults['bad-gzip']) res.setHeader('Content-Encoding', 'gzip');
    if (applies && faults.status) {
      entry.status = faults.status;
      return res.writeHead(faults.status).end();
    }
    let range = parseRange(req.headers.range, body.length);
    if (range === 'unsatisfiable') {
      entry.status = 416;
      return res.writeHead(416, { 'Content-Range': `bytes */${body.length}` }).end();
    }
    const ifRange = req.headers['if-range'];
    if (range && ifRange && ifRange !== etag && ifRange !== lastModified && !faults['change-ignores-if-range']) {
      range = null; // stale validator: the whole (new) file
    }
    if (faults['ignore-range'] && applies) range = null;
    let status = 200;
    let start = 0;
    let end = body.length;
    if (range) {
      status = 206;
      ({ start, end } = range);
      const shift = applies && faults['wrong-range'] ? (start > 0 ? -1 : 1) : 0;
      res.setHeader('Content-Range', `bytes ${start + shift}-${end - 1 + shift}/${body.length}`);
    }
    let payload = body.subarray(start, end);
    if (applies && faults.extra) payload = Buffer.concat([payload, Buffer.alloc(faults.extra, 0x5a)]);
    entry.status = status;
    if (applies && faults.short !== undefined) {
      res.writeHead(status); // no Content-Length: chunked, ends cleanly after `short` bytes
      return res.end(payload.subarray(0, faults.short));
    }
    res.writeHead(status, { 'Content-Length': payload.length });
    const limit = applies && faults.drop !== undefined ? faults.drop : applies && faults.stall !== undefined ? faults.stall : payload.length;
    const delay = applies && faults.slow ? faults.slow : 0;
    let offset = 0;
    while (offset < Math.min(limit, payload.length)) {
      if (res.destroyed) return;
      const next = Math.min(offset + PIECE, limit, payload.length);
      const ok = res.write(payload.subarray(offset, next));
      entry.sent += next - offset;
      offset = next;
      if (!ok) {
        await new Promise((resolve) => {
          const go = () => { res.off('drain', go); res.off('close', go); resolve(); };
          res.on('drain', go);
          res.on('close', go);
        });
      }
      if (delay) await new Promise((r) => setTimeout(r, delay));
    }
    if (applies && faults.drop !== undefined) return res.destroy();
    if (applies && faults.stall !== undefined) return; // keep the socket open, send nothing
    res.end();
  });
  server.keepAliveTimeout = 5000;
  server.on('connection', (s) => { sockets.add(s); s.on('close', () => sockets.delete(s)); });
  await new Promise((r) => server.listen(port, '127.0.0.1', r));
  const actualPort = server.address().port;
  return {
    url: `http://127.0.0.1:${actualPort}`,
    port: actualPort,
    async stop() {
      for (const s of sockets) s.destroy();
      await new Promise((r) => server.close(r));
    },
  };
}

// CLI: node faulty-server.mjs --root DIR [--port N]; prints {"port": N}; exits when stdin closes.
if (process.argv[1] && fileURLToPath(import.meta.url) === path.resolve(process.argv[1])) {
  const args = process.argv.slice(2);
  const opt = (name) => { const i = args.indexOf(name); return i >= 0 ? args[i + 1] : undefined; };
  const root = path.resolve(opt('--root') ?? '.');
  const server = await startFaultyServer({ root, port: Number(opt('--port') ?? 0) });
  process.stdout.write(JSON.stringify({ port: server.port }) + '\n');
  process.stdin.resume();
  process.stdin.on('end', () => server.stop().then(() => process.exit(0)));
  process.stdin.on('error', () => process.exit(0));
}
