import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { test } from 'node:test';
import { stateRowKey } from '../../shared/stateStore/index.js';
import { OrderAlreadyExists } from '../../shared/stateStore/errors.js';
import { newOrder, policy } from '../stateStore/harness.js';
import { decide, orderWorkflow } from '../../shared/domain/index.js';
import {
  daysAfter,
  indexGuards,
  orderIn,
  partitionKeys,
  retentionAzurite,
  withRetention,
} from './harness.js';

/**
 * Issue 24: the purge against Azurite (tables and blobs, real sockets): archive first, exactly
 * once; the order's partition, index group, counter and in-flight row go; live, held and young
 * orders stay; a crash at any step is finished by the next slice; tombstones answer for a year.
 */
const azurite = retentionAzurite();

const t0 = new Date('2030-01-01T00:00:00.000Z');

test('a slice purges only unheld terminal orders past retention, archives each once, and leaves the counts exact', async () => {
  const { store, retention } = await withRetention(azurite());
  const old = await Promise.all([
    orderIn(store, 'Processed', t0),
    orderIn(store, 'Compensated', daysAfter(t0, 1)),
    orderIn(store, 'Processed', daysAfter(t0, 2)),
  ]);
  const held = await orderIn(store, 'Processed', t0);
  const live = await orderIn(store, 'Processing', t0);
  const young = await orderIn(store, 'Processed', daysAfter(t0, 50));
  assert.equal(await retention.hold(held.order.orderId, 'op', daysAfter(t0, 3), 'audit'), 'done');
  const before = await store.countsPerState();
  assert.equal(before.Processed, 4);

  const now = daysAfter(t0, 100);
  const report = await retention.purgeNow(now, 50);
  assert.equal(report.purged, 3);
  assert.equal(report.archived, 3);
  assert.equal(report.keptHeld, 1);

  for (const o of old) {
    assert.deepEqual(await partitionKeys(store, o.order.orderId), ['order'], 'only the tombstone is left');
    assert.equal(await store.load(o.order.orderId), null);
    const purged = await retention.purged(o.order.orderId);
    assert.ok(purged?.archiveBlob);
    const doc = await retention.archived(purged);
    assert.equal(doc?.orderId, o.order.orderId);
    assert.equal(doc?.state.processState, o.state.processState);
    assert.ok(doc!.history.length >= 3, 'the whole history is archived');
    assert.equal((doc!.state.steps as unknown[]).length, 3);
  }
  for (const kept of [held, live, young]) {
    const loaded = await store.load(kept.order.orderId);
    assert.equal(loaded?.state.processState, kept.state.processState, 'kept untouched');
  }
  const counts = await store.countsPerState();
  assert.equal(counts.Processed, 2);
  assert.equal(counts.Compensated, 0);
  assert.equal(counts.Processing, 1);
  const guards = await indexGuards(store);
  assert.deepEqual(
    guards.map((g) => g.orderId).sort(),
    [held, live, young].map((o) => o.order.orderId).sort(),
  );

  // Again: nothing more, nothing archived twice.
  const again = await retention.purgeNow(now, 50);
  assert.equal(again.purged, 0);
  const docs = (
    await Promise.all((await retention.archive!.blobNames()).map((n) => retention.archive!.readBlob(n)))
  ).flat();
  assert.deepEqual(docs.map((d) => d.orderId).sort(), old.map((o) => o.order.orderId).sort());

  // Released, the held order goes too; its hold and release are in its archived history.
  assert.equal(await retention.release(held.order.orderId, 'op', daysAfter(t0, 101)), 'done');
  assert.equal((await retention.purgeNow(daysAfter(t0, 102), 50)).purged, 1);
  const heldDoc = await retention.archived((await retention.purged(held.order.orderId))!);
  assert.deepEqual(
    heldDoc!.history.map((h) => h.event).filter((e) => String(e).startsWith('LegalHold')),
    ['LegalHoldPlaced', 'LegalHoldReleased'],
  );
});

test('retention 0 keeps everything; ORDER_ARCHIVE=off purges without an archive', async () => {
  const keep = await withRetention(azurite(), { orderRetentionDays: 0 });
  const o = await orderIn(keep.store, 'Processed', t0);
  assert.equal((await keep.retention.purgeNow(daysAfter(t0, 5000), 50)).purged, 0);
  assert.ok(await keep.store.load(o.order.orderId));

  const bare = await withRetention(azurite(), { archive: false });
  assert.equal(bare.retention.archive, undefined);
  const p = await orderIn(bare.store, 'Processed', t0);
  assert.equal((await bare.retention.purgeNow(daysAfter(t0, 100), 50)).purged, 1);
  const purged = await bare.retention.purged(p.order.orderId);
  assert.ok(purged);
  assert.equal(purged.archiveBlob, undefined);
});

test('a history longer than one transaction is deleted in batches', async () => {
  const { store, retention } = await withRetention(azurite());
  const o = await orderIn(store, 'Processed', t0);
  for (let i = 0; i < 230; i++) {
    await store.orders.createEntity({
      partitionKey: o.order.orderId,
      rowKey: `history:${String(t0.getTime() + 10 + i).padStart(13, '0')}:${randomUUID().slice(0, 8)}`,
      At: t0,
      Actor: 'operator',
      Event: 'Note',
    });
  }
  assert.equal((await retention.purgeNow(daysAfter(t0, 100), 50)).purged, 1);
  assert.deepEqual(await partitionKeys(store, o.order.orderId), ['order']);
  const doc = await retention.archived((await retention.purged(o.order.orderId))!);
  assert.ok(doc!.history.length > 230);
});

