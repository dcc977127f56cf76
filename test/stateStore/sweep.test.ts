import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import type { AzuriteInstance } from '../../local/azurite.js';
import {
  InFlightIndex,
  type StateStore,
  type StoreMetrics,
  type StoredOrder,
  type ReconcileCursor,
} from '../../shared/stateStore/index.js';
import { at, indexHas, pool, step, submitNew, withStore } from './harness.js';

let azurite: AzuriteInstance;
let store: StateStore;
let metrics: StoreMetrics;

before(async () => {
  ({ azurite, store, metrics } = await withStore());
});
after(async () => {
  await azurite.stop();
});

/** Claimed at `claimAt`: its complete-by is claimAt + 60 s. */
async function claimed(claimAt: number, submitAt = claimAt - 1): Promise<StoredOrder> {
  const s = await submitNew(store, at(submitAt));
  return step(store, s, { type: 'Claim', by: 'A' }, at(claimAt));
}

test('the sweep finds exactly the expired in-flight orders, also across pages (> 1,000 index rows)', async () => {
  // 1,100 orders submitted at t=0 (index CheckAfter 30 s), claimed: even ones at t=1 (expire at 60 s), odd ones at t=1000 (expire at 1060 s)
  const orders = await pool(1100, 16, (i) => claimed(i % 2 === 0 ? 1 : 1000, 0));
  const expired = new Set(orders.filter((_, i) => i % 2 === 0).map((o) => o.state.orderId));
  metrics.reset();
  const result = await store.index.sweep(at(500), { pageSize: 1000 });
  assert.deepEqual(new Set(result.timedOut.map((c) => c.orderId)), expired);
  assert.equal(result.timedOut.length, 550, 'no duplicates across pages');
  for (const c of result.timedOut) assert.equal(c.processState, 'Processing');
  // every index row was due (CheckAfter = submission + claim timeout); the odd ones are deferred
  assert.equal(result.deferred, 550);
  assert.equal(result.removed, 0);
  assert.ok(metrics.byMethod.GET! >= 2, 'more than one page was read');
  // Deferred rows now carry their real complete-by: the next sweep before 1060 s reads only
  // the 550 still-expired ones.
  const again = await store.index.sweep(at(600));
  assert.equal(again.examined, 550);
  assert.equal(again.timedOut.length, 550);
  const later = await store.index.sweep(at(2000));
  assert.equal(later.timedOut.length, 1100);
  // clean up so the other tests in this file see a small index
  await pool(orders.length, 16, async (i) => {
    const o = orders[i];
    await store.index.table.deleteEntity(InFlightIndex.partitionFor(o.state.orderId), o.state.orderId);
  });
});

test('a not-yet-expired order is deferred, not returned; a Pending order past its claim timeout is returned', async () => {
  const pending = await submitNew(store, at(10_000)); // completeBy 10_030
  const running = await claimed(10_000); // completeBy 10_060
  const r = await store.index.sweep(at(10_045));
  const ids = r.timedOut.map((c) => c.orderId);
  assert.ok(ids.includes(pending.state.orderId));
  assert.ok(!ids.includes(running.state.orderId));
  assert.equal(r.timedOut.find((c) => c.orderId === pending.state.orderId)!.processState, 'Pending');
  // after the Supervisor's TimedOut, the deadline moves and the sweep defers it lazily
  await step(store, (await store.load(pending.state.orderId))!, { type: 'TimedOut' }, at(10_046));
  const r2 = await store.index.sweep(at(10_050));
  assert.ok(!r2.timedOut.some((c) => c.orderId === pending.state.orderId));
  for (const o of [pending, running])
    await store.index.table.deleteEntity(InFlightIndex.partitionFor(o.state.orderId), o.state.orderId);
});

test('index repair: rows for terminal or missing orders are removed; lost rows of in-flight orders are re-created', async () => {
  // a row without any order (e.g. a submission whose transaction failed)
  const ghost = randomUUID();
  await store.index.put(ghost, at(20_000));
  // a terminal order whose row survived (a crash after the terminal write)
  let done = await claimed(20_000);
  done = await step(
    store,
    done,
    { type: 'StepFailedPermanently', step: 'inventory', run: 1, attempt: 1, error: 'x' },
    at(20_001),
  );
  assert.equal(done.state.processState, 'Compensated');
  await store.index.put(done.state.orderId, at(20_001));
  // an in-flight order whose row was lost
  const lost = await claimed(20_000);
  await store.index.table.deleteEntity(InFlightIndex.partitionFor(lost.state.orderId), lost.state.orderId);

  const r = await store.index.sweep(at(20_100));
  assert.equal(r.removed, 2);
  assert.equal(await indexHas(store.index, ghost), false);
  assert.equal(await indexHas(store.index, done.state.orderId), false);
  assert.ok(!r.timedOut.some((c) => c.orderId === lost.state.orderId), 'the sweep cannot see it...');

  let cursor: ReconcileCursor | null = { stage: 'orders' };
  let recreated = 0;
  while (cursor) {
    const page = await store.reconcilePage(cursor, 100);
    recreated += page.recreated;
    cursor = page.next;
  }
  assert.ok(recreated >= 1);
  assert.equal(await indexHas(store.index, lost.state.orderId), true);
  const r2 = await store.index.sweep(at(20_100));
  assert.ok(
    r2.timedOut.some((c) => c.orderId === lost.state.orderId),
    '...until reconciliation restored it',
  );
});

