// The Generate demo page (www/dist/generate.html, built by `npm run build:www`) on the real
// Gemma 3 270M GGUF served by nginx, on the CPU backend (WebGPU in the test Chromium is
// SwiftShader, seconds per token): it must load, show the backend and the weight stream, and a
// prompt typed into the box must stream the greedy continuation that llama.cpp and the float64
// reference agree on (tests/fixtures/gemma/greedy_reference.json) into the output, with the
// rates line filled. Stop must end a long generation early. The Chat section (with the llama.cpp
// Gemma template the page fetches for the base model) must show two turns whose replies equal
// the API's for the same conversation, the second reusing the cache. Saves
// pkg-tests/artifacts/generate.png.
import assert from 'node:assert/strict';
import { existsSync } from 'node:fs';
import { mkdir, readFile } from 'node:fs/promises';
import path from 'node:path';
import { test } from 'node:test';
import { useBrowserHarness } from './support/fixture.mjs';
import { REPO_ROOT } from './support/server.mjs';

const ARTIFACTS = path.join(REPO_ROOT, 'pkg-tests', 'artifacts');
const greedy = JSON.parse(await readFile(path.join(REPO_ROOT, 'tests/fixtures/gemma/greedy_reference.json'), 'utf8'));
const harness = useBrowserHarness();
const SLOW = { timeout: 480_000 };
const settled = () => ['ready', 'error'].includes(document.body.dataset.state);

