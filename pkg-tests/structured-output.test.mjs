// Structured output (`response_format`) through chat.completions.create in headless Chromium:
// the built package, the real Gemma 3 270M Q4_K_M GGUF from nginx, the Gemma turn template
// fetched at setup (the base GGUF has none), on the CPU backend and on WebGPU (SwiftShader).
// Oracles:
// - every output is parsed by JSON.parse and validated by ajv (with ajv-formats), the JSON-schema
//   validator of the JS world, independent of llguidance, which produced it;
// - grammar and regex outputs are checked against the same language written as a JS RegExp;
// - WebGPU's constrained greedy text equals the CPU backend's, including across a device loss
//   (the cache is rebuilt under the same mask).
import assert from 'node:assert/strict';
import { readFile } from 'node:fs/promises';
import path from 'node:path';
import { test } from 'node:test';
import Ajv2020 from 'ajv/dist/2020.js';
import addFormats from 'ajv-formats';
import { useBrowserHarness } from './support/fixture.mjs';
import { REPO_ROOT } from './support/server.mjs';

const MODEL_URL = '/.cache/models/gemma-3-270m/gemma-3-270m-q4_k_m.gguf';
const TEMPLATE_PATH = '.cache/chat-templates/templates/google-gemma-2-2b-it.jinja';
const harness = useBrowserHarness();
const SLOW = { timeout: 900_000 };

/** Schemas a user writes: nesting, enums, arrays, required fields, patterns, formats, refs. */
const SCHEMAS = [
  {
    type: 'object',
    properties: {
      name: { type: 'string', maxLength: 24 },
      age: { type: 'integer', minimum: 0, maximum: 120 },
      email: { type: 'string', format: 'email' },
    },
    required: ['name', 'age'],
    additionalProperties: false,
  },
  {
    type: 'object',
    properties: {
      city: { type: 'string', enum: ['Paris', 'Tokyo', 'Lima', 'Oslo'] },
      tags: { type: 'array', items: { type: 'string', maxLength: 12 }, minItems: 1, maxItems: 3 },
    },
    required: ['city', 'tags'],
    additionalProperties: false,
  },
  {
    type: 'object',
    properties: {
      code: { type: 'string', pattern: '^[A-Z]{3}-[0-9]{3}$' },
      active: { type: 'boolean' },
      score: { type: 'number', minimum: 0, maximum: 10 },
    },
    required: ['code', 'active', 'score'],
    additionalProperties: false,
  },
  {
    $defs: { point: { type: 'object', properties: { x: { type: 'integer', minimum: -9, maximum: 9 }, y: { type: 'integer', minimum: -9, maximum: 9 } }, required: ['x', 'y'], additionalProperties: false } },
    type: 'object',
    properties: { from: { $ref: '#/$defs/point' }, to: { $ref: '#/$defs/point' }, label: { anyOf: [{ type: 'null' }, { type: 'string', maxLength: 10 }] } },
    required: ['from', 'to', 'label'],
    additionalProperties: false,
  },
  {
    type: 'object',
    properties: {
      title: { type: 'string', minLength: 1, maxLength: 30 },
      date: { type: 'string', format: 'date' },
      items: { type: 'array', items: { type: 'object', properties: { id: { type: 'integer', minimum: 1, maximum: 99 }, done: { type: 'boolean' } }, required: ['id', 'done'], additionalProperties: false }, maxItems: 2 },
    },
    required: ['title', 'date', 'items'],
    additionalProperties: false,
  },
  { type: 'object', properties: { answer: { const: 'yes' }, confidence: { enum: [1, 2, 3] } }, required: ['answer', 'confidence'], additionalProperties: false },
];

function validatorFor(schema) {
  const ajv = new Ajv2020({ strict: false, allErrors: true });
  addFormats(ajv);
  return ajv.compile(schema);
}

function checkValid(output, schema, label) {
  assert.equal(output.finish, 'stop', `${label}: finished by ${output.finish}: ${JSON.stringify(output.content)}`);
  let value;
  assert.doesNotThrow(() => { value = JSON.parse(output.content); }, `${label}: ${JSON.stringify(output.content)} does not parse`);
  const validate = validatorFor(schema);
  assert.ok(validate(value), `${label}: ${output.content} is invalid: ${JSON.stringify(validate.errors)}`);
  return value;
}

