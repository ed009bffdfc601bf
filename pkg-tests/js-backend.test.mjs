// A JS backend driven through the package's Delegate: init -> execute (real tensors, checked
// numerically) -> destroy, with call counts and handle identity; init failures (destroy never
// called), unavailable/unknown backends, execute after destroy, async backends, compile and
// runtime specs reaching the backend, every EValue kind and tensor dtype round-tripping, and
// the runtime rejecting input and output tensors whose data does not match their shape.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { expectOk, expectWdError } from './support/expect.mjs';
import { TEST_TIMEOUT, useBrowserHarness } from './support/fixture.mjs';

const harness = useBrowserHarness();

test('add-one backend: init, execute x3 with Float32 tensors, destroy', TEST_TIMEOUT, async (t) => {
  const p = await harness.openHarnessPage(t);
  const r = await p.evaluate(async () => {
    const calls = { init: [], execute: 0, destroy: [] };
    let handle = null;
    wd.registerBackend('add-one', stubBackend({
      init(processed, compileSpecs, context) {
        calls.init.push({ processed: fromUtf8(processed), isBytes: processed instanceof Uint8Array, compileSpecs, context });
        handle = { id: 'handle-1', increment: 1 };
        return handle;
      },
      execute(h, args) {
        calls.execute += 1;
        if (h !== handle) throw { code: 'DelegateInvalidHandle', message: 'not my handle' };
        const [x, out] = args;
        // mutate args in place: replace the output EValue
        args[1] = { tag: 'Tensor', dtype: 'float32', shape: out.shape, data: x.data.map((v) => v + h.increment) };
      },
      destroy(h) {
        calls.destroy.push(h === handle);
      },
    }));
    const d = await wd.Delegate.init('add-one', utf8('add-one v1'));
    const results = [];
    for (const input of [[1, 2, 3, 4], [-1.5, 0, 0.25, 1e6], [3.25, -8, 100, 0.5]]) {
      const out = await d.execute([
        { tag: 'Tensor', dtype: 'float32', shape: [2, 2], data: new Float32Array(input) },
        { tag: 'Tensor', dtype: 'float32', shape: [2, 2], data: new Float32Array(4) },
      ]);
      results.push({
        input,
        n: out.length,
        dtype: out[1].dtype,
        shape: out[1].shape,
        isF32: out[1].data instanceof Float32Array,
        data: Array.from(out[1].data),
        inputAfter: Array.from(out[0].data),
      });
    }
    const backendName = d.backendName;
    d.destroy();
    return { backendName, calls: { ...calls, init: calls.init.map((c) => ({ ...c, compileSpecs: c.compileSpecs.length })) }, results };
  });
  assert.equal(r.backendName, 'add-one');
  assert.equal(r.calls.init.length, 1, 'init calls');
  assert.deepEqual(r.calls.init[0], {
    processed: 'add-one v1',
    isBytes: true,
    compileSpecs: 0,
    context: { methodName: null, runtimeSpecs: [] },
  });
  assert.equal(r.calls.execute, 3, 'execute calls');
  assert.deepEqual(r.calls.destroy, [true], 'destroy must be called once, with the handle init returned');
  for (const res of r.results) {
    assert.equal(res.n, 2);
    assert.equal(res.dtype, 'float32');
    assert.deepEqual(res.shape, [2, 2]);
    assert.equal(res.isF32, true, 'output data should be a Float32Array');
    assert.deepEqual(res.data, res.input.map((v) => Math.fround(v) + 1).map(Math.fround));
    assert.deepEqual(res.inputAfter, res.input.map(Math.fround), 'the input must come back unchanged');
  }
});

