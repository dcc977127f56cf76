import assert from 'node:assert/strict';
import { test } from 'node:test';
import { nextPurgeStep, ordersWhileLive, sliceBudgetMs, turnAfter } from '../../shared/domain/purgePacing.js';

/** Issue 24, item 8: when the purge does its next piece of work beside live work (no I/O). */
const pacing = { liveShare: 0.1, pollMs: 100, minSliceMs: 5000 };
// The last piece took 50 ms and ended at 9,990: its turn while live work waits is 450 ms later.
const last = { startMs: 9_940, endMs: 9_990 };
const at = (o: Partial<Parameters<typeof nextPurgeStep>[0]>) =>
  nextPurgeStep({ nowMs: 10_000, liveWork: false, last, deadlineMs: 20_000, ...o }, pacing);

test('nothing live: the next piece at once, however recent the last', () => {
  assert.deepEqual(at({}), { kind: 'go' });
  assert.deepEqual(at({ last: { startMs: 0, endMs: 10_000 } }), { kind: 'go' });
});

test('live work: the purge keeps its share of the time, pausing no longer than the poll at once', () => {
  assert.equal(turnAfter(last, pacing), 10_440);
  assert.equal(turnAfter(undefined, pacing), -Infinity);
  assert.deepEqual(at({ liveWork: true, last: undefined }), { kind: 'go' });
  assert.deepEqual(at({ liveWork: true }), { kind: 'pause', ms: 100 });
  assert.deepEqual(at({ liveWork: true, nowMs: 10_400 }), { kind: 'pause', ms: 40 });
  assert.deepEqual(at({ liveWork: true, nowMs: 10_440 }), { kind: 'go' });
  // A share of one half: the pause equals the piece.
  assert.equal(turnAfter(last, { ...pacing, liveShare: 0.5 }), 10_040);
});

test('live work: the slice stops when its next turn falls after its budget', () => {
  assert.deepEqual(at({ liveWork: true, deadlineMs: 10_439 }), { kind: 'stop' });
  assert.deepEqual(at({ liveWork: true, deadlineMs: 10_440 }), { kind: 'pause', ms: 100 });
  // Quiet again: no budget applies, the slice goes on at full speed.
  assert.deepEqual(at({ liveWork: false, deadlineMs: 0 }), { kind: 'go' });
});

test('a slice budget: its orders at the rate, at least the least budget; a busy slice judges its share', () => {
  assert.equal(sliceBudgetMs(500, 20, pacing), 25_000);
  assert.equal(sliceBudgetMs(20, 20, pacing), 5_000);
  assert.equal(ordersWhileLive(500, pacing), 50);
  assert.equal(ordersWhileLive(20, pacing), 2);
  assert.equal(ordersWhileLive(3, pacing), 1);
});
