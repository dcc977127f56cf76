import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import type { AzuriteInstance } from '../../local/azurite.js';
import type { Retention } from '../../shared/retention/retention.js';
import { inProcessLiveWork, liveInvocations } from '../../shared/retention/liveWork.js';
import { daysAfter, orderIn, startRetentionAzurite, withRetention } from './harness.js';

/**
 * Issue 24, item 8: the purge gives way to live work only while there is some. With nothing live
 * it goes at full speed (no pause between orders); while a live invocation runs it takes no more
 * than its minimum share; a slice whose live work never ends stops at its time budget and the next
 * slice finishes the rest. Against Azurite (tables and blobs, real sockets).
 */
let azurite: AzuriteInstance;
before(async () => {
  azurite = await startRetentionAzurite();
});
after(async () => {
  await azurite.stop();
});

const t0 = new Date('2030-01-01T00:00:00.000Z');

/**
 * Each purged order's work, as the Retention table sees it: from its marker's write to its
 * marker's delete. What lies between one order's end and the next one's start is pause.
 */
function timeline(retention: Retention) {
  const orders: { start: number; end: number }[] = [];
  const table = retention.table;
  const put = table.putMarker.bind(table);
  const del = table.deleteMarker.bind(table);
  table.putMarker = async (...args: Parameters<typeof put>) => {
    orders.push({ start: performance.now(), end: NaN });
    return put(...args);
  };
  table.deleteMarker = async (...args: Parameters<typeof del>) => {
    await del(...args);
    const open = [...orders].reverse().find((o) => Number.isNaN(o.end));
    if (open) open.end = performance.now();
  };
  const gaps = () => orders.slice(1).map((o, i) => o.start - orders[i].end);
  return { orders, gaps };
}

async function expiredOrders(retention: Retention, n: number) {
  const store = retention.store;
  return Promise.all(
    Array.from({ length: n }, (_, i) => orderIn(store, 'Processed', new Date(t0.getTime() + i))),
  );
}

test('with no live work the purge never pauses between orders: full speed', async () => {
  const { retention } = await withRetention(azurite, { orderRetentionDays: 1 });
  await expiredOrders(retention, 12);
  const line = timeline(retention);
  const report = await retention.purgeNow(daysAfter(t0, 3), 12);
  assert.equal(report.purged, 12);
  const work = line.orders.reduce((s, o) => s + (o.end - o.start), 0);
  const paused = line.gaps().reduce((s, g) => s + g, 0);
  // Without live work a pause is waste: the purge would take longer for nothing.
  assert.ok(
    paused < 0.1 * work,
    `paused ${paused.toFixed(0)} ms between orders against ${work.toFixed(0)} ms of work (gaps ${line
      .gaps()
      .map((g) => g.toFixed(0))
      .join(', ')} ms)`,
  );
});

/** A live invocation of this process that runs `ms` (the count functions/liveWork.ts keeps). */
const liveFor = (ms: number) => liveInvocations.track(() => new Promise((r) => setTimeout(r, ms)));

test('while a live invocation runs the purge takes only its minimum share, then full speed', async () => {
  const pacing = { minShareMs: 400, pollMs: 20, minSliceMs: 10_000 };
  const { retention } = await withRetention(
    azurite,
    { orderRetentionDays: 1 },
    { liveWork: inProcessLiveWork, pacing },
  );
  await expiredOrders(retention, 10);
  const line = timeline(retention);
  const liveStarted = performance.now();
  const live = liveFor(1500);
  const report = await retention.purgeNow(daysAfter(t0, 3), 10);
  await live;
  const liveEnded = liveStarted + 1500;
  assert.equal(report.purged, 10);
  const during = line.orders.filter((o) => o.start < liveEnded);
  // 1,500 ms of live work at one order per 400 ms: at most 4 orders began meanwhile.
  assert.ok(during.length <= 4, `${during.length} orders began during the live invocation`);
  for (const [i, o] of during.slice(1).entries()) {
    assert.ok(
      o.start - during[i].start >= 380,
      `orders ${(o.start - during[i].start).toFixed(0)} ms apart while live`,
    );
  }
  const afterLive = line.orders.filter((o) => o.start >= liveEnded);
  const gapsAfter = afterLive.slice(1).map((o, i) => o.start - afterLive[i].end);
  assert.ok(
    gapsAfter.every((g) => g < 50),
    `gaps after the live work ended: ${gapsAfter.map((g) => g.toFixed(0))}`,
  );
  assert.ok(report.pausedMs >= 700, `paused ${report.pausedMs} ms`);
});

test('a slice whose live work never ends stops at its budget; the next slices finish, archiving each order once', async () => {
  const pacing = { minShareMs: 300, pollMs: 20, minSliceMs: 700 };
  const { retention } = await withRetention(
    azurite,
    { orderRetentionDays: 1 },
    { liveWork: inProcessLiveWork, pacing },
  );
  const orders = await expiredOrders(retention, 6);
  let stop = false;
  const live = liveInvocations.track(async () => {
    while (!stop) await new Promise((r) => setTimeout(r, 20));
  });
  const first = await retention.purgeNow(daysAfter(t0, 3), 6);
  // 700 ms at one order per 300 ms: 3 orders, and the slice says more wait.
  assert.ok(first.purged >= 1 && first.purged <= 3, `first slice purged ${first.purged}`);
  assert.equal(first.more, true);
  stop = true;
  await live;
  let purged = first.purged;
  for (let i = 0; i < 5 && purged < 6; i++) purged += (await retention.purgeNow(daysAfter(t0, 3), 6)).purged;
  assert.equal(purged, 6);
  const docs = (
    await Promise.all((await retention.archive!.blobNames()).map((b) => retention.archive!.readBlob(b)))
  ).flat();
  assert.deepEqual(docs.map((d) => d.orderId).sort(), orders.map((o) => o.order.orderId).sort());
});