test('compile specs reach init; Int32 tensors scaled by them; returning new args works', TEST_TIMEOUT, async (t) => {
  const p = await harness.openHarnessPage(t);
  const r = await p.evaluate(async () => {
    const seen = {};
    wd.registerBackend('affine', stubBackend({
      init(processed, compileSpecs) {
        seen.specs = compileSpecs.map(({ key, value }) => ({ key, isBytes: value instanceof Uint8Array, bytes: Array.from(value) }));
        const spec = Object.fromEntries(compileSpecs.map(({ key, value }) => [key, value]));
        return { scale: Number(fromUtf8(spec.scale)), bias: spec.bias[0] };
      },
      execute(h, args) {
        const [x, out] = args;
        return [x, { ...out, data: Int32Array.from(x.data, (v) => v * h.scale + h.bias) }];
      },
    }));
    const d = await wd.Delegate.init('affine', new Uint8Array([0]), {
      compileSpecs: [
        { key: 'scale', value: '3' },
        { key: 'bias', value: new Uint8Array([2]) },
      ],
    });
    const input = [0, 1, -5, 1000, -2147483648 / 4];
    const out = await d.execute([
      { tag: 'Tensor', dtype: 'int32', shape: [5], data: Int32Array.from(input) },
      { tag: 'Tensor', dtype: 'int32', shape: [5], data: new Int32Array(5) },
    ]);
    d.destroy();
    return { seen, input, dtype: out[1].dtype, isI32: out[1].data instanceof Int32Array, data: Array.from(out[1].data) };
  });
  assert.deepEqual(r.seen.specs, [
    { key: 'scale', isBytes: true, bytes: [...Buffer.from('3')] },
    { key: 'bias', isBytes: true, bytes: [2] },
  ]);
  assert.equal(r.dtype, 'int32');
  assert.equal(r.isI32, true);
  assert.deepEqual(r.data, r.input.map((v) => v * 3 + 2));
});

test('writing into the output tensor data in place works', TEST_TIMEOUT, async (t) => {
  const p = await harness.openHarnessPage(t);
  const r = await p.evaluate(async () => {
    wd.registerBackend('double', stubBackend({
      execute(h, [x, out]) {
        for (let i = 0; i < x.data.length; i++) out.data[i] = x.data[i] * 2;
      },
    }));
    const d = await wd.Delegate.init('double', new Uint8Array());
    const out = await d.execute([
      { tag: 'Tensor', dtype: 'float32', shape: [3], data: new Float32Array([1, -2, 3.5]) },
      { tag: 'Tensor', dtype: 'float32', shape: [3], data: new Float32Array(3) },
    ]);
    d.destroy();
    return Array.from(out[1].data);
  });
  assert.deepEqual(r, [2, -4, 7]);
});

test('a failing init rejects with the backend code and destroy is never called', TEST_TIMEOUT, async (t) => {
  const p = await harness.openHarnessPage(t);
  const r = await p.evaluate(async () => {
    const calls = { init: 0, execute: 0, destroy: 0 };
    wd.registerBackend('broken', stubBackend({
      init() { calls.init += 1; throw { code: 'DelegateInvalidCompatibility', message: 'unsupported blob' }; },
      execute() { calls.execute += 1; },
      destroy() { calls.destroy += 1; },
    }));
    wd.registerBackend('broken-plain', stubBackend({
      init() { calls.init += 1; throw new TypeError('oops'); },
      destroy() { calls.destroy += 1; },
    }));
    const coded = await capture(() => wd.Delegate.init('broken', new Uint8Array([1])));
    const plain = await capture(() => wd.Delegate.init('broken-plain', new Uint8Array([1])));
    return { coded, plain, calls };
  });
  const e = expectWdError(r.coded, 'DelegateInvalidCompatibility', 'Delegate.init on a backend whose init throws');
  assert.match(e.message, /unsupported blob/);
  expectWdError(r.plain, 'Internal', 'Delegate.init on a backend whose init throws a TypeError');
  assert.deepEqual(r.calls, { init: 2, execute: 0, destroy: 0 });
});

