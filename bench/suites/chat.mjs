// Chat (issue 31) in headless Chromium through the built package. Report keys:
//
//   chat_template_equal_fraction   renders equal to Python jinja2's (transformers' own
//                                  render_jinja_template, .cache/chat-templates/expected.json)
//                                  over every real template x conversation jinja2 renders
//                                  (scripts/chat-templates.py: the llama.cpp templates of the
//                                  llama-cpp-python sdist and a GGUF header from PyPI; the
//                                  conversations of tests/fixtures/chat/conversations.json),
//                                  rendered in the page by `ChatTemplate` (target 1.0)
//   chat_template_renders          how many renders that fraction is of
//   chat_template_refused_agree_fraction  of the conversations jinja2 refuses (raises), the
//                                  fraction we refuse too (minijinja is more lenient in places)
//   chat_template_render_ms_mean   mean milliseconds per render (template compiled once; a
//                                  mean, as one render is below the page clock's resolution)
//   chat_followup_ttft_ms_reuse    time to first token of turn 5 of a conversation (Gemma 3
//                                  270M Q4_K_M, CPU backend, greedy, 16 tokens per reply), its
//                                  history in the KV cache from turns 1-4
//   chat_followup_ttft_ms_fresh    the same request after reset(): the whole history fed
//   chat_followup_ttft_ratio       reuse / fresh (target <= 0.3): medians over ROUNDS rounds
//   chat_followup_ttft_ratio_spread  (max - min) / median of the rounds' ratios
//   chat_followup_prompt_tokens, chat_followup_cached_tokens  turn 5's prompt and cached counts
//
// The setup's Gemma GGUF is the base model, without a template: the llama.cpp Gemma template
// (google-gemma-2-2b-it.jinja, the same turn format) is passed as chatTemplate.
//
// Structured output (response_format json_schema, Gemma 3 270M, CPU backend):
//   json_schema_valid_fraction     of JSON_SCHEMAS random schemas (seeded: nesting, enums,
//                                  arrays, required fields, patterns, formats, $ref, anyOf;
//                                  each value at most 360 bytes except a number's digits;
//                                  half greedy, half at temperature 0.8), the fraction whose
//                                  output ends by itself ('stop') and is valid for ajv (with
//                                  ajv-formats), an oracle independent of llguidance (target 1.0)
//   json_schema_count              how many schemas that fraction is of
//   json_schema_length_cut         outputs cut by max_tokens (400) instead (counted invalid)
//   json_schema_invalid            outputs that ended by themselves yet fail ajv (target 0)
//   json_mask_ms_per_token_cpu     median over those generations of the grammar's milliseconds
//                                  per token mask (usage.extra.grammar_mask_ms_per_token)
//   json_compiler_ms               the grammar compiler's build for the 262,144-token vocabulary
//                                  (once per model): the first structured request's time minus
//                                  the same request's again
//   json_decode_tps_schema, json_decode_tps_plain  decode tokens/s of 64-token replies with a
//                                  long-output schema and without one (medians over ROUNDS)
//   json_decode_ratio_cpu          schema / plain (target >= 0.8), json_decode_ratio_cpu_spread
import { readFile } from 'node:fs/promises';
import path from 'node:path';
import Ajv2020 from 'ajv/dist/2020.js';
import addFormats from 'ajv-formats';
import { median, spread } from '../lib/stats.mjs';

const MODEL_URL = '/.cache/models/gemma-3-270m/gemma-3-270m-q4_k_m.gguf';
const TEMPLATES = '.cache/chat-templates';
const GEMMA_TEMPLATE = `${TEMPLATES}/templates/google-gemma-2-2b-it.jinja`;
const ROUNDS = Number(process.env.BENCH_CHAT_ROUNDS ?? 3);
const JSON_SCHEMAS = Number(process.env.BENCH_JSON_SCHEMAS ?? 200);
// A value of at most this many bytes takes at most as many tokens: max_tokens is 400.
const JSON_BUDGET_BYTES = 360;

