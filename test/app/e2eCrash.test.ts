import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { randomPorts, startStack, type Stack } from '../../local/stack.js';
import { Api, terminal, waitFor } from './helpers.js';

/**
 * The functions host killed (SIGKILL) while orders are in flight, then started again: every
 * acknowledged order still ends Processed, with one effect per step at each service. Messages the
 * dead host held locked come back only after their lock expires (1 minute), so what finishes the
 * orders sooner is the Supervisor noticing the passed complete-by and retrying.
 */
describe('a crashed functions host', () => {
  let stack: Stack;
  let api: Api;

  before(async () => {
    stack = await startStack({
      ports: randomPorts,
      settings: {
        STEP_TIMEOUT_SECONDS: '3',
        SUPERVISOR_SCHEDULE: '*/1 * * * * *',
        FAILURE_SOFT_THRESHOLD: '3',
        FAILURE_HARD_THRESHOLD: '5',
        EXTENDED_BACKOFF_SECONDS: '2',
      },
    });
    api = new Api(stack);
  });

  after(async () => {
    await stack?.stop();
  });

  it('loses no order and doubles no effect when killed mid-flight and restarted', async () => {
    // The payment call is slow, so the kill finds orders at every step.
    const orderIds = await Promise.all(
      [0, 1, 2, 3].map((i) => api.place([`SKU-${i}`, 'FAULT:payment:slow:1500'])),
    );
    // Kill while a payment call is in flight: a step shows Running as soon as it is dispatched,
    // before the Agent has read the request, and a kill then interrupts nothing.
    await waitFor('a payment call in flight', async () =>
      stack.remote.payment
        .ledger()
        .requests.some((r) => r.status === null && orderIds.some((id) => r.idempotencyKey?.includes(id))),
    );
    await stack.killHost('SIGKILL');
    await new Promise((r) => setTimeout(r, 500));
    const host = await stack.startHost();
    assert.equal(host.baseUrl, stack.baseUrl, 'the restarted host serves the same URL');

    let retried = 0;
    for (const orderId of orderIds) {
      const view = await api.until(orderId, terminal, 90_000);
      if (view.failureCount > 0) retried += 1;
      assert.equal(view.processState, 'Processed', JSON.stringify(view));
      for (const service of ['inventory', 'payment', 'shipping'] as const) {
        const effects = stack.remote[service].ledger().effects.filter((e) => e.orderId === orderId);
        assert.equal(effects.length, 1, `${service}: one effect for ${orderId}`);
      }
    }
    // The kill must have interrupted work that was then done again: a call the services never
    // answered (the host died under it), a call repeated under the same Idempotency-Key (the
    // request redelivered after its lock expired, or the Supervisor's retry), or an order that
    // spent failure budget. Which of them happens depends on timing; one of them always does.
    const requests = (['inventory', 'payment', 'shipping'] as const).flatMap((service) =>
      stack.remote[service]
        .ledger()
        .requests.filter((r) => orderIds.some((id) => r.idempotencyKey?.includes(id))),
    );
    const cutOff = requests.filter((r) => r.status === null).length;
    const repeated = requests.filter((r) => r.attempt >= 2).length;
    assert.ok(
      cutOff + repeated + retried >= 1,
      `the kill interrupted no work (cut off ${cutOff}, repeated ${repeated}, retried ${retried})`,
    );
  });
});
