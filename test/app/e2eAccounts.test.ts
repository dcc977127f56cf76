import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { localOrderAccounts, randomPorts, startStack, type Stack } from '../../local/stack.js';
import { accountNumber, StateStore } from '../../shared/stateStore/index.js';
import { Api, terminal, waitFor } from './helpers.js';

/**
 * End to end, issue 23: the local host runs with its orders first in one storage account, then
 * (restarted with StateStoreAccounts) spread over two accounts of the same Azurite. Orders in
 * flight across the switch are timed out and retried by the Supervisor under the new layout; new
 * orders land in both accounts; every order reaches Processed, listed and counted exactly once.
 */
describe('orders spread over two storage accounts, switched from one while orders are in flight', () => {
  let stack: Stack;
  let api: Api;
  let accounts: string[];
  /** The host's log, printed when the test fails (a 500 names only its invocation id). */
  const hostLines: string[] = [];

  before(async () => {
    stack = await startStack({
      ports: randomPorts,
      log: (line) => {
        if (line.startsWith('[host] ')) hostLines.push(line);
      },
      storageAccounts: 2,
      // The first host runs as a single-account deployment from its start: a host started on
      // both would write the layout row at its first Supervisor run, and the single-account host
      // after it would then rightly refuse every request (the flake this once was).
      settings: { STEP_TIMEOUT_SECONDS: '6', SUPERVISOR_SCHEDULE: '*/1 * * * * *', StateStoreAccounts: '' },
    });
    api = new Api(stack);
    accounts = [
      stack.azurite.connectionString,
      ...localOrderAccounts(2).map((a) => stack.azurite.tableConnectionString(a)),
    ];
  });
  after(async () => {
    await stack?.stop();
  });

  async function listed(state: string): Promise<string[]> {
    const ids: string[] = [];
    let path: string | undefined = `/orders?state=${state}&pageSize=5`;
    for (let page = 0; path && page < 100; page++) {
      const res = await api.operator('GET', path);
      assert.equal(res.status, 200, JSON.stringify(res.body));
      ids.push(...(res.body.orders as Array<{ orderId: string }>).map((o) => o.orderId));
      path = typeof res.body.next === 'string' ? res.body.next.replace(/^\/api/, '') : undefined;
    }
    return ids;
  }

  it('every order reaches Processed, in the account its id names, counted exactly', async () => {
    try {
      await switchAndProcess();
    } catch (error) {
      // A 500 names only its invocation id: keep the host's errors and warnings with the failure.
      console.error(hostLines.filter((l) => /\[(Error|Warning)\]/.test(l)).join('\n'));
      throw error;
    }
  });

  async function switchAndProcess(): Promise<void> {
    assert.equal(accounts.length, 2);
    // One account first: the host as a single-account deployment runs it (see before()).
    assert.equal(stack.env.StateStoreAccounts, '');
    // Inventory hangs on the first attempt: these wait in Processing for the Supervisor.
    const hung = await Promise.all(
      Array.from({ length: 6 }, () => api.place(['SKU-1', 'FAULT:inventory:hang:1'])),
    );
    const early = await Promise.all(Array.from({ length: 4 }, () => api.place(['SKU-1'])));
    await Promise.all(early.map((id) => api.until(id, terminal)));
    await waitFor('the hung orders claimed', async () => {
      const views = await Promise.all(hung.map((id) => api.get(id)));
      return views.every((v) => v.body.processState === 'Processing');
    });

    // Two accounts: the same host restarted with StateStoreAccounts.
    stack.env.StateStoreAccounts = accounts.join(',');
    await stack.killHost('SIGTERM');
    await stack.startHost();
    const late = await Promise.all(Array.from({ length: 14 }, () => api.place(['SKU-1'])));
    const all = [...hung, ...early, ...late];
    for (const id of all) {
      const view = await api.until(id, terminal, 90_000);
      assert.equal(view.processState, 'Processed', id);
    }
    for (const id of hung)
      assert.ok(((await api.get(id)).body.failureCount ?? 0) >= 1, 'retried by the Supervisor');

    // Where each order lives: those from before the switch in account 0, the later ones by id.
    const stores = await Promise.all(
      accounts.map((connectionString) => StateStore.open({ kind: 'connectionString', connectionString })),
    );
    const held = async (i: number, id: string) => (await stores[i].load(id)) !== null;
    for (const id of [...hung, ...early]) assert.ok(await held(0, id), `${id} stays in account 0`);
    const per = [0, 0];
    for (const id of late) {
      const home = accountNumber(id, 2);
      per[home] += 1;
      assert.ok(await held(home, id), `${id} in account ${home}`);
      assert.equal(await held(1 - home, id), false);
    }
    assert.ok(per[0] > 0 && per[1] > 0, `new orders in both accounts: ${per.join('/')}`);

    const counts = await api.operator('GET', '/orders/counts');
    assert.equal(counts.status, 200, JSON.stringify(counts.body));
    const c = counts.body.counts as Record<string, number>;
    assert.deepEqual([c.Processed, c.Pending, c.Processing, c.Error], [all.length, 0, 0, 0]);
    const processed = await listed('Processed');
    assert.equal(processed.length, all.length, 'each order listed once');
    assert.deepEqual(new Set(processed), new Set(all));
  }

  it('a host restarted with fewer accounts than orders are stored across fails at start-up, naming StateStoreAccounts', async () => {
    // After the test above the layout row says two accounts. Before, such a host started and
    // answered 500 to every request (the check ran on each one's first use of the store).
    const spread = stack.env.StateStoreAccounts;
    stack.env.StateStoreAccounts = '';
    await stack.killHost('SIGTERM');
    try {
      await assert.rejects(stack.startHost(), (e: Error) => {
        assert.match(e.message, /exited .* before it was ready/);
        assert.match(
          e.message,
          /App setting StateStoreAccounts: lists 1 account\(s\), but orders have been stored across 2/,
        );
        return true;
      });
    } finally {
      stack.env.StateStoreAccounts = spread;
      await stack.killHost('SIGTERM'); // a host that did start (the defect) frees its port
      await stack.startHost();
    }
    const counts = await api.operator('GET', '/orders/counts');
    assert.equal(counts.status, 200, 'the host with both accounts serves again');
  });
});
