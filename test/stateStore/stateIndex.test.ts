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
