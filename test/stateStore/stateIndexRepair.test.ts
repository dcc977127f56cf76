import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { odata, type TransactionAction } from '@azure/data-tables';
import type { AzuriteInstance } from '../../local/azurite.js';
import { decide, orderWorkflow, type ProcessState } from '../../shared/domain/index.js';
import type { ReconcileCursor, StateStore } from '../../shared/stateStore/index.js';
import { orderToRow, stateToRow, stepToRow } from '../../shared/stateStore/rows.js';
import { startAzurite } from '../../local/azurite.js';
import { newOrder, policy, step, submitNew } from './harness.js';
import { StateStore as Store } from '../../shared/stateStore/index.js';

/**
 * The state index's counts and its repair: crashes between an order's transaction and the index
 * writes around it, orders stored before the index existed, a lost index table. Each test opens
 * its own tables, so its counts are exactly its own orders.
 */
let azurite: AzuriteInstance;

before(async () => {
  azurite = await startAzurite({ services: ['table'] });
});
after(async () => {
  await azurite.stop();
});

async function freshStore(): Promise<StateStore> {
  const suffix = randomUUID().replace(/-/g, '').slice(0, 8);
  return Store.open(
    { kind: 'connectionString', connectionString: azurite.connectionString },
    {
      ordersTable: `Orders${suffix}`,
      inFlightTable: `InFlight${suffix}`,
      stateIndexTable: `OrderIndex${suffix}`,
    },
  );
}

/** Wall-clock minutes ago: entries older than the readers' grace (2 min) may be removed. */
const minutesAgo = (m: number, plusSeconds = 0): Date =>
  new Date(Date.now() - m * 60_000 + plusSeconds * 1000);

const none = { Pending: 0, Processing: 0, Compensating: 0, Processed: 0, Compensated: 0, Error: 0 };
const expectCounts = (partial: Partial<Record<ProcessState, number>>) => ({ ...none, ...partial });

async function reconcilePass(
  store: StateStore,
  full: boolean,
  pageSize = 2,
): Promise<{ reindexed: number; unlisted: number; pages: number }> {
  let cursor: ReconcileCursor | null = { stage: 'orders', ...(full ? { full: true } : {}) };
  const total = { reindexed: 0, unlisted: 0, pages: 0 };
  while (cursor) {
    const r = await store.reconcilePage(cursor, pageSize);
    total.reindexed += r.reindexed;
    total.unlisted += r.unlisted;
    total.pages += 1;
    cursor = r.next;
  }
  return total;
}

/** Every entity of the store's state index (what a lost table or an older release leaves). */
async function wipeStateIndex(store: StateStore): Promise<void> {
  const byPartition = new Map<string, TransactionAction[]>();
  for await (const e of store.stateIndex.table.listEntities()) {
    const list = byPartition.get(e.partitionKey!) ?? [];
    list.push(['delete', { partitionKey: e.partitionKey!, rowKey: e.rowKey! }]);
    byPartition.set(e.partitionKey!, list);
  }
  for (const actions of byPartition.values()) {
    for (let i = 0; i < actions.length; i += 100)
      await store.stateIndex.table.submitTransaction(actions.slice(i, i + 100));
  }
}

test('the oldest in-flight order is found from the index, across states', async () => {
  const store = await freshStore();
  const a = await submitNew(store, minutesAgo(10));
  const b = await submitNew(store, minutesAgo(9));
  await step(store, b, { type: 'Claim', by: 'A' }, minutesAgo(8));
  assert.equal(
    (await store.oldestInFlight())?.orderId,
    a.state.orderId,
    'Pending since -10 min is the oldest',
  );
  await step(store, (await store.load(a.state.orderId))!, { type: 'Claim', by: 'A' }, minutesAgo(7));
  assert.equal((await store.oldestInFlight())?.orderId, b.state.orderId, 'now Processing since -8 min is');
});

