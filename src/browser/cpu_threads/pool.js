// The CPU backend's worker pool: one shared WebAssembly.Memory, the kernel module
// (webdelegate_kernels.wasm, the no_std crate in kernels/) instantiated once on this thread and
// once in each dedicated worker against that memory, and the work of one op split by rows
// between them. Shipped in the npm package as cpu-threads/pool.js; hand a started pool to the
// runtime with `useCpuThreads(pool)`, and CPU programs initialised after that keep their
// weights in the shared memory and run their products on every thread.
//
// Protocol: each worker owns a 128-byte control block in the shared memory (words: 0 task
// sequence, 1 done sequence, 2 kind, 3 result, 4..5 an error's message, 8.. arguments). The caller
// writes a task's arguments, bumps the sequence and notifies; the worker wakes
// (Atomics.wait: no CPU while idle, after a short spin), runs it, stores the done sequence and
// notifies. The page's main thread may not Atomics.wait, so the caller waits by spinning, up to
// `taskTimeoutMs`; a worker that dies or hangs makes the op fail with an error, marks the pool
// broken (`brokenReason`) and leaves the caller to run on one thread.
//
// Most ops are claimed, not assigned (`claimed`): the op is cut into more pieces than threads
// (PIECES_PER_THREAD each), their arguments written to a table in the shared memory, and every
// participant, the caller included, takes the next unclaimed piece until none is left
// (Atomics.compareExchange on a word holding the op's generation and the next piece, so a
// worker that wakes late can never take a piece of a later op). The caller waits for the
// pieces to be done, not for the workers: a worker the OS has taken its core from holds an op
// up by at most the piece it is in, and one that had not started yet by nothing (it finds no
// piece when it wakes). Only a worker that finished its last task is given a new one. Each
// output row, element or product is computed by the same kernel call whichever thread takes
// its piece, so results do not depend on who ran what. The GEMMs (packing scratch per thread)
// keep one share per thread (`run`).
//
// Whether the workers take part at all is decided op by op (participation.js): when sharing
// stops paying (another program holds a core and descheduled workers hold pieces up), ops run
// on the caller alone for a stretch and the pool then probes again.

import { Participation } from './participation.js';

const PAGE = 65536;
const STACK_BYTES = 1 << 20;
const CONTROL_BYTES = 128;
// Words of a control block.
const SEQUENCE = 0;
const DONE = 1;
const KIND = 2;
const RESULT = 3;
const STATUS = 4; // and 5: an error's message address and length
const ARGS = 8;
const KIND_EXIT = 0;
const KIND_GEMM = 1;
const KIND_DOT_ROWS = 2;
const KIND_GEMM_BATCHES = 3;
const KIND_UNARY = 4;
const KIND_SOFTMAX = 5;
const KIND_BINARY = 6;
const KIND_SCALE = 7;
const KIND_LAYER_NORM = 8;
const KIND_PERMUTE = 9;
const KIND_DOT_ROWS_INT8 = 10;
const KIND_QUANTIZE_ROWS = 11;
// A worker task: take pieces of the claimed op at the block `args[0]`, of generation `args[1]`.
const KIND_CLAIM = 12;
// Words of the claim block.
const CLAIM_STATE = 0; // generation << 16 | next piece
const CLAIM_DONE = 1; // pieces finished
const CLAIM_PIECES = 2;
const CLAIM_KIND = 3;
const CLAIM_ARGC = 4;
const CLAIM_TABLE = 5;
const CLAIM_RESULT = 6; // the first failure's result (0: none)
const CLAIM_WHO = 7; // and who failed: 0 this thread, i worker i
const CLAIM_WORDS = 8;
const CLAIM_LAYOUT = { STATE: CLAIM_STATE, DONE: CLAIM_DONE, PIECES: CLAIM_PIECES, KIND: CLAIM_KIND, ARGC: CLAIM_ARGC, TABLE: CLAIM_TABLE, RESULT: CLAIM_RESULT, WHO: CLAIM_WHO, WORDS: CLAIM_WORDS };
// Pieces per participating thread of a claimed op (at most 0xffff in all).
const PIECES_PER_THREAD = 4;
// What each kind runs, on this thread and in the workers: the kernel module's export and its
// argument count (the status address follows the arguments).
const ENTRIES = {
  [KIND_GEMM]: ['wd_gemm', 14],
  [KIND_DOT_ROWS]: ['wd_dot_rows', 9],
  [KIND_GEMM_BATCHES]: ['wd_gemm_batches', 14],
  [KIND_UNARY]: ['wd_unary', 4],
  [KIND_SOFTMAX]: ['wd_softmax', 8],
  [KIND_BINARY]: ['wd_binary', 5],
  [KIND_SCALE]: ['wd_scale', 5],
  [KIND_LAYER_NORM]: ['wd_layer_norm', 7],
  [KIND_PERMUTE]: ['wd_permute', 12],
  [KIND_DOT_ROWS_INT8]: ['wd_dot_rows_int8', 9],
  [KIND_QUANTIZE_ROWS]: ['wd_quantize_rows', 6],
};
const ALIGN = 64;
// Rows of the GEMM's register tile (kernels/src/gemm.rs `MR`): shares start on its multiples.
const GEMM_ROW_TILE = 2;

