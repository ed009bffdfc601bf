// Chat on the Generator (OpenAI's chat.completions.create) in headless Chromium through the
// built package, on the CPU backend, with the real Gemma 3 270M Q4_K_M GGUF from nginx. The
// setup's GGUF is the base model and carries no chat template, so the Gemma template from the
// llama.cpp sources (models/templates/google-gemma-2-2b-it.jinja, fetched at setup into
// .cache/chat-templates; the same turn format as Gemma 3's) is passed as `chatTemplate`.
// Oracles:
// - the rendered prompt: Python jinja2 through transformers' own render_jinja_template
//   (.cache/venv-chat), with the vocabulary's special tokens;
// - the completion: `generateText` of that jinja2 prompt on the same model (greedy), so the
//   chat path (render, BOS rule, tokenization, end-of-turn) must give the very same text;
// - multi-turn: each turn's prompt is fed only past the cached tokens (usage counts them), and
//   the last turn's text equals a fresh run of the same conversation after reset().
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { readFile } from 'node:fs/promises';
import path from 'node:path';
import { test } from 'node:test';
import { useBrowserHarness } from './support/fixture.mjs';
import { REPO_ROOT } from './support/server.mjs';

const MODEL_URL = '/.cache/models/gemma-3-270m/gemma-3-270m-q4_k_m.gguf';
const TEMPLATE_PATH = '.cache/chat-templates/templates/google-gemma-2-2b-it.jinja';
const SPECIALS = { bos_token: '<bos>', eos_token: '<eos>', unk_token: '<unk>', pad_token: '<pad>' };
const harness = useBrowserHarness();
const SLOW = { timeout: 600_000 };

/** jinja2's render of `conversations` (transformers' render_jinja_template). */
function jinja2Render(template, conversations) {
  const script = `
import json, sys
from transformers.utils.chat_template_utils import render_jinja_template
args = json.load(sys.stdin)
out = [render_jinja_template(conversations=[c], chat_template=args["template"], add_generation_prompt=True, **args["specials"])[0][0] for c in args["conversations"]]
print(json.dumps(out))`;
  const out = execFileSync(path.join(REPO_ROOT, '.cache/venv-chat/bin/python'), ['-c', script], {
    input: JSON.stringify({ template, conversations, specials: SPECIALS }),
    stdio: ['pipe', 'pipe', 'ignore'],
  });
  return JSON.parse(out.toString());
}

