import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { RestError, type TableClient } from '@azure/data-tables';
import type { AzuriteInstance } from '../../local/azurite.js';
import type { StateStore } from '../../shared/stateStore/index.js';
import type { StateIndex } from '../../shared/stateStore/stateIndex.js';
import { decide, orderWorkflow } from '../../shared/domain/index.js';
import { OrderAlreadyExists } from '../../shared/stateStore/index.js';
import { at, indexHas, newOrder, policy, step, submitNew, withStore } from './harness.js';

/**
 * A submission whose Orders transaction is refused (past the table client's own retries) after
 * its in-flight index row was written leaves that row with no order. The sweep must not read the
 * missing state row on every run for the whole grace (the throttled simulation measured 68.7 and
 * 40.7 such 404s per completed order), and must never drop a row whose order may still appear.
 */
let azurite: AzuriteInstance;
let store: StateStore;

before(async () => {
  ({ azurite, store } = await withStore());
});
after(async () => {
  await azurite.stop();
});

/** The Orders table answers the next transaction as given, once (how Azure refuses under load). */
function nextTransaction(
  answer: (real: TableClient['submitTransaction']) => TableClient['submitTransaction'],
) {
  const orders = store.orders;
  const real = orders.submitTransaction.bind(orders);
  orders.submitTransaction = async (...args) => {
    delete (orders as Partial<TableClient>).submitTransaction;
    return answer(real)(...args);
  };
}

const serverBusy = () => new RestError('The server is busy.', { statusCode: 503, code: 'ServerBusy' });

/** Counts the reads of one order's state row (the sweep's `getEntity` on the Orders table). */
function countStateReads(orderId: string): { reads: () => number; stop: () => void } {
  const orders = store.orders;
  const real = orders.getEntity.bind(orders);
  let reads = 0;
  orders.getEntity = ((partitionKey: string, rowKey: string, options?: object) => {
    if (partitionKey === orderId && rowKey === 'state') reads += 1;
    return real(partitionKey, rowKey, options);
  }) as TableClient['getEntity'];
  return { reads: () => reads, stop: () => delete (orders as Partial<TableClient>).getEntity };
}

/** Sweeps every 10 s (the Supervisor's timer) over [from, to) seconds. */
async function sweepEvery10s(from: number, to: number): Promise<void> {
  for (let t = from; t < to; t += 10) await store.index.sweep(at(t));
}

test('a refused submission leaves a row the sweep reads at most once, then removes at the end of its grace', async () => {
  const orderId = randomUUID();
  const t = 100_000;
  nextTransaction(() => () => Promise.reject(serverBusy()));
  await assert.rejects(submitNew(store, at(t), orderId), /server is busy/);
  assert.equal(await store.load(orderId), null, 'no order was written');
  assert.equal(await indexHas(store.index, orderId), true, 'the row was put before the refusal');

  const counted = countStateReads(orderId);
  try {
    // From the row's CheckAfter (the claim timeout, 30 s) to just before the grace ends.
    await sweepEvery10s(t + 30, t + store.index.graceSeconds);
    assert.equal(await indexHas(store.index, orderId), true, 'kept within the grace');
    const before = counted.reads();
    assert.ok(before === 0, `the sweeps read the missing order ${before} times within its grace`);
    const r = await store.index.sweep(at(t + store.index.graceSeconds));
    assert.equal(r.removed, 1, 'removed at the end of its grace');
    assert.equal(await indexHas(store.index, orderId), false);
    assert.ok(counted.reads() === 1, `${counted.reads()} reads in all`);
  } finally {
    counted.stop();
  }
});

