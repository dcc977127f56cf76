import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import type { AzuriteInstance } from '../../local/azurite.js';
import type { ProcessState } from '../../shared/domain/index.js';
import type { StateStore } from '../../shared/stateStore/index.js';
import { at, pool, step, submitNew, withStore } from './harness.js';

let azurite: AzuriteInstance;
let store: StateStore;

before(async () => {
  ({ azurite, store } = await withStore());
});
after(async () => {
  await azurite.stop();
});

test('listing by state pages through continuation tokens without gaps or duplicates', async () => {
  const pending = await pool(7, 4, () => submitNew(store));
  const processing = await pool(5, 4, async () =>
    step(store, await submitNew(store), { type: 'Claim', by: 'A' }, at(1)),
  );
  const seen = async (state: ProcessState, pageSize: number): Promise<string[]> => {
    const ids: string[] = [];
    let token: string | undefined;
    let pages = 0;
    do {
      const page = await store.listOrdersByState(state, token, pageSize);
      assert.ok(page.items.length <= pageSize);
      for (const item of page.items) assert.equal(item.processState, state);
      ids.push(...page.items.map((i) => i.orderId));
      token = page.continuationToken;
      pages += 1;
      assert.ok(pages < 50);
    } while (token);
    return ids;
  };
  const p = await seen('Pending', 3);
  assert.equal(p.length, 7);
  assert.deepEqual(new Set(p), new Set(pending.map((o) => o.state.orderId)));
  const q = await seen('Processing', 2);
  assert.deepEqual(new Set(q), new Set(processing.map((o) => o.state.orderId)));
  assert.equal(q.length, 5);
  assert.deepEqual(await seen('Error', 10), []);
  await assert.rejects(store.listOrdersByState('Bogus' as ProcessState), RangeError);
  await assert.rejects(store.listOrdersByState('Pending', undefined, 0), RangeError);
});
