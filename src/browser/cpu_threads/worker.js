// One worker of the CPU thread pool (pool.js): instantiates the kernel module against the
// pool's shared memory with its own stack, then runs the shares it is given until told to
// exit. Idle, it spins briefly (a share usually follows the last within microseconds during
// an execute) and then sleeps in Atomics.wait, so a parked pool costs no CPU.

const SPINS_BEFORE_WAIT = 20000;

self.onmessage = ({ data }) => {
  self.onmessage = null;
  let kernels;
  let words;
  try {
    const instance = new WebAssembly.Instance(data.module, { env: { memory: data.memory } });
    kernels = instance.exports;
    // The stack grows down from the top of this worker's region.
    kernels.__stack_pointer.value = data.stack + data.stackBytes;
    words = new Int32Array(data.memory.buffer, data.control, data.words.count);
  } catch (error) {
    self.postMessage({ error: String(error?.message ?? error) });
    return;
  }
  const { SEQUENCE, DONE, KIND, RESULT, STATUS, ARGS } = data.words;
  // kind -> [export, argument count]: the table is the pool's (pool.js ENTRIES).
  const entries = new Map(Object.entries(data.entries).map(([kind, [name, count]]) => [Number(kind), [kernels[name], count]]));
  const status = data.control + 4 * STATUS;
  self.postMessage('ready');
  let seen = 0;
  for (;;) {
    let spins = 0;
    while (Atomics.load(words, SEQUENCE) === seen && spins < SPINS_BEFORE_WAIT) spins++;
    if (Atomics.load(words, SEQUENCE) === seen) Atomics.wait(words, SEQUENCE, seen);
    seen = Atomics.load(words, SEQUENCE);
    const kind = words[KIND];
    let result;
    try {
      const entry = entries.get(kind);
      if (!entry) {
        // KIND_EXIT: acknowledged, so the pool may give this worker's stack to another.
        Atomics.store(words, DONE, seen);
        break;
      }
      const [kernel, count] = entry;
      result = kernel(...words.subarray(ARGS, ARGS + count), status);
    } catch {
      result = 2; // a trap: a bug in a kernel, reported as such by the pool
    }
    words[RESULT] = result;
    Atomics.store(words, DONE, seen);
    Atomics.notify(words, DONE);
  }
  self.close();
};
