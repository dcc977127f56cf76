import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { after, before, describe, it } from 'node:test';
import { ServiceBusClient } from '@azure/service-bus';
import { randomPorts, startStack, type Stack } from '../../local/stack.js';
import { orderIdFromIdempotencyKey } from '../../shared/domain/index.js';
import { StateStore } from '../../shared/stateStore/index.js';
import { queues } from '../../shared/messaging/entities.js';
import { Api, Collector, type ApiResponse, orderBody, terminal, waitFor } from './helpers.js';

/**
 * End to end: the operator's resubmit and cancel, and the API's answers to bad input. The
 * shipping service is made to hang for every request (a service-wide fault, not a fault SKU) so
 * that an order errors in run 1 and, once the "operator has fixed the cause" (faults cleared),
 * succeeds in run 2. The bad-input tests never reach shipping, so they share the stack safely.
 */
describe('operator actions and bad input through the stack', { concurrency: true }, () => {
  let stack: Stack;
  let api: Api;
  let bus: ServiceBusClient;
  let alerts: Collector;
  let store: StateStore;
  let cancelDone = false;

  before(async () => {
    stack = await startStack({
      ports: randomPorts,
      settings: {
        STEP_TIMEOUT_SECONDS: '3',
        SUPERVISOR_SCHEDULE: '*/1 * * * * *',
        FAILURE_SOFT_THRESHOLD: '1',
        FAILURE_HARD_THRESHOLD: '2',
        EXTENDED_BACKOFF_SECONDS: '2',
      },
    });
    api = new Api(stack);
    bus = new ServiceBusClient(stack.env.ServiceBusConnection);
    alerts = new Collector(bus, 'operator-alerts');
    store = await StateStore.open({
      kind: 'connectionString',
      connectionString: stack.env.StateStoreConnection,
    });
  });

  after(async () => {
    await alerts?.close();
    await bus?.close();
    await stack?.stop();
  });

  const effectsFor = (service: 'inventory' | 'payment' | 'shipping', orderId: string) =>
    stack.remote[service].ledger().effects.filter((e) => e.orderId === orderId);
  const compensationsFor = (service: 'inventory' | 'payment' | 'shipping', orderId: string) =>
    stack.remote[service].ledger().compensations.filter((c) => c.orderId === orderId);

  it('cancel of an in-flight order compensates what completed; 409 on cancel of a terminal order', async () => {
    try {
      await cancelScenario();
    } finally {
      cancelDone = true;
    }
  });

  async function cancelScenario() {
    const toCancel = await api.place(['SKU-2', 'FAULT:shipping:hang:99']);
    // Cancel while shipping hangs (Processing, or Pending between retries).
    await waitFor('order to reach shipping', async () => {
      const v = (await api.get(toCancel)).body;
      return v.steps?.[1]?.status === 'Completed' && ['Processing', 'Pending'].includes(v.processState ?? '');
    });
    const cancel = await api.operator('POST', `/orders/${toCancel}/cancel?reason=customer%20asked`);
    assert.equal(cancel.status, 202, JSON.stringify(cancel.body));
    const cancelled = await api.until(toCancel, terminal);
    assert.equal(cancelled.processState, 'Compensated', JSON.stringify(cancelled));
    assert.equal(cancelled.compensationReason, 'cancelled');
    assert.equal(compensationsFor('payment', toCancel).length, 1, 'one refund');
    assert.equal(compensationsFor('payment', toCancel)[0].tombstone, false);
    assert.equal(compensationsFor('inventory', toCancel).length, 1, 'one release');
    assert.equal(effectsFor('shipping', toCancel).length, 0, 'no shipment');
    // The in-doubt shipping step was undone as a tombstone, so the hung request can never ship.
    assert.ok(compensationsFor('shipping', toCancel).every((c) => c.tombstone));
    const again = await api.operator('POST', `/orders/${toCancel}/cancel`);
    assert.equal(again.status, 409, 'a terminal order cannot be cancelled');
    assert.match(again.contentType, /application\/problem\+json/);
    assert.equal(again.body.processState, 'Compensated');
    const resubmitCompensated = await api.operator('POST', `/orders/${toCancel}/resubmit`);
    assert.equal(resubmitCompensated.status, 409, 'only an order in Error can be resubmitted');
  }

  /**
   * A shipping outage (every request hangs, undo included) makes run 1 give up, and its undo of
   * the in-doubt shipping step times out too: Error (CompensationGaveUp) with inventory and payment
   * still Completed. After the fix, run 2 keeps those (no second charge) and ships once.
   */
  it('resubmit: Error in run 1, resubmitted after the fix, Processed in run 2; 409s on non-Error orders', async () => {
    // Not in parallel with the cancel test: the outage is service-wide.
    await waitFor('the cancel test to finish with shipping', () => cancelDone);
    stack.remote.shipping.setFaults({ hangRate: 1 });
    const orderId = await api.place(['SKU-1']);
    await waitFor(
      'order to be in flight',
      async () => (await api.get(orderId)).body.processState === 'Processing',
    );
    const early = await api.operator('POST', `/orders/${orderId}/resubmit`);
    assert.equal(early.status, 409, 'an in-flight order cannot be resubmitted');
    assert.match(early.contentType, /application\/problem\+json/);

    const errored = await api.until(orderId, terminal, 90_000);
    assert.equal(errored.processState, 'Error', JSON.stringify(errored));
    assert.equal(errored.run, 1);
    assert.equal(errored.error?.code, 'CompensationGaveUp');
    assert.deepEqual(
      errored.steps.map((s: { status: string }) => s.status),
      ['Completed', 'Completed', 'CompensationFailed'],
    );
    await waitFor('operator alerts for run 1', () => alerts.for(orderId).length >= 2);
    assert.deepEqual(
      alerts
        .for(orderId)
        .map((m) => m.subject)
        .sort(),
      ['CompensationGaveUp', 'GaveUp'],
    );

    // The operator fixes the cause, then resubmits.
    stack.remote.shipping.setFaults({});
    const resubmit = await api.operator('POST', `/orders/${orderId}/resubmit`);
    assert.equal(resubmit.status, 202, JSON.stringify(resubmit.body));
    assert.equal(resubmit.body.processState, 'Pending');
    const done = await api.until(orderId, terminal);
    assert.equal(done.processState, 'Processed', JSON.stringify(done));
    assert.equal(done.run, 2);
    // Attempts cut off by complete-by do not open the Agent's circuit breaker, so once the cause
    // is fixed run 2 ships at the first attempt: no timeout, one call.
    const run2Requests = stack.remote.shipping
      .ledger()
      .requests.filter((r) => r.idempotencyKey === `${orderId}:shipping:run2`);
    assert.equal(done.failureCount, 0, JSON.stringify({ done, run2Requests }));
    assert.equal(run2Requests.length, 1, JSON.stringify(run2Requests));
    assert.equal(done.error, null);
    assert.deepEqual(
      done.steps.map((s: { status: string }) => s.status),
      ['Completed', 'Completed', 'Completed'],
    );
    // Steps that completed in run 1 stand: one reservation, one charge, nothing undone.
    assert.equal(effectsFor('inventory', orderId).length, 1);
    assert.deepEqual(
      effectsFor('payment', orderId).map((e) => e.idempotencyKey),
      [`${orderId}:payment`],
    );
    assert.equal(compensationsFor('payment', orderId).length, 0);
    assert.deepEqual(
      effectsFor('shipping', orderId).map((e) => e.idempotencyKey),
      [`${orderId}:shipping:run2`],
      'one shipment, in run 2',
    );
    assert.equal(alerts.for(orderId).length, 2, 'run 2 raised no alert');

    const resubmitProcessed = await api.operator('POST', `/orders/${orderId}/resubmit`);
    assert.equal(resubmitProcessed.status, 409);
    assert.equal(resubmitProcessed.body.processState, 'Processed');
    const cancelProcessed = await api.operator('POST', `/orders/${orderId}/cancel`);
    assert.equal(cancelProcessed.status, 409);
  });

  it('operator actions on unknown or malformed ids: 404 and 400', async () => {
    assert.equal((await api.operator('POST', `/orders/${randomUUID()}/resubmit`)).status, 404);
    assert.equal((await api.operator('POST', `/orders/${randomUUID()}/cancel`)).status, 404);
    assert.equal((await api.operator('POST', '/orders/nope/cancel')).status, 400);
  });

  it('bad HTTP input gets a problem and writes nothing', async () => {
    const keys: string[] = [];
    const key = () => {
      const k = `bad-${randomUUID()}`;
      keys.push(k);
      return k;
    };
    const expectProblem = (res: ApiResponse, status: number) => {
      assert.equal(res.status, status, JSON.stringify(res.body));
      assert.match(res.contentType, /application\/problem\+json/);
      assert.equal(res.body.status, status);
      assert.equal(typeof res.body.title, 'string');
      assert.ok(!JSON.stringify(res.body).includes('    at '), 'no stack trace');
    };

    // 400 naming the failing fields.
    const invalid = {
      ...orderBody(),
      customerId: '',
      items: [{ sku: 'A', quantity: 0, unitPrice: 1 }],
      extra: 1,
    };
    const bad = await api.call('POST', '/orders', { body: invalid, headers: { 'idempotency-key': key() } });
    expectProblem(bad, 400);
    const pointers = (bad.body.errors ?? []).map((e: { pointer: string }) => e.pointer);
    for (const p of ['/customerId', '/items/0/quantity'])
      assert.ok(pointers.includes(p), `${p} in ${pointers}`);
    assert.ok(
      pointers.some((p: string) => p === '' || p === '/'),
      'the unknown field is reported',
    );

    // 413 over 64 KiB.
    const big = JSON.stringify({ ...orderBody(), pad: 'x'.repeat(70 * 1024) });
    expectProblem(
      await api.call('POST', '/orders', {
        raw: big,
        headers: { 'content-type': 'application/json', 'idempotency-key': key() },
      }),
      413,
    );
    // 413 also when the size is not declared (chunked upload).
    const chunks = [
      new TextEncoder().encode(big.slice(0, 40_000)),
      new TextEncoder().encode(big.slice(40_000)),
    ];
    const streamed = await fetch(`${stack.baseUrl}/orders`, {
      method: 'POST',
      headers: {
        'content-type': 'application/json',
        'x-functions-key': stack.functionKey,
        'idempotency-key': key(),
      },
      body: new ReadableStream({
        pull(controller) {
          const next = chunks.shift();
          if (next) controller.enqueue(next);
          else controller.close();
        },
      }),
      duplex: 'half',
    } as RequestInit);
    assert.equal(streamed.status, 413, await streamed.text());
    // 400 for nesting deeper than the limit, an empty body, and a body that is not an object.
    expectProblem(
      await api.call('POST', '/orders', {
        raw: '['.repeat(100) + ']'.repeat(100),
        headers: { 'content-type': 'application/json', 'idempotency-key': key() },
      }),
      400,
    );
    expectProblem(
      await api.call('POST', '/orders', {
        raw: '',
        headers: { 'content-type': 'application/json', 'idempotency-key': key() },
      }),
      400,
    );
    expectProblem(
      await api.call('POST', '/orders', { body: [orderBody()], headers: { 'idempotency-key': key() } }),
      400,
    );
    // 415 not JSON.
    expectProblem(
      await api.call('POST', '/orders', {
        raw: JSON.stringify(orderBody()),
        headers: { 'content-type': 'text/plain', 'idempotency-key': key() },
      }),
      415,
    );
    // 400 malformed JSON.
    expectProblem(
      await api.call('POST', '/orders', {
        raw: '{"customerId": ',
        headers: { 'content-type': 'application/json', 'idempotency-key': key() },
      }),
      400,
    );
    // 400 bad Idempotency-Key.
    expectProblem(
      await api.call('POST', '/orders', { body: orderBody(), headers: { 'idempotency-key': 'has space' } }),
      400,
    );
    // 401 without the function key, even for a valid body.
    const unauthorised = await api.call('POST', '/orders', {
      body: orderBody(),
      headers: { 'idempotency-key': key() },
      key: null,
    });
    assert.equal(unauthorised.status, 401);
    assert.equal((await api.call('GET', `/orders/${randomUUID()}`, { key: null })).status, 401);
    // A function key, right or wrong, is a client's credential: operator routes answer 403.
    expectProblem(await api.call('POST', `/orders/${randomUUID()}/cancel`, { key: 'wrong' }), 403);

    // GET: malformed id, unknown id.
    expectProblem(await api.call('GET', '/orders/not-a-uuid'), 400);
    expectProblem(await api.call('GET', `/orders/${randomUUID().toUpperCase()}`), 400);
    expectProblem(await api.call('GET', `/orders/${randomUUID()}`), 404);
    // Listing: a bad state is a 400.
    expectProblem(await api.operator('GET', '/orders?state=Nope'), 400);

    // Nothing was recorded for any of the refused submissions.
    for (const k of keys) {
      const orderId = orderIdFromIdempotencyKey(k);
      assert.equal(await store.load(orderId), null, `no order for ${k}`);
      assert.equal((await api.get(orderId)).status, 404);
    }
  });

  it('a poison message on the scheduler queue is dead-lettered on its first delivery through the host, with one alert', async () => {
    const orderId = randomUUID();
    const messageId = `poison-${orderId}`;
    const sender = bus.createSender('scheduler');
    await sender.sendMessages({
      messageId,
      correlationId: orderId,
      body: { type: 'process-order', orderId },
    });
    await sender.close();
    const dlq = bus.createReceiver(queues.poison, { subQueueType: 'deadLetter' });
    try {
      const dead = await waitFor('the poison message in the dead-letter queue of poison', async () => {
        const got = await dlq.receiveMessages(10, { maxWaitTimeInMs: 1000 });
        const mine = got.find((m) => m.messageId === `poison:scheduler:${messageId}`);
        for (const m of got) if (m !== mine) await dlq.abandonMessage(m);
        return mine;
      });
      assert.equal(dead.deadLetterReason, 'PoisonMessage');
      assert.equal(dead.applicationProperties?.poisonDeliveryCount, 1, 'on its first delivery');
      assert.equal(dead.correlationId, orderId);
      assert.equal(dead.body.orderId, orderId);
      await dlq.completeMessage(dead);
    } finally {
      await dlq.close();
    }
    const own = bus.createReceiver('scheduler', { subQueueType: 'deadLetter' });
    try {
      const there = await own.peekMessages(100);
      assert.ok(
        !there.some((m) => m.messageId === messageId),
        "not in the scheduler's own dead-letter queue",
      );
    } finally {
      await own.close();
    }
    const alert = await waitFor('poison alert', () => alerts.for(orderId)[0]);
    assert.equal(alert.subject, 'PoisonMessage');
    assert.match(alert.body.reason, /reason/);
    assert.equal(alerts.for(orderId).length, 1, 'one alert');
    assert.equal(await store.load(orderId), null, 'no phantom order');
  });
});
