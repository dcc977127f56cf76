import { test } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { resolve } from 'node:path';
import {
  binding,
  ceilings,
  familyOf,
  mixLoads,
  monthlyCost,
  ordersPerMonth,
  partitionOperations,
  planFor,
  standardCredits,
  type Deployment,
  type OrderLoad,
} from '../../bench/capacityModel.js';
import { parseLimitTable } from '../../bench/limits.js';
import { parsePriceTable } from '../../bench/pricing.js';

const root = resolve(__dirname, '..', '..', '..');
const limits = parseLimitTable(JSON.parse(readFileSync(resolve(root, 'bench', 'limits.json'), 'utf8')));
const prices = parsePriceTable(JSON.parse(readFileSync(resolve(root, 'bench', 'prices.json'), 'utf8')));
const layout = { spreadTables: ['OrderIndex'] };

/** Roughly the success order of issue 23: 10 entities in each of two state partitions. */
const success: OrderLoad = {
  kind: 'success',
  sharedPartitions: [
    { table: 'OrderIndex', partition: 'state:Pending', requests: 2, read: 0, written: 10 },
    { table: 'OrderIndex', partition: 'state:Processing', requests: 2, read: 0, written: 10 },
    { table: 'OrderIndex', partition: 'state:Processed', requests: 1, read: 0, written: 5 },
    { table: 'ServiceHealth', partition: 'service-health', requests: 0.1, read: 0.1, written: 0 },
  ],
  tableRequests: 16,
  entities: [
    { entity: 'scheduler', sent: 4, received: 4, settled: 4, filterEvaluations: 0 },
    { entity: 'agent-inventory', sent: 1, received: 1, settled: 1, filterEvaluations: 0 },
    { entity: 'order-status', sent: 2, received: 0, settled: 0, filterEvaluations: 2 },
  ],
  bytesIn: 8000,
  bytesOut: 6000,
  executions: { submitOrder: 1, scheduler: 4 },
  executionMs: { submitOrder: 80, scheduler: 60 },
};

const standard: Deployment = {
  serviceBusTier: 'Standard',
  messagingUnits: 0,
  serviceBusNamespaces: 1,
  storageAccounts: 1,
  indexPartitionsPerState: 1,
  maxInstances: 100,
  perInstanceConcurrency: 16,
  instanceMemoryMB: 512,
};

const find = (cs: ReturnType<typeof ceilings>, prefix: string) => {
  const c = cs.find((x) => x.resource.trim().startsWith(prefix));
  assert.ok(c, `no ceiling starting with ${prefix}: ${cs.map((x) => x.resource).join('; ')}`);
  return c;
};

