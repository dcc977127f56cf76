import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { handleSchedulerMessage } from '../../shared/scheduler/scheduler.js';
import { runSupervisor } from '../../shared/supervisor/supervisor.js';
import { randomUUID } from 'node:crypto';
import { HttpRequest } from '@azure/functions';
import Long from 'long';
import {
  decide,
  dispatchMessageId,
  orderIdFromIdempotencyKey,
  unreadRequestGraceMs,
} from '../../shared/domain/index.js';
import { cancelOrder, requestHash } from '../../shared/http/orderApi.js';
import { behindPlatformAuth, principalHeaders } from '../http/principal.js';
import { parseOrderRequest } from '../../shared/orders/orderRequest.js';
import { orderBody } from './helpers.js';
import { queues } from '../../shared/messaging/entities.js';
import {
  context,
  freshDeps,
  held,
  load,
  postOrder,
  processOrder,
  reply,
  startInfra,
  submitted,
  writeOnly,
  type Infra,
  type TestDeps,
} from './direct.js';

/** An operator handler as App Service would run it: platform authentication on, an operator signed in. */
function asOperator<A extends unknown[], R>(handler: (...args: A) => Promise<R>, ...args: A): Promise<R> {
  return behindPlatformAuth(() => handler(...args));
}

/**
 * The Scheduler's handler called directly, twice or concurrently, or after a simulated crash:
 * whatever the delivery pattern, one state change and one dispatch per (step, attempt).
 */
