import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { odata } from '@azure/data-tables';
import type { AzuriteInstance } from '../../local/azurite.js';
import { startAzurite } from '../../local/azurite.js';
import type { ProcessState } from '../../shared/domain/index.js';
import { partitionNumber } from '../../shared/stateStore/indexLayout.js';
import {
  StateStore,
  StoreMetrics,
  type IndexFilter,
  type ReconcileCursor,
} from '../../shared/stateStore/index.js';
import { pool, step } from './harness.js';
import { submitNew } from './harness.js';

/**
 * Issue 23: the state index spreads each state over ORDER_INDEX_PARTITIONS partitions, and a
 * change of that number keeps every order listed and counted exactly once until the reconcile pass
 * has moved the old entries.
 */
let azurite: AzuriteInstance;

before(async () => {
  azurite = await startAzurite({ services: ['table'] });
});
after(async () => {
  await azurite.stop();
});

function open(tables: string, partitions: number, metrics = new StoreMetrics()): Promise<StateStore> {
  return StateStore.open(
    { kind: 'connectionString', connectionString: azurite.connectionString },
    {
      ordersTable: `Orders${tables}`,
      inFlightTable: `InFlight${tables}`,
      stateIndexTable: `OrderIndex${tables}`,
      stateIndexPartitions: partitions,
      metrics,
    },
  );
}

const minutesAgo = (m: number, plusMs = 0): Date => new Date(Date.now() - m * 60_000 + plusMs);

async function listAll(store: StateStore, filter: IndexFilter, pageSize: number): Promise<string[]> {
  const ids: string[] = [];
  let token: string | undefined;
  for (let pages = 0; ; pages++) {
    assert.ok(pages < 100, 'pages end');
    const page = await store.listOrders(filter, token, pageSize);
    assert.ok(page.items.length <= pageSize);
    ids.push(...page.items.map((i) => i.orderId));
    token = page.continuationToken;
    if (!token) return ids;
  }
}

/** Entities of the index per partition key (the layout row aside). */
async function partitions(store: StateStore): Promise<Map<string, number>> {
  const out = new Map<string, number>();
  const rows = store.stateIndex.table.listEntities({
    queryOptions: { filter: odata`PartitionKey ge ${'state:'} and PartitionKey lt ${'state;'}` },
  });
  for await (const e of rows) {
    if (String(e.rowKey).startsWith('n:')) continue;
    out.set(e.partitionKey!, (out.get(e.partitionKey!) ?? 0) + 1);
  }
  return out;
}

const none = { Pending: 0, Processing: 0, Compensating: 0, Processed: 0, Compensated: 0, Error: 0 };

test('the partition of an order follows from its id alone, and orders spread over all of them', () => {
  const id = randomUUID();
  assert.equal(partitionNumber(id, 32), partitionNumber(id, 32));
  const seen = new Set(Array.from({ length: 2000 }, () => partitionNumber(randomUUID(), 32)));
  assert.equal(seen.size, 32);
  assert.equal(partitionNumber(id, 1), 0);
});

test('a list page across 8 partitions reads O(page + partitions) entities, newest first, without gaps or duplicates', async () => {
  const metrics = new StoreMetrics();
  const store = await open(randomUUID().slice(0, 8), 8, metrics);
  const base = minutesAgo(10).getTime();
  const orders = await pool(120, 8, (i) => submitNew(store, new Date(base + i * 10)));
  const used = await partitions(store);
  assert.equal(used.size, 8, 'Pending entries are in 8 partitions');
  metrics.reset();
  const page = await store.stateIndex.page({ state: 'Pending' }, 10);
  // About a share (10 / 8 + 1) of each partition, plus a few refills: never 10 of each (80).
  assert.ok(metrics.entitiesRead <= 2 * (10 + 8), `${metrics.entitiesRead} entities read for a page of 10`);
  const newest = [...orders]
    .sort((a, b) => b.state.updatedAt.getTime() - a.state.updatedAt.getTime())
    .map((o) => o.state.orderId);
  assert.deepEqual(
    page.rows.map((r) => r.orderId),
    newest.slice(0, 10),
    'the 10 newest, newest first',
  );
  const all = await listAll(store, { state: 'Pending' }, 7);
  assert.deepEqual(all, newest, 'every order once, in order, over the pages');
  const ranged = await listAll(
    store,
    { state: 'Pending', customerId: 'c-1', from: new Date(base + 200), to: new Date(base + 500) },
    4,
  );
  assert.deepEqual(ranged, newest.slice(-51, -20), 'a time range of one customer, over the pages');
  assert.deepEqual(await store.countsPerState(), { ...none, Pending: 120 });
  assert.equal((await store.oldestInFlight())?.orderId, newest.at(-1));
});

