// The in-memory parameter provider and the provider list from JavaScript (the built package in
// headless Chromium): IREE status codes on every path (NOT_FOUND for a scope or key,
// OUT_OF_RANGE past a parameter or buffer, overflow-safe up to Number.MAX_SAFE_INTEGER,
// PERMISSION_DENIED for a read-only scope, INVALID_ARGUMENT for numbers that are not safe
// integers, no span a no-op), gather/scatter with buffer offsets, the list's precedence (first
// provider serving a scope wins, an HTTP provider among them), and a small MLP initialised from a
// MemoryParameterProvider on the WebGPU and the CPU backends giving the same outputs.
import assert from 'node:assert/strict';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { after, test } from 'node:test';
import { TEST_TIMEOUT, useBrowserHarness } from './support/fixture.mjs';

const dir = await mkdtemp(path.join(os.tmpdir(), 'webdelegate-memory-'));
// A small safetensors file for the HTTP member of a list: "x" (8 bytes) in scope "http".
{
  const data = Buffer.from([10, 11, 12, 13, 14, 15, 16, 17]);
  let json = JSON.stringify({ x: { dtype: 'U8', shape: [8], data_offsets: [0, 8] } });
  while (json.length % 8) json += ' ';
  const prefix = Buffer.alloc(8);
  prefix.writeBigUInt64LE(BigInt(json.length));
  await writeFile(path.join(dir, 'x.safetensors'), Buffer.concat([prefix, Buffer.from(json), data]));
}
const harness = useBrowserHarness({ locations: [{ prefix: '/weights/', dir }] });
after(() => rm(dir, { recursive: true, force: true }));

/** Asserts `r` (a capture() result) failed with the IREE `code`. */
function assertStatus(r, code, what) {
  assert.equal(r.ok, false, `${what}: resolved ${JSON.stringify(r.value)}`);
  assert.equal(r.error.name, 'StatusError', `${what}: ${JSON.stringify(r.error)}`);
  assert.equal(r.error.code, code, `${what}: ${r.error.message}`);
}

