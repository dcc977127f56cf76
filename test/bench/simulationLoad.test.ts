import { test } from 'node:test';
import assert from 'node:assert/strict';
import {
  accountLoads,
  busiestPartitions,
  cpuBusyShare,
  indexPartitionRates,
  perOrderCounts,
  requestsPerOrder,
} from '../../bench/simulationLoad.js';

test('per account and table: requests let through and refused, per second of the window', () => {
  const before = {
    'table.account.devstoreaccount1.table.InFlight.query': 10,
    'table.account.devstoreaccount1.table.Orders.read': 4,
  };
  const after = {
    'table.account.devstoreaccount1.table.InFlight.query': 30,
    'table.account.devstoreaccount1.table.Orders.read': 44,
    'table.account.devstoreaccount1.table.OrderIndex.batch': 20,
    'table.account.devstoreaccount1.table.OrderIndex.throttled': 10,
    'table.account.orders2.table.Orders.write': 10,
    'table.account.orders2.transactions': 999, // not a per-table key
  };
  const l = accountLoads(before, after, 10);
  assert.deepEqual(l.devstoreaccount1, {
    requests: 2 + 4 + 2,
    throttled: 1,
    byTable: { InFlight: 2, Orders: 4, OrderIndex: 2 },
    throttledByTable: { OrderIndex: 1 },
  });
  assert.deepEqual(l.orders2, { requests: 1, throttled: 0, byTable: { Orders: 1 }, throttledByTable: {} });
  // 8 req/s in the window, 2 of them at rest: 6 per second of orders, at 2 orders/s 3 per order.
  assert.equal(requestsPerOrder(l.devstoreaccount1, { ...l.orders2, requests: 2 }, 2), 3);
  assert.ok(Number.isNaN(requestsPerOrder(l.devstoreaccount1, undefined, 0)));
});

test('OrderIndex partitions: entities read and written per second, every account pooled', () => {
  const r = indexPartitionRates(
    { 'table.part.OrderIndex/state:Pending:3.written': 5 },
    {
      'table.part.OrderIndex/state:Pending:3.written': 25,
      'table.part.OrderIndex/state:Pending:3.read': 5,
      'table.part.OrderIndex/state:Pending:3.requests': 50,
      'table.part.InFlight/7.written': 9,
    },
    5,
  );
  assert.deepEqual(r, { 'state:Pending:3': 5 });
});

test('CPU busy share between two samples', () => {
  assert.equal(cpuBusyShare({ busy: 100, total: 1000 }, { busy: 600, total: 2000 }), 0.5);
  assert.equal(cpuBusyShare({ busy: 1, total: 1 }, { busy: 1, total: 1 }), 0);
});

test('the busiest partitions by requests per second, and per-order answers and messages', () => {
  const before = { 'table.part.InFlight/(scan).requests': 2, 'table.status.404': 1, 'sb.sent': 10 };
  const after = {
    'table.part.InFlight/(scan).requests': 12,
    'table.part.Orders/abc.requests': 4,
    'table.part.Orders/abc.read': 40,
    'table.part.OrderIndex/state:Pending:1.requests': 0,
    'table.status.404': 21,
    'table.status.503': 10,
    'sb.sent': 30,
    'sb.abandoned': 2,
    'sb.delivered.scheduler': 99, // per entity: not a total
  };
  assert.deepEqual(busiestPartitions(before, after, 2, 1), { 'InFlight/(scan)': 5 });
  assert.deepEqual(busiestPartitions(before, after, 2, 5), { 'InFlight/(scan)': 5, 'Orders/abc': 2 });
  assert.deepEqual(perOrderCounts(before, after, 10), {
    'status.404': 2,
    'status.503': 1,
    'sb.sent': 2,
    'sb.abandoned': 0.2,
  });
  assert.deepEqual(perOrderCounts(before, after, 0), {});
});