test('from 1 partition to 8: every order listed and counted once, transitions work, the full pass empties the old layout', async () => {
  const tables = randomUUID().slice(0, 8);
  const old = await open(tables, 1);
  const pending = await pool(12, 4, (i) => submitNew(old, minutesAgo(30, i * 1000)));
  const moved = await pool(6, 3, async (i) =>
    step(
      old,
      await submitNew(old, minutesAgo(29, i * 1000)),
      { type: 'Claim', by: 'A' },
      minutesAgo(28, i * 1000),
    ),
  );
  assert.deepEqual([...(await partitions(old)).keys()].sort(), ['state:Pending', 'state:Processing']);
  // What a release before the spread left: no layout row.
  await old.stateIndex.table.deleteEntity('layout', 'partitions');

  const store = await open(tables, 8);
  assert.deepEqual(store.stateIndex.layout.all(), [8, 1], 'the old layout is read too');
  const expected = { ...none, Pending: 12, Processing: 6 };
  assert.deepEqual(await store.countsPerState(), expected);
  const pendingIds = pending.map((o) => o.state.orderId);
  assert.deepEqual((await listAll(store, { state: 'Pending' }, 5)).sort(), [...pendingIds].sort());

  // New orders follow the new layout; old ones move on from the old.
  const fresh = await pool(5, 5, (i) => submitNew(store, minutesAgo(20, i * 1000)));
  const claimed = await pool(4, 4, async (i) =>
    step(store, (await store.load(pendingIds[i]))!, { type: 'Claim', by: 'B' }, minutesAgo(19, i * 1000)),
  );
  const after = { ...none, Pending: 12 - 4 + 5, Processing: 6 + 4 };
  assert.deepEqual(await store.countsPerState(), after, 'counted once in both layouts');
  const listedPending = await listAll(store, { state: 'Pending' }, 4);
  assert.equal(listedPending.length, 13);
  assert.equal(new Set(listedPending).size, 13, 'no order twice');
  assert.deepEqual(
    new Set(await listAll(store, { state: 'Processing' }, 3)),
    new Set([...moved, ...claimed].map((o) => o.state.orderId)),
  );
  for (const o of fresh) {
    const p = (await partitions(store)).get(store.stateIndex.layout.partitionFor('Pending', o.state.orderId));
    assert.ok(p && p > 0, 'a new order is in its partition of the new layout');
  }

  // The full pass moves the old layout's entries, then stops reading it.
  let cursor: ReconcileCursor | null = { stage: 'orders', full: true };
  let relocated = 0;
  let retired: number[] = [];
  while (cursor) {
    const r = await store.reconcilePage(cursor, 5);
    relocated += r.relocated;
    retired = r.retiredLayouts ?? retired;
    cursor = r.next;
  }
  assert.equal(relocated, 12 - 4 + 6, 'every old entry still in use moved');
  assert.deepEqual(retired, [1]);
  assert.deepEqual(store.stateIndex.layout.all(), [8]);
  const left = [...(await partitions(store)).keys()].filter((k) => k.split(':').length === 2);
  assert.deepEqual(left, [], 'the old partitions are empty');
  const counters = store.stateIndex.table.listEntities({
    queryOptions: {
      filter: odata`PartitionKey eq ${'state:Pending'} or PartitionKey eq ${'state:Processing'}`,
    },
  });
  for await (const e of counters) assert.fail(`left in the old layout: ${e.partitionKey} ${e.rowKey}`);
  assert.deepEqual(await store.countsPerState(), after, 'the counts are unchanged');
  assert.equal((await listAll(store, { state: 'Pending' }, 4)).length, 13);
  // A store opened afterwards reads the new layout only.
  assert.deepEqual((await open(tables, 8)).stateIndex.layout.all(), [8]);
});

test('a store with another partition count joins the layouts; each reads the union', async () => {
  const tables = randomUUID().slice(0, 8);
  const a = await open(tables, 4);
  const b = await open(tables, 6);
  await a.stateIndex.layout.refresh(true);
  assert.deepEqual(a.stateIndex.layout.all(), [4, 6]);
  assert.deepEqual(b.stateIndex.layout.all(), [6, 4]);
  await pool(10, 5, (i) => submitNew(i % 2 ? a : b, minutesAgo(5, i * 10)));
  for (const s of [a, b]) {
    assert.deepEqual(await s.countsPerState(), { ...none, Pending: 10 });
    assert.equal((await listAll(s, { state: 'Pending' as ProcessState }, 3)).length, 10);
  }
});