test('unavailable and unknown backends reject Delegate.init with NotFound', TEST_TIMEOUT, async (t) => {
  const p = await harness.openHarnessPage(t);
  const r = await p.evaluate(async () => {
    let inits = 0;
    wd.registerBackend('offline', stubBackend({ isAvailable: () => false, init: () => { inits += 1; return {}; } }));
    return {
      unavailable: await capture(() => wd.Delegate.init('offline', new Uint8Array())),
      unknown: await capture(() => wd.Delegate.init('nope', new Uint8Array())),
      inits,
    };
  });
  expectWdError(r.unavailable, 'NotFound', 'Delegate.init on an unavailable backend');
  expectWdError(r.unknown, 'NotFound', 'Delegate.init on an unknown backend');
  assert.equal(r.inits, 0, 'init must not run on an unavailable backend');
});

test('isAvailable/setOption/getOption must answer synchronously: a promise is refused, never misread', TEST_TIMEOUT, async (t) => {
  const p = await harness.openHarnessPage(t);
  const r = await p.evaluate(async () => {
    let inits = 0;
    const later = (value) => new Promise((resolve) => setTimeout(() => resolve(value), 1));
    wd.registerBackend('promising', stubBackend({
      // A promise is truthy: read as-is it would claim availability.
      isAvailable: () => later(false),
      init: () => { inits += 1; return {}; },
      setOption: () => later(undefined),
      getOption: (options) => later(options),
    }));
    return {
      available: wd.isBackendAvailable('promising'),
      init: await capture(() => wd.Delegate.init('promising', new Uint8Array())),
      set: await capture(() => wd.setOption('promising', [{ key: 'k', value: 1 }])),
      get: await capture(() => wd.getOption('promising', [{ key: 'k', value: 1 }])),
      inits,
    };
  });
  assert.equal(r.available, false, 'a promise from isAvailable is not availability');
  expectWdError(r.init, 'NotFound', 'Delegate.init on a backend whose isAvailable returns a promise');
  assert.equal(r.inits, 0);
  expectWdError(r.set, 'InvalidArgument', 'setOption returning a promise');
  assert.match(r.set.error.message, /synchronously/);
  expectWdError(r.get, 'InvalidArgument', 'getOption returning a promise');
});

test('execute after destroy is rejected with InvalidState', TEST_TIMEOUT, async (t) => {
  const p = await harness.openHarnessPage(t);
  const r = await p.evaluate(async () => {
    const calls = { execute: 0, destroy: 0 };
    wd.registerBackend('once', stubBackend({
      execute() { calls.execute += 1; },
      destroy() { calls.destroy += 1; },
    }));
    const d = await wd.Delegate.init('once', new Uint8Array());
    const args = [{ tag: 'Int', value: 1 }];
    const before = await capture(() => d.execute(args));
    d.destroy();
    const after = await capture(() => d.execute(args));
    return { before: before.ok, after, calls };
  });
  assert.equal(r.before, true);
  expectWdError(r.after, 'InvalidState', 'execute after destroy');
  assert.deepEqual(r.calls, { execute: 1, destroy: 1 });
});

test('async init and execute (returning Promises) work', TEST_TIMEOUT, async (t) => {
  const p = await harness.openHarnessPage(t);
  const r = await p.evaluate(async () => {
    const nextTask = () => new Promise((resolve) => setTimeout(resolve, 0));
    const order = [];
    wd.registerBackend('async', stubBackend({
      async init(processed) {
        order.push('init:start');
        await nextTask();
        order.push('init:end');
        return { offset: processed[0] };
      },
      async execute(h, [x, out]) {
        order.push('execute:start');
        await nextTask();
        order.push('execute:end');
        return [x, { ...out, data: x.data.map((v) => v + h.offset) }];
      },
    }));
    const d = await wd.Delegate.init('async', new Uint8Array([10]));
    order.push('init:resolved');
    const out = await d.execute([
      { tag: 'Tensor', dtype: 'float32', shape: [2], data: new Float32Array([1, 2]) },
      { tag: 'Tensor', dtype: 'float32', shape: [2], data: new Float32Array(2) },
    ]);
    order.push('execute:resolved');
    d.destroy();
    return { data: Array.from(out[1].data), order };
  });
  assert.deepEqual(r.data, [11, 12]);
  assert.deepEqual(r.order, ['init:start', 'init:end', 'init:resolved', 'execute:start', 'execute:end', 'execute:resolved']);
});

