import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { decide, isTransitionRefused, orderWorkflow, InvalidOrderId } from '../../shared/domain/index.js';
import {
  ConcurrencyConflict,
  OrderAlreadyExists,
  type StateStore,
  type StoreMetrics,
} from '../../shared/stateStore/index.js';
import type { AzuriteInstance } from '../../local/azurite.js';
import { at, indexHas, newOrder, policy, step, submitNew, t0, withStore } from './harness.js';

let azurite: AzuriteInstance;
let store: StateStore;
let metrics: StoreMetrics;

before(async () => {
  ({ azurite, store, metrics } = await withStore());
});
after(async () => {
  await azurite.stop();
});

test('submission writes order, state and steps in one transaction; load reads them back', async () => {
  metrics.reset();
  const stored = await submitNew(store);
  // The order's partition in one transaction; the other is the operator's state index (its
  // entries and its state's counter, one batch before: stateIndex.ts).
  assert.equal(metrics.transactions, 2);
  const loaded = await store.load(stored.state.orderId);
  assert.ok(loaded);
  assert.deepEqual(loaded.state, stored.state);
  assert.deepEqual(loaded.order, stored.order);
  assert.ok(loaded.state.completeBy instanceof Date);
  assert.deepEqual(loaded.state.completeBy, at(policy.claimTimeoutSeconds));
  assert.deepEqual(Object.keys(loaded.etags.steps), ['inventory', 'payment', 'shipping']);
  assert.equal(await indexHas(store.index, stored.state.orderId), true);
  // stored as a real Edm.DateTime, not a string
  const raw = await store.orders.getEntity(stored.state.orderId, 'state', { disableTypeConversion: true });
  assert.deepEqual(raw.CompleteBy, { value: at(policy.claimTimeoutSeconds).toISOString(), type: 'DateTime' });
});

test('submitting an existing orderId throws OrderAlreadyExists with the stored hash and changes nothing', async () => {
  const first = await submitNew(store);
  const id = first.state.orderId;
  const d = decide(orderWorkflow, null, { type: 'Submit', orderId: id }, at(100), policy);
  await assert.rejects(
    store.submit(newOrder(id, 'other-hash'), d.state),
    (e) => e instanceof OrderAlreadyExists && e.requestHash === 'h1',
  );
  assert.deepEqual((await store.load(id))!.state, first.state);
});

test('a failing submission transaction leaves nothing behind', async () => {
  const orderId = randomUUID();
  const order = newOrder(orderId);
  order.customerId = 'x'.repeat(70_000); // property over 64 KiB: the service rejects the entity
  const d = decide(orderWorkflow, null, { type: 'Submit', orderId }, t0, policy);
  await assert.rejects(store.submit(order, d.state));
  assert.equal(await store.load(orderId), null);
  const rows = [];
  for await (const r of store.orders.listEntities({
    queryOptions: { filter: `PartitionKey eq '${orderId}'` },
  })) {
    rows.push(r);
  }
  assert.equal(rows.length, 0, 'no order, state or step row');
});

test('bad order ids are refused before any request', async () => {
  metrics.reset();
  await assert.rejects(store.load("x' or PartitionKey ne '"), InvalidOrderId);
  assert.equal(metrics.requests, 0);
});

test('two concurrent claimers: exactly one wins, the other gets ConcurrencyConflict', async () => {
  const s = await submitNew(store);
  const [a, b] = await Promise.all([store.load(s.state.orderId), store.load(s.state.orderId)]);
  const results = await Promise.allSettled([
    step(store, a!, { type: 'Claim', by: 'A' }, at(1)),
    step(store, b!, { type: 'Claim', by: 'B' }, at(1)),
  ]);
  const won = results.filter((r) => r.status === 'fulfilled');
  const lost = results.filter((r) => r.status === 'rejected');
  assert.equal(won.length, 1);
  assert.equal(lost.length, 1);
  assert.ok((lost[0] as PromiseRejectedResult).reason instanceof ConcurrencyConflict);
  const now = (await store.load(s.state.orderId))!.state;
  assert.equal(
    now.lockedBy,
    (won[0] as PromiseFulfilledResult<{ state: { lockedBy: string } }>).value.state.lockedBy,
  );
  assert.equal(now.steps[0].attempt, 1);
  // the loser, re-reading and re-deciding, is refused by the domain: never overwrites
  await assert.rejects(
    store.applyWithRetry(s.state.orderId, (cur) =>
      decide(orderWorkflow, cur.state, { type: 'Claim', by: 'B' }, at(2), policy),
    ),
    (e) => isTransitionRefused(e, 'NotAllowedInState'),
  );
});

