import assert from 'node:assert/strict';
import { test } from 'node:test';
import type { PurgePacing } from '../../shared/domain/purgePacing.js';
import type { Retention } from '../../shared/retention/retention.js';
import { inProcessLiveWork, liveInvocations } from '../../shared/retention/liveWork.js';
import { daysAfter, orderIn, retentionAzurite, withRetention } from './harness.js';

/**
 * Issue 24, item 8: the purge gives way to live work only while there is some. With nothing live
 * it goes at full speed (no pause between orders); while a live invocation runs it takes no more
 * than its minimum share; a slice whose live work never ends stops at its time budget and the next
 * slice finishes the rest. Against Azurite (tables and blobs, real sockets).
 */
const azurite = retentionAzurite();

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
  const { retention } = await withRetention(azurite(), { orderRetentionDays: 1 });
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

/** A purge that gives way to this process's live invocations at `pacing`. */
async function pacedRetention(pacing: PurgePacing): Promise<Retention> {
  const { retention } = await withRetention(
    azurite(),
    { orderRetentionDays: 1 },
    { liveWork: inProcessLiveWork, pacing },
  );
  return retention;
}

/** A live invocation of this process that runs until `end()` is awaited. */
function liveUntilEnded(): { end(): Promise<void> } {
  let stop = false;
  const running = liveInvocations.track(async () => {
    while (!stop) await new Promise((r) => setTimeout(r, 20));
  });
  return {
    end: () => {
      stop = true;
      return running;
    },
  };
}

/** A live invocation of this process that runs `ms` (the count functions/liveWork.ts keeps). */
const liveFor = (ms: number) => liveInvocations.track(() => new Promise((r) => setTimeout(r, ms)));

test('while a live invocation runs the purge keeps to its share of the time, then goes at full speed', async () => {
  // A share of a quarter: after each piece of work, a pause three times as long.
  const pacing = { liveShare: 0.25, pollMs: 10, minSliceMs: 10_000 };
  const retention = await pacedRetention(pacing);
  await expiredOrders(retention, 8);
  const line = timeline(retention);
  const liveStarted = performance.now();
  const live = liveFor(1500);
  let first = await retention.purgeNow(daysAfter(t0, 3), 8);
  await live;
  const liveEnded = liveStarted + 1500;
  let purged = first.purged;
  let pausedMs = first.pausedMs;
  // Busy as it started, the slice judged its share (2 of 8); the next slices take the rest.
  for (let i = 0; i < 5 && purged < 8; i++) {
    first = await retention.purgeNow(daysAfter(t0, 3), 8);
    purged += first.purged;
    pausedMs += first.pausedMs;
  }
  assert.equal(purged, 8);
  const o = line.orders;
  const whileLive = o
    .slice(1)
    .map((x, i) => ({ gap: x.start - o[i].end, took: o[i].end - o[i].start, start: x.start }));
  const paced = whileLive.filter((g) => g.start < liveEnded);
  assert.ok(paced.length >= 1, 'an order followed another while the live invocation ran');
  for (const g of paced) {
    assert.ok(
      g.gap >= 0.8 * 3 * g.took,
      `a ${g.gap.toFixed(0)} ms pause after an order of ${g.took.toFixed(0)} ms while live`,
    );
  }
  const afterLive = o.filter((x) => x.start >= liveEnded + 20);
  const gapsAfter = afterLive.slice(1).map((x, i) => x.start - afterLive[i].end);
  assert.ok(gapsAfter.length >= 3, `${afterLive.length} orders after the live work ended`);
  assert.ok(
    gapsAfter.every((g) => g < 50),
    `gaps after the live work ended: ${gapsAfter.map((g) => g.toFixed(0))}`,
  );
  // The report counts the pauses the timeline shows: at least the share's pause after each order
  // that another followed while live (how long depends on the machine, so no fixed figure).
  const owed = paced.reduce((s, g) => s + 0.8 * 3 * g.took, 0);
  assert.ok(pausedMs >= owed, `paused ${pausedMs} ms, owed ${owed.toFixed(0)} ms while live`);
});

test('a slice whose live work never ends stops at its budget; the next slices finish, archiving each order once', async () => {
  const pacing = { liveShare: 0.25, pollMs: 10, minSliceMs: 700 };
  const retention = await pacedRetention(pacing);
  const orders = await expiredOrders(retention, 6);
  const live = liveUntilEnded();
  const started = performance.now();
  const first = await retention.purgeNow(daysAfter(t0, 3), 6);
  const tookMs = performance.now() - started;
  // Its share of 6 is 2 orders, and its reads' pause leaves room for at most those before 700 ms.
  assert.ok(first.purged >= 1 && first.purged <= 2, `first slice purged ${first.purged}`);
  assert.equal(first.more, true);
  assert.ok(tookMs < 700 + 400, `the slice took ${tookMs.toFixed(0)} ms against a budget of 700`);
  await live.end();
  let purged = first.purged;
  for (let i = 0; i < 5 && purged < 6; i++) purged += (await retention.purgeNow(daysAfter(t0, 3), 6)).purged;
  assert.equal(purged, 6);
  const docs = (
    await Promise.all((await retention.archive!.blobNames()).map((b) => retention.archive!.readBlob(b)))
  ).flat();
  assert.deepEqual(docs.map((d) => d.orderId).sort(), orders.map((o) => o.order.orderId).sort());
});

test('while live work never ends, every slice that pays for its reads purges at least one order: the purge does not starve', async () => {
  // A share so small that the pause after a slice's reads alone outlasts the slice's budget: a
  // slice whose reads were a piece of their own then stopped before any order, and the next one
  // read again (the chaos run retention-under-load purged nothing in 60 s of live orders).
  const pacing = { liveShare: 0.02, pollMs: 10, minSliceMs: 300 };
  const retention = await pacedRetention(pacing);
  await expiredOrders(retention, 6);
  const live = liveUntilEnded();
  const slices: { examined: number; purged: number }[] = [];
  const until = performance.now() + 4000;
  try {
    while (performance.now() < until) {
      const r = await retention.purgeNow(daysAfter(t0, 3), 6);
      slices.push({ examined: r.examined, purged: r.purged });
    }
  } finally {
    await live.end();
  }
  const purged = slices.reduce((s, r) => s + r.purged, 0);
  const read = slices.filter((r) => r.examined > 0);
  assert.ok(
    read.length >= 1 && read.every((r) => r.purged >= 1),
    `purged ${purged} orders in ${slices.length} slices over 4 s while live work never ended; ` +
      `slices that read: ${read.map((r) => `${r.examined} examined/${r.purged} purged`).join(', ') || 'none'}`,
  );
});
