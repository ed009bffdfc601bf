// `generate()`'s result: an async iterator (and iterable) over a wasm GenerationStream, so
// `for await (const piece of generator.generate(prompt))` works; breaking out of the loop calls
// `return()`, which ends the generation and frees the generator for the next call.
export function asyncIterable(stream) {
  return {
    next: () => stream.next(),
    return: (value) => stream.finish().then(() => ({ done: true, value })),
    [Symbol.asyncIterator]() {
      return this;
    },
    get finishReason() {
      return stream.finishReason;
    },
  };
}

// OpenAI's finish_reason for a generation's own reason ("eos", "stop", "length", "context",
// "aborted", ...); null while it runs.
function chatFinish(reason) {
  switch (reason) {
    case 'eos':
    case 'stop':
      return 'stop';
    case 'length':
    case 'context':
      return 'length';
    case 'aborted':
      return 'abort';
    default:
      return reason ?? null;
  }
}

let completionCount = 0;

function completionId() {
  const random = globalThis.crypto?.randomUUID?.().replaceAll('-', '') ?? `${Date.now()}`;
  completionCount += 1;
  return `chatcmpl-${random.slice(0, 24)}${completionCount}`;
}

// `create({stream: true})`'s result: chat.completion.chunk objects over a wasm GenerationStream
// (see chat.rs). Empty pieces (a character or a stop string still incomplete) are not sent.
// An aborted signal ends the stream with finish_reason "abort" (not a rejection), as WebLLM's
// interrupted streams do; any other failure rejects next().
export function chatChunks(stream, meta) {
  const id = completionId();
  const created = Math.floor(Date.now() / 1000);
  const chunk = (choices, extra) => ({
    id,
    object: 'chat.completion.chunk',
    created,
    model: meta.model,
    choices,
    ...extra,
  });
  const choice = (delta, finishReason) => [
    { index: 0, delta, finish_reason: finishReason, logprobs: null },
  ];
  // 0: role not sent; 1: streaming text; 2: finish sent; 3: over.
  let phase = 0;
  let finishReason = null;
  const iterator = {
    async next() {
      if (phase === 0) {
        phase = 1;
        return { done: false, value: chunk(choice({ role: 'assistant', content: '' }, null)) };
      }
      while (phase === 1) {
        let result;
        try {
          result = await stream.next();
        } catch (error) {
          if (meta.signal?.aborted) {
            finishReason = 'abort';
            break;
          }
          phase = 3;
          throw error;
        }
        if (result.done) {
          finishReason = chatFinish(stream.finishReason) ?? 'stop';
          break;
        }
        if (result.value.text !== '') {
          return { done: false, value: chunk(choice({ content: result.value.text }, null)) };
        }
      }
      if (phase === 1) {
        phase = 2;
        return { done: false, value: chunk(choice({}, finishReason)) };
      }
      if (phase === 2) {
        phase = 3;
        if (meta.includeUsage) {
          return { done: false, value: chunk([], { usage: stream.usage }) };
        }
      }
      return { done: true, value: undefined };
    },
    async return(value) {
      if (phase < 3) {
        phase = 3;
        await stream.finish();
      }
      return { done: true, value };
    },
    [Symbol.asyncIterator]() {
      return this;
    },
    // Not OpenAI's: the counts so far (also after the stream ends).
    get usage() {
      return stream.usage;
    },
  };
  return iterator;
}

// `create()`'s result without `stream`: the whole completion.
export async function chatCompletion(stream, meta) {
  const chunks = chatChunks(stream, { ...meta, includeUsage: false });
  let content = '';
  let finishReason = null;
  let id;
  let created;
  for await (const c of chunks) {
    id = c.id;
    created = c.created;
    const choice = c.choices[0];
    if (choice?.delta?.content) content += choice.delta.content;
    if (choice?.finish_reason) finishReason = choice.finish_reason;
  }
  return {
    id,
    object: 'chat.completion',
    created,
    model: meta.model,
    choices: [
      {
        index: 0,
        message: { role: 'assistant', content },
        finish_reason: finishReason,
        logprobs: null,
      },
    ],
    usage: chunks.usage,
  };
}