describe('Scheduler: duplicates, races, stale replies, crash points', () => {
  let infra: Infra;
  before(async () => {
    infra = await startInfra();
  });
  after(async () => {
    await infra?.stop();
  });

  const deliver = (deps: TestDeps, body: unknown, invocationId?: string) =>
    handleSchedulerMessage(deps, body, context('scheduler', invocationId));

  it('process-order delivered twice: one claim, one dispatch', async () => {
    const deps = await freshDeps(infra);
    const orderId = await submitted(deps);
    await deliver(deps, processOrder(orderId), 'first');
    const once = await load(deps, orderId);
    assert.equal(once.state.processState, 'Processing');
    assert.equal(once.state.lockedBy, 'first');
    assert.equal(once.state.steps[0].status, 'Running');
    assert.equal(once.state.steps[0].attempt, 1);

    deps.clock.advanceSeconds(1);
    await deliver(deps, processOrder(orderId), 'second');
    const twice = await load(deps, orderId);
    assert.deepEqual(twice.state, once.state, 'state unchanged');
    assert.deepEqual(twice.etags, once.etags, 'nothing written');

    const requests = await held(infra, queues.inventoryAgent, orderId);
    assert.equal(requests.length, 1);
    assert.equal(requests[0].messageId, dispatchMessageId(orderId, 'inventory', 1, 'do', 1));
    assert.equal(requests[0].body.completeBy, once.state.steps[0].completeBy!.toISOString());
  });

  it('a success reply delivered twice: one step completion, one next dispatch', async () => {
    const deps = await freshDeps(infra);
    const orderId = await submitted(deps);
    await deliver(deps, processOrder(orderId));
    await deliver(deps, reply(orderId, 'inventory', 1, 'succeeded'));
    const once = await load(deps, orderId);
    assert.equal(once.state.steps[0].status, 'Completed');
    assert.equal(once.state.steps[1].status, 'Running');

    deps.clock.advanceSeconds(1);
    await deliver(deps, reply(orderId, 'inventory', 1, 'succeeded'));
    const twice = await load(deps, orderId);
    assert.deepEqual(twice.state, once.state);
    assert.deepEqual(twice.etags, once.etags);
    assert.equal((await held(infra, queues.paymentAgent, orderId)).length, 1);
    assert.equal((await held(infra, queues.inventoryAgent, orderId)).length, 1);
  });

  it('a failure reply delivered twice: one compensation started, one undo dispatched', async () => {
    const deps = await freshDeps(infra);
    const orderId = await submitted(deps);
    await deliver(deps, processOrder(orderId));
    await deliver(deps, reply(orderId, 'inventory', 1, 'succeeded'));
    await deliver(deps, reply(orderId, 'payment', 1, 'failed'));
    const once = await load(deps, orderId);
    assert.equal(once.state.processState, 'Compensating');
    assert.deepEqual(
      once.state.steps.map((s) => s.status),
      ['Compensating', 'Failed', 'NotStarted'],
    );

    deps.clock.advanceSeconds(1);
    await deliver(deps, reply(orderId, 'payment', 1, 'failed'));
    const twice = await load(deps, orderId);
    assert.deepEqual(twice.state, once.state);
    assert.deepEqual(twice.etags, once.etags);
    const inventory = await held(infra, queues.inventoryAgent, orderId);
    assert.deepEqual(inventory.map((m) => m.subject).sort(), ['inventory:compensate', 'inventory:do']);
    assert.equal(
      (await held(infra, queues.paymentAgent, orderId)).length,
      1,
      'no compensation of a Failed step',
    );
  });

  it('a compensation reply delivered twice: Compensated once', async () => {
    const deps = await freshDeps(infra);
    const orderId = await submitted(deps);
    await deliver(deps, processOrder(orderId));
    await deliver(deps, reply(orderId, 'inventory', 1, 'succeeded'));
    await deliver(deps, reply(orderId, 'payment', 1, 'failed'));
    await deliver(deps, reply(orderId, 'inventory', 1, 'succeeded', 'compensate'));
    const once = await load(deps, orderId);
    assert.equal(once.state.processState, 'Compensated');

    deps.clock.advanceSeconds(1);
    await deliver(deps, reply(orderId, 'inventory', 1, 'succeeded', 'compensate'));
    const twice = await load(deps, orderId);
    assert.deepEqual(twice.state, once.state);
    assert.deepEqual(twice.etags, once.etags);
    assert.equal((await held(infra, queues.inventoryAgent, orderId)).length, 2, 'one do, one undo');
  });

  it('two Schedulers racing for one order: exactly one claim and one dispatch', async () => {
    const deps = await freshDeps(infra);
    const orderIds = await Promise.all([1, 2, 3].map(() => submitted(deps)));
    for (const orderId of orderIds) {
      await Promise.all([
        deliver(deps, processOrder(orderId), 'sched-a'),
        deliver(deps, processOrder(orderId), 'sched-b'),
      ]);
      const { state } = await load(deps, orderId);
      assert.equal(state.processState, 'Processing');
      assert.ok(['sched-a', 'sched-b'].includes(state.lockedBy ?? ''), String(state.lockedBy));
      assert.equal(state.steps[0].attempt, 1, 'one claim: one attempt');
      assert.equal((await held(infra, queues.inventoryAgent, orderId)).length, 1);
    }
  });

  it('a stale reply (attempt 1 after the Supervisor moved on to attempt 2) is ignored', async () => {
    const deps = await freshDeps(infra);
    const orderId = await submitted(deps);
    await deliver(deps, processOrder(orderId));
    deps.clock.advanceSeconds(61);
    const report = await runSupervisor(deps, context('supervisor'));
    assert.equal(report.retried, 1);
    await deliver(deps, processOrder(orderId, 'retry'), 'sched-2');
    const current = await load(deps, orderId);
    assert.equal(current.state.steps[0].attempt, 2);
    assert.equal(current.state.steps[0].status, 'Running');

    deps.clock.advanceSeconds(1);
    await deliver(deps, reply(orderId, 'inventory', 1, 'succeeded'));
    const after = await load(deps, orderId);
    assert.deepEqual(after.state, current.state, 'the stale success changed nothing');
    assert.deepEqual(after.etags, current.etags);
    assert.equal(
      (await held(infra, queues.paymentAgent, orderId)).length,
      0,
      'payment not started on a stale reply',
    );
    const inventory = await held(infra, queues.inventoryAgent, orderId);
    assert.deepEqual(inventory.map((m) => m.body.attempt).sort(), [1, 2]);

    // And a stale failure does not start compensation.
    await deliver(deps, reply(orderId, 'inventory', 1, 'failed'));
    assert.deepEqual((await load(deps, orderId)).state, current.state);

    // The current attempt's reply is applied.
    await deliver(deps, reply(orderId, 'inventory', 2, 'succeeded'));
    assert.equal((await load(deps, orderId)).state.steps[0].status, 'Completed');
  });

  it('crash after the claim was written but before its dispatch: the next delivery sends it', async () => {
    const deps = await freshDeps(infra);
    const orderId = await submitted(deps);
    const written = await writeOnly(deps, orderId, { type: 'Claim', by: 'crashed-invocation' });
    assert.equal((await held(infra, queues.inventoryAgent, orderId)).length, 0);

    deps.clock.advanceSeconds(2);
    await deliver(deps, processOrder(orderId), 'redelivery');
    const after = await load(deps, orderId);
    assert.deepEqual(after.state, written.state, 'resumed from the recorded state, not re-claimed');
    const requests = await held(infra, queues.inventoryAgent, orderId);
    assert.equal(requests.length, 1);
    assert.equal(requests[0].messageId, dispatchMessageId(orderId, 'inventory', 1, 'do', 1));
    assert.equal(requests[0].body.completeBy, written.state.steps[0].completeBy!.toISOString());
    // Its deadline is the recorded one, so the TTL shrank by the time lost in the crash (it ends
    // the unread grace after that complete-by).
    assert.ok(requests[0].timeToLive! <= 58_000 + unreadRequestGraceMs, String(requests[0].timeToLive));
  });

  it('crash after a step completion was written but before the next dispatch: the redelivered reply sends it', async () => {
    const deps = await freshDeps(infra);
    const orderId = await submitted(deps);
    await deliver(deps, processOrder(orderId));
    const written = await writeOnly(deps, orderId, {
      type: 'StepSucceeded',
      step: 'inventory',
      run: 1,
      attempt: 1,
    });
    assert.equal((await held(infra, queues.paymentAgent, orderId)).length, 0);

    await deliver(deps, reply(orderId, 'inventory', 1, 'succeeded'));
    assert.deepEqual((await load(deps, orderId)).state, written.state);
    const payment = await held(infra, queues.paymentAgent, orderId);
    assert.equal(payment.length, 1);
    assert.equal(payment[0].messageId, dispatchMessageId(orderId, 'payment', 1, 'do', 1));
  });

  it('a reply for an order that was never recorded is dropped without effect', async () => {
    const deps = await freshDeps(infra);
    const ghost = '00000000-0000-4000-8000-000000000001';
    await deliver(deps, reply(ghost, 'inventory', 1, 'succeeded'));
    await deliver(deps, processOrder(ghost));
    assert.equal(await deps.store.load(ghost), null, 'no phantom order');
    assert.equal((await held(infra, queues.inventoryAgent, ghost)).length, 0);
  });

  it('crash after a submission was written, before its process-order went out: the retried POST sends it', async () => {
    const deps = await freshDeps(infra);
    const key = `retry-${randomUUID()}`;
    const body = orderBody(['SKU-1']);
    const orderId = orderIdFromIdempotencyKey(key);
    // The first POST's write, as submitOrder makes it; its process died before sending.
    const parsed = parseOrderRequest(body);
    assert.ok(parsed.ok);
    const order = {
      orderId,
      ...parsed.value,
      requestHash: requestHash(parsed.value),
      createdAt: deps.clock.now(),
    };
    const d = decide(deps.workflows, null, { type: 'Submit', orderId }, deps.clock.now(), deps.policy);
    await deps.store.submit(order, d.state);
    assert.equal((await held(infra, queues.scheduler, orderId)).length, 0);

    const post = () => postOrder(deps, key, body);
    const res = await post();
    assert.equal(res.status, 202);
    assert.equal((res.jsonBody as { orderId: string }).orderId, orderId);
    await post();
    const notes = await held(infra, queues.scheduler, orderId);
    assert.equal(notes.length, 1, 'sent once; the second retry was absorbed');
    assert.equal(notes[0].body.type, 'process-order');
    await deliver(deps, notes[0].body);
    assert.equal((await load(deps, orderId)).state.processState, 'Processing');
  });

  it('cancel of a Pending order nobody claimed yet ends Compensated at once; its late process-order dispatches nothing', async () => {
    const deps = await freshDeps(infra);
    const orderId = await submitted(deps);
    const res = await asOperator(
      cancelOrder,
      deps,
      new HttpRequest({
        method: 'POST',
        headers: principalHeaders(),
        url: `http://127.0.0.1/api/orders/${orderId}/cancel`,
        params: { orderId },
      }),
      context('cancelOrder'),
    );
    assert.equal(res.status, 202);
    const cancelled = await load(deps, orderId);
    assert.equal(cancelled.state.processState, 'Compensated');
    assert.equal(cancelled.state.compensationReason, 'cancelled');
    await deliver(deps, processOrder(orderId));
    const after = await load(deps, orderId);
    assert.deepEqual(after.etags, cancelled.etags, 'not claimed');
    assert.equal(
      (await held(infra, queues.inventoryAgent, orderId)).length,
      0,
      'nothing to undo, nothing done',
    );
    // A second cancel is a 409 naming the state.
    const again = await asOperator(
      cancelOrder,
      deps,
      new HttpRequest({
        method: 'POST',
        headers: principalHeaders(),
        url: `http://127.0.0.1/api/orders/${orderId}/cancel`,
        params: { orderId },
      }),
      context('cancelOrder'),
    );
    assert.equal(again.status, 409);
  });

  it('cancel of an order already Compensating is a 409 naming the state, and changes and sends nothing', async () => {
    const deps = await freshDeps(infra);
    const orderId = await submitted(deps);
    await deliver(deps, processOrder(orderId));
    await deliver(deps, reply(orderId, 'inventory', 1, 'succeeded'));
    await deliver(deps, reply(orderId, 'payment', 1, 'failed'));
    const compensating = await load(deps, orderId);
    assert.equal(compensating.state.processState, 'Compensating');
    const inventoryBefore = (await held(infra, queues.inventoryAgent, orderId)).length;
    const schedulerBefore = (await held(infra, queues.scheduler, orderId)).length;

    deps.clock.advanceSeconds(1);
    const res = await asOperator(
      cancelOrder,
      deps,
      new HttpRequest({
        method: 'POST',
        headers: principalHeaders(),
        url: `http://127.0.0.1/api/orders/${orderId}/cancel?reason=too%20late`,
        params: { orderId },
        query: { reason: 'too late' },
      }),
      context('cancelOrder'),
    );
    assert.equal(res.status, 409);
    assert.match(
      String((res.headers as Record<string, string>)['Content-Type']),
      /application\/problem\+json/,
    );
    const problem = JSON.parse(String(res.body)) as { status: number; processState: string; detail: string };
    assert.equal(problem.status, 409);
    assert.equal(problem.processState, 'Compensating');
    assert.match(problem.detail, /already being compensated/);
    const after = await load(deps, orderId);
    assert.deepEqual(after.etags, compensating.etags, 'nothing written');
    assert.equal(after.state.compensationReason, 'step-failed', 'the reason is not overwritten');
    assert.equal((await held(infra, queues.inventoryAgent, orderId)).length, inventoryBefore);
    assert.equal((await held(infra, queues.scheduler, orderId)).length, schedulerBefore);
  });

  it('crash after a step completion: the redelivered reply also publishes its status event', async () => {
    const deps: TestDeps = { ...(await freshDeps(infra)), statusEvents: 'step' };
    const orderId = await submitted(deps);
    await deliver(deps, processOrder(orderId));
    await writeOnly(deps, orderId, { type: 'StepSucceeded', step: 'inventory', run: 1, attempt: 1 });
    await deliver(deps, reply(orderId, 'inventory', 1, 'succeeded'));
    const receiver = infra.client.createReceiver('order-status', 'all');
    try {
      const events = await receiver.peekMessages(1000, { fromSequenceNumber: Long.fromNumber(0) });
      const mine = events
        .filter((m) => m.correlationId === orderId)
        .map((m) => `${m.body.event}:${m.body.step ?? ''}`);
      assert.ok(mine.includes('step-completed:inventory'), mine.join(','));
    } finally {
      await receiver.close();
    }
  });
});