test('a transition whose index writes after the transaction were lost is counted once, after a reader saw it', async () => {
  const store = await freshStore();
  const orders = [];
  for (let i = 0; i < 3; i++) orders.push(await submitNew(store, minutesAgo(10, i)));
  await step(store, orders[0], { type: 'Claim', by: 'A' }, minutesAgo(9));
  // The process dies right after the order's transaction: nothing it would write next arrives.
  const crashed = store as unknown as Record<string, { leave?: unknown; move?: unknown }>;
  const saved = { leave: store.stateIndex.leave, move: crashed.counts?.move };
  const lost = () => Promise.reject(new Error('process died after the transaction'));
  store.stateIndex.leave = lost;
  if (crashed.counts) crashed.counts.move = lost;
  await step(store, orders[1], { type: 'Claim', by: 'A' }, minutesAgo(8));
  store.stateIndex.leave = saved.leave;
  if (crashed.counts) crashed.counts.move = saved.move;

  const listed = await store.listOrders({ state: 'Pending' }, undefined, 10);
  assert.deepEqual(
    listed.items.map((i) => i.orderId),
    [orders[2].state.orderId],
    'the stale entry is hidden',
  );
  assert.deepEqual(await store.countsPerState(), expectCounts({ Pending: 1, Processing: 2 }));
});

test('a group entered for a transaction that never happened is removed by the full pass, and the counts follow', async () => {
  const store = await freshStore();
  const a = await submitNew(store, minutesAgo(10));
  await submitNew(store, minutesAgo(10, 1));
  // A transition to Error that died before its transaction: listed under Error, nobody lists Error.
  await store.stateIndex.enter({
    orderId: a.state.orderId,
    state: 'Error',
    since: minutesAgo(5),
    customerId: 'c-1',
    workflow: 'order',
    workflowVersion: 1,
  });
  assert.deepEqual(
    await store.countsPerState(),
    expectCounts({ Pending: 2, Error: 1 }),
    'over by one until repaired',
  );
  const hourly = await reconcilePass(store, false);
  assert.equal(hourly.unlisted, 0, 'the hourly pass does not read the index');
  const full = await reconcilePass(store, true);
  assert.equal(full.unlisted, 1);
  assert.deepEqual(await store.countsPerState(), expectCounts({ Pending: 2 }));
  // Within the grace an unconfirmed entry stays: its transaction may still be on its way.
  await store.stateIndex.enter({
    orderId: a.state.orderId,
    state: 'Error',
    since: new Date(),
    customerId: 'c-1',
    workflow: 'order',
    workflowVersion: 1,
  });
  assert.equal((await reconcilePass(store, true)).unlisted, 0);
});

test('orders stored before the state index are entered by the hourly pass, counted once, and skipped next time', async () => {
  const store = await freshStore();
  // What an older release wrote: order, state and step rows, no StateSince, no index entries.
  const ids: string[] = [];
  for (let i = 0; i < 5; i++) {
    const orderId = randomUUID();
    const now = minutesAgo(30, i);
    let d = decide(orderWorkflow, null, { type: 'Submit', orderId }, now, policy);
    if (i < 2) d = decide(orderWorkflow, d.state, { type: 'Claim', by: 'A' }, now, policy);
    const actions: TransactionAction[] = [
      ['create', orderToRow(newOrder(orderId), { name: d.state.workflow, version: 1 })],
      ['create', stateToRow(d.state)],
      ...d.state.steps.map((st, j): TransactionAction => ['create', stepToRow(orderId, j, st)]),
    ];
    await store.orders.submitTransaction(actions);
    ids.push(orderId);
  }
  assert.deepEqual(await store.countsPerState(), expectCounts({}));
  assert.equal((await store.listOrders({ state: 'Pending' }, undefined, 10)).items.length, 0);

  const pass = await reconcilePass(store, false);
  assert.equal(pass.reindexed, 5);
  assert.ok(pass.pages >= 3, 'paged: 5 rows, 2 per page');
  assert.deepEqual(await store.countsPerState(), expectCounts({ Pending: 3, Processing: 2 }));
  const pending = await store.listOrders({ state: 'Pending' }, undefined, 10);
  assert.deepEqual(pending.items.map((i) => i.orderId).sort(), ids.slice(2).sort());
  assert.equal(pending.items[0].customerId, 'c-1', 'the customer comes from the order row');
  assert.equal((await store.oldestInFlight())?.orderId, ids[0]);
  // Backfilled rows now carry StateSince: the next hourly pass enters nothing and counts nothing twice.
  assert.equal((await reconcilePass(store, false)).reindexed, 0);
  assert.deepEqual(await store.countsPerState(), expectCounts({ Pending: 3, Processing: 2 }));
  // And a backfilled order moves on like any other.
  const moved = await step(store, (await store.load(ids[2]))!, { type: 'Claim', by: 'A' }, minutesAgo(1));
  assert.equal(moved.state.processState, 'Processing');
  assert.deepEqual(await store.countsPerState(), expectCounts({ Pending: 2, Processing: 3 }));
});

