// The body of one persistent-cache entry, filled by the load chunk by chunk as it reads the
// response, instead of ReadableStream.tee() (whose slower branch queues without limit: up to a
// whole response). The Cache API reads this stream; when it falls `highWaterMark` bytes behind,
// push() returns a promise the load awaits before it reads on, so at most that many bytes (plus
// the chunk just pushed) wait here per response. The chunks are the load's own Uint8Arrays
// (copies of them when the load reads into a reused buffer).
export function makeCacheWriter(highWaterMark) {
  let controller = null;
  let waiting = null;
  let done = false;
  const wake = () => {
    if (waiting) {
      const resolve = waiting;
      waiting = null;
      resolve();
    }
  };
  const stream = new ReadableStream({
    start(c) { controller = c; },
    pull() { wake(); },
    cancel() { done = true; wake(); },
  }, new ByteLengthQueuingStrategy({ highWaterMark }));
  return {
    stream,
    /** Queues `chunk`; a promise when the reader is behind (resolves when it catches up). */
    push(chunk) {
      if (done) return undefined;
      controller.enqueue(chunk);
      if (controller.desiredSize > 0) return undefined;
      return new Promise((resolve) => { waiting = resolve; });
    },
    /** The response was read to its end: the entry is complete. */
    close() {
      if (done) return;
      done = true;
      controller.close();
      wake();
    },
    /** The response was not read to its end: the entry must not be stored. */
    fail(reason) {
      if (done) return;
      done = true;
      controller.error(new Error(reason));
      wake();
    },
  };
}
