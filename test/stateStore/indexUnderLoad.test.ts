import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { RestError, odata, type TableClient, type TransactionAction } from '@azure/data-tables';
import type { AzuriteInstance } from '../../local/azurite.js';
import { StateStore } from '../../shared/stateStore/index.js';
import type { IndexedOrder } from '../../shared/stateStore/stateIndex.js';
import { at, step, submitNew, withStore } from './harness.js';

/**
 * The state index when its partition is throttled (the throttled simulation's partition runs,
 * docs/performance.md): a refusal past the table client's own retries must neither drop the
 * order's removal from its previous state (the group stays, over-counted, until the hourly repair
 * pays for it) nor cost a read of a counter the refusal did not change.
 */
let azurite: AzuriteInstance;
let store: StateStore;

before(async () => {
  ({ azurite, store } = await withStore());
});
after(async () => {
  await azurite.stop();
});

const serverBusy = () => new RestError('The server is busy.', { statusCode: 503, code: 'ServerBusy' });

/** The index table refuses its next transaction that `matches`, once, as Azure does under load. */
function refuseNextTransaction(matches: (actions: TransactionAction[]) => boolean): () => number {
  const table = store.stateIndex.table;
  const real = table.submitTransaction.bind(table);
  let refused = 0;
  table.submitTransaction = async (actions, ...rest) => {
    if (refused === 0 && matches(actions)) {
      refused += 1;
      delete (table as Partial<TableClient>).submitTransaction;
      throw serverBusy();
    }
    return real(actions, ...rest);
  };
  return () => refused;
}

test('a refused removal from the previous state is tried again: the order is not left counted there', async () => {
  const submitted = await submitNew(store, at(0));
  const orderId = submitted.state.orderId;
  const base = await store.countsPerState();
  const refused = refuseNextTransaction((actions) => actions.some(([kind]) => kind === 'delete'));
  await step(store, submitted, { type: 'Claim', by: 'A' }, at(1));
  assert.equal(refused(), 1, 'the removal was refused once');
  // Tried again in the background (the claim is not held): within the patience's first tries.
  const group = {
    state: 'Pending' as const,
    since: submitted.stateSince ?? submitted.state.updatedAt,
    orderId,
  };
  let stillPending = await store.stateIndex.has(group);
  for (let waited = 0; stillPending && waited < 15_000; waited += 250) {
    await new Promise((r) => setTimeout(r, 250));
    stillPending = await store.stateIndex.has(group);
  }
  const counts = await store.countsPerState();
  assert.equal(
    stillPending,
    false,
    `the Pending group is still there after the claim (Pending count ${counts.Pending - base.Pending + 1} for this order)`,
  );
  assert.equal(counts.Pending - base.Pending, -1);
  assert.equal(counts.Processing - base.Processing, 1);
});

test('a move refused with ServerBusy keeps its counter ETag: trying again reads no counter', async () => {
  const index = store.stateIndex;
  const entry = (orderId: string): IndexedOrder => ({
    orderId,
    state: 'Compensating',
    since: at(50),
    customerId: 'c-1',
    workflow: 'order',
    workflowVersion: 1,
  });
  // Two orders of the same partition: the second's move uses the shard the first one's left known.
  const first = randomUUID();
  const partition = index.layout.partitionFor('Compensating', first);
  let second = randomUUID();
  while (index.layout.partitionFor('Compensating', second) !== partition) second = randomUUID();
  assert.equal(await index.enter(entry(first)), true);

  const table = index.table;
  const real = table.getEntity.bind(table);
  let counterReads = 0;
  table.getEntity = ((pk: string, rk: string, options?: object) => {
    if (pk === partition && rk.startsWith('n:')) counterReads += 1;
    return real(pk, rk, options);
  }) as TableClient['getEntity'];
  try {
    refuseNextTransaction(() => true);
    await assert.rejects(index.enter(entry(second)), /server is busy/);
    assert.equal(await index.enter(entry(second)), true);
    assert.equal(counterReads, 0, `the move read its counter ${counterReads} time(s) after a ServerBusy`);
  } finally {
    delete (table as Partial<TableClient>).getEntity;
  }
  const counts = await store.countsPerState();
  assert.equal(counts.Compensating, 2, 'each group counted once');
});

/** One process entering `n` orders of one partition at once; the batches refused and the shards. */
async function enterAtOnce(
  partitions: number,
  n: number,
): Promise<{ conflicts: number[]; shards: number[]; counted: number }> {
  const suffix = randomUUID().replace(/-/g, '').slice(0, 8);
  const opened = await StateStore.open(
    { kind: 'connectionString', connectionString: azurite.connectionString },
    {
      ordersTable: `Orders${suffix}`,
      inFlightTable: `InFlight${suffix}`,
      stateIndexTable: `OrderIndex${suffix}`,
      stateIndexPartitions: partitions,
    },
  );
  const index = opened.stateIndex;
  const first = randomUUID();
  const partition = index.layout.partitionFor('Processed', first);
  const ids = [first];
  while (ids.length < n) {
    const id = randomUUID();
    if (index.layout.partitionFor('Processed', id) === partition) ids.push(id);
  }
  const table = index.table;
  const real = table.submitTransaction.bind(table);
  const conflicts: number[] = [];
  table.submitTransaction = (async (actions: TransactionAction[], ...rest: []) => {
    try {
      return await real(actions, ...rest);
    } catch (e) {
      conflicts.push((e as RestError).statusCode ?? 0);
      throw e;
    }
  }) as TableClient['submitTransaction'];
  await Promise.all(
    ids.map((orderId) =>
      index.enter({
        orderId,
        state: 'Processed',
        since: at(70),
        customerId: 'c-1',
        workflow: 'order',
        workflowVersion: 1,
      }),
    ),
  );
  const shards: number[] = [];
  for await (const row of table.listEntities<{ Count?: number }>({
    queryOptions: { filter: odata`PartitionKey eq ${partition} and RowKey ge ${'n:'} and RowKey lt ${'n;'}` },
  }))
    shards.push(Number(row.Count ?? 0));
  return { conflicts, shards, counted: (await opened.countsPerState()).Processed };
}

/**
 * When the partitions bind, each carries the same moves per second whatever P (that is why raising P
 * raises the ceiling), so a partition needs as many counter shards at P = 2 as at P = 1: with 16 a
 * state spread over P partitions, each shard of a P = 2 partition took twice the moves per second and
 * the simulation measured more 412s per order at P = 2 than at P = 1 (docs/performance.md).
 */
for (const partitions of [1, 2, 4]) {
  test(`at P = ${partitions} a partition takes 16 moves of one process at once without a conflict`, async () => {
    const { conflicts, shards, counted } = await enterAtOnce(partitions, 16);
    assert.deepEqual(
      conflicts,
      [],
      `${conflicts.length} batches refused (${conflicts.join(', ')}) on ${shards.length} shards`,
    );
    assert.equal(shards.length, 16, `${shards.length} counter shards in the partition`);
    assert.equal(
      shards.reduce((a, b) => a + b, 0),
      16,
    );
    assert.equal(counted, 16);
  });
}

test('more moves of one process at once than shards: each waits for a shard of its own, none collides', async () => {
  const { conflicts, shards, counted } = await enterAtOnce(2, 40);
  assert.deepEqual(
    conflicts,
    [],
    `${conflicts.length} batches refused (${conflicts.join(', ')}) on ${shards.length} shards`,
  );
  assert.equal(
    shards.reduce((a, b) => a + b, 0),
    40,
  );
  assert.equal(counted, 40);
});
