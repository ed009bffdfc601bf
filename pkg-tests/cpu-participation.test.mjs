// The worker pool's participation policy (src/browser/cpu_threads/participation.js) fed
// synthetic op timings in Node (no browser): a pool that halves an op's time keeps sharing; one
// whose ops take as long as the caller alone would (a descheduled worker holding pieces up)
// falls back to the caller for a stretch, probes again, doubles the stretch after each failed
// probe up to its cap, and returns to sharing as soon as a probe pays. The oracle is the
// policy's documented rule: sharing pays when a window's elapsed total is at most `gain` times
// the caller's per-piece time times the pieces.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { Participation, PARTICIPATION_DEFAULTS } from '../src/browser/cpu_threads/participation.js';

// One op of 8 pieces: the caller ran `mine` of them at 10 us each and the op took `elapsed` us.
const op = (policy, elapsed, mine = 4) => policy.ranShared(elapsed / 1000, (mine * 10) / 1000, mine, 8);

// Runs `count` ops through the policy: shared ones with `elapsed`, solo ones counted.
function drive(policy, count, elapsed, mine) {
  let solo = 0;
  for (let i = 0; i < count; i++) {
    if (policy.shared) op(policy, elapsed, mine);
    else {
      policy.ranSolo();
      solo += 1;
    }
  }
  return solo;
}

test('sharing that halves the time is kept', () => {
  const policy = new Participation();
  // Two threads: 8 pieces of 10 us in 45 us, against 80 us alone.
  assert.equal(drive(policy, 10 * PARTICIPATION_DEFAULTS.window, 45), 0);
  assert.deepEqual(policy.summary(), { sharedOps: 10 * PARTICIPATION_DEFAULTS.window, soloOps: 0, fallbacks: 0, solo: false });
});

test('sharing slower than the caller alone falls back, probes, and backs off', () => {
  const policy = new Participation({ window: 4, gain: 0.9, patience: 1, soloOps: 10, maxSoloOps: 40 });
  // A worker held up: 8 pieces in 300 us where the caller alone takes 80.
  drive(policy, 4, 300, 7);
  assert.equal(policy.shared, false, 'one window that did not pay');
  assert.equal(drive(policy, 10, 300, 7), 10, 'a stretch of 10 alone');
  assert.equal(policy.shared, true, 'then a probe');
  drive(policy, 4, 300, 7);
  assert.equal(drive(policy, 100, 300, 7) >= 20, true);
  assert.equal(policy.summary().fallbacks >= 3, true);
  // Stretches 10, 20, 40, 40, ...: the cap holds.
  const capped = new Participation({ window: 1, gain: 0.9, patience: 1, soloOps: 10, maxSoloOps: 40 });
  const stretches = [];
  for (let round = 0; round < 4; round++) {
    op(capped, 300, 7);
    let alone = 0;
    for (; !capped.shared; alone++) capped.ranSolo();
    stretches.push(alone);
  }
  assert.deepEqual(stretches, [10, 20, 40, 40]);
});

test('a probe that pays returns to sharing and resets the stretch', () => {
  const policy = new Participation({ window: 4, gain: 0.9, patience: 1, soloOps: 10, maxSoloOps: 1000 });
  for (let i = 0; i < 3; i++) {
    drive(policy, 4, 300, 7);
    while (!policy.shared) policy.ranSolo();
  }
  assert.equal(policy.soloStretch, 80, 'three failed windows doubled the stretch three times');
  // The load went away: the probe pays, sharing stays.
  assert.equal(drive(policy, 40, 45), 0);
  assert.equal(policy.soloStretch, 10);
  // Ops the workers ran wholly (the caller took no piece) say nothing of the cost.
  const untouched = new Participation({ window: 1 });
  op(untouched, 1000, 0);
  assert.equal(untouched.shared, true);
  assert.equal(untouched.summary().sharedOps, 1);
});

test('one slow window alone (a worker woken from sleep) does not give sharing up; `patience` in a row do', () => {
  const policy = new Participation({ window: 4, gain: 0.9, patience: 2, soloOps: 10, maxSoloOps: 40 });
  drive(policy, 4, 300, 7);
  assert.equal(policy.shared, true, 'one window that did not pay');
  drive(policy, 4, 45);
  assert.equal(policy.shared, true, 'a paying window in between resets the count');
  drive(policy, 4, 300, 7);
  assert.equal(policy.shared, true, 'one again');
  drive(policy, 4, 300, 7);
  assert.equal(policy.shared, false, 'two in a row');
  assert.equal(policy.summary().fallbacks, 1);
  assert.equal(PARTICIPATION_DEFAULTS.patience, 2);
});

test('settings out of range are refused', () => {
  for (const bad of [{ window: 0 }, { window: 1.5 }, { gain: 0 }, { gain: 2 }, { patience: 0 }, { soloOps: -1 }, { maxSoloOps: 'x' }]) {
    assert.throws(() => new Participation(bad), RangeError, JSON.stringify(bad));
  }
});
