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
 * A large safetensors file streamed to disk (never held in memory): `count` F32 tensors of
 * `tensorBytes` each. Returns {index, size}.
 */
export async function writeLargeSafetensors(file, { seed = 7, count = 16, tensorBytes = 64 << 20 } = {}) {
  const tensors = Array.from({ length: count }, (_, i) => ({
    name: `block${i}.weight`, dtype: 'F32', shape: [tensorBytes / 4], length: tensorBytes,
  }));
  const head = header(tensors);
  const out = createWriteStream(file);
  const write = async (buf) => { if (!out.write(buf)) await once(out, 'drain'); };
  await write(head);
  const gen = rng(seed);
  const index = [];
  let offset = head.length;
  for (const t of tensors) {
    index.push({ key: t.name, offset, length: t.length, dtype: t.dtype, shape: t.shape });
    for (let done = 0; done < t.length; done += 4 << 20) {
      await write(randomBytes(gen, Math.min(4 << 20, t.length - done)));
    }
    offset += t.length;
  }
  out.end();
  await once(out, 'finish');
  return { index, size: offset };
}