for (const step of ['archived', 'marked', 'unlisted', 'fenced'] as const) {
  test(`a slice that dies after "${step}" is finished by the next: archived once, deleted, counts exact, no entry pointing at nothing`, async () => {
    const { store, retention } = await withRetention(azurite());
    const orders = await Promise.all(
      Array.from({ length: 4 }, (_, i) => orderIn(store, 'Processed', daysAfter(t0, i))),
    );
    const keep = await orderIn(store, 'Processed', daysAfter(t0, 95));
    const now = daysAfter(t0, 100);
    let crashes = 0;
    await assert.rejects(
      retention.purgeNow(now, 50, (at) => {
        // Dies at the second order's step (or at once, for the slice-wide 'archived').
        if (at === step && (step === 'archived' || ++crashes === 2)) throw new Error(`crash after ${at}`);
      }),
      /crash after/,
    );
    // In between: every group in the index has its order (never a counted group without its order).
    for (const g of await indexGuards(store)) {
      assert.ok(
        (await partitionKeys(store, g.orderId)).includes(stateRowKey),
        `group of ${g.orderId} has its order`,
      );
    }
    const report = await retention.purgeNow(now, 50);
    assert.ok(report.resumed <= 1);
    for (const o of orders)
      assert.deepEqual(await partitionKeys(store, o.order.orderId), ['order'], o.order.orderId);
    assert.ok(await store.load(keep.order.orderId));
    const counts = await store.countsPerState();
    assert.equal(counts.Processed, 1);
    assert.deepEqual(
      (await indexGuards(store)).map((g) => g.orderId),
      [keep.order.orderId],
    );
    const docs = (
      await Promise.all((await retention.archive!.blobNames()).map((n) => retention.archive!.readBlob(n)))
    ).flat();
    assert.deepEqual(
      docs.map((d) => d.orderId).sort(),
      orders.map((o) => o.order.orderId).sort(),
      'each archived exactly once',
    );
  });
}

test('a hold placed after the slice judged the order stops its purge: the order and its group stay', async () => {
  const { store, retention } = await withRetention(azurite());
  const o = await orderIn(store, 'Processed', t0);
  const report = await retention.purgeNow(daysAfter(t0, 100), 50, async (at) => {
    if (at === 'unlisted')
      assert.equal(await retention.hold(o.order.orderId, 'op', daysAfter(t0, 100)), 'done');
  });
  assert.equal(report.purged, 0);
  assert.equal((await store.load(o.order.orderId))?.state.processState, 'Processed');
  assert.equal((await store.countsPerState()).Processed, 1);
  assert.deepEqual(
    (await indexGuards(store)).map((g) => g.orderId),
    [o.order.orderId],
  );
  assert.deepEqual(await retention.table.markers(10), []);
});

test('a purged order cannot be submitted again while its tombstone lasts; after IDEMPOTENCY_RETENTION_DAYS it can', async () => {
  const { store, retention } = await withRetention(azurite(), { idempotencyRetentionDays: 365 });
  const o = await orderIn(store, 'Processed', t0);
  await retention.purgeNow(daysAfter(t0, 100), 50);
  const again = decide(
    orderWorkflow,
    null,
    { type: 'Submit', orderId: o.order.orderId },
    daysAfter(t0, 200),
    policy,
  );
  await assert.rejects(store.submit(newOrder(o.order.orderId), again.state), OrderAlreadyExists);
  assert.ok(await retention.purged(o.order.orderId));
  assert.deepEqual(
    await partitionKeys(store, o.order.orderId),
    ['order'],
    'the refused submission wrote nothing',
  );
  assert.equal((await store.countsPerState()).Pending, 0, 'and left no group behind');

  // A year after the purge (day 100 + 365), the tombstone goes.
  const late = await retention.purgeNow(daysAfter(t0, 467), 50);
  assert.equal(late.tombstonesExpired, 1);
  assert.equal(await retention.purged(o.order.orderId), null);
  await store.submit(newOrder(o.order.orderId), again.state);
  assert.equal((await store.load(o.order.orderId))?.state.processState, 'Pending');
});

test('the readout: oldest retained, past retention waiting, last purge, held orders', async () => {
  const { store, retention } = await withRetention(azurite());
  const a = await orderIn(store, 'Processed', t0);
  await orderIn(store, 'Processed', daysAfter(t0, 5));
  await orderIn(store, 'Processed', daysAfter(t0, 60));
  await retention.hold(a.order.orderId, 'op', daysAfter(t0, 1), 'case 7');
  const r = await retention.readout(daysAfter(t0, 100));
  assert.equal(r.oldestRetained?.orderId, a.order.orderId);
  assert.equal(r.pastRetentionWaiting, 2);
  assert.deepEqual(
    r.held.map((h) => [h.orderId, h.heldBy, h.reason]),
    [[a.order.orderId, 'op', 'case 7']],
  );
  await retention.purgeNow(daysAfter(t0, 100), 50);
  const after = await retention.readout(daysAfter(t0, 100));
  assert.equal(after.pastRetentionWaiting, 1, 'only the held one');
  assert.equal(after.lastPurge.lastPurged, 1);
});
