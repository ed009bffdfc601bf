// The backend registry as the built package exposes it to JS: registration order and capacity
// (16 slots; full is checked before duplicates), name lookups, availability, option
// set/get validation (key < 64 bytes, string value < 256 bytes, integral numbers), backend errors
// passing through unchanged, and the shape of every error (WebDelegateError + ErrorCode).
// Each test opens a fresh page (fresh wasm instance), and counts relative to the backends the
// package registers by default (n0), so the tests stay valid when defaults are added.
import assert from 'node:assert/strict';
import { readFile } from 'node:fs/promises';
import { test } from 'node:test';
import { ERROR_CODES, expectOk, expectWdError } from './support/expect.mjs';
import { TEST_TIMEOUT, useBrowserHarness } from './support/fixture.mjs';
import { REPO_ROOT } from './support/server.mjs';

const MAX_BACKENDS = 16;
const harness = useBrowserHarness();

test('a fresh page lists its default backends consistently', TEST_TIMEOUT, async (t) => {
  const p = await harness.openHarnessPage(t);
  const r = await p.evaluate(() => {
    const n0 = wd.numRegisteredBackends();
    const list = wd.listBackends();
    return { n0, list, names: list.map((_, i) => wd.backendName(i)), has: list.map((n) => wd.hasBackend(n)) };
  });
  assert.ok(Number.isInteger(r.n0) && r.n0 >= 0 && r.n0 < MAX_BACKENDS, `n0 = ${r.n0}`);
  assert.ok(Array.isArray(r.list));
  assert.equal(r.list.length, r.n0);
  assert.deepEqual(r.names, r.list);
  assert.equal(new Set(r.list).size, r.list.length, 'duplicate default backend names');
  assert.ok(r.has.every(Boolean));
});

test('version() is the crate version', TEST_TIMEOUT, async (t) => {
  const cargo = await readFile(new URL('Cargo.toml', `file://${REPO_ROOT}/`), 'utf8');
  const crateVersion = cargo.match(/^version\s*=\s*"([^"]+)"/m)[1];
  const p = await harness.openHarnessPage(t);
  assert.equal(await p.evaluate(() => wd.version()), crateVersion);
});

test('ErrorCode has the contract values', TEST_TIMEOUT, async (t) => {
  const p = await harness.openHarnessPage(t);
  const names = Object.keys(ERROR_CODES);
  const got = await p.evaluate((ns) => Object.fromEntries(ns.map((n) => [n, wd.ErrorCode[n]])), names);
  assert.deepEqual(got, ERROR_CODES);
});

test('registering JS backends fills the free slots in order', TEST_TIMEOUT, async (t) => {
  const p = await harness.openHarnessPage(t);
  const r = await p.evaluate((max) => {
    const n0 = wd.numRegisteredBackends();
    const before = wd.listBackends();
    const steps = [];
    for (let k = 0; k < max - n0; k++) {
      const name = `js-${k}`;
      const available = k % 2 === 0;
      wd.registerBackend(name, stubBackend({ isAvailable: () => available }));
      steps.push({
        name,
        count: wd.numRegisteredBackends(),
        last: wd.backendName(wd.numRegisteredBackends() - 1),
        has: wd.hasBackend(name),
        available: wd.isBackendAvailable(name),
      });
    }
    const list = wd.listBackends();
    return { n0, before, steps, list, names: list.map((_, i) => wd.backendName(i)) };
  }, MAX_BACKENDS);
  const free = MAX_BACKENDS - r.n0;
  assert.equal(r.steps.length, free);
  r.steps.forEach((s, k) => {
    assert.deepEqual(s, { name: `js-${k}`, count: r.n0 + k + 1, last: `js-${k}`, has: true, available: k % 2 === 0 });
  });
  assert.deepEqual(r.list, [...r.before, ...r.steps.map((s) => s.name)]);
  assert.deepEqual(r.names, r.list);
});