test('a lost index table is rebuilt by the full pass, not the hourly one', async () => {
  const store = await freshStore();
  const orders = [];
  for (let i = 0; i < 4; i++) orders.push(await submitNew(store, minutesAgo(20, i)));
  await step(store, orders[0], { type: 'Claim', by: 'A' }, minutesAgo(19));
  await wipeStateIndex(store);
  assert.equal((await reconcilePass(store, false)).reindexed, 0);
  assert.equal((await reconcilePass(store, true)).reindexed, 4);
  assert.deepEqual(await store.countsPerState(), expectCounts({ Pending: 3, Processing: 1 }));
  assert.equal((await reconcilePass(store, true)).reindexed, 0, 'a second full pass finds nothing to do');
});

test('concurrent writers of one group count it once: entering twice, leaving twice', async () => {
  const store = await freshStore();
  const group = {
    orderId: randomUUID(),
    state: 'Processing' as const,
    since: minutesAgo(3),
    customerId: 'c-2',
    workflow: 'order',
    workflowVersion: 1,
  };
  await Promise.all([
    store.stateIndex.enter(group),
    store.stateIndex.enter(group),
    store.stateIndex.enter(group),
  ]);
  assert.deepEqual(await store.countsPerState(), expectCounts({ Processing: 1 }));
  const others = Array.from({ length: 20 }, (_, i) => ({
    ...group,
    orderId: randomUUID(),
    since: minutesAgo(2, i),
  }));
  await Promise.all(others.map((o) => store.stateIndex.enter(o)));
  assert.deepEqual(
    await store.countsPerState(),
    expectCounts({ Processing: 21 }),
    'racing counter shards lose nothing',
  );
  const left = await Promise.all([store.stateIndex.leave(group), store.stateIndex.leave(group)]);
  assert.deepEqual(left.sort(), [false, true], 'one of the two removed it');
  await Promise.all(others.map((o) => store.stateIndex.leave(o)));
  assert.deepEqual(await store.countsPerState(), expectCounts({}));
  const rest = store.stateIndex.table.listEntities({
    queryOptions: {
      filter: odata`PartitionKey ge ${'state:'} and PartitionKey lt ${'state;'} and (RowKey lt ${'n:'} or RowKey ge ${'n;'})`,
    },
  });
  for await (const e of rest) assert.fail(`entry left behind: ${e.partitionKey} ${e.rowKey}`);
});

test('one instance reads each counter shard at most once; a shard another instance wrote is read again, and the counts stay exact', async () => {
  const a = await freshStore();
  const suffix = a.stateIndex.table.tableName;
  // A second instance (another host) on the same tables.
  const b = await Store.open(
    { kind: 'connectionString', connectionString: azurite.connectionString },
    {
      ordersTable: a.orders.tableName,
      inFlightTable: a.index.table.tableName,
      stateIndexTable: suffix,
    },
  );
  const group = (i: number) => ({
    orderId: randomUUID(),
    state: 'Pending' as const,
    since: minutesAgo(4, i),
    customerId: 'c-3',
    workflow: 'order',
    workflowVersion: 1,
  });
  const before = a.metrics.byMethod.GET ?? 0;
  const groups = Array.from({ length: 40 }, (_, i) => group(i));
  for (const g of groups) await a.stateIndex.enter(g);
  const counterReads = (a.metrics.byMethod.GET ?? 0) - before;
  const partitions = new Set(groups.map((g) => a.stateIndex.layout.partitionFor(g.state, g.orderId))).size;
  assert.ok(
    counterReads <= partitions,
    `${counterReads} reads for 40 sequential moves over ${partitions} partitions: one shard each, read once`,
  );
  // Both instances at once, on the shards the other keeps writing: 412s, re-reads, no loss.
  await Promise.all(groups.map((g, i) => (i % 2 === 0 ? a : b).stateIndex.leave(g)));
  const more = Array.from({ length: 30 }, (_, i) => group(100 + i));
  await Promise.all(more.map((g, i) => (i % 2 === 0 ? b : a).stateIndex.enter(g)));
  assert.deepEqual(await a.countsPerState(), expectCounts({ Pending: 30 }));
  assert.deepEqual(await b.countsPerState(), expectCounts({ Pending: 30 }));
});