test('methodName and runtime specs from Delegate.init options reach the backend', TEST_TIMEOUT, async (t) => {
  const p = await harness.openHarnessPage(t);
  const r = await p.evaluate(async () => {
    const seen = {};
    wd.registerBackend('ctx', stubBackend({
      init(processed, compileSpecs, context) { seen.init = context; return {}; },
      execute(h, args, context) { seen.execute = context; },
    }));
    const d = await wd.Delegate.init('ctx', new Uint8Array(), {
      methodName: 'forward',
      runtimeSpecs: [
        { key: 'threads', value: 2 },
        { key: 'mode', value: 'fast' },
        { key: 'profile', value: true },
      ],
    });
    await d.execute([]);
    d.destroy();
    return seen;
  });
  assert.equal(r.init.methodName, 'forward');
  assert.deepEqual(r.init.runtimeSpecs, [
    { key: 'threads', value: 2 },
    { key: 'mode', value: 'fast' },
    { key: 'profile', value: true },
  ]);
  assert.equal(r.execute.methodName, 'forward');
});

test('every EValue kind and tensor dtype round-trips through a backend', TEST_TIMEOUT, async (t) => {
  const p = await harness.openHarnessPage(t);
  const r = await p.evaluate(async () => {
    const describe = (args) => args.map((a) => (a.tag === 'Tensor'
      ? { tag: a.tag, dtype: a.dtype, shape: a.shape, ctor: a.data.constructor.name, data: Array.from(a.data, String) }
      : { tag: a.tag, value: a.value ?? null }));
    let received = null;
    wd.registerBackend('echo', stubBackend({
      execute(h, args) { received = describe(args); },
    }));
    const d = await wd.Delegate.init('echo', new Uint8Array());
    const out = await d.execute([
      { tag: 'None' },
      { tag: 'Int', value: -42 },
      { tag: 'Double', value: 0.1 },
      { tag: 'Bool', value: true },
      { tag: 'String', value: 'héllo' },
      { tag: 'Tensor', dtype: 'float32', shape: [2], data: new Float32Array([1.5, -2]) },
      { tag: 'Tensor', dtype: 'float64', shape: [1, 2], data: new Float64Array([Math.PI, -0.5]) },
      { tag: 'Tensor', dtype: 'int32', shape: [3], data: new Int32Array([7, -8, 2147483647]) },
      { tag: 'Tensor', dtype: 'int64', shape: [2], data: new BigInt64Array([2n ** 40n, -3n]) },
      { tag: 'Tensor', dtype: 'uint8', shape: [2, 1], data: new Uint8Array([0, 255]) },
      { tag: 'Tensor', dtype: 'bool', shape: [3], data: new Uint8Array([1, 0, 1]) },
      { tag: 'Tensor', dtype: 'float32', shape: [0, 4], data: new Float32Array(0) },
    ]);
    d.destroy();
    return { received, returned: describe(out) };
  });
  const expected = [
    { tag: 'None', value: null },
    { tag: 'Int', value: -42 },
    { tag: 'Double', value: 0.1 },
    { tag: 'Bool', value: true },
    { tag: 'String', value: 'héllo' },
    { tag: 'Tensor', dtype: 'float32', shape: [2], ctor: 'Float32Array', data: ['1.5', '-2'] },
    { tag: 'Tensor', dtype: 'float64', shape: [1, 2], ctor: 'Float64Array', data: [String(Math.PI), '-0.5'] },
    { tag: 'Tensor', dtype: 'int32', shape: [3], ctor: 'Int32Array', data: ['7', '-8', '2147483647'] },
    { tag: 'Tensor', dtype: 'int64', shape: [2], ctor: 'BigInt64Array', data: [String(2n ** 40n), '-3'] },
    { tag: 'Tensor', dtype: 'uint8', shape: [2, 1], ctor: 'Uint8Array', data: ['0', '255'] },
    { tag: 'Tensor', dtype: 'bool', shape: [3], ctor: 'Uint8Array', data: ['1', '0', '1'] },
    { tag: 'Tensor', dtype: 'float32', shape: [0, 4], ctor: 'Float32Array', data: [] },
  ];
  assert.deepEqual(r.received, expected, 'what the backend received');
  assert.deepEqual(r.returned, expected, 'what execute resolved to');
});

