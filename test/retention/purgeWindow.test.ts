import assert from 'node:assert/strict';
import { test } from 'node:test';
import { HttpRequest, InvocationContext } from '@azure/functions';
import type { Dependencies } from '../../shared/app/ports.js';
import { ManualClock, orderIdFromIdempotencyKey, orderWorkflowVersions } from '../../shared/domain/index.js';
import { getOrder, submitOrder } from '../../shared/http/orderApi.js';
import type { MessageBus } from '../../shared/messaging/bus.js';
import { orderRowKey, stateRowKey, type StateStore } from '../../shared/stateStore/index.js';
import { orderBody } from '../app/helpers.js';
import { behindPlatformAuth, principalHeaders } from '../http/principal.js';
import { policy } from '../stateStore/harness.js';
import { daysAfter, orderIn, partitionKeys, retentionAzurite, withRetention } from './harness.js';

/**
 * The window of a purge between its fence (the state row deleted) and its tombstone (the `order`
 * row replaced): the order no longer loads, yet its `order` row is still the order's. A
 * resubmission of its request and an operator's GET must answer as for a purged order (410, the
 * archive), never 500 or 404.
 */
const azurite = retentionAzurite();

const t0 = new Date('2030-01-01T00:00:00.000Z');

/** Neither path may send a message: a purged order's answer writes and sends nothing. */
const noBus = new Proxy({} as MessageBus, {
  get: (_t, name) => () => {
    throw new Error(`the bus was used (${String(name)})`);
  },
});

const retentionStore = (deps: Dependencies) => deps.store as StateStore;

async function stoppedAtFence() {
  const { store, retention } = await withRetention(azurite());
  const key = 'purge-window-key';
  const orderId = orderIdFromIdempotencyKey(key);
  await orderIn(store, 'Processed', t0, orderId);
  await assert.rejects(
    retention.purgeNow(daysAfter(t0, 100), 10, (at) => {
      if (at === 'fenced') throw new Error('crash after fenced');
    }),
    /crash after fenced/,
  );
  const keys = await partitionKeys(store, orderId);
  assert.ok(keys.includes(orderRowKey) && !keys.includes(stateRowKey), `in the window: ${keys.join()}`);
  const row = await store.orders.getEntity(orderId, orderRowKey);
  assert.notEqual(row.Tombstone, true, 'not yet a tombstone');
  const deps: Dependencies = {
    store,
    bus: noBus,
    clock: new ManualClock(daysAfter(t0, 100)),
    policy,
    workflows: orderWorkflowVersions,
    retention,
  };
  return { deps, key, orderId, keys };
}

test('between the fence and the tombstone a resubmission of the request answers 410 naming the archive, never 500', async () => {
  const { deps, key, orderId, keys } = await stoppedAtFence();
  const res = await submitOrder(
    deps,
    new HttpRequest({
      method: 'POST',
      url: 'http://127.0.0.1/api/orders',
      headers: { 'content-type': 'application/json', 'idempotency-key': key },
      body: { string: JSON.stringify(orderBody()) },
    }),
    new InvocationContext({ functionName: 'submitOrder' }),
  );
  assert.equal(res.status, 410, String(res.body));
  assert.equal(
    res.headers && (res.headers as Record<string, string>)['Content-Type'],
    'application/problem+json',
  );
  assert.match(
    String((JSON.parse(String(res.body)) as { archive?: string }).archive),
    /^order-archive\/orders\//,
  );
  assert.deepEqual(await partitionKeys(retentionStore(deps), orderId), keys, 'nothing written');
});

test('between the fence and the tombstone an operator GET answers the archived document; a client 404', async () => {
  const { deps, orderId } = await stoppedAtFence();
  const request = (headers: Record<string, string>) =>
    new HttpRequest({
      method: 'GET',
      url: `http://127.0.0.1/api/orders/${orderId}`,
      headers,
      params: { orderId },
    });
  const asOperator = await behindPlatformAuth(() => getOrder(deps, request(principalHeaders())));
  assert.equal(asOperator.status, 200, JSON.stringify(asOperator.jsonBody));
  const body = asOperator.jsonBody as { archived: boolean; state: { processState: string } };
  assert.equal(body.archived, true);
  assert.equal(body.state.processState, 'Processed');
  assert.equal((await getOrder(deps, request({}))).status, 404);
});