/** Why this page cannot run wasm threads, or null when it can. */
export function cpuThreadsUnavailable() {
  if (typeof SharedArrayBuffer === 'undefined' || !globalThis.crossOriginIsolated) {
    return 'the page is not cross-origin isolated (it needs Cross-Origin-Opener-Policy: same-origin and Cross-Origin-Embedder-Policy: require-corp), so there is no shared memory for threads';
  }
  if (typeof Worker === 'undefined') return 'this context cannot start workers';
  return null;
}

/** The default thread count: min(4, navigator.hardwareConcurrency). */
export function defaultCpuThreads() {
  const cores = globalThis.navigator?.hardwareConcurrency ?? 1;
  return Math.max(1, Math.min(4, cores));
}

/** A first-fit allocator over [start, end) of the shared memory, growing it on demand. */
class Regions {
  constructor(memory, start) {
    this.memory = memory;
    this.free = [{ at: start, size: memory.buffer.byteLength - start }];
    this.used = new Map();
  }

  alloc(bytes) {
    const size = Math.max(ALIGN, Math.ceil(bytes / ALIGN) * ALIGN);
    for (;;) {
      for (let i = 0; i < this.free.length; i++) {
        const block = this.free[i];
        if (block.size >= size) {
          const at = block.at;
          block.at += size;
          block.size -= size;
          if (block.size === 0) this.free.splice(i, 1);
          this.used.set(at, size);
          return at;
        }
      }
      // Grow by what the free block at the end (if any) lacks, not by the whole size.
      const before = this.memory.buffer.byteLength;
      const last = this.free.at(-1);
      const tail = last && last.at + last.size === before ? last.size : 0;
      const pages = Math.ceil((size - tail) / PAGE);
      try {
        this.memory.grow(pages);
      } catch (error) {
        throw new RangeError(`the CPU thread pool's shared memory cannot grow by ${pages * PAGE} bytes past ${before} (${error.message})`);
      }
      this.release(before, pages * PAGE);
    }
  }

  dealloc(at) {
    const size = this.used.get(at);
    if (size === undefined) return;
    this.used.delete(at);
    this.release(at, size);
  }

  release(at, size) {
    let i = this.free.findIndex((block) => block.at > at);
    if (i < 0) i = this.free.length;
    this.free.splice(i, 0, { at, size });
    // Merge with the neighbours.
    const next = this.free[i + 1];
    if (next && at + size === next.at) {
      this.free[i].size += next.size;
      this.free.splice(i + 1, 1);
    }
    const previous = this.free[i - 1];
    if (previous && previous.at + previous.size === at) {
      previous.size += this.free[i].size;
      this.free.splice(i, 1);
    }
  }

  get bytesInUse() {
    let total = 0;
    for (const size of this.used.values()) total += size;
    return total;
  }
}

/** Splits `count` items into at most `parts` contiguous runs, each a multiple of `tile` but the last. */
function shares(count, parts, tile) {
  const runs = [];
  const per = Math.ceil(Math.ceil(count / parts) / tile) * tile;
  for (let start = 0; start < count; start += per) runs.push([start, Math.min(count, start + per)]);
  return runs;
}