test('a clean-up racing with a re-write of the index row keeps the row (ETag-conditional delete)', async () => {
  let e = await claimed(30_000);
  e = await step(store, e, { type: 'OperatorCancel', by: 'op' }, at(30_001));
  e = await step(
    store,
    e,
    { type: 'CompensationFailed', step: 'inventory', run: 1, attempt: 1, error: 'x' },
    at(30_002),
  );
  // Simulate: the sweep read the index row (old ETag) while the order was Error...
  await store.index.put(e.state.orderId, at(30_002));
  const [stale] = await (async () => {
    const rows = [];
    for await (const r of store.index.table.listEntities({
      queryOptions: { filter: `RowKey eq '${e.state.orderId}'` },
    }))
      rows.push(r);
    return rows;
  })();
  // ...then an operator resubmitted (re-writing the row) before the sweep's delete
  await step(store, e, { type: 'OperatorResubmit', by: 'op' }, at(30_003));
  await assert.rejects(
    store.index.table.deleteEntity(stale.partitionKey!, stale.rowKey!, { etag: stale.etag }),
    (err: { statusCode?: number }) => err.statusCode === 412,
  );
  assert.equal(await indexHas(store.index, e.state.orderId), true);
});

/** Claims and runs all three steps: the last save makes the order Processed. */
async function runToTheLastStep(claimAt: number): Promise<StoredOrder> {
  let s = await claimed(claimAt);
  for (const [i, name] of ['inventory', 'payment'].entries())
    s = await step(store, s, { type: 'StepSucceeded', step: name, run: 1, attempt: 1 }, at(claimAt + i + 1));
  return s;
}
const lastStep = { type: 'StepSucceeded', step: 'shipping', run: 1, attempt: 1 } as const;

async function rawIndexEtag(orderId: string): Promise<unknown> {
  const raw = await store.orders.getEntity(orderId, 'state');
  return raw.IndexETag;
}

test('the finishing save removes the index row in one request with the ETag its own put wrote', async () => {
  const s = await runToTheLastStep(40_000);
  assert.equal(typeof s.etags.index, 'string', 'submission kept the index row ETag');
  assert.equal(await rawIndexEtag(s.state.orderId), s.etags.index, 'every Replace of the state row keeps it');
  assert.equal((await store.load(s.state.orderId))!.etags.index, s.etags.index);
  metrics.reset();
  const done = await step(store, s, lastStep, at(40_010));
  assert.equal(done.state.processState, 'Processed');
  assert.equal(await indexHas(store.index, s.state.orderId), false);
  // In-flight index: 1 delete (the has() above added its own read afterwards). The rest is the
  // transaction (POST) and the operator's state index (stateIndex.ts): enter and leave batches,
  // each moving its state's counter (2 POST), and a read of each counter shard this process has
  // not written yet (0 to 2 GET: the shards are picked at random).
  const { GET, ...writes } = metrics.byMethod;
  assert.deepEqual(writes, { POST: 3, DELETE: 1 });
  assert.ok(GET >= 1 && GET <= 3, `GET ${GET}`);
});

test('a row re-written since (the sweep moved CheckAfter) is removed by the careful path, not blindly', async () => {
  const s = await runToTheLastStep(41_000);
  // due at submission's CheckAfter (claim timeout), deadline moved by the claim: the sweep defers
  const r = await store.index.sweep(at(41_000 + 40));
  assert.ok(r.deferred >= 1);
  metrics.reset();
  await step(store, s, lastStep, at(41_010));
  assert.equal(await indexHas(store.index, s.state.orderId), false);
  // batch, the failed delete (412), then read row + read state + delete (and up to two counter
  // reads of the state index, see above)
  assert.equal(metrics.byMethod.DELETE, 2);
  assert.ok(metrics.byMethod.GET >= 3 && metrics.byMethod.GET <= 3 + 2, `GET ${metrics.byMethod.GET}`);
});