test('backendName(count) throws InvalidArgument', TEST_TIMEOUT, async (t) => {
  const p = await harness.openHarnessPage(t);
  const r = await p.evaluate(async () => {
    wd.registerBackend('one', stubBackend());
    const n = wd.numRegisteredBackends();
    return { last: await capture(() => wd.backendName(n - 1)), past: await capture(() => wd.backendName(n)) };
  });
  assert.equal(expectOk(r.last), 'one');
  expectWdError(r.past, 'InvalidArgument', 'backendName(count)');
});

test('a duplicate name throws InvalidArgument and changes nothing', TEST_TIMEOUT, async (t) => {
  const p = await harness.openHarnessPage(t);
  const r = await p.evaluate(async () => {
    wd.registerBackend('dup', stubBackend({ isAvailable: () => true }));
    const before = wd.listBackends();
    const again = await capture(() => wd.registerBackend('dup', stubBackend({ isAvailable: () => false })));
    return { again, before, after: wd.listBackends(), available: wd.isBackendAvailable('dup') };
  });
  expectWdError(r.again, 'InvalidArgument', 'registering "dup" twice');
  assert.deepEqual(r.after, r.before);
  assert.equal(r.available, true, 'the first registration must stay in place');
});

test('a full registry throws Internal, even for a duplicate name', TEST_TIMEOUT, async (t) => {
  const p = await harness.openHarnessPage(t);
  const r = await p.evaluate(async (max) => {
    const n0 = wd.numRegisteredBackends();
    for (let k = 0; k < max - n0; k++) wd.registerBackend(`fill-${k}`, stubBackend());
    const full = wd.listBackends();
    const fresh = await capture(() => wd.registerBackend('seventeenth', stubBackend()));
    const dup = await capture(() => wd.registerBackend(full[full.length - 1], stubBackend()));
    return { full, fresh, dup, after: wd.listBackends(), hasSeventeenth: wd.hasBackend('seventeenth') };
  }, MAX_BACKENDS);
  assert.equal(r.full.length, MAX_BACKENDS);
  expectWdError(r.fresh, 'Internal', 'registering a 17th backend');
  expectWdError(r.dup, 'Internal', 'registering a duplicate name into a full registry');
  assert.deepEqual(r.after, r.full);
  assert.equal(r.hasSeventeenth, false);
});

test('unknown backend names: hasBackend false, everything else NotFound', TEST_TIMEOUT, async (t) => {
  const p = await harness.openHarnessPage(t);
  const r = await p.evaluate(async () => ({
    has: wd.hasBackend('nope'),
    available: await capture(() => wd.isBackendAvailable('nope')),
    set: await capture(() => wd.setOption('nope', [{ key: 'k', value: true }])),
    get: await capture(() => wd.getOption('nope', [{ key: 'k', value: false }])),
  }));
  assert.equal(r.has, false);
  expectWdError(r.available, 'NotFound', "isBackendAvailable('nope')");
  expectWdError(r.set, 'NotFound', "setOption('nope')");
  expectWdError(r.get, 'NotFound', "getOption('nope')");
});

test('option keys must be under 64 bytes', TEST_TIMEOUT, async (t) => {
  const p = await harness.openHarnessPage(t);
  const r = await p.evaluate(async () => {
    const seen = [];
    wd.registerBackend('opts', stubBackend({ setOption: (opts) => { seen.push(...opts.map((o) => o.key)); } }));
    const k63 = 'k'.repeat(63);
    return {
      k63,
      ok63: await capture(() => wd.setOption('opts', [{ key: k63, value: 1 }])),
      bad64: await capture(() => wd.setOption('opts', [{ key: 'k'.repeat(64), value: 1 }])),
      // 32 two-byte characters: 32 UTF-16 units but 64 UTF-8 bytes.
      bad64utf8: await capture(() => wd.setOption('opts', [{ key: 'é'.repeat(32), value: 1 }])),
      badGet: await capture(() => wd.getOption('opts', [{ key: 'k'.repeat(64), value: 1 }])),
      seen,
    };
  });
  expectOk(r.ok63, 'a 63-byte key');
  expectWdError(r.bad64, 'InvalidArgument', 'a 64-byte key');
  expectWdError(r.bad64utf8, 'InvalidArgument', 'a key of 32 two-byte characters');
  expectWdError(r.badGet, 'InvalidArgument', 'getOption with a 64-byte key');
  assert.deepEqual(r.seen, [r.k63], 'only the valid call may reach the backend');
});