export class CpuThreadPool {
  /**
   * Starts a pool of `threads` participants (this thread and `threads - 1` workers).
   * Rejects with the reason when the page cannot run threads or a worker fails to start.
   * `participation`: `false` shares every op with the workers; an object sets the adaptive
   * policy's settings (participation.js; the default adapts with its defaults).
   * @param {{threads?: number, kernelsUrl?: string|URL, workerUrl?: string|URL, taskTimeoutMs?: number, startTimeoutMs?: number, participation?: false|{window?: number, gain?: number, patience?: number, soloOps?: number, maxSoloOps?: number}}} [options]
   */
  static async start(options = {}) {
    const unavailable = cpuThreadsUnavailable();
    if (unavailable) throw new Error(unavailable);
    const threads = options.threads ?? defaultCpuThreads();
    if (!Number.isInteger(threads) || threads < 1 || threads > 64) {
      throw new RangeError(`threads must be an integer from 1 to 64, not ${threads}`);
    }
    const kernelsUrl = options.kernelsUrl ?? new URL('../webdelegate_kernels.wasm', import.meta.url);
    const response = await fetch(kernelsUrl);
    if (!response.ok) throw new Error(`the kernel module ${kernelsUrl} answered HTTP ${response.status}`);
    const module = await WebAssembly.compile(await response.arrayBuffer());
    const pool = new CpuThreadPool(module, threads, options);
    try {
      await pool.startWorkers(pool.startTimeoutMs);
    } catch (error) {
      pool.terminate();
      throw error;
    }
    return pool;
  }

  constructor(module, threads, options) {
    this.module = module;
    this.size = threads;
    this.active = threads;
    this.taskTimeoutMs = options.taskTimeoutMs ?? 10000;
    this.startTimeoutMs = options.startTimeoutMs ?? 10000;
    // Whether workers take part in the next op (null: always).
    this.participation = options.participation === false ? null : new Participation(options.participation ?? {});
    this.workerUrl = options.workerUrl ?? new URL('./worker.js', import.meta.url);
    this.memory = new WebAssembly.Memory({ initial: 32, maximum: 65536, shared: true });
    this.main = new WebAssembly.Instance(module, { env: { memory: this.memory } });
    const heapBase = this.main.exports.__heap_base.value;
    this.regions = new Regions(this.memory, Math.ceil(heapBase / ALIGN) * ALIGN);
    // This thread's status words and packing scratch; each worker's stack and control block.
    this.mainStatus = this.regions.alloc(8);
    this.scratch = [];
    this.workers = [];
    this.brokenReason = null;
    this.parked = false;
    // LowMemory ended the workers (`release`); `restoring` while they start again.
    this.released = false;
    this.restoring = null;
  }

  async startWorkers(timeoutMs) {
    const starts = [];
    for (let index = 1; index < this.size; index++) starts.push(this.startWorker(index, timeoutMs));
    this.workers = await Promise.all(starts);
  }

  startWorker(index, timeoutMs) {
    const stack = this.regions.alloc(STACK_BYTES);
    const control = this.regions.alloc(CONTROL_BYTES);
    new Int32Array(this.memory.buffer, control, CONTROL_BYTES / 4).fill(0);
    const worker = new Worker(this.workerUrl, { type: 'module', name: `webdelegate-cpu-${index}` });
    const record = { worker, index, stack, control, sequence: 0, postedAt: 0, alive: true };
    return new Promise((resolve, reject) => {
      const timer = setTimeout(() => reject(new Error(`CPU worker ${index} did not start within ${timeoutMs} ms`)), timeoutMs);
      worker.onmessage = ({ data }) => {
        if (data === 'ready') {
          clearTimeout(timer);
          resolve(record);
        } else if (data?.error) {
          clearTimeout(timer);
          reject(new Error(`CPU worker ${index} failed to start: ${data.error}`));
        }
      };
      worker.onerror = (event) => {
        clearTimeout(timer);
        record.alive = false;
        // A script that does not load gives an error event with no message.
        const why = event.message || `its script ${this.workerUrl} did not load`;
        this.brokenReason ??= `CPU worker ${index} failed: ${why}`;
        reject(new Error(`CPU worker ${index} failed to start: ${why}`));
      };
      worker.postMessage({ module: this.module, memory: this.memory, index, stack, stackBytes: STACK_BYTES, control, words: { SEQUENCE, DONE, KIND, RESULT, STATUS, ARGS, CLAIM: KIND_CLAIM, count: CONTROL_BYTES / 4, claim: CLAIM_LAYOUT }, entries: ENTRIES });
    });
  }

