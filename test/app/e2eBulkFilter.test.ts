import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { after, before, describe, it } from 'node:test';
import { randomPorts, startStack, type Stack } from '../../local/stack.js';
import { Api, orderBody, waitFor } from './helpers.js';

interface BulkResult {
  orderId: string;
  status: number;
  detail?: string;
}

/**
 * End to end: a bulk action re-checks each order against its filter when it reaches it. Orders
 * wait out a long back-off in Pending (inventory hangs, soft threshold 1); a bulk cancel of them
 * runs at one order a second, and meanwhile the operator's retry-now sends the last two into
 * Processing. Those two left the filter: they are answered 409 and left alone.
 */
describe('a bulk action acts only on orders that still match its filter', () => {
  let stack: Stack;
  let api: Api;

  before(async () => {
    stack = await startStack({
      ports: randomPorts,
      settings: {
        STEP_TIMEOUT_SECONDS: '8',
        SUPERVISOR_SCHEDULE: '*/1 * * * * *',
        FAILURE_SOFT_THRESHOLD: '1',
        FAILURE_HARD_THRESHOLD: '5',
        EXTENDED_BACKOFF_SECONDS: '300',
        OPERATOR_BULK_RATE_PER_SECOND: '1',
      },
    });
    api = new Api(stack);
  });
  after(async () => {
    await stack?.stop();
  });

  const bulkCancel = (body: unknown) => api.call('POST', '/orders/bulk/cancel', { body, operator: true });

  it('a bulk cancel of Pending orders skips those that started Processing while it ran', async () => {
    const customerId = `bulk-${randomUUID()}`;
    const ids: string[] = [];
    for (let i = 0; i < 6; i++) {
      const placed = await api.submit(
        { ...orderBody(['SKU-1', 'FAULT:inventory:hang:99']), customerId },
        randomUUID(),
      );
      assert.equal(placed.status, 202, JSON.stringify(placed.body));
      ids.push(placed.body.orderId as string);
    }
    // Each timed out once and now waits out its back-off, Pending.
    await waitFor(
      'every order backing off in Pending',
      async () => {
        const views = await Promise.all(ids.map((id) => api.get(id)));
        return views.every((v) => v.body.processState === 'Pending' && (v.body.failureCount ?? 0) >= 1);
      },
      60_000,
    );
    const filter = { state: 'Pending', customerId };
    const preview = await bulkCancel({ filter });
    assert.equal(preview.status, 200, JSON.stringify(preview.body));
    assert.equal(preview.body.matched, ids.length);
    const order = preview.body.orderIds as string[];
    const leaving = order.slice(-2);

    const run = bulkCancel({ filter, confirm: preview.body.confirm });
    // The run reaches the last two after 4 and 5 s; they are claimed long before that.
    await new Promise((r) => setTimeout(r, 300));
    for (const id of leaving) {
      const retry = await api.operator('POST', `/orders/${id}/retry`);
      assert.equal(retry.status, 202, JSON.stringify(retry.body));
    }
    await waitFor('the retried orders in Processing', async () => {
      const views = await Promise.all(leaving.map((id) => api.get(id)));
      return views.every((v) => v.body.processState === 'Processing');
    });
    const done = await run;
    assert.equal(done.status, 200, JSON.stringify(done.body));
    const results = done.body.results as BulkResult[];
    assert.deepEqual(
      results.map((r) => r.orderId),
      order,
      'every order matched at the start is answered',
    );
    for (const r of results) {
      if (leaving.includes(r.orderId)) {
        assert.equal(r.status, 409, `left the filter, yet: ${JSON.stringify(r)}`);
        assert.match(r.detail ?? '', /no longer matches the filter/i);
      } else {
        assert.equal(r.status, 202, JSON.stringify(r));
      }
    }
    for (const id of leaving) {
      const view = (await api.get(id)).body;
      assert.equal(view.compensationReason, null, `${id} was cancelled: ${JSON.stringify(view)}`);
      const history = await api.operator('GET', `/orders/${id}/history`);
      const events = (history.body.entries as Array<{ event: string }>).map((e) => e.event);
      assert.ok(!events.includes('OperatorCancel'), events.join(','));
    }
  });
});
