import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { test } from 'node:test';
import { archiveBlobName } from '../../shared/domain/retention.js';
import { ArchiveOffline } from '../../shared/retention/archive.js';
import { daysAfter, orderIn, retentionAzurite, withRetention } from './harness.js';

/**
 * An order purged long after it ended (a legal hold released, retention raised then lowered)
 * belongs to a day whose blob the lifecycle rule has already moved to the archive tier, where
 * Azure (and Azurite) refuse writes and reads. Its purge must neither stall nor fail: its
 * document goes to another blob of that day, and both orders' archived records stay readable.
 */
const azurite = retentionAzurite();

const t0 = new Date('2030-01-01T00:00:00.000Z');

/** An order id whose archive blob for `at`'s day is `blobName`. */
function idInBlob(blobName: string, at: Date): string {
  for (;;) {
    const id = randomUUID();
    if (archiveBlobName(id, at) === blobName) return id;
  }
}

test('an order purged into a day whose blob is in the archive tier is archived in another blob of that day, and both stay readable', async () => {
  const { store, retention } = await withRetention(azurite());
  const first = await orderIn(store, 'Processed', t0);
  assert.equal((await retention.purgeNow(daysAfter(t0, 100), 10)).purged, 1);
  const firstPurged = (await retention.purged(first.order.orderId))!;
  const dayBlob = firstPurged.archiveBlob!;
  await retention.archive!.container.getBlockBlobClient(dayBlob).setAccessTier('Archive');

  // Same day, same shard: its document would go to the archived blob.
  const lateAt = new Date(t0.getTime() + 3_600_000);
  const late = await orderIn(store, 'Processed', lateAt, idInBlob(dayBlob, lateAt));
  const report = await retention.purgeNow(daysAfter(t0, 300), 10);
  assert.equal(report.purged, 1, JSON.stringify(report));
  const latePurged = (await retention.purged(late.order.orderId))!;
  assert.ok(latePurged.archiveBlob, 'the tombstone names its blob');
  assert.notEqual(latePurged.archiveBlob, dayBlob);
  assert.match(latePurged.archiveBlob, new RegExp(`^${dayBlob.replace('.jsonl.gz', '')}`));
  const doc = await retention.archived(latePurged);
  assert.equal(doc?.orderId, late.order.orderId);

  // A retried archive of the same order (a slice that died after it) adds no second copy.
  await retention.archive!.append([{ blobName: dayBlob, document: doc! }]);
  const copies = (
    await Promise.all(
      (await retention.archive!.blobNames()).map((b) => retention.archive!.readBlob(b).catch(() => [])),
    )
  )
    .flat()
    .filter((d) => d.orderId === late.order.orderId);
  assert.equal(copies.length, 1);

  // The first order's blob is offline until rehydrated, then both read back.
  await assert.rejects(retention.archived(firstPurged), ArchiveOffline);
  await retention
    .archive!.container.getBlockBlobClient(dayBlob)
    .setAccessTier('Cool', { rehydratePriority: 'Standard' });
  assert.equal((await retention.archived(firstPurged))?.orderId, first.order.orderId);
  assert.equal((await retention.archived(latePurged))?.orderId, late.order.orderId);
});
