import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { after, before, test } from 'node:test';
import { startAzurite, type AzuriteInstance } from '../../local/azurite.js';
import type { StateStoreConnection } from '../../shared/config/settings.js';
import { defaultRetention } from '../../shared/domain/retention.js';
import { inProcessLiveWork, liveInvocations } from '../../shared/retention/liveWork.js';
import { RetentionAccounts } from '../../shared/retention/retentionAccounts.js';
import { openOrderStore, StateStoreAccounts, storesOf } from '../../shared/stateStore/index.js';
import { daysAfter, orderIn } from './harness.js';

/**
 * Issue 24, item 8, with orders over several storage accounts (issue 23): the purge's share of the
 * time while live work runs is one share per process, however many accounts it purges. Each
 * account's Retention pacing itself would let N accounts take N shares. Two accounts on one
 * Azurite (AZURITE_ACCOUNTS), real sockets.
 */
const second = 'retainaccount2';
let azurite: AzuriteInstance;

before(async () => {
  azurite = await startAzurite({ services: ['table', 'blob'], extraAccounts: [second] });
});
after(async () => {
  await azurite.stop();
});

const t0 = new Date('2030-01-01T00:00:00.000Z');

test('two accounts purged while live work runs keep to one share between them: the second waits out the first one’s pause', async () => {
  const connections: StateStoreConnection[] = [
    { kind: 'connectionString', connectionString: azurite.connectionString },
    { kind: 'connectionString', connectionString: azurite.tableConnectionString(second) },
  ];
  const store = await openOrderStore(
    { stateStore: connections[0], stateStoreAccounts: connections },
    { stateIndexPartitions: 4 },
  );
  assert.ok(store instanceof StateStoreAccounts);
  const stores = storesOf(store);
  // Three expired orders at home in each account.
  for (const [a, s] of stores.entries()) {
    let made = 0;
    while (made < 3) {
      const id = randomUUID();
      if (store.home(id) !== s) continue;
      await orderIn(s, 'Processed', new Date(t0.getTime() + a * 10 + made), id);
      made += 1;
    }
  }
  const retention = await RetentionAccounts.open(
    store,
    connections,
    { ...defaultRetention, orderRetentionDays: 1, purgeRatePerSecond: 1000 },
    { kind: 'connectionString', connectionString: azurite.connectionString },
    inProcessLiveWork,
  );
  assert.ok(retention instanceof RetentionAccounts);
  const pacing = retention.parts[0].pacer!.pacing;
  // Each purged order's work, across both accounts: from its marker's write to its marker's delete.
  const orders: { account: number; start: number; end: number }[] = [];
  for (const [account, part] of retention.parts.entries()) {
    const table = part.table;
    const put = table.putMarker.bind(table);
    const del = table.deleteMarker.bind(table);
    table.putMarker = async (...args: Parameters<typeof put>) => {
      orders.push({ account, start: performance.now(), end: NaN });
      return put(...args);
    };
    table.deleteMarker = async (...args: Parameters<typeof del>) => {
      await del(...args);
      const open = [...orders].reverse().find((o) => o.account === account && Number.isNaN(o.end));
      if (open) open.end = performance.now();
    };
  }
  let stop = false;
  const live = liveInvocations.track(async () => {
    while (!stop) await new Promise((r) => setTimeout(r, 20));
  });
  let report;
  try {
    report = await retention.purgeDue(daysAfter(t0, 3), 1);
  } finally {
    stop = true;
    await live;
  }
  assert.equal(report?.purged, 6);
  assert.deepEqual(
    orders.map((o) => o.account),
    [0, 0, 0, 1, 1, 1],
  );
  const pauseFor = (took: number) => (took * (1 - pacing.liveShare)) / pacing.liveShare;
  const gaps = orders.slice(1).map((o, i) => ({
    from: orders[i].account,
    to: o.account,
    gap: o.start - orders[i].end,
    due: pauseFor(orders[i].end - orders[i].start),
  }));
  const short = gaps.filter((g) => g.gap < 0.8 * g.due);
  assert.deepEqual(
    short,
    [],
    `pauses shorter than the one share allows (${pacing.liveShare}) while live work ran: ` +
      short
        .map((g) => `${g.from}->${g.to}: ${g.gap.toFixed(0)} ms after ${g.due.toFixed(0)} ms due`)
        .join(', '),
  );
});
