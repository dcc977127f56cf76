import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import type { AzuriteInstance } from '../../local/azurite.js';
import { decide, orderWorkflow, type ProcessState } from '../../shared/domain/index.js';
import { StateStore, type StoredOrder } from '../../shared/stateStore/index.js';
import { rowToIndexed } from '../../shared/stateStore/stateIndex.js';
import type { Row } from '../../shared/stateStore/rows.js';
import { startAzurite } from '../../local/azurite.js';
import { at, newOrder, policy, step, submitNew } from './harness.js';

/**
 * Issue 27 item 1: writers that lose an ordinary race (412 on a transition, 409 on a submission)
 * must take back the group they entered, so once every writer has finished the counts and the
 * index's groups are exactly the truth. Each test opens its own tables.
 */
let azurite: AzuriteInstance;

before(async () => {
  azurite = await startAzurite({ services: ['table'] });
});
after(async () => {
  await azurite.stop();
});

async function freshStore(): Promise<StateStore> {
  const suffix = randomUUID().replace(/-/g, '').slice(0, 8);
  return StateStore.open(
    { kind: 'connectionString', connectionString: azurite.connectionString },
    {
      ordersTable: `Orders${suffix}`,
      inFlightTable: `InFlight${suffix}`,
      stateIndexTable: `OrderIndex${suffix}`,
    },
  );
}

const none = (): Record<ProcessState, number> => ({
  Pending: 0,
  Processing: 0,
  Compensating: 0,
  Processed: 0,
  Compensated: 0,
  Error: 0,
});

/** Counts from the orders' state rows: the truth. */
async function truth(store: StateStore, ids: string[]): Promise<Record<ProcessState, number>> {
  const counts = none();
  for (const id of ids) counts[(await store.load(id))!.state.processState] += 1;
  return counts;
}

/** The groups in the index (their guard entries), per state, and whether each is confirmed. */
async function groups(
  store: StateStore,
): Promise<{ counts: Record<ProcessState, number>; unconfirmed: string[] }> {
  const counts = none();
  const unconfirmed: string[] = [];
  for await (const e of store.stateIndex.table.listEntities()) {
    if (!String(e.rowKey).startsWith('a:') || !String(e.partitionKey).startsWith('state:')) continue;
    const g = rowToIndexed(e as unknown as Row);
    counts[g.state] += 1;
    const current = await store.load(g.orderId);
    if (current?.state.processState !== g.state || current.stateSince?.getTime() !== g.since.getTime()) {
      unconfirmed.push(`${g.state} ${g.orderId} since ${g.since.toISOString()}`);
    }
  }
  return { counts, unconfirmed };
}

test('eight concurrent cancels of each of five orders: one wins, the counts and groups are exactly the truth', async () => {
  const store = await freshStore();
  const orders: StoredOrder[] = [];
  for (let i = 0; i < 5; i++) {
    orders.push(await step(store, await submitNew(store, at(i)), { type: 'Claim', by: 'A' }, at(10 + i)));
  }
  const outcomes = await Promise.allSettled(
    orders.flatMap((o, n) =>
      Array.from({ length: 8 }, (_, k) =>
        store.applyWithRetry(o.state.orderId, (current) =>
          // Orders 0-2: each racer decides at its own instant; 3-4: all at the same instant (one group).
          decide(
            orderWorkflow,
            current.state,
            { type: 'OperatorCancel', by: `op-${k}` },
            n < 3 ? at(100 + n * 10 + k / 100) : at(200),
            policy,
          ),
        ),
      ),
    ),
  );
  const won = outcomes.filter((o) => o.status === 'fulfilled').length;
  assert.equal(won, 5, 'one cancel per order wins');
  const ids = orders.map((o) => o.state.orderId);
  const expected = await truth(store, ids);
  assert.equal(expected.Compensating, 5, 'every order is Compensating');
  assert.deepEqual(await store.countsPerState(), expected, 'the counts are the truth');
  const index = await groups(store);
  assert.deepEqual(index.unconfirmed, [], 'no group the state rows do not confirm');
  assert.deepEqual(index.counts, expected, 'one group per order');
});

