import { test } from 'node:test';
import assert from 'node:assert/strict';
import { throughputFigures } from '../../bench/callThroughput.js';

test('the backlog figure stops when fewer than the limit remain unstarted; the whole-run figure keeps the tail', () => {
  // 20 orders at 5/s: 16 starts 200 ms apart while a backlog waits, then a slow tail of 4.
  const starts = [...Array.from({ length: 16 }, (_, i) => i * 200), 4_000, 5_000, 6_000, 7_000];
  const f = throughputFigures(starts, 20, 5);
  assert.equal(f.backlogStarts, 15);
  assert.equal(f.backlog, 5);
  assert.equal(f.backlogSeconds, 2.8);
  assert.ok(Math.abs(f.whole - 19 / 7) < 1e-9, `whole ${f.whole}`);
});

test('the ramp-up counts: the backlog figure starts at the first call', () => {
  const starts = [0, 1_000, 1_200, 1_400, 1_600, 1_800, 2_000, 2_200, 2_400, 2_600, 2_800];
  const f = throughputFigures(starts, 12, 2);
  assert.equal(f.backlogStarts, 10);
  assert.ok(Math.abs(f.backlog - 9 / 2.6) < 1e-9, `backlog ${f.backlog}`);
});

test('an unfinished run counts the starts it has', () => {
  const f = throughputFigures([0, 500, 1_000], 100, 5);
  assert.equal(f.backlogStarts, 3);
  assert.equal(f.backlog, 2);
  assert.equal(f.whole, 2);
});