test('CPU: chat completions render like jinja2, stream OpenAI chunks, reuse the cache across turns', SLOW, async (t) => {
  const template = await readFile(path.join(REPO_ROOT, TEMPLATE_PATH), 'utf8');
  const question = [{ role: 'user', content: 'What is the capital of France?' }];
  const [rendered] = jinja2Render(template, [question]);
  const page = await harness.openHarnessPage(t);
  const r = await page.evaluate(async ({ url, template, question, rendered }) => {
    const out = {};
    const gen = await wd.Generator.load(url, { backend: 'cpu', contextLength: 512, chatTemplate: template });
    out.applied = gen.applyChatTemplate(question);
    out.expectedText = await gen.generateText(rendered, { maxNewTokens: 12, addSpecial: false });
    out.expectedIds = Array.from(gen.tokenize(rendered, { addSpecial: false }));
    await gen.reset();
    out.completion = await gen.chat.completions.create({ messages: question, max_tokens: 12, temperature: 0 });
    // Streaming: the same text in chunks; the same prompt again is all cached but its last token.
    const chunks = [];
    const stream = await gen.chat.completions.create({
      messages: question, max_tokens: 12, temperature: 0, stream: true, stream_options: { include_usage: true },
    });
    for await (const c of stream) chunks.push(c);
    out.chunks = chunks;
    // Five turns: each adds the model's reply and a new question.
    const questions = ['Name a color.', 'And a fruit?', 'Which one is sweeter?', 'Say it in French.', 'Thanks, bye.'];
    const conversation = [];
    out.turns = [];
    for (const q of questions) {
      conversation.push({ role: 'user', content: q });
      const c = await gen.chat.completions.create({ messages: conversation, max_tokens: 8, temperature: 0 });
      out.turns.push({ usage: c.usage, content: c.choices[0].message.content, finish: c.choices[0].finish_reason });
      conversation.push({ role: 'assistant', content: c.choices[0].message.content });
    }
    conversation.pop();
    await gen.reset();
    const fresh = await gen.chat.completions.create({ messages: conversation, max_tokens: 8, temperature: 0 });
    out.fresh = { usage: fresh.usage, content: fresh.choices[0].message.content };
    // Sampling is seeded: the same seed twice gives the same text.
    const sampled = (seed) => gen.chat.completions.create({ messages: question, max_tokens: 10, temperature: 1, top_p: 0.9, seed });
    out.seeded = [(await sampled(7)).choices[0].message.content, (await sampled(7)).choices[0].message.content];
    // A stop string ends the text before it with finish_reason "stop".
    const stopAt = out.expectedText.slice(3, 7);
    out.stopAt = stopAt;
    out.stopped = await gen.chat.completions.create({ messages: question, max_tokens: 12, temperature: 0, stop: stopAt });
    // Abort after the second text chunk: the stream ends with finish_reason "abort".
    const controller = new AbortController();
    const aborted = [];
    for await (const c of await gen.chat.completions.create({ messages: question, max_tokens: 30, temperature: 0, stream: true, signal: controller.signal })) {
      aborted.push(c);
      if (aborted.filter((x) => x.choices[0]?.delta?.content).length === 2) controller.abort();
    }
    out.aborted = aborted;
    out.afterAbort = (await gen.chat.completions.create({ messages: question, max_tokens: 3, temperature: 0 })).choices[0].message.content;
    // Bad requests reject with coded errors and leave the generator usable.
    out.errors = {
      empty: await capture(() => gen.chat.completions.create({ messages: [] })),
      notArray: await capture(() => gen.chat.completions.create({ messages: 'hi' })),
      noRole: await capture(() => gen.chat.completions.create({ messages: [{ content: 'hi' }] })),
      system: await capture(() => gen.chat.completions.create({ messages: [{ role: 'system', content: 'x' }, ...question] })),
      format: await capture(() => gen.chat.completions.create({ messages: question, response_format: { type: 'xml' } })),
      temperature: await capture(() => gen.chat.completions.create({ messages: question, temperature: 3 })),
      n: await capture(() => gen.chat.completions.create({ messages: question, n: 2 })),
    };
    out.afterErrors = (await gen.chat.completions.create({ messages: question, max_tokens: 3, temperature: 0 })).choices[0].message.content;
    gen.destroy();
    out.afterDestroy = await capture(() => gen.chat.completions.create({ messages: question }));
    // The setup's base GGUF has no template: chat says so; a template that does not compile fails the load.
    const plain = await wd.Generator.load(url, { backend: 'cpu', contextLength: 64 });
    out.noTemplate = await capture(() => plain.chat.completions.create({ messages: question }));
    out.noTemplateApply = await capture(() => plain.applyChatTemplate(question));
    plain.destroy();
    out.badTemplate = await capture(() => wd.Generator.load(url, { backend: 'cpu', contextLength: 64, chatTemplate: 'a\n{% for %}' }));
    return out;
  }, { url: MODEL_URL, template, question, rendered });

  assert.equal(r.applied, rendered, 'applyChatTemplate equals jinja2');
  const c = r.completion;
  assert.equal(c.object, 'chat.completion');
  assert.match(c.id, /^chatcmpl-/);
  assert.equal(c.choices.length, 1);
  assert.equal(c.choices[0].message.role, 'assistant');
  assert.equal(c.choices[0].message.content, r.expectedText, 'chat text = generateText of the jinja2 prompt');
  assert.equal(c.choices[0].finish_reason, 'length');
  assert.equal(c.usage.prompt_tokens, r.expectedIds.length);
  assert.equal(c.usage.completion_tokens, 12);
  assert.equal(c.usage.total_tokens, r.expectedIds.length + 12);
  assert.equal(c.usage.prompt_tokens_details.cached_tokens, 0, 'after reset nothing is cached');

  const chunks = r.chunks;
  assert.ok(chunks.every((x) => x.object === 'chat.completion.chunk' && x.id === chunks[0].id));
  assert.deepEqual(chunks[0].choices[0].delta, { role: 'assistant', content: '' });
  const finish = chunks.at(-2).choices[0];
  assert.equal(finish.finish_reason, 'length');
  assert.deepEqual(chunks.at(-1).choices, [], 'the usage chunk has no choices');
  const usage = chunks.at(-1).usage;
  assert.equal(usage.prompt_tokens_details.cached_tokens, r.expectedIds.length - 1, 'the same prompt again: all but its last token cached');
  assert.equal(chunks.map((x) => x.choices[0]?.delta?.content ?? '').join(''), r.expectedText, 'streamed text = completion text');
  assert.ok(chunks.slice(1, -2).every((x) => x.choices[0].delta.content.length > 0 && x.choices[0].finish_reason === null));

  // Each later turn feeds only what the cache lacks: at least the whole previous prompt is cached.
  let fed = 0;
  r.turns.forEach((turn, i) => {
    const u = turn.usage;
    fed += u.prompt_tokens - u.prompt_tokens_details.cached_tokens;
    t.diagnostic(`turn ${i + 1}: prompt ${u.prompt_tokens}, cached ${u.prompt_tokens_details.cached_tokens}, completion ${u.completion_tokens}: ${JSON.stringify(turn.content)}`);
    if (i > 0) assert.ok(u.prompt_tokens_details.cached_tokens >= r.turns[i - 1].usage.prompt_tokens, `turn ${i + 1} reuses the previous prompt`);
  });
  const last = r.turns.at(-1).usage;
  t.diagnostic(`5 turns fed ${fed} prompt tokens for a last prompt of ${last.prompt_tokens} (without reuse: ${r.turns.reduce((s, x) => s + x.usage.prompt_tokens, 0)})`);
  assert.ok(fed < last.prompt_tokens + 5 * 8, 'history tokens are fed about once');
  assert.equal(r.fresh.usage.prompt_tokens_details.cached_tokens, 0);
  assert.equal(r.fresh.usage.prompt_tokens, last.prompt_tokens);
  assert.equal(r.fresh.content, r.turns.at(-1).content, 'the reused cache gives the tokens a fresh run gives');

  assert.equal(r.seeded[0], r.seeded[1], 'same seed, same text');
  assert.equal(r.stopped.choices[0].finish_reason, 'stop');
  assert.equal(r.stopped.choices[0].message.content, r.expectedText.slice(0, r.expectedText.indexOf(r.stopAt)));
  assert.equal(r.aborted.at(-1).choices[0].finish_reason, 'abort');
  assert.equal(r.aborted.filter((x) => x.choices[0]?.delta?.content).length, 2, 'no text after the abort');
  assert.equal(r.afterAbort, r.expectedText.slice(0, r.afterAbort.length));

  for (const key of ['empty', 'notArray', 'noRole', 'system', 'temperature']) {
    assert.equal(r.errors[key].ok, false, key);
    assert.equal(r.errors[key].error.code, 'InvalidArgument', `${key}: ${JSON.stringify(r.errors[key].error)}`);
  }
  assert.match(r.errors.system.error.message, /System role not supported/);
  assert.match(r.errors.system.error.message, /chat template line \d+/);
  assert.equal(r.errors.format.error.code, 'InvalidArgument');
  assert.match(r.errors.format.error.message, /response_format\.type "xml"/);
  assert.equal(r.errors.n.error.code, 'NotSupported');
  assert.equal(r.afterErrors, r.expectedText.slice(0, r.afterErrors.length));
  assert.equal(r.afterDestroy.error.code, 'InvalidState');
  assert.equal(r.noTemplate.error.code, 'NotFound');
  assert.match(r.noTemplate.error.message, /chatTemplate/);
  assert.equal(r.noTemplateApply.error.code, 'NotFound');
  assert.equal(r.badTemplate.error.code, 'InvalidArgument');
  assert.match(r.badTemplate.error.message, /chat template line 2/);
});