  /**
   * Threads an op runs on now: 1 once the pool is broken, while it is parked, and while its
   * workers are released (asking then starts them again, in the background).
   */
  get threads() {
    if (this.brokenReason || this.parked) return 1;
    if (this.released) {
      this.restore();
      return 1;
    }
    return this.active;
  }

  /** Why ops run on one thread now although the pool has more, or null. */
  get idleReason() {
    if (this.brokenReason) return this.brokenReason;
    if (this.parked) return 'the pool is parked while the page is suspended';
    if (this.released) return 'the workers were ended on low memory and are starting again';
    return null;
  }

  /** Threads one op runs on: the pool's, at most `cap` (a program's own limit) when given. */
  threadsFor(cap) {
    return cap === undefined ? this.threads : Math.max(1, Math.min(this.threads, cap));
  }

  /** Uses `count` of the pool's threads (1..size). */
  setThreads(count) {
    if (!Number.isInteger(count) || count < 1 || count > this.size) {
      throw new RangeError(`the CPU thread pool has ${this.size} threads; cannot use ${count}`);
    }
    this.active = count;
  }

  /** The shared memory's current bytes (a fresh view's buffer after growth). */
  get buffer() {
    return this.memory.buffer;
  }

  /** Bytes allocated in the shared memory (weights, scratch, stacks). */
  get bytesInUse() {
    return this.regions.bytesInUse;
  }

  /**
   * Of those, the pool's own: packing scratch (one region per thread) and the claimed ops'
   * block and piece table, kept between ops.
   */
  get scratchBytes() {
    const aligned = (bytes) => Math.max(ALIGN, Math.ceil(bytes / ALIGN) * ALIGN);
    const packing = this.scratch.reduce((sum, s) => sum + (s ? aligned(s.floats * 4) : 0), 0);
    const claims = (this.claimBlock ? aligned(CLAIM_WORDS * 4) : 0) + (this.claimTable ? aligned(this.claimTable.bytes) : 0);
    return packing + claims;
  }

  alloc(bytes) {
    return this.regions.alloc(bytes);
  }

  free(at) {
    this.regions.dealloc(at);
  }

  /** Copies `source` (a typed array) into the shared memory at byte `at`. */
  write(at, source) {
    new Uint8Array(this.memory.buffer, at, source.byteLength).set(new Uint8Array(source.buffer, source.byteOffset, source.byteLength));
  }

  /** Copies `target.byteLength` bytes at byte `at` of the shared memory into `target`. */
  read(at, target) {
    new Uint8Array(target.buffer, target.byteOffset, target.byteLength).set(new Uint8Array(this.memory.buffer, at, target.byteLength));
  }

  scratchFor(slot, floats) {
    const have = this.scratch[slot];
    if (have && have.floats >= floats) return have.at;
    if (have) this.regions.dealloc(have.at);
    const at = this.regions.alloc(floats * 4);
    this.scratch[slot] = { at, floats };
    return at;
  }

  /**
   * `c[m, n] = a @ b (+ bias)` with byte addresses in the shared memory; `a` strided
   * (element strides), `b` packed by the GEMM (`bPacked`) or strided. Rows are split
   * between the threads (at most `threads`, when given: every method takes that last).
   */
  gemm(m, k, n, a, aRow, aCol, b, bPacked, bRow, bCol, bias, c, threads) {
    const runs = shares(m, this.threadsFor(threads), GEMM_ROW_TILE * 8);
    const kernels = this.main.exports;
    const tasks = runs.map(([r0, r1], slot) => {
      const rows = r1 - r0;
      const floats = kernels.wd_gemm_scratch_len(rows, k, n);
      const scratch = this.scratchFor(slot, floats);
      return [rows, k, n, a + 4 * r0 * aRow, aRow, aCol, b, bPacked ? 1 : 0, bRow, bCol, bias, c + 4 * r0 * n, scratch, floats];
    });
    this.run(KIND_GEMM, tasks);
  }