test('MemoryParameterProvider: reads, writes, gathers and scatters with IREE status codes', TEST_TIMEOUT, async (t) => {
  const p = await harness.openHarnessPage(t);
  const r = await p.evaluate(async () => {
    const mem = new wd.MemoryParameterProvider();
    mem.addScope('ro');
    mem.addScope('rw', { writable: true });
    mem.insert('ro', 'a', Uint8Array.from({ length: 16 }, (_, i) => i), { dtype: 'U8', shape: [4, 4] });
    mem.insert('ro', 'b', Uint8Array.of(7, 7, 7, 7));
    mem.insert('ro', 'a', Uint8Array.of(99)); // a repeated key keeps the first
    mem.insert('rw', 's', new Uint8Array(8));
    const arr = async (promise) => Array.from(await promise);
    const SAFE = Number.MAX_SAFE_INTEGER;
    const out = {
      supported: [mem.querySupport('ro'), mem.querySupport('rw'), mem.querySupport('x')],
      writable: [mem.isWritable('ro'), mem.isWritable('rw'), mem.isWritable('x')],
      describe: mem.describe('ro', 'a'),
      describeB: mem.describe('ro', 'b'),
      unknown: mem.describe('ro', 'zz'),
      keys: mem.keys('ro'),
      whole: await arr(mem.read('ro', 'a')),
      part: await arr(mem.read('ro', 'a', 3, 5)),
      rest: await arr(mem.read('ro', 'a', 14)),
      atEnd: await arr(mem.read('ro', 'a', 16, 0)),
      packed: await arr(mem.gather('ro', ['b', { key: 'a', offset: 2, length: 3 }])),
      placed: await arr(mem.gather('ro', [{ key: 'b', length: 2, bufferOffset: 5 }, { key: 'a', length: 1, bufferOffset: 1 }], Uint8Array.of(1, 1, 1, 1, 1, 1, 1, 1))),
      none: await arr(mem.gather('nowhere', [])),
      noneScatter: await capture(() => mem.scatter('ro', new Uint8Array(4), [])),
      notify: [mem.notify('resume'), mem.notify('suspend'), mem.notify('lowMemory')],
      errors: {},
    };
    const e = out.errors;
    e.noScope = await capture(() => mem.read('x', 'a'));
    e.noKey = await capture(() => mem.read('ro', 'zz'));
    e.pastEnd = await capture(() => mem.read('ro', 'a', 10, 7));
    e.offsetPastEnd = await capture(() => mem.read('ro', 'a', 17, 0));
    e.nearMaxSafe = await capture(() => mem.read('ro', 'a', SAFE - 3, 8));
    e.bothMaxSafe = await capture(() => mem.read('ro', 'a', SAFE, SAFE));
    e.spanMaxSafe = await capture(() => mem.gather('ro', [{ key: 'a', offset: SAFE, length: 1 }]));
    e.bufferMaxSafe = await capture(() => mem.gather('ro', [{ key: 'a', length: 1, bufferOffset: SAFE }], new Uint8Array(4)));
    e.unsafe = await capture(() => mem.read('ro', 'a', 2 ** 53, 1));
    e.negative = await capture(() => mem.read('ro', 'a', -1, 1));
    e.fraction = await capture(() => mem.read('ro', 'a', 0.5, 1));
    e.targetTooSmall = await capture(() => mem.gather('ro', ['a'], new Uint8Array(15)));
    e.writeReadOnly = await capture(() => mem.write('ro', 'a', 0, Uint8Array.of(1)));
    e.writeReadOnlyNoKey = await capture(() => mem.write('ro', 'zz', 0, Uint8Array.of(1)));
    e.writePastEnd = await capture(() => mem.write('rw', 's', 6, Uint8Array.of(1, 2, 3)));
    e.writeNearMaxSafe = await capture(() => mem.write('rw', 's', SAFE, Uint8Array.of(1)));
    e.scatterReadOnly = await capture(() => mem.scatter('ro', Uint8Array.of(5, 5, 5, 5), ['b']));
    e.scatterSourceShort = await capture(() => mem.scatter('rw', Uint8Array.of(5, 5), [{ key: 's', length: 4 }]));
    e.badSignal = await capture(() => mem.notify('nap'));
    e.badWritable = await capture(() => mem.addScope('q', { writable: 'yes' }));
    e.badShape = await capture(() => mem.insert('q', 'k', new Uint8Array(1), { shape: [-1] }));
    out.bAfterFailedScatter = await arr(mem.read('ro', 'b'));
    await mem.write('rw', 's', 2, Uint8Array.of(9, 8));
    out.afterWrite = await arr(mem.read('rw', 's'));
    await mem.scatter('rw', Uint8Array.of(1, 2, 3, 4, 5, 6, 7, 8), [{ key: 's', offset: 0, length: 2, bufferOffset: 4 }, { key: 's', offset: 6, length: 2 }]);
    out.afterScatter = await arr(mem.read('rw', 's'));
    out.isStatusError = await mem.read('x', 'a').catch((err) => err instanceof Error && err.name === 'StatusError' && err.codeValue === 5);
    return out;
  });
  assert.deepEqual(r.supported, [true, true, false]);
  assert.deepEqual(r.writable, [false, true, false]);
  assert.deepEqual(r.describe, { length: 16, dtype: 'U8', shape: [4, 4], rowMajorShape: [4, 4] });
  assert.deepEqual(r.describeB, { length: 4, dtype: null, shape: null, rowMajorShape: null });
  assert.equal(r.unknown, null);
  assert.deepEqual(r.keys, ['a', 'b', 'a']);
  assert.deepEqual(r.whole, Array.from({ length: 16 }, (_, i) => i), 'the first "a" wins');
  assert.deepEqual(r.part, [3, 4, 5, 6, 7]);
  assert.deepEqual(r.rest, [14, 15]);
  assert.deepEqual(r.atEnd, [], 'a span ending at the parameter end is allowed');
  assert.deepEqual(r.packed, [7, 7, 7, 7, 2, 3, 4]);
  assert.deepEqual(r.placed, [1, 0, 1, 1, 1, 7, 7, 1], 'spans land at their buffer offsets; other bytes kept');
  assert.deepEqual(r.none, [], 'no span: a no-op that completes, even for an unknown scope');
  assert.equal(r.noneScatter.ok, true, 'no span: no-op even on a read-only scope');
  assert.deepEqual(r.notify, [undefined, undefined, undefined]);
  const codes = {
    noScope: 'NOT_FOUND', noKey: 'NOT_FOUND', pastEnd: 'OUT_OF_RANGE', offsetPastEnd: 'OUT_OF_RANGE',
    nearMaxSafe: 'OUT_OF_RANGE', bothMaxSafe: 'OUT_OF_RANGE', spanMaxSafe: 'OUT_OF_RANGE', bufferMaxSafe: 'OUT_OF_RANGE',
    unsafe: 'INVALID_ARGUMENT', negative: 'INVALID_ARGUMENT', fraction: 'INVALID_ARGUMENT',
    targetTooSmall: 'OUT_OF_RANGE', writeReadOnly: 'PERMISSION_DENIED', writeReadOnlyNoKey: 'NOT_FOUND',
    writePastEnd: 'OUT_OF_RANGE', writeNearMaxSafe: 'OUT_OF_RANGE', scatterReadOnly: 'PERMISSION_DENIED',
    scatterSourceShort: 'OUT_OF_RANGE', badSignal: 'INVALID_ARGUMENT', badWritable: 'INVALID_ARGUMENT',
    badShape: 'INVALID_ARGUMENT',
  };
  for (const [what, code] of Object.entries(codes)) assertStatus(r.errors[what], code, what);
  assert.equal(r.errors.noKey.error.codeValue, 5);
  assert.equal(r.errors.writeReadOnly.error.codeValue, 7);
  assert.equal(r.errors.pastEnd.error.codeValue, 11);
  assert.deepEqual(r.bAfterFailedScatter, [7, 7, 7, 7], 'a refused scatter moves no byte');
  assert.deepEqual(r.afterWrite, [0, 0, 9, 8, 0, 0, 0, 0]);
  assert.deepEqual(r.afterScatter, [5, 6, 9, 8, 0, 0, 7, 8], 'the second span follows the first in the source');
  assert.equal(r.isStatusError, true);
});