test('an output tensor whose data does not match its shape is rejected with InvalidArgument', TEST_TIMEOUT, async (t) => {
  const p = await harness.openHarnessPage(t);
  const r = await p.evaluate(async () => {
    let calls = 0;
    wd.registerBackend('sloppy', stubBackend({
      execute(h, [x, out]) {
        calls += 1;
        // first call: 5 values for a [2, 3] tensor; later calls: correct
        const n = calls === 1 ? 5 : 6;
        return [x, { tag: 'Tensor', dtype: 'float32', shape: [2, 3], data: new Float32Array(n).fill(calls) }];
      },
    }));
    const d = await wd.Delegate.init('sloppy', new Uint8Array());
    const args = () => [
      { tag: 'Tensor', dtype: 'float32', shape: [1], data: new Float32Array([0]) },
      { tag: 'Tensor', dtype: 'float32', shape: [2, 3], data: new Float32Array(6) },
    ];
    const bad = await capture(() => d.execute(args()));
    const good = await capture(async () => {
      const out = await d.execute(args());
      return { shape: out[1].shape, data: Array.from(out[1].data) };
    });
    d.destroy();
    return { bad, good, calls };
  });
  expectWdError(r.bad, 'InvalidArgument', 'a [2, 3] output holding 5 values');
  assert.deepEqual(expectOk(r.good, 'the next execute'), { shape: [2, 3], data: [2, 2, 2, 2, 2, 2] });
  assert.equal(r.calls, 2);
});

test('an input tensor whose data does not match its shape is rejected before the backend runs', TEST_TIMEOUT, async (t) => {
  const p = await harness.openHarnessPage(t);
  const r = await p.evaluate(async () => {
    let calls = 0;
    wd.registerBackend('counting', stubBackend({ execute() { calls += 1; } }));
    const d = await wd.Delegate.init('counting', new Uint8Array());
    const bad = await capture(() => d.execute([
      { tag: 'Tensor', dtype: 'float32', shape: [2, 2], data: new Float32Array(3) },
    ]));
    d.destroy();
    return { bad, calls };
  });
  expectWdError(r.bad, 'InvalidArgument', 'a [2, 2] input holding 3 values');
  assert.equal(r.calls, 0, 'the backend must not see an inconsistent input');
});

test("a backend's execute error rejects execute with the backend's code", TEST_TIMEOUT, async (t) => {
  const p = await harness.openHarnessPage(t);
  const r = await p.evaluate(async () => {
    wd.registerBackend('fails', stubBackend({
      execute(h, args) { throw { code: args[0].value, message: 'execute failed on purpose' }; },
    }));
    const d = await wd.Delegate.init('fails', new Uint8Array());
    const coded = await capture(() => d.execute([{ tag: 'String', value: 'MemoryAllocationFailed' }]));
    const numbered = await capture(() => d.execute([{ tag: 'Int', value: 0x11 }]));
    d.destroy();
    return { coded, numbered };
  });
  const e = expectWdError(r.coded, 'MemoryAllocationFailed', 'execute whose backend throws');
  assert.match(e.message, /execute failed on purpose/);
  expectWdError(r.numbered, 'NotImplemented', 'execute whose backend throws code 0x11');
});