  /**
   * `out[i * outStride + r] = rows[r] . x[i] (+ bias[r])` over `rows` block-format rows (format:
   * the kernels' `RowFormat::code`) of `k` values and `m` activation rows; the weight rows are
   * split between the threads. With `int8`, `x` is the activations quantized by `quantizeRows`.
   */
  dotRows(format, rows, k, m, weights, x, bias, out, outStride, threads, int8) {
    const rowBytes = this.main.exports.wd_row_bytes(format, k);
    const t = this.threadsFor(threads);
    const runs = shares(rows, t * PIECES_PER_THREAD, 16);
    const tasks = runs.map(([r0, r1]) => [format, r1 - r0, k, m, weights + r0 * rowBytes, x, bias ? bias + 4 * r0 : 0, out + 4 * r0, outStride]);
    this.claimed(int8 ? KIND_DOT_ROWS_INT8 : KIND_DOT_ROWS, tasks, t);
  }

  /**
   * Quantizes `m` activation rows of `k` values at `x` into int8 blocks at `out` (the layout
   * `wd_int8_rows_bytes` sizes); the rows are split between the threads.
   */
  quantizeRows(m, k, x, out, threads) {
    const t = this.threadsFor(threads);
    const runs = shares(m, t * PIECES_PER_THREAD, 1);
    const tasks = runs.map(([r0, r1]) => [r1 - r0, k, x + 4 * r0 * k, out, m, r0]);
    this.claimed(KIND_QUANTIZE_ROWS, tasks, t);
  }

  /**
   * `count` products of one batched matmul, `(m, k, n)` each, `a` and `b` strided: product `i`
   * reads them from the element offsets `offsets[2 i]`, `offsets[2 i + 1]` (u32 pairs at byte
   * `offsets`) and writes block `i` of the contiguous `c`. Whole products are split between
   * the threads.
   */
  gemmBatches(count, offsets, m, k, n, a, aRow, aCol, b, bRow, bCol, c, threads) {
    const runs = shares(count, this.threadsFor(threads), 1);
    const floats = this.main.exports.wd_gemm_scratch_len(m, k, n);
    const tasks = runs.map(([b0, b1], slot) => [b1 - b0, offsets + 8 * b0, m, k, n, a, aRow, aCol, b, bRow, bCol, c + 4 * b0 * m * n, this.scratchFor(slot, floats), floats]);
    this.run(KIND_GEMM_BATCHES, tasks);
  }

  /** `out[i] = f(x[i])` for `n` values (`code`: the kernels' `Activation::code`); `x` may be `out`. */
  unary(code, n, x, out, threads) {
    const t = this.threadsFor(threads);
    const runs = shares(n, t * PIECES_PER_THREAD, 64);
    const tasks = runs.map(([e0, e1]) => [code, e1 - e0, x + 4 * e0, out + 4 * e0]);
    this.claimed(KIND_UNARY, tasks, t);
  }

  /**
   * `out = softmax(x + mask)` over `rows` rows of `width` values (`x` and `out` do not
   * overlap); `mask` (0 for none) is `maskCount` rows, row `r` adding mask row
   * `(r / maskPeriod) % maskCount`. Rows are split between the threads.
   */
  softmax(rows, width, x, mask, maskPeriod, maskCount, out, threads) {
    const t = this.threadsFor(threads);
    const runs = shares(rows, t * PIECES_PER_THREAD, 1);
    const tasks = runs.map(([r0, r1]) => [r1 - r0, width, x + 4 * r0 * width, mask, maskPeriod, maskCount, r0, out + 4 * r0 * width]);
    this.claimed(KIND_SOFTMAX, tasks, t);
  }

  /** `out[i] = a[i] (op) b[i]` for `n` values (`code`: the kernels' `Binary::code`). */
  binary(code, n, a, b, out, threads) {
    const t = this.threadsFor(threads);
    const runs = shares(n, t * PIECES_PER_THREAD, 64);
    const tasks = runs.map(([e0, e1]) => [code, e1 - e0, a + 4 * e0, b + 4 * e0, out + 4 * e0]);
    this.claimed(KIND_BINARY, tasks, t);
  }

  /** `out[i] = x[i] * scale + bias` for `n` values (`scaleBits`, `biasBits`: f32 bit patterns). */
  scale(n, x, out, scaleBits, biasBits, threads) {
    const t = this.threadsFor(threads);
    const runs = shares(n, t * PIECES_PER_THREAD, 64);
    const tasks = runs.map(([e0, e1]) => [e1 - e0, x + 4 * e0, out + 4 * e0, scaleBits, biasBits]);
    this.claimed(KIND_SCALE, tasks, t);
  }

