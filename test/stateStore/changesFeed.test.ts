import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { HttpRequest } from '@azure/functions';
import type { AzuriteInstance } from '../../local/azurite.js';
import { startAzurite } from '../../local/azurite.js';
import type { Dependencies } from '../../shared/app/ports.js';
import { ManualClock } from '../../shared/domain/index.js';
import { orderChanges } from '../../shared/http/operatorApi.js';
import { StateStore } from '../../shared/stateStore/index.js';
import { behindPlatformAuth, principalHeaders } from '../http/principal.js';
import { pool, submitNew } from './harness.js';

/**
 * Issue 27 item 3: GET /api/orders/changes?after= followed as the console follows it reports every
 * change, over as many polls as it takes, whatever entries the index holds unconfirmed.
 */
let azurite: AzuriteInstance;

before(async () => {
  azurite = await startAzurite({ services: ['table'] });
});
after(async () => {
  await azurite.stop();
});

async function poll(deps: Dependencies, cursor?: string): Promise<{ ids: string[]; cursor: string }> {
  const url = new URL('http://127.0.0.1:7071/api/orders/changes');
  if (cursor !== undefined) url.searchParams.set('after', cursor);
  const res = await behindPlatformAuth(() =>
    orderChanges(deps, new HttpRequest({ method: 'GET', url: url.toString(), headers: principalHeaders() })),
  );
  assert.equal(res.status, 200);
  const body = res.jsonBody as { changes: Array<{ orderId: string }>; cursor: string };
  return { ids: body.changes.map((c) => c.orderId), cursor: body.cursor };
}

test('250 changes, some at the same instant, some entries unconfirmed: every change is reported once over the polls', async () => {
  const suffix = randomUUID().replace(/-/g, '').slice(0, 8);
  const store = await StateStore.open(
    { kind: 'connectionString', connectionString: azurite.connectionString },
    {
      ordersTable: `Orders${suffix}`,
      inFlightTable: `InFlight${suffix}`,
      stateIndexTable: `OrderIndex${suffix}`,
    },
  );
  const start = Date.now() - 60_000;
  const clock = new ManualClock(new Date(start));
  const deps = { store, clock } as unknown as Dependencies;
  const first = await poll(deps);
  // 250 orders, three to a millisecond, after the cursor.
  const orders = await pool(250, 8, (i) => submitNew(store, new Date(start + 10 + Math.floor(i / 3))));
  // Groups of transitions that died before their transaction, among them: not confirmed, not listed.
  for (let i = 0; i < 40; i++) {
    await store.stateIndex.enter({
      orderId: orders[i * 5].state.orderId,
      state: 'Error',
      since: new Date(start + 10 + i * 2),
      customerId: 'c-1',
      workflow: 'order',
      workflowVersion: 1,
    });
  }
  clock.set(new Date(start + 10_000));
  const seen: string[] = [];
  let cursor = first.cursor;
  for (let polls = 0; polls < 20; polls++) {
    const page = await poll(deps, cursor);
    seen.push(...page.ids);
    cursor = page.cursor;
    if (page.ids.length === 0) break;
  }
  const expected = orders.map((o) => o.state.orderId).sort();
  assert.equal(new Set(seen).size, seen.length, 'no change reported twice');
  assert.deepEqual(
    [...seen].sort(),
    expected,
    `${expected.length - new Set(seen).size} changes never reported`,
  );
});