test('a stale ETag never removes the row of an order that is in flight again', async () => {
  const s = await submitNew(store, at(42_000));
  const written = s.etags.index!;
  // The row is re-put (as a resubmit does before its state write); the order is not terminal.
  await store.index.put(s.state.orderId, at(42_030));
  assert.equal(await store.index.removeAsWritten(s.state.orderId, written), false);
  assert.equal(await indexHas(store.index, s.state.orderId), true);
  // Without any ETag (rows written before the state row kept one): the careful path, same answer.
  assert.equal(await store.index.removeAsWritten(s.state.orderId, undefined), false);
  assert.equal(await indexHas(store.index, s.state.orderId), true);
});

test('after a resubmit, the order finishing again still leaves no index row', async () => {
  let e = await claimed(43_000);
  e = await step(store, e, { type: 'OperatorCancel', by: 'op' }, at(43_001));
  e = await step(
    store,
    e,
    { type: 'CompensationFailed', step: 'inventory', run: 1, attempt: 1, error: 'x' },
    at(43_002),
  );
  assert.equal(e.state.processState, 'Error');
  assert.equal(await indexHas(store.index, e.state.orderId), false);
  const before = e.etags.index;
  e = await step(store, e, { type: 'OperatorResubmit', by: 'op' }, at(43_003));
  assert.equal(await indexHas(store.index, e.state.orderId), true);
  assert.notEqual(e.etags.index, before, 'the resubmit put a new row');
  e = await step(store, e, { type: 'Claim', by: 'B' }, at(43_004));
  for (const [i, name] of ['inventory', 'payment', 'shipping'].entries())
    e = await step(store, e, { type: 'StepSucceeded', step: name, run: 2, attempt: 1 }, at(43_005 + i));
  assert.equal(e.state.processState, 'Processed');
  assert.equal(await indexHas(store.index, e.state.orderId), false);
});

/** Runs `during` right after the store's next index put (the gap between the two writes), once. */
function afterNextIndexPut(during: () => Promise<void>, thenCrash = false): () => void {
  const index = store.index;
  const put = InFlightIndex.prototype.put;
  let calls = 0;
  index.put = async function (this: InFlightIndex, ...args: Parameters<InFlightIndex['put']>) {
    calls += 1;
    if (calls === 2 && thenCrash) throw new Error('process died before its second index put');
    const etag = await put.apply(index, args);
    if (calls === 1) await during();
    return etag;
  };
  return () => {
    delete (index as Partial<InFlightIndex>).put;
  };
}

test('a submission stalled between its index put and its transaction keeps its row through sweeps', async () => {
  const orderId = randomUUID();
  let swept: { removed: number } | undefined;
  // The sweep runs after the row's CheckAfter (the claim timeout) has passed, before the state row exists.
  const restore = afterNextIndexPut(async () => {
    swept = await store.index.sweep(at(50_100));
  });
  try {
    await submitNew(store, at(50_000), orderId);
  } finally {
    restore();
  }
  assert.equal(swept?.removed, 0, 'the sweep removed the row of a submission still under way');
  assert.equal(await indexHas(store.index, orderId), true);
  // Nobody claims it: the Supervisor finds it through that row.
  const r = await store.index.sweep(at(50_100));
  assert.ok(r.timedOut.some((c) => c.orderId === orderId));
});

test('a resubmit that crashes between its state write and its second index put leaves the order indexed', async () => {
  let e = await claimed(52_000);
  e = await step(store, e, { type: 'OperatorCancel', by: 'op' }, at(52_001));
  e = await step(
    store,
    e,
    { type: 'CompensationFailed', step: 'inventory', run: 1, attempt: 1, error: 'x' },
    at(52_002),
  );
  assert.equal(await indexHas(store.index, e.state.orderId), false);
  // A sweep lands between the first put and the state write (the order still reads Error).
  const restore = afterNextIndexPut(async () => {
    await store.index.sweep(at(52_200));
  }, true);
  try {
    await assert.rejects(step(store, e, { type: 'OperatorResubmit', by: 'op' }, at(52_003)), /process died/);
  } finally {
    restore();
  }
  const reread = (await store.load(e.state.orderId))!;
  assert.equal(reread.state.processState, 'Pending', 'the state write committed');
  assert.equal(await indexHas(store.index, e.state.orderId), true, 'the order runs without an index row');
  const r = await store.index.sweep(at(52_200));
  assert.ok(r.timedOut.some((c) => c.orderId === e.state.orderId));
});

test('rows of orders that never committed, or finished, are removed once the grace has passed', async () => {
  const ghost = randomUUID();
  await store.index.put(ghost, at(54_000), at(54_000));
  await store.index.sweep(at(54_100));
  assert.equal(await indexHas(store.index, ghost), true, 'within the grace: kept');
  await store.index.sweep(at(54_000 + store.index.graceSeconds + 1));
  assert.equal(await indexHas(store.index, ghost), false, 'past the grace: removed');
});