  /** Layer norm of `rows` rows of `width` values (`epsBits`: an f32 bit pattern); rows are split. */
  layerNorm(rows, width, x, gamma, beta, epsBits, out, threads) {
    const t = this.threadsFor(threads);
    const runs = shares(rows, t * PIECES_PER_THREAD, 1);
    const tasks = runs.map(([r0, r1]) => [r1 - r0, width, x + 4 * r0 * width, gamma, beta, epsBits, out + 4 * r0 * width]);
    this.claimed(KIND_LAYER_NORM, tasks, t);
  }

  /**
   * A permuted copy of the `xLen` values at `x` into `out`, by output rows: output dims
   * `[rows / (d1 d2), d1, d2, d3]`, input strides `s0..s3` along them (the kernels' `Permute4`).
   */
  permute(rows, d1, d2, d3, s0, s1, s2, s3, x, xLen, out, threads) {
    const t = this.threadsFor(threads);
    const runs = shares(rows, t * PIECES_PER_THREAD, 1);
    const tasks = runs.map(([r0, r1]) => [r1 - r0, r0, d1, d2, d3, s0, s1, s2, s3, x, xLen, out + 4 * r0 * d3]);
    this.claimed(KIND_PERMUTE, tasks, t);
  }

  /**
   * Runs the pieces `tasks` of one op (`kind`'s entry in ENTRIES) on this thread and up to
   * `threads - 1` workers, each taking the next unclaimed piece (see the protocol above);
   * returns once every piece is done, throws on any failure.
   */
  claimed(kind, tasks, threads) {
    if (tasks.length === 0) return; // no rows: nothing to compute
    const [entry, argc] = ENTRIES[kind];
    const alone = tasks.length === 1 || threads <= 1;
    if (alone || !this.sharing()) {
      for (const task of tasks) {
        if (this.main.exports[entry](...task, this.mainStatus) !== 0) throw new Error(this.message(this.mainStatus));
      }
      return;
    }
    const started = performance.now();
    if (tasks.length > 0xffff) throw new Error(`an op of ${tasks.length} pieces is more than the pool's claim table takes`);
    this.claimBlock ??= this.regions.alloc(CLAIM_WORDS * 4);
    const tableBytes = tasks.length * argc * 4;
    if (!this.claimTable || this.claimTable.bytes < tableBytes) {
      if (this.claimTable) this.regions.dealloc(this.claimTable.at);
      const bytes = Math.max(tableBytes, 4096);
      this.claimTable = { at: this.regions.alloc(bytes), bytes };
    }
    const table = new Int32Array(this.memory.buffer, this.claimTable.at, tasks.length * argc);
    tasks.forEach((task, i) => table.set(task, i * argc));
    const block = new Int32Array(this.memory.buffer, this.claimBlock, CLAIM_WORDS);
    this.generation = ((this.generation ?? 0) + 1) & 0xffff;
    const generation = this.generation;
    block[CLAIM_DONE] = 0;
    block[CLAIM_PIECES] = tasks.length;
    block[CLAIM_KIND] = kind;
    block[CLAIM_ARGC] = argc;
    block[CLAIM_TABLE] = this.claimTable.at;
    block[CLAIM_RESULT] = 0;
    block[CLAIM_WHO] = 0;
    // Publishes the op: what was written above is visible to whoever reads this state.
    Atomics.store(block, CLAIM_STATE, generation << 16);
    // Workers that finished their last task take part; a late one is left to catch up.
    for (let w = 0; w < threads - 1; w++) {
      const worker = this.workers[w];
      if (!worker?.alive) {
        this.brokenReason ??= `CPU worker ${w + 1} is not running`;
        break;
      }
      const words = new Int32Array(this.memory.buffer, worker.control, CONTROL_BYTES / 4);
      if (Atomics.load(words, DONE) !== worker.sequence) {
        // Late is fine for a while; past the task timeout the worker died or hangs.
        if (performance.now() - worker.postedAt > this.taskTimeoutMs) {
          worker.alive = false;
          this.brokenReason ??= `CPU worker ${worker.index} did not finish its share within ${this.taskTimeoutMs} ms (it died or hangs)`;
        }
        continue;
      }
      words[KIND] = KIND_CLAIM;
      words[ARGS] = this.claimBlock;
      words[ARGS + 1] = generation;
      worker.postedAt = performance.now();
      worker.sequence += 1;
      Atomics.store(words, SEQUENCE, worker.sequence);
      Atomics.notify(words, SEQUENCE);
    }
    const kernel = this.main.exports[entry];
    const claiming = performance.now();
    let mine = 0;
    for (;;) {
      const state = Atomics.load(block, CLAIM_STATE);
      const piece = state & 0xffff;
      if (piece >= tasks.length) break;
      if (Atomics.compareExchange(block, CLAIM_STATE, state, state + 1) !== state) continue;
      const result = kernel(...tasks[piece], this.mainStatus);
      if (result !== 0 && Atomics.compareExchange(block, CLAIM_RESULT, 0, result) === 0) block[CLAIM_WHO] = 0;
      Atomics.add(block, CLAIM_DONE, 1);
      mine += 1;
    }
    const claimedAll = performance.now();
    const deadline = performance.now() + this.taskTimeoutMs;
    let spins = 0;
    while (Atomics.load(block, CLAIM_DONE) < tasks.length) {
      if ((++spins & 1023) === 0 && performance.now() > deadline) {
        // A worker took a piece and never finished it: the one still on its task.
        const stuck = this.workers.slice(0, threads - 1).find((w) => Atomics.load(new Int32Array(this.memory.buffer, w.control, CONTROL_BYTES / 4), DONE) !== w.sequence);
        if (stuck) stuck.alive = false;
        this.brokenReason ??= `CPU worker ${stuck?.index ?? '?'} did not finish its share within ${this.taskTimeoutMs} ms (it died or hangs)`;
        throw this.brokenError();
      }
    }
    this.participation?.ranShared(performance.now() - started, claimedAll - claiming, mine, tasks.length);
    const result = Atomics.load(block, CLAIM_RESULT);
    if (result !== 0) {
      const who = block[CLAIM_WHO];
      if (who === 0) throw new Error(this.message(this.mainStatus));
      const worker = this.workers[who - 1];
      if (result === 1) throw new Error(this.message(worker.control + 4 * STATUS));
      worker.alive = false;
      this.brokenReason ??= `CPU worker ${worker.index} trapped in a kernel`;
      throw this.brokenError();
    }
    if (this.brokenReason) throw this.brokenError();
  }