test('string option values must be under 256 bytes', TEST_TIMEOUT, async (t) => {
  const p = await harness.openHarnessPage(t);
  const r = await p.evaluate(async () => {
    const seen = [];
    wd.registerBackend('opts', stubBackend({ setOption: (opts) => { seen.push(...opts.map((o) => o.value)); } }));
    const v255 = 'v'.repeat(255);
    return {
      v255,
      ok255: await capture(() => wd.setOption('opts', [{ key: 's', value: v255 }])),
      bad256: await capture(() => wd.setOption('opts', [{ key: 's', value: 'v'.repeat(256) }])),
      seen,
    };
  });
  expectOk(r.ok255, 'a 255-byte string value');
  expectWdError(r.bad256, 'InvalidArgument', 'a 256-byte string value');
  assert.deepEqual(r.seen, [r.v255]);
});

test('setOption hands bool, integer and string values to the backend; non-integral numbers are rejected', TEST_TIMEOUT, async (t) => {
  const p = await harness.openHarnessPage(t);
  const r = await p.evaluate(async () => {
    const calls = [];
    wd.registerBackend('opts', stubBackend({
      setOption: (opts) => { calls.push(opts.map(({ key, value }) => ({ key, value, type: typeof value }))); },
    }));
    return {
      ok: await capture(() => wd.setOption('opts', [
        { key: 'flag', value: true },
        { key: 'threads', value: -7 },
        { key: 'big', value: 2 ** 40 },
        { key: 'mode', value: 'fast' },
      ])),
      frac: await capture(() => wd.setOption('opts', [{ key: 'x', value: 1.5 }])),
      calls,
    };
  });
  expectOk(r.ok, 'setOption with bool/int/string');
  expectWdError(r.frac, 'InvalidArgument', 'setOption with value 1.5');
  assert.deepEqual(r.calls, [[
    { key: 'flag', value: true, type: 'boolean' },
    { key: 'threads', value: -7, type: 'number' },
    { key: 'big', value: 2 ** 40, type: 'number' },
    { key: 'mode', value: 'fast', type: 'string' },
  ]]);
});

test('integer option values must be integral and within i64', TEST_TIMEOUT, async (t) => {
  const p = await harness.openHarnessPage(t);
  const values = {
    'i64::MIN = -(2 ** 63)': -(2 ** 63),
    'MIN_SAFE_INTEGER': Number.MIN_SAFE_INTEGER,
    'MAX_SAFE_INTEGER': Number.MAX_SAFE_INTEGER,
    '2 ** 53': 2 ** 53,
    '2 ** 62': 2 ** 62,
    'i64::MAX + 1 = 2 ** 63': 2 ** 63,
    '-(2 ** 64)': -(2 ** 64),
    '1.5': 1.5,
    'NaN': NaN,
    'Infinity': Infinity,
  };
  const r = await p.evaluate(async (entries) => {
    const seen = [];
    wd.registerBackend('opts', stubBackend({ setOption: (opts) => { seen.push(...opts.map((o) => o.value)); } }));
    const outcome = {};
    for (const [label, value] of entries) {
      const c = await capture(() => wd.setOption('opts', [{ key: 'n', value }]));
      outcome[label] = c.ok ? 'accepted' : c.error.code;
    }
    return { outcome, seen };
  }, Object.entries(values));
  // Every listed value is reported at once, so one diff shows the whole boundary.
  assert.deepEqual(r.outcome, {
    'i64::MIN = -(2 ** 63)': 'accepted',
    'MIN_SAFE_INTEGER': 'accepted',
    'MAX_SAFE_INTEGER': 'accepted',
    '2 ** 53': 'accepted',
    '2 ** 62': 'accepted',
    'i64::MAX + 1 = 2 ** 63': 'InvalidArgument',
    '-(2 ** 64)': 'InvalidArgument',
    '1.5': 'InvalidArgument',
    'NaN': 'InvalidArgument',
    'Infinity': 'InvalidArgument',
  });
  // Integers outside ±(2^53 - 1) reach the backend as BigInt, so they stay exact.
  assert.deepEqual(r.seen, [-(2n ** 63n), Number.MIN_SAFE_INTEGER, Number.MAX_SAFE_INTEGER, 2n ** 53n, 2n ** 62n]);
});