test('CPU: json_schema, json_object, grammar and regex outputs always parse and validate', SLOW, async (t) => {
  const template = await readFile(path.join(REPO_ROOT, TEMPLATE_PATH), 'utf8');
  const page = await harness.openHarnessPage(t);
  const r = await page.evaluate(async ({ url, template, schemas }) => {
    const capture = async (f) => { try { return { ok: true, value: await f() } } catch (e) { return { ok: false, error: { code: e.code, message: e.message } } } };
    const gen = await wd.Generator.load(url, { backend: 'cpu', contextLength: 512, chatTemplate: template });
    const ask = (content) => [{ role: 'user', content }];
    const run = async (request) => {
      const c = await gen.chat.completions.create(request);
      return { content: c.choices[0].message.content, finish: c.choices[0].finish_reason, usage: c.usage };
    };
    const out = { schemas: [] };
    const first = performance.now();
    for (const [i, schema] of schemas.entries()) {
      for (const temperature of [0, 0.8]) {
        const started = performance.now();
        const o = await run({
          messages: ask('Reply with a JSON object.'),
          response_format: { type: 'json_schema', json_schema: { name: `s${i}`, schema, strict: true } },
          max_tokens: 160, temperature, seed: i,
        });
        o.ms = performance.now() - started;
        o.temperature = temperature;
        out.schemas.push(o);
      }
    }
    out.firstMs = out.schemas[0].ms;
    out.totalMs = performance.now() - first;
    out.stats = gen.stats();
    // Any object: the base model may go on adding keys until max_tokens; sampled, most end.
    out.objects = [];
    for (const seed of [1, 2, 3, 4]) out.objects.push(await run({ messages: ask('Describe a cat as JSON.'), response_format: { type: 'json_object' }, max_tokens: 120, temperature: 0.8, seed }));
    // WebLLM's shape: json_object with the schema as JSON text.
    out.webllm = await run({ messages: ask('A city as JSON.'), response_format: { type: 'json_object', schema: JSON.stringify(schemas[1]) }, max_tokens: 160, temperature: 0.7, seed: 3 });
    out.grammar = await run({ messages: ask('Is the sky blue?'), response_format: { type: 'grammar', grammar: 'start: answer " because " reason "."\nanswer: "yes" | "no"\nreason: /[a-z ]{1,40}/' }, max_tokens: 60, temperature: 0 });
    out.regex = await run({ messages: ask('Give me a date.'), response_format: { type: 'regex', regex: '[0-9]{4}-[0-9]{2}-[0-9]{2}' }, max_tokens: 30, temperature: 0.9, seed: 1 });
    // Streaming: the chunks concatenate to a valid value.
    const stream = await gen.chat.completions.create({ messages: ask('A person as JSON.'), response_format: { type: 'json_schema', json_schema: { name: 'p', schema: schemas[0] } }, max_tokens: 160, temperature: 0, stream: true, stream_options: { include_usage: true } });
    const chunks = [];
    for await (const c of stream) chunks.push(c);
    out.streamed = { content: chunks.map((c) => c.choices[0]?.delta?.content ?? '').join(''), finish: chunks.at(-2).choices[0].finish_reason, usage: chunks.at(-1).usage };
    // Cut short by max_tokens: 'length', and not (yet) a complete value.
    out.cut = await run({ messages: ask('A person as JSON.'), response_format: { type: 'json_schema', json_schema: { name: 'p', schema: schemas[4] } }, max_tokens: 5, temperature: 0 });
    out.errors = {
      stop: await capture(() => gen.chat.completions.create({ messages: ask('x'), response_format: { type: 'json_object' }, stop: ['}'] })),
      badSchema: await capture(() => gen.chat.completions.create({ messages: ask('x'), response_format: { type: 'json_schema', json_schema: { schema: { type: 'strin' } } } })),
      unsatisfiable: await capture(() => gen.chat.completions.create({ messages: ask('x'), response_format: { type: 'json_schema', json_schema: { schema: { type: 'string', minLength: 5, maxLength: 2 } } } })),
      notJson: await capture(() => gen.chat.completions.create({ messages: ask('x'), response_format: { type: 'json_object', schema: '{nope' } })),
      noGrammar: await capture(() => gen.chat.completions.create({ messages: ask('x'), response_format: { type: 'grammar' } })),
      badGrammar: await capture(() => gen.chat.completions.create({ messages: ask('x'), response_format: { type: 'grammar', grammar: 'start: "a' } })),
    };
    // After the errors the generator still works, unconstrained.
    out.after = await run({ messages: ask('Hi'), max_tokens: 4, temperature: 0 });
    gen.destroy();
    return out;
  }, { url: MODEL_URL, template, schemas: SCHEMAS });

  let tokens = 0;
  r.schemas.forEach((o, k) => {
    const i = Math.floor(k / 2);
    checkValid(o, SCHEMAS[i], `schema ${i} at temperature ${o.temperature}`);
    tokens += o.usage.completion_tokens;
    t.diagnostic(`schema ${i} t=${o.temperature}: ${o.usage.completion_tokens} tokens, ${o.ms.toFixed(0)} ms: ${o.content}`);
  });
  t.diagnostic(`${r.schemas.length} outputs, ${tokens} tokens in ${r.totalMs.toFixed(0)} ms (first request, with the compiler build: ${r.firstMs.toFixed(0)} ms); last: ${r.stats.grammarMasks} masks in ${r.stats.grammarMaskMs.toFixed(1)} ms`);
  assert.ok(r.stats.grammarMasks > 0 && r.stats.grammarMaskMs > 0, JSON.stringify(r.stats));
  const distinct = new Set(r.schemas.map((o) => o.content));
  assert.ok(distinct.size >= r.schemas.length - 2, 'sampled outputs differ from greedy ones');

  for (const o of r.objects) {
    t.diagnostic(`json_object: ${o.finish}: ${o.content}`);
    assert.ok(o.content.startsWith('{'), o.content);
    if (o.finish === 'length') continue;
    assert.equal(o.finish, 'stop');
    const object = JSON.parse(o.content);
    assert.ok(object !== null && typeof object === 'object' && !Array.isArray(object), o.content);
  }
  assert.ok(r.objects.some((o) => o.finish === 'stop'), 'some json_object reply ended by itself');
  checkValid(r.webllm, SCHEMAS[1], 'WebLLM-style schema');
  assert.equal(r.grammar.finish, 'stop');
  assert.match(r.grammar.content, /^(yes|no) because [a-z ]{1,40}\.$/);
  assert.equal(r.regex.finish, 'stop');
  assert.match(r.regex.content, /^[0-9]{4}-[0-9]{2}-[0-9]{2}$/);
  checkValid(r.streamed, SCHEMAS[0], 'streamed');
  assert.ok(r.streamed.usage.extra.grammar_mask_ms_per_token > 0, JSON.stringify(r.streamed.usage));
  assert.equal(r.cut.finish, 'length');
  assert.equal(r.cut.usage.completion_tokens, 5);
  assert.ok(r.cut.content.startsWith('{"tit'), r.cut.content);
  assert.throws(() => JSON.parse(r.cut.content));
  for (const [key, e] of Object.entries(r.errors)) {
    assert.equal(e.ok, false, key);
    assert.equal(e.error.code, 'InvalidArgument', `${key}: ${JSON.stringify(e.error)}`);
  }
  assert.match(r.errors.stop.error.message, /stop strings cannot be combined/);
  assert.match(r.errors.badSchema.error.message, /JSON schema/);
  assert.match(r.errors.notJson.error.message, /not valid JSON/);
  assert.ok(r.after.content.length > 0);
});

