import { test } from 'node:test';
import assert from 'node:assert/strict';
import {
  orderLoad,
  sharedPartitions,
  withoutBackground,
  type OrderWindow,
} from '../../bench/capacityLoad.js';

const window = (orderId: string, counts: Record<string, number>, fns: string[] = []): OrderWindow => ({
  kind: 'success',
  orderId,
  seconds: 2,
  counts,
  invocations: fns.map((fn, i) => ({ fn, ok: true, end: i, durationMs: 10 * (i + 1) })),
});

test('the background rate comes off each window, never below zero', () => {
  assert.deepEqual(withoutBackground({ a: 5, b: 1, c: 2 }, { a: 1, b: 2 }, 2), { a: 3, c: 2 });
});

test('a partition is shared when more than one order touched it', () => {
  const ws = [
    window('o1', {
      'table.part.Orders/o1.requests': 3,
      'table.part.OrderIndex/state:Pending.requests': 2,
      'table.part.InFlight/(scan).requests': 1,
    }),
    window('o2', {
      'table.part.Orders/o2.requests': 3,
      'table.part.OrderIndex/state:Pending.requests': 2,
      'table.part.InFlight/(scan).requests': 0.6,
    }),
    // A trace left by the background after subtraction does not count as a touch; nor does a
    // scan, which names no partition (the Supervisor's sweep, on a clock).
    window('o3', { 'table.part.Orders/o1.requests': 0.2 }),
  ];
  assert.deepEqual([...sharedPartitions(ws)], ['OrderIndex/state:Pending']);
});

test('in a spread table a partition is shared when its family is, even if one order touched it', () => {
  const ws = [
    window('o1', {
      'table.part.OrderIndex/state:Pending:3.requests': 2,
      'table.part.InFlight/7a.requests': 1,
      'table.part.Orders/o1.requests': 3,
    }),
    window('o2', {
      'table.part.OrderIndex/state:Pending:17.requests': 2,
      'table.part.InFlight/c4.requests': 1,
      'table.part.Orders/o2.requests': 3,
    }),
  ];
  const layout = { spreadTables: ['OrderIndex'], fixedSpread: { InFlight: 256 } };
  assert.deepEqual([...sharedPartitions(ws, layout)].sort(), [
    'InFlight/7a',
    'InFlight/c4',
    'OrderIndex/state:Pending:17',
    'OrderIndex/state:Pending:3',
  ]);
  assert.deepEqual([...sharedPartitions(ws)], [], 'without the layout nothing is shared');
});

test('an order load is the mean over windows of the shared partitions, entities, bytes and executions', () => {
  const ws = [
    window(
      'o1',
      {
        'table.part.OrderIndex/state:Pending.requests': 2,
        'table.part.OrderIndex/state:Pending.written': 10,
        'table.part.Orders/o1.written': 4,
        'table.transactions': 16,
        'sb.sent.order-status': 2,
        'sb.sent.scheduler': 4,
        'sb.delivered.scheduler': 4,
        'sb.settled.scheduler': 4,
        'amqp.out.transferBytes': 8000,
        'amqp.in.transferBytes': 6000,
        'amqp.out.bytes.scheduler': 3000,
        'amqp.in.bytes.scheduler': 2000,
        'amqp.out.bytes.$cbs': 500,
      },
      ['submitOrder', 'scheduler', 'supervisor'],
    ),
    window(
      'o2',
      {
        'table.part.OrderIndex/state:Pending.requests': 2,
        'table.part.OrderIndex/state:Pending.written': 12,
        'table.transactions': 18,
      },
      ['scheduler'],
    ),
  ];
  const load = orderLoad('success', ws, new Set(['OrderIndex/state:Pending']), { 'order-status': 1 });
  assert.deepEqual(load.sharedPartitions, [
    { table: 'OrderIndex', partition: 'state:Pending', requests: 2, read: 0, written: 11 },
  ]);
  assert.equal(load.tableRequests, 17);
  assert.deepEqual(load.entities, [
    { entity: '$cbs', sent: 0, received: 0, settled: 0, filterEvaluations: 0, bytesIn: 250, bytesOut: 0 },
    {
      entity: 'order-status',
      sent: 1,
      received: 0,
      settled: 0,
      filterEvaluations: 1,
      bytesIn: 0,
      bytesOut: 0,
    },
    {
      entity: 'scheduler',
      sent: 2,
      received: 2,
      settled: 2,
      filterEvaluations: 0,
      bytesIn: 1500,
      bytesOut: 1000,
    },
  ]);
  assert.equal(load.bytesIn, 4000);
  assert.equal(load.bytesOut, 3000);
  // The Supervisor runs on a clock: not an execution per order.
  assert.deepEqual(load.executions, { submitOrder: 0.5, scheduler: 1 });
  assert.throws(() => orderLoad('none', [], new Set(), {}), /no orders/);
});