/**
 * A seeded generator of object schemas, each kept only when its longest value fits `budget`
 * bytes in the compact layout (a port of the native test's; a string character counts 6 bytes,
 * as `\uXXXX`; a number 24), so `max_tokens` never decides the outcome.
 */
function randomSchemas(seed, count, budget) {
  let state = BigInt(seed);
  const next = () => {
    state ^= state >> 12n; state ^= (state << 25n) & 0xffffffffffffffffn; state ^= state >> 27n;
    return Number(((state * 0x2545f4914f6cdd1dn) & 0xffffffffffffffffn) >> 11n);
  };
  const below = (n) => next() % n;
  const pick = (items) => items[below(items.length)];
  const literal = (x) => Buffer.byteLength(JSON.stringify(x));
  // Each returns [schema, the most bytes of a value].
  const leaf = () => {
    switch (below(11)) {
      case 0: { const max = 1 + below(12); return [{ type: 'string', minLength: below(2), maxLength: max }, 2 + 6 * max]; }
      case 1: return [{ type: 'string', pattern: '^[a-z]{1,8}$' }, 10];
      case 2: return [{ type: 'string', pattern: '^[A-Z]{2}-[0-9]{2,3}$' }, 8];
      case 3: {
        const words = [...new Set(Array.from({ length: 1 + below(4) }, () => pick(['red', 'grün', '青い', 'a b', 'say "hi"', 'line\nbreak'])))];
        return [{ type: 'string', enum: words }, Math.max(...words.map(literal))];
      }
      case 4: { const low = below(100) - 50; return [{ type: 'integer', minimum: low, maximum: low + below(2000) }, 5]; }
      case 5: return [{ type: 'boolean' }, 5];
      case 6: return [{ type: 'null' }, 4];
      case 7: return [{ enum: [1, 'two', null, true, 2.5] }, 5];
      case 8: return [{ type: 'number', minimum: 0, maximum: 100 }, 24];
      case 9: { const format = pick(['date', 'email', 'time']); return [{ type: 'string', format }, format === 'email' ? 80 : 24]; }
      default: { const [a, x] = leaf(); const [b, y] = leaf(); return [{ anyOf: [a, b] }, Math.max(x, y)]; }
    }
  };
  const node = (depth) => {
    if (depth === 0 || below(3) === 0) return leaf();
    if (below(3) === 0) {
      const [items, bound] = node(depth - 1);
      const max = 1 + below(3);
      return [{ type: 'array', items, minItems: below(2), maxItems: max }, 2 + max * bound + 2 * (max - 1)];
    }
    return object(depth);
  };
  const object = (depth) => {
    const names = ['name', 'age', 'tags', 'id', 'größe', 'x y', '_k', 'title', 'items', 'date'];
    const properties = {};
    let bound = 2;
    const n = 1 + below(depth > 1 ? 3 : 4);
    for (let i = 0; i < n; i++) {
      const name = pick(names);
      if (name in properties) continue;
      const [child, childBound] = node(depth - 1);
      properties[name] = child;
      bound += literal(name) + 2 + childBound + (i > 0 ? 2 : 0);
    }
    const required = Object.keys(properties).filter(() => below(3) > 0);
    return [{ type: 'object', properties, required, additionalProperties: false }, bound];
  };
  const out = [];
  while (out.length < count) {
    const [schema, bound] = object(1 + below(2));
    if (bound > budget) continue;
    out.push(out.length % 7 === 3 ? { $defs: { item: schema }, $ref: '#/$defs/item' } : schema);
  }
  return out;
}

