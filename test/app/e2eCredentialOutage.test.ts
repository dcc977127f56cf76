import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { ServiceBusClient } from '@azure/service-bus';
import { randomPorts, startStack, type Stack } from '../../local/stack.js';
import { Api, Collector, waitFor } from './helpers.js';

/**
 * A revoked credential through the whole local stack: the payment service answers 401 to every
 * call until its key is "fixed". No order may be compensated or spend its failure budget; the
 * operator gets one alert naming the service, the status and the detail; once the service
 * answers again every order finishes.
 */
describe('a credential outage at one service', () => {
  let stack: Stack;
  let api: Api;
  let bus: ServiceBusClient;
  let alerts: Collector;

  before(async () => {
    stack = await startStack({
      ports: randomPorts,
      settings: {
        STEP_TIMEOUT_SECONDS: '3',
        SUPERVISOR_SCHEDULE: '*/1 * * * * *',
        FAILURE_SOFT_THRESHOLD: '1',
        FAILURE_HARD_THRESHOLD: '2',
        EXTENDED_BACKOFF_SECONDS: '1',
        SERVICE_OUTAGE_ALERT_THRESHOLD: '3',
      },
    });
    api = new Api(stack);
    bus = new ServiceBusClient(stack.env.ServiceBusConnection);
    alerts = new Collector(bus, 'operator-alerts');
  });
  after(async () => {
    await alerts?.close();
    await bus?.close();
    await stack?.stop();
  });

  it('stalls the orders instead of compensating them, alerts once, and finishes them after recovery', async () => {
    stack.remote.payment.setFaults({ answerStatus: 401 });
    const orders = await Promise.all([api.place(['SKU-1']), api.place(['SKU-2']), api.place(['SKU-3'])]);
    // With a hard threshold of 2, today's rules would have given these up long before this alert.
    const outage = await waitFor('the outage alert', () =>
      alerts.messages.find((m) => (m.body as { service?: string }).service === 'payment'),
    );
    const ledger = () => stack.remote.payment.ledger();
    await waitFor(
      'more 401s than the failure budget allows',
      () => (ledger().counts.faultsInjected['status-401'] ?? 0) > 6,
    );
    for (const orderId of orders) {
      const view = (await api.get(orderId)).body;
      assert.ok(['Pending', 'Processing'].includes(view.processState ?? ''), `${orderId} still in flight`);
      assert.equal(view.failureCount, 0, 'no failure budget spent on a 401');
    }
    stack.remote.payment.setFaults({});
    for (const orderId of orders) {
      const done = await api.until(orderId, ['Processed', 'Compensated', 'Error']);
      assert.equal(done.processState, 'Processed');
    }
    assert.equal(ledger().counts.compensations + ledger().counts.tombstones, 0, 'nothing undone at payment');
    assert.equal(stack.remote.inventory.ledger().counts.compensations, 0, 'nothing undone at inventory');
    const body = outage.body as { status?: number; reason: string; orderId: string };
    assert.equal(body.status, 401);
    assert.equal(body.orderId, 'service:payment');
    assert.match(body.reason, /payment/);
    const serviceAlerts = alerts.messages.filter(
      (m) => (m.body as { service?: string }).service !== undefined,
    );
    assert.equal(serviceAlerts.length, 1, 'one alert for the outage');
    assert.equal(alerts.messages.length, 1, 'no order alert');
  });
});
