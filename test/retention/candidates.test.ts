import assert from 'node:assert/strict';
import { test } from 'node:test';
import type { StateStore } from '../../shared/stateStore/index.js';
import { daysAfter, orderIn, retentionAzurite, withRetention } from './harness.js';

/**
 * Issue 24, item 5 (the purge's cost while live work runs): the oldest-first entries a slice reads
 * from the index are kept between slices and consumed slice after slice, so a slice costs its
 * orders' reads, not one range query per index partition of every terminal state. Every candidate
 * is still judged against its own partition, so one gone stale meanwhile (held, purged by another
 * instance) is kept, never purged twice. Against Azurite (tables and blobs, real sockets).
 */
const azurite = retentionAzurite();

const t0 = new Date('2030-01-01T00:00:00.000Z');
const later = daysAfter(t0, 3);

/** Range queries over the index's oldest-first entries (`a:` keys), counted as the table sends them. */
function indexRangeQueries(store: StateStore): () => number {
  const table = store.stateIndex.table;
  const list = table.listEntities.bind(table);
  let n = 0;
  table.listEntities = ((options?: Parameters<typeof list>[0]) => {
    if (/RowKey lt 'a:/.test(options?.queryOptions?.filter ?? '')) n += 1;
    return list(options);
  }) as typeof table.listEntities;
  return () => n;
}

async function expiredOrders(store: StateStore, n: number, offsetMs = 0) {
  return Promise.all(
    Array.from({ length: n }, (_, i) => orderIn(store, 'Processed', new Date(t0.getTime() + offsetMs + i))),
  );
}

test('a second slice over the same expired orders reads no index partition again', async () => {
  const { store, retention } = await withRetention(azurite(), { orderRetentionDays: 1 });
  await expiredOrders(store, 12);
  const queries = indexRangeQueries(store);
  const first = await retention.purgeNow(later, 4);
  assert.equal(first.purged, 4);
  const read = queries();
  assert.ok(read > 0, 'the first slice read the index');
  const second = await retention.purgeNow(later, 4);
  assert.equal(second.purged, 4);
  assert.equal(
    queries() - read,
    0,
    `the second slice sent ${queries() - read} range queries to the index (${read} for the first)`,
  );
});

test('candidates gone stale between slices are judged again: a held order and one another instance purged are kept', async () => {
  const { store, retention, again } = await withRetention(azurite(), { orderRetentionDays: 1 });
  const orders = await expiredOrders(store, 8);
  const ids = orders.map((o) => o.order.orderId);
  // Oldest first: the first slice purges the two oldest (and may keep the rest as candidates).
  assert.equal((await retention.purgeNow(later, 2)).purged, 2);
  const next = ids.slice(2);
  // Meanwhile an operator holds the next one, and another instance purges the one after it.
  assert.equal(await retention.hold(next[0], 'op', later), 'done');
  const other = await again();
  const elsewhere = await other.purgeNow(later, 1);
  assert.deepEqual([elsewhere.keptHeld, elsewhere.purged], [1, 1]);
  const second = await retention.purgeNow(later, 10);
  assert.equal(second.keptHeld, 1, 'the held order is kept');
  assert.equal(second.purged, 4, 'the four left are purged, the one purged elsewhere not again');
  assert.equal((await retention.purged(next[0])) === null, true, 'the held order lives');
  const docs = (
    await Promise.all((await retention.archive!.blobNames()).map((b) => retention.archive!.readBlob(b)))
  ).flat();
  assert.deepEqual(
    docs.map((d) => d.orderId).sort(),
    ids.filter((id) => id !== next[0]).sort(),
    'every other order archived exactly once',
  );
});

test('a slice that fails midway leaves the candidates it did not finish first in line: the next slice takes them, oldest first', async () => {
  const { store, retention } = await withRetention(azurite(), { orderRetentionDays: 1 });
  const ids = (await expiredOrders(store, 6)).map((o) => o.order.orderId);
  // The first slice reads all six, judges and archives the three oldest, then fails (a storage
  // error, say) before deleting any of them.
  await assert.rejects(
    retention.purgeNow(later, 3, (at) => {
      if (at === 'archived') throw new Error('storage unavailable');
    }),
    /storage unavailable/,
  );
  const purgedIds: string[] = [];
  const put = retention.table.putMarker.bind(retention.table);
  retention.table.putMarker = async (...args: Parameters<typeof put>) => {
    purgedIds.push(args[0].orderId);
    return put(...args);
  };
  const next = await retention.purgeNow(later, 3);
  assert.equal(next.purged, 3);
  assert.deepEqual(
    purgedIds,
    ids.slice(0, 3),
    'the next slice purges the three oldest, the ones it archived',
  );
});