test('a submission refused at the state index (before its transaction) is parked the same way', async () => {
  const orderId = randomUUID();
  const t = 150_000;
  const index = store.stateIndex;
  index.enter = () => {
    delete (index as Partial<StateIndex>).enter;
    return Promise.reject(serverBusy());
  };
  await assert.rejects(submitNew(store, at(t), orderId), /server is busy/);
  assert.equal(await store.load(orderId), null);
  const counted = countStateReads(orderId);
  try {
    await sweepEvery10s(t + 30, t + store.index.graceSeconds);
    assert.equal(await indexHas(store.index, orderId), true, 'kept within the grace');
    assert.ok(
      counted.reads() === 0,
      `the sweeps read the missing order ${counted.reads()} times within its grace`,
    );
    await store.index.sweep(at(t + store.index.graceSeconds));
    assert.equal(await indexHas(store.index, orderId), false, 'removed at the end of its grace');
  } finally {
    counted.stop();
  }
});

test('a submission whose transaction committed but whose answer was lost is an order at once, not parked for the grace', async () => {
  // The chaos scenario table-write-lost-reply (clean-clone CI, stop 37): the answer of the
  // submission's transaction never came; the host answered 500, the client sent the same
  // Idempotency-Key again and was answered 202 from the stored order. Nobody had sent that order a
  // process-order, and its row was parked to the end of the grace (600 s): 11 of 12 terminal.
  const orderId = randomUUID();
  const t = 250_000;
  nextTransaction((real) => async (...args) => {
    await real(...args);
    throw new RestError('read ECONNRESET', { code: 'ECONNRESET' });
  });
  const stored = await submitNew(store, at(t), orderId);
  assert.equal(stored.state.processState, 'Pending');
  // The ETags it returns are the stored ones: the Scheduler's claim with them is not a conflict.
  const claimed = await step(store, stored, { type: 'Claim', by: 's-1' }, at(t + 1));
  assert.notEqual(claimed.state.processState, 'Pending');
  // And its row is not parked: a claim that then stalls is found after the claim timeout.
  const r = await store.index.sweep(at(t + 90));
  assert.ok(
    r.timedOut.some((c) => c.orderId === orderId),
    'the sweep finds the order 90 s later, not at the end of the grace',
  );
});

test('a lost answer to a submission by another writer of the same key is that order, not a second one', async () => {
  const orderId = randomUUID();
  const t = 260_000;
  // Another submission of the key commits first (another body); this one's transaction fails
  // without an answer. The read that settles the doubt finds the other's order: a conflict.
  nextTransaction(() => async () => {
    await submitNew(store, at(t), orderId);
    throw new RestError('read ECONNRESET', { code: 'ECONNRESET' });
  });
  const d = decide(orderWorkflow, null, { type: 'Submit', orderId }, at(t + 1), policy);
  await assert.rejects(
    store.submit({ ...newOrder(orderId, 'h2'), createdAt: at(t + 1) }, d.state),
    (e: unknown) => e instanceof OrderAlreadyExists && e.requestHash === 'h1',
  );
});

test('a submission refused after its transaction committed (an ambiguous timeout) still gets its order supervised', async () => {
  const orderId = randomUUID();
  const t = 200_000;
  // The service applied the transaction, then the answer was a timeout, and the read that would
  // settle it failed too: the writer cannot tell.
  nextTransaction((real) => async (...args) => {
    await real(...args);
    store.load = () => {
      delete (store as Partial<StateStore>).load;
      return Promise.reject(serverBusy());
    };
    throw new RestError('Operation could not be completed within the specified time.', {
      statusCode: 500,
      code: 'OperationTimedOut',
    });
  });
  await assert.rejects(submitNew(store, at(t), orderId), /could not be completed/);
  assert.equal((await store.load(orderId))?.state.processState, 'Pending', 'the order exists');

  // Nobody sends it a process-order: the Supervisor must find it through its row, which no sweep
  // may remove, by the end of the grace at the latest.
  let found: number | undefined;
  for (let s = t + 30; s <= t + store.index.graceSeconds && found === undefined; s += 10) {
    const r = await store.index.sweep(at(s));
    assert.equal(await indexHas(store.index, orderId), true, `removed at ${s - t} s`);
    if (r.timedOut.some((c) => c.orderId === orderId)) found = s;
  }
  assert.ok(found !== undefined, 'the Supervisor found the order');
  assert.equal(await indexHas(store.index, orderId), true);
});