  /** Runs task 0 here and the others on workers 1.. (`kind`'s entry in ENTRIES); throws on any failure. */
  run(kind, tasks) {
    if (tasks.length === 0) return; // no rows: nothing to compute
    const status = this.mainStatus;
    const entry = this.main.exports[ENTRIES[kind][0]];
    if (tasks.length > 1 && !this.sharing()) {
      // Each share has its own scratch slot, so one after another on this thread is the same.
      for (const task of tasks) {
        if (entry(...task, status) !== 0) throw new Error(this.message(status));
      }
      return;
    }
    const started = performance.now();
    const posted = [];
    let missing = null;
    for (let t = 1; t < tasks.length; t++) {
      const worker = this.workers[t - 1];
      if (!worker?.alive) {
        missing = t;
        break;
      }
      // A worker still on an earlier task (a claimed op it woke late for) finishes it first:
      // its control block is rewritten only once it is done.
      this.waitFor([{ worker, words: new Int32Array(this.memory.buffer, worker.control, CONTROL_BYTES / 4) }]);
      const words = new Int32Array(this.memory.buffer, worker.control, CONTROL_BYTES / 4);
      words[KIND] = kind;
      words.set(tasks[t], ARGS);
      worker.postedAt = performance.now();
      worker.sequence += 1;
      Atomics.store(words, SEQUENCE, worker.sequence);
      Atomics.notify(words, SEQUENCE);
      posted.push({ worker, words });
    }
    if (missing !== null) {
      // A worker is gone: wait for those already posted, then fail this op.
      this.brokenReason ??= `CPU worker ${missing} is not running`;
      this.waitFor(posted);
      throw this.brokenError();
    }
    const mineFrom = performance.now();
    if (entry(...tasks[0], status) !== 0) throw new Error(this.message(status));
    const mineTo = performance.now();
    this.waitFor(posted);
    if (posted.length > 0) this.participation?.ranShared(performance.now() - started, mineTo - mineFrom, 1, tasks.length);
    for (const { worker, words } of posted) {
      const result = words[RESULT];
      if (result === 1) throw new Error(this.message(worker.control + 4 * STATUS));
      if (result !== 0) {
        worker.alive = false;
        this.brokenReason ??= `CPU worker ${worker.index} trapped in a kernel`;
        throw this.brokenError();
      }
    }
  }