test('WebGPU: the constrained greedy text equals the CPU\'s, also across a device loss', SLOW, async (t) => {
  const template = await readFile(path.join(REPO_ROOT, TEMPLATE_PATH), 'utf8');
  const page = await harness.openHarnessPage(t);
  const r = await page.evaluate(async ({ url, template, schema }) => {
    const request = { messages: [{ role: 'user', content: 'Reply with a JSON object.' }], response_format: { type: 'json_schema', json_schema: { name: 's', schema } }, max_tokens: 48, temperature: 0 };
    const text = async (gen, lose) => {
      const stream = await gen.chat.completions.create({ ...request, stream: true });
      let content = ''; let finish = null; let n = 0;
      for await (const c of stream) {
        content += c.choices[0]?.delta?.content ?? '';
        finish = c.choices[0]?.finish_reason ?? finish;
        if (lose && ++n === 6) wd.destroyWebGpuDevice();
      }
      return { content, finish, stats: gen.stats() };
    };
    const cpu = await wd.Generator.load(url, { backend: 'cpu', contextLength: 256, chatTemplate: template });
    const want = await text(cpu, false);
    cpu.destroy();
    const gpu = await wd.Generator.load(url, { backend: 'webgpu', contextLength: 256, chatTemplate: template });
    const got = await text(gpu, false);
    await gpu.reset();
    const lost = await text(gpu, true);
    gpu.destroy();
    return { want, got, lost };
  }, { url: MODEL_URL, template, schema: SCHEMAS[5] });
  t.diagnostic(`cpu ${JSON.stringify(r.want.content)}; webgpu ${JSON.stringify(r.got.content)} (${r.got.stats.backend}, SwiftShader)`);
  assert.equal(r.got.stats.backend, 'webgpu');
  checkValid(r.want, SCHEMAS[5], 'cpu');
  assert.equal(r.got.content, r.want.content, 'webgpu = cpu');
  assert.equal(r.lost.content, r.want.content, 'after a device loss mid-way');
  assert.equal(r.lost.stats.rebuilds, 1);
});