test("a backend's own setOption error passes through unchanged", TEST_TIMEOUT, async (t) => {
  const p = await harness.openHarnessPage(t);
  const r = await p.evaluate(async () => {
    const thrown = { current: null };
    wd.registerBackend('picky', stubBackend({ setOption: () => { throw thrown.current; } }));
    const attempt = async (value) => {
      thrown.current = value;
      return capture(() => wd.setOption('picky', [{ key: 'k', value: 1 }]));
    };
    return {
      byName: await attempt({ code: 'InvalidState', message: 'not now' }),
      byNumber: await attempt({ code: 0x23, message: 'bad program' }),
      errorObject: await attempt(Object.assign(new Error('no memory'), { code: 'OutOfResources' })),
      plain: await attempt('just a string'),
      unknownCode: await attempt({ code: 'NoSuchCode' }),
    };
  });
  const e = expectWdError(r.byName, 'InvalidState', 'backend throwing {code: "InvalidState"}');
  assert.match(e.message, /not now/, 'the backend message should be kept');
  expectWdError(r.byNumber, 'InvalidProgram', 'backend throwing {code: 0x23}');
  expectWdError(r.errorObject, 'OutOfResources', 'backend throwing an Error with code OutOfResources');
  expectWdError(r.plain, 'Internal', 'backend throwing a plain string');
  expectWdError(r.unknownCode, 'Internal', 'backend throwing an unknown code name');
});

test('getOption returns what the backend filled in (in place or returned)', TEST_TIMEOUT, async (t) => {
  const p = await harness.openHarnessPage(t);
  const r = await p.evaluate(async () => {
    const values = { flag: true, threads: 12, name: 'swiftshader' };
    wd.registerBackend('inplace', stubBackend({
      getOption: (opts) => { for (const o of opts) o.value = values[o.key]; },
    }));
    wd.registerBackend('returns', stubBackend({
      getOption: (opts) => opts.map(({ key }) => ({ key, value: values[key] })),
    }));
    const query = () => [
      { key: 'flag', value: false },
      { key: 'threads', value: 0 },
      { key: 'name', value: '' },
    ];
    return {
      inplace: await capture(() => wd.getOption('inplace', query())),
      returns: await capture(() => wd.getOption('returns', query())),
    };
  });
  const expected = [
    { key: 'flag', value: true },
    { key: 'threads', value: 12 },
    { key: 'name', value: 'swiftshader' },
  ];
  assert.deepEqual(expectOk(r.inplace, 'getOption filled in place'), expected);
  assert.deepEqual(expectOk(r.returns, 'getOption returning options'), expected);
});

test('errors are Error instances named WebDelegateError with code and codeValue', TEST_TIMEOUT, async (t) => {
  const p = await harness.openHarnessPage(t);
  const r = await p.evaluate(() => {
    try {
      wd.isBackendAvailable('nope');
      return null;
    } catch (e) {
      return {
        isError: e instanceof Error,
        name: e.name,
        code: e.code,
        codeValue: e.codeValue,
        matchesEnum: e.codeValue === wd.ErrorCode[e.code],
        message: e.message,
        hasStack: typeof e.stack === 'string',
      };
    }
  });
  assert.ok(r, 'isBackendAvailable("nope") did not throw');
  assert.deepEqual(
    { isError: r.isError, name: r.name, code: r.code, codeValue: r.codeValue, matchesEnum: r.matchesEnum, hasStack: r.hasStack },
    { isError: true, name: 'WebDelegateError', code: 'NotFound', codeValue: 0x20, matchesEnum: true, hasStack: true },
  );
  assert.equal(typeof r.message, 'string');
  assert.ok(r.message.length > 0, 'error message is empty');
});
