import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import type { AzuriteInstance } from '../../local/azurite.js';
import { decide, historyEntryFor, orderWorkflow, type OrderEvent } from '../../shared/domain/index.js';
import {
  ConcurrencyConflict,
  historyEntryToRow,
  type StateStore,
  type StoredOrder,
  type StoreMetrics,
} from '../../shared/stateStore/index.js';
import { at, newOrder, policy, withStore } from './harness.js';
import { randomUUID } from 'node:crypto';

let azurite: AzuriteInstance;
let store: StateStore;
let metrics: StoreMetrics;

before(async () => {
  ({ azurite, store, metrics } = await withStore());
});
after(async () => {
  await azurite.stop();
});

async function submitted(): Promise<StoredOrder> {
  const orderId = randomUUID();
  const event: OrderEvent = { type: 'Submit', orderId };
  const d = decide(orderWorkflow, null, event, at(0), policy);
  return store.submit(newOrder(orderId), d.state, { history: historyEntryFor(event, null, d.state, at(0)) });
}

function transition(current: StoredOrder, event: OrderEvent, now: Date) {
  const d = decide(orderWorkflow, current.state, event, now, policy);
  return { next: d.state, entry: historyEntryFor(event, current.state, d.state, now) };
}

async function entries(orderId: string) {
  const page = await store.history(orderId, 1000);
  assert.ok(page);
  return page.items;
}

test('each transition writes its history entry in its own transaction: one $batch, as before', async () => {
  const s0 = await submitted();
  metrics.reset();
  const claim = transition(s0, { type: 'Claim', by: 'A' }, at(1));
  const s1 = await store.save(s0, claim.next, claim.entry);
  // The claim changes the process state: the state index adds its own batches (enter, leave, counts).
  const withState = metrics.snapshot();
  metrics.reset();
  const ok = transition(s1, { type: 'StepSucceeded', step: 'inventory', run: 1, attempt: 1 }, at(2));
  await store.save(s1, ok.next, ok.entry);
  assert.equal(metrics.transactions, 1, 'a transition within a state is one transaction, entry included');
  assert.equal(metrics.requests, 1);
  assert.ok(withState.transactions >= 1);
  const list = await entries(s0.state.orderId);
  assert.deepEqual(
    list.map((e) => [e.actor, e.event, e.outcome, e.step ?? null]),
    [
      ['submission', 'OrderSubmitted', 'Pending', null],
      ['scheduler', 'Claimed', 'Processing', 'inventory'],
      ['agent', 'StepSucceeded', 'Processing', 'inventory'],
    ],
  );
  assert.equal(list[2].attempt, 1);
  assert.equal(list[2].run, 1);
  assert.equal(list[2].workflow, 'order');
});

test('a transition that fails on 412 writes no history entry; the retried one writes exactly one', async () => {
  const s0 = await submitted();
  const a = transition(s0, { type: 'Claim', by: 'A' }, at(1));
  const b = transition(s0, { type: 'Claim', by: 'B' }, at(1));
  const results = await Promise.allSettled([
    store.save(s0, a.next, a.entry),
    store.save(s0, b.next, b.entry),
  ]);
  assert.equal(results.filter((r) => r.status === 'fulfilled').length, 1);
  const lost = results.find((r) => r.status === 'rejected');
  assert.ok(lost && lost.reason instanceof ConcurrencyConflict);
  assert.equal((await entries(s0.state.orderId)).filter((e) => e.event === 'Claimed').length, 1);

  // applyWithRetry: two writers race, the loser re-reads and decides again (refused here, since
  // the order is no longer Pending, or applied once): never two entries for one transition.
  const s1 = await submitted();
  const id = s1.state.orderId;
  const run = (by: string) =>
    store
      .applyWithRetry(
        id,
        (c) => decide(orderWorkflow, c.state, { type: 'Claim', by }, at(2), policy),
        (c, d) => historyEntryFor({ type: 'Claim', by }, c.state, d.state, at(2)),
      )
      .then(
        (r) => r.conflicts,
        () => -1,
      );
  const outcome = await Promise.all([run('X'), run('Y'), run('Z')]);
  assert.equal(outcome.filter((c) => c >= 0).length, 1, `one claim applied: ${JSON.stringify(outcome)}`);
  assert.equal((await entries(id)).filter((e) => e.event === 'Claimed').length, 1);
});

test('loading an order does not read its history; history pages oldest first; error detail is clipped', async () => {
  const s0 = await submitted();
  const id = s0.state.orderId;
  // Many entries (a redriven message records one without a transition: a plain insert).
  for (let i = 0; i < 30; i++) {
    await store.orders.createEntity(
      historyEntryToRow(id, {
        at: at(10 + i),
        actor: 'operator',
        by: 'ops',
        event: 'DeadLetterRedriven',
        outcome: 'redriven',
        error: 'e'.repeat(5000),
      }),
    );
  }
  metrics.reset();
  const loaded = await store.load(id);
  assert.ok(loaded);
  assert.ok(metrics.entitiesRead <= 2 + orderWorkflow.steps.length, `load read ${metrics.entitiesRead}`);
  const first = await store.history(id, 10);
  assert.ok(first?.continuationToken);
  assert.equal(first.items.length, 10);
  assert.equal(first.items[0].event, 'OrderSubmitted');
  const times = first.items.map((e) => e.at.getTime());
  assert.deepEqual(
    [...times].sort((x, y) => x - y),
    times,
  );
  assert.ok(first.items[1].error!.length <= 2000);
  const rest = await store.history(id, 100, first.continuationToken);
  assert.equal(rest?.items.length, 21);
  assert.equal(await store.history(randomUUID()), null);
});
