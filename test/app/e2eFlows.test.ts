import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { ServiceBusClient } from '@azure/service-bus';
import { randomPorts, startStack, type Stack } from '../../local/stack.js';
import { Api, Collector, statusEvents, terminal, waitFor } from './helpers.js';

/**
 * End to end through the whole local stack (Azurite, the Service Bus emulator, the demo services,
 * the functions host as a child process): the order flows the pattern promises, several orders in
 * parallel on one stack. Faults come from fault SKUs in the order, so orders do not disturb each
 * other.
 */
describe('order flows through the stack', { concurrency: true }, () => {
  let stack: Stack;
  let api: Api;
  let bus: ServiceBusClient;
  let status: Collector;
  let alerts: Collector;
  /** The host's log lines: `[host] <time> [<Level>] <function> (<invocation>): <message>`. */
  const hostLines: string[] = [];

  before(async () => {
    stack = await startStack({
      ports: randomPorts,
      log: (line) => {
        if (line.startsWith('[host] ')) hostLines.push(line);
      },
      settings: {
        STEP_TIMEOUT_SECONDS: '3',
        SUPERVISOR_SCHEDULE: '*/1 * * * * *',
        FAILURE_SOFT_THRESHOLD: '1',
        FAILURE_HARD_THRESHOLD: '2',
        EXTENDED_BACKOFF_SECONDS: '2',
        // The happy path follows each step's event through the real host and settings.
        STATUS_EVENTS: 'step',
      },
    });
    api = new Api(stack);
    bus = new ServiceBusClient(stack.env.ServiceBusConnection);
    status = new Collector(bus, 'order-status', 'all');
    alerts = new Collector(bus, 'operator-alerts');
  });

  after(async () => {
    await status?.close();
    await alerts?.close();
    await bus?.close();
    await stack?.stop();
  });

  const effectsFor = (service: 'inventory' | 'payment' | 'shipping', orderId: string) =>
    stack.remote[service].ledger().effects.filter((e) => e.orderId === orderId);
  /** The app's structured lines (JSON messages) as the host wrote them, with level and function. */
  const appLogs = () =>
    hostLines.flatMap((line) => {
      const m = /^\[host\] \S+ \[(\w+)\] (\w+) \(([^)]*)\): (\{.*\})$/s.exec(line);
      if (!m) return [];
      const fields = JSON.parse(m[4]) as Record<string, unknown>;
      return [{ level: m[1], fn: m[2], invocationId: m[3], fields }];
    });
  const compensationsFor = (service: 'inventory' | 'payment' | 'shipping', orderId: string) =>
    stack.remote[service].ledger().compensations.filter((c) => c.orderId === orderId);

  it('happy path: three steps Completed, Processed, one effect per step, status events published', async () => {
    const orderId = await api.place(['SKU-1', 'SKU-2']);
    const view = await api.until(orderId, terminal);
    assert.equal(view.processState, 'Processed');
    assert.deepEqual(
      view.steps.map((s: { name: string; status: string }) => [s.name, s.status]),
      [
        ['inventory', 'Completed'],
        ['payment', 'Completed'],
        ['shipping', 'Completed'],
      ],
    );
    assert.equal(view.failureCount, 0);
    assert.equal(view.lockedBy, null);
    assert.equal(view.completeBy, null);
    for (const service of ['inventory', 'payment', 'shipping'] as const) {
      const effects = effectsFor(service, orderId);
      assert.equal(effects.length, 1, `${service}: one effect`);
      assert.equal(effects[0].idempotencyKey, `${orderId}:${service}`);
      assert.equal(compensationsFor(service, orderId).length, 0, `${service}: nothing undone`);
    }
    const events = await waitFor('status events up to processed', () => {
      const e = statusEvents(status, orderId);
      return e.includes('processed') ? e : undefined;
    });
    assert.deepEqual(
      [...events].sort(),
      ['processed', 'received', 'step-completed', 'step-completed', 'step-completed'].sort(),
    );
    const steps = status
      .for(orderId)
      .filter((m) => m.body.event === 'step-completed')
      .map((m) => m.body.step);
    assert.deepEqual(steps, ['inventory', 'payment', 'shipping']);

    // Structured logs through the host: the Scheduler's and the Agents' lines about this order
    // name it, and the Agents' lines (one step attempt per invocation) carry step and attempt.
    const mine = appLogs().filter((l) => l.fields.orderId === orderId);
    const fns = new Set(mine.map((l) => l.fn));
    for (const fn of ['submitOrder', 'scheduler', 'inventoryAgent', 'paymentAgent', 'shippingAgent'])
      assert.ok(fns.has(fn), `${fn} logged about ${orderId}: ${[...fns].join(',')}`);
    for (const l of mine.filter((x) => x.fn.endsWith('Agent'))) {
      assert.equal(l.fields.step, l.fn.replace(/Agent$/, ''), JSON.stringify(l));
      assert.equal(l.fields.attempt, 1, JSON.stringify(l));
    }
    // A `waiting` reply (issue 26) only moves complete-by out: it comes when a concurrent test's
    // 503s at the same service pause its calls on every instance, by design.
    const replies = mine.filter(
      (l) => l.fn === 'scheduler' && l.fields.msg === 'reply applied' && l.fields.outcome !== 'waiting',
    );
    assert.deepEqual(
      replies.map((l) => [l.fields.step, l.fields.attempt]),
      [
        ['inventory', 1],
        ['payment', 1],
        ['shipping', 1],
      ],
    );
    assert.ok(!mine.some((l) => l.level === 'Error'), 'a happy order logs no error');
    // Each Scheduler or Agent invocation handles one message of one order: none of their app
    // lines, for any order on this stack so far, lacks the order id.
    const orderless = appLogs().filter(
      (l) => (l.fn === 'scheduler' || l.fn.endsWith('Agent')) && typeof l.fields.orderId !== 'string',
    );
    assert.deepEqual(orderless, []);
  });

  it('transient remote errors are absorbed by the Agent: Processed, one charge', async () => {
    const orderId = await api.place(['SKU-1', 'FAULT:payment:transient:2']);
    const view = await api.until(orderId, terminal);
    assert.equal(view.processState, 'Processed');
    assert.equal(view.failureCount, 0);
    assert.equal(effectsFor('payment', orderId).length, 1);
    const attempts = stack.remote.payment
      .ledger()
      .requests.filter((r) => r.idempotencyKey === `${orderId}:payment` && r.operation === 'charge');
    assert.equal(attempts.length, 3, 'two 503s, then the charge');
    assert.deepEqual(
      attempts.map((r) => r.status),
      [503, 503, 200],
    );
  });

  it('a permanent error at step 2 compensates step 1 once and ends Compensated; no shipment', async () => {
    const orderId = await api.place(['SKU-1', 'FAULT:payment:permanent']);
    const view = await api.until(orderId, terminal);
    assert.equal(view.processState, 'Compensated');
    assert.equal(view.compensationReason, 'step-failed');
    assert.deepEqual(
      view.steps.map((s: { status: string }) => s.status),
      ['Compensated', 'Failed', 'NotStarted'],
    );
    assert.equal(effectsFor('inventory', orderId).length, 1);
    const releases = compensationsFor('inventory', orderId);
    assert.equal(releases.length, 1);
    assert.equal(releases[0].operation, 'release');
    assert.equal(releases[0].tombstone, false);
    assert.equal(effectsFor('payment', orderId).length, 0, 'a refused charge has no effect');
    assert.equal(compensationsFor('payment', orderId).length, 0, 'a Failed step is not undone');
    assert.equal(effectsFor('shipping', orderId).length, 0);
    assert.equal(
      stack.remote.shipping.ledger().requests.filter((r) => r.idempotencyKey?.startsWith(orderId)).length,
      0,
    );
    await waitFor('compensated status event', () => statusEvents(status, orderId).includes('compensated'));
    const events = statusEvents(status, orderId);
    assert.ok(events.includes('failed') && events.includes('compensating'), events.join(','));
  });

  it('an Agent hanging past complete-by is recovered by the Supervisor; the order completes', async () => {
    const orderId = await api.place(['SKU-1', 'FAULT:shipping:hang:1']);
    const view = await api.until(orderId, terminal);
    assert.equal(view.processState, 'Processed', JSON.stringify(view));
    assert.equal(view.failureCount, 1);
    const shipping = view.steps.find((s: { name: string }) => s.name === 'shipping');
    assert.equal(shipping?.status, 'Completed');
    assert.equal(shipping?.attempt, 2);
    assert.equal(effectsFor('shipping', orderId).length, 1, 'one shipment');
    assert.equal(effectsFor('payment', orderId).length, 1, 'one charge');
    assert.equal(effectsFor('inventory', orderId).length, 1);
  });

  it('exhausted retries end in Error with an operator alert and the completed steps undone once', async () => {
    const orderId = await api.place(['SKU-1', 'FAULT:shipping:hang:99']);
    const view = await api.until(orderId, terminal);
    assert.equal(view.processState, 'Error', JSON.stringify(view));
    assert.equal(view.failureCount, 2);
    assert.equal(view.error?.code, 'GaveUp');
    assert.equal(view.compensationReason, 'gave-up');
    assert.deepEqual(
      view.steps.map((s: { status: string }) => s.status),
      ['Compensated', 'Compensated', 'Compensated'],
    );
    const refunds = compensationsFor('payment', orderId);
    const releases = compensationsFor('inventory', orderId);
    assert.equal(refunds.length, 1);
    assert.equal(refunds[0].operation, 'refund');
    assert.equal(refunds[0].tombstone, false);
    assert.equal(releases.length, 1);
    assert.equal(releases[0].tombstone, false);
    // The in-doubt shipping step is undone too; it never happened, so that undo is a tombstone.
    assert.equal(effectsFor('shipping', orderId).length, 0);
    assert.ok(compensationsFor('shipping', orderId).every((c) => c.tombstone));

    const alert = await waitFor('operator alert', () => alerts.for(orderId)[0]);
    assert.equal(alert.body.type, 'operator-alert');
    assert.equal(alert.body.orderId, orderId);
    assert.match(alert.body.reason, /GaveUp/);
    assert.equal(alert.body.failureCount, 2);
    await waitFor('error status event', () => statusEvents(status, orderId).includes('error'));
    assert.equal(alerts.for(orderId).length, 1, 'one alert');
    // The alert's second channel: an error-level log line naming the order, from the Supervisor
    // that gave up.
    const errorLines = appLogs().filter((l) => l.level === 'Error' && l.fields.orderId === orderId);
    const alertLine = errorLines.find((l) => l.fn === 'supervisor' && l.fields.msg === 'operator alert');
    assert.ok(alertLine, JSON.stringify(errorLines));
    assert.equal(alertLine.fields.code, 'GaveUp');
  });

  it('the same Idempotency-Key and body is one order; a different body with it is a 409', async () => {
    const key = `idem-${Date.now()}-${Math.random()}`;
    const body = {
      customerId: 'c-idem',
      items: [{ sku: 'SKU-9', quantity: 2, unitPrice: 3.5 }],
      shippingAddress: { name: 'Ada', line1: 'x', city: 'y', postalCode: '1', country: 'DE' },
    };
    const [a, b] = await Promise.all([api.submit(body, key), api.submit(body, key)]);
    assert.equal(a.status, 202);
    assert.equal(b.status, 202);
    assert.equal(a.body.orderId, b.body.orderId);
    // Each 202 says where to poll and when: Location is the body's statusUrl, Retry-After whole
    // seconds above zero; the URL answers with the order.
    for (const res of [a, b]) {
      assert.equal(res.headers.get('location'), res.body.statusUrl);
      assert.equal(res.body.statusUrl, `${stack.baseUrl}/orders/${a.body.orderId}`);
      assert.match(res.headers.get('retry-after') ?? '', /^[1-9][0-9]*$/);
    }
    const polled = await fetch(a.headers.get('location')!, {
      headers: { 'x-functions-key': stack.functionKey },
    });
    assert.equal(polled.status, 200);
    assert.equal(((await polled.json()) as { orderId: string }).orderId, a.body.orderId);
    // Key order in the JSON does not matter: the same order.
    const reordered = {
      shippingAddress: body.shippingAddress,
      items: body.items,
      customerId: body.customerId,
    };
    const c = await api.submit(reordered, key);
    assert.equal(c.status, 202);
    assert.equal(c.body.orderId, a.body.orderId);

    const conflict = await api.submit({ ...body, customerId: 'someone-else' }, key);
    assert.equal(conflict.status, 409);
    assert.match(conflict.contentType, /application\/problem\+json/);
    assert.equal(conflict.body.orderId, undefined, 'a conflict names no order');

    const orderId = a.body.orderId!;
    const view = await api.until(orderId, terminal);
    assert.equal(view.processState, 'Processed');
    assert.equal(view.customerId, 'c-idem', 'the first body stands');
    assert.equal(effectsFor('payment', orderId).length, 1, 'one order, one charge');
  });

  it('a lost reply (effect done, answer dropped) and throttling are absorbed: one charge, one reservation', async () => {
    const orderId = await api.place(['SKU-1', 'FAULT:payment:lost-reply:1', 'FAULT:inventory:throttle:2']);
    const view = await api.until(orderId, terminal);
    assert.equal(view.processState, 'Processed', JSON.stringify(view));
    const charges = effectsFor('payment', orderId);
    assert.equal(charges.length, 1);
    assert.ok(charges[0].duplicatesAbsorbed >= 1, 'the retry was answered from the record');
    assert.equal(effectsFor('inventory', orderId).length, 1);
  });

  it('a permanent error at step 3 undoes steps 2 and 1 in reverse order, each once, through transient undo errors', async () => {
    const orderId = await api.place([
      'SKU-1',
      'FAULT:shipping:permanent',
      'FAULT:payment:compensation-transient:2',
    ]);
    const view = await api.until(orderId, terminal);
    assert.equal(view.processState, 'Compensated', JSON.stringify(view));
    assert.deepEqual(
      view.steps.map((s) => s.status),
      ['Compensated', 'Compensated', 'Failed'],
    );
    const refunds = compensationsFor('payment', orderId);
    const releases = compensationsFor('inventory', orderId);
    assert.equal(refunds.length, 1);
    assert.equal(releases.length, 1);
    assert.ok(
      Date.parse(refunds[0].compensatedAt) <= Date.parse(releases[0].compensatedAt),
      'refund before release',
    );
    assert.equal(effectsFor('shipping', orderId).length, 0);
  });

  it('the operator list pages through Processed orders with its next link', async () => {
    const ids = await Promise.all([1, 2, 3].map(() => api.place(['SKU-L'])));
    await Promise.all(ids.map((id) => api.until(id, terminal)));
    const seen = new Set<string>();
    let path: string | undefined = '/orders?state=processed&pageSize=2';
    for (let page = 0; path && page < 50; page++) {
      const res = await api.operator('GET', path);
      assert.equal(res.status, 200, JSON.stringify(res.body));
      assert.equal(res.body.state, 'Processed');
      const orders = res.body.orders as Array<{ orderId: string; processState: string }>;
      assert.ok(orders.length <= 2);
      for (const o of orders) {
        assert.equal(o.processState, 'Processed');
        assert.ok(!seen.has(o.orderId), 'no order twice');
        seen.add(o.orderId);
      }
      path = typeof res.body.next === 'string' ? res.body.next.replace(/^\/api/, '') : undefined;
    }
    for (const id of ids) assert.ok(seen.has(id), `${id} listed`);
    const bad = await api.operator('GET', '/orders?state=Processed&pageSize=0');
    assert.equal(bad.status, 400);
  });

  it('resubmit after a refused undo does not charge twice (the step reruns under its run-1 key)', async () => {
    // Shipping refuses the shipment (permanent), so the charge must be undone; the refund is
    // refused too: Error (CompensationFailed), the run-1 charge standing. The operator resubmits.
    const orderId = await api.place([
      'SKU-1',
      'FAULT:payment:compensation-fails',
      'FAULT:shipping:permanent',
    ]);
    const run1 = await api.until(orderId, terminal);
    assert.equal(run1.processState, 'Error', JSON.stringify(run1));
    assert.equal(run1.error?.code, 'CompensationFailed');
    assert.deepEqual(
      run1.steps.map((s) => s.status),
      ['Completed', 'CompensationFailed', 'Failed'],
    );
    // The refusal's status is said once: "422: Cannot compensate: …", never "422 422: …".
    for (const text of [run1.steps[1]!.lastError, run1.error?.detail]) {
      assert.match(text ?? '', /\b422: Cannot compensate/, String(text));
      assert.equal((text ?? '').match(/422/g)?.length, 1, String(text));
    }
    assert.equal(effectsFor('payment', orderId).length, 1);
    const resubmit = await api.operator('POST', `/orders/${orderId}/resubmit`);
    assert.equal(resubmit.status, 202);
    const recorded = await waitFor('the resubmission status event', () =>
      status
        .for(orderId)
        .map((m) => (m.body as { detail?: string }).detail)
        .find((d) => d?.startsWith('resubmitted by')),
    );
    assert.equal(recorded, 'resubmitted by local-operator', 'the action names the signed-in operator');
    await waitFor('run 2 to finish', async () => {
      const v = (await api.get(orderId)).body;
      return v.run === 2 && terminal.includes(v.processState ?? '');
    });
    assert.deepEqual(
      effectsFor('payment', orderId).map((e) => e.idempotencyKey),
      [`${orderId}:payment`],
      'the charge whose refund was refused still stands; it must not be taken again under a new key',
    );
  });
});
