// The demo's chat: a message list over generator.chat.completions.create (streamed chunks),
// with Stop (abort: finish_reason "abort"), New chat (reset), and the rates and cached-token
// count of each reply. The conversation is re-sent whole each turn, as an OpenAI client does;
// the generator feeds only what its KV cache lacks (usage.prompt_tokens_details.cached_tokens).
// With "Reply as JSON" on, the request carries response_format json_schema and the reply shows
// the parsed object (or why it is incomplete: a reply cut by max tokens).
import { el } from './dom.js';
import { describeError } from './model.js';

const number = (id) => {
  const v = Number(document.getElementById(id).value);
  return Number.isFinite(v) ? v : undefined;
};

/** Wires the chat section to `generator`; returns {send(text, options) -> reply}. */
export function startChat(generator, { setState }) {
  const list = document.getElementById('messages');
  const input = document.getElementById('chat-input');
  const send = document.getElementById('send');
  const stop = document.getElementById('chat-stop');
  const reset = document.getElementById('chat-reset');
  const rates = document.getElementById('chat-rates');
  const conversation = [];
  let running = null;

  const bubble = (role, text) => {
    const body = el('span', { className: 'content' }, text);
    list.append(el('li', { className: role }, el('span', { className: 'role' }, role), body));
    return body;
  };

  async function turn(text, options = {}) {
    running = new AbortController();
    setState('generating');
    send.disabled = true;
    reset.disabled = true;
    stop.disabled = false;
    conversation.push({ role: 'user', content: text });
    bubble('user', text);
    const body = bubble('assistant', '');
    let content = '';
    let finish = null;
    let usage = null;
    let error = null;
    try {
      const stream = await generator.chat.completions.create({
        messages: conversation,
        stream: true,
        stream_options: { include_usage: true },
        signal: running.signal,
        ...options,
      });
      for await (const chunk of stream) {
        const choice = chunk.choices[0];
        if (choice?.delta?.content) {
          content += choice.delta.content;
          body.textContent = content;
        }
        if (choice?.finish_reason) finish = choice.finish_reason;
        if (chunk.usage) usage = chunk.usage;
      }
      usage ??= stream.usage;
    } catch (e) {
      error = e;
      conversation.pop();
      body.textContent = `(${describeError(e)})`;
      rates.textContent = `Chat failed: ${describeError(e)}`;
    }
    if (!error) {
      conversation.push({ role: 'assistant', content });
      if (options.response_format) {
        let shown;
        try {
          shown = JSON.stringify(JSON.parse(content), null, 2);
        } catch (e) {
          shown = `(not a complete value: ${finish === 'length' ? 'cut by max tokens' : e.message})`;
        }
        body.parentElement.append(el('pre', { className: 'parsed' }, shown));
      }
      const x = usage.extra;
      rates.textContent = `prompt ${usage.prompt_tokens} tokens, ${usage.prompt_tokens_details.cached_tokens} cached · ` +
        `first token ${(x.time_to_first_token_s * 1000).toFixed(0)} ms · ${usage.completion_tokens} tokens, ` +
        `${Number.isFinite(x.decode_tokens_per_s) ? x.decode_tokens_per_s.toFixed(1) : '–'} tokens/s · ended: ${finish}` +
        (x.grammar_mask_ms_per_token === undefined ? '' : ` · grammar ${x.grammar_mask_ms_per_token.toFixed(2)} ms/token`);
    }
    running = null;
    send.disabled = false;
    reset.disabled = false;
    stop.disabled = true;
    setState('ready');
    return { content, finish, usage, error: error ? String(error.message ?? error) : null };
  }

  send.onclick = () => {
    const text = input.value.trim();
    if (!text) return;
    input.value = '';
    const options = { max_tokens: number('chat-max-tokens'), temperature: number('chat-temperature') };
    if (document.getElementById('json-schema-on').checked) {
      let schema;
      try {
        schema = JSON.parse(document.getElementById('json-schema').value);
      } catch (e) {
        rates.textContent = `The schema is not JSON: ${e.message}`;
        return;
      }
      options.response_format = { type: 'json_schema', json_schema: { name: 'reply', schema } };
    }
    turn(text, options);
  };
  input.onkeydown = (e) => {
    if (e.key === 'Enter' && !e.shiftKey && !send.disabled) {
      e.preventDefault();
      send.onclick();
    }
  };
  stop.onclick = () => running?.abort();
  reset.onclick = async () => {
    conversation.length = 0;
    list.replaceChildren();
    rates.textContent = '';
    await generator.reset();
  };
  input.disabled = false;
  send.disabled = false;
  reset.disabled = false;
  document.getElementById('chat').dataset.state = 'ready';
  return { send: turn, conversation };
}
