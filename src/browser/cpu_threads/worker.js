// One worker of the CPU thread pool (pool.js): instantiates the kernel module against the
// pool's shared memory with its own stack, then runs the tasks it is given (a share of a GEMM,
// or taking pieces of a claimed op) until told to exit. Idle, it spins briefly (a share usually follows the last within microseconds during
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
  const { SEQUENCE, DONE, KIND, RESULT, STATUS, ARGS, CLAIM, claim: C } = data.words;
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
    const entry = kind === CLAIM ? null : entries.get(kind);
    if (kind !== CLAIM && !entry) {
      // KIND_EXIT: acknowledged, so the pool may give this worker's stack to another.
      Atomics.store(words, DONE, seen);
      break;
    }
    let result;
    try {
      if (kind === CLAIM) {
        result = takePieces(data.memory, words[ARGS], words[ARGS + 1], entries, status, C, data.index);
      } else {
        const [kernel, count] = entry;
        result = kernel(...words.subarray(ARGS, ARGS + count), status);
      }
    } catch {
      result = 2; // a trap: a bug in a kernel, reported as such by the pool
    }
    words[RESULT] = result;
    Atomics.store(words, DONE, seen);
    Atomics.notify(words, DONE);
  }
  self.close();
};

// Takes pieces of the claimed op at the claim block `at` while it is still of `generation`
// (pool.js's protocol): claims the next piece with a compare-exchange on the block's state, runs
// it, counts it done. A failure is recorded once in the block (with this worker's index) and
// ends this worker's part. Returns 0.
function takePieces(memory, at, generation, entries, status, C, index) {
  const block = new Int32Array(memory.buffer, at, C.WORDS);
  for (;;) {
    const state = Atomics.load(block, C.STATE);
    if (state >>> 16 !== generation) return 0;
    const piece = state & 0xffff;
    if (piece >= block[C.PIECES]) return 0;
    if (Atomics.compareExchange(block, C.STATE, state, state + 1) !== state) continue;
    // Claimed: the op's table stays as it is until every piece is done.
    const [kernel] = entries.get(block[C.KIND]);
    const argc = block[C.ARGC];
    const args = new Int32Array(memory.buffer, block[C.TABLE] + 4 * piece * argc, argc);
    let result;
    try {
      result = kernel(...args, status);
    } catch {
      result = 2; // a trap
    }
    if (result !== 0 && Atomics.compareExchange(block, C.RESULT, 0, result) === 0) block[C.WHO] = index;
    Atomics.add(block, C.DONE, 1);
    if (result !== 0) return 0;
  }
}
