import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import type { AzuriteInstance } from '../../local/azurite.js';
import type { StateStore, StoreMetrics } from '../../shared/stateStore/index.js';
import { at, pool, step, submitNew, withStore } from './harness.js';

let azurite: AzuriteInstance;
let store: StateStore;
let metrics: StoreMetrics;

before(async () => {
  ({ azurite, store, metrics } = await withStore());
});
after(async () => {
  await azurite.stop();
});

test('a list page reads O(page): no table scan, and the same entities with 3 or 120 other orders', async () => {
  const pending = await pool(4, 4, () => submitNew(store, at(0)));
  const claimOne = async () => step(store, await submitNew(store, at(0)), { type: 'Claim', by: 'A' }, at(1));
  await pool(3, 3, claimOne);
  metrics.reset();
  const small = await store.listOrdersByState('Pending', undefined, 3);
  const smallReads = metrics.entitiesRead;
  assert.equal(metrics.tableScans, 0, `the listing scanned the table ${metrics.tableScans} time(s)`);
  await pool(120, 8, claimOne);
  metrics.reset();
  const large = await store.listOrdersByState('Pending', undefined, 3);
  assert.equal(metrics.tableScans, 0);
  assert.equal(small.items.length, 3);
  assert.equal(large.items.length, 3);
  assert.ok(metrics.entitiesRead <= smallReads * 1.5, `${metrics.entitiesRead} vs ${smallReads}`);
  for (const item of large.items) assert.ok(pending.some((p) => p.state.orderId === item.orderId));
});

test('filters by customer, workflow version and time; unconfirmed entries are hidden; counts and changes follow', async () => {
  const base = await store.countsPerState();
  const a = await submitNew(store, at(1000));
  const b = await submitNew(store, at(1001));
  const moved = await step(store, await submitNew(store, at(1002)), { type: 'Claim', by: 'A' }, at(1003));
  const counts = await store.countsPerState();
  assert.equal(counts.Pending - base.Pending, 2);
  assert.equal(counts.Processing - base.Processing, 1);

  const byTime = await store.listOrders({ state: 'Pending', from: at(1000), to: at(1001) }, undefined, 10);
  assert.deepEqual(
    byTime.items.map((i) => i.orderId),
    [b.state.orderId, a.state.orderId],
    'newest first, only the range',
  );
  const byCustomer = await store.listOrders(
    { state: 'Pending', customerId: 'c-1', from: at(1000) },
    undefined,
    10,
  );
  assert.equal(byCustomer.items.length, 2);
  assert.equal(byCustomer.items[0].customerId, 'c-1');
  assert.equal(
    (await store.listOrders({ state: 'Pending', customerId: 'nobody' }, undefined, 10)).items.length,
    0,
  );
  const v1 = await store.listOrders(
    { state: 'Processing', workflowVersion: 1, from: at(1003) },
    undefined,
    10,
  );
  assert.deepEqual(
    v1.items.map((i) => [i.orderId, i.workflowVersion]),
    [[moved.state.orderId, 1]],
  );
  assert.equal(
    (await store.listOrders({ state: 'Processing', workflowVersion: 2 }, undefined, 10)).items.length,
    0,
  );
  // The order left Pending: it is not listed there (its old entry was deleted after the transition).
  const pendingNow = await store.listOrders({ state: 'Pending', from: at(1002) }, undefined, 10);
  assert.deepEqual(pendingNow.items, []);

  // An entry its state row does not confirm (a transition that died after writing it) is hidden.
  await store.stateIndex.enter({
    orderId: a.state.orderId,
    state: 'Error',
    since: at(1500),
    customerId: 'c-1',
    workflow: 'order',
    workflowVersion: 1,
  });
  assert.deepEqual((await store.listOrders({ state: 'Error', from: at(1400) }, undefined, 10)).items, []);

  const { changes } = await store.changes(at(1000.5), at(1003));
  assert.deepEqual(
    changes.map((c) => [c.orderId, c.processState]),
    [
      [b.state.orderId, 'Pending'],
      [moved.state.orderId, 'Processing'],
    ],
  );
});
