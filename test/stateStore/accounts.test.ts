import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import type { AzuriteInstance } from '../../local/azurite.js';
import { startAzurite } from '../../local/azurite.js';
import { decide, orderWorkflow } from '../../shared/domain/index.js';
import { SettingsError } from '../../shared/config/settings.js';
import {
  accountNumber,
  OrderAlreadyExists,
  openOrderStore,
  ordersTableOf,
  StateStore,
  StateStoreAccounts,
  StoreMetrics,
  sweepEveryAccount,
  type OrderStore,
  type ReconcileCursor,
  type ReconcileProgress,
} from '../../shared/stateStore/index.js';
import type { StateStoreConnection } from '../../shared/config/settings.js';
import { indexHas, newOrder, policy, pool } from './harness.js';

/**
 * Issue 23: orders spread over several storage accounts (StateStoreAccounts). One Azurite serves
 * two accounts (AZURITE_ACCOUNTS); every order lands in the account its id names, and every read
 * across orders covers both. Then a store of one account is switched to two: every order stored
 * before stays reachable, listed, counted and swept, and going back to one account is refused.
 */
const second = 'ordersaccount2';
let azurite: AzuriteInstance;

before(async () => {
  azurite = await startAzurite({ services: ['table'], extraAccounts: [second] });
});
after(async () => {
  await azurite.stop();
});

const connections = (): StateStoreConnection[] => [
  { kind: 'connectionString', connectionString: azurite.connectionString },
  { kind: 'connectionString', connectionString: azurite.tableConnectionString(second) },
];

function open(tables: string, accounts: 1 | 2, metrics = new StoreMetrics()): Promise<OrderStore> {
  const all = connections().slice(0, accounts);
  return openOrderStore(
    { stateStore: all[0], stateStoreAccounts: all },
    {
      ordersTable: `Orders${tables}`,
      inFlightTable: `InFlight${tables}`,
      stateIndexTable: `OrderIndex${tables}`,
      stateIndexPartitions: 4,
      metrics,
    },
  );
}

async function submit(store: OrderStore, at: Date, orderId: string = randomUUID()): Promise<string> {
  const d = decide(orderWorkflow, null, { type: 'Submit', orderId }, at, policy);
  await store.submit(newOrder(orderId), d.state);
  return orderId;
}

/** Claims the order (Pending → Processing) at `at`. */
async function claim(store: OrderStore, orderId: string, at: Date): Promise<void> {
  await store.applyWithRetry(orderId, (c) =>
    decide(orderWorkflow, c.state, { type: 'Claim', by: 's-1' }, at, policy),
  );
}

async function listAll(
  store: OrderStore,
  state: 'Pending' | 'Processing',
  pageSize: number,
): Promise<string[]> {
  const ids: string[] = [];
  let token: string | undefined;
  for (let pages = 0; ; pages++) {
    assert.ok(pages < 200, 'pages end');
    const page = await store.listOrders({ state }, token, pageSize);
    assert.ok(page.items.length <= pageSize);
    ids.push(...page.items.map((i) => i.orderId));
    token = page.continuationToken;
    if (!token) return ids;
  }
}

/** Whether an account's Orders table holds the order (read straight from it). */
async function holds(store: StateStore, orderId: string): Promise<boolean> {
  return (await store.load(orderId)) !== null;
}

const secondsAgo = (s: number): Date => new Date(Date.now() - s * 1000);