test('ParameterProviderList: the first provider serving a scope wins, HTTP members included', TEST_TIMEOUT, async (t) => {
  const p = await harness.openHarnessPage(t);
  const url = `${harness.server.url}/weights/x.safetensors`;
  const r = await p.evaluate(async ({ url }) => {
    const arr = async (promise) => Array.from(await promise);
    const first = new wd.MemoryParameterProvider();
    first.insert('shared', 'k', Uint8Array.of(1, 1));
    const second = new wd.MemoryParameterProvider();
    second.insert('shared', 'k', Uint8Array.of(2, 2));
    second.insert('shared', 'only-in-second', Uint8Array.of(2));
    second.addScope('scratch', { writable: true });
    second.insert('scratch', 'w', new Uint8Array(3));
    const http = new wd.HttpParameterProvider();
    await http.addScope('http', url);
    const list = new wd.ParameterProviderList([first, second]);
    const out = { lengths: [list.length] };
    out.shared = await arr(list.read('shared', 'k'));
    out.describe = list.describe('shared', 'k');
    // The scope is served by `first`: a key only `second` has is NOT_FOUND (no fall-through).
    out.noFallThrough = await capture(() => list.read('shared', 'only-in-second'));
    out.noScope = await capture(() => list.read('http', 'x'));
    out.noScopeGather = await capture(() => list.gather('nowhere', []));
    list.push(http);
    out.lengths.push(list.length);
    out.supported = [list.querySupport('shared'), list.querySupport('http'), list.querySupport('nowhere')];
    out.fromHttp = await arr(list.read('http', 'x', 2, 3));
    out.gathered = await arr(list.gather('http', ['x', { key: 'x', length: 2 }]));
    await list.write('scratch', 'w', 1, Uint8Array.of(4, 5));
    out.written = await arr(second.read('scratch', 'w'));
    out.httpWrite = await capture(() => list.write('http', 'x', 0, Uint8Array.of(1)));
    out.httpScatter = await capture(() => http.scatter('http', Uint8Array.of(1), ['x']));
    // Lists nest; a list cannot contain itself, directly or through another.
    const outer = new wd.ParameterProviderList();
    const overriding = new wd.MemoryParameterProvider();
    overriding.insert('shared', 'k', Uint8Array.of(3, 3));
    outer.push(overriding);
    outer.push(list);
    out.outer = [await arr(outer.read('shared', 'k')), await arr(outer.read('http', 'x', 0, 1))];
    out.self = capture(() => list.push(list));
    out.cycle = capture(() => list.push(outer));
    out.notAProvider = capture(() => list.push({}));
    out.fake = capture(() => list.push({ __webdelegateProvider: () => ({}) }));
    out.notify = list.notify('lowMemory');
    out.lengths.push(list.length, outer.length);
    out.sameAfterRefusals = await arr(list.read('shared', 'k'));
    [out.self, out.cycle, out.notAProvider, out.fake] = await Promise.all([out.self, out.cycle, out.notAProvider, out.fake]);
    return out;
  }, { url });
  assert.deepEqual(r.shared, [1, 1], 'the first provider wins');
  assert.deepEqual(r.describe, { length: 2, dtype: null, shape: null, rowMajorShape: null });
  assertStatus(r.noFallThrough, 'NOT_FOUND', 'key missing in the serving provider');
  assertStatus(r.noScope, 'NOT_FOUND', 'scope nobody serves');
  assertStatus(r.noScopeGather, 'NOT_FOUND', 'the list picks the provider before the spans, as io_parameters');
  assert.deepEqual(r.supported, [true, true, false]);
  assert.deepEqual(r.fromHttp, [12, 13, 14]);
  assert.deepEqual(r.gathered, [10, 11, 12, 13, 14, 15, 16, 17, 10, 11]);
  assert.deepEqual(r.written, [0, 4, 5]);
  assertStatus(r.httpWrite, 'PERMISSION_DENIED', 'HTTP scopes are read-only');
  assertStatus(r.httpScatter, 'PERMISSION_DENIED', 'HTTP scopes are read-only');
  assert.deepEqual(r.outer, [[3, 3], [10]]);
  for (const what of ['self', 'cycle', 'notAProvider', 'fake']) assertStatus(r[what], 'INVALID_ARGUMENT', what);
  assert.equal(r.notify, undefined);
  assert.deepEqual(r.lengths, [2, 3, 3, 2]);
  assert.deepEqual(r.sameAfterRefusals, [1, 1]);
});