test('the limits file parses and every figure the model uses has a source', () => {
  assert.equal(limits.value('tablePartitionEntitiesPerSecond'), 2000);
  assert.equal(limits.value('storageAccountRequestsPerSecond'), 20000);
  assert.equal(limits.value('serviceBusStandardCreditsPerSecond'), 1000);
  for (const l of Object.values(limits.limits)) assert.match(l.source, /^https:\/\/learn\.microsoft\.com\//);
});

test('a limit without a value must say what was not found', () => {
  const doc = JSON.parse(readFileSync(resolve(root, 'bench', 'limits.json'), 'utf8')) as {
    limits: Record<string, { value: number | null; notFound?: string }>;
  };
  delete doc.limits.flexPerInstanceConcurrencyHttp.notFound;
  assert.throws(
    () => parseLimitTable(doc),
    /flexPerInstanceConcurrencyHttp: a null value must say what was not found/,
  );
  const missing = JSON.parse(readFileSync(resolve(root, 'bench', 'limits.json'), 'utf8')) as {
    limits: Record<string, unknown>;
  };
  delete missing.limits.tablePartitionEntitiesPerSecond;
  assert.throws(() => parseLimitTable(missing), /tablePartitionEntitiesPerSecond is missing/);
});

test('a partition family drops the shard number; a request that touches no entity counts one', () => {
  assert.equal(familyOf('state:Pending'), 'state:Pending');
  assert.equal(familyOf('state:Pending:07'), 'state:Pending:#');
  assert.equal(familyOf('state:Pending:7'), familyOf('state:Pending:12'));
  assert.equal(partitionOperations({ table: 't', partition: 'p', requests: 3, read: 0, written: 0 }), 3);
  assert.equal(partitionOperations({ table: 't', partition: 'p', requests: 2, read: 1, written: 10 }), 11);
});

test("today's layout caps the app at 200 orders/s on the state partitions", () => {
  const cs = ceilings(success, standard, limits, layout);
  const pending = find(cs, 'table partition OrderIndex/state:Pending');
  assert.equal(pending.perOrder, 10);
  assert.equal(pending.ordersPerSecond, 200);
  // Standard: (4+4) + (1+1) + (2+2 filter evaluations) = 14 credits per order.
  const ns = find(cs, 'Service Bus namespace, Standard credits');
  assert.equal(ns.perOrder, 14);
  assert.ok(Math.abs((ns.ordersPerSecond as number) - 1000 / 14) < 1e-9);
  assert.equal(find(cs, 'storage account').ordersPerSecond, 20000 / 16);
  // The binding resource is the lowest ceiling: the namespace (71) under the partitions (200).
  assert.equal(binding(cs).resource, ns.resource);
});

test('spreading the index over partitions and accounts divides the state partitions, not the rest', () => {
  const spread = ceilings(
    success,
    { ...standard, indexPartitionsPerState: 8, storageAccounts: 2 },
    limits,
    layout,
  );
  const pending = find(spread, 'table partition OrderIndex/state:Pending');
  assert.equal(pending.perOrder, 10 / 16);
  assert.equal(pending.ordersPerSecond, 3200);
  // A shared partition outside the spread tables does not move.
  assert.equal(find(spread, 'table partition ServiceHealth/service-health').ordersPerSecond, 2000 / 0.1);
  assert.equal(find(spread, 'storage account').ordersPerSecond, 2 * (20000 / 16));
});

test('partitions measured under a spread layout add up to their family', () => {
  const measured: OrderLoad = {
    ...success,
    sharedPartitions: [0, 1, 2, 3].map((i) => ({
      table: 'OrderIndex',
      partition: `state:Pending:${i}`,
      requests: 0.5,
      read: 0,
      written: 2.5,
    })),
  };
  const c = find(
    ceilings(measured, { ...standard, indexPartitionsPerState: 4 }, limits, layout),
    'table partition OrderIndex/state:Pending:#',
  );
  assert.equal(c.perOrder, 2.5);
  assert.equal(c.ordersPerSecond, 800);
});

test('Premium divides the busier direction of bytes into 4 MB/s per messaging unit', () => {
  const cs = ceilings(success, { ...standard, serviceBusTier: 'Premium', messagingUnits: 2 }, limits, layout);
  const ns = find(cs, 'Service Bus namespace, Premium 2 MU');
  assert.equal(ns.perOrder, 8000);
  assert.equal(ns.ordersPerSecond, (2 * 4_000_000) / 8000);
  assert.throws(
    () => ceilings(success, { ...standard, serviceBusTier: 'Premium', messagingUnits: 32 }, limits, layout),
    /at most 16/,
  );
});

test('function instances: instance-seconds per order over the instances allowed', () => {
  const c = find(ceilings(success, standard, limits, layout), 'function instances');
  // (1 x 80 ms + 4 x 60 ms) / 16 concurrent = 0.02 instance-seconds per order.
  assert.ok(Math.abs(c.perOrder - 0.02) < 1e-12);
  assert.ok(Math.abs((c.ordersPerSecond as number) - 5000) < 1e-6);
  // 2,048 MB instances: the regional quota (512,000 MB) allows 250, under a 1,000 maximum.
  const big = find(
    ceilings(success, { ...standard, maxInstances: 1000, instanceMemoryMB: 2048 }, limits, layout),
    'function instances',
  );
  assert.equal(big.limit, 250);
});

test('credits are sends, receives and filter evaluations, not settlements', () => {
  assert.equal(standardCredits({ entity: 'x', sent: 1, received: 2, settled: 5, filterEvaluations: 3 }), 6);
});

test('a mix weighs each kind by its share of the orders', () => {
  const retried: OrderLoad = {
    ...success,
    kind: 'retried',
    tableRequests: 26,
    sharedPartitions: [
      { table: 'OrderIndex', partition: 'state:Pending', requests: 4, read: 0, written: 20 },
    ],
    executions: { scheduler: 6 },
    executionMs: { scheduler: 100 },
  };
  const m = mixLoads([success, retried], { success: 3, retried: 1 });
  assert.equal(m.tableRequests, 0.75 * 16 + 0.25 * 26);
  assert.equal(
    m.sharedPartitions.find((p) => p.partition === 'state:Pending')?.written,
    0.75 * 10 + 0.25 * 20,
  );
  assert.equal(m.executions.scheduler, 0.75 * 4 + 0.25 * 6);
  // Durations mix by executions: (3 x 60 + 1.5 x 100) / 4.5.
  assert.ok(Math.abs(m.executionMs.scheduler - (3 * 60 + 1.5 * 100) / 4.5) < 1e-9);
  assert.throws(() => mixLoads([success], { other: 1 }), /no weight/);
  // A kind with no weight leaves its partitions at zero: they are not ceilings.
  const compensated: OrderLoad = {
    ...success,
    kind: 'compensated',
    sharedPartitions: [
      { table: 'OrderIndex', partition: 'state:Compensating', requests: 2, read: 0, written: 10 },
    ],
  };
  const onlySuccess = ceilings(mixLoads([success, compensated], { success: 1 }), standard, limits, layout);
  assert.equal(onlySuccess.filter((c) => c.resource.includes('Compensating')).length, 0);
});

test('a month: Standard by operations, Premium by messaging unit-hours', () => {
  const orders = ordersPerMonth(10, 0.1, prices);
  assert.equal(orders, 10 * 0.1 * 3600 * 730);
  const std = monthlyCost(success, standard, orders, prices);
  // 17 operations per order (sends + receives + settlements: 12 + 3 + 2) x 2.628M orders, past the 13M included.
  const ops = 17 * orders;
  assert.ok(Math.abs(std.serviceBus - (0.0135 * 730 + ((ops - 13e6) / 1e6) * 0.8)) < 1e-6);
  assert.ok(Math.abs(std.fixed - 0.0135 * 730) < 1e-9);
  assert.ok(Math.abs(std.table - (16 * orders * 0.00036) / 1e4) < 1e-9);
  const prem = monthlyCost(
    success,
    { ...standard, serviceBusTier: 'Premium', messagingUnits: 2 },
    orders,
    prices,
  );
  assert.ok(Math.abs(prem.serviceBus - 2 * 0.928 * 730) < 1e-9);
  assert.equal(prem.fixed, prem.serviceBus);
  assert.ok(Math.abs(prem.perMillionOrders - (prem.total / orders) * 1e6) < 1e-9);
});

test('the plan is the cheapest deployment that keeps every resource under the share', () => {
  const options = {
    share: 0.5,
    averageShare: 0.1,
    base: standard,
    choices: {
      messagingUnits: [1, 2, 4, 8, 16],
      serviceBusNamespaces: [1, 2],
      storageAccounts: [1, 2, 4, 8],
      indexPartitionsPerState: [1, 2, 4, 8, 16],
      maxInstances: [100, 1000],
    },
  };
  // 30 orders/s: Standard carries 71 at most, so 35 at half: Standard with nothing spread.
  const small = planFor(30, success, limits, layout, prices, options);
  assert.ok(small);
  assert.equal(small.deployment.serviceBusTier, 'Standard');
  assert.equal(small.deployment.indexPartitionsPerState, 1);
  assert.equal(small.deployment.storageAccounts, 1);
  // 2,000 orders/s: every resource at most half used.
  const big = planFor(2000, success, limits, layout, prices, options);
  assert.ok(big);
  for (const c of big.ceilings)
    if (c.ordersPerSecond !== null) assert.ok(c.ordersPerSecond * 0.5 >= 2000, c.resource);
  // The state partitions need 10 entities x 2,000 / 1,000 per partition = 20 partitions: 8 x 4 accounts (or more).
  assert.ok(big.deployment.indexPartitionsPerState * big.deployment.storageAccounts >= 20);
  // Out of reach with these choices: none.
  assert.equal(planFor(1e7, success, limits, layout, prices, options), null);
});

test('a table spread over a fixed count pools its partitions and divides by the count and the accounts', () => {
  const load: OrderLoad = {
    ...success,
    sharedPartitions: [
      { table: 'InFlight', partition: '75', requests: 0.25, read: 0, written: 0.25 },
      { table: 'InFlight', partition: 'a0', requests: 0.25, read: 0, written: 0.25 },
    ],
  };
  const d: Deployment = { ...standard, storageAccounts: 2 };
  const cs = ceilings(load, d, limits, { spreadTables: ['OrderIndex'], fixedSpread: { InFlight: 256 } });
  const row = cs.find((c) => c.resource.startsWith('table partition InFlight'));
  assert.ok(row, cs.map((c) => c.resource).join(', '));
  assert.equal(row.resource, 'table partition InFlight/* (each of 512)');
  assert.equal(row.perOrder, 0.5 / 512);
  assert.equal(cs.filter((c) => c.resource.includes('InFlight')).length, 1, 'no row per measured partition');
});
