// Weights files for the HTTP provider's tests and benchmarks, written with a known layout:
// safetensors (8-byte little-endian header length, JSON header padded to 8 bytes, then the
// tensors back to back). Random tensors of odd sizes exercise unaligned edges; the expected
// index, per-tensor SHA-256 and the file's SHA-256 come back with the file.
import { createHash } from 'node:crypto';
import { createWriteStream } from 'node:fs';
import { writeFile } from 'node:fs/promises';
import { once } from 'node:events';

/** xorshift64: deterministic bytes. */
export function rng(seed) {
  let s = BigInt(seed) || 1n;
  const mask = (1n << 64n) - 1n;
  return {
    next() {
      s ^= (s << 13n) & mask;
      s ^= s >> 7n;
      s ^= (s << 17n) & mask;
      return s;
    },
    below(n) {
      return Number(this.next() % BigInt(n));
    },
  };
}

/** `length` pseudo-random bytes (xorshift32 seeded from `gen`): fast enough for a gigabyte. */
export function randomBytes(gen, length) {
  const out = Buffer.allocUnsafe(length);
  let x = Number(gen.next() & 0xffffffffn) | 1;
  const whole = length - (length % 4);
  for (let i = 0; i < whole; i += 4) {
    x ^= x << 13; x ^= x >>> 17; x ^= x << 5;
    out.writeInt32LE(x | 0, i);
  }
  for (let i = whole; i < length; i++) {
    x ^= x << 13; x ^= x >>> 17; x ^= x << 5;
    out[i] = x & 0xff;
  }
  return out;
}

/** The safetensors header (length prefix + JSON padded to 8) of `tensors` `{name, dtype, shape, length}`. */
export function safetensorsHeader(tensors) {
  return header(tensors);
}

function header(tensors) {
  const entries = { __metadata__: { format: 'pt' } };
  let offset = 0;
  for (const t of tensors) {
    entries[t.name] = { dtype: t.dtype, shape: t.shape, data_offsets: [offset, offset + t.length] };
    offset += t.length;
  }
  let json = JSON.stringify(entries);
  while (json.length % 8) json += ' ';
  const prefix = Buffer.alloc(8);
  prefix.writeBigUInt64LE(BigInt(json.length));
  return Buffer.concat([prefix, Buffer.from(json)]);
}

/**
 * `count` random tensors (U8 of odd lengths, F32 of even ones) up to `maxLen` bytes, written to
 * `file`. Returns {index: [{key, offset, length, dtype, shape}], sha256, tensorSha256: {key: hex},
 * size, bytes}.
 */
export async function writeRandomSafetensors(file, { seed = 1, count = 20, maxLen = 100_000 } = {}) {
  const gen = rng(seed);
  const tensors = [];
  for (let i = 0; i < count; i++) {
    if (i % 3 === 0) {
      const length = 1 + gen.below(maxLen);
      tensors.push({ name: `layer${i}.bias`, dtype: 'U8', shape: [length], length });
    } else {
      const rows = 1 + gen.below(16);
      const cols = 1 + gen.below(Math.max(1, Math.floor(maxLen / 4 / rows)));
      tensors.push({ name: `layer${i}.weight`, dtype: 'F32', shape: [rows, cols], length: rows * cols * 4 });
    }
  }
  const head = header(tensors);
  const parts = [head];
  const index = [];
  const tensorSha256 = {};
  let offset = head.length;
  for (const t of tensors) {
    const bytes = randomBytes(gen, t.length);
    parts.push(bytes);
    index.push({ key: t.name, offset, length: t.length, dtype: t.dtype, shape: t.shape });
    tensorSha256[t.name] = createHash('sha256').update(bytes).digest('hex');
    offset += t.length;
  }
  const bytes = Buffer.concat(parts);
  await writeFile(file, bytes);
  return { index, sha256: createHash('sha256').update(bytes).digest('hex'), tensorSha256, size: bytes.length, bytes };
}

/**
 * Streams tensors to disk (never holding a file in memory) as safetensors and/or GGUF v3 (F32
 * tensors only, 32-byte aligned, the innermost dimension first as ggml lists it): `tensors` are
 * `{name, dtype, shape, length}` (shape outermost first); each tensor's bytes come from
 * `fill(tensorIndex)`, an iterator of Buffers. `files` is `{safetensors?, gguf?}` (paths).
 * Returns `{safetensors: {index, size}, gguf: {index, size}, tensorSha256: {name: hex}}`;
 * `index` entries are `{key, offset, length, dtype, shape}` with absolute offsets.
 */