test('Generate demo: a typed prompt streams the reference greedy text on the CPU backend', SLOW, async (t) => {
  assert.ok(existsSync(path.join(REPO_ROOT, 'www/dist/generate.html')), 'www/dist is missing: run `npm run build:www`');
  const demo = await harness.openPage(t, '/www/dist/generate.html?backend=cpu&context=256');
  await demo.page.waitForFunction(settled, undefined, { timeout: 300_000, polling: 250 });
  const loaded = await demo.evaluate(() => ({
    state: document.body.dataset.state,
    model: document.getElementById('model').textContent,
    weights: document.querySelector('#model .progress-text')?.textContent,
  }));
  assert.equal(loaded.state, 'ready', loaded.model);
  assert.match(loaded.model, /backend used\s*cpu/);
  assert.match(loaded.model, /architecture\s*gemma3/);
  assert.match(loaded.weights, /MB in [\d.]+ s/);

  const p = greedy.prompts[0];
  await demo.page.locator('#prompt').fill('');
  await demo.page.locator('#prompt').pressSequentially(p.text, { delay: 5 });
  await demo.page.locator('#max-tokens').fill(String(p.tokens.length));
  await demo.page.locator('#temperature').fill('0');
  await demo.page.locator('#run').click();
  await demo.page.waitForFunction(() => document.body.dataset.state === 'generating', undefined, { timeout: 10_000 }).catch(() => {});
  await demo.page.waitForFunction(() => document.body.dataset.state === 'ready', undefined, { timeout: 300_000, polling: 250 });
  const out = await demo.evaluate(() => ({
    output: document.getElementById('output').textContent,
    echo: document.querySelector('#output .prompt-echo')?.textContent,
    rates: document.getElementById('rates').textContent,
  }));
  assert.equal(out.echo, p.text);
  assert.equal(out.output.slice(out.echo.length), p.continuation, 'the streamed text is the reference greedy continuation');
  assert.match(out.rates, /prefill \d+ tokens/);
  assert.match(out.rates, /ended: length/);
  t.diagnostic(out.rates);

  // Stop ends a long generation early.
  await demo.page.locator('#max-tokens').fill('200');
  await demo.page.locator('#run').click();
  await demo.page.waitForFunction(() => document.getElementById('output').textContent.length > document.getElementById('prompt').value.length + 3, undefined, { timeout: 120_000 });
  const stopState = await demo.evaluate(() => ({ disabled: document.getElementById('stop').disabled, state: document.body.dataset.state }));
  t.diagnostic(`before stop: ${JSON.stringify(stopState)}`);
  await demo.evaluate(() => document.getElementById('stop').click());
  await demo.page.waitForFunction(() => document.body.dataset.state === 'ready', undefined, { timeout: 60_000 });
  const stopped = await demo.evaluate(() => window.generateDemo.generator.stats());
  t.diagnostic(`after stop: ${JSON.stringify(stopped)}`);
  assert.equal(stopped.finishReason, 'aborted');
  assert.ok(stopped.generatedTokens < 200, `stopped after ${stopped.generatedTokens} tokens`);

  // Chat: a typed message streams the assistant's reply into the list; the second turn reuses
  // the first's cache. Oracle: the same two-turn conversation through the API after reset().
  const chatReady = await demo.evaluate(() => document.getElementById('chat').dataset.state);
  assert.equal(chatReady, 'ready', await demo.evaluate(() => document.getElementById('chat-template-note').textContent));
  await demo.page.locator('#chat-max-tokens').fill('10');
  await demo.page.locator('#chat-temperature').fill('0');
  const turns = ['What is the capital of France?', 'And of Italy?'];
  for (const message of turns) {
    await demo.page.locator('#chat-input').fill(message);
    await demo.page.locator('#send').click();
    await demo.page.waitForFunction(() => document.body.dataset.state === 'generating', undefined, { timeout: 10_000 }).catch(() => {});
    await demo.page.waitForFunction(() => document.body.dataset.state === 'ready', undefined, { timeout: 120_000, polling: 250 });
  }
  const chat = await demo.evaluate(async (turns) => {
    const bubbles = [...document.querySelectorAll('#messages li')].map((li) => ({ role: li.className, text: li.querySelector('.content').textContent }));
    const rates = document.getElementById('chat-rates').textContent;
    const { generator } = window.generateDemo;
    await generator.reset();
    const messages = [];
    const replies = [];
    for (const content of turns) {
      messages.push({ role: 'user', content });
      const c = await generator.chat.completions.create({ messages, max_tokens: 10, temperature: 0 });
      replies.push(c.choices[0].message.content);
      messages.push({ role: 'assistant', content: c.choices[0].message.content });
    }
    return { bubbles, rates, replies };
  }, turns);
  t.diagnostic(`chat: ${JSON.stringify(chat.bubbles)} · ${chat.rates}`);
  assert.deepEqual(chat.bubbles.map((b) => b.role), ['user', 'assistant', 'user', 'assistant']);
  assert.deepEqual(chat.bubbles.filter((b) => b.role === 'user').map((b) => b.text), turns);
  assert.deepEqual(chat.bubbles.filter((b) => b.role === 'assistant').map((b) => b.text), chat.replies, 'the page shows the API\'s replies');
  const cached = Number(/(\d+) cached/.exec(chat.rates)?.[1]);
  assert.ok(cached > 10, `the second turn reused the first's cache: ${chat.rates}`);
  assert.match(chat.rates, /ended: length/);

  // The JSON toggle: the reply follows the page's schema and the page shows the parsed object.
  // Oracle: JSON.parse of the bubble's text, checked against the schema's required keys and types.
  await demo.page.locator('#json-mode summary').click();
  await demo.page.locator('#json-schema-on').check();
  await demo.page.locator('#chat-max-tokens').fill('80');
  await demo.page.locator('#chat-input').fill('Which city is the capital of Japan?');
  await demo.page.locator('#send').click();
  await demo.page.waitForFunction(() => document.querySelectorAll('#messages li').length === 6 && document.body.dataset.state === 'ready', undefined, { timeout: 180_000, polling: 250 });
  const json = await demo.evaluate(() => {
    const li = [...document.querySelectorAll('#messages li')].at(-1);
    return { text: li.querySelector('.content').textContent, parsed: li.querySelector('pre.parsed')?.textContent, rates: document.getElementById('chat-rates').textContent };
  });
  t.diagnostic(`json reply: ${json.text} · ${json.rates}`);
  const value = JSON.parse(json.text);
  assert.deepEqual(Object.keys(value), ['city', 'country', 'population']);
  assert.equal(typeof value.city, 'string');
  assert.ok(Number.isInteger(value.population) && value.population >= 0);
  assert.equal(json.parsed, JSON.stringify(value, null, 2), 'the page shows the parsed object');
  assert.match(json.rates, /ended: stop · grammar [\d.]+ ms\/token/);

  await mkdir(ARTIFACTS, { recursive: true });
  await demo.page.screenshot({ path: path.join(ARTIFACTS, 'generate.png'), fullPage: true });
});
