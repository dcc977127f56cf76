import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, it } from 'node:test';
import {
  activityPeriods,
  alwaysReadyBaselineMonthly,
  billedActivityMs,
  billedMs,
  monthAtRest,
  parsePriceTable,
  perMillionOrders,
  serviceBusMonthly,
  smallestInstance,
  type OrderProfile,
  type PriceTable,
} from '../../bench/pricing.js';

const repoRoot = join(__dirname, '..', '..', '..');
/** The repo's table, unvalidated, to break one field at a time. */
const raw = (): PriceTable =>
  JSON.parse(readFileSync(join(repoRoot, 'bench', 'prices.json'), 'utf8')) as PriceTable;
const prices: PriceTable = parsePriceTable(raw());

const close = (actual: number, expected: number, what: string) =>
  assert.ok(
    Math.abs(actual - expected) < 1e-9 * Math.max(1, Math.abs(expected)),
    `${what}: ${actual} != ${expected}`,
  );

describe('price table (bench/prices.json)', () => {
  it('the repo table parses, with a source for every price and the date it was read', () => {
    assert.equal(prices.currency, 'USD');
    assert.match(prices.read, /^\d{4}-\d{2}-\d{2}$/);
    assert.deepEqual(prices.flexConsumption.instanceSizesMB, [512, 2048, 4096]);
  });

  it('a price without a source is refused, naming the field', () => {
    const broken = raw();
    const price: { source?: string } = broken.tableStorage.per10kTransactions;
    delete price.source;
    assert.throws(() => parsePriceTable(broken), /tableStorage\.per10kTransactions\.source/);
  });

  it('operation tiers with a gap are refused', () => {
    const broken = raw();
    broken.serviceBusStandard.operationTiers[1].fromMillions = 120;
    assert.throws(() => parsePriceTable(broken), /tier 1 must start where tier 0 ends/);
  });

  it('a first tier that does not start at the included operations is refused', () => {
    const broken = raw();
    broken.serviceBusStandard.operationTiers[0].fromMillions = 0;
    assert.throws(() => parsePriceTable(broken), /must start at the included 13M/);
  });
});

describe('Flex billing periods', () => {
  it('an execution alone bills at least 1,000 ms, then rounds up to 100 ms', () => {
    assert.equal(billedMs(0, prices), 1000);
    assert.equal(billedMs(12, prices), 1000);
    assert.equal(billedMs(1000, prices), 1000);
    assert.equal(billedMs(1001, prices), 1100);
    assert.equal(billedMs(2350, prices), 2400);
    assert.throws(() => billedMs(-1, prices), RangeError);
  });

  it('overlapping and touching executions merge into one activity period; gaps split them', () => {
    assert.deepEqual(
      activityPeriods([
        [100, 300],
        [0, 150],
        [300, 400],
        [900, 950],
      ]),
      [
        [0, 400],
        [900, 950],
      ],
    );
    assert.deepEqual(activityPeriods([]), []);
  });

  it('ten 20 ms executions: 10 s billed when sparse, 1 s when they overlap on one instance', () => {
    const overlapping = Array.from({ length: 10 }, (_, i) => [i * 10, i * 10 + 20] as const);
    const sparse = Array.from({ length: 10 }, (_, i) => [i * 60_000, i * 60_000 + 20] as const);
    assert.equal(billedActivityMs(overlapping, prices), 1000);
    assert.equal(billedActivityMs(sparse, prices), 10_000);
  });
});

describe('Service Bus Standard month', () => {
  const base = 0.0135 * 730;
  it('within the included 13M operations only the base charge is paid', () => {
    close(serviceBusMonthly(0, prices), base, '0 ops');
    close(serviceBusMonthly(13e6, prices), base, '13M ops');
  });
  it('operations past 13M are priced by tier', () => {
    close(serviceBusMonthly(26e6, prices), base + 13 * 0.8, '26M ops');
    close(serviceBusMonthly(200e6, prices), base + 87 * 0.8 + 100 * 0.5, '200M ops');
    close(serviceBusMonthly(3000e6, prices), base + 87 * 0.8 + 2400 * 0.5 + 500 * 0.2, '3,000M ops');
  });
});

