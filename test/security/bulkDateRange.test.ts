import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { decide, orderWorkflow } from '../../shared/domain/index.js';
import { bulkAction } from '../../shared/http/operatorApi.js';
import { listOrders } from '../../shared/http/orderApi.js';
import { behindPlatformAuth, principalHeaders } from '../http/principal.js';
import { invoke, openApiHarness, request, type ApiHarness } from './harness.js';
import { newOrder } from '../stateStore/harness.js';

/**
 * Issue 27 item 4 through the HTTP API: a date outside the index's 1970..2286 range must not
 * select every order, neither in the list nor in a bulk action's preview (what confirm acts on).
 */
let h: ApiHarness;

before(async () => {
  h = await openApiHarness();
});
after(async () => {
  await h.stop();
});

test('to=1900 lists none and a bulk cancel with it matches none; from=0001 lists all', async () => {
  const ids: string[] = [];
  for (let i = 0; i < 3; i++) {
    const orderId = randomUUID();
    const d = decide(orderWorkflow, null, { type: 'Submit', orderId }, new Date(), h.deps.policy);
    await h.deps.store.submit(newOrder(orderId), d.state);
    ids.push(orderId);
  }
  const list = (query: Record<string, string>) =>
    behindPlatformAuth(() =>
      invoke(
        listOrders,
        h.deps,
        request({ method: 'GET', path: '/orders', query, headers: principalHeaders() }),
      ),
    );
  const listed = async (query: Record<string, string>) => {
    const res = await list({ state: 'Pending', pageSize: '100', ...query });
    assert.equal(res.status, 200);
    return ((res.jsonBody as { orders: Array<{ orderId: string }> }).orders ?? []).map((o) => o.orderId);
  };
  assert.deepEqual(await listed({ to: '1900-01-01T00:00:00Z' }), []);
  const all = await listed({ from: '0001-01-01T00:00:00Z' });
  for (const id of ids) assert.ok(all.includes(id), 'from year 1 lists every order');
  const preview = await behindPlatformAuth(() =>
    invoke(
      bulkAction,
      h.deps,
      request({
        method: 'POST',
        path: '/orders/bulk/cancel',
        params: { action: 'cancel' },
        headers: { ...principalHeaders(), 'content-type': 'application/json' },
        body: JSON.stringify({ filter: { state: 'Pending', to: '1900-01-01T00:00:00Z' } }),
      }),
    ),
  );
  assert.equal(preview.status, 200);
  assert.equal((preview.jsonBody as { matched: number }).matched, 0, 'the bulk cancel matches nothing');
});
