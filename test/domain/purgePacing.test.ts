import assert from 'node:assert/strict';
import { test } from 'node:test';
import { nextPurgeStep, ordersWhileLive, sliceBudgetMs } from '../../shared/domain/purgePacing.js';

/** Issue 24, item 8: when the purge takes its next order beside live work (no I/O). */
const pacing = { minShareMs: 1000, pollMs: 100, minSliceMs: 5000 };
const at = (o: Partial<Parameters<typeof nextPurgeStep>[0]>) =>
  nextPurgeStep({ nowMs: 10_000, liveWork: false, lastOrderMs: 9_990, deadlineMs: 20_000, ...o }, pacing);

test('nothing live: the next order at once, however recent the last', () => {
  assert.deepEqual(at({}), { kind: 'go' });
  assert.deepEqual(at({ lastOrderMs: 10_000 }), { kind: 'go' });
});

test('live work: one order per minimum share, pauses no longer than the poll', () => {
  assert.deepEqual(at({ liveWork: true, lastOrderMs: undefined }), { kind: 'go' });
  assert.deepEqual(at({ liveWork: true, lastOrderMs: 9_000 }), { kind: 'go' });
  assert.deepEqual(at({ liveWork: true, lastOrderMs: 9_500 }), { kind: 'pause', ms: 100 });
  assert.deepEqual(at({ liveWork: true, lastOrderMs: 9_030 }), { kind: 'pause', ms: 30 });
});

test('live work: the slice stops when its next share falls after its budget', () => {
  assert.deepEqual(at({ liveWork: true, lastOrderMs: 9_500, deadlineMs: 10_400 }), { kind: 'stop' });
  assert.deepEqual(at({ liveWork: true, lastOrderMs: 9_500, deadlineMs: 10_500 }), {
    kind: 'pause',
    ms: 100,
  });
  // Quiet again: no budget applies, the slice goes on at full speed.
  assert.deepEqual(at({ liveWork: false, lastOrderMs: 9_500, deadlineMs: 0 }), { kind: 'go' });
});

test('a slice budget: its orders at the rate, at least the least budget; a busy slice judges what it can delete', () => {
  assert.equal(sliceBudgetMs(500, 20, pacing), 25_000);
  assert.equal(sliceBudgetMs(20, 20, pacing), 5_000);
  assert.equal(ordersWhileLive(500, 25_000, pacing), 26);
  assert.equal(ordersWhileLive(20, 5_000, pacing), 6);
  assert.equal(ordersWhileLive(3, 25_000, pacing), 3);
  assert.equal(ordersWhileLive(500, 10, pacing), 1);
});
