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