test('a write with a stale ETag is refused and the newer state stays', async () => {
  const s = await submitNew(store);
  const claimed = await step(store, s, { type: 'Claim', by: 'A' }, at(1));
  // s is stale now: a Supervisor acting on it must not overwrite the claim
  await assert.rejects(step(store, s, { type: 'TimedOut' }, at(40)), ConcurrencyConflict);
  // a step-row-only stale write is refused too (state row ETag guards every transition)
  const next = await step(
    store,
    claimed,
    { type: 'StepSucceeded', step: 'inventory', run: 1, attempt: 1 },
    at(2),
  );
  await assert.rejects(
    step(
      store,
      claimed,
      { type: 'StepFailedPermanently', step: 'inventory', run: 1, attempt: 1, error: 'x' },
      at(3),
    ),
    ConcurrencyConflict,
  );
  assert.deepEqual((await store.load(s.state.orderId))!.state, next.state);
});

test('duplicate replies processed concurrently apply once; the rest are StaleAttempt', async () => {
  const s = await submitNew(store);
  await step(store, s, { type: 'Claim', by: 'A' }, at(1));
  const results = await Promise.allSettled(
    Array.from({ length: 5 }, () =>
      store.applyWithRetry(s.state.orderId, (cur) =>
        decide(
          orderWorkflow,
          cur.state,
          { type: 'StepSucceeded', step: 'inventory', run: 1, attempt: 1 },
          at(2),
          policy,
        ),
      ),
    ),
  );
  assert.equal(results.filter((r) => r.status === 'fulfilled').length, 1);
  for (const r of results) {
    if (r.status === 'rejected') assert.ok(isTransitionRefused(r.reason, 'StaleAttempt'), String(r.reason));
  }
  const st = (await store.load(s.state.orderId))!.state;
  assert.equal(st.steps[1].attempt, 1, 'payment dispatched exactly once');
});

test('the index row goes after a terminal write and comes back on resubmit', async () => {
  let s = await submitNew(store);
  s = await step(store, s, { type: 'Claim', by: 'A' }, at(1));
  s = await step(
    store,
    s,
    { type: 'StepFailedPermanently', step: 'inventory', run: 1, attempt: 1, error: 'no stock' },
    at(2),
  );
  assert.equal(s.state.processState, 'Compensated');
  assert.equal(await indexHas(store.index, s.state.orderId), false);
  // drive another order to Error, then resubmit
  let e = await submitNew(store);
  e = await step(store, e, { type: 'Claim', by: 'A' }, at(1));
  e = await step(store, e, { type: 'OperatorCancel', by: 'op' }, at(2));
  e = await step(
    store,
    e,
    { type: 'CompensationFailed', step: 'inventory', run: 1, attempt: 1, error: 'x' },
    at(3),
  );
  assert.equal(e.state.processState, 'Error');
  assert.equal(await indexHas(store.index, e.state.orderId), false);
  e = await step(store, e, { type: 'OperatorResubmit', by: 'op' }, at(4));
  assert.equal(e.state.run, 2);
  assert.equal(await indexHas(store.index, e.state.orderId), true);
  assert.deepEqual((await store.load(e.state.orderId))!.state, e.state);
});

test("the submission's traceparent is kept with the order and survives every transition", async () => {
  const orderId = randomUUID();
  const traceParent = '00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01';
  const d = decide(orderWorkflow, null, { type: 'Submit', orderId }, t0, policy);
  await store.submit(newOrder(orderId), d.state, { traceParent });
  const claimed = await store.applyWithRetry(orderId, (current) =>
    decide(orderWorkflow, current.state, { type: 'Claim', by: 'inv-1' }, at(1), policy),
  );
  assert.equal(claimed.stored.traceParent, traceParent);
  assert.equal((await store.load(orderId))?.traceParent, traceParent);
  // An order submitted without tracing has none.
  const untraced = await submitNew(store);
  assert.equal((await store.load(untraced.state.orderId))?.traceParent, undefined);
});