describe('two accounts', () => {
  const tables = randomUUID().replace(/-/g, '').slice(0, 8);
  let store: OrderStore;
  const ids: string[] = [];

  before(async () => {
    store = await open(tables, 2);
    assert.ok(store instanceof StateStoreAccounts);
    // Distinct instants, oldest first: order i entered Pending 100 - i seconds ago.
    ids.push(...(await pool(40, 8, (i) => submit(store, secondsAgo(100 - i)))));
  });

  test('every order lands in the account its id names, and both accounts hold some', async () => {
    const router = store as StateStoreAccounts;
    const per = [0, 0];
    for (const id of ids) {
      const home = accountNumber(id, 2);
      per[home] += 1;
      assert.ok(await holds(router.stores[home], id), `${id} in account ${home}`);
      assert.ok(!(await holds(router.stores[1 - home], id)), `${id} not in account ${1 - home}`);
    }
    assert.ok(per[0] > 5 && per[1] > 5, `spread ${per.join('/')}`);
    for (const id of ids) assert.equal((await store.load(id))?.order.orderId, id);
  });

  test('list pages cover both accounts, newest first, each order once; counts are exact', async () => {
    for (const pageSize of [1, 7, 50]) {
      const listed = await listAll(store, 'Pending', pageSize);
      assert.deepEqual(listed, [...ids].reverse(), `page size ${pageSize}`);
    }
    const counts = await store.countsPerState();
    assert.equal(counts.Pending, 40);
    assert.equal(counts.Processing, 0);
  });

  test('changes, the oldest in flight and claims go to the right account', async () => {
    const claimed = ids.slice(0, 10);
    for (const [i, id] of claimed.entries()) await claim(store, id, secondsAgo(30 - i));
    const counts = await store.countsPerState();
    assert.deepEqual([counts.Pending, counts.Processing], [30, 10]);
    assert.deepEqual(await listAll(store, 'Processing', 3), [...claimed].reverse());
    const oldest = await store.oldestInFlight();
    assert.equal(oldest?.orderId, ids[10], 'the oldest Pending, whatever its account');
    const { changes } = await store.changes(secondsAgo(40), new Date(), 100);
    assert.deepEqual(new Set(changes.map((c) => c.orderId)), new Set(claimed));
  });

  test("the sweep reads every account's in-flight index", async () => {
    const sweep = await sweepEveryAccount(store, new Date(Date.now() + 3_600_000));
    assert.deepEqual(new Set(sweep.timedOut.map((c) => c.orderId)), new Set(ids));
  });

  test('the reconcile pass goes through every account and repairs the second', async () => {
    const router = store as StateStoreAccounts;
    const lost = ids.find((id) => accountNumber(id, 2) === 1)!;
    const index = router.stores[1].index;
    await index.table.deleteEntity(lost.slice(0, 2), lost);
    assert.equal(await indexHas(index, lost), false);
    let cursor: ReconcileCursor | null = { stage: 'orders', full: true };
    let recreated = 0;
    const stages: string[] = [];
    for (let pages = 0; cursor; pages++) {
      assert.ok(pages < 50, 'the pass ends');
      stages.push(`${cursor.stage}@${(cursor.token ?? '').slice(0, 3)}`);
      const progress: ReconcileProgress = await store.reconcilePage(cursor, 100);
      recreated += progress.recreated;
      cursor = progress.next;
    }
    assert.equal(recreated, 1);
    assert.equal(await indexHas(index, lost), true);
    assert.ok(stages.includes('orders@a1:'), stages.join(' '));
  });
  test('an account that stops short (entries it cannot confirm) holds the merge back: nothing skipped', async () => {
    const router = store as StateStoreAccounts;
    // Groups a writer entered before a transaction that never came: hidden while in their grace,
    // and newer than every order, so account 0 spends its reads on them and stops short.
    for (let i = 0; i < 12; i++) {
      await router.stores[0].stateIndex.enter({
        orderId: randomUUID(),
        state: 'Pending',
        since: secondsAgo(5 - i / 10),
        customerId: 'c-1',
        workflow: 'order',
        workflowVersion: 1,
      });
    }
    const pending = ids.slice(10);
    for (const pageSize of [1, 2, 3]) {
      assert.deepEqual(
        await listAll(store, 'Pending', pageSize),
        [...pending].reverse(),
        `page size ${pageSize}`,
      );
    }
  });
});

describe('from one account to two', () => {
  const tables = randomUUID().replace(/-/g, '').slice(0, 8);
  const before1: string[] = [];
  let one: OrderStore;
  let two: OrderStore;

  before(async () => {
    one = await open(tables, 1);
    assert.ok(one instanceof StateStore, 'one account: the plain store');
    before1.push(...(await pool(30, 8, (i) => submit(one, secondsAgo(200 - i)))));
    two = await open(tables, 2);
  });

  test('orders stored under one account stay where they are and are read, listed, counted', async () => {
    const router = two as StateStoreAccounts;
    assert.deepEqual(router.layout.all(), [2, 1]);
    const moved = before1.filter((id) => accountNumber(id, 2) === 1);
    assert.ok(moved.length > 3, 'some old orders have account 1 as their new home');
    for (const id of before1) {
      assert.ok(await holds(router.stores[0], id));
      assert.equal((await two.load(id))?.order.orderId, id);
    }
    const after2 = await pool(20, 8, (i) => submit(two, secondsAgo(100 - i)));
    assert.ok(after2.some((id) => accountNumber(id, 2) === 1));
    for (const id of after2) assert.ok(await holds(router.stores[accountNumber(id, 2)], id));
    assert.deepEqual(await listAll(two, 'Pending', 6), [...before1, ...after2].reverse());
    assert.equal((await two.countsPerState()).Pending, 50);

    // An old order whose new home is account 1 moves on in account 0, and its history with it.
    await claim(two, moved[0], secondsAgo(10));
    assert.equal((await router.stores[0].load(moved[0]))?.state.processState, 'Processing');
    assert.equal(await holds(router.stores[1], moved[0]), false);
    assert.ok((await two.history(moved[0]))?.exists);
    const counts = await two.countsPerState();
    assert.deepEqual([counts.Pending, counts.Processing], [49, 1]);

    // A dead letter's order: its history entry goes to the account that holds it.
    assert.equal(await ordersTableOf(two, moved[0]), router.stores[0].orders);
    const newer = after2.find((id) => accountNumber(id, 2) === 1)!;
    assert.equal(await ordersTableOf(two, newer), router.stores[1].orders);

    // Submitting an old id again is the same order, not a second one in account 1.
    await assert.rejects(submit(two, new Date(), moved[1]), OrderAlreadyExists);
    assert.equal(await holds(router.stores[1], moved[1]), false);

    // The sweep finds the old orders too.
    const sweep = await sweepEveryAccount(two, new Date(Date.now() + 3_600_000));
    assert.equal(sweep.timedOut.length, 50);
  });

  test('going back to one account is refused, naming the setting', async () => {
    await assert.rejects(open(tables, 1), (e: unknown) => {
      assert.ok(e instanceof SettingsError);
      assert.match(
        e.message,
        /StateStoreAccounts: lists 1 account\(s\), but orders have been stored across 2/,
      );
      return true;
    });
  });
});