test('an MLP initialised from a MemoryParameterProvider gives the same outputs on webgpu and cpu', TEST_TIMEOUT, async (t) => {
  const p = await harness.openHarnessPage(t);
  const r = await p.evaluate(async () => {
    await wd.ready();
    const IN = 24;
    const OUT = 12;
    const b = new wd.ProgramBuilder();
    const x = b.input('x', 'float32', ['batch', IN]);
    const w = b.param('w', 'float32', [OUT, IN], 'weights', 'dense.weight');
    const bias = b.param('bias', 'float32', [OUT], 'weights', 'dense.bias');
    b.output(b.gelu(b.matmul(x, w, bias, false, true)));
    const blob = b.encode();
    b.free();
    const values = (n, seed) => Float32Array.from({ length: n }, (_, i) => Math.sin(seed * 1000 + i * 0.37) * 0.5);
    const bytes = (f32) => new Uint8Array(f32.buffer);
    const mem = new wd.MemoryParameterProvider();
    mem.insert('weights', 'dense.weight', bytes(values(OUT * IN, 1)), { dtype: 'F32', shape: [OUT, IN] });
    mem.insert('weights', 'dense.bias', bytes(values(OUT, 2)), { dtype: 'F32', shape: [OUT] });
    const input = Float32Array.from({ length: 3 * IN }, (_, i) => Math.cos(i * 0.11));
    const run = async (d) => Array.from((await d.execute([{ tag: 'Tensor', dtype: 'float32', shape: [3, IN], data: input }, { tag: 'None' }]))[1].data);
    const gpu = await wd.Delegate.initWithParameters('webgpu', blob, mem);
    const cpu = await wd.Delegate.initWithParameters('cpu', blob, mem);
    // Through a list whose first member does not serve "weights".
    const other = new wd.MemoryParameterProvider();
    other.insert('elsewhere', 'dense.bias', new Uint8Array(4 * OUT));
    const viaList = await wd.Delegate.initWithParameters('cpu', blob, new wd.ParameterProviderList([other, mem]));
    // Weights the program can check against: a wrong-sized bias is refused.
    const wrong = new wd.MemoryParameterProvider();
    wrong.insert('weights', 'dense.weight', bytes(values(OUT * IN, 1)));
    wrong.insert('weights', 'dense.bias', bytes(values(OUT + 1, 2)));
    const out = {
      gpu: await run(gpu), cpu: await run(cpu), viaList: await run(viaList),
      wrongSize: await capture(() => wd.Delegate.initWithParameters('cpu', blob, wrong)),
      notAProvider: await capture(() => wd.Delegate.initWithParameters('cpu', blob, { weights: 1 })),
    };
    // A provider can change before init: the program sees what is there at init.
    const scratch = new wd.MemoryParameterProvider();
    scratch.addScope('weights', { writable: true });
    scratch.insert('weights', 'dense.weight', new Uint8Array(4 * OUT * IN));
    scratch.insert('weights', 'dense.bias', new Uint8Array(4 * OUT));
    await scratch.write('weights', 'dense.weight', 0, bytes(values(OUT * IN, 1)));
    await scratch.write('weights', 'dense.bias', 0, bytes(values(OUT, 2)));
    const written = await wd.Delegate.initWithParameters('webgpu', blob, scratch);
    out.written = await run(written);
    const freed = new wd.MemoryParameterProvider();
    freed.free();
    out.freed = await capture(() => wd.Delegate.initWithParameters('cpu', blob, freed));
    for (const d of [gpu, cpu, viaList, written]) d.destroy();
    return out;
  });
  assert.equal(r.cpu.length, 3 * 12);
  assert.ok(r.cpu.some((v) => Math.abs(v) > 1e-3), 'outputs are not all zero');
  // WebGPU against the CPU backend: |gpu - cpu| <= 1e-5 + 1e-4 |cpu|.
  r.cpu.forEach((c, i) => assert.ok(Math.abs(r.gpu[i] - c) <= 1e-5 + 1e-4 * Math.abs(c), `element ${i}: ${r.gpu[i]} vs ${c}`));
  assert.deepEqual(r.viaList, r.cpu, 'the list serves the same parameters');
  assert.deepEqual(r.written, r.gpu, 'parameters written before init are the ones used');
  assert.equal(r.wrongSize.ok, false);
  assert.equal(r.wrongSize.error.code, 'InvalidExternalData', r.wrongSize.error.message);
  for (const what of ['notAProvider', 'freed']) {
    assert.equal(r[what].ok, false, what);
    assert.equal(r[what].error.name, 'WebDelegateError', what);
    assert.equal(r[what].error.code, 'InvalidArgument', `${what}: ${r[what].error.message}`);
  }
});
