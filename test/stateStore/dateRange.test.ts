import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import type { AzuriteInstance } from '../../local/azurite.js';
import type { IndexFilter, StateStore } from '../../shared/stateStore/index.js';
import { at, pool, submitNew, withStore } from './harness.js';

/**
 * Issue 27 item 4: the index's time key is 13 digits only between 1970 and 2286. A filter date
 * outside that range must mean what it says (before 1970: no order is older; after 2286: none is
 * newer), not wrap around and select every order, which a bulk action then acts on.
 */
let azurite: AzuriteInstance;
let store: StateStore;

before(async () => {
  ({ azurite, store } = await withStore());
});
after(async () => {
  await azurite.stop();
});

test('dates outside 1970..2286 in a list filter select what they say', async () => {
  const orders = await pool(3, 3, (i) => submitNew(store, at(i)));
  const all = orders.map((o) => o.state.orderId).sort();
  const ids = async (f: Omit<IndexFilter, 'state'>) =>
    (await store.listOrders({ state: 'Pending', ...f }, undefined, 50)).items.map((i) => i.orderId).sort();
  const d = (iso: string) => new Date(iso);
  assert.deepEqual(await ids({ to: d('1900-01-01T00:00:00Z') }), [], 'to 1900: none');
  assert.deepEqual(await ids({ to: d('1969-12-31T23:59:59.999Z') }), [], 'to 1969: none');
  assert.deepEqual(await ids({ from: d('0001-01-01T00:00:00Z') }), all, 'from year 1: all');
  assert.deepEqual(await ids({ from: d('2300-01-01T00:00:00Z') }), [], 'from 2300: none');
  assert.deepEqual(await ids({ to: d('2300-01-01T00:00:00Z') }), all, 'to 2300: all');
  assert.deepEqual(
    await ids({ from: d('1900-01-01T00:00:00Z'), to: d('9999-12-31T23:59:59Z') }),
    all,
    '1900 to 9999: all',
  );
  assert.deepEqual(
    await ids({ customerId: 'c-1', to: d('1900-01-01T00:00:00Z') }),
    [],
    'one customer, to 1900',
  );
});