export async function run(ctx) {
  const read = async (p) => readFile(path.join(ctx.root, p), 'utf8');
  const expected = JSON.parse(await read(`${TEMPLATES}/expected.json`));
  const cases = JSON.parse(await read('tests/fixtures/chat/conversations.json'));
  const templates = {};
  for (const name of Object.keys(expected.templates)) templates[name] = await read(`${TEMPLATES}/templates/${name}.jinja`);
  const page = await ctx.openHarnessPage();

  ctx.log(`chat: ${Object.keys(templates).length} templates x ${cases.length} conversations`);
  const renders = await page.evaluate(({ templates, cases, meta }) => {
    const out = {};
    let renderMs = 0;
    let count = 0;
    for (const [name, source] of Object.entries(templates)) {
      let template;
      try {
        template = new wd.ChatTemplate(source, meta.specials);
      } catch (e) {
        template = null;
      }
      out[name] = {};
      for (const c of cases) {
        const t0 = performance.now();
        try {
          if (!template) throw new Error('did not compile');
          out[name][c.id] = { text: template.render(c.messages, {
            addGenerationPrompt: c.add_generation_prompt, tools: c.tools, chatTemplateKwargs: c.extra, now: meta.fixed_ms,
          }) };
        } catch (e) {
          out[name][c.id] = { error: String(e.message ?? e) };
        }
        renderMs += performance.now() - t0;
        count += 1;
      }
      template?.free();
    }
    return { out, meanMs: renderMs / count };
  }, { templates, cases, meta: expected.meta });

  let rendered = 0;
  let equal = 0;
  let refused = 0;
  let refusedToo = 0;
  for (const [name, results] of Object.entries(expected.templates)) {
    for (const [id, want] of Object.entries(results)) {
      const got = renders.out[name][id];
      if (want.text === undefined) {
        refused += 1;
        if (got.error !== undefined) refusedToo += 1;
      } else {
        rendered += 1;
        if (got.text === want.text) equal += 1;
      }
    }
  }

  ctx.log('chat: turn-5 time to first token, with and without the cached history');
  const gemmaTemplate = await read(GEMMA_TEMPLATE);
  const followup = await page.evaluate(async ({ url, template, rounds }) => {
    const gen = await wd.Generator.load(url, { backend: 'cpu', contextLength: 1024, chatTemplate: template });
    const questions = [
      'Tell me about the sea.', 'What lives in it?', 'Which of those is the largest?',
      'How long does it live?', 'Summarize our conversation.',
    ];
    const ttft = async (messages) => {
      const t0 = performance.now();
      const stream = await gen.chat.completions.create({ messages, max_tokens: 16, temperature: 0, stream: true });
      let first = null;
      let usage = null;
      for await (const chunk of stream) {
        if (first === null && chunk.choices[0]?.delta?.content) first = performance.now() - t0;
        usage = stream.usage;
      }
      return { ms: first ?? performance.now() - t0, usage };
    };
    const results = [];
    for (let r = 0; r < rounds; r++) {
      await gen.reset();
      const messages = [];
      for (const q of questions.slice(0, 4)) {
        messages.push({ role: 'user', content: q });
        const c = await gen.chat.completions.create({ messages, max_tokens: 16, temperature: 0 });
        messages.push({ role: 'assistant', content: c.choices[0].message.content });
      }
      messages.push({ role: 'user', content: questions[4] });
      const reuse = await ttft(messages);
      await gen.reset();
      const fresh = await ttft(messages);
      results.push({ reuse, fresh });
    }
    gen.destroy();
    return results;
  }, { url: MODEL_URL, template: gemmaTemplate, rounds: ROUNDS });

  ctx.log(`chat: structured output, ${JSON_SCHEMAS} random schemas and the decode rate with and without one`);
  const schemas = randomSchemas(0x5eed0031, JSON_SCHEMAS, JSON_BUDGET_BYTES);
  const structured = await page.evaluate(async ({ url, template, schemas, rounds }) => {
    const gen = await wd.Generator.load(url, { backend: 'cpu', contextLength: 1024, chatTemplate: template });
    const messages = [{ role: 'user', content: 'Reply with a JSON object.' }];
    const outputs = [];
    // The compiler is built by the first structured request: time one request twice.
    const once = async () => {
      const t0 = performance.now();
      await gen.chat.completions.create({ messages, response_format: { type: 'json_object' }, max_tokens: 1, temperature: 0 });
      return performance.now() - t0;
    };
    const compilerMs = (await once()) - (await once());
    for (const [i, schema] of schemas.entries()) {
      const c = await gen.chat.completions.create({
        messages, response_format: { type: 'json_schema', json_schema: { name: `s${i}`, schema } },
        max_tokens: 400, temperature: i % 2 ? 0.8 : 0, seed: i,
      });
      outputs.push({ content: c.choices[0].message.content, finish: c.choices[0].finish_reason, maskMs: c.usage.extra.grammar_mask_ms_per_token });
    }
    // Decode rate: a schema whose value is long (an array of up to 40 short strings) vs none.
    const long = { type: 'object', properties: { words: { type: 'array', items: { type: 'string', maxLength: 12 }, minItems: 40, maxItems: 40 } }, required: ['words'], additionalProperties: false };
    const rates = [];
    for (let r = 0; r < rounds; r++) {
      const withSchema = await gen.chat.completions.create({ messages: [{ role: 'user', content: 'List forty words.' }], response_format: { type: 'json_schema', json_schema: { name: 'long', schema: long } }, max_tokens: 64, temperature: 0 });
      const plain = await gen.chat.completions.create({ messages: [{ role: 'user', content: 'List forty words.' }], max_tokens: 64, temperature: 0 });
      rates.push({ schema: withSchema.usage.extra.decode_tokens_per_s, plain: plain.usage.extra.decode_tokens_per_s, tokens: [withSchema.usage.completion_tokens, plain.usage.completion_tokens] });
    }
    gen.destroy();
    return { outputs, compilerMs, rates };
  }, { url: MODEL_URL, template: gemmaTemplate, schemas, rounds: ROUNDS });
  let valid = 0;
  let cut = 0;
  structured.outputs.forEach((o, i) => {
    if (o.finish === 'length') cut += 1;
    if (o.finish !== 'stop') return;
    try {
      const ajv = new Ajv2020({ strict: false });
      addFormats(ajv);
      if (ajv.compile(schemas[i])(JSON.parse(o.content))) valid += 1;
      else ctx.log(`chat: schema ${i} invalid: ${o.content}`);
    } catch (e) {
      ctx.log(`chat: schema ${i}: ${e.message}: ${o.content}`);
    }
  });
  const decodeRatios = structured.rates.map((r) => r.schema / r.plain);
  ctx.log(`chat: decode rates ${JSON.stringify(structured.rates)}`);

  const ratios = followup.map((r) => r.reuse.ms / r.fresh.ms);
  const last = followup.at(-1);
  return {
    json_schema_valid_fraction: valid / schemas.length,
    json_schema_count: schemas.length,
    json_schema_length_cut: cut,
    json_schema_invalid: schemas.length - valid - cut,
    json_mask_ms_per_token_cpu: median(structured.outputs.map((o) => o.maskMs).filter((m) => m !== undefined)),
    json_compiler_ms: structured.compilerMs,
    json_decode_tps_schema: median(structured.rates.map((r) => r.schema)),
    json_decode_tps_plain: median(structured.rates.map((r) => r.plain)),
    json_decode_ratio_cpu: median(decodeRatios),
    json_decode_ratio_cpu_spread: spread(decodeRatios),
    chat_template_equal_fraction: equal / rendered,
    chat_template_renders: rendered,
    chat_template_refused_agree_fraction: refused ? refusedToo / refused : 1,
    chat_template_render_ms_mean: renders.meanMs,
    chat_followup_ttft_ms_reuse: median(followup.map((r) => r.reuse.ms)),
    chat_followup_ttft_ms_fresh: median(followup.map((r) => r.fresh.ms)),
    chat_followup_ttft_ratio: median(ratios),
    chat_followup_ttft_ratio_spread: spread(ratios),
    chat_followup_prompt_tokens: last.reuse.usage.prompt_tokens,
    chat_followup_cached_tokens: last.reuse.usage.prompt_tokens_details.cached_tokens,
  };
}