  /** Whether the next op with more than one piece is shared with the workers (participation.js). */
  sharing() {
    if (!this.participation || this.participation.shared) return true;
    this.participation.ranSolo();
    return false;
  }

  /**
   * What the adaptive participation has done: ops shared with the workers, ops run on this
   * thread alone because sharing did not pay, how often it gave sharing up, and whether it is
   * running alone now (null when the pool shares every op).
   */
  get participationStats() {
    return this.participation?.summary() ?? null;
  }

  waitFor(posted) {
    const deadline = performance.now() + this.taskTimeoutMs;
    for (const { worker, words } of posted) {
      let spins = 0;
      while (Atomics.load(words, DONE) !== worker.sequence) {
        if ((++spins & 1023) === 0 && performance.now() > deadline) {
          worker.alive = false;
          this.brokenReason ??= `CPU worker ${worker.index} did not finish its share within ${this.taskTimeoutMs} ms (it died or hangs)`;
          throw this.brokenError();
        }
      }
    }
  }

  brokenError() {
    const error = new Error(`${this.brokenReason}; the CPU backend runs on one thread from now on`);
    error.name = 'CpuThreadsBroken';
    return error;
  }

  message(status) {
    const words = new Uint32Array(this.memory.buffer, status, 2);
    const bytes = new Uint8Array(this.memory.buffer, words[0], words[1]).slice();
    return `CPU kernel: ${new TextDecoder().decode(bytes)}`;
  }

  /** Lifecycle: parked (Suspend) runs every op on this thread; idle workers sleep in Atomics.wait. */
  park() {
    this.parked = true;
  }

  unpark() {
    this.parked = false;
  }

  /**
   * LowMemory: ends every worker (its thread and JS heap); the shared memory, weights included,
   * stays. Ops run on the calling thread until the workers are back: the next op that asks
   * (or `restore()`, which Resume calls) starts them again.
   */
  release() {
    if (this.released || this.brokenReason) return;
    for (const worker of this.workers) this.endWorker(worker);
    this.released = true;
  }

  /**
   * Starts released workers again; resolves once they run. Each gets a fresh stack and control
   * block; an ended worker's are freed once it acknowledged its exit (one that did not may
   * still be running: its regions are never reused).
   */
  restore() {
    if (!this.released || this.brokenReason) return Promise.resolve();
    this.restoring ??= (async () => {
      try {
        const ended = this.workers;
        const started = await Promise.allSettled(ended.map((w) => this.startWorker(w.index, this.startTimeoutMs)));
        const failed = started.find((r) => r.status === 'rejected');
        if (failed) {
          for (const r of started) if (r.status === 'fulfilled') this.endWorker(r.value);
          throw failed.reason;
        }
        this.workers = started.map((r) => r.value);
        for (const w of ended) {
          if (Atomics.load(new Int32Array(this.memory.buffer, w.control, CONTROL_BYTES / 4), DONE) === w.sequence) {
            this.regions.dealloc(w.stack);
            this.regions.dealloc(w.control);
          }
        }
        this.released = false;
      } catch (error) {
        this.brokenReason ??= `restarting the CPU workers failed: ${error.message}`;
      } finally {
        this.restoring = null;
      }
    })();
    return this.restoring;
  }

  /** Tells `worker` to leave its loop, then ends it. */
  endWorker(worker) {
    if (!worker.alive) return;
    const words = new Int32Array(this.memory.buffer, worker.control, CONTROL_BYTES / 4);
    words[KIND] = KIND_EXIT;
    worker.sequence += 1;
    Atomics.store(words, SEQUENCE, worker.sequence);
    Atomics.notify(words, SEQUENCE);
    worker.worker.terminate();
    worker.alive = false;
  }

  /** Ends every worker (the page is done with the pool). */
  terminate() {
    for (const worker of this.workers) this.endWorker(worker);
    this.brokenReason ??= 'the CPU thread pool was terminated';
  }
}
