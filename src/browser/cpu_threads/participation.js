// Whether the pool's workers take part in the next op (pool.js), decided from how the last ops
// went. Shipped in the npm package beside pool.js (cpu-threads/participation.js).
//
// A pool pays for its workers only while the OS runs them. When another program holds a core,
// a worker can be descheduled in the middle of a piece it claimed, and the caller then waits for
// that piece for up to a scheduler time slice (milliseconds, against ops of tens of
// microseconds): a pool of two on a two-core machine beside one busy process decodes slower
// than one thread with a whole core to itself. So the pool measures each op it shares: the
// caller's own time per piece, times the op's pieces, is what the op would have taken on the
// caller alone; the op's elapsed time is what sharing it cost. Over a window of shared ops,
// when the elapsed total is more than `gain` times the alone total, sharing did not pay; after
// `patience` such windows in a row (one slow window is often a worker woken from
// Atomics.wait, which a lasting load does not explain), the next `soloOps` ops run on the
// caller alone (the workers sleep in Atomics.wait, leaving their
// cores to whoever wants them). Then a window is shared again to probe: the pool returns to
// sharing at once when the load has gone, and each failed probe doubles the solo stretch (up to
// `maxSoloOps`), so a lasting load costs ever fewer probes. Who runs a piece never changes its
// result (the same kernel call computes it either way), so this is a question of speed alone.

/** The default policy's settings. */
export const PARTICIPATION_DEFAULTS = Object.freeze({ window: 48, gain: 0.9, patience: 2, soloOps: 256, maxSoloOps: 8192 });

export class Participation {
  /** @param {{window?: number, gain?: number, patience?: number, soloOps?: number, maxSoloOps?: number}} [options] */
  constructor(options = {}) {
    const settings = { ...PARTICIPATION_DEFAULTS, ...options };
    for (const key of ['window', 'patience', 'soloOps', 'maxSoloOps']) {
      if (!Number.isInteger(settings[key]) || settings[key] < 1) throw new RangeError(`participation ${key} must be a positive integer, not ${settings[key]}`);
    }
    if (!(settings.gain > 0 && settings.gain <= 1)) throw new RangeError(`participation gain must be in (0, 1], not ${settings.gain}`);
    this.settings = settings;
    this.soloStretch = settings.soloOps;
    this.soloLeft = 0;
    // Windows in a row that did not pay.
    this.unpaid = 0;
    this.resetWindow();
    // Counters for the stats: ops shared and run alone, and how often sharing was given up.
    this.sharedOps = 0;
    this.soloOpsRun = 0;
    this.fallbacks = 0;
  }

  resetWindow() {
    this.windowOps = 0;
    this.elapsed = 0;
    this.alone = 0;
  }

  /** True when the next op should be shared with the workers. */
  get shared() {
    return this.soloLeft === 0;
  }

  /** Counts one op the caller ran alone because sharing did not pay. */
  ranSolo() {
    this.soloOpsRun += 1;
    if (this.soloLeft > 0) this.soloLeft -= 1;
  }

  /**
   * Records one shared op: `elapsedMs` from its start to its last piece done, `callerMs` the
   * caller spent on its own `callerPieces` of the op's `pieces`.
   */
  ranShared(elapsedMs, callerMs, callerPieces, pieces) {
    this.sharedOps += 1;
    // The caller ran nothing (the workers took every piece): that op says nothing of its cost.
    if (callerPieces === 0) return;
    this.elapsed += elapsedMs;
    this.alone += (callerMs / callerPieces) * pieces;
    this.windowOps += 1;
    if (this.windowOps < this.settings.window) return;
    const paid = this.elapsed <= this.settings.gain * this.alone;
    this.resetWindow();
    if (paid) {
      this.unpaid = 0;
      this.soloStretch = this.settings.soloOps;
      return;
    }
    this.unpaid += 1;
    if (this.unpaid < this.settings.patience) return;
    this.unpaid = 0;
    this.fallbacks += 1;
    this.soloLeft = this.soloStretch;
    this.soloStretch = Math.min(this.settings.maxSoloOps, this.soloStretch * 2);
  }

  /** What the policy has done so far (for stats and benchmarks). */
  summary() {
    return { sharedOps: this.sharedOps, soloOps: this.soloOpsRun, fallbacks: this.fallbacks, solo: !this.shared };
  }
}