export async function writeStreamedWeights(files, tensors, fill) {
  const outputs = [];
  const result = { tensorSha256: {} };
  if (files.safetensors) {
    const head = header(tensors);
    let offset = head.length;
    const index = tensors.map((t) => {
      const entry = { key: t.name, offset, length: t.length, dtype: t.dtype, shape: t.shape };
      offset += t.length;
      return entry;
    });
    outputs.push({ path: files.safetensors, head, index, pad: () => Buffer.alloc(0) });
    result.safetensors = { index, size: offset };
  }
  if (files.gguf) {
    const { head, index, size } = ggufHeader(tensors);
    outputs.push({ path: files.gguf, head, index, pad: (t) => Buffer.alloc((32 - (t.length % 32)) % 32) });
    result.gguf = { index, size };
  }
  const streams = outputs.map((o) => ({ ...o, out: createWriteStream(o.path) }));
  const write = async (buf) => {
    for (const { out } of streams) if (!out.write(buf)) await once(out, 'drain');
  };
  for (const s of streams) if (!s.out.write(s.head)) await once(s.out, 'drain');
  for (const [i, t] of tensors.entries()) {
    const hash = createHash('sha256');
    let written = 0;
    for (const chunk of fill(i)) {
      hash.update(chunk);
      await write(chunk);
      written += chunk.length;
    }
    if (written !== t.length) throw new Error(`${t.name}: ${written} bytes filled, ${t.length} declared`);
    result.tensorSha256[t.name] = hash.digest('hex');
    for (const s of streams) {
      const pad = s.pad(t);
      if (pad.length && !s.out.write(pad)) await once(s.out, 'drain');
    }
  }
  for (const { out } of streams) {
    out.end();
    await once(out, 'finish');
  }
  return result;
}

/** A GGUF v3 header (no metadata, default 32-byte alignment) for F32 `tensors`. */
function ggufHeader(tensors) {
  const parts = [];
  const u32 = (v) => { const b = Buffer.alloc(4); b.writeUInt32LE(v); parts.push(b); };
  const u64 = (v) => { const b = Buffer.alloc(8); b.writeBigUInt64LE(BigInt(v)); parts.push(b); };
  parts.push(Buffer.from('GGUF'));
  u32(3);
  u64(tensors.length);
  u64(0);
  let relative = 0;
  const relatives = [];
  for (const t of tensors) {
    if (t.dtype !== 'F32') throw new Error(`${t.name}: the GGUF writer takes F32 only`);
    const name = Buffer.from(t.name);
    u64(name.length);
    parts.push(name);
    u32(t.shape.length);
    for (const d of [...t.shape].reverse()) u64(d);
    u32(0); // GGML_TYPE_F32
    u64(relative);
    relatives.push(relative);
    relative += Math.ceil(t.length / 32) * 32;
  }
  let head = Buffer.concat(parts);
  head = Buffer.concat([head, Buffer.alloc((32 - (head.length % 32)) % 32)]);
  const index = tensors.map((t, i) => ({
    key: t.name, offset: head.length + relatives[i], length: t.length, dtype: 'F32', shape: [...t.shape].reverse(),
  }));
  return { head, index, size: head.length + relative };
}

/** Deterministic bytes for tensor `i` of `length` bytes, in 4 MiB Buffers. */
export function* seededChunks(seed, length) {
  const gen = rng(seed);
  for (let done = 0; done < length; done += 4 << 20) yield randomBytes(gen, Math.min(4 << 20, length - done));
}

/**
 * A large safetensors file streamed to disk (never held in memory): `count` F32 tensors of
 * `tensorBytes` each. Returns {index, size}.
 */
export async function writeLargeSafetensors(file, { seed = 7, count = 16, tensorBytes = 64 << 20 } = {}) {
  const tensors = Array.from({ length: count }, (_, i) => ({
    name: `block${i}.weight`, dtype: 'F32', shape: [tensorBytes / 4], length: tensorBytes,
  }));
  // One generator across the tensors, as the file has always been written.
  const gen = rng(seed);
  const { safetensors } = await writeStreamedWeights({ safetensors: file }, tensors, function* (i) {
    const t = tensors[i];
    for (let done = 0; done < t.length; done += 4 << 20) yield randomBytes(gen, Math.min(4 << 20, t.length - done));
  });
  return safetensors;
}
