import { test } from 'node:test';
import assert from 'node:assert/strict';
import { gateBacklogFigure, throughputFigures } from '../../bench/callThroughput.js';

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

test('the gate figure counts only the seconds that began with at least the limit waiting at a gate', () => {
  // 5/s: 12 requests reach the gate at once and start 4 a second; 3 more arrive one by one later
  // and start at once (nothing waits then: those seconds are not the limiter's to fill).
  const arrivals = new Map<string, number>();
  const starts = new Map<string, number>();
  for (let i = 0; i < 12; i++) {
    arrivals.set(`a${i}`, 0);
    starts.set(`a${i}`, 10 + 250 * i);
  }
  for (let i = 0; i < 3; i++) {
    arrivals.set(`b${i}`, 4_000 + 1_000 * i);
    starts.set(`b${i}`, 4_000 + 1_000 * i);
  }
  const f = gateBacklogFigure(arrivals, starts, 5);
  // Seconds from 10 ms: [10, 1010) starts 4 with 11 waiting; [1010, 2010) 4 with 8 waiting; then
  // 4 waiting (< 5) and the arrivals one by one.
  assert.equal(f.seconds, 2);
  assert.equal(f.starts, 8);
  assert.equal(f.perSecond, 4);
});
