import { test } from 'node:test';
import assert from 'node:assert/strict';
import {
  checkBudget,
  diffCounts,
  formatTable,
  percentile,
  perHour,
  ratePerSecond,
  scaleCounts,
  summarize,
  type OrderCost,
} from '../../bench/stats.js';
import { toOrderCost } from '../../bench/cost.js';
import { floorRecipe } from '../../bench/throughput.js';

test('percentile uses the nearest rank and does not reorder its input', () => {
  const samples = [5, 1, 4, 2, 3];
  assert.equal(percentile(samples, 50), 3);
  assert.equal(percentile(samples, 0), 1);
  assert.equal(percentile(samples, 100), 5);
  assert.equal(percentile(samples, 99), 5);
  assert.equal(percentile(samples, 20), 1);
  assert.equal(percentile(samples, 21), 2);
  assert.deepEqual(samples, [5, 1, 4, 2, 3]);
  const hundred = Array.from({ length: 100 }, (_, i) => 100 - i);
  assert.equal(percentile(hundred, 95), 95);
  assert.equal(percentile(hundred, 99), 99);
});

test('percentile of nothing is NaN; a bad p is refused', () => {
  assert.ok(Number.isNaN(percentile([], 50)));
  assert.throws(() => percentile([1], 101), RangeError);
  assert.throws(() => percentile([1], Number.NaN), RangeError);
  const s = summarize([]);
  assert.equal(s.count, 0);
  assert.ok(Number.isNaN(s.max));
});

test('summarize reports count, percentiles and max', () => {
  assert.deepEqual(summarize([10, 30, 20]), { count: 3, p50: 20, p95: 30, p99: 30, max: 30 });
});

test('diffCounts subtracts key by key, treats missing keys as 0 and drops zeros', () => {
  assert.deepEqual(diffCounts({ a: 5, b: 2, c: 1 }, { a: 3, b: 2, d: 4 }), { a: 2, c: 1, d: -4 });
  assert.deepEqual(scaleCounts({ a: 6, b: 3 }, 3), { a: 2, b: 1 });
  assert.throws(() => scaleCounts({ a: 1 }, 0), RangeError);
});

const cost = (table: number, sends: number): OrderCost => ({
  table: { reads: 0, queries: 0, writes: 0, batches: table, total: table },
  serviceBus: { sends, receives: 0, settlements: 0 },
});

test('checkBudget compares per-step figures beyond submission with 2 transactions and 2 sends', () => {
  const within = checkBudget(cost(8, 8), cost(2, 2), 3);
  assert.equal(within.tablePerStep, 2);
  assert.equal(within.sendsPerStep, 2);
  assert.ok(within.tableWithin && within.sendsWithin);
  const over = checkBudget(cost(13, 12), cost(2, 2), 3);
  assert.ok(Math.abs(over.tablePerStep - 11 / 3) < 1e-9);
  assert.equal(over.tableWithin, false);
  assert.equal(over.sendsWithin, false);
  assert.throws(() => checkBudget(cost(1, 1), cost(1, 1), 0), RangeError);
});

test('rates extrapolate and refuse empty windows', () => {
  assert.equal(perHour(10, 10_000), 3600);
  assert.equal(ratePerSecond(30, 1500), 20);
  assert.throws(() => perHour(1, 0), RangeError);
  assert.throws(() => ratePerSecond(1, -1), RangeError);
});

test('toOrderCost keeps sweep queries apart from the order', () => {
  const { cost: c, sweepQueries } = toOrderCost({
    'table.read': 2,
    'table.query': 7,
    'table.InFlight.query': 3,
    'table.write': 2,
    'table.batch': 5,
    'sb.sent': 12,
    'sb.delivered': 7,
    'sb.completed': 6,
    'sb.abandoned': 1,
    'feed.delivered': 5,
  });
  assert.equal(sweepQueries, 3);
  assert.deepEqual(c.table, { reads: 2, queries: 4, writes: 2, batches: 5, total: 13 });
  assert.deepEqual(c.serviceBus, { sends: 12, receives: 7, settlements: 7 });
});

test('floorRecipe splits sends into received hops and publish-only sends', () => {
  const r = floorRecipe({
    table: { reads: 2, queries: 4, writes: 2.4, batches: 5, total: 13.4 },
    serviceBus: { sends: 12, receives: 7, settlements: 7 },
  });
  assert.deepEqual(r, { reads: 2, queries: 4, writes: 2, batches: 5, hops: 7, publishOnly: 5 });
});

test('formatTable aligns columns and rounds numbers', () => {
  const text = formatTable(
    ['name', 'v'],
    [
      ['a', 1.234],
      ['bbb', 10],
      ['c', Number.NaN],
    ],
    2,
  );
  assert.deepEqual(text.split('\n'), ['name     v', '----  ----', 'a     1.23', 'bbb     10', 'c        -']);
});