describe('a million orders', () => {
  const order: OrderProfile = {
    name: 'success',
    tableTransactions: 11,
    serviceBus: { sends: 9, receives: 7, settlements: 7 },
    executions: { submitOrder: 1, scheduler: 4, inventoryAgent: 1 },
  };
  const durations = {
    submitOrder: { p50: 40, p95: 1200 },
    scheduler: { p50: 20, p95: 80 },
    inventoryAgent: { p50: 30, p95: 2050 },
  };

  it('prices operations, executions and both ends of compute', () => {
    const m = perMillionOrders(order, durations, 2048, prices, 300);
    close(m.serviceBus, 23 * 0.8, 'service bus');
    close(m.table, 11 * 0.036, 'table');
    close(m.executions, 6 * 0.4, 'executions');
    // Sparse p50: six executions, each billed 1 s, at 2 GB.
    close(m.gbSeconds.sparseP50, 12, 'GB-s p50');
    close(m.computeSparseP50, 12 * 1e6 * 0.000026, 'compute p50');
    // Sparse p95: 1.2 s + 4 × 1 s + 2.1 s.
    close(m.gbSeconds.sparseP95, (1.2 + 4 + 2.1) * 2, 'GB-s p95');
    // Busy: 300 ms of billed instance time per order.
    close(m.gbSeconds.busy ?? NaN, 0.6, 'GB-s busy');
    close(m.totalBusy ?? NaN, m.serviceBus + m.table + m.executions + 0.6 * 1e6 * 0.000026, 'total busy');
  });

  it('a 512 MB instance bills a quarter of the compute of a 2,048 MB one at equal durations', () => {
    const big = perMillionOrders(order, durations, 2048, prices, 300);
    const small = perMillionOrders(order, durations, 512, prices, 300);
    close(small.computeSparseP50 * 4, big.computeSparseP50, 'sparse');
    close((small.computeBusy ?? NaN) * 4, big.computeBusy ?? NaN, 'busy');
    close(small.serviceBus, big.serviceBus, 'service bus unchanged');
  });

  it('no busy figure without a measurement, and a function without a duration is an error', () => {
    assert.equal(perMillionOrders(order, durations, 2048, prices).totalBusy, null);
    assert.throws(
      () => perMillionOrders(order, { scheduler: durations.scheduler }, 2048, prices),
      /submitOrder/,
    );
  });
});

describe('a month at rest', () => {
  it('the base charge plus the Supervisor: 120 sweeps an hour, each billed alone', () => {
    const r = monthAtRest(120, 35, 1, 2048, prices);
    assert.equal(r.supervisorRunsPerMonth, 87_600);
    close(r.serviceBusBase, 9.855, 'base');
    close(r.supervisorGBSeconds, 87_600 * 2, 'GB-s');
    close(r.supervisorCompute, 175_200 * 0.000026, 'compute');
    close(r.table, (87_600 * 0.00036) / 1e4, 'table');
    // The free grant covers 100,000 GB-s and 250,000 executions.
    close(r.totalAfterFreeGrant, 9.855 + 75_200 * 0.000026 + r.table, 'after grant');
  });

  it('at 512 MB the sweeps fit in the free grant', () => {
    const r = monthAtRest(120, 35, 1, 512, prices);
    close(r.supervisorGBSeconds, 43_800, 'GB-s');
    close(r.totalAfterFreeGrant, 9.855 + r.table, 'after grant');
  });
});

describe('always ready', () => {
  it('one instance bills its baseline for every second of the month', () => {
    close(alwaysReadyBaselineMonthly(512, prices), 730 * 3600 * 0.5 * 0.000004, '512 MB');
    close(alwaysReadyBaselineMonthly(2048, prices), 730 * 3600 * 2 * 0.000004, '2,048 MB');
  });
});

describe('instance memory margin', () => {
  const sizes = [4096, 512, 2048];
  it('the smallest size whose half holds the peak', () => {
    assert.deepEqual(smallestInstance(200, sizes), { sizeMB: 512, usedShare: 200 / 512 });
    assert.deepEqual(smallestInstance(256, sizes)?.sizeMB, 512);
    assert.deepEqual(smallestInstance(257, sizes)?.sizeMB, 2048);
    assert.deepEqual(smallestInstance(1500, sizes)?.sizeMB, 4096);
  });
  it('none when even the largest is too small; nonsense is refused', () => {
    assert.equal(smallestInstance(3000, sizes), null);
    assert.throws(() => smallestInstance(0, sizes), RangeError);
    assert.throws(() => smallestInstance(100, sizes, 0), RangeError);
  });
});