test('six concurrent submissions of one order: one creates it, the counts and groups are exactly the truth', async () => {
  const store = await freshStore();
  const ids: string[] = [];
  for (const sameInstant of [false, true]) {
    const orderId = randomUUID();
    ids.push(orderId);
    const outcomes = await Promise.allSettled(
      Array.from({ length: 6 }, (_, k) => {
        const d = decide(
          orderWorkflow,
          null,
          { type: 'Submit', orderId },
          sameInstant ? at(50) : at(20 + k / 100),
          policy,
        );
        return store.submit(newOrder(orderId), d.state);
      }),
    );
    assert.equal(
      outcomes.filter((o) => o.status === 'fulfilled').length,
      1,
      'one submission creates the order',
    );
  }
  const expected = await truth(store, ids);
  assert.equal(expected.Pending, 2);
  assert.deepEqual(await store.countsPerState(), expected, 'the counts are the truth');
  const index = await groups(store);
  assert.deepEqual(index.unconfirmed, [], 'no group the state rows do not confirm');
  assert.deepEqual(index.counts, expected, 'one group per order');
});

/** Two handles on the same tables: two hosts writing one order. */
async function twoHosts(): Promise<[StateStore, StateStore]> {
  const suffix = randomUUID().replace(/-/g, '').slice(0, 8);
  const open = (): Promise<StateStore> =>
    StateStore.open(
      { kind: 'connectionString', connectionString: azurite.connectionString },
      {
        ordersTable: `Orders${suffix}`,
        inFlightTable: `InFlight${suffix}`,
        stateIndexTable: `OrderIndex${suffix}`,
      },
    );
  return [await open(), await open()];
}

/** A gate the test opens: `reached` resolves when the writer arrives, `open()` lets it through. */
function gate(): { wait: () => Promise<void>; reached: Promise<void>; open: () => void } {
  let arrived!: () => void;
  let release!: () => void;
  const reached = new Promise<void>((r) => (arrived = r));
  const released = new Promise<void>((r) => (release = r));
  return {
    reached,
    open: () => release(),
    wait: () => {
      arrived();
      return released;
    },
  };
}

test('a loser that takes its group back, then sees it confirmed, does not re-enter it after the order moved on', async () => {
  // Three writers of one order: A and B decide the same transition at one instant (one group, A
  // creates it), B wins; A's take-back reads the state row (confirmed: B's), and before A enters
  // the group again, D moves the order on and leaves that group. The Table calls are real (Azurite);
  // only A's order-table client is wrapped with gates to force this interleaving.
  const [hostA, hostB] = await twoHosts();
  const stored = await submitNew(hostB, at(0));
  const orderId = stored.state.orderId;
  const claim = { type: 'Claim', by: 'scheduler' } as const;
  const [curA, curB] = [(await hostA.load(orderId))!, (await hostB.load(orderId))!];

  const beforeTransaction = gate();
  const afterConfirmRead = gate();
  const orders = hostA.orders;
  const submitTransaction = orders.submitTransaction.bind(orders);
  const getEntity = orders.getEntity.bind(orders);
  let lost = false;
  orders.submitTransaction = (async (...args: Parameters<typeof submitTransaction>) => {
    await beforeTransaction.wait();
    try {
      return await submitTransaction(...args);
    } catch (e) {
      lost = true;
      throw e;
    }
  }) as typeof orders.submitTransaction;
  orders.getEntity = (async (...args: Parameters<typeof getEntity>) => {
    const row = await getEntity(...args);
    if (lost && args[1] === 'state') await afterConfirmRead.wait();
    return row;
  }) as typeof orders.getEntity;

  const a = step(hostA, curA, claim, at(5)); // enters the Processing group, then waits
  await beforeTransaction.reached;
  const b = await step(hostB, curB, claim, at(5)); // the same group (there already); commits
  beforeTransaction.open();
  await afterConfirmRead.reached; // A lost, took the group back and read B's confirming row
  const moved = await step(hostB, b, { type: 'OperatorCancel', by: 'op' }, at(6));
  assert.notEqual(moved.state.processState, 'Processing', 'the order left Processing');
  afterConfirmRead.open();
  await assert.rejects(a, /ConcurrencyConflict|conflict/i);

  const expected = await truth(hostB, [orderId]);
  const index = await groups(hostB);
  assert.deepEqual(index.unconfirmed, [], 'no group the state row does not confirm');
  assert.deepEqual(await hostB.countsPerState(), expected, 'the counts are the truth');
});
