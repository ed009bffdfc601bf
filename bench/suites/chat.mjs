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
// Not measured yet (structured output is not built): json_schema_valid_fraction,
// json_mask_ms_per_token_cpu, json_decode_ratio_cpu.
import { readFile } from 'node:fs/promises';
import path from 'node:path';
import { median, spread } from '../lib/stats.mjs';

const MODEL_URL = '/.cache/models/gemma-3-270m/gemma-3-270m-q4_k_m.gguf';
const TEMPLATES = '.cache/chat-templates';
const GEMMA_TEMPLATE = `${TEMPLATES}/templates/google-gemma-2-2b-it.jinja`;
const ROUNDS = Number(process.env.BENCH_CHAT_ROUNDS ?? 3);

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

  const ratios = followup.map((r) => r.reuse.ms / r.fresh.ms);
  const last = followup.at(-1);
  return {
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
