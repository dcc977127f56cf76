import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import type { AzuriteInstance } from '../../local/azurite.js';
import type { StateStore } from '../../shared/stateStore/index.js';
import { withStore } from './harness.js';

/** The repair passes' ledger row against Azurite: pass times, the cursor, ETag-guarded saves. */
let azurite: AzuriteInstance;
let store: StateStore;

before(async () => {
  ({ azurite, store } = await withStore());
});
after(async () => {
  await azurite.stop();
});

test('the ledger keeps the cursor and the pass times; a save over a changed row is refused', async () => {
  const ledger = store.index.repairs;
  await store.index.table.deleteEntity('reconcile', 'cursor').catch(() => undefined);
  assert.deepEqual(await ledger.read(), { cursor: null, record: {} });

  const started = new Date('2030-01-02T03:00:30.000Z');
  assert.equal(
    await ledger.save({ stage: 'orders', full: true }, { underWay: 'full', fullStartedAt: started }),
    true,
  );
  assert.equal(
    await ledger.save({ stage: 'orders' }, { underWay: 'hourly' }),
    false,
    'a second creator loses',
  );
  const first = await ledger.read();
  assert.deepEqual(first.cursor, { stage: 'orders', full: true });
  assert.deepEqual(first.record, { underWay: 'full', fullStartedAt: started });
  assert.ok(first.etag);

  const next = { stage: 'entries:Pending' as const, token: 'abc', full: true };
  assert.equal(await ledger.save(next, first.record, first.etag), true);
  assert.equal(await ledger.save(null, {}, first.etag), false, 'a stale ETag loses: the newer cursor stays');
  const second = await ledger.read();
  assert.deepEqual(second.cursor, next);

  // Through: no pass under way, the times stay (they decide what is due next).
  assert.equal(await ledger.save(null, { fullStartedAt: started }, second.etag), true);
  const idle = await ledger.read();
  assert.deepEqual([idle.cursor, idle.record], [null, { fullStartedAt: started }]);
});

test('a cursor row as earlier releases wrote it (no pass times, no Idle) is an hourly pass under way', async () => {
  await store.index.table.upsertEntity(
    { partitionKey: 'reconcile', rowKey: 'cursor', Stage: 'orders', Token: 'tok', Full: false },
    'Replace',
  );
  const read = await store.index.repairs.read();
  assert.deepEqual([read.cursor, read.record], [{ stage: 'orders', token: 'tok' }, { underWay: 'hourly' }]);
  assert.equal((await store.index.summary()).count, 0, 'the ledger row is not an in-flight order');
});
